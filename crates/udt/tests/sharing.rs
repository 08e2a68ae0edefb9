//! Two flows through one simulated bottleneck (deterministic, time passed
//! in): the default controller must leave room for a second flow and take
//! its share when it is the second. Behaviour checks, not benchmarks.

mod sim;

use ferry_udt::packet::destination_socket_id;
use ferry_udt::{Config, CongestionKind, Connection, Listener, ListenerOutput, Time};
use sim::{pattern, LinkConfig, Pipe};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

const MBIT: f64 = 1e6 / 8.0;

struct Flow {
    kind: CongestionKind,
    start: Time,
    caddr: SocketAddr,
    saddr: SocketAddr,
    listener: Listener,
    client: Option<Connection>,
    server: Option<Connection>,
    written: u64,
    read: u64,
    corrupt: bool,
    /// (time, bytes read)
    samples: Vec<(Time, u64)>,
}

/// The datagram tag of the TCP-like flow (UDT flows are tagged 0, 1, ...).
const TCP_TAG: u8 = 200;
/// Payload bytes of one TCP segment (MTU 1500 less IP and TCP headers).
const TCP_SEGMENT: usize = 1448;

/// A loss-based window flow in the manner of Linux's CUBIC (RFC 8312):
/// slow start until the first loss, then the cubic window growth
/// `W(t) = C·(t − K)³ + W_max` with `C = 0.4`, β = 0.7, and the
/// TCP-friendly (Reno-rate) floor of RFC 8312 §4.2. Loss detection is
/// RACK-like and ideal (every segment is acknowledged on its own; a
/// segment is lost once a later-sent one is acknowledged, or after a
/// timeout), a lost segment is "retransmitted" as new data (the sim counts
/// delivered segments), one window reduction per round trip. No pacing:
/// the window is clocked out by the ACKs, as a Linux sender without fq does.
/// It stands in for iperf3's CUBIC flow of the fairness bench; it is not
/// Linux's CUBIC in every detail (no HyStart, no delayed ACKs).
struct TcpFlow {
    start: Time,
    next_seq: u64,
    cwnd: f64,
    ssthresh: f64,
    w_max: f64,
    epoch: Option<Time>,
    /// seq → time sent
    outstanding: BTreeMap<u64, Time>,
    srtt: Option<Duration>,
    /// Losses of segments sent before this time belong to the last reduction.
    recovery_from: Time,
    delivered: u64,
    losses: u64,
    samples: Vec<(Time, u64)>,
}

impl TcpFlow {
    fn new(start: Time) -> TcpFlow {
        TcpFlow {
            start,
            next_seq: 0,
            cwnd: 10.0,
            // HYSTART=N: leave slow start at N segments (HyStart's delay
            // exit stands in), not at the first loss
            ssthresh: std::env::var("HYSTART").ok().and_then(|v| v.parse().ok()).unwrap_or(f64::INFINITY),
            w_max: 0.0,
            epoch: None,
            outstanding: BTreeMap::new(),
            srtt: None,
            recovery_from: Time::ZERO,
            delivered: 0,
            losses: 0,
            samples: Vec::new(),
        }
    }

    fn rto(&self) -> Duration {
        self.srtt.map_or(Duration::from_secs(1), |r| r * 2 + Duration::from_millis(50))
    }

    fn on_lost(&mut self, now: Time, sent: Time) {
        self.losses += 1;
        if sent < self.recovery_from {
            return;
        }
        // RFC 8312 §4.5-4.6: β = 0.7, fast convergence
        self.w_max = if self.cwnd < self.w_max { self.cwnd * (1.0 + 0.7) / 2.0 } else { self.cwnd };
        self.cwnd = (self.cwnd * 0.7).max(2.0);
        self.ssthresh = self.cwnd;
        self.epoch = Some(now);
        self.recovery_from = now;
    }

