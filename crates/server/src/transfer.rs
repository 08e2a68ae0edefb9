//! One data transfer, run as a task beside the control connection.
//!
//! The task prepares its source or sink (opening the file, or building a
//! listing), tells the control loop when to send the preliminary replies,
//! opens or reuses the data connections, and hands the copying to blocking
//! threads (`ferry_io::stream` for stream mode, `ferry_io::mode_e` for
//! extended block mode). The control loop keeps reading commands meanwhile,
//! answers ABOR and STAT, and sends restart and performance markers from the
//! shared counters.
//!
//! The session's data channels — the passive listener and, in MODE E, the
//! connections left open by the last transfer — travel into the task and
//! come back with its result, so the next transfer can reuse them.
//!
//! An upload holds a claim on its name from the moment its partial file
//! is opened until its last write has returned (`ferry_io::partial`). While
//! it runs it checkpoints what is on disk (synced, then recorded) on a
//! clock that starts at one second and doubles up to the marker interval;
//! the 111 restart markers report only checkpointed ranges. It ends either
//! committed (synced and renamed: the 226 means every byte is on disk) or
//! abandoned (the reservation returned, what arrived recorded for a
//! resume). Which of the two is decided once ([`Verdict`]): ABOR or the
//! client leaving can stop a transfer only before it starts to commit, and
//! a committed upload is never logged or answered as failed.

use crate::control::HOLD_125_MAX_SIZE;
use crate::data;
use crate::server::ServerContext;
use ferry_io::endpoint::{NullSink, ZeroSource};
use ferry_io::mode_e::{self, BlockSink, BlockSource, ReceiveSpec, ReceiveState, SendPlan, TransferControl};
use ferry_io::rate::RateLimit;
use ferry_io::root::{BatchDurability, Listing, Root, StoreDirs, StoreMode, Upload, UploadInfo};
use ferry_io::stream::{self, AbortSignal, CopyError, ReceiveTo};
use ferry_io::tls::DataProtection;
use ferry_io::transport::{ChannelOptions, Connection, DataConn, DataListener};
use ferry_proto::batch::StreamLayout;
use ferry_proto::command::{RestArg, TransferMode, TransferType};
use ferry_proto::session::{
    DataEndpoint, FsError, ListFormat, PassiveKind, TransferError, TransferKind, TransferOutcome, TransferRequest,
};
use ferry_proto::{RangeSet, VirtualPath};
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit};

/// How a transfer ends, decided once: committed, or stopped by ABOR or the
/// client leaving — whichever comes first.
#[derive(Debug, Default)]
pub(crate) struct Verdict(AtomicU8);

const OPEN: u8 = 0;
const COMMITTING: u8 = 1;
const STOPPED: u8 = 2;

impl Verdict {
    /// The transfer may take its final form: false if it was stopped.
    pub(crate) fn commit(&self) -> bool {
        self.0.compare_exchange(OPEN, COMMITTING, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    }

    /// Stops the transfer unless it has begun to commit; true if stopped.
    fn stop(&self) -> bool {
        match self.0.compare_exchange(OPEN, STOPPED, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => true,
            Err(state) => state == STOPPED,
        }
    }
}

/// The first checkpoint of an upload comes after this; the interval then
/// doubles up to the marker interval, so a client killed early still finds
/// most of what it sent recorded.
const FIRST_CHECKPOINT: Duration = Duration::from_secs(1);

/// In stream mode without ALLO, how long after the data connection's end
/// the server still watches for a control connection that is closing too
/// (a killed client's sockets close within microseconds of each other).
/// The watch runs while the file's writeback starts (the commit syncs it)
/// and ends at once when the control connection closes; a client
/// that finished waits at most this long for its 226. It was a fixed
/// 5 ms timer (6-8 ms with the runtime's timer granularity), which was
/// most of the per-file time of plain FTP clients uploading small files
/// one after another (lftp, rclone, ftplib: about 8 ms per file on
/// loopback); it is now a `ppoll` that a closing control connection ends
/// at once. 1 ms was too short: the exiting client releases its data
/// socket and its control socket one after the other, and on a loaded
/// machine it can be preempted in between for milliseconds — CI (load
/// ~13) saw two of eight killed ftplib uploads committed, truncated,
/// under their final names (`trial_killed_paced_stream_uploads`). 5 ms
/// is what the fixed timer gave and CI never failed with it; a client
/// that sends `ALLO` (Ferry's does) never waits here.
const STREAM_COMMIT_GRACE: Duration = Duration::from_millis(5);

/// A session's data channels between transfers.
#[derive(Debug, Default)]
pub(crate) struct DataChannels {
    /// The session's data-channel generation these belong to.
    pub generation: u64,
    /// The passive listener (PASV/EPSV/SPAS, or opened by delayed passive).
    pub listener: Option<Arc<dyn DataListener>>,
    /// MODE E connections kept open by the last transfer (with the TLS
    /// sessions they carry under PROT P).
    pub cached: Vec<DataConn>,
    /// The profiler's hold on data connections (see [`TransferContext`]),
    /// dropped with them.
    pub probes: Vec<ferry_profile::StreamHandle>,
    /// The cached connections' places in the server's data-connection
    /// budget (`max_data_connections`).
    pub permits: Vec<OwnedSemaphorePermit>,
}

impl DataChannels {
    /// Closes the cached connections.
    fn drop_cached(&mut self) {
        self.cached.clear();
        self.probes.clear();
        self.permits.clear();
    }
}

/// What the transfer task reports to the control loop.
#[derive(Debug)]
pub(crate) enum TransferEvent {
    /// A delayed-passive listener is open: announce it (127/129).
    DelayedPassive {
        kind: PassiveKind,
        addr: SocketAddr,
    },
    /// Source or sink is ready: send 150, or 125 when cached connections
    /// carry the transfer.
    Started {
        size: Option<u64>,
        reused: bool,
    },
    /// An upload checkpointed: the restart marker may report it.
    Checkpointed,
    Finished {
        outcome: TransferOutcome,
        channels: DataChannels,
    },
    /// Send this reply now (a striped transfer's per-stripe markers).
    Reply(ferry_proto::Reply),
}

/// The control loop's handle on a running transfer.
#[derive(Debug)]
pub(crate) struct ActiveTransfer {
    pub events: mpsc::Receiver<TransferEvent>,
    pub request: TransferRequest,
    pub started: Instant,
    pub progress: Arc<AtomicU64>,
    /// Ranges an upload has checkpointed (header coordinates): the source
    /// of 111 markers, which never report bytes a crash could lose.
    pub durable: Arc<Mutex<RangeSet>>,
    /// Ranges already reported in 111 markers.
    pub reported: RangeSet,
    abort: Arc<AbortSignal>,
    abort_notify: Arc<Notify>,
    /// Set only by [`abort`](Self::abort): the engine also trips `abort`
    /// to stop sibling streams when one fails, which is not an ABOR.
    stopped: Arc<AtomicBool>,
    verdict: Arc<Verdict>,
    /// The process's UDT totals when it started: the finished line reports
    /// the difference (`ferry_io::udt::totals`).
    pub udt_before: ferry_io::udt::UdtTotals,
    /// Bytes of the staging ring the transfer was given (0: none), for the
    /// finished line: a streamed line decides only once its files are
    /// opened ([`StreamUpload::wants_ring`]).
    pub staging: Arc<AtomicUsize>,
}

impl ActiveTransfer {
    /// ABOR, or the client has gone: stops the transfer unless it has
    /// begun to commit (then it completes, and is reported complete).
    pub fn abort(&self) {
        if self.verdict.stop() {
            self.stopped.store(true, Ordering::SeqCst);
            self.abort.abort();
            self.abort_notify.notify_one();
        }
    }

    /// Ranges checkpointed since the last call: the next `111` marker.
    pub fn new_ranges(&mut self) -> RangeSet {
        let now = self.durable.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let new = now.difference(&self.reported);
        self.reported = now;
        new
    }
}

/// What a transfer needs from its session.
#[derive(Debug)]
pub(crate) struct TransferContext {
    pub server: Arc<ServerContext>,
    pub root: Arc<Root>,
    pub channels: DataChannels,
    pub peer_ip: IpAddr,
    pub local_ip: IpAddr,
    /// Set by the control connection's reader when the client hangs up.
    pub control_closed: Arc<AtomicBool>,
    /// The control connection's round-trip time, for sizing.
    pub rtt: Duration,
    /// The control connection's least round trip (`tcpi_min_rtt`; the
    /// smoothed one where unknown): how long the path is, without the
    /// queueing and scheduling delays a busy session adds. What the
    /// streamed upload's short-path rule reads ([`STREAM_DIRECT_MAX_RTT`]):
    /// on loopback the smoothed RTT of some of eight busy sessions read
    /// above 5 ms, and 866 of 2,000 files went through the page cache.
    pub path_rtt: Duration,
    /// While `SITE PROFILE` runs: every data connection registers here so
    /// the sampler reads its TCP_INFO. A registration holds a duplicate of
    /// the descriptor, so it must not outlive the connection (the peer
    /// would not see it close): handles live in [`DataChannels::probes`]
    /// beside the cached connections, or in the task for one transfer.
    pub streams: Option<ferry_profile::StreamRegistry>,
    /// PROT P: TLS on every data connection, this server as TLS server
    /// (RFC 4217 §7), whichever side opened the TCP connection.
    pub protection: DataProtection,
    /// Under PROT P, the secret encrypted UDT channels are keyed from
    /// (`ChannelOptions::sealing`).
    pub sealing: Option<ferry_io::transport::udt_seal::SealSecret>,
    /// The logged-in user (recorded with a partial upload).
    pub user: String,
    /// The control connection (a duplicate descriptor): whether the
    /// client is still there is read from the kernel's TCP state.
    pub control: Arc<OwnedFd>,
    /// Set for the files of a `BSTO SYNC` batch: the upload is renamed
    /// under its name without a sync of its own and made durable with the
    /// batch before the batch's final reply (docs/batch.md).
    pub batch: Option<Arc<BatchDurability>>,
    /// A `BSTO` entry's modification time and mode, set on the partial
    /// before its rename (docs/batch.md).
    pub facts: Option<ferry_proto::batch::EntryFacts>,
    /// The command came from a batch line (`BRET`/`BSTO`): the control
    /// loop holds a small file's 125 for its 226 (docs/batch.md).
    pub from_line: bool,
    /// A `BRET STREAM` line: this RETR sends all of its files back to back
    /// as one transfer (docs/batch.md, "The streamed batch").
    pub stream: Option<Arc<StreamFiles>>,
}

/// The files of a `BRET STREAM` line: (resolved path, as named, size the
/// client listed).
#[derive(Debug)]
pub(crate) struct StreamFiles {
    pub files: Vec<(Result<VirtualPath, String>, String, u64)>,
    /// A `BSTO STREAM` line's entries' time and mode (empty for a download).
    pub facts: Vec<Option<ferry_proto::batch::EntryFacts>>,
}

/// A `BSTO STREAM` line's files as one sink (docs/batch.md, "The streamed
/// upload"): stream byte `o` goes to the partial file whose range holds it
/// (file `k` at the sum of the earlier sizes; a block that straddles files
/// is split at their boundaries). Each file's arrived ranges are kept; a
/// file is renamed into place (its facts set first, durable with the
/// batch) the moment they cover its declared size, never before.
pub(crate) struct StreamUpload {
    parts: Vec<StreamPart>,
    layout: StreamLayout,
    batch: Arc<BatchDurability>,
    /// The room its unreserved files claimed, given back when it ends.
    _space: ferry_io::root::SpaceClaim,
}

/// Files of a streamed upload from this size up to `SMALL_UPLOAD` have
/// their writeback started when complete (larger ones by their commit).
const STREAM_WRITEBACK_MIN: u64 = 64 << 10;

struct StreamPart {
    upload: Arc<Upload>,
    /// Where its blocks go: the partial file, around the page cache on a
    /// disk file system from 64 KiB up, else with write-behind for a file
    /// as large as a single upload would get it ([`stream_part_sink`]).
    sink: Arc<dyn BlockSink>,
    /// Written with `O_DIRECT` ([`stream_part_sink`]): no writeback to start.
    direct: bool,
    named: String,
    facts: Option<(i64, u32)>,
    /// What arrived (file offsets), and whether the file is committed.
    state: Mutex<(RangeSet, bool)>,
}

impl StreamUpload {
    fn size(&self, k: usize) -> u64 {
        self.layout.size(k)
    }

