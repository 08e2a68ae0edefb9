//! The local side of a copy: destination files written under a partial
//! name and renamed when complete, the source's mode and time kept, and
//! local files as MODE E endpoints (with or without `O_DIRECT`).

use super::{local_err, Stats};
mod anonymous;
use crate::error::ClientError;
use ferry_io::mode_e::{BlockSink, BlockSource};
use ferry_proto::facts::FileFacts;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Fresh downloads of at most this many bytes whose size is known when
/// their file is created (a batch's files) are written to an anonymous
/// file (`O_TMPFILE`) in the target's directory and linked under their
/// name when complete: one directory operation per file instead of two
/// (a create and a rename), see docs/partial-files.md. An anonymous file
/// vanishes with a killed process, so a restart copies these files again
/// in full (at most this much each); larger files keep a named partial a
/// restart resumes. The server's bound for small uploads.
pub(super) const ANONYMOUS_PARTIAL_MAX: u64 = ferry_io::root::SMALL_UPLOAD;

/// Files smaller than the write-behind threshold but at least this large
/// have their writeback started when they are committed; smaller ones
/// (a 4 KiB tree's) are left to the tree's `syncfs`, a system call per
/// file would cost more than it overlaps.
const WRITE_KICK_FROM: u64 = 64 << 10;

/// Downloads of known size at least this large get their blocks reserved
/// when their file is created ([`LocalSink::preallocate`]); the server's
/// bound for uploads, below which a reservation cost more than it saved.
pub(super) const PREALLOCATE_FROM: u64 = ferry_io::root::PREALLOCATE_FROM;

/// A local destination file: a partial name until committed, unless the
/// destination is a device such as /dev/null.
pub(super) struct LocalSink {
    pub(super) file: File,
    /// The partial's name beside the target (`None`: a device). For an
    /// anonymous file, the name it is given only if the target must be
    /// replaced (`linkat` refuses an existing name).
    pub(super) partial: Option<PathBuf>,
    /// The file has no name yet (`O_TMPFILE`): committing links it.
    anonymous: bool,
    target: PathBuf,
    pub(super) existing_len: u64,
    meta: FileMeta,
}

impl LocalSink {
    /// Opens the destination; with `keep`, an existing partial file is
    /// continued rather than emptied (a resumed download). The partial
    /// file is created owner-only (0600): until it is complete and given
    /// the source's mode, nobody else reads it.
    pub(super) fn open(target: &Path, keep: bool, meta: FileMeta) -> Result<Self, ClientError> {
        Self::open_as(target, keep, meta, false, None)
    }

