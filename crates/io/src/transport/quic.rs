//! QUIC data channels (issue 19): quinn glue.
//!
//! One QUIC connection carries a data channel set; every data connection a
//! transfer opens (one per parallel stream, `-p N`) is a bidirectional QUIC
//! stream on it, and the MODE E blocks go over the streams exactly as over
//! TCP, so restart markers, resume and checksums do not change. Connections
//! made to the same peer with the same credentials are shared while any of
//! their streams lives (so the N streams of a transfer, and the streams
//! cached across files, share one handshake and one congestion controller).
//!
//! ## Streams
//!
//! A QUIC stream exists for the peer only once bytes are sent on it, but
//! FTP's data connections are opened by one side and may be written first
//! by the other (a stream-mode download over PASV). The opening side
//! therefore writes one byte, [`PREAMBLE`], which the accepting side reads
//! before it hands the stream out.
//!
//! ## Roles and certificates
//!
//! QUIC ties the TLS roles to who connects: the connecting side is the TLS
//! client. FTPS makes the FTP server the TLS server whoever connects
//! (RFC 4217 §7). Ferry keeps what that buys — the FTP server is
//! authenticated by its certificate on every data connection, with the
//! client's trust (`--ca`) and the server's name, and the FTP client by its
//! address (and its login) — in both directions:
//!
//! * the FTP client connects (PASV; uploads in MODE E): a plain QUIC
//!   handshake, the client verifying the server's certificate and name with
//!   the same rustls configuration as the control channel;
//! * the FTP server connects (PORT; downloads in MODE E): the client's
//!   listener is the QUIC server with a throw-away self-signed certificate,
//!   and it *requires* a client certificate, which the FTP server answers
//!   with its own certificate; the FTP client verifies that one exactly as
//!   it verifies a server certificate (same roots, same name, same
//!   signature checks). The FTP server does not verify the throw-away
//!   certificate — in FTPS it does not authenticate the client on data
//!   connections either; the address check does that.
//!
//! rustls gives no access to the verifier inside a `ClientConfig` or to
//! the key inside a `ServerConfig`, so whoever builds them registers the
//! pieces QUIC needs here ([`register_client_trust`],
//! [`register_server_identity`]); a configuration that was not registered
//! cannot take the reversed role and the connection is refused.
//!
//! QUIC is always encrypted: without `PROT P` (a [`DataProtection::Clear`]
//! session) there are no credentials and the transport refuses to open
//! anything; the protocol core already keeps such sessions on TCP.
//!
//! ALPN: [`ALPN`] (`ferry-data/1`), so a QUIC endpoint of another protocol
//! (HTTP/3) never takes a data connection for its own.
//!
//! ## Hostile input
//!
//! A listener answers only Initials from the address it expects (the
//! control peer, or the other server of a third-party copy); any other
//! source is ignored without a reply or state. The expected peer's first
//! attempt on an idle listener is taken without a Retry (its address was
//! validated by the control connection's TCP handshake; the Retry cost a
//! round trip per data channel set); any other Initial without an
//! address-validation token — one that arrives while a handshake is under
//! way or a connection exists — gets a stateless Retry, so a spoofed flood
//! costs one packet each and no state, and handshakes run in tasks of
//! their own, so a stalled one does not hold up the next. At most [`MAX_CONNECTIONS`] QUIC
//! connections per listener, and quinn's pending-connection queue is
//! bounded ([`MAX_INCOMING`]); garbage datagrams are dropped by quinn's
//! packet parser.
//!
//! ## Sizing
//!
//! Stream and connection receive windows, the send window and the UDP
//! socket buffers come from [`crate::sizing::quic_windows`]: the session's
//! buffer size (SBUF, `--tcp-bs`) when one is set, else a window large
//! enough for the assumed rate over a long path. quinn's defaults (1.25 MB
//! per stream) hold one stream to about 100 Mbit/s at 100 ms. GSO and GRO
//! are quinn-udp's (on where the kernel has them).

use super::quic_pacer::{PacedSocket, PacingRate};
use super::{AbortHandle, BoxFuture, ChannelOptions, Connection, DataConn, DataListener, Transport, TransportStats};
use crate::tls::{provider, DataProtection};
use bytes::Bytes;
use futures::FutureExt;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::runtime::Handle;

/// The ALPN protocol of Ferry's QUIC data channels.
pub const ALPN: &[u8] = b"ferry-data/1";

/// The byte the opening side writes first, so the stream exists for the
/// peer (see "Streams").
pub const PREAMBLE: u8 = 0xFE;

/// QUIC connections one listener holds at once: a data channel set is one,
/// a peer that reconnects after a failure a second; more is someone else.
pub const MAX_CONNECTIONS: usize = 4;

/// Connection attempts quinn keeps queued before they are accepted or
/// refused (its default is 65,536).
pub const MAX_INCOMING: usize = 16;

/// Streams a peer may open on one connection (parallelism is at most 64).
const MAX_STREAMS: u32 = 128;

/// Application error codes in CONNECTION_CLOSE.
const CLOSE_DONE: u32 = 0;
const CLOSE_ABORTED: u32 = 1;

/// The QUIC transport. One per process ([`transport`]), since it keeps the
/// QUIC connections that data connections share.
pub struct Quic {
    /// Client endpoints, per local address (one UDP socket for every
    /// connection this process makes from there).
    /// Their sends are paced at the sum of their connections' rates
    /// ([`super::quic_pacer`]).
    endpoints: Mutex<HashMap<SocketAddr, (quinn::Endpoint, Arc<PacingRate>)>>,
    /// Live connections this process opened, by peer and credentials.
    shared: tokio::sync::Mutex<HashMap<Key, Weak<Shared>>>,
}

impl fmt::Debug for Quic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Quic")
    }
}

