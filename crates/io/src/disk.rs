//! How a transfer reads and writes its file, chosen from the file's size
//! and what the file system says (`docs/data-path.md`, "Disk to disk").
//!
//! The page cache is fast, but a copy that only fills it has not written
//! anything: on this kind of host (23 GiB of memory, `vm.dirty_ratio` 20)
//! a 4 GiB download lands entirely in dirty pages, the kernel starts
//! writing them back only past `dirty_background_ratio` (2.3 GiB) or after
//! 30 s, and the final `fsync` — or the user's `sync` — then waits for the
//! whole file with the network idle. Reading and writing the device at
//! once is what a copy should do, so a receiver on a disk file system
//! *writes behind*: every [`WRITE_BEHIND_WINDOW`] bytes it asks the kernel
//! to start writing back what has arrived (`sync_file_range(2)` with
//! `SYNC_FILE_RANGE_WRITE`, asynchronous: it only queues the pages), and
//! the `fsync` at the end finds little left to do. A sender on a disk file
//! system tells the kernel the file is read once, in order
//! (`posix_fadvise(POSIX_FADV_SEQUENTIAL)`, which doubles the readahead
//! window). tmpfs has no device behind it, so neither applies there.
//!
//! Every choice is a [`DiskPlan`], logged by the caller and shown in
//! `ferry cp --json` (`disk`).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::endpoint::BlockSink;

/// Bytes written between two write-behind kicks: large enough that the
/// kick (a walk of the file's dirty pages) costs nothing next to the copy,
/// small enough that the device starts within a fraction of a second.
pub const WRITE_BEHIND_WINDOW: u64 = 32 << 20;

/// Files smaller than this are left to the kernel: they fit in the dirty
/// budget many times over and the final `fsync` writes them in one go.
pub const WRITE_BEHIND_MIN_FILE: u64 = 64 << 20;

/// What kind of file system a file lives on, from `fstatfs(2)`'s `f_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsKind {
    /// Memory only (tmpfs, ramfs): no device, no writeback, no `O_DIRECT`.
    Memory,
    /// A local block-device file system (ext4, xfs, btrfs, f2fs).
    Disk(&'static str),
    /// Anything else (network file systems, FUSE, overlay): left alone.
    Other(i64),
}

impl FsKind {
    pub fn of(file: &File) -> FsKind {
        let Ok(st) = nix::sys::statfs::fstatfs(file) else { return FsKind::Other(0) };
        #[allow(clippy::unnecessary_cast)]
        let t = st.filesystem_type().0 as i64;
        match t {
            0x0102_1994 | 0x8584_58f6 => FsKind::Memory,
            0xEF53 => FsKind::Disk("ext4"),
            0x5846_5342 => FsKind::Disk("xfs"),
            0x9123_683E => FsKind::Disk("btrfs"),
            0xF2F5_2010 => FsKind::Disk("f2fs"),
            other => FsKind::Other(other),
        }
    }

    pub fn name(&self) -> String {
        match self {
            FsKind::Memory => "tmpfs".into(),
            FsKind::Disk(n) => (*n).into(),
            FsKind::Other(t) => format!("fs {t:#x}"),
        }
    }
}

/// How one file of a transfer is read or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskPlan {
    pub fs: String,
    /// `sync_file_range` kicks every this many bytes (receivers).
    pub write_behind: Option<u64>,
    /// `POSIX_FADV_SEQUENTIAL` (senders).
    pub sequential: bool,
    /// `O_DIRECT` (the user asked for it and the file system has it).
    pub direct: bool,
    pub reason: String,
}

impl std::fmt::Display for DiskPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl DiskPlan {
    /// The plan for writing a file of `size` bytes (when known) to `file`.
    pub fn for_write(file: &File, size: Option<u64>, direct: bool) -> DiskPlan {
        Self::write_on(FsKind::of(file), size, direct)
    }

