//! `ferry cp`, `ls`, `mkdir`, `rm`.

use anyhow::{bail, Context};
use clap::Args;
use ferry_client::{Client, CopyOptions, CopySummary, Location, Stats};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    out: OutputArgs,
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
}

#[derive(Debug, Args)]
pub struct MkdirArgs {
    url: String,
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    url: String,
    /// Remove a directory and everything in it.
    #[arg(short = 'r', long)]
    recursive: bool,
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn location(s: &str) -> anyhow::Result<Location> {
    Location::parse(s).map_err(anyhow::Error::from)
}

/// Draws a progress bar from the shared counters until told to stop.
fn spawn_progress(
    stats: Arc<Stats>,
    enabled: bool,
) -> Option<(ProgressBar, tokio::task::JoinHandle<()>)> {
    if !enabled {
        return None;
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg:30!} {bytes:>10}/{total_bytes:10} {binary_bytes_per_sec:>12} ETA {eta:>4} [{bar:30}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let b = bar.clone();
    let task = tokio::spawn(async move {
        loop {
            b.set_length(
                stats
                    .expected
                    .load(Ordering::Relaxed)
                    .max(stats.bytes.load(Ordering::Relaxed)),
            );
            b.set_position(stats.bytes.load(Ordering::Relaxed));
            let name = stats.current.lock().map(|s| s.clone()).unwrap_or_default();
            b.set_message(name.rsplit('/').next().unwrap_or("").to_string());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    Some((bar, task))
}

pub async fn copy(
    src: &str,
    dst: &str,
    recursive: bool,
    timeout: u64,
    show_progress: bool,
) -> anyhow::Result<CopySummary> {
    let src_loc = location(src)?;
    let dst_loc = location(dst)?;
    let mut client = Client::new(CopyOptions {
        recursive,
        timeout: Duration::from_secs(timeout),
    });
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
    let started = Instant::now();
    let summary = rt.block_on(copy(
        &args.src,
        &args.dst,
        args.recursive,
        args.out.timeout,
        show,
    ))?;
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
            })
        );
    } else if !args.out.quiet {
        eprintln!(
            "ferry: copied {} file{} ({} bytes) in {secs:.2} s, {rate:.1} MB/s",
            summary.files,
            if summary.files == 1 { "" } else { "s" },
            summary.bytes
        );
    }
    Ok(ExitCode::SUCCESS)
}

impl CpArgs {
    fn src_display(&self) -> String {
        Location::parse(&self.src)
            .map(|l| l.to_string())
            .unwrap_or_else(|_| self.src.clone())
    }
    fn dst_display(&self) -> String {
        Location::parse(&self.dst)
            .map(|l| l.to_string())
            .unwrap_or_else(|_| self.dst.clone())
    }
}

pub fn ls(args: LsArgs) -> anyhow::Result<ExitCode> {
    let rt = runtime()?;
    rt.block_on(async {
        let loc = location(&args.url)?;
        let mut client = Client::new(CopyOptions {
            recursive: false,
            timeout: Duration::from_secs(args.timeout),
        });
        let entries = client
            .read_dir(&loc)
            .await
            .with_context(|| format!("cannot list {loc}"))?;
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
                println!(
                    "{:>14}  {}  {}{}",
                    e.size,
                    ferry_proto::facts::format_time_val(e.modified),
                    e.name,
                    suffix
                );
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
            recursive: false,
            timeout: Duration::from_secs(args.timeout),
        });
        client
            .make_dir(&url)
            .await
            .with_context(|| format!("cannot create {url}"))?;
        client.close().await;
        Ok(ExitCode::SUCCESS)
    })
}

pub fn rm(args: RmArgs) -> anyhow::Result<ExitCode> {
    let rt = runtime()?;
    rt.block_on(async {
        let url = remote(&args.url)?;
        let mut client = Client::new(CopyOptions {
            recursive: false,
            timeout: Duration::from_secs(args.timeout),
        });
        let n = client
            .remove(&url, args.recursive)
            .await
            .with_context(|| format!("cannot remove {url}"))?;
        client.close().await;
        eprintln!(
            "ferry: removed {n} entr{}",
            if n == 1 { "y" } else { "ies" }
        );
        Ok(ExitCode::SUCCESS)
    })
}
