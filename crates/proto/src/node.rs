//! The front end ↔ data node protocol of a striped Ferry server
//! (`docs/striping.md`), as pure functions of lines.
//!
//! A front end (`ferry serve DIR --stripe-nodes A,B`) speaks the control
//! protocol to clients; each data node (`ferry serve DIR --data-node`)
//! moves one stripe's bytes between the shared file system and the data
//! connections. The front end opens one TCP connection to each node per
//! client session and sends it instructions; the node answers with
//! events. It is Ferry's own protocol, not the Globus IPC one (which
//! carries GSI state and Globus' internal structures), but it mirrors its
//! operations: passive (a listener), receive, send, and partial EOF counts.
//!
//! Lines are UTF-8 text ending in LF, at most [`MAX_LINE`] bytes. Fields
//! are separated by one space; a path is the last field and is escaped
//! (`%`, CR and LF as `%25`, `%0D`, `%0A`) so it can hold any byte a
//! control-channel path can.
//!
//! **Authentication** comes first, both ways, with a secret both sides
//! read from a file (`--node-secret`) and never send:
//!
//! ```text
//! N: FERRY-NODE 1 <node nonce, 64 hex>
//! F: AUTH <front nonce, 64 hex> <HMAC-SHA256(secret, "ferry-node front " node-nonce " " front-nonce), hex>
//! N: WELCOME <HMAC-SHA256(secret, "ferry-node data " front-nonce " " node-nonce), hex>
//!    (or DENIED <why>, and the node closes)
//! ```
//!
//! The node proves itself too, so a front end never hands a client's data
//! to an impostor listening on a node's address. Nonces are fresh random
//! 32-byte values per connection, so a recorded exchange cannot be
//! replayed.
//!
//! **Requests** (front end → node), each naming a task id the events
//! refer to:
//!
//! ```text
//! LISTEN <id> <ip> <tcp-buffer|->                      open a data listener
//! RECV <id> <listener-id> <base> <limit|-> <peer-ip|-> <target> <P|C> <path>
//!                                                      accept on it, write blocks at base+offset
//! SEND <id> <addr> <streams> <tcp-buffer|-> <stripe> <count> <layout> <len> <window-offset> <done|-> <P|C> <path>
//!                                                      connect, send stripe's share
//!                       (P|C: PROT P or C; under P the node is the TLS server of every data connection)
//! ABORT <id>                                           stop a task
//! CLOSE <listener-id>                                  drop a listener
//! ```
//!
//! **Events** (node → front end): `LISTENING <id> <ip:port>`,
//! `PROGRESS <id> <bytes>`, `RANGES <id> <ranges>` (bytes on disk, synced),
//! `DONE <id> <bytes>`, `FAILED <id> <text>`.

use crate::restart::RangeSet;
use crate::stripe::{StripeLayout, MAX_STRIPES};
use sha2::{Digest, Sha256};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use thiserror::Error;

/// Longest line either side sends or accepts.
pub const MAX_LINE: usize = 64 * 1024;

/// First word of the node's greeting, and the protocol version.
pub const GREETING: &str = "FERRY-NODE";
pub const VERSION: u32 = 1;

/// Bytes of a nonce.
pub const NONCE_LEN: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NodeError {
    #[error("empty line")]
    Empty,
    #[error("line longer than 65536 bytes")]
    TooLong,
    #[error("unknown message {0:?}")]
    Unknown(String),
    #[error("{0}: wrong number of fields")]
    Fields(&'static str),
    #[error("{what}: bad value {value:?}")]
    Value { what: &'static str, value: String },
}

fn bad(what: &'static str, value: &str) -> NodeError {
    NodeError::Value { what, value: value.chars().take(60).collect() }
}

/// Where a receiving node writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvTarget {
    /// The partial file the front end opened for the upload
    /// (`ferry_io::partial`): the usual case.
    Partial,
    /// The file itself (the front end writes in place: a resumed upload
    /// of a complete file).
    File,
}

/// `RECV`: accept a stripe's data connections on a listener and write
/// their blocks into the upload. One struct, so the line's fields are
/// named once: where it is parsed and written here, and where the node
/// runs it (`crates/server/src/stripe/node.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvRequest {
    pub id: u64,
    pub listener: u64,
    /// Added to block offsets (an ESTO offset).
    pub base: u64,
    /// Largest end a block may have, header coordinates.
    pub limit: Option<u64>,
    /// The only address data connections are accepted from (the
    /// client's), or any when third-party transfers are allowed.
    pub peer: Option<IpAddr>,
    pub target: RecvTarget,
    /// PROT P: TLS on every data connection, the node as TLS server
    /// (RFC 4217), with the front end's certificate.
    pub private: bool,
    pub path: String,
}

