//! The data path of one transfer, and the one place it is metered.
//!
//! ```text
//!  sender                                            receiver
//!  BlockSource ─> [SendStaging] ─> framer ─> DataConn ═══> DataConn ─> framer ─> [ReceiveStaging] ─> BlockSink
//!  endpoint.rs     staging.rs     stream.rs   transport/    transport/  stream.rs    staging.rs        endpoint.rs
//!                                 mode_e.rs                             mode_e.rs
//! ```
//!
//! * The **source** and **sink** ([`BlockSource`](crate::endpoint::BlockSource),
//!   [`BlockSink`](crate::endpoint::BlockSink)) are the disk side: file
//!   ranges, no sockets.
//! * The optional **staging ring** (`staging.rs`) decouples disk and
//!   network with reader or writer threads; [`TransferControl::staging`]
//!   turns it on.
//! * The **framer** is stream mode (RFC 959 §3.4.1, `stream.rs`: the bytes,
//!   then close) or extended block mode (GFD.20, `mode_e.rs`: 17-byte
//!   headers over any number of connections; the headers are parsed by
//!   `ferry_proto::mode_e::BlockReader`).
//! * The **transport** (`transport/`) moves a block — a header and a
//!   buffer or a file range — and never learns which framer sent it.
//!
//! How payload bytes cross from source to transport and from transport to
//! sink (kernel-side or through a buffer) is the caller's explicit choice,
//! [`DataPath`]; no library reads it from the environment (`ferry` maps
//! `FERRY_DATA_PATH` onto it at the edge).
//!
//! Every framer loop meters through a [`Meter`]: it checks for an abort
//! before each step, applies the rate limit, and counts progress — here,
//! not in each loop. A sender is paced *before* a step leaves (the limit
//! bounds what enters the network); a receiver *after* a step arrived (it
//! cannot know a step's size before reading it, and TCP's window then
//! slows the sender down to the limit).

use crate::rate::RateLimit;
use crate::staging::StagingConfig;
use crate::stream::{AbortSignal, CopyError};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How payload bytes cross between sockets and files. Chosen by the
/// caller and passed in [`TransferControl`]; the library never reads it
/// from the environment (`ferry` maps `FERRY_DATA_PATH` onto it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DataPath {
    /// Kernel-side moves where the endpoint and the transport allow
    /// (`sendfile`, discard with `MSG_TRUNC`), buffers otherwise.
    #[default]
    ZeroCopy,
    /// Always through a user-space buffer (`pread` + `writev`, `read` +
    /// `pwrite`): what most servers do; kept to measure against.
    Buffered,
}

impl DataPath {
    /// `buffered` or `zero-copy` (what `FERRY_DATA_PATH` holds); anything
    /// else is the default, zero-copy.
    pub fn from_name(name: Option<&str>) -> Self {
        match name {
            Some("buffered") => DataPath::Buffered,
            _ => DataPath::ZeroCopy,
        }
    }
}

/// What every stream of one transfer shares.
#[derive(Debug, Clone)]
pub struct TransferControl {
    pub progress: Arc<AtomicU64>,
    pub abort: Arc<AbortSignal>,
    pub rate: Option<Arc<RateLimit>>,
    pub path: DataPath,
    /// Staged mode (a ring of buffers with disk threads) when set;
    /// synchronous mode otherwise.
    pub staging: Option<StagingConfig>,
}

impl TransferControl {
    pub fn new() -> Self {
        Self::shared(Arc::new(AtomicU64::new(0)), None)
    }

    /// A control for one transfer that counts into `progress` (shared with
    /// a progress display or a whole copy) under an optional rate limit.
    pub fn shared(progress: Arc<AtomicU64>, rate: Option<Arc<RateLimit>>) -> Self {
        Self { progress, abort: Arc::new(AbortSignal::new()), rate, path: DataPath::ZeroCopy, staging: None }
    }