    /// The file holding stream byte `offset`, its offset in that file and
    /// the bytes of the file from there.
    fn locate(&self, offset: u64) -> io::Result<(usize, u64, u64)> {
        self.layout.locate(offset).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a block at byte {offset}, past the line's {} bytes", self.layout.total()),
            )
        })
    }

    /// Whether the line goes through a staging ring ([`STREAM_RING_BYTES`]):
    /// every file with bytes is written around the page cache and starts
    /// on a page of the line, so a ring buffer (page-aligned, filled from a
    /// block's page-aligned offset) holds their pages where `O_DIRECT`
    /// takes them without a copy. With the ring, a receiving thread reads
    /// the next block while a writer thread waits for the device with the
    /// last; without it, it waits itself (docs/trees.md, session 20). A
    /// file that starts inside a page would cost a second copy through the
    /// ring, and so would a buffered one (spliced into the page cache
    /// without the ring): the mixed tree's upload took twice the server's
    /// CPU when its lines with one aligned direct file took a ring.
    fn wants_ring(&self) -> bool {
        let page = ferry_io::staging::DIRECT_ALIGN as u64;
        let mut with_bytes = self.parts.iter().enumerate().filter(|(k, _)| self.size(*k) > 0).peekable();
        with_bytes.peek().is_some() && with_bytes.all(|(k, p)| p.direct && self.layout.start(k) % page == 0)
    }

    fn open_for(&self, k: usize) -> io::Result<()> {
        if self.parts[k].state.lock().unwrap_or_else(|e| e.into_inner()).1 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a block for {}, which is already complete", self.parts[k].named),
            ));
        }
        Ok(())
    }

    /// `at..at + n` of file `k` is written: the file is committed when its
    /// ranges cover its size.
    fn arrived(&self, k: usize, at: u64, n: u64) -> io::Result<()> {
        let part = &self.parts[k];
        let mut state = part.state.lock().unwrap_or_else(|e| e.into_inner());
        state.0.insert(at..at + n);
        if !state.1 && state.0.covered() >= self.size(k) {
            // Writeback of the file starts now, while the line's later
            // files still arrive: the line's durability pass then finds
            // less to write (session 15: a 256 KiB upload's time was in the
            // passes). `commit_deferred` starts it itself for files above
            // 1 MiB; a 4 KiB file's is left to the pass.
            let size = self.size(k);
            if !part.direct && (STREAM_WRITEBACK_MIN..=ferry_io::root::SMALL_UPLOAD).contains(&size) {
                let _ = ferry_io::disk::start_writeback(&part.upload.file);
            }
            commit_to_batch(&part.upload, part.facts, &self.batch)
                .map_err(|e| io::Error::other(format!("cannot store {}: {e}", part.named)))?;
            state.1 = true;
        }
        Ok(())
    }

    /// Commits the empty files (complete before any byte).
    fn commit_empty(&self) -> Result<(), TransferError> {
        for k in (0..self.parts.len()).filter(|&k| self.size(k) == 0) {
            self.arrived(k, 0, 0).map_err(|e| TransferError::Local(e.to_string()))?;
        }
        Ok(())
    }

    /// How many files are committed.
    fn stored(&self) -> usize {
        self.parts.iter().filter(|p| p.state.lock().unwrap_or_else(|e| e.into_inner()).1).count()
    }

    /// The line's data ended: every file must be complete.
    fn finish(&self) -> Result<(), TransferError> {
        if self.stored() < self.parts.len() {
            return Err(TransferError::ConnectionLost("the line's data ended before every file was complete".into()));
        }
        Ok(())
    }

    /// A failure of the line, saying which of its files were stored.
    fn annotate(&self, e: TransferError) -> TransferError {
        let (stored, n) = (self.stored(), self.parts.len());
        let more = format!("{stored} of the line's {n} files stored, the others kept as partial uploads for a resume");
        match e {
            TransferError::ConnectionLost(why) => TransferError::ConnectionLost(format!("{why}; {more}")),
            TransferError::Local(why) => TransferError::Local(format!("{why}; {more}")),
            e => e,
        }
    }

    /// Syncs and records what each incomplete file holds; returns what the
    /// line holds, in its own coordinates.
    fn checkpoint(&self) -> io::Result<RangeSet> {
        let mut line = RangeSet::new();
        for (k, p) in self.parts.iter().enumerate() {
            // Held while the record is written: the file is not renamed
            // (and its record removed) meanwhile.
            let state = p.state.lock().unwrap_or_else(|e| e.into_inner());
            let (ranges, committed) = (&state.0, state.1);
            let start = self.layout.start(k);
            if committed {
                if self.size(k) > 0 {
                    line.insert(start..start + self.size(k));
                }
                continue;
            }
            if ranges.is_empty() {
                continue;
            }
            p.upload.checkpoint(ranges)?;
            for r in ranges.ranges() {
                line.insert(start + r.start..start + r.end);
            }
        }
        Ok(line)
    }

    /// The line failed: the files not committed keep what arrived, for a
    /// resume (their records), or go if nothing did.
    fn abandon_incomplete(&self) {
        for p in &self.parts {
            let state = p.state.lock().unwrap_or_else(|e| e.into_inner());
            if !state.1 {
                p.upload.abandon(&state.0);
            }
        }
    }
}

impl BlockSink for StreamUpload {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let mut pos = 0usize;
        while pos < data.len() {
            let (k, at, left) = self.locate(offset + pos as u64)?;
            let n = (data.len() - pos).min(usize::try_from(left).unwrap_or(usize::MAX));
            self.open_for(k)?;
            self.parts[k].sink.write_at(&data[pos..pos + n], at)?;
            self.arrived(k, at, n as u64)?;
            pos += n;
        }
        Ok(())
    }

    fn splice_from(&self, sock: std::os::fd::BorrowedFd<'_>, offset: u64, len: usize) -> Option<io::Result<usize>> {
        let (k, at, left) = match self.locate(offset) {
            Ok(x) => x,
            Err(e) => return Some(Err(e)),
        };
        if let Err(e) = self.open_for(k) {
            return Some(Err(e));
        }
        let n = len.min(usize::try_from(left).unwrap_or(usize::MAX));
        let r = self.parts[k].sink.splice_from(sock, at, n);
        if let Some(Ok(m)) = &r {
            if *m > 0 {
                if let Err(e) = self.arrived(k, at, *m as u64) {
                    return Some(Err(e));
                }
            }
        }
        r
    }
}

/// Files of a streamed upload from this size up, on a disk file system,
/// are written with `O_DIRECT` (whole pages; a partial page at a block
/// boundary or the tail through the page cache): see [`stream_part_sink`].
const STREAM_DIRECT_MIN: u64 = 64 << 10;

/// The staging ring of a streamed line whose files go around the page
/// cache ([`StreamUpload::wants_ring`]): four blocks, two writer threads.
const STREAM_RING_BYTES: usize = 4 << 20;

/// The longest control-connection round trip at which a streamed line's
/// files go around the page cache. On a longer path the link is the cap,
/// not the page cache, and a receiving thread that waits for the device
/// after every block reads its socket less often while TCP's window is
/// still growing: the mixed tree's upload at 30 ms one way read 70.1 and
/// 68.6 files/s direct against 77.1 and 76.2 buffered (0.87 of one file
/// against 0.95), at 80 ms 42.4 against 45.2 (docs/trees.md, session 19).
const STREAM_DIRECT_MAX_RTT: Duration = Duration::from_millis(5);

/// A streamed upload's file as a sink, and whether it is written around
/// the page cache. Where the server's config asks for it (`stream_direct`,
/// off by default since session 25: the page cache measured 1.46–1.6 times
/// as fast on this project's machine, docs/trees.md), on a disk file
/// system, over a short path (`short_path`: [`STREAM_DIRECT_MAX_RTT`] and
/// the config), a file of [`STREAM_DIRECT_MIN`]
/// or more goes to the device with `O_DIRECT` ([`DirectFile`]): the page
/// cache's per-page work (allocating pages and their buffer heads,
/// dirtying, then writing them back in the durability pass) was most of
/// what a 256 KiB upload cost the server beyond its copy, and an upload is
/// written once and rarely read back soon (docs/trees.md, session 19).
/// Smaller files stay buffered: one synchronous device write each would
/// cost more than the pass that writes them together (a `fio` check of
/// 4 KiB files agreed, docs/trees.md). Elsewhere (tmpfs,
/// network file systems) the file itself, with write-behind for a file as
/// large as a single upload would get it.
///
/// [`DirectFile`]: ferry_io::endpoint::DirectFile
fn stream_part_sink(file: &std::fs::File, size: u64, short_path: bool) -> io::Result<(Arc<dyn BlockSink>, bool)> {
    if short_path
        && size >= STREAM_DIRECT_MIN
        && matches!(ferry_io::disk::FsKind::of(file), ferry_io::disk::FsKind::Disk(_))
    {
        // The upload's own description turns direct: nothing else writes
        // the partial before its commit.
        match file.try_clone().and_then(ferry_io::endpoint::DirectFile::switching) {
            Ok(d) => return Ok((Arc::new(d), true)),
            Err(e) => tracing::debug!(error = %e, "no direct I/O for a streamed file; using the page cache"),
        }
    }
    // One write at a time per file, as a single upload's sink (several
    // connections writing one file spin on its inode lock otherwise).
    let sink: Arc<dyn BlockSink> = Arc::new(ferry_io::endpoint::SerialFile::new(file.try_clone()?));
    if size < ferry_io::disk::WRITE_BEHIND_MIN_FILE {
        return Ok((sink, false));
    }
    let plan = ferry_io::disk::DiskPlan::for_write(file, Some(size), false);
    Ok((plan.wrap_sink(file, sink)?, false))
}