/// The registry's constructor: the process's one QUIC transport.
pub fn transport() -> Arc<dyn Transport> {
    static QUIC: OnceLock<Arc<Quic>> = OnceLock::new();
    QUIC.get_or_init(|| Arc::new(Quic { endpoints: Mutex::default(), shared: Default::default() })).clone()
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    to: SocketAddr,
    from: Option<IpAddr>,
    /// The rustls configuration's address: connections made with other
    /// credentials are not shared.
    credentials: usize,
}

/// One QUIC connection shared by the streams this side opened on it;
/// closed when the last of them is dropped.
struct Shared {
    conn: quinn::Connection,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Streams are finished (and acknowledged) before they are dropped,
        // or were aborted: nothing is left to deliver.
        self.conn.close(CLOSE_DONE.into(), b"done");
    }
}

// ---------------------------------------------------------------------
// Credentials that rustls does not let us read back.

type Registry<C, V> = Mutex<Vec<(Weak<C>, V)>>;

fn client_trust() -> &'static Registry<rustls::ClientConfig, Arc<dyn ServerCertVerifier>> {
    static R: OnceLock<Registry<rustls::ClientConfig, Arc<dyn ServerCertVerifier>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

type Identity = (Vec<CertificateDer<'static>>, Arc<PrivateKeyDer<'static>>);

fn server_identity() -> &'static Registry<rustls::ServerConfig, Identity> {
    static R: OnceLock<Registry<rustls::ServerConfig, Identity>> = OnceLock::new();
    R.get_or_init(Default::default)
}

fn remember<C, V>(r: &Registry<C, V>, config: &Arc<C>, v: V) {
    let mut r = r.lock().unwrap_or_else(|e| e.into_inner());
    r.retain(|(w, _)| w.strong_count() > 0);
    r.push((Arc::downgrade(config), v));
}

fn recall<C, V: Clone>(r: &Registry<C, V>, config: &Arc<C>) -> Option<V> {
    let r = r.lock().unwrap_or_else(|e| e.into_inner());
    r.iter().find(|(w, _)| w.as_ptr() == Arc::as_ptr(config)).map(|(_, v)| v.clone())
}

/// Records the verifier inside a client's rustls configuration (built from
/// `--ca` or the system's roots), so that a QUIC data connection the FTP
/// server opens to this client can verify the server's certificate.
pub fn register_client_trust(config: &Arc<rustls::ClientConfig>, verifier: Arc<dyn ServerCertVerifier>) {
    remember(client_trust(), config, verifier);
}

/// Records the certificate chain and key of a server's data-connection
/// configuration, so the server can present them when it opens a QUIC
/// data connection (as the QUIC client).
pub fn register_server_identity(
    config: &Arc<rustls::ServerConfig>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) {
    remember(server_identity(), config, (chain, Arc::new(key)));
}

/// The FTP client's verifier, applied to the certificate the FTP server
/// presents as a QUIC client: the same checks, name included, as for a
/// server certificate.
#[derive(Debug)]
struct ServerAsClient {
    inner: Arc<dyn ServerCertVerifier>,
    name: ServerName<'static>,
}

impl ClientCertVerifier for ServerAsClient {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.inner.verify_server_cert(end_entity, intermediates, &self.name, &[], now)?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The FTP server's view of the FTP client's throw-away certificate: the
/// handshake signature must match it (so the peer holds its key), nothing
/// more, as FTPS does not authenticate clients on data connections.
#[derive(Debug)]
struct ThrowAwayPeer(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for ThrowAwayPeer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The name a server connecting to a client gives (the client's
/// certificate is a throw-away one; see "Roles").
const THROW_AWAY_NAME: &str = "ferry-data.invalid";

fn throw_away_identity() -> Result<&'static Identity, io::Error> {
    static ID: OnceLock<Result<Identity, String>> = OnceLock::new();
    ID.get_or_init(|| {
        let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
        let params = rcgen::CertificateParams::new(vec![THROW_AWAY_NAME.to_string()]).map_err(|e| e.to_string())?;
        let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
        let der = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| e.to_string())?;
        Ok((vec![cert.der().clone()], Arc::new(der)))
    })
    .as_ref()
    .map_err(|e| io::Error::other(format!("cannot make a certificate for QUIC: {e}")))
}

fn no_credentials() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "QUIC data channels are encrypted and need TLS on the control channel with PROT P",
    )
}

fn tls_error(e: impl fmt::Display) -> io::Error {
    io::Error::other(format!("QUIC TLS setup: {e}"))
}

/// The QUIC server configuration for this side of `protection`.
fn server_crypto(protection: &DataProtection) -> io::Result<Arc<QuicServerConfig>> {
    let mut tls = match protection {
        DataProtection::Clear => return Err(no_credentials()),
        DataProtection::Server(config) => (**config).clone(),
        DataProtection::Client { config, name } => {
            let verifier = recall(client_trust(), config).ok_or_else(|| {
                tls_error("this client's TLS configuration has no registered trust for QUIC (register_client_trust)")
            })?;
            let verifier = Arc::new(ServerAsClient { inner: verifier, name: name.clone() });
            let (chain, key) = throw_away_identity()?;
            rustls::ServerConfig::builder_with_provider(provider())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .map_err(tls_error)?
                .with_client_cert_verifier(verifier)
                .with_single_cert(chain.clone(), key.clone_key())
                .map_err(tls_error)?
        }
        DataProtection::Peer { config, name, trust } => {
            // The destination of a third-party copy: its own certificate,
            // and the source's, presented as a client certificate,
            // verified for the name the FTP client gave (DCAU S).
            let (chain, key) = recall(server_identity(), config).ok_or_else(|| {
                tls_error(
                    "this server's TLS configuration has no registered identity for QUIC (register_server_identity)",
                )
            })?;
            let verifier = Arc::new(ServerAsClient { inner: trust.clone(), name: name.clone() });
            rustls::ServerConfig::builder_with_provider(provider())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .map_err(tls_error)?
                .with_client_cert_verifier(verifier)
                .with_single_cert(chain, key.clone_key())
                .map_err(tls_error)?
        }
    };
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.max_early_data_size = 0;
    Ok(Arc::new(QuicServerConfig::try_from(tls).map_err(tls_error)?))
}