    /// The meter every loop of this transfer goes through.
    #[inline]
    pub fn meter(&self) -> Meter<'_> {
        Meter::new(&self.progress, &self.abort, self.rate.as_deref())
    }

    /// Waits until `n` more bytes fit under the rate limit (if any).
    #[inline]
    pub fn pace(&self, n: usize) {
        self.meter().pace(n);
    }

    /// Counts `n` payload bytes moved: what progress bars, 112 markers and
    /// the transfer log read.
    #[inline]
    pub fn moved(&self, n: u64) {
        self.meter().moved(n);
    }
}

impl Default for TransferControl {
    fn default() -> Self {
        Self::new()
    }
}

/// Rate limit, progress and abort for one loop of one transfer: the only
/// place the framers meet them. Cheap to copy; borrows what the transfer
/// shares.
#[derive(Debug, Clone, Copy)]
pub struct Meter<'a> {
    /// `None`: bytes that are not a transfer's payload (a listing).
    progress: Option<&'a AtomicU64>,
    abort: &'a AbortSignal,
    rate: Option<&'a RateLimit>,
}

/// Largest step a loop moves between two abort checks and progress
/// updates.
pub const STEP: u64 = 4 << 20;
/// Largest step under a rate limit, so that the pacing is smooth.
pub const PACED_STEP: u64 = 256 << 10;

impl<'a> Meter<'a> {
    pub fn new(progress: &'a AtomicU64, abort: &'a AbortSignal, rate: Option<&'a RateLimit>) -> Self {
        Self { progress: Some(progress), abort, rate }
    }

    /// A meter that only checks for an abort: for data that is not
    /// counted as a transfer's progress (a listing).
    pub fn uncounted(abort: &'a AbortSignal) -> Self {
        Self { progress: None, abort, rate: None }
    }

    /// `Err(Aborted)` once the transfer was aborted (ABOR, a failed
    /// stream, the session ending): checked before every step.
    #[inline]
    pub fn check(&self) -> Result<(), CopyError> {
        if self.abort.is_aborted() {
            Err(CopyError::Aborted)
        } else {
            Ok(())
        }
    }

    /// A network error, or `Aborted` when an abort caused it (an abort
    /// shuts the sockets down, which fails the call blocked on them).
    #[inline]
    pub fn net(&self, e: io::Error) -> CopyError {
        if self.abort.is_aborted() {
            CopyError::Aborted
        } else {
            CopyError::Network(e)
        }
    }

    /// How much of `remaining` a loop moves in its next step.
    #[inline]
    pub fn step(&self, remaining: u64) -> u64 {
        remaining.min(if self.rate.is_some() { PACED_STEP } else { STEP })
    }

    /// Waits until `n` more bytes fit under the rate limit (if any).
    #[inline]
    pub fn pace(&self, n: usize) {
        if let Some(rate) = self.rate {
            rate.acquire(n);
        }
    }

    /// Counts `n` payload bytes moved.
    #[inline]
    pub fn moved(&self, n: u64) {
        if let Some(p) = self.progress {
            p.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Before a sender's step of `n` bytes: the abort check, then the rate
    /// limit.
    #[inline]
    pub fn before_send(&self, n: usize) -> Result<(), CopyError> {
        self.check()?;
        self.pace(n);
        Ok(())
    }

    /// After a receiver's step of `n` bytes arrived: counted, then paced.
    #[inline]
    pub fn received(&self, n: usize) {
        self.moved(n as u64);
        self.pace(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meter_counts_checks_and_sizes_steps() {
        let progress = AtomicU64::new(0);
        let abort = AbortSignal::new();
        let m = Meter::new(&progress, &abort, None);
        assert_eq!(m.step(10 * STEP), STEP);
        m.before_send(10).unwrap();
        m.moved(10);
        m.received(5);
        assert_eq!(progress.load(Ordering::Relaxed), 15);
        let rate = RateLimit::new(u64::MAX);
        assert_eq!(Meter::new(&progress, &abort, Some(&rate)).step(10 * STEP), PACED_STEP);
        abort.abort();
        assert!(matches!(m.check(), Err(CopyError::Aborted)));
        assert!(matches!(m.net(io::Error::other("x")), CopyError::Aborted));
    }
}