    /// [`open`](Self::open); with `known_regular`, the caller knows the
    /// name is free or a regular file (the tree walk listed its
    /// directory), so it is not looked at first: one `statx` less, which
    /// fails for every file of a fresh tree. A directory put there since
    /// the walk then fails the file at its rename instead of here. `size`:
    /// the file's size when known; a fresh file of at most
    /// [`ANONYMOUS_PARTIAL_MAX`] bytes is written to an anonymous file
    /// where the file system has them.
    pub(super) fn open_as(
        target: &Path,
        keep: bool,
        meta: FileMeta,
        known_regular: bool,
        size: Option<u64>,
    ) -> Result<Self, ClientError> {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let looked = if known_regular { None } else { std::fs::metadata(target).ok() };
        if let Some(md) = looked {
            let ft = md.file_type();
            if ft.is_char_device() || ft.is_fifo() {
                let file = std::fs::OpenOptions::new().write(true).open(target).map_err(local_err(target))?;
                return Ok(Self {
                    file,
                    partial: None,
                    anonymous: false,
                    target: target.to_path_buf(),
                    existing_len: 0,
                    meta,
                });
            }
            if md.is_dir() {
                return Err(ClientError::local(target.display(), std::io::ErrorKind::IsADirectory.into()));
            }
        }
        let name =
            target.file_name().ok_or_else(|| ClientError::Usage(format!("{}: not a file name", target.display())))?;
        let partial = target.with_file_name(local_partial_name(name));
        if !keep && size.is_some_and(|s| s <= ANONYMOUS_PARTIAL_MAX) {
            if let Some(file) = anonymous::create(target) {
                let target = target.to_path_buf();
                let sink = Self { file, partial: Some(partial), anonymous: true, target, existing_len: 0, meta };
                sink.preallocate(size)?;
                return Ok(sink);
            }
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(!keep)
            .mode(0o600)
            .open(&partial)
            .map_err(local_err(&partial))?;
        // A truncated file holds nothing: one `statx` less per fresh file.
        let existing_len = if keep { file.metadata().map_err(local_err(&partial))?.len() } else { 0 };
        let sink =
            Self { file, partial: Some(partial), anonymous: false, target: target.to_path_buf(), existing_len, meta };
        sink.preallocate(size)?;
        Ok(sink)
    }

    /// Reserves the blocks of a download of `size` bytes (when known and
    /// at least [`PREALLOCATE_FROM`]) before any arrive, as the server
    /// does for an upload ALLO announced: `fallocate(FALLOC_FL_KEEP_SIZE)`,
    /// so the length still grows with what arrives and a resumed partial
    /// keeps its own. Why: ext4 otherwise reserves every page's block as
    /// it is written (delayed allocation: `ext4_da_reserve_space`, quota,
    /// the extent-status tree) and allocates them at writeback, in the
    /// receiving thread's `sync_file_range`; a download had 1.5x the CPU
    /// per byte of the same bytes uploaded into a preallocated file, and
    /// moved at 0.6x its speed (docs/trees.md, "Session 16: downloads").
    /// A full disk is then reported before any data flows; a file system
    /// without `fallocate` is left as it was. A device is left alone.
    pub(super) fn preallocate(&self, size: Option<u64>) -> Result<(), ClientError> {
        let Some(size) = size.filter(|s| *s >= PREALLOCATE_FROM && self.partial.is_some()) else { return Ok(()) };
        let Ok(len) = i64::try_from(size) else { return Ok(()) };
        use nix::fcntl::{fallocate, FallocateFlags};
        match fallocate(&self.file, FallocateFlags::FALLOC_FL_KEEP_SIZE, 0, len) {
            Err(e @ (nix::errno::Errno::ENOSPC | nix::errno::Errno::EDQUOT)) => {
                Err(ClientError::local(self.target.display(), std::io::Error::from(e)))
            }
            _ => Ok(()),
        }
    }

    /// Where received blocks go: the file, or — for `/dev/null` — a
    /// discard that drops them in the kernel without copying.
    /// The file to write blocks to, unless this sink discards (/dev/null).
    pub(super) fn file_for_blocks(&self) -> Result<Option<File>, ClientError> {
        if self.partial.is_none() && std::fs::canonicalize(&self.target).is_ok_and(|p| p == Path::new("/dev/null")) {
            return Ok(None);
        }
        Ok(Some(self.file.try_clone().map_err(local_err(&self.target))?))
    }

    pub(super) fn block_sink(&self) -> Result<Arc<dyn BlockSink>, ClientError> {
        self.block_sink_sized(None)
    }

    /// [`block_sink`](Self::block_sink) of a file whose size is known: one
    /// smaller than the write-behind threshold gets none, without the
    /// `fstatfs` that asks what the file system is (a batch of small
    /// downloads opens hundreds at once).
    pub(super) fn block_sink_sized(&self, size: Option<u64>) -> Result<Arc<dyn BlockSink>, ClientError> {
        if self.partial.is_none() && std::fs::canonicalize(&self.target).is_ok_and(|p| p == Path::new("/dev/null")) {
            return Ok(Arc::new(ferry_io::endpoint::NullSink));
        }
        if size.is_some_and(|s| s < ferry_io::disk::WRITE_BEHIND_MIN_FILE) {
            let file = self.file.try_clone().map_err(local_err(&self.target))?;
            return Ok(Arc::new(ferry_io::endpoint::SerialFile::new(file)));
        }
        let file = self.file.try_clone().map_err(local_err(&self.target))?;
        // Size unknown here: the write-behind kicks only once 32 MiB are written.
        let plan = ferry_io::disk::DiskPlan::for_write(&file, size, false);
        let sink = Arc::new(ferry_io::endpoint::SerialFile::new(file.try_clone().map_err(local_err(&self.target))?));
        plan.wrap_sink(&file, sink).map_err(local_err(&self.target))
    }

    /// Sets the final length (MODE E writes blocks at offsets, a resumed
    /// partial may be longer) and commits. A device is left alone.
    pub(super) fn finish(self, size: u64) -> Result<(), ClientError> {
        if self.partial.is_some() {
            self.file.set_len(size).map_err(local_err(&self.target))?;
        }
        self.commit_sized(Some(size))
    }

    /// Gives the partial file the source's mode and time, then its name.
    pub(super) fn commit(self) -> Result<(), ClientError> {
        self.commit_sized(None)
    }

    /// [`commit`](Self::commit) of a file whose final size is known (no
    /// `statx` to learn it).
    fn commit_sized(self, size: Option<u64>) -> Result<(), ClientError> {
        if let Some(partial) = &self.partial {
            // Durable before it has its name, and before the copy reports
            // success: a large file's fsync finds little left to write after
            // the write-behind (ferry_io::disk). Small files are left to the
            // kernel, one fsync each would dominate a tree of them.
            let len = size.or_else(|| self.file.metadata().ok().map(|m| m.len()));
            if len.is_some_and(|l| l >= ferry_io::disk::WRITE_BEHIND_MIN_FILE) {
                self.file.sync_data().map_err(local_err(partial))?;
            } else if len.is_some_and(|l| l >= WRITE_KICK_FROM) {
                // A tree's files are made durable by one `syncfs` at its
                // end, which then waited for every byte with the network
                // idle (0.28 s of a 0.71 s 2,000 x 256 KiB download). Start
                // this file's writeback now (asynchronous; on the commit
                // thread, not the receiving one), so the device writes
                // while later files arrive and the `syncfs` finds little
                // left. Its errors are the `syncfs`'s to report.
                let _ = ferry_io::disk::start_writeback(&self.file);
            }
            self.meta.apply(&self.file).map_err(local_err(partial))?;
            if self.anonymous {
                return anonymous::name(&self.file, partial, &self.target, &self.meta);
            }
            std::fs::rename(partial, &self.target).map_err(local_err(&self.target))?;
        }
        Ok(())
    }

    /// Whether the file is anonymous (`O_TMPFILE`) until committed.
    #[cfg(test)]
    pub(super) fn is_anonymous(&self) -> bool {
        self.anonymous
    }
}

/// The local partial name for a download of `name`: `.<name>.ferry-part`,
/// or `.<hash>.ferry-part` when that would pass the 255 bytes a name may
/// have (the same name every run, so a resumed download finds it).
pub(super) fn local_partial_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() + 12);
    out.push(b'.');
    if bytes.len() + 12 <= 255 {
        out.extend_from_slice(bytes);
    } else {
        out.extend_from_slice(format!("{:032x}", xxhash_rust::xxh3::xxh3_128(bytes)).as_bytes());
    }
    out.extend_from_slice(b".ferry-part");
    std::ffi::OsString::from_vec(out)
}

