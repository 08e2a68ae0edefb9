//! Where an upload lives until it is complete, and who may write it.
//!
//! Every directory that receives uploads gets a hidden area,
//! [`AREA`] (`.ferry-partial`), created on the first upload and removed
//! when it is empty. An upload to `name` writes `<id>.part` there, where
//! `<id>` is the XXH3-128 of the name's octets in hex: 32 characters
//! whatever the name's length, so a partial file works for every name the
//! file system accepts (a 255-byte name plus a prefix and a suffix would
//! not). Beside it, `<id>.meta` is a small JSON record: the final name,
//! the user, the size ALLO announced and the byte ranges known to be on
//! disk — written only after the data has been synced, so a record never
//! claims bytes a crash could have lost. `SITE PARTIAL` answers from it,
//! and a resume (`REST`) may only claim ranges it lists.
//!
//! [`Claims`] is the server-wide registry of live uploads, keyed by the
//! directory (device and inode) and the id. A second upload to a name
//! whose claim is held gets `450`; a claim is held by the transfer and
//! released when it ends (committed, failed, aborted, or its session gone),
//! after its last write — only then may another upload take the partial
//! over and resume it. See `docs/partial-files.md`.

use ferry_proto::RangeSet;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// The hidden per-directory area of partial uploads. Never listed, never
/// accepted as a path component from a client.
pub const AREA: &str = ".ferry-partial";

/// The id of the partial upload of `name` (its octets): 32 hex characters.
pub fn id(name: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(name))
}

/// The data file of the partial upload of `name`, inside [`AREA`].
pub fn part_file(name: &[u8]) -> String {
    format!("{}.part", id(name))
}

/// The record of the partial upload of `name`, inside [`AREA`].
pub fn meta_file(name: &[u8]) -> String {
    format!("{}.meta", id(name))
}

/// A directory, as the file system identifies it (device, inode): the
/// same whatever path or user root leads to it.
pub type DirKey = (u64, u64);

/// The live uploads of one server.
#[derive(Debug, Default)]
pub struct Claims {
    live: Mutex<HashMap<DirKey, HashSet<String>>>,
}

impl Claims {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Claims the upload `id` in `dir`; `None` while another holds it.
    pub fn claim(self: &Arc<Self>, dir: DirKey, id: &str) -> Option<Claim> {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let ids = live.entry(dir).or_default();
        if !ids.insert(id.to_string()) {
            return None;
        }
        Some(Claim { claims: self.clone(), dir, id: id.to_string() })
    }

    pub fn is_claimed(&self, dir: DirKey, id: &str) -> bool {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.get(&dir).is_some_and(|ids| ids.contains(id))
    }

    /// Whether any upload into `dir` is live.
    pub fn any_in(&self, dir: DirKey) -> bool {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.get(&dir).is_some_and(|ids| !ids.is_empty())
    }
}

/// A held claim; dropping it releases the name.
#[derive(Debug)]
pub struct Claim {
    claims: Arc<Claims>,
    dir: DirKey,
    id: String,
}

impl Claim {
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut live = self.claims.live.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ids) = live.get_mut(&self.dir) {
            ids.remove(&self.id);
            if ids.is_empty() {
                live.remove(&self.dir);
            }
        }
    }
}

/// The `<id>.meta` record of a partial upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The final name (in `octets`' string form).
    pub name: String,
    /// Who uploaded it last.
    pub user: String,
    /// The size ALLO announced, if any.
    #[serde(default)]
    pub size: Option<u64>,
    /// Byte ranges on disk (synced before this record was written),
    /// end-exclusive, in file offsets.
    pub ranges: String,
}

impl Record {
    pub fn held(&self) -> RangeSet {
        RangeSet::parse(&self.ranges).unwrap_or_default()
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_json(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_short_whatever_the_name() {
        assert_eq!(id(&[b'n'; 255]).len(), 32);
        assert_ne!(id(b"a"), id(b"b"));
        assert_eq!(part_file(b"x"), format!("{}.part", id(b"x")));
    }

    #[test]
    fn a_claim_excludes_others_until_dropped() {
        let claims = Claims::new();
        let a = claims.claim((1, 2), "x").unwrap();
        assert!(claims.claim((1, 2), "x").is_none());
        assert!(claims.claim((1, 3), "x").is_some(), "another directory");
        assert!(claims.is_claimed((1, 2), "x") && claims.any_in((1, 2)));
        drop(a);
        assert!(!claims.any_in((1, 2)));
        assert!(claims.claim((1, 2), "x").is_some());
    }

    #[test]
    fn records_round_trip() {
        let r = Record { name: "f".into(), user: "alice".into(), size: Some(9), ranges: "0-4".into() };
        assert_eq!(Record::from_json(&r.to_json()), Some(r.clone()));
        assert_eq!(r.held().to_string(), "0-4");
        assert_eq!(Record::from_json(b"{\"name\":\"f\",\"user\":\"u\",\"ranges\":\"\"}").unwrap().size, None);
    }
}
