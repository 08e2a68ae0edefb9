//! The watched process (the Ferry server, or the client itself): what it
//! asked of the CPU, the disk and its cgroup, so the verdict can tell "this
//! end was short of CPU" or "its threads waited for the disk" from what the
//! rest of the machine was doing.
//!
//! System-wide figures cannot answer that on a shared machine: both cores
//! at 100% may be someone else's compiler, and iowait is only counted on an
//! otherwise idle core. Per-process figures can, and a real host offers
//! them without privileges beyond reading the process's own `/proc` files:
//!
//! * `/proc/PID/task/TID/schedstat`: each thread's time on a CPU and time
//!   runnable but waiting for one. A thread whose sum is close to the
//!   interval wanted a whole core, however much of it other programs took.
//! * `/proc/PID/task/TID/stat`: the thread's state, sampled several times
//!   per interval; `D` is an uninterruptible wait, in practice the disk (or
//!   the page cache's writeback throttling).
//! * `/proc/PID/io`: bytes the process made the storage read or write.
//! * the process's cgroup: a CPU quota (`cpu.cfs_quota_us` on cgroup v1,
//!   `cpu.max` on v2) and how often it was throttled (`cpu.stat`), and
//!   block-device throttling limits (`blkio.throttle.*`, `io.max`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::procfs::{self, CgroupCpuStat, IoCounters, SchedStat};

/// A block-device throughput limit of the process's cgroup.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoLimit {
    /// Device name (`loop3`, `vda`), or `major:minor` if it has none.
    pub device: String,
    pub read_bytes_per_s: Option<u64>,
    pub write_bytes_per_s: Option<u64>,
}

/// The limits the process's cgroups put on it, read once at the start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CgroupLimits {
    /// The cgroup whose CPU accounting is sampled (the process's own, or
    /// the ancestor with the tightest quota).
    pub cpu_cgroup: Option<String>,
    /// CPU quota in cores (0.2 = a fifth of one core); `null` = none.
    pub cpu_quota_cores: Option<f64>,
    /// The process's block-I/O cgroup.
    pub io_cgroup: Option<String>,
    /// Throughput limits of that cgroup, per device.
    pub io_limits: Vec<IoLimit>,
}

/// Cumulative counters of the watched process at one instant.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcessCounters {
    pub threads: HashMap<u32, SchedStat>,
    pub io: Option<IoCounters>,
    pub cgroup_cpu: Option<CgroupCpuStat>,
}

/// Thread states seen between two samples.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StateTally {
    pub looks: u32,
    pub running: u32,
    pub blocked: u32,
    /// Looks that found at least one thread running or runnable.
    pub any_running: u32,
}

/// The rates derived from two [`ProcessCounters`] and a tally.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProcessRates {
    pub run_delay_percent: f64,
    pub busiest_thread_percent: f64,
    pub busiest_thread_wait_percent: f64,
    pub threads_running: f64,
    pub threads_blocked: f64,
    pub runnable_percent: f64,
    pub storage_read_bytes_per_s: f64,
    pub storage_write_bytes_per_s: f64,
    pub cgroup_throttled_percent: Option<f64>,
    pub cgroup_throttled_ms_per_s: Option<f64>,
}

/// Follows one process: its threads, its I/O counters and its cgroup.
#[derive(Debug)]
pub(crate) struct ProcessWatch {
    pid: u32,
    cpu_stat: Option<PathBuf>,
    tally: StateTally,
    names: Vec<u32>,
    /// The sampling thread itself, when it watches its own process: it is
    /// always running when it looks, and is not the process's work.
    own_tid: Option<u32>,
}

impl ProcessWatch {
    pub fn new(pid: u32) -> ProcessWatch {
        let cpu_stat = cpu_cgroup(pid).and_then(|(dir, _)| {
            let f = dir.join("cpu.stat");
            f.exists().then_some(f)
        });
        ProcessWatch { pid, cpu_stat, tally: StateTally::default(), names: Vec::new(), own_tid: None }
    }

