//! `ferry-bottlenecks`: the induced-bottleneck suite (bench/bottlenecks.sh
//! runs it; `ferry_bench::bottlenecks` says what each case does).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;

use ferry_bench::bottlenecks::{self, Outcome, Scale, Suite, CASES};
use ferry_bench::error::interrupt;

#[derive(Debug, Parser)]
#[command(name = "ferry-bottlenecks", about = "Induce each bottleneck and check ferry profile's verdict")]
struct Args {
    /// The `ferry` binary to profile with (default: the one next to this program).
    #[arg(long)]
    ferry: Option<PathBuf>,
    /// Repetitions of every case.
    #[arg(long, default_value_t = 3)]
    reps: u32,
    /// Only these cases (numbers 1-8, repeat or comma-separate).
    #[arg(long = "case", value_delimiter = ',')]
    cases: Vec<u32>,
    /// Short transfers (what the test suite runs).
    #[arg(long)]
    short: bool,
    /// Sampling interval of ferry profile, ms.
    #[arg(long, default_value_t = 200)]
    interval_ms: u64,
    /// Keep each case's report.json and report.html (under --work-dir).
    #[arg(long)]
    keep: bool,
    /// Print every candidate's score and evidence.
    #[arg(long)]
    verbose: bool,
    /// Where the Markdown results go (not written when absent).
    #[arg(long)]
    results: Option<PathBuf>,
    /// Scratch space on disk.
    #[arg(long, default_value = "/var/tmp/ferry-bottlenecks")]
    work_dir: PathBuf,
    /// Scratch space in tmpfs.
    #[arg(long, default_value = "/dev/shm/ferry-bottlenecks")]
    shm_dir: PathBuf,
}

fn main() -> ExitCode {
    ferry_bench::forget_path_rates();
    match run(Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ferry-bottlenecks: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<bool> {
    let flag = interrupt::flag();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, flag.clone())?;
        signal_hook::flag::register(sig, flag.clone())?;
    }
    let ferry = match args.ferry {
        Some(p) => p,
        None => std::env::current_exe()?.with_file_name("ferry"),
    };
    let suite = Suite {
        ferry,
        scale: if args.short { Scale::Short } else { Scale::Long },
        work: args.work_dir,
        shm: args.shm_dir,
        interval_ms: args.interval_ms,
        keep: args.keep,
    };
    bottlenecks::preflight(&suite)?;
    for c in &args.cases {
        if !(1..=8).contains(c) {
            bail!("there is no case {c}: the cases are 1 to 8");
        }
    }
    // The machine as the run found it (the load of other programs matters
    // on a shared machine).
    let started = ferry_bench::record::now_rfc3339();
    let load_before = std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    let mut outcomes: Vec<Outcome> = Vec::new();
    for rep in 1..=args.reps {
        for case in CASES.iter().filter(|c| args.cases.is_empty() || args.cases.contains(&c.number)) {
            interrupt::check()?;
            let o = bottlenecks::run_case(&suite, case, rep);
            println!(
                "case {} {:<16} rep {rep}: {:<6} verdict {:?} (score {:.2}, {:.1} MB/s){}",
                case.number,
                case.id,
                if o.pass { "pass" } else { "FAIL" },
                o.verdict,
                o.score,
                o.bytes_per_s / 1e6,
                o.error
                    .as_deref()
                    .map(|e| format!(" error: {e}"))
                    .or_else(|| o.why_inconclusive.as_deref().map(|w| format!(" ({w})")))
                    .unwrap_or_default()
            );
            if args.verbose {
                for (name, score, ev) in &o.candidates {
                    println!("    {score:.2} {name}");
                    if *score > 0.0 {
                        for e in ev {
                            println!("          {e}");
                        }
                    }
                }
            } else if !o.pass {
                for e in &o.evidence {
                    println!("    + {e}");
                }
                if let Some(r) = &o.runner_up {
                    println!("    runner-up: {r}");
                }
            }
            if args.keep {
                println!("    report: {}", o.report.display());
            }
            outcomes.push(o);
        }
    }
    let passed = outcomes.iter().filter(|o| o.pass).count();
    println!("{passed} of {} runs named correctly", outcomes.len());
    if let Some(path) = &args.results {
        let command = std::env::var("FERRY_BOTTLENECKS_COMMAND")
            .unwrap_or_else(|_| std::env::args().collect::<Vec<_>>().join(" "));
        let notes = vec![
            (
                "kernel".to_string(),
                std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
            ),
            (
                "cores".to_string(),
                std::thread::available_parallelism().map(|n| n.get().to_string()).unwrap_or_default(),
            ),
            ("started".to_string(), started),
            ("finished".to_string(), ferry_bench::record::now_rfc3339()),
            ("load average before".to_string(), load_before),
            (
                "load average after".to_string(),
                std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string(),
            ),
        ];
        let figure = path.with_extension("svg");
        bottlenecks::svg(&outcomes, &figure)?;
        let figure_name = figure.file_name().map(|n| n.to_string_lossy().into_owned());
        std::fs::write(path, bottlenecks::markdown(&outcomes, &command, args.reps, &notes, figure_name.as_deref()))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("results in {} and {}", path.display(), figure.display());
    }
    Ok(passed == outcomes.len())
}
