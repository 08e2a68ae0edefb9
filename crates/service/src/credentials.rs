//! Where a node finds the passwords for the servers a job names.
//!
//! Job URLs never carry secrets (the database would keep them); a node
//! completes them from its own credentials, the way `ferry cp` would:
//!
//! 1. `--credentials FILE`: lines of `ftp://user:password@host:port/`
//!    (mode 600), matched by scheme, host, port and user ([`UrlFile`]);
//! 2. then the client library's own lookup (`ferry_client::credentials`):
//!    the node user's `~/.netrc` (or `$NETRC`). Not `FERRY_PASSWORD`: one
//!    password for every server of every job is not what a service means,
//!    and there is no terminal to prompt on.
//!
//! Certificates (`--cert`/`--key` for `ftps://`) need no password at all.

use ferry_client::location::{Location, RemoteUrl};
use std::path::Path;

/// Completes a URL with the password for its user at its server.
pub trait Credentials: Send + Sync + std::fmt::Debug {
    fn password(&self, url: &RemoteUrl) -> Option<String>;
}

/// No credentials: anonymous logins and certificate logins only.
#[derive(Debug, Default)]
pub struct NoCredentials;

impl Credentials for NoCredentials {
    fn password(&self, _: &RemoteUrl) -> Option<String> {
        None
    }
}

/// A file of URLs with passwords, one per line (`#` comments).
#[derive(Debug, Default)]
pub struct UrlFile {
    entries: Vec<RemoteUrl>,
}

impl UrlFile {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        use anyhow::Context;
        use std::os::unix::fs::PermissionsExt;
        let md = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        if md.permissions().mode() & 0o077 != 0 {
            anyhow::bail!(
                "{} holds passwords but others may read it (mode {:o}); chmod 600 it",
                path.display(),
                md.permissions().mode() & 0o777
            );
        }
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let mut entries = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match Location::parse(line) {
                Ok(Location::Remote(u)) => entries.push(u),
                // Never echo the line: it holds a password.
                _ => anyhow::bail!("line {}: not an ftp:// or ftps:// URL", n + 1),
            }
        }
        Ok(Self { entries })
    }
}

impl Credentials for UrlFile {
    fn password(&self, url: &RemoteUrl) -> Option<String> {
        self.entries
            .iter()
            .find(|e| e.scheme == url.scheme && e.host == url.host && e.port == url.port && e.user == url.user)
            .map(|e| e.password.clone())
    }
}

/// Parses a job URL and completes it with the node's credentials.
pub fn complete(url: &str, creds: &dyn Credentials) -> Result<RemoteUrl, String> {
    match Location::parse(url) {
        Ok(Location::Remote(mut u)) => {
            if u.user_given && !u.password_given {
                if let Some(p) = creds.password(&u) {
                    u.password = p;
                    u.password_given = true;
                }
            }
            Ok(u)
        }
        Ok(Location::Local(_)) => Err(format!("{url}: not a server URL")),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_in_the_password_for_the_same_user_and_server_only() {
        let f = UrlFile::parse("# ours\nftp://alice:s3cret@127.0.0.1:2811/\nftps://bob:pw@h:21\n").unwrap();
        assert_eq!(complete("ftp://alice@127.0.0.1:2811/x", &f).unwrap().password, "s3cret");
        assert_eq!(complete("ftp://alice@127.0.0.1:2812/x", &f).unwrap().password, "");
        assert_eq!(complete("ftp://bob@h/x", &f).unwrap().password, "");
        assert_eq!(complete("ftps://bob@h/x", &f).unwrap().password, "pw");
        assert_eq!(complete("ftp://127.0.0.1:2811/x", &f).unwrap().user, "anonymous");
        let e = UrlFile::parse("alice:s3cret").unwrap_err().to_string();
        assert!(!e.contains("s3cret"), "{e}");
    }
}