    /// The rule itself, apart from the system call that feeds it.
    pub fn write_on(fs: FsKind, size: Option<u64>, direct: bool) -> DiskPlan {
        let big = size.is_none_or(|s| s >= WRITE_BEHIND_MIN_FILE);
        let (write_behind, why) = match fs {
            _ if direct => (None, "O_DIRECT: no page cache to write behind"),
            FsKind::Disk(_) if big => (Some(WRITE_BEHIND_WINDOW), "write-behind every 32 MiB (sync_file_range)"),
            FsKind::Disk(_) => (None, "small file: the final fsync writes it"),
            FsKind::Memory => (None, "memory file system: nothing to write back"),
            FsKind::Other(_) => (None, "unknown file system: left to the kernel"),
        };
        DiskPlan {
            fs: fs.name(),
            write_behind,
            sequential: false,
            direct,
            reason: format!(
                "write to {}{}: {why}; fsync before success",
                fs.name(),
                if direct { ", O_DIRECT" } else { "" }
            ),
        }
    }

    /// The plan for reading `file` once from start to end.
    pub fn for_read(file: &File, direct: bool) -> DiskPlan {
        Self::read_on(FsKind::of(file), direct)
    }

    pub fn read_on(fs: FsKind, direct: bool) -> DiskPlan {
        let sequential = matches!(fs, FsKind::Disk(_)) && !direct;
        DiskPlan {
            fs: fs.name(),
            write_behind: None,
            sequential,
            direct,
            reason: format!(
                "read from {}{}",
                fs.name(),
                if direct {
                    ", O_DIRECT"
                } else if sequential {
                    ": sequential readahead (posix_fadvise)"
                } else {
                    ""
                }
            ),
        }
    }

    /// Applies what can be applied to the file itself (the advice).
    pub fn apply_read(&self, file: &File) {
        if self.sequential {
            let _ = nix::fcntl::posix_fadvise(file, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_SEQUENTIAL);
        }
    }

    /// `sink` with the plan's write-behind around it (or `sink` itself).
    pub fn wrap_sink(&self, file: &File, sink: Arc<dyn BlockSink>) -> io::Result<Arc<dyn BlockSink>> {
        Ok(match self.write_behind {
            Some(window) => Arc::new(WriteBehind::new(sink, file.try_clone()?, window)),
            None => sink,
        })
    }
}

/// A sink that starts the kernel's writeback of what it has written every
/// `window` bytes, so the device writes while the network still delivers
/// (see the module's documentation). The kick is `sync_file_range(fd, 0,
/// 0, SYNC_FILE_RANGE_WRITE)`: it queues every dirty page of the file not
/// already under writeback and returns without waiting for them; it blocks
/// only while the device's queue is full, which is the backpressure a
/// copy wants. It promises nothing about durability: the `fsync` before
/// success does. Errors of the kick are ignored for the same reason (the
/// `fsync` reports a failed write).
pub struct WriteBehind {
    inner: Arc<dyn BlockSink>,
    file: File,
    window: u64,
    written: AtomicU64,
    kicked: AtomicU64,
}

impl std::fmt::Debug for WriteBehind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBehind").field("window", &self.window).field("written", &self.written).finish()
    }
}

impl WriteBehind {
    pub fn new(inner: Arc<dyn BlockSink>, file: File, window: u64) -> Self {
        Self { inner, file, window: window.max(1), written: AtomicU64::new(0), kicked: AtomicU64::new(0) }
    }

    /// Counts `n` bytes written; kicks the writeback once per window.
    fn count(&self, n: u64) {
        let total = self.written.fetch_add(n, Ordering::Relaxed) + n;
        let due = total / self.window * self.window;
        let last = self.kicked.load(Ordering::Relaxed);
        // One writer kicks per window; the others carry on writing.
        if due > last && self.kicked.compare_exchange(last, due, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            if let Err(e) = start_writeback(&self.file) {
                tracing::debug!(error = %e, "write-behind kick failed");
            }
        }
    }

    /// Kicks so far (for tests).
    pub fn kicks(&self) -> u64 {
        self.kicked.load(Ordering::Relaxed) / self.window
    }
}

