//! The staging ring: disk and network decoupled by a ring of buffers.
//!
//! The ADTS work found that a GridFTP data path which reads the disk on the
//! same thread that feeds the network leaves each waiting on the other.
//! Staged mode puts a ring of equal buffers between them: on the sending
//! side reader threads fill buffers from the file (prefetching when the
//! number of filled buffers falls below a low-water mark, up to a high-water
//! mark) and the stream threads only send; on the receiving side the stream
//! threads only read from the network into free buffers and writer threads
//! `pwrite` them at their offsets. The buffers are allocated once per ring
//! and recycled — no allocation per block in steady state — and their total
//! is the staging size, which bounds the memory a transfer uses.
//!
//! Synchronous mode (no ring; the stream threads do their own disk I/O, by
//! `sendfile` where possible) stays available, because which one wins
//! depends on the disk: `docs/data-path.md` has the measurements.

use crate::endpoint::{BlockSink, BlockSource};
use crate::stream::{AbortSignal, CopyError};
use std::collections::VecDeque;
use std::io;
use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex};

/// Staging sizes the ring accepts (the 2–64 MiB).
pub const MIN_STAGING: usize = 2 << 20;
pub const MAX_STAGING: usize = 64 << 20;

/// How a transfer stages its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingConfig {
    /// Total bytes of buffers in the ring.
    pub bytes: usize,
    /// Size of one buffer: the network block.
    pub block: usize,
    /// Disk threads (readers when sending, writers when receiving).
    pub disk_threads: usize,
}

impl StagingConfig {
    pub fn new(bytes: usize, block: usize) -> Self {
        Self { bytes: bytes.clamp(MIN_STAGING, MAX_STAGING), block: block.max(4096), disk_threads: 2 }
    }

    /// Buffers in the ring: at least two per disk thread so they overlap.
    pub fn buffers(&self) -> usize {
        (self.bytes / self.block).max(2 * self.disk_threads).max(2)
    }
}

/// Alignment of ring buffers: what `O_DIRECT` asks of memory, offsets and
/// lengths on every Linux file system (4096 covers 512-byte sectors too).
pub const DIRECT_ALIGN: usize = 4096;

