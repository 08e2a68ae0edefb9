//! `ferry probe`, `ferry tune` and the client config file, against real
//! servers on loopback: Ferry (with and without memory paths) and Globus.
//! Budgets are tiny: these check behaviour and output, never speed.

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use support::*;

/// Runs ferry with a private config location and state directory.
fn run(args: &[&str], config_home: &Path) -> (bool, String, String) {
    ferry_with(
        args,
        Command::new(ferry_bin())
            .env("FERRY_STATE_DIR", config_home.join("state"))
            .env("XDG_CONFIG_HOME", config_home)
            .env_remove("FERRY_CONFIG"),
    )
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}"))
}

#[test]
fn probe_measures_rtt_and_a_memory_to_memory_rate() {
    let server = FerryServer::start_with(&["--anonymous", "read", "--memory-paths"]);
    let home = tempfile::tempdir().unwrap();
    let (ok, out, err) = run(&["probe", &server.addr.to_string(), "--bytes", "8M", "--json"], home.path());
    assert!(ok, "{err}");
    let v = json(&out);
    assert_eq!(v["rate_source"], "memory_zero", "{v}");
    assert_eq!(v["rate_path"], "/dev/zero");
    assert_eq!(v["measurement"]["bytes"], 8 << 20, "{v}");
    assert_eq!(v["measurement"]["partial"], true, "a 64 GiB /dev/zero is read partially: {v}");
    assert_eq!(v["rtt"]["noop_ms"].as_array().unwrap().len(), 5);
    let r = &v["report"];
    assert!(r["rtt_ms"].as_f64().unwrap() >= 0.0);
    assert!(r["rate_bytes_per_s"].as_f64().unwrap() > 0.0, "{v}");
    assert!(r["bdp_bytes"].as_u64().is_some() && r["suggested_tcp_buffer_bytes"].as_u64().unwrap() >= 64 << 10, "{v}");
    assert!(r["limits"]["autotune_rmem_max"].as_u64().unwrap() > 0);
    // Text output says where the rate came from.
    let (ok, out, err) = run(&["probe", &server.anon_url("/"), "--bytes", "4M"], home.path());
    assert!(ok, "{err}");
    assert!(out.contains("memory-to-memory download of the server's /dev/zero"), "{out}");
    assert!(out.contains("bandwidth-delay product"), "{out}");
    assert!(out.contains("--tcp-bs"), "{out}");
}

#[test]
fn probe_uses_a_named_file_or_says_it_measured_no_rate() {
    let server = FerryServer::start();
    random_file(&server.path("big.bin"), 3 << 20, 7);
    let home = tempfile::tempdir().unwrap();
    let (ok, out, err) = run(&["probe", &server.anon_url("/big.bin"), "--bytes", "2M", "--json"], home.path());
    assert!(ok, "{err}");
    let v = json(&out);
    assert_eq!(v["rate_source"], "file", "{v}");
    assert_eq!(v["measurement"]["bytes"], 2 << 20, "ERET P 0 2M of a 3 MiB file: {v}");
    // The whole file when it is smaller than the budget: a plain RETR.
    let (ok, out, err) = run(&["probe", &server.anon_url("/big.bin"), "--json"], home.path());
    assert!(ok, "{err}");
    let v = json(&out);
    assert_eq!(
        (v["measurement"]["bytes"].as_u64(), v["measurement"]["partial"].as_bool()),
        (Some(3 << 20), Some(false))
    );
    // No file and no memory paths: RTT only, and why.
    let (ok, out, err) = run(&["probe", &server.addr.to_string()], home.path());
    assert!(ok, "{err}");
    assert!(out.contains("No rate measured") && out.contains("--memory-paths"), "{out}");
    assert!(out.contains("RTT"), "{out}");
    let (ok, _, err) = run(&["probe", &server.anon_url("/nope"), "--json"], home.path());
    assert!(ok, "a missing file falls back to /dev/zero or RTT only: {err}");
}