/// The QUIC client configuration and the name to verify, and the key that
/// tells connections with other credentials apart.
fn client_crypto(protection: &DataProtection) -> io::Result<(Arc<QuicClientConfig>, String, usize)> {
    let (mut tls, name, credentials) = match protection {
        DataProtection::Clear => return Err(no_credentials()),
        DataProtection::Client { config, name } => {
            ((**config).clone(), name.to_str().into_owned(), Arc::as_ptr(config) as usize)
        }
        DataProtection::Server(config) => {
            let (chain, key) = recall(server_identity(), config).ok_or_else(|| {
                tls_error(
                    "this server's TLS configuration has no registered identity for QUIC (register_server_identity)",
                )
            })?;
            let provider = provider();
            let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .map_err(tls_error)?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ThrowAwayPeer(provider)))
                .with_client_auth_cert(chain, key.clone_key())
                .map_err(tls_error)?;
            (tls, THROW_AWAY_NAME.to_string(), Arc::as_ptr(config) as usize)
        }
        DataProtection::Peer { config, name, trust } => {
            // The source of a third-party copy: the destination's
            // certificate is verified as any server's, for the name the
            // FTP client gave (DCAU S); this server's own certificate is
            // its client certificate.
            let (chain, key) = recall(server_identity(), config).ok_or_else(|| {
                tls_error(
                    "this server's TLS configuration has no registered identity for QUIC (register_server_identity)",
                )
            })?;
            let tls = rustls::ClientConfig::builder_with_provider(provider())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .map_err(tls_error)?
                .dangerous()
                .with_custom_certificate_verifier(trust.clone())
                .with_client_auth_cert(chain, key.clone_key())
                .map_err(tls_error)?;
            let name = name.to_str().into_owned();
            let credentials = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                (Arc::as_ptr(config) as usize, Arc::as_ptr(trust) as *const () as usize, &name).hash(&mut h);
                h.finish() as usize
            };
            (tls, name, credentials)
        }
    };
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.enable_early_data = false;
    Ok((Arc::new(QuicClientConfig::try_from(tls).map_err(tls_error)?), name, credentials))
}

/// The congestion controller of this process's QUIC connections
/// (`--congestion`). The default is `crates/udt`'s rate/RTT model
/// (`FerryRate`, the `udt` transport's default too) through
/// [`super::quic_cc`]: one QUIC connection has one controller for all its
/// streams, and a loss-based one holds a few packets per round trip on a
/// long lossy path. On an emulated 150 Mbit/s, 80 ms path it moved 106,
/// 77 and 87 Mbit/s at 0, 1 and 5 % loss where quinn's BBR failed the
/// copy, moved 20 Mbit/s and failed (docs/transports.md); quinn's CUBIC
/// did not finish at 0.1 % loss on a 1 Gbit/s 80 ms path. quinn's BBR,
/// CUBIC and NewReno stay selectable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Congestion {
    Cubic,
    NewReno,
    Bbr,
    /// `crates/udt`'s rate/RTT model (`FerryRate`) through
    /// [`super::quic_cc`]: one controller for UDT and QUIC.
    #[default]
    Ferry,
}

impl std::str::FromStr for Congestion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cubic" => Ok(Self::Cubic),
            "newreno" | "reno" => Ok(Self::NewReno),
            "bbr" => Ok(Self::Bbr),
            "ferry" => Ok(Self::Ferry),
            _ => Err(format!("unknown congestion controller '{s}': ferry, bbr, cubic or newreno")),
        }
    }
}

static CONGESTION: Mutex<Congestion> = Mutex::new(Congestion::Ferry);

/// Chooses the controller for QUIC connections made from now on: a
/// process-wide setting, given once by the command line (`ferry serve
/// --congestion`, `ferry cp --congestion`).
pub fn set_congestion(c: Congestion) {
    *CONGESTION.lock().unwrap_or_else(|e| e.into_inner()) = c;
}

fn congestion() -> Congestion {
    *CONGESTION.lock().unwrap_or_else(|e| e.into_inner())
}

/// Windows and timers from the sizing rules and the options; datagram
/// sizes from the interface toward `path` (the peer, or the local address
/// the endpoint is bound to: see [`super::quic_mtu`]).
/// The ferry controller's rate goes to `pacer`, the endpoint's.
fn transport_config(
    opts: &ChannelOptions,
    path: Option<IpAddr>,
    pacer: &Arc<PacingRate>,
) -> Arc<quinn::TransportConfig> {
    let w = crate::sizing::quic_windows(opts.buffer);
    let mut t = quinn::TransportConfig::default();
    if let Some(plan) = path.and_then(super::quic_mtu::plan) {
        let mut mtud = quinn::MtuDiscoveryConfig::default();
        mtud.upper_bound(plan.upper);
        t.mtu_discovery_config(Some(mtud)).enable_segmentation_offload(plan.gso());
        if let Some(initial) = plan.initial {
            t.initial_mtu(initial);
        }
    }
    t.stream_receive_window(quinn::VarInt::from_u32(w.stream))
        .receive_window(quinn::VarInt::from_u32(w.connection))
        .send_window(u64::from(w.send))
        .max_concurrent_bidi_streams(quinn::VarInt::from_u32(MAX_STREAMS))
        .max_concurrent_uni_streams(quinn::VarInt::from_u32(0));
    match congestion() {
        Congestion::Cubic => t.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default())),
        Congestion::NewReno => t.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default())),
        Congestion::Bbr => t.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default())),
        Congestion::Ferry => {
            let factory = super::quic_cc::UdtControllerFactory::ferry_at(start_rate(opts)).paced(pacer.clone());
            t.congestion_controller_factory(Arc::new(factory))
        }
    };
    // Cached data channels sit idle between files: keep them alive well
    // inside the idle timeout, which is the data timeout.
    let idle = opts.timeout.max(Duration::from_secs(5));
    t.max_idle_timeout(quinn::IdleTimeout::try_from(idle).ok());
    t.keep_alive_interval(Some(idle / 3));
    Arc::new(t)
}

