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
/// swap as disk traffic.
pub(crate) fn is_memory_disk(name: &str) -> bool {
    name.starts_with("ram") || name.starts_with("zram")
}

/// Loop devices are files of another disk: listed (a file system on one
/// can be the one a transfer reads or writes) but, like device-mapper
/// devices, kept out of the totals, whose bytes the backing disk counts.
pub(crate) fn is_loop_disk(name: &str) -> bool {
    name.starts_with("loop")
}

pub(crate) fn parse_diskstats(text: &str) -> Vec<DiskCounters> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        // major minor name + at least the 11 classic fields.
        if f.len() < 14 || is_memory_disk(f[2]) {
            continue;
        }
        let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
        // Unused loop devices (every distribution has eight) are noise.
        if is_loop_disk(f[2]) && n(3) == 0 && n(7) == 0 {
            continue;
        }
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
    pub shmem: u64,
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
            "Shmem" => m.shmem = bytes,
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

/// One thread's (or process's) scheduler accounting from
/// `/proc/PID/task/TID/schedstat`: nanoseconds on a CPU, nanoseconds
/// runnable but waiting for one (the run queue), and time slices
/// (Documentation/scheduler/sched-stats.rst, "/proc/<pid>/schedstat").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SchedStat {
    pub run_ns: u64,
    pub wait_ns: u64,
}

pub(crate) fn parse_schedstat(text: &str) -> Option<SchedStat> {
    let mut it = text.split_ascii_whitespace().map(|v| v.parse::<u64>().ok());
    Some(SchedStat { run_ns: it.next()??, wait_ns: it.next()?? })
}

/// The scheduler state letter of `/proc/PID/task/TID/stat` (field 3):
/// `R` running or runnable, `D` uninterruptible sleep (waiting for the
/// disk, or for dirty pages to be written back), `S` sleeping, ...
pub(crate) fn parse_stat_state(text: &str) -> Option<char> {
    let close = text.rfind(')')?;
    text[close + 1..].split_ascii_whitespace().next()?.chars().next()
}

/// `/proc/PID/io`: bytes through read/write system calls (sockets and
/// pipes included) and bytes the process caused to be read from or written
/// to storage (proc.rst, "/proc/<pid>/io"). `write_bytes` is counted when a
/// page is dirtied, so buffered writes count even before they reach the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct IoCounters {
    pub rchar: u64,
    pub wchar: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
}

pub(crate) fn parse_pid_io(text: &str) -> IoCounters {
    let mut io = IoCounters::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else { continue };
        let v = value.trim().parse::<u64>().unwrap_or(0);
        match key {
            "rchar" => io.rchar = v,
            "wchar" => io.wchar = v,
            "read_bytes" => io.read_bytes = v,
            "write_bytes" => io.write_bytes = v,
            "cancelled_write_bytes" => io.cancelled_write_bytes = v,
            _ => {}
        }
    }
    io
}

/// The path of a process's cgroup for `controller` (`cpu`, `blkio`) from
/// `/proc/PID/cgroup`: on cgroup v1 the line whose controller list names
/// it (`4:cpu,cpuacct:/batch`), otherwise the v2 line (`0::/batch`).
/// Returns the path and whether it is the v2 hierarchy.
pub(crate) fn parse_proc_cgroup(text: &str, controller: &str) -> Option<(String, bool)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
        if controllers.is_empty() {
            v2 = Some((path.to_string(), true));
        } else if controllers.split(',').any(|c| c == controller) {
            return Some((path.to_string(), false));
        }
    }
    v2
}

