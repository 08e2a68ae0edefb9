//! A cold `ferry cp --transport quic` download from an `ftps://` server
//! sends its `TPRT quic` and the transfer's set-up (MODE E, TYPE, OPTS
//! RETR, SPOR) and RETR in the login's write (issue 19, session 8):
//! one control round trip less than asking for the transport first. The
//! client listens for QUIC and for TCP on the same port number before it
//! writes, so a server that refuses or does not know TPRT but takes SPOR
//! connects by TCP and the copy still works, over TCP, and says so.

mod support;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

const ONE_WAY: Duration = Duration::from_millis(250);
const RTT: f64 = 0.5;

/// Seconds, in round trips, of a fresh quic download of `url` with `extra`
/// flags; its `--json` output.
fn quic_download(url: &str, ca: &str, extra: &[&str], expect: &std::path::Path) -> (f64, String) {
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f");
    let mut args = vec!["cp", "--json", "--no-path-cache", "--transport", "quic", "--ca", ca, "-p", "4"];
    args.extend(extra);
    args.extend([url, dst.to_str().unwrap()]);
    let t = Instant::now();
    let (ok, json, err) = ferry(&args);
    let rtts = t.elapsed().as_secs_f64() / RTT;
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&dst), sha256_file(expect));
    (rtts, json)
}

#[test]
fn a_cold_quic_download_sends_its_set_up_in_the_logins_write() {
    let pki = TestPki::new();
    let mut flags = pki.serve_flags();
    flags.extend(["--anonymous", "read"].map(String::from));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = FerryServer::start_with(&flags);
    random_file(&server.path("f"), 3 << 20, 8);
    let proxy = DelayProxy::start(server.addr, ONE_WAY);
    // Anonymous: a password check (argon2) takes a variable part of a
    // round trip on a loaded machine. By name, for the certificate.
    let url = format!("ftps://anonymous:x@localhost:{}/f", proxy.addr.port());
    let ca = pki.file("ca.pem");
    // The greeting and AUTH TLS (1), the TLS handshake (1), the login
    // with TPRT, set-up and RETR (1), the 226 with them or just after;
    // the data connections go direct.
    let (piped, json) = quic_download(&url, &ca, &[], &server.path("f"));
    assert!(json.contains("\"transport\":\"quic\""), "{json}");
    // Without pipelining the set-up waits for the login's replies.
    let (plain, json) = quic_download(&url, &ca, &["--pipeline", "1"], &server.path("f"));
    assert!(json.contains("\"transport\":\"quic\""), "{json}");
    eprintln!("round trips: pipelined {piped:.2}, unpipelined {plain:.2}");
    assert!(piped < 4.0, "a cold quic download took {piped:.2} round trips (unpipelined {plain:.2})");
    assert!(plain - piped > 0.7, "pipelined {piped:.2} round trips, unpipelined {plain:.2}");
    assert_eq!(
        server.transfers("/f").iter().map(|t| t["transport"].as_str().unwrap_or("?").to_string()).collect::<Vec<_>>(),
        vec!["quic", "quic"],
        "{}",
        server.log_text()
    );
    assert_eq!(proxy.connections(), 2, "one session per copy");
}

/// An FTPS server that knows SPOR but not TPRT (a GridFTP server such as
/// Globus's, which answers 500): it records in which read each command
/// arrived, refuses TPRT, and sends `f` in MODE E over a TCP connection to
/// the SPOR address, TLS on it as RFC 4217 has it. Python's `ssl`, so the
/// server's side is not Ferry's code.
const SPOR_ONLY_SERVER: &str = r#"
import socket, ssl, struct, sys
cert, key, data_path, log_path = sys.argv[1:5]
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

#[test]
fn a_server_that_does_not_know_tprt_but_takes_spor_sends_over_tcp() {
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
    assert!(ok, "{err}\n{commands}\nserver: {status:?}");
    assert_eq!(sha256_file(&dst), sha256_file(&src));
    // The data came over TCP and the copy says so.
    assert!(json.contains("\"transport\":\"tcp\""), "{json}");
    assert!(err.contains("transport refused; using tcp"), "the fallback is said: {err}");
    // Everything up to the RETR in the login's write (one TLS record, one
    // read); nothing asked after the 500 (no SITE SETNETSTACK: the RETR
    // was already under way).
    let first: Vec<&str> = commands.lines().filter(|l| l.starts_with("1 ")).map(|l| &l[2..]).collect();
    for verb in
        ["USER", "PASS", "PBSZ", "PROT P", "FEAT", "MLST /f", "TPRT quic", "MODE E", "TYPE I", "SPOR", "RETR /f"]
    {
        assert!(first.iter().any(|c| c.starts_with(verb)), "{verb} not in the first write:\n{commands}");
    }
    assert!(!commands.contains("SETNETSTACK"), "{commands}");
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
