//! Per-stream TCP state: `TCP_INFO` of every data connection of a transfer.
//!
//! The data path registers each data socket with a [`StreamRegistry`] when
//! it opens it; a running [`Sampler`](crate::Sampler) attached to the
//! registry reads `TCP_INFO` of every registered socket at each tick, and
//! once more when the socket is deregistered, so totals such as
//! `bytes_acked` and `total_retrans` are complete even for a stream that
//! lived shorter than one interval.
//!
//! A data connection is registered by its transport's
//! [`StatsProbe`](ferry_io::transport::StatsProbe)
//! ([`StreamRegistry::register_connection`]): the sampler reads
//! `TransportStats` and never touches a descriptor; TCP's stats carry the
//! whole `TCP_INFO` reading, other transports' the neutral summary. A
//! plain socket that is no transport's connection (the profiler's own
//! tests, examples) can still be registered by descriptor
//! ([`StreamRegistry::register`]).
//!
//! Either way the registry holds a duplicate of the descriptor (TCP's
//! probe holds one too), never the caller's raw number: a number can be
//! closed and reused for another socket between two ticks, and a duplicate
//! cannot. The price is that the connection is only fully closed (FIN
//! sent) when the last duplicate is, so the [`StreamHandle`] must be
//! dropped no later than the connection itself. [`Tracked`] bundles both
//! in the right drop order; use it where you can.

use ferry_io::tcpinfo;
use ferry_io::transport::{StatsProbe, TransportStats};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::{ProfileError, Result};

/// What the kernel knows about one TCP connection, in plain units.
///
/// Rates are bytes per second; times are microseconds unless the name says
/// `_ms`; windows are in segments (`snd_cwnd`, `snd_ssthresh`) or bytes
/// (`snd_wnd`, `rcv_wnd`, `rcv_space`), as in `struct tcp_info`.
/// docs/profiler.md describes each field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpInfo {
    pub state: String,
    pub ca_state: String,
    pub retransmits: u8,
    pub backoff: u8,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub delivery_rate_app_limited: bool,
    pub rto_us: u32,
    pub ato_us: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub last_data_sent_ms: u32,
    pub last_data_recv_ms: u32,
    pub last_ack_recv_ms: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_ssthresh: Option<u32>,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt_us: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: Option<u64>,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt_us: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    pub snd_wnd: u32,
    pub rcv_wnd: Option<u32>,
    pub rehash: Option<u32>,
    pub total_rto: Option<u16>,
    pub total_rto_recoveries: Option<u16>,
    pub total_rto_time_ms: Option<u32>,
    /// The socket's send and receive buffer sizes (`SO_SNDBUF`, `SO_RCVBUF`:
    /// not part of `TCP_INFO`, read with it), as autotuning has grown them.
    #[serde(default)]
    pub send_buffer_bytes: Option<u32>,
    #[serde(default)]
    pub receive_buffer_bytes: Option<u32>,
}

/// `TCP_INFINITE_SSTHRESH`: slow start has not ended yet.
const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

fn state_name(s: u8) -> &'static str {
    // include/net/tcp_states.h
    match s {
        1 => "established",
        2 => "syn_sent",
        3 => "syn_recv",
        4 => "fin_wait1",
        5 => "fin_wait2",
        6 => "time_wait",
        7 => "close",
        8 => "close_wait",
        9 => "last_ack",
        10 => "listen",
        11 => "closing",
        12 => "new_syn_recv",
        _ => "unknown",
    }
}

fn ca_state_name(s: u8) -> &'static str {
    // include/uapi/linux/tcp.h, enum tcp_ca_state
    match s {
        0 => "open",
        1 => "disorder",
        2 => "cwr",
        3 => "recovery",
        4 => "loss",
        _ => "unknown",
    }
}