/// A ring buffer whose first byte is [`DIRECT_ALIGN`]-aligned, so blocks
/// can go to and from disk with `O_DIRECT` (see
/// [`DirectFile`](crate::endpoint::DirectFile)). A plain `Vec<u8>` of 1 MiB
/// comes from an mmap with a malloc header in front: 16 bytes off.
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    pub fn new(len: usize) -> Self {
        let raw = vec![0u8; len + DIRECT_ALIGN];
        // The heap block does not move when the Vec does, so the offset
        // stays right for the buffer's life.
        let start = raw.as_ptr().align_offset(DIRECT_ALIGN);
        Self { raw, start, len }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// A fixed set of equal buffers handed out and returned.
#[derive(Debug)]
pub struct BufferPool {
    block: usize,
    free: Mutex<Vec<AlignedBuf>>,
    returned: Condvar,
    count: usize,
}

impl BufferPool {
    pub fn new(count: usize, block: usize) -> Self {
        let free = (0..count).map(|_| AlignedBuf::new(block)).collect();
        Self { block, free: Mutex::new(free), returned: Condvar::new(), count }
    }

    pub fn block(&self) -> usize {
        self.block
    }

    /// Bytes allocated for the ring (its memory bound).
    pub fn allocated(&self) -> usize {
        self.count * self.block
    }

    /// A free buffer, waiting for one if all are in use; `None` when the
    /// transfer is aborted meanwhile.
    pub fn take(&self, abort: &AbortSignal) -> Option<AlignedBuf> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if abort.is_aborted() {
                return None;
            }
            if let Some(b) = free.pop() {
                return Some(b);
            }
            free = self
                .returned
                .wait_timeout(free, std::time::Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    pub fn give(&self, buf: AlignedBuf) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(buf);
        self.returned.notify_one();
    }
}

/// Filled buffers waiting for a consumer, with low/high-water marks for the
/// producers.
#[derive(Debug)]
struct Queue<T> {
    items: Mutex<(VecDeque<T>, bool)>, // (items, producers finished)
    changed: Condvar,
    low: usize,
    high: usize,
    /// "send" or "receive": which ring the fill-level trace is about.
    side: &'static str,
    pushes: std::sync::atomic::AtomicU64,
}

/// Every this many buffers a ring traces its fill level
/// (`FERRY_LOG=ferry_io::staging=debug`): how full the ring runs says
/// which side waits — a full send ring or an empty receive ring means the
/// network is the slower side; an empty send ring or a full receive ring,
/// the disk (docs/data-path.md, "Disk to disk").
const TRACE_EVERY: u64 = 64;

impl<T> Queue<T> {
    fn new(low: usize, high: usize, side: &'static str) -> Self {
        Self {
            items: Mutex::new((VecDeque::new(), false)),
            changed: Condvar::new(),
            low,
            high,
            side,
            pushes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Producer side: waits while the queue is at its high-water mark;
    /// once there, resumes only when it has drained below the low-water mark.
    fn push(&self, item: T, abort: &AbortSignal) -> bool {
        let mut q = self.items.lock().unwrap_or_else(|e| e.into_inner());
        if q.0.len() >= self.high {
            while q.0.len() >= self.low.max(1) {
                if abort.is_aborted() {
                    return false;
                }
                q = self
                    .changed
                    .wait_timeout(q, std::time::Duration::from_millis(50))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        q.0.push_back(item);
        let n = self.pushes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n % TRACE_EVERY == 0 {
            tracing::debug!(side = self.side, filled = q.0.len(), high = self.high, buffers = n, "staging ring");
        }
        self.changed.notify_all();
        true
    }

    /// Consumer side: the next item, or `None` when producers are done and
    /// nothing is left (or the transfer was aborted).
    fn pop(&self, abort: &AbortSignal) -> Option<T> {
        let mut q = self.items.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if abort.is_aborted() {
                return None;
            }
            if let Some(item) = q.0.pop_front() {
                self.changed.notify_all();
                return Some(item);
            }
            if q.1 {
                return None;
            }
            q = self.changed.wait_timeout(q, std::time::Duration::from_millis(50)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    fn finish(&self) {
        self.items.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.changed.notify_all();
    }
}

/// One filled buffer on its way to the network: the source range and the
/// buffer holding it.
pub type Staged = (Range<u64>, AlignedBuf);

/// The sending side of a ring: readers prefetch blocks of `ranges` from
/// `source`; stream threads take them with [`next`](Self::next).
#[derive(Debug)]
pub struct SendStaging {
    pool: Arc<BufferPool>,
    queue: Queue<Staged>,
    error: Mutex<Option<CopyError>>,
}

impl SendStaging {
    /// Starts `config.disk_threads` readers over `ranges` (cut into blocks)
    /// inside `scope`.
    pub fn start<'scope, 'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        config: StagingConfig,
        source: &'env dyn BlockSource,
        ranges: &'env [Range<u64>],
        abort: &'env AbortSignal,
    ) -> Arc<SendStaging> {
        let count = config.buffers();
        let staging = Arc::new(SendStaging {
            pool: Arc::new(BufferPool::new(count, config.block)),
            // Prefetch again once half the ring has gone out.
            queue: Queue::new(count / 2, count, "send"),
            error: Mutex::new(None),
        });
        let cursor = Arc::new(Mutex::new(crate::mode_e::BlockCursor::new(ranges.to_vec(), config.block as u64)));
        let active = Arc::new(std::sync::atomic::AtomicUsize::new(config.disk_threads));
        for _ in 0..config.disk_threads {
            let (staging, cursor, active) = (staging.clone(), cursor.clone(), active.clone());
            scope.spawn(move || {
                if let Err(e) = staging.read_loop(source, &cursor, abort) {
                    staging.error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                    abort.abort();
                }
                if active.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
                    staging.queue.finish();
                }
            });
        }
        staging
    }

    fn read_loop(
        &self,
        source: &dyn BlockSource,
        cursor: &Mutex<crate::mode_e::BlockCursor>,
        abort: &AbortSignal,
    ) -> Result<(), CopyError> {
        loop {
            let Some(mut buf) = self.pool.take(abort) else { return Err(CopyError::Aborted) };
            let next = cursor.lock().unwrap_or_else(|e| e.into_inner()).next();
            let Some(block) = next else {
                self.pool.give(buf);
                return Ok(());
            };
            let len = (block.end - block.start) as usize;
            crate::mode_e::read_block(source, &mut buf[..len], block.start)?;
            if !self.queue.push((block, buf), abort) {
                return Err(CopyError::Aborted);
            }
        }
    }

    /// The next filled block, `None` at the end (or on abort).
    pub fn next(&self, abort: &AbortSignal) -> Option<Staged> {
        self.queue.pop(abort)
    }

    /// Returns a sent block's buffer to the ring.
    pub fn recycle(&self, buf: AlignedBuf) {
        self.pool.give(buf);
    }

    /// A reader's failure, if one stopped the transfer.
    pub fn take_error(&self) -> Option<CopyError> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    pub fn allocated(&self) -> usize {
        self.pool.allocated()
    }
}

/// The receiving side of a ring: stream threads fill free buffers from the
/// network and [`submit`](Self::submit) them; writer threads write them at
/// their offsets. [`finish`](Self::finish) waits until everything is on
/// its way to disk.
#[derive(Debug)]
pub struct ReceiveStaging {
    pool: Arc<BufferPool>,
    queue: Arc<Queue<(u64, AlignedBuf, usize)>>,
    error: Arc<Mutex<Option<io::Error>>>,
    writers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    abort: Arc<AbortSignal>,
    /// [`finish`](Self::finish) ran: the writers are done, nothing to stop.
    finished: std::sync::atomic::AtomicBool,
}

impl ReceiveStaging {
    /// `on_written` hears of every range (sink offsets) once its write has
    /// returned: what a checkpoint may record as held.
    pub fn start(
        config: StagingConfig,
        sink: Arc<dyn BlockSink>,
        abort: Arc<AbortSignal>,
        on_written: Option<Arc<dyn Fn(Range<u64>) + Send + Sync>>,
    ) -> Arc<Self> {
        let count = config.buffers();
        let pool = Arc::new(BufferPool::new(count, config.block));
        let queue: Arc<Queue<(u64, AlignedBuf, usize)>> = Arc::new(Queue::new(count, count, "receive"));
        let error = Arc::new(Mutex::new(None));
        let writers = (0..config.disk_threads)
            .map(|_| {
                let (pool, queue, error, sink, abort, on_written) =
                    (pool.clone(), queue.clone(), error.clone(), sink.clone(), abort.clone(), on_written.clone());
                std::thread::spawn(move || {
                    while let Some((offset, buf, len)) = queue.pop(&abort) {
                        let r = sink.write_at(&buf[..len], offset);
                        pool.give(buf);
                        if let (Ok(()), Some(f)) = (&r, &on_written) {
                            f(offset..offset + len as u64);
                        }
                        if let Err(e) = r {
                            error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                            abort.abort();
                            return;
                        }
                    }
                })
            })
            .collect();
        Arc::new(Self { pool, queue, error, writers: Mutex::new(writers), abort, finished: Default::default() })
    }

    pub fn block(&self) -> usize {
        self.pool.block()
    }

    /// A free buffer for the next piece of payload.
    pub fn buffer(&self) -> Option<AlignedBuf> {
        self.pool.take(&self.abort)
    }

    /// Hands a filled buffer to the writers.
    pub fn submit(&self, offset: u64, buf: AlignedBuf, len: usize) -> bool {
        self.queue.push((offset, buf, len), &self.abort)
    }

    /// Waits for the writers to drain the ring; the first write error, if any.
    pub fn finish(&self) -> io::Result<()> {
        self.queue.finish();
        for w in self.writers.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = w.join();
        }
        self.finished.store(true, std::sync::atomic::Ordering::SeqCst);
        match self.error.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub fn allocated(&self) -> usize {
        self.pool.allocated()
    }
}

impl Drop for ReceiveStaging {
    /// A ring dropped without [`finish`](ReceiveStaging::finish) (the
    /// transfer failed) stops its writers. One that finished must not:
    /// the signal is the transfer's, and aborting it shuts down every data
    /// connection registered with it, the cached ones the session keeps
    /// for its next transfer included. The next transfer then read what
    /// the sender had already queued and met EOF: a pipelined tree upload
    /// to a server with a ring failed with "failed to fill whole buffer"
    /// after its first line (session 20).
    fn drop(&mut self) {
        self.queue.finish();
        if !self.finished.load(std::sync::atomic::Ordering::SeqCst) {
            self.abort.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::MemorySink;

    #[test]
    fn sizes_are_clamped_and_the_ring_has_room_to_overlap() {
        let c = StagingConfig::new(1 << 20, 1 << 20);
        assert_eq!(c.bytes, MIN_STAGING);
        assert_eq!(c.buffers(), 4, "two per disk thread at least");
        assert_eq!(StagingConfig::new(1 << 30, 1 << 20).buffers(), 64);
    }

    #[test]
    fn send_staging_yields_every_block_once_from_a_bounded_ring() {
        let data: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
        let ranges = [0..1_000_000u64, 2_000_000..5_000_000];
        let abort = AbortSignal::new();
        let config = StagingConfig { bytes: MIN_STAGING, block: 256 << 10, disk_threads: 3 };
        let mut got = ferry_proto::RangeSet::new();
        std::thread::scope(|scope| {
            let staging = SendStaging::start(scope, config, &data, &ranges, &abort);
            assert_eq!(staging.allocated(), 8 * (256 << 10));
            while let Some((r, buf)) = staging.next(&abort) {
                let n = (r.end - r.start) as usize;
                assert_eq!(&buf[..n], &data[r.start as usize..r.end as usize]);
                assert!(!got.contains_range(&r), "block sent twice");
                got.insert(r);
                staging.recycle(buf);
            }
            assert!(staging.take_error().is_none());
        });
        assert_eq!(got.to_string(), "0-1000000,2000000-5000000");
    }

    #[test]
    fn receive_staging_writes_everything_before_finish_returns() {
        let sink = Arc::new(MemorySink::default());
        let abort = Arc::new(AbortSignal::new());
        let staging = ReceiveStaging::start(
            StagingConfig { bytes: MIN_STAGING, block: 4096, disk_threads: 2 },
            sink.clone(),
            abort,
            None,
        );
        for i in (0..200u64).rev() {
            let mut buf = staging.buffer().unwrap();
            buf[..4096].fill(i as u8);
            assert!(staging.submit(i * 4096, buf, 4096));
        }
        staging.finish().unwrap();
        drop(staging);
        let v = Arc::try_unwrap(sink).unwrap().into_inner();
        assert_eq!(v.len(), 200 * 4096);
        assert!((0..200).all(|i| v[i * 4096] == i as u8 && v[i * 4096 + 4095] == i as u8));
    }

    /// The signal is the transfer's, and its cached data connections are
    /// registered with it: a ring that finished must leave it alone; only
    /// one dropped unfinished (a failed transfer) stops it.
    #[test]
    fn a_finished_ring_leaves_the_transfers_signal_alone() {
        let config = StagingConfig { bytes: MIN_STAGING, block: 4096, disk_threads: 2 };
        let abort = Arc::new(AbortSignal::new());
        let staging = ReceiveStaging::start(config, Arc::new(MemorySink::default()), abort.clone(), None);
        let buf = staging.buffer().unwrap();
        assert!(staging.submit(0, buf, 4096));
        staging.finish().unwrap();
        drop(staging);
        assert!(!abort.is_aborted(), "a finished ring aborted its transfer");
        let staging = ReceiveStaging::start(config, Arc::new(MemorySink::default()), abort.clone(), None);
        drop(staging);
        assert!(abort.is_aborted(), "a ring dropped unfinished left its writers running");
    }
}
