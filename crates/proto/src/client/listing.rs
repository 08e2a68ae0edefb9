//! Directory listings as a client reads them: MLSx fact lines (RFC 3659
//! §7) from MLSD, MLST and MLSR, and Unix `ls -l` lines from LIST, for
//! servers without MLSD (vsftpd, old FTP servers).

use crate::facts::{parse_time_val, FileFacts, FileKind};
use crate::reply::Reply;

/// Bytes of a listing a client accepts: a hostile server cannot exhaust
/// memory with an endless one.
pub const MAX_LISTING: u64 = 256 << 20;

/// Facts known only by name, kind and size (the rest unknown: a
/// destination gets its defaults).
pub fn minimal_facts(name: &str, kind: FileKind, size: u64) -> FileFacts {
    FileFacts {
        name: name.rsplit('/').next().unwrap_or(name).to_string(),
        kind,
        size,
        modified: 0,
        mode: 0,
        uid: 0,
        gid: 0,
        nlink: 1,
        unique: (0, 0),
    }
}

/// Parses one MLSx line (`fact=value;...; name`). Unknown facts are
/// ignored; `cdir`/`pdir` entries (the directory itself, its parent) are
/// not entries and give `None`.
pub fn parse_mlsx(line: &str) -> Option<FileFacts> {
    let (fact_str, name) = line.split_once(' ')?;
    let mut f = minimal_facts(name, FileKind::Other, 0);
    f.name = name.to_string();
    for fact in fact_str.split(';').filter(|s| !s.is_empty()) {
        let (k, v) = fact.split_once('=')?;
        match k.to_ascii_lowercase().as_str() {
            "type" => {
                f.kind = match v.to_ascii_lowercase().as_str() {
                    "file" => FileKind::File,
                    "dir" => FileKind::Dir,
                    "cdir" | "pdir" => return None,
                    t if t.contains("slink") || t.contains("symlink") => FileKind::Symlink,
                    _ => FileKind::Other,
                }
            }
            "size" => f.size = v.parse().unwrap_or(0),
            "modify" => f.modified = parse_time_val(v).unwrap_or(0),
            "unix.mode" => f.mode = u32::from_str_radix(v, 8).unwrap_or(0),
            // RFC 3659 §7.5.2: an opaque identity; Ferry and Globus write
            // device-inode in hex. Tree copies use it to notice loops.
            "unique" => {
                f.unique =
                    match v.split_once('-').map(|(a, b)| (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16))) {
                        Some((Ok(a), Ok(b))) => (a, b),
                        _ => (xxhash_rust::xxh3::xxh3_64(v.as_bytes()), 1),
                    }
            }
            _ => {}
        }
    }
    Some(f)
}

/// Parses a Unix `ls -l` LIST line.
pub fn parse_list_line(line: &str) -> Option<FileFacts> {
    let mut it = line.split_whitespace();
    let perms = it.next()?;
    let kind = match perms.chars().next()? {
        'd' => FileKind::Dir,
        '-' => FileKind::File,
        'l' => FileKind::Symlink,
        _ => return None,
    };
    let _links = it.next()?;
    let _owner = it.next()?;
    let _group = it.next()?;
    let size: u64 = it.next()?.parse().ok()?;
    // Month, day, time-or-year, then the name (which may contain spaces).
    let mut rest = line;
    for _ in 0..8 {
        rest = rest.trim_start();
        rest = &rest[rest.find(char::is_whitespace)?..];
    }
    let mut name = rest.trim_start().to_string();
    if kind == FileKind::Symlink {
        if let Some(i) = name.find(" -> ") {
            name.truncate(i);
        }
    }
    if name == "." || name == ".." {
        return None;
    }
    let mut f = minimal_facts(&name, kind, size);
    f.name = name;
    f.mode = list_mode(perms);
    Some(f)
}

/// The permission bits of an `ls -l` mode string (`-rw-r-----`).
fn list_mode(perms: &str) -> u32 {
    let b = perms.as_bytes();
    if b.len() < 10 {
        return 0;
    }
    (1..10).fold(0, |m, i| (m << 1) | u32::from(!matches!(b[i], b'-' | b'S' | b'T')))
}

/// The entries of a listing read from a data connection: MLSD lines when
/// `machine`, LIST lines otherwise. Names are octets; those that are not
/// UTF-8 are kept (`octets`). `.`, `..` and names with a `/` (which
/// would lead out of the listed directory) are dropped; sorted by name.
pub fn parse_listing(bytes: &[u8], machine: bool) -> Vec<FileFacts> {
    let text = crate::octets::decode(bytes);
    let mut out: Vec<FileFacts> = text
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.is_empty())
        .filter_map(|l| if machine { parse_mlsx(l) } else { parse_list_line(l) })
        .filter(|f| f.name != "." && f.name != ".." && !f.name.contains('/'))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The facts in a `250` MLST reply (RFC 3659 §7.2: one fact line between
/// the first and the last, with a leading space); `None` otherwise.
pub fn mlst_facts(reply: &Reply) -> Option<FileFacts> {
    if reply.code.get() != 250 {
        return None;
    }
    reply.lines.iter().skip(1).find_map(|l| parse_mlsx(l.trim_start()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_listing_lines() {
        let f = parse_mlsx("Type=file;Size=12;Modify=20261121011836;UNIX.mode=0600; a b.txt").unwrap();
        assert_eq!((f.name.as_str(), f.kind, f.size, f.mode), ("a b.txt", FileKind::File, 12, 0o600));
        assert!(parse_mlsx("Type=cdir;Modify=20261121011836; .").is_none());
        let f = parse_list_line("drwxr-xr-x    2 1000     1000         4096 Nov 21 02:11 my dir").unwrap();
        assert_eq!((f.name.as_str(), f.kind), ("my dir", FileKind::Dir));
        let f = parse_list_line("-rw-r--r--    1 0 0 3000000 Jan  3  2024 big.bin").unwrap();
        assert_eq!((f.name.as_str(), f.size, f.mode), ("big.bin", 3000000, 0o644));
        assert!(parse_list_line("total 12").is_none());
        let f = parse_list_line("lrwxrwxrwx 1 0 0 4 Jan  3  2024 l -> target").unwrap();
        assert_eq!((f.name.as_str(), f.kind), ("l", FileKind::Symlink));
    }

    #[test]
    fn listings_drop_what_is_not_an_entry() {
        let mlsd = b"Type=cdir; .\r\nType=pdir; ..\r\nType=file;Size=1; b\r\nType=dir; a\r\nType=file; x/y\r\n\r\n";
        let names: Vec<String> = parse_listing(mlsd, true).into_iter().map(|f| f.name).collect();
        assert_eq!(names, ["a", "b"]);
        let list = b"total 1\n-rw-r--r-- 1 0 0 5 Jan  3  2024 z\ndrwxr-xr-x 2 0 0 4096 Jan  3  2024 .\n";
        let names: Vec<String> = parse_listing(list, false).into_iter().map(|f| f.name).collect();
        assert_eq!(names, ["z"]);
    }
}
