//! Issue 17's benchmarks of the UDT transport (`bench/run --scenario
//! udt-table3|udt-long|udt-loopback|udt-fairness`, bench/README.md):
//!
//! * `udt-table3` — the comparative evaluation's Table 3 on `ferry-wan`:
//!   short paths (20–65 ms round trip, 100 Mbit/s) and the far host
//!   (260 ms, policed to 10 Mbit/s with a queue of a few packets, the far
//!   host being the client), hosts with 128 KB TCP buffers and CUBIC,
//!   MTU 1500, 100 MB downloads.
//! * `udt-long` — long fat paths (rate, delays, losses and buffers chosen
//!   on the command line; MTU 9000), and the 256 MiB file at 80 ms.
//! * `udt-loopback` — memory to memory on loopback: Ferry udt, UDT4's
//!   `appserver`/`appclient`, Globus UDT third-party between two
//!   `-dc-default udt` servers; throughput and CPU s/GB at both ends.
//! * `udt-fairness` — Ferry udt and one CUBIC iperf3 flow sharing a
//!   bottleneck; each flow's rate per second.
//!
//! Every row is a download (the server sends) and has a time limit: a row
//! still running when it expires is stopped and reports the bytes that
//! arrived over the limit ("capped"), so crawling TCP rows cost seconds,
//! not hours. Rates are Mbit/s of payload (10^6 bits/s), the wall clock of
//! the client from spawn to exit.
//!
//! The hosts' TCP: CUBIC is set in both namespaces of every link. A
//! namespace may only select a controller the root namespace allows, so
//! for the run `cubic` is added to the root's
//! `net.ipv4.tcp_allowed_congestion_control` and the old value is restored
//! when the run ends, on error and on Ctrl-C ([`crate::net::AllowedCongestion`]; after
//! a SIGKILL, the next run restores it from `/run/ferry-bench`).

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use ferry_wan::{Link, LinkConfig, PathConfig, Rate, Shaper, Side};
use serde::{Deserialize, Serialize};

use crate::data;
use crate::error::{interrupt, BenchError, Result};
use crate::net::{Net, WanPath};
use crate::plot::{self, Series};
use crate::proc::{self, command_line, Spawned};
use crate::record::Role;
use crate::servers::Server;
use crate::stats::Summary;

/// The scenario names `bench/run --scenario` takes for this module.
pub const NAMES: [&str; 4] = ["udt-table3", "udt-long", "udt-loopback", "udt-fairness"];

const MB: u64 = 1_000_000;
const MIB: u64 = 1 << 20;
/// The PlanetLab hosts' maximum TCP buffer.
const PLANETLAB_TCP_MEM: &str = "4096 65536 131072";
/// "Untuned" in benchmark 2: 4 MiB maxima.
const UNTUNED_TCP_MEM: &str = "4096 131072 4194304";

/// A tool of a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Tool {
    /// `ferry cp --transport udt --congestion CC` (server `--congestion CC`).
    FerryUdt {
        cc: String,
    },
    /// `ferry cp --transport udt --path-rate CAPACITY` (ferry cc): the
    /// client announces the path's payload capacity as a measured rate
    /// (`OPTS TPRT Rate=N;`) and the server's sender starts at half of it.
    /// The harness gives the configured capacity, standing in for a probe
    /// that measured the idle link exactly.
    FerryUdtAtRate,
    /// `--transport blast` at this share of the path's capacity (payload rate).
    FerryBlast {
        share: f64,
    },
    FerryTcp {
        p: u32,
    },
    GlobusTcp {
        p: u32,
    },
    /// UDT4's `sendfile` (server side) / `recvfile` (client side).
    Udt4File,
    /// `uftp` (server side) to `uftpd` (client side), unicast; `cc`: TFMCC,
    /// else a fixed rate at the path's capacity.
    Uftp {
        cc: bool,
    },
    /// iperf3 -R with this many streams and TCP congestion control.
    Iperf3 {
        p: u32,
        cc: String,
    },
    /// UDT4's `appclient` → `appserver` (loopback; the sender's rate).
    Udt4App,
    /// globus-url-copy third-party between two `-dc-default udt` servers.
    GlobusUdt,
}

/// One row: an id (selectable with `--rows`), a label, a tool.
#[derive(Debug, Clone)]
pub struct Row {
    pub id: String,
    pub label: String,
    pub tool: Tool,
    /// Run with `Setup::ferry_old` (`--ferry-old`), the baseline build.
    pub old: bool,
}

fn row(id: &str, label: &str, tool: Tool) -> Row {
    Row { id: id.into(), label: label.into(), tool, old: false }
}

/// With a baseline build (`--ferry-old`): each Ferry row followed by its
/// twin run with the baseline (`ID-old`, "LABEL [old]"), so that new and
/// old alternate in one run and their ratio shares the machine's load.
pub fn with_old_rows(rows: Vec<Row>) -> Vec<Row> {
    let mut v = Vec::with_capacity(rows.len() * 2);
    for r in rows {
        let ferry = matches!(
            r.tool,
            Tool::FerryUdt { .. } | Tool::FerryUdtAtRate | Tool::FerryBlast { .. } | Tool::FerryTcp { .. }
        );
        let twin = ferry.then(|| Row {
            id: format!("{}-old", r.id),
            label: format!("{} [old]", r.label),
            tool: r.tool.clone(),
            old: true,
        });
        v.push(r);
        v.extend(twin);
    }
    v
}

/// Table 3's rows.
pub fn table3_rows() -> Vec<Row> {
    let mut r = vec![
        row("ferry-udt", "Ferry udt (ferry cc)", Tool::FerryUdt { cc: "ferry".into() }),
        row("ferry-udt-rate", "Ferry udt (ferry cc, --path-rate capacity)", Tool::FerryUdtAtRate),
        row("ferry-udt-daimd", "Ferry udt (UDT's DAIMD)", Tool::FerryUdt { cc: "udt".into() }),
        row("ferry-blast", "Ferry blast at capacity", Tool::FerryBlast { share: 1.0 }),
        row("ferry-blast-90", "Ferry blast at 0.9× capacity", Tool::FerryBlast { share: 0.9 }),
        row("udt4", "UDT4 sendfile/recvfile", Tool::Udt4File),
        row("uftp-cc", "uftp (TFMCC)", Tool::Uftp { cc: true }),
        row("uftp-fixed", "uftp (no cc, capacity)", Tool::Uftp { cc: false }),
    ];
    for p in [5, 10, 15] {
        r.push(row(&format!("globus-p{p}"), &format!("Globus TCP -p {p}"), Tool::GlobusTcp { p }));
    }
    for p in [5, 10, 15] {
        r.push(row(&format!("ferry-tcp-p{p}"), &format!("Ferry TCP -p {p}"), Tool::FerryTcp { p }));
    }
    r.push(row("iperf3-p10", "iperf3 -P 10", Tool::Iperf3 { p: 10, cc: "cubic".into() }));
    r
}

/// Benchmark 2's rows.
pub fn long_rows() -> Vec<Row> {
    vec![
        row("ferry-udt", "Ferry udt (ferry cc)", Tool::FerryUdt { cc: "ferry".into() }),
        row("ferry-udt-rate", "Ferry udt (ferry cc, --path-rate capacity)", Tool::FerryUdtAtRate),
        row("ferry-udt-daimd", "Ferry udt (UDT's DAIMD)", Tool::FerryUdt { cc: "udt".into() }),
        row("ferry-tcp-p4", "Ferry TCP -p 4", Tool::FerryTcp { p: 4 }),
        row("globus-p4", "Globus TCP -p 4", Tool::GlobusTcp { p: 4 }),
        row("udt4", "UDT4 sendfile/recvfile", Tool::Udt4File),
        row("iperf3", "iperf3 CUBIC 1 stream", Tool::Iperf3 { p: 1, cc: "cubic".into() }),
        row("iperf3-bbr", "iperf3 BBR 1 stream", Tool::Iperf3 { p: 1, cc: "bbr".into() }),
    ]
}

