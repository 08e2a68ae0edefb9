//! The client side of a control connection.

use crate::error::ClientError;
use ferry_io::tls::{DataProtection, DataStream};
use ferry_proto::command::ProtectionLevel;
use ferry_proto::command::{Command, EpsvArg, TransferType};
use ferry_proto::facts::{FileFacts, FileKind};
use ferry_proto::host_port::{parse_epsv_reply, parse_pasv_reply};
use ferry_proto::{Reply, ReplyParser};
use rustls::pki_types::ServerName;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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
}

/// What the server said it supports in FEAT (RFC 2389).
#[derive(Debug, Clone, Default)]
pub struct Features {
    names: BTreeSet<String>,
    lines: Vec<String>,
}

impl Features {
    fn parse(reply: &Reply) -> Self {
        let mut f = Features::default();
        if reply.code.get() != 211 {
            return f;
        }
        let n = reply.lines.len();
        for line in reply.lines.iter().take(n.saturating_sub(1)).skip(1) {
            let line = line.trim();
            if let Some(name) = line.split_whitespace().next() {
                f.names.insert(name.to_ascii_uppercase());
                f.lines.push(line.to_string());
            }
        }
        f
    }

    pub fn has(&self, name: &str) -> bool {
        self.names.contains(&name.to_ascii_uppercase())
    }

    /// Whether FEAT listed exactly `line` (e.g. `SITE PARTIAL`), ignoring case.
    pub fn has_line(&self, line: &str) -> bool {
        self.lines.iter().any(|l| l.eq_ignore_ascii_case(line))
    }

