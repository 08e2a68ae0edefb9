//! Faults (issue 7): the server SIGKILLed during a 4-stream upload, the
//! client killed during a 4-stream download, the link cut for 10 s, the
//! receiving disk full. Each ends with the file complete and its checksum
//! equal, or with a clear error — and never with a partial file under the
//! final name, which a watcher polls throughout. (`resume.rs` checks how
//! much a resumed copy moves in more detail.)

mod support;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

const SIZE: u64 = 64 << 20;

/// Watches `path` until stopped: whenever a file is there under its final
/// name, it must be complete (`size` bytes). Returns how often it looked.
struct FinalNameWatch {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<u64, String>>,
}

impl FinalNameWatch {
    fn start(path: PathBuf, size: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut looks = 0u64;
            while !flag.load(Ordering::Relaxed) {
                if let Ok(md) = std::fs::metadata(&path) {
                    if md.len() != size {
                        return Err(format!("{} held {} of {size} bytes", path.display(), md.len()));
                    }
                }
                looks += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(looks)
        });
        Self { stop, thread }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let looks = self.thread.join().unwrap().unwrap_or_else(|e| panic!("partial file under the final name: {e}"));
        assert!(looks > 0, "the watcher never looked");
        looks
    }
}

fn cp(state: &Path, args: &[&str]) -> (bool, String, String) {
    ferry_with(args, Command::new(ferry_bin()).arg("cp").env("FERRY_STATE_DIR", state))
}

/// Bytes of the restarted transfers of `path` in the server's log.
fn restarted(server: &FerryServer, path: &str) -> Vec<u64> {
    server.transfers(path).iter().filter(|t| t["restart"] == true).filter_map(|t| t["bytes"].as_u64()).collect()
}

#[test]
fn server_killed_during_a_four_stream_upload_resumes_after_restart() {
    let mut server = FerryServer::start_with(&["--anonymous", "read", "--marker-interval", "1"]);
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let src = local.path().join("big.bin");
    random_file(&src, SIZE, 81);
    let url = server.url(ALICE, "/big.bin");
    let watch = FinalNameWatch::start(server.path("big.bin"), SIZE);
    // No retries within this run: it must fail when the server dies, and
    // the next run resume.
    let mut child = Command::new(ferry_bin())
        .args(["cp", "-q", "-p", "4", "--max-rate", "16M", "--retries", "0", src.to_str().unwrap(), &url])
        .env("FERRY_STATE_DIR", state.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let partial = server.partial("big.bin");
    upload_under_way(&server, state.path(), &mut child, "the server was killed");
    server.kill_and_restart();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "the copy cannot have finished through a killed server");
    println!("first run: {}", String::from_utf8_lossy(&out.stderr).trim());
    assert!(!server.path("big.bin").exists(), "no file under the final name after the kill");
    // The same command again, on the restarted server (same root, port).
    let (ok, _, err) = cp(state.path(), &["-q", "-p", "4", "--verify", src.to_str().unwrap(), &url]);
    assert!(ok, "{err}");
    watch.finish();
    assert_eq!(sha256_file(&server.path("big.bin")), sha256_file(&src));
    let resumed = restarted(&server, "/big.bin");
    assert_eq!(resumed.len(), 1, "{:?}", server.transfers("/big.bin"));
    assert!(resumed[0] <= SIZE - SIZE / 4, "the resumed upload moved {} of {SIZE} bytes", resumed[0]);
    assert!(!partial.exists());
}

