//! What the server says it can do: FEAT (RFC 2389) and HELP.

use super::{Session, CHECKSUM_ALGORITHMS};
use crate::reply::{Reply, ReplyCode};

impl Session {
    pub(super) fn feat(&self) -> Reply {
        // Exactly what is implemented. DCAU is left out on purpose: only
        // `DCAU N` works, and a GSI client seeing DCAU would ask for A.
        let cksm: String = CHECKSUM_ALGORITHMS.iter().map(|a| format!("{a};")).collect();
        let mut lines: Vec<String> = vec![
            format!(" CKSM {cksm}"),
            " EPRT".into(),
            " EPSV".into(),
            " ERET".into(),
            " ESTO".into(),
            " MDTM".into(),
            " MFMT".into(),
            " MLSR".into(),
            format!(" MLST {}", self.mlst_facts.feat_list()),
            " PARALLEL".into(),
            " PASV AllowDelayed;".into(),
            " REST STREAM".into(),
            " SBUF".into(),
            " SITE PARTIAL".into(),
            " SIZE".into(),
            " SPAS".into(),
            " SPOR".into(),
            crate::transport::feat_line(&self.config.transports),
            " TVFS".into(),
            " UTF8".into(),
        ];
        if self.config.batch {
            lines.insert(0, crate::batch::FEAT_LINE_STREAM_STOR.into());
        }
        if self.config.tls_available && self.config.transports.iter().any(|t| t.as_str() == "udt") {
            // UDT data under PROT P, encrypted (docs/udt.md): a Ferry
            // client asks with `TPRT udt:aes-gcm`.
            lines.push(format!(" TPRT {}", crate::transport::SEALED_UDT));
        }
        if self.config.tls_available {
            lines.insert(0, " AUTH TLS".into());
            lines.push(" PBSZ".into());
            lines.push(" PROT".into());
        }
        Reply::multiline(ReplyCode::SYSTEM_STATUS, "Extensions supported", lines, "End.")
    }
}

/// The commands this server serves, for HELP and SITE HELP.
pub fn help_reply(code: ReplyCode) -> Reply {
    let verbs = [
        "ABOR", "ACCT", "ALLO", "APPE", "BRET", "BSTO", "CDUP", "CKSM", "CWD", "DCAU", "DELE", "EPRT", "EPSV", "ERET",
        "ESTO", "FEAT", "HELP", "LIST", "MDTM", "MFMT", "MKD", "MLSD", "MLSR", "MLST", "MODE", "NLST", "NOOP", "OPTS",
        "PASS", "PASV", "PORT", "PWD", "QUIT", "REST", "RETR", "RMD", "RNFR", "RNTO", "SBUF", "SITE", "SIZE", "SPAS",
        "SPOR", "STAT", "STOR", "STRU", "SYST", "TPRT", "TREV", "TYPE", "USER",
    ];
    // globus-url-copy looks for the SITE buffer commands in this text to
    // pick how to send `-tcp-bs` (`docs/gridftp-wire-notes.md` §9).
    let body = verbs
        .chunks(8)
        .map(|c| {
            let mut line = String::from("   ");
            for v in c {
                line.push_str(&format!(" {v:<7}"));
            }
            line.trim_end().to_string()
        })
        .chain([
            "    SITE HELP, SITE CLIENTINFO, SITE CHMOD <mode> <path>,".to_string(),
            "    SITE CHGRP <group> <path>, SITE UTIME <YYYYMMDDHHMMSS> <path>,".to_string(),
            "    SITE SETDISKSTACK file, SITE SETNETSTACK <transport>,".to_string(),
            "    SITE RETRBUFSIZE <n>, SITE STORBUFSIZE <n>, SITE BUFSIZE <n>,".to_string(),
            "    SITE PROFILE START [interval-ms] [PERF], SITE PROFILE STOP,".to_string(),
            "    SITE PARTIAL <path>, SITE WHOAMI".to_string(),
        ]);
    Reply::multiline(code, "The following commands are recognized:", body, "Direct comments to the administrator.")
}

/// `HELP <command>` (RFC 959 §4.1.3): 214 for a command this server
/// knows, 502 for one it does not, as the Globus server answers; `HELP
/// SITE` is the SITE list.
pub fn help_topic(topic: &str) -> Reply {
    let verb = topic.split_whitespace().next().unwrap_or("").to_ascii_uppercase();
    if verb == "SITE" {
        return help_reply(ReplyCode::HELP);
    }
    // A verb the parser knows fails, without an argument, on its argument
    // (or not at all); an unknown or unimplemented one fails as such.
    match crate::command::Command::parse(verb.as_bytes()) {
        Err(crate::command::CommandError::Unknown(_) | crate::command::CommandError::NotImplemented(_)) => {
            Reply::new(ReplyCode::NOT_IMPLEMENTED, format!("Unknown command '{}'.", verb.escape_default()))
        }
        _ => Reply::new(ReplyCode::HELP, format!("{verb} is recognized; HELP lists every command.")),
    }
}