impl TcpInfo {
    fn from_raw(r: &tcpinfo::RawTcpInfo, len: usize) -> TcpInfo {
        let has = |offset: usize| len > offset;
        TcpInfo {
            state: state_name(r.state).into(),
            ca_state: ca_state_name(r.ca_state).into(),
            retransmits: r.retransmits,
            backoff: r.backoff,
            snd_wscale: r.wscale & 0x0f,
            rcv_wscale: r.wscale >> 4,
            delivery_rate_app_limited: r.app_limited_bits & 1 == 1,
            rto_us: r.rto,
            ato_us: r.ato,
            snd_mss: r.snd_mss,
            rcv_mss: r.rcv_mss,
            unacked: r.unacked,
            sacked: r.sacked,
            lost: r.lost,
            retrans: r.retrans,
            last_data_sent_ms: r.last_data_sent,
            last_data_recv_ms: r.last_data_recv,
            last_ack_recv_ms: r.last_ack_recv,
            pmtu: r.pmtu,
            rcv_ssthresh: r.rcv_ssthresh,
            rtt_us: r.rtt,
            rttvar_us: r.rttvar,
            snd_ssthresh: (r.snd_ssthresh < INFINITE_SSTHRESH).then_some(r.snd_ssthresh),
            snd_cwnd: r.snd_cwnd,
            advmss: r.advmss,
            reordering: r.reordering,
            rcv_rtt_us: r.rcv_rtt,
            rcv_space: r.rcv_space,
            total_retrans: r.total_retrans,
            pacing_rate: r.pacing_rate,
            // ~0 means "no limit" (SO_MAX_PACING_RATE unset).
            max_pacing_rate: (r.max_pacing_rate != u64::MAX).then_some(r.max_pacing_rate),
            bytes_acked: r.bytes_acked,
            bytes_received: r.bytes_received,
            segs_out: r.segs_out,
            segs_in: r.segs_in,
            notsent_bytes: r.notsent_bytes,
            min_rtt_us: r.min_rtt,
            data_segs_in: r.data_segs_in,
            data_segs_out: r.data_segs_out,
            delivery_rate: r.delivery_rate,
            busy_time_us: r.busy_time,
            rwnd_limited_us: r.rwnd_limited,
            sndbuf_limited_us: r.sndbuf_limited,
            delivered: r.delivered,
            delivered_ce: r.delivered_ce,
            bytes_sent: r.bytes_sent,
            bytes_retrans: r.bytes_retrans,
            dsack_dups: r.dsack_dups,
            reord_seen: r.reord_seen,
            rcv_ooopack: r.rcv_ooopack,
            snd_wnd: r.snd_wnd,
            rcv_wnd: has(tcpinfo::OFFSET_RCV_WND).then_some(r.rcv_wnd),
            rehash: has(tcpinfo::OFFSET_REHASH).then_some(r.rehash),
            total_rto: has(tcpinfo::OFFSET_TOTAL_RTO).then_some(r.total_rto),
            total_rto_recoveries: has(tcpinfo::OFFSET_TOTAL_RTO).then_some(r.total_rto_recoveries),
            total_rto_time_ms: has(tcpinfo::OFFSET_TOTAL_RTO).then_some(r.total_rto_time),
            send_buffer_bytes: None,
            receive_buffer_bytes: None,
        }
    }
}

/// Reads `TCP_INFO` of one socket now.
///
/// Works on anything that owns or borrows a TCP socket descriptor: std's and
/// tokio's `TcpStream`, `socket2::Socket`, a `BorrowedFd`.
pub fn tcp_info(socket: &impl AsFd) -> Result<TcpInfo> {
    let fd = socket.as_fd();
    let (raw, len) =
        tcpinfo::raw_tcp_info(fd).map_err(|source| ProfileError::TcpInfo { fd: fd.as_raw_fd(), source })?;
    if len < tcpinfo::MIN_LEN {
        return Err(ProfileError::TcpInfo {
            fd: fd.as_raw_fd(),
            source: io::Error::new(
                io::ErrorKind::Unsupported,
                format!("kernel returned {len} bytes of struct tcp_info; Linux 5.4 or later is needed"),
            ),
        });
    }
    let mut info = TcpInfo::from_raw(&raw, len);
    let sock = socket2::SockRef::from(&fd);
    info.send_buffer_bytes = sock.send_buffer_size().ok().map(|v| v as u32);
    info.receive_buffer_bytes = sock.recv_buffer_size().ok().map(|v| v as u32);
    Ok(info)
}

