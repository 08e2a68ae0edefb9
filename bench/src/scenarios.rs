//! The scenarios of issue 4, as data: which files, which path, which rows,
//! which comparisons. [`crate::runner`] executes them.
//!
//! Sizes depend on the mode: `--quick` keeps every scenario but moves less
//! data, over fewer delays, with two repetitions; the full run follows the
//! papers' sizes with counts scaled so the whole suite fits in an hour.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::data::{zipf_sizes, Tree, GIB, KIB, MIB};
use crate::net::{format_delay, WanPath};
use crate::record::{Comparison, Layout, PlotKind, Role, VariantInfo};
use crate::servers::ServerKind;
use crate::stats::NO_SLOWER;
use crate::tools::{ClientKind, Dest, FioJob};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Quick,
    Full,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Quick => "quick",
            Mode::Full => "full",
        }
    }
}

/// Every size, count and repetition that differs between the modes.
#[derive(Debug, Clone)]
pub struct Plan {
    pub mode: Mode,
    /// `--ferry-old` was given: scenarios that have rows of the old build
    /// (quic) add them.
    pub with_old: bool,
    /// Repetitions of loopback scenarios (short runs, noisy machine).
    pub reps_local: u32,
    /// Repetitions of emulated-path scenarios (long runs, steadier).
    pub reps_wan: u32,
    pub mem_size: u64,
    pub disk_size: u64,
    pub sweep_delays: Vec<Duration>,
    pub sweep_size: u64,
    pub climate_files: usize,
    pub climate_size: u64,
    pub vis_files: usize,
    pub vis_size: u64,
    pub zipf_files: usize,
    pub small_count: usize,
    pub loss_size: u64,
    /// The old-new scenario (`--ferry-old`): memory-to-memory file size.
    pub old_new_mem_size: u64,
    pub old_new_disk_size: u64,
    /// Its delay sweep: a subset of the papers' delays (the 10 µs and
    /// 100 µs points run at the line rate like 0 and 1 ms and add nothing).
    pub old_new_delays: Vec<Duration>,
    pub old_new_sweep_size: u64,
    /// Its repetitions: the acceptance asks for at least 5.
    pub reps_old_new: u32,
    /// The data-path scenario: memory-to-memory and disk-to-disk sizes,
    /// and the files fetched across the 80 ms path.
    pub dp_mem_size: u64,
    pub dp_disk_size: u64,
    pub dp_long_sizes: Vec<u64>,
    /// The tune scenario: bytes per trial, passes over the grid, head-to-head copies.
    pub tune_bytes: u64,
    pub tune_grid_repeats: u32,
    pub tune_h2h: u32,
}

/// The papers' one-way delays.
pub fn paper_delays() -> Vec<Duration> {
    [0, 10, 100, 1_000, 10_000, 30_000, 80_000].into_iter().map(Duration::from_micros).collect()
}

/// Mean file size of the site-replication set (the papers' trace).
pub const ZIPF_MEAN: u64 = 66_000_000;
pub const ZIPF_EXPONENT: f64 = 1.0;
pub const CLIMATE_FILE: u64 = 256 * MIB;
/// The visualisation data set's file size.
pub const VIS_FILE: u64 = 2_600_000_000;

impl Plan {
    pub fn new(mode: Mode) -> Plan {
        match mode {
            Mode::Full => Plan {
                mode,
                with_old: false,
                reps_local: 3,
                reps_wan: 2,
                mem_size: 4 * GIB,
                disk_size: 4 * GIB,
                sweep_delays: paper_delays(),
                sweep_size: GIB,
                climate_files: 6,
                climate_size: CLIMATE_FILE,
                vis_files: 1,
                vis_size: VIS_FILE,
                zipf_files: 24,
                small_count: 2000,
                loss_size: 512 * MIB,
                old_new_mem_size: 4 * GIB,
                old_new_disk_size: 4 * GIB,
                old_new_delays: [0, 1_000, 10_000, 30_000, 80_000].into_iter().map(Duration::from_micros).collect(),
                old_new_sweep_size: GIB,
                reps_old_new: 5,
                dp_mem_size: 4 * GIB,
                dp_disk_size: 2 * GIB,
                dp_long_sizes: vec![MIB, 256 * MIB, GIB],
                tune_bytes: 512 * MIB,
                tune_grid_repeats: 2,
                tune_h2h: 3,
            },
            Mode::Quick => Plan {
                mode,
                with_old: false,
                reps_local: 2,
                reps_wan: 2,
                mem_size: GIB,
                disk_size: 512 * MIB,
                sweep_delays: [0, 10_000, 80_000].into_iter().map(Duration::from_micros).collect(),
                sweep_size: 128 * MIB,
                climate_files: 2,
                climate_size: 128 * MIB,
                vis_files: 1,
                vis_size: VIS_FILE / 8,
                zipf_files: 4,
                small_count: 300,
                loss_size: 64 * MIB,
                old_new_mem_size: GIB,
                old_new_disk_size: 256 * MIB,
                old_new_delays: [0, 30_000].into_iter().map(Duration::from_micros).collect(),
                old_new_sweep_size: 64 * MIB,
                reps_old_new: 2,
                dp_mem_size: GIB,
                dp_disk_size: 512 * MIB,
                dp_long_sizes: vec![MIB, 256 * MIB],
                tune_bytes: 64 * MIB,
                tune_grid_repeats: 1,
                tune_h2h: 2,
            },
        }
    }

    /// `--reps N` for every scenario.
    pub fn with_reps(mut self, reps: u32) -> Plan {
        self.reps_local = reps.max(1);
        self.reps_wan = reps.max(1);
        self.reps_old_new = reps.max(1);
        self.tune_h2h = reps.max(1);
        self
    }
}

/// Where scratch data lives.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// tmpfs: memory-to-memory sources.
    pub shm: PathBuf,
    /// Disk: disk sources and trees (`data/`), destinations (`out/`).
    pub disk: PathBuf,
}

impl Dirs {
    pub fn shm_data(&self) -> PathBuf {
        self.shm.join("data")
    }
    pub fn disk_data(&self) -> PathBuf {
        self.disk.join("data")
    }
    pub fn out(&self) -> PathBuf {
        self.disk.join("out")
    }
    /// Destinations in tmpfs (the memory scenario's file sink).
    pub fn shm_out(&self) -> PathBuf {
        self.shm.join("out")
    }
    pub fn logs(&self) -> PathBuf {
        self.disk.join("logs")
    }
}

/// The memory source and sink, in one place. Ferry's server has no virtual
/// memory source yet, so memory-to-memory reads a file in tmpfs on the
/// server and writes `/dev/null` on the client, as the Globus reference
/// did (README §5b). When `ferry serve` grows a `/dev/zero`-like source,
/// change these two and every memory scenario follows.
pub fn memory_source(dirs: &Dirs, name: &str) -> PathBuf {
    dirs.shm_data().join(name)
}
pub const MEMORY_SINK: Dest = Dest::DevNull;

/// What a row runs.
#[derive(Debug, Clone)]
pub enum Action {
    Transfer {
        client: ClientKind,
        server: ServerKind,
        flags: Vec<String>,
        /// Absolute; directories end in '/'.
        source: PathBuf,
        dest: Dest,
        bytes: u64,
        files: u64,
        /// A one-file tree to time the same command's fixed cost on.
        setup_source: Option<PathBuf>,
    },
    Iperf {
        streams: u32,
        bytes: u64,
    },
    Fio {
        job: FioJob,
        size: u64,
    },
    Cp {
        src: PathBuf,
        dst: PathBuf,
        bytes: u64,
    },
    NotApplicable {
        reason: String,
    },
    /// A `ferry cp` against a `ferry serve` started for this run alone with
    /// its own flags and environment (a server setting under test), stopped
    /// after it; records the server's peak resident memory too.
    OwnFerryServer(Box<OwnServer>),
    /// A step of the tune-against-grid check, against a `ferry serve
    /// --memory-paths` started for the step.
    Tune(TuneRun),
}

/// Which `ferry` command a tune-scenario row runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TuneStep {
    /// `ferry probe URL --json --bytes B`: the path in numbers.
    Probe,
    /// `ferry tune URL/dev/zero --bytes B --seconds T --json`: the sweep.
    Tune,
    /// The same with `--exhaustive --repeats R` over exactly tune's space
    /// (its streams and TCP buffers, read from the tune row's output).
    Grid { repeats: u32 },
    /// `ferry cp` of `/dev/zero` with tune's pick (`grid: false`) or the
    /// grid's best, head to head.
    Copy { grid: bool },
}

