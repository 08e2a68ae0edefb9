//! Shared by the integration tests: real servers on free ports, real peer
//! programs, random data and checksums.
#![allow(dead_code)]

use rand::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ALICE: (&str, &str) = ("alice", "alice-secret");
pub const BOB: (&str, &str) = ("bob", "bob-secret");
/// May run the server-side profiler (`ferry passwd --profile`).
pub const CAROL: (&str, &str) = ("carol", "carol-secret");

pub fn ferry_bin() -> &'static str {
    // Every `ferry` a test starts (through here) inherits this: the
    // remembered path rates stay in the test's own state directory, never
    // the user's ~/.cache/ferry (nextest runs each test in its own process).
    static CACHE: std::sync::Once = std::sync::Once::new();
    CACHE.call_once(|| {
        if std::env::var_os("FERRY_PATH_CACHE").is_none() {
            std::env::set_var("FERRY_PATH_CACHE", state_dir().join("path-rates.json"));
        }
    });
    env!("CARGO_BIN_EXE_ferry")
}

/// Fails the test with a clear message when a peer program is missing:
/// these tests are the interoperability contract and must not be skipped.
pub fn require(program: &str) -> PathBuf {
    let out = Command::new("sh").arg("-c").arg(format!("command -v {program}")).output().expect("sh");
    if !out.status.success() {
        panic!("{program} is not installed; run scripts/deps.sh (CI installs it)");
    }
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A free TCP port on loopback, chosen by the kernel.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn sha256_file(path: &Path) -> String {
    let mut h = Sha256::new();
    let mut f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::io::copy(&mut f, &mut h).unwrap();
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `size` bytes of seeded random data.
pub fn random_file(path: &Path, size: u64, seed: u64) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut buf = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        rng.fill_bytes(&mut buf[..n]);
        f.write_all(&buf[..n]).unwrap();
        left -= n as u64;
    }
    f.flush().unwrap();
}

/// Relative path → SHA-256 for every file under `dir` (directories as "dir").
pub fn tree_digest(dir: &Path) -> std::collections::BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                out.insert(rel, "dir".into());
                walk(base, &p, out);
            } else {
                out.insert(rel, sha256_file(&p));
            }
        }
    }
    let mut out = Default::default();
    walk(dir, dir, &mut out);
    out
}

/// `ferry serve` on a temporary directory and a free port, with users
/// alice (write) and bob (read-only) and anonymous read access.
pub struct FerryServer {
    child: Child,
    pub addr: SocketAddr,
    pub root: tempfile::TempDir,
    pub work: tempfile::TempDir,
    pub log: PathBuf,
    args: Vec<String>,
}

