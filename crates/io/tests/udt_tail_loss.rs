//! The early `226` (session 18): a server's reply waits for
//! `UdtStream::wait_sent` — every byte sent once, none acknowledged yet —
//! and the connection stays open to repair what the peer reports lost
//! later. These tests put a UDP relay between the two ends that drops the
//! last data packets of a transfer the first time they pass, so the losses
//! are still unrepaired when `wait_sent` returns, and check that the
//! receiver still ends with every byte, in a few seconds.
//!
//! Checked against a sender that stops after `wait_sent` (docs/udt.md,
//! "Session 19: a test for the early 226"): with `s.abort()` (what dropping
//! the stream does) right after `wait_sent`, both tests fail — the receiver
//! reads the end of the stream short of N bytes.

mod pattern;

use ferry_io::udt::{UdtConfig, UdtListener, UdtStream};
use ferry_udt::CongestionKind;
use pattern::{pattern, send_pattern};
use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// UDT's data header: `0|seq(31)`, `ff|o|msgno(29)`, timestamp,
/// destination socket id, big-endian words (`crates/udt/src/packet.rs`).
const HEADER: usize = 16;
const MSS: u32 = 1500;
/// Payload of a full data packet at MSS 1500 (28 bytes of IPv4 and UDP
/// headers, UDT's 16).
const PAYLOAD: u64 = 1500 - 28 - 16;

/// What the relay did to the sender's data packets.
#[derive(Debug, Default)]
struct Counters {
    /// Distinct data packets (sequence numbers) forwarded or dropped.
    packets: AtomicU64,
    /// First transmissions dropped (the transfer's tail).
    dropped: AtomicU64,
    /// Dropped packets whose retransmission has since been forwarded.
    repaired: AtomicU64,
    /// The final packet was held back and has been forwarded.
    released_last: AtomicBool,
}

impl Counters {
    fn snapshot(&self) -> (u64, u64, u64, bool) {
        (
            self.packets.load(Ordering::SeqCst),
            self.dropped.load(Ordering::SeqCst),
            self.repaired.load(Ordering::SeqCst),
            self.released_last.load(Ordering::SeqCst),
        )
    }
}

/// How the relay treats the tail of the stream.
#[derive(Debug, Clone, Copy)]
struct Tail {
    /// Total bytes the sender writes.
    total: u64,
    /// First transmissions of data starting in the last `bytes` are dropped.
    bytes: u64,
    /// The packet that ends the stream is not dropped but held back this
    /// long, then forwarded: its arrival shows the receiver the hole before
    /// it, so the repair comes from a NAK sent after `wait_sent` returned.
    /// `None`: it is dropped too, and only the sender's EXP timer finds
    /// the lost tail.
    hold_last: Option<Duration>,
}

/// A UDP relay: datagrams from `server` go to the client (the first other
/// address heard from), everything else to `server`. Returns the relay's
/// address, its counters and a stop flag.
fn relay(server: SocketAddr, tail: Tail) -> (SocketAddr, Arc<Counters>, Arc<AtomicBool>) {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    // room for a burst: the relay must lose only what it means to
    let _ = sock.set_recv_buffer_size(8 << 20);
    sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    let sock: UdpSocket = sock.into();
    sock.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
    let addr = sock.local_addr().unwrap();
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (c, s) = (Arc::clone(&counters), Arc::clone(&stop));
    thread::spawn(move || {
        let mut client: Option<SocketAddr> = None;
        let mut seen: HashSet<u32> = HashSet::new();
        let mut dropped: HashSet<u32> = HashSet::new();
        let mut new_bytes = 0u64;
        let mut held: Option<(Instant, Vec<u8>)> = None;
        let mut buf = vec![0u8; 65_536];
        while !s.load(Ordering::SeqCst) {
            if let (Some((at, d)), Some(to)) = (&held, client) {
                if at.elapsed() >= tail.hold_last.unwrap_or_default() {
                    let _ = sock.send_to(d, to);
                    held = None;
                    c.released_last.store(true, Ordering::SeqCst);
                }
            }
            let (n, from) = match sock.recv_from(&mut buf) {
                Ok(r) => r,
                Err(_) => continue,
            };
            let d = &buf[..n];
            if from != server {
                client.get_or_insert(from);
                let _ = sock.send_to(d, server);
                continue;
            }
            let Some(to) = client else { continue };
            // control packets (the high bit set) pass untouched
            if n > HEADER && d[0] & 0x80 == 0 {
                let seq = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) & 0x7FFF_FFFF;
                if seen.insert(seq) {
                    c.packets.fetch_add(1, Ordering::SeqCst);
                    let start = new_bytes;
                    new_bytes += (n - HEADER) as u64;
                    if start + tail.bytes >= tail.total {
                        if new_bytes >= tail.total && tail.hold_last.is_some() {
                            held = Some((Instant::now(), d.to_vec()));
                        } else {
                            dropped.insert(seq);
                            c.dropped.fetch_add(1, Ordering::SeqCst);
                        }
                        continue;
                    }
                } else if dropped.remove(&seq) {
                    c.repaired.fetch_add(1, Ordering::SeqCst);
                }
            }
            let _ = sock.send_to(d, to);
        }
    });
    (addr, counters, stop)
}

