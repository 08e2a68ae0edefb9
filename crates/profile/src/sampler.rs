//! The system sampler: CPU, load, disks, network, TCP counters, memory and
//! optionally one process, read from `/proc` at a fixed interval.
//!
//! The same code runs on the server (started and stopped by `SITE PROFILE`)
//! and on the client, so both ends of a transfer are described in the same
//! terms. Cost per tick is a handful of small `/proc` reads on one thread
//! that sleeps in between; each tick's own cost is measured and reported
//! (`overhead`) so a reader can check that the profiler did not disturb what
//! it measured.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{ProfileError, Result};
use crate::perf::{PerfConfig, PerfRecording, PerfSummary};
use crate::process::{CgroupLimits, ProcessCounters, ProcessWatch};
use crate::procfs::{self, CpuTimes, DiskCounters, MemCounters, NetCounters, ProcStat, StatCounters};
use crate::streams::{StreamRegistry, StreamSample, StreamSeries};
use crate::sys;

/// Share of CPU time in each state over one interval, in percent (0–100).
/// For [`SystemSample::cpu`] it is the share of all cores together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    pub user: f64,
    pub nice: f64,
    pub system: f64,
    pub iowait: f64,
    pub irq: f64,
    pub softirq: f64,
    pub steal: f64,
    pub idle: f64,
}

impl CpuShare {
    /// Time doing work (iowait is idle time, so it is not busy).
    pub fn busy(&self) -> f64 {
        self.user + self.nice + self.system + self.irq + self.softirq + self.steal
    }

    /// Time in the kernel: system calls plus interrupt and softirq handling
    /// (where the TCP/IP receive path runs).
    pub fn kernel(&self) -> f64 {
        self.system + self.irq + self.softirq
    }

    fn from_delta(cur: &CpuTimes, prev: &CpuTimes) -> CpuShare {
        let d = |c: u64, p: u64| c.saturating_sub(p) as f64;
        let parts = [
            d(cur.user, prev.user),
            d(cur.nice, prev.nice),
            d(cur.system, prev.system),
            d(cur.iowait, prev.iowait),
            d(cur.irq, prev.irq),
            d(cur.softirq, prev.softirq),
            d(cur.steal, prev.steal),
            d(cur.idle, prev.idle),
        ];
        let total: f64 = parts.iter().sum();
        if total <= 0.0 {
            return CpuShare { idle: 100.0, ..CpuShare::default() };
        }
        let p = |x: f64| 100.0 * x / total;
        CpuShare {
            user: p(parts[0]),
            nice: p(parts[1]),
            system: p(parts[2]),
            iowait: p(parts[3]),
            irq: p(parts[4]),
            softirq: p(parts[5]),
            steal: p(parts[6]),
            idle: p(parts[7]),
        }
    }
}

/// One core's share, numbered as in `/proc/stat` (`cpu0`, `cpu1`...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CoreShare {
    pub core: u32,
    #[serde(flatten)]
    pub share: CpuShare,
}

/// `/proc/loadavg` at the end of the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadAvg {
    pub one: f64,
    pub five: f64,
    pub fifteen: f64,
    pub runnable: u64,
    pub threads: u64,
}

/// One block device over one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskRate {
    pub name: String,
    pub reads_per_s: f64,
    pub writes_per_s: f64,
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
    pub util_percent: f64,
    /// Device mapper / md devices sit on other disks; their traffic is
    /// already counted there, so totals leave them out.
    pub stacked: bool,
}

/// All physical disks together (stacked devices excluded): iostat's `tps`
/// and throughput, the "I/O transfers per second" of the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskTotal {
    pub transfers_per_s: f64,
    pub reads_per_s: f64,
    pub writes_per_s: f64,
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
}

/// One network interface over one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetRate {
    pub name: String,
    pub rx_bytes_per_s: f64,
    pub tx_bytes_per_s: f64,
    pub rx_packets_per_s: f64,
    pub tx_packets_per_s: f64,
    pub rx_drops_per_s: f64,
    pub tx_drops_per_s: f64,
    pub rx_errors_per_s: f64,
    pub tx_errors_per_s: f64,
}

