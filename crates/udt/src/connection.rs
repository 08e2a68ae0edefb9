//! One UDT connection: handshake, sender, receiver and timers (libudt
//! `core.cpp`, class `CUDT`).
//!
//! The caller drives it like `quinn-proto`'s connection:
//!
//! * [`Connection::handle_datagram`] with every datagram routed to it
//!   (destination socket id and source address already matched),
//! * [`Connection::handle_timeout`] when [`Connection::poll_timeout`] is due,
//! * [`Connection::poll_transmit`] until it returns `false`, sending what it
//!   writes into the buffer to [`Connection::peer_addr`],
//! * [`Connection::write`] / [`Connection::read`] for the byte stream.
//!
//! Timers, as libudt runs them (`CUDT::checkTimers`): the ACK timer every
//! SYN interval (10 ms), a light ACK every 64 packets between them, the
//! EXP timer `n·(RTT + 4·RTTVar) + SYN` (at least `n`·300 ms) after the
//! peer was last heard, `n` counting expirations; and here also the
//! periodic NAK (see [`Config::periodic_nak`]). Sending is paced: one packet
//! per `MSS / rate`, except that every 16th new packet is followed at once by
//! the next (the packet pair from which the receiver measures link capacity).

use crate::buffer::{RecvBuffer, SendBuffer};
use crate::cc::{AckSample, CongestionControl, LossSample, RateSample};
use crate::config::Config;
use crate::loss::{encode_nak, LossList};
use crate::packet::{
    self, encode, ip_words, req_type, AckInfo, Boundary, Control, ControlPacket, DataHeader, Handshake, Packet,
    HANDSHAKE_LEN, HEADER_LEN, SOCK_STREAM,
};
use crate::seq::{next_ack_no, next_msg_no, SeqNo};
use crate::time::{us, Time};
use crate::window::{AckWindow, ArrivalWindow};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;
use thiserror::Error;

/// UDT version in the handshake.
pub const UDT_VERSION: i32 = 4;
/// The SYN interval: the ACK and rate-control clock (`m_iSYNInterval`).
pub const SYN: Duration = Duration::from_millis(10);
/// A light ACK every this many packets (`m_iSelfClockInterval`).
const LIGHT_ACK_PACKETS: u64 = 64;
/// Packet numbers start at the ISN plus 2^31, so `isn − 1` never underflows.
const PN_BASE: u64 = 1 << 31;

fn base_pn(isn: i32) -> u64 {
    u64::from(SeqNo::from_masked(isn as u32).get()) + PN_BASE
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConnectionError {
    #[error("connection setup timed out")]
    ConnectTimeout,
    #[error("the peer rejected the connection (version or socket type mismatch, or backlog full)")]
    Rejected,
    #[error("the peer answered with a different initial sequence number")]
    IsnMismatch,
    #[error("a regular connect met a rendezvous peer (or the reverse)")]
    RendezvousMismatch,
    #[error("the peer stopped answering")]
    PeerDead,
    #[error("the peer closed the connection")]
    PeerShutdown,
    #[error("the peer reported an error on its side (code {0})")]
    PeerError(u32),
    #[error("linger time ran out with data unacknowledged")]
    LingerExpired,
    #[error("closed locally")]
    Closed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Connecting,
    Established,
    /// Closed locally, waiting for the send buffer to drain.
    Closing,
    Closed(ConnectionError),
}

/// Something the driver may want to know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Connected,
    Closed(ConnectionError),
}

/// A datagram ready to send (its bytes are in the caller's buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    pub len: usize,
    /// A data packet (as opposed to control).
    pub data: bool,
}

/// Counters and current estimates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
    pub retransmitted: u64,
    /// Packets the peer reported lost (sender side).
    pub lost_reported: u64,
    /// Gaps detected in arriving data (receiver side).
    pub lost_detected: u64,
    pub acks_sent: u64,
    pub acks_received: u64,
    pub naks_sent: u64,
    pub naks_received: u64,
    /// Datagrams discarded as malformed, out of window or inconsistent.
    pub dropped: u64,
    pub rtt: Duration,
    pub rtt_var: Duration,
    /// Current pacing rate, bytes/s.
    pub pacing_rate: f64,
    /// Congestion window and the peer's flow window, packets.
    pub cwnd_packets: u64,
    pub flow_window: i64,
    /// Peer-reported receive rate and link capacity, packets/s.
    pub peer_receive_rate: u64,
    pub peer_bandwidth: u64,
    pub exp_timeouts: u64,
    /// Packets sent after a wake-up later than the pacing credit (their
    /// samples are marked application-limited; see `poll_transmit`).
    pub late_sends: u64,
    /// Packet pairs received (receiver side), and those that arrived at
    /// one instant, which measure nothing (`ArrivalWindow::pairs`).
    pub probe_pairs: u64,
    pub probe_pairs_same_instant: u64,
    pub congestion: &'static str,
}

/// Sizes of the connection's variable state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Footprint {
    pub send_buffered: usize,
    pub send_loss_ranges: usize,
    pub send_loss_packets: u64,
    pub recv_loss_ranges: usize,
    pub control_queue: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Caller,
    Accepted,
    Rendezvous,
}

/// What we remember of each sent, unacknowledged packet (for delivery-rate
/// samples, BBR-style: delivered count and time when it left).
#[derive(Debug, Clone, Copy)]
struct SentRecord {
    sent: Time,
    delivered: u64,
    delivered_time: Time,
    first_sent: Time,
    app_limited: bool,
    retransmitted: bool,
    reported_lost: bool,
}

#[derive(Debug)]
struct Sender {
    buf: SendBuffer,
    records: VecDeque<SentRecord>,
    loss: LossList,
    /// Largest sequence acknowledged by any ACK (light ones included).
    last_ack: u64,
    /// Flow window from the peer, packets (may go below zero between full
    /// ACKs, as libudt's does after light ACKs).
    flow_window: i64,
    next_send: Time,
    /// Send the next packet without waiting (second of a probing pair).
    pair_pending: bool,
    pair_charge: bool,
    msg_no: u32,
    delivered: u64,
    delivered_time: Time,
    first_sent: Time,
    /// The end of an application-limited bubble (Linux `tp->app_limited`,
    /// in packet numbers): while the cumulative ACK has not passed it, every
    /// packet sent is marked application-limited, because the pipe was not
    /// kept full when it left. Zero: no bubble.
    app_limited_until: u64,
    /// The last `poll_transmit` found nothing it could send (window full,
    /// nothing written, not established): the next packet's wait was the
    /// path's or the application's, not a late wake-up of ours.
    blocked: bool,
}

#[derive(Debug)]
struct Receiver {
    buf: RecvBuffer,
    loss: LossList,
    /// Largest packet number received.
    curr: u64,
    last_ack: u64,
    last_ack_ack: u64,
    ack_no: u32,
    acks: AckWindow,
    arrivals: ArrivalWindow,
    last_ack_time: Time,
    next_ack_time: Time,
    pkt_count: u64,
    light_ack_count: u64,
    next_nak_time: Time,
    /// Losses below this were detected before the previous periodic NAK.
    nak_watermark: u64,
    window_update: bool,
    shutdown_received: bool,
}

