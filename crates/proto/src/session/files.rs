//! File-system requests that need no data connection (CWD, MKD, DELE,
//! RNFR/RNTO, SIZE, MDTM, MFMT, CKSM, MLST, STAT, SITE CHMOD...): the
//! session resolves the path and hands the operation to the driver, whose
//! outcome becomes the reply.

use super::{Action, Pending, Session};
use crate::facts::{format_time_val, FileFacts};
use crate::path::{PathError, VirtualPath};
use crate::reply::{Reply, ReplyCode};

/// Why a file-system request failed, in the terms replies need. The
/// `Display` form is the reason alone, without the path, for messages that
/// name the file themselves (a streamed batch's cut, `docs/batch.md`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("permission denied")]
    PermissionDenied,
    #[error("file exists")]
    AlreadyExists,
    #[error("not a directory")]
    NotADirectory,
    #[error("is a directory")]
    IsADirectory,
    #[error("directory not empty")]
    DirectoryNotEmpty,
    /// The path (or a symbolic link on it) leads outside the root.
    #[error("path leads outside the served directory")]
    Escapes,
    /// A name the server will not create (e.g. its own partial-file names).
    #[error("file name not allowed: {0}")]
    InvalidName(String),
    #[error("no space left on the server's disk")]
    NoSpace,
    /// A regular file with more than one hard link, which the server does
    /// not change in place: its other names may lie outside the root
    /// (`docs/security.md`, "Hard links").
    #[error("file has other hard links")]
    HardLinked,
    /// A FIFO, socket or device where a regular file is needed: reading one
    /// could block for ever (`docs/security.md`, "Special files").
    #[error("not a regular file")]
    NotRegularFile,
    /// Another session is uploading to this name (`docs/partial-files.md`).
    #[error("an upload to this name is in progress in another session")]
    UploadInProgress,
    /// The operation would make a file larger than `max_file_size`.
    #[error("beyond the largest file this server stores ({0} bytes)")]
    TooLarge(u64),
    /// ABOR stopped the operation.
    #[error("aborted by ABOR")]
    Aborted,
    /// The request is understood but this server will not do it; the
    /// text says why (e.g. a group SITE CHGRP may not set).
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Other(String),
}

impl FsError {
    pub fn reply(&self, path: &VirtualPath) -> Reply {
        use FsError as E;
        let (code, text) = match self {
            E::NotFound => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: No such file or directory.")),
            E::PermissionDenied => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: Permission denied.")),
            E::AlreadyExists => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: File exists.")),
            E::NotADirectory => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: Not a directory.")),
            E::IsADirectory => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: Is a directory.")),
            E::DirectoryNotEmpty => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: Directory not empty.")),
            E::Escapes => {
                (ReplyCode::FILE_UNAVAILABLE, format!("{path}: Path leads outside the served directory; refused."))
            }
            E::InvalidName(why) => (ReplyCode::NAME_NOT_ALLOWED, format!("{path}: File name not allowed: {why}.")),
            E::NoSpace => (ReplyCode::EXCEEDED_STORAGE, format!("{path}: No space left on the server's disk.")),
            E::HardLinked => (
                ReplyCode::FILE_UNAVAILABLE,
                format!("{path}: File has other hard links; it is not modified in place (replace it with STOR)."),
            ),
            E::NotRegularFile => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: not a regular file; refused.")),
            //= RFC 959 §4.2: 450 "Requested file action not taken. File
            //= unavailable (e.g., file busy)."
            E::UploadInProgress => (
                ReplyCode::FILE_BUSY,
                format!("{path}: an upload to this name is in progress in another session; try again later."),
            ),
            E::TooLarge(max) => (
                ReplyCode::EXCEEDED_STORAGE,
                format!("{path}: beyond the largest file this server stores ({max} bytes)."),
            ),
            E::Aborted => (ReplyCode::TRANSFER_ABORTED, format!("{path}: aborted by ABOR.")),
            E::Refused(why) => (ReplyCode::FILE_UNAVAILABLE, format!("{path}: {why}.")),
            E::Other(msg) => (ReplyCode::LOCAL_ERROR, format!("{path}: {msg}.")),
        };
        Reply::new(code, text)
    }
}

