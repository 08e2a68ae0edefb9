//! The facts a verdict is drawn from, for one time window (the profiled
//! transfer, or one `--compare-memory` variant), per end and per stream.
//!
//! Both ends sample on their own clocks; every sample says when its
//! interval ended (`t`, seconds after that end's `start_unix_ms`) and how
//! long it was (`dt`). A window is wall-clock time, so a sample counts with
//! the part of its interval that falls inside the window.
//!
//! Streams are summarised as [`StreamFacts`]: bytes, retransmissions,
//! round-trip times, windows, and the time the sender was held back by the
//! receiver's window, by its own send buffer, or had nothing to send. The
//! verdict reads only these, never `TCP_INFO` itself, so a transport that
//! is not TCP (a UDT-style or QUIC transport reporting the same facts) can
//! be judged by the same rules.

use serde::{Deserialize, Serialize};

use crate::process::IoLimit;
use crate::report::{Profile, Side, TransferSeries};
use crate::sampler::{HostProfile, SystemSample};
use crate::streams::{StreamSeries, TcpInfo};

/// A span of wall-clock time, in milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
}

impl Window {
    pub fn seconds(&self) -> f64 {
        ((self.end_unix_ms - self.start_unix_ms) / 1000.0).max(0.0)
    }

    /// The window of a transfer's progress series: from its start to its
    /// last progress sample.
    pub fn of_transfer(t: &TransferSeries) -> Option<Window> {
        let last = t.samples.last()?;
        let first = t.samples.first()?;
        Some(Window {
            start_unix_ms: t.start_unix_ms as f64 + first.t * 1000.0,
            end_unix_ms: t.start_unix_ms as f64 + last.t * 1000.0,
        })
    }

    /// Seconds of `[a, b]` (in a host's own seconds, whose zero is
    /// `origin_ms`) that fall inside the window.
    fn overlap(&self, origin_ms: f64, a: f64, b: f64) -> f64 {
        let (a, b) = (origin_ms + a * 1000.0, origin_ms + b * 1000.0);
        ((b.min(self.end_unix_ms) - a.max(self.start_unix_ms)) / 1000.0).max(0.0)
    }
}

/// The watched process over a window (averages weighted by time).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessFacts {
    /// user + system, % of one core.
    pub cpu_percent: f64,
    pub user_percent: f64,
    pub system_percent: f64,
    /// Waiting for a CPU while runnable, all threads, % of one core.
    pub run_delay_percent: f64,
    /// The busiest thread: on a CPU, and waiting for one, % of one core.
    pub busiest_thread_percent: f64,
    pub busiest_thread_wait_percent: f64,
    /// Average threads running/runnable and in uninterruptible (disk) sleep.
    pub threads_running: f64,
    pub threads_blocked: f64,
    /// Share of the looks with at least one thread running or runnable, %.
    pub runnable_percent: f64,
    pub storage_read_bytes_per_s: f64,
    pub storage_write_bytes_per_s: f64,
    /// % of the cgroup's quota periods throttled; `null` when not readable.
    pub cgroup_throttled_percent: Option<f64>,
    pub cgroup_throttled_ms_per_s: Option<f64>,
    pub cpu_quota_cores: Option<f64>,
    pub io_limits: Vec<IoLimit>,
}

/// One end over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideFacts {
    pub side: Option<Side>,
    pub hostname: String,
    pub cores: u32,
    /// Seconds of samples inside the window, and how many samples touched it.
    pub seconds: f64,
    pub samples: usize,
    /// The machine's CPU, % of all cores.
    pub cpu_busy_percent: f64,
    pub cpu_user_percent: f64,
    pub cpu_system_percent: f64,
    pub cpu_softirq_percent: f64,
    pub cpu_iowait_percent: f64,
    /// The busiest core in each sample, averaged: % of one core.
    pub busiest_core_percent: f64,
    /// All non-stacked disks.
    pub disk_read_bytes_per_s: f64,
    pub disk_write_bytes_per_s: f64,
    /// The device with the highest utilisation (loop devices included).
    pub busiest_disk: Option<String>,
    pub busiest_disk_util_percent: f64,
    /// Growth of dirty + writeback page cache and of tmpfs/shared memory over the window.
    pub dirty_growth_bytes: i64,
    pub shmem_growth_bytes: i64,
    pub dirty_peak_bytes: u64,
    pub retrans_segs_per_s: f64,
    pub out_segs_per_s: f64,
    pub process: Option<ProcessFacts>,
}

