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
//!
//! The session is split along its nouns, one file each: `config` (what the
//! administrator decides), `login`, `security` (AUTH TLS, PBSZ, PROT),
//! `channel` (PASV/PORT set-ups and their generations), `files` (requests
//! without a data connection), `transfer`, `listing`, `opts`, `site` and
//! `feat` (FEAT and HELP). This file holds the state and the dispatch of
//! each command to its room.

mod channel;
mod config;
mod feat;
mod files;
mod listing;
mod login;
mod opts;
mod security;
mod site;
mod stripe;
mod transfer;

pub use channel::{ChannelPlan, DataEndpoint, PassiveKind, MAX_BUFFER_SIZE, MAX_PARALLELISM};
pub use config::{Access, AnonymousAccess, PortPolicy, SessionConfig, DEFAULT_MAX_FILE_SIZE};
pub use feat::{help_reply, help_topic};
pub use files::{FileDone, FileOp, FsError, PartialFacts, CHECKSUM_ALGORITHMS};
pub use listing::ListFormat;
pub use login::{Grant, LoginRequest};
pub use security::TlsIdentity;
pub use transfer::{Direction, MarkerPlan, TransferError, TransferKind, TransferOutcome, TransferRequest, Window};

use crate::command::{
    Allo, Command, CommandError, Dcau, EpsvArg, Opts, ProfileRequest, ProtectionLevel, RestArg, TransferMode,
    TransferType, TrevEvent,
};
use crate::facts::parse_time_val;
use crate::path::VirtualPath;
use crate::reply::{Reply, ReplyCode};
use channel::DataSetup;
use files::{op_verb, quote_path};
use listing::split_list_options;
use login::Login;
use std::net::SocketAddr;

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
    /// The MLST/MLSD facts `OPTS MLST` selected (all until then).
    mlst_facts: crate::facts::FactSet,
    /// The data channels' transport (`TPRT`, `SITE SETNETSTACK`).
    transport: crate::transport::TransportName,
    /// The client chose the transport (`TPRT`, `SITE SETNETSTACK`): only
    /// then does it get one that is TLS itself (see [`Self::data_transport`]).
    transport_selected: bool,
    /// `TPRT udt:aes-gcm`: under PROT P, UDT data channels carry AES-GCM
    /// records keyed from the control channel's TLS session (docs/udt.md,
    /// "Encryption after PROT P"). Plain `TPRT udt` / `SITE SETNETSTACK
    /// udt` clear it: such a session's UDT under PROT P is refused (425).
    udt_sealed: bool,
    /// `DCAU S NAME` (third-party QUIC, issue 19): the other server of a
    /// third-party copy, whose certificate the data channel must show
    /// for this name.
    data_peer: Option<String>,
    /// `OPTS TPRT Rate=N;`: the path's bottleneck rate (bytes/s) the
    /// client measured; this server's UDT senders start at it.
    path_rate: Option<u64>,
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

const TEXT_NOT_LOGGED_IN: &str = "Please log in with USER and PASS first.";

