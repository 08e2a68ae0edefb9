//! Copying a tree, directory by directory, so that a re-run finishes the
//! job instead of starting it again.
//!
//! For every directory the source is listed once and the destination
//! once (if it exists). Each file then gets one of three fates:
//!
//! * **skip** — the destination already has it: same size and not older
//!   than the source (with `--verify`: also the same checksum). Copies
//!   keep modification times, so a finished file always passes; on a
//!   server that cannot set times, the upload's own time is newer.
//! * **resume** — a restart record says which ranges arrived: the
//!   single-file resume (`resume.rs`, MODE E `REST` ranges) sends the rest.
//! * **copy** — everything else. Fresh files of one directory go as one
//!   pipelined MODE E batch; each file's arrived ranges are recorded as
//!   they come and each is committed as soon as it is complete, so an
//!   interrupt anywhere loses at most the last quarter second.
//!
//! Symbolic links are not followed unless `-L`: a link is recreated as a
//! link where the destination is local, and passed over with a warning
//! where it is a server (FTP has no command to make one). With `-L`, a
//! directory already on the path from the top (same device and inode, or
//! the server's `Unique` fact) is a loop and is not entered.
//!
//! A failing file is listed and the copy goes on (`--fail-fast` stops);
//! the summary says what was copied, skipped, resumed, passed over and
//! failed. See `docs/trees.md`.

use super::{local_err, CopySummary, PlanLine, Problem, SyncRule};
use crate::error::ClientError;
use crate::location::Location;
use crate::resume::ResumeState;
use crate::Client;
use ferry_proto::facts::{FileFacts, FileKind};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Deeper than this is taken for a loop the identities did not reveal.
const MAX_DEPTH: usize = 256;
/// Extra sessions that list a remote tree's directories in parallel.
const LISTERS: usize = 4;

/// One entry of a source directory.
struct Entry {
    facts: FileFacts,
    /// Where a symbolic link points (links not followed).
    link: Option<PathBuf>,
}

/// Whether two locations are the same place (passwords aside).
pub(super) fn same_place(a: &Location, b: &Location) -> bool {
    match (a, b) {
        (Location::Remote(x), Location::Remote(y)) => x.same_file(y),
        (Location::Local(x), Location::Local(y)) => match (std::fs::canonicalize(x), std::fs::canonicalize(y)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        },
        _ => false,
    }
}

fn join_rel(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
    }
}

/// A name with a line break cannot travel in an FTP command (RFC 959
/// §4.1.3: a command ends at CRLF; RFC 2640 §3.1 can escape a CR as CR
/// NUL, but an LF has no escape). Sent as it is, it would end the command
/// early and the rest of the name would be taken for another command.
fn line_safe(src: &Location, dst: &Location, name: &str) -> Result<(), ClientError> {
    let remote = matches!(src, Location::Remote(_)) || matches!(dst, Location::Remote(_));
    if remote && name.contains(['\r', '\n']) {
        return Err(ClientError::Usage(format!(
            "{name:?}: the name has a line break, which an FTP command cannot carry; rename it to copy it"
        )));
    }
    Ok(())
}

/// A directory with at least this many files looks its files' restart
/// records up in one listing of the state directory ([`RecordIndex`]).
const LIST_RECORDS_FROM: usize = 16;

/// The restart records on disk, listed once per tree copy and looked up by
/// every directory of many files: a file without one then costs no failing
/// `open` of its record (one per downloaded file in session 8's `strace` of
/// a 5,000-file tree; docs/trees.md). Once, not per directory: the state
/// directory keeps the records of every interrupted copy (20,464 on the
/// benchmark machine in session 11), and listing it for each directory of
/// a tree was 8–13 % of the client's CPU. A record this copy writes is for
/// a file it has already decided, so the one listing stays true for the
/// files still to decide. `None`: not listed (few files, or the listing
/// failed): each record is opened, as before.
struct RecordIndex(Option<Arc<HashSet<String>>>);

impl RecordIndex {
    /// The index for a directory of `files` files, from `cache` (the
    /// copy's one listing) or a listing made now and kept there.
    fn list(files: usize, cache: &mut Option<Arc<HashSet<String>>>) -> Self {
        Self::list_in(files, cache, crate::resume::state_dir)
    }