/// One data stream over a window, from one end: the transport-neutral
/// facts the verdict uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamFacts {
    pub side: Option<Side>,
    pub id: u64,
    pub label: String,
    /// This end sent the data (its window, buffer and loss state matter).
    pub sender: bool,
    /// Seconds of the window the readings cover.
    pub seconds: f64,
    /// Payload bytes delivered (acknowledged) when sending, received when receiving.
    pub bytes: u64,
    /// Bytes put on the wire, retransmissions included, and retransmitted bytes.
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    /// Seconds with data outstanding ("busy"), and the parts of it the
    /// sender was held back by the receiver's window and by its own send buffer.
    pub busy_s: f64,
    pub rwnd_limited_s: f64,
    pub sndbuf_limited_s: f64,
    pub min_rtt_ms: f64,
    pub avg_rtt_ms: f64,
    /// Averages over the readings: congestion window, bytes in flight, the
    /// peer's advertised receive window (bytes).
    pub avg_cwnd_bytes: f64,
    pub avg_in_flight_bytes: f64,
    pub avg_peer_window_bytes: f64,
    /// Congestion window at the end of the window over its value half-way.
    pub cwnd_growth: f64,
    /// Share of readings with data queued but not yet sent: the
    /// application kept up and something downstream held the data back.
    pub backlog_share: f64,
    /// Share of readings with the peer's advertised window (nearly) full.
    pub rwnd_full_share: f64,
    /// Share of readings with the send buffer full of data while the
    /// congestion window had room: the buffer, not the network or the
    /// application, held the sender back.
    pub sndbuf_full_share: f64,
    /// Send and receive socket buffer sizes, averaged.
    pub avg_send_buffer_bytes: Option<f64>,
    pub avg_receive_buffer_bytes: Option<f64>,
    pub readings: usize,
}

/// A reading's window state: in flight against the peer's window, the
/// congestion window and the send buffer. Thresholds leave room for the
/// windows' own granularity.
fn in_flight(i: &TcpInfo) -> f64 {
    i.unacked as f64 * i.snd_mss as f64
}

/// The peer's advertised window is (nearly) used up while there is data
/// to send or in flight; a zero window with data waiting counts (a
/// receiver that stopped reading leaves nothing in flight).
fn rwnd_full(i: &TcpInfo) -> bool {
    let room = i.snd_wnd as f64 - in_flight(i);
    (i.unacked > 0 || i.notsent_bytes > 0) && room < (0.25 * i.snd_wnd as f64).max(i.snd_mss as f64)
}

/// The send buffer holds at least 60% of its size in data (in flight or
/// queued) while the congestion window still has room: the application
/// could not hand over more. Data queued behind a pacing sender (BBR paces
/// at the rate it measured, which a small buffer limits) does not make the
/// network the limit.
fn sndbuf_full(i: &TcpInfo) -> bool {
    let cwnd = i.snd_cwnd as f64 * i.snd_mss as f64;
    match i.send_buffer_bytes {
        Some(b) if b > 0 => {
            !rwnd_full(i) && in_flight(i) < 0.75 * cwnd && in_flight(i) + i.notsent_bytes as f64 >= 0.6 * b as f64
        }
        _ => false,
    }
}

fn cpu_of(s: &SystemSample) -> (f64, f64, f64, f64, f64) {
    (s.cpu.busy(), s.cpu.user + s.cpu.nice, s.cpu.system, s.cpu.softirq, s.cpu.iowait)
}

