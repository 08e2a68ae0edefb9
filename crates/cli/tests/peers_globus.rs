//! The real Globus programs from Debian against Ferry, and Ferry's client
//! against the real Globus server: globus-url-copy → `ferry serve`,
//! `ferry cp` → globus-gridftp-server, and third-party copies between them
//! driven by both, byte-identical every time.

mod support;
use std::path::{Path, PathBuf};
use support::*;

/// The sizes the issue names: empty, one byte, one MiB and one byte, and
/// 100 MiB of random data.
const SIZES: [(&str, u64); 4] = [("zero", 0), ("one", 1), ("mib1", (1 << 20) + 1), ("m100", 100 << 20)];

/// Writes the sample files into `dir`; returns (name, path, sha256).
fn samples(dir: &Path) -> Vec<(&'static str, PathBuf, String)> {
    SIZES
        .iter()
        .enumerate()
        .map(|(i, (name, size))| {
            let p = dir.join(name);
            random_file(&p, *size, 100 + i as u64);
            let sum = sha256_file(&p);
            (*name, p, sum)
        })
        .collect()
}

fn local_url(p: &Path) -> String {
    format!("file://{}", p.display())
}

#[test]
fn guc_downloads_and_uploads_every_size_and_stream_count() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let files = samples(server.root.path());
    let variants: [&[&str]; 7] =
        [&[], &["-p", "1"], &["-p", "4"], &["-p", "8"], &["-fast"], &["-fast", "-p", "4"], &["-pp", "-p", "4"]];
    for (v, flags) in variants.iter().enumerate() {
        for (name, _, sum) in &files {
            let out = local.path().join(format!("{name}.{v}"));
            let mut args = flags.to_vec();
            let (src, dst) = (server.url(ALICE, &format!("/{name}")), local_url(&out));
            args.extend([src.as_str(), dst.as_str()]);
            let (ok, text) = guc(&args);
            assert!(ok, "download {name} with {flags:?}: {text}");
            assert_eq!(&sha256_file(&out), sum, "download {name} with {flags:?}");

            let up = format!("/up/{v}/{name}");
            let mut args = flags.to_vec();
            let (src, dst) = (local_url(&out), server.url(ALICE, &up));
            args.extend(["-cd", src.as_str(), dst.as_str()]);
            let (ok, text) = guc(&args);
            assert!(ok, "upload {name} with {flags:?}: {text}");
            assert_eq!(&sha256_file(&server.path(&up)), sum, "upload {name} with {flags:?}");
        }
    }
    // Parallel transfers really used parallel streams (the transfer log
    // says MODE E) and plain ones stream mode.
    let modes: Vec<String> = server.transfers("/up/2/m100").iter().map(|t| t["mode"].to_string()).collect();
    assert_eq!(modes, ["\"extended block\""]);
    let modes: Vec<String> = server.transfers("/up/0/m100").iter().map(|t| t["mode"].to_string()).collect();
    assert_eq!(modes, ["\"stream\""]);
}

#[test]
fn guc_listings_and_trees() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = server.path("tree");
    random_file(&tree.join("a.bin"), 1000, 1);
    random_file(&tree.join("sub/b.bin"), 70_000, 2);
    random_file(&tree.join("sub/deeper/empty"), 0, 3);
    random_file(&tree.join("sub/deeper/c"), 3 << 20, 4);
    for fast in [false, true] {
        // -list takes the URL as its value.
        let url = server.url(ALICE, "/tree/");
        let mut args = if fast { vec!["-fast"] } else { vec![] };
        args.extend(["-list", url.as_str()]);
        let (ok, text) = guc(&args);
        assert!(ok, "{text}");
        assert!(text.contains("    a.bin") && text.contains("    sub/"), "{text}");
    }
    let variants: [&[&str]; 3] = [&["-r", "-cd"], &["-r", "-cd", "-pp"], &["-r", "-cd", "-fast", "-p", "4", "-pp"]];
    for (i, flags) in variants.iter().enumerate() {
        let down = local.path().join(format!("down{i}"));
        let mut args = flags.to_vec();
        let (src, dst) = (server.url(ALICE, "/tree/"), format!("{}/", local_url(&down)));
        args.extend([src.as_str(), dst.as_str()]);
        let (ok, text) = guc(&args);
        assert!(ok, "{flags:?}: {text}");
        assert_eq!(tree_digest(&down), tree_digest(&tree), "download {flags:?}");
        let mut args = flags.to_vec();
        let (src, dst) = (format!("{}/", local_url(&down)), server.url(ALICE, &format!("/up{i}/")));
        args.extend([src.as_str(), dst.as_str()]);
        let (ok, text) = guc(&args);
        assert!(ok, "{flags:?}: {text}");
        assert_eq!(tree_digest(&server.path(&format!("up{i}"))), tree_digest(&tree), "upload {flags:?}");
    }
}

