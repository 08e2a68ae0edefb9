//! Control-channel replies: formatting for the server, incremental parsing
//! for the client.
//!
//! RFC 959 §4.2: a reply is a three-digit code followed by a space and text;
//! a multi-line reply opens with `ddd-`, and ends with a line starting with the
//! same code followed by a space. Lines in between that happen to begin with
//! three digits and a space are padded with a leading space, as §4.2 advises,
//! so a client cannot mistake them for the last line.

use std::fmt;
use thiserror::Error;

/// A reply code (100..=599).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReplyCode(u16);

impl ReplyCode {
    pub const RESTART_MARKER: Self = Self(110);
    pub const RANGE_MARKER: Self = Self(111);
    pub const PERF_MARKER: Self = Self(112);
    pub const DATA_CONNECTION_ALREADY_OPEN: Self = Self(125);
    pub const DELAYED_PASSIVE: Self = Self(127);
    pub const FILE_STATUS_OK: Self = Self(150);
    pub const OK: Self = Self(200);
    pub const SUPERFLUOUS: Self = Self(202);
    pub const SYSTEM_STATUS: Self = Self(211);
    pub const DIRECTORY_STATUS: Self = Self(212);
    pub const FILE_STATUS: Self = Self(213);
    pub const HELP: Self = Self(214);
    pub const SYSTEM_TYPE: Self = Self(215);
    pub const SERVICE_READY: Self = Self(220);
    pub const CLOSING_CONTROL: Self = Self(221);
    pub const ABORT_OK: Self = Self(225);
    pub const CLOSING_DATA: Self = Self(226);
    pub const PASSIVE: Self = Self(227);
    pub const LONG_PASSIVE: Self = Self(228);
    pub const EXTENDED_PASSIVE: Self = Self(229);
    pub const STRIPED_PASSIVE: Self = Self(229);
    pub const LOGGED_IN: Self = Self(230);
    /// RFC 2228: logged in, authorized by the security exchange (a mapped
    /// client certificate).
    pub const LOGGED_IN_SECURE: Self = Self(232);
    pub const AUTH_OK: Self = Self(234);
    pub const FILE_ACTION_OK: Self = Self(250);
    pub const PATH_CREATED: Self = Self(257);
    pub const NEED_PASSWORD: Self = Self(331);
    pub const PENDING_FURTHER_INFO: Self = Self(350);
    pub const SERVICE_UNAVAILABLE: Self = Self(421);
    /// RFC 2228: need some unavailable resource to process security.
    pub const SECURITY_RESOURCE_UNAVAILABLE: Self = Self(431);
    pub const CANT_OPEN_DATA: Self = Self(425);
    pub const TRANSFER_ABORTED: Self = Self(426);
    pub const FILE_BUSY: Self = Self(450);
    pub const LOCAL_ERROR: Self = Self(451);
    pub const INSUFFICIENT_STORAGE: Self = Self(452);
    pub const SYNTAX_ERROR: Self = Self(500);
    pub const PARAMETER_SYNTAX_ERROR: Self = Self(501);
    pub const NOT_IMPLEMENTED: Self = Self(502);
    pub const BAD_SEQUENCE: Self = Self(503);
    pub const PARAMETER_NOT_IMPLEMENTED: Self = Self(504);
    /// RFC 2428 §2/§3: "522 Network protocol not supported, use (1,2)",
    /// for EPRT and EPSV naming an address family the server lacks.
    pub const NETWORK_PROTOCOL_NOT_SUPPORTED: Self = Self(522);
    /// RFC 4217 §9: data connection cannot be opened with this PROT setting.
    pub const PROT_REFUSED: Self = Self(521);
    pub const NOT_LOGGED_IN: Self = Self(530);
    /// RFC 2228: command protection level denied for policy reasons.
    pub const NOT_PROTECTED: Self = Self(533);
    pub const POLICY_DENIED: Self = Self(534);
    /// RFC 2228: requested PROT level not supported by mechanism.
    pub const PROT_NOT_SUPPORTED: Self = Self(536);
    pub const FILE_UNAVAILABLE: Self = Self(550);
    pub const EXCEEDED_STORAGE: Self = Self(552);
    pub const NAME_NOT_ALLOWED: Self = Self(553);
    pub const INVALID_RESTART: Self = Self(554);

    /// A code from its number; `None` outside 100..=599.
    pub fn new(code: u16) -> Option<Self> {
        (100..=599).contains(&code).then_some(Self(code))
    }

