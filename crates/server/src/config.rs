//! Server settings: one struct, read from a TOML file and overridden by
//! command-line flags. Every limit has a safe default, so `ferry serve DIR`
//! alone is a reasonable service: loopback only, no anonymous access.

use ferry_proto::session::AnonymousAccess;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("config file {path} is not valid: {error}")]
    Parse { path: String, error: toml::de::Error },
    #[error("invalid port range {0:?}: expected LOW-HIGH with 1024 <= LOW <= HIGH <= 65535")]
    PortRange(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AnonymousSetting {
    #[default]
    Off,
    Read,
    Write,
}

impl From<AnonymousSetting> for AnonymousAccess {
    fn from(a: AnonymousSetting) -> Self {
        match a {
            AnonymousSetting::Off => AnonymousAccess::Off,
            AnonymousSetting::Read => AnonymousAccess::Read,
            AnonymousSetting::Write => AnonymousAccess::Write,
        }
    }
}

/// An inclusive range of TCP ports for passive data connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PortRange {
    pub low: u16,
    pub high: u16,
}

impl TryFrom<String> for PortRange {
    type Error = ConfigError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<PortRange> for String {
    fn from(r: PortRange) -> String {
        format!("{}-{}", r.low, r.high)
    }
}

impl std::str::FromStr for PortRange {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ConfigError::PortRange(s.to_string());
        let (a, b) = s.split_once('-').ok_or_else(err)?;
        let low: u16 = a.trim().parse().map_err(|_| err())?;
        let high: u16 = b.trim().parse().map_err(|_| err())?;
        if low < 1024 || low > high {
            return Err(err());
        }
        Ok(Self { low, high })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The directory served.
    pub root: PathBuf,
    /// Control-channel address. Loopback unless the administrator says
    /// otherwise.
    pub listen: SocketAddr,
    /// The users file (see `users.rs`); none means only anonymous logins.
    pub users: Option<PathBuf>,
    pub anonymous: AnonymousSetting,
    /// Passive data ports; the kernel picks when unset.
    pub passive_ports: Option<PortRange>,
    /// Address announced in PASV replies instead of the control
    /// connection's local address (for servers behind NAT).
    pub passive_address: Option<std::net::Ipv4Addr>,
    pub max_sessions: usize,
    pub max_sessions_per_ip: usize,
    /// Seconds without a command before a logged-in session is closed.
    pub idle_timeout_secs: u64,
    /// Seconds a connection may take to log in.
    pub login_timeout_secs: u64,
    /// Seconds a data connection may stall (no byte moved) or take to open.
    pub data_timeout_secs: u64,
    pub max_login_attempts: u32,
    /// Pause before answering a failed login, against password guessing.
    pub login_failure_delay_ms: u64,
    /// Failed logins from one address within `login_lockout_secs` after
    /// which that address is refused until `login_lockout_secs` have passed
    /// since its last failure (see `lockout.rs`); 0 turns this off.
    pub login_lockout_failures: u32,
    pub login_lockout_secs: u64,
    /// Allow PORT/EPRT to addresses other than the client's (needed when
    /// this server is the source of a third-party copy to another host).
    pub allow_third_party: bool,
    pub banner: Option<String>,
    /// Bytes per second one transfer may move (all its streams together);
    /// unlimited when unset.
    pub max_transfer_rate: Option<u64>,
    /// Seconds between restart (111) and performance (112) markers while
    /// receiving in MODE E; Globus uses 5. Clients may change it with TREV.
    pub marker_interval_secs: u32,
    /// Serve `/dev/zero` (a source of `memory_zero_size` zero bytes; ERET
    /// picks any part of it) and `/dev/null` (a sink that discards), to
    /// measure the network without disks as GridFTP users do. Off unless
    /// asked for: anyone who may log in can then make the server send.
    pub memory_paths: bool,
    /// Size of the virtual `/dev/zero`.
    pub memory_zero_size: u64,
    /// Staged data path: `off` (synchronous, the default), `auto` (a ring
    /// sized from the client's round-trip time), or a size such as `16M`.
    pub staging: Staging,
    /// MODE E file reads and writes with `O_DIRECT` (around the page cache)
    /// where the file system allows it; implies a staging ring (`auto`
    /// unless `staging` names a size), whose buffers are aligned for it.
    pub direct_io: bool,
    /// PEM certificate chain (leaf first) for `AUTH TLS` (RFC 4217). TLS is
    /// offered, and FEAT lists AUTH TLS, PBSZ and PROT, only with both
    /// `tls_cert` and `tls_key`.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// Refuse USER/PASS on a control connection that is not TLS, so no
    /// password crosses the network in clear.
    pub require_tls: bool,
    /// Refuse transfers whose data connections are not protected (PROT P).
    pub require_protected_data: bool,
    /// PEM file of CA certificates that client certificates must chain to;
    /// clients without a certificate may still log in with a password.
    pub tls_client_ca: Option<PathBuf>,
    /// PEM file of CA certificates that other servers' certificates must
    /// chain to, for third-party copies over QUIC (`DCAU S NAME`: the
    /// other server must hold a certificate for NAME).
    pub tls_peer_ca: Option<PathBuf>,
    /// Maps client-certificate subjects to local users, one
    /// `"<subject DN>" user[,user...]` per line (a grid-mapfile).
    pub cert_map: Option<PathBuf>,
    /// On SIGTERM: seconds that transfers in progress may take to finish
    /// (no new connections meanwhile) before the server exits.
    pub shutdown_grace_secs: u64,
    /// The largest file an upload may create, in bytes (ALLO, ESTO offsets
    /// and every byte written are bounded by it). Default 4 TiB.
    pub max_file_size: u64,
    /// Advertise Ferry-to-Ferry batches (`BATCH` in FEAT, docs/batch.md).
    /// Default on; off makes Ferry's client pipeline one command per file.
    pub batch: bool,
    /// How a `BSTO SYNC` batch's one durability pass is made (`syncfs`
    /// of the file system by default; docs/batch.md).
    pub batch_sync: ferry_io::root::BatchSyncMethod,
    /// The least time, in milliseconds, between two durability passes of
    /// one session's `BSTO SYNC` batches: a client that ends every line
    /// with a pass waits instead of making the server sync its file
    /// system over and over (passes of different sessions are folded
    /// anyway; docs/batch.md). Default 20.
    pub batch_sync_interval_ms: u64,
    /// Write a streamed upload line's files of 64 KiB or more with
    /// `O_DIRECT` on a disk file system over a short path, instead of
    /// through the page cache. Default off: sessions 24 and 25 measured the
    /// page cache 1.46 and 1.6 times as fast for the 256 KiB tree on this
    /// project's machine, where session 19 had found direct faster
    /// (docs/trees.md, "Session 25"); a device where direct wins can turn
    /// it on.
    pub stream_direct: bool,
    /// Seconds an abandoned partial upload is kept before it is removed
    /// (see `docs/partial-files.md`); 0 keeps them for ever. Default a week.
    pub partial_expiry_secs: u64,
    /// Checksums (CKSM, SITE PARTIAL) computed at once, server-wide; more
    /// wait for a free slot. Each reads a file as fast as the disk allows.
    pub max_checksums: usize,
    /// Data connections one transfer (one session) may have.
    pub max_data_connections_per_session: usize,
    /// Data connections the whole server may have.
    pub max_data_connections: usize,
    /// Most entries one MLSR (recursive listing) sends; past it the
    /// listing ends with an error reply (`mlsr.rs`).
    pub mlsr_max_entries: u64,
    /// Deepest directory level one MLSR descends to, below the one listed.
    pub mlsr_max_depth: u32,
    /// The data channels' transport until a client selects another (`TPRT`,
    /// `SITE SETNETSTACK`), as Globus's `-dc-default`: `tcp`.
    pub data_transport: String,
    /// Give a `data_transport` that is TLS itself (`quic`) to sessions that
    /// never selected a transport too. Off by default: they get TCP, which
    /// standard FTPS clients (curl, lftp) speak (docs/transports.md).
    pub data_transport_for_all: bool,
    /// How payload crosses between sockets and files (zero-copy or
    /// buffered): not a configuration item, set by `ferry serve` from
    /// `FERRY_DATA_PATH` for measurements (`docs/data-path.md`).
    #[serde(skip)]
    pub data_path: ferry_io::mode_e::DataPath,
    /// Striping front end (issue 20, `docs/striping.md`): the data nodes'
    /// addresses (`ferry serve --data-node`). Empty: not striped.
    pub stripe_nodes: Vec<SocketAddr>,
    /// The secret the front end and its data nodes share (a file only
    /// its owner can read).
    pub node_secret: Option<PathBuf>,
}

/// How MODE E transfers stage data between disk and network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Staging {
    #[default]
    Off,
    Auto,
    Bytes(u64),
}

