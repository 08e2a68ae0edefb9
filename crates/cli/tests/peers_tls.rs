//! Explicit FTPS (RFC 4217, `AUTH TLS`) against real peers: curl, lftp,
//! Python's `ftplib.FTP_TLS` and `ferry cp ftps://`, plus the refusals
//! (clear logins under `--require-tls`, wrong certificates, PROT before
//! PBSZ) and certificate-map logins. Certificates are made at test time.
//!
//! Most servers here run with `--require-tls --require-protected-data`:
//! a transfer that succeeds against them has had its data protected.

mod support;
use std::process::Command;
use support::*;

fn tls_server(pki: &TestPki, extra: &[&str]) -> FerryServer {
    let mut flags = pki.serve_flags();
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    FerryServer::start_with(&flags)
}

fn strict_server(pki: &TestPki) -> FerryServer {
    tls_server(pki, &["--require-tls", "--require-protected-data"])
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn curl_uploads_downloads_and_lists_over_tls() {
    let curl = require("curl");
    let pki = TestPki::new();
    let server = strict_server(&pki);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (5 << 20) + 3, 7);
    let base = format!("ftp://{}:{}@localhost:{}", ALICE.0, ALICE.1, server.addr.port());
    let tls = ["--ssl-reqd", "--cacert", &pki.file("ca.pem"), "-sS", "--max-time", "60"];
    let (ok, out) = run(Command::new(&curl).args(tls).arg("-T").arg(&src).arg(format!("{base}/up.bin")));
    assert!(ok, "upload: {out}\n{}", server.log_text());
    assert_eq!(sha256_file(&server.path("up.bin")), sha256_file(&src));
    for (name, extra) in [("epsv.bin", None), ("pasv.bin", Some("--disable-epsv"))] {
        let dst = local.path().join(name);
        let mut cmd = Command::new(&curl);
        cmd.args(tls).arg("-o").arg(&dst).arg(format!("{base}/up.bin"));
        if let Some(e) = extra {
            cmd.arg(e);
        }
        let (ok, out) = run(&mut cmd);
        assert!(ok, "download {name}: {out}\n{}", server.log_text());
        assert_eq!(sha256_file(&dst), sha256_file(&src), "{name}");
    }
    let (ok, listing) = run(Command::new(&curl).args(tls).arg(format!("{base}/")));
    assert!(ok && listing.contains("up.bin"), "{listing}");
    let (ok, names) = run(Command::new(&curl).args(tls).arg("--list-only").arg(format!("{base}/")));
    assert!(ok && names.lines().any(|l| l.trim() == "up.bin"), "{names}");

    // In clear the server refuses the login.
    let (ok, out) = run(Command::new(&curl).args(["-sS", "--max-time", "20"]).arg(format!("{base}/up.bin")));
    assert!(!ok, "a clear login must fail: {out}");
    assert!(out.contains("530") || out.contains("Access denied"), "{out}");
}

#[test]
fn lftp_mirrors_up_and_down_with_protected_data() {
    let pki = TestPki::new();
    let server = strict_server(&pki);
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    for (i, (path, size)) in
        [("a.bin", 3u64 << 20), ("empty", 0), ("sub dir/b.txt", 70_001), ("sub dir/deeper/c.bin", 1 << 20)]
            .iter()
            .enumerate()
    {
        random_file(&tree.join(path), *size, i as u64);
    }
    let back = local.path().join("back");
    let active = local.path().join("active.bin");
    let script = format!(
        "set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 20; \
         set ftp:ssl-force true; set ftp:ssl-protect-data true; set ftp:ssl-protect-list true; \
         set ssl:ca-file '{ca}'; set ssl:verify-certificate true; \
         open -u {user},{pw} ftp://localhost:{port}; \
         mirror -R --no-perms '{tree}' '/m'; \
         mirror '/m' '{back}'; \
         set ftp:passive-mode false; get /m/a.bin -o '{active}'; \
         quit",
        ca = pki.file("ca.pem"),
        user = ALICE.0,
        pw = ALICE.1,
        port = server.addr.port(),
        tree = tree.display(),
        back = back.display(),
        active = active.display(),
    );
    let (ok, out) = run(lftp().args(["-c", &script]));
    assert!(ok, "lftp failed: {out}\nserver log:\n{}", server.log_text());
    let want = tree_digest(&tree);
    assert_eq!(tree_digest(&server.path("m")), want, "tree on the server");
    assert_eq!(tree_digest(&back), want, "tree mirrored back");
    assert_eq!(sha256_file(&active), sha256_file(&tree.join("a.bin")), "active-mode (PORT) download");
}

