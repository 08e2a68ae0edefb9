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
        // A batch is bounded and stands for exactly its files' commands.
        if let Command::Batch(b) = &cmd {
            assert!(!b.files.is_empty() && b.files.len() <= crate::batch::MAX_BATCH_FILES);
            let per = if b.kind == crate::batch::BatchKind::Store { 2 } else { 1 };
            match (b.stream, b.kind) {
                // A streamed line is one transfer: its sizes add up within
                // 64 bits; an upload's is its total's ALLO, the first
                // file's STOR and the batch's final reply.
                (true, kind) => {
                    let (_, total) = b.stream_offsets().expect("a streamed line's sizes add up");
                    let want = if kind == crate::batch::BatchKind::Store { 3 } else { 1 };
                    assert_eq!(b.expand().len(), want);
                    if kind == crate::batch::BatchKind::Store {
                        assert!(b.sync, "a streamed upload is durable per line");
                        assert_eq!(b.expand()[0], Command::Allo(crate::command::Allo { size: total, record: None }));
                    }
                }
                (false, _) => assert_eq!(b.expand().len(), b.files.len() * per + usize::from(b.sync)),
            }
            assert!(b.files.iter().all(|f| !f.path.is_empty() && !f.path.contains('\0')));
        }
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
    mode_e_reader(data);
}