/// A stream's reading from its transport's stats: TCP's whole `TCP_INFO`
/// when the transport is TCP, the neutral summary otherwise (the fields a
/// transport does not measure stay 0).
pub fn info_from_stats(s: &TransportStats) -> Option<TcpInfo> {
    if let Some(snap) = &s.tcp {
        if snap.len < tcpinfo::MIN_LEN {
            return None;
        }
        let mut info = TcpInfo::from_raw(&snap.raw, snap.len);
        info.send_buffer_bytes = snap.send_buffer_bytes;
        info.receive_buffer_bytes = snap.receive_buffer_bytes;
        return Some(info);
    }
    let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    Some(TcpInfo {
        state: "established".into(),
        ca_state: "open".into(),
        rtt_us: u32_of(s.rtt_us.unwrap_or(0)),
        bytes_sent: s.bytes_sent,
        bytes_acked: s.bytes_sent,
        bytes_received: s.bytes_received,
        total_retrans: u32_of(s.retransmissions),
        lost: u32_of(s.losses),
        delivery_rate: s.rate.unwrap_or(0),
        busy_time_us: s.busy_us.unwrap_or(0),
        rwnd_limited_us: s.rwnd_limited_us.unwrap_or(0),
        sndbuf_limited_us: s.sndbuf_limited_us.unwrap_or(0),
        ..TcpInfo::default()
    })
}

/// One `TCP_INFO` reading of a stream, `t` seconds after its sampler started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSample {
    pub t: f64,
    #[serde(flatten)]
    pub info: TcpInfo,
}

/// All readings of one registered socket during a profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamSeries {
    /// Registry-assigned, unique within one registry.
    pub id: u64,
    /// The caller's name for it ("data 3", "RETR big.nc #2").
    pub label: String,
    pub local: Option<String>,
    pub peer: Option<String>,
    /// When the sampler first saw it (0 if it was registered before the sampler started).
    pub first_t: f64,
    /// When it was deregistered; `None` if it was still open when sampling stopped.
    pub closed_t: Option<f64>,
    pub samples: Vec<StreamSample>,
}

struct LiveStream {
    id: u64,
    label: String,
    local: Option<SocketAddr>,
    peer: Option<SocketAddr>,
    source: Source,
}

/// Where a stream's readings come from.
enum Source {
    /// A transport's connection: its stats.
    Probe(StatsProbe),
    /// A bare socket: a duplicate of its descriptor.
    Fd(OwnedFd),
}

impl Source {
    fn read(&self) -> Option<TcpInfo> {
        match self {
            // A socket that is not (or no longer) TCP simply has no sample.
            Source::Fd(fd) => tcp_info(fd).ok(),
            Source::Probe(p) => p.read().as_ref().and_then(info_from_stats),
        }
    }
}

/// A stream that was deregistered while a sampler was attached, with its
/// last reading, waiting for the sampler's next tick.
pub(crate) struct ClosedStream {
    pub id: u64,
    pub label: String,
    pub local: Option<SocketAddr>,
    pub peer: Option<SocketAddr>,
    pub at: Instant,
    pub last: Option<TcpInfo>,
}

/// One stream's reading handed to the sampler.
pub(crate) struct Reading {
    pub id: u64,
    pub label: String,
    pub local: Option<SocketAddr>,
    pub peer: Option<SocketAddr>,
    pub info: TcpInfo,
}

#[derive(Default)]
struct RegistryState {
    next_id: u64,
    live: Vec<LiveStream>,
    closed: Vec<ClosedStream>,
}

#[derive(Default)]
struct RegistryInner {
    state: Mutex<RegistryState>,
    attached: AtomicBool,
}

