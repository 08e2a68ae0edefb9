//! Striping at scale (issue 20, "Scale, measured"): a striped third-party
//! copy between two striped servers, each data node in its own network
//! namespace behind its own emulated link, for 1, 2 and 3 nodes on each
//! side; Ferry's striped server and the Globus striped server on the same
//! hosts and links; iperf3 over one link pair as the reference.
//!
//! ```text
//!  source side                                  destination side
//!  h0 (front end + node 0) --link--+      +--link-- h3 (front end + node 0)
//!  h1 (node 1)             --link--+- r --+--link-- h4 (node 1)
//!  h2 (node 2)             --link--+  |   +--link-- h5 (node 2)
//!                                     client (ferry cp --stripe / globus-url-copy -stripe)
//! ```
//!
//! A path from a source node to a destination node crosses two links
//! (`ferry_wan::topology`), so its rate is the link rate and its round trip
//! four one-way delays. The client runs in the router's namespace and
//! carries only control traffic. Both sides' nodes share one directory per
//! side (`/dev/shm`), as nodes share a parallel file system.
//!
//! Run as root (namespaces): `ferry-stripe-bench --out bench/results/striping`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ferry_wan::{PathConfig, Rate, Topology, TopologyConfig};

use crate::plot::{bars, Series};
use crate::record::Role;
use crate::stats::Summary;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Setup {
    pub ferry: PathBuf,
    pub out: PathBuf,
    /// Rate of every host link.
    pub rate: Rate,
    /// One-way delay of every host link.
    pub delay: Duration,
    /// Node counts to measure (each at most [`MAX_NODES`]).
    pub nodes: Vec<usize>,
    /// Bytes per node of the file copied (the file is `nodes ×` this).
    pub bytes_per_node: u64,
    pub reps: u32,
    /// Seconds of each iperf3 run.
    pub iperf_secs: u32,
}

/// Hosts per side.
pub const MAX_NODES: usize = 3;

const FERRY_PORT: u16 = 2811;
const FERRY_NODE_PORT: u16 = 7001;
const GLOBUS_PORT: u16 = 2812;
const GLOBUS_NODE_PORT: u16 = 7002;

/// One measurement.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sample {
    pub tool: String,
    pub nodes: usize,
    pub bytes: u64,
    pub secs: f64,
    pub mbit: f64,
}

/// Processes that die with this value.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_for(t: &Topology, host: usize, port: u16) -> Result<()> {
    let addr = std::net::SocketAddr::from((t.host_ip(host), port));
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        // Probed from inside the host's own namespace.
        if t.run_in(host, move || std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok())? {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("nothing listens on {addr} after 20 s")
}

fn spawn(mut c: Command, log: &Path) -> Result<Child> {
    let f = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    c.stdin(Stdio::null()).stdout(f.try_clone()?).stderr(f);
    c.spawn().with_context(|| format!("starting {c:?}"))
}

/// Source and destination host of node `k`.
fn src(k: usize) -> usize {
    k
}
fn dst(k: usize) -> usize {
    MAX_NODES + k
}

/// The Ferry striped servers of both sides, `n` nodes each.
fn ferry_servers(t: &Topology, s: &Setup, n: usize, dirs: &[PathBuf; 2], logs: &Path) -> Result<Procs> {
    let secret = logs.join("node.secret");
    std::fs::write(&secret, "striping-benchmark-node-secret-0123456789\n")?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600))?;
    let mut procs = Procs(Vec::new());
    for (side, dir) in dirs.iter().enumerate() {
        let host = |k| if side == 0 { src(k) } else { dst(k) };
        let mut nodes = Vec::new();
        for k in 0..n {
            let at = format!("{}:{FERRY_NODE_PORT}", t.host_ip(host(k)));
            let mut c = t.command(host(k), &s.ferry.to_string_lossy());
            c.arg("serve").arg(dir).args(["--data-node", "--listen", &at, "--node-secret"]).arg(&secret);
            procs.0.push(spawn(c, &logs.join(format!("ferry-node-{side}-{k}.log")))?);
            nodes.push(at);
        }
        for k in 0..n {
            wait_for(t, host(k), FERRY_NODE_PORT)?;
        }
        let mut c = t.command(host(0), &s.ferry.to_string_lossy());
        c.arg("serve").arg(dir);
        c.args(["--listen", &format!("{}:{FERRY_PORT}", t.host_ip(host(0))), "--stripe-nodes", &nodes.join(",")]);
        c.arg("--node-secret").arg(&secret).args(["--anonymous", "write", "--allow-third-party"]);
        procs.0.push(spawn(c, &logs.join(format!("ferry-front-{side}.log")))?);
        wait_for(t, host(0), FERRY_PORT)?;
    }
    Ok(procs)
}

