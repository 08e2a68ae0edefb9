//! What a client makes of a reply: its class (RFC 959 §4.2.1), whether it
//! is a GridFTP marker, and whether it is the answer a command needed.
//!
//! RFC 959 §4.2.1: the first digit says it all — 1yz positive preliminary
//! (another reply follows), 2yz positive completion, 3yz positive
//! intermediate (send the next command of a sequence), 4yz transient and
//! 5yz permanent negative completion. GridFTP adds `111` restart and `112`
//! performance markers (GFD.20) that may come any number of times between
//! a transfer's preliminary and final replies; they answer nothing.

use crate::command::Command;
use crate::markers::{parse_range_marker, PerfMarker};
use crate::reply::Reply;
use crate::restart::RangeSet;

/// A marker a server sent during a transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    /// `111`: ranges newly written at the receiving end.
    Restart(RangeSet),
    /// `112`: bytes transferred so far.
    Perf(u64),
}

/// What one reply is, to a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyClass {
    /// `111`/`112`; `None` when its text does not parse (it is still a
    /// marker, and still answers nothing).
    Marker(Option<Marker>),
    /// 1yz: another reply follows.
    Preliminary,
    /// 2yz.
    Completion,
    /// 3yz.
    Intermediate,
    /// 4yz: the command may succeed if tried again.
    TransientNegative,
    /// 5yz.
    PermanentNegative,
}

impl ReplyClass {
    /// Whether the reply ends its command (not a marker, not 1yz).
    pub fn is_final(&self) -> bool {
        !matches!(self, ReplyClass::Marker(_) | ReplyClass::Preliminary)
    }
}

pub fn classify(r: &Reply) -> ReplyClass {
    match r.code.get() {
        111 => ReplyClass::Marker(parse_range_marker(r).map(Marker::Restart)),
        112 => ReplyClass::Marker(PerfMarker::parse(r).map(|p| Marker::Perf(p.bytes))),
        100..=199 => ReplyClass::Preliminary,
        200..=299 => ReplyClass::Completion,
        300..=399 => ReplyClass::Intermediate,
        400..=499 => ReplyClass::TransientNegative,
        _ => ReplyClass::PermanentNegative,
    }
}

/// The marker in `r`, if it is one that parses.
pub fn marker(r: &Reply) -> Option<Marker> {
    match classify(r) {
        ReplyClass::Marker(m) => m,
        _ => None,
    }
}

/// What the final reply to a command must be for the client to go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// 2xx or 3xx (set-up commands: MODE, TYPE, PORT, OPTS...).
    Positive,
    /// 2xx only (the end of a transfer, ALLO before a pipelined STOR).
    Completion,
    /// `350`, the answer to REST (RFC 3659 §5.5).
    Restart,
    /// `227` or `229` with an address (PASV, EPSV).
    Passive,
    /// Anything: an advisory command (ALLO in stream mode, OPTS UTF8).
    Any,
}

impl Expect {
    /// What `cmd`'s final reply must be when the caller says nothing
    /// more: `350` for REST (RFC 3659 §5.5), an address for PASV/EPSV,
    /// 2yz for a transfer (RFC 959 §4.1.3: `226`/`250` when the data is
    /// through), anything for advisory commands (ALLO, OPTS, ABOR, QUIT —
    /// servers without them answer `202`/`5xx` and the client goes on),
    /// 2yz or 3yz for the rest.
    pub fn for_command(cmd: &Command) -> Expect {
        match cmd {
            Command::Rest(_) => Expect::Restart,
            Command::Pasv | Command::Epsv(_) => Expect::Passive,
            Command::Retr(_)
            | Command::Stor(_)
            | Command::Stou
            | Command::Appe(_)
            | Command::List(_)
            | Command::Nlst(_)
            | Command::Mlsd(_)
            | Command::Eret { .. }
            | Command::Esto { .. } => Expect::Completion,
            Command::Allo(_) | Command::Opts(_) | Command::Abor | Command::Quit => Expect::Any,
            _ => Expect::Positive,
        }
    }

