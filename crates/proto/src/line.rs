//! Framing of the control channel into command lines.
//!
//! RFC 959 §4.1 ends every command with `<CRLF>`; real clients sometimes send a
//! bare `<LF>`, and an `ABOR` sent as TCP urgent data can arrive with its
//! Telnet `IP`/`Synch` prefix. The buffer is bounded: a peer that never sends a
//! newline can make us hold at most `max_line` bytes, after which the rest of
//! that line is discarded and reported once as [`LineError::TooLong`].

use thiserror::Error;

/// Default bound on one command line. Long enough for any path a file system
/// accepts (PATH_MAX is 4096) plus the verb, far below anything that could
/// hurt memory.
pub const DEFAULT_MAX_LINE: usize = 8192;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LineError {
    /// A line exceeded the bound; its bytes were dropped up to the next LF.
    #[error("command line longer than {max} bytes")]
    TooLong { max: usize },
}

/// Accumulates bytes from the control connection and yields complete lines
/// (without the terminator and with Telnet command sequences removed).
///
/// Invariant: the unterminated tail of `buf` never exceeds `max_line` bytes;
/// complete lines waiting to be taken are bounded by one read's worth.
#[derive(Debug)]
pub struct LineBuffer {
    buf: Vec<u8>,
    max_line: usize,
    /// True while skipping the remainder of an over-long line.
    discarding: bool,
    /// An over-long tail was dropped; reported after the lines before it.
    overflowed: bool,
}

impl LineBuffer {
    pub fn new(max_line: usize) -> Self {
        Self { buf: Vec::new(), max_line, discarding: false, overflowed: false }
    }

    /// Bytes currently held.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Feed bytes read from the socket.
    pub fn push(&mut self, mut data: &[u8]) {
        if self.discarding {
            match data.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.discarding = false;
                    data = &data[i + 1..];
                }
                None => return,
            }
        }
        let old_len = self.buf.len();
        self.buf.extend_from_slice(data);
        let tail_start = match data.iter().rposition(|&b| b == b'\n') {
            Some(i) => old_len + i + 1,
            None => self.buf[..old_len].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1),
        };
        if self.buf.len() - tail_start > self.max_line {
            self.buf.truncate(tail_start);
            self.discarding = true;
            self.overflowed = true;
        }
    }

    /// The next complete line, if any. An over-long line is reported as an
    /// error in its place.
    pub fn next_line(&mut self) -> Option<Result<Vec<u8>, LineError>> {
        let Some(end) = self.buf.iter().position(|&b| b == b'\n') else {
            if self.overflowed {
                self.overflowed = false;
                return Some(Err(LineError::TooLong { max: self.max_line }));
            }
            return None;
        };
        let mut line: Vec<u8> = self.buf.drain(..=end).collect();
        line.pop(); // LF
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.len() > self.max_line {
            return Some(Err(LineError::TooLong { max: self.max_line }));
        }
        Some(Ok(strip_telnet(&line)))
    }
}

/// Frames and parses in one step: what a server's reader does per line.
pub fn parse_line(line: Result<Vec<u8>, LineError>) -> Result<crate::Command, crate::CommandError> {
    match line {
        Ok(l) => crate::Command::parse(&l),
        Err(LineError::TooLong { max }) => Err(crate::CommandError::TooLong(max)),
    }
}

/// Removes Telnet command sequences (RFC 854) from a line.
///
/// Clients send `IAC IP IAC DM` (0xFF 0xF4 0xFF 0xF2) before `ABOR` (RFC 959
/// §4.1.3); `IAC IAC` stands for a literal 0xFF; `WILL/WONT/DO/DONT` carry one
/// option byte.
pub fn strip_telnet(line: &[u8]) -> Vec<u8> {
    const IAC: u8 = 0xFF;
    let mut out = Vec::with_capacity(line.len());
    let mut i = 0;
    while i < line.len() {
        if line[i] != IAC {
            out.push(line[i]);
            i += 1;
            continue;
        }
        match line.get(i + 1) {
            Some(&IAC) => {
                out.push(IAC);
                i += 2;
            }
            // WILL, WONT, DO, DONT take an option byte.
            Some(&(0xFB..=0xFE)) => i += 3,
            Some(_) => i += 2,
            None => i += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(buf: &mut LineBuffer) -> Vec<Result<Vec<u8>, LineError>> {
        std::iter::from_fn(|| buf.next_line()).collect()
    }

    #[test]
    fn splits_crlf_and_lf() {
        let mut b = LineBuffer::new(100);
        b.push(b"USER a\r\nPASS b\nNO");
        assert_eq!(lines(&mut b), vec![Ok(b"USER a".to_vec()), Ok(b"PASS b".to_vec())]);
        b.push(b"OP\r\n");
        assert_eq!(lines(&mut b), vec![Ok(b"NOOP".to_vec())]);
    }

    #[test]
    fn overlong_line_is_reported_once_and_skipped() {
        let mut b = LineBuffer::new(10);
        b.push(&[b'x'; 25]);
        assert_eq!(lines(&mut b), vec![Err(LineError::TooLong { max: 10 })]);
        b.push(&[b'y'; 1000]);
        assert!(lines(&mut b).is_empty());
        assert!(b.buffered() <= 11);
        b.push(b"zz\r\nNOOP\r\n");
        assert_eq!(lines(&mut b), vec![Ok(b"NOOP".to_vec())]);
    }

    #[test]
    fn overlong_line_in_one_chunk_with_newline() {
        let mut b = LineBuffer::new(10);
        let mut data = vec![b'a'; 100];
        data.extend_from_slice(b"\r\nNOOP\r\n");
        b.push(&data);
        assert_eq!(lines(&mut b), vec![Err(LineError::TooLong { max: 10 }), Ok(b"NOOP".to_vec())]);
    }

    #[test]
    fn telnet_abort_prefix_is_removed() {
        let mut b = LineBuffer::new(100);
        b.push(b"\xff\xf4\xff\xf2ABOR\r\n");
        assert_eq!(lines(&mut b), vec![Ok(b"ABOR".to_vec())]);
        assert_eq!(strip_telnet(b"a\xff\xffb\xff\xfb\x01c"), b"a\xffbc".to_vec());
    }
}
