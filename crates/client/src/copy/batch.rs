//! A directory's fresh files as one pipelined MODE E batch: up to
//! `--pipeline` transfer commands in flight on the cached data channels,
//! so thousands of small files do not pay a round trip each.

use super::opener::Opened;
use super::{CopySummary, FileMeta};
use crate::error::ClientError;
use crate::location::Location;
use crate::resume::ResumeState;
use crate::session::{third_party_many, BatchFile, Marker};
use crate::Client;
use ferry_io::mode_e::{BlockSource, ReceiveState, TransferControl};
use ferry_proto::facts::FileFacts;
use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Files of one batch held open at once. A batch opens every file it
/// names before the first command goes out (the receive states and restart
/// records are indexed by position), so a directory of 20,000 files in one
/// batch ran out of descriptors (`EMFILE` at file 9,994 with a limit of
/// 20,000: a download holds the partial file and its block sink). Chunks of
/// this many keep far below any usual limit and still cover many round
/// trips of pipelining; it is also the most files a `BRET`/`BSTO` line names.
pub(super) const BATCH_OPEN_FILES: usize = 512;

impl Client {
    /// Copies fresh files of one directory as pipelined MODE E batches of
    /// at most [`BATCH_OPEN_FILES`] files and returns how many completed;
    /// it stops at the first batch that did not complete.
    ///
    /// `walked`: the tree walk just looked up these files' restart records
    /// and removed any, so none is looked up again; otherwise (files after
    /// one that stopped an earlier batch, which may have left records of
    /// them) each is loaded and a record found is removed.
    pub(super) async fn copy_batch(
        &mut self,
        files: &[(Location, Location, FileFacts)],
        summary: &mut CopySummary,
        walked: bool,
    ) -> Result<usize, ClientError> {
        let mut done = 0;
        for chunk in files.chunks(BATCH_OPEN_FILES) {
            let n = self.copy_batch_chunk(chunk, summary, walked).await?;
            done += n;
            if n < chunk.len() {
                break;
            }
        }
        Ok(done)
    }