/// The set of data sockets whose `TCP_INFO` a sampler reads.
///
/// Cheap to clone (an `Arc`) and safe to share between the data path, which
/// registers sockets as it opens them, and the sampler thread. Registration
/// costs one `dup` and a mutex; it is fine to register every data socket
/// whether or not profiling is on, which is what a server with persistent
/// data channels should do so that channels opened before `SITE PROFILE`
/// are sampled too. Without an attached sampler nothing is read.
#[derive(Clone, Default)]
pub struct StreamRegistry {
    inner: Arc<RegistryInner>,
}

impl fmt::Debug for StreamRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamRegistry")
            .field("streams", &self.len())
            .field("attached", &self.inner.attached.load(Ordering::Relaxed))
            .finish()
    }
}

fn lock(inner: &RegistryInner) -> MutexGuard<'_, RegistryState> {
    // A panic while holding the lock leaves plain data behind; keep going.
    inner.state.lock().unwrap_or_else(|e| e.into_inner())
}

impl StreamRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a data socket under a label. Keep the returned handle as
    /// long as the socket and drop it first (see the module docs); dropping
    /// it deregisters the socket and, if a sampler is attached, records a
    /// last reading.
    pub fn register(&self, socket: &impl AsFd, label: impl Into<String>) -> Result<StreamHandle> {
        let fd = socket.as_fd();
        let raw = fd.as_raw_fd();
        let dup = fd.try_clone_to_owned().map_err(|e| ProfileError::io(format!("dup of descriptor {raw}"), e))?;
        let sock = socket2::SockRef::from(&fd);
        let local = sock.local_addr().ok().and_then(|a| a.as_socket());
        let peer = sock.peer_addr().ok().and_then(|a| a.as_socket());
        Ok(self.add(Source::Fd(dup), label.into(), local, peer))
    }

    /// Registers a data connection by its transport's stats probe (see
    /// the module docs); `None` when the transport offers none. Keep the
    /// handle no longer than the connection.
    pub fn register_connection(
        &self,
        conn: &dyn ferry_io::transport::Connection,
        label: impl Into<String>,
    ) -> Option<StreamHandle> {
        let probe = conn.stats_probe()?;
        Some(self.add(Source::Probe(probe), label.into(), conn.local_addr(), conn.peer_addr()))
    }

    fn add(&self, source: Source, label: String, local: Option<SocketAddr>, peer: Option<SocketAddr>) -> StreamHandle {
        let mut st = lock(&self.inner);
        st.next_id += 1;
        let id = st.next_id;
        st.live.push(LiveStream { id, label, local, peer, source });
        StreamHandle { registry: Arc::downgrade(&self.inner), id }
    }

    /// Registers a socket and bundles it with its handle, so that dropping
    /// the result deregisters before it closes.
    pub fn track<S: AsFd>(&self, socket: S, label: impl Into<String>) -> Result<Tracked<S>> {
        let handle = self.register(&socket, label)?;
        Ok(Tracked { handle: Some(handle), socket })
    }

    /// Number of currently registered sockets.
    pub fn len(&self) -> usize {
        lock(&self.inner).live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn attach(&self) -> Result<()> {
        if self.inner.attached.swap(true, Ordering::SeqCst) {
            return Err(ProfileError::RegistryBusy);
        }
        Ok(())
    }

    pub(crate) fn detach(&self) {
        lock(&self.inner).closed.clear();
        self.inner.attached.store(false, Ordering::SeqCst);
    }

    /// Reads every live socket and takes the streams closed since the last call.
    pub(crate) fn read_all(&self) -> (Vec<Reading>, Vec<ClosedStream>) {
        let mut st = lock(&self.inner);
        let readings = st
            .live
            .iter()
            .filter_map(|s| {
                s.source.read().map(|info| Reading {
                    id: s.id,
                    label: s.label.clone(),
                    local: s.local,
                    peer: s.peer,
                    info,
                })
            })
            .collect();
        let closed = std::mem::take(&mut st.closed);
        (readings, closed)
    }

    fn deregister(inner: &RegistryInner, id: u64) {
        let mut st = lock(inner);
        let Some(pos) = st.live.iter().position(|s| s.id == id) else { return };
        let s = st.live.swap_remove(pos);
        if inner.attached.load(Ordering::SeqCst) {
            let last = s.source.read();
            st.closed.push(ClosedStream {
                id: s.id,
                label: s.label,
                local: s.local,
                peer: s.peer,
                at: Instant::now(),
                last,
            });
        }
        // `s.source`, with its duplicate descriptor, closes here.
    }
}

