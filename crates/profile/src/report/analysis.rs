//! The numbers the report's tables show, derived from the samples: the
//! FTPProfiler paper's per-host table (peak and average load, I/O transfers
//! per second, packets per second, kernel share of CPU) and a line per
//! data stream.
//!
//! Averages are weighted by each sample's `dt`, so a late tick (a loaded
//! machine) does not count more than its share of time.

use serde::{Deserialize, Serialize};

use super::{Profile, Side, TransferSeries};
use crate::bottleneck::{self, Bottleneck, Hint};
use crate::facts::Window;
use crate::sampler::HostProfile;
use crate::streams::StreamSeries;
use crate::verdict::{self, Verdict};

/// Time-weighted average and highest value of one quantity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub avg: f64,
    pub peak: f64,
}

fn stat(values: impl IntoIterator<Item = (f64, f64)>) -> Stat {
    let (mut sum, mut weight, mut peak) = (0.0, 0.0, f64::NEG_INFINITY);
    for (v, dt) in values {
        sum += v * dt;
        weight += dt;
        peak = peak.max(v);
    }
    if weight <= 0.0 {
        return Stat::default();
    }
    Stat { avg: sum / weight, peak }
}

/// One core over the whole run, in percent of that core.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CoreSummary {
    pub core: u32,
    pub busy: Stat,
    pub user_avg: f64,
    pub system_avg: f64,
    pub softirq_avg: f64,
    pub irq_avg: f64,
    pub iowait_avg: f64,
}

/// One network interface that carried traffic.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceSummary {
    pub name: String,
    pub rx_packets_per_s: Stat,
    pub tx_packets_per_s: Stat,
    pub rx_bytes_per_s: Stat,
    pub tx_bytes_per_s: Stat,
}

/// The paper's table for one host. CPU percentages are of all cores
/// together unless the field is per core.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSummary {
    pub hostname: String,
    pub samples: usize,
    pub duration_s: f64,
    pub load_1min: Stat,
    pub cpu_busy_percent: Stat,
    pub cpu_user_percent: Stat,
    pub cpu_system_percent: Stat,
    pub cpu_iowait_percent: Stat,
    pub cpu_softirq_percent: Stat,
    pub cpu_irq_percent: Stat,
    /// Kernel time (system + irq + softirq) as a share of busy time.
    pub kernel_share_percent: f64,
    pub cores: Vec<CoreSummary>,
    pub busiest_core: Option<u32>,
    pub context_switches_per_s: Stat,
    pub interrupts_per_s: Stat,
    pub io_transfers_per_s: Stat,
    pub disk_read_bytes_per_s: Stat,
    pub disk_write_bytes_per_s: Stat,
    pub interfaces: Vec<InterfaceSummary>,
    pub busiest_interface: Option<String>,
    pub tcp_out_segs_per_s: Stat,
    pub tcp_retrans_segs_per_s: Stat,
    /// Retransmitted segments as a share of segments sent.
    pub retrans_percent: f64,
    pub memory_available_min_bytes: u64,
    pub dirty_peak_bytes: u64,
    pub writeback_peak_bytes: u64,
    pub process_cpu_percent: Option<Stat>,
    pub process_rss_peak_bytes: Option<u64>,
    pub perf_kernel_percent: Option<f64>,
}

/// One data stream over its life, from one side's `TCP_INFO`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    pub side: Option<Side>,
    pub id: u64,
    pub label: String,
    /// This side sent more than it received, so its congestion state is
    /// the one that matters.
    pub sender: bool,
    pub samples: usize,
    pub rtt_ms: Stat,
    pub min_rtt_ms: f64,
    /// Congestion window in segments.
    pub cwnd: Stat,
    pub snd_mss: u32,
    pub total_retrans: u32,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    /// Payload rate over the sampled life of the stream (bytes/s).
    pub throughput_bytes_per_s: f64,
    pub delivery_rate_peak: f64,
    /// Share of the stream's busy time it was limited by the peer's window.
    pub rwnd_limited_percent: f64,
    /// Share of busy time limited by its own send buffer.
    pub sndbuf_limited_percent: f64,
    /// Share of samples in which the kernel flagged the delivery rate as
    /// application-limited (nothing to send).
    pub app_limited_percent: f64,
    /// "receiver window", "send buffer", "application", "congestion window",
    /// or "receiver" for the receiving side of a stream.
    pub limited_by: String,
}

