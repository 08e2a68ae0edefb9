//! The server side of one control connection, as a state machine.
//!
//! A [`Session`] takes parsed command lines and answers with an [`Action`]:
//! either a reply it can give by itself (sequence errors, TYPE, FEAT...) or a
//! request the I/O layer must carry out (check a password, make a directory,
//! open a passive listener, run a transfer). The driver performs the request
//! and hands the outcome back through the matching `*_result` method, which
//! updates the state and yields the reply. No sockets, files or clocks live
//! here, so every sequence can be tested by feeding lines (see the tests at
//! the bottom and `tests/session.rs`).
//!
//! Sequencing rules (RFC 959 §5.4, RFC 3659 §5.5):
//! * Before login only USER, PASS, QUIT, FEAT, HELP, SYST, NOOP, AUTH, PBSZ,
//!   PROT and OPTS are served; anything else is `530`.
//! * `PASS` must follow `USER` (`503`); `RNTO` must immediately follow a
//!   successful `RNFR` (`503`); the rename is forgotten by any other command.
//! * `REST` holds until the next transfer command consumes it.
//! * A stream-mode transfer needs a data-connection setup (PASV/EPSV/PORT/
//!   EPRT) first (`425`), and consumes it.
//!
//! Security (RFC 4217, RFC 2228): the session tracks the protection state
//! as plain data — whether the control connection is TLS (the driver says
//! so through [`Session::tls_started`]), whether PBSZ was given, the PROT
//! level, and the users a verified client certificate is mapped to. The
//! handshake itself, and the TLS on data connections, are the driver's.
//! * `AUTH TLS` is answered `234` through [`Action::StartTls`]; without a
//!   certificate `431`; twice, or after login, `503`.
//! * `PBSZ` needs TLS (`503`); `PROT` needs PBSZ (`503`); `PROT S|E` is
//!   `536`; an unknown level `504`; `PROT C` under `require_protected_data`
//!   is `534`, and so is `CCC` (the control connection stays protected).
//! * With `require_tls`, USER before AUTH TLS is `530`; with
//!   `require_protected_data`, a transfer under `PROT C` is `521`.

use crate::command::{
    Allo, Command, CommandError, Dcau, EpsvArg, Opts, ProfileRequest, ProtectionLevel, RestArg, SiteCommand,
    TransferMode, TransferType, TrevEvent,
};
use crate::facts::{format_time_val, parse_time_val, FileFacts};
use crate::host_port::format_host_port;
use crate::path::{PathError, VirtualPath};
use crate::reply::{Reply, ReplyCode};
use std::net::{IpAddr, SocketAddr};

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
        }
    }
}

/// The default bound on stored files: 4 TiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 4 << 40;

/// A login for the driver to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginRequest {
    /// Anonymous login is enabled; grant it with this access.
    Anonymous { access: Access, password: String },
    /// A named user: verify the password against the users file.
    Password { user: String, password: String },
    /// A user the verified TLS client certificate is mapped to (by the
    /// cert map): no password; the users file gives root and access.
    Certificate { user: String, subject: String },
}

/// Who the TLS client proved to be, as the driver found it after the
/// handshake on the control connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsIdentity {
    /// Subject DN of a client certificate that verified against the
    /// configured CAs (`/C=../O=../CN=..`).
    pub subject: Option<String>,
    /// Local users that subject is mapped to; empty when it is not mapped.
    pub users: Vec<String>,
}

/// What the driver grants after a successful login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub user: String,
    pub access: Access,
}

/// Why a file-system request failed, in the terms replies need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsError {
    NotFound,
    PermissionDenied,
    AlreadyExists,
    NotADirectory,
    IsADirectory,
    DirectoryNotEmpty,
    /// The path (or a symbolic link on it) leads outside the root.
    Escapes,
    /// A name the server will not create (e.g. its own partial-file names).
    InvalidName(String),
    NoSpace,
    /// A regular file with more than one hard link, which the server does
    /// not change in place: its other names may lie outside the root
    /// (`docs/security.md`, "Hard links").
    HardLinked,
    /// A FIFO, socket or device where a regular file is needed: reading one
    /// could block for ever (`docs/security.md`, "Special files").
    NotRegularFile,
    /// Another session is uploading to this name (`docs/partial-files.md`).
    UploadInProgress,
    /// The operation would make a file larger than `max_file_size`.
    TooLarge(u64),
    /// ABOR stopped the operation.
    Aborted,
    /// The request is understood but this server will not do it; the
    /// text says why (e.g. a group SITE CHGRP may not set).
    Refused(String),
    Other(String),
}

impl FsError {
    pub fn reply(&self, path: &VirtualPath) -> Reply {
        use FsError as E;
        let (code, text) = match self {
            E::NotFound => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: No such file or directory.")),
            E::PermissionDenied => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: Permission denied.")),
            E::AlreadyExists => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: File exists.")),
            E::NotADirectory => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: Not a directory.")),
            E::IsADirectory => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: Is a directory.")),
            E::DirectoryNotEmpty => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: Directory not empty.")),
            E::Escapes => {
                (ReplyCode::FILE_UNAVAILABLE, format!("{path}: Path leads outside the served directory; refused."))
            }
            E::InvalidName(why) => (ReplyCode::NAME_NOT_ALLOWED, format!("{path}: File name not allowed: {why}.")),
            E::NoSpace => (ReplyCode::EXCEEDED_STORAGE, format!("{path}: No space left on the server's disk.")),
            E::HardLinked => (
                ReplyCode::FILE_UNAVAILABLE,
                format!("{path}: File has other hard links; it is not modified in place (replace it with STOR)."),
            ),
            E::NotRegularFile => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: not a regular file; refused.")),
            //= RFC 959 §4.2: 450 "Requested file action not taken. File
            //= unavailable (e.g., file busy)."
            E::UploadInProgress => (
                ReplyCode::FILE_BUSY,
                format!("{path}: an upload to this name is in progress in another session; try again later."),
            ),
            E::TooLarge(max) => (
                ReplyCode::EXCEEDED_STORAGE,
                format!("{path}: beyond the largest file this server stores ({max} bytes)."),
            ),
            E::Aborted => (ReplyCode::TRANSFER_ABORTED, format!("{path}: aborted by ABOR.")),
            E::Refused(why) => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: {why}.")),
            E::Other(msg) => (ReplyCode::LOCAL_ERROR, format!("{path}: {msg}.")),
        };
        Reply::new(code, text)
    }
}

/// File-system work that needs no data connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    ChangeDir(VirtualPath),
    MakeDir(VirtualPath),
    RemoveDir(VirtualPath),
    Delete(VirtualPath),
    /// RNFR: check that the source exists.
    RenameFrom(VirtualPath),
    Rename {
        from: VirtualPath,
        to: VirtualPath,
    },
    /// CKSM: a checksum of `length` bytes from `offset` (to the end if None).
    Checksum {
        path: VirtualPath,
        algorithm: String,
        offset: u64,
        length: Option<u64>,
    },
    Size(VirtualPath),
    ModTime(VirtualPath),
    SetModTime {
        path: VirtualPath,
        unix_secs: i64,
    },
    /// `SITE UTIME`: as [`FileOp::SetModTime`], answered the Globus way.
    Utime {
        path: VirtualPath,
        unix_secs: i64,
    },
    /// `SITE CHGRP`: the driver decides which groups may be set
    /// (`docs/security.md`, "SITE CHGRP").
    Chgrp {
        path: VirtualPath,
        group: String,
    },
    /// MLST: facts of one entry.
    Facts(VirtualPath),
    /// STAT <path>: a LIST-style listing over the control connection.
    StatListing(VirtualPath),
    Chmod {
        path: VirtualPath,
        mode: u32,
    },
    /// SITE PARTIAL: what the server holds of an interrupted upload.
    Partial(VirtualPath),
}

/// What a partial upload holds (`SITE PARTIAL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialFacts {
    /// The size ALLO announced for it, if any.
    pub size: Option<u64>,
    /// Byte ranges that are on the server's disk (end-exclusive).
    pub ranges: crate::RangeSet,
    /// XXH128 of those ranges' bytes, concatenated in order (lowercase hex):
    /// a client compares it with its source before it trusts them.
    pub xxh128: String,
}

/// Successful outcome of a [`FileOp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileDone {
    Done,
    Size(u64),
    ModTime(i64),
    Facts(FileFacts),
    Listing(Vec<FileFacts>),
    /// Lowercase hex (ADLER32 and CRC32C as `%08x`, like Globus).
    Checksum(String),
    Partial(PartialFacts),
}

/// Checksum algorithms CKSM accepts, as FEAT lists them. XXH128 is the
/// fast one for Ferry-to-Ferry verification; the others are what Globus,
/// gfal2 and storage systems use.
pub const CHECKSUM_ALGORITHMS: &[&str] = &["ADLER32", "CRC32C", "MD5", "SHA1", "SHA256", "SHA512", "XXH128"];

