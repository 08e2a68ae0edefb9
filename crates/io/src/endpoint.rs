//! Where data comes from and goes to: the disk side of a transfer.
//!
//! A [`BlockSource`] can always be read into a buffer; when its bytes are
//! in a file (the page cache, or a memfd of zeros) it also says where
//! ([`BlockSource::file_range`]), and a transport that can move file bytes
//! inside the kernel (TCP's `sendfile(2)`) does so: the bytes never enter
//! user space. Likewise a [`BlockSink`] can always take a buffer, and one
//! that drops everything says so ([`BlockSink::zero_copy`]), so a transport
//! may discard the bytes without copying them (TCP: `recv(MSG_TRUNC)`).
//! Neither trait knows about sockets: the transports (`crate::transport`)
//! do. Which path runs is decided per transfer (`docs/data-path.md` has
//! the measurements).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

/// Bytes of a source as a range of an open file: what a transport hands
/// to the kernel (`sendfile`) instead of copying.
#[derive(Debug, Clone, Copy)]
pub struct FileRange<'a> {
    pub fd: BorrowedFd<'a>,
    /// Offset in that file (not necessarily the source's offset).
    pub offset: u64,
    /// Bytes available there, at most what was asked; 0 past the end.
    pub len: usize,
}

/// Where a sender's blocks come from.
pub trait BlockSource: Send + Sync {
    /// Reads at `offset`; returns the bytes read, 0 at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Up to `len` bytes from `offset` as a range of a file, if this source
    /// keeps its bytes in one (`None` otherwise).
    fn file_range(&self, _offset: u64, _len: usize) -> Option<FileRange<'_>> {
        None
    }

    /// Whether [`file_range`](Self::file_range) is available.
    fn zero_copy(&self) -> bool {
        false
    }
}

/// Where a receiver's blocks go.
pub trait BlockSink: Send + Sync {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()>;

    /// Moves up to `len` bytes from the plain TCP socket `sock` to
    /// `offset` inside the kernel (`splice(2)` through a pipe: one copy,
    /// into the page cache, instead of two), if this sink is a file that
    /// can; `None` when it cannot, and the caller reads into a buffer.
    /// `Some(Ok(0))` is the end of the stream.
    fn splice_from(&self, _sock: BorrowedFd<'_>, _offset: u64, _len: usize) -> Option<io::Result<usize>> {
        None
    }

    /// Whether this sink drops everything, so the transport may discard
    /// the bytes without copying them out.
    fn zero_copy(&self) -> bool {
        false
    }
}

impl BlockSource for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }

    fn file_range(&self, offset: u64, len: usize) -> Option<FileRange<'_>> {
        Some(FileRange { fd: self.as_fd(), offset, len })
    }

    fn zero_copy(&self) -> bool {
        true
    }
}

impl BlockSink for File {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.write_all_at(data, offset)
    }

    fn splice_from(&self, sock: BorrowedFd<'_>, offset: u64, len: usize) -> Option<io::Result<usize>> {
        Some(crate::disk::splice_to_file(sock, self, offset, len, None))
    }
}

/// A file written through the page cache by several streams at once, one
/// `pwrite` at a time. Buffered writes to one file serialise in the kernel
/// anyway (the inode lock, taken for every write on ext4 and tmpfs), and
/// waiting for it there costs CPU: with four streams writing one 4 GiB
/// tmpfs file, `perf` put 27% of the receiver's samples in
/// `rwsem_spin_on_owner` — spinning on the lock while its owner copies, on
/// two vCPUs that may not even be running it. Taking turns in user space
/// sleeps instead (docs/data-path.md has the figures). Direct I/O, which
/// writes in parallel, does not go through this.
#[derive(Debug)]
pub struct SerialFile {
    file: File,
    turn: std::sync::Mutex<()>,
}

impl SerialFile {
    pub fn new(file: File) -> Self {
        Self { file, turn: std::sync::Mutex::new(()) }
    }

    pub fn file(&self) -> &File {
        &self.file
    }
}

