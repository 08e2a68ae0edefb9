//! `MLSR`: the MLSD listing of a whole tree in one transfer, as the Globus
//! server offers it (advertised as `MLSR` in its FEAT; the Globus client
//! library sends it from `globus_ftp_client_recursive_list`).
//!
//! The wire form follows the Globus server's: MLSx fact lines (RFC 3659
//! §7.2), the listed directory first as `Type=cdir` named `.`, then its
//! entries, then each subdirectory's entries, breadth first, every entry
//! named by its path relative to the listed directory (`sub/deeper/c`).
//! A file argument lists that one file. The lines carry the facts the
//! session's `OPTS MLST` selected (RFC 3659 §7.9), as MLSD's and MLST's
//! do and as the Globus server's MLSR does (`OPTS MLST bogus;` leaves
//! ` name` alone; without `Type` there is no `cdir` either).
//!
//! The listing is produced while it is sent, one directory at a time, so
//! memory holds one directory and the queue of directories still to list,
//! never the whole tree. Two limits bound a request: entries in all
//! (`mlsr_max_entries`) and depth (`mlsr_max_depth`). Reaching either ends
//! the transfer with an error reply after the lines sent so far, so no
//! client mistakes a cut listing for a complete one; the client lists
//! subtrees separately. Like the Globus server (which continues past
//! errors by default), a subdirectory that cannot be listed — gone or
//! unreadable — appears as an entry without its contents.
//!
//! Confinement is the root's: symbolic links that lead out of it are
//! listed as links and never entered; a link to a directory inside it is
//! entered like the directory, but no directory is listed twice (by device
//! and inode), so link cycles end.

use ferry_io::root::Root;
use ferry_io::stream::{Chunks, CopyError};
use ferry_proto::facts::{FactSet, FileFacts, FileKind};
use ferry_proto::session::FsError;
use ferry_proto::VirtualPath;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// The bounds of one MLSR.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_entries: u64,
    pub max_depth: u32,
}

/// A directory waiting to be listed: where it is, its name relative to
/// the listed directory, and how deep it lies.
struct Pending {
    path: VirtualPath,
    rel: String,
    depth: u32,
}

struct Walk {
    root: Arc<Root>,
    writable: bool,
    facts: FactSet,
    limits: Limits,
    /// The listed directory, read before the transfer started.
    first: Option<(Pending, Vec<FileFacts>)>,
    queue: VecDeque<Pending>,
    seen: HashSet<(u64, u64)>,
    entries: u64,
    failed: bool,
}

/// Starts the listing of `path`. Fails before anything is sent when the
/// path does not exist or its directory cannot be read (`550`, as MLSD);
/// the top directory is read here, the rest while sending.
pub(crate) fn listing(
    root: Arc<Root>,
    path: &VirtualPath,
    writable: bool,
    facts: FactSet,
    limits: Limits,
) -> Result<Chunks, FsError> {
    let top = root.facts(path)?;
    if top.kind != FileKind::Dir {
        let name = path.file_name().unwrap_or(".");
        let line = line(&top.mlsx_line_with(writable, name, facts));
        return Ok(Box::new(std::iter::once(Ok(line.into_bytes()))));
    }
    let entries = root.list(path, true)?;
    // `Type` comes first in every line (FactSet::NAMES), so this touches
    // the type fact and nothing else; unselected, there is nothing to mark.
    let first = line(&top.mlsx_line_with(writable, ".", facts).replacen("Type=dir;", "Type=cdir;", 1)).into_bytes();
    let walk = Walk {
        root,
        writable,
        facts,
        limits,
        first: Some((Pending { path: path.clone(), rel: String::new(), depth: 0 }, entries)),
        queue: VecDeque::new(),
        seen: HashSet::from([top.unique]),
        entries: 0,
        failed: false,
    };
    Ok(Box::new(std::iter::once(Ok(first)).chain(walk)))
}

/// One CRLF-terminated line; a CR or LF inside a name would end the line
/// early, so it becomes a space (as in every listing).
fn line(text: &str) -> String {
    let mut s = text.replace(['\r', '\n'], " ");
    s.push_str("\r\n");
    s
}

impl Walk {
    fn limit_reached(&mut self, why: String) -> Option<Result<Vec<u8>, CopyError>> {
        self.failed = true;
        Some(Err(CopyError::Disk(std::io::Error::other(why))))
    }
}

impl Iterator for Walk {
    type Item = Result<Vec<u8>, CopyError>;

