//! `ferry-bench-service`: the Zipf site-replication set through the
//! transfer service, on one node and on two, beside `ferry cp -r` and
//! `globus-url-copy -r -pp -cc 4` on the same emulated path.
//!
//! Each link is its own `ferry-wan` pair of namespaces (default 200 Mbit/s,
//! 10 ms one way, so two forwarders fit this machine). On each link a
//! source `ferry serve` (and, on the first, the Globus server) runs on the
//! server side and a destination `ferry serve` on the client side, where
//! the service node runs too: the node commands both servers and the data
//! crosses the link once, server to server.
//!
//! Rows (wall clock, from the command's start to the last file done):
//!
//! * `ferry cp -r` and `globus-url-copy -r -cd -pp -cc 4`: downloads of the
//!   set across link 1 into the client side's disk (the anchors);
//! * service, one node (SQLite): one job of the set across link 1;
//! * service, two nodes (PostgreSQL over its Unix socket, which every
//!   namespace reaches): a job of the set on each link at once, each node
//!   limited to its own link's endpoints (`--endpoints`); the figure is
//!   both sets' bytes over the time until both jobs are done.
//!
//! Results: `--results DIR` (default bench/results/service): runs.jsonl and
//! README.md with the table and the ratios. Needs root (namespaces).

use anyhow::{bail, Context, Result};
use clap::Parser;
use ferry_bench::data::{zipf_sizes, Tree};
use ferry_bench::net::{Net, WanPath};
use ferry_bench::plot::{bars, Series};
use ferry_bench::record::Role;
use ferry_bench::scenarios::{ZIPF_EXPONENT, ZIPF_MEAN};
use ferry_bench::stats::Summary;
use ferry_wan::{Rate, Shaper, Side};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
#[command(name = "ferry-bench-service", about = "The Zipf set through the transfer service, 1 and 2 nodes")]
struct Args {
    /// The `ferry` binary (release build).
    #[arg(long, default_value = "target/release/ferry")]
    ferry: PathBuf,
    /// Files in the Zipf set (mean 66 MB; the full set is 24 files).
    #[arg(long, default_value_t = 24)]
    files: usize,
    /// Mean file size in bytes (66 MB in the papers' set).
    #[arg(long, default_value_t = ZIPF_MEAN)]
    mean: u64,
    /// Each link's rate, Mbit/s.
    #[arg(long, default_value_t = 200)]
    rate_mbit: u64,
    /// One-way delay, ms.
    #[arg(long, default_value_t = 10)]
    delay_ms: u64,
    /// Write README.md and service.svg again from the results' runs.jsonl,
    /// measuring nothing.
    #[arg(long)]
    replot: bool,
    /// Repetitions of every row.
    #[arg(long, default_value_t = 2)]
    reps: u32,
    /// Scratch space on disk.
    #[arg(long, default_value = "/var/tmp/ferry-bench-service")]
    work_dir: PathBuf,
    #[arg(long, default_value = "bench/results/service")]
    results: PathBuf,
    /// The optimiser's interval for the service rows.
    #[arg(long, default_value = "5s")]
    optimiser_interval: String,
}

/// Children killed when this value is dropped (any error path included).
#[derive(Default)]
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts a process whose first stdout line contains `marker`; returns
/// that line.
fn start(procs: &mut Procs, mut cmd: Command, log: &Path, marker: &str) -> Result<String> {
    let err = fs::File::create(log)?;
    let mut child = cmd.stdout(Stdio::piped()).stderr(err).spawn().with_context(|| format!("starting {cmd:?}"))?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
    procs.0.push(child);
    if !line.contains(marker) {
        bail!("{cmd:?} did not start: {line:?}; see {}", log.display());
    }
    Ok(line)
}

#[allow(clippy::too_many_arguments)]
fn ferry_serve(
    procs: &mut Procs,
    net: &Net,
    side: Side,
    ferry: &Path,
    root: &Path,
    ip: &str,
    extra: &[&str],
    log: &Path,
) -> Result<String> {
    let mut cmd = net.command(side, &ferry.to_string_lossy());
    cmd.arg("serve").arg(root).args(["--listen", &format!("{ip}:0")]).args(extra);
    let line = start(procs, cmd, log, "serving")?;
    Ok(line.rsplit("ftp://").next().unwrap_or("").trim().trim_end_matches('/').to_string())
}

