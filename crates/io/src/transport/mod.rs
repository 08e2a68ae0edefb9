//! Data-channel transports: how the bytes of a transfer cross the network.
//!
//! A [`Transport`] opens data connections (listen, accept, connect); each
//! connection is a [`Connection`], which the transfer loops (`stream` for
//! RFC 959 stream mode, `mode_e` for GFD.20 extended block mode) drive
//! without knowing what is underneath. The loops never name a transport.
//!
//! The surface is what a block-oriented data channel needs, and no more
//! (DESIGN.md, "Layers"):
//!
//! * open: [`Transport::listen`] / [`DataListener::accept`] /
//!   [`Transport::connect`], all taking one [`ChannelOptions`] (the buffer
//!   size rule, the stall timeout, TLS, the profiler's hook), so every data
//!   connection of the server and the client is opened the same way;
//! * send a block: [`Connection::send_block`], a header plus a payload that
//!   is either a buffer or a range of a [`BlockSource`] — so TCP keeps
//!   `sendfile(2)` for file ranges and never copies them through user space;
//! * receive: `Read`, plus [`Connection::discard`] for a sink that drops the
//!   bytes (TCP drops them in the kernel with `MSG_TRUNC`);
//! * finish: [`Connection::finish`] ends the sending direction (stream
//!   mode's end of file; in MODE E the EOD marker says whether the
//!   connection is reused or closed, and `finish` is only called on close);
//! * abort: [`Connection::abort_handle`], which unblocks a thread stuck in a
//!   read or write from another thread (ABOR);
//! * stats: [`Connection::stats`], the [`TransportStats`] the profiler's
//!   verdicts need.
//!
//! Adding a transport is one new file implementing these two traits and one
//! line in [`TRANSPORTS`]; `docs/architecture.md` walks through the
//! in-memory transport ([`memory`]) as the example. TCP (plain and TLS) is
//! in [`tcp`]; UDT ([`udt`], wrapping the `crate::udt` driver) is a real
//! case of the one-file rule (`docs/transports.md`, "UDT as a transport").

pub mod memory;
pub mod quic;
pub mod quic_cc;
pub mod quic_mtu;
pub mod quic_pacer;
pub mod tcp;
pub mod udt;
pub mod udt_seal;

#[cfg(test)]
mod matrix_tests;

use crate::endpoint::BlockSource;
use crate::tls::DataProtection;
use std::fmt;
use std::future::Future;
use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A boxed future: the trait objects below open connections asynchronously
/// (the control loops run on tokio), and this keeps them object-safe
/// without a macro crate.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What one block carries after its header.
#[derive(Clone, Copy)]
pub enum Payload<'a> {
    /// Bytes already in memory (a staged buffer, a listing).
    Bytes(&'a [u8]),
    /// `len` bytes of a source from `offset`: a transport that can move
    /// them inside the kernel (TCP's `sendfile`) asks the source for a
    /// [`FileRange`](crate::endpoint::FileRange); any other reads them.
    Source { source: &'a dyn BlockSource, offset: u64, len: usize },
}

impl fmt::Debug for Payload<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Payload::Bytes(b) => write!(f, "Bytes({})", b.len()),
            Payload::Source { offset, len, .. } => write!(f, "Source({offset}+{len})"),
        }
    }
}

/// What a transport knows about one connection, in the units the
/// profiler's verdicts use. Fields a transport cannot measure stay `None`
/// (or 0 for counters).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TransportStats {
    /// The transport's registry name (`tcp`, `memory`...).
    pub transport: String,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Smoothed round-trip time, microseconds.
    pub rtt_us: Option<u64>,
    /// Bytes the sender may have in flight (TCP: cwnd × MSS).
    pub window_bytes: Option<u64>,
    /// The sender's pacing or delivery rate, bytes per second.
    pub rate: Option<u64>,
    /// Segments or packets sent again.
    pub retransmissions: u64,
    /// Segments or packets the transport counted as lost.
    pub losses: u64,
    /// Time the sender was limited by the receiver's window, by its own
    /// send buffer, and the time it had data in flight at all (the rest of
    /// the connection's life it waited for the application), microseconds.
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub busy_us: Option<u64>,
    /// TCP's whole kernel view, for the profiler's per-stream series
    /// (`None` for other transports). Not serialised: the fields above are
    /// the transport-neutral summary.
    #[serde(skip)]
    pub tcp: Option<crate::tcpinfo::TcpSnapshot>,
}