/// Keeps one socket registered; dropping it deregisters the socket.
#[derive(Debug)]
#[must_use = "dropping the handle deregisters the socket at once"]
pub struct StreamHandle {
    registry: Weak<RegistryInner>,
    id: u64,
}

impl StreamHandle {
    /// The registry's id for this stream, as found in [`StreamSeries::id`].
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        if let Some(inner) = self.registry.upgrade() {
            StreamRegistry::deregister(&inner, self.id);
        }
    }
}

/// A socket together with its registration, dropped in the right order
/// (registration first, so the connection closes when this value is dropped).
/// Dereferences to the socket; `Read` and `Write` pass through.
#[derive(Debug)]
pub struct Tracked<S: AsFd> {
    handle: Option<StreamHandle>,
    socket: S,
}

impl<S: AsFd> Tracked<S> {
    /// The registry's id for this stream.
    pub fn stream_id(&self) -> u64 {
        self.handle.as_ref().map(|h| h.id).unwrap_or(0)
    }

    /// Deregisters and gives the socket back.
    pub fn into_inner(mut self) -> S {
        self.handle.take();
        // Move the socket out without running `Drop` for `self` twice:
        // `handle` is already gone, so a plain destructure is enough.
        let Tracked { socket, .. } = self;
        socket
    }
}

impl<S: AsFd> std::ops::Deref for Tracked<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.socket
    }
}

impl<S: AsFd> std::ops::DerefMut for Tracked<S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.socket
    }
}

impl<S: AsFd + Read> Read for Tracked<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.socket.read(buf)
    }
}

impl<S: AsFd + Write> Write for Tracked<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.socket.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.socket.flush()
    }
}

impl<S: AsFd> AsFd for Tracked<S> {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_io::tls::DataStream;
    use ferry_io::transport::Connection;
    use std::net::{TcpListener, TcpStream};

    /// A transport's connection is sampled through its stats probe: the
    /// whole TCP_INFO for TCP, and a last reading when it goes.
    #[test]
    fn connections_are_sampled_through_their_transport_stats() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a: Box<dyn Connection> =
            Box::new(DataStream::Plain(TcpStream::connect(l.local_addr().unwrap()).unwrap()));
        let (mut b, _) = l.accept().unwrap();
        a.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        b.read_exact(&mut got).unwrap();
        let reg = StreamRegistry::new();
        reg.attach().unwrap();
        let h = reg.register_connection(&*a, "data 1").expect("TCP offers a probe");
        let (readings, _) = reg.read_all();
        assert_eq!(readings.len(), 1);
        let r = &readings[0];
        assert_eq!((r.label.as_str(), r.peer, r.local), ("data 1", a.peer_addr(), a.local_addr()));
        assert_eq!(r.info.state, "established");
        assert!(r.info.bytes_acked >= 4, "{:?}", r.info);
        assert!(r.info.snd_mss > 0 && r.info.send_buffer_bytes.is_some(), "{:?}", r.info);
        drop(h);
        let (readings, closed) = reg.read_all();
        assert!(readings.is_empty());
        assert_eq!(closed.len(), 1);
        assert!(closed[0].last.is_some());
        reg.detach();
    }

    /// A transport without TCP reports its neutral summary.
    #[test]
    fn other_transports_report_the_neutral_stats() {
        let stats = TransportStats {
            transport: "memory".into(),
            bytes_sent: 10,
            bytes_received: 20,
            rtt_us: Some(300),
            retransmissions: 2,
            ..TransportStats::default()
        };
        let info = info_from_stats(&stats).unwrap();
        assert_eq!((info.bytes_sent, info.bytes_received, info.rtt_us, info.total_retrans), (10, 20, 300, 2));
    }
}
