//! The FTPProfiler comparison of variants, and the hints.
//!
//! The comparison follows the `--compare-memory` method: run the same
//! transfer memory-to-memory (the network's rate with no disk involved),
//! disk-to-memory (only the reading side's disk), memory-to-disk (only the
//! writing side's file) and disk-to-disk, then compare each with
//! memory-to-memory. It says which *part* costs throughput, not which
//! *resource*: a memory-to-disk variant can be slow because the disk is
//! slow or because copying into the page cache costs CPU the machine does
//! not have. The verdict (`verdict.rs`) names the resource from the samples
//! and uses the comparison as one piece of evidence.
//!
//! Hints are observations with advice. Each bears on some candidate
//! limits; once the verdict is known, a hint about other limits keeps its
//! observation but loses its advice and says it is not the limit
//! ([`reconcile`]), so the page never recommends one thing in the verdict
//! and the opposite in a hint.

use serde::{Deserialize, Serialize};

use crate::report::{Analysis, Profile, Side};
use crate::units::{format_rate, format_rate_both};
use crate::verdict::{LimitKind, Verdict};

/// A variant within this fraction of memory-to-memory "keeps up".
pub const KEEPS_UP: f64 = 0.9;

/// Throughput (bytes/s) of up to four variants of one transfer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ThroughputComparison {
    pub memory_to_memory: Option<f64>,
    /// The reading side's disk, the writing side discards (e.g. to /dev/null).
    pub disk_to_memory: Option<f64>,
    /// The reading side generates data, the writing side's disk stores it.
    pub memory_to_disk: Option<f64>,
    pub disk_to_disk: Option<f64>,
    /// Which side reads: `server` for a download (the default), `client` for an upload.
    pub reader: Option<Side>,
}

/// What limits the transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Every disk variant keeps up with memory-to-memory.
    Network,
    /// Reading the source's disk.
    DiskRead,
    /// Writing the destination's disk.
    DiskWrite,
    /// Each disk keeps up alone but not both together (shared CPU,
    /// memory bandwidth, or the same physical disk on a loopback test).
    DisksTogether,
    /// Only disk-to-disk was measured and it falls short; which disk is unknown.
    Disks,
}

/// What the comparison of variants shows, as a sentence and as data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    pub limit: Limit,
    /// The limiting variant's rate as a fraction of memory-to-memory.
    pub ratio: f64,
    pub statement: String,
}

fn pct(r: f64) -> String {
    format!("{:.0}%", r * 100.0)
}