/// How listings are formatted on the data connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListFormat {
    /// LIST: `ls -l` lines.
    Long,
    /// NLST: names only.
    Names,
    /// MLSD: RFC 3659 fact lines.
    Machine,
    /// MLSR (Globus): MLSD fact lines for a whole tree, each entry named
    /// by its path relative to the listed directory, that directory first
    /// as `Type=cdir` `.`, then breadth first as the Globus server lists.
    MachineRecursive,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferKind {
    Retrieve,
    Store,
    Append,
    List { format: ListFormat, show_hidden: bool },
}

impl TransferKind {
    /// True when the server sends on the data connection.
    pub fn server_sends(&self) -> bool {
        matches!(self, TransferKind::Retrieve | TransferKind::List { .. })
    }

    pub fn direction(&self) -> Direction {
        if self.server_sends() {
            Direction::Send
        } else {
            Direction::Receive
        }
    }
}

/// Which way data flows, seen from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Send,
    Receive,
}

/// The part of a file a transfer covers: ERET P (offset, length) or
/// ESTO A (offset). Block offsets, REST ranges and markers are relative to
/// `offset` (GFD.20 §"ERET"/§"ESTO").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub offset: u64,
    pub length: Option<u64>,
}

/// Data-channel parameters of one transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelPlan {
    /// Identifies the data-channel setup (PASV/PORT...) this transfer uses:
    /// MODE E connections cached under another id must be closed.
    pub generation: u64,
    /// MODE E connections cached by the previous transfer in the same
    /// direction on this setup may carry this one (`125` instead of `150`).
    pub reuse: bool,
    /// Connections the sending side opens (OPTS RETR Parallelism).
    pub parallelism: u32,
    /// TCP buffer size for data sockets (SBUF, SITE RETRBUFSIZE...).
    pub buffer_size: Option<u32>,
}

/// When to send markers during a transfer; `None` sends none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MarkerPlan {
    /// Seconds between `112` performance markers.
    pub perf_secs: Option<u32>,
    /// Seconds between `111` restart markers.
    pub restart_secs: Option<u32>,
}

/// How the data connection(s) for a transfer are obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataEndpoint {
    /// Accept on the listener the driver opened for the last PASV/EPSV/SPAS.
    Passive,
    /// Delayed passive (Globus `OPTS PASV AllowDelayed=1;`): open a listener
    /// now and announce it with [`Session::delayed_passive_reply`] before
    /// the 150.
    DelayedPassive(PassiveKind),
    /// Connect to the address given by PORT/EPRT/SPOR.
    Active(SocketAddr),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferRequest {
    pub kind: TransferKind,
    pub path: VirtualPath,
    pub restart: Option<RestArg>,
    pub ty: TransferType,
    pub mode: TransferMode,
    pub endpoint: DataEndpoint,
    pub channel: ChannelPlan,
    pub markers: MarkerPlan,
    /// ERET/ESTO window.
    pub window: Option<Window>,
    /// Size announced by ALLO, for preallocation.
    pub allocation: Option<u64>,
    /// Whether the user may write (shapes the MLSD `Perm` fact).
    pub writable: bool,
    /// `PROT P`: every data connection of this transfer is TLS, with the
    /// server as TLS server (RFC 4217 §7).
    pub protected: bool,
}

/// Why a transfer ended without success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferError {
    /// The file could not be opened or created (nothing was sent yet).
    File(FsError),
    /// The data connection could not be established.
    DataConnection(String),
    /// The data connection broke or timed out mid-transfer.
    ConnectionLost(String),
    /// ABOR stopped it.
    Aborted,
    /// Disk full while storing.
    NoSpace,
    /// Another local failure (read/write error).
    Local(String),
    /// The REST offset does not fit the file (RFC 3659 §5.5: 554).
    BadRestart(String),
}

/// What the driver reports when a transfer ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferOutcome {
    Complete { bytes: u64 },
    Failed(TransferError),
}

/// Which passive command asked for a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassiveKind {
    Pasv,
    Epsv,
    /// GridFTP striped passive; Ferry is one stripe.
    Spas,
}

/// The session's answer to a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this reply; nothing else to do.
    Reply(Reply),
    /// Send this reply, then close the control connection.
    Close(Reply),
    /// Check credentials, then call [`Session::login_result`].
    Login(LoginRequest),
    /// Do this, then call [`Session::file_result`].
    File(FileOp),
    /// Send this `234`, then run the TLS handshake on the control
    /// connection (RFC 4217 §4) and call [`Session::tls_started`]; if the
    /// handshake fails the connection cannot continue and is closed.
    StartTls(Reply),
    /// Open a passive listener, then call [`Session::passive_result`].
    Passive(PassiveKind),
    /// Run a transfer: open the data connection, call
    /// [`Session::transfer_started`], move the data, call
    /// [`Session::transfer_finished`].
    Transfer(TransferRequest),
    /// ABOR arrived while a transfer runs: stop it; its
    /// [`Session::transfer_finished`] then yields the 426/226 pair.
    AbortTransfer,
    /// ABOR arrived while a file operation runs: stop it if it can be
    /// stopped (a checksum); its [`Session::file_result`] and then
    /// [`Session::file_abort_reply`] answer.
    AbortFileOp,
    /// `SITE PROFILE`: the driver checks that the logged-in user
    /// ([`Session::user`]) may profile, then starts or stops the sampler
    /// and replies itself.
    Profile(ProfileRequest),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Login {
    /// No USER yet.
    Idle,
    /// USER given, waiting for PASS.
    NeedPass(String),
    /// PASS sent to the driver, waiting for its verdict.
    Checking(String),
    LoggedIn(Grant),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DataSetup {
    None,
    /// A listener is open (`delayed: false`), or will be opened at the
    /// next transfer command (`delayed: true`).
    Passive {
        delayed: bool,
        kind: PassiveKind,
    },
    Active(SocketAddr),
}

/// A request handed to the driver whose outcome shapes the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    None,
    File(FileOp),
    Passive(PassiveKind),
}

#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    peer: SocketAddr,
    login: Login,
    failed_logins: u32,
    bad_commands: u32,
    cwd: VirtualPath,
    ty: TransferType,
    mode: TransferMode,
    data: DataSetup,
    /// Bumped whenever the data-channel setup changes (PASV, PORT, MODE,
    /// DCAU, PROT): cached MODE E connections belong to one generation.
    generation: u64,
    /// Direction of the MODE E connections the last transfer left open.
    cached: Option<Direction>,
    /// OPTS PASV AllowDelayed=1 was accepted (cleared by PORT).
    allow_delayed: bool,
    parallelism: u32,
    buffer_size: Option<u32>,
    /// OPTS RETR markers=N: perf markers while sending.
    send_markers: Option<u32>,
    perf_secs: u32,
    restart_secs: u32,
    epsv_all: bool,
    rest: Option<RestArg>,
    allocation: Option<u64>,
    rename_from: Option<VirtualPath>,
    pending: Pending,
    transfer: Option<TransferKind>,
    abort_requested: bool,
    /// ABOR arrived while a file operation (a long CKSM) ran.
    file_abort_requested: bool,
    /// The control connection is TLS (AUTH TLS done).
    tls: bool,
    /// PBSZ was given after AUTH TLS.
    pbsz: bool,
    /// The PROT level for data connections.
    prot: ProtectionLevel,
    tls_identity: TlsIdentity,
    /// The login being checked is by client certificate (232, not 230).
    certificate_login: bool,
    /// Striping (issue 20): the layout from OPTS RETR and the SPOR list.
    stripe: crate::stripe::SessionStripes,
}

/// Most streams one transfer may use; beyond this parallel TCP brings
/// nothing but contention.
pub const MAX_PARALLELISM: u32 = 64;

/// Largest TCP buffer a client may ask for (SBUF and SITE ...BUFSIZE).
pub const MAX_BUFFER_SIZE: u64 = 256 << 20;

const TEXT_NOT_LOGGED_IN: &str = "Please log in with USER and PASS first.";

impl Session {
    pub fn new(config: SessionConfig, peer: SocketAddr) -> Self {
        let interval = config.marker_interval_secs;
        Self {
            config,
            peer,
            login: Login::Idle,
            failed_logins: 0,
            bad_commands: 0,
            cwd: VirtualPath::root(),
            ty: TransferType::Ascii,
            mode: TransferMode::Stream,
            data: DataSetup::None,
            generation: 0,
            cached: None,
            allow_delayed: false,
            parallelism: 1,
            buffer_size: None,
            send_markers: None,
            perf_secs: interval,
            restart_secs: interval,
            epsv_all: false,
            rest: None,
            allocation: None,
            rename_from: None,
            pending: Pending::None,
            transfer: None,
            abort_requested: false,
            file_abort_requested: false,
            tls: false,
            pbsz: false,
            prot: ProtectionLevel::Clear,
            tls_identity: TlsIdentity::default(),
            certificate_login: false,
            stripe: Default::default(),
        }
    }

    /// The 220 greeting sent when the connection opens.
    pub fn greeting(&self) -> Reply {
        Reply::new(ReplyCode::SERVICE_READY, self.config.banner.clone())
    }

