//! Where a password comes from when the URL does not carry one.
//!
//! A password on the command line shows in `ps`, in shell history and in
//! any message that echoes the argument. Ferry looks, in this order:
//!
//! 1. the URL (`ftp://alice:s3cret@host/`): still accepted, for scripts
//!    that have nothing better;
//! 2. the environment variable `FERRY_PASSWORD` (for the user the URL
//!    names; it applies to every server of the command);
//! 3. `~/.netrc` (or `$NETRC`), the file curl, lftp and ftp(1) read:
//!    `machine HOST login USER password PASS`, with a `default` entry as
//!    the fallback. A URL without a user takes the login from the entry
//!    that matches its host, as curl does; without one it is anonymous;
//! 4. a prompt on the terminal, without echo, when there is one.
//!
//! A URL that names a user and finds no password is an error that says
//! where to put it, rather than a login with an empty password.
//!
//! The lookup is a small value with no I/O of its own beyond reading the
//! netrc file and asking its [`Prompt`], so a long-running service can
//! hold one and resolve credentials for each job with the same rules
//! (giving it no prompt). Passwords live in [`Secret`], whose `Debug`
//! prints stars and which has no `Display`: nothing in Ferry formats one
//! into a message, a log line or a file. See also [`redact`], applied to
//! anything that echoes a command-line argument.

use crate::location::RemoteUrl;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// The environment variable that holds a password for the URL's user.
pub const PASSWORD_ENV: &str = "FERRY_PASSWORD";

/// A password. `Debug` shows `***`; there is no `Display`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    /// The password itself, for the one place that sends it (PASS).
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CredentialError {
    #[error(
        "no password for {user} on {host}:{port}: set {PASSWORD_ENV}, add `machine {host} login {user} password ...` to ~/.netrc, or run on a terminal to be asked"
    )]
    Missing { user: String, host: String, port: u16 },
    #[error("cannot read {path}: {error}")]
    Netrc { path: String, error: String },
}

/// Asks a person for a password (a terminal without echo, in the CLI).
pub trait Prompt: Send + Sync + std::fmt::Debug {
    /// `None` when nobody can be asked or the person gave up.
    fn password(&self, question: &str) -> Option<String>;
}

/// One `machine` (or `default`) entry of a netrc file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetrcEntry {
    /// `None` for the `default` entry.
    pub machine: Option<String>,
    pub login: Option<String>,
    pub password: Option<Secret>,
}

/// Parses a netrc file: whitespace-separated tokens (double quotes keep
/// spaces, as curl reads them); `macdef` bodies run to the next empty
/// line and are skipped; unknown tokens are ignored.
pub fn parse_netrc(text: &str) -> Vec<NetrcEntry> {
    let mut tokens = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut rest = line;
        loop {
            rest = rest.trim_start();
            if rest.is_empty() || rest.starts_with('#') {
                break;
            }
            let token = if let Some(q) = rest.strip_prefix('"') {
                let mut out = String::new();
                let mut chars = q.char_indices();
                let mut end = q.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, n)) = chars.next() {
                                out.push(n);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => out.push(c),
                    }
                }
                rest = &q[end.min(q.len())..];
                out
            } else {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                let t = rest[..end].to_string();
                rest = &rest[end..];
                t
            };
            if token == "macdef" {
                // The macro body ends at the first empty line.
                for body in lines.by_ref() {
                    if body.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            tokens.push(token);
        }
    }
    let mut out: Vec<NetrcEntry> = Vec::new();
    let mut it = tokens.into_iter();
    while let Some(t) = it.next() {
        match t.as_str() {
            "machine" => out.push(NetrcEntry { machine: it.next(), ..Default::default() }),
            "default" => out.push(NetrcEntry::default()),
            "login" => {
                let v = it.next();
                if let Some(e) = out.last_mut() {
                    e.login = v;
                }
            }
            "password" => {
                let v = it.next();
                if let Some(e) = out.last_mut() {
                    e.password = v.map(Secret::new);
                }
            }
            "account" => {
                it.next();
            }
            _ => {}
        }
    }
    out
}