fn globus(procs: &mut Procs, net: &Net, log: &Path) -> Result<String> {
    let ip = net.server_ip().to_string();
    let port = net.free_server_port()?;
    let mut cmd = net.command(Side::Server, "setpriv");
    cmd.args(["--reuid=nobody", "--regid=nogroup", "--init-groups", "globus-gridftp-server"]);
    cmd.args(["-c", "/dev/null", "-aa", "-p", &port.to_string(), "-control-interface", &ip, "-data-interface", &ip]);
    let err = fs::File::create(log)?;
    procs.0.push(cmd.stdout(Stdio::null()).stderr(err).spawn()?);
    std::thread::sleep(Duration::from_secs(1));
    Ok(format!("{ip}:{port}"))
}

/// Runs a command to the end within `limit`; returns its wall time.
fn timed(mut cmd: Command, limit: Duration, log: &Path) -> Result<Duration> {
    let out = fs::File::create(log)?;
    let started = Instant::now();
    let mut child = cmd.stdout(out.try_clone()?).stderr(out).spawn().with_context(|| format!("{cmd:?}"))?;
    loop {
        if let Some(s) = child.try_wait()? {
            if !s.success() {
                bail!("{cmd:?} failed ({s}); see {}", log.display());
            }
            return Ok(started.elapsed());
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn output(mut cmd: Command) -> Result<String> {
    let out = cmd.output()?;
    if !out.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// PostgreSQL from Debian on a Unix socket only (every namespace reaches
/// it through the file system).
fn postgres(procs: &mut Procs, dir: &Path) -> Result<String> {
    let bin = fs::read_dir("/usr/lib/postgresql")
        .context("PostgreSQL is not installed (apt-get install postgresql; bench/deps.sh)")?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .max()
        .context("no /usr/lib/postgresql/*/bin/initdb")?;
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir)?;
    output({
        let mut c = Command::new("chown");
        c.args(["-R", "nobody:nogroup"]).arg(dir);
        c
    })?;
    let as_nobody = |p: &Path| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]).arg(p);
        c
    };
    let data = dir.join("data");
    output({
        let mut c = as_nobody(&bin.join("initdb"));
        c.arg("-D").arg(&data).args(["-U", "ferry", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"]);
        c
    })?;
    let port = "5432";
    let mut c = as_nobody(&bin.join("postgres"));
    c.arg("-D").arg(&data).args(["-p", port, "-k"]).arg(dir).args([
        "-c",
        "listen_addresses=",
        "-c",
        "max_connections=100",
    ]);
    let log = fs::File::create(dir.join("postgres.log"))?;
    procs.0.push(c.stdout(Stdio::null()).stderr(log).spawn()?);
    for _ in 0..300 {
        if dir.join(format!(".s.PGSQL.{port}")).exists() {
            std::thread::sleep(Duration::from_millis(300));
            return Ok(format!("postgres://ferry@localhost/postgres?host={}&port={port}", dir.display()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("PostgreSQL did not start; see {}", dir.join("postgres.log").display())
}

struct Link {
    net: Net,
    src: String,
    dst: String,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Row {
    id: String,
    label: String,
    rep: u32,
    bytes: u64,
    seconds: f64,
    mb_per_s: f64,
}

fn main() -> Result<()> {
    ferry_bench::forget_path_rates();
    let a = Args::parse();
    if a.replot {
        return replot(&a);
    }
    let ferry = fs::canonicalize(&a.ferry)
        .with_context(|| format!("{} (build with cargo build --release -p ferry)", a.ferry.display()))?;
    let work = a.work_dir.clone();
    fs::create_dir_all(&work)?;
    let logs = work.join("logs");
    fs::create_dir_all(&logs)?;
    let tree =
        Tree { dir: work.join(format!("data/zipf-{}", a.files)), sizes: zipf_sizes(a.files, ZIPF_EXPONENT, a.mean) };
    eprintln!("ferry-bench-service: {} files, {:.2} GB", a.files, tree.total_bytes() as f64 / 1e9);
    tree.ensure(5).map_err(|e| anyhow::anyhow!("{e}"))?;
    let bytes = tree.total_bytes();
    let path = WanPath {
        delay: Duration::from_millis(a.delay_ms),
        rate: Rate::from_bits_per_second(a.rate_mbit * 1_000_000),
        loss: 0.0,
        shaper: Shaper::Tbf,
        tuned: true,
        congestion: None,
    };
    let mut procs = Procs::default();
    let users = work.join("users.toml");
    let mut p = Command::new(&ferry)
        .args(["passwd", "--users"])
        .arg(&users)
        .args(["svc", "--write"])
        .stdin(Stdio::piped())
        .spawn()?;
    p.stdin.take().context("stdin")?.write_all(b"svc-secret\n")?;
    if !p.wait()?.success() {
        bail!("ferry passwd failed");
    }
    let mut links = Vec::new();
    for i in 0..2 {
        let net = Net::wan(path.clone()).map_err(|e| anyhow::anyhow!("{e}"))?;
        let out = work.join(format!("out{i}"));
        fs::create_dir_all(&out)?;
        let src_ip = net.server_ip().to_string();
        let dst_ip = net.client_ip().to_string();
        let src = ferry_serve(
            &mut procs,
            &net,
            Side::Server,
            &ferry,
            &work.join("data"),
            &src_ip,
            &["--anonymous", "read", "--allow-third-party"],
            &logs.join(format!("src{i}.log")),
        )?;
        let dst = ferry_serve(
            &mut procs,
            &net,
            Side::Client,
            &ferry,
            &out,
            &dst_ip,
            &["--users", users.to_str().unwrap_or_default(), "--allow-third-party"],
            &logs.join(format!("dst{i}.log")),
        )?;
        links.push(Link { net, src, dst });
    }
    let guc_server = globus(&mut procs, &links[0].net, &logs.join("globus.log"))?;
    let creds = work.join("credentials");
    fs::write(&creds, links.iter().map(|l| format!("ftp://svc:svc-secret@{}/\n", l.dst)).collect::<String>())?;
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&creds, fs::Permissions::from_mode(0o600))?;
    let limit =
        Duration::from_secs(60) + Duration::from_secs_f64(bytes as f64 * 8.0 / (a.rate_mbit as f64 * 1e6) * 4.0);
    let rel = tree.dir.strip_prefix(work.join("data"))?.display().to_string();
    let mut rows = Vec::new();
    let mut record = |id: &str, label: &str, rep: u32, bytes: u64, t: Duration| {
        let r = Row {
            id: id.into(),
            label: label.into(),
            rep,
            bytes,
            seconds: t.as_secs_f64(),
            mb_per_s: bytes as f64 / t.as_secs_f64() / 1e6,
        };
        eprintln!("  {label:<40} rep {rep}: {:.1} MB/s ({:.1} s)", r.mb_per_s, r.seconds);
        rows.push(r);
    };
    for rep in 0..a.reps {
        let l = &links[0];
        // Anchors: downloads into the client side's disk.
        let out = work.join("out0/anchor");
        let _ = fs::remove_dir_all(&out);
        fs::create_dir_all(&out)?;
        let mut cmd = l.net.command(Side::Client, &ferry.to_string_lossy());
        cmd.args(["cp", "-r", "-q", &format!("ftp://{}/{rel}/", l.src)]).arg(out.join("ferry-cp"));
        record("ferry-cp-r", "ferry cp -r", rep, bytes, timed(cmd, limit, &logs.join("ferry-cp.log"))?);
        let mut cmd = l.net.command(Side::Client, "globus-url-copy");
        cmd.args([
            "-r",
            "-cd",
            "-pp",
            "-cc",
            "4",
            &format!("ftp://{guc_server}{}/", tree.dir.display()),
            &format!("file://{}/guc/", out.display()),
        ]);
        record("guc-r-pp-cc4", "globus-url-copy -r -pp -cc 4", rep, bytes, timed(cmd, limit, &logs.join("guc.log"))?);
        let _ = fs::remove_dir_all(&out);

        // The service on one node (SQLite), link 1.
        let db_file = work.join(format!("service-{rep}.db"));
        for ext in ["", "-wal", "-shm"] {
            let _ = fs::remove_file(format!("{}{ext}", db_file.display()));
        }
        let db = format!("sqlite:{}", db_file.display());
        let token = output({
            let mut c = Command::new(&ferry);
            c.args(["service", "token", "add", "bench", "--db", &db]);
            c
        })?;
        let token = token.lines().last().unwrap_or_default().trim().to_string();
        let t = run_service(&ferry, &a, &links[..1], &db, &token, &creds, &rel, rep, &logs, limit)?;
        record("service-1", "ferry service, 1 node", rep, bytes, t);

        // Two nodes on PostgreSQL, one per link, both sets at once.
        let mut pg = Procs::default();
        let db = postgres(&mut pg, &work.join("pg"))?;
        let token = output({
            let mut c = Command::new(&ferry);
            c.args(["service", "token", "add", "bench", "--db", &db]);
            c
        })?;
        let token = token.lines().last().unwrap_or_default().trim().to_string();
        let t = run_service(&ferry, &a, &links, &db, &token, &creds, &rel, rep, &logs, limit)?;
        record("service-2", "ferry service, 2 nodes (2 links)", rep, 2 * bytes, t);
        drop(pg);
    }
    drop(procs);
    for l in links {
        l.net.down().map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    write_results(&a, &rows, bytes, &std::env::args().collect::<Vec<_>>().join(" "))
}

/// One node per link; submits the set on every link at once and waits for
/// all jobs. Returns the time from the first submission to the last job done.
#[allow(clippy::too_many_arguments)]
fn run_service(
    ferry: &Path,
    a: &Args,
    links: &[Link],
    db: &str,
    token: &str,
    creds: &Path,
    rel: &str,
    rep: u32,
    logs: &Path,
    limit: Duration,
) -> Result<Duration> {
    let mut procs = Procs::default();
    let mut apis = Vec::new();
    for (i, l) in links.iter().enumerate() {
        let mut cmd = l.net.command(Side::Client, &ferry.to_string_lossy());
        // The namespace's own address: its loopback interface is down.
        let listen = format!("{}:0", l.net.client_ip());
        cmd.args(["service", "--db", db, "--listen", &listen, "--node-id", &format!("bench-{i}")])
            .args(["--credentials", &creds.to_string_lossy(), "--optimiser-interval", &a.optimiser_interval])
            .args(["--endpoints", &format!("{},{}", l.src, l.dst)]);
        let line =
            start(&mut procs, cmd, &logs.join(format!("service-{}-{i}-{rep}.log", links.len())), "service node")?;
        let url = line.split(" on ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or_default();
        apis.push(url.trim_end_matches('/').to_string());
    }
    let started = Instant::now();
    let mut ids = Vec::new();
    for (i, l) in links.iter().enumerate() {
        // Each run into a fresh destination directory.
        let dst = format!("ftp://svc@{}/svc-{}-{rep}/", l.dst, links.len());
        let mut cmd = l.net.command(Side::Client, &ferry.to_string_lossy());
        cmd.args(["submit", "--service", &apis[i], "--token", token, "-r", &format!("ftp://{}/{rel}/", l.src), &dst]);
        ids.push(output(cmd)?.lines().last().unwrap_or_default().trim().to_string());
    }
    for (i, l) in links.iter().enumerate() {
        let mut cmd = l.net.command(Side::Client, &ferry.to_string_lossy());
        cmd.args(["job", &ids[i], "--watch", "--service", &apis[i], "--token", token]);
        timed(cmd, limit.saturating_sub(started.elapsed()), &logs.join(format!("job-{}-{i}-{rep}.log", links.len())))?;
    }
    Ok(started.elapsed())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// Writes README.md and the plot again from runs.jsonl (after a change to
/// the report, without measuring again); the command stays the one that
/// measured.
fn replot(a: &Args) -> Result<()> {
    let runs = fs::read_to_string(a.results.join("runs.jsonl")).context("runs.jsonl (measure first)")?;
    let rows: Vec<Row> = runs.lines().map(serde_json::from_str).collect::<std::result::Result<_, _>>()?;
    let readme = fs::read_to_string(a.results.join("README.md")).unwrap_or_default();
    let command = readme
        .split("Command: `")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .context("README.md does not say which command measured")?
        .to_string();
    let bytes = rows.first().map(|r| r.bytes).unwrap_or(0);
    write_results(a, &rows, bytes, &command)
}

fn write_results(a: &Args, rows: &[Row], bytes: u64, command: &str) -> Result<()> {
    fs::create_dir_all(&a.results)?;
    let mut jsonl = String::new();
    for r in rows {
        jsonl += &serde_json::to_string(r)?;
        jsonl.push('\n');
    }
    fs::write(a.results.join("runs.jsonl"), jsonl)?;
    let rate = |id: &str| median(rows.iter().filter(|r| r.id == id).map(|r| r.mb_per_s).collect());
    let (cp, guc, s1, s2) = (rate("ferry-cp-r"), rate("guc-r-pp-cc4"), rate("service-1"), rate("service-2"));
    let best = cp.max(guc);
    let mut md = format!(
        "# The transfer service on the Zipf site-replication set\n\n\
         {} files, Zipf sizes by rank (mean {:.0} MB, {:.2} GB), across `ferry-wan` links of {} Mbit/s with {} ms one-way \
         delay, {} repetitions (medians). Command: `{}`.\n\n\
         | row | MB/s (median) |\n|---|---|\n| `ferry cp -r` (link 1) | {cp:.1} |\n| `globus-url-copy -r -pp -cc 4` (link 1) | {guc:.1} |\n\
         | `ferry service`, 1 node (SQLite, link 1) | {s1:.1} |\n| `ferry service`, 2 nodes (PostgreSQL, one link each, both sets) | {s2:.1} |\n\n\
         * one node ÷ the best anchor: **{:.2}×**\n* two nodes ÷ one node: **{:.2}×**\n",
        a.files,
        bytes as f64 / a.files as f64 / 1e6,
        bytes as f64 / 1e9,
        a.rate_mbit,
        a.delay_ms,
        rows.iter().map(|r| r.rep + 1).max().unwrap_or(0),
        command,
        s1 / best.max(1e-9),
        s2 / s1.max(1e-9),
    );
    md += "\nEvery row is the wall clock from the command's start to its last file (for the service: from the first \
           submission until every job is done, checksums verified). Anchors download into the client side's disk; the \
           service copies server to server into a `ferry serve` on the client side, so the data crosses the link once \
           either way.\n";
    md += "\n![Each row's median throughput, with its spread over the repetitions](service.svg)\n";
    let rows_of = |id: &str| Summary::of(rows.iter().filter(|r| r.id == id).map(|r| r.mb_per_s));
    let categories: Vec<String> =
        ["ferry cp -r", "globus-url-copy -r -pp -cc 4", "service, 1 node", "service, 2 nodes"]
            .map(String::from)
            .to_vec();
    let ferry_points: Vec<(usize, Summary)> = [(0, "ferry-cp-r"), (2, "service-1"), (3, "service-2")]
        .iter()
        .filter_map(|(i, id)| Some((*i, rows_of(id)?)))
        .collect();
    let series = vec![
        Series { name: "Ferry".into(), role: Role::Ferry, points: ferry_points },
        Series {
            name: "Globus GridFTP".into(),
            role: Role::Globus,
            points: rows_of("guc-r-pp-cc4").map(|s| (1, s)).into_iter().collect(),
        },
    ];
    bars(
        &a.results.join("service.svg"),
        &format!("Zipf set, {} files, {} Mbit/s links, {} ms one way", a.files, a.rate_mbit, a.delay_ms),
        "MB/s",
        &categories,
        &series,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    fs::write(a.results.join("README.md"), md)?;
    eprintln!("ferry-bench-service: results in {}", a.results.display());
    Ok(())
}
