//! `ferry tune URL`: measure which settings move data fastest to or from
//! one server, and (with `--write-config`) keep them for `ferry cp`.
//!
//! Every trial is a real MODE E transfer through the same client code as
//! `ferry cp`, with the trial's settings, a fresh connection (so each
//! trial pays its own TCP start, as a copy does) and a budget: at most
//! `--bytes` (a larger file is read partially, `ERET P 0 n`) and at most
//! `--seconds` (then the transfer is stopped and what arrived counts).
//! The rate of a trial is its bytes over the time from the transfer
//! command to its end.
//!
//! * **Download** (the default): URL is a file on a GridFTP server (Ferry
//!   or Globus), or `/dev/zero` on a Ferry server started with
//!   `--memory-paths`; data is discarded on arrival. The knobs are streams
//!   and TCP buffer. Block size is the *sender's* setting — in a download
//!   the server's (Ferry sends 1 MiB blocks, Globus its configured size) —
//!   and a discarding receiver has no disk to stage for, so neither can
//!   change a download and neither is swept: they would only measure noise.
//! * **Upload** (`--upload`): each trial sends `--bytes` of generated
//!   zeros (or the start of `--from FILE`) to URL — a new file, removed
//!   afterwards, or `/dev/null` on a memory-paths server. The client is the
//!   sender, so all four knobs apply: streams, TCP buffer, block size and
//!   staging (`off` = synchronous).
//!
//! The search is `ferry_profile::tune`, one knob at a time (see
//! `docs/tune.md`); `--exhaustive` measures the whole grid instead, which
//! is how the benchmark checks the sweep.

use crate::probe::{describe_measurement, measure_rtt, RateSource};
use anyhow::{bail, Context};
use clap::Args;
use ferry_client::config::{format_size, Choice, ClientConfig, Knobs};
use ferry_client::{Client, CopyOptions, Location, Measurement, ModeChoice, RemoteUrl};
use ferry_io::mode_e::{BlockSource, DEFAULT_BLOCK_SIZE};
use ferry_profile::{
    format_bits, format_bytes, format_rate, BufferLimits, TuneConfig, TunePlan, TuneResult, TuneSpace,
};
use ferry_proto::facts::FileKind;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// What each trial transfers: a file on a GridFTP server (Ferry or
    /// Globus) or `/dev/zero` on a Ferry server with --memory-paths; with
    /// --upload, where each trial writes (a new file name, a directory
    /// ending in /, or /dev/null on a memory-paths server).
    pub url: String,
    /// Tune uploads instead of downloads.
    #[arg(long)]
    pub upload: bool,
    /// With --upload: send (the start of) this file instead of generated zeros.
    #[arg(long, requires = "upload", value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Bytes per trial, at most.
    #[arg(long, default_value = "256M", value_parser = crate::copy::parse_size)]
    pub bytes: u64,
    /// Seconds per trial, at most; a trial stopped there counts what it moved.
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    /// Most configurations the sweep measures.
    #[arg(long, default_value_t = 24)]
    pub max_trials: usize,
    /// Measurements per configuration (the median counts; two keep one
    /// lucky or unlucky transfer from deciding a step); with --exhaustive,
    /// passes over the whole grid.
    #[arg(long, default_value_t = 2)]
    pub repeats: u32,
    /// A step is kept only if it is faster by more than this fraction.
    #[arg(long, default_value_t = 0.05)]
    pub min_gain: f64,
    /// Steps in a row that may fail to gain before a knob's walk stops.
    /// More than 1 lets a walk cross a plateau of small gains: on the 30 ms
    /// path 1→2→4→8 streams gained 1–3% a step but 6% in three.
    #[arg(long, default_value_t = 3)]
    pub patience: u32,
    /// Stream counts to consider.
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 2, 4, 8, 16])]
    pub streams: Vec<u32>,
    /// TCP buffers to consider: auto (kernel autotuning), bdp (the path's
    /// bandwidth-delay product) and sizes.
    #[arg(long = "tcp-bs", value_delimiter = ',', default_values = ["auto", "bdp", "4M", "8M", "16M", "32M"])]
    pub tcp_bs: Vec<String>,
    /// Block sizes to consider (uploads only: in a download the server chooses).
    #[arg(long, value_delimiter = ',', default_values = ["256K", "1M", "4M", "16M"])]
    pub block_sizes: Vec<String>,
    /// Staging sizes to consider: off (synchronous) and sizes (uploads only).
    #[arg(long, value_delimiter = ',', default_values = ["off", "2M", "8M", "32M", "64M"])]
    pub staging: Vec<String>,
    /// The bandwidth-delay product to use for "bdp", instead of measuring
    /// it first (RTT × the rate of a 4-stream transfer).
    #[arg(long, value_parser = crate::copy::parse_size)]
    pub bdp: Option<u64>,
    /// Measure every point of the space instead of sweeping (slow: checks the sweep).
    #[arg(long)]
    pub exhaustive: bool,
    /// Write the recommendation to the client config file, in the server's section.
    #[arg(long)]
    pub write_config: bool,
    /// The client config file (default: $FERRY_CONFIG, else
    /// $XDG_CONFIG_HOME/ferry/client.toml or ~/.config/ferry/client.toml).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Seconds to wait between trials, so queues drain.
    #[arg(long, default_value_t = 1.0)]
    pub pause: f64,
    /// Print one JSON object on standard output (progress still goes to standard error).
    #[arg(long)]
    pub json: bool,
    /// No progress lines.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Seconds to wait for a server reply.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum Direction {
    Download,
    Upload,
}

