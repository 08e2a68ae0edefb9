//! `ferry-stripe-bench`: striped copies over 1-3 data nodes per side, each
//! behind its own emulated link; Ferry and Globus striped servers, iperf3
//! as the reference (`ferry_bench::stripe`). Run as root.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;

use ferry_bench::stripe::{self, Setup};

#[derive(Debug, Parser)]
#[command(name = "ferry-stripe-bench", about = "Striped transfers over several emulated links")]
struct Args {
    /// The `ferry` binary (default: the one next to this program).
    #[arg(long)]
    ferry: Option<PathBuf>,
    /// Where the table, plot and raw samples go.
    #[arg(long, default_value = "bench/results/striping")]
    out: PathBuf,
    /// Rate of every node link.
    #[arg(long, default_value = "100mbit")]
    rate: String,
    /// One-way delay of every node link, ms.
    #[arg(long, default_value_t = 10)]
    delay_ms: u64,
    /// Node counts per side.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1usize, 2, 3])]
    nodes: Vec<usize>,
    /// MB of file per node.
    #[arg(long, default_value_t = 100)]
    mb_per_node: u64,
    #[arg(long, default_value_t = 1)]
    reps: u32,
    #[arg(long, default_value_t = 5)]
    iperf_secs: u32,
}

fn main() -> Result<()> {
    ferry_bench::forget_path_rates();
    let a = Args::parse();
    let ferry = match a.ferry {
        Some(f) => f,
        None => std::env::current_exe()?.with_file_name("ferry"),
    };
    let setup = Setup {
        ferry: std::fs::canonicalize(&ferry).with_context(|| format!("{}", ferry.display()))?,
        out: a.out,
        rate: a.rate.parse().context("--rate")?,
        delay: Duration::from_millis(a.delay_ms),
        nodes: a.nodes,
        bytes_per_node: a.mb_per_node * 1_000_000,
        reps: a.reps,
        iperf_secs: a.iperf_secs,
    };
    let command: Vec<String> = std::env::args().collect();
    stripe::run(&setup)?;
    std::fs::write(setup.out.join("command.txt"), format!("{}\n", command.join(" ")))?;
    Ok(())
}
