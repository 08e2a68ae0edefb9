//! The induced-bottleneck suite, short version (issue 14): each of the
//! eight bottlenecks of `ferry_bench::bottlenecks` is created on purpose
//! and `ferry profile`'s verdict must name it. The long version, three
//! repetitions with larger transfers, is `bench/bottlenecks.sh`; its
//! results are committed in bench/results/ (bottlenecks*.md and .svg).
//!
//! Needs root (network namespaces, cgroup v1 `cpu` and `blkio`, loop
//! devices); without it the test fails with a message saying so. The
//! cases run one after the other in this one test, since each is timed by
//! its own bottleneck and running them side by side would add the others'
//! load to it.

use ferry_bench::bottlenecks::{self, Scale, Suite, CASES};

#[test]
fn every_induced_bottleneck_is_named() {
    let work = tempfile::Builder::new().prefix("ferry-bottlenecks-").tempdir_in("/var/tmp").expect("scratch on disk");
    let shm = tempfile::Builder::new().prefix("ferry-bottlenecks-").tempdir_in("/dev/shm").expect("scratch in tmpfs");
    let suite = Suite {
        ferry: env!("CARGO_BIN_EXE_ferry").into(),
        scale: Scale::Short,
        work: work.path().to_path_buf(),
        shm: shm.path().to_path_buf(),
        interval_ms: 200,
        keep: false,
    };
    if let Err(e) = bottlenecks::preflight(&suite) {
        panic!("the induced-bottleneck suite cannot run here: {e}");
    }
    let outcomes: Vec<_> = CASES.iter().map(|c| bottlenecks::run_case(&suite, c, 1)).collect();
    let table = bottlenecks::markdown(
        &outcomes,
        "cargo nextest run -p ferry -E 'test(every_induced_bottleneck)'",
        1,
        &[],
        None,
    );
    println!("{table}");
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.pass)
        .map(|o| {
            format!(
                "case {}: expected {}, got {:?}{}",
                o.case,
                o.expected,
                o.verdict,
                o.error.as_deref().or(o.why_inconclusive.as_deref()).map(|e| format!(" ({e})")).unwrap_or_default()
            )
        })
        .collect();
    assert!(failed.is_empty(), "{} of 8 bottlenecks misnamed:\n{}\n\n{table}", failed.len(), failed.join("\n"));
}