/// `-fast` keeps the data channel from file to file; a server with a
/// staging ring (or direct I/O, which implies one) shut it down after each
/// upload, and the second file's data met a broken pipe (session 20).
#[test]
fn guc_trees_keep_their_data_channel_through_a_staging_ring() {
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    for i in 0..12u64 {
        random_file(&tree.join(format!("f{i:02}")), (100 << 10) + i * 4099, 40 + i);
    }
    random_file(&tree.join("sub/big"), (5 << 20) + 3, 60);
    for flags in [&["--staging", "4M"][..], &["--direct-io"][..]] {
        let server = FerryServer::start_with(flags);
        for (i, variant) in
            [&["-r", "-cd", "-fast"][..], &["-r", "-cd", "-fast", "-pp", "-p", "2"][..]].iter().enumerate()
        {
            let (src, dst) = (format!("{}/", local_url(&tree)), server.url(ALICE, &format!("/up{i}/")));
            let mut args = variant.to_vec();
            args.extend([src.as_str(), dst.as_str()]);
            let (ok, text) = guc(&args);
            assert!(ok, "{flags:?} upload {variant:?}: {text}");
            assert_eq!(
                tree_digest(&server.path(&format!("up{i}"))),
                tree_digest(&tree),
                "{flags:?} upload {variant:?}"
            );
            let down = local.path().join(format!("down-{}-{i}", flags.len()));
            let (src, dst) = (server.url(ALICE, &format!("/up{i}/")), format!("{}/", local_url(&down)));
            let mut args = variant.to_vec();
            args.extend([src.as_str(), dst.as_str()]);
            let (ok, text) = guc(&args);
            assert!(ok, "{flags:?} download {variant:?}: {text}");
            assert_eq!(tree_digest(&down), tree_digest(&tree), "{flags:?} download {variant:?}");
        }
    }
}

#[test]
fn guc_partial_transfers_checksums_and_buffers_match_globus() {
    let ferry = FerryServer::start();
    let globus = GlobusServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (5 << 20) + 3, 7);
    std::fs::copy(&src, ferry.path("f.bin")).unwrap();
    globus.put("f.bin", &src);
    // -off/-len (ERET P off len): whatever globus-url-copy writes from the
    // Globus server, it must write the same from Ferry.
    for flags in
        [&["-off", "1000", "-len", "5000"][..], &["-p", "4", "-off", "1000", "-len", "3000000"], &["-off", "4000000"]]
    {
        let mut outs = Vec::new();
        for (which, url) in [("globus", globus.url("f.bin")), ("ferry", ferry.url(ALICE, "/f.bin"))] {
            let out = local.path().join(format!("part-{which}-{}", flags.len()));
            let mut args = flags.to_vec();
            let dst = local_url(&out);
            args.extend([url.as_str(), dst.as_str()]);
            let (ok, text) = guc(&args);
            assert!(ok, "{which} {flags:?}: {text}");
            outs.push(std::fs::read(&out).unwrap());
        }
        assert!(outs[0] == outs[1], "{flags:?}: Ferry and Globus results differ");
    }
    // -verify-checksum (CKSM MD5 at both ends) and -tcp-bs (SITE
    // RETRBUFSIZE/STORBUFSIZE) in both directions.
    for flags in [&["-verify-checksum"][..], &["-verify-checksum", "-p", "4"], &["-tcp-bs", "4194304", "-p", "4"]] {
        let out = local.path().join("v.bin");
        let _ = std::fs::remove_file(&out);
        let mut args = flags.to_vec();
        let (s, d) = (ferry.url(ALICE, "/f.bin"), local_url(&out));
        args.extend([s.as_str(), d.as_str()]);
        let (ok, text) = guc(&args);
        assert!(ok, "download {flags:?}: {text}");
        assert_eq!(sha256_file(&out), sha256_file(&src));
        let mut args = flags.to_vec();
        let (s, d) = (local_url(&src), ferry.url(ALICE, "/v-up.bin"));
        args.extend([s.as_str(), d.as_str()]);
        let (ok, text) = guc(&args);
        assert!(ok, "upload {flags:?}: {text}");
        assert_eq!(sha256_file(&ferry.path("v-up.bin")), sha256_file(&src));
    }
}