/// `SEND`: connect to the receiver and send this stripe's share of the
/// file (as [`RecvRequest`], one struct for the parser, the writer and the
/// node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendRequest {
    pub id: u64,
    pub to: SocketAddr,
    pub streams: u32,
    pub buffer: Option<u32>,
    /// This task's stripe and the number of stripes.
    pub stripe: u32,
    pub count: u32,
    pub layout: StripeLayout,
    /// Bytes of the transfer (the file, or the ERET window).
    pub len: u64,
    /// Source offset of header offset 0 (ERET).
    pub window_offset: u64,
    /// What the receiver already holds (REST), header coordinates.
    pub done: Option<RangeSet>,
    /// PROT P, as for `Recv` (the node is the TLS server also when
    /// it connects).
    pub private: bool,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeRequest {
    Listen { id: u64, ip: IpAddr, buffer: Option<u32> },
    Recv(RecvRequest),
    Send(SendRequest),
    Abort { id: u64 },
    Close { listener: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeEvent {
    Listening { id: u64, addr: SocketAddr },
    Progress { id: u64, bytes: u64 },
    Ranges { id: u64, ranges: RangeSet },
    Done { id: u64, bytes: u64 },
    Failed { id: u64, text: String },
}

impl NodeEvent {
    pub fn id(&self) -> u64 {
        match self {
            NodeEvent::Listening { id, .. }
            | NodeEvent::Progress { id, .. }
            | NodeEvent::Ranges { id, .. }
            | NodeEvent::Done { id, .. }
            | NodeEvent::Failed { id, .. } => *id,
        }
    }
}

/// Escapes a path for the last field of a line.
pub fn escape_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for c in p.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\r' => out.push_str("%0D"),
            '\n' => out.push_str("%0A"),
            c => out.push(c),
        }
    }
    out
}

pub fn unescape_path(p: &str) -> Result<String, NodeError> {
    let mut out = String::with_capacity(p.len());
    let mut rest = p;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3).ok_or_else(|| bad("path", p))?;
        out.push(match code {
            "25" => '%',
            "0D" => '\r',
            "0A" => '\n',
            _ => return Err(bad("path", p)),
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

fn opt_u32(v: Option<u32>) -> String {
    v.map_or("-".into(), |n| n.to_string())
}

fn num<T: std::str::FromStr>(what: &'static str, s: &str) -> Result<T, NodeError> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(what, s));
    }
    s.parse().map_err(|_| bad(what, s))
}

fn opt_num<T: std::str::FromStr>(what: &'static str, s: &str) -> Result<Option<T>, NodeError> {
    if s == "-" {
        Ok(None)
    } else {
        num(what, s).map(Some)
    }
}

fn layout_token(l: &StripeLayout) -> String {
    match l {
        StripeLayout::Blocked { block_size } => format!("blocked:{block_size}"),
        StripeLayout::Partitioned => "partitioned".into(),
    }
}

/// `P` (private: TLS) or `C` (clear), as the PROT levels.
fn parse_prot(s: &str) -> Result<bool, NodeError> {
    match s {
        "P" => Ok(true),
        "C" => Ok(false),
        other => Err(bad("protection", other)),
    }
}

fn prot_token(private: bool) -> &'static str {
    if private {
        "P"
    } else {
        "C"
    }
}

