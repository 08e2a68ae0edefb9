//! File metadata as the protocol presents it: MLSx fact lines (RFC 3659 §7),
//! `ls -l`-style LIST lines, and MDTM times (RFC 3659 §2.3).
//!
//! The I/O layer fills [`FileFacts`] from the file system; everything here is
//! a pure function of those facts, the user's access and a clock reading.

use time::{format_description::FormatItem, macros::format_description, OffsetDateTime};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFacts {
    pub name: String,
    pub kind: FileKind,
    pub size: u64,
    /// Seconds since the Unix epoch.
    pub modified: i64,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u64,
    /// (device, inode): the RFC 3659 `Unique` fact.
    pub unique: (u64, u64),
}

/// The MLSx facts a session sends: all by default, those `OPTS MLST`
/// selected after it (RFC 3659 §7.9). Per session, like the Globus server;
/// names match case-insensitively and unknown ones are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactSet(u8);

impl FactSet {
    /// Every fact Ferry can send, in the order it writes them.
    pub const NAMES: [&'static str; 8] =
        ["Type", "Size", "Modify", "Perm", "UNIX.mode", "UNIX.uid", "UNIX.gid", "Unique"];
    pub const ALL: FactSet = FactSet(0xff);
    pub const NONE: FactSet = FactSet(0);

    /// The facts named in an `OPTS MLST` argument (`type;size;` already
    /// split); unknown names are ignored, so `OPTS MLST bogus;` selects none.
    pub fn select<S: AsRef<str>>(names: &[S]) -> FactSet {
        let mut bits = 0u8;
        for n in names {
            if let Some(i) = Self::NAMES.iter().position(|f| f.eq_ignore_ascii_case(n.as_ref().trim())) {
                bits |= 1 << i;
            }
        }
        FactSet(bits)
    }

    fn has(self, i: usize) -> bool {
        self.0 & (1 << i) != 0
    }

    /// The FEAT line's list: every fact, the selected ones marked `*`.
    pub fn feat_list(self) -> String {
        Self::NAMES.iter().enumerate().map(|(i, f)| format!("{f}{};", if self.has(i) { "*" } else { "" })).collect()
    }

    /// The selected facts, as the `200 MLST OPTS` reply names them.
    pub fn on_list(self) -> String {
        Self::NAMES.iter().enumerate().filter(|(i, _)| self.has(*i)).map(|(_, f)| format!("{f};")).collect()
    }
}

impl Default for FactSet {
    fn default() -> Self {
        Self::ALL
    }
}

const MDTM_FORMAT: &[FormatItem<'static>] = format_description!("[year][month][day][hour][minute][second]");

/// `YYYYMMDDHHMMSS` in UTC (RFC 3659 §2.3 `time-val`).
pub fn format_time_val(unix_secs: i64) -> String {
    OffsetDateTime::from_unix_timestamp(unix_secs)
        .ok()
        .and_then(|t| t.format(MDTM_FORMAT).ok())
        .unwrap_or_else(|| "19700101000000".to_string())
}

/// Parses `YYYYMMDDHHMMSS[.sss]` as UTC.
pub fn parse_time_val(s: &str) -> Option<i64> {
    let s = s.split('.').next()?;
    if s.len() != 14 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s[r].parse::<u32>().ok();
    let date =
        time::Date::from_calendar_date(n(0..4)? as i32, time::Month::try_from(n(4..6)? as u8).ok()?, n(6..8)? as u8)
            .ok()?;
    let t = time::Time::from_hms(n(8..10)? as u8, n(10..12)? as u8, n(12..14)? as u8).ok()?;
    Some(time::PrimitiveDateTime::new(date, t).assume_utc().unix_timestamp())
}

impl FileFacts {
    /// The MLSx `Perm` fact (RFC 3659 §7.5.5) for a user with or without
    /// write access. Mode bits are not consulted: the server process's own
    /// access decides, and the I/O layer reports failures precisely.
    fn perm(&self, writable: bool) -> &'static str {
        match (self.kind, writable) {
            (FileKind::Dir, true) => "cdeflmp",
            (FileKind::Dir, false) => "el",
            (_, true) => "adfrw",
            (_, false) => "r",
        }
    }

    /// One MLSx fact line without the leading space or trailing CRLF:
    /// `Type=file;Size=5;Modify=...;Perm=r;UNIX.mode=0644;...; name`.
    pub fn mlsx_line(&self, writable: bool, name: &str) -> String {
        self.mlsx_line_with(writable, name, FactSet::ALL)
    }

    /// The MLSx line with only the facts `OPTS MLST` selected (RFC 3659
    /// §7.9), in Ferry's fixed order; with none, just ` name`, as Globus.
    pub fn mlsx_line_with(&self, writable: bool, name: &str, facts: FactSet) -> String {
        use std::fmt::Write as _;
        let ty = match self.kind {
            FileKind::File => "file",
            FileKind::Dir => "dir",
            FileKind::Symlink => "OS.unix=symlink",
            FileKind::Other => "OS.unix=special",
        };
        let mut out = String::with_capacity(160);
        for (i, fact) in FactSet::NAMES.iter().enumerate() {
            if !facts.has(i) {
                continue;
            }
            let _ = match i {
                0 => write!(out, "{fact}={ty};"),
                1 => write!(out, "{fact}={};", self.size),
                2 => write!(out, "{fact}={};", format_time_val(self.modified)),
                3 => write!(out, "{fact}={};", self.perm(writable)),
                4 => write!(out, "{fact}=0{:o};", self.mode & 0o7777),
                5 => write!(out, "{fact}={};", self.uid),
                6 => write!(out, "{fact}={};", self.gid),
                _ => write!(out, "{fact}={:x}-{:x};", self.unique.0, self.unique.1),
            };
        }
        out.push(' ');
        out.push_str(name);
        out
    }

    /// One `ls -l` style line, as LIST clients (lftp, curl, browsers) parse
    /// it. Times within six months of `now` show the clock, older ones the
    /// year, like ls(1).
    pub fn list_line(&self, now: i64) -> String {
        let kind = match self.kind {
            FileKind::Dir => 'd',
            FileKind::Symlink => 'l',
            FileKind::File => '-',
            FileKind::Other => 'p',
        };
        let mut perms = String::with_capacity(10);
        perms.push(kind);
        for shift in [6u32, 3, 0] {
            let bits = (self.mode >> shift) & 7;
            perms.push(if bits & 4 != 0 { 'r' } else { '-' });
            perms.push(if bits & 2 != 0 { 'w' } else { '-' });
            perms.push(if bits & 1 != 0 { 'x' } else { '-' });
        }
        let when = OffsetDateTime::from_unix_timestamp(self.modified).unwrap_or(OffsetDateTime::UNIX_EPOCH);
        const SIX_MONTHS: i64 = 182 * 24 * 3600;
        let recent = (now - self.modified).abs() < SIX_MONTHS;
        let month = &MONTHS[when.month() as usize - 1];
        let date = if recent {
            format!("{month} {:>2} {:02}:{:02}", when.day(), when.hour(), when.minute())
        } else {
            format!("{month} {:>2}  {}", when.day(), when.year())
        };
        format!("{perms} {:>3} {:<8} {:<8} {:>12} {date} {}", self.nlink, self.uid, self.gid, self.size, self.name)
    }
}

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> FileFacts {
        FileFacts {
            name: "data 1.bin".into(),
            kind: FileKind::File,
            size: 5_000_000,
            modified: 1_795_223_916,
            mode: 0o644,
            uid: 999,
            gid: 995,
            nlink: 1,
            unique: (0x1b, 0x48),
        }
    }

