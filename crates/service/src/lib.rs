//! Ferry's transfer service: queued, retried, verified and optimised
//! replication jobs for many users, on SQLite (one embedded node) or on
//! PostgreSQL (many nodes sharing one queue). See docs/service.md.
//!
//! * [`job`]: the FTS3-shaped job JSON and its checks;
//! * [`store`]: the database — jobs, files, leases, restart ranges,
//!   optimiser state — behind one SQL text for both engines;
//! * [`node`]: a node's loops — claim, copy through `ferry_client`,
//!   verify, heartbeat, take over, optimise, purge;
//! * [`optimiser`]: the per-link concurrency decision, a pure function;
//! * [`api`], [`dashboard`], [`metrics`]: what users and operators see;
//! * [`auth`], [`credentials`]: tokens for users, passwords for servers.

pub mod api;
pub mod auth;
pub mod credentials;
pub mod dashboard;
pub mod https;
pub mod job;
pub mod metrics;
pub mod node;
pub mod optimiser;
pub mod store;

use std::net::SocketAddr;
use std::sync::Arc;

/// Runs a node and its HTTP listener (HTTPS when `tls` is given) until the
/// process ends.
pub async fn serve(
    store: store::Store,
    listener: tokio::net::TcpListener,
    config: node::NodeConfig,
    creds: Arc<dyn credentials::Credentials>,
    max_files: usize,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> anyhow::Result<()> {
    let metrics = Arc::new(metrics::ServiceMetrics::default());
    let state = Arc::new(api::AppState {
        store: store.clone(),
        metrics: metrics.clone(),
        max_files,
        session_ttl: std::time::Duration::from_secs(8 * 3600),
    });
    let node = node::Node::new(store, config, creds, metrics);
    let app = api::router(state);
    let addr: SocketAddr = listener.local_addr()?;
    tracing::info!(%addr, "service listening");
    let http = async move {
        match tls {
            Some(tls) => https::serve(listener, app, tls).await,
            None => Ok(axum::serve(listener, app).await?),
        }
    };
    tokio::select! {
        r = http => r?,
        r = node.run() => r?,
    }
    Ok(())
}
