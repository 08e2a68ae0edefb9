//! An optional CPU profile with `perf record -e cpu-clock`, summarised the
//! way the FTPProfiler paper's module table is: which share of the CPU
//! samples fell into the TCP/IP stack, the network driver, the file system,
//! memory copies, the scheduler, and Ferry's own code.
//!
//! `cpu-clock` is a software event (an hrtimer), so it works in VMs without
//! hardware performance counters, which is where Ferry is usually tested.
//! The recording is stopped with SIGINT, the one signal on which `perf
//! record` finishes its data file; the summary comes from one `perf report
//! --sort dso,sym --no-children`, which gives both the per-DSO table (by
//! summing) and the symbol table in a single pass over the data.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{ProfileError, Result};

/// What perf samples.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PerfTarget {
    /// Every CPU (`perf record -a`). The most complete picture of a data
    /// transfer: softirq work of the TCP receive path often runs on behalf of
    /// no process in particular, and `-p` would miss it.
    SystemWide,
    /// One process and its threads (`-p PID`).
    Pid(u32),
    /// Run a command under perf (`perf record ... -- cmd args`); recording
    /// ends when the command does.
    Command(Vec<String>),
}

impl PerfTarget {
    fn describe(&self) -> String {
        match self {
            PerfTarget::SystemWide => "system-wide".into(),
            PerfTarget::Pid(p) => format!("pid {p}"),
            PerfTarget::Command(c) => format!("command: {}", c.join(" ")),
        }
    }
}

/// How to record and summarise.
#[derive(Debug, Clone)]
pub struct PerfConfig {
    pub target: PerfTarget,
    /// Samples per second per CPU (`-F`). 999 rather than perf's default
    /// 4000 keeps the profiler's own cost near 1% and avoids lockstep with
    /// 1000 Hz timers.
    pub frequency_hz: u32,
    /// Record call chains (`-g`). The summary does not need them, but the
    /// data file (see `keep_data`) is then useful for `perf report -g`.
    pub call_graph: bool,
    /// Shared objects whose samples count as Ferry's own code; matched
    /// against the DSO's file name (without directory).
    pub own_dsos: Vec<String>,
    /// Where `perf.data` goes; a unique file in the temporary directory if unset.
    pub data_path: Option<PathBuf>,
    /// Keep the data file after summarising (it is deleted otherwise).
    pub keep_data: bool,
    /// The perf executable.
    pub perf_binary: PathBuf,
    /// Length of the symbol table in the summary.
    pub top_symbols: usize,
}

impl PerfConfig {
    pub fn new(target: PerfTarget) -> PerfConfig {
        let mut own = vec!["ferry".to_string()];
        if let Some(exe) =
            std::env::current_exe().ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        {
            if !own.contains(&exe) {
                own.push(exe);
            }
        }
        PerfConfig {
            target,
            frequency_hz: 999,
            call_graph: true,
            own_dsos: own,
            data_path: None,
            keep_data: false,
            perf_binary: PathBuf::from("perf"),
            top_symbols: 25,
        }
    }

    pub fn system_wide() -> PerfConfig {
        PerfConfig::new(PerfTarget::SystemWide)
    }

    pub fn pid(pid: u32) -> PerfConfig {
        PerfConfig::new(PerfTarget::Pid(pid))
    }
}

/// The paper's "module" classes. Kernel symbols are classified by name
/// prefix and kernel-module DSO, user-space samples by shared object (with
/// C-library `memcpy`/`memmove` counted as memory copies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleGroup {
    TcpIp,
    NetDriver,
    FileSystem,
    BlockIo,
    MemoryCopy,
    SchedulerIdle,
    Syscall,
    OtherKernel,
    Ferry,
    UserLibraries,
    OtherUser,
}

