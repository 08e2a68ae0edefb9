//! Security on the control channel: AUTH TLS, PBSZ, PROT, CCC (RFC 4217,
//! RFC 2228). The handshake is the driver's; the session keeps the
//! protection state as plain data.

use super::login::Login;
use super::{Action, Session};
use crate::command::{Command, ProtectionLevel};
use crate::reply::{Reply, ReplyCode};

/// Who the TLS client proved to be, as the driver found it after the
/// handshake on the control connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsIdentity {
    /// Subject DN of a client certificate that verified against the
    /// configured CAs (`/C=../O=../CN=..`).
    pub subject: Option<String>,
    /// Local users that subject is mapped to; empty when it is not mapped.
    pub users: Vec<String>,
}

impl Session {
    pub(super) fn on_security(&mut self, cmd: &Command) -> Action {
        use ProtectionLevel as P;
        match cmd {
            //= RFC 2228 §3: 431 "Need some unavailable resource to process
            //= security" — here, a certificate.
            Command::Auth(_) if !self.config.tls_available => Self::reply(
                ReplyCode::SECURITY_RESOURCE_UNAVAILABLE,
                "AUTH TLS is not available: this server has no TLS certificate configured.",
            ),
            Command::Auth(mech) if mech != "TLS" && mech != "TLS-C" && mech != "SSL" => {
                Self::reply(ReplyCode::PARAMETER_NOT_IMPLEMENTED, "Security mechanism not understood; use AUTH TLS.")
            }
            Command::Auth(_) if self.tls => {
                Self::reply(ReplyCode::BAD_SEQUENCE, "The control connection is already protected by TLS.")
            }
            Command::Auth(_) if self.logged_in() => {
                Self::reply(ReplyCode::BAD_SEQUENCE, "AUTH TLS must come before login: reconnect and send it first.")
            }
            Command::Auth(_) => {
                // A half-finished USER does not carry over into TLS.
                self.login = Login::Idle;
                Action::StartTls(Reply::new(ReplyCode::AUTH_OK, "AUTH TLS successful; start the TLS handshake."))
            }
            //= RFC 4217 §12.3: a server may refuse CCC with 534.
            Command::Ccc if self.tls => Self::reply(
                ReplyCode::POLICY_DENIED,
                "CCC refused: the control connection stays protected for the whole session.",
            ),
            Command::Ccc => Self::reply(ReplyCode::NOT_PROTECTED, "CCC: the control connection is not protected."),
            //= RFC 4217 §8: PBSZ follows a successful AUTH; for TLS the
            //= only size is 0, and a server answers a larger one with PBSZ=0.
            Command::Pbsz(_) if !self.tls => {
                Self::reply(ReplyCode::BAD_SEQUENCE, "PBSZ needs a protected control connection: send AUTH TLS first.")
            }
            Command::Pbsz(_) => {
                self.pbsz = true;
                Self::reply(ReplyCode::OK, "PBSZ=0")
            }
            Command::Prot(P::Clear) if !self.tls && !self.config.tls_available => {
                Self::reply(ReplyCode::OK, "Protection level set to Clear.")
            }
            Command::Prot(_) if !self.tls => {
                Self::reply(ReplyCode::BAD_SEQUENCE, "PROT needs AUTH TLS and PBSZ 0 first.")
            }
            //= RFC 4217 §9: PROT without a preceding PBSZ is 503.
            Command::Prot(_) if !self.pbsz => Self::reply(ReplyCode::BAD_SEQUENCE, "Send PBSZ 0 before PROT."),
            Command::Prot(P::Safe | P::Confidential) => Self::reply(
                ReplyCode::PROT_NOT_SUPPORTED,
                "PROT S and PROT E are not supported with TLS; use PROT P (private) or PROT C (clear).",
            ),
            Command::Prot(P::Clear) if self.config.require_protected_data => Self::reply(
                ReplyCode::POLICY_DENIED,
                "PROT C refused: this server requires protected data connections (PROT P).",
            ),
            Command::Prot(level) => {
                if *level != self.prot {
                    // Cached MODE E connections have the old protection.
                    self.new_generation();
                }
                self.prot = *level;
                let name = if *level == P::Private { "Private" } else { "Clear" };
                Self::reply(ReplyCode::OK, format!("Protection level set to {name}."))
            }
            _ => Self::reply(ReplyCode::BAD_SEQUENCE, "Unexpected security command."),
        }
    }
}