/// Benchmark 3's rows.
pub fn loopback_rows() -> Vec<Row> {
    vec![
        row("ferry-udt", "Ferry udt (ferry cc)", Tool::FerryUdt { cc: "ferry".into() }),
        row("ferry-udt-daimd", "Ferry udt (UDT's DAIMD)", Tool::FerryUdt { cc: "udt".into() }),
        row("udt4-app", "UDT4 appclient → appserver", Tool::Udt4App),
        row("globus-udt", "Globus UDT third-party", Tool::GlobusUdt),
    ]
}

/// A path of a scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PathSpec {
    pub name: String,
    /// None: loopback.
    pub one_way_ms: Option<f64>,
    pub rate_mbit: f64,
    pub loss: f64,
    /// Bottleneck queue in packets of the MTU (None: ferry-wan's default).
    pub queue_packets: Option<u64>,
    pub mtu: u32,
    /// tcp_rmem/tcp_wmem in both namespaces.
    pub tcp_mem: String,
    pub bytes: u64,
}

impl PathSpec {
    fn describe(&self) -> String {
        match self.one_way_ms {
            None => "loopback".into(),
            Some(d) => format!(
                "{} Mbit/s, {} ms round trip, {} % loss each way, queue {}, MTU {}, tcp_rmem/wmem {:?}, CUBIC",
                self.rate_mbit,
                2.0 * d,
                self.loss * 100.0,
                self.queue_packets.map(|q| format!("{q} packets")).unwrap_or_else(|| "default".into()),
                self.mtu,
                self.tcp_mem
            ),
        }
    }
}

/// Table 3's calibrated random loss per path, percent (NAME=PCT), so the
/// `-p 10` TCP row lands where the paper's bbFTP-10 did (the calibration:
/// bench/results/udt-table3/README.md; the far host's 3.5 %: session 10's
/// calibration for whole 100 MB downloads (100 s rows), in
/// bench/results/udt-table3/README.md — 1.5 %, chosen on 25 s rows
/// (bench/results/udt-table3-far-calibration), left Globus `-p 10` at
/// 2.96/3.04 Mbit/s over 100 s, 3 % at 2.06/1.91, 4 % at 0.63/0.86);
/// `--path-loss` overrides it.
pub const TABLE3_LOSS: &str = "rtt20=0.5,rtt40=0.15,rtt65=0,far-client=3.5";
/// The far host's policer queue, packets. Session 11: 3, not 4. With 4
/// at 3.5 % (and at 3.75 %) Globus `-p 10` read 1.74–1.82 Mbit/s, the top
/// of the paper's 1–2, where the "≥ 5× that row" asks for more
/// than any sender can deliver through 3.5 % loss (0.965 × 9.71 Mbit/s of
/// payload); with 3 it reads 1.47 / 1.43, the middle of the band
/// (bench/results/udt-table3/README.md, "Session 11").
pub const TABLE3_FAR_QUEUE: u64 = 3;

/// Parses `NAME=PCT,...` into (name, fraction).
pub fn parse_losses(spec: &str) -> std::result::Result<Vec<(String, f64)>, String> {
    spec.split(',')
        .filter(|x| !x.is_empty())
        .map(|x| {
            let (n, v) = x.split_once('=').ok_or_else(|| format!("{x:?}: expected NAME=PERCENT"))?;
            let v: f64 = v.trim_end_matches('%').parse().map_err(|_| format!("{x:?}: bad percentage"))?;
            Ok((n.to_string(), v / 100.0))
        })
        .collect()
}

/// Table 3's paths: three short paths at 100 Mbit/s and the far host as
/// the client, policed to 10 Mbit/s with a queue of `far_queue` packets.
pub fn table3_paths(losses: &[(String, f64)], far_queue: u64) -> Vec<PathSpec> {
    let loss = |name: &str| losses.iter().rev().find(|(n, _)| n == name).map(|(_, l)| *l).unwrap_or(0.0);
    let short = |name: &str, rtt: f64| PathSpec {
        name: name.into(),
        one_way_ms: Some(rtt / 2.0),
        rate_mbit: 100.0,
        loss: loss(name),
        queue_packets: None,
        mtu: 1500,
        tcp_mem: PLANETLAB_TCP_MEM.into(),
        bytes: 100 * MB,
    };
    vec![
        short("rtt20", 20.0),
        short("rtt40", 40.0),
        short("rtt65", 65.0),
        PathSpec {
            name: "far-client".into(),
            one_way_ms: Some(130.0),
            rate_mbit: 10.0,
            loss: loss("far-client"),
            queue_packets: Some(far_queue),
            mtu: 1500,
            tcp_mem: PLANETLAB_TCP_MEM.into(),
            bytes: 100 * MB,
        },
    ]
}

/// Benchmark 2's paths.
pub fn long_paths(rate_mbit: f64, delays_ms: &[f64], losses: &[f64], buffers: &[String], secs: u64) -> Vec<PathSpec> {
    let mut v = Vec::new();
    let bytes = ((rate_mbit * 1e6 / 8.0 * secs as f64 * 1.2) as u64).clamp(64 * MIB, 4 << 30);
    for b in buffers {
        for d in delays_ms {
            for l in losses {
                let tcp_mem = if b == "tuned" { "4096 131072 67108864" } else { UNTUNED_TCP_MEM };
                v.push(PathSpec {
                    name: format!("{d}ms-{}pct-{b}", l * 100.0),
                    one_way_ms: Some(*d),
                    rate_mbit,
                    loss: *l,
                    queue_packets: None,
                    mtu: 9000,
                    tcp_mem: tcp_mem.into(),
                    bytes,
                });
            }
        }
    }
    v
}

/// What one invocation runs.
#[derive(Debug, Clone)]
pub struct Setup {
    pub scenario: String,
    pub ferry: PathBuf,
    /// The baseline build the `-old` rows run (`--ferry-old`).
    pub ferry_old: Option<PathBuf>,
    /// Scratch in tmpfs (sources, destinations, UDT4's programs).
    pub work: PathBuf,
    pub out: PathBuf,
    pub paths: Vec<PathSpec>,
    pub rows: Vec<Row>,
    pub reps: u32,
    /// Every row's limit.
    pub row_secs: u64,
    /// udt-long: also the 256 MiB file at 80 ms one way (whole file, timed).
    pub file_256: bool,
    /// udt-fairness: the shared bottleneck and how long.
    pub fair_secs: u64,
    pub command: String,
}

/// One measured row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    pub scenario: String,
    pub path: String,
    pub path_desc: String,
    pub row: String,
    pub label: String,
    pub rep: u32,
    pub bytes: u64,
    pub secs: f64,
    pub mbit: f64,
    /// Stopped at the row's limit: the rate is over the limit.
    pub capped: bool,
    pub client_cpu_s: Option<f64>,
    pub server_cpu_s: Option<f64>,
    pub client_rss_kib: Option<u64>,
    pub server_rss_kib: Option<u64>,
    pub load1: f64,
    pub rtt_ms: Option<f64>,
    /// Link counters over the row: random losses and queue drops.
    pub link_lost: u64,
    pub link_drops: u64,
    /// Ferry's `--json` transport stats (UDT: loss, RTT, rate), trimmed.
    pub stats: Option<String>,
    pub command: String,
    pub error: Option<String>,
    /// Fairness: (second, Mbit/s) per flow.
    #[serde(default)]
    pub series: Vec<(f64, f64)>,
}