impl ModuleGroup {
    pub const ALL: [ModuleGroup; 11] = [
        ModuleGroup::TcpIp,
        ModuleGroup::NetDriver,
        ModuleGroup::FileSystem,
        ModuleGroup::BlockIo,
        ModuleGroup::MemoryCopy,
        ModuleGroup::SchedulerIdle,
        ModuleGroup::Syscall,
        ModuleGroup::OtherKernel,
        ModuleGroup::Ferry,
        ModuleGroup::UserLibraries,
        ModuleGroup::OtherUser,
    ];

    /// The name the report shows.
    pub fn label(self) -> &'static str {
        match self {
            ModuleGroup::TcpIp => "TCP/IP stack",
            ModuleGroup::NetDriver => "network driver (NIC, virtio, loopback)",
            ModuleGroup::FileSystem => "file system & page cache",
            ModuleGroup::BlockIo => "block layer & disk driver",
            ModuleGroup::MemoryCopy => "memory copies",
            ModuleGroup::SchedulerIdle => "scheduler & idle",
            ModuleGroup::Syscall => "system-call entry/exit",
            ModuleGroup::OtherKernel => "other kernel",
            ModuleGroup::Ferry => "Ferry's own code",
            ModuleGroup::UserLibraries => "C library & other shared libraries",
            ModuleGroup::OtherUser => "other user space",
        }
    }
}

/// Share of samples of one module class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupShare {
    pub group: ModuleGroup,
    pub name: String,
    pub percent: f64,
    pub samples: u64,
    /// The class's heaviest symbols, so a reader can check the classification.
    pub examples: Vec<String>,
}

/// Share of samples of one shared object (`[kernel.kallsyms]` is the kernel).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DsoShare {
    pub dso: String,
    pub percent: f64,
    pub samples: u64,
}

/// Share of samples of one symbol (self time, no children).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SymbolShare {
    pub symbol: String,
    pub dso: String,
    pub kernel: bool,
    pub group: ModuleGroup,
    pub percent: f64,
    pub samples: u64,
}

/// A perf profile reduced to the report's three tables.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PerfSummary {
    pub target: String,
    pub event: String,
    pub frequency_hz: u32,
    pub samples: u64,
    pub duration_s: f64,
    /// Share of samples taken in kernel mode.
    pub kernel_percent: f64,
    pub groups: Vec<GroupShare>,
    pub dsos: Vec<DsoShare>,
    pub symbols: Vec<SymbolShare>,
}

/// Whether `perf` can be run at all (the Debian wrapper exits non-zero when
/// the tools for the running kernel are missing, so this runs it).
pub fn perf_available(perf_binary: &Path) -> Result<()> {
    let out = Command::new(perf_binary).arg("--version").stdin(Stdio::null()).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ProfileError::PerfMissing
        } else {
            ProfileError::io(format!("running {}", perf_binary.display()), e)
        }
    })?;
    if !out.status.success() {
        return Err(ProfileError::PerfFailed {
            step: "perf --version",
            status: out.status.to_string(),
            stderr: tail(&String::from_utf8_lossy(&out.stderr)),
        });
    }
    Ok(())
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(6)..].join("\n")
}

static DATA_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A `perf record` running in the background.
#[derive(Debug)]
pub struct PerfRecording {
    child: Option<Child>,
    config: PerfConfig,
    data: PathBuf,
    stderr_path: PathBuf,
    started: Instant,
}

