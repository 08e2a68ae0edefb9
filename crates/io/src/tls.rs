//! TLS on data connections (RFC 4217 `PROT P`), and the PEM and X.509
//! helpers the server and the client share.
//!
//! A [`DataStream`] is what the data path reads and writes: a plain TCP
//! connection, or the same connection inside a rustls session. The copy
//! loops ask [`DataStream::plain`] before they take a kernel-side shortcut
//! (`sendfile`, `MSG_TRUNC`, `MSG_MORE` headers): bytes that must be
//! encrypted have to pass through user space, so a TLS stream always takes
//! the buffered path, with the same MODE E framing and markers.
//!
//! The handshake is lazy: rustls completes it on the first read or write,
//! on the blocking thread that owns the stream, so N parallel MODE E
//! streams shake hands in parallel and an ABOR (which shuts the socket
//! down) interrupts a handshake like any other read.
//!
//! Roles (RFC 4217 §7, and what curl, lftp and ftplib do): the FTP server
//! is the TLS server and the FTP client the TLS client on every data
//! connection, whichever side opened the TCP connection (PASV or PORT,
//! and in MODE E where the sender connects).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection, StreamOwned};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::sync::Arc;
use thiserror::Error;

/// Why a certificate, key or trust store could not be loaded.
#[derive(Debug, Error)]
pub enum TlsSetupError {
    #[error("{path}: {error}")]
    Pem { path: String, error: String },
    #[error("{path}: no {what} found in this PEM file")]
    Empty { path: String, what: &'static str },
    #[error("the TLS configuration is not usable: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("the trust anchors are not usable: {0}")]
    Verifier(String),
}

fn pem_error(path: &Path, e: impl std::fmt::Display) -> TlsSetupError {
    TlsSetupError::Pem { path: path.display().to_string(), error: e.to_string() }
}

/// Every certificate in a PEM file (a chain: leaf first).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_error(path, e))?;
    if certs.is_empty() {
        return Err(TlsSetupError::Empty { path: path.display().to_string(), what: "CERTIFICATE" });
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsSetupError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            TlsSetupError::Empty { path: path.display().to_string(), what: "PRIVATE KEY" }
        }
        e => pem_error(path, e),
    })
}

/// A trust store from a PEM file of CA certificates.
pub fn load_roots(path: &Path) -> Result<rustls::RootCertStore, TlsSetupError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in load_certs(path)? {
        roots.add(c).map_err(|e| pem_error(path, e))?;
    }
    Ok(roots)
}

/// The system's trust store (`/etc/ssl/certs` on Debian), for servers
/// with certificates from a public or site CA.
pub fn system_roots() -> Result<rustls::RootCertStore, TlsSetupError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found.errors.first().map(|e| e.to_string()).unwrap_or_else(|| "no certificates".into());
        return Err(TlsSetupError::Verifier(format!(
            "no system CA certificates could be loaded ({why}); give the server's CA with --ca"
        )));
    }
    Ok(roots)
}

/// The provider every Ferry TLS configuration uses (ring: no cmake or
/// assembler toolchain needed to build, fast AES-GCM on x86 and ARM).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The subject of a DER certificate as a grid-mapfile writes it:
/// `/C=DE/O=Grid/CN=Alice` (the RDNs in certificate order, OpenSSL's
/// "oneline" form that Globus uses).
pub fn subject_dn(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let mut out = String::new();
    for rdn in parsed.subject().iter() {
        for atv in rdn.iter() {
            let oid = atv.attr_type();
            let name = x509_parser::objects::oid2abbrev(oid, x509_parser::objects::oid_registry())
                .map(str::to_string)
                .unwrap_or_else(|_| oid.to_id_string());
            let value = atv.as_str().ok()?;
            out.push('/');
            out.push_str(&name);
            out.push('=');
            out.push_str(value);
        }
    }
    Some(out)
}

/// The server configuration for data connections, derived from the
/// control connection's: the same certificate, client verifier and session
/// cache (so a client that resumes its control session on a data
/// connection, as lftp/GnuTLS and vsftpd-style setups do, gets it), but no
/// TLS 1.3 session tickets. A ticket is a post-handshake message, and a
/// data connection's peer often never reads: an uploading client that
/// closes with the ticket unread makes its kernel answer with a reset
/// instead of a FIN, and the reset throws away the end of the upload still
/// queued at the server. Tickets for resumption come from the control
/// connection, which is read to the end.
pub fn data_server_config(control: &ServerConfig) -> Arc<ServerConfig> {
    let mut data = control.clone();
    data.send_tls13_tickets = 0;
    Arc::new(data)
}

