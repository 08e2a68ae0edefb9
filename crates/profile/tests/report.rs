//! The report renders: HTML in headless Chromium (screenshot), JSON with
//! exactly the documented fields, and the terminal summary's tables.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferry_profile::ReportDocument;
use serde_json::Value;

/// Every key path of a JSON value: objects add `.key`, arrays add `[]`.
/// Keys under a path listed in `maps` are free-form and not descended into.
fn key_paths(v: &Value, prefix: &str, maps: &BTreeSet<String>, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                out.insert(p.clone());
                if !maps.contains(&p) {
                    key_paths(child, &p, maps, out);
                }
            }
        }
        Value::Array(a) => {
            for child in a {
                key_paths(child, &format!("{prefix}[]"), maps, out);
            }
        }
        _ => {}
    }
}

/// Expands `a.{x,y}.b` into `a.x.b` and `a.y.b` (one level of braces per
/// group, any number of groups).
fn expand(pattern: &str) -> Vec<String> {
    let Some(open) = pattern.find('{') else { return vec![pattern.to_string()] };
    let close = open + pattern[open..].find('}').expect("unbalanced brace in docs/profiler.md");
    pattern[open + 1..close]
        .split(',')
        .flat_map(|alt| expand(&format!("{}{}{}", &pattern[..open], alt.trim(), &pattern[close + 1..])))
        .collect()
}

/// The field table of docs/profiler.md's "report.json" section: rows
/// `| `path` | type | meaning |`.
fn documented_fields() -> (BTreeSet<String>, BTreeSet<String>) {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/profiler.md");
    let text = std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("cannot read {}: {e}", doc.display()));
    let section =
        text.split("\n### report.json\n").nth(1).expect("docs/profiler.md has no \"### report.json\" section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let section = section.split("\n### ").next().unwrap_or(section);
    let mut fields = BTreeSet::new();
    let mut maps = BTreeSet::new();
    for line in section.lines() {
        let Some(rest) = line.strip_prefix("| `") else { continue };
        let Some((path, rest)) = rest.split_once('`') else { continue };
        let ty = rest.trim_start_matches(' ').trim_start_matches('|').split('|').next().unwrap_or("").trim();
        for p in expand(path) {
            if ty == "map" {
                maps.insert(p.clone());
            }
            fields.insert(p);
        }
    }
    assert!(fields.len() > 100, "docs/profiler.md lists only {} fields; is the table format intact?", fields.len());
    (fields, maps)
}

#[test]
fn json_fields_match_the_documentation() {
    let profile = support::synthetic_profile();
    let json = profile.to_json().unwrap();
    let value: Value = serde_json::from_str(&json).unwrap();
    let (documented, maps) = documented_fields();
    let mut actual = BTreeSet::new();
    key_paths(&value, "", &maps, &mut actual);
    let undocumented: Vec<_> = actual.difference(&documented).collect();
    let missing: Vec<_> = documented.difference(&actual).collect();
    assert!(
        undocumented.is_empty() && missing.is_empty(),
        "docs/profiler.md and report.json disagree.\nIn the JSON but not documented:\n  {}\nDocumented but not in the JSON:\n  {}",
        undocumented.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  "),
        missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
    );
}

#[test]
fn json_round_trips() {
    let profile = support::synthetic_profile();
    let dir = tempfile::tempdir().unwrap();
    let files = profile.write_report(dir.path()).unwrap();
    let doc = ReportDocument::read(&files.json).unwrap();
    assert_eq!(doc.schema, ferry_profile::SCHEMA);
    // serde_json may parse a float one unit in the last place off, so
    // compare as JSON values with a relative tolerance.
    let back = serde_json::to_value(&doc).unwrap();
    let original = serde_json::to_value(profile.to_document()).unwrap();
    assert_close(&back, &original, "");
}

fn assert_close(a: &Value, b: &Value, path: &str) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-12 * x.abs().max(y.abs()), "{path}: {x} != {y}");
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{path}: lengths differ");
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                assert_close(p, q, &format!("{path}[{i}]"));
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>(), "{path}: keys differ");
            for (k, p) in x {
                assert_close(p, &y[k], &format!("{path}.{k}"));
            }
        }
        _ => assert_eq!(a, b, "{path}"),
    }
}