impl PerfRecording {
    /// Starts `perf record`. Waits a moment so that a perf that cannot run
    /// (missing, not permitted, PID gone) fails here with its own message
    /// rather than at `stop`.
    pub fn start(config: &PerfConfig) -> Result<PerfRecording> {
        perf_available(&config.perf_binary)?;
        let data = config.data_path.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!(
                "ferry-perf-{}-{}.data",
                std::process::id(),
                DATA_COUNTER.fetch_add(1, Ordering::Relaxed)
            ))
        });
        let stderr_path = data.with_extension("stderr");
        let stderr =
            File::create(&stderr_path).map_err(|source| ProfileError::Write { path: stderr_path.clone(), source })?;
        let mut cmd = Command::new(&config.perf_binary);
        cmd.args(["record", "-e", "cpu-clock", "-F"]).arg(config.frequency_hz.to_string());
        if config.call_graph {
            cmd.arg("-g");
        }
        cmd.arg("-o").arg(&data);
        match &config.target {
            PerfTarget::SystemWide => {
                cmd.arg("-a");
            }
            PerfTarget::Pid(pid) => {
                cmd.arg("-p").arg(pid.to_string());
            }
            PerfTarget::Command(args) => {
                cmd.arg("--").args(args);
            }
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
        let child = cmd.spawn().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ProfileError::PerfMissing
            } else {
                ProfileError::io("starting perf record", e)
            }
        })?;
        let mut rec =
            PerfRecording { child: Some(child), config: config.clone(), data, stderr_path, started: Instant::now() };
        let deadline = Instant::now() + Duration::from_millis(250);
        while Instant::now() < deadline {
            let status = rec.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = status {
                if !status.success() || !matches!(rec.config.target, PerfTarget::Command(_)) {
                    rec.child = None;
                    return Err(rec.failure("perf record", status));
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Ok(rec)
    }

    fn failure(&self, step: &'static str, status: ExitStatus) -> ProfileError {
        ProfileError::PerfFailed {
            step,
            status: status.to_string(),
            stderr: tail(&std::fs::read_to_string(&self.stderr_path).unwrap_or_default()),
        }
    }

    /// Interrupts the recording (SIGINT), then summarises it.
    pub fn stop(mut self) -> Result<PerfSummary> {
        let duration = self.started.elapsed();
        self.interrupt();
        self.finish(duration)
    }

    /// Waits until a [`PerfTarget::Command`] ends by itself, then summarises.
    pub fn wait(mut self) -> Result<PerfSummary> {
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
        let duration = self.started.elapsed();
        self.finish(duration)
    }

    fn interrupt(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        // perf exits with status 130 after SIGINT, having written its data.
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
            }
        }
    }

    fn finish(&mut self, duration: Duration) -> Result<PerfSummary> {
        let result = summarize(&self.data, &self.config).map(|mut s| {
            s.duration_s = duration.as_secs_f64();
            s.target = self.config.target.describe();
            s
        });
        let result = match result {
            // An empty or truncated file usually means perf record itself
            // failed; its stderr says why better than perf report does.
            Err(ProfileError::PerfFailed { step: "perf report", .. }) | Err(ProfileError::PerfParse(_))
                if !std::fs::read_to_string(&self.stderr_path).unwrap_or_default().contains("Captured and wrote") =>
            {
                Err(ProfileError::PerfFailed {
                    step: "perf record",
                    status: "no data written".into(),
                    stderr: tail(&std::fs::read_to_string(&self.stderr_path).unwrap_or_default()),
                })
            }
            r => r,
        };
        let _ = std::fs::remove_file(&self.stderr_path);
        if !self.config.keep_data {
            let _ = std::fs::remove_file(&self.data);
            let _ = std::fs::remove_file(self.data.with_extension("data.old"));
        }
        result
    }
}

impl Drop for PerfRecording {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.interrupt();
            let _ = std::fs::remove_file(&self.stderr_path);
            if !self.config.keep_data {
                let _ = std::fs::remove_file(&self.data);
            }
        }
    }
}

/// Records for a fixed time (the brief's `perf record ... -- sleep N`).
pub fn record_for(config: &PerfConfig, duration: Duration) -> Result<PerfSummary> {
    let rec = PerfRecording::start(config)?;
    std::thread::sleep(duration);
    rec.stop()
}