/// A UDT connection.
#[derive(Debug)]
pub struct Connection {
    config: Config,
    role: Role,
    state: State,
    events: VecDeque<Event>,
    local_id: u32,
    peer_id: u32,
    peer_addr: SocketAddr,
    start: Time,
    /// The handshake we send while connecting, and the last one received.
    request: Handshake,
    response: Option<Handshake>,
    /// Datagram re-sent to repeated requests (listener side).
    accept_response: Option<Vec<u8>>,
    connect_deadline: Time,
    next_request: Time,
    cookie_request_sent: Option<Time>,
    handshake_rtt: Option<Duration>,
    isn: u64,
    peer_isn: u64,
    mss: u32,
    payload_size: usize,
    cc: Box<dyn CongestionControl>,
    snd: Option<Sender>,
    rcv: Option<Receiver>,
    rtt_us: i64,
    rtt_var_us: i64,
    peer_delivery_rate: i64,
    peer_bandwidth: i64,
    exp_count: u32,
    last_rsp: Time,
    close_deadline: Option<Time>,
    control: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    stats: Stats,
}

impl Connection {
    /// Starts connecting to `peer` (`CUDT::connect(const sockaddr*)`).
    /// `local_id` is this socket's id (1..2^31); `isn` the random initial
    /// sequence number (31 bits), both chosen by the driver.
    pub fn connect(config: Config, local_id: u32, peer: SocketAddr, isn: u32, now: Time) -> Connection {
        let rendezvous = config.rendezvous;
        let mut c =
            Connection::new(config, if rendezvous { Role::Rendezvous } else { Role::Caller }, local_id, peer, now);
        let isn = SeqNo::from_masked(isn);
        c.isn = base_pn(isn.get() as i32);
        c.request = Handshake {
            version: UDT_VERSION,
            sock_type: SOCK_STREAM,
            isn: isn.get() as i32,
            mss: c.config.mss as i32,
            flight_flag_size: c.config.recv_buffer_packets.min(c.config.flight_flag_size) as i32,
            req_type: if rendezvous { req_type::RENDEZVOUS } else { req_type::REQUEST },
            socket_id: local_id as i32,
            cookie: 0,
            peer_ip: ip_words(peer.ip()),
        };
        c.connect_deadline = now + c.config.connect_timeout;
        c.send_request(now);
        c
    }

    /// Accepts a connection request the [`crate::Listener`] validated
    /// (`CUDT::connect(const sockaddr*, CHandShake*)`), and queues the
    /// response handshake.
    pub fn accept(config: Config, local_id: u32, peer: SocketAddr, request: &Handshake, now: Time) -> Connection {
        let mut c = Connection::new(config, Role::Accepted, local_id, peer, now);
        // "Uses the smaller MSS between the peers"
        let mss = (request.mss.max(Config::MIN_MSS as i32) as u32).min(c.config.mss);
        // Our buffers in packets of that MSS, before the response names them.
        c.config = c.config.clone().at_mss(mss);
        let isn = base_pn(request.isn);
        let mut res = *request;
        res.mss = mss as i32;
        res.flight_flag_size = c.config.recv_buffer_packets.min(c.config.flight_flag_size) as i32;
        res.req_type = req_type::RESPONSE;
        res.socket_id = local_id as i32;
        // "send the peer its IP address (because UDP cannot get local IP address)"
        res.peer_ip = ip_words(peer.ip());
        c.peer_id = request.socket_id as u32;
        // The listener uses the caller's ISN for its own data too ("use peer's
        // ISN and send it back for security check").
        c.establish(now, mss, isn, isn, request.flight_flag_size);
        let mut d = Vec::with_capacity(HEADER_LEN + HANDSHAKE_LEN);
        encode::handshake(&mut d, &res, 0, c.peer_id);
        c.accept_response = Some(d.clone());
        c.control.push_back(d);
        c.response = Some(res);
        c
    }