    /// The calling thread's id if it belongs to the watched process. Asked
    /// on every look, not remembered: the sampler is created on one thread
    /// (often a pool thread that later does the process's real work) and
    /// runs on another.
    fn looking_thread(&mut self) -> Option<u32> {
        if self.pid != std::process::id() {
            return None;
        }
        // "/proc/thread-self" links to "PID/task/TID".
        self.own_tid = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse().ok()));
        self.own_tid
    }

    fn task_dir(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/task", self.pid))
    }

    fn thread_ids(&mut self) -> &[u32] {
        let own = self.looking_thread();
        self.names.clear();
        if let Ok(dir) = std::fs::read_dir(self.task_dir()) {
            for e in dir.flatten() {
                if let Some(tid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                    if Some(tid) != own {
                        self.names.push(tid);
                    }
                }
            }
        }
        &self.names
    }

    /// Looks at every thread's state once (between samples, several times
    /// per interval: a thread blocked on the disk for most of the interval
    /// is then seen blocked in most looks).
    pub fn look(&mut self) {
        let dir = self.task_dir();
        let tids = self.thread_ids().to_vec();
        if tids.is_empty() {
            return;
        }
        self.tally.looks += 1;
        let mut any = false;
        for tid in tids {
            let Ok(text) = std::fs::read_to_string(dir.join(tid.to_string()).join("stat")) else { continue };
            match procfs::parse_stat_state(&text) {
                Some('R') => {
                    self.tally.running += 1;
                    any = true;
                }
                Some('D') => self.tally.blocked += 1,
                _ => {}
            }
        }
        if any {
            self.tally.any_running += 1;
        }
    }

    /// Reads the cumulative counters now.
    pub fn read(&mut self) -> ProcessCounters {
        let dir = self.task_dir();
        let mut threads = HashMap::new();
        for tid in self.thread_ids().to_vec() {
            if let Some(s) = std::fs::read_to_string(dir.join(tid.to_string()).join("schedstat"))
                .ok()
                .and_then(|t| procfs::parse_schedstat(&t))
            {
                threads.insert(tid, s);
            }
        }
        let io = std::fs::read_to_string(format!("/proc/{}/io", self.pid)).ok().map(|t| procfs::parse_pid_io(&t));
        let cgroup_cpu = self
            .cpu_stat
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|t| procfs::parse_cgroup_cpu_stat(&t));
        ProcessCounters { threads, io, cgroup_cpu }
    }

    /// Rates between `prev` and `cur` over `dt` seconds, and the states
    /// seen since the last call (the tally starts again).
    pub fn rates(&mut self, prev: &ProcessCounters, cur: &ProcessCounters, dt: f64) -> ProcessRates {
        let tally = std::mem::take(&mut self.tally);
        rates(prev, cur, dt, tally)
    }
}

pub(crate) fn rates(prev: &ProcessCounters, cur: &ProcessCounters, dt: f64, tally: StateTally) -> ProcessRates {
    let pct = |ns: u64| 100.0 * ns as f64 / 1e9 / dt;
    let mut wait_total = 0u64;
    let mut busiest = (0u64, 0u64);
    for (tid, now) in &cur.threads {
        // A thread born during the interval counts from zero.
        let before = prev.threads.get(tid).copied().unwrap_or_default();
        let run = now.run_ns.saturating_sub(before.run_ns);
        let wait = now.wait_ns.saturating_sub(before.wait_ns);
        wait_total += wait;
        if run + wait > busiest.0 + busiest.1 {
            busiest = (run, wait);
        }
    }
    let looks = tally.looks.max(1) as f64;
    let bytes = |f: fn(&IoCounters) -> u64| match (&prev.io, &cur.io) {
        (Some(p), Some(c)) => f(c).saturating_sub(f(p)) as f64 / dt,
        _ => 0.0,
    };
    let (throttled_percent, throttled_ms) = match (&prev.cgroup_cpu, &cur.cgroup_cpu) {
        (Some(p), Some(c)) => {
            let periods = c.nr_periods.saturating_sub(p.nr_periods);
            let throttled = c.nr_throttled.saturating_sub(p.nr_throttled);
            let ns = c.throttled_ns.saturating_sub(p.throttled_ns);
            (
                Some(if periods > 0 { 100.0 * throttled as f64 / periods as f64 } else { 0.0 }),
                Some(ns as f64 / 1e6 / dt),
            )
        }
        _ => (None, None),
    };
    ProcessRates {
        run_delay_percent: pct(wait_total),
        busiest_thread_percent: pct(busiest.0),
        busiest_thread_wait_percent: pct(busiest.1),
        threads_running: tally.running as f64 / looks,
        threads_blocked: tally.blocked as f64 / looks,
        runnable_percent: 100.0 * tally.any_running as f64 / looks,
        storage_read_bytes_per_s: bytes(|c| c.read_bytes),
        storage_write_bytes_per_s: bytes(|c| c.write_bytes.saturating_sub(c.cancelled_write_bytes)),
        cgroup_throttled_percent: throttled_percent,
        cgroup_throttled_ms_per_s: throttled_ms,
    }
}

/// The directory of a cgroup of `pid` for `controller`, and its path in
/// the hierarchy.
fn cgroup_dir(pid: u32, controller: &str) -> Option<(PathBuf, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let (path, v2) = procfs::parse_proc_cgroup(&text, controller)?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (mount, root) = procfs::parse_cgroup_mount(&mountinfo, if v2 { None } else { Some(controller) })?;
    let rel = path.strip_prefix(root.as_str()).unwrap_or(&path).trim_start_matches('/');
    Some((Path::new(&mount).join(rel), path))
}