/// Runs `perf report` on a data file and summarises it.
pub fn summarize(data: &Path, config: &PerfConfig) -> Result<PerfSummary> {
    let out = Command::new(&config.perf_binary)
        .arg("report")
        .arg("-i")
        .arg(data)
        .args(["--stdio", "--no-children", "--sort", "dso,sym", "-g", "none", "-n", "--force", "-t", "\t"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ProfileError::PerfMissing
            } else {
                ProfileError::io("running perf report", e)
            }
        })?;
    if !out.status.success() {
        return Err(ProfileError::PerfFailed {
            step: "perf report",
            status: out.status.to_string(),
            stderr: tail(&String::from_utf8_lossy(&out.stderr)),
        });
    }
    let mut s = parse_report(&String::from_utf8_lossy(&out.stdout), &config.own_dsos, config.top_symbols)?;
    s.frequency_hz = config.frequency_hz;
    Ok(s)
}

struct Row {
    percent: f64,
    samples: Option<u64>,
    dso: String,
    symbol: String,
    kernel: bool,
}

const MARKERS: [&str; 5] = ["[k]", "[.]", "[g]", "[u]", "[H]"];

fn parse_row(line: &str, tabbed: bool, has_samples: bool) -> Option<Row> {
    let (percent, samples, dso, marked) = if tabbed {
        let cols: Vec<&str> = line.split('\t').map(str::trim).collect();
        if has_samples {
            if cols.len() < 4 {
                return None;
            }
            (cols[0], cols[1].parse().ok(), cols[2].to_string(), cols[3..].join(" "))
        } else {
            if cols.len() < 3 {
                return None;
            }
            (cols[0], None, cols[1].to_string(), cols[2..].join(" "))
        }
    } else {
        // "    79.51%           291  [kernel.kallsyms]     [k] read_zero"
        let line = line.trim_start();
        let (percent, rest) = line.split_once(char::is_whitespace)?;
        let mut rest = rest.trim_start();
        let mut samples = None;
        if has_samples {
            let (n, r) = rest.split_once(char::is_whitespace)?;
            samples = n.parse().ok();
            rest = r.trim_start();
        }
        let pos = MARKERS.iter().filter_map(|m| rest.find(&format!(" {m} ")).or_else(|| rest.find(m))).min()?;
        (percent, samples, rest[..pos].trim().to_string(), rest[pos..].trim().to_string())
    };
    let percent: f64 = percent.trim_end_matches('%').parse().ok()?;
    let (marker, symbol) = match MARKERS.iter().find(|m| marked.starts_with(*m)) {
        Some(m) => (*m, marked[m.len()..].trim().to_string()),
        None => ("[.]", marked.trim().to_string()),
    };
    Some(Row { percent, samples, dso, symbol, kernel: marker == "[k]" || marker == "[g]" })
}

fn parse_count(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1_000.0),
        'M' => (&s[..s.len() - 1], 1_000_000.0),
        _ => (s, 1.0),
    };
    num.parse::<f64>().ok().map(|v| (v * mul) as u64)
}