    pub fn user(&self) -> Option<&Grant> {
        match &self.login {
            Login::LoggedIn(g) => Some(g),
            _ => None,
        }
    }

    pub fn cwd(&self) -> &VirtualPath {
        &self.cwd
    }

    pub fn transfer_type(&self) -> TransferType {
        self.ty
    }

    pub fn mode(&self) -> TransferMode {
        self.mode
    }

    /// The current data-channel generation: cached MODE E connections and
    /// listeners of an older generation are to be closed.
    pub fn data_generation(&self) -> u64 {
        self.generation
    }

    /// The TCP buffer size asked for with SBUF or SITE ...BUFSIZE.
    pub fn buffer_size(&self) -> Option<u32> {
        self.buffer_size
    }

    pub fn is_transferring(&self) -> bool {
        self.transfer.is_some()
    }

    /// Whether the control connection is protected by TLS.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The data protection level (PROT).
    pub fn protection(&self) -> ProtectionLevel {
        self.prot
    }

    /// The driver finished the TLS handshake that followed an
    /// [`Action::StartTls`]: from now on the control connection is
    /// protected and PBSZ/PROT are accepted.
    pub fn tls_started(&mut self, identity: TlsIdentity) {
        self.tls = true;
        self.tls_identity = identity;
    }

    fn writable(&self) -> bool {
        matches!(&self.login, Login::LoggedIn(g) if g.access == Access::ReadWrite)
    }

    fn reply(code: ReplyCode, text: impl Into<String>) -> Action {
        Action::Reply(Reply::new(code, text))
    }

    /// Handles one line from the control connection, already parsed.
    pub fn handle(&mut self, parsed: Result<Command, CommandError>) -> Action {
        let cmd = match parsed {
            Ok(cmd) => cmd,
            Err(e) => {
                self.bad_commands += 1;
                if self.bad_commands >= self.config.max_bad_commands {
                    return Action::Close(Reply::new(
                        ReplyCode::SERVICE_UNAVAILABLE,
                        "Too many unrecognised commands; closing the control connection.",
                    ));
                }
                // A bad line breaks a rename sequence like any other command.
                self.rename_from = None;
                return Action::Reply(e.reply());
            }
        };
        self.bad_commands = 0;
        if self.transfer.is_some() {
            return self.handle_during_transfer(cmd);
        }
        if let Pending::File(op) = &self.pending {
            // A file operation (a checksum of a large file) runs: the
            // control connection stays alive (NOOP, STAT) and ABOR stops it.
            // The driver holds other commands until it ends.
            return match cmd {
                Command::Abor => {
                    self.file_abort_requested = true;
                    Action::AbortFileOp
                }
                Command::Noop => Self::reply(ReplyCode::OK, "NOOP ok."),
                Command::Stat(None) => Self::reply(ReplyCode::SYSTEM_STATUS, format!("{} in progress.", op_verb(op))),
                other => Self::reply(
                    ReplyCode::BAD_SEQUENCE,
                    format!("{} cannot be served while {} is in progress.", other.verb(), op_verb(op)),
                ),
            };
        }
        if self.pending != Pending::None {
            // The driver must finish one request before feeding the next
            // command; reaching here is a driver bug, answered safely.
            return Self::reply(ReplyCode::BAD_SEQUENCE, "Previous command still in progress.");
        }
        // RFC 959 §4.1.3: RNTO must immediately follow RNFR, so any command
        // consumes the pending rename.
        let rename_from = self.rename_from.take();
        self.dispatch(cmd, rename_from)
    }

    fn handle_during_transfer(&mut self, cmd: Command) -> Action {
        match cmd {
            Command::Abor => {
                self.abort_requested = true;
                Action::AbortTransfer
            }
            Command::Stat(None) => Self::reply(ReplyCode::SYSTEM_STATUS, "Transfer in progress."),
            Command::Noop => Self::reply(ReplyCode::OK, "NOOP ok."),
            other => Self::reply(
                ReplyCode::BAD_SEQUENCE,
                format!("{} cannot be served while a transfer is in progress.", other.verb()),
            ),
        }
    }

    fn logged_in(&self) -> bool {
        matches!(self.login, Login::LoggedIn(_))
    }

    fn dispatch(&mut self, cmd: Command, rename_from: Option<VirtualPath>) -> Action {
        use Command as C;
        match cmd {
            // Served before login.
            C::User(name) => self.on_user(&name),
            C::Pass(pw) => self.on_pass(pw),
            C::Quit => Action::Close(Reply::new(ReplyCode::CLOSING_CONTROL, "Goodbye.")),
            C::Feat => Action::Reply(self.feat()),
            C::Help(_) => Action::Reply(help_reply(ReplyCode::HELP)),
            C::Syst => Self::reply(ReplyCode::SYSTEM_TYPE, "UNIX Type: L8"),
            C::Noop => Self::reply(ReplyCode::OK, "NOOP ok."),
            C::Auth(_) | C::Pbsz(_) | C::Prot(_) | C::Ccc => self.on_security(&cmd),
            C::Opts(Opts::Utf8(true)) => Self::reply(ReplyCode::OK, "UTF8 set to on."),
            C::Opts(Opts::Utf8(false)) => {
                Self::reply(ReplyCode::PARAMETER_NOT_IMPLEMENTED, "Ferry always uses UTF-8 paths.")
            }
            C::Acct(_) => Self::reply(ReplyCode::SUPERFLUOUS, "ACCT not needed."),
            _ if !self.logged_in() => Self::reply(ReplyCode::NOT_LOGGED_IN, TEXT_NOT_LOGGED_IN),

            // Navigation and file management.
            C::Cwd(p) => self.file_op(&p, false, FileOp::ChangeDir),
            C::Cdup => self.file_op("..", false, FileOp::ChangeDir),
            C::Pwd => {
                Self::reply(ReplyCode::PATH_CREATED, format!("{} is the current directory.", quote_path(&self.cwd)))
            }
            C::Mkd(p) => self.file_op(&p, true, FileOp::MakeDir),
            C::Rmd(p) => self.file_op(&p, true, FileOp::RemoveDir),
            C::Dele(p) => self.file_op(&p, true, FileOp::Delete),
            C::Rnfr(p) => self.file_op(&p, true, FileOp::RenameFrom),
            C::Rnto(p) => match rename_from {
                None => Self::reply(ReplyCode::BAD_SEQUENCE, "RNTO must immediately follow a successful RNFR."),
                Some(from) => self.file_op(&p, true, |to| FileOp::Rename { from, to }),
            },
            C::Size(p) => self.file_op(&p, false, FileOp::Size),
            C::Mdtm(p) => self.file_op(&p, false, FileOp::ModTime),
            C::Mfmt { time, path } => match parse_time_val(&time) {
                Some(unix_secs) => self.file_op(&path, true, |path| FileOp::SetModTime { path, unix_secs }),
                None => Self::reply(ReplyCode::PARAMETER_SYNTAX_ERROR, "MFMT: invalid time value."),
            },
            C::Mlst(p) => self.file_op(p.as_deref().unwrap_or("."), false, FileOp::Facts),
            C::Stat(None) => Action::Reply(self.status()),
            C::Stat(Some(arg)) => {
                let (_, p) = split_list_options(&arg);
                self.file_op(p.unwrap_or("."), false, FileOp::StatListing)
            }
            C::Site(s) => self.on_site(s),

            // Transfer parameters.
            C::Type(t) => {
                self.ty = t;
                let name = match t {
                    TransferType::Ascii => "A",
                    TransferType::Image => "I",
                };
                Self::reply(ReplyCode::OK, format!("Type set to {name}."))
            }
            C::Stru => Self::reply(ReplyCode::OK, "Structure set to F."),
            C::Mode(mode) => {
                if mode != self.mode {
                    // Cached MODE E connections do not survive a mode change.
                    self.new_generation();
                }
                self.mode = mode;
                let name = match mode {
                    TransferMode::Stream => "S",
                    TransferMode::ExtendedBlock => "E",
                };
                Self::reply(ReplyCode::OK, format!("Mode set to {name}."))
            }
            C::Port(addr) => self.on_active(SocketAddr::V4(addr)),
            C::Eprt(addr) => self.on_active(addr),
            C::Spor(addrs) => match addrs.as_slice() {
                [one] => self.on_active(SocketAddr::V4(*one)),
                _ if self.config.striped => self.on_spor(addrs.clone()),
                _ => Self::reply(
                    ReplyCode::PARAMETER_SYNTAX_ERROR,
                    "SPOR with several addresses (a striped receiver) is not supported; \
                     Ferry is a single stripe, send one address.",
                ),
            },
            C::Pasv => self.on_passive(PassiveKind::Pasv),
            C::Spas => self.on_passive(PassiveKind::Spas),
            C::Epsv(EpsvArg::All) => {
                self.epsv_all = true;
                Self::reply(ReplyCode::OK, "EPSV ALL ok.")
            }
            C::Epsv(EpsvArg::Protocol(p)) if (p == 1) != self.peer.is_ipv4() => Self::reply(
                ReplyCode::PARAMETER_NOT_IMPLEMENTED,
                format!("Network protocol not supported, use ({})", if self.peer.is_ipv4() { 1 } else { 2 }),
            ),
            C::Epsv(_) => self.on_passive(PassiveKind::Epsv),
            C::Rest(arg) => {
                self.rest = Some(arg);
                Self::reply(
                    ReplyCode::PENDING_FURTHER_INFO,
                    "Restart Marker OK. Send STORE or RETR to initiate transfer.",
                )
            }
            C::Allo(Allo { size, .. }) if size > self.config.max_file_size => Self::reply(
                ReplyCode::EXCEEDED_STORAGE,
                format!(
                    "ALLO {size}: beyond the largest file this server stores ({} bytes).",
                    self.config.max_file_size
                ),
            ),
            C::Allo(Allo { size, .. }) => {
                self.allocation = Some(size);
                Self::reply(ReplyCode::OK, "ALLO command successful.")
            }
            C::Opts(o) => self.on_opts(o),
            C::Sbuf(n) => match self.set_buffer(n) {
                Ok(()) => Self::reply(ReplyCode::OK, "SBUF Command Successful."),
                Err(r) => Action::Reply(r),
            },
            C::Dcau(Dcau::None) => {
                self.new_generation();
                Self::reply(ReplyCode::OK, "DCAU N: data channels are not authenticated.")
            }
            C::Dcau(_) => Self::reply(
                ReplyCode::PARAMETER_NOT_IMPLEMENTED,
                "DCAU A and S need Globus GSI credentials, which Ferry does not use; only \
                 DCAU N is supported (protect data channels with AUTH TLS and PROT P instead).",
            ),
            C::Trev { event, seconds } => {
                match event {
                    TrevEvent::Perf => self.perf_secs = seconds,
                    TrevEvent::Restart => self.restart_secs = seconds,
                }
                Self::reply(ReplyCode::OK, "Command Successful.")
            }
            C::Cksm { algorithm, offset, length, path } => {
                if !CHECKSUM_ALGORITHMS.contains(&algorithm.as_str()) {
                    return Self::reply(
                        ReplyCode::PARAMETER_NOT_IMPLEMENTED,
                        format!(
                            "Unknown checksum algorithm {algorithm}; this server supports {}.",
                            CHECKSUM_ALGORITHMS.join(", ")
                        ),
                    );
                }
                self.file_op(&path, false, |path| FileOp::Checksum { path, algorithm, offset, length })
            }

            // Transfers.
            C::Abor => Self::reply(ReplyCode::ABORT_OK, "No transfer to abort."),
            C::Retr(p) => self.transfer(&p, TransferKind::Retrieve, None),
            C::Stor(p) => self.transfer(&p, TransferKind::Store, None),
            C::Appe(p) => self.transfer(&p, TransferKind::Append, None),
            C::Eret { offset, length, path } => {
                self.transfer(&path, TransferKind::Retrieve, Some(Window { offset, length: Some(length) }))
            }
            C::Esto { offset, .. } if offset >= self.config.max_file_size => Self::reply(
                ReplyCode::EXCEEDED_STORAGE,
                format!(
                    "ESTO at offset {offset}: beyond the largest file this server stores ({} bytes).",
                    self.config.max_file_size
                ),
            ),
            C::Esto { offset, path } => {
                self.transfer(&path, TransferKind::Store, Some(Window { offset, length: None }))
            }
            C::List(arg) => self.list(arg.as_deref(), ListFormat::Long),
            C::Nlst(arg) => self.list(arg.as_deref(), ListFormat::Names),
            C::Mlsd(arg) => self.list(arg.as_deref(), ListFormat::Machine),
            C::Mlsr(arg) => self.list(arg.as_deref(), ListFormat::MachineRecursive),

            C::Stou | C::Smnt(_) | C::Rein => {
                Self::reply(ReplyCode::NOT_IMPLEMENTED, "Command not implemented by this server.")
            }
        }
    }

