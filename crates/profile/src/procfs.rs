//! Parsers for the `/proc` files the sampler reads, as pure functions of
//! their text so they can be tested against fixtures from other kernels.
//!
//! Every counter here is cumulative since boot; the sampler turns pairs of
//! readings into rates. Field positions follow the kernel's
//! `Documentation/filesystems/proc.rst` and `Documentation/admin-guide/iostats.rst`.

use std::collections::HashMap;

use crate::error::{ProfileError, Result};

/// Jiffies (USER_HZ ticks) one CPU spent in each state.
///
/// `guest` and `guest_nice` are left out on purpose: the kernel already
/// counts them inside `user` and `nice` (proc.rst: "guest ... included in user").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.user + self.nice + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal
    }
}

/// One reading of `/proc/stat`.
#[derive(Debug, Clone, Default)]
pub(crate) struct StatCounters {
    pub all: CpuTimes,
    /// (core number, times); cores that are offline are absent.
    pub cores: Vec<(u32, CpuTimes)>,
    pub ctxt: u64,
    pub intr: u64,
    pub forks: u64,
    pub procs_running: u64,
    pub procs_blocked: u64,
}

fn parse_cpu_fields<'a>(mut it: impl Iterator<Item = &'a str>) -> CpuTimes {
    let mut next = || it.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    CpuTimes {
        user: next(),
        nice: next(),
        system: next(),
        idle: next(),
        iowait: next(),
        irq: next(),
        softirq: next(),
        steal: next(),
    }
}

pub(crate) fn parse_stat(text: &str) -> Result<StatCounters> {
    let mut out = StatCounters::default();
    let mut saw_cpu = false;
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let Some(key) = it.next() else { continue };
        match key {
            "cpu" => {
                out.all = parse_cpu_fields(it);
                saw_cpu = true;
            }
            k if k.starts_with("cpu") => {
                if let Ok(n) = k[3..].parse::<u32>() {
                    out.cores.push((n, parse_cpu_fields(it)));
                }
            }
            // "intr" is followed by one count per IRQ line; the first is the total.
            "intr" => out.intr = it.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            "ctxt" => out.ctxt = it.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            "processes" => out.forks = it.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            "procs_running" => out.procs_running = it.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            "procs_blocked" => out.procs_blocked = it.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            _ => {}
        }
    }
    if !saw_cpu {
        return Err(ProfileError::ProcFormat { path: "/proc/stat", detail: "no aggregate cpu line".into() });
    }
    Ok(out)
}

/// `/proc/loadavg`: "0.52 0.58 0.59 2/845 12345".
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct LoadCounters {
    pub one: f64,
    pub five: f64,
    pub fifteen: f64,
    pub runnable: u64,
    pub threads: u64,
}

pub(crate) fn parse_loadavg(text: &str) -> Result<LoadCounters> {
    let f: Vec<&str> = text.split_ascii_whitespace().collect();
    let bad = || ProfileError::ProcFormat { path: "/proc/loadavg", detail: format!("{text:?}") };
    if f.len() < 4 {
        return Err(bad());
    }
    let (runnable, threads) = f[3].split_once('/').ok_or_else(bad)?;
    Ok(LoadCounters {
        one: f[0].parse().map_err(|_| bad())?,
        five: f[1].parse().map_err(|_| bad())?,
        fifteen: f[2].parse().map_err(|_| bad())?,
        runnable: runnable.parse().unwrap_or(0),
        threads: threads.parse().unwrap_or(0),
    })
}

/// One device line of `/proc/diskstats` (iostats.rst fields 1, 3, 5, 7, 10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiskCounters {
    pub name: String,
    pub reads: u64,
    pub read_sectors: u64,
    pub writes: u64,
    pub write_sectors: u64,
    /// Milliseconds the device had I/O in flight ("field 10"), for utilisation.
    pub busy_ms: u64,
}

/// Devices that are memory, not disks: counting them would show a tmpfs
/// swap or a loop-mounted image as disk traffic twice.
pub(crate) fn is_virtual_disk(name: &str) -> bool {
    name.starts_with("loop") || name.starts_with("ram") || name.starts_with("zram")
}

