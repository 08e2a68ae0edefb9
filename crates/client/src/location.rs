//! Where a copy reads or writes: a local path or a server URL.
//!
//! URLs follow RFC 1738 §3.2 with one deliberate difference shared with
//! globus-url-copy: the URL path is used as an absolute path on the server
//! (`ftp://host/data/x` names `/data/x`), because GridFTP servers are
//! addressed that way and chrooted FTP servers resolve it the same.
//! Percent-escapes are decoded, so `%20` is a space and `%2e%2e` is a file
//! literally named `..` — which the server then refuses.

use percent_encoding::percent_decode_str;
use std::fmt;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LocationError {
    #[error("{} is not a valid URL: {}", crate::credentials::redact(.0), .1)]
    BadUrl(String, String),
    /// `ftp:/host/x` (one slash): almost certainly a mistyped URL, not a
    /// local file; taking it as a path would put it (and a password in
    /// it) into error messages and restart records.
    #[error("{} looks like a URL with a slash missing: write {}://HOST/PATH", crate::credentials::redact(.0), .1)]
    MissingSlash(String, String),
    #[error("unsupported URL scheme {0:?} (use ftp://, ftps:// or a local path; gsiftp:// needs Globus GSI, which Ferry replaces with TLS)")]
    Scheme(String),
    #[error("URL {} has no host", crate::credentials::redact(.0))]
    NoHost(String),
    #[error("URL {} contains an escape that is not valid UTF-8", crate::credentials::redact(.0))]
    NotUtf8(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Ftp,
    Ftps,
}

/// A server and a path on it, with credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteUrl {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    /// Absolute path on the server, decoded. Ends in `/` when the URL did.
    pub path: String,
    /// The URL named a user (else `user` is `anonymous`, or what
    /// `~/.netrc` says for the host: see [`crate::credentials`]).
    pub user_given: bool,
    /// The password is known (from the URL or a credential source).
    pub password_given: bool,
}

impl fmt::Debug for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RemoteUrl({self})")
    }
}

/// Displays without the password.
impl fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Ftp => "ftp",
            Scheme::Ftps => "ftps",
        };
        let user = if self.user == "anonymous" { String::new() } else { format!("{}@", self.user) };
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        write!(f, "{scheme}://{user}{host}:{}{}", self.port, self.path)
    }
}

impl RemoteUrl {
    pub fn is_dir_url(&self) -> bool {
        self.path.ends_with('/')
    }

    /// Whether two URLs name the same path on the same server and account
    /// (passwords aside).
    pub fn same_file(&self, other: &RemoteUrl) -> bool {
        self.same_endpoint(other) && self.path.trim_end_matches('/') == other.path.trim_end_matches('/')
    }

    /// The same server with another path.
    pub fn with_path(&self, path: String) -> Self {
        Self { path, ..self.clone() }
    }

    /// The last path component, if any.
    pub fn file_name(&self) -> Option<&str> {
        self.path.trim_end_matches('/').rsplit('/').next().filter(|s| !s.is_empty())
    }

    /// Whether both URLs name the same server and account.
    pub fn same_endpoint(&self, other: &RemoteUrl) -> bool {
        self.host == other.host && self.port == other.port && self.user == other.user && self.scheme == other.scheme
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Local(PathBuf),
    Remote(RemoteUrl),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::Remote(u) => write!(f, "{u}"),
        }
    }
}

impl Location {
    /// Whether a tree source means "the contents of" rather than "this
    /// directory": it ends in `/` (or is `.`, `..` or a server's root).
    /// The rule of rsync and globus-url-copy: `ferry cp -r tree dst`
    /// makes `dst/tree`, `ferry cp -r tree/ dst` fills `dst` itself, so a
    /// re-run lands on the same files either way.
    pub fn names_contents(&self) -> bool {
        match self {
            Location::Local(p) => {
                p.as_os_str().to_string_lossy().ends_with('/')
                    || p.file_name().is_none()
                    || p.file_name().is_some_and(|n| n == "." || n == "..")
            }
            Location::Remote(u) => u.is_dir_url() || u.file_name().is_none(),
        }
    }

    /// The last path component, if any.
    pub fn file_name(&self) -> Option<String> {
        match self {
            Location::Local(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()),
            Location::Remote(u) => u.file_name().map(str::to_string),
        }
    }

    /// `self/name`.
    pub fn child(&self, name: &str) -> Location {
        match self {
            // A name that is not UTF-8 is the same octets on both sides
            // (`ferry_proto::octets`).
            Location::Local(p) => Location::Local(p.join(ferry_io::root::local_os_name(name))),
            Location::Remote(u) => Location::Remote(u.with_path(format!("{}/{}", u.path.trim_end_matches('/'), name))),
        }
    }