/// Takes a `BSTO STREAM` line's files before its 125: claims every name
/// and opens every partial beneath the root, as each file's STOR would. A
/// file that cannot be taken refuses the whole line, naming it (nothing is
/// written; the claims go with the uploads already opened).
fn prepare_stream_upload(
    root: &Root,
    config: &crate::config::ServerConfig,
    req: &TransferRequest,
    user: &str,
    stream: &StreamFiles,
    batch: Option<&Arc<BatchDurability>>,
    rtt: Duration,
) -> Result<Arc<StreamUpload>, TransferError> {
    let Some(batch) = batch else {
        return Err(TransferError::Local("internal error: a streamed upload outside a batch".into()));
    };
    if req.restart.is_some() || req.window.is_some() || req.mode != TransferMode::ExtendedBlock {
        return Err(TransferError::BadRestart(
            "a streamed upload is sent whole in MODE E; resume its files one by one".into(),
        ));
    }
    let mut parts = Vec::with_capacity(stream.files.len());
    let mut layout = StreamLayout::default();
    // The line's files are usually in one directory: opened once; its small
    // fresh files are anonymous until complete (`StoreDirs::streamed`).
    let mut dirs = StoreDirs::streamed();
    // The files it will not reserve claim their room together, before any
    // is opened: a line that cannot fit is refused before data flows, as a
    // reserved file is (`Root::claim_space`).
    let first_dir = match stream.files.first() {
        Some((Ok(first), _, _)) => first.parent(),
        _ => VirtualPath::root(),
    };
    let sizes = stream.files.iter().map(|(_, _, size)| *size);
    let space = root.claim_space(&first_dir, sizes, &mut dirs).map_err(|e| {
        TransferError::Local(format!(
            "its {} files do not fit: {e}; the line is refused, send its files one by one",
            stream.files.len()
        ))
    })?;
    for (k, (path, named, size)) in stream.files.iter().enumerate() {
        let refuse = |why: String| {
            TransferError::Local(format!(
                "file {} of {} ({named}) cannot be stored: {why}; the line is refused, send its files one by one",
                k + 1,
                stream.files.len()
            ))
        };
        let opened = match path {
            Err(why) => Err(refuse(why.clone())),
            Ok(_) if *size > config.max_file_size => {
                Err(refuse(format!("larger than this server stores ({} bytes)", config.max_file_size)))
            }
            Ok(path) => {
                let info = UploadInfo { user: user.to_string(), allocation: Some(*size) };
                root.begin_store_in(path, StoreMode::Replace, &info, &mut dirs).map_err(|e| refuse(e.to_string()))
            }
        };
        let upload = match opened {
            Ok(u) => u,
            Err(e) => {
                // Nothing was written: the partials opened so far go.
                for p in &parts {
                    let p: &StreamPart = p;
                    p.upload.abandon(&RangeSet::new());
                }
                return Err(e);
            }
        };
        let facts = stream
            .facts
            .get(k)
            .cloned()
            .flatten()
            .map(|f| (ferry_proto::facts::parse_time_val(&f.mtime).unwrap_or(0), f.mode));
        if !layout.push(*size) {
            return Err(TransferError::Local("sizes overflow".into()));
        }
        let (sink, direct) =
            stream_part_sink(&upload.file, *size, config.stream_direct && rtt <= STREAM_DIRECT_MAX_RTT)
                .map_err(|e| TransferError::Local(e.to_string()))?;
        parts.push(StreamPart {
            sink,
            direct,
            upload: Arc::new(upload),
            named: named.clone(),
            facts,
            state: Mutex::new((RangeSet::new(), false)),
        });
    }
    if req.allocation != Some(layout.total()) {
        for p in &parts {
            p.upload.abandon(&RangeSet::new());
        }
        return Err(TransferError::Local(
            "the line's ALLO (refused, or not the sum of its sizes) does not announce it; send its files one by one"
                .into(),
        ));
    }
    let up = Arc::new(StreamUpload { parts, layout, batch: batch.clone(), _space: space });
    up.commit_empty()?;
    Ok(up)
}

/// A streamed batch's files as one source: file `k`'s bytes at the sum of
/// the earlier sizes (docs/batch.md, "The streamed batch"). Every file is
/// open, and its size checked against the line, before the first byte.
struct ConcatSource {
    files: Vec<std::fs::File>,
    layout: StreamLayout,
}

impl BlockSource for ConcatSource {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let Some((k, at, left)) = self.layout.locate(offset) else { return Ok(0) };
        let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        BlockSource::read_at(&self.files[k], &mut buf[..n], at)
    }

    fn file_range(&self, offset: u64, len: usize) -> Option<ferry_io::endpoint::FileRange<'_>> {
        let Some((k, at, left)) = self.layout.locate(offset) else {
            // Past the end: nothing (as a file's range past its end).
            return self.files.first().map(|f| ferry_io::endpoint::FileRange { fd: f.as_fd(), offset: 0, len: 0 });
        };
        let len = len.min(usize::try_from(left).unwrap_or(usize::MAX));
        Some(ferry_io::endpoint::FileRange { fd: self.files[k].as_fd(), offset: at, len })
    }

    fn zero_copy(&self) -> bool {
        true
    }
}

/// Opens a `BRET STREAM` line's files beneath the root, in order, and
/// checks each size against the line. The first that cannot be opened or
/// differs cuts the stream before it: returned with why, the data covers
/// only the files before it. Refused outright if it is the first.
fn prepare_stream(
    root: &Root,
    req: &TransferRequest,
    stream: &StreamFiles,
) -> Result<(Prepared, Option<u64>, Option<String>), TransferError> {
    // A streamed line is always sent whole: its files are fresh on the
    // client, which resumes a broken one file by file (docs/batch.md).
    if req.restart.is_some() || req.window.is_some() {
        return Err(TransferError::BadRestart("a streamed batch is sent whole; resume its files one by one".into()));
    }
    let mut files = Vec::with_capacity(stream.files.len());
    let mut layout = StreamLayout::default();
    let mut cut = None;
    for (k, (path, named, size)) in stream.files.iter().enumerate() {
        let opened = match path {
            Ok(p) => root.open_read(p).map_err(|e| (TransferError::File(e.clone()), e.to_string())),
            Err(why) => Err((TransferError::Local(format!("{named}: {why}")), why.clone())),
        };
        let why = match opened {
            Ok((file, facts)) if facts.size == *size => {
                files.push(file);
                if !layout.push(*size) {
                    return Err(TransferError::Local("sizes overflow".into()));
                }
                continue;
            }
            Ok((_, facts)) => {
                let why = format!("its size is now {} bytes, not the {size} listed", facts.size);
                if k == 0 {
                    return Err(TransferError::Local(format!("{why}; list it again")));
                }
                why
            }
            Err((e, why)) => {
                if k == 0 {
                    return Err(e);
                }
                why
            }
        };
        cut = Some(format!(
            "stream ended before file {} of {} ({named}): {why}; the {k} files before it were sent",
            k + 1,
            stream.files.len()
        ));
        break;
    }
    let total = layout.total();
    let ranges: Vec<Range<u64>> = (total > 0).then_some(0..total).into_iter().collect();
    let source: Arc<dyn BlockSource> = Arc::new(ConcatSource { files, layout });
    Ok((Prepared::Send { source, ranges, header_base: 0 }, Some(total), cut))
}

enum Prepared {
    /// Source ranges to send; in block headers offsets are relative to
    /// `header_base` (an ERET window).
    Send {
        source: Arc<dyn BlockSource>,
        ranges: Vec<Range<u64>>,
        header_base: u64,
    },
    Listing(ListingJob),
    /// A listing produced while it is sent (MLSR: `mlsr.rs`).
    Chunks(ferry_io::stream::Chunks),
    /// `base`: where the first stream-mode byte goes, or what MODE E block
    /// offsets are relative to. `done`: ranges the client said it had (REST).
    Receive {
        sink: Destination,
        base: u64,
        done: RangeSet,
    },
}

/// A directory listing, formatted as it is sent (never whole in memory).
struct ListingJob {
    entries: Listing,
    format: ListFormat,
    writable: bool,
    /// The facts `OPTS MLST` selected, for MLSD lines.
    facts: ferry_proto::facts::FactSet,
    now: i64,
}

impl ListingJob {
    /// Writes every line to `out`, checking `abort` between entries.
    fn write_to(self, out: &mut impl Write, abort: &AbortSignal) -> io::Result<u64> {
        let mut n = 0u64;
        for e in self.entries {
            if abort.is_aborted() {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "aborted"));
            }
            let line = match self.format {
                ListFormat::Long => e.list_line(self.now),
                ListFormat::Names => e.name.clone(),
                ListFormat::Machine | ListFormat::MachineRecursive => {
                    e.mlsx_line_with(self.writable, &e.name, self.facts)
                }
            };
            // Names travel as their own octets (RFC 3659 §2.2), but a CR
            // or LF in one must not end a line.
            let mut bytes = ferry_proto::octets::encode(&line).into_owned();
            bytes.iter_mut().filter(|b| **b == b'\r' || **b == b'\n').for_each(|b| *b = b' ');
            bytes.extend_from_slice(b"\r\n");
            out.write_all(&bytes)?;
            n += bytes.len() as u64;
        }
        out.flush()?;
        Ok(n)
    }
}

/// Where received data goes.
enum Destination {
    /// A file upload, committed to its final name when complete.
    Upload { upload: Arc<Upload>, mode: StoreMode },
    /// The memory-to-memory sink (`/dev/null` with `memory_paths`).
    Discard,
    /// A `BSTO STREAM` line's files.
    Stream(Arc<StreamUpload>),
}

impl Destination {
    /// Where the blocks go; with `direct`, around the page cache.
    fn sink(&self, direct: bool) -> Result<Arc<dyn BlockSink>, TransferError> {
        match self {
            Destination::Upload { upload, .. } => {
                let file = upload.file.try_clone().map_err(|e| TransferError::Local(e.to_string()))?;
                let d = direct_file(&file, direct);
                // A file announced smaller than the write-behind threshold
                // gets no write-behind on any file system: no `fstatfs`
                // and no log line for it (two of a small upload's ~70
                // syscalls; docs/trees.md, "CPU per file").
                let small =
                    d.is_none() && upload.allocation().is_some_and(|s| s < ferry_io::disk::WRITE_BEHIND_MIN_FILE);
                let plan =
                    (!small).then(|| ferry_io::disk::DiskPlan::for_write(&file, upload.allocation(), d.is_some()));
                if let Some(plan) = &plan {
                    tracing::info!(disk = %plan, "disk plan");
                }
                let sink: Arc<dyn BlockSink> = match d {
                    Some(d) => Arc::new(d),
                    None => Arc::new(ferry_io::endpoint::SerialFile::new(
                        file.try_clone().map_err(|e| TransferError::Local(e.to_string()))?,
                    )),
                };
                match plan {
                    Some(plan) => plan.wrap_sink(&file, sink).map_err(|e| TransferError::Local(e.to_string())),
                    None => Ok(sink),
                }
            }
            Destination::Discard => Ok(Arc::new(NullSink)),
            Destination::Stream(up) => Ok(up.clone()),
        }
    }
}

/// Files read in full smaller than this get no read plan (no `fstatfs`,
/// no `posix_fadvise`, no log line): the kernel's default readahead
/// covers them in a read or two.
const SMALL_READ: u64 = 1 << 20;

/// `file` opened again with `O_DIRECT` when the configuration asks for
/// direct I/O and the file system has it (it stays buffered otherwise,
/// with a note in the log).
fn direct_file(file: &std::fs::File, direct: bool) -> Option<ferry_io::endpoint::DirectFile> {
    if !direct {
        return None;
    }
    let opened = file.try_clone().and_then(ferry_io::endpoint::DirectFile::new);
    match opened {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::info!(error = %e, "no direct I/O for this file; using the page cache");
            None
        }
    }
}

/// The staging ring for a transfer, from the configuration and the path.
fn staging_for(ctx: &TransferContext) -> Option<ferry_io::staging::StagingConfig> {
    use crate::config::Staging;
    let bytes = match ctx.server.config.staging {
        // Direct I/O needs the ring's aligned buffers.
        Staging::Off if ctx.server.config.direct_io => auto_staging(ctx),
        Staging::Off => return None,
        Staging::Bytes(n) => n as usize,
        Staging::Auto => auto_staging(ctx),
    };
    Some(ferry_io::staging::StagingConfig::new(bytes, mode_e::DEFAULT_BLOCK_SIZE))
}