impl FerryServer {
    pub fn start() -> Self {
        Self::start_with(&["--anonymous", "read"])
    }

    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_with_users(&[], extra)
    }

    /// Like [`start_with`](Self::start_with), with more users: each is
    /// (name, password, extra `ferry passwd` flags such as `--root /dave`).
    /// A user's root directory must exist before that user logs in.
    pub fn start_with_users(more: &[(&str, &str, &[&str])], extra: &[&str]) -> Self {
        Self::start_in(tempfile::tempdir().unwrap(), more, extra)
    }

    /// Serves `root` (e.g. a directory on a small file system).
    pub fn start_in(root: tempfile::TempDir, more: &[(&str, &str, &[&str])], extra: &[&str]) -> Self {
        let work = tempfile::tempdir().unwrap();
        let users = work.path().join("users.toml");
        let base: [(&str, &str, &[&str]); 3] =
            [(ALICE.0, ALICE.1, &["--write"]), (BOB.0, BOB.1, &[]), (CAROL.0, CAROL.1, &["--write", "--profile"])];
        for (name, pw, flags) in base.into_iter().chain(more.iter().copied()) {
            let mut cmd = Command::new(ferry_bin());
            cmd.args(["passwd", "--users"]).arg(&users).arg(name).args(flags);
            let mut child = cmd.stdin(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
            child.stdin.take().unwrap().write_all(format!("{pw}\n").as_bytes()).unwrap();
            assert!(child.wait().unwrap().success(), "ferry passwd failed");
        }
        let log = work.path().join("server.log");
        let mut args: Vec<String> = vec![
            root.path().display().to_string(),
            "--users".into(),
            users.display().to_string(),
            "--login-failure-delay-ms".into(),
            "100".into(),
        ];
        // JSON logs unless the test asks for another format.
        if !extra.contains(&"--log-format") {
            args.extend(["--log-format".into(), "json".into()]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let (child, addr) = Self::spawn(&args, "127.0.0.1:0", &log);
        Self { child, addr, root, work, log, args }
    }

    fn spawn(args: &[String], listen: &str, log: &Path) -> (Child, SocketAddr) {
        let log_file = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
        let mut child = Command::new(ferry_bin())
            .arg("serve")
            .args(args)
            .args(["--listen", listen])
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let Some(addr) = line.trim().strip_prefix("ferry: serving ").and_then(|r| r.rsplit_once(" on ftp://")) else {
            let _ = child.kill();
            panic!("server did not start: {line:?}\n{}", std::fs::read_to_string(log).unwrap_or_default());
        };
        (child, addr.1.trim_end_matches('/').parse().unwrap())
    }

    /// SIGKILLs the server (no chance to clean up) and starts it again on
    /// the same port and directory.
    pub fn kill_and_restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let (child, addr) = Self::spawn(&self.args, &self.addr.to_string(), &self.log);
        assert_eq!(addr, self.addr);
        self.child = child;
    }

    pub fn url(&self, user: (&str, &str), path: &str) -> String {
        format!("ftp://{}:{}@{}{}", user.0, user.1, self.addr, path)
    }

    pub fn anon_url(&self, path: &str) -> String {
        format!("ftp://{}{}", self.addr, path)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel.trim_start_matches('/'))
    }

    /// Where the server keeps the partial upload of `rel`: in the hidden
    /// area of its directory, under a name made from the final name.
    pub fn partial(&self, rel: &str) -> PathBuf {
        let path = self.path(rel);
        let name = path.file_name().unwrap().to_os_string();
        use std::os::unix::ffi::OsStrExt;
        path.with_file_name(ferry_io::partial::AREA).join(ferry_io::partial::part_file(name.as_bytes()))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The string field `field` of every JSON log line with `message`, in
    /// order ("" where a line lacks it).
    #[allow(dead_code)]
    pub fn logged(&self, message: &str, field: &str) -> Vec<String> {
        self.log_text()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["fields"]["message"] == message)
            .map(|v| v["fields"][field].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The JSON "transfer finished" log lines for `path`.
    pub fn transfers(&self, path: &str) -> Vec<serde_json::Value> {
        self.log_text()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["fields"]["message"] == "transfer finished" && v["fields"]["path"] == path)
            .map(|v| v["fields"].clone())
            .collect()
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for FerryServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A test peer (pure-ftpd, Globus) run as the leader of its own process
/// group. Both servers fork a process per client session; killing only the
/// server's PID let those sessions outlive their test (found after session
/// 12's CI run), so dropping a peer signals the whole group.
pub struct PeerProcess(Child);

impl PeerProcess {
    pub fn spawn(cmd: &mut Command) -> Self {
        use std::os::unix::process::CommandExt;
        Self(cmd.process_group(0).spawn().expect("spawning a test peer"))
    }

    /// The group's ID (the leader's PID).
    pub fn pgid(&self) -> i32 {
        self.0.id() as i32
    }
}

/// The live (not zombie) processes of process group `pgid`, from `/proc`.
pub fn live_group_members(pgid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // After the command name in parentheses: state, ppid, pgrp.
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
            out.push(pid);
        }
    }
    out
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        let _ = ferry_bench::proc::kill_group_now(self.pgid());
        let _ = self.0.wait();
    }
}

/// pure-ftpd from Debian, with one virtual user (pure-pw), on a free port.
pub struct PureFtpd {
    pub server: PeerProcess,
    pub port: u16,
    pub home: tempfile::TempDir,
    work: tempfile::TempDir,
}

pub const PURE_USER: (&str, &str) = ("tester", "tester-secret");

