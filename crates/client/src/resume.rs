//! What an interrupted copy already moved, kept on disk so a later
//! `ferry cp` of the same source and destination sends only the rest.
//!
//! Globus restarts only third-party copies, and only within the process
//! that started them. Ferry records the restart ranges of every MODE E copy
//! — the receiver's `111` markers for uploads and third-party copies, its
//! own received ranges for downloads — in a small JSON file, written as
//! they arrive, so a copy killed with SIGKILL resumes in any direction.
//!
//! A record names the source's size and modification time; if either
//! changed, the record is ignored and the copy starts over.

use ferry_proto::RangeSet;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Somewhere other than the state directory to keep restart ranges: the
/// transfer service stores them with the file's row in its database, so a
/// node that takes a transfer over resumes it. Copies are keyed by their
/// source and destination as displayed (without passwords).
pub trait RestartStore: Send + Sync + std::fmt::Debug {
    /// Ranges the destination already holds, or none when nothing is known
    /// or the source changed (`size`, `modified`) since they were recorded.
    fn load(&self, source: &str, destination: &str, size: u64, modified: i64) -> RangeSet;
    /// Everything received so far: called as restart markers arrive (at
    /// most four times a second) and at the end of each attempt.
    fn save(&self, source: &str, destination: &str, ranges: &RangeSet);
    /// The copy completed, or its ranges proved wrong.
    fn clear(&self, source: &str, destination: &str);
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    source: String,
    destination: String,
    size: u64,
    modified: i64,
    ranges: String,
}

/// The restart state of one file copy.
#[derive(Debug)]
pub struct ResumeState {
    path: Option<PathBuf>,
    record: Record,
    done: RangeSet,
    last_saved: Option<Instant>,
    /// Where the ranges live instead of `path`, when given.
    store: Option<Arc<dyn RestartStore>>,
    /// A record of this copy (same source version) existed: an earlier run
    /// was interrupted, even if before it learnt of any range.
    interrupted: bool,
    /// Whether a record file may be at `path` (one was found, or this
    /// state wrote it): `clear` unlinks only then, so the thousands of
    /// small files a tree copy never writes a record for cost no failing
    /// `unlink` each (bench/results/small-files-s6, docs/partial-files.md).
    on_disk: bool,
}

/// Where restart records live: `$XDG_STATE_HOME/ferry/restart`, else
/// `~/.local/state/ferry/restart`; `FERRY_STATE_DIR` overrides both.
pub fn state_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("FERRY_STATE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/state")))?;
    Some(base.join("ferry/restart"))
}

fn key(source: &str, destination: &str) -> String {
    let h = xxhash_rust::xxh3::xxh3_128(format!("{source}\n{destination}").as_bytes());
    format!("{h:032x}.json")
}

/// The name of this copy's record file in [`state_dir`] (a tree walk lists
/// the directory once and opens only the records that are there).
pub(crate) fn record_name(source: &str, destination: &str) -> String {
    key(source, destination)
}

impl ResumeState {
    /// Whether a record for this copy exists (whatever it says).
    pub fn exists(source: &str, destination: &str) -> bool {
        state_dir().is_some_and(|d| {
            let p = d.join(key(source, destination));
            removals::wait_for(&p);
            p.exists()
        })
    }

    /// Loads the record for this copy, or starts an empty one. `source` and
    /// `destination` must not contain passwords.
    pub fn load(source: &str, destination: &str, size: u64, modified: i64) -> Self {
        Self::load_from(None, source, destination, size, modified)
    }

    /// Like [`ResumeState::load`], from `store` when one is given.
    pub fn load_from(
        store: Option<&Arc<dyn RestartStore>>,
        source: &str,
        destination: &str,
        size: u64,
        modified: i64,
    ) -> Self {
        if let Some(store) = store {
            let done = store.load(source, destination, size, modified);
            return Self {
                path: None,
                store: Some(store.clone()),
                interrupted: !done.is_empty(),
                done,
                ..Self::absent(source, destination, size, modified)
            };
        }
        let mut state = Self::absent(source, destination, size, modified);
        let Some(p) = &state.path else { return state };
        removals::wait_for(p);
        let text = match std::fs::read_to_string(p) {
            Ok(text) => text,
            Err(e) => {
                // Unreadable but there: `clear` still tries to remove it.
                state.on_disk = e.kind() != std::io::ErrorKind::NotFound;
                return state;
            }
        };
        state.on_disk = true;
        match serde_json::from_str::<Record>(&text) {
            Ok(r)
                if r.source == state.record.source
                    && r.destination == state.record.destination
                    && r.size == size
                    && r.modified == modified =>
            {
                state.done = RangeSet::parse(&r.ranges).unwrap_or_default();
                state.record = r;
                state.interrupted = true;
            }
            _ => {}
        }
        state
    }

