//! The destination files of a download batch, opened on a blocking thread
//! while the batch's `BRET` lines are already on their way.
//!
//! Why: a batch used to create all of its partial files (up to 512) before
//! its first command went out. Every create in one directory takes the
//! directory's lock, so the eight sessions of a concurrent copy created
//! their chunks one after the other, and on this machine's ext4 (no
//! journal) a create within ~30 s of many deletes also scans the recently
//! deleted inodes. Traced at 80 ms one way (issue 18, session 6: 5,000 ×
//! 4 KiB, the destination of the previous run just deleted) the client
//! spent 3.3 s of system time creating partial files, and the sessions
//! sent their first `BRET` 3.5 s after their login. Now the command goes
//! first and the files are created during the round trip; a block waits
//! only for its own file.

use super::local::{FileMeta, LocalSink};
use ferry_io::mode_e::BlockSink;
use ferry_proto::facts::FileFacts;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

enum Slot {
    /// Not opened yet.
    Pending,
    /// Open: the sink for the commit (taken by it) and the one blocks go to.
    Open(Option<LocalSink>, Arc<dyn BlockSink>),
    /// Could not be opened (or an earlier file could not, so this one was
    /// not tried): the batch ends before it and the file is copied on its
    /// own, where it fails with its own message.
    Failed(String),
}

/// The files of one batch, opened in order by [`Opened::start`].
pub(super) struct Opened {
    slots: Mutex<Vec<Slot>>,
    ready: Condvar,
}

impl Opened {
    /// Starts opening `files` (destination, facts) in order on a blocking
    /// thread; the first that fails stops the opening, and it and every
    /// later file are [`Slot::Failed`]. `known`: every destination name is
    /// free or a regular file (the tree walk listed its directory), so
    /// none is looked at before its partial file is created.
    pub(super) fn start(files: Vec<(PathBuf, FileFacts)>, known: bool) -> Arc<Self> {
        let opened = Arc::new(Self::new(files.len()));
        let me = opened.clone();
        tokio::task::spawn_blocking(move || me.open_all(files, known));
        opened
    }

    fn new(n: usize) -> Self {
        Self { slots: Mutex::new((0..n).map(|_| Slot::Pending).collect()), ready: Condvar::new() }
    }

    fn open_all(&self, files: Vec<(PathBuf, FileFacts)>, known: bool) {
        let mut failed: Option<String> = None;
        for (i, (path, facts)) in files.into_iter().enumerate() {
            let slot = match &failed {
                Some(why) => Slot::Failed(why.clone()),
                None => match LocalSink::open_as(&path, false, FileMeta::of(&facts), known, Some(facts.size))
                    .and_then(|s| s.block_sink_sized(Some(facts.size)).map(|b| (s, b)))
                {
                    Ok((sink, blocks)) => Slot::Open(Some(sink), blocks),
                    Err(e) => {
                        let why = e.to_string();
                        failed = Some(format!("not opened: an earlier file of the batch could not be ({why})"));
                        Slot::Failed(why)
                    }
                },
            };
            self.set(i, slot);
        }
    }

    fn set(&self, i: usize, slot: Slot) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = slots.get_mut(i) {
            *s = slot;
        }
        drop(slots);
        self.ready.notify_all();
    }

    /// Waits until file `i` is opened (or failed) and runs `f` on its slot.
    fn with<T>(&self, i: usize, f: impl FnOnce(&mut Slot) -> T) -> T {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match slots.get_mut(i) {
                Some(Slot::Pending) => slots = self.ready.wait(slots).unwrap_or_else(|e| e.into_inner()),
                Some(slot) => return f(slot),
                None => return f(&mut Slot::Failed(format!("no file {i} in this batch"))),
            }
        }
    }

    /// Where file `i`'s blocks go (blocks until it is open).
    fn blocks(&self, i: usize) -> io::Result<Arc<dyn BlockSink>> {
        self.with(i, |slot| match slot {
            Slot::Open(_, b) => Ok(b.clone()),
            Slot::Failed(why) => Err(io::Error::other(why.clone())),
            Slot::Pending => unreachable!("waited for"),
        })
    }

    /// Takes file `i`'s sink to commit it (blocks until it is open); `Err`
    /// with the reason when it was never opened.
    pub(super) fn take(&self, i: usize) -> Result<LocalSink, String> {
        self.with(i, |slot| match slot {
            Slot::Open(sink, _) => sink.take().ok_or_else(|| format!("file {i} of the batch committed twice")),
            Slot::Failed(why) => Err(why.clone()),
            Slot::Pending => unreachable!("waited for"),
        })
    }

    /// The sink a batch item writes to: file `i`, once it is open.
    pub(super) fn sink(self: &Arc<Self>, i: usize) -> Arc<dyn BlockSink> {
        Arc::new(LazySink { opened: self.clone(), i })
    }
}