/// System-wide TCP counters (`/proc/net/snmp` "Tcp", `/proc/net/netstat`
/// "TcpExt") as rates, plus the number of established connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpRates {
    pub in_segs_per_s: f64,
    pub out_segs_per_s: f64,
    pub retrans_segs_per_s: f64,
    pub in_errs_per_s: f64,
    pub out_rsts_per_s: f64,
    pub active_opens_per_s: f64,
    pub passive_opens_per_s: f64,
    pub established: i64,
    pub timeouts_per_s: f64,
    pub fast_retrans_per_s: f64,
    pub lost_retransmit_per_s: f64,
    pub syn_retrans_per_s: f64,
    pub ofo_queue_per_s: f64,
    pub backlog_drops_per_s: f64,
    pub rcvq_drops_per_s: f64,
    pub listen_drops_per_s: f64,
}

/// `/proc/meminfo` at the end of the interval, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub total_bytes: u64,
    pub available_bytes: u64,
    pub cached_bytes: u64,
    pub dirty_bytes: u64,
    pub writeback_bytes: u64,
    /// `Shmem`: tmpfs and shared memory (a tmpfs file's pages are here).
    pub shmem_bytes: u64,
}

impl From<MemCounters> for Memory {
    fn from(m: MemCounters) -> Self {
        Memory {
            total_bytes: m.total,
            available_bytes: m.available,
            cached_bytes: m.cached,
            dirty_bytes: m.dirty,
            writeback_bytes: m.writeback,
            shmem_bytes: m.shmem,
        }
    }
}

/// The watched process over one interval. CPU is in percent of one core,
/// as `top` shows it, so a process using two cores shows 200.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessSample {
    pub user_percent: f64,
    pub system_percent: f64,
    pub rss_bytes: u64,
    pub threads: u64,
    /// Time its threads were runnable but waited for a CPU, % of one core
    /// (all threads together): CPU the process wanted and did not get.
    pub run_delay_percent: f64,
    /// The thread that wanted the CPU most: its time on a CPU, % of one core.
    pub busiest_thread_percent: f64,
    /// ...and its time waiting for one; the sum near 100 means that thread
    /// needed a whole core.
    pub busiest_thread_wait_percent: f64,
    /// Threads running or runnable (state `R`), on average over the looks
    /// taken during the interval (the sampler's own thread left out).
    pub threads_running: f64,
    /// Threads in uninterruptible sleep (state `D`: waiting for the disk,
    /// or throttled while writing dirty pages), on average.
    pub threads_blocked: f64,
    /// Share of the looks that found at least one thread running or
    /// runnable, %: near 100 means the process always had CPU work.
    pub runnable_percent: f64,
    /// Bytes the process made the storage read (`/proc/PID/io` read_bytes).
    pub storage_read_bytes_per_s: f64,
    /// Bytes it dirtied for the storage to write (write_bytes minus
    /// cancelled_write_bytes; counted when dirtied, not when on disk).
    pub storage_write_bytes_per_s: f64,
    /// Share of the CPU cgroup's quota periods in which it was throttled, %;
    /// `null` without a readable `cpu.stat`.
    pub cgroup_throttled_percent: Option<f64>,
    /// Time the cgroup's tasks were held back by the quota, ms per second.
    pub cgroup_throttled_ms_per_s: Option<f64>,
}

/// Everything read at one tick; rates cover the `dt` seconds ending at `t`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemSample {
    pub t: f64,
    pub dt: f64,
    pub cpu: CpuShare,
    pub cores: Vec<CoreShare>,
    pub load: LoadAvg,
    pub context_switches_per_s: f64,
    pub interrupts_per_s: f64,
    pub forks_per_s: f64,
    pub procs_running: u64,
    pub procs_blocked: u64,
    pub disks: Vec<DiskRate>,
    pub disk_total: DiskTotal,
    pub nets: Vec<NetRate>,
    pub tcp: TcpRates,
    pub memory: Memory,
    pub process: Option<ProcessSample>,
}

/// The machine a profile was taken on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: String,
    pub kernel: String,
    pub os: String,
    pub cpu_model: String,
    pub cores: u32,
    pub mem_total_bytes: u64,
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

impl HostInfo {
    /// Describes the machine this code runs on.
    pub fn current() -> HostInfo {
        let os = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=")).map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_default();
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let cores = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| procfs::parse_stat(&t).ok())
            .map(|s| s.cores.len() as u32)
            .filter(|&n| n > 0)
            .unwrap_or_else(|| thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1));
        let mem = std::fs::read_to_string("/proc/meminfo").map(|t| procfs::parse_meminfo(&t)).unwrap_or_default();
        HostInfo {
            hostname: read_trimmed("/proc/sys/kernel/hostname"),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            os,
            cpu_model,
            cores,
            mem_total_bytes: mem.total,
        }
    }
}