/// File-system work that needs no data connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    ChangeDir(VirtualPath),
    MakeDir(VirtualPath),
    RemoveDir(VirtualPath),
    Delete(VirtualPath),
    /// RNFR: check that the source exists.
    RenameFrom(VirtualPath),
    Rename {
        from: VirtualPath,
        to: VirtualPath,
    },
    /// CKSM: a checksum of `length` bytes from `offset` (to the end if None).
    Checksum {
        path: VirtualPath,
        algorithm: String,
        offset: u64,
        length: Option<u64>,
    },
    Size(VirtualPath),
    ModTime(VirtualPath),
    SetModTime {
        path: VirtualPath,
        unix_secs: i64,
    },
    /// `SITE UTIME`: as [`FileOp::SetModTime`], answered the Globus way.
    Utime {
        path: VirtualPath,
        unix_secs: i64,
    },
    /// `SITE CHGRP`: the driver decides which groups may be set
    /// (`docs/security.md`, "SITE CHGRP").
    Chgrp {
        path: VirtualPath,
        group: String,
    },
    /// MLST: facts of one entry.
    Facts(VirtualPath),
    /// STAT <path>: a LIST-style listing over the control connection.
    StatListing(VirtualPath),
    Chmod {
        path: VirtualPath,
        mode: u32,
    },
    /// SITE PARTIAL: what the server holds of an interrupted upload.
    Partial(VirtualPath),
}

/// What a partial upload holds (`SITE PARTIAL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialFacts {
    /// The size ALLO announced for it, if any.
    pub size: Option<u64>,
    /// Byte ranges that are on the server's disk (end-exclusive).
    pub ranges: crate::RangeSet,
    /// XXH128 of those ranges' bytes, concatenated in order (lowercase hex):
    /// a client compares it with its source before it trusts them.
    pub xxh128: String,
}

/// Successful outcome of a [`FileOp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileDone {
    Done,
    Size(u64),
    ModTime(i64),
    Facts(FileFacts),
    Listing(Vec<FileFacts>),
    /// Lowercase hex (ADLER32 and CRC32C as `%08x`, like Globus).
    Checksum(String),
    Partial(PartialFacts),
}

/// Checksum algorithms CKSM accepts, as FEAT lists them. XXH128 is the
/// fast one for Ferry-to-Ferry verification; the others are what Globus,
/// gfal2 and storage systems use.
pub const CHECKSUM_ALGORITHMS: &[&str] = &["ADLER32", "CRC32C", "MD5", "SHA1", "SHA256", "SHA512", "XXH128"];

impl Session {
    /// Resolves a path argument and hands the operation to the driver.
    pub(super) fn file_op(&mut self, arg: &str, needs_write: bool, make: impl FnOnce(VirtualPath) -> FileOp) -> Action {
        if needs_write && !self.writable() {
            return Self::reply(ReplyCode::FILE_UNAVAILABLE, "Permission denied: this account is read-only.");
        }
        let path = match self.cwd.resolve(arg) {
            Ok(p) => p,
            Err(e) => return path_error_reply(&e),
        };
        let op = make(path);
        self.pending = Pending::File(op.clone());
        Action::File(op)
    }

    /// After [`file_result`](Self::file_result): the reply to an ABOR that
    /// arrived while the operation ran (RFC 959 §4.1.3: `226` once the
    /// aborted command has been answered).
    pub fn file_abort_reply(&mut self) -> Option<Reply> {
        std::mem::take(&mut self.file_abort_requested)
            .then(|| Reply::new(ReplyCode::CLOSING_DATA, "ABOR command successful."))
    }

    /// Whether ABOR asked the running file operation to stop.
    pub fn file_abort_requested(&self) -> bool {
        self.file_abort_requested
    }

