//! `ferry cp -r` as a daily tool (issue 13): a re-run lands on the same
//! files in every direction, an interrupted tree resumes file by file,
//! symbolic links stay inside the tree, times and modes are kept, failures
//! are listed while the rest arrives, `rm -r` guards the root, and the
//! flags rclone and globus-url-copy users type.

mod support;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

fn small_tree(base: &Path) -> PathBuf {
    let tree = base.join("tree");
    random_file(&tree.join("a.bin"), 1000, 1);
    random_file(&tree.join("sub/b.bin"), 70_000, 2);
    random_file(&tree.join("sub/deeper/c.bin"), 0, 3);
    tree
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

#[test]
fn a_rerun_lands_on_the_same_files_in_every_direction() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = small_tree(local.path());
    let want = tree_digest(&tree);
    let contents = format!("{}/", tree.display());
    for round in 0..2 {
        // `tree` lands in DST/tree, `tree/` fills DST: local to server...
        let (ok, out, err) = ferry(&["cp", "-r", "--json", tree.to_str().unwrap(), &server.url(ALICE, "/up1")]);
        assert!(ok, "{err}");
        if round == 1 {
            assert_eq!(json(&out)["skipped"], 3, "the re-run skips what is there: {out}");
            assert_eq!(json(&out)["files"], 0, "{out}");
        }
        let (ok, _, err) = ferry(&["cp", "-q", "-r", &contents, &server.url(ALICE, "/up2")]);
        assert!(ok, "{err}");
        // ...server to local, with and without the slash...
        let run42 = local.path().join("run42");
        let (ok, _, err) = ferry(&["cp", "-q", "-r", &server.url(ALICE, "/up1/tree/"), run42.to_str().unwrap()]);
        assert!(ok, "{err}");
        let dl = local.path().join("dl");
        let (ok, _, err) = ferry(&["cp", "-q", "-r", &server.url(ALICE, "/up2"), dl.to_str().unwrap()]);
        assert!(ok, "{err}");
        // ...server to server, and local to local.
        let (ok, _, err) = ferry(&["cp", "-q", "-r", &server.url(ALICE, "/up1/tree"), &server.url(ALICE, "/tp")]);
        assert!(ok, "{err}");
        let ll = local.path().join("ll");
        let (ok, _, err) = ferry(&["cp", "-q", "-r", tree.to_str().unwrap(), ll.to_str().unwrap()]);
        assert!(ok, "{err}");
        for (what, dir) in [
            ("local -> server", server.path("up1/tree")),
            ("local/ -> server", server.path("up2")),
            ("server/ -> local", run42.clone()),
            ("server -> local", dl.join("up2")),
            ("server -> server", server.path("tp/tree")),
            ("local -> local", ll.join("tree")),
        ] {
            assert_eq!(tree_digest(&dir), want, "{what}, run {}", round + 1);
        }
    }
}

/// Files of the interrupted-copy tests: big enough to be cut half-way.
const PARTS: u64 = 4;
const PART: u64 = 12 << 20;

/// Bytes the restart records in `state` hold.
fn recorded(state: &Path) -> u64 {
    recorded_bytes(state)
}