fn auto_staging(ctx: &TransferContext) -> usize {
    let est = ferry_io::sizing::PathEstimate {
        rtt: ctx.rtt,
        rate: None,
        socket_buffer_max: ferry_io::sizing::socket_buffer_max(),
    };
    let s = ferry_io::sizing::choose(est, None);
    tracing::info!(
        rtt_ms = ctx.rtt.as_secs_f64() * 1e3,
        staging_bytes = s.staging_bytes,
        "staging sized from the path"
    );
    s.staging_bytes
}

pub(crate) fn spawn(request: TransferRequest, ctx: TransferContext) -> ActiveTransfer {
    let (tx, events) = mpsc::channel(8);
    let abort = Arc::new(AbortSignal::new());
    let abort_notify = Arc::new(Notify::new());
    let progress = Arc::new(AtomicU64::new(0));
    let received = Arc::new(ReceiveState::default());
    let stopped = Arc::new(AtomicBool::new(false));
    let verdict = Arc::new(Verdict::default());
    let durable = Arc::new(Mutex::new(RangeSet::new()));
    let rate = ctx.server.config.max_transfer_rate.map(|r| Arc::new(RateLimit::new(r)));
    let path = ctx.server.config.data_path;
    let staging = staging_for(&ctx);
    let staged = Arc::new(AtomicUsize::new(staging.map_or(0, |c| c.bytes)));
    let task = Task {
        request: request.clone(),
        ctx,
        tx,
        ctl: TransferControl { abort: abort.clone(), staging, path, ..TransferControl::shared(progress.clone(), rate) },
        abort_notify: abort_notify.clone(),
        received,
        stopped: stopped.clone(),
        probes: Arc::default(),
        verdict: verdict.clone(),
        durable: durable.clone(),
        upload: None,
        written_to: Arc::new(AtomicU64::new(0)),
        permits: Arc::default(),
        failure: Arc::default(),
        cut: None,
        stream_up: None,
        staged: staged.clone(),
    };
    // On the data runtime: its blocking threads are the data connections'.
    let rt = task.ctx.server.data_runtime.handle().clone();
    if task.one_thread_eligible() {
        // Straight onto a blocking thread: no async task between the
        // control loop and the file (docs/trees.md, session 12).
        let handle = rt.clone();
        rt.spawn_blocking(move || task.run_here(&handle));
    } else {
        rt.spawn(task.run());
    }
    ActiveTransfer {
        events,
        request,
        started: Instant::now(),
        udt_before: ferry_io::udt::totals(),
        progress,
        durable,
        reported: RangeSet::new(),
        abort,
        abort_notify,
        stopped,
        verdict,
        staging: staged,
    }
}

// --- Striping (issue 20): transfers run by `crate::stripe::front` ---

/// The task's side of a transfer that another module runs (the striping
/// front end), behind the same [`ActiveTransfer`] handle as any other.
pub(crate) struct ExternalTransfer {
    pub tx: mpsc::Sender<TransferEvent>,
    pub abort: Arc<AbortSignal>,
    pub abort_notify: Arc<Notify>,
    pub verdict: Arc<Verdict>,
    pub progress: Arc<AtomicU64>,
    pub durable: Arc<Mutex<RangeSet>>,
}

pub(crate) fn external(request: TransferRequest) -> (ActiveTransfer, ExternalTransfer) {
    let (tx, events) = mpsc::channel(64);
    let ext = ExternalTransfer {
        tx,
        abort: Arc::new(AbortSignal::new()),
        abort_notify: Arc::new(Notify::new()),
        verdict: Arc::new(Verdict::default()),
        progress: Arc::new(AtomicU64::new(0)),
        durable: Arc::new(Mutex::new(RangeSet::new())),
    };
    let active = ActiveTransfer {
        events,
        request,
        started: Instant::now(),
        udt_before: ferry_io::udt::totals(),
        progress: ext.progress.clone(),
        durable: ext.durable.clone(),
        reported: RangeSet::new(),
        abort: ext.abort.clone(),
        abort_notify: ext.abort_notify.clone(),
        stopped: Arc::new(AtomicBool::new(false)),
        verdict: ext.verdict.clone(),
        staging: Arc::default(),
    };
    (active, ext)
}

/// What an upload's file holds besides what this transfer writes, and how
/// this transfer's writes map into it.
#[derive(Debug, Clone)]
struct UploadPlan {
    mode: StoreMode,
    /// File offset of header offset 0 (MODE E) or of the first byte (stream).
    base: u64,
    /// Ranges the client said the file has (REST), in header coordinates.
    done: RangeSet,
}

struct Task {
    request: TransferRequest,
    ctx: TransferContext,
    tx: mpsc::Sender<TransferEvent>,
    ctl: TransferControl,
    abort_notify: Arc<Notify>,
    received: Arc<ReceiveState>,
    stopped: Arc<AtomicBool>,
    /// The profiler's registrations of this transfer's new connections.
    probes: Arc<Mutex<Vec<ferry_profile::StreamHandle>>>,
    verdict: Arc<Verdict>,
    /// Shared with [`ActiveTransfer::durable`].
    durable: Arc<Mutex<RangeSet>>,
    /// The upload in progress and how this transfer writes into it.
    upload: Option<(Arc<Upload>, UploadPlan)>,
    /// Stream mode: the file offset after the last byte written.
    written_to: Arc<AtomicU64>,
    /// This transfer's places in the server's data-connection budget.
    permits: Arc<Mutex<Vec<OwnedSemaphorePermit>>>,
    /// Why a helper task (the acceptor) failed the transfer.
    failure: Arc<Mutex<Option<TransferError>>>,
    /// A `BRET STREAM` line cut before one of its files (changed or gone):
    /// the files before it are sent, then this is the failure.
    cut: Option<String>,
    /// A `BSTO STREAM` line's files: on failure the incomplete ones are
    /// abandoned (kept for a resume).
    stream_up: Option<Arc<StreamUpload>>,
    /// Shared with [`ActiveTransfer::staging`].
    staged: Arc<AtomicUsize>,
}

/// Registers a data connection with the profiler, if one runs.
/// The transport a session selected (`TPRT`), or the server's default:
/// the session offers only what the registry has, so the fallback is for
/// form's sake.
pub(crate) fn transport_for(
    server: &ServerContext,
    name: ferry_proto::transport::TransportName,
) -> Arc<dyn ferry_io::transport::Transport> {
    ferry_io::transport::by_name(name.as_str()).unwrap_or_else(|| server.transport.clone())
}

/// The profiler's hook on this transfer's data connections: registers
/// each one's socket while `SITE PROFILE` runs.
fn probe(
    registry: &Option<ferry_profile::StreamRegistry>,
    probes: &Arc<Mutex<Vec<ferry_profile::StreamHandle>>>,
    path: &VirtualPath,
) -> Option<ferry_io::transport::ConnectionObserver> {
    let registry = registry.clone()?;
    let (probes, label) = (probes.clone(), format!("data {path}"));
    Some(Arc::new(move |conn: &dyn Connection| {
        // The profiler reads the transport's stats, never the socket.
        match registry.register_connection(conn, label.clone()) {
            Some(h) => probes.lock().unwrap_or_else(|e| e.into_inner()).push(h),
            None => tracing::debug!(transport = conn.transport(), "the profiler cannot follow a data connection"),
        }
    }))
}

impl Task {
    async fn run(mut self) {
        let result = self.execute().await;
        self.end(result).await;
    }

    /// A one-thread transfer ([`Task::one_thread`]) on the blocking thread
    /// it was spawned on, from start to `Finished`: the control loop's
    /// spawn wakes this thread, and `Started` and `Finished` wake the
    /// control loop, with nothing in between (an async task on the data
    /// runtime and a `spawn_blocking` from it were two more hand-offs
    /// each way; docs/trees.md, session 12).
    fn run_here(mut self, rt: &tokio::runtime::Handle) {
        let result = self.one_thread(rt);
        let result = self.conclude(result);
        // Nothing in `end` waits on a one-thread transfer over TCP: the
        // channel has room for both events, and the abandon of a failed
        // upload is the one blocking step.
        rt.block_on(self.end(result));
    }

    /// Reports the transfer's outcome to the control loop with the
    /// session's data channels.
    async fn end(mut self, result: Result<u64, TransferError>) {
        let outcome = match result {
            Ok(bytes) => TransferOutcome::Complete { bytes },
            Err(e) => {
                // Connections in an unknown state must not carry the next
                // transfer.
                self.ctx.channels.drop_cached();
                TransferOutcome::Failed(e)
            }
        };
        if let (TransferOutcome::Failed(e), Some((upload, _))) = (&outcome, &self.upload) {
            // Every writer has returned: record what arrived, give back
            // what was reserved; the claim goes with the last reference.
            let (_, held) = self.held_now();
            let upload = upload.clone();
            tracing::debug!(error = ?e, held = %held, "upload failed; partial kept for a resume");
            let _ = tokio::task::spawn_blocking(move || upload.abandon(&held)).await;
        }
        let outcome = match (outcome, &self.stream_up) {
            (TransferOutcome::Failed(e), Some(up)) => {
                let up2 = up.clone();
                let _ = tokio::task::spawn_blocking(move || up2.abandon_incomplete()).await;
                TransferOutcome::Failed(up.annotate(e))
            }
            (o, _) => o,
        };
        self.stream_up = None;
        self.upload = None;
        self.wait_sent().await;
        // The kept connections keep their places in the budget.
        let mut permits = std::mem::take(&mut *self.permits.lock().unwrap_or_else(|e| e.into_inner()));
        permits.truncate(self.ctx.channels.cached.len().saturating_sub(self.ctx.channels.permits.len()));
        self.ctx.channels.permits.extend(permits);
        self.ctx.channels.permits.truncate(self.ctx.channels.cached.len());
        if self.request.mode == TransferMode::Stream {
            // Stream mode uses a listener once.
            self.ctx.channels.listener = None;
        }
        // Registrations follow their connections: kept with the cached
        // ones, dropped (after the connections) otherwise.
        let probes = std::mem::take(&mut *self.probes.lock().unwrap_or_else(|e| e.into_inner()));
        if !self.ctx.channels.cached.is_empty() {
            self.ctx.channels.probes.extend(probes);
        }
        let channels = std::mem::take(&mut self.ctx.channels);
        let _ = self.tx.send(TransferEvent::Finished { outcome, channels }).await;
    }

    fn timeout(&self) -> Duration {
        self.ctx.server.config.data_timeout()
    }

    fn buffer(&self) -> Option<u32> {
        self.request.channel.buffer_size
    }

    /// Where passive data connections may come from.
    fn accept_policy(&self) -> Option<IpAddr> {
        (!self.ctx.server.config.allow_third_party).then_some(self.ctx.peer_ip)
    }

