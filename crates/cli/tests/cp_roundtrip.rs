//! `ferry cp` round trips against Ferry's own server and against pure-ftpd
//! (a standard FTP server from Debian): 0 B, 1 B, 1 MiB + 1 and 256 MiB of
//! random data, byte-identical at every hop.

mod support;
use support::*;

const SIZES: [u64; 4] = [0, 1, (1 << 20) + 1, 256 << 20];

fn round_trip(upload_url: impl Fn(&str) -> String, stored: impl Fn(&str) -> Option<std::path::PathBuf>) {
    let local = tempfile::tempdir().unwrap();
    for (i, size) in SIZES.iter().enumerate() {
        let name = format!("file-{size}.bin");
        let src = local.path().join(&name);
        random_file(&src, *size, i as u64 + 7);
        let url = upload_url(&name);
        let (ok, _, err) = ferry(&["cp", "-q", src.to_str().unwrap(), &url]);
        assert!(ok, "upload of {size} bytes failed: {err}");
        if let Some(p) = stored(&name) {
            assert_eq!(sha256_file(&p), sha256_file(&src), "stored copy of {size} bytes differs");
        }
        let back = local.path().join(format!("back-{name}"));
        let (ok, _, err) = ferry(&["cp", "-q", &url, back.to_str().unwrap()]);
        assert!(ok, "download of {size} bytes failed: {err}");
        assert_eq!(sha256_file(&back), sha256_file(&src), "downloaded copy of {size} bytes differs");
        assert_eq!(std::fs::metadata(&back).unwrap().len(), *size);
    }
}

