//! The served directory, opened as a capability.
//!
//! Every path a client names is resolved by `ferry-proto` into a
//! [`VirtualPath`] (lexically confined) and then opened here relative to a
//! `cap_std::fs::Dir`. cap-std resolves each component beneath that
//! directory (openat2 `RESOLVE_BENEATH` where the kernel has it) and refuses
//! any symbolic link or `..` that would leave it, so a link planted inside
//! the root that points at `/etc` yields [`FsError::Escapes`], not a file.
//!
//! Uploads never appear under their final name before they are complete:
//! data goes to a partial file `.<name>.ferry-part` beside the target and is
//! renamed over it when the transfer succeeds (rename is atomic within a
//! directory). A failed upload leaves only the partial, which a resumed
//! upload (REST) continues; see `docs/partial-files.md`.

use cap_fs_ext::{DirExt, SystemTimeSpec};
use cap_std::fs::{Dir, MetadataExt, OpenOptions, PermissionsExt};
use cap_std::{ambient_authority, time::SystemTime};
use ferry_proto::facts::{FileFacts, FileKind};
use ferry_proto::session::FsError;
use ferry_proto::VirtualPath;
use std::io;
use std::path::{Path, PathBuf};

/// Suffix of in-progress uploads. Names ending in it are hidden from
/// listings and refused as transfer targets.
pub const PARTIAL_SUFFIX: &str = ".ferry-part";

/// Whether `name` is one of the server's own partial-upload names.
pub fn is_partial_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(PARTIAL_SUFFIX)
}

/// Maps an I/O error to the protocol's terms.
pub fn fs_error(e: &io::Error) -> FsError {
    use io::ErrorKind as K;
    match e.raw_os_error() {
        Some(libc::ENOTDIR) => return FsError::NotADirectory,
        Some(libc::EISDIR) => return FsError::IsADirectory,
        Some(libc::ENOTEMPTY) => return FsError::DirectoryNotEmpty,
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => return FsError::NoSpace,
        Some(libc::ELOOP) | Some(libc::EXDEV) => return FsError::Escapes,
        Some(libc::ENAMETOOLONG) => return FsError::InvalidName("name too long".into()),
        _ => {}
    }
    match e.kind() {
        K::NotFound => FsError::NotFound,
        // cap-std reports a path that leaves the root as PermissionDenied
        // with this message; tell the client precisely.
        K::PermissionDenied if e.to_string().contains("outside of the filesystem") => FsError::Escapes,
        K::PermissionDenied => FsError::PermissionDenied,
        K::AlreadyExists => FsError::AlreadyExists,
        _ => FsError::Other(e.to_string()),
    }
}

/// How an upload treats existing data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    /// A fresh upload: start an empty partial file.
    Replace,
    /// Resume: continue the partial left by an interrupted upload, or, when
    /// there is none, the complete file in place (the user asked for it by
    /// sending REST); the caller writes from the restart offset (or only the
    /// missing ranges).
    Resume,
    /// APPE: the user asked to extend the existing file in place.
    Append,
    /// ESTO: write into the file itself at an offset, creating it if
    /// needed and never truncating (GFD.20 "adjusted store").
    InPlace,
}

/// An upload in progress. Call [`Root::commit`] when every byte arrived;
/// dropping it without committing leaves the partial for a later resume.
#[derive(Debug)]
pub struct Upload {
    pub file: std::fs::File,
    /// Size of the data already present when the upload began.
    pub existing_len: u64,
    partial: Option<PathBuf>,
    target: PathBuf,
}

#[derive(Debug)]
pub struct Root {
    dir: Dir,
    path: PathBuf,
}

impl Root {
    /// Opens `path` as the root. The process's ambient authority is used
    /// exactly once, here.
    pub fn open(path: &Path) -> io::Result<Self> {
        let dir = Dir::open_ambient_dir(path, ambient_authority())?;
        Ok(Self { dir, path: path.to_path_buf() })
    }

    /// A root confined further to `sub` (a user's home inside the served
    /// directory), resolved with the same confinement.
    pub fn subroot(&self, sub: &VirtualPath) -> Result<Self, FsError> {
        let dir = self.dir.open_dir(sub.relative()).map_err(|e| fs_error(&e))?;
        Ok(Self { dir, path: self.path.join(sub.relative()) })
    }

    /// The host path this root was opened from (for logs only).
    pub fn host_path(&self) -> &Path {
        &self.path
    }

    fn rel(p: &VirtualPath) -> &Path {
        Path::new(p.relative())
    }

    fn check_name(p: &VirtualPath) -> Result<(), FsError> {
        match p.file_name() {
            Some(n) if is_partial_name(n) => Err(FsError::InvalidName(format!(
                "names ending in {PARTIAL_SUFFIX} are reserved for uploads in progress"
            ))),
            _ => Ok(()),
        }
    }