    /// The lines of the next directory in the queue.
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            let (dir, entries) = match self.first.take() {
                Some(first) => first,
                None => {
                    let dir = self.queue.pop_front()?;
                    // Gone or unreadable since it was seen: listed as an
                    // entry already, go on with the rest (the Globus default).
                    let Ok(entries) = self.root.list(&dir.path, true) else { continue };
                    (dir, entries)
                }
            };
            let mut out = String::new();
            for e in entries {
                self.entries += 1;
                if self.entries > self.limits.max_entries {
                    return self.limit_reached(format!(
                        "MLSR stopped after {} entries, this server's limit (mlsr_max_entries); list subdirectories \
                         separately",
                        self.limits.max_entries
                    ));
                }
                let rel = if dir.rel.is_empty() { e.name.clone() } else { format!("{}/{}", dir.rel, e.name) };
                out.push_str(&line(&e.mlsx_line_with(self.writable, &rel, self.facts)));
                if e.kind == FileKind::Dir && self.seen.insert(e.unique) {
                    if dir.depth + 1 > self.limits.max_depth {
                        return self.limit_reached(format!(
                            "MLSR stopped at {rel}: deeper than {} levels, this server's limit (mlsr_max_depth); \
                             list it separately",
                            self.limits.max_depth
                        ));
                    }
                    if let Ok(path) = dir.path.join(&e.name) {
                        self.queue.push_back(Pending { path, rel, depth: dir.depth + 1 });
                    }
                }
            }
            if !out.is_empty() {
                return Some(Ok(out.into_bytes()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vp(s: &str) -> VirtualPath {
        VirtualPath::root().resolve(s).unwrap()
    }

    fn names(root: &Arc<Root>, p: &str, limits: Limits) -> (Vec<String>, Option<String>) {
        let mut out = Vec::new();
        let mut err = None;
        for chunk in listing(root.clone(), &vp(p), false, FactSet::ALL, limits).unwrap() {
            match chunk {
                Ok(bytes) => {
                    let text = String::from_utf8(bytes).unwrap();
                    for l in text.split_terminator("\r\n") {
                        let (facts, name) = l.split_once("; ").unwrap();
                        let ty = facts.split(';').next().unwrap().trim_start_matches("Type=");
                        out.push(format!("{ty} {name}"));
                    }
                }
                Err(e) => err = Some(e.to_string()),
            }
        }
        (out, err)
    }

    const WIDE: Limits = Limits { max_entries: 1000, max_depth: 10 };

    #[test]
    fn breadth_first_relative_names_links_never_followed_out_or_twice() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(outside.path().join("o")).unwrap();
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("tree");
        std::fs::create_dir_all(t.join("sub/deeper")).unwrap();
        std::fs::write(t.join("a"), b"a").unwrap();
        std::fs::write(t.join("sub/b"), b"b").unwrap();
        std::fs::write(t.join("sub/deeper/c"), b"c").unwrap();
        std::os::unix::fs::symlink(outside.path(), t.join("out")).unwrap();
        // Relative to the directory being listed, `..` leads out: a link.
        std::os::unix::fs::symlink("..", t.join("sub/up")).unwrap();
        // A second name for a directory: entered once, under the first name.
        std::os::unix::fs::symlink("deeper", t.join("sub/again")).unwrap();
        let root = Arc::new(Root::open(d.path()).unwrap());
        let (got, err) = names(&root, "/tree", WIDE);
        assert_eq!(err, None);
        assert_eq!(
            got,
            [
                "cdir .",
                "file a",
                "OS.unix=symlink out",
                "dir sub",
                "dir sub/again",
                "file sub/b",
                "dir sub/deeper",
                "OS.unix=symlink sub/up",
                "file sub/again/c"
            ]
        );
        // A file lists itself; a missing path fails before any data.
        assert_eq!(names(&root, "/tree/sub/b", WIDE).0, ["file b"]);
        assert!(matches!(listing(root.clone(), &vp("/nope"), false, FactSet::ALL, WIDE), Err(FsError::NotFound)));
    }

    #[test]
    fn limits_end_the_listing_with_an_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b/c/d")).unwrap();
        for i in 0..5 {
            std::fs::write(d.path().join(format!("f{i}")), b"").unwrap();
        }
        let root = Arc::new(Root::open(d.path()).unwrap());
        let (got, err) = names(&root, "/", Limits { max_entries: 4, max_depth: 10 });
        assert_eq!(got, ["cdir ."], "the first directory's lines are not sent past the limit");
        assert!(err.unwrap().contains("stopped after 4 entries"));
        let (got, err) = names(&root, "/", Limits { max_entries: 100, max_depth: 2 });
        assert_eq!(got.last().unwrap(), "dir a/b", "{got:?}");
        assert!(err.unwrap().contains("a/b/c: deeper than 2 levels"));
    }

    /// All the listing's text, with the facts `sel` names.
    fn text(root: &Arc<Root>, p: &str, sel: FactSet) -> String {
        listing(root.clone(), &vp(p), false, sel, WIDE)
            .unwrap()
            .map(|c| String::from_utf8(c.unwrap()).unwrap())
            .collect()
    }

    #[test]
    fn lines_carry_only_the_selected_facts_as_globus() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/g"), b"xy").unwrap();
        let root = Arc::new(Root::open(d.path()).unwrap());
        let dir_size = std::fs::metadata(d.path()).unwrap().len();
        let sub_size = std::fs::metadata(d.path().join("sub")).unwrap().len();
        assert_eq!(
            text(&root, "/", FactSet::select(&["size", "TYPE"])),
            format!("Type=cdir;Size={dir_size}; .\r\nType=dir;Size={sub_size}; sub\r\nType=file;Size=2; sub/g\r\n")
        );
        // No fact selected: names alone, and no `cdir` without a type.
        assert_eq!(text(&root, "/", FactSet::select(&["bogus"])), " .\r\n sub\r\n sub/g\r\n");
        assert_eq!(text(&root, "/sub/g", FactSet::select(&["size"])), "Size=2; g\r\n");
        let all = text(&root, "/", FactSet::ALL);
        assert!(all.starts_with("Type=cdir;Size=") && all.contains(";Perm=el;UNIX.mode=0"), "{all}");
    }
}
