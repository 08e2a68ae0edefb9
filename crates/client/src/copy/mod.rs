//! Copies between local paths and servers, one file or a tree.
//!
//! Against servers that speak GridFTP (Globus, Ferry) files travel in
//! extended block mode: parallel streams, data channels kept across files,
//! explicit end of file, and restart markers recorded on disk so an
//! interrupted copy resumes — in every direction — sending only what is
//! missing. Plain FTP servers get stream mode. Every destination file is
//! written under a partial name and renamed when complete: locally
//! `.<name>.ferry-part`, on Ferry servers by the server itself. Special files
//! (`/dev/null`) are written directly.
//!
//! The rooms:
//!
//! * this module — the options, the summary, and one file's copy with
//!   retries and resume (`copy_file`), choosing the mode and direction.
//! * `pool` — the logged-in sessions, one per server (plus one for
//!   listings), reopened when broken.
//! * `extended` — a file in MODE E: download, upload, third-party.
//! * `stream_mode` — a file in stream mode, for plain FTP servers.
//! * `tree` — a directory tree: skip, resume or copy each file;
//!   `batch` — a directory's fresh files pipelined in one MODE E batch.
//! * `verify` — checksums after a file (`--verify`).
//! * `namespace` — facts, listings, MKD, removal, remote mode and time.
//! * `local` — partial files, mode and time, direct-I/O endpoints.
//! * `measure` — bounded transfers for `ferry probe` and `ferry tune`.
//!
//! The server-side mechanics of a transfer (set-up commands, data
//! channels, replies) are in [`crate::session`].

use crate::error::ClientError;
use crate::location::Location;
use crate::resume::ResumeState;
use crate::session::ServerSession;
use ferry_io::mode_e::{DataPath, TransferControl};
use ferry_io::rate::RateLimit;
use ferry_proto::facts::{FileFacts, FileKind};
use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod batch;
mod concurrency;
mod extended;
mod local;
mod measure;
mod namespace;
mod opener;
mod pool;
mod stream_mode;
mod tree;
mod verify;

pub use concurrency::{choose_concurrency, choose_concurrency_for, choose_streams, pipeline_depth, ConcurrencyChoice};
use local::{copy_local, DirectOrFile, FileMeta};
pub use measure::Measurement;
use tree::same_place;

/// Shared counters a progress display reads while a copy runs.
#[derive(Debug, Default)]
pub struct Stats {
    /// Payload bytes moved so far (all files).
    pub bytes: Arc<AtomicU64>,
    /// Bytes expected in total, as far as known.
    pub expected: AtomicU64,
    pub files_done: AtomicU64,
    pub current: Mutex<String>,
    /// How local files were read and written (`ferry_io::disk`), each once.
    pub disk: Mutex<Vec<String>>,
}

impl Stats {
    /// Logs a disk plan and keeps it for the summary (each distinct one once).
    pub(crate) fn disk_plan(&self, plan: &ferry_io::disk::DiskPlan) {
        tracing::info!(disk = %plan, "disk plan");
        let mut d = self.disk.lock().unwrap_or_else(|e| e.into_inner());
        if !d.contains(&plan.reason) {
            d.push(plan.reason.clone());
        }
    }

    fn begin(&self, name: &str, size: Option<u64>) {
        if let Some(s) = size {
            self.expected.fetch_add(s, Ordering::Relaxed);
        }
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = name.to_string();
    }
}

/// When a tree copy takes a destination file for the same as its source
/// and skips it (`--sync`; globus-url-copy's `-sync-level`, rclone's
/// default and `--checksum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncRule {
    /// Same size and not older than the source (without `--sync`: a
    /// re-run finishes the job; copies keep times, so a finished file
    /// always passes).
    #[default]
    NotOlder,
    /// It exists (`-sync-level 0`).
    Exists,
    /// Same size (`-sync-level 1`).
    Size,
    /// Same size and modification time, to the second (`--sync`, `-sync-level
    /// 2`, rclone's default): a destination changed since is copied again.
    SizeAndTime,
    /// Same size and checksum (`--sync=checksum`, `-sync-level 3`).
    Checksum,
}

