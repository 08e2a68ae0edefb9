//! The served directory, opened as a capability.
//!
//! Every path a client names is resolved by `ferry-proto` into a
//! [`VirtualPath`] (lexically confined) and then opened here relative to a
//! `cap_std::fs::Dir`. cap-std resolves each component beneath that
//! directory (openat2 `RESOLVE_BENEATH` where the kernel has it) and refuses
//! any symbolic link or `..` that would leave it, so a link planted inside
//! the root that points at `/etc` yields [`FsError::Escapes`], not a file.
//!
//! Paths are `octets` strings: names that are not UTF-8 reach the file
//! system as their own bytes, and come back from it the same way.
//!
//! Uploads never appear under their final name before they are complete:
//! data goes to a partial file in the directory's hidden area
//! (`ferry_io::partial`) and is renamed over the target when the transfer
//! succeeds (rename is atomic within a file system). A failed upload leaves
//! only the partial, which a resumed upload (REST) continues; see
//! `docs/partial-files.md`.

use crate::partial::{self, Claim, Claims, DirKey, Record, AREA};
use cap_fs_ext::{DirExt, SystemTimeSpec};
use cap_std::fs::{Dir, MetadataExt, OpenOptions, OpenOptionsExt, PermissionsExt};
use cap_std::{ambient_authority, time::SystemTime};
use ferry_proto::facts::{FileFacts, FileKind};
use ferry_proto::octets;
use ferry_proto::session::{FsError, PartialFacts};
use ferry_proto::{RangeSet, VirtualPath};
use std::collections::HashMap;
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How long an abandoned partial upload is kept by default: a week, time
/// enough to notice a failed copy and run it again.
pub const DEFAULT_PARTIAL_EXPIRY: Duration = Duration::from_secs(7 * 24 * 3600);

/// A fresh upload whose ALLO announces at most this many bytes writes no
/// partial-upload record until it fails (`Root::begin_store`).
pub const SMALL_UPLOAD: u64 = 1 << 20;

/// Directories with at most this many entries are listed sorted by name;
/// larger ones are streamed in the order the file system returns them, so
/// a listing never holds a whole huge directory in memory.
pub const SORTED_LISTING_MAX: usize = 4096;

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
        Some(libc::ENXIO) => return FsError::NotRegularFile,
        _ => {}
    }
    match e.kind() {
        K::NotFound => FsError::NotFound,
        // cap-std reports a path that leaves the root as PermissionDenied
        // with this message; tell the client precisely.
        K::PermissionDenied if e.to_string().contains("outside of the filesystem") => FsError::Escapes,
        K::PermissionDenied => FsError::PermissionDenied,
        K::AlreadyExists => FsError::AlreadyExists,
        K::ConnectionAborted => FsError::Aborted,
        _ => FsError::Other(e.to_string()),
    }
}

/// A path string as the octets the file system knows it by.
fn os(s: &str) -> OsString {
    OsStr::from_bytes(&octets::encode(s)).to_os_string()
}

/// A file-system name as a path string.
fn name_of(n: &OsStr) -> String {
    octets::decode(n.as_bytes()).into_owned()
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
    /// ESTO: change part of the file. The partial starts as a copy of the
    /// file (empty if there is none), the data is written into it, and it
    /// replaces the file when complete (GFD.20 "adjusted store").
    Patch,
}

/// Who uploads and what they announced.
#[derive(Debug, Clone, Default)]
pub struct UploadInfo {
    pub user: String,
    /// The size ALLO announced: space is reserved for it.
    pub allocation: Option<u64>,
}

/// The partial file of an upload, in its directory's hidden area — or,
/// for a small file of a streamed line, anonymous ([`StoreDirs::streamed`])
/// until it is linked under its final name, or named in the area after all
/// when it fails or is checkpointed ([`Upload::named_area`]).
#[derive(Debug)]
struct PartialFile {
    /// The area the partial is named in; `None` while it is anonymous.
    area: Mutex<Option<Arc<Dir>>>,
    part: String,
    meta: String,
    /// For an anonymous partial: where to say that its file system gave
    /// no way to link it.
    anonymous: Option<Arc<AnonymousOff>>,
}

impl PartialFile {
    fn area(&self) -> Option<Arc<Dir>> {
        self.area.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The file systems (device numbers) of a root where streamed lines gave
/// up anonymous partials: the file system refused one, or there was no
/// way to link one (no `/proc`, no capability for `AT_EMPTY_PATH`). They
/// then use named partials there: one failed call per file system, not
/// per file. Kept per file system, shared by a root's subroots, because a
/// served tree may span several (a home on another mount), and one that
/// refuses says nothing about the others.
#[derive(Debug, Default)]
struct AnonymousOff {
    devices: Mutex<std::collections::HashSet<u64>>,
    /// Tests: every link of an anonymous partial fails as where there is
    /// no way to link one, so the copy the server falls back to runs.
    #[cfg(test)]
    refuse_links: std::sync::atomic::AtomicBool,
}

impl AnonymousOff {
    fn is_off(&self, dev: u64) -> bool {
        self.devices.lock().unwrap_or_else(|e| e.into_inner()).contains(&dev)
    }

    fn turn_off(&self, dev: u64) {
        // Bounded by the number of mounted file systems.
        self.devices.lock().unwrap_or_else(|e| e.into_inner()).insert(dev);
    }

    /// Links the anonymous `file` as `name` in `dir` ([`crate::anonymous::link`]).
    fn link(&self, file: &std::fs::File, dir: &Dir, name: &Path) -> Result<(), nix::errno::Errno> {
        #[cfg(test)]
        if self.refuse_links.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(nix::errno::Errno::EPERM);
        }
        crate::anonymous::link(file, dir, name)
    }
}

/// An upload in progress: a partial file (or, for APPE and a resume of a
/// complete file, the file itself) and the claim on its name.
/// [`commit`](Self::commit) makes it visible when every byte arrived;
/// [`abandon`](Self::abandon) keeps what arrived for a resume. The claim
/// is released when the `Upload` is dropped — after its last write.
#[derive(Debug)]
pub struct Upload {
    pub file: std::fs::File,
    /// Size of the data already present when the upload began.
    pub existing_len: u64,
    /// Byte ranges known to be on disk when the upload began (the
    /// partial's record; the whole file when writing in place): what a
    /// resume may claim to have sent.
    pub held: RangeSet,
    parent: Arc<Dir>,
    /// `parent`'s (device, inode), its claim key: a batch's pass finds
    /// what to `syncfs` and which areas to remove without an `fstat` a file.
    dir_key: DirKey,
    name: OsString,
    partial: Option<PartialFile>,
    record: Mutex<Record>,
    /// Whether a record file was written for this upload: a fresh small
    /// upload has none unless it fails, and its commit skips the unlink
    /// of a record that is not there.
    recorded: std::sync::atomic::AtomicBool,
    /// Whether the partial was made by this upload (not resumed from an
    /// earlier one's record): a fresh partial that received nothing is
    /// removed by [`abandon`](Upload::abandon), not recorded.
    fresh: bool,
    allocated: Option<u64>,
    /// The server's commit group (see [`CommitGroup`]).
    group: Arc<CommitGroup>,
    _claim: Claim,
}

impl Upload {
    /// The size ALLO announced, if it did: what the disk plan sizes for.
    pub fn allocation(&self) -> Option<u64> {
        self.allocated
    }

    /// Whether the data goes into the final file itself (APPE, a resume
    /// of a complete file).
    pub fn in_place(&self) -> bool {
        self.partial.is_none()
    }

    /// Makes `ranges` (file offsets) durable: the data is synced first,
    /// then the record rewritten, so it never claims a byte a crash could
    /// lose. What `SITE PARTIAL` reports and a resume may rely on. A
    /// record of no ranges (a fresh upload's first) claims nothing and
    /// needs no sync: one `fdatasync` less for every new file.
    pub fn checkpoint(&self, ranges: &RangeSet) -> io::Result<()> {
        if !ranges.is_empty() {
            self.file.sync_data()?;
        }
        let Some(p) = &self.partial else { return Ok(()) };
        let area = self.named_area(p)?;
        let mut record = self.record.lock().unwrap_or_else(|e| e.into_inner());
        record.ranges = ranges.to_string();
        self.recorded.store(true, std::sync::atomic::Ordering::Relaxed);
        write_record(&area, &p.meta, &record)
    }

    /// The partial's area, where an anonymous partial is first linked as
    /// its `.part` (so a failed or checkpointed small file of a streamed
    /// line leaves what a resume needs, as a named partial would). A
    /// stale `.part` of this name is ours to replace: the claim is held.
    fn named_area(&self, p: &PartialFile) -> io::Result<Arc<Dir>> {
        let mut slot = p.area.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = &*slot {
            return Ok(a.clone());
        }
        let part = Path::new(&p.part);
        let mut attempts = 0;
        let area = loop {
            let area = Arc::new(open_area(&self.parent).map_err(|e| io::Error::other(e.to_string()))?);
            match self.link_anonymous(p, &area, part) {
                Ok(()) => break area,
                // No way to link it here: its bytes copied to a named
                // partial, as the commit does.
                Err(e) if crate::anonymous::can_link(e) && e != nix::errno::Errno::ENOENT => {
                    if let Some(off) = &p.anonymous {
                        off.turn_off(self.dir_key.0);
                    }
                    // `copy_to_named` records the area itself.
                    drop(slot);
                    return self.copy_to_named(p).map_err(|e| io::Error::other(e.to_string()));
                }
                Err(nix::errno::Errno::EEXIST) if attempts < 5 => area.remove_file(part)?,
                // Another upload's commit removed the empty area meanwhile.
                Err(nix::errno::Errno::ENOENT) if attempts < 5 => {}
                Err(e) => return Err(e.into()),
            }
            attempts += 1;
        };
        *slot = Some(area.clone());
        Ok(area)
    }

    /// Makes the finished upload visible under its final name: its data
    /// synced, renamed over the name, the directory synced — when the
    /// client hears 226, every byte is on disk. A group of one; see
    /// [`commit_grouped`](Self::commit_grouped).
    pub fn commit(&self) -> Result<(), FsError> {
        commit_pass(&[self]).pop().unwrap_or(Ok(()))
    }

    /// [`commit`](Self::commit), sharing the directory's sync with the
    /// uploads that finish at the same time on this server
    /// ([`CommitGroup`]): the same promise (durable under its final name
    /// when this returns) for one `fsync` per file instead of two. The
    /// file's own sync stays here, in the caller's thread, so the syncs of
    /// concurrent sessions run in parallel (the journal merges them).
    pub fn commit_grouped(self: Arc<Self>) -> Result<(), FsError> {
        self.file.sync_all().map_err(|e| fs_error(&e))?;
        self.rename_into_place()?;
        let group = self.group.clone();
        group.commit(self)
    }

    /// The commit of a file of a Ferry batch (`BSTO SYNC`, docs/batch.md):
    /// renamed over its final name now — its data written, so the name
    /// never shows a partial file — and made durable later, with the rest
    /// of the batch, by one [`BatchDurability::finish`]. The per-file 226
    /// then means "complete, under its name"; the batch's final reply
    /// means "durable". No `fsync` here: a batch of small files does not
    /// wait for one sync per file.
    pub fn commit_deferred(&self, batch: &BatchDurability) -> Result<(), FsError> {
        // Writeback of a large file starts now, so the batch's pass finds
        // less to write. A small file's is left to the pass, which writes
        // the batch's small files together (one `sync_file_range` and one
        // block request per 4 KiB file were what a small upload's commit
        // cost most after its rename).
        if self.allocated.is_none_or(|a| a > SMALL_UPLOAD) {
            let _ = crate::disk::start_writeback(&self.file);
        }
        let file = self.file.try_clone().map_err(|e| fs_error(&e))?;
        let parent = self.parent.clone();
        // The partial area stays for the batch's next file (one `mkdir`
        // and `rmdir` per batch, not per file); the pass removes it. So
        // does the partial's record: its unlink waits for the record's
        // page to leave writeback (an earlier pass wrote it) and, on a
        // file system mounted with `discard`, for the device to discard
        // its block — 20-30 ms each under load, on the thread that
        // receives the line's next files (docs/batch.md, "Durability").
        let (_, record) = self.rename_keeping_area(true)?;
        batch.add(PendingFile { file, parent, dir_key: self.dir_key, record });
        Ok(())
    }

    /// Sets the modification time (`unix_secs`, as MFMT; before 1970 as
    /// 1970) and mode (under SITE CHMOD's rule, [`chmod_bits`]) of the
    /// file being uploaded, on its descriptor: called before the commit,
    /// so the file appears under its name with them (a `BSTO` entry's
    /// facts, docs/batch.md). Nothing for an upload written in place
    /// (APPE, a resume of a complete file): there SITE CHMOD and MFMT
    /// stay the client's.
    pub fn set_facts(&self, unix_secs: i64, mode: u32) -> Result<(), FsError> {
        if self.partial.is_none() {
            return Ok(());
        }
        use std::os::unix::fs::PermissionsExt;
        self.file.set_permissions(std::fs::Permissions::from_mode(chmod_bits(mode))).map_err(|e| fs_error(&e))?;
        let t = std::time::UNIX_EPOCH
            .checked_add(std::time::Duration::from_secs(unix_secs.max(0) as u64))
            .ok_or_else(|| FsError::Other("time out of range".into()))?;
        self.file.set_modified(t).map_err(|e| fs_error(&e))
    }

    /// Renames the synced partial over the final name (nothing to do for
    /// an upload written in place).
    fn rename_into_place(&self) -> Result<(), FsError> {
        if self.rename_keeping_area(false)?.0 {
            let _ = self.parent.remove_dir(AREA);
        }
        Ok(())
    }