    /// The full FEAT line for `name` (e.g. `CKSM MD5:10;ADLER32:10;`).
    pub fn line(&self, name: &str) -> Option<&str> {
        self.lines
            .iter()
            .find(|l| l.split_whitespace().next().is_some_and(|n| n.eq_ignore_ascii_case(name)))
            .map(String::as_str)
    }
}

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
        if r.code.get() != 234 {
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
        c.stream = ControlStream::Tls(Box::new(stream));
        c.tls = Some(ControlTls { config, name });
        Ok(c)
    }

    /// Whether the control connection is TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
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
            let r = self.reply().await?;
            match r.code.get() {
                120 => continue, // "ready in nnn minutes"
                220 => return Ok(()),
                _ => return Err(ClientError::Refused { command: "connect".into(), reply: r }),
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

    /// Reads the next complete reply.
    pub async fn reply(&mut self) -> Result<Reply, ClientError> {
        loop {
            if let Some(r) = self.parser.next_reply()? {
                tracing::trace!(code = r.code.get(), text = %r.text(), "reply");
                return Ok(r);
            }
            let n = tokio::time::timeout(self.timeout, self.stream.read(&mut self.buf)).await.map_err(|_| {
                ClientError::Timeout { what: "waiting for the server's reply".into(), secs: self.timeout.as_secs() }
            })??;
            if n == 0 {
                return Err(ClientError::Closed);
            }
            self.parser.push(&self.buf[..n]);
        }
    }

    /// Like [`reply`](Self::reply) but without a time limit: for the final
    /// reply of a transfer, which arrives when the data is through.
    pub async fn reply_untimed(&mut self) -> Result<Reply, ClientError> {
        loop {
            if let Some(r) = self.parser.next_reply()? {
                return Ok(r);
            }
            let n = self.stream.read(&mut self.buf).await?;
            if n == 0 {
                return Err(ClientError::Closed);
            }
            self.parser.push(&self.buf[..n]);
        }
    }

    pub async fn send(&mut self, cmd: &Command) -> Result<(), ClientError> {
        match cmd {
            Command::Pass(_) => tracing::trace!("command PASS ****"),
            c => tracing::trace!(command = %c, "command"),
        }
        self.stream.write_all(&cmd.to_wire()).await?;
        Ok(())
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
        let mut out = Vec::new();
        for c in cmds {
            match c {
                Command::Pass(_) => tracing::trace!("command PASS ****"),
                c => tracing::trace!(command = %c, "command"),
            }
            out.extend_from_slice(&c.to_wire());
        }
        self.stream.write_all(&out).await?;
        Ok(())
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
        let mut batch = vec![Command::User(user.to_string()), Command::Pass(password.to_string())];
        let tls = self.is_tls();
        if tls {
            //= RFC 4217 §9: PBSZ 0, then PROT P, for private data connections.
            batch.extend([Command::Pbsz(0), Command::Prot(ProtectionLevel::Private)]);
        }
        batch.extend([Command::Feat, Command::Opts(ferry_proto::command::Opts::Utf8(true))]);
        if let Some(p) = probe {
            batch.push(Command::Mlst(Some(p.to_string())));
        }
        batch.extend_from_slice(then);
        self.send_batch(&batch).await?;
        self.banner().await?;
        // After a refusal the connection is dropped: the replies to the
        // rest of the batch do not matter.
        let r = self.reply().await?;
        match r.code.get() {
            // No password needed (230), or the client certificate speaks
            // for the user (232, RFC 2228): PASS is then superfluous.
            230 | 232 => {
                let _ = self.reply().await?;
            }
            331 => {
                let p = self.reply().await?;
                if p.code.get() != 230 && p.code.get() != 202 {
                    return Err(ClientError::Login { user: user.into(), reply: p });
                }
            }
            _ => return Err(ClientError::Login { user: user.into(), reply: r }),
        }
        if tls {
            let pbsz = self.reply().await?;
            let prot = self.reply().await?;
            if !pbsz.code.is_positive_completion() {
                return Err(refused(&Command::Pbsz(0), pbsz));
            }
            if !prot.code.is_positive_completion() {
                return Err(refused(&Command::Prot(ProtectionLevel::Private), prot));
            }
            self.set_data_protection(ProtectionLevel::Private);
        }
        let feat = self.reply().await?;
        self.features = Features::parse(&feat);
        let _utf8 = self.reply().await?; // any answer will do
        if probe.is_none() {
            return Ok(None);
        }
        let r = self.reply().await?;
        if !self.features.has("MLST") {
            return Ok(None);
        }
        if r.code.get() != 250 {
            return Ok(Some(None));
        }
        Ok(Some(r.lines.iter().skip(1).find_map(|l| parse_mlsx(l.trim_start()))))
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
        if !self.epsv_failed {
            let r = self.command(&Command::Epsv(EpsvArg::Any)).await?;
            if r.code.get() == 229 {
                if let Some(port) = parse_epsv_reply(&r.lines[0]) {
                    return Ok(SocketAddr::new(self.peer.ip(), port));
                }
            }
            if self.peer.is_ipv6() {
                return Err(refused(&Command::Epsv(EpsvArg::Any), r));
            }
            self.epsv_failed = true;
        }
        let r = self.command(&Command::Pasv).await?;
        if r.code.get() != 227 {
            return Err(refused(&Command::Pasv, r));
        }
        let addr = parse_pasv_reply(&r.lines[0]).ok_or_else(|| refused(&Command::Pasv, r.clone()))?;
        // Servers behind NAT sometimes announce an unusable address; the
        // control peer is where the server really is (as curl and lftp do).
        Ok(SocketAddr::new(self.peer.ip(), addr.port()))
    }

    pub async fn size(&mut self, path: &str) -> Result<Option<u64>, ClientError> {
        let r = self.command(&Command::Size(path.to_string())).await?;
        Ok(if r.code.get() == 213 { r.lines[0].trim().parse().ok() } else { None })
    }

    /// Facts of one path via MLST, or `None` when it does not exist (or the
    /// server lacks MLST).
    pub async fn stat(&mut self, path: &str) -> Result<Option<FileFacts>, ClientError> {
        if !self.features.has("MLST") {
            // Fall back to SIZE (files) and CWD (directories).
            if let Some(size) = self.size(path).await? {
                return Ok(Some(facts(path, FileKind::File, size)));
            }
            let r = self.command(&Command::Cwd(path.to_string())).await?;
            return Ok((r.code.get() == 250).then(|| facts(path, FileKind::Dir, 0)));
        }
        let r = self.command(&Command::Mlst(Some(path.to_string()))).await?;
        if r.code.get() != 250 {
            return Ok(None);
        }
        Ok(r.lines.iter().skip(1).find_map(|l| parse_mlsx(l.trim_start())))
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

fn facts(name: &str, kind: FileKind, size: u64) -> FileFacts {
    FileFacts {
        name: name.rsplit('/').next().unwrap_or(name).to_string(),
        kind,
        size,
        modified: 0,
        // Unknown: the destination gets its default mode.
        mode: 0,
        uid: 0,
        gid: 0,
        nlink: 1,
        unique: (0, 0),
    }
}

/// Parses one MLSx line (`fact=value;...; name`). Unknown facts are ignored.
pub fn parse_mlsx(line: &str) -> Option<FileFacts> {
    let (fact_str, name) = line.split_once(' ')?;
    let mut f = facts(name, FileKind::Other, 0);
    f.name = name.to_string();
    for fact in fact_str.split(';').filter(|s| !s.is_empty()) {
        let (k, v) = fact.split_once('=')?;
        match k.to_ascii_lowercase().as_str() {
            "type" => {
                f.kind = match v.to_ascii_lowercase().as_str() {
                    "file" => FileKind::File,
                    "dir" => FileKind::Dir,
                    "cdir" | "pdir" => return None,
                    t if t.contains("slink") || t.contains("symlink") => FileKind::Symlink,
                    _ => FileKind::Other,
                }
            }
            "size" => f.size = v.parse().unwrap_or(0),
            "modify" => f.modified = ferry_proto::facts::parse_time_val(v).unwrap_or(0),
            "unix.mode" => f.mode = u32::from_str_radix(v, 8).unwrap_or(0),
            // RFC 3659 §7.5.2: an opaque identity; Ferry and Globus write
            // device-inode in hex. Tree copies use it to notice loops.
            "unique" => {
                f.unique =
                    match v.split_once('-').map(|(a, b)| (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16))) {
                        Some((Ok(a), Ok(b))) => (a, b),
                        _ => (xxhash_rust::xxh3::xxh3_64(v.as_bytes()), 1),
                    }
            }
            _ => {}
        }
    }
    Some(f)
}

/// Parses a Unix `ls -l` LIST line, for servers without MLSD (vsftpd).
pub fn parse_list_line(line: &str) -> Option<FileFacts> {
    let mut it = line.split_whitespace();
    let perms = it.next()?;
    let kind = match perms.chars().next()? {
        'd' => FileKind::Dir,
        '-' => FileKind::File,
        'l' => FileKind::Symlink,
        _ => return None,
    };
    let _links = it.next()?;
    let _owner = it.next()?;
    let _group = it.next()?;
    let size: u64 = it.next()?.parse().ok()?;
    // Month, day, time-or-year, then the name (which may contain spaces).
    let mut rest = line;
    for _ in 0..8 {
        rest = rest.trim_start();
        rest = &rest[rest.find(char::is_whitespace)?..];
    }
    let mut name = rest.trim_start().to_string();
    if kind == FileKind::Symlink {
        if let Some(i) = name.find(" -> ") {
            name.truncate(i);
        }
    }
    if name == "." || name == ".." {
        return None;
    }
    let mut f = facts(&name, kind, size);
    f.name = name;
    f.mode = list_mode(perms);
    Some(f)
}

/// The permission bits of an `ls -l` mode string (`-rw-r-----`).
fn list_mode(perms: &str) -> u32 {
    let b = perms.as_bytes();
    if b.len() < 10 {
        return 0;
    }
    (1..10).fold(0, |m, i| (m << 1) | u32::from(!matches!(b[i], b'-' | b'S' | b'T')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_listing_lines() {
        let f = parse_mlsx("Type=file;Size=12;Modify=20261121011836;UNIX.mode=0600; a b.txt").unwrap();
        assert_eq!((f.name.as_str(), f.kind, f.size, f.mode), ("a b.txt", FileKind::File, 12, 0o600));
        assert!(parse_mlsx("Type=cdir;Modify=20261121011836; .").is_none());
        let f = parse_list_line("drwxr-xr-x    2 1000     1000         4096 Nov 21 02:11 my dir").unwrap();
        assert_eq!((f.name.as_str(), f.kind), ("my dir", FileKind::Dir));
        let f = parse_list_line("-rw-r--r--    1 0 0 3000000 Jan  3  2024 big.bin").unwrap();
        assert_eq!((f.name.as_str(), f.size), ("big.bin", 3000000));
        assert!(parse_list_line("total 12").is_none());
    }
}
