//! `ferry-bench`: Ferry against Globus GridFTP, iperf3 and fio. Normally
//! started by `bench/run`, which installs the tools and builds the release
//! binaries first.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;

use ferry_bench::error::{interrupt, BenchError};
use ferry_bench::record::{Meta, Recorder};
use ferry_bench::runner::{self, Runner, Settings};
use ferry_bench::scenarios::{self, DataSpec, Dirs, Mode, Plan};
use ferry_bench::servers::Server;
use ferry_bench::{machine, net::Net, proc, publish};

#[derive(Debug, Parser)]
#[command(name = "ferry-bench", about = "Ferry's benchmark harness (see bench/README.md)")]
struct Args {
    /// Fewer repetitions, smaller files, delays 0/10/80 ms only; every scenario still runs.
    #[arg(long)]
    quick: bool,
    /// Run only these scenarios (repeat or comma-separate): mem, disk, delay, climate, vis, zipf, small, loss;
    /// and, only when named, old-new (needs --ferry-old).
    #[arg(long = "scenario", value_delimiter = ',')]
    scenarios: Vec<String>,
    /// Repetitions of every row (default: 3 on loopback and 2 on emulated paths; 2 with --quick).
    #[arg(long)]
    reps: Option<u32>,
    /// Where runs.jsonl, the Markdown pages and the plots go (default: bench/results/full or bench/results/quick).
    #[arg(long)]
    results: Option<PathBuf>,
    /// Run only these cases (group ids as in runs.jsonl, e.g. disk-p4, d30000us-p1; repeat or
    /// comma-separate): a rerun of a row. Writes to `<default results>-rerun` unless --results is given.
    #[arg(long = "group", value_delimiter = ',')]
    groups: Vec<String>,
    /// Only regenerate the pages and plots from the results directory's runs.jsonl.
    #[arg(long)]
    report_only: bool,
    /// The `ferry` binary to measure (default: the one next to this program).
    #[arg(long)]
    ferry: Option<PathBuf>,
    /// A baseline `ferry` binary built from an older commit: runs the old-new scenario (the default
    /// scenario when this is given), which compares it with --ferry row by row.
    #[arg(long)]
    ferry_old: Option<PathBuf>,
    /// Scratch space on disk (sources, destinations; up to about 10 GB in a full run).
    #[arg(long, default_value = "/var/tmp/ferry-bench")]
    work_dir: PathBuf,
    /// Scratch space in tmpfs for memory-to-memory sources (up to about 4.5 GB).
    #[arg(long, default_value = "/dev/shm/ferry-bench")]
    shm_dir: PathBuf,
    /// Keep the generated data sets for the next invocation.
    #[arg(long)]
    keep_data: bool,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
    /// udt-* scenarios: only these rows (ids as in runs.jsonl, e.g. ferry-udt,globus-p10).
    #[arg(long = "rows", value_delimiter = ',')]
    rows: Vec<String>,
    /// udt-* scenarios: only these paths (names as in runs.jsonl, e.g. rtt20,far-client).
    #[arg(long = "paths", value_delimiter = ',')]
    paths: Vec<String>,
    /// udt-* scenarios: every row's time limit, seconds (default 30; udt-fairness: the shared run).
    #[arg(long)]
    row_secs: Option<u64>,
    /// udt-table3: random loss per path, percent, NAME=PCT,... (default: the calibration,
    /// bench/results/udt-table3/README.md).
    #[arg(long, default_value = ferry_bench::udt_bench::TABLE3_LOSS)]
    path_loss: String,
    /// udt-table3: the far host's policer queue, packets.
    #[arg(long, default_value_t = ferry_bench::udt_bench::TABLE3_FAR_QUEUE)]
    far_queue: u64,
    /// udt-long / udt-fairness: the link rate, Mbit/s (udt-long: default 1000; udt-fairness: 150).
    #[arg(long)]
    rate_mbit: Option<f64>,
    /// udt-long: one-way delays, ms (default 30,80,150).
    #[arg(long, value_delimiter = ',')]
    delays_ms: Vec<f64>,
    /// udt-long: random loss each way, percent (default 0,0.1,1,5).
    #[arg(long, value_delimiter = ',')]
    losses_pct: Vec<f64>,
    /// udt-long: host buffers, untuned (4 MiB) and/or tuned (64 MiB) (default both).
    #[arg(long, value_delimiter = ',')]
    buffers: Vec<String>,
}