/// Reads one connection's [`TransportStats`] from another thread while a
/// transfer loop owns the connection: what the profiler samples at each
/// tick. Cloning shares it. A probe may outlive its connection; it then
/// reports what the transport still knows (TCP: a closed socket's last
/// state) or `None`.
#[derive(Clone)]
pub struct StatsProbe(Arc<dyn Fn() -> Option<TransportStats> + Send + Sync>);

impl StatsProbe {
    pub fn new(f: impl Fn() -> Option<TransportStats> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// The connection's stats now.
    pub fn read(&self) -> Option<TransportStats> {
        (self.0)()
    }
}

impl fmt::Debug for StatsProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StatsProbe")
    }
}

/// Unblocks a connection's reads and writes from another thread: they
/// return (end of stream, or an error) and the transfer loop sees the
/// abort flag. What [`AbortSignal`](crate::stream::AbortSignal) holds.
pub struct AbortHandle(Box<dyn Fn() + Send + Sync>);

impl AbortHandle {
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> Self {
        Self(Box::new(f))
    }

    pub fn abort(&self) {
        (self.0)()
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AbortHandle")
    }
}

/// One data connection. Blocking: the transfer loops run it on their own
/// threads, as they always have (the control channel stays async).
pub trait Connection: Read + Write + Send + Sync + fmt::Debug {
    /// The registry name of the transport that made it.
    fn transport(&self) -> &'static str;

    /// Whether payload may bypass user space here: [`Payload::Source`]
    /// without a copy, and [`discard`](Self::discard) without one. TLS
    /// must see every byte, so a protected TCP connection says no.
    fn zero_copy(&self) -> bool {
        false
    }

    /// Whether the bytes are encrypted on the wire (PROT P).
    fn is_encrypted(&self) -> bool {
        false
    }

    /// Completes a security handshake now, so a certificate problem is
    /// reported as such (a no-op where there is none).
    fn handshake(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Sends `header` (may be empty) and then the payload. Returns the
    /// payload bytes sent: fewer than asked only when a source ended early
    /// (a file truncated under the transfer), which the caller reports.
    fn send_block(&mut self, header: &[u8], payload: Payload<'_>) -> io::Result<u64> {
        send_block_buffered(self, header, payload)
    }

    /// Drops up to `max` received bytes; returns how many (0 at the end of
    /// the stream).
    fn discard(&mut self, max: usize) -> io::Result<usize> {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 1 << 20]);
        }
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let n = max.min(s.len());
            loop {
                match self.read(&mut s[..n]) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    r => return r,
                }
            }
        })
    }

    /// Ends the sending direction (the peer reads the end of the stream).
    fn finish(&mut self) -> io::Result<()>;

    /// A handle that unblocks this connection from another thread.
    fn abort_handle(&self) -> io::Result<AbortHandle>;

    /// What the transport measured on this connection so far.
    fn stats(&self) -> TransportStats;

    /// A handle that reads [`stats`](Self::stats) from another thread:
    /// what the profiler registers (it never sees a socket). `None` where
    /// the transport cannot be read while a loop owns the connection.
    fn stats_probe(&self) -> Option<StatsProbe> {
        None
    }

    /// Caps the bytes queued but not yet sent, so a sender takes its next
    /// block only when the network has taken the last (see
    /// `mode_e::NOTSENT_LOWAT`). A no-op where there is no such queue.
    fn limit_unsent(&self, _bytes: u32) -> io::Result<()> {
        Ok(())
    }

    /// Waits (at most `timeout`) until what was written has been sent once:
    /// a UDT sender's send buffer still holds up to a second of data when
    /// the last block is queued, so a transfer's statistics taken then
    /// undercount what it sends, and its `226` would come before its data.
    /// Not until it is acknowledged: that is a round trip more, which a TCP
    /// server does not wait either. A no-op where the kernel owns the queue
    /// (TCP: its counters are read from `TCP_INFO` anyway).
    fn wait_sent(&self, _timeout: Duration) -> io::Result<()> {
        Ok(())
    }

    /// The peer's address, for logs and labels.
    fn peer_addr(&self) -> Option<SocketAddr>;

    /// This end's address, for labels (the profiler's stream names).
    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }

    /// The socket, for callers that still register sockets with the
    /// profiler rather than [`stats_probe`](Self::stats_probe) (the
    /// client). `None` for transports without one.
    fn socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
}