impl BlockSink for SerialFile {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let _turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
        self.file.write_all_at(data, offset)
    }

    fn splice_from(&self, sock: BorrowedFd<'_>, offset: u64, len: usize) -> Option<io::Result<usize>> {
        Some(crate::disk::splice_to_file(sock, &self.file, offset, len, Some(&self.turn)))
    }
}

impl BlockSource for SerialFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        BlockSource::read_at(&self.file, buf, offset)
    }

    fn file_range(&self, offset: u64, len: usize) -> Option<FileRange<'_>> {
        self.file.file_range(offset, len)
    }

    fn zero_copy(&self) -> bool {
        BlockSource::zero_copy(&self.file)
    }
}

/// A file read and written with `O_DIRECT` where a block allows it: the
/// page cache is bypassed, so a transfer of a data set larger than memory
/// neither evicts everything else nor pays for copies into the cache, and
/// a disk's own rate is what the transfer sees. `O_DIRECT` needs the
/// memory, offset and length aligned ([`DIRECT_ALIGN`]); the staging
/// ring's buffers are, and so are its blocks except a file's last, which
/// (like any unaligned piece) goes through a second, ordinary descriptor
/// of the same file. Never zero-copy: `sendfile` reads the page cache.
///
/// [`DIRECT_ALIGN`]: crate::staging::DIRECT_ALIGN
#[derive(Debug)]
pub struct DirectFile {
    /// The ordinary description; opened on first need by
    /// [`switching`](Self::switching).
    buffered: std::sync::OnceLock<File>,
    direct: File,
    writable: bool,
}

impl DirectFile {
    /// Opens a second, `O_DIRECT` description of `file` through
    /// `/proc/self/fd`: the same inode, not a path lookup, so a confined
    /// open stays confined. Fails where the file system has no direct I/O
    /// (tmpfs answers `EINVAL`); callers then keep the ordinary file.
    pub fn new(file: File) -> io::Result<Self> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let flags = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_GETFL)
            .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let direct = std::fs::OpenOptions::new()
            .read(true)
            .write(writable)
            .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
            .open(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
        Ok(Self { buffered: file.into(), direct, writable })
    }

    /// A direct file made by switching `file`'s own description to
    /// `O_DIRECT` (so every descriptor of it, its duplicates included,
    /// is direct from now on), with the ordinary description opened only
    /// when a piece that is not whole pages comes: a streamed line's
    /// file written in whole pages costs no `/proc` open (13 µs of a
    /// 256 KiB upload's 170 µs of server time; docs/trees.md, session 22).
    /// Fails where the file system has no direct I/O, leaving `file` as
    /// it was.
    pub fn switching(file: File) -> io::Result<Self> {
        use nix::fcntl::{fcntl, FcntlArg, OFlag};
        let flags = fcntl(&file, FcntlArg::F_GETFL).map_err(io::Error::from)?;
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        fcntl(&file, FcntlArg::F_SETFL(OFlag::from_bits_retain(flags) | OFlag::O_DIRECT)).map_err(io::Error::from)?;
        Ok(Self { buffered: std::sync::OnceLock::new(), direct: file, writable })
    }

    /// The ordinary description, opened through `/proc/self/fd` (the same
    /// inode, no path lookup) if it is not yet.
    fn buffered(&self) -> io::Result<&File> {
        if let Some(f) = self.buffered.get() {
            return Ok(f);
        }
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(self.writable)
            .custom_flags(libc::O_CLOEXEC)
            .open(format!("/proc/self/fd/{}", self.direct.as_raw_fd()))?;
        // Two threads may race here: one description is kept.
        let _ = self.buffered.set(f);
        Ok(self.buffered.get().expect("set above"))
    }

    fn aligned(buf: &[u8], offset: u64) -> bool {
        let a = crate::staging::DIRECT_ALIGN;
        buf.as_ptr() as usize % a == 0 && buf.len() % a == 0 && offset % a as u64 == 0 && !buf.is_empty()
    }
}

impl BlockSource for DirectFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if Self::aligned(buf, offset) {
            FileExt::read_at(&self.direct, buf, offset)
        } else {
            FileExt::read_at(self.buffered()?, buf, offset)
        }
    }
}