#[test]
fn ferry_cp_against_the_globus_server() {
    let globus = GlobusServer::start();
    let local = tempfile::tempdir().unwrap();
    let files = samples(local.path());
    let variants: [&[&str]; 6] = [
        &["--mode", "stream"],
        &["-p", "1"],
        &["-p", "4"],
        &["-p", "8"],
        &["-p", "4", "--tcp-bs", "4M", "--block-size", "256K"],
        &["-p", "2", "--verify"],
    ];
    for (v, flags) in variants.iter().enumerate() {
        for (name, path, sum) in &files {
            let remote = globus.url(&format!("v{v}/{name}"));
            std::fs::create_dir_all(globus.path(&format!("v{v}"))).unwrap();
            chown_nobody(&globus.path(&format!("v{v}")));
            let mut args = vec!["cp", "-q"];
            args.extend(flags.iter());
            let (s, d) = (path.to_str().unwrap(), remote.as_str());
            args.extend([s, d]);
            let (ok, _, err) = ferry(&args);
            assert!(ok, "upload {name} {flags:?}: {err}");
            assert_eq!(&sha256_file(&globus.path(&format!("v{v}/{name}"))), sum, "upload {name} {flags:?}");
            let back = local.path().join(format!("back-{v}-{name}"));
            let mut args = vec!["cp", "-q"];
            args.extend(flags.iter());
            let (s, d) = (remote.as_str(), back.to_str().unwrap());
            args.extend([s, d]);
            let (ok, _, err) = ferry(&args);
            assert!(ok, "download {name} {flags:?}: {err}");
            assert_eq!(&sha256_file(&back), sum, "download {name} {flags:?}");
        }
    }
    // Trees both ways.
    let tree = local.path().join("tree");
    random_file(&tree.join("x/y/z.bin"), 12345, 9);
    random_file(&tree.join("top.bin"), 1 << 20, 10);
    let contents = format!("{}/", tree.display());
    let (ok, _, err) = ferry(&["cp", "-q", "-r", "-p", "2", &contents, &globus.url("tree")]);
    assert!(ok, "{err}");
    assert_eq!(tree_digest(&globus.path("tree")), tree_digest(&tree));
    let back = local.path().join("tree-back");
    let (ok, _, err) = ferry(&["cp", "-q", "-r", "-p", "2", &globus.url("tree/"), back.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(tree_digest(&back), tree_digest(&tree));
}

#[test]
fn third_party_between_globus_and_ferry_driven_by_both_clients() {
    let ferry_srv = FerryServer::start();
    let globus = GlobusServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, 20 << 20, 11);
    let want = sha256_file(&src);
    std::fs::copy(&src, ferry_srv.path("f.bin")).unwrap();
    globus.put("f.bin", &src);
    let tree = local.path().join("tree");
    for i in 0..12 {
        random_file(&tree.join(format!("d{}/f{i}.bin", i % 3)), 10_000 * i + 1, 20 + i);
    }
    let contents = format!("{}/", tree.display());
    let (ok, _, err) = ferry(&["cp", "-q", "-r", &contents, &ferry_srv.url(ALICE, "/tree")]);
    assert!(ok, "{err}");
    let (ok, _, err) = ferry(&["cp", "-q", "-r", &contents, &globus.url("tree")]);
    assert!(ok, "{err}");
    chown_nobody(globus.dir.path());

    // globus-url-copy as the driver: -p 4, and pipelined -pp -r.
    let (ok, t) = guc(&["-p", "4", &globus.url("f.bin"), &ferry_srv.url(ALICE, "/from-globus.bin")]);
    assert!(ok, "{t}");
    assert_eq!(sha256_file(&ferry_srv.path("from-globus.bin")), want);
    let (ok, t) = guc(&["-p", "4", &ferry_srv.url(ALICE, "/f.bin"), &globus.url("from-ferry.bin")]);
    assert!(ok, "{t}");
    assert_eq!(sha256_file(&globus.path("from-ferry.bin")), want);
    let (ok, t) =
        guc(&["-pp", "-r", "-cd", "-p", "2", &globus.url("tree/"), &ferry_srv.url(ALICE, "/pp-from-globus/")]);
    assert!(ok, "{t}");
    assert_eq!(tree_digest(&ferry_srv.path("pp-from-globus")), tree_digest(&tree));
    let (ok, t) = guc(&["-pp", "-r", "-cd", "-p", "2", &ferry_srv.url(ALICE, "/tree/"), &globus.url("pp-from-ferry/")]);
    assert!(ok, "{t}");
    assert_eq!(tree_digest(&globus.path("pp-from-ferry")), tree_digest(&tree));

    // ferry cp as the driver, the same copies.
    let (ok, _, err) =
        ferry(&["cp", "-q", "-p", "4", &globus.url("f.bin"), &ferry_srv.url(ALICE, "/cp-from-globus.bin")]);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&ferry_srv.path("cp-from-globus.bin")), want);
    let (ok, _, err) =
        ferry(&["cp", "-q", "-p", "4", "--verify", &ferry_srv.url(ALICE, "/f.bin"), &globus.url("cp-from-ferry.bin")]);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&globus.path("cp-from-ferry.bin")), want);
    let (ok, _, err) =
        ferry(&["cp", "-q", "-r", "-p", "2", &globus.url("tree/"), &ferry_srv.url(ALICE, "/cp-tree-from-globus")]);
    assert!(ok, "{err}");
    assert_eq!(tree_digest(&ferry_srv.path("cp-tree-from-globus")), tree_digest(&tree));
    let (ok, _, err) =
        ferry(&["cp", "-q", "-r", "-p", "2", &ferry_srv.url(ALICE, "/tree/"), &globus.url("cp-tree-from-ferry")]);
    assert!(ok, "{err}");
    assert_eq!(tree_digest(&globus.path("cp-tree-from-ferry")), tree_digest(&tree));
}

