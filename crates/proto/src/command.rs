//! Control-channel commands as typed values, parsed from one line and
//! formatted back to it.
//!
//! Covers RFC 959 (§4.1), the extensions real clients send — RFC 2389
//! FEAT/OPTS, RFC 3659 SIZE/MDTM/MLST/MLSD/REST STREAM, RFC 2428 EPRT/EPSV,
//! RFC 2228/4217 AUTH/PBSZ/PROT, the `MFMT` draft — and the GridFTP commands
//! of GFD.20/GFD.47 that globus-url-copy and gfal2 send.
//!
//! The parser is total: every input yields a command or a [`CommandError`]
//! that knows its reply code (500 unknown, 501 bad argument, 502 known but
//! not implemented, 504 parameter not implemented). It never panics; the
//! fuzz target `command_parser` checks that.

use crate::host_port::{self, HostPortError};
use crate::reply::{Reply, ReplyCode};
use crate::restart::{RangeError, RangeSet};
use std::fmt;
use std::net::{SocketAddr, SocketAddrV4};
use thiserror::Error;

/// RFC 959 §3.1.1 data types. Only ASCII (non-print) and image are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferType {
    Ascii,
    Image,
}

/// RFC 959 §3.4 transmission modes, plus GridFTP extended block mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferMode {
    Stream,
    /// GFD.20 "Extended Block Mode": 17-byte headers, out-of-order blocks,
    /// parallel connections.
    ExtendedBlock,
}

/// RFC 2228 §3 data channel protection levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtectionLevel {
    Clear,
    Safe,
    Confidential,
    Private,
}

/// GFD.20 `DCAU`: data channel authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dcau {
    None,
    Self_,
    Subject(String),
}

/// Argument of `REST`: a stream offset (RFC 3659 §5) or GridFTP ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestArg {
    Offset(u64),
    Ranges(RangeSet),
}

/// `EPSV` argument (RFC 2428 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpsvArg {
    Any,
    Protocol(u8),
    All,
}

/// `OPTS <command> <options>` (RFC 2389 §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opts {
    /// `OPTS UTF8 ON|OFF` (draft-ietf-ftpext-utf-8-option; sent by many clients).
    Utf8(bool),
    /// `OPTS RETR k=v;...` (GFD.20): `Parallelism=n,min,max;` and friends.
    Retr(Vec<(String, String)>),
    /// `OPTS PASV AllowDelayed=0|1;` (Globus delayed passive, used by gfal2).
    Pasv(Vec<(String, String)>),
    /// `OPTS MLST fact;fact;` (RFC 3659 §7.9). `OPTS MLSD` and `OPTS
    /// MLSR` are the same selection: the Globus server takes all three
    /// and applies any of them to MLST, MLSD and MLSR alike.
    Mlst(Vec<String>),
    /// Any other command name with its raw options.
    Other { command: String, args: String },
}

/// `SITE` subcommands that real clients send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteCommand {
    Help,
    /// `SITE CLIENTINFO scheme=ftp;appname="...";...` (globus-url-copy, gfal2).
    ClientInfo(String),
    /// `SITE RETRBUFSIZE n`: what globus-url-copy sends for `-tcp-bs` to the sender.
    RetrBufSize(u64),
    /// `SITE STORBUFSIZE n`: likewise to the receiver.
    StorBufSize(u64),
    /// `SITE BUFSIZE n` / `SITE SBUF n`: both directions.
    BufSize(u64),
    /// `SITE CHMOD mode path` (lftp mirror sends it after uploads).
    Chmod {
        mode: u32,
        path: String,
    },
    /// `SITE PROFILE START|STOP`: Ferry's server-side profiler.
    Profile(ProfileRequest),
    /// `SITE PARTIAL <path>`: what the server holds of an interrupted
    /// upload to `path` (Ferry; `docs/gridftp.md`, "Asking what a partial
    /// upload holds").
    Partial(String),
    /// `SITE SETDISKSTACK <driver,driver...>`: the Globus XIO driver stack
    /// for the disk side (`globus-url-copy -fsstack`). Ferry has one, `file`.
    SetDiskStack(String),
    /// `SITE SETNETSTACK <driver,driver...>`: the Globus XIO driver stack
    /// for the data channels (`globus-url-copy -netstack`): one of Ferry's
    /// transports (`crate::transport`).
    SetNetStack(String),
    /// `SITE UTIME <YYYYMMDDHHMMSS> <path>`: the Globus client library's way
    /// to set a modification time (UTC), as `MFMT` does.
    Utime {
        time: String,
        path: String,
    },
    /// `SITE CHGRP <group> <path>`: a group name or number (Globus).
    Chgrp {
        group: String,
        path: String,
    },
    Other {
        name: String,
        args: String,
    },
}

/// What `SITE PROFILE` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileRequest {
    /// `SITE PROFILE START [interval-ms] [PERF]`: sample the server every
    /// `interval_ms` (100 ms to 60 s), with a perf CPU profile if asked.
    Start { interval_ms: u64, perf: bool },
    /// `SITE PROFILE STOP`: stop and send the samples.
    Stop,
}

/// Sampling interval when `SITE PROFILE START` names none.
pub const DEFAULT_PROFILE_INTERVAL_MS: u64 = 500;

