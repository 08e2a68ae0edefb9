//! The UDT state machine in a simulated network: handshake, byte-exact
//! transfers, sequence-number wrap, loss recovery, shutdown, timeouts.

mod sim;

use ferry_udt::{Config, CongestionKind, ConnectionError, State};
use proptest::prelude::*;
use sim::{LinkConfig, Sim};
use std::time::Duration;

fn cfg() -> Config {
    Config::default()
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn handshake_negotiates_mss_windows_and_ids() {
    let client = Config { mss: 9000, recv_buffer_packets: 5000, ..cfg() };
    let server = Config { mss: 1500, recv_buffer_packets: 3000, ..cfg() };
    let mut s = Sim::new(client, server, LinkConfig::new(10), LinkConfig::new(10), 1234, 1);
    assert!(s.run_until(secs(1), |s| s.client.conn.as_ref().unwrap().is_established()));
    // request, cookie challenge, request with cookie, response: 2 round trips
    assert!(s.now.as_nanos() >= 1_000_000 + 40_000_000 && s.now.as_nanos() < 1_000_000 + 45_000_000);
    let (c, srv) = (s.client(), s.server());
    assert_eq!((c.mss(), srv.mss()), (1500, 1500), "the smaller MSS wins");
    assert_eq!(c.peer_id(), sim::SERVER_ID);
    assert_eq!(srv.peer_id(), 77);
    assert_eq!(srv.peer_key(), (77, 1234));
    assert_eq!(c.stats().flow_window, 3000, "the server's receive buffer");
    assert_eq!(srv.stats().flow_window, 5000, "the client's receive buffer");
    // the handshake's round trip seeds the RTT
    assert!(c.stats().rtt >= Duration::from_millis(20) && c.stats().rtt < Duration::from_millis(25));
}

/// Session 16: an MSS taken from a 9 000-byte path. Two ends that both
/// offer 9 000 use it (8 956 payload bytes a packet) and move the bytes
/// intact; each end's buffers, configured in packets of 1 500, are
/// recounted to hold the same bytes (the flow window the receiver
/// advertises in its ACKs is six times fewer packets, not six times more
/// memory).
#[test]
fn a_9000_byte_mss_is_used_when_both_offer_it_and_buffers_keep_their_bytes() {
    let at_1500 = Config { recv_buffer_packets: 12_000, ..cfg() };
    let big = at_1500.clone().at_mss(9000);
    assert_eq!((big.mss, big.recv_buffer_packets), (9000, (12_000u64 * 1456).div_ceil(8956) as u32));
    let up = LinkConfig::new(5).rate_mbit(400.0).loss(0.005);
    let mut s = Sim::upload(big.clone(), big, up, LinkConfig::new(5), 16 << 20, 99, 3);
    assert!(s.run_transfer(secs(30)), "read {} corrupt={}", s.server.read, s.server.corrupt);
    let (c, srv) = (s.client(), s.server());
    assert_eq!((c.mss(), srv.mss(), c.payload_size()), (9000, 9000, 8956));
    // (12 000 × 1 456) / 8 956 = 1 951 packets at most, never 12 000
    assert!(c.stats().flow_window <= 1951, "{:?}", c.stats());
    assert!(c.stats().retransmitted > 0, "{:?}", c.stats());
}

/// A listener offering 9 000 to a caller that offers 1 500 (libudt, Globus
/// UDT) settles on 1 500, and its receive buffer, counted at 9 000 in its
/// configuration, is recounted at 1 500 before the response names it: the
/// caller sees the flow window an all-1 500 listener gives (to rounding).
#[test]
fn a_listener_at_9000_meeting_1500_answers_with_its_buffer_at_1500() {
    let server = cfg().at_mss(9000);
    assert!(server.recv_buffer_packets < cfg().recv_buffer_packets / 5);
    let mut s = Sim::upload(cfg(), server, LinkConfig::new(5).rate_mbit(100.0), LinkConfig::new(5), 4 << 20, 7, 4);
    assert!(s.run_until(secs(1), |s| s.client.conn.as_ref().unwrap().is_established()));
    assert_eq!((s.client().mss(), s.server().mss()), (1500, 1500));
    // 8 192 packets recounted to 1 332 and back: 8 194 (rounded up twice)
    let w = s.client().stats().flow_window;
    assert!((8192..=8194).contains(&w), "{w}");
    assert!(s.run_transfer(secs(30)), "read {} corrupt={}", s.server.read, s.server.corrupt);
}

#[test]
fn lost_handshake_packets_are_retried_and_repeated_requests_answered() {
    // 40 % loss each way: the caller retries every 250 ms; the listener
    // answers repeats from the existing connection.
    let mut s = Sim::new(cfg(), cfg(), LinkConfig::new(5).loss(0.4), LinkConfig::new(5).loss(0.4), 9, 3);
    assert!(s.run_until(secs(3), |s| s.client.conn.as_ref().unwrap().is_established()));
    assert_eq!(s.server.accepted, 1, "one connection however many requests");
}

#[test]
fn connect_times_out_without_a_listener() {
    let mut s = Sim::new(cfg(), cfg(), LinkConfig::new(5), LinkConfig::new(5), 9, 3);
    s.server.dead = true;
    s.run_until(secs(5), |s| s.client().is_closed());
    assert_eq!(s.client().state(), &State::Closed(ConnectionError::ConnectTimeout));
    assert!(s.now.as_nanos() >= 3_000_000_000 && s.now.as_nanos() < 3_100_000_000, "libudt's 3 s");
}

#[test]
fn version_mismatch_is_rejected() {
    let mut s = Sim::new(cfg(), cfg(), LinkConfig::new(1), LinkConfig::new(1), 9, 3);
    // let the cookie exchange happen, then forge the caller's final request with version 3
    s.run_until(Duration::from_millis(3), |_| false);
    let from = sim::client_addr();
    let mut req = Vec::new();
    let hs = ferry_udt::packet::Handshake {
        version: 3,
        sock_type: 1,
        isn: 5,
        mss: 1500,
        flight_flag_size: 100,
        req_type: 1,
        socket_id: 99,
        cookie: 0,
        peer_ip: [0; 4],
    };
    ferry_udt::packet::encode::handshake(&mut req, &hs, 0, 0);
    let l = s.server.listener.as_ref().unwrap();
    let ferry_udt::ListenerOutput::Reply(challenge) = l.handle(s.now, from, &req) else { panic!() };
    let cookie = i32::from_be_bytes(challenge[16 + 28..16 + 32].try_into().unwrap());
    let hs2 = ferry_udt::packet::Handshake { req_type: -1, cookie, ..hs };
    ferry_udt::packet::encode::handshake(&mut req, &hs2, 0, 0);
    let ferry_udt::ListenerOutput::Reply(rej) = l.handle(s.now, from, &req) else { panic!("no rejection") };
    assert_eq!(&rej[16 + 20..16 + 24], &1002i32.to_be_bytes());
}

#[test]
fn transfer_is_byte_exact_over_a_lossy_reordering_path() {
    let up = LinkConfig::new(10).rate_mbit(100.0).loss(0.01).reorder(0.01, Duration::from_millis(2));
    let down = LinkConfig::new(10).loss(0.01);
    let mut s = Sim::upload(cfg(), cfg(), up, down, 8 << 20, 777, 11);
    assert!(s.run_transfer(secs(30)), "read {} of {} corrupt={}", s.server.read, 8 << 20, s.server.corrupt);
    let st = s.client().stats();
    assert!(st.retransmitted > 0 && st.lost_reported > 0, "{st:?}");
    // both ends closed cleanly: the sender after its data was acknowledged
    assert_eq!(s.client().state(), &State::Closed(ConnectionError::Closed));
    assert_eq!(s.server().state(), &State::Closed(ConnectionError::PeerShutdown));
}

#[test]
fn sequence_numbers_wrap_at_two_to_the_31() {
    // Start 500 packets before the wrap and send 4 MiB (~2900 packets).
    let isn = 0x7FFF_FFFF - 500;
    let up = LinkConfig::new(5).rate_mbit(200.0).loss(0.02);
    let mut s = Sim::upload(cfg(), cfg(), up, LinkConfig::new(5), 4 << 20, isn, 5);
    assert!(s.run_transfer(secs(30)));
    assert!(s.client().stats().retransmitted > 0);
}

#[test]
fn heavy_loss_including_lost_retransmissions_recovers() {
    let up = LinkConfig::new(20).rate_mbit(50.0).loss(0.15);
    let down = LinkConfig::new(20).loss(0.15);
    let mut s = Sim::upload(cfg(), cfg(), up, down, 2 << 20, 42, 8);
    assert!(s.run_transfer(secs(120)), "read {}", s.server.read);
    // at 15 % some retransmissions are lost too, and the periodic NAK repairs them
    assert!(
        s.server().stats().naks_sent > s.client().stats().retransmitted / 10,
        "{:?} {:?} {}",
        s.server().stats(),
        s.client().stats(),
        s.client().congestion().describe()
    );
}

#[test]
fn without_periodic_nak_libudt_style_recovery_still_completes() {
    // libudt 4.11 itself: lost retransmissions wait for the sender's EXP timer.
    let c = Config { periodic_nak: false, ..cfg() };
    let up = LinkConfig::new(20).rate_mbit(50.0).loss(0.05);
    let mut s = Sim::upload(c.clone(), c, up, LinkConfig::new(20), 1 << 20, 42, 8);
    assert!(s.run_transfer(secs(120)), "read {}", s.server.read);
}

#[test]
fn a_silent_peer_is_declared_dead() {
    let mut s = Sim::upload(cfg(), cfg(), LinkConfig::new(5).rate_mbit(50.0), LinkConfig::new(5), 64 << 20, 1, 2);
    s.run_until(Duration::from_millis(300), |_| false);
    assert!(
        s.client().is_established() && s.server.read > 0,
        "{:?} read {} {:?} steps {}",
        s.client().state(),
        s.server.read,
        s.client().stats(),
        s.steps
    );
    s.server.dead = true;
    let t0 = s.now;
    s.run_until(secs(120), |s| s.client().is_closed());
    assert_eq!(s.client().state(), &State::Closed(ConnectionError::PeerDead));
    let waited = s.now.saturating_since(t0);
    // libudt: more than 16 expirations (≥ 300 ms · n each) and 5 s of silence
    assert!(waited > secs(30) && waited < secs(60), "{waited:?}");
    // the client's buffers did not grow while it waited
    assert!(s.client().footprint().send_buffered <= Config::default().send_buffer_bytes);
}

#[test]
fn a_receiver_that_stops_reading_stalls_the_sender_within_its_buffers() {
    let srv = Config { recv_buffer_packets: 64, ..cfg() };
    let mut s = Sim::upload(cfg(), srv, LinkConfig::new(5), LinkConfig::new(5), 4 << 20, 1, 2);
    s.server.app = sim::App::Idle;
    s.run_until(secs(3), |_| false);
    assert!(s.server().readable() <= 64 * 1456);
    assert!(!s.client().is_closed(), "a slow reader is not a dead peer");
    // reading resumes: the window update (and the minimum window of 2) restarts the flow
    s.server.app = sim::App::Receive;
    assert!(s.run_transfer(secs(60)), "read {}", s.server.read);
}

#[test]
fn rendezvous_connects_both_ways() {
    let c = Config { rendezvous: true, ..cfg() };
    let mut s = Sim::new(c.clone(), c.clone(), LinkConfig::new(5), LinkConfig::new(5), 10, 4);
    // replace the listening server with a rendezvous peer
    s.server.listener = None;
    s.server.conn = Some(ferry_udt::Connection::connect(c, sim::SERVER_ID, sim::client_addr(), 20, s.now));
    assert!(s.run_until(secs(2), |s| s.client().is_established() && s.server().is_established()));
    assert_eq!(s.client().peer_id(), sim::SERVER_ID);
    assert_eq!(s.server().peer_id(), 77);
}

#[test]
fn blast_refuses_to_start_without_a_rate() {
    assert!(CongestionKind::parse("blast").is_err());
    assert!(CongestionKind::parse("blast:0").is_err());
    assert_eq!(CongestionKind::parse("blast:1e6"), Ok(CongestionKind::Blast { rate: 1e6 }));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]
    #[test]
    fn any_path_delivers_every_byte_in_order(
        delay in 0u64..30,
        loss in 0.0f64..0.08,
        reorder in 0.0f64..0.05,
        mbit in 10.0f64..200.0,
        size in 1u64..(1 << 20),
        isn in 0u32..0x7FFF_FFFF,
        seed in any::<u64>(),
        udt_cc in any::<bool>(),
    ) {
        let c = Config {
            congestion: if udt_cc { CongestionKind::Udt } else { Config::default().congestion },
            ..cfg()
        };
        let up = LinkConfig::new(delay).rate_mbit(mbit).loss(loss).reorder(reorder, Duration::from_millis(3));
        let down = LinkConfig::new(delay).loss(loss);
        let mut s = Sim::upload(c.clone(), c, up, down, size, isn, seed);
        prop_assert!(s.run_transfer(secs(300)), "read {} of {size}, corrupt={}", s.server.read, s.server.corrupt);
    }
}

