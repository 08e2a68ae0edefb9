//! Anonymous files (`O_TMPFILE`): an inode made in a directory with no
//! name, written, and given its name with `linkat` when complete. The
//! directory then sees one operation per file (the link) where a named
//! partial costs two under its lock (the create, then the rename), and
//! nothing ever shows a name for an incomplete file.
//!
//! Used by the client for small downloads (`docs/partial-files.md`) and by
//! the server for the small files of a streamed upload line
//! ([`crate::root`]). Where the file system has none (`EOPNOTSUPP`;
//! `EISDIR` from a kernel older than 3.11, which opens the directory
//! instead), callers fall back to named partials.

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once `linkat(AT_EMPTY_PATH)` was refused: links go through /proc.
static EMPTY_PATH_REFUSED: AtomicBool = AtomicBool::new(false);

/// An anonymous read-write file in the directory `path` names relative
/// to `dir` (`"."` for `dir` itself, `AT_FDCWD` for a path), with `mode`
/// (less the umask, as any create). open(2): without `O_EXCL` the file
/// "can be made permanent" with linkat.
pub fn create_at(dir: impl AsFd, path: &Path, mode: u32) -> std::io::Result<File> {
    let flags = OFlag::O_TMPFILE | OFlag::O_RDWR | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::openat(dir, path, flags, Mode::from_bits_truncate(mode))?;
    Ok(File::from(fd))
}

/// Whether `e` from an `O_TMPFILE` open says the file system (or kernel)
/// has no anonymous files, rather than something about this directory.
pub fn unsupported(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL))
}

/// Links the open anonymous `file` as `name` in `dir` (`AT_FDCWD` for a
/// path): with `AT_EMPTY_PATH` (no path to resolve; refused without
/// `CAP_DAC_READ_SEARCH` before Linux 6.10, and then not tried again),
/// else through `/proc/self/fd`. `linkat` never replaces a name: a taken
/// one is `EEXIST`, and nothing at `name` is followed.
pub fn link(file: &File, dir: impl AsFd, name: &Path) -> Result<(), Errno> {
    if !EMPTY_PATH_REFUSED.load(Ordering::Relaxed) {
        match nix::unistd::linkat(file, "", dir.as_fd(), name, AtFlags::AT_EMPTY_PATH) {
            Err(Errno::ENOENT | Errno::EPERM | Errno::EINVAL) => EMPTY_PATH_REFUSED.store(true, Ordering::Relaxed),
            done => return done,
        }
    }
    let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
    nix::unistd::linkat(nix::fcntl::AT_FDCWD, proc.as_str(), dir, name, AtFlags::AT_SYMLINK_FOLLOW)
}

/// Whether a failed link may be a missing way to link (no /proc, no
/// capability for `AT_EMPTY_PATH`) rather than the target's own fault.
pub fn can_link(e: Errno) -> bool {
    matches!(e, Errno::ENOENT | Errno::EPERM | Errno::EACCES | Errno::EXDEV | Errno::EINVAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn an_anonymous_file_gets_its_name_once_and_never_replaces_one() {
        let d = tempfile::tempdir().unwrap();
        let dir = File::open(d.path()).unwrap();
        let mut f = match create_at(&dir, Path::new("."), 0o600) {
            Ok(f) => f,
            Err(e) if unsupported(&e) => return,
            Err(e) => panic!("{e}"),
        };
        f.write_all(b"hello").unwrap();
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "no name before the link");
        link(&f, &dir, Path::new("a")).unwrap();
        let mut s = String::new();
        File::open(d.path().join("a")).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello");
        std::fs::write(d.path().join("b"), "old").unwrap();
        assert_eq!(link(&f, &dir, Path::new("b")), Err(Errno::EEXIST));
        assert_eq!(std::fs::read_to_string(d.path().join("b")).unwrap(), "old");
    }
}