#[test]
fn against_ferry() {
    let server = FerryServer::start();
    round_trip(|name| server.url(ALICE, &format!("/{name}")), |name| Some(server.path(name)));
    // Nothing but the final files is left in the served directory.
    let mut names: Vec<_> =
        std::fs::read_dir(server.root.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names.len(), SIZES.len(), "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("file-")), "{names:?}");
}

#[test]
fn against_pure_ftpd() {
    let pure = PureFtpd::start();
    round_trip(|name| pure.url(&format!("/{name}")), |name| Some(pure.home.path().join(name)));
}

#[test]
fn recursive_tree_against_ferry_and_pure_ftpd() {
    let server = FerryServer::start();
    let pure = PureFtpd::start();
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    random_file(&tree.join("a.bin"), 1000, 1);
    random_file(&tree.join("sub dir/b.bin"), 70_000, 2);
    random_file(&tree.join("sub dir/deeper/ç.bin"), 0, 3);
    std::fs::create_dir_all(tree.join("empty")).unwrap();
    // `tree/`: the contents (rsync's and globus-url-copy's rule).
    let contents = format!("{}/", tree.display());
    for base in [server.url(ALICE, "/tree"), pure.url("/tree")] {
        let (ok, _, err) = ferry(&["cp", "-q", "-r", &contents, &base]);
        assert!(ok, "upload to {base}: {err}");
        let back = local.path().join(format!("back-{}", base.len()));
        let (ok, _, err) = ferry(&["cp", "-q", "-r", &format!("{base}/"), back.to_str().unwrap()]);
        assert!(ok, "download from {base}: {err}");
        assert_eq!(tree_digest(&back), tree_digest(&tree));
    }
    // Server-to-server (stream mode, the destination listens).
    let (ok, _, err) = ferry(&["cp", "-q", "-r", &pure.url("/tree/"), &server.url(ALICE, "/from-pure")]);
    assert!(ok, "third-party pure-ftpd -> ferry: {err}");
    assert_eq!(tree_digest(&server.path("from-pure")), tree_digest(&tree));
}

#[test]
fn failures_exit_non_zero_with_a_clear_message() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("x");
    let (ok, _, err) = ferry(&["cp", "-q", &server.anon_url("/missing.bin"), dst.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("no such file"), "{err}");
    let (ok, _, err) = ferry(&["cp", "-q", "/etc/hostname", &server.url(BOB, "/x")]);
    assert!(!ok);
    assert!(err.contains("550") && err.contains("read-only"), "{err}");
    let (ok, _, err) = ferry(&["cp", "-q", "/etc/hostname", &server.url((ALICE.0, "wrong"), "/x")]);
    assert!(!ok);
    assert!(err.contains("login as alice failed") && err.contains("530"), "{err}");
    let (ok, _, err) = ferry(&["cp", "-q", local.path().to_str().unwrap(), &server.url(ALICE, "/d")]);
    assert!(!ok);
    assert!(err.contains("use -r"), "{err}");
    let port = free_port();
    let (ok, _, err) = ferry(&["cp", "-q", &format!("ftp://127.0.0.1:{port}/x"), dst.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("cannot connect"), "{err}");
    assert!(!dst.exists(), "no partial file under the final name");
}

#[test]
fn json_output_and_ls_mkdir_rm() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("s.bin");
    random_file(&src, 12345, 9);
    let (ok, out, err) = ferry(&["mkdir", &server.url(ALICE, "/newdir")]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = ferry(&["cp", "--json", src.to_str().unwrap(), &server.url(ALICE, "/newdir/")]);
    assert!(ok, "{err}");
    assert!(out.contains("\"bytes\":12345") && out.contains("\"files\":1"), "{out}");
    let (ok, out, _) = ferry(&["ls", "--json", &server.url(ALICE, "/newdir")]);
    assert!(ok);
    assert!(out.contains("\"name\":\"s.bin\"") && out.contains("\"size\":12345"), "{out}");
    let (ok, _, err) = ferry(&["rm", &server.url(ALICE, "/newdir")]);
    assert!(!ok && err.contains("not empty"), "{err}");
    let (ok, _, err) = ferry(&["rm", "-r", &server.url(ALICE, "/newdir")]);
    assert!(ok, "{err}");
    assert!(!server.path("newdir").exists());
}

#[test]
fn directory_copies_are_pipelined_over_cached_channels() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("many");
    for i in 0..40 {
        random_file(&tree.join(format!("f{i:02}")), 1000 + i * 5000, i);
    }
    let contents = format!("{}/", tree.display());
    // One session (the default picks two for 40 files, each with its own
    // channels): every file after the first reuses the channel. Per-file
    // lines both ways: a streamed batch (docs/batch.md) would be one
    // transfer for the 40 files, which this test does not count.
    let no_stream = || {
        let mut c = std::process::Command::new(ferry_bin());
        c.env("FERRY_STATE_DIR", state_dir())
            .env("FERRY_PATH_CACHE", state_dir().join("path-rates.json"))
            .env("FERRY_NO_STREAM_BATCH", "1");
        c
    };
    let (ok, _, err) = ferry_with(
        &["cp", "-q", "-r", "-p", "2", "-cc", "1", &contents, &server.url(ALICE, "/many")],
        &mut no_stream(),
    );
    assert!(ok, "{err}");
    assert_eq!(tree_digest(&server.path("many")), tree_digest(&tree));
    let back = local.path().join("back");
    let (ok, _, err) = ferry_with(
        &["cp", "-q", "-r", "-p", "2", "-cc", "1", &server.url(ALICE, "/many/"), back.to_str().unwrap()],
        &mut no_stream(),
    );
    assert!(ok, "{err}");
    assert_eq!(tree_digest(&back), tree_digest(&tree));
    for dir in ["receive", "send"] {
        let lines: Vec<serde_json::Value> = server
            .log_text()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["fields"]["message"] == "transfer finished" && v["fields"]["direction"] == dir)
            .filter(|v| v["fields"]["status"] == "complete")
            .map(|v| v["fields"].clone())
            .collect();
        assert_eq!(lines.len(), 40, "{dir}");
        // Commands arrived while earlier transfers ran (pipelining), and
        // after the first file the MODE E channel was reused (125).
        assert!(lines.iter().any(|l| l["queued"].as_u64().unwrap_or(0) > 0), "{dir}: nothing was pipelined");
        assert_eq!(lines.iter().filter(|l| l["reused"] == true).count(), 39, "{dir}");
    }
    // With pipelining off, nothing is queued.
    let (ok, _, err) = ferry(&["cp", "-q", "-r", "--pipeline", "1", &contents, &server.url(ALICE, "/single")]);
    assert!(ok, "{err}");
    let queued: u64 = server.transfers("/single/f05").iter().map(|l| l["queued"].as_u64().unwrap_or(0)).sum();
    assert_eq!(queued, 0);
}

