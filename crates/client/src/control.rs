//! The client side of a control connection.

use crate::error::ClientError;
use ferry_io::tls::{DataProtection, DataStream};
use ferry_proto::client::fallback::{after_cwd, after_epsv, after_pasv, after_size, PassiveStep, StatStep};
use ferry_proto::client::listing::mlst_facts;
use ferry_proto::client::login::{auth_tls_accepted, greeting, Greeting, LoginError, LoginSequence};
use ferry_proto::client::{Expect, Pipeline, PipelineEvent};
use ferry_proto::command::ProtectionLevel;
use ferry_proto::command::{Command, EpsvArg, TransferType};
use ferry_proto::facts::FileFacts;
use ferry_proto::{Reply, ReplyParser};
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The control connection's byte stream: clear, or TLS after AUTH TLS.
#[derive(Debug)]
enum ControlStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl ControlStream {
    fn tcp(&self) -> &TcpStream {
        match self {
            ControlStream::Plain(s) => s,
            ControlStream::Tls(s) => s.get_ref().0,
        }
    }

    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            ControlStream::Plain(s) => s.read(buf).await,
            ControlStream::Tls(s) => s.read(buf).await,
        }
    }

    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            ControlStream::Plain(s) => s.write_all(bytes).await,
            ControlStream::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }

    async fn shutdown(&mut self) -> std::io::Result<()> {
        match self {
            ControlStream::Plain(s) => s.shutdown().await,
            ControlStream::Tls(s) => s.shutdown().await,
        }
    }
}

/// The TLS a control connection was set up with, kept for its data
/// connections.
#[derive(Debug, Clone)]
struct ControlTls {
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    /// The TLS exporter's secret, for encrypted UDT data channels
    /// (`TPRT udt:aes-gcm`, docs/udt.md).
    udt_secret: Option<ferry_io::transport::udt_seal::SealSecret>,
}

/// What the server said it supports in FEAT (RFC 2389): parsed by the
/// protocol core.
pub use ferry_proto::client::Features;

/// MLSx and `ls -l` lines, parsed by the protocol core.
pub use ferry_proto::client::listing::{parse_list_line, parse_mlsx};

/// An open control connection; [`login_with`](Self::login_with) reads the
/// greeting and logs in.
#[derive(Debug)]
pub struct ControlChannel {
    stream: ControlStream,
    /// Set when the control connection is TLS (ftps://).
    tls: Option<ControlTls>,
    /// What data connections get: TLS once the server accepted PROT P.
    protection: DataProtection,
    /// The 220 greeting has been read (before AUTH TLS).
    greeted: bool,
    parser: ReplyParser,
    /// The commands in flight and what their final replies must be: every
    /// command sent is recorded, every reply after the greeting passes
    /// through it with the time it arrived, and its deadline bounds the
    /// wait for the next reply (the protocol core decides; this shell moves
    /// bytes and passes `now`).
    pipeline: Pipeline,
    buf: Vec<u8>,
    pub features: Features,
    timeout: Duration,
    peer: SocketAddr,
    ty: Option<TransferType>,
    epsv_failed: bool,
}

/// The control connection's socket, for the kernel's view of the path
/// (`ferry probe` reads its RTT estimate).
impl std::os::fd::AsFd for ControlChannel {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.stream.tcp().as_fd()
    }
}

impl ControlChannel {
    pub async fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self, ClientError> {
        let addr = format!("{}:{port}", if host.contains(':') { format!("[{host}]") } else { host.to_string() });
        let stream = tokio::time::timeout(timeout, TcpStream::connect(&addr))
            .await
            .map_err(|_| ClientError::Timeout { what: format!("connecting to {addr}"), secs: timeout.as_secs() })?
            .map_err(|source| ClientError::Connect { addr: addr.clone(), error: source })?;
        stream.set_nodelay(true)?;
        let peer = stream.peer_addr()?;
        Ok(Self {
            stream: ControlStream::Plain(stream),
            tls: None,
            protection: DataProtection::Clear,
            greeted: false,
            parser: ReplyParser::default(),
            pipeline: Pipeline::new(timeout),
            buf: vec![0; 16384],
            features: Features::default(),
            timeout,
            peer,
            ty: None,
            epsv_failed: false,
        })
    }