type ServerStream = StreamOwned<ServerConnection, TcpStream>;
type ClientStream = StreamOwned<ClientConnection, TcpStream>;

/// One data connection, plain or protected.
#[derive(Debug)]
pub enum DataStream {
    Plain(TcpStream),
    /// This side is the TLS server (the FTP server's data connections).
    TlsServer(Box<ServerStream>),
    /// This side is the TLS client (the FTP client's data connections).
    TlsClient(Box<ClientStream>),
}

/// How to protect the data connections of one control session.
#[derive(Debug, Clone)]
pub enum DataProtection {
    Clear,
    /// Be the TLS server with this configuration.
    Server(Arc<ServerConfig>),
    /// Be the TLS client, verifying the server as `name`.
    Client {
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
    },
    /// A server's end of a data channel to another server (a third-party
    /// copy, `DCAU S`): present this server's certificate (`config`) and
    /// verify the other's with `trust` for `name`. Only QUIC carries it
    /// (transport/quic.rs, "Third-party"); over TCP both would be TLS
    /// servers.
    Peer {
        config: Arc<ServerConfig>,
        name: ServerName<'static>,
        trust: Arc<dyn rustls::client::danger::ServerCertVerifier>,
    },
}

impl DataProtection {
    pub fn is_private(&self) -> bool {
        !matches!(self, DataProtection::Clear)
    }

    /// Wraps a freshly opened connection; the handshake runs on its first
    /// read or write.
    pub fn wrap(&self, sock: TcpStream) -> io::Result<DataStream> {
        Ok(match self {
            DataProtection::Clear => DataStream::Plain(sock),
            DataProtection::Peer { .. } => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "a TLS data channel between two servers needs QUIC (both would be TLS servers over TCP)",
                ))
            }
            DataProtection::Server(config) => {
                let conn = ServerConnection::new(config.clone()).map_err(io::Error::other)?;
                DataStream::TlsServer(Box::new(StreamOwned::new(conn, sock)))
            }
            DataProtection::Client { config, name } => {
                let conn = ClientConnection::new(config.clone(), name.clone()).map_err(io::Error::other)?;
                DataStream::TlsClient(Box::new(StreamOwned::new(conn, sock)))
            }
        })
    }
}

impl DataStream {
    /// The TCP connection underneath: for socket options, TCP_INFO and
    /// registering with an abort signal.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            DataStream::Plain(s) => s,
            DataStream::TlsServer(s) => s.get_ref(),
            DataStream::TlsClient(s) => s.get_ref(),
        }
    }

    /// The socket itself when nothing needs encrypting: the zero-copy
    /// paths may then write and read it directly.
    pub fn plain(&self) -> Option<&TcpStream> {
        match self {
            DataStream::Plain(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_tls(&self) -> bool {
        self.plain().is_none()
    }

    /// Protocol version and whether the handshake resumed an earlier
    /// session (`None` for plain streams or before the handshake).
    pub fn tls_summary(&self) -> Option<(rustls::ProtocolVersion, bool)> {
        let (version, kind) = match self {
            DataStream::Plain(_) => return None,
            DataStream::TlsServer(s) => (s.conn.protocol_version()?, s.conn.handshake_kind()?),
            DataStream::TlsClient(s) => (s.conn.protocol_version()?, s.conn.handshake_kind()?),
        };
        Some((version, kind == rustls::HandshakeKind::Resumed))
    }

    /// Completes the TLS handshake now (a no-op for plain streams), so a
    /// certificate problem is reported as such rather than as a failed read.
    pub fn handshake(&mut self) -> io::Result<()> {
        fn done<C, S>(s: &mut StreamOwned<C, TcpStream>) -> io::Result<()>
        where
            C: std::ops::DerefMut + std::ops::Deref<Target = rustls::ConnectionCommon<S>>,
            S: rustls::SideData,
        {
            while s.conn.is_handshaking() {
                s.conn.complete_io(&mut s.sock)?;
            }
            Ok(())
        }
        match self {
            DataStream::Plain(_) => Ok(()),
            DataStream::TlsServer(s) => done(s),
            DataStream::TlsClient(s) => done(s),
        }
    }

    /// Ends the sending direction: for TLS a `close_notify` alert first
    /// (so the peer can tell the end of the data from a cut connection),
    /// then the TCP FIN that stream mode uses as its end-of-file (RFC 959
    /// §3.4.1). The FIN is explicit because an abort signal may hold a
    /// duplicate descriptor of the socket.
    pub fn finish(&mut self) -> io::Result<()> {
        // An empty file or listing writes nothing, so the lazy handshake
        // has not run yet: a close_notify now would reach the peer in place
        // of the ServerHello.
        self.handshake()?;
        tracing::debug!(tls = ?self.tls_summary(), "data connection finished");
        match self {
            DataStream::Plain(_) => {}
            DataStream::TlsServer(s) => {
                s.conn.send_close_notify();
                s.flush()?;
                while s.conn.wants_write() {
                    s.conn.write_tls(&mut s.sock)?;
                }
            }
            DataStream::TlsClient(s) => {
                s.conn.send_close_notify();
                s.flush()?;
                while s.conn.wants_write() {
                    s.conn.write_tls(&mut s.sock)?;
                }
            }
        }
        self.tcp().shutdown(Shutdown::Write)
    }
}

/// A TLS peer that closes TCP without `close_notify` reads as an error in
/// rustls. Many FTP clients do that after an upload (vsftpd accepts it by
/// default too); MODE E carries its own end-of-data markers, and a stream
/// mode upload is still checked against ALLO and the control connection,
/// so it is taken as the end of the data.
fn lenient_eof(r: io::Result<usize>) -> io::Result<usize> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
        r => r,
    }
}