/// `ALLO n [R m]` (RFC 959 §4.1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allo {
    pub size: u64,
    pub record: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    // RFC 959 §4.1.1 access control
    User(String),
    Pass(String),
    Acct(String),
    Cwd(String),
    Cdup,
    Smnt(String),
    Rein,
    Quit,
    // RFC 959 §4.1.2 transfer parameters
    Port(SocketAddrV4),
    Pasv,
    Type(TransferType),
    Stru,
    Mode(TransferMode),
    // RFC 959 §4.1.3 service commands
    Retr(String),
    Stor(String),
    Stou,
    Appe(String),
    Allo(Allo),
    Rest(RestArg),
    Rnfr(String),
    Rnto(String),
    Abor,
    Dele(String),
    Rmd(String),
    Mkd(String),
    Pwd,
    /// Raw argument: may carry `ls`-style options such as `-la`.
    List(Option<String>),
    Nlst(Option<String>),
    Site(SiteCommand),
    Syst,
    Stat(Option<String>),
    Help(Option<String>),
    Noop,
    /// RFC 2640 §4: `LANG [tag]`. Ferry speaks English only; the Globus
    /// server answers `LANG` and `LANG EN` with 200 as well.
    Lang(Option<String>),
    // RFC 2389
    Feat,
    Opts(Opts),
    // RFC 3659
    Size(String),
    Mdtm(String),
    Mlst(Option<String>),
    Mlsd(Option<String>),
    /// `MLSR [path]`: MLSD of a whole tree (Globus; advertised in its FEAT).
    Mlsr(Option<String>),
    // RFC 2428
    Eprt(SocketAddr),
    Epsv(EpsvArg),
    // RFC 2228 / RFC 4217
    Auth(String),
    Pbsz(u64),
    Prot(ProtectionLevel),
    Ccc,
    // draft-somers-ftp-mfxx
    Mfmt {
        time: String,
        path: String,
    },
    // GridFTP (GFD.20, GFD.47)
    Spas,
    Spor(Vec<SocketAddrV4>),
    /// `ERET P <offset> <length> <path>`: partial retrieve.
    Eret {
        offset: u64,
        length: u64,
        path: String,
    },
    /// `ESTO A <offset> <path>`: store at an offset.
    Esto {
        offset: u64,
        path: String,
    },
    Sbuf(u64),
    Dcau(Dcau),
    /// `CKSM <algorithm> <offset> <length> <path>`; length -1 means to the end.
    Cksm {
        algorithm: String,
        offset: u64,
        length: Option<u64>,
        path: String,
    },
    /// `TREV PERF|RESTART <seconds>`: marker frequencies (Globus).
    Trev {
        event: TrevEvent,
        seconds: u32,
    },
    /// `TPRT <name>`: the transport of the next data channels (FTP-ADTS;
    /// `docs/transports.md`, `crate::transport`).
    Tprt(String),
    /// `BRET`/`BSTO`: many files in one line, Ferry to Ferry
    /// (`crate::batch`, docs/batch.md).
    Batch(crate::batch::Batch),
    /// Never on the wire: the end of a `BSTO SYNC` batch in its expansion
    /// (`crate::batch`), which the server answers with the batch's final
    /// reply once its files are durable, and the client waits for.
    BatchEnd {
        files: usize,
    },
}

