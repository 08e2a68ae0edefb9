//! UDT over real UDP sockets: a blocking, threaded byte stream around the
//! sans-IO protocol core in `ferry-udt` (see `docs/udt.md`).
//!
//! * [`UdtStream::connect`] opens its own UDP socket (and I/O thread);
//! * [`UdtListener::bind`] multiplexes every accepted connection on one
//!   socket, routed by UDT socket id as libudt does;
//! * reads and writes block like a `TcpStream`'s; [`UdtStream::shutdown`]
//!   waits until the peer acknowledged every byte, then closes;
//! * [`UdtStream::stats`] gives bytes, RTT, rate, losses and
//!   retransmissions for the profiler.
//!
//! `crate::transport::udt` wraps it as a data-channel `Transport`; this
//! module does not depend on the trait.

mod endpoint;
mod socket;
mod trace;

pub use socket::{path_mss, SocketInfo, MAX_PATH_MSS};

use endpoint::{Entry, Shared};
use ferry_udt::{Config, CongestionKind, Connection, ConnectionError, State};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

/// Settings of a UDT endpoint: the protocol's, and the socket's.
#[derive(Debug, Clone)]
pub struct UdtConfig {
    /// The protocol's settings; its buffers are counted in packets of
    /// `protocol.mss` (1 500 unless [`UdtConfig::with_mss`] said otherwise)
    /// and keep their bytes at whatever MSS a connection uses.
    pub protocol: Config,
    /// Offer each peer the MSS of the path to it ([`path_mss`]: the
    /// route's MTU, at most [`MAX_PATH_MSS`]) instead of `protocol.mss`
    /// (session 16, docs/udt.md "The MSS from the path"). The handshake
    /// then takes the smaller of the two offers, so a libudt or Globus
    /// peer (1 500) is unaffected. On by default; `FERRY_UDT_MSS=N` in the
    /// environment, or [`UdtConfig::with_mss`], fixes the offer instead.
    pub mss_from_path: bool,
    /// `SO_SNDBUF`/`SO_RCVBUF`, bytes.
    pub socket_buffer: usize,
    /// Use UDP GSO / GRO when the kernel has them.
    pub gso: bool,
    pub gro: bool,
    /// Datagrams per send batch.
    pub batch: usize,
    /// Connections waiting in `accept` beyond this are refused (libudt's backlog).
    pub backlog: usize,
}

/// Protocol buffers (send buffer, receive buffer, flow window) in packets
/// when the path gives no size: twice libudt's 8 192. Counted from the
/// cumulative ACK point, these hold the data that arrived behind a hole
/// until its repair: at 5 % loss each way and 160 ms the ACK point stands
/// 4–5 round trips behind the newest packet, and 8 192 packets of 1 456
/// bytes (four BDPs at 150 Mbit/s) stopped the sender in every round
/// (`trace_bench2_lossy_rows`: 0.75 of the link with 8 192, 0.93 with
/// 16 384, 0.94 with 32 768). Memory: the send buffer fills to this
/// (24 MB at MSS 1500), the receive buffer only as far as holes hold data.
pub const DEFAULT_BUFFER_PACKETS: u32 = 16_384;

/// How far a connection's buffers may grow with the measured path
/// ([`Config::max_path_buffer_bytes`]): eight times the default's bytes
/// (about 191 MB), eight bandwidth-delay products of 1 Gbit/s at 190 ms.
/// At 1 Gbit/s and 160 ms the default's 24 MB is 1.2 BDPs, and every hole
/// holds the window for a round trip and the NAK's delay: benchmark 2 at
/// 1 % loss ran at 0.37 of the link (simulated 0.41; with buffers grown
/// with the path 0.87, session 17). Memory follows the path: the receiver
/// holds what waits behind holes, the sender the window the receiver
/// advertised.
pub const MAX_PATH_BUFFER_BYTES: usize = 8 * DEFAULT_BUFFER_PACKETS as usize * 1456;