/// Where a cgroup hierarchy is mounted, from `/proc/self/mountinfo`: the
/// mount point and the hierarchy path mounted there (`/` unless this runs
/// in a container that sees only its own part). `controller` `None` asks
/// for the v2 (unified) hierarchy.
pub(crate) fn parse_cgroup_mount(mountinfo: &str, controller: Option<&str>) -> Option<(String, String)> {
    for line in mountinfo.lines() {
        // "36 25 0:31 / /sys/fs/cgroup/cpu rw,relatime shared:14 - cgroup cgroup rw,cpu"
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let l: Vec<&str> = left.split_ascii_whitespace().collect();
        let r: Vec<&str> = right.split_ascii_whitespace().collect();
        if l.len() < 5 || r.len() < 3 {
            continue;
        }
        let matches = match controller {
            None => r[0] == "cgroup2",
            Some(c) => r[0] == "cgroup" && r[2].split(',').any(|o| o == c),
        };
        if matches {
            return Some((unescape_mount(l[4]), unescape_mount(l[3])));
        }
    }
    None
}

/// mountinfo escapes spaces, tabs, newlines and backslashes as octal.
fn unescape_mount(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v as char);
            i += 4;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// CFS bandwidth accounting of a cgroup (`cpu.stat`): enforcement periods,
/// periods in which the group ran out of quota and was throttled, and the
/// total time its tasks were throttled. v1 gives `throttled_time` in ns,
/// v2 `throttled_usec`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CgroupCpuStat {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

pub(crate) fn parse_cgroup_cpu_stat(text: &str) -> CgroupCpuStat {
    let mut s = CgroupCpuStat::default();
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next().and_then(|v| v.parse::<u64>().ok())) else { continue };
        match k {
            "nr_periods" => s.nr_periods = v,
            "nr_throttled" => s.nr_throttled = v,
            "throttled_time" => s.throttled_ns = v,
            "throttled_usec" => s.throttled_ns = v.saturating_mul(1000),
            _ => {}
        }
    }
    s
}

/// A CPU quota in cores: v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`
/// (quota -1 = none), v2 `cpu.max` ("max 100000" = none, "20000 100000").
pub(crate) fn parse_cpu_quota(quota: &str, period: Option<&str>) -> Option<f64> {
    let mut it = quota.split_ascii_whitespace();
    let q = it.next()?;
    let p = match period {
        Some(p) => p.trim().parse::<f64>().ok()?,
        None => it.next()?.parse::<f64>().ok()?,
    };
    let q = q.parse::<f64>().ok().filter(|&q| q > 0.0)?;
    (p > 0.0).then_some(q / p)
}