#[test]
fn client_killed_during_a_four_stream_download_resumes() {
    // resume.rs covers the resume itself; this adds the watch on the final
    // name during both runs.
    let server = FerryServer::start();
    random_file(&server.path("big.bin"), SIZE, 86);
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let dst = local.path().join("big.bin");
    let url = server.url(ALICE, "/big.bin");
    let watch = FinalNameWatch::start(dst.clone(), SIZE);
    let mut child = Command::new(ferry_bin())
        .args(["cp", "-q", "-p", "4", "--max-rate", "16M", &url, dst.to_str().unwrap()])
        .env("FERRY_STATE_DIR", state.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    // Until the client has recorded some ranges, a second more.
    while std::fs::read_dir(state.path()).unwrap().count() == 0 {
        assert!(Instant::now() < deadline, "no restart record appeared");
        assert!(child.try_wait().unwrap().is_none(), "the download ended before it could be killed");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!dst.exists(), "no file under the final name after the kill");
    let (ok, out, err) = cp(state.path(), &["--json", "-p", "4", &url, dst.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("\"resumed\":1"), "{out}");
    watch.finish();
    assert_eq!(sha256_file(&dst), sha256_file(&server.path("big.bin")));
    let resumed = restarted(&server, "/big.bin");
    assert_eq!(resumed.len(), 1, "{:?}", server.transfers("/big.bin"));
    assert!(resumed[0] < SIZE, "the resumed download moved {} of {SIZE} bytes", resumed[0]);
}

/// `n` consecutive ports free on both 127.0.0.1 and 127.0.0.2.
fn free_port_range(n: u16) -> u16 {
    for _ in 0..200 {
        let base = 20000 + (rand::random::<u16>() % 30000);
        let ok = (base..base + n).all(|p| {
            std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()
                && std::net::TcpListener::bind(("127.0.0.2", p)).is_ok()
        });
        if ok {
            return base;
        }
    }
    panic!("no free port range");
}

#[test]
fn link_cut_for_ten_seconds_then_the_copy_finishes() {
    link_cut(false);
}

#[test]
fn link_cut_for_ten_seconds_with_connections_lost_then_the_copy_resumes() {
    link_cut(true);
}

/// Cuts the link mid-upload for 10 s; with `reset`, the connections that
/// crossed it are lost when it comes back (a NAT or firewall forgot them),
/// so the copy must reconnect and resume from its restart markers.
fn link_cut(reset: bool) {
    // ferry-wan (crates/wan) emulates delay, rate and loss but cannot cut a
    // link; a loopback proxy that stops forwarding does. The server's
    // passive ports are proxied at the same numbers on 127.0.0.2, where
    // the client connects, so control and data both cross the cut.
    let base = free_port_range(16);
    let range = format!("{base}-{}", base + 15);
    let server = FerryServer::start_with(&["--passive-ports", &range, "--marker-interval", "1"]);
    let mut pairs = vec![("127.0.0.2:0".parse().unwrap(), server.addr)];
    let ctl = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    pairs[0].0 = ctl.local_addr().unwrap();
    drop(ctl);
    for p in base..base + 16 {
        pairs.push((format!("127.0.0.2:{p}").parse().unwrap(), format!("127.0.0.1:{p}").parse().unwrap()));
    }
    let proxy = CutProxy::start(&pairs).unwrap();
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let src = local.path().join("big.bin");
    random_file(&src, SIZE, 82);
    let url = format!("ftp://{}:{}@{}/big.bin", ALICE.0, ALICE.1, pairs[0].0);
    let watch = FinalNameWatch::start(server.path("big.bin"), SIZE);
    let mut child = Command::new(ferry_bin())
        .args(["cp", "-q", "-p", "4", "--max-rate", "16M", "--timeout", "5", "--retries", "10", "--verify"])
        .args([src.to_str().unwrap(), &url])
        .env("FERRY_STATE_DIR", state.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let partial = server.partial("big.bin");
    upload_under_way(&server, state.path(), &mut child, "the cut");
    proxy.set_cut(true);
    let cut_at = std::fs::metadata(&partial).map_or(0, |m| m.len());
    std::thread::sleep(Duration::from_secs(10));
    if reset {
        proxy.reset_all();
    }
    proxy.set_cut(false);
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "the copy did not finish after the link came back");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "the copy failed after the cut: {err}");
    watch.finish();
    let transfers = server.transfers("/big.bin");
    println!("cut at {cut_at} bytes; stderr: {err}; transfers: {transfers:?}");
    assert_eq!(sha256_file(&server.path("big.bin")), sha256_file(&src));
    if reset {
        // The lost attempt failed; a later one resumed with what was missing.
        let resumed: Vec<_> = transfers.iter().filter(|t| t["restart"] == true && t["status"] == "complete").collect();
        assert_eq!(resumed.len(), 1, "{transfers:?}");
        assert!(resumed[0]["bytes"].as_u64().unwrap() < SIZE, "{transfers:?}");
    }
    drop(proxy);
}

#[test]
fn disk_full_on_the_server_fails_clearly_and_leaves_no_final_file() {
    let Some(fs) = SmallTmpfs::mount("8m") else { return };
    let server = FerryServer::start_in(tempfile::tempdir_in(fs.path()).unwrap(), &[], &["--anonymous", "read"]);
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let src = local.path().join("big.bin");
    random_file(&src, 16 << 20, 83);
    for parallel in ["1", "4"] {
        let watch = FinalNameWatch::start(server.path("big.bin"), 16 << 20);
        let (ok, _, err) = cp(
            state.path(),
            &["-q", "-p", parallel, "--retries", "1", src.to_str().unwrap(), &server.url(ALICE, "/big.bin")],
        );
        watch.finish();
        println!("-p {parallel}: {}", err.trim());
        assert!(!ok, "an upload larger than the disk succeeded");
        assert!(err.contains("552") || err.contains("452"), "no disk-full reply surfaced: {err}");
        assert!(err.contains("No space left"), "{err}");
        assert!(!server.path("big.bin").exists(), "a partial file under the final name");
        // The server still serves, and a file that fits goes through.
        let small = local.path().join("small.bin");
        random_file(&small, 64 << 10, 84);
        std::fs::remove_file(server.partial("big.bin")).ok();
        let (ok, _, err) = cp(state.path(), &["-q", small.to_str().unwrap(), &server.url(ALICE, "/small.bin")]);
        assert!(ok, "{err}");
        assert_eq!(sha256_file(&server.path("small.bin")), sha256_file(&small));
    }
}

/// A server whose root is on an 8 MiB tmpfs (the mount goes after the
/// server: locals drop in reverse).
fn server_on_a_small_disk() -> Option<(SmallTmpfs, FerryServer)> {
    let fs = SmallTmpfs::mount("8m")?;
    let server = FerryServer::start_in(tempfile::tempdir_in(fs.path()).unwrap(), &[], &["--anonymous", "read"]);
    Some((fs, server))
}

/// `n` files of 3 MiB in `dir`.
fn three_mib_files(dir: &Path, n: u64, seed: u64) {
    for i in 0..n {
        random_file(&dir.join(format!("f{i}.bin")), 3 << 20, seed + i);
    }
}

/// How many of `tree`'s files are on the server under `dst`, each checked
/// byte for byte (none may be short under its name).
fn arrived_whole(server: &FerryServer, tree: &Path, dst: &str) -> usize {
    let mut arrived = 0;
    for e in std::fs::read_dir(tree).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let there = server.path(&format!("{dst}/{name}"));
        if there.exists() {
            assert_eq!(sha256_file(&there), sha256_file(&tree.join(&name)), "{dst}/{name} short under its name");
            arrived += 1;
        }
    }
    arrived
}