/// Which transmission mode to use with GridFTP-capable servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModeChoice {
    /// MODE E when the server offers it, else stream mode.
    #[default]
    Auto,
    Stream,
    Extended,
}

#[derive(Debug, Clone)]
pub struct CopyOptions {
    pub recursive: bool,
    /// Limit for each control-channel exchange and data-connection stall.
    pub timeout: Duration,
    pub mode: ModeChoice,
    /// Parallel TCP streams (`-p`); chosen from the measured path when
    /// `None`.
    pub parallelism: Option<u32>,
    /// Staged mode with a ring of this many bytes (`None`: synchronous).
    pub staging: Option<usize>,
    pub tcp_buffer: Option<u32>,
    pub block_size: usize,
    /// Compare checksums of source and destination after each file: an
    /// algorithm name, or `auto` for the best both ends support.
    pub verify: Option<String>,
    /// Bytes per second for this copy, all streams together.
    pub max_rate: Option<u64>,
    /// Attempts after a failure; each resumes from what arrived.
    pub retries: u32,
    /// Continue interrupted copies from their restart records.
    pub resume: bool,
    /// Transfer commands kept in flight when copying a directory's files
    /// in MODE E (1 turns pipelining off).
    pub pipeline: usize,
    /// Deepen the pipeline beyond `pipeline` when the path is long: enough
    /// commands in flight to cover a round trip (off when the user gave
    /// `--pipeline`).
    pub adaptive_pipeline: bool,
    /// Trees: control sessions per server that share the files
    /// (`--concurrency`, Globus's `-cc`); `None` chooses from the file
    /// sizes and the RTT. `Some(1)` copies directory by directory as the
    /// walk goes (the library's default).
    pub concurrency: Option<usize>,
    /// Most control sessions to one server for one copy's files.
    pub max_sessions: usize,
    /// Most data connections to one server: sessions × parallel streams.
    pub max_data_connections: usize,
    /// `ferry profile`: where data connections register for sampling.
    pub streams: Option<ferry_profile::StreamRegistry>,
    /// MODE E file I/O with `O_DIRECT` where the file system has it
    /// (implies a staging ring, whose buffers are aligned for it).
    pub direct_io: bool,
    /// Trust anchors and client certificate for `ftps://`.
    pub tls: crate::tls::TlsOptions,
    /// Where a single file's restart ranges are kept instead of the state
    /// directory (the transfer service's database; see
    /// [`crate::resume::RestartStore`]).
    pub restart_store: Option<Arc<dyn crate::resume::RestartStore>>,
    /// Where passwords come from when URLs carry none.
    pub credentials: crate::credentials::CredentialLookup,
    /// Trees: follow symbolic links (`-L`) instead of copying them as links.
    pub follow_links: bool,
    /// Trees: stop at the first failing file instead of going on.
    pub fail_fast: bool,
    /// Say what would be copied, copy nothing.
    pub dry_run: bool,
    /// Trees: which destination files count as already there.
    pub sync: SyncRule,
    /// `--include` / `--exclude`.
    pub filter: Option<crate::filter::Filter>,
    /// `--transport`: the data-channel transport to ask servers for; TCP
    /// when unset or refused.
    pub transport: Option<String>,
    /// `--path-rate`, bytes/s: UDT senders of this copy start at it
    /// (`session::ChannelOptions::path_rate`).
    pub path_rate: Option<f64>,
    /// The remembered path rates (`crate::path_cache`), when on.
    pub path_cache: Option<Arc<crate::path_cache::PathCache>>,
    /// How payload crosses between sockets and files (`FERRY_DATA_PATH`,
    /// read by the command line, not here).
    pub data_path: DataPath,
}

impl Default for CopyOptions {
    fn default() -> Self {
        Self {
            recursive: false,
            timeout: Duration::from_secs(60),
            mode: ModeChoice::Auto,
            parallelism: None,
            staging: None,
            tcp_buffer: None,
            block_size: ferry_io::mode_e::DEFAULT_BLOCK_SIZE,
            verify: None,
            max_rate: None,
            retries: 3,
            resume: true,
            pipeline: 16,
            adaptive_pipeline: false,
            concurrency: Some(1),
            max_sessions: 8,
            max_data_connections: 64,
            streams: None,
            direct_io: false,
            tls: crate::tls::TlsOptions::default(),
            restart_store: None,
            credentials: crate::credentials::CredentialLookup::standard(),
            follow_links: false,
            fail_fast: false,
            dry_run: false,
            sync: SyncRule::NotOlder,
            filter: None,
            transport: None,
            path_rate: None,
            path_cache: None,
            data_path: DataPath::ZeroCopy,
        }
    }
}

