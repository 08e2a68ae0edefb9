//! Several control sessions for one tree (`--concurrency N`, Globus's
//! `-cc N`): the walk lists the tree and creates the destination
//! directories first, collecting the files to copy; the files are then cut
//! into chunks that N sessions take from a shared queue, each chunk going
//! as one pipelined batch on its session's cached data channels.
//!
//! Why more than one session when commands are already pipelined: one
//! session moves its files one after the other through one data channel
//! set, and a server serves one session's commands in order, so the
//! per-file work at both ends (open, create, rename, set the time) and the
//! TCP slow start of a fresh window are never overlapped. Several sessions
//! overlap them, as `globus-url-copy -cc` does.
//!
//! Good manners: the number of sessions is capped per server
//! (`max_sessions`, and the sessions times their parallel streams by
//! `max_data_connections`), and a session the server refuses with 421 or
//! 425 (too many connections) is retried with back-off and then given up:
//! the copy goes on with the sessions it has. See `docs/trees.md`.

use super::{Client, CopySummary};
use crate::error::ClientError;
use crate::location::Location;
use crate::session::LineShare;
use ferry_proto::facts::FileFacts;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One file the walk found to copy: source, destination, the source's
/// facts, and whether a restart record says part of it arrived.
pub(super) type Pending = (Location, Location, FileFacts, bool);

/// Files of this size or more are "large": parallel streams within the
/// file fill the path, extra sessions add little.
const LARGE_FILE: u64 = 16 << 20;
/// Sessions for small files on a short path (loopback, a LAN).
const SMALL_FILES_NEAR: usize = 4;
/// Sessions for small files on a long path (RTT of 1 ms or more): an
/// upload session waits a round trip for each file's 226 before the next
/// file's data may go (the server commits each file), so only sessions
/// overlap those waits; `globus-url-copy -cc 8` beat `-cc 4` at 1 ms one
/// way both ways (bench/results/small-files-concurrency, quiet machine).
const SMALL_FILES_FAR: usize = 8;
const FAR_RTT: Duration = Duration::from_millis(1);
/// Most files in one pipelined batch: each open file holds a descriptor
/// until it is committed, and a chunk is the unit of work the sessions
/// share. The bound itself lives with the batch (`copy_batch` splits any
/// longer list the same way), so the two cannot drift apart.
const MAX_CHUNK: usize = super::batch::BATCH_OPEN_FILES;
/// Attempts to open a session a server refused as too many (421/425).
const REFUSED_ATTEMPTS: u32 = 4;

/// The number of sessions and why, for the log and `--json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConcurrencyChoice {
    /// Control sessions asked for (or chosen).
    pub sessions: usize,
    /// Sessions that actually copied files (fewer when a server refused).
    pub used: usize,
    pub reason: String,
}

/// Sessions for a tree of files of these sizes over a path with this RTT
/// (`None`: no server involved), capped at `cap`. Uploads of small files
/// get the long path's count on any path: each session waits for every
/// file's 226, which a Ferry server sends only once the file is durable
/// (a sync per file), so that wait is there even on loopback (2,000 ×
/// 4 KiB up on loopback: Ferry 202 files/s with 4 sessions against
/// Globus `-cc 8` 523, debug build, load 17).
pub fn choose_concurrency(sizes: &[u64], rtt: Option<Duration>, cap: usize) -> (usize, String) {
    choose_concurrency_for(sizes, rtt, cap, false)
}

