//! UDT data channels (issue 17) end to end: `ferry cp --transport udt`
//! against `ferry serve`, up and down, one and four streams, checksums
//! verified; a killed copy resumed from its restart markers; FEAT and a raw
//! `TPRT udt` + RETR read with Ferry's UDT driver; and real UDT software on
//! the other end — the Globus GridFTP server with `-dc-default udt`
//! (libglobus-xio-udt-driver, libudt 4.11) exchanging data with
//! `ferry serve --data-transport udt` in third-party copies driven by
//! globus-url-copy. (globus-url-copy's own `-udt` is ignored for ftp://
//! URLs — it sends `SITE SETNETSTACK` only for gsiftp://; see
//! /work/shared/reference/globus/README.md.)

mod support;
use ferry_io::udt::{UdtConfig, UdtStream};
use std::io::Read;
use std::process::{Child, Command, Stdio};

use support::*;

fn transports_of(server: &FerryServer, path: &str) -> Vec<String> {
    server.transfers(path).iter().map(|t| t["transport"].as_str().unwrap_or("?").to_string()).collect()
}

#[test]
fn udt_uploads_and_downloads_with_one_and_four_streams() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (12 << 20) + 7, 17);
    let src_s = src.display().to_string();
    for (mode, p, name) in [("extended", "1", "e1.bin"), ("extended", "4", "e4.bin"), ("stream", "1", "s.bin")] {
        let url = server.url(ALICE, &format!("/{name}"));
        let args = ["cp", "--json", "--transport", "udt", "--mode", mode, "-p", p, "--verify", "--no-resume"];
        let (ok, out, err) = ferry(&[&args[..], &[&src_s, &url]].concat());
        assert!(ok, "upload {mode} -p {p}: {err}\n{}", server.log_text());
        assert!(out.contains("\"transport\":\"udt\""), "{out}");
        assert_eq!(sha256_file(&server.path(name)), sha256_file(&src), "upload {name}");
        let back = local.path().join(format!("back-{name}"));
        let back_s = back.display().to_string();
        let (ok, _, err) = ferry(&[&args[..], &[&url, &back_s]].concat());
        assert!(ok, "download {mode} -p {p}: {err}\n{}", server.log_text());
        assert_eq!(sha256_file(&back), sha256_file(&src), "download {name}");
        assert_eq!(transports_of(&server, &format!("/{name}")), vec!["udt", "udt"], "{}", server.log_text());
    }
}

#[test]
fn feat_offers_udt_and_tprt_udt_moves_a_retr_over_udt() {
    let server = FerryServer::start();
    random_file(&server.path("r.bin"), 3_000_001, 7);
    let mut c = RawControl::connect(server.addr);
    let feat = c.cmd("FEAT");
    assert!(feat.contains(" TRANSPORTS tcp;udt"), "{feat}");
    c.login(ALICE);
    assert!(c.cmd("TYPE I").starts_with("200"));
    let r = c.cmd("TPRT udt");
    assert!(r.starts_with('2'), "{r}");
    let r = c.cmd("SITE SETNETSTACK udt");
    assert!(r.starts_with('2'), "{r}");
    let to = pasv_addr(&c.cmd("PASV"));
    let stream = UdtStream::connect(to, UdtConfig::default()).unwrap();
    c.send(b"RETR r.bin\r\n");
    let r = c.reply();
    assert!(r.starts_with("150") || r.starts_with("125"), "{r}");
    let mut got = Vec::new();
    (&stream).read_to_end(&mut got).unwrap();
    let r = c.reply();
    assert!(r.starts_with("226"), "{r}");
    assert_eq!(got, std::fs::read(server.path("r.bin")).unwrap());
    assert_eq!(transports_of(&server, "/r.bin"), vec!["udt"]);
}

#[test]
fn a_server_defaulting_to_udt_serves_udt_clients() {
    let server = FerryServer::start_with(&["--data-transport", "udt"]);
    random_file(&server.path("d.bin"), 2_000_003, 5);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("d.bin");
    let url = server.url(ALICE, "/d.bin");
    let (ok, _, err) = ferry(&["cp", "-q", "--transport", "udt", "-p", "2", "--verify", &url, dst.to_str().unwrap()]);
    assert!(ok, "{err}\n{}", server.log_text());
    assert_eq!(sha256_file(&dst), sha256_file(&server.path("d.bin")));
    assert_eq!(transports_of(&server, "/d.bin"), vec!["udt"]);
}

const SIZE: u64 = 48 << 20;

#[test]
fn a_killed_udt_upload_resumes_from_its_restart_markers() {
    let server = FerryServer::start_with(&["--marker-interval", "1"]);
    let url = server.url(ALICE, "/big.bin");
    let resumed = kill_then_resume_upload(&server, &url, &["--transport", "udt"], 53);
    assert_eq!(resumed["transport"], "udt");
}

/// Starts an upload of a fresh `SIZE`-byte file to `url` with `cp_args`,
/// kills it once 16 MiB are in, checks nothing appeared under the final
/// name, resumes it with `-p 4 --verify` and checks the bytes: returns the
/// server's record of the resumed transfer (which must have moved none of
/// the bytes the restart record held).
fn kill_then_resume_upload(server: &FerryServer, url: &str, cp_args: &[&str], seed: u64) -> serde_json::Value {
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let src = local.path().join("big.bin");
    random_file(&src, SIZE, seed);
    let src_arg = src.to_str().unwrap();
    let first: Vec<&str> = cp_args.iter().copied().chain([src_arg, url]).collect();
    start_and_kill_capped(&first, state.path(), 16 << 20);
    assert!(!server.path("big.bin").exists(), "no file under the final name after the kill");
    let held = recorded_bytes(state.path());
    let records: Vec<String> = std::fs::read_dir(state.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| format!("{:?}: {}", e.file_name(), std::fs::read_to_string(e.path()).unwrap_or_default()))
        .collect();
    let out = Command::new(ferry_bin())
        .args(["cp", "--json", "-p", "4", "--verify"])
        .args(cp_args)
        .args([src_arg, url])
        .env("FERRY_STATE_DIR", state.path())
        .env("FERRY_LOG", "info")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), server.log_text());
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"resumed\":1"));
    assert_eq!(sha256_file(&server.path("big.bin")), sha256_file(&src));
    let all = server.transfers("/big.bin");
    let resumed: Vec<_> = all.iter().filter(|t| t["restart"] == true).collect();
    assert_eq!(resumed.len(), 1, "{all:?}");
    let bytes = resumed[0]["bytes"].as_u64().unwrap();
    // What the protocol promises: a 111 marker reports only ranges the
    // server has synced and recorded in its partial's record (a
    // checkpoint: data, then record, then marker), the client's record
    // holds only ranges of markers it received, and a resume sends none of
    // what the server holds (`SITE PARTIAL`, checked against the source).
    // So the resume moves at most what the record left, byte for byte.
    // (Session 9's one CI failure, 33 MiB moved after a "16 MiB" record,
    // was the test's count: it summed the record and its `.tmp` twin, so
    // it killed the copy with 15 MiB recorded; see `recorded_bytes`.)
    assert!(held >= 16 << 20, "the kill came once 16 MiB were recorded, the record holds {held}: {records:?}");
    assert!(
        bytes <= SIZE - held,
        "the resumed upload moved {bytes} of {SIZE} bytes; the record held {held}\nrecords after the kill: \
         {records:?}\nresume: {}\n{all:?}\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    resumed[0].clone()
}

/// The rate the first copy of [`kill_then_resume_upload`] is held to,
/// bytes per second.
const KILL_RATE: u64 = 6_000_000;

/// Starts `ferry cp -p 4 --max-rate KILL_RATE ARGS` and kills it once its
/// restart record holds `min` bytes. At `start_and_kill`'s 16 MB/s a
/// 48 MiB copy ran 3.1 s and the record reached 16 MiB only with the 2 s
/// marker (markers every second, the client saving its record at most
/// every 250 ms), about 1 s before the copy could finish: under load the
/// kill sometimes lost that race ("the copy ended before it could be
/// killed"). At 6 MB/s (the cap is one token bucket for the transfer's
/// streams) the copy needs at least 8.4 s, 16 MiB are recorded with the
/// 3 s marker, and at least 5 s — five markers, twenty record periods —
/// remain when the kill is due. What the test asserts is unchanged.
fn start_and_kill_capped(args: &[&str], state: &std::path::Path, min: u64) {
    let ran = start_and_kill_at(args, state, min, &KILL_RATE.to_string());
    // The cap held: the copy cannot have moved much more than the rate.
    assert!(
        (min as f64) < KILL_RATE as f64 * ran.as_secs_f64() + 1e6,
        "{min} bytes recorded in {ran:?}: the first copy ran above --max-rate {KILL_RATE}"
    );
}