/// Finds the login and password for `host` (and `user`, if the URL names
/// one): the first `machine` entry for the host whose login matches (or
/// has none), else the `default` entry on the same terms.
pub fn netrc_lookup<'a>(entries: &'a [NetrcEntry], host: &str, user: Option<&str>) -> Option<&'a NetrcEntry> {
    let login_fits = |e: &NetrcEntry| match (user, &e.login) {
        (Some(u), Some(l)) => u == l,
        _ => true,
    };
    entries
        .iter()
        .find(|e| e.machine.as_deref().is_some_and(|m| m.eq_ignore_ascii_case(host)) && login_fits(e))
        .or_else(|| entries.iter().find(|e| e.machine.is_none() && login_fits(e)))
}

/// Passwords typed at the prompt, by (user, host, port).
type Asked = Arc<Mutex<HashMap<(String, String, u16), Secret>>>;

/// The rules above, with the places they read.
#[derive(Debug, Clone)]
pub struct CredentialLookup {
    /// The environment variable to read (`FERRY_PASSWORD`), if any.
    pub env_var: Option<String>,
    /// The netrc file, if any.
    pub netrc: Option<PathBuf>,
    /// Who to ask when nothing else has the password.
    pub prompt: Option<Arc<dyn Prompt>>,
    /// Answers already given, so a reconnect does not ask again.
    asked: Asked,
}

impl Default for CredentialLookup {
    /// No sources: the URL's password or nothing.
    fn default() -> Self {
        Self { env_var: None, netrc: None, prompt: None, asked: Arc::default() }
    }
}

impl CredentialLookup {
    /// `FERRY_PASSWORD`, then `$NETRC` or `~/.netrc`; no prompt.
    pub fn standard() -> Self {
        let netrc = std::env::var_os("NETRC")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".netrc")));
        Self { env_var: Some(PASSWORD_ENV.to_string()), netrc, ..Self::default() }
    }

    pub fn with_prompt(mut self, prompt: Arc<dyn Prompt>) -> Self {
        self.prompt = Some(prompt);
        self
    }

    fn netrc_entries(&self) -> Result<Vec<NetrcEntry>, CredentialError> {
        let Some(path) = &self.netrc else { return Ok(Vec::new()) };
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(parse_netrc(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(CredentialError::Netrc { path: path.display().to_string(), error: e.to_string() }),
        }
    }

    /// `url` with its user and password filled in by the rules above.
    pub fn complete(&self, url: &RemoteUrl) -> Result<RemoteUrl, CredentialError> {
        let mut url = url.clone();
        if !url.user_given {
            // No user in the URL: a netrc entry for the host may name one
            // (curl does this); otherwise the login is anonymous.
            let entries = self.netrc_entries()?;
            if let Some(e) = netrc_lookup(&entries, &url.host, None) {
                if let (Some(login), Some(pw)) = (&e.login, &e.password) {
                    url.user = login.clone();
                    url.password = pw.expose().to_string();
                    url.user_given = true;
                    url.password_given = true;
                }
            }
            return Ok(url);
        }
        if url.password_given {
            return Ok(url);
        }
        if let Some(var) = &self.env_var {
            if let Some(pw) = std::env::var_os(var).and_then(|v| v.into_string().ok()).filter(|v| !v.is_empty()) {
                url.password = pw;
                url.password_given = true;
                return Ok(url);
            }
        }
        let entries = self.netrc_entries()?;
        if let Some(pw) = netrc_lookup(&entries, &url.host, Some(&url.user)).and_then(|e| e.password.clone()) {
            url.password = pw.expose().to_string();
            url.password_given = true;
            return Ok(url);
        }
        let key = (url.user.clone(), url.host.clone(), url.port);
        if let Some(pw) = self.asked.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            url.password = pw.expose().to_string();
            url.password_given = true;
            return Ok(url);
        }
        if let Some(prompt) = &self.prompt {
            let question = format!("Password for {}@{}:{}: ", url.user, url.host, url.port);
            if let Some(pw) = prompt.password(&question) {
                self.asked.lock().unwrap_or_else(|e| e.into_inner()).insert(key, Secret::new(pw.clone()));
                url.password = pw;
                url.password_given = true;
                return Ok(url);
            }
        }
        Err(CredentialError::Missing { user: url.user, host: url.host, port: url.port })
    }
}

