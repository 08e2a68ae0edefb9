//! How each of the FTPProfiler paper's tables bears on the verdict: the
//! tables stay (they are what a reader of the paper looks for), and each
//! gets a sentence saying whether it supports the verdict, argues against
//! it, or cannot tell — because machine-wide figures (load, busy cores,
//! iowait) include whatever else runs on the machine, while the verdict is
//! drawn from the Ferry processes and their streams.

use super::analysis::{Analysis, TableNote};
use super::{Profile, Side};
use crate::units::format_rate;
use crate::verdict::LimitKind;

fn note(table: &str, note: String) -> TableNote {
    TableNote { table: table.to_string(), note }
}

pub(crate) fn table_notes(profile: &Profile, a: &Analysis) -> Vec<TableNote> {
    let mut out = Vec::new();
    let v = a.verdict.as_ref();
    let limit = v.filter(|v| v.conclusive).and_then(|v| v.limit);
    let verdict_name = v.map(|v| v.name.clone()).unwrap_or_else(|| "not available".into());
    let rate = a.transfers.first().map(|t| t.avg_bytes_per_s).unwrap_or(0.0);
    let sides: Vec<(Side, &super::analysis::HostSummary)> =
        [Side::Client, Side::Server].into_iter().filter_map(|s| a.host(s).map(|h| (s, h))).collect();

    // Peak load and CPU.
    let mut load = Vec::new();
    for (s, h) in &sides {
        let cores = profile.host(*s).map(|x| x.host.cores).unwrap_or(0);
        load.push(format!(
            "the {} peaked at load {:.1} on {cores} cores with the CPUs {:.0}% busy on average",
            s.label(),
            h.load_1min.peak,
            h.cpu_busy_percent.avg
        ));
    }
    if !load.is_empty() {
        let relation = match limit {
            Some(LimitKind::Cpu | LimitKind::PageCacheCopy) => "It agrees with the verdict, which rests on the Ferry processes' own demand for CPU (their threads' time on and waiting for a CPU, their cgroup), not on these machine-wide figures.",
            Some(_) => "Load and busy cores count every program on the machine; the Ferry processes' own threads did not lack CPU enough to be the limit, so a high figure here is other work, not the bottleneck.",
            None => "Load and busy cores count every program on the machine, so on their own they cannot name Ferry's bottleneck.",
        };
        out.push(note("peak load and CPU", format!("{}. {relation}", capitalise(&load.join("; ")))));
    }

    // I/O transactions.
    let mut io = Vec::new();
    for (s, h) in &sides {
        io.push(format!(
            "the {} completed {:.0} I/O transactions per second on average (peak {:.0}), reading {} and writing {}",
            s.label(),
            h.io_transfers_per_s.avg,
            h.io_transfers_per_s.peak,
            format_rate(h.disk_read_bytes_per_s.avg),
            format_rate(h.disk_write_bytes_per_s.avg)
        ));
    }
    if !io.is_empty() {
        let relation = match limit {
            Some(LimitKind::DiskRead | LimitKind::DiskWrite) => "The verdict rests on the process's own threads waiting for the disk and its storage I/O; these device figures show the same I/O from the disk's side (devices throttled by a cgroup, or loop devices, may not show it as utilisation).".to_string(),
            Some(LimitKind::PageCacheCopy) => format!("The transfer ran at {}: what the disks did not write went into the page cache, which is why the limit is the copy, not the disk.", format_rate(rate)),
            _ => format!("Against the transfer's {} this shows how much of the data touched a disk; the verdict does not rest on it.", format_rate(rate)),
        };
        out.push(note("I/O transactions per second", format!("{}. {relation}", capitalise(&io.join("; ")))));
    }

    // Packets per second.
    let mut pk = Vec::new();
    for (s, h) in &sides {
        if let Some(i) = h.busiest_interface.as_ref().and_then(|n| h.interfaces.iter().find(|i| &i.name == n)) {
            pk.push(format!(
                "the {} received {:.0} and sent {:.0} packets per second on {} (softirq {:.1}% of all cores)",
                s.label(),
                i.rx_packets_per_s.avg,
                i.tx_packets_per_s.avg,
                i.name,
                h.cpu_softirq_percent.avg
            ));
        }
    }
    if !pk.is_empty() {
        let relation = match limit {
            Some(LimitKind::NetworkPath | LimitKind::Loss | LimitKind::TooFewStreams) => {
                "Packets follow the throughput the network allowed; the verdict rests on the streams' own accounting (congestion-window-limited time, retransmissions, RTT)."
            }
            Some(LimitKind::ReceiverWindow | LimitKind::SendBuffer) => {
                "Packets follow the throughput the window allowed; the verdict rests on the senders' window- and buffer-limited time."
            }
            _ => "Packets follow the throughput; they show how much work the network stacks did, not what held them back.",
        };
        out.push(note("packets per second", format!("{}. {relation}", capitalise(&pk.join("; ")))));
    }

    // Module shares (perf).
    let mut perf = Vec::new();
    for (s, _) in &sides {
        if let Some(p) = profile.host(*s).and_then(|h| h.perf.as_ref()) {
            let top: Vec<String> = p.groups.iter().take(3).map(|g| format!("{} {:.0}%", g.name, g.percent)).collect();
            perf.push(format!("on the {}: {}", s.label(), top.join(", ")));
        }
    }
    out.push(note(
        "module shares (perf)",
        if perf.is_empty() {
            "No CPU profile was taken (--perf adds one); the verdict does not need it.".into()
        } else {
            let relation = match limit {
                Some(LimitKind::PageCacheCopy) => {
                    "Memory copies and file-system/page-cache work at the top agree with a page-cache copy."
                }
                Some(LimitKind::Cpu) => "The heaviest modules say what the CPU was spent on.",
                _ => "With the limit elsewhere, these shares say what the CPU did, not what limited the transfer.",
            };
            format!("Heaviest modules {}. {relation}", perf.join("; "))
        },
    ));

    // Variants.
    if let (Some(c), Some(cmp)) = (&profile.comparison, &a.comparison) {
        let m2m = c.memory_to_memory.unwrap_or(0.0);
        let ratio = |v: Option<f64>| v.filter(|_| m2m > 0.0).map(|v| format!("{:.0}%", 100.0 * v / m2m));
        let parts: Vec<String> = [
            ("disk to memory", ratio(c.disk_to_memory)),
            ("memory to disk", ratio(c.memory_to_disk)),
            ("disk to disk", ratio(c.disk_to_disk)),
        ]
        .into_iter()
        .filter_map(|(n, r)| r.map(|r| format!("{n} {r}")))
        .collect();
        let relation = match (limit, cmp.limit) {
            (Some(LimitKind::PageCacheCopy), crate::bottleneck::Limit::DiskWrite) => "The slow memory-to-disk variant is the cost of writing the file; the samples show it was CPU in the page-cache copy, not the disk, that the writing cost.".to_string(),
            (Some(LimitKind::DiskWrite), crate::bottleneck::Limit::DiskWrite) | (Some(LimitKind::DiskRead), crate::bottleneck::Limit::DiskRead) => "The variants agree with the verdict.".to_string(),
            (Some(_), _) => format!("The variants measure which part costs throughput; the verdict ({verdict_name}) names the resource from the samples."),
            (None, _) => "The variants measure which part costs throughput, not which resource; the samples did not settle it.".to_string(),
        };
        out.push(note(
            "memory-to-memory vs disk-to-disk",
            format!("Against memory to memory ({}): {}. {relation}", format_rate(m2m), parts.join(", ")),
        ));
    }
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