impl DirectFile {
    /// Writes `data` at `offset`: the whole [`DIRECT_ALIGN`] pages it
    /// covers with `O_DIRECT`, the partial pages at either end (a block
    /// that starts or ends inside a page: a file's tail, a MODE E block
    /// boundary inside a file of a streamed line) through the page cache.
    /// The pages are disjoint, so the two descriptions never write the
    /// same page. Memory not aligned like the file offset is copied
    /// through this thread's aligned buffer first (a copy the page cache
    /// would have made too).
    ///
    /// [`DIRECT_ALIGN`]: crate::staging::DIRECT_ALIGN
    pub fn write_split(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let a = crate::staging::DIRECT_ALIGN as u64;
        let end = offset + data.len() as u64;
        let (body, body_end) = (offset.div_ceil(a) * a, end / a * a);
        if body_end <= body {
            return self.buffered()?.write_all_at(data, offset);
        }
        let (head, tail) = ((body - offset) as usize, (body_end - offset) as usize);
        if head > 0 {
            self.buffered()?.write_all_at(&data[..head], offset)?;
        }
        let pages = &data[head..tail];
        if pages.as_ptr() as usize % a as usize == 0 {
            self.write_pages(pages, body)?;
        } else {
            STAGE.with(|cell| -> io::Result<()> {
                // (Never held here by `splice_from`: it places its bytes
                // aligned, so they take the branch above.)
                let Ok(mut slot) = cell.try_borrow_mut() else {
                    return self.buffered()?.write_all_at(pages, body);
                };
                let buf = slot.get_or_insert_with(stage_buffer);
                let mut at = 0usize;
                while at < pages.len() {
                    let n = (pages.len() - at).min(STAGE_BYTES);
                    buf[..n].copy_from_slice(&pages[at..at + n]);
                    self.write_pages(&buf[..n], body + at as u64)?;
                    at += n;
                }
                Ok(())
            })?;
        }
        if tail < data.len() {
            self.buffered()?.write_all_at(&data[tail..], body_end)?;
        }
        Ok(())
    }

    /// Whole pages with `O_DIRECT`; through the page cache where the file
    /// system refuses it for this write (`EINVAL`: a file system that
    /// opens `O_DIRECT` files but cannot write some of them directly, as
    /// ext4 with `data=journal`), so a refusal costs speed, never the data.
    fn write_pages(&self, pages: &[u8], offset: u64) -> io::Result<()> {
        match self.direct.write_all_at(pages, offset) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self.buffered()?.write_all_at(pages, offset),
            r => r,
        }
    }
}

/// Bytes a receiving thread reads from a socket at a time for a
/// [`DirectFile`] (one MODE E block), and the size of its aligned buffer
/// past the first page's offset.
const STAGE_BYTES: usize = 1 << 20;

thread_local! {
    /// Each receiving thread's aligned buffer for [`DirectFile`], made on
    /// first use: one per thread, as its splice pipe is, so a line of 150
    /// files costs one buffer, not 150.
    static STAGE: std::cell::RefCell<Option<crate::staging::AlignedBuf>> = const { std::cell::RefCell::new(None) };
}

fn stage_buffer() -> crate::staging::AlignedBuf {
    crate::staging::AlignedBuf::new(STAGE_BYTES + crate::staging::DIRECT_ALIGN)
}

impl BlockSink for DirectFile {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.write_split(data, offset)
    }

    /// Reads up to `len` bytes from the socket into this thread's aligned
    /// buffer, placed so that memory and file offsets share their page
    /// offset, and writes them with [`write_split`](Self::write_split):
    /// one copy (the socket's into the buffer) as a splice into the page
    /// cache makes, and no page cache for the whole pages. Waits until
    /// `len` bytes (at most a block) are in or the stream ends.
    fn splice_from(&self, sock: BorrowedFd<'_>, offset: u64, len: usize) -> Option<io::Result<usize>> {
        let r = (offset % crate::staging::DIRECT_ALIGN as u64) as usize;
        let want = len.min(STAGE_BYTES);
        let got = STAGE.with(|cell| -> io::Result<usize> {
            let mut slot = cell.borrow_mut();
            let buf = slot.get_or_insert_with(stage_buffer);
            let filled = crate::disk::read_socket(sock, &mut buf[r..r + want])?;
            if filled > 0 {
                self.write_split(&buf[r..r + filled], offset)?;
            }
            Ok(filled)
        });
        Some(got)
    }
}