/// A data connection of any transport: what the transfer loops carry.
pub type DataConn = Box<dyn Connection>;

/// Whether the peer has closed (or reset) a connection kept idle between
/// transfers: a look at the socket that takes nothing from it. A sender
/// about to reuse a cached connection asks first, because a closed one
/// takes its data without complaint and the receiver, waiting for a
/// connection that will never send, times out a minute later (a server
/// that shut its cached connections down after each upload, session 20).
/// `false` where there is no socket to look at (UDT, QUIC) or data is
/// waiting (a TLS alert): the transfer finds out as before.
pub fn peer_closed(conn: &dyn Connection) -> bool {
    use nix::sys::socket::{recv, MsgFlags};
    use std::os::fd::AsRawFd;
    let Some(fd) = conn.socket() else { return false };
    let mut byte = [0u8; 1];
    match recv(fd.as_raw_fd(), &mut byte, MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e, nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR),
    }
}

/// Header then payload through the connection's `Write`: the path of every
/// transport that cannot hand file ranges to its kernel.
pub fn send_block_buffered(conn: &mut (impl Write + ?Sized), header: &[u8], payload: Payload<'_>) -> io::Result<u64> {
    match payload {
        Payload::Bytes(b) => {
            write_all_vectored(conn, &mut [IoSlice::new(header), IoSlice::new(b)])?;
            Ok(b.len() as u64)
        }
        Payload::Source { source, offset, len } => {
            let mut buf = vec![0u8; len.min(1 << 20)];
            conn.write_all(header)?;
            let mut sent = 0usize;
            while sent < len {
                let want = (len - sent).min(buf.len());
                let n = match source.read_at(&mut buf[..want], offset + sent as u64) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                conn.write_all(&buf[..n])?;
                sent += n;
            }
            Ok(sent as u64)
        }
    }
}