fn parse_layout(s: &str) -> Result<StripeLayout, NodeError> {
    if s == "partitioned" {
        return Ok(StripeLayout::Partitioned);
    }
    let n = s.strip_prefix("blocked:").ok_or_else(|| bad("layout", s))?;
    let block_size: u64 = num("layout", n)?;
    if block_size == 0 {
        return Err(bad("layout", s));
    }
    Ok(StripeLayout::Blocked { block_size })
}

/// Splits `line` into `n` fields, the last taking the rest of the line.
fn fields<'a>(what: &'static str, line: &'a str, n: usize) -> Result<Vec<&'a str>, NodeError> {
    let f: Vec<&str> = line.splitn(n, ' ').collect();
    if f.len() != n {
        return Err(NodeError::Fields(what));
    }
    Ok(f)
}

fn check_line(line: &str) -> Result<(), NodeError> {
    if line.is_empty() {
        return Err(NodeError::Empty);
    }
    if line.len() > MAX_LINE {
        return Err(NodeError::TooLong);
    }
    Ok(())
}

impl NodeRequest {
    pub fn parse(line: &str) -> Result<Self, NodeError> {
        check_line(line)?;
        let verb = line.split(' ').next().unwrap_or("");
        Ok(match verb {
            "LISTEN" => {
                let f = fields("LISTEN", line, 4)?;
                NodeRequest::Listen {
                    id: num("id", f[1])?,
                    ip: f[2].parse().map_err(|_| bad("ip", f[2]))?,
                    buffer: opt_num("buffer", f[3])?,
                }
            }
            "RECV" => {
                let f = fields("RECV", line, 9)?;
                NodeRequest::Recv(RecvRequest {
                    id: num("id", f[1])?,
                    listener: num("listener", f[2])?,
                    base: num("base", f[3])?,
                    limit: opt_num("limit", f[4])?,
                    peer: match f[5] {
                        "-" => None,
                        ip => Some(ip.parse().map_err(|_| bad("peer", ip))?),
                    },
                    target: match f[6] {
                        "partial" => RecvTarget::Partial,
                        "file" => RecvTarget::File,
                        other => return Err(bad("target", other)),
                    },
                    private: parse_prot(f[7])?,
                    path: unescape_path(f[8])?,
                })
            }
            "SEND" => {
                let f = fields("SEND", line, 13)?;
                let count: u32 = num("count", f[6])?;
                let stripe: u32 = num("stripe", f[5])?;
                if count == 0 || count as usize > MAX_STRIPES || stripe >= count {
                    return Err(bad("stripe", f[5]));
                }
                let streams: u32 = num("streams", f[3])?;
                if !(1..=crate::session::MAX_PARALLELISM).contains(&streams) {
                    return Err(bad("streams", f[3]));
                }
                NodeRequest::Send(SendRequest {
                    id: num("id", f[1])?,
                    to: f[2].parse().map_err(|_| bad("address", f[2]))?,
                    streams,
                    buffer: opt_num("buffer", f[4])?,
                    stripe,
                    count,
                    layout: parse_layout(f[7])?,
                    len: num("len", f[8])?,
                    window_offset: num("window offset", f[9])?,
                    done: match f[10] {
                        "-" => None,
                        s => Some(RangeSet::parse(s).map_err(|_| bad("done", s))?),
                    },
                    private: parse_prot(f[11])?,
                    path: unescape_path(f[12])?,
                })
            }
            "ABORT" => {
                let f = fields("ABORT", line, 2)?;
                NodeRequest::Abort { id: num("id", f[1])? }
            }
            "CLOSE" => {
                let f = fields("CLOSE", line, 2)?;
                NodeRequest::Close { listener: num("listener", f[1])? }
            }
            other => return Err(NodeError::Unknown(other.chars().take(20).collect())),
        })
    }
}