/// Parses the text of `perf report --stdio --no-children --sort dso,sym
/// [-n] [-t SEP]` and builds the summary tables. `own_dsos` names Ferry's
/// binaries; `top` bounds the symbol table.
pub fn parse_report(text: &str, own_dsos: &[String], top: usize) -> Result<PerfSummary> {
    let mut event = String::new();
    let mut header_samples = None;
    let mut tabbed = false;
    let mut has_samples = false;
    let mut saw_header = false;
    let mut rows = Vec::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix('#') {
            let h = h.trim_start();
            if let Some(rest) = h.strip_prefix("Samples:") {
                // "Samples: 2K of event 'cpu-clock'"
                let (count, ev) = rest.split_once("of event").unwrap_or((rest, ""));
                header_samples = parse_count(count);
                event = ev.trim().trim_matches('\'').to_string();
            } else if h.starts_with("Overhead") {
                saw_header = true;
                tabbed = h.contains('\t');
                has_samples = h.contains("Samples");
                if !h.contains("Shared Object") || !h.contains("Symbol") {
                    return Err(ProfileError::PerfParse("the report must be sorted by dso,sym".into()));
                }
            }
            continue;
        }
        if line.trim().is_empty() || !saw_header {
            continue;
        }
        if let Some(r) = parse_row(line, tabbed, has_samples) {
            rows.push(r);
        }
    }
    if !saw_header {
        return Err(ProfileError::PerfParse("no \"# Overhead\" header line (no samples recorded?)".into()));
    }
    let total: u64 =
        if has_samples { rows.iter().filter_map(|r| r.samples).sum() } else { header_samples.unwrap_or(0) };
    let samples_of = |r: &Row| r.samples.unwrap_or_else(|| (r.percent * total as f64 / 100.0).round() as u64);

    let mut dsos: Vec<DsoShare> = Vec::new();
    let mut groups: Vec<(ModuleGroup, f64, u64, Vec<String>)> = Vec::new();
    let mut symbols = Vec::new();
    let mut kernel_percent = 0.0;
    for r in &rows {
        let n = samples_of(r);
        if r.kernel {
            kernel_percent += r.percent;
        }
        match dsos.iter_mut().find(|d| d.dso == r.dso) {
            Some(d) => {
                d.percent += r.percent;
                d.samples += n;
            }
            None => dsos.push(DsoShare { dso: r.dso.clone(), percent: r.percent, samples: n }),
        }
        let group = classify(&r.dso, &r.symbol, r.kernel, own_dsos);
        match groups.iter_mut().find(|g| g.0 == group) {
            Some(g) => {
                g.1 += r.percent;
                g.2 += n;
                if g.3.len() < 3 && !g.3.contains(&r.symbol) {
                    g.3.push(r.symbol.clone());
                }
            }
            None => groups.push((group, r.percent, n, vec![r.symbol.clone()])),
        }
        if symbols.len() < top {
            symbols.push(SymbolShare {
                symbol: r.symbol.clone(),
                dso: r.dso.clone(),
                kernel: r.kernel,
                group,
                percent: r.percent,
                samples: n,
            });
        }
    }
    dsos.sort_by(|a, b| b.percent.total_cmp(&a.percent));
    groups.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(PerfSummary {
        target: String::new(),
        event,
        frequency_hz: 0,
        samples: total,
        duration_s: 0.0,
        kernel_percent,
        groups: groups
            .into_iter()
            .map(|(group, percent, samples, examples)| GroupShare {
                group,
                name: group.label().to_string(),
                percent,
                samples,
                examples,
            })
            .collect(),
        dsos,
        symbols,
    })
}

/// Compiler suffixes on local symbols (`tcp_sendmsg_locked.isra.0`,
/// `foo.constprop.0`, `bar.cold`) say nothing about what the code is.
fn base_symbol(sym: &str) -> &str {
    sym.split_once('.').map(|(b, _)| b).unwrap_or(sym)
}

fn starts_with_any(s: &str, prefixes: &[&str]) -> bool {
    prefixes.iter().any(|p| s.starts_with(p))
}

const MEMCOPY: &[&str] = &[
    "copy_user",
    "__copy_user",
    "rep_movs",
    "memcpy",
    "__memcpy",
    "memmove",
    "__memmove",
    "_copy_to_iter",
    "_copy_from_iter",
    "copy_to_iter",
    "copy_from_iter",
    "copy_page_to_iter",
    "copy_page_from_iter",
    "copy_folio_from_iter",
    "copy_folio_to_iter",
    "copyin",
    "copyout",
    "skb_copy_datagram",
    "csum_partial_copy",
    "simple_copy_to_iter",
];

const NET_DRIVER: &[&str] = &[
    "virtnet_",
    "virtqueue_",
    "vring_",
    "vp_notify",
    "virtio_net",
    "__virtio_net",
    "try_fill_recv",
    "detach_buf",
    "free_old_xmit",
    "start_xmit",
    "receive_buf",
    "loopback_",
    "blackhole_netdev",
    "veth_",
    "tun_",
    "tap_",
    "macvlan_",
    "ipvlan_",
    "bond_",
    "br_",
    "e1000",
    "igb_",
    "igc_",
    "ixgbe",
    "i40e_",
    "ice_",
    "mlx4_",
    "mlx5",
    "bnxt_",
    "ena_",
    "gve_",
    "xennet_",
    "vmxnet3_",
    "netvsc_",
    "iowrite",
    "ioread",
];

