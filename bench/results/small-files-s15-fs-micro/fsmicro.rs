//! Session 15 (issue 18): what one small file costs the file system, by
//! the way it is given its final name. Standalone (std only, no cargo):
//!   rustc -O -o /var/tmp/fsmicro fsmicro.rs
//!   /var/tmp/fsmicro DIR WAY THREADS [FILES] [SIZE]
//! WAY: partial (today: `.<name>.ferry-part`, write, fchmod, rename),
//!      tmpfile (O_TMPFILE in the directory, write, fchmod, linkat via /proc/self/fd),
//!      tmpfile-empty (same, linkat AT_EMPTY_PATH: needs CAP_DAC_READ_SEARCH before Linux 6.10),
//!      hidden (partial in DIR/.ferry-partial/, renamed across),
//!      batched (writers create+write partials, one thread renames them in order),
//!      inplace (create the final name and write: Globus's way, no atomicity).
//! Creates FILES (default 20,000) files of SIZE (4096) bytes in the fresh
//! directory DIR/t-<way>-<threads>-<pid>, split over THREADS writers, and
//! prints files/s. The directory is kept: deleting 20,000 inodes makes
//! ext4 without a journal skip the recently deleted ones at the next
//! creates (RECENTCY_MIN, 60 s), which would bill one way for the one
//! before it; run.sh removes them all at the end.
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

const O_TMPFILE: i32 = 0o20200000;
const AT_FDCWD: i32 = -100;
const AT_SYMLINK_FOLLOW: i32 = 0x400;
const AT_EMPTY_PATH: i32 = 0x1000;
extern "C" {
    fn linkat(olddirfd: i32, oldpath: *const i8, newdirfd: i32, newpath: *const i8, flags: i32) -> i32;
}

fn link_tmp(f: &File, target: &Path, empty: bool) -> std::io::Result<()> {
    let t = CString::new(target.as_os_str().as_bytes()).unwrap();
    let r = if empty {
        let e = CString::new("").unwrap();
        unsafe { linkat(f.as_raw_fd(), e.as_ptr(), AT_FDCWD, t.as_ptr(), AT_EMPTY_PATH) }
    } else {
        let p = CString::new(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap();
        unsafe { linkat(AT_FDCWD, p.as_ptr(), AT_FDCWD, t.as_ptr(), AT_SYMLINK_FOLLOW) }
    };
    if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

fn one(dir: &Path, way: &str, i: usize, data: &[u8]) -> std::io::Result<Option<(PathBuf, PathBuf)>> {
    let name = format!("f{i:05}");
    let target = dir.join(&name);
    match way {
        "partial" | "hidden" | "batched" => {
            let part = if way == "hidden" {
                dir.join(".ferry-partial").join(format!("{name}.part"))
            } else {
                dir.join(format!(".{name}.ferry-part"))
            };
            let mut f = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&part)?;
            f.write_all(data)?;
            f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
            if way == "batched" {
                return Ok(Some((part, target)));
            }
            std::fs::rename(&part, &target)?;
        }
        "tmpfile" | "tmpfile-empty" => {
            let mut f = OpenOptions::new().write(true).custom_flags(O_TMPFILE).mode(0o600).open(dir)?;
            f.write_all(data)?;
            f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
            link_tmp(&f, &target, way == "tmpfile-empty")?;
        }
        "inplace" => {
            let mut f = OpenOptions::new().write(true).create(true).truncate(true).mode(0o644).open(&target)?;
            f.write_all(data)?;
        }
        _ => panic!("unknown way {way}"),
    }
    Ok(None)
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let base = PathBuf::from(&a[1]);
    let way = a[2].clone();
    let threads: usize = a[3].parse().unwrap();
    let files: usize = a.get(4).map(|s| s.parse().unwrap()).unwrap_or(20_000);
    let size: usize = a.get(5).map(|s| s.parse().unwrap()).unwrap_or(4096);
    let dir = base.join(format!("t-{way}-{threads}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(".ferry-partial")).unwrap();
    let data = vec![0x5au8; size];
    let (tx, rx) = std::sync::mpsc::channel::<(PathBuf, PathBuf)>();
    let started = Instant::now();
    std::thread::scope(|s| {
        let renamer = (way == "batched").then(|| {
            s.spawn(move || {
                let mut n = 0;
                for (p, t) in rx {
                    std::fs::rename(&p, &t).unwrap();
                    n += 1;
                }
                n
            })
        });
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                let tx = tx.clone();
                let (dir, way, data) = (&dir, &way, &data);
                s.spawn(move || {
                    for i in (k..files).step_by(threads) {
                        if let Some(pt) = one(dir, way, i, data).unwrap() {
                            tx.send(pt).unwrap();
                        }
                    }
                })
            })
            .collect();
        drop(tx);
        for h in hs {
            h.join().unwrap();
        }
        if let Some(r) = renamer {
            assert_eq!(r.join().unwrap(), files);
        }
    });
    let secs = started.elapsed().as_secs_f64();
    let n = std::fs::read_dir(&dir).unwrap().count() - 1;
    assert_eq!(n, files, "files under their final names");
    println!("{way} threads={threads} files={files} size={size} secs={secs:.3} files_per_s={:.0}", files as f64 / secs);
}