#[test]
fn analysis_names_the_bottleneck_and_the_symptoms() {
    let a = support::synthetic_profile().analyze();
    let b = a.comparison.as_ref().unwrap();
    assert!(b.statement.starts_with("Of the variants, disk reads on the server (disk to memory)"), "{}", b.statement);
    // The samples agree: the server's threads wait for its disk while it reads as much as it sends.
    let v = a.verdict.as_ref().unwrap();
    assert!(v.conclusive, "{v:#?}");
    assert_eq!((v.limit, v.side), (Some(ferry_profile::LimitKind::DiskRead), Some(ferry_profile::Side::Server)));
    assert!(v.runner_up.is_some());
    // Every FTPProfiler table says how it bears on the verdict.
    let tables: Vec<_> = a.table_notes.iter().map(|n| n.table.as_str()).collect();
    for t in [
        "peak load and CPU",
        "I/O transactions per second",
        "packets per second",
        "module shares (perf)",
        "memory-to-memory vs disk-to-disk",
    ] {
        assert!(tables.contains(&t), "no note for {t}: {tables:?}");
    }
    let kinds: Vec<_> = a.hints.iter().map(|h| h.kind).collect();
    use ferry_profile::HintKind::*;
    for k in [
        CoreKernelBound,
        ReceiverWindowLimited,
        SendBufferLimited,
        ApplicationLimited,
        CongestionWindowLimited,
        DirtyPages,
        PerfHotspot,
    ] {
        assert!(kinds.contains(&k), "no {k:?} hint in {:#?}", a.hints);
    }
    let server = a.server.as_ref().unwrap();
    assert_eq!(server.busiest_interface.as_deref(), Some("eth0"));
    assert!(
        server.kernel_share_percent > 60.0 && server.kernel_share_percent < 75.0,
        "{}",
        server.kernel_share_percent
    );
}

#[test]
fn terminal_summary_has_the_papers_tables() {
    let text = support::synthetic_profile().to_text();
    for needle in [
        "load average (1 min)",
        "I/O transfers per second",
        "packets received per second",
        "packets transmitted per second",
        "kernel share of busy CPU",
        "Data streams (TCP_INFO)",
        "CPU profile, server",
        "TCP/IP stack",
        "Verdict: The limit is disk reads on the server",
        "Variants: Of the variants",
        "Runner-up:",
        "Tuning sweep",
    ] {
        assert!(text.contains(needle), "summary lacks {needle:?}:\n{text}");
    }
}

#[test]
fn html_is_self_contained() {
    let html = support::synthetic_profile().to_html().unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script"), "the report needs no script");
    for attr in ["src=", "href=", "url("] {
        assert!(!html.contains(attr), "the report must not load anything ({attr})");
    }
    // Throughput, CPU client, CPU server, packets, disk, RTT, cwnd.
    assert_eq!(html.matches("<svg").count(), 7);
    assert!(html.contains("Verdict: disk reads on the server"), "the verdict leads the page");
    assert!(html.contains("Evidence for each candidate limit"));
    assert!(html.contains("How these tables bear on the verdict"));
    // The CPU charts draw the watched Ferry process over the machine's
    // bands (on a shared machine the bands are mostly other programs).
    assert_eq!(html.matches("Ferry, + waiting for a CPU").count(), 2, "one process line per end");
    // Stream legends tell the streams apart by their ports.
    for name in ["server data 1 :50001→:40001", "server data 4 :50004→:40004"] {
        assert!(html.contains(name), "no legend entry {name:?}");
    }
}

fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("FERRY_CHROMIUM") {
        return PathBuf::from(p);
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output() {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !path.is_empty() {
                return PathBuf::from(path);
            }
        }
    }
    panic!(
        "headless Chromium is needed to check that report.html renders, and none was found. \
         Install the Debian package `chromium` (apt-get install -y chromium; scripts/deps.sh does), \
         or point FERRY_CHROMIUM at a Chromium binary."
    );
}

#[test]
fn html_renders_in_headless_chromium() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let files = support::synthetic_profile().write_report(dir.path()).unwrap();
    let shot = dir.path().join("report.png");
    let profile_dir = dir.path().join("chromium-profile");
    let mut child = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1280,2000",
        ])
        .arg(format!("--user-data-dir={}", profile_dir.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", files.html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", browser.display()));
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish the screenshot within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    let png =
        std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}); chromium exited {status}: {stderr}"));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    // A blank 1280×2000 page compresses to a few KiB; plots and tables do not.
    assert!(png.len() > 60_000, "screenshot is only {} bytes: the page rendered (nearly) empty", png.len());
    // Keep a copy for people to look at.
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ferry-profile-report.png");
    let _ = std::fs::copy(&shot, &keep);
    let _ = std::fs::copy(&files.html, keep.with_extension("html"));
}