/// Replaces the password of every `scheme://user:password@` in `text`
/// with `***`: for messages that echo what was typed (argument errors).
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(":/") {
        // The authority starts after "scheme:/" or "scheme://".
        let (head, tail) = rest.split_at(i + 2);
        out.push_str(head);
        let tail_start = tail.trim_start_matches('/');
        out.push_str(&tail[..tail.len() - tail_start.len()]);
        let end = tail_start
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail_start.len());
        let authority = &tail_start[..end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.find(':') {
                    Some(colon) => {
                        out.push_str(&userinfo[..colon]);
                        out.push_str(":***");
                    }
                    None => out.push_str(userinfo),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail_start[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::location::Location;

    fn url(s: &str) -> RemoteUrl {
        match Location::parse(s).unwrap() {
            Location::Remote(u) => u,
            _ => panic!(),
        }
    }

    #[derive(Debug)]
    struct Fixed(Option<&'static str>, Mutex<u32>);
    impl Prompt for Fixed {
        fn password(&self, _: &str) -> Option<String> {
            *self.1.lock().unwrap() += 1;
            self.0.map(str::to_string)
        }
    }

    #[test]
    fn netrc_as_curl_reads_it() {
        let text = "# comment\nmachine data.example.org login alice password \"s3 cret\"\n\
                    macdef init\ncd /x\n\nmachine other login bob\n  password b0b\ndefault login anonymous password me@\n";
        let e = parse_netrc(text);
        assert_eq!(e.len(), 3, "{e:?}");
        let a = netrc_lookup(&e, "DATA.example.org", Some("alice")).unwrap();
        assert_eq!(a.password.as_ref().unwrap().expose(), "s3 cret");
        assert!(netrc_lookup(&e, "data.example.org", Some("carol")).is_none_or(|x| x.machine.is_none()));
        assert_eq!(netrc_lookup(&e, "other", None).unwrap().login.as_deref(), Some("bob"));
        assert_eq!(netrc_lookup(&e, "nowhere", None).unwrap().login.as_deref(), Some("anonymous"));
        assert_eq!(format!("{:?}", a.password.as_ref().unwrap()), "***");
    }

    #[test]
    fn lookup_order_url_env_netrc_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let netrc = dir.path().join("netrc");
        std::fs::write(&netrc, "machine h login alice password from-netrc\nmachine n login nora password nn\n")
            .unwrap();
        let prompt = Arc::new(Fixed(Some("typed"), Mutex::new(0)));
        let lookup = CredentialLookup {
            env_var: Some("FERRY_TEST_PASSWORD_UNSET_VAR".into()),
            netrc: Some(netrc),
            prompt: Some(prompt.clone()),
            asked: Arc::default(),
        };
        assert_eq!(lookup.complete(&url("ftp://alice:inurl@h/")).unwrap().password, "inurl");
        assert_eq!(lookup.complete(&url("ftp://alice@h/")).unwrap().password, "from-netrc");
        let n = lookup.complete(&url("ftp://n:21/x")).unwrap();
        assert_eq!((n.user.as_str(), n.password.as_str()), ("nora", "nn"));
        let anon = lookup.complete(&url("ftp://elsewhere/x")).unwrap();
        assert_eq!(anon.user, "anonymous");
        assert_eq!(lookup.complete(&url("ftp://zoe@h/")).unwrap().password, "typed");
        assert_eq!(lookup.complete(&url("ftp://zoe@h/")).unwrap().password, "typed");
        assert_eq!(*prompt.1.lock().unwrap(), 1, "asked once per user and server");
        let silent = CredentialLookup { prompt: None, ..lookup.clone() };
        let e = silent.complete(&url("ftp://yan@h:2811/")).unwrap_err();
        assert!(e.to_string().contains("FERRY_PASSWORD") && e.to_string().contains("yan"), "{e}");
    }

    #[test]
    fn redacts_passwords_in_text() {
        assert_eq!(
            redact("error: unexpected argument 'ftp://alice:s3cret@host:2811/x' found"),
            "error: unexpected argument 'ftp://alice:***@host:2811/x' found"
        );
        assert_eq!(redact("ftp:/al:pw@h/x and ftps://b@h/ and /a:b@c"), "ftp:/al:***@h/x and ftps://b@h/ and /a:b@c");
        assert_eq!(redact("no urls here"), "no urls here");
    }
}
