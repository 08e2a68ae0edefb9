//! The listening socket and the limits applied before a session starts.

use crate::config::ServerConfig;
use crate::data::PortAllocator;
use crate::users::UserDb;
use anyhow::Context;
use ferry_io::root::Root;
use ferry_proto::session::{PortPolicy, SessionConfig};
use ferry_proto::Reply;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Shared by every session of one server.
#[derive(Debug)]
pub(crate) struct ServerContext {
    pub config: ServerConfig,
    pub session_config: SessionConfig,
    pub root: Arc<Root>,
    pub users: UserDb,
    pub ports: PortAllocator,
    pub checksums: crate::checksums::ChecksumCache,
    /// Certificate, verifier and cert map when TLS is configured.
    pub tls: Option<crate::tls::ServerTls>,
    pub lockout: crate::lockout::LoginLockout,
    pub passwords: crate::passwords::PasswordChecker,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
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
        let mut map = self.ctx.per_ip.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    ctx: Arc<ServerContext>,
    sessions: Arc<Semaphore>,
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
        let root = Root::open(&config.root)
            .with_context(|| format!("cannot open the served directory {}", config.root.display()))?;
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
            ..SessionConfig::default()
        };
        let listener =
            TcpListener::bind(config.listen).await.with_context(|| format!("cannot listen on {}", config.listen))?;
        let sessions = Arc::new(Semaphore::new(config.max_sessions.max(1)));
        let ctx = Arc::new(ServerContext {
            ports: PortAllocator::new(config.passive_ports),
            checksums: crate::checksums::ChecksumCache::new(4096),
            tls,
            passwords: crate::passwords::PasswordChecker::new(),
            lockout: crate::lockout::LoginLockout::new(
                config.login_lockout_failures,
                std::time::Duration::from_secs(config.login_lockout_secs),
            ),
            config,
            session_config,
            root: Arc::new(root),
            users,
            per_ip: Mutex::new(HashMap::new()),
        });
        Ok(Self { listener, ctx, sessions })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn user_count(&self) -> usize {
        self.ctx.users.len()
    }

    /// Accepts connections until `shutdown` resolves.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
        tokio::pin!(shutdown);
        loop {
            let (mut stream, peer) = tokio::select! {
                r = self.listener.accept() => match r {
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
            let Ok(permit) = self.sessions.clone().try_acquire_owned() else {
                tracing::warn!(%peer, "refused: too many sessions");
                let r = refuse("Too many sessions on this server; try again later.");
                tokio::spawn(async move {
                    let _ = stream.write_all(&r.to_bytes()).await;
                });
                continue;
            };
            let ip = peer.ip().to_canonical();
            if let Some(left) = self.ctx.lockout.locked(ip) {
                tracing::warn!(%peer, "refused: address locked out after failed logins");
                let r = refuse(&crate::lockout::refusal(left));
                drop(permit);
                tokio::spawn(async move {
                    let _ = stream.write_all(&r.to_bytes()).await;
                });
                continue;
            }
            {
                let mut map = self.ctx.per_ip.lock().unwrap_or_else(|e| e.into_inner());
                let n = map.entry(ip).or_insert(0);
                if *n >= self.ctx.config.max_sessions_per_ip {
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
            let slot = SessionSlot { ctx: self.ctx.clone(), ip, _permit: permit };
            tokio::spawn(crate::control::serve(stream, peer, self.ctx.clone(), slot));
        }
    }
}
