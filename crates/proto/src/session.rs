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

use crate::command::{
    Allo, Command, CommandError, EpsvArg, Opts, ProtectionLevel, RestArg, SiteCommand,
    TransferMode, TransferType,
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
        }
    }
}

/// A login for the driver to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginRequest {
    /// Anonymous login is enabled; grant it with this access.
    Anonymous { access: Access, password: String },
    /// A named user: verify the password against the users file.
    Password { user: String, password: String },
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
    Other(String),
}

impl FsError {
    pub fn reply(&self, path: &VirtualPath) -> Reply {
        use FsError as E;
        let (code, text) = match self {
            E::NotFound => (
                ReplyCode::FILE_UNAVAILABLE,
                format!("{path}: No such file or directory."),
            ),
            E::PermissionDenied => (
                ReplyCode::FILE_UNAVAILABLE,
                format!("{path}: Permission denied."),
            ),
            E::AlreadyExists => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: File exists.")),
            E::NotADirectory => (
                ReplyCode::FILE_UNAVAILABLE,
                format!("{path}: Not a directory."),
            ),
            E::IsADirectory => (
                ReplyCode::FILE_UNAVAILABLE,
                format!("{path}: Is a directory."),
            ),
            E::DirectoryNotEmpty => (
                ReplyCode::FILE_UNAVAILABLE,
                format!("{path}: Directory not empty."),
            ),
            E::Escapes => (
                ReplyCode::FILE_UNAVAILABLE,
                format!("{path}: Path leads outside the served directory; refused."),
            ),
            E::InvalidName(why) => (
                ReplyCode::NAME_NOT_ALLOWED,
                format!("{path}: File name not allowed: {why}."),
            ),
            E::NoSpace => (
                ReplyCode::EXCEEDED_STORAGE,
                format!("{path}: No space left on the server's disk."),
            ),
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
    Size(VirtualPath),
    ModTime(VirtualPath),
    SetModTime {
        path: VirtualPath,
        unix_secs: i64,
    },
    /// MLST: facts of one entry.
    Facts(VirtualPath),
    /// STAT <path>: a LIST-style listing over the control connection.
    StatListing(VirtualPath),
    Chmod {
        path: VirtualPath,
        mode: u32,
    },
}

/// Successful outcome of a [`FileOp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileDone {
    Done,
    Size(u64),
    ModTime(i64),
    Facts(FileFacts),
    Listing(Vec<FileFacts>),
}

/// How listings are formatted on the data connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListFormat {
    /// LIST: `ls -l` lines.
    Long,
    /// NLST: names only.
    Names,
    /// MLSD: RFC 3659 fact lines.
    Machine,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferKind {
    Retrieve,
    Store,
    Append,
    List {
        format: ListFormat,
        show_hidden: bool,
    },
}

impl TransferKind {
    /// True when the server sends on the data connection.
    pub fn server_sends(&self) -> bool {
        matches!(self, TransferKind::Retrieve | TransferKind::List { .. })
    }
}

/// How the data connection(s) for a transfer are obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataEndpoint {
    /// Accept on the listener the driver opened for the last PASV/EPSV.
    Passive,
    /// Connect to the address given by PORT/EPRT.
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
    /// Size announced by ALLO, for preallocation.
    pub allocation: Option<u64>,
    /// Whether the user may write (shapes the MLSD `Perm` fact).
    pub writable: bool,
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
    /// Open a passive listener, then call [`Session::passive_result`].
    Passive(PassiveKind),
    /// Run a transfer: open the data connection, call
    /// [`Session::transfer_started`], move the data, call
    /// [`Session::transfer_finished`].
    Transfer(TransferRequest),
    /// ABOR arrived while a transfer runs: stop it; its
    /// [`Session::transfer_finished`] then yields the 426/226 pair.
    AbortTransfer,
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
    Passive,
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
    epsv_all: bool,
    rest: Option<RestArg>,
    allocation: Option<u64>,
    rename_from: Option<VirtualPath>,
    pending: Pending,
    transfer: Option<TransferKind>,
    abort_requested: bool,
}

const TEXT_NOT_LOGGED_IN: &str = "Please log in with USER and PASS first.";