impl Read for DataStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            DataStream::Plain(s) => s.read(buf),
            DataStream::TlsServer(s) => lenient_eof(s.read(buf)),
            DataStream::TlsClient(s) => lenient_eof(s.read(buf)),
        }
    }
}

impl Write for DataStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            DataStream::Plain(s) => s.write(buf),
            DataStream::TlsServer(s) => s.write(buf),
            DataStream::TlsClient(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            DataStream::Plain(s) => s.write_vectored(bufs),
            DataStream::TlsServer(s) => s.write_vectored(bufs),
            DataStream::TlsClient(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            DataStream::Plain(s) => s.flush(),
            DataStream::TlsServer(s) => s.flush(),
            DataStream::TlsClient(s) => s.flush(),
        }
    }
}

impl From<TcpStream> for DataStream {
    fn from(s: TcpStream) -> Self {
        DataStream::Plain(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn configs() -> (Arc<ServerConfig>, Arc<ClientConfig>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let der = CertificateDer::from(cert.der().to_vec());
        let server = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![der.clone()], PrivateKeyDer::try_from(key.serialize_der()).unwrap())
            .unwrap();
        let server = data_server_config(&server);
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der).unwrap();
        let client = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        (server, Arc::new(client))
    }

    #[test]
    fn protected_stream_round_trip_and_clean_end() {
        let (server, client) = configs();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let data: Vec<u8> = (0..3_000_001u32).map(|i| (i % 253) as u8).collect();
        let d = data.clone();
        let sender = std::thread::spawn(move || {
            let name = ServerName::try_from("localhost").unwrap();
            let mut s =
                DataProtection::Client { config: client, name }.wrap(TcpStream::connect(addr).unwrap()).unwrap();
            assert!(s.is_tls() && s.plain().is_none());
            s.write_all(&d).unwrap();
            s.finish().unwrap();
        });
        let (sock, _) = l.accept().unwrap();
        let mut s = DataProtection::Server(server).wrap(sock).unwrap();
        s.handshake().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        sender.join().unwrap();
        assert!(got == data);
    }

    #[test]
    fn an_empty_transfer_still_shakes_hands_first() {
        let (server, client) = configs();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (sock, _) = l.accept().unwrap();
            let mut s = DataProtection::Server(server).wrap(sock).unwrap();
            s.finish().unwrap();
        });
        let name = ServerName::try_from("localhost").unwrap();
        let mut s = DataProtection::Client { config: client, name }.wrap(TcpStream::connect(addr).unwrap()).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert!(got.is_empty());
        t.join().unwrap();
    }

    #[test]
    fn a_wrong_name_fails_the_handshake() {
        let (server, client) = configs();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (sock, _) = l.accept().unwrap();
            let _ = DataProtection::Server(server).wrap(sock).unwrap().handshake();
        });
        let name = ServerName::try_from("elsewhere.example").unwrap();
        let mut s = DataProtection::Client { config: client, name }.wrap(TcpStream::connect(addr).unwrap()).unwrap();
        let e = s.handshake().unwrap_err();
        assert!(e.to_string().contains("certificate"), "{e}");
        drop(s);
        t.join().unwrap();
    }

    #[test]
    fn subject_in_grid_mapfile_form() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![]).unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "DE");
        dn.push(rcgen::DnType::OrganizationName, "Grid");
        dn.push(rcgen::DnType::CommonName, "Alice Example");
        params.distinguished_name = dn;
        let cert = params.self_signed(&key).unwrap();
        let der = CertificateDer::from(cert.der().to_vec());
        assert_eq!(subject_dn(&der).unwrap(), "/C=DE/O=Grid/CN=Alice Example");
    }
}