/// One entry of a copy that did not simply arrive: a failure, or
/// something passed over with a warning (a link the destination cannot
/// hold, a special file, a loop).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// The source path.
    pub path: String,
    pub reason: String,
}

/// One line of a `--dry-run`: what would happen to a path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlanLine {
    /// `copy`, `resume`, `skip` (already complete), `link`, `mkdir`.
    pub action: &'static str,
    pub path: String,
    pub bytes: u64,
}

/// What a copy did (also after it failed or was interrupted: the caller
/// owns it and reports it either way).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CopySummary {
    pub files: u64,
    pub bytes: u64,
    pub dirs: u64,
    /// Files whose checksums were compared, and with which algorithm.
    pub verified: u64,
    pub checksum_algorithm: Option<String>,
    /// Files continued from an earlier, interrupted copy.
    pub resumed: u64,
    /// Their source paths.
    pub resumed_files: Vec<String>,
    /// Files already complete at the destination (same size, not older;
    /// same checksum with `--verify`), not sent again.
    pub skipped: u64,
    pub skipped_bytes: u64,
    /// Symbolic links recreated as links.
    pub links: u64,
    /// Files left out by `--include`/`--exclude`.
    pub excluded: u64,
    /// Entries not copied, each with a warning.
    pub passed_over: Vec<Problem>,
    /// Entries that failed.
    pub failures: Vec<Problem>,
    /// `--dry-run`: what would have happened.
    pub plan: Vec<PlanLine>,
    /// How the data channels to each server were sized: (server, RTT in
    /// ms, streams and why).
    pub sizing: Vec<(String, f64, String)>,
    /// The data channels' transport for each server: (server, transport).
    pub transports: Vec<(String, String)>,
    /// Trees: how many control sessions shared the files, and why.
    pub concurrency: Option<ConcurrencyChoice>,
    /// Trees to local paths: seconds spent making the files durable.
    pub sync_seconds: f64,
    /// `--transport auto`: (server, the choice and why).
    pub transport_choices: Vec<(String, String)>,
    /// How local files were read and written (`ferry_io::disk::DiskPlan`).
    pub disk: Vec<String>,
}

impl CopySummary {
    /// Whether everything asked for arrived (or was already there).
    pub fn is_clean(&self) -> bool {
        self.failures.is_empty() && self.passed_over.is_empty()
    }

    /// Adds what another session of the same copy did.
    fn absorb(&mut self, o: CopySummary) {
        self.files += o.files;
        self.bytes += o.bytes;
        self.dirs += o.dirs;
        self.verified += o.verified;
        if self.checksum_algorithm.is_none() {
            self.checksum_algorithm = o.checksum_algorithm;
        }
        self.resumed += o.resumed;
        self.resumed_files.extend(o.resumed_files);
        self.skipped += o.skipped;
        self.skipped_bytes += o.skipped_bytes;
        self.links += o.links;
        self.excluded += o.excluded;
        self.passed_over.extend(o.passed_over);
        self.failures.extend(o.failures);
        self.plan.extend(o.plan);
    }
}