    fn new(config: Config, role: Role, local_id: u32, peer: SocketAddr, now: Time) -> Connection {
        let cc = config.congestion.build();
        let mss = config.mss.max(Config::MIN_MSS);
        Connection {
            role,
            state: State::Connecting,
            events: VecDeque::new(),
            local_id,
            peer_id: 0,
            peer_addr: peer,
            start: now,
            request: Handshake::default(),
            response: None,
            accept_response: None,
            connect_deadline: now,
            next_request: now,
            cookie_request_sent: None,
            handshake_rtt: None,
            isn: 0,
            peer_isn: 0,
            mss,
            payload_size: Config::payload_size(mss),
            cc,
            snd: None,
            rcv: None,
            // `m_iRTT = 10 * m_iSYNInterval`, `m_iRTTVar = m_iRTT >> 1`
            rtt_us: 100_000,
            rtt_var_us: 50_000,
            peer_delivery_rate: 16,
            peer_bandwidth: 1,
            exp_count: 1,
            last_rsp: now,
            close_deadline: None,
            control: VecDeque::new(),
            spare: Vec::new(),
            stats: Stats::default(),
            config,
        }
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn is_established(&self) -> bool {
        matches!(self.state, State::Established | State::Closing)
    }

    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed(_))
    }

    /// Closed and nothing left to send.
    pub fn is_drained(&self) -> bool {
        self.is_closed() && self.control.is_empty()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    pub fn local_id(&self) -> u32 {
        self.local_id
    }

    pub fn peer_id(&self) -> u32 {
        self.peer_id
    }

    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    /// The (peer socket id, initial sequence number) a repeated request names.
    pub fn peer_key(&self) -> (u32, u32) {
        (self.peer_id, SeqNo::from_pn(self.peer_isn).get())
    }

    pub fn mss(&self) -> u32 {
        self.mss
    }

    pub fn payload_size(&self) -> usize {
        self.payload_size
    }

    /// The receive buffer's packets at [`Config::max_path_buffer_bytes`]
    /// (0 when buffers do not grow with the path).
    fn path_buffer_packets(&self) -> usize {
        match self.config.max_path_buffer_bytes {
            0 => 0,
            cap => (cap / self.payload_size.max(1)).max(32),
        }
    }

    /// The largest flow window a peer may advertise to us: our configured
    /// one, or as far as a buffer grown with the path may reach.
    fn max_flow_window(&self) -> i64 {
        (self.config.flight_flag_size.max(2) as usize).max(self.path_buffer_packets()) as i64
    }

    /// How much state the connection holds now (tests check it stays bounded).
    pub fn footprint(&self) -> Footprint {
        Footprint {
            send_buffered: self.snd.as_ref().map_or(0, |s| s.buf.len()),
            send_loss_ranges: self.snd.as_ref().map_or(0, |s| s.loss.range_count()),
            send_loss_packets: self.snd.as_ref().map_or(0, |s| s.loss.len()),
            recv_loss_ranges: self.rcv.as_ref().map_or(0, |r| r.loss.range_count()),
            control_queue: self.control.len(),
        }
    }

    pub fn congestion(&self) -> &dyn CongestionControl {
        self.cc.as_ref()
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.rtt = us(self.rtt_us.max(0) as u64);
        s.rtt_var = us(self.rtt_var_us.max(0) as u64);
        s.pacing_rate = self.pacing_rate();
        s.cwnd_packets = self.cc.window() / u64::from(self.mss);
        s.flow_window = self.snd.as_ref().map_or(0, |x| x.flow_window);
        s.peer_receive_rate = self.peer_delivery_rate.max(0) as u64;
        s.peer_bandwidth = self.peer_bandwidth.max(0) as u64;
        (s.probe_pairs, s.probe_pairs_same_instant) = self.rcv.as_ref().map_or((0, 0), |r| r.arrivals.pairs());
        s.congestion = self.cc.name();
        s
    }

    /// Microseconds since the connection began: the header timestamp.
    fn timestamp(&self, now: Time) -> u32 {
        now.micros_since(self.start) as u32
    }

    fn queue_control(&mut self, build: impl FnOnce(&mut Vec<u8>, u32, u32)) {
        if self.control.len() >= self.config.max_control_queue {
            return;
        }
        let mut d = self.spare.pop().unwrap_or_default();
        build(&mut d, 0, self.peer_id);
        self.control.push_back(d);
    }

    fn close_with(&mut self, err: ConnectionError) {
        if !self.is_closed() {
            self.state = State::Closed(err.clone());
            self.events.push_back(Event::Closed(err));
        }
    }

    // ---- handshake -------------------------------------------------------

    fn send_request(&mut self, now: Time) {
        let mut d = self.spare.pop().unwrap_or_default();
        let dest = if self.role == Role::Rendezvous { self.response.map_or(0, |r| r.socket_id as u32) } else { 0 };
        encode::handshake(&mut d, &self.request, 0, dest);
        self.control.push_back(d);
        self.next_request = now + self.config.handshake_interval;
        if self.request.req_type == req_type::RESPONSE && self.cookie_request_sent.is_none() {
            self.cookie_request_sent = Some(now);
        }
    }

    /// `CUDT::connect(const CPacket&)`: the caller's half of the exchange.
    fn handle_connecting(&mut self, now: Time, pkt: &Packet<'_>) {
        let hs = match pkt {
            Packet::Control(ControlPacket { control: Control::Handshake(hs), .. }) => *hs,
            // "a data packet or a keep-alive packet comes, which means the peer
            // side is already connected": rendezvous only, with a response on record
            Packet::Data { .. } | Packet::Control(ControlPacket { control: Control::KeepAlive, .. })
                if self.role == Role::Rendezvous && self.response.is_some() =>
            {
                let res = self.response.unwrap_or_default();
                self.finish_connect(now, res);
                return;
            }
            _ => {
                self.stats.dropped += 1;
                return;
            }
        };
        if self.role == Role::Rendezvous {
            if hs.req_type == req_type::REQUEST {
                self.close_with(ConnectionError::RendezvousMismatch);
                return;
            }
            self.response = Some(hs);
            if self.request.req_type == req_type::RENDEZVOUS || hs.req_type == req_type::RENDEZVOUS {
                self.request.req_type = req_type::RESPONSE;
                self.send_request(now);
                return;
            }
            self.finish_connect(now, hs);
            return;
        }
        match hs.req_type {
            req_type::REQUEST => {
                // The listener's SYN cookie: echo it in the next request.
                self.request.req_type = req_type::RESPONSE;
                self.request.cookie = hs.cookie;
                self.send_request(now);
            }
            req_type::REJECT => self.close_with(ConnectionError::Rejected),
            req_type::RESPONSE => {
                if hs.isn != self.request.isn {
                    // "secuity check": the response must carry our ISN
                    self.close_with(ConnectionError::IsnMismatch);
                    return;
                }
                self.response = Some(hs);
                self.finish_connect(now, hs);
            }
            _ => self.stats.dropped += 1,
        }
    }

    fn finish_connect(&mut self, now: Time, res: Handshake) {
        if let Some(t) = self.cookie_request_sent {
            self.handshake_rtt = Some(now.saturating_since(t));
        }
        let mss = (res.mss.max(Config::MIN_MSS as i32) as u32).min(self.config.mss);
        self.peer_id = res.socket_id as u32;
        let peer_isn = base_pn(res.isn);
        let isn = self.isn;
        self.establish(now, mss, isn, peer_isn, res.flight_flag_size);
    }

    fn establish(&mut self, now: Time, mss: u32, isn: u64, peer_isn: u64, peer_flow_window: i32) {
        // The buffers keep their bytes whatever MSS the handshake settled
        // (a caller's request named its flow window at its own MSS; the
        // first ACK advertises the recounted one).
        self.config = self.config.clone().at_mss(mss);
        self.mss = mss;
        self.payload_size = Config::payload_size(mss);
        self.isn = isn;
        self.peer_isn = peer_isn;
        let flow = i64::from(peer_flow_window).clamp(2, self.max_flow_window());
        if let Some(rtt) = self.handshake_rtt {
            self.rtt_us = (rtt.as_micros() as i64).max(1);
            self.rtt_var_us = self.rtt_us / 2;
        }
        self.snd = Some(Sender {
            buf: SendBuffer::new(self.config.send_buffer_bytes, isn),
            records: VecDeque::new(),
            loss: LossList::new((self.max_flow_window() as usize).max(16)),
            last_ack: isn,
            flow_window: flow,
            next_send: now,
            pair_pending: false,
            pair_charge: false,
            msg_no: 0,
            delivered: 0,
            delivered_time: now,
            first_sent: now,
            app_limited_until: 0,
            blocked: true,
        });
        let rcv_packets = self.config.recv_buffer_packets.max(32) as usize;
        self.rcv = Some(Receiver {
            buf: RecvBuffer::new(rcv_packets, peer_isn),
            loss: LossList::new(rcv_packets.max(self.path_buffer_packets())),
            curr: peer_isn - 1,
            last_ack: peer_isn,
            last_ack_ack: peer_isn,
            ack_no: 0,
            acks: AckWindow::new(1024),
            arrivals: ArrivalWindow::new(),
            last_ack_time: now,
            next_ack_time: now + SYN,
            pkt_count: 0,
            light_ack_count: 1,
            next_nak_time: now + self.config.nak_min_interval.max(us(self.rtt_us as u64)),
            nak_watermark: peer_isn,
            window_update: false,
            shutdown_received: false,
        });
        self.cc.init(now, u64::from(mss), flow as u64 * u64::from(mss), isn, self.handshake_rtt);
        self.last_rsp = now;
        self.exp_count = 1;
        self.state = State::Established;
        self.events.push_back(Event::Connected);
    }

    /// The listener saw a repeated request for this connection (its response
    /// was lost): send the response again (`CUDTUnited::newConnection`,
    /// "connection already exist, this is a repeated connection request").
    pub fn handle_repeated_request(&mut self) {
        if let Some(d) = self.accept_response.clone() {
            if self.control.len() < self.config.max_control_queue {
                self.control.push_back(d);
            }
        }
    }

    // ---- the byte stream -------------------------------------------------

    /// Copies as much of `data` into the send buffer as fits; 0 when full or
    /// not (or no longer) open for writing.
    pub fn write(&mut self, now: Time, data: &[u8]) -> usize {
        if self.state != State::Established {
            return 0;
        }
        let Some(s) = self.snd.as_mut() else { return 0 };
        if s.buf.is_empty() && !data.is_empty() {
            // "delay the EXP timer to avoid mis-fired timeout"
            self.last_rsp = self.last_rsp.max(now);
        }
        if s.buf.unsent() == 0 && s.loss.is_empty() && !data.is_empty() {
            // The sender ran dry: the application, not the path, set the
            // pace. Mark what is sent until everything now in flight (and the
            // first packet of the new data) is delivered (BBR's
            // `tcp_rate_check_app_limited`), so the controller does not read
            // the pause as a slow path.
            s.app_limited_until = s.app_limited_until.max(s.buf.next_pn() + 1);
        }
        s.buf.write(data)
    }

    /// Free space in the send buffer, bytes.
    pub fn send_space(&self) -> usize {
        match (&self.state, &self.snd) {
            (State::Established, Some(s)) => s.buf.free_space(),
            _ => 0,
        }
    }

    /// Written bytes not yet sent once, or losses waiting to be re-sent:
    /// the sender has work queued, so whoever drives it will come back to
    /// it (a pacing or window wait) without being told of a new write.
    pub fn has_unsent(&self) -> bool {
        self.snd.as_ref().is_some_and(|s| s.buf.unsent() > 0 || !s.loss.is_empty())
    }

    /// Bytes written and not yet acknowledged.
    pub fn send_buffered(&self) -> usize {
        self.snd.as_ref().map_or(0, |s| s.buf.len())
    }

    /// Reads in-order bytes; 0 when none are ready (see [`Connection::at_eof`]).
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let Some(r) = self.rcv.as_mut() else { return 0 };
        let before = r.buf.available();
        let n = r.buf.read(out);
        let cap = r.buf.capacity();
        if before < cap / 4 && r.buf.available() >= cap / 2 {
            // The window we last advertised was nearly closed; tell the
            // sender at once that it opened (its only other news would be
            // its EXP timer).
            r.window_update = true;
        }
        n
    }

    pub fn readable(&self) -> usize {
        self.rcv.as_ref().map_or(0, |r| r.buf.readable())
    }

    /// The peer shut down and every byte it sent has been read.
    pub fn at_eof(&self) -> bool {
        self.readable() == 0 && (self.is_closed() || self.rcv.as_ref().is_some_and(|r| r.shutdown_received))
    }

    /// Closes gracefully: keeps sending until every written byte is
    /// acknowledged (at most `linger`), then sends a shutdown (`CUDT::close`).
    pub fn close(&mut self, now: Time) {
        match self.state {
            State::Established => {
                self.state = State::Closing;
                self.close_deadline = Some(now + self.config.linger);
                self.maybe_finish_close(now);
            }
            State::Connecting => self.close_with(ConnectionError::Closed),
            _ => {}
        }
    }

    /// Closes at once, telling the peer (unacknowledged data is dropped).
    pub fn abort(&mut self) {
        if self.is_established() {
            self.queue_control(encode::shutdown);
        }
        self.close_with(ConnectionError::Closed);
    }

    fn maybe_finish_close(&mut self, now: Time) {
        if self.state != State::Closing {
            return;
        }
        let drained = self.snd.as_ref().is_none_or(|s| s.buf.is_empty());
        let expired = self.close_deadline.is_some_and(|d| now >= d);
        if drained || expired {
            // One shutdown is all libudt sends; a second copy costs nothing
            // and spares the peer a 40-second EXP wait if one is lost.
            for _ in 0..2 {
                self.queue_control(encode::shutdown);
            }
            self.close_with(if drained { ConnectionError::Closed } else { ConnectionError::LingerExpired });
        }
    }

    // ---- incoming --------------------------------------------------------

    /// Processes one datagram from `from`. Datagrams from another address,
    /// for another socket, malformed or inconsistent with our state are
    /// counted in [`Stats::dropped`] and change nothing else.
    pub fn handle_datagram(&mut self, now: Time, from: SocketAddr, datagram: &[u8]) {
        if from != self.peer_addr {
            self.stats.dropped += 1;
            return;
        }
        let pkt = match Packet::decode(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.stats.dropped += 1;
                return;
            }
        };
        let dest = match &pkt {
            Packet::Data { header, .. } => header.dest_socket,
            Packet::Control(c) => c.dest_socket,
        };
        if dest != self.local_id && !(dest == 0 && self.state == State::Connecting && self.role == Role::Rendezvous) {
            self.stats.dropped += 1;
            return;
        }
        match self.state {
            State::Connecting => {
                self.handle_connecting(now, &pkt);
                // a rendezvous peer's data may be what completed the setup
                if self.state == State::Established {
                    if let Packet::Data { header, payload } = pkt {
                        self.handle_data(now, &header, payload);
                    }
                }
            }
            State::Established | State::Closing => match pkt {
                Packet::Data { header, payload } => self.handle_data(now, &header, payload),
                Packet::Control(c) => self.handle_control(now, c),
            },
            State::Closed(_) => self.stats.dropped += 1,
        }
        if self.is_established() {
            self.check_timers(now);
        }
    }

    /// `CUDT::processData`.
    fn handle_data(&mut self, now: Time, h: &DataHeader, payload: &[u8]) {
        let payload_size = self.payload_size;
        let Some(r) = self.rcv.as_mut() else { return };
        if payload.len() > payload_size {
            self.stats.dropped += 1;
            return;
        }
        self.exp_count = 1;
        self.last_rsp = now;
        r.pkt_count += 1;
        r.arrivals.on_arrival(now, h.seq.get());
        self.stats.packets_received += 1;
        let pn = h.seq.unwrap_near(r.buf.contiguous_end());
        if pn < r.buf.contiguous_end() || pn >= r.buf.limit() {
            // before the ACK point (a duplicate) or beyond the buffer
            self.stats.dropped += 1;
            return;
        }
        if !r.buf.insert(pn, payload) {
            self.stats.dropped += 1;
            return;
        }
        self.stats.bytes_received += payload.len() as u64;
        let expected = r.curr + 1;
        if pn > expected {
            // A gap: record it and report it at once (one range, as libudt).
            let (a, b) = (expected, pn - 1);
            r.loss.insert(a, b);
            self.stats.lost_detected += b - a + 1;
            let words = if a == b {
                vec![SeqNo::from_pn(a).get()]
            } else {
                vec![SeqNo::from_pn(a).get() | 0x8000_0000, SeqNo::from_pn(b).get()]
            };
            self.queue_control(|d, ts, dest| encode::nak(d, &words, ts, dest));
            self.stats.naks_sent += 1;
        }
        let r = self.rcv.as_mut().expect("receiver exists");
        if pn > r.curr {
            r.curr = pn;
        } else {
            r.loss.remove(pn);
        }
        // "an irregular sized packet usually indicates the end of a message,
        // so send an ACK immediately"
        if payload.len() != payload_size {
            r.next_ack_time = now;
        }
    }

    /// `CUDT::processCtrl`.
    fn handle_control(&mut self, now: Time, c: ControlPacket<'_>) {
        // "Just heard from the peer, reset the expiration count."
        self.exp_count = 1;
        self.last_rsp = now;
        match c.control {
            Control::Ack { ack_no, ack, info } => self.handle_ack(now, ack_no, ack, info),
            Control::LightAck { ack } => {
                let Some(s) = self.snd.as_mut() else { return };
                let pn = ack.unwrap_near(s.last_ack);
                if pn > s.buf.next_pn() {
                    self.stats.dropped += 1;
                } else if pn >= s.last_ack {
                    s.flow_window -= (pn - s.last_ack) as i64;
                    s.last_ack = pn;
                }
            }
            Control::Ack2 { ack_no } => {
                let Some(r) = self.rcv.as_mut() else { return };
                let Some((ack_pn, rtt)) = r.acks.acknowledge(ack_no, now) else { return };
                let rtt = rtt.as_micros() as i64;
                if rtt <= 0 {
                    return;
                }
                self.rtt_var_us = (self.rtt_var_us * 3 + (rtt - self.rtt_us).abs()) >> 2;
                self.rtt_us = (self.rtt_us * 7 + rtt) >> 3;
                if ack_pn > r.last_ack_ack {
                    r.last_ack_ack = ack_pn;
                }
            }
            Control::Nak(ranges) => self.handle_nak(now, ranges),
            Control::Handshake(hs) => {
                // The peer did not get our last handshake and asks again.
                let rendezvous = self.role == Role::Rendezvous;
                if hs.req_type > 0 || (rendezvous && hs.req_type != req_type::RENDEZVOUS_RESPONSE) {
                    if let Some(d) = self.accept_response.clone() {
                        if self.control.len() < self.config.max_control_queue {
                            self.control.push_back(d);
                        }
                        return;
                    }
                    let init = Handshake {
                        isn: SeqNo::from_pn(self.isn).get() as i32,
                        mss: self.mss as i32,
                        flight_flag_size: self.config.flight_flag_size as i32,
                        req_type: if rendezvous { req_type::RENDEZVOUS_RESPONSE } else { req_type::RESPONSE },
                        socket_id: self.local_id as i32,
                        ..Handshake::default()
                    };
                    self.queue_control(|d, ts, dest| encode::handshake(d, &init, ts, dest));
                }
            }
            Control::Shutdown => {
                if let Some(r) = self.rcv.as_mut() {
                    r.shutdown_received = true;
                }
                self.close_with(ConnectionError::PeerShutdown);
            }
            Control::PeerError { code } => self.close_with(ConnectionError::PeerError(code)),
            // A stream socket never drops messages: a drop request would
            // leave a hole in the byte stream, so it is ignored.
            Control::DropRequest { .. } => self.stats.dropped += 1,
            Control::KeepAlive | Control::CongestionWarning | Control::User { .. } => {}
        }
    }

    fn handle_ack(&mut self, now: Time, ack_no: u32, ack: SeqNo, info: AckInfo) {
        let mss = u64::from(self.mss);
        let max_flow = self.max_flow_window();
        let Some(s) = self.snd.as_mut() else { return };
        // ACK2 for every full ACK: libudt's own test (more than one SYN since
        // the last ACK2) compares CPU ticks with microseconds and so is
        // always true; peers therefore expect one per ACK.
        let mut d = self.spare.pop().unwrap_or_default();
        encode::ack2(&mut d, ack_no, 0, self.peer_id);
        if self.control.len() < self.config.max_control_queue {
            self.control.push_back(d);
        }
        self.stats.acks_received += 1;
        let pn = ack.unwrap_near(s.last_ack);
        if pn > s.buf.next_pn() {
            // "this should not happen: attack or bug" — libudt breaks the
            // connection; we ignore the packet.
            self.stats.dropped += 1;
            return;
        }
        if pn >= s.last_ack {
            s.flow_window = i64::from(info.avail_buf).clamp(2, max_flow);
            s.last_ack = pn;
            self.cc.set_max_window(s.flow_window as u64 * mss);
        }
        let first = s.buf.first_unacked();
        if pn <= first {
            return; // a repeated ACK
        }
        let n = pn - first;
        let newest = s.records.get((n - 1) as usize).copied();
        // Whether this ACK passed a repaired hole (then its newest packet
        // waited for the repair, and its RTT is not the path's).
        let held = s.records.iter().take(n as usize).any(|r| r.retransmitted || r.reported_lost);
        s.buf.ack_before(pn);
        if self.config.max_path_buffer_bytes > 0 {
            let window = s.flow_window as usize * self.payload_size;
            let limit = (window.saturating_mul(5) / 4).min(self.config.max_path_buffer_bytes);
            let want = crate::buffer::send_want(s.buf.unacked(), limit);
            if let Some(c) = crate::buffer::grown_capacity(s.buf.capacity(), want, limit) {
                s.buf.grow(c);
            }
        }
        s.records.drain(..(n as usize).min(s.records.len()));
        s.loss.remove_through(pn - 1);
        s.delivered += n * mss;
        s.delivered_time = now;
        let mut rtt_sample = None;
        let mut prompt = None;
        let mut rate = None;
        if let Some(p) = newest {
            if !p.retransmitted {
                rtt_sample = Some(now.saturating_since(p.sent));
                if !held {
                    prompt = Some((pn - 1, p.sent));
                }
            }
            let send_elapsed = p.sent.saturating_since(p.first_sent);
            let ack_elapsed = now.saturating_since(p.delivered_time);
            let interval = send_elapsed.max(ack_elapsed);
            if interval >= Duration::from_millis(1) {
                rate = Some(RateSample {
                    rate: (s.delivered - p.delivered) as f64 / interval.as_secs_f64(),
                    interval,
                    app_limited: p.app_limited,
                    prior_delivered: p.delivered,
                });
            }
            s.first_sent = p.sent;
        }
        let rtt = i64::from(info.rtt_us).clamp(1, 10_000_000);
        self.rtt_var_us = (self.rtt_var_us * 3 + (rtt - self.rtt_us).abs()) >> 2;
        self.rtt_us = (self.rtt_us * 7 + rtt) >> 3;
        let mut rates = (None, None);
        if let Some((speed, bw)) = info.rates {
            if speed > 0 {
                self.peer_delivery_rate = (self.peer_delivery_rate * 7 + i64::from(speed)) >> 3;
            }
            if bw > 0 {
                self.peer_bandwidth = (self.peer_bandwidth * 7 + i64::from(bw)) >> 3;
            }
            rates = (Some(self.peer_delivery_rate as f64 * mss as f64), Some(self.peer_bandwidth as f64 * mss as f64));
        }
        let s = self.snd.as_ref().expect("sender exists");
        let sample = AckSample {
            now,
            acked_bytes: n * mss,
            ack_point: pn,
            delivered: s.delivered,
            bytes_in_flight: s.buf.in_flight() * mss,
            rtt_sample,
            smoothed_rtt: us(self.rtt_us as u64),
            rate,
            peer_receive_rate: rates.0,
            link_capacity: rates.1,
        };
        if let Some((p, sent)) = prompt {
            self.cc.on_prompt_report(now, p, sent);
        }
        self.cc.on_ack(&sample);
        self.maybe_finish_close(now);
    }

    fn handle_nak(&mut self, now: Time, ranges: crate::loss::LossRanges<'_>) {
        self.stats.naks_received += 1;
        let mss = u64::from(self.mss);
        let Some(s) = self.snd.as_mut() else { return };
        let next = s.buf.next_pn();
        if next == self.isn {
            // nothing was ever sent
            self.stats.dropped += 1;
            return;
        }
        let curr = next.saturating_sub(1);
        // Check the whole list before taking any of it ("seq_a must not be
        // greater than seq_b; seq_b must not be greater than the most recent
        // sent seq"). libudt breaks the connection on a bad list; we drop it.
        let mut decoded = Vec::new();
        for (a, b) in ranges.iter() {
            let pa = a.unwrap_near(curr);
            let pb = b.unwrap_near(pa);
            if pa > pb || pb > curr {
                self.stats.dropped += 1;
                return;
            }
            decoded.push((pa, pb));
        }
        let mut added = 0;
        // Packets lost for the first time: a periodic NAK that repeats a
        // loss whose retransmission is still on its way, or the loss of a
        // retransmission, says nothing new about the path's loss rate.
        let mut fresh = 0;
        // The receiver NAKs a gap as the packet after it arrives
        // (`handle_data`): for a gap reported for the first time, that
        // packet's arrival is a prompt report (no ACK timer, no hole's
        // repair; `CongestionControl::on_prompt_report`).
        let mut prompt: Option<(u64, Time)> = None;
        let floor = s.last_ack.max(s.buf.first_unacked());
        let first_unacked = s.buf.first_unacked();
        for (pa, pb) in decoded.iter().copied() {
            if pb < floor {
                continue;
            }
            added += s.loss.insert(pa.max(floor), pb);
            let mut range_fresh = false;
            for pn in pa.max(floor)..=pb {
                if s.records.get((pn - first_unacked) as usize).is_some_and(|r| !r.retransmitted && !r.reported_lost) {
                    fresh += 1;
                    range_fresh = true;
                    if let Some(r) = s.records.get_mut((pn - first_unacked) as usize) {
                        r.reported_lost = true;
                    }
                }
            }
            if range_fresh && pb < curr {
                if let Some(r) = s.records.get((pb + 1 - first_unacked) as usize).filter(|r| !r.retransmitted) {
                    // the newest such packet
                    prompt = Some((pb + 1, r.sent));
                }
            }
        }
        self.stats.lost_reported += added;
        let first_lost = decoded.first().map_or(0, |d| d.0);
        let loss = LossSample {
            now,
            first_lost,
            lost_packets: fresh,
            lost_bytes: fresh * mss,
            largest_sent: curr,
            bytes_in_flight: s.buf.in_flight() * mss,
        };
        // (after the loss, which the report's delivery count needs)
        self.cc.on_loss(&loss);
        if let Some((p, sent)) = prompt {
            self.cc.on_prompt_report(now, p, sent);
        }
        // "the lost packet (retransmission) should be sent out immediately"
        let s = self.snd.as_mut().expect("sender exists");
        s.next_send = s.next_send.min(now);
    }

    // ---- timers ----------------------------------------------------------

    /// When [`Connection::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        match self.state {
            State::Closed(_) => None,
            State::Connecting => Some(self.next_request.min(self.connect_deadline)),
            State::Established | State::Closing => {
                let mut t = self.exp_deadline();
                if let Some(r) = &self.rcv {
                    t = t.min(r.next_ack_time);
                    if self.config.periodic_nak && !r.loss.is_empty() {
                        t = t.min(r.next_nak_time);
                    }
                }
                if let Some(d) = self.close_deadline {
                    t = t.min(d);
                }
                if let Some(s) = &self.snd {
                    if self.can_send_data() {
                        t = t.min(s.next_send + self.pacing_gather());
                    }
                }
                Some(t)
            }
        }
    }

    fn exp_deadline(&self) -> Time {
        let n = u64::from(self.exp_count);
        let base = us(n * (self.rtt_us + 4 * self.rtt_var_us).max(0) as u64) + SYN;
        let min = self.config.min_exp_interval * self.exp_count;
        self.last_rsp + base.max(min)
    }

    pub fn handle_timeout(&mut self, now: Time) {
        match self.state {
            State::Closed(_) => {}
            State::Connecting => {
                if now >= self.connect_deadline {
                    self.close_with(ConnectionError::ConnectTimeout);
                } else if now >= self.next_request {
                    self.send_request(now);
                }
            }
            State::Established | State::Closing => {
                self.check_timers(now);
                if self.close_deadline.is_some_and(|d| now >= d) {
                    self.maybe_finish_close(now);
                }
            }
        }
    }

    /// `CUDT::checkTimers`: ACK, light ACK, NAK and EXP.
    fn check_timers(&mut self, now: Time) {
        if let Some(r) = self.rcv.as_mut() {
            if now >= r.next_ack_time || r.window_update {
                let force = std::mem::take(&mut r.window_update);
                self.send_ack(now, false, force);
                let r = self.rcv.as_mut().expect("receiver exists");
                r.next_ack_time = now + SYN;
                r.pkt_count = 0;
                r.light_ack_count = 1;
            } else if LIGHT_ACK_PACKETS * r.light_ack_count <= r.pkt_count {
                self.send_ack(now, true, false);
                let r = self.rcv.as_mut().expect("receiver exists");
                r.light_ack_count += 1;
            }
        }
        if self.config.periodic_nak {
            self.periodic_nak(now);
        }
        if now >= self.exp_deadline() {
            self.on_exp(now);
        }
    }

    /// `CUDT::sendCtrl(2)`: full or light ACK.
    fn send_ack(&mut self, now: Time, light: bool, force: bool) {
        let Some(r) = self.rcv.as_mut() else { return };
        let ack = r.buf.contiguous_end();
        if ack == r.last_ack_ack && !force {
            return;
        }
        let seq = SeqNo::from_pn(ack);
        if light {
            self.queue_control(|d, ts, dest| encode::light_ack(d, seq, ts, dest));
            return;
        }
        if ack > r.last_ack {
            r.last_ack = ack;
        } else if ack == r.last_ack && !force {
            if now.saturating_since(r.last_ack_time) < us((self.rtt_us + 4 * self.rtt_var_us).max(0) as u64) {
                return;
            }
        } else if ack < r.last_ack {
            return;
        }
        if r.last_ack <= r.last_ack_ack && !force {
            return;
        }
        r.ack_no = next_ack_no(r.ack_no);
        let rates = if now.saturating_since(r.last_ack_time) > SYN {
            r.last_ack_time = now;
            Some((r.arrivals.receive_speed() as i32, r.arrivals.bandwidth() as i32))
        } else {
            None
        };
        if rates.is_some() && self.config.max_path_buffer_bytes > 0 {
            // Size the buffer from the path: PATH_BUFFER_BDPS times what
            // arrives per round trip, when more than configured, up to the
            // cap; grown by a quarter at a time at least (each growth moves
            // the held packets), never shrunk.
            let speed = f64::from(r.arrivals.receive_speed());
            let rtt = self.rtt_us.max(0) as f64 / 1e6;
            let want = (Config::PATH_BUFFER_BDPS * speed * rtt).ceil() as usize;
            let cap = (self.config.max_path_buffer_bytes / self.payload_size.max(1)).max(32);
            if let Some(c) = crate::buffer::grown_capacity(r.buf.capacity(), want, cap) {
                r.buf.grow(c);
            }
        }
        let info = AckInfo {
            rtt_us: self.rtt_us.clamp(0, i64::from(i32::MAX)) as i32,
            rtt_var_us: self.rtt_var_us.clamp(0, i64::from(i32::MAX)) as i32,
            // "a minimum flow window of 2 is used, even if buffer is full"
            avail_buf: (r.buf.available() as i32).max(2),
            rates,
        };
        let ack_no = r.ack_no;
        r.acks.store(ack_no, ack, now);
        self.queue_control(|d, ts, dest| encode::ack(d, ack_no, seq, &info, ts, dest));
        self.stats.acks_sent += 1;
    }

    fn periodic_nak(&mut self, now: Time) {
        let Some(r) = self.rcv.as_mut() else { return };
        if now < r.next_nak_time {
            return;
        }
        let watermark = r.nak_watermark;
        r.nak_watermark = r.curr + 1;
        let rtt = us((self.rtt_us + 4 * self.rtt_var_us).max(0) as u64);
        let speed = u64::from(r.arrivals.receive_speed());
        let extra =
            r.loss.len().saturating_mul(1_000_000_000).checked_div(speed).map_or(Duration::ZERO, Duration::from_nanos);
        r.next_nak_time = now + (rtt + extra).max(self.config.nak_min_interval);
        if r.loss.is_empty() {
            return;
        }
        let max_words = self.payload_size / 4;
        let mut words = Vec::new();
        encode_nak(
            r.loss
                .ranges()
                .take_while(|&(a, _)| a < watermark)
                .map(|(a, b)| (SeqNo::from_pn(a), SeqNo::from_pn(b.min(watermark.saturating_sub(1))))),
            max_words,
            &mut words,
        );
        if !words.is_empty() {
            self.queue_control(|d, ts, dest| encode::nak(d, &words, ts, dest));
            self.stats.naks_sent += 1;
        }
    }

    /// The EXP timer fired: nothing heard from the peer for a while.
    fn on_exp(&mut self, now: Time) {
        self.stats.exp_timeouts += 1;
        if self.exp_count > self.config.max_exp_count && now.saturating_since(self.last_rsp) > self.config.dead_after {
            self.close_with(ConnectionError::PeerDead);
            return;
        }
        let mut keepalive = true;
        if let Some(s) = self.snd.as_mut() {
            if !s.buf.is_empty() {
                keepalive = false;
                let curr = s.buf.next_pn();
                // "resend all unacknowledged packets on timeout, but only if
                // there is no packet in the loss list"
                if curr > s.last_ack && s.loss.is_empty() {
                    let from = s.last_ack.max(s.buf.first_unacked());
                    if curr > from {
                        let n = s.loss.insert(from, curr - 1);
                        self.stats.lost_reported += n;
                    }
                }
                self.cc.on_timeout(now);
                let s = self.snd.as_mut().expect("sender exists");
                s.next_send = s.next_send.min(now);
            }
        }
        if keepalive {
            self.queue_control(encode::keep_alive);
        }
        self.exp_count += 1;
        self.last_rsp = now;
    }

    // ---- outgoing --------------------------------------------------------

    fn pacing_rate(&self) -> f64 {
        let r = self.cc.pacing_rate();
        match self.config.max_bandwidth {
            Some(m) => r.min(m),
            None => r,
        }
    }

    /// How long after the next packet is due the driver may wake to send
    /// it: at rates of a gigabit or more, the time a full GSO send
    /// ([`GATHER_PACKETS`]) takes to fall due, at most [`GATHER_MAX`];
    /// nothing on slower paths, which keep packet-by-packet pacing.
    ///
    /// Woken for each packet as it fell due, the driver sent what its last
    /// round's time let fall due: at 2–4 Gbit/s on loopback 5–9 packets per
    /// `sendmsg`, one `ppoll`, `recvmmsg` and `sendmsg` per handful of
    /// packets, and the sender's CPU per GB followed the rate (a slower
    /// run's more, smaller sends cost more per GB; session 13,
    /// docs/udt.md "The driver"). The backlog is within the burst credit
    /// [`poll_transmit`](Self::poll_transmit) allows (at least
    /// [`BURST_QUANTUM`]), so the average rate stays the controller's.
    fn pacing_gather(&self) -> Duration {
        let rate = self.pacing_rate();
        if !(rate.is_finite() && rate > 0.0) {
            return Duration::ZERO;
        }
        let interval = f64::from(self.mss) / rate;
        if interval > GATHER_INTERVAL.as_secs_f64() {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(interval * f64::from(GATHER_PACKETS - 1)).min(GATHER_MAX)
    }

    fn window_packets(&self) -> i64 {
        let Some(s) = &self.snd else { return 0 };
        let cwnd = (self.cc.window() / u64::from(self.mss)) as i64;
        s.flow_window.min(cwnd.max(2))
    }

    fn can_send_data(&self) -> bool {
        let Some(s) = &self.snd else { return false };
        if !s.loss.is_empty() {
            return true;
        }
        if s.buf.unsent() == 0 {
            return false;
        }
        let in_flight = s.buf.next_pn() as i64 - s.last_ack as i64;
        in_flight < self.window_packets()
    }

    /// Writes the next datagram into `buf` (cleared first) and returns it,
    /// or `None` if nothing is due at `now`. Control packets go first and are
    /// never paced; data waits for the pacing clock and the windows.
    pub fn poll_transmit(&mut self, now: Time, buf: &mut Vec<u8>) -> Option<Transmit> {
        if let Some(d) = self.control.pop_front() {
            buf.clear();
            buf.extend_from_slice(&d);
            // Control packets carry the time too (libudt leaves it 0; either is accepted).
            let ts = self.timestamp(now);
            buf[8..12].copy_from_slice(&ts.to_be_bytes());
            if self.spare.len() < 32 {
                self.spare.push(d);
            }
            return Some(Transmit { len: buf.len(), data: false });
        }
        if !self.is_established() || !self.can_send_data() {
            if let Some(s) = self.snd.as_mut() {
                s.blocked = true;
            }
            return None;
        }
        let interval = {
            let rate = self.pacing_rate();
            if rate.is_finite() && rate > 0.0 {
                Duration::from_secs_f64((f64::from(self.mss) / rate).min(1.0))
            } else {
                Duration::ZERO
            }
        };
        let payload_size = self.payload_size;
        let mss = u64::from(self.mss);
        let timestamp = self.timestamp(now);
        let peer_id = self.peer_id;
        let s = self.snd.as_mut().expect("sender exists");
        if now < s.next_send && !s.pair_pending {
            return None;
        }
        // Backlog a late wake-up may send at once (see below).
        let credit = self.config.max_burst.min((interval * 2).max(BURST_QUANTUM));
        // A wake-up later than that loses pacing time for good: the packets
        // leave below the controller's rate, and their delivery samples read
        // our lateness, not the path. On a loaded host (load 9 on two
        // cores, session 9) every wake-up was milliseconds late, each
        // bandwidth window's samples read a fraction of the rate, the
        // estimate followed them down every 100 ms and a loopback copy
        // crawled at 35 kB/s for minutes. Such sends are marked as an
        // application-limited bubble (the sender, not the path, set the
        // pace): their samples may raise the estimate but never lower it.
        // Not after a blocked poll (a full window waits for the path), and
        // not in start-up: there the bubble would hide the rounds that
        // stopped growing and start-up could run on into the loss (the
        // suspect when a first build with the bubble in start-up read
        // 88 and 114 Mbit/s cold on ferry-wan at 80 ms, 1 %, against the
        // old build's 117 and 122).
        let start_up = self.cc.in_start_up();
        let s = self.snd.as_mut().expect("sender exists");
        if !s.blocked && !s.pair_pending && !start_up && now > s.next_send + credit {
            self.stats.late_sends += 1;
            s.app_limited_until = s.app_limited_until.max(s.buf.next_pn() + 1);
        }
        s.blocked = false;
        buf.clear();
        buf.resize(HEADER_LEN, 0);
        // Retransmissions first (`CUDT::packData`).
        let mut pn = None;
        while let Some(p) = s.loss.pop_first() {
            if p >= s.buf.first_unacked() && s.buf.copy_packet(p, buf) {
                pn = Some((p, true));
                break;
            }
        }
        if pn.is_none() {
            let in_flight = s.buf.next_pn() as i64 - s.last_ack as i64;
            let cwnd = (self.cc.window() / mss) as i64;
            if in_flight >= s.flow_window.min(cwnd.max(2)) {
                s.blocked = true;
                return None;
            }
            if s.buf.in_flight() == 0 {
                // Restarting from idle: a rate sample must not span the idle
                // time (Linux `tcp_rate_skb_sent`).
                s.first_sent = now;
                s.delivered_time = now;
            }
            let p = s.buf.take_new(payload_size)?;
            s.buf.copy_packet(p, buf);
            if s.buf.unsent() == 0 {
                s.app_limited_until = s.app_limited_until.max(p + 1);
            }
            let app_limited = s.app_limited_until > s.last_ack.max(s.buf.first_unacked());
            s.records.push_back(SentRecord {
                sent: now,
                delivered: s.delivered,
                delivered_time: s.delivered_time,
                first_sent: s.first_sent,
                app_limited,
                retransmitted: false,
                reported_lost: false,
            });
            pn = Some((p, false));
        }
        let (pn, retransmit) = pn?;
        if retransmit {
            if let Some(r) = s.records.get_mut((pn - s.buf.first_unacked()) as usize) {
                r.retransmitted = true;
            }
            self.stats.retransmitted += 1;
        }
        s.msg_no = next_msg_no(s.msg_no);
        let header = DataHeader {
            seq: SeqNo::from_pn(pn),
            boundary: Boundary::Solo,
            in_order: false,
            msg_no: s.msg_no,
            timestamp,
            dest_socket: peer_id,
        };
        let mut h = [0u8; HEADER_LEN];
        header.encode(&mut h);
        buf[..HEADER_LEN].copy_from_slice(&h);
        // Pacing: every 16th new packet is the first of a back-to-back pair.
        let probe = !retransmit && SeqNo::from_pn(pn).get() & 0xF == 0;
        if s.pair_pending || probe {
            s.pair_pending = probe && !s.pair_pending;
        }
        if !s.pair_pending {
            // Backlog a late wake-up may send at once: `max_burst`, but no
            // more than `BURST_QUANTUM` of the rate (at least two packets).
            // A millisecond is eight packets back to back at 100 Mbit/s,
            // and a policer with a queue of four keeps four of them; slow
            // paths get packet-by-packet pacing, fast ones keep their
            // batches (250 µs is ~21 packets at 1 Gbit/s).
            let floor = now - credit;
            // The pair's second packet is charged for both, so that the
            // average rate is the controller's (libudt's pairs add 1/16).
            let charge = if s.pair_charge { interval * 2 } else { interval };
            s.pair_charge = false;
            s.next_send = s.next_send.max(floor) + charge;
        } else {
            s.pair_charge = true;
        }
        let in_flight = s.buf.in_flight() * mss;
        let len = buf.len();
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += (len - HEADER_LEN) as u64;
        self.cc.on_sent(now, pn, mss, in_flight);
        Some(Transmit { len, data: true })
    }
}

/// The longest stretch of the pacing rate sent back to back after a late
/// wake-up (see `poll_transmit`).
pub const BURST_QUANTUM: Duration = Duration::from_micros(250);

/// Packets the driver lets fall due before it wakes to send at high rates
/// (`Connection::pacing_gather`): one UDP GSO send of 1 500-byte datagrams.
pub const GATHER_PACKETS: u32 = 44;
/// At most this late (half the burst credit, so timer slack and a busy
/// host's delay stay within it)...
pub const GATHER_MAX: Duration = Duration::from_micros(125);
/// ...and only when packets fall due at least this often (≥ ~1 Gbit/s at
/// MSS 1 500).
pub const GATHER_INTERVAL: Duration = Duration::from_micros(12);

/// Reads the destination socket id of a datagram (for demultiplexing).
pub fn destination(datagram: &[u8]) -> Option<u32> {
    packet::destination_socket_id(datagram)
}
