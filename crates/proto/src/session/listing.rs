//! Directory listings on the data connection: LIST, NLST, MLSD, MLSR.

use super::{Action, Session, TransferKind};

/// How listings are formatted on the data connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListFormat {
    /// LIST: `ls -l` lines.
    Long,
    /// NLST: names only.
    Names,
    /// MLSD: RFC 3659 fact lines.
    Machine,
    /// MLSR (Globus): MLSD fact lines for a whole tree, each entry named
    /// by its path relative to the listed directory, that directory first
    /// as `Type=cdir` `.`, then breadth first as the Globus server lists.
    MachineRecursive,
}

impl Session {
    pub(super) fn list(&mut self, arg: Option<&str>, format: ListFormat) -> Action {
        let (options, path) = match arg {
            Some(a) => split_list_options(a),
            None => (String::new(), None),
        };
        let show_hidden = options.contains('a') || format == ListFormat::Machine;
        self.transfer(path.unwrap_or("."), TransferKind::List { format, show_hidden }, None)
    }
}

/// Splits `ls`-style options (`-la`) from a LIST/NLST/STAT argument. Clients
/// such as lftp send `LIST -a`; a path that really starts with `-` can still
/// be reached as `./-name`.
pub(super) fn split_list_options(arg: &str) -> (String, Option<&str>) {
    let mut options = String::new();
    let mut rest = arg.trim_start();
    while rest.starts_with('-') {
        let end = rest.find(' ').unwrap_or(rest.len());
        options.push_str(&rest[1..end]);
        rest = rest[end..].trim_start();
    }
    (options, (!rest.is_empty()).then_some(rest))
}