/// The watched process, named once at the start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub pid: u32,
    pub command: String,
    /// CPU quota and block-device limits of its cgroups.
    pub cgroup: Option<CgroupLimits>,
}

/// What sampling cost: wall time of each tick's reads and arithmetic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplerOverhead {
    pub ticks: u64,
    pub mean_us: f64,
    pub max_us: f64,
}

/// One end's profile: the machine, its samples, its data streams, and its
/// perf summary if one was taken. This is what a server hands back over the
/// control channel (as JSON) and what [`Profile`](crate::Profile) holds for
/// each side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostProfile {
    pub host: HostInfo,
    /// Wall-clock time of `t = 0`, milliseconds since the Unix epoch; used to
    /// line up the two ends and the transfer's progress on one time axis.
    pub start_unix_ms: u64,
    pub interval_ms: u64,
    pub duration_s: f64,
    /// Sampling stopped early because `max_samples` was reached.
    pub truncated: bool,
    pub process: Option<ProcessInfo>,
    pub samples: Vec<SystemSample>,
    pub streams: Vec<StreamSeries>,
    pub perf: Option<PerfSummary>,
    /// Why there is no perf summary although one was asked for.
    pub perf_error: Option<String>,
    pub overhead: SamplerOverhead,
    /// Files that could not be read and similar; the samples are still valid
    /// but the named parts are zero.
    pub warnings: Vec<String>,
}

impl HostProfile {
    /// Parses a host profile sent by the other end (e.g. a server's reply to
    /// `SITE PROFILE STOP`).
    pub fn from_json(text: &str) -> Result<HostProfile> {
        Ok(serde_json::from_str(text)?)
    }

    pub fn to_json(&self) -> Result<String> {
        Ok(serde_json::to_string(self)?)
    }
}

/// One complete reading of every counter.
#[derive(Debug, Clone, Default)]
struct Counters {
    stat: StatCounters,
    load: procfs::LoadCounters,
    disks: Vec<DiskCounters>,
    nets: Vec<NetCounters>,
    tcp: HashMap<String, i64>,
    tcp_ext: HashMap<String, i64>,
    mem: MemCounters,
    process: Option<(ProcStat, u64, ProcessCounters)>,
}

#[derive(Debug, Clone, Copy)]
enum DiskKind {
    Whole { stacked: bool },
    Partition,
}

/// Reads the counters and turns consecutive readings into a
/// [`SystemSample`]. The [`Sampler`] drives one on its thread; use it
/// directly to take samples on your own schedule.
#[derive(Debug)]
pub struct SystemReader {
    pid: Option<u32>,
    watch: Option<ProcessWatch>,
    origin: Instant,
    prev: Counters,
    prev_at: Instant,
    buf: String,
    disk_kinds: HashMap<String, DiskKind>,
    hz: f64,
    warnings: Vec<String>,
}

impl SystemReader {
    /// Takes the first reading (rates need two). `process` adds that PID's
    /// CPU and memory to each sample.
    pub fn new(process: Option<u32>) -> Result<SystemReader> {
        let mut r = SystemReader {
            pid: process,
            watch: process.map(ProcessWatch::new),
            origin: Instant::now(),
            prev: Counters::default(),
            prev_at: Instant::now(),
            buf: String::with_capacity(16 * 1024),
            disk_kinds: HashMap::new(),
            hz: sys::clock_ticks_per_second() as f64,
            warnings: Vec::new(),
        };
        r.prev = r.read_counters()?;
        r.origin = Instant::now();
        r.prev_at = r.origin;
        Ok(r)
    }

    /// When the first reading was taken; samples' `t` counts from here.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Problems met so far (unreadable files), each reported once.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Reads all counters and returns the rates since the previous call
    /// (or since [`SystemReader::new`]).
    pub fn sample(&mut self) -> Result<SystemSample> {
        let cur = self.read_counters()?;
        let now = Instant::now();
        let dt = now.duration_since(self.prev_at).as_secs_f64().max(1e-6);
        let prev = std::mem::take(&mut self.prev);
        let s = self.rates(&prev, &cur, dt, now.duration_since(self.origin).as_secs_f64());
        self.prev = cur;
        self.prev_at = now;
        Ok(s)
    }