const STOP_SIGNALS: [i32; 3] = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP];

fn main() -> ExitCode {
    ferry_bench::forget_path_rates();
    let args = Args::parse();
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferry-bench: {e:#}");
            if e.downcast_ref::<BenchError>().is_some_and(|b| matches!(b, BenchError::Interrupted)) {
                ExitCode::from(130)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn run(args: Args) -> Result<ExitCode> {
    let mode = if args.quick { Mode::Quick } else { Mode::Full };
    if !args.scenarios.is_empty() && args.scenarios.iter().all(|s| ferry_bench::udt_bench::NAMES.contains(&s.as_str()))
    {
        return run_udt(&args);
    }
    let mut only: Vec<String> = args.scenarios.clone();
    if only.is_empty() && args.ferry_old.is_some() {
        only.push("old-new".into());
    }
    for s in &only {
        if !scenarios::every_name().contains(&s.as_str()) {
            bail!("unknown scenario {s:?}; the scenarios are: {}", scenarios::every_name().join(", "));
        }
    }
    if only.iter().any(|s| s == "old-new") && args.ferry_old.is_none() && !args.report_only && !args.list {
        bail!("the old-new scenario needs --ferry-old PATH: a ferry binary built from the baseline commit");
    }
    let results = args.results.clone().unwrap_or_else(|| {
        let d = default_results(mode, &only);
        // A rerun of some cases must not replace the full run's records.
        if args.groups.is_empty() || args.report_only {
            d
        } else {
            PathBuf::from(format!("{}-rerun", d.display()))
        }
    });
    let dirs = Dirs { shm: args.shm_dir.clone(), disk: args.work_dir.clone() };
    let mut plan = Plan::new(mode);
    plan.with_old = args.ferry_old.is_some();
    if let Some(r) = args.reps {
        plan = plan.with_reps(r);
    }
    if args.list {
        let listed: Vec<String> = if only.is_empty() {
            scenarios::every_name().iter().map(|s| s.to_string()).collect()
        } else {
            only.clone()
        };
        for s in scenarios::all(&plan, &dirs, "(checked at run time)", &listed) {
            let stages = s.stages.len();
            let rows: usize = s.stages.iter().flat_map(|st| st.groups.iter()).map(|g| g.variants.len()).sum();
            let bytes: u64 = s.data.iter().map(DataSpec::bytes).sum();
            println!(
                "{:<8} {:>3}. {} — {} path(s), {} rows, {} reps, {:.2} GB of data",
                s.name,
                s.number,
                s.title,
                stages,
                rows,
                s.reps,
                bytes as f64 / 1e9
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.report_only {
        let written =
            publish::publish(&results).with_context(|| format!("regenerating the report in {}", results.display()))?;
        eprintln!("ferry-bench: wrote {} files in {}", written.len(), results.display());
        return Ok(ExitCode::SUCCESS);
    }

    // Ctrl-C, SIGTERM and SIGHUP set a flag every wait checks, so the run
    // unwinds through the guards that stop servers and remove the emulated
    // link's namespaces; a second signal exits at once (then `ferry-wan down
    // --name fbPID-N` removes a link left behind).
    let flag = interrupt::flag();
    for sig in STOP_SIGNALS {
        signal_hook::flag::register_conditional_shutdown(sig, 130, flag.clone())?;
        signal_hook::flag::register(sig, flag.clone())?;
    }

    let ferry_bin = match &args.ferry {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("ferry"),
    };
    let ferry_bin = ferry_bin.canonicalize().with_context(|| {
        format!("the ferry binary {} (build it: cargo build --release -p ferry)", ferry_bin.display())
    })?;
    let command =
        std::env::var("FERRY_BENCH_COMMAND").unwrap_or_else(|_| std::env::args().collect::<Vec<_>>().join(" "));

    preflight(&ferry_bin, &dirs)?;
    for s in ferry_bench::servers::registry::stop_orphans() {
        eprintln!("ferry-bench: stopped {s}");
    }
    remove_stale_links();
    let ferry_old = match &args.ferry_old {
        Some(p) => Some(p.canonicalize().with_context(|| {
            format!("the baseline ferry binary {} (--ferry-old; see bench/README.md)", p.display())
        })?),
        None => None,
    };
    if let Some(old) = &ferry_old {
        preflight_ferry(old)?;
    }
    let mut probe_plan = scenarios::all(&plan, &dirs, "", &only);
    let unknown = scenarios::keep_groups(&mut probe_plan, &args.groups);
    if !unknown.is_empty() {
        bail!("no case (group) named {} in the scenarios chosen", unknown.join(", "));
    }
    check_space(&probe_plan, &dirs)?;
    std::fs::create_dir_all(&results).with_context(|| format!("creating {}", results.display()))?;
    runner::make_dirs(&dirs)?;

    let started = Instant::now();
    let outcome = (|| -> Result<Vec<String>> {
        eprintln!("ferry-bench: probing whether globus-url-copy honours -udt for ftp:// URLs");
        let udt_reason = probe_udt(&dirs)?;
        eprintln!("ferry-bench: -udt: {udt_reason}");
        let mut scenarios = scenarios::all(&plan, &dirs, &udt_reason, &only);
        scenarios::keep_groups(&mut scenarios, &args.groups);
        let names: Vec<&str> = scenarios.iter().map(|s| s.name).collect();
        let repo = std::env::current_dir()?;
        let meta = Meta {
            started: ferry_bench::record::now_rfc3339(),
            command: command.clone(),
            mode: mode.name().into(),
            machine: machine::describe(
                &ferry_bin,
                &[("disk scratch", dirs.disk.as_path()), ("tmpfs scratch", dirs.shm.as_path())],
                &repo,
            ),
        };
        let mut recorder = Recorder::open(&results.join(publish::RUNS_FILE), &names, meta)?;
        let settings = Settings {
            ferry_bin: ferry_bin.clone(),
            ferry_old: ferry_old.clone(),
            dirs: dirs.clone(),
            keep_data: args.keep_data,
            command,
            mode,
        };
        let mut failed_scenarios = Vec::new();
        for sc in &scenarios {
            let t = Instant::now();
            let result = Runner { settings: &settings, recorder: &mut recorder }.run(sc);
            // Pages after every scenario: an interrupted run still leaves them.
            if let Err(e) = publish::publish(&results) {
                eprintln!("ferry-bench: writing the report failed: {e}");
            }
            match result {
                Ok(()) => eprintln!("== {} done in {:.0} s", sc.name, t.elapsed().as_secs_f64()),
                Err(BenchError::Interrupted) => return Err(BenchError::Interrupted.into()),
                Err(e) => {
                    eprintln!("ferry-bench: scenario {} stopped: {e}", sc.name);
                    failed_scenarios.push(format!("{}: {e}", sc.name));
                }
            }
        }
        Ok(failed_scenarios)
    })();
    runner::clean_dirs(&dirs, args.keep_data);
    let failed_scenarios = outcome?;
    let failed_runs = publish::failures(&results)?;
    eprintln!(
        "\nferry-bench: finished in {:.1} min; results in {}/README.md",
        started.elapsed().as_secs_f64() / 60.0,
        results.display()
    );
    if !failed_scenarios.is_empty() || failed_runs > 0 {
        eprintln!(
            "ferry-bench: {} scenario(s) stopped early, {failed_runs} run(s) failed (see the pages){}",
            failed_scenarios.len(),
            failed_scenarios.iter().map(|f| format!("\n  {f}")).collect::<String>()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The UDT scenarios (issue 17, `ferry_bench::udt_bench`): one after the
/// other, each into `bench/results/NAME/` (or `--results`).
fn run_udt(args: &Args) -> Result<ExitCode> {
    use ferry_bench::udt_bench::{self as u, Setup};
    let flag = interrupt::flag();
    for sig in STOP_SIGNALS {
        signal_hook::flag::register_conditional_shutdown(sig, 130, flag.clone())?;
        signal_hook::flag::register(sig, flag.clone())?;
    }
    let ferry = match &args.ferry {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("ferry"),
    };
    let ferry = ferry.canonicalize().with_context(|| format!("the ferry binary {}", ferry.display()))?;
    let command =
        std::env::var("FERRY_BENCH_COMMAND").unwrap_or_else(|_| std::env::args().collect::<Vec<_>>().join(" "));
    if !args.report_only {
        preflight(&ferry, &Dirs { shm: args.shm_dir.clone(), disk: args.work_dir.clone() })?;
        for s in ferry_bench::servers::registry::stop_orphans() {
            eprintln!("ferry-bench: stopped {s}");
        }
        remove_stale_links();
    }
    let quick = args.quick;
    let pick = |v: Vec<u::Row>| -> Vec<u::Row> {
        v.into_iter().filter(|r| args.rows.is_empty() || args.rows.contains(&r.id)).collect()
    };
    let mut failed = false;
    for name in &args.scenarios {
        let row_secs = args.row_secs.unwrap_or(30);
        let (paths, rows, reps, fair_secs) = match name.as_str() {
            "udt-table3" => (
                {
                    let mut l = u::parse_losses(u::TABLE3_LOSS).map_err(anyhow::Error::msg)?;
                    l.extend(u::parse_losses(&args.path_loss).map_err(anyhow::Error::msg)?);
                    u::table3_paths(&l, args.far_queue)
                },
                pick(u::table3_rows()),
                args.reps.unwrap_or(if quick { 1 } else { 2 }),
                0,
            ),
            "udt-long" => {
                let d = if args.delays_ms.is_empty() { vec![30.0, 80.0, 150.0] } else { args.delays_ms.clone() };
                let l = if args.losses_pct.is_empty() { vec![0.0, 0.1, 1.0, 5.0] } else { args.losses_pct.clone() };
                let b =
                    if args.buffers.is_empty() { vec!["untuned".into(), "tuned".into()] } else { args.buffers.clone() };
                let l: Vec<f64> = l.iter().map(|x| x / 100.0).collect();
                (
                    u::long_paths(args.rate_mbit.unwrap_or(1000.0), &d, &l, &b, row_secs),
                    pick(u::long_rows()),
                    args.reps.unwrap_or(1),
                    0,
                )
            }
            "udt-loopback" => (
                vec![u::PathSpec {
                    name: "loopback".into(),
                    one_way_ms: None,
                    rate_mbit: 0.0,
                    loss: 0.0,
                    queue_packets: None,
                    mtu: 1500,
                    tcp_mem: String::new(),
                    bytes: if quick { 256 << 20 } else { 1 << 30 },
                }],
                pick(u::loopback_rows()),
                args.reps.unwrap_or(if quick { 1 } else { 3 }),
                0,
            ),
            _ => {
                let rate = args.rate_mbit.unwrap_or(150.0);
                let secs = args.row_secs.unwrap_or(60);
                (
                    vec![u::PathSpec {
                        name: format!("{rate}mbit-30ms"),
                        one_way_ms: Some(30.0),
                        rate_mbit: rate,
                        loss: 0.0,
                        queue_packets: None,
                        mtu: 1500,
                        tcp_mem: "4096 131072 67108864".into(),
                        bytes: ((rate * 1e6 / 8.0) as u64 * (secs + 5)).min(4 << 30),
                    }],
                    Vec::new(),
                    1,
                    secs,
                )
            }
        };
        let paths: Vec<u::PathSpec> =
            paths.into_iter().filter(|p| args.paths.is_empty() || args.paths.contains(&p.name)).collect();
        let out = args.results.clone().unwrap_or_else(|| PathBuf::from("bench/results").join(name));
        let setup = Setup {
            scenario: name.clone(),
            ferry: ferry.clone(),
            ferry_old: args.ferry_old.as_ref().map(|p| p.canonicalize()).transpose()?,
            // Per run: two runs must not share (and remove) each other's files.
            work: args.shm_dir.join(format!("udt-{}", std::process::id())),
            out,
            paths,
            rows: if args.ferry_old.is_some() { u::with_old_rows(rows) } else { rows },
            reps,
            row_secs,
            file_256: name == "udt-long",
            fair_secs,
            command: command.clone(),
        };
        if args.report_only {
            u::publish(&setup)?;
            continue;
        }
        let t = Instant::now();
        match u::run(&setup) {
            Ok(s) => {
                let errs = s.iter().filter(|x| x.error.is_some()).count();
                failed |= errs > 0;
                eprintln!("== {name} done in {:.0} s, {} rows, {errs} failed", t.elapsed().as_secs_f64(), s.len());
            }
            Err(BenchError::Interrupted) => {
                let _ = std::fs::remove_dir_all(&setup.work);
                return Err(BenchError::Interrupted.into());
            }
            Err(e) => {
                eprintln!("ferry-bench: scenario {name} stopped: {e}");
                failed = true;
            }
        }
        if !args.keep_data {
            let _ = std::fs::remove_dir_all(&setup.work);
        }
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Fails early, naming what is missing and how to get it.
fn preflight(ferry_bin: &Path, dirs: &Dirs) -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let euid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|r| r.split_whitespace().nth(1));
    if euid != Some("0") {
        bail!("ferry-bench must run as root: it creates network namespaces, drops the page cache and starts the Globus server as nobody (sudo bench/run ...)");
    }
    let tools = [
        ("globus-gridftp-server", "apt-get install globus-gridftp-server-progs"),
        ("globus-url-copy", "apt-get install globus-gass-copy-progs"),
        ("iperf3", "apt-get install iperf3"),
        ("fio", "apt-get install fio"),
        ("setpriv", "apt-get install util-linux"),
        ("ip", "apt-get install iproute2"),
        ("tc", "apt-get install iproute2"),
        ("sync", "apt-get install coreutils"),
        ("findmnt", "apt-get install util-linux"),
    ];
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut missing = Vec::new();
    for (t, hint) in tools {
        let found = std::env::split_paths(&path)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
            .any(|d| d.join(t).is_file());
        if !found {
            missing.push(format!("{t} ({hint})"));
        }
    }
    if !missing.is_empty() {
        bail!("missing tools: {}. bench/deps.sh installs them all.", missing.join(", "));
    }
    preflight_ferry(ferry_bin)?;
    for (kind, name) in [("passwd", "nobody"), ("group", "nogroup")] {
        let ok = Command::new("getent").args([kind, name]).output().map(|o| o.status.success()).unwrap_or(false);
        if !ok {
            bail!("the {kind} entry {name:?} is missing; the Globus server runs as nobody:nogroup");
        }
    }
    for d in [&dirs.disk, &dirs.shm] {
        runner::check_writable(d).with_context(|| format!("scratch directory {}", d.display()))?;
    }
    Ok(())
}

/// The binary runs (`--version`).
fn preflight_ferry(ferry_bin: &Path) -> Result<()> {
    let ferry = Command::new(ferry_bin)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", ferry_bin.display()))?;
    if !ferry.status.success() {
        bail!("{} --version failed: {}", ferry_bin.display(), String::from_utf8_lossy(&ferry.stderr));
    }
    Ok(())
}

/// Where results go without `--results`: the suite's pages by mode
/// (`bench/results/full`, `bench/results/quick`); a run of extra scenarios
/// only (e.g. old-new) gets a directory named after them, so it neither
/// replaces nor mixes with the suite's pages.
fn default_results(mode: Mode, only: &[String]) -> PathBuf {
    let base = PathBuf::from("bench/results");
    if !only.is_empty() && only.iter().all(|s| scenarios::EXTRA.contains(&s.as_str())) {
        let name = only.join("+");
        return base.join(if mode == Mode::Quick { format!("{name}-quick") } else { name });
    }
    base.join(mode.name())
}

/// Free bytes of the file system holding `p`.
fn free_bytes(p: &Path) -> Option<u64> {
    let out = Command::new("df").args(["-B1", "--output=avail"]).arg(p).output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().nth(1)?.trim().parse().ok()
}

/// Refuses to start when the data would not fit (disk: sources plus one
/// destination and fio's file; tmpfs: the memory sources).
fn check_space(scenarios: &[scenarios::Scenario], dirs: &Dirs) -> Result<()> {
    let mut need_disk = 0u64;
    let mut need_shm = 0u64;
    for s in scenarios {
        for d in &s.data {
            if d.path().starts_with(&dirs.shm) {
                // A source and one destination file (the memory scenario's tmpfs sink).
                need_shm = need_shm.max(d.bytes() * 2);
            } else {
                // A source, one destination copy, fio's written file.
                need_disk = need_disk.max(d.bytes() * 3);
            }
        }
    }
    let margin = 1 << 30;
    for (dir, need) in [(&dirs.disk, need_disk), (&dirs.shm, need_shm)] {
        if let Some(free) = free_bytes(dir) {
            if free < need + margin {
                bail!(
                    "{} has {:.1} GB free; this run needs about {:.1} GB there (use --work-dir/--shm-dir, or --quick)",
                    dir.display(),
                    free as f64 / 1e9,
                    (need + margin) as f64 / 1e9
                );
            }
        }
    }
    Ok(())
}

/// Links of earlier ferry-bench runs whose process died (SIGKILL) would
/// block nothing (names carry the PID) but hold namespaces; remove them.
fn remove_stale_links() {
    let Ok(entries) = std::fs::read_dir(ferry_wan::netns::STATE_DIR) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(link) = name.strip_suffix(".pid") else { continue };
        if !link.starts_with("fb") {
            continue;
        }
        // `down` refuses while the owning process is alive.
        match ferry_wan::netns::down(link, false) {
            Ok(removed) if !removed.is_empty() => {
                eprintln!("ferry-bench: removed a stale link of a killed run: {}", removed.join(", "))
            }
            _ => {}
        }
    }
}

/// Whether `globus-url-copy -udt` would use UDT with ftp:// URLs: it asks
/// the server for another network stack (`SITE SETNETSTACK`) only for
/// gsiftp:// URLs (reference README §3), so a `-udt` row against an
/// anonymous ftp:// server would silently measure TCP. Checked in every run
/// rather than assumed, with the client's debug dialogue as evidence.
fn probe_udt(dirs: &Dirs) -> Result<String> {
    let udt_pkg = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "libglobus-xio-udt-driver"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    let file = scenarios::memory_source(dirs, "udt-probe.bin");
    ferry_bench::data::ensure_file(&file, 1 << 20, 1)?;
    let net = Net::Loopback;
    let logs = dirs.logs();
    let server = Server::start_globus(&net, &logs)?;
    let mut cmd = Command::new("globus-url-copy");
    cmd.args(["-dbg", "-udt", "-p", "1"]).arg(server.url(&file)?).arg("file:///dev/null");
    let line = proc::command_line(&cmd);
    let result = proc::run(cmd, "globus-url-copy -udt probe", &logs, Duration::from_secs(60));
    server.stop();
    let _ = std::fs::remove_file(&file);
    let f = result?;
    let dialogue = format!("{}\n{}", f.stdout, f.stderr);
    let driver = match udt_pkg {
        Some(v) => format!("the UDT driver (libglobus-xio-udt-driver {v}) is installed, but "),
        None => "the UDT driver is not installed, and ".into(),
    };
    Ok(if dialogue.contains("SETNETSTACK") {
        format!(
            "{driver}globus-url-copy sent SITE SETNETSTACK for ftp://; a UDT row needs servers started with \
             -dc-whitelist udt,tcp, which this harness does not do (`{line}`)"
        )
    } else {
        format!(
            "{driver}-udt is ignored for ftp:// URLs: `{line}` sent no SITE SETNETSTACK in this run (globus-url-copy \
             only asks for UDT with gsiftp://, which needs X.509 credentials), so a -udt row would measure TCP"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_directory_by_selection() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(default_results(Mode::Full, &[]), PathBuf::from("bench/results/full"));
        assert_eq!(default_results(Mode::Quick, &s(&["mem", "disk"])), PathBuf::from("bench/results/quick"));
        assert_eq!(default_results(Mode::Full, &s(&["old-new"])), PathBuf::from("bench/results/old-new"));
        assert_eq!(default_results(Mode::Quick, &s(&["old-new"])), PathBuf::from("bench/results/old-new-quick"));
        assert_eq!(
            default_results(Mode::Full, &s(&["data-path", "tune"])),
            PathBuf::from("bench/results/data-path+tune")
        );
        // Mixed with the suite: the suite's directory.
        assert_eq!(default_results(Mode::Full, &s(&["mem", "tune"])), PathBuf::from("bench/results/full"));
    }
}