/// A server whose default is UDT (`--data-transport udt`) serves curl, an
/// FTPS client that never asks for a transport, over TCP with TLS under
/// PROT P (as a QUIC default does), and still gives encrypted UDT to a
/// Ferry client that asks.
#[test]
fn a_udt_default_server_serves_curl_over_tcp_with_tls() {
    let curl = require("curl");
    let pki = TestPki::new();
    let server = tls_server(&pki, &["--data-transport", "udt", "--require-tls", "--require-protected-data"]);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (3 << 20) + 11, 24);
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
    let asked = local.path().join("asked.bin");
    let url = ftps_url(&server, ALICE, "/up.bin");
    let (ok, out, err) =
        ferry(&["cp", "--json", "--transport", "udt", "--ca", &ca, "--verify", &url, asked.to_str().unwrap()]);
    assert!(ok, "{err}\n{}", server.log_text());
    assert!(out.contains("\"transport\":\"udt\""), "{out}");
    assert_eq!(sha256_file(&asked), sha256_file(&src));
    let want: Vec<(String, bool)> =
        [("tcp", true), ("tcp", true), ("udt", true)].map(|(t, p)| (t.to_string(), p)).into();
    assert_eq!(channels_of(&server, "/up.bin"), want, "{}", server.log_text());
}

/// The same under PROT P: a killed encrypted UDT upload resumes from its
/// restart markers over a new encrypted channel (new keys: a new control
/// session), byte-identical with the checksum verified.
#[test]
fn a_killed_encrypted_udt_upload_resumes_from_its_restart_markers() {
    let pki = TestPki::new();
    let server = tls_server(&pki, &["--marker-interval", "1", "--require-protected-data"]);
    let ca = pki.file("ca.pem");
    let url = ftps_url(&server, ALICE, "/big.bin");
    let resumed = kill_then_resume_upload(&server, &url, &["--transport", "udt", "--ca", &ca], 54);
    assert_eq!((resumed["transport"].as_str(), resumed["protected"].as_bool()), (Some("udt"), Some(true)));
}

/// The Globus GridFTP server as the reference runs its UDT end:
/// anonymous, loopback, as `nobody`, data channels over UDT by default.
struct GlobusUdtServer {
    _server: PeerProcess,
    port: u16,
    dir: tempfile::TempDir,
    log: std::path::PathBuf,
}

impl GlobusUdtServer {
    fn start() -> Self {
        Self::start_defaulting_to("udt")
    }