impl Default for UdtConfig {
    fn default() -> UdtConfig {
        let mut protocol = Config::default();
        protocol.recv_buffer_packets = DEFAULT_BUFFER_PACKETS;
        protocol.flight_flag_size = protocol.flight_flag_size.max(DEFAULT_BUFFER_PACKETS);
        protocol.send_buffer_bytes = DEFAULT_BUFFER_PACKETS as usize * Config::payload_size(protocol.mss);
        protocol.max_path_buffer_bytes = MAX_PATH_BUFFER_BYTES;
        let c = UdtConfig {
            protocol,
            mss_from_path: true,
            socket_buffer: 8 << 20,
            gso: true,
            gro: true,
            batch: 256,
            backlog: 64,
        };
        match mss_override() {
            Some(mss) => c.with_mss(mss),
            None => c,
        }
    }
}

/// `FERRY_UDT_MSS=N`: the MSS every connection of this process offers,
/// whatever the path (tests and benchmarks comparing 1 500 with 9 000 on
/// one path). Ignored unless a number from 76 to 65 535.
fn mss_override() -> Option<u32> {
    std::env::var("FERRY_UDT_MSS").ok()?.trim().parse().ok().filter(|m| (Config::MIN_MSS..=65_535).contains(m))
}

impl UdtConfig {
    /// Sized for a path of `rate` bytes/s and round trip `rtt`: protocol
    /// buffers of eight bandwidth-delay products ([`Config::for_path`],
    /// at least [`DEFAULT_BUFFER_PACKETS`]) and
    /// socket buffers of one (at least 8 MiB, at most 256 MiB), so a burst
    /// of a pacing interval never overflows the kernel's queue.
    pub fn for_path(rate: f64, rtt: Duration) -> UdtConfig {
        let mut c = UdtConfig::default();
        c.protocol = c.protocol.for_path(rate, rtt);
        let bdp = (rate * rtt.as_secs_f64()) as usize;
        c.socket_buffer = bdp.clamp(8 << 20, 256 << 20);
        c
    }

    pub fn with_congestion(mut self, kind: CongestionKind) -> UdtConfig {
        self.protocol.congestion = kind;
        self
    }

    /// Offers `mss` to every peer whatever the path (the buffers keep
    /// their bytes).
    pub fn with_mss(mut self, mss: u32) -> UdtConfig {
        self.protocol = self.protocol.at_mss(mss);
        self.mss_from_path = false;
        self
    }

    /// The protocol settings of a connection to `peer`: at the path's MSS
    /// when [`Self::mss_from_path`] (or `protocol.mss` if the kernel knows
    /// no route), buffers recounted to keep their bytes.
    pub fn for_peer(&self, peer: SocketAddr) -> Config {
        if !self.mss_from_path {
            return self.protocol.clone();
        }
        let mss = path_mss(peer).unwrap_or(self.protocol.mss);
        self.protocol.clone().at_mss(mss)
    }
}

/// The counters of UDT connections, one struct for a connection's
/// ([`UdtStats::counters`]) and for the process's sum ([`UdtTotals`]), so
/// the two cannot drift apart; filled from the protocol's
/// `ferry_udt::Stats` in one place ([`UdtCounters::of`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct UdtCounters {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Data packets sent (retransmissions included) and received.
    pub packets_sent: u64,
    pub packets_received: u64,
    pub retransmitted: u64,
    /// Packets the peer reported lost, and gaps we detected.
    pub lost_reported: u64,
    pub lost_detected: u64,
    pub naks_sent: u64,
    pub naks_received: u64,
    /// Datagrams discarded: malformed, duplicates, out of window.
    pub dropped: u64,
    pub exp_timeouts: u64,
}

impl UdtCounters {
    pub const ZERO: UdtCounters = UdtCounters {
        bytes_sent: 0,
        bytes_received: 0,
        packets_sent: 0,
        packets_received: 0,
        retransmitted: 0,
        lost_reported: 0,
        lost_detected: 0,
        naks_sent: 0,
        naks_received: 0,
        dropped: 0,
        exp_timeouts: 0,
    };

    /// The counters of one connection's protocol statistics.
    pub fn of(s: &ferry_udt::Stats) -> UdtCounters {
        UdtCounters {
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            packets_sent: s.packets_sent,
            packets_received: s.packets_received,
            retransmitted: s.retransmitted,
            lost_reported: s.lost_reported,
            lost_detected: s.lost_detected,
            naks_sent: s.naks_sent,
            naks_received: s.naks_received,
            dropped: s.dropped,
            exp_timeouts: s.exp_timeouts,
        }
    }