    /// Connects and switches the control connection to TLS with `AUTH
    /// TLS` (RFC 4217 §4), verifying the server's certificate for `host`.
    /// AUTH goes out before the greeting is read (servers read input only
    /// after greeting), which saves a round trip.
    pub async fn connect_tls(
        host: &str,
        port: u16,
        timeout: Duration,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<Self, ClientError> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| ClientError::Usage(format!("{host:?} is not a valid TLS server name")))?;
        let mut c = Self::connect(host, port, timeout).await?;
        let auth = Command::Auth("TLS".into());
        c.send(&auth).await?;
        c.banner().await?;
        let r = c.reply().await?;
        if !auth_tls_accepted(&r) {
            return Err(ClientError::Tls(format!(
                "the server at {host}:{port} does not offer TLS (AUTH TLS answered {} {}); use ftp:// for a clear                  connection",
                r.code,
                r.lines.join(" / ")
            )));
        }
        let ControlStream::Plain(tcp) = c.stream else {
            return Err(ClientError::Tls("the control connection is already TLS".into()));
        };
        let connector = tokio_rustls::TlsConnector::from(config.clone());
        let stream = tokio::time::timeout(timeout, connector.connect(name.clone(), tcp))
            .await
            .map_err(|_| ClientError::Timeout { what: "the TLS handshake".into(), secs: timeout.as_secs() })?
            .map_err(|e| ClientError::Tls(format!("TLS handshake with {host}:{port} failed: {e}")))?;
        let udt_secret = ferry_io::transport::udt_seal::SealSecret::export(&**stream.get_ref().1);
        c.stream = ControlStream::Tls(Box::new(stream));
        c.tls = Some(ControlTls { config, name, udt_secret });
        Ok(c)
    }

    /// Whether the control connection is TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The secret encrypted UDT data channels of this session are keyed
    /// from (the control channel's TLS exporter); `None` on a clear one.
    pub fn udt_secret(&self) -> Option<ferry_io::transport::udt_seal::SealSecret> {
        self.tls.as_ref().and_then(|t| t.udt_secret.clone())
    }

    /// Whether data connections are TLS (PROT P accepted).
    pub fn data_private(&self) -> bool {
        self.protection.is_private()
    }

    /// Records the PROT level the server accepted; data connections opened
    /// from now on follow it (the FTP client is the TLS client on each,
    /// RFC 4217 §7, whichever side connects).
    pub fn set_data_protection(&mut self, level: ProtectionLevel) {
        self.protection = match (&self.tls, level) {
            (Some(t), ProtectionLevel::Private) => {
                DataProtection::Client { config: t.config.clone(), name: t.name.clone() }
            }
            _ => DataProtection::Clear,
        };
    }

    /// How data connections of this session are protected.
    pub fn data_protection(&self) -> DataProtection {
        self.protection.clone()
    }

    /// Wraps a new data connection in TLS when PROT P is in force.
    pub fn protect(&self, sock: std::net::TcpStream) -> Result<DataStream, ClientError> {
        self.protection.wrap(sock).map_err(|e| ClientError::Data(e.to_string()))
    }

    /// Reads the greeting. [`login_with`](Self::login_with) sends its
    /// commands before reading it, since servers read their input only
    /// after greeting: waiting for the banner would cost a round trip.
    async fn banner(&mut self) -> Result<(), ClientError> {
        if std::mem::replace(&mut self.greeted, true) {
            return Ok(());
        }
        loop {
            // The greeting answers no command: it bypasses the pipeline.
            let r = self.read_reply(Some(Instant::now() + self.timeout)).await?;
            match greeting(&r) {
                Greeting::Wait => continue,
                Greeting::Ready => return Ok(()),
                Greeting::Refused => return Err(ClientError::Refused { command: "connect".into(), reply: r }),
            }
        }
    }

    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The kernel's view of the control connection (RTT, window...).
    pub fn tcp_info(&self) -> std::io::Result<ferry_io::tcpinfo::TcpInfo> {
        ferry_io::tcpinfo::tcp_info(self.stream.tcp())
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.stream.tcp().local_addr()
    }

    /// Reads the next complete reply, waiting until `deadline` (`None`:
    /// as long as it takes) when none is buffered.
    async fn read_reply(&mut self, deadline: Option<Instant>) -> Result<Reply, ClientError> {
        loop {
            if let Some(r) = self.parser.next_reply()? {
                tracing::trace!(code = r.code.get(), text = %r.text(), "reply");
                return Ok(r);
            }
            // `timeout_at` polls the read first: bytes already waiting are
            // taken even when the deadline has passed.
            let n = match deadline {
                Some(d) => tokio::time::timeout_at(d, self.stream.read(&mut self.buf))
                    .await
                    .map_err(|_| ClientError::Timeout { what: self.waiting_for(), secs: self.timeout.as_secs() })??,
                None => self.stream.read(&mut self.buf).await?,
            };
            if n == 0 {
                return Err(ClientError::Closed);
            }
            self.parser.push(&self.buf[..n]);
        }
    }

    fn waiting_for(&self) -> String {
        match self.pipeline.front() {
            Some((_, Command::Pass(_))) => "waiting for the server's reply to PASS".into(),
            Some((_, c)) => format!("waiting for the server's reply to {c}"),
            None => "waiting for the server's reply".into(),
        }
    }

    /// Reads the next reply and passes it through the pipeline with the
    /// time it arrived: what it answers, and whether it is what that
    /// command needed. `untimed`: wait without limit (a transfer's final
    /// reply); otherwise until the pipeline's deadline, or the session's
    /// timeout from now when the pipeline sets none (nothing in flight, a
    /// transfer running, an untimed command).
    async fn event(&mut self, untimed: bool) -> Result<PipelineEvent, ClientError> {
        let deadline = match self.pipeline.deadline() {
            _ if untimed => None,
            Some(d) => Some(Instant::from_std(d)),
            None => Some(Instant::now() + self.timeout),
        };
        let r = self.read_reply(deadline).await?;
        Ok(self.pipeline.on_reply(r, std::time::Instant::now()))
    }

    /// The next reply's meaning (see [`Pipeline::on_reply`]).
    pub async fn next_event(&mut self) -> Result<PipelineEvent, ClientError> {
        self.event(false).await
    }

    /// The next reply's meaning, waiting without a time limit (a
    /// transfer's final reply comes when the data is through).
    pub async fn next_event_untimed(&mut self) -> Result<PipelineEvent, ClientError> {
        self.event(true).await
    }

    /// Reads the next complete reply (through the pipeline).
    pub async fn reply(&mut self) -> Result<Reply, ClientError> {
        Ok(event_reply(self.event(false).await?))
    }

    /// Like [`reply`](Self::reply) but without a time limit: for the final
    /// reply of a transfer, which arrives when the data is through, and a
    /// third-party server's replies, which wait for the other server.
    pub async fn reply_untimed(&mut self) -> Result<Reply, ClientError> {
        Ok(event_reply(self.event(true).await?))
    }

    /// Records commands written to the connection in the pipeline; those
    /// from index `untimed_from` on get no deadline.
    fn record(&mut self, cmds: &[(Command, Expect)], untimed_from: usize) {
        let now = std::time::Instant::now();
        for (i, (c, e)) in cmds.iter().enumerate() {
            let untimed = i >= untimed_from;
            if let Command::Batch(b) = c {
                // A batch (BRET/BSTO) is answered as the commands it
                // stands for (docs/batch.md): wait for their replies.
                tracing::debug!(command = b.verb(), files = b.files.len(), stream = b.stream, "batch sent");
                for x in b.expand() {
                    let e = Expect::for_command(&x);
                    if untimed {
                        self.pipeline.sent_untimed(x, e, now);
                    } else {
                        self.pipeline.sent(x, e, now);
                    }
                }
                continue;
            }
            match c {
                Command::Pass(_) => tracing::trace!("command PASS ****"),
                c => tracing::trace!(command = %c, "command"),
            }
            if untimed {
                self.pipeline.sent_untimed(c.clone(), *e, now);
            } else {
                self.pipeline.sent(c.clone(), *e, now);
            }
        }
    }

    /// Sends commands in one write, each with what its final reply must
    /// be. Those from index `untimed_from` on have replies that depend on
    /// another party (a third-party transfer): the pipeline sets them no
    /// deadline ([`Pipeline::sent_untimed`]).
    pub async fn send_expecting(&mut self, cmds: &[(Command, Expect)], untimed_from: usize) -> Result<(), ClientError> {
        let mut out = Vec::new();
        for (c, _) in cmds {
            out.extend_from_slice(&c.to_wire());
        }
        self.stream.write_all(&out).await?;
        self.record(cmds, untimed_from);
        Ok(())
    }

    pub async fn send(&mut self, cmd: &Command) -> Result<(), ClientError> {
        self.send_batch(std::slice::from_ref(cmd)).await
    }

    /// Sends a command and returns its final reply, whatever it is.
    pub async fn command(&mut self, cmd: &Command) -> Result<Reply, ClientError> {
        self.send(cmd).await?;
        loop {
            let r = self.reply().await?;
            if !r.code.is_preliminary() {
                return Ok(r);
            }
        }
    }

    /// Sends a command and requires a positive (2xx or, for `allow_3xx`,
    /// 3xx) final reply.
    pub async fn expect(&mut self, cmd: &Command) -> Result<Reply, ClientError> {
        let r = self.command(cmd).await?;
        if r.code.is_positive_completion() || r.code.is_intermediate() {
            Ok(r)
        } else {
            Err(refused(cmd, r))
        }
    }

    /// Sends several commands in one write: their replies come back in
    /// order, and a batch costs one round trip instead of one per command.
    pub async fn send_batch(&mut self, cmds: &[Command]) -> Result<(), ClientError> {
        let cmds: Vec<(Command, Expect)> = cmds.iter().map(|c| (c.clone(), Expect::for_command(c))).collect();
        self.send_expecting(&cmds, cmds.len()).await
    }

    /// Greets and logs in with USER, PASS, FEAT (and a speculative `OPTS
    /// UTF8 ON`) in one round trip. With `probe`, an `MLST` of that path
    /// rides along and its facts are returned: `Some(None)` if it does not
    /// exist, `None` if the server has no MLST (ask it another way). The
    /// `then` commands go out in the same write; their replies are left
    /// for the caller to read.
    pub async fn login_with(
        &mut self,
        user: &str,
        password: &str,
        probe: Option<&str>,
        then: &[Command],
    ) -> Result<Option<Option<FileFacts>>, ClientError> {
        // The greeting is read by `banner` (it may have been read before
        // AUTH TLS); the sequence checks the login's own replies.
        let (mut login, mut batch) = LoginSequence::new(user, password, self.is_tls(), probe, true);
        batch.extend_from_slice(then);
        self.send_batch(&batch).await?;
        self.banner().await?;
        // After a refusal the connection is dropped: the replies to the
        // rest of the batch do not matter.
        let outcome = loop {
            let r = self.reply().await?;
            match login.on_reply(&r) {
                Ok(Some(outcome)) => break outcome,
                Ok(None) => {}
                Err(LoginError::Greeting(reply)) => {
                    return Err(ClientError::Refused { command: "connect".into(), reply })
                }
                Err(LoginError::Refused { user, reply }) => return Err(ClientError::Login { user, reply }),
                Err(LoginError::Security { command, reply }) => return Err(refused(&command, reply)),
            }
        };
        if outcome.data_private {
            self.set_data_protection(ProtectionLevel::Private);
        }
        self.features = outcome.features;
        Ok(outcome.probe)
    }

    pub async fn set_type(&mut self, ty: TransferType) -> Result<(), ClientError> {
        if self.ty != Some(ty) {
            self.expect(&Command::Type(ty)).await?;
            self.ty = Some(ty);
        }
        Ok(())
    }

    /// Forgets the transfer type, after a TYPE whose outcome is unknown.
    pub fn forget_type(&mut self) {
        self.ty = None;
    }

    /// The TYPE command needed to switch to `ty`, if any, assuming it will
    /// succeed: for callers that pipeline it with other commands and give
    /// up the connection if it fails.
    pub fn switch_type(&mut self, ty: TransferType) -> Option<Command> {
        (self.ty != Some(ty)).then(|| {
            self.ty = Some(ty);
            Command::Type(ty)
        })
    }

    /// Asks for a passive data port: EPSV (RFC 2428), falling back to PASV
    /// for servers without it. The address of an EPSV reply is the control
    /// connection's peer, by definition.
    pub async fn passive(&mut self) -> Result<SocketAddr, ClientError> {
        let peer = self.peer.ip();
        if !self.epsv_failed {
            let epsv = Command::Epsv(EpsvArg::Any);
            let r = self.command(&epsv).await?;
            match after_epsv(&r, peer) {
                PassiveStep::Connect(addr) => return Ok(addr),
                PassiveStep::Refused => return Err(refused(&epsv, r)),
                PassiveStep::TryPasv => self.epsv_failed = true,
            }
        }
        let r = self.command(&Command::Pasv).await?;
        after_pasv(&r, peer).ok_or_else(|| refused(&Command::Pasv, r))
    }

    pub async fn size(&mut self, path: &str) -> Result<Option<u64>, ClientError> {
        let r = self.command(&Command::Size(path.to_string())).await?;
        Ok(ferry_proto::client::parse::size(&r))
    }

    /// Facts of one path via MLST, or `None` when it does not exist (or the
    /// server lacks MLST).
    pub async fn stat(&mut self, path: &str) -> Result<Option<FileFacts>, ClientError> {
        if !self.features.has("MLST") {
            // Fall back to SIZE (files) and CWD (directories).
            let r = self.command(&Command::Size(path.to_string())).await?;
            if let StatStep::Found(facts) = after_size(path, &r) {
                return Ok(Some(facts));
            }
            let r = self.command(&Command::Cwd(path.to_string())).await?;
            return Ok(after_cwd(path, &r));
        }
        let r = self.command(&Command::Mlst(Some(path.to_string()))).await?;
        Ok(mlst_facts(&r))
    }

    /// Says goodbye without waiting for the answer: a round trip at the end
    /// of every copy buys nothing (globus-url-copy does not even send QUIT).
    pub async fn quit(mut self) {
        let _ = self.send(&Command::Quit).await;
        let _ = self.stream.shutdown().await;
    }
}

pub(crate) fn refused(cmd: &Command, reply: Reply) -> ClientError {
    let command = match cmd {
        Command::Pass(_) => "PASS".to_string(),
        c => c.to_string(),
    };
    ClientError::Refused { command, reply }
}

/// The reply an event came from.
pub(crate) fn event_reply(ev: PipelineEvent) -> Reply {
    match ev {
        PipelineEvent::Preliminary { reply, .. }
        | PipelineEvent::Final { reply, .. }
        | PipelineEvent::Marker { reply, .. }
        | PipelineEvent::Unsolicited(reply) => reply,
    }
}