fn load1() -> f64 {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0.0)
}

fn load_all() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> BenchError {
    move |e| BenchError::io(what, e)
}

/// Brings up a path: a `ferry-wan` link with the path's MTU, rate, queue
/// and loss, then CUBIC and the path's TCP buffers in both namespaces.
fn bring_up(p: &PathSpec, n: usize) -> Result<Net> {
    let Some(one_way) = p.one_way_ms else { return Ok(Net::Loopback) };
    let rate = Rate::from_bits_per_second((p.rate_mbit * 1e6) as u64);
    let pc = PathConfig {
        rate: Some(rate),
        loss: p.loss,
        queue: p.queue_packets.map(|q| q * u64::from(p.mtu)),
        ..PathConfig::delay_only(Duration::from_secs_f64(one_way / 1000.0))
    };
    let mut cfg = LinkConfig::new(format!("fb{}-u{n}", std::process::id()), pc);
    cfg.mtu = p.mtu;
    cfg.tuned = false;
    cfg.shaper = Shaper::Forwarder;
    let link = Link::up(cfg)?;
    for side in [Side::Client, Side::Server] {
        let mut c = link.command(side, "sysctl");
        c.args(["-q", "-w", "net.ipv4.tcp_congestion_control=cubic"]);
        c.arg(format!("net.ipv4.tcp_rmem={}", p.tcp_mem));
        c.arg(format!("net.ipv4.tcp_wmem={}", p.tcp_mem));
        let o = c.output().map_err(io_err("sysctl in a namespace".into()))?;
        if !o.status.success() {
            return Err(BenchError::Precondition(format!(
                "setting CUBIC and tcp_rmem/wmem in the namespace failed: {}",
                String::from_utf8_lossy(&o.stderr)
            )));
        }
    }
    let path = WanPath {
        delay: Duration::from_secs_f64(one_way / 1000.0),
        rate,
        loss: p.loss,
        shaper: Shaper::Forwarder,
        tuned: false,
        // Set above, with the namespaces' buffer limits.
        congestion: None,
    };
    Ok(Net::Wan { link: Box::new(link), path })
}

/// Builds UDT4's example programs (libudt-dev) into `dir`, with one
/// change: an `UDT_MSS` environment variable, when set, becomes the
/// socket's `UDT_MSS` (the examples leave it at libudt's 1500).
pub fn build_udt4(dir: &Path) -> Result<()> {
    let ex = Path::new("/usr/share/doc/libudt-dev/examples");
    data::make_dir(dir)?;
    for f in ["cc.h", "test_util.h"] {
        fs::copy(ex.join(f), dir.join(f)).map_err(io_err(format!("copying {f} from {}", ex.display())))?;
    }
    for prog in ["sendfile", "recvfile", "appserver", "appclient"] {
        let bin = dir.join(prog);
        if bin.exists() {
            continue;
        }
        let plain = ex.join(format!("{prog}.cpp"));
        let src = if plain.exists() {
            fs::read_to_string(&plain).map_err(io_err(format!("reading {}", plain.display())))?
        } else {
            let gz = ex.join(format!("{prog}.cpp.gz"));
            let o = Command::new("zcat").arg(&gz).output().map_err(io_err(format!("zcat {}", gz.display())))?;
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let mut patched = String::from("#include <cstdlib>\n");
        for line in src.lines() {
            patched.push_str(line);
            patched.push('\n');
            if let Some(var) = line
                .trim_start()
                .strip_prefix("UDTSOCKET ")
                .and_then(|r| r.split_once(" = UDT::socket("))
                .map(|(v, _)| v.trim().to_string())
            {
                let _ = writeln!(
                    patched,
                    "   {{ const char* m = getenv(\"UDT_MSS\"); if (m) {{ int v = atoi(m); UDT::setsockopt({var}, 0, UDT_MSS, &v, sizeof(int)); }} }}"
                );
            }
        }
        let cpp = dir.join(format!("{prog}.cpp"));
        fs::write(&cpp, patched).map_err(io_err(format!("writing {}", cpp.display())))?;
        let o = Command::new("g++")
            .args(["-O2", "-w", "-DLINUX", "-I/usr/include/udt", "-o"])
            .arg(&bin)
            .arg(&cpp)
            .args(["-ludt", "-lpthread"])
            .output()
            .map_err(io_err("running g++ (apt-get install g++ libudt-dev)".into()))?;
        if !o.status.success() {
            return Err(BenchError::Precondition(format!(
                "building UDT4's {prog} failed (apt-get install libudt-dev): {}",
                proc::tail(&String::from_utf8_lossy(&o.stderr), 400)
            )));
        }
    }
    Ok(())
}

/// A source file readable by the Globus server's `nobody`.
fn source(work: &Path, bytes: u64) -> Result<PathBuf> {
    let dir = work.join("src");
    data::make_dir(&dir)?;
    let _ = fs::set_permissions(work, fs::Permissions::from_mode(0o755));
    let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o755));
    let f = dir.join(format!("data-{bytes}.bin"));
    data::ensure_file(&f, bytes, 17)?;
    let _ = fs::set_permissions(&f, fs::Permissions::from_mode(0o644));
    Ok(f)
}

fn dest_dir(work: &Path) -> Result<PathBuf> {
    let d = work.join("dst");
    let _ = fs::remove_dir_all(&d);
    data::make_dir(&d)?;
    Ok(d)
}

fn file_size(p: &Path) -> u64 {
    fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// Bytes under a directory, recursively: partial files under their
/// temporary names (Ferry's `.NAME.ferry-part`, uftpd's temp names)
/// count, so a row stopped at its limit reports what arrived.
fn dir_bytes(d: &Path) -> u64 {
    let Ok(r) = fs::read_dir(d) else { return 0 };
    r.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            // Blocks, not the length: parallel streams write blocks at
            // their offsets, so a partial file's length runs ahead of
            // what arrived (its holes hold no blocks). Not past the
            // length either (a tool may reserve space).
            Ok(m) => m.len().min(std::os::unix::fs::MetadataExt::blocks(&m) * 512),
            Err(_) => 0,
        })
        .sum()
}

/// Waits until process `pid` (in whatever namespace) has a UDP socket
/// bound to `port`, at most `limit`: a receiver started before it listens
/// would fail the row on a loaded machine.
fn wait_udp(pid: i32, port: &str, limit: Duration) {
    let want = format!(":{:04X} ", port.parse::<u16>().unwrap_or(0));
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        let bound = ["udp", "udp6"].iter().any(|f| {
            fs::read_to_string(format!("/proc/{pid}/net/{f}")).is_ok_and(|t| {
                t.lines().skip(1).any(|l| l.split_whitespace().nth(1).is_some_and(|a| format!("{a} ").ends_with(&want)))
            })
        });
        if bound {
            sleep(Duration::from_millis(100));
            return;
        }
        sleep(Duration::from_millis(20));
    }
}

/// A client run on a time limit: exits or is stopped at `limit`.
struct Ran {
    wall: f64,
    capped: bool,
    cpu: Option<f64>,
    rss_kib: Option<u64>,
    stdout: String,
    stderr: String,
    ok: bool,
}

