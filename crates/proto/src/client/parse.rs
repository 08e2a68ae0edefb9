//! What a client reads out of single replies: passive addresses, sizes,
//! checksums, Ferry's `SITE PARTIAL` facts.

use crate::host_port::{parse_epsv_reply, parse_pasv_reply};
use crate::reply::Reply;
use crate::restart::RangeSet;
use std::net::{IpAddr, SocketAddr};

/// The data address in a `227` (PASV) or `229` (EPSV) reply. The host is
/// always the control connection's peer: an EPSV reply names none (RFC
/// 2428 §3), and servers behind NAT announce unusable ones in PASV (curl
/// and lftp do the same).
pub fn passive_address(r: &Reply, peer: IpAddr) -> Option<SocketAddr> {
    let text = r.lines.first()?;
    match r.code.get() {
        227 => parse_pasv_reply(text).map(|a| SocketAddr::new(peer, a.port())),
        229 => parse_epsv_reply(text).map(|port| SocketAddr::new(peer, port)),
        _ => None,
    }
}

/// The size in a `213` SIZE reply (RFC 3659 §4.2).
pub fn size(r: &Reply) -> Option<u64> {
    (r.code.get() == 213).then(|| r.lines.first()?.trim().parse().ok()).flatten()
}

/// The lowercase hex in a `213` CKSM reply (GFD.47).
pub fn checksum(r: &Reply) -> Option<String> {
    (r.code.get() == 213).then(|| r.lines.first().map(|l| l.trim().to_ascii_lowercase())).flatten()
}

/// What a server holds of an interrupted upload (`SITE PARTIAL`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartialUpload {
    /// The size ALLO announced for it.
    pub size: Option<u64>,
    pub ranges: RangeSet,
    /// XXH128 of the ranges' bytes, concatenated in order.
    pub xxh128: String,
}

impl PartialUpload {
    /// Parses `Size=n;Ranges=a-b,...;XXH128=hex; path` (`docs/gridftp.md`).
    pub fn parse(line: &str) -> Option<Self> {
        let facts = line.split_once(' ').map_or(line, |(f, _)| f);
        let mut out = PartialUpload::default();
        let mut hash = None;
        for fact in facts.split(';').filter(|f| !f.is_empty()) {
            let (k, v) = fact.split_once('=')?;
            match k.to_ascii_lowercase().as_str() {
                "size" => out.size = Some(v.parse().ok()?),
                "ranges" => out.ranges = RangeSet::parse(v).ok()?,
                "xxh128" => hash = Some(v.to_ascii_lowercase()),
                _ => {}
            }
        }
        out.xxh128 = hash?;
        Some(out)
    }
}

/// The answer to `SITE PARTIAL <path>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartialAnswer {
    /// `213`: what the server holds.
    Held(PartialUpload),
    /// `550`: nothing held: the upload starts over.
    Nothing,
    /// `450`: an upload to that name is still live (the killed copy's
    /// session not yet noticed by the server): ask again shortly.
    Busy,
    /// Anything else, or a `213` that does not parse: the server cannot
    /// say, and the client's own restart record is all there is.
    Unknown,
}

pub fn partial_answer(r: &Reply) -> PartialAnswer {
    match r.code.get() {
        213 => {
            r.lines.first().and_then(|l| PartialUpload::parse(l)).map_or(PartialAnswer::Unknown, PartialAnswer::Held)
        }
        450 => PartialAnswer::Busy,
        550 => PartialAnswer::Nothing,
        _ => PartialAnswer::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::ReplyCode;

    #[test]
    fn partial_replies_parse() {
        let hash = "0123456789abcdef0123456789abcdef";
        let p = PartialUpload::parse(&format!("Size=10;Ranges=0-4,6-8;XXH128={hash}; /a b.nc")).unwrap();
        assert_eq!((p.size, p.ranges.to_string(), p.xxh128.as_str()), (Some(10), "0-4,6-8".to_string(), hash));
        let p = PartialUpload::parse(&format!("Ranges=0-0;XXH128={hash}; /x")).unwrap();
        assert!(p.size.is_none() && p.ranges.is_empty());
        assert_eq!(PartialUpload::parse("Ranges=0-4; /x"), None, "no hash: nothing to check against");
        assert_eq!(PartialUpload::parse("Ranges=x;XXH128=0; /x"), None);
        let held = Reply::new(ReplyCode::FILE_STATUS, format!("Ranges=0-4;XXH128={hash}; /x"));
        assert!(matches!(partial_answer(&held), PartialAnswer::Held(p) if p.ranges.covered() == 4));
        let code = |c| Reply::new(ReplyCode::new(c).unwrap(), "x");
        assert_eq!(partial_answer(&code(450)), PartialAnswer::Busy);
        assert_eq!(partial_answer(&code(550)), PartialAnswer::Nothing);
        assert_eq!(partial_answer(&code(213)), PartialAnswer::Unknown, "a 213 that does not parse");
        assert_eq!(partial_answer(&code(500)), PartialAnswer::Unknown);
    }

    #[test]
    fn passive_addresses_use_the_control_peer() {
        let peer: IpAddr = "192.0.2.1".parse().unwrap();
        let pasv = Reply::new(ReplyCode::PASSIVE, "Entering Passive Mode (10,0,0,1,200,10).");
        assert_eq!(passive_address(&pasv, peer), Some("192.0.2.1:51210".parse().unwrap()));
        let epsv = Reply::new(ReplyCode::EXTENDED_PASSIVE, "Entering Extended Passive Mode (|||6446|)");
        assert_eq!(passive_address(&epsv, peer), Some("192.0.2.1:6446".parse().unwrap()));
        assert_eq!(passive_address(&Reply::new(ReplyCode::OK, "x"), peer), None);
        assert_eq!(size(&Reply::new(ReplyCode::FILE_STATUS, " 42 ")), Some(42));
    }
}