    /// [`list`](Self::list) of the state directory `dir` gives.
    fn list_in(files: usize, cache: &mut Option<Arc<HashSet<String>>>, dir: impl FnOnce() -> Option<PathBuf>) -> Self {
        if files < LIST_RECORDS_FROM {
            return Self(None);
        }
        if let Some(names) = cache {
            return Self(Some(names.clone()));
        }
        let Some(dir) = dir() else { return Self(None) };
        let names = match std::fs::read_dir(&dir) {
            Ok(rd) => rd.flatten().filter_map(|e| e.file_name().into_string().ok()).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashSet::new(),
            Err(_) => return Self(None),
        };
        let names = Arc::new(names);
        *cache = Some(names.clone());
        Self(Some(names))
    }

    /// The copy's restart state: loaded when its record may be there.
    fn load(&self, source: &str, destination: &str, size: u64, modified: i64) -> ResumeState {
        match &self.0 {
            Some(names) if !names.contains(&crate::resume::record_name(source, destination)) => {
                ResumeState::absent(source, destination, size, modified)
            }
            _ => ResumeState::load(source, destination, size, modified),
        }
    }
}

/// Whether `dst` already holds `src`'s file by the facts alone, under
/// `rule` (times unknown on either side count as matching); the checksum
/// rule also needs the checksums compared.
fn up_to_date(rule: SyncRule, src: &FileFacts, dst: Option<&FileFacts>) -> bool {
    let Some(d) = dst else { return false };
    let unknown = src.modified <= 0 || d.modified <= 0;
    d.kind == FileKind::File
        && match rule {
            SyncRule::Exists => true,
            SyncRule::Size | SyncRule::Checksum => d.size == src.size,
            SyncRule::NotOlder => d.size == src.size && (unknown || d.modified >= src.modified),
            SyncRule::SizeAndTime => d.size == src.size && (unknown || d.modified == src.modified),
        }
}

impl Client {
    /// Records a failure; `Err(FailFast)` when the copy must stop.
    pub(super) fn failed(&self, summary: &mut CopySummary, path: String, e: ClientError) -> Result<(), ClientError> {
        tracing::debug!(path = %path, error = %e, "failed; going on");
        summary.failures.push(Problem { path, reason: e.to_string() });
        // Without a server there is nothing left to try.
        let fatal = matches!(e, ClientError::Connect { .. } | ClientError::Login { .. } | ClientError::Credentials(_));
        if self.opts.fail_fast || fatal {
            return Err(if fatal { e } else { ClientError::FailFast });
        }
        Ok(())
    }

    fn passed_over(summary: &mut CopySummary, path: String, reason: &str) {
        tracing::debug!(path = %path, "not copied: {reason}");
        summary.passed_over.push(Problem { path, reason: reason.to_string() });
    }

    /// The entries of a source directory: links as links unless `-L`.
    async fn list_source(&mut self, loc: &Location) -> Result<Vec<Entry>, ClientError> {
        match loc {
            Location::Local(p) => {
                let follow = self.opts.follow_links;
                let mut out = Vec::new();
                for entry in std::fs::read_dir(p).map_err(local_err(p))? {
                    let entry = entry.map_err(local_err(p))?;
                    let path = entry.path();
                    let name = ferry_io::root::local_name(&entry.file_name());
                    let lmd = std::fs::symlink_metadata(&path).map_err(local_err(&path))?;
                    if lmd.file_type().is_symlink() {
                        if follow {
                            match std::fs::metadata(&path) {
                                Ok(md) => out.push(Entry { facts: ferry_io::root::local_facts(name, md), link: None }),
                                // Dangling: described as the link.
                                Err(_) => {
                                    let target = std::fs::read_link(&path).ok();
                                    out.push(Entry { facts: ferry_io::root::local_facts(name, lmd), link: target })
                                }
                            }
                        } else {
                            let target = std::fs::read_link(&path).map_err(local_err(&path))?;
                            out.push(Entry { facts: ferry_io::root::local_facts(name, lmd), link: Some(target) });
                        }
                    } else {
                        out.push(Entry { facts: ferry_io::root::local_facts(name, lmd), link: None });
                    }
                }
                out.sort_by(|a, b| a.facts.name.cmp(&b.facts.name));
                Ok(out)
            }
            Location::Remote(_) => {
                let list = match self.listed.remove(&loc.to_string()) {
                    Some(list) => list,
                    None => self.read_dir(loc).await?,
                };
                Ok(list.into_iter().map(|facts| Entry { facts, link: None }).collect())
            }
        }
    }