    pub fn parse(s: &str) -> Result<Self, LocationError> {
        let Some((scheme, _)) = s.split_once("://") else {
            if let Some((scheme, _)) = s.split_once(":/") {
                let lower = scheme.to_ascii_lowercase();
                if ["ftp", "ftps", "gsiftp", "sftp"].contains(&lower.as_str()) {
                    return Err(LocationError::MissingSlash(s.into(), lower));
                }
            }
            return Ok(Location::Local(PathBuf::from(s)));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme == "file" {
            let url = url::Url::parse(s).map_err(|e| LocationError::BadUrl(s.into(), e.to_string()))?;
            let path = url.to_file_path().map_err(|_| LocationError::BadUrl(s.into(), "not a file path".into()))?;
            return Ok(Location::Local(path));
        }
        let scheme = match scheme.as_str() {
            "ftp" => Scheme::Ftp,
            "ftps" => Scheme::Ftps,
            other => return Err(LocationError::Scheme(other.to_string())),
        };
        let url = url::Url::parse(s).map_err(|e| LocationError::BadUrl(s.into(), e.to_string()))?;
        let host = match url.host() {
            Some(url::Host::Ipv6(a)) => a.to_string(),
            Some(h) => h.to_string(),
            None => return Err(LocationError::NoHost(s.into())),
        };
        let decode = |x: &str| {
            percent_decode_str(x).decode_utf8().map(|c| c.into_owned()).map_err(|_| LocationError::NotUtf8(s.into()))
        };
        let user_given = !url.username().is_empty();
        let user = if user_given { decode(url.username())? } else { "anonymous".to_string() };
        let password = match url.password() {
            Some(p) => decode(p)?,
            None if user == "anonymous" => "ferry@".to_string(),
            None => String::new(),
        };
        // Anonymous logins need no secret (RFC 1635: an e-mail address).
        let password_given = url.password().is_some() || user.eq_ignore_ascii_case("anonymous");
        // A path is octets (RFC 3659 §2.2): %ff is the byte 0xff.
        let raw: Vec<u8> = percent_decode_str(url.path()).collect();
        let mut path = ferry_proto::octets::decode(&raw).into_owned();
        if path.is_empty() {
            path.push('/');
        }
        Ok(Location::Remote(RemoteUrl {
            scheme,
            host,
            port: url.port().unwrap_or(21),
            user,
            password,
            path,
            user_given,
            password_given,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls_and_paths() {
        let Location::Remote(u) = Location::parse("ftp://al%40ce:p%3Ass@127.0.0.1:2811/a%20b/%C3%BC.bin").unwrap()
        else {
            panic!()
        };
        assert_eq!((u.user.as_str(), u.password.as_str()), ("al@ce", "p:ss"));
        assert_eq!(u.path, "/a b/ü.bin");
        assert_eq!(u.port, 2811);
        assert_eq!(u.to_string(), "ftp://al@ce@127.0.0.1:2811/a b/ü.bin");
        assert!(!u.to_string().contains("p:ss"));
        let Location::Remote(u) = Location::parse("ftp://[::1]/dir/").unwrap() else { panic!() };
        assert_eq!((u.host.as_str(), u.port, u.user.as_str()), ("::1", 21, "anonymous"));
        assert!(u.is_dir_url());
        assert_eq!(Location::parse("/tmp/x").unwrap(), Location::Local("/tmp/x".into()));
        assert_eq!(Location::parse("file:///tmp/a%20b").unwrap(), Location::Local("/tmp/a b".into()));
        assert!(matches!(Location::parse("gsiftp://h/x"), Err(LocationError::Scheme(_))));
        let Location::Remote(u) = Location::parse("ftp://h/caf%e9").unwrap() else { panic!() };
        assert_eq!(&*ferry_proto::octets::encode(&u.path), b"/caf\xe9");
        assert!(matches!(Location::parse("ftp://u%ff@h/x"), Err(LocationError::NotUtf8(_))));
        // A missing slash is a typo, and its message keeps the password out.
        let e = Location::parse("ftp:/alice:s3cret@h:2811/x").unwrap_err();
        assert!(matches!(e, LocationError::MissingSlash(..)));
        assert!(!e.to_string().contains("s3cret"), "{e}");
        let e = Location::parse("ftp://alice:s3cret@h:99999/x").unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert!(Location::parse("tree/").unwrap().names_contents());
        assert!(Location::parse(".").unwrap().names_contents());
        assert!(!Location::parse("tree").unwrap().names_contents());
        assert!(Location::parse("ftp://h:1/").unwrap().names_contents());
        assert!(!Location::parse("ftp://h:1/run42").unwrap().names_contents());
    }
}
