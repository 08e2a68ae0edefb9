//! The service's database: SQLite for one embedded node, PostgreSQL when
//! several nodes share the queue.
//!
//! One SQL text serves both (sqlx's `Any` driver, `$N` parameters, portable
//! types), with two differences kept in [`Dialect`]: PostgreSQL claims rows
//! with `FOR UPDATE SKIP LOCKED` and locks a link's row while it counts and
//! claims on it, SQLite — one node, one writer — runs every statement on a
//! single connection instead. Every value reaches the database as a bound
//! parameter, never as SQL text, so quotes and semicolons in URLs or
//! metadata are just characters.
//!
//! The lease protocol (docs/service.md): a node claims a queued file by
//! setting `state = 'active'`, its id, a fresh `lease_id` and
//! `lease_until_ms`; it renews all its leases with each heartbeat; any node
//! that has been connected for a full lease period returns files whose
//! lease expired to the queue, keeping their restart ranges. Every later
//! write by the claiming node names the `lease_id`, so a node that lost its
//! lease (a long pause, a partition) cannot record a result twice.

use crate::auth::{self, Principal};
use crate::job::{CheckedJob, JobParams};
use serde::Serialize;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AnyPool, Row};
use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{0}")]
    Url(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A random identifier (job ids look like UUIDs, as FTS3's do).
pub fn new_id() -> String {
    let s = auth::new_secret("");
    format!("{}-{}-{}-{}-{}", &s[0..8], &s[8..12], &s[12..16], &s[16..20], &s[20..32])
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// The versioned migrations, embedded in the binary and applied at start.
fn migrator() -> Migrator {
    let m = |version: i64, description: &'static str, sql: &'static str| {
        Migration::new(version, Cow::Borrowed(description), MigrationType::Simple, Cow::Borrowed(sql), false)
    };
    Migrator {
        migrations: Cow::Owned(vec![m(1, "initial", include_str!("../migrations/0001_initial.sql"))]),
        ..Migrator::DEFAULT
    }
}

#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    pub dialect: Dialect,
}

/// Summary of a job, as listed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct JobSummary {
    pub job_id: String,
    pub owner: String,
    pub state: String,
    pub files_total: i64,
    pub created_ms: i64,
    pub finished_ms: Option<i64>,
    pub reason: Option<String>,
    pub counts: Counts,
    pub bytes_done: i64,
    pub params: serde_json::Value,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Counts {
    pub queued: i64,
    pub active: i64,
    pub done: i64,
    pub failed: i64,
    pub canceled: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FileView {
    pub index: i64,
    pub source: String,
    pub destination: String,
    pub state: String,
    pub attempts: i64,
    pub filesize: Option<i64>,
    pub bytes: Option<i64>,
    pub seconds: Option<f64>,
    pub checksum: Option<String>,
    pub verified: Option<String>,
    pub reason: Option<String>,
    pub node: Option<String>,
    pub resumed: i64,
    pub takeovers: i64,
    pub ranges: String,
}

/// A file a node has claimed.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub job_id: String,
    pub idx: i64,
    pub lease_id: String,
    pub owner: String,
    pub source: String,
    pub destination: String,
    pub link: String,
    pub checksum: Option<String>,
    pub filesize: Option<i64>,
    pub attempts: i64,
    pub ranges: String,
    pub ranges_size: Option<i64>,
    pub ranges_mtime: Option<i64>,
    pub params: JobParams,
    /// Streams for this transfer: the job's, else the link's.
    pub streams: u32,
    pub takeovers: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkState {
    pub link: String,
    pub active_target: i64,
    pub streams: i64,
    pub ema: f64,
    pub bytes_seen: i64,
    pub decided_ms: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DecisionRow {
    pub link: String,
    pub at_ms: i64,
    pub node: String,
    pub active: i64,
    pub streams: i64,
    pub throughput: f64,
    pub ema: f64,
    pub success_rate: Option<f64>,
    pub queued: i64,
    pub running: i64,
    pub reason: String,
}

/// How an attempt ended, as the node reports it.
#[derive(Debug, Clone)]
pub enum Outcome {
    Done {
        bytes: i64,
        seconds: f64,
        verified: Option<String>,
        resumed: bool,
    },
    /// Try again after `delay` (the ranges stay).
    Retry {
        reason: String,
        delay: Duration,
        bytes: i64,
        seconds: f64,
    },
    Failed {
        reason: String,
        bytes: i64,
        seconds: f64,
    },
}

/// Limits a claim respects.
#[derive(Debug, Clone, Copy)]
pub struct ClaimLimits {
    pub max_active_per_endpoint: i64,
    pub default_active: i64,
    pub default_streams: i64,
}

/// What became of a job after one of its files ended.
#[derive(Debug, Clone, PartialEq)]
pub enum JobEnd {
    Running,
    Finished(String),
    StoppedEarly { failed: i64, finished: i64 },
}

fn summary(r: &AnyRow) -> Result<JobSummary> {
    let params: String = r.try_get("params")?;
    Ok(JobSummary {
        job_id: r.try_get("id")?,
        owner: r.try_get("owner")?,
        state: r.try_get("state")?,
        files_total: r.try_get("files_total")?,
        created_ms: r.try_get("created_ms")?,
        finished_ms: r.try_get("finished_ms")?,
        reason: r.try_get("reason")?,
        counts: Counts::default(),
        bytes_done: 0,
        params: serde_json::from_str(&params).unwrap_or(serde_json::Value::Null),
    })
}

/// Placeholders `($k+1, ..., $k+n)`.
fn tuple(start: usize, n: usize) -> String {
    let v: Vec<String> = (start + 1..=start + n).map(|i| format!("${i}")).collect();
    format!("({})", v.join(", "))
}

impl Store {
    /// Connects (`sqlite:PATH`, `postgres://...`) and applies migrations.
    pub async fn connect(url: &str) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let (dialect, url) = if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.trim_start_matches("//");
            if path.is_empty() {
                return Err(StoreError::Url("sqlite: needs a path, e.g. sqlite:/var/lib/ferry/service.db".into()));
            }
            (Dialect::Sqlite, format!("sqlite://{path}?mode=rwc"))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (Dialect::Postgres, url.to_string())
        } else {
            return Err(StoreError::Url(format!("--db {url:?}: use sqlite:PATH or postgres://...")));
        };
        let opts = AnyPoolOptions::new().acquire_timeout(Duration::from_secs(30));
        let pool = match dialect {
            // One writer: every statement in turn, no SQLITE_BUSY between
            // our own connections. WAL lets other processes (ferry service
            // token add) read and write beside a running node.
            Dialect::Sqlite => {
                opts.max_connections(1)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            use sqlx::Executor;
                            conn.execute("PRAGMA journal_mode = WAL").await?;
                            conn.execute("PRAGMA busy_timeout = 10000").await?;
                            conn.execute("PRAGMA synchronous = NORMAL").await?;
                            Ok(())
                        })
                    })
                    .connect(&url)
                    .await?
            }
            Dialect::Postgres => opts.max_connections(8).connect(&url).await?,
        };
        migrator().run(&pool).await?;
        Ok(Store { pool, dialect })
    }

    fn skip_locked(&self) -> &'static str {
        match self.dialect {
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
            Dialect::Sqlite => "",
        }
    }

    fn for_update(&self) -> &'static str {
        match self.dialect {
            Dialect::Postgres => " FOR UPDATE",
            Dialect::Sqlite => "",
        }
    }

    /// A quick round trip, to tell whether the database answers.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    // ---- tokens and sessions ----------------------------------------------

    /// Creates a token for `user`; returns it (the only time it is seen).
    pub async fn add_token(&self, user: &str, admin: bool) -> Result<String> {
        let token = auth::new_secret("fy_");
        sqlx::query("INSERT INTO tokens (token_hash, username, admin, created_ms) VALUES ($1, $2, $3, $4)")
            .bind(auth::hash(&token))
            .bind(user)
            .bind(admin as i64)
            .bind(now_ms())
            .execute(&self.pool)
            .await?;
        Ok(token)
    }

    /// Removes every token of `user`; returns how many.
    pub async fn revoke_tokens(&self, user: &str) -> Result<u64> {
        let n = sqlx::query("DELETE FROM tokens WHERE username = $1").bind(user).execute(&self.pool).await?;
        sqlx::query("DELETE FROM web_sessions WHERE username = $1").bind(user).execute(&self.pool).await?;
        Ok(n.rows_affected())
    }

    pub async fn principal(&self, token: &str) -> Result<Option<Principal>> {
        let row = sqlx::query("SELECT username, admin FROM tokens WHERE token_hash = $1")
            .bind(auth::hash(token))
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => Some(Principal { user: r.try_get("username")?, admin: r.try_get::<i64, _>("admin")? != 0 }),
            None => None,
        })
    }

    /// Starts a dashboard session; returns (session id, CSRF token).
    pub async fn new_session(&self, p: &Principal, ttl: Duration) -> Result<(String, String)> {
        let (id, csrf) = (auth::new_secret("fs_"), auth::new_secret(""));
        sqlx::query("DELETE FROM web_sessions WHERE expires_ms < $1").bind(now_ms()).execute(&self.pool).await?;
        sqlx::query(
            "INSERT INTO web_sessions (id_hash, username, admin, csrf, expires_ms) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(auth::hash(&id))
        .bind(&p.user)
        .bind(p.admin as i64)
        .bind(&csrf)
        .bind(now_ms() + ttl.as_millis() as i64)
        .execute(&self.pool)
        .await?;
        Ok((id, csrf))
    }

    /// The session's user and CSRF token, if it is live.
    pub async fn session(&self, id: &str) -> Result<Option<(Principal, String)>> {
        let row = sqlx::query("SELECT username, admin, csrf FROM web_sessions WHERE id_hash = $1 AND expires_ms > $2")
            .bind(auth::hash(id))
            .bind(now_ms())
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => Some((
                Principal { user: r.try_get("username")?, admin: r.try_get::<i64, _>("admin")? != 0 },
                r.try_get("csrf")?,
            )),
            None => None,
        })
    }

    pub async fn end_session(&self, id: &str) -> Result<()> {
        sqlx::query("DELETE FROM web_sessions WHERE id_hash = $1").bind(auth::hash(id)).execute(&self.pool).await?;
        Ok(())
    }

    // ---- jobs ---------------------------------------------------------------

    /// Stores a checked job in one transaction: all its files or nothing.
    /// Files go in as multi-row inserts of a few hundred rows each, so a
    /// 100,000-file job is a few hundred statements, not 100,000.
    pub async fn insert_job(&self, owner: &str, job: &CheckedJob) -> Result<String> {
        const ROWS: usize = 500;
        const COLS: usize = 15;
        let id = new_id();
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO jobs (id, owner, state, params, metadata, files_total, created_ms) \
             VALUES ($1, $2, 'queued', $3, $4, $5, $6)",
        )
        .bind(&id)
        .bind(owner)
        .bind(serde_json::to_string(&job.params).unwrap_or_default())
        .bind(job.metadata.clone())
        .bind(job.files.len() as i64)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        for (chunk_no, chunk) in job.files.chunks(ROWS).enumerate() {
            let values: Vec<String> = (0..chunk.len()).map(|i| tuple(i * COLS, COLS)).collect();
            let sql = format!(
                "INSERT INTO files (job_id, idx, owner, priority, submitted_ms, source, destination, link, src_se, \
                 dst_se, checksum, filesize, metadata, activity, state) VALUES {}",
                values.join(", ")
            );
            let mut q = sqlx::query(&sql);
            for (i, f) in chunk.iter().enumerate() {
                q = q
                    .bind(id.clone())
                    .bind((chunk_no * ROWS + i) as i64)
                    .bind(owner.to_string())
                    .bind(job.params.priority as i64)
                    .bind(now)
                    .bind(f.source.clone())
                    .bind(f.destination.clone())
                    .bind(f.link.clone())
                    .bind(f.src_se.clone())
                    .bind(f.dst_se.clone())
                    .bind(f.checksum.as_ref().map(|(a, v)| format!("{a}:{v}")))
                    .bind(f.filesize.map(|s| s as i64))
                    .bind(f.metadata.clone())
                    .bind(f.activity.clone())
                    .bind("queued");
            }
            q.execute(&mut *tx).await?;
        }
        let mut links: Vec<&str> = job.files.iter().map(|f| f.link.as_str()).collect();
        links.sort_unstable();
        links.dedup();
        for link in links {
            sqlx::query(
                "INSERT INTO links (link, active_target, streams) VALUES ($1, 0, 0) ON CONFLICT (link) DO NOTHING",
            )
            .bind(link)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(id)
    }

    async fn counts(&self, job_id: &str) -> Result<(Counts, i64)> {
        let rows = sqlx::query(
            "SELECT state, COUNT(*) AS n, CAST(COALESCE(SUM(CASE WHEN state = 'done' THEN bytes ELSE 0 END), 0) AS BIGINT) AS b \
             FROM files WHERE job_id = $1 GROUP BY state",
        )
        .bind(job_id)
        .fetch_all(&self.pool)
        .await?;
        let mut c = Counts::default();
        let mut bytes = 0;
        for r in rows {
            let n: i64 = r.try_get("n")?;
            bytes += r.try_get::<i64, _>("b")?;
            match r.try_get::<String, _>("state")?.as_str() {
                "queued" => c.queued = n,
                "active" => c.active = n,
                "done" => c.done = n,
                "failed" => c.failed = n,
                _ => c.canceled += n,
            }
        }
        Ok((c, bytes))
    }

    /// Jobs visible to `p`, newest first.
    pub async fn list_jobs(&self, p: &Principal, limit: i64) -> Result<Vec<JobSummary>> {
        let rows = if p.admin {
            sqlx::query("SELECT * FROM jobs ORDER BY created_ms DESC LIMIT $1")
                .bind(limit)
                .fetch_all(&self.pool)
                .await?
        } else {
            sqlx::query("SELECT * FROM jobs WHERE owner = $1 ORDER BY created_ms DESC LIMIT $2")
                .bind(&p.user)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?
        };
        let mut out = Vec::new();
        for r in rows {
            let mut s = summary(&r)?;
            (s.counts, s.bytes_done) = self.counts(&s.job_id).await?;
            out.push(s);
        }
        Ok(out)
    }

    /// A job, if it exists and `p` may see it.
    pub async fn job(&self, p: &Principal, id: &str) -> Result<Option<JobSummary>> {
        let Some(r) = sqlx::query("SELECT * FROM jobs WHERE id = $1").bind(id).fetch_optional(&self.pool).await? else {
            return Ok(None);
        };
        let mut s = summary(&r)?;
        if !p.may_touch(&s.owner) {
            return Ok(None);
        }
        (s.counts, s.bytes_done) = self.counts(&s.job_id).await?;
        Ok(Some(s))
    }

    pub async fn files(&self, job_id: &str, offset: i64, limit: i64) -> Result<Vec<FileView>> {
        let rows = sqlx::query("SELECT * FROM files WHERE job_id = $1 ORDER BY idx LIMIT $2 OFFSET $3")
            .bind(job_id)
            .bind(limit)
            .bind(offset)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(FileView {
                    index: r.try_get("idx")?,
                    source: r.try_get("source")?,
                    destination: r.try_get("destination")?,
                    state: r.try_get("state")?,
                    attempts: r.try_get("attempts")?,
                    filesize: r.try_get("filesize")?,
                    bytes: r.try_get("bytes")?,
                    seconds: r.try_get("seconds")?,
                    checksum: r.try_get("checksum")?,
                    verified: r.try_get("verified")?,
                    reason: r.try_get("reason")?,
                    node: r.try_get("node")?,
                    resumed: r.try_get("resumed")?,
                    takeovers: r.try_get("takeovers")?,
                    ranges: r.try_get("ranges")?,
                })
            })
            .collect()
    }

    /// Cancels a job: waiting files at once, running ones when their node
    /// next renews its leases. Returns the job's new state.
    pub async fn cancel_job(&self, id: &str) -> Result<String> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE files SET state = 'canceled', reason = 'canceled by the user', finished_ms = $2 \
             WHERE job_id = $1 AND state IN ('queued', 'active')",
        )
        .bind(id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE jobs SET state = 'canceled', finished_ms = $2, reason = 'canceled by the user' \
             WHERE id = $1 AND state IN ('queued', 'active')",
        )
        .bind(id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let state: String =
            sqlx::query("SELECT state FROM jobs WHERE id = $1").bind(id).fetch_one(&mut *tx).await?.try_get("state")?;
        tx.commit().await?;
        Ok(state)
    }

    /// Queues a finished job's failed and canceled files again.
    pub async fn retry_job(&self, id: &str) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query(
            "UPDATE files SET state = 'queued', attempts = 0, not_before_ms = 0, reason = NULL, finished_ms = NULL \
             WHERE job_id = $1 AND state IN ('failed', 'canceled')",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if n > 0 {
            sqlx::query("UPDATE jobs SET state = 'queued', finished_ms = NULL, reason = NULL WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(n)
    }

    // ---- nodes, leases, claims ----------------------------------------------

    pub async fn register_node(&self, id: &str, host: &str) -> Result<()> {
        let now = now_ms();
        // A node restarted under the same name takes its row over.
        sqlx::query(
            "INSERT INTO nodes (id, host, started_ms, heartbeat_ms) VALUES ($1, $2, $3, $3) ON CONFLICT (id) DO UPDATE \
             SET host = excluded.host, started_ms = excluded.started_ms, heartbeat_ms = excluded.heartbeat_ms",
        )
            .bind(id)
            .bind(host)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Renews the node's heartbeat and every lease it holds, records its
    /// per-link byte counters, and returns the files it still holds
    /// (job id, index, lease id): anything else it is running was canceled
    /// or taken over and must stop.
    ///
    /// Only the leases named in `running` are renewed: a claim whose
    /// answer was lost (the connection died as it committed) names a file
    /// this node never started, and that lease must run out so another
    /// node takes the file.
    pub async fn heartbeat(
        &self,
        node: &str,
        lease: Duration,
        running: &[String],
        link_bytes: &[(String, i64)],
    ) -> Result<Vec<(String, i64, String)>> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE nodes SET heartbeat_ms = $2 WHERE id = $1").bind(node).bind(now).execute(&mut *tx).await?;
        for chunk in running.chunks(500) {
            let sql = format!(
                "UPDATE files SET lease_until_ms = $2 WHERE node = $1 AND state = 'active' AND lease_id IN {}",
                tuple(2, chunk.len())
            );
            let mut q = sqlx::query(&sql).bind(node).bind(now + lease.as_millis() as i64);
            for l in chunk {
                q = q.bind(l.clone());
            }
            q.execute(&mut *tx).await?;
        }
        for (link, bytes) in link_bytes {
            sqlx::query(
                "INSERT INTO link_nodes (link, node, bytes, updated_ms) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (link, node) DO UPDATE SET bytes = excluded.bytes, updated_ms = excluded.updated_ms",
            )
            .bind(link)
            .bind(node)
            .bind(*bytes)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        let rows = sqlx::query("SELECT job_id, idx, lease_id FROM files WHERE node = $1 AND state = 'active'")
            .bind(node)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(|r| Ok((r.try_get("job_id")?, r.try_get("idx")?, r.try_get("lease_id")?))).collect()
    }

    /// Returns files whose lease expired to the queue (their restart ranges
    /// stay with them). Returns how many.
    pub async fn expire_leases(&self) -> Result<u64> {
        let n = sqlx::query(
            "UPDATE files SET state = 'queued', node = NULL, lease_id = NULL, lease_until_ms = NULL, \
             takeovers = takeovers + 1, attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END \
             WHERE state = 'active' AND lease_until_ms < $1",
        )
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(n.rows_affected())
    }

    /// Links with files ready to run.
    pub async fn links_with_work(&self) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT l.link FROM links l WHERE EXISTS (SELECT 1 FROM files f WHERE f.link = l.link \
             AND f.state = 'queued' AND f.not_before_ms <= $1)",
        )
        .bind(now_ms())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get("link")?)).collect()
    }

    /// Claims one file on `link` for `node`, if the link's and its
    /// endpoints' limits allow another transfer. The user with the fewest
    /// transfers running on the link goes first (fair share); within a
    /// user, higher priority, then older jobs, then file order.
    pub async fn claim(&self, node: &str, link: &str, lease: Duration, lim: ClaimLimits) -> Result<Option<Claimed>> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        let sql = format!("SELECT active_target, streams FROM links WHERE link = $1{}", self.for_update());
        let Some(l) = sqlx::query(&sql).bind(link).fetch_optional(&mut *tx).await? else {
            return Ok(None);
        };
        let mut target: i64 = l.try_get("active_target")?;
        if target <= 0 {
            target = lim.default_active;
        }
        let mut link_streams: i64 = l.try_get("streams")?;
        if link_streams <= 0 {
            link_streams = lim.default_streams;
        }
        let active: i64 = sqlx::query("SELECT COUNT(*) AS n FROM files WHERE link = $1 AND state = 'active'")
            .bind(link)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        if active >= target {
            return Ok(None);
        }
        let ends = sqlx::query("SELECT src_se, dst_se FROM files WHERE link = $1 LIMIT 1")
            .bind(link)
            .fetch_one(&mut *tx)
            .await?;
        let (src_se, dst_se): (String, String) = (ends.try_get("src_se")?, ends.try_get("dst_se")?);
        for se in [&src_se, &dst_se] {
            let n: i64 =
                sqlx::query("SELECT COUNT(*) AS n FROM files WHERE state = 'active' AND (src_se = $1 OR dst_se = $1)")
                    .bind(se)
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get("n")?;
            if n >= lim.max_active_per_endpoint {
                return Ok(None);
            }
        }
        // Fair share: users with work waiting, by how much they run now.
        let waiting = sqlx::query(
            "SELECT DISTINCT j.owner FROM jobs j WHERE j.state IN ('queued', 'active') AND EXISTS \
             (SELECT 1 FROM files f WHERE f.job_id = j.id AND f.link = $1 AND f.state = 'queued' AND f.not_before_ms <= $2)",
        )
        .bind(link)
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        let running =
            sqlx::query("SELECT owner, COUNT(*) AS n FROM files WHERE link = $1 AND state = 'active' GROUP BY owner")
                .bind(link)
                .fetch_all(&mut *tx)
                .await?;
        let mut owners: Vec<(i64, String)> = Vec::new();
        for w in &waiting {
            let o: String = w.try_get("owner")?;
            let mut n = 0;
            for r in &running {
                if r.try_get::<String, _>("owner")? == o {
                    n = r.try_get("n")?;
                }
            }
            owners.push((n, o));
        }
        owners.sort();
        let lease_id = new_id();
        for (_, owner) in owners {
            let sql = format!(
                "UPDATE files SET state = 'active', node = $1, lease_id = $2, lease_until_ms = $3, \
                 attempts = attempts + 1, started_ms = $4 \
                 WHERE (job_id, idx) = (SELECT job_id, idx FROM files WHERE link = $5 AND state = 'queued' \
                 AND owner = $6 AND not_before_ms <= $4 ORDER BY priority DESC, submitted_ms, job_id, idx LIMIT 1{}) \
                 RETURNING job_id, idx, owner, source, destination, link, checksum, filesize, attempts, ranges, \
                 ranges_size, ranges_mtime, takeovers",
                self.skip_locked()
            );
            let Some(r) = sqlx::query(&sql)
                .bind(node)
                .bind(&lease_id)
                .bind(now + lease.as_millis() as i64)
                .bind(now)
                .bind(link)
                .bind(&owner)
                .fetch_optional(&mut *tx)
                .await?
            else {
                continue;
            };
            let job_id: String = r.try_get("job_id")?;
            let params: String = sqlx::query("SELECT params FROM jobs WHERE id = $1")
                .bind(&job_id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("params")?;
            sqlx::query("UPDATE jobs SET state = 'active' WHERE id = $1 AND state = 'queued'")
                .bind(&job_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            let params: JobParams = serde_json::from_str(&params)
                .map_err(|e| StoreError::Url(format!("job {job_id} has unreadable parameters: {e}")))?;
            let streams = params.streams.unwrap_or(link_streams as u32);
            return Ok(Some(Claimed {
                job_id,
                idx: r.try_get("idx")?,
                lease_id,
                owner: r.try_get("owner")?,
                source: r.try_get("source")?,
                destination: r.try_get("destination")?,
                link: r.try_get("link")?,
                checksum: r.try_get("checksum")?,
                filesize: r.try_get("filesize")?,
                attempts: r.try_get("attempts")?,
                ranges: r.try_get("ranges")?,
                ranges_size: r.try_get("ranges_size")?,
                ranges_mtime: r.try_get("ranges_mtime")?,
                params,
                streams,
                takeovers: r.try_get("takeovers")?,
            }));
        }
        Ok(None)
    }

    /// Records the restart ranges of a running transfer (only while the
    /// lease is still this node's).
    pub async fn save_ranges(
        &self,
        job_id: &str,
        idx: i64,
        lease_id: &str,
        ranges: &str,
        size: i64,
        mtime: i64,
    ) -> Result<bool> {
        let n = sqlx::query(
            "UPDATE files SET ranges = $4, ranges_size = $5, ranges_mtime = $6 \
             WHERE job_id = $1 AND idx = $2 AND lease_id = $3 AND state = 'active'",
        )
        .bind(job_id)
        .bind(idx)
        .bind(lease_id)
        .bind(ranges)
        .bind(size)
        .bind(mtime)
        .execute(&self.pool)
        .await?;
        Ok(n.rows_affected() == 1)
    }

    /// Records how an attempt ended. Returns `None` when the lease is no
    /// longer this node's (the file was canceled or taken over): nothing is
    /// recorded then, so no file is ever counted twice.
    pub async fn finish(&self, c: &Claimed, node: &str, outcome: &Outcome) -> Result<Option<JobEnd>> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        let (ok, bytes, seconds, reason) = match outcome {
            Outcome::Done { bytes, seconds, .. } => (1, *bytes, *seconds, None),
            Outcome::Retry { reason, bytes, seconds, .. } | Outcome::Failed { reason, bytes, seconds } => {
                (0, *bytes, *seconds, Some(reason.clone()))
            }
        };
        let res = match outcome {
            Outcome::Done { verified, resumed, .. } => {
                sqlx::query(
                    "UPDATE files SET state = 'done', bytes = $4, seconds = $5, verified = $6, finished_ms = $7, \
                     reason = NULL, ranges = '', resumed = resumed + $8, lease_until_ms = NULL \
                     WHERE job_id = $1 AND idx = $2 AND lease_id = $3 AND state = 'active'",
                )
                .bind(&c.job_id)
                .bind(c.idx)
                .bind(&c.lease_id)
                .bind(bytes)
                .bind(seconds)
                .bind(verified.clone())
                .bind(now)
                .bind(*resumed as i64)
                .execute(&mut *tx)
                .await?
            }
            Outcome::Retry { reason, delay, .. } => {
                sqlx::query(
                    "UPDATE files SET state = 'queued', node = NULL, lease_id = NULL, lease_until_ms = NULL, \
                     reason = $4, not_before_ms = $5 \
                     WHERE job_id = $1 AND idx = $2 AND lease_id = $3 AND state = 'active'",
                )
                .bind(&c.job_id)
                .bind(c.idx)
                .bind(&c.lease_id)
                .bind(reason)
                .bind(now + delay.as_millis() as i64)
                .execute(&mut *tx)
                .await?
            }
            Outcome::Failed { reason, .. } => {
                sqlx::query(
                    "UPDATE files SET state = 'failed', reason = $4, finished_ms = $5, lease_until_ms = NULL \
                     WHERE job_id = $1 AND idx = $2 AND lease_id = $3 AND state = 'active'",
                )
                .bind(&c.job_id)
                .bind(c.idx)
                .bind(&c.lease_id)
                .bind(reason)
                .bind(now)
                .execute(&mut *tx)
                .await?
            }
        };
        if res.rows_affected() != 1 {
            return Ok(None);
        }
        sqlx::query(
            "INSERT INTO attempts (id, job_id, idx, link, node, finished_ms, ok, bytes, seconds, reason) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(new_id())
        .bind(&c.job_id)
        .bind(c.idx)
        .bind(&c.link)
        .bind(node)
        .bind(now)
        .bind(ok as i64)
        .bind(bytes)
        .bind(seconds)
        .bind(reason)
        .execute(&mut *tx)
        .await?;
        let end = self.settle_job(&mut tx, &c.job_id, now).await?;
        tx.commit().await?;
        Ok(Some(end))
    }

    /// Ends the job when nothing is left to run, or stops it early when
    /// most of what finished failed: once at least five files (or all, if
    /// fewer) have failed for good and they are more than half of the files
    /// finished, the rest are canceled instead of burning through them.
    ///
    /// The job's row is locked first. Without it, two nodes finishing a
    /// job's last two files at once each count the other's file as still
    /// active (under PostgreSQL's READ COMMITTED neither sees the other's
    /// uncommitted update), both return `Running`, and the job stays
    /// `active` for ever with every file done. With the lock the second
    /// waits for the first to commit, and its count, a new snapshot, sees
    /// both files.
    async fn settle_job(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>, job_id: &str, now: i64) -> Result<JobEnd> {
        sqlx::query(&format!("SELECT id FROM jobs WHERE id = $1{}", self.for_update()))
            .bind(job_id)
            .fetch_optional(&mut **tx)
            .await?;
        let rows = sqlx::query("SELECT state, COUNT(*) AS n FROM files WHERE job_id = $1 GROUP BY state")
            .bind(job_id)
            .fetch_all(&mut **tx)
            .await?;
        let mut c = Counts::default();
        for r in &rows {
            let n: i64 = r.try_get("n")?;
            match r.try_get::<String, _>("state")?.as_str() {
                "queued" => c.queued = n,
                "active" => c.active = n,
                "done" => c.done = n,
                "failed" => c.failed = n,
                _ => c.canceled += n,
            }
        }
        let total = c.queued + c.active + c.done + c.failed + c.canceled;
        let finished = c.done + c.failed;
        if c.queued + c.active > 0 {
            if c.failed >= total.min(5) && c.failed * 2 > finished {
                let reason = format!("stopped early: {} of the {finished} files finished so far failed", c.failed);
                sqlx::query(
                    "UPDATE files SET state = 'canceled', reason = $2, finished_ms = $3 \
                     WHERE job_id = $1 AND state = 'queued'",
                )
                .bind(job_id)
                .bind(&reason)
                .bind(now)
                .execute(&mut **tx)
                .await?;
                sqlx::query(
                    "UPDATE jobs SET state = 'failed', reason = $2, finished_ms = $3 WHERE id = $1 \
                     AND state IN ('queued', 'active')",
                )
                .bind(job_id)
                .bind(&reason)
                .bind(now)
                .execute(&mut **tx)
                .await?;
                return Ok(JobEnd::StoppedEarly { failed: c.failed, finished });
            }
            return Ok(JobEnd::Running);
        }
        let state = if c.failed == 0 && c.canceled == 0 {
            "done"
        } else if c.done == 0 {
            "failed"
        } else {
            "partial"
        };
        sqlx::query("UPDATE jobs SET state = $2, finished_ms = $3 WHERE id = $1 AND state IN ('queued', 'active')")
            .bind(job_id)
            .bind(state)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        Ok(JobEnd::Finished(state.to_string()))
    }

    // ---- the optimiser's data -------------------------------------------------

    /// Takes the right to decide for `link` now, if no node has decided
    /// within `interval` (compare-and-set on `next_decision_ms`).
    pub async fn take_decision(&self, link: &str, interval: Duration) -> Result<Option<LinkState>> {
        let now = now_ms();
        let n = sqlx::query("UPDATE links SET next_decision_ms = $2 WHERE link = $1 AND next_decision_ms <= $3")
            .bind(link)
            .bind(now + interval.as_millis() as i64)
            .bind(now)
            .execute(&self.pool)
            .await?;
        if n.rows_affected() != 1 {
            return Ok(None);
        }
        self.link(link).await
    }

    pub async fn link(&self, link: &str) -> Result<Option<LinkState>> {
        let r = sqlx::query("SELECT * FROM links WHERE link = $1").bind(link).fetch_optional(&self.pool).await?;
        r.map(|r| link_state(&r)).transpose()
    }

    pub async fn links(&self) -> Result<Vec<LinkState>> {
        let rows = sqlx::query("SELECT * FROM links ORDER BY link").fetch_all(&self.pool).await?;
        rows.iter().map(link_state).collect()
    }

    /// What the optimiser needs to know about a link since `since_ms`:
    /// bytes all nodes have moved on it in total, attempts ended and
    /// succeeded since then, files queued and running.
    pub async fn link_sample(&self, link: &str, since_ms: i64) -> Result<(i64, i64, i64, i64, i64)> {
        let bytes: i64 =
            sqlx::query("SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS b FROM link_nodes WHERE link = $1")
                .bind(link)
                .fetch_one(&self.pool)
                .await?
                .try_get("b")?;
        let a = sqlx::query(
            "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(ok), 0) AS BIGINT) AS ok FROM attempts WHERE link = $1 AND finished_ms > $2",
        )
        .bind(link)
        .bind(since_ms)
        .fetch_one(&self.pool)
        .await?;
        let q = sqlx::query(
            "SELECT CAST(COALESCE(SUM(CASE WHEN state = 'queued' THEN 1 ELSE 0 END), 0) AS BIGINT) AS q, \
             CAST(COALESCE(SUM(CASE WHEN state = 'active' THEN 1 ELSE 0 END), 0) AS BIGINT) AS r \
             FROM files WHERE link = $1 AND state IN ('queued', 'active')",
        )
        .bind(link)
        .fetch_one(&self.pool)
        .await?;
        Ok((bytes, a.try_get("n")?, a.try_get("ok")?, q.try_get("q")?, q.try_get("r")?))
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn store_decision(
        &self,
        link: &str,
        node: &str,
        active: i64,
        streams: i64,
        ema: f64,
        bytes_seen: i64,
        throughput: f64,
        success_rate: Option<f64>,
        queued: i64,
        running: i64,
        reason: &str,
    ) -> Result<()> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE links SET active_target = $2, streams = $3, ema = $4, bytes_seen = $5, decided_ms = $6 WHERE link = $1",
        )
        .bind(link)
        .bind(active)
        .bind(streams)
        .bind(ema)
        .bind(bytes_seen)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO decisions (id, link, at_ms, node, active, streams, throughput, ema, success_rate, queued, running, reason) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(new_id())
        .bind(link)
        .bind(now)
        .bind(node)
        .bind(active)
        .bind(streams)
        .bind(throughput)
        .bind(ema)
        .bind(success_rate)
        .bind(queued)
        .bind(running)
        .bind(reason)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The newest decisions (of one link, or all), newest first.
    pub async fn decisions(&self, link: Option<&str>, limit: i64) -> Result<Vec<DecisionRow>> {
        let rows = match link {
            Some(l) => {
                sqlx::query("SELECT * FROM decisions WHERE link = $1 ORDER BY at_ms DESC LIMIT $2")
                    .bind(l)
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?
            }
            None => {
                sqlx::query("SELECT * FROM decisions ORDER BY at_ms DESC LIMIT $1")
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?
            }
        };
        rows.iter()
            .map(|r| {
                Ok(DecisionRow {
                    link: r.try_get("link")?,
                    at_ms: r.try_get("at_ms")?,
                    node: r.try_get("node")?,
                    active: r.try_get("active")?,
                    streams: r.try_get("streams")?,
                    throughput: r.try_get("throughput")?,
                    ema: r.try_get("ema")?,
                    success_rate: r.try_get("success_rate")?,
                    queued: r.try_get("queued")?,
                    running: r.try_get("running")?,
                    reason: r.try_get("reason")?,
                })
            })
            .collect()
    }

    // ---- metrics and housekeeping ---------------------------------------------

    /// Files by state and link, and bytes done by link.
    pub async fn file_totals(&self) -> Result<Vec<(String, String, i64, i64)>> {
        let rows = sqlx::query(
            "SELECT link, state, COUNT(*) AS n, CAST(COALESCE(SUM(CASE WHEN state = 'done' THEN bytes ELSE 0 END), 0) AS BIGINT) AS b \
             FROM files GROUP BY link, state",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok((r.try_get("link")?, r.try_get("state")?, r.try_get("n")?, r.try_get("b")?))).collect()
    }

    /// Nodes and their last heartbeat.
    pub async fn nodes(&self) -> Result<Vec<(String, String, i64)>> {
        let rows = sqlx::query("SELECT id, host, heartbeat_ms FROM nodes ORDER BY heartbeat_ms DESC LIMIT 100")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok((r.try_get("id")?, r.try_get("host")?, r.try_get("heartbeat_ms")?))).collect()
    }

    /// Deletes jobs that finished before `age` ago, with their files and
    /// attempts, and decisions and dead nodes older than that. Returns the
    /// number of jobs removed.
    pub async fn purge(&self, age: Duration) -> Result<u64> {
        let cutoff = now_ms() - age.as_millis() as i64;
        let ids = sqlx::query(
            "SELECT id FROM jobs WHERE state IN ('done', 'partial', 'failed', 'canceled') AND finished_ms < $1 LIMIT 1000",
        )
        .bind(cutoff)
        .fetch_all(&self.pool)
        .await?;
        let mut n = 0;
        for r in ids {
            let id: String = r.try_get("id")?;
            let mut tx = self.pool.begin().await?;
            for sql in [
                "DELETE FROM attempts WHERE job_id = $1",
                "DELETE FROM files WHERE job_id = $1",
                "DELETE FROM jobs WHERE id = $1",
            ] {
                sqlx::query(sql).bind(&id).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            n += 1;
        }
        sqlx::query("DELETE FROM decisions WHERE at_ms < $1").bind(cutoff).execute(&self.pool).await?;
        sqlx::query("DELETE FROM nodes WHERE heartbeat_ms < $1").bind(cutoff).execute(&self.pool).await?;
        Ok(n)
    }

    /// Rows in the tables, for tests that check nothing was stored.
    pub async fn row_counts(&self) -> Result<(i64, i64)> {
        let j: i64 = sqlx::query("SELECT COUNT(*) AS n FROM jobs").fetch_one(&self.pool).await?.try_get("n")?;
        let f: i64 = sqlx::query("SELECT COUNT(*) AS n FROM files").fetch_one(&self.pool).await?.try_get("n")?;
        Ok((j, f))
    }
}

fn link_state(r: &AnyRow) -> Result<LinkState> {
    Ok(LinkState {
        link: r.try_get("link")?,
        active_target: r.try_get("active_target")?,
        streams: r.try_get("streams")?,
        ema: r.try_get("ema")?,
        bytes_seen: r.try_get("bytes_seen")?,
        decided_ms: r.try_get("decided_ms")?,
    })
}