    /// Looks at the watched process's thread states (the sampler does this
    /// several times per interval; each sample reports the average).
    pub(crate) fn look(&mut self) {
        if let Some(w) = &mut self.watch {
            w.look();
        }
    }

    fn warn(&mut self, msg: String) {
        if !self.warnings.contains(&msg) {
            tracing::debug!("profiler: {msg}");
            self.warnings.push(msg);
        }
    }

    /// Reads a /proc file into the reusable buffer.
    fn load(&mut self, path: &str) -> std::io::Result<&str> {
        self.buf.clear();
        File::open(path)?.read_to_string(&mut self.buf)?;
        Ok(&self.buf)
    }

    fn load_optional(&mut self, path: &str) -> Option<String> {
        match self.load(path) {
            Ok(t) => Some(t.to_string()),
            Err(e) => {
                self.warn(format!("cannot read {path}: {e}"));
                None
            }
        }
    }

    fn read_counters(&mut self) -> Result<Counters> {
        let stat = {
            let t =
                self.load("/proc/stat").map_err(|source| ProfileError::Proc { path: "/proc/stat".into(), source })?;
            procfs::parse_stat(t)?
        };
        let mut c = Counters { stat, ..Counters::default() };
        if let Some(t) = self.load_optional("/proc/loadavg") {
            c.load = procfs::parse_loadavg(&t).unwrap_or_default();
        }
        if let Some(t) = self.load_optional("/proc/diskstats") {
            c.disks = procfs::parse_diskstats(&t);
        }
        if let Some(t) = self.load_optional("/proc/net/dev") {
            c.nets = procfs::parse_net_dev(&t);
        }
        if let Some(t) = self.load_optional("/proc/net/snmp") {
            c.tcp = procfs::parse_snmp_section(&t, "Tcp");
        }
        if let Some(t) = self.load_optional("/proc/net/netstat") {
            c.tcp_ext = procfs::parse_snmp_section(&t, "TcpExt");
        }
        if let Some(t) = self.load_optional("/proc/meminfo") {
            c.mem = procfs::parse_meminfo(&t);
        }
        if let Some(pid) = self.pid {
            let stat = self.load(&format!("/proc/{pid}/stat")).ok().and_then(|t| procfs::parse_pid_stat(t).ok());
            let rss = self.load(&format!("/proc/{pid}/status")).ok().and_then(procfs::parse_status_rss);
            let counters = self.watch.as_mut().map(|w| w.read()).unwrap_or_default();
            match stat {
                Some(s) => c.process = Some((s, rss.unwrap_or(0), counters)),
                None => self.warn(format!("process {pid} is gone")),
            }
        }
        Ok(c)
    }

    fn disk_kind(&mut self, name: &str) -> DiskKind {
        if let Some(k) = self.disk_kinds.get(name) {
            return *k;
        }
        // Whole disks are listed in /sys/block, partitions only under
        // /sys/class/block; counting both would count every byte twice.
        let kind = if procfs::is_loop_disk(name) {
            DiskKind::Whole { stacked: true }
        } else if !Path::new("/sys/block").exists() {
            DiskKind::Whole { stacked: false }
        } else if Path::new("/sys/block").join(name).exists() {
            let stacked = std::fs::read_dir(Path::new("/sys/block").join(name).join("slaves"))
                .map(|mut d| d.next().is_some())
                .unwrap_or(false);
            DiskKind::Whole { stacked }
        } else {
            DiskKind::Partition
        };
        self.disk_kinds.insert(name.to_string(), kind);
        kind
    }

