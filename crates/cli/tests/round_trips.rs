//! How many control round trips a fresh `ferry cp` costs, through a relay
//! that delays the control connection like a long path (data connections
//! go direct). Each fresh download sends its whole dialogue in one write
//! (USER, PASS, FEAT, MLST, MODE E, TYPE, OPTS RETR, SPOR, RETR), so it
//! needs one round trip where the same exchange one command at a time
//! needs ten, and globus-url-copy's needs eleven.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};
use support::*;

// Long enough that process start-up and a loaded machine (the suite runs
// tests in parallel) stay small against it.
const ONE_WAY: Duration = Duration::from_millis(250);
const RTT: f64 = 0.5;

/// Round trips taken by a fresh download of `url`, with `extra` flags.
fn download_round_trips(url: &str, extra: &[&str], expect: &Path) -> f64 {
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f");
    let mut args = vec!["cp", "-q"];
    args.extend(extra);
    args.extend([url, dst.to_str().unwrap()]);
    let t = Instant::now();
    let (ok, _, err) = ferry(&args);
    let rtts = t.elapsed().as_secs_f64() / RTT;
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&dst), sha256_file(expect));
    rtts
}

#[test]
fn a_fresh_download_from_ferry_costs_one_control_round_trip() {
    let server = FerryServer::start();
    random_file(&server.path("f"), 3 << 20, 1);
    let proxy = DelayProxy::start(server.addr, ONE_WAY);
    // Anonymous: a password check (argon2) takes a variable part of a
    // round trip on a loaded machine.
    let url = format!("ftp://{}/f", proxy.addr);
    let mode_e = download_round_trips(&url, &[], &server.path("f"));
    // The whole dialogue in one write; the 226 arrives with or just after
    // the other replies.
    assert!(mode_e < 1.5, "MODE E download took {mode_e:.2} round trips");
    let p4 = download_round_trips(&url, &["-p", "4"], &server.path("f"));
    assert!(p4 < 1.5, "-p 4 download took {p4:.2} round trips");
    // Stream mode: the login, then MODE, TYPE, PASV and RETR in one write,
    // then the 150 once the data connection is open (2.5).
    let stream = download_round_trips(&url, &["--mode", "stream"], &server.path("f"));
    assert!((2.4..3.3).contains(&stream), "stream-mode download took {stream:.2} round trips");
    // With pipelining off, the login is still one write, then the set-up.
    let plain = download_round_trips(&url, &["--pipeline", "1"], &server.path("f"));
    assert!((1.9..2.7).contains(&plain), "unpipelined download took {plain:.2} round trips");
}

#[test]
fn a_fresh_download_from_globus_costs_one_control_round_trip() {
    let globus = GlobusServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("f");
    random_file(&src, 3 << 20, 2);
    globus.put("f", &src);
    let proxy = DelayProxy::start(format!("127.0.0.1:{}", globus.port).parse().unwrap(), ONE_WAY);
    let url = globus.url("f").replace(&format!("127.0.0.1:{}", globus.port), &proxy.addr.to_string());
    // Globus takes SPOR in place of PORT, so the pipelined RETR runs.
    let rtts = download_round_trips(&url, &["-p", "4"], &src);
    assert!(rtts < 1.6, "download from Globus took {rtts:.2} round trips");
}

#[test]
fn a_plain_ftp_server_refuses_the_pipelined_retr_and_the_copy_still_works() {
    let ftpd = PureFtpd::start();
    random_file(&ftpd.home.path().join("f"), 1 << 20, 3);
    let proxy = DelayProxy::start(format!("127.0.0.1:{}", ftpd.port).parse().unwrap(), ONE_WAY);
    let url = ftpd.url("/f").replace(&format!("127.0.0.1:{}", ftpd.port), &proxy.addr.to_string());
    // SPOR is unknown to pure-ftpd: RETR fails for want of a data channel
    // and the copy goes on in stream mode on the same session. (No round
    // trips are counted: pure-ftpd's password hashing takes seconds.)
    download_round_trips(&url, &[], &ftpd.home.path().join("f"));
    assert_eq!(proxy.connections(), 1, "the copy should not need a second session");
}
