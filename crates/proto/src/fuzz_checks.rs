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

/// Transport negotiation (`crate::transport`): any bytes as a `TPRT`
/// argument, a `SITE SETNETSTACK` stack and a FEAT line. A choice is
/// always one of the offered transports; a refusal is a 5xx that names
/// the transport the session keeps; the FEAT line round-trips.
pub fn transport_negotiation(data: &[u8]) {
    use crate::transport::{feat_line, parse_feat_line, select, select_net_stack, TransportName};
    let text = String::from_utf8_lossy(data);
    let offered = [TransportName::TCP, TransportName::parse("udt").expect("literal name")];
    for current in offered {
        for r in [select(&offered, current, &text), select_net_stack(&offered, current, &text)] {
            match r {
                Ok(t) => assert!(offered.contains(&t), "{t}"),
                Err(reply) => {
                    assert_eq!(reply.code.get() / 100, 5, "{reply}");
                    let wire = reply.to_string();
                    assert_eq!(wire.matches("\r\n").count(), 1, "{wire:?}");
                }
            }
        }
    }
    if let Some(names) = parse_feat_line(&text) {
        if !names.is_empty() {
            assert_eq!(parse_feat_line(&feat_line(&names)).as_deref(), Some(&names[..]));
        }
    }
    // As a command line, in a session that offers only TCP.
    let mut line = b"TPRT ".to_vec();
    line.extend_from_slice(data);
    command_parser(&line);
}