/// A source held in memory (a directory listing).
impl BlockSource for Vec<u8> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = (offset as usize).min(self.len());
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

/// A sink held in memory (a listing received by a client).
#[derive(Debug, Default)]
pub struct MemorySink(Mutex<Vec<u8>>);

impl MemorySink {
    /// Largest listing accepted, so a hostile server cannot exhaust memory.
    pub const LIMIT: u64 = 256 << 20;

    pub fn into_inner(self) -> Vec<u8> {
        self.0.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

impl BlockSink for MemorySink {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let end = offset + data.len() as u64;
        if end > Self::LIMIT {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "listing too large"));
        }
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < end as usize {
            v.resize(end as usize, 0);
        }
        v[offset as usize..end as usize].copy_from_slice(data);
        Ok(())
    }
}

/// `len` zero bytes: the memory-to-memory source (what `/dev/zero` is to
/// GridFTP users), sent from a zero-filled memfd so that even the sending
/// side copies nothing.
#[derive(Debug)]
pub struct ZeroSource {
    len: u64,
    zeros: File,
}

/// Size of the zero memfd; sends are cut at its end.
const ZERO_CHUNK: usize = 4 << 20;

impl ZeroSource {
    pub fn new(len: u64) -> io::Result<Self> {
        let fd = nix::sys::memfd::memfd_create(c"ferry-zero", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
        let zeros = File::from(fd);
        zeros.set_len(ZERO_CHUNK as u64)?;
        Ok(Self { len, zeros })
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl BlockSource for ZeroSource {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let n = (self.len.saturating_sub(offset)).min(buf.len() as u64) as usize;
        buf[..n].fill(0);
        Ok(n)
    }

    fn file_range(&self, offset: u64, len: usize) -> Option<FileRange<'_>> {
        let n = (self.len.saturating_sub(offset)).min(len as u64).min(ZERO_CHUNK as u64) as usize;
        Some(FileRange { fd: self.zeros.as_fd(), offset: 0, len: n })
    }

    fn zero_copy(&self) -> bool {
        true
    }
}

/// Discards everything: the memory-to-memory sink (`/dev/null`). A
/// transport may drop the data without copying it (TCP: `recv` with
/// `MSG_TRUNC` discards inside the kernel).
#[derive(Debug, Default)]
pub struct NullSink;

impl BlockSink for NullSink {
    fn write_at(&self, _data: &[u8], _offset: u64) -> io::Result<()> {
        Ok(())
    }

    fn zero_copy(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Connection, Payload};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    fn pair() -> (crate::tls::DataStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (crate::tls::DataStream::Plain(a), l.accept().unwrap().0)
    }

    #[test]
    fn direct_file_takes_aligned_blocks_directly_and_the_rest_through_the_cache() {
        use crate::staging::{AlignedBuf, DIRECT_ALIGN};
        // On the machine's disk: tmpfs has no O_DIRECT.
        let dir = tempfile::tempdir_in(std::env::var_os("FERRY_DISK_DIR").unwrap_or("/var/tmp".into())).unwrap();
        let path = dir.path().join("d");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        // Cannot run without O_DIRECT: fail saying so, never pass silently.
        let d = DirectFile::new(file).unwrap_or_else(|e| {
            panic!(
                "cannot run here: {} has no O_DIRECT ({e}); set FERRY_DISK_DIR to a directory on a disk file system \
                 (ext4, xfs)",
                dir.path().display()
            )
        });
        let mut block = AlignedBuf::new(4 * DIRECT_ALIGN);
        block.iter_mut().enumerate().for_each(|(i, b)| *b = (i % 251) as u8);
        d.write_at(&block, 0).unwrap(); // direct
        d.write_at(b"tail bytes", block.len() as u64).unwrap(); // through the cache
        let expected: Vec<u8> = block.iter().copied().chain(*b"tail bytes").collect();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
        let mut back = AlignedBuf::new(4 * DIRECT_ALIGN);
        assert_eq!(BlockSource::read_at(&d, &mut back, 0).unwrap(), back.len());
        assert_eq!(&back[..], &block[..]);
        let mut odd = [0u8; 10];
        BlockSource::read_at(&d, &mut odd, block.len() as u64).unwrap();
        assert_eq!(&odd, b"tail bytes");
        // A read-only file gets a read-only direct descriptor.
        assert!(DirectFile::new(std::fs::File::open(&path).unwrap()).is_ok());
    }

