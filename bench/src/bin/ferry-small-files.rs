//! `ferry-small-files`: issue 18's benchmark, thousands of small files
//! down and up, Ferry beside Globus, lftp and rclone, on loopback and
//! across `ferry-wan` (`ferry_bench::small_files`, bench/README.md). Root.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;

use ferry_bench::error::interrupt;
use ferry_bench::small_files::{self, Direction, Setup};

#[derive(Debug, Parser)]
#[command(name = "ferry-small-files", about = "Thousands of small files: files per second, Ferry against its peers")]
struct Args {
    /// The `ferry` binary (default: the one next to this program).
    #[arg(long)]
    ferry: Option<PathBuf>,
    /// An older `ferry` build: a "ferry-old" row (it as server and client,
    /// the `ferry` row's flags) follows each `ferry` row, and the page shows
    /// new ÷ old from the same invocation.
    #[arg(long)]
    ferry_old: Option<PathBuf>,
    /// Where runs.jsonl, README.md and the plots go.
    #[arg(long, default_value = "bench/results/small-files")]
    out: PathBuf,
    /// Scratch on disk: the trees, destinations, logs.
    #[arg(long, default_value = "/var/tmp/ferry-small-files")]
    work: PathBuf,
    /// One-way delays in ms; 0 is loopback (no emulated link).
    #[arg(long, value_delimiter = ',', default_values_t = vec![0u64, 1, 10, 30, 80])]
    delays: Vec<u64>,
    /// Which trees: 256k, 4k, mixed.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["256k".to_string(), "4k".into(), "mixed".into()])]
    trees: Vec<String>,
    /// download, upload
    #[arg(long, value_delimiter = ',', default_values_t = vec!["download".to_string(), "upload".into()])]
    directions: Vec<String>,
    /// Only these rows (ids: ferry, ferry-fixed, ferry-pipelined, one-file, guc-r, guc-pp, guc-pp-cc4, guc-pp-cc8, guc-fast-p4-pp, lftp, rclone).
    #[arg(long, value_delimiter = ',')]
    rows: Vec<String>,
    /// Flags of the "Ferry with fixed settings" row.
    #[arg(long, default_value = "-p 4", allow_hyphen_values = true)]
    ferry_fixed: String,
    /// Divide the file counts by this (a shorter run).
    #[arg(long, default_value_t = 1)]
    scale: usize,
    /// Seconds a run may take before it is killed and reports what it finished.
    #[arg(long, default_value_t = 180)]
    time_limit: u64,
    /// Only rebuild README.md and the plots from OUT/runs.jsonl.
    #[arg(long)]
    report_only: bool,
}

fn main() -> Result<()> {
    ferry_bench::forget_path_rates();
    let a = Args::parse();
    if a.report_only {
        let samples = small_files::read_runs(&a.out.join("runs.jsonl"))?;
        let command = std::fs::read_to_string(a.out.join("command.txt")).unwrap_or_default();
        let page = small_files::markdown(command.trim(), &samples);
        std::fs::write(a.out.join("README.md"), small_files::page_with_notes(&a.out, &page))?;
        small_files::plots(&a.out, &samples)?;
        return Ok(());
    }
    let flag = interrupt::flag();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, flag.clone())?;
        signal_hook::flag::register(sig, flag.clone())?;
    }
    let ferry = match a.ferry {
        Some(p) => p,
        None => std::env::current_exe()?.with_file_name("ferry"),
    };
    let ferry = ferry.canonicalize().with_context(|| format!("the ferry binary {}", ferry.display()))?;
    let all = small_files::issue_trees(a.scale, small_files::MIXED_FILES);
    let mut trees = Vec::new();
    for t in &a.trees {
        let i = match t.as_str() {
            "256k" => 0,
            "4k" => 1,
            "mixed" => 2,
            other => bail!("unknown tree {other:?} (256k, 4k, mixed)"),
        };
        trees.push(all[i].clone());
    }
    let directions = a
        .directions
        .iter()
        .map(|d| match d.as_str() {
            "download" => Ok(Direction::Download),
            "upload" => Ok(Direction::Upload),
            o => bail!("unknown direction {o:?}"),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut rows = small_files::issue_rows(&a.ferry_fixed);
    if !a.rows.is_empty() {
        rows.retain(|r| a.rows.contains(&r.id));
    }
    let command =
        std::env::var("FERRY_BENCH_COMMAND").unwrap_or_else(|_| std::env::args().collect::<Vec<_>>().join(" "));
    std::fs::create_dir_all(&a.out)?;
    // Every invocation that adds runs to this directory.
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(a.out.join("command.txt"))?;
    std::io::Write::write_all(&mut f, format!("{command}\n").as_bytes())?;
    let ferry_old = match a.ferry_old {
        Some(p) => Some(p.canonicalize().with_context(|| format!("the old ferry binary {}", p.display()))?),
        None => None,
    };
    let setup = Setup {
        ferry,
        ferry_old,
        work: a.work,
        out: a.out,
        delays: a.delays.iter().map(|&d| (d > 0).then(|| Duration::from_millis(d))).collect(),
        trees,
        directions,
        rows,
        time_limit: Duration::from_secs(a.time_limit),
        command,
    };
    small_files::run(&setup)?;
    Ok(())
}
