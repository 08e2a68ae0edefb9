//! What a client does when a server lacks an extension: EPSV → PASV for
//! a passive data port, SIZE and CWD for the facts of a path without MLST.
//! Pure decisions on replies; the driver sends the commands they name.

use super::listing::minimal_facts;
use super::parse::{passive_address, size};
use crate::facts::{FileFacts, FileKind};
use crate::reply::Reply;
use std::net::{IpAddr, SocketAddr};

/// What to do after an EPSV reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassiveStep {
    /// Connect here.
    Connect(SocketAddr),
    /// Ask again with PASV, and keep to PASV on this connection.
    TryPasv,
    /// Neither will do: the EPSV refusal is the answer.
    Refused,
}

/// RFC 2428 §3: a `229` carries only a port, at the control connection's
/// peer. A server without EPSV (RFC 959 servers answer `500`/`502`) gets
/// PASV instead — except over IPv6, where PASV cannot name the address
/// (RFC 2428 §1: "PASV ... only IPv4").
pub fn after_epsv(r: &Reply, peer: IpAddr) -> PassiveStep {
    match passive_address(r, peer).filter(|_| r.code.get() == 229) {
        Some(addr) => PassiveStep::Connect(addr),
        None if peer.is_ipv6() => PassiveStep::Refused,
        None => PassiveStep::TryPasv,
    }
}

/// RFC 959 §4.1.1: `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)`. The
/// host is replaced by the control connection's peer: servers behind NAT
/// announce unusable ones (curl and lftp do the same).
pub fn after_pasv(r: &Reply, peer: IpAddr) -> Option<SocketAddr> {
    passive_address(r, peer).filter(|_| r.code.get() == 227)
}

/// What to do after a SIZE asked for a path's facts (no MLST).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatStep {
    /// A file of this size.
    Found(FileFacts),
    /// Not a file (or SIZE unknown): try CWD to see if it is a directory.
    TryCwd,
}

/// RFC 3659 §4: `213 <size>` for a file; anything else leaves open
/// whether the path is a directory.
pub fn after_size(path: &str, r: &Reply) -> StatStep {
    match size(r) {
        Some(n) => StatStep::Found(minimal_facts(path, FileKind::File, n)),
        None => StatStep::TryCwd,
    }
}

/// RFC 959 §4.1.1: CWD answers `250` when the path is a directory;
/// otherwise the path does not exist (as far as the client can tell).
pub fn after_cwd(path: &str, r: &Reply) -> Option<FileFacts> {
    (r.code.get() == 250).then(|| minimal_facts(path, FileKind::Dir, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::ReplyCode;

    fn r(code: u16, text: &str) -> Reply {
        Reply::new(ReplyCode::new(code).unwrap(), text)
    }

    #[test]
    fn epsv_falls_back_to_pasv_on_ipv4_only() {
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        let v6: IpAddr = "2001:db8::7".parse().unwrap();
        let ok = r(229, "Entering Extended Passive Mode (|||40000|)");
        assert_eq!(after_epsv(&ok, v4), PassiveStep::Connect(SocketAddr::new(v4, 40000)));
        assert_eq!(after_epsv(&ok, v6), PassiveStep::Connect(SocketAddr::new(v6, 40000)));
        assert_eq!(after_epsv(&r(502, "EPSV not implemented"), v4), PassiveStep::TryPasv);
        assert_eq!(after_epsv(&r(502, "EPSV not implemented"), v6), PassiveStep::Refused);
        assert_eq!(after_epsv(&r(227, "Entering Passive Mode (10,0,0,1,156,64)"), v4), PassiveStep::TryPasv);
        let pasv = r(227, "Entering Passive Mode (10,0,0,1,156,64)");
        assert_eq!(after_pasv(&pasv, v4), Some(SocketAddr::new(v4, 40000)), "the control peer, not 10.0.0.1");
        assert_eq!(after_pasv(&r(500, "no"), v4), None);
    }

    #[test]
    fn stat_without_mlst_asks_size_then_cwd() {
        assert_eq!(after_size("/a", &r(213, "1234")), StatStep::Found(minimal_facts("/a", FileKind::File, 1234)));
        assert_eq!(after_size("/d", &r(550, "not a plain file")), StatStep::TryCwd);
        assert_eq!(after_cwd("/d", &r(250, "ok")), Some(minimal_facts("/d", FileKind::Dir, 0)));
        assert_eq!(after_cwd("/x", &r(550, "no such directory")), None);
    }
}
