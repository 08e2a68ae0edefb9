//! Data-path options end to end: direct I/O on both sides, staged and
//! synchronous, with files whose sizes are not multiples of a page.

mod support;

use support::*;

/// Whether the file system holding `dir` accepts O_DIRECT (tmpfs does not).
fn has_direct_io(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let p = dir.join(".direct-probe");
    let ok = std::fs::OpenOptions::new().write(true).create(true).custom_flags(libc::O_DIRECT).open(&p).is_ok();
    let _ = std::fs::remove_file(&p);
    ok
}

#[test]
fn direct_io_uploads_and_downloads_match() {
    let server = FerryServer::start_with(&["--direct-io"]);
    let local = tempfile::tempdir().unwrap();
    // Odd sizes: a tail that is not page-aligned, and blocks spread over
    // streams; one file larger than the staging ring.
    for (name, size) in [("a", 5 * (1 << 20) + 12345), ("b", 40 << 20), ("c", 4095)] {
        let src = local.path().join(name);
        random_file(&src, size, size);
        let url = server.url(ALICE, &format!("/{name}"));
        let (ok, _, err) = ferry(&["cp", "-q", "-p", "4", "--direct-io", src.to_str().unwrap(), &url]);
        assert!(ok, "upload {name}: {err}");
        assert_eq!(sha256_file(&server.path(name)), sha256_file(&src), "upload {name}");
        let back = local.path().join(format!("{name}.back"));
        let (ok, _, err) = ferry(&["cp", "-q", "-p", "3", "--direct-io", &url, back.to_str().unwrap()]);
        assert!(ok, "download {name}: {err}");
        assert_eq!(sha256_file(&back), sha256_file(&src), "download {name}");
    }
    if has_direct_io(server.root.path()) {
        assert!(!server.log_text().contains("no direct I/O"), "the server fell back to the page cache");
    }
}

/// A streamed upload's line whose files are all written around the page
/// cache (64 KiB and up, on a disk file system, with the server's
/// `stream_direct`) and start on pages of the line takes a staging ring on
/// a server started without one; a line with a file that starts inside a
/// page, or with small buffered files, does not
/// (`StreamUpload::wants_ring`; docs/data-path.md). The finished line's
/// `staging` field says which. Without `stream_direct` (the default since
/// session 25) the aligned files go through the page cache and take none.
#[test]
fn streamed_lines_of_aligned_direct_files_take_a_ring_by_default() {
    let local = tempfile::tempdir().unwrap();
    let aligned = local.path().join("aligned");
    let odd = local.path().join("odd");
    let mixed = local.path().join("mixed");
    for i in 0..120u64 {
        random_file(&aligned.join(format!("f{i:03}")), (64 << 10) + (i % 4) * 4096, i);
        random_file(&odd.join(format!("f{i:03}")), (64 << 10) + i * 37 + 1, 500 + i);
        let size = if i % 3 == 0 { 64 << 10 } else { 1000 + i * 13 };
        random_file(&mixed.join(format!("f{i:03}")), size, 1000 + i);
    }
    let server = FerryServer::start_with(&["--stream-direct"]);
    for tree in [&aligned, &odd, &mixed] {
        let name = tree.file_name().unwrap().to_str().unwrap();
        let (ok, _, err) =
            ferry(&["cp", "-r", "--concurrency", "1", tree.to_str().unwrap(), &server.url(ALICE, "/up/")]);
        assert!(ok, "{name}: {err}");
        assert_eq!(tree_digest(&server.path(&format!("up/{name}"))), tree_digest(tree), "{name}");
    }
    let lines: Vec<serde_json::Value> = server
        .log_text()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "transfer finished" && v["fields"]["direction"] == "receive")
        .map(|v| v["fields"].clone())
        .collect();
    assert!(lines.iter().all(|l| l["status"] == "complete"), "{lines:?}");
    let staged = |name: &str| -> Vec<Option<u64>> {
        let of_tree = |l: &&serde_json::Value| l["path"].as_str().is_some_and(|p| p.contains(name));
        lines.iter().filter(of_tree).map(|l| l["staging"].as_u64()).collect()
    };
    let (a, o, m) = (staged("aligned"), staged("odd"), staged("mixed"));
    assert!(!a.is_empty() && a.iter().all(|b| *b == Some(4 << 20)), "aligned direct files: {a:?}\n{lines:?}");
    assert!(!o.is_empty() && o.iter().all(|b| *b == Some(0)), "odd sizes: {o:?}");
    assert!(!m.is_empty() && m.iter().all(|b| *b == Some(0)), "small buffered files: {m:?}");
    // The default: through the page cache, so no ring.
    let server = FerryServer::start();
    let (ok, _, err) =
        ferry(&["cp", "-r", "--concurrency", "1", aligned.to_str().unwrap(), &server.url(ALICE, "/up/")]);
    assert!(ok, "{err}");
    let unstaged: Vec<Option<u64>> = server
        .log_text()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "transfer finished" && v["fields"]["direction"] == "receive")
        .map(|v| v["fields"]["staging"].as_u64())
        .collect();
    assert!(!unstaged.is_empty() && unstaged.iter().all(|b| *b == Some(0)), "buffered by default: {unstaged:?}");
}

/// A tree over one session to a server with a staging ring: the lines of
/// a streamed batch follow each other on the session's cached data
/// connection, which the ring must leave open when a line ends. It shut
/// the connection down (its drop aborted the transfer's signal), so the
/// second line met EOF and the copy fell back to files one by one
/// (session 20). Both directions, with a ring and with direct I/O.
#[test]
fn tree_copies_keep_their_cached_connection_through_a_staging_ring() {
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("tree");
    std::fs::create_dir(&src).unwrap();
    // More files than one line's command holds: at least two lines.
    for i in 0..300u64 {
        random_file(&src.join(format!("f{i:03}")), (64 << 10) + i * 37, i);
    }
    // The third: no server ring, but each streamed line of direct files
    // takes its own (`stream_direct`), where session 20 met the bug.
    for flags in [&["--staging", "4M"][..], &["--direct-io"][..], &["--stream-direct"][..]] {
        let server = FerryServer::start_with(flags);
        let url = server.url(ALICE, "/up/");
        let (ok, _, err) = ferry(&["cp", "-r", "--concurrency", "1", src.to_str().unwrap(), &url]);
        assert!(ok, "{flags:?} upload: {err}");
        assert!(!err.contains("one by one"), "{flags:?}: the batch fell back: {err}");
        let lines = server.log_text().matches("a BSTO STREAM line").count();
        assert!(lines >= 2, "{flags:?}: {lines} streamed line(s); the test needs two on one session");
        assert_eq!(tree_digest(&server.path("up/tree")), tree_digest(&src), "{flags:?} upload");
        let back = local.path().join(format!("back-{}", flags[0].trim_start_matches('-')));
        let (ok, _, err) = ferry(&[
            "cp",
            "-r",
            "--concurrency",
            "1",
            "--staging",
            "2M",
            &server.url(ALICE, "/up/tree/"),
            back.to_str().unwrap(),
        ]);
        assert!(ok, "{flags:?} download: {err}");
        assert!(!err.contains("one by one"), "{flags:?}: the download batch fell back: {err}");
        assert_eq!(tree_digest(&back), tree_digest(&src), "{flags:?} download");
        let failed: Vec<String> = server
            .log_text()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["fields"]["message"] == "transfer finished" && v["fields"]["status"] != "complete")
            .map(|v| v["fields"].to_string())
            .collect();
        assert!(failed.is_empty(), "{flags:?}: failed transfers: {failed:?}");
    }
}