const FTPLIB_TLS: &str = r#"
import ftplib, io, os, ssl, sys
host, port = "localhost", int(os.environ["PORT"])
ctx = ssl.create_default_context(cafile=os.environ["CA"])
ftp = ftplib.FTP_TLS(context=ctx, timeout=30)
ftp.connect(host, port)
assert "AUTH TLS" in ftp.sendcmd("FEAT"), "FEAT lists AUTH TLS"
ftp.auth()
def code_of(cmd):
    try:
        return ftp.sendcmd(cmd)[:3]
    except ftplib.all_errors as e:
        return str(e)[:3]
assert code_of("PROT P") == "503", "PROT before PBSZ"
ftp.login(os.environ["USER"], os.environ["PASS"])
assert code_of("PBSZ 0") == "200"
assert code_of("PROT C") == "534", "clear data refused under --require-protected-data"
ftp.prot_p()
assert code_of("PROT S") == "536"
assert code_of("CCC") == "534"
data = os.urandom(1_500_001)
ftp.storbinary("STOR py.bin", io.BytesIO(data))
got = io.BytesIO()
ftp.retrbinary("RETR py.bin", got.write)
assert got.getvalue() == data, "retrbinary returns what storbinary sent"
assert "py.bin" in ftp.nlst()
assert any(name == "py.bin" for name, _ in ftp.mlsd())
ftp.quit()
print("ftplib TLS ok")
"#;

#[test]
fn ftplib_ftp_tls_logs_in_protects_and_transfers() {
    let python = require("python3");
    let pki = TestPki::new();
    let server = strict_server(&pki);
    let (ok, out) = run(Command::new(python)
        .args(["-c", FTPLIB_TLS])
        .env("PORT", server.addr.port().to_string())
        .env("CA", pki.file("ca.pem"))
        .env("USER", ALICE.0)
        .env("PASS", ALICE.1));
    assert!(ok && out.contains("ftplib TLS ok"), "{out}\nserver log:\n{}", server.log_text());
}

#[test]
fn ferry_cp_over_tls_stream_and_mode_e() {
    let pki = TestPki::new();
    let server = strict_server(&pki);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (16 << 20) + 1, 3);
    let ca = pki.file("ca.pem");
    let src_s = src.display().to_string();
    for (mode, parallel, name) in [("stream", "1", "s.bin"), ("extended", "1", "e1.bin"), ("extended", "4", "e4.bin")] {
        let url = ftps_url(&server, ALICE, &format!("/{name}"));
        let (ok, _, err) =
            ferry(&["cp", "-q", "--ca", &ca, "--mode", mode, "-p", parallel, "--verify", "--no-resume", &src_s, &url]);
        assert!(ok, "upload {mode} -p {parallel}: {err}\n{}", server.log_text());
        assert_eq!(sha256_file(&server.path(name)), sha256_file(&src), "upload {name}");
        let back = local.path().join(format!("back-{name}"));
        let back_s = back.display().to_string();
        let (ok, _, err) =
            ferry(&["cp", "-q", "--ca", &ca, "--mode", mode, "-p", parallel, "--verify", "--no-resume", &url, &back_s]);
        assert!(ok, "download {mode} -p {parallel}: {err}\n{}", server.log_text());
        assert_eq!(sha256_file(&back), sha256_file(&src), "download {name}");
    }
    let dir = ftps_url(&server, ALICE, "/made");
    assert!(ferry(&["mkdir", "--ca", &ca, &dir]).0);
    let (ok, listing, err) = ferry(&["ls", "--ca", &ca, &ftps_url(&server, ALICE, "/")]);
    assert!(ok && listing.contains("e4.bin") && listing.contains("made/"), "{listing}{err}");
    let (ok, _, err) = ferry(&["rm", "--ca", &ca, &ftps_url(&server, ALICE, "/s.bin")]);
    assert!(ok && !server.path("s.bin").exists(), "{err}");
    // Four protected connections carried the -p 4 transfers.
    assert!(server.log_text().contains("control connection protected by TLS"));

    // Without the CA the server's certificate is not trusted; over ftp://
    // the login is refused because the server requires TLS.
    let (ok, _, err) =
        ferry(&["cp", "-q", &ftps_url(&server, ALICE, "/e4.bin"), &local.path().join("x").display().to_string()]);
    assert!(!ok && err.contains("certificate"), "{err}");
    let (ok, _, err) =
        ferry(&["cp", "-q", &server.url(ALICE, "/e4.bin"), &local.path().join("y").display().to_string()]);
    assert!(!ok && err.contains("530") && err.contains("AUTH TLS"), "{err}");
}