/// What a copy keeps of a file besides its bytes: the modification time,
/// and the permission bits, never wider than the source's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FileMeta {
    /// Permission bits of the source (`None`: unknown).
    pub mode: Option<u32>,
    /// Seconds since the epoch (`None`: unknown).
    pub modified: Option<i64>,
}

impl FileMeta {
    pub(crate) fn of(f: &FileFacts) -> Self {
        Self { mode: (f.mode != 0).then_some(f.mode & 0o777), modified: (f.modified > 0).then_some(f.modified) }
    }

    /// The mode a local copy gets: the source's bits less the umask (as
    /// cp does), so a 600 file stays 600; without a known source mode,
    /// what a new file gets.
    pub(super) fn local_mode(&self) -> u32 {
        let umask = process_umask();
        match self.mode {
            Some(m) => m & !umask & 0o777,
            None => 0o666 & !umask,
        }
    }

    /// Sets mode and time on a file just written (utimensat through
    /// futimens, as `touch -d` does).
    pub(super) fn apply(&self, file: &File) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(self.local_mode()))?;
        if let Some(t) = self.modified {
            let when = std::time::UNIX_EPOCH + Duration::from_secs(t.max(0) as u64);
            file.set_modified(when)?;
        }
        Ok(())
    }
}

/// This process's umask, from /proc (reading it with umask(2) would
/// change it for a moment, and needs unsafe code). Read once: every
/// downloaded file asks, and generating /proc/self/status in a process of
/// many threads cost ~150 µs of kernel time a file, a third of the client's
/// CPU for a tree of 4 KiB files (issue 18). Nothing in Ferry changes its
/// umask while it runs.
pub(super) fn process_umask() -> u32 {
    static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| l.strip_prefix("Umask:").and_then(|v| u32::from_str_radix(v.trim(), 8).ok()))
            })
            .unwrap_or(0o022)
    })
}