/// [`choose_concurrency`] for a copy that uploads (`upload`) or not.
pub fn choose_concurrency_for(sizes: &[u64], rtt: Option<Duration>, cap: usize, upload: bool) -> (usize, String) {
    let cap = cap.max(1);
    let n = sizes.len();
    if n < 2 {
        return (1, format!("{n} file(s) to copy"));
    }
    let Some(rtt) = rtt else {
        return (1, "no server involved".into());
    };
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    let median = sorted[n / 2];
    let total: u64 = sizes.iter().sum();
    let ms = rtt.as_secs_f64() * 1e3;
    let (want, why) = if median >= LARGE_FILE {
        (2, format!("large files (median {} MiB): parallel streams within each file do most of the work", median >> 20))
    } else if rtt >= FAR_RTT {
        (SMALL_FILES_FAR, format!("small files (median {median} B) on a long path (RTT {ms:.1} ms)"))
    } else if upload {
        (SMALL_FILES_FAR, format!("small files (median {median} B) uploaded: each waits for its 226 (RTT {ms:.2} ms)"))
    } else {
        (SMALL_FILES_NEAR, format!("small files (median {median} B) on a short path (RTT {ms:.2} ms)"))
    };
    // Every session should get a few chunks' worth of files.
    let by_count = n.div_ceil(32).max(1);
    let sessions = want.min(by_count).min(cap);
    let mut reason = format!("{sessions} session(s): {why}, {n} files, {total} bytes");
    if sessions < want {
        if sessions == cap {
            reason.push_str(&format!("; capped at {cap} per server"));
        } else {
            reason.push_str("; too few files for more");
        }
    }
    (sessions, reason)
}

/// Streams per session for a tree of files of these sizes when the user
/// gave none: one when most files are small (`None`: the login's choice
/// for the path stands).
///
/// Why one: in MODE E every file ends with an EOD on every cached stream,
/// so a 4 KiB file over 32 streams costs 32 EOD blocks to send, 32 reader
/// wake-ups to receive, and waits for the slowest stream. Measured at 1 ms
/// one way (issue 18, debug build, 4,000 × 4 KiB, 4 sessions): 32 streams
/// a session 7.8 s, 4 streams 4.0 s, 1 stream 2.1 s. Small files get
/// their concurrency from sessions, as `globus-url-copy -cc` does; a file
/// that is small is over before a second stream would help it.
pub fn choose_streams(sizes: &[u64]) -> Option<(u32, String)> {
    if sizes.len() < 2 {
        return None;
    }
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    (median < LARGE_FILE)
        .then(|| (1, format!("small files (median {median} B): one stream per session, the sessions run side by side")))
}

/// Commands to keep in flight on a path with this RTT for files of this
/// mean size: enough to cover a round trip (RTT divided by the time one
/// file takes, at least `floor`), at most 256.
pub fn pipeline_depth(floor: usize, rtt: Duration, mean_size: u64) -> usize {
    // A session moves a small file in about its size at ~1 Gbit/s, and
    // never faster than the server's per-file work (~100 µs).
    let per_file = (mean_size as f64 / 125e6).max(100e-6);
    let cover = (rtt.as_secs_f64() / per_file).ceil() as usize + 2;
    cover.clamp(floor.max(1), 256.max(floor))
}

