//! Trees of many small files (issue 18, the client side): several control
//! sessions (`--concurrency`, `-cc`) in every direction, chosen
//! automatically when not given, never more than a server takes; `--sync`.

mod support;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

/// `dirs` directories of `per_dir` files of `size` bytes.
fn many_files(base: &Path, dirs: usize, per_dir: usize, size: u64) -> PathBuf {
    let tree = base.join("many");
    for d in 0..dirs {
        for f in 0..per_dir {
            random_file(&tree.join(format!("d{d}/f{f:04}.dat")), size, (d * 10_000 + f) as u64);
        }
    }
    tree
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

/// `ferry` with the client's log on (the tests read its decisions) and a
/// deadline.
fn ferry_logged(args: &[&str], secs: u64) -> (i32, String, String) {
    ferry_bounded(args, &[("FERRY_LOG", "ferry_client=info")], secs)
}

#[test]
fn several_sessions_copy_a_tree_in_every_direction() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = many_files(local.path(), 3, 60, 3000);
    let want = tree_digest(&tree);
    // Upload with Globus's spelling, download with Ferry's, third-party
    // with the automatic choice.
    let (code, out, err) =
        ferry_logged(&["cp", "-r", "--json", "-cc", "4", tree.to_str().unwrap(), &server.url(ALICE, "/up")], 60);
    assert_eq!(code, 0, "{err}");
    let j = json(&out);
    assert_eq!(j["files"], 180, "{out}");
    assert_eq!(j["concurrency"]["sessions"], 4, "{out}");
    assert_eq!(tree_digest(&server.path("up/many")), want);

    let back = local.path().join("back");
    let (code, out, err) = ferry_logged(
        &["cp", "-r", "--json", "--concurrency", "3", &server.url(ALICE, "/up/many"), back.to_str().unwrap()],
        60,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["concurrency"]["used"], 3, "{out}");
    assert_eq!(tree_digest(&back.join("many")), want);

    let (code, out, err) =
        ferry_logged(&["cp", "-r", "--json", &server.url(ALICE, "/up/many"), &server.url(ALICE, "/tp")], 60);
    assert_eq!(code, 0, "{err}");
    let j = json(&out);
    let chosen = j["concurrency"]["sessions"].as_u64().unwrap();
    assert!(chosen > 1, "small files on loopback get several sessions: {out}");
    assert!(j["concurrency"]["reason"].as_str().unwrap().contains("small files"), "{out}");
    assert!(err.contains("session(s): small files"), "the choice is in the log: {err}");
    assert_eq!(tree_digest(&server.path("tp/many")), want);

    // A re-run skips everything, with several sessions too.
    let (code, out, err) =
        ferry_logged(&["cp", "-r", "--json", "-cc", "4", tree.to_str().unwrap(), &server.url(ALICE, "/up")], 60);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["skipped"], 180, "{out}");
    assert_eq!(json(&out)["files"], 0, "{out}");
}

#[test]
fn a_server_with_few_sessions_is_not_flooded() {
    // Two sessions in all: the copy's first session and one more.
    let server = FerryServer::start_with(&["--anonymous", "read", "--max-sessions", "2"]);
    let tree = many_files(server.root.path(), 2, 100, 1000);
    let want = tree_digest(&tree);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("dl");
    let (code, out, err) =
        ferry_logged(&["cp", "-r", "--json", "-cc", "6", &server.anon_url("/many"), dst.to_str().unwrap()], 60);
    assert_eq!(code, 0, "{err}");
    let j = json(&out);
    assert_eq!(j["files"], 200, "{out}");
    assert_eq!(j["failures"].as_array().unwrap().len(), 0, "{out}");
    let used = j["concurrency"]["used"].as_u64().unwrap();
    assert!((1..=2).contains(&used), "{out}");
    assert!(err.contains("backing off"), "a 421 is answered with back-off: {err}");
    assert!(err.contains("of 6 sessions"), "and the user is told: {err}");
    assert_eq!(tree_digest(&dst.join("many")), want);
}