impl std::str::FromStr for Staging {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" | "sync" | "none" => Ok(Staging::Off),
            "auto" => Ok(Staging::Auto),
            other => {
                let (num, mult) = match other.strip_suffix('m') {
                    Some(n) => (n, 1u64 << 20),
                    None => (other, 1),
                };
                num.parse::<u64>()
                    .map(|n| Staging::Bytes(n * mult))
                    .map_err(|_| format!("staging must be off, auto or a size like 16M, not {s:?}"))
            }
        }
    }
}

impl TryFrom<String> for Staging {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Staging> for String {
    fn from(s: Staging) -> String {
        match s {
            Staging::Off => "off".into(),
            Staging::Auto => "auto".into(),
            Staging::Bytes(n) if n % (1 << 20) == 0 => format!("{}M", n >> 20),
            Staging::Bytes(n) => n.to_string(),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            root: PathBuf::from("."),
            listen: SocketAddr::from(([127, 0, 0, 1], 2811)),
            users: None,
            anonymous: AnonymousSetting::Off,
            passive_ports: None,
            passive_address: None,
            max_sessions: 512,
            max_sessions_per_ip: 64,
            idle_timeout_secs: 300,
            login_timeout_secs: 60,
            data_timeout_secs: 60,
            max_login_attempts: 3,
            login_failure_delay_ms: 1000,
            login_lockout_failures: 20,
            login_lockout_secs: 300,
            allow_third_party: false,
            banner: None,
            max_transfer_rate: None,
            marker_interval_secs: 5,
            memory_paths: false,
            memory_zero_size: 64 << 30,
            staging: Staging::Off,
            direct_io: false,
            tls_cert: None,
            tls_key: None,
            require_tls: false,
            require_protected_data: false,
            tls_client_ca: None,
            tls_peer_ca: None,
            cert_map: None,
            shutdown_grace_secs: 60,
            max_file_size: ferry_proto::session::DEFAULT_MAX_FILE_SIZE,
            batch: true,
            batch_sync: ferry_io::root::BatchSyncMethod::default(),
            batch_sync_interval_ms: 20,
            stream_direct: false,
            partial_expiry_secs: 7 * 24 * 3600,
            max_checksums: 4,
            max_data_connections_per_session: 64,
            max_data_connections: 1024,
            mlsr_max_entries: 200_000,
            mlsr_max_depth: 64,
            data_transport: "tcp".to_string(),
            data_transport_for_all: false,
            data_path: ferry_io::mode_e::DataPath::ZeroCopy,
            stripe_nodes: Vec::new(),
            node_secret: None,
        }
    }
}

impl ServerConfig {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ConfigError::Read { path: path.display().to_string(), error })?;
        toml::from_str(&text).map_err(|error| ConfigError::Parse { path: path.display().to_string(), error })
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout_secs)
    }

    pub fn login_timeout(&self) -> Duration {
        Duration::from_secs(self.login_timeout_secs)
    }

    /// This server is a striping front end.
    pub fn striped(&self) -> bool {
        !self.stripe_nodes.is_empty()
    }

    pub fn data_timeout(&self) -> Duration {
        Duration::from_secs(self.data_timeout_secs.max(1))
    }

    pub fn partial_expiry(&self) -> Option<Duration> {
        (self.partial_expiry_secs > 0).then(|| Duration::from_secs(self.partial_expiry_secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_file_and_rejects_unknown_keys() {
        let c: ServerConfig = toml::from_str(
            r#"
            root = "/srv/data"
            listen = "0.0.0.0:2811"
            users = "/etc/ferry/users.toml"
            anonymous = "read"
            passive_ports = "50000-50100"
            max_sessions = 100
            "#,
        )
        .unwrap();
        assert_eq!(c.passive_ports, Some(PortRange { low: 50000, high: 50100 }));
        assert_eq!(c.anonymous, AnonymousSetting::Read);
        assert_eq!(c.idle_timeout_secs, 300);
        assert!(toml::from_str::<ServerConfig>("lsiten = \"x\"").is_err());
        assert!("80-90".parse::<PortRange>().is_err());
        let t: ServerConfig = toml::from_str(
            r#"
            tls_cert = "/etc/ferry/cert.pem"
            tls_key = "/etc/ferry/key.pem"
            require_tls = true
            require_protected_data = true
            tls_client_ca = "/etc/ferry/ca.pem"
            cert_map = "/etc/ferry/grid-mapfile"
            "#,
        )
        .unwrap();
        assert_eq!(t.tls_key.as_deref(), Some(Path::new("/etc/ferry/key.pem")));
        assert!(t.require_tls && t.require_protected_data && t.cert_map.is_some());
        assert!("2000-1999".parse::<PortRange>().is_err());
    }
}
