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
//! `BSTO` entries may carry the file's modification time and mode (FEAT
//! `BATCH RETR,STOR,SYNC,FACTS`; a client sends them only to a server that
//! lists `FACTS`, and a server still parses the plain form):
//!
//! ```text
//! <size>,<mtime>,<mode>:<path>     e.g. 4096,20261126203500.25,644:/t/f
//! ```
//!
//! `<mtime>` as `MFMT` takes it (`YYYYMMDDHHMMSS[.fraction]`, UTC), `<mode>`
//! octal as `SITE CHMOD` takes it. The server sets both on the partial
//! file before its rename, under `SITE CHMOD`'s rules, so the file appears
//! under its name with them, and the client sends no `MFMT`/`SITE CHMOD`
//! for it afterwards (issue 18: two commands, two replies and ~15 syscalls
//! per file).
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
/// The word of FEAT's `BATCH` line for `BSTO` entries with facts.
pub const FACTS_WORD: &str = "FACTS";
/// The FEAT line of a server that also takes facts in `BSTO` entries
/// and streamed download batches (`BRET STREAM`).
pub const FEAT_LINE_FACTS: &str = " BATCH RETR,STOR,SYNC,FACTS,STREAM";
/// The word of FEAT's `BATCH` line, and of `BRET STREAM`, for a download
/// batch sent as one MODE E transfer (docs/batch.md, "The streamed batch").
pub const STREAM_WORD: &str = "STREAM";
/// The word of FEAT's `BATCH` line for streamed upload batches
/// (`BSTO STREAM`, docs/batch.md, "The streamed upload"). A token of its
/// own: the servers of session 14 list `STREAM` and take only `BRET STREAM`.
pub const STREAM_STOR_WORD: &str = "STREAM-STOR";
/// The FEAT line of a server that also takes streamed uploads.
pub const FEAT_LINE_STREAM_STOR: &str = " BATCH RETR,STOR,SYNC,FACTS,STREAM,STREAM-STOR";

/// What an upload entry may carry besides its size: the file's
/// modification time and mode, set by the server before the rename.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFacts {
    /// `YYYYMMDDHHMMSS[.fraction]`, UTC, as `MFMT` takes it.
    pub mtime: String,
    /// Permission bits, octal on the wire (at most 0o7777).
    pub mode: u32,
}

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
    /// `BSTO` only, to a server whose FEAT lists `FACTS`.
    pub facts: Option<EntryFacts>,
}