impl fmt::Display for NodeRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeRequest::Listen { id, ip, buffer } => write!(f, "LISTEN {id} {ip} {}", opt_u32(*buffer)),
            NodeRequest::Recv(r) => write!(
                f,
                "RECV {} {} {} {} {} {} {} {}",
                r.id,
                r.listener,
                r.base,
                r.limit.map_or("-".into(), |n| n.to_string()),
                r.peer.map_or("-".into(), |p| p.to_string()),
                match r.target {
                    RecvTarget::Partial => "partial",
                    RecvTarget::File => "file",
                },
                prot_token(r.private),
                escape_path(&r.path)
            ),
            NodeRequest::Send(s) => write!(
                f,
                "SEND {} {} {} {} {} {} {} {} {} {} {} {}",
                s.id,
                s.to,
                s.streams,
                opt_u32(s.buffer),
                s.stripe,
                s.count,
                layout_token(&s.layout),
                s.len,
                s.window_offset,
                s.done.as_ref().filter(|d| !d.is_empty()).map_or("-".into(), |d| d.to_string()),
                prot_token(s.private),
                escape_path(&s.path)
            ),
            NodeRequest::Abort { id } => write!(f, "ABORT {id}"),
            NodeRequest::Close { listener } => write!(f, "CLOSE {listener}"),
        }
    }
}

impl NodeEvent {
    pub fn parse(line: &str) -> Result<Self, NodeError> {
        check_line(line)?;
        let verb = line.split(' ').next().unwrap_or("");
        Ok(match verb {
            "LISTENING" => {
                let f = fields("LISTENING", line, 3)?;
                NodeEvent::Listening { id: num("id", f[1])?, addr: f[2].parse().map_err(|_| bad("address", f[2]))? }
            }
            "PROGRESS" => {
                let f = fields("PROGRESS", line, 3)?;
                NodeEvent::Progress { id: num("id", f[1])?, bytes: num("bytes", f[2])? }
            }
            "RANGES" => {
                let f = fields("RANGES", line, 3)?;
                NodeEvent::Ranges {
                    id: num("id", f[1])?,
                    ranges: RangeSet::parse(f[2]).map_err(|_| bad("ranges", f[2]))?,
                }
            }
            "DONE" => {
                let f = fields("DONE", line, 3)?;
                NodeEvent::Done { id: num("id", f[1])?, bytes: num("bytes", f[2])? }
            }
            "FAILED" => {
                let f = fields("FAILED", line, 3)?;
                NodeEvent::Failed { id: num("id", f[1])?, text: unescape_path(f[2])? }
            }
            other => return Err(NodeError::Unknown(other.chars().take(20).collect())),
        })
    }
}

impl fmt::Display for NodeEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeEvent::Listening { id, addr } => write!(f, "LISTENING {id} {addr}"),
            NodeEvent::Progress { id, bytes } => write!(f, "PROGRESS {id} {bytes}"),
            NodeEvent::Ranges { id, ranges } => write!(f, "RANGES {id} {ranges}"),
            NodeEvent::Done { id, bytes } => write!(f, "DONE {id} {bytes}"),
            NodeEvent::Failed { id, text } => write!(f, "FAILED {id} {}", escape_path(text)),
        }
    }
}

// --- Authentication ---

/// HMAC-SHA256 (RFC 2104) of `msg` under `key`.
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(msg);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || s.len() > 256 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// Equality that takes the same time wherever the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn front_mac(secret: &[u8], node_nonce: &str, front_nonce: &str) -> [u8; 32] {
    hmac_sha256(secret, format!("ferry-node front {node_nonce} {front_nonce}").as_bytes())
}

fn node_mac(secret: &[u8], node_nonce: &str, front_nonce: &str) -> [u8; 32] {
    hmac_sha256(secret, format!("ferry-node data {front_nonce} {node_nonce}").as_bytes())
}

/// The node's side of the handshake.
#[derive(Debug)]
pub struct NodeHandshake {
    nonce: String,
}