/// A tree upload larger than the server's disk: the streamed line is
/// refused before its first byte (its unreserved files claim their room
/// together), the files go one by one, those that fit arrive whole and
/// the rest fail clearly, none short under its name.
#[test]
fn disk_full_during_a_tree_upload_fails_the_files_that_do_not_fit() {
    let Some((_fs, server)) = server_on_a_small_disk() else { return };
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    three_mib_files(&tree, 4, 86);
    let (ok, out, err) =
        cp(state.path(), &["-r", "--json", "--retries", "1", tree.to_str().unwrap(), &server.url(ALICE, "/up")]);
    println!("{}\n{}", out.trim(), err.trim());
    assert!(!ok, "a tree larger than the disk was copied");
    assert!(err.contains("No space left"), "no disk-full reply surfaced: {err}");
    let arrived = arrived_whole(&server, &tree, "up/tree");
    assert!((1..4).contains(&arrived), "{arrived} of 4 files arrived on an 8 MiB disk");
}

/// Two clients upload a tree each (6 MiB) to the same 8 MiB disk at once.
/// Each tree fits alone and not both: the first line's claim keeps the
/// second line, and the second client's files one by one, off its room,
/// so one tree arrives whole and the other fails clearly. Lines that only
/// checked the free space both started here, and both trees failed at
/// the write that found the disk full (this test failed so, three runs of
/// three).
#[test]
fn two_tree_uploads_racing_for_the_last_room_leave_one_whole() {
    let Some((_fs, server)) = server_on_a_small_disk() else { return };
    let local = tempfile::tempdir().unwrap();
    let copies: Vec<_> = ["a", "b"]
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let tree = local.path().join(name);
            three_mib_files(&tree, 2, 90 + 2 * k as u64);
            let url = server.url(ALICE, "/up");
            std::thread::spawn(move || {
                let state = tempfile::tempdir().unwrap();
                // At 6 MB/s each line runs about a second, so the two overlap.
                let args = ["-q", "-r", "--retries", "1", "--max-rate", "6M", tree.to_str().unwrap(), &url];
                let run = cp(state.path(), &args);
                (tree, run)
            })
        })
        .collect();
    let mut whole = 0;
    for c in copies {
        let (tree, (ok, _, err)) = c.join().unwrap();
        let name = tree.file_name().unwrap().to_str().unwrap().to_string();
        let arrived = arrived_whole(&server, &tree, &format!("up/{name}"));
        println!("{name}: ok {ok}, {arrived} files; {}", err.trim());
        if ok {
            assert_eq!(arrived, 2, "{name} succeeded without its files");
            whole += 1;
        } else {
            assert!(err.contains("No space left"), "{name} failed without a disk-full reply: {err}");
        }
    }
    assert_eq!(whole, 1, "one tree of two fits");
}