/// The CPU cgroup to follow: the ancestor (or the group itself) with the
/// tightest quota, since that is the one that throttles; else the own group.
fn cpu_cgroup(pid: u32) -> Option<(PathBuf, String)> {
    let (dir, path) = cgroup_dir(pid, "cpu")?;
    let mut best: Option<(PathBuf, String, f64)> = None;
    let mut d = dir.clone();
    let mut p = path.clone();
    loop {
        if let Some(q) = quota_of(&d) {
            if best.as_ref().is_none_or(|b| q < b.2) {
                best = Some((d.clone(), p.clone(), q));
            }
        }
        if p == "/" || p.is_empty() || !d.pop() {
            break;
        }
        p = Path::new(&p).parent().map(|x| x.to_string_lossy().into_owned()).unwrap_or_else(|| "/".into());
    }
    Some(best.map(|b| (b.0, b.1)).unwrap_or((dir, path)))
}

fn quota_of(dir: &Path) -> Option<f64> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    if let Some(q) = read("cpu.cfs_quota_us") {
        return procfs::parse_cpu_quota(&q, read("cpu.cfs_period_us").as_deref());
    }
    read("cpu.max").and_then(|m| procfs::parse_cpu_quota(&m, None))
}

/// The device name of `major:minor` (`/sys/dev/block/7:3` links to `.../loop3`).
fn device_name(dev: &str) -> String {
    std::fs::read_link(format!("/sys/dev/block/{dev}"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dev.to_string())
}

/// The cgroup limits of `pid`, as far as they can be read.
pub(crate) fn cgroup_limits(pid: u32) -> Option<CgroupLimits> {
    let cpu = cpu_cgroup(pid);
    let io = cgroup_dir(pid, "blkio");
    if cpu.is_none() && io.is_none() {
        return None;
    }
    let cpu_quota_cores = cpu.as_ref().and_then(|(d, _)| quota_of(d));
    let io_limits = io
        .as_ref()
        .map(|(d, _)| {
            let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap_or_default();
            procfs::parse_io_limits(
                &read("blkio.throttle.read_bps_device"),
                &read("blkio.throttle.write_bps_device"),
                &read("io.max"),
            )
            .into_iter()
            .map(|(dev, r, w)| IoLimit { device: device_name(&dev), read_bytes_per_s: r, write_bytes_per_s: w })
            .collect()
        })
        .unwrap_or_default();
    Some(CgroupLimits { cpu_cgroup: cpu.map(|c| c.1), cpu_quota_cores, io_cgroup: io.map(|c| c.1), io_limits })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_from_threads_io_and_cgroup() {
        let mut prev = ProcessCounters::default();
        prev.threads.insert(1, SchedStat { run_ns: 1_000_000_000, wait_ns: 0 });
        prev.threads.insert(2, SchedStat { run_ns: 0, wait_ns: 0 });
        prev.io = Some(IoCounters { read_bytes: 0, write_bytes: 1000, ..Default::default() });
        prev.cgroup_cpu = Some(CgroupCpuStat { nr_periods: 10, nr_throttled: 0, throttled_ns: 0 });
        let mut cur = prev.clone();
        // Thread 1 ran 0.3 s and waited 0.15 s in 0.5 s; thread 2 ran 0.1 s;
        // thread 3 is new and ran 0.05 s.
        cur.threads.insert(1, SchedStat { run_ns: 1_300_000_000, wait_ns: 150_000_000 });
        cur.threads.insert(2, SchedStat { run_ns: 100_000_000, wait_ns: 50_000_000 });
        cur.threads.insert(3, SchedStat { run_ns: 50_000_000, wait_ns: 0 });
        cur.io = Some(IoCounters { read_bytes: 500, write_bytes: 2000, ..Default::default() });
        cur.cgroup_cpu = Some(CgroupCpuStat { nr_periods: 15, nr_throttled: 4, throttled_ns: 200_000_000 });
        let r = rates(&prev, &cur, 0.5, StateTally { looks: 4, running: 6, blocked: 2, any_running: 3 });
        assert!((r.busiest_thread_percent - 60.0).abs() < 1e-9);
        assert!((r.busiest_thread_wait_percent - 30.0).abs() < 1e-9);
        assert!((r.run_delay_percent - 40.0).abs() < 1e-9);
        assert_eq!((r.threads_running, r.threads_blocked, r.runnable_percent), (1.5, 0.5, 75.0));
        assert_eq!((r.storage_read_bytes_per_s, r.storage_write_bytes_per_s), (1000.0, 2000.0));
        assert_eq!(r.cgroup_throttled_percent, Some(80.0));
        assert!((r.cgroup_throttled_ms_per_s.unwrap() - 400.0).abs() < 1e-9);
    }

    #[test]
    fn watches_this_process() {
        let mut w = ProcessWatch::new(std::process::id());
        let a = w.read();
        w.look();
        let b = w.read();
        assert!(!b.threads.is_empty());
        // The looking thread is left out: it is always running when it looks.
        let own = w.own_tid.expect("own thread found");
        assert!(!b.threads.contains_key(&own), "{own} in {:?}", b.threads.keys());
        assert!(a.io.is_some() && b.io.is_some(), "/proc/self/io is readable");
        let r = w.rates(&a, &b, 0.03);
        assert!(r.threads_running <= (b.threads.len()) as f64, "{r:?}");
    }
}