    async fn execute(&mut self) -> Result<u64, TransferError> {
        let root = self.ctx.root.clone();
        let req = self.request.clone();
        let server = self.ctx.server.clone();
        let user = self.ctx.user.clone();
        let stream = self.ctx.stream.clone();
        let batch = self.ctx.batch.clone();
        let rtt = self.ctx.path_rtt;
        let (prepared, size, cut) = tokio::task::spawn_blocking(move || match stream {
            Some(files) if req.kind == TransferKind::Retrieve => prepare_stream(&root, &req, &files),
            Some(files) => {
                prepare_stream_upload(&root, &server.config, &req, &user, &files, batch.as_ref(), rtt).map(|up| {
                    (Prepared::Receive { sink: Destination::Stream(up), base: 0, done: RangeSet::new() }, None, None)
                })
            }
            _ => prepare(&root, &server.config, &req, &user).map(|(p, s)| (p, s, None)),
        })
        .await
        .map_err(|e| TransferError::Local(e.to_string()))??;
        self.cut = cut;
        if let Prepared::Receive { sink: Destination::Stream(up), .. } = &prepared {
            self.stream_up = Some(up.clone());
            let direct = up.parts.iter().filter(|p| p.direct).count();
            tracing::info!(files = up.parts.len(), direct, ring = up.wants_ring(), "a streamed upload line's files");
            if self.ctl.staging.is_none() && up.wants_ring() {
                let ring = ferry_io::staging::StagingConfig::new(STREAM_RING_BYTES, mode_e::DEFAULT_BLOCK_SIZE);
                self.staged.store(ring.bytes, Ordering::Relaxed);
                self.ctl.staging = Some(ring);
            }
        }
        if let Prepared::Receive { sink: Destination::Upload { upload, mode }, base, done } = &prepared {
            self.written_to.store(*base, Ordering::Relaxed);
            self.upload = Some((upload.clone(), UploadPlan { mode: *mode, base: *base, done: done.clone() }));
        }
        let reuse = self.request.channel.reuse && !self.ctx.channels.cached.is_empty();
        if !reuse {
            self.ctx.channels.drop_cached();
        }
        if let DataEndpoint::DelayedPassive(kind) = self.request.endpoint {
            if !reuse || self.ctx.channels.listener.is_none() {
                let opts = ChannelOptions {
                    buffer: self.buffer(),
                    path_rate: self.request.channel.path_rate.map(|r| r as f64),
                    ..ChannelOptions::new(self.timeout())
                };
                let transport = transport_for(&self.ctx.server, self.request.channel.transport);
                let l = self
                    .ctx
                    .server
                    .ports
                    .bind(&*transport, self.ctx.local_ip, &opts)
                    .map_err(|e| TransferError::DataConnection(format!("cannot open a passive port: {e}")))?;
                let mut addr = l.local_addr().map_err(|e| TransferError::DataConnection(e.to_string()))?;
                if let (Some(public), SocketAddr::V4(_)) = (self.ctx.server.config.passive_address, addr) {
                    addr.set_ip(public.into());
                }
                self.ctx.channels.listener = Some(l);
                let _ = self.tx.send(TransferEvent::DelayedPassive { kind, addr }).await;
            }
        }
        let result = match self.request.mode {
            TransferMode::Stream => self.stream_mode(prepared, size).await,
            TransferMode::ExtendedBlock => self.block_mode(prepared, size, reuse).await,
        };
        self.conclude(result)
    }

    /// Whether this transfer runs its whole disk side and its copy on one
    /// blocking thread ([`Task::one_thread`]): MODE E on the session's one
    /// cached connection, no staging ring and no direct I/O, and either a
    /// download on one stream or a small upload of a `BSTO SYNC` batch
    /// (announced by ALLO, no restart, no ESTO window).
    fn one_thread_eligible(&self) -> bool {
        let (req, config) = (&self.request, &self.ctx.server.config);
        let endpoint_ready = match req.endpoint {
            DataEndpoint::DelayedPassive(_) => self.ctx.channels.listener.is_some(),
            _ => true,
        };
        let common = req.mode == TransferMode::ExtendedBlock
            && req.channel.reuse
            && self.ctx.channels.cached.len() == 1
            && self.ctl.staging.is_none()
            && !config.direct_io
            && endpoint_ready
            && memory_endpoint(config, req).is_none();
        common
            && match req.kind {
                TransferKind::Retrieve => req.channel.parallelism <= 1,
                TransferKind::Store => {
                    self.ctx.batch.is_some()
                        && req.restart.is_none()
                        && req.window.is_none()
                        && req.allocation.is_some_and(|a| a <= ONE_THREAD_MAX_UPLOAD)
                }
                _ => false,
            }
    }

    /// A small file of a batch on one blocking thread: open → send (a
    /// download) or prepare → receive → commit (an upload), where the usual
    /// path hops between the runtime and the blocking pool at each step
    /// (session 8's profile: 15.5 `futex` per 4 KiB file downloaded and a
    /// third of the server's CPU under them; docs/trees.md). What each step
    /// does is unchanged: the same `prepare`, the partial file renamed only
    /// when complete, the entry's facts set on the open partial before the
    /// rename, durability with the batch. An upload whose sender opened
    /// more connections than the cached one (its EOD count says so) goes
    /// on the usual way for the rest. Runs on the blocking thread the
    /// transfer was spawned on ([`Task::run_here`]).
    fn one_thread(&mut self, rt: &tokio::runtime::Handle) -> Result<u64, TransferError> {
        let conn = self.ctx.channels.cached.pop().expect("one cached connection");
        self.ctl.abort.register(&*conn).map_err(|e| TransferError::DataConnection(e.to_string()))?;
        let (root, req, server) = (self.ctx.root.clone(), self.request.clone(), self.ctx.server.clone());
        let facts = self.entry_facts();
        let timeout = self.timeout();
        let max = server.config.max_file_size;
        let max_connections = server.config.max_data_connections_per_session.clamp(1, mode_e::MAX_CONNECTIONS);
        let (prepared, size) = match &self.ctx.stream {
            Some(files) if req.kind == TransferKind::Retrieve => {
                let (p, s, cut) = prepare_stream(&root, &req, files)?;
                self.cut = cut;
                (p, s)
            }
            Some(files) => {
                let up = prepare_stream_upload(
                    &root,
                    &server.config,
                    &req,
                    &self.ctx.user,
                    files,
                    self.ctx.batch.as_ref(),
                    self.ctx.path_rtt,
                )?;
                self.stream_up = Some(up.clone());
                (Prepared::Receive { sink: Destination::Stream(up), base: 0, done: RangeSet::new() }, None)
            }
            _ => prepare(&root, &server.config, &req, &self.ctx.user)?,
        };
        // The 125 goes before any data, as on the usual path — unless the
        // control loop would hold it for the 226 anyway (a `BSTO SYNC`
        // file, a small `BRET` file: docs/batch.md, "Replies written
        // together"): then `Started` goes with `Finished`, and the control
        // loop wakes once for the file instead of twice.
        // A `BSTO SYNC` file has no first performance marker to send with
        // its 125 (control.rs, `Started`).
        let held = self.ctx.batch.is_some()
            || (req.markers.perf_secs.is_none()
                && self.ctx.from_line
                && req.kind == TransferKind::Retrieve
                && size.is_some_and(|s| s <= HOLD_125_MAX_SIZE));
        let started = TransferEvent::Started { size, reused: true };
        let mut started = if held {
            Some(started)
        } else {
            let _ = self.tx.blocking_send(started);
            None
        };
        let step = match prepared {
            Prepared::Send { source, ranges, header_base } => {
                let plan = SendPlan { ranges, header_base, block_size: mode_e::DEFAULT_BLOCK_SIZE };
                mode_e::send(vec![conn], &*source, &plan, &self.ctl)
                    .map(|mut kept| Step::Done(kept.pop()))
                    .map_err(|e| copy_error(e, timeout, max))
            }
            Prepared::Receive { sink: Destination::Upload { upload, mode }, base, done } => {
                let plan = UploadPlan { mode, base, done: done.clone() };
                // As on the usual path: a failure abandons it (`end`).
                self.upload = Some((upload.clone(), plan));
                let dest = Destination::Upload { upload: upload.clone(), mode };
                dest.sink(false).and_then(|sink| {
                    let limit = upload_limit(max, req.allocation, mode, base, &upload);
                    let spec = ReceiveSpec { base, limit: Some(limit), max_connections };
                    match mode_e::receive_stream(conn, &*sink, spec, &self.received, &self.ctl, None) {
                        Err(e) => Err(copy_error(e, timeout, max)),
                        Ok(rest) if !self.received.is_complete() => Ok(Step::Rest(rest)),
                        Ok(rest) => match &self.ctx.batch {
                            Some(batch) => {
                                let (closed, control) = (&self.ctx.control_closed, &self.ctx.control);
                                commit_small(
                                    &req,
                                    &self.received,
                                    &done,
                                    &upload,
                                    mode,
                                    facts,
                                    batch,
                                    &self.verdict,
                                    || closed.load(Ordering::SeqCst) || hung_up(control.as_fd()),
                                )
                                .map(|()| Step::Done(rest))
                            }
                            None => {
                                Err(TransferError::Local("internal error: a one-thread upload outside a batch".into()))
                            }
                        },
                    }
                })
            }
            Prepared::Receive { sink: Destination::Stream(up), .. } => {
                let spec = ReceiveSpec { base: 0, limit: Some(up.layout.total()), max_connections };
                match mode_e::receive_stream(conn, &*up, spec, &self.received, &self.ctl, None) {
                    Err(e) => Err(copy_error(e, timeout, max)),
                    Ok(rest) if !self.received.is_complete() => Ok(Step::Rest(rest)),
                    Ok(rest) => up.finish().map(|()| Step::Done(rest)),
                }
            }
            _ => Err(TransferError::Local("internal error: not a one-thread transfer".into())),
        };
        if let Some(started) = started.take() {
            let _ = self.tx.blocking_send(started);
        }
        match step? {
            Step::Done(conn) => {
                self.ctx.channels.cached.extend(conn);
                Ok(self.ctl.progress.load(Ordering::Relaxed))
            }
            Step::Rest(finished) => {
                tracing::info!(path = %self.request.path, "the sender counts more data connections than the cached one; the rest of the file comes on them");
                if let Some(up) = self.stream_up.clone() {
                    return rt.block_on(self.receive_rest(
                        Destination::Stream(up),
                        0,
                        RangeSet::new(),
                        Vec::new(),
                        finished,
                    ));
                }
                let Some((upload, plan)) = self.upload.clone() else {
                    return Err(TransferError::Local("internal error: no upload to go on with".into()));
                };
                let dest = Destination::Upload { upload, mode: plan.mode };
                rt.block_on(self.receive_rest(dest, plan.base, plan.done, Vec::new(), finished))
            }
        }
    }