    /// With `-dc-default tcp`: its data channels are UDT only after a
    /// client's `SITE SETNETSTACK udt`.
    fn start_defaulting_to(stack: &str) -> Self {
        require("globus-gridftp-server");
        require("setpriv");
        let dir = tempfile::tempdir().unwrap();
        chown_nobody(dir.path());
        let log = dir.path().join("server.log");
        let port = free_port();
        let server = PeerProcess::spawn(
            Command::new("setpriv")
                .args(["--reuid=nobody", "--regid=nogroup", "--init-groups", "globus-gridftp-server"])
                .args(["-c", "/dev/null", "-aa", "-p", &port.to_string()])
                .args(["-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1"])
                .args(["-threads", "2", "-dc-whitelist", "udt,tcp", "-dc-default", stack, "-log-level", "ALL", "-l"])
                .arg(&log)
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        wait_for_port(port);
        Self { _server: server, port, dir, log }
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    fn url(&self, rel: &str) -> String {
        format!("ftp://127.0.0.1:{}{}/{}", self.port, self.dir.path().display(), rel)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

#[test]
fn globus_udt_server_and_ferry_udt_server_exchange_data_both_ways() {
    let ferry_srv = FerryServer::start_with(&["--data-transport", "udt"]);
    let globus = GlobusUdtServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (8 << 20) + 13, 31);
    let want = sha256_file(&src);
    std::fs::copy(&src, ferry_srv.path("f.bin")).unwrap();
    std::fs::copy(&src, globus.path("f.bin")).unwrap();
    chown_nobody(globus.dir.path());

    for p in ["1", "4"] {
        // Globus (libudt) sends, Ferry's UDT receives...
        let to = format!("/from-globus-{p}.bin");
        let (ok, t) = guc(&["-p", p, &globus.url("f.bin"), &ferry_srv.url(ALICE, &to)]);
        assert!(ok, "{t}\n{}\n{}", ferry_srv.log_text(), globus.log_text());
        assert_eq!(sha256_file(&ferry_srv.path(&to[1..])), want);
        assert_eq!(transports_of(&ferry_srv, &to), vec!["udt"], "{}", ferry_srv.log_text());
        // ...and Ferry's UDT sends, Globus receives.
        let name = format!("from-ferry-{p}.bin");
        let (ok, t) = guc(&["-p", p, &ferry_srv.url(ALICE, "/f.bin"), &globus.url(&name)]);
        assert!(ok, "{t}\n{}\n{}", ferry_srv.log_text(), globus.log_text());
        assert_eq!(sha256_file(&globus.path(&name)), want);
    }
    assert!(transports_of(&ferry_srv, "/f.bin").iter().all(|t| t == "udt"), "{}", ferry_srv.log_text());
}

/// Session 12: a fresh `ferry cp --transport udt` download sends its whole
/// dialogue in the login's write — `TPRT udt` (and a rate), `SITE
/// SETNETSTACK udt`, the MODE E set-up, SPOR and RETR — so it costs one
/// control round trip, as a TCP download does (`round_trips.rs`), where it
/// cost two (the set-up waited for the answer to TPRT). Counted through a
/// relay that delays the control connection by 250 ms each way; data
/// connections go direct, and the files are small (256 KiB) so that the
/// data phase (a debug build's, on a loaded machine) stays short of a
/// round trip.
const RELAY_ONE_WAY: std::time::Duration = std::time::Duration::from_millis(250);

/// Round trips of a fresh `ferry cp --json --transport udt URL` through the
/// relay, and its JSON.
fn udt_download_round_trips(url: &str, extra: &[&str], expect: &std::path::Path) -> (f64, String, String) {
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f");
    let mut args = vec!["cp", "--json", "--no-path-cache", "--retries", "0", "--transport", "udt"];
    args.extend(extra);
    args.extend([url, dst.to_str().unwrap()]);
    let t = std::time::Instant::now();
    let (ok, json, err) = ferry(&args);
    let rtts = t.elapsed().as_secs_f64() / (2.0 * RELAY_ONE_WAY.as_secs_f64());
    eprintln!("{url} {extra:?}: {rtts:.2} round trips");
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&dst), sha256_file(expect));
    (rtts, json, err)
}

#[test]
fn a_fresh_udt_download_from_ferry_costs_one_control_round_trip() {
    let server = FerryServer::start();
    random_file(&server.path("f"), 256 << 10, 61);
    let proxy = DelayProxy::start(server.addr, RELAY_ONE_WAY);
    let url = format!("ftp://{}/f", proxy.addr);
    // Before, the set-up waited for the answer to TPRT: two round trips.
    // (The rate is far above what the data phase needs, which runs
    // direct on loopback and must not count.)
    for extra in [&[][..], &["--path-rate", "1000000000"][..], &["-p", "2"][..]] {
        let (rtts, json, err) = udt_download_round_trips(&url, extra, &server.path("f"));
        assert_eq!(json_transport(&json), "udt", "{extra:?}: {json}");
        assert!(rtts < 1.6, "{extra:?}: a fresh udt download took {rtts:.2} round trips\n{err}");
    }
    // The rate announced in the login's write reached the server's sender.
    assert!(
        controllers_opened(&server).iter().any(|c| c.starts_with("ferry ProbeBw")),
        "{:?}",
        controllers_opened(&server)
    );
    assert!(transports_of(&server, "/f").iter().all(|t| t == "udt"), "{}", server.log_text());
    assert_eq!(proxy.connections(), 3, "one session per copy");
}

#[test]
fn a_fresh_udt_download_from_globus_asks_with_setnetstack_in_the_same_write() {
    // Data channels on TCP unless a client asks `SITE SETNETSTACK udt`: a
    // copy that says udt and arrives intact was asked for the Globus way
    // (the client listens for UDT only once the answers say so).
    let globus = GlobusUdtServer::start_defaulting_to("tcp");
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("f");
    random_file(&src, 256 << 10, 62);
    std::fs::copy(&src, globus.path("g.bin")).unwrap();
    chown_nobody(globus.dir.path());
    let proxy = DelayProxy::start(format!("127.0.0.1:{}", globus.port).parse().unwrap(), RELAY_ONE_WAY);
    let url = globus.url("g.bin").replace(&format!("127.0.0.1:{}", globus.port), &proxy.addr.to_string());
    // Before: the login and TPRT, SETNETSTACK, then the set-up: three.
    for extra in [&[][..], &["--path-rate", "1000000000"][..]] {
        let (rtts, json, err) = udt_download_round_trips(&url, extra, &src);
        assert_eq!(json_transport(&json), "udt", "{extra:?}: {json}\n{}", globus.log_text());
        assert!(rtts < 2.0, "{extra:?}: a fresh udt download from Globus took {rtts:.2} round trips\n{err}");
    }
}

#[test]
fn a_fresh_udt_download_from_a_server_without_udt_moves_over_tcp() {
    // A Globus server without the UDT driver (`-dc-whitelist` left as it
    // is) answers TPRT 500 and refuses SITE SETNETSTACK udt: the RETR
    // already sent runs over the twinned TCP listener, in the same round
    // trip.
    let globus = GlobusServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("f");
    random_file(&src, 256 << 10, 63);
    globus.put("f", &src);
    let proxy = DelayProxy::start(format!("127.0.0.1:{}", globus.port).parse().unwrap(), RELAY_ONE_WAY);
    let url = globus.url("f").replace(&format!("127.0.0.1:{}", globus.port), &proxy.addr.to_string());
    let (rtts, json, err) = udt_download_round_trips(&url, &[], &src);
    assert_eq!(json_transport(&json), "tcp", "{json}");
    // (Before: three, as from Globus with UDT; a Globus session's start
    // takes a variable part of a round trip on a loaded machine.)
    assert!(rtts < 2.0, "took {rtts:.2} round trips\n{err}");
    // pure-ftpd knows neither TPRT, SITE SETNETSTACK nor MODE E: the
    // pipelined RETR fails and the copy goes on in stream mode.
    let ftpd = PureFtpd::start();
    random_file(&ftpd.home.path().join("f"), 1 << 20, 64);
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("f");
    let (ok, json, err) =
        ferry(&["cp", "--json", "--no-path-cache", "--transport", "udt", &ftpd.url("/f"), dst.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&dst), sha256_file(&ftpd.home.path().join("f")));
    assert_eq!(json_transport(&json), "tcp", "{json}");
}

fn tls_server(pki: &TestPki, extra: &[&str]) -> FerryServer {
    let mut flags = pki.serve_flags();
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    FerryServer::start_with(&flags)
}

/// (transport, protected) of each logged transfer of `path`.
fn channels_of(server: &FerryServer, path: &str) -> Vec<(String, bool)> {
    server
        .transfers(path)
        .iter()
        .map(|t| (t["transport"].as_str().unwrap_or("?").to_string(), t["protected"].as_bool().unwrap_or(false)))
        .collect()
}

/// `ferry cp --transport udt` to and from an FTPS server that requires
/// protected data: the client asks `TPRT udt:aes-gcm`, the data moves over
/// UDT under PROT P as AES-GCM records keyed from the control channel's
/// TLS session, and arrives byte-identical with the checksum verified,
/// one and four streams, both directions. What this proves: the transfer
/// ran over UDT under PROT P (the server logs `transport=udt`,
/// `protected=true`) and the server, which refuses PROT P data over UDT
/// without the record layer, accepted it. That the bytes on the wire are
/// not the plaintext, and that a flipped bit fails the channel, is shown
/// at the transport level through a UDP relay
/// (`ferry_io::transport::udt::tests::sealed_udt_moves_records_not_plaintext`,
/// `a_tampered_packet_fails_the_channel_and_never_delivers_wrong_data`).
#[test]
fn udt_under_prot_p_is_encrypted_and_byte_identical_both_ways() {
    let pki = TestPki::new();
    let server = tls_server(&pki, &["--require-protected-data"]);
    let feat = raw_feat(&server);
    assert!(feat.contains(" TPRT udt:aes-gcm"), "{feat}");
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (9 << 20) + 13, 23);
    let src_s = src.display().to_string();
    let ca = pki.file("ca.pem");
    for (mode, p, name) in [("extended", "1", "e1.bin"), ("extended", "4", "e4.bin"), ("stream", "1", "s.bin")] {
        let url = ftps_url(&server, ALICE, &format!("/{name}"));
        let args =
            ["cp", "--json", "--ca", &ca, "--transport", "udt", "--mode", mode, "-p", p, "--verify", "--no-resume"];
        let (ok, out, err) = ferry(&[&args[..], &[&src_s, &url]].concat());
        assert!(ok, "upload {mode} -p {p}: {err}\n{}", server.log_text());
        assert!(out.contains("\"transport\":\"udt\""), "{out}");
        assert_eq!(sha256_file(&server.path(name)), sha256_file(&src), "upload {name}");
        let back = local.path().join(format!("back-{name}"));
        let back_s = back.display().to_string();
        let (ok, _, err) = ferry(&[&args[..], &[&url, &back_s]].concat());
        assert!(ok, "download {mode} -p {p}: {err}\n{}", server.log_text());
        assert_eq!(sha256_file(&back), sha256_file(&src), "download {name}");
        let want = vec![("udt".to_string(), true), ("udt".to_string(), true)];
        assert_eq!(channels_of(&server, &format!("/{name}")), want, "{}", server.log_text());
    }
}

fn raw_feat(server: &FerryServer) -> String {
    use std::io::{BufRead, BufReader, Write};
    let s = std::net::TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    w.write_all(b"FEAT\r\n").unwrap();
    let mut out = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap() == 0 {
            break;
        }
        out.push_str(&line);
        if line.starts_with("211 ") {
            break;
        }
    }
    out
}

/// A client that is not Ferry-style (Python's ftplib: AUTH TLS, PROT P,
/// then plain `TPRT udt` without the encryption option) gets a 425 that
/// says why, and nothing moves in clear.
const FTPLIB_PLAIN_UDT: &str = r#"
import ftplib, io, os, ssl
ctx = ssl.create_default_context(cafile=os.environ["CA"])
ftp = ftplib.FTP_TLS(context=ctx, timeout=30)
ftp.connect("localhost", int(os.environ["PORT"]))
ftp.auth()
ftp.login(os.environ["USER"], os.environ["PASS"])
ftp.prot_p()
print("TPRT", ftp.sendcmd("TPRT udt"))
print("PASV", ftp.sendcmd("PASV"))
# The listener is UDP: nothing to connect to with TCP. The server either
# opens an encrypted channel (it cannot: no hello from us) or refuses;
# read its replies to RETR.
ftp.putcmd("RETR p.bin")
while True:
    line = ftp.getline()
    print("LINE", line)
    if line[:1] in "2345" and line[3:4] == " ":
        break
ftp.quit()
"#;

#[test]
fn plain_tprt_udt_under_prot_p_gets_a_425_never_clear_data() {
    let python = require("python3");
    let pki = TestPki::new();
    let server = tls_server(&pki, &["--require-protected-data"]);
    random_file(&server.path("p.bin"), 500_000, 9);
    let out = Command::new(python)
        .args(["-c", FTPLIB_PLAIN_UDT])
        .env("PORT", server.addr.port().to_string())
        .env("CA", pki.file("ca.pem"))
        .env("USER", ALICE.0)
        .env("PASS", ALICE.1)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("TPRT 200"), "{text}");
    assert!(text.contains("LINE 425") && text.contains("udt:aes-gcm"), "{text}\n{}", server.log_text());
    let moved: u64 = server.transfers("/p.bin").iter().filter_map(|t| t["bytes"].as_u64()).sum();
    assert_eq!(moved, 0, "{}", server.log_text());
}