/// The data packets a sender paced at `rate` bytes/s sends per wake-up
/// when it is woken at each `poll_timeout` (as the driver does).
fn packets_per_wake(rate: f64) -> Vec<usize> {
    let client = Config { congestion: CongestionKind::Blast { rate }, ..cfg() };
    let mut s = Sim::new(client, cfg(), LinkConfig::new(1), LinkConfig::new(1), 99, 5);
    assert!(s.run_until(secs(1), |s| s.client.conn.as_ref().unwrap().is_established()));
    let mut c = s.client.conn.take().unwrap();
    let mut now = s.now;
    assert_eq!(c.write(now, &vec![7u8; 4 << 20]), 4 << 20);
    let mut buf = Vec::new();
    let mut wakes = Vec::new();
    for _ in 0..40 {
        let mut n = 0;
        while let Some(t) = c.poll_transmit(now, &mut buf) {
            n += usize::from(t.data);
        }
        wakes.push(n);
        now = c.poll_timeout().unwrap().max(now);
        c.handle_timeout(now);
    }
    wakes
}

#[test]
fn fast_pacing_lets_a_gso_send_fall_due_slow_pacing_stays_packet_by_packet() {
    // 10 Gbit/s: the driver is woken once per ~44 packets (one GSO send),
    // not as each falls due (session 13, docs/udt.md "The driver").
    let fast = packets_per_wake(1.25e9);
    let steady = &fast[2..];
    assert!(steady.iter().all(|&n| (40..=64).contains(&n)), "{fast:?}");
    // 100 Mbit/s: one packet per wake (two for a probing pair).
    let slow = packets_per_wake(12.5e6);
    assert!(slow[2..].iter().all(|&n| (1..=2).contains(&n)), "{slow:?}");
}
