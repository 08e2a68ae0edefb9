//! `ferry profile`: runs a transfer while both ends sample themselves, and
//! writes a report that says where the bottleneck is.
//!
//! Both samplers run from before the profiled copy until after the last
//! `--compare-memory` variant, so every variant is sampled for its whole
//! duration on both ends; each transfer's progress series marks its own
//! time window, and the report judges each window separately.
//!
//! The server's half comes from `SITE PROFILE START`/`STOP` on the session
//! the transfer uses (a Ferry server, for a user with the profile
//! permission); the client samples itself with the same code. Against a
//! Globus server, or without the permission, the report has the client's
//! half only and says why. `--compare-memory` adds the variants of the
//! FTPProfiler method — memory to memory, disk to memory, memory to disk —
//! using a Ferry server's `/dev/zero` and `/dev/null` (`serve
//! --memory-paths`), so the report can name the part that limits.

use crate::copy::{runtime, ChannelFlags, TlsArgs};
use anyhow::{bail, Context};
use clap::Args;
use ferry_client::session::ServerSession;
use ferry_client::{Client, Location, RemoteUrl};
use ferry_io::endpoint::{NullSink, ZeroSource};
use ferry_io::mode_e::{BlockSink, BlockSource, ReceiveState, TransferControl};
use ferry_profile::{
    HostProfile, PerfConfig, Profile, ProgressRecorder, Sampler, SamplerConfig, Side, StreamRegistry,
    ThroughputComparison,
};
use ferry_proto::command::{Command, ProfileRequest, SiteCommand};
use ferry_proto::RangeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// What to copy: a server URL and a local path, either way round. With
    /// only a URL, the file is downloaded and discarded (/dev/null).
    src: String,
    dst: Option<String>,
    /// Where report.html and report.json go.
    #[arg(long, default_value = ".")]
    out: PathBuf,
    /// Milliseconds between samples (100-60000).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    interval_ms: u64,
    /// Also record a perf CPU profile on both ends (`perf record -e
    /// cpu-clock`; the server's needs perf installed and permitted there).
    #[arg(long)]
    perf: bool,
    /// Also run memory-to-memory, disk-to-memory and memory-to-disk
    /// variants of the same size (the server needs --memory-paths) and
    /// say which part limits the transfer.
    #[arg(long)]
    compare_memory: bool,
    #[command(flatten)]
    channel: ChannelFlags,
    #[command(flatten)]
    tls: TlsArgs,
    /// Seconds to wait for a server reply or a stalled data connection.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

/// Which way the profiled copy goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Download,
    Upload,
}

pub fn run(args: ProfileArgs) -> anyhow::Result<ExitCode> {
    let rt = runtime()?;
    let profile = rt.block_on(profile(&args))?;
    let files = profile.write_report(&args.out).context("cannot write the report")?;
    print!("{}", profile.to_text());
    eprintln!("ferry: report in {} and {}", files.html.display(), files.json.display());
    Ok(ExitCode::SUCCESS)
}