#[test]
fn tune_sweeps_recommends_and_writes_the_config_that_cp_then_uses() {
    let server = FerryServer::start_with(&["--anonymous", "read", "--memory-paths"]);
    let home = tempfile::tempdir().unwrap();
    let url = server.anon_url("/dev/zero");
    let (ok, out, err) = run(
        &[
            "tune",
            &url,
            "--bytes",
            "4M",
            "--seconds",
            "20",
            "--streams",
            "1,2",
            "--tcp-bs",
            "auto,bdp,4M",
            "--max-trials",
            "5",
            "--repeats",
            "1",
            "--pause",
            "0",
            "--write-config",
            "--json",
        ],
        home.path(),
    );
    assert!(ok, "{err}");
    let v = json(&out);
    assert_eq!(v["direction"], "download");
    assert_eq!(v["method"], "sweep");
    let trials = v["result"]["trials"].as_array().unwrap();
    assert!((1..=5).contains(&trials.len()), "{v}");
    assert_eq!(trials[0]["config"]["streams"], 1);
    assert!(trials.iter().all(|t| t["error"].is_null() && t["rate"].as_f64().unwrap() > 0.0), "{v}");
    assert_eq!(v["trials"].as_array().unwrap().len(), trials.len());
    assert!(v["trials"][0]["measurement"]["bytes"].as_u64().unwrap() == 4 << 20, "{v}");
    // Download: block size and staging are the server's and not swept.
    assert_eq!(v["space"]["block_sizes"].as_array().unwrap().len(), 1);
    assert_eq!(v["space"]["staging_sizes"], serde_json::json!([0]));
    assert!(v["bdp_bytes"].as_u64().is_some(), "bdp was asked for, so the path was measured first: {v}");
    let best = &v["result"]["best"];
    assert!(v["recommendation"].as_str().unwrap().starts_with("Recommended for 127.0.0.1:"), "{v}");
    let written = home.path().join("ferry").join("client.toml");
    assert_eq!(v["config_written"], written.display().to_string());
    let text = std::fs::read_to_string(&written).unwrap();
    let section = format!("[hosts.\"{}\"]", server.addr);
    assert!(text.contains(&section), "{text}");
    assert!(text.contains(&format!("parallel = {}", best["streams"])), "{text}");
    assert!(text.contains("# ferry tune ftp://"), "{text}");

    // ferry cp now takes its settings from that section; flags still win.
    random_file(&server.path("f.bin"), 1 << 20, 3);
    let dest = home.path().join("f.bin");
    let (ok, out, err) = run(&["cp", "--json", &server.anon_url("/f.bin"), dest.to_str().unwrap()], home.path());
    assert!(ok, "{err}");
    let s = &json(&out)["settings"];
    assert_eq!(s["parallel"]["value"], best["streams"], "{s}");
    assert_eq!(s["parallel"]["from"], format!("config [hosts.\"{}\"]", server.addr), "{s}");
    assert_eq!(s["block_size"]["from"], "built-in");
    let (ok, out, err) =
        run(&["cp", "--json", "-p", "3", &server.anon_url("/f.bin"), dest.to_str().unwrap()], home.path());
    assert!(ok, "{err}");
    let s = &json(&out)["settings"];
    assert_eq!((s["parallel"]["value"].as_u64(), s["parallel"]["from"].as_str()), (Some(3), Some("command line")));
    // Without --json, a copy says which settings came from the file.
    let (ok, _, err) = run(&["cp", &server.anon_url("/f.bin"), dest.to_str().unwrap()], home.path());
    assert!(ok, "{err}");
    assert!(err.contains("ferry: using") && err.contains(&format!("from [hosts.\"{}\"]", server.addr)), "{err}");
}

