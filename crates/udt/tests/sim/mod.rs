//! A deterministic simulation of two UDT endpoints on an emulated path:
//! a simulated clock, a link per direction with a one-way delay, a
//! bottleneck rate with a tail-drop queue, random loss and reordering, all
//! driven by a seeded generator. No sockets, no sleeps: a 20-second
//! transfer at 200 Mbit/s runs in a second or two.

#![allow(dead_code)]

use ferry_udt::packet::destination_socket_id;
use ferry_udt::{Config, Connection, Listener, ListenerOutput, Time};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::Duration;

/// xorshift64*: deterministic, good enough for loss decisions.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// One direction of the path.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    pub delay: Duration,
    /// Bottleneck, bytes per second (None: unlimited).
    pub rate: Option<f64>,
    /// Queue in front of the bottleneck, bytes.
    pub queue: usize,
    pub loss: f64,
    /// Probability that a packet is held back by `reorder_delay` extra.
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Deliveries happen only at multiples of this (a user-space forwarder
    /// or a receiver that wakes every tick and reads what arrived in a
    /// batch): arrivals come in bursts, as on ferry-wan.
    pub tick: Option<Duration>,
}

impl LinkConfig {
    pub fn new(delay_ms: u64) -> LinkConfig {
        LinkConfig {
            delay: Duration::from_millis(delay_ms),
            rate: None,
            queue: 1 << 30,
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(1),
            tick: None,
        }
    }

    pub fn tick(mut self, t: Duration) -> LinkConfig {
        self.tick = Some(t);
        self
    }

    pub fn rate_mbit(mut self, mbit: f64) -> LinkConfig {
        let r = mbit * 1e6 / 8.0;
        self.rate = Some(r);
        // a queue of one bandwidth-delay product at the given delay, at least 64 packets
        self.queue = ((r * self.delay.as_secs_f64() * 2.0) as usize).max(64 * 1500);
        self
    }

    pub fn loss(mut self, p: f64) -> LinkConfig {
        self.loss = p;
        self
    }

    pub fn reorder(mut self, p: f64, extra: Duration) -> LinkConfig {
        self.reorder = p;
        self.reorder_delay = extra;
        self
    }

    pub fn queue(mut self, bytes: usize) -> LinkConfig {
        self.queue = bytes;
        self
    }
}

#[derive(Debug)]
pub struct Pipe {
    cfg: LinkConfig,
    link_free: Time,
    queue: BinaryHeap<Reverse<(Time, u64, Vec<u8>)>>,
    order: u64,
    pub sent: u64,
    pub delivered_bytes: u64,
    pub dropped_loss: u64,
    pub dropped_queue: u64,
    rng: Rng,
}

impl Pipe {
    pub fn new(cfg: LinkConfig, seed: u64) -> Pipe {
        Pipe {
            cfg,
            link_free: Time::ZERO,
            queue: BinaryHeap::new(),
            order: 0,
            sent: 0,
            delivered_bytes: 0,
            dropped_loss: 0,
            dropped_queue: 0,
            rng: Rng::new(seed),
        }
    }

    pub fn send(&mut self, now: Time, pkt: Vec<u8>) {
        self.sent += 1;
        if self.rng.chance(self.cfg.loss) {
            self.dropped_loss += 1;
            return;
        }
        // IP + UDP headers count on the wire
        let wire = pkt.len() + 28;
        let mut at = now;
        if let Some(rate) = self.cfg.rate {
            let start = self.link_free.max(now);
            let backlog = (self.link_free.as_nanos().saturating_sub(now.as_nanos()) as f64 * rate / 1e9) as usize;
            if backlog + wire > self.cfg.queue {
                self.dropped_queue += 1;
                return;
            }
            self.link_free = start + Duration::from_secs_f64(wire as f64 / rate);
            at = self.link_free;
        }
        at += self.cfg.delay;
        if self.rng.chance(self.cfg.reorder) {
            at += self.cfg.reorder_delay;
        }
        if let Some(t) = self.cfg.tick.map(|t| t.as_nanos() as u64).filter(|&t| t > 0) {
            at = Time(at.as_nanos().div_ceil(t) * t);
        }
        self.order += 1;
        self.queue.push(Reverse((at, self.order, pkt)));
    }

