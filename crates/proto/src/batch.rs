//! Ferry-to-Ferry batch transfers: `BRET` and `BSTO` name many files in
//! one command line (docs/batch.md).
//!
//! ```text
//! BRET <count> <path> <path> ...              (download these files)
//! BSTO <count> <size>:<path> <size>:<path> ... (upload these files)
//! ```
//!
//! Each path is the file's octets (RFC 3659 §2.2) with every byte that is
//! not printable ASCII, and `%`, written as `%XX`: so names with spaces,
//! CR, LF or bytes that are not UTF-8 travel in one space-separated line.
//! The count is repeated in front so a truncated or spliced line is
//! refused rather than half-served.
//!
//! A batch is exactly the pipelined commands it stands for — `RETR p` for
//! each path, `ALLO size` + `STOR p` for each upload — and is answered with
//! exactly their replies, in order ([`Batch::expand`]): the files travel
//! over the session's cached MODE E channels one after the other, each is
//! its own transfer under the partial-file rules (`docs/partial-files.md`:
//! written to a partial, renamed to its name when complete), each gets its
//! own `226` or error, and a killed batch leaves each file either complete
//! or a partial that `REST` resumes range by range. A malformed batch is
//! answered once (`501`) and runs nothing.
//!
//! `BSTO SYNC <count> ...` (FEAT `BATCH RETR,STOR,SYNC`) changes one
//! thing: durability is per batch. Each file's `226` means "complete and
//! under its final name" (renamed after its data was written, never a
//! partial file under the name), and one more reply after the last file's
//! — the batch's final reply, [`Command::BatchEnd`] in the expansion —
//! means "every file of this batch is durable", after one durability pass
//! on the server. The client reports the batch's files as stored only
//! after it. A plain `BSTO` keeps the per-file rule (each file synced
//! before its `226`).
//!
//! Bounds: at most [`MAX_BATCH_FILES`] entries, each path at most
//! [`MAX_BATCH_PATH`] bytes decoded, and the whole line within the control
//! channel's line limit (8 KiB by default), so a batch never asks the
//! server to hold more than one line's worth of names.

use crate::command::{Allo, Command, CommandError};
use std::fmt;

/// Most files one batch command may name.
pub const MAX_BATCH_FILES: usize = 512;
/// Longest decoded path of an entry (PATH_MAX).
pub const MAX_BATCH_PATH: usize = 4096;
/// The FEAT line a server that serves batches sends.
pub const FEAT_LINE: &str = " BATCH RETR,STOR,SYNC";
/// The word of FEAT's `BATCH` line, and of `BSTO SYNC`, for durability per
/// batch.
pub const SYNC_WORD: &str = "SYNC";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    /// `BRET`: downloads.
    Retrieve,
    /// `BSTO`: uploads, each with its size (sent as `ALLO`).
    Store,
}

/// One file of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchEntry {
    /// As `RETR`/`STOR` would carry it (octets that are not UTF-8 in
    /// `octets`' escape).
    pub path: String,
    /// `BSTO` only.
    pub size: Option<u64>,
}

/// A parsed `BRET`/`BSTO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub kind: BatchKind,
    pub files: Vec<BatchEntry>,
    /// `BSTO SYNC`: one durability pass for the batch, answered by a
    /// final reply after the last file's (see the module's doc).
    pub sync: bool,
}

fn syntax(verb: &'static str, reason: impl Into<String>) -> CommandError {
    CommandError::Syntax { verb, reason: reason.into() }
}