async fn profile(args: &ProfileArgs) -> anyhow::Result<Profile> {
    let src = Location::parse(&args.src)?;
    let dst = Location::parse(args.dst.as_deref().unwrap_or("/dev/null"))?;
    let (server, direction) = match (&src, &dst) {
        (Location::Remote(u), _) => (u.clone(), Direction::Download),
        (Location::Local(_), Location::Remote(u)) => (u.clone(), Direction::Upload),
        _ => bail!("ferry profile needs a server URL as source or destination"),
    };
    let registry = StreamRegistry::new();
    crate::congestion::apply_for_copy(args.channel.congestion.as_deref(), args.channel.transport.as_deref(), None)?;
    let mut opts = args.channel.options(Duration::from_secs(args.timeout));
    opts.tls = args.tls.options();
    opts.streams = Some(registry.clone());
    // A profile measures one transfer as it is: no retries, no resume.
    opts.retries = 0;
    opts.resume = false;
    let mut client = Client::new(opts);

    // The server's sampler starts on the session the copy will use.
    let start =
        Command::Site(SiteCommand::Profile(ProfileRequest::Start { interval_ms: args.interval_ms, perf: args.perf }));
    let reply = client.connection(&server).await?.command(&start).await?;
    let mut notes = Vec::new();
    let server_sampling = reply.code.get() == 200;
    if !server_sampling {
        notes.push(format!("no server-side samples: the server answered {} {}", reply.code.get(), reply.text().trim()));
    }
    let local = start_sampler(&registry, args.interval_ms, args.perf).await?;

    let is_dev = |l: &Location, dev: &str| {
        matches!(l, Location::Local(p) if p == std::path::Path::new(dev))
            || matches!(l, Location::Remote(u) if u.path == dev)
    };
    let recorder = ProgressRecorder::new(format!("{src} -> {dst}"), None)
        .with_files(!is_dev(&src, "/dev/zero"), !is_dev(&dst, "/dev/null"));
    let ticker = record_progress(&client, &recorder, args.interval_ms);
    let started = Instant::now();
    let copied = client.copy(&src, &dst).await;
    let seconds = started.elapsed().as_secs_f64();
    ticker.abort();
    recorder.record(client.stats().bytes.load(Ordering::Relaxed));

    // The variants run while both ends are still sampling.
    let mut variants = None;
    if let (true, Ok(summary)) = (args.compare_memory, &copied) {
        let disk_to_disk = summary.bytes as f64 / seconds.max(1e-9);
        variants = Some(compare(&mut client, &server, &src, &dst, direction, summary.bytes, disk_to_disk).await);
    }

    let server_half = if server_sampling { stop_server(&mut client, &server).await } else { Ok(None) };
    let client_half = tokio::task::spawn_blocking(move || local.stop()).await??;
    let summary = copied.with_context(|| format!("cannot copy {src} to {dst}"))?;
    let server_half = server_half.unwrap_or_else(|e| {
        notes.push(format!("the server's samples were lost: {e:#}"));
        None
    });

    let mut profile = Profile::new(shareable_command(std::env::args()));
    let settings = &mut profile.meta.settings;
    settings.source = Some(src.to_string());
    settings.destination = Some(dst.to_string());
    settings.reader = Some(match direction {
        Direction::Download => Side::Server,
        Direction::Upload => Side::Client,
    });
    settings.parallel_streams = client.session(&server).await.ok().map(|s| s.parallelism());
    settings.transport = client.session(&server).await.ok().map(|s| s.transport_name().to_string());
    settings.tcp_buffer_bytes = args.channel.tcp_bs.map(u64::from);
    settings.block_size_bytes = Some(args.channel.block_size.unwrap_or(1 << 20) as u64);
    settings.staging_bytes = args.channel.staging.map(|b| b as u64);
    settings.files = Some(summary.files);
    settings.bytes = Some(summary.bytes);
    for (i, note) in notes.iter().enumerate() {
        settings.extra.insert(format!("note{}", i + 1), note.clone());
    }
    profile.client = Some(client_half);
    profile.server = server_half;
    profile.transfers.push(recorder.snapshot());

    match variants {
        Some(Ok((c, series))) => {
            profile.comparison = Some(c);
            profile.transfers.extend(series);
        }
        Some(Err(e)) => {
            profile.meta.settings.extra.insert("compare_memory".into(), format!("not run: {e:#}"));
        }
        None => {}
    }
    client.close().await;
    Ok(profile)
}

/// The command line as the report records it, with every URL's password
/// left out: reports are made to be passed around.
fn shareable_command(args: impl Iterator<Item = String>) -> String {
    args.map(|a| match Location::parse(&a) {
        Ok(Location::Remote(u)) => u.to_string(),
        _ => a,
    })
    .collect::<Vec<_>>()
    .join(" ")
}