impl NodeHandshake {
    pub fn new(nonce: [u8; NONCE_LEN]) -> Self {
        Self { nonce: hex(&nonce) }
    }

    /// The greeting line the node sends first.
    pub fn greeting(&self) -> String {
        format!("{GREETING} {VERSION} {}", self.nonce)
    }

    /// Checks the front end's `AUTH` line; `Ok(WELCOME line)` or
    /// `Err(DENIED line)`.
    pub fn on_auth(&self, secret: &[u8], line: &str) -> Result<String, String> {
        let denied = |why: &str| format!("DENIED {why}");
        let f: Vec<&str> = line.split(' ').collect();
        let [verb, front_nonce, mac] = f.as_slice() else {
            return Err(denied("expected AUTH <nonce> <mac>"));
        };
        if *verb != "AUTH" {
            return Err(denied("expected AUTH <nonce> <mac>"));
        }
        let Some(nonce_bytes) = unhex(front_nonce).filter(|n| n.len() == NONCE_LEN) else {
            return Err(denied("bad nonce"));
        };
        if nonce_bytes.iter().all(|b| *b == 0) || *front_nonce == self.nonce {
            return Err(denied("bad nonce"));
        }
        let ok = unhex(mac).is_some_and(|m| same(&m, &front_mac(secret, &self.nonce, front_nonce)));
        if !ok {
            return Err(denied("authentication failed (the node secrets differ)"));
        }
        Ok(format!("WELCOME {}", hex(&node_mac(secret, &self.nonce, front_nonce))))
    }
}

/// The front end's side of the handshake.
#[derive(Debug)]
pub struct FrontHandshake {
    nonce: String,
    node_nonce: Option<String>,
}

impl FrontHandshake {
    pub fn new(nonce: [u8; NONCE_LEN]) -> Self {
        Self { nonce: hex(&nonce), node_nonce: None }
    }

    /// Takes the node's greeting; returns the `AUTH` line to send.
    pub fn on_greeting(&mut self, secret: &[u8], line: &str) -> Result<String, String> {
        let f: Vec<&str> = line.split(' ').collect();
        let [greet, version, nonce] = f.as_slice() else {
            return Err(format!("not a Ferry data node (it said {:?})", line.chars().take(60).collect::<String>()));
        };
        if *greet != GREETING {
            return Err(format!("not a Ferry data node (it said {:?})", line.chars().take(60).collect::<String>()));
        }
        if *version != VERSION.to_string() {
            return Err(format!("data node speaks protocol version {version}, this front end {VERSION}"));
        }
        if unhex(nonce).is_none_or(|n| n.len() != NONCE_LEN) || *nonce == self.nonce {
            return Err("data node sent a bad nonce".into());
        }
        self.node_nonce = Some(nonce.to_string());
        Ok(format!("AUTH {} {}", self.nonce, hex(&front_mac(secret, nonce, &self.nonce))))
    }