/// Starts `ferry cp` rate-limited, waits until a file is complete and
/// another is under way (its restart record holds ranges), then sends
/// SIGINT, as Ctrl-C does.
///
/// At 8 MB/s an uploaded 12 MiB file's first 111 marker (one a second)
/// came at 64 % of it, with 0.5 s to go, and a loaded machine (session 11:
/// 1 run in 20 under three busy loops and a writer) let that file end
/// between the check and the signal, before the next file had a record,
/// so nothing resumed. At 4 MB/s the first record comes at a third of the
/// file with 2 s to go.
fn interrupt_when_under_way(args: &[&str], state: &Path, dst: &Path) {
    let mut child = Command::new(ferry_bin())
        .args(["cp", "-q", "-r", "-p", "2", "--max-rate", "4M"])
        .args(args)
        .env("FERRY_STATE_DIR", state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(child.try_wait().unwrap().is_none(), "the copy ended before it could be interrupted");
        assert!(Instant::now() < deadline, "no file completed with another under way");
        // A file complete under its final name, and ranges of another one
        // recorded (twice in a row: a record is dropped as its file ends).
        let done = walkdir(dst).iter().filter(|p| !p.contains("ferry-part") && p.ends_with(".bin")).count();
        if done >= 1 && recorded(state) > 0 {
            std::thread::sleep(Duration::from_millis(300));
            if recorded(state) > 0 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on the PID of a child we started and have not reaped.
    #[allow(unsafe_code)]
    let r = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(r, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "exit status after Ctrl-C: {err}");
    assert!(err.contains("interrupted"), "{err}");
    // The file under way kept its record: the run that follows resumes it
    // (a failure here is the test's timing, one at the resume the product's).
    assert!(recorded(state) > 0, "no restart record left after the interrupt: {err}");
}

/// Complete transfers of `path` in the server's log, with their byte counts.
fn complete(server: &FerryServer, path: &str, direction: &str) -> Vec<u64> {
    server
        .transfers(path)
        .iter()
        .filter(|t| t["direction"] == direction && t["status"] == "complete")
        .map(|t| t["bytes"].as_u64().unwrap())
        .collect()
}

#[test]
fn an_interrupted_tree_copy_resumes_file_by_file() {
    let server = FerryServer::start_with(&["--anonymous", "read", "--marker-interval", "1"]);
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    for i in 0..PARTS {
        random_file(&tree.join(format!("d{}/f{i}.bin", i % 2)), PART, 100 + i);
    }
    let want = tree_digest(&tree);
    // Upload: Ctrl-C after about half, then the same command again.
    let url = server.url(ALICE, "/up");
    interrupt_when_under_way(&[tree.to_str().unwrap(), &url], state.path(), server.root.path());
    let run = |args: &[&str]| {
        let out = Command::new(ferry_bin())
            .args(["cp", "--json", "-r", "-p", "2"])
            .args(args)
            .env("FERRY_STATE_DIR", state.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        json(&String::from_utf8_lossy(&out.stdout))
    };
    let v = run(&[tree.to_str().unwrap(), &url]);
    assert_eq!(tree_digest(&server.path("up/tree")), want, "no nesting, byte-identical");
    assert!(v["skipped"].as_u64().unwrap() >= 1, "finished files are skipped: {v}");
    assert!(v["resumed"].as_u64().unwrap() >= 1, "the file under way resumes: {v}");
    assert!(!v["resumed_files"].as_array().unwrap().is_empty(), "{v}");
    for i in 0..PARTS {
        let path = format!("/up/tree/d{}/f{i}.bin", i % 2);
        let full = complete(&server, &path, "receive").iter().filter(|b| **b == PART).count();
        assert!(full <= 1, "{path} was sent in full {full} times");
    }
    // Download: the same, into a new directory.
    let back = local.path().join("back");
    std::fs::create_dir_all(&back).unwrap();
    interrupt_when_under_way(&[&server.url(ALICE, "/up/tree/"), back.to_str().unwrap()], state.path(), &back);
    let v = run(&[&server.url(ALICE, "/up/tree/"), back.to_str().unwrap()]);
    assert_eq!(tree_digest(&back), want);
    assert!(v["skipped"].as_u64().unwrap() >= 1 && v["resumed"].as_u64().unwrap() >= 1, "{v}");
    for i in 0..PARTS {
        let path = format!("/up/tree/d{}/f{i}.bin", i % 2);
        let full = complete(&server, &path, "send").iter().filter(|b| **b == PART).count();
        assert!(full <= 1, "{path} was sent in full {full} times");
    }
    // Nothing half-done is left behind, on either side.
    let leftovers: Vec<_> = walkdir(local.path())
        .into_iter()
        .chain(walkdir(server.root.path()))
        .filter(|p| p.contains("ferry-part"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0, "no restart records left");
}

fn walkdir(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten() {
        let p = e.path();
        out.push(p.display().to_string());
        if e.file_type().unwrap().is_dir() {
            out.extend(walkdir(&p));
        }
    }
    out
}

#[test]
fn symbolic_links_stay_inside_the_tree() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let outside = local.path().join("outside");
    random_file(&outside.join("shadow"), 100, 5);
    std::fs::set_permissions(outside.join("shadow"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let tree = local.path().join("tree");
    random_file(&tree.join("data.bin"), 5000, 6);
    std::os::unix::fs::symlink(&outside, tree.join("etc")).unwrap();
    std::os::unix::fs::symlink(outside.join("shadow"), tree.join("shadow-link")).unwrap();
    std::os::unix::fs::symlink(".", tree.join("loop")).unwrap();
    std::os::unix::fs::symlink("data.bin", tree.join("latest")).unwrap();

    // To a server: links are passed over with a warning; exit status 3.
    let (code, _, err) = ferry_bounded(&["cp", "-r", tree.to_str().unwrap(), &server.url(ALICE, "/s")], &[], 60);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("not copied") && err.contains("-L"), "{err}");
    let names: Vec<String> = walkdir(&server.path("s")).into_iter().collect();
    assert!(!names.iter().any(|n| n.contains("shadow") || n.contains("loop")), "{names:?}");
    assert_eq!(tree_digest(&server.path("s/tree")).len(), 1, "{names:?}");

    // -L follows them, and a loop is noticed, not followed for ever.
    let (code, _, err) =
        ferry_bounded(&["cp", "-r", "-L", tree.to_str().unwrap(), &server.url(ALICE, "/follow")], &[], 60);
    assert_eq!(code, 3, "the loop is reported: {err}");
    assert!(err.contains("loop"), "{err}");
    let shadow = server.path("follow/tree/etc/shadow");
    assert_eq!(sha256_file(&shadow), sha256_file(&outside.join("shadow")));
    assert_eq!(std::fs::metadata(&shadow).unwrap().permissions().mode() & 0o777, 0o600, "never wider");
    assert!(!server.path("follow/tree/loop").exists());

    // Locally, links are copied as links.
    let copy = local.path().join("copy");
    let (code, _, err) = ferry_bounded(&["cp", "-r", &format!("{}/", tree.display()), copy.to_str().unwrap()], &[], 60);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_link(copy.join("etc")).unwrap(), outside);
    assert_eq!(std::fs::read_link(copy.join("loop")).unwrap(), Path::new("."));
    assert_eq!(std::fs::read_link(copy.join("latest")).unwrap(), Path::new("data.bin"));
}

#[test]
fn modification_times_and_modes_are_kept_never_widened() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    let files = [
        ("private.bin", 0o600, 1_000_000_000i64),
        ("group.bin", 0o640, 1_200_000_000),
        ("run.sh", 0o755, 1_300_000_000),
    ];
    for (i, (name, mode, t)) in files.iter().enumerate() {
        let p = tree.join(name);
        random_file(&p, 3000 + i as u64, 40 + i as u64);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode)).unwrap();
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(*t as u64)).unwrap();
    }
    let check = |dir: &Path, what: &str| {
        for (name, mode, t) in files {
            let md = std::fs::metadata(dir.join(name)).unwrap_or_else(|e| panic!("{what} {name}: {e}"));
            assert_eq!(md.permissions().mode() & 0o777, mode, "{what}: mode of {name}");
            use std::os::unix::fs::MetadataExt;
            assert_eq!(md.mtime(), t, "{what}: time of {name}");
        }
    };
    let (ok, _, err) = ferry(&["cp", "-q", "-r", &format!("{}/", tree.display()), &server.url(ALICE, "/m")]);
    assert!(ok, "{err}");
    check(&server.path("m"), "upload");
    let back = local.path().join("back");
    let (ok, _, err) = ferry(&["cp", "-q", "-r", &server.url(ALICE, "/m/"), back.to_str().unwrap()]);
    assert!(ok, "{err}");
    check(&back, "download");
    let (ok, _, err) = ferry(&["cp", "-q", "-r", &server.url(ALICE, "/m/"), &server.url(ALICE, "/m3")]);
    assert!(ok, "{err}");
    check(&server.path("m3"), "server to server");
    // Single files too.
    let one = local.path().join("one.bin");
    let (ok, _, err) = ferry(&["cp", "-q", &server.url(ALICE, "/m/private.bin"), one.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(std::fs::metadata(&one).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn failures_are_listed_the_rest_arrives_and_the_exit_status_says_so() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    for n in ["a.bin", "b.bin", "c.bin", "sub/d.bin"] {
        random_file(&tree.join(n), 2000, n.len() as u64);
    }
    // A directory where b.bin should go: that one file cannot be stored.
    std::fs::create_dir_all(server.path("e/tree/b.bin")).unwrap();
    let out = Command::new(ferry_bin())
        .args(["cp", "-r", "--json", tree.to_str().unwrap(), &server.url(ALICE, "/e")])
        .env("FERRY_STATE_DIR", state_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(v["ok"], false, "{v}");
    let failures = v["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{v}");
    assert!(failures[0]["path"].as_str().unwrap().ends_with("b.bin"), "{v}");
    for n in ["a.bin", "c.bin", "sub/d.bin"] {
        assert_eq!(sha256_file(&server.path(&format!("e/tree/{n}"))), sha256_file(&tree.join(n)), "{n}");
    }
    // -q: the failure, nothing else; no colour codes into a pipe even
    // with more logging asked for.
    let out = Command::new(ferry_bin())
        .args(["cp", "-r", "-q", tree.to_str().unwrap(), &server.url(ALICE, "/e")])
        .env("FERRY_STATE_DIR", state_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.lines().all(|l| l.starts_with("ferry: failed:")), "{err}");
    assert!(err.contains("b.bin"), "{err}");
    let out = Command::new(ferry_bin())
        .args(["cp", "-r", tree.to_str().unwrap(), &server.url(ALICE, "/e")])
        .env("FERRY_STATE_DIR", state_dir())
        .env("FERRY_LOG", "info")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("INFO") && !err.contains('\x1b'), "{err}");
    // --fail-fast stops at the first failure.
    std::fs::create_dir_all(server.path("f/tree/a.bin")).unwrap();
    let (ok, _, err) = ferry(&["cp", "-r", "--fail-fast", tree.to_str().unwrap(), &server.url(ALICE, "/f")]);
    assert!(!ok, "{err}");
    assert!(!server.path("f/tree/c.bin").exists() && !server.path("f/tree/sub").exists(), "{err}");
}

#[test]
fn rm_refuses_the_root_and_says_what_it_removed() {
    let server = FerryServer::start();
    random_file(&server.path("keep/x.bin"), 10, 1);
    let (ok, _, err) = ferry(&["rm", "-r", &server.url(ALICE, "/")]);
    assert!(!ok && err.contains("--force"), "{err}");
    let (ok, _, err) = ferry(&["rm", "-r", &server.url(ALICE, "/./")]);
    assert!(!ok && err.contains("--force"), "{err}");
    assert!(server.path("keep/x.bin").exists());
    // A removal that stops half-way lists exactly what is gone. (A hidden
    // partial upload keeps the directory from being removed, unless the
    // server removes abandoned partials with it.)
    random_file(&server.path("d/a.txt"), 10, 2);
    random_file(&server.path("d/b.txt"), 10, 3);
    random_file(&server.path("d/.c.bin.ferry-part"), 10, 4);
    let (ok, _, err) = ferry(&["rm", "-r", &server.url(ALICE, "/d")]);
    assert!(!server.path("d/a.txt").exists() && !server.path("d/b.txt").exists());
    if !ok {
        assert!(err.contains("removed 2 entries before the failure"), "{err}");
        assert!(err.contains("/d/a.txt") && err.contains("/d/b.txt"), "{err}");
    } else {
        assert!(!server.path("d").exists());
    }
    let _ = std::fs::remove_dir_all(server.path("d"));
    let (ok, _, err) = ferry(&["rm", "-r", "--force", &server.url(ALICE, "/")]);
    assert!(ok, "{err}");
    assert!(!server.path("keep").exists() && server.root.path().exists());
}

#[test]
fn include_exclude_files_from_and_dry_run() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    for n in ["a.nc", "b.txt", "sub/c.nc", "scratch/d.nc"] {
        random_file(&tree.join(n), 100, n.len() as u64);
    }
    let contents = format!("{}/", tree.display());
    let (ok, _, err) =
        ferry(&["cp", "-q", "-r", "--include", "*.nc", "--exclude", "scratch/", &contents, &server.url(ALICE, "/f")]);
    assert!(ok, "{err}");
    let got: Vec<String> = tree_digest(&server.path("f")).into_keys().collect();
    assert_eq!(got, ["a.nc", "sub", "sub/c.nc"], "{got:?}");
    // --dry-run: says what it would do, does nothing.
    let (ok, out, err) = ferry(&["cp", "-r", "--dry-run", &contents, &server.url(ALICE, "/f")]);
    assert!(ok, "{err}");
    assert!(out.contains("skip") && out.contains("a.nc") && out.contains("copy") && out.contains("b.txt"), "{out}");
    assert!(!server.path("f/b.txt").exists());
    // --files-from: relative paths under SRC...
    let list = local.path().join("list");
    std::fs::write(&list, "# wanted\nb.txt\nsub/c.nc\n").unwrap();
    let (ok, _, err) =
        ferry(&["cp", "-q", "--files-from", list.to_str().unwrap(), &contents, &server.url(ALICE, "/l")]);
    assert!(ok, "{err}");
    let got: Vec<String> = tree_digest(&server.path("l")).into_keys().collect();
    assert_eq!(got, ["b.txt", "sub", "sub/c.nc"]);
    // ...or SOURCE DESTINATION pairs, as globus-url-copy -f.
    let pairs = local.path().join("pairs");
    let back = local.path().join("pair-back.nc");
    std::fs::write(&pairs, format!("{} {}\n", server.url(ALICE, "/l/sub/c.nc"), back.display())).unwrap();
    let (ok, _, err) = ferry(&["cp", "-q", "--files-from", pairs.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&back), sha256_file(&tree.join("sub/c.nc")));
    // The flags other tools spell differently get their Ferry spelling.
    for (flag, hint) in [
        ("-tcp-bs", "--tcp-bs"),
        ("-vb", "progress"),
        ("--bwlimit", "--max-rate"),
        ("-verify-checksum", "--verify"),
        ("-f", "--files-from"),
    ] {
        let out = Command::new(ferry_bin()).args(["cp", flag, "1M", "a", "b"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(hint), "{flag}: {err}");
    }
}