/// The chunks the sessions share: resumed files one by one (each with its
/// own resume), fresh files in runs of the same direction.
///
/// A chunk is one pipelined batch, so it should be long enough to fill
/// the pipeline (twice its depth), but never so long that some sessions
/// get none: with the depth of a long path (256 at 80 ms) and the old
/// rule "at least twice the depth", 2,000 files made 4 chunks of 512 for
/// 8 sessions, and a 1,000-file tree 2, leaving most sessions idle.
///
/// A chunk is cut at its share of the files *or* of the bytes, whichever
/// comes first, and the chunks holding the most bytes go first (the
/// longest jobs first, so no session starts a big one last). Cut by count
/// alone, the mixed tree (1,000 files, Zipf by rank, largest
/// first) put ~630 MB of its 1 GB into the first chunk of 63 files, which
/// one session on one stream moved while the other three finished theirs
/// and sat idle: the tree moved at the speed of one file, where Globus
/// `-cc 8`, which hands out files one by one, was 1.4x faster (session 16).
/// Files of equal size are cut exactly as by count; within a chunk the
/// walk's order is kept (neighbours in a directory stay together).
fn chunks(pending: Vec<Pending>, sessions: usize, depth: usize) -> VecDeque<(Vec<Pending>, bool)> {
    let (resume, fresh): (Vec<Pending>, Vec<Pending>) = pending.into_iter().partition(|p| p.3);
    let sessions = sessions.max(1);
    let fill = (depth * 2).min(fresh.len().div_ceil(sessions));
    let per = fresh.len().div_ceil(sessions * 4).max(fill).clamp(1, MAX_CHUNK);
    // Whole rounds: as many chunks for every session. Cut at the bound
    // alone, 5,000 files for 8 sessions were 9 chunks of 512 and one of
    // 392, so two sessions copied a second chunk each while six sat idle
    // (at 80 ms the first session moved 1,416 files, the others 512).
    let rounds = fresh.len().div_ceil(sessions * per).max(1);
    let count = sessions * rounds;
    let per = fresh.len().div_ceil(count).clamp(1, MAX_CHUNK);
    // A file counts at least one byte, so empty files are cut by count.
    let weight = |p: &Pending| p.2.size.max(1);
    let total: u64 = fresh.iter().map(weight).sum();
    let share = total.div_ceil(count as u64).max(1);
    let mut cut: Vec<(u64, Vec<Pending>)> = Vec::new();
    let mut run: (u64, Vec<Pending>) = (0, Vec::new());
    for p in fresh {
        run.0 += weight(&p);
        run.1.push(p);
        if run.1.len() >= per || run.0 >= share {
            cut.push(std::mem::take(&mut run));
        }
    }
    match cut.last_mut() {
        // A lone file left over joins the chunk before it.
        Some(last) if run.1.len() == 1 && last.1.len() < MAX_CHUNK => {
            last.0 += run.0;
            last.1.append(&mut run.1);
        }
        _ if !run.1.is_empty() => cut.push(run),
        _ => {}
    }
    // A batch is two files or more: a lone file goes on its own, with a
    // round trip of set-up and (uploaded) a sync of its own. A chunk the
    // bytes closed at its first file takes the last file of the last
    // chunk that can spare one (where a tree is listed largest first, one
    // of the smallest), so it stays a batch without taking a big neighbour;
    // where none after it can (a tree listed largest last), one before it.
    for i in 0..cut.len() {
        if cut[i].1.len() != 1 {
            continue;
        }
        if let Some(j) = (0..cut.len()).rev().find(|&j| j != i && cut[j].1.len() > 2) {
            let p = cut[j].1.pop().expect("more than two files");
            let w = weight(&p);
            cut[j].0 -= w;
            cut[i].0 += w;
            cut[i].1.push(p);
        }
    }
    // Stable: chunks of equal bytes keep the walk's order.
    cut.sort_by_key(|c| std::cmp::Reverse(c.0));
    let mut out = VecDeque::new();
    if !resume.is_empty() {
        out.push_back((resume, true));
    }
    out.extend(cut.into_iter().map(|(_, files)| (files, false)));
    out
}

/// Whether the server said it has too many connections (421 "service not
/// available", 425 "can't open data connection").
fn too_many(e: &ClientError) -> bool {
    matches!(e.reply_code(), Some(421 | 425))
}

impl Client {
    /// A client for another session to the same servers: the same
    /// options, counters, rate limit and TLS, its own sessions.
    pub(super) fn worker(&self, parallelism: Option<u32>) -> Client {
        let mut opts = self.opts.clone();
        opts.parallelism = parallelism;
        opts.concurrency = Some(1);
        Client {
            opts,
            stats: self.stats.clone(),
            sessions: Default::default(),
            rate: self.rate.clone(),
            tls: self.tls.clone(),
            deferred: None,
            listed: Default::default(),
            listers: Vec::new(),
            listers_failed: false,
            records: None,
            dests_in_the_way: self.dests_in_the_way,
            line_share: None,
        }
    }

    /// The RTT to the servers of this copy, as the walk's sessions measured it.
    fn path_rtt(&self) -> Option<Duration> {
        self.sessions.values().map(|s| s.rtt).max()
    }