    fn on_ack(&mut self, now: Time, seq: u64) {
        let Some(sent) = self.outstanding.remove(&seq) else { return };
        self.delivered += TCP_SEGMENT as u64;
        let rtt = now.saturating_since(sent);
        self.srtt = Some(self.srtt.map_or(rtt, |s| (s * 7 + rtt) / 8));
        // RACK: anything sent before this segment and still unacknowledged is lost
        let lost: Vec<(u64, Time)> = self.outstanding.range(..seq).map(|(&k, &t)| (k, t)).collect();
        for (k, t) in lost {
            self.outstanding.remove(&k);
            self.on_lost(now, t);
        }
        if self.cwnd < self.ssthresh {
            self.cwnd += 1.0;
            return;
        }
        let epoch = *self.epoch.get_or_insert(now);
        let t = now.saturating_since(epoch).as_secs_f64();
        let rtt = self.srtt.unwrap_or(rtt).as_secs_f64();
        let k = (self.w_max * 0.3 / 0.4).cbrt();
        let target = 0.4 * (t + rtt - k).powi(3) + self.w_max;
        let reno = self.w_max * 0.7 + 3.0 * 0.3 / 1.7 * t / rtt;
        let target = target.max(reno).min(self.cwnd * 1.5);
        if target > self.cwnd {
            self.cwnd += (target - self.cwnd) / self.cwnd;
        } else {
            self.cwnd += 0.01 / self.cwnd;
        }
    }

    fn on_timer(&mut self, now: Time) {
        let rto = self.rto();
        let expired: Vec<(u64, Time)> =
            self.outstanding.iter().take_while(|(_, &t)| t + rto <= now).map(|(&k, &t)| (k, t)).collect();
        for (k, t) in expired {
            self.outstanding.remove(&k);
            self.on_lost(now, t);
        }
    }

    fn next_timer(&self) -> Option<Time> {
        self.outstanding.values().next().map(|&t| t + self.rto())
    }
}

/// Flows share the forward bottleneck (`up`) and the return path (`down`);
/// each datagram carries its flow's index in a leading byte the endpoints
/// never see.
struct Shared {
    now: Time,
    flows: Vec<Flow>,
    up: Pipe,
    down: Pipe,
    config: Config,
    next_sample: Time,
    tcp: Option<TcpFlow>,
}

impl Shared {
    fn new(link_mbit: f64, one_way_ms: u64, loss: f64, flows: &[(CongestionKind, u64)]) -> Shared {
        let config = Config::default().for_path(link_mbit * MBIT, Duration::from_millis(2 * one_way_ms));
        let now = Time(1_000_000);
        let flows = flows
            .iter()
            .enumerate()
            .map(|(i, &(kind, start_ms))| Flow {
                kind,
                start: now + Duration::from_millis(start_ms),
                caddr: format!("10.0.0.{}:4000", i + 1).parse().unwrap(),
                saddr: format!("10.0.1.{}:9000", i + 1).parse().unwrap(),
                listener: Listener::new([i as u8 + 1; 32], now),
                client: None,
                server: None,
                written: 0,
                read: 0,
                corrupt: false,
                samples: Vec::new(),
            })
            .collect();
        Shared {
            now,
            flows,
            up: Pipe::new(LinkConfig::new(one_way_ms).rate_mbit(link_mbit).loss(loss), 11),
            down: Pipe::new(LinkConfig::new(one_way_ms), 12),
            config,
            next_sample: now,
            tcp: None,
        }
    }

    /// Replaces the bottleneck's queue (bytes).
    fn with_queue(mut self, link_mbit: f64, one_way_ms: u64, loss: f64, queue: usize) -> Shared {
        self.up = Pipe::new(LinkConfig::new(one_way_ms).rate_mbit(link_mbit).loss(loss).queue(queue), 11);
        self
    }

    /// Adds a CUBIC-like TCP flow starting `start_ms` after the beginning.
    fn with_cubic(mut self, start_ms: u64) -> Shared {
        self.tcp = Some(TcpFlow::new(self.now + Duration::from_millis(start_ms)));
        self
    }