pub(crate) fn parse_diskstats(text: &str) -> Vec<DiskCounters> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        // major minor name + at least the 11 classic fields.
        if f.len() < 14 || is_virtual_disk(f[2]) {
            continue;
        }
        let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
        out.push(DiskCounters {
            name: f[2].to_string(),
            reads: n(3),
            read_sectors: n(5),
            writes: n(7),
            write_sectors: n(9),
            busy_ms: n(12),
        });
    }
    out
}

/// One interface line of `/proc/net/dev`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NetCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errors: u64,
    pub rx_drops: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub tx_drops: u64,
}

pub(crate) fn parse_net_dev(text: &str) -> Vec<NetCounters> {
    let mut out = Vec::new();
    // The first two lines are headers; every other line is "name: 16 numbers".
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else { continue };
        let f: Vec<u64> = rest.split_ascii_whitespace().map(|v| v.parse().unwrap_or(0)).collect();
        if f.len() < 16 {
            continue;
        }
        out.push(NetCounters {
            name: name.trim().to_string(),
            rx_bytes: f[0],
            rx_packets: f[1],
            rx_errors: f[2],
            rx_drops: f[3],
            tx_bytes: f[8],
            tx_packets: f[9],
            tx_errors: f[10],
            tx_drops: f[11],
        });
    }
    out
}

/// `/proc/net/snmp` and `/proc/net/netstat` come as pairs of lines, a header
/// ("Tcp: RtoAlgorithm RtoMin ...") and the values ("Tcp: 1 200 ..."). Returns
/// name → value for the block whose prefix is `section` ("Tcp", "TcpExt").
pub(crate) fn parse_snmp_section(text: &str, section: &str) -> HashMap<String, i64> {
    let prefix = format!("{section}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&prefix));
    let mut out = HashMap::new();
    if let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        for (n, v) in names.split_ascii_whitespace().skip(1).zip(values.split_ascii_whitespace().skip(1)) {
            if let Ok(v) = v.parse::<i64>() {
                out.insert(n.to_string(), v);
            }
        }
    }
    out
}

/// The `/proc/meminfo` lines the report shows, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MemCounters {
    pub total: u64,
    pub available: u64,
    pub cached: u64,
    pub dirty: u64,
    pub writeback: u64,
}

pub(crate) fn parse_meminfo(text: &str) -> MemCounters {
    let mut m = MemCounters::default();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else { continue };
        let kib: u64 = rest.split_ascii_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let bytes = kib * 1024;
        match key {
            "MemTotal" => m.total = bytes,
            "MemAvailable" => m.available = bytes,
            "Cached" => m.cached = bytes,
            "Dirty" => m.dirty = bytes,
            "Writeback" => m.writeback = bytes,
            _ => {}
        }
    }
    m
}

/// The parts of `/proc/PID/stat` the sampler needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// Clock ticks in user mode (field 14).
    pub utime: u64,
    /// Clock ticks in kernel mode (field 15).
    pub stime: u64,
    /// Field 20.
    pub threads: u64,
}

pub(crate) fn parse_pid_stat(text: &str) -> Result<ProcStat> {
    // The command name (field 2) is in parentheses and may itself contain
    // spaces and parentheses, so fields are counted from the last ')'.
    let bad = || ProfileError::ProcFormat { path: "/proc/PID/stat", detail: format!("{text:?}") };
    let close = text.rfind(')').ok_or_else(bad)?;
    let f: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    // f[0] is field 3 (state), so field N is f[N - 3].
    if f.len() < 18 {
        return Err(bad());
    }
    let n = |field: usize| f[field - 3].parse::<u64>().unwrap_or(0);
    Ok(ProcStat { utime: n(14), stime: n(15), threads: n(20) })
}

