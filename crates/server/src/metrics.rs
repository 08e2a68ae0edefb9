//! Prometheus metrics of one `ferry serve` (`--metrics ADDR`): sessions,
//! logins, transfers and bytes by direction and result. Counters only move
//! at the few places that already log (session start and end, the login
//! verdict, the transfer log line), so the data path is untouched.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;

type Labels = Vec<(&'static str, &'static str)>;

/// Stream-mode uploads without `ALLO` whose end the server watched the
/// control connection for (up to `STREAM_COMMIT_GRACE`, 5 ms) before
/// committing: the only wait a small plain-FTP upload can add. Process-wide
/// (one server per process), counted where the watch runs.
pub static STREAM_COMMIT_WATCHES: std::sync::LazyLock<Counter> = std::sync::LazyLock::new(Counter::default);

#[derive(Debug)]
pub struct ServerMetrics {
    registry: Registry,
    pub sessions: Gauge,
    pub logins: Family<Labels, Counter>,
    pub transfers: Family<Labels, Counter>,
    pub bytes: Family<Labels, Counter>,
    /// `syncfs` passes run for `BSTO SYNC` batches (all sessions' folded).
    pub batch_sync_passes: Counter,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("ferry_server");
        let sessions = Gauge::default();
        let logins = Family::<Labels, Counter>::default();
        let transfers = Family::<Labels, Counter>::default();
        let bytes = Family::<Labels, Counter>::default();
        registry.register("sessions", "Control connections open now", sessions.clone());
        registry.register("logins", "Login attempts by result (ok, failed)", logins.clone());
        registry.register("transfers", "Finished transfers by direction (send, receive) and result", transfers.clone());
        registry.register("bytes", "Payload bytes of finished transfers by direction", bytes.clone());
        registry.register(
            "stream_commit_watches",
            "Stream uploads without ALLO whose end waited up to 5 ms for a closing control connection",
            STREAM_COMMIT_WATCHES.clone(),
        );
        let batch_sync_passes = Counter::default();
        registry.register(
            "batch_sync_passes",
            "Durability passes (syncfs) run for BSTO SYNC batches, all sessions' folded",
            batch_sync_passes.clone(),
        );
        ServerMetrics { registry, sessions, logins, transfers, bytes, batch_sync_passes }
    }
}

impl ServerMetrics {
    pub fn login(&self, ok: bool) {
        self.logins.get_or_create(&vec![("result", if ok { "ok" } else { "failed" })]).inc();
    }

    pub fn transfer(&self, direction: &'static str, complete: bool, bytes: u64) {
        let result = if complete { "complete" } else { "failed" };
        self.transfers.get_or_create(&vec![("direction", direction), ("result", result)]).inc();
        self.bytes.get_or_create(&vec![("direction", direction)]).inc_by(bytes);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// Serves `GET /metrics` on `addr` until the process ends; returns the
/// bound address (port 0 picks one).
pub async fn serve(addr: SocketAddr, metrics: Arc<ServerMetrics>) -> std::io::Result<SocketAddr> {
    use axum::http::header;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let m = metrics.clone();
            async move {
                ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], m.render())
            }
        }),
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the metrics endpoint stopped");
        }
    });
    Ok(bound)
}