    fn rates(&mut self, prev: &Counters, cur: &Counters, dt: f64, t: f64) -> SystemSample {
        let rate = |c: u64, p: u64| c.saturating_sub(p) as f64 / dt;
        let cpu = CpuShare::from_delta(&cur.stat.all, &prev.stat.all);
        let cores = cur
            .stat
            .cores
            .iter()
            .map(|(n, times)| {
                let before = prev.stat.cores.iter().find(|(m, _)| m == n).map(|(_, t)| *t).unwrap_or_default();
                CoreShare { core: *n, share: CpuShare::from_delta(times, &before) }
            })
            .collect();

        let mut disk_total = DiskTotal::default();
        let mut disks = Vec::new();
        for d in &cur.disks {
            let stacked = match self.disk_kind(&d.name) {
                DiskKind::Partition => continue,
                DiskKind::Whole { stacked } => stacked,
            };
            let Some(p) = prev.disks.iter().find(|p| p.name == d.name) else { continue };
            let r = DiskRate {
                name: d.name.clone(),
                reads_per_s: rate(d.reads, p.reads),
                writes_per_s: rate(d.writes, p.writes),
                // /proc/diskstats counts 512-byte sectors whatever the device's block size.
                read_bytes_per_s: rate(d.read_sectors, p.read_sectors) * 512.0,
                write_bytes_per_s: rate(d.write_sectors, p.write_sectors) * 512.0,
                util_percent: (rate(d.busy_ms, p.busy_ms) / 10.0).min(100.0),
                stacked,
            };
            if !stacked {
                disk_total.reads_per_s += r.reads_per_s;
                disk_total.writes_per_s += r.writes_per_s;
                disk_total.read_bytes_per_s += r.read_bytes_per_s;
                disk_total.write_bytes_per_s += r.write_bytes_per_s;
            }
            disks.push(r);
        }
        disk_total.transfers_per_s = disk_total.reads_per_s + disk_total.writes_per_s;

        let nets = cur
            .nets
            .iter()
            .filter_map(|n| {
                let p = prev.nets.iter().find(|p| p.name == n.name)?;
                Some(NetRate {
                    name: n.name.clone(),
                    rx_bytes_per_s: rate(n.rx_bytes, p.rx_bytes),
                    tx_bytes_per_s: rate(n.tx_bytes, p.tx_bytes),
                    rx_packets_per_s: rate(n.rx_packets, p.rx_packets),
                    tx_packets_per_s: rate(n.tx_packets, p.tx_packets),
                    rx_drops_per_s: rate(n.rx_drops, p.rx_drops),
                    tx_drops_per_s: rate(n.tx_drops, p.tx_drops),
                    rx_errors_per_s: rate(n.rx_errors, p.rx_errors),
                    tx_errors_per_s: rate(n.tx_errors, p.tx_errors),
                })
            })
            .collect();

        let snmp = |map: &HashMap<String, i64>, prev: &HashMap<String, i64>, key: &str| {
            let c = map.get(key).copied().unwrap_or(0).max(0) as u64;
            let p = prev.get(key).copied().unwrap_or(0).max(0) as u64;
            rate(c, p)
        };
        let tcp = TcpRates {
            in_segs_per_s: snmp(&cur.tcp, &prev.tcp, "InSegs"),
            out_segs_per_s: snmp(&cur.tcp, &prev.tcp, "OutSegs"),
            retrans_segs_per_s: snmp(&cur.tcp, &prev.tcp, "RetransSegs"),
            in_errs_per_s: snmp(&cur.tcp, &prev.tcp, "InErrs"),
            out_rsts_per_s: snmp(&cur.tcp, &prev.tcp, "OutRsts"),
            active_opens_per_s: snmp(&cur.tcp, &prev.tcp, "ActiveOpens"),
            passive_opens_per_s: snmp(&cur.tcp, &prev.tcp, "PassiveOpens"),
            established: cur.tcp.get("CurrEstab").copied().unwrap_or(0),
            timeouts_per_s: snmp(&cur.tcp_ext, &prev.tcp_ext, "TCPTimeouts"),
            fast_retrans_per_s: snmp(&cur.tcp_ext, &prev.tcp_ext, "TCPFastRetrans"),
            lost_retransmit_per_s: snmp(&cur.tcp_ext, &prev.tcp_ext, "TCPLostRetransmit"),
            syn_retrans_per_s: snmp(&cur.tcp_ext, &prev.tcp_ext, "TCPSynRetrans"),
            ofo_queue_per_s: snmp(&cur.tcp_ext, &prev.tcp_ext, "TCPOFOQueue"),
            backlog_drops_per_s: snmp(&cur.tcp_ext, &prev.tcp_ext, "TCPBacklogDrop"),
            rcvq_drops_per_s: snmp(&cur.tcp_ext, &prev.tcp_ext, "TCPRcvQDrop"),
            listen_drops_per_s: snmp(&cur.tcp_ext, &prev.tcp_ext, "ListenDrops"),
        };

        let process = match (&cur.process, &prev.process) {
            (Some((c, rss, cc)), Some((p, _, pc))) => {
                let r = self.watch.as_mut().map(|w| w.rates(pc, cc, dt)).unwrap_or_default();
                Some(ProcessSample {
                    user_percent: 100.0 * rate(c.utime, p.utime) / self.hz,
                    system_percent: 100.0 * rate(c.stime, p.stime) / self.hz,
                    rss_bytes: *rss,
                    threads: c.threads,
                    run_delay_percent: r.run_delay_percent,
                    busiest_thread_percent: r.busiest_thread_percent,
                    busiest_thread_wait_percent: r.busiest_thread_wait_percent,
                    threads_running: r.threads_running,
                    threads_blocked: r.threads_blocked,
                    runnable_percent: r.runnable_percent,
                    storage_read_bytes_per_s: r.storage_read_bytes_per_s,
                    storage_write_bytes_per_s: r.storage_write_bytes_per_s,
                    cgroup_throttled_percent: r.cgroup_throttled_percent,
                    cgroup_throttled_ms_per_s: r.cgroup_throttled_ms_per_s,
                })
            }
            _ => None,
        };

        SystemSample {
            t,
            dt,
            cpu,
            cores,
            load: LoadAvg {
                one: cur.load.one,
                five: cur.load.five,
                fifteen: cur.load.fifteen,
                runnable: cur.load.runnable,
                threads: cur.load.threads,
            },
            context_switches_per_s: rate(cur.stat.ctxt, prev.stat.ctxt),
            interrupts_per_s: rate(cur.stat.intr, prev.stat.intr),
            forks_per_s: rate(cur.stat.forks, prev.stat.forks),
            procs_running: cur.stat.procs_running,
            procs_blocked: cur.stat.procs_blocked,
            disks,
            disk_total,
            nets,
            tcp,
            memory: cur.mem.into(),
            process,
        }
    }
}