/// One end over `w`; `None` if no sample touches it.
pub fn side_facts(h: &HostProfile, side: Option<Side>, w: &Window) -> Option<SideFacts> {
    let origin = h.start_unix_ms as f64;
    let weighted: Vec<(&SystemSample, f64)> =
        h.samples.iter().map(|s| (s, w.overlap(origin, s.t - s.dt, s.t))).filter(|(_, o)| *o > 0.0).collect();
    let total: f64 = weighted.iter().map(|(_, o)| o).sum();
    if total <= 0.0 {
        return None;
    }
    let avg = |f: &dyn Fn(&SystemSample) -> f64| weighted.iter().map(|(s, o)| f(s) * o).sum::<f64>() / total;
    let mut f = SideFacts {
        side,
        hostname: h.host.hostname.clone(),
        cores: h.host.cores.max(1),
        seconds: total,
        samples: weighted.len(),
        cpu_busy_percent: avg(&|s| cpu_of(s).0),
        cpu_user_percent: avg(&|s| cpu_of(s).1),
        cpu_system_percent: avg(&|s| cpu_of(s).2),
        cpu_softirq_percent: avg(&|s| cpu_of(s).3),
        cpu_iowait_percent: avg(&|s| cpu_of(s).4),
        busiest_core_percent: avg(&|s| s.cores.iter().map(|c| c.share.busy()).fold(0.0, f64::max)),
        disk_read_bytes_per_s: avg(&|s| s.disk_total.read_bytes_per_s),
        disk_write_bytes_per_s: avg(&|s| s.disk_total.write_bytes_per_s),
        retrans_segs_per_s: avg(&|s| s.tcp.retrans_segs_per_s),
        out_segs_per_s: avg(&|s| s.tcp.out_segs_per_s),
        ..SideFacts::default()
    };
    let mut names: Vec<&str> = Vec::new();
    for (s, _) in &weighted {
        for d in &s.disks {
            if !names.contains(&d.name.as_str()) {
                names.push(&d.name);
            }
        }
    }
    for name in names {
        let util = avg(&|s| s.disks.iter().find(|d| d.name == name).map(|d| d.util_percent).unwrap_or(0.0));
        if f.busiest_disk.is_none() || util > f.busiest_disk_util_percent {
            f.busiest_disk = Some(name.to_string());
            f.busiest_disk_util_percent = util;
        }
    }
    // Memory is a level at the end of each interval: growth is last minus
    // the level before the window (the sample ending at or before its start).
    let before = h.samples.iter().rev().find(|s| origin + s.t * 1000.0 <= w.start_unix_ms);
    let last = weighted.last().map(|(s, _)| *s);
    if let (Some(b), Some(l)) = (before.or(weighted.first().map(|(s, _)| *s)), last) {
        let dirty = |s: &SystemSample| (s.memory.dirty_bytes + s.memory.writeback_bytes) as i64;
        f.dirty_growth_bytes = dirty(l) - dirty(b);
        f.shmem_growth_bytes = l.memory.shmem_bytes as i64 - b.memory.shmem_bytes as i64;
    }
    f.dirty_peak_bytes = weighted.iter().map(|(s, _)| s.memory.dirty_bytes).max().unwrap_or(0);

    let with_process: Vec<_> = weighted.iter().filter_map(|(s, o)| s.process.map(|p| (p, *o))).collect();
    let pt: f64 = with_process.iter().map(|(_, o)| o).sum();
    if pt > 0.0 {
        let pavg = |g: &dyn Fn(&crate::sampler::ProcessSample) -> f64| {
            with_process.iter().map(|(p, o)| g(p) * o).sum::<f64>() / pt
        };
        let opt = |g: &dyn Fn(&crate::sampler::ProcessSample) -> Option<f64>| {
            let v: Vec<_> = with_process.iter().filter_map(|(p, o)| g(p).map(|x| (x, *o))).collect();
            let t: f64 = v.iter().map(|x| x.1).sum();
            (t > 0.0).then(|| v.iter().map(|(x, o)| x * o).sum::<f64>() / t)
        };
        let cgroup = h.process.as_ref().and_then(|p| p.cgroup.clone()).unwrap_or_default();
        f.process = Some(ProcessFacts {
            cpu_percent: pavg(&|p| p.user_percent + p.system_percent),
            user_percent: pavg(&|p| p.user_percent),
            system_percent: pavg(&|p| p.system_percent),
            run_delay_percent: pavg(&|p| p.run_delay_percent),
            busiest_thread_percent: pavg(&|p| p.busiest_thread_percent),
            busiest_thread_wait_percent: pavg(&|p| p.busiest_thread_wait_percent),
            threads_running: pavg(&|p| p.threads_running),
            threads_blocked: pavg(&|p| p.threads_blocked),
            runnable_percent: pavg(&|p| p.runnable_percent),
            storage_read_bytes_per_s: pavg(&|p| p.storage_read_bytes_per_s),
            storage_write_bytes_per_s: pavg(&|p| p.storage_write_bytes_per_s),
            cgroup_throttled_percent: opt(&|p| p.cgroup_throttled_percent),
            cgroup_throttled_ms_per_s: opt(&|p| p.cgroup_throttled_ms_per_s),
            cpu_quota_cores: cgroup.cpu_quota_cores,
            io_limits: cgroup.io_limits,
        });
    }
    Some(f)
}

