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
        let again = Command::parse(cmd.to_string().as_bytes());
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
                Action::AbortTransfer => vec![],
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