/// The rate the ferry controller of a connection made with `opts` starts
/// at: the path rate in the channel's options (on a server as the client
/// announced it with `OPTS TPRT Rate=N;`, on a client as the copy was given
/// or remembered it); `None` (a cold start) without one or with another
/// controller.
fn start_rate(opts: &ChannelOptions) -> Option<f64> {
    if congestion() != Congestion::Ferry {
        return None;
    }
    opts.path_rate.filter(|r| r.is_finite() && *r > 0.0)
}

/// What a connection's controller starts at, for its log line.
fn start_label(opts: &ChannelOptions) -> String {
    match start_rate(opts) {
        Some(r) => format!("{r:.0} B/s"),
        None => "cold".into(),
    }
}

/// The endpoint's largest UDP payload (what it advertises to peers as
/// `max_udp_payload_size` and sizes its receive buffers for) from the
/// interface toward `path`; quinn's default (1,472) otherwise, which would
/// cap every connection of the endpoint at Ethernet-sized datagrams
/// whatever its transport configuration says.
fn endpoint_config(path: IpAddr) -> quinn::EndpointConfig {
    let mut c = quinn::EndpointConfig::default();
    if let Some(plan) = super::quic_mtu::plan(path) {
        let _ = c.max_udp_payload_size(plan.upper);
    }
    c
}

/// A UDP socket for an endpoint, its buffers sized like the windows
/// (UDP has no autotuning; root may exceed `rmem_max`).
fn udp_socket(at: SocketAddr, buffer: Option<u32>) -> io::Result<std::net::UdpSocket> {
    let domain = if at.is_ipv4() { socket2::Domain::IPV4 } else { socket2::Domain::IPV6 };
    let sock = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
    let size = crate::sizing::quic_windows(buffer).socket as usize;
    use nix::sys::socket::{setsockopt, sockopt};
    if setsockopt(&sock, sockopt::RcvBufForce, &size).is_err() {
        let _ = sock.set_recv_buffer_size(size);
    }
    if setsockopt(&sock, sockopt::SndBufForce, &size).is_err() {
        let _ = sock.set_send_buffer_size(size);
    }
    sock.bind(&at.into())?;
    Ok(sock.into())
}

/// An endpoint on `socket` whose sends are paced at the returned rate (the
/// sum of its ferry controllers' rates, [`super::quic_pacer`]).
fn paced_endpoint(
    config: quinn::EndpointConfig,
    socket: std::net::UdpSocket,
) -> io::Result<(quinn::Endpoint, Arc<PacingRate>)> {
    let rt = quinn::default_runtime().ok_or_else(|| io::Error::other("no async runtime for QUIC"))?;
    let rate = PacingRate::new();
    let socket = PacedSocket::new(rt.wrap_udp_socket(socket)?, rate.clone());
    Ok((quinn::Endpoint::new_with_abstract_socket(config, None, socket, rt)?, rate))
}

fn runtime() -> io::Result<Handle> {
    Handle::try_current().map_err(|_| io::Error::other("QUIC data channels need the tokio runtime"))
}

impl Quic {
    fn client_endpoint(
        &self,
        from: SocketAddr,
        toward: IpAddr,
        buffer: Option<u32>,
    ) -> io::Result<(quinn::Endpoint, Arc<PacingRate>)> {
        let mut eps = self.endpoints.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ep) = eps.get(&from) {
            return Ok(ep.clone());
        }
        let ep = paced_endpoint(endpoint_config(toward), udp_socket(from, buffer)?)?;
        eps.insert(from, ep.clone());
        Ok(ep)
    }

    async fn connection(&self, to: SocketAddr, from: Option<IpAddr>, opts: &ChannelOptions) -> io::Result<Arc<Shared>> {
        let (crypto, name, credentials) = client_crypto(&opts.protection)?;
        let key = Key { to, from, credentials };
        let mut shared = self.shared.lock().await;
        shared.retain(|_, w| w.strong_count() > 0);
        if let Some(s) = shared.get(&key).and_then(Weak::upgrade) {
            if s.conn.close_reason().is_none() {
                return Ok(s);
            }
        }
        let local = match from.filter(|ip| ip.is_ipv4() == to.is_ipv4()) {
            Some(ip) => SocketAddr::new(ip, 0),
            None if to.is_ipv4() => SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0),
            None => SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), 0),
        };
        let (ep, pacer) = self.client_endpoint(local, to.ip(), opts.buffer)?;
        let mut config = quinn::ClientConfig::new(crypto);
        config.transport_config(transport_config(opts, Some(to.ip()), &pacer));
        let connecting =
            ep.connect_with(config, to, &name).map_err(|e| io::Error::other(format!("QUIC to {to}: {e}")))?;
        let conn = tokio::time::timeout(opts.timeout, connecting)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("QUIC handshake with {to} timed out")))?
            .map_err(|e| handshake_error(to, e))?;
        tracing::info!(%to, start = %start_label(opts), "QUIC data connection up");
        log_stats(&conn, "client");
        let s = Arc::new(Shared { conn });
        shared.insert(key, Arc::downgrade(&s));
        Ok(s)
    }
}

