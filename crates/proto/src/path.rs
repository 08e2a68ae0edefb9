//! Paths as the client sees them, confined under a virtual root.
//!
//! The protocol core resolves every path argument against the working
//! directory *lexically*: `.` is dropped, `..` pops a component, and a `..`
//! at the root stays at the root — the user's root is their `/`, and POSIX
//! says `/..` is `/` (POSIX.1-2017 §4.13 "Pathname Resolution": "As a
//! special case, in the root directory, dot-dot may refer to the root
//! directory itself"). The Globus GridFTP server, vsftpd and pure-ftpd do
//! the same: `CDUP` at `/` is `250` and `PWD` stays `"/"`, and
//! `RETR ../../x` at the root names `/x`. Clients and scripts that `cd ..`
//! up to the top rely on it (`docs/security.md`, "Paths").
//!
//! Clamping is confinement, not a loophole: the result never has a `..`
//! component, so it names something beneath the root by construction.
//! Symbolic links are the I/O layer's business: it opens the resulting
//! relative path with a capability-style API (cap-std, `RESOLVE_BENEATH`),
//! which refuses any link that leads outside the root.

use std::fmt;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PathError {
    #[error("path escapes the root directory")]
    EscapesRoot,
    #[error("path contains a NUL byte")]
    Nul,
    #[error("path is empty")]
    Empty,
}

/// A normalised absolute path under the session's root: starts with `/`, has
/// no empty, `.` or `..` components and no trailing slash (except the root).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VirtualPath(String);

impl VirtualPath {
    pub fn root() -> Self {
        Self("/".to_string())
    }

    /// Resolves `arg` (absolute, or relative to `self`) into a new path; a
    /// `..` at the root stays at the root.
    pub fn resolve(&self, arg: &str) -> Result<Self, PathError> {
        if arg.contains('\0') {
            return Err(PathError::Nul);
        }
        if arg.is_empty() {
            return Err(PathError::Empty);
        }
        let mut parts: Vec<&str> = if arg.starts_with('/') { Vec::new() } else { self.components().collect() };
        for comp in arg.split('/') {
            match comp {
                "" | "." => {}
                ".." => {
                    // `/..` is `/` (POSIX.1-2017 §4.13).
                    parts.pop();
                }
                c => parts.push(c),
            }
        }
        let mut s = String::with_capacity(arg.len() + self.0.len() + 1);
        for p in &parts {
            s.push('/');
            s.push_str(p);
        }
        if s.is_empty() {
            s.push('/');
        }
        Ok(Self(s))
    }

    pub fn is_root(&self) -> bool {
        self.0 == "/"
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path relative to the root, as the I/O layer opens it (`.` for the
    /// root itself).
    pub fn relative(&self) -> &str {
        if self.is_root() {
            "."
        } else {
            &self.0[1..]
        }
    }

    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    /// The last component; `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        if self.is_root() {
            None
        } else {
            self.0.rsplit('/').next()
        }
    }

    /// The parent directory; the root is its own parent.
    pub fn parent(&self) -> Self {
        match self.0.rfind('/') {
            Some(0) | None => Self::root(),
            Some(i) => Self(self.0[..i].to_string()),
        }
    }

    /// `self/name` for a single component `name`.
    pub fn join(&self, name: &str) -> Result<Self, PathError> {
        if name.contains('/') || name == ".." {
            return Err(PathError::EscapesRoot);
        }
        self.resolve(name)
    }

    /// Whether `self` is `other` or lies beneath it.
    pub fn starts_with(&self, other: &VirtualPath) -> bool {
        other.is_root()
            || self.0 == other.0
            || (self.0.starts_with(&other.0) && self.0.as_bytes().get(other.0.len()) == Some(&b'/'))
    }
}

impl fmt::Display for VirtualPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> VirtualPath {
        VirtualPath::root().resolve(s).unwrap()
    }

    #[test]
    fn resolves_relative_and_absolute() {
        let cwd = p("/a/b");
        assert_eq!(cwd.resolve("c").unwrap().as_str(), "/a/b/c");
        assert_eq!(cwd.resolve("../c/./d/").unwrap().as_str(), "/a/c/d");
        assert_eq!(cwd.resolve("/x//y").unwrap().as_str(), "/x/y");
        assert_eq!(cwd.resolve("../..").unwrap().as_str(), "/");
        // A `..` at the root stays there, as POSIX and the Globus server
        // have it.
        assert_eq!(cwd.resolve("../../..").unwrap().as_str(), "/");
        assert_eq!(cwd.resolve("../../../../x").unwrap().as_str(), "/x");
        assert_eq!(cwd.resolve("/../etc").unwrap().as_str(), "/etc");
        assert_eq!(p("/").resolve("..").unwrap(), VirtualPath::root());
        assert_eq!(p("/").resolve("../../etc/passwd").unwrap().as_str(), "/etc/passwd");
        assert_eq!(p("/").resolve("/../..").unwrap(), VirtualPath::root());
        assert_eq!(p("/a").resolve("sub/../../..//b/./..").unwrap(), VirtualPath::root());
        assert_eq!(cwd.resolve("a\0b").unwrap_err(), PathError::Nul);
        assert_eq!(p("/").relative(), ".");
        assert_eq!(p("/a b/ü").relative(), "a b/ü");
        assert_eq!(p("/a/b").parent(), p("/a"));
        assert_eq!(p("/a").parent(), VirtualPath::root());
        assert!(p("/a/b").starts_with(&p("/a")));
        assert!(!p("/ab").starts_with(&p("/a")));
    }

    proptest! {
        #[test]
        fn resolved_paths_are_normal(cwd in "(/[a-z.]{1,3}){0,4}", arg in "[a-z./]{0,24}") {
            let Ok(cwd) = VirtualPath::root().resolve(if cwd.is_empty() { "/" } else { &cwd }) else {
                return Ok(());
            };
            if let Ok(r) = cwd.resolve(&arg) {
                prop_assert!(r.as_str().starts_with('/'));
                prop_assert!(r.is_root() || !r.as_str().ends_with('/'));
                for c in r.components() {
                    prop_assert!(c != "." && c != ".." && !c.is_empty());
                }
                // Resolving a normal path again is the identity.
                prop_assert_eq!(VirtualPath::root().resolve(r.as_str()).unwrap(), r);
            }
        }
    }
}