/// How to sample. `Default` gives a 500 ms interval, no process, no streams,
/// no perf, and at most 7,200 samples (an hour).
#[derive(Debug, Clone)]
pub struct SamplerConfig {
    /// Time between samples. 200 ms–1 s is the useful range: shorter makes
    /// the sampler itself visible in the CPU figures, longer smooths away
    /// the stalls a profile is meant to find. Values below 10 ms are raised to 10 ms.
    pub interval: Duration,
    /// A process whose own CPU and memory to sample (e.g. the server's PID).
    pub process: Option<u32>,
    /// Data sockets whose `TCP_INFO` to sample at each tick.
    pub streams: Option<StreamRegistry>,
    /// Also record a perf CPU profile for the duration of the sampling.
    pub perf: Option<PerfConfig>,
    /// Stop recording after this many samples, so that a profile nobody
    /// stops (a client that disconnected) cannot grow without bound.
    pub max_samples: usize,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            interval: Duration::from_millis(500),
            process: None,
            streams: None,
            perf: None,
            max_samples: 7_200,
        }
    }
}

impl SamplerConfig {
    pub fn every(interval: Duration) -> SamplerConfig {
        SamplerConfig { interval, ..SamplerConfig::default() }
    }

    pub fn with_process(mut self, pid: u32) -> Self {
        self.process = Some(pid);
        self
    }

    pub fn with_streams(mut self, registry: StreamRegistry) -> Self {
        self.streams = Some(registry);
        self
    }

    pub fn with_perf(mut self, perf: PerfConfig) -> Self {
        self.perf = Some(perf);
        self
    }
}

struct StopSignal {
    stopped: Mutex<bool>,
    wake: Condvar,
}

struct ThreadOutput {
    samples: Vec<SystemSample>,
    streams: Vec<StreamSeries>,
    overhead: SamplerOverhead,
    truncated: bool,
    warnings: Vec<String>,
}

/// A running sampler: a background thread taking a [`SystemSample`] (and
/// the registered streams' `TCP_INFO`) every interval until
/// [`Sampler::stop`] returns them all as a [`HostProfile`].
///
/// Dropping a sampler without stopping it ends the thread and any perf
/// recording and discards the samples.
pub struct Sampler {
    signal: Arc<StopSignal>,
    thread: Option<JoinHandle<ThreadOutput>>,
    perf: Option<PerfRecording>,
    perf_error: Option<String>,
    registry: Option<StreamRegistry>,
    host: HostInfo,
    process: Option<ProcessInfo>,
    start_unix_ms: u64,
    interval: Duration,
    origin: Instant,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler")
            .field("interval", &self.interval)
            .field("elapsed", &self.origin.elapsed())
            .field("perf", &self.perf.is_some())
            .finish()
    }
}

pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Sampler {
    /// Takes the first reading and starts the thread (and perf, if asked).
    /// Fails if `/proc/stat` is unreadable or the registry already has a
    /// sampler; a perf that cannot start is not an error here but ends up
    /// in [`HostProfile::perf_error`].
    pub fn start(config: SamplerConfig) -> Result<Sampler> {
        let interval = config.interval.max(Duration::from_millis(10));
        if let Some(reg) = &config.streams {
            reg.attach()?;
        }
        let reader = match SystemReader::new(config.process) {
            Ok(r) => r,
            Err(e) => {
                if let Some(reg) = &config.streams {
                    reg.detach();
                }
                return Err(e);
            }
        };
        let origin = reader.origin();
        let start_unix_ms = unix_ms(SystemTime::now());
        let process = config.process.map(|pid| ProcessInfo {
            pid,
            command: std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| procfs::parse_pid_comm(&t))
                .unwrap_or_default(),
            cgroup: crate::process::cgroup_limits(pid),
        });
        let (perf, perf_error) = match &config.perf {
            Some(pc) => match PerfRecording::start(pc) {
                Ok(p) => (Some(p), None),
                Err(e) => (None, Some(e.to_string())),
            },
            None => (None, None),
        };
        let signal = Arc::new(StopSignal { stopped: Mutex::new(false), wake: Condvar::new() });
        let thread_signal = Arc::clone(&signal);
        let registry = config.streams.clone();
        let max_samples = config.max_samples.max(1);
        let thread = thread::Builder::new()
            .name("ferry-profile".into())
            .spawn(move || run(reader, registry, interval, max_samples, thread_signal))
            .map_err(|e| ProfileError::Thread(e.to_string()));
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                if let Some(reg) = &config.streams {
                    reg.detach();
                }
                return Err(e);
            }
        };
        Ok(Sampler {
            signal,
            thread: Some(thread),
            perf,
            perf_error,
            registry: config.streams,
            host: HostInfo::current(),
            process,
            start_unix_ms,
            interval,
            origin,
        })
    }

    /// Time since the first reading.
    pub fn elapsed(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Takes a last sample (so the profile covers everything up to now),
    /// ends the thread, stops perf and summarises it, and returns all of it.
    pub fn stop(mut self) -> Result<HostProfile> {
        let out = self.join()?;
        let duration_s = self.origin.elapsed().as_secs_f64();
        let (perf, perf_error) = match self.perf.take() {
            Some(p) => match p.stop() {
                Ok(s) => (Some(s), None),
                Err(e) => (None, Some(e.to_string())),
            },
            None => (None, self.perf_error.take()),
        };
        Ok(HostProfile {
            host: self.host.clone(),
            start_unix_ms: self.start_unix_ms,
            interval_ms: self.interval.as_millis() as u64,
            duration_s,
            truncated: out.truncated,
            process: self.process.clone(),
            samples: out.samples,
            streams: out.streams,
            perf,
            perf_error,
            overhead: out.overhead,
            warnings: out.warnings,
        })
    }

    fn join(&mut self) -> Result<ThreadOutput> {
        {
            let mut stopped = self.signal.stopped.lock().unwrap_or_else(|e| e.into_inner());
            *stopped = true;
            self.signal.wake.notify_all();
        }
        let out = match self.thread.take() {
            Some(t) => t.join().map_err(|_| ProfileError::Thread("the sampler thread panicked".into())),
            None => Err(ProfileError::Thread("the sampler was already stopped".into())),
        };
        if let Some(reg) = self.registry.take() {
            reg.detach();
        }
        out
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.join();
        }
        // `self.perf`, if still there, stops perf in its own Drop.
    }
}

struct StreamTable {
    series: Vec<StreamSeries>,
    index: HashMap<u64, usize>,
}