impl Batch {
    pub fn verb(&self) -> &'static str {
        match self.kind {
            BatchKind::Retrieve => "BRET",
            BatchKind::Store => "BSTO",
        }
    }

    /// Downloads of `paths`.
    pub fn retrieve(paths: impl IntoIterator<Item = String>) -> Batch {
        Batch {
            kind: BatchKind::Retrieve,
            files: paths.into_iter().map(|path| BatchEntry { path, size: None }).collect(),
            sync: false,
        }
    }

    /// Uploads of `(path, size)`.
    pub fn store(files: impl IntoIterator<Item = (String, u64)>) -> Batch {
        Batch {
            kind: BatchKind::Store,
            files: files.into_iter().map(|(path, size)| BatchEntry { path, size: Some(size) }).collect(),
            sync: false,
        }
    }

    /// This upload batch with durability per batch (`BSTO SYNC`).
    pub fn durable_at_end(mut self) -> Batch {
        self.sync = self.kind == BatchKind::Store;
        self
    }

    /// The commands this batch stands for, in order; the server queues
    /// them as if they had been pipelined, and the client expects their
    /// replies.
    pub fn expand(&self) -> Vec<Command> {
        let mut out = Vec::with_capacity(self.files.len() * 2);
        for f in &self.files {
            match self.kind {
                BatchKind::Retrieve => out.push(Command::Retr(f.path.clone())),
                BatchKind::Store => {
                    out.push(Command::Allo(Allo { size: f.size.unwrap_or(0), record: None }));
                    out.push(Command::Stor(f.path.clone()));
                }
            }
        }
        if self.sync {
            out.push(Command::BatchEnd { files: self.files.len() });
        }
        out
    }

    /// Parses the argument of `BRET`/`BSTO` (after `octets::decode`).
    pub fn parse(kind: BatchKind, arg: Option<&str>) -> Result<Batch, CommandError> {
        let verb = match kind {
            BatchKind::Retrieve => "BRET",
            BatchKind::Store => "BSTO",
        };
        let arg =
            arg.map(str::trim).filter(|a| !a.is_empty()).ok_or_else(|| syntax(verb, "expected a count and paths"))?;
        let mut words = arg.split(' ').filter(|w| !w.is_empty()).peekable();
        let sync = kind == BatchKind::Store && words.next_if(|w| w.eq_ignore_ascii_case(SYNC_WORD)).is_some();
        let count = words.next().unwrap_or("");
        if count.is_empty() || count.len() > 6 || !count.bytes().all(|b| b.is_ascii_digit()) {
            return Err(syntax(verb, "expected the number of files first"));
        }
        let count: usize = count.parse().map_err(|_| syntax(verb, "bad count"))?;
        if count == 0 {
            return Err(syntax(verb, "a batch names at least one file"));
        }
        if count > MAX_BATCH_FILES {
            return Err(syntax(verb, format!("{count} files; at most {MAX_BATCH_FILES} per batch")));
        }
        let mut files = Vec::with_capacity(count);
        for w in words {
            if files.len() == count {
                return Err(syntax(verb, format!("more entries than the count ({count})")));
            }
            let (size, path) = match kind {
                BatchKind::Retrieve => (None, w),
                BatchKind::Store => {
                    let (s, p) = w.split_once(':').ok_or_else(|| syntax(verb, "expected <size>:<path>"))?;
                    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(syntax(verb, "expected a decimal size before ':'"));
                    }
                    (Some(s.parse::<u64>().map_err(|_| syntax(verb, "size out of range"))?), p)
                }
            };
            let path = decode_path(verb, path)?;
            files.push(BatchEntry { path, size });
        }
        if files.len() != count {
            return Err(syntax(verb, format!("{} entries, but the count says {count}", files.len())));
        }
        Ok(Batch { kind, files, sync })
    }
}

/// `%XX` escapes back to octets, then to a path string.
fn decode_path(verb: &'static str, w: &str) -> Result<String, CommandError> {
    // The line's own octets: escapes of `octets::decode` count as raw bytes.
    let raw = crate::octets::encode(w);
    if raw.is_empty() {
        return Err(syntax(verb, "empty path"));
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == b'%' {
            let hex = raw.get(i + 1..i + 3).ok_or_else(|| syntax(verb, "truncated %XX escape"))?;
            let s = std::str::from_utf8(hex).map_err(|_| syntax(verb, "bad %XX escape"))?;
            let v = u8::from_str_radix(s, 16).map_err(|_| syntax(verb, "bad %XX escape"))?;
            out.push(v);
            i += 3;
        } else if b.is_ascii_graphic() {
            out.push(b);
            i += 1;
        } else {
            return Err(syntax(verb, "paths must escape bytes that are not printable ASCII as %XX"));
        }
        if out.len() > MAX_BATCH_PATH {
            return Err(syntax(verb, format!("a path longer than {MAX_BATCH_PATH} bytes")));
        }
    }
    if out.contains(&0) {
        return Err(syntax(verb, "a path with a NUL byte"));
    }
    Ok(crate::octets::decode(&out).into_owned())
}