    /// The state of a copy whose record the caller knows is not on disk
    /// (the tree walk looked it up and removed any it found): no second
    /// lookup. It is written as a loaded one is, when ranges arrive.
    pub fn absent(source: &str, destination: &str, size: u64, modified: i64) -> Self {
        Self {
            path: state_dir().map(|d| d.join(key(source, destination))),
            record: Record {
                source: source.to_string(),
                destination: destination.to_string(),
                size,
                modified,
                ranges: String::new(),
            },
            done: RangeSet::new(),
            last_saved: None,
            store: None,
            interrupted: false,
            on_disk: false,
        }
    }

    /// Whether a record file of this copy may exist (found or written).
    pub fn on_disk(&self) -> bool {
        self.on_disk
    }

    /// Ranges the destination already has.
    pub fn done(&self) -> &RangeSet {
        &self.done
    }

    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }

    /// Whether an earlier run of this copy was interrupted (its record
    /// was there, with or without ranges).
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// Writes the record before the copy starts, so a run killed before
    /// it learns of any range still leaves word that it was interrupted
    /// (and the next run asks the server what it holds).
    pub fn begin(&mut self) {
        if !self.interrupted {
            self.save();
        }
    }

    /// Replaces the ranges with what the destination itself reported
    /// (and the client verified): it knows better than the markers.
    pub fn replace(&mut self, ranges: RangeSet) {
        self.done = ranges;
        self.save();
    }

    /// Adds ranges (from a `111` marker or received locally) and saves at
    /// most four times a second, so a kill loses little.
    pub fn add(&mut self, ranges: &RangeSet) {
        self.done.union(ranges);
        if self.last_saved.is_none_or(|t| t.elapsed() >= Duration::from_millis(250)) {
            self.save();
        }
    }

    pub fn save(&mut self) {
        self.last_saved = Some(Instant::now());
        if let Some(store) = &self.store {
            store.save(&self.record.source, &self.record.destination, &self.done);
            return;
        }
        let Some(p) = &self.path else { return };
        // A removal of this record still queued would remove what this
        // writes.
        removals::wait_for(p);
        self.record.ranges = self.done.to_string();
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        self.on_disk = true;
        let tmp = p.with_extension("tmp");
        if let Ok(text) = serde_json::to_string(&self.record) {
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, p);
            }
        }
    }

    /// Forgets everything: the copy completed, or its ranges proved wrong.
    pub fn clear(&mut self) {
        self.done = RangeSet::new();
        if let Some(store) = &self.store {
            store.clear(&self.record.source, &self.record.destination);
        }
        self.interrupted = false;
        if let Some(p) = self.path.as_ref().filter(|_| self.on_disk) {
            removals::remove_later(p.clone());
        }
        self.on_disk = false;
    }
}

/// Waits until every record [`ResumeState::clear`] handed to the removal
/// thread is gone (the end of a copy).
pub fn wait_for_removals() {
    removals::wait_all();
}

/// The unlinks of cleared records, made by a thread of their own. A tree
/// copy clears a record per completed file from the task that reads its
/// session's replies, and an unlink can block for tens of milliseconds:
/// the record's block is freed, which on a file system mounted with
/// `discard` waits for the device to discard it (20-30 ms each under a
/// tree upload's writes here; docs/trees.md, "Session 27"). Meanwhile that
/// task read no reply and sent no next line. A save or load of a record
/// whose removal is still queued waits for it, so a removal never undoes
/// a later save.
mod removals {
    use std::collections::HashSet;
    use std::path::{Path, PathBuf};
    use std::sync::{mpsc, Condvar, Mutex, OnceLock};

    struct Removals {
        /// Paths queued and not yet removed.
        pending: Mutex<HashSet<PathBuf>>,
        removed: Condvar,
        /// The removal thread's queue; `None` if the thread could not be
        /// started (removals are then made in place).
        queue: Mutex<Option<mpsc::Sender<PathBuf>>>,
    }