/// Writes all of `bufs` with as few vectored writes as the transport allows.
pub fn write_all_vectored(w: &mut (impl Write + ?Sized), bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
    let mut bufs = bufs;
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Called once for every data connection opened, before any data moves:
/// where the profiler registers it (one registration point for the server
/// and the client).
pub type ConnectionObserver = Arc<dyn Fn(&dyn Connection) + Send + Sync>;

/// How to open data connections: the same for every transport and every
/// caller (server PASV/PORT, client PORT/PASV, stream-mode copies).
#[derive(Clone)]
pub struct ChannelOptions {
    /// Socket buffer size (SBUF / SITE RETRBUFSIZE / `--tcp-bs`); `None`
    /// leaves it to the kernel's autotuning (see `sizing`).
    pub buffer: Option<u32>,
    /// A read or write that makes no progress for this long fails.
    pub timeout: Duration,
    /// PROT P: TLS on the connection (RFC 4217).
    pub protection: DataProtection,
    /// Under PROT P, the secret UDT data channels key their AES-GCM
    /// records from (exported from the control channel's TLS session, set
    /// only when the session negotiated `TPRT udt:aes-gcm`; `udt_seal`).
    /// Other transports ignore it.
    pub sealing: Option<udt_seal::SealSecret>,
    /// The path's bottleneck rate, bytes/s: on a server as the peer
    /// announced it (`OPTS TPRT Rate=N;`), on a client as this copy was
    /// given it (`--path-rate`) or remembered it (the path cache). A UDT
    /// or QUIC sender on this channel starts its ferry controller at it.
    /// Per channel, never process-wide. Other transports ignore it.
    pub path_rate: Option<f64>,
    /// Told about every connection opened.
    pub observer: Option<ConnectionObserver>,
}

impl ChannelOptions {
    pub fn new(timeout: Duration) -> Self {
        Self {
            buffer: None,
            timeout,
            protection: DataProtection::Clear,
            sealing: None,
            path_rate: None,
            observer: None,
        }
    }

    pub(crate) fn observe(&self, conn: &dyn Connection) {
        if let Some(o) = &self.observer {
            o(conn)
        }
    }
}

impl fmt::Debug for ChannelOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelOptions")
            .field("buffer", &self.buffer)
            .field("timeout", &self.timeout)
            .field("private", &self.protection.is_private())
            .field("sealing", &self.sealing.is_some())
            .field("path_rate", &self.path_rate)
            .field("observed", &self.observer.is_some())
            .finish()
    }
}

/// A passive data-channel endpoint (PASV/EPSV/SPAS on the server, PORT on
/// the client).
pub trait DataListener: Send + Sync + fmt::Debug {
    fn local_addr(&self) -> io::Result<SocketAddr>;

    /// The next connection from `peer` (from anywhere when `None`: the
    /// destination of a third-party copy from another host), ready for
    /// data: `opts` applied, observed, wrapped in TLS under PROT P.
    /// Connections from other addresses are dropped unopened, since they
    /// could inject or steal data.
    fn accept<'a>(
        &'a self,
        opts: &'a ChannelOptions,
        peer: Option<IpAddr>,
    ) -> BoxFuture<'a, io::Result<(DataConn, SocketAddr)>>;
}

/// One kind of data channel.
pub trait Transport: Send + Sync + fmt::Debug {
    /// The name used in FEAT, `TPRT` and on the command line.
    fn name(&self) -> &'static str;

    /// Listens at `at` (port 0: any). An address in use is
    /// `io::ErrorKind::AddrInUse`, so [`PortAllocator`] can try the next.
    /// Only `opts.buffer` is used here (TCP sets it before `listen` so the
    /// window scale matches); accepted connections get the options given
    /// to [`DataListener::accept`], which may differ per transfer.
    fn listen(&self, at: SocketAddr, opts: &ChannelOptions) -> io::Result<Arc<dyn DataListener>>;

    /// Connects to `to`, from `from` when given (the server connects from
    /// the address its client talks to), within `opts.timeout`.
    fn connect<'a>(
        &'a self,
        to: SocketAddr,
        from: Option<IpAddr>,
        opts: &'a ChannelOptions,
    ) -> BoxFuture<'a, io::Result<DataConn>>;
}

/// One line per transport: its name, whether a peer on the network can
/// use it (only those are offered in FEAT and accepted by `TPRT`), and
/// how to make one.
#[derive(Debug)]
pub struct Registration {
    pub name: &'static str,
    pub networked: bool,
    pub make: fn() -> Arc<dyn Transport>,
}

/// Every transport Ferry has. Adding one is a new file and a line here.
pub static TRANSPORTS: &[Registration] = &[
    Registration { name: "tcp", networked: true, make: tcp::transport },
    Registration { name: "memory", networked: false, make: memory::transport },
    Registration { name: "quic", networked: true, make: quic::transport },
    Registration { name: "udt", networked: true, make: udt::transport },
];

