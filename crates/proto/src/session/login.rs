//! Login: USER, PASS, anonymous access and logins by client certificate
//! (RFC 959 §4.1.1, RFC 1635, RFC 2228 §3).

use super::{Access, Action, AnonymousAccess, Session};
use crate::reply::{Reply, ReplyCode};

/// A login for the driver to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginRequest {
    /// Anonymous login is enabled; grant it with this access.
    Anonymous { access: Access, password: String },
    /// A named user: verify the password against the users file.
    Password { user: String, password: String },
    /// A user the verified TLS client certificate is mapped to (by the
    /// cert map): no password; the users file gives root and access.
    Certificate { user: String, subject: String },
}

/// What the driver grants after a successful login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub user: String,
    pub access: Access,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Login {
    /// No USER yet.
    Idle,
    /// USER given, waiting for PASS.
    NeedPass(String),
    /// PASS sent to the driver, waiting for its verdict.
    Checking(String),
    LoggedIn(Grant),
}

impl Session {
    pub(super) fn on_user(&mut self, name: &str) -> Action {
        if self.logged_in() {
            return Self::reply(ReplyCode::NOT_LOGGED_IN, "Already logged in; cannot change to another user.");
        }
        if self.config.require_tls && !self.tls {
            self.login = Login::Idle;
            return Self::reply(
                ReplyCode::NOT_LOGGED_IN,
                "This server requires TLS: send AUTH TLS before USER (use ftps:// or your client's TLS option).",
            );
        }
        if let Some(subject) = self.tls_identity.subject.clone().filter(|_| !self.tls_identity.users.is_empty()) {
            // RFC 2228 §3: a user authorized by the security exchange is
            // logged in by USER alone (232). A certificate speaks for the
            // users it is mapped to and nobody else.
            if self.tls_identity.users.iter().any(|u| u == name) {
                self.login = Login::Checking(name.to_string());
                self.certificate_login = true;
                return Action::Login(LoginRequest::Certificate { user: name.to_string(), subject });
            }
            let mapped = self.tls_identity.users.join(", ");
            return self.login_failed(&format!(
                "Your client certificate ({subject}) is mapped to {mapped}, not to {name}; log in as {mapped}."
            ));
        }
        self.login = Login::NeedPass(name.to_string());
        if is_anonymous_name(name) {
            Self::reply(ReplyCode::NEED_PASSWORD, "Anonymous login: send any password.")
        } else {
            Self::reply(ReplyCode::NEED_PASSWORD, format!("Password required for {name}."))
        }
    }

    pub(super) fn on_pass(&mut self, password: String) -> Action {
        let user = match std::mem::replace(&mut self.login, Login::Idle) {
            Login::NeedPass(u) => u,
            Login::LoggedIn(g) => {
                self.login = Login::LoggedIn(g);
                return Self::reply(ReplyCode::SUPERFLUOUS, "Already logged in.");
            }
            other => {
                self.login = other;
                return Self::reply(ReplyCode::BAD_SEQUENCE, "Send USER before PASS.");
            }
        };
        if is_anonymous_name(&user) {
            let access = match self.config.anonymous {
                AnonymousAccess::Off => {
                    return self.login_failed("Anonymous login is not allowed on this server.");
                }
                AnonymousAccess::Read => Access::ReadOnly,
                AnonymousAccess::Write => Access::ReadWrite,
            };
            self.login = Login::Checking(user);
            return Action::Login(LoginRequest::Anonymous { access, password });
        }
        self.login = Login::Checking(user.clone());
        Action::Login(LoginRequest::Password { user, password })
    }

    /// The driver's verdict on an [`Action::Login`].
    pub fn login_result(&mut self, result: Option<Grant>) -> Action {
        if !matches!(self.login, Login::Checking(_)) {
            return Self::reply(ReplyCode::BAD_SEQUENCE, "No login in progress.");
        }
        match result {
            Some(grant) => {
                let by_cert = std::mem::take(&mut self.certificate_login);
                let how = if by_cert { ", authorized by TLS client certificate" } else { "" };
                let text = match grant.access {
                    Access::ReadOnly => format!("User {} logged in (read-only){how}.", grant.user),
                    Access::ReadWrite => format!("User {} logged in{how}.", grant.user),
                };
                self.login = Login::LoggedIn(grant);
                self.failed_logins = 0;
                let code = if by_cert { ReplyCode::LOGGED_IN_SECURE } else { ReplyCode::LOGGED_IN };
                Self::reply(code, text)
            }
            None => {
                self.login = Login::Idle;
                self.certificate_login = false;
                self.login_failed("Login incorrect.")
            }
        }
    }

    pub(super) fn login_failed(&mut self, text: &str) -> Action {
        self.login = Login::Idle;
        self.failed_logins += 1;
        if self.failed_logins >= self.config.max_login_attempts {
            return Action::Close(Reply::new(
                ReplyCode::SERVICE_UNAVAILABLE,
                format!("{text} Too many failed logins; closing the connection."),
            ));
        }
        Self::reply(ReplyCode::NOT_LOGGED_IN, text)
    }
}

/// The user names that mean "anonymous": RFC 1635's `anonymous` and
/// `ftp`, and `:globus-mapping:`, the Globus client library's default user
/// when a URL names none (Globus servers map it like anonymous).
pub(super) fn is_anonymous_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("anonymous") || name.eq_ignore_ascii_case("ftp") || name == ":globus-mapping:"
}