/// The whole transfer, from the caller's progress samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransferSummary {
    pub label: String,
    pub bytes: u64,
    pub duration_s: f64,
    pub avg_bytes_per_s: f64,
    pub peak_bytes_per_s: f64,
    /// The verdict for this transfer's own time window (its name only;
    /// the profiled transfer's full verdict is `analysis.verdict`).
    pub limit: String,
}

/// How one of the FTPProfiler tables bears on the verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableNote {
    /// The table ("peak load", "I/O transactions per second", ...).
    pub table: String,
    pub note: String,
}

/// Everything derived from a [`Profile`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub client: Option<HostSummary>,
    pub server: Option<HostSummary>,
    pub transfers: Vec<TransferSummary>,
    pub streams: Vec<StreamSummary>,
    /// What limited the profiled transfer (the first in `transfers`).
    pub verdict: Option<Verdict>,
    /// The FTPProfiler comparison of variants (`--compare-memory`).
    pub comparison: Option<Bottleneck>,
    pub hints: Vec<Hint>,
    /// How each table of the report bears on the verdict.
    pub table_notes: Vec<TableNote>,
}

impl Analysis {
    pub fn host(&self, side: Side) -> Option<&HostSummary> {
        match side {
            Side::Client => self.client.as_ref(),
            Side::Server => self.server.as_ref(),
        }
    }
}

pub(crate) fn analyze(profile: &Profile) -> Analysis {
    let mut a = Analysis {
        client: profile.client.as_ref().map(summarize_host),
        server: profile.server.as_ref().map(summarize_host),
        transfers: profile.transfers.iter().map(summarize_transfer).collect(),
        streams: Vec::new(),
        verdict: None,
        comparison: profile.comparison.as_ref().and_then(bottleneck::bottleneck),
        hints: Vec::new(),
        table_notes: Vec::new(),
    };
    for side in [Side::Client, Side::Server] {
        if let Some(h) = profile.host(side) {
            a.streams.extend(h.streams.iter().map(|s| summarize_stream(s, Some(side))));
        }
    }
    for (i, t) in profile.transfers.iter().enumerate() {
        let v = judge_transfer(profile, t, i == 0);
        if let Some(v) = &v {
            a.transfers[i].limit = v.name.clone();
        }
        if i == 0 {
            a.verdict = v;
        }
    }
    a.hints = bottleneck::hints(profile, &a);
    bottleneck::reconcile(&mut a.hints, a.verdict.as_ref());
    a.table_notes = super::notes::table_notes(profile, &a);
    a
}

/// The verdict for one transfer's window. The profiled transfer (`main`)
/// falls back on the run's settings for what it read and wrote.
fn judge_transfer(profile: &Profile, t: &TransferSeries, main: bool) -> Option<Verdict> {
    let w = Window::of_transfer(t)?;
    let st = &profile.meta.settings;
    let is = |p: &Option<String>, dev: &str| p.as_deref().is_some_and(|p| p.ends_with(dev));
    let ctx = verdict::Context {
        reader: st.reader.unwrap_or(Side::Server),
        reads_file: t.reads_file.unwrap_or(!(main && is(&st.source, "/dev/zero"))),
        writes_file: t.writes_file.unwrap_or(!(main && is(&st.destination, "/dev/null"))),
        comparison: if main { profile.comparison } else { None },
        streams: st.parallel_streams,
    };
    let bytes = t.samples.last()?.bytes.saturating_sub(t.samples.first()?.bytes);
    Some(verdict::judge(profile, &w, &t.label, bytes, &ctx))
}