pub(super) fn copy_local(src: &Path, dst: &Path, stats: &Stats, meta: FileMeta) -> Result<u64, ClientError> {
    let sink = LocalSink::open(dst, false, meta)?;
    let mut input = File::open(src).map_err(local_err(src))?;
    let mut out = &sink.file;
    let n = std::io::copy(&mut input, &mut out).map_err(local_err(dst))?;
    stats.bytes.fetch_add(n, Ordering::Relaxed);
    sink.commit()?;
    Ok(n)
}

/// A local file, opened for direct I/O or not: one type for both so it can
/// serve as source and sink.
#[derive(Debug)]
pub(super) enum DirectOrFile {
    Direct(ferry_io::endpoint::DirectFile),
    File(ferry_io::endpoint::SerialFile),
}

impl DirectOrFile {
    pub(super) fn is_direct(&self) -> bool {
        matches!(self, Self::Direct(_))
    }
}

impl BlockSource for DirectOrFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        match self {
            Self::Direct(d) => d.read_at(buf, offset),
            Self::File(f) => BlockSource::read_at(f, buf, offset),
        }
    }

    fn file_range(&self, offset: u64, len: usize) -> Option<ferry_io::endpoint::FileRange<'_>> {
        match self {
            Self::Direct(_) => None,
            Self::File(f) => f.file_range(offset, len),
        }
    }

    fn zero_copy(&self) -> bool {
        matches!(self, Self::File(_))
    }
}

impl BlockSink for DirectOrFile {
    fn write_at(&self, data: &[u8], offset: u64) -> std::io::Result<()> {
        match self {
            Self::Direct(d) => d.write_at(data, offset),
            Self::File(f) => BlockSink::write_at(f, data, offset),
        }
    }

    fn splice_from(
        &self,
        sock: std::os::fd::BorrowedFd<'_>,
        offset: u64,
        len: usize,
    ) -> Option<std::io::Result<usize>> {
        match self {
            Self::Direct(_) => None,
            Self::File(f) => f.splice_from(sock, offset, len),
        }
    }
}

/// Makes one downloaded file durable: its data and its directory entry
/// (the rename from the partial name). Devices and pipes (`/dev/null`)
/// are left alone.
pub(super) fn make_file_durable(path: &Path) -> Result<(), ClientError> {
    let file = match File::open(path) {
        Ok(f) => f,
        // A file whose copied mode forbids reading (e.g. 0200) cannot be
        // opened to sync it as a user other than root: say so, the copy
        // itself succeeded.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            tracing::warn!(path = %path.display(), "cannot open the copied file to sync it: {e}");
            return Ok(());
        }
        Err(e) => return Err(local_err(path)(e)),
    };
    if !file.metadata().map_err(local_err(path))?.is_file() {
        return Ok(());
    }
    file.sync_all().map_err(local_err(path))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent).and_then(|d| d.sync_all()).map_err(local_err(parent))
}