    pub fn get(self) -> u16 {
        self.0
    }

    /// 1yz: the command was accepted and another reply will follow.
    pub fn is_preliminary(self) -> bool {
        self.0 < 200
    }

    /// 2yz.
    pub fn is_positive_completion(self) -> bool {
        (200..300).contains(&self.0)
    }

    /// 3yz: more information is expected (PASS after USER, RNTO after RNFR).
    pub fn is_intermediate(self) -> bool {
        (300..400).contains(&self.0)
    }

    /// 4yz or 5yz.
    pub fn is_negative(self) -> bool {
        self.0 >= 400
    }
}

impl fmt::Display for ReplyCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:03}", self.0)
    }
}

/// One reply, possibly multi-line. The first line's text is `lines[0]`; for
/// a multi-line reply the last element is the text of the closing line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub code: ReplyCode,
    pub lines: Vec<String>,
}

impl Reply {
    pub fn new(code: ReplyCode, text: impl Into<String>) -> Self {
        Self { code, lines: vec![text.into()] }
    }

    /// A multi-line reply: `first`, the `body` lines verbatim (callers that
    /// follow the FEAT/MLST convention include the leading space), and `last`.
    pub fn multiline(
        code: ReplyCode,
        first: impl Into<String>,
        body: impl IntoIterator<Item = String>,
        last: impl Into<String>,
    ) -> Self {
        let mut lines = vec![first.into()];
        lines.extend(body);
        lines.push(last.into());
        Self { code, lines }
    }

    /// The text of all lines joined by newlines, for messages shown to users.
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    /// Wire form, every line ended by CRLF; names that are not UTF-8 go
    /// out as their own octets, 0xFF doubled (see `octets::to_control`).
    pub fn to_bytes(&self) -> Vec<u8> {
        crate::octets::to_control(&self.to_string())
    }
}

/// Text from a file name or an error message must not break the reply
/// framing: CR and LF would let a crafted name inject a fake reply.
fn sanitize(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains(['\r', '\n']) {
        text.replace(['\r', '\n'], " ").into()
    } else {
        text.into()
    }
}

