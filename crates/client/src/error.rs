use ferry_proto::Reply;
use std::io;
use thiserror::Error;

/// Why a client operation failed, phrased for the person who ran it.
#[derive(Debug, Error)]
pub enum ClientError {
    #[error("cannot connect to {addr}: {error}")]
    Connect { addr: String, error: io::Error },
    #[error("{what} timed out after {secs} s")]
    Timeout { what: String, secs: u64 },
    #[error("the server closed the control connection")]
    Closed,
    #[error("control connection: {0}")]
    Io(#[from] io::Error),
    #[error("the server sent a malformed reply: {0}")]
    Protocol(#[from] ferry_proto::reply::ReplyError),
    #[error("{command} failed: the server said {}", reply_text(.reply))]
    Refused { command: String, reply: Reply },
    #[error("login as {user} failed: the server said {}", reply_text(.reply))]
    Login { user: String, reply: Reply },
    #[error("{path}: {error}")]
    Local { path: String, error: io::Error },
    #[error("data connection: {0}")]
    Data(String),
    #[error("{path}: expected {expected} bytes but {got} arrived")]
    Incomplete { path: String, expected: u64, got: u64 },
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Tls(String),
    #[error("{0}")]
    Credentials(#[from] crate::credentials::CredentialError),
    /// A tree copy stopped at its first failure (`--fail-fast`); the
    /// failure itself is in the summary.
    #[error("stopped after the first failure (--fail-fast)")]
    FailFast,
    #[error("checksum mismatch for {path}: {algorithm} is {source_value} at the source but {destination_value} at the destination")]
    ChecksumMismatch { path: String, algorithm: String, source_value: String, destination_value: String },
}

fn reply_text(r: &Reply) -> String {
    format!("{} {}", r.code, r.lines.join(" / "))
}

impl ClientError {
    pub fn local(path: impl std::fmt::Display, error: io::Error) -> Self {
        Self::Local { path: path.to_string(), error }
    }

    /// The server's reply code, when the server refused.
    pub fn reply_code(&self) -> Option<u16> {
        match self {
            Self::Refused { reply, .. } | Self::Login { reply, .. } => Some(reply.code.get()),
            _ => None,
        }
    }
}