/// The Globus striped servers (`-r` front end, `-dn` nodes), as nobody.
fn globus_servers(t: &Topology, n: usize, logs: &Path) -> Result<Procs> {
    let mut procs = Procs(Vec::new());
    for side in 0..2 {
        let host = |k| if side == 0 { src(k) } else { dst(k) };
        let gridftp = |h: usize, args: &[String]| {
            let ip = t.host_ip(h).to_string();
            let mut c = t.command(h, "setpriv");
            c.args(["--reuid=nobody", "--regid=nogroup", "--init-groups", "globus-gridftp-server"]);
            c.args(["-c", "/dev/null", "-aa", "-control-interface", &ip, "-data-interface", &ip]);
            c.args(args);
            c
        };
        let mut nodes = Vec::new();
        for k in 0..n {
            let c = gridftp(host(k), &["-dn".into(), "-p".into(), GLOBUS_NODE_PORT.to_string()]);
            procs.0.push(spawn(c, &logs.join(format!("globus-node-{side}-{k}.log")))?);
            nodes.push(format!("{}:{GLOBUS_NODE_PORT}", t.host_ip(host(k))));
        }
        for k in 0..n {
            wait_for(t, host(k), GLOBUS_NODE_PORT)?;
        }
        let c = gridftp(host(0), &["-p".into(), GLOBUS_PORT.to_string(), "-r".into(), nodes.join(",")]);
        procs.0.push(spawn(c, &logs.join(format!("globus-front-{side}.log")))?);
        wait_for(t, host(0), GLOBUS_PORT)?;
    }
    Ok(procs)
}