/// Third-party between two FTPS servers over UDT follows the rule TCP
/// third-party copies follow (docs/transports.md, RFC 4217 §7): the two
/// servers share no TLS session, so the client sets PROT C on both and the
/// data moves over UDT in clear — both servers log `udt` and
/// `protected=false` — with the control channels' certificates verified
/// as always.
#[test]
fn a_third_party_ftps_copy_over_udt_moves_in_clear_as_tcp_does() {
    let pki = TestPki::new();
    let a = tls_server(&pki, &["--require-tls"]);
    let b = tls_server(&pki, &["--require-tls"]);
    random_file(&a.path("x.bin"), (5 << 20) + 5, 12);
    let ca = pki.file("ca.pem");
    for p in ["1", "4"] {
        let to = format!("/x-{p}.bin");
        let (ok, out, err) = ferry(&[
            "cp",
            "--json",
            "--ca",
            &ca,
            "--transport",
            "udt",
            "-p",
            p,
            "--verify",
            &ftps_url(&a, ALICE, "/x.bin"),
            &ftps_url(&b, ALICE, &to),
        ]);
        assert!(ok, "-p {p}: {err}\nA:\n{}\nB:\n{}", a.log_text(), b.log_text());
        assert!(out.contains("\"transport\":\"udt\""), "{out}");
        assert_eq!(sha256_file(&b.path(&to[1..])), sha256_file(&a.path("x.bin")));
        assert_eq!(channels_of(&b, &to), vec![("udt".to_string(), false)], "{}", b.log_text());
    }
    let src = channels_of(&a, "/x.bin");
    assert_eq!(src, vec![("udt".to_string(), false); 2], "{}", a.log_text());
}

#[test]
fn a_third_party_copy_between_ferry_servers_moves_over_udt() {
    let a = FerryServer::start();
    let b = FerryServer::start();
    random_file(&a.path("t.bin"), (6 << 20) + 3, 41);
    for p in ["1", "4"] {
        let to = format!("/t-{p}.bin");
        let (ok, _, err) = ferry(&[
            "cp",
            "-q",
            "--transport",
            "udt",
            "-p",
            p,
            "--verify",
            &a.url(ALICE, "/t.bin"),
            &b.url(ALICE, &to),
        ]);
        assert!(ok, "{err}\n{}\n{}", a.log_text(), b.log_text());
        assert_eq!(sha256_file(&b.path(&to[1..])), sha256_file(&a.path("t.bin")));
        assert_eq!(transports_of(&b, &to), vec!["udt"], "{}", b.log_text());
    }
    assert_eq!(transports_of(&a, "/t.bin"), vec!["udt", "udt"], "{}", a.log_text());
}

#[test]
fn ferry_cp_over_udt_downloads_from_and_uploads_to_a_globus_udt_server() {
    // Globus knows no TPRT: the client falls back to `SITE SETNETSTACK udt`
    // (Globus's own way) and its data channels then meet libudt. With
    // -p 4 the client also has a measured path rate (`--path-rate`): the
    // upload sends Globus no `OPTS TPRT` (TPRT was not how UDT was
    // chosen; a fresh download sends it in the login's write with the
    // SETNETSTACK, and Globus's refusal changes nothing), and its own UDT
    // sender of the upload starts at it against libudt's receiver.
    let globus = GlobusUdtServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (6 << 20) + 17, 43);
    let want = sha256_file(&src);
    std::fs::copy(&src, globus.path("g.bin")).unwrap();
    chown_nobody(globus.dir.path());
    for p in ["1", "4"] {
        let down = local.path().join(format!("down-{p}.bin"));
        let rate: &[&str] = if p == "4" { &["--path-rate", "50000000"] } else { &[] };
        let (ok, out, err) = ferry(
            &[
                &["cp", "-q", "--json", "--retries", "0", "--transport", "udt", "-p", p][..],
                rate,
                &[&globus.url("g.bin"), down.to_str().unwrap()],
            ]
            .concat(),
        );
        assert!(ok, "download -p {p}: {err}\n{}", globus.log_text());
        assert_eq!(json_transport(&out), "udt", "{out}");
        assert_eq!(sha256_file(&down), want);
        let name = format!("up-{p}.bin");
        let (ok, out, err) = ferry(
            &[
                &["cp", "-q", "--json", "--retries", "0", "--transport", "udt", "-p", p][..],
                rate,
                &[src.to_str().unwrap(), &globus.url(&name)],
            ]
            .concat(),
        );
        assert!(ok, "upload -p {p}: {err}\n{}", globus.log_text());
        assert_eq!(json_transport(&out), "udt", "{out}");
        assert_eq!(sha256_file(&globus.path(&name)), want);
    }
    // (A TCP data channel could not have worked: this server's data
    // channels are UDT unless a client asks `SITE SETNETSTACK tcp`.)
}

/// `ferry cp --path-rate R` (a rate `ferry probe` measured) reaches the
/// server, the sender of a download (`OPTS TPRT Rate=R;`): the server's
/// UDT connection starts cruising at R instead of in start-up, and the
/// client's own sender of an upload does too. Without it both start cold.
/// `--max-rate` caps what is announced.
#[test]
fn a_measured_path_rate_reaches_the_servers_udt_sender() {
    let server = FerryServer::start();
    random_file(&server.path("r.bin"), 2 << 20, 5);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("r.bin");
    let url = server.url(ALICE, "/r.bin");
    let cp = |extra: &[&str]| {
        let args =
            [&["cp", "-q", "--transport", "udt", "-p", "1", "--no-resume"][..], extra, &[&url, dst.to_str().unwrap()]]
                .concat();
        let (ok, _, err) = ferry(&args);
        assert!(ok, "{args:?}: {err}\n{}", server.log_text());
        assert_eq!(sha256_file(&dst), sha256_file(&server.path("r.bin")));
    };
    cp(&["--path-rate", "20000000"]);
    let c = controllers_opened(&server);
    assert_eq!(c.len(), 1, "{}", server.log_text());
    assert!(c[0].starts_with("ferry ProbeBw btl_bw 20000000 B/s"), "{c:?}");
    // capped by --max-rate: 6e6 announced and started at
    cp(&["--path-rate", "20000000", "--max-rate", "6000000"]);
    let c = controllers_opened(&server);
    assert!(c[1].starts_with("ferry ProbeBw btl_bw 6000000 B/s"), "{c:?}");
    // nothing measured: cold, as before
    cp(&[]);
    let c = controllers_opened(&server);
    assert!(c[2].starts_with("ferry Startup btl_bw 0 B/s"), "{c:?}");
    assert_eq!(transports_of(&server, "/r.bin"), vec!["udt"; 3]);
    // An upload: the client's sender starts at it too; the
    // server's receiving end logs its own (unused) controller.
    let up = server.url(ALICE, "/up.bin");
    let (ok, _, err) = ferry(&[
        "cp",
        "-q",
        "--transport",
        "udt",
        "--path-rate",
        "20000000",
        "--no-resume",
        dst.to_str().unwrap(),
        &up,
    ]);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&server.path("up.bin")), sha256_file(&dst));
}

/// The data-channel transport `ferry cp --json` reports.
fn json_transport(out: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap();
    v["transport"].as_str().unwrap_or("?").to_string()
}