    /// Starts a new data-channel generation: cached MODE E connections of
    /// the previous one are to be closed by the driver.
    fn new_generation(&mut self) {
        self.generation += 1;
        self.cached = None;
    }

    /// Records a TCP buffer size; the refusal is a reply.
    fn set_buffer(&mut self, n: u64) -> Result<(), Reply> {
        if n == 0 || n > MAX_BUFFER_SIZE {
            return Err(Reply::new(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                format!("Buffer size must be between 1 and {MAX_BUFFER_SIZE} bytes."),
            ));
        }
        self.buffer_size = Some(n as u32);
        Ok(())
    }

    fn on_passive(&mut self, kind: PassiveKind) -> Action {
        if self.epsv_all && kind != PassiveKind::Epsv {
            return Self::reply(ReplyCode::BAD_SEQUENCE, "Only EPSV is allowed after EPSV ALL.");
        }
        if self.peer.is_ipv6() && kind != PassiveKind::Epsv {
            return Self::reply(ReplyCode::CANT_OPEN_DATA, "PASV cannot describe an IPv6 address; use EPSV.");
        }
        self.new_generation();
        if self.allow_delayed {
            // The listener is opened when the transfer command names the
            // file (Globus delayed passive, used by gfal2).
            self.data = DataSetup::Passive { delayed: true, kind };
            return Self::reply(ReplyCode::OK, "Passive delayed.");
        }
        self.pending = Pending::Passive(kind);
        Action::Passive(kind)
    }

    fn on_user(&mut self, name: &str) -> Action {
        if self.logged_in() {
            return Self::reply(ReplyCode::NOT_LOGGED_IN, "Already logged in; cannot change to another user.");
        }
        if self.config.require_tls && !self.tls {
            self.login = Login::Idle;
            return Self::reply(
                ReplyCode::NOT_LOGGED_IN,
                "This server requires TLS: send AUTH TLS before USER (use ftps:// or your client's TLS option).",
            );
        }
        if let Some(subject) = self.tls_identity.subject.clone().filter(|_| !self.tls_identity.users.is_empty()) {
            // RFC 2228 §3: a user authorized by the security exchange is
            // logged in by USER alone (232). A certificate speaks for the
            // users it is mapped to and nobody else.
            if self.tls_identity.users.iter().any(|u| u == name) {
                self.login = Login::Checking(name.to_string());
                self.certificate_login = true;
                return Action::Login(LoginRequest::Certificate { user: name.to_string(), subject });
            }
            let mapped = self.tls_identity.users.join(", ");
            return self.login_failed(&format!(
                "Your client certificate ({subject}) is mapped to {mapped}, not to {name}; log in as {mapped}."
            ));
        }
        self.login = Login::NeedPass(name.to_string());
        if is_anonymous_name(name) {
            Self::reply(ReplyCode::NEED_PASSWORD, "Anonymous login: send any password.")
        } else {
            Self::reply(ReplyCode::NEED_PASSWORD, format!("Password required for {name}."))
        }
    }

    fn on_pass(&mut self, password: String) -> Action {
        let user = match std::mem::replace(&mut self.login, Login::Idle) {
            Login::NeedPass(u) => u,
            Login::LoggedIn(g) => {
                self.login = Login::LoggedIn(g);
                return Self::reply(ReplyCode::SUPERFLUOUS, "Already logged in.");
            }
            other => {
                self.login = other;
                return Self::reply(ReplyCode::BAD_SEQUENCE, "Send USER before PASS.");
            }
        };
        if is_anonymous_name(&user) {
            let access = match self.config.anonymous {
                AnonymousAccess::Off => {
                    return self.login_failed("Anonymous login is not allowed on this server.");
                }
                AnonymousAccess::Read => Access::ReadOnly,
                AnonymousAccess::Write => Access::ReadWrite,
            };
            self.login = Login::Checking(user);
            return Action::Login(LoginRequest::Anonymous { access, password });
        }
        self.login = Login::Checking(user.clone());
        Action::Login(LoginRequest::Password { user, password })
    }

    /// The driver's verdict on an [`Action::Login`].
    pub fn login_result(&mut self, result: Option<Grant>) -> Action {
        if !matches!(self.login, Login::Checking(_)) {
            return Self::reply(ReplyCode::BAD_SEQUENCE, "No login in progress.");
        }
        match result {
            Some(grant) => {
                let by_cert = std::mem::take(&mut self.certificate_login);
                let how = if by_cert { ", authorized by TLS client certificate" } else { "" };
                let text = match grant.access {
                    Access::ReadOnly => format!("User {} logged in (read-only){how}.", grant.user),
                    Access::ReadWrite => format!("User {} logged in{how}.", grant.user),
                };
                self.login = Login::LoggedIn(grant);
                self.failed_logins = 0;
                let code = if by_cert { ReplyCode::LOGGED_IN_SECURE } else { ReplyCode::LOGGED_IN };
                Self::reply(code, text)
            }
            None => {
                self.login = Login::Idle;
                self.certificate_login = false;
                self.login_failed("Login incorrect.")
            }
        }
    }