/// The server writes `tail.total` bytes through the relay, waits in
/// `wait_sent`, and keeps the connection open until the client has read
/// everything (as a server's cached data channel stays open after its
/// `226`). Checks the three things the early `226` rests on.
fn tail_losses_after_wait_sent_are_repaired(tail: Tail) {
    // At most 40 MB/s: the relay, one thread reading one datagram a call,
    // keeps up, so what it drops is what it chooses to.
    let cfg = || {
        UdtConfig::default()
            .with_mss(MSS)
            .with_congestion(CongestionKind::Ferry { initial_rate: None, max_rate: Some(40e6) })
    };
    let l = UdtListener::bind("127.0.0.1:0".parse().unwrap(), cfg()).unwrap();
    let (via, counters, stop) = relay(l.local_addr(), tail);
    let start = Instant::now();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let total = tail.total;
    let relay_counters = Arc::clone(&counters);
    let server = thread::spawn(move || {
        let s = l.accept_timeout(Some(Duration::from_secs(10))).unwrap().expect("accepted");
        send_pattern(&s, total);
        let waited = s.wait_sent(Duration::from_secs(5));
        let at_return = (start.elapsed(), relay_counters.snapshot(), s.stats().counters);
        // The server's reply would go out here; its connection stays open
        // (a cached data channel) until the client is done.
        let _ = done_rx.recv_timeout(Duration::from_secs(20));
        let _ = s.shutdown();
        (waited.map_err(|e| e.to_string()), at_return)
    });
    let c = UdtStream::connect(via, cfg()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5)));
    let mut got = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let mut failure = None;
    while got < total {
        let n = match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        };
        for (i, b) in buf[..n].iter().enumerate() {
            assert_eq!(*b, pattern(got + i as u64), "byte {}", got + i as u64);
        }
        got += n as u64;
    }
    let elapsed = start.elapsed();
    let _ = done_tx.send(());
    let (waited, (sent_at, (packets, dropped, repaired, released), sender)) = server.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    let end = counters.snapshot();
    eprintln!(
        "wait_sent returned after {sent_at:?}: relay packets {packets} dropped {dropped} repaired {repaired} \
         last released {released}; sender {sender:?}; receiver done after {elapsed:?} with {got} bytes; \
         relay at the end {end:?}"
    );
    // (1) wait_sent returned Ok while dropped packets were still
    // unrepaired (the relay may not even have read the tail yet then)
    waited.expect("wait_sent");
    let (_, dropped_all, repaired_all, _) = end;
    assert!(dropped_all > 0, "the relay dropped nothing: {end:?}");
    assert!(
        repaired < dropped_all,
        "the losses were repaired before wait_sent returned: {repaired} of {dropped_all} (relay then: {dropped} dropped)"
    );
    if tail.hold_last.is_some() {
        assert!(!released, "the receiver saw the end of the stream before wait_sent returned");
    }
    // (2) the receiver still reads every byte, byte-exact
    assert_eq!(got, total, "the receiver got {got} of {total} bytes ({failure:?})");
    assert!(repaired_all >= dropped_all, "relay {end:?}");
    // (3) in a few seconds
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
}

/// The tail's holes are reported by the receiver once the held-back final
/// packet arrives, after `wait_sent` returned: the sender repairs them
/// from the NAK.
#[test]
fn tail_losses_reported_after_wait_sent_are_repaired() {
    let total = 3 * 1000 * PAYLOAD + 777;
    tail_losses_after_wait_sent_are_repaired(Tail {
        total,
        bytes: 12 * PAYLOAD,
        hold_last: Some(Duration::from_millis(100)),
    });
}

/// The whole tail is lost: nothing arrives after the last ACK, and the
/// sender's EXP timer (at least 300 ms) re-sends what is unacknowledged.
#[test]
fn a_tail_lost_whole_after_wait_sent_is_repaired() {
    let total = 2 * 1000 * PAYLOAD + 99;
    tail_losses_after_wait_sent_are_repaired(Tail { total, bytes: 8 * PAYLOAD, hold_last: None });
}
