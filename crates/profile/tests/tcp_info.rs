//! TCP_INFO on a real loopback connection, and the registry's handling of
//! descriptors (the duplicate it samples through must never keep a
//! connection open after the caller is done with it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use ferry_profile::{rtt_estimate, tcp_info, ProfileError, StreamRegistry};

fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    a.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    (a, b)
}

/// A few round trips so the kernel has RTT samples from data, not only the handshake.
fn ping_pong(a: &mut TcpStream, b: &mut TcpStream, rounds: usize) {
    let mut buf = [0u8; 1024];
    for _ in 0..rounds {
        a.write_all(&[7u8; 1024]).unwrap();
        b.read_exact(&mut buf).unwrap();
        b.write_all(&buf).unwrap();
        a.read_exact(&mut buf).unwrap();
    }
}

#[test]
fn loopback_connection_has_sane_rtt_and_cwnd() {
    let (mut a, mut b) = pair();
    ping_pong(&mut a, &mut b, 20);
    let i = tcp_info(&a).unwrap();
    assert_eq!(i.state, "established");
    assert_eq!(i.ca_state, "open");
    // Loopback: microseconds, certainly under a second, never zero.
    assert!(i.rtt_us > 0 && i.rtt_us < 1_000_000, "rtt {} µs", i.rtt_us);
    assert!(i.min_rtt_us > 0 && i.min_rtt_us <= i.rtt_us.max(i.min_rtt_us), "min_rtt {} µs", i.min_rtt_us);
    // Linux starts with an initial window of 10 segments and never goes below 1.
    assert!(i.snd_cwnd >= 1 && i.snd_cwnd < 1_000_000, "cwnd {}", i.snd_cwnd);
    assert!(i.snd_mss > 0 && i.snd_mss <= 65_536, "mss {}", i.snd_mss);
    // Loopback's MTU is 64 KiB (65535 or 65536 depending on the kernel).
    assert!(i.pmtu >= 65_000, "pmtu {}", i.pmtu);
    // 20 KiB of data each way (the kernel may count the SYN as one more byte).
    assert!((20 * 1024..=20 * 1024 + 1).contains(&i.bytes_acked), "bytes_acked {}", i.bytes_acked);
    assert!((20 * 1024..=20 * 1024 + 1).contains(&i.bytes_received), "bytes_received {}", i.bytes_received);
    assert_eq!(i.total_retrans, 0);
    assert!(i.segs_out >= 20 && i.data_segs_out >= 20);
    // Linux 6.7+ fills the newest fields; this test runs on 6.x.
    assert!(i.rcv_wnd.is_some(), "kernel did not fill tcpi_rcv_wnd");

    let rtt = rtt_estimate(&a).unwrap();
    assert_eq!(rtt.srtt, Duration::from_micros(i.rtt_us as u64));
    assert!(rtt.min_rtt.is_some());
    assert!(rtt.base() <= rtt.srtt.max(rtt.base()));
}

#[test]
fn tcp_info_on_a_file_is_an_error() {
    let f = tempfile::tempfile().unwrap();
    match tcp_info(&f) {
        Err(ProfileError::TcpInfo { source, .. }) => assert_eq!(source.raw_os_error(), Some(libc::ENOTSOCK)),
        other => panic!("expected ENOTSOCK, got {other:?}"),
    }
}

#[test]
fn registration_is_undone_by_the_handle() {
    let (a, b) = pair();
    let reg = StreamRegistry::new();
    let h1 = reg.register(&a, "a").unwrap();
    let h2 = reg.register(&b, "b").unwrap();
    assert_ne!(h1.id(), h2.id());
    assert_eq!(reg.len(), 2);
    drop(h1);
    assert_eq!(reg.len(), 1);
    drop(reg); // a handle outliving its registry is harmless
    drop(h2);
}

#[test]
fn dropping_a_tracked_socket_closes_the_connection() {
    let (a, mut b) = pair();
    let reg = StreamRegistry::new();
    let mut tracked = reg.track(a, "data 1").unwrap();
    tracked.write_all(b"hello").unwrap();
    let mut buf = [0u8; 5];
    b.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"hello");
    assert!(tracked.stream_id() > 0);
    drop(tracked);
    assert!(reg.is_empty());
    // The peer sees the end of the stream: no duplicate kept it open.
    assert_eq!(b.read(&mut buf).unwrap(), 0);
}

#[test]
fn into_inner_deregisters_and_keeps_the_socket() {
    let (a, mut b) = pair();
    let reg = StreamRegistry::new();
    let tracked = reg.track(a, "data 1").unwrap();
    let mut a = tracked.into_inner();
    assert!(reg.is_empty());
    a.write_all(b"x").unwrap();
    let mut buf = [0u8; 1];
    b.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"x");
}