/// The transport of that name (case-insensitive), if Ferry has it.
pub fn by_name(name: &str) -> Option<Arc<dyn Transport>> {
    TRANSPORTS.iter().find(|r| r.name.eq_ignore_ascii_case(name)).map(|r| (r.make)())
}

/// The transports a peer on the network can select, in FEAT order.
pub fn networked() -> Vec<&'static str> {
    TRANSPORTS.iter().filter(|r| r.networked).map(|r| r.name).collect()
}

/// The default data channel: TCP.
pub fn default_transport() -> Arc<dyn Transport> {
    tcp::transport()
}

/// Ports for passive listeners from a configured range, through a
/// rotating cursor: each bind starts at the port after the last one handed
/// out, so ports held in TIME-WAIT by earlier transfers do not cost a
/// failed bind each. Globus instead walks its range from the bottom on
/// every PASV and pays one failed `bind()` per TIME-WAIT port — 757,253
/// failed binds for 2,000 files in the reference run, 3.8× slower. The one
/// allocator of the server and the client, whatever the transport.
#[derive(Debug)]
pub struct PortAllocator {
    range: Option<(u16, u16)>,
    cursor: AtomicU32,
}

impl PortAllocator {
    /// Ports `low..=high`, or any port the system picks when `None`.
    pub fn new(range: Option<(u16, u16)>) -> Self {
        Self { range, cursor: AtomicU32::new(0) }
    }

    /// A listener of `transport` on `ip`, on a port from the range if one
    /// is set.
    pub fn bind(
        &self,
        transport: &dyn Transport,
        ip: IpAddr,
        opts: &ChannelOptions,
    ) -> io::Result<Arc<dyn DataListener>> {
        let Some((low, high)) = self.range else {
            return transport.listen(SocketAddr::new(ip, 0), opts);
        };
        let span = u32::from(high - low) + 1;
        let start = self.cursor.fetch_add(1, Ordering::Relaxed) % span;
        let mut last_err = None;
        for i in 0..span {
            let port = low + ((start + i) % span) as u16;
            match transport.listen(SocketAddr::new(ip, port), opts) {
                Ok(l) => {
                    // The next bind starts after this port.
                    self.cursor.store(start + i + 1, Ordering::Relaxed);
                    return Ok(l);
                }
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => last_err = Some(e),
                Err(e) => return Err(e),
            }
        }
        // Every port is held (by idle sessions' PASV, or TIME-WAIT): say
        // so, rather than the last bind's bare "Address already in use".
        let why = last_err.map(|e| e.to_string()).unwrap_or_default();
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("all {span} ports of the passive port range {low}-{high} are in use ({why}); try again later"),
        ))
    }
}

/// [`DataListener::accept`] within `timeout`.
pub async fn accept_from(
    listener: &dyn DataListener,
    opts: &ChannelOptions,
    peer: Option<IpAddr>,
    timeout: Duration,
) -> io::Result<DataConn> {
    let (conn, _) = tokio::time::timeout(timeout, listener.accept(opts, peer))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no data connection arrived in time"))??;
    Ok(conn)
}

/// Whether a connection from `from` may be taken when `peer` is expected.
pub(crate) fn admissible(from: SocketAddr, peer: Option<IpAddr>) -> bool {
    match peer {
        Some(ip) if !same_ip(from.ip(), ip) => {
            tracing::warn!(%from, expected = %ip, "dropped a data connection from a foreign address");
            false
        }
        _ => true,
    }
}