fn starts_like_final_line(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() >= 4 && b[..3].iter().all(u8::is_ascii_digit) && b[3] == b' '
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.lines.len();
        if n <= 1 {
            let text = self.lines.first().map(String::as_str).unwrap_or("");
            return write!(f, "{} {}\r\n", self.code, sanitize(text));
        }
        write!(f, "{}-{}\r\n", self.code, sanitize(&self.lines[0]))?;
        for line in &self.lines[1..n - 1] {
            let line = sanitize(line);
            if starts_like_final_line(&line) {
                write!(f, " {line}\r\n")?;
            } else {
                write!(f, "{line}\r\n")?;
            }
        }
        write!(f, "{} {}\r\n", self.code, sanitize(&self.lines[n - 1]))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReplyError {
    #[error("reply line does not start with a three-digit code: {0:?}")]
    BadCode(String),
    #[error("reply line longer than {0} bytes")]
    LineTooLong(usize),
    #[error("multi-line reply longer than {0} lines")]
    TooManyLines(usize),
    #[error("reply is not valid UTF-8")]
    NotUtf8,
}

/// Incremental reply parser for the client side of a control channel.
///
/// Bounded: a line longer than `max_line` or a multi-line reply with more
/// than `max_lines` lines is an error (a hostile server cannot make the
/// client buffer without limit). Octets that are not UTF-8 (Latin-1 file
/// names) are kept, through `octets`' reversible escape.
#[derive(Debug)]
pub struct ReplyParser {
    buf: Vec<u8>,
    partial: Option<Reply>,
    max_line: usize,
    max_lines: usize,
}

impl Default for ReplyParser {
    fn default() -> Self {
        Self::new(64 * 1024, 100_000)
    }
}

impl ReplyParser {
    pub fn new(max_line: usize, max_lines: usize) -> Self {
        Self { buf: Vec::new(), partial: None, max_line, max_lines }
    }

    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Whether bytes of an incomplete reply are held.
    pub fn is_mid_reply(&self) -> bool {
        self.partial.is_some() || !self.buf.is_empty()
    }

    /// The next complete reply, `Ok(None)` if more bytes are needed.
    pub fn next_reply(&mut self) -> Result<Option<Reply>, ReplyError> {
        loop {
            let Some(end) = self.buf.iter().position(|&b| b == b'\n') else {
                if self.buf.len() > self.max_line {
                    return Err(ReplyError::LineTooLong(self.max_line));
                }
                return Ok(None);
            };
            if end > self.max_line {
                return Err(ReplyError::LineTooLong(self.max_line));
            }
            let mut raw: Vec<u8> = self.buf.drain(..=end).collect();
            raw.pop();
            if raw.last() == Some(&b'\r') {
                raw.pop();
            }
            let line = crate::octets::from_control(&raw);
            if let Some(reply) = self.take_line(line)? {
                return Ok(Some(reply));
            }
        }
    }

    fn take_line(&mut self, line: String) -> Result<Option<Reply>, ReplyError> {
        let code = parse_code(&line);
        match self.partial.as_mut() {
            None => {
                let code = code.ok_or_else(|| ReplyError::BadCode(line.clone()))?;
                let sep = line.as_bytes().get(3).copied();
                let text = line.get(4..).unwrap_or("").to_string();
                let reply = Reply::new(code, text);
                if sep == Some(b'-') {
                    self.partial = Some(reply);
                    Ok(None)
                } else {
                    Ok(Some(reply))
                }
            }
            Some(partial) => {
                let is_last = code == Some(partial.code) && line.as_bytes().get(3) == Some(&b' ');
                if is_last {
                    partial.lines.push(line[4..].to_string());
                    Ok(self.partial.take())
                } else {
                    if partial.lines.len() >= self.max_lines {
                        return Err(ReplyError::TooManyLines(self.max_lines));
                    }
                    // Intermediate lines may repeat the code with a '-'
                    // (`213-`, `250-`): keep the text only.
                    let text = if code == Some(partial.code) && line.as_bytes().get(3) == Some(&b'-') {
                        line[4..].to_string()
                    } else {
                        line
                    };
                    partial.lines.push(text);
                    Ok(None)
                }
            }
        }
    }
}

fn parse_code(line: &str) -> Option<ReplyCode> {
    let b = line.as_bytes();
    if b.len() < 3 || !b[..3].iter().all(u8::is_ascii_digit) {
        return None;
    }
    if b.len() > 3 && b[3] != b' ' && b[3] != b'-' {
        return None;
    }
    ReplyCode::new(line[..3].parse().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_single_and_multi_line() {
        let r = Reply::new(ReplyCode::OK, "Type set to I.");
        assert_eq!(r.to_string(), "200 Type set to I.\r\n");
        let r = Reply::multiline(
            ReplyCode::SYSTEM_STATUS,
            "Extensions supported",
            [" SIZE".to_string(), "211 sneaky".to_string()],
            "End.",
        );
        assert_eq!(r.to_string(), "211-Extensions supported\r\n SIZE\r\n 211 sneaky\r\n211 End.\r\n");
    }

    #[test]
    fn crlf_in_text_cannot_inject_a_reply() {
        let r = Reply::new(ReplyCode::FILE_UNAVAILABLE, "no such file: a\r\n230 ok");
        assert_eq!(r.to_string(), "550 no such file: a  230 ok\r\n");
    }

    #[test]
    fn parses_multiline_across_pushes() {
        let mut p = ReplyParser::default();
        p.push(b"220 ready\r\n250-status of x\r\n Type=file; x\r\n");
        assert_eq!(p.next_reply().unwrap(), Some(Reply::new(ReplyCode::SERVICE_READY, "ready")));
        assert_eq!(p.next_reply().unwrap(), None);
        p.push(b"250 End.\r\n");
        let r = p.next_reply().unwrap().unwrap();
        assert_eq!(r.code.get(), 250);
        assert_eq!(r.lines, vec!["status of x", " Type=file; x", "End."]);
    }

    #[test]
    fn rejects_garbage_and_bounds_lines() {
        let mut p = ReplyParser::new(16, 4);
        p.push(b"hello\r\n");
        assert!(matches!(p.next_reply(), Err(ReplyError::BadCode(_))));
        let mut p = ReplyParser::new(16, 4);
        p.push(&[b'2'; 40]);
        assert_eq!(p.next_reply(), Err(ReplyError::LineTooLong(16)));
        let mut p = ReplyParser::new(16, 2);
        p.push(b"211-a\r\nb\r\nc\r\nd\r\n");
        assert_eq!(p.next_reply(), Err(ReplyError::TooManyLines(2)));
    }
}