    /// Which of `file`'s pages are in the page cache (`mincore(2)`).
    #[allow(unsafe_code)]
    fn cached_pages(file: &File) -> Vec<bool> {
        use std::os::fd::AsRawFd;
        let len = file.metadata().unwrap().len() as usize;
        let page = crate::staging::DIRECT_ALIGN;
        let mut vec = vec![0u8; len.div_ceil(page)];
        // SAFETY: a shared read-only mapping of `len` bytes of an open
        // file, only passed to mincore (never read) and unmapped here.
        unsafe {
            let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0);
            assert_ne!(p, libc::MAP_FAILED);
            assert_eq!(libc::mincore(p, len, vec.as_mut_ptr()), 0);
            libc::munmap(p, len);
        }
        vec.iter().map(|b| b & 1 == 1).collect()
    }

    fn disk_file(dir: &tempfile::TempDir) -> (std::path::PathBuf, DirectFile, File) {
        disk_file_by(dir, DirectFile::new)
    }

    fn disk_file_by(
        dir: &tempfile::TempDir,
        make: fn(File) -> io::Result<DirectFile>,
    ) -> (std::path::PathBuf, DirectFile, File) {
        let path = dir.path().join("d");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        // Its own description: `switching` changes the one it is given.
        let probe = std::fs::File::open(&path).unwrap();
        let d = make(file).unwrap_or_else(|e| {
            panic!(
                "cannot run here: {} has no O_DIRECT ({e}); set FERRY_DISK_DIR to a directory on a disk file system",
                dir.path().display()
            )
        });
        (path, d, probe)
    }

    #[test]
    fn direct_file_writes_whole_pages_around_the_cache_and_only_partial_pages_through_it() {
        for make in [DirectFile::new, DirectFile::switching] {
            whole_pages_around_the_cache(make);
        }
    }