/// A parsed `BRET`/`BSTO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub kind: BatchKind,
    pub files: Vec<BatchEntry>,
    /// `BSTO SYNC`: one durability pass for the batch, answered by a
    /// final reply after the last file's (see the module's doc).
    pub sync: bool,
    /// `BRET STREAM`: the files, each with its size (`size`), travel back
    /// to back as one MODE E transfer with one `125` and one final reply
    /// (docs/batch.md, "The streamed batch").
    pub stream: bool,
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
            files: paths.into_iter().map(|path| BatchEntry { path, size: None, facts: None }).collect(),
            sync: false,
            stream: false,
        }
    }

    /// Uploads of `(path, size)`.
    pub fn store(files: impl IntoIterator<Item = (String, u64)>) -> Batch {
        Batch {
            kind: BatchKind::Store,
            files: files.into_iter().map(|(path, size)| BatchEntry { path, size: Some(size), facts: None }).collect(),
            sync: false,
            stream: false,
        }
    }

    /// Uploads of `(path, size, facts)`: the form for a server whose FEAT
    /// lists `FACTS`.
    pub fn store_with_facts(files: impl IntoIterator<Item = (String, u64, Option<EntryFacts>)>) -> Batch {
        Batch {
            kind: BatchKind::Store,
            files: files.into_iter().map(|(path, size, facts)| BatchEntry { path, size: Some(size), facts }).collect(),
            sync: false,
            stream: false,
        }
    }

    /// Downloads of `(path, size)` as one streamed transfer (`BRET STREAM`).
    pub fn retrieve_stream(files: impl IntoIterator<Item = (String, u64)>) -> Batch {
        Batch {
            kind: BatchKind::Retrieve,
            files: files.into_iter().map(|(path, size)| BatchEntry { path, size: Some(size), facts: None }).collect(),
            sync: false,
            stream: true,
        }
    }

    /// Uploads of `(path, size, facts)` as one streamed transfer
    /// (`BSTO STREAM`), durable per line as `BSTO SYNC`.
    pub fn store_stream(files: impl IntoIterator<Item = (String, u64, Option<EntryFacts>)>) -> Batch {
        Batch {
            kind: BatchKind::Store,
            files: files.into_iter().map(|(path, size, facts)| BatchEntry { path, size: Some(size), facts }).collect(),
            sync: true,
            stream: true,
        }
    }

    /// The offset of each file in a streamed batch's data, and the total:
    /// file `k` starts at the sum of the earlier sizes. `None` when the
    /// sizes overflow (refused at parse).
    pub fn stream_offsets(&self) -> Option<(Vec<u64>, u64)> {
        let mut at = 0u64;
        let mut out = Vec::with_capacity(self.files.len());
        for f in &self.files {
            out.push(at);
            at = at.checked_add(f.size.unwrap_or(0))?;
        }
        Some((out, at))
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
        if self.stream && self.kind == BatchKind::Store {
            // One transfer of the line's total, then the batch's final
            // reply after its durability pass (docs/batch.md, "The
            // streamed upload").
            let total = self.stream_offsets().map_or(0, |(_, t)| t);
            let Some(first) = self.files.first() else { return Vec::new() };
            return vec![
                Command::Allo(Allo { size: total, record: None }),
                Command::Stor(first.path.clone()),
                Command::BatchEnd { files: self.files.len() },
            ];
        }
        if self.stream {
            // One transfer: one 125 and one final reply, matched as the
            // first file's RETR.
            return self.files.first().map(|f| Command::Retr(f.path.clone())).into_iter().collect();
        }
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
        let stream = !sync && words.next_if(|w| w.eq_ignore_ascii_case(STREAM_WORD)).is_some();
        // A streamed upload is durable per line, as `BSTO SYNC`.
        let sync = sync || (stream && kind == BatchKind::Store);
        // A streamed download's entries carry sizes, as an upload's do.
        let sized = kind == BatchKind::Store || stream;
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
            let (size, facts, path) = match sized {
                false => (None, None, w),
                true => {
                    let (head, p) = w.split_once(':').ok_or_else(|| syntax(verb, "expected <size>:<path>"))?;
                    let (s, facts) = match head.split_once(',') {
                        None => (head, None),
                        Some(_) if stream && kind == BatchKind::Retrieve => {
                            return Err(syntax(verb, "a streamed download entry is <size>:<path>"))
                        }
                        Some((s, f)) => (s, Some(parse_facts(verb, f)?)),
                    };
                    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(syntax(verb, "expected a decimal size before ':'"));
                    }
                    (Some(s.parse::<u64>().map_err(|_| syntax(verb, "size out of range"))?), facts, p)
                }
            };
            let path = decode_path(verb, path)?;
            files.push(BatchEntry { path, size, facts });
        }
        if files.len() != count {
            return Err(syntax(verb, format!("{} entries, but the count says {count}", files.len())));
        }
        let batch = Batch { kind, files, sync, stream };
        if stream && batch.stream_offsets().is_none() {
            return Err(syntax(verb, "the sizes of a streamed batch add up to more than 2^64 - 1"));
        }
        Ok(batch)
    }
}

