//! UDT data channels (UDT4 over UDP, `crate::udt`): the rate-based
//! transport for long, lossy paths, and the one Globus selects with
//! `-dc-default udt` / `SITE SETNETSTACK udt`.
//!
//! The driver already is a blocking byte stream, so this file only opens
//! connections the way every transport does (docs/transports.md, "UDT as a
//! transport"): a passive side binds a [`UdtListener`], whose one UDP port
//! carries every connection accepted on it; an active side opens its own
//! UDP socket per [`UdtStream`]. MODE E blocks go over it unchanged, so
//! restart markers, resume and checksums work as on TCP.
//!
//! * **PROT P.** UDT has no TLS. Under `PROT P` a data connection is
//!   encrypted and authenticated with AES-256-GCM records keyed from the
//!   control channel's TLS session ([`super::udt_seal`]) when the session
//!   negotiated it (`TPRT udt:aes-gcm`, which puts the exported secret in
//!   [`ChannelOptions::sealing`]); without that secret private options are
//!   refused (`Unsupported`, a 425): never clear data after `PROT P`.
//! * **Sizing.** UDP has no autotuning: with a buffer size from the session
//!   (SBUF, `--tcp-bs`) that is the path's bandwidth-delay product, and the
//!   protocol's windows are eight of it ([`UdtConfig::for_path`]: on a
//!   lossy path the ACK point waits behind holes whose repair was lost
//!   again); without one, 16,384 packets (about 24 MB), grown with the
//!   measured path up to `MAX_PATH_BUFFER_BYTES` (about 191 MB: at
//!   1 Gbit/s and 160 ms, 24 MB is 1.2 bandwidth-delay products).
//! * **Stalls.** A read or write that makes no progress for the session's
//!   data timeout fails with `TimedOut` (`UdtStream::set_read_timeout`), as
//!   on TCP; the driver also declares a silent peer dead (UDT's EXP timer,
//!   `Config::dead_after`, about 40 s).

use super::udt_seal::{self, RecordReader, RecordWriter, Role, SealSecret};
use super::{AbortHandle, BoxFuture, ChannelOptions, Connection, DataConn, DataListener, Transport, TransportStats};
use crate::udt::{UdtConfig, UdtListener, UdtStream};
pub use ferry_udt::CongestionKind;
use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The congestion control of this process's UDT data channels and its
/// rate cap: a process-wide setting, given once by the command line
/// (`ferry cp --congestion`, `--max-rate`; `ferry serve --congestion`),
/// as QUIC's is (`quic::set_congestion`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdtCongestion {
    /// `ferry` (the default), `udt` (DAIMD) or `blast:RATE`.
    pub kind: CongestionKind,
    /// Bytes per second no controller may exceed (`--max-rate`).
    pub max_rate: Option<f64>,
}

impl UdtCongestion {
    /// Ferry's rate model, uncapped.
    pub const DEFAULT: UdtCongestion =
        UdtCongestion { kind: CongestionKind::Ferry { initial_rate: None, max_rate: None }, max_rate: None };

    /// The controller with the cap folded in: the ferry model never
    /// probes above it and blast never runs above it; the protocol's
    /// `max_bandwidth` caps DAIMD (whose rate has no ceiling of its own).
    pub fn capped_kind(&self) -> CongestionKind {
        let Some(cap) = self.max_rate else { return self.kind };
        match self.kind {
            CongestionKind::Ferry { initial_rate, max_rate } => CongestionKind::Ferry {
                initial_rate: initial_rate.map(|r| r.min(cap)),
                max_rate: Some(max_rate.map_or(cap, |m| m.min(cap))),
            },
            CongestionKind::Blast { rate } => CongestionKind::Blast { rate: rate.min(cap) },
            k => k,
        }
    }
}

impl Default for UdtCongestion {
    fn default() -> Self {
        Self::DEFAULT
    }
}

static CONGESTION: Mutex<UdtCongestion> = Mutex::new(UdtCongestion::DEFAULT);

/// Chooses the controller (and cap) of UDT connections made from now on.
pub fn set_congestion(c: UdtCongestion) {
    *CONGESTION.lock().unwrap_or_else(|e| e.into_inner()) = c;
}