pub(crate) fn summarize_host(h: &HostProfile) -> HostSummary {
    let s = &h.samples;
    let st = |f: &dyn Fn(&crate::sampler::SystemSample) -> f64| stat(s.iter().map(|x| (f(x), x.dt)));
    let busy: f64 = s.iter().map(|x| x.cpu.busy() * x.dt).sum();
    let kernel: f64 = s.iter().map(|x| x.cpu.kernel() * x.dt).sum();

    let mut core_ids: Vec<u32> = s.iter().flat_map(|x| x.cores.iter().map(|c| c.core)).collect();
    core_ids.sort_unstable();
    core_ids.dedup();
    let cores: Vec<CoreSummary> = core_ids
        .iter()
        .map(|&id| {
            let pts: Vec<_> =
                s.iter().filter_map(|x| x.cores.iter().find(|c| c.core == id).map(|c| (c.share, x.dt))).collect();
            let avg = |f: &dyn Fn(&crate::sampler::CpuShare) -> f64| stat(pts.iter().map(|(c, dt)| (f(c), *dt))).avg;
            CoreSummary {
                core: id,
                busy: stat(pts.iter().map(|(c, dt)| (c.busy(), *dt))),
                user_avg: avg(&|c| c.user + c.nice),
                system_avg: avg(&|c| c.system),
                softirq_avg: avg(&|c| c.softirq),
                irq_avg: avg(&|c| c.irq),
                iowait_avg: avg(&|c| c.iowait),
            }
        })
        .collect();
    let busiest_core = cores.iter().max_by(|a, b| a.busy.avg.total_cmp(&b.busy.avg)).map(|c| c.core);

    let mut names: Vec<String> = Vec::new();
    for x in s {
        for n in &x.nets {
            if !names.contains(&n.name) {
                names.push(n.name.clone());
            }
        }
    }
    let interfaces: Vec<InterfaceSummary> = names
        .into_iter()
        .map(|name| {
            let pick = |f: &dyn Fn(&crate::sampler::NetRate) -> f64| {
                stat(s.iter().map(|x| (x.nets.iter().find(|n| n.name == name).map(f).unwrap_or(0.0), x.dt)))
            };
            InterfaceSummary {
                rx_packets_per_s: pick(&|n| n.rx_packets_per_s),
                tx_packets_per_s: pick(&|n| n.tx_packets_per_s),
                rx_bytes_per_s: pick(&|n| n.rx_bytes_per_s),
                tx_bytes_per_s: pick(&|n| n.tx_bytes_per_s),
                name,
            }
        })
        .filter(|i| i.rx_packets_per_s.peak > 0.0 || i.tx_packets_per_s.peak > 0.0)
        .collect();
    let busiest_interface = interfaces
        .iter()
        .max_by(|a, b| {
            (a.rx_bytes_per_s.avg + a.tx_bytes_per_s.avg).total_cmp(&(b.rx_bytes_per_s.avg + b.tx_bytes_per_s.avg))
        })
        .map(|i| i.name.clone());

    let out_segs = st(&|x| x.tcp.out_segs_per_s);
    let retrans = st(&|x| x.tcp.retrans_segs_per_s);
    let process_cpu = s
        .iter()
        .any(|x| x.process.is_some())
        .then(|| stat(s.iter().filter_map(|x| x.process.map(|p| (p.user_percent + p.system_percent, x.dt)))));
    HostSummary {
        hostname: h.host.hostname.clone(),
        samples: s.len(),
        duration_s: h.duration_s,
        load_1min: st(&|x| x.load.one),
        cpu_busy_percent: st(&|x| x.cpu.busy()),
        cpu_user_percent: st(&|x| x.cpu.user + x.cpu.nice),
        cpu_system_percent: st(&|x| x.cpu.system),
        cpu_iowait_percent: st(&|x| x.cpu.iowait),
        cpu_softirq_percent: st(&|x| x.cpu.softirq),
        cpu_irq_percent: st(&|x| x.cpu.irq),
        kernel_share_percent: if busy > 0.0 { 100.0 * kernel / busy } else { 0.0 },
        cores,
        busiest_core,
        context_switches_per_s: st(&|x| x.context_switches_per_s),
        interrupts_per_s: st(&|x| x.interrupts_per_s),
        io_transfers_per_s: st(&|x| x.disk_total.transfers_per_s),
        disk_read_bytes_per_s: st(&|x| x.disk_total.read_bytes_per_s),
        disk_write_bytes_per_s: st(&|x| x.disk_total.write_bytes_per_s),
        interfaces,
        busiest_interface,
        retrans_percent: if out_segs.avg > 0.0 { 100.0 * retrans.avg / out_segs.avg } else { 0.0 },
        tcp_out_segs_per_s: out_segs,
        tcp_retrans_segs_per_s: retrans,
        memory_available_min_bytes: s.iter().map(|x| x.memory.available_bytes).min().unwrap_or(0),
        dirty_peak_bytes: s.iter().map(|x| x.memory.dirty_bytes).max().unwrap_or(0),
        writeback_peak_bytes: s.iter().map(|x| x.memory.writeback_bytes).max().unwrap_or(0),
        process_cpu_percent: process_cpu,
        process_rss_peak_bytes: s.iter().filter_map(|x| x.process.map(|p| p.rss_bytes)).max(),
        perf_kernel_percent: h.perf.as_ref().map(|p| p.kernel_percent),
    }
}