/// The same bytes through the per-connection reader and the transfer's
/// tracker, driven the way the data path drives them (header bytes, then
/// payload pieces, `step` bytes at a time): every payload byte asked for
/// lies in a block the tracker accepted, within the limits; what was
/// received is what was announced; restart markers add up to it.
fn mode_e_reader(data: &[u8]) {
    use crate::mode_e::{BlockLimits, BlockReader, ReceiveTracker, Want};
    use crate::restart::RangeSet;
    let (Some(&a), Some(&b)) = (data.first(), data.get(1)) else { return };
    let limits =
        BlockLimits { transfer_len: (a != 0).then(|| u64::from(a) << 16), max_block: (u64::from(b) + 1) << 12 };
    let step = usize::from(b % 29) + 1;
    let bytes = &data[2..];
    let mut reader = BlockReader::new(limits);
    let mut tracker = ReceiveTracker::new(Some(4));
    let mut markers = RangeSet::new();
    let mut pos = 0;
    let mut payload = 0u64;
    loop {
        match reader.want() {
            Want::Header { missing } => {
                let n = missing.min(step).min(bytes.len() - pos);
                if n == 0 {
                    break;
                }
                let header = match reader.push_header(&bytes[pos..pos + n]) {
                    Ok(h) => h,
                    Err(_) => return,
                };
                pos += n;
                if let Some(h) = header {
                    assert!(h.payload_len() <= limits.max_block);
                    if tracker.begin_block(&h).is_err() {
                        return;
                    }
                }
            }
            Want::Payload { offset, len } => {
                assert!(len > 0);
                let n = (len.min(step as u64) as usize).min(bytes.len() - pos);
                if n == 0 {
                    break;
                }
                let range = reader.payload_consumed(n as u64);
                assert_eq!(range, offset..offset + n as u64);
                assert!(tracker.announced().contains_range(&range));
                if let Some(l) = limits.transfer_len {
                    assert!(range.end <= l);
                }
                tracker.written(range);
                payload += n as u64;
                pos += n;
                if pos % 3 == 0 {
                    if let Some(m) = tracker.restart_marker() {
                        markers.union(&m);
                    }
                }
            }
            Want::EndOfBlock(h) => {
                if tracker.end_block(&h).is_err() {
                    return;
                }
                assert_eq!(reader.end_block(), Some(h));
            }
            Want::Done { .. } => break,
        }
    }
    assert!(pos <= bytes.len());
    assert_eq!(tracker.received().covered(), payload, "each byte is received once");
    for r in tracker.received().ranges() {
        assert!(tracker.announced().contains_range(r));
    }
    if let Some(m) = tracker.restart_marker() {
        markers.union(&m);
    }
    assert_eq!(&markers, tracker.received());
    if let Want::Done { .. } = reader.want() {
        assert!(reader.on_close().is_ok());
    }
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

/// Bytes from a server through the client's control-connection machine
/// (reply framing, the login sequence, the pipeline of commands in flight,
/// markers, passive addresses): no panic; no more final replies than
/// commands; what is in flight is what was sent less what was answered;
/// once broken, it stays quiet.
pub fn client_session(data: &[u8]) {
    use crate::client::{ClientEvent, ClientSession, Expect};
    use crate::command::{Command, RestArg, TransferMode};
    use std::net::{IpAddr, Ipv4Addr};
    use std::time::{Duration, Instant};
    // A base for simulated time; nothing depends on its value.
    let t0 = Instant::now();
    let tls = data.first().is_some_and(|b| b & 1 == 1);
    let mut c = ClientSession::new(IpAddr::V4(Ipv4Addr::LOCALHOST), Duration::from_secs(60));
    c.login("u", "p", tls, Some("/probe"), t0);
    let cmds = [
        (Command::Mode(TransferMode::ExtendedBlock), Expect::Positive),
        (Command::Pasv, Expect::Passive),
        (Command::Rest(RestArg::Offset(5)), Expect::Restart),
        (Command::Stor("/a".into()), Expect::Completion),
        (Command::Epsv(crate::command::EpsvArg::Any), Expect::Passive),
        (Command::Retr("/b".into()), Expect::Completion),
        (Command::Noop, Expect::Any),
    ];
    let sent = cmds.len();
    for (cmd, expect) in cmds {
        c.send(cmd, expect, t0);
    }
    assert!(c.poll_transmit().is_some());
    let mut answered = 0;
    let mut logged_in = false;
    for (i, chunk) in data.chunks(41).enumerate() {
        c.handle_input(chunk, t0 + Duration::from_millis(i as u64));
        while let Some(ev) = c.poll_event() {
            match ev {
                ClientEvent::LoggedIn(_) => logged_in = true,
                ClientEvent::Done { accepted, passive, reply, command, .. } => {
                    assert!(logged_in, "no command is answered before the login ends");
                    answered += 1;
                    if passive.is_some() {
                        assert!(accepted && matches!(reply.code.get(), 227 | 229), "{command}");
                        assert_eq!(passive.map(|a| a.ip()), Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
                    }
                }
                ClientEvent::Preliminary { reply, .. } => assert!(reply.code.is_preliminary()),
                _ => {}
            }
        }
        if c.is_broken() {
            assert!(c.poll_timeout().is_none());
        }
    }
    assert!(answered <= sent);
    if logged_in {
        assert_eq!(c.in_flight(), sent - answered);
    }
    c.handle_timeout(t0 + Duration::from_secs(86_400));
}

/// Listing bytes from a data connection through the client's MLSD and
/// LIST parsers: no panic; entries sorted, none that is `.`, `..` or has a
/// `/`; an MLSx entry formats to a fact line that parses back to the same
/// name, kind and size.
pub fn client_listing(data: &[u8]) {
    use crate::client::listing::{parse_listing, parse_mlsx, MAX_LISTING};
    assert!(data.len() as u64 <= MAX_LISTING);
    for machine in [true, false] {
        let entries = parse_listing(data, machine);
        for w in entries.windows(2) {
            assert!(w[0].name <= w[1].name);
        }
        for e in &entries {
            assert!(e.name != "." && e.name != ".." && !e.name.contains('/'), "{:?}", e.name);
            if machine {
                let again = parse_mlsx(&e.mlsx_line(true, &e.name)).expect("a formatted line parses");
                assert_eq!((&again.name, again.kind, again.size), (&e.name, e.kind, e.size));
            }
        }
    }
}

/// A server's FEAT reply through the client's parser: no panic; every
/// listed line is found by its name; checksum names are upper case and
/// not empty.
pub fn client_feat(data: &[u8]) {
    use crate::client::Features;
    use crate::reply::ReplyParser;
    let mut p = ReplyParser::new(4096, 1024);
    p.push(data);
    while let Ok(Some(r)) = p.next_reply() {
        let f = Features::parse(&r);
        for line in f.lines() {
            let name = line.split_whitespace().next().expect("lines are not blank");
            assert!(f.has(name) && f.line(name).is_some(), "{line:?}");
        }
        for a in f.checksums() {
            assert!(!a.is_empty() && a == a.to_ascii_uppercase());
        }
        assert_eq!(f.mode_e(), f.has("parallel"));
    }
}

/// Replies through the client's marker and reply-class parsers: no panic;
/// `111`/`112` are markers and answer nothing; a parsed marker formats back
/// to a reply that parses to the same marker; an accepted passive reply
/// gives the control peer's address; `SITE PARTIAL` answers and the retry
/// and ABOR predicates agree with the reply codes they stand for.
pub fn client_markers(data: &[u8]) {
    use crate::client::expect::{ends_abort, worth_retrying};
    use crate::client::parse::{partial_answer, passive_address, size, PartialAnswer};
    use crate::client::{classify, Expect, Marker, ReplyClass};
    use crate::markers::{range_marker, PerfMarker};
    use crate::reply::ReplyParser;
    use std::net::{IpAddr, Ipv4Addr};
    let peer = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let mut p = ReplyParser::new(4096, 64);
    p.push(data);
    while let Ok(Some(r)) = p.next_reply() {
        let class = classify(&r);
        assert_eq!(class.is_final(), r.code.get() >= 200, "{r:?}");
        match class {
            ReplyClass::Marker(Some(Marker::Restart(ranges))) => {
                assert_eq!(classify(&range_marker(&ranges)), ReplyClass::Marker(Some(Marker::Restart(ranges))));
            }
            ReplyClass::Marker(Some(Marker::Perf(bytes))) => {
                let again = PerfMarker::new(0, bytes).reply();
                assert_eq!(classify(&again), ReplyClass::Marker(Some(Marker::Perf(bytes))));
            }
            ReplyClass::Marker(None) => assert!(matches!(r.code.get(), 111 | 112)),
            _ => {}
        }
        if let Some(a) = passive_address(&r, peer) {
            assert!(Expect::Passive.accepts(&r));
            assert_eq!(a.ip(), peer);
        }
        if size(&r).is_some() {
            assert_eq!(r.code.get(), 213);
        }
        match partial_answer(&r) {
            PartialAnswer::Held(p) => {
                assert_eq!(r.code.get(), 213);
                assert!(p.xxh128.chars().all(|c| !c.is_ascii_uppercase()), "{:?}", p.xxh128);
            }
            PartialAnswer::Busy => assert_eq!(r.code.get(), 450),
            PartialAnswer::Nothing => assert_eq!(r.code.get(), 550),
            PartialAnswer::Unknown => {}
        }
        if worth_retrying(&r) {
            assert!(matches!(r.code.get(), 400..=499 | 554), "{r:?}");
        }
        if ends_abort(&r) {
            assert!(r.code.get() != 426 && r.code.get() >= 200, "{r:?}");
        }
    }
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
