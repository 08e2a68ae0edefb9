//! Anonymous partial files (`O_TMPFILE`) for small downloads: created in
//! the target's directory with no name, written, and linked under the
//! target's name when complete (`linkat`), so a file costs the directory
//! one operation where a named partial costs two (create, then rename).
//!
//! Measured on this machine's ext4 (issue 18, session 15,
//! bench/results/small-files-s15-fs-micro): see docs/partial-files.md.
//!
//! Where the file system has no anonymous files (`EOPNOTSUPP`; `EISDIR`
//! from a kernel older than 3.11, which opens the directory instead), the
//! caller falls back to a named partial, and this process stops trying.
//! Linking uses `AT_EMPTY_PATH` where allowed (root; any user from Linux
//! 6.10), else `/proc/self/fd/N`; where neither works the bytes are
//! copied to the named partial, which is then renamed.

use super::FileMeta;
use crate::copy::local_err;
use crate::error::ClientError;
use nix::errno::Errno;
use nix::fcntl::AT_FDCWD;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a file system refused an anonymous file: later files go
/// straight to named partials (one failing `open` a process, not a file).
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// Directories this process has written to: whether names are being
/// replaced there. A copy over an existing tree replaces every file, and
/// an anonymous file there costs a failed link, a link and a rename where
/// a named partial costs a create and a rename, so those directories get
/// named partials. Decided by one look (`statx`) at the first file of each
/// directory, and set when a link finds its name taken: a batch opens up
/// to hundreds of files before its first commit, so waiting for a link
/// to fail left thousands of files of a replaced tree anonymous
/// (bench/results/small-files-s15-fs-prof, ab-overwrite).
static REPLACING: std::sync::Mutex<Option<std::collections::HashMap<std::path::PathBuf, bool>>> =
    std::sync::Mutex::new(None);

/// How many directories `REPLACING` remembers before it starts afresh.
const REPLACING_CAP: usize = 4096;

fn replacing_in(dir: &Path, target: &Path) -> bool {
    let mut seen = REPLACING.lock().unwrap_or_else(|e| e.into_inner());
    let seen = seen.get_or_insert_with(Default::default);
    if let Some(&r) = seen.get(dir) {
        return r;
    }
    let r = std::fs::symlink_metadata(target).is_ok();
    // Bounded: a long-lived process (the transfer service) meets
    // directories without end, and a forgotten one only costs a new look.
    if seen.len() >= REPLACING_CAP {
        seen.clear();
    }
    seen.insert(dir.to_path_buf(), r);
    r
}

#[cfg(test)]
thread_local! {
    /// Tests: act as a file system without `O_TMPFILE` (`create`) or
    /// without a way to link one (`name`).
    pub(super) static FORCE_NO_TMPFILE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    pub(super) static FORCE_NO_LINK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// An anonymous file (read-write, mode 0600) in `target`'s directory, or
/// `None` where there is none to be had: the caller creates a named
/// partial, which reports any error of its own.
pub(super) fn create(target: &Path) -> Option<File> {
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return None;
    }
    #[cfg(test)]
    if FORCE_NO_TMPFILE.with(|f| f.get()) {
        return None;
    }
    let dir = dir_of(target);
    if replacing_in(dir, target) {
        return None;
    }
    match ferry_io::anonymous::create_at(AT_FDCWD, dir, 0o600) {
        Ok(f) => Some(f),
        Err(e) => {
            if unsupported(&e) {
                tracing::debug!(dir = %dir.display(), "no anonymous files here ({e}): named partial files");
                UNSUPPORTED.store(true, Ordering::Relaxed);
            }
            None
        }
    }
}

fn dir_of(target: &Path) -> &Path {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Whether `e` from an `O_TMPFILE` open says the file system (or kernel)
/// has no anonymous files ([`ferry_io::anonymous::unsupported`]).
pub(super) fn unsupported(e: &std::io::Error) -> bool {
    ferry_io::anonymous::unsupported(e)
}

/// Gives the complete anonymous `file` the name `target`. `linkat` will
/// not replace a name: over an existing file, the file is linked as
/// `partial` and renamed over it (the old file stays whole until then).
pub(super) fn name(file: &File, partial: &Path, target: &Path, meta: &FileMeta) -> Result<(), ClientError> {
    match link(file, target) {
        Ok(()) => return Ok(()),
        Err(Errno::EEXIST) => {
            let mut seen = REPLACING.lock().unwrap_or_else(|e| e.into_inner());
            seen.get_or_insert_with(Default::default).insert(dir_of(target).to_path_buf(), true);
        }
        Err(e) if !ferry_io::anonymous::can_link(e) => return Err(local_err(target)(e.into())),
        Err(_) => return copy_to(file, partial, target, meta),
    }
    match link(file, partial) {
        Ok(()) => {}
        Err(Errno::EEXIST) => {
            // A partial of an earlier, interrupted copy of this name.
            std::fs::remove_file(partial).map_err(local_err(partial))?;
            link(file, partial).map_err(|e| local_err(partial)(e.into()))?;
        }
        Err(e) => return Err(local_err(partial)(e.into())),
    }
    std::fs::rename(partial, target).map_err(local_err(target))
}

/// `linkat` of an open anonymous file to a path
/// ([`ferry_io::anonymous::link`]).
fn link(file: &File, to: &Path) -> Result<(), Errno> {
    #[cfg(test)]
    if FORCE_NO_LINK.with(|f| f.get()) {
        return Err(Errno::ENOENT);
    }
    ferry_io::anonymous::link(file, AT_FDCWD, to)
}

/// The last resort: the anonymous file's bytes copied to the named
/// partial, which is renamed over the target.
fn copy_to(file: &File, partial: &Path, target: &Path, meta: &FileMeta) -> Result<(), ClientError> {
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(partial)
        .map_err(local_err(partial))?;
    let mut from = file;
    from.seek(SeekFrom::Start(0)).map_err(local_err(partial))?;
    std::io::copy(&mut from, &mut out).map_err(local_err(partial))?;
    meta.apply(&out).map_err(local_err(partial))?;
    std::fs::rename(partial, target).map_err(local_err(target))
}