    /// Lists the remote source directories `dirs` ahead, in parallel, on
    /// up to [`LISTERS`] extra sessions (only when the files are copied
    /// after the walk, by several sessions): the children of a directory
    /// cost one listing round together instead of one each. A lister that
    /// fails is dropped; its directories are listed by the walk itself.
    async fn prefetch_listings(&mut self, dirs: &[Location]) {
        let remote: Vec<Location> = dirs.iter().filter(|d| matches!(d, Location::Remote(_))).cloned().collect();
        if remote.len() < 2 || self.deferred.is_none() || self.opts.concurrency == Some(1) {
            return;
        }
        // The walk's own sessions (data and listing) count against the cap.
        let want = if self.listers_failed {
            self.listers.len()
        } else {
            remote.len().min(LISTERS).min(self.opts.max_sessions.saturating_sub(2))
        };
        while self.listers.len() < want {
            let w = self.worker(None);
            self.listers.push(w);
        }
        let mut listers = std::mem::take(&mut self.listers);
        let n = listers.len();
        if n == 0 {
            return;
        }
        let runs = listers.iter_mut().enumerate().map(|(k, c)| {
            let mine: Vec<Location> = remote.iter().skip(k).step_by(n).cloned().collect();
            async move {
                let mut out = Vec::new();
                for loc in mine {
                    match c.read_dir(&loc).await {
                        Ok(list) => out.push((loc.to_string(), list)),
                        Err(e) => {
                            tracing::debug!(error = %e, "a listing session failed; the walk lists on its own");
                            return (out, false);
                        }
                    }
                }
                (out, true)
            }
        });
        let results = futures::future::join_all(runs).await;
        let mut keep = Vec::new();
        for (c, (lists, ok)) in listers.into_iter().zip(results) {
            self.listed.extend(lists);
            if ok {
                keep.push(c);
            } else {
                // Refused (a session limit) or broken: no new ones.
                self.listers_failed = true;
            }
        }
        self.listers = keep;
    }

    /// What the destination directory holds, by name (links not followed).
    async fn list_destination(&mut self, loc: &Location) -> Result<HashMap<String, FileFacts>, ClientError> {
        let list = match loc {
            Location::Local(p) => {
                let mut out = Vec::new();
                for entry in std::fs::read_dir(p).map_err(local_err(p))? {
                    let entry = entry.map_err(local_err(p))?;
                    let md = entry.metadata().map_err(local_err(p))?;
                    out.push(ferry_io::root::local_facts(ferry_io::root::local_name(&entry.file_name()), md));
                }
                out
            }
            Location::Remote(_) => self.read_dir(loc).await?,
        };
        Ok(list.into_iter().map(|f| (f.name.clone(), f)).collect())
    }