/// Lines of `blkio.throttle.{read,write}_bps_device` (v1: `"7:3 16777216"`)
/// or `io.max` (v2: `"7:3 rbps=16777216 wbps=max riops=max wiops=max"`)
/// as (major:minor, read bytes/s, write bytes/s).
pub(crate) fn parse_io_limits(v1_read: &str, v1_write: &str, v2_max: &str) -> Vec<(String, Option<u64>, Option<u64>)> {
    type Limits = Vec<(String, Option<u64>, Option<u64>)>;
    fn set(out: &mut Limits, dev: &str, write: bool, v: u64) {
        let i = match out.iter().position(|e| e.0 == dev) {
            Some(i) => i,
            None => {
                out.push((dev.to_string(), None, None));
                out.len() - 1
            }
        };
        if write {
            out[i].2 = Some(v);
        } else {
            out[i].1 = Some(v);
        }
    }
    let mut out = Limits::new();
    for (text, write) in [(v1_read, false), (v1_write, true)] {
        for line in text.lines() {
            let mut it = line.split_ascii_whitespace();
            if let (Some(dev), Some(v)) = (it.next(), it.next().and_then(|v| v.parse::<u64>().ok())) {
                set(&mut out, dev, write, v);
            }
        }
    }
    for line in v2_max.lines() {
        let mut it = line.split_ascii_whitespace();
        let Some(dev) = it.next() else { continue };
        for kv in it {
            let Some((k, v)) = kv.split_once('=') else { continue };
            let Ok(v) = v.parse::<u64>() else { continue };
            match k {
                "rbps" => set(&mut out, dev, false, v),
                "wbps" => set(&mut out, dev, true, v),
                _ => {}
            }
        }
    }
    out
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
    fn diskstats_skips_unused_loop_and_ram() {
        let text = "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
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
        assert_eq!(
            m,
            MemCounters { total: 1024000, available: 512000, cached: 204800, dirty: 3072, writeback: 1024, shmem: 0 }
        );
    }

    #[test]
    fn pid_stat_with_spaces_in_name() {
        let text = "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 7 0 12345 1000000 500 18446744073709551615";
        let p = parse_pid_stat(text).unwrap();
        assert_eq!(p, ProcStat { utime: 250, stime: 75, threads: 7 });
        assert_eq!(parse_pid_comm(text).as_deref(), Some("my (odd) prog"));
        assert_eq!(parse_status_rss("Name:\tx\nVmRSS:\t   2048 kB\n"), Some(2048 * 1024));
    }
    #[test]
    fn schedstat_state_and_io() {
        assert_eq!(parse_schedstat("1500 300 7\n"), Some(SchedStat { run_ns: 1500, wait_ns: 300 }));
        assert_eq!(parse_schedstat("x"), None);
        assert_eq!(parse_stat_state("12 (a) b) D 1 2 3"), Some('D'));
        let io = parse_pid_io(
            "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n",
        );
        assert_eq!(
            io,
            IoCounters { rchar: 10, wchar: 20, read_bytes: 4096, write_bytes: 8192, cancelled_write_bytes: 0 }
        );
    }

    #[test]
    fn cgroups_v1_and_v2() {
        let v1 = "9:name=systemd:/\n7:blkio:/io-slow\n1:cpu,cpuacct:/batch/x\n0::/\n";
        assert_eq!(parse_proc_cgroup(v1, "cpu"), Some(("/batch/x".into(), false)));
        assert_eq!(parse_proc_cgroup(v1, "blkio"), Some(("/io-slow".into(), false)));
        assert_eq!(parse_proc_cgroup("0::/user.slice/a\n", "cpu"), Some(("/user.slice/a".into(), true)));
        let mi = "35 25 0:30 / /sys/fs/cgroup/cpu\\040x rw,relatime shared:13 - cgroup cgroup rw,cpu\n\
                  36 25 0:31 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        assert_eq!(parse_cgroup_mount(mi, Some("cpu")), Some(("/sys/fs/cgroup/cpu x".into(), "/".into())));
        assert_eq!(parse_cgroup_mount(mi, None), Some(("/sys/fs/cgroup/unified".into(), "/".into())));
        assert_eq!(parse_cgroup_mount(mi, Some("blkio")), None);
        let s = parse_cgroup_cpu_stat("nr_periods 100\nnr_throttled 40\nthrottled_time 2000000\n");
        assert_eq!(s, CgroupCpuStat { nr_periods: 100, nr_throttled: 40, throttled_ns: 2_000_000 });
        assert_eq!(
            parse_cgroup_cpu_stat("usage_usec 5\nnr_periods 3\nnr_throttled 1\nthrottled_usec 7\n").throttled_ns,
            7000
        );
        assert_eq!(parse_cpu_quota("20000", Some("100000")), Some(0.2));
        assert_eq!(parse_cpu_quota("-1", Some("100000")), None);
        assert_eq!(parse_cpu_quota("50000 100000", None), Some(0.5));
        assert_eq!(parse_cpu_quota("max 100000", None), None);
        let l = parse_io_limits("7:3 1000\n", "7:3 2000\n8:0 5\n", "");
        assert_eq!(l, vec![("7:3".into(), Some(1000), Some(2000)), ("8:0".into(), None, Some(5))]);
        assert_eq!(parse_io_limits("", "", "7:3 rbps=max wbps=300 riops=max\n"), vec![("7:3".into(), None, Some(300))]);
    }
}
