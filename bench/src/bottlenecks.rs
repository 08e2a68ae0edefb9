//! The induced-bottleneck suite (issue 14): create each bottleneck on
//! purpose, run `ferry profile` as a user would, and check that the
//! report's verdict names it.
//!
//! | case | how it is induced | expected verdict |
//! |---|---|---|
//! | 1 path rate | `ferry-wan` at 200 Mbit/s, 5 ms each way | network path rate |
//! | 2 loss | `ferry-wan` with 1 % random loss each way, 10 ms each way, CUBIC in both namespaces | packet loss |
//! | 3 receiver window | 30 ms each way, the client namespace's `tcp_rmem` maximum 1 MiB (below the 7.5 MB BDP), one stream | receiver window |
//! | 4 CPU | the server in a cgroup v1 `cpu` group with a quota of 0.1 cores, TLS-protected data (`ftps://`) | CPU on the server |
//! | 5 disk write | the client writes with O_DIRECT (`--direct-io`) to ext4 on a loop device whose writes its blkio cgroup throttles to 16 MiB/s | disk writes on the client |
//! | 6 disk read | the server reads (buffered, the file's cached pages dropped first) from ext4 on a loop device whose reads its blkio cgroup throttles to 16 MiB/s | disk reads on the server |
//! | 7 page-cache copy | a loopback download into an ext4 file through the page cache (`--compare-memory`, as in the issue), ext4 on a tmpfs-backed loop device so writeback keeps up | CPU (page-cache copy) on the client |
//! | 8 send buffer | 80 ms each way, the server namespace's `tcp_wmem` maximum 1 MiB, one stream | sender's socket buffer |
//!
//! Nothing here tells the profiler what was done: it sees what it would
//! see on a real host (the cgroups' quota and throttling counters, thread
//! states, `/proc/PID/io`, `TCP_INFO`). The blkio throttle is the honest
//! way to slow one device down on this kernel (no device-mapper `delay`
//! target): it holds bios before the device sees them, so a writer with
//! O_DIRECT and a reader with cold caches wait for it exactly as for a
//! slow disk, while buffered writes would go to the page cache first.
//!
//! Every environment change is undone by a guard, also on failure:
//! namespaces (with their sysctls) go with the link, cgroups are emptied
//! and removed, loop devices unmounted and detached, and the root
//! namespace's `net.ipv4.tcp_allowed_congestion_control` restored.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ferry_wan::{Rate, Side};

use crate::data::{ensure_file, make_dir};
use crate::error::{BenchError, Result};
use crate::net::{Net, WanPath};
use crate::proc::{command_line, tail, Spawned};

const MIB: u64 = 1 << 20;
const USER: &str = "carol";
const PASSWORD: &str = "bottleneck-suite";

/// Short (the test suite) or long (the benchmark) transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Short,
    Long,
}

/// One induced bottleneck.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub number: u32,
    pub id: &'static str,
    pub title: &'static str,
    /// How it is induced, for the results table.
    pub how: &'static str,
    /// The verdict's `limit` that counts as correct, and its side if it has one.
    pub expect: &'static str,
    pub expect_side: Option<&'static str>,
}

