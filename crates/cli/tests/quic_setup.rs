//! A cold `ferry cp --transport quic` download from an `ftps://` server
//! sends its `TPRT quic` and the transfer's set-up (MODE E, TYPE, OPTS
//! RETR, SPOR) and RETR in the login's write (issue 19, session 8):
//! one control round trip less than asking for the transport first. The
//! client listens for QUIC and for TCP on the same port number before it
//! writes, so a server that refuses or does not know TPRT but takes SPOR
//! connects by TCP and the copy still works, over TCP, and says so; and
//! while it waits for the TPRT reply, a stranger on that TCP port gets
//! nothing and changes nothing.

mod support;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

/// A fresh quic download of `url` with `extra` flags, byte-identical to
/// `expect`: its `--json` output and its log (stderr).
fn quic_download(url: &str, ca: &str, extra: &[&str], expect: &std::path::Path) -> (String, String) {
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f");
    let mut args = vec!["cp", "--json", "--no-path-cache", "--transport", "quic", "--ca", ca, "-p", "4"];
    args.extend(extra);
    args.extend([url, dst.to_str().unwrap()]);
    let (ok, json, err) = ferry(&args);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&dst), sha256_file(expect));
    (json, err)
}

/// A relay for FTPS control connections that ends TLS on both sides
/// (explicit `AUTH TLS`: the plain part is passed on until the server's
/// 234, then the relay is the TLS server to the client, with the test
/// server's own certificate, and the TLS client to the server) and so
/// reads the commands: it logs each as `<session> <read> <command>`, where
/// `<read>` counts the client's TLS records in that session — one write
/// of the client's is one record, so two commands with the same number
/// left the client in the same write. With `stranger`, when it reads a
/// SPOR it first connects to that address's TCP port from 127.0.0.2 and
/// sends a MODE E block of wrong data: the client is then waiting for the
/// reply to its pipelined TPRT, with a TCP twin listening on that port.
/// Python's `ssl`, so the relay is not Ferry's code.
const TLS_RELAY: &str = r#"
import re, select, socket, ssl, struct, sys, threading
port, cert, key, ca, log_path, stranger = sys.argv[1:7]
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(4)
print(ls.getsockname()[1], flush=True)
log = open(log_path, "w")
lock = threading.Lock()
def note(text):
    with lock: log.write(text + "\n"); log.flush()
def until(sock, pattern):
    buf = b""
    while not re.search(pattern, buf):
        chunk = sock.recv(4096)
        if not chunk: raise EOFError(buf)
        buf += chunk
    return buf
def intrude(n, line):
    h = line.split(" ")[1].split(",")
    st = socket.socket(); st.bind(("127.0.0.2", 0)); st.settimeout(5)
    try:
        st.connect((".".join(h[:4]), int(h[4]) * 256 + int(h[5])))
        st.sendall(struct.pack(">BQQ", 0, 5, 0) + b"WRONG" + struct.pack(">BQQ", 0x48, 0, 1))
        note("%d stranger connected" % n)
    except OSError as e:
        note("%d stranger not connected: %s" % (n, e))
    return st
def session(n, c):
    s = socket.create_connection(("127.0.0.1", int(port)))
    s.sendall(until(c, rb"AUTH TLS\r\n"))
    c.sendall(until(s, rb"(^|\n)234 [^\r\n]*\r\n"))
    s = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname="localhost")
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); cctx.load_cert_chain(cert, key)
    c = cctx.wrap_socket(c, server_side=True)
    for x in (c, s): x.setblocking(False)
    reads, buf, strangers = 0, b"", []
    while True:
        ready = [x for x in (c, s) if x.pending()] or select.select([c, s], [], [], 1.0)[0]
        for x in ready:
            try: data = x.recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError): continue
            except OSError: data = b""
            if not data:
                for st in strangers:
                    try: got = st.recv(100); note("%d stranger got %r" % (n, got))
                    except socket.timeout: note("%d stranger still open" % n)
                    except OSError as e: note("%d stranger dropped: %s" % (n, e))
                note("%d end" % n)
                return
            if x is c:
                reads += 1
                buf += data
                while b"\r\n" in buf:
                    line, buf = buf.split(b"\r\n", 1)
                    line = line.decode()
                    verb = line.split(" ")[0].upper()
                    note("%d %d %s" % (n, reads, "PASS ****" if verb == "PASS" else line))
                    if verb == "SPOR" and stranger == "stranger":
                        strangers.append(intrude(n, line))
            y = s if x is c else c
            y.setblocking(True); y.sendall(data); y.setblocking(False)
count = 0
while True:
    c, _ = ls.accept()
    count += 1
    threading.Thread(target=session, args=(count, c), daemon=True).start()
