//! `ferry cp`, `ls`, `mkdir`, `rm`.

use anyhow::{bail, Context};
use clap::Args;
use ferry_client::config::{Choice, ClientConfig, Knobs, Resolved, Source};
use ferry_client::{Client, CopyOptions, CopySummary, Location, ModeChoice, Stats};
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
    fn options(&self) -> ferry_client::TlsOptions {
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
pub struct CpArgs {
    /// Source: a local path, file://, ftp:// or ftps:// URL.
    src: String,
    /// Destination: a local path or URL; an existing directory (or a URL
    /// ending in /) receives the source under its own name.
    dst: String,
    /// Copy directories recursively.
    #[arg(short = 'r', long)]
    recursive: bool,
    #[command(flatten)]
    channel: ChannelFlags,
    /// Compare checksums of source and destination after each file
    /// (optionally naming the algorithm: XXH128, MD5, ADLER32, CRC32C, SHA256...).
    #[arg(long, num_args = 0..=1, default_missing_value = "auto", require_equals = true)]
    verify: Option<String>,
    /// Cap the copy's rate, e.g. 100M (bytes per second).
    #[arg(long, value_parser = parse_size_u64)]
    max_rate: Option<u64>,
    /// Attempts after a failure; each resumes where the last one stopped.
    #[arg(long, default_value_t = 3)]
    retries: u32,
    /// Start over instead of resuming an interrupted copy.
    #[arg(long)]
    no_resume: bool,
    /// Transfer commands kept in flight when copying many files in MODE E
    /// (1 turns pipelining off).
    #[arg(long, default_value_t = 16)]
    pipeline: usize,
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
}

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
}

impl ChannelFlags {
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
            ..CopyOptions::default()
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

pub async fn copy(src: &str, dst: &str, opts: CopyOptions, show_progress: bool) -> anyhow::Result<CopySummary> {
    let src_loc = location(src)?;
    let dst_loc = location(dst)?;
    let mut client = Client::new(opts);
    let progress = spawn_progress(client.stats(), show_progress);
    let result = client.copy(&src_loc, &dst_loc).await;
    if let Some((bar, task)) = progress {
        task.abort();
        bar.finish_and_clear();
    }
    client.close().await;
    result.with_context(|| format!("cannot copy {src_loc} to {dst_loc}"))
}

pub fn cp(args: CpArgs) -> anyhow::Result<ExitCode> {
    let rt = runtime()?;
    let show = !args.out.quiet && !args.out.json && std::io::stderr().is_terminal();
    let settings = settings(&args)?;
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
        pipeline: args.pipeline.clamp(1, 256),
        tls: args.tls.options(),
        ..args.channel.options(Duration::from_secs(args.out.timeout))
    };
    let summary = rt.block_on(copy(&args.src, &args.dst, opts, show))?;
    let secs = started.elapsed().as_secs_f64();
    let rate = summary.bytes as f64 / secs.max(1e-9) / 1e6;
    if args.out.json {
        println!(
            "{}",
            serde_json::json!({
                "source": args.src_display(),
                "destination": args.dst_display(),
                "files": summary.files,
                "directories": summary.dirs,
                "bytes": summary.bytes,
                "seconds": secs,
                "mb_per_s": rate,
                "resumed": summary.resumed,
                "verified": summary.verified,
                "checksum": summary.checksum_algorithm,
                "settings": settings.to_json(),
                "sizing": summary.sizing.iter().map(|(server, rtt, why)| serde_json::json!({
                    "server": server, "rtt_ms": rtt, "choice": why,
                })).collect::<Vec<_>>(),
            })
        );
    } else if !args.out.quiet {
        let verified = match &summary.checksum_algorithm {
            Some(alg) => format!(", {} verified with {alg}", summary.verified),
            None => String::new(),
        };
        let resumed = if summary.resumed > 0 { format!(", {} resumed", summary.resumed) } else { String::new() };
        eprintln!(
            "ferry: copied {} file{} ({} bytes) in {secs:.2} s, {rate:.1} MB/s{resumed}{verified}",
            summary.files,
            if summary.files == 1 { "" } else { "s" },
            summary.bytes
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The data-channel settings of a copy: flags, then the client config
/// file's section for the server (source first), then its defaults, then
/// Ferry's automatic choices. Says where each came from: in the log, in
/// `--json`, and on standard error when the config file set any.
fn settings(args: &CpArgs) -> anyhow::Result<Resolved> {
    let config = ClientConfig::load(args.config.as_deref())?;
    let remotes: Vec<ferry_client::RemoteUrl> = [&args.src, &args.dst]
        .into_iter()
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

impl CpArgs {
    fn src_display(&self) -> String {
        Location::parse(&self.src).map(|l| l.to_string()).unwrap_or_else(|_| self.src.clone())
    }
    fn dst_display(&self) -> String {
        Location::parse(&self.dst).map(|l| l.to_string()).unwrap_or_else(|_| self.dst.clone())
    }
}

pub fn ls(args: LsArgs) -> anyhow::Result<ExitCode> {
    let rt = runtime()?;
    rt.block_on(async {
        let loc = location(&args.url)?;
        let mut client = Client::new(CopyOptions {
            timeout: Duration::from_secs(args.timeout),
            tls: args.tls.options(),
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
            ..CopyOptions::default()
        });
        let n = client.remove(&url, args.recursive).await.with_context(|| format!("cannot remove {url}"))?;
        client.close().await;
        eprintln!("ferry: removed {n} entr{}", if n == 1 { "y" } else { "ies" });
        Ok(ExitCode::SUCCESS)
    })
}