pub const CASES: [Case; 8] = [
    Case {
        number: 1,
        id: "path-rate",
        title: "network path rate",
        how: "ferry-wan 200 Mbit/s, 5 ms each way; -p 2",
        expect: "network_path",
        expect_side: None,
    },
    Case {
        number: 2,
        id: "loss",
        title: "packet loss",
        how: "ferry-wan 1 % loss each way, 10 ms each way, CUBIC; -p 2",
        expect: "loss",
        expect_side: None,
    },
    Case {
        number: 3,
        id: "receiver-window",
        title: "receiver window",
        how: "ferry-wan 1 Gbit/s, 30 ms each way; client tcp_rmem max 1 MiB; -p 1",
        expect: "receiver_window",
        expect_side: Some("client"),
    },
    Case {
        number: 4,
        id: "cpu",
        title: "CPU",
        how: "server in a cgroup v1 cpu group, quota 0.1 cores; ftps:// (TLS data); loopback",
        expect: "cpu",
        expect_side: Some("server"),
    },
    Case {
        number: 5,
        id: "disk-write",
        title: "disk write",
        how: "client writes O_DIRECT (--direct-io) to ext4 on a loop device, blkio write throttle 16 MiB/s; loopback",
        expect: "disk_write",
        expect_side: Some("client"),
    },
    Case {
        number: 6,
        id: "disk-read",
        title: "disk read",
        how: "server reads from ext4 on a loop device, file's pages dropped, blkio read throttle 16 MiB/s; loopback",
        expect: "disk_read",
        expect_side: Some("server"),
    },
    Case {
        number: 7,
        id: "page-cache",
        title: "page-cache copy",
        how: "loopback download into an ext4 file (on a tmpfs-backed loop device) through the page cache, --compare-memory",
        expect: "page_cache_copy",
        expect_side: Some("client"),
    },
    Case {
        number: 8,
        id: "send-buffer",
        title: "sender buffer",
        how: "ferry-wan 1 Gbit/s, 80 ms each way; server tcp_wmem max 1 MiB; -p 1",
        expect: "send_buffer",
        expect_side: Some("server"),
    },
];

/// Where and how the suite runs.
#[derive(Debug, Clone)]
pub struct Suite {
    pub ferry: PathBuf,
    pub scale: Scale,
    /// Scratch space on a disk (images, destination files).
    pub work: PathBuf,
    /// Scratch space in tmpfs (sources that must not touch a disk).
    pub shm: PathBuf,
    /// Sampling interval of `ferry profile`.
    pub interval_ms: u64,
    /// Keep each case's reports (under `work`) instead of removing them.
    pub keep: bool,
}

/// What one run of one case found.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub case: u32,
    pub rep: u32,
    pub expected: String,
    /// The verdict's name ("network path rate", "inconclusive").
    pub verdict: String,
    pub limit: Option<String>,
    pub side: Option<String>,
    pub score: f64,
    pub evidence: Vec<String>,
    pub runner_up: Option<String>,
    pub why_inconclusive: Option<String>,
    /// Every candidate's name, score and evidence, best first.
    pub candidates: Vec<(String, f64, Vec<String>)>,
    /// The score of the candidate the case induced (0 if it is missing).
    pub expected_score: f64,
    /// The best score of every other candidate: the margin the verdict
    /// had is `expected_score - other_score`.
    pub other_score: f64,
    pub bytes_per_s: f64,
    pub seconds: f64,
    pub pass: bool,
    pub error: Option<String>,
    pub command: String,
    /// Where the report was written (removed afterwards unless kept).
    pub report: PathBuf,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed))
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let what = what.into();
    move |e| BenchError::io(what, e)
}

