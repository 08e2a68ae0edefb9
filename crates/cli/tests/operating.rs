//! The server as an administrator runs it (issue 13, items 8-10):
//! SIGHUP reloads the users file, SIGTERM lets transfers finish, the log
//! says what changed in words and numbers, the control dialogue at debug
//! level with the password masked, RUST_LOG honoured, and `ferry serve`
//! says the URL to use, port included.

mod support;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

struct Served {
    child: Child,
    addr: SocketAddr,
    banner: String,
    log: PathBuf,
    users: PathBuf,
    root: tempfile::TempDir,
    _work: tempfile::TempDir,
}

impl Served {
    /// `ferry serve` with alice (write) and JSON logs, with `env` set.
    fn start(extra: &[&str], env: &[(&str, &str)]) -> Self {
        let root = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let users = work.path().join("users.toml");
        add_user(&users, "alice", ALICE.1, &["--write"]);
        let log = work.path().join("server.log");
        let mut child = Command::new(ferry_bin())
            .args(["serve", root.path().to_str().unwrap(), "--users", users.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0", "--log-format", "json", "--login-failure-delay-ms", "10"])
            .args(extra)
            .env_remove("FERRY_LOG")
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut banner = String::new();
        out.read_line(&mut banner).unwrap();
        out.read_line(&mut banner).unwrap();
        let addr =
            banner.lines().next().unwrap().rsplit_once("ftp://").unwrap().1.trim_end_matches('/').parse().unwrap();
        Self { child, addr, banner, log, users, root, _work: work }
    }

    fn url(&self, path: &str) -> String {
        format!("ftp://alice:{}@{}{path}", ALICE.1, self.addr)
    }

    fn log_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on the PID of a child we started and have not reaped.
        #[allow(unsafe_code)]
        let r = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(r, 0);
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn add_user(users: &Path, name: &str, pw: &str, flags: &[&str]) {
    let mut c = Command::new(ferry_bin())
        .args(["passwd", "--users", users.to_str().unwrap(), name])
        .args(flags)
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(format!("{pw}\n").as_bytes()).unwrap();
    assert!(c.wait().unwrap().success());
}

#[test]
fn sighup_reloads_users_and_sigterm_lets_transfers_finish() {
    let mut s = Served::start(&["--shutdown-grace", "30"], &[]);
    add_user(&s.users, "dave", "dave-pw", &[]);
    let dave = format!("ftp://dave:dave-pw@{}/", s.addr);
    let (ok, _, _) = ferry(&["ls", &dave]);
    assert!(!ok, "dave is not known before the reload");
    s.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(500));
    assert!(s.child.try_wait().unwrap().is_none(), "SIGHUP must not stop the server");
    let (ok, _, err) = ferry(&["ls", &dave]);
    assert!(ok, "dave after the reload: {err}");
    assert!(s.log_lines().iter().any(|v| v["fields"]["message"] == "SIGHUP: reloaded"));

    // SIGTERM during an upload: the upload completes, new connections
    // are refused meanwhile, then the server exits by itself.
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("big.bin");
    random_file(&src, 24 << 20, 9);
    let upload = Command::new(ferry_bin())
        .args(["cp", "-q", "--max-rate", "8M", src.to_str().unwrap(), &s.url("/big.bin")])
        .env("FERRY_STATE_DIR", state_dir())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !s.root.path().read_dir().unwrap().flatten().any(|e| e.file_name().to_string_lossy().contains("big.bin")) {
        assert!(Instant::now() < deadline, "the upload did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    s.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    assert!(TcpStream::connect(s.addr).is_err(), "no new connections while draining");
    let out = upload.wait_with_output().unwrap();
    assert!(out.status.success(), "the upload under way finishes: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(sha256_file(&s.root.path().join("big.bin")), sha256_file(&src));
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "the server did not exit after its transfers");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
}

#[test]
fn logs_an_administrator_can_use() {
    let s = Served::start(&[], &[("RUST_LOG", "info,ferry::dialogue=debug")]);
    // The banner gives the URL with the port, and it works as printed.
    let example = s.banner.lines().nth(1).unwrap().rsplit_once("e.g. ").unwrap().1.trim().to_string();
    assert!(example.contains(&format!(":{}/", s.addr.port())), "{}", s.banner);
    let args: Vec<String> = example.replace("USER", "alice").split_whitespace().skip(1).map(String::from).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = Command::new(ferry_bin());
    cmd.env("FERRY_PASSWORD", ALICE.1);
    let (ok, _, err) = ferry_with(&args, &mut cmd);
    assert!(ok, "{example}: {err}");

    let mut c = RawControl::connect(s.addr);
    c.login(ALICE);
    assert!(c.cmd("MKD /d").starts_with("257"));
    let local = tempfile::tempdir().unwrap();
    let f = local.path().join("f.bin");
    random_file(&f, 5000, 3);
    let (ok, _, err) = ferry(&["cp", "-q", f.to_str().unwrap(), &s.url("/d/f.bin")]);
    assert!(ok, "{err}");
    assert!(c.cmd("RNFR /d/f.bin").starts_with("350"));
    assert!(c.cmd("RNTO /d/g.bin").starts_with("250"));
    // A tree download (no false failed transfer for its directory).
    let (ok, _, err) = ferry(&["cp", "-q", "-r", &s.url("/d"), local.path().join("down").to_str().unwrap()]);
    assert!(ok, "{err}");
    let (ok, _, _) = ferry(&["cp", "-q", &s.url("/missing.bin"), local.path().join("m").to_str().unwrap()]);
    assert!(!ok);
    // A download of a missing file, deterministically on one connection.
    assert!(c.cmd("TYPE I").starts_with("200"));
    assert!(c.cmd("PASV").starts_with("227"));
    assert!(c.cmd("RETR /nope.bin").starts_with("550"));
    assert!(c.cmd("DELE /d/g.bin").starts_with("250"));
    assert!(c.cmd("RMD /d").starts_with("250"));
    let mut bad = RawControl::connect(s.addr);
    bad.cmd("USER mallory");
    assert!(bad.cmd("PASS guess").starts_with("530"));
    std::thread::sleep(Duration::from_millis(300));

    let lines = s.log_lines();
    let fields: Vec<&serde_json::Value> = lines.iter().map(|v| &v["fields"]).collect();
    for (op, path) in [("mkdir", "/d"), ("rename", "/d/f.bin"), ("delete", "/d/g.bin"), ("rmdir", "/d")] {
        assert!(
            fields.iter().any(|f| f["message"] == "file changed"
                && f["operation"] == op
                && f["path"] == path
                && f["status"] == "complete"
                && f["user"] == "alice"),
            "no {op} line: {lines:#?}"
        );
    }
    assert!(fields.iter().any(|f| f["message"] == "failed login" && f["user"] == "mallory"), "{lines:#?}");
    let transfers: Vec<_> = fields.iter().filter(|f| f["message"] == "transfer finished").collect();
    assert!(transfers.len() >= 2, "{transfers:#?}");
    for t in &transfers {
        assert!(t["seconds"].is_f64() && t["rate_mb_s"].is_f64() && t["bytes"].is_u64(), "numbers: {t}");
        let status = t["status"].as_str().unwrap();
        assert!(!status.contains('(') || status.contains(' '), "words, not Debug output: {status}");
        if t["path"] != "/missing.bin" && t["path"] != "/nope.bin" {
            assert_eq!(status, "complete", "a false failure: {t}");
        }
    }
    let missing = transfers.iter().find(|t| t["path"] == "/nope.bin").expect("the failed download is logged");
    assert_eq!(missing["status"], "failed: no such file or directory");
    // The dialogue at debug level, the password masked.
    let text = std::fs::read_to_string(&s.log).unwrap();
    assert!(text.contains("> USER alice") && text.contains("> PASS ****"), "{text}");
    assert!(text.contains("< 230"), "replies too");
    assert!(!text.contains(ALICE.1) && !text.contains("guess"), "a password in the log");
}

#[test]
fn sighup_reloads_the_tls_certificate() {
    let (old, new) = (TestPki::new(), TestPki::new());
    let work = tempfile::tempdir().unwrap();
    let (cert, key) = (work.path().join("cert.pem"), work.path().join("key.pem"));
    let install = |pki: &TestPki| {
        std::fs::copy(pki.file("server.pem"), &cert).unwrap();
        std::fs::copy(pki.file("server.key"), &key).unwrap();
    };
    install(&old);
    let s = Served::start(&["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()], &[]);
    let url = format!("ftps://alice:{}@localhost:{}/", ALICE.1, s.addr.port());
    let ls = |pki: &TestPki| ferry(&["ls", "--ca", &pki.file("ca.pem"), &url]);
    assert!(ls(&old).0, "{}", ls(&old).2);
    assert!(!ls(&new).0, "the new CA does not vouch for the old certificate");
    install(&new);
    s.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(500));
    let (ok, _, err) = ls(&new);
    assert!(ok, "after SIGHUP the new certificate is served: {err}");
    assert!(!ls(&old).0);
}