/// Events whose frequency `TREV` sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrevEvent {
    Perf,
    Restart,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CommandError {
    #[error("empty command line")]
    Empty,
    #[error("command line longer than {0} bytes")]
    TooLong(usize),
    #[error("command line contains a NUL byte")]
    Nul,
    #[error("command line is not valid UTF-8")]
    NotUtf8,
    #[error("unknown command {0}")]
    Unknown(String),
    #[error("{0} is not implemented")]
    NotImplemented(&'static str),
    #[error("{verb}: {reason}")]
    Syntax { verb: &'static str, reason: String },
    #[error("{verb}: {reason}")]
    ParameterNotImplemented { verb: &'static str, reason: String },
    /// EPRT or EPSV naming an address family other than 1 (IPv4) or 2
    /// (IPv6): RFC 2428's own code, 522, which the Globus server also uses.
    #[error("{0}: network protocol not supported, use (1,2)")]
    NetworkProtocol(&'static str),
}

impl CommandError {
    pub fn code(&self) -> ReplyCode {
        match self {
            Self::Empty | Self::TooLong(_) | Self::Unknown(_) => ReplyCode::SYNTAX_ERROR,
            Self::Nul | Self::NotUtf8 | Self::Syntax { .. } => ReplyCode::PARAMETER_SYNTAX_ERROR,
            Self::NotImplemented(_) => ReplyCode::NOT_IMPLEMENTED,
            Self::ParameterNotImplemented { .. } => ReplyCode::PARAMETER_NOT_IMPLEMENTED,
            Self::NetworkProtocol(_) => ReplyCode::NETWORK_PROTOCOL_NOT_SUPPORTED,
        }
    }

    pub fn reply(&self) -> Reply {
        let text = match self {
            Self::Unknown(v) => {
                format!("Unknown command '{v}'; see HELP for the commands this server accepts.")
            }
            Self::Syntax { verb, reason } => format!("Syntax error in {verb} argument: {reason}."),
            Self::ParameterNotImplemented { verb, reason } => format!("{verb}: {reason}."),
            Self::NotImplemented(v) => format!("{v} is not implemented by this server."),
            Self::NetworkProtocol(_) => "Network protocol not supported, use (1,2).".to_string(),
            other => format!("{}{}", capitalize(&other.to_string()), "."),
        };
        Reply::new(self.code(), text)
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn syntax(verb: &'static str, reason: impl Into<String>) -> CommandError {
    CommandError::Syntax { verb, reason: reason.into() }
}

fn unsupported(verb: &'static str, reason: impl Into<String>) -> CommandError {
    CommandError::ParameterNotImplemented { verb, reason: reason.into() }
}

fn required<'a>(verb: &'static str, arg: Option<&'a str>) -> Result<&'a str, CommandError> {
    match arg {
        Some(a) if !a.is_empty() => Ok(a),
        _ => Err(syntax(verb, "an argument is required")),
    }
}

fn no_arg(verb: &'static str, arg: Option<&str>) -> Result<(), CommandError> {
    match arg.map(str::trim) {
        None | Some("") => Ok(()),
        Some(_) => Err(syntax(verb, "takes no argument")),
    }
}

fn number(verb: &'static str, s: &str) -> Result<u64, CommandError> {
    let s = s.trim();
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax(verb, format!("expected a decimal number, got '{}'", truncate(s))));
    }
    s.parse().map_err(|_| syntax(verb, "number out of range"))
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(40) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Parses `k=v;k=v;` option lists (OPTS RETR, OPTS PASV).
fn kv_list(verb: &'static str, s: &str) -> Result<Vec<(String, String)>, CommandError> {
    let mut out = Vec::new();
    for item in s.split(';').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| syntax(verb, format!("expected name=value, got '{}'", truncate(item))))?;
        out.push((k.trim().to_string(), v.trim().to_string()));
        if out.len() > 64 {
            return Err(syntax(verb, "too many options"));
        }
    }
    Ok(out)
}

impl Command {
    /// Parses one command line (without its CRLF).
    pub fn parse(line: &[u8]) -> Result<Command, CommandError> {
        if line.contains(&0) {
            return Err(CommandError::Nul);
        }
        let verb_end = line.iter().position(|&b| b == b' ').unwrap_or(line.len());
        let verb_bytes = &line[..verb_end];
        if verb_bytes.is_empty() {
            return Err(CommandError::Empty);
        }
        if verb_bytes.len() > 8 || !verb_bytes.iter().all(u8::is_ascii_alphabetic) {
            let shown = String::from_utf8_lossy(&verb_bytes[..verb_bytes.len().min(16)]).into_owned();
            return Err(CommandError::Unknown(shown.escape_default().to_string()));
        }
        let verb = std::str::from_utf8(verb_bytes).map_err(|_| CommandError::NotUtf8)?.to_ascii_uppercase();
        // Path arguments are octets (RFC 3659 §2.2): those that are not
        // UTF-8 are carried by `octets`' reversible escape.
        let arg = (verb_end < line.len()).then(|| crate::octets::decode(&line[verb_end + 1..]));
        Self::parse_verb(&verb, arg.as_deref())
    }

    fn parse_verb(verb: &str, arg: Option<&str>) -> Result<Command, CommandError> {
        use Command as C;
        let path = |v: &'static str| required(v, arg).map(str::to_string);
        let opt = || arg.filter(|a| !a.trim().is_empty()).map(str::to_string);
        Ok(match verb {
            "USER" => C::User(required("USER", arg)?.to_string()),
            // PASS may legitimately be empty (anonymous clients).
            "PASS" => C::Pass(arg.unwrap_or("").to_string()),
            "ACCT" => C::Acct(required("ACCT", arg)?.to_string()),
            "CWD" | "XCWD" => C::Cwd(path("CWD")?),
            "CDUP" | "XCUP" => {
                no_arg("CDUP", arg)?;
                C::Cdup
            }
            "SMNT" => C::Smnt(path("SMNT")?),
            "REIN" => C::Rein,
            "QUIT" => C::Quit,
            "PORT" => C::Port(
                host_port::parse_host_port(required("PORT", arg)?)
                    .map_err(|e: HostPortError| syntax("PORT", e.to_string()))?,
            ),
            "PASV" => {
                no_arg("PASV", arg)?;
                C::Pasv
            }
            "TYPE" => C::Type(parse_type(required("TYPE", arg)?)?),
            "STRU" => match required("STRU", arg)?.trim().to_ascii_uppercase().as_str() {
                "F" => C::Stru,
                "R" | "P" => return Err(unsupported("STRU", "only file structure (F) is supported")),
                _ => return Err(syntax("STRU", "expected F, R or P")),
            },
            "MODE" => match required("MODE", arg)?.trim().to_ascii_uppercase().as_str() {
                "S" => C::Mode(TransferMode::Stream),
                "E" => C::Mode(TransferMode::ExtendedBlock),
                "B" | "C" => {
                    return Err(unsupported("MODE", "only stream (S) and extended block (E) modes are supported"))
                }
                _ => return Err(syntax("MODE", "expected S, B, C or E")),
            },
            "RETR" => C::Retr(path("RETR")?),
            "STOR" => C::Stor(path("STOR")?),
            "STOU" => C::Stou,
            "APPE" => C::Appe(path("APPE")?),
            "ALLO" => C::Allo(parse_allo(required("ALLO", arg)?)?),
            "REST" => C::Rest(parse_rest(required("REST", arg)?)?),
            "RNFR" => C::Rnfr(path("RNFR")?),
            "RNTO" => C::Rnto(path("RNTO")?),
            "ABOR" => C::Abor,
            "DELE" => C::Dele(path("DELE")?),
            "RMD" | "XRMD" => C::Rmd(path("RMD")?),
            "MKD" | "XMKD" => C::Mkd(path("MKD")?),
            "PWD" | "XPWD" => C::Pwd,
            "LIST" => C::List(opt()),
            "NLST" => C::Nlst(opt()),
            "SITE" => C::Site(parse_site(required("SITE", arg)?)?),
            "SYST" => C::Syst,
            "STAT" => C::Stat(opt()),
            "HELP" => C::Help(opt()),
            "NOOP" => C::Noop,
            "FEAT" => C::Feat,
            "TPRT" => {
                let name = required("TPRT", arg)?.trim();
                if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(syntax("TPRT", "expected TPRT <transport name>"));
                }
                C::Tprt(name.to_string())
            }
            "OPTS" => C::Opts(parse_opts(required("OPTS", arg)?)?),
            "SIZE" => C::Size(path("SIZE")?),
            "MDTM" => C::Mdtm(path("MDTM")?),
            "MLST" => C::Mlst(opt()),
            "MLSD" => C::Mlsd(opt()),
            "MLSR" => C::Mlsr(opt()),
            "BRET" => C::Batch(crate::batch::Batch::parse(crate::batch::BatchKind::Retrieve, arg)?),
            "BSTO" => C::Batch(crate::batch::Batch::parse(crate::batch::BatchKind::Store, arg)?),
            "EPRT" => C::Eprt(host_port::parse_eprt(required("EPRT", arg)?).map_err(|e| match e {
                HostPortError::UnsupportedProtocol(_) => CommandError::NetworkProtocol("EPRT"),
                e => syntax("EPRT", e.to_string()),
            })?),
            "EPSV" => C::Epsv(match arg.map(str::trim) {
                None | Some("") => EpsvArg::Any,
                Some(a) if a.eq_ignore_ascii_case("ALL") => EpsvArg::All,
                Some("1") => EpsvArg::Protocol(1),
                Some("2") => EpsvArg::Protocol(2),
                //= RFC 2428 §3: "EPSV<space><net-prt>" where net-prt is a
                //= protocol number; one the server lacks gets 522.
                Some(a) if a.bytes().all(|b| b.is_ascii_digit()) => return Err(CommandError::NetworkProtocol("EPSV")),
                Some(_) => return Err(syntax("EPSV", "expected 1, 2 or ALL")),
            }),
            "AUTH" => C::Auth(required("AUTH", arg.map(str::trim))?.to_ascii_uppercase()),
            "PBSZ" => C::Pbsz(number("PBSZ", required("PBSZ", arg)?)?),
            "PROT" => C::Prot(match required("PROT", arg)?.trim().to_ascii_uppercase().as_str() {
                "C" => ProtectionLevel::Clear,
                "S" => ProtectionLevel::Safe,
                "E" => ProtectionLevel::Confidential,
                "P" => ProtectionLevel::Private,
                // RFC 2228: an unknown level is "504 Command not implemented
                // for that parameter".
                _ => return Err(unsupported("PROT", "unknown protection level; use C or P")),
            }),
            "CCC" => C::Ccc,
            "ADAT" | "MIC" | "CONF" | "ENC" => return Err(CommandError::NotImplemented("RFC 2228 security exchange")),
            "MFMT" => {
                let (time, path) = required("MFMT", arg)?
                    .split_once(' ')
                    .ok_or_else(|| syntax("MFMT", "expected YYYYMMDDHHMMSS path"))?;
                if time.len() != 14 || !time.bytes().all(|b| b.is_ascii_digit()) || path.is_empty() {
                    return Err(syntax("MFMT", "expected YYYYMMDDHHMMSS path"));
                }
                C::Mfmt { time: time.to_string(), path: path.to_string() }
            }
            "SPAS" => C::Spas,
            "SPOR" => {
                let mut addrs = Vec::new();
                for hp in required("SPOR", arg)?.split_whitespace() {
                    if addrs.len() >= 256 {
                        return Err(syntax("SPOR", "too many addresses"));
                    }
                    addrs.push(host_port::parse_host_port(hp).map_err(|e| syntax("SPOR", e.to_string()))?);
                }
                if addrs.is_empty() {
                    return Err(syntax("SPOR", "an address is required"));
                }
                C::Spor(addrs)
            }
            "ERET" => parse_eret(required("ERET", arg)?)?,
            "ESTO" => parse_esto(required("ESTO", arg)?)?,
            "SBUF" => C::Sbuf(number("SBUF", required("SBUF", arg)?)?),
            "DCAU" => {
                let a = required("DCAU", arg)?.trim();
                let (mode, rest) = a.split_once(' ').unwrap_or((a, ""));
                C::Dcau(match mode.to_ascii_uppercase().as_str() {
                    "N" => Dcau::None,
                    "A" => Dcau::Self_,
                    "S" if !rest.trim().is_empty() => Dcau::Subject(rest.trim().to_string()),
                    "S" => return Err(syntax("DCAU", "S requires a subject")),
                    _ => return Err(syntax("DCAU", "expected N, A or S <subject>")),
                })
            }
            "CKSM" => parse_cksm(required("CKSM", arg)?)?,
            "TREV" => {
                let a = required("TREV", arg)?;
                let mut it = a.split_whitespace();
                let event = match it.next().map(str::to_ascii_uppercase).as_deref() {
                    Some("PERF") => TrevEvent::Perf,
                    Some("RESTART") => TrevEvent::Restart,
                    _ => return Err(unsupported("TREV", "unsupported event; use PERF or RESTART")),
                };
                let secs = it.next().ok_or_else(|| syntax("TREV", "expected an interval in seconds"))?;
                let seconds = number("TREV", secs)?;
                C::Trev { event, seconds: u32::try_from(seconds).map_err(|_| syntax("TREV", "interval too large"))? }
            }
            "LANG" => C::Lang(opt().map(|l| l.trim().to_string())),
            other => return Err(CommandError::Unknown(other.to_string())),
        })
    }

    /// The verb as sent on the wire.
    pub fn verb(&self) -> &'static str {
        use Command as C;
        match self {
            C::User(_) => "USER",
            C::Pass(_) => "PASS",
            C::Acct(_) => "ACCT",
            C::Cwd(_) => "CWD",
            C::Cdup => "CDUP",
            C::Smnt(_) => "SMNT",
            C::Rein => "REIN",
            C::Quit => "QUIT",
            C::Port(_) => "PORT",
            C::Pasv => "PASV",
            C::Type(_) => "TYPE",
            C::Stru => "STRU",
            C::Mode(_) => "MODE",
            C::Retr(_) => "RETR",
            C::Stor(_) => "STOR",
            C::Stou => "STOU",
            C::Appe(_) => "APPE",
            C::Allo(_) => "ALLO",
            C::Rest(_) => "REST",
            C::Rnfr(_) => "RNFR",
            C::Rnto(_) => "RNTO",
            C::Abor => "ABOR",
            C::Dele(_) => "DELE",
            C::Rmd(_) => "RMD",
            C::Mkd(_) => "MKD",
            C::Pwd => "PWD",
            C::List(_) => "LIST",
            C::Nlst(_) => "NLST",
            C::Site(_) => "SITE",
            C::Syst => "SYST",
            C::Stat(_) => "STAT",
            C::Help(_) => "HELP",
            C::Lang(_) => "LANG",
            C::Noop => "NOOP",
            C::Feat => "FEAT",
            C::Tprt(_) => "TPRT",
            C::Opts(_) => "OPTS",
            C::Size(_) => "SIZE",
            C::Mdtm(_) => "MDTM",
            C::Mlst(_) => "MLST",
            C::Mlsd(_) => "MLSD",
            C::Mlsr(_) => "MLSR",
            C::Eprt(_) => "EPRT",
            C::Epsv(_) => "EPSV",
            C::Auth(_) => "AUTH",
            C::Pbsz(_) => "PBSZ",
            C::Prot(_) => "PROT",
            C::Ccc => "CCC",
            C::Mfmt { .. } => "MFMT",
            C::Spas => "SPAS",
            C::Spor(_) => "SPOR",
            C::Eret { .. } => "ERET",
            C::Esto { .. } => "ESTO",
            C::Sbuf(_) => "SBUF",
            C::Dcau(_) => "DCAU",
            C::Cksm { .. } => "CKSM",
            C::Trev { .. } => "TREV",
            C::Batch(b) => b.verb(),
            C::BatchEnd { .. } => "BSTO",
        }
    }

    /// Whether the command opens a data transfer (and so consumes REST and
    /// a data-channel setup).
    pub fn is_transfer(&self) -> bool {
        matches!(
            self,
            Command::Retr(_)
                | Command::Stor(_)
                | Command::Appe(_)
                | Command::Stou
                | Command::List(_)
                | Command::Nlst(_)
                | Command::Mlsd(_)
                | Command::Mlsr(_)
                | Command::Eret { .. }
                | Command::Esto { .. }
        )
    }

    /// Commands a server acts on while a transfer is running, rather than
    /// queueing them behind it (RFC 959 §4.1.3: ABOR and STAT are answered
    /// during a transfer).
    pub fn is_urgent(&self) -> bool {
        matches!(self, Command::Abor | Command::Stat(None))
    }
}

fn parse_type(a: &str) -> Result<TransferType, CommandError> {
    let parts: Vec<String> = a.split_whitespace().map(str::to_ascii_uppercase).collect();
    match parts.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        // The format control (RFC 959 §3.1.1.5: Non-print, Telnet or ASA
        // carriage control) says how a printer reads the text; a file
        // store keeps the same bytes whatever it is, so T and C are TYPE A
        // too, as the Globus server takes them.
        ["A"] | ["A", "N" | "T" | "C"] => Ok(TransferType::Ascii),
        ["I"] | ["L", "8"] => Ok(TransferType::Image),
        ["E", ..] => Err(unsupported("TYPE", "EBCDIC is not supported")),
        ["L", _] => Err(unsupported("TYPE", "only byte size 8 is supported")),
        _ => Err(syntax("TYPE", "expected A, I or L 8")),
    }
}