    fn zip(&self, o: &UdtCounters, f: impl Fn(u64, u64) -> u64) -> UdtCounters {
        UdtCounters {
            bytes_sent: f(self.bytes_sent, o.bytes_sent),
            bytes_received: f(self.bytes_received, o.bytes_received),
            packets_sent: f(self.packets_sent, o.packets_sent),
            packets_received: f(self.packets_received, o.packets_received),
            retransmitted: f(self.retransmitted, o.retransmitted),
            lost_reported: f(self.lost_reported, o.lost_reported),
            lost_detected: f(self.lost_detected, o.lost_detected),
            naks_sent: f(self.naks_sent, o.naks_sent),
            naks_received: f(self.naks_received, o.naks_received),
            dropped: f(self.dropped, o.dropped),
            exp_timeouts: f(self.exp_timeouts, o.exp_timeouts),
        }
    }

    /// The sum of both.
    pub fn plus(&self, o: &UdtCounters) -> UdtCounters {
        self.zip(o, u64::saturating_add)
    }

    /// What was counted since `before` (an earlier reading).
    pub fn since(&self, before: &UdtCounters) -> UdtCounters {
        self.zip(before, u64::saturating_sub)
    }
}

/// What the profiler and `--json` show of a UDT connection.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct UdtStats {
    #[serde(flatten)]
    pub counters: UdtCounters,
    pub rtt_us: u64,
    pub rtt_var_us: u64,
    /// Pacing rate, bytes/s.
    pub pacing_rate: f64,
    pub cwnd_packets: u64,
    pub flow_window: i64,
    pub mss: u32,
    pub congestion: String,
    pub gso: bool,
    pub gro: bool,
    pub socket_buffer: usize,
}

/// The UDT connections of this process, summed as each closes: what
/// `ferry cp --json` and the server's "transfer finished" line report
/// (the benchmark's diagnosis of loss and pacing needed them).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct UdtTotals {
    pub connections: u64,
    #[serde(flatten)]
    pub counters: UdtCounters,
    /// Of the connection that closed last: smoothed RTT (µs), pacing rate
    /// (bytes/s), controller.
    pub last_rtt_us: u64,
    pub last_pacing_rate: f64,
    pub congestion: String,
    /// The MSS it used (the smaller of the two ends' offers).
    pub mss: u32,
}

impl UdtTotals {
    fn add(&mut self, s: &UdtStats) {
        self.connections += 1;
        self.counters = self.counters.plus(&s.counters);
        self.last_rtt_us = s.rtt_us;
        self.last_pacing_rate = s.pacing_rate;
        self.mss = s.mss;
        self.congestion = s.congestion.clone();
    }

    /// The counters gathered since `before` (a snapshot taken earlier);
    /// the `last_*` fields are kept. Process-wide: concurrent transfers'
    /// connections count in each other's difference.
    pub fn since(&self, before: &UdtTotals) -> UdtTotals {
        UdtTotals {
            connections: self.connections.saturating_sub(before.connections),
            counters: self.counters.since(&before.counters),
            ..self.clone()
        }
    }
}

/// One line of `key=value` pairs, for logs.
impl std::fmt::Display for UdtTotals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.counters;
        write!(
            f,
            "connections={} packets_sent={} packets_received={} retransmitted={} lost_reported={} \
             lost_detected={} naks_sent={} naks_received={} dropped={} exp_timeouts={} rtt_us={} \
             pacing_rate={:.0} congestion={} mss={}",
            self.connections,
            c.packets_sent,
            c.packets_received,
            c.retransmitted,
            c.lost_reported,
            c.lost_detected,
            c.naks_sent,
            c.naks_received,
            c.dropped,
            c.exp_timeouts,
            self.last_rtt_us,
            self.last_pacing_rate,
            self.congestion,
            self.mss
        )
    }
}