    fn step(&mut self) {
        let now = self.now;
        let mut buf = Vec::with_capacity(70_000);
        for (i, f) in self.flows.iter_mut().enumerate() {
            if f.client.is_none() && now >= f.start {
                let c = Config { congestion: f.kind, ..self.config.clone() };
                f.client = Some(Connection::connect(c, 100 + i as u32, f.saddr, 1000 * (i as u32 + 1), now));
            }
            if let Some(c) = f.client.as_mut().filter(|c| c.is_established()) {
                let k = c.send_space().min(1 << 20);
                if k > 0 {
                    let data: Vec<u8> = (0..k as u64).map(|j| pattern(f.written + j)).collect();
                    f.written += c.write(now, &data) as u64;
                }
            }
            if let Some(c) = f.server.as_mut() {
                buf.resize(1 << 16, 0);
                loop {
                    let k = c.read(&mut buf);
                    if k == 0 {
                        break;
                    }
                    if buf[..k].iter().enumerate().any(|(j, b)| *b != pattern(f.read + j as u64)) {
                        f.corrupt = true;
                    }
                    f.read += k as u64;
                }
            }
            let tag = i as u8;
            for (conn, pipe) in [(f.client.as_mut(), &mut self.up), (f.server.as_mut(), &mut self.down)] {
                let Some(c) = conn else { continue };
                while c.poll_transmit(now, &mut buf).is_some() {
                    let mut pkt = Vec::with_capacity(buf.len() + 1);
                    pkt.push(tag);
                    pkt.extend_from_slice(&buf);
                    pipe.send(now, pkt);
                }
            }
        }
        if let Some(t) = self.tcp.as_mut().filter(|t| now >= t.start) {
            t.on_timer(now);
            while (t.outstanding.len() as f64) < t.cwnd.floor() {
                let mut pkt = vec![0u8; TCP_SEGMENT + 20];
                pkt[0] = TCP_TAG;
                pkt[1..9].copy_from_slice(&t.next_seq.to_be_bytes());
                t.outstanding.insert(t.next_seq, now);
                t.next_seq += 1;
                self.up.send(now, pkt);
            }
        }
        if now >= self.next_sample {
            for f in &mut self.flows {
                f.samples.push((now, f.read));
            }
            if let Some(t) = self.tcp.as_mut() {
                t.samples.push((now, t.delivered));
            }
            self.next_sample = now + Duration::from_millis(100);
        }
        let mut next =
            [self.up.next_time(), self.down.next_time(), Some(self.next_sample)].into_iter().flatten().min().unwrap();
        for f in &self.flows {
            for t in [f.client.as_ref(), f.server.as_ref()].into_iter().flatten().filter_map(|c| c.poll_timeout()) {
                next = next.min(t);
            }
            if f.client.is_none() {
                next = next.min(f.start);
            }
        }
        if let Some(t) = &self.tcp {
            next = next.min(if now < t.start { t.start } else { t.next_timer().unwrap_or(next) });
        }
        self.now = next.max(now);
        let now = self.now;
        while let Some(p) = self.up.pop_due(now) {
            if p[0] == TCP_TAG {
                // the receiver acknowledges each segment at once (40-byte ACK)
                let mut a = vec![0u8; 40];
                a[..9].copy_from_slice(&p[..9]);
                self.down.send(now, a);
                continue;
            }
            let f = &mut self.flows[p[0] as usize];
            let pkt = &p[1..];
            if destination_socket_id(pkt) == Some(0) {
                match f.listener.handle(now, f.caddr, pkt) {
                    ListenerOutput::Reply(d) => {
                        let mut r = vec![p[0]];
                        r.extend_from_slice(&d);
                        self.down.send(now, r)
                    }
                    ListenerOutput::Accept(hs) => match &mut f.server {
                        Some(c) => c.handle_repeated_request(),
                        None => f.server = Some(Connection::accept(self.config.clone(), 7, f.caddr, &hs, now)),
                    },
                    ListenerOutput::Drop => {}
                }
            } else if let Some(c) = f.server.as_mut() {
                c.handle_datagram(now, f.caddr, pkt);
            }
        }
        while let Some(p) = self.down.pop_due(now) {
            if p[0] == TCP_TAG {
                if let Some(t) = self.tcp.as_mut() {
                    t.on_ack(now, u64::from_be_bytes(p[1..9].try_into().unwrap()));
                }
                continue;
            }
            let f = &mut self.flows[p[0] as usize];
            if let Some(c) = f.client.as_mut() {
                c.handle_datagram(now, f.saddr, &p[1..]);
            }
        }
        for f in &mut self.flows {
            for c in [f.client.as_mut(), f.server.as_mut()].into_iter().flatten() {
                if c.poll_timeout().is_some_and(|t| t <= now) {
                    c.handle_timeout(now);
                }
            }
        }
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.step();
        }
    }

    /// Goodput of flow `i` between `from` and `to` after the start, bytes/s.
    fn goodput(&self, i: usize, from: Duration, to: Duration) -> f64 {
        let t0 = Time(1_000_000) + from;
        let t1 = Time(1_000_000) + to;
        let s = &self.flows[i].samples;
        let at = |t: Time| s.iter().rev().find(|(st, _)| *st <= t).copied().unwrap_or((t, 0));
        let (a, b) = (at(t0), at(t1));
        (b.1 - a.1) as f64 / b.0.saturating_since(a.0).as_secs_f64()
    }

    /// Goodput of the TCP flow between `from` and `to` after the start, bytes/s.
    fn tcp_goodput(&self, from: Duration, to: Duration) -> f64 {
        let t0 = Time(1_000_000) + from;
        let t1 = Time(1_000_000) + to;
        let s = &self.tcp.as_ref().expect("a tcp flow").samples;
        let at = |t: Time| s.iter().rev().find(|(st, _)| *st <= t).copied().unwrap_or((t, 0));
        let (a, b) = (at(t0), at(t1));
        (b.1 - a.1) as f64 / b.0.saturating_since(a.0).as_secs_f64()
    }
}