    fn login_failed(&mut self, text: &str) -> Action {
        self.login = Login::Idle;
        self.failed_logins += 1;
        if self.failed_logins >= self.config.max_login_attempts {
            return Action::Close(Reply::new(
                ReplyCode::SERVICE_UNAVAILABLE,
                format!("{text} Too many failed logins; closing the connection."),
            ));
        }
        Self::reply(ReplyCode::NOT_LOGGED_IN, text)
    }

    fn on_security(&mut self, cmd: &Command) -> Action {
        use ProtectionLevel as P;
        match cmd {
            //= RFC 2228 §3: 431 "Need some unavailable resource to process
            //= security" — here, a certificate.
            Command::Auth(_) if !self.config.tls_available => Self::reply(
                ReplyCode::SECURITY_RESOURCE_UNAVAILABLE,
                "AUTH TLS is not available: this server has no TLS certificate configured.",
            ),
            Command::Auth(mech) if mech != "TLS" && mech != "TLS-C" && mech != "SSL" => {
                Self::reply(ReplyCode::PARAMETER_NOT_IMPLEMENTED, "Security mechanism not understood; use AUTH TLS.")
            }
            Command::Auth(_) if self.tls => {
                Self::reply(ReplyCode::BAD_SEQUENCE, "The control connection is already protected by TLS.")
            }
            Command::Auth(_) if self.logged_in() => {
                Self::reply(ReplyCode::BAD_SEQUENCE, "AUTH TLS must come before login: reconnect and send it first.")
            }
            Command::Auth(_) => {
                // A half-finished USER does not carry over into TLS.
                self.login = Login::Idle;
                Action::StartTls(Reply::new(ReplyCode::AUTH_OK, "AUTH TLS successful; start the TLS handshake."))
            }
            //= RFC 4217 §12.3: a server may refuse CCC with 534.
            Command::Ccc if self.tls => Self::reply(
                ReplyCode::POLICY_DENIED,
                "CCC refused: the control connection stays protected for the whole session.",
            ),
            Command::Ccc => Self::reply(ReplyCode::NOT_PROTECTED, "CCC: the control connection is not protected."),
            //= RFC 4217 §8: PBSZ follows a successful AUTH; for TLS the
            //= only size is 0, and a server answers a larger one with PBSZ=0.
            Command::Pbsz(_) if !self.tls => {
                Self::reply(ReplyCode::BAD_SEQUENCE, "PBSZ needs a protected control connection: send AUTH TLS first.")
            }
            Command::Pbsz(_) => {
                self.pbsz = true;
                Self::reply(ReplyCode::OK, "PBSZ=0")
            }
            Command::Prot(P::Clear) if !self.tls && !self.config.tls_available => {
                Self::reply(ReplyCode::OK, "Protection level set to Clear.")
            }
            Command::Prot(_) if !self.tls => {
                Self::reply(ReplyCode::BAD_SEQUENCE, "PROT needs AUTH TLS and PBSZ 0 first.")
            }
            //= RFC 4217 §9: PROT without a preceding PBSZ is 503.
            Command::Prot(_) if !self.pbsz => Self::reply(ReplyCode::BAD_SEQUENCE, "Send PBSZ 0 before PROT."),
            Command::Prot(P::Safe | P::Confidential) => Self::reply(
                ReplyCode::PROT_NOT_SUPPORTED,
                "PROT S and PROT E are not supported with TLS; use PROT P (private) or PROT C (clear).",
            ),
            Command::Prot(P::Clear) if self.config.require_protected_data => Self::reply(
                ReplyCode::POLICY_DENIED,
                "PROT C refused: this server requires protected data connections (PROT P).",
            ),
            Command::Prot(level) => {
                if *level != self.prot {
                    // Cached MODE E connections have the old protection.
                    self.new_generation();
                }
                self.prot = *level;
                let name = if *level == P::Private { "Private" } else { "Clear" };
                Self::reply(ReplyCode::OK, format!("Protection level set to {name}."))
            }
            _ => Self::reply(ReplyCode::BAD_SEQUENCE, "Unexpected security command."),
        }
    }

    fn on_site(&mut self, site: SiteCommand) -> Action {
        match site {
            SiteCommand::Help => Action::Reply(help_reply(ReplyCode::HELP)),
            SiteCommand::ClientInfo(_) => Self::reply(ReplyCode::FILE_ACTION_OK, "OK."),
            SiteCommand::Chmod { mode, path } => self.file_op(&path, true, |path| FileOp::Chmod { path, mode }),
            // Globus keeps separate send and receive sizes and uses the
            // larger; one size for both directions comes to the same.
            SiteCommand::RetrBufSize(n) | SiteCommand::StorBufSize(n) | SiteCommand::BufSize(n) => {
                match self.set_buffer(n) {
                    Ok(()) => Self::reply(ReplyCode::OK, "Site Command Successful."),
                    Err(r) => Action::Reply(r),
                }
            }
            SiteCommand::Profile(req) => Action::Profile(req),
            SiteCommand::Partial(path) => self.file_op(&path, false, FileOp::Partial),
            SiteCommand::SetDiskStack(stack) => {
                // Globus XIO drivers are named in a comma-separated list,
                // each optionally with ":options". Ferry's disk side is one
                // driver, plain POSIX files: `file` is what it has.
                let drivers: Vec<&str> = stack.split(',').map(|d| d.split(':').next().unwrap_or("").trim()).collect();
                if drivers == ["file"] {
                    Self::reply(ReplyCode::FILE_ACTION_OK, "Disk stack set to file.")
                } else {
                    Self::reply(
                        ReplyCode::PARAMETER_NOT_IMPLEMENTED,
                        format!("SITE SETDISKSTACK {stack}: this server's only disk stack is 'file'."),
                    )
                }
            }
            SiteCommand::Utime { time, path } => match parse_time_val(&time) {
                Some(unix_secs) => self.file_op(&path, true, |path| FileOp::Utime { path, unix_secs }),
                None => Self::reply(ReplyCode::PARAMETER_SYNTAX_ERROR, "SITE UTIME: invalid time value."),
            },
            SiteCommand::Chgrp { group, path } => self.file_op(&path, true, |path| FileOp::Chgrp { path, group }),
            SiteCommand::Other { name, .. } => {
                Self::reply(ReplyCode::SYNTAX_ERROR, format!("Unknown SITE command {name}; see SITE HELP."))
            }
        }
    }

    fn on_opts(&mut self, opts: Opts) -> Action {
        match opts {
            Opts::Mlst(_) => Self::reply(ReplyCode::OK, format!("MLST OPTS {MLST_FACTS_ON}")),
            Opts::Other { command, .. } => Self::reply(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                format!("OPTS {command}: no options are defined for this command."),
            ),
            Opts::Retr(items) => self.on_opts_retr(&items),
            Opts::Pasv(items) => {
                for (k, v) in &items {
                    match (k.to_ascii_lowercase().as_str(), v.as_str()) {
                        ("allowdelayed", "1") => self.allow_delayed = true,
                        ("allowdelayed", "0") => self.allow_delayed = false,
                        _ => {
                            return Self::reply(
                                ReplyCode::PARAMETER_SYNTAX_ERROR,
                                format!("OPTS PASV: unknown option {k}={v}."),
                            )
                        }
                    }
                }
                Self::reply(ReplyCode::OK, "OPTS Command Successful.")
            }
            Opts::Utf8(_) => Self::reply(ReplyCode::OK, "UTF8 set to on."),
        }
    }

    /// `OPTS RETR Parallelism=n,min,max;markers=s;StripeLayout=...;`
    /// (GFD.20; Globus uses only the first parallelism number).
    fn on_opts_retr(&mut self, items: &[(String, String)]) -> Action {
        let mut parallelism = self.parallelism;
        let mut markers = self.send_markers;
        for (k, v) in items {
            match k.to_ascii_lowercase().as_str() {
                "parallelism" => {
                    let first = v.split(',').next().unwrap_or("").trim();
                    match first.parse::<u32>() {
                        Ok(n) if (1..=MAX_PARALLELISM).contains(&n) => parallelism = n,
                        _ => {
                            return Self::reply(
                                ReplyCode::PARAMETER_SYNTAX_ERROR,
                                format!("OPTS RETR: Parallelism must be 1 to {MAX_PARALLELISM}."),
                            )
                        }
                    }
                }
                "markers" => match v.trim().parse::<u32>() {
                    Ok(0) => markers = None,
                    Ok(n) => markers = Some(n),
                    Err(_) => {
                        return Self::reply(ReplyCode::PARAMETER_SYNTAX_ERROR, "OPTS RETR: markers takes seconds.")
                    }
                },
                "stripelayout" | "blocksize" => {
                    if let Err(e) = self.stripe.options.apply(k, v) {
                        return Self::reply(ReplyCode::PARAMETER_SYNTAX_ERROR, format!("OPTS RETR: {e}."));
                    }
                }
                _ => return Self::reply(ReplyCode::PARAMETER_SYNTAX_ERROR, format!("OPTS RETR: unknown option {k}.")),
            }
        }
        self.parallelism = parallelism;
        self.send_markers = markers;
        Self::reply(ReplyCode::OK, "OPTS Command Successful.")
    }