/// The controller UDT connections made now get.
pub fn congestion() -> UdtCongestion {
    *CONGESTION.lock().unwrap_or_else(|e| e.into_inner())
}

/// A rate is used only when it is one: finite and positive (a peer's
/// `OPTS TPRT Rate=N;` or a cache entry may carry anything).
fn valid_rate(rate: Option<f64>) -> Option<f64> {
    rate.filter(|r| r.is_finite() && *r > 0.0)
}

/// The controller for a connection: the process's choice, capped, and
/// started at the measured path rate when one is known and the
/// choice named no starting rate of its own.
fn connection_kind(cc: &UdtCongestion, path_rate: Option<f64>) -> CongestionKind {
    let kind = match (cc.kind, path_rate) {
        (CongestionKind::Ferry { initial_rate: None, max_rate }, Some(r)) => {
            CongestionKind::Ferry { initial_rate: Some(r), max_rate }
        }
        (k, _) => k,
    };
    UdtCongestion { kind, ..*cc }.capped_kind()
}

/// The UDT transport (stateless: every option comes with the call).
#[derive(Debug, Default, Clone, Copy)]
pub struct Udt;

/// The registry's constructor.
pub fn transport() -> Arc<dyn Transport> {
    Arc::new(Udt)
}

/// The secret to key this connection's records with under PROT P (`None`
/// under PROT C); a private channel without one is refused, never opened
/// in clear.
fn sealing(opts: &ChannelOptions) -> io::Result<Option<SealSecret>> {
    if !opts.protection.is_private() {
        return Ok(None);
    }
    match &opts.sealing {
        Some(s) => Ok(Some(s.clone())),
        None => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "UDT data channels under PROT P are encrypted only when both ends are Ferry and negotiated it \
             (TPRT udt:aes-gcm on a TLS control channel); use PROT C, TPRT udt:aes-gcm or TPRT tcp",
        )),
    }
}

/// Exchanges hellos and derives the records' keys (blocking; the stream's
/// read timeout bounds it).
fn seal_stream(stream: &UdtStream, secret: &SealSecret, role: Role) -> io::Result<Box<Sealed>> {
    let ours = udt_seal::hello()?;
    stream.write_all(&ours)?;
    let mut theirs = [0u8; udt_seal::HELLO_LEN];
    let mut got = 0;
    while got < theirs.len() {
        match stream.read(&mut theirs[got..])? {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the UDT data channel before its encryption hello",
                ))
            }
            n => got += n,
        }
    }
    let (writer, reader) = udt_seal::keys(secret, role, &ours, &theirs)?;
    Ok(Box::new(Sealed { writer, reader, out: Vec::new() }))
}

/// The driver's settings for these options: buffers from the session's
/// buffer size when it gave one (taken as one bandwidth-delay product).
fn config(opts: &ChannelOptions) -> UdtConfig {
    let mut c = match opts.buffer {
        Some(b) => UdtConfig::for_path(f64::from(b), Duration::from_secs(1)),
        None => UdtConfig::default(),
    };
    // A handshake that takes longer than a data connection may stall
    // fails as one would.
    c.protocol.connect_timeout = opts.timeout.max(Duration::from_secs(1));
    let cc = congestion();
    // The channel's own: the peer announced it (`OPTS TPRT Rate=N;`) or
    // this copy's client measured or remembered it. Never process-wide:
    // two copies in one process, or the two sides of a third-party copy,
    // may be on different paths.
    c.protocol.congestion = connection_kind(&cc, valid_rate(opts.path_rate));
    c.protocol.max_bandwidth = cc.max_rate;
    c
}

