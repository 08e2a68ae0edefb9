//! Logging in, as one pipelined batch: the greeting, `USER`, `PASS`, on a
//! TLS control connection `PBSZ 0` and `PROT P` (RFC 4217 §9), `FEAT`
//! (RFC 2389), `OPTS UTF8 ON` (RFC 2640), and optionally an `MLST` of a
//! path the caller will want. Servers read commands only after greeting,
//! so all of it goes out before the greeting is read: one round trip.
//!
//! The replies are checked in order by [`LoginSequence::on_reply`]:
//!
//! * the greeting: `120` (ready in a while) is skipped, `220` goes on,
//!   anything else refuses the connection;
//! * `USER`: `230` or `232` (RFC 2228: the client certificate speaks for
//!   the user) logs in at once, and the reply to PASS (`202` or `503`) is
//!   read and ignored; `331` asks for PASS, which must then be `230` or
//!   `202`; anything else is a refused login;
//! * `PBSZ`, `PROT`: 2xx, or the session cannot protect its data;
//! * `FEAT`: whatever it says (a `500` lists nothing); `OPTS UTF8`:
//!   anything; `MLST`: the probed facts when FEAT lists MLST.
//!
//! `AUTH TLS` comes before all this (RFC 4217 §4), answered `234` before
//! the handshake: see [`auth_tls_accepted`].

use super::features::Features;
use super::listing::parse_mlsx;
use crate::command::{Command, Opts, ProtectionLevel};
use crate::facts::FileFacts;
use crate::reply::Reply;
use thiserror::Error;

/// What a server's greeting says (RFC 959 §5.4: "120 -> 220, 220, 421").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Greeting {
    /// `120`: ready in a while; the `220` follows.
    Wait,
    /// `220`: ready for a new user.
    Ready,
    /// Anything else (`421`): the connection is refused.
    Refused,
}

pub fn greeting(r: &Reply) -> Greeting {
    match r.code.get() {
        120 => Greeting::Wait,
        220 => Greeting::Ready,
        _ => Greeting::Refused,
    }
}

/// Whether the reply to `AUTH TLS` lets the handshake begin.
pub fn auth_tls_accepted(r: &Reply) -> bool {
    r.code.get() == 234
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LoginError {
    #[error("the server refused the connection: {} {}", .0.code, .0.text())]
    Greeting(Reply),
    #[error("login as {user} refused: {} {}", .reply.code, .reply.text())]
    Refused { user: String, reply: Reply },
    /// PBSZ or PROT refused: data connections cannot be protected.
    #[error("{command} refused: {} {}", .reply.code, .reply.text())]
    Security { command: Command, reply: Reply },
}

/// What a successful login found out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoginOutcome {
    pub features: Features,
    /// `PROT P` was accepted: data connections are TLS.
    pub data_private: bool,
    /// The probed path's facts: `None` without a probe or when the server
    /// has no MLST (ask it another way), `Some(None)` when it does not
    /// exist.
    pub probe: Option<Option<FileFacts>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Greeting,
    User,
    /// USER was answered; PASS's reply is next. `needed`: 331 asked for it.
    Pass {
        needed: bool,
    },
    Pbsz,
    Prot,
    Feat,
    Utf8,
    Probe,
    Done,
}

/// The login's replies, checked in order; see the module documentation.
#[derive(Debug, Clone)]
pub struct LoginSequence {
    user: String,
    tls: bool,
    probe: bool,
    stage: Stage,
    outcome: LoginOutcome,
}

impl LoginSequence {
    /// The sequence and the commands to send, in one write. `greeted`: the
    /// greeting was read already (before AUTH TLS).
    pub fn new(user: &str, password: &str, tls: bool, probe: Option<&str>, greeted: bool) -> (Self, Vec<Command>) {
        let mut batch = vec![Command::User(user.to_string()), Command::Pass(password.to_string())];
        if tls {
            //= RFC 4217 §9: PBSZ 0, then PROT P, for private data connections.
            batch.extend([Command::Pbsz(0), Command::Prot(ProtectionLevel::Private)]);
        }
        batch.extend([Command::Feat, Command::Opts(Opts::Utf8(true))]);
        if let Some(p) = probe {
            batch.push(Command::Mlst(Some(p.to_string())));
        }
        let stage = if greeted { Stage::User } else { Stage::Greeting };
        let seq = Self { user: user.to_string(), tls, probe: probe.is_some(), stage, outcome: LoginOutcome::default() };
        (seq, batch)
    }

    pub fn is_done(&self) -> bool {
        self.stage == Stage::Done
    }