    /// Puts the partial under the final name; whether a named partial was
    /// renamed out of the area (an anonymous one linked straight in never
    /// touched it), and, when `defer_record`, the partial's record for
    /// the caller to remove (it is removed here otherwise).
    fn rename_keeping_area(&self, defer_record: bool) -> Result<(bool, Option<StaleRecord>), FsError> {
        let Some(p) = &self.partial else { return Ok((false, None)) };
        let area = match p.area() {
            Some(area) => area,
            None => match self.link_anonymous(p, &self.parent, Path::new(&self.name)) {
                Ok(()) => return Ok((false, None)),
                // `linkat` never replaces a name (the target appeared
                // since the upload began): named in the area, then
                // renamed over it, as any partial.
                Err(nix::errno::Errno::EEXIST) => self.named_area(p).map_err(|e| fs_error(&e))?,
                Err(e) if crate::anonymous::can_link(e) => {
                    if let Some(off) = &p.anonymous {
                        off.turn_off(self.dir_key.0);
                    }
                    self.copy_to_named(p)?
                }
                Err(e) => return Err(fs_error(&e.into())),
            },
        };
        area.rename(&p.part, &self.parent, &self.name).map_err(|e| fs_error(&e))?;
        if !self.recorded.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok((true, None));
        }
        if defer_record {
            let ino = area.symlink_metadata(&p.meta).ok().map(|m| m.ino());
            return Ok((true, Some(StaleRecord { area, meta: p.meta.clone(), ino })));
        }
        let _ = area.remove_file(&p.meta);
        Ok((true, None))
    }

    fn link_anonymous(&self, p: &PartialFile, dir: &Dir, name: &Path) -> Result<(), nix::errno::Errno> {
        match &p.anonymous {
            Some(off) => off.link(&self.file, dir, name),
            None => crate::anonymous::link(&self.file, dir, name),
        }
    }

    /// The last resort for an anonymous partial this process cannot link
    /// (no `/proc`, no capability for `AT_EMPTY_PATH`): its bytes, mode
    /// and time copied to a named partial in the area.
    fn copy_to_named(&self, p: &PartialFile) -> Result<Arc<Dir>, FsError> {
        use std::io::{Seek, SeekFrom};
        let area = Arc::new(open_area(&self.parent)?);
        let mut opts = OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        let (out, _) = open_regular(&area, Path::new(&p.part), &mut opts)?;
        let mut out = out.into_std();
        let mut src = self.file.try_clone().map_err(|e| fs_error(&e))?;
        // A streamed line's sink may have made the description direct
        // (`DirectFile::switching`); this copy's buffers are not aligned.
        use nix::fcntl::{fcntl, FcntlArg, OFlag};
        if let Ok(flags) = fcntl(&src, FcntlArg::F_GETFL) {
            let _ = fcntl(&src, FcntlArg::F_SETFL(OFlag::from_bits_retain(flags) - OFlag::O_DIRECT));
        }
        src.seek(SeekFrom::Start(0)).map_err(|e| fs_error(&e))?;
        io::copy(&mut src, &mut out).map_err(|e| fs_error(&e))?;
        let md = self.file.metadata().map_err(|e| fs_error(&e))?;
        out.set_permissions(md.permissions()).map_err(|e| fs_error(&e))?;
        if let Ok(t) = md.modified() {
            out.set_modified(t).map_err(|e| fs_error(&e))?;
        }
        *p.area.lock().unwrap_or_else(|e| e.into_inner()) = Some(area.clone());
        Ok(area)
    }

    /// The upload failed: gives back the space reserved for bytes that did
    /// not arrive and records `ranges` (file offsets) as what the partial
    /// holds, for a resume. A fresh partial that received nothing is
    /// removed instead: there is nothing to resume, and each failed file
    /// of a batch would otherwise leave an empty `.part` and `.meta` in the
    /// partial area until they expire. A resumed partial is kept (its
    /// earlier record may be all a later resume has).
    pub fn abandon(&self, ranges: &RangeSet) {
        let Some(p) = &self.partial else {
            let _ = self.file.sync_data();
            return;
        };
        if self.fresh && ranges.is_empty() && self.held.is_empty() {
            // An anonymous partial has nothing to remove: the inode goes
            // with its last descriptor.
            let Some(area) = p.area() else { return };
            let _ = area.remove_file(&p.part);
            if self.recorded.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = area.remove_file(&p.meta);
            }
            // Fails while other partials are in it, which is as it should.
            let _ = self.parent.remove_dir(AREA);
            return;
        }
        if let Err(e) = self.named_area(p) {
            tracing::warn!(error = %e, "cannot name what a failed upload holds");
            return;
        }
        let len = self.file.metadata().map(|m| m.len()).unwrap_or(0);
        release_unheld(&self.file, ranges, len.max(self.allocated.unwrap_or(0)));
        // Truncating to the same length frees blocks reserved past the end
        // (ext4, XFS); punching covers the rest (tmpfs).
        let _ = self.file.set_len(len);
        if let Err(e) = self.checkpoint(ranges) {
            tracing::warn!(error = %e, "cannot record what a failed upload holds");
        }
    }
}

/// The directory a run of uploads goes into, kept open between them
/// ([`Root::begin_store_in`]): its descriptor, its identity (the key of
/// the claims) and its partial area. Each upload still holds its own
/// reference, and confinement is as for a single upload: the directory
/// is opened beneath the root once, where each upload opened it before.
/// An area removed meanwhile (another upload's commit found it empty) is
/// opened again.
#[derive(Debug, Default)]
pub struct StoreDirs {
    parent: Option<(VirtualPath, Arc<Dir>, DirKey)>,
    area: Option<Arc<Dir>>,
    anonymous: bool,
    /// A streamed line's files: reserved with `fallocate` only from
    /// [`STREAMED_PREALLOCATE_FROM`] (the line's free space is checked
    /// once instead, [`Root::claim_space`]).
    streamed: bool,
}

impl StoreDirs {
    /// For a streamed line's files: a fresh file whose name is free gets
    /// an anonymous partial (`O_TMPFILE` in its directory), linked under
    /// its name when complete. The directory sees one operation under its
    /// lock (the link) where a named partial costs two (the create in the
    /// area, then the rename across directories, which also takes the file
    /// system's rename mutex), and a file over [`SMALL_UPLOAD`] writes no
    /// record at its start, which a named partial does and its commit
    /// then unlinks (with a mount's `discard`, a device discard per file;
    /// docs/trees.md, "Session 27"). A resume loses nothing: the line's
    /// first checkpoint (a second in) names each incomplete file in the
    /// area and records its synced ranges, as does a failure
    /// ([`Upload::abandon`]); before it, a named partial's record claimed
    /// no range either, and a killed server leaves no anonymous partial
    /// behind. Other uploads keep named partials: a striped front end's
    /// data nodes open them by name (`Root::open_upload_target`).
    pub fn streamed() -> Self {
        Self { anonymous: true, streamed: true, ..Self::default() }
    }

    /// The smallest upload of this run reserved with `fallocate`.
    fn preallocate_from(&self) -> u64 {
        if self.streamed {
            STREAMED_PREALLOCATE_FROM
        } else {
            PREALLOCATE_FROM
        }
    }

    fn parent(&mut self, root: &Root, dir: &VirtualPath) -> Result<(Arc<Dir>, DirKey), FsError> {
        if let Some((p, d, k)) = &self.parent {
            if p == dir {
                return Ok((d.clone(), *k));
            }
        }
        self.area = None;
        let d = root.dir.open_dir(Root::rel(dir)).map_err(|e| fs_error(&e))?;
        let k = Root::key(&d)?;
        let d = Arc::new(d);
        self.parent = Some((dir.clone(), d.clone(), k));
        Ok((d, k))
    }

    fn area(&mut self, parent: &Dir) -> Result<Arc<Dir>, FsError> {
        if let Some(a) = &self.area {
            return Ok(a.clone());
        }
        let a = Arc::new(open_area(parent)?);
        self.area = Some(a.clone());
        Ok(a)
    }

    fn area_gone(&mut self) {
        self.area = None;
    }
}

/// The bits SITE CHMOD (and a batch entry's mode) may set: permission
/// bits only, no setuid/setgid/sticky. One rule for both.
pub fn chmod_bits(mode: u32) -> u32 {
    mode & 0o777
}

/// The last step of committing uploads, shared: the `fsync` of the
/// directories that received the renamed files, once per group of uploads
/// instead of once per file (issue 18: many small files; each file's data
/// is still synced by its own upload before its rename).
///
/// Leader and followers, as a database's group commit, without a timer:
/// an upload whose rename is done while no pass runs syncs its directory
/// at once (no added latency for a lone client); uploads renamed while a
/// pass runs queue up, and the next leader — the first of them to wake —
/// syncs every directory of the queue once. The more uploads finish at
/// once, the larger the groups. Each caller returns only when its name is
/// durable too, so the rule of 226 ("every byte on disk") holds for every
/// client, Globus and lftp included.
#[derive(Debug, Default)]
pub struct CommitGroup {
    state: Mutex<GroupState>,
    done: Condvar,
}

#[derive(Debug, Default)]
struct GroupState {
    queue: Vec<(u64, Arc<Upload>)>,
    leading: bool,
    next_ticket: u64,
    results: HashMap<u64, Result<(), FsError>>,
    /// Passes run and uploads committed (for tests and logs).
    passes: u64,
    committed: u64,
}

impl CommitGroup {
    /// Commits `upload` in the next pass and waits for its result.
    pub fn commit(&self, upload: Arc<Upload>) -> Result<(), FsError> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.queue.push((ticket, upload));
        loop {
            if let Some(r) = st.results.remove(&ticket) {
                return r;
            }
            if st.leading {
                st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            st.leading = true;
            let group = std::mem::take(&mut st.queue);
            drop(st);
            // Hands the results over (or an error, should the pass panic)
            // and wakes the followers, whatever happens in the pass.
            let mut lead = Lead { group: self, tickets: group.iter().map(|(t, _)| *t).collect(), results: Vec::new() };
            let uploads: Vec<&Upload> = group.iter().map(|(_, u)| &**u).collect();
            sync_dirs_of(&uploads);
            lead.results = uploads.iter().map(|_| Ok(())).collect();
            drop(uploads);
            drop(group);
            drop(lead);
            st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        }
    }

    /// (passes run, uploads committed) so far.
    pub fn stats(&self) -> (u64, u64) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (st.passes, st.committed)
    }
}

/// A file of a batch renamed under its name, not yet synced.
#[derive(Debug)]
pub struct PendingFile {
    file: std::fs::File,
    parent: Arc<Dir>,
    /// `parent`'s (device, inode).
    dir_key: DirKey,
    /// The record of the partial the file was renamed from, removed by
    /// the pass ([`Upload::commit_deferred`]).
    record: Option<StaleRecord>,
}

/// A committed upload's restart record, describing a partial that is no
/// longer there (harmless if a crash leaves it: a record without its
/// partial is never read), removed off the data path.
#[derive(Debug)]
struct StaleRecord {
    area: Arc<Dir>,
    meta: String,
    /// The record's inode at the commit. A record's name comes from the
    /// file's name, and the name's claim ends with the commit: a new
    /// upload of the same name may write its own record there before the
    /// pass, which must not remove it.
    ino: Option<u64>,
}

impl StaleRecord {
    fn remove(&self) {
        if self.ino.is_some() && self.area.symlink_metadata(&self.meta).ok().map(|m| m.ino()) == self.ino {
            let _ = self.area.remove_file(&self.meta);
        }
    }
}

/// How a batch's one durability pass is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BatchSyncMethod {
    /// `syncfs(2)` once per file system holding a file of the batch: one
    /// call, which also writes whatever else is dirty on that file system.
    /// Measured cheaper on this machine's ext4 (512 × 4 KiB: 13–114 ms,
    /// against 149–290 ms for writeback + one `fsync` per file, 136–293 ms
    /// for 16 threads of `fsync`s; docs/batch.md).
    #[default]
    Syncfs,
    /// Writeback started for every file, then one `fsync` per file and
    /// one per directory: touches only the batch's files.
    Fsyncs,
}

/// The files of one batch waiting for their durability pass (docs/batch.md,
/// "durability"): [`Upload::commit_deferred`] adds each as it is renamed,
/// [`finish`](Self::finish) makes all of them durable at once before the
/// batch's final reply.
#[derive(Debug, Default)]
pub struct BatchDurability {
    pending: Mutex<Vec<PendingFile>>,
    method: BatchSyncMethod,
    /// The server's shared `syncfs` passes; `None`: a pass of this batch's
    /// own (tests, tools).
    passes: Option<Arc<SyncPasses>>,
    /// (passes, files made durable): for tests and logs.
    counts: Mutex<(u64, u64)>,
    /// A file of the batch was refused or failed: the client may already
    /// have sent later files' data (it does not wait for their 125), so
    /// the server runs none of the batch's later files.
    failed: std::sync::atomic::AtomicBool,
}

impl BatchDurability {
    pub fn new(method: BatchSyncMethod) -> Self {
        let mut b = Self::default();
        b.method = method;
        b
    }

    /// A batch whose `syncfs` pass is folded with the other sessions'
    /// ([`SyncPasses`]).
    pub fn shared(method: BatchSyncMethod, passes: Arc<SyncPasses>) -> Self {
        let mut b = Self::default();
        (b.method, b.passes) = (method, Some(passes));
        b
    }