    /// Takes the node's answer to `AUTH`: the node must prove the secret too.
    pub fn on_welcome(&self, secret: &[u8], line: &str) -> Result<(), String> {
        if let Some(why) = line.strip_prefix("DENIED ") {
            return Err(format!("the data node refused this front end: {why}"));
        }
        let Some(node_nonce) = &self.node_nonce else { return Err("no greeting yet".into()) };
        let mac = line.strip_prefix("WELCOME ").and_then(unhex);
        match mac {
            Some(m) if same(&m, &node_mac(secret, node_nonce, &self.nonce)) => Ok(()),
            _ => Err("the data node did not prove it knows the node secret".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(hex(&mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn handshake_both_ways() {
        let secret = b"shared secret";
        let node = NodeHandshake::new([7; NONCE_LEN]);
        let mut front = FrontHandshake::new([9; NONCE_LEN]);
        let auth = front.on_greeting(secret, &node.greeting()).unwrap();
        let welcome = node.on_auth(secret, &auth).unwrap();
        front.on_welcome(secret, &welcome).unwrap();
        // A front end with another secret is refused, and learns why.
        let mut other = FrontHandshake::new([9; NONCE_LEN]);
        let auth = other.on_greeting(b"wrong", &node.greeting()).unwrap();
        let denied = node.on_auth(secret, &auth).unwrap_err();
        assert!(other.on_welcome(b"wrong", &denied).unwrap_err().contains("secrets differ"));
        // A node that does not know the secret cannot pass for one.
        let mut front = FrontHandshake::new([9; NONCE_LEN]);
        front.on_greeting(secret, &node.greeting()).unwrap();
        assert!(front.on_welcome(secret, &format!("WELCOME {}", hex(&[0; 32]))).is_err());
        // Reflecting the node's own nonce back is refused.
        assert!(node.on_auth(secret, &format!("AUTH {} {}", hex(&[7; 32]), hex(&[0; 32]))).is_err());
        assert!(node.on_auth(secret, "AUTH").is_err());
        assert!(front.on_greeting(secret, "SSH-2.0-OpenSSH").is_err());
    }

    #[test]
    fn messages_round_trip() {
        let reqs = [
            NodeRequest::Listen { id: 1, ip: "127.0.0.1".parse().unwrap(), buffer: None },
            NodeRequest::Recv(RecvRequest {
                id: 2,
                listener: 1,
                base: 0,
                limit: Some(100),
                peer: Some("127.0.0.1".parse().unwrap()),
                target: RecvTarget::Partial,
                private: false,
                path: "/a dir/f%1\nx".into(),
            }),
            NodeRequest::Send(SendRequest {
                id: 3,
                to: "127.0.0.1:5000".parse().unwrap(),
                streams: 4,
                buffer: Some(1 << 20),
                stripe: 1,
                count: 2,
                layout: StripeLayout::Blocked { block_size: 1 << 20 },
                len: 5_000_000,
                window_offset: 0,
                done: Some(RangeSet::parse("0-100").unwrap()),
                private: true,
                path: "/big".into(),
            }),
            NodeRequest::Abort { id: 3 },
            NodeRequest::Close { listener: 1 },
        ];
        for r in reqs {
            let line = r.to_string();
            assert!(!line.contains('\n'), "{line}");
            assert_eq!(NodeRequest::parse(&line), Ok(r));
        }
        let events = [
            NodeEvent::Listening { id: 1, addr: "127.0.0.1:4000".parse().unwrap() },
            NodeEvent::Progress { id: 2, bytes: 9 },
            NodeEvent::Ranges { id: 2, ranges: RangeSet::parse("0-9,20-30").unwrap() },
            NodeEvent::Done { id: 2, bytes: 19 },
            NodeEvent::Failed { id: 2, text: "disk full\nreally".into() },
        ];
        for e in events {
            assert_eq!(NodeEvent::parse(&e.to_string()), Ok(e));
        }
        for bad in [
            "",
            "SEND 1",
            "SEND 1 127.0.0.1:1 0 - 0 1 partitioned 1 0 - C /x",
            "SEND 1 127.0.0.1:1 1 - 0 1 partitioned 1 0 - /x",
            "SEND 1 127.0.0.1:1 1 - 0 1 partitioned 1 0 - S /x",
            "LISTEN x 1.2.3.4 -",
            "RECV 1 1 0 - - bogus C /x",
            "RECV 1 1 0 - - file /x",
        ] {
            assert!(NodeRequest::parse(bad).is_err(), "{bad}");
        }
        // A stripe index beyond the count is refused.
        assert!(NodeRequest::parse("SEND 1 127.0.0.1:1 1 - 2 2 partitioned 1 0 - C /x").is_err());
        assert!(NodeRequest::parse("SEND 1 127.0.0.1:1 1 - 1 2 partitioned 1 0 - C /x").is_ok());
        assert!(unescape_path("%zz").is_err());
    }
}
