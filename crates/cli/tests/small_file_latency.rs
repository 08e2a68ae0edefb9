//! Per-file latency of `ferry serve` for plain FTP clients that upload
//! small files one after another (lftp, rclone, Python's ftplib): each
//! file is PASV, STOR, the data, the data connection's close, then 226.
//!
//! Issue 18 measured about 8 ms per 4 KiB upload on loopback, most of it
//! a fixed 5 ms timer the server slept after the data connection closed
//! (to notice a killed client's control connection closing too). A client
//! that announces the size with `ALLO` (Ferry's client, globus-url-copy)
//! never waits: the size tells a complete file from a cut one. Without
//! ALLO the server still watches the control connection for up to 5 ms
//! (a `ppoll` that a closing connection ends at once): 1 ms let a killed
//! client's truncated upload be committed on a loaded machine
//! (`integrity::trial_killed_paced_stream_uploads`), and safety wins.
//!
//! The root is on tmpfs, where a sync costs nothing, so what is measured
//! is the server's own waiting, not the (shared) disk. Timing in a test is
//! only robust as a structural bound: a 5 ms wait would make every upload
//! take at least 5 ms, so the fastest of many uploads must come in under that.

mod support;
use support::*;

/// Uploads `n` files of 4 KiB on one control connection, each announced
/// with `ALLO`, and prints the duration of each ALLO + STOR (from the
/// ALLO to the STOR's 226), in ms.
const SEQUENTIAL_UPLOADER: &str = r#"
import ftplib, io, sys, time
ftp = ftplib.FTP()
ftp.connect(sys.argv[1], int(sys.argv[2]), timeout=20)
ftp.login(sys.argv[3], sys.argv[4])
ftp.voidcmd("TYPE I")
data = b"x" * 4096
for i in range(int(sys.argv[5])):
    t = time.perf_counter()
    ftp.voidcmd("ALLO 4096")
    ftp.storbinary("STOR /lat-%d.dat" % i, io.BytesIO(data))
    print("%.3f" % ((time.perf_counter() - t) * 1e3))
ftp.quit()
"#;

#[test]
fn sequential_small_stream_uploads_with_allo_do_not_wait_on_a_timer() {
    let python = require("python3");
    let shm = std::path::Path::new("/dev/shm");
    let root = if shm.is_dir() { tempfile::tempdir_in(shm).unwrap() } else { tempfile::tempdir().unwrap() };
    let server = FerryServer::start_in(root, &[], &[]);
    let n = 60;
    let out = std::process::Command::new(python)
        .args(["-c", SEQUENTIAL_UPLOADER, &server.addr.ip().to_string(), &server.addr.port().to_string()])
        .args([ALICE.0, ALICE.1, &n.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), server.log_text());
    let mut ms: Vec<f64> = String::from_utf8_lossy(&out.stdout).lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ms.len(), n);
    ms.sort_by(f64::total_cmp);
    println!("STOR of 4 KiB, ms: min {:.2} median {:.2} max {:.2}", ms[0], ms[n / 2], ms[n - 1]);
    for i in 0..n {
        assert_eq!(server.path(&format!("lat-{i}.dat")).metadata().unwrap().len(), 4096);
    }
    // A 5 ms wait (the watch without ALLO, or the old timer) would be a
    // floor under every upload.
    assert!(ms[0] < 4.5, "the fastest of {n} uploads took {:.2} ms: the server waits after each file", ms[0]);
}
