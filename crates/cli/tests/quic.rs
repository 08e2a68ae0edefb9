//! QUIC data channels (issue 19) end to end: `ferry cp --transport quic`
//! against `ferry serve` with a certificate, up and down, one and four
//! streams, checksums verified; a killed copy resumed from its restart
//! markers; the fallback to TCP where QUIC is not offered; and a flood of
//! junk and Initial-looking datagrams at the server's QUIC port while
//! another client is served. Certificates are made at test time.

mod support;
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

fn tls_server(pki: &TestPki, extra: &[&str]) -> FerryServer {
    let mut flags = pki.serve_flags();
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    FerryServer::start_with(&flags)
}

fn transports_of(server: &FerryServer, path: &str) -> Vec<String> {
    server.transfers(path).iter().map(|t| t["transport"].as_str().unwrap_or("?").to_string()).collect()
}

#[test]
fn quic_uploads_and_downloads_with_one_and_four_streams() {
    let pki = TestPki::new();
    let server = tls_server(&pki, &["--require-tls", "--require-protected-data"]);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (12 << 20) + 7, 19);
    let ca = pki.file("ca.pem");
    let src_s = src.display().to_string();
    for (mode, p, name) in [("extended", "1", "e1.bin"), ("extended", "4", "e4.bin"), ("stream", "1", "s.bin")] {
        let url = ftps_url(&server, ALICE, &format!("/{name}"));
        let args =
            ["cp", "--json", "--transport", "quic", "--ca", &ca, "--mode", mode, "-p", p, "--verify", "--no-resume"];
        let (ok, out, err) = ferry(&[&args[..], &[&src_s, &url]].concat());
        assert!(ok, "upload {mode} -p {p}: {err}\n{}", server.log_text());
        assert!(out.contains("\"transport\":\"quic\""), "{out}");
        assert_eq!(sha256_file(&server.path(name)), sha256_file(&src), "upload {name}");
        let back = local.path().join(format!("back-{name}"));
        let back_s = back.display().to_string();
        let (ok, _, err) = ferry(&[&args[..], &[&url, &back_s]].concat());
        assert!(ok, "download {mode} -p {p}: {err}\n{}", server.log_text());
        assert_eq!(sha256_file(&back), sha256_file(&src), "download {name}");
        let path = format!("/{name}");
        assert_eq!(transports_of(&server, &path), vec!["quic", "quic"], "{}", server.log_text());
    }
}