/// A client: one logged-in session per server, reused across the files of
/// a copy, plus one for listings so they do not disturb cached channels.
#[derive(Debug)]
pub struct Client {
    opts: CopyOptions,
    stats: Arc<Stats>,
    sessions: HashMap<String, ServerSession>,
    rate: Option<Arc<RateLimit>>,
    /// Built on first use by an `ftps://` URL, then shared by every
    /// connection (so data connections can resume its sessions).
    tls: Option<Arc<rustls::ClientConfig>>,
    /// Trees copied with several sessions: the files the walk found,
    /// copied after it (see `concurrency`).
    deferred: Option<Vec<concurrency::Pending>>,
    /// Source listings fetched ahead by `listers` (see `tree.rs`), by URL.
    listed: HashMap<String, Vec<FileFacts>>,
    /// Extra sessions that list a remote tree's directories in parallel.
    listers: Vec<Client>,
    /// A lister failed: the walk makes no more.
    listers_failed: bool,
    /// The restart records' names, listed once per tree copy (see
    /// `RecordIndex` in `tree.rs`).
    records: Option<Arc<std::collections::HashSet<String>>>,
    /// The tree walk found a file to copy whose local destination name is
    /// taken by something other than a regular file (a directory, a link,
    /// a device): the batches' opener then looks at each destination
    /// before it creates the partial file. Otherwise it does not — the walk
    /// listed (or created) every destination directory, so each name is
    /// free or a regular file to be replaced (one failing `statx` less per
    /// downloaded file; docs/trees.md, session 12).
    dests_in_the_way: bool,
    /// A worker of a copy of several sessions: the cut of its sessions'
    /// first streamed upload line ([`LineShare`]).
    line_share: Option<crate::session::LineShare>,
}

fn local_err(path: &Path) -> impl Fn(std::io::Error) -> ClientError + '_ {
    move |e| ClientError::local(path.display(), e)
}

/// Joins a remote directory path and a name.
fn remote_join(dir: &str, name: &str) -> String {
    format!("{}/{}", dir.trim_end_matches('/'), name)
}