/// With `FERRY_LOG=ferry_io::transport::quic=debug`: the connection's
/// figures once a second while it lives (what was sent and lost, RTT,
/// window, flow-control frames), to see where a long path's rate goes
/// (issue 19: start-up, loss recovery, window stalls).
fn log_stats(conn: &quinn::Connection, side: &'static str) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let conn = conn.clone();
    tokio::spawn(async move {
        let start = std::time::Instant::now();
        let mut last = conn.stats();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            let closed = tokio::select! {
                _ = tick.tick() => false,
                _ = conn.closed() => true,
            };
            let s = conn.stats();
            let (p, l) = (&s.path, &last.path);
            tracing::debug!(
                side,
                t = format!("{:.1}", start.elapsed().as_secs_f64()),
                tx_mbit = (s.udp_tx.bytes - last.udp_tx.bytes) as f64 * 8e-6,
                rx_mbit = (s.udp_rx.bytes - last.udp_rx.bytes) as f64 * 8e-6,
                rtt_ms = p.rtt.as_secs_f64() * 1e3,
                min_rtt_ms = p.min_rtt.as_secs_f64() * 1e3,
                cwnd = p.cwnd,
                sent = p.sent_packets - l.sent_packets,
                lost = p.lost_packets - l.lost_packets,
                congestion_events = p.congestion_events - l.congestion_events,
                mtu = p.current_mtu,
                acks_tx = s.frame_tx.acks - last.frame_tx.acks,
                acks_rx = s.frame_rx.acks - last.frame_rx.acks,
                max_data_rx = (s.frame_rx.max_data + s.frame_rx.max_stream_data)
                    - (last.frame_rx.max_data + last.frame_rx.max_stream_data),
                blocked_tx = (s.frame_tx.data_blocked + s.frame_tx.stream_data_blocked)
                    - (last.frame_tx.data_blocked + last.frame_tx.stream_data_blocked),
                "QUIC connection, last second"
            );
            if closed {
                tracing::debug!(
                    side,
                    t = format!("{:.1}", start.elapsed().as_secs_f64()),
                    udp_tx_bytes = s.udp_tx.bytes,
                    udp_rx_bytes = s.udp_rx.bytes,
                    sent_packets = p.sent_packets,
                    lost_packets = p.lost_packets,
                    lost_bytes = p.lost_bytes,
                    congestion_events = p.congestion_events,
                    "QUIC connection closed, totals"
                );
                break;
            }
            last = s;
        }
    });
}

fn handshake_error(peer: SocketAddr, e: quinn::ConnectionError) -> io::Error {
    let kind = match e {
        quinn::ConnectionError::TimedOut => io::ErrorKind::TimedOut,
        quinn::ConnectionError::ConnectionClosed(_) | quinn::ConnectionError::ApplicationClosed(_) => {
            io::ErrorKind::ConnectionRefused
        }
        _ => io::ErrorKind::Other,
    };
    // "certificate" appears in rustls's messages, which callers report.
    io::Error::new(kind, format!("QUIC handshake with {peer} failed: {e}"))
}

impl Transport for Quic {
    fn name(&self) -> &'static str {
        "quic"
    }

    fn listen(&self, at: SocketAddr, opts: &ChannelOptions) -> io::Result<Arc<dyn DataListener>> {
        let _rt = runtime()?;
        let (endpoint, pacer) = paced_endpoint(endpoint_config(at.ip()), udp_socket(at, opts.buffer)?)?;
        // Ready at once, not from the first `accept`: the peer connects as
        // soon as it has the PORT/PASV reply and its transfer command, and
        // an Initial that arrives before this side gets round to accepting
        // found no server configuration — quinn dropped it (answering with
        // a stateless reset) and the peer resent only after its probe
        // timeout, about 1 s (3 × quinn's initial RTT of 333 ms). On the
        // 80 ms path that race cost a second in about half the downloads
        // (`bench/results/quic-s5/NOTES.md`). Queued attempts still go
        // through `admit` (the peer's address) when `accept` runs; a
        // session without credentials keeps none until `accept` refuses it.
        // Set once: a new configuration has a new Retry-token key, so a
        // Retry issued under the old one would fail its validation (the
        // handshake then timed out); `accept` sets it only if this could not
        // (no interface for an unspecified address, no credentials).
        let configured = !at.ip().is_unspecified()
            && server_config(opts, Some(at.ip()), &pacer).map(|c| endpoint.set_server_config(Some(c))).is_ok();
        Ok(Arc::new(QuicListener {
            configured: std::sync::atomic::AtomicBool::new(configured),
            endpoint,
            pacer,
            conns: Arc::default(),
            changed: Arc::default(),
            handshakes: Arc::default(),
        }))
    }

    fn connect<'a>(
        &'a self,
        to: SocketAddr,
        from: Option<IpAddr>,
        opts: &'a ChannelOptions,
    ) -> BoxFuture<'a, io::Result<DataConn>> {
        Box::pin(async move {
            let rt = runtime()?;
            let shared = self.connection(to, from, opts).await?;
            let (mut send, recv) = tokio::time::timeout(opts.timeout, shared.conn.open_bi())
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("no QUIC stream to {to} in time")))?
                .map_err(|e| io::Error::new(io::ErrorKind::ConnectionAborted, e))?;
            send.write_all(&[PREAMBLE]).await.map_err(io::Error::other)?;
            let conn = QuicStream::new(shared.conn.clone(), Some(shared), send, recv, rt, opts.timeout);
            let conn: DataConn = Box::new(conn);
            opts.observe(&*conn);
            Ok(conn)
        })
    }
}

/// The endpoint configuration of a listener: credentials, windows and
/// datagram sizes toward `path`, and the bounds on queued attempts.
fn server_config(
    opts: &ChannelOptions,
    path: Option<IpAddr>,
    pacer: &Arc<PacingRate>,
) -> io::Result<quinn::ServerConfig> {
    let mut config = quinn::ServerConfig::with_crypto(server_crypto(&opts.protection)?);
    config
        .transport_config(transport_config(opts, path, pacer))
        .max_incoming(MAX_INCOMING)
        .incoming_buffer_size(64 << 10)
        .incoming_buffer_size_total(1 << 20);
    Ok(config)
}

/// A QUIC endpoint waiting for one data channel set.
pub struct QuicListener {
    endpoint: quinn::Endpoint,
    /// The endpoint's pacing rate (its connections' controllers').
    pacer: Arc<PacingRate>,
    /// The connections accepted from the expected peer; their next streams
    /// are this listener's next data connections.
    conns: Arc<Mutex<Vec<quinn::Connection>>>,
    /// Wakes accepts waiting on an older list of `conns` (a server may
    /// accept a set's streams from several tasks at once), and when a
    /// handshake ends.
    changed: Arc<tokio::sync::Notify>,
    /// Handshakes accepted and not yet finished (see "Hostile input").
    handshakes: Arc<std::sync::atomic::AtomicUsize>,
    /// The server configuration is set (once: see [`Transport::listen`]).
    configured: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for QuicListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuicListener").field("local", &self.endpoint.local_addr().ok()).finish()
    }
}