impl Session {
    pub fn new(config: SessionConfig, peer: SocketAddr) -> Self {
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
            epsv_all: false,
            rest: None,
            allocation: None,
            rename_from: None,
            pending: Pending::None,
            transfer: None,
            abort_requested: false,
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

    pub fn is_transferring(&self) -> bool {
        self.transfer.is_some()
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
        if self.pending != Pending::None {
            // The driver must finish one request before feeding the next
            // command; reaching here is a driver bug, answered safely.
            return Self::reply(
                ReplyCode::BAD_SEQUENCE,
                "Previous command still in progress.",
            );
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
                format!(
                    "{} cannot be served while a transfer is in progress.",
                    other.verb()
                ),
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
            C::Opts(Opts::Utf8(false)) => Self::reply(
                ReplyCode::PARAMETER_NOT_IMPLEMENTED,
                "Ferry always uses UTF-8 paths.",
            ),
            C::Acct(_) => Self::reply(ReplyCode::SUPERFLUOUS, "ACCT not needed."),
            _ if !self.logged_in() => Self::reply(ReplyCode::NOT_LOGGED_IN, TEXT_NOT_LOGGED_IN),

            // Navigation and file management.
            C::Cwd(p) => self.file_op(&p, false, FileOp::ChangeDir),
            C::Cdup => self.file_op("..", false, FileOp::ChangeDir),
            C::Pwd => Self::reply(
                ReplyCode::PATH_CREATED,
                format!("{} is the current directory.", quote_path(&self.cwd)),
            ),
            C::Mkd(p) => self.file_op(&p, true, FileOp::MakeDir),
            C::Rmd(p) => self.file_op(&p, true, FileOp::RemoveDir),
            C::Dele(p) => self.file_op(&p, true, FileOp::Delete),
            C::Rnfr(p) => self.file_op(&p, true, FileOp::RenameFrom),
            C::Rnto(p) => match rename_from {
                None => Self::reply(
                    ReplyCode::BAD_SEQUENCE,
                    "RNTO must immediately follow a successful RNFR.",
                ),
                Some(from) => self.file_op(&p, true, |to| FileOp::Rename { from, to }),
            },
            C::Size(p) => self.file_op(&p, false, FileOp::Size),
            C::Mdtm(p) => self.file_op(&p, false, FileOp::ModTime),
            C::Mfmt { time, path } => match parse_time_val(&time) {
                Some(unix_secs) => {
                    self.file_op(&path, true, |path| FileOp::SetModTime { path, unix_secs })
                }
                None => Self::reply(
                    ReplyCode::PARAMETER_SYNTAX_ERROR,
                    "MFMT: invalid time value.",
                ),
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
            C::Mode(TransferMode::Stream) => {
                self.mode = TransferMode::Stream;
                Self::reply(ReplyCode::OK, "Mode set to S.")
            }
            C::Mode(TransferMode::ExtendedBlock) => Self::reply(
                ReplyCode::PARAMETER_NOT_IMPLEMENTED,
                "MODE E is not available; use MODE S.",
            ),
            C::Port(addr) => self.on_active(SocketAddr::V4(addr)),
            C::Eprt(addr) => self.on_active(addr),
            C::Pasv => {
                if self.epsv_all {
                    return Self::reply(
                        ReplyCode::BAD_SEQUENCE,
                        "PASV is not allowed after EPSV ALL.",
                    );
                }
                if self.peer.is_ipv6() {
                    return Self::reply(
                        ReplyCode::CANT_OPEN_DATA,
                        "PASV cannot describe an IPv6 address; use EPSV.",
                    );
                }
                self.pending = Pending::Passive(PassiveKind::Pasv);
                Action::Passive(PassiveKind::Pasv)
            }
            C::Epsv(EpsvArg::All) => {
                self.epsv_all = true;
                Self::reply(ReplyCode::OK, "EPSV ALL ok.")
            }
            C::Epsv(EpsvArg::Protocol(p)) if (p == 1) != self.peer.is_ipv4() => Self::reply(
                ReplyCode::PARAMETER_NOT_IMPLEMENTED,
                format!(
                    "Network protocol not supported, use ({})",
                    if self.peer.is_ipv4() { 1 } else { 2 }
                ),
            ),
            C::Epsv(_) => {
                self.pending = Pending::Passive(PassiveKind::Epsv);
                Action::Passive(PassiveKind::Epsv)
            }
            C::Rest(RestArg::Offset(o)) => {
                self.rest = Some(RestArg::Offset(o));
                Self::reply(
                    ReplyCode::PENDING_FURTHER_INFO,
                    format!("Restarting at {o}. Send STORE or RETRIEVE to initiate transfer."),
                )
            }
            C::Rest(RestArg::Ranges(_)) => Self::reply(
                ReplyCode::PARAMETER_NOT_IMPLEMENTED,
                "REST with byte ranges needs MODE E, which this server does not offer.",
            ),
            C::Allo(Allo { size, .. }) => {
                self.allocation = Some(size);
                Self::reply(ReplyCode::OK, "ALLO command successful.")
            }
            C::Opts(o) => self.on_opts(o),

            // Transfers.
            C::Abor => Self::reply(ReplyCode::ABORT_OK, "No transfer to abort."),
            C::Retr(p) => self.transfer(&p, TransferKind::Retrieve),
            C::Stor(p) => self.transfer(&p, TransferKind::Store),
            C::Appe(p) => self.transfer(&p, TransferKind::Append),
            C::List(arg) => self.list(arg.as_deref(), ListFormat::Long),
            C::Nlst(arg) => self.list(arg.as_deref(), ListFormat::Names),
            C::Mlsd(arg) => self.list(arg.as_deref(), ListFormat::Machine),

            C::Stou | C::Smnt(_) | C::Rein => Self::reply(
                ReplyCode::NOT_IMPLEMENTED,
                "Command not implemented by this server.",
            ),
            C::Spas
            | C::Spor(_)
            | C::Eret { .. }
            | C::Esto { .. }
            | C::Sbuf(_)
            | C::Dcau(_)
            | C::Cksm { .. } => Self::reply(
                ReplyCode::NOT_IMPLEMENTED,
                "GridFTP extension not implemented by this server.",
            ),
        }
    }

    fn on_user(&mut self, name: &str) -> Action {
        if self.logged_in() {
            return Self::reply(
                ReplyCode::NOT_LOGGED_IN,
                "Already logged in; cannot change to another user.",
            );
        }
        self.login = Login::NeedPass(name.to_string());
        if is_anonymous_name(name) {
            Self::reply(
                ReplyCode::NEED_PASSWORD,
                "Anonymous login: send any password.",
            )
        } else {
            Self::reply(
                ReplyCode::NEED_PASSWORD,
                format!("Password required for {name}."),
            )
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
                let text = match grant.access {
                    Access::ReadOnly => format!("User {} logged in (read-only).", grant.user),
                    Access::ReadWrite => format!("User {} logged in.", grant.user),
                };
                self.login = Login::LoggedIn(grant);
                self.failed_logins = 0;
                Self::reply(ReplyCode::LOGGED_IN, text)
            }
            None => {
                self.login = Login::Idle;
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
        match cmd {
            Command::Auth(_) if !self.config.tls_available => Self::reply(
                ReplyCode::NOT_IMPLEMENTED,
                "AUTH is not available: this server has no TLS certificate configured.",
            ),
            Command::Auth(mech) if mech != "TLS" && mech != "TLS-C" && mech != "SSL" => {
                Self::reply(
                    ReplyCode::PARAMETER_NOT_IMPLEMENTED,
                    "Security mechanism not understood; use AUTH TLS.",
                )
            }
            Command::Ccc => Self::reply(ReplyCode::NOT_IMPLEMENTED, "CCC is not supported."),
            Command::Prot(ProtectionLevel::Clear) if !self.config.tls_available => {
                Self::reply(ReplyCode::OK, "Protection level set to Clear.")
            }
            _ => Self::reply(
                ReplyCode::BAD_SEQUENCE,
                "AUTH TLS must succeed before PBSZ and PROT.",
            ),
        }
    }

    fn on_site(&mut self, site: SiteCommand) -> Action {
        match site {
            SiteCommand::Help => Action::Reply(help_reply(ReplyCode::HELP)),
            SiteCommand::ClientInfo(_) => Self::reply(ReplyCode::FILE_ACTION_OK, "OK."),
            SiteCommand::Chmod { mode, path } => {
                self.file_op(&path, true, |path| FileOp::Chmod { path, mode })
            }
            SiteCommand::RetrBufSize(_) | SiteCommand::StorBufSize(_) | SiteCommand::BufSize(_) => {
                Self::reply(
                    ReplyCode::NOT_IMPLEMENTED,
                    "SITE buffer sizes are not supported by this server.",
                )
            }
            SiteCommand::Other { name, .. } => Self::reply(
                ReplyCode::SYNTAX_ERROR,
                format!("Unknown SITE command {name}; see SITE HELP."),
            ),
        }
    }

    fn on_opts(&mut self, opts: Opts) -> Action {
        match opts {
            Opts::Mlst(_) => Self::reply(ReplyCode::OK, format!("MLST OPTS {MLST_FACTS_ON}")),
            Opts::Other { command, .. } => Self::reply(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                format!("OPTS {command}: no options are defined for this command."),
            ),
            Opts::Retr(_) | Opts::Pasv(_) => Self::reply(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                "OPTS for GridFTP are not supported by this server.",
            ),
            Opts::Utf8(_) => Self::reply(ReplyCode::OK, "UTF8 set to on."),
        }
    }

    fn on_active(&mut self, addr: SocketAddr) -> Action {
        if self.epsv_all {
            return Self::reply(
                ReplyCode::BAD_SEQUENCE,
                "PORT and EPRT are not allowed after EPSV ALL.",
            );
        }
        if addr.port() < 1024 {
            return Self::reply(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                "Refusing a data connection to a privileged port (below 1024).",
            );
        }
        if self.config.port_policy == PortPolicy::PeerOnly && !same_host(addr.ip(), self.peer.ip())
        {
            return Self::reply(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                "Data connections may only go to the client's own address (FTP bounce protection).",
            );
        }
        self.data = DataSetup::Active(addr);
        Self::reply(ReplyCode::OK, "PORT command successful.")
    }

    /// Resolves a path argument and hands the operation to the driver.
    fn file_op(
        &mut self,
        arg: &str,
        needs_write: bool,
        make: impl FnOnce(VirtualPath) -> FileOp,
    ) -> Action {
        if needs_write && !self.writable() {
            return Self::reply(
                ReplyCode::FILE_UNAVAILABLE,
                "Permission denied: this account is read-only.",
            );
        }
        let path = match self.cwd.resolve(arg) {
            Ok(p) => p,
            Err(e) => return path_error_reply(&e),
        };
        let op = make(path);
        self.pending = Pending::File(op.clone());
        Action::File(op)
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
            (FileOp::MakeDir(p), _) => Reply::new(
                ReplyCode::PATH_CREATED,
                format!("{} created.", quote_path(&p)),
            ),
            (FileOp::RemoveDir(p), _) => ok(format!("{p}: directory removed.")),
            (FileOp::Delete(p), _) => ok(format!("{p}: file deleted.")),
            (FileOp::RenameFrom(p), _) => {
                self.rename_from = Some(p);
                Reply::new(
                    ReplyCode::PENDING_FURTHER_INFO,
                    "File exists, ready for destination name.",
                )
            }
            (FileOp::Rename { from, to }, _) => ok(format!("Renamed {from} to {to}.")),
            (FileOp::Size(_), FileDone::Size(n)) => {
                Reply::new(ReplyCode::FILE_STATUS, n.to_string())
            }
            (FileOp::ModTime(_), FileDone::ModTime(t)) => {
                Reply::new(ReplyCode::FILE_STATUS, format_time_val(t))
            }
            (FileOp::SetModTime { path, unix_secs }, _) => Reply::new(
                ReplyCode::FILE_STATUS,
                format!("Modify={}; {path}", format_time_val(unix_secs)),
            ),
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
            (FileOp::Chmod { .. }, _) => {
                Reply::new(ReplyCode::OK, "SITE CHMOD command successful.")
            }
            (op, other) => Reply::new(
                ReplyCode::LOCAL_ERROR,
                format!("Internal error: {op:?} answered with {other:?}."),
            ),
        }
    }

    /// The driver's outcome of an [`Action::Passive`]: the address the
    /// listener is bound to, or why none could be opened.
    pub fn passive_result(&mut self, result: Result<SocketAddr, String>) -> Reply {
        let Pending::Passive(kind) = std::mem::replace(&mut self.pending, Pending::None) else {
            return Reply::new(ReplyCode::BAD_SEQUENCE, "No passive request in progress.");
        };
        match (result, kind) {
            (Err(why), _) => {
                self.data = DataSetup::None;
                Reply::new(
                    ReplyCode::CANT_OPEN_DATA,
                    format!("Cannot open a passive data port: {why}."),
                )
            }
            (Ok(SocketAddr::V4(a)), PassiveKind::Pasv) => {
                self.data = DataSetup::Passive;
                Reply::new(
                    ReplyCode::PASSIVE,
                    format!("Entering Passive Mode ({}).", format_host_port(a)),
                )
            }
            (Ok(SocketAddr::V6(_)), PassiveKind::Pasv) => {
                self.data = DataSetup::None;
                Reply::new(
                    ReplyCode::CANT_OPEN_DATA,
                    "PASV cannot describe an IPv6 address; use EPSV.",
                )
            }
            (Ok(a), PassiveKind::Epsv) => {
                self.data = DataSetup::Passive;
                Reply::new(
                    ReplyCode::EXTENDED_PASSIVE,
                    format!("Entering Extended Passive Mode (|||{}|)", a.port()),
                )
            }
        }
    }

    fn list(&mut self, arg: Option<&str>, format: ListFormat) -> Action {
        let (options, path) = match arg {
            Some(a) => split_list_options(a),
            None => (String::new(), None),
        };
        let show_hidden = options.contains('a') || format == ListFormat::Machine;
        self.transfer(
            path.unwrap_or("."),
            TransferKind::List {
                format,
                show_hidden,
            },
        )
    }

    fn transfer(&mut self, arg: &str, kind: TransferKind) -> Action {
        let needs_write = matches!(kind, TransferKind::Store | TransferKind::Append);
        if needs_write && !self.writable() {
            return Self::reply(
                ReplyCode::FILE_UNAVAILABLE,
                "Permission denied: this account is read-only.",
            );
        }
        let path = match self.cwd.resolve(arg) {
            Ok(p) => p,
            Err(e) => return path_error_reply(&e),
        };
        let endpoint = match std::mem::replace(&mut self.data, DataSetup::None) {
            DataSetup::None => {
                return Self::reply(
                    ReplyCode::CANT_OPEN_DATA,
                    "Use PORT, EPRT, PASV or EPSV first.",
                );
            }
            DataSetup::Passive => DataEndpoint::Passive,
            DataSetup::Active(a) => DataEndpoint::Active(a),
        };
        let restart = match kind {
            TransferKind::Retrieve | TransferKind::Store => self.rest.take(),
            _ => None,
        };
        self.rest = None;
        let req = TransferRequest {
            kind: kind.clone(),
            path,
            restart,
            ty: if matches!(kind, TransferKind::List { .. }) {
                TransferType::Ascii
            } else {
                self.ty
            },
            mode: self.mode,
            endpoint,
            allocation: self.allocation.take(),
            writable: self.writable(),
        };
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
            Reply::new(
                ReplyCode::FILE_STATUS_OK,
                format!("Opening {mode} mode data connection for {what}{size}."),
            )
        }
    }

    /// The final replies of a transfer: `226`, an error, or after ABOR the
    /// `426` for the transfer followed by `226` for the ABOR (RFC 959 §4.1.3).
    pub fn transfer_finished(
        &mut self,
        path: &VirtualPath,
        outcome: TransferOutcome,
    ) -> Vec<Reply> {
        let aborted = std::mem::take(&mut self.abort_requested);
        if self.transfer.take().is_none() {
            return vec![Reply::new(
                ReplyCode::BAD_SEQUENCE,
                "No transfer in progress.",
            )];
        }
        match outcome {
            TransferOutcome::Complete { .. } if !aborted => {
                vec![Reply::new(ReplyCode::CLOSING_DATA, "Transfer complete.")]
            }
            TransferOutcome::Complete { .. } | TransferOutcome::Failed(TransferError::Aborted) => {
                vec![
                    Reply::new(
                        ReplyCode::TRANSFER_ABORTED,
                        "Connection closed; transfer aborted.",
                    ),
                    Reply::new(ReplyCode::CLOSING_DATA, "ABOR command successful."),
                ]
            }
            TransferOutcome::Failed(e) => {
                let reply = match e {
                    TransferError::File(fs) => fs.reply(path),
                    TransferError::DataConnection(why) => Reply::new(
                        ReplyCode::CANT_OPEN_DATA,
                        format!("Cannot open data connection: {why}."),
                    ),
                    TransferError::ConnectionLost(why) => Reply::new(
                        ReplyCode::TRANSFER_ABORTED,
                        format!("Data connection lost: {why}; transfer aborted."),
                    ),
                    TransferError::NoSpace => Reply::new(
                        ReplyCode::EXCEEDED_STORAGE,
                        format!("{path}: No space left on the server's disk; transfer aborted."),
                    ),
                    TransferError::Local(why) => Reply::new(
                        ReplyCode::LOCAL_ERROR,
                        format!("{path}: Local error: {why}."),
                    ),
                    TransferError::BadRestart(why) => Reply::new(
                        ReplyCode::INVALID_RESTART,
                        format!("Invalid REST parameter: {why}."),
                    ),
                    TransferError::Aborted => unreachable_aborted(),
                };
                let mut out = vec![reply];
                if aborted {
                    out.push(Reply::new(
                        ReplyCode::CLOSING_DATA,
                        "ABOR command successful.",
                    ));
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
                format!("    TYPE: {ty}, STRUcture: File, MODE: Stream"),
                format!("    Working directory: {}", self.cwd),
            ],
            "End of status.",
        )
    }

    fn feat(&self) -> Reply {
        let mut lines: Vec<String> = vec![
            " EPRT".into(),
            " EPSV".into(),
            " MDTM".into(),
            " MFMT".into(),
            format!(" MLST {MLST_FACTS}"),
            " PASV".into(),
            " REST STREAM".into(),
            " SIZE".into(),
            " TVFS".into(),
            " UTF8".into(),
        ];
        if self.config.tls_available {
            lines.insert(0, " AUTH TLS".into());
            lines.push(" PBSZ".into());
            lines.push(" PROT".into());
        }
        Reply::multiline(
            ReplyCode::SYSTEM_STATUS,
            "Extensions supported",
            lines,
            "End.",
        )
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

fn is_anonymous_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("anonymous") || name.eq_ignore_ascii_case("ftp")
}

/// Compares addresses treating IPv4-mapped IPv6 as IPv4.
fn same_host(a: IpAddr, b: IpAddr) -> bool {
    let norm = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
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
    Action::Reply(Reply::new(
        code,
        format!("{}; refused.", capitalize_first(&e.to_string())),
    ))
}

fn capitalize_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
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
        | FileOp::StatListing(p) => p,
        FileOp::Rename { to, .. } => to,
        FileOp::SetModTime { path, .. } | FileOp::Chmod { path, .. } => path,
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
        "ABOR", "ACCT", "ALLO", "APPE", "CDUP", "CWD", "DELE", "EPRT", "EPSV", "FEAT", "HELP",
        "LIST", "MDTM", "MFMT", "MKD", "MLSD", "MLST", "MODE", "NLST", "NOOP", "OPTS", "PASS",
        "PASV", "PORT", "PWD", "QUIT", "REST", "RETR", "RMD", "RNFR", "RNTO", "SITE", "SIZE",
        "STAT", "STOR", "STRU", "SYST", "TYPE", "USER",
    ];
    let body = verbs.chunks(8).map(|c| {
        let mut line = String::from("   ");
        for v in c {
            line.push_str(&format!(" {v:<7}"));
        }
        line.trim_end().to_string()
    });
    Reply::multiline(
        code,
        "The following commands are recognized:",
        body,
        "Direct comments to the administrator.",
    )
}