impl PureFtpd {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// With extra pure-ftpd flags (e.g. `-Y 2 -2 cert.pem` for TLS).
    pub fn start_with(extra: &[String]) -> Self {
        require("pure-ftpd");
        require("pure-pw");
        let work = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        // Virtual users run as an unprivileged account.
        let chown = Command::new("chown").args(["nobody:nogroup"]).arg(home.path()).status().unwrap();
        assert!(chown.success());
        let passwd = work.path().join("passwd");
        let mut add = Command::new("pure-pw")
            .args(["useradd", PURE_USER.0, "-u", "nobody", "-g", "nogroup", "-d"])
            .arg(home.path())
            .arg("-f")
            .arg(&passwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        add.stdin.take().unwrap().write_all(format!("{0}\n{0}\n", PURE_USER.1).as_bytes()).unwrap();
        assert!(add.wait().unwrap().success(), "pure-pw useradd failed");
        let pdb = work.path().join("passwd.pdb");
        let mk = Command::new("pure-pw").args(["mkdb"]).arg(&pdb).arg("-f").arg(&passwd).status().unwrap();
        assert!(mk.success(), "pure-pw mkdb failed");
        let port = free_port();
        let server = PeerProcess::spawn(
            Command::new("pure-ftpd")
                .arg("-l")
                .arg(format!("puredb:{}", pdb.display()))
                .args(["-S", &format!("127.0.0.1,{port}"), "-E", "-H", "-A"])
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        wait_for_port(port);
        Self { server, port, home, work }
    }

    pub fn url(&self, path: &str) -> String {
        format!("ftp://{}:{}@127.0.0.1:{}{}", PURE_USER.0, PURE_USER.1, self.port, path)
    }
}

pub fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on port {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A per-process directory for the client's restart records, so tests do
/// not see each other's (or the user's) interrupted copies.
pub fn state_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("ferry-test-state-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `ferry` with arguments; returns (success, stdout, stderr).
pub fn ferry(args: &[&str]) -> (bool, String, String) {
    ferry_with(
        args,
        Command::new(ferry_bin())
            .env("FERRY_STATE_DIR", state_dir())
            // The remembered path rates too: per test process, never the user's.
            .env("FERRY_PATH_CACHE", state_dir().join("path-rates.json")),
    )
}

/// Runs ferry with `args` on a prepared command (its environment set):
/// success, stdout, stderr.
pub fn ferry_with(args: &[&str], cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.args(args).stdin(Stdio::null()).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A minimal raw control-channel client for hostile-input tests.
pub struct RawControl {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl RawControl {
    pub fn connect(addr: SocketAddr) -> Self {
        let mut c = Self::from_stream(TcpStream::connect(addr).unwrap());
        let greeting = c.reply();
        assert!(greeting.starts_with("220"), "{greeting}");
        c
    }

    /// A connected stream whose greeting (or refusal) is still unread.
    pub fn from_stream(stream: TcpStream) -> Self {
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Self { stream, buf: Vec::new() }
    }

    /// The next complete reply (all lines), or "" when the server closed.
    pub fn reply(&mut self) -> String {
        loop {
            if let Some(end) = reply_end(&self.buf) {
                let r: Vec<u8> = self.buf.drain(..end).collect();
                return String::from_utf8_lossy(&r).into_owned();
            }
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return String::new(),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    pub fn send(&mut self, line: &[u8]) {
        let mut l = line.to_vec();
        l.extend_from_slice(b"\r\n");
        let _ = self.stream.write_all(&l);
    }

    pub fn cmd(&mut self, line: &str) -> String {
        self.send(line.as_bytes());
        self.reply()
    }

    pub fn login(&mut self, user: (&str, &str)) {
        assert!(self.cmd(&format!("USER {}", user.0)).starts_with("331"));
        let r = self.cmd(&format!("PASS {}", user.1));
        assert!(r.starts_with("230"), "{r}");
    }
}

/// End of the first complete reply in `buf` (RFC 959 §4.2 framing), on
/// the octets (names in replies need not be UTF-8).
fn reply_end(buf: &[u8]) -> Option<usize> {
    let first_nl = buf.iter().position(|&b| b == b'\n')?;
    let first = &buf[..first_nl];
    if first.len() >= 4 && first[3] == b'-' {
        let code = &first[..3];
        let mut pos = first_nl + 1;
        while let Some(nl) = buf[pos..].iter().position(|&b| b == b'\n') {
            let line = &buf[pos..pos + nl];
            if line.starts_with(code) && line.get(3) == Some(&b' ') {
                return Some(pos + nl + 1);
            }
            pos += nl + 1;
        }
        None
    } else {
        Some(first_nl + 1)
    }
}

/// The real Globus GridFTP server (Debian's globus-gridftp-server-progs),
/// anonymous, on loopback and a free port, run as `nobody` as its
/// documentation requires. Paths in its URLs are absolute host paths, so
/// `url("x")` names `x` inside this server's temporary directory.
pub struct GlobusServer {
    pub server: PeerProcess,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
}

impl GlobusServer {
    pub fn start() -> Self {
        require("globus-gridftp-server");
        require("setpriv");
        let dir = tempfile::tempdir().unwrap();
        chown_nobody(dir.path());
        let log = dir.path().join("server.log");
        let port = free_port();
        let server = PeerProcess::spawn(
            Command::new("setpriv")
                .args(["--reuid=nobody", "--regid=nogroup", "--init-groups", "globus-gridftp-server"])
                .args(["-c", "/dev/null", "-aa", "-p", &port.to_string()])
                .args(["-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1", "-l"])
                .arg(&log)
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        wait_for_port(port);
        Self { server, port, dir, log }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel.trim_start_matches('/'))
    }

    pub fn url(&self, rel: &str) -> String {
        format!("ftp://127.0.0.1:{}{}/{}", self.port, self.dir.path().display(), rel.trim_start_matches('/'))
    }

    /// Puts a file where the server (running as nobody) can read it.
    pub fn put(&self, rel: &str, from: &Path) {
        let to = self.path(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, &to).unwrap();
        chown_nobody(&to);
    }
}

pub fn chown_nobody(path: &Path) {
    let ok = Command::new("chown").args(["-R", "nobody:nogroup"]).arg(path).status().unwrap();
    assert!(ok.success());
}

/// lftp, in a UTF-8 locale: lftp converts file names to the locale's
/// character set, so in the POSIX locale of a fresh machine (no `LANG`)
/// every non-ASCII name would become `?`. glibc always has `C.UTF-8`.
pub fn lftp() -> Command {
    let mut cmd = Command::new(require("lftp"));
    cmd.env("LC_ALL", "C.UTF-8");
    cmd
}

/// Runs globus-url-copy with a time limit; returns (success, stderr+stdout).
pub fn guc(args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("120")
        .arg(require("globus-url-copy"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Runs a gfal2 command (gfal-copy, gfal-sum...). gfal's wrapper runs the
/// first `python3` on PATH that imports gfal2: point it at Debian's.
pub fn gfal(tool: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("120")
        .arg(require(tool))
        .args(args)
        .env("GFAL_PYTHONBIN", "/usr/bin/python3")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// A TCP relay that holds every chunk for `one_way` in each direction: the
/// control connection of a long path, on loopback. Data connections go
/// direct, so a test through it counts control round trips. Serves one
/// client connection at a time until dropped.
pub struct DelayProxy {
    pub addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl DelayProxy {
    pub fn start(target: SocketAddr, one_way: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                client.set_nonblocking(false).unwrap();
                let server = TcpStream::connect(target).unwrap();
                for (from, to) in [(&client, &server), (&server, &client)] {
                    Self::relay(from.try_clone().unwrap(), to.try_clone().unwrap(), one_way);
                }
            }
        });
        Self { addr, stop, accepted }
    }

    /// Control connections relayed so far.
    pub fn connections(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Copies `from` to `to`, each chunk sent `delay` after it was read.
    fn relay(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
        let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 || tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        });
        std::thread::spawn(move || {
            for (due, chunk) in rx {
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                if to.write_all(&chunk).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Write);
        });
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Certificates made at test time (no keys in the repository): a CA, a
/// server certificate for `localhost`/127.0.0.1, client certificates for
/// alice from that CA and for a rogue from another CA, and a cert map.
pub struct TestPki {
    pub dir: tempfile::TempDir,
}

pub const ALICE_DN: &str = "/C=DE/O=Ferry Test/CN=Alice Example";

impl TestPki {
    pub fn new() -> Self {
        use rcgen::{
            BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
        let make_ca = |cn: &str| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.distinguished_name = DistinguishedName::new();
            p.distinguished_name.push(DnType::CommonName, cn);
            p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            let cert = p.self_signed(&key).unwrap();
            (cert, key)
        };
        let (ca, ca_key) = make_ca("Ferry Test CA");
        let (rogue_ca, rogue_key) = make_ca("Somebody Else's CA");
        write("ca.pem", ca.pem());
        // (10.77.0.2: ferry-wan's server address, for tests on an emulated path.)
        let names = ["localhost", "127.0.0.1", "10.77.0.2"].map(String::from).to_vec();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, "localhost");
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        write("server.pem", p.signed_by(&key, &ca, &ca_key).unwrap().pem());
        write("server.key", key.serialize_pem());
        let client = |cn: &str, issuer: &rcgen::Certificate, issuer_key: &KeyPair, name: &str| {
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            // Not the default (which starts with a CN): the subject's
            // order is what the map compares.
            p.distinguished_name = DistinguishedName::new();
            p.distinguished_name.push(DnType::CountryName, "DE");
            p.distinguished_name.push(DnType::OrganizationName, "Ferry Test");
            p.distinguished_name.push(DnType::CommonName, cn);
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            let key = KeyPair::generate().unwrap();
            write(&format!("{name}.pem"), p.signed_by(&key, issuer, issuer_key).unwrap().pem());
            write(&format!("{name}.key"), key.serialize_pem());
        };
        client("Alice Example", &ca, &ca_key, "alice");
        // Same subject as alice, but not from the trusted CA.
        client("Alice Example", &rogue_ca, &rogue_key, "rogue");
        write("grid-mapfile", format!("# test map\n\"{ALICE_DN}\" alice\n"));
        Self { dir }
    }

    /// A file of this PKI as a string argument.
    pub fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// Flags that give `ferry serve` this PKI's server certificate.
    pub fn serve_flags(&self) -> Vec<String> {
        vec!["--tls-cert".into(), self.file("server.pem"), "--tls-key".into(), self.file("server.key")]
    }
}

/// An `ftps://` URL for `server`, by name (`localhost`) so the
/// certificate's name is what is checked.
pub fn ftps_url(server: &FerryServer, user: (&str, &str), path: &str) -> String {
    format!("ftps://{}:{}@localhost:{}{}", user.0, user.1, server.addr.port(), path)
}

/// The data address of a `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)` reply.
pub fn pasv_addr(reply: &str) -> SocketAddr {
    let inner = reply.split('(').nth(1).and_then(|r| r.split(')').next()).unwrap_or_else(|| panic!("{reply}"));
    let n: Vec<u16> = inner.split(',').map(|x| x.trim().parse().unwrap()).collect();
    format!("{}.{}.{}.{}:{}", n[0], n[1], n[2], n[3], n[4] * 256 + n[5]).parse().unwrap()
}

/// A field of `/proc/PID/status` in its own unit (kB for memory).
pub fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field) && l[field.len()..].starts_with(':')).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Resident memory of a process, KiB.
pub fn rss_kib(pid: u32) -> u64 {
    proc_status(pid, "VmRSS")
}

/// Open file descriptors of a process.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

/// Threads of a process.
pub fn thread_count(pid: u32) -> u64 {
    proc_status(pid, "Threads")
}

/// A TCP relay for a link that can be cut: every listener forwards to its
/// target, and while [`cut`](Self::cut) holds, no byte moves in either
/// direction (connections stay open, as across a real outage; new ones are
/// accepted but stall). Used with the server's passive ports: the proxy
/// listens on another loopback address at the same port numbers, and
/// `ferry cp` connects to the PASV port on the control connection's host,
/// so control and data both cross the "link".
pub struct CutProxy {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Both ends of every relayed connection, for [`reset_all`](Self::reset_all).
    conns: std::sync::Arc<std::sync::Mutex<Vec<TcpStream>>>,
}

impl CutProxy {
    /// Listens on each `from` address, forwarding to the matching `to`.
    pub fn start(pairs: &[(SocketAddr, SocketAddr)]) -> std::io::Result<Self> {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let conns = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        for &(from, to) in pairs {
            let listener = TcpListener::bind(from)?;
            listener.set_nonblocking(true)?;
            let (stop, cut, conns) = (stop.clone(), cut.clone(), conns.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let Ok((client, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    };
                    let _ = client.set_nonblocking(false);
                    let Ok(server) = TcpStream::connect(to) else { continue };
                    if let (Ok(a), Ok(b)) = (client.try_clone(), server.try_clone()) {
                        conns.lock().unwrap().extend([a, b]);
                    }
                    for (a, b) in [(&client, &server), (&server, &client)] {
                        let (a, b) = (a.try_clone().unwrap(), b.try_clone().unwrap());
                        let (stop, cut) = (stop.clone(), cut.clone());
                        std::thread::spawn(move || Self::relay(a, b, &stop, &cut));
                    }
                }
            });
        }
        Ok(Self { stop, cut, conns })
    }

    /// Shuts every connection relayed so far down (both ends), as when a
    /// firewall or NAT on the path forgets them during an outage.
    pub fn reset_all(&self) {
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }

    fn relay(
        mut from: TcpStream,
        mut to: TcpStream,
        stop: &std::sync::atomic::AtomicBool,
        cut: &std::sync::atomic::AtomicBool,
    ) {
        let mut buf = vec![0u8; 65536];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            while cut.load(std::sync::atomic::Ordering::Relaxed) && !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            if stop.load(std::sync::atomic::Ordering::Relaxed) || to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
        let _ = from.shutdown(std::net::Shutdown::Read);
    }

    /// Cuts the link (true) or restores it (false).
    pub fn set_cut(&self, cut: bool) {
        self.cut.store(cut, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.cut.store(false, std::sync::atomic::Ordering::Relaxed);
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A tmpfs of `size` (e.g. "8m") mounted on a fresh temporary directory,
/// unmounted when dropped. Where this process may not mount (not root,
/// no mount namespace rights) the test fails saying so: it never passes
/// without having run.
pub struct SmallTmpfs {
    pub dir: tempfile::TempDir,
}

impl SmallTmpfs {
    pub fn mount(size: &str) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        // /proc/self belongs to the effective user.
        // Tests that need a small file system cannot run otherwise: they
        // fail saying so, never pass silently.
        if std::fs::metadata("/proc/self").map_or(1, |m| m.uid()) != 0 {
            panic!("cannot run here: mounting a tmpfs needs root (run the suite as root, as scripts/test does on CI)");
        }
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .unwrap_or_else(|e| panic!("cannot run here: mount(8) does not run ({e})"));
        if !out.status.success() {
            panic!("cannot run here: mount -t tmpfs failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Some(Self { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Bytes the restart records in `state` (a `FERRY_STATE_DIR`) hold: the
/// `*.json` records only. A record is saved as `NAME.tmp` and renamed over
/// `NAME.json`, so a listing taken between the two holds both; counting
/// the `.tmp` too read a 15 MiB record as 30 MiB, and a test that killed
/// its copy "once 16 MiB are recorded" killed it with 15 (session 10,
/// docs/udt.md "Encryption after PROT P").
pub fn recorded_bytes(state: &Path) -> u64 {
    std::fs::read_dir(state)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .filter_map(|p| std::fs::read_to_string(p).ok())
                .filter_map(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .filter_map(|v| {
                    let r = v["ranges"].as_str()?.to_string();
                    Some(
                        r.split(',')
                            .filter_map(|x| x.split_once('-'))
                            .map(|(a, b)| b.parse::<u64>().unwrap_or(0) - a.parse::<u64>().unwrap_or(0))
                            .sum::<u64>(),
                    )
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Starts `ferry cp -q -p 4 --max-rate 16M ARGS` with its restart records
/// in `state`, waits until they hold at least `min` bytes, and SIGKILLs it:
/// a copy killed mid-way, for the resume tests of every transport.
pub fn start_and_kill(args: &[&str], state: &Path, min: u64) {
    start_and_kill_at(args, state, min, "16M");
}

/// [`start_and_kill`] at `--max-rate RATE`; returns how long the copy ran.
/// A lower rate leaves more of the copy to go at the kill, for tests whose
/// record reaches `min` close to the copy's end (the client saves its
/// record at most every 250 ms).
pub fn start_and_kill_at(args: &[&str], state: &Path, min: u64, rate: &str) -> Duration {
    let start = Instant::now();
    let mut child = Command::new(ferry_bin())
        .args(["cp", "-q", "-p", "4", "--max-rate", rate])
        .args(args)
        .env("FERRY_STATE_DIR", state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = start + Duration::from_secs(60);
    while recorded_bytes(state) < min {
        let ended = child.try_wait().unwrap();
        assert!(ended.is_none(), "the copy ended ({ended:?}) after {:?}, before it could be killed", start.elapsed());
        assert!(Instant::now() < deadline, "no restart record of {min} bytes in 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    start.elapsed()
}

/// Runs ferry with extra environment and a deadline, so a copy that hangs or
/// loops fails its test instead of the suite: (exit code, stdout, stderr).
pub fn ferry_bounded(args: &[&str], env: &[(&str, &str)], secs: u64) -> (i32, String, String) {
    let mut child = Command::new(ferry_bin())
        .args(args)
        .env("FERRY_STATE_DIR", state_dir())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("ferry {args:?} still running after {secs} s: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The UDP ports `pid` has open (from /proc: its socket inodes, matched
/// against the kernel's UDP tables): where a server's UDT or QUIC
/// listener is, for the tests that flood it.
pub fn udp_ports_of(pid: u32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.display().to_string();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    let mut ports = Vec::new();
    for table in ["/proc/net/udp", "/proc/net/udp6"] {
        for line in std::fs::read_to_string(table).unwrap_or_default().lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && inodes.iter().any(|i| i == f[9]) {
                if let Some(port) = f[1].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok()) {
                    ports.push(port);
                }
            }
        }
    }
    ports
}