fn parse_allo(a: &str) -> Result<Allo, CommandError> {
    let mut it = a.split_whitespace();
    let size = number("ALLO", it.next().unwrap_or(""))?;
    let record = match (it.next(), it.next()) {
        (None, _) => None,
        (Some(r), Some(n)) if r.eq_ignore_ascii_case("R") => Some(number("ALLO", n)?),
        _ => return Err(syntax("ALLO", "expected <size> [R <record size>]")),
    };
    if it.next().is_some() {
        return Err(syntax("ALLO", "expected <size> [R <record size>]"));
    }
    Ok(Allo { size, record })
}

fn parse_rest(a: &str) -> Result<RestArg, CommandError> {
    let a = a.trim();
    if a.contains('-') {
        RangeSet::parse(a).map(RestArg::Ranges).map_err(|e: RangeError| syntax("REST", e.to_string()))
    } else {
        number("REST", a).map(RestArg::Offset)
    }
}

fn parse_opts(a: &str) -> Result<Opts, CommandError> {
    let a = a.trim_start();
    let (name, rest) = a.split_once(' ').unwrap_or((a, ""));
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(syntax("OPTS", "expected a command name"));
    }
    let rest = rest.trim();
    Ok(match name.to_ascii_uppercase().as_str() {
        "UTF8" | "UTF-8" => match rest.to_ascii_uppercase().as_str() {
            "ON" | "" => Opts::Utf8(true),
            "OFF" => Opts::Utf8(false),
            _ => return Err(syntax("OPTS", "expected UTF8 ON or OFF")),
        },
        "RETR" => Opts::Retr(kv_list("OPTS", rest)?),
        "PASV" => Opts::Pasv(kv_list("OPTS", rest)?),
        "MLST" | "MLSD" | "MLSR" => {
            Opts::Mlst(rest.split(';').map(str::trim).filter(|f| !f.is_empty()).map(str::to_string).take(64).collect())
        }
        _ => Opts::Other { command: name.to_ascii_uppercase(), args: rest.to_string() },
    })
}