impl Transport for Udt {
    fn name(&self) -> &'static str {
        "udt"
    }

    fn listen(&self, at: SocketAddr, opts: &ChannelOptions) -> io::Result<Arc<dyn DataListener>> {
        // A port held by another socket is AddrInUse as the bind says, so
        // the port allocator tries the next one.
        let listener = UdtListener::bind(at, config(opts))?;
        Ok(Arc::new(UdtDataListener { listener: Arc::new(listener) }))
    }

    fn connect<'a>(
        &'a self,
        to: SocketAddr,
        _from: Option<IpAddr>,
        opts: &'a ChannelOptions,
    ) -> BoxFuture<'a, io::Result<DataConn>> {
        // `from` is not applied: the driver binds the wildcard address and
        // the kernel picks the source by route, which is the address the
        // peer's control channel sees on every path Ferry uses.
        Box::pin(async move {
            let secret = sealing(opts)?;
            let cfg = config(opts);
            let timeout = opts.timeout;
            let connecting = tokio::task::spawn_blocking(move || {
                let stream = UdtStream::connect(to, cfg)?;
                stream.set_read_timeout(Some(timeout));
                stream.set_write_timeout(Some(timeout));
                let sealed = secret.map(|s| seal_stream(&stream, &s, Role::Connector)).transpose()?;
                Ok::<_, io::Error>((stream, sealed))
            });
            let stream = tokio::time::timeout(opts.timeout, connecting)
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("connecting to {to} over udt timed out")))?
                .map_err(io::Error::other)?
                .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {to} over udt: {e}")))?;
            Ok(open(stream.0, stream.1, opts))
        })
    }
}

fn open(stream: UdtStream, sealed: Option<Box<Sealed>>, opts: &ChannelOptions) -> DataConn {
    // Stalls fail within the session's data timeout, as a TCP data
    // socket's SO_RCVTIMEO/SO_SNDTIMEO make them (not only after UDT's
    // EXP timer, about 40 s).
    stream.set_read_timeout(Some(opts.timeout));
    stream.set_write_timeout(Some(opts.timeout));
    let peer = stream.peer_addr().ok();
    // The controller as the connection starts (cold: "ferry Startup
    // btl_bw 0 B/s"; at a measured rate: "ferry ProbeBw btl_bw R B/s"),
    // so a log shows whether the rate a client announced reached it.
    tracing::info!(
        target: "ferry::udt",
        peer = ?peer,
        controller = %stream.stats().congestion,
        "udt data channel open"
    );
    let conn: DataConn = Box::new(UdtConnection { stream: Arc::new(stream), peer, sealed });
    opts.observe(&*conn);
    conn
}

/// A listening UDT socket: one UDP port for every connection it accepts.
#[derive(Debug)]
pub struct UdtDataListener {
    listener: Arc<UdtListener>,
}

impl Drop for UdtDataListener {
    fn drop(&mut self) {
        // An acceptor task's blocking wait holds its own reference to the
        // listener until its 200 ms wait ends: end it now.
        self.listener.stop_accepting();
    }
}

impl DataListener for UdtDataListener {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.listener.local_addr())
    }

    fn accept<'a>(
        &'a self,
        opts: &'a ChannelOptions,
        peer: Option<IpAddr>,
    ) -> BoxFuture<'a, io::Result<(DataConn, SocketAddr)>> {
        Box::pin(async move {
            let secret = sealing(opts)?;
            loop {
                // Short waits, so a caller that gives up (its timeout, ABOR)
                // leaves no thread blocked in accept for long.
                let l = Arc::clone(&self.listener);
                let got = tokio::task::spawn_blocking(move || l.accept_timeout(Some(Duration::from_millis(200))))
                    .await
                    .map_err(io::Error::other)??;
                let Some(stream) = got else { continue };
                let Ok(from) = stream.peer_addr() else { continue };
                if !super::admissible(from, peer) {
                    stream.abort();
                    continue;
                }
                let Some(secret) = secret.clone() else { return Ok((open(stream, None, opts), from)) };
                let timeout = opts.timeout;
                let (stream, sealed) = tokio::task::spawn_blocking(move || {
                    stream.set_read_timeout(Some(timeout));
                    stream.set_write_timeout(Some(timeout));
                    let sealed = seal_stream(&stream, &secret, Role::Acceptor);
                    if sealed.is_err() {
                        stream.abort();
                    }
                    (stream, sealed)
                })
                .await
                .map_err(io::Error::other)?;
                return Ok((open(stream, Some(sealed?), opts), from));
            }
        })
    }
}

/// One UDT connection as a data connection.
#[derive(Debug)]
pub struct UdtConnection {
    /// Shared (weakly) with the abort handle, which may outlive it.
    stream: Arc<UdtStream>,
    peer: Option<SocketAddr>,
    /// The record layer under PROT P.
    sealed: Option<Box<Sealed>>,
}