/// The reading a window starts from: the last one at or before its start,
/// or none (counters from zero) if the stream was first seen inside it.
fn baseline<'a>(s: &'a StreamSeries, origin: f64, w: &Window) -> Option<&'a crate::streams::StreamSample> {
    s.samples.iter().rev().find(|x| origin + x.t * 1000.0 <= w.start_unix_ms)
}

/// One stream over `w`; `None` if it has no reading inside the window.
pub fn stream_facts(s: &StreamSeries, side: Option<Side>, origin_ms: u64, w: &Window) -> Option<StreamFacts> {
    let origin = origin_ms as f64;
    let mut inside: Vec<_> = s
        .samples
        .iter()
        .filter(|x| {
            let at = origin + x.t * 1000.0;
            at > w.start_unix_ms && at <= w.end_unix_ms
        })
        .collect();
    let last = *inside.last()?;
    let base = baseline(s, origin, w);
    let zero = TcpInfo::default();
    let b = base.map(|x| &x.info).unwrap_or(&zero);
    let sender = last.info.bytes_acked.saturating_sub(b.bytes_acked)
        >= last.info.bytes_received.saturating_sub(b.bytes_received);
    // A sender whose every byte is acknowledged, with nothing in flight
    // and nothing queued, has finished: the readings after the first such
    // one show the receiver finishing (a buffered tail still going to its
    // disk), not a sender with nothing to send. They are left out, so the
    // stream's time, its "nothing to send" share and its reading shares
    // cover only the time it still had data to deliver (induced case 5:
    // a client that buffered a whole 48 MiB file in 1.2 s and took 2 s
    // more to write it at its disk's 16 MiB/s read as a stalled sender).
    if sender {
        let done = |i: &TcpInfo| i.bytes_acked >= last.info.bytes_acked && i.unacked == 0 && i.notsent_bytes == 0;
        if let Some(cut) = inside.iter().position(|x| done(&x.info)) {
            inside.truncate(cut + 1);
        }
    }
    let end = *inside.last()?;
    let e = &end.info;
    let start_ms = base.map(|x| origin + x.t * 1000.0).unwrap_or(w.start_unix_ms).max(w.start_unix_ms);
    let seconds = ((origin + end.t * 1000.0 - start_ms) / 1000.0).max(0.0);
    let us = |a: u64, z: u64| a.saturating_sub(z) as f64 / 1e6;
    let n = inside.len() as f64;
    let mean = |g: &dyn Fn(&TcpInfo) -> f64| inside.iter().map(|x| g(&x.info)).sum::<f64>() / n;
    let min_rtt =
        inside.iter().map(|x| x.info.min_rtt_us).filter(|&v| v > 0 && v != u32::MAX).min().unwrap_or(e.rtt_us);
    let mid = inside[inside.len() / 2].info.snd_cwnd.max(1) as f64;
    let share = |g: &dyn Fn(&TcpInfo) -> bool| inside.iter().filter(|x| g(&x.info)).count() as f64 / n;
    let opt_mean = |g: &dyn Fn(&TcpInfo) -> Option<u32>| {
        let v: Vec<f64> = inside.iter().filter_map(|x| g(&x.info)).map(|v| v as f64).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    Some(StreamFacts {
        side,
        id: s.id,
        label: s.label.clone(),
        sender,
        seconds,
        bytes: if sender {
            e.bytes_acked.saturating_sub(b.bytes_acked)
        } else {
            e.bytes_received.saturating_sub(b.bytes_received)
        },
        bytes_sent: e.bytes_sent.saturating_sub(b.bytes_sent),
        bytes_retrans: e.bytes_retrans.saturating_sub(b.bytes_retrans),
        busy_s: us(e.busy_time_us, b.busy_time_us).min(seconds),
        rwnd_limited_s: us(e.rwnd_limited_us, b.rwnd_limited_us).min(seconds),
        sndbuf_limited_s: us(e.sndbuf_limited_us, b.sndbuf_limited_us).min(seconds),
        min_rtt_ms: min_rtt as f64 / 1000.0,
        avg_rtt_ms: mean(&|i| i.rtt_us as f64) / 1000.0,
        avg_cwnd_bytes: mean(&|i| i.snd_cwnd as f64 * i.snd_mss as f64),
        avg_in_flight_bytes: mean(&|i| i.unacked as f64 * i.snd_mss as f64),
        avg_peer_window_bytes: mean(&|i| i.snd_wnd as f64),
        cwnd_growth: e.snd_cwnd as f64 / mid,
        backlog_share: share(&|i| i.notsent_bytes > 0 && !rwnd_full(i) && !sndbuf_full(i)),
        rwnd_full_share: share(&|i| rwnd_full(i)),
        sndbuf_full_share: share(&|i| sndbuf_full(i)),
        avg_send_buffer_bytes: opt_mean(&|i| i.send_buffer_bytes),
        avg_receive_buffer_bytes: opt_mean(&|i| i.receive_buffer_bytes),
        readings: inside.len(),
    })
}

/// Every stream of both ends over `w`.
pub fn all_stream_facts(p: &Profile, w: &Window) -> Vec<StreamFacts> {
    let mut out = Vec::new();
    for side in [Side::Client, Side::Server] {
        let Some(h) = p.host(side) else { continue };
        out.extend(h.streams.iter().filter_map(|s| stream_facts(s, Some(side), h.start_unix_ms, w)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::ProcessSample;
    use crate::streams::StreamSample;

    fn host(samples: Vec<SystemSample>) -> HostProfile {
        HostProfile { start_unix_ms: 10_000, samples, ..Default::default() }
    }

    #[test]
    fn samples_count_by_their_overlap_with_the_window() {
        let mk = |t: f64, user: f64, blocked: f64| {
            let mut s = SystemSample { t, dt: 1.0, ..Default::default() };
            s.cpu.user = user;
            s.process = Some(ProcessSample { threads_blocked: blocked, ..Default::default() });
            s
        };
        let h = host(vec![mk(1.0, 10.0, 0.0), mk(2.0, 50.0, 1.0), mk(3.0, 90.0, 0.0)]);
        // 11.5 s .. 12.5 s: half of the second sample, half of the third.
        let w = Window { start_unix_ms: 11_500.0, end_unix_ms: 12_500.0 };
        let f = side_facts(&h, Some(Side::Client), &w).unwrap();
        assert_eq!(f.samples, 2);
        assert!((f.seconds - 1.0).abs() < 1e-9);
        assert!((f.cpu_user_percent - 70.0).abs() < 1e-9);
        assert!((f.process.unwrap().threads_blocked - 0.5).abs() < 1e-9);
        assert!(side_facts(&h, None, &Window { start_unix_ms: 0.0, end_unix_ms: 5_000.0 }).is_none());
    }

    #[test]
    fn stream_counters_are_differences_inside_the_window() {
        let info = |acked: u64, busy: u64, rwnd: u64| TcpInfo {
            bytes_acked: acked,
            bytes_sent: acked,
            busy_time_us: busy,
            rwnd_limited_us: rwnd,
            snd_cwnd: 10,
            snd_mss: 1000,
            rtt_us: 2000,
            min_rtt_us: 1000,
            ..Default::default()
        };
        let s = StreamSeries {
            id: 1,
            samples: vec![
                StreamSample { t: 1.0, info: info(100, 0, 0) },
                StreamSample { t: 2.0, info: info(1100, 900_000, 500_000) },
                StreamSample { t: 3.0, info: info(2100, 1_800_000, 1_000_000) },
                StreamSample { t: 4.0, info: info(9999, 2_000_000, 1_000_000) },
            ],
            ..Default::default()
        };
        let w = Window { start_unix_ms: 11_000.0, end_unix_ms: 13_200.0 };
        let f = stream_facts(&s, Some(Side::Server), 10_000, &w).unwrap();
        assert!(f.sender);
        assert_eq!(f.bytes, 2000);
        assert!((f.seconds - 2.0).abs() < 1e-9);
        assert!((f.busy_s - 1.8).abs() < 1e-9 && (f.rwnd_limited_s - 1.0).abs() < 1e-9);
        assert_eq!((f.min_rtt_ms, f.avg_rtt_ms, f.avg_cwnd_bytes), (1.0, 2.0, 10_000.0));
        // A stream first seen inside the window counts from zero.
        let w = Window { start_unix_ms: 10_500.0, end_unix_ms: 11_500.0 };
        assert_eq!(stream_facts(&s, None, 10_000, &w).unwrap().bytes, 100);
    }

    #[test]
    fn a_sender_that_delivered_everything_is_done_not_idle() {
        // All 3000 bytes acknowledged by 2 s, nothing in flight or queued
        // after; the receiver takes until 5 s to finish.
        let info = |acked: u64, busy: u64, unacked: u32| TcpInfo {
            bytes_acked: acked,
            bytes_sent: acked,
            busy_time_us: busy,
            unacked,
            snd_cwnd: 10,
            snd_mss: 1000,
            ..Default::default()
        };
        let s = StreamSeries {
            id: 1,
            samples: vec![
                StreamSample { t: 1.0, info: info(1000, 900_000, 2) },
                StreamSample { t: 2.0, info: info(3000, 1_900_000, 0) },
                StreamSample { t: 3.0, info: info(3000, 1_900_000, 0) },
                StreamSample { t: 4.0, info: info(3000, 1_900_000, 0) },
                StreamSample { t: 5.0, info: info(3000, 1_900_000, 0) },
            ],
            ..Default::default()
        };
        let w = Window { start_unix_ms: 10_000.0, end_unix_ms: 15_000.0 };
        let f = stream_facts(&s, Some(Side::Server), 10_000, &w).unwrap();
        assert_eq!((f.bytes, f.readings), (3000, 2));
        assert!((f.seconds - 2.0).abs() < 1e-9, "{f:?}");
        assert!((f.busy_s - 1.9).abs() < 1e-9);
        // Not done while a byte is still in flight (or queued).
        let mut s = s;
        s.samples[1].info.unacked = 1;
        s.samples[2].info.notsent_bytes = 1;
        assert_eq!(stream_facts(&s, Some(Side::Server), 10_000, &w).unwrap().readings, 4);
    }
}