    pub fn next_time(&self) -> Option<Time> {
        self.queue.peek().map(|Reverse((t, _, _))| *t)
    }

    pub fn pop_due(&mut self, now: Time) -> Option<Vec<u8>> {
        if self.next_time()? <= now {
            let Reverse((_, _, p)) = self.queue.pop()?;
            self.delivered_bytes += p.len() as u64;
            Some(p)
        } else {
            None
        }
    }
}

pub const CLIENT: &str = "10.0.0.1:4000";
pub const SERVER: &str = "10.0.0.2:9000";

pub fn client_addr() -> SocketAddr {
    CLIENT.parse().unwrap()
}

pub fn server_addr() -> SocketAddr {
    SERVER.parse().unwrap()
}

/// The byte at offset `i` of every test stream: a cheap hash, so a
/// misplaced or duplicated packet is caught.
pub fn pattern(i: u64) -> u8 {
    let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 56) as u8 ^ (i as u8)
}

/// What an endpoint's application does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum App {
    /// Write `n` pattern bytes, then close.
    Send(u64),
    /// Read and check everything.
    Receive,
    Idle,
}

#[derive(Debug)]
pub struct Side {
    pub addr: SocketAddr,
    pub conn: Option<Connection>,
    pub listener: Option<Listener>,
    pub config: Config,
    pub app: App,
    pub written: u64,
    pub read: u64,
    pub corrupt: bool,
    pub closed_app: bool,
    /// Silent: drops everything it would send or receive.
    pub dead: bool,
    pub accepted: u32,
}

impl Side {
    fn new(addr: SocketAddr, config: Config, app: App) -> Side {
        Side {
            addr,
            conn: None,
            listener: None,
            config,
            app,
            written: 0,
            read: 0,
            corrupt: false,
            closed_app: false,
            dead: false,
            accepted: 0,
        }
    }
}

#[derive(Debug)]
pub struct Sim {
    pub now: Time,
    pub client: Side,
    pub server: Side,
    /// client → server and server → client.
    pub up: Pipe,
    pub down: Pipe,
    buf: Vec<u8>,
    pub steps: u64,
    /// Time the receiving application finished reading (all bytes and EOF).
    pub done_at: Option<Time>,
    /// First time the receiver had read anything.
    pub first_byte_at: Option<Time>,
    /// (time, bytes read) samples every `sample_every`.
    pub samples: Vec<(Time, u64)>,
    pub sample_every: Duration,
    /// The client runs only at multiples of this (a sender thread that a
    /// loaded host schedules once per period): its timers fire at the next
    /// multiple after they are due (give the down link the same `tick` so
    /// arrivals wait for it too). Zero: at once.
    pub client_late: Duration,
    next_sample: Time,
}

pub const SERVER_ID: u32 = 0x0400_0000;

impl Sim {
    /// A client that connects to a listening server over `up`/`down`.
    pub fn new(client: Config, server: Config, up: LinkConfig, down: LinkConfig, isn: u32, seed: u64) -> Sim {
        let mut s = Sim {
            now: Time(1_000_000),
            client: Side::new(client_addr(), client, App::Idle),
            server: Side::new(server_addr(), server, App::Idle),
            up: Pipe::new(up, seed),
            down: Pipe::new(down, seed.wrapping_add(0x5555)),
            buf: Vec::with_capacity(70_000),
            steps: 0,
            done_at: None,
            first_byte_at: None,
            samples: Vec::new(),
            sample_every: Duration::from_secs(1),
            client_late: Duration::ZERO,
            next_sample: Time::ZERO,
        };
        s.server.listener = Some(Listener::new([seed as u8; 32], s.now));
        s.client.conn = Some(Connection::connect(s.client.config.clone(), 77, server_addr(), isn, s.now));
        s
    }

