//! The test harness's peers end with their tests: a pure-ftpd or Globus
//! server forks a process per client session, and session 12's CI left such
//! sessions running after the suite because only the server's PID was
//! killed. These tests log a session in, drop the peer, and look in `/proc`.

mod support;
use std::time::{Duration, Instant};
use support::*;

/// Waits up to two seconds for every process of `pgid` to be gone.
fn all_gone(pgid: i32) -> Vec<i32> {
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let left = live_group_members(pgid);
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn dropping_pure_ftpd_ends_its_session_processes() {
    let pure = PureFtpd::start();
    let mut c = RawControl::connect(format!("127.0.0.1:{}", pure.port).parse().unwrap());
    c.login(PURE_USER);
    let pgid = pure.server.pgid();
    let members = live_group_members(pgid);
    assert!(members.len() >= 2, "a logged-in session forks a process in the server's group: {members:?}");
    drop(pure);
    assert_eq!(all_gone(pgid), Vec::<i32>::new(), "session processes outlived the server");
}

#[test]
fn dropping_globus_ends_its_session_processes() {
    let globus = GlobusServer::start();
    let mut c = RawControl::connect(format!("127.0.0.1:{}", globus.port).parse().unwrap());
    c.login(("anonymous", "ferry@test"));
    let pgid = globus.server.pgid();
    let members = live_group_members(pgid);
    assert!(members.len() >= 2, "a logged-in session forks a process in the server's group: {members:?}");
    drop(globus);
    assert_eq!(all_gone(pgid), Vec::<i32>::new(), "session processes outlived the server");
}