    /// Copies the directory `src` into `dst` (created if needed); `rel` is
    /// its path below the top of the copy, `ancestors` the identities of
    /// the directories above it.
    pub(super) async fn copy_tree(
        &mut self,
        src: &Location,
        dst: &Location,
        rel: &str,
        ancestors: &mut Vec<(u64, u64)>,
        summary: &mut CopySummary,
    ) -> Result<(), ClientError> {
        let shown = |l: &Location| l.to_string();
        let entries = match self.list_source(src).await {
            Ok(e) => e,
            Err(e) => return self.failed(summary, shown(src), e),
        };
        let existed = if self.opts.dry_run {
            match dst {
                Location::Local(p) => p.is_dir(),
                Location::Remote(_) => self.facts(dst).await.ok().flatten().is_some_and(|f| f.kind == FileKind::Dir),
            }
        } else {
            match self.make_dir_exist(dst).await {
                Ok(existed) => existed,
                Err(e) => return self.failed(summary, shown(dst), e),
            }
        };
        if !existed && self.opts.dry_run {
            summary.plan.push(PlanLine { action: "mkdir", path: shown(dst), bytes: 0 });
        }
        summary.dirs += 1;
        let at_dst = if existed {
            match self.list_destination(dst).await {
                Ok(m) => m,
                Err(e) => return self.failed(summary, shown(dst), e),
            }
        } else {
            HashMap::new()
        };

        let mut fresh: Vec<(Location, Location, FileFacts)> = Vec::new();
        let records =
            RecordIndex::list(entries.iter().filter(|e| e.facts.kind == FileKind::File).count(), &mut self.records);
        let mut resume: Vec<(Location, Location, FileFacts)> = Vec::new();
        let mut dirs = Vec::new();
        for e in entries {
            let name = e.facts.name.clone();
            let child_rel = join_rel(rel, &name);
            let (s, d) = (src.child(&name), dst.child(&name));
            if let Err(e) = line_safe(&s, &d, &name) {
                self.failed(summary, shown(&s), e)?;
                continue;
            }
            if let Some(target) = &e.link {
                self.copy_link(&s, &d, target, at_dst.get(&name), summary)?;
                continue;
            }
            match e.facts.kind {
                FileKind::Dir => {
                    if self.opts.filter.as_ref().is_some_and(|f| !f.wants_dir(&child_rel)) {
                        summary.excluded += 1;
                        continue;
                    }
                    if e.facts.unique != (0, 0) && ancestors.contains(&e.facts.unique) {
                        Self::passed_over(
                            summary,
                            shown(&s),
                            "a directory loop (a link back to a directory above it); not entered",
                        );
                        continue;
                    }
                    if ancestors.len() >= MAX_DEPTH {
                        Self::passed_over(summary, shown(&s), "deeper than 256 levels; taken for a loop");
                        continue;
                    }
                    dirs.push((s, d, child_rel, e.facts.unique));
                }
                FileKind::File => {
                    if self.opts.filter.as_ref().is_some_and(|f| !f.wants_file(&child_rel)) {
                        summary.excluded += 1;
                        continue;
                    }
                    let dst_facts = at_dst.get(&name);
                    if dst_facts.is_some_and(|f| f.kind != FileKind::File) {
                        self.dests_in_the_way = true;
                    }
                    if up_to_date(self.opts.sync, &e.facts, dst_facts) && self.same_checksum_if_asked(&s, &d).await {
                        // A record left by a copy that finished but was
                        // stopped before it could forget it.
                        if !self.opts.dry_run {
                            records.load(&s.to_string(), &d.to_string(), e.facts.size, e.facts.modified).clear();
                        }
                        summary.skipped += 1;
                        summary.skipped_bytes += e.facts.size;
                        if self.opts.dry_run {
                            summary.plan.push(PlanLine { action: "skip", path: shown(&s), bytes: e.facts.size });
                        }
                        continue;
                    }
                    let mut record = records.load(&s.to_string(), &d.to_string(), e.facts.size, e.facts.modified);
                    // An interrupted upload may have left no ranges yet,
                    // but a partial on the server: it resumes one by one.
                    if self.opts.resume && (!record.is_empty() || record.interrupted()) {
                        resume.push((s, d, e.facts));
                    } else {
                        // A fresh copy: any old record (`--no-resume`, or
                        // of another version) describes nothing now; the
                        // batch then needs no lookup of its own.
                        if record.on_disk() && !self.opts.dry_run {
                            record.clear();
                        }
                        fresh.push((s, d, e.facts));
                    }
                }
                FileKind::Symlink => {
                    // A server lists links that lead outside its root as links.
                    Self::passed_over(summary, shown(&s), "a link that leads outside the server's root")
                }
                FileKind::Other => Self::passed_over(summary, shown(&s), "not a regular file, directory or link"),
            }
        }

        if self.opts.dry_run {
            for (s, _, f) in &fresh {
                summary.plan.push(PlanLine { action: "copy", path: shown(s), bytes: f.size });
            }
            for (s, _, f) in &resume {
                summary.plan.push(PlanLine { action: "resume", path: shown(s), bytes: f.size });
            }
        } else if let Some(pending) = self.deferred.as_mut() {
            // Several sessions copy them after the walk.
            pending.extend(resume.into_iter().map(|(s, d, f)| (s, d, f, true)));
            pending.extend(fresh.into_iter().map(|(s, d, f)| (s, d, f, false)));
        } else {
            // Interrupted files first: they are the closest to done, and a
            // copy interrupted again soon still makes progress on them.
            for (s, d, f) in &resume {
                if let Err(e) = self.copy_file(s, d, f, summary).await {
                    self.failed(summary, shown(s), e)?;
                }
            }
            let batched = self.copy_batch(&fresh, summary, true).await?;
            for (s, d, f) in &fresh[batched..] {
                if let Err(e) = self.copy_file(s, d, f, summary).await {
                    self.failed(summary, shown(s), e)?;
                }
            }
        }
        let children: Vec<Location> = dirs.iter().map(|(s, ..)| s.clone()).collect();
        self.prefetch_listings(&children).await;
        for (s, d, child_rel, unique) in dirs {
            let pushed = unique != (0, 0);
            if pushed {
                ancestors.push(unique);
            }
            let r = Box::pin(self.copy_tree(&s, &d, &child_rel, ancestors, summary)).await;
            if pushed {
                ancestors.pop();
            }
            r?;
        }
        Ok(())
    }