/// The same host, whether written as IPv4 or IPv4-mapped IPv6.
pub fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cached connection is looked at, never read from: open and idle,
    /// or with data waiting, it is alive (and the data stays); closed or
    /// reset by the peer, it is not.
    #[test]
    fn peer_closed_tells_a_closed_cached_connection_from_an_idle_one() {
        use std::io::{Read, Write};
        use std::os::fd::AsFd;
        let pair = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let ours = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let conn: DataConn = Box::new(crate::tls::DataStream::Plain(ours));
            (conn, l.accept().unwrap().0)
        };
        // Until the peer's bytes or FIN are here (a deadline, not a timing).
        let readable = |conn: &DataConn| {
            let fd = conn.socket().unwrap();
            let mut fds = [nix::poll::PollFd::new(fd.as_fd(), nix::poll::PollFlags::POLLIN)];
            assert_eq!(nix::poll::poll(&mut fds, 10_000u16).unwrap(), 1, "nothing arrived in 10 s");
        };
        let (mut conn, mut peer) = pair();
        assert!(!peer_closed(&*conn), "an idle connection");
        peer.write_all(b"x").unwrap();
        readable(&conn);
        assert!(!peer_closed(&*conn), "data waiting");
        let mut b = [0u8; 1];
        conn.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x", "the look took nothing");
        peer.shutdown(std::net::Shutdown::Both).unwrap();
        readable(&conn);
        assert!(peer_closed(&*conn), "shut down by the peer");
        let (conn, peer) = pair();
        drop(peer);
        readable(&conn);
        assert!(peer_closed(&*conn), "closed by the peer");
    }

    #[test]
    fn the_registry_offers_tcp_quic_and_udt_and_keeps_memory_off_the_network() {
        assert_eq!(networked(), vec!["tcp", "quic", "udt"]);
        assert_eq!(by_name("TCP").unwrap().name(), "tcp");
        assert_eq!(by_name("memory").unwrap().name(), "memory");
        assert_eq!(by_name("UDT").unwrap().name(), "udt");
        assert!(by_name("rdma").is_none());
    }

    fn four_free_ports_below_the_ephemeral_range() -> (std::net::TcpListener, u16) {
        let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
            .unwrap_or(32768);
        let top = ephemeral_low.saturating_sub(4).max(2000);
        let start = 2000 + (std::process::id() as u16 % (top - 2000).max(1));
        for base in (start..top).chain(2000..start).step_by(4) {
            let held: Vec<_> =
                (base..base + 4).map_while(|p| std::net::TcpListener::bind(("127.0.0.1", p)).ok()).collect();
            if held.len() == 4 {
                let first = held.into_iter().next().unwrap();
                return (first, base);
            }
        }
        panic!("no four consecutive free ports below {ephemeral_low}");
    }

    #[tokio::test]
    async fn ports_rotate_through_the_range_and_skip_busy_ones() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        // Four free ports below the kernel's ephemeral range (so tests
        // running beside this one, which bind port 0, are never handed
        // them); the first is held busy for the whole test and the range
        // starts there, so the allocator must skip it.
        let (held, low) = four_free_ports_below_the_ephemeral_range();
        let alloc = PortAllocator::new(Some((low, low + 3)));
        let tcp = tcp::transport();
        let opts = ChannelOptions::new(Duration::from_secs(5));
        let mut got = Vec::new();
        while let Ok(l) = alloc.bind(&*tcp, ip, &opts) {
            got.push(l);
            assert!(got.len() <= 4);
        }
        let ports: Vec<u16> = got.iter().map(|l| l.local_addr().unwrap().port()).collect();
        assert!(!ports.is_empty(), "no free port next to {low}");
        assert!(ports.iter().all(|p| (low..=low + 3).contains(p) && *p != held.local_addr().unwrap().port()));
        let mut unique = ports.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ports.len(), "{ports:?}");
        // Releasing one makes exactly that one available again.
        let freed = ports[0];
        drop(got.remove(0));
        let opts = ChannelOptions { buffer: Some(1 << 20), ..opts };
        assert_eq!(alloc.bind(&*tcp, ip, &opts).unwrap().local_addr().unwrap().port(), freed);
    }
}