#[test]
fn the_per_server_cap_bounds_the_sessions() {
    let server = FerryServer::start();
    let tree = many_files(server.root.path(), 1, 200, 100);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("dl");
    let (code, out, err) = ferry_logged(
        &["cp", "-r", "--json", "-cc", "6", "--max-sessions", "2", &server.anon_url("/many"), dst.to_str().unwrap()],
        60,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["concurrency"]["sessions"], 2, "{out}");
    assert_eq!(tree_digest(&dst.join("many")), tree_digest(&tree));
}

#[test]
fn concurrency_against_the_globus_server() {
    let globus = GlobusServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = many_files(local.path(), 2, 40, 2000);
    for (rel, _) in tree_digest(&tree) {
        let p = tree.join(&rel);
        if p.is_file() {
            globus.put(&format!("src/{rel}"), &p);
        }
    }
    let dst = local.path().join("dl");
    let (code, out, err) =
        ferry_logged(&["cp", "-r", "--json", "-cc", "4", &globus.url("src"), dst.to_str().unwrap()], 120);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["files"], 80, "{out}");
    assert_eq!(tree_digest(&dst.join("src")), tree_digest(&tree));
}

#[test]
fn sync_copies_only_what_differs() {
    let server = FerryServer::start();
    let tree = many_files(server.root.path(), 2, 30, 500);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("dl");
    let src = server.anon_url("/many");
    let (code, out, err) = ferry_logged(&["cp", "-r", "--json", &src, dst.to_str().unwrap()], 60);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["files"], 60, "{out}");
    assert!(err.contains("one syncfs"), "the tree is made durable once: {err}");
    // The same size, other bytes, a newer time: changed at the destination.
    let changed = dst.join("many/d1/f0007.dat");
    random_file(&changed, 500, 999);
    let file = std::fs::File::options().write(true).open(&changed).unwrap();
    file.set_modified(std::time::SystemTime::now() + Duration::from_secs(3600)).unwrap();
    drop(file);
    let run = |extra: &[&str]| {
        let mut args = vec!["cp", "-r", "--json"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[&src, dst.to_str().unwrap()]);
        let (code, out, err) = ferry_logged(&args, 60);
        assert_eq!(code, 0, "{err}");
        json(&out)["files"].as_u64().unwrap()
    };
    // Not older and the same size: a re-run leaves it; so does size alone.
    assert_eq!(run(&[]), 0);
    assert_eq!(run(&["--sync=size"]), 0);
    assert_eq!(run(&["-sync", "-sync-level", "1"]), 0);
    // Checksums differ: copied again, and only that file.
    assert_eq!(run(&["-sync", "-sync-level", "3"]), 1);
    assert_eq!(tree_digest(&dst.join("many")), tree_digest(&tree));
    // A newer destination time differs from the source's: --sync copies it.
    let file = std::fs::File::options().write(true).open(&changed).unwrap();
    file.set_modified(std::time::SystemTime::now() + Duration::from_secs(3600)).unwrap();
    drop(file);
    assert_eq!(run(&["--sync"]), 1);
    assert_eq!(run(&["--sync"]), 0, "times are kept, so a second --sync finds nothing");
    assert_eq!(run(&["--sync=checksum"]), 0);
}

#[test]
fn awkward_names_fail_alone_and_the_rest_arrives() {
    use std::os::unix::ffi::OsStrExt;
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = many_files(local.path(), 2, 20, 700);
    // A name with a line break would end an FTP command early; one that
    // is not UTF-8 travels as its octets.
    random_file(&tree.join("d0/two\nlines"), 10, 1);
    random_file(&tree.join("d0/carriage\rreturn"), 10, 2);
    let latin1 = tree.join(std::ffi::OsStr::from_bytes(b"d1/caf\xe9.txt"));
    random_file(&latin1, 30, 3);
    let (code, out, err) = ferry_logged(&["cp", "-r", "--json", tree.to_str().unwrap(), &server.url(ALICE, "/up")], 60);
    assert_eq!(code, 1, "failures make the exit status non-zero: {err}");
    let j = json(&out);
    assert_eq!(j["files"], 41, "{out}");
    let failures = j["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 2, "{out}");
    assert!(failures.iter().all(|f| f["reason"].as_str().unwrap().contains("line break")), "{out}");
    assert_eq!(err.matches("ferry: failed:").count(), 2, "every failure is listed: {err}");
    assert!(!server.path("up/many/d0/two").exists() && !server.path("up/many/d0/lines").exists());
    assert_eq!(
        std::fs::read(server.root.path().join(std::ffi::OsStr::from_bytes(b"up/many/d1/caf\xe9.txt"))).unwrap(),
        std::fs::read(&latin1).unwrap()
    );
    // The non-UTF-8 name comes back as it was.
    let back = local.path().join("back");
    let (code, _, err) =
        ferry_logged(&["cp", "-r", "-q", &server.url(ALICE, "/up/many/d1"), back.to_str().unwrap()], 60);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(back.join(std::ffi::OsStr::from_bytes(b"d1/caf\xe9.txt"))).unwrap(),
        std::fs::read(&latin1).unwrap()
    );
}