async fn start_sampler(registry: &StreamRegistry, interval_ms: u64, perf: bool) -> anyhow::Result<Sampler> {
    let mut config = SamplerConfig::every(Duration::from_millis(interval_ms))
        .with_process(std::process::id())
        .with_streams(registry.clone());
    if perf {
        config = config.with_perf(PerfConfig::pid(std::process::id()));
    }
    Ok(tokio::task::spawn_blocking(move || Sampler::start(config)).await??)
}

/// Samples the copy's progress counter for the throughput plot.
fn record_progress(client: &Client, recorder: &ProgressRecorder, interval_ms: u64) -> tokio::task::JoinHandle<()> {
    let (bytes, recorder) = (client.stats().bytes.clone(), recorder.clone());
    // Twice per sampling interval, at most every 50 ms: enough points for
    // a smooth curve without a sample per block.
    let tick = Duration::from_millis((interval_ms / 2).max(50));
    tokio::spawn(async move {
        loop {
            recorder.record(bytes.load(Ordering::Relaxed));
            tokio::time::sleep(tick).await;
        }
    })
}

async fn stop_server(client: &mut Client, server: &RemoteUrl) -> anyhow::Result<Option<HostProfile>> {
    let stop = Command::Site(SiteCommand::Profile(ProfileRequest::Stop));
    let reply = client.connection(server).await?.command(&stop).await?;
    if reply.code.get() != 250 || reply.lines.len() < 2 {
        bail!("SITE PROFILE STOP: {}", reply.text());
    }
    // The JSON is cut into lines, each after one space.
    let json: String = reply.lines[1..reply.lines.len() - 1].iter().map(|l| l.strip_prefix(' ').unwrap_or(l)).collect();
    Ok(Some(HostProfile::from_json(&json)?))
}