#[test]
fn quic_is_offered_only_with_tls_and_the_client_falls_back_to_tcp() {
    let pki = TestPki::new();
    let with_cert = tls_server(&pki, &[]);
    let mut c = RawControl::connect(with_cert.addr);
    let feat = c.cmd("FEAT");
    assert!(feat.contains(" TRANSPORTS tcp;quic"), "{feat}");
    c.login(ALICE);
    // A clear control channel cannot have QUIC data channels.
    let r = c.cmd("TPRT quic");
    assert!(r.starts_with("534"), "{r}");
    let r = c.cmd("SITE SETNETSTACK quic");
    assert!(r.starts_with("534"), "{r}");

    let clear = FerryServer::start_with(&["--anonymous", "read"]);
    let mut c = RawControl::connect(clear.addr);
    let feat = c.cmd("FEAT");
    assert!(feat.contains(" TRANSPORTS tcp;udt\r\n"), "{feat}");
    random_file(&clear.path("f.bin"), 300_000, 3);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("f.bin");
    let (ok, out, err) =
        ferry(&["cp", "--json", "--transport", "quic", "--verify", &clear.url(ALICE, "/f.bin"), dst.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("\"transport\":\"tcp\""), "{out}");
    assert!(err.contains("quic") && err.contains("tcp"), "the fallback is said: {err}");
    assert_eq!(sha256_file(&dst), sha256_file(&clear.path("f.bin")));

    // A server whose default is QUIC needs a certificate.
    let (ok, _, err) = {
        let out = Command::new(ferry_bin())
            .args(["serve", "/tmp", "--listen", "127.0.0.1:0", "--data-transport", "quic"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.success(), (), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert!(!ok && err.contains("--tls-cert"), "{err}");
}

#[test]
fn a_server_defaulting_to_quic_serves_quic_clients() {
    let pki = TestPki::new();
    let server = tls_server(&pki, &["--data-transport", "quic"]);
    random_file(&server.path("d.bin"), 2_000_003, 5);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("d.bin");
    let ca = pki.file("ca.pem");
    let url = ftps_url(&server, ALICE, "/d.bin");
    let (ok, _, err) =
        ferry(&["cp", "-q", "--transport", "quic", "--ca", &ca, "-p", "2", "--verify", &url, dst.to_str().unwrap()]);
    assert!(ok, "{err}\n{}", server.log_text());
    assert_eq!(sha256_file(&dst), sha256_file(&server.path("d.bin")));
    assert_eq!(transports_of(&server, "/d.bin"), vec!["quic"]);
}

/// A server whose default is QUIC must not push QUIC onto standard FTPS
/// clients that never asked for it (TPRT): curl `--ssl-reqd` (PROT P) moves
/// data up and down over TCP with TLS, and so does `ferry cp` without
/// `--transport`; `--transport quic` still gets QUIC.
#[test]
fn a_quic_default_server_serves_curl_over_tcp_with_tls() {
    let curl = require("curl");
    let pki = TestPki::new();
    let server = tls_server(&pki, &["--data-transport", "quic", "--require-tls", "--require-protected-data"]);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (3 << 20) + 11, 23);
    let base = format!("ftp://{}:{}@localhost:{}", ALICE.0, ALICE.1, server.addr.port());
    let ca = pki.file("ca.pem");
    let tls = ["--ssl-reqd", "--cacert", &ca, "-sS", "--max-time", "60"];
    let out = Command::new(&curl).args(tls).arg("-T").arg(&src).arg(format!("{base}/up.bin")).output().unwrap();
    assert!(out.status.success(), "curl upload: {}\n{}", String::from_utf8_lossy(&out.stderr), server.log_text());
    assert_eq!(sha256_file(&server.path("up.bin")), sha256_file(&src));
    let back = local.path().join("back.bin");
    let out = Command::new(&curl).args(tls).arg("-o").arg(&back).arg(format!("{base}/up.bin")).output().unwrap();
    assert!(out.status.success(), "curl download: {}\n{}", String::from_utf8_lossy(&out.stderr), server.log_text());
    assert_eq!(sha256_file(&back), sha256_file(&src));
    assert_eq!(transports_of(&server, "/up.bin"), vec!["tcp", "tcp"], "{}", server.log_text());

    let url = ftps_url(&server, ALICE, "/up.bin");
    let plain = local.path().join("plain.bin");
    let (ok, out, err) = ferry(&["cp", "--json", "--ca", &ca, "--verify", &url, plain.to_str().unwrap()]);
    assert!(ok, "{err}\n{}", server.log_text());
    assert!(out.contains("\"transport\":\"tcp\""), "{out}");
    let asked = local.path().join("asked.bin");
    let (ok, out, err) =
        ferry(&["cp", "--json", "--transport", "quic", "--ca", &ca, "--verify", &url, asked.to_str().unwrap()]);
    assert!(ok, "{err}\n{}", server.log_text());
    assert!(out.contains("\"transport\":\"quic\""), "{out}");
    assert_eq!(sha256_file(&asked), sha256_file(&src));
    assert_eq!(transports_of(&server, "/up.bin"), vec!["tcp", "tcp", "tcp", "quic"], "{}", server.log_text());
}

const SIZE: u64 = 48 << 20;

#[test]
fn a_killed_quic_upload_resumes_from_its_restart_markers() {
    let pki = TestPki::new();
    let server = tls_server(&pki, &["--marker-interval", "1"]);
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let src = local.path().join("big.bin");
    random_file(&src, SIZE, 52);
    let ca = pki.file("ca.pem");
    let url = ftps_url(&server, ALICE, "/big.bin");
    start_and_kill(&["--transport", "quic", "--ca", &ca, src.to_str().unwrap(), &url], state.path(), 16 << 20);
    assert!(!server.path("big.bin").exists(), "no file under the final name after the kill");
    let out = Command::new(ferry_bin())
        .args(["cp", "--json", "-p", "4", "--transport", "quic", "--ca", &ca, "--verify", src.to_str().unwrap(), &url])
        .env("FERRY_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), server.log_text());
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"resumed\":1"));
    assert_eq!(sha256_file(&server.path("big.bin")), sha256_file(&src));
    let all = server.transfers("/big.bin");
    let resumed: Vec<_> = all.iter().filter(|t| t["restart"] == true).collect();
    assert_eq!(resumed.len(), 1, "{all:?}");
    assert_eq!(resumed[0]["transport"], "quic");
    let bytes = resumed[0]["bytes"].as_u64().unwrap();
    assert!(bytes <= SIZE - (16 << 20), "the resumed upload moved {bytes} of {SIZE} bytes");
}

/// A datagram shaped like a QUIC v1 Initial (long header, random
/// connection IDs, no token, padded to 1200 bytes) whose protected payload
/// is noise: what a spoofing flood looks like.
fn fake_initial(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    };
    let mut p = vec![0xC3, 0, 0, 0, 1, 8];
    p.extend((0..8).map(|_| next()));
    p.push(8);
    p.extend((0..8).map(|_| next()));
    p.push(0); // token length
    let len = 1200 - p.len() - 2;
    p.extend_from_slice(&[0x40 | ((len >> 8) as u8), len as u8]);
    p.extend((0..len).map(|_| next()));
    p
}

#[test]
fn junk_and_initial_floods_neither_stop_nor_grow_the_server() {
    let pki = TestPki::new();
    let server = tls_server(&pki, &[]);
    let ca = pki.file("ca.pem");
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("slow.bin");
    random_file(&src, 24 << 20, 61);
    // A slow upload keeps a QUIC listener of the server open.
    let url = ftps_url(&server, ALICE, "/slow.bin");
    let mut slow = Command::new(ferry_bin())
        .args(["cp", "-q", "-p", "2", "--max-rate", "6M", "--transport", "quic", "--ca", &ca, "--verify"])
        .args([src.to_str().unwrap(), &url])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let ports = loop {
        let p = udp_ports_of(server.pid());
        if !p.is_empty() {
            break p;
        }
        assert!(Instant::now() < deadline, "the server never opened a QUIC port");
        std::thread::sleep(Duration::from_millis(50));
    };
    let rss_before = proc_status(server.pid(), "VmRSS");
    let flood = UdpSocket::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    let mut sent = 0u64;
    for i in 0..20_000u64 {
        for &port in &ports {
            let to = ("127.0.0.1", port);
            let junk: Vec<u8> = (0..(i % 1400) as usize).map(|j| (i as usize * 31 + j) as u8).collect();
            let _ = flood.send_to(&junk, to);
            let _ = flood.send_to(&fake_initial(i), to);
            sent += 2;
        }
        if started.elapsed() > Duration::from_secs(10) {
            break;
        }
    }
    // Another client is served meanwhile, over QUIC too.
    random_file(&server.path("other.bin"), 3_000_000, 62);
    let other = local.path().join("other.bin");
    let (ok, _, err) = ferry(&[
        "cp",
        "-q",
        "--transport",
        "quic",
        "--ca",
        &ca,
        "-p",
        "2",
        "--verify",
        &ftps_url(&server, ALICE, "/other.bin"),
        other.to_str().unwrap(),
    ]);
    assert!(ok, "{err}\n{}", server.log_text());
    assert_eq!(sha256_file(&other), sha256_file(&server.path("other.bin")));
    let rss_after = proc_status(server.pid(), "VmRSS");
    let status = slow.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(slow.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "the slow upload failed: {err}\n{}", server.log_text());
    assert_eq!(sha256_file(&server.path("slow.bin")), sha256_file(&src));
    // 20k+ datagrams of state would be tens of MB; allow the allocator's noise.
    assert!(
        rss_after < rss_before + (16 << 10),
        "server memory grew from {rss_before} kB to {rss_after} kB after {sent} datagrams"
    );
}

/// Servers that cannot verify each other's certificate (no
/// `--tls-peer-ca`) refuse `DCAU S`; the client then sends `PROT C` to both
/// (docs/tls.md: over TCP both would be TLS servers), QUIC is used only
/// under `PROT P`, so the data moves over TCP and the copy completes.
#[test]
fn third_party_copies_asked_for_quic_move_over_tcp_without_peer_trust() {
    let pki = TestPki::new();
    let a = tls_server(&pki, &["--require-tls"]);
    let b = tls_server(&pki, &["--require-tls"]);
    random_file(&a.path("x.bin"), (3 << 20) + 5, 11);
    let ca = pki.file("ca.pem");
    let (ok, out, err) = ferry(&[
        "cp",
        "--json",
        "--transport",
        "quic",
        "--ca",
        &ca,
        "--mode",
        "extended",
        "-p",
        "2",
        "--verify",
        &ftps_url(&a, ALICE, "/x.bin"),
        &ftps_url(&b, ALICE, "/y.bin"),
    ]);
    assert!(ok, "{err}\nA:\n{}\nB:\n{}", a.log_text(), b.log_text());
    // --json names the transport the data used, not the one TPRT accepted.
    assert!(out.contains("\"transport\":\"tcp\"") && !out.contains("\"transport\":\"quic\""), "{out}");
    assert_eq!(sha256_file(&b.path("y.bin")), sha256_file(&a.path("x.bin")));
    assert_eq!(transports_of(&a, "/x.bin"), vec!["tcp"]);
    assert_eq!(transports_of(&b, "/y.bin"), vec!["tcp"]);
}

fn third_party_quic(pki: &TestPki, a: &FerryServer, b: &FerryServer, p: &str) -> (bool, String, String) {
    let ca = pki.file("ca.pem");
    ferry(&[
        "cp",
        "--json",
        "--transport",
        "quic",
        "--ca",
        &ca,
        "--mode",
        "extended",
        "-p",
        p,
        "--verify",
        "--no-resume",
        &ftps_url(a, ALICE, "/x.bin"),
        &ftps_url(b, ALICE, "/y.bin"),
    ])
}

/// Third-party QUIC between two Ferry servers (issue 19) with certificate
/// checks both ways: the client names each server to the other (`DCAU S
/// localhost`, the name it verified on the control channels), the source
/// verifies the destination's certificate as any server's and presents its
/// own as a client certificate, which the destination verifies for the
/// name, both against `--tls-peer-ca`. The data moves over QUIC, and
/// `--json` says so.
#[test]
fn third_party_copies_over_quic_with_certificates_checked_both_ways() {
    let pki = TestPki::new();
    let ca = pki.file("ca.pem");
    let flags = ["--require-tls", "--require-protected-data", "--tls-peer-ca", ca.as_str()];
    let a = tls_server(&pki, &flags);
    let b = tls_server(&pki, &flags);
    random_file(&a.path("x.bin"), (5 << 20) + 9, 13);
    for p in ["1", "4"] {
        let (ok, out, err) = third_party_quic(&pki, &a, &b, p);
        assert!(ok, "-p {p}: {err}\nA:\n{}\nB:\n{}", a.log_text(), b.log_text());
        assert!(out.contains("\"transport\":\"quic\"") && !out.contains("\"transport\":\"tcp\""), "{out}");
        assert_eq!(sha256_file(&b.path("y.bin")), sha256_file(&a.path("x.bin")), "-p {p}");
    }
    assert_eq!(transports_of(&a, "/x.bin"), vec!["quic", "quic"], "{}", a.log_text());
    assert_eq!(transports_of(&b, "/y.bin"), vec!["quic", "quic"], "{}", b.log_text());
}

/// The checks are real: a destination that trusts another CA refuses the
/// source's certificate, and the copy fails instead of moving unverified
/// data; nothing is stored complete.
#[test]
fn third_party_quic_fails_when_a_server_does_not_trust_the_other() {
    let pki = TestPki::new();
    let other = TestPki::new();
    let ca = pki.file("ca.pem");
    let wrong = other.file("ca.pem");
    let a = tls_server(&pki, &["--require-tls", "--tls-peer-ca", ca.as_str(), "--data-timeout", "5"]);
    let b = tls_server(&pki, &["--require-tls", "--tls-peer-ca", wrong.as_str(), "--data-timeout", "5"]);
    random_file(&a.path("x.bin"), (1 << 20) + 1, 17);
    let (ok, out, err) = third_party_quic(&pki, &a, &b, "2");
    assert!(!ok, "a copy between servers that do not trust each other succeeded: {out}");
    assert!(!b.path("y.bin").exists() || sha256_file(&b.path("y.bin")) != sha256_file(&a.path("x.bin")), "{err}");
}

/// `ferry cp --path-rate` over QUIC: the client announces the rate (`OPTS
/// TPRT Rate=N;`) and the server's QUIC sender of a download starts its
/// controller at it (its log line says so); without one it starts cold.
/// An upload's sender is the client, which uses its own `--path-rate`.
/// The client's listener of a download (the expected peer, idle) takes the
/// server's connection without a Retry.
#[test]
fn a_measured_path_rate_starts_the_servers_quic_sender() {
    let pki = TestPki::new();
    let server = tls_server(&pki, &[]);
    random_file(&server.path("r.bin"), 2 << 20, 7);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("r.bin");
    let dst_s = dst.display().to_string();
    let ca = pki.file("ca.pem");
    let url = ftps_url(&server, ALICE, "/r.bin");
    for (extra, want) in [(&["--path-rate", "20000000"][..], "20000000 B/s"), (&[][..], "cold")] {
        let args = [
            &["cp", "-q", "--transport", "quic", "--ca", &ca, "--mode", "extended", "-p", "2", "--no-resume"][..],
            extra,
            &[&url, &dst_s],
        ]
        .concat();
        let (ok, _, err) = ferry(&args);
        assert!(ok, "{args:?}: {err}\n{}", server.log_text());
        assert_eq!(sha256_file(&dst), sha256_file(&server.path("r.bin")));
        assert_eq!(
            server.logged("QUIC data connection up", "start").last().map(String::as_str),
            Some(want),
            "{}",
            server.log_text()
        );
    }
    assert_eq!(transports_of(&server, "/r.bin"), vec!["quic"; 2]);
}