    /// Whether the final reply `r` is what this expectation needs.
    pub fn accepts(self, r: &Reply) -> bool {
        let c = r.code;
        match self {
            Expect::Positive => c.is_positive_completion() || c.is_intermediate(),
            Expect::Completion => c.is_positive_completion(),
            Expect::Restart => c.get() == 350,
            Expect::Passive => matches!(c.get(), 227 | 229),
            Expect::Any => true,
        }
    }
}

/// Whether a failed command is worth another attempt after reconnecting:
/// a transient negative reply (4yz, RFC 959 §4.2.1: "the error condition
/// is temporary"), or a `554` refusing our restart ranges (RFC 3659 §5.4,
/// "invalid REST parameter"), since the next attempt starts over — not a
/// missing file or a refused login.
pub fn worth_retrying(r: &Reply) -> bool {
    (400..500).contains(&r.code.get()) || r.code.get() == 554
}

/// Whether the destination says the client's restart record is wrong: a
/// `554` for the REST ranges, or a refusal that names ranges missing at
/// the end (Ferry's check before it commits an upload). The record is
/// then forgotten and the next attempt sends everything.
pub fn refutes_restart(r: &Reply) -> bool {
    r.code.get() == 554 || r.text().contains("missing")
}

/// Whether `r` is the last reply an ABOR brings. RFC 959 §4.1.3: a
/// transfer in progress is answered `426` and then the ABOR `226`; with
/// none in progress the ABOR alone gets `225`/`226`. Any other refusal
/// ends it too.
pub fn ends_abort(r: &Reply) -> bool {
    matches!(r.code.get(), 225 | 226) || (r.code.is_negative() && r.code.get() != 426)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::ReplyCode;

    fn r(code: u16, text: &str) -> Reply {
        Reply::new(ReplyCode::new(code).unwrap(), text)
    }

    #[test]
    fn classes_and_expectations() {
        assert_eq!(classify(&r(150, "Opening")), ReplyClass::Preliminary);
        assert_eq!(
            classify(&r(111, "Range Marker 0-10")),
            ReplyClass::Marker(Some(Marker::Restart(RangeSet::from_range(0..10))))
        );
        assert_eq!(classify(&r(111, "garbage")), ReplyClass::Marker(None));
        assert!(!classify(&r(112, "x")).is_final());
        assert_eq!(classify(&r(451, "x")), ReplyClass::TransientNegative);
        assert!(Expect::Positive.accepts(&r(350, "x")) && !Expect::Completion.accepts(&r(350, "x")));
        assert!(Expect::Restart.accepts(&r(350, "x")) && !Expect::Restart.accepts(&r(200, "x")));
        assert!(Expect::Passive.accepts(&r(229, "x")) && !Expect::Passive.accepts(&r(200, "x")));
        assert!(Expect::Any.accepts(&r(502, "x")));
        assert_eq!(Expect::for_command(&Command::Pasv), Expect::Passive);
        assert_eq!(Expect::for_command(&Command::Retr("f".into())), Expect::Completion);
        assert_eq!(Expect::for_command(&Command::Abor), Expect::Any);
        assert_eq!(Expect::for_command(&Command::Noop), Expect::Positive);
    }

    #[test]
    fn retries_restart_refutations_and_abort_ends() {
        assert!(worth_retrying(&r(451, "local error")) && worth_retrying(&r(554, "bad REST")));
        assert!(!worth_retrying(&r(550, "no such file")) && !worth_retrying(&r(530, "login")));
        assert!(refutes_restart(&r(554, "x")) && refutes_restart(&r(451, "ranges missing: 0-5")));
        assert!(!refutes_restart(&r(451, "disk full")));
        assert!(!ends_abort(&r(426, "aborted")) && ends_abort(&r(226, "ABOR ok")) && ends_abort(&r(225, "x")));
        assert!(ends_abort(&r(500, "what?")) && !ends_abort(&r(150, "x")));
    }
}