/// `--congestion` picks UDT's controller at both ends: DAIMD (`udt`) moves
/// a file byte-identical both ways, and a server started with
/// `--congestion blast:RATE` sends at that fixed rate (nothing else limits
/// a loopback download, so it cannot finish sooner than size / rate).
#[test]
fn congestion_selects_udt_controllers_at_both_ends() {
    let server = FerryServer::start_with(&["--congestion", "blast:3M"]);
    random_file(&server.path("b.bin"), 6 << 20, 3);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("b.bin");
    let url = server.url(ALICE, "/b.bin");
    let started = std::time::Instant::now();
    let (ok, out, err) = ferry(&[
        "cp",
        "--json",
        "--transport",
        "udt",
        "--congestion",
        "udt",
        "-p",
        "1",
        "--no-resume",
        &url,
        dst.to_str().unwrap(),
    ]);
    let took = started.elapsed();
    assert!(ok, "{err}\n{}", server.log_text());
    assert_eq!(json_transport(&out), "udt");
    assert_eq!(sha256_file(&dst), sha256_file(&server.path("b.bin")));
    assert!(took.as_secs_f64() >= 1.5, "6 MiB at blast:3M took only {took:?}");
    // The client's DAIMD sends an upload.
    let up = server.url(ALICE, "/up.bin");
    let (ok, _, err) = ferry(&[
        "cp",
        "-q",
        "--transport",
        "udt",
        "--congestion",
        "udt",
        "--verify",
        "--no-resume",
        dst.to_str().unwrap(),
        &up,
    ]);
    assert!(ok, "{err}\n{}", server.log_text());
    assert_eq!(sha256_file(&server.path("up.bin")), sha256_file(&dst));
    // `--transport blast` with its rate from --max-rate.
    let up = server.url(ALICE, "/blast.bin");
    let (ok, _, err) =
        ferry(&["cp", "-q", "--transport", "blast", "--max-rate", "64M", "--no-resume", dst.to_str().unwrap(), &up]);
    assert!(ok, "{err}\n{}", server.log_text());
    assert_eq!(sha256_file(&server.path("blast.bin")), sha256_file(&dst));
    assert_eq!(transports_of(&server, "/blast.bin"), vec!["udt"]);
}

/// A controller the chosen transport does not have, blast without a rate,
/// or a name no transport has: refused before anything moves, saying why.
#[test]
fn congestion_names_the_chosen_transport_lacks_are_refused_clearly() {
    let server = FerryServer::start();
    random_file(&server.path("x.bin"), 1000, 1);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("x.bin");
    let url = server.url(ALICE, "/x.bin");
    let d = dst.to_str().unwrap();
    for (args, says) in [
        (&["--transport", "udt", "--congestion", "cubic"][..], "not a udt controller"),
        (&["--transport", "quic", "--congestion", "blast:10M"][..], "not a quic controller"),
        (&["--congestion", "udt"][..], "--transport udt"),
        (&["--transport", "blast"][..], "needs one"),
        (&["--transport", "udt", "--congestion", "blast"][..], "blast:RATE"),
        (&["--transport", "udt", "--congestion", "vegas"][..], "unknown congestion control"),
    ] {
        let (ok, _, err) = ferry(&[&["cp", "-q"][..], args, &[&url, d]].concat());
        assert!(!ok, "{args:?} was accepted");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!dst.exists(), "{args:?} copied");
    }
    let out = Command::new(ferry_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--congestion", "vegas", "."])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown congestion control"));
}

/// The `--json` object `ferry cp` printed.
fn json_of(out: &str) -> serde_json::Value {
    serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap()
}

/// On loopback the path is short and clean: `auto` keeps TCP and says why.
#[test]
fn auto_keeps_tcp_on_a_short_clean_path() {
    let server = FerryServer::start();
    random_file(&server.path("a.bin"), 1 << 20, 9);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("a.bin");
    let (ok, out, err) =
        ferry(&["cp", "--json", "--transport", "auto", &server.url(ALICE, "/a.bin"), dst.to_str().unwrap()]);
    assert!(ok, "{err}");
    let v = json_of(&out);
    assert_eq!(v["transport"], "tcp", "{out}");
    let why = v["transport_choice"][0]["choice"].as_str().unwrap_or_default();
    assert!(why.starts_with("tcp: RTT") && why.contains("short clean path"), "{out}");
    assert_eq!(sha256_file(&dst), sha256_file(&server.path("a.bin")));
}

/// A process in a ferry-wan namespace, killed when dropped.
struct InNamespace(Child);

