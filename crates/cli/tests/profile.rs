//! `ferry profile` and `SITE PROFILE` end to end: both halves of the
//! samples, the memory/disk variants and the bottleneck statement, the
//! permission, and a Globus server (client half only).

mod support;

use std::path::Path;
use support::*;

fn report(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("report.json")).expect("report.json");
    serde_json::from_str(&text).expect("valid JSON")
}

fn has_samples(host: &serde_json::Value) -> bool {
    host["samples"].as_array().is_some_and(|s| !s.is_empty())
}

#[test]
fn a_download_profile_has_both_ends_every_variant_and_a_verdict() {
    // The server caps each transfer at 24 MB/s so every variant lasts about
    // two seconds on any machine: a verdict needs at least a second of
    // samples, and on a quiet machine 48 MiB over loopback takes 0.08 s
    // (the verdict is then, rightly, "inconclusive" with fewer candidates).
    let server = FerryServer::start_with(&["--memory-paths", "--max-transfer-rate", "24M"]);
    random_file(&server.path("big.bin"), 48 << 20, 1);
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("big.bin");
    let url = server.url(CAROL, "/big.bin");
    let (ok, stdout, err) = ferry(&[
        "profile",
        "--compare-memory",
        "--interval-ms",
        "100",
        "-p",
        "2",
        "--out",
        out.path().to_str().unwrap(),
        &url,
        dst.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&dst), sha256_file(&server.path("big.bin")));
    assert!(stdout.contains("Verdict:"), "{stdout}");
    let r = report(out.path());
    let profile = &r["profile"];
    assert!(has_samples(&profile["client"]), "client samples");
    assert!(has_samples(&profile["server"]), "server samples");
    // Both ends sampled every variant for its whole duration (issue 14:
    // the samplers used to stop with the profiled copy).
    let transfers = profile["transfers"].as_array().expect("transfers");
    assert_eq!(transfers.len(), 4, "the copy and three variants");
    let end_ms = |t: &serde_json::Value| {
        t["start_unix_ms"].as_f64().unwrap()
            + 1000.0 * t["samples"].as_array().unwrap().last().unwrap()["t"].as_f64().unwrap()
    };
    let last_end = transfers.iter().map(end_ms).fold(0.0, f64::max);
    for side in ["client", "server"] {
        let h = &profile[side];
        let last = h["samples"].as_array().unwrap().last().unwrap()["t"].as_f64().unwrap();
        let sampled_until = h["start_unix_ms"].as_f64().unwrap() + 1000.0 * last;
        assert!(
            sampled_until >= last_end,
            "{side} stopped sampling at {sampled_until}, the last variant ended at {last_end}"
        );
    }
    // Every window was judged, and the profiled copy has a verdict with its evidence.
    let a = &r["analysis"];
    assert!(a["verdict"]["name"].is_string(), "{}", a["verdict"]);
    assert!(a["verdict"]["candidates"].as_array().is_some_and(|c| c.len() >= 8), "{}", a["verdict"]);
    assert!(a["transfers"].as_array().unwrap().iter().all(|t| t["limit"].is_string()));
    // The server followed its data connections (two streams).
    let streams = profile["server"]["streams"].as_array().expect("server streams");
    assert!(streams.len() >= 2, "{streams:?}");
    let c = &profile["comparison"];
    for k in ["memory_to_memory", "disk_to_memory", "memory_to_disk", "disk_to_disk"] {
        assert!(c[k].as_f64().is_some_and(|v| v > 0.0), "{k}: {c}");
    }
    assert_eq!(profile["meta"]["settings"]["parallel_streams"], 2);
    let html = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    assert!(html.contains("<svg"), "the report has plots");
    // The memory-to-disk variant cleaned up after itself.
    let left: Vec<_> = std::fs::read_dir(out.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 3, "{left:?}");
}

#[test]
fn an_upload_profile_compares_with_the_servers_memory_paths() {
    let server = FerryServer::start_with(&["--memory-paths"]);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("up.bin");
    random_file(&src, 24 << 20, 2);
    let out = tempfile::tempdir().unwrap();
    let url = server.url(CAROL, "/up.bin");
    let dir = out.path().to_str().unwrap();
    let (ok, _, err) = ferry(&["profile", "--compare-memory", "--out", dir, src.to_str().unwrap(), &url]);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&server.path("up.bin")), sha256_file(&src));
    let r = report(out.path());
    assert_eq!(r["profile"]["comparison"]["reader"], "client");
    assert!(r["profile"]["comparison"]["memory_to_disk"].as_f64().is_some());
    assert!(!server.path("up.bin.ferry-profile").exists(), "the scratch file was removed");
}

#[test]
fn without_the_permission_the_report_has_the_client_half_and_says_why() {
    let server = FerryServer::start();
    random_file(&server.path("f"), 4 << 20, 3);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let (ok, _, err) = ferry(&["profile", "--out", dir, &server.url(ALICE, "/f")]);
    assert!(ok, "{err}");
    let p = &report(out.path())["profile"];
    assert!(has_samples(&p["client"]));
    assert!(p["server"].is_null());
    let note = p["meta"]["settings"]["extra"]["note1"].as_str().unwrap_or_default();
    assert!(note.contains("550") && note.contains("permission"), "{note}");
}

#[test]
fn site_profile_replies() {
    let server = FerryServer::start();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("SITE PROFILE START").starts_with("550"), "alice may not profile");
    let mut c = RawControl::connect(server.addr);
    c.login(CAROL);
    assert!(c.cmd("SITE PROFILE STOP").starts_with("503"));
    assert!(c.cmd("SITE PROFILE START 5").starts_with("501"));
    assert!(c.cmd("SITE PROFILE START 100").starts_with("200"));
    assert!(c.cmd("SITE PROFILE START").starts_with("503"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let stop = c.cmd("SITE PROFILE STOP");
    assert!(stop.starts_with("250-Profile follows"), "{}", &stop[..stop.len().min(200)]);
    assert!(stop.contains("\"samples\""));
    // The session goes on.
    assert!(c.cmd("NOOP").starts_with("200"));
}

#[test]
fn against_globus_the_profile_has_the_client_half() {
    let globus = GlobusServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("g.bin");
    random_file(&src, 8 << 20, 4);
    globus.put("g.bin", &src);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let (ok, stdout, err) = ferry(&["profile", "-p", "2", "--out", dir, &globus.url("g.bin")]);
    assert!(ok, "{err}");
    assert!(stdout.contains("client"), "{stdout}");
    let p = &report(out.path())["profile"];
    assert!(has_samples(&p["client"]));
    assert!(p["server"].is_null());
}