/// The FTPProfiler variants: the same number of bytes with one or both
/// disks replaced by memory, so the report can tell which part limits.
async fn compare(
    client: &mut Client,
    server: &RemoteUrl,
    src: &Location,
    dst: &Location,
    direction: Direction,
    bytes: u64,
    disk_to_disk: f64,
) -> anyhow::Result<(ThroughputComparison, Vec<ferry_profile::TransferSeries>)> {
    if bytes == 0 {
        bail!("the profiled copy moved no bytes");
    }
    let progress = client.stats().bytes.clone();
    let session = client.session(server).await?;
    if !session.supports_mode_e() {
        bail!("the server does not speak GridFTP MODE E");
    }
    let mut series = Vec::new();
    let mut measure = async |label: &str, session: &mut ServerSession, variant: Variant| -> anyhow::Result<f64> {
        let (reads, writes) = variant.files();
        let recorder = ProgressRecorder::new(label, Some(bytes)).with_files(reads, writes);
        let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let ctl = TransferControl {
            path: crate::copy::data_path_from_env(),
            ..TransferControl::shared(counter.clone(), None)
        };
        let ticker = {
            let (counter, recorder) = (counter.clone(), recorder.clone());
            tokio::spawn(async move {
                loop {
                    recorder.record(counter.load(Ordering::Relaxed));
                    // Variants are often short: 50 ms keeps their curves from being stubs.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        };
        let t = Instant::now();
        let result = run_variant(session, variant, bytes, &ctl).await;
        let secs = t.elapsed().as_secs_f64();
        ticker.abort();
        recorder.record(counter.load(Ordering::Relaxed));
        progress.fetch_add(counter.load(Ordering::Relaxed), Ordering::Relaxed);
        result.with_context(|| format!("the {label} variant failed"))?;
        series.push(recorder.snapshot());
        Ok(bytes as f64 / secs.max(1e-9))
    };
    let comparison = match (direction, src, dst) {
        (Direction::Download, Location::Remote(u), dst) => {
            let sink_dir = match dst {
                Location::Local(p) if p.is_dir() => p.clone(),
                Location::Local(p) => p.parent().map(|d| d.to_path_buf()).unwrap_or_else(|| ".".into()),
                _ => std::env::temp_dir(),
            };
            let m2m = measure("memory to memory", session, Variant::Download("/dev/zero".into(), Sink::Null)).await?;
            let d2m = measure("disk to memory", session, Variant::Download(u.path.clone(), Sink::Null)).await?;
            let tmp = tempfile::Builder::new().prefix(".ferry-profile-").tempfile_in(&sink_dir)?;
            let sink = Sink::File(tmp.path().to_path_buf());
            let m2d = measure("memory to disk", session, Variant::Download("/dev/zero".into(), sink)).await?;
            ThroughputComparison {
                memory_to_memory: Some(m2m),
                disk_to_memory: Some(d2m),
                memory_to_disk: Some(m2d),
                disk_to_disk: Some(disk_to_disk),
                reader: Some(Side::Server),
            }
        }
        (Direction::Upload, Location::Local(p), Location::Remote(u)) => {
            let zero = || -> anyhow::Result<Arc<dyn BlockSource>> { Ok(Arc::new(ZeroSource::new(bytes)?)) };
            let file = || -> anyhow::Result<Arc<dyn BlockSource>> { Ok(Arc::new(std::fs::File::open(p)?)) };
            let m2m = measure("memory to memory", session, Variant::Upload(zero()?, "/dev/null".into(), false)).await?;
            let d2m = measure("disk to memory", session, Variant::Upload(file()?, "/dev/null".into(), true)).await?;
            let scratch = format!("{}.ferry-profile", u.path.trim_end_matches('/'));
            let m2d = measure("memory to disk", session, Variant::Upload(zero()?, scratch.clone(), false)).await?;
            let _ = session.ctrl.command(&Command::Dele(scratch)).await;
            ThroughputComparison {
                memory_to_memory: Some(m2m),
                disk_to_memory: Some(d2m),
                memory_to_disk: Some(m2d),
                disk_to_disk: Some(disk_to_disk),
                reader: Some(Side::Client),
            }
        }
        _ => bail!("--compare-memory needs a copy between this machine and a server"),
    };
    Ok((comparison, series))
}

enum Sink {
    Null,
    File(PathBuf),
}

enum Variant {
    /// Download this server path (`/dev/zero` is cut to size) into a sink.
    Download(String, Sink),
    /// Upload a source (a file if the flag says so) to this server path.
    Upload(Arc<dyn BlockSource>, String, bool),
}

impl Variant {
    /// Whether the sending end reads a file and the receiving end writes one.
    fn files(&self) -> (bool, bool) {
        match self {
            Variant::Download(path, sink) => (path != "/dev/zero", matches!(sink, Sink::File(_))),
            Variant::Upload(_, path, file) => (*file, path != "/dev/null"),
        }
    }
}

async fn run_variant(
    session: &mut ServerSession,
    variant: Variant,
    bytes: u64,
    ctl: &TransferControl,
) -> anyhow::Result<()> {
    match variant {
        Variant::Download(path, sink) => {
            let sink: Arc<dyn BlockSink> = match sink {
                Sink::Null => Arc::new(NullSink),
                Sink::File(p) => Arc::new(std::fs::OpenOptions::new().write(true).open(&p)?),
            };
            let state = Arc::new(ReceiveState::default());
            session.retrieve_range_e(&path, 0, bytes, sink, state, ctl).await?;
        }
        Variant::Upload(source, path, _) => {
            session.store_e(&path, source, bytes, &RangeSet::new(), ctl, &mut |_| {}).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_recorded_command_has_no_password() {
        let argv = ["ferry", "profile", "-p", "4", "ftp://alice:s3cret@host:2811/x.nc", "/tmp/out"];
        let cmd = super::shareable_command(argv.iter().map(|s| s.to_string()));
        assert_eq!(cmd, "ferry profile -p 4 ftp://alice@host:2811/x.nc /tmp/out");
    }
}
