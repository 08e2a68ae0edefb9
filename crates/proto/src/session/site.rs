//! SITE commands: the Globus family (buffer sizes, UTIME, CHGRP,
//! SETDISKSTACK, CLIENTINFO) and Ferry's own (PROFILE, PARTIAL).

use super::{help_reply, Action, FileOp, Session};
use crate::command::SiteCommand;
use crate::facts::parse_time_val;
use crate::reply::ReplyCode;

impl Session {
    pub(super) fn on_site(&mut self, site: SiteCommand) -> Action {
        match site {
            SiteCommand::Help => Action::Reply(help_reply(ReplyCode::HELP)),
            SiteCommand::ClientInfo(_) => Self::reply(ReplyCode::FILE_ACTION_OK, "OK."),
            SiteCommand::Chmod { mode, path } => self.file_op(&path, true, |path| FileOp::Chmod { path, mode }),
            // Globus keeps separate send and receive sizes and uses the
            // larger; one size for both directions comes to the same.
            SiteCommand::RetrBufSize(n) | SiteCommand::StorBufSize(n) | SiteCommand::BufSize(n) => {
                match self.set_buffer(n) {
                    Ok(()) => Self::reply(ReplyCode::OK, "Site Command Successful."),
                    Err(r) => Action::Reply(r),
                }
            }
            SiteCommand::Profile(req) => Action::Profile(req),
            SiteCommand::Partial(path) => self.file_op(&path, false, FileOp::Partial),
            SiteCommand::SetDiskStack(stack) => {
                // Globus XIO drivers are named in a comma-separated list,
                // each optionally with ":options". Ferry's disk side is one
                // driver, plain POSIX files: `file` is what it has.
                let drivers: Vec<&str> = stack.split(',').map(|d| d.split(':').next().unwrap_or("").trim()).collect();
                if drivers == ["file"] {
                    Self::reply(ReplyCode::FILE_ACTION_OK, "Disk stack set to file.")
                } else {
                    Self::reply(
                        ReplyCode::PARAMETER_NOT_IMPLEMENTED,
                        format!("SITE SETDISKSTACK {stack}: this server's only disk stack is 'file'."),
                    )
                }
            }
            SiteCommand::SetNetStack(stack) => {
                // Globus answers its SITE commands with 250.
                let chosen = crate::transport::select_net_stack(&self.config.transports, self.transport, &stack);
                match self.set_transport(chosen) {
                    Ok(_) => {
                        // Globus's way of asking has no encryption option.
                        self.set_udt_sealed(false);
                        Self::reply(ReplyCode::FILE_ACTION_OK, format!("Network stack set to {}.", self.transport))
                    }
                    Err(r) => Action::Reply(r),
                }
            }
            SiteCommand::Utime { time, path } => match parse_time_val(&time) {
                Some(unix_secs) => self.file_op(&path, true, |path| FileOp::Utime { path, unix_secs }),
                None => Self::reply(ReplyCode::PARAMETER_SYNTAX_ERROR, "SITE UTIME: invalid time value."),
            },
            SiteCommand::Chgrp { group, path } => self.file_op(&path, true, |path| FileOp::Chgrp { path, group }),
            // Globus's FEAT advertises WHOAMI; its answer is `200 <user>`.
            SiteCommand::Other { name, .. } if name == "WHOAMI" => {
                let user = self.user().map(|g| g.user.clone()).unwrap_or_default();
                Self::reply(ReplyCode::OK, user)
            }
            SiteCommand::Other { name, .. } => {
                Self::reply(ReplyCode::SYNTAX_ERROR, format!("Unknown SITE command {name}; see SITE HELP."))
            }
        }
    }
}