const NET_DRIVER_MODULES: &[&str] = &[
    "virtio_net",
    "veth",
    "tun",
    "e1000",
    "e1000e",
    "igb",
    "ixgbe",
    "i40e",
    "ice",
    "mlx4_en",
    "mlx5_core",
    "bnxt_en",
    "ena",
    "gve",
    "vmxnet3",
    "hv_netvsc",
    "xen_netfront",
    "bridge",
    "bonding",
    "macvlan",
];

const FS_MODULES: &[&str] = &["ext4", "xfs", "btrfs", "jbd2", "nfs", "nfsv4", "overlay", "fuse", "zfs", "f2fs"];

const BLOCK_MODULES: &[&str] =
    &["virtio_blk", "nvme", "nvme_core", "sd_mod", "scsi_mod", "ahci", "libata", "dm_mod", "md_mod"];

const BLOCK_IO: &[&str] = &[
    "blk_",
    "__blk_",
    "bio_",
    "__bio",
    "submit_bio",
    "__submit_bio",
    "virtblk_",
    "virtio_queue_rq",
    "nvme_",
    "scsi_",
    "sd_",
    "dd_",
    "bfq_",
    "kyber_",
    "ata_",
    "ahci_",
    "dm_",
    "md_",
    "elv_",
];

const FILE_SYSTEM: &[&str] = &[
    "ext4_",
    "__ext4",
    "ext2_",
    "xfs_",
    "btrfs_",
    "jbd2",
    "__jbd2",
    "filemap_",
    "__filemap",
    "generic_perform_write",
    "generic_file_",
    "generic_write",
    "iomap_",
    "folio",
    "__folio",
    "filemap",
    "page_cache",
    "pagecache",
    "add_to_page_cache",
    "mpage_",
    "vfs_",
    "__vfs_",
    "fsnotify",
    "__fsnotify",
    "do_splice",
    "splice_",
    "iter_file_splice",
    "direct_splice",
    "do_sendfile",
    "copy_page",
    "readahead",
    "page_cache_ra",
    "ondemand_readahead",
    "mark_buffer_dirty",
    "__mark_inode_dirty",
    "block_write",
    "block_page",
    "create_empty_buffers",
    "balance_dirty_pages",
    "shmem_",
    "truncate_",
    "invalidate_mapping",
    "find_get_",
    "find_lock_",
    "writeback_",
    "wb_",
    "__writeback",
    "write_cache_pages",
    "do_writepages",
    "file_",
    "touch_atime",
    "atime_needs_update",
    "rw_verify_area",
];

const TCP_IP: &[&str] = &[
    "tcp_",
    "__tcp",
    "tcp4_",
    "tcp6_",
    "inet_",
    "__inet",
    "inet6_",
    "ip_",
    "__ip_",
    "ip6_",
    "ipv6_",
    "ipv4_",
    "skb_",
    "__skb",
    "alloc_skb",
    "__alloc_skb",
    "kfree_skb",
    "__kfree_skb",
    "consume_skb",
    "build_skb",
    "napi_",
    "__napi",
    "net_rx_action",
    "net_tx_action",
    "netif_",
    "__netif",
    "process_backlog",
    "dev_queue_xmit",
    "__dev_queue_xmit",
    "dev_hard_start_xmit",
    "validate_xmit",
    "sch_direct_xmit",
    "__qdisc",
    "qdisc_",
    "pfifo_",
    "fq_",
    "sk_",
    "__sk_",
    "sock_",
    "__sock",
    "sockfd_",
    "release_sock",
    "lock_sock",
    "__release_sock",
    "bbr_",
    "cubictcp",
    "bictcp",
    "udp_",
    "__udp",
    "nf_",
    "ipt_",
    "csum_",
    "__csum",
    "dst_",
    "neigh_",
    "fib_",
    "__sys_sendto",
    "__sys_recvfrom",
    "__sys_sendmsg",
    "__sys_recvmsg",
    "security_sock",
    "selinux_sock",
    "apparmor_sock",
    "gro_",
    "dev_gro",
    "eth_",
    "packet_",
];