    fn removals() -> &'static Removals {
        static R: OnceLock<Removals> = OnceLock::new();
        R.get_or_init(|| {
            let (tx, rx) = mpsc::channel::<PathBuf>();
            let started = std::thread::Builder::new()
                .name("ferry-records".into())
                .spawn(move || {
                    for p in rx {
                        let _ = std::fs::remove_file(&p);
                        let r = removals();
                        r.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&p);
                        r.removed.notify_all();
                    }
                })
                .is_ok();
            Removals { pending: Mutex::default(), removed: Condvar::new(), queue: Mutex::new(started.then_some(tx)) }
        })
    }

    pub(super) fn remove_later(p: PathBuf) {
        let r = removals();
        let mut pending = r.pending.lock().unwrap_or_else(|e| e.into_inner());
        let queued =
            r.queue.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|q| q.send(p.clone()).is_ok());
        if queued {
            pending.insert(p);
        } else {
            drop(pending);
            let _ = std::fs::remove_file(&p);
        }
    }

    /// Waits while `p` is queued for removal.
    pub(super) fn wait_for(p: &Path) {
        let r = removals();
        let mut pending = r.pending.lock().unwrap_or_else(|e| e.into_inner());
        while pending.contains(p) {
            pending = r.removed.wait(pending).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub(super) fn wait_all() {
        let r = removals();
        let mut pending = r.pending.lock().unwrap_or_else(|e| e.into_inner());
        while !pending.is_empty() {
            pending = r.removed.wait(pending).unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what the copy tells it, as the transfer service's store does.
    #[derive(Debug, Default)]
    struct Memory(std::sync::Mutex<Vec<String>>);

    impl RestartStore for Memory {
        fn load(&self, source: &str, destination: &str, size: u64, _modified: i64) -> RangeSet {
            self.0.lock().unwrap().push(format!("load {source} {destination} {size}"));
            RangeSet::parse("0-10").unwrap()
        }
        fn save(&self, _: &str, _: &str, ranges: &RangeSet) {
            self.0.lock().unwrap().push(format!("save {ranges}"));
        }
        fn clear(&self, _: &str, _: &str) {
            self.0.lock().unwrap().push("clear".into());
        }
    }

    #[test]
    fn a_restart_store_replaces_the_state_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("FERRY_STATE_DIR", dir.path());
        let mem = Arc::new(Memory::default());
        let store: Arc<dyn RestartStore> = mem.clone();
        let mut s = ResumeState::load_from(Some(&store), "ftp://h/a", "ftp://d/a", 100, 7);
        assert_eq!(s.done().to_string(), "0-10", "ranges come from the store");
        s.add(&RangeSet::parse("10-20").unwrap());
        s.clear();
        assert_eq!(*mem.0.lock().unwrap(), ["load ftp://h/a ftp://d/a 100", "save 0-20", "clear"]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing written to the state directory");
    }

    #[test]
    fn survives_a_restart_and_notices_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("FERRY_STATE_DIR", dir.path());
        let mut s = ResumeState::load("ftp://h/a", "/tmp/a", 100, 7);
        assert!(s.is_empty() && !s.on_disk(), "no record: clear would unlink nothing");
        s.add(&RangeSet::parse("0-10,20-30").unwrap());
        s.save();
        let s = ResumeState::load("ftp://h/a", "/tmp/a", 100, 7);
        assert_eq!(s.done().to_string(), "0-10,20-30");
        assert!(ResumeState::load("ftp://h/a", "/tmp/a", 101, 7).is_empty(), "source changed size");
        assert!(ResumeState::load("ftp://h/a", "/tmp/b", 100, 7).is_empty(), "other destination");
        let mut s = ResumeState::load("ftp://h/a", "/tmp/a", 100, 7);
        assert!(s.on_disk());
        s.clear();
        assert!(!s.on_disk());
        assert!(ResumeState::load("ftp://h/a", "/tmp/a", 100, 7).is_empty());
        // A state known to be absent writes its record when saved, and
        // its clear removes it.
        let mut s = ResumeState::absent("ftp://h/a", "/tmp/a", 100, 7);
        s.add(&RangeSet::parse("0-5").unwrap());
        s.save();
        assert!(s.on_disk());
        assert_eq!(ResumeState::load("ftp://h/a", "/tmp/a", 100, 7).done().to_string(), "0-5");
        s.clear();
        // The unlink is the removal thread's; the copy waits for it.
        wait_for_removals();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // A record saved again right after a clear (its removal perhaps
        // still queued) stays: the save waits for the removal.
        for _ in 0..50 {
            let mut s = ResumeState::absent("ftp://h/a", "/tmp/a", 100, 7);
            s.add(&RangeSet::parse("0-5").unwrap());
            s.save();
            s.clear();
            let mut t = ResumeState::absent("ftp://h/a", "/tmp/a", 100, 7);
            t.add(&RangeSet::parse("0-7").unwrap());
            t.save();
            wait_for_removals();
            assert_eq!(ResumeState::load("ftp://h/a", "/tmp/a", 100, 7).done().to_string(), "0-7");
            t.clear();
        }
        wait_for_removals();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