#[test]
fn files_that_vanish_after_the_listing_fail_alone() {
    // Uploads: the walk lists, then the sources go before the copy.
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = many_files(local.path(), 1, 300, 200);
    // A slow first session gives the test time to remove files: the walk
    // is over when the first file arrives.
    let child = Command::new(ferry_bin())
        .args([
            "cp",
            "-r",
            "--json",
            "-cc",
            "2",
            "--pipeline",
            "2",
            "--max-rate",
            "20k",
            tree.to_str().unwrap(),
            &server.url(ALICE, "/up"),
        ])
        .env("FERRY_STATE_DIR", state_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !server.path("up/many/d0").exists() {
        assert!(Instant::now() < deadline, "the copy did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let gone = ["f0150.dat", "f0151.dat", "f0299.dat"];
    for g in gone {
        std::fs::remove_file(tree.join("d0").join(g)).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let j = json(&stdout);
    assert_eq!(j["files"], 297, "{stdout}");
    let failed: Vec<&str> = j["failures"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(failed.len(), 3, "{stdout}");
    for g in gone {
        assert!(failed.iter().any(|p| p.ends_with(g)), "{g} in {failed:?}");
        assert!(stderr.contains(&format!("failed: {}", tree.join("d0").join(g).display())), "{stderr}");
    }
    assert_eq!(tree_digest(&server.path("up/many")), tree_digest(&tree));
}

#[test]
fn a_tree_of_thousands_of_entries_in_bounded_time() {
    // The suite's stand-in for 100,000 entries: 5,000 files in 50
    // directories, empty and tiny, both ways.
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("big");
    for d in 0..50 {
        let dir = tree.join(format!("d{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("{f}")), if f % 2 == 0 { &b""[..] } else { &b"x"[..] }).unwrap();
        }
    }
    let (code, out, err) =
        ferry_logged(&["cp", "-r", "--json", tree.to_str().unwrap(), &server.url(ALICE, "/up")], 240);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["files"], 5000, "{out}");
    let back = local.path().join("back");
    let (code, out, err) =
        ferry_logged(&["cp", "-r", "--json", &server.url(ALICE, "/up/big"), back.to_str().unwrap()], 240);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["files"], 5000, "{out}");
    assert_eq!(tree_digest(&back.join("big")), tree_digest(&tree));
}

#[test]
fn a_tree_is_verified_with_pipelined_checksums() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = many_files(local.path(), 2, 50, 5000);
    let (code, out, err) = ferry_logged(
        &["cp", "-r", "--json", "--verify", "-cc", "2", tree.to_str().unwrap(), &server.url(ALICE, "/up")],
        60,
    );
    assert_eq!(code, 0, "{err}");
    let j = json(&out);
    assert_eq!((j["files"].as_u64(), j["verified"].as_u64()), (Some(100), Some(100)), "{out}");
    // Server to server: both ends' checksums come from the servers.
    let (code, out, err) = ferry_logged(
        &["cp", "-r", "--json", "--verify=MD5", &server.url(ALICE, "/up/many"), &server.url(ALICE, "/tp")],
        60,
    );
    assert_eq!(code, 0, "{err}");
    let j = json(&out);
    assert_eq!((j["verified"].as_u64(), j["checksum"].as_str()), (Some(100), Some("MD5")), "{out}");
    assert_eq!(tree_digest(&server.path("tp/many")), tree_digest(&tree));
}
