//! Issue 12: nothing lost, nothing hung. Uploads that race, uploads cut
//! short, names the partial-file scheme used to break on, and the ways one
//! client could stall or exhaust the server.
//!
//! The `trial_*` tests run a few repetitions of the trials in
//! `scripts/trials-integrity.sh`, which runs them with the full counts
//! (`FERRY_TRIALS=N`) and prints the tallies.

mod support;
use ferry_proto::mode_e::BlockHeader;
use rand::{Rng, SeedableRng};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

/// How many repetitions a trial runs: `FERRY_TRIALS` or the short default.
fn trials(short: usize) -> usize {
    std::env::var("FERRY_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(short)
}

fn rng() -> rand::rngs::StdRng {
    let seed = std::env::var("FERRY_TRIAL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("random seed {seed} (FERRY_TRIAL_SEED)");
    rand::rngs::StdRng::seed_from_u64(seed)
}

/// Waits until the server has logged `n` finished transfers of `path`.
fn wait_for_transfers(server: &FerryServer, path: &str, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = server.transfers(path);
        if t.len() >= n {
            return t;
        }
        assert!(Instant::now() < deadline, "no transfer log line for {path}:\n{}", server.log_text());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every regular file under `dir`, hidden ones and the server's own
/// partial-upload area included.
fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(all_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The next reply that is not a restart (111) or performance (112) marker.
fn final_reply(c: &mut RawControl) -> String {
    loop {
        let r = c.reply();
        if !(r.starts_with("111") || r.starts_with("112")) {
            return r;
        }
    }
}

fn passive(c: &mut RawControl) -> SocketAddr {
    let r = c.cmd("PASV");
    assert!(r.starts_with("227"), "{r}");
    pasv_addr(&r)
}

/// Logs in, sets TYPE I and opens a stream-mode data connection for `cmd`;
/// returns the control connection, the data connection and the reply.
fn stream_command(server: &FerryServer, cmd: &[u8]) -> (RawControl, TcpStream, String) {
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("TYPE I").starts_with("200"));
    let data = TcpStream::connect(passive(&mut c)).unwrap();
    c.send(cmd);
    let r = c.reply();
    (c, data, r)
}

// ---------------------------------------------------------------------------
// 1. Two uploads of one name

#[test]
fn a_second_upload_to_a_name_being_uploaded_gets_450() {
    let server = FerryServer::start();
    let (mut a, mut data_a, r) = stream_command(&server, b"STOR same.bin");
    assert!(r.starts_with("150"), "{r}");
    data_a.write_all(&[b'A'; 1 << 20]).unwrap();
    let (mut b, data_b, r) = stream_command(&server, b"STOR same.bin");
    assert!(r.starts_with("450") && r.contains("in progress"), "the second upload got {r}");
    drop(data_b);
    // APPE and ESTO are uploads too.
    let (_, _, r) = stream_command(&server, b"APPE same.bin");
    assert!(r.starts_with("450"), "{r}");
    // DELE of a name being uploaded does not pull the partial away.
    assert!(b.cmd("DELE same.bin").starts_with("450"));
    data_a.write_all(&[b'A'; 1 << 20]).unwrap();
    drop(data_a);
    let r = a.reply();
    assert!(r.starts_with("226"), "{r}");
    assert_eq!(std::fs::read(server.path("same.bin")).unwrap(), vec![b'A'; 2 << 20]);
    // Once the first is done, the name is free again.
    let (mut b, mut data_b, r) = stream_command(&server, b"STOR same.bin");
    assert!(r.starts_with("150"), "{r}");
    data_b.write_all(b"B").unwrap();
    drop(data_b);
    assert!(b.reply().starts_with("226"));
    assert_eq!(std::fs::read(server.path("same.bin")).unwrap(), b"B");
}

#[test]
fn an_abandoned_partial_is_taken_over_and_resumed() {
    let server = FerryServer::start();
    let (a, mut data, r) = stream_command(&server, b"STOR taken.bin");
    assert!(r.starts_with("150"), "{r}");
    data.write_all(&[7u8; 3 << 20]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.partial("taken.bin").metadata().map_or(0, |m| m.len()) < 1 << 20 {
        assert!(Instant::now() < deadline, "nothing arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The uploader dies: control connection first, then data.
    drop(a);
    drop(data);
    wait_for_transfers(&server, "/taken.bin", 1);
    assert!(!server.path("taken.bin").exists());
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    // What the server read before it noticed the client had gone.
    let r = c.cmd("SITE PARTIAL taken.bin");
    assert!(r.starts_with("213 Ranges=0-") && r.contains(";XXH128="), "{r}");
    let held: usize = r["213 Ranges=0-".len()..].split(';').next().unwrap().parse().unwrap();
    assert!(held > 0 && held <= 3 << 20, "{r}");
    assert!(c.cmd("TYPE I").starts_with("200"));
    let mut data = TcpStream::connect(passive(&mut c)).unwrap();
    assert!(c.cmd(&format!("REST {held}")).starts_with("350"));
    let r = c.cmd("STOR taken.bin");
    assert!(r.starts_with("150"), "{r}");
    data.write_all(&vec![8u8; (4 << 20) - held]).unwrap();
    drop(data);
    assert!(c.reply().starts_with("226"));
    let got = std::fs::read(server.path("taken.bin")).unwrap();
    assert_eq!(got.len(), 4 << 20);
    assert!(got[..held].iter().all(|b| *b == 7) && got[held..].iter().all(|b| *b == 8));
    assert_eq!(all_files(server.root.path()), vec![server.path("taken.bin")], "nothing else is left behind");
}

/// How the first uploader leaves its upload.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Departure {
    /// Control connection closed after the 150, no data connection ever.
    BeforeData,
    /// The same in MODE E, what `ferry cp -r` leaves behind when it drops
    /// a pipelined batch's session after a failed file.
    BeforeDataInModeE,
    /// Control connection closed with the data connection open and idle.
    MidTransfer,
    /// As `BeforeData`, with more commands pipelined behind the STOR than
    /// the server queues: it reads no further commands (nor the hang-up)
    /// until the transfer ends.
    BehindQueuedCommands,
    /// As `BehindQueuedCommands` in MODE E with performance markers every
    /// second: the server's next marker write fails on the closed connection.
    BehindQueuedCommandsWithMarkers,
}

/// The first uploader of a name hangs up while its upload waits for (or
/// receives) data; a new session must be able to upload the name as soon
/// as the server notices, not after the data timeout, and the partial
/// stays for a resume. Found in `ferry cp -r` on a loaded machine: a
/// pipelined batch whose session the client dropped after a failed file
/// kept the next file's name claimed until the data timeout, so the one-by-
/// one retry got 450 three times.
fn hang_up_during_upload(how: Departure) {
    // A data timeout far beyond the bound below: only noticing the hang-up
    // frees the name in time.
    let server = FerryServer::start_with(&["--anonymous", "read", "--data-timeout", "300"]);
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("TYPE I").starts_with("200"));
    if matches!(how, Departure::BeforeDataInModeE | Departure::BehindQueuedCommandsWithMarkers) {
        assert!(c.cmd("MODE E").starts_with("200"));
    }
    if how == Departure::BehindQueuedCommandsWithMarkers {
        assert!(c.cmd("TREV PERF 1").starts_with("200"));
    }
    let addr = passive(&mut c);
    let mut data = (how == Departure::MidTransfer).then(|| TcpStream::connect(addr).unwrap());
    let r = c.cmd("STOR left.bin");
    assert!(r.starts_with("150") || r.starts_with("125"), "{r}");
    if let Some(d) = &mut data {
        d.write_all(&[7u8; 1 << 20]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while server.partial("left.bin").metadata().map_or(0, |m| m.len()) < 1 << 20 {
            assert!(Instant::now() < deadline, "nothing arrived");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // While its uploader is there, the name stays claimed.
    let (_, _, r) = stream_command(&server, b"STOR left.bin");
    assert!(r.starts_with("450"), "a second upload beside a live one got {r}");
    if matches!(how, Departure::BehindQueuedCommands | Departure::BehindQueuedCommandsWithMarkers) {
        c.send("TYPE I\r\n".repeat(600).trim_end().as_bytes());
    }
    drop(c);
    let gone = Instant::now();
    let mut probe = RawControl::connect(server.addr);
    probe.login(ALICE);
    let r = loop {
        let r = probe.cmd("SITE PARTIAL left.bin");
        if !r.starts_with("450") {
            break r;
        }
        assert!(
            gone.elapsed() < Duration::from_secs(30),
            "{how:?}: the name is still claimed {:?} after its uploader hung up:\n{}",
            gone.elapsed(),
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    println!("{how:?}: the name was free {:?} after the hang-up", gone.elapsed());
    if how == Departure::MidTransfer {
        // What arrived is kept for a resume.
        assert!(r.starts_with("213 Ranges=0-"), "{r}");
    }
    let t = wait_for_transfers(&server, "/left.bin", 1);
    assert!(t[0]["status"].as_str().unwrap().starts_with("failed"), "{t:?}");
    let (mut c, mut d, r) = stream_command(&server, b"STOR left.bin");
    assert!(r.starts_with("150"), "{r}");
    d.write_all(b"new").unwrap();
    drop(d);
    assert!(final_reply(&mut c).starts_with("226"));
    assert_eq!(std::fs::read(server.path("left.bin")).unwrap(), b"new");
    drop(data);
}

#[test]
fn a_hang_up_before_the_data_connection_frees_the_name() {
    hang_up_during_upload(Departure::BeforeData);
}

#[test]
fn a_hang_up_before_the_data_connections_in_mode_e_frees_the_name() {
    hang_up_during_upload(Departure::BeforeDataInModeE);
}

#[test]
fn a_hang_up_mid_transfer_frees_the_name_and_keeps_the_partial() {
    hang_up_during_upload(Departure::MidTransfer);
}

#[test]
fn a_hang_up_behind_queued_commands_frees_the_name() {
    hang_up_during_upload(Departure::BehindQueuedCommands);
}

#[test]
fn a_hang_up_seen_by_a_failed_marker_write_frees_the_name() {
    hang_up_during_upload(Departure::BehindQueuedCommandsWithMarkers);
}

/// Trial: pairs of `ferry cp -p 4` uploads of different files to one name
/// at the same moment, and a retry of the same file killed after 0.5 s
/// beside a copy that goes on. No final file may be a mixture, and every
/// upload reported successful must match what is on disk when it ended.
#[test]
// Both children are waited for: the loop polls until each has exited.
#[allow(clippy::zombie_processes)]
fn trial_concurrent_uploads_to_one_name() {
    let n = trials(2);
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let size = 24u64 << 20;
    let (a, b) = (local.path().join("a.bin"), local.path().join("b.bin"));
    random_file(&a, size, 1201);
    random_file(&b, size, 1202);
    let (sha_a, sha_b) = (sha256_file(&a), sha256_file(&b));
    let mut rng = rng();
    let (mut corrupted, mut successes, mut mismatched) = (0, 0, 0);
    for i in 0..n {
        let url = server.url(ALICE, &format!("/pair-{i}.bin"));
        let state = tempfile::tempdir().unwrap();
        let cp = |src: &Path, state: &Path| {
            Command::new(ferry_bin())
                .args(["cp", "-q", "-p", "4", "--max-rate", "48M", "--retries", "8"])
                .arg(src)
                .arg(&url)
                .env("FERRY_STATE_DIR", state)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        // Different files, same name, same moment.
        let (sa, sb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut pa = cp(&a, sa.path());
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..50)));
        let mut pb = cp(&b, sb.path());
        // Which ended last: uploads to one name are serialised, so the
        // last to report success is what the file must hold.
        let (mut ra, mut rb, mut last) = (None, None, None);
        while ra.is_none() || rb.is_none() {
            if ra.is_none() {
                if let Some(st) = pa.try_wait().unwrap() {
                    ra = Some(st.success());
                    last = Some((st.success(), &sha_a));
                }
            }
            if rb.is_none() {
                if let Some(st) = pb.try_wait().unwrap() {
                    rb = Some(st.success());
                    last = Some((st.success(), &sha_b));
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        let path = server.path(&format!("pair-{i}.bin"));
        let got = if path.exists() { sha256_file(&path) } else { String::new() };
        if got != sha_a && got != sha_b {
            corrupted += 1;
        }
        let last_ok = match last {
            Some((true, sha)) => Some(sha),
            // The last to end failed: the earlier success must be there.
            _ if ra => Some(&sha_a),
            _ if rb => Some(&sha_b),
            _ => None,
        };
        successes += ra as usize + rb as usize;
        if last_ok.is_some_and(|s| *s != got) {
            println!("pair {i}: a {ra}, b {rb}, the file is {}", if got == sha_a { "a" } else { "b" });
            mismatched += 1;
        }
        // The same file again, started while the first runs and killed
        // after half a second; the survivor must leave a whole file.
        let same = server.url(ALICE, &format!("/same-{i}.bin"));
        let mut keep = Command::new(ferry_bin())
            .args(["cp", "-q", "-p", "4", "--max-rate", "48M", "--retries", "8"])
            .arg(&a)
            .arg(&same)
            .env("FERRY_STATE_DIR", state.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let other_state = tempfile::tempdir().unwrap();
        let mut killed = Command::new(ferry_bin())
            .args(["cp", "-q", "-p", "4", "--max-rate", "48M"])
            .arg(&a)
            .arg(&same)
            .env("FERRY_STATE_DIR", other_state.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let _ = killed.kill();
        let _ = killed.wait();
        let ok = keep.wait().unwrap().success();
        let p = server.path(&format!("same-{i}.bin"));
        let whole = p.exists() && sha256_file(&p) == sha_a;
        successes += ok as usize;
        if ok && !whole {
            println!("retry {i}: the survivor succeeded but the file is not whole");
            mismatched += 1;
        }
        if p.exists() && !whole {
            corrupted += 1;
        }
    }
    println!(
        "TRIAL concurrent uploads: {n} pairs + {n} killed retries: {corrupted} corrupted final files, {mismatched} \
         successes not matching the disk, {successes} successes"
    );
    assert_eq!((corrupted, mismatched), (0, 0));
}

// ---------------------------------------------------------------------------
// 2. Stream-mode uploads killed mid-way

/// Sends random data at about 6.4 MB/s until it is killed.
const PACED_UPLOADER: &str = r#"
import ftplib, os, sys, time
ftp = ftplib.FTP()
ftp.connect(sys.argv[1], int(sys.argv[2]), timeout=20)
ftp.login(sys.argv[3], sys.argv[4])
ftp.voidcmd("TYPE I")
if sys.argv[6] == "allo":
    ftp.sendcmd("ALLO %d" % (64 << 20))
conn = ftp.transfercmd("STOR " + sys.argv[5])
sys.stdout.write("sending\n")
sys.stdout.flush()
chunk = os.urandom(65536)
while True:
    conn.sendall(chunk)
    time.sleep(0.01)
"#;

/// Trial: paced stream-mode uploaders (Python's ftplib, with and without
/// ALLO, and curl) SIGKILLed at a random moment. None may leave a file
/// under its final name.
#[test]
fn trial_killed_paced_stream_uploads() {
    let python = require("python3");
    let curl = require("curl");
    let n = trials(8);
    let mut server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, 64 << 20, 1203);
    let mut rng = rng();
    let mut committed = 0;
    for i in 0..n {
        let name = format!("paced-{i}.bin");
        // How many uploads had begun before this client: curl has no
        // "ready" line, so the trial waits for its upload's disk plan.
        let started = server.log_text().matches("\"disk plan\"").count();
        let mut child = if i % 5 == 4 {
            Command::new(&curl)
                .args(["-s", "-T"])
                .arg(&src)
                .args(["--limit-rate", "5M", &server.url(ALICE, &format!("/{name}"))])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        } else {
            let allo = if i % 4 == 3 { "allo" } else { "no-allo" };
            let mut c = Command::new(&python)
                .args(["-c", PACED_UPLOADER, &server.addr.ip().to_string(), &server.addr.port().to_string()])
                .args([ALICE.0, ALICE.1, &name, allo])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut line = [0u8; 8];
            c.stdout.as_mut().unwrap().read_exact(&mut line).unwrap();
            c
        };
        if i % 5 == 4 {
            // Under a loaded CI, curl can take more than a second to log in;
            // killed before its STOR it would leave nothing to judge.
            let deadline = Instant::now() + Duration::from_secs(30);
            while server.log_text().matches("\"disk plan\"").count() <= started {
                assert!(Instant::now() < deadline, "curl never began its upload:\n{}", server.log_text());
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..1500)));
        child.kill().unwrap();
        child.wait().unwrap();
        let t = wait_for_transfers(&server, &format!("/{name}"), 1);
        if server.path(&name).exists() {
            committed += 1;
            println!(
                "committed truncated: {name} {} bytes, logged {}",
                server.path(&name).metadata().unwrap().len(),
                t[0]
            );
        }
    }
    println!("TRIAL killed paced stream uploads: {n} killed, {committed} committed under the final name");
    assert_eq!(committed, 0);
    assert!(server.is_running());
}

// ---------------------------------------------------------------------------
// 3. Preallocation, removing partial uploads, expiry

/// A MODE E upload announced with ALLO that fails after a few bytes.
fn failed_allo_upload(server: &FerryServer, path: &str, allo: u64) {
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    for cmd in ["TYPE I", "MODE E"] {
        assert!(c.cmd(cmd).starts_with("200"));
    }
    let mut data = TcpStream::connect(passive(&mut c)).unwrap();
    assert!(c.cmd(&format!("ALLO {allo}")).starts_with("200"));
    let r = c.cmd(&format!("STOR {path}"));
    assert!(r.starts_with("150"), "{r}");
    data.write_all(&BlockHeader::data(0, 4).encode()).unwrap();
    data.write_all(b"abcd").unwrap();
    // Closed without EOD: the upload fails.
    drop(data);
    let r = final_reply(&mut c);
    assert!(r.starts_with("426"), "{r}");
}

fn allocated(path: &Path) -> u64 {
    all_files(path).iter().map(|p| p.metadata().unwrap().blocks() * 512).sum()
}

#[test]
fn a_failed_upload_releases_its_preallocation() {
    let server = FerryServer::start();
    for i in 0..3 {
        failed_allo_upload(&server, &format!("pre-{i}.bin"), 1 << 30);
    }
    let held = allocated(server.root.path());
    assert!(held < 4 << 20, "failed uploads still hold {held} bytes of disk");
}

#[test]
fn partial_uploads_are_never_listed_and_can_be_removed() {
    let server = FerryServer::start();
    failed_allo_upload(&server, "gone.bin", 1 << 20);
    std::fs::create_dir(server.path("d")).unwrap();
    failed_allo_upload(&server, "d/inner.bin", 1 << 20);
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    for list in ["MLSD", "LIST -a", "NLST -a"] {
        let data = TcpStream::connect(passive(&mut c)).unwrap();
        assert!(c.cmd(list).starts_with("150"));
        let mut text = String::new();
        (&data).read_to_string(&mut text).unwrap();
        assert!(c.reply().starts_with("226"));
        assert!(text.contains('d') && !text.contains("gone") && !text.contains("ferry"), "{list}: {text}");
    }
    // SITE PARTIAL reports it, DELE of the final name removes it.
    let r = c.cmd("SITE PARTIAL gone.bin");
    assert!(r.starts_with("213") && r.contains("Ranges=0-4;"), "{r}");
    let r = c.cmd("DELE gone.bin");
    assert!(r.starts_with("250"), "{r}");
    assert!(c.cmd("SITE PARTIAL gone.bin").starts_with("550"));
    assert!(c.cmd("DELE gone.bin").starts_with("550"), "nothing left to delete");
    // A recursive remove of a directory holding only an abandoned partial.
    let (ok, _, err) = ferry(&["rm", "-r", &server.url(ALICE, "/d")]);
    assert!(ok, "{err}");
    assert!(!server.path("d").exists());
    assert_eq!(all_files(server.root.path()), Vec::<PathBuf>::new(), "nothing is left behind");
}

#[test]
fn abandoned_partials_expire() {
    let server = FerryServer::start_with(&["--partial-expiry", "1"]);
    std::fs::create_dir(server.path("e")).unwrap();
    failed_allo_upload(&server, "e/old.bin", 1 << 20);
    assert_eq!(all_files(&server.path("e")).len(), 2, "a partial and its record");
    std::thread::sleep(Duration::from_millis(2100));
    let (ok, _, err) = ferry(&["mkdir", &server.url(ALICE, "/e/sub")]);
    assert!(ok, "{err}");
    let local = tempfile::tempdir().unwrap();
    std::fs::write(local.path().join("new.bin"), b"new").unwrap();
    let (ok, _, err) = ferry(&["cp", local.path().join("new.bin").to_str().unwrap(), &server.url(ALICE, "/e/new.bin")]);
    assert!(ok, "{err}");
    assert_eq!(all_files(&server.path("e")), vec![server.path("e/new.bin")], "the expired partial is gone");
}

// ---------------------------------------------------------------------------
// 4. ESTO

#[test]
fn esto_goes_through_a_partial_file_and_offsets_are_bounded() {
    // The default max_file_size, 4 TiB.
    let server = FerryServer::start();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    for cmd in ["TYPE I", "MODE E"] {
        assert!(c.cmd(cmd).starts_with("200"));
    }
    let esto = |c: &mut RawControl, offset: u64, path: &str, blocks: &[(u64, &[u8])], eof: bool| -> String {
        let mut data = TcpStream::connect(passive(c)).unwrap();
        let r = c.cmd(&format!("ESTO A {offset} {path}"));
        if !r.starts_with("150") {
            return r;
        }
        for (off, bytes) in blocks {
            data.write_all(&BlockHeader::data(*off, bytes.len() as u64).encode()).unwrap();
            data.write_all(bytes).unwrap();
        }
        if eof {
            data.write_all(&BlockHeader::eof(1).encode()).unwrap();
        }
        drop(data);
        final_reply(c)
    };
    // A failed ESTO leaves nothing under the final name.
    let r = esto(&mut c, 0, "new.bin", &[(0, b"half")], false);
    assert!(r.starts_with("426"), "{r}");
    assert!(!server.path("new.bin").exists(), "a failed ESTO created the file");
    // A good one into an existing file changes exactly its bytes.
    std::fs::write(server.path("patch.bin"), b"abcdefgh").unwrap();
    let r = esto(&mut c, 2, "patch.bin", &[(0, b"XY")], true);
    assert!(r.starts_with("226"), "{r}");
    assert_eq!(std::fs::read(server.path("patch.bin")).unwrap(), b"abXYefgh");
    // 9 bytes at 15 TiB: past the largest file this server stores.
    let r = esto(&mut c, 15 << 40, "sparse.bin", &[(0, b"123456789")], true);
    assert!(r.starts_with("552") && r.contains("largest file"), "{r}");
    assert!(!server.path("sparse.bin").exists());
    assert!(allocated(server.root.path()) < 1 << 20);
    // The same bound applies to ALLO.
    let r = c.cmd(&format!("ALLO {}", 5u64 << 40));
    assert!(r.starts_with("552"), "{r}");
    assert!(c.cmd("NOOP").starts_with("200"));
}

// ---------------------------------------------------------------------------
// 5. A file that shrinks while it is sent

#[test]
fn a_file_truncated_during_a_stream_retr_is_reported_failed() {
    let server = FerryServer::start();
    random_file(&server.path("shrinks.bin"), 64 << 20, 1205);
    let (mut c, mut data, r) = stream_command(&server, b"RETR shrinks.bin");
    assert!(r.starts_with("150"), "{r}");
    let mut buf = vec![0u8; 1 << 20];
    data.read_exact(&mut buf).unwrap();
    std::fs::OpenOptions::new().write(true).open(server.path("shrinks.bin")).unwrap().set_len(4 << 20).unwrap();
    let mut rest = Vec::new();
    data.read_to_end(&mut rest).unwrap();
    let r = c.reply();
    assert!(r.starts_with("451") || r.starts_with("426"), "a truncated send was answered {r}");
    let t = wait_for_transfers(&server, "/shrinks.bin", 1);
    assert_ne!(t[0]["status"], "complete", "{t:?}");
}

// ---------------------------------------------------------------------------
// 6. Names that are not UTF-8

#[test]
fn names_that_are_not_utf8_are_listed_and_copied() {
    let server = FerryServer::start();
    let raw = |b: &[u8]| std::ffi::OsStr::from_bytes(b).to_os_string();
    let root = server.root.path();
    std::fs::write(root.join(raw(b"latin1-caf\xe9.txt")), b"one").unwrap();
    std::fs::write(root.join(raw(b"bad-\xff\xfe")), b"two").unwrap();
    std::fs::write(root.join("ok.txt"), b"three").unwrap();
    std::fs::create_dir(root.join(raw(b"dir-\xe9"))).unwrap();
    std::fs::write(root.join(raw(b"dir-\xe9")).join(raw(b"in-\xe9")), b"four").unwrap();
    // MLSD names them in their own octets (RFC 3659 §2.2).
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    let data = TcpStream::connect(passive(&mut c)).unwrap();
    assert!(c.cmd("MLSD").starts_with("150"));
    let mut listing = Vec::new();
    (&data).read_to_end(&mut listing).unwrap();
    assert!(c.reply().starts_with("226"));
    for name in [&b"latin1-caf\xe9.txt"[..], b"bad-\xff\xfe", b"ok.txt", b"dir-\xe9"] {
        let line: Vec<u8> = [b" ", name, b"\r\n"].concat();
        assert!(listing.windows(line.len()).any(|w| w == line), "{:?} missing from {listing:?}", name);
    }
    // ...and the same octets fetch it (0xFF doubled: the control
    // connection is Telnet, RFC 2640 §3.1).
    assert!(c.cmd("TYPE I").starts_with("200"));
    let mut data = TcpStream::connect(passive(&mut c)).unwrap();
    c.send(b"RETR bad-\xff\xff\xfe");
    assert!(c.reply().starts_with("150"));
    let mut got = Vec::new();
    data.read_to_end(&mut got).unwrap();
    assert!(c.reply().starts_with("226"));
    assert_eq!(got, b"two");
    // A tree copy takes every file, both ways.
    let local = tempfile::tempdir().unwrap();
    let (ok, _, err) = ferry(&["cp", "-r", &server.url(ALICE, "/"), local.path().join("t").to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(tree_digest(&local.path().join("t")), tree_digest(root), "download");
    let contents = format!("{}/", local.path().join("t").display());
    let (ok, _, err) = ferry(&["cp", "-r", &contents, &server.url(ALICE, "/back")]);
    assert!(ok, "{err}");
    assert_eq!(tree_digest(&server.path("back")), tree_digest(&local.path().join("t")), "upload");
}

// ---------------------------------------------------------------------------
// 7. Long names

#[test]
fn names_of_255_bytes_are_copied_both_ways() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    // 255 bytes, with two-byte characters in it.
    let name = format!("{}{}", "é".repeat(100), "n".repeat(55));
    assert_eq!(name.len(), 255);
    let src = local.path().join(&name);
    random_file(&src, 3 << 20, 1207);
    for mode in ["auto", "stream"] {
        let url = server.url(ALICE, &format!("/{mode}-{}", &name[..name.len() - mode.len() - 1]));
        let remote_name = url.rsplit('/').next().unwrap().to_string();
        assert_eq!(remote_name.len(), 255);
        let (ok, _, err) = ferry(&["cp", "--mode", mode, src.to_str().unwrap(), &url]);
        assert!(ok, "upload ({mode}): {err}");
        assert_eq!(sha256_file(&server.path(&remote_name)), sha256_file(&src));
        let back = local.path().join("back");
        std::fs::create_dir_all(&back).unwrap();
        let (ok, _, err) = ferry(&["cp", "--mode", mode, &url, back.to_str().unwrap()]);
        assert!(ok, "download ({mode}): {err}");
        assert_eq!(sha256_file(&back.join(&remote_name)), sha256_file(&src));
    }
    // And inside a tree copy.
    let (ok, _, err) = ferry(&["cp", "-r", &server.url(ALICE, "/"), local.path().join("tree").to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(std::fs::read_dir(local.path().join("tree")).unwrap().count(), 2);
}

// ---------------------------------------------------------------------------
// 8. FIFOs and devices

#[test]
fn retr_and_cksm_of_a_fifo_are_refused_at_once() {
    let server = FerryServer::start();
    let fifo = server.path("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let mut c = RawControl::connect(server.addr);
    c.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.login(ALICE);
    let r = c.cmd("CKSM MD5 0 -1 fifo");
    assert!(r.starts_with("550") && r.contains("not a regular file"), "CKSM of a FIFO: {r:?}");
    assert!(c.cmd("TYPE I").starts_with("200"));
    let _data = TcpStream::connect(passive(&mut c)).unwrap();
    let r = c.cmd("RETR fifo");
    assert!(r.starts_with("550") && r.contains("not a regular file"), "RETR of a FIFO: {r:?}");
    assert!(c.cmd("NOOP").starts_with("200"));
    // Nothing was left blocked on it: a writer would find no reader.
    use std::os::unix::fs::OpenOptionsExt;
    let w = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&fifo);
    assert_eq!(w.unwrap_err().raw_os_error(), Some(libc::ENXIO));
}

// ---------------------------------------------------------------------------
// 9. Idle data connections

#[test]
fn idle_data_connections_cannot_stall_other_sessions() {
    let mut server = FerryServer::start_with(&["--anonymous", "read", "--data-timeout", "30"]);
    let mut holders = Vec::new();
    for i in 0..2 {
        let mut c = RawControl::connect(server.addr);
        c.login(ALICE);
        for cmd in ["TYPE I", "MODE E"] {
            assert!(c.cmd(cmd).starts_with("200"));
        }
        let addr = passive(&mut c);
        assert!(c.cmd(&format!("STOR idle-{i}.bin")).starts_with("150"));
        // Until the server stops taking them (its per-session limit).
        let conns: Vec<TcpStream> =
            (0..256).map_while(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()).collect();
        holders.push((c, conns));
    }
    std::thread::sleep(Duration::from_millis(500));
    let threads = thread_count(server.pid());
    let started = Instant::now();
    let mut other = RawControl::connect(server.addr);
    other.login(BOB);
    let r = other.cmd("CWD /");
    let took = started.elapsed();
    assert!(r.starts_with("250"), "{r}");
    assert!(took < Duration::from_secs(5), "another user's CWD took {took:?} with {threads} server threads");
    assert!(threads < 300, "idle data connections hold {threads} threads");
    drop(holders);
    assert!(server.is_running());
}

// ---------------------------------------------------------------------------
// 10. Listings of large directories

#[test]
fn unread_listings_of_a_large_directory_keep_memory_bounded() {
    let server = FerryServer::start();
    let dir = server.path("many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..60_000 {
        std::fs::File::create(dir.join(format!("file-with-a-longish-name-{i:08}.dat"))).unwrap();
    }
    let before = rss_kib(server.pid());
    let mut held = Vec::new();
    for list in ["MLSD many", "LIST many", "NLST many", "MLSD many", "LIST many"].iter().cycle().take(10) {
        let mut c = RawControl::connect(server.addr);
        c.login(BOB);
        let data = TcpStream::connect(passive(&mut c)).unwrap();
        assert!(c.cmd(list).starts_with("150"));
        // Never read.
        held.push((c, data));
    }
    std::thread::sleep(Duration::from_secs(3));
    let during = rss_kib(server.pid());
    assert!(during < before + 40 * 1024, "10 unread listings took RSS from {before} KiB to {during} KiB");
}

// ---------------------------------------------------------------------------
// 11. CKSM

#[test]
fn checksums_are_capped_abortable_and_keep_the_session_alive() {
    let server = FerryServer::start();
    std::fs::File::create(server.path("huge.bin")).unwrap().set_len(1 << 40).unwrap();
    let mut c = RawControl::connect(server.addr);
    c.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.login(ALICE);
    c.send(b"CKSM MD5 0 -1 huge.bin");
    std::thread::sleep(Duration::from_millis(200));
    let r = c.cmd("NOOP");
    assert!(r.starts_with("200"), "NOOP during a checksum: {r:?}");
    c.send(b"ABOR");
    let r = c.reply();
    assert!(r.starts_with("426"), "the CKSM after ABOR: {r:?}");
    let r = c.reply();
    assert!(r.starts_with("226"), "ABOR: {r:?}");
    assert!(c.cmd("NOOP").starts_with("200"));
    // Six at once: the server runs no more than its cap.
    let mut many = Vec::new();
    for _ in 0..6 {
        let mut c = RawControl::connect(server.addr);
        c.login(ALICE);
        c.send(b"CKSM MD5 0 -1 huge.bin");
        many.push(c);
    }
    std::thread::sleep(Duration::from_millis(500));
    let waiting = server.log_text().matches("checksum waits for a free slot").count();
    assert!(waiting >= 2, "six checksums of 1 TiB ran at once:\n{}", server.log_text());
    drop(many);
}

// ---------------------------------------------------------------------------
// 12. Smaller ones

/// Two adjacent free ports.
fn free_port_pair() -> u16 {
    for _ in 0..100 {
        let p = free_port();
        if p < 65535 && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
    panic!("no two adjacent free ports");
}

#[test]
fn a_full_passive_port_range_is_reported_as_such() {
    let low = free_port_pair();
    let range = format!("{low}-{}", low + 1);
    let server = FerryServer::start_with(&["--anonymous", "read", "--passive-ports", &range]);
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = RawControl::connect(server.addr);
        c.login(BOB);
        assert!(c.cmd("PASV").starts_with("227"));
        held.push(c);
    }
    let mut c = RawControl::connect(server.addr);
    c.login(BOB);
    let r = c.cmd("PASV");
    assert!(r.starts_with("425") && r.contains("passive port range") && r.contains(&range), "{r}");
}

#[test]
fn site_chmod_of_the_root_is_refused() {
    let server = FerryServer::start();
    let before = server.root.path().metadata().unwrap().mode() & 0o777;
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    let r = c.cmd("SITE CHMOD 777 /");
    assert!(r.starts_with("550"), "{r}");
    assert_eq!(server.root.path().metadata().unwrap().mode() & 0o777, before);
}

#[test]
fn mfmt_answers_the_time_it_set() {
    let server = FerryServer::start();
    std::fs::write(server.path("t.txt"), b"t").unwrap();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    for time in ["19000101000000", "20200229123456"] {
        let r = c.cmd(&format!("MFMT {time} t.txt"));
        assert!(r.starts_with("213"), "{r}");
        let set = r.split("Modify=").nth(1).unwrap().split(';').next().unwrap().to_string();
        let now = c.cmd("MDTM t.txt");
        assert_eq!(now.trim_end(), format!("213 {set}"), "MFMT {time} answered {r}");
    }
}

#[test]
fn file_names_cannot_forge_text_log_fields() {
    let server = FerryServer::start_with(&["--anonymous", "read", "--log-format", "text"]);
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    let evil = b"evil\x1b[31m\rred status=complete bytes=1";
    let mut cmd = b"RETR ".to_vec();
    cmd.extend_from_slice(evil);
    let _data = TcpStream::connect(passive(&mut c)).unwrap();
    c.send(&cmd);
    assert!(c.reply().starts_with("550"));
    let mut cmd = b"STOR ".to_vec();
    cmd.extend_from_slice(evil);
    let data = TcpStream::connect(passive(&mut c)).unwrap();
    c.send(&cmd);
    assert!(c.reply().starts_with("150"));
    drop(data);
    c.reply();
    std::thread::sleep(Duration::from_millis(200));
    let log = std::fs::read(&server.log).unwrap();
    assert!(!log.contains(&0x1b) && !log.contains(&b'\r'), "raw control characters in the text log");
    let text = String::from_utf8_lossy(&log);
    let line = text.lines().find(|l| l.contains("transfer finished")).unwrap();
    assert!(line.contains("path=\"/evil\\u{1b}[31m\\rred status=complete bytes=1\""), "{line}");
}

#[test]
fn login_lockout_counts_attempts_as_they_start() {
    let server = FerryServer::start_with(&["--anonymous", "read", "--login-lockout-failures", "5"]);
    let addr = server.addr;
    let workers: Vec<_> = (0..30)
        .map(|_| {
            std::thread::spawn(move || {
                let Ok(s) = TcpStream::connect(addr) else { return };
                let mut c = RawControl::from_stream(s);
                if !c.reply().starts_with("220") {
                    return;
                }
                c.cmd("USER alice");
                c.cmd("PASS wrong");
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let checked = server.log_text().matches("failed login").count();
    assert!(checked <= 5, "{checked} passwords were checked against a lockout threshold of 5");
}

// ---------------------------------------------------------------------------
// 13. Resume that resends only what is missing

/// Starts `ferry cp` at 16 MB/s, SIGKILLs it `after` its upload began (the
/// server created the partial file: a kill during start-up, on a loaded
/// machine, would leave nothing to resume and no transfer to log), and
/// returns how many bytes the server had received by then (its transfer log).
fn kill_upload(server: &FerryServer, args: &[&str], state: &Path, path: &str, after: Duration) -> u64 {
    let before = server.transfers(path).len();
    let partial = server.partial(path);
    assert!(!partial.exists(), "{path}: a partial file is left from an earlier upload");
    let mut child = Command::new(ferry_bin())
        .args(["cp", "-q", "--max-rate", "16M"])
        .args(args)
        .env("FERRY_STATE_DIR", state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !partial.exists() {
        assert!(child.try_wait().unwrap().is_none(), "{path}: the copy ended before its upload began");
        assert!(Instant::now() < deadline, "{path}: the upload did not begin within 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(after);
    assert!(child.try_wait().unwrap().is_none(), "the copy ended before it could be killed");
    child.kill().unwrap();
    child.wait().unwrap();
    let t = wait_for_transfers(server, path, before + 1);
    t[before]["bytes"].as_u64().unwrap()
}

/// Runs the same copy again; returns the bytes its (one) transfer moved.
fn rerun(server: &FerryServer, args: &[&str], state: &Path, path: &str) -> u64 {
    let before = server.transfers(path).len();
    let out = Command::new(ferry_bin()).args(["cp", "-q"]).args(args).env("FERRY_STATE_DIR", state).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let t = server.transfers(path);
    let done: Vec<_> = t[before..].iter().filter(|t| t["status"] == "complete").collect();
    assert_eq!(done.len(), 1, "{:?}", &t[before..]);
    done[0]["bytes"].as_u64().unwrap()
}

#[test]
fn a_killed_upload_resends_only_what_the_server_lacks() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let size = 64u64 << 20;
    let src = local.path().join("r.bin");
    random_file(&src, size, 1213);
    for (mode, name) in [("extended", "/e.bin"), ("stream", "/s.bin")] {
        let state = tempfile::tempdir().unwrap();
        let url = server.url(ALICE, name);
        let args = ["-p", "4", "--mode", mode, src.to_str().unwrap(), &url];
        // Killed before the first 5 s restart marker.
        let held = kill_upload(&server, &args, state.path(), name, Duration::from_millis(1500));
        assert!(held > 4 << 20 && held < size, "{mode}: the server held {held} bytes at the kill");
        let missing = size - held;
        let sent = rerun(&server, &args, state.path(), name);
        assert_eq!(sha256_file(&server.path(name)), sha256_file(&src), "{mode}");
        assert!(
            sent as f64 <= missing as f64 * 1.10,
            "{mode}: the re-run sent {sent} bytes where {missing} were missing"
        );
    }
}

/// Trial: `ferry cp -p 4` uploads killed at random moments; every re-run
/// must give the same bytes and resend at most 10 % more than was missing.
#[test]
fn trial_killed_parallel_uploads_resume() {
    let n = trials(3);
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let size = 48u64 << 20;
    let src = local.path().join("k.bin");
    random_file(&src, size, 1214);
    let sha = sha256_file(&src);
    let mut rng = rng();
    let (mut wrong, mut over, mut worst) = (0, 0, 0f64);
    for i in 0..n {
        let name = format!("/kill-{i}.bin");
        let state = tempfile::tempdir().unwrap();
        let url = server.url(ALICE, &name);
        let args = ["-p", "4", src.to_str().unwrap(), &url];
        let after = Duration::from_millis(rng.gen_range(200..2800));
        let held = kill_upload(&server, &args, state.path(), &name, after);
        let missing = size - held;
        let sent = rerun(&server, &args, state.path(), &name);
        if sha256_file(&server.path(&name)) != sha {
            wrong += 1;
        }
        let ratio = sent as f64 / missing.max(1) as f64;
        worst = worst.max(ratio);
        if ratio > 1.10 {
            over += 1;
        }
        println!("kill {i} after {after:?}: held {held}, missing {missing}, re-sent {sent} ({ratio:.3})");
    }
    println!(
        "TRIAL killed -p 4 uploads: {n} kills, {wrong} re-runs not byte-identical, {over} resent more than 110 % of \
         what was missing (worst {worst:.3})"
    );
    assert_eq!((wrong, over), (0, 0));
}

#[test]
fn feat_advertises_the_partial_query() {
    let server = FerryServer::start();
    let mut c = RawControl::connect(server.addr);
    let r = c.cmd("FEAT");
    assert!(r.contains("\r\n SITE PARTIAL\r\n"), "{r}");
}