    /// Takes the next reply; `Some` with the outcome once the last one of
    /// the login has arrived. After an error the connection is dropped:
    /// the replies to the rest of the batch do not matter.
    pub fn on_reply(&mut self, r: &Reply) -> Result<Option<LoginOutcome>, LoginError> {
        let code = r.code.get();
        self.stage = match self.stage {
            Stage::Greeting => match greeting(r) {
                Greeting::Wait => Stage::Greeting,
                Greeting::Ready => Stage::User,
                Greeting::Refused => return Err(LoginError::Greeting(r.clone())),
            },
            Stage::User => match code {
                230 | 232 => Stage::Pass { needed: false },
                331 => Stage::Pass { needed: true },
                _ => return Err(self.refused(r)),
            },
            Stage::Pass { needed } => {
                if needed && code != 230 && code != 202 {
                    return Err(self.refused(r));
                }
                if self.tls {
                    Stage::Pbsz
                } else {
                    Stage::Feat
                }
            }
            Stage::Pbsz => {
                if !r.code.is_positive_completion() {
                    return Err(LoginError::Security { command: Command::Pbsz(0), reply: r.clone() });
                }
                Stage::Prot
            }
            Stage::Prot => {
                if !r.code.is_positive_completion() {
                    let command = Command::Prot(ProtectionLevel::Private);
                    return Err(LoginError::Security { command, reply: r.clone() });
                }
                self.outcome.data_private = true;
                Stage::Feat
            }
            Stage::Feat => {
                self.outcome.features = Features::parse(r);
                Stage::Utf8
            }
            Stage::Utf8 if self.probe => Stage::Probe,
            Stage::Utf8 => Stage::Done,
            Stage::Probe => {
                if self.outcome.features.has("MLST") {
                    self.outcome.probe = Some(if code == 250 {
                        r.lines.iter().skip(1).find_map(|l| parse_mlsx(l.trim_start()))
                    } else {
                        None
                    });
                }
                Stage::Done
            }
            Stage::Done => return Ok(None),
        };
        Ok((self.stage == Stage::Done).then(|| std::mem::take(&mut self.outcome)))
    }

    fn refused(&self, r: &Reply) -> LoginError {
        LoginError::Refused { user: self.user.clone(), reply: r.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::ReplyCode;

    fn r(code: u16, text: &str) -> Reply {
        Reply::new(ReplyCode::new(code).unwrap(), text)
    }

    fn run(seq: &mut LoginSequence, replies: &[Reply]) -> Result<Option<LoginOutcome>, LoginError> {
        let mut last = None;
        for reply in replies {
            last = seq.on_reply(reply)?;
        }
        Ok(last)
    }

    #[test]
    fn password_login_over_tls_with_a_probe() {
        let (mut seq, cmds) = LoginSequence::new("alice", "pw", true, Some("/f"), false);
        let verbs: Vec<&str> = cmds.iter().map(|c| c.verb()).collect();
        assert_eq!(verbs, ["USER", "PASS", "PBSZ", "PROT", "FEAT", "OPTS", "MLST"]);
        let feat = Reply::multiline(ReplyCode::SYSTEM_STATUS, "Extensions", [" MLST Type*;".to_string()], "End");
        let mlst = Reply::multiline(ReplyCode::FILE_ACTION_OK, "Listing", [" Type=file;Size=7; /f".to_string()], "End");
        let replies = [
            r(120, "soon"),
            r(220, "hi"),
            r(331, "pw?"),
            r(230, "in"),
            r(200, "PBSZ=0"),
            r(200, "P"),
            feat,
            r(200, "utf8"),
            mlst,
        ];
        let out = run(&mut seq, &replies).unwrap().unwrap();
        assert!(out.data_private && out.features.has("MLST"));
        assert_eq!(out.probe.unwrap().unwrap().size, 7);
        assert!(seq.is_done());
    }

    #[test]
    fn refusals_say_which_step() {
        let (mut seq, _) = LoginSequence::new("bob", "x", false, None, false);
        assert!(matches!(seq.on_reply(&r(421, "busy")), Err(LoginError::Greeting(_))));
        let (mut seq, _) = LoginSequence::new("bob", "x", false, None, true);
        assert!(matches!(run(&mut seq, &[r(331, "pw?"), r(530, "no")]), Err(LoginError::Refused { .. })));
        let (mut seq, _) = LoginSequence::new("bob", "x", true, None, true);
        assert!(matches!(
            run(&mut seq, &[r(232, "cert"), r(503, "superfluous"), r(503, "no TLS")]),
            Err(LoginError::Security { command: Command::Pbsz(0), .. })
        ));
        // A certificate login, without MLST: the probe is unknown.
        let (mut seq, _) = LoginSequence::new("c", "", false, Some("/x"), true);
        let out = run(&mut seq, &[r(232, "ok"), r(503, "x"), r(500, "no FEAT"), r(200, "u"), r(500, "no")]);
        assert_eq!(out.unwrap().unwrap().probe, None);
    }
}