/// Both directions' records of an encrypted connection.
#[derive(Debug)]
struct Sealed {
    writer: RecordWriter,
    reader: RecordReader,
    /// Sealed records waiting to be written (at most about `SEAL_BATCH`).
    out: Vec<u8>,
}

/// Plaintext sealed per write to the UDT stream.
const SEAL_BATCH: usize = 1 << 20;

/// `Read` over a shared stream, for the record reader.
struct StreamReader<'a>(&'a UdtStream);

impl Read for StreamReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl UdtConnection {
    /// Seals up to one record of `bufs` and sends it; a failure kills the
    /// channel (a half-sent record cannot be resumed).
    fn write_sealed(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let Some(s) = &mut self.sealed else { unreachable!("only called when sealed") };
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total == 0 {
            return Ok(0);
        }
        // Up to SEAL_BATCH of records per write to the stream: one lock
        // and one wake-up of the I/O thread for many records.
        s.out.clear();
        let mut done = 0;
        while done < total && s.out.len() < SEAL_BATCH {
            done += s.writer.seal_data(bufs, done, &mut s.out)?;
        }
        if let Err(e) = self.stream.write_all(&s.out) {
            self.stream.abort();
            return Err(e);
        }
        Ok(done)
    }
}

impl Read for UdtConnection {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(s) = &mut self.sealed else { return self.stream.read(buf) };
        let got = s.reader.read(&mut StreamReader(&self.stream), buf);
        if got.is_err() && s.reader.failed() {
            // A forged, truncated or oversized record: the channel is dead.
            self.stream.abort();
        }
        got
    }
}