/// Runs `cmd`, sampling its peak RSS; at `limit` it is stopped (its CPU
/// read from /proc first). `at_limit` runs just before the stop (to read
/// how much arrived).
fn run_limited(cmd: Command, what: &str, logs: &Path, limit: Duration, mut at_limit: impl FnMut()) -> Result<Ran> {
    let p = Spawned::start(cmd, what, logs)?;
    let t0 = Instant::now();
    let mut rss = None;
    loop {
        interrupt::check()?;
        if p.exited()? {
            break;
        }
        if let Some(r) = proc::peak_rss(p.pid()) {
            rss = Some(rss.map_or(r, |x: u64| x.max(r)));
        }
        if t0.elapsed() >= limit {
            at_limit();
            let wall = t0.elapsed().as_secs_f64();
            let cpu = proc::proc_cpu(p.pid()).ok().map(|c| c.total());
            let (out, err) = (p.stdout_path().to_path_buf(), p.stderr_path().to_path_buf());
            let _ = p.stop();
            let stdout = fs::read_to_string(&out).unwrap_or_default();
            let stderr = fs::read_to_string(&err).unwrap_or_default();
            Spawned::remove_logs(&out, &err);
            return Ok(Ran { wall, capped: true, cpu, rss_kib: rss.map(|b| b / 1024), stdout, stderr, ok: true });
        }
        sleep(Duration::from_millis(25));
    }
    let (out, err) = (p.stdout_path().to_path_buf(), p.stderr_path().to_path_buf());
    let f = p.wait(Duration::from_secs(5))?;
    Spawned::remove_logs(&out, &err);
    Ok(Ran {
        wall: f.wall.as_secs_f64(),
        capped: false,
        cpu: Some(f.cpu_seconds()),
        rss_kib: rss.map(|b| b / 1024),
        ok: f.status.success(),
        stdout: f.stdout,
        stderr: f.stderr,
    })
}

/// The UDT part of `ferry cp --json`'s summary, short.
fn ferry_stats(stdout: &str) -> Option<String> {
    let v: serde_json::Value =
        serde_json::from_str(stdout.lines().rev().find(|l| l.trim_start().starts_with('{'))?).ok()?;
    let mut found = Vec::new();
    find_key(&v, "lost_reported", &mut found);
    let t = v.get("transport").map(|t| t.to_string()).unwrap_or_default();
    let udt: Vec<String> = found
        .iter()
        .map(|o| {
            let g = |k: &str| o.get(k).map(|x| x.to_string()).unwrap_or_default();
            format!(
                "pkts {} retx {} lost_rep {} lost_det {} rtt_us {} rate_Bps {} mss {} cc {} dropped {}",
                g("packets_sent"),
                g("retransmitted"),
                g("lost_reported"),
                g("lost_detected"),
                g("rtt_us"),
                o.get("pacing_rate").and_then(|x| x.as_f64()).map(|x| format!("{x:.0}")).unwrap_or_default(),
                g("mss"),
                g("congestion"),
                g("dropped")
            )
        })
        .collect();
    Some(format!("transport {t}; {}", udt.join("; ")))
}