impl BlockSink for WriteBehind {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_at(data, offset)?;
        self.count(data.len() as u64);
        Ok(())
    }

    fn splice_from(&self, sock: BorrowedFd<'_>, offset: u64, len: usize) -> Option<io::Result<usize>> {
        let r = self.inner.splice_from(sock, offset, len)?;
        if let Ok(n) = &r {
            self.count(*n as u64);
        }
        Some(r)
    }

    fn zero_copy(&self) -> bool {
        self.inner.zero_copy()
    }
}

/// Largest pipe a receiving thread asks for (`/proc/sys/fs/pipe-max-size`
/// is 1 MiB by default): one MODE E block fits.
const PIPE_BYTES: usize = 1 << 20;

/// What a step of [`splice_to_file`] gathers in the pipe before writing
/// it out: one lock and one write per 256 KiB rather than per segment.
const SPLICE_BATCH: usize = 256 << 10;

thread_local! {
    /// Each receiving thread's pipe (read end, write end, capacity), made
    /// on first use. Dropped after an error, when it may hold bytes.
    static PIPE: std::cell::RefCell<Option<(OwnedFd, OwnedFd, usize)>> = const { std::cell::RefCell::new(None) };
}

fn new_pipe() -> io::Result<(OwnedFd, OwnedFd, usize)> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| io::Error::from_raw_os_error(e as i32))?;
    // The default 64 KiB works too; a larger pipe means fewer calls.
    let cap = fcntl(&w, FcntlArg::F_SETPIPE_SZ(PIPE_BYTES as i32)).map(|c| c as usize).unwrap_or(64 << 10);
    Ok((r, w, cap))
}

/// Marks an error of [`splice_to_file`] as the socket's (the network's),
/// not the file's: a full disk must be reported as a full disk.
#[derive(Debug)]
pub struct FromNetwork(pub io::Error);

impl std::fmt::Display for FromNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for FromNetwork {}

/// Whether `e` came from the socket side of a splice.
pub fn is_network(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<FromNetwork>())
}

fn errno(e: nix::errno::Errno) -> io::Error {
    let inner = match e {
        // A receive timeout (SO_RCVTIMEO) on the socket.
        nix::errno::Errno::EAGAIN => io::Error::new(io::ErrorKind::TimedOut, "no data arrived in time"),
        e => io::Error::from_raw_os_error(e as i32),
    };
    io::Error::new(inner.kind(), FromNetwork(inner))
}

/// Moves up to `len` bytes from `sock` to `file` at `offset` with
/// `splice(2)`: socket to this thread's pipe (the kernel hands over the
/// socket buffer's pages), pipe to file (one copy, into the page cache).
/// Waits for at least one byte; gathers up to [`SPLICE_BATCH`] before
/// writing, under `turn` when given (see `SerialFile`). Returns the bytes
/// written, 0 at the end of the stream.
pub fn splice_to_file(
    sock: BorrowedFd<'_>,
    file: &File,
    offset: u64,
    len: usize,
    turn: Option<&std::sync::Mutex<()>>,
) -> io::Result<usize> {
    use nix::fcntl::{splice, SpliceFFlags};
    PIPE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(new_pipe()?);
        }
        let (r, w, cap) = slot.as_ref().expect("made above");
        let want = len.min(*cap).min(SPLICE_BATCH.max(1));
        let result = (|| {
            let mut filled = 0usize;
            while filled < want {
                // Block for the first bytes only; then take what is there.
                let flags = if filled == 0 { SpliceFFlags::SPLICE_F_MOVE } else { SpliceFFlags::SPLICE_F_NONBLOCK };
                match splice(sock, None, w, None, want - filled, flags | SpliceFFlags::SPLICE_F_MORE) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(nix::errno::Errno::EAGAIN) if filled > 0 => break,
                    Err(e) => return Err(errno(e)),
                }
            }
            let _turn = turn.map(|t| t.lock().unwrap_or_else(|e| e.into_inner()));
            let mut off = i64::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            let mut left = filled;
            while left > 0 {
                match splice(r, None, file, Some(&mut off), left, SpliceFFlags::SPLICE_F_MOVE) {
                    Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the file took no bytes")),
                    Ok(n) => left -= n,
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(io::Error::from_raw_os_error(e as i32)),
                }
            }
            Ok(filled)
        })();
        if result.is_err() {
            *slot = None;
        }
        result
    })
}