const SCHED_IDLE: &[&str] = &[
    "schedule",
    "__schedule",
    "pick_next",
    "__pick_next",
    "finish_task_switch",
    "__switch_to",
    "switch_mm",
    "context_switch",
    "try_to_wake_up",
    "ttwu_",
    "wake_up",
    "__wake_up",
    "enqueue_",
    "dequeue_",
    "update_curr",
    "update_load",
    "select_task_rq",
    "do_idle",
    "default_idle",
    "cpuidle",
    "intel_idle",
    "acpi_idle",
    "native_safe_halt",
    "pv_native_safe_halt",
    "arch_cpu_idle",
    "cpu_startup_entry",
    "__cond_resched",
    "_cond_resched",
    "psi_",
    "set_next_entity",
    "put_prev",
    "resched",
    "poll_idle",
    "mwait",
    "futex_",
    "__futex",
    "idle_cpu",
    "sched_",
    "__sched",
];

const SYSCALL: &[&str] = &[
    "entry_SYSCALL",
    "do_syscall_64",
    "syscall_",
    "__x64_sys_",
    "__se_sys",
    "__do_sys",
    "x64_sys_call",
    "exit_to_user_mode",
    "__fget",
    "fdget",
    "__fdget",
    "fput",
    "ksys_",
    "entry_",
    "__entry",
    "do_sys_",
];

fn module_name(dso: &str) -> Option<&str> {
    let inner = dso.strip_prefix('[')?.strip_suffix(']')?;
    (inner != "kernel.kallsyms" && inner != "unknown" && inner != "vdso").then_some(inner)
}