fn find_key<'a>(v: &'a serde_json::Value, key: &str, out: &mut Vec<&'a serde_json::Value>) {
    match v {
        serde_json::Value::Object(m) => {
            if m.contains_key(key) {
                out.push(v);
            }
            for x in m.values() {
                find_key(x, key, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| find_key(x, key, out)),
        _ => {}
    }
}

fn blank(s: &Setup, p: &PathSpec, r: &Row, rep: u32) -> Sample {
    Sample {
        scenario: s.scenario.clone(),
        path: p.name.clone(),
        path_desc: p.describe(),
        row: r.id.clone(),
        label: r.label.clone(),
        rep,
        bytes: 0,
        secs: 0.0,
        mbit: 0.0,
        capped: false,
        client_cpu_s: None,
        server_cpu_s: None,
        client_rss_kib: None,
        server_rss_kib: None,
        load1: load1(),
        rtt_ms: None,
        link_lost: 0,
        link_drops: 0,
        stats: None,
        command: String::new(),
        error: None,
        series: Vec::new(),
    }
}

/// The path's payload capacity in bytes/s for a rate-based sender at this
/// MTU (IP + UDP + UDT headers are 44 bytes).
fn payload_rate(p: &PathSpec) -> u64 {
    let mtu = f64::from(p.mtu);
    (p.rate_mbit * 1e6 / 8.0 * (mtu - 44.0) / mtu) as u64
}

/// Runs one row on `net`.
fn one_row(s: &Setup, net: &Net, p: &PathSpec, r: &Row, rep: u32, logs: &Path) -> Result<Sample> {
    let mut out = blank(s, p, r, rep);
    let limit = Duration::from_secs(s.row_secs);
    let src = source(&s.work, p.bytes)?;
    let dst = dest_dir(&s.work)?;
    let dst_file = dst.join("copy.bin");
    let ip = net.server_ip();
    let link0 = net.link_stats();
    let mss = p.mtu.to_string();
    let ran;
    let mut server_cpu = None;
    let mut server_rss = None;
    let mut got_bytes = None;
    match &r.tool {
        Tool::FerryUdt { .. } | Tool::FerryUdtAtRate | Tool::FerryBlast { .. } | Tool::FerryTcp { .. } => {
            let ferry = match (&s.ferry_old, r.old) {
                (Some(old), true) => old,
                (None, true) => {
                    return Err(BenchError::Precondition(format!("row {} needs --ferry-old", r.id)));
                }
                _ => &s.ferry,
            };
            let root = src.parent().unwrap_or(Path::new("/"));
            let cc = match &r.tool {
                Tool::FerryUdt { cc } => Some(cc.clone()),
                Tool::FerryUdtAtRate => Some("ferry".into()),
                Tool::FerryBlast { share } => Some(format!("blast:{}", (payload_rate(p) as f64 * share) as u64)),
                _ => None,
            };
            let mut flags: Vec<String> = vec!["--anonymous".into(), "read".into()];
            if let Some(cc) = &cc {
                flags.extend(["--congestion".into(), cc.clone()]);
            }
            let server = Server::start_ferry_with(net, ferry, root, logs, &flags, &[])?;
            let cpu0 = server.pid().and_then(|pid| proc::proc_cpu(pid).ok()).map(|c| c.total()).unwrap_or(0.0);
            let mut cmd = net.command(Side::Client, &ferry.to_string_lossy());
            cmd.args(["cp", "--json"]);
            match &r.tool {
                Tool::FerryTcp { p } => {
                    cmd.args(["-p", &p.to_string()]);
                }
                Tool::FerryBlast { share } => {
                    let rate = (payload_rate(p) as f64 * share) as u64;
                    cmd.args(["--transport", "blast", "--max-rate", &rate.to_string()]);
                }
                Tool::FerryUdt { cc } => {
                    cmd.args(["--transport", "udt", "--congestion", cc]);
                }
                Tool::FerryUdtAtRate => {
                    let rate = payload_rate(p).to_string();
                    cmd.args(["--transport", "udt", "--congestion", "ferry", "--path-rate", &rate]);
                }
                _ => {}
            }
            cmd.arg(server.url(&src)?).arg(&dst_file);
            out.command = format!("{} # server: {}", command_line(&cmd), server.command);
            let mut at_cap = 0;
            ran = run_limited(cmd, "ferry cp", logs, limit, || at_cap = dir_bytes(&dst))?;
            if ran.capped {
                got_bytes = Some(at_cap);
            }
            if let Some(pid) = server.pid() {
                server_rss = proc::peak_rss(pid).map(|b| b / 1024);
            }
            server_cpu = server.settled_cpu().ok().map(|c| c - cpu0);
            out.stats = ferry_stats(&ran.stdout);
            server.stop();
        }
        Tool::GlobusTcp { p: n } => {
            let server = Server::start_globus(net, logs)?;
            let cpu0 = server.pid().and_then(|pid| proc::proc_cpu(pid).ok()).map(|c| c.total()).unwrap_or(0.0);
            let mut cmd = net.command(Side::Client, "globus-url-copy");
            cmd.args(["-p", &n.to_string()]).arg(server.url(&src)?).arg(format!("file://{}", dst_file.display()));
            out.command = format!("{} # server: {}", command_line(&cmd), server.command);
            let mut at_cap = 0;
            ran = run_limited(cmd, "globus-url-copy", logs, limit, || at_cap = dir_bytes(&dst))?;
            if ran.capped {
                got_bytes = Some(at_cap);
                server.stop();
            } else {
                server_cpu = server.settled_cpu().ok().map(|c| c - cpu0);
                server.stop();
            }
        }
        Tool::Udt4File => {
            let udt = s.work.join("udt4");
            let port = net.free_server_port()?.to_string();
            let mut scmd = net.command(Side::Server, &udt.join("sendfile").to_string_lossy());
            scmd.arg(&port).env("UDT_MSS", &mss);
            let sp = Spawned::start(scmd, "UDT4 sendfile", logs)?;
            wait_udp(sp.pid(), &port, Duration::from_secs(10));
            let mut cmd = net.command(Side::Client, &udt.join("recvfile").to_string_lossy());
            cmd.env("UDT_MSS", &mss).arg(ip.to_string()).arg(&port).arg(&src).arg(&dst_file);
            out.command = format!("UDT_MSS={mss} {} # server: UDT_MSS={mss} sendfile {port}", command_line(&cmd));
            let mut at_cap = 0;
            ran = run_limited(cmd, "UDT4 recvfile", logs, limit, || at_cap = dir_bytes(&dst))?;
            got_bytes = Some(if ran.capped { at_cap } else { file_size(&dst_file) });
            server_rss = proc::peak_rss(sp.pid()).map(|b| b / 1024);
            server_cpu = proc::proc_cpu(sp.pid()).ok().map(|c| c.total());
            sp.stop();
        }
        Tool::Uftp { cc } => {
            // uftpd receives (client side), uftp sends (server side), unicast.
            let port = net.free_server_port()?.to_string();
            let mut dcmd = net.command(Side::Client, "uftpd");
            dcmd.args(["-d", "-q", "-p", &port, "-D"]).arg(&dst);
            let d = Spawned::start(dcmd, "uftpd", logs)?;
            wait_udp(d.pid(), &port, Duration::from_secs(10));
            let block = (p.mtu - 200).to_string();
            let mut cmd = net.command(Side::Server, "uftp");
            cmd.args(["-M", &net.client_ip().to_string(), "-p", &port, "-b", &block, "-x", "1"]);
            if *cc {
                cmd.args(["-C", "tfmcc"]);
            } else {
                cmd.args(["-C", "none", "-R", &((p.rate_mbit * 1000.0) as u64).to_string()]);
            }
            cmd.arg(&src);
            out.command = format!("{} # client: uftpd -d -q -p {port} -D {}", command_line(&cmd), dst.display());
            let mut at_cap = 0;
            ran = run_limited(cmd, "uftp", logs, limit, || at_cap = dir_bytes(&dst))?;
            got_bytes = Some(if ran.capped { at_cap } else { dir_bytes(&dst) });
            d.stop();
            if !ran.capped && got_bytes != Some(p.bytes) {
                out.error = Some(format!("uftp delivered {:?} of {} bytes", got_bytes, p.bytes));
            }
        }
        Tool::Iperf3 { p: n, cc } => {
            let port = net.free_server_port()?.to_string();
            let mut scmd = net.command(Side::Server, "iperf3");
            scmd.args(["-s", "-1", "-B", &ip.to_string(), "-p", &port]);
            let sp = Spawned::start(scmd, "iperf3 -s", logs)?;
            sleep(Duration::from_millis(300));
            let secs = s.row_secs.min(if p.rate_mbit >= 50.0 { 10 } else { s.row_secs }).max(3);
            let mut cmd = net.command(Side::Client, "iperf3");
            cmd.args(["-c", &ip.to_string(), "-p", &port, "-R", "-J", "-C", cc, "-t", &secs.to_string()]);
            cmd.args(["-P", &n.to_string()]);
            out.command = command_line(&cmd);
            ran = run_limited(cmd, "iperf3 -c", logs, limit + Duration::from_secs(10), || {})?;
            let _ = sp.wait(Duration::from_secs(10));
            let j: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap_or_default();
            let rb = j["end"]["sum_received"]["bytes"].as_u64();
            let rs = j["end"]["sum_received"]["seconds"].as_f64();
            match (rb, rs) {
                (Some(b), Some(t)) if t > 0.0 => {
                    out.bytes = b;
                    out.secs = t;
                }
                _ => out.error = Some(format!("iperf3: no result: {}", proc::tail(&ran.stdout, 200))),
            }
        }
        Tool::Udt4App | Tool::GlobusUdt => unreachable!("loopback rows run in udt-loopback"),
    }
    if !matches!(r.tool, Tool::Iperf3 { .. }) {
        out.secs = ran.wall;
        out.bytes = got_bytes.unwrap_or_else(|| file_size(&dst_file));
        if !ran.ok && out.error.is_none() {
            out.error = Some(proc::tail(&format!("{}\n{}", ran.stderr, ran.stdout), 300));
        } else if !ran.capped && out.bytes != p.bytes && out.error.is_none() {
            out.error = Some(format!("{} bytes arrived, expected {}", out.bytes, p.bytes));
        }
    }
    out.capped = ran.capped;
    out.client_cpu_s = ran.cpu;
    out.client_rss_kib = ran.rss_kib;
    out.server_cpu_s = server_cpu;
    out.server_rss_kib = server_rss;
    if out.secs > 0.0 {
        out.mbit = out.bytes as f64 * 8.0 / out.secs / 1e6;
    }
    if let (Some(a), Some(b)) = (link0, net.link_stats()) {
        out.link_lost = (b.forward.lost + b.back.lost).saturating_sub(a.forward.lost + a.back.lost);
        out.link_drops =
            (b.forward.queue_drops + b.back.queue_drops).saturating_sub(a.forward.queue_drops + a.back.queue_drops);
    }
    let _ = fs::remove_dir_all(&dst);
    Ok(out)
}

/// Appends a sample to runs.jsonl.
fn record(out: &Path, s: &Sample) -> Result<()> {
    let f = out.join("runs.jsonl");
    let mut h = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&f)
        .map_err(io_err(format!("opening {}", f.display())))?;
    let line = serde_json::to_string(s).map_err(|e| BenchError::output("runs.jsonl", e.to_string()))?;
    writeln!(h, "{line}").map_err(io_err(format!("writing {}", f.display())))?;
    let tag = if s.capped { " (capped)" } else { "" };
    eprintln!(
        "  {:<12} {:<28} rep {} {:>8.2} Mbit/s{tag} in {:.1} s, load {:.1}{}",
        s.path,
        s.label,
        s.rep,
        s.mbit,
        s.secs,
        s.load1,
        s.error.as_deref().map(|e| format!(" ERROR {e}")).unwrap_or_default()
    );
    Ok(())
}

