//! gfal2 (gfal-copy, gfal-sum, gfal-ls) against `ferry serve`: download,
//! upload, third-party copies with Ferry and Globus at either end, and the
//! ADLER32 checksum gfal computes remotely.

mod support;
use support::*;

#[test]
fn gfal_copy_sum_and_ls() {
    let ferry_srv = FerryServer::start_with(&["--anonymous", "write"]);
    let globus = GlobusServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (7 << 20) + 5, 31);
    let want = sha256_file(&src);
    std::fs::copy(&src, ferry_srv.path("f.bin")).unwrap();
    globus.put("f.bin", &src);
    let file_url = |p: &std::path::Path| format!("file://{}", p.display());

    // Download and upload (gfal2 uses delayed passive: OPTS PASV
    // AllowDelayed=1, then 127 before 150).
    let out = local.path().join("down.bin");
    let (ok, t) = gfal("gfal-copy", &[&ferry_srv.anon_url("/f.bin"), &file_url(&out)]);
    assert!(ok, "{t}");
    assert_eq!(sha256_file(&out), want);
    let (ok, t) = gfal("gfal-copy", &[&file_url(&src), &ferry_srv.anon_url("/up.bin")]);
    assert!(ok, "{t}");
    assert_eq!(sha256_file(&ferry_srv.path("up.bin")), want);
    // Third party, in every pairing.
    for (from, to, check) in [
        (ferry_srv.anon_url("/f.bin"), ferry_srv.anon_url("/3rd-ff.bin"), ferry_srv.path("3rd-ff.bin")),
        (globus.url("f.bin"), ferry_srv.anon_url("/3rd-gf.bin"), ferry_srv.path("3rd-gf.bin")),
        (ferry_srv.anon_url("/f.bin"), globus.url("3rd-fg.bin"), globus.path("3rd-fg.bin")),
    ] {
        let (ok, t) = gfal("gfal-copy", &[&from, &to]);
        assert!(ok, "{from} -> {to}: {t}");
        assert_eq!(sha256_file(&check), want, "{from} -> {to}");
    }
    // gfal-sum ADLER32 equals zlib's and the Globus server's.
    let (ok, ours) = gfal("gfal-sum", &[&ferry_srv.anon_url("/f.bin"), "ADLER32"]);
    assert!(ok, "{ours}");
    let (ok, theirs) = gfal("gfal-sum", &[&globus.url("f.bin"), "ADLER32"]);
    assert!(ok, "{theirs}");
    let py = std::process::Command::new(require("python3"))
        .args(["-c", "import sys,zlib;print('%08x' % zlib.adler32(open(sys.argv[1],'rb').read()))"])
        .arg(&src)
        .output()
        .unwrap();
    let zlib = String::from_utf8_lossy(&py.stdout).trim().to_string();
    assert_eq!(ours.split_whitespace().last(), Some(zlib.as_str()), "{ours}");
    assert_eq!(theirs.split_whitespace().last(), Some(zlib.as_str()), "{theirs}");
    // A missing file is reported as such (gfal maps the reply text).
    let (ok, t) = gfal("gfal-copy", &[&ferry_srv.anon_url("/missing.bin"), &file_url(&local.path().join("m"))]);
    assert!(!ok);
    assert!(t.contains("No such file"), "{t}");
    let (ok, t) = gfal("gfal-ls", &["-l", &ferry_srv.anon_url("/")]);
    assert!(ok && t.contains("f.bin") && t.contains("up.bin"), "{t}");
}