/// Names the part whose variant is slowest, e.g. "Of the variants, disk
/// reads on the server (disk to memory) fall furthest below memory to
/// memory: 54% of its rate (512 MiB/s of 948 MiB/s)."
/// Needs memory-to-memory and at least one other variant.
pub fn bottleneck(c: &ThroughputComparison) -> Option<Bottleneck> {
    let m2m = c.memory_to_memory.filter(|&r| r > 0.0)?;
    let reader = c.reader.unwrap_or(Side::Server);
    let writer = if reader == Side::Server { Side::Client } else { Side::Server };
    let ratio = |v: Option<f64>| v.map(|r| r / m2m);
    let (read, write, both) = (ratio(c.disk_to_memory), ratio(c.memory_to_disk), ratio(c.disk_to_disk));
    if read.is_none() && write.is_none() && both.is_none() {
        return None;
    }
    let of_net = |r: f64, rate: f64| format!("{} of its rate ({} of {})", pct(r), format_rate(rate), format_rate(m2m));
    let read_name = format!("disk reads on the {} (disk to memory)", reader.label());
    let write_name = format!("file writes on the {} (memory to disk)", writer.label());

    // The worse of the single-disk variants, if any falls short.
    let mut singles: Vec<(Limit, f64, f64, &str)> = Vec::new();
    if let (Some(r), Some(v)) = (read, c.disk_to_memory) {
        singles.push((Limit::DiskRead, r, v, &read_name));
    }
    if let (Some(r), Some(v)) = (write, c.memory_to_disk) {
        singles.push((Limit::DiskWrite, r, v, &write_name));
    }
    singles.sort_by(|a, b| a.1.total_cmp(&b.1));
    if let Some(&(limit, r, v, name)) = singles.first() {
        if r < KEEPS_UP {
            let mut statement =
                format!("Of the variants, {name} fall furthest below memory to memory: {}.", of_net(r, v));
            if let Some(&(_, r2, _, name2)) = singles.get(1) {
                if r2 < KEEPS_UP {
                    statement.push_str(&format!(" {} reach {} of it too.", capitalise(name2), pct(r2)));
                }
            }
            if let Some(bv) = c.disk_to_disk {
                statement.push_str(&format!(" Disk to disk: {}.", format_rate_both(bv)));
            }
            return Some(Bottleneck { limit, ratio: r, statement });
        }
    }
    match (both, c.disk_to_disk) {
        (Some(b), Some(bv)) if b < KEEPS_UP && singles.is_empty() => Some(Bottleneck {
            limit: Limit::Disks,
            ratio: b,
            statement: format!(
                "With both disks involved the transfer reaches {}. Run the disk-to-memory and memory-to-disk variants to tell which part.",
                of_net(b, bv)
            ),
        }),
        (Some(b), Some(bv)) if b < KEEPS_UP => Some(Bottleneck {
            limit: Limit::DisksTogether,
            ratio: b,
            statement: format!(
                "Each disk keeps up on its own (at least {} of memory to memory), but disk to disk reaches only {}: reading and writing together compete for CPU, memory bandwidth or the same device.",
                pct(singles.iter().map(|s| s.1).fold(f64::INFINITY, f64::min)),
                of_net(b, bv)
            ),
        }),
        _ => {
            let worst = [read, write, both].into_iter().flatten().fold(f64::INFINITY, f64::min);
            Some(Bottleneck {
                limit: Limit::Network,
                ratio: worst,
                statement: format!(
                    "Every variant keeps up with memory to memory: with the disks involved the transfer still reaches {} of its rate ({}).",
                    pct(worst),
                    format_rate_both(m2m)
                ),
            })
        }
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// What a hint is about, so a program can act on it without parsing text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HintKind {
    CoreKernelBound,
    CoreUserBound,
    IoWait,
    Retransmissions,
    Drops,
    ReceiverWindowLimited,
    SendBufferLimited,
    ApplicationLimited,
    CongestionWindowLimited,
    DirtyPages,
    PerfHotspot,
    SamplerOverhead,
}

impl HintKind {
    /// The limits this observation can be evidence of; `None` for remarks
    /// about the profile itself.
    pub fn bears_on(self) -> Option<&'static [LimitKind]> {
        use LimitKind as L;
        Some(match self {
            HintKind::CoreKernelBound | HintKind::CoreUserBound | HintKind::PerfHotspot => &[L::Cpu, L::PageCacheCopy],
            HintKind::IoWait => &[L::DiskRead, L::DiskWrite],
            HintKind::Retransmissions | HintKind::Drops => &[L::Loss, L::NetworkPath],
            HintKind::ReceiverWindowLimited => &[L::ReceiverWindow],
            HintKind::SendBufferLimited => &[L::SendBuffer],
            HintKind::ApplicationLimited => &[L::SenderApplication, L::DiskRead, L::Cpu, L::PageCacheCopy],
            HintKind::CongestionWindowLimited => &[L::NetworkPath, L::Loss, L::TooFewStreams],
            HintKind::DirtyPages => &[L::DiskWrite, L::PageCacheCopy],
            HintKind::SamplerOverhead => return None,
        })
    }
}

/// One observation with the change it suggests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hint {
    pub kind: HintKind,
    pub side: Option<Side>,
    /// What was seen, with the advice when it is consistent with the verdict.
    pub message: String,
    /// `supports` (bears on the verdict's limit), `not_the_limit` (bears on
    /// another limit; its advice was dropped), or `observation` (no verdict,
    /// or a remark about the profile itself).
    pub relation: String,
    /// The advice the observation suggests on its own.
    #[serde(skip)]
    advice: String,
    #[serde(skip)]
    observation: String,
}