pub fn read_runs(out: &Path) -> Vec<Sample> {
    fs::read_to_string(out.join("runs.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Runs the setup's scenario; writes runs.jsonl, README.md and the SVGs.
pub fn run(s: &Setup) -> Result<Vec<Sample>> {
    data::make_dir(&s.work)?;
    data::make_dir(&s.out)?;
    let logs = s.work.join("logs");
    data::make_dir(&logs)?;
    // The page names the command that measured (not a later --report-only).
    let _ = fs::write(s.out.join("command.txt"), &s.command);
    // Only emulated paths select CUBIC (loopback rows keep the host's).
    let _cc = if s.paths.iter().any(|p| p.one_way_ms.is_some()) {
        Some(crate::net::AllowedCongestion::add("cubic")?)
    } else {
        None
    };
    let needs_udt4 = s.rows.iter().any(|r| matches!(r.tool, Tool::Udt4File | Tool::Udt4App));
    if needs_udt4 {
        build_udt4(&s.work.join("udt4"))?;
    }
    let mut samples = Vec::new();
    eprintln!("ferry-bench: {} — load average {}", s.scenario, load_all());
    if s.scenario == "udt-fairness" {
        for (i, p) in s.paths.iter().enumerate() {
            let net = bring_up(p, i)?;
            let smp = fairness(s, &net, p, &logs)?;
            for x in smp {
                record(&s.out, &x)?;
                samples.push(x);
            }
            net.down()?;
        }
        publish(s)?;
        return Ok(samples);
    }
    for (i, p) in s.paths.iter().enumerate() {
        let net = bring_up(p, i)?;
        let rtt = net.connect_rtt_ms()?;
        eprintln!("ferry-bench: path {} ({}), connect RTT {:?} ms", p.name, p.describe(), rtt);
        for rep in 0..s.reps {
            for r in &s.rows {
                interrupt::check()?;
                let res = if p.one_way_ms.is_none()
                    && matches!(r.tool, Tool::Udt4App | Tool::GlobusUdt | Tool::FerryUdt { .. })
                {
                    loopback_row(s, &net, p, r, rep, &logs)
                } else {
                    one_row(s, &net, p, r, rep, &logs)
                };
                let mut smp = match res {
                    Ok(x) => x,
                    Err(BenchError::Interrupted) => return Err(BenchError::Interrupted),
                    Err(e) => {
                        let mut b = blank(s, p, r, rep);
                        b.error = Some(e.to_string());
                        b
                    }
                };
                smp.rtt_ms = rtt;
                record(&s.out, &smp)?;
                samples.push(smp);
            }
        }
        if s.file_256 && p.one_way_ms == Some(80.0) && p.loss == 0.0 {
            let mut q = p.clone();
            q.bytes = 256 * MIB;
            q.name = format!("{}-256MiB", p.name);
            for rep in 0..s.reps {
                for r in s.rows.iter().filter(|r| {
                    matches!(
                        r.tool,
                        Tool::FerryUdt { .. } | Tool::FerryUdtAtRate | Tool::FerryTcp { .. } | Tool::GlobusTcp { .. }
                    )
                }) {
                    let mut smp = one_row(s, &net, &q, r, rep, &logs).unwrap_or_else(|e| {
                        let mut b = blank(s, &q, r, rep);
                        b.error = Some(e.to_string());
                        b
                    });
                    smp.rtt_ms = rtt;
                    record(&s.out, &smp)?;
                    samples.push(smp);
                }
            }
        }
        net.down()?;
        let _ = publish(s);
    }
    publish(s)?;
    Ok(samples)
}

/// Loopback, memory to memory: the sender reads tmpfs, the receiver
/// discards; CPU of both ends.
fn loopback_row(s: &Setup, net: &Net, p: &PathSpec, r: &Row, rep: u32, logs: &Path) -> Result<Sample> {
    let mut out = blank(s, p, r, rep);
    let limit = Duration::from_secs(s.row_secs);
    match &r.tool {
        Tool::FerryUdt { cc } => {
            let src = source(&s.work, p.bytes)?;
            let root = src.parent().unwrap_or(Path::new("/"));
            let flags: Vec<String> = vec!["--anonymous".into(), "read".into(), "--congestion".into(), cc.clone()];
            let server = Server::start_ferry_with(net, &s.ferry, root, logs, &flags, &[])?;
            let cpu0 = server.pid().and_then(|pid| proc::proc_cpu(pid).ok()).map(|c| c.total()).unwrap_or(0.0);
            let mut cmd = Command::new(&s.ferry);
            cmd.args(["cp", "--json", "--transport", "udt", "--congestion", cc])
                .arg(server.url(&src)?)
                .arg("/dev/null");
            out.command = format!("{} # server: {}", command_line(&cmd), server.command);
            let ran = run_limited(cmd, "ferry cp", logs, limit, || {})?;
            out.server_rss_kib = server.pid().and_then(proc::peak_rss).map(|b| b / 1024);
            out.server_cpu_s = server.settled_cpu().ok().map(|c| c - cpu0);
            server.stop();
            out.bytes = if ran.capped { 0 } else { crate::tools::ferry_json_bytes(&ran.stdout).unwrap_or(0) };
            out.secs = ran.wall;
            out.capped = ran.capped;
            out.client_cpu_s = ran.cpu;
            out.client_rss_kib = ran.rss_kib;
            out.stats = ferry_stats(&ran.stdout);
            if !ran.ok || ran.capped || out.bytes != p.bytes {
                out.error = Some(format!("{} of {} bytes: {}", out.bytes, p.bytes, proc::tail(&ran.stderr, 300)));
            }
        }
        Tool::Udt4App => {
            // appclient sends 100 GB; it runs for the limit and prints the
            // sender's rate each second (UDT::perfmon).
            let udt = s.work.join("udt4");
            let port = net.free_server_port()?.to_string();
            let mut scmd = Command::new(udt.join("appserver"));
            scmd.arg(&port).env("UDT_MSS", p.mtu.to_string());
            let sp = Spawned::start(scmd, "UDT4 appserver", logs)?;
            wait_udp(sp.pid(), &port, Duration::from_secs(10));
            let mut cmd = Command::new(udt.join("appclient"));
            cmd.arg("127.0.0.1").arg(&port).env("UDT_MSS", p.mtu.to_string());
            out.command = format!("UDT_MSS={} {} # server: appserver {port}", p.mtu, command_line(&cmd));
            let secs = s.row_secs.min(15);
            let ran = run_limited(cmd, "UDT4 appclient", logs, Duration::from_secs(secs), || {})?;
            out.server_cpu_s = proc::proc_cpu(sp.pid()).ok().map(|c| c.total());
            out.server_rss_kib = proc::peak_rss(sp.pid()).map(|b| b / 1024);
            sp.stop();
            let rates: Vec<f64> = ran
                .stdout
                .lines()
                .filter_map(|l| l.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()))
                .collect();
            // The first second holds the connection set-up.
            let steady: Vec<f64> = rates.iter().skip(1).copied().collect();
            let mean = if steady.is_empty() { 0.0 } else { steady.iter().sum::<f64>() / steady.len() as f64 };
            out.secs = ran.wall;
            out.bytes = (mean * 1e6 / 8.0 * ran.wall) as u64;
            out.capped = true;
            out.client_cpu_s = ran.cpu;
            out.client_rss_kib = ran.rss_kib;
            out.stats = Some(format!("perfmon Mbit/s per second: {rates:?}"));
            if rates.is_empty() {
                out.error = Some(format!("no perfmon output: {}", proc::tail(&ran.stdout, 200)));
            }
        }
        Tool::GlobusUdt => {
            let src = source(&s.work, p.bytes)?;
            let extra = ["-threads", "2", "-dc-whitelist", "udt,tcp", "-dc-default", "udt"];
            let a = Server::start_globus_with(net, logs, &extra)?;
            let b = Server::start_globus_with(net, logs, &extra)?;
            let a0 = a.pid().and_then(|pid| proc::proc_cpu(pid).ok()).map(|c| c.total()).unwrap_or(0.0);
            let b0 = b.pid().and_then(|pid| proc::proc_cpu(pid).ok()).map(|c| c.total()).unwrap_or(0.0);
            let mut cmd = Command::new("globus-url-copy");
            cmd.arg(a.url(&src)?).arg(b.url(Path::new("/dev/null"))?);
            out.command = format!("{} # servers: {}", command_line(&cmd), a.command);
            let ran = run_limited(cmd, "globus-url-copy third-party", logs, limit, || {})?;
            out.server_cpu_s = a.settled_cpu().ok().map(|c| c - a0);
            // The receiving server's CPU stands in the "client" column.
            out.client_cpu_s = b.settled_cpu().ok().map(|c| c - b0);
            a.stop();
            b.stop();
            out.secs = ran.wall;
            out.capped = ran.capped;
            out.bytes = if ran.ok && !ran.capped { p.bytes } else { 0 };
            out.stats = Some(format!("globus-url-copy's own CPU {:.2} s (control only)", ran.cpu.unwrap_or(0.0)));
            if !ran.ok || ran.capped {
                out.error = Some(proc::tail(&format!("{}\n{}", ran.stderr, ran.stdout), 300));
            }
        }
        _ => return one_row(s, net, p, r, rep, logs),
    }
    if out.secs > 0.0 {
        out.mbit = out.bytes as f64 * 8.0 / out.secs / 1e6;
    }
    Ok(out)
}

/// Benchmark 4: Ferry udt (default controller) and one CUBIC iperf3 flow
/// share the path's bottleneck for `fair_secs`; each flow's rate per
/// second (Ferry's from its destination file's growth, iperf3's from its
/// one-second intervals).
fn fairness(s: &Setup, net: &Net, p: &PathSpec, logs: &Path) -> Result<Vec<Sample>> {
    let secs = s.fair_secs;
    let src = source(&s.work, p.bytes)?;
    let dst = dest_dir(&s.work)?;
    let dst_file = dst.join("copy.bin");
    let root = src.parent().unwrap_or(Path::new("/"));
    let server = Server::start_ferry_with(net, &s.ferry, root, logs, &["--anonymous".into(), "read".into()], &[])?;
    let ip = net.server_ip().to_string();
    let port = net.free_server_port()?.to_string();
    let mut scmd = net.command(Side::Server, "iperf3");
    scmd.args(["-s", "-1", "-B", &ip, "-p", &port]);
    let isrv = Spawned::start(scmd, "iperf3 -s", logs)?;
    sleep(Duration::from_millis(300));
    let mut icmd = net.command(Side::Client, "iperf3");
    icmd.args(["-c", &ip, "-p", &port, "-R", "-J", "-C", "cubic", "-i", "1", "-t", &secs.to_string()]);
    let icommand = command_line(&icmd);
    let mut fcmd = net.command(Side::Client, &s.ferry.to_string_lossy());
    fcmd.args(["cp", "--json", "--transport", "udt"]).arg(server.url(&src)?).arg(&dst_file);
    let fcommand = format!("{} # server: {}", command_line(&fcmd), server.command);
    let load = load1();
    let ip3 = Spawned::start(icmd, "iperf3 -c", logs)?;
    let fp = Spawned::start(fcmd, "ferry cp", logs)?;
    let t0 = Instant::now();
    let mut ferry_series = Vec::new();
    let mut last = 0u64;
    let mut next = 1.0;
    let mut ferry_rss = None;
    while t0.elapsed().as_secs_f64() < secs as f64 + 0.5 {
        interrupt::check()?;
        let t = t0.elapsed().as_secs_f64();
        if t >= next {
            let b = dir_bytes(&dst);
            ferry_series.push((next, (b - last.min(b)) as f64 * 8.0 / 1e6));
            last = b;
            next += 1.0;
        }
        if let Some(r) = proc::peak_rss(fp.pid()) {
            ferry_rss = Some(r / 1024);
        }
        if fp.exited()? && ip3.exited()? {
            break;
        }
        sleep(Duration::from_millis(20));
    }
    let ferry_bytes = dir_bytes(&dst);
    let ferry_wall = t0.elapsed().as_secs_f64();
    let _ = fp.stop();
    let ir = ip3.wait(Duration::from_secs(30))?;
    let _ = isrv.wait(Duration::from_secs(5));
    server.stop();
    let j: serde_json::Value = serde_json::from_str(&ir.stdout).unwrap_or_default();
    let mut iperf_series = Vec::new();
    if let Some(iv) = j["intervals"].as_array() {
        for x in iv {
            if let (Some(e), Some(b)) = (x["sum"]["end"].as_f64(), x["sum"]["bits_per_second"].as_f64()) {
                iperf_series.push((e.round(), b / 1e6));
            }
        }
    }
    let ib = j["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    let is = j["end"]["sum_received"]["seconds"].as_f64().unwrap_or(0.0);
    let row_f = row("ferry-udt", "Ferry udt (ferry cc)", Tool::FerryUdt { cc: "ferry".into() });
    let row_i = row("iperf3-cubic", "iperf3 CUBIC 1 stream", Tool::Iperf3 { p: 1, cc: "cubic".into() });
    let mut f = blank(s, p, &row_f, 0);
    f.bytes = ferry_bytes;
    f.secs = ferry_wall.min(secs as f64);
    f.mbit = ferry_bytes as f64 * 8.0 / f.secs / 1e6;
    f.capped = true;
    f.client_rss_kib = ferry_rss;
    f.load1 = load;
    f.series = ferry_series;
    f.command = fcommand;
    let mut i = blank(s, p, &row_i, 0);
    i.bytes = ib;
    i.secs = is;
    i.mbit = if is > 0.0 { ib as f64 * 8.0 / is / 1e6 } else { 0.0 };
    i.load1 = load;
    i.series = iperf_series;
    i.command = icommand;
    if ib == 0 {
        i.error = Some(format!("iperf3: {}", proc::tail(&ir.stdout, 200)));
    }
    let _ = fs::remove_dir_all(&dst);
    Ok(vec![f, i])
}

fn summary(v: &[f64]) -> Option<Summary> {
    Summary::of(v.iter().copied())
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn sd(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// The page: one table, a row per tool and a column per path (mean and
/// min–max over the repetitions, Mbit/s; the best per path in bold), the
/// CPU and memory table, the commands; and the SVG.
pub fn markdown(s: &Setup, samples: &[Sample]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# {}\n", s.scenario);
    let command = fs::read_to_string(s.out.join("command.txt")).unwrap_or_else(|_| s.command.clone());
    let _ = writeln!(md, "Command: `{}`\n", command.trim());
    let _ = writeln!(md, "Ferry: `{}`. Every figure below is Mbit/s of payload (10^6 bit/s) over the client's wall clock (spawn to exit); \"capped\" rows were stopped at the row's limit ({} s) and report what arrived over it. Load average (1 min) is beside each row.\n", s.ferry.display(), s.row_secs);
    if let Some(old) = &s.ferry_old {
        let _ = writeln!(
            md,
            "Rows marked [old] ran `{}` (`--ferry-old`), each right after its new twin, in the same run.\n",
            old.display()
        );
    }
    let mut paths: Vec<(String, String)> = Vec::new();
    for x in samples {
        if !paths.iter().any(|(n, _)| n == &x.path) {
            paths.push((x.path.clone(), x.path_desc.clone()));
        }
    }
    let mut rows: Vec<(String, String)> = Vec::new();
    for x in samples {
        if !rows.iter().any(|(n, _)| n == &x.row) {
            rows.push((x.row.clone(), x.label.clone()));
        }
    }
    md.push_str("Paths:\n\n");
    for (n, d) in &paths {
        let rtt = samples.iter().find(|x| &x.path == n).and_then(|x| x.rtt_ms);
        let _ = writeln!(
            md,
            "* `{n}`: {d}{}",
            rtt.map(|r| format!("; measured connect RTT {r:.1} ms")).unwrap_or_default()
        );
    }
    md.push('\n');
    let vals = |path: &str, row: &str| -> Vec<f64> {
        samples.iter().filter(|x| x.path == path && x.row == row && x.error.is_none()).map(|x| x.mbit).collect()
    };
    let _ = write!(md, "| tool |");
    for (n, _) in &paths {
        let _ = write!(md, " {n} |");
    }
    let short: Vec<&String> = paths.iter().map(|(n, _)| n).filter(|n| n.starts_with("rtt")).collect();
    if short.len() > 1 {
        md.push_str(" short paths: mean ± sd |");
    }
    md.push_str("\n|---|");
    for _ in &paths {
        md.push_str("---:|");
    }
    if short.len() > 1 {
        md.push_str("---:|");
    }
    md.push('\n');
    let best: Vec<f64> = paths
        .iter()
        .map(|(n, _)| {
            rows.iter().filter(|(r, _)| !r.starts_with("iperf3")).map(|(r, _)| mean(&vals(n, r))).fold(0.0, f64::max)
        })
        .collect();
    for (r, label) in &rows {
        let _ = write!(md, "| {label} |");
        for (i, (n, _)) in paths.iter().enumerate() {
            let v = vals(n, r);
            let all: Vec<&Sample> = samples.iter().filter(|x| &x.path == n && &x.row == r).collect();
            if all.is_empty() {
                md.push_str(" |");
                continue;
            }
            if v.is_empty() {
                md.push_str(" failed |");
                continue;
            }
            let m = mean(&v);
            let sm = summary(&v).unwrap_or(Summary { n: 0, median: 0.0, min: 0.0, max: 0.0 });
            let cell = if v.len() > 1 { format!("{m:.2} ({:.2}–{:.2})", sm.min, sm.max) } else { format!("{m:.2}") };
            let capped = if all.iter().any(|x| x.capped) && !r.starts_with("udt4-app") { "ᶜ" } else { "" };
            let load = mean(&all.iter().map(|x| x.load1).collect::<Vec<_>>());
            if !r.starts_with("iperf3") && (m - best[i]).abs() < 1e-9 && m > 0.0 {
                let _ = write!(md, " **{cell}**{capped} [{load:.1}] |");
            } else {
                let _ = write!(md, " {cell}{capped} [{load:.1}] |");
            }
        }
        if short.len() > 1 {
            let ms: Vec<f64> = short.iter().map(|n| mean(&vals(n, r))).collect();
            let _ = write!(md, " {:.1} ± {:.1} |", mean(&ms), sd(&ms));
        }
        md.push('\n');
    }
    md.push_str("\nᶜ: stopped at the row's limit; the rate is over the limit. [x]: load average (1 min) at the row's start, mean over repetitions. Bold: the best tool of the path (iperf3 excluded: it is the network's limit, not a file transfer).\n\n");
    // CPU and memory.
    md.push_str("## CPU and memory\n\n| path | tool | rep | Mbit/s | client CPU s/GB | server CPU s/GB | client peak RSS MiB | server peak RSS MiB | link random losses | link queue drops | transport stats |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for x in samples {
        let gb = x.bytes as f64 / 1e9;
        let per =
            |c: Option<f64>| c.filter(|_| gb > 0.0).map(|c| format!("{:.2}", c / gb)).unwrap_or_else(|| "–".into());
        let mib = |k: Option<u64>| k.map(|k| format!("{:.0}", k as f64 / 1024.0)).unwrap_or_else(|| "–".into());
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2}{} | {} | {} | {} | {} | {} | {} | {} |",
            x.path,
            x.label,
            x.rep,
            x.mbit,
            if x.capped { "ᶜ" } else { "" },
            per(x.client_cpu_s),
            per(x.server_cpu_s),
            mib(x.client_rss_kib),
            mib(x.server_rss_kib),
            x.link_lost,
            x.link_drops,
            x.error
                .as_deref()
                .map(|e| format!("ERROR: {}", e.replace('|', "/")))
                .or(x.stats.clone())
                .unwrap_or_default()
                .replace('|', "/")
        );
    }
    md.push_str("\n## Commands (first repetition of each row)\n\n");
    for (r, _) in &rows {
        if let Some(x) = samples.iter().find(|x| &x.row == r) {
            let _ = writeln!(md, "* `{}`", x.command);
        }
    }
    md
}

/// Writes README.md and the SVG(s) from runs.jsonl.
pub fn publish(s: &Setup) -> Result<()> {
    let samples = read_runs(&s.out);
    let mut page = markdown(s, &samples);
    let notes = s.out.join("NOTES.md");
    if let Ok(n) = fs::read_to_string(&notes) {
        page = format!("{n}\n\n{page}");
    }
    fs::write(s.out.join("README.md"), page).map_err(io_err("writing README.md".into()))?;
    let mut paths: Vec<String> = Vec::new();
    for x in &samples {
        if !paths.contains(&x.path) {
            paths.push(x.path.clone());
        }
    }
    if s.scenario == "udt-fairness" {
        let mut series = Vec::new();
        let mut xs: Vec<String> = Vec::new();
        for x in samples.iter().filter(|x| !x.series.is_empty()) {
            let pts: Vec<(usize, Summary)> =
                x.series.iter().filter_map(|(t, v)| summary(&[*v]).map(|sm| (*t as usize, sm))).collect();
            for (t, _) in &x.series {
                let k = format!("{}", *t as usize);
                if !xs.contains(&k) {
                    xs.push(k);
                }
            }
            series.push(Series { name: format!("{} ({})", x.label, x.path), role: role_of(&x.row), points: pts });
        }
        xs.sort_by_key(|k| k.parse::<usize>().unwrap_or(0));
        let xs: Vec<String> =
            (0..=xs.iter().filter_map(|k| k.parse::<usize>().ok()).max().unwrap_or(0)).map(|t| t.to_string()).collect();
        if !series.is_empty() {
            plot::lines(
                &s.out.join("fairness.svg"),
                "Ferry udt and CUBIC sharing a bottleneck",
                "second",
                "Mbit/s",
                &xs,
                &series,
            )?;
        }
        return Ok(());
    }
    let mut rows: Vec<(String, String)> = Vec::new();
    for x in &samples {
        if !rows.iter().any(|(n, _)| n == &x.row) {
            rows.push((x.row.clone(), x.label.clone()));
        }
    }
    let series: Vec<Series> = rows
        .iter()
        .map(|(r, label)| Series {
            name: label.clone(),
            role: role_of(r),
            points: paths
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let v: Vec<f64> = samples
                        .iter()
                        .filter(|x| &x.path == p && &x.row == r && x.error.is_none())
                        .map(|x| x.mbit)
                        .collect();
                    summary(&v).map(|sm| (i, sm))
                })
                .collect(),
        })
        .collect();
    if !series.is_empty() {
        plot::bars(&s.out.join(format!("{}.svg", s.scenario)), &s.scenario, "Mbit/s", &paths, &series)?;
    }
    Ok(())
}

fn role_of(row: &str) -> Role {
    if row.starts_with("ferry") {
        Role::Ferry
    } else if row.starts_with("globus") {
        Role::Globus
    } else if row.starts_with("iperf3") {
        Role::Network
    } else {
        Role::Cross
    }
}
