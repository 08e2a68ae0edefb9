//! The listening socket and the limits applied before a session starts.

use crate::config::ServerConfig;
use crate::data::PortAllocator;
use crate::users::UserDb;
use anyhow::Context;
use ferry_io::root::Root;
use ferry_proto::session::{PortPolicy, SessionConfig};
use ferry_proto::transport::TransportName;
use ferry_proto::Reply;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

impl ServerContext {
    /// The users file as last loaded.
    pub fn users(&self) -> Arc<UserDb> {
        self.users.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The TLS configuration as last loaded.
    pub fn tls(&self) -> Option<Arc<crate::tls::ServerTls>> {
        self.tls.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Controls a running server from outside its accept loop (signals).
#[derive(Debug, Clone)]
pub struct ServerHandle {
    ctx: Arc<ServerContext>,
}

impl ServerHandle {
    /// Re-reads the users file and the TLS certificate, key, client CA and
    /// certificate map (SIGHUP). Sessions already logged in keep what they
    /// were granted; new logins and handshakes use the new files. If a
    /// file is unreadable or invalid, the old settings stay and the error
    /// is returned. Says what was reloaded.
    pub fn reload(&self) -> anyhow::Result<String> {
        let c = &self.ctx.config;
        let users = match &c.users {
            Some(p) => Some(UserDb::load(p)?),
            None => None,
        };
        let tls = crate::tls::ServerTls::from_config(c).context("TLS configuration")?;
        let mut done = Vec::new();
        if let Some(users) = users {
            done.push(format!(
                "{} users from {}",
                users.len(),
                c.users.as_ref().map(|p| p.display().to_string()).unwrap_or_default()
            ));
            *self.ctx.users.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(users);
        }
        match tls {
            Some(t) if self.ctx.session_config.tls_available => {
                done.push("the TLS certificate".to_string());
                *self.ctx.tls.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(t));
            }
            // AUTH TLS is in FEAT from the start or not at all.
            Some(_) => done.push("(TLS was not enabled at start: restart to enable it)".to_string()),
            None => {}
        }
        Ok(if done.is_empty() { "nothing to reload".to_string() } else { done.join(", ") })
    }
}

/// Shared by every session of one server.
#[derive(Debug)]
pub(crate) struct ServerContext {
    pub config: ServerConfig,
    pub session_config: SessionConfig,
    pub root: Arc<Root>,
    /// Replaced whole on SIGHUP ([`ServerHandle::reload`]); a session
    /// takes the current one when it needs it.
    users: RwLock<Arc<UserDb>>,
    pub ports: PortAllocator,
    /// The transport of data channels (`--data-transport`; TCP).
    pub transport: Arc<dyn ferry_io::transport::Transport>,
    pub checksums: crate::checksums::ChecksumCache,
    /// Certificate, verifier and cert map when TLS is configured;
    /// replaced on SIGHUP (sessions keep the one they started with).
    tls: RwLock<Option<Arc<crate::tls::ServerTls>>>,
    /// Becomes true when the server stops accepting: idle sessions close
    /// (421), busy ones after their transfer.
    pub draining: watch::Receiver<bool>,
    pub lockout: crate::lockout::LoginLockout,
    pub passwords: crate::passwords::PasswordChecker,
    pub metrics: Arc<crate::metrics::ServerMetrics>,
    /// The `syncfs` passes of `BSTO SYNC` batches, folded across sessions
    /// (counted in `metrics`).
    pub batch_passes: Arc<ferry_io::root::SyncPasses>,
    /// Checksums computed at once (`max_checksums`).
    pub checksum_slots: Arc<Semaphore>,
    /// Data connections open on the whole server (`max_data_connections`).
    pub data_connections: Arc<Semaphore>,
    /// Where transfers run: their blocking threads (one per data
    /// connection) come from this runtime's pool, so however many idle
    /// data connections clients open, the control channels' file work
    /// (CWD, SIZE, MKD...) on the main runtime's pool never waits for them.
    pub data_runtime: DataRuntime,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// The runtime transfers run on (see [`ServerContext::data_runtime`]).
#[derive(Debug)]
pub(crate) struct DataRuntime(Option<tokio::runtime::Runtime>);

impl DataRuntime {
    fn new(max_connections: usize) -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            // One blocking thread per data connection, plus each
            // transfer's own (opening files, committing, stream copies).
            .max_blocking_threads(max_connections + 64)
            .thread_name("ferry-data")
            .enable_all()
            .build()?;
        Ok(Self(Some(rt)))
    }

    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.0.as_ref().expect("present until dropped").handle()
    }
}

impl Drop for DataRuntime {
    fn drop(&mut self) {
        // Dropped from async code at shutdown: do not block there.
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// Held for a session's lifetime; releases its place in the limits on drop.
#[derive(Debug)]
pub(crate) struct SessionSlot {
    ctx: Arc<ServerContext>,
    ip: IpAddr,
    _permit: OwnedSemaphorePermit,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.ctx.metrics.sessions.dec();
        let mut map = self.ctx.per_ip.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

struct Accepting {
    listener: TcpListener,
    ctx: Arc<ServerContext>,
    sessions: Arc<Semaphore>,
}

#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    ctx: Arc<ServerContext>,
    sessions: Arc<Semaphore>,
    drain: watch::Sender<bool>,
}

impl Server {
    /// Opens the root, loads users and binds the control port.
    pub async fn bind(config: ServerConfig) -> anyhow::Result<Self> {
        // Each session holds a control socket, a passive listener and data
        // sockets; raise the descriptor limit to what the system allows so
        // `max_sessions` is the limit that bites, not EMFILE.
        match rlimit::increase_nofile_limit(u64::MAX) {
            Ok(n) if (n as usize) < config.max_sessions * 4 => tracing::warn!(
                limit = n,
                max_sessions = config.max_sessions,
                "the open-file limit is low for max_sessions; expect refused connections"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
        }
        let mut root = Root::open(&config.root)
            .with_context(|| format!("cannot open the served directory {}", config.root.display()))?;
        root.set_partial_expiry(config.partial_expiry());
        let users = match &config.users {
            Some(p) => UserDb::load(p)?,
            None => UserDb::empty(),
        };
        let tls = crate::tls::ServerTls::from_config(&config).context("TLS configuration")?;
        if let Some(t) = &tls {
            tracing::info!(
                require_tls = config.require_tls,
                require_protected_data = config.require_protected_data,
                client_certificates = config.tls_client_ca.is_some(),
                mapped_subjects = t.cert_map.len(),
                "TLS enabled (AUTH TLS)"
            );
        }
        let transport = ferry_io::transport::by_name(&config.data_transport)
            .filter(|t| ferry_io::transport::networked().contains(&t.name()))
            .with_context(|| {
                format!(
                    "unknown data transport '{}': this server has {}",
                    config.data_transport,
                    ferry_io::transport::networked().join(", ")
                )
            })?;
        // QUIC is TLS 1.3 with the server's certificate: without one it
        // cannot be offered (docs/transports.md).
        let needs_certificate = |name: &str| name == "quic";
        if tls.is_none() && needs_certificate(transport.name()) {
            anyhow::bail!(
                "data transport '{}' needs a TLS certificate: give --tls-cert and --tls-key",
                transport.name()
            );
        }
        let offered: Vec<TransportName> = ferry_io::transport::networked()
            .into_iter()
            .filter(|t| tls.is_some() || !needs_certificate(t))
            .filter_map(TransportName::parse)
            .collect();
        let session_config = SessionConfig {
            banner: config
                .banner
                .clone()
                .unwrap_or_else(|| format!("Ferry {} GridFTP server ready.", env!("CARGO_PKG_VERSION"))),
            anonymous: config.anonymous.into(),
            max_login_attempts: config.max_login_attempts.max(1),
            port_policy: if config.allow_third_party { PortPolicy::AnyUnprivileged } else { PortPolicy::PeerOnly },
            marker_interval_secs: config.marker_interval_secs,
            tls_available: tls.is_some(),
            require_tls: config.require_tls,
            require_protected_data: config.require_protected_data,
            max_file_size: config.max_file_size,
            batch: config.batch,
            transports: offered,
            default_transport: TransportName::parse(transport.name()).unwrap_or_default(),
            default_transport_unasked: config.data_transport_for_all,
            peer_certificates: tls.as_ref().is_some_and(|t| t.peer_trust.is_some()),
            striped: config.striped(),
            ..SessionConfig::default()
        };
        let listener =
            TcpListener::bind(config.listen).await.with_context(|| format!("cannot listen on {}", config.listen))?;
        let sessions = Arc::new(Semaphore::new(config.max_sessions.max(1)));
        let (drain, draining) = watch::channel(false);
        let data_runtime = DataRuntime::new(config.max_data_connections).context("starting the data runtime")?;
        let metrics: Arc<crate::metrics::ServerMetrics> = Arc::default();
        let counted = metrics.clone();
        let batch_passes = Arc::new(ferry_io::root::SyncPasses::new().with_hook(move |_| {
            counted.batch_sync_passes.inc();
        }));
        let ctx = Arc::new(ServerContext {
            checksum_slots: Arc::new(Semaphore::new(config.max_checksums.max(1))),
            data_connections: Arc::new(Semaphore::new(config.max_data_connections.max(1))),
            data_runtime,
            ports: PortAllocator::new(config.passive_ports.map(|r| (r.low, r.high))),
            transport,
            checksums: crate::checksums::ChecksumCache::new(4096),
            tls: RwLock::new(tls.map(Arc::new)),
            draining,
            passwords: crate::passwords::PasswordChecker::new(),
            lockout: crate::lockout::LoginLockout::new(
                config.login_lockout_failures,
                std::time::Duration::from_secs(config.login_lockout_secs),
            ),
            config,
            session_config,
            root: Arc::new(root),
            users: RwLock::new(Arc::new(users)),
            metrics,
            batch_passes,
            per_ip: Mutex::new(HashMap::new()),
        });
        Ok(Self { listener, ctx, sessions, drain })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The counters `ferry serve --metrics` exposes.
    pub fn metrics(&self) -> Arc<crate::metrics::ServerMetrics> {
        self.ctx.metrics.clone()
    }

    pub fn user_count(&self) -> usize {
        self.ctx.users().len()
    }

    pub fn handle(&self) -> ServerHandle {
        ServerHandle { ctx: self.ctx.clone() }
    }

    /// Accepts connections until `shutdown` resolves; then stops
    /// accepting, lets transfers in progress finish (idle sessions are
    /// told 421 at once) for up to `shutdown_grace_secs`, and returns.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
        let Server { listener, ctx, sessions, drain } = self;
        let max = ctx.config.max_sessions.max(1);
        let grace = Duration::from_secs(ctx.config.shutdown_grace_secs);
        Self::accept(listener, ctx, sessions.clone(), shutdown).await?;
        let _ = drain.send(true);
        let busy = max - sessions.available_permits();
        if busy > 0 {
            tracing::info!(
                sessions = busy,
                grace_s = grace.as_secs(),
                "no longer accepting; waiting for transfers to finish"
            );
        }
        let all_done = async {
            while sessions.available_permits() < max {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        if tokio::time::timeout(grace, all_done).await.is_err() {
            let left = max - sessions.available_permits();
            tracing::warn!(sessions = left, "grace period over; exiting with transfers still running (they resume)");
        }
        Ok(())
    }

    async fn accept(
        listener: TcpListener,
        ctx: Arc<ServerContext>,
        sessions: Arc<Semaphore>,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> anyhow::Result<()> {
        let this = Accepting { listener, ctx, sessions };
        tokio::pin!(shutdown);
        let this = &this;
        loop {
            let (mut stream, peer) = tokio::select! {
                r = this.listener.accept() => match r {
                    Ok(x) => x,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::error!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = &mut shutdown => return Ok(()),
            };
            let refuse = |text: &str| Reply::new(ferry_proto::ReplyCode::SERVICE_UNAVAILABLE, text);
            let Ok(permit) = this.sessions.clone().try_acquire_owned() else {
                tracing::warn!(%peer, "refused: too many sessions");
                let r = refuse("Too many sessions on this server; try again later.");
                tokio::spawn(async move {
                    let _ = stream.write_all(&r.to_bytes()).await;
                });
                continue;
            };
            let ip = peer.ip().to_canonical();
            if let Some(left) = this.ctx.lockout.locked(ip) {
                tracing::warn!(%peer, "refused: address locked out after failed logins");
                let r = refuse(&crate::lockout::refusal(left));
                drop(permit);
                tokio::spawn(async move {
                    let _ = stream.write_all(&r.to_bytes()).await;
                });
                continue;
            }
            {
                let mut map = this.ctx.per_ip.lock().unwrap_or_else(|e| e.into_inner());
                let n = map.entry(ip).or_insert(0);
                if *n >= this.ctx.config.max_sessions_per_ip {
                    drop(map);
                    tracing::warn!(%peer, "refused: too many sessions from this address");
                    let r = refuse("Too many sessions from your address; try again later.");
                    tokio::spawn(async move {
                        let _ = stream.write_all(&r.to_bytes()).await;
                    });
                    continue;
                }
                *n += 1;
            }
            this.ctx.metrics.sessions.inc();
            let slot = SessionSlot { ctx: this.ctx.clone(), ip, _permit: permit };
            tokio::spawn(crate::control::serve(stream, peer, this.ctx.clone(), slot));
        }
    }
}
