//! CKSM answers, cached per file version.
//!
//! A checksum of a multi-gigabyte file costs seconds of disk reading, and
//! clients ask for the same one repeatedly (globus-url-copy
//! `-verify-checksum`, gfal-sum, a verify after every copy). Entries are
//! keyed by the file's identity and every stamp a write changes — inode,
//! size, mtime and ctime to the nanosecond — so a modified file never
//! returns a stale value.

use ferry_io::checksum::file_checksum_unless;
use ferry_io::root::{fs_error, Root};
use ferry_proto::session::FsError;
use ferry_proto::VirtualPath;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    algorithm: String,
    offset: u64,
    length: Option<u64>,
}

#[derive(Debug)]
pub(crate) struct ChecksumCache {
    entries: Mutex<HashMap<Key, String>>,
    capacity: usize,
}

impl ChecksumCache {
    pub fn new(capacity: usize) -> Self {
        Self { entries: Mutex::new(HashMap::new()), capacity }
    }

    pub fn get_or_compute(
        &self,
        root: &Root,
        path: &VirtualPath,
        algorithm: &str,
        offset: u64,
        length: Option<u64>,
        abandoned: &dyn Fn() -> bool,
    ) -> Result<String, FsError> {
        let (file, _) = root.open_read(path)?;
        let md = file.metadata().map_err(|e| fs_error(&e))?;
        let key = Key {
            dev: md.dev(),
            ino: md.ino(),
            size: md.size(),
            mtime: (md.mtime(), md.mtime_nsec()),
            ctime: (md.ctime(), md.ctime_nsec()),
            algorithm: algorithm.to_ascii_uppercase(),
            offset,
            length,
        };
        if let Some(hit) = self.entries.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(hit.clone());
        }
        let value = file_checksum_unless(&file, algorithm, offset, length, abandoned).map_err(|e| fs_error(&e))?;
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity {
            // Bounded: forget everything rather than track recency; a miss
            // only costs a recomputation.
            entries.clear();
        }
        entries.insert(key, value.clone());
        Ok(value)
    }
}