impl Session {
    pub fn new(config: SessionConfig, peer: SocketAddr) -> Self {
        let default_transport = config.default_transport;
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
            mlst_facts: crate::facts::FactSet::ALL,
            transport: default_transport,
            transport_selected: false,
            udt_sealed: false,
            data_peer: None,
            path_rate: None,
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
    /// The transport the next data channels use.
    /// A transport that is TLS itself (`quic`) needs private data (PROT P
    /// after AUTH TLS); until then data channels are TCP. And it is given
    /// only to a session that selected it (`TPRT`, `SITE SETNETSTACK`),
    /// unless the server is configured to give its default to every
    /// session ([`SessionConfig::default_transport_unasked`]): a standard
    /// FTPS client (curl, lftp) under a server whose default is QUIC never
    /// asked, cannot speak it, and gets TCP with TLS as FTPS says.
    /// The same holds for a UDT default under PROT P: UDT's data is
    /// encrypted only for a session that asked `TPRT udt:aes-gcm`, so a
    /// private session that never selected a transport gets TCP with TLS
    /// rather than a 425 (with `default_transport_unasked` it gets UDT,
    /// and its PROT P transfers the 425).
    pub fn data_transport(&self) -> crate::transport::TransportName {
        let private = self.tls && self.prot == ProtectionLevel::Private;
        let asked = self.transport_selected || self.config.default_transport_unasked;
        if self.transport.needs_tls() && (!private || !asked) {
            return crate::transport::TransportName::TCP;
        }
        if self.transport.as_str() == "udt" && private && !asked {
            return crate::transport::TransportName::TCP;
        }
        self.transport
    }

    /// Whether this session's UDT data channels encrypt under PROT P
    /// (`TPRT udt:aes-gcm` was accepted and UDT is the transport).
    pub fn udt_sealed(&self) -> bool {
        self.udt_sealed && self.data_transport().as_str() == "udt"
    }

    /// The name the data channel's peer must prove (`DCAU S`), for a
    /// QUIC data channel between two servers.
    pub fn data_peer(&self) -> Option<&str> {
        self.data_peer.as_deref()
    }

    pub fn buffer_size(&self) -> Option<u32> {
        self.buffer_size
    }

    /// The path rate the client announced (`OPTS TPRT Rate=N;`), bytes/s.
    pub fn path_rate(&self) -> Option<u64> {
        self.path_rate
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
            C::Help(None) => Action::Reply(help_reply(ReplyCode::HELP)),
            C::Help(Some(topic)) => Action::Reply(help_topic(&topic)),
            //= RFC 2640 §4.1: "LANG" with no argument returns to the
            //= default language; a language the server lacks gets 504.
            C::Lang(None) => Self::reply(ReplyCode::OK, "Language set to EN."),
            C::Lang(Some(tag)) if tag.eq_ignore_ascii_case("EN") || tag.to_ascii_uppercase().starts_with("EN-") => {
                Self::reply(ReplyCode::OK, "Language set to EN.")
            }
            C::Lang(Some(tag)) => Self::reply(
                ReplyCode::PARAMETER_NOT_IMPLEMENTED,
                format!("LANG {tag}: this server speaks English (EN) only."),
            ),
            C::Syst => Self::reply(ReplyCode::SYSTEM_TYPE, "UNIX Type: L8"),
            C::Noop => Self::reply(ReplyCode::OK, "NOOP ok."),
            C::Auth(_) | C::Pbsz(_) | C::Prot(_) | C::Ccc => self.on_security(&cmd),
            C::Opts(Opts::Utf8(true)) => Self::reply(ReplyCode::OK, "UTF8 set to on."),
            C::Opts(Opts::Utf8(false)) => {
                Self::reply(ReplyCode::PARAMETER_NOT_IMPLEMENTED, "Ferry always uses UTF-8 paths.")
            }
            C::Acct(_) => Self::reply(ReplyCode::SUPERFLUOUS, "ACCT not needed."),
            // The Globus server answers SITE HELP before login too; it
            // names commands, nothing of the files.
            C::Site(crate::command::SiteCommand::Help) => Action::Reply(help_reply(ReplyCode::HELP)),
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
            // The driver queues a batch's commands in its place
            // (`Batch::expand`); one that reaches the session was not.
            C::Batch(b) => Self::reply(
                ReplyCode::BAD_SEQUENCE,
                format!("{} must be expanded by the server's control loop.", b.verb()),
            ),
            C::BatchEnd { .. } => {
                Self::reply(ReplyCode::BAD_SEQUENCE, "The end of a batch is answered by the server's control loop.")
            }
            C::Tprt(name) => {
                let (base, option) = crate::transport::split_option(&name);
                let sealed = match option {
                    None => false,
                    Some(o) if crate::transport::is_sealed_udt(base, o) => {
                        if let Err(r) = self.may_seal_udt() {
                            return Action::Reply(r);
                        }
                        true
                    }
                    Some(_) => {
                        return Action::Reply(crate::transport::refuse_option(
                            &self.config.transports,
                            self.transport,
                            &name,
                        ))
                    }
                };
                let chosen = crate::transport::select(&self.config.transports, self.transport, base);
                let ok = chosen.is_ok();
                let action = self.set_transport(chosen).unwrap_or_else(Action::Reply);
                if ok {
                    self.set_udt_sealed(sealed);
                }
                action
            }

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
            //= RFC 2428 §3: a protocol the server cannot use for this
            //= connection gets 522 and the ones it can.
            C::Epsv(EpsvArg::Protocol(p)) if (p == 1) != self.peer.is_ipv4() => Self::reply(
                ReplyCode::NETWORK_PROTOCOL_NOT_SUPPORTED,
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
                self.data_peer = None;
                Self::reply(ReplyCode::OK, "DCAU N: data channels are not authenticated.")
            }
            C::Dcau(Dcau::Subject(name)) if self.config.peer_certificates && self.tls => {
                // Ferry's reading of GFD.20's DCAU S for TLS: the peer of
                // the data channel (the other server of a third-party
                // copy) must hold a certificate for NAME that this server
                // trusts. Only QUIC data channels can check it, since both
                // servers are TLS servers on TCP (RFC 4217 §7).
                self.new_generation();
                let reply = format!(
                    "DCAU S: QUIC data channels will verify the peer's certificate for {name}; select quic (TPRT)                      and PROT P."
                );
                self.data_peer = Some(name);
                Self::reply(ReplyCode::OK, reply)
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
}
