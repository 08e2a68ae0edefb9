//! The properties the fuzz targets check, shared with the test that
//! replays the committed corpus on stable Rust (`tests/fuzz_corpus.rs`).

use crate::line::{parse_line, LineBuffer};
use crate::session::{Access, Action, AnonymousAccess, FsError, Grant, SessionConfig, TransferOutcome};
use crate::{Command, Session};

/// Control-channel bytes through the command parser, the line framing and
/// a logged-in session. Panics if a property is violated.
pub fn command_parser(data: &[u8]) {
    // What parses formats back to something that parses the same.
    if let Ok(cmd) = Command::parse(data) {
        // As sent: names that are not UTF-8 as their own octets.
        let again = Command::parse(&crate::octets::encode(&cmd.to_string()));
        assert_eq!(again.as_ref(), Ok(&cmd), "{cmd}");
    }
    let cfg = SessionConfig { anonymous: AnonymousAccess::Write, ..SessionConfig::default() };
    let mut session = Session::new(cfg, "127.0.0.1:1".parse().expect("literal address"));
    let _ = session.handle(Command::parse(b"USER anonymous"));
    if let Action::Login(_) = session.handle(Command::parse(b"PASS x")) {
        let _ = session.login_result(Some(Grant { user: "anonymous".into(), access: Access::ReadWrite }));
    }
    const MAX_LINE: usize = 512;
    const CHUNK: usize = 97;
    let mut lines = LineBuffer::new(MAX_LINE);
    for chunk in data.chunks(CHUNK) {
        lines.push(chunk);
        while let Some(line) = lines.next_line() {
            let replies = match session.handle(parse_line(line)) {
                Action::Reply(r) | Action::Close(r) => vec![r],
                // Driver requests are answered with failures so the
                // session returns to idle.
                Action::File(_) => vec![session.file_result(Err(FsError::NotFound))],
                Action::Passive(_) => vec![session.passive_result(Err("refused".into()))],
                Action::Login(_) => match session.login_result(None) {
                    Action::Reply(r) | Action::Close(r) => vec![r],
                    _ => vec![],
                },
                Action::Transfer(req) => {
                    let mut out = vec![session.transfer_started("x", None, false)];
                    out.extend(session.transfer_finished(&req.path, TransferOutcome::Complete { bytes: 0 }));
                    out
                }
                Action::AbortTransfer | Action::AbortFileOp | Action::Profile(_) => vec![],
                Action::StartTls(r) => {
                    session.tls_started(Default::default());
                    vec![r]
                }
            };
            for reply in replies {
                // One CRLF per reply line and no stray CR or LF elsewhere.
                let wire = reply.to_string();
                assert_eq!(wire.matches("\r\n").count(), reply.lines.len().max(1), "{wire:?}");
                assert!(!wire.replace("\r\n", "").contains(['\r', '\n']), "{wire:?}");
            }
        }
        assert!(lines.buffered() <= MAX_LINE + CHUNK, "line buffer exceeded its bound");
    }
}