    /// Facts of one entry, following symbolic links (within the root).
    pub fn facts(&self, p: &VirtualPath) -> Result<FileFacts, FsError> {
        Self::check_name(p)?;
        let md = self.dir.metadata(Self::rel(p)).map_err(|e| fs_error(&e))?;
        Ok(to_facts(p.file_name().unwrap_or("/").to_string(), &md))
    }

    /// The entries of a directory, sorted by name, without partial uploads
    /// (and without dot files unless `hidden`). A symbolic link is described
    /// by its target when the target is inside the root, else as a link.
    pub fn list(&self, p: &VirtualPath, hidden: bool) -> Result<Vec<FileFacts>, FsError> {
        let md = self.dir.metadata(Self::rel(p)).map_err(|e| fs_error(&e))?;
        if !md.is_dir() {
            // LIST of a file describes that file (as ls does).
            return Ok(vec![to_facts(p.file_name().unwrap_or("/").to_string(), &md)]);
        }
        let dir = self.dir.open_dir(Self::rel(p)).map_err(|e| fs_error(&e))?;
        let mut out = Vec::new();
        for entry in dir.entries().map_err(|e| fs_error(&e))? {
            let entry = entry.map_err(|e| fs_error(&e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_partial_name(&name) || (!hidden && name.starts_with('.')) {
                continue;
            }
            let md = match dir.metadata(&name) {
                Ok(md) => md,
                // Dangling or escaping link: describe the link itself.
                Err(_) => match dir.symlink_metadata(&name) {
                    Ok(md) => md,
                    Err(_) => continue, // vanished meanwhile
                },
            };
            out.push(to_facts(name, &md));
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Opens a regular file for reading.
    pub fn open_read(&self, p: &VirtualPath) -> Result<(std::fs::File, FileFacts), FsError> {
        Self::check_name(p)?;
        let file = self.dir.open(Self::rel(p)).map_err(|e| fs_error(&e))?;
        let md = file.metadata().map_err(|e| fs_error(&e))?;
        if md.is_dir() {
            return Err(FsError::IsADirectory);
        }
        if !md.is_file() {
            return Err(FsError::Other("not a regular file".into()));
        }
        let facts = to_facts(p.file_name().unwrap_or("/").to_string(), &md);
        Ok((file.into_std(), facts))
    }

    fn partial_path(p: &VirtualPath) -> Result<PathBuf, FsError> {
        let name = p.file_name().ok_or(FsError::IsADirectory)?;
        let parent = p.parent();
        Ok(Path::new(parent.relative()).join(format!(".{name}{PARTIAL_SUFFIX}")))
    }

    /// Size of the partial upload for `p`, if one was left behind.
    pub fn partial_len(&self, p: &VirtualPath) -> Option<u64> {
        let partial = Self::partial_path(p).ok()?;
        self.dir.symlink_metadata(&partial).ok().filter(|m| m.is_file()).map(|m| m.len())
    }

    /// Starts an upload to `p`.
    pub fn begin_store(&self, p: &VirtualPath, mode: StoreMode) -> Result<Upload, FsError> {
        Self::check_name(p)?;
        let target = Self::rel(p).to_path_buf();
        match self.dir.metadata(&target) {
            Ok(md) if md.is_dir() => return Err(FsError::IsADirectory),
            Ok(md) if !md.is_file() => return Err(FsError::Other("not a regular file".into())),
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(fs_error(&e)),
            _ => {}
        }
        let in_place = match mode {
            StoreMode::Append | StoreMode::InPlace => true,
            StoreMode::Resume => self.partial_len(p).is_none() && self.dir.metadata(&target).is_ok(),
            StoreMode::Replace => false,
        };
        if in_place {
            let file =
                self.dir.open_with(&target, OpenOptions::new().write(true).create(true)).map_err(|e| fs_error(&e))?;
            // Writing in place through a hard link would change the file
            // under its other names too, which may lie outside the root.
            let md = file.metadata().map_err(|e| fs_error(&e))?;
            not_hard_linked(&md)?;
            return Ok(Upload { file: file.into_std(), existing_len: md.len(), partial: None, target });
        }
        let partial = Self::partial_path(p)?;
        let mut opts = OpenOptions::new();
        opts.write(true).create(true);
        // The partial is never a symlink we follow, nor a hard link to
        // another file: remove one if planted (it is not ours to resume).
        if let Ok(md) = self.dir.symlink_metadata(&partial) {
            if md.is_symlink() || (md.is_file() && md.nlink() > 1) {
                self.dir.remove_file(&partial).map_err(|e| fs_error(&e))?;
            }
        }
        let file = self.dir.open_with(&partial, &opts).map_err(|e| fs_error(&e))?;
        // Checked on the open file (a link made meanwhile), before it is
        // truncated: nothing is written through a hard link.
        let md = file.metadata().map_err(|e| fs_error(&e))?;
        not_hard_linked(&md)?;
        let existing_len = if mode == StoreMode::Replace {
            file.set_len(0).map_err(|e| fs_error(&e))?;
            0
        } else {
            md.len()
        };
        Ok(Upload { file: file.into_std(), existing_len, partial: Some(partial), target })
    }

    /// Makes a finished upload visible under its final name.
    pub fn commit(&self, upload: Upload) -> Result<(), FsError> {
        let Upload { file, partial, target, .. } = upload;
        drop(file);
        if let Some(partial) = partial {
            self.dir.rename(&partial, &self.dir, &target).map_err(|e| fs_error(&e))?;
        }
        Ok(())
    }

    pub fn make_dir(&self, p: &VirtualPath) -> Result<(), FsError> {
        Self::check_name(p)?;
        self.dir.create_dir(Self::rel(p)).map_err(|e| fs_error(&e))
    }

    pub fn remove_dir(&self, p: &VirtualPath) -> Result<(), FsError> {
        if p.is_root() {
            return Err(FsError::PermissionDenied);
        }
        self.dir.remove_dir(Self::rel(p)).map_err(|e| fs_error(&e))
    }

    pub fn remove_file(&self, p: &VirtualPath) -> Result<(), FsError> {
        Self::check_name(p)?;
        let md = self.dir.symlink_metadata(Self::rel(p)).map_err(|e| fs_error(&e))?;
        if md.is_dir() {
            return Err(FsError::IsADirectory);
        }
        self.dir.remove_file(Self::rel(p)).map_err(|e| fs_error(&e))
    }

    /// Checks that `p` exists (RNFR), without following a final symlink.
    pub fn exists(&self, p: &VirtualPath) -> Result<(), FsError> {
        Self::check_name(p)?;
        if p.is_root() {
            return Err(FsError::PermissionDenied);
        }
        self.dir.symlink_metadata(Self::rel(p)).map(|_| ()).map_err(|e| fs_error(&e))
    }

    pub fn rename(&self, from: &VirtualPath, to: &VirtualPath) -> Result<(), FsError> {
        Self::check_name(from)?;
        Self::check_name(to)?;
        if from.is_root() || to.is_root() || to.starts_with(from) && to != from {
            return Err(FsError::PermissionDenied);
        }
        self.dir.rename(Self::rel(from), &self.dir, Self::rel(to)).map_err(|e| fs_error(&e))
    }

    pub fn is_dir(&self, p: &VirtualPath) -> Result<(), FsError> {
        let md = self.dir.metadata(Self::rel(p)).map_err(|e| fs_error(&e))?;
        if md.is_dir() {
            Ok(())
        } else {
            Err(FsError::NotADirectory)
        }
    }

    pub fn set_modified(&self, p: &VirtualPath, unix_secs: i64) -> Result<(), FsError> {
        Self::check_name(p)?;
        not_hard_linked(&self.dir.metadata(Self::rel(p)).map_err(|e| fs_error(&e))?)?;
        let t = std::time::UNIX_EPOCH
            .checked_add(std::time::Duration::from_secs(unix_secs.max(0) as u64))
            .ok_or_else(|| FsError::Other("time out of range".into()))?;
        self.dir
            .set_times(Self::rel(p), None, Some(SystemTimeSpec::Absolute(SystemTime::from_std(t))))
            .map_err(|e| fs_error(&e))
    }

    /// SITE CHMOD, limited to permission bits (no setuid/setgid/sticky).
    pub fn chmod(&self, p: &VirtualPath, mode: u32) -> Result<(), FsError> {
        Self::check_name(p)?;
        not_hard_linked(&self.dir.metadata(Self::rel(p)).map_err(|e| fs_error(&e))?)?;
        let perms = cap_std::fs::Permissions::from_mode(mode & 0o777);
        self.dir.set_permissions(Self::rel(p), perms).map_err(|e| fs_error(&e))
    }
}

/// Refuses to change a regular file in place (content, mode, times) when
/// it has more than one hard link: the server cannot tell where the other
/// names are, and an administrator's link may lead outside the root. Such
/// a file can still be read, deleted, renamed, or replaced by STOR (which
/// writes a new file and renames it over the name). See
/// `docs/security.md`, "Hard links".
fn not_hard_linked(md: &cap_std::fs::Metadata) -> Result<(), FsError> {
    if md.is_file() && md.nlink() > 1 {
        return Err(FsError::HardLinked);
    }
    Ok(())
}

/// The facts of a local file the client copies, mapped as the served
/// root maps its own (so both sides of a copy compare alike).
pub fn local_facts(name: String, md: std::fs::Metadata) -> FileFacts {
    to_facts(name, &cap_std::fs::Metadata::from_just_metadata(md))
}

fn to_facts(name: String, md: &cap_std::fs::Metadata) -> FileFacts {
    let kind = if md.is_dir() {
        FileKind::Dir
    } else if md.is_file() {
        FileKind::File
    } else if md.is_symlink() {
        FileKind::Symlink
    } else {
        FileKind::Other
    };
    FileFacts {
        name,
        kind,
        size: md.len(),
        modified: md.mtime(),
        mode: md.mode() & 0o7777,
        uid: md.uid(),
        gid: md.gid(),
        nlink: md.nlink(),
        unique: (md.dev(), md.ino()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn vp(s: &str) -> VirtualPath {
        VirtualPath::root().resolve(s).unwrap()
    }

    #[test]
    fn symlinks_out_of_the_root_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"x").unwrap();
        let root_dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root_dir.path().join("abs")).unwrap();
        std::os::unix::fs::symlink("../../../../../../etc/passwd", root_dir.path().join("rel")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root_dir.path().join("dirlink")).unwrap();
        std::fs::write(root_dir.path().join("inside"), b"ok").unwrap();
        std::os::unix::fs::symlink("inside", root_dir.path().join("good")).unwrap();
        let root = Root::open(root_dir.path()).unwrap();
        for p in ["/abs", "/rel", "/dirlink/secret"] {
            assert_eq!(root.open_read(&vp(p)).unwrap_err(), FsError::Escapes, "{p}");
        }
        assert!(root.begin_store(&vp("/dirlink/new"), StoreMode::Replace).is_err());
        assert!(!outside.path().join("new").exists());
        assert_eq!(root.open_read(&vp("/good")).unwrap().1.size, 2);
        // Listing shows the escaping links as links, without following them.
        let names: Vec<_> = root.list(&vp("/"), false).unwrap().into_iter().map(|f| (f.name, f.kind)).collect();
        assert!(names.contains(&("abs".to_string(), FileKind::Symlink)));
        assert!(names.contains(&("good".to_string(), FileKind::File)));
    }

    #[test]
    fn hard_linked_files_are_never_written_in_place() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, b"outside").unwrap();
        let d = tempfile::tempdir().unwrap();
        std::fs::hard_link(&secret, d.path().join("hl")).unwrap();
        std::fs::hard_link(&secret, d.path().join(".new.ferry-part")).unwrap();
        let root = Root::open(d.path()).unwrap();
        for mode in [StoreMode::Append, StoreMode::InPlace, StoreMode::Resume] {
            assert_eq!(root.begin_store(&vp("/hl"), mode).unwrap_err(), FsError::HardLinked, "{mode:?}");
        }
        assert_eq!(root.chmod(&vp("/hl"), 0o777).unwrap_err(), FsError::HardLinked);
        assert_eq!(root.set_modified(&vp("/hl"), 0).unwrap_err(), FsError::HardLinked);
        // Reading is allowed; a planted partial is not resumed but replaced.
        assert_eq!(root.open_read(&vp("/hl")).unwrap().1.size, 7);
        let mut up = root.begin_store(&vp("/new"), StoreMode::Resume).unwrap();
        assert_eq!(up.existing_len, 0);
        up.file.write_all(b"x").unwrap();
        // STOR replaces the name, not the linked file.
        let mut up = root.begin_store(&vp("/hl"), StoreMode::Replace).unwrap();
        up.file.write_all(b"new").unwrap();
        root.commit(up).unwrap();
        assert_eq!(std::fs::read(d.path().join("hl")).unwrap(), b"new");
        assert_eq!(std::fs::read(&secret).unwrap(), b"outside");
        use std::os::unix::fs::PermissionsExt;
        assert_ne!(std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777, 0o777);
    }

    #[test]
    fn uploads_appear_only_when_committed() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        let mut up = root.begin_store(&vp("/f.bin"), StoreMode::Replace).unwrap();
        up.file.write_all(b"hello").unwrap();
        assert!(!d.path().join("f.bin").exists());
        assert!(root.list(&vp("/"), true).unwrap().is_empty(), "partial is hidden");
        assert_eq!(root.partial_len(&vp("/f.bin")), Some(5));
        drop(up); // interrupted: partial kept for resume
        let up = root.begin_store(&vp("/f.bin"), StoreMode::Resume).unwrap();
        assert_eq!(up.existing_len, 5);
        root.commit(up).unwrap();
        assert_eq!(std::fs::read(d.path().join("f.bin")).unwrap(), b"hello");
        assert_eq!(root.partial_len(&vp("/f.bin")), None);
        assert!(matches!(root.begin_store(&vp("/.x.ferry-part"), StoreMode::Replace), Err(FsError::InvalidName(_))));
    }
}