impl StreamTable {
    fn entry(
        &mut self,
        id: u64,
        label: &str,
        local: Option<std::net::SocketAddr>,
        peer: Option<std::net::SocketAddr>,
        t: f64,
    ) -> &mut StreamSeries {
        let i = *self.index.entry(id).or_insert_with(|| {
            self.series.push(StreamSeries {
                id,
                label: label.to_string(),
                local: local.map(|a| a.to_string()),
                peer: peer.map(|a| a.to_string()),
                first_t: t,
                closed_t: None,
                samples: Vec::new(),
            });
            self.series.len() - 1
        });
        &mut self.series[i]
    }
}

fn run(
    mut reader: SystemReader,
    registry: Option<StreamRegistry>,
    interval: Duration,
    max_samples: usize,
    signal: Arc<StopSignal>,
) -> ThreadOutput {
    let origin = reader.origin();
    let mut samples = Vec::new();
    let mut streams = StreamTable { series: Vec::new(), index: HashMap::new() };
    let mut overhead = SamplerOverhead::default();
    let mut total_us = 0.0;
    let mut truncated = false;
    let mut next = origin + interval;
    let mut last_tick = origin;
    // Streams registered before the sampler started are part of it from t = 0.
    if let Some(reg) = &registry {
        for r in reg.read_all().0 {
            streams.entry(r.id, &r.label, r.local, r.peer, 0.0).samples.push(StreamSample { t: 0.0, info: r.info });
        }
    }
    // Thread states are looked at five times per interval (at most every
    // 20 ms, at least every 200 ms): a state is an instant, and one look per
    // interval would make "blocked on the disk 60% of the time" a coin toss.
    let look_every = (interval / 5).clamp(Duration::from_millis(20), Duration::from_millis(200));
    let mut look_cost_us = 0.0;
    loop {
        let mut next_look = Instant::now() + look_every;
        let stopping = loop {
            let mut stopped = signal.stopped.lock().unwrap_or_else(|e| e.into_inner());
            if *stopped {
                break true;
            }
            let now = Instant::now();
            if now >= next {
                break false;
            }
            if now >= next_look {
                drop(stopped);
                let t = Instant::now();
                reader.look();
                look_cost_us += t.elapsed().as_secs_f64() * 1e6;
                next_look = now + look_every;
                continue;
            }
            let until = next.min(next_look);
            stopped = signal.wake.wait_timeout(stopped, until - now).unwrap_or_else(|e| e.into_inner()).0;
            if *stopped {
                break true;
            }
        };
        // The final tick closes the window at the moment of stopping, unless
        // one was just taken (a sub-millisecond interval is all noise); a
        // profile always has at least one.
        if stopping && overhead.ticks > 0 && last_tick.elapsed() < Duration::from_millis(5) {
            break;
        }
        if samples.len() >= max_samples {
            truncated = true;
        } else {
            let tick_start = Instant::now();
            reader.look();
            match reader.sample() {
                Ok(s) => samples.push(s),
                Err(e) => reader.warn(format!("sample failed: {e}")),
            }
            if let Some(reg) = &registry {
                let (readings, closed) = reg.read_all();
                let t = Instant::now().duration_since(origin).as_secs_f64();
                for r in readings {
                    streams.entry(r.id, &r.label, r.local, r.peer, t).samples.push(StreamSample { t, info: r.info });
                }
                for c in closed {
                    let ct = c.at.duration_since(origin).as_secs_f64();
                    let s = streams.entry(c.id, &c.label, c.local, c.peer, ct);
                    if let Some(info) = c.last {
                        s.samples.push(StreamSample { t: ct, info });
                    }
                    s.closed_t = Some(ct);
                }
            }
            // A tick's cost includes the looks at thread states since the last one.
            let us = tick_start.elapsed().as_secs_f64() * 1e6 + std::mem::take(&mut look_cost_us);
            overhead.ticks += 1;
            total_us += us;
            overhead.max_us = overhead.max_us.max(us);
            last_tick = Instant::now();
        }
        if stopping {
            break;
        }
        next += interval;
        let now = Instant::now();
        if next <= now {
            // Fell behind (a suspended VM, a loaded machine): skip the missed
            // ticks instead of firing them back to back; `dt` records the gap.
            next = now + interval;
        }
    }
    if overhead.ticks > 0 {
        overhead.mean_us = total_us / overhead.ticks as f64;
    }
    ThreadOutput { samples, streams: streams.series, overhead, truncated, warnings: reader.warnings().to_vec() }
}