fn parse_site(a: &str) -> Result<SiteCommand, CommandError> {
    let a = a.trim_start();
    let (name, rest) = a.split_once(' ').unwrap_or((a, ""));
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(syntax("SITE", "expected a SITE command name"));
    }
    let name = name.to_ascii_uppercase();
    Ok(match name.as_str() {
        "HELP" => SiteCommand::Help,
        "CLIENTINFO" => SiteCommand::ClientInfo(rest.to_string()),
        "RETRBUFSIZE" | "RBUFSZ" | "RBUFSIZ" => SiteCommand::RetrBufSize(number("SITE", rest)?),
        "STORBUFSIZE" | "SBUFSZ" | "SBUFSIZ" => SiteCommand::StorBufSize(number("SITE", rest)?),
        "BUFSIZE" | "SBUF" => SiteCommand::BufSize(number("SITE", rest)?),
        "CHMOD" => {
            let (mode, path) = rest
                .trim_start()
                .split_once(' ')
                .ok_or_else(|| syntax("SITE", "expected CHMOD <octal mode> <path>"))?;
            let mode = u32::from_str_radix(mode, 8)
                .ok()
                .filter(|m| *m <= 0o7777)
                .ok_or_else(|| syntax("SITE", "CHMOD mode must be octal, at most 7777"))?;
            if path.is_empty() {
                return Err(syntax("SITE", "expected CHMOD <octal mode> <path>"));
            }
            SiteCommand::Chmod { mode, path: path.to_string() }
        }
        "PROFILE" => SiteCommand::Profile(parse_profile(rest)?),
        "PARTIAL" if !rest.is_empty() => SiteCommand::Partial(rest.to_string()),
        "PARTIAL" => return Err(syntax("SITE", "expected PARTIAL <path>")),
        "SETDISKSTACK" => {
            let stack = rest.trim();
            if stack.is_empty() || stack.len() > 256 || !stack.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(syntax("SITE", "expected SETDISKSTACK <driver>[,<driver>...]"));
            }
            SiteCommand::SetDiskStack(stack.to_string())
        }
        "SETNETSTACK" => {
            let stack = rest.trim();
            if stack.is_empty() || stack.len() > 256 || !stack.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(syntax("SITE", "expected SETNETSTACK <driver>[,<driver>...]"));
            }
            SiteCommand::SetNetStack(stack.to_string())
        }
        "UTIME" => {
            // The Globus client library (globus_ftp_client_state.c) sends
            // "SITE UTIME %04d%02d%02d%02d%02d%02d <path>", a UTC time.
            let usage = "expected UTIME <YYYYMMDDHHMMSS> <path>";
            let (w, path) = words_then_path(rest, 1).ok_or_else(|| syntax("SITE", usage))?;
            if w[0].len() != 14 || !w[0].bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax("SITE", usage));
            }
            SiteCommand::Utime { time: w[0].to_string(), path: path.to_string() }
        }
        "CHGRP" => {
            // Globus: "SITE CHGRP <group> <path>", a name or a number.
            let usage = "expected CHGRP <group name or number> <path>";
            let (w, path) = words_then_path(rest, 1).ok_or_else(|| syntax("SITE", usage))?;
            let group = w[0];
            if group.len() > 64 || !group.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-$".contains(&b)) {
                return Err(syntax("SITE", "CHGRP: not a group name or number"));
            }
            SiteCommand::Chgrp { group: group.to_string(), path: path.to_string() }
        }
        _ => SiteCommand::Other { name, args: rest.to_string() },
    })
}

fn parse_profile(a: &str) -> Result<ProfileRequest, CommandError> {
    let usage = "expected PROFILE START [interval-ms] [PERF] or PROFILE STOP";
    let mut words = a.split_whitespace();
    let verb = words.next().map(str::to_ascii_uppercase);
    match verb.as_deref() {
        Some("STOP") if words.next().is_none() => Ok(ProfileRequest::Stop),
        Some("START") => {
            let (mut interval_ms, mut perf) = (DEFAULT_PROFILE_INTERVAL_MS, false);
            for (i, w) in words.enumerate() {
                if w.eq_ignore_ascii_case("PERF") && !perf {
                    perf = true;
                } else if i == 0 {
                    interval_ms = w
                        .parse::<u64>()
                        .ok()
                        .filter(|ms| (100..=60_000).contains(ms))
                        .ok_or_else(|| syntax("SITE", "PROFILE START interval must be 100 to 60000 ms"))?;
                } else {
                    return Err(syntax("SITE", usage));
                }
            }
            Ok(ProfileRequest::Start { interval_ms, perf })
        }
        _ => Err(syntax("SITE", usage)),
    }
}

