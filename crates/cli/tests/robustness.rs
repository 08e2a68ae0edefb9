//! Hostile and broken clients: a STOR killed half-way never leaves a file
//! under the final name; over-long lines, NUL bytes, binary garbage and
//! floods of abandoned connections are answered or closed cleanly, and the
//! server keeps serving the next client.

mod support;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

/// A Python client that starts a STOR, sends 4 MiB and is then SIGKILLed
/// (the kernel closes its sockets the way a crashed client's would).
const KILLED_UPLOADER: &str = r#"
import ftplib, os, signal, sys
ftp = ftplib.FTP()
ftp.connect(sys.argv[1], int(sys.argv[2]), timeout=20)
ftp.login(sys.argv[3], sys.argv[4])
ftp.voidcmd("TYPE I")
if sys.argv[6] == "allo":
    ftp.sendcmd("ALLO %d" % (64 << 20))
conn = ftp.transfercmd("STOR " + sys.argv[5])
conn.sendall(os.urandom(4 << 20))
os.kill(os.getpid(), signal.SIGKILL)
"#;

fn serves_next_client(server: &FerryServer) {
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("NOOP").starts_with("200"));
}

#[test]
fn killed_stor_leaves_no_file_under_the_final_name() {
    let python = require("python3");
    let mut server = FerryServer::start();
    for (i, allo) in ["allo", "no-allo"].iter().enumerate() {
        let name = format!("killed-{i}.bin");
        let status = Command::new(&python)
            .args(["-c", KILLED_UPLOADER, &server.addr.ip().to_string(), &server.addr.port().to_string()])
            .args([ALICE.0, ALICE.1, &name, allo])
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success(), "the uploader was killed");
        // Give the server time to notice and finish the transfer.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !server.log_text().contains(&format!("/{name}")) {
            assert!(Instant::now() < deadline, "no transfer log line for {name}:\n{}", server.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!server.path(&name).exists(), "{name} ({allo}) appeared under its final name");
        // The partial is kept (hidden) for a resume.
        assert!(server.partial(&name).exists());
    }
    assert!(server.is_running());
    serves_next_client(&server);
    // The log line records the failed transfer.
    let log = server.log_text();
    assert!(log.contains("\"direction\":\"receive\"") && log.contains("connection lost"), "{log}");
}

#[test]
fn data_connection_reset_mid_stor_leaves_no_file() {
    let server = FerryServer::start();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("TYPE I").starts_with("200"));
    let r = c.cmd("PASV");
    let addr = ferry_proto_pasv(&r);
    let mut data = TcpStream::connect(addr).unwrap();
    assert!(c.cmd("STOR reset.bin").starts_with("150"));
    data.write_all(&vec![7u8; 1 << 20]).unwrap();
    // Linger 0: close with RST, as a crashed network path would.
    socket2::SockRef::from(&data).set_linger(Some(Duration::ZERO)).unwrap();
    drop(data);
    let r = c.reply();
    assert!(r.starts_with("426"), "{r}");
    assert!(!server.path("reset.bin").exists());
    assert!(c.cmd("NOOP").starts_with("200"));
}

fn ferry_proto_pasv(reply: &str) -> std::net::SocketAddr {
    let inner = reply.split('(').nth(1).unwrap().split(')').next().unwrap();
    let n: Vec<u16> = inner.split(',').map(|x| x.trim().parse().unwrap()).collect();
    format!("{}.{}.{}.{}:{}", n[0], n[1], n[2], n[3], n[4] * 256 + n[5]).parse().unwrap()
}

#[test]
fn long_lines_nul_bytes_and_garbage() {
    let server = FerryServer::start();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    // 100 KiB command line: refused, and the session goes on.
    let mut long = b"RETR ".to_vec();
    long.extend(std::iter::repeat_n(b'A', 100 * 1024));
    c.send(&long);
    let r = c.reply();
    assert!(r.starts_with("500") && r.contains("longer than"), "{r}");
    assert!(c.cmd("NOOP").starts_with("200"));
    // NUL bytes.
    c.send(b"RETR a\0b");
    assert!(c.reply().starts_with("501"));
    c.send(b"\0\0\0\0");
    assert!(c.reply().starts_with("501"));
    // Octets that are not UTF-8 in a path are a name like any other
    // (RFC 3659 §2.2); Telnet sequences (0xFF) are not part of it.
    c.send(b"MKD caf\xe9\xff\xfe\xfd");
    assert!(c.reply().starts_with("257"));
    assert!(server.root.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9")).is_dir());
    assert!(c.cmd("PWD").starts_with("257"));

    // Binary garbage: answered line by line with errors until the server
    // gives up on the connection (421), which it then closes.
    let mut g = RawControl::connect(server.addr);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut garbage = Vec::with_capacity(256 * 1024);
    while garbage.len() < 256 * 1024 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        garbage.extend_from_slice(&rng.to_le_bytes());
    }
    let _ = g.stream.write_all(&garbage);
    let _ = g.stream.write_all(b"\r\n");
    let mut replies = String::new();
    let _ = g.stream.read_to_string(&mut replies);
    let last = replies.lines().last().unwrap_or("");
    assert!(last.starts_with("421") || last.starts_with("5"), "{replies}");
    for line in replies.lines() {
        assert!(line.len() >= 3 && line[..3].parse::<u16>().is_ok(), "not a reply line: {line:?}");
    }
    serves_next_client(&server);
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find(|l| l.starts_with("VmRSS:")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn five_hundred_abandoned_connections() {
    let mut server = FerryServer::start();
    let before = rss_kib(server.pid());
    let mut conns = Vec::new();
    for _ in 0..500 {
        conns.push(TcpStream::connect(server.addr).unwrap());
    }
    // Each gets a greeting or a clear refusal (the per-address limit).
    let mut greeted = 0;
    let mut refused = 0;
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut buf = [0u8; 128];
        let n = c.read(&mut buf).unwrap();
        let r = String::from_utf8_lossy(&buf[..n]);
        if r.starts_with("220") {
            greeted += 1;
        } else {
            assert!(r.starts_with("421"), "{r}");
            refused += 1;
        }
    }
    assert_eq!(greeted + refused, 500);
    assert!(greeted >= 1 && refused >= 1, "greeted {greeted}, refused {refused}");
    let during = rss_kib(server.pid());
    drop(conns);
    // Abandoned sessions are released as soon as the client is gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = RawControl::connect(server.addr);
        if c.cmd(&format!("USER {}", ALICE.0)).starts_with("331") {
            assert!(c.cmd(&format!("PASS {}", ALICE.1)).starts_with("230"));
            break;
        }
        assert!(Instant::now() < deadline, "server still refuses after the flood");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(server.is_running());
    assert!(during < before + 64 * 1024, "RSS grew from {before} KiB to {during} KiB");
}

#[test]
fn silent_connections_are_timed_out() {
    let server = FerryServer::start_with(&["--login-timeout", "1", "--idle-timeout", "2"]);
    let mut silent: Vec<_> = (0..20).map(|_| RawControl::connect(server.addr)).collect();
    let mut idle = RawControl::connect(server.addr);
    idle.login(ALICE);
    let started = Instant::now();
    for c in &mut silent {
        let r = c.reply();
        assert!(r.starts_with("421") && r.contains("Not logged in"), "{r}");
        assert_eq!(c.reply(), "", "closed after the 421");
    }
    let r = idle.reply();
    assert!(r.starts_with("421") && r.contains("Idle"), "{r}");
    assert!(started.elapsed() < Duration::from_secs(10));
    serves_next_client(&server);
}