#[test]
fn guc_rst_resumes_a_third_party_copy_into_a_killed_ferry_server() {
    let mut ferry_srv =
        FerryServer::start_with(&["--anonymous", "write", "--max-transfer-rate", "25M", "--marker-interval", "1"]);
    let globus = GlobusServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("big.bin");
    let size = 100u64 << 20;
    random_file(&src, size, 12);
    globus.put("big.bin", &src);
    let dst = ferry_srv.anon_url("/big.bin");
    let guc_cmd = std::process::Command::new(require("globus-url-copy"))
        .args(["-rst", "-rst-retries", "20", "-rst-interval", "1", "-p", "4", &globus.url("big.bin"), &dst])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the destination once a good part has arrived.
    let partial = ferry_srv.partial("big.bin");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::metadata(&partial).map(|m| m.len()).unwrap_or(0) < 30 << 20 {
        assert!(std::time::Instant::now() < deadline, "the copy did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(1200)); // let a 111 marker pass
    ferry_srv.kill_and_restart();
    let out = guc_cmd.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(sha256_file(&ferry_srv.path("big.bin")), sha256_file(&src));
    // The restarted transfer was told what had arrived (REST ranges) and
    // received only the rest.
    let resumed: Vec<_> = ferry_srv.transfers("/big.bin").into_iter().filter(|t| t["restart"] == true).collect();
    assert_eq!(resumed.len(), 1, "{}", ferry_srv.log_text());
    assert_eq!(resumed[0]["status"], "complete");
    let bytes = resumed[0]["bytes"].as_u64().unwrap();
    assert!(bytes < size - (20 << 20), "the resumed transfer moved {bytes} bytes of {size}");
}

/// Sends one command on a raw control connection and returns the reply.
fn cksm(addr: std::net::SocketAddr, user: (&str, &str), alg: &str, path: &str) -> String {
    let mut c = RawControl::connect(addr);
    c.login(user);
    let r = c.cmd(&format!("CKSM {alg} 0 -1 {path}"));
    assert!(r.starts_with("213 "), "{r}");
    r[4..].trim().to_string()
}

fn tool_sum(tool: &str, path: &Path) -> String {
    let out = std::process::Command::new(require(tool)).arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}

#[test]
fn cksm_matches_standard_tools_and_the_globus_server() {
    let ferry_srv = FerryServer::start();
    let globus = GlobusServer::start();
    let local = tempfile::tempdir().unwrap();
    for (i, size) in [0u64, 1, 65536, 3_000_001].into_iter().enumerate() {
        let src = local.path().join(format!("c{i}"));
        random_file(&src, size, 40 + i as u64);
        std::fs::copy(&src, ferry_srv.path(&format!("c{i}"))).unwrap();
        globus.put(&format!("c{i}"), &src);
        let gpath = globus.path(&format!("c{i}")).display().to_string();
        let gaddr: std::net::SocketAddr = format!("127.0.0.1:{}", globus.port).parse().unwrap();
        let anon = ("anonymous", "ferry@");
        let ours = |alg| cksm(ferry_srv.addr, ALICE, alg, &format!("/c{i}"));
        let theirs = |alg| cksm(gaddr, anon, alg, &gpath);
        assert_eq!(ours("MD5"), tool_sum("md5sum", &src));
        assert_eq!(ours("SHA256"), tool_sum("sha256sum", &src));
        let py = std::process::Command::new(require("python3"))
            .args(["-c", "import sys,zlib;print('%08x' % zlib.adler32(open(sys.argv[1],'rb').read()))"])
            .arg(&src)
            .output()
            .unwrap();
        assert_eq!(ours("ADLER32"), String::from_utf8_lossy(&py.stdout).trim());
        for alg in ["MD5", "ADLER32", "SHA1", "SHA256", "SHA512"] {
            assert_eq!(ours(alg), theirs(alg), "{alg} of {size} bytes");
        }
    }
}