/// What every trial transfers.
#[derive(Clone)]
struct Target {
    url: RemoteUrl,
    direction: Direction,
    /// The upload's data and size.
    source: Option<(Arc<dyn BlockSource>, u64)>,
    bytes: u64,
    seconds: Duration,
    timeout: Duration,
}

impl Target {
    /// One trial: a fresh client with `cfg`'s settings, one bounded transfer.
    async fn trial(&self, cfg: &TuneConfig) -> Result<Measurement, ferry_client::ClientError> {
        let opts = CopyOptions {
            timeout: self.timeout,
            mode: ModeChoice::Extended,
            parallelism: Some(cfg.streams),
            tcp_buffer: cfg.tcp_buffer.map(|b| b.min(u32::MAX as u64) as u32),
            block_size: cfg.block_size as usize,
            staging: (cfg.staging_size > 0).then_some(cfg.staging_size as usize),
            retries: 0,
            resume: false,
            ..CopyOptions::default()
        };
        let mut client = Client::new(opts);
        let m = match &self.source {
            None => client.measure_download(&self.url, self.bytes, self.seconds).await,
            Some((src, size)) => client.measure_upload(src.clone(), *size, &self.url, self.seconds).await,
        };
        client.close().await;
        m
    }
}

/// Parses a list of sizes where one word stands for "none" (0).
fn sizes(list: &[String], word: &str, what: &str) -> anyhow::Result<Vec<u64>> {
    let mut out = Vec::new();
    for s in list {
        let v = if s.eq_ignore_ascii_case(word) {
            0
        } else {
            crate::copy::parse_size(s).map_err(|e| anyhow::anyhow!("{what}: {e}"))?
        };
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if out.is_empty() {
        bail!("{what}: give at least one value");
    }
    Ok(out)
}

/// The TCP buffers to try: `auto` is autotuning (`None`), `bdp` the path's
/// product (clamped to 64 KiB–256 MiB, and left out when within 10% of a
/// listed size, as in `TuneSpace::standard`).
fn buffers(list: &[String], bdp: Option<u64>) -> anyhow::Result<Vec<Option<u64>>> {
    let mut fixed = Vec::new();
    let mut auto = false;
    let mut want_bdp = false;
    for s in list {
        match s.to_ascii_lowercase().as_str() {
            "auto" => auto = true,
            "bdp" => want_bdp = true,
            _ => {
                let v = crate::copy::parse_size(s).map_err(|e| anyhow::anyhow!("--tcp-bs: {e}"))?;
                if v == 0 || v > u32::MAX as u64 {
                    bail!("--tcp-bs: {s} is out of range");
                }
                fixed.push(v);
            }
        }
    }
    if let (true, Some(b)) = (want_bdp, bdp) {
        let b = b.clamp(64 << 10, 256 << 20);
        if !fixed.iter().any(|&f| (f as f64 - b as f64).abs() < 0.1 * f as f64) {
            fixed.push(b);
        }
    }
    fixed.sort_unstable();
    fixed.dedup();
    let mut out: Vec<Option<u64>> = if auto { vec![None] } else { Vec::new() };
    out.extend(fixed.into_iter().map(Some));
    if out.is_empty() {
        bail!("--tcp-bs: give at least one value");
    }
    Ok(out)
}

/// One measured trial, as the JSON output lists it.
#[derive(Debug, Clone, serde::Serialize)]
struct TrialRecord {
    config: TuneConfig,
    measurement: Option<Measurement>,
    error: Option<String>,
}

fn buf_text(b: Option<u64>) -> String {
    b.map(format_bytes).unwrap_or_else(|| "auto".into())
}

fn staging_text(s: u64) -> String {
    if s == 0 {
        "off".into()
    } else {
        format_bytes(s)
    }
}

/// A configuration in words, naming only the knobs that were swept.
fn config_text(c: &TuneConfig, dir: Direction) -> String {
    let mut s =
        format!("{} stream{}, TCP buffer {}", c.streams, if c.streams == 1 { "" } else { "s" }, buf_text(c.tcp_buffer));
    if dir == Direction::Upload {
        s.push_str(&format!(", block {}, staging {}", format_bytes(c.block_size), staging_text(c.staging_size)));
    }
    s
}

/// The same as `ferry cp` flags.
fn config_flags(c: &TuneConfig, dir: Direction) -> String {
    let mut s = format!("-p {}", c.streams);
    if let Some(b) = c.tcp_buffer {
        s.push_str(&format!(" --tcp-bs {}", format_size(b)));
    }
    if dir == Direction::Upload {
        s.push_str(&format!(" --block-size {}", format_size(c.block_size)));
        if c.staging_size > 0 {
            s.push_str(&format!(" --staging {}", format_size(c.staging_size)));
        }
    }
    s
}

/// The evidence: every trial, its settings, rate and verdict.
fn evidence_table(r: &TuneResult, dir: Direction, exhaustive: bool, records: &[TrialRecord]) -> String {
    let mut head = vec!["#".to_string(), "knob".into(), "streams".into(), "TCP buffer".into()];
    if dir == Direction::Upload {
        head.extend(["block".into(), "staging".into()]);
    }
    head.extend(["throughput".into(), "Mbit/s".into(), "vs start".into(), "verdict".into()]);
    let mut rows = vec![head];
    for t in &r.trials {
        let cut = records.iter().any(|m| m.config == t.config && m.measurement.as_ref().is_some_and(|m| m.cut_short));
        let verdict = match (&t.error, t.accepted, t.knob, exhaustive) {
            (Some(e), _, _, _) => format!("failed: {e}"),
            (None, true, _, true) => "best".into(),
            (None, false, _, true) => String::new(),
            (None, true, None, false) => "start".into(),
            (None, true, Some(_), false) => "kept".into(),
            (None, false, _, false) => format!("< +{:.0}%", r.min_gain * 100.0),
        };
        let verdict = if cut { format!("{verdict} (time limit)").trim().to_string() } else { verdict };
        let mut row = vec![
            t.index.to_string(),
            t.knob.map(|k| k.label().to_string()).unwrap_or_else(|| "—".into()),
            t.config.streams.to_string(),
            buf_text(t.config.tcp_buffer),
        ];
        if dir == Direction::Upload {
            row.extend([format_bytes(t.config.block_size), staging_text(t.config.staging_size)]);
        }
        let rates = if t.rates.len() > 1 {
            format!(
                "{} [{}]",
                format_rate(t.rate),
                t.rates.iter().map(|x| format!("{:.0}", x * 8.0 / 1e6)).collect::<Vec<_>>().join(" ")
            )
        } else {
            format_rate(t.rate)
        };
        row.extend([
            rates,
            format!("{:.0}", t.rate * 8.0 / 1e6),
            if r.start_rate > 0.0 { format!("{:.2}×", t.rate / r.start_rate) } else { "—".into() },
            verdict,
        ]);
        rows.push(row);
    }
    ferry_profile::text_table(&rows)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `repeats` passes over the whole grid, merged: each point's rates from
/// every pass and their median. Passes rather than repeating a point
/// back to back, so that a slow minute on a shared machine spreads over
/// the grid instead of sinking a few points.
fn grid<F>(space: &TuneSpace, repeats: u32, mut measure: F) -> TuneResult
where
    F: FnMut(&TuneConfig) -> Result<f64, String>,
{
    let mut merged: Option<TuneResult> = None;
    for _ in 0..repeats.max(1) {
        let pass = ferry_profile::exhaustive(space, &mut measure);
        match &mut merged {
            None => merged = Some(pass),
            Some(m) => {
                for (a, b) in m.trials.iter_mut().zip(pass.trials) {
                    a.rates.extend(b.rates);
                    if a.error.is_none() {
                        a.error = b.error;
                    }
                }
            }
        }
    }
    let mut r = merged.expect("at least one pass");
    for t in &mut r.trials {
        t.rate = if t.error.is_some() { 0.0 } else { median(t.rates.clone()) };
        t.accepted = false;
    }
    if let Some(best) = r.trials.iter_mut().max_by(|a, b| a.rate.total_cmp(&b.rate)) {
        best.accepted = true;
        r.best = best.config;
        r.best_rate = best.rate;
    }
    r.start_rate = r.trials.first().map(|t| t.rate).unwrap_or(0.0);
    r
}

fn loadavg() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg").ok().map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

fn today() -> String {
    time::OffsetDateTime::now_utc().date().to_string()
}

/// Resolves the trial target: checks it and prepares the upload source.
async fn prepare(args: &TuneArgs, client: &mut Client, url: RemoteUrl) -> anyhow::Result<(Target, bool)> {
    let timeout = Duration::from_secs(args.timeout);
    let seconds = Duration::from_secs_f64(args.seconds.clamp(0.1, 3600.0));
    let bytes = args.bytes.max(1);
    if !args.upload {
        let ctrl = client.connection(&url).await?;
        match ctrl.stat(&url.path).await? {
            Some(f) if f.kind == FileKind::File && f.size > 0 => {}
            Some(f) if f.kind == FileKind::File => {
                bail!("{url} is empty: name a large file (or /dev/zero on a Ferry server with --memory-paths)")
            }
            Some(_) => bail!(
                "{url} is a directory: name a file to download (or /dev/zero on a Ferry server with --memory-paths)"
            ),
            None => bail!("{url}: no such file on the server"),
        }
        return Ok((Target { url, direction: Direction::Download, source: None, bytes, seconds, timeout }, false));
    }
    let url =
        if url.is_dir_url() { url.with_path(format!("{}.ferry-tune-{}", url.path, std::process::id())) } else { url };
    let sink = url.path == "/dev/null";
    if !sink {
        let ctrl = client.connection(&url).await?;
        if ctrl.stat(&url.path).await?.is_some() {
            bail!(
                "{url} exists: tuning would overwrite it with test data. Name a new file, a directory ending in /, \
                 or /dev/null on a Ferry server with --memory-paths"
            );
        }
    }
    let source: (Arc<dyn BlockSource>, u64) = match &args.from {
        Some(p) => {
            let f = std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            let len = f.metadata()?.len();
            if len == 0 {
                bail!("{} is empty", p.display());
            }
            (Arc::new(f), len.min(bytes))
        }
        None => (Arc::new(ferry_io::endpoint::ZeroSource::new(bytes)?), bytes),
    };
    Ok((Target { url, direction: Direction::Upload, source: Some(source), bytes, seconds, timeout }, !sink))
}

pub async fn run(args: TuneArgs) -> anyhow::Result<()> {
    let url = match Location::parse(&args.url)? {
        Location::Remote(u) => u,
        Location::Local(_) => bail!("{}: ferry tune needs an ftp:// URL of a GridFTP server", args.url),
    };
    if args.streams.is_empty() || args.streams.iter().any(|&s| s == 0 || s > 64) {
        bail!("--streams: give stream counts from 1 to 64");
    }
    let quiet = args.quiet;
    let say = |s: String| {
        if !quiet {
            eprintln!("{s}");
        }
    };
    let load_before = loadavg();
    // The path: the control connection's RTT and, for "bdp", the rate of a
    // first transfer with several streams and automatic buffers.
    let mut client = Client::new(CopyOptions {
        timeout: Duration::from_secs(args.timeout),
        mode: ModeChoice::Extended,
        parallelism: Some(4),
        retries: 0,
        resume: false,
        ..CopyOptions::default()
    });
    let rtt = measure_rtt(&mut client, &url, 3).await?;
    let (target, cleanup) = prepare(&args, &mut client, url.clone()).await?;
    client.close().await;
    let want_bdp = args.tcp_bs.iter().any(|s| s.eq_ignore_ascii_case("bdp"));
    let mut probe = None;
    let bdp = match args.bdp {
        Some(b) => Some(b),
        None if want_bdp => {
            say("ferry tune: measuring the path first (4 streams, automatic buffers) for its bandwidth-delay product"
                .to_string());
            let cfg =
                TuneConfig { streams: 4, tcp_buffer: None, block_size: DEFAULT_BLOCK_SIZE as u64, staging_size: 0 };
            let m = target.trial(&cfg).await.context("the first transfer (to measure the path) failed")?;
            let rate = m.steady_rate.unwrap_or(m.rate());
            let b = ferry_profile::bdp_bytes(rate, rtt.kernel.base());
            say(format!(
                "ferry tune: RTT {:.1} ms × {} = {}",
                rtt.kernel.base().as_secs_f64() * 1e3,
                format_bits(rate),
                format_bytes(b)
            ));
            probe = Some(m);
            Some(b)
        }
        None => None,
    };
    let (block_sizes, staging_sizes) = match target.direction {
        Direction::Download => (vec![DEFAULT_BLOCK_SIZE as u64], vec![0]),
        Direction::Upload => {
            (sizes(&args.block_sizes, "-", "--block-sizes")?, sizes(&args.staging, "off", "--staging")?)
        }
    };
    if block_sizes.iter().any(|&b| b == 0 || b > 64 << 20) || staging_sizes.iter().any(|&s| s > 64 << 20) {
        bail!("block and staging sizes must be at most 64M");
    }
    let mut streams = args.streams.clone();
    streams.sort_unstable();
    streams.dedup();
    let space = TuneSpace { streams, tcp_buffers: buffers(&args.tcp_bs, bdp)?, block_sizes, staging_sizes };
    let mut plan = TunePlan::new(space.clone());
    plan.min_gain = args.min_gain.max(0.0);
    plan.max_trials = args.max_trials.max(1);
    plan.repeats = args.repeats.max(1);
    plan.patience = args.patience.max(1);
    // Start where `ferry cp` starts without settings: synchronous.
    if space.staging_sizes.contains(&0) {
        plan.start.staging_size = 0;
    }
    let limits = BufferLimits::current();
    let dir = target.direction;
    say(format!(
        "ferry tune: {} {} ({}), {} per trial at most, {} s at most; {} configurations in the space",
        match dir {
            Direction::Download => "downloading",
            Direction::Upload => "uploading to",
        },
        target.url,
        if args.exhaustive { "every configuration" } else { "one knob at a time" },
        format_bytes(target.bytes),
        args.seconds,
        space.grid_size()
    ));
    if limits.rmem_max > 0 && space.tcp_buffers.iter().flatten().any(|&b| b > limits.rmem_max) {
        say(format!(
            "ferry tune: note: net.core.rmem_max is {} here, so larger --tcp-bs values are clamped to it (autotuning \
             may grow to {})",
            format_bytes(limits.rmem_max),
            format_bytes(limits.autotune_rmem_max)
        ));
    }

    // The sweep runs the measuring closure synchronously: give it a thread
    // of its own that drives each trial on this runtime.
    let records: Arc<Mutex<Vec<TrialRecord>>> = Arc::default();
    let handle = tokio::runtime::Handle::current();
    let (exhaustive, repeats, pause) = (args.exhaustive, args.repeats, Duration::from_secs_f64(args.pause.max(0.0)));
    let (t, recs, grid_space) = (target.clone(), records.clone(), space.clone());
    let result = tokio::task::spawn_blocking(move || {
        let mut n = 0usize;
        let measure = |cfg: &TuneConfig| -> Result<f64, String> {
            if n > 0 {
                std::thread::sleep(pause);
            }
            n += 1;
            let r = handle.block_on(t.trial(cfg));
            let (rate, rec) = match r {
                Ok(m) => {
                    if !quiet {
                        eprintln!(
                            "  trial {n}: {} — {}{}",
                            config_text(cfg, dir),
                            ferry_profile::format_rate_both(m.rate()),
                            if m.cut_short { " (time limit)" } else { "" }
                        );
                    }
                    (Ok(m.rate()), TrialRecord { config: *cfg, measurement: Some(m), error: None })
                }
                Err(e) => {
                    if !quiet {
                        eprintln!("  trial {n}: {} — failed: {e}", config_text(cfg, dir));
                    }
                    (Err(e.to_string()), TrialRecord { config: *cfg, measurement: None, error: Some(e.to_string()) })
                }
            };
            recs.lock().unwrap_or_else(|e| e.into_inner()).push(rec);
            rate
        };
        if exhaustive {
            Ok(grid(&grid_space, repeats, measure))
        } else {
            ferry_profile::tune(&plan, measure)
        }
    })
    .await?;
    let load_after = loadavg();
    if cleanup {
        let mut c = Client::new(CopyOptions { timeout: Duration::from_secs(args.timeout), ..CopyOptions::default() });
        if let Err(e) = c.remove(&target.url, false, false, &mut Vec::new()).await {
            eprintln!("ferry tune: could not remove the test upload {}: {e}", target.url);
        }
        c.close().await;
    }
    let result = result.map_err(|e| anyhow::anyhow!("{e}"))?;
    let records = records.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let best = result.best;
    let server = ClientConfig::host_key(&target.url.host, target.url.port);
    let recommendation = format!(
        "Recommended for {server} ({}): {} — {} ({:.2}× the start: {}), from {} {}{}.",
        match dir {
            Direction::Download => "downloads",
            Direction::Upload => "uploads",
        },
        config_text(&best, dir),
        ferry_profile::format_rate_both(result.best_rate),
        if result.start_rate > 0.0 { result.best_rate / result.start_rate } else { 0.0 },
        result.trials.first().map(|t| config_text(&t.config, dir)).unwrap_or_default(),
        result.trials.len(),
        if args.exhaustive { "configurations" } else { "trials" },
        if result.budget_exhausted { "; the trial budget ran out, so a larger --max-trials may find more" } else { "" }
    );
    let mut written = None;
    if args.write_config {
        let (path, _) = ClientConfig::locate(args.config.as_deref())
            .context("no place for the config file: give --config PATH (HOME is not set)")?;
        let mut knobs = Knobs {
            parallel: Some(Choice::Value(best.streams)),
            tcp_buffer: Some(best.tcp_buffer.map(Choice::Value).unwrap_or(Choice::Builtin)),
            ..Knobs::default()
        };
        if dir == Direction::Upload {
            knobs.block_size = Some(best.block_size);
            knobs.staging =
                Some(if best.staging_size > 0 { Choice::Value(best.staging_size) } else { Choice::Builtin });
        }
        let note = format!(
            "ferry tune {} ({}, {}): {} with {}",
            target.url,
            match dir {
                Direction::Download => "download",
                Direction::Upload => "upload",
            },
            today(),
            format_bits(result.best_rate),
            config_flags(&best, dir)
        );
        ClientConfig::write_host(&path, &server, &knobs, &note)?;
        written = Some(path);
    }
    if args.json {
        let out = serde_json::json!({
            "url": target.url.to_string(),
            "server": server,
            "direction": dir,
            "method": if args.exhaustive { "exhaustive" } else { "sweep" },
            "date": today(),
            "budget": { "bytes": target.bytes, "seconds": args.seconds, "max_trials": args.max_trials, "repeats": args.repeats, "min_gain": args.min_gain, "patience": args.patience },
            "rtt_ms": rtt.kernel.base().as_secs_f64() * 1e3,
            "bdp_bytes": bdp,
            "bdp_from": if args.bdp.is_some() { Some("--bdp") } else if probe.is_some() { Some("measured") } else { None },
            "path_measurement": probe,
            "space": space,
            "limits": limits,
            "result": result,
            "trials": records,
            "recommendation": recommendation,
            "flags": config_flags(&best, dir),
            "config_written": written,
            "loadavg_before": load_before,
            "loadavg_after": load_after,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if let Some(m) = &probe {
        let what = match dir {
            Direction::Download if target.url.path == "/dev/zero" => {
                describe_measurement(m, RateSource::MemoryZero, &target.url.path)
            }
            Direction::Download => describe_measurement(m, RateSource::File, &target.url.path),
            Direction::Upload => format!(
                "an upload of {} with {} streams in {:.2} s: {} on average",
                format_bytes(m.bytes),
                m.streams,
                m.seconds,
                format_bits(m.rate())
            ),
        };
        println!("Path: RTT {:.1} ms; {what}.", rtt.kernel.base().as_secs_f64() * 1e3);
    }
    print!("{}", evidence_table(&result, dir, args.exhaustive, &records));
    println!("{recommendation}");
    let (src, dst) = match dir {
        Direction::Download => (target.url.to_string(), "DEST".to_string()),
        Direction::Upload => ("SOURCE".to_string(), target.url.to_string()),
    };
    println!("As flags: ferry cp {} {src} {dst}", config_flags(&best, dir));
    match &written {
        Some(p) => println!("Written to {} as [hosts.\"{server}\"]: later copies to this server use it.", p.display()),
        None => println!("--write-config keeps it in the client config file for later copies to this server."),
    }
    if dir == Direction::Download {
        println!(
            "Block size and staging were not swept: in a download the server chooses the block size and nothing is \
             staged for a discarding receiver (--upload tunes them)."
        );
    }
    Ok(())
}

/// Runs an async subcommand on a fresh runtime (for `main`'s dispatch).
pub fn block_on(f: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<std::process::ExitCode> {
    crate::copy::runtime()?.block_on(f)?;
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_lists() {
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let b = buffers(&l(&["auto", "bdp", "4M", "8M"]), Some(7_500_000)).unwrap();
        assert_eq!(b, vec![None, Some(4 << 20), Some(7_500_000), Some(8 << 20)]);
        // A BDP within 10% of a listed size adds nothing.
        let b = buffers(&l(&["bdp", "4M"]), Some(4_000_000)).unwrap();
        assert_eq!(b, vec![Some(4 << 20)]);
        // No BDP known: "bdp" is left out.
        assert_eq!(buffers(&l(&["auto", "bdp"]), None).unwrap(), vec![None]);
        assert!(buffers(&l(&["lots"]), None).is_err());
        assert!(buffers(&l(&["bdp"]), None).is_err());
        assert_eq!(sizes(&l(&["off", "8M", "off"]), "off", "x").unwrap(), vec![0, 8 << 20]);
    }

    #[test]
    fn grid_takes_medians_over_passes() {
        let space = TuneSpace {
            streams: vec![1, 2],
            tcp_buffers: vec![None],
            block_sizes: vec![1 << 20],
            staging_sizes: vec![0],
        };
        let mut calls = 0;
        let r = grid(&space, 3, |c| {
            calls += 1;
            Ok(c.streams as f64 * 100.0 + calls as f64)
        });
        assert_eq!(calls, 6);
        assert_eq!(r.trials.len(), 2);
        assert_eq!(r.trials[1].rates.len(), 3);
        assert_eq!(r.best.streams, 2);
        assert_eq!(r.best_rate, 204.0); // 202, 204, 206
        assert!(r.trials[1].accepted && !r.trials[0].accepted);
    }

    #[test]
    fn flags_name_only_what_applies() {
        let c = TuneConfig { streams: 4, tcp_buffer: Some(16 << 20), block_size: 4 << 20, staging_size: 0 };
        assert_eq!(config_flags(&c, Direction::Download), "-p 4 --tcp-bs 16M");
        assert_eq!(config_flags(&c, Direction::Upload), "-p 4 --tcp-bs 16M --block-size 4M");
        assert_eq!(config_text(&c, Direction::Upload), "4 streams, TCP buffer 16.0 MiB, block 4.00 MiB, staging off");
    }
}