    /// Copies what the walk collected with `--concurrency` sessions (or
    /// as many as [`choose_concurrency`] picks).
    pub(super) async fn copy_pending(
        &mut self,
        pending: Vec<Pending>,
        summary: &mut CopySummary,
    ) -> Result<(), ClientError> {
        if pending.is_empty() {
            return Ok(());
        }
        let remote =
            pending.first().is_some_and(|p| matches!(p.0, Location::Remote(_)) || matches!(p.1, Location::Remote(_)));
        let rtt = if remote { Some(self.path_rtt().unwrap_or_default()) } else { None };
        let sizes: Vec<u64> = pending.iter().map(|p| p.2.size).collect();
        let mean = sizes.iter().sum::<u64>() / sizes.len() as u64;
        let cap = self.opts.max_sessions.max(1);
        let (sessions, reason) = match self.opts.concurrency {
            Some(n) if remote => {
                let n = n.clamp(1, cap);
                (n, format!("{n} session(s) as asked{}", if n == cap { " (the per-server cap)" } else { "" }))
            }
            Some(_) => (1, "no server involved".into()),
            None => {
                let upload = pending.first().is_some_and(|p| matches!(p.1, Location::Remote(_)));
                choose_concurrency_for(&sizes, rtt, cap, upload)
            }
        };
        if self.opts.adaptive_pipeline {
            if let Some(rtt) = rtt {
                let depth = pipeline_depth(self.opts.pipeline, rtt, mean);
                if depth != self.opts.pipeline && self.opts.pipeline > 1 {
                    tracing::info!(
                        depth,
                        rtt_ms = rtt.as_secs_f64() * 1e3,
                        mean_size = mean,
                        "pipeline depth chosen to cover the round trip"
                    );
                    self.opts.pipeline = depth;
                }
            }
        }
        // Streams per session, so that sessions × streams stays under the
        // cap; small files get one (`choose_streams`) unless `-p` was given.
        let main_streams = self.sessions.values().map(|s| s.parallelism()).max().unwrap_or(1);
        let per_session = (self.opts.max_data_connections / sessions).max(1) as u32;
        let small = if remote { choose_streams(&sizes) } else { None };
        let parallelism = match (self.opts.parallelism, &small) {
            (Some(p), _) => Some(p.min(per_session)),
            (None, Some((p, _))) => Some((*p).min(per_session)),
            (None, None) if main_streams > per_session => Some(per_session),
            (None, None) => None,
        };
        if let (Some(p), None) = (parallelism, self.opts.parallelism) {
            let why = small.as_ref().map_or_else(
                || {
                    format!(
                        "{sessions} sessions × {p} streams within the {} data connections per server",
                        self.opts.max_data_connections
                    )
                },
                |(_, why)| why.clone(),
            );
            for s in self.sessions.values_mut() {
                s.set_streams(p, &why);
            }
        }
        tracing::info!(sessions, streams = ?parallelism, pipeline = self.opts.pipeline, "{reason}");
        let queue = Arc::new(Mutex::new(chunks(pending, sessions, self.opts.pipeline)));
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers: Vec<Client> = (1..sessions)
            .map(|i| {
                let mut w = self.worker(parallelism);
                w.line_share = LineShare::of_session(i, sessions);
                w
            })
            .collect();
        let mut sums: Vec<CopySummary> = workers.iter().map(|_| CopySummary::default()).collect();
        let used = Arc::new(std::sync::atomic::AtomicUsize::new(1));
        let refused = Arc::new(AtomicBool::new(false));
        let (main, others) = {
            let runs = workers.iter_mut().zip(sums.iter_mut()).map(|(w, s)| {
                let (queue, stop, used, refused) = (queue.clone(), stop.clone(), used.clone(), refused.clone());
                async move {
                    if w.open_worker_sessions(&queue, &refused).await {
                        used.fetch_add(1, Ordering::Relaxed);
                        w.drain(&queue, &stop, s).await
                    } else {
                        Ok(())
                    }
                }
            });
            futures::future::join(self.drain(&queue, &stop, summary), futures::future::join_all(runs)).await
        };
        for (w, s) in workers.into_iter().zip(sums) {
            summary.absorb(s);
            w.close().await;
        }
        let used = used.load(Ordering::Relaxed);
        if refused.load(Ordering::Relaxed) {
            tracing::warn!("the server took {used} of {sessions} sessions (it answered that it has too many); the copy went on with {used}");
        }
        summary.concurrency = Some(ConcurrencyChoice { sessions, used, reason });
        main?;
        // A worker that hit a fatal error stopped the others too; the
        // first such error is the copy's.
        others.into_iter().collect::<Result<Vec<()>, _>>()?;
        Ok(())
    }