    /// The outcome of a transfer that ran: ABOR wins, then a helper's
    /// failure, then what the engine returned.
    fn conclude(&self, result: Result<u64, TransferError>) -> Result<u64, TransferError> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(TransferError::Aborted);
        }
        if let Some(e) = self.failure.lock().unwrap_or_else(|e| e.into_inner()).take() {
            if result.is_err() {
                return Err(e);
            }
        }
        if let (Ok(_), Some(cut)) = (&result, &self.cut) {
            return Err(TransferError::Local(cut.clone()));
        }
        match result {
            // The engine stopped itself because a stream failed; the
            // failure, not an ABOR, is the outcome.
            Err(TransferError::Aborted) => Err(TransferError::ConnectionLost("a data connection failed".into())),
            r => r,
        }
    }

    /// Waits for `fut` unless ABOR comes first.
    async fn abortable<T>(&self, fut: impl std::future::Future<Output = T>) -> Result<T, TransferError> {
        let notify = self.abort_notify.clone();
        tokio::select! {
            r = fut => Ok(r),
            _ = notify.notified() => Err(TransferError::Aborted),
        }
    }

    /// How this transfer's data connections are opened: the session's
    /// buffer size, the data timeout, PROT, and the profiler's hook.
    fn channel_options(&self) -> ChannelOptions {
        ChannelOptions {
            buffer: self.buffer(),
            timeout: self.timeout(),
            protection: self.ctx.protection.clone(),
            sealing: self.ctx.sealing.clone(),
            path_rate: self.request.channel.path_rate.map(|r| r as f64),
            observer: probe(&self.ctx.streams, &self.probes, &self.request.path),
        }
    }

    /// A UDT sender's cached connections still hold unsent data when the
    /// last block is queued (up to a second of it); the transfer's `udt=`
    /// counters and the 226 wait until it has all been sent once (bounded
    /// by the data timeout), so the line reports what UDT really sent.
    /// Not until the client acknowledged it: that took a round trip more
    /// before every 226 (session 18; the cached connection stays open and
    /// repairs what the client reports lost, and the client's transfer ends
    /// only with every byte). TCP connections return at once.
    async fn wait_sent(&mut self) {
        if self.request.channel.transport.as_str() != "udt" || self.ctx.channels.cached.is_empty() {
            return;
        }
        let timeout = self.timeout();
        let conns = std::mem::take(&mut self.ctx.channels.cached);
        let waited = tokio::task::spawn_blocking(move || {
            for c in &conns {
                // Still unsent after the data timeout: the next
                // transfer's stall detection deals with such a peer.
                let _ = c.wait_sent(timeout);
            }
            conns
        })
        .await;
        // (A panicked wait loses the connections: the next transfer opens new ones.)
        self.ctx.channels.cached = waited.unwrap_or_default();
    }

    /// Takes a new data connection into this transfer: a place in the
    /// server's budget, and the abort signal.
    fn data_conn(&self, conn: DataConn) -> Result<DataConn, TransferError> {
        let permit = self.ctx.server.data_connections.clone().try_acquire_owned().map_err(|_| too_many_data())?;
        self.permits.lock().unwrap_or_else(|e| e.into_inner()).push(permit);
        self.ctl.abort.register(&*conn).map_err(|e| TransferError::DataConnection(e.to_string()))?;
        Ok(conn)
    }

    async fn connect(&self) -> Result<DataConn, TransferError> {
        let DataEndpoint::Active(addr) = self.request.endpoint else {
            return Err(TransferError::DataConnection("no PORT address to connect to".into()));
        };
        let opts = self.channel_options();
        let transport = transport_for(&self.ctx.server, self.request.channel.transport);
        let conn = self
            .abortable(transport.connect(addr, Some(self.ctx.local_ip), &opts))
            .await?
            .map_err(|e| TransferError::DataConnection(e.to_string()))?;
        self.data_conn(conn)
    }

    async fn connect_many(&self, n: usize) -> Result<Vec<DataConn>, TransferError> {
        let connects = (0..n).map(|_| self.connect());
        futures::future::join_all(connects).await.into_iter().collect()
    }

    async fn stream_mode(&mut self, prepared: Prepared, size: Option<u64>) -> Result<u64, TransferError> {
        let _ = self.tx.send(TransferEvent::Started { size, reused: false }).await;
        let mut sock = match &self.request.endpoint {
            DataEndpoint::Active(_) => self.connect().await?,
            DataEndpoint::Passive | DataEndpoint::DelayedPassive(_) => {
                let listener = self
                    .ctx
                    .channels
                    .listener
                    .take()
                    .ok_or_else(|| TransferError::DataConnection("no passive listener is open".into()))?;
                let opts = self.channel_options();
                let s = self
                    .abortable(data::accept_from(&*listener, &opts, self.accept_policy(), self.timeout()))
                    .await?
                    .map_err(|e| TransferError::DataConnection(e.to_string()))?;
                self.data_conn(s)?
            }
        };
        let ascii = self.request.ty == TransferType::Ascii;
        let ctl = self.ctl.clone();
        let timeout = self.timeout();
        let max = self.ctx.server.config.max_file_size;
        let written_to = self.written_to.clone();
        let copy = tokio::task::spawn_blocking(move || -> Result<Copied, TransferError> {
            let map = |e: CopyError| copy_error(e, timeout, max);
            let rate = ctl.rate.as_deref();
            let sent = match prepared {
                Prepared::Send { source, ranges, .. } => {
                    let (start, len) = match ranges.as_slice() {
                        [] => (0, Some(0)),
                        [r] => (r.start, Some(r.end - r.start)),
                        _ => return Err(TransferError::BadRestart("stream mode sends one range".into())),
                    };
                    if ascii {
                        let end = len.map(|l| start + l);
                        stream::send_ascii(&*source, start, end, &mut sock, &ctl.progress, &ctl.abort)
                    } else {
                        stream::send(&*source, start, len, &mut sock, &ctl.progress, &ctl.abort, rate, ctl.path)
                    }
                }
                Prepared::Listing(job) => {
                    let mut out = io::BufWriter::with_capacity(64 << 10, &mut sock);
                    let r = job.write_to(&mut out, &ctl.abort);
                    drop(out);
                    r.map_err(|e| if ctl.abort.is_aborted() { CopyError::Aborted } else { CopyError::Network(e) })
                }
                Prepared::Chunks(chunks) => stream::send_chunks(chunks, &mut sock, &ctl.abort),
                Prepared::Receive { sink, base, .. } => {
                    let target = sink.sink(false)?;
                    let to = ReceiveTo { offset: base, ascii, limit: Some(max), written: Some(&written_to) };
                    let (bytes, end) =
                        stream::receive(&mut sock, &*target, to, &ctl.progress, &ctl.abort, rate, ctl.path)
                            .map_err(map)?;
                    if let Destination::Upload { upload, mode: StoreMode::Replace | StoreMode::Resume } = &sink {
                        if !upload.in_place() {
                            // Older, longer content is not part of the new file.
                            upload.file.set_len(end).map_err(|e| map(CopyError::Disk(e)))?;
                        }
                    }
                    return Ok(Copied::Received { sink, bytes, end });
                }
            };
            let n = sent.map_err(map)?;
            stream::finish_send(&mut sock).map_err(map)?;
            Ok(Copied::Sent(n))
        });
        let copied = self.with_checkpoints(copy).await.map_err(|e| TransferError::Local(e.to_string()))??;
        let ended = Instant::now();
        match copied {
            Copied::Sent(n) => Ok(n),
            Copied::Received { sink: Destination::Discard, bytes, .. } => Ok(bytes),
            // Refused before any data (`prepare_stream_upload`: MODE E only).
            Copied::Received { sink: Destination::Stream(_), .. } => {
                Err(TransferError::Local("a streamed upload needs MODE E".into()))
            }
            Copied::Received { sink: Destination::Upload { upload, .. }, bytes, end } => {
                self.check_stream_complete(end, &upload, ended).await?;
                self.commit(upload).await?;
                Ok(bytes)
            }
        }
    }

    /// Waits for `fut` (the copy of an upload), checkpointing what is on
    /// disk meanwhile: after [`FIRST_CHECKPOINT`], then at doubling
    /// intervals up to the restart-marker interval.
    async fn with_checkpoints<T>(&self, fut: impl std::future::Future<Output = T>) -> T {
        tokio::pin!(fut);
        if self.upload.is_none() && self.stream_up.is_none() {
            return fut.await;
        }
        let interval = Duration::from_secs(
            self.request.markers.restart_secs.unwrap_or(self.ctx.server.config.marker_interval_secs).max(1).into(),
        );
        let mut step = FIRST_CHECKPOINT.min(interval);
        let mut next = tokio::time::Instant::now() + step;
        loop {
            tokio::select! {
                r = &mut fut => return r,
                _ = tokio::time::sleep_until(next) => {
                    self.checkpoint().await;
                    step = (step * 2).min(interval);
                    next = tokio::time::Instant::now() + step;
                }
            }
        }
    }

    /// What the upload's file holds now: (header-coordinate ranges this
    /// transfer and REST account for, for markers; file ranges, for the
    /// record).
    fn held_now(&self) -> (RangeSet, RangeSet) {
        let Some((upload, plan)) = &self.upload else { return (RangeSet::new(), RangeSet::new()) };
        if self.request.mode == TransferMode::Stream {
            let pos = self.written_to.load(Ordering::Acquire);
            let mut file = match plan.mode {
                StoreMode::Patch => upload.held.clone(),
                _ => RangeSet::new(),
            };
            let from = if plan.mode == StoreMode::Patch { plan.base } else { 0 };
            if pos > from {
                file.insert(from..pos);
            }
            return (file.clone(), file);
        }
        let mut header = self.received.received.lock().unwrap_or_else(|e| e.into_inner()).clone();
        header.union(&plan.done);
        let mut file = upload.held.clone();
        for r in header.ranges() {
            file.insert(r.start + plan.base..r.end + plan.base);
        }
        (header, file)
    }

    /// Syncs the upload's data and records it; then the 111 marker may
    /// report it.
    async fn checkpoint(&self) {
        if let Some(up) = self.stream_up.clone() {
            // A streamed upload: each incomplete file's arrived ranges
            // synced and recorded; the marker reports them in the line's
            // coordinates (complete files whole), which the client maps
            // back to its files' restart records.
            match tokio::task::spawn_blocking(move || up.checkpoint()).await {
                Ok(Ok(header)) => {
                    *self.durable.lock().unwrap_or_else(|e| e.into_inner()) = header;
                    let _ = self.tx.try_send(TransferEvent::Checkpointed);
                }
                Ok(Err(e)) => tracing::warn!(error = %e, path = %self.request.path, "checkpoint failed"),
                Err(_) => {}
            }
            return;
        }
        let Some((upload, _)) = &self.upload else { return };
        let (header, file) = self.held_now();
        let upload = upload.clone();
        match tokio::task::spawn_blocking(move || upload.checkpoint(&file)).await {
            Ok(Ok(())) => {
                *self.durable.lock().unwrap_or_else(|e| e.into_inner()) = header;
                let _ = self.tx.try_send(TransferEvent::Checkpointed);
            }
            Ok(Err(e)) => tracing::warn!(error = %e, path = %self.request.path, "checkpoint failed"),
            Err(_) => {}
        }
    }

    async fn block_mode(&mut self, prepared: Prepared, size: Option<u64>, reuse: bool) -> Result<u64, TransferError> {
        let plan = |ranges, header_base| SendPlan { ranges, header_base, block_size: mode_e::DEFAULT_BLOCK_SIZE };
        match prepared {
            Prepared::Send { source, ranges, header_base } => {
                self.block_send(source, plan(ranges, header_base), size, reuse).await
            }
            Prepared::Listing(job) => {
                // MODE E needs the length up front: the listing is spooled
                // to an unnamed temporary file (disk, not memory).
                let abort = self.ctl.abort.clone();
                let spooled = tokio::task::spawn_blocking(move || -> io::Result<(std::fs::File, u64)> {
                    let file = tempfile::tempfile()?;
                    let mut out = io::BufWriter::with_capacity(64 << 10, &file);
                    let n = job.write_to(&mut out, &abort)?;
                    drop(out);
                    Ok((file, n))
                })
                .await
                .map_err(|e| TransferError::Local(e.to_string()))?
                .map_err(|e| TransferError::Local(format!("cannot spool the listing: {e}")))?;
                let plan = SendPlan::whole(spooled.1, mode_e::DEFAULT_BLOCK_SIZE);
                self.block_send(Arc::new(spooled.0), plan, size, reuse).await
            }
            Prepared::Chunks(chunks) => self.block_send_chunks(chunks, reuse).await,
            Prepared::Receive { sink, base, done } => self.block_receive(sink, base, done, reuse).await,
        }
    }

    async fn block_send(
        &mut self,
        source: Arc<dyn BlockSource>,
        plan: SendPlan,
        size: Option<u64>,
        reuse: bool,
    ) -> Result<u64, TransferError> {
        let _ = self.tx.send(TransferEvent::Started { size, reused: reuse }).await;
        let mut streams = std::mem::take(&mut self.ctx.channels.cached);
        for s in &streams {
            self.ctl.abort.register(&**s).map_err(|e| TransferError::DataConnection(e.to_string()))?;
        }
        // The sender opens what parallelism asks for beyond what is cached
        // (GFD.20: a receiver accepts any number of connections), all at
        // once: one after another would cost a round trip each.
        let missing = (self.request.channel.parallelism.max(1) as usize).saturating_sub(streams.len());
        streams.extend(self.connect_many(missing).await?);
        let ctl = self.ctl.clone();
        let timeout = self.timeout();
        let max = self.ctx.server.config.max_file_size;
        let streams = tokio::task::spawn_blocking(move || mode_e::send(streams, &*source, &plan, &ctl))
            .await
            .map_err(|e| TransferError::Local(e.to_string()))?
            .map_err(|e| copy_error(e, timeout, max))?;
        self.ctx.channels.cached = streams;
        Ok(self.ctl.progress.load(Ordering::Relaxed))
    }

    /// MODE E for data produced while it is sent: one stream carries it
    /// (`mode_e::send_chunks`); the others, cached or opened for the
    /// parallelism asked, carry only their EOD.
    async fn block_send_chunks(&mut self, chunks: ferry_io::stream::Chunks, reuse: bool) -> Result<u64, TransferError> {
        let _ = self.tx.send(TransferEvent::Started { size: None, reused: reuse }).await;
        let mut streams = std::mem::take(&mut self.ctx.channels.cached);
        for s in &streams {
            self.ctl.abort.register(&**s).map_err(|e| TransferError::DataConnection(e.to_string()))?;
        }
        let missing = (self.request.channel.parallelism.max(1) as usize).saturating_sub(streams.len());
        streams.extend(self.connect_many(missing).await?);
        let ctl = self.ctl.clone();
        let timeout = self.timeout();
        let max = self.ctx.server.config.max_file_size;
        let streams = tokio::task::spawn_blocking(move || mode_e::send_chunks(streams, chunks, &ctl))
            .await
            .map_err(|e| TransferError::Local(e.to_string()))?
            .map_err(|e| copy_error(e, timeout, max))?;
        self.ctx.channels.cached = streams;
        Ok(self.ctl.progress.load(Ordering::Relaxed))
    }

    async fn block_receive(
        &mut self,
        dest: Destination,
        base: u64,
        done: RangeSet,
        reuse: bool,
    ) -> Result<u64, TransferError> {
        let _ = self.tx.send(TransferEvent::Started { size: None, reused: reuse }).await;
        let initial = std::mem::take(&mut self.ctx.channels.cached);
        self.receive_rest(dest, base, done, initial, None).await
    }

    /// Receives an upload on `initial` and every connection that arrives,
    /// then commits it. `finished`: a connection that has already carried
    /// its part of this transfer (the one-thread path's), kept for the next.
    async fn receive_rest(
        &mut self,
        dest: Destination,
        base: u64,
        done: RangeSet,
        initial: Vec<DataConn>,
        finished: Option<DataConn>,
    ) -> Result<u64, TransferError> {
        let timeout = self.timeout();
        for s in &initial {
            self.ctl.abort.register(&**s).map_err(|e| TransferError::DataConnection(e.to_string()))?;
        }
        let (conn_tx, mut conn_rx) = mpsc::channel(16);
        let acceptor = self.ctx.channels.listener.clone().map(|listener| {
            let policy = self.accept_policy();
            let abort = self.ctl.abort.clone();
            let opts = self.channel_options();
            let path = self.request.path.clone();
            let (budget, permits, failure) =
                (self.ctx.server.data_connections.clone(), self.permits.clone(), self.failure.clone());
            tokio::spawn(async move {
                while let Ok((sock, _)) = listener.accept(&opts, policy).await {
                    let Ok(permit) = budget.clone().try_acquire_owned() else {
                        tracing::warn!(%path, "refused a data connection: the server's limit is reached");
                        failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(too_many_data());
                        abort.abort();
                        break;
                    };
                    permits.lock().unwrap_or_else(|e| e.into_inner()).push(permit);
                    if abort.register(&*sock).is_err() {
                        continue;
                    }
                    if conn_tx.send(sock).await.is_err() {
                        break;
                    }
                }
            })
        });
        let sink = dest.sink(self.ctx.server.config.direct_io)?;
        let limit = match &dest {
            Destination::Upload { upload, mode } => Some(self.limit(*mode, base, upload)),
            Destination::Discard => None,
            Destination::Stream(up) => Some(up.layout.total()),
        };
        let spec = ReceiveSpec {
            base,
            limit,
            max_connections: self.ctx.server.config.max_data_connections_per_session.clamp(1, mode_e::MAX_CONNECTIONS),
        };
        // Not dropped on ABOR: an abort shuts the sockets down and the
        // receive ends once every reader has returned, so nothing writes
        // into the file after the transfer has ended.
        let received =
            mode_e::receive(initial, &mut conn_rx, sink, spec, self.received.clone(), self.ctl.clone(), timeout);
        let result = self.with_checkpoints(received).await;
        if let Some(a) = acceptor {
            a.abort();
        }
        let max = self.ctx.server.config.max_file_size;
        self.ctx.channels.cached = result.map_err(|e| copy_error(e, timeout, max))?;
        self.ctx.channels.cached.extend(finished);
        if let Destination::Stream(up) = &dest {
            up.finish()?;
        }
        if let Destination::Upload { upload, mode } = dest {
            self.check_block_complete(&done)?;
            if self.control_gone().await {
                return Err(client_left());
            }
            if let (Some(size), StoreMode::Replace | StoreMode::Resume, false) =
                (self.request.allocation, mode, upload.in_place())
            {
                // Exactly the announced bytes (a resumed partial may hold
                // more from an earlier, longer upload).
                upload.file.set_len(size).map_err(|e| TransferError::Local(e.to_string()))?;
            }
            self.commit(upload).await?;
        }
        Ok(self.ctl.progress.load(Ordering::Relaxed))
    }

    /// The largest block end (header coordinates) a receiver accepts: the
    /// size ALLO announced for a plain STOR, and never past the largest
    /// file this server stores.
    fn limit(&self, mode: StoreMode, base: u64, upload: &Upload) -> u64 {
        upload_limit(self.ctx.server.config.max_file_size, self.request.allocation, mode, base, upload)
    }

    /// Whether the client's control connection is gone, as the kernel
    /// sees it: a FIN or RST that arrived is visible in the socket's TCP
    /// state before any task has read it (`control_closed` is set by the
    /// reader only once it has).
    async fn control_gone(&self) -> bool {
        self.ctx.control_closed.load(Ordering::SeqCst) || hung_up(self.ctx.control.as_fd())
    }

    /// MODE E says when the data is complete (EOF and EODC), but a client
    /// resuming with the wrong ranges could still leave holes: when ALLO
    /// announced the size, what arrived plus what REST said was there must
    /// cover it before the file takes its final name.
    fn check_block_complete(&self, done: &RangeSet) -> Result<(), TransferError> {
        block_complete(&self.request, &self.received, done)
    }
}