/// A batch item's sink before its file exists: the receiving threads call
/// it from blocking threads, which wait for the opener.
struct LazySink {
    opened: Arc<Opened>,
    i: usize,
}

impl BlockSink for LazySink {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.opened.blocks(self.i)?.write_at(data, offset)
    }

    fn splice_from(&self, sock: BorrowedFd<'_>, offset: u64, len: usize) -> Option<io::Result<usize>> {
        match self.opened.blocks(self.i) {
            Ok(b) => b.splice_from(sock, offset, len),
            Err(e) => Some(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(size: u64) -> FileFacts {
        ferry_proto::client::listing::minimal_facts("", ferry_proto::facts::FileKind::File, size)
    }

    #[test]
    fn a_block_waits_for_its_file_and_lands_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let opened = Arc::new(Opened::new(2));
        let sink = opened.sink(1);
        let writer = std::thread::spawn(move || sink.write_at(b"late", 0));
        let me = opened.clone();
        let files = vec![(dir.path().join("a"), facts(0)), (dir.path().join("b"), facts(4))];
        // Fresh names, as the walk knows them: not looked at first.
        std::thread::spawn(move || me.open_all(files, true)).join().unwrap();
        writer.join().unwrap().unwrap();
        opened.take(0).unwrap().finish(0).unwrap();
        opened.take(1).unwrap().finish(4).unwrap();
        assert_eq!(std::fs::read(dir.path().join("b")).unwrap(), b"late");
        assert!(opened.take(1).is_err(), "a sink is committed once");
    }

    #[test]
    fn a_file_that_cannot_be_opened_fails_it_and_every_later_one() {
        let dir = tempfile::tempdir().unwrap();
        let opened = Arc::new(Opened::new(3));
        let files = vec![
            (dir.path().join("a"), facts(1)),
            (dir.path().join("missing").join("b"), facts(1)),
            (dir.path().join("c"), facts(1)),
        ];
        opened.open_all(files, false);
        assert!(opened.take(0).is_ok());
        assert!(opened.sink(1).write_at(b"x", 0).is_err());
        assert!(opened.take(2).err().is_some_and(|why| why.contains("earlier file")));
        assert!(!dir.path().join(".c.ferry-part").exists(), "nothing after the failure is created");
    }

    #[test]
    fn a_directory_in_the_way_fails_the_file_unless_the_names_are_known() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        let opened = Arc::new(Opened::new(1));
        opened.open_all(vec![(dir.path().join("a"), facts(1))], false);
        assert!(opened.take(0).err().is_some_and(|why| why.contains("directory")), "looked at before the create");
        assert!(!dir.path().join(".a.ferry-part").exists());
        // A regular file in the way is replaced either way.
        std::fs::write(dir.path().join("b"), b"old").unwrap();
        let opened = Arc::new(Opened::new(1));
        opened.open_all(vec![(dir.path().join("b"), facts(3))], true);
        let sink = opened.sink(0);
        sink.write_at(b"new", 0).unwrap();
        opened.take(0).unwrap().finish(3).unwrap();
        assert_eq!(std::fs::read(dir.path().join("b")).unwrap(), b"new");
    }
}