impl Client {
    pub fn new(opts: CopyOptions) -> Self {
        let rate = opts.max_rate.map(|r| Arc::new(RateLimit::new(r)));
        Self {
            opts,
            stats: Arc::new(Stats::default()),
            sessions: HashMap::new(),
            rate,
            tls: None,
            deferred: None,
            listed: HashMap::new(),
            listers: Vec::new(),
            listers_failed: false,
            records: None,
            dests_in_the_way: false,
            line_share: None,
        }
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Where the next copies keep their restart ranges (see
    /// [`CopyOptions::restart_store`]); lets one client, with its logged-in
    /// sessions, copy file after file for the transfer service.
    pub fn set_restart_store(&mut self, store: Option<Arc<dyn crate::resume::RestartStore>>) {
        self.opts.restart_store = store;
    }

    /// Copies `src` to `dst` and returns what it did. A file lands in an
    /// existing directory (or a URL ending in `/`) under its own name; a
    /// tree follows [`Location::names_contents`]: `tree` lands in
    /// `dst/tree`, `tree/` fills `dst`.
    pub async fn copy(&mut self, src: &Location, dst: &Location) -> Result<CopySummary, ClientError> {
        let mut summary = CopySummary::default();
        self.copy_into(src, dst, &mut summary).await?;
        Ok(summary)
    }

    /// Like [`copy`](Self::copy), adding to `summary` as it goes, so the
    /// caller can report what happened after an error or an interrupt.
    /// Failing files of a tree are listed in `summary.failures` and the
    /// copy goes on (unless `fail_fast`); the `Err` is for what stops the
    /// whole copy.
    pub async fn copy_into(
        &mut self,
        src: &Location,
        dst: &Location,
        summary: &mut CopySummary,
    ) -> Result<(), ClientError> {
        if !self.opts.recursive && !self.opts.dry_run {
            self.pipeline_download(src, dst).await?;
        }
        let src_facts = self.facts(src).await?.ok_or_else(|| match src {
            Location::Local(p) => ClientError::local(p.display(), std::io::ErrorKind::NotFound.into()),
            Location::Remote(u) => ClientError::Usage(format!("{u}: no such file or directory on the server")),
        })?;
        let result = if src_facts.kind == FileKind::Dir {
            if !self.opts.recursive {
                return Err(ClientError::Usage(format!(
                    "{src} is a directory; use -r to copy a tree (`{src}/` copies its contents)"
                )));
            }
            let root = match (src.names_contents(), src.file_name()) {
                (false, Some(name)) => dst.child(&name),
                _ => dst.clone(),
            };
            if same_place(src, &root) {
                return Err(ClientError::Usage(format!("{src} and {root} are the same directory")));
            }
            if !self.opts.dry_run {
                self.make_parents(&root).await;
            }
            let mut ancestors = Vec::new();
            if src_facts.unique != (0, 0) {
                ancestors.push(src_facts.unique);
            }
            // `--fail-fast` without `--concurrency` keeps to the walk, so
            // that nothing after the first failure is touched.
            let concurrent = match self.opts.concurrency {
                Some(n) => n > 1,
                None => !self.opts.fail_fast,
            } && !self.opts.dry_run;
            if concurrent {
                self.deferred = Some(Vec::new());
            } else {
                let reason = "1 session, directory by directory as the walk goes".to_string();
                summary.concurrency = Some(ConcurrencyChoice { sessions: 1, used: 1, reason });
            }
            let files_before = summary.files;
            let walked = Box::pin(self.copy_tree(src, &root, "", &mut ancestors, summary)).await;
            for l in std::mem::take(&mut self.listers) {
                l.close().await;
            }
            self.listed.clear();
            self.records = None;
            let copied = match self.deferred.take() {
                Some(pending) if walked.is_ok() => self.copy_pending(pending, summary).await,
                _ => walked,
            };
            // Durable before success is reported: one sync for the tree
            // (also for the part that arrived before a failure).
            match (&root, summary.files > files_before && !self.opts.dry_run) {
                (Location::Local(p), true) => match local::make_durable(p) {
                    Ok(took) => {
                        tracing::info!(ms = took.as_secs_f64() * 1e3, "the copied files are on disk (one syncfs)");
                        summary.sync_seconds += took.as_secs_f64();
                        copied
                    }
                    Err(e) => copied.and(Err(e)),
                },
                _ => copied,
            }
        } else {
            let dst = self.resolve_destination(src, dst).await?;
            if self.opts.dry_run {
                let action = if ResumeState::exists(&src.to_string(), &dst.to_string()) { "resume" } else { "copy" };
                summary.plan.push(PlanLine { action, path: dst.to_string(), bytes: src_facts.size });
                Ok(())
            } else {
                let copied = self.copy_file(src, &dst, &src_facts, summary).await;
                // Durable before success is reported: the file's data and
                // the rename that gave it its name (a large file's data was
                // already synced before the rename).
                match (&dst, copied) {
                    (Location::Local(p), Ok(())) => local::make_file_durable(p),
                    (_, other) => other,
                }
            }
        };
        summary.sizing = self.sizing();
        summary.transports = self.transports();
        summary.transport_choices = self.transport_choices();
        summary.disk = self.stats.disk.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // The records of the files it completed are gone before the copy
        // returns (`resume::removals`): a process that exits next leaves
        // none behind.
        let _ = tokio::task::spawn_blocking(crate::resume::wait_for_removals).await;
        match result {
            Err(ClientError::FailFast) => Ok(()),
            other => other,
        }
    }

    /// Copies one file with retries and resume, then verifies it if asked.
    async fn copy_file(
        &mut self,
        src: &Location,
        dst: &Location,
        facts: &FileFacts,
        summary: &mut CopySummary,
    ) -> Result<(), ClientError> {
        self.stats.begin(&src.to_string(), Some(facts.size));
        let mut resume = ResumeState::load_from(
            self.opts.restart_store.as_ref(),
            &src.to_string(),
            &dst.to_string(),
            facts.size,
            facts.modified,
        );
        if !self.opts.resume {
            resume.clear();
        }
        if !resume.is_empty() {
            summary.resumed += 1;
            summary.resumed_files.push(src.to_string());
            tracing::info!(source = %src, ranges = %resume.done(), "resuming from a restart record");
        }
        if self.opts.resume && matches!((src, dst), (Location::Local(_), Location::Remote(_))) {
            if resume.interrupted() && resume.is_empty() {
                summary.resumed += 1;
                summary.resumed_files.push(src.to_string());
            }
            // An upload leaves its partial on the server: if this run is
            // cut short, the next asks the server what it holds.
            resume.begin();
        }
        let mut attempt = 0;
        let bytes = loop {
            match self.copy_file_once(src, dst, facts, &mut resume).await {
                Ok(n) => break n,
                Err(e) if attempt < self.opts.retries && retryable(&e) => {
                    attempt += 1;
                    let wait = Duration::from_secs(1 << attempt.min(5));
                    tracing::warn!(error = %e, attempt, wait_s = wait.as_secs(), "transfer failed; retrying");
                    resume.save();
                    // The sessions' state is unknown after a failure.
                    for loc in [src, dst] {
                        if let Location::Remote(u) = loc {
                            self.forget(u);
                        }
                    }
                    tokio::time::sleep(wait).await;
                }
                Err(e) => {
                    resume.save();
                    return Err(e);
                }
            }
        };
        resume.clear();
        if let Location::Remote(d) = dst {
            self.set_remote_meta(d, &[(d.path.clone(), facts.clone())]).await;
        }
        if self.opts.verify.is_some() {
            let alg = self.verify(src, dst).await?;
            summary.verified += 1;
            summary.checksum_algorithm = Some(alg);
        }
        summary.files += 1;
        summary.bytes += bytes;
        self.stats.files_done.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn copy_file_once(
        &mut self,
        src: &Location,
        dst: &Location,
        facts: &FileFacts,
        resume: &mut ResumeState,
    ) -> Result<u64, ClientError> {
        let size = facts.size;
        let meta = FileMeta::of(facts);
        match (src, dst) {
            (Location::Local(s), Location::Local(d)) => copy_local(s, d, &self.stats, meta),
            (Location::Remote(s), Location::Local(d)) => {
                if self.use_mode_e(s).await? {
                    self.download_e(s, d, size, resume, meta).await
                } else {
                    self.download_s(s, d, size, meta).await
                }
            }
            (Location::Local(s), Location::Remote(d)) => {
                if self.use_mode_e(d).await? {
                    self.upload_e(s, d, size, resume).await
                } else {
                    self.upload_s(s, d, size, resume).await
                }
            }
            (Location::Remote(s), Location::Remote(d)) => {
                if s.same_file(d) {
                    return Err(ClientError::Usage(format!("{s} and {d} are the same file")));
                }
                if self.use_mode_e(s).await? && self.use_mode_e(d).await? {
                    self.third_party_e(s, d, size, resume).await
                } else {
                    self.third_party_s(s, d).await
                }
            }
        }
    }

    fn control(&self) -> TransferControl {
        let mut ctl = TransferControl::shared(self.stats.bytes.clone(), self.rate.clone());
        ctl.path = self.opts.data_path;
        // Direct I/O needs the ring's aligned buffers: 16 MiB unless sized.
        let staging = self.opts.staging.or(self.opts.direct_io.then_some(16 << 20));
        ctl.staging = staging.map(|b| ferry_io::staging::StagingConfig::new(b, self.opts.block_size));
        ctl
    }

    /// A local file as a MODE E endpoint, around the page cache when asked.
    fn endpoint(&self, file: File) -> Arc<DirectOrFile> {
        if self.opts.direct_io {
            match file.try_clone().and_then(ferry_io::endpoint::DirectFile::new) {
                Ok(d) => return Arc::new(DirectOrFile::Direct(d)),
                Err(e) => tracing::info!(error = %e, "no direct I/O for this file; using the page cache"),
            }
        }
        Arc::new(DirectOrFile::File(ferry_io::endpoint::SerialFile::new(file)))
    }
}

/// The destination says our restart record is wrong (554: it does not hold
/// those ranges; or ranges were found missing at the end): forget the
/// record so the next attempt sends everything.
fn forget_refuted_record<T>(result: &Result<T, ClientError>, resume: &mut ResumeState) {
    if let Err(ClientError::Refused { reply, .. }) = result {
        if ferry_proto::client::expect::refutes_restart(reply) {
            tracing::warn!("the destination does not hold what the restart record says; starting over");
            resume.clear();
        }
    }
}

/// Failures worth another attempt: the network and the server's transient
/// (4xx) replies, not a missing file or a refused login; and a refuted
/// restart record (554), since the next attempt starts over.
fn retryable(e: &ClientError) -> bool {
    match e {
        ClientError::Connect { .. }
        | ClientError::Timeout { .. }
        | ClientError::Closed
        | ClientError::Io(_)
        | ClientError::Data(_)
        | ClientError::Incomplete { .. } => true,
        ClientError::Refused { reply, .. } => ferry_proto::client::expect::worth_retrying(reply),
        _ => false,
    }
}