    fn on_active(&mut self, addr: SocketAddr) -> Action {
        if self.epsv_all {
            return Self::reply(ReplyCode::BAD_SEQUENCE, "PORT and EPRT are not allowed after EPSV ALL.");
        }
        if addr.port() < 1024 {
            return Self::reply(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                "Refusing a data connection to a privileged port (below 1024).",
            );
        }
        if self.config.port_policy == PortPolicy::PeerOnly && !same_host(addr.ip(), self.peer.ip()) {
            return Self::reply(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                "Data connections may only go to the client's own address (FTP bounce \
                 protection; the administrator can allow third-party copies with allow_third_party).",
            );
        }
        self.new_generation();
        // A PORT ends delayed passive mode, as in Globus.
        self.allow_delayed = false;
        self.data = DataSetup::Active(addr);
        Self::reply(ReplyCode::OK, "PORT Command successful.")
    }

    /// Resolves a path argument and hands the operation to the driver.
    fn file_op(&mut self, arg: &str, needs_write: bool, make: impl FnOnce(VirtualPath) -> FileOp) -> Action {
        if needs_write && !self.writable() {
            return Self::reply(ReplyCode::FILE_UNAVAILABLE, "Permission denied: this account is read-only.");
        }
        let path = match self.cwd.resolve(arg) {
            Ok(p) => p,
            Err(e) => return path_error_reply(&e),
        };
        let op = make(path);
        self.pending = Pending::File(op.clone());
        Action::File(op)
    }

    /// After [`file_result`](Self::file_result): the reply to an ABOR that
    /// arrived while the operation ran (RFC 959 §4.1.3: `226` once the
    /// aborted command has been answered).
    pub fn file_abort_reply(&mut self) -> Option<Reply> {
        std::mem::take(&mut self.file_abort_requested)
            .then(|| Reply::new(ReplyCode::CLOSING_DATA, "ABOR command successful."))
    }

    /// Whether ABOR asked the running file operation to stop.
    pub fn file_abort_requested(&self) -> bool {
        self.file_abort_requested
    }

    /// The driver's outcome of an [`Action::File`].
    pub fn file_result(&mut self, result: Result<FileDone, FsError>) -> Reply {
        let Pending::File(op) = std::mem::replace(&mut self.pending, Pending::None) else {
            return Reply::new(ReplyCode::BAD_SEQUENCE, "No file operation in progress.");
        };
        let done = match result {
            Ok(done) => done,
            Err(e) => return e.reply(op_path(&op)),
        };
        let ok = |text: String| Reply::new(ReplyCode::FILE_ACTION_OK, text);
        match (op, done) {
            (FileOp::ChangeDir(p), _) => {
                let text = format!("Directory changed to {p}.");
                self.cwd = p;
                ok(text)
            }
            (FileOp::MakeDir(p), _) => Reply::new(ReplyCode::PATH_CREATED, format!("{} created.", quote_path(&p))),
            (FileOp::RemoveDir(p), _) => ok(format!("{p}: directory removed.")),
            (FileOp::Delete(p), _) => ok(format!("{p}: file deleted.")),
            (FileOp::RenameFrom(p), _) => {
                self.rename_from = Some(p);
                Reply::new(ReplyCode::PENDING_FURTHER_INFO, "File exists, ready for destination name.")
            }
            (FileOp::Rename { from, to }, _) => ok(format!("Renamed {from} to {to}.")),
            (FileOp::Size(_), FileDone::Size(n)) => Reply::new(ReplyCode::FILE_STATUS, n.to_string()),
            (FileOp::ModTime(_), FileDone::ModTime(t)) => Reply::new(ReplyCode::FILE_STATUS, format_time_val(t)),
            // The time the file system took, which may differ from the
            // one asked for (a file system without times before 1970).
            (FileOp::SetModTime { path, .. }, FileDone::ModTime(set)) => {
                Reply::new(ReplyCode::FILE_STATUS, format!("Modify={}; {path}", format_time_val(set)))
            }
            (FileOp::Facts(p), FileDone::Facts(f)) => Reply::multiline(
                ReplyCode::FILE_ACTION_OK,
                format!("Listing {p}"),
                [format!(" {}", f.mlsx_line(self.writable(), p.as_str()))],
                "End.",
            ),
            (FileOp::StatListing(p), FileDone::Listing(entries)) => {
                // The driver supplies its clock through the facts' times; a
                // listing over the control channel uses the newest as "now".
                let now = entries.iter().map(|e| e.modified).max().unwrap_or(0);
                Reply::multiline(
                    ReplyCode::FILE_STATUS,
                    format!("Status of {p}:"),
                    entries.iter().map(|e| e.list_line(now)),
                    "End of status.",
                )
            }
            (FileOp::Checksum { .. }, FileDone::Checksum(hex)) => Reply::new(ReplyCode::FILE_STATUS, hex),
            (FileOp::Chmod { .. }, _) => Reply::new(ReplyCode::OK, "SITE CHMOD command successful."),
            (FileOp::Partial(p), FileDone::Partial(f)) => {
                let size = f.size.map(|s| format!("Size={s};")).unwrap_or_default();
                Reply::new(ReplyCode::FILE_STATUS, format!("{size}Ranges={};XXH128={}; {p}", f.ranges, f.xxh128))
            }
            // Globus answers its SITE commands with 250.
            (FileOp::Utime { .. }, _) => ok("SITE UTIME command successful.".into()),
            (FileOp::Chgrp { group, .. }, _) => ok(format!("SITE CHGRP command successful: group set to {group}.")),
            (op, other) => {
                Reply::new(ReplyCode::LOCAL_ERROR, format!("Internal error: {op:?} answered with {other:?}."))
            }
        }
    }

    /// The driver's outcome of an [`Action::Passive`]: the address the
    /// listener is bound to, or why none could be opened.
    pub fn passive_result(&mut self, result: Result<SocketAddr, String>) -> Reply {
        let Pending::Passive(kind) = std::mem::replace(&mut self.pending, Pending::None) else {
            return Reply::new(ReplyCode::BAD_SEQUENCE, "No passive request in progress.");
        };
        match result.and_then(|addr| passive_reply(kind, addr, false)) {
            Ok(reply) => {
                self.data = DataSetup::Passive { delayed: false, kind };
                reply
            }
            Err(why) => {
                self.data = DataSetup::None;
                Reply::new(ReplyCode::CANT_OPEN_DATA, format!("Cannot open a passive data port: {why}."))
            }
        }
    }

    /// The `127`/`129` reply that announces a delayed-passive listener,
    /// sent before the transfer's 150 (Globus delayed passive).
    pub fn delayed_passive_reply(&mut self, kind: PassiveKind, addr: SocketAddr) -> Reply {
        // From now on the listener exists; later MODE E transfers reuse it.
        self.data = DataSetup::Passive { delayed: false, kind };
        passive_reply(kind, addr, true).unwrap_or_else(|why| Reply::new(ReplyCode::CANT_OPEN_DATA, why))
    }

    fn list(&mut self, arg: Option<&str>, format: ListFormat) -> Action {
        let (options, path) = match arg {
            Some(a) => split_list_options(a),
            None => (String::new(), None),
        };
        let show_hidden = options.contains('a') || format == ListFormat::Machine;
        self.transfer(path.unwrap_or("."), TransferKind::List { format, show_hidden }, None)
    }