/// Runs a copy in the router's namespace; seconds it took.
fn timed(mut c: Command, what: &str) -> Result<f64> {
    let started = Instant::now();
    let out = c.stdin(Stdio::null()).output().with_context(|| format!("running {what}"))?;
    let secs = started.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("{what} failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
    Ok(secs)
}

/// iperf3, one stream, from source host `a` to destination host `b`, Mbit/s.
fn iperf(t: &Topology, a: usize, b: usize, secs: u32) -> Result<f64> {
    let ip = t.host_ip(b).to_string();
    let mut server = t.command(b, "iperf3");
    server.args(["-s", "-1", "-B", &ip, "-p", "5201"]).stdout(Stdio::null()).stderr(Stdio::null());
    let server = Procs(vec![server.spawn().context("starting iperf3 -s")?]);
    wait_for(t, b, 5201)?;
    // The probe connection took the server's one test (-1): start again.
    drop(server);
    let mut server = t.command(b, "iperf3");
    server.args(["-s", "-1", "-B", &ip, "-p", "5201"]).stdout(Stdio::null()).stderr(Stdio::null());
    let _server = Procs(vec![server.spawn().context("starting iperf3 -s")?]);
    std::thread::sleep(Duration::from_millis(500));
    let out = t
        .command(a, "iperf3")
        .args(["-c", &ip, "-p", "5201", "-t", &secs.to_string(), "-J"])
        .output()
        .context("running iperf3 -c")?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("iperf3 -J output")?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .map(|b| b / 1e6)
        .with_context(|| format!("iperf3 gave no result: {}", String::from_utf8_lossy(&out.stdout)))
}

fn chown_nobody(p: &Path) -> Result<()> {
    let st = Command::new("chown").args(["-R", "nobody:nogroup"]).arg(p).status()?;
    if !st.success() {
        bail!("chown nobody {}", p.display());
    }
    Ok(())
}

/// Measures everything and writes the table, the plot and the raw samples.
pub fn run(s: &Setup) -> Result<Vec<Sample>> {
    if s.nodes.iter().any(|&n| n == 0 || n > MAX_NODES) {
        bail!("node counts are 1 to {MAX_NODES}");
    }
    std::fs::create_dir_all(&s.out)?;
    let base = PathBuf::from(format!("/dev/shm/ferry-stripe-bench-{}", std::process::id()));
    let logs = base.join("logs");
    let ferry_dirs = [base.join("ferry-a"), base.join("ferry-b")];
    let globus_dirs = [base.join("globus-a"), base.join("globus-b")];
    for d in ferry_dirs.iter().chain(&globus_dirs).chain([&logs]) {
        std::fs::create_dir_all(d)?;
    }
    let result = measure(s, &base, &logs, &ferry_dirs, &globus_dirs);
    let _ = std::fs::remove_dir_all(&base);
    let samples = result?;
    write_results(s, &samples)?;
    Ok(samples)
}

fn measure(
    s: &Setup,
    base: &Path,
    logs: &Path,
    ferry_dirs: &[PathBuf; 2],
    globus_dirs: &[PathBuf; 2],
) -> Result<Vec<Sample>> {
    let path = PathConfig { rate: Some(s.rate), ..PathConfig::delay_only(s.delay) };
    let t = Topology::up(TopologyConfig::uniform("fstripe", 2 * MAX_NODES, path))?;
    let mut samples = Vec::new();
    for k in 0..MAX_NODES {
        for _ in 0..s.reps {
            let mbit = iperf(&t, src(k), dst(k), s.iperf_secs)?;
            eprintln!("iperf3 link pair {k}: {mbit:.1} Mbit/s");
            samples.push(Sample { tool: "iperf3 (one link pair)".into(), nodes: 1, bytes: 0, secs: 0.0, mbit });
        }
    }
    let ferry = s.ferry.to_string_lossy().to_string();
    for &n in &s.nodes {
        let bytes = s.bytes_per_node * n as u64;
        let name = format!("big{n}.bin");
        // The same source bytes for both servers.
        let data = base.join(&name);
        let st = Command::new("head")
            .arg("-c")
            .arg(bytes.to_string())
            .arg("/dev/urandom")
            .stdout(std::fs::File::create(&data)?)
            .status()?;
        if !st.success() {
            bail!("making the source file");
        }
        std::fs::copy(&data, ferry_dirs[0].join(&name))?;
        std::fs::copy(&data, globus_dirs[0].join(&name))?;
        std::fs::remove_file(&data)?;
        chown_nobody(&globus_dirs[0])?;
        chown_nobody(&globus_dirs[1])?;
        {
            t.check()?;
            let _servers = ferry_servers(&t, s, n, ferry_dirs, logs)?;
            for _ in 0..s.reps {
                let from = format!("ftp://{}:{FERRY_PORT}/{name}", t.host_ip(src(0)));
                let to = format!("ftp://{}:{FERRY_PORT}/{name}", t.host_ip(dst(0)));
                let mut c = t.router_command(&ferry);
                c.args(["cp", "--stripe", "-q", "--no-resume", &from, &to]);
                let secs = timed(c, "ferry cp --stripe")?;
                let mbit = bytes as f64 * 8.0 / secs / 1e6;
                eprintln!("Ferry striped, {n} node(s): {mbit:.1} Mbit/s ({secs:.2} s)");
                samples.push(Sample { tool: "Ferry striped".into(), nodes: n, bytes, secs, mbit });
                let got = ferry_dirs[1].join(&name);
                if std::fs::metadata(&got).map(|m| m.len()).unwrap_or(0) != bytes {
                    bail!("Ferry's copy {} is incomplete", got.display());
                }
                std::fs::remove_file(&got)?;
            }
        }
        {
            t.check()?;
            let _servers = globus_servers(&t, n, logs)?;
            for _ in 0..s.reps {
                let from = format!("ftp://{}:{GLOBUS_PORT}{}/{name}", t.host_ip(src(0)), globus_dirs[0].display());
                let to = format!("ftp://{}:{GLOBUS_PORT}{}/{name}", t.host_ip(dst(0)), globus_dirs[1].display());
                let mut c = t.router_command("globus-url-copy");
                c.args(["-stripe", &from, &to]);
                let secs = timed(c, "globus-url-copy -stripe")?;
                let mbit = bytes as f64 * 8.0 / secs / 1e6;
                eprintln!("Globus striped, {n} node(s): {mbit:.1} Mbit/s ({secs:.2} s)");
                samples.push(Sample { tool: "Globus striped".into(), nodes: n, bytes, secs, mbit });
                let got = globus_dirs[1].join(&name);
                if std::fs::metadata(&got).map(|m| m.len()).unwrap_or(0) != bytes {
                    bail!("Globus's copy {} is incomplete", got.display());
                }
                std::fs::remove_file(&got)?;
            }
        }
        std::fs::remove_file(ferry_dirs[0].join(&name))?;
        std::fs::remove_file(globus_dirs[0].join(&name))?;
    }
    t.down()?;
    Ok(samples)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn write_results(s: &Setup, samples: &[Sample]) -> Result<()> {
    let summary =
        |tool: &str, n: usize| Summary::of(samples.iter().filter(|x| x.tool == tool && x.nodes == n).map(|x| x.mbit));
    let link = Summary::of(samples.iter().filter(|x| x.tool.starts_with("iperf3")).map(|x| x.mbit))
        .context("no iperf3 sample")?;
    let mut md = String::new();
    let _ = writeln!(md, "# Striped third-party copies, 1-{MAX_NODES} data nodes per side\n");
    let _ = writeln!(
        md,
        "Each data node in its own network namespace behind its own emulated link ({} Mbit/s, {} ms one-way; \
         a node-to-node path crosses two links: {} ms RTT), `ferry_wan::Topology`. Third-party copy from a striped \
         server of N nodes to another of N nodes, driven from the router namespace; one stream per stripe; \
         files in /dev/shm. Reference: iperf3, one stream over one link pair, median {:.1} Mbit/s \
         (min {:.1}, max {:.1}, {} runs). Ratio = median throughput / (N × that).\n",
        s.rate.bits_per_second() / 1_000_000,
        s.delay.as_millis(),
        4 * s.delay.as_millis(),
        link.median,
        link.min,
        link.max,
        link.n
    );
    let _ = writeln!(
        md,
        "| nodes per side | file | Ferry striped Mbit/s (min-max) | ratio | Globus striped Mbit/s (min-max) | ratio |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    for &n in &s.nodes {
        let cell = |tool: &str| match summary(tool, n) {
            Some(x) => (
                format!("{:.1} ({:.1}-{:.1})", x.median, x.min, x.max),
                format!("{:.2}", x.median / (n as f64 * link.median)),
            ),
            None => ("-".into(), "-".into()),
        };
        let (f, fr) = cell("Ferry striped");
        let (g, gr) = cell("Globus striped");
        let _ = writeln!(md, "| {n} | {} MB | {f} | {fr} | {g} | {gr} |", s.bytes_per_node * n as u64 / 1_000_000);
    }
    let _ = writeln!(
        md,
        "\n{} repetition(s) each; load average before writing this table: {} (2 cores, shared with other work).\n",
        s.reps,
        load_average()
    );
    let _ = writeln!(md, "Raw samples: `stripe.json`. Plot: `stripe.svg`. Command: `command.txt`.");
    std::fs::write(s.out.join("stripe.md"), md)?;
    std::fs::write(s.out.join("stripe.json"), serde_json::to_string_pretty(samples)?)?;
    let categories: Vec<String> = s.nodes.iter().map(|n| format!("{n} node(s) per side")).collect();
    let series_of = |tool: &str, role: Role| Series {
        name: tool.to_string(),
        role,
        points: s.nodes.iter().enumerate().filter_map(|(i, &n)| summary(tool, n).map(|x| (i, x))).collect(),
    };
    let ideal = Series {
        name: "N × iperf3 (one link pair)".into(),
        role: Role::Network,
        points: s
            .nodes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let k = n as f64;
                (i, Summary { n: link.n, median: link.median * k, min: link.min * k, max: link.max * k })
            })
            .collect(),
    };
    let series = vec![series_of("Ferry striped", Role::Ferry), series_of("Globus striped", Role::Globus), ideal];
    let title = format!(
        "Striped third-party copy, {} Mbit/s + {} ms per node link",
        s.rate.bits_per_second() / 1_000_000,
        s.delay.as_millis()
    );
    bars(&s.out.join("stripe.svg"), &title, "Mbit/s", &categories, &series)?;
    Ok(())
}