impl TuneStep {
    /// Probe, tune and grid run in the first repetition only; the copies in
    /// every one.
    pub fn once(self) -> bool {
        !matches!(self, TuneStep::Copy { .. })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TuneRun {
    pub step: TuneStep,
    /// The server's virtual /dev/zero: every trial downloads all of it.
    pub bytes: u64,
    /// Limit of one trial.
    pub trial_seconds: u32,
}

/// What [`Action::OwnFerryServer`] runs.
#[derive(Debug, Clone)]
pub struct OwnServer {
    /// Extra `ferry serve` flags, e.g. `--staging 16M`.
    pub serve_flags: Vec<String>,
    /// Environment of both ends, e.g. `FERRY_DATA_PATH=buffered`.
    pub env: Vec<(String, String)>,
    /// `ferry cp` flags.
    pub flags: Vec<String>,
    /// Absolute, under the stage's `ferry_root`.
    pub source: PathBuf,
    pub dest: Dest,
    pub bytes: u64,
    /// Both ends run the `--ferry-old` build (the quic scenario's A/B row).
    pub old: bool,
}

#[derive(Debug, Clone)]
pub struct Variant {
    pub info: VariantInfo,
    pub action: Action,
    /// Drop the page cache first, so the source is read from disk.
    pub cold: bool,
    /// Also time until `sync` returns (the destination is on disk).
    pub sync_after: bool,
}

#[derive(Debug, Clone)]
pub struct Group {
    pub id: String,
    pub label: String,
    pub x: Option<f64>,
    pub variants: Vec<Variant>,
    pub comparisons: Vec<Comparison>,
}

/// A network placement with the groups measured on it; servers and the
/// emulated link live as long as the stage.
#[derive(Debug, Clone)]
pub struct Stage {
    pub wan: Option<WanPath>,
    /// The directory `ferry serve` serves (Globus serves `/`).
    pub ferry_root: PathBuf,
    pub groups: Vec<Group>,
}

/// Data a scenario needs before its first run.
#[derive(Debug, Clone)]
pub enum DataSpec {
    File { path: PathBuf, size: u64 },
    Tree(Tree),
}

impl DataSpec {
    pub fn bytes(&self) -> u64 {
        match self {
            DataSpec::File { size, .. } => *size,
            DataSpec::Tree(t) => t.total_bytes(),
        }
    }
    pub fn path(&self) -> &Path {
        match self {
            DataSpec::File { path, .. } => path,
            DataSpec::Tree(t) => &t.dir,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    pub number: &'static str,
    pub title: String,
    pub description: String,
    pub layout: Layout,
    pub plot: PlotKind,
    pub reps: u32,
    pub data: Vec<DataSpec>,
    pub stages: Vec<Stage>,
}

/// The suite: what runs when no scenario is named.
pub const NAMES: [&str; 8] = ["mem", "disk", "delay", "climate", "vis", "zipf", "small", "loss"];

/// Scenarios that run only when named (`--scenario NAME`): they answer one
/// question each rather than place Ferry among its anchors. `old-new`
/// needs `--ferry-old PATH`.
pub const EXTRA: [&str; 5] = ["old-new", "data-path", "tune", "disk-io", "quic"];

/// Every scenario name, the suite's and the extra ones.
pub fn every_name() -> Vec<&'static str> {
    NAMES.iter().chain(EXTRA.iter()).copied().collect()
}

/// The scenarios of the plan, in issue order: the suite when `only` is
/// empty, otherwise the named ones (extra scenarios only when named).
pub fn all(plan: &Plan, dirs: &Dirs, udt_reason: &str, only: &[String]) -> Vec<Scenario> {
    let builders: [(&str, &dyn Fn() -> Scenario); 13] = [
        ("mem", &|| mem(plan, dirs, udt_reason)),
        ("disk", &|| disk(plan, dirs)),
        ("delay", &|| delay(plan, dirs, udt_reason)),
        ("climate", &|| climate(plan, dirs)),
        ("vis", &|| vis(plan, dirs)),
        ("zipf", &|| zipf(plan, dirs)),
        ("small", &|| small(plan, dirs)),
        ("loss", &|| loss(plan, dirs, udt_reason)),
        ("old-new", &|| old_new(plan, dirs)),
        ("data-path", &|| data_path(plan, dirs)),
        ("tune", &|| tune(plan, dirs)),
        ("disk-io", &|| crate::disk_io::disk_io(plan, dirs)),
        ("quic", &|| crate::quic_bench::quic(plan, dirs)),
    ];
    builders
        .iter()
        .filter(|(n, _)| if only.is_empty() { NAMES.contains(n) } else { only.iter().any(|o| o == n) })
        .map(|(_, b)| b())
        .collect()
}

// ---- row builders ----------------------------------------------------------

fn info(id: &str, label: &str, role: Role, series: &str) -> VariantInfo {
    VariantInfo { id: id.into(), label: label.into(), role, series: series.into(), not_applicable: None }
}

fn flags(f: &str) -> Vec<String> {
    f.split_whitespace().map(String::from).collect()
}

/// A single-file or tree transfer row.
#[derive(Debug, Clone)]
struct Xfer {
    source: PathBuf,
    dest: Dest,
    bytes: u64,
    files: u64,
    setup_source: Option<PathBuf>,
}

fn transfer(
    v: VariantInfo,
    client: ClientKind,
    server: ServerKind,
    f: &str,
    x: &Xfer,
    dest_name: &str,
    out: &Path,
) -> Variant {
    let dest = match &x.dest {
        Dest::DevNull => Dest::DevNull,
        Dest::File(_) => Dest::File(out.join(dest_name)),
        Dest::Dir(_) => Dest::Dir(out.join(dest_name)),
        Dest::Upload(_) => Dest::Upload(out.join(dest_name)),
    };
    Variant {
        info: v,
        action: Action::Transfer {
            client,
            server,
            flags: flags(f),
            source: x.source.clone(),
            dest,
            bytes: x.bytes,
            files: x.files,
            setup_source: x.setup_source.clone(),
        },
        cold: false,
        sync_after: false,
    }
}

fn iperf(id: &str, streams: u32, bytes: u64) -> Variant {
    let label = format!("iperf3 -P {streams} (same bytes, -R)");
    Variant {
        info: info(id, &label, Role::Network, ""),
        action: Action::Iperf { streams, bytes },
        cold: false,
        sync_after: false,
    }
}

fn not_applicable(id: &str, label: &str, reason: &str) -> Variant {
    let mut i = info(id, label, Role::Globus, "");
    i.not_applicable = Some(reason.into());
    Variant { info: i, action: Action::NotApplicable { reason: reason.into() }, cold: false, sync_after: false }
}

/// Single-file rows for `streams` parallel streams: Ferry, Globus, iperf3
/// (and what else `extra` asks for), with their comparisons.
fn stream_rows(streams: u32, x: &Xfer, out: &Path, udt_reason: Option<&str>) -> (Vec<Variant>, Vec<Comparison>) {
    let p = format!("-p {streams}");
    let v = vec![
        transfer(
            info("ferry", &format!("ferry cp {p}"), Role::Ferry, "ferry cp -p N"),
            ClientKind::Ferry,
            ServerKind::Ferry,
            &p,
            x,
            "ferry.dat",
            out,
        ),
        transfer(
            info("guc", &format!("globus-url-copy {p}"), Role::Globus, "globus-url-copy -p N"),
            ClientKind::GlobusUrlCopy,
            ServerKind::Globus,
            &p,
            x,
            "guc.dat",
            out,
        ),
        iperf("iperf3", streams, x.bytes),
    ];
    let mut v = v;
    v[2].info.series = "iperf3 -P N".into();
    if let Some(r) = udt_reason {
        let mut na = not_applicable("guc-udt", &format!("globus-url-copy -udt {p}"), r);
        na.info.series = "globus-url-copy -udt -p N".into();
        v.push(na);
    }
    // The -udt row is shown (not applicable, with the reason) but not
    // compared: there is no figure to divide by.
    let c = vec![Comparison::rate("ferry", "guc"), Comparison::rate("ferry", "iperf3")];
    (v, c)
}

/// Many-files rows: Ferry `-r` (pipelined by default) and with `-p 4`;
/// Globus `-r`, `-r -pp`, `-r -fast -p 4 -pp`, `-r -pp -cc 4`; iperf3 with
/// the same total bytes.
fn tree_rows(x: &Xfer, out: &Path, with_cc: bool, iperf4: bool) -> (Vec<Variant>, Vec<Comparison>) {
    let mut v = vec![
        transfer(
            info("ferry-r", "ferry cp -r", Role::Ferry, ""),
            ClientKind::Ferry,
            ServerKind::Ferry,
            "-r",
            x,
            "ferry-r",
            out,
        ),
        transfer(
            info("ferry-r-p4", "ferry cp -r -p 4", Role::Ferry, ""),
            ClientKind::Ferry,
            ServerKind::Ferry,
            "-r -p 4",
            x,
            "ferry-r-p4",
            out,
        ),
        transfer(
            info("guc-r", "globus-url-copy -r", Role::Globus, ""),
            ClientKind::GlobusUrlCopy,
            ServerKind::Globus,
            "-r -cd",
            x,
            "guc-r",
            out,
        ),
        transfer(
            info("guc-r-pp", "globus-url-copy -r -pp", Role::Globus, ""),
            ClientKind::GlobusUrlCopy,
            ServerKind::Globus,
            "-r -cd -pp",
            x,
            "guc-r-pp",
            out,
        ),
        transfer(
            info("guc-r-fast-p4-pp", "globus-url-copy -r -fast -p 4 -pp", Role::Globus, ""),
            ClientKind::GlobusUrlCopy,
            ServerKind::Globus,
            "-r -cd -fast -p 4 -pp",
            x,
            "guc-r-fast-p4-pp",
            out,
        ),
    ];
    if with_cc {
        v.push(transfer(
            info("guc-r-pp-cc4", "globus-url-copy -r -pp -cc 4", Role::Globus, ""),
            ClientKind::GlobusUrlCopy,
            ServerKind::Globus,
            "-r -cd -pp -cc 4",
            x,
            "guc-r-pp-cc4",
            out,
        ));
    }
    v.push(iperf("iperf3-1", 1, x.bytes));
    if iperf4 {
        v.push(iperf("iperf3-4", 4, x.bytes));
    }
    let mut c: Vec<Comparison> = ["guc-r", "guc-r-pp", "guc-r-fast-p4-pp", "guc-r-pp-cc4"]
        .iter()
        .filter(|a| v.iter().any(|r| r.info.id == **a))
        .map(|a| Comparison::rate("ferry-r", a))
        .collect();
    c.push(Comparison::rate("ferry-r-p4", "guc-r-fast-p4-pp"));
    c.push(Comparison::rate("ferry-r", "iperf3-1"));
    if iperf4 {
        c.push(Comparison::rate("ferry-r-p4", "iperf3-4"));
    }
    (v, c)
}

pub(crate) fn gb(bytes: u64) -> String {
    if bytes >= GIB && bytes % GIB == 0 {
        format!("{} GiB", bytes / GIB)
    } else if bytes >= MIB && bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes % KIB == 0 {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{:.2} GB", bytes as f64 / 1e9)
    }
}

const CPU_NOTE: &str = "Client CPU is the client process's user + system time from `wait4` (its rusage, including \
anything it reaped). Server CPU is the `/proc/PID/stat` delta of `ferry serve` (one process, all sessions) or of the \
Globus daemon's utime + stime + cutime + cstime, read after every per-session child has been reaped \
(reference README §5); for iperf3 both ends are children of the harness and both come from `wait4`.";

const TIMING_NOTE: &str = "Transfers are timed as the wall clock of the whole client process (connection, login, \
transfer, exit), as the reference timed `globus-url-copy`; iperf3 rows use iperf3's own receiver figure, which \
leaves out its set-up, as the network's limit for the same number of bytes.";

// ---- 1. memory to memory on loopback ---------------------------------------

pub fn mem(plan: &Plan, dirs: &Dirs, udt_reason: &str) -> Scenario {
    let file = memory_source(dirs, &format!("mem-{}.bin", gb(plan.mem_size).replace(' ', "")));
    let x = Xfer { source: file.clone(), dest: MEMORY_SINK, bytes: plan.mem_size, files: 1, setup_source: None };
    let out = dirs.out();
    let mut groups = Vec::new();
    // MODE S: the reference's "stream (no -p)" row.
    groups.push(Group {
        id: "stream".into(),
        label: "stream mode (MODE S)".into(),
        x: None,
        variants: vec![
            transfer(
                info("ferry", "ferry cp --mode stream", Role::Ferry, "ferry cp -p N"),
                ClientKind::Ferry,
                ServerKind::Ferry,
                "--mode stream",
                &x,
                "",
                &out,
            ),
            transfer(
                info("guc", "globus-url-copy (no -p)", Role::Globus, "globus-url-copy -p N"),
                ClientKind::GlobusUrlCopy,
                ServerKind::Globus,
                "",
                &x,
                "",
                &out,
            ),
            {
                let mut i = iperf("iperf3", 1, x.bytes);
                i.info.series = "iperf3 -P N".into();
                i
            },
        ],
        comparisons: vec![Comparison::rate("ferry", "guc"), Comparison::rate("ferry", "iperf3")],
    });
    for n in [1u32, 4, 8] {
        let (mut v, mut c) = stream_rows(n, &x, &out, Some(udt_reason));
        let p = format!("-p {n}");
        v.insert(
            2,
            transfer(
                info("guc-fast", &format!("globus-url-copy -fast {p}"), Role::Globus, "globus-url-copy -fast -p N"),
                ClientKind::GlobusUrlCopy,
                ServerKind::Globus,
                &format!("-fast {p}"),
                &x,
                "",
                &out,
            ),
        );
        v.insert(
            3,
            transfer(
                info(
                    "x-ferry-client",
                    &format!("ferry cp {p} → Globus server"),
                    Role::Cross,
                    "ferry cp → Globus server",
                ),
                ClientKind::Ferry,
                ServerKind::Globus,
                &p,
                &x,
                "",
                &out,
            ),
        );
        v.insert(
            4,
            transfer(
                info(
                    "x-ferry-server",
                    &format!("globus-url-copy {p} → Ferry server"),
                    Role::Cross,
                    "globus-url-copy → Ferry server",
                ),
                ClientKind::GlobusUrlCopy,
                ServerKind::Ferry,
                &p,
                &x,
                "",
                &out,
            ),
        );
        c.insert(1, Comparison::rate("ferry", "guc-fast"));
        // Same server (Globus), different clients: Ferry's client alone.
        c.push(Comparison::rate("x-ferry-client", "guc"));
        // Same client (globus-url-copy), different servers: Ferry's server alone.
        c.push(Comparison::rate("x-ferry-server", "guc"));
        groups.push(Group {
            id: format!("p{n}"),
            label: format!("{n} stream{}", if n == 1 { "" } else { "s" }),
            x: None,
            variants: v,
            comparisons: c,
        });
    }
    // The same download into a file in tmpfs: both clients then have to
    // write every byte (into /dev/null, Ferry discards in the kernel).
    let shm_out = dirs.shm_out();
    let xf = Xfer { dest: Dest::File(PathBuf::new()), ..x.clone() };
    let mut iperf4 = iperf("iperf3", 4, x.bytes);
    iperf4.info.series = "iperf3 -P N".into();
    groups.push(Group {
        id: "p4-tmpfs".into(),
        label: "4 streams, into a tmpfs file".into(),
        x: None,
        variants: vec![
            transfer(
                info("ferry", "ferry cp -p 4 → tmpfs file", Role::Ferry, "ferry cp -p N"),
                ClientKind::Ferry,
                ServerKind::Ferry,
                "-p 4",
                &xf,
                "ferry.dat",
                &shm_out,
            ),
            transfer(
                info("guc", "globus-url-copy -p 4 → tmpfs file", Role::Globus, "globus-url-copy -p N"),
                ClientKind::GlobusUrlCopy,
                ServerKind::Globus,
                "-p 4",
                &xf,
                "guc.dat",
                &shm_out,
            ),
            iperf4,
        ],
        comparisons: vec![Comparison::rate("ferry", "guc"), Comparison::rate("ferry", "iperf3")],
    });
    Scenario {
        name: "mem",
        number: "1",
        title: "Memory to memory on loopback".into(),
        description: format!(
            "Download (RETR) of one {} file of random bytes from tmpfs (`{}`) on the server to `/dev/null` on the \
             client, over 127.0.0.1, in stream mode and with 1, 4 and 8 parallel MODE E streams. Both servers serve \
             the same file. The \"cross\" rows pair Ferry's client with the Globus server and `globus-url-copy` with \
             Ferry's server, which separates client from server costs.\n\n\
             **The sink.** Ferry's client treats `/dev/null` as a discard sink and drops the bytes in the kernel \
             (`recv` with `MSG_TRUNC`, crates/io), while `globus-url-copy` and iperf3's receiver copy every byte \
             into user space first; Ferry beating iperf3 into `/dev/null` is that difference, not a faster \
             network. The last group writes a file in tmpfs (`{}`) instead, where both clients must copy every \
             byte.\n\n{TIMING_NOTE}\n\n{CPU_NOTE}",
            gb(plan.mem_size),
            file.display(),
            dirs.shm_out().display()
        ),
        layout: Layout::Throughput,
        plot: PlotKind::Bars,
        reps: plan.reps_local,
        data: vec![DataSpec::File { path: file, size: plan.mem_size }],
        stages: vec![Stage { wan: None, ferry_root: dirs.shm_data(), groups }],
    }
}

// ---- 2. disk to disk on loopback -------------------------------------------

pub fn disk(plan: &Plan, dirs: &Dirs) -> Scenario {
    let src = dirs.disk_data().join(format!("disk-{}.bin", gb(plan.disk_size).replace(' ', "")));
    let out = dirs.out();
    let x = Xfer {
        source: src.clone(),
        dest: Dest::File(PathBuf::new()),
        bytes: plan.disk_size,
        files: 1,
        setup_source: None,
    };
    let cold = |mut v: Variant| {
        v.cold = true;
        v.sync_after = true;
        v
    };
    let mut groups = Vec::new();
    let modes: [(&str, &str, &str, Option<u32>); 3] = [
        ("stream", "stream mode (MODE S)", "--mode stream", None),
        ("p1", "1 stream", "-p 1", Some(1)),
        ("p4", "4 streams", "-p 4", Some(4)),
    ];
    for (id, label, ferry_flags, streams) in modes {
        let guc_flags = streams.map(|n| format!("-p {n}")).unwrap_or_default();
        let mut v = vec![
            cold(transfer(
                info("ferry", &format!("ferry cp {ferry_flags}"), Role::Ferry, "ferry cp"),
                ClientKind::Ferry,
                ServerKind::Ferry,
                ferry_flags,
                &x,
                "ferry.dat",
                &out,
            )),
            cold(transfer(
                info(
                    "guc",
                    &format!("globus-url-copy {}", if guc_flags.is_empty() { "(no -p)" } else { &guc_flags }),
                    Role::Globus,
                    "globus-url-copy",
                ),
                ClientKind::GlobusUrlCopy,
                ServerKind::Globus,
                &guc_flags,
                &x,
                "guc.dat",
                &out,
            )),
        ];
        let mut c = vec![Comparison::rate("ferry", "guc"), Comparison::until_sync("ferry", "guc")];
        let mut i = iperf("iperf3", streams.unwrap_or(1), plan.disk_size);
        i.info.series = "iperf3 -P N".into();
        v.push(i);
        c.push(Comparison::rate("ferry", "iperf3"));
        groups.push(Group { id: id.into(), label: label.into(), x: None, variants: v, comparisons: c });
    }
    let disk_row = |id: &str, label: &str, action: Action, sync_after: bool| Variant {
        info: info(id, label, Role::Disk, ""),
        action,
        cold: true,
        sync_after,
    };
    let size = plan.disk_size;
    groups.push(Group {
        id: "disk".into(),
        label: "disk limit".into(),
        x: None,
        variants: vec![
            disk_row(
                "fio-read",
                "fio read, O_DIRECT, 1 MiB, QD1",
                Action::Fio { job: FioJob::Read { file: src.clone() }, size },
                false,
            ),
            // fio's write jobs fsync at the end themselves (`--end_fsync=1`).
            disk_row(
                "fio-write",
                "fio write, O_DIRECT, 1 MiB, QD1, fsync",
                Action::Fio { job: FioJob::Write { file: out.join("fio-write.dat") }, size },
                false,
            ),
            disk_row(
                "fio-copy",
                "fio read + write at once (a copy's load)",
                Action::Fio { job: FioJob::Copy { from: src.clone(), to: out.join("fio-copy.dat") }, size },
                false,
            ),
            disk_row("cp", "cp + sync", Action::Cp { src: src.clone(), dst: out.join("cp.dat"), bytes: size }, true),
        ],
        comparisons: vec![],
    });
    // Each Ferry row until sync against the disk's limits for a copy.
    for g in groups.iter_mut().filter(|g| g.id != "disk") {
        g.comparisons.push(Comparison::until_sync("ferry", "fio-copy").in_group("disk"));
        g.comparisons.push(Comparison::until_sync("ferry", "cp").in_group("disk"));
    }
    Scenario {
        name: "disk",
        number: "2",
        title: "Disk to disk on loopback".into(),
        description: format!(
            "Download of one {} file of random bytes from the server's disk (`{}`) to a new file on the client's \
             disk (same file system), over 127.0.0.1. Before every transfer and disk row the page cache is dropped \
             (`sync; echo 3 > /proc/sys/vm/drop_caches`), so the source is read from the device. \"seconds\" is the transfer (client \
             exit); \"until sync\" adds a `sync` after it, so the destination is on disk too, as in the reference. \
             The disk's limits are fio (sequential O_DIRECT reads, writes, and both at once on the same device, \
             1 MiB blocks, QD1) and `cp` + `sync` of the same file. The disk is a host-cached virtio device: \
             O_DIRECT in the guest does not bypass the host's cache, so these are upper bounds (reference §1).\n\n\
             {TIMING_NOTE} fio rows use fio's own runtime (the longest job's), which includes the final fsync of \
             its write jobs (`--end_fsync=1`), so it counts as \"until sync\" too.\n\n{CPU_NOTE} fio and cp have \
             no server; their CPU is the process's own.",
            gb(plan.disk_size),
            src.display()
        ),
        layout: Layout::UntilSync,
        plot: PlotKind::Bars,
        reps: plan.reps_local,
        data: vec![DataSpec::File { path: src, size: plan.disk_size }],
        stages: vec![Stage { wan: None, ferry_root: dirs.disk_data(), groups }],
    }
}

// ---- 3. delay sweep --------------------------------------------------------

fn wan_note(extra: &str) -> String {
    format!(
        "The path is `ferry-wan`: client and server in two network namespaces joined by a user-space forwarder \
         that adds the one-way delay each way, with a `tbf` bottleneck of 1 Gbit/s on each sender's egress and a \
         25 MB queue (the Globus reference's set-up, which this shaper reproduces to 1 %; docs/wan-emulator.md), \
         MTU 9000, tuned TCP buffers (64 MiB), BBR inherited from the host.{extra} The connect RTT in the table \
         below is measured before the runs. The Globus server runs in the server namespace as `nobody`; in MODE E \
         it connects back to the client across the link."
    )
}

pub fn delay(plan: &Plan, dirs: &Dirs, udt_reason: &str) -> Scenario {
    let file = memory_source(dirs, &format!("sweep-{}.bin", gb(plan.sweep_size).replace(' ', "")));
    let x = Xfer { source: file.clone(), dest: MEMORY_SINK, bytes: plan.sweep_size, files: 1, setup_source: None };
    let out = dirs.out();
    let stages = plan
        .sweep_delays
        .iter()
        .map(|&d| {
            let (mut v1, c1) = stream_rows(1, &x, &out, Some(udt_reason));
            let (v4, c4) = stream_rows(4, &x, &out, None);
            for v in &mut v1 {
                v.info.id = format!("{}-1", v.info.id);
                v.info.series = v.info.label.clone();
            }
            let mut v4 = v4;
            for v in &mut v4 {
                v.info.id = format!("{}-4", v.info.id);
                v.info.series = v.info.label.clone();
            }
            let (variants, comparisons) = one_then_four(v1, c1, v4, c4);
            let delay_ms = d.as_secs_f64() * 1e3;
            Stage {
                wan: Some(WanPath::gbit(d)),
                ferry_root: dirs.shm_data(),
                groups: vec![Group {
                    id: format!("d{}us", d.as_micros()),
                    label: format_delay(d),
                    x: Some(delay_ms),
                    variants,
                    comparisons,
                }],
            }
        })
        .collect();
    Scenario {
        name: "delay",
        number: "3",
        title: "Delay sweep at 1 Gbit/s".into(),
        description: format!(
            "Download of one {} file from tmpfs to `/dev/null` through the emulated path at one-way delays of {}, \
             with 1 and 4 streams (the Globus reference's `wan.md` set-up with 1 GiB). {}\n\n{TIMING_NOTE} At long \
             delays the client's wall clock includes about 16–19 round trips of set-up (reference `wan.md`), which \
             iperf3's figure leaves out.\n\n{CPU_NOTE}",
            gb(plan.sweep_size),
            plan.sweep_delays.iter().map(|d| format_delay(*d)).collect::<Vec<_>>().join(", "),
            wan_note("")
        ),
        layout: Layout::Throughput,
        plot: PlotKind::VsDelay,
        reps: plan.reps_wan,
        data: vec![DataSpec::File { path: file, size: plan.sweep_size }],
        stages,
    }
}

// ---- 4. replication of large files -----------------------------------------

/// A directory replicated across one emulated path.
struct TreeCase {
    name: &'static str,
    number: &'static str,
    title: String,
    /// The data set in words (first sentence of the description).
    what: String,
    tree: Tree,
    delay: Duration,
    /// Whether `-cc 4` has anything to spread (more than one file).
    with_cc: bool,
}

fn tree_scenario(case: TreeCase, plan: &Plan, dirs: &Dirs) -> Scenario {
    let TreeCase { name, number, title, what, tree, delay, with_cc } = case;
    let source = PathBuf::from(format!("{}/", tree.dir.display()));
    let x = Xfer {
        source,
        dest: Dest::Dir(PathBuf::new()),
        bytes: tree.total_bytes(),
        files: tree.files(),
        setup_source: None,
    };
    let (variants, comparisons) = tree_rows(&x, &dirs.out(), with_cc, true);
    Scenario {
        name,
        number,
        title,
        description: format!(
            "{what} The source directory is on the server's disk (warm in the page cache after it is written), the \
             destination a new directory on the client's disk (not synced). Ferry copies with `-r` (it pipelines \
             transfer commands by default), Globus with `-r -cd` alone and with `-pp`, `-fast -p 4 -pp`{}. iperf3 \
             moves the same total bytes. {}\n\n{TIMING_NOTE}\n\n{CPU_NOTE}",
            if with_cc { " and `-pp -cc 4`" } else { "" },
            wan_note("")
        ),
        layout: Layout::Throughput,
        plot: PlotKind::Bars,
        reps: plan.reps_wan,
        data: vec![DataSpec::Tree(tree)],
        stages: vec![Stage {
            wan: Some(WanPath::gbit(delay)),
            ferry_root: dirs.disk_data(),
            groups: vec![Group {
                id: "main".into(),
                label: format_delay(delay) + " one way",
                x: None,
                variants,
                comparisons,
            }],
        }],
    }
}

pub fn climate(plan: &Plan, dirs: &Dirs) -> Scenario {
    let n = plan.climate_files;
    let size = plan.climate_size;
    let tree =
        Tree { dir: dirs.disk_data().join(format!("climate-{n}x{}", gb(size).replace(' ', ""))), sizes: vec![size; n] };
    tree_scenario(
        TreeCase {
            name: "climate",
            number: "4a",
            title: format!("Climate-data replication: {} files at 30 ms", gb(size)),
            what: format!(
                "Replication of a directory of {n} files of {} ({}) across the 1 Gbit/s path with 30 ms one-way delay \
             (the papers' climate-data case, 256 MiB files; {}).",
                gb(size),
                gb(n as u64 * size),
                if size == CLIMATE_FILE {
                    "the count is scaled down so the full suite fits in an hour"
                } else {
                    "quick mode: half the papers' file size"
                }
            ),
            tree,
            delay: Duration::from_millis(30),
            with_cc: true,
        },
        plan,
        dirs,
    )
}

pub fn vis(plan: &Plan, dirs: &Dirs) -> Scenario {
    let n = plan.vis_files;
    let size = plan.vis_size;
    let tree = Tree { dir: dirs.disk_data().join(format!("vis-{n}x{size}")), sizes: vec![size; n] };
    tree_scenario(
        TreeCase {
            name: "vis",
            number: "4b",
            title: format!("Visualisation data: {:.2} GB files at 80 ms", size as f64 / 1e9),
            what: format!(
            "Replication of a directory of {n} file{} of {:.2} GB across the 1 Gbit/s path with 80 ms one-way delay \
             (the papers' visualisation case, 2.6 GB files; {}).",
            if n == 1 { "" } else { "s" },
            size as f64 / 1e9,
            if size == VIS_FILE {
                "the count is scaled down so the full suite fits in an hour"
            } else {
                "quick mode: an eighth of the papers' file size"
            }
        ),
            tree,
            delay: Duration::from_millis(80),
            with_cc: n > 1,
        },
        plan,
        dirs,
    )
}

// ---- 5. site replication, Zipf sizes ---------------------------------------

pub fn zipf(plan: &Plan, dirs: &Dirs) -> Scenario {
    let sizes = zipf_sizes(plan.zipf_files, ZIPF_EXPONENT, ZIPF_MEAN);
    let total: u64 = sizes.iter().sum();
    let (largest, smallest) = (sizes[0], sizes[sizes.len() - 1]);
    let tree = Tree { dir: dirs.disk_data().join(format!("zipf-{}", plan.zipf_files)), sizes };
    tree_scenario(
        TreeCase {
            name: "zipf",
            number: "5",
            title: "Site replication: Zipf-distributed file set at 10 ms".into(),
            what: format!(
            "Replication of {} files whose sizes follow Zipf's law by rank (the k-th largest is 1/k of the largest), \
             mean 66 MB, from {:.1} MB down to {:.1} MB, {:.2} GB in total, across the 1 Gbit/s path with 10 ms \
             one-way delay.",
            plan.zipf_files,
            largest as f64 / 1e6,
            smallest as f64 / 1e6,
            total as f64 / 1e9
        ),
            tree,
            delay: Duration::from_millis(10),
            with_cc: true,
        },
        plan,
        dirs,
    )
}

// ---- 6. many small files ---------------------------------------------------

pub fn small(plan: &Plan, dirs: &Dirs) -> Scenario {
    let many = Tree {
        dir: dirs.disk_data().join(format!("small-{}x256KiB", plan.small_count)),
        sizes: vec![256 * KIB; plan.small_count],
    };
    let few = Tree { dir: dirs.disk_data().join("small-16x1MiB"), sizes: vec![MIB; 16] };
    let one = Tree { dir: dirs.disk_data().join("small-1x1B"), sizes: vec![1] };
    let setup = PathBuf::from(format!("{}/", one.dir.display()));
    let sets = [(&many, "many"), (&few, "few")];
    let placements: [(Option<Duration>, &str); 2] = [(None, "loopback"), (Some(Duration::ZERO), "path")];
    let mut stages = Vec::new();
    for (wan, _) in placements {
        let mut groups = Vec::new();
        for (t, id) in sets {
            // Over the emulated path: 1 ms one way for the 2,000-file set
            // (at 10 ms a per-file round trip would make Globus's MODE S
            // rows take minutes), 10 ms for the 16-file set.
            let delay = wan.map(|_| if id == "many" { Duration::from_millis(1) } else { Duration::from_millis(10) });
            let x = Xfer {
                source: PathBuf::from(format!("{}/", t.dir.display())),
                dest: Dest::Dir(PathBuf::new()),
                bytes: t.total_bytes(),
                files: t.files(),
                setup_source: Some(setup.clone()),
            };
            let (variants, comparisons) = tree_rows(&x, &dirs.out(), true, false);
            let where_ = delay.map_or("loopback".to_string(), |d| format!("{} one way", format_delay(d)));
            groups.push((
                delay,
                Group {
                    id: format!("{id}-{}", delay.map_or("lo".to_string(), |d| format!("{}us", d.as_micros()))),
                    label: format!("{} × {}, {where_}", t.files(), gb(t.sizes[0])),
                    x: None,
                    variants,
                    comparisons,
                },
            ));
        }
        // Each delay is its own link.
        let mut by_delay: Vec<(Option<Duration>, Vec<Group>)> = Vec::new();
        for (d, g) in groups {
            match by_delay.iter_mut().find(|(x, _)| *x == d) {
                Some((_, gs)) => gs.push(g),
                None => by_delay.push((d, vec![g])),
            }
        }
        for (d, gs) in by_delay {
            stages.push(Stage { wan: d.map(WanPath::gbit), ferry_root: dirs.disk_data(), groups: gs });
        }
    }
    Scenario {
        name: "small",
        number: "6",
        title: "Many small files".into(),
        description: format!(
            "Recursive download of {} × 256 KiB and of 16 × 1 MiB, from the server's disk (warm page cache) to a new \
             directory on the client's disk (not synced), on loopback (as reference §5d) and across the emulated \
             1 Gbit/s path: 1 ms one way for the {}-file set, 10 ms for the 16-file set.\n\n\
             **Connection time and data time.** Each row is also run, once per repetition, with the same flags on a \
             directory holding a single 1-byte file. That run's wall time is the command's fixed cost: process \
             start, control connection and login, feature negotiation, the listing, one data-channel set-up and one \
             near-empty transfer (\"set-up s\"). \"data s\" is the median total minus the median set-up, the time \
             the files themselves cost, and \"ms per file\" divides it by the files after the first. This split was \
             chosen over timing to first byte because it needs no instrumentation inside either client, treats \
             Ferry and Globus identically, and keeps the per-file round trips (which are what pipelining removes) \
             on the data side. {}\n\n{TIMING_NOTE}\n\n{CPU_NOTE}",
            plan.small_count,
            plan.small_count,
            wan_note(" Loopback rows use 127.0.0.1.")
        ),
        layout: Layout::SetupSplit,
        plot: PlotKind::Bars,
        // Most of its time is the 2,000-file set across the path, where
        // Globus's MODE S row alone takes over half a minute.
        reps: plan.reps_wan,
        data: vec![DataSpec::Tree(many), DataSpec::Tree(few), DataSpec::Tree(one)],
        stages,
    }
}

// ---- 7. lossy path ---------------------------------------------------------

pub fn loss(plan: &Plan, dirs: &Dirs, udt_reason: &str) -> Scenario {
    let file = memory_source(dirs, &format!("loss-{}.bin", gb(plan.loss_size).replace(' ', "")));
    let x = Xfer { source: file.clone(), dest: MEMORY_SINK, bytes: plan.loss_size, files: 1, setup_source: None };
    let out = dirs.out();
    let stages = [0.0, 0.001, 0.01]
        .into_iter()
        .map(|loss| {
            let (mut v1, c1) = stream_rows(1, &x, &out, Some(udt_reason));
            let (mut v4, c4) = stream_rows(4, &x, &out, None);
            for v in v1.iter_mut().chain(v4.iter_mut()) {
                v.info.series = v.info.label.clone();
            }
            for v in &mut v1 {
                v.info.id += "-1";
            }
            for v in &mut v4 {
                v.info.id += "-4";
            }
            let (variants, comparisons) = one_then_four(v1, c1, v4, c4);
            let mut path = WanPath::gbit(Duration::from_millis(30));
            path.loss = loss;
            let pct = loss * 100.0;
            Stage {
                wan: Some(path),
                ferry_root: dirs.shm_data(),
                groups: vec![Group {
                    id: format!("loss{}", (loss * 10_000.0).round() as u32),
                    label: format!("30 ms, {pct}% loss"),
                    x: None,
                    variants,
                    comparisons,
                }],
            }
        })
        .collect();
    Scenario {
        name: "loss",
        number: "7",
        title: "Lossy path: 30 ms with 0.1 % and 1 % loss".into(),
        description: format!(
            "Download of one {} file from tmpfs to `/dev/null` across the 1 Gbit/s path with 30 ms one-way delay \
             and random packet loss of 0 (for reference), 0.1 % and 1 % in each direction (applied by the \
             forwarder before the queue, independently per packet), with 1 and 4 streams. {}\n\n{TIMING_NOTE}\n\n\
             {CPU_NOTE}",
            gb(plan.loss_size),
            wan_note("")
        ),
        layout: Layout::Throughput,
        plot: PlotKind::Bars,
        reps: plan.reps_wan,
        data: vec![DataSpec::File { path: file, size: plan.loss_size }],
        stages,
    }
}

// ---- 8. the old build against the new one ----------------------------------

/// A row of the new build and one of the old build, with the same flags,
/// compared new ÷ old; `cold` rows drop the page cache first and time
/// until `sync` too (disk to disk).
fn build_pair(f: &str, x: &Xfer, out: &Path, cold: bool) -> (Vec<Variant>, Vec<Comparison>) {
    let row = |id: &str, which: &str, role: Role, series: &str, client: ClientKind, server: ServerKind| {
        let mut v = transfer(
            info(id, &format!("ferry cp {f} ({which})"), role, series),
            client,
            server,
            f,
            x,
            &format!("{id}.dat"),
            out,
        );
        v.cold = cold;
        v.sync_after = cold;
        v
    };
    let v = vec![
        row("new", "new", Role::Ferry, "Ferry (new)", ClientKind::Ferry, ServerKind::Ferry),
        row("old", "old", Role::FerryOld, "Ferry (old)", ClientKind::FerryOld, ServerKind::FerryOld),
    ];
    let mut c = vec![Comparison::rate("new", "old")];
    if cold {
        c.push(Comparison::until_sync("new", "old"));
    }
    (v, c)
}

fn streams_label(n: u32) -> String {
    format!("{n} stream{}", if n == 1 { "" } else { "s" })
}

/// Issue 15's "no slower" check: the build under test (`--ferry`) against
/// a baseline built from an older commit (`--ferry-old`), with the same
/// flags, interleaved within every repetition, memory to memory with 1, 4
/// and 8 streams (with `globus-url-copy` as the anchor), disk to disk, and
/// a delay sweep.
pub fn old_new(plan: &Plan, dirs: &Dirs) -> Scenario {
    let mem_file = memory_source(dirs, &format!("oldnew-mem-{}.bin", gb(plan.old_new_mem_size).replace(' ', "")));
    let disk_file = dirs.disk_data().join(format!("oldnew-disk-{}.bin", gb(plan.old_new_disk_size).replace(' ', "")));
    let sweep_file = memory_source(dirs, &format!("oldnew-sweep-{}.bin", gb(plan.old_new_sweep_size).replace(' ', "")));
    let out = dirs.out();
    let mut stages = Vec::new();

    let xm = Xfer {
        source: mem_file.clone(),
        dest: MEMORY_SINK,
        bytes: plan.old_new_mem_size,
        files: 1,
        setup_source: None,
    };
    let mut groups = Vec::new();
    for n in [1u32, 4, 8] {
        let p = format!("-p {n}");
        let (mut v, mut c) = build_pair(&p, &xm, &out, false);
        v.push(transfer(
            info("guc", &format!("globus-url-copy {p}"), Role::Globus, "globus-url-copy"),
            ClientKind::GlobusUrlCopy,
            ServerKind::Globus,
            &p,
            &xm,
            "",
            &out,
        ));
        c.push(Comparison::rate("new", "guc"));
        c.push(Comparison::rate("old", "guc"));
        groups.push(Group {
            id: format!("mem-p{n}"),
            label: format!("memory, {}", streams_label(n)),
            x: None,
            variants: v,
            comparisons: c,
        });
    }
    stages.push(Stage { wan: None, ferry_root: dirs.shm_data(), groups });

    let xd = Xfer {
        source: disk_file.clone(),
        dest: Dest::File(PathBuf::new()),
        bytes: plan.old_new_disk_size,
        files: 1,
        setup_source: None,
    };
    let groups = [1u32, 4]
        .into_iter()
        .map(|n| {
            let (variants, comparisons) = build_pair(&format!("-p {n}"), &xd, &out, true);
            Group {
                id: format!("disk-p{n}"),
                label: format!("disk, {}", streams_label(n)),
                x: None,
                variants,
                comparisons,
            }
        })
        .collect();
    stages.push(Stage { wan: None, ferry_root: dirs.disk_data(), groups });

    let xs = Xfer {
        source: sweep_file.clone(),
        dest: MEMORY_SINK,
        bytes: plan.old_new_sweep_size,
        files: 1,
        setup_source: None,
    };
    for &d in &plan.old_new_delays {
        let groups = [1u32, 4]
            .into_iter()
            .map(|n| {
                let (variants, comparisons) = build_pair(&format!("-p {n}"), &xs, &out, false);
                Group {
                    id: format!("d{}us-p{n}", d.as_micros()),
                    label: format!("{}, {}", format_delay(d), streams_label(n)),
                    x: Some(d.as_secs_f64() * 1e3),
                    variants,
                    comparisons,
                }
            })
            .collect();
        stages.push(Stage { wan: Some(WanPath::gbit(d)), ferry_root: dirs.shm_data(), groups });
    }

    Scenario {
        name: "old-new",
        number: "8",
        title: "The new build against the old one".into(),
        description: format!(
            "Is the build under test (`--ferry`, \"new\") slower than a baseline built from an older commit \
             (`--ferry-old`, \"old\")? Both builds run the same command with the same flags, `ferry cp --json \
             --no-resume -p N URL DEST` against their own `ferry serve ROOT --listen IP:0 --anonymous read` (no \
             `--transport`: a baseline older than the transport negotiation has no such flag, and the new build's \
             default is TCP). Within every repetition the two builds' rows of a case run back to back, and every \
             second repetition in the opposite order, so neither always runs first. Cases: {} from tmpfs to \
             `/dev/null` on loopback with 1, 4 and 8 streams, with `globus-url-copy -p N` against the Globus \
             server as the anchor (same file); {} from disk to a new file on disk (page cache dropped before every \
             row; \"until sync\" also compared), 1 and 4 streams; {} from tmpfs to `/dev/null` across the \
             emulated 1 Gbit/s path at one-way delays of {}, 1 and 4 streams.\n\n\
             **The rule** (issue 15): every median new ÷ old ≥ {NO_SLOWER}, or where it is below, the two ranges \
             overlap and a rerun of that row says it was noise; and the new build still ≥ 1.3 × `globus-url-copy` \
             memory to memory. The table \"new ÷ old\" below applies it row by row; \"paired\" is the median (and \
             range) of the per-repetition ratios, each from two runs made back to back. {}\n\n{TIMING_NOTE}\n\n\
             {CPU_NOTE}",
            gb(plan.old_new_mem_size),
            gb(plan.old_new_disk_size),
            gb(plan.old_new_sweep_size),
            plan.old_new_delays.iter().map(|d| format_delay(*d)).collect::<Vec<_>>().join(", "),
            wan_note("")
        ),
        layout: Layout::UntilSync,
        plot: PlotKind::Bars,
        reps: plan.reps_old_new,
        data: vec![
            DataSpec::File { path: mem_file, size: plan.old_new_mem_size },
            DataSpec::File { path: disk_file, size: plan.old_new_disk_size },
            DataSpec::File { path: sweep_file, size: plan.old_new_sweep_size },
        ],
        stages,
    }
}

// ---- 9. data-path variants (was bench/data-path.py) ------------------------

/// A Ferry row with its own server (`serve` flags, environment of both
/// ends, `cp` flags, in the `OwnServer` fields).
fn own_server(info: VariantInfo, o: OwnServer) -> Variant {
    Variant { info, action: Action::OwnFerryServer(Box::new(o)), cold: false, sync_after: false }
}

/// The server and client settings of an [`OwnServer`] row.
fn own(serve: &str, env: &[(&str, &str)], cp: &str, source: &Path, dest: Dest, bytes: u64) -> OwnServer {
    OwnServer {
        serve_flags: flags(serve),
        env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        flags: flags(cp),
        source: source.to_path_buf(),
        dest,
        bytes,
        old: false,
    }
}

/// Ferry's data paths against their anchors: zero-copy, buffered and
/// staged memory to memory; synchronous, staged and O_DIRECT disk to disk;
/// the server's peak memory by staging size; and the fixed cost of a
/// fresh download across an 80 ms path in round trips. Formerly
/// `bench/data-path.py`, whose last figures stay in
/// `bench/results/data-path/README.md`.
pub fn data_path(plan: &Plan, dirs: &Dirs) -> Scenario {
    let mem_file = memory_source(dirs, &format!("dp-mem-{}.bin", gb(plan.dp_mem_size).replace(' ', "")));
    let disk_file = dirs.disk_data().join(format!("dp-disk-{}.bin", gb(plan.dp_disk_size).replace(' ', "")));
    let out = dirs.out();
    let mut stages = Vec::new();
    let mut data = vec![
        DataSpec::File { path: mem_file.clone(), size: plan.dp_mem_size },
        DataSpec::File { path: disk_file.clone(), size: plan.dp_disk_size },
    ];

    // A. Memory to memory on loopback.
    let n = plan.dp_mem_size;
    let xm = Xfer { source: mem_file.clone(), dest: MEMORY_SINK, bytes: n, files: 1, setup_source: None };
    let mut groups = Vec::new();
    for p in [1u32, 4] {
        let cp = format!("-p {p}");
        let mut v: Vec<Variant> = [
            ("zero-copy", "Ferry zero-copy", "", &[][..]),
            ("buffered", "Ferry buffered", "", &[("FERRY_DATA_PATH", "buffered")][..]),
            ("staged", "Ferry staged 16 MiB", "--staging 16M", &[][..]),
        ]
        .into_iter()
        .map(|(id, label, serve, env)| {
            own_server(
                info(id, &format!("{label}, {cp}"), Role::Ferry, label),
                own(serve, env, &cp, &mem_file, MEMORY_SINK, n),
            )
        })
        .collect();
        v.push(transfer(
            info("guc", &format!("globus-url-copy {cp}"), Role::Globus, "globus-url-copy"),
            ClientKind::GlobusUrlCopy,
            ServerKind::Globus,
            &cp,
            &xm,
            "",
            &out,
        ));
        let mut ip = iperf("iperf3", p, n);
        ip.info.series = "iperf3".into();
        v.push(ip);
        let c = ["zero-copy", "buffered", "staged"].into_iter().map(|f| Comparison::rate(f, "guc")).collect();
        groups.push(Group {
            id: format!("mem-p{p}"),
            label: format!("memory, {}", streams_label(p)),
            x: None,
            variants: v,
            comparisons: c,
        });
    }
    stages.push(Stage { wan: None, ferry_root: dirs.shm_data(), groups });

    // B. Disk to disk, caches dropped, until sync.
    let n = plan.dp_disk_size;
    let xd =
        Xfer { source: disk_file.clone(), dest: Dest::File(PathBuf::new()), bytes: n, files: 1, setup_source: None };
    let mut groups = Vec::new();
    for p in [1u32, 4] {
        let cp = format!("-p {p}");
        let mut v: Vec<Variant> = [
            ("sync", "Ferry synchronous (sendfile, page cache)", "", ""),
            ("staged", "Ferry staged 16 MiB", "--staging 16M", "--staging 16M"),
            ("direct", "Ferry staged 16 MiB + O_DIRECT", "--staging 16M --direct-io", "--staging 16M --direct-io"),
        ]
        .into_iter()
        .map(|(id, label, serve, cp_extra)| {
            let mut v = own_server(
                info(id, &format!("{label}, {cp}"), Role::Ferry, label),
                own(serve, &[], &format!("{cp} {cp_extra}"), &disk_file, Dest::File(out.join(format!("{id}.dat"))), n),
            );
            v.cold = true;
            v.sync_after = true;
            v
        })
        .collect();
        let mut g = transfer(
            info("guc", &format!("globus-url-copy {cp}"), Role::Globus, "globus-url-copy"),
            ClientKind::GlobusUrlCopy,
            ServerKind::Globus,
            &cp,
            &xd,
            "guc.dat",
            &out,
        );
        g.cold = true;
        g.sync_after = true;
        v.push(g);
        let mut c: Vec<Comparison> =
            ["sync", "staged", "direct"].into_iter().map(|f| Comparison::until_sync(f, "guc")).collect();
        c.extend(
            ["sync", "staged", "direct"].into_iter().map(|f| Comparison::until_sync(f, "fio-copy").in_group("disk")),
        );
        groups.push(Group {
            id: format!("disk-p{p}"),
            label: format!("disk, {}", streams_label(p)),
            x: None,
            variants: v,
            comparisons: c,
        });
    }
    let fio_row = |id: &str, label: &str, job: FioJob| Variant {
        info: info(id, label, Role::Disk, ""),
        action: Action::Fio { job, size: n },
        cold: true,
        sync_after: false,
    };
    groups.push(Group {
        id: "disk".into(),
        label: "disk limit".into(),
        x: None,
        variants: vec![
            fio_row("fio-read", "fio read, O_DIRECT, 1 MiB, QD1", FioJob::Read { file: disk_file.clone() }),
            fio_row(
                "fio-write",
                "fio write, O_DIRECT, 1 MiB, QD1, fsync",
                FioJob::Write { file: out.join("fio-write.dat") },
            ),
            fio_row(
                "fio-copy",
                "fio read + write at once (a copy's load)",
                FioJob::Copy { from: disk_file.clone(), to: out.join("fio-copy.dat") },
            ),
        ],
        comparisons: vec![],
    });
    // C. The server's peak memory by staging size: the rate is capped so
    // the readers, faster than the network, fill the ring to its
    // high-water mark and the peak shows the bound.
    let v = ["off", "2M", "16M", "64M"]
        .into_iter()
        .map(|ring| {
            let mut v = own_server(
                info(
                    &format!("staging-{ring}"),
                    &format!("staging {ring}, -p 4, disk to /dev/null, 200 MB/s cap"),
                    Role::Ferry,
                    "Ferry, staging by size",
                ),
                own(&format!("--staging {ring} --max-transfer-rate 200M"), &[], "-p 4", &disk_file, Dest::DevNull, n),
            );
            v.cold = true;
            v
        })
        .collect();
    groups.push(Group {
        id: "staging".into(),
        label: "peak memory by staging".into(),
        x: None,
        variants: v,
        comparisons: vec![],
    });
    stages.push(Stage { wan: None, ferry_root: dirs.disk_data(), groups });

    // D. A long path: the fixed cost of a fresh download in round trips.
    let delay = Duration::from_millis(80);
    let mut groups = Vec::new();
    for &size in &plan.dp_long_sizes {
        let name = gb(size).replace(' ', "");
        let file = memory_source(dirs, &format!("dp-long-{name}.bin"));
        data.push(DataSpec::File { path: file.clone(), size });
        let x = Xfer { source: file, dest: MEMORY_SINK, bytes: size, files: 1, setup_source: None };
        groups.push(Group {
            id: format!("long-{name}"),
            label: format!("80 ms, {}", gb(size)),
            x: None,
            variants: vec![
                transfer(
                    info("ferry", "ferry cp (automatic sizing)", Role::Ferry, "ferry cp"),
                    ClientKind::Ferry,
                    ServerKind::Ferry,
                    "",
                    &x,
                    "",
                    &out,
                ),
                transfer(
                    info("guc", "globus-url-copy -p 4", Role::Globus, "globus-url-copy"),
                    ClientKind::GlobusUrlCopy,
                    ServerKind::Globus,
                    "-p 4",
                    &x,
                    "",
                    &out,
                ),
            ],
            comparisons: vec![Comparison::rate("ferry", "guc")],
        });
    }
    stages.push(Stage { wan: Some(WanPath::gbit(delay)), ferry_root: dirs.shm_data(), groups });

    Scenario {
        name: "data-path",
        number: "9",
        title: "Data-path variants".into(),
        description: format!(
            "Ferry's data paths beside their anchors (formerly `bench/data-path.py`; its last figures, made with \
             the servers' virtual `/dev/zero`, stay in `bench/results/data-path/README.md`). Every Ferry row has a \
             `ferry serve` of its own, started with the row's flags and environment and stopped after the run, so \
             \"server peak RSS\" is that run's peak resident memory (`VmHWM`).\n\n\
             * **Memory to memory**: {} from tmpfs to `/dev/null` on loopback, 1 and 4 streams: zero-copy (the \
             default), buffered (`FERRY_DATA_PATH=buffered` on both ends) and staged (`ferry serve --staging \
             16M`), against `globus-url-copy -p N` and iperf3.\n\
             * **Disk to disk**: {} from the server's disk to a new file (same disk), page cache dropped before \
             every row, timed until `sync` returns: synchronous (sendfile, page cache), staged 16 MiB and staged \
             + O_DIRECT (`--staging 16M [--direct-io]` on both ends), against `globus-url-copy` and fio.\n\
             * **Peak memory by staging size**: the disk file to `/dev/null` with 4 streams, the server at \
             `--staging off|2M|16M|64M --max-transfer-rate 200M` (capped so the readers fill the ring to its \
             high-water mark).\n\
             * **A long path**: {} across the emulated 1 Gbit/s path with 80 ms one way, `ferry cp` with automatic \
             sizing against `globus-url-copy -p 4`; \"round trips\" divides the client's wall time by the measured \
             connect RTT (the fixed cost of a fresh download, for the smallest file).\n\n{}\n\n{TIMING_NOTE}\n\n\
             {CPU_NOTE}",
            gb(plan.dp_mem_size),
            gb(plan.dp_disk_size),
            plan.dp_long_sizes.iter().map(|s| gb(*s)).collect::<Vec<_>>().join(", "),
            wan_note("")
        ),
        layout: Layout::DataPath,
        plot: PlotKind::Bars,
        reps: plan.reps_local,
        data,
        stages,
    }
}

// ---- 10. ferry tune against an exhaustive grid (was bench/tune-vs-grid.sh) --

/// Does `ferry tune` find settings as good as an exhaustive grid of the
/// same space? On the 30 ms path: `ferry probe`, `ferry tune`, `ferry tune
/// --exhaustive` over tune's own streams and TCP buffers, then `ferry cp`
/// with tune's pick and with the grid's best, alternating, once per
/// repetition.
pub fn tune(plan: &Plan, dirs: &Dirs) -> Scenario {
    let delay = Duration::from_millis(30);
    let b = plan.tune_bytes;
    let row = |id: &str, label: &str, role: Role, step: TuneStep| Variant {
        info: info(id, label, role, ""),
        action: Action::Tune(TuneRun { step, bytes: b, trial_seconds: 30 }),
        cold: false,
        sync_after: false,
    };
    let steps = Group {
        id: "search".into(),
        label: "the search (first repetition)".into(),
        x: None,
        variants: vec![
            row("probe", "ferry probe --json", Role::Network, TuneStep::Probe),
            row("tune", "ferry tune --json", Role::Ferry, TuneStep::Tune),
            row(
                "grid",
                &format!("ferry tune --exhaustive --repeats {}", plan.tune_grid_repeats),
                Role::Ferry,
                TuneStep::Grid { repeats: plan.tune_grid_repeats },
            ),
        ],
        comparisons: vec![],
    };
    let h2h = Group {
        id: "h2h".into(),
        label: "head to head".into(),
        x: None,
        variants: vec![
            row("cp-tune", "ferry cp with tune's pick", Role::Ferry, TuneStep::Copy { grid: false }),
            row("cp-grid", "ferry cp with the grid's best", Role::Ferry, TuneStep::Copy { grid: true }),
        ],
        comparisons: vec![],
    };
    Scenario {
        name: "tune",
        number: "10",
        title: format!("`ferry tune` against an exhaustive grid: {} one way, 1 Gbit/s", format_delay(delay)),
        description: format!(
            "Does `ferry tune` find settings as good as an exhaustive grid of the same space (formerly \
             `bench/tune-vs-grid.sh`; its last figures stay in `bench/results/tune-vs-grid-30ms.md`)? Against a \
             `ferry serve --memory-paths --memory-zero-size {}` started for each step in the server namespace, \
             from the client namespace (`FERRY_CONFIG=/dev/null`, so no client configuration is read or \
             written): `ferry probe` (the path in numbers), `ferry tune URL/dev/zero --json` (the one-knob-at-a-time \
             sweep), `ferry tune --exhaustive --repeats {}` over exactly the streams and TCP buffers tune used, then \
             `ferry cp` with tune's pick and with the grid's best, alternating, once per repetition ({} \
             repetitions). Every trial downloads the whole virtual /dev/zero to /dev/null; in a download the \
             server picks the MODE E block size and a discarding receiver stages nothing, so the knobs in effect \
             (and swept, by both) are parallel streams and TCP buffer (docs/tune.md). Tune's and the grid's rates \
             are their own (from the transfer command to its end); the head-to-head rows are the harness's wall \
             clock of `ferry cp` (with connection and login). {}",
            gb(b),
            plan.tune_grid_repeats,
            plan.tune_h2h,
            wan_note("")
        ),
        layout: Layout::Tune,
        plot: PlotKind::Bars,
        reps: plan.tune_h2h,
        data: vec![],
        stages: vec![Stage { wan: Some(WanPath::gbit(delay)), ferry_root: dirs.shm_data(), groups: vec![steps, h2h] }],
    }
}

/// The files a row reads.
fn reads(v: &Variant) -> Vec<PathBuf> {
    match &v.action {
        Action::Transfer { source, setup_source, .. } => {
            std::iter::once(source.clone()).chain(setup_source.clone()).collect()
        }
        Action::OwnFerryServer(o) => vec![o.source.clone()],
        Action::Fio { job: FioJob::Read { file }, .. } => vec![file.clone()],
        Action::Fio { job: FioJob::Copy { from, .. }, .. } => vec![from.clone()],
        Action::Cp { src, .. } => vec![src.clone()],
        _ => vec![],
    }
}

/// Keeps only the groups named in `groups` (all when empty), dropping
/// paths left with none, so one case can be measured again (issue 15's
/// "a rerun of that row"). Returns the group ids that matched nothing.
pub fn keep_groups(scenarios: &mut Vec<Scenario>, groups: &[String]) -> Vec<String> {
    if groups.is_empty() {
        return Vec::new();
    }
    let unknown = groups
        .iter()
        .filter(|id| !scenarios.iter().flat_map(|s| &s.stages).flat_map(|st| &st.groups).any(|g| &g.id == *id))
        .cloned()
        .collect();
    for s in scenarios.iter_mut() {
        for st in &mut s.stages {
            st.groups.retain(|g| groups.contains(&g.id));
        }
        s.stages.retain(|st| !st.groups.is_empty());
        // Make only the data the remaining rows read.
        let used: Vec<PathBuf> =
            s.stages.iter().flat_map(|st| &st.groups).flat_map(|g| &g.variants).flat_map(reads).collect();
        s.data.retain(|d| used.iter().any(|p| p.starts_with(d.path())));
    }
    scenarios.retain(|s| !s.stages.is_empty());
    unknown
}

/// The rows of a path measured with 1 and with 4 streams, in one group:
/// Ferry, Globus and iperf3 for 1 stream, then for 4, the not-applicable
/// rows (-udt) last; comparisons renamed to the suffixed ids ("-1", "-4").
fn one_then_four(
    v1: Vec<Variant>,
    c1: Vec<Comparison>,
    v4: Vec<Variant>,
    c4: Vec<Comparison>,
) -> (Vec<Variant>, Vec<Comparison>) {
    let suffix = |c: Vec<Comparison>, s: &str| -> Vec<Comparison> {
        c.into_iter()
            .map(|c| Comparison { ferry: format!("{}-{s}", c.ferry), anchor: format!("{}-{s}", c.anchor), ..c })
            .collect()
    };
    let (udt, mut variants): (Vec<Variant>, Vec<Variant>) =
        v1.into_iter().partition(|v| v.info.not_applicable.is_some());
    variants.extend(v4);
    variants.extend(udt);
    let mut comparisons = suffix(c1, "1");
    comparisons.extend(suffix(c4, "4"));
    (variants, comparisons)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs() -> Dirs {
        Dirs { shm: "/dev/shm/fb".into(), disk: "/var/tmp/fb".into() }
    }

    #[test]
    fn every_scenario_is_present_in_both_modes_and_consistent() {
        for mode in [Mode::Quick, Mode::Full] {
            let plan = Plan::new(mode);
            assert_eq!(all(&plan, &dirs(), "ignored", &[]).iter().map(|s| s.name).collect::<Vec<_>>(), NAMES);
            let names: Vec<String> = every_name().iter().map(|s| s.to_string()).collect();
            let all = all(&plan, &dirs(), "ignored", &names);
            assert_eq!(all.len(), NAMES.len() + EXTRA.len());
            for s in &all {
                assert!(!s.stages.is_empty(), "{}", s.name);
                for st in &s.stages {
                    for g in &st.groups {
                        let mut ids: Vec<&str> = g.variants.iter().map(|v| v.info.id.as_str()).collect();
                        ids.sort();
                        ids.dedup();
                        assert_eq!(ids.len(), g.variants.len(), "{}/{}: duplicate row ids", s.name, g.id);
                        for c in &g.comparisons {
                            assert!(ids.contains(&c.ferry.as_str()), "{}/{}: {}", s.name, g.id, c.ferry);
                            let anchor_group = match &c.anchor_group {
                                // In any stage: the disk-io scenario compares its tmpfs-source
                                // rows with the fio rows of the disk stage.
                                Some(id) => {
                                    s.stages.iter().flat_map(|x| &x.groups).find(|x| &x.id == id).expect("anchor group")
                                }
                                None => g,
                            };
                            assert!(
                                anchor_group.variants.iter().any(|v| v.info.id == c.anchor),
                                "{}/{}: {}",
                                s.name,
                                g.id,
                                c.anchor
                            );
                        }
                        if g.comparisons.is_empty() {
                            // An anchors-only group (the disk's limits).
                            continue;
                        }
                        for v in &g.variants {
                            let source = match &v.action {
                                Action::Transfer { source, .. } => source,
                                Action::OwnFerryServer(o) => &o.source,
                                _ => continue,
                            };
                            assert!(source.starts_with(&st.ferry_root), "{} outside the served root", source.display());
                            assert!(
                                s.data.iter().any(|d| source.starts_with(d.path())) || s.name == "small",
                                "{}: {} is not among the data made",
                                s.name,
                                source.display()
                            );
                        }
                        let roles: Vec<Role> = g.variants.iter().map(|v| v.info.role).collect();
                        assert!(roles.contains(&Role::Ferry), "{}/{} has no Ferry row", s.name, g.id);
                        if EXTRA.contains(&s.name) {
                            // They answer one question each; not every group has every anchor.
                            continue;
                        }
                        assert!(roles.contains(&Role::Globus), "{}/{} has no Globus row", s.name, g.id);
                        assert!(roles.contains(&Role::Network), "{}/{} has no iperf3 row", s.name, g.id);
                        for v in &g.variants {
                            if let Action::Transfer { source, .. } = &v.action {
                                assert!(
                                    source.starts_with(&st.ferry_root),
                                    "{} outside the served root",
                                    source.display()
                                );
                            }
                        }
                    }
                }
            }
            let d = all.iter().find(|s| s.name == "disk").unwrap();
            let roles: Vec<Role> =
                d.stages[0].groups.iter().flat_map(|g| g.variants.iter().map(|v| v.info.role)).collect();
            assert!(roles.contains(&Role::Disk), "disk scenario has fio rows");
        }
        assert_eq!(Plan::new(Mode::Full).sweep_delays.len(), 7);
        assert_eq!(all(&Plan::new(Mode::Quick), &dirs(), "x", &["loss".into()]).len(), 1);
    }

    #[test]
    fn old_new_runs_both_builds_with_the_same_flags() {
        assert!(all(&Plan::new(Mode::Full), &dirs(), "x", &[]).iter().all(|s| s.name != "old-new"), "named only");
        for mode in [Mode::Quick, Mode::Full] {
            let plan = Plan::new(mode);
            let sc = all(&plan, &dirs(), "x", &["old-new".into()]);
            assert_eq!(sc.len(), 1);
            let s = &sc[0];
            assert_eq!(s.reps, if mode == Mode::Full { 5 } else { 2 });
            assert_eq!(s.stages.len(), 2 + plan.old_new_delays.len());
            let mut globus_groups = 0;
            for st in &s.stages {
                for g in &st.groups {
                    let transfer = |id: &str| {
                        let v = g.variants.iter().find(|v| v.info.id == id).expect(id);
                        match &v.action {
                            Action::Transfer { client, server, flags, source, dest, .. } => {
                                assert!(source.starts_with(&st.ferry_root));
                                (v.info.role, *client, *server, flags.clone(), dest.clone(), v.cold)
                            }
                            other => panic!("{other:?}"),
                        }
                    };
                    let new = transfer("new");
                    let old = transfer("old");
                    assert_eq!((new.0, new.1, new.2), (Role::Ferry, ClientKind::Ferry, ServerKind::Ferry));
                    assert_eq!((old.0, old.1, old.2), (Role::FerryOld, ClientKind::FerryOld, ServerKind::FerryOld));
                    assert_eq!(new.3, old.3, "{}: same flags", g.id);
                    assert_eq!(new.5, old.5, "{}: both cold or neither", g.id);
                    assert_eq!(std::mem::discriminant(&new.4), std::mem::discriminant(&old.4));
                    assert!(g.comparisons.contains(&Comparison::rate("new", "old")), "{}", g.id);
                    if g.variants.iter().any(|v| v.info.id == "guc") {
                        globus_groups += 1;
                        assert!(g.comparisons.contains(&Comparison::rate("new", "guc")));
                    }
                }
            }
            // Memory to memory with 1, 4 and 8 streams has the Globus anchor.
            assert_eq!(globus_groups, 3);
        }
    }

    #[test]
    fn a_group_can_be_run_alone() {
        let plan = Plan::new(Mode::Full);
        let mut sc = all(&plan, &dirs(), "x", &["old-new".into()]);
        let unknown = keep_groups(&mut sc, &["disk-p4".into(), "d30000us-p1".into(), "nope".into()]);
        assert_eq!(unknown, ["nope"]);
        let groups: Vec<&str> = sc[0].stages.iter().flat_map(|st| &st.groups).map(|g| g.id.as_str()).collect();
        assert_eq!(groups, ["disk-p4", "d30000us-p1"]);
        assert_eq!(sc[0].stages.len(), 2);
        assert!(sc[0].stages[1].wan.is_some());
        // Only the disk file and the sweep's file are made, not the memory one.
        assert_eq!(sc[0].data.len(), 2);
        assert!(sc[0].data.iter().all(|d| !d.path().to_string_lossy().contains("oldnew-mem")));
        let mut sc = all(&plan, &dirs(), "x", &["old-new".into()]);
        assert!(keep_groups(&mut sc, &[]).is_empty());
        assert_eq!(sc[0].stages.len(), 2 + plan.old_new_delays.len());
    }

    #[test]
    fn sizes() {
        assert_eq!(gb(4 * GIB), "4 GiB");
        assert_eq!(gb(256 * KIB), "256 KiB");
        assert_eq!(gb(VIS_FILE), "2.60 GB");
    }
}