    /// Copies fresh files of one directory as a pipelined MODE E batch
    /// (up to `pipeline` transfer commands in flight) and returns how many
    /// completed; the caller copies the rest one by one, with retries and
    /// resume. Every file's arrived ranges go into its restart record as
    /// they arrive, and each file is committed (and its record dropped)
    /// as soon as it is complete.
    async fn copy_batch_chunk(
        &mut self,
        files: &[(Location, Location, FileFacts)],
        summary: &mut CopySummary,
        walked: bool,
    ) -> Result<usize, ClientError> {
        if self.opts.pipeline <= 1 || files.len() < 2 {
            return Ok(0);
        }
        let use_e = match (&files[0].0, &files[0].1) {
            (Location::Remote(su), Location::Local(_)) => self.use_mode_e(su).await,
            (Location::Local(_), Location::Remote(du)) => self.use_mode_e(du).await,
            (Location::Remote(su), Location::Remote(du)) => match self.use_mode_e(su).await {
                Ok(true) => self.use_mode_e(du).await,
                other => other,
            },
            (Location::Local(_), Location::Local(_)) => Ok(false),
        };
        match use_e {
            Ok(true) => {}
            Ok(false) => return Ok(0),
            // The files will fail one by one, each with its own message.
            Err(_) => return Ok(0),
        }
        for (s, _, f) in files {
            self.stats.begin(&s.to_string(), Some(f.size));
        }
        // Fresh files: any old record (`--no-resume`, another version, an
        // earlier batch of this run) describes nothing now. After the tree
        // walk (`walked`), which looked them up and removed any, none is
        // on disk and none is looked up again.
        let records: Mutex<Vec<ResumeState>> = Mutex::new(
            files
                .iter()
                .map(|(s, d, f)| {
                    let (s, d) = (s.to_string(), d.to_string());
                    if walked {
                        return ResumeState::absent(&s, &d, f.size, f.modified);
                    }
                    let mut r = ResumeState::load(&s, &d, f.size, f.modified);
                    if r.on_disk() {
                        r.clear();
                    }
                    r
                })
                .collect(),
        );
        let record = |i: usize, f: &mut dyn FnMut(&mut ResumeState)| {
            if let Some(r) = records.lock().unwrap_or_else(|e| e.into_inner()).get_mut(i) {
                f(r);
            }
        };
        let (progress, rate) = (self.stats.bytes.clone(), self.rate.clone());
        let staging = self.opts.staging.map(|b| ferry_io::staging::StagingConfig::new(b, self.opts.block_size));
        let path = self.opts.data_path;
        let control =
            move || TransferControl { staging, path, ..TransferControl::shared(progress.clone(), rate.clone()) };
        let window = self.opts.pipeline;
        // Counted as each file completes, so an interrupted batch reports
        // what it finished.
        let counted = |summary: &mut CopySummary, i: usize| {
            summary.files += 1;
            summary.bytes += files[i].2.size;
        };
        // Uploads' facts sent in their BSTO entries (empty: none).
        let mut facts: Vec<Option<ferry_proto::batch::EntryFacts>> = Vec::new();
        let (done, result) = match (&files[0].0, &files[0].1) {
            (Location::Remote(su), Location::Local(_)) => {
                // The partial files are created on a blocking thread while
                // the batch's commands are already out (`opener`): created
                // first, a chunk's 512 creates held its `BRET` back by up to
                // seconds (one directory's lock for every session, and
                // ext4's search of recently deleted inodes).
                let wanted: Vec<(std::path::PathBuf, FileFacts)> = files
                    .iter()
                    .map_while(|(s, d, f)| match (s, d) {
                        (Location::Remote(_), Location::Local(p)) => Some((p.clone(), f.clone())),
                        _ => None,
                    })
                    .collect();
                // From the walk, the destination names are known to be free
                // or regular files unless it saw otherwise (`dests_in_the_way`).
                let opened = Opened::start(wanted, walked && !self.dests_in_the_way);
                let items: Vec<BatchFile<Arc<dyn ferry_io::mode_e::BlockSink>>> = files
                    .iter()
                    .enumerate()
                    .map_while(|(i, (s, d, f))| match (s, d) {
                        (Location::Remote(u), Location::Local(_)) => {
                            Some(BatchFile { path: u.path.clone(), size: f.size, data: opened.sink(i) })
                        }
                        _ => None,
                    })
                    .collect();
                let states: Vec<Arc<ReceiveState>> = items.iter().map(|_| Arc::default()).collect();
                // Each complete file's commit (length, mode, time, rename to
                // its name) runs on a blocking thread, in order: inline it
                // ran on the async task that drives every session of a
                // concurrent copy, five syscalls per file between two
                // sessions' replies. The file is counted (and its record
                // dropped) once it is under its name. A file that was never
                // opened (`Err(why)` from the opener) is not counted: the
                // batch ends before it.
                let (commits, finished) = std::sync::mpsc::channel::<(usize, u64)>();
                let committing = opened.clone();
                let committer = tokio::task::spawn_blocking(move || {
                    finished
                        .into_iter()
                        .map(|(i, size)| (i, committing.take(i).map(|sink| sink.finish(size))))
                        .collect::<Vec<_>>()
                });
                let session = self.session(su).await?;
                let r = {
                    let mut on_done = |i: usize| {
                        let _ = commits.send((i, files[i].2.size));
                    };
                    let batch = session.retrieve_batch(&items, window, control, &states, &mut on_done);
                    tokio::pin!(batch);
                    let r = loop {
                        tokio::select! {
                            r = &mut batch => break r,
                            _ = tokio::time::sleep(Duration::from_millis(250)) => {
                                for (i, st) in states.iter().enumerate() {
                                    let got = st.received.lock().unwrap_or_else(|e| e.into_inner()).clone();
                                    if !got.is_empty() && got.covered() < files[i].2.size {
                                        record(i, &mut |r| r.add(&got));
                                    }
                                }
                            }
                        }
                    };
                    r
                };
                drop(commits);
                let committed = committer.await.map_err(|e| ClientError::Data(e.to_string()))?;
                let mut commit_error = None;
                let mut unopened = None;
                for (i, result) in committed {
                    match result {
                        Ok(Ok(())) => {
                            record(i, &mut |r| r.clear());
                            counted(&mut *summary, i);
                        }
                        Ok(Err(e)) => {
                            commit_error.get_or_insert(e);
                        }
                        // An empty file needs no block, so it "arrives"
                        // without its file: the batch ends before it.
                        Err(_) => {
                            unopened.get_or_insert(i);
                        }
                    }
                }
                let r = match unopened {
                    Some(k) if k < r.0 => (k, r.1),
                    _ => r,
                };
                // What arrived of the file that stopped the batch.
                for (i, st) in states.iter().enumerate().skip(r.0) {
                    let got = st.received.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    if !got.is_empty() {
                        record(i, &mut |rec| {
                            rec.add(&got);
                            rec.save();
                        });
                    }
                }
                if let Some(e) = commit_error {
                    return Err(e);
                }
                r
            }
            (Location::Local(_), Location::Remote(du)) => {
                let mut items = Vec::new();
                for (s, d, f) in files {
                    let (Location::Local(p), Location::Remote(u)) = (s, d) else { break };
                    // A source gone since the listing ends the batch before
                    // it: that file fails on its own, with its own message.
                    let Ok(file) = File::open(p) else { break };
                    let file: Arc<dyn BlockSource> = Arc::new(file);
                    items.push(BatchFile { path: u.path.clone(), size: f.size, data: file });
                }
                let mut on_marker = |i: usize, m: Marker| {
                    if let Marker::Restart(ranges) = m {
                        record(i, &mut |r| r.add(&ranges));
                    }
                };
                // Complete under its name at its 226: nothing left to
                // resume (a re-run finds it whole, or sends it again);
                // counted only when its batch is durable.
                let mut on_stored = |i: usize| record(i, &mut |r| r.clear());
                let mut on_done = |i: usize| counted(&mut *summary, i);
                let session = self.session(du).await?;
                // Each file's time and mode in its BSTO entry where the
                // server takes them (docs/batch.md): no MFMT and SITE
                // CHMOD after the batch for those files.
                if session.supports_batch_facts() {
                    facts = files[..items.len()]
                        .iter()
                        .map(|(_, _, f)| {
                            let m = FileMeta::of(f);
                            Some(ferry_proto::batch::EntryFacts {
                                mtime: ferry_proto::facts::format_time_val(m.modified?),
                                mode: m.mode?,
                            })
                        })
                        .collect();
                }
                session.store_batch(&items, &facts, window, control, &mut on_marker, &mut on_stored, &mut on_done).await
            }
            (Location::Remote(su), Location::Remote(du)) => {
                let items: Vec<(String, String, u64)> = files
                    .iter()
                    .filter_map(|(s, d, f)| match (s, d) {
                        (Location::Remote(a), Location::Remote(b)) => Some((a.path.clone(), b.path.clone(), f.size)),
                        _ => None,
                    })
                    .collect();
                let (mut s, mut d) = self.take_pair(su, du).await?;
                let progress = self.stats.bytes.clone();
                let base = progress.load(Ordering::Relaxed);
                // Third-party data never passes here: the destination's 112
                // markers are the only measure of progress.
                let mut on_perf = |moved: u64| progress.store(base + moved, Ordering::Relaxed);
                let mut on_restart = |i: usize, ranges: ferry_proto::RangeSet| record(i, &mut |r| r.add(&ranges));
                let mut on_done = |i: usize| {
                    record(i, &mut |r| r.clear());
                    counted(&mut *summary, i);
                };
                let r =
                    third_party_many(&mut s, &mut d, &items, window, &mut on_perf, &mut on_restart, &mut on_done).await;
                self.put_pair(su, du, s, d);
                r
            }
            (Location::Local(_), Location::Local(_)) => return Ok(0),
        };
        for r in records.lock().unwrap_or_else(|e| e.into_inner()).iter_mut() {
            if !r.is_empty() {
                r.save();
            }
        }
        if let Err(e) = &result {
            tracing::warn!(error = %e, completed = done, "pipelined batch stopped; copying the rest one by one");
            let broken: Vec<String> =
                self.sessions.iter().filter(|(_, s)| s.is_broken()).map(|(k, _)| k.clone()).collect();
            for k in broken {
                self.sessions.remove(&k);
            }
        }
        // `--verify`: the checksums of the whole batch, pipelined.
        let verdicts = if self.opts.verify.is_some() {
            let pairs: Vec<(Location, Location)> =
                files.iter().take(done).map(|(s, d, _)| (s.clone(), d.clone())).collect();
            Some(self.verify_many(&pairs).await)
        } else {
            None
        };
        let mut verdicts = verdicts.map(Vec::into_iter);
        let mut meta = Vec::new();
        for (i, (s, d, f)) in files.iter().take(done).enumerate() {
            self.stats.files_done.fetch_add(1, Ordering::Relaxed);
            // Set by the server from the entry's facts, before the rename.
            let kept = facts.get(i).is_some_and(Option::is_some);
            if let (Location::Remote(u), false) = (d, kept) {
                meta.push((u.path.clone(), f.clone()));
            }
            match verdicts.as_mut().and_then(Iterator::next) {
                None => {}
                Some(Ok(alg)) => {
                    summary.verified += 1;
                    summary.checksum_algorithm = Some(alg);
                }
                Some(Err(e)) => {
                    summary.files -= 1;
                    summary.bytes -= f.size;
                    self.failed(summary, s.to_string(), e)?;
                }
            }
        }
        if let (Some((_, Location::Remote(u), _)), false) = (files.first(), meta.is_empty()) {
            self.set_remote_meta(u, &meta).await;
        }
        Ok(done)
    }
}
