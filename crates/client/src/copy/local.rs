//! The local side of a copy: destination files written under a partial
//! name and renamed when complete, the source's mode and time kept, and
//! local files as MODE E endpoints (with or without `O_DIRECT`).

use super::{local_err, Stats};
use crate::error::ClientError;
use ferry_io::mode_e::{BlockSink, BlockSource};
use ferry_proto::facts::FileFacts;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// A local destination file: a partial name until committed, unless the
/// destination is a device such as /dev/null.
pub(super) struct LocalSink {
    pub(super) file: File,
    pub(super) partial: Option<PathBuf>,
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
        Self::open_as(target, keep, meta, false)
    }

    /// [`open`](Self::open); with `known_regular`, the caller knows the
    /// name is free or a regular file (the tree walk listed its
    /// directory), so it is not looked at first: one `statx` less, which
    /// fails for every file of a fresh tree. A directory put there since
    /// the walk then fails the file at its rename instead of here.
    pub(super) fn open_as(target: &Path, keep: bool, meta: FileMeta, known_regular: bool) -> Result<Self, ClientError> {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let looked = if known_regular { None } else { std::fs::metadata(target).ok() };
        if let Some(md) = looked {
            let ft = md.file_type();
            if ft.is_char_device() || ft.is_fifo() {
                let file = std::fs::OpenOptions::new().write(true).open(target).map_err(local_err(target))?;
                return Ok(Self { file, partial: None, target: target.to_path_buf(), existing_len: 0, meta });
            }
            if md.is_dir() {
                return Err(ClientError::local(target.display(), std::io::ErrorKind::IsADirectory.into()));
            }
        }
        let name =
            target.file_name().ok_or_else(|| ClientError::Usage(format!("{}: not a file name", target.display())))?;
        let partial = target.with_file_name(local_partial_name(name));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(!keep)
            .mode(0o600)
            .open(&partial)
            .map_err(local_err(&partial))?;
        // A truncated file holds nothing: one `statx` less per fresh file.
        let existing_len = if keep { file.metadata().map_err(local_err(&partial))?.len() } else { 0 };
        Ok(Self { file, partial: Some(partial), target: target.to_path_buf(), existing_len, meta })
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
            }
            self.meta.apply(&self.file).map_err(local_err(partial))?;
            std::fs::rename(partial, &self.target).map_err(local_err(&self.target))?;
        }
        Ok(())
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