/// A path as a batch entry: printable ASCII except `%` as is, every other
/// octet as `%XX`.
pub fn encode_path(path: &str) -> String {
    let mut s = String::with_capacity(path.len());
    for &b in crate::octets::encode(path).iter() {
        if b.is_ascii_graphic() && b != b'%' {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

impl fmt::Display for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.verb())?;
        if self.sync {
            write!(f, " {SYNC_WORD}")?;
        }
        write!(f, " {}", self.files.len())?;
        for e in &self.files {
            match e.size {
                Some(s) if self.kind == BatchKind::Store => write!(f, " {s}:{}", encode_path(&e.path))?,
                _ => write!(f, " {}", encode_path(&e.path))?,
            }
        }
        Ok(())
    }
}

/// How many batch entries fit in one command line of `max_line` bytes
/// (with its CRLF), starting at `files[0]`; at least one, at most
/// [`MAX_BATCH_FILES`]. The client cuts its lists with it.
pub fn fits(kind: BatchKind, files: &[(&str, u64)], max_line: usize) -> usize {
    let mut len = "BSTO SYNC 512".len() + 2;
    let mut n = 0;
    for (p, size) in files.iter().take(MAX_BATCH_FILES) {
        let entry = 1 + encode_path(p).len() + if kind == BatchKind::Store { 21 } else { 0 };
        if n > 0 && len + entry > max_line {
            break;
        }
        len += entry;
        n += 1;
        let _ = size;
    }
    n.max(1).min(files.len().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;

    fn p(line: &str) -> Result<Command, CommandError> {
        Command::parse(line.as_bytes())
    }

    #[test]
    fn round_trips_and_expands() {
        let b = Batch::retrieve(["/a b/c%d".to_string(), "x\ny".into(), "caf\u{10FFE9}".into()]);
        let line = b.to_string();
        assert_eq!(line, "BRET 3 /a%20b/c%25d x%0Ay caf%E9");
        assert_eq!(p(&line), Ok(Command::Batch(b.clone())));
        assert_eq!(
            b.expand(),
            vec![Command::Retr("/a b/c%d".into()), Command::Retr("x\ny".into()), Command::Retr("caf\u{10FFE9}".into())]
        );
        let s = Batch::store([("/t/f1".to_string(), 10), ("/t/f2".into(), 0)]);
        assert_eq!(s.to_string(), "BSTO 2 10:/t/f1 0:/t/f2");
        assert_eq!(p(&s.to_string()), Ok(Command::Batch(s.clone())));
        assert_eq!(s.expand().len(), 4);
        let d = s.clone().durable_at_end();
        assert_eq!(d.to_string(), "BSTO SYNC 2 10:/t/f1 0:/t/f2");
        assert_eq!(p(&d.to_string()), Ok(Command::Batch(d.clone())));
        assert_eq!(p("BSTO sync 1 3:/x").map(|c| matches!(c, Command::Batch(b) if b.sync)), Ok(true));
        let e = d.expand();
        assert_eq!(e.len(), 5);
        assert_eq!(e[4], Command::BatchEnd { files: 2 }, "the final reply comes after the last file's");
        assert!(!b.clone().durable_at_end().sync, "downloads have no durability reply");
    }

    #[test]
    fn malformed_batches_are_refused_with_501() {
        for line in [
            "BRET",
            "BRET 0",
            "BRET x /a",
            "BRET 2 /a",
            "BRET 1 /a /b",
            "BRET 1 %",
            "BRET 1 %zz",
            "BRET 1 a%00b",
            "BRET 513 /a",
            "BRET 9999999 /a",
            "BSTO 1 /a",
            "BSTO 1 x:/a",
            "BSTO 1 99999999999999999999999:/a",
            "BSTO 1 5:",
            "BSTO SYNC",
            "BSTO SYNC SYNC 1 5:/a",
            "BRET SYNC 1 /a",
        ] {
            let e = p(line).expect_err(line);
            assert_eq!(e.code().get(), 501, "{line}: {e}");
        }
        let long = format!("BRET 1 {}", "a".repeat(MAX_BATCH_PATH + 1));
        assert_eq!(p(&long).unwrap_err().code().get(), 501);
    }

    #[test]
    fn fits_in_a_line() {
        let names: Vec<String> = (0..2000).map(|i| format!("/tree/f{i:05}.dat")).collect();
        let files: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 4096)).collect();
        let n = fits(BatchKind::Store, &files, 8192);
        let line = Batch::store(names[..n].iter().map(|p| (p.clone(), 99_999_999_999_999_999))).to_string();
        assert!(line.len() + 2 <= 8192, "{}", line.len());
        assert!(n > 100);
        assert_eq!(fits(BatchKind::Retrieve, &files[..3], 8192), 3);
    }
}
