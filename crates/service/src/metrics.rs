//! Prometheus metrics (`/metrics`, OpenMetrics text).
//!
//! Two kinds: what this node did (attempts, bytes, decisions it made,
//! takeovers, database errors — counters that live in the process), and
//! the state of the whole queue (files by state, bytes done, each link's
//! setting and smoothed throughput), read from the database at scrape
//! time so every node answers the same for the shared queue.

use crate::store::{Outcome, Store};
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

pub type Labels = Vec<(String, String)>;

pub fn link_label(link: &str) -> Labels {
    vec![("link".into(), link.into())]
}

#[derive(Debug)]
pub struct ServiceMetrics {
    registry: Registry,
    pub started: Family<Labels, Counter>,
    pub attempts: Family<Labels, Counter>,
    pub bytes: Family<Labels, Counter>,
    pub decisions: Family<Labels, Counter>,
    pub takeovers: Counter,
    pub db_errors: Counter,
}

impl Default for ServiceMetrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("ferry_service");
        let started = Family::<Labels, Counter>::default();
        let attempts = Family::<Labels, Counter>::default();
        let bytes = Family::<Labels, Counter>::default();
        let decisions = Family::<Labels, Counter>::default();
        let takeovers = Counter::default();
        let db_errors = Counter::default();
        registry.register("transfers_started", "Transfers this node started, by link", started.clone());
        registry.register(
            "attempts",
            "Attempts this node finished, by link and result (done, retry, failed)",
            attempts.clone(),
        );
        registry.register("node_bytes", "Bytes this node moved, by link", bytes.clone());
        registry.register(
            "optimiser_decisions",
            "Optimiser decisions this node made, by link and kind",
            decisions.clone(),
        );
        registry.register(
            "takeovers",
            "Files this node returned to the queue after their node's lease expired",
            takeovers.clone(),
        );
        registry.register("database_errors", "Database calls that failed and were retried", db_errors.clone());
        ServiceMetrics { registry, started, attempts, bytes, decisions, takeovers, db_errors }
    }
}

impl ServiceMetrics {
    pub fn record(&self, link: &str, outcome: &Outcome, moved: u64) {
        let result = match outcome {
            Outcome::Done { .. } => "done",
            Outcome::Retry { .. } => "retry",
            Outcome::Failed { .. } => "failed",
        };
        let mut l = link_label(link);
        self.bytes.get_or_create(&l).inc_by(moved);
        l.push(("result".into(), result.into()));
        self.attempts.get_or_create(&l).inc();
    }

    pub fn decision(&self, link: &str, kind: &str, _active: u32, _streams: u32, _ema: f64) {
        let mut l = link_label(link);
        l.push(("kind".into(), kind.into()));
        self.decisions.get_or_create(&l).inc();
    }

    /// The whole exposition: this node's counters, then the queue's state.
    pub async fn render(&self, store: &Store) -> Result<String, crate::store::StoreError> {
        let mut queue = Registry::with_prefix("ferry_service");
        let files = Family::<Labels, Gauge>::default();
        let done_bytes = Family::<Labels, Gauge>::default();
        let active = Family::<Labels, Gauge>::default();
        let streams = Family::<Labels, Gauge>::default();
        let ema = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        for (link, state, n, b) in store.file_totals().await? {
            let mut l = link_label(&link);
            if state == "done" {
                done_bytes.get_or_create(&l).set(b);
            }
            l.push(("state".into(), state));
            files.get_or_create(&l).set(n);
        }
        for l in store.links().await? {
            let lab = link_label(&l.link);
            active.get_or_create(&lab).set(l.active_target);
            streams.get_or_create(&lab).set(l.streams);
            ema.get_or_create(&lab).set(l.ema);
        }
        queue.register("files", "Files in the queue by link and state (queued, active, done, failed, canceled)", files);
        queue.register("done_bytes", "Bytes of files done, by link", done_bytes);
        queue.register("link_active_target", "Transfers the optimiser allows at once on the link", active);
        queue.register("link_streams", "Streams per transfer the optimiser chose for the link", streams);
        queue.register(
            "link_throughput_bytes_per_second",
            "The link's throughput, exponential moving average over optimiser intervals",
            ema,
        );
        let mut out = String::new();
        encode_registry(&mut out, &self.registry).map_err(|e| crate::store::StoreError::Url(e.to_string()))?;
        encode_registry(&mut out, &queue).map_err(|e| crate::store::StoreError::Url(e.to_string()))?;
        encode_eof(&mut out).map_err(|e| crate::store::StoreError::Url(e.to_string()))?;
        Ok(out)
    }
}
