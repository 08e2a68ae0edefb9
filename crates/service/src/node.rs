//! One service node: claims files from the shared queue, copies them
//! server to server through the client library, verifies them, reports
//! back; renews its leases, takes over expired ones, runs the optimiser
//! for links no other node has just decided for, and purges old jobs.
//!
//! Every database call that fails (the database restarting, a network
//! blip) is logged and tried again on the next round; transfers under way
//! carry on meanwhile, and their results are written once the database
//! answers — provided the lease is still this node's.

use crate::credentials::{complete, Credentials};
use crate::job::Verify;
use crate::metrics::ServiceMetrics;
use crate::optimiser::{self, Limits, Sample, Setting};
use crate::store::{ClaimLimits, Claimed, JobEnd, Outcome, Store};
use ferry_client::location::{Location, RemoteUrl};
use ferry_client::{Client, ClientError, CopyOptions, RestartStore, TlsOptions};
use ferry_proto::RangeSet;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How a node runs.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub node_id: String,
    /// How long a claim lasts without renewal.
    pub lease: Duration,
    /// How often leases are renewed (a fraction of `lease`).
    pub heartbeat: Duration,
    /// How often the queue is looked at for work.
    pub tick: Duration,
    pub optimiser_interval: Duration,
    pub limits: Limits,
    pub max_active_per_endpoint: i64,
    /// Transfers this node runs at once, over all links.
    pub max_transfers: usize,
    pub purge_after: Duration,
    /// Control-channel and data-stall timeout of each copy.
    pub timeout: Duration,
    /// Longest first retry delay after which back-off stops doubling.
    pub max_retry_delay: Duration,
    pub tls: TlsOptions,
    /// Storage endpoints (`host` or `host:port`) this node can reach; it
    /// claims only files whose source and destination are both listed.
    /// `None`: every link. For sites whose nodes each see only some
    /// servers (and for the benchmark's two separate emulated links).
    pub endpoints: Option<Vec<String>>,
}

/// Whether a link (`scheme://host:port -> scheme://host:port`) joins two of
/// the given endpoints.
pub fn link_within(link: &str, endpoints: &[String]) -> bool {
    link.split(" -> ").all(|end| {
        let hostport = end.split_once("://").map_or(end, |(_, r)| r);
        let host = hostport.rsplit_once(':').map_or(hostport, |(h, _)| h).trim_matches(['[', ']']);
        endpoints.iter().any(|e| e == hostport || e == host)
    })
}

impl NodeConfig {
    pub fn new(node_id: String) -> Self {
        NodeConfig {
            node_id,
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(5),
            tick: Duration::from_millis(500),
            optimiser_interval: Duration::from_secs(30),
            limits: Limits::default(),
            max_active_per_endpoint: 64,
            max_transfers: 64,
            purge_after: Duration::from_secs(7 * 86400),
            timeout: Duration::from_secs(60),
            max_retry_delay: Duration::from_secs(600),
            tls: TlsOptions::default(),
            endpoints: None,
        }
    }
}

#[derive(Debug)]
struct InFlight {
    lease_id: String,
    link: String,
    task: tokio::task::AbortHandle,
    /// Bytes this transfer has moved so far.
    progress: Arc<AtomicU64>,
}

/// Idle clients (logged-in sessions) per link, so the next file on a link
/// reuses the control connections and data channels. A link keeps clients
/// for one stream count only, the count of its latest claim: sessions kept
/// for a count the optimiser left would never be taken again, and each
/// holds a session slot on both servers, whose per-address caps would then
/// answer 421 to the link's new sessions.
type Pool = HashMap<String, LinkPool>;

#[derive(Debug, Default)]
struct LinkPool {
    streams: u32,
    idle: Vec<Client>,
}