    /// Client sends `n` bytes to the server.
    pub fn upload(
        client: Config,
        server: Config,
        up: LinkConfig,
        down: LinkConfig,
        n: u64,
        isn: u32,
        seed: u64,
    ) -> Sim {
        let mut s = Sim::new(client, server, up, down, isn, seed);
        s.client.app = App::Send(n);
        s.server.app = App::Receive;
        s
    }

    fn deliver_to_server(&mut self, pkt: Vec<u8>) {
        let now = self.now;
        let from = self.client.addr;
        if self.server.dead {
            return;
        }
        let dest = destination_socket_id(&pkt);
        if dest == Some(0) {
            let Some(l) = &self.server.listener else { return };
            match l.handle(now, from, &pkt) {
                ListenerOutput::Reply(d) => self.down.send(now, d),
                ListenerOutput::Accept(hs) => match &mut self.server.conn {
                    Some(c) if c.peer_key() == (hs.socket_id as u32, hs.isn as u32 & 0x7FFF_FFFF) => {
                        c.handle_repeated_request()
                    }
                    Some(_) => self.down.send(now, Listener::reject(&hs)),
                    None => {
                        self.server.accepted += 1;
                        self.server.conn =
                            Some(Connection::accept(self.server.config.clone(), SERVER_ID, from, &hs, now));
                    }
                },
                ListenerOutput::Drop => {}
            }
        } else if let Some(c) = &mut self.server.conn {
            c.handle_datagram(now, from, &pkt);
        }
    }

    fn deliver_to_client(&mut self, pkt: Vec<u8>) {
        if self.client.dead {
            return;
        }
        if let Some(c) = &mut self.client.conn {
            c.handle_datagram(self.now, self.server.addr, &pkt);
        }
    }

    /// Inject a datagram at the server as if it came from `from`.
    pub fn inject_to_server(&mut self, from: SocketAddr, pkt: &[u8]) {
        if from == self.client.addr {
            self.deliver_to_server(pkt.to_vec());
        } else if let Some(c) = &mut self.server.conn {
            c.handle_datagram(self.now, from, pkt);
        } else if let Some(l) = &self.server.listener {
            if let ListenerOutput::Accept(_) = l.handle(self.now, from, pkt) {
                panic!("listener accepted a forged request");
            }
        }
    }

    pub fn inject_to_client(&mut self, from: SocketAddr, pkt: &[u8]) {
        if let Some(c) = &mut self.client.conn {
            c.handle_datagram(self.now, from, pkt);
        }
    }

    fn run_app(side: &mut Side, now: Time, buf: &mut Vec<u8>) {
        let Some(c) = side.conn.as_mut() else { return };
        match side.app {
            App::Send(n) => {
                if c.is_established() && side.written < n {
                    let space = c.send_space();
                    if space > 0 {
                        let k = (space as u64).min(n - side.written).min(1 << 20) as usize;
                        buf.clear();
                        buf.extend((0..k as u64).map(|i| pattern(side.written + i)));
                        let w = c.write(now, buf);
                        side.written += w as u64;
                    }
                }
                if side.written == n && !side.closed_app && c.is_established() {
                    side.closed_app = true;
                    c.close(now);
                }
            }
            App::Receive => {
                buf.resize(1 << 16, 0);
                loop {
                    let k = c.read(buf);
                    if k == 0 {
                        break;
                    }
                    for (i, b) in buf[..k].iter().enumerate() {
                        if *b != pattern(side.read + i as u64) {
                            side.corrupt = true;
                        }
                    }
                    side.read += k as u64;
                }
            }
            App::Idle => {}
        }
    }