/// `VmRSS` from `/proc/PID/status`, in bytes.
pub(crate) fn parse_status_rss(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_ascii_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// The command name from `/proc/PID/stat`'s second field.
pub(crate) fn parse_pid_comm(text: &str) -> Option<String> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    (close > open).then(|| text[open + 1..close].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 5 50 1000 10 1 4 0 0 0
cpu0 60 5 30 400 5 1 4 0 0 0
cpu1 40 0 20 600 5 0 0 0 0 0
intr 123456 1 2 3
ctxt 98765
btime 1700000000
processes 4242
procs_running 3
procs_blocked 1
softirq 5 1 1 1
";

    #[test]
    fn stat_lines() {
        let s = parse_stat(STAT).unwrap();
        assert_eq!(s.all.user, 100);
        assert_eq!(s.all.total(), 100 + 5 + 50 + 1000 + 10 + 1 + 4);
        assert_eq!(s.cores.len(), 2);
        assert_eq!(s.cores[1].0, 1);
        assert_eq!(s.cores[1].1.idle, 600);
        assert_eq!((s.intr, s.ctxt, s.forks, s.procs_running, s.procs_blocked), (123456, 98765, 4242, 3, 1));
        assert!(parse_stat("intr 1\n").is_err());
    }

    #[test]
    fn loadavg() {
        let l = parse_loadavg("0.52 0.58 0.59 2/845 12345\n").unwrap();
        assert_eq!((l.one, l.runnable, l.threads), (0.52, 2, 845));
        assert!(parse_loadavg("garbage").is_err());
    }

    #[test]
    fn diskstats_skips_loop_and_ram() {
        let text = "   7       0 loop0 1 0 8 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 763208 54656 48751442 2239557 64380 138961 59306584 245339 0 128284 2504382 47472 8 26493328 19360 3256 124
 253       0 zram0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
   8       1 sda1 10 0 80 1 20 0 160 2 0 3 3
";
        let d = parse_diskstats(text);
        assert_eq!(d.len(), 2);
        assert_eq!(
            d[0],
            DiskCounters {
                name: "vda".into(),
                reads: 763208,
                read_sectors: 48751442,
                writes: 64380,
                write_sectors: 59306584,
                busy_ms: 128284
            }
        );
        assert_eq!(d[1].name, "sda1");
    }

    #[test]
    fn net_dev() {
        let text = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 261925482486 8146900    0    0    0     0          0         0 261925482486 8146900    0    0    0     0       0          0
  eth0: 249114862   15353    1    2    0     0          0         0   969586   10027    3    4    0     0       0          0
";
        let n = parse_net_dev(text);
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].name, "lo");
        assert_eq!(n[1].rx_packets, 15353);
        assert_eq!((n[1].rx_errors, n[1].rx_drops, n[1].tx_errors, n[1].tx_drops), (1, 2, 3, 4));
        assert_eq!(n[1].tx_bytes, 969586);
    }

    #[test]
    fn snmp_sections() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RetransSegs CurrEstab\nTcp: 1 200 3930 -1\nUdp: InDatagrams\nUdp: 5\n";
        let t = parse_snmp_section(text, "Tcp");
        assert_eq!(t["RetransSegs"], 3930);
        assert_eq!(t["CurrEstab"], -1);
        assert!(parse_snmp_section(text, "TcpExt").is_empty());
    }

    #[test]
    fn meminfo() {
        let m = parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\nMemAvailable: 500 kB\nCached: 200 kB\nSwapCached: 0 kB\nDirty: 3 kB\nWriteback: 1 kB\n");
        assert_eq!(m, MemCounters { total: 1024000, available: 512000, cached: 204800, dirty: 3072, writeback: 1024 });
    }

    #[test]
    fn pid_stat_with_spaces_in_name() {
        let text = "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 7 0 12345 1000000 500 18446744073709551615";
        let p = parse_pid_stat(text).unwrap();
        assert_eq!(p, ProcStat { utime: 250, stime: 75, threads: 7 });
        assert_eq!(parse_pid_comm(text).as_deref(), Some("my (odd) prog"));
        assert_eq!(parse_status_rss("Name:\tx\nVmRSS:\t   2048 kB\n"), Some(2048 * 1024));
    }
}