/// Splits off `n` whitespace-separated words; the remainder (the path) is
/// kept verbatim, since file names may contain spaces.
fn words_then_path(a: &str, n: usize) -> Option<(Vec<&str>, &str)> {
    let mut words = Vec::with_capacity(n);
    let mut rest = a.trim_start_matches(' ');
    for _ in 0..n {
        let end = rest.find(' ')?;
        words.push(&rest[..end]);
        rest = rest[end..].trim_start_matches(' ');
    }
    (!rest.is_empty()).then_some((words, rest))
}

fn parse_eret(a: &str) -> Result<Command, CommandError> {
    // GFD.20: ERET <module> <args> <path>; module "P" takes "<offset> <length>".
    let (w, path) = words_then_path(a, 3).ok_or_else(|| syntax("ERET", "expected P <offset> <length> <path>"))?;
    if !w[0].eq_ignore_ascii_case("P") {
        return Err(unsupported("ERET", "only the partial-file module P is supported"));
    }
    Ok(Command::Eret { offset: number("ERET", w[1])?, length: number("ERET", w[2])?, path: path.to_string() })
}

fn parse_esto(a: &str) -> Result<Command, CommandError> {
    // GFD.20: ESTO <module> <args> <path>; module "A" takes "<offset>".
    let (w, path) = words_then_path(a, 2).ok_or_else(|| syntax("ESTO", "expected A <offset> <path>"))?;
    if !w[0].eq_ignore_ascii_case("A") {
        return Err(unsupported("ESTO", "only the adjusted-offset module A is supported"));
    }
    Ok(Command::Esto { offset: number("ESTO", w[1])?, path: path.to_string() })
}

fn parse_cksm(a: &str) -> Result<Command, CommandError> {
    let (w, path) =
        words_then_path(a, 3).ok_or_else(|| syntax("CKSM", "expected <algorithm> <offset> <length> <path>"))?;
    let length = if w[2] == "-1" { None } else { Some(number("CKSM", w[2])?) };
    if w[0].is_empty() || w[0].len() > 16 || !w[0].bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(syntax("CKSM", "bad algorithm name"));
    }
    Ok(Command::Cksm {
        algorithm: w[0].to_ascii_uppercase(),
        offset: number("CKSM", w[1])?,
        length,
        path: path.to_string(),
    })
}

fn kv_to_string(kv: &[(String, String)]) -> String {
    kv.iter().map(|(k, v)| format!("{k}={v};")).collect()
}

impl Command {
    /// The line as sent, with CRLF: paths that stand for octets which are
    /// not UTF-8 go out as those octets, 0xFF doubled for Telnet (see
    /// `octets::to_control`).
    pub fn to_wire(&self) -> Vec<u8> {
        let mut line = crate::octets::to_control(&self.to_string());
        line.extend_from_slice(b"\r\n");
        line
    }
}