    fn add(&self, f: PendingFile) {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).push(f);
    }

    /// Marks the batch failed (see the field).
    pub fn fail(&self) {
        self.failed.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a file of the batch was refused or failed.
    pub fn has_failed(&self) -> bool {
        self.failed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Files renamed and not yet made durable.
    pub fn pending(&self) -> usize {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// (passes run, files made durable) so far.
    pub fn stats(&self) -> (u64, u64) {
        *self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The one durability pass: every file added so far, its size and its
    /// name on disk when this returns `Ok` (returns the number of files).
    /// An error means some may not be: the batch's final reply says so
    /// and the client does not report the batch's files as stored.
    pub fn finish(&self) -> io::Result<usize> {
        let files = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if files.is_empty() {
            return Ok(0);
        }
        let result = match self.method {
            BatchSyncMethod::Syncfs => match &self.passes {
                Some(passes) => passes.sync(&files),
                None => syncfs_of(&files),
            }
            .or_else(|e| {
                tracing::debug!(error = %e, "syncfs failed; syncing the batch file by file");
                fsyncs_of(&files)
            }),
            BatchSyncMethod::Fsyncs => fsyncs_of(&files),
        };
        // The records of the batch's partials, then the partial areas it
        // kept, removed when empty.
        for r in files.iter().filter_map(|f| f.record.as_ref()) {
            r.remove();
        }
        let mut seen: Vec<(u64, u64)> = Vec::new();
        for f in &files {
            if seen.contains(&f.dir_key) {
                continue;
            }
            seen.push(f.dir_key);
            let _ = f.parent.remove_dir(AREA);
        }
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.0 += 1;
        if result.is_ok() {
            c.1 += files.len() as u64;
        }
        result.map(|()| files.len())
    }
}

/// A batch cut short (its session ended, or the client went, before the
/// final reply): its renamed files stay under their names, not made
/// durable by the server — the client never saw the batch's final reply
/// and re-checks them when it resumes (docs/batch.md) — but the partial
/// areas they kept for the batch's next file go, when empty, as the pass
/// would have removed them. Without this an interrupted tree upload left
/// an empty `.ferry-partial` in a directory no later upload touched.
impl Drop for BatchDurability {
    fn drop(&mut self) {
        let files = std::mem::take(self.pending.get_mut().unwrap_or_else(|e| e.into_inner()));
        for r in files.iter().filter_map(|f| f.record.as_ref()) {
            r.remove();
        }
        for f in &files {
            let _ = f.parent.remove_dir(AREA);
        }
    }
}

/// The server's `syncfs` passes for `BSTO SYNC` batches, shared by its
/// sessions (docs/batch.md, "Durability"). Any user who may write can end
/// a batch line with a pass over a whole file system, so passes are
/// folded, as a database's group commit: a batch that asks while a pass
/// runs waits for the next one, and that next pass — started by the first
/// waiter to wake — covers every file system asked for meanwhile, by any
/// session. However many sessions end batches at once, at most one pass
/// runs and one more waits. A batch is covered only by a pass that
/// started after it asked (its files were renamed before), never by one
/// already under way. Each session's own rate is limited separately
/// ([`SessionPasses`]).
pub struct SyncPasses {
    state: Mutex<PassState>,
    done: std::sync::Condvar,
    /// Called after every pass with the number of file systems it synced
    /// (the server counts them in its metrics; tests count them).
    on_pass: Option<Box<dyn Fn(usize) + Send + Sync>>,
    passes: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for SyncPasses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncPasses").field("passes", &self.passes()).finish_non_exhaustive()
    }
}

impl Default for SyncPasses {
    fn default() -> Self {
        Self::new()
    }
}

/// What a pass owes one waiting batch: `None` until the pass that covers
/// it ends, then its result (an `io::Error` is not `Clone`: kind and text).
type PassResult = Result<(), (io::ErrorKind, String)>;
type PassSlot = Arc<Mutex<Option<PassResult>>>;

#[derive(Default)]
struct PassState {
    running: bool,
    /// A descriptor on each file system asked for, and who asked.
    waiting: Vec<(u64, std::fs::File, PassSlot)>,
}

impl SyncPasses {
    pub fn new() -> Self {
        Self {
            state: Mutex::default(),
            done: std::sync::Condvar::new(),
            on_pass: None,
            passes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Calls `hook` after each pass with the number of file systems synced.
    pub fn with_hook(mut self, hook: impl Fn(usize) + Send + Sync + 'static) -> Self {
        self.on_pass = Some(Box::new(hook));
        self
    }

    /// Passes run so far.
    pub fn passes(&self) -> u64 {
        self.passes.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Returns when a pass that started after this call has synced every
    /// file system holding a file of `files`.
    fn sync(&self, files: &[PendingFile]) -> io::Result<()> {
        let slot: PassSlot = Arc::default();
        let mut mine: Vec<(u64, std::fs::File, PassSlot)> = Vec::new();
        for f in files {
            let dev = f.dir_key.0;
            if !mine.iter().any(|(d, ..)| *d == dev) {
                mine.push((dev, f.file.try_clone()?, slot.clone()));
            }
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.waiting.extend(mine);
        loop {
            if let Some(r) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
                return r.map_err(|(kind, text)| io::Error::new(kind, text));
            }
            if st.running {
                st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            // Lead the next pass, for everyone waiting now.
            st.running = true;
            let batch = std::mem::take(&mut st.waiting);
            drop(st);
            // Ends the pass even if it panics (the hook is the caller's
            // code): otherwise `running` stayed set and every later batch
            // of every session waited for ever.
            let pass = PassGuard { passes: self, batch };
            let mut synced: Vec<(u64, PassResult)> = Vec::new();
            for (dev, file, _) in &pass.batch {
                if synced.iter().any(|(d, _)| d == dev) {
                    continue;
                }
                synced.push((*dev, syncfs(file).map_err(|e| (e.kind(), e.to_string()))));
            }
            for (dev, _, waiter) in &pass.batch {
                let r = synced.iter().find(|(d, _)| d == dev).map_or(Ok(()), |(_, r)| r.clone());
                let mut w = waiter.lock().unwrap_or_else(|e| e.into_inner());
                if !matches!(*w, Some(Err(_))) {
                    *w = Some(r);
                }
            }
            self.passes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if let Some(hook) = &self.on_pass {
                hook(synced.len());
            }
            drop(pass);
            st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The pass a batch leads in [`SyncPasses::sync`]: dropped at its end or
/// while its thread unwinds, it fails the waiters the pass did not answer
/// and lets the next pass start.
struct PassGuard<'a> {
    passes: &'a SyncPasses,
    batch: Vec<(u64, std::fs::File, PassSlot)>,
}

impl Drop for PassGuard<'_> {
    fn drop(&mut self) {
        for (_, _, waiter) in &self.batch {
            let mut w = waiter.lock().unwrap_or_else(|e| e.into_inner());
            if w.is_none() {
                *w = Some(Err((io::ErrorKind::Other, "the durability pass did not finish (it panicked)".into())));
            }
        }
        let mut st = self.passes.state.lock().unwrap_or_else(|e| e.into_inner());
        st.running = false;
        drop(st);
        self.passes.done.notify_all();
    }
}

/// One session's side of [`SyncPasses`]: at most one pass per `interval`
/// for the session's batches, so a client that ends every line with
/// `BSTO SYNC` (a batch of one empty file each, say) costs the server at
/// most one `syncfs` per interval, however fast it sends them; its next
/// batch's final reply waits instead.
#[derive(Debug)]
pub struct SessionPasses {
    interval: Duration,
    last: Mutex<Option<std::time::Instant>>,
}

impl SessionPasses {
    pub fn new(interval: Duration) -> Self {
        Self { interval, last: Mutex::new(None) }
    }

    /// How long this session's next pass must wait, and the time it may
    /// start (recorded as its last).
    pub fn next_pass(&self) -> Duration {
        self.next_pass_at(std::time::Instant::now())
    }

    /// [`next_pass`](Self::next_pass) at `now`.
    fn next_pass_at(&self, now: std::time::Instant) -> Duration {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let at = last.map_or(now, |l| (l + self.interval).max(now));
        *last = Some(at);
        at - now
    }
}

/// `syncfs(2)` of the file system holding `file`.
#[allow(unsafe_code)]
fn syncfs(file: &std::fs::File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: syncfs only reads the descriptor number, which `file` keeps
    // open for the duration of the call.
    if unsafe { libc::syncfs(file.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `syncfs(2)` once for each file system (device) of `files`.
fn syncfs_of(files: &[PendingFile]) -> io::Result<()> {
    let mut devices: Vec<u64> = Vec::new();
    for f in files {
        let dev = f.dir_key.0;
        if devices.contains(&dev) {
            continue;
        }
        devices.push(dev);
        syncfs(&f.file)?;
    }
    Ok(())
}

/// Writeback for all, then each file's `fsync`, then each directory's.
fn fsyncs_of(files: &[PendingFile]) -> io::Result<()> {
    for f in files {
        let _ = crate::disk::start_writeback(&f.file);
    }
    for f in files {
        f.file.sync_all()?;
    }
    let mut synced: Vec<(u64, u64)> = Vec::new();
    for f in files {
        if let Ok(m) = f.parent.dir_metadata() {
            let k = (m.dev(), m.ino());
            if synced.contains(&k) {
                continue;
            }
            synced.push(k);
        }
        sync_dir(&f.parent)?;
    }
    Ok(())
}

/// The leader's duty on the way out of a pass.
struct Lead<'a> {
    group: &'a CommitGroup,
    tickets: Vec<u64>,
    results: Vec<Result<(), FsError>>,
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        let mut st = self.group.state.lock().unwrap_or_else(|e| e.into_inner());
        st.leading = false;
        st.passes += 1;
        st.committed += self.tickets.len() as u64;
        let mut results = std::mem::take(&mut self.results).into_iter();
        for t in &self.tickets {
            let r = results.next().unwrap_or_else(|| Err(FsError::Other("the commit of this upload failed".into())));
            st.results.insert(*t, r);
        }
        self.group.done.notify_all();
    }
}

/// Commits uploads in the order durability needs: every file's data and
/// size on disk (writeback started for all of them first); then each
/// renamed over its final name; then one `fsync` of each directory that
/// received a name. A rename never precedes its file's sync, so a crash
/// cannot leave a short file under a final name.
fn commit_pass(uploads: &[&Upload]) -> Vec<Result<(), FsError>> {
    if uploads.len() > 1 {
        for u in uploads {
            let _ = crate::disk::start_writeback(&u.file);
        }
    }
    let mut results: Vec<Result<(), FsError>> =
        uploads.iter().map(|u| u.file.sync_all().map_err(|e| fs_error(&e))).collect();
    let mut renamed = Vec::new();
    for (u, r) in uploads.iter().zip(results.iter_mut()) {
        if r.is_err() {
            continue;
        }
        match u.rename_into_place() {
            Ok(()) => renamed.push(*u),
            Err(e) => *r = Err(e),
        }
    }
    sync_dirs_of(&renamed);
    results
}

/// Syncs each directory that received one of `uploads` once: the renames
/// (or an APPE's new length) survive a crash too.
fn sync_dirs_of(uploads: &[&Upload]) {
    // (device, inode) of each directory synced; an upload whose
    // directory cannot be identified gets a sync of its own.
    let mut synced: Vec<(u64, u64)> = Vec::new();
    for u in uploads {
        let key = u.parent.dir_metadata().ok().map(|m| (m.dev(), m.ino()));
        if let Some(k) = key {
            if synced.contains(&k) {
                continue;
            }
            synced.push(k);
        }
        if let Err(e) = sync_dir(&u.parent) {
            tracing::warn!(name = ?u.name, error = %e, "could not sync the directory after the rename");
        }
    }
}

/// Punches the parts of `[0, end)` outside `held` out of `file`: space
/// ALLO reserved, and bytes that arrived but were never recorded.
fn release_unheld(file: &std::fs::File, held: &RangeSet, end: u64) {
    use nix::fcntl::{fallocate, FallocateFlags};
    let flags = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
    for gap in held.missing(end) {
        let (Ok(off), Ok(len)) = (i64::try_from(gap.start), i64::try_from(gap.end - gap.start)) else { continue };
        if fallocate(file, flags, off, len).is_err() {
            // Not every file system can; truncation still frees the tail.
            return;
        }
    }
}

/// Writes a partial's record atomically (a temporary name, then rename).
fn write_record(area: &Dir, meta: &str, record: &Record) -> io::Result<()> {
    let tmp = format!("{meta}.tmp");
    area.write(&tmp, record.to_json())?;
    area.rename(&tmp, area, meta)
}

fn read_record(area: &Dir, meta: &str) -> Option<Record> {
    Record::from_json(&area.read(meta).ok()?)
}

/// Reserves disk space for an upload whose size ALLO announced: blocks
/// arriving out of order from parallel streams then fill a contiguous
/// extent instead of fragmenting the file, and a full disk is reported
/// before any data flows. The file's length is kept (it grows with what
/// arrives).
/// Uploads announced (ALLO) smaller than this get no `fallocate`: a few
/// pages gain nothing from a reservation (ext4 allocates them together at
/// writeback either way, and a full disk still fails the write before the
/// commit), and it was 3-4 % of the server's time for 20,000 × 4 KiB
/// uploads (docs/trees.md, session 12).
pub const PREALLOCATE_FROM: u64 = 64 << 10;

/// A streamed line's files smaller than this get no `fallocate`; the line
/// checks its free space once before its first byte instead
/// ([`Root::claim_space`]). Such a file is written back only at its commit,
/// whole, so ext4's delayed allocation gives it one extent without a
/// reservation, while a reservation leaves unwritten extents that its
/// writeback must convert: without them below this threshold, the mixed
/// tree's loopback upload (1,000 files, all reserved before) ran 1.025
/// times as fast over 42 paired rounds, and a simple writer of the same
/// files 1.08 times (docs/trees.md, "Session 29"); the server's CPU rose
/// about a tenth, which the disk hides. From the write-behind threshold
/// on, writeback starts while parallel streams still leave holes, and the
/// reservation keeps the file in one piece.
const STREAMED_PREALLOCATE_FROM: u64 = crate::disk::WRITE_BEHIND_MIN_FILE;

fn preallocate(file: &std::fs::File, size: u64) -> Result<(), FsError> {
    use nix::fcntl::{fallocate, FallocateFlags};
    let Ok(len) = i64::try_from(size) else { return Ok(()) };
    match fallocate(file, FallocateFlags::FALLOC_FL_KEEP_SIZE, 0, len) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::ENOSPC | nix::errno::Errno::EDQUOT) => Err(FsError::NoSpace),
        // Not every file system can (tmpfs can, some network ones cannot).
        Err(_) => Ok(()),
    }
}

/// Opens a regular file without blocking on a FIFO or a device: opened
/// `O_NONBLOCK` (a FIFO with no writer would block `open` for ever),
/// checked with `fstat`, then switched back to blocking I/O.
fn open_regular(
    dir: &Dir,
    path: &Path,
    opts: &mut OpenOptions,
) -> Result<(cap_std::fs::File, cap_std::fs::Metadata), FsError> {
    opts.custom_flags(libc::O_NONBLOCK);
    let file = dir.open_with(path, opts).map_err(|e| fs_error(&e))?;
    let md = file.metadata().map_err(|e| fs_error(&e))?;
    if md.is_dir() {
        return Err(FsError::IsADirectory);
    }
    if !md.is_file() {
        return Err(FsError::NotRegularFile);
    }
    let std = file.into_std();
    let flags = nix::fcntl::fcntl(&std, nix::fcntl::FcntlArg::F_GETFL).map_err(|e| fs_error(&e.into()))?;
    let flags = nix::fcntl::OFlag::from_bits_retain(flags) - nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&std, nix::fcntl::FcntlArg::F_SETFL(flags)).map_err(|e| fs_error(&e.into()))?;
    Ok((cap_std::fs::File::from_std(std), md))
}

/// The entries of a directory as a listing streams them.
pub struct Listing {
    /// Entries ready to go: the whole directory sorted, when it is small.
    ready: VecDeque<FileFacts>,
    /// The rest of a large directory, read as the listing is sent.
    rest: Option<(Dir, cap_std::fs::ReadDir)>,
    hidden: bool,
}

impl std::fmt::Debug for Listing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Listing({} ready, streaming: {})", self.ready.len(), self.rest.is_some())
    }
}

impl Listing {
    /// The next entry of a large directory; `None` at its end.
    fn pull(&mut self) -> Option<FileFacts> {
        let (dir, entries) = self.rest.as_mut()?;
        for entry in entries.by_ref() {
            let Ok(entry) = entry else { continue };
            if let Some(f) = entry_facts(dir, &entry.file_name(), self.hidden) {
                return Some(f);
            }
        }
        self.rest = None;
        None
    }
}

impl Iterator for Listing {
    type Item = FileFacts;

    fn next(&mut self) -> Option<FileFacts> {
        self.ready.pop_front().or_else(|| self.pull())
    }
}

/// The facts of one directory entry as listed: `None` for the partial
/// area, dot files unless `hidden`, and entries that vanished meanwhile.
/// A symbolic link is described by its target when the target is inside
/// the root, else as a link.
fn entry_facts(dir: &Dir, name: &OsStr, hidden: bool) -> Option<FileFacts> {
    let shown = name_of(name);
    if shown == AREA || (!hidden && shown.starts_with('.')) {
        return None;
    }
    // One `statx` of the name for what is not a link: following (cap-std's
    // confined `metadata`) costs an `openat2` of the entry, a `statx` and a
    // `close`, 10,000 syscalls more for a listing of 5,000 files (issue 18,
    // session 8). Only a link is followed, as before.
    let md = match dir.symlink_metadata(name) {
        Ok(md) if !md.file_type().is_symlink() => md,
        _ => dir.metadata(name).or_else(|_| dir.symlink_metadata(name)).ok()?,
    };
    Some(to_facts(shown, &md))
}

#[derive(Debug)]
pub struct Root {
    dir: Dir,
    path: PathBuf,
    claims: Arc<Claims>,
    commits: Arc<CommitGroup>,
    partial_expiry: Option<Duration>,
    /// When each directory's partial area was last swept for expired
    /// partials (shared by the server's sessions): at most once per
    /// [`sweep_interval`] per directory. Sweeping at every upload read the
    /// area's listing for every file of a batch (an `openat`, two
    /// `getdents64` and four more syscalls per small upload).
    sweeps: Arc<Mutex<HashMap<DirKey, std::time::Instant>>>,
    anonymous: Arc<AnonymousOff>,
    /// Bytes the streamed lines under way will write without a reservation
    /// (shared by the server's sessions; [`Root::claim_space`]).
    unreserved: Arc<Mutex<u64>>,
}

/// A streamed line's claim on free space ([`Root::claim_space`]), given back
/// when the line ends: by then its files are on disk or gone.
#[derive(Debug)]
pub struct SpaceClaim {
    ledger: Arc<Mutex<u64>>,
    bytes: u64,
}

impl Drop for SpaceClaim {
    fn drop(&mut self) {
        let mut held = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        *held = held.saturating_sub(self.bytes);
    }
}

/// How often a directory's partial area is swept: a tenth of the expiry,
/// at most a minute (the expiry is days; a partial lives a little longer
/// than it, never shorter).
fn sweep_interval(expiry: Duration) -> Duration {
    (expiry / 10).min(Duration::from_secs(60))
}

/// Directories remembered by the sweep clock before it forgets them all.
const SWEEPS_REMEMBERED: usize = 4096;

impl Root {
    /// Opens `path` as the root. The process's ambient authority is used
    /// exactly once, here.
    pub fn open(path: &Path) -> io::Result<Self> {
        let dir = Dir::open_ambient_dir(path, ambient_authority())?;
        Ok(Self {
            dir,
            path: path.to_path_buf(),
            claims: Claims::new(),
            commits: Arc::default(),
            partial_expiry: Some(DEFAULT_PARTIAL_EXPIRY),
            sweeps: Arc::default(),
            anonymous: Arc::default(),
            unreserved: Arc::default(),
        })
    }

    /// How long abandoned partial uploads are kept (`None`: for ever).
    pub fn set_partial_expiry(&mut self, expiry: Option<Duration>) {
        self.partial_expiry = expiry;
    }

    /// A root confined further to `sub` (a user's home inside the served
    /// directory), resolved with the same confinement. It shares the
    /// server's claims on live uploads.
    pub fn subroot(&self, sub: &VirtualPath) -> Result<Self, FsError> {
        Self::check_name(sub)?;
        let dir = self.dir.open_dir(Self::rel(sub)).map_err(|e| fs_error(&e))?;
        Ok(Self {
            dir,
            path: self.path.join(Self::rel(sub)),
            claims: self.claims.clone(),
            commits: self.commits.clone(),
            partial_expiry: self.partial_expiry,
            sweeps: self.sweeps.clone(),
            anonymous: self.anonymous.clone(),
            unreserved: self.unreserved.clone(),
        })
    }

    /// The host path this root was opened from (for logs only).
    pub fn host_path(&self) -> &Path {
        &self.path
    }

    fn rel(p: &VirtualPath) -> PathBuf {
        PathBuf::from(os(p.relative()))
    }

    /// The partial area is the server's own: no path may pass through it.
    fn check_name(p: &VirtualPath) -> Result<(), FsError> {
        if p.components().any(|c| c == AREA) {
            return Err(FsError::InvalidName(format!("{AREA} is reserved for uploads in progress")));
        }
        Ok(())
    }

    /// The directory holding `p` and `p`'s own name in it.
    fn parent_of(&self, p: &VirtualPath) -> Result<(Dir, OsString), FsError> {
        let name = p.file_name().ok_or(FsError::IsADirectory)?;
        let parent = self.dir.open_dir(Self::rel(&p.parent())).map_err(|e| fs_error(&e))?;
        Ok((parent, os(name)))
    }

    fn key(dir: &Dir) -> Result<DirKey, FsError> {
        let md = dir.dir_metadata().map_err(|e| fs_error(&e))?;
        Ok((md.dev(), md.ino()))
    }

    /// Facts of one entry, following symbolic links (within the root).
    pub fn facts(&self, p: &VirtualPath) -> Result<FileFacts, FsError> {
        Self::check_name(p)?;
        let md = self.dir.metadata(Self::rel(p)).map_err(|e| fs_error(&e))?;
        Ok(to_facts(p.file_name().unwrap_or("/").to_string(), &md))
    }

    /// The entries of a directory (or the one entry of a file, as `ls`
    /// does), without the partial area and without dot files unless
    /// `hidden`. A directory of up to [`SORTED_LISTING_MAX`] entries comes
    /// sorted by name; a larger one in the file system's order, read as
    /// the listing goes, so memory stays bounded whatever its size.
    pub fn listing(&self, p: &VirtualPath, hidden: bool) -> Result<Listing, FsError> {
        Self::check_name(p)?;
        let md = self.dir.metadata(Self::rel(p)).map_err(|e| fs_error(&e))?;
        if !md.is_dir() {
            let one = to_facts(p.file_name().unwrap_or("/").to_string(), &md);
            return Ok(Listing { ready: VecDeque::from([one]), rest: None, hidden });
        }
        let dir = self.dir.open_dir(Self::rel(p)).map_err(|e| fs_error(&e))?;
        let entries = dir.entries().map_err(|e| fs_error(&e))?;
        let mut listing = Listing { ready: VecDeque::new(), rest: Some((dir, entries)), hidden };
        let mut first = Vec::new();
        while first.len() <= SORTED_LISTING_MAX {
            match listing.pull() {
                Some(f) => first.push(f),
                None => break,
            }
        }
        if listing.rest.is_none() {
            first.sort_by(|a, b| a.name.cmp(&b.name));
        }
        listing.ready = first.into();
        Ok(listing)
    }

    /// [`listing`](Self::listing), collected: at most `limit` entries.
    pub fn list(&self, p: &VirtualPath, hidden: bool) -> Result<Vec<FileFacts>, FsError> {
        Ok(self.listing(p, hidden)?.take(SORTED_LISTING_MAX).collect())
    }

    /// Opens a regular file for reading. FIFOs, sockets and devices are
    /// refused without blocking (`O_NONBLOCK`, then `fstat`).
    pub fn open_read(&self, p: &VirtualPath) -> Result<(std::fs::File, FileFacts), FsError> {
        Self::check_name(p)?;
        let (file, md) = open_regular(&self.dir, &Self::rel(p), OpenOptions::new().read(true))?;
        let facts = to_facts(p.file_name().unwrap_or("/").to_string(), &md);
        Ok((file.into_std(), facts))
    }

    /// Size of the partial upload for `p`, if one was left behind.
    pub fn partial_len(&self, p: &VirtualPath) -> Option<u64> {
        let (parent, name) = self.parent_of(p).ok()?;
        let area = parent.open_dir(AREA).ok()?;
        area.symlink_metadata(partial::part_file(name.as_bytes())).ok().filter(|m| m.is_file()).map(|m| m.len())
    }

    /// Reserves `size` bytes for `file` (`fallocate`), leaving the room
    /// streamed lines under way have claimed ([`Root::claim_space`]) to
    /// them: with claims held, a reservation that would eat into them is
    /// `NoSpace`. The ledger's lock is held across the `fallocate`, so a
    /// claim never counts free space a reservation is taking.
    fn reserve(&self, file: &std::fs::File, size: u64) -> Result<(), FsError> {
        let held = self.unreserved.lock().unwrap_or_else(|e| e.into_inner());
        if *held > 0 {
            let st = nix::sys::statvfs::fstatvfs(file).map_err(|e| fs_error(&io::Error::from(e)))?;
            if st.blocks_available().saturating_mul(st.fragment_size()) < held.saturating_add(size) {
                return Err(FsError::NoSpace);
            }
        }
        preallocate(file, size)
    }

    /// Claims room on the file system holding `dir` for the files of
    /// `sizes` that this run will not reserve (`NoSpace` if there is none):
    /// a streamed line's claim before its first byte, in place of a
    /// reservation per file ([`STREAMED_PREALLOCATE_FROM`]; the files it
    /// does reserve are checked by their own `fallocate`), so that a line
    /// that cannot fit is refused before data flows, as one reserved upload
    /// is. The free space (what an unprivileged writer may use) must hold
    /// the claims of every other line under way too, so two lines racing
    /// for the last space do not both start: the second is refused and its
    /// files go one by one, each reserved, and a reservation leaves the
    /// claimed room alone ([`Root::reserve`]). A line's bytes already written
    /// count twice until it ends (on disk and in its claim), which only
    /// refuses early near a full disk. Writers other than this server are
    /// not counted: against them a line fails at the write that meets
    /// `ENOSPC`, as an unreserved upload does. A directory that cannot be
    /// opened claims nothing; the line's own opens name it.
    pub fn claim_space(
        &self,
        dir: &VirtualPath,
        sizes: impl IntoIterator<Item = u64>,
        dirs: &mut StoreDirs,
    ) -> Result<SpaceClaim, FsError> {
        let from = dirs.preallocate_from();
        let bytes = sizes.into_iter().filter(|&s| s < from).fold(0, u64::saturating_add);
        let none = || SpaceClaim { ledger: self.unreserved.clone(), bytes: 0 };
        if bytes == 0 {
            return Ok(none());
        }
        let Ok((d, _)) = dirs.parent(self, dir) else { return Ok(none()) };
        // Held across the `fstatvfs`, so two claims (or a claim and a
        // reservation, `reserve`) cannot both count the same free space.
        let mut held = self.unreserved.lock().unwrap_or_else(|e| e.into_inner());
        let st = nix::sys::statvfs::fstatvfs(&*d).map_err(|e| fs_error(&io::Error::from(e)))?;
        let free = st.blocks_available().saturating_mul(st.fragment_size());
        if free < held.saturating_add(bytes) {
            return Err(FsError::NoSpace);
        }
        *held += bytes;
        Ok(SpaceClaim { ledger: self.unreserved.clone(), bytes })
    }

    /// Starts an upload to `p`: claims the name (`UploadInProgress` while
    /// another upload holds it) and opens where the data goes.
    pub fn begin_store(&self, p: &VirtualPath, mode: StoreMode, info: &UploadInfo) -> Result<Upload, FsError> {
        self.begin_store_in(p, mode, info, &mut StoreDirs::default())
    }

    /// [`begin_store`](Self::begin_store) for one of several uploads begun
    /// together (a streamed batch line's files): the directory, its
    /// identity and its partial area are opened once for the run of files
    /// that share them (`dirs`), not once per file — five system calls
    /// less for each file after the first (docs/trees.md, session 17).
    pub fn begin_store_in(
        &self,
        p: &VirtualPath,
        mode: StoreMode,
        info: &UploadInfo,
        dirs: &mut StoreDirs,
    ) -> Result<Upload, FsError> {
        Self::check_name(p)?;
        let name = os(p.file_name().ok_or(FsError::IsADirectory)?);
        let (parent, key) = dirs.parent(self, &p.parent())?;
        let id = partial::id(name.as_bytes());
        let claim = self.claims.claim(key, &id).ok_or(FsError::UploadInProgress)?;
        self.sweep(&parent, key);
        let target = match parent.metadata(&name) {
            Ok(md) if md.is_dir() => return Err(FsError::IsADirectory),
            Ok(md) if !md.is_file() => return Err(FsError::NotRegularFile),
            Ok(md) => Some(md),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(fs_error(&e)),
        };
        let record =
            Record { name: name_of(&name), user: info.user.clone(), size: info.allocation, ranges: String::new() };
        // Only a resume asks whether a partial exists (two syscalls less
        // for every other upload).
        let has_partial = || parent.open_dir(AREA).is_ok_and(|a| a.symlink_metadata(format!("{id}.part")).is_ok());
        let in_place = match mode {
            StoreMode::Append => true,
            StoreMode::Resume => target.is_some() && !has_partial(),
            StoreMode::Replace | StoreMode::Patch => false,
        };
        if in_place {
            let mut opts = OpenOptions::new();
            opts.write(true).create(true);
            let (file, md) = open_regular(&parent, Path::new(&name), &mut opts)?;
            // Writing in place through a hard link would change the file
            // under its other names too, which may lie outside the root.
            not_hard_linked(&md)?;
            return Ok(Upload {
                file: file.into_std(),
                existing_len: md.len(),
                held: RangeSet::from_range(0..md.len()),
                parent,
                dir_key: key,
                name,
                partial: None,
                record: Mutex::new(record),
                recorded: Default::default(),
                fresh: false,
                allocated: None,
                group: self.commits.clone(),
                _claim: claim,
            });
        }
        let (part, meta) = (format!("{id}.part"), format!("{id}.meta"));
        if dirs.anonymous && mode == StoreMode::Replace && target.is_none() && !self.anonymous.is_off(key.0) {
            // 0666 less the umask, as the named partial's create: the
            // mode a file of a line without facts keeps.
            match crate::anonymous::create_at(&*parent, Path::new("."), 0o666) {
                Ok(file) => {
                    let upload = Upload {
                        file,
                        existing_len: 0,
                        held: RangeSet::new(),
                        parent,
                        dir_key: key,
                        name,
                        partial: Some(PartialFile {
                            area: Mutex::new(None),
                            part,
                            meta,
                            anonymous: Some(self.anonymous.clone()),
                        }),
                        record: Mutex::new(record),
                        recorded: Default::default(),
                        fresh: true,
                        allocated: info.allocation,
                        group: self.commits.clone(),
                        _claim: claim,
                    };
                    if let Some(size) = info.allocation.filter(|&s| s >= dirs.preallocate_from()) {
                        self.reserve(&upload.file, size)?;
                    }
                    return Ok(upload);
                }
                Err(e) if crate::anonymous::unsupported(&e) => {
                    tracing::debug!(error = %e, "no anonymous files here: named partials");
                    self.anonymous.turn_off(key.0);
                }
                Err(e) => return Err(fs_error(&e)),
            }
        }
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(true);
        // Another upload's commit removes the area when it finds it empty,
        // which it is until our partial exists in it: creating the partial
        // in a removed area fails with NotFound (seen with eight lftp
        // sessions uploading into one directory), and then the area is
        // made again.
        let mut attempts = 0;
        // Whether a partial was there before this upload: only then can a
        // record of it be (a record is written only beside its partial,
        // and removed after the partial is renamed away).
        let mut existed;
        let (area, file, len) = loop {
            let area = dirs.area(&parent)?;
            existed = false;
            // A fresh upload's partial is usually not there: created
            // exclusively, it is a new empty regular file with one link —
            // no `statx` before, no `fstat` and no `O_NONBLOCK` round trip
            // after (four calls less per file). A resume needs what is
            // there, and a name taken falls through to the checks below.
            if mode != StoreMode::Resume {
                let mut fresh = OpenOptions::new();
                fresh.read(true).write(true).create_new(true);
                match area.open_with(&part, &fresh) {
                    Ok(file) => break (area, file.into_std(), 0),
                    Err(e) if e.kind() == io::ErrorKind::NotFound && attempts < 5 => {
                        dirs.area_gone();
                        attempts += 1;
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(fs_error(&e)),
                }
            }
            // The partial is never a symlink we follow, nor a hard link to
            // another file: remove one if planted (it is not ours to resume).
            if let Ok(md) = area.symlink_metadata(&part) {
                if !md.is_file() || md.nlink() > 1 {
                    area.remove_file(&part).map_err(|e| fs_error(&e))?;
                } else {
                    existed = true;
                }
            }
            match open_regular(&area, Path::new(&part), &mut opts) {
                Err(FsError::NotFound) if attempts < 5 => {
                    dirs.area_gone();
                    attempts += 1;
                }
                r => {
                    let (file, md) = r?;
                    // Checked on the open file (a link made meanwhile),
                    // before it is truncated: nothing is written through a
                    // hard link.
                    not_hard_linked(&md)?;
                    break (area, file.into_std(), md.len());
                }
            }
        };
        let (existing_len, held) = match mode {
            // A record without its partial (a crash between a commit's
            // rename and its unlink) describes no bytes here.
            StoreMode::Resume => {
                let old = existed.then(|| read_record(&area, &meta)).flatten().filter(|r| r.name == record.name);
                (len, old.map(|r| r.held()).unwrap_or_default())
            }
            StoreMode::Replace | StoreMode::Patch => {
                // No partial before: no record of it to remove (one
                // failing unlinkat less per fresh upload). A stray record
                // left by a crash is overwritten by this upload's first
                // checkpoint, or by `abandon`, and never read without a
                // partial (above).
                if existed {
                    let _ = area.remove_file(&meta);
                }
                // A partial this open created is empty: no `ftruncate`
                // (one of a small upload's two; docs/trees.md, session 12).
                if existed || len != 0 {
                    file.set_len(0).map_err(|e| fs_error(&e))?;
                }
                (0, RangeSet::new())
            }
            StoreMode::Append => unreachable_in_place(),
        };
        let mut held = held;
        if let (StoreMode::Patch, Some(_)) = (mode, &target) {
            // ESTO changes part of an existing file: the partial starts as
            // its copy (copy_file_range: in the kernel, a reflink where the
            // file system has them).
            let (mut src, src_md) = open_regular(&parent, Path::new(&name), OpenOptions::new().read(true))?;
            let mut dst = &file;
            io::copy(&mut src, &mut dst).map_err(|e| fs_error(&e))?;
            held = RangeSet::from_range(0..src_md.len());
        }
        let upload = Upload {
            file,
            existing_len,
            held,
            parent,
            dir_key: key,
            name,
            partial: Some(PartialFile { area: Mutex::new(Some(area)), part, meta, anonymous: None }),
            record: Mutex::new(record),
            recorded: Default::default(),
            fresh: !(existed && mode == StoreMode::Resume),
            allocated: info.allocation,
            group: self.commits.clone(),
            _claim: claim,
        };
        if let (StoreMode::Replace, Some(size)) = (mode, info.allocation) {
            if size >= dirs.preallocate_from() {
                self.reserve(&upload.file, size)?;
            }
        }
        // The record exists from the start, so the partial is never an
        // orphan nobody can name — except for a fresh small upload
        // (ALLO of at most SMALL_UPLOAD): no checkpoint comes before its
        // end, a failure that received bytes writes the record then
        // (`abandon`; one that received none removes the partial), and only a
        // crash of the server leaves its partial unnamed, removed by the
        // expiry. Creating and deleting a record file per upload was the
        // largest cost of thousands of small uploads (ext4's inode
        // allocator scanning the recently deleted inodes; issue 18).
        let small = mode == StoreMode::Replace && info.allocation.is_some_and(|a| a <= SMALL_UPLOAD);
        if !small {
            upload.checkpoint(&upload.held).map_err(|e| fs_error(&e))?;
        }
        Ok(upload)
    }

    /// Opens, for writing at offsets, where an upload that another process
    /// began with [`begin_store`](Self::begin_store) puts its data: its
    /// partial file (`partial`), or the file itself when that upload writes
    /// in place. Nothing is created or truncated, and the same confinement
    /// holds as for every other path. A striped server's data nodes write
    /// a front end's upload this way (`docs/striping.md`).
    pub fn open_upload_target(&self, p: &VirtualPath, partial: bool) -> Result<std::fs::File, FsError> {
        Self::check_name(p)?;
        let (parent, name) = self.parent_of(p)?;
        let mut opts = OpenOptions::new();
        opts.write(true);
        let (file, md) = if partial {
            let area = parent.open_dir_nofollow(AREA).map_err(|e| fs_error(&e))?;
            let part = format!("{}.part", partial::id(name.as_bytes()));
            open_regular(&area, Path::new(&part), &mut opts)?
        } else {
            open_regular(&parent, Path::new(&name), &mut opts)?
        };
        not_hard_linked(&md)?;
        Ok(file.into_std())
    }

    /// Removes abandoned partial uploads in `dir` older than the expiry,
    /// and the area once it is empty.
    fn sweep_dir(&self, dir: &Dir) {
        if let Ok(key) = Self::key(dir) {
            self.sweep(dir, key);
        }
    }

    /// [`sweep_dir`](Self::sweep_dir) of a directory whose key is known.
    fn sweep(&self, dir: &Dir, key: DirKey) {
        let Some(expiry) = self.partial_expiry else { return };
        {
            let mut sweeps = self.sweeps.lock().unwrap_or_else(|e| e.into_inner());
            let now = std::time::Instant::now();
            if sweeps.get(&key).is_some_and(|t| now.duration_since(*t) < sweep_interval(expiry)) {
                return;
            }
            if sweeps.len() >= SWEEPS_REMEMBERED {
                sweeps.clear();
            }
            sweeps.insert(key, now);
        }
        let Ok(area) = dir.open_dir(AREA) else { return };
        let now = std::time::SystemTime::now();
        let Ok(entries) = area.entries() else { return };
        let mut removed = false;
        for entry in entries.flatten() {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            let id = file.split('.').next().unwrap_or("");
            if self.claims.is_claimed(key, id) {
                continue;
            }
            let age = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| now.duration_since(t.into_std()).ok());
            if age.is_some_and(|a| a >= expiry) {
                removed |= area.remove_file(&*file).is_ok();
            }
        }
        // An empty area is removed by the commit that emptied it (or a
        // batch's pass): removing it here too made every upload of a
        // batch create it again.
        if removed {
            let _ = dir.remove_dir(AREA);
        }
    }

    /// What the partial upload of `p` holds (`SITE PARTIAL`): its record
    /// and the XXH128 of those bytes. `abandoned` stops the hashing.
    pub fn partial_facts(&self, p: &VirtualPath, abandoned: &dyn Fn() -> bool) -> Result<PartialFacts, FsError> {
        Self::check_name(p)?;
        let (parent, name) = self.parent_of(p)?;
        let id = partial::id(name.as_bytes());
        if self.claims.is_claimed(Self::key(&parent)?, &id) {
            return Err(FsError::UploadInProgress);
        }
        self.sweep_dir(&parent);
        let area = parent.open_dir(AREA).map_err(|e| fs_error(&e))?;
        let (file, _) = open_regular(&area, Path::new(&format!("{id}.part")), OpenOptions::new().read(true))?;
        let record = read_record(&area, &format!("{id}.meta")).filter(|r| r.name == name_of(&name));
        let ranges = record.as_ref().map(Record::held).unwrap_or_default();
        let xxh128 = crate::checksum::ranges_checksum(&file.into_std(), "XXH128", ranges.ranges(), abandoned)
            .map_err(|e| fs_error(&e))?;
        Ok(PartialFacts { size: record.and_then(|r| r.size), ranges, xxh128 })
    }

    /// Removes the abandoned partial upload of `name` in `parent`.
    fn remove_partial(&self, parent: &Dir, name: &OsStr) -> Result<bool, FsError> {
        let id = partial::id(name.as_bytes());
        if self.claims.is_claimed(Self::key(parent)?, &id) {
            return Err(FsError::UploadInProgress);
        }
        let Ok(area) = parent.open_dir(AREA) else { return Ok(false) };
        let found = area.remove_file(format!("{id}.part")).is_ok();
        let _ = area.remove_file(format!("{id}.meta"));
        let _ = parent.remove_dir(AREA);
        Ok(found)
    }

    pub fn make_dir(&self, p: &VirtualPath) -> Result<(), FsError> {
        Self::check_name(p)?;
        self.dir.create_dir(Self::rel(p)).map_err(|e| fs_error(&e))
    }

    /// RMD. A directory whose only content is abandoned partial uploads is
    /// empty to the client (it cannot see them): they are removed with it.
    /// One with a live upload is busy.
    pub fn remove_dir(&self, p: &VirtualPath) -> Result<(), FsError> {
        Self::check_name(p)?;
        if p.is_root() {
            return Err(FsError::PermissionDenied);
        }
        match self.dir.remove_dir(Self::rel(p)) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => {}
            r => return r.map_err(|e| fs_error(&e)),
        }
        let dir = self.dir.open_dir(Self::rel(p)).map_err(|e| fs_error(&e))?;
        let only_partials = dir.entries().map_err(|e| fs_error(&e))?.flatten().all(|e| e.file_name() == AREA);
        if !only_partials {
            return Err(FsError::DirectoryNotEmpty);
        }
        if self.claims.any_in(Self::key(&dir)?) {
            return Err(FsError::UploadInProgress);
        }
        dir.remove_dir_all(AREA).map_err(|e| fs_error(&e))?;
        self.dir.remove_dir(Self::rel(p)).map_err(|e| fs_error(&e))
    }

    /// DELE. Of a name with no file but an abandoned partial upload, the
    /// partial is removed (users clean up their failed uploads this way).
    pub fn remove_file(&self, p: &VirtualPath) -> Result<(), FsError> {
        Self::check_name(p)?;
        match self.dir.symlink_metadata(Self::rel(p)) {
            Ok(md) if md.is_dir() => Err(FsError::IsADirectory),
            Ok(_) => {
                self.dir.remove_file(Self::rel(p)).map_err(|e| fs_error(&e))?;
                if let Ok((parent, _)) = self.parent_of(p) {
                    self.sweep_dir(&parent);
                }
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let (parent, name) = self.parent_of(p)?;
                self.sweep_dir(&parent);
                match self.remove_partial(&parent, &name)? {
                    true => Ok(()),
                    false => Err(FsError::NotFound),
                }
            }
            Err(e) => Err(fs_error(&e)),
        }
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
        Self::check_name(p)?;
        let md = self.dir.metadata(Self::rel(p)).map_err(|e| fs_error(&e))?;
        if md.is_dir() {
            Ok(())
        } else {
            Err(FsError::NotADirectory)
        }
    }

    /// MFMT. Returns the modification time the file system took, which is
    /// what the reply reports (not the time asked for).
    pub fn set_modified(&self, p: &VirtualPath, unix_secs: i64) -> Result<i64, FsError> {
        Self::check_name(p)?;
        not_hard_linked(&self.dir.metadata(Self::rel(p)).map_err(|e| fs_error(&e))?)?;
        // Times before 1970 are set as 1970 (cap-std takes none earlier);
        // the reply says so, since it reports what was set.
        let t = std::time::UNIX_EPOCH
            .checked_add(std::time::Duration::from_secs(unix_secs.max(0) as u64))
            .ok_or_else(|| FsError::Other("time out of range".into()))?;
        self.dir
            .set_times(Self::rel(p), None, Some(SystemTimeSpec::Absolute(SystemTime::from_std(t))))
            .map_err(|e| fs_error(&e))?;
        Ok(self.dir.metadata(Self::rel(p)).map_err(|e| fs_error(&e))?.mtime())
    }

    /// SITE CHMOD, limited to permission bits (no setuid/setgid/sticky).
    /// The root itself is the administrator's: its mode is not changed.
    pub fn chmod(&self, p: &VirtualPath, mode: u32) -> Result<(), FsError> {
        Self::check_name(p)?;
        if p.is_root() {
            return Err(FsError::PermissionDenied);
        }
        not_hard_linked(&self.dir.metadata(Self::rel(p)).map_err(|e| fs_error(&e))?)?;
        let perms = cap_std::fs::Permissions::from_mode(chmod_bits(mode));
        self.dir.set_permissions(Self::rel(p), perms).map_err(|e| fs_error(&e))
    }

    /// SITE CHGRP: gives `p` the group `gid`, following a final symbolic
    /// link within the root as chown(2) and the Globus server do. Which
    /// groups are allowed is the caller's decision; here only regular
    /// files and directories are changed, and a hard-linked file not at
    /// all (its other names may lie outside the root).
    pub fn chgrp(&self, p: &VirtualPath, gid: u32) -> Result<(), FsError> {
        use cap_std::fs::OpenOptionsExt;
        Self::check_name(p)?;
        let rel = Self::rel(p);
        // O_NONBLOCK: a FIFO swapped in after any check must not block the
        // open; the type is checked on the descriptor itself.
        let mut opts = OpenOptions::new();
        opts.read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
        // A read-only open works for directories too.
        let file = self.dir.open_with(rel, &opts).map_err(|e| fs_error(&e))?;
        let md = file.metadata().map_err(|e| fs_error(&e))?;
        if !md.is_file() && !md.is_dir() {
            return Err(FsError::Other("not a regular file or directory".into()));
        }
        not_hard_linked(&md)?;
        nix::unistd::fchown(&file, None, Some(nix::unistd::Gid::from_raw(gid)))
            .map_err(|e| fs_error(&io::Error::from_raw_os_error(e as i32)))
    }
}

fn unreachable_in_place() -> (u64, RangeSet) {
    // APPE always writes in place (handled before the partial is opened).
    (0, RangeSet::new())
}

/// Opens (creating) the partial area of `parent`, private to the server.
/// `fsync`s a directory, so a rename in it survives a crash. cap-std opens
/// directories with `O_PATH`, on which `fsync` fails with `EBADF`: the
/// directory is opened again for reading, which `fsync` accepts.
fn sync_dir(dir: &Dir) -> std::io::Result<()> {
    dir.open_with(".", OpenOptions::new().read(true))?.into_std().sync_all()
}

fn open_area(parent: &Dir) -> Result<Dir, FsError> {
    use cap_std::fs::DirBuilder;
    // Usually there (a batch keeps it): no `mkdir` that fails with EEXIST.
    if let Ok(d) = parent.open_dir_nofollow(AREA) {
        return Ok(d);
    }
    for _ in 0..3 {
        let mut b = DirBuilder::new();
        cap_std::fs::DirBuilderExt::mode(&mut b, 0o700);
        match parent.create_dir_with(AREA, &b) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(fs_error(&e)),
        }
        // Another upload's commit may remove it between the two calls.
        match parent.open_dir_nofollow(AREA) {
            Ok(d) => return Ok(d),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(fs_error(&e)),
        }
    }
    Err(FsError::Other("the partial-upload area keeps disappearing".into()))
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

/// A local file name as a path string (names that are not UTF-8 through
/// `octets`), as the client lists local directories.
pub fn local_name(name: &OsStr) -> String {
    name_of(name)
}

/// A path string as a local file name.
pub fn local_os_name(name: &str) -> OsString {
    os(name)
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
    use std::os::linux::fs::MetadataExt as _;

    fn vp(s: &str) -> VirtualPath {
        VirtualPath::root().resolve(s).unwrap()
    }

    /// A committed upload's directory is really synced: the directory
    /// handle cap-std gives is `O_PATH`, which `fsync` refuses (`EBADF`),
    /// and the error used to be dropped.
    #[test]
    fn a_directory_can_be_synced() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), ambient_authority()).unwrap();
        sync_dir(&dir).unwrap();
    }

    fn info() -> UploadInfo {
        UploadInfo { user: "alice".into(), allocation: None }
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
        assert!(root.begin_store(&vp("/dirlink/new"), StoreMode::Replace, &info()).is_err());
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
        std::fs::create_dir(d.path().join(AREA)).unwrap();
        std::fs::hard_link(&secret, d.path().join(AREA).join(partial::part_file(b"new"))).unwrap();
        let root = Root::open(d.path()).unwrap();
        for mode in [StoreMode::Append, StoreMode::Resume] {
            assert_eq!(root.begin_store(&vp("/hl"), mode, &info()).unwrap_err(), FsError::HardLinked, "{mode:?}");
        }
        assert_eq!(root.chmod(&vp("/hl"), 0o777).unwrap_err(), FsError::HardLinked);
        assert_eq!(root.set_modified(&vp("/hl"), 0).unwrap_err(), FsError::HardLinked);
        // Reading is allowed; a planted partial is not resumed but replaced.
        assert_eq!(root.open_read(&vp("/hl")).unwrap().1.size, 7);
        let mut up = root.begin_store(&vp("/new"), StoreMode::Resume, &info()).unwrap();
        assert_eq!(up.existing_len, 0);
        up.file.write_all(b"x").unwrap();
        drop(up);
        // STOR (and ESTO) replace the name, not the linked file.
        let mut up = root.begin_store(&vp("/hl"), StoreMode::Replace, &info()).unwrap();
        up.file.write_all(b"new").unwrap();
        up.commit().unwrap();
        assert_eq!(std::fs::read(d.path().join("hl")).unwrap(), b"new");
        assert_eq!(std::fs::read(&secret).unwrap(), b"outside");
        use std::os::unix::fs::PermissionsExt;
        assert_ne!(std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777, 0o777);
    }

    #[test]
    fn chgrp_changes_files_and_directories_inside_only() {
        use std::os::unix::fs::MetadataExt;
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"x").unwrap();
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), b"f").unwrap();
        std::fs::create_dir(d.path().join("dir")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), d.path().join("abs")).unwrap();
        std::os::unix::fs::symlink("f", d.path().join("good")).unwrap();
        std::fs::hard_link(outside.path().join("secret"), d.path().join("hl")).unwrap();
        nix::unistd::mkfifo(&d.path().join("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let root = Root::open(d.path()).unwrap();
        // Root may give any group (the suite runs as root); otherwise the
        // process's own group is the one it can always give.
        let gid = if nix::unistd::geteuid().is_root() { 65534 } else { nix::unistd::getegid().as_raw() };
        for p in ["/f", "/dir", "/good"] {
            root.chgrp(&vp(p), gid).unwrap();
        }
        assert_eq!(std::fs::metadata(d.path().join("f")).unwrap().gid(), gid);
        assert_eq!(std::fs::metadata(d.path().join("dir")).unwrap().gid(), gid);
        let before = std::fs::metadata(outside.path().join("secret")).unwrap().gid();
        assert_eq!(root.chgrp(&vp("/abs"), gid).unwrap_err(), FsError::Escapes);
        assert_eq!(root.chgrp(&vp("/hl"), gid).unwrap_err(), FsError::HardLinked);
        assert_eq!(root.chgrp(&vp("/missing"), gid).unwrap_err(), FsError::NotFound);
        assert!(
            matches!(root.chgrp(&vp("/fifo"), gid).unwrap_err(), FsError::Other(_)),
            "a FIFO neither hangs nor changes"
        );
        assert_eq!(std::fs::metadata(outside.path().join("secret")).unwrap().gid(), before);
    }

    #[test]
    fn uploads_appear_only_when_committed_and_resume_from_their_record() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        let mut up = root.begin_store(&vp("/f.bin"), StoreMode::Replace, &info()).unwrap();
        up.file.write_all(b"hello").unwrap();
        assert!(!d.path().join("f.bin").exists());
        assert!(root.list(&vp("/"), true).unwrap().is_empty(), "the partial area is hidden");
        assert_eq!(root.partial_len(&vp("/f.bin")), Some(5));
        // While it runs, the name is taken.
        assert_eq!(
            root.begin_store(&vp("/f.bin"), StoreMode::Replace, &info()).unwrap_err(),
            FsError::UploadInProgress
        );
        assert_eq!(root.partial_facts(&vp("/f.bin"), &|| false).unwrap_err(), FsError::UploadInProgress);
        up.abandon(&RangeSet::from_range(0..3));
        drop(up); // interrupted: partial kept for resume, claim released
        let facts = root.partial_facts(&vp("/f.bin"), &|| false).unwrap();
        assert_eq!(facts.ranges.to_string(), "0-3");
        let mut sum = crate::checksum::Checksum::new("XXH128").unwrap();
        sum.update(b"hel");
        assert_eq!(facts.xxh128, sum.finish_hex());
        let up = root.begin_store(&vp("/f.bin"), StoreMode::Resume, &info()).unwrap();
        // Bytes that were never recorded were given back.
        assert_eq!((up.existing_len, up.held.to_string()), (5, "0-3".to_string()));
        std::os::unix::fs::FileExt::write_all_at(&up.file, b"lo", 3).unwrap();
        up.commit().unwrap();
        assert_eq!(std::fs::read(d.path().join("f.bin")).unwrap(), b"hello");
        assert_eq!(root.partial_len(&vp("/f.bin")), None);
        assert!(!d.path().join(AREA).exists(), "the empty area is removed");
        let reserved = vp(&format!("/{AREA}/x"));
        assert!(matches!(root.begin_store(&reserved, StoreMode::Replace, &info()), Err(FsError::InvalidName(_))));
        assert!(matches!(root.is_dir(&vp(&format!("/{AREA}"))), Err(FsError::InvalidName(_))));
    }

    /// A streamed line's fresh files are anonymous: no name, not even in
    /// the partial area, until complete or checkpointed; a failed one is
    /// named in the area with its record and resumes as any partial; names
    /// taken at the start and other uploads keep named partials.
    #[test]
    fn a_streamed_lines_small_files_have_no_name_until_complete_and_resume_when_they_fail() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        let small = |n: u64| UploadInfo { user: "alice".into(), allocation: Some(n) };
        let batch = BatchDurability::new(BatchSyncMethod::Syncfs);
        let mut dirs = StoreDirs::streamed();
        let up = root.begin_store_in(&vp("/a"), StoreMode::Replace, &small(5), &mut dirs).unwrap();
        (&up.file).write_all(b"hello").unwrap();
        let anonymous = |up: &Upload| up.partial.as_ref().is_some_and(|p| p.area().is_none());
        if !anonymous(&up) {
            // A file system without O_TMPFILE: named partials, as before.
            assert!(crate::anonymous::create_at(std::fs::File::open(d.path()).unwrap(), Path::new("."), 0o666)
                .is_err_and(|e| crate::anonymous::unsupported(&e)));
            return;
        }
        assert!(!d.path().join(AREA).exists(), "no partial area for an anonymous partial");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "no name at all before the commit");
        // The name is still claimed while it runs.
        let other = root.begin_store(&vp("/a"), StoreMode::Replace, &info());
        assert_eq!(other.unwrap_err(), FsError::UploadInProgress);
        up.set_facts(1_000_000_000, 0o640).unwrap();
        up.commit_deferred(&batch).unwrap();
        drop(up);
        assert_eq!(std::fs::read(d.path().join("a")).unwrap(), b"hello");
        let md = std::fs::metadata(d.path().join("a")).unwrap();
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        assert_eq!((md.permissions().mode() & 0o777, md.mtime()), (0o640, 1_000_000_000));
        assert!(!d.path().join(AREA).exists());

        // A name that appeared meanwhile is replaced whole (linkat never
        // replaces: the partial is named in the area and renamed over it).
        let up = root.begin_store_in(&vp("/b"), StoreMode::Replace, &small(3), &mut dirs).unwrap();
        assert!(anonymous(&up));
        std::fs::write(d.path().join("b"), "old contents").unwrap();
        (&up.file).write_all(b"new").unwrap();
        up.commit_deferred(&batch).unwrap();
        drop(up);
        assert_eq!(std::fs::read(d.path().join("b")).unwrap(), b"new");

        // A name taken at the start: named.
        let up = root.begin_store_in(&vp("/b"), StoreMode::Replace, &small(3), &mut dirs).unwrap();
        assert!(!anonymous(&up));
        drop(up);
        // A file above SMALL_UPLOAD is anonymous too, with no record at its
        // start; the line's checkpoint names it in the area and records
        // its synced ranges, which a resume then finds.
        let up = root.begin_store_in(&vp("/big"), StoreMode::Replace, &small(SMALL_UPLOAD + 1), &mut dirs).unwrap();
        assert!(anonymous(&up));
        assert_eq!(root.partial_len(&vp("/big")), None, "nothing named before a checkpoint");
        (&up.file).write_all(b"abcd").unwrap();
        up.checkpoint(&RangeSet::from_range(0..4)).unwrap();
        assert!(!anonymous(&up));
        assert_eq!(root.partial_len(&vp("/big")), Some(4));
        up.abandon(&RangeSet::from_range(0..4));
        drop(up);
        let up = root.begin_store(&vp("/big"), StoreMode::Resume, &small(SMALL_UPLOAD + 1)).unwrap();
        assert_eq!(up.held.to_string(), "0-4", "the checkpoint's record");
        up.abandon(&RangeSet::new());
        drop(up);
        // So does any upload outside a streamed line.
        let up = root.begin_store(&vp("/c"), StoreMode::Replace, &small(3)).unwrap();
        assert!(!anonymous(&up));
        up.abandon(&RangeSet::new());
        drop(up);

        // Without facts, the mode any create gets (0666 less the umask),
        // as a named partial's.
        let up = root.begin_store_in(&vp("/plain"), StoreMode::Replace, &small(1), &mut dirs).unwrap();
        assert!(anonymous(&up));
        up.commit_deferred(&batch).unwrap();
        drop(up);
        std::fs::File::create(d.path().join("created")).unwrap();
        let mode = |n: &str| std::fs::metadata(d.path().join(n)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("plain"), mode("created"));

        // A fresh anonymous partial that received nothing leaves nothing.
        let mut dirs = StoreDirs::streamed();
        let up = root.begin_store_in(&vp("/e"), StoreMode::Replace, &small(4), &mut dirs).unwrap();
        assert!(anonymous(&up));
        up.abandon(&RangeSet::new());
        drop(up);
        assert_eq!(root.partial_len(&vp("/e")), None);
        // One that failed part way is named with its record, and resumes.
        let up = root.begin_store_in(&vp("/f"), StoreMode::Replace, &small(6), &mut dirs).unwrap();
        assert!(anonymous(&up));
        (&up.file).write_all(b"abc").unwrap();
        up.abandon(&RangeSet::from_range(0..3));
        drop(up);
        resumes_abc_to_abcdef(&root, d.path(), "f");
        assert_eq!(batch.finish().unwrap(), 3);
    }

    /// A batch file's record (here from a checkpoint) outlives its
    /// commit, which is on the line's receiving thread, and goes with the
    /// batch's pass; a batch dropped before its pass removes it too; a
    /// record that the name's next upload wrote meanwhile stays.
    #[test]
    fn a_batch_files_record_goes_with_its_pass_not_its_commit() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        let info = UploadInfo { user: "alice".into(), allocation: Some(6) };
        let records = || {
            std::fs::read_dir(d.path().join(AREA))
                .map(|r| r.filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".meta")).count())
                .unwrap_or(0)
        };
        for pass in [true, false] {
            let batch = BatchDurability::new(BatchSyncMethod::Syncfs);
            let up = root.begin_store(&vp("/r"), StoreMode::Replace, &info).unwrap();
            (&up.file).write_all(b"abcdef").unwrap();
            up.checkpoint(&RangeSet::from_range(0..3)).unwrap();
            assert_eq!(records(), 1);
            up.commit_deferred(&batch).unwrap();
            drop(up);
            assert_eq!(std::fs::read(d.path().join("r")).unwrap(), b"abcdef");
            assert_eq!(records(), 1, "the commit left the record to the pass");
            if pass {
                assert_eq!(batch.finish().unwrap(), 1);
            } else {
                drop(batch);
            }
            assert_eq!(records(), 0);
            assert!(!d.path().join(AREA).exists(), "and the emptied area");
        }
        // The name's next upload writes its record (same name) before the
        // first one's pass: the pass leaves it.
        let batch = BatchDurability::new(BatchSyncMethod::Syncfs);
        let up = root.begin_store(&vp("/r"), StoreMode::Replace, &info).unwrap();
        (&up.file).write_all(b"abcdef").unwrap();
        up.checkpoint(&RangeSet::from_range(0..3)).unwrap();
        up.commit_deferred(&batch).unwrap();
        drop(up);
        let next = root.begin_store(&vp("/r"), StoreMode::Replace, &info).unwrap();
        (&next.file).write_all(b"ab").unwrap();
        next.checkpoint(&RangeSet::from_range(0..2)).unwrap();
        assert_eq!(batch.finish().unwrap(), 1);
        assert_eq!(records(), 1, "the next upload's record stays");
        next.abandon(&RangeSet::from_range(0..2));
        drop(next);
        let up = root.begin_store(&vp("/r"), StoreMode::Resume, &info).unwrap();
        assert_eq!(up.held.to_string(), "0-2");
        up.abandon(&RangeSet::new());
    }

    /// A partial of `name` recorded as holding `abc` of 6 bytes: its
    /// record says so, a resume holds it, and the commit gives `abcdef`.
    fn resumes_abc_to_abcdef(root: &Root, dir: &Path, name: &str) {
        let p = vp(&format!("/{name}"));
        assert_eq!(root.partial_facts(&p, &|| false).unwrap().ranges.to_string(), "0-3");
        let info = UploadInfo { user: "alice".into(), allocation: Some(6) };
        let up = root.begin_store(&p, StoreMode::Resume, &info).unwrap();
        assert_eq!(up.held.to_string(), "0-3");
        std::os::unix::fs::FileExt::write_all_at(&up.file, b"def", 3).unwrap();
        up.commit().unwrap();
        assert_eq!(std::fs::read(dir.join(name)).unwrap(), b"abcdef");
    }

    #[test]
    fn an_anonymous_partial_that_cannot_be_linked_is_copied_and_its_file_system_uses_names_after() {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("home")).unwrap();
        let root = Root::open(d.path()).unwrap();
        let small = |n: u64| UploadInfo { user: "alice".into(), allocation: Some(n) };
        let anonymous = |up: &Upload| up.partial.as_ref().is_some_and(|p| p.area().is_none());
        let batch = BatchDurability::new(BatchSyncMethod::Syncfs);
        let mut dirs = StoreDirs::streamed();
        let up = root.begin_store_in(&vp("/a"), StoreMode::Replace, &small(5), &mut dirs).unwrap();
        if !anonymous(&up) {
            return; // No O_TMPFILE here: nothing to fall back from.
        }
        // As a process without /proc and without CAP_DAC_READ_SEARCH.
        root.anonymous.refuse_links.store(true, std::sync::atomic::Ordering::Relaxed);
        (&up.file).write_all(b"hello").unwrap();
        up.set_facts(1_000_000_000, 0o640).unwrap();
        up.commit_deferred(&batch).unwrap();
        drop(up);
        assert_eq!(batch.finish().unwrap(), 1);
        assert_eq!(std::fs::read(d.path().join("a")).unwrap(), b"hello");
        let md = std::fs::metadata(d.path().join("a")).unwrap();
        assert_eq!((md.permissions().mode() & 0o777, md.mtime()), (0o640, 1_000_000_000));
        assert!(!d.path().join(AREA).exists(), "the copy's area goes with the batch's pass");

        // The file system is off for this root and its subroots: named
        // partials from the first file on, without another failed link.
        let mut dirs = StoreDirs::streamed();
        let up = root.begin_store_in(&vp("/b"), StoreMode::Replace, &small(3), &mut dirs).unwrap();
        assert!(!anonymous(&up));
        up.abandon(&RangeSet::new());
        drop(up);
        let home = root.subroot(&vp("/home")).unwrap();
        let up = home.begin_store_in(&vp("/b"), StoreMode::Replace, &small(3), &mut StoreDirs::streamed()).unwrap();
        assert!(!anonymous(&up));
        up.abandon(&RangeSet::new());
        drop(up);
        // Not for another root: the flag is not the process's.
        let other = Root::open(d.path()).unwrap();
        let up = other.begin_store_in(&vp("/c"), StoreMode::Replace, &small(3), &mut StoreDirs::streamed()).unwrap();
        assert!(anonymous(&up));

        // A failure part way through, where links fail: its bytes are
        // copied to a named partial with its record, and a resume ends it.
        other.anonymous.refuse_links.store(true, std::sync::atomic::Ordering::Relaxed);
        (&up.file).write_all(b"abc").unwrap();
        up.abandon(&RangeSet::from_range(0..3));
        drop(up);
        resumes_abc_to_abcdef(&other, d.path(), "c");
    }

    #[test]
    fn uploads_begun_together_share_their_directory_and_reopen_a_removed_area() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("up")).unwrap();
        let root = Root::open(d.path()).unwrap();
        let mut dirs = StoreDirs::default();
        let a = root.begin_store_in(&vp("/up/a"), StoreMode::Replace, &info(), &mut dirs).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&a.file, b"aa", 0).unwrap();
        // Its commit removes the emptied area the next upload had cached.
        a.commit().unwrap();
        assert!(!d.path().join("up").join(AREA).exists());
        let b = root.begin_store_in(&vp("/up/b"), StoreMode::Replace, &info(), &mut dirs).unwrap();
        // A partial left by an earlier failed upload of c: taken over and
        // emptied, as a single upload does.
        let stale = d.path().join("up").join(AREA).join(partial::part_file(b"c"));
        std::fs::write(&stale, b"stale bytes").unwrap();
        let c = root.begin_store_in(&vp("/up/c"), StoreMode::Replace, &info(), &mut dirs).unwrap();
        assert_eq!((c.existing_len, c.file.metadata().unwrap().len()), (0, 0));
        // Another directory in the same run opens its own.
        std::fs::create_dir(d.path().join("other")).unwrap();
        let e = root.begin_store_in(&vp("/other/e"), StoreMode::Replace, &info(), &mut dirs).unwrap();
        for (u, body) in [(&b, b"bb"), (&c, b"cc"), (&e, b"ee")] {
            std::os::unix::fs::FileExt::write_all_at(&u.file, body, 0).unwrap();
            u.commit().unwrap();
        }
        assert_eq!(std::fs::read(d.path().join("up/a")).unwrap(), b"aa");
        assert_eq!(std::fs::read(d.path().join("up/b")).unwrap(), b"bb");
        assert_eq!(std::fs::read(d.path().join("up/c")).unwrap(), b"cc");
        assert_eq!(std::fs::read(d.path().join("other/e")).unwrap(), b"ee");
        // The names stay claimed while their uploads live, cache or not.
        let held = root.begin_store_in(&vp("/up/f"), StoreMode::Replace, &info(), &mut dirs).unwrap();
        assert_eq!(
            root.begin_store_in(&vp("/up/f"), StoreMode::Replace, &info(), &mut dirs).unwrap_err(),
            FsError::UploadInProgress
        );
        drop(held);
    }

    #[test]
    fn a_fresh_upload_that_received_nothing_leaves_no_partial() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        // Small (no record until it fails) and large (recorded from the start).
        for allocation in [Some(4096), None] {
            let info = UploadInfo { user: "u".into(), allocation };
            let up = root.begin_store(&vp("/f.bin"), StoreMode::Replace, &info).unwrap();
            up.abandon(&RangeSet::new());
            drop(up);
            assert_eq!(root.partial_len(&vp("/f.bin")), None, "{allocation:?}");
            assert!(!d.path().join(AREA).exists(), "no empty .part or .meta left ({allocation:?})");
        }
        // A partial resumed from an earlier record is kept, even when the
        // resume received nothing.
        let mut up = root.begin_store(&vp("/f.bin"), StoreMode::Replace, &info()).unwrap();
        up.file.write_all(b"hel").unwrap();
        up.abandon(&RangeSet::from_range(0..3));
        drop(up);
        let up = root.begin_store(&vp("/f.bin"), StoreMode::Resume, &info()).unwrap();
        let held = up.held.clone();
        up.abandon(&held);
        drop(up);
        assert_eq!(root.partial_len(&vp("/f.bin")), Some(3));
        assert_eq!(root.partial_facts(&vp("/f.bin"), &|| false).unwrap().ranges.to_string(), "0-3");
    }

    /// Uploads into one directory from many sessions at once: a commit
    /// removes the partial area when it is empty, which it is between
    /// another upload's opening of the area and the creation of its
    /// partial; that upload must make the area again, not fail.
    #[test]
    fn concurrent_uploads_into_one_directory_all_commit() {
        let d = tempfile::tempdir().unwrap();
        let root = std::sync::Arc::new(Root::open(d.path()).unwrap());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let root = root.clone();
                std::thread::spawn(move || {
                    for i in 0..300 {
                        let p = vp(&format!("/f{t}-{i}.bin"));
                        let mut up = root.begin_store(&p, StoreMode::Replace, &info()).unwrap_or_else(|e| {
                            panic!("upload {t}-{i} could not start: {e:?}");
                        });
                        up.file.write_all(b"x").unwrap();
                        if i % 2 == 0 {
                            up.commit().unwrap();
                        } else {
                            Arc::new(up).commit_grouped().unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(root.list(&vp("/"), false).unwrap().len(), 8 * 300);
    }

    /// Uploads renamed while a pass runs share the next pass's directory
    /// sync, each durable under its name when its call returns. The
    /// running pass is simulated by holding `leading`.
    #[test]
    fn uploads_finishing_during_a_pass_commit_as_one_group() {
        let d = tempfile::tempdir().unwrap();
        let root = Arc::new(Root::open(d.path()).unwrap());
        let n = 16;
        root.commits.state.lock().unwrap().leading = true;
        let threads: Vec<_> = (0..n)
            .map(|i| {
                let root = root.clone();
                std::thread::spawn(move || {
                    let up = root.begin_store(&vp(&format!("/g{i}.bin")), StoreMode::Replace, &info()).unwrap();
                    (&up.file).write_all(format!("file {i}").as_bytes()).unwrap();
                    Arc::new(up).commit_grouped().unwrap();
                })
            })
            .collect();
        while root.commits.state.lock().unwrap().queue.len() < n {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Renamed (after its data's sync), but not reported committed
        // before its directory's sync.
        assert!(d.path().join("g0.bin").exists());
        assert!(threads.iter().all(|t| !t.is_finished()));
        {
            let mut st = root.commits.state.lock().unwrap();
            st.leading = false;
            root.commits.done.notify_all();
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(root.commits.stats(), (1, n as u64), "one pass for all {n} uploads");
        for i in 0..n {
            assert_eq!(std::fs::read(d.path().join(format!("g{i}.bin"))).unwrap(), format!("file {i}").as_bytes());
        }
        assert!(!d.path().join(AREA).exists(), "the partial area is removed once empty");
    }

    /// A batch's files (`BSTO SYNC`): each under its name, complete, as
    /// soon as its commit returns, with no sync of its own (the commit
    /// group never runs); one durability pass covers them all, and a
    /// second finish has nothing left to do. Both methods.
    #[test]
    fn a_batch_is_renamed_file_by_file_and_made_durable_in_one_pass() {
        for method in [BatchSyncMethod::Syncfs, BatchSyncMethod::Fsyncs] {
            let d = tempfile::tempdir().unwrap();
            let root = Root::open(d.path()).unwrap();
            std::fs::create_dir(d.path().join("sub")).unwrap();
            let batch = BatchDurability::new(method);
            for i in 0..5 {
                let dir = if i % 2 == 0 { "" } else { "/sub" };
                let up = root.begin_store(&vp(&format!("{dir}/b{i}")), StoreMode::Replace, &info()).unwrap();
                (&up.file).write_all(format!("batch file {i}").as_bytes()).unwrap();
                assert!(!d.path().join(format!("{}b{i}", if dir.is_empty() { "" } else { "sub/" })).exists());
                up.commit_deferred(&batch).unwrap();
                drop(up);
                let p = d.path().join(format!("{}b{i}", if dir.is_empty() { "" } else { "sub/" }));
                assert_eq!(std::fs::read(&p).unwrap(), format!("batch file {i}").as_bytes(), "complete under its name");
                assert_eq!(batch.pending(), i + 1);
            }
            assert_eq!(batch.stats(), (0, 0), "no file waited for a sync of its own");
            assert_eq!(root.commits.stats(), (0, 0), "nor for the commit group's");
            assert_eq!(batch.finish().unwrap(), 5);
            assert_eq!(batch.stats(), (1, 5), "one pass for the whole batch ({method:?})");
            assert_eq!(batch.pending(), 0);
            assert_eq!(batch.finish().unwrap(), 0);
            assert!(!d.path().join(AREA).exists() && !d.path().join("sub").join(AREA).exists());
        }
    }

    /// A batch whose session ended before its pass leaves its files under
    /// their names and no empty partial area behind.
    #[test]
    fn a_batch_cut_short_removes_the_partial_areas_it_kept() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let batch = BatchDurability::new(BatchSyncMethod::Syncfs);
        batch_of_one(&root, "/sub/a", &batch);
        batch_of_one(&root, "/b", &batch);
        assert!(d.path().join("sub").join(AREA).exists(), "kept for the batch's next file");
        drop(batch);
        assert_eq!(std::fs::read(d.path().join("sub/a")).unwrap(), b"x");
        assert!(!d.path().join(AREA).exists() && !d.path().join("sub").join(AREA).exists());
    }

    /// One upload of a `BSTO SYNC` batch, renamed and waiting for its pass.
    fn batch_of_one(root: &Root, path: &str, batch: &BatchDurability) {
        let up = root.begin_store(&vp(path), StoreMode::Replace, &info()).unwrap();
        (&up.file).write_all(b"x").unwrap();
        up.commit_deferred(batch).unwrap();
    }

    /// Batches of three sessions that ask while a pass runs share the
    /// next one: one `syncfs` for all three, counted by the hook.
    #[test]
    fn sync_passes_of_concurrent_batches_fold_into_one() {
        let d = tempfile::tempdir().unwrap();
        let root = Arc::new(Root::open(d.path()).unwrap());
        let hooked = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let h = hooked.clone();
        let passes = Arc::new(SyncPasses::new().with_hook(move |_| {
            h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }));
        // A pass is under way (held here): whoever asks now waits for the next.
        passes.state.lock().unwrap().running = true;
        let sessions: Vec<_> = (0..3)
            .map(|i| {
                let (root, passes) = (root.clone(), passes.clone());
                std::thread::spawn(move || {
                    let batch = BatchDurability::shared(BatchSyncMethod::Syncfs, passes);
                    batch_of_one(&root, &format!("/s{i}"), &batch);
                    batch.finish().unwrap()
                })
            })
            .collect();
        while passes.state.lock().unwrap().waiting.len() < 3 {
            std::thread::sleep(Duration::from_millis(5));
        }
        {
            let mut st = passes.state.lock().unwrap();
            st.running = false;
            passes.done.notify_all();
        }
        for s in sessions {
            assert_eq!(s.join().unwrap(), 1);
        }
        assert_eq!(passes.passes(), 1, "one pass for the three sessions' batches");
        assert_eq!(hooked.load(std::sync::atomic::Ordering::SeqCst), 1, "the hook counted it");
    }

    /// A pass whose hook panics still ends: the batch that asked during
    /// it leads the next pass and is made durable, rather than waiting
    /// for ever behind a pass marked as running.
    #[test]
    fn a_panicking_pass_does_not_leave_waiters_hanging() {
        let d = tempfile::tempdir().unwrap();
        let root = Arc::new(Root::open(d.path()).unwrap());
        let (entered, in_hook) = std::sync::mpsc::channel::<()>();
        let (go, may_go) = std::sync::mpsc::channel::<()>();
        let (entered, may_go) = (Mutex::new(entered), Mutex::new(may_go));
        let first = std::sync::atomic::AtomicBool::new(true);
        let passes = Arc::new(SyncPasses::new().with_hook(move |_| {
            if first.swap(false, std::sync::atomic::Ordering::SeqCst) {
                entered.lock().unwrap().send(()).unwrap();
                may_go.lock().unwrap().recv().unwrap();
                panic!("a hook that panics");
            }
        }));
        let session = |name: &'static str| {
            let (root, passes) = (root.clone(), passes.clone());
            std::thread::spawn(move || {
                let batch = BatchDurability::shared(BatchSyncMethod::Syncfs, passes);
                batch_of_one(&root, name, &batch);
                batch.finish()
            })
        };
        let leader = session("/a");
        in_hook.recv().unwrap();
        let (done, result) = std::sync::mpsc::channel();
        let waiter = session("/b");
        while passes.state.lock().unwrap().waiting.is_empty() {
            std::thread::yield_now();
        }
        go.send(()).unwrap();
        assert!(leader.join().is_err(), "the leading thread panicked");
        std::thread::spawn(move || done.send(waiter.join().unwrap().unwrap()).unwrap());
        // A hang is what this test is about: fail it rather than wait for ever.
        assert_eq!(result.recv_timeout(Duration::from_secs(60)).expect("the waiting batch hung"), 1);
        assert_eq!(passes.passes(), 2);
        assert!(!passes.state.lock().unwrap().running);
    }

    /// A session that ends batches as fast as it can is held to one pass
    /// per interval, on a clock the test drives (no sleeps, no timing):
    /// each request is told to wait until a full interval after the
    /// previous pass; one that comes later waits for nothing.
    #[test]
    fn a_sync_spammer_costs_at_most_one_pass_per_interval() {
        let interval = Duration::from_millis(50);
        let clock = SessionPasses::new(interval);
        let t0 = std::time::Instant::now();
        assert_eq!(clock.next_pass_at(t0), Duration::ZERO, "the first pass runs at once");
        // Ten requests at the same instant: the k-th waits k intervals.
        for k in 1..=10u32 {
            assert_eq!(clock.next_pass_at(t0), interval * k);
        }
        // Requests spaced wider than the interval wait for nothing.
        let later = t0 + interval * 20;
        assert_eq!(clock.next_pass_at(later), Duration::ZERO);
        assert_eq!(clock.next_pass_at(later + interval * 2), Duration::ZERO);
        // One a tenth of an interval after the last waits the rest of it.
        assert_eq!(clock.next_pass_at(later + interval * 2 + interval / 10), interval - interval / 10);
        // Sessions have their own clocks: another one is not held back.
        assert_eq!(SessionPasses::new(interval).next_pass_at(t0), Duration::ZERO);
    }

    /// A lone upload is committed at once, in a pass of its own.
    #[test]
    fn a_lone_grouped_commit_is_a_pass_of_one() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        for i in 0..3 {
            let up = root.begin_store(&vp(&format!("/l{i}")), StoreMode::Replace, &info()).unwrap();
            (&up.file).write_all(b"x").unwrap();
            Arc::new(up).commit_grouped().unwrap();
            assert!(d.path().join(format!("l{i}")).exists());
        }
        assert_eq!(root.commits.stats(), (3, 3));
    }

    #[test]
    fn long_and_raw_names_get_partials() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        let long = "x".repeat(255);
        let raw = octets::decode(b"caf\xe9").into_owned();
        for name in [long.as_str(), raw.as_str()] {
            let mut up = root.begin_store(&vp(&format!("/{name}")), StoreMode::Replace, &info()).unwrap();
            up.file.write_all(b"data").unwrap();
            up.commit().unwrap();
        }
        assert_eq!(std::fs::read(d.path().join(&long)).unwrap(), b"data");
        assert_eq!(std::fs::read(d.path().join(OsStr::from_bytes(b"caf\xe9"))).unwrap(), b"data");
        let names: Vec<String> = root.list(&vp("/"), false).unwrap().into_iter().map(|f| f.name).collect();
        assert_eq!(names, vec![raw.clone(), long.clone()]);
        assert_eq!(root.open_read(&vp(&format!("/{raw}"))).unwrap().1.size, 4);
    }

    #[test]
    fn a_streamed_lines_small_files_claim_their_room_together_instead_of_a_reservation_each() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        let alloc = |n: u64| UploadInfo { user: "alice".into(), allocation: Some(n) };
        let reserved = |up: &Upload| up.file.metadata().unwrap().st_blocks() * 512;
        // A single upload is reserved from PREALLOCATE_FROM.
        let one = root.begin_store(&vp("/one"), StoreMode::Replace, &alloc(1 << 20)).unwrap();
        assert!(reserved(&one) >= 1 << 20, "{}", reserved(&one));
        one.abandon(&RangeSet::new());
        // A streamed line's file below the threshold is not, named or
        // anonymous; one from the threshold on is.
        std::fs::write(d.path().join("named"), b"old").unwrap();
        let mut dirs = StoreDirs::streamed();
        for name in ["/fresh", "/named"] {
            let up = root.begin_store_in(&vp(name), StoreMode::Replace, &alloc(1 << 20), &mut dirs).unwrap();
            assert_eq!(reserved(&up), 0, "{name}");
            up.abandon(&RangeSet::new());
        }
        let big = root.begin_store_in(&vp("/big"), StoreMode::Replace, &alloc(STREAMED_PREALLOCATE_FROM), &mut dirs);
        let big = big.unwrap();
        assert!(reserved(&big) >= STREAMED_PREALLOCATE_FROM, "{}", reserved(&big));
        big.abandon(&RangeSet::new());
        // The line's claim instead: what fits passes, what cannot is NoSpace.
        let free = || {
            let st = nix::sys::statvfs::statvfs(d.path()).unwrap();
            st.blocks_available() * st.fragment_size()
        };
        // Unreserved files one byte under the threshold, `part` of the free space.
        let largest = STREAMED_PREALLOCATE_FROM - 1;
        let files = |part: f64| {
            let n = (free() as f64 * part / largest as f64).ceil() as usize;
            std::iter::repeat_n(largest, n.max(1))
        };
        drop(root.claim_space(&vp("/"), [1 << 20, 1 << 20], &mut dirs).unwrap());
        assert_eq!(root.claim_space(&vp("/"), files(1.1), &mut dirs).unwrap_err(), FsError::NoSpace);
        // Files the line reserves itself are not counted again.
        drop(root.claim_space(&vp("/"), [u64::MAX], &mut dirs).unwrap());
        // A directory that is not there is left to the line's opens.
        drop(root.claim_space(&vp("/no/such"), files(1.1), &mut dirs).unwrap());
        // Two lines under way: the second does not get the first's room
        // (in another subroot too: the claims are the server's), and gets
        // it once the first has ended.
        let first = root.claim_space(&vp("/"), files(0.6), &mut dirs).unwrap();
        std::fs::create_dir(d.path().join("home")).unwrap();
        let home = root.subroot(&vp("/home")).unwrap();
        let mut home_dirs = StoreDirs::streamed();
        assert_eq!(home.claim_space(&vp("/"), files(0.6), &mut home_dirs).unwrap_err(), FsError::NoSpace);
        drop(first);
        let second = home.claim_space(&vp("/"), files(0.6), &mut home_dirs).unwrap();
        drop(second);
        // Nor does a single upload's reservation: with all but 128 MiB
        // claimed, 512 MiB cannot be reserved (small enough to do no harm
        // if it were; the margins absorb other writers meanwhile).
        let claimed = free() - (128 << 20);
        let sizes = std::iter::repeat_n(largest, usize::try_from(claimed / largest).unwrap());
        let all_but = root.claim_space(&vp("/"), sizes.chain([claimed % largest]), &mut dirs).unwrap();
        let single = home.begin_store(&vp("/single"), StoreMode::Replace, &alloc(512 << 20));
        assert_eq!(single.unwrap_err(), FsError::NoSpace);
        drop(all_but);
        assert_eq!(*root.unreserved.lock().unwrap(), 0, "every claim given back");
    }

    #[test]
    fn failed_uploads_give_back_their_reservation_and_can_be_removed() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let alloc = UploadInfo { user: "alice".into(), allocation: Some(64 << 20) };
        let mut up = root.begin_store(&vp("/sub/a"), StoreMode::Replace, &alloc).unwrap();
        up.file.write_all(b"abcd").unwrap();
        up.abandon(&RangeSet::from_range(0..4));
        drop(up);
        let blocks: u64 = std::fs::read_dir(d.path().join("sub").join(AREA))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().st_blocks())
            .sum();
        assert!(blocks * 512 < 1 << 20, "{blocks} blocks still allocated");
        // RMD of a directory holding only the abandoned partial removes both.
        root.remove_dir(&vp("/sub")).unwrap();
        assert!(!d.path().join("sub").exists());
        // DELE of the final name removes an abandoned partial.
        let up = root.begin_store(&vp("/b"), StoreMode::Replace, &info()).unwrap();
        assert_eq!(root.remove_file(&vp("/b")).unwrap_err(), FsError::UploadInProgress);
        drop(up);
        root.remove_file(&vp("/b")).unwrap();
        assert_eq!(root.remove_file(&vp("/b")).unwrap_err(), FsError::NotFound);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn esto_patches_a_copy_and_fifos_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        std::fs::write(d.path().join("p"), b"abcdefgh").unwrap();
        let up = root.begin_store(&vp("/p"), StoreMode::Patch, &info()).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&up.file, b"XY", 2).unwrap();
        assert_eq!(std::fs::read(d.path().join("p")).unwrap(), b"abcdefgh", "unchanged until committed");
        up.commit().unwrap();
        assert_eq!(std::fs::read(d.path().join("p")).unwrap(), b"abXYefgh");
        nix::unistd::mkfifo(&d.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(root.open_read(&vp("/fifo")).unwrap_err(), FsError::NotRegularFile);
        assert_eq!(root.begin_store(&vp("/fifo"), StoreMode::Append, &info()).unwrap_err(), FsError::NotRegularFile);
        assert_eq!(root.chmod(&vp("/"), 0o777).unwrap_err(), FsError::PermissionDenied);
    }

    #[test]
    fn large_directories_stream_and_small_ones_sort() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::open(d.path()).unwrap();
        for i in (0..10).rev() {
            std::fs::write(d.path().join(format!("f{i}")), b"").unwrap();
        }
        let names: Vec<String> = root.listing(&vp("/"), false).unwrap().map(|f| f.name).collect();
        assert_eq!(names, (0..10).map(|i| format!("f{i}")).collect::<Vec<_>>());
        for i in 10..SORTED_LISTING_MAX + 100 {
            std::fs::write(d.path().join(format!("f{i}")), b"").unwrap();
        }
        assert_eq!(root.listing(&vp("/"), false).unwrap().count(), SORTED_LISTING_MAX + 100);
    }
}