#[test]
fn client_certificates_log_in_by_the_map() {
    let pki = TestPki::new();
    let server = tls_server(
        &pki,
        &["--require-tls", "--tls-client-ca", &pki.file("ca.pem"), "--cert-map", &pki.file("grid-mapfile")],
    );
    random_file(&server.path("f.bin"), 100_000, 9);
    let local = tempfile::tempdir().unwrap();
    let ca = pki.file("ca.pem");
    let out = local.path().join("f.bin").display().to_string();
    let url = |user: &str| format!("ftps://{user}@localhost:{}/f.bin", server.addr.port());
    // `ferry cp` of f.bin as `user`, presenting the certificate `cert`.
    let cp_with_cert = |cert: &str, user: &str| {
        let (pem, key) = (pki.file(&format!("{cert}.pem")), pki.file(&format!("{cert}.key")));
        ferry(&["cp", "-q", "--ca", &ca, "--cert", &pem, "--key", &key, &url(user), &out])
    };
    let (ok, _, err) = cp_with_cert("alice", "alice");
    assert!(ok, "a mapped certificate logs in without a password: {err}\n{}", server.log_text());
    assert_eq!(sha256_file(&server.path("f.bin")), sha256_file(local.path().join("f.bin").as_path()));
    assert!(server.log_text().contains("login by client certificate"), "{}", server.log_text());

    let (ok, _, err) = cp_with_cert("alice", "bob");
    assert!(!ok && err.contains("mapped to alice, not to bob"), "{err}");

    // Same subject, wrong CA: the handshake fails, no login.
    let (ok, _, err) = cp_with_cert("rogue", "alice");
    assert!(!ok, "a certificate from another CA must be refused: {err}");

    // curl presents the certificate too: USER alice is answered 232.
    let curl = require("curl");
    let dst = local.path().join("curl.bin");
    let (ok, text) = run(Command::new(curl)
        .args(["--ssl-reqd", "-sS", "--max-time", "30", "--cacert", &ca, "--cert", &pki.file("alice.pem")])
        .args(["--key", &pki.file("alice.key"), "-u", "alice:", "-o"])
        .arg(&dst)
        .arg(format!("ftp://localhost:{}/f.bin", server.addr.port())));
    assert!(ok, "curl with a client certificate: {text}");
    assert_eq!(sha256_file(&dst), sha256_file(&server.path("f.bin")));

    // Without a certificate a password still works.
    let (ok, _, err) = ferry(&["cp", "-q", "--ca", &ca, &ftps_url(&server, ALICE, "/f.bin"), &out]);
    assert!(ok, "{err}");
}

