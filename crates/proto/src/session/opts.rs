//! OPTS (RFC 2389): MLST facts, Globus's `OPTS RETR` (parallelism,
//! markers) and delayed passive (`OPTS PASV AllowDelayed`).

use super::{Action, Session, MAX_PARALLELISM};
use crate::command::Opts;
use crate::reply::ReplyCode;

impl Session {
    pub(super) fn on_opts(&mut self, opts: Opts) -> Action {
        match opts {
            // RFC 3659 §7.9: the selection holds for the session's later
            // MLST/MLSD/MLSR (and FEAT marks it); the reply names what is
            // on. `OPTS MLSD`/`OPTS MLSR` set the same one, as on Globus.
            Opts::Mlst(names) => {
                self.mlst_facts = crate::facts::FactSet::select(&names);
                Self::reply(ReplyCode::OK, format!("MLST OPTS {}", self.mlst_facts.on_list()))
            }
            Opts::Other { command, args } if command == "TPRT" => self.on_opts_tprt(&args),
            Opts::Other { command, .. } => Self::reply(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                format!("OPTS {command}: no options are defined for this command."),
            ),
            Opts::Retr(items) => self.on_opts_retr(&items),
            Opts::Pasv(items) => {
                for (k, v) in &items {
                    match (k.to_ascii_lowercase().as_str(), v.as_str()) {
                        ("allowdelayed", "1") => self.allow_delayed = true,
                        ("allowdelayed", "0") => self.allow_delayed = false,
                        _ => {
                            return Self::reply(
                                ReplyCode::PARAMETER_SYNTAX_ERROR,
                                format!("OPTS PASV: unknown option {k}={v}."),
                            )
                        }
                    }
                }
                Self::reply(ReplyCode::OK, "OPTS Command Successful.")
            }
            Opts::Utf8(_) => Self::reply(ReplyCode::OK, "UTF8 set to on."),
        }
    }

    /// `OPTS TPRT Rate=N;` (Ferry): the path's bottleneck rate in bytes/s,
    /// measured by the client (`ferry probe`, `ferry cp --path-rate`), so
    /// that this server's UDT senders — the sender of a download is the
    /// server — start at it instead of ramping up from a few
    /// packets per round trip; `Rate=0;` forgets it. The server's own
    /// `--max-rate` still caps it. A server without it answers 501 (the
    /// client then starts cold, as before); Globus clients never send it.
    /// docs/udt.md, "Starting at a measured rate".
    fn on_opts_tprt(&mut self, args: &str) -> Action {
        /// 8 Tbit/s: anything above is a typo, not a path.
        const MAX_RATE: u64 = 1 << 40;
        let mut rate = self.path_rate;
        for item in args.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item.split_once('=').unwrap_or((item, ""));
            if !k.trim().eq_ignore_ascii_case("rate") {
                return Self::reply(
                    ReplyCode::PARAMETER_SYNTAX_ERROR,
                    format!("OPTS TPRT: unknown option {}.", k.trim()),
                );
            }
            match v.trim().parse::<u64>() {
                Ok(0) => rate = None,
                Ok(r) if r <= MAX_RATE => rate = Some(r),
                _ => {
                    return Self::reply(
                        ReplyCode::PARAMETER_SYNTAX_ERROR,
                        format!("OPTS TPRT: Rate takes bytes per second, 1 to {MAX_RATE}."),
                    )
                }
            }
        }
        self.path_rate = rate;
        match rate {
            Some(r) => Self::reply(ReplyCode::OK, format!("OPTS TPRT: UDT senders start at {r} bytes/s.")),
            None => Self::reply(ReplyCode::OK, "OPTS TPRT: UDT senders start cold."),
        }
    }

    /// `OPTS RETR Parallelism=n,min,max;markers=s;StripeLayout=...;`
    /// (GFD.20; Globus uses only the first parallelism number).
    pub(super) fn on_opts_retr(&mut self, items: &[(String, String)]) -> Action {
        let mut parallelism = self.parallelism;
        let mut markers = self.send_markers;
        for (k, v) in items {
            match k.to_ascii_lowercase().as_str() {
                "parallelism" => {
                    let first = v.split(',').next().unwrap_or("").trim();
                    match first.parse::<u32>() {
                        Ok(n) if (1..=MAX_PARALLELISM).contains(&n) => parallelism = n,
                        _ => {
                            return Self::reply(
                                ReplyCode::PARAMETER_SYNTAX_ERROR,
                                format!("OPTS RETR: Parallelism must be 1 to {MAX_PARALLELISM}."),
                            )
                        }
                    }
                }
                "markers" => match v.trim().parse::<u32>() {
                    Ok(0) => markers = None,
                    Ok(n) => markers = Some(n),
                    Err(_) => {
                        return Self::reply(ReplyCode::PARAMETER_SYNTAX_ERROR, "OPTS RETR: markers takes seconds.")
                    }
                },
                "stripelayout" | "blocksize" => {
                    if let Err(e) = self.stripe.options.apply(k, v) {
                        return Self::reply(ReplyCode::PARAMETER_SYNTAX_ERROR, format!("OPTS RETR: {e}."));
                    }
                }
                _ => return Self::reply(ReplyCode::PARAMETER_SYNTAX_ERROR, format!("OPTS RETR: unknown option {k}.")),
            }
        }
        self.parallelism = parallelism;
        self.send_markers = markers;
        Self::reply(ReplyCode::OK, "OPTS Command Successful.")
    }
}
