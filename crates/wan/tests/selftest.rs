//! End-to-end tests of the link emulator: real namespaces, TUN devices and
//! iperf3. They need root and iperf3 (CI runs as root); without them they fail
//! with a message saying so rather than skipping silently, so a
//! misconfigured runner cannot pass by testing nothing.
//!
//! Namespace names carry the PID and a per-test suffix, so concurrent test
//! runs (and the tests of one run, which cargo runs in parallel) never
//! collide; every link is held by a guard whose Drop tears it down, also when
//! an assertion fails.

use std::process::Command;
use std::time::Duration;

use ferry_wan::selftest::{self, SelftestConfig};
use ferry_wan::{netns, Link, LinkConfig, PathConfig, WanError};

fn require_environment() {
    if let Err(e) = netns::require_root() {
        panic!("the ferry-wan integration tests need root: {e}");
    }
    if let Err(e) = netns::require_program("iperf3") {
        panic!("the ferry-wan integration tests need iperf3: {e}");
    }
}

fn unique(test: &str) -> String {
    format!("fwt{}-{test}", std::process::id())
}

/// Removes a namespace this test created by hand, even if the test panics.
struct ForeignNamespace(String);

impl Drop for ForeignNamespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The acceptance check: 10 ms one way and 200 Mbit/s each way must measure
/// as an RTT of 20 ms (±10 % plus 1 ms for the forwarder's own latency) and
/// an iperf3 throughput of 200 Mbit/s ±10 %.
#[test]
fn selftest_10ms_200mbit_matches_configuration() {
    require_environment();
    let path =
        PathConfig { rate: Some("200mbit".parse().unwrap()), ..PathConfig::delay_only(Duration::from_millis(10)) };
    let config = LinkConfig::new(unique("st"), path);
    let report = selftest::run(&SelftestConfig { seconds: 3, ..SelftestConfig::new(config.clone()) })
        .expect("selftest could not run");
    println!("{report}");

    let rtt = &report.checks[0];
    assert!(
        rtt.passed(),
        "RTT {:.2} ms, expected {:.2} ± {:.2} ms",
        rtt.measured,
        rtt.expected,
        rtt.tolerance.unwrap()
    );
    let tput = &report.checks[1];
    assert!(
        tput.passed(),
        "throughput {:.1} Mbit/s, expected {:.1} ± {:.1} Mbit/s",
        tput.measured,
        tput.expected,
        tput.tolerance.unwrap()
    );
    assert!(report.passed());
    assert!(!netns::netns_exists(&config.client_ns()), "client namespace left behind");
    assert!(!netns::netns_exists(&config.server_ns()), "server namespace left behind");
}

/// Dropping the guard removes everything the link created.
#[test]
fn drop_tears_everything_down() {
    require_environment();
    let config = LinkConfig::new(unique("drop"), PathConfig::delay_only(Duration::ZERO));
    let (c, s) = (config.client_ns(), config.server_ns());
    {
        let link = Link::up(config.clone()).expect("link up");
        assert!(netns::netns_exists(&c) && netns::netns_exists(&s));
        assert!(netns::etc_dir(&c).join("hosts").exists());
        assert!(netns::state_file(&config.name).exists());
        let ok = link.command(ferry_wan::Side::Client, "ip").args(["link", "show", netns::DEVICE]).status().unwrap();
        assert!(ok.success(), "no {} in the client namespace", netns::DEVICE);
        link.check().expect("forwarders running");
    }
    assert!(!netns::netns_exists(&c) && !netns::netns_exists(&s));
    assert!(!netns::etc_dir(&c).exists() && !netns::etc_dir(&s).exists());
    assert!(!netns::state_file(&config.name).exists());
}

/// A namespace that exists already is somebody else's: refuse, and leave it
/// exactly as it was.
#[test]
fn refuses_existing_namespace_and_leaves_it_alone() {
    require_environment();
    let config = LinkConfig::new(unique("busy"), PathConfig::delay_only(Duration::ZERO));
    let server_ns = config.server_ns();
    let status = Command::new("ip").args(["netns", "add", &server_ns]).status().unwrap();
    assert!(status.success());
    let _cleanup = ForeignNamespace(server_ns.clone());

    match Link::up(config.clone()) {
        Err(WanError::NamespaceExists(ns, _)) => assert_eq!(ns, server_ns),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("brought a link up over an existing namespace"),
    }
    assert!(netns::netns_exists(&server_ns), "foreign namespace was removed");
    assert!(!netns::netns_exists(&config.client_ns()), "half a link left behind");
}