    /// With `--verify`, an up-to-date file is skipped only if the
    /// checksums agree too.
    async fn same_checksum_if_asked(&mut self, src: &Location, dst: &Location) -> bool {
        if self.opts.verify.is_none() && self.opts.sync != SyncRule::Checksum {
            return true;
        }
        match self.verify(src, dst).await {
            Ok(_) => true,
            Err(e) => {
                tracing::info!(path = %src, error = %e, "the destination differs; copying again");
                false
            }
        }
    }

    /// A symbolic link (not followed): recreated where the destination is
    /// local, passed over where it is a server.
    fn copy_link(
        &mut self,
        src: &Location,
        dst: &Location,
        target: &Path,
        existing: Option<&FileFacts>,
        summary: &mut CopySummary,
    ) -> Result<(), ClientError> {
        let Location::Local(d) = dst else {
            Self::passed_over(
                summary,
                src.to_string(),
                "a symbolic link: a server cannot hold one (-L copies what it points to)",
            );
            return Ok(());
        };
        if self.opts.dry_run {
            summary.plan.push(PlanLine { action: "link", path: src.to_string(), bytes: 0 });
            return Ok(());
        }
        if existing.is_some() {
            if std::fs::read_link(d).is_ok_and(|t| t == target) {
                summary.skipped += 1;
                return Ok(());
            }
            if existing.is_some_and(|f| f.kind == FileKind::Dir) {
                let e = ClientError::local(d.display(), std::io::ErrorKind::IsADirectory.into());
                return self.failed(summary, src.to_string(), e);
            }
            if let Err(e) = std::fs::remove_file(d) {
                return self.failed(summary, src.to_string(), ClientError::local(d.display(), e));
            }
        }
        match std::os::unix::fs::symlink(target, d) {
            Ok(()) => {
                summary.links += 1;
                Ok(())
            }
            Err(e) => self.failed(summary, src.to_string(), ClientError::local(d.display(), e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restart_records_are_listed_once_per_copy() {
        let state = tempfile::tempdir().unwrap();
        std::fs::write(state.path().join("a.json"), "{}").unwrap();
        let dir = || Some(state.path().to_path_buf());
        let mut cache = None;
        // A directory of few files opens its records one by one.
        assert!(RecordIndex::list_in(LIST_RECORDS_FROM - 1, &mut cache, dir).0.is_none());
        assert!(cache.is_none());
        let first = RecordIndex::list_in(LIST_RECORDS_FROM, &mut cache, dir).0.expect("listed");
        assert!(first.contains("a.json"));
        // The next directory of the same copy reads no listing: a record
        // written since is not in it.
        std::fs::write(state.path().join("b.json"), "{}").unwrap();
        let second = RecordIndex::list_in(500, &mut cache, dir).0.expect("from the cache");
        assert!(Arc::ptr_eq(&first, &second) && !second.contains("b.json"));
        // A missing state directory holds no records.
        let mut fresh = None;
        let gone = || Some(state.path().join("missing"));
        assert!(RecordIndex::list_in(LIST_RECORDS_FROM, &mut fresh, gone).0.expect("listed").is_empty());
    }
}