impl Hint {
    fn new(kind: HintKind, side: Option<Side>, observation: String, advice: &str) -> Hint {
        let message = if advice.is_empty() { observation.clone() } else { format!("{observation} {advice}") };
        Hint { kind, side, message, relation: "observation".into(), advice: advice.to_string(), observation }
    }
}

/// Makes the hints agree with the verdict: an observation about another
/// limit keeps its figures, drops its advice and says it is not the limit.
pub fn reconcile(hints: &mut [Hint], verdict: Option<&Verdict>) {
    let Some(v) = verdict.filter(|v| v.conclusive) else { return };
    let Some(limit) = v.limit else { return };
    for h in hints {
        match h.kind.bears_on() {
            Some(kinds) if kinds.contains(&limit) => h.relation = "supports".into(),
            Some(_) => {
                h.relation = "not_the_limit".into();
                h.message = format!("{} Not the limit here: the verdict is {}.", h.observation, v.name);
            }
            None => {}
        }
    }
}

/// A core counts as saturated when it is at least this busy...
const PEGGED_BUSY: f64 = 90.0;
/// ...in at least this share of the samples.
const PEGGED_SHARE: f64 = 0.5;

/// Looks for the usual culprits in the samples. `analysis` must already
/// hold the host and stream summaries.
pub fn hints(profile: &Profile, analysis: &Analysis) -> Vec<Hint> {
    let mut out = Vec::new();
    for side in [Side::Client, Side::Server] {
        let (Some(host), Some(sum)) = (profile.host(side), analysis.host(side)) else { continue };
        let who = side.label();
        let n = host.samples.len().max(1) as f64;
        // Saturated cores: the one resource a per-core average would hide.
        // One hint per side and kind, naming every such core.
        let mut kernel_bound = Vec::new();
        let mut user_bound = Vec::new();
        for core in &sum.cores {
            // The split of the core's time while it was saturated, not over
            // the whole run (which would dilute it with the idle start and end).
            let pegged: Vec<_> = host
                .samples
                .iter()
                .filter_map(|s| s.cores.iter().find(|c| c.core == core.core && c.share.busy() >= PEGGED_BUSY))
                .map(|c| c.share)
                .collect();
            let share = pegged.len() as f64 / n;
            if share < PEGGED_SHARE {
                continue;
            }
            let k = pegged.len() as f64;
            let avg = |f: &dyn Fn(&crate::sampler::CpuShare) -> f64| pegged.iter().map(f).sum::<f64>() / k;
            let (system, softirq, irq, user) =
                (avg(&|c| c.system), avg(&|c| c.softirq), avg(&|c| c.irq), avg(&|c| c.user + c.nice));
            if system + softirq + irq >= user {
                kernel_bound.push(format!(
                    "cpu{} ({:.0}% of the samples; system {system:.0}%, softirq {softirq:.0}%, irq {irq:.0}%, user {user:.0}%)",
                    core.core,
                    100.0 * share
                ));
            } else {
                user_bound.push(format!("cpu{} ({:.0}% of the samples; user {user:.0}%)", core.core, 100.0 * share));
            }
        }
        let cores =
            |v: &[String]| if v.len() == 1 { format!("{} was", v[0]) } else { format!("{} were", v.join(", ")) };
        // The machine's cores may be busy with other programs: say how much
        // of it was the watched process.
        let own_avg = sum.process_cpu_percent.map(|p| p.avg);
        let own = own_avg
            .map(|p| format!(" The watched Ferry process used {p:.0}% of one core on average."))
            .unwrap_or_default();
        // A saturated core the Ferry process hardly used is other programs'
        // work: advice about Ferry's own threads would be wrong.
        let others = own_avg.is_some_and(|p| p < 50.0);
        let contention = "Other programs take these cores: Ferry gets less CPU than it wants (the verdict says whether that limits it).";
        if !kernel_bound.is_empty() {
            out.push(Hint::new(
                HintKind::CoreKernelBound,
                Some(side),
                format!(
                    "Saturated core on the {who} (at least {PEGGED_BUSY:.0}% busy), mostly in the kernel: {} saturated.{own}",
                    cores(&kernel_bound)
                ),
                if others {
                    contention
                } else {
                    "The network stack or the copies need a whole core; more streams help only if the NIC spreads them over queues (RSS/RPS), and zero-copy sends cut the copy cost."
                },
            ));
        }
        if !user_bound.is_empty() {
            out.push(Hint::new(
                HintKind::CoreUserBound,
                Some(side),
                format!(
                    "Saturated core on the {who} (at least {PEGGED_BUSY:.0}% busy), mostly in user space: {} saturated.{own}",
                    cores(&user_bound)
                ),
                if others {
                    contention
                } else {
                    "A program's thread (checksums, copies, encryption — or another program: see the perf table) is the limit."
                },
            ));
        }
        // iowait is a share of all cores; 10% on a 2-core machine is a fifth of one core waiting.
        if sum.cpu_iowait_percent.avg >= 10.0 {
            out.push(Hint::new(
                HintKind::IoWait,
                Some(side),
                format!(
                    "The {who}'s CPUs waited for the disk {:.0}% of the time on average (peak {:.0}%).",
                    sum.cpu_iowait_percent.avg, sum.cpu_iowait_percent.peak
                ),
                "The disk is slower than the transfer; more staging (larger buffers, more reader/writer threads) only helps if the disk can do more in parallel.",
            ));
        }
        if sum.retrans_percent >= 1.0 {
            out.push(Hint::new(
                HintKind::Retransmissions,
                Some(side),
                format!(
                    "{:.1}% of the {who}'s TCP segments were retransmitted (peak {:.0}/s).",
                    sum.retrans_percent, sum.tcp_retrans_segs_per_s.peak
                ),
                "Loss on the path or at a full queue: on a long path loss is what parallel streams are for; on a short one, look for a rate-limited or overloaded link.",
            ));
        }
        let drops: f64 =
            host.samples.iter().flat_map(|s| s.nets.iter()).map(|n| n.rx_drops_per_s + n.tx_drops_per_s).sum::<f64>();
        if drops > 0.0 {
            out.push(Hint::new(
                HintKind::Drops,
                Some(side),
                format!("The {who}'s network interfaces dropped packets."),
                "Check ring sizes (ethtool -g) and the receive backlog (net.core.netdev_max_backlog).",
            ));
        }
        let mem_total = host.host.mem_total_bytes.max(1) as f64;
        if sum.dirty_peak_bytes as f64 > 0.1 * mem_total {
            out.push(Hint::new(
                HintKind::DirtyPages,
                Some(side),
                format!(
                    "Dirty page cache on the {who} peaked at {:.0}% of memory: writes went to memory faster than to the disk.",
                    100.0 * sum.dirty_peak_bytes as f64 / mem_total
                ),
                "The kernel throttles writers once the dirty limit is reached; a longer transfer would run at the disk's rate.",
            ));
        }
        if let Some(perf) = &host.perf {
            // The heaviest module a reader can act on ("other kernel" and
            // idle time are not advice).
            use crate::perf::ModuleGroup as M;
            let actionable =
                |g: &&crate::perf::GroupShare| !matches!(g.group, M::SchedulerIdle | M::OtherKernel | M::OtherUser);
            if let Some(g) = perf.groups.iter().find(actionable) {
                if g.percent >= 25.0 {
                    out.push(Hint::new(
                        HintKind::PerfHotspot,
                        Some(side),
                        format!(
                            "perf on the {who}: {:.0}% of CPU samples were in {} ({}).",
                            g.percent,
                            g.name,
                            g.examples.join(", ")
                        ),
                        "",
                    ));
                }
            }
        }
        let interval_us = host.interval_ms.max(1) as f64 * 1000.0;
        if host.overhead.mean_us / interval_us > 0.02 {
            out.push(Hint::new(
                HintKind::SamplerOverhead,
                Some(side),
                format!(
                    "The sampler on the {who} spent {:.1}% of its interval reading /proc.",
                    100.0 * host.overhead.mean_us / interval_us
                ),
                "Use a longer interval for a less disturbed profile.",
            ));
        }
    }
    // The senders' view of each stream says what held the window back.
    let senders: Vec<_> = analysis.streams.iter().filter(|s| s.sender).collect();
    let count = |limit: &str| senders.iter().filter(|s| s.limited_by == limit).count();
    let total = senders.len();
    let mut stream_hint = |kind, limit: &str, advice: &str| {
        let k = count(limit);
        if k > 0 {
            out.push(Hint::new(
                kind,
                None,
                format!(
                    "{k} of {total} sending stream{} limited by the {limit}.",
                    if total == 1 { " was" } else { "s were" }
                ),
                advice,
            ));
        }
    };
    stream_hint(
        HintKind::ReceiverWindowLimited,
        "receiver window",
        "The receiver's buffer is smaller than the bandwidth-delay product: raise the TCP buffer (--tcp-bs, and net.core.rmem_max on the receiver) or use more parallel streams.",
    );
    stream_hint(
        HintKind::SendBufferLimited,
        "send buffer",
        "The sender's socket buffer is too small for the path: raise the TCP buffer (--tcp-bs, and net.core.wmem_max on the sender).",
    );
    stream_hint(
        HintKind::ApplicationLimited,
        "application",
        "The sender often had nothing to send: the disk reads or the CPU feed the network too slowly (see the disk and CPU figures).",
    );
    stream_hint(
        HintKind::CongestionWindowLimited,
        "congestion window",
        "TCP's congestion control set the pace: this is the network's limit for this many streams; more parallel streams get a larger share of a lossy or long path.",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1024.0 * 1024.0;

    #[test]
    fn names_the_server_disk_read() {
        let c = ThroughputComparison {
            memory_to_memory: Some(948.0 * MB),
            disk_to_memory: Some(512.0 * MB),
            memory_to_disk: Some(930.0 * MB),
            disk_to_disk: Some(500.0 * MB),
            reader: None,
        };
        let b = bottleneck(&c).unwrap();
        assert_eq!(b.limit, Limit::DiskRead);
        assert!(
            b.statement.starts_with("Of the variants, disk reads on the server (disk to memory) fall furthest below memory to memory: 54% of its rate (512 MiB/s of 948 MiB/s)."),
            "{}",
            b.statement
        );
    }

    #[test]
    fn upload_names_the_server_disk_write() {
        let c = ThroughputComparison {
            memory_to_memory: Some(100.0 * MB),
            memory_to_disk: Some(40.0 * MB),
            disk_to_memory: Some(80.0 * MB),
            reader: Some(Side::Client),
            ..Default::default()
        };
        let b = bottleneck(&c).unwrap();
        assert_eq!(b.limit, Limit::DiskWrite);
        assert!(
            b.statement
                .contains("file writes on the server (memory to disk) fall furthest below memory to memory: 40%"),
            "{}",
            b.statement
        );
        assert!(b.statement.contains("Disk reads on the client (disk to memory) reach 80%"), "{}", b.statement);
    }

    #[test]
    fn network_when_disks_keep_up() {
        let c = ThroughputComparison {
            memory_to_memory: Some(100.0 * MB),
            disk_to_memory: Some(99.0 * MB),
            memory_to_disk: Some(97.0 * MB),
            disk_to_disk: Some(95.0 * MB),
            reader: None,
        };
        let b = bottleneck(&c).unwrap();
        assert_eq!(b.limit, Limit::Network);
        assert!(b.statement.contains("95%"), "{}", b.statement);
    }

    #[test]
    fn disks_together_and_unknown_disk() {
        let c = ThroughputComparison {
            memory_to_memory: Some(100.0 * MB),
            disk_to_memory: Some(98.0 * MB),
            memory_to_disk: Some(96.0 * MB),
            disk_to_disk: Some(60.0 * MB),
            reader: None,
        };
        assert_eq!(bottleneck(&c).unwrap().limit, Limit::DisksTogether);
        let c = ThroughputComparison {
            memory_to_memory: Some(100.0 * MB),
            disk_to_disk: Some(60.0 * MB),
            ..Default::default()
        };
        assert_eq!(bottleneck(&c).unwrap().limit, Limit::Disks);
        assert!(bottleneck(&ThroughputComparison { memory_to_memory: Some(1.0), ..Default::default() }).is_none());
        assert!(bottleneck(&ThroughputComparison { disk_to_disk: Some(1.0), ..Default::default() }).is_none());
    }
}