#[test]
fn third_party_between_tls_servers_uses_clear_data() {
    let pki = TestPki::new();
    let a = tls_server(&pki, &["--require-tls"]);
    let b = tls_server(&pki, &["--require-tls"]);
    random_file(&a.path("x.bin"), (3 << 20) + 5, 11);
    let ca = pki.file("ca.pem");
    for (mode, name) in [("extended", "e.bin"), ("stream", "s.bin")] {
        let (ok, _, err) = ferry(&[
            "cp",
            "-q",
            "--ca",
            &ca,
            "--mode",
            mode,
            "--verify",
            &ftps_url(&a, ALICE, "/x.bin"),
            &ftps_url(&b, ALICE, &format!("/{name}")),
        ]);
        assert!(ok, "third party {mode}: {err}\nA:\n{}\nB:\n{}", a.log_text(), b.log_text());
        assert_eq!(sha256_file(&b.path(name)), sha256_file(&a.path("x.bin")));
    }
}

#[test]
fn refusals_in_clear() {
    // Without a certificate: no TLS in FEAT, AUTH TLS is 431.
    let plain = FerryServer::start();
    let mut c = RawControl::connect(plain.addr);
    let feat = c.cmd("FEAT");
    assert!(!feat.contains("AUTH") && !feat.contains("PBSZ"), "{feat}");
    let r = c.cmd("AUTH TLS");
    assert!(r.starts_with("431") && r.contains("no TLS certificate"), "{r}");

    // With one: FEAT lists it, PBSZ/PROT before AUTH are 503, and
    // --require-tls refuses USER in clear.
    let pki = TestPki::new();
    let server = strict_server(&pki);
    let mut c = RawControl::connect(server.addr);
    let feat = c.cmd("FEAT");
    assert!(feat.contains(" AUTH TLS") && feat.contains(" PBSZ") && feat.contains(" PROT"), "{feat}");
    assert!(c.cmd("PBSZ 0").starts_with("503"));
    assert!(c.cmd("PROT P").starts_with("503"));
    let r = c.cmd("USER alice");
    assert!(r.starts_with("530") && r.contains("AUTH TLS"), "{r}");
    assert!(c.cmd("AUTH KERBEROS").starts_with("504"));
}

#[test]
fn serve_refuses_inconsistent_tls_settings() {
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(ferry_bin())
        .args(["serve", &root.path().display().to_string(), "--listen", "127.0.0.1:0", "--require-tls"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tls_cert"), "{err}");
}

#[test]
fn ferry_cp_against_pure_ftpd_with_tls() {
    let pki = TestPki::new();
    // pure-ftpd takes certificate and key in one file; -Y 2 refuses clear
    // sessions.
    let combined = pki.dir.path().join("pure-ftpd.pem");
    let pem = std::fs::read_to_string(pki.file("server.pem")).unwrap()
        + &std::fs::read_to_string(pki.file("server.key")).unwrap();
    std::fs::write(&combined, pem).unwrap();
    let pure = PureFtpd::start_with(&["-Y".into(), "2".into(), "-2".into(), combined.display().to_string()]);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (4 << 20) + 9, 5);
    let ca = pki.file("ca.pem");
    let url = format!("ftps://{}:{}@localhost:{}/p.bin", PURE_USER.0, PURE_USER.1, pure.port);
    let (ok, _, err) = ferry(&["cp", "-q", "--ca", &ca, &src.display().to_string(), &url]);
    assert!(ok, "upload to pure-ftpd: {err}");
    assert_eq!(sha256_file(&pure.home.path().join("p.bin")), sha256_file(&src));
    let back = local.path().join("back.bin");
    let (ok, _, err) = ferry(&["cp", "-q", "--ca", &ca, &url, &back.display().to_string()]);
    assert!(ok, "download from pure-ftpd: {err}");
    assert_eq!(sha256_file(&back), sha256_file(&src));
    let (ok, listing, err) =
        ferry(&["ls", "--ca", &ca, &format!("ftps://{}:{}@localhost:{}/", PURE_USER.0, PURE_USER.1, pure.port)]);
    assert!(ok && listing.contains("p.bin"), "{listing}{err}");
}