#[test]
fn disk_full_on_the_client_fails_clearly_and_leaves_no_final_file() {
    let Some(fs) = SmallTmpfs::mount("8m") else { return };
    let server = FerryServer::start();
    random_file(&server.path("big.bin"), 16 << 20, 85);
    let state = tempfile::tempdir().unwrap();
    let dst = fs.path().join("big.bin");
    for parallel in ["1", "4"] {
        let watch = FinalNameWatch::start(dst.clone(), 16 << 20);
        let (ok, _, err) = cp(
            state.path(),
            &["-q", "-p", parallel, "--retries", "1", &server.url(ALICE, "/big.bin"), dst.to_str().unwrap()],
        );
        watch.finish();
        println!("-p {parallel}: {}", err.trim());
        assert!(!ok, "a download larger than the disk succeeded");
        assert!(err.to_lowercase().contains("no space left"), "{err}");
        assert!(!dst.exists(), "a partial file under the final name");
        for e in std::fs::read_dir(fs.path()).unwrap() {
            std::fs::remove_file(e.unwrap().path()).ok();
        }
    }
}

/// Waits until a `ferry cp` upload of big.bin is a quarter done on the
/// server's disk and has a restart record on the client's (the server's
/// 111 markers, every second), then one more marker interval, so a fault
/// injected now leaves markers to resume from.
fn upload_under_way(server: &FerryServer, state: &Path, child: &mut std::process::Child, before: &str) {
    let partial = server.partial("big.bin");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&partial).map_or(0, |m| m.len()) < SIZE / 4
        || std::fs::read_dir(state).unwrap().count() == 0
    {
        assert!(Instant::now() < deadline, "the upload did not get going");
        assert!(child.try_wait().unwrap().is_none(), "the upload ended before {before}");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1200));
}