/// Reads from the blocking socket `sock` until `buf` is full or the
/// stream ends; the bytes read. Errors are marked as the network's
/// ([`is_network`]), as [`splice_to_file`]'s are.
pub fn read_socket(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0usize;
    while filled < buf.len() {
        match nix::unistd::read(sock, &mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(errno(e)),
        }
    }
    Ok(filled)
}

/// `sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)`: starts writeback of
/// every dirty page of `file` not already under writeback. Neither std nor
/// nix wraps it.
#[allow(unsafe_code)]
pub fn start_writeback(file: &File) -> io::Result<()> {
    // SAFETY: a plain system call on a descriptor borrowed for its
    // duration; it reads no memory of ours.
    let r = unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::SerialFile;

    #[test]
    fn the_rules_follow_the_file_system_and_the_size() {
        let big = Some(4u64 << 30);
        assert_eq!(DiskPlan::write_on(FsKind::Disk("ext4"), big, false).write_behind, Some(WRITE_BEHIND_WINDOW));
        assert_eq!(DiskPlan::write_on(FsKind::Disk("ext4"), None, false).write_behind, Some(WRITE_BEHIND_WINDOW));
        assert_eq!(DiskPlan::write_on(FsKind::Disk("ext4"), Some(1 << 20), false).write_behind, None);
        assert_eq!(DiskPlan::write_on(FsKind::Memory, big, false).write_behind, None);
        assert_eq!(DiskPlan::write_on(FsKind::Disk("xfs"), big, true).write_behind, None);
        assert!(DiskPlan::read_on(FsKind::Disk("ext4"), false).sequential);
        assert!(!DiskPlan::read_on(FsKind::Memory, false).sequential);
        let p = DiskPlan::write_on(FsKind::Disk("ext4"), big, false);
        assert!(p.to_string().contains("write-behind") && p.to_string().contains("fsync"), "{p}");
    }

    #[test]
    fn tmpfs_is_memory() {
        let f = tempfile::tempfile_in("/dev/shm").unwrap();
        assert_eq!(FsKind::of(&f), FsKind::Memory);
    }

    #[test]
    fn write_behind_writes_everything_and_kicks_once_per_window() {
        let dir = tempfile::tempdir_in(std::env::var_os("FERRY_DISK_DIR").unwrap_or("/var/tmp".into())).unwrap();
        let path = dir.path().join("wb");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        let sink: Arc<dyn BlockSink> = Arc::new(SerialFile::new(file.try_clone().unwrap()));
        let wb = Arc::new(WriteBehind::new(sink, file, 64 << 10));
        // Out of order from four threads, as MODE E streams write.
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let wb = wb.clone();
                s.spawn(move || {
                    for i in (0..16u64).rev() {
                        let block = t * 16 + i;
                        wb.write_at(&[block as u8; 16 << 10], block * (16 << 10)).unwrap();
                    }
                });
            }
        });
        assert_eq!(wb.kicks(), 16, "1 MiB written in 64 KiB windows");
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len(), 1 << 20);
        assert!(got.chunks(16 << 10).enumerate().all(|(i, c)| c.iter().all(|b| *b == i as u8)));
    }

    #[test]
    fn splice_moves_socket_bytes_to_their_offsets_and_sees_the_end() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let b = l.accept().unwrap().0;
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        let sent = data.clone();
        let writer = std::thread::spawn(move || {
            a.write_all(&sent).unwrap();
        });
        let file = tempfile::tempfile().unwrap();
        let sink = SerialFile::new(file.try_clone().unwrap());
        let base = 4096u64;
        let mut got = 0usize;
        while got < data.len() {
            let n = sink.splice_from(b.as_fd(), base + got as u64, data.len() - got).unwrap().unwrap();
            assert!(n > 0 && n <= SPLICE_BATCH);
            got += n;
        }
        writer.join().unwrap();
        // The writer closed: the end of the stream is 0, not an error.
        assert_eq!(sink.splice_from(b.as_fd(), 0, 10).unwrap().unwrap(), 0);
        let mut back = vec![0u8; data.len()];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut back, base).unwrap();
        assert!(back == data);
    }
}