#[test]
fn tune_exhaustive_measures_every_point() {
    let server = FerryServer::start_with(&["--anonymous", "read", "--memory-paths"]);
    let home = tempfile::tempdir().unwrap();
    let (ok, out, err) = run(
        &[
            "tune",
            &server.anon_url("/dev/zero"),
            "--exhaustive",
            "--repeats",
            "2",
            "--bytes",
            "2M",
            "--streams",
            "1,2",
            "--tcp-bs",
            "auto,4M",
            "--pause",
            "0",
            "--json",
        ],
        home.path(),
    );
    assert!(ok, "{err}");
    let v = json(&out);
    assert_eq!(v["method"], "exhaustive");
    let trials = v["result"]["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 4, "{v}");
    assert!(trials.iter().all(|t| t["rates"].as_array().unwrap().len() == 2), "{v}");
    assert_eq!(trials.iter().filter(|t| t["accepted"] == true).count(), 1);
    assert_eq!(v["trials"].as_array().unwrap().len(), 8, "two passes of four");
    // Text: the evidence table and the recommendation.
    let (ok, out, err) = run(
        &[
            "tune",
            &server.anon_url("/dev/zero"),
            "--bytes",
            "2M",
            "--streams",
            "1,2",
            "--tcp-bs",
            "auto",
            "--pause",
            "0",
            "-q",
        ],
        home.path(),
    );
    assert!(ok, "{err}");
    assert!(out.contains("parallel streams") && out.contains("Recommended for"), "{out}");
    assert!(out.contains("As flags: ferry cp -p"), "{out}");
    assert!(err.is_empty(), "-q: {err}");
}

#[test]
fn tune_uploads_sweep_block_and_staging_and_clean_up() {
    let server = FerryServer::start_with(&["--anonymous", "read", "--memory-paths"]);
    let home = tempfile::tempdir().unwrap();
    // To the server's /dev/null: memory to memory.
    let (ok, out, err) = run(
        &[
            "tune",
            "--upload",
            &server.url(ALICE, "/dev/null"),
            "--bytes",
            "2M",
            "--streams",
            "1",
            "--tcp-bs",
            "auto",
            "--block-sizes",
            "256K,1M",
            "--staging",
            "off,2M",
            "--pause",
            "0",
            "--json",
        ],
        home.path(),
    );
    assert!(ok, "{err}");
    let v = json(&out);
    assert_eq!(v["direction"], "upload");
    assert_eq!(v["space"]["staging_sizes"], serde_json::json!([0, 2 << 20]));
    let knobs: Vec<&str> =
        v["result"]["trials"].as_array().unwrap().iter().filter_map(|t| t["knob"].as_str()).collect();
    assert!(knobs.contains(&"block_size") && knobs.contains(&"staging_size"), "{v}");
    assert!(v["flags"].as_str().unwrap().contains("--block-size"), "{v}");

    // To a directory: a test file is written each trial and removed at the end.
    std::fs::create_dir(server.path("up")).unwrap();
    random_file(&home.path().join("src.bin"), 3 << 20, 9);
    let (ok, out, err) = run(
        &[
            "tune",
            "--upload",
            "--from",
            home.path().join("src.bin").to_str().unwrap(),
            &server.url(ALICE, "/up/"),
            "--bytes",
            "2M",
            "--streams",
            "1,2",
            "--tcp-bs",
            "auto",
            "--block-sizes",
            "1M",
            "--staging",
            "off",
            "--pause",
            "0",
            "--json",
        ],
        home.path(),
    );
    assert!(ok, "{err}");
    assert_eq!(json(&out)["trials"][0]["measurement"]["bytes"], 2 << 20);
    assert_eq!(std::fs::read_dir(server.path("up")).unwrap().count(), 0, "the test upload is removed");

    // An existing file is not overwritten.
    random_file(&server.path("up/keep.bin"), 10, 1);
    let (ok, _, err) = run(&["tune", "--upload", &server.url(ALICE, "/up/keep.bin"), "--bytes", "1M"], home.path());
    assert!(!ok);
    assert!(err.contains("exists"), "{err}");
    assert_eq!(std::fs::metadata(server.path("up/keep.bin")).unwrap().len(), 10);
}

#[test]
fn tune_refuses_plain_ftp_and_directories_clearly() {
    let server = FerryServer::start_with(&["--anonymous", "read", "--memory-paths"]);
    let home = tempfile::tempdir().unwrap();
    let (ok, _, err) = run(&["tune", &server.anon_url("/"), "--bytes", "1M"], home.path());
    assert!(!ok);
    assert!(err.contains("is a directory") && err.contains("/dev/zero"), "{err}");
    let (ok, _, err) = run(&["tune", "/tmp/x"], home.path());
    assert!(!ok && err.contains("ftp:// URL"), "{err}");
    let ftpd = PureFtpd::start();
    random_file(&ftpd.home.path().join("f.bin"), 1 << 20, 2);
    let (ok, _, err) = run(&["tune", &ftpd.url("/f.bin"), "--bytes", "1M", "--pause", "0"], home.path());
    assert!(!ok);
    assert!(err.contains("GridFTP"), "{err}");
}

#[test]
fn cp_config_file_locations_and_errors() {
    let server = FerryServer::start();
    random_file(&server.path("f.bin"), 1000, 5);
    let home = tempfile::tempdir().unwrap();
    let dest = home.path().join("out.bin");
    let cp = |extra_env: &[(&str, &Path)], args: &[&str]| {
        let mut c = Command::new(ferry_bin());
        c.args(["cp", "--json"]).args(args).arg(server.anon_url("/f.bin")).arg(&dest);
        c.env("FERRY_STATE_DIR", home.path().join("state"))
            .env("XDG_CONFIG_HOME", home.path())
            .env_remove("FERRY_CONFIG");
        for (k, v) in extra_env {
            c.env(k, v);
        }
        let out = c.stdin(Stdio::null()).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The XDG place: [defaults] applies to every server.
    std::fs::create_dir_all(home.path().join("ferry")).unwrap();
    std::fs::write(home.path().join("ferry/client.toml"), "[defaults]\nparallel = 2\nblock_size = \"2M\"\n").unwrap();
    let (ok, out, err) = cp(&[], &[]);
    assert!(ok, "{err}");
    let s = json(&out)["settings"].clone();
    assert_eq!((s["parallel"]["value"].as_u64(), s["parallel"]["from"].as_str()), (Some(2), Some("config [defaults]")));
    assert_eq!(s["block_size"]["value"], 2 << 20);
    assert_eq!(s["tcp_buffer"]["from"], "built-in");
    // FERRY_CONFIG wins over the XDG place, --config over FERRY_CONFIG.
    let other = home.path().join("other.toml");
    std::fs::write(&other, format!("[hosts.\"{}\"]\nparallel = 5\n", server.addr)).unwrap();
    let (ok, out, err) = cp(&[("FERRY_CONFIG", &other)], &[]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["settings"]["parallel"]["value"], 5);
    let third = home.path().join("third.toml");
    std::fs::write(&third, "[hosts.\"127.0.0.1\"]\ntcp_buffer = \"1M\"\n").unwrap();
    let (ok, out, err) = cp(&[("FERRY_CONFIG", &other)], &["--config", third.to_str().unwrap()]);
    assert!(ok, "{err}");
    let s = json(&out)["settings"].clone();
    assert_eq!(
        (s["tcp_buffer"]["value"].as_u64(), s["tcp_buffer"]["from"].as_str()),
        (Some(1 << 20), Some("config [hosts.\"127.0.0.1\"]"))
    );
    assert_eq!(s["parallel"]["from"], "built-in");
    // A named file that is missing or wrong is an error that says so.
    let (ok, _, err) = cp(&[], &["--config", home.path().join("missing.toml").to_str().unwrap()]);
    assert!(!ok && err.contains("missing.toml"), "{err}");
    std::fs::write(&third, "[defaults]\nparallel = 100\n").unwrap();
    let (ok, _, err) = cp(&[], &["--config", third.to_str().unwrap()]);
    assert!(!ok && err.contains("parallel must be 1 to 64"), "{err}");
    assert!(std::fs::read(&dest).is_ok());
}

#[test]
fn tune_against_the_globus_server() {
    let globus = GlobusServer::start();
    let home = tempfile::tempdir().unwrap();
    let src = home.path().join("g.bin");
    random_file(&src, 6 << 20, 11);
    globus.put("g.bin", &src);
    let (ok, out, err) = run(
        &[
            "tune",
            &globus.url("g.bin"),
            "--bytes",
            "4M",
            "--streams",
            "1,2,4",
            "--tcp-bs",
            "auto,4M",
            "--max-trials",
            "4",
            "--pause",
            "0",
            "--json",
        ],
        home.path(),
    );
    assert!(ok, "{err}");
    let v = json(&out);
    let trials = v["result"]["trials"].as_array().unwrap();
    assert!(!trials.is_empty() && trials.len() <= 4, "{v}");
    assert!(trials.iter().all(|t| t["error"].is_null()), "{v}");
    // Partial retrieves (ERET P 0 4M) of a 6 MiB file: exactly 4 MiB each.
    for t in v["trials"].as_array().unwrap() {
        assert_eq!(t["measurement"]["bytes"], 4 << 20, "{t}");
        assert_eq!(t["measurement"]["partial"], true);
    }
    assert!(v["recommendation"].as_str().unwrap().contains("Recommended for 127.0.0.1:"));
    // probe with the file: RTT and rate, no memory paths needed.
    let (ok, out, err) = run(&["probe", &globus.url("g.bin"), "--bytes", "2M", "--json"], home.path());
    assert!(ok, "{err}");
    assert_eq!(json(&out)["rate_source"], "file");
}
