//! rclone (Debian's 1.60, its `ftp` backend) as a client of `ferry serve`:
//! a tree with nested, UTF-8 and spaced names copied up, listed, checked
//! byte for byte (`rclone check --download`), renamed, copied back down and
//! purged; and the same over explicit FTPS with protected data. rclone
//! drives the server its own way — MLSD listings, EPSV, several control
//! connections at once, `MFMT`/`MDTM` for times — so this covers what the
//! other peers do not.

mod support;
use std::path::Path;
use std::process::{Command, Output};
use support::*;

/// rclone with an empty config and the FTP backend pointed at `server`;
/// `extra` adds backend flags (e.g. TLS).
fn rclone(server: &FerryServer, config: &Path, extra: &[&str], args: &[&str]) -> Output {
    let pass = obscured_password();
    let out = Command::new("timeout")
        .arg("120")
        .arg(require("rclone"))
        .arg("--config")
        .arg(config)
        .args(["--ftp-host", &server.addr.ip().to_string()])
        .args(["--ftp-port", &server.addr.port().to_string()])
        .args(["--ftp-user", ALICE.0, "--ftp-pass", pass])
        .args(["--ftp-concurrency", "4", "--low-level-retries", "1", "--retries", "1"])
        .args(extra)
        .args(args)
        .output()
        .unwrap();
    out
}

/// Alice's password in rclone's obscured form, made once per test binary
/// (each `rclone obscure` is a process start).
fn obscured_password() -> &'static str {
    static PASS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PASS.get_or_init(|| {
        let obscured = Command::new(require("rclone")).args(["obscure", ALICE.1]).output().unwrap();
        assert!(obscured.status.success(), "rclone obscure: {}", String::from_utf8_lossy(&obscured.stderr));
        String::from_utf8_lossy(&obscured.stdout).trim().to_string()
    })
}

fn ok(out: &Output, what: &str, server: &FerryServer) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "rclone {what} failed:\n{text}\nserver log:\n{}", server.log_text());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn make_tree(tree: &Path) {
    let files: [(&str, u64); 6] = [
        ("readme.txt", 120),
        ("données/été 2026/φ-data.bin", 3 << 20),
        ("données/été 2026/empty", 0),
        ("with space/a b c.dat", 70_001),
        ("with space/deeper/日本語.bin", 1 << 20),
        ("x/y/z/deep.bin", 4097),
    ];
    for (i, (path, size)) in files.iter().enumerate() {
        random_file(&tree.join(path), *size, 40 + i as u64);
    }
}

/// Up, list, check, rename, down, purge: the daily round of a data manager
/// who uses rclone.
fn round_trip(server: &FerryServer, extra: &[&str]) {
    let local = tempfile::tempdir().unwrap();
    let config = local.path().join("rclone.conf");
    std::fs::write(&config, "").unwrap();
    let tree = local.path().join("tree");
    make_tree(&tree);
    let want = tree_digest(&tree);
    let tree_arg = tree.display().to_string();

    ok(&rclone(server, &config, extra, &["copy", &tree_arg, ":ftp:/up"]), "copy up", server);
    assert_eq!(tree_digest(&server.path("up")), want, "tree on the server");

    // The listing rclone parses (MLSD) has every file with its size.
    let listing = ok(&rclone(server, &config, extra, &["lsl", ":ftp:/up"]), "lsl", server);
    for name in want.keys() {
        assert!(listing.contains(name.as_str()), "{name} missing from rclone's listing:\n{listing}");
    }
    assert!(listing.contains("3145728 "), "sizes in the listing:\n{listing}");
    let size = ok(&rclone(server, &config, extra, &["size", "--json", ":ftp:/up"]), "size", server);
    let size: serde_json::Value = serde_json::from_str(&size).unwrap();
    assert_eq!(size["count"], 6, "{size}");
    assert_eq!(size["bytes"], 120 + (3 << 20) + 70_001 + (1 << 20) + 4097, "{size}");

    // A byte-for-byte comparison through fresh downloads.
    ok(&rclone(server, &config, extra, &["check", "--download", &tree_arg, ":ftp:/up"]), "check", server);
    // A changed file on the server is found.
    random_file(&server.path("up/x/y/z/deep.bin"), 4097, 999);
    let out = rclone(server, &config, extra, &["check", "--download", &tree_arg, ":ftp:/up"]);
    assert!(!out.status.success(), "check missed a changed file");
    random_file(&server.path("up/x/y/z/deep.bin"), 4097, 40 + 5);

    // Rename (RNFR/RNTO) and copy back down.
    ok(&rclone(server, &config, extra, &["moveto", ":ftp:/up/readme.txt", ":ftp:/up/README"]), "moveto", server);
    assert!(server.path("up/README").is_file() && !server.path("up/readme.txt").exists());
    let back = local.path().join("back");
    ok(&rclone(server, &config, extra, &["copy", ":ftp:/up", &back.display().to_string()]), "copy down", server);
    let mut renamed = want.clone();
    let readme = renamed.remove("readme.txt").unwrap();
    renamed.insert("README".into(), readme);
    assert_eq!(tree_digest(&back), renamed, "tree copied back");

    // Purge removes the whole tree.
    ok(&rclone(server, &config, extra, &["purge", ":ftp:/up"]), "purge", server);
    assert!(!server.path("up").exists(), "purge left the tree on the server");
}

#[test]
fn rclone_copies_checks_renames_and_purges_a_tree() {
    let server = FerryServer::start();
    round_trip(&server, &[]);
}

#[test]
fn rclone_over_explicit_ftps_with_protected_data() {
    let pki = TestPki::new();
    let mut flags = pki.serve_flags();
    flags.extend(["--require-tls", "--require-protected-data"].map(String::from));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = FerryServer::start_with(&flags);
    // rclone 1.60 has no option for a CA file; the certificate itself is
    // tested by the curl and ftplib TLS tests.
    round_trip(&server, &["--ftp-explicit-tls", "--ftp-no-check-certificate"]);
}
