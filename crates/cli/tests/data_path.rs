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