#[derive(Debug)]
pub struct Node {
    pub store: Store,
    pub config: NodeConfig,
    creds: Arc<dyn Credentials>,
    inflight: Mutex<HashMap<(String, i64), InFlight>>,
    /// Bytes moved by finished transfers, per link.
    finished_bytes: Mutex<HashMap<String, u64>>,
    pool: Mutex<Pool>,
    /// Destination directories known to exist (`host:port/path`).
    dirs: Mutex<std::collections::HashSet<String>>,
    pub metrics: Arc<ServiceMetrics>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Node {
    pub fn new(
        store: Store,
        config: NodeConfig,
        creds: Arc<dyn Credentials>,
        metrics: Arc<ServiceMetrics>,
    ) -> Arc<Self> {
        Arc::new(Node {
            store,
            config,
            creds,
            inflight: Mutex::new(HashMap::new()),
            finished_bytes: Mutex::new(HashMap::new()),
            pool: Mutex::new(HashMap::new()),
            dirs: Mutex::new(Default::default()),
            metrics,
        })
    }

    /// Registers the node and runs its loops until the process ends.
    pub async fn run(self: Arc<Self>) -> anyhow::Result<()> {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string();
        self.store.register_node(&self.config.node_id, &host).await?;
        tracing::info!(node = %self.config.node_id, "service node started");
        let me = self.clone();
        tokio::spawn(async move { me.heartbeat_loop().await });
        let me = self.clone();
        tokio::spawn(async move { me.optimiser_loop().await });
        let me = self.clone();
        tokio::spawn(async move { me.purge_loop().await });
        self.schedule_loop().await;
        Ok(())
    }

    fn link_bytes(&self) -> Vec<(String, i64)> {
        let mut totals: HashMap<String, u64> = lock(&self.finished_bytes).clone();
        for f in lock(&self.inflight).values() {
            *totals.entry(f.link.clone()).or_default() += f.progress.load(Ordering::Relaxed);
        }
        totals.into_iter().map(|(l, b)| (l, b as i64)).collect()
    }

    /// Renews leases; stops transfers that are no longer ours (canceled,
    /// taken over); returns expired leases of other nodes to the queue —
    /// but only after this node itself has been connected for a whole
    /// lease period, so that after a database outage every node has had
    /// the chance to renew before anyone takes anything over.
    async fn heartbeat_loop(self: Arc<Self>) {
        let mut connected_since: Option<Instant> = None;
        loop {
            // Only transfers that were running before the query can be
            // judged by its answer (a claim may land while it runs).
            let before: std::collections::HashSet<String> =
                lock(&self.inflight).values().map(|f| f.lease_id.clone()).collect();
            let running: Vec<String> = before.iter().cloned().collect();
            match self.store.heartbeat(&self.config.node_id, self.config.lease, &running, &self.link_bytes()).await {
                Ok(held) => {
                    let since = *connected_since.get_or_insert_with(Instant::now);
                    let held: HashMap<(String, i64), String> = held.into_iter().map(|(j, i, l)| ((j, i), l)).collect();
                    lock(&self.inflight).retain(|k, f| {
                        if held.get(k) == Some(&f.lease_id) || !before.contains(&f.lease_id) {
                            return true;
                        }
                        tracing::info!(job = %k.0, file = k.1, "transfer stopped: canceled or taken over");
                        f.task.abort();
                        false
                    });
                    if since.elapsed() >= self.config.lease {
                        match self.store.expire_leases().await {
                            Ok(0) => {}
                            Ok(n) => {
                                tracing::warn!(files = n, "took over transfers whose node stopped renewing its leases");
                                self.metrics.takeovers.inc_by(n);
                            }
                            Err(e) => tracing::warn!(error = %e, "cannot expire leases"),
                        }
                    }
                }
                Err(e) => {
                    connected_since = None;
                    self.metrics.db_errors.inc();
                    tracing::warn!(error = %e, "heartbeat failed; transfers continue, retrying");
                }
            }
            tokio::time::sleep(self.config.heartbeat).await;
        }
    }

    async fn schedule_loop(self: &Arc<Self>) {
        loop {
            if let Err(e) = self.schedule_once().await {
                self.metrics.db_errors.inc();
                tracing::warn!(error = %e, "cannot look at the queue; retrying");
            }
            tokio::time::sleep(self.config.tick).await;
        }
    }

    /// Claims what the limits allow and starts it.
    pub async fn schedule_once(self: &Arc<Self>) -> crate::store::Result<usize> {
        let mut started = 0;
        let lim = ClaimLimits {
            max_active_per_endpoint: self.config.max_active_per_endpoint,
            default_active: self.config.limits.min_active as i64,
            default_streams: 1,
        };
        for link in self.store.links_with_work().await? {
            if self.config.endpoints.as_ref().is_some_and(|e| !link_within(&link, e)) {
                continue;
            }
            while lock(&self.inflight).len() < self.config.max_transfers {
                let Some(c) = self.store.claim(&self.config.node_id, &link, self.config.lease, lim).await? else {
                    break;
                };
                self.start(c);
                started += 1;
            }
        }
        Ok(started)
    }

    fn start(self: &Arc<Self>, c: Claimed) {
        let progress = Arc::new(AtomicU64::new(0));
        let me = self.clone();
        let (key, lease_id, link) = ((c.job_id.clone(), c.idx), c.lease_id.clone(), c.link.clone());
        let p = progress.clone();
        // Registered before the task can finish and remove itself.
        let mut inflight = lock(&self.inflight);
        let task = tokio::spawn(async move { me.transfer(c, p).await });
        inflight.insert(key, InFlight { lease_id, link, task: task.abort_handle(), progress });
    }

    async fn transfer(self: Arc<Self>, c: Claimed, progress: Arc<AtomicU64>) {
        tracing::info!(
            job = %c.job_id, file = c.idx, source = %c.source, attempt = c.attempts, streams = c.streams,
            ranges = %c.ranges, takeovers = c.takeovers, "transfer started"
        );
        let started = Instant::now();
        self.metrics.started.get_or_create(&crate::metrics::link_label(&c.link)).inc();
        let timeout = Duration::from_secs(c.params.timeout_s as u64);
        let result = tokio::time::timeout(timeout, self.attempt(&c, &progress)).await;
        let seconds = started.elapsed().as_secs_f64();
        let moved = progress.load(Ordering::Relaxed);
        let outcome = match result {
            Ok(Ok(done)) => done,
            Ok(Err(failure)) => self.classify(&c, failure, moved as i64, seconds),
            Err(_) => self.classify(
                &c,
                Failure {
                    reason: format!("the attempt took longer than the job's timeout of {} s", timeout.as_secs()),
                    retry: true,
                },
                moved as i64,
                seconds,
            ),
        };
        *lock(&self.finished_bytes).entry(c.link.clone()).or_default() += moved;
        lock(&self.inflight).remove(&(c.job_id.clone(), c.idx));
        self.metrics.record(&c.link, &outcome, moved);
        // Write the result; while the database is away, keep trying.
        let mut wait = Duration::from_millis(200);
        loop {
            match self.store.finish(&c, &self.config.node_id, &outcome).await {
                Ok(None) => {
                    tracing::warn!(job = %c.job_id, file = c.idx, "lease lost before the result was recorded; discarded");
                    break;
                }
                Ok(Some(end)) => {
                    match &outcome {
                        Outcome::Done { .. } => {
                            tracing::info!(job = %c.job_id, file = c.idx, source = %c.source, "file done")
                        }
                        Outcome::Retry { reason, delay, .. } => {
                            tracing::warn!(job = %c.job_id, file = c.idx, %reason, retry_in_s = delay.as_secs_f64(), "attempt failed; will retry")
                        }
                        Outcome::Failed { reason, .. } => {
                            tracing::warn!(job = %c.job_id, file = c.idx, %reason, "file failed")
                        }
                    }
                    match end {
                        JobEnd::Finished(state) => tracing::info!(job = %c.job_id, %state, "job finished"),
                        JobEnd::StoppedEarly { failed, finished } => {
                            tracing::warn!(job = %c.job_id, failed, finished, "job stopped early: most files failed")
                        }
                        JobEnd::Running => {}
                    }
                    break;
                }
                Err(e) => {
                    self.metrics.db_errors.inc();
                    tracing::warn!(error = %e, job = %c.job_id, file = c.idx, "cannot record the result yet; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    fn classify(&self, c: &Claimed, f: Failure, bytes: i64, seconds: f64) -> Outcome {
        if f.retry && (c.attempts as u32) <= c.params.retry {
            let base = Duration::from_secs(c.params.retry_delay_s as u64);
            let delay = (base * 2u32.saturating_pow((c.attempts as u32).saturating_sub(1).min(16)))
                .min(self.config.max_retry_delay);
            Outcome::Retry { reason: f.reason, delay, bytes, seconds }
        } else if f.retry {
            Outcome::Failed { reason: format!("{} (after {} attempts)", f.reason, c.attempts), bytes, seconds }
        } else {
            Outcome::Failed { reason: f.reason, bytes, seconds }
        }
    }

    fn take_client(&self, link: &str, streams: u32, restart: Arc<DbRestart>) -> Client {
        let mut pool = lock(&self.pool);
        let lp = pool.entry(link.to_string()).or_default();
        if lp.streams != streams {
            // The optimiser moved the link: the old count's idle sessions go.
            *lp = LinkPool { streams, idle: Vec::new() };
        }
        if let Some(mut c) = lp.idle.pop() {
            c.set_restart_store(Some(restart));
            return c;
        }
        drop(pool);
        Client::new(CopyOptions {
            parallelism: Some(streams),
            timeout: self.config.timeout,
            retries: 0,
            resume: true,
            pipeline: 1,
            verify: None,
            tls: self.config.tls.clone(),
            restart_store: Some(restart),
            credentials: netrc_only(),
            ..CopyOptions::default()
        })
    }

    fn return_client(&self, link: &str, streams: u32, mut client: Client) {
        client.set_restart_store(None);
        let mut pool = lock(&self.pool);
        let lp = pool.entry(link.to_string()).or_default();
        // A client of a count the link has left is dropped (its sessions
        // close); enough idle sessions for the link's ceiling, more would
        // only idle.
        if lp.streams == streams && lp.idle.len() < self.config.limits.max_active as usize {
            lp.idle.push(client);
        }
    }

    /// One attempt at one file.
    async fn attempt(&self, c: &Claimed, progress: &Arc<AtomicU64>) -> Result<Outcome, Failure> {
        let src = complete(&c.source, &*self.creds).map_err(Failure::fatal)?;
        let dst = complete(&c.destination, &*self.creds).map_err(Failure::fatal)?;
        let restart = DbRestart::start(self.store.clone(), c);
        let mut client = self.take_client(&c.link, c.streams, restart.clone());
        let started = Instant::now();
        let stats = client.stats();
        let base = stats.bytes.load(Ordering::Relaxed);
        let progress_task = {
            let (stats, progress) = (stats.clone(), progress.clone());
            tokio::spawn(async move {
                loop {
                    progress.store(stats.bytes.load(Ordering::Relaxed).saturating_sub(base), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            })
        };
        let result = self.copy_and_verify(&mut client, c, &src, &dst, &restart).await;
        progress_task.abort();
        progress.store(stats.bytes.load(Ordering::Relaxed).saturating_sub(base), Ordering::Relaxed);
        restart.flush().await;
        let seconds = started.elapsed().as_secs_f64();
        match result {
            Ok((bytes, verified, resumed)) => {
                self.return_client(&c.link, c.streams, client);
                Ok(Outcome::Done { bytes, seconds, verified, resumed })
            }
            // The destination refused to continue from the stored ranges
            // (its partial file is gone): the next attempt starts over.
            Err(mut e) if restart.resumed() && !e.retry => {
                restart.clear_now().await;
                e.reason = format!("{} (resuming from the stored restart ranges failed; starting over)", e.reason);
                e.retry = true;
                Err(e)
            }
            // The sessions' state is unknown after a failure: the client
            // (and its connections) is dropped, not pooled.
            Err(e) => Err(e),
        }
    }

    /// Returns (bytes of the file, checksum agreed on, whether it resumed).
    async fn copy_and_verify(
        &self,
        client: &mut Client,
        c: &Claimed,
        src: &RemoteUrl,
        dst: &RemoteUrl,
        restart: &DbRestart,
    ) -> Result<(i64, Option<String>, bool), Failure> {
        let facts = client
            .connection(src)
            .await
            .map_err(Failure::client)?
            .stat(&src.path)
            .await
            .map_err(Failure::client)?
            .ok_or_else(|| Failure::fatal(format!("{src}: no such file at the source")))?;
        if facts.kind != ferry_proto::facts::FileKind::File {
            return Err(Failure::fatal(format!("{src}: not a regular file")));
        }
        if let Some(want) = c.filesize {
            if want as u64 != facts.size {
                return Err(Failure::fatal(format!(
                    "{src}: the job says {want} bytes but the source has {}",
                    facts.size
                )));
            }
        }
        let existing =
            client.connection(dst).await.map_err(Failure::client)?.stat(&dst.path).await.map_err(Failure::client)?;
        let mut copy = true;
        if let Some(d) = &existing {
            let ours = c.takeovers > 0 || c.attempts > 1 || !c.ranges.is_empty();
            if d.kind != ferry_proto::facts::FileKind::File {
                return Err(Failure::fatal(format!("{dst}: exists and is not a file")));
            }
            if d.size == facts.size && c.params.verify != Verify::None {
                // Perhaps an earlier attempt (ours or a node that died)
                // finished it: the checksums decide.
                if self.verify(client, c, src, dst).await.is_ok() {
                    tracing::info!(%dst, "already complete at the destination (checksums agree)");
                    copy = false;
                }
            } else if d.size == facts.size && ours {
                copy = false;
            }
            if copy && !c.params.overwrite {
                return Err(Failure::fatal(format!("{dst}: exists and overwrite is off")));
            }
        }
        if copy && existing.is_none() {
            self.ensure_parent(client, dst).await?;
        }
        if copy {
            client
                .copy(&Location::Remote(src.clone()), &Location::Remote(dst.clone()))
                .await
                .map_err(Failure::client)?;
        }
        // Known once the copy has asked for the stored ranges.
        let resumed = restart.resumed();
        let verified = if c.params.verify == Verify::None {
            None
        } else {
            match self.verify(client, c, src, dst).await {
                Ok(v) => Some(v),
                Err(f) => {
                    // Corrupt: the next attempt must send everything again.
                    restart.clear_now().await;
                    return Err(f);
                }
            }
        };
        Ok((facts.size as i64, verified, resumed))
    }

    /// Creates the destination's parent directories, as `mkdir -p` would
    /// (FTS3 does the same); remembers the ones it saw, so a tree's files
    /// cost one question per directory.
    async fn ensure_parent(&self, client: &mut Client, dst: &RemoteUrl) -> Result<(), Failure> {
        let Some((parent, _)) = dst.path.rsplit_once('/') else { return Ok(()) };
        if parent.is_empty() {
            return Ok(());
        }
        let key = format!("{}:{}{}", dst.host, dst.port, parent);
        if lock(&self.dirs).contains(&key) {
            return Ok(());
        }
        let c = client.connection(dst).await.map_err(Failure::client)?;
        let is_dir = |f: &Option<ferry_proto::facts::FileFacts>| {
            f.as_ref().is_some_and(|f| f.kind == ferry_proto::facts::FileKind::Dir)
        };
        if !is_dir(&c.stat(parent).await.map_err(Failure::client)?) {
            let mut path = String::new();
            for part in parent.split('/').filter(|p| !p.is_empty()) {
                path.push('/');
                path.push_str(part);
                // 550 for one that exists is fine; the stat below decides.
                c.command(&ferry_proto::command::Command::Mkd(path.clone())).await.map_err(Failure::client)?;
            }
            if !is_dir(&c.stat(parent).await.map_err(Failure::client)?) {
                return Err(Failure::fatal(format!("{dst}: cannot create the directory {parent} at the destination")));
            }
        }
        let mut dirs = lock(&self.dirs);
        if dirs.len() > 100_000 {
            dirs.clear();
        }
        dirs.insert(key);
        Ok(())
    }

    /// Compares checksums: the destination's against the job's value and,
    /// unless only the target is to be checked, against the source's.
    async fn verify(
        &self,
        client: &mut Client,
        c: &Claimed,
        src: &RemoteUrl,
        dst: &RemoteUrl,
    ) -> Result<String, Failure> {
        let given =
            c.checksum.as_deref().and_then(|s| s.split_once(':')).map(|(a, v)| (a.to_ascii_uppercase(), v.to_string()));
        let alg = match &given {
            Some((a, _)) => a.clone(),
            None => {
                let a = client.session(src).await.map_err(Failure::client)?.checksums();
                let b = client.session(dst).await.map_err(Failure::client)?.checksums();
                ["ADLER32", "MD5", "XXH128", "CRC32C", "SHA256", "SHA1", "SHA512"]
                    .into_iter()
                    .find(|x| a.iter().any(|y| y == x) && b.iter().any(|y| y == x))
                    .ok_or_else(|| {
                        Failure::fatal("cannot verify: the servers have no checksum algorithm in common".into())
                    })?
                    .to_string()
            }
        };
        let norm = |s: &str| s.trim_start_matches('0').to_ascii_lowercase();
        let d = client
            .session(dst)
            .await
            .map_err(Failure::client)?
            .checksum(&alg, &dst.path)
            .await
            .map_err(Failure::client)?;
        if let Some((_, v)) = &given {
            if norm(v) != norm(&d) {
                return Err(Failure::retry(format!("checksum mismatch: {alg} of {dst} is {d}, the job says {v}")));
            }
        }
        if c.params.verify == Verify::Both {
            let s = client
                .session(src)
                .await
                .map_err(Failure::client)?
                .checksum(&alg, &src.path)
                .await
                .map_err(Failure::client)?;
            if norm(&s) != norm(&d) {
                return Err(Failure::retry(format!(
                    "checksum mismatch: {alg} is {s} at the source, {d} at the destination"
                )));
            }
        }
        Ok(format!("{alg}:{d}"))
    }

    /// Runs the optimiser for links no node decided for within the interval.
    async fn optimiser_loop(self: Arc<Self>) {
        loop {
            tokio::time::sleep(self.config.optimiser_interval / 4).await;
            if let Err(e) = self.optimise_once().await {
                self.metrics.db_errors.inc();
                tracing::warn!(error = %e, "optimiser round failed; retrying");
            }
        }
    }

    pub async fn optimise_once(&self) -> crate::store::Result<()> {
        for l in self.store.links().await? {
            let Some(state) = self.store.take_decision(&l.link, self.config.optimiser_interval).await? else {
                continue;
            };
            let now = crate::store::now_ms();
            let since = if state.decided_ms > 0 {
                state.decided_ms
            } else {
                now - self.config.optimiser_interval.as_millis() as i64
            };
            let (bytes, attempts, ok, queued, running) = self.store.link_sample(&l.link, since).await?;
            let secs = ((now - since) as f64 / 1e3).max(0.001);
            let throughput = (bytes - state.bytes_seen).max(0) as f64 / secs;
            let prev = Setting {
                active: if state.active_target > 0 {
                    state.active_target as u32
                } else {
                    self.config.limits.min_active
                },
                streams: state.streams.max(1) as u32,
                ema: state.ema,
            };
            let sample = Sample {
                throughput,
                attempts: attempts as u32,
                succeeded: ok as u32,
                queued: queued as u64,
                running: running as u64,
            };
            let d = optimiser::decide(prev, sample, self.config.limits);
            if queued == 0 && running == 0 && state.decided_ms > 0 {
                // Idle links keep their setting without filling the table.
                continue;
            }
            self.metrics.decision(
                &l.link,
                optimiser::kind(&d.reason),
                d.setting.active,
                d.setting.streams,
                d.setting.ema,
            );
            tracing::info!(link = %l.link, active = d.setting.active, streams = d.setting.streams, reason = %d.reason, "optimiser decision");
            self.store
                .store_decision(
                    &l.link,
                    &self.config.node_id,
                    d.setting.active as i64,
                    d.setting.streams as i64,
                    d.setting.ema,
                    bytes,
                    throughput,
                    (attempts > 0).then(|| ok as f64 / attempts as f64),
                    queued,
                    running,
                    &d.reason,
                )
                .await?;
        }
        Ok(())
    }

    async fn purge_loop(self: Arc<Self>) {
        let every = (self.config.purge_after / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600));
        loop {
            match self.store.purge(self.config.purge_after).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(jobs = n, "purged finished jobs"),
                Err(e) => tracing::warn!(error = %e, "purge failed; retrying later"),
            }
            tokio::time::sleep(every).await;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn endpoint_filter() {
        let e = vec!["10.77.0.2:2811".to_string(), "10.77.0.1".to_string()];
        assert!(super::link_within("ftp://10.77.0.2:2811 -> ftp://10.77.0.1:9000", &e));
        assert!(!super::link_within("ftp://10.77.0.2:2812 -> ftp://10.77.0.1:9000", &e));
        assert!(!super::link_within("ftp://10.77.0.3:2811 -> ftp://10.77.0.1:9000", &e));
    }
}

/// The client library's credential lookup as a node uses it: `~/.netrc`
/// (or `$NETRC`) after `--credentials`; no shared environment password, no
/// prompt.
fn netrc_only() -> ferry_client::CredentialLookup {
    let mut l = ferry_client::CredentialLookup::standard();
    l.env_var = None;
    l.prompt = None;
    l
}

/// Why an attempt failed, and whether another might succeed.
#[derive(Debug)]
pub struct Failure {
    pub reason: String,
    pub retry: bool,
}

impl Failure {
    fn fatal(reason: String) -> Self {
        Failure { reason, retry: false }
    }
    fn retry(reason: String) -> Self {
        Failure { reason, retry: true }
    }
    /// The network and the servers' transient (4xx) replies are worth
    /// another attempt; a missing file, a refused login or a permanent
    /// refusal (5xx) is not.
    fn client(e: ClientError) -> Self {
        let retry = match &e {
            ClientError::Connect { .. }
            | ClientError::Timeout { .. }
            | ClientError::Closed
            | ClientError::Io(_)
            | ClientError::Data(_)
            | ClientError::Incomplete { .. }
            | ClientError::ChecksumMismatch { .. } => true,
            ClientError::Refused { reply, .. } => (400..500).contains(&reply.code.get()) || reply.code.get() == 554,
            _ => false,
        };
        Failure { reason: e.to_string(), retry }
    }
}

/// Restart ranges kept in the file's row: read when the attempt starts,
/// written (latest value wins, in the background) as markers arrive.
#[derive(Debug)]
struct DbRestart {
    store: Store,
    job_id: String,
    idx: i64,
    lease_id: String,
    initial: RangeSet,
    initial_size: Option<i64>,
    initial_mtime: Option<i64>,
    /// The source's size and mtime, once the copy has loaded the ranges.
    source: Mutex<(i64, i64)>,
    latest: watch::Sender<Option<String>>,
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    loaded_nonempty: std::sync::atomic::AtomicBool,
}

impl DbRestart {
    fn start(store: Store, c: &Claimed) -> Arc<Self> {
        let (tx, mut rx) = watch::channel(None::<String>);
        let me = Arc::new(DbRestart {
            store: store.clone(),
            job_id: c.job_id.clone(),
            idx: c.idx,
            lease_id: c.lease_id.clone(),
            initial: RangeSet::parse(&c.ranges).unwrap_or_default(),
            initial_size: c.ranges_size,
            initial_mtime: c.ranges_mtime,
            source: Mutex::new((0, 0)),
            latest: tx,
            writer: Mutex::new(None),
            loaded_nonempty: false.into(),
        });
        let w = Arc::downgrade(&me);
        let (job, idx, lease) = (c.job_id.clone(), c.idx, c.lease_id.clone());
        let handle = tokio::spawn(async move {
            let mut written: Option<String> = None;
            loop {
                let more = rx.changed().await.is_ok();
                let value = rx.borrow_and_update().clone();
                if let Some(v) = value.filter(|v| Some(v) != written.as_ref()) {
                    let (size, mtime) = match w.upgrade() {
                        Some(m) => *lock(&m.source),
                        None => (0, 0),
                    };
                    match store.save_ranges(&job, idx, &lease, &v, size, mtime).await {
                        Ok(_) => written = Some(v),
                        Err(e) => tracing::warn!(error = %e, "cannot record restart ranges yet"),
                    }
                }
                if !more {
                    break;
                }
            }
        });
        *lock(&me.writer) = Some(handle);
        me
    }

    fn resumed(&self) -> bool {
        self.loaded_nonempty.load(Ordering::Relaxed)
    }

    /// Waits until the last ranges are written.
    async fn flush(&self) {
        let v = self.latest.borrow().clone();
        if let Some(v) = v {
            let (size, mtime) = *lock(&self.source);
            let _ = self.store.save_ranges(&self.job_id, self.idx, &self.lease_id, &v, size, mtime).await;
        }
    }

    async fn clear_now(&self) {
        self.latest.send_replace(Some(String::new()));
        let _ = self.store.save_ranges(&self.job_id, self.idx, &self.lease_id, "", 0, 0).await;
    }
}

impl Drop for DbRestart {
    fn drop(&mut self) {
        if let Some(h) = lock(&self.writer).take() {
            h.abort();
        }
    }
}

impl RestartStore for DbRestart {
    fn load(&self, _source: &str, _destination: &str, size: u64, modified: i64) -> RangeSet {
        *lock(&self.source) = (size as i64, modified);
        let same_source = self.initial_size.is_none_or(|s| s == size as i64 || s == 0)
            && self.initial_mtime.is_none_or(|m| m == modified || m == 0);
        if same_source && !self.initial.is_empty() {
            self.loaded_nonempty.store(true, Ordering::Relaxed);
            self.initial.clone()
        } else {
            RangeSet::new()
        }
    }

    fn save(&self, _source: &str, _destination: &str, ranges: &RangeSet) {
        self.latest.send_replace(Some(ranges.to_string()));
    }

    fn clear(&self, _source: &str, _destination: &str) {
        self.latest.send_replace(Some(String::new()));
    }
}