    fn flush(&mut self) {
        let now = self.now;
        for client in [true, false] {
            loop {
                let side = if client { &mut self.client } else { &mut self.server };
                let Some(c) = side.conn.as_mut() else { break };
                let Some(_t) = c.poll_transmit(now, &mut self.buf) else { break };
                if side.dead {
                    continue;
                }
                let pkt = self.buf.clone();
                if client {
                    self.up.send(now, pkt);
                } else {
                    self.down.send(now, pkt);
                }
            }
        }
    }

    /// One event: advance to the earliest due time and process it.
    /// Returns false when nothing is scheduled.
    pub fn step(&mut self) -> bool {
        self.steps += 1;
        let mut buf = std::mem::take(&mut self.buf);
        Self::run_app(&mut self.client, self.now, &mut buf);
        Self::run_app(&mut self.server, self.now, &mut buf);
        self.buf = buf;
        self.flush();
        if self.server.app == App::Receive {
            if self.first_byte_at.is_none() && self.server.read > 0 {
                self.first_byte_at = Some(self.now);
            }
            if let App::Send(n) = self.client.app {
                if self.done_at.is_none()
                    && self.server.read == n
                    && self.server.conn.as_ref().is_some_and(|c| c.at_eof())
                {
                    self.done_at = Some(self.now);
                }
            }
        }
        if self.now >= self.next_sample {
            self.samples.push((self.now, self.server.read));
            self.next_sample = self.now + self.sample_every;
        }
        let mut next: Option<Time> = None;
        let mut consider = |t: Option<Time>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: Time| n.min(t)));
            }
        };
        consider(self.up.next_time());
        consider(self.down.next_time());
        let period = self.client_late.as_nanos() as u64;
        let wake = |t: Time| if period == 0 { t } else { Time(t.as_nanos().div_ceil(period) * period) };
        consider(self.client.conn.as_ref().and_then(|c| c.poll_timeout()).map(wake));
        consider(self.server.conn.as_ref().and_then(|c| c.poll_timeout()));
        let Some(t) = next else { return false };
        // never stand still: at least 1 µs per step when a timer is in the past
        self.now = t.max(self.now);
        while let Some(p) = self.up.pop_due(self.now) {
            self.deliver_to_server(p);
        }
        while let Some(p) = self.down.pop_due(self.now) {
            self.deliver_to_client(p);
        }
        let now = self.now;
        for c in [self.client.conn.as_mut(), self.server.conn.as_mut()].into_iter().flatten() {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
        true
    }

    /// Runs until `done` or `limit` of simulated time passed.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Sim) -> bool) -> bool {
        let end = self.now + limit;
        let mut stuck = 0u32;
        while self.now < end {
            if done(self) {
                return true;
            }
            let before = self.now;
            if !self.step() {
                return done(self);
            }
            if self.now == before {
                stuck += 1;
                assert!(stuck < 1_000_000, "simulation does not advance at {:?}", self.now);
            } else {
                stuck = 0;
            }
        }
        done(self)
    }

    /// Runs an upload to completion (or `limit`); true if every byte arrived intact.
    pub fn run_transfer(&mut self, limit: Duration) -> bool {
        self.run_until(limit, |s| s.done_at.is_some());
        self.done_at.is_some() && !self.server.corrupt
    }

    pub fn client(&self) -> &Connection {
        self.client.conn.as_ref().expect("client connection")
    }

    pub fn server(&self) -> &Connection {
        self.server.conn.as_ref().expect("server connection")
    }

    /// Receiver goodput between two times, bytes per second.
    pub fn goodput_between(&self, from: Time, to: Time) -> f64 {
        let at = |t: Time| self.samples.iter().rev().find(|(st, _)| *st <= t).map_or(0, |&(_, b)| b);
        let t0 = self.samples.iter().rev().find(|(st, _)| *st <= from).map_or(from, |s| s.0);
        let t1 = self.samples.iter().rev().find(|(st, _)| *st <= to).map_or(to, |s| s.0);
        if t1 <= t0 {
            return 0.0;
        }
        (at(to) - at(from)) as f64 / t1.saturating_since(t0).as_secs_f64()
    }
}