/// Makes a tree's local files durable with one `syncfs(2)` of the file
/// system holding `root`, instead of an fsync per file (thousands of small
/// files would pay one disk flush each). Data and the renames that gave
/// files their final names reach the disk together; see docs/trees.md.
pub(super) fn make_durable(root: &Path) -> Result<Duration, ClientError> {
    let started = std::time::Instant::now();
    let dir = File::open(root).map_err(local_err(root))?;
    nix::unistd::syncfs(&dir).map_err(|e| ClientError::local(root.display(), std::io::Error::from(e)))?;
    Ok(started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    fn meta() -> FileMeta {
        FileMeta { mode: Some(0o640), modified: Some(1_700_000_000) }
    }

    fn write(sink: &LocalSink, data: &[u8]) {
        sink.block_sink_sized(Some(data.len() as u64)).unwrap().write_at(data, 0).unwrap();
    }

    #[test]
    fn a_small_fresh_download_has_no_name_until_complete() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a");
        let sink = LocalSink::open_as(&target, false, meta(), true, Some(5)).unwrap();
        assert!(sink.is_anonymous());
        write(&sink, b"hello");
        assert!(names(dir.path()).is_empty(), "nothing in the directory before the commit");
        sink.finish(5).unwrap();
        assert_eq!(names(dir.path()), ["a"]);
        assert_eq!(std::fs::read(&target).unwrap(), b"hello");
        let md = std::fs::metadata(&target).unwrap();
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        assert_eq!(md.permissions().mode() & 0o777, meta().local_mode());
        assert_eq!(md.mtime(), 1_700_000_000);
        assert_eq!(md.nlink(), 1);
    }

    #[test]
    fn a_failed_small_download_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let sink = LocalSink::open_as(&dir.path().join("a"), false, meta(), true, Some(5)).unwrap();
        write(&sink, b"hel");
        drop(sink);
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn a_small_download_replaces_an_existing_file_and_a_stale_partial() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a");
        // The directory's first file is new: anonymous files there.
        let first = LocalSink::open_as(&dir.path().join("0"), false, meta(), true, Some(1)).unwrap();
        assert!(first.is_anonymous());
        first.finish(0).unwrap();
        std::fs::write(&target, b"old file").unwrap();
        std::fs::write(dir.path().join(".a.ferry-part"), b"stale partial").unwrap();
        let sink = LocalSink::open_as(&target, false, meta(), true, Some(3)).unwrap();
        assert!(sink.is_anonymous());
        write(&sink, b"new");
        assert_eq!(std::fs::read(&target).unwrap(), b"old file", "the old file is whole until the commit");
        sink.finish(3).unwrap();
        assert_eq!(names(dir.path()), ["0", "a"]);
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        // A directory whose names are being replaced gets named partials.
        let sink = LocalSink::open_as(&dir.path().join("b"), false, meta(), true, Some(1)).unwrap();
        assert!(!sink.is_anonymous());
        sink.finish(0).unwrap();
        let other = tempfile::tempdir().unwrap();
        assert!(LocalSink::open_as(&other.path().join("c"), false, meta(), true, Some(1)).unwrap().is_anonymous());
        // A directory whose first file exists is seen replaced at once.
        let full = tempfile::tempdir().unwrap();
        std::fs::write(full.path().join("d"), b"old").unwrap();
        assert!(!LocalSink::open_as(&full.path().join("d"), false, meta(), true, Some(1)).unwrap().is_anonymous());
    }

    #[test]
    fn large_resumed_or_unsized_downloads_keep_a_named_partial() {
        let dir = tempfile::tempdir().unwrap();
        let cases =
            [("big", false, Some(ANONYMOUS_PARTIAL_MAX + 1)), ("resumed", true, Some(5)), ("unsized", false, None)];
        for (name, keep, size) in cases {
            let sink = LocalSink::open_as(&dir.path().join(name), keep, meta(), true, size).unwrap();
            assert!(!sink.is_anonymous(), "{name}");
            assert!(dir.path().join(format!(".{name}.ferry-part")).exists(), "{name}: resumable by name");
            (&sink.file).write_all(b"bytes").unwrap();
            sink.finish(5).unwrap();
            assert_eq!(std::fs::read(dir.path().join(name)).unwrap(), b"bytes");
        }
        assert_eq!(names(dir.path()), ["big", "resumed", "unsized"]);
    }

    #[test]
    fn a_sized_download_has_its_blocks_reserved_and_its_length_kept() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let size = 2 << 20;
        let sink = LocalSink::open_as(&dir.path().join("big"), false, meta(), true, Some(size)).unwrap();
        let md = sink.file.metadata().unwrap();
        assert_eq!(md.len(), 0, "KEEP_SIZE: the length grows with what arrives");
        assert!(md.blocks() * 512 >= size, "reserved: {} blocks", md.blocks());
        // A resumed partial keeps what it holds.
        (&sink.file).write_all(b"held").unwrap();
        drop(sink);
        let again = LocalSink::open_as(&dir.path().join("big"), true, meta(), true, Some(size)).unwrap();
        assert_eq!(again.existing_len, 4);
        // Below the bound, nothing is reserved.
        let small = LocalSink::open_as(&dir.path().join("small"), false, meta(), true, Some(4096)).unwrap();
        assert_eq!(small.file.metadata().unwrap().blocks(), 0);
    }

    #[test]
    fn without_anonymous_files_a_named_partial_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a");
        anonymous::FORCE_NO_TMPFILE.with(|f| f.set(true));
        let sink = LocalSink::open_as(&target, false, meta(), true, Some(2));
        anonymous::FORCE_NO_TMPFILE.with(|f| f.set(false));
        let sink = sink.unwrap();
        assert!(!sink.is_anonymous());
        assert_eq!(names(dir.path()), [".a.ferry-part"]);
        write(&sink, b"ok");
        sink.finish(2).unwrap();
        assert_eq!(names(dir.path()), ["a"]);
        assert_eq!(std::fs::read(&target).unwrap(), b"ok");
    }

    #[test]
    fn without_a_way_to_link_the_bytes_are_copied_to_a_named_partial() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a");
        let sink = LocalSink::open_as(&target, false, meta(), true, Some(4)).unwrap();
        assert!(sink.is_anonymous());
        write(&sink, b"data");
        anonymous::FORCE_NO_LINK.with(|f| f.set(true));
        let done = sink.finish(4);
        anonymous::FORCE_NO_LINK.with(|f| f.set(false));
        done.unwrap();
        assert_eq!(names(dir.path()), ["a"]);
        assert_eq!(std::fs::read(&target).unwrap(), b"data");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, meta().local_mode());
    }

    #[test]
    fn unsupported_means_the_file_system_not_the_directory() {
        for (errno, yes) in
            [(libc::EOPNOTSUPP, true), (libc::EISDIR, true), (libc::ENOENT, false), (libc::EACCES, false)]
        {
            assert_eq!(anonymous::unsupported(&std::io::Error::from_raw_os_error(errno)), yes, "{errno}");
        }
    }

    #[test]
    fn a_directory_in_the_way_fails_the_commit() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a");
        std::fs::create_dir(&target).unwrap();
        let sink = LocalSink::open_as(&target, false, meta(), true, Some(1)).unwrap();
        write(&sink, b"x");
        assert!(sink.finish(1).is_err());
        assert!(target.is_dir());
    }
}
