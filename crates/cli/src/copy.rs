//! `ferry cp`, `ls`, `mkdir`, `rm`.

use anyhow::{bail, Context};
use clap::Args;
use ferry_client::config::{Choice, ClientConfig, Knobs, Resolved, Source};
use ferry_client::{Client, CopyOptions, CopySummary, CredentialLookup, Location, ModeChoice, Problem, Stats};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// TLS settings for ftps:// URLs.
#[derive(Debug, Args, Clone, Default)]
pub struct TlsArgs {
    /// PEM file of CA certificates to trust for ftps:// servers (default:
    /// the system's trust store).
    #[arg(long, value_name = "PEM")]
    ca: Option<PathBuf>,
    /// PEM client certificate, for servers that map certificates to users.
    #[arg(long, value_name = "PEM", requires = "key")]
    cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(long, value_name = "PEM", requires = "cert")]
    key: Option<PathBuf>,
}

impl TlsArgs {
    pub fn options(&self) -> ferry_client::TlsOptions {
        ferry_client::TlsOptions { ca: self.ca.clone(), cert: self.cert.clone(), key: self.key.clone() }
    }
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Print nothing but errors.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Print a JSON summary on standard output instead of a progress bar.
    #[arg(long)]
    json: bool,
    /// Seconds to wait for a server reply or a stalled data connection.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

#[derive(Debug, Args)]
#[command(after_long_help = CP_HELP)]
pub struct CpArgs {
    /// Source: a local path, file://, ftp:// or ftps:// URL. With -r, a
    /// source ending in / means its contents: `tree` lands in DST/tree,
    /// `tree/` lands in DST itself (as rsync and globus-url-copy).
    #[arg(required_unless_present = "files_from")]
    src: Option<String>,
    /// Destination: a local path or URL; a file lands in an existing
    /// directory (or a URL ending in /) under its own name.
    #[arg(required_unless_present = "files_from")]
    dst: Option<String>,
    /// Copy directories recursively (a re-run skips files already
    /// complete and resumes interrupted ones).
    #[arg(short = 'r', long)]
    recursive: bool,
    /// Trees: follow symbolic links and copy what they point to (default:
    /// links are copied as links to local destinations and passed over,
    /// with a warning, on servers).
    #[arg(short = 'L', long)]
    follow_links: bool,
    /// Trees: stop at the first failing file (default: go on, list every
    /// failure at the end, exit non-zero).
    #[arg(long, conflicts_with = "continue_on_error")]
    fail_fast: bool,
    /// Trees: go on after a failing file (the default for -r).
    #[arg(long)]
    continue_on_error: bool,
    /// Say what would be copied, resumed and skipped; copy nothing.
    #[arg(short = 'n', long)]
    dry_run: bool,
    /// Trees: copy only files matching this pattern (repeatable; globs on
    /// the path inside the tree: *, **, ?, [a-z], {a,b}; a leading /
    /// anchors at the top).
    #[arg(long, value_name = "PATTERN")]
    include: Vec<String>,
    /// Trees: leave out files (and, with a trailing /, directories)
    /// matching this pattern (repeatable; checked before --include).
    #[arg(long, value_name = "PATTERN")]
    exclude: Vec<String>,
    /// Copy the files listed in FILE (one per line, # comments): paths
    /// relative to SRC, copied to the same paths under DST; without SRC
    /// and DST, lines of `SOURCE DESTINATION` (globus-url-copy -f).
    #[arg(long, value_name = "FILE")]
    files_from: Option<PathBuf>,
    #[command(flatten)]
    channel: ChannelFlags,
    /// Compare checksums of source and destination after each file
    /// (optionally naming the algorithm: XXH128, MD5, ADLER32, CRC32C, SHA256...).
    #[arg(long, num_args = 0..=1, default_missing_value = "auto", require_equals = true)]
    verify: Option<String>,
    /// Cap the copy's rate, e.g. 100M (bytes per second).
    #[arg(long, value_parser = parse_size_u64)]
    max_rate: Option<u64>,
    /// The path's bottleneck rate, bytes per second, as `ferry probe`
    /// measured it (e.g. 12M): UDT senders start at it instead of
    /// ramping up from a few packets per round trip — this client's for
    /// uploads, and a Ferry server's for downloads (sent as `OPTS TPRT
    /// Rate=N;`, capped by --max-rate; docs/udt.md). Without it they start
    /// at the rate the last copies to that host delivered (the path cache),
    /// or cold when there is none.
    #[arg(long, value_parser = parse_size_u64, value_name = "RATE")]
    path_rate: Option<u64>,
    /// Neither use nor update the remembered path rates (the path cache in
    /// $FERRY_PATH_CACHE, else $XDG_CACHE_HOME/ferry/path-rates.json or
    /// ~/.cache/ferry/path-rates.json; FERRY_PATH_CACHE=off turns it off too).
    #[arg(long)]
    no_path_cache: bool,
    /// Attempts after a failure; each resumes where the last one stopped.
    #[arg(long, default_value_t = 3)]
    retries: u32,
    /// Start over instead of resuming an interrupted copy.
    #[arg(long)]
    no_resume: bool,
    /// Transfer commands kept in flight when copying many files in MODE E
    /// (1 turns pipelining off). Default: 16, more on a long path (enough
    /// to cover a round trip).
    #[arg(long)]
    pipeline: Option<usize>,
    /// Trees: copy only files that differ from the destination's: `time`
    /// (the default: size and modification time), `size`, `exists`, or
    /// `checksum` (size and checksum). Without --sync a file is skipped
    /// when it has the same size and is not older.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "time", require_equals = true, overrides_with = "sync")]
    sync: Option<SyncArg>,
    /// Trees: control sessions per server sharing the files (Globus's
    /// -cc). Default: chosen from the file sizes and the round-trip time
    /// (the choice and why are in the log and --json).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    concurrency: Option<u16>,
    /// Most control sessions to one server (caps --concurrency, chosen or given).
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    max_sessions: u16,
    /// Most data connections to one server: sessions times parallel
    /// streams (streams per session are lowered to fit).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    max_data_connections: u16,
    /// The client config file with per-server settings (default:
    /// $FERRY_CONFIG, else $XDG_CONFIG_HOME/ferry/client.toml or
    /// ~/.config/ferry/client.toml). Flags override it; it overrides the
    /// automatic choices.
    #[arg(long, value_name = "PATH")]
    config: Option<std::path::PathBuf>,
    #[command(flatten)]
    tls: TlsArgs,
    #[command(flatten)]
    out: OutputArgs,
    // --- Striping (issue 20, docs/striping.md) ---
    /// Striped transfer (globus-url-copy -stripe): data goes to and from
    /// every data node of a striped server.
    #[arg(long)]
    stripe: bool,
    /// With --stripe: stripes for a download (default: the server's nodes).
    #[arg(long, requires = "stripe")]
    stripes: Option<usize>,
    /// With --stripe: bytes per stripe block (Blocked layout; 0 for Partitioned).
    #[arg(long, requires = "stripe", value_parser = parse_size_u64)]
    stripe_block: Option<u64>,
}

const CP_HELP: &str = "\
Trees (-r): `ferry cp -r tree DST` copies into DST/tree; `ferry cp -r tree/ DST` copies the
contents of tree into DST. Either way a re-run lands on the same files: files already complete
at the destination (same size, not older; with --verify, same checksum) are skipped, files
interrupted half-way are resumed from their restart records, and the summary says which.

Passwords: give the user in the URL (ftp://alice@host:2811/path) and the password in the
FERRY_PASSWORD environment variable or in ~/.netrc (`machine host login alice password ...`);
on a terminal ferry asks. ftp://user:password@host/ works but shows in ps and shell history.

Exit status: 0 when everything was copied (or already there), 1 when something failed,
3 when some entries were passed over (links a server cannot hold, special files, loops),
130 when interrupted (run the same command again to resume).";

/// How data channels are set up: shared by `cp` and `profile`.
#[derive(Debug, Clone, Args)]
pub struct ChannelFlags {
    /// Parallel TCP streams per file (GridFTP MODE E); chosen from the
    /// measured round-trip time when not given.
    #[arg(short = 'p', long = "parallel")]
    pub parallel: Option<u32>,
    /// Staged mode: a ring of this many bytes (2M-64M) between disk and
    /// network, with separate disk threads. Default: synchronous.
    #[arg(long, value_parser = parse_size_usize)]
    pub staging: Option<usize>,
    /// TCP buffer size for data connections, e.g. 8M (default: kernel autotuning).
    #[arg(long, value_parser = parse_size_u32)]
    pub tcp_bs: Option<u32>,
    /// MODE E block size when sending, e.g. 1M (default 1M).
    #[arg(long, value_parser = parse_size_usize)]
    pub block_size: Option<usize>,
    /// Transmission mode: auto (GridFTP MODE E when the server has it),
    /// stream, or extended.
    #[arg(long, value_enum, default_value = "auto")]
    pub mode: ModeArg,
    /// Read and write local files with O_DIRECT in MODE E (around the page
    /// cache; implies --staging 16M unless given).
    #[arg(long)]
    pub direct_io: bool,
    /// The data-channel transport to ask servers for (TPRT; see
    /// docs/transports.md): tcp, udt, blast (udt at the fixed rate of
    /// --max-rate or --congestion blast:RATE), quic, or auto (chosen per
    /// server from the measured RTT, loss and buffer limits and from
    /// whether data is encrypted; --json says what and why). TCP when not
    /// given, or when a server refuses.
    #[arg(long, value_name = "NAME")]
    pub transport: Option<String>,
    /// The congestion controller of the chosen transport's data channels:
    /// for udt ferry (default), udt (UDT's DAIMD) or blast:RATE (fixed
    /// rate, bytes/s, dedicated circuits only); for quic ferry (default,
    /// the same rate-based controller), bbr, cubic or newreno (docs/udt.md,
    /// docs/transports.md).
    #[arg(long, value_name = "NAME", value_parser = crate::congestion::parse_name)]
    pub congestion: Option<String>,
}

impl ChannelFlags {
    /// The transport the sessions ask for: `blast` is UDT with a
    /// fixed-rate controller (`congestion.rs`); `auto` with `--congestion`
    /// chooses only among the transports that have that controller.
    fn transport_to_ask(&self) -> Option<String> {
        let t = self.transport.as_deref()?;
        if t.eq_ignore_ascii_case("blast") {
            return Some("udt".into());
        }
        match &self.congestion {
            Some(c) if t.eq_ignore_ascii_case("auto") => {
                Some(format!("auto:{}", crate::congestion::transports_having(c).join(",")))
            }
            _ => Some(t.to_string()),
        }
    }

    /// Copy options with these channel settings and everything else at
    /// its default.
    pub fn options(&self, timeout: Duration) -> CopyOptions {
        CopyOptions {
            timeout,
            mode: match self.mode {
                ModeArg::Auto => ModeChoice::Auto,
                ModeArg::Stream => ModeChoice::Stream,
                ModeArg::Extended => ModeChoice::Extended,
            },
            parallelism: self.parallel.map(|p| p.clamp(1, 64)),
            staging: self.staging,
            tcp_buffer: self.tcp_bs,
            block_size: self.block_size.unwrap_or(CopyOptions::default().block_size),
            direct_io: self.direct_io,
            transport: self.transport_to_ask(),
            data_path: data_path_from_env(),
            ..CopyOptions::default()
        }
    }
}

/// `FERRY_DATA_PATH=buffered` selects the buffered data path, for
/// measurements (`docs/data-path.md`); the libraries never read it.
pub fn data_path_from_env() -> ferry_io::mode_e::DataPath {
    ferry_io::mode_e::DataPath::from_name(std::env::var("FERRY_DATA_PATH").ok().as_deref())
}

/// `--sync=RULE` (globus-url-copy `-sync-level` 0-3: exists, size, time, checksum).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SyncArg {
    Exists,
    Size,
    Time,
    Checksum,
}

impl SyncArg {
    fn rule(self) -> ferry_client::copy::SyncRule {
        use ferry_client::copy::SyncRule;
        match self {
            SyncArg::Exists => SyncRule::Exists,
            SyncArg::Size => SyncRule::Size,
            SyncArg::Time => SyncRule::SizeAndTime,
            SyncArg::Checksum => SyncRule::Checksum,
        }
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ModeArg {
    Auto,
    Stream,
    Extended,
}

/// Parses `1048576`, `1M`, `512k`, `4G`, `1.5M` (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    ferry_client::config::parse_size(s)
}

fn parse_size_u64(s: &str) -> Result<u64, String> {
    parse_size(s).and_then(|v| if v == 0 { Err("must be positive".into()) } else { Ok(v) })
}

fn parse_size_u32(s: &str) -> Result<u32, String> {
    parse_size_u64(s).and_then(|v| u32::try_from(v).map_err(|_| format!("{s} is larger than 4G")))
}

fn parse_size_usize(s: &str) -> Result<usize, String> {
    parse_size_u64(s).and_then(|v| if v > 64 << 20 { Err("at most 64M".into()) } else { Ok(v as usize) })
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// A directory URL (or local path).
    url: String,
    /// Print one JSON object per entry.
    #[arg(long)]
    json: bool,
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    #[command(flatten)]
    tls: TlsArgs,
}

#[derive(Debug, Args)]
pub struct MkdirArgs {
    url: String,
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    #[command(flatten)]
    tls: TlsArgs,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    url: String,
    /// Remove a directory and everything in it.
    #[arg(short = 'r', long)]
    recursive: bool,
    /// Allow removing the top of your tree on the server (ftp://host/).
    #[arg(long)]
    force: bool,
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    #[command(flatten)]
    tls: TlsArgs,
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

fn location(s: &str) -> anyhow::Result<Location> {
    Location::parse(s).map_err(anyhow::Error::from)
}

/// Draws a progress bar from the shared counters until told to stop.
fn spawn_progress(stats: Arc<Stats>, enabled: bool) -> Option<(ProgressBar, tokio::task::JoinHandle<()>)> {
    if !enabled {
        return None;
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:30!} {bytes:>10}/{total_bytes:10} {binary_bytes_per_sec:>12} ETA {eta:>4} [{bar:30}]",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let b = bar.clone();
    let task = tokio::spawn(async move {
        loop {
            b.set_length(stats.expected.load(Ordering::Relaxed).max(stats.bytes.load(Ordering::Relaxed)));
            b.set_position(stats.bytes.load(Ordering::Relaxed));
            let name = stats.current.lock().map(|s| s.clone()).unwrap_or_default();
            b.set_message(name.rsplit('/').next().unwrap_or("").to_string());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    Some((bar, task))
}

/// Asks for passwords on the terminal, without echo (rpassword reads
/// /dev/tty, so piped input is left alone).
#[derive(Debug)]
pub struct TerminalPrompt;

impl ferry_client::Prompt for TerminalPrompt {
    fn password(&self, question: &str) -> Option<String> {
        rpassword::prompt_password(question).ok().filter(|p| !p.is_empty())
    }
}

/// Where passwords come from: FERRY_PASSWORD, ~/.netrc, and a prompt when
/// a person is at a terminal.
pub fn credentials() -> CredentialLookup {
    let lookup = CredentialLookup::standard();
    if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        lookup.with_prompt(Arc::new(TerminalPrompt))
    } else {
        lookup
    }
}

/// One copy of a `--files-from` list or the command line.
struct Job {
    src: Location,
    dst: Location,
}

/// The copies a `ferry cp` command asks for.
fn jobs(args: &CpArgs) -> anyhow::Result<Vec<Job>> {
    let Some(list) = &args.files_from else {
        let (Some(src), Some(dst)) = (&args.src, &args.dst) else { bail!("give SRC and DST (or --files-from FILE)") };
        return Ok(vec![Job { src: location(src)?, dst: location(dst)? }]);
    };
    let text = std::fs::read_to_string(list).with_context(|| format!("cannot read {}", list.display()))?;
    let lines = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
    match (&args.src, &args.dst) {
        (Some(src), Some(dst)) => {
            let (src, dst) = (location(src)?, location(dst)?);
            lines
                .map(|rel| {
                    let rel = rel.trim_start_matches("./").trim_start_matches('/');
                    if rel.split('/').any(|c| c == "..") {
                        bail!("{}: {rel:?} leaves the source directory", list.display());
                    }
                    let (mut s, mut d) = (src.clone(), dst.clone());
                    for c in rel.split('/').filter(|c| !c.is_empty() && *c != ".") {
                        s = s.child(c);
                        d = d.child(c);
                    }
                    Ok(Job { src: s, dst: d })
                })
                .collect()
        }
        (None, None) => lines
            .map(|l| {
                let mut it = l.split_whitespace();
                match (it.next(), it.next(), it.next()) {
                    (Some(a), Some(b), None) => Ok(Job { src: location(a)?, dst: location(b)? }),
                    _ => bail!("{}: expected `SOURCE DESTINATION` per line, got {l:?}", list.display()),
                }
            })
            .collect(),
        _ => bail!("with --files-from give both SRC and DST (relative paths), or neither (pairs in the file)"),
    }
}

/// Makes the parent directories of a `--files-from` destination.
async fn make_parents(client: &mut Client, dst: &Location, made: &mut std::collections::HashSet<String>) {
    let parent = match dst {
        Location::Local(p) => match p.parent() {
            Some(p) if !p.as_os_str().is_empty() => {
                let _ = std::fs::create_dir_all(p);
                return;
            }
            _ => return,
        },
        Location::Remote(u) => u.path.trim_end_matches('/').rsplit_once('/').map(|(d, _)| d.to_string()),
    };
    let (Some(parent), Location::Remote(u)) = (parent, dst) else { return };
    let mut path = String::new();
    for c in parent.split('/').filter(|c| !c.is_empty()) {
        path.push('/');
        path.push_str(c);
        if made.insert(format!("{}|{path}", u.host)) {
            let _ = client.make_dir(&u.with_path(path.clone())).await;
        }
    }
}

/// How a `ferry cp` ended.
enum Ending {
    Done,
    Failed(anyhow::Error),
    Interrupted,
}

impl CpArgs {
    pub fn quiet(&self) -> bool {
        self.out.quiet
    }
}

pub fn cp(args: CpArgs) -> anyhow::Result<ExitCode> {
    if args.stripe {
        return cp_striped(&args);
    }
    let rt = runtime()?;
    let show = !args.out.quiet && !args.out.json && !args.dry_run && std::io::stderr().is_terminal();
    let settings = settings(&args)?;
    let filter = if args.include.is_empty() && args.exclude.is_empty() {
        None
    } else {
        Some(ferry_client::filter::Filter::new(&args.include, &args.exclude)?)
    };
    let jobs = jobs(&args)?;
    // A process-wide choice, made here at the edge.
    crate::congestion::apply_for_copy(
        args.channel.congestion.as_deref(),
        args.channel.transport.as_deref(),
        args.max_rate,
    )?;
    let path_cache = path_cache(args.no_path_cache || args.dry_run);
    let started = Instant::now();
    let opts = CopyOptions {
        recursive: args.recursive,
        parallelism: settings.parallel.value,
        staging: settings.staging.value.map(|s| s as usize),
        tcp_buffer: settings.tcp_buffer.value.map(|b| b as u32),
        block_size: settings.block_size.value as usize,
        verify: args.verify.clone(),
        max_rate: args.max_rate,
        retries: args.retries,
        resume: !args.no_resume,
        pipeline: args.pipeline.unwrap_or(16).clamp(1, 256),
        adaptive_pipeline: args.pipeline.is_none(),
        concurrency: args.concurrency.map(usize::from),
        max_sessions: args.max_sessions.into(),
        max_data_connections: args.max_data_connections.into(),
        tls: args.tls.options(),
        credentials: credentials(),
        follow_links: args.follow_links,
        fail_fast: args.fail_fast,
        dry_run: args.dry_run,
        sync: args.sync.map(SyncArg::rule).unwrap_or_default(),
        filter,
        path_rate: args.path_rate.map(|r| r as f64),
        path_cache: path_cache.clone(),
        ..args.channel.options(Duration::from_secs(args.out.timeout))
    };
    let mut summary = CopySummary::default();
    let ending = rt.block_on(async {
        let mut client = Client::new(opts);
        let progress = spawn_progress(client.stats(), show);
        let many = jobs.len() > 1;
        let mut made = std::collections::HashSet::new();
        let mut ending = Ending::Done;
        for job in &jobs {
            if args.files_from.is_some() && args.src.is_some() && !args.dry_run {
                make_parents(&mut client, &job.dst, &mut made).await;
            }
            let result = tokio::select! {
                r = client.copy_into(&job.src, &job.dst, &mut summary) => r,
                _ = tokio::signal::ctrl_c() => {
                    ending = Ending::Interrupted;
                    break;
                }
            };
            if let Err(e) = result {
                let e = anyhow::Error::from(e).context(format!("cannot copy {} to {}", job.src, job.dst));
                if many && !args.fail_fast {
                    // A list goes on, as a tree does; the failure is listed.
                    summary.failures.push(Problem { path: job.src.to_string(), reason: format!("{e:#}") });
                    continue;
                }
                ending = Ending::Failed(e);
                break;
            }
            if args.fail_fast && !summary.failures.is_empty() {
                break;
            }
        }
        if let Some((bar, task)) = progress {
            task.abort();
            bar.finish_and_clear();
        }
        if !matches!(ending, Ending::Interrupted) {
            client.close().await;
        }
        ending
    });
    let secs = started.elapsed().as_secs_f64();
    let rate = summary.bytes as f64 / secs.max(1e-9) / 1e6;
    if let Some(c) = &path_cache {
        match c.save() {
            Ok(()) => {
                for (host, s) in c.recorded() {
                    tracing::info!(server = %host, rate = s.rate, how = %s.how, file = %c.file().display(), "path rate remembered");
                }
            }
            Err(e) => tracing::warn!(file = %c.file().display(), error = %e, "cannot update the path cache"),
        }
    }
    let error = match &ending {
        Ending::Failed(e) => Some(format!("{e:#}")),
        Ending::Interrupted => Some("interrupted; run the same command again to resume".to_string()),
        Ending::Done => None,
    };
    let code = match &ending {
        Ending::Interrupted => 130,
        Ending::Failed(_) => 1,
        Ending::Done if !summary.failures.is_empty() => 1,
        Ending::Done if !summary.passed_over.is_empty() => 3,
        Ending::Done => 0,
    };
    if args.dry_run && !args.out.json {
        for l in &summary.plan {
            println!("{:<6} {:>14}  {}", l.action, l.bytes, l.path);
        }
    }
    if args.out.json {
        println!(
            "{}",
            serde_json::json!({
                "source": args.src.as_deref().map(display),
                "destination": args.dst.as_deref().map(display),
                "ok": code == 0,
                "error": error,
                "interrupted": matches!(ending, Ending::Interrupted),
                "dry_run": args.dry_run,
                "files": summary.files,
                "directories": summary.dirs,
                "bytes": summary.bytes,
                "seconds": secs,
                "mb_per_s": rate,
                "resumed": summary.resumed,
                "resumed_files": summary.resumed_files,
                "skipped": summary.skipped,
                "skipped_bytes": summary.skipped_bytes,
                "links": summary.links,
                "excluded": summary.excluded,
                "passed_over": summary.passed_over,
                "failures": summary.failures,
                "plan": summary.plan,
                "verified": summary.verified,
                "checksum": summary.checksum_algorithm,
                "settings": settings.to_json(),
                "concurrency": summary.concurrency,
                "sync_seconds": summary.sync_seconds,
                "sizing": summary.sizing.iter().map(|(server, rtt, why)| serde_json::json!({
                    "server": server, "rtt_ms": rtt, "choice": why,
                })).collect::<Vec<_>>(),
                "disk": summary.disk,
                // The data channels' transport (null for a local copy).
                "transport": summary.transports.first().map(|(_, t)| t.clone()),
                "transports": summary.transports.iter().map(|(server, t)| serde_json::json!({
                    "server": server, "transport": t,
                })).collect::<Vec<_>>(),
                // UDT's counters summed over this process's UDT connections
                // (null when none): packets, retransmissions, losses, NAKs,
                // drops, and the last connection's RTT and pacing rate.
                "udt": Some(ferry_io::udt::totals()).filter(|t| t.connections > 0),
                // Where UDT senders' starting rates came from (--path-rate,
                // the path cache, or nothing: cold), and what this copy
                // recorded in the cache.
                "path_rate": serde_json::json!({
                    "given": args.path_rate,
                    "cache": path_cache.as_ref().map(|c| c.file().display().to_string()),
                    "announced": path_cache.as_ref().map(|c| c.announced()).unwrap_or_default(),
                    "recorded": path_cache.as_ref().map(|c| c.recorded()).unwrap_or_default(),
                }),
                // `--transport auto`: what it chose and why, per server.
                "transport_choice": summary.transport_choices.iter().map(|(server, why)| serde_json::json!({
                    "server": server, "choice": why,
                })).collect::<Vec<_>>(),
            })
        );
    }
    // Errors always, on standard error; the rest unless -q or --json.
    for f in &summary.failures {
        eprintln!("ferry: failed: {}: {}", f.path, f.reason);
    }
    if let Some(e) = &error {
        eprintln!("ferry: {e}");
    }
    if !args.out.json && !args.out.quiet {
        for p in &summary.passed_over {
            eprintln!("ferry: not copied: {}: {}", p.path, p.reason);
        }
        eprintln!("{}", describe(&summary, secs, rate, args.dry_run));
    }
    Ok(ExitCode::from(code))
}

/// The path cache of this copy, unless turned off (`--no-path-cache`,
/// `FERRY_PATH_CACHE=off`) or there is nowhere to keep it.
fn path_cache(off: bool) -> Option<Arc<ferry_client::path_cache::PathCache>> {
    if off {
        return None;
    }
    ferry_client::path_cache::PathCache::default_file().map(|f| Arc::new(ferry_client::path_cache::PathCache::at(f)))
}

/// The one-paragraph summary on standard error.
fn describe(s: &CopySummary, secs: f64, rate: f64, dry_run: bool) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    if dry_run {
        let count = |a: &str| s.plan.iter().filter(|l| l.action == a).count() as u64;
        let bytes: u64 = s.plan.iter().filter(|l| l.action == "copy" || l.action == "resume").map(|l| l.bytes).sum();
        return format!(
            "ferry: dry run: would copy {}, resume {}, skip {} already complete ({bytes} bytes to move); nothing was copied",
            plural(count("copy"), "file", "files"),
            count("resume"),
            s.skipped
        );
    }
    let mut parts = vec![format!(
        "ferry: copied {} ({} bytes) in {secs:.2} s, {rate:.1} MB/s",
        plural(s.files, "file", "files"),
        s.bytes
    )];
    if s.resumed > 0 {
        parts.push(format!("{} resumed from where an earlier copy stopped", s.resumed));
    }
    if s.skipped > 0 {
        parts
            .push(format!("{} already complete at the destination and skipped ({} bytes)", s.skipped, s.skipped_bytes));
    }
    if s.links > 0 {
        parts.push(plural(s.links, "link recreated", "links recreated"));
    }
    if s.excluded > 0 {
        parts.push(format!("{} left out by --include/--exclude", s.excluded));
    }
    if let Some(alg) = &s.checksum_algorithm {
        parts.push(format!("{} verified with {alg}", s.verified));
    }
    if !s.passed_over.is_empty() {
        parts.push(format!("{} not copied (see above)", s.passed_over.len()));
    }
    if !s.failures.is_empty() {
        parts.push(format!("{} FAILED (see above)", s.failures.len()));
    }
    parts.join(", ")
}

fn display(s: &str) -> String {
    Location::parse(s).map(|l| l.to_string()).unwrap_or_else(|_| ferry_client::credentials::redact(s))
}

/// The data-channel settings of a copy: flags, then the client config
/// file's section for the server (source first), then its defaults, then
/// Ferry's automatic choices. Says where each came from: in the log, in
/// `--json`, and on standard error when the config file set any.
fn settings(args: &CpArgs) -> anyhow::Result<Resolved> {
    let config = ClientConfig::load(args.config.as_deref())?;
    let remotes: Vec<ferry_client::RemoteUrl> = [&args.src, &args.dst]
        .into_iter()
        .flatten()
        .filter_map(|s| match Location::parse(s) {
            Ok(Location::Remote(u)) => Some(u),
            _ => None,
        })
        .collect();
    let servers: Vec<(&str, u16)> = remotes.iter().map(|u| (u.host.as_str(), u.port)).collect();
    let flags = Knobs {
        parallel: args.channel.parallel.map(|p| Choice::Value(p.clamp(1, 64))),
        tcp_buffer: args.channel.tcp_bs.map(|b| Choice::Value(b.into())),
        block_size: args.channel.block_size.map(|b| b as u64),
        staging: args.channel.staging.map(|s| Choice::Value(s as u64)),
    };
    let r = config.resolve(&servers, &flags);
    let file = config.path.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "none".into());
    for (phrase, source) in r.describe() {
        tracing::info!(setting = %phrase, from = %source, config = %file, "copy setting");
    }
    if r.uses_config() && !args.out.quiet && !args.out.json {
        let from: Vec<String> = r
            .describe()
            .into_iter()
            .filter(|(_, s)| matches!(s, Source::Host(_) | Source::Defaults))
            .map(|(p, s)| format!("{p} from {}", s.to_string().trim_start_matches("config ")))
            .collect();
        eprintln!("ferry: using {file}: {}", from.join(", "));
    }
    Ok(r)
}

pub fn ls(args: LsArgs) -> anyhow::Result<ExitCode> {
    let rt = runtime()?;
    rt.block_on(async {
        let loc = location(&args.url)?;
        let mut client = Client::new(CopyOptions {
            timeout: Duration::from_secs(args.timeout),
            tls: args.tls.options(),
            credentials: credentials(),
            ..CopyOptions::default()
        });
        let entries = client.read_dir(&loc).await.with_context(|| format!("cannot list {loc}"))?;
        client.close().await;
        for e in entries {
            let kind = match e.kind {
                ferry_proto::facts::FileKind::Dir => "dir",
                ferry_proto::facts::FileKind::File => "file",
                ferry_proto::facts::FileKind::Symlink => "link",
                ferry_proto::facts::FileKind::Other => "other",
            };
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({"name": e.name, "type": kind, "size": e.size,
                        "modified": ferry_proto::facts::format_time_val(e.modified)})
                );
            } else {
                let suffix = if kind == "dir" { "/" } else { "" };
                println!("{:>14}  {}  {}{}", e.size, ferry_proto::facts::format_time_val(e.modified), e.name, suffix);
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn remote(s: &str) -> anyhow::Result<ferry_client::RemoteUrl> {
    match location(s)? {
        Location::Remote(u) => Ok(u),
        Location::Local(_) => bail!("{s} is a local path; use mkdir/rm for local files"),
    }
}

pub fn mkdir(args: MkdirArgs) -> anyhow::Result<ExitCode> {
    let rt = runtime()?;
    rt.block_on(async {
        let url = remote(&args.url)?;
        let mut client = Client::new(CopyOptions {
            timeout: Duration::from_secs(args.timeout),
            tls: args.tls.options(),
            credentials: credentials(),
            ..CopyOptions::default()
        });
        client.make_dir(&url).await.with_context(|| format!("cannot create {url}"))?;
        client.close().await;
        Ok(ExitCode::SUCCESS)
    })
}

pub fn rm(args: RmArgs) -> anyhow::Result<ExitCode> {
    let rt = runtime()?;
    rt.block_on(async {
        let url = remote(&args.url)?;
        let mut client = Client::new(CopyOptions {
            timeout: Duration::from_secs(args.timeout),
            tls: args.tls.options(),
            credentials: credentials(),
            ..CopyOptions::default()
        });
        let mut removed = Vec::new();
        let result = client.remove(&url, args.recursive, args.force, &mut removed).await;
        client.close().await;
        let n = removed.len();
        let entries = |n: usize| format!("{n} entr{}", if n == 1 { "y" } else { "ies" });
        if let Err(e) = result {
            if !removed.is_empty() {
                // Exactly what is gone, so the person knows where things stand.
                eprintln!("ferry: removed {} before the failure:", entries(n));
                for p in &removed {
                    eprintln!("  {p}");
                }
            }
            return Err(anyhow::Error::from(e).context(format!("cannot remove {url}")));
        }
        eprintln!("ferry: removed {}", entries(n));
        Ok(ExitCode::SUCCESS)
    })
}

/// `ferry cp --stripe SRC DST` (issue 20): one file, with every data node.
fn cp_striped(args: &CpArgs) -> anyhow::Result<ExitCode> {
    use ferry_proto::stripe::{StripeLayout, DEFAULT_STRIPE_BLOCK};
    let (Some(src), Some(dst)) = (&args.src, &args.dst) else { anyhow::bail!("--stripe copies one SRC to one DST") };
    let (src, dst) = (Location::parse(src)?, Location::parse(dst)?);
    let opts = ferry_client::stripe::StripeOptions {
        parallelism: args.channel.parallel.unwrap_or(1).max(1),
        timeout: Duration::from_secs(args.out.timeout),
        layout: match args.stripe_block {
            Some(0) => StripeLayout::Partitioned,
            b => StripeLayout::Blocked { block_size: b.unwrap_or(DEFAULT_STRIPE_BLOCK).max(4096) },
        },
        stripes: args.stripes,
        resume: !args.no_resume,
        tcp_buffer: args.channel.tcp_bs,
        tls: args.tls.options(),
        streams: None,
    };
    let started = Instant::now();
    let report = runtime()?.block_on(ferry_client::stripe::copy(&src, &dst, &opts))?;
    if !args.out.quiet {
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "{} bytes over {} stripe(s) in {secs:.2} s; per-stripe markers: {} {:?}",
            report.bytes,
            report.stripes,
            report.perf_markers,
            report.progress.stripes()
        );
    }
    Ok(ExitCode::SUCCESS)
}