fn ferry() -> CongestionKind {
    CongestionKind::Ferry { initial_rate: None, max_rate: None }
}

#[test]
fn two_ferry_flows_share_a_bottleneck() {
    // 100 Mbit/s, 20 ms one way, a queue of one RTT; the second flow starts
    // 5 s after the first. Over the last 20 s of 40 each has at least a
    // quarter of the link and together they keep it ≥ 85 % busy.
    let mut s = Shared::new(100.0, 20, 0.0, &[(ferry(), 0), (ferry(), 5000)]);
    s.run_for(Duration::from_secs(40));
    let cap = 100.0 * MBIT * 1456.0 / 1500.0;
    let a = s.goodput(0, Duration::from_secs(20), Duration::from_secs(40)) / cap;
    let b = s.goodput(1, Duration::from_secs(20), Duration::from_secs(40)) / cap;
    let describe = |i: usize| s.flows[i].client.as_ref().unwrap().congestion().describe();
    assert!(!s.flows[0].corrupt && !s.flows[1].corrupt);
    assert!(a >= 0.25 && b >= 0.25, "shares {a:.3} / {b:.3}: {} | {}", describe(0), describe(1));
    assert!(a + b >= 0.85, "together {:.3}: {} | {}", a + b, describe(0), describe(1));
}

#[test]
fn ferry_leaves_room_for_a_udt_flow() {
    // Against UDT's own DAIMD (loss-driven, like a TCP) on a clean path
    // the rate model must not starve it: DAIMD keeps at least a tenth.
    let mut s = Shared::new(100.0, 20, 0.0, &[(ferry(), 0), (CongestionKind::Udt, 2000)]);
    s.run_for(Duration::from_secs(30));
    let cap = 100.0 * MBIT * 1456.0 / 1500.0;
    let a = s.goodput(0, Duration::from_secs(10), Duration::from_secs(30)) / cap;
    let b = s.goodput(1, Duration::from_secs(10), Duration::from_secs(30)) / cap;
    let describe = |i: usize| s.flows[i].client.as_ref().unwrap().congestion().describe();
    assert!(b >= 0.1, "udt got {b:.3}, ferry {a:.3}: {} | {}", describe(0), describe(1));
    assert!(a + b >= 0.8, "together {:.3}", a + b);
}

#[test]
#[ignore = "prints shares, asserts nothing"]
fn trace_ferry_against_a_loss_based_flow_at_the_fairness_bench_path() {
    // bench/results/udt-fairness: 150 Mbit/s, 30 ms one way, 60 s; there
    // CUBIC got 1.6 Mbit/s beside Ferry's 132.6. DAIMD stands in for a
    // loss-based flow; the queue is the sim's default (one BDP).
    for start in [0u64, 2000] {
        let mut s = Shared::new(150.0, 30, 0.0, &[(CongestionKind::Udt, start), (ferry(), 2000 - start)]);
        s.run_for(Duration::from_secs(60));
        let cap = 150.0 * MBIT * 1456.0 / 1500.0;
        let d = s.goodput(0, Duration::from_secs(10), Duration::from_secs(60)) / cap;
        let f = s.goodput(1, Duration::from_secs(10), Duration::from_secs(60)) / cap;
        let describe = |i: usize| s.flows[i].client.as_ref().unwrap().congestion().describe();
        println!("daimd starts at {start} ms: daimd {d:.3} ferry {f:.3}\n  {}\n  {}", describe(0), describe(1));
    }
}