    #[test]
    fn a_switched_direct_file_opens_no_second_description_for_whole_pages() {
        use crate::staging::{AlignedBuf, DIRECT_ALIGN};
        let dir = tempfile::tempdir_in(std::env::var_os("FERRY_DISK_DIR").unwrap_or("/var/tmp".into())).unwrap();
        let path = dir.path().join("d");
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        let dup = file.try_clone().unwrap();
        let d = DirectFile::switching(file).expect("a disk file system has O_DIRECT");
        let flags = nix::fcntl::fcntl(&dup, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        assert_ne!(flags & libc::O_DIRECT, 0, "the caller's duplicate shares the switched description");
        let mut block = AlignedBuf::new(2 * DIRECT_ALIGN);
        block.iter_mut().enumerate().for_each(|(i, b)| *b = (i % 13) as u8);
        d.write_at(&block, 0).unwrap();
        assert!(d.buffered.get().is_none(), "whole pages need no ordinary description");
        d.write_at(b"tail", block.len() as u64).unwrap();
        assert!(d.buffered.get().is_some());
        let expected: Vec<u8> = block.iter().copied().chain(*b"tail").collect();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    fn whole_pages_around_the_cache(make: fn(File) -> io::Result<DirectFile>) {
        let dir = tempfile::tempdir_in(std::env::var_os("FERRY_DISK_DIR").unwrap_or("/var/tmp".into())).unwrap();
        let (path, d, probe) = disk_file_by(&dir, make);
        let page = crate::staging::DIRECT_ALIGN;
        let pattern: Vec<u8> = (0..6 * page + 1234).map(|i| (i % 251) as u8).collect();
        // Unaligned memory and block boundaries inside pages 1 and 4, as a
        // streamed line's file gets them: pages 0, 2, 3 and 5 are whole
        // inside one block each, page 6 is the tail.
        let mut odd = vec![0u8; pattern.len() + 1];
        odd[1..].copy_from_slice(&pattern);
        let data = &odd[1..];
        let cuts = [0, page + 100, 4 * page + 7, pattern.len()];
        for w in cuts.windows(2) {
            d.write_at(&data[w[0]..w[1]], w[0] as u64).unwrap();
        }
        assert_eq!(cached_pages(&probe), [false, true, false, false, true, false, true]);
        assert_eq!(std::fs::read(&path).unwrap(), pattern);
    }

    #[test]
    fn direct_file_reads_a_socket_into_whole_pages_written_around_the_cache() {
        let dir = tempfile::tempdir_in(std::env::var_os("FERRY_DISK_DIR").unwrap_or("/var/tmp".into())).unwrap();
        let (path, d, probe) = disk_file(&dir);
        let page = crate::staging::DIRECT_ALIGN;
        let pattern: Vec<u8> = (0..(STAGE_BYTES + 5 * page + 300)).map(|i| (i % 253) as u8).collect();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let rx = l.accept().unwrap().0;
        let sent = pattern.clone();
        let writer = std::thread::spawn(move || {
            // In small writes, so reads come back short and are gathered.
            for c in sent.chunks(7000) {
                tx.write_all(c).unwrap();
            }
        });
        // Asked for in pieces that start and end inside pages (at most a
        // block each, as MODE E asks).
        let mut at = 0usize;
        for want in [page + 10, STAGE_BYTES, 2 * page, usize::MAX] {
            let want = want.min(pattern.len() - at);
            let mut got = 0;
            while got < want {
                let n = d.splice_from(rx.as_fd(), (at + got) as u64, want - got).unwrap().unwrap();
                assert!(n > 0, "the stream ended early");
                got += n;
            }
            at += want;
        }
        writer.join().unwrap();
        assert_eq!(d.splice_from(rx.as_fd(), at as u64, 10).unwrap().unwrap(), 0, "the end of the stream");
        let cached = cached_pages(&probe);
        let partial =
            [1, (page + 10 + STAGE_BYTES) / page, (page + 10 + STAGE_BYTES + 2 * page) / page, cached.len() - 1];
        for (i, c) in cached.iter().enumerate() {
            assert_eq!(*c, partial.contains(&i), "page {i} of {}", cached.len());
        }
        assert_eq!(std::fs::read(&path).unwrap(), pattern);
    }

    #[test]
    fn zero_source_sends_zeros_and_stops_at_its_length() {
        let z = ZeroSource::new(10_000_000).unwrap();
        let (mut a, mut b) = pair();
        let sender = std::thread::spawn(move || {
            let mut off = 0u64;
            while off < 10_000_000 {
                off += a.send_block(b"", Payload::Source { source: &z, offset: off, len: 1 << 20 }).unwrap();
            }
            assert_eq!(a.send_block(b"", Payload::Source { source: &z, offset: off, len: 1 << 20 }).unwrap(), 0);
        });
        let mut got = Vec::new();
        b.read_to_end(&mut got).unwrap();
        sender.join().unwrap();
        assert_eq!(got.len(), 10_000_000);
        assert!(got.iter().all(|x| *x == 0));
    }

    #[test]
    fn file_ranges_honour_offsets() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"0123456789").unwrap();
        let r = f.file_range(3, 4).unwrap();
        assert_eq!((r.offset, r.len), (3, 4));
        let (mut a, mut b) = pair();
        assert_eq!(a.send_block(b"", Payload::Source { source: &f, offset: 3, len: 4 }).unwrap(), 4);
        drop(a);
        let mut got = String::new();
        b.read_to_string(&mut got).unwrap();
        assert_eq!(got, "3456");
    }
}