static TOTALS: std::sync::Mutex<UdtTotals> = std::sync::Mutex::new(UdtTotals {
    connections: 0,
    counters: UdtCounters::ZERO,
    last_rtt_us: 0,
    last_pacing_rate: 0.0,
    congestion: String::new(),
    mss: 0,
});

/// The streams open now (endpoint, connection id), for [`totals`].
static LIVE: std::sync::Mutex<Vec<(std::sync::Weak<Shared>, u32)>> = std::sync::Mutex::new(Vec::new());

/// The totals of every UDT connection this process has had: those closed
/// so far and those open now (a server's cached data channels outlive
/// the transfer whose line reports them).
pub fn totals() -> UdtTotals {
    // Lock order: LIVE, then an endpoint's state, then TOTALS (a closing
    // stream moves from LIVE to TOTALS under both, so none is missed).
    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let mut open = Vec::new();
    for (shared, id) in live.iter() {
        let Some(shared) = shared.upgrade() else { continue };
        let s = stats_of(&shared, *id);
        if s != UdtStats::default() {
            open.push(s);
        }
    }
    let mut t = TOTALS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    drop(live);
    for s in &open {
        t.add(s);
    }
    t
}

fn stats_of(shared: &Shared, id: u32) -> UdtStats {
    let info = shared.socket_info;
    let st = shared.lock();
    st.conns.get(&id).map_or_else(UdtStats::default, |e| {
        let c = &e.conn;
        let s = c.stats();
        UdtStats {
            counters: UdtCounters::of(&s),
            rtt_us: s.rtt.as_micros() as u64,
            rtt_var_us: s.rtt_var.as_micros() as u64,
            pacing_rate: s.pacing_rate,
            cwnd_packets: s.cwnd_packets,
            flow_window: s.flow_window,
            mss: c.mss(),
            congestion: c.congestion().describe(),
            gso: info.gso,
            gro: info.gro,
            socket_buffer: info.send_buffer,
        }
    })
}

fn closed_error(e: &ConnectionError) -> io::Error {
    let kind = match e {
        ConnectionError::ConnectTimeout | ConnectionError::PeerDead | ConnectionError::LingerExpired => {
            io::ErrorKind::TimedOut
        }
        ConnectionError::Rejected => io::ErrorKind::ConnectionRefused,
        ConnectionError::Closed => io::ErrorKind::NotConnected,
        ConnectionError::PeerShutdown => io::ErrorKind::BrokenPipe,
        _ => io::ErrorKind::ConnectionAborted,
    };
    io::Error::new(kind, e.to_string())
}

/// A writer that found the send buffer full waits until this much of what
/// it writes fits (or all of it, if less; or a quarter of the buffer).
const WRITE_LOW_WATER: usize = 1 << 20;

/// A UDT connection as a byte stream.
#[derive(Debug)]
pub struct UdtStream {
    shared: Arc<Shared>,
    id: u32,
    /// This stream owns its endpoint (connect) rather than sharing a listener's.
    owns_endpoint: bool,
    /// Stall timeouts of one `read` / `write` call, nanoseconds (0: none).
    /// UDT's own EXP timer declares a silent peer dead only after 16
    /// expirations and `dead_after` (about 40 s, as libudt); a data channel
    /// must fail within the session's data timeout as a TCP socket's
    /// `SO_RCVTIMEO`/`SO_SNDTIMEO` make it.
    read_timeout: AtomicU64,
    write_timeout: AtomicU64,
}

