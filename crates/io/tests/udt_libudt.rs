//! Interoperability with real UDT software: a tiny peer built at test time
//! with g++ against Debian's libudt 4.11 (`tests/udt/peer.cpp`) exchanges
//! data with Ferry's UDT driver over loopback, in both directions and with
//! either side listening. The peer checks every byte it receives against
//! the same pattern the Rust side checks.
//!
//! Needs `g++` and `libudt-dev` (scripts/deps.sh installs both); without
//! them the tests fail and say so.

mod pattern;

use ferry_io::udt::{UdtConfig, UdtListener, UdtStream};
use ferry_udt::CongestionKind;
use pattern::{pattern, send_pattern};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const BYTES: u64 = 48 << 20;

/// Builds the peer once per test process.
fn peer_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/udt/peer.cpp");
        let out = std::env::temp_dir().join(format!("ferry-udt-peer-{}", std::process::id()));
        assert!(
            std::path::Path::new("/usr/include/udt/udt.h").exists(),
            "libudt headers missing: install libudt-dev (scripts/deps.sh)"
        );
        let st = Command::new("g++")
            .args(["-O2", "-o"])
            .arg(&out)
            .arg(&src)
            .args(["-ludt", "-lpthread"])
            .status()
            .expect("g++ not found: install g++ (scripts/deps.sh)");
        assert!(st.success(), "building the libudt peer failed");
        out
    })
    .clone()
}

struct Peer {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Peer {
    fn spawn(args: &[String]) -> Peer {
        let mut child = Command::new(peer_binary())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start libudt peer");
        let out = BufReader::new(child.stdout.take().unwrap());
        Peer { child, out }
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.out.read_line(&mut l).unwrap();
        l.trim().to_string()
    }

    /// Waits (bounded) for the "OK bytes secs cpu" line and a clean exit.
    fn finish(mut self) -> (u64, f64, f64) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let l = self.line();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                assert!(st.success(), "libudt peer failed: {st} ({l})");
                break;
            }
            assert!(Instant::now() < deadline, "libudt peer did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(f.first(), Some(&"OK"), "peer said {l:?}");
        (f[1].parse().unwrap(), f[2].parse().unwrap(), f[3].parse().unwrap())
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn recv_pattern(s: &UdtStream, n: u64) {
    let mut off = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    while off < n {
        let k = s.read(&mut buf).unwrap();
        assert!(k > 0, "EOF after {off} of {n} bytes");
        for (i, b) in buf[..k].iter().enumerate() {
            assert_eq!(*b, pattern(off + i as u64), "byte {}", off + i as u64);
        }
        off += k as u64;
    }
}

fn libudt_server(mode: &str) -> (Peer, std::net::SocketAddr) {
    let mut p = Peer::spawn(&["server".into(), "0".into(), mode.into(), BYTES.to_string()]);
    let l = p.line();
    let port: u16 = l.strip_prefix("PORT ").unwrap_or_else(|| panic!("peer said {l:?}")).parse().unwrap();
    (p, format!("127.0.0.1:{port}").parse().unwrap())
}

#[test]
fn ferry_client_sends_to_libudt_server() {
    let (peer, addr) = libudt_server("recv");
    let c = UdtStream::connect(addr, UdtConfig::default()).unwrap();
    send_pattern(&c, BYTES);
    c.shutdown().unwrap();
    assert_eq!(peer.finish().0, BYTES);
}

#[test]
fn ferry_client_receives_from_libudt_server() {
    let (peer, addr) = libudt_server("send");
    let c = UdtStream::connect(addr, UdtConfig::default()).unwrap();
    recv_pattern(&c, BYTES);
    assert_eq!(peer.finish().0, BYTES);
    // libudt closes after its data is acknowledged: then EOF
    let mut b = [0u8; 16];
    assert_eq!(c.read(&mut b).unwrap(), 0);
}

#[test]
fn libudt_client_sends_to_ferry_listener() {
    let l = UdtListener::bind("127.0.0.1:0".parse().unwrap(), UdtConfig::default()).unwrap();
    let port = l.local_addr().port();
    let peer = Peer::spawn(&["client".into(), "127.0.0.1".into(), port.to_string(), "send".into(), BYTES.to_string()]);
    let s = l.accept_timeout(Some(Duration::from_secs(10))).unwrap().expect("libudt connected");
    recv_pattern(&s, BYTES);
    assert_eq!(peer.finish().0, BYTES);
}

#[test]
fn ferry_listener_sends_to_libudt_client_with_udt_congestion_control() {
    let cfg = UdtConfig::default().with_congestion(CongestionKind::Udt);
    let l = UdtListener::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let port = l.local_addr().port();
    let peer = Peer::spawn(&["client".into(), "127.0.0.1".into(), port.to_string(), "recv".into(), BYTES.to_string()]);
    let s = l.accept_timeout(Some(Duration::from_secs(10))).unwrap().expect("libudt connected");
    send_pattern(&s, BYTES);
    s.shutdown().unwrap();
    assert_eq!(peer.finish().0, BYTES);
    assert!(s.stats().congestion.starts_with("udt"));
}

#[test]
fn jumbo_mss_is_negotiated_down_to_the_smaller_side() {
    // libudt at MSS 1500, Ferry asking for 9000: both use 1500
    let (peer, addr) = libudt_server("recv");
    let c = UdtStream::connect(addr, UdtConfig::default().with_mss(9000)).unwrap();
    assert_eq!(c.stats().mss, 1500);
    send_pattern(&c, BYTES);
    c.shutdown().unwrap();
    assert_eq!(peer.finish().0, BYTES);
}