    #[test]
    fn time_val_round_trip() {
        assert_eq!(format_time_val(0), "19700101000000");
        assert_eq!(format_time_val(1_795_223_916), "20261121011836");
        assert_eq!(parse_time_val("20261121011836"), Some(1_795_223_916));
        assert_eq!(parse_time_val("20261121011836.123"), Some(1_795_223_916));
        assert_eq!(parse_time_val("20261321005836"), None);
        assert_eq!(parse_time_val("2026"), None);
    }

    #[test]
    fn mlsx_matches_globus_shape() {
        assert_eq!(
            facts().mlsx_line(false, "data 1.bin"),
            "Type=file;Size=5000000;Modify=20261121011836;Perm=r;UNIX.mode=0644;UNIX.uid=999;UNIX.gid=995;Unique=1b-48; data 1.bin"
        );
    }

    #[test]
    fn mlsx_honours_the_selected_facts() {
        let sel = FactSet::select(&["size", "TYPE", "bogus"]);
        assert_eq!(facts().mlsx_line_with(false, "f", sel), "Type=file;Size=5000000; f");
        assert_eq!(facts().mlsx_line_with(false, "f", FactSet::select(&["bogus"])), " f");
        assert_eq!(facts().mlsx_line_with(true, "f", FactSet::ALL), facts().mlsx_line(true, "f"));
        assert_eq!(sel.on_list(), "Type;Size;");
        assert_eq!(sel.feat_list(), "Type*;Size*;Modify;Perm;UNIX.mode;UNIX.uid;UNIX.gid;Unique;");
        assert_eq!(FactSet::ALL.feat_list(), "Type*;Size*;Modify*;Perm*;UNIX.mode*;UNIX.uid*;UNIX.gid*;Unique*;");
        assert_eq!(FactSet::NONE.on_list(), "");
    }

    #[test]
    fn list_line_recent_and_old() {
        let f = facts();
        assert_eq!(
            f.list_line(1_795_223_916 + 3600),
            "-rw-r--r--   1 999      995           5000000 Nov 21 01:18 data 1.bin"
        );
        assert!(f.list_line(1_795_223_916 + 400 * 86400).contains("Nov 21  2026 data 1.bin"));
    }
}