    /// Opens this worker's sessions for the servers of the next chunk;
    /// backs off when a server answers 421/425 and gives up (false) after
    /// a few tries or when the queue runs dry meanwhile.
    async fn open_worker_sessions(
        &mut self,
        queue: &Mutex<VecDeque<(Vec<Pending>, bool)>>,
        refused: &AtomicBool,
    ) -> bool {
        let Some((src, dst)) = queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .front()
            .and_then(|(files, _)| files.first().map(|p| (p.0.clone(), p.1.clone())))
        else {
            return false;
        };
        let mut wait = Duration::from_millis(250);
        for attempt in 1..=REFUSED_ATTEMPTS {
            let r = match (&src, &dst) {
                (Location::Remote(s), Location::Remote(d)) => match self.take_pair(s, d).await {
                    Ok((a, b)) => {
                        self.put_pair(s, d, a, b);
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
                (Location::Remote(u), _) | (_, Location::Remote(u)) => self.session(u).await.map(|_| ()),
                _ => Ok(()),
            };
            match r {
                Ok(()) => return true,
                Err(e) if too_many(&e) && attempt < REFUSED_ATTEMPTS => {
                    refused.store(true, Ordering::Relaxed);
                    tracing::info!(error = %e, attempt, wait_ms = wait.as_millis() as u64, "the server refused another session; backing off");
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                    if queue.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
                        return false;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not open another session; going on with fewer");
                    return false;
                }
            }
        }
        false
    }

    /// Takes chunks until the queue is empty (or a fatal failure stops
    /// every session).
    async fn drain(
        &mut self,
        queue: &Mutex<VecDeque<(Vec<Pending>, bool)>>,
        stop: &AtomicBool,
        summary: &mut CopySummary,
    ) -> Result<(), ClientError> {
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let Some((files, resume)) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front() else {
                return Ok(());
            };
            let r = self.copy_chunk(files, resume, summary).await;
            if r.is_err() {
                stop.store(true, Ordering::Relaxed);
                return r;
            }
        }
    }

    async fn copy_chunk(
        &mut self,
        files: Vec<Pending>,
        resume: bool,
        summary: &mut CopySummary,
    ) -> Result<(), ClientError> {
        let files: Vec<(Location, Location, FileFacts)> = files.into_iter().map(|(s, d, f, _)| (s, d, f)).collect();
        if resume {
            for (s, d, f) in &files {
                if let Err(e) = self.copy_file(s, d, f, summary).await {
                    self.failed(summary, s.to_string(), e)?;
                }
            }
            return Ok(());
        }
        // A file that stops the batch (gone since the listing, changed,
        // refused) is copied on its own, where it fails with its own
        // message; the files after it go on in a new batch.
        let mut start = 0;
        while start < files.len() {
            start += self.copy_batch(&files[start..], summary, start == 0).await?;
            if let Some((s, d, f)) = files.get(start) {
                if let Err(e) = self.copy_file(s, d, f, summary).await {
                    self.failed(summary, s.to_string(), e)?;
                }
                start += 1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pending file named `name` of `size` bytes (resumed or fresh).
    fn pending(name: &str, size: u64, resume: bool) -> Pending {
        let facts = FileFacts {
            name: name.into(),
            kind: ferry_proto::facts::FileKind::File,
            size,
            modified: 0,
            mode: 0o644,
            uid: 0,
            gid: 0,
            nlink: 1,
            unique: (0, 0),
        };
        (Location::Local(name.into()), Location::Local(name.into()), facts, resume)
    }

    #[test]
    fn small_files_get_more_sessions_on_long_paths() {
        let small = vec![4096u64; 2000];
        assert_eq!(choose_concurrency(&small, Some(Duration::from_micros(50)), 8).0, SMALL_FILES_NEAR);
        // Uploads wait for each file's 226 even on loopback.
        let (n, why) = choose_concurrency_for(&small, Some(Duration::from_micros(50)), 8, true);
        assert_eq!(n, SMALL_FILES_FAR);
        assert!(why.contains("uploaded"), "{why}");
        assert_eq!(choose_concurrency(&small, Some(Duration::from_millis(20)), 16).0, SMALL_FILES_FAR);
        // 1 ms one way (RTT 2.3 ms) is already long: uploads wait a round trip a file per session.
        assert_eq!(choose_concurrency(&small, Some(Duration::from_micros(2300)), 8).0, SMALL_FILES_FAR);
        // The per-server cap wins, and says so.
        let (n, why) = choose_concurrency(&small, Some(Duration::from_millis(20)), 2);
        assert_eq!(n, 2);
        assert!(why.contains("capped"), "{why}");
    }

    #[test]
    fn large_files_and_few_files_get_few_sessions() {
        assert_eq!(choose_concurrency(&[1 << 30; 10], Some(Duration::from_millis(20)), 8).0, 1);
        assert_eq!(choose_concurrency(&[1 << 30; 100], Some(Duration::from_millis(20)), 8).0, 2);
        assert_eq!(choose_concurrency(&[10], Some(Duration::ZERO), 8).0, 1);
        assert_eq!(choose_concurrency(&[10; 40], Some(Duration::ZERO), 8).0, 2);
        assert_eq!(choose_concurrency(&[10; 4000], None, 8).0, 1);
    }

    #[test]
    fn small_files_get_one_stream_per_session() {
        let (p, why) = choose_streams(&[4096; 20_000]).unwrap();
        assert_eq!(p, 1);
        assert!(why.contains("median 4096"), "{why}");
        assert_eq!(choose_streams(&[256 << 10; 2000]).map(|c| c.0), Some(1));
        // A mixed tree whose median file is small: one stream too.
        let mut mixed = vec![64 << 10; 900];
        mixed.extend([1 << 30; 100]);
        assert_eq!(choose_streams(&mixed).map(|c| c.0), Some(1));
        // Large files and single files keep the path's choice.
        assert_eq!(choose_streams(&[1 << 30; 10]), None);
        assert_eq!(choose_streams(&[4096]), None);
    }

    #[test]
    fn depth_covers_the_round_trip() {
        assert_eq!(pipeline_depth(16, Duration::from_micros(50), 4096), 16);
        // 256 KiB at ~1 Gbit/s is ~2.1 ms a file: 80 ms needs ~40 in flight.
        let d = pipeline_depth(16, Duration::from_millis(80), 256 << 10);
        assert!((38..=45).contains(&d), "{d}");
        assert_eq!(pipeline_depth(16, Duration::from_millis(80), 4096), 256);
        assert_eq!(pipeline_depth(1, Duration::from_millis(80), 4096), 256);
    }

    #[test]
    fn chunks_keep_resumed_files_apart() {
        let f = |name: &str, resume| pending(name, 1, resume);
        let pending: Vec<Pending> = (0..1000).map(|i| f(&i.to_string(), i % 100 == 0)).collect();
        let c = chunks(pending, 4, 16);
        assert!(c[0].1 && c[0].0.len() == 10);
        assert!(c
            .iter()
            .skip(1)
            .all(|(files, r)| !r && files.len() <= MAX_CHUNK && files.len() >= 32.min(files.len())));
        assert_eq!(c.iter().map(|(f, _)| f.len()).sum::<usize>(), 1000);
    }

    #[test]
    fn a_zipf_tree_is_cut_by_bytes_and_its_biggest_chunks_go_first() {
        let f = |i: usize, size: u64| pending(&i.to_string(), size, false);
        // The mixed tree: 1,000 files, Zipf by rank, largest first.
        let sizes: Vec<u64> = (1..=1000u64).map(|k| 133_600_000 / k).collect();
        let total: u64 = sizes.iter().sum();
        let c = chunks(sizes.iter().enumerate().map(|(i, s)| f(i, *s)).collect(), 4, 16);
        let bytes: Vec<u64> = c.iter().map(|(x, _)| x.iter().map(|p| p.2.size).sum()).collect();
        assert_eq!(bytes.iter().sum::<u64>(), total);
        assert_eq!(c.iter().map(|(x, _)| x.len()).sum::<usize>(), 1000);
        // No chunk but the one holding the largest file alone carries more
        // than twice a sixteenth of the bytes (by count: 63 files, ~60 %).
        // The largest file first, in a batch with one of the smallest.
        assert_eq!(c[0].0.len(), 2);
        assert_eq!((c[0].0[0].2.name.as_str(), c[0].0[1].2.size), ("0", sizes[999]));
        assert!(c.iter().all(|(x, _)| x.len() >= 2), "every chunk a batch");
        assert!(bytes.iter().skip(1).all(|b| *b <= total / 8), "{bytes:?}");
        assert!(bytes.windows(2).all(|w| w[0] >= w[1]), "biggest first: {bytes:?}");
        // Within a chunk the walk's order stands.
        assert!(c.iter().all(|(x, _)| x
            .windows(2)
            .all(|w| w[0].2.name.parse::<usize>().unwrap() < w[1].2.name.parse::<usize>().unwrap())));
    }

    #[test]
    fn no_chunk_is_a_lone_file() {
        let f = |i: u64| {
            let size = if i % 7 == 0 { 300_000 } else { 1 + i * 997 % 70_000 };
            pending(&i.to_string(), size, false)
        };
        for (n, sessions, depth) in [(60, 2, 16), (60, 8, 16), (61, 2, 16), (200, 4, 16), (1000, 8, 256)] {
            let c = chunks((0..n).map(f).collect(), sessions, depth);
            assert_eq!(c.iter().map(|(x, _)| x.len() as u64).sum::<u64>(), n);
            assert!(c.iter().all(|(x, _)| x.len() >= 2 && x.len() <= MAX_CHUNK), "{n}/{sessions}: {c:?}");
        }
        // Listed largest last: twelve 1-byte files cut by count into chunks
        // of four, then two 1 GB files that the bytes close alone; no chunk
        // follows them, so each borrows from a chunk before it.
        let sizes: Vec<u64> = [1; 12].into_iter().chain([1 << 30, 1 << 30]).collect();
        let c = chunks(sizes.iter().enumerate().map(|(i, s)| pending(&i.to_string(), *s, false)).collect(), 2, 2);
        assert_eq!(c.iter().map(|(x, _)| x.len()).sum::<usize>(), 14);
        let lens: Vec<usize> = c.iter().map(|(x, _)| x.len()).collect();
        assert!(lens.iter().all(|l| *l >= 2), "{lens:?}");
    }

    #[test]
    fn every_session_gets_a_chunk_on_a_long_path() {
        let f = |i: usize| pending(&i.to_string(), 4096, false);
        // 80 ms: depth 256. 2,000 files for 8 sessions: 8 chunks, not 4.
        let c = chunks((0..2000).map(f).collect(), 8, 256);
        assert_eq!(c.len(), 8);
        let c = chunks((0..1000).map(f).collect(), 8, 256);
        assert_eq!(c.len(), 8);
        // Many files: chunks of at most the batch bound, several per session.
        let c = chunks((0..20_000).map(f).collect(), 8, 256);
        assert!(c.len() >= 32 && c.iter().all(|(x, _)| x.len() <= MAX_CHUNK), "{}", c.len());
        // Whole rounds: every session gets as many chunks.
        let c = chunks((0..5000).map(f).collect(), 8, 256);
        assert_eq!(c.len(), 16);
        assert!(c.iter().all(|(x, _)| x.len() == 313 || x.len() == 5000 - 15 * 313), "{c:?}");
        // A short path still cuts into a few chunks per session.
        let c = chunks((0..2000).map(f).collect(), 4, 16);
        assert_eq!(c.len(), 16);
    }
}
