//! Hostile input against both ends of a transfer in progress: garbage,
//! truncated datagrams, a third address, wrong socket ids, forged
//! handshakes, absurd NAK ranges, NAK floods, ACKs for data never sent.
//! Nothing may panic, no state may grow past the configured bounds, and
//! the transfer completes byte-exact.

mod sim;

use ferry_udt::packet::{encode, AckInfo, Handshake};
use ferry_udt::{Config, SeqNo};
use sim::{LinkConfig, Rng, Sim, SERVER_ID};
use std::net::SocketAddr;
use std::time::Duration;

const CLIENT_ID: u32 = 77;

fn nak(words: &[u32], dest: u32) -> Vec<u8> {
    let mut d = Vec::new();
    encode::nak(&mut d, words, 0, dest);
    d
}

#[test]
fn transfer_survives_a_stream_of_hostile_datagrams() {
    let up = LinkConfig::new(10).rate_mbit(100.0).loss(0.005);
    let mut s = Sim::upload(Config::default(), Config::default(), up, LinkConfig::new(10), 16 << 20, 1000, 21);
    let mut rng = Rng::new(7);
    let stranger: SocketAddr = "10.9.9.9:4000".parse().unwrap();
    let (client, server) = (sim::client_addr(), sim::server_addr());
    let mut next = s.now;
    let mut max_send_loss = 0;
    let mut max_recv_ranges = 0;
    let mut max_control = 0;
    let limit = s.now + Duration::from_secs(60);
    while s.done_at.is_none() && s.now < limit {
        if !s.step() {
            break;
        }
        if s.now < next || !s.client().is_established() || s.server.conn.is_none() {
            continue;
        }
        next = s.now + Duration::from_millis(5);
        // 1. random garbage of random length, to both ends, from the right address
        for _ in 0..4 {
            let len = (rng.next_u64() % 100) as usize;
            let g: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            s.inject_to_server(client, &g);
            s.inject_to_client(server, &g);
        }
        // 2. a valid-looking keep-alive from a third address, and with a wrong socket id
        let mut ka = Vec::new();
        encode::keep_alive(&mut ka, 0, SERVER_ID);
        s.inject_to_server(stranger, &ka);
        encode::keep_alive(&mut ka, 0, SERVER_ID + 1);
        s.inject_to_server(client, &ka);
        // 3. absurd NAKs to the sender: reversed range, beyond anything sent,
        //    a range with no end, the whole sequence space
        for words in
            [vec![0x8000_0000 | 500, 400], vec![0x7FFF_FFF0], vec![0x8000_0000 | 1000], vec![0x8000_0000, 0x7FFF_FFFF]]
        {
            s.inject_to_client(server, &nak(&words, CLIENT_ID));
        }
        // 4. a NAK flood naming every packet in flight, many times over:
        //    the loss list is bounded by what is in flight
        let ack_point = 1000u32; // ISN; most of these are acknowledged already
        let first = SeqNo::from_masked(ack_point + (s.client().stats().packets_sent as u32 / 2));
        for _ in 0..20 {
            s.inject_to_client(server, &nak(&[first.get() | 0x8000_0000, first.add_packets(3000).get()], CLIENT_ID));
        }
        // 5. an ACK for data never sent, a light ACK too, and a huge window
        let mut a = Vec::new();
        let info = AckInfo { rtt_us: -5, rtt_var_us: i32::MAX, avail_buf: i32::MAX, rates: Some((-1, i32::MAX)) };
        encode::ack(&mut a, 9, SeqNo::from_masked(0x7000_0000), &info, 0, CLIENT_ID);
        s.inject_to_client(server, &a);
        encode::light_ack(&mut a, SeqNo::from_masked(0x7000_0000), 0, CLIENT_ID);
        s.inject_to_client(server, &a);
        // 6. ACK2s for ACKs never sent, drop requests, and a handshake to the connection
        encode::ack2(&mut a, rng.next_u64() as u32, 0, SERVER_ID);
        s.inject_to_server(client, &a);
        encode::drop_request(&mut a, 1, SeqNo::from_masked(0), SeqNo::from_masked(0x7FFF_FFFF), 0, SERVER_ID);
        s.inject_to_server(client, &a);
        // 7. forged connection requests: with a guessed cookie, from another address
        let hs = Handshake {
            version: 4,
            sock_type: 1,
            isn: 5,
            mss: 1500,
            flight_flag_size: 8192,
            req_type: -1,
            socket_id: 4242,
            cookie: rng.next_u64() as i32,
            peer_ip: [0; 4],
        };
        encode::handshake(&mut a, &hs, 0, 0);
        s.inject_to_server(stranger, &a);
        s.inject_to_server(client, &a);
        let f = s.client().footprint();
        max_send_loss = max_send_loss.max(f.send_loss_packets);
        max_control = max_control.max(f.control_queue.max(s.server().footprint().control_queue));
        max_recv_ranges = max_recv_ranges.max(s.server().footprint().recv_loss_ranges);
    }
    assert!(s.done_at.is_some() && !s.server.corrupt, "read {} corrupt {}", s.server.read, s.server.corrupt);
    assert_eq!(s.server.accepted, 1, "no forged request was accepted");
    let cfg = Config::default();
    assert!(max_send_loss <= u64::from(cfg.flight_flag_size), "sender loss list {max_send_loss}");
    assert!(max_recv_ranges <= cfg.recv_buffer_packets as usize);
    assert!(max_control <= cfg.max_control_queue);
    let dropped = s.client().stats().dropped + s.server().stats().dropped;
    assert!(dropped > 1000, "hostile packets were counted as dropped: {dropped}");
}

#[test]
fn a_huge_advertised_window_is_clamped() {
    let mut s =
        Sim::upload(Config::default(), Config::default(), LinkConfig::new(5), LinkConfig::new(5), 1 << 20, 3, 3);
    s.run_until(Duration::from_millis(100), |s| s.client.conn.as_ref().is_some_and(|c| c.is_established()));
    let mut a = Vec::new();
    let info = AckInfo { rtt_us: 1000, rtt_var_us: 100, avail_buf: i32::MAX, rates: None };
    // an ACK that acknowledges nothing new but sets the window
    encode::ack(&mut a, 1, SeqNo::from_masked(3), &info, 0, CLIENT_ID);
    s.inject_to_client(sim::server_addr(), &a);
    assert!(s.client().stats().flow_window <= i64::from(Config::default().flight_flag_size));
}

#[test]
fn truncated_prefixes_of_every_packet_type_are_rejected_without_panic() {
    let mut pkts = Vec::new();
    let mut d = Vec::new();
    encode::ack(
        &mut d,
        1,
        SeqNo::from_masked(5),
        &AckInfo { rtt_us: 1, rtt_var_us: 1, avail_buf: 5, rates: Some((1, 1)) },
        0,
        1,
    );
    pkts.push(d.clone());
    encode::handshake(&mut d, &Handshake::default(), 0, 1);
    pkts.push(d.clone());
    encode::nak(&mut d, &[0x8000_0001, 9, 12], 0, 1);
    pkts.push(d.clone());
    encode::drop_request(&mut d, 1, SeqNo::from_masked(1), SeqNo::from_masked(2), 0, 1);
    pkts.push(d.clone());
    for p in pkts {
        for n in 0..p.len() {
            let _ = ferry_udt::Packet::decode(&p[..n]);
        }
    }
}