#[test]
fn downloads_to_dev_null_in_both_modes() {
    let server = FerryServer::start();
    random_file(&server.path("n.bin"), 3 << 20, 77);
    for mode in ["stream", "extended"] {
        let (ok, out, err) =
            ferry(&["cp", "--json", "--mode", mode, "-p", "2", &server.url(ALICE, "/n.bin"), "/dev/null"]);
        assert!(ok, "{mode}: {err}");
        assert!(out.contains("\"bytes\":3145728"), "{mode}: {out}");
    }
}

#[test]
fn memory_paths_are_off_by_default_and_serve_zero_and_null_when_on() {
    let plain = FerryServer::start();
    let (ok, _, err) = ferry(&["cp", "-q", &plain.anon_url("/dev/zero"), "/dev/null"]);
    assert!(!ok && err.contains("no such file"), "{err}");

    let server = FerryServer::start_with(&["--anonymous", "read", "--memory-paths", "--memory-zero-size", "96M"]);
    for args in [&["-p", "1"][..], &["-p", "4"], &["--mode", "stream"]] {
        let mut a = vec!["cp", "--json"];
        a.extend(args.iter());
        let src = server.anon_url("/dev/zero");
        a.extend([src.as_str(), "/dev/null"]);
        let (ok, out, err) = ferry(&a);
        assert!(ok, "{args:?}: {err}");
        assert!(out.contains("\"bytes\":100663296"), "{args:?}: {out}");
    }
    // The zeros are zeros, into a real file too.
    let local = tempfile::tempdir().unwrap();
    let out = local.path().join("z");
    let (ok, _, err) = ferry(&["cp", "-q", "-p", "2", &server.anon_url("/dev/zero"), out.to_str().unwrap()]);
    assert!(ok, "{err}");
    let got = std::fs::read(&out).unwrap();
    assert_eq!(got.len(), 96 << 20);
    assert!(got.iter().all(|b| *b == 0));
    // Uploads to /dev/null are discarded (a user with write access).
    let src = local.path().join("up.bin");
    random_file(&src, 5 << 20, 3);
    for mode in ["stream", "extended"] {
        let (ok, _, err) = ferry(&["cp", "-q", "--mode", mode, src.to_str().unwrap(), &server.url(ALICE, "/dev/null")]);
        assert!(ok, "{mode}: {err}");
    }
    assert!(!server.path("dev").exists(), "nothing was written under the root");
}

#[test]
fn staged_data_path_on_both_ends() {
    for server_staging in ["4M", "auto"] {
        let server = FerryServer::start_with(&["--anonymous", "read", "--staging", server_staging]);
        let local = tempfile::tempdir().unwrap();
        let src = local.path().join("s.bin");
        random_file(&src, (13 << 20) + 11, 5);
        let (ok, _, err) =
            ferry(&["cp", "-q", "-p", "3", "--staging", "2M", src.to_str().unwrap(), &server.url(ALICE, "/s.bin")]);
        assert!(ok, "{err}");
        assert_eq!(sha256_file(&server.path("s.bin")), sha256_file(&src));
        let back = local.path().join("back.bin");
        let (ok, _, err) =
            ferry(&["cp", "-q", "-p", "3", "--staging", "3M", &server.url(ALICE, "/s.bin"), back.to_str().unwrap()]);
        assert!(ok, "{err}");
        assert_eq!(sha256_file(&back), sha256_file(&src));
    }
}