    /// The driver's outcome of an [`Action::File`].
    pub fn file_result(&mut self, result: Result<FileDone, FsError>) -> Reply {
        let Pending::File(op) = std::mem::replace(&mut self.pending, Pending::None) else {
            return Reply::new(ReplyCode::BAD_SEQUENCE, "No file operation in progress.");
        };
        let done = match result {
            Ok(done) => done,
            Err(e) => return e.reply(op_path(&op)),
        };
        let ok = |text: String| Reply::new(ReplyCode::FILE_ACTION_OK, text);
        match (op, done) {
            (FileOp::ChangeDir(p), _) => {
                let text = format!("Directory changed to {p}.");
                self.cwd = p;
                ok(text)
            }
            (FileOp::MakeDir(p), _) => Reply::new(ReplyCode::PATH_CREATED, format!("{} created.", quote_path(&p))),
            (FileOp::RemoveDir(p), _) => ok(format!("{p}: directory removed.")),
            (FileOp::Delete(p), _) => ok(format!("{p}: file deleted.")),
            (FileOp::RenameFrom(p), _) => {
                self.rename_from = Some(p);
                Reply::new(ReplyCode::PENDING_FURTHER_INFO, "File exists, ready for destination name.")
            }
            (FileOp::Rename { from, to }, _) => ok(format!("Renamed {from} to {to}.")),
            (FileOp::Size(_), FileDone::Size(n)) => Reply::new(ReplyCode::FILE_STATUS, n.to_string()),
            (FileOp::ModTime(_), FileDone::ModTime(t)) => Reply::new(ReplyCode::FILE_STATUS, format_time_val(t)),
            // The time the file system took, which may differ from the
            // one asked for (a file system without times before 1970).
            (FileOp::SetModTime { path, .. }, FileDone::ModTime(set)) => {
                Reply::new(ReplyCode::FILE_STATUS, format!("Modify={}; {path}", format_time_val(set)))
            }
            (FileOp::Facts(p), FileDone::Facts(f)) => Reply::multiline(
                ReplyCode::FILE_ACTION_OK,
                format!("Listing {p}"),
                [format!(" {}", f.mlsx_line_with(self.writable(), p.as_str(), self.mlst_facts))],
                "End.",
            ),
            (FileOp::StatListing(p), FileDone::Listing(entries)) => {
                // The driver supplies its clock through the facts' times; a
                // listing over the control channel uses the newest as "now".
                let now = entries.iter().map(|e| e.modified).max().unwrap_or(0);
                Reply::multiline(
                    ReplyCode::FILE_STATUS,
                    format!("Status of {p}:"),
                    entries.iter().map(|e| e.list_line(now)),
                    "End of status.",
                )
            }
            (FileOp::Checksum { .. }, FileDone::Checksum(hex)) => Reply::new(ReplyCode::FILE_STATUS, hex),
            (FileOp::Chmod { .. }, _) => Reply::new(ReplyCode::OK, "SITE CHMOD command successful."),
            (FileOp::Partial(p), FileDone::Partial(f)) => {
                let size = f.size.map(|s| format!("Size={s};")).unwrap_or_default();
                Reply::new(ReplyCode::FILE_STATUS, format!("{size}Ranges={};XXH128={}; {p}", f.ranges, f.xxh128))
            }
            // Globus answers its SITE commands with 250.
            (FileOp::Utime { .. }, _) => ok("SITE UTIME command successful.".into()),
            (FileOp::Chgrp { group, .. }, _) => ok(format!("SITE CHGRP command successful: group set to {group}.")),
            (op, other) => {
                Reply::new(ReplyCode::LOCAL_ERROR, format!("Internal error: {op:?} answered with {other:?}."))
            }
        }
    }
}

/// RFC 959 Appendix II: a quote inside a quoted path name is doubled.
pub(super) fn quote_path(p: &VirtualPath) -> String {
    format!("\"{}\"", p.as_str().replace('"', "\"\""))
}

pub(super) fn path_error_reply(e: &PathError) -> Action {
    let code = match e {
        PathError::EscapesRoot => ReplyCode::FILE_UNAVAILABLE,
        PathError::Nul | PathError::Empty => ReplyCode::PARAMETER_SYNTAX_ERROR,
    };
    Action::Reply(Reply::new(code, format!("{}; refused.", capitalize_first(&e.to_string()))))
}

pub(super) fn capitalize_first(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

pub(super) fn op_path(op: &FileOp) -> &VirtualPath {
    match op {
        FileOp::ChangeDir(p)
        | FileOp::MakeDir(p)
        | FileOp::RemoveDir(p)
        | FileOp::Delete(p)
        | FileOp::RenameFrom(p)
        | FileOp::Size(p)
        | FileOp::ModTime(p)
        | FileOp::Facts(p)
        | FileOp::StatListing(p)
        | FileOp::Partial(p) => p,
        FileOp::Rename { to, .. } => to,
        FileOp::SetModTime { path, .. }
        | FileOp::Utime { path, .. }
        | FileOp::Chgrp { path, .. }
        | FileOp::Chmod { path, .. }
        | FileOp::Checksum { path, .. } => path,
    }
}

/// The command behind a file operation, for replies.
pub(super) fn op_verb(op: &FileOp) -> &'static str {
    match op {
        FileOp::ChangeDir(_) => "CWD",
        FileOp::MakeDir(_) => "MKD",
        FileOp::RemoveDir(_) => "RMD",
        FileOp::Delete(_) => "DELE",
        FileOp::RenameFrom(_) => "RNFR",
        FileOp::Rename { .. } => "RNTO",
        FileOp::Checksum { .. } => "CKSM",
        FileOp::Size(_) => "SIZE",
        FileOp::ModTime(_) => "MDTM",
        FileOp::SetModTime { .. } => "MFMT",
        FileOp::Facts(_) => "MLST",
        FileOp::StatListing(_) => "STAT",
        FileOp::Chmod { .. } => "SITE CHMOD",
        FileOp::Utime { .. } => "SITE UTIME",
        FileOp::Chgrp { .. } => "SITE CHGRP",
        FileOp::Partial(_) => "SITE PARTIAL",
    }
}