"#;

struct TlsRelay {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl TlsRelay {
    fn start(server: std::net::SocketAddr, pki: &TestPki, stranger: bool) -> Self {
        let python = require("python3");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("commands.log");
        let mut child = Command::new(python)
            .args(["-c", TLS_RELAY, &server.port().to_string()])
            .args([pki.file("server.pem"), pki.file("server.key"), pki.file("ca.pem")])
            .arg(&log)
            .arg(if stranger { "stranger" } else { "-" })
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut port = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut port).unwrap();
        Self { child, port: port.trim().parse().expect("the relay's port"), log, _dir: dir }
    }

    /// `(session, read, command)` of every command relayed so far.
    fn commands(&self) -> Vec<(u32, u32, String)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut f = l.splitn(3, ' ');
                let session = f.next()?.parse().ok()?;
                let read = f.next()?.parse().ok()?;
                Some((session, read, f.next()?.to_string()))
            })
            .collect()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for TlsRelay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The read (the client's write) in which session `n`'s first command
/// starting with `verb` arrived.
fn read_of(commands: &[(u32, u32, String)], n: u32, verb: &str) -> Option<u32> {
    commands.iter().find(|(s, _, c)| *s == n && c.starts_with(verb)).map(|(_, r, _)| *r)
}

/// What the design says rides in the login's write (docs/transports.md,
/// QUIC, "Session 8"), in this order.
const LOGINS_WRITE: [&str; 12] = [
    "USER",
    "PASS",
    "PBSZ",
    "PROT P",
    "FEAT",
    "MLST /f",
    "TPRT quic",
    "MODE E",
    "TYPE I",
    "OPTS RETR",
    "SPOR",
    "RETR /f",
];

#[test]
fn a_cold_quic_download_sends_its_set_up_in_the_logins_write() {
    let pki = TestPki::new();
    let mut flags = pki.serve_flags();
    flags.extend(["--anonymous", "read"].map(String::from));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = FerryServer::start_with(&flags);
    random_file(&server.path("f"), 3 << 20, 8);
    let relay = TlsRelay::start(server.addr, &pki, false);
    // By name, for the certificate.
    let url = format!("ftps://anonymous:x@localhost:{}/f", relay.port);
    let ca = pki.file("ca.pem");
    let (json, _) = quic_download(&url, &ca, &[], &server.path("f"));
    assert!(json.contains("\"transport\":\"quic\""), "{json}");
    // Without pipelining the set-up waits for the login's replies.
    let (json, _) = quic_download(&url, &ca, &["--pipeline", "1"], &server.path("f"));
    assert!(json.contains("\"transport\":\"quic\""), "{json}");
    let commands = relay.commands();
    let log = relay.log_text();
    eprintln!("{log}");
    // Session 1: the login, TPRT, the set-up and the RETR leave the client
    // in one write, in this order; nothing was sent before it (AUTH TLS is
    // not relayed as a command: it precedes TLS).
    let login = read_of(&commands, 1, "USER").unwrap_or_else(|| panic!("no login relayed:\n{log}"));
    assert_eq!(login, 1, "the login is the first write under TLS:\n{log}");
    let first: Vec<&str> =
        commands.iter().filter(|(s, r, _)| *s == 1 && *r == login).map(|(_, _, c)| c.as_str()).collect();
    let mut at = 0;
    for verb in LOGINS_WRITE {
        let i = first
            .iter()
            .position(|c| c.starts_with(verb))
            .unwrap_or_else(|| panic!("{verb} not in the login's write:\n{log}"));
        assert!(i >= at, "{verb} out of order in the login's write:\n{log}");
        at = i;
    }
    // Session 2, unpipelined: the same commands, but the RETR waits for
    // the login's replies (a later write) — what session 1 saves.
    let retr = read_of(&commands, 2, "RETR /f").unwrap_or_else(|| panic!("no RETR in session 2:\n{log}"));
    assert!(retr > read_of(&commands, 2, "USER").unwrap(), "{log}");
    assert_eq!(
        server.transfers("/f").iter().map(|t| t["transport"].as_str().unwrap_or("?").to_string()).collect::<Vec<_>>(),
        vec!["quic", "quic"],
        "{}",
        server.log_text()
    );
    assert_eq!(commands.iter().map(|(s, _, _)| *s).max(), Some(2), "one session per copy:\n{log}");
}

/// While a pipelined `--transport quic` download waits for its TPRT
/// reply, its TCP twin listens on the SPOR port: a stranger (another
/// address) that connects there and sends a MODE E block gets nothing,
/// and the copy moves over QUIC, byte-identical.
#[test]
fn a_stranger_on_the_twin_port_is_ignored_and_the_copy_goes_over_quic() {
    let pki = TestPki::new();
    let mut flags = pki.serve_flags();
    flags.extend(["--anonymous", "read"].map(String::from));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = FerryServer::start_with(&flags);
    random_file(&server.path("f"), (3 << 20) + 7, 11);
    let relay = TlsRelay::start(server.addr, &pki, true);
    let url = format!("ftps://anonymous:x@localhost:{}/f", relay.port);
    let (json, err) = quic_download(&url, &pki.file("ca.pem"), &[], &server.path("f"));
    let log = relay.log_text();
    eprintln!("{log}\n{err}");
    assert!(log.contains("1 stranger connected"), "the stranger did not reach the twin port:\n{log}");
    assert!(json.contains("\"transport\":\"quic\""), "{json}\n{err}");
    assert_eq!(server.transfers("/f").len(), 1, "{}", server.log_text());
    // The twin was dropped unread: the stranger saw a reset or an end.
    assert!(log.contains("1 stranger dropped") || log.contains("1 stranger got b''"), "{log}");
}

/// An FTPS server that knows SPOR but not TPRT (a GridFTP server such as
/// Globus's, which answers 500): it records in which read each command
/// arrived, refuses TPRT, and sends `f` in MODE E over a TCP connection to
/// the SPOR address, TLS on it as RFC 4217 has it. Python's `ssl`, so the
/// server's side is not Ferry's code.
const SPOR_ONLY_SERVER: &str = r#"
import re, socket, ssl, struct, sys
cert, key, data_path, log_path = sys.argv[1:5]
stranger, intruder = sys.argv[5:6] == ["stranger"], None
data = open(data_path, "rb").read()
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(1)
print(ls.getsockname()[1], flush=True)
c, _ = ls.accept()
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
log = open(log_path, "w")
def reply(s, text): s.sendall((text + "\r\n").encode())
reply(c, "220 fake GridFTP server")
buf = b""
while b"\r\n" not in buf: buf += c.recv(4096)
assert buf.startswith(b"AUTH TLS"), buf
reply(c, "234 go ahead")
s = ctx.wrap_socket(c, server_side=True)
reads, buf, spor = 0, b"", None
while True:
    chunk = s.recv(65536)
    if not chunk: break
    reads += 1
    buf += chunk
    m = re.search(rb"SPOR (\d+),(\d+),(\d+),(\d+),(\d+),(\d+)\r\n", buf)
    if stranger and m and intruder is None:
        # Before any reply: the client is still waiting for TPRT's. A
        # stranger from another address on its TCP twin, with wrong data.
        h = [int(x) for x in m.groups()]
        st = socket.socket(); st.bind(("127.0.0.2", 0)); st.settimeout(5)
        st.connect(("%d.%d.%d.%d" % tuple(h[:4]), h[4] * 256 + h[5]))
        st.sendall(struct.pack(">BQQ", 0, 5, 0) + b"WRONG" + struct.pack(">BQQ", 0x48, 0, 1))
        log.write("0 stranger connected\n"); log.flush()
        intruder = st
    while b"\r\n" in buf:
        line, buf = buf.split(b"\r\n", 1)
        line = line.decode()
        verb = line.split(" ")[0].upper()
        log.write("%d %s\n" % (reads, "PASS ****" if verb == "PASS" else line)); log.flush()
        if verb == "USER": reply(s, "331 password")
        elif verb == "PASS": reply(s, "230 in")
        elif verb == "FEAT": reply(s, "211-Features:\r\n MLST Type*;Size*;\r\n PARALLEL\r\n SPOR\r\n211 End")
        elif verb == "MLST": reply(s, "250-Listing\r\n Type=file;Size=%d; /f\r\n250 End" % len(data))
        elif verb in ("TPRT", "SITE"): reply(s, "500 Unknown command")
        elif verb == "SPOR":
            h = line.split(" ")[1].split(","); spor = (".".join(h[:4]), int(h[4]) * 256 + int(h[5]))
            reply(s, "200 SPOR ok")
        elif verb == "RETR":
            reply(s, "150 opening")
            d = socket.create_connection(spor)
            d = ctx.wrap_socket(d, server_side=True)
            d.sendall(struct.pack(">BQQ", 0, len(data), 0) + data + struct.pack(">BQQ", 0x48, 0, 1))
            d.close()
            reply(s, "226 done")
        elif verb == "QUIT": reply(s, "221 bye"); break
        else: reply(s, "200 ok")
"#;

/// A `--transport quic -p 1` download from [`SPOR_ONLY_SERVER`] (with a
/// stranger on the twin port when `stranger`): the copy's success, its
/// `--json` and log, the commands the server logged, and whether the copy
/// is byte-identical.
fn spor_only_download(stranger: bool) -> (bool, String, String, String, bool) {
    let python = require("python3");
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("f");
    random_file(&src, (1 << 20) + 5, 9);
    let log = dir.path().join("commands.log");
    let mut server = Command::new(python)
        .args(["-c", SPOR_ONLY_SERVER, &pki.file("server.pem"), &pki.file("server.key")])
        .arg(&src)
        .arg(&log)
        .args(stranger.then_some("stranger"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut port).unwrap();
    let url = format!("ftps://u:p@localhost:{}/f", port.trim());
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f");
    let (ok, json, err) = ferry(&[
        "cp",
        "--json",
        "--no-path-cache",
        "--transport",
        "quic",
        "--ca",
        &pki.file("ca.pem"),
        "-p",
        "1",
        &url,
        dst.to_str().unwrap(),
    ]);
    let status = server.wait_timeout(Duration::from_secs(20));
    let commands = std::fs::read_to_string(&log).unwrap_or_default();
    let same = ok && sha256_file(&dst) == sha256_file(&src);
    (ok, json, format!("{err}\nserver: {status:?}"), commands, same)
}

#[test]
fn a_server_that_does_not_know_tprt_but_takes_spor_sends_over_tcp() {
    let (ok, json, err, commands, same) = spor_only_download(false);
    assert!(ok, "{err}\n{commands}");
    assert!(same, "the copy differs from the source");
    // The data came over TCP and the copy says so.
    assert!(json.contains("\"transport\":\"tcp\""), "{json}");
    assert!(err.contains("transport refused; using tcp"), "the fallback is said: {err}");
    // Everything up to the RETR in the login's write (one TLS record, one
    // read); nothing asked after the 500 (no SITE SETNETSTACK: the RETR
    // was already under way).
    let first: Vec<&str> = commands.lines().filter(|l| l.starts_with("1 ")).map(|l| &l[2..]).collect();
    for verb in LOGINS_WRITE {
        assert!(first.iter().any(|c| c.starts_with(verb)), "{verb} not in the first write:\n{commands}");
    }
    assert!(!commands.contains("SETNETSTACK"), "{commands}");
}

/// The same server, and a stranger from another address connects to the
/// twin port and sends a MODE E block of wrong data before the server
/// has answered anything (the client waits for the TPRT reply). The
/// server refuses TPRT, so the client keeps the TCP twin: it must take
/// the server's connection, not the stranger's, which came first.
#[test]
fn a_stranger_on_the_twin_port_of_a_server_that_refuses_tprt_gets_nothing() {
    let (ok, json, err, commands, same) = spor_only_download(true);
    eprintln!("{commands}\n{err}");
    assert!(commands.contains("0 stranger connected"), "the stranger did not reach the twin port:\n{commands}");
    assert!(ok, "{err}\n{commands}");
    assert!(same, "the copy differs from the source: the stranger's data was taken");
    assert!(json.contains("\"transport\":\"tcp\""), "{json}");
    assert!(err.contains("foreign address"), "the stranger's connection is dropped and said: {err}");
}

trait WaitTimeout {
    fn wait_timeout(&mut self, limit: Duration) -> Option<std::process::ExitStatus>;
}

impl WaitTimeout for std::process::Child {
    /// The exit status within `limit`; killed (and `None`) after it.
    fn wait_timeout(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.kill();
        let _ = self.wait();
        None
    }
}

#[test]
fn a_quic_download_from_pure_ftpd_with_tls_moves_over_tcp() {
    let pki = TestPki::new();
    let combined = pki.dir.path().join("pure-ftpd.pem");
    let pem = std::fs::read_to_string(pki.file("server.pem")).unwrap()
        + &std::fs::read_to_string(pki.file("server.key")).unwrap();
    std::fs::write(&combined, pem).unwrap();
    let pure = PureFtpd::start_with(&["-Y".into(), "2".into(), "-2".into(), combined.display().to_string()]);
    let src = pure.home.path().join("q.bin");
    random_file(&src, (2 << 20) + 1, 10);
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("q.bin");
    let url = format!("ftps://{}:{}@localhost:{}/q.bin", PURE_USER.0, PURE_USER.1, pure.port);
    // pure-ftpd knows neither TPRT nor SPOR: the pipelined RETR fails for
    // want of a data channel and the copy goes on over TCP, on the same
    // session.
    let (ok, json, err) = ferry(&[
        "cp",
        "--json",
        "--no-path-cache",
        "--transport",
        "quic",
        "--ca",
        &pki.file("ca.pem"),
        &url,
        dst.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(json.contains("\"transport\":\"tcp\""), "{json}");
    assert_eq!(sha256_file(&dst), sha256_file(&src));
}