impl Drop for QuicListener {
    fn drop(&mut self) {
        // Connections whose streams are still held (cached MODE E
        // channels) live on; the endpoint takes no new ones.
        self.endpoint.set_server_config(None);
    }
}

/// Waits for the next stream any of `conns` opens.
async fn next_stream(
    conns: Vec<quinn::Connection>,
) -> (quinn::Connection, Result<(quinn::SendStream, quinn::RecvStream), quinn::ConnectionError>) {
    if conns.is_empty() {
        return std::future::pending().await;
    }
    let futs = conns.into_iter().map(|c| {
        Box::pin(async move {
            let r = c.accept_bi().await;
            (c, r)
        })
    });
    futures::future::select_all(futs).await.0
}

impl QuicListener {
    fn live(&self) -> Vec<quinn::Connection> {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.retain(|c| c.close_reason().is_none());
        conns.clone()
    }

    /// Takes or turns away one connection attempt (see "Hostile input").
    ///
    /// An attempt from the expected peer (the control peer, or the other
    /// server of a third-party copy: `peer`), whose address the control
    /// connection's TCP handshake has already validated, is accepted
    /// without a Retry while this listener is idle — no handshake under
    /// way and no connection yet — which saves the Retry's round trip
    /// (160 ms at 80 ms one way) on every data channel set. Anything else
    /// gets the stateless Retry first: an attempt while another handshake
    /// is under way (a flood, or a spoofer who got there first), an
    /// attempt when a connection exists, and every attempt to a listener
    /// that expects no particular peer. The handshake runs in a task of
    /// its own, so a stalled one (a spoofed Initial that never completes)
    /// holds a slot until the data timeout but does not block the next
    /// attempt, which the Retry then validates.
    async fn admit(&self, incoming: quinn::Incoming, opts: &ChannelOptions, peer: Option<IpAddr>) {
        use std::sync::atomic::Ordering;
        let from = incoming.remote_address();
        if !super::admissible(from, peer) {
            incoming.ignore();
            return;
        }
        let live = self.live().len();
        let handshakes = self.handshakes.load(Ordering::SeqCst);
        let idle = live == 0 && handshakes == 0;
        // A validated address here came back with a Retry token.
        let retried = incoming.remote_address_validated();
        let expected_and_idle = peer.is_some() && idle;
        if !(retried || expected_and_idle) {
            if incoming.may_retry() {
                let _ = incoming.retry();
            } else {
                incoming.refuse();
            }
            return;
        }
        if live + handshakes >= MAX_CONNECTIONS {
            tracing::warn!(%from, "refused a QUIC connection: this data channel has enough");
            incoming.refuse();
            return;
        }
        let connecting = match incoming.accept() {
            Ok(c) => c,
            Err(e) => return tracing::debug!(%from, error = %e, "QUIC connection failed"),
        };
        self.handshakes.fetch_add(1, Ordering::SeqCst);
        let (conns, changed, pending, timeout) =
            (self.conns.clone(), self.changed.clone(), self.handshakes.clone(), opts.timeout);
        let start = start_label(opts);
        tokio::spawn(async move {
            match tokio::time::timeout(timeout, connecting).await {
                Ok(Ok(conn)) => {
                    tracing::info!(%from, %start, retried, "QUIC data connection accepted");
                    log_stats(&conn, "server");
                    conns.lock().unwrap_or_else(|e| e.into_inner()).push(conn);
                }
                Ok(Err(e)) => tracing::warn!(%from, error = %e, "QUIC handshake failed"),
                Err(_) => tracing::warn!(%from, "QUIC handshake timed out"),
            }
            pending.fetch_sub(1, Ordering::SeqCst);
            changed.notify_waiters();
        });
    }
}

impl DataListener for QuicListener {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    fn accept<'a>(
        &'a self,
        opts: &'a ChannelOptions,
        peer: Option<IpAddr>,
    ) -> BoxFuture<'a, io::Result<(DataConn, SocketAddr)>> {
        Box::pin(async move {
            let rt = runtime()?;
            if !self.configured.load(std::sync::atomic::Ordering::SeqCst) {
                let path = peer.or_else(|| self.endpoint.local_addr().ok().map(|a| a.ip()));
                self.endpoint.set_server_config(Some(server_config(opts, path, &self.pacer)?));
                self.configured.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            loop {
                let changed = self.changed.notified();
                let conns = self.live();
                tokio::select! {
                    _ = changed => continue,
                    incoming = self.endpoint.accept() => match incoming {
                        Some(i) => self.admit(i, opts, peer).await,
                        None => return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the QUIC endpoint closed")),
                    },
                    (conn, stream) = next_stream(conns) => {
                        let (send, mut recv) = match stream {
                            Ok(s) => s,
                            Err(e) => {
                                tracing::debug!(error = %e, "a QUIC data connection ended");
                                continue;
                            }
                        };
                        let mut first = [0u8; 1];
                        match tokio::time::timeout(opts.timeout, recv.read_exact(&mut first)).await {
                            Ok(Ok(())) if first[0] == PREAMBLE => {}
                            _ => {
                                tracing::warn!(from = %conn.remote_address(), "a QUIC stream without the data preamble");
                                continue;
                            }
                        }
                        let from = conn.remote_address();
                        let c: DataConn = Box::new(QuicStream::new(conn, None, send, recv, rt, opts.timeout));
                        opts.observe(&*c);
                        return Ok((c, from));
                    }
                }
            }
        })
    }
}