/// Below this share of busy time a limit is noise, not a cause.
const LIMITED: f64 = 20.0;

pub(crate) fn summarize_stream(s: &StreamSeries, side: Option<Side>) -> StreamSummary {
    let (Some(first), Some(last)) = (s.samples.first(), s.samples.last()) else {
        return StreamSummary {
            side,
            id: s.id,
            label: s.label.clone(),
            limited_by: "unknown".into(),
            ..Default::default()
        };
    };
    let li = &last.info;
    let sender = li.bytes_acked >= li.bytes_received;
    let span = last.t - first.t;
    let moved = if sender {
        li.bytes_acked.saturating_sub(first.info.bytes_acked)
    } else {
        li.bytes_received.saturating_sub(first.info.bytes_received)
    };
    let busy = li.busy_time_us.max(1) as f64;
    let rwnd = 100.0 * li.rwnd_limited_us as f64 / busy;
    let sndbuf = 100.0 * li.sndbuf_limited_us as f64 / busy;
    let app =
        100.0 * s.samples.iter().filter(|x| x.info.delivery_rate_app_limited).count() as f64 / s.samples.len() as f64;
    let limited_by = if !sender {
        "receiver"
    } else if rwnd >= LIMITED {
        "receiver window"
    } else if sndbuf >= LIMITED {
        "send buffer"
    } else if app >= 50.0 {
        "application"
    } else {
        "congestion window"
    };
    let min_rtt =
        s.samples.iter().map(|x| x.info.min_rtt_us).filter(|&v| v > 0 && v != u32::MAX).min().unwrap_or(li.rtt_us);
    StreamSummary {
        side,
        id: s.id,
        label: s.label.clone(),
        sender,
        samples: s.samples.len(),
        rtt_ms: stat(s.samples.iter().map(|x| (x.info.rtt_us as f64 / 1000.0, 1.0))),
        min_rtt_ms: min_rtt as f64 / 1000.0,
        cwnd: stat(s.samples.iter().map(|x| (x.info.snd_cwnd as f64, 1.0))),
        snd_mss: li.snd_mss,
        total_retrans: li.total_retrans,
        bytes_acked: li.bytes_acked,
        bytes_received: li.bytes_received,
        throughput_bytes_per_s: if span > 0.0 { moved as f64 / span } else { 0.0 },
        delivery_rate_peak: s.samples.iter().map(|x| x.info.delivery_rate as f64).fold(0.0, f64::max),
        rwnd_limited_percent: rwnd,
        sndbuf_limited_percent: sndbuf,
        app_limited_percent: app,
        limited_by: limited_by.into(),
    }
}

