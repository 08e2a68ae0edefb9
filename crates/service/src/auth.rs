//! Bearer tokens and dashboard sessions.
//!
//! A token is 32 random bytes from the operating system's generator,
//! written as `fy_` and 64 hex digits. The database keeps only its SHA-256.
//! A slow password hash (argon2, as the users file of `ferry serve` uses)
//! protects *guessable* secrets: it makes each guess expensive. A 256-bit
//! random token cannot be guessed however fast the hash, so a single
//! SHA-256 is as safe here — and it lets a request's token be looked up by
//! its hash in one indexed query, where argon2's per-secret salt would
//! force comparing against every stored hash, at tens of milliseconds each,
//! on every API call. Looking up by hash also means no secret-dependent
//! string comparison happens in our code.
//!
//! Dashboard sessions are the same kind of random value, kept hashed too;
//! each carries its own CSRF token (the synchronizer-token pattern).

use rand::RngCore;
use sha2::{Digest, Sha256};

/// A new random secret with a recognisable prefix.
pub fn new_secret(prefix: &str) -> String {
    let mut b = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut b);
    format!("{prefix}{}", hex::encode(b))
}

/// What the database stores for a secret.
pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// A user as the API sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user: String,
    pub admin: bool,
}

impl Principal {
    /// Whether this user may see and cancel `owner`'s jobs.
    pub fn may_touch(&self, owner: &str) -> bool {
        self.admin || self.user == owner
    }
}

/// Whether a user name is acceptable (printable, short, no separators
/// that would confuse logs or URLs).
pub fn valid_user(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
}

/// Compares two strings in time independent of where they differ (CSRF
/// tokens are compared directly, not looked up by hash).
pub fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_stored_hashed() {
        let (a, b) = (new_secret("fy_"), new_secret("fy_"));
        assert_ne!(a, b);
        assert_eq!(a.len(), 3 + 64);
        assert_eq!(hash(&a).len(), 64);
        assert_ne!(hash(&a), a);
        assert!(same(&a, &a.clone()) && !same(&a, &b));
        assert!(valid_user("alice") && !valid_user("a b") && !valid_user("x'; --") && !valid_user(""));
        let p = Principal { user: "alice".into(), admin: false };
        assert!(p.may_touch("alice") && !p.may_touch("bob"));
        assert!(Principal { user: "root".into(), admin: true }.may_touch("bob"));
    }
}