impl Write for UdtConnection {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.sealed.is_some() {
            return self.write_sealed(&[IoSlice::new(buf)]);
        }
        self.stream.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.sealed.is_some() {
            return self.write_sealed(bufs);
        }
        match bufs.iter().find(|b| !b.is_empty()) {
            Some(b) => self.stream.write(b),
            None => Ok(0),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Connection for UdtConnection {
    fn transport(&self) -> &'static str {
        "udt"
    }

    /// UDT's close waits until the peer acknowledged every byte, then
    /// sends its shutdown: the peer reads the end of the stream.
    fn finish(&mut self) -> io::Result<()> {
        if let Some(s) = &mut self.sealed {
            s.out.clear();
            s.writer.seal_close(&mut s.out)?;
            self.stream.write_all(&s.out)?;
        }
        self.stream.shutdown()
    }

    fn is_encrypted(&self) -> bool {
        self.sealed.is_some()
    }

    fn wait_sent(&self, timeout: Duration) -> io::Result<()> {
        self.stream.wait_sent(timeout)
    }

    fn abort_handle(&self) -> io::Result<AbortHandle> {
        let stream = Arc::downgrade(&self.stream);
        Ok(AbortHandle::new(move || {
            if let Some(s) = stream.upgrade() {
                s.abort();
            }
        }))
    }

    fn stats(&self) -> TransportStats {
        let s = self.stream.stats();
        TransportStats {
            transport: "udt".into(),
            bytes_sent: s.counters.bytes_sent,
            bytes_received: s.counters.bytes_received,
            rtt_us: (s.rtt_us > 0).then_some(s.rtt_us),
            // The flow window is in packets of at most one MSS.
            window_bytes: u64::try_from(s.flow_window).ok().map(|w| w * u64::from(s.mss)),
            rate: (s.pacing_rate > 0.0).then_some(s.pacing_rate as u64),
            retransmissions: s.counters.retransmitted,
            losses: s.counters.lost_reported + s.counters.lost_detected,
            ..TransportStats::default()
        }
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::by_name;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_block_crosses_a_udt_data_channel_and_the_end_is_seen() {
        let udt = by_name("udt").unwrap();
        let opts = ChannelOptions::new(Duration::from_secs(10));
        let l = udt.listen("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let to = l.local_addr().unwrap();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let (accepted, client) = tokio::join!(l.accept(&opts, Some(lo)), udt.connect(to, None, &opts));
        let (mut server, from) = accepted.unwrap();
        assert_eq!(from.ip(), lo);
        let mut client = client.unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let writer = std::thread::spawn(move || {
            client.send_block(b"hdr", super::super::Payload::Bytes(&sent)).unwrap();
            client.finish().unwrap();
            client.stats()
        });
        let mut got = Vec::new();
        server.read_to_end(&mut got).unwrap();
        let stats = writer.join().unwrap();
        assert_eq!(&got[..3], b"hdr");
        assert!(got[3..] == data[..]);
        assert_eq!(stats.transport, "udt");
        assert!(stats.bytes_sent >= data.len() as u64);
        assert!(stats.rtt_us.is_some());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn abort_unblocks_a_reader() {
        let udt = by_name("udt").unwrap();
        let opts = ChannelOptions::new(Duration::from_secs(10));
        let l = udt.listen("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let to = l.local_addr().unwrap();
        let (accepted, client) = tokio::join!(l.accept(&opts, None), udt.connect(to, None, &opts));
        let (mut server, _) = accepted.unwrap();
        let _client = client.unwrap();
        let abort = server.abort_handle().unwrap();
        let reader = std::thread::spawn(move || {
            let mut b = [0u8; 16];
            server.read(&mut b)
        });
        std::thread::sleep(Duration::from_millis(200));
        abort.abort();
        assert!(matches!(reader.join().unwrap(), Ok(0) | Err(_)));
    }

    /// A private protection (its TLS configuration is never used by UDT).
    fn private(sealing: Option<SealSecret>) -> ChannelOptions {
        let config = Arc::new(
            rustls::ClientConfig::builder_with_provider(crate::tls::provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        );
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        ChannelOptions {
            protection: crate::tls::DataProtection::Client { config, name },
            sealing,
            ..ChannelOptions::new(Duration::from_secs(10))
        }
    }

    /// A UDP relay between a UDT caller and `to`: every datagram passes
    /// through it (copied into `seen`, at most 64 MiB); with `flip`, one
    /// byte of the first large data packet from the caller is inverted.
    fn relay(to: SocketAddr, flip: bool) -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let at = sock.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            let mut caller: Option<SocketAddr> = None;
            let (mut flipped, mut kept) = (!flip, 0usize);
            while let Ok((n, from)) = sock.recv_from(&mut buf) {
                let d = &mut buf[..n];
                let dest = if from == to {
                    match caller {
                        Some(c) => c,
                        None => continue,
                    }
                } else {
                    caller = Some(from);
                    // A data packet (first bit 0) well past the hellos.
                    if !flipped && n > 1000 && d[0] & 0x80 == 0 {
                        d[16 + 500] ^= 0x01;
                        flipped = true;
                    }
                    to
                };
                if kept < 64 << 20 {
                    kept += n;
                    keep.lock().unwrap().push(d.to_vec());
                }
                let _ = sock.send_to(d, dest);
            }
        });
        (at, seen)
    }

    fn marker_data() -> Vec<u8> {
        b"FERRY-PLAINTEXT-MARKER-0123456789abcdef".iter().copied().cycle().take(3_000_000).collect()
    }

    /// Under PROT P with the session's secret, what crosses the wire is
    /// records, not the plaintext (checked in every datagram a relay saw),
    /// and the receiver gets exactly what was sent, the end authenticated.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sealed_udt_moves_records_not_plaintext() {
        let udt = by_name("udt").unwrap();
        let opts = private(Some(SealSecret::new([5u8; 32])));
        let l = udt.listen("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let (via, seen) = relay(l.local_addr().unwrap(), false);
        let (accepted, client) = tokio::join!(l.accept(&opts, None), udt.connect(via, None, &opts));
        let (mut server, _) = accepted.unwrap();
        let mut client = client.unwrap();
        assert!(client.is_encrypted() && server.is_encrypted());
        let data = marker_data();
        let sent = data.clone();
        let writer = std::thread::spawn(move || {
            client.send_block(b"hdr", super::super::Payload::Bytes(&sent)).unwrap();
            client.finish().unwrap();
        });
        let got = tokio::task::spawn_blocking(move || {
            let mut got = Vec::new();
            server.read_to_end(&mut got).map(|_| got)
        })
        .await
        .unwrap()
        .unwrap();
        writer.join().unwrap();
        assert_eq!(&got[..3], b"hdr");
        assert!(got[3..] == data[..]);
        let seen = seen.lock().unwrap();
        let bytes: usize = seen.iter().map(Vec::len).sum();
        assert!(bytes > data.len(), "the relay saw {bytes} bytes");
        assert!(!seen.iter().any(|d| d.windows(16).any(|w| w == &b"PLAINTEXT-MARKER"[..])), "plaintext on the wire");
    }

    /// One flipped bit in one UDT data packet (a man in the middle): the
    /// record fails authentication, the receiver gets an error — never
    /// the altered byte — and the channel is closed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tampered_packet_fails_the_channel_and_never_delivers_wrong_data() {
        let udt = by_name("udt").unwrap();
        let opts = private(Some(SealSecret::new([6u8; 32])));
        let l = udt.listen("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let (via, _) = relay(l.local_addr().unwrap(), true);
        let (accepted, client) = tokio::join!(l.accept(&opts, None), udt.connect(via, None, &opts));
        let (mut server, _) = accepted.unwrap();
        let mut client = client.unwrap();
        let data = marker_data();
        let sent = data.clone();
        std::thread::spawn(move || {
            let _ = client.send_block(b"", super::super::Payload::Bytes(&sent));
            let _ = client.finish();
        });
        let (got, err) = tokio::task::spawn_blocking(move || {
            let mut got = Vec::new();
            let mut b = vec![0u8; 65536];
            loop {
                match server.read(&mut b) {
                    Ok(0) => return (got, None),
                    Ok(n) => got.extend_from_slice(&b[..n]),
                    Err(e) => return (got, Some(e)),
                }
            }
        })
        .await
        .unwrap();
        let err = err.expect("a tampered record must fail the read");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        assert!(err.to_string().contains("failed authentication"), "{err}");
        assert!(got.len() < data.len() && got[..] == data[..got.len()], "only authenticated bytes were delivered");
    }

    /// PROT P without the session's secret (a peer that did not negotiate
    /// encryption): refused on both sides, nothing opened in clear.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn private_options_without_a_secret_are_refused() {
        let udt = by_name("udt").unwrap();
        let opts = private(None);
        let l = udt.listen("127.0.0.1:0".parse().unwrap(), &ChannelOptions::new(Duration::from_secs(2))).unwrap();
        let to = l.local_addr().unwrap();
        let e = udt.connect(to, None, &opts).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert!(e.to_string().contains("udt:aes-gcm"), "{e}");
        let e = l.accept(&opts, None).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
    }

    #[test]
    fn a_port_in_use_is_addr_in_use() {
        let udt = by_name("udt").unwrap();
        let opts = ChannelOptions::new(Duration::from_secs(2));
        let held = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let err = udt.listen(held.local_addr().unwrap(), &opts).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    }

    #[test]
    fn a_measured_path_rate_starts_the_ferry_controller_at_it() {
        let cold = UdtCongestion::DEFAULT;
        assert_eq!(connection_kind(&cold, None), CongestionKind::Ferry { initial_rate: None, max_rate: None });
        assert_eq!(
            connection_kind(&cold, Some(100e6)),
            CongestionKind::Ferry { initial_rate: Some(100e6), max_rate: None }
        );
        // under --max-rate
        let capped = UdtCongestion { max_rate: Some(20e6), ..cold };
        assert_eq!(
            connection_kind(&capped, Some(100e6)),
            CongestionKind::Ferry { initial_rate: Some(20e6), max_rate: Some(20e6) }
        );
        // a starting rate given explicitly wins; other controllers ignore it
        let given = UdtCongestion { kind: CongestionKind::Ferry { initial_rate: Some(7e6), max_rate: None }, ..cold };
        assert_eq!(connection_kind(&given, Some(100e6)), given.kind);
        let blast = UdtCongestion { kind: CongestionKind::Blast { rate: 5e6 }, max_rate: None };
        assert_eq!(connection_kind(&blast, Some(100e6)), blast.kind);
        // a rate given for this channel (announced by the peer with OPTS
        // TPRT, or this client's own) reaches its config, and none leaves
        // the start cold
        let announced = ChannelOptions { path_rate: Some(12e6), ..ChannelOptions::new(Duration::from_secs(2)) };
        assert_eq!(
            config(&announced).protocol.congestion,
            CongestionKind::Ferry { initial_rate: Some(12e6), max_rate: None }
        );
        let garbage = ChannelOptions { path_rate: Some(f64::NAN), ..ChannelOptions::new(Duration::from_secs(2)) };
        assert_eq!(config(&garbage).protocol.congestion, CongestionKind::Ferry { initial_rate: None, max_rate: None });
    }

    /// The rate a peer announced (`ChannelOptions::path_rate`, from `OPTS
    /// TPRT Rate=N;`) reaches the controller of the connections a listener
    /// accepts: they start cruising at it, not in start-up.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_announced_path_rate_reaches_the_accepted_connections_controller() {
        let udt = by_name("udt").unwrap();
        for (rate, want) in [(Some(80e6), 40e6..=100e6), (None, 0.0..=20e6)] {
            let lo = ChannelOptions { path_rate: rate, ..ChannelOptions::new(Duration::from_secs(5)) };
            let l = udt.listen("127.0.0.1:0".parse().unwrap(), &lo).unwrap();
            let to = l.local_addr().unwrap();
            let co = ChannelOptions::new(Duration::from_secs(5));
            let (accepted, client) = tokio::join!(l.accept(&lo, None), udt.connect(to, None, &co));
            let (server, _) = accepted.unwrap();
            let _client = client.unwrap();
            // The pacing rate before anything was sent: the controller's
            // starting point (cold: 64 jumbo packets per default RTT times
            // start-up's gain, 16.6 MB/s at MSS 9000).
            let got = server.stats().rate.unwrap_or(0) as f64;
            assert!(want.contains(&got), "{rate:?}: pacing {got} B/s, want {want:?}");
        }
    }

    #[test]
    fn max_rate_caps_every_controller() {
        let cap = Some(10e6);
        let ferry = UdtCongestion { max_rate: cap, ..UdtCongestion::DEFAULT };
        assert_eq!(ferry.capped_kind(), CongestionKind::Ferry { initial_rate: None, max_rate: cap });
        let probed = UdtCongestion {
            kind: CongestionKind::Ferry { initial_rate: Some(50e6), max_rate: Some(20e6) },
            max_rate: cap,
        };
        assert_eq!(probed.capped_kind(), CongestionKind::Ferry { initial_rate: cap, max_rate: cap });
        let blast = UdtCongestion { kind: CongestionKind::Blast { rate: 100e6 }, max_rate: cap };
        assert_eq!(blast.capped_kind(), CongestionKind::Blast { rate: 10e6 });
        // DAIMD has no ceiling of its own: the protocol's max_bandwidth is it.
        let daimd = UdtCongestion { kind: CongestionKind::Udt, max_rate: cap };
        assert_eq!(daimd.capped_kind(), CongestionKind::Udt);
        assert_eq!(UdtCongestion::DEFAULT.capped_kind(), UdtCongestion::DEFAULT.kind);
    }

    /// A peer that sends nothing fails the read within the data timeout
    /// (here 400 ms), long before UDT's EXP timer would (about 40 s), and
    /// the connection still works afterwards, as a TCP socket's does.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_peer_fails_the_read_within_the_data_timeout() {
        let udt = by_name("udt").unwrap();
        let opts = ChannelOptions::new(Duration::from_millis(400));
        let l = udt.listen("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let to = l.local_addr().unwrap();
        let (accepted, client) = tokio::join!(l.accept(&opts, None), udt.connect(to, None, &opts));
        let (mut server, _) = accepted.unwrap();
        let mut client = client.unwrap();
        let (took, got, server) = tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let mut b = [0u8; 16];
            let got = server.read(&mut b);
            (started.elapsed(), got.map_err(|e| e.kind()), server)
        })
        .await
        .unwrap();
        assert_eq!(got, Err(io::ErrorKind::TimedOut));
        assert!(took >= Duration::from_millis(350) && took < Duration::from_secs(5), "{took:?}");
        let mut server = server;
        tokio::task::spawn_blocking(move || {
            client.write_all(b"late").unwrap();
            let mut b = [0u8; 4];
            server.read_exact(&mut b).unwrap();
            assert_eq!(&b, b"late");
        })
        .await
        .unwrap();
    }
}