impl Drop for InNamespace {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// On an emulated long path (25 ms each way, tuned 64 MiB buffers):
/// `auto` takes UDT from a Ferry server (FEAT `TRANSPORTS tcp;udt`) and
/// the data moves over it; over FTPS (data under PROT P) it takes QUIC;
/// from pure-ftpd, which offers no choice, it stays on TCP and says so;
/// `--congestion cubic` (QUIC's) leaves clear data no candidate but TCP.
#[test]
fn auto_takes_udt_or_quic_on_a_long_path_when_offered_and_tcp_otherwise() {
    use ferry_wan::{Link, LinkConfig, PathConfig, Side};
    use std::io::{BufRead, BufReader, Write};
    let name = format!("fau{}", std::process::id());
    let link = Link::up(LinkConfig::new(name, PathConfig::delay_only(std::time::Duration::from_millis(25))))
        .expect("ferry-wan link (the test needs root)");
    let server_ip = link.server_ip().to_string();

    // A Ferry server in the server's namespace.
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let users = work.path().join("users.toml");
    let mut pw = Command::new(ferry_bin())
        .args(["passwd", "--users"])
        .arg(&users)
        .args([ALICE.0, "--write"])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    pw.stdin.take().unwrap().write_all(format!("{}\n", ALICE.1).as_bytes()).unwrap();
    assert!(pw.wait().unwrap().success());
    random_file(&root.path().join("far.bin"), 4 << 20, 11);
    let serve = |log: &str, extra: &[String]| {
        let log = std::fs::File::create(work.path().join(log)).unwrap();
        let mut child = link
            .command(Side::Server, ferry_bin())
            .arg("serve")
            .arg(root.path())
            .arg("--users")
            .arg(&users)
            .args(["--log-format", "json", "--listen", &format!("{server_ip}:0")])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let server = InNamespace(child);
        let at = line.trim().rsplit_once("://").map(|(_, a)| a.trim_end_matches('/').to_string());
        (server, at.unwrap_or_else(|| panic!("server did not start: {line:?}")))
    };
    let (_server, at) = serve("server.log", &[]);
    let url = format!("ftp://{}:{}@{at}/far.bin", ALICE.0, ALICE.1);

    let local = tempfile::tempdir().unwrap();
    let cp =
        |args: &[&str]| ferry_with(args, link.command(Side::Client, ferry_bin()).env("FERRY_STATE_DIR", state_dir()));
    let dst = local.path().join("far.bin");
    let (ok, out, err) = cp(&["cp", "--json", "--transport", "auto", "--no-resume", &url, dst.to_str().unwrap()]);
    assert!(ok, "{err}\n{}", std::fs::read_to_string(work.path().join("server.log")).unwrap_or_default());
    let v = json_of(&out);
    assert_eq!(v["transport"], "udt", "{out}");
    let why = v["transport_choice"][0]["choice"].as_str().unwrap_or_default();
    assert!(why.starts_with("udt: RTT") && why.contains("a long path; clear data, so UDT"), "{out}");
    assert_eq!(sha256_file(&dst), sha256_file(&root.path().join("far.bin")));
    let log = std::fs::read_to_string(work.path().join("server.log")).unwrap();
    assert!(log.contains("\"transport\":\"udt\""), "{log}");

    // --congestion names QUIC's controller: with clear data, only TCP fits.
    let dst2 = local.path().join("far2.bin");
    let (ok, out, err) = cp(&[
        "cp",
        "--json",
        "--transport",
        "auto",
        "--congestion",
        "cubic",
        "--no-resume",
        &url,
        dst2.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let v = json_of(&out);
    assert_eq!(v["transport"], "tcp", "{out}");
    assert!(
        v["transport_choice"][0]["choice"].as_str().unwrap_or_default().contains("not among the candidates"),
        "{out}"
    );

    // Under TLS (PROT P data) the long path takes QUIC, never UDT.
    let pki = TestPki::new();
    let (_tls_server, tls_at) = serve("tls.log", &pki.serve_flags());
    let port = tls_at.rsplit_once(':').map(|(_, p)| p.to_string()).unwrap();
    let ftps = format!("ftps://{}:{}@{server_ip}:{port}/far.bin", ALICE.0, ALICE.1);
    let dst4 = local.path().join("far4.bin");
    let ca = pki.file("ca.pem");
    let (ok, out, err) =
        cp(&["cp", "--json", "--transport", "auto", "--ca", &ca, "--no-resume", &ftps, dst4.to_str().unwrap()]);
    assert!(ok, "{err}\n{}", std::fs::read_to_string(work.path().join("tls.log")).unwrap_or_default());
    let v = json_of(&out);
    assert_eq!(v["transport"], "quic", "{out}");
    assert!(v["transport_choice"][0]["choice"].as_str().unwrap_or_default().contains("PROT P"), "{out}");
    assert_eq!(sha256_file(&dst4), sha256_file(&root.path().join("far.bin")));

    // pure-ftpd in the server's namespace: no TRANSPORTS in FEAT.
    let home = tempfile::tempdir().unwrap();
    assert!(Command::new("chown").args(["nobody:nogroup"]).arg(home.path()).status().unwrap().success());
    random_file(&home.path().join("p.bin"), 1 << 20, 12);
    let passwd = work.path().join("passwd");
    let mut add = Command::new("pure-pw")
        .args(["useradd", PURE_USER.0, "-u", "nobody", "-g", "nogroup", "-d"])
        .arg(home.path())
        .arg("-f")
        .arg(&passwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    add.stdin.take().unwrap().write_all(format!("{0}\n{0}\n", PURE_USER.1).as_bytes()).unwrap();
    assert!(add.wait().unwrap().success());
    let pdb = work.path().join("passwd.pdb");
    assert!(Command::new("pure-pw").arg("mkdb").arg(&pdb).arg("-f").arg(&passwd).status().unwrap().success());
    let port = free_port();
    let _pure = PeerProcess::spawn(
        link.command(Side::Server, "pure-ftpd")
            .arg("-l")
            .arg(format!("puredb:{}", pdb.display()))
            .args(["-S", &format!("{server_ip},{port}"), "-E", "-H", "-A"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let pure_url = format!("ftp://{}:{}@{server_ip}:{port}/p.bin", PURE_USER.0, PURE_USER.1);
    let dst3 = local.path().join("p.bin");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (ok, out, err) = loop {
        let r = cp(&["cp", "--json", "--transport", "auto", "--no-resume", &pure_url, dst3.to_str().unwrap()]);
        if r.0 || std::time::Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(ok, "{err}");
    let v = json_of(&out);
    assert_eq!(v["transport"], "tcp", "{out}");
    let why = v["transport_choice"][0]["choice"].as_str().unwrap_or_default();
    assert!(why.contains("a long path") && why.contains("does not offer a choice"), "{out}");
    assert_eq!(sha256_file(&dst3), sha256_file(&home.path().join("p.bin")));
}

/// A third-party copy under `--transport auto` on the emulated long path,
/// from a Globus server (no `TRANSPORTS` in FEAT: its session stays on
/// TCP) to `ferry serve` (whose session chose UDT): the data channel runs
/// between the two servers, so both go back to TCP, and the copy arrives.
#[test]
fn auto_third_party_between_servers_that_chose_differently_agrees_on_tcp() {
    use ferry_wan::{Link, LinkConfig, PathConfig, Side};
    use std::io::{BufRead, BufReader, Write};
    require("globus-gridftp-server");
    let name = format!("fat{}", std::process::id());
    let link = Link::up(LinkConfig::new(name, PathConfig::delay_only(std::time::Duration::from_millis(25))))
        .expect("ferry-wan link (the test needs root)");
    let server_ip = link.server_ip().to_string();

    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let users = work.path().join("users.toml");
    let mut pw = Command::new(ferry_bin())
        .args(["passwd", "--users"])
        .arg(&users)
        .args([ALICE.0, "--write"])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    pw.stdin.take().unwrap().write_all(format!("{}\n", ALICE.1).as_bytes()).unwrap();
    assert!(pw.wait().unwrap().success());
    let log = std::fs::File::create(work.path().join("server.log")).unwrap();
    let mut child = link
        .command(Side::Server, ferry_bin())
        .arg("serve")
        .arg(root.path())
        .arg("--users")
        .arg(&users)
        .args(["--log-format", "json", "--allow-third-party", "--listen", &format!("{server_ip}:0")])
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let _ferry = InNamespace(child);
    let at = line.trim().rsplit_once("://").map(|(_, a)| a.trim_end_matches('/').to_string()).unwrap();

    let gdir = tempfile::tempdir().unwrap();
    random_file(&gdir.path().join("g.bin"), 3 << 20, 21);
    chown_nobody(gdir.path());
    let gport = free_port();
    let _globus = PeerProcess::spawn(
        link.command(Side::Server, "setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--init-groups", "globus-gridftp-server"])
            .args(["-c", "/dev/null", "-aa", "-p", &gport.to_string()])
            .args(["-control-interface", &server_ip, "-data-interface", &server_ip, "-l"])
            .arg(gdir.path().join("server.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let src = format!("ftp://{server_ip}:{gport}{}/g.bin", gdir.path().display());
    let dst = format!("ftp://{}:{}@{at}/t.bin", ALICE.0, ALICE.1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (ok, out, err) = loop {
        let r = ferry_with(
            &["cp", "--json", "--transport", "auto", "--retries", "0", "--no-resume", &src, &dst],
            link.command(Side::Client, ferry_bin()).env("FERRY_STATE_DIR", state_dir()),
        );
        if r.0 || std::time::Instant::now() > deadline || !r.2.contains("onnect") {
            break r;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    assert!(ok, "{err}\n{}", std::fs::read_to_string(work.path().join("server.log")).unwrap_or_default());
    let v = json_of(&out);
    let used: Vec<&str> = v["transports"].as_array().unwrap().iter().filter_map(|t| t["transport"].as_str()).collect();
    assert_eq!(used, vec!["tcp", "tcp"], "{out}");
    let choices = v["transport_choice"].to_string();
    assert!(choices.contains("then tcp: third-party copy"), "{out}");
    assert_eq!(sha256_file(&root.path().join("t.bin")), sha256_file(&gdir.path().join("g.bin")));
}

/// Hostile UDT datagrams for flood step `i`: junk of every length, forged
/// handshakes (a first request, and a conclusion with a made-up cookie),
/// NAKs with absurd and reversed loss ranges, ACKs for data never sent and
/// keep-alives, for made-up socket ids.
fn hostile_udt(i: u32) -> Vec<Vec<u8>> {
    let be = |words: &[u32]| words.iter().flat_map(|w| w.to_be_bytes()).collect::<Vec<u8>>();
    let sock = i.wrapping_mul(2_654_435_761) | 1;
    let junk: Vec<u8> = (0..(i % 1500) as usize).map(|j| (i as usize * 31 + j) as u8).collect();
    let handshake = |req: i32, cookie: u32| {
        be(&[0x8000_0000, 0, i, 0, 4, 1, i, 1500, 8192, req as u32, sock, cookie, 0x0100_007f, 0, 0, 0])
    };
    vec![
        junk,
        handshake(1, 0),
        handshake(-1, i.wrapping_mul(7919)),
        // NAK: a range 1..0x7fffffff, a reversed range, a range without its end.
        be(&[0x8003_0000, 0, i, sock, 0x8000_0001, 0x7fff_ffff, 0x8000_0100, 5, 0x8000_0009]),
        // ACK for sequence numbers never sent, absurd RTT and window.
        be(&[0x8002_0000, i, i, sock, 0x7fff_fff0, u32::MAX, u32::MAX, u32::MAX, u32::MAX, u32::MAX]),
        // Keep-alive and shutdown for another socket.
        be(&[0x8001_0000, 0, i, sock, 0]),
        be(&[0x8005_0000, 0, i, sock, 0]),
        // A data packet for a socket that does not exist.
        [be(&[i & 0x7fff_ffff, 0xc000_0001, i, sock]), vec![0xAA; 1000]].concat(),
    ]
}

/// A flood of hostile datagrams at the server's UDT port while an
/// encrypted UDT upload (PROT P) runs through it and another client is
/// served: neither transfer fails or delivers wrong bytes, the server's
/// memory does not grow with the flood, and it keeps serving.
#[test]
fn hostile_udt_floods_neither_stop_nor_grow_the_server() {
    let pki = TestPki::new();
    let server = tls_server(&pki, &[]);
    let ca = pki.file("ca.pem");
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("slow.bin");
    random_file(&src, 20 << 20, 71);
    let url = ftps_url(&server, ALICE, "/slow.bin");
    let mut slow = Command::new(ferry_bin())
        .args(["cp", "-q", "-p", "2", "--max-rate", "5M", "--transport", "udt", "--ca", &ca, "--verify"])
        .args([src.to_str().unwrap(), &url])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let ports = loop {
        let p = udp_ports_of(server.pid());
        if !p.is_empty() {
            break p;
        }
        assert!(std::time::Instant::now() < deadline, "the server never opened a UDT port");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    let rss_before = proc_status(server.pid(), "VmRSS");
    let flood = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let started = std::time::Instant::now();
    let mut sent = 0u64;
    for i in 0..20_000u32 {
        for &port in &ports {
            for d in hostile_udt(i) {
                let _ = flood.send_to(&d, ("127.0.0.1", port));
                sent += 1;
            }
        }
        if started.elapsed() > std::time::Duration::from_secs(8) {
            break;
        }
    }
    // Another client is served meanwhile, over UDT in clear.
    random_file(&server.path("other.bin"), 3_000_000, 72);
    let other = local.path().join("other.bin");
    let (ok, _, err) = ferry(&[
        "cp",
        "-q",
        "--transport",
        "udt",
        "-p",
        "2",
        "--verify",
        &server.url(ALICE, "/other.bin"),
        other.to_str().unwrap(),
    ]);
    assert!(ok, "{err}\n{}", server.log_text());
    assert_eq!(sha256_file(&other), sha256_file(&server.path("other.bin")));
    let rss_after = proc_status(server.pid(), "VmRSS");
    let status = slow.wait().unwrap();
    let mut err = String::new();
    Read::read_to_string(slow.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "the slow upload failed: {err}\n{}", server.log_text());
    assert_eq!(sha256_file(&server.path("slow.bin")), sha256_file(&src));
    assert_eq!(channels_of(&server, "/slow.bin"), vec![("udt".to_string(), true)], "{}", server.log_text());
    // Per-datagram state for 100k+ datagrams would be tens of MB; allow
    // the allocator's noise (the other download's buffers come and go).
    assert!(
        rss_after < rss_before + (24 << 10),
        "server memory grew from {rss_before} kB to {rss_after} kB after {sent} datagrams"
    );
}

/// `ferry cp --json` over UDT carries UDT's counters, and so does the
/// server's "transfer finished" line (the benchmark had only the
/// emulator's counters to explain its losses).
#[test]
fn a_udt_copy_reports_udt_statistics_in_json_and_the_server_log() {
    let server = FerryServer::start();
    random_file(&server.path("s.bin"), 4 << 20, 21);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("s.bin");
    let url = server.url(ALICE, "/s.bin");
    let (ok, out, err) = ferry(&["cp", "--json", "--transport", "udt", "--no-resume", &url, dst.to_str().unwrap()]);
    assert!(ok, "{err}\n{}", server.log_text());
    let v = json_of(&out);
    assert_eq!(v["transport"], "udt", "{out}");
    let udt = &v["udt"];
    assert!(udt["connections"].as_u64().unwrap_or(0) >= 1, "{out}");
    // Packets of the MSS the path gave (loopback: 9 000, session 16), 44
    // bytes of it headers.
    let mss = udt["mss"].as_u64().unwrap_or(0);
    assert!((1500..=9000).contains(&mss), "{out}");
    let payload = mss - 44;
    assert!(udt["packets_received"].as_u64().unwrap_or(0) >= (4 << 20) / payload, "{out}");
    assert!(udt["bytes_received"].as_u64().unwrap_or(0) >= 4 << 20, "{out}");
    for field in ["packets_sent", "retransmitted", "lost_reported", "lost_detected", "naks_sent", "naks_received"] {
        assert!(udt[field].is_u64(), "{field} missing: {out}");
    }
    for field in ["dropped", "last_rtt_us", "last_pacing_rate", "congestion"] {
        assert!(!udt[field].is_null(), "{field} missing: {out}");
    }
    let sent = server.transfers("/s.bin");
    let line = sent[0]["udt"].as_str().unwrap_or_default().to_string();
    assert!(line.contains("packets_sent=") && line.contains("pacing_rate="), "{}", server.log_text());
    // The server's figures are taken once the client acknowledged every
    // byte (before, a snapshot when the last block was queued: CI saw 64
    // of ~2,800 packets), so they count the whole file: 4 MiB in packets
    // of at most `payload` bytes.
    assert!(line.contains(&format!("mss={mss}")), "{line}");
    let n: u64 = line.split("packets_sent=").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    assert!(n >= (4 << 20) / payload, "{line}");
    // A TCP copy has no UDT section.
    let (ok, out, _) = ferry(&["cp", "--json", "--no-resume", &url, dst.to_str().unwrap()]);
    assert!(ok);
    assert!(json_of(&out)["udt"].is_null(), "{out}");
}

// --- Path rates: per copy, remembered (issue 17, branch i17-rate) ---

/// The UDT controllers a server logged opening, in order.
fn controllers_opened(server: &FerryServer) -> Vec<String> {
    server.logged("udt data channel open", "controller")
}

/// The path rate belongs to the copy, not the process: two copies run at
/// once in one process with different `path_rate`s each announce their
/// own (`OPTS TPRT Rate=N;`), and the server's senders start at each.
#[test]
fn two_copies_in_one_process_announce_their_own_path_rates() {
    let server = FerryServer::start();
    random_file(&server.path("r.bin"), 2 << 20, 7);
    let local = tempfile::tempdir().unwrap();
    let copy = |rate: f64, name: &str| {
        let opts = ferry_client::CopyOptions {
            transport: Some("udt".into()),
            parallelism: Some(1),
            resume: false,
            retries: 0,
            path_rate: Some(rate),
            ..ferry_client::CopyOptions::default()
        };
        let src = ferry_client::Location::parse(&server.url(ALICE, "/r.bin")).unwrap();
        let dst = ferry_client::Location::Local(local.path().join(name));
        async move {
            let mut client = ferry_client::Client::new(opts);
            client.copy(&src, &dst).await.unwrap();
            client.close().await;
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async { tokio::join!(copy(20e6, "a.bin"), copy(6e6, "b.bin")) });
    for name in ["a.bin", "b.bin"] {
        assert_eq!(sha256_file(&local.path().join(name)), sha256_file(&server.path("r.bin")));
    }
    let mut c = controllers_opened(&server);
    c.sort();
    assert_eq!(c.len(), 2, "{}", server.log_text());
    assert!(c[0].starts_with("ferry ProbeBw btl_bw 20000000 B/s"), "{c:?}");
    assert!(c[1].starts_with("ferry ProbeBw btl_bw 6000000 B/s"), "{c:?}");
}

/// The `btl_bw` (bytes/s) a logged controller starts at.
fn started_at(controller: &str) -> f64 {
    controller.split("btl_bw ").nth(1).and_then(|s| s.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(-1.0)
}

/// The path cache: a long enough copy records what it delivered, and the
/// next copy to that host announces it (`OPTS TPRT Rate=N;`, so the
/// server's sender starts at it) and says where it came from in `--json`;
/// `--path-rate` wins over it, `--no-path-cache` neither reads nor
/// writes it, and a short copy records nothing.
#[test]
fn a_second_copy_starts_at_the_rate_the_first_delivered() {
    let server = FerryServer::start();
    random_file(&server.path("big.bin"), 16 << 20, 11);
    random_file(&server.path("small.bin"), 1 << 20, 12);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("out.bin");
    let cache = state_dir().join("path-rates.json");
    let _ = std::fs::remove_file(&cache);
    let cp = |path: &str, extra: &[&str]| -> serde_json::Value {
        let url = server.url(ALICE, path);
        let args = [
            &["cp", "--json", "--transport", "udt", "-p", "1", "--no-resume"][..],
            extra,
            &[&url, dst.to_str().unwrap()],
        ]
        .concat();
        let (ok, out, err) = ferry(&args);
        assert!(ok, "{args:?}: {err}\n{}", server.log_text());
        assert_eq!(sha256_file(&dst), sha256_file(&server.path(path)));
        json_of(&out)
    };
    // A short copy: nothing recorded, nothing to announce later.
    let v = cp("/small.bin", &[]);
    assert_eq!(v["path_rate"]["recorded"], serde_json::json!({}), "{v}");
    assert!(!cache.exists());
    // Cold, and long enough (16 MiB held to 8 MiB/s: about 2 s) to record.
    let v = cp("/big.bin", &["--max-rate", "8M"]);
    assert_eq!(v["path_rate"]["announced"], serde_json::json!([]), "{v}");
    let recorded = v["path_rate"]["recorded"]["127.0.0.1"]["rate"].as_f64().unwrap_or_else(|| panic!("{v}"));
    assert!((4e6..=9e6).contains(&recorded), "{v}");
    assert!(cache.exists());
    // The next copy announces it, and the server's sender starts there.
    let v = cp("/small.bin", &[]);
    let a = &v["path_rate"]["announced"][0];
    assert_eq!(a["rate"].as_f64().unwrap().round(), recorded.round(), "{v}");
    assert!(a["from"].as_str().unwrap().starts_with("path cache: udt transfer"), "{v}");
    let c = controllers_opened(&server);
    assert!(c[0].starts_with("ferry Startup"), "{c:?}");
    assert!(c[1].starts_with("ferry Startup"), "{c:?}");
    assert_eq!(started_at(&c[2]), recorded.round(), "{c:?}");
    // --path-rate wins; --max-rate caps what the cache gives.
    let v = cp("/small.bin", &["--path-rate", "20000000"]);
    assert_eq!(v["path_rate"]["announced"][0]["from"], "--path-rate", "{v}");
    let v = cp("/small.bin", &["--max-rate", "3000000"]);
    assert_eq!(v["path_rate"]["announced"][0]["rate"], 3e6, "{v}");
    let c = controllers_opened(&server);
    assert_eq!((started_at(&c[3]), started_at(&c[4])), (20e6, 3e6), "{c:?}");
    // --no-path-cache: cold, and the cache is neither read nor written.
    let before = std::fs::read(&cache).unwrap();
    let v = cp("/big.bin", &["--no-path-cache", "--max-rate", "4M"]);
    assert_eq!(v["path_rate"]["cache"], serde_json::Value::Null, "{v}");
    assert!(controllers_opened(&server)[5].starts_with("ferry Startup"));
    assert_eq!(std::fs::read(&cache).unwrap(), before);
}

/// `ferry probe --transport udt` measures with a UDT download (not held
/// down by TCP's buffers), says so, and remembers the rate: the next
/// `ferry cp` to that host starts its server's UDT sender at it.
#[test]
fn a_udt_probe_is_remembered_for_the_next_copy() {
    let server = FerryServer::start();
    random_file(&server.path("probe.bin"), 8 << 20, 13);
    random_file(&server.path("small.bin"), 1 << 20, 14);
    let cache = state_dir().join("path-rates.json");
    let _ = std::fs::remove_file(&cache);
    let (ok, out, err) = ferry(&["probe", "--json", "--transport", "udt", &server.url(ALICE, "/probe.bin")]);
    assert!(ok, "{err}\n{}", server.log_text());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["transport"], "udt", "{v}");
    assert_eq!(v["path_cache"], cache.to_str().unwrap(), "{v}");
    assert!(controllers_opened(&server)[0].starts_with("ferry Startup"), "the probe itself starts cold");
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(text.contains("probe (udt download, 1 stream)"), "{text}");
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("small.bin");
    let url = server.url(ALICE, "/small.bin");
    let (ok, out, err) = ferry(&["cp", "--json", "--transport", "udt", &url, dst.to_str().unwrap()]);
    assert!(ok, "{err}");
    let v = json_of(&out);
    let a = &v["path_rate"]["announced"][0];
    assert!(a["from"].as_str().unwrap().starts_with("path cache: probe (udt download"), "{v}");
    let c = controllers_opened(&server);
    assert_eq!(started_at(c.last().unwrap()), a["rate"].as_f64().unwrap().round(), "{c:?}");
    // an unknown transport is refused, nothing measured
    let (ok, _, err) = ferry(&["probe", "--transport", "quic", &server.url(ALICE, "/probe.bin")]);
    assert!(!ok && err.contains("tcp or udt"), "{err}");
}

/// A third-party copy's data runs between the servers, not over the
/// client's path the cache measured: the servers are told to forget a
/// remembered rate (`OPTS TPRT Rate=0;`) and their senders start cold; a
/// rate the user gave (`--path-rate`) is kept.
#[test]
fn a_third_party_copy_does_not_start_at_the_rate_remembered_for_the_clients_path() {
    let a = FerryServer::start();
    let b = FerryServer::start();
    random_file(&a.path("t.bin"), 2 << 20, 43);
    let cache = state_dir().join("path-rates.json");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let seeded = serde_json::json!({"hosts": {"127.0.0.1": [{
        "rate": 9e6, "rtt_ms": 1.0, "bytes": 64 << 20, "seconds": 7.0, "at": now, "how": "udt transfer"
    }]}});
    std::fs::write(&cache, seeded.to_string()).unwrap();
    let third_party = |extra: &[&str], to: &str| {
        let (from, dest) = (a.url(ALICE, "/t.bin"), b.url(ALICE, to));
        let args = [&["cp", "--json", "--transport", "udt", "-p", "1"][..], extra, &[&from, &dest]].concat();
        let (ok, out, err) = ferry(&args);
        assert!(ok, "{err}\n{}\n{}", a.log_text(), b.log_text());
        assert_eq!(sha256_file(&b.path(&to[1..])), sha256_file(&a.path("t.bin")));
        json_of(&out)
    };
    let v = third_party(&[], "/t1.bin");
    // announced at login (the sessions do not know yet what they will
    // carry), then forgotten before the transfer
    assert_eq!(v["path_rate"]["announced"][0]["rate"], 9e6, "{v}");
    let (src, dst) = (controllers_opened(&a), controllers_opened(&b));
    assert!(src.iter().chain(&dst).all(|c| c.starts_with("ferry Startup")), "{src:?} {dst:?}");
    assert_eq!(transports_of(&b, "/t1.bin"), vec!["udt"]);
    third_party(&["--path-rate", "5000000"], "/t2.bin");
    let src = controllers_opened(&a);
    assert_eq!(started_at(src.last().unwrap()), 5e6, "{src:?}");
}

/// Session 16: the MSS from the path. Loopback's MTU is 65 536, so both
/// ends offer the cap, 9 000, and a download moves in 8 956-byte payloads,
/// byte-identical; a client told `FERRY_UDT_MSS=1500` (as a libudt peer
/// offers) brings the connection down to 1 500 at both ends — the
/// handshake takes the smaller offer — and the bytes still arrive intact.
#[test]
fn udt_on_loopback_uses_9000_byte_packets_and_the_smaller_offer_wins() {
    let server = FerryServer::start();
    random_file(&server.path("m.bin"), (6 << 20) + 13, 11);
    let local = tempfile::tempdir().unwrap();
    let dst = local.path().join("m.bin");
    let url = server.url(ALICE, "/m.bin");
    let args = ["cp", "--json", "--transport", "udt", "-p", "1", "--no-resume", &url, dst.to_str().unwrap()];
    let udt_mss = |out: &str| -> u64 {
        let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap();
        v["udt"]["mss"].as_u64().unwrap_or(0)
    };
    let (ok, out, err) = ferry(&args);
    assert!(ok, "{err}\n{}", server.log_text());
    assert_eq!(sha256_file(&dst), sha256_file(&server.path("m.bin")));
    assert_eq!(udt_mss(&out), 9000, "{out}");
    assert!(server.log_text().contains("mss=9000"), "{}", server.log_text());
    std::fs::remove_file(&dst).unwrap();
    let (ok, out, err) = ferry_with(
        &args,
        Command::new(ferry_bin())
            .env("FERRY_STATE_DIR", state_dir())
            .env("FERRY_PATH_CACHE", state_dir().join("path-rates.json"))
            .env("FERRY_UDT_MSS", "1500"),
    );
    assert!(ok, "{err}\n{}", server.log_text());
    assert_eq!(sha256_file(&dst), sha256_file(&server.path("m.bin")));
    assert_eq!(udt_mss(&out), 1500, "{out}");
}