/// Throughput over time from cumulative progress, in windows of at least
/// `max(0.2 s, duration / 200)` so that a callback per block does not turn
/// into a comb of spikes. Points are (t at the window's end, bytes/s).
pub(crate) fn throughput_points(series: &TransferSeries) -> Vec<(f64, f64)> {
    let s = &series.samples;
    let (Some(first), Some(last)) = (s.first(), s.last()) else { return Vec::new() };
    windowed(series, ((last.t - first.t) / 200.0).max(0.2))
}

/// The points the throughput chart draws: like [`throughput_points`], but
/// a short run (a variant of a third of a second) gets windows of a tenth
/// of its length, down to 20 ms, so it is a curve and not a two-point stub.
pub(crate) fn plot_points(series: &TransferSeries) -> Vec<(f64, f64)> {
    let s = &series.samples;
    let (Some(first), Some(last)) = (s.first(), s.last()) else { return Vec::new() };
    let d = last.t - first.t;
    windowed(series, (d / 200.0).max((d / 10.0).clamp(0.02, 0.2)))
}

fn windowed(series: &TransferSeries, window: f64) -> Vec<(f64, f64)> {
    let s = &series.samples;
    let (Some(first), Some(last)) = (s.first(), s.last()) else { return Vec::new() };
    let mut out = Vec::new();
    let mut anchor = *first;
    for p in s.iter().skip(1) {
        if p.t - anchor.t >= window || std::ptr::eq(p, last) {
            let dt = p.t - anchor.t;
            if dt > 0.0 {
                out.push((p.t, p.bytes.saturating_sub(anchor.bytes) as f64 / dt));
            }
            anchor = *p;
        }
    }
    out
}

fn summarize_transfer(t: &TransferSeries) -> TransferSummary {
    let (first, last) = match (t.samples.first(), t.samples.last()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => return TransferSummary { label: t.label.clone(), ..Default::default() },
    };
    let duration = last.t - first.t;
    let bytes = last.bytes.saturating_sub(first.bytes);
    TransferSummary {
        label: t.label.clone(),
        bytes,
        duration_s: duration,
        avg_bytes_per_s: if duration > 0.0 { bytes as f64 / duration } else { 0.0 },
        peak_bytes_per_s: throughput_points(t).iter().map(|p| p.1).fold(0.0, f64::max),
        limit: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ProgressSample;

    #[test]
    fn weighted_stat() {
        let s = stat([(10.0, 1.0), (40.0, 2.0)]);
        assert_eq!(s, Stat { avg: 30.0, peak: 40.0 });
        assert_eq!(stat([]), Stat::default());
    }

    #[test]
    fn throughput_windows() {
        let t = TransferSeries {
            label: "x".into(),
            start_unix_ms: 0,
            expected_bytes: None,
            reads_file: None,
            writes_file: None,
            samples: (0..=100).map(|i| ProgressSample { t: i as f64 * 0.01, bytes: i * 1000 }).collect(),
        };
        let pts = throughput_points(&t);
        assert_eq!(pts.len(), 5);
        for (_, r) in &pts {
            assert!((r - 100_000.0).abs() < 1.0, "{r}");
        }
        let sum = summarize_transfer(&t);
        assert_eq!(sum.bytes, 100_000);
        assert!((sum.avg_bytes_per_s - 100_000.0).abs() < 1.0);
    }
}