    fn transfer(&mut self, arg: &str, kind: TransferKind, window: Option<Window>) -> Action {
        let needs_write = matches!(kind, TransferKind::Store | TransferKind::Append);
        if needs_write && !self.writable() {
            return Self::reply(ReplyCode::FILE_UNAVAILABLE, "Permission denied: this account is read-only.");
        }
        if self.config.require_protected_data && self.prot != ProtectionLevel::Private {
            //= RFC 4217 §9: a server that does not accept clear data
            //= connections refuses the transfer with 521.
            return Self::reply(
                ReplyCode::PROT_REFUSED,
                "Data connections must be protected on this server: send PBSZ 0 and PROT P first.",
            );
        }
        let path = match self.cwd.resolve(arg) {
            Ok(p) => p,
            Err(e) => return path_error_reply(&e),
        };
        let direction = kind.direction();
        let extended = self.mode == TransferMode::ExtendedBlock;
        let endpoint = match (&self.data, extended) {
            (DataSetup::None, _) => {
                return Self::reply(ReplyCode::CANT_OPEN_DATA, "Use PORT, EPRT, PASV or EPSV first.");
            }
            // GFD.20: in extended block mode the sending side opens the
            // data connections, so it must know where to (PORT), and the
            // receiver must be listening (PASV).
            (DataSetup::Passive { .. }, true) if direction == Direction::Send => {
                return Self::reply(
                    ReplyCode::BAD_SEQUENCE,
                    "In MODE E the sender opens the data connections: send PORT (or EPRT/SPOR) \
                     before RETR, LIST or MLSD.",
                )
            }
            (DataSetup::Active(_), true) if direction == Direction::Receive => {
                return Self::reply(
                    ReplyCode::BAD_SEQUENCE,
                    "In MODE E the sender opens the data connections: send PASV (or EPSV/SPAS) \
                     before STOR, APPE or ESTO.",
                )
            }
            (DataSetup::Passive { delayed: true, kind }, _) => DataEndpoint::DelayedPassive(*kind),
            (DataSetup::Passive { delayed: false, .. }, _) => DataEndpoint::Passive,
            (DataSetup::Active(a), _) => DataEndpoint::Active(*a),
        };
        if !extended {
            // Stream mode: the connection closes with the file, so every
            // transfer needs a new PASV or PORT.
            self.data = DataSetup::None;
        }
        let mut restart = match kind {
            TransferKind::Retrieve | TransferKind::Store => self.rest.take(),
            _ => None,
        };
        self.rest = None;
        if !extended {
            // In stream mode a restart is an offset; a range list that is
            // one prefix means the same (what REST 0-N says in MODE E).
            if let Some(RestArg::Ranges(r)) = &restart {
                match r.ranges() {
                    [] => restart = None,
                    [only] if only.start == 0 => restart = Some(RestArg::Offset(only.end)),
                    _ => {
                        return Self::reply(
                            ReplyCode::INVALID_RESTART,
                            "In stream mode REST takes a single offset; byte-range restarts need MODE E.",
                        )
                    }
                }
            }
        }
        let is_data = matches!(kind, TransferKind::Retrieve | TransferKind::Store);
        let markers = match (direction, extended && is_data) {
            (Direction::Receive, true) => MarkerPlan {
                perf_secs: (self.perf_secs > 0).then_some(self.perf_secs),
                restart_secs: (self.restart_secs > 0).then_some(self.restart_secs),
            },
            (Direction::Send, _) if is_data => MarkerPlan { perf_secs: self.send_markers, restart_secs: None },
            _ => MarkerPlan::default(),
        };
        let req = TransferRequest {
            kind: kind.clone(),
            path,
            restart,
            ty: if matches!(kind, TransferKind::List { .. }) { TransferType::Ascii } else { self.ty },
            mode: self.mode,
            endpoint,
            channel: ChannelPlan {
                generation: self.generation,
                reuse: extended && self.cached == Some(direction),
                parallelism: self.parallelism,
                buffer_size: self.buffer_size,
            },
            markers,
            window,
            allocation: self.allocation.take(),
            writable: self.writable(),
            protected: self.prot == ProtectionLevel::Private,
        };
        // The channels are in use; they are cached again only if this
        // transfer ends cleanly.
        self.cached = None;
        self.transfer = Some(kind);
        self.abort_requested = false;
        Action::Transfer(req)
    }

    /// The preliminary reply once the data connection is up (RFC 959 §4.2:
    /// 150 when opening it, 125 when it was already open).
    pub fn transfer_started(&mut self, what: &str, size: Option<u64>, reused: bool) -> Reply {
        let mode = match self.ty {
            TransferType::Ascii => "ASCII",
            TransferType::Image => "BINARY",
        };
        let size = size.map(|s| format!(" ({s} bytes)")).unwrap_or_default();
        if reused {
            Reply::new(
                ReplyCode::DATA_CONNECTION_ALREADY_OPEN,
                format!("Reusing existing data connection; transfer of {what}{size} starting."),
            )
        } else {
            Reply::new(ReplyCode::FILE_STATUS_OK, format!("Opening {mode} mode data connection for {what}{size}."))
        }
    }

    /// The final replies of a transfer: `226`, an error, or after ABOR the
    /// `426` for the transfer followed by `226` for the ABOR (RFC 959 §4.1.3).
    pub fn transfer_finished(&mut self, path: &VirtualPath, outcome: TransferOutcome) -> Vec<Reply> {
        let aborted = std::mem::take(&mut self.abort_requested);
        let Some(kind) = self.transfer.take() else {
            return vec![Reply::new(ReplyCode::BAD_SEQUENCE, "No transfer in progress.")];
        };
        match outcome {
            TransferOutcome::Complete { .. } if !aborted => {
                if self.mode == TransferMode::ExtendedBlock {
                    // MODE E connections stay open for the next transfer
                    // in the same direction (GFD.20 data channel caching).
                    self.cached = Some(kind.direction());
                }
                vec![Reply::new(ReplyCode::CLOSING_DATA, "Transfer complete.")]
            }
            // RFC 959 §4.1.3 ABOR: "the FTP service command was already
            // completed" — the transfer's own 226 stands (an upload that
            // took its final name is not reported aborted), then the 226
            // for the ABOR.
            TransferOutcome::Complete { .. } => vec![
                Reply::new(ReplyCode::CLOSING_DATA, "Transfer complete."),
                Reply::new(ReplyCode::CLOSING_DATA, "ABOR command successful."),
            ],
            TransferOutcome::Failed(TransferError::Aborted) => {
                vec![
                    Reply::new(ReplyCode::TRANSFER_ABORTED, "Connection closed; transfer aborted."),
                    Reply::new(ReplyCode::CLOSING_DATA, "ABOR command successful."),
                ]
            }
            TransferOutcome::Failed(e) => {
                let reply = match e {
                    TransferError::File(fs) => fs.reply(path),
                    TransferError::DataConnection(why) => {
                        Reply::new(ReplyCode::CANT_OPEN_DATA, format!("Cannot open data connection: {why}."))
                    }
                    TransferError::ConnectionLost(why) => Reply::new(
                        ReplyCode::TRANSFER_ABORTED,
                        format!("Data connection lost: {why}; transfer aborted."),
                    ),
                    TransferError::NoSpace => Reply::new(
                        ReplyCode::EXCEEDED_STORAGE,
                        format!("{path}: No space left on the server's disk; transfer aborted."),
                    ),
                    TransferError::Local(why) => {
                        Reply::new(ReplyCode::LOCAL_ERROR, format!("{path}: Local error: {why}."))
                    }
                    TransferError::BadRestart(why) => {
                        Reply::new(ReplyCode::INVALID_RESTART, format!("Invalid REST parameter: {why}."))
                    }
                    TransferError::Aborted => unreachable_aborted(),
                };
                let mut out = vec![reply];
                if aborted {
                    out.push(Reply::new(ReplyCode::CLOSING_DATA, "ABOR command successful."));
                }
                out
            }
        }
    }

    fn status(&self) -> Reply {
        let user = match &self.login {
            Login::LoggedIn(g) => g.user.clone(),
            _ => "(not logged in)".to_string(),
        };
        let ty = match self.ty {
            TransferType::Ascii => "ASCII",
            TransferType::Image => "BINARY",
        };
        Reply::multiline(
            ReplyCode::SYSTEM_STATUS,
            "Ferry status:",
            [
                format!("    Connected from {}", self.peer.ip()),
                format!("    Logged in as {user}"),
                format!(
                    "    TYPE: {ty}, STRUcture: File, MODE: {}",
                    match self.mode {
                        TransferMode::Stream => "Stream",
                        TransferMode::ExtendedBlock => "Extended block",
                    }
                ),
                format!("    Working directory: {}", self.cwd),
            ],
            "End of status.",
        )
    }

    // --- Striping (issue 20; crate::stripe) ---

    /// `SPOR a1 a2 ...` on a striping front end: each address passes the
    /// checks PORT makes; the list is kept for this data-channel generation.
    fn on_spor(&mut self, addrs: Vec<std::net::SocketAddrV4>) -> Action {
        for a in &addrs {
            let reply = self.on_active(SocketAddr::V4(*a));
            if !matches!(&reply, Action::Reply(r) if r.code == ReplyCode::OK) {
                return reply;
            }
        }
        self.data = DataSetup::Active(SocketAddr::V4(addrs[0]));
        self.stripe.set_spor(self.generation, addrs);
        Self::reply(ReplyCode::OK, "PORT Command successful.")
    }

    /// The SPOR addresses, while the current data setup is that SPOR.
    pub fn striped_port(&self) -> Option<&[std::net::SocketAddrV4]> {
        self.stripe.spor(self.generation)
    }

    /// The layout OPTS RETR asked for (Blocked, 1 MiB, by default).
    pub fn stripe_layout(&self) -> crate::stripe::StripeLayout {
        self.stripe.options.layout()
    }

    /// A front end's outcome of an [`Action::Passive`] for SPAS: one
    /// listener per data node, answered with the multi-line 229.
    pub fn striped_passive_result(&mut self, result: Result<Vec<std::net::SocketAddrV4>, String>) -> Reply {
        let Pending::Passive(kind) = std::mem::replace(&mut self.pending, Pending::None) else {
            return Reply::new(ReplyCode::BAD_SEQUENCE, "No passive request in progress.");
        };
        match result {
            Ok(addrs) if !addrs.is_empty() => {
                self.data = DataSetup::Passive { delayed: false, kind };
                crate::stripe::spas_reply(&addrs)
            }
            Ok(_) => Reply::new(ReplyCode::CANT_OPEN_DATA, "Cannot open a passive data port: no data node."),
            Err(why) => {
                self.data = DataSetup::None;
                Reply::new(ReplyCode::CANT_OPEN_DATA, format!("Cannot open a passive data port: {why}."))
            }
        }
    }

