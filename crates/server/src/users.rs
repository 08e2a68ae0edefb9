//! The users file: who may log in, with which password, where, and whether
//! they may write.
//!
//! A TOML file of `[[user]]` tables. Passwords are stored only as argon2id
//! PHC strings (`$argon2id$v=19$m=...`), so a stolen users file does not
//! give the passwords away; verification runs on a blocking thread because
//! argon2 is deliberately slow.
//!
//! ```toml
//! [[user]]
//! name = "alice"
//! password = "$argon2id$v=19$m=19456,t=2,p=1$..."
//! root = "/projects/alice"   # inside the served directory; default "/"
//! access = "write"           # or "read"
//! profile = true             # may run SITE PROFILE; default false
//! ```

use argon2::password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use ferry_proto::session::Access;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum UsersError {
    #[error("cannot read users file {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("cannot write users file {path}: {error}")]
    Write { path: String, error: std::io::Error },
    #[error("users file {path} is not valid: {error}")]
    Parse { path: String, error: toml::de::Error },
    #[error("user name {0:?} is not allowed (use letters, digits, '.', '_' or '-'; not 'anonymous' or 'ftp')")]
    BadName(String),
    #[error("the password is empty")]
    EmptyPassword,
    #[error("cannot hash the password: {0}")]
    Hash(String),
    #[error("user {name}: root {root:?} must be an absolute path inside the served directory")]
    BadRoot { name: String, root: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AccessSetting {
    #[default]
    Read,
    Write,
}

impl From<AccessSetting> for Access {
    fn from(a: AccessSetting) -> Self {
        match a {
            AccessSetting::Read => Access::ReadOnly,
            AccessSetting::Write => Access::ReadWrite,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserEntry {
    pub name: String,
    /// argon2id PHC string.
    pub password: String,
    #[serde(default = "default_root")]
    pub root: String,
    #[serde(default)]
    pub access: AccessSetting,
    /// May start the server-side profiler (`SITE PROFILE`), which shows
    /// host-wide CPU, disk and network figures: an administrator's right.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub profile: bool,
}

fn default_root() -> String {
    "/".to_string()
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct UsersFile {
    #[serde(default, rename = "user")]
    users: Vec<UserEntry>,
}

#[derive(Debug, Default)]
pub struct UserDb {
    users: BTreeMap<String, UserEntry>,
    /// A hash to verify against when the user does not exist, so that the
    /// time to reject an unknown name matches a wrong password.
    decoy: String,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !name.eq_ignore_ascii_case("anonymous")
        && !name.eq_ignore_ascii_case("ftp")
}

pub fn hash_password(password: &str) -> Result<String, UsersError> {
    if password.is_empty() {
        return Err(UsersError::EmptyPassword);
    }
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| UsersError::Hash(e.to_string()))
}

impl UserDb {
    /// Loads a users file; a missing file is an empty database.
    pub fn load(path: &Path) -> Result<Self, UsersError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => return Err(UsersError::Read { path: path.display().to_string(), error }),
        };
        let file: UsersFile =
            toml::from_str(&text).map_err(|error| UsersError::Parse { path: path.display().to_string(), error })?;
        let mut db = Self::empty();
        for u in file.users {
            if !valid_name(&u.name) {
                return Err(UsersError::BadName(u.name));
            }
            if !u.root.starts_with('/') {
                return Err(UsersError::BadRoot { name: u.name, root: u.root });
            }
            db.users.insert(u.name.clone(), u);
        }
        Ok(db)
    }

    pub fn empty() -> Self {
        Self { users: BTreeMap::new(), decoy: hash_password("decoy password for unknown users").unwrap_or_default() }
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// The entry of a user who proved who they are another way (a TLS
    /// client certificate mapped to this name): no password involved.
    pub fn get(&self, name: &str) -> Option<&UserEntry> {
        self.users.get(name)
    }

    /// Checks a password. Always does one argon2 verification.
    pub fn verify(&self, name: &str, password: &str) -> Option<&UserEntry> {
        let entry = self.users.get(name);
        let hash = entry.map_or(self.decoy.as_str(), |e| e.password.as_str());
        let ok = PasswordHash::new(hash)
            .map(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
            .unwrap_or(false);
        if ok {
            entry
        } else {
            None
        }
    }

    /// Adds or replaces a user.
    pub fn set(&mut self, name: &str, password: &str, root: &str, access: AccessSetting) -> Result<(), UsersError> {
        if !valid_name(name) {
            return Err(UsersError::BadName(name.to_string()));
        }
        if !root.starts_with('/') {
            return Err(UsersError::BadRoot { name: name.into(), root: root.into() });
        }
        let profile = self.users.get(name).is_some_and(|u| u.profile);
        let entry = UserEntry {
            name: name.to_string(),
            password: hash_password(password)?,
            root: root.to_string(),
            access,
            profile,
        };
        self.users.insert(name.to_string(), entry);
        Ok(())
    }

    /// Grants or withdraws the profiling permission; false if no such user.
    pub fn set_profile(&mut self, name: &str, allowed: bool) -> bool {
        self.users.get_mut(name).map(|u| u.profile = allowed).is_some()
    }

    /// Whether `name` may run the profiler.
    pub fn may_profile(&self, name: &str) -> bool {
        self.users.get(name).is_some_and(|u| u.profile)
    }

    pub fn remove(&mut self, name: &str) -> bool {
        self.users.remove(name).is_some()
    }

    /// Writes the file atomically (temporary file, then rename), mode 0600.
    pub fn save(&self, path: &Path) -> Result<(), UsersError> {
        let file = UsersFile { users: self.users.values().cloned().collect() };
        let text = toml::to_string_pretty(&file).map_err(|e| UsersError::Hash(e.to_string()))?;
        let tmp = path.with_extension("tmp");
        let werr = |error| UsersError::Write { path: path.display().to_string(), error };
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(werr)?;
            f.write_all(text.as_bytes()).map_err(werr)?;
            f.sync_all().map_err(werr)?;
        }
        std::fs::rename(&tmp, path).map_err(werr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_save_load_verify() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("users.toml");
        let mut db = UserDb::load(&path).unwrap();
        assert!(db.is_empty());
        db.set("alice", "s3cret", "/alice", AccessSetting::Write).unwrap();
        db.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("$argon2id$") && !text.contains("s3cret"));
        let db = UserDb::load(&path).unwrap();
        assert_eq!(db.verify("alice", "s3cret").map(|e| e.root.as_str()), Some("/alice"));
        assert!(db.verify("alice", "wrong").is_none());
        assert!(db.verify("bob", "s3cret").is_none());
        let mut other = UserDb::empty();
        assert!(matches!(other.set("anonymous", "x", "/", AccessSetting::Read), Err(UsersError::BadName(_))));
        assert!(matches!(other.set("a/b", "x", "/", AccessSetting::Read), Err(UsersError::BadName(_))));
        assert!(matches!(other.set("carol", "", "/", AccessSetting::Read), Err(UsersError::EmptyPassword)));
    }
}