/// Uploads of at most this many bytes (announced by ALLO) in a `BSTO SYNC`
/// batch run on one thread ([`Task::one_thread`]): they arrive well within
/// the first checkpoint's second on any path where batches matter.
const ONE_THREAD_MAX_UPLOAD: u64 = 8 << 20;

enum Step {
    /// Sent, or received and committed: the connection to keep.
    Done(Option<DataConn>),
    /// The cached connection's part arrived but the sender counted more
    /// connections: the rest comes the usual way (this one is kept).
    Rest(Option<DataConn>),
}

/// The commit of a complete small upload on the thread that received it:
/// the checks and steps of `block_receive` and `Task::commit` for a batch
/// file, in the same order.
#[allow(clippy::too_many_arguments)]
fn commit_small(
    req: &TransferRequest,
    received: &ReceiveState,
    done: &RangeSet,
    upload: &Upload,
    mode: StoreMode,
    facts: Option<(i64, u32)>,
    batch: &BatchDurability,
    verdict: &Verdict,
    control_gone: impl FnOnce() -> bool,
) -> Result<(), TransferError> {
    block_complete(req, received, done)?;
    if control_gone() {
        return Err(client_left());
    }
    // A resumed partial may hold more from an earlier, longer upload: cut
    // to the announced size. A fresh one (`Replace`, no REST on this path)
    // started empty and took writes only below the ALLO size (the
    // receiver's limit), all of which `block_complete` saw arrive: it is
    // that size already (one `ftruncate` less per small upload).
    if let (Some(size), StoreMode::Resume, false) = (req.allocation, mode, upload.in_place()) {
        upload.file.set_len(size).map_err(|e| TransferError::Local(e.to_string()))?;
    }
    if !verdict.commit() {
        return Err(TransferError::Aborted);
    }
    commit_to_batch(upload, facts, batch).map_err(fs_to_transfer)
}

/// A batch entry's commit: its time and mode set on the open partial,
/// then renamed under its name, durable with the batch's final reply.
fn commit_to_batch(upload: &Upload, facts: Option<(i64, u32)>, batch: &BatchDurability) -> Result<(), FsError> {
    if let Some((secs, mode)) = facts {
        upload.set_facts(secs, mode)?;
    }
    upload.commit_deferred(batch)
}

/// The largest block end (header coordinates) a receiver accepts (see
/// [`Task::limit`]).
fn upload_limit(max: u64, allocation: Option<u64>, mode: StoreMode, base: u64, upload: &Upload) -> u64 {
    let room = match mode {
        StoreMode::Append => max.saturating_sub(upload.existing_len),
        _ => max.saturating_sub(base),
    };
    match (mode, allocation) {
        (StoreMode::Replace | StoreMode::Resume, Some(size)) => size.min(room),
        _ => room,
    }
}

/// See [`Task::check_block_complete`].
fn block_complete(req: &TransferRequest, received: &ReceiveState, done: &RangeSet) -> Result<(), TransferError> {
    let (Some(size), None) = (req.allocation, req.window) else { return Ok(()) };
    let mut have = done.clone();
    have.union(&received.received.lock().unwrap_or_else(|e| e.into_inner()));
    let missing = have.missing(size);
    if !missing.is_empty() {
        let holes: RangeSet = missing.iter().fold(RangeSet::new(), |mut s, r| {
            s.insert(r.clone());
            s
        });
        return Err(TransferError::ConnectionLost(format!(
            "the transfer ended with byte ranges {holes} of the {size} announced by ALLO missing; the partial \
             upload is kept for a resume"
        )));
    }
    Ok(())
}

impl Task {
    /// In stream mode the end of the data is just the connection closing,
    /// which a client that died mid-upload also does. Before an upload is
    /// renamed to its final name, refuse it when the size announced by ALLO
    /// was not reached, or when the client's control connection is gone —
    /// decided from the kernel's TCP state of that connection, not from
    /// whether a task has noticed yet (a killed client closes both; a
    /// client that finished keeps its control connection open for the 226).
    async fn check_stream_complete(&self, end: u64, upload: &Arc<Upload>, ended: Instant) -> Result<(), TransferError> {
        let mut announced = false;
        if let (Some(size), TransferType::Image, None) = (self.request.allocation, self.request.ty, self.request.window)
        {
            if end != size {
                return Err(TransferError::ConnectionLost(format!(
                    "the file has {end} bytes but ALLO announced {size}; the partial upload is kept for a resume"
                )));
            }
            announced = true;
        }
        // Without ALLO nothing else tells a short file from a cut one.
        if self.ctl.abort.is_aborted() || self.control_gone().await {
            return Err(client_left());
        }
        if !announced {
            crate::metrics::STREAM_COMMIT_WATCHES.inc();
            // Start writing the data back while watching the control
            // connection: the commit's sync then finds less left to write.
            let (upload, control) = (upload.clone(), self.ctx.control.clone());
            let deadline = ended + STREAM_COMMIT_GRACE;
            let gone = tokio::task::spawn_blocking(move || {
                let _ = ferry_io::disk::start_writeback(&upload.file);
                hangs_up_before(control.as_fd(), deadline)
            })
            .await
            .unwrap_or(true);
            if gone || self.ctl.abort.is_aborted() {
                return Err(client_left());
            }
        }
        Ok(())
    }