    // --- end of striping ---

    fn feat(&self) -> Reply {
        // Exactly what is implemented. DCAU is left out on purpose: only
        // `DCAU N` works, and a GSI client seeing DCAU would ask for A.
        let cksm: String = CHECKSUM_ALGORITHMS.iter().map(|a| format!("{a};")).collect();
        let mut lines: Vec<String> = vec![
            format!(" CKSM {cksm}"),
            " EPRT".into(),
            " EPSV".into(),
            " ERET".into(),
            " ESTO".into(),
            " MDTM".into(),
            " MFMT".into(),
            " MLSR".into(),
            format!(" MLST {MLST_FACTS}"),
            " PARALLEL".into(),
            " PASV AllowDelayed;".into(),
            " REST STREAM".into(),
            " SBUF".into(),
            " SITE PARTIAL".into(),
            " SIZE".into(),
            " SPAS".into(),
            " SPOR".into(),
            " TVFS".into(),
            " UTF8".into(),
        ];
        if self.config.tls_available {
            lines.insert(0, " AUTH TLS".into());
            lines.push(" PBSZ".into());
            lines.push(" PROT".into());
        }
        Reply::multiline(ReplyCode::SYSTEM_STATUS, "Extensions supported", lines, "End.")
    }
}

/// Formats the reply announcing a passive listener: 227/229 for PASV,
/// EPSV and SPAS, or 127/129 under delayed passive. The SPAS form must
/// contain no `(` and exactly one address line: globus-url-copy counts
/// addresses as "newlines minus two" (`docs/gridftp-wire-notes.md` §1).
fn passive_reply(kind: PassiveKind, addr: SocketAddr, delayed: bool) -> Result<Reply, String> {
    let shift = if delayed { 100 } else { 0 };
    let code = |c: u16| ReplyCode::new(c - shift).unwrap_or(ReplyCode::CANT_OPEN_DATA);
    match (kind, addr) {
        (PassiveKind::Pasv, SocketAddr::V4(a)) => {
            Ok(Reply::new(code(227), format!("Entering Passive Mode ({}).", format_host_port(a))))
        }
        (PassiveKind::Epsv, a) => {
            Ok(Reply::new(code(229), format!("Entering Extended Passive Mode (|||{}|)", a.port())))
        }
        (PassiveKind::Spas, SocketAddr::V4(a)) => Ok(Reply::multiline(
            code(229),
            "Entering Striped Passive Mode.",
            [format!(" {}", format_host_port(a))],
            "End",
        )),
        (_, SocketAddr::V6(_)) => Err("PASV and SPAS cannot describe an IPv6 address; use EPSV".into()),
    }
}

/// TransferError::Aborted is matched in the arm above; kept as a function so
/// the match stays exhaustive without a panic on the reply path.
fn unreachable_aborted() -> Reply {
    Reply::new(ReplyCode::TRANSFER_ABORTED, "Transfer aborted.")
}

/// The facts Ferry emits, as FEAT advertises them (all on by default).
const MLST_FACTS: &str = "Type*;Size*;Modify*;Perm*;UNIX.mode*;UNIX.uid*;UNIX.gid*;Unique*;";
const MLST_FACTS_ON: &str = "Type;Size;Modify;Perm;UNIX.mode;UNIX.uid;UNIX.gid;Unique;";

/// The user names that mean "anonymous": RFC 1635's `anonymous` and
/// `ftp`, and `:globus-mapping:`, the Globus client library's default user
/// when a URL names none (Globus servers map it like anonymous).
fn is_anonymous_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("anonymous") || name.eq_ignore_ascii_case("ftp") || name == ":globus-mapping:"
}

/// Compares addresses treating IPv4-mapped IPv6 as IPv4.
fn same_host(a: IpAddr, b: IpAddr) -> bool {
    let norm = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    norm(a) == norm(b)
}

/// RFC 959 Appendix II: a quote inside a quoted path name is doubled.
fn quote_path(p: &VirtualPath) -> String {
    format!("\"{}\"", p.as_str().replace('"', "\"\""))
}

fn path_error_reply(e: &PathError) -> Action {
    let code = match e {
        PathError::EscapesRoot => ReplyCode::FILE_UNAVAILABLE,
        PathError::Nul | PathError::Empty => ReplyCode::PARAMETER_SYNTAX_ERROR,
    };
    Action::Reply(Reply::new(code, format!("{}; refused.", capitalize_first(&e.to_string()))))
}

fn capitalize_first(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

fn op_path(op: &FileOp) -> &VirtualPath {
    match op {
        FileOp::ChangeDir(p)
        | FileOp::MakeDir(p)
        | FileOp::RemoveDir(p)
        | FileOp::Delete(p)
        | FileOp::RenameFrom(p)
        | FileOp::Size(p)
        | FileOp::ModTime(p)
        | FileOp::Facts(p)
        | FileOp::StatListing(p)
        | FileOp::Partial(p) => p,
        FileOp::Rename { to, .. } => to,
        FileOp::SetModTime { path, .. }
        | FileOp::Utime { path, .. }
        | FileOp::Chgrp { path, .. }
        | FileOp::Chmod { path, .. }
        | FileOp::Checksum { path, .. } => path,
    }
}

/// The command behind a file operation, for replies.
fn op_verb(op: &FileOp) -> &'static str {
    match op {
        FileOp::ChangeDir(_) => "CWD",
        FileOp::MakeDir(_) => "MKD",
        FileOp::RemoveDir(_) => "RMD",
        FileOp::Delete(_) => "DELE",
        FileOp::RenameFrom(_) => "RNFR",
        FileOp::Rename { .. } => "RNTO",
        FileOp::Checksum { .. } => "CKSM",
        FileOp::Size(_) => "SIZE",
        FileOp::ModTime(_) => "MDTM",
        FileOp::SetModTime { .. } => "MFMT",
        FileOp::Facts(_) => "MLST",
        FileOp::StatListing(_) => "STAT",
        FileOp::Chmod { .. } => "SITE CHMOD",
        FileOp::Utime { .. } => "SITE UTIME",
        FileOp::Chgrp { .. } => "SITE CHGRP",
        FileOp::Partial(_) => "SITE PARTIAL",
    }
}

/// Splits `ls`-style options (`-la`) from a LIST/NLST/STAT argument. Clients
/// such as lftp send `LIST -a`; a path that really starts with `-` can still
/// be reached as `./-name`.
fn split_list_options(arg: &str) -> (String, Option<&str>) {
    let mut options = String::new();
    let mut rest = arg.trim_start();
    while rest.starts_with('-') {
        let end = rest.find(' ').unwrap_or(rest.len());
        options.push_str(&rest[1..end]);
        rest = rest[end..].trim_start();
    }
    (options, (!rest.is_empty()).then_some(rest))
}

/// The commands this server serves, for HELP and SITE HELP.
pub fn help_reply(code: ReplyCode) -> Reply {
    let verbs = [
        "ABOR", "ACCT", "ALLO", "APPE", "CDUP", "CKSM", "CWD", "DCAU", "DELE", "EPRT", "EPSV", "ERET", "ESTO", "FEAT",
        "HELP", "LIST", "MDTM", "MFMT", "MKD", "MLSD", "MLSR", "MLST", "MODE", "NLST", "NOOP", "OPTS", "PASS", "PASV",
        "PORT", "PWD", "QUIT", "REST", "RETR", "RMD", "RNFR", "RNTO", "SBUF", "SITE", "SIZE", "SPAS", "SPOR", "STAT",
        "STOR", "STRU", "SYST", "TREV", "TYPE", "USER",
    ];
    // globus-url-copy looks for the SITE buffer commands in this text to
    // pick how to send `-tcp-bs` (`docs/gridftp-wire-notes.md` §9).
    let body = verbs
        .chunks(8)
        .map(|c| {
            let mut line = String::from("   ");
            for v in c {
                line.push_str(&format!(" {v:<7}"));
            }
            line.trim_end().to_string()
        })
        .chain([
            "    SITE HELP, SITE CLIENTINFO, SITE CHMOD <mode> <path>,".to_string(),
            "    SITE CHGRP <group> <path>, SITE UTIME <YYYYMMDDHHMMSS> <path>,".to_string(),
            "    SITE SETDISKSTACK file,".to_string(),
            "    SITE RETRBUFSIZE <n>, SITE STORBUFSIZE <n>, SITE BUFSIZE <n>,".to_string(),
            "    SITE PROFILE START [interval-ms] [PERF], SITE PROFILE STOP,".to_string(),
            "    SITE PARTIAL <path>".to_string(),
        ]);
    Reply::multiline(code, "The following commands are recognized:", body, "Direct comments to the administrator.")
}