impl UdtStream {
    fn new(shared: Arc<Shared>, id: u32, owns_endpoint: bool) -> UdtStream {
        trace::ensure_started();
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).push((Arc::downgrade(&shared), id));
        UdtStream { shared, id, owns_endpoint, read_timeout: AtomicU64::new(0), write_timeout: AtomicU64::new(0) }
    }

    /// A `read` that receives nothing for `timeout` fails with `TimedOut`
    /// (the connection stays up, as a TCP socket's does). `None`: wait
    /// until data, the end of the stream or UDT declares the peer dead.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) {
        self.read_timeout.store(nanos(timeout), Ordering::Relaxed);
    }

    /// A `write` that can queue nothing for `timeout` (the send buffer
    /// stays full: the peer acknowledges nothing) fails with `TimedOut`.
    pub fn set_write_timeout(&self, timeout: Option<Duration>) {
        self.write_timeout.store(nanos(timeout), Ordering::Relaxed);
    }

    fn deadline(timeout: &AtomicU64) -> Option<Instant> {
        match timeout.load(Ordering::Relaxed) {
            0 => None,
            n => Instant::now().checked_add(Duration::from_nanos(n)),
        }
    }

    fn stalled(what: &str, timeout: &AtomicU64) -> io::Error {
        let t = Duration::from_nanos(timeout.load(Ordering::Relaxed));
        io::Error::new(io::ErrorKind::TimedOut, format!("UDT peer stalled: nothing could be {what} for {t:?}"))
    }

    /// How long to wait for the next change: 50 ms, or until `deadline`;
    /// `None` once it has passed.
    fn wait_limit(deadline: Option<Instant>) -> Option<Duration> {
        let step = Duration::from_millis(50);
        match deadline {
            None => Some(step),
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                (!left.is_zero()).then(|| left.min(step))
            }
        }
    }

    /// Connects to `peer` from a new UDP socket, waiting for the handshake
    /// (libudt's 3 s connect timeout unless configured otherwise).
    pub fn connect(peer: SocketAddr, config: UdtConfig) -> io::Result<UdtStream> {
        let bind: SocketAddr = if peer.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal");
        let shared = endpoint::start(bind, config, false)?;
        let now = shared.now();
        let id = {
            let mut st = shared.lock();
            let id = st.new_id();
            let isn = (endpoint::random_u64() & 0x7FFF_FFFF) as u32;
            let conn = Connection::connect(shared.config.for_peer(peer), id, peer, isn, now);
            st.conns.insert(id, Entry::new(conn));
            id
        };
        shared.kick();
        let stream = UdtStream::new(shared, id, true);
        stream.wait_until(|c| !matches!(c.state(), State::Connecting))?;
        let st = stream.shared.lock();
        match st.conns.get(&id).map(|e| e.conn.state().clone()) {
            Some(State::Established) => Ok(()),
            Some(State::Closed(e)) => Err(closed_error(&e)),
            _ => Err(io::Error::other("connection vanished")),
        }?;
        drop(st);
        Ok(stream)
    }

    fn with_conn<R>(&self, f: impl FnOnce(&mut Connection) -> R) -> io::Result<R> {
        let mut st = self.shared.lock();
        match st.conns.get_mut(&self.id) {
            Some(e) => Ok(f(&mut e.conn)),
            None => Err(io::Error::new(io::ErrorKind::NotConnected, "connection gone")),
        }
    }

    /// Blocks until `done(conn)` or the endpoint dies.
    fn wait_until(&self, mut done: impl FnMut(&Connection) -> bool) -> io::Result<()> {
        let mut st = self.shared.lock();
        loop {
            match st.conns.get(&self.id) {
                Some(e) if done(&e.conn) => return Ok(()),
                Some(_) => {}
                None => return Err(io::Error::new(io::ErrorKind::NotConnected, "connection gone")),
            }
            if let Some(d) = &st.dead {
                return Err(io::Error::other(format!("UDT endpoint stopped: {d}")));
            }
            st.other_waiters += 1;
            st = self.shared.wait(st, Duration::from_millis(50));
            st.other_waiters -= 1;
        }
    }

    /// Waits on the condition variable at most `limit` with `want(entry,
    /// true)` telling the I/O thread what this thread waits for
    /// ([`endpoint::State::wanted`]), and `want(entry, false)` after.
    fn wait_wanting<'a>(
        &self,
        mut st: MutexGuard<'a, endpoint::State>,
        limit: Duration,
        want: impl Fn(&mut Entry, bool),
    ) -> MutexGuard<'a, endpoint::State> {
        if let Some(e) = st.conns.get_mut(&self.id) {
            want(e, true);
        }
        st = self.shared.wait(st, limit);
        if let Some(e) = st.conns.get_mut(&self.id) {
            want(e, false);
        }
        st
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.with_conn(|c| c.peer_addr())
    }

    /// Waits until every byte written so far has been sent at least once,
    /// with no reported loss waiting to be re-sent (or the connection
    /// closed), at most `timeout`; `TimedOut` if some is still queued then.
    /// A server's `226` waits for this, not for the peer's final ACK (until
    /// session 18): that takes a round trip more (at 160 ms, 0.16 s of a
    /// 3.5 s file), and a TCP server replies once its last byte is written
    /// too. The connection stays open and repairs what the peer still
    /// reports lost, and the peer's transfer ends only when it has every
    /// byte (`crates/io/tests/udt_tail_loss.rs`). The I/O thread wakes this
    /// wait when its send phase drains the queue (`Entry::want_sent`; until
    /// session 19 it polled every millisecond), and the 50 ms step of every
    /// wait bounds a missed signal.
    pub fn wait_sent(&self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            match st.conns.get(&self.id) {
                Some(e) if e.sent() => return Ok(()),
                Some(_) => {}
                None => return Ok(()),
            }
            if st.dead.is_some() {
                return Ok(());
            }
            let limit = Self::wait_limit(Some(deadline))
                .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "UDT data still unsent"))?;
            st = self.wait_wanting(st, limit, |e, on| e.want_sent = on);
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }

    /// Writes some of `buf` (blocking until there is room); the count.
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let deadline = Self::deadline(&self.write_timeout);
        let mut st = self.shared.lock();
        loop {
            let now = self.shared.now();
            let e = st.conns.get_mut(&self.id).ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?;
            match e.conn.state() {
                State::Established => {}
                State::Closed(err) => return Err(closed_error(err)),
                _ => return Err(io::Error::new(io::ErrorKind::BrokenPipe, "stream shut down")),
            }
            // The I/O thread needs telling only when it had nothing left to
            // send: with data queued it comes back to the sender on its own
            // (pacing or the window).
            let idle = !e.conn.has_unsent();
            let n = e.conn.write(now, buf);
            if n > 0 {
                drop(st);
                if idle {
                    self.shared.kick();
                }
                return Ok(n);
            }
            if let Some(d) = &st.dead {
                return Err(io::Error::other(format!("UDT endpoint stopped: {d}")));
            }
            // Full: wait until a good part of `buf` fits (several packets
            // per wake, not the few one ACK freed); the wait's 50 ms step
            // bounds it if that never comes.
            let want = buf.len().min(WRITE_LOW_WATER).min(self.shared.config.protocol.send_buffer_bytes / 4).max(1);
            let limit = Self::wait_limit(deadline).ok_or_else(|| Self::stalled("sent", &self.write_timeout))?;
            st = self.wait_wanting(st, limit, |e, on| e.want_space = if on { want } else { 0 });
        }
    }

    pub fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.write(buf)?;
            buf = &buf[n..];
        }
        Ok(())
    }

    /// Reads into `buf`, blocking until something arrives; `Ok(0)` once
    /// the peer shut down and every byte was read.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let deadline = Self::deadline(&self.read_timeout);
        let mut st = self.shared.lock();
        loop {
            let e = st.conns.get_mut(&self.id).ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?;
            let n = e.conn.read(buf);
            if n > 0 {
                drop(st);
                // A read may have opened the flow window: let the thread
                // send the update. (Kicking only when it did —
                // `window_update` — left the receiver's I/O thread asleep in
                // `ppoll` between arrivals: more context switches on the
                // receiving side, session 12, docs/udt.md "The driver".)
                self.shared.kick();
                return Ok(n);
            }
            if e.conn.at_eof() {
                return match e.conn.state() {
                    State::Closed(ConnectionError::PeerShutdown) | State::Closed(ConnectionError::Closed) => Ok(0),
                    State::Closed(err) => Err(closed_error(err)),
                    _ => Ok(0),
                };
            }
            if let Some(d) = &st.dead {
                return Err(io::Error::other(format!("UDT endpoint stopped: {d}")));
            }
            let limit = Self::wait_limit(deadline).ok_or_else(|| Self::stalled("read", &self.read_timeout))?;
            st = self.wait_wanting(st, limit, |e, on| e.want_read = on);
        }
    }

    /// Closes gracefully: waits (up to the linger time) until the peer has
    /// acknowledged every written byte, then sends UDT's shutdown.
    pub fn shutdown(&self) -> io::Result<()> {
        let now = self.shared.now();
        self.with_conn(|c| c.close(now))?;
        self.shared.kick();
        // Closed, and the shutdown packets polled by the I/O thread...
        self.wait_until(|c| c.is_drained())?;
        // ...and handed to the kernel (the next send phase), so that a
        // process that exits right after `shutdown` does not leave its peer
        // waiting ~40 s for the EXP timer.
        let epoch = self.shared.send_epoch.load(Ordering::Acquire);
        self.shared.kick();
        let end = Instant::now() + Duration::from_secs(1);
        while self.shared.send_epoch.load(Ordering::Acquire) <= epoch + 1 && Instant::now() < end {
            std::thread::sleep(Duration::from_micros(200));
        }
        let state = self.with_conn(|c| c.state().clone())?;
        match state {
            State::Closed(ConnectionError::Closed) | State::Closed(ConnectionError::PeerShutdown) => Ok(()),
            State::Closed(e) => Err(closed_error(&e)),
            _ => Ok(()),
        }
    }

    /// Closes at once from any thread, telling the peer (unacknowledged
    /// data is dropped): what ABOR needs. Blocked reads then see the end of
    /// the stream and blocked writes an error.
    pub fn abort(&self) {
        {
            let mut st = self.shared.lock();
            if let Some(e) = st.conns.get_mut(&self.id) {
                if !e.conn.is_closed() {
                    e.conn.abort();
                }
            }
        }
        self.shared.kick();
    }

    pub fn stats(&self) -> UdtStats {
        stats_of(&self.shared, self.id)
    }

    /// The socket's GSO/GRO and buffer sizes.
    pub fn socket_info(&self) -> SocketInfo {
        self.shared.socket_info
    }
}