    /// A batch entry's modification time (seconds) and mode, if it named them.
    fn entry_facts(&self) -> Option<(i64, u32)> {
        self.ctx.facts.as_ref().map(|f| (ferry_proto::facts::parse_time_val(&f.mtime).unwrap_or(0), f.mode))
    }

    /// Commits the upload, unless ABOR or the client's departure came
    /// first ([`Verdict`]). From here on the transfer is complete whatever
    /// arrives on the control connection.
    async fn commit(&self, upload: Arc<Upload>) -> Result<(), TransferError> {
        if !self.verdict.commit() {
            return Err(TransferError::Aborted);
        }
        // A batch entry's time and mode, set before the rename: the file
        // appears under its name with them (no MFMT and SITE CHMOD after).
        let facts = self.entry_facts();
        let set_facts = move |upload: &Upload| match facts {
            Some((secs, mode)) => upload.set_facts(secs, mode),
            None => Ok(()),
        };
        if let Some(batch) = self.ctx.batch.clone() {
            // Durability per batch: complete and renamed now, durable at
            // the batch's final reply. The 111 markers keep reporting only
            // what is synced.
            return tokio::task::spawn_blocking(move || commit_to_batch(&upload, facts, &batch))
                .await
                .map_err(|e| TransferError::Local(e.to_string()))?
                .map_err(fs_to_transfer);
        }
        tokio::task::spawn_blocking(move || {
            set_facts(&upload)?;
            upload.commit_grouped()
        })
        .await
        .map_err(|e| TransferError::Local(e.to_string()))?
        .map_err(fs_to_transfer)?;
        // Synced: the final restart marker may report everything.
        *self.durable.lock().unwrap_or_else(|e| e.into_inner()) = self.held_now().0;
        Ok(())
    }
}

/// `TCP_ESTABLISHED` in `struct tcp_info`'s `tcpi_state`.
const TCP_ESTABLISHED: u8 = 1;

/// Whether the peer of `control` has closed or reset it, as the kernel
/// sees it: a FIN or RST that arrived shows in the TCP state before any
/// task has read it. (A half-close counts: an FTP client that has stopped
/// sending commands has left.)
pub(crate) fn hung_up(control: std::os::fd::BorrowedFd<'_>) -> bool {
    ferry_io::tcpinfo::raw_tcp_info(control).map(|(info, _)| info.state != TCP_ESTABLISHED).unwrap_or(true)
}

/// Whether the peer of `control` closes it before `deadline`: returns as
/// soon as it does (`ppoll` for `POLLRDHUP`, a FIN; a reset shows as
/// `POLLHUP`/`POLLERR`), or at the deadline with what the kernel then says.
fn hangs_up_before(control: std::os::fd::BorrowedFd<'_>, deadline: Instant) -> bool {
    loop {
        if hung_up(control) {
            return true;
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else {
            return false;
        };
        use nix::poll::{ppoll, PollFd, PollFlags};
        let mut fds = [PollFd::new(control, PollFlags::from_bits_retain(libc::POLLRDHUP))];
        if ppoll(&mut fds, Some(nix::sys::time::TimeSpec::from_duration(left)), None).is_ok_and(|n| n > 0) {
            // Something happened to the connection: the TCP state says what.
            return hung_up(control);
        }
    }
}

fn client_left() -> TransferError {
    TransferError::ConnectionLost(
        "the client closed its control connection during the upload; the partial upload is kept for a resume".into(),
    )
}

fn too_many_data() -> TransferError {
    TransferError::DataConnection("the server has as many data connections open as it allows; try again later".into())
}

enum Copied {
    Sent(u64),
    Received { sink: Destination, bytes: u64, end: u64 },
}

fn fs_to_transfer(e: FsError) -> TransferError {
    match e {
        FsError::NoSpace => TransferError::NoSpace,
        other => TransferError::File(other),
    }
}

fn copy_error(e: CopyError, timeout: Duration, max_file_size: u64) -> TransferError {
    match e {
        CopyError::Aborted => TransferError::Aborted,
        CopyError::Network(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
            TransferError::ConnectionLost(format!("no data moved for {} s", timeout.as_secs()))
        }
        CopyError::Network(e) => TransferError::ConnectionLost(e.to_string()),
        CopyError::Disk(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) => TransferError::NoSpace,
        CopyError::Disk(e) if e.raw_os_error() == Some(libc::EFBIG) => {
            TransferError::File(FsError::TooLarge(max_file_size))
        }
        CopyError::Disk(e) => TransferError::Local(e.to_string()),
    }
}

/// The memory-to-memory endpoints (`memory_paths`): what GridFTP users reach
/// for as `/dev/zero` and `/dev/null` to measure a network without disks.
fn memory_endpoint(config: &crate::config::ServerConfig, req: &TransferRequest) -> Option<MemoryPath> {
    if !config.memory_paths {
        return None;
    }
    match (req.path.as_str(), &req.kind) {
        ("/dev/zero", TransferKind::Retrieve) => Some(MemoryPath::Zero(config.memory_zero_size)),
        ("/dev/null", TransferKind::Store | TransferKind::Append) => Some(MemoryPath::Null),
        _ => None,
    }
}

enum MemoryPath {
    Zero(u64),
    Null,
}

/// Opens the file or builds the listing, before any data connection.
fn prepare(
    root: &Arc<Root>,
    config: &crate::config::ServerConfig,
    req: &TransferRequest,
    user: &str,
) -> Result<(Prepared, Option<u64>), TransferError> {
    let rest_offset = match &req.restart {
        Some(RestArg::Offset(o)) => *o,
        _ => 0,
    };
    // What the client already has: REST N means [0, N); REST ranges are
    // the ranges themselves (GridFTP: end-exclusive, "done" ranges).
    let done = match &req.restart {
        None => RangeSet::new(),
        Some(RestArg::Offset(n)) => RangeSet::from_range(0..*n),
        Some(RestArg::Ranges(r)) => r.clone(),
    };
    let memory = memory_endpoint(config, req);
    if let Some(MemoryPath::Null) = memory {
        return Ok((Prepared::Receive { sink: Destination::Discard, base: 0, done }, None));
    }
    match &req.kind {
        TransferKind::Retrieve => {
            let (source, size): (Arc<dyn BlockSource>, u64) = match memory {
                Some(MemoryPath::Zero(size)) => {
                    (Arc::new(ZeroSource::new(size).map_err(|e| TransferError::Local(e.to_string()))?), size)
                }
                _ => {
                    let (file, facts) = root.open_read(&req.path).map_err(TransferError::File)?;
                    // Stream mode sends with sendfile from the page cache:
                    // direct I/O is for the staged MODE E path.
                    let direct = config.direct_io && req.mode == TransferMode::ExtendedBlock;
                    let d = direct_file(&file, direct);
                    // Readahead advice matters for a file read for longer
                    // than the kernel's default window; a small file's
                    // `fstatfs`, `fadvise` and log line were a third of
                    // a small download's syscalls at the server.
                    if d.is_some() || facts.size >= SMALL_READ {
                        let plan = ferry_io::disk::DiskPlan::for_read(&file, d.is_some());
                        plan.apply_read(&file);
                        tracing::info!(disk = %plan, "disk plan");
                    }
                    match d {
                        Some(d) => (Arc::new(d), facts.size),
                        None => (Arc::new(file), facts.size),
                    }
                }
            };
            let (start, end) = match req.window {
                Some(w) => (w.offset.min(size), w.offset.saturating_add(w.length.unwrap_or(u64::MAX)).min(size)),
                None => (0, size),
            };
            let window = end - start;
            if rest_offset > window {
                return Err(TransferError::BadRestart(format!(
                    "offset {rest_offset} is beyond the end of the file ({window} bytes)"
                )));
            }
            let ranges: Vec<Range<u64>> =
                done.missing(window).into_iter().map(|r| r.start + start..r.end + start).collect();
            let total = ranges.iter().map(|r| r.end - r.start).sum();
            Ok((Prepared::Send { source, ranges, header_base: start }, Some(total)))
        }
        TransferKind::Store | TransferKind::Append => {
            let esto = req.window.map(|w| w.offset);
            let mode = match (&req.kind, esto, &req.restart) {
                (TransferKind::Append, _, _) => StoreMode::Append,
                (_, Some(_), _) => StoreMode::Patch,
                (_, None, None) | (_, None, Some(RestArg::Offset(0))) => StoreMode::Replace,
                _ => StoreMode::Resume,
            };
            let stream = req.mode == TransferMode::Stream;
            if stream && rest_offset > config.max_file_size {
                return Err(TransferError::File(FsError::TooLarge(config.max_file_size)));
            }
            let info = UploadInfo { user: user.to_string(), allocation: req.allocation };
            let upload = root.begin_store(&req.path, mode, &info).map_err(fs_to_transfer)?;
            // A restart claims the partial file already holds `done`; only
            // what its record says is on disk may be claimed. Trusting
            // more would commit a file with holes.
            if mode == StoreMode::Resume {
                let unheld: RangeSet = done.ranges().iter().fold(RangeSet::new(), |mut acc, r| {
                    let mut have = RangeSet::from_range(r.clone());
                    have = have.difference(&upload.held);
                    acc.union(&have);
                    acc
                });
                if !unheld.is_empty() {
                    return Err(TransferError::BadRestart(format!(
                        "the restart ranges claim bytes {unheld} that this server does not hold (it holds {})",
                        if upload.held.is_empty() { "none".to_string() } else { upload.held.to_string() }
                    )));
                }
            }
            let base = match mode {
                StoreMode::Append => upload.existing_len,
                StoreMode::Patch => esto.unwrap_or(0) + if stream { rest_offset } else { 0 },
                _ if stream => rest_offset,
                _ => 0,
            };
            let upload = Arc::new(upload);
            Ok((Prepared::Receive { sink: Destination::Upload { upload, mode }, base, done }, None))
        }
        TransferKind::List { format: ListFormat::MachineRecursive, .. } => {
            let limits = crate::mlsr::Limits { max_entries: config.mlsr_max_entries, max_depth: config.mlsr_max_depth };
            let chunks = crate::mlsr::listing(root.clone(), &req.path, req.writable, req.mlst_facts, limits)
                .map_err(TransferError::File)?;
            Ok((Prepared::Chunks(chunks), None))
        }
        TransferKind::List { format, show_hidden } => {
            if *format == ListFormat::Machine {
                // MLSD lists directories only (RFC 3659 §7.1).
                root.is_dir(&req.path).map_err(TransferError::File)?;
            }
            let entries = root.listing(&req.path, *show_hidden).map_err(TransferError::File)?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            let job = ListingJob { entries, format: *format, writable: req.writable, facts: req.mlst_facts, now };
            Ok((Prepared::Listing(job), None))
        }
    }
}
