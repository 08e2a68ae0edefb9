//! What the server's administrator decides for every session.

/// Who may log in without a password.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AnonymousAccess {
    #[default]
    Off,
    Read,
    Write,
}

/// What a logged-in user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

/// Where data connections may be made to with PORT/EPRT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PortPolicy {
    /// Only the control connection's peer address (RFC 2577 §3 bounce
    /// protection). The default.
    #[default]
    PeerOnly,
    /// Any address on an unprivileged port: needed when this server is the
    /// source of a third-party copy to another host.
    AnyUnprivileged,
}

#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Text of the 220 greeting.
    pub banner: String,
    pub anonymous: AnonymousAccess,
    /// Failed PASS attempts before the connection is closed.
    pub max_login_attempts: u32,
    /// Consecutive unparseable lines before the connection is closed.
    pub max_bad_commands: u32,
    pub port_policy: PortPolicy,
    /// Whether `AUTH TLS` can be offered (a certificate is configured).
    pub tls_available: bool,
    /// Refuse USER and PASS until the control connection is TLS.
    pub require_tls: bool,
    /// Refuse transfers unless `PROT P` protects the data connections.
    pub require_protected_data: bool,
    /// Default seconds between restart and performance markers while
    /// receiving in MODE E (Globus: 5; TREV changes it per session).
    pub marker_interval_secs: u32,
    /// The largest file this server stores: ALLO, ESTO offsets and every
    /// byte an upload writes are bounded by it (`552` beyond).
    pub max_file_size: u64,
    /// This server is a striping front end (issue 20): SPOR may name
    /// several addresses, one per receiving stripe.
    pub striped: bool,
    /// Data-channel transports a client may select (FEAT `TRANSPORTS`,
    /// `TPRT`, `SITE SETNETSTACK`; see `crate::transport`), and the one
    /// used until it does (Globus's `-dc-default`).
    pub transports: Vec<crate::transport::TransportName>,
    pub default_transport: crate::transport::TransportName,
    /// Give a default transport that is TLS itself (`quic`) to sessions
    /// that never selected a transport too (Globus's `-dc-default`
    /// behaviour). Off: such sessions get TCP (with TLS under PROT P),
    /// which every FTPS client speaks.
    pub default_transport_unasked: bool,
    /// This server can verify another server's certificate (it has a
    /// trust store for them), so `DCAU S NAME` is accepted on a TLS
    /// control channel for third-party QUIC copies.
    pub peer_certificates: bool,
    /// Whether FEAT lists `BATCH` (docs/batch.md). Batches are served
    /// either way; without the line Ferry's client pipelines instead.
    pub batch: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            banner: format!("Ferry {} ready.", env!("CARGO_PKG_VERSION")),
            anonymous: AnonymousAccess::Off,
            max_login_attempts: 3,
            max_bad_commands: 20,
            port_policy: PortPolicy::PeerOnly,
            tls_available: false,
            require_tls: false,
            require_protected_data: false,
            marker_interval_secs: 5,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            striped: false,
            transports: vec![crate::transport::TransportName::TCP],
            default_transport: crate::transport::TransportName::TCP,
            default_transport_unasked: false,
            peer_certificates: false,
            batch: true,
        }
    }
}

/// The default bound on stored files: 4 TiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 4 << 40;