/// The fairness bench's path with a CUBIC-like flow (see [`TcpFlow`]):
/// 150 Mbit/s, 30 ms one way, ferry-wan's default queue (200 ms of the
/// rate + 256 KiB, 3.8 BDPs), 60 s; CUBIC starts first as iperf3 does in
/// the bench. Prints each flow's share of the link from 10 s on, and the
/// shares every 5 s (`cargo nextest run -p ferry-udt --test sharing
/// trace_ferry_against_cubic --run-ignored ignored-only --no-capture`;
/// `SECS=90` for a longer run, `HYSTART=1000` for a CUBIC that leaves slow
/// start at 1 000 segments instead of at its first loss, `TRACE=1` for
/// both flows' state every second).
#[test]
#[ignore = "prints shares, asserts nothing"]
fn trace_ferry_against_cubic_at_the_fairness_bench_path() {
    let (mbit, one_way) = (150.0, 30);
    let queue = (mbit * MBIT * 0.2) as usize + 262_144;
    for (label, q) in [("ferry-wan default queue", queue), ("one-BDP queue", (mbit * MBIT * 0.06) as usize)] {
        let secs = std::env::var("SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
        let (f, c, s) = ferry_against_cubic(mbit, one_way, q, secs);
        println!(
            "{label}: ferry {f:.3} cubic {c:.3} of the link\n  {}",
            s.flows[0].client.as_ref().unwrap().congestion().describe()
        );
        let cap = mbit * MBIT * 1456.0 / 1500.0;
        let mut line = String::from("  5 s shares ferry/cubic:");
        for k in 0..secs / 5 {
            let (a, b) = (Duration::from_secs(5 * k), Duration::from_secs(5 * k + 5));
            line += &format!(" {:.2}/{:.2}", s.goodput(0, a, b) / cap, s.tcp_goodput(a, b) / cap);
        }
        println!("{line}");
    }
}

#[test]
fn ferry_leaves_a_cubic_flow_its_share_at_the_fairness_bench_path() {
    // The fairness bench (150 Mbit/s, 30 ms one way, ferry-wan's default
    // queue of 3.8 BDPs): before the standing-queue rules the rate model
    // kept the queue for itself and the CUBIC-like flow fell to 0.12 of the
    // link in the last 5 s of 60 (the bench: 0.11 over 60 s). From 30 s to
    // 90 s each flow now has between a quarter and three quarters.
    let queue = (150.0 * MBIT * 0.2) as usize + 262_144;
    let mut s = Shared::new(150.0, 30, 0.0, &[(ferry(), 300)]).with_queue(150.0, 30, 0.0, queue).with_cubic(0);
    s.run_for(Duration::from_secs(90));
    let cap = 150.0 * MBIT * 1456.0 / 1500.0;
    let (a, b) = (Duration::from_secs(30), Duration::from_secs(90));
    let f = s.goodput(0, a, b) / cap;
    let c = s.tcp_goodput(a, b) / cap;
    let describe = s.flows[0].client.as_ref().unwrap().congestion().describe();
    assert!(!s.flows[0].corrupt);
    assert!(c >= 0.25, "cubic {c:.3}, ferry {f:.3}: {describe}");
    assert!((0.25..=0.75).contains(&f), "ferry {f:.3}, cubic {c:.3}: {describe}");
    assert!(f + c >= 0.85, "together {:.3}", f + c);
}

/// Ferry (starting 300 ms after a CUBIC-like flow) on a shared
/// bottleneck for `secs`: each one's share of the link from 10 s to the end.
fn ferry_against_cubic(mbit: f64, one_way_ms: u64, queue: usize, secs: u64) -> (f64, f64, Shared) {
    let mut s =
        Shared::new(mbit, one_way_ms, 0.0, &[(ferry(), 300)]).with_queue(mbit, one_way_ms, 0.0, queue).with_cubic(0);
    for k in 0..secs {
        s.run_for(Duration::from_secs(1));
        if std::env::var("TRACE").is_ok() {
            let t = s.tcp.as_ref().unwrap();
            let st = s.flows[0].client.as_ref().map(|c| c.stats());
            println!(
                "{k:3}s qdrop {} cubic cwnd {:.0} srtt {:?} losses {} | ferry lost {:?} | {}",
                s.up.dropped_queue,
                t.cwnd,
                t.srtt,
                t.losses,
                st.map(|st| st.lost_reported),
                s.flows[0].client.as_ref().map(|c| c.congestion().describe()).unwrap_or_default()
            );
        }
    }
    assert!(!s.flows[0].corrupt);
    let cap = mbit * MBIT * 1456.0 / 1500.0;
    let from = Duration::from_secs(10);
    let to = Duration::from_secs(secs);
    (s.goodput(0, from, to) / cap, s.tcp_goodput(from, to) / cap, s)
}
