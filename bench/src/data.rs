//! The data sets: single large files and trees of many files, filled with
//! pseudo-random bytes so nothing on the path can compress them, readable
//! by the unprivileged Globus server.
//!
//! A set that already exists with the right sizes is reused, so a second
//! invocation (or `--scenario` re-runs) does not rewrite gigabytes.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{interrupt, BenchError, Result};

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * KIB;
pub const GIB: u64 = 1024 * MIB;

/// xorshift64*: fast enough to fill gigabytes at memory speed, and its
/// output does not compress. Cryptographic quality is not needed.
#[derive(Debug, Clone)]
struct Filler(u64);

impl Filler {
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let v = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

fn io_err<'a>(what: &str, p: &'a Path) -> impl FnOnce(std::io::Error) -> BenchError + 'a {
    let what = what.to_string();
    move |e| BenchError::io(format!("{what} {}", p.display()), e)
}

/// Creates `dir` (and parents) readable by everyone.
pub fn make_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).map_err(io_err("chmod", dir))
}

/// Writes `size` pseudo-random bytes to `path` unless a file of exactly
/// that size is already there.
pub fn ensure_file(path: &Path, size: u64, seed: u64) -> Result<bool> {
    if fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == size) {
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        make_dir(parent)?;
    }
    let tmp = path.with_extension("partial");
    let mut f = File::create(&tmp).map_err(io_err("creating", &tmp))?;
    let mut filler = Filler(seed | 1);
    let mut buf = vec![0u8; (4 * MIB) as usize];
    let mut left = size;
    while left > 0 {
        interrupt::check()?;
        let n = left.min(buf.len() as u64) as usize;
        filler.fill(&mut buf[..n]);
        f.write_all(&buf[..n]).map_err(io_err("writing", &tmp))?;
        left -= n as u64;
    }
    drop(f);
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644)).map_err(io_err("chmod", &tmp))?;
    fs::rename(&tmp, path).map_err(io_err("renaming to", path))?;
    Ok(true)
}

/// A directory of files with given sizes, named `f00001.dat`, ...
#[derive(Debug, Clone)]
pub struct Tree {
    pub dir: PathBuf,
    pub sizes: Vec<u64>,
}

impl Tree {
    pub fn total_bytes(&self) -> u64 {
        self.sizes.iter().sum()
    }

    pub fn files(&self) -> u64 {
        self.sizes.len() as u64
    }

    fn name(i: usize) -> String {
        format!("f{:05}.dat", i + 1)
    }

    /// Creates the tree unless it already holds exactly these files.
    pub fn ensure(&self, seed: u64) -> Result<()> {
        if self.matches() {
            return Ok(());
        }
        if self.dir.exists() {
            fs::remove_dir_all(&self.dir).map_err(io_err("removing", &self.dir))?;
        }
        make_dir(&self.dir)?;
        for (i, &size) in self.sizes.iter().enumerate() {
            ensure_file(&self.dir.join(Self::name(i)), size, seed.wrapping_add(i as u64 * 0x9E37_79B9))?;
        }
        Ok(())
    }

    fn matches(&self) -> bool {
        let Ok(entries) = fs::read_dir(&self.dir) else { return false };
        let count = entries.count();
        count == self.sizes.len()
            && self.sizes.iter().enumerate().all(|(i, &size)| {
                fs::metadata(self.dir.join(Self::name(i))).is_ok_and(|m| m.is_file() && m.len() == size)
            })
    }
}

/// Sizes of `n` files whose sizes follow Zipf's law by rank (the k-th
/// largest is proportional to 1/k^exponent), scaled so their mean is
/// `mean` bytes. Site replication sets are dominated by a few large files
/// and a long tail of small ones; a rank law reproduces that with a fixed,
/// seed-free set, so every run copies exactly the same bytes.
pub fn zipf_sizes(n: usize, exponent: f64, mean: u64) -> Vec<u64> {
    if n == 0 {
        return Vec::new();
    }
    let weights: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(exponent)).collect();
    let sum: f64 = weights.iter().sum();
    let scale = mean as f64 * n as f64 / sum;
    weights.iter().map(|w| ((w * scale).round() as u64).max(1)).collect()
}

/// Sums the sizes of the regular files under `dir` (recursively), to check
/// that a many-files copy delivered everything.
pub fn tree_bytes(dir: &Path) -> Result<(u64, u64)> {
    let mut bytes = 0;
    let mut files = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).map_err(io_err("listing", &d))? {
            let e = e.map_err(io_err("listing", &d))?;
            let m = e.metadata().map_err(io_err("stat", &e.path()))?;
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                bytes += m.len();
                files += 1;
            }
        }
    }
    Ok((bytes, files))
}

/// Removes a destination left by an earlier run (file or directory).
pub fn remove_path(p: &Path) -> Result<()> {
    match fs::symlink_metadata(p) {
        Err(_) => Ok(()),
        Ok(m) if m.is_dir() => fs::remove_dir_all(p).map_err(io_err("removing", p)),
        Ok(_) => fs::remove_file(p).map_err(io_err("removing", p)),
    }
}

/// Touches `bytes` of memory through a tmpfs file in `dir` and frees it
/// again, just before a transfer writes that much into tmpfs. On this VM
/// freed memory is reported to the host (virtio-balloon free page
/// reporting), and the first write to a page the host took back is several
/// times slower: a 4 GiB download into tmpfs took 12 s for whichever client
/// ran first and 4–6 s for the one right after it. Warming makes every row
/// start from the same state, whatever its place in the interleaving.
pub fn warm_tmpfs(dir: &Path, bytes: u64) -> Result<()> {
    fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
    let path = dir.join(".warm");
    // util-linux's fallocate(1): on tmpfs it allocates (and zeroes) the pages.
    let status = std::process::Command::new("fallocate")
        .arg("-l")
        .arg(bytes.to_string())
        .arg(&path)
        .status()
        .map_err(io_err("running fallocate for", &path))?;
    let removed = remove_path(&path);
    if !status.success() {
        return Err(BenchError::output("fallocate", format!("{status} for {}", path.display())));
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_mean_and_shape() {
        let s = zipf_sizes(24, 1.0, 66_000_000);
        assert_eq!(s.len(), 24);
        let mean = s.iter().sum::<u64>() as f64 / 24.0;
        assert!((mean - 66e6).abs() / 66e6 < 0.001, "mean {mean}");
        assert!(s.windows(2).all(|w| w[0] >= w[1]), "sizes fall with rank");
        assert!((s[0] as f64 / s[9] as f64 - 10.0).abs() < 0.01, "k-th is 1/k of the first");
        assert!(zipf_sizes(0, 1.0, 5).is_empty());
    }

    #[test]
    fn files_and_trees_are_reused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a/b.dat");
        assert!(ensure_file(&f, 10_000_001, 7).unwrap());
        assert!(!ensure_file(&f, 10_000_001, 7).unwrap(), "same size: reused");
        assert_eq!(fs::metadata(&f).unwrap().len(), 10_000_001);
        let t = Tree { dir: dir.path().join("t"), sizes: vec![1, 0, 5000] };
        t.ensure(1).unwrap();
        assert_eq!(tree_bytes(&t.dir).unwrap(), (5001, 3));
        fs::write(t.dir.join("extra"), b"x").unwrap();
        assert!(!t.matches());
        t.ensure(1).unwrap();
        assert!(t.matches());
    }

    #[test]
    fn filler_is_not_constant() {
        let mut f = Filler(1);
        let mut b = [0u8; 64];
        f.fill(&mut b);
        assert!(b.iter().filter(|&&x| x == b[0]).count() < 8);
    }
}