/// Puts one sample row into a [`ModuleGroup`]. The prefixes are a
/// heuristic over Linux 6 symbol names; [`GroupShare::examples`] in the
/// report lets a reader see what landed where.
pub fn classify(dso: &str, symbol: &str, kernel: bool, own_dsos: &[String]) -> ModuleGroup {
    let sym = base_symbol(symbol);
    if !kernel {
        let file = dso.rsplit('/').next().unwrap_or(dso);
        if own_dsos.iter().any(|o| file == o || file.starts_with(&format!("{o}-"))) {
            return ModuleGroup::Ferry;
        }
        if sym.contains("memcpy") || sym.contains("memmove") || sym.contains("mempcpy") {
            return ModuleGroup::MemoryCopy;
        }
        if file.contains(".so") {
            return ModuleGroup::UserLibraries;
        }
        return ModuleGroup::OtherUser;
    }
    if let Some(module) = module_name(dso) {
        if NET_DRIVER_MODULES.contains(&module) {
            return ModuleGroup::NetDriver;
        }
        if FS_MODULES.contains(&module) {
            return ModuleGroup::FileSystem;
        }
        if BLOCK_MODULES.contains(&module) {
            return ModuleGroup::BlockIo;
        }
    }
    if starts_with_any(sym, MEMCOPY) || sym.contains("memcpy") || sym.contains("memmove") {
        ModuleGroup::MemoryCopy
    } else if starts_with_any(sym, NET_DRIVER) {
        ModuleGroup::NetDriver
    } else if starts_with_any(sym, BLOCK_IO) {
        ModuleGroup::BlockIo
    } else if starts_with_any(sym, FILE_SYSTEM) {
        ModuleGroup::FileSystem
    } else if starts_with_any(sym, TCP_IP) {
        ModuleGroup::TcpIp
    } else if starts_with_any(sym, SCHED_IDLE) {
        ModuleGroup::SchedulerIdle
    } else if starts_with_any(sym, SYSCALL) {
        ModuleGroup::Syscall
    } else {
        ModuleGroup::OtherKernel
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own() -> Vec<String> {
        vec!["ferry".into()]
    }

    #[test]
    fn classification() {
        let k = |s: &str| classify("[kernel.kallsyms]", s, true, &own());
        assert_eq!(k("tcp_sendmsg_locked"), ModuleGroup::TcpIp);
        assert_eq!(k("tcp_ack.isra.0"), ModuleGroup::TcpIp);
        assert_eq!(k("__inet_lookup_established"), ModuleGroup::TcpIp);
        assert_eq!(k("copy_user_enhanced_fast_string"), ModuleGroup::MemoryCopy);
        assert_eq!(k("_copy_to_iter"), ModuleGroup::MemoryCopy);
        assert_eq!(k("copy_folio_from_iter_atomic"), ModuleGroup::MemoryCopy);
        assert_eq!(k("__pi_memcpy"), ModuleGroup::MemoryCopy);
        assert_eq!(k("copy_page_to_iter"), ModuleGroup::MemoryCopy);
        assert_eq!(k("copy_page"), ModuleGroup::FileSystem);
        assert_eq!(k("ext4_da_write_begin"), ModuleGroup::FileSystem);
        assert_eq!(k("filemap_get_pages"), ModuleGroup::FileSystem);
        assert_eq!(k("virtnet_poll"), ModuleGroup::NetDriver);
        assert_eq!(k("loopback_xmit"), ModuleGroup::NetDriver);
        assert_eq!(k("blk_mq_submit_bio"), ModuleGroup::BlockIo);
        assert_eq!(k("pv_native_safe_halt"), ModuleGroup::SchedulerIdle);
        assert_eq!(k("__schedule"), ModuleGroup::SchedulerIdle);
        assert_eq!(k("entry_SYSCALL_64"), ModuleGroup::Syscall);
        assert_eq!(k("read_zero"), ModuleGroup::OtherKernel);
        assert_eq!(classify("[virtio_net]", "some_fn", true, &own()), ModuleGroup::NetDriver);
        assert_eq!(classify("[ext4]", "some_fn", true, &own()), ModuleGroup::FileSystem);
        assert_eq!(classify("ferry", "ferry_io::mode_e::send", false, &own()), ModuleGroup::Ferry);
        assert_eq!(classify("/usr/bin/ferry", "x", false, &own()), ModuleGroup::Ferry);
        assert_eq!(classify("libc.so.6", "__memmove_avx_unaligned_erms", false, &own()), ModuleGroup::MemoryCopy);
        assert_eq!(classify("libc.so.6", "malloc", false, &own()), ModuleGroup::UserLibraries);
        assert_eq!(classify("[unknown]", "0x0000", false, &own()), ModuleGroup::OtherUser);
    }

    #[test]
    fn counts_with_suffix() {
        assert_eq!(parse_count(" 2K "), Some(2000));
        assert_eq!(parse_count("366"), Some(366));
        assert_eq!(parse_count("1.5M"), Some(1_500_000));
    }

    #[test]
    fn tabbed_rows() {
        let text = "# Samples: 2K of event 'cpu-clock'\n# Overhead\t     Samples\tShared Object   \tSymbol   \n 2.69%  \t 67         \tlibLLVM.so.22   \t[.] llvm::InstCombinePass::run\n 1.00%\t25\t[kernel.kallsyms]\t[k] tcp_sendmsg\n";
        let s = parse_report(text, &own(), 10).unwrap();
        assert_eq!(s.samples, 92);
        assert_eq!(s.event, "cpu-clock");
        assert_eq!(s.symbols[0].symbol, "llvm::InstCombinePass::run");
        assert_eq!(s.symbols[0].dso, "libLLVM.so.22");
        assert!(s.symbols[1].kernel);
        assert!((s.kernel_percent - 1.0).abs() < 1e-9);
    }

    #[test]
    fn empty_report_is_an_error() {
        assert!(matches!(parse_report("# nothing here\n", &own(), 5), Err(ProfileError::PerfParse(_))));
    }
}