/// Bytes from a data connection through the MODE E decoder and the
/// end-of-data accounting: no panic, blocks within bounds, and what decodes
/// encodes back to the same bytes.
pub fn mode_e_decoder(data: &[u8]) {
    use crate::mode_e::{BlockDecoder, EndOfData, HEADER_LEN};
    let limit = data.first().map(|b| u64::from(*b) << 16);
    let mut decoder = BlockDecoder::default();
    let mut end = EndOfData::default();
    let mut consumed = 0usize;
    for chunk in data.chunks(31) {
        decoder.push(chunk);
        loop {
            match decoder.next_block(limit) {
                Ok(Some(block)) => {
                    let h = block.header;
                    assert_eq!(block.payload.len() as u64, h.payload_len());
                    if h.payload_len() > 0 {
                        assert!(h.offset.checked_add(h.count).is_some());
                        if let Some(l) = limit {
                            assert!(h.offset + h.count <= l);
                        }
                    }
                    assert_eq!(crate::mode_e::BlockHeader::decode(&h.encode()), h);
                    consumed += HEADER_LEN + block.payload.len();
                    if end.on_header(&h).is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    assert!(consumed <= data.len());
}

/// Bytes from a server through the client's reply parser: no panic, bounded
/// lines, and every reply formats to text that parses back the same.
pub fn reply_parser(data: &[u8]) {
    use crate::reply::ReplyParser;
    let mut p = ReplyParser::new(1024, 64);
    for chunk in data.chunks(53) {
        p.push(chunk);
        loop {
            match p.next_reply() {
                Ok(Some(r)) => {
                    assert!((100..=599).contains(&r.code.get()));
                    assert!(r.lines.len() <= 66);
                    let mut again = ReplyParser::default();
                    again.push(r.to_string().as_bytes());
                    let back = again.next_reply().expect("formatted reply parses").expect("complete");
                    assert_eq!(back.code, r.code);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

/// Restart ranges (`REST a-b,c-d`, `111 Range Marker ...`): no panic;
/// parsed sets are sorted, disjoint and round-trip; set arithmetic holds.
pub fn restart_ranges(data: &[u8]) {
    use crate::restart::RangeSet;
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (a, b) = text.split_once('|').unwrap_or((text, ""));
    let Ok(set) = RangeSet::parse(a) else { return };
    for w in set.ranges().windows(2) {
        assert!(w[0].end < w[1].start);
    }
    assert_eq!(RangeSet::parse(&set.to_string()).as_ref(), Ok(&set));
    let len = set.ranges().last().map_or(0, |r| r.end);
    let missing: u64 = set.missing(len).iter().map(|r| r.end - r.start).sum();
    assert_eq!(missing + set.covered(), len);
    if let Ok(other) = RangeSet::parse(b) {
        let d = set.difference(&other);
        for r in d.ranges() {
            assert!(set.contains_range(r));
        }
        let mut u = d.clone();
        u.union(&other);
        for r in set.ranges() {
            assert!(u.contains_range(r));
        }
    }
}

/// Data-connection addresses from the network — `PORT`/`SPOR` arguments,
/// `EPRT` arguments, `227`/`229` replies — and `MFMT`/`MDTM` time values:
/// no panic, and whatever parses formats back to the same value.
pub fn host_port(data: &[u8]) {
    use crate::facts::{format_time_val, parse_time_val};
    use crate::host_port::parse_pasv_reply;
    use crate::host_port::{format_eprt, format_host_port, parse_eprt, parse_epsv_reply, parse_host_port};
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(a) = parse_host_port(text) {
        assert_eq!(parse_host_port(&format_host_port(a)), Ok(a));
    }
    if let Ok(a) = parse_eprt(text) {
        assert_eq!(parse_eprt(&format_eprt(a)), Ok(a));
    }
    if let Some(a) = parse_pasv_reply(text) {
        assert_eq!(parse_pasv_reply(&format!("Entering Passive Mode ({})", format_host_port(a))), Some(a));
    }
    if let Some(port) = parse_epsv_reply(text) {
        assert_eq!(parse_epsv_reply(&format!("Entering Extended Passive Mode (|||{port}|)")), Some(port));
    }
    if let Some(t) = parse_time_val(text) {
        assert_eq!(parse_time_val(&format_time_val(t)), Some(t), "{text}");
    }
}

/// Path arguments through the lexical confinement: a resolved path is
/// absolute and normal (no empty, `.` or `..` component), its relative
/// form never climbs, and resolving it again changes nothing. The input is
/// `cwd|argument`.
pub fn virtual_path(data: &[u8]) {
    use crate::path::VirtualPath;
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (cwd, arg) = text.split_once('|').unwrap_or(("/", text));
    let Ok(cwd) = VirtualPath::root().resolve(if cwd.is_empty() { "/" } else { cwd }) else { return };
    let Ok(p) = cwd.resolve(arg) else { return };
    let s = p.as_str();
    assert!(s.starts_with('/'), "{s:?}");
    assert!(p.is_root() || !s.ends_with('/'), "{s:?}");
    assert!(p.components().all(|c| !c.is_empty() && c != "." && c != ".."), "{s:?}");
    assert!(!p.relative().starts_with('/'), "{s:?}");
    assert!(std::path::Path::new(p.relative())
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir)));
    assert_eq!(VirtualPath::root().resolve(s).as_ref(), Ok(&p));
    assert!(p.starts_with(&VirtualPath::root()));
    assert_eq!(p.parent().join(p.file_name().unwrap_or(".")).map(|j| j.is_root() || j == p), Ok(true));
}

/// Striping grammar (`crate::stripe`): `OPTS RETR` layout items, `229`
/// striped passive replies and the layouts' arithmetic. Input is
/// `opts|reply|len,count`. No panic; every parsed SPAS reply formats back
/// to the same addresses; every byte of a file belongs to one stripe.
pub fn stripe(data: &[u8]) {
    use crate::reply::ReplyParser;
    use crate::stripe::{parse_spas_reply, spas_reply, StripeOptions};
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut parts = text.splitn(3, '|');
    let (opts, reply, shape) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let mut options = StripeOptions::default();
    for item in opts.split(';') {
        if let Some((k, v)) = item.split_once('=') {
            let _ = options.apply(k, v);
        }
    }
    let layout = options.layout();
    let mut p = ReplyParser::new(1024, 300);
    p.push(reply.replace('\n', "\r\n").as_bytes());
    if let Ok(Some(r)) = p.next_reply() {
        if let Ok(addrs) = parse_spas_reply(&r) {
            assert!(!addrs.is_empty());
            assert_eq!(parse_spas_reply(&spas_reply(&addrs)).as_ref(), Ok(&addrs));
        }
    }
    let (len, count) = shape.split_once(',').unwrap_or((shape, "2"));
    let (Ok(len), Ok(count)) = (len.trim().parse::<u64>(), count.trim().parse::<usize>()) else { return };
    // Bounded so one input stays fast: at most ~64k blocks per stripe.
    let len = len.min(64 << 20);
    let count = count.clamp(1, 16);
    let mut total = 0u64;
    let mut seen = crate::RangeSet::new();
    for i in 0..count {
        let ranges = layout.ranges(i, count, len);
        if ranges.len() > 1 << 17 {
            return;
        }
        for r in ranges {
            assert!(r.start < r.end && r.end <= len);
            assert!(!seen.overlaps(&r));
            assert_eq!(layout.stripe_of(r.start, len, count), i);
            total += r.end - r.start;
            seen.insert(r);
        }
    }
    assert_eq!(total, len);
}

/// Lines a data node or a front end receives (`crate::node`): no panic,
/// and whatever parses formats to a line that parses back the same.
pub fn node_message(data: &[u8]) {
    use crate::node::{FrontHandshake, NodeEvent, NodeHandshake, NodeRequest};
    let Ok(text) = std::str::from_utf8(data) else { return };
    for line in text.split('\n') {
        if let Ok(r) = NodeRequest::parse(line) {
            let again = r.to_string();
            assert!(!again.contains('\n'));
            assert_eq!(NodeRequest::parse(&again).as_ref(), Ok(&r), "{again}");
        }
        if let Ok(e) = NodeEvent::parse(line) {
            assert_eq!(NodeEvent::parse(&e.to_string()).as_ref(), Ok(&e));
        }
        // Handshake lines from a stranger never authenticate it.
        let node = NodeHandshake::new([1; crate::node::NONCE_LEN]);
        assert!(node.on_auth(b"secret", line).is_err());
        let mut front = FrontHandshake::new([2; crate::node::NONCE_LEN]);
        let _ = front.on_greeting(b"secret", line);
        assert!(front.on_welcome(b"secret", line).is_err());
    }
}
