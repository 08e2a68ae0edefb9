//! The small-files benchmark (issue 18, `ferry-small-files`), short
//! version: the Ferry rows, down and up, on loopback over trees of a few
//! files. Checks the harness end to end (every file arrives and is
//! counted, the page and plots are written); no figure is judged.

use ferry_bench::small_files::{self, Direction, Setup};
use std::time::Duration;

#[test]
fn small_files_benchmark_runs_end_to_end() {
    let work = tempfile::Builder::new().prefix("ferry-small-files-").tempdir_in("/var/tmp").unwrap();
    let out = tempfile::tempdir().unwrap();
    let setup = Setup {
        ferry: env!("CARGO_BIN_EXE_ferry").into(),
        // The same build as the old twin: the row and its ratio are there.
        ferry_old: Some(env!("CARGO_BIN_EXE_ferry").into()),
        work: work.path().to_path_buf(),
        out: out.path().to_path_buf(),
        delays: vec![None],
        // 2 x 256 KiB, 20 x 4 KiB, 2 Zipf files.
        trees: small_files::issue_trees(1000, 2000),
        directions: vec![Direction::Download, Direction::Upload],
        rows: small_files::issue_rows("-p 2")
            .into_iter()
            .filter(|r| r.id.starts_with("ferry") || r.id == "one-file")
            .collect(),
        time_limit: Duration::from_secs(60),
        command: "cargo nextest run -p ferry --test small_files_bench".into(),
    };
    let samples = small_files::run(&setup).expect("the benchmark runs");
    // ferry, ferry-fixed, ferry-pipelined (against serve --no-batch) and
    // one-file (the same bytes as one file, counted as the tree's files),
    // and ferry-old beside ferry: after it in one case, before it in the
    // next (tree t, direction d: before when t + d is odd), so that neither
    // build always goes first.
    assert_eq!(samples.len(), 3 * 2 * 5);
    for (i, case) in samples.chunks(5).enumerate() {
        let rows: Vec<&str> = case.iter().map(|s| s.row.as_str()).collect();
        let at = |id: &str| rows.iter().position(|r| *r == id).unwrap() as isize;
        let old_first = (i / 2 + i % 2) % 2 == 1;
        assert_eq!(at("ferry-old") - at("ferry"), if old_first { -1 } else { 1 }, "case {i}: {rows:?}");
    }
    for s in &samples {
        assert!(s.error.is_none() && !s.timed_out, "{s:?}");
        assert_eq!(s.files_done, s.files, "{s:?}");
        assert!(s.setup_s.is_some(), "{s:?}");
    }
    let page = std::fs::read_to_string(out.path().join("README.md")).unwrap();
    assert!(page.contains("20x4KiB, upload"), "{page}");
    assert!(page.contains("same bytes as one file") && page.contains("vs one file"), "{page}");
    assert!(page.contains("new ÷ old") && page.contains("old build"), "{page}");
    assert!(out.path().join("files-per-s-20x4KiB-upload.svg").exists());
}