/// `<mtime>,<mode>` of an entry with facts.
fn parse_facts(verb: &'static str, f: &str) -> Result<EntryFacts, CommandError> {
    let (mtime, mode) = f.split_once(',').ok_or_else(|| syntax(verb, "expected <size>,<mtime>,<mode>:<path>"))?;
    let (secs, frac) = match mtime.split_once('.') {
        Some((s, f)) => (s, Some(f)),
        None => (mtime, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if secs.len() != 14 || !digits(secs) || frac.is_some_and(|f| f.is_empty() || f.len() > 9 || !digits(f)) {
        return Err(syntax(verb, "expected a modification time YYYYMMDDHHMMSS[.fraction]"));
    }
    // MFMT's own reading of the time (a date that does not exist is refused).
    if crate::facts::parse_time_val(secs).is_none() {
        return Err(syntax(verb, "modification time out of range"));
    }
    if mode.is_empty() || mode.len() > 4 || !mode.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return Err(syntax(verb, "expected an octal mode of at most 4 digits"));
    }
    let mode = u32::from_str_radix(mode, 8).map_err(|_| syntax(verb, "bad mode"))?;
    Ok(EntryFacts { mtime: mtime.to_string(), mode })
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
        if self.sync && !self.stream {
            write!(f, " {SYNC_WORD}")?;
        }
        if self.stream {
            write!(f, " {STREAM_WORD}")?;
        }
        write!(f, " {}", self.files.len())?;
        for e in &self.files {
            match e.size {
                Some(s) if self.kind == BatchKind::Store || self.stream => match &e.facts {
                    Some(x) => write!(f, " {s},{},{:o}:{}", x.mtime, x.mode, encode_path(&e.path))?,
                    None => write!(f, " {s}:{}", encode_path(&e.path))?,
                },
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
    fits_entries(kind, files, max_line, 0)
}

/// [`fits`] for `BRET STREAM` entries (`<size>:<path>`).
pub fn fits_stream(files: &[(&str, u64)], max_line: usize) -> usize {
    fits_entries(BatchKind::Store, files, max_line, 0)
}

/// [`fits`] for `BSTO` entries with facts (each at most
/// [`FACTS_LEN`] bytes longer).
pub fn fits_with_facts(files: &[(&str, u64)], max_line: usize) -> usize {
    fits_entries(BatchKind::Store, files, max_line, FACTS_LEN)
}

/// The longest `,<mtime>,<mode>` of an entry: a 14-digit time, a point
/// and 9 fraction digits, 4 octal digits, two commas.
pub const FACTS_LEN: usize = 2 + 14 + 1 + 9 + 4;

fn fits_entries(kind: BatchKind, files: &[(&str, u64)], max_line: usize, extra: usize) -> usize {
    let mut len = "BRET STREAM 512".len() + 2;
    let mut n = 0;
    for (p, size) in files.iter().take(MAX_BATCH_FILES) {
        let entry = 1 + encode_path(p).len() + if kind == BatchKind::Store { 21 + extra } else { 0 };
        if n > 0 && len + entry > max_line {
            break;
        }
        len += entry;
        n += 1;
        let _ = size;
    }
    n.max(1).min(files.len().max(1))
}

/// Where each file of a streamed line lies in the line's one byte stream:
/// file `k` at the sum of the earlier sizes (docs/batch.md, "The streamed
/// batch"). Both ends of both directions map MODE E offsets to files
/// through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamLayout {
    /// `starts[k]` where file `k` starts, `starts[k + 1]` where it ends.
    starts: Vec<u64>,
}

impl Default for StreamLayout {
    fn default() -> Self {
        Self { starts: vec![0] }
    }
}

impl StreamLayout {
    /// Appends a file of `size` bytes. `false` when the line's total
    /// would pass `u64::MAX` (the file is then laid out saturated: the
    /// caller refuses the line).
    pub fn push(&mut self, size: u64) -> bool {
        let end = self.total().checked_add(size);
        self.starts.push(end.unwrap_or(u64::MAX));
        end.is_some()
    }

    /// How many files.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The line's bytes.
    pub fn total(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// Where file `k` starts in the stream.
    pub fn start(&self, k: usize) -> u64 {
        self.starts[k]
    }

    /// File `k`'s size.
    pub fn size(&self, k: usize) -> u64 {
        self.starts[k + 1] - self.starts[k]
    }

    /// The file holding stream byte `offset`, the offset in it and its
    /// bytes from there; `None` at or past the end. Empty files hold no
    /// byte and are never returned.
    pub fn locate(&self, offset: u64) -> Option<(usize, u64, u64)> {
        let k = self.starts[1..].partition_point(|&end| end <= offset);
        (k < self.len()).then(|| (k, offset - self.starts[k], self.starts[k + 1] - offset))
    }
}

/// A line's layout from its files' sizes, in order; a total past
/// `u64::MAX` saturates (a server refuses such a line: [`StreamLayout::push`]).
impl FromIterator<u64> for StreamLayout {
    fn from_iter<I: IntoIterator<Item = u64>>(sizes: I) -> Self {
        let mut layout = Self::default();
        for size in sizes {
            layout.push(size);
        }
        layout
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;

    #[test]
    fn a_stream_layout_maps_offsets_to_files_past_empty_ones() {
        let mut l = StreamLayout::default();
        for size in [4, 0, 3, 0] {
            assert!(l.push(size));
        }
        assert_eq!((l.len(), l.total(), l.start(2), l.size(1)), (4, 7, 4, 0));
        assert_eq!(l.locate(0), Some((0, 0, 4)));
        assert_eq!(l.locate(3), Some((0, 3, 1)));
        assert_eq!(l.locate(4), Some((2, 0, 3)), "the empty file 1 holds no byte");
        assert_eq!(l.locate(7), None);
        assert!(!l.push(u64::MAX), "a total past u64::MAX is refused");
        let c: StreamLayout = [4, 0, 3, 0].into_iter().collect();
        assert_eq!((c.len(), c.total(), c.locate(4)), (4, 7, Some((2, 0, 3))));
    }

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
    fn entries_with_facts_round_trip_beside_plain_ones() {
        let facts = |mtime: &str, mode| Some(EntryFacts { mtime: mtime.into(), mode });
        let s = Batch::store_with_facts([
            ("/t/a b".to_string(), 4096, facts("20261126203500", 0o644)),
            ("/t/x".into(), 0, None),
            ("/t/y".into(), 7, facts("19700101000000.123456789", 0o7755)),
        ])
        .durable_at_end();
        let line = s.to_string();
        assert_eq!(line, "BSTO SYNC 3 4096,20261126203500,644:/t/a%20b 0:/t/x 7,19700101000000.123456789,7755:/t/y");
        assert_eq!(p(&line), Ok(Command::Batch(s.clone())));
        assert_eq!(s.expand().len(), 7, "facts add no command");
        // An entry of the old form still parses, with no facts.
        match p("BSTO 1 5:/a") {
            Ok(Command::Batch(b)) => assert_eq!(b.files[0].facts, None),
            other => panic!("{other:?}"),
        }
        // A path with ',' or ':' after the first ':' is the path's.
        match p("BSTO 1 5,20260101000000,600:/a,b:c") {
            Ok(Command::Batch(b)) => {
                assert_eq!(
                    (b.files[0].path.as_str(), b.files[0].facts.clone()),
                    ("/a,b:c", facts("20260101000000", 0o600))
                )
            }
            other => panic!("{other:?}"),
        }
        let names: Vec<String> = (0..2000).map(|i| format!("/tree/f{i:05}.dat")).collect();
        let files: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 4096)).collect();
        let n = fits_with_facts(&files, 8192);
        let longest = facts("20261126203500.123456789", 0o7777);
        let line =
            Batch::store_with_facts(names[..n].iter().map(|p| (p.clone(), 99_999_999_999_999_999, longest.clone())))
                .durable_at_end()
                .to_string();
        assert!(line.len() + 2 <= 8192, "{}", line.len());
        assert!(n > 100 && n < fits(BatchKind::Store, &files, 8192));
    }

    #[test]
    fn malformed_facts_are_refused_with_501() {
        for line in [
            "BSTO 1 5,:/a",
            "BSTO 1 5,20260101000000:/a",
            "BSTO 1 5,20260101000000,:/a",
            "BSTO 1 5,,644:/a",
            "BSTO 1 5,2026010100000,644:/a",
            "BSTO 1 5,202601010000000,644:/a",
            "BSTO 1 5,2026010100000x,644:/a",
            "BSTO 1 5,20261301000000,644:/a",
            "BSTO 1 5,20260100000000,644:/a",
            "BSTO 1 5,20260101240000,644:/a",
            "BSTO 1 5,20260231000000,644:/a",
            "BSTO 1 5,20260101000000.,644:/a",
            "BSTO 1 5,20260101000000.1234567890,644:/a",
            "BSTO 1 5,20260101000000,648:/a",
            "BSTO 1 5,20260101000000,17777:/a",
            "BSTO 1 5,20260101000000,-644:/a",
            "BSTO 1 5,20260101000000,644,1:/a",
            "BSTO 1 ,20260101000000,644:/a",
        ] {
            let e = p(line).expect_err(line);
            assert_eq!(e.code().get(), 501, "{line}: {e}");
        }
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

    #[test]
    fn a_streamed_download_line_round_trips_and_is_one_retr() {
        let b = Batch::retrieve_stream([("/t/a b".to_string(), 4096), ("/t/e".into(), 0), ("/t/c".into(), 7)]);
        let line = b.to_string();
        assert_eq!(line, "BRET STREAM 3 4096:/t/a%20b 0:/t/e 7:/t/c");
        assert_eq!(p(&line), Ok(Command::Batch(b.clone())));
        assert_eq!(p("bret stream 1 5:/x").map(|c| matches!(c, Command::Batch(b) if b.stream)), Ok(true));
        // One transfer: one 125 and one final reply, matched as a RETR.
        assert_eq!(b.expand(), vec![Command::Retr("/t/a b".into())]);
        assert_eq!(b.stream_offsets(), Some((vec![0, 4096, 4096], 4103)));
        // A plain BRET is not a stream and carries no sizes.
        let plain = p("BRET 1 5:/x").unwrap();
        assert!(matches!(plain, Command::Batch(b) if !b.stream && b.files[0].path == "5:/x"));
    }

    #[test]
    fn hostile_streamed_lines_are_refused() {
        let max = u64::MAX;
        for line in [
            "BRET STREAM".to_string(),
            "BRET STREAM 0".into(),
            "BRET STREAM 1 /a".into(),
            "BRET STREAM 1 :/a".into(),
            "BRET STREAM 1 -1:/a".into(),
            "BRET STREAM 1 5:".into(),
            "BRET STREAM 2 5:/a".into(),
            "BRET STREAM 1 5:/a 5:/b".into(),
            "BRET STREAM 513 5:/a".into(),
            "BRET STREAM 1 99999999999999999999999:/a".into(),
            "BRET STREAM 1 4096,20261126203500,644:/a".into(),
            "BRET STREAM STREAM 1 5:/a".into(),
            "BSTO SYNC STREAM 1 5:/a".into(),
            "BSTO STREAM STREAM 1 5:/a".into(),
            format!("BSTO STREAM 2 {max}:/a 1:/b"),
            // Each size fits, their sum does not.
            format!("BRET STREAM 2 {max}:/a 1:/b"),
        ] {
            let e = p(&line).expect_err(&line);
            assert_eq!(e.code().get(), 501, "{line}: {e}");
        }
        assert!(p(&format!("BRET STREAM 2 {}:/a 1:/b", max - 1)).is_ok(), "a sum of exactly 2^64 - 1 is fine");
    }

    #[test]
    fn a_streamed_upload_line_round_trips_and_is_one_stor_with_a_final_reply() {
        let facts = Some(EntryFacts { mtime: "20261126203500".into(), mode: 0o644 });
        let b = Batch::store_stream([
            ("/t/a b".to_string(), 4096, facts),
            ("/t/e".into(), 0, None),
            ("/t/c".into(), 7, None),
        ]);
        let line = b.to_string();
        assert_eq!(line, "BSTO STREAM 3 4096,20261126203500,644:/t/a%20b 0:/t/e 7:/t/c");
        assert_eq!(p(&line), Ok(Command::Batch(b.clone())));
        assert!(b.sync && b.stream);
        assert_eq!(
            b.expand(),
            vec![
                Command::Allo(Allo { size: 4103, record: None }),
                Command::Stor("/t/a b".into()),
                Command::BatchEnd { files: 3 }
            ]
        );
        assert_eq!(p("bsto stream 1 5:/x").map(|c| matches!(c, Command::Batch(b) if b.stream && b.sync)), Ok(true));
        for line in
            ["BSTO STREAM", "BSTO STREAM 0", "BSTO STREAM 1 /a", "BSTO STREAM 2 5:/a", "BSTO STREAM 1 5,1,644:/a"]
        {
            let e = p(line).expect_err(line);
            assert_eq!(e.code().get(), 501, "{line}: {e}");
        }
    }

    #[test]
    fn a_streamed_line_fits_in_a_line() {
        let names: Vec<String> = (0..2000).map(|i| format!("/tree/f{i:05}.dat")).collect();
        let files: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 4096)).collect();
        let n = fits_stream(&files, 8192);
        let line = Batch::retrieve_stream(names[..n].iter().map(|p| (p.clone(), 99_999_999_999_999_999))).to_string();
        assert!(line.len() + 2 <= 8192, "{}", line.len());
        assert!(n > 100);
    }
}