/// One data connection: a bidirectional stream of a QUIC connection.
pub struct QuicStream {
    conn: quinn::Connection,
    /// Keeps a connection this side opened alive (and closes it after the
    /// last stream).
    _shared: Option<Arc<Shared>>,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    /// Received bytes not yet read.
    pending: Bytes,
    rt: Handle,
    timeout: Duration,
}

impl fmt::Debug for QuicStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuicStream").field("peer", &self.conn.remote_address()).field("id", &self.send.id()).finish()
    }
}

impl QuicStream {
    fn new(
        conn: quinn::Connection,
        shared: Option<Arc<Shared>>,
        send: quinn::SendStream,
        recv: quinn::RecvStream,
        rt: Handle,
        timeout: Duration,
    ) -> Self {
        Self { conn, _shared: shared, send, recv, pending: Bytes::new(), rt, timeout }
    }

    /// Runs `fut` to completion on this blocking thread within the timeout.
    fn wait<T>(rt: &Handle, timeout: Duration, what: &str, fut: impl std::future::Future<Output = T>) -> io::Result<T> {
        rt.block_on(async { tokio::time::timeout(timeout, fut).await })
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("the QUIC peer {what} in time")))
    }
}

impl Drop for QuicStream {
    /// A stream dropped unfinished (a cached MODE E channel at the end of a
    /// session, after its EOD) is finished by quinn; its bytes may still be
    /// in flight, as they may be in a TCP socket's buffer after `close`.
    /// The QUIC connection is closed when its last stream goes, and a close
    /// discards what was not acknowledged, so the connection is held until
    /// this stream's bytes are (or the timeout passes).
    fn drop(&mut self) {
        if let Some(shared) = self._shared.take() {
            let acked = self.send.stopped();
            let t = self.timeout;
            self.rt.spawn(async move {
                let _ = tokio::time::timeout(t, acked).await;
                drop(shared);
            });
        }
    }
}

fn read_error(e: quinn::ReadError) -> io::Error {
    match e {
        quinn::ReadError::ConnectionLost(quinn::ConnectionError::LocallyClosed) => {
            io::Error::new(io::ErrorKind::ConnectionAborted, "the data connection was aborted")
        }
        e => io::Error::new(io::ErrorKind::ConnectionReset, e),
    }
}

impl Read for QuicStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.pending.is_empty() {
            let recv = &mut self.recv;
            match Self::wait(&self.rt, self.timeout, "sent no data", recv.read_chunk(4 << 20, true))? {
                Ok(Some(chunk)) => self.pending = chunk.bytes,
                Ok(None) => return Ok(0),
                Err(e) => return Err(read_error(e)),
            }
        }
        let mut n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending.split_to(n));
        // quinn hands out about one packet per chunk: take what has already
        // arrived too, without waiting, so a large read costs one wake-up
        // rather than one per packet (the receiver's CPU on loopback).
        while n < buf.len() && self.pending.is_empty() {
            match self.recv.read_chunk(buf.len() - n, true).now_or_never() {
                Some(Ok(Some(chunk))) => {
                    let m = chunk.bytes.len();
                    buf[n..n + m].copy_from_slice(&chunk.bytes);
                    n += m;
                }
                // Nothing more yet, the end, or an error: the next read
                // sees the last two.
                _ => break,
            }
        }
        Ok(n)
    }
}

