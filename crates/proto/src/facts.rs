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
        let ty = match self.kind {
            FileKind::File => "file",
            FileKind::Dir => "dir",
            FileKind::Symlink => "OS.unix=symlink",
            FileKind::Other => "OS.unix=special",
        };
        format!(
            "Type={ty};Size={};Modify={};Perm={};UNIX.mode=0{:o};UNIX.uid={};UNIX.gid={};Unique={:x}-{:x}; {name}",
            self.size,
            format_time_val(self.modified),
            self.perm(writable),
            self.mode & 0o7777,
            self.uid,
            self.gid,
            self.unique.0,
            self.unique.1,
        )
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
    fn list_line_recent_and_old() {
        let f = facts();
        assert_eq!(
            f.list_line(1_795_223_916 + 3600),
            "-rw-r--r--   1 999      995           5000000 Nov 21 01:18 data 1.bin"
        );
        assert!(f.list_line(1_795_223_916 + 400 * 86400).contains("Nov 21  2026 data 1.bin"));
    }
}