/// The wire form, without CRLF. `Command::parse(x.to_string())` gives `x` back.
impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Command as C;
        let v = self.verb();
        match self {
            C::User(a)
            | C::Pass(a)
            | C::Acct(a)
            | C::Cwd(a)
            | C::Smnt(a)
            | C::Retr(a)
            | C::Stor(a)
            | C::Appe(a)
            | C::Rnfr(a)
            | C::Rnto(a)
            | C::Dele(a)
            | C::Rmd(a)
            | C::Mkd(a)
            | C::Size(a)
            | C::Mdtm(a)
            | C::Auth(a) => write!(f, "{v} {a}"),
            C::List(a) | C::Nlst(a) | C::Stat(a) | C::Help(a) | C::Lang(a) | C::Mlst(a) | C::Mlsd(a) | C::Mlsr(a) => {
                match a {
                    Some(a) => write!(f, "{v} {a}"),
                    None => f.write_str(v),
                }
            }
            C::Cdup
            | C::Rein
            | C::Quit
            | C::Pasv
            | C::Stou
            | C::Abor
            | C::Pwd
            | C::Syst
            | C::Noop
            | C::Feat
            | C::Ccc
            | C::Spas => f.write_str(v),
            C::Stru => write!(f, "{v} F"),
            C::Tprt(name) => write!(f, "{v} {name}"),
            C::Port(a) => write!(f, "{v} {}", host_port::format_host_port(*a)),
            C::Type(TransferType::Ascii) => write!(f, "{v} A"),
            C::Type(TransferType::Image) => write!(f, "{v} I"),
            C::Mode(TransferMode::Stream) => write!(f, "{v} S"),
            C::Mode(TransferMode::ExtendedBlock) => write!(f, "{v} E"),
            C::Allo(Allo { size, record: None }) => write!(f, "{v} {size}"),
            C::Allo(Allo { size, record: Some(r) }) => write!(f, "{v} {size} R {r}"),
            C::Rest(RestArg::Offset(o)) => write!(f, "{v} {o}"),
            C::Rest(RestArg::Ranges(r)) => write!(f, "{v} {r}"),
            C::Site(s) => match s {
                SiteCommand::Help => write!(f, "SITE HELP"),
                SiteCommand::ClientInfo(i) => write!(f, "SITE CLIENTINFO {i}"),
                SiteCommand::RetrBufSize(n) => write!(f, "SITE RETRBUFSIZE {n}"),
                SiteCommand::StorBufSize(n) => write!(f, "SITE STORBUFSIZE {n}"),
                SiteCommand::BufSize(n) => write!(f, "SITE BUFSIZE {n}"),
                SiteCommand::Chmod { mode, path } => write!(f, "SITE CHMOD {mode:o} {path}"),
                SiteCommand::Profile(ProfileRequest::Start { interval_ms, perf }) => {
                    write!(f, "SITE PROFILE START {interval_ms}{}", if *perf { " PERF" } else { "" })
                }
                SiteCommand::Profile(ProfileRequest::Stop) => write!(f, "SITE PROFILE STOP"),
                SiteCommand::Partial(p) => write!(f, "SITE PARTIAL {p}"),
                SiteCommand::SetDiskStack(s) => write!(f, "SITE SETDISKSTACK {s}"),
                SiteCommand::SetNetStack(s) => write!(f, "SITE SETNETSTACK {s}"),
                SiteCommand::Utime { time, path } => write!(f, "SITE UTIME {time} {path}"),
                SiteCommand::Chgrp { group, path } => write!(f, "SITE CHGRP {group} {path}"),
                SiteCommand::Other { name, args } if args.is_empty() => write!(f, "SITE {name}"),
                SiteCommand::Other { name, args } => write!(f, "SITE {name} {args}"),
            },
            C::Opts(o) => match o {
                Opts::Utf8(true) => write!(f, "OPTS UTF8 ON"),
                Opts::Utf8(false) => write!(f, "OPTS UTF8 OFF"),
                Opts::Retr(kv) => write!(f, "OPTS RETR {}", kv_to_string(kv)),
                Opts::Pasv(kv) => write!(f, "OPTS PASV {}", kv_to_string(kv)),
                Opts::Mlst(facts) => {
                    write!(f, "OPTS MLST {}", facts.iter().map(|x| format!("{x};")).collect::<String>())
                }
                Opts::Other { command, args } if args.is_empty() => write!(f, "OPTS {command}"),
                Opts::Other { command, args } => write!(f, "OPTS {command} {args}"),
            },
            C::Eprt(a) => write!(f, "{v} {}", host_port::format_eprt(*a)),
            C::Epsv(EpsvArg::Any) => f.write_str(v),
            C::Epsv(EpsvArg::All) => write!(f, "{v} ALL"),
            C::Epsv(EpsvArg::Protocol(p)) => write!(f, "{v} {p}"),
            C::Pbsz(n) => write!(f, "{v} {n}"),
            C::Prot(p) => write!(
                f,
                "{v} {}",
                match p {
                    ProtectionLevel::Clear => "C",
                    ProtectionLevel::Safe => "S",
                    ProtectionLevel::Confidential => "E",
                    ProtectionLevel::Private => "P",
                }
            ),
            C::Mfmt { time, path } => write!(f, "{v} {time} {path}"),
            C::Spor(addrs) => {
                f.write_str(v)?;
                for a in addrs {
                    write!(f, " {}", host_port::format_host_port(*a))?;
                }
                Ok(())
            }
            C::Eret { offset, length, path } => write!(f, "{v} P {offset} {length} {path}"),
            C::Esto { offset, path } => write!(f, "{v} A {offset} {path}"),
            C::Sbuf(n) => write!(f, "{v} {n}"),
            C::Dcau(Dcau::None) => write!(f, "{v} N"),
            C::Dcau(Dcau::Self_) => write!(f, "{v} A"),
            C::Dcau(Dcau::Subject(s)) => write!(f, "{v} S {s}"),
            C::Cksm { algorithm, offset, length, path } => match length {
                Some(l) => write!(f, "{v} {algorithm} {offset} {l} {path}"),
                None => write!(f, "{v} {algorithm} {offset} -1 {path}"),
            },
            C::Trev { event, seconds } => match event {
                TrevEvent::Perf => write!(f, "{v} PERF {seconds}"),
                TrevEvent::Restart => write!(f, "{v} RESTART {seconds}"),
            },
            C::Batch(b) => write!(f, "{b}"),
            C::BatchEnd { files } => write!(f, "(end of a BSTO SYNC batch of {files} files)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> Result<Command, CommandError> {
        Command::parse(s.as_bytes())
    }

    #[test]
    fn parses_what_real_clients_send() {
        assert_eq!(p("USER anonymous"), Ok(Command::User("anonymous".into())));
        assert_eq!(p("user bob"), Ok(Command::User("bob".into())));
        assert_eq!(p("PASS"), Ok(Command::Pass(String::new())));
        assert_eq!(p("RETR a file with spaces"), Ok(Command::Retr("a file with spaces".into())));
        assert_eq!(p("TYPE I"), Ok(Command::Type(TransferType::Image)));
        assert_eq!(p("TYPE A N"), Ok(Command::Type(TransferType::Ascii)));
        assert_eq!(p("TYPE A T"), Ok(Command::Type(TransferType::Ascii)));
        assert_eq!(p("type a c"), Ok(Command::Type(TransferType::Ascii)));
        assert_eq!(p("MODE E"), Ok(Command::Mode(TransferMode::ExtendedBlock)));
        assert_eq!(
            p("OPTS RETR Parallelism=4,4,4;"),
            Ok(Command::Opts(Opts::Retr(vec![("Parallelism".into(), "4,4,4".into())])))
        );
        assert_eq!(
            p("OPTS PASV AllowDelayed=1;"),
            Ok(Command::Opts(Opts::Pasv(vec![("AllowDelayed".into(), "1".into())])))
        );
        for verb in ["MLST", "mlsd", "MLSR"] {
            assert_eq!(
                p(&format!("OPTS {verb} type;Size;")),
                Ok(Command::Opts(Opts::Mlst(vec!["type".into(), "Size".into()])))
            );
        }
        assert_eq!(p("SITE RETRBUFSIZE 4194304"), Ok(Command::Site(SiteCommand::RetrBufSize(4194304))));
        let start =
            |interval_ms, perf| Ok(Command::Site(SiteCommand::Profile(ProfileRequest::Start { interval_ms, perf })));
        assert_eq!(p("SITE PROFILE START"), start(DEFAULT_PROFILE_INTERVAL_MS, false));
        assert_eq!(p("site profile start 250 perf"), start(250, true));
        assert_eq!(p("SITE PROFILE START PERF"), start(DEFAULT_PROFILE_INTERVAL_MS, true));
        assert_eq!(p("SITE PROFILE STOP"), Ok(Command::Site(SiteCommand::Profile(ProfileRequest::Stop))));
        for bad in ["SITE PROFILE", "SITE PROFILE START 5", "SITE PROFILE START 250 250", "SITE PROFILE STOP 1"] {
            assert!(p(bad).is_err(), "{bad}");
        }
        assert_eq!(
            p("SITE CLIENTINFO scheme=ftp;appname=\"globus-url-copy\";"),
            Ok(Command::Site(SiteCommand::ClientInfo("scheme=ftp;appname=\"globus-url-copy\";".into())))
        );
        assert_eq!(
            p("ERET P 1000 5000 /dev/shm/x y"),
            Ok(Command::Eret { offset: 1000, length: 5000, path: "/dev/shm/x y".into() })
        );
        assert_eq!(p("ESTO A 77 /f"), Ok(Command::Esto { offset: 77, path: "/f".into() }));
        assert_eq!(
            p("CKSM MD5 0 -1 /p"),
            Ok(Command::Cksm { algorithm: "MD5".into(), offset: 0, length: None, path: "/p".into() })
        );
        assert_eq!(p("REST 100"), Ok(Command::Rest(RestArg::Offset(100))));
        assert_eq!(p("REST 0-10,20-30"), Ok(Command::Rest(RestArg::Ranges(RangeSet::parse("0-10,20-30").unwrap()))));
        assert_eq!(p("ALLO 5000000"), Ok(Command::Allo(Allo { size: 5000000, record: None })));
        assert_eq!(p("EPSV ALL"), Ok(Command::Epsv(EpsvArg::All)));
        assert_eq!(p("XPWD"), Ok(Command::Pwd));
        assert_eq!(p("LIST -la"), Ok(Command::List(Some("-la".into()))));
        // Globus extensions (the forms globus_ftp_client_state.c sends).
        assert_eq!(p("MLSR /tree"), Ok(Command::Mlsr(Some("/tree".into()))));
        assert_eq!(p("MLSR"), Ok(Command::Mlsr(None)));
        assert_eq!(p("SITE SETDISKSTACK file"), Ok(Command::Site(SiteCommand::SetDiskStack("file".into()))));
        assert_eq!(
            p("SITE UTIME 20200102030405 /a b"),
            Ok(Command::Site(SiteCommand::Utime { time: "20200102030405".into(), path: "/a b".into() }))
        );
        assert_eq!(
            p("site chgrp users /x"),
            Ok(Command::Site(SiteCommand::Chgrp { group: "users".into(), path: "/x".into() }))
        );
        for bad in ["SITE UTIME 2020 /a", "SITE UTIME 20200102030405", "SITE CHGRP users", "SITE CHGRP a;b /x"] {
            assert_eq!(p(bad).unwrap_err().code().get(), 501, "{bad}");
        }
        assert_eq!(p("SITE SETDISKSTACK").unwrap_err().code().get(), 501);
        assert_eq!(p("SITE SETNETSTACK tcp"), Ok(Command::Site(SiteCommand::SetNetStack("tcp".into()))));
        assert_eq!(p("SITE SETNETSTACK").unwrap_err().code().get(), 501);
        assert_eq!(p("TPRT udt"), Ok(Command::Tprt("udt".into())));
        assert_eq!(p("tprt  tcp "), Ok(Command::Tprt("tcp".into())));
        assert_eq!(p("TPRT").unwrap_err().code().get(), 501);
    }

    #[test]
    fn errors_carry_the_right_code() {
        let code = |s: &str| p(s).unwrap_err().code().get();
        assert_eq!(code("FOO bar"), 500);
        assert_eq!(code(""), 500);
        assert_eq!(code("\u{1}\u{2}"), 500);
        assert_eq!(code("RETR"), 501);
        assert_eq!(code("PORT 1,2,3"), 501);
        assert_eq!(code("TYPE X"), 501);
        assert_eq!(code("TYPE E"), 504);
        assert_eq!(code("TYPE A X"), 501);
        assert_eq!(code("MODE B"), 504);
        assert_eq!(code("STRU R"), 504);
        assert_eq!(code("EPRT |3|x|1|"), 522);
        assert_eq!(code("EPSV 3"), 522);
        assert_eq!(code("EPSV x"), 501);
        assert_eq!(code("REST -5"), 501);
        assert_eq!(code("REST 99999999999999999999999"), 501);
        assert_eq!(p("LANG en"), Ok(Command::Lang(Some("en".into()))));
        assert_eq!(p("LANG"), Ok(Command::Lang(None)));
        assert_eq!(code("ERET X 1 2 p"), 504);
        assert_eq!(code("OPTS \r \u{c}"), 501);
        assert_eq!(code("SITE  "), 501);
        assert_eq!(Command::parse(b"RETR a\0b").unwrap_err().code().get(), 501);
        // Path octets that are not UTF-8 are a name, not an error.
        assert_eq!(
            Command::parse(b"RETR \xff\xfe"),
            Ok(Command::Retr(crate::octets::decode(b"\xff\xfe").into_owned()))
        );
    }

    fn arb_path() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9_./ äö-]{1,20}".prop_filter("non-empty", |s| !s.is_empty() && !s.starts_with(' '))
    }

    fn arb_command() -> impl Strategy<Value = Command> {
        prop_oneof![
            arb_path().prop_map(Command::Retr),
            arb_path().prop_map(Command::Stor),
            arb_path().prop_map(Command::Cwd),
            arb_path().prop_map(|p| Command::Mlsd(Some(p))),
            arb_path().prop_map(|p| Command::Mlsr(Some(p))),
            ("[0-9]{14}", arb_path()).prop_map(|(time, path)| Command::Site(SiteCommand::Utime { time, path })),
            ("[a-z][a-z0-9_-]{0,15}", arb_path())
                .prop_map(|(group, path)| Command::Site(SiteCommand::Chgrp { group, path })),
            any::<u64>().prop_map(|o| Command::Rest(RestArg::Offset(o))),
            (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| Command::Port(SocketAddrV4::new(ip.into(), port))),
            (any::<u64>(), any::<u64>(), arb_path())
                .prop_map(|(offset, length, path)| { Command::Eret { offset, length, path } }),
            (any::<u64>(), proptest::option::of(any::<u64>()), arb_path())
                .prop_map(|(offset, length, path)| Command::Cksm { algorithm: "ADLER32".into(), offset, length, path }),
            Just(Command::Pasv),
            Just(Command::Mode(TransferMode::ExtendedBlock)),
            Just(Command::Type(TransferType::Ascii)),
            (1u32..64).prop_map(|n| Command::Opts(Opts::Retr(vec![("Parallelism".into(), format!("{n},{n},{n}"))]))),
        ]
    }

    proptest! {
        #[test]
        fn parse_never_panics(line in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Command::parse(&line);
        }

        #[test]
        fn ascii_lines_never_panic(line in "[A-Za-z]{3,4}( [ -~]{0,60})?") {
            if let Err(e) = Command::parse(line.as_bytes()) {
                let code = e.code().get();
                prop_assert!(matches!(code, 500 | 501 | 502 | 504));
            }
        }

        #[test]
        fn format_then_parse_round_trips(cmd in arb_command()) {
            let line = cmd.to_string();
            prop_assert_eq!(Command::parse(line.as_bytes()), Ok(cmd));
        }
    }
}
