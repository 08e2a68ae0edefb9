//! A directory of more files than the process may hold open at once still
//! copies: `ferry cp -r` batches a directory's fresh files, and a batch
//! opens its files before its first command, so it must be bounded
//! (`copy/batch.rs`, `BATCH_OPEN_FILES`). Before that bound a 20,000-file
//! directory failed with `EMFILE` against a limit of 20,000.

mod support;
use std::process::Command;
use support::*;

/// 1,500 files in one directory under a descriptor limit of 2,048: an
/// unbounded batch needs two descriptors per file (the partial file and
/// its block sink) and fails; batches of 512 fit.
#[test]
fn a_directory_larger_than_the_descriptor_limit_copies_both_ways() {
    require("prlimit");
    let server = FerryServer::start_with(&["--anonymous", "write"]);
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("up");
    for i in 0..1500u64 {
        random_file(&tree.join(format!("f{i:05}.dat")), 64 + i % 100, i);
    }
    let want = tree_digest(&tree);
    let limited = || {
        let mut cmd = Command::new("prlimit");
        cmd.args(["--nofile=2048:2048", ferry_bin()]).env("FERRY_STATE_DIR", state_dir());
        cmd
    };
    let up = format!("{}/", tree.display());
    let (ok, _, err) = ferry_with(&["cp", "-r", "-q", &up, &server.anon_url("/many/")], &mut limited());
    assert!(ok, "upload under a 2,048-descriptor limit failed: {err}");
    assert_eq!(tree_digest(&server.path("many")), want, "uploaded tree differs");
    let down = local.path().join("down");
    let (ok, _, err) =
        ferry_with(&["cp", "-r", "-q", &server.anon_url("/many/"), &format!("{}/", down.display())], &mut limited());
    assert!(ok, "download under a 2,048-descriptor limit failed: {err}");
    assert_eq!(tree_digest(&down), want, "downloaded tree differs");
}