impl Write for QuicStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let send = &mut self.send;
        Self::wait(&self.rt, self.timeout, "took no data", send.write(buf))?
            .map_err(|e| io::Error::new(io::ErrorKind::ConnectionReset, e))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Connection for QuicStream {
    fn transport(&self) -> &'static str {
        "quic"
    }

    fn is_encrypted(&self) -> bool {
        true
    }

    /// Ends this side's stream and waits until the peer has acknowledged
    /// every byte: the QUIC connection may close right after (when this
    /// was its last stream), and a close discards unacknowledged data.
    fn finish(&mut self) -> io::Result<()> {
        if self.send.finish().is_err() {
            return Ok(()); // already finished or reset
        }
        let stopped = self.send.stopped();
        match Self::wait(&self.rt, self.timeout, "acknowledged no data", stopped)? {
            Ok(_) => Ok(()),
            Err(e) => Err(io::Error::new(io::ErrorKind::ConnectionReset, e)),
        }
    }

    /// ABOR ends the whole data channel set: every stream of the QUIC
    /// connection fails at once.
    fn abort_handle(&self) -> io::Result<AbortHandle> {
        let conn = self.conn.clone();
        Ok(AbortHandle::new(move || conn.close(CLOSE_ABORTED.into(), b"aborted")))
    }

    /// The QUIC connection's figures (shared by all its streams).
    fn stats(&self) -> TransportStats {
        let s = self.conn.stats();
        let rtt = s.path.rtt;
        TransportStats {
            transport: "quic".into(),
            bytes_sent: s.udp_tx.bytes,
            bytes_received: s.udp_rx.bytes,
            rtt_us: Some(rtt.as_micros() as u64),
            window_bytes: Some(s.path.cwnd),
            rate: (rtt > Duration::ZERO).then(|| (s.path.cwnd as f64 / rtt.as_secs_f64()) as u64),
            retransmissions: s.path.lost_packets,
            losses: s.path.lost_packets,
            ..TransportStats::default()
        }
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        Some(self.conn.remote_address())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Payload;

    /// A server configuration (registered) and a client configuration
    /// (registered) that trust each other as FTPS would.
    fn protections() -> (DataProtection, DataProtection) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let der = cert.der().clone();
        let pk = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![der.clone()], pk.clone_key())
            .unwrap();
        let server = crate::tls::data_server_config(&server);
        register_server_identity(&server, vec![der.clone()], pk);
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der).unwrap();
        let roots = Arc::new(roots);
        let client = Arc::new(
            rustls::ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots.clone())
                .with_no_client_auth(),
        );
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider()).build().unwrap();
        register_client_trust(&client, verifier);
        let name = ServerName::try_from("localhost").unwrap();
        (DataProtection::Server(server), DataProtection::Client { config: client, name })
    }

    fn opts(p: DataProtection) -> ChannelOptions {
        ChannelOptions { protection: p, ..ChannelOptions::new(Duration::from_secs(10)) }
    }

    /// `n` streams from the connecting side to the listening side.
    async fn pairs(listen: DataProtection, connect: DataProtection, n: usize) -> Vec<(DataConn, DataConn)> {
        let lo = opts(listen);
        let co = opts(connect);
        let l = transport().listen("127.0.0.1:0".parse().unwrap(), &lo).unwrap();
        let addr = l.local_addr().unwrap();
        let t = transport();
        let mut out = Vec::new();
        for _ in 0..n {
            let (a, b) = tokio::join!(t.connect(addr, None, &co), l.accept(&lo, Some("127.0.0.1".parse().unwrap())));
            out.push((a.unwrap(), b.unwrap().0));
        }
        out
    }

    fn move_bytes(mut from: DataConn, mut to: DataConn, len: usize) -> std::thread::JoinHandle<(Vec<u8>, Vec<u8>)> {
        std::thread::spawn(move || {
            let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let d = data.clone();
            let w = std::thread::spawn(move || {
                from.send_block(b"H", Payload::Bytes(&d)).unwrap();
                from.finish().unwrap();
                from
            });
            let mut got = Vec::new();
            to.read_to_end(&mut got).unwrap();
            let from = w.join().unwrap();
            assert_eq!(from.stats().transport, "quic");
            let mut want = b"H".to_vec();
            want.extend_from_slice(&data);
            (got, want)
        })
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_upload_shape_four_streams_on_one_connection() {
        let (server, client) = protections();
        let ps = pairs(server, client, 4).await;
        let ids: std::collections::HashSet<_> = ps.iter().map(|(a, _)| a.peer_addr().unwrap()).collect();
        assert_eq!(ids.len(), 1, "one QUIC connection for the set");
        let hs: Vec<_> = ps.into_iter().map(|(a, b)| move_bytes(a, b, 3_000_001)).collect();
        for h in hs {
            let (got, want) = tokio::task::spawn_blocking(move || h.join().unwrap()).await.unwrap();
            assert!(got == want);
        }
    }

    /// `crates/udt`'s controller drives quinn (nextest runs each test in
    /// its own process, so the process-wide choice stays here).
    #[tokio::test(flavor = "multi_thread")]
    async fn the_ferry_controller_moves_four_streams() {
        set_congestion("ferry".parse().unwrap());
        let (server, client) = protections();
        let ps = pairs(server, client, 4).await;
        let hs: Vec<_> = ps.into_iter().map(|(a, b)| move_bytes(a, b, 4_000_003)).collect();
        for h in hs {
            let (got, want) = tokio::task::spawn_blocking(move || h.join().unwrap()).await.unwrap();
            assert!(got == want);
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_download_shape_the_server_connects_and_is_verified_as_a_client() {
        let (server, client) = protections();
        // The FTP client listens (PORT), the FTP server connects and sends.
        let ps = pairs(client, server, 2).await;
        let hs: Vec<_> = ps.into_iter().map(|(b, a)| move_bytes(a, b, 1_000_000)).collect();
        for h in hs {
            let (got, want) = tokio::task::spawn_blocking(move || h.join().unwrap()).await.unwrap();
            assert!(got == want);
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_server_the_client_does_not_trust_is_refused_both_ways() {
        let (server, _) = protections();
        let (_, other_client) = protections(); // trusts another certificate
        let lo = opts(server.clone());
        let co = ChannelOptions { timeout: Duration::from_secs(3), ..opts(other_client.clone()) };
        let l = transport().listen("127.0.0.1:0".parse().unwrap(), &lo).unwrap();
        let addr = l.local_addr().unwrap();
        let t = transport();
        tokio::select! {
            r = t.connect(addr, None, &co) => {
                let e = r.unwrap_err().to_string();
                assert!(e.contains("certificate"), "upload shape: {e}");
            }
            _ = l.accept(&lo, None) => panic!("accepted"),
        }
        // Reversed: the client listens and must reject the server's certificate.
        let lo = ChannelOptions { timeout: Duration::from_secs(3), ..opts(other_client) };
        let l = transport().listen("127.0.0.1:0".parse().unwrap(), &lo).unwrap();
        let addr = l.local_addr().unwrap();
        let co = ChannelOptions { timeout: Duration::from_secs(3), ..opts(server) };
        let accepted = tokio::time::timeout(Duration::from_secs(4), async {
            let (_c, a) = tokio::join!(t.connect(addr, None, &co), l.accept(&lo, None));
            a
        })
        .await;
        assert!(!matches!(accepted, Ok(Ok(_))), "the client took a server it does not trust");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn clear_sessions_get_no_quic() {
        let t = transport();
        let o = ChannelOptions::new(Duration::from_secs(1));
        let e = t.connect("127.0.0.1:9".parse().unwrap(), None, &o).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_connection_from_another_address_is_ignored() {
        let (server, client) = protections();
        let lo = opts(server);
        let l = transport().listen("127.0.0.1:0".parse().unwrap(), &lo).unwrap();
        let addr = l.local_addr().unwrap();
        let co = ChannelOptions { timeout: Duration::from_secs(2), ..opts(client) };
        let t = transport();
        // Only 127.0.0.2 may connect; we come from 127.0.0.1.
        tokio::select! {
            r = t.connect(addr, None, &co) => assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut),
            _ = l.accept(&lo, Some("127.0.0.2".parse().unwrap())) => panic!("accepted a foreign peer"),
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_abort_unblocks_a_read() {
        let (server, client) = protections();
        let (_a, b) = pairs(server, client, 1).await.pop().unwrap();
        let h = b.abort_handle().unwrap();
        let t = std::thread::spawn(move || {
            let mut b = b;
            let mut buf = [0u8; 8];
            b.read(&mut buf)
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        h.abort();
        let r = tokio::task::spawn_blocking(move || t.join().unwrap()).await.unwrap();
        assert!(r.is_err() || r.unwrap() == 0);
    }
}