impl Drop for UdtStream {
    fn drop(&mut self) {
        {
            let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
            let last = self.stats();
            if last != UdtStats::default() {
                TOTALS.lock().unwrap_or_else(|e| e.into_inner()).add(&last);
            }
            let me = Arc::as_ptr(&self.shared);
            live.retain(|(s, id)| !(*id == self.id && std::ptr::eq(s.as_ptr(), me)) && s.strong_count() > 0);
        }
        {
            let mut st = self.shared.lock();
            if let Some(e) = st.conns.get_mut(&self.id) {
                if !e.conn.is_closed() {
                    e.conn.abort();
                }
                e.orphaned = true;
            }
        }
        if self.owns_endpoint {
            self.shared.stop.store(true, Ordering::Release);
        }
        self.shared.kick();
    }
}

impl Read for &UdtStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        UdtStream::read(self, buf)
    }
}

impl Write for &UdtStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        UdtStream::write(self, buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A listening UDT socket; accepted connections share its UDP port.
#[derive(Debug)]
pub struct UdtListener {
    shared: Arc<Shared>,
}

impl UdtListener {
    pub fn bind(addr: SocketAddr, config: UdtConfig) -> io::Result<UdtListener> {
        Ok(UdtListener { shared: endpoint::start(addr, config, true)? })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }

    pub fn socket_info(&self) -> SocketInfo {
        self.shared.socket_info
    }

    /// Waits for the next connection.
    pub fn accept(&self) -> io::Result<UdtStream> {
        self.accept_timeout(None)?.ok_or_else(|| io::Error::from(io::ErrorKind::TimedOut))
    }

    /// Waits at most `timeout` (forever if `None`); `Ok(None)` on timeout.
    pub fn accept_timeout(&self, timeout: Option<Duration>) -> io::Result<Option<UdtStream>> {
        let end = timeout.map(|t| Instant::now() + t);
        let mut st = self.shared.lock();
        loop {
            if let Some(id) = st.accept_queue.pop_front() {
                // `new` takes the registry's lock, which `totals` holds
                // while it takes endpoints' locks: never the other way.
                drop(st);
                return Ok(Some(UdtStream::new(Arc::clone(&self.shared), id, false)));
            }
            if let Some(d) = &st.dead {
                return Err(io::Error::other(format!("UDT endpoint stopped: {d}")));
            }
            if st.accepts_stopped {
                return Ok(None);
            }
            let wait = match end {
                Some(e) => {
                    let now = Instant::now();
                    if now >= e {
                        return Ok(None);
                    }
                    (e - now).min(Duration::from_millis(50))
                }
                None => Duration::from_millis(50),
            };
            st.accepting += 1;
            st = self.shared.wait_accept(st, wait);
            st.accepting -= 1;
        }
    }
}

impl UdtListener {
    /// Every wait in [`accept_timeout`](Self::accept_timeout), now and
    /// later, returns `Ok(None)` at once. For the owner of a listener
    /// whose accepting thread may still sit in a timed wait after the
    /// owner let go of it: a client's data listener is dropped at the end
    /// of a copy while a blocking accept (in tokio's blocking pool, which
    /// the runtime waits for at exit) had up to 200 ms left — measured as
    /// ~90 ms between a download's last reply and the process's exit at
    /// 80 ms one way (session 12, `docs/udt.md`, "The driver").
    pub fn stop_accepting(&self) {
        self.shared.lock().accepts_stopped = true;
        self.shared.accepted.notify_all();
    }
}

impl Drop for UdtListener {
    fn drop(&mut self) {
        {
            let mut st = self.shared.lock();
            st.listener = None;
            // connections never accepted are dropped with the listener
            let queued: Vec<u32> = st.accept_queue.drain(..).collect();
            for id in queued {
                if let Some(e) = st.conns.get_mut(&id) {
                    e.conn.abort();
                    e.orphaned = true;
                }
            }
        }
        self.shared.stop.store(true, Ordering::Release);
        self.shared.kick();
    }
}

/// A timeout as stored: nanoseconds, 0 for none (a zero timeout is 1 ns).
fn nanos(timeout: Option<Duration>) -> u64 {
    timeout.map_or(0, |t| u64::try_from(t.as_nanos()).unwrap_or(u64::MAX).max(1))
}

#[cfg(test)]
mod counter_tests {
    use super::*;

    /// A connection to a loopback peer gets the path's MSS (the cap) with
    /// buffers of the same bytes as at 1 500; `with_mss` fixes the offer.
    #[test]
    fn a_peer_gets_the_paths_mss_and_buffers_of_the_same_bytes() {
        let c = UdtConfig::default();
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let p = c.for_peer(peer);
        let bytes = |x: &Config| x.recv_buffer_packets as usize * Config::payload_size(x.mss);
        if c.mss_from_path {
            assert_eq!(p.mss, MAX_PATH_MSS);
            assert!(bytes(&p) >= bytes(&c.protocol) && bytes(&p) < bytes(&c.protocol) + Config::payload_size(p.mss));
            assert_eq!(p.send_buffer_bytes, c.protocol.send_buffer_bytes);
        }
        let fixed = UdtConfig::default().with_mss(1500);
        assert_eq!(fixed.for_peer(peer).mss, 1500);
        assert_eq!(fixed.for_peer(peer).recv_buffer_packets, DEFAULT_BUFFER_PACKETS);
    }

    /// One set of counters for a connection and for the sum: adding a
    /// connection's and taking the difference since an earlier reading
    /// give back exactly its counters, and the JSON keeps its flat shape.
    #[test]
    fn totals_add_and_subtract_a_connections_counters() {
        let s = UdtStats {
            counters: UdtCounters {
                bytes_sent: 10,
                packets_sent: 3,
                retransmitted: 1,
                dropped: 2,
                ..UdtCounters::ZERO
            },
            rtt_us: 65_000,
            congestion: "ferry".into(),
            ..UdtStats::default()
        };
        let before = UdtTotals {
            connections: 2,
            counters: UdtCounters { packets_sent: 5, ..UdtCounters::ZERO },
            ..UdtTotals::default()
        };
        let mut after = before.clone();
        after.add(&s);
        let d = after.since(&before);
        assert_eq!((d.connections, d.counters), (1, s.counters));
        assert_eq!((d.last_rtt_us, d.congestion.as_str()), (65_000, "ferry"));
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!((v["packets_sent"].as_u64(), v["dropped"].as_u64()), (Some(3), Some(2)), "{v}");
        assert!(d.to_string().contains("packets_sent=3 "), "{d}");
    }
}