fn run_quiet(cmd: &mut Command, what: &str) -> Result<String> {
    let out = cmd.stdin(Stdio::null()).output().map_err(io_err(format!("running {what}")))?;
    if !out.status.success() {
        return Err(BenchError::Failed {
            what: format!("{what} ({})", command_line(cmd)),
            status: out.status.to_string(),
            detail: tail(&String::from_utf8_lossy(&out.stderr), 400),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A cgroup v1 group under one controller, removed when dropped (its
/// processes are moved back to the parent first).
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    pub fn new(controller: &str, settings: &[(&str, String)]) -> Result<Cgroup> {
        let root = Path::new("/sys/fs/cgroup").join(controller);
        if !root.join("cgroup.procs").exists() {
            return Err(BenchError::Precondition(format!(
                "no cgroup v1 {controller} hierarchy at {} (this suite needs cgroup v1 cpu and blkio)",
                root.display()
            )));
        }
        let dir = root.join(unique("ferry-bneck"));
        fs::create_dir(&dir).map_err(io_err(format!("creating {}", dir.display())))?;
        let cg = Cgroup { dir };
        for (file, value) in settings {
            let p = cg.dir.join(file);
            fs::write(&p, value).map_err(io_err(format!("writing {value:?} to {}", p.display())))?;
        }
        Ok(cg)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let parent = self.dir.parent().map(|p| p.join("cgroup.procs"));
        for _ in 0..50 {
            let procs = fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.split_whitespace() {
                if let Some(p) = &parent {
                    let _ = fs::write(p, pid);
                }
            }
            if fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("ferry-bottlenecks: could not remove cgroup {}", self.dir.display());
    }
}

/// An ext4 file system on a loop device backed by a sparse image file.
#[derive(Debug)]
pub struct LoopDisk {
    image: PathBuf,
    pub device: String,
    /// `major:minor`, for blkio throttling.
    pub dev_id: String,
    pub mount: PathBuf,
    mounted: bool,
}

impl LoopDisk {
    pub fn new(work: &Path, size: u64) -> Result<LoopDisk> {
        let name = unique("ferry-bneck-disk");
        let image = work.join(format!("{name}.img"));
        let mount = work.join(&name);
        let f = fs::File::create(&image).map_err(io_err(format!("creating {}", image.display())))?;
        f.set_len(size).map_err(io_err("sizing the image"))?;
        drop(f);
        let mut d = LoopDisk { image, device: String::new(), dev_id: String::new(), mount, mounted: false };
        let dev = run_quiet(Command::new("losetup").args(["--find", "--show"]).arg(&d.image), "losetup")?;
        d.device = dev.trim().to_string();
        let base = Path::new(&d.device).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        d.dev_id = fs::read_to_string(format!("/sys/block/{base}/dev"))
            .map_err(io_err(format!("reading /sys/block/{base}/dev")))?
            .trim()
            .to_string();
        run_quiet(
            Command::new("mkfs.ext4").args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"]).arg(&d.device),
            "mkfs.ext4",
        )?;
        make_dir(&d.mount)?;
        run_quiet(Command::new("mount").arg(&d.device).arg(&d.mount), "mount")?;
        d.mounted = true;
        Ok(d)
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.mount).status();
        }
        if !self.device.is_empty() {
            let _ = Command::new("losetup").arg("-d").arg(&self.device).status();
        }
        let _ = fs::remove_dir(&self.mount);
        let _ = fs::remove_file(&self.image);
    }
}

/// Runs `argv` with the calling shell first joining `cgroups`.
fn in_cgroups(cgroups: &[&Path], argv: Command) -> Command {
    if cgroups.is_empty() {
        return argv;
    }
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(
            r#"for d; do [ "$d" = -- ] && break; echo $$ > "$d/cgroup.procs" || exit 1; shift; done; shift; exec "$@""#,
        )
        .arg("sh");
    for g in cgroups {
        c.arg(g);
    }
    c.arg("--").arg(argv.get_program());
    c.args(argv.get_args());
    c
}

/// A `ferry serve` with a user who may profile.
struct Served {
    proc: Spawned,
    port: u16,
}

fn make_users(ferry: &Path, dir: &Path) -> Result<PathBuf> {
    let users = dir.join("users.toml");
    let mut child = Command::new(ferry)
        .args(["passwd", "--users"])
        .arg(&users)
        .args(["--write", "--profile", USER])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err("running ferry passwd"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(format!("{PASSWORD}\n").as_bytes()).map_err(io_err("writing to ferry passwd"))?;
    }
    let out = child.wait_with_output().map_err(io_err("running ferry passwd"))?;
    if !out.status.success() {
        return Err(BenchError::output("ferry passwd", String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    Ok(users)
}

fn serve(
    suite: &Suite,
    net: &Net,
    root: &Path,
    users: &Path,
    tls: Option<(&Path, &Path)>,
    cgroups: &[&Path],
    logs: &Path,
) -> Result<Served> {
    let mut cmd = net.command(Side::Server, &suite.ferry.to_string_lossy());
    cmd.arg("serve").arg(root).arg("--listen").arg(format!("{}:0", net.server_ip()));
    cmd.arg("--users").arg(users).arg("--memory-paths");
    if let Some((cert, key)) = tls {
        cmd.arg("--tls-cert").arg(cert).arg("--tls-key").arg(key);
    }
    let proc = Spawned::start(in_cgroups(cgroups, cmd), "ferry serve", logs)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let out = fs::read_to_string(proc.stdout_path()).unwrap_or_default();
        if let Some(port) = out.lines().next().and_then(|l| l.trim_end_matches('/').rsplit(':').next()?.parse().ok()) {
            return Ok(Served { proc, port });
        }
        if proc.exited()? || std::time::Instant::now() > deadline {
            let err = fs::read_to_string(proc.stderr_path()).unwrap_or_default();
            return Err(BenchError::Precondition(format!("ferry serve did not start: {}", tail(&err, 400))));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A self-signed server certificate for 127.0.0.1 (openssl), made per run.
fn certificate(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let conf = dir.join("openssl.cnf");
    fs::write(
        &conf,
        "[req]\ndistinguished_name=dn\nx509_extensions=ext\nprompt=no\n[dn]\nCN=localhost\n\
         [ext]\nbasicConstraints=critical,CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .map_err(io_err("writing openssl.cnf"))?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    run_quiet(
        Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
            .arg("-config")
            .arg(&conf)
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert),
        "openssl req",
    )?;
    Ok((cert, key))
}

fn sysctl(net: &Net, side: Side, setting: &str) -> Result<()> {
    run_quiet(net.command(side, "sysctl").args(["-q", "-w", setting]), "sysctl").map(|_| ())
}

/// Sizes of the transfers, by scale.
fn size(scale: Scale, short: u64, long: u64) -> u64 {
    match scale {
        Scale::Short => short,
        Scale::Long => long,
    }
}

/// Runs one case once; failures to set it up or to run become the
/// outcome's `error` (and a failed check), never a panic.
pub fn run_case(suite: &Suite, case: &Case, rep: u32) -> Outcome {
    let mut o = Outcome {
        case: case.number,
        rep,
        expected: match case.expect_side {
            Some(s) => format!("{} ({s})", case.expect),
            None => case.expect.to_string(),
        },
        ..Outcome::default()
    };
    if let Err(e) = run_case_inner(suite, case, &mut o) {
        o.error = Some(format!("{e}"));
        o.pass = false;
    }
    o
}

fn run_case_inner(suite: &Suite, case: &Case, o: &mut Outcome) -> Result<()> {
    let dir = suite.work.join(unique(&format!("bneck-{}", case.id)));
    make_dir(&dir)?;
    let _cleanup = RemoveDir(dir.clone(), suite.keep);
    let shm = suite.shm.join(unique(&format!("bneck-{}", case.id)));
    make_dir(&shm)?;
    let _cleanup_shm = RemoveDir(shm.clone(), false);
    let logs = dir.join("logs");
    make_dir(&logs)?;
    let users = make_users(&suite.ferry, &dir)?;
    let out = dir.join("report");
    o.report = out.clone();
    let scale = suite.scale;

    // Defaults: a tmpfs source, the download discarded.
    let mut _cubic = None;
    let mut _disk = None;
    let mut cgroups: Vec<Cgroup> = Vec::new();
    let mut server_cg: Vec<usize> = Vec::new();
    let mut client_cg: Vec<usize> = Vec::new();
    let mut tls = None;
    let mut root = shm.clone();
    let file_size;
    let mut dst: Option<PathBuf> = None;
    let mut extra: Vec<String> = Vec::new();
    let wan = |rate: Option<&str>, delay_ms: u64, loss: f64| -> Result<Net> {
        let mut p = WanPath::gbit(Duration::from_millis(delay_ms));
        p.shaper = ferry_wan::Shaper::Forwarder;
        if let Some(r) = rate {
            p.rate = r.parse::<Rate>().map_err(|e| BenchError::Precondition(e.to_string()))?;
        }
        p.loss = loss;
        Net::wan(p)
    };
    let net = match case.id {
        "path-rate" => {
            file_size = size(scale, 64 * MIB, 192 * MIB);
            extra.extend(["-p".into(), "2".into()]);
            wan(Some("200mbit"), 5, 0.0)?
        }
        "loss" => {
            _cubic = Some(crate::net::AllowedCongestion::add("cubic")?);
            file_size = size(scale, 64 * MIB, 160 * MIB);
            extra.extend(["-p".into(), "2".into()]);
            let net = wan(None, 10, 0.01)?;
            for side in [Side::Client, Side::Server] {
                sysctl(&net, side, "net.ipv4.tcp_congestion_control=cubic")?;
            }
            net
        }
        "receiver-window" => {
            file_size = size(scale, 32 * MIB, 96 * MIB);
            extra.extend(["-p".into(), "1".into()]);
            let net = wan(None, 30, 0.0)?;
            sysctl(&net, Side::Client, "net.ipv4.tcp_rmem=4096 131072 1048576")?;
            net
        }
        "send-buffer" => {
            file_size = size(scale, 16 * MIB, 48 * MIB);
            extra.extend(["-p".into(), "1".into()]);
            let net = wan(None, 80, 0.0)?;
            sysctl(&net, Side::Server, "net.ipv4.tcp_wmem=4096 16384 1048576")?;
            net
        }
        "cpu" => {
            file_size = size(scale, 256 * MIB, 768 * MIB);
            let (cert, key) = certificate(&dir)?;
            extra.extend(["--ca".into(), cert.to_string_lossy().into_owned()]);
            tls = Some((cert, key));
            cgroups.push(Cgroup::new(
                "cpu",
                &[("cpu.cfs_period_us", "100000".into()), ("cpu.cfs_quota_us", "10000".into())],
            )?);
            server_cg.push(cgroups.len() - 1);
            Net::Loopback
        }
        "disk-write" => {
            file_size = size(scale, 48 * MIB, 128 * MIB);
            let disk = LoopDisk::new(&dir, 1 << 30)?;
            cgroups.push(Cgroup::new(
                "blkio",
                &[("blkio.throttle.write_bps_device", format!("{} {}", disk.dev_id, 16 * MIB))],
            )?);
            client_cg.push(cgroups.len() - 1);
            dst = Some(disk.mount.join("received.bin"));
            extra.push("--direct-io".into());
            _disk = Some(disk);
            Net::Loopback
        }
        "disk-read" => {
            file_size = size(scale, 48 * MIB, 128 * MIB);
            let disk = LoopDisk::new(&dir, 1 << 30)?;
            cgroups.push(Cgroup::new(
                "blkio",
                &[("blkio.throttle.read_bps_device", format!("{} {}", disk.dev_id, 16 * MIB))],
            )?);
            server_cg.push(cgroups.len() - 1);
            root = disk.mount.join("served");
            make_dir(&root)?;
            _disk = Some(disk);
            Net::Loopback
        }
        "page-cache" => {
            // Since splice(2) on receive (issue 16) a quiet machine moves
            // 1 GiB through the page cache in 0.6-0.8 s, under the verdict's
            // one-second minimum (CI read "inconclusive"): 3 GiB lasts
            // about two seconds there.
            file_size = size(scale, 3 << 30, 4 << 30);
            extra.push("--compare-memory".into());
            // ext4 on a loop device backed by tmpfs: the same page-cache
            // copy as on a disk, with writeback that always keeps up. On
            // this machine's virtual disk, writeback sometimes ran at the
            // transfer's rate and the kernel held the writer back for it
            // (CI saw 280 MiB/s with the client waiting for the disk 0.3
            // threads at a time): a disk limit, not the case this one
            // induces. The image holds the file and the memory-to-disk
            // variant's scratch copy beside it.
            let disk = LoopDisk::new(&shm, 2 * file_size + (512 << 20))?;
            dst = Some(disk.mount.join("received.bin"));
            _disk = Some(disk);
            Net::Loopback
        }
        other => return Err(BenchError::Precondition(format!("unknown case {other}"))),
    };

    let src = root.join("source.bin");
    ensure_file(&src, file_size, 14 + case.number as u64)?;
    if case.id == "disk-read" {
        // Written just now: flush it and drop its cached pages, so the
        // server's reads reach the (throttled) device.
        run_quiet(Command::new("sync").arg(&src), "sync")?;
        run_quiet(
            Command::new("dd").arg(format!("if={}", src.display())).args(["iflag=nocache", "count=0", "status=none"]),
            "dd iflag=nocache",
        )?;
    }
    let server_groups: Vec<&Path> = server_cg.iter().map(|&i| cgroups[i].dir()).collect();
    let served = serve(
        suite,
        &net,
        &root,
        &users,
        tls.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
        &server_groups,
        &logs,
    )?;
    let scheme = if tls.is_some() { "ftps" } else { "ftp" };
    let url = format!("{scheme}://{USER}:{PASSWORD}@{}:{}/source.bin", net.server_ip(), served.port);

    let mut cmd = net.command(Side::Client, &suite.ferry.to_string_lossy());
    cmd.arg("profile").arg("--interval-ms").arg(suite.interval_ms.to_string()).arg("--out").arg(&out);
    cmd.args(&extra);
    cmd.arg(&url);
    if let Some(d) = &dst {
        cmd.arg(d);
    }
    o.command = command_line(&cmd).replace(PASSWORD, "PASSWORD");
    let client_groups: Vec<&Path> = client_cg.iter().map(|&i| cgroups[i].dir()).collect();
    let client = Spawned::start(in_cgroups(&client_groups, cmd), "ferry profile", &logs)?;
    let timeout = Duration::from_secs(match scale {
        Scale::Short => 120,
        Scale::Long => 300,
    });
    let finished = client.wait(timeout);
    let server_log = served.proc.stop();
    let finished = finished?;
    if !finished.status.success() {
        return Err(BenchError::Failed {
            what: "ferry profile".into(),
            status: finished.status.to_string(),
            detail: tail(&format!("{}\nserver: {server_log}", finished.stderr), 600),
        });
    }
    if let Some(d) = &dst {
        let _ = fs::remove_file(d);
    }
    let report = out.join("report.json");
    let text = fs::read_to_string(&report).map_err(io_err(format!("reading {}", report.display())))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| BenchError::output("report.json", e.to_string()))?;
    read_verdict(&json, case, o);
    drop(net);
    Ok(())
}

/// Fills the outcome from `analysis.verdict` and checks it.
pub fn read_verdict(json: &serde_json::Value, case: &Case, o: &mut Outcome) {
    let v = &json["analysis"]["verdict"];
    let s = |k: &str| v[k].as_str().map(str::to_string);
    o.verdict = s("name").unwrap_or_else(|| "no verdict".into());
    o.limit = s("limit");
    o.side = s("side");
    o.score = v["score"].as_f64().unwrap_or(0.0);
    o.evidence = v["evidence"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e.as_str().map(String::from)).collect())
        .unwrap_or_default();
    o.runner_up = s("runner_up");
    o.why_inconclusive = s("why_inconclusive");
    let induced = |c: &serde_json::Value| {
        c["limit"].as_str() == Some(case.expect) && case.expect_side.is_none_or(|side| c["side"].as_str() == Some(side))
    };
    let scores = |want: bool| {
        v["candidates"]
            .as_array()
            .map(|a| a.iter().filter(|c| induced(c) == want).filter_map(|c| c["score"].as_f64()).fold(0.0, f64::max))
            .unwrap_or(0.0)
    };
    o.expected_score = scores(true);
    o.other_score = scores(false);
    o.candidates = v["candidates"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    let ev = c["evidence"]
                        .as_array()
                        .map(|e| e.iter().filter_map(|x| x.as_str().map(String::from)).collect())
                        .unwrap_or_default();
                    (c["name"].as_str().unwrap_or("").to_string(), c["score"].as_f64().unwrap_or(0.0), ev)
                })
                .collect()
        })
        .unwrap_or_default();
    o.bytes_per_s = v["bytes_per_s"].as_f64().unwrap_or(0.0);
    o.seconds = v["seconds"].as_f64().unwrap_or(0.0);
    o.pass = v["conclusive"].as_bool() == Some(true)
        && o.limit.as_deref() == Some(case.expect)
        && case.expect_side.is_none_or(|side| o.side.as_deref() == Some(side));
}

/// Removes a scratch directory when dropped; with `keep`, only what is
/// large (images, data) and leaves the reports.
struct RemoveDir(PathBuf, bool);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        if !self.1 {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// Checks what the suite needs before it starts: root, cgroup v1 `cpu`
/// and `blkio`, the programs it runs.
pub fn preflight(suite: &Suite) -> Result<()> {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root =
        status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|r| r.split_whitespace().nth(1)) == Some("0");
    if !root {
        return Err(BenchError::Precondition(
            "the induced-bottleneck suite must run as root (namespaces, cgroups, loop devices)".into(),
        ));
    }
    for c in ["cpu", "blkio"] {
        if !Path::new("/sys/fs/cgroup").join(c).join("cgroup.procs").exists() {
            return Err(BenchError::Precondition(format!("no cgroup v1 {c} hierarchy under /sys/fs/cgroup/{c}")));
        }
    }
    for p in ["ip", "losetup", "mkfs.ext4", "mount", "openssl", "sysctl", "dd", "sync"] {
        if Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {p}"))
            .stdout(Stdio::null())
            .status()
            .map(|s| !s.success())
            .unwrap_or(true)
        {
            return Err(BenchError::MissingProgram { program: p.into(), hint: "bench/deps.sh installs it".into() });
        }
    }
    if !suite.ferry.exists() {
        return Err(BenchError::Precondition(format!(
            "{} does not exist (cargo build -p ferry)",
            suite.ferry.display()
        )));
    }
    make_dir(&suite.work)?;
    make_dir(&suite.shm)?;
    Ok(())
}

/// The committed results page: one row per case and repetition.
pub fn markdown(
    outcomes: &[Outcome],
    command: &str,
    reps: u32,
    notes: &[(String, String)],
    figure: Option<&str>,
) -> String {
    let mut s = String::new();
    let passed = outcomes.iter().filter(|o| o.pass).count();
    let _ = writeln!(s, "# Induced bottlenecks: does `ferry profile` name them?\n");
    let _ = writeln!(
        s,
        "Each case creates one bottleneck on purpose, runs `ferry profile` as a user would, and checks the report's verdict (`analysis.verdict` in report.json). The suite passes only when every case is named correctly in every repetition. How each case is induced and why it is honest: `bench/src/bottlenecks.rs`; how verdicts are drawn: `docs/profiler.md`.\n"
    );
    let _ = writeln!(
        s,
        "**Result: {passed} of {} runs named correctly** ({} cases × {reps} repetition{}).\n",
        outcomes.len(),
        CASES.len(),
        if reps == 1 { "" } else { "s" }
    );
    let _ = writeln!(s, "Command:\n\n```sh\n{command}\n```\n");
    if let Some(f) = figure {
        let _ = writeln!(
            s,
            "![Per case: the induced limit's score beside the best other candidate's, and the score a verdict needs]({f})\n"
        );
    }
    if !notes.is_empty() {
        s.push_str("| machine | |\n|---|---|\n");
        for (k, v) in notes {
            let _ = writeln!(s, "| {k} | {} |", v.replace('|', "\\|"));
        }
        s.push('\n');
    }
    s.push_str("| case | induced by | rep | expected | verdict | score | rate | evidence (first two figures) | runner-up | result |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for o in outcomes {
        let case = CASES.iter().find(|c| c.number == o.case);
        let evidence = if let Some(e) = &o.error {
            format!("error: {e}")
        } else if let Some(w) = &o.why_inconclusive {
            format!("inconclusive: {w}")
        } else {
            o.evidence.iter().take(2).cloned().collect::<Vec<_>>().join("; ")
        };
        let _ = writeln!(
            s,
            "| {} {} | {} | {} | {} | {} | {:.2} | {:.1} MB/s | {} | {} | {} |",
            o.case,
            case.map(|c| c.title).unwrap_or(""),
            case.map(|c| c.how).unwrap_or(""),
            o.rep,
            o.expected,
            o.verdict,
            o.score,
            o.bytes_per_s / 1e6,
            md(&evidence),
            md(o.runner_up.as_deref().unwrap_or("—")),
            if o.pass { "pass" } else { "**FAIL**" }
        );
    }
    s.push_str("\nThe profiler's own commands, per case (passwords replaced):\n\n");
    let mut seen = std::collections::BTreeSet::new();
    for o in outcomes {
        if seen.insert(o.case) {
            let _ = writeln!(s, "* case {}: `{}`", o.case, o.command);
        }
    }
    s
}

fn md(t: &str) -> String {
    t.replace('|', "\\|").replace('\n', " ")
}

/// The results figure: per case, the score of the induced limit beside the
/// best score of any other candidate (medians, with the range over the
/// repetitions as a whisker), and the score a verdict needs. A case is
/// named correctly when its blue bar clears the line and the grey one by
/// the margin the verdict requires.
pub fn svg(outcomes: &[Outcome], path: &Path) -> Result<()> {
    /// Which score of an outcome a bar shows.
    type Pick = fn(&Outcome) -> f64;
    use plotters::prelude::*;
    let err = |e: plotters::drawing::DrawingAreaErrorKind<std::io::Error>| {
        BenchError::output(format!("drawing {}", path.display()), format!("{e:?}"))
    };
    let summary = |case: u32, f: fn(&Outcome) -> f64| {
        crate::stats::Summary::of(outcomes.iter().filter(|o| o.case == case && o.error.is_none()).map(f))
    };
    let root = SVGBackend::new(path, (1100, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let reps = outcomes.iter().map(|o| o.rep).max().unwrap_or(0);
    let passed = outcomes.iter().filter(|o| o.pass).count();
    let title = format!(
        "ferry profile on induced bottlenecks: {passed} of {} runs named correctly ({reps} repetition{})",
        outcomes.len(),
        if reps == 1 { "" } else { "s" }
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(CASES.len() as f64 - 0.5), 0.0f64..1.35)
        .map_err(err)?;
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() > 0.01 || i < 0.0 {
            return String::new();
        }
        CASES.get(i as usize).map(|c| format!("{} {}", c.number, c.title)).unwrap_or_default()
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(CASES.len())
        .x_label_formatter(&label)
        // Scores end at 1; the room above holds the legend.
        .y_label_formatter(&|y: &f64| if *y > 1.0001 { String::new() } else { format!("{y:.1}") })
        .y_desc("candidate score (0 = no evidence, 1 = all of it)")
        .draw()
        .map_err(err)?;
    let blue = RGBColor(31, 87, 180);
    let grey = RGBColor(160, 160, 160);
    for (i, case) in CASES.iter().enumerate() {
        let series: [(Pick, RGBColor); 2] = [(|o| o.expected_score, blue), (|o| o.other_score, grey)];
        for (k, (f, colour)) in series.into_iter().enumerate() {
            let Some(v) = summary(case.number, f) else { continue };
            let x0 = i as f64 - 0.35 + k as f64 * 0.36;
            let x1 = x0 + 0.32;
            chart
                .draw_series(std::iter::once(Rectangle::new([(x0, 0.0), (x1, v.median)], colour.filled())))
                .map_err(err)?;
            if v.max > v.min {
                let xm = (x0 + x1) / 2.0;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(xm, v.min), (xm, v.max)],
                        BLACK.stroke_width(1),
                    )))
                    .map_err(err)?;
            }
        }
        if outcomes.iter().any(|o| o.case == case.number && !o.pass) {
            chart
                .draw_series(std::iter::once(Text::new(
                    "FAIL",
                    (i as f64 - 0.15, 1.06),
                    ("sans-serif", 14).into_font().color(&RED),
                )))
                .map_err(err)?;
        }
    }
    // ferry_profile::verdict::CONCLUSIVE (the bench does not link the profiler).
    let need = 0.5;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(-0.5, need), (CASES.len() as f64 - 0.5, need)],
            RGBColor(200, 50, 40).stroke_width(1),
        )))
        .map_err(err)?
        .label(format!("score a verdict needs ({need:.1})"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RGBColor(200, 50, 40).stroke_width(1)));
    chart
        .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
        .map_err(err)?
        .label("the induced limit")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], blue.filled()));
    chart
        .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
        .map_err(err)?
        .label("the best other candidate")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], grey.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
