//! The transfer service (`ferry service`, `submit`, `jobs`, `job`,
//! `cancel`) end to end: real `ferry serve` servers as sources and
//! destinations, SQLite without any server, a real PostgreSQL from Debian
//! shared by two nodes, a node SIGKILLed and the database restarted
//! mid-run, bad input of every kind, the metrics endpoints.

#[path = "../../service/tests/pg/mod.rs"]
mod pg;
mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

/// One `ferry service` node.
struct Service {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Service {
    fn start(db: &str, dir: &Path, name: &str, extra: &[&str]) -> Service {
        let log = dir.join(format!("{name}.log"));
        let log_file = std::fs::File::create(&log).unwrap();
        let mut child = Command::new(ferry_bin())
            .args(["service", "--db", db, "--listen", "127.0.0.1:0", "--node-id", name])
            .args(extra)
            .env("FERRY_LOG", "info,sqlx=warn")
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let Some(url) = line.split(" on ").nth(1).and_then(|r| r.split_whitespace().next()) else {
            let _ = child.kill();
            panic!("service did not start: {line:?}\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        };
        Service { child, url: url.trim_end_matches('/').to_string(), log }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `ferry service token add`: the token is on the last line.
fn token(db: &str, user: &str, admin: bool) -> String {
    let mut args = vec!["service", "token", "add", user, "--db", db];
    if admin {
        args.push("--admin");
    }
    let (ok, out, err) = ferry(&args);
    assert!(ok, "token add failed: {err}");
    out.lines().last().unwrap().trim().to_string()
}

/// An HTTP call with curl: (status, JSON body, or the text as a string).
fn api(method: &str, url: &str, token: Option<&str>, body: Option<&[u8]>) -> (u16, Value) {
    let mut c = Command::new(require("curl"));
    c.args(["-s", "-S", "-X", method, "-w", "\n%{http_code}", "--max-time", "120"]);
    if let Some(t) = token {
        c.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    if body.is_some() {
        c.args(["-H", "Content-Type: application/json", "--data-binary", "@-"]);
    }
    let mut child = c.arg(url).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = body.map(<[u8]>::to_vec).unwrap_or_default();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    parse_http(&out.stdout)
}

fn parse_http(out: &[u8]) -> (u16, Value) {
    let text = String::from_utf8_lossy(out);
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), serde_json::from_str(body).unwrap_or(Value::String(body.to_string())))
}

fn submit(service: &Service, tok: &str, args: &[&str]) -> String {
    let (ok, out, err) = ferry(&[&["submit", "--service", &service.url, "--token", tok], args].concat());
    assert!(ok, "submit failed: {err}");
    out.lines().last().unwrap().trim().to_string()
}

/// `ferry job ID --json` until the job ends (or `limit` passes).
fn wait_job(service: &Service, tok: &str, id: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let (ok, out, err) = ferry(&["job", id, "--json", "--service", &service.url, "--token", tok]);
        assert!(ok, "ferry job failed: {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        if !matches!(v["state"].as_str(), Some("queued" | "active")) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "job {id} did not finish in {limit:?}: {}\n{}",
            v["counts"],
            service.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A credentials file for the nodes (mode 600), passwords off the job URLs.
fn credentials(dir: &Path, servers: &[&FerryServer]) -> PathBuf {
    let p = dir.join("credentials");
    let text: String = servers.iter().map(|s| format!("{}\n", s.url(ALICE, "/"))).collect();
    std::fs::write(&p, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

fn alice_url(s: &FerryServer, path: &str) -> String {
    format!("ftp://alice@{}{}", s.addr, path)
}

/// Files done, each with a checksum both ends agreed on.
fn assert_all_verified(job: &Value, n: usize) {
    assert_eq!(job["state"], "done", "{job:#}");
    let files = job["files"].as_array().unwrap();
    assert_eq!(files.len(), n);
    for f in files {
        assert_eq!(f["state"], "done", "{f}");
        assert!(f["verified"].as_str().is_some_and(|v| v.contains(':')), "not verified: {f}");
    }
}

#[test]
fn sqlite_node_copies_a_tree_verified_and_reports_failures() {
    let dir = tempfile::tempdir().unwrap();
    let src = FerryServer::start_with(&["--anonymous", "read"]);
    let dst = FerryServer::start();
    let mut sizes = BTreeMap::new();
    for (i, name) in ["a.bin", "sub/b c.bin", "sub/deep/it's \"q\".bin", "empty.bin", "sub/ü.bin"].iter().enumerate() {
        let size = [300_000u64, 1, 2 << 20, 0, 70_000][i];
        random_file(&src.path(&format!("tree/{name}")), size, i as u64);
        sizes.insert(name.to_string(), size);
    }
    let db = format!("sqlite:{}", dir.path().join("service.db").display());
    let creds = credentials(dir.path(), &[&dst]);
    let alice = token(&db, "alice", false);
    let bob = token(&db, "bob", false);
    let root = token(&db, "root", true);
    let service = Service::start(
        &db,
        dir.path(),
        "n1",
        &["--credentials", creds.to_str().unwrap(), "--optimiser-interval", "2s"],
    );

    // A tree: listed by `ferry submit -r` (anonymous source), one job.
    let id = submit(&service, &alice, &["-r", &src.anon_url("/tree/"), &alice_url(&dst, "/copy/")]);
    let job = wait_job(&service, &alice, &id, Duration::from_secs(120));
    assert_all_verified(&job, sizes.len());
    assert_eq!(tree_digest(&src.path("tree")), tree_digest(&dst.path("copy")));

    // Listing and visibility: bob sees neither the job nor its existence.
    let (ok, out, _) = ferry(&["jobs", "--service", &service.url, "--token", &alice]);
    assert!(ok && out.contains(&id) && out.contains("done"), "{out}");
    let (ok, _, err) = ferry(&["job", &id, "--service", &service.url, "--token", &bob]);
    assert!(!ok && err.contains("404") && err.contains("no job"), "{err}");
    let (ok, _, err) = ferry(&["cancel", &id, "--service", &service.url, "--token", &bob]);
    assert!(!ok && err.contains("404"), "{err}");
    let (ok, out, _) = ferry(&["jobs", "--service", &service.url, "--token", &root]);
    assert!(ok && out.contains(&id), "an admin sees every job: {out}");
    let (ok, _, err) = ferry(&["cancel", &id, "--service", &service.url, "--token", &alice]);
    assert!(!ok && err.contains("409") && err.contains("already done"), "{err}");

    // A destination that refuses (bob may not write there; the node has no
    // password for him either): every file fails with its reason, and the
    // job stops after five instead of trying all twelve.
    for i in 0..12 {
        random_file(&src.path(&format!("many/f{i:02}")), 1000, 100 + i);
    }
    let id = submit(
        &service,
        &alice,
        &["-r", "--retry", "0", &src.anon_url("/many/"), &format!("ftp://bob@{}/nope/", dst.addr)],
    );
    let job = wait_job(&service, &alice, &id, Duration::from_secs(60));
    assert_eq!(job["state"], "failed", "{job:#}");
    assert!(job["reason"].as_str().unwrap().contains("stopped early"), "{job:#}");
    let files = job["files"].as_array().unwrap();
    let failed: Vec<&Value> = files.iter().filter(|f| f["state"] == "failed").collect();
    assert!(failed.len() >= 5 && failed.len() < 12, "{job:#}");
    for f in &failed {
        assert!(f["reason"].as_str().unwrap().contains("login"), "{f}");
    }
    assert!(files.iter().any(|f| f["state"] == "canceled" && f["reason"].as_str().unwrap().contains("stopped early")));

    // Metrics: the queue's state and this node's attempts.
    let (code, body) = api("GET", &format!("{}/metrics", service.url), None, None);
    let text = body.as_str().unwrap_or_default().to_string();
    assert_eq!(code, 200);
    assert!(text.contains("ferry_service_files{") && text.contains("state=\"done\""), "{text}");
    assert!(text.contains("ferry_service_attempts_total{"), "{text}");
    assert!(text.contains("ferry_service_link_active_target{"), "{text}");
}

/// The node pools idle sessions per link. When the optimiser changes a
/// link's stream count, the sessions kept for the old count must go: each
/// holds a session slot on both servers, and a server caps sessions per
/// address (421 beyond it). Here the cap is 8 and the link runs 4 transfers
/// while its stream count moves every second; sessions left behind for two
/// old counts would already be refused.
#[test]
fn a_node_keeps_no_idle_sessions_for_stream_counts_it_left() {
    const FILES: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let slow = ["--max-transfer-rate", "1048576", "--max-sessions-per-ip", "8"];
    let src = FerryServer::start_with(&[&["--anonymous", "read"][..], &slow[..]].concat());
    let dst = FerryServer::start_with(&slow);
    for i in 0..FILES {
        random_file(&src.path(&format!("set/f{i:02}")), 1 << 20, 500 + i as u64);
    }
    let db = format!("sqlite:{}", dir.path().join("service.db").display());
    let creds = credentials(dir.path(), &[&dst]);
    let alice = token(&db, "alice", false);
    let service = Service::start(
        &db,
        dir.path(),
        "n1",
        &[
            "--credentials",
            creds.to_str().unwrap(),
            "--optimiser-interval",
            "1s",
            "--min-active",
            "4",
            "--max-active-per-link",
            "4",
            "--tick",
            "200ms",
        ],
    );
    let id = submit(&service, &alice, &["-r", "--retry", "0", &src.anon_url("/set/"), &alice_url(&dst, "/copy/")]);
    let job = wait_job(&service, &alice, &id, Duration::from_secs(120));
    let log = service.log_text();
    // Decisions whose reason moves the count: "... streams 1 -> 2".
    let moved = |l: &&str| {
        l.split("streams ").skip(1).any(|t| {
            let mut w = t.split_whitespace();
            matches!((w.next(), w.next(), w.next()), (Some(a), Some("->"), Some(b)) if a.trim_end_matches(',') != b.trim_end_matches(','))
        })
    };
    let steps = log.lines().filter(moved).count();
    assert!(steps >= 2, "the optimiser never moved the stream count twice; the test proves nothing:\n{log}");
    assert_all_verified(&job, FILES);
    assert_eq!(tree_digest(&src.path("set")), tree_digest(&dst.path("copy")));
}

#[test]
fn the_api_over_https_trusts_the_given_ca_and_never_speaks_in_clear() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let src = FerryServer::start_with(&["--anonymous", "read"]);
    let dst = FerryServer::start();
    random_file(&src.path("x.bin"), 200_000, 7);
    let db = format!("sqlite:{}", dir.path().join("service.db").display());
    let creds = credentials(dir.path(), &[&dst]);
    let alice = token(&db, "alice", false);
    let (cert, key) = (pki.file("server.pem"), pki.file("server.key"));
    let service = Service::start(
        &db,
        dir.path(),
        "tls1",
        &["--credentials", creds.to_str().unwrap(), "--tls-cert", &cert, "--tls-key", &key],
    );
    assert!(service.url.starts_with("https://127.0.0.1:"), "{}", service.url);
    // The certificate names localhost.
    let url = service.url.replace("127.0.0.1", "localhost");
    let ca = pki.file("ca.pem");

    // A certificate nobody vouched for is refused before the token is sent.
    let (ok, _, err) = ferry(&["jobs", "--service", &url, "--token", &alice]);
    assert!(!ok && err.contains("cannot reach the service"), "{err}");
    // Plain HTTP to the HTTPS port gets no answer.
    let (code, _) =
        api("GET", &format!("http://127.0.0.1:{}/api/v1/jobs", url.rsplit(':').next().unwrap()), Some(&alice), None);
    assert_eq!(code, 0, "plain HTTP was answered");

    // With the CA: a job submitted, followed to the end, verified.
    let conn = ["--service", url.as_str(), "--service-ca", ca.as_str(), "--token", alice.as_str()];
    let (ok, out, err) =
        ferry(&[&["submit"], &conn[..], &[&src.anon_url("/x.bin"), &alice_url(&dst, "/y.bin")]].concat());
    assert!(ok, "submit over HTTPS failed: {err}");
    let id = out.lines().last().unwrap().trim().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    let job = loop {
        let (ok, out, err) = ferry(&[&["job", id.as_str(), "--json"], &conn[..]].concat());
        assert!(ok, "ferry job over HTTPS failed: {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        if !matches!(v["state"].as_str(), Some("queued" | "active")) {
            break v;
        }
        assert!(Instant::now() < deadline, "job did not finish: {v:#}\n{}", service.log_text());
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_all_verified(&job, 1);
    assert_eq!(sha256_file(&src.path("x.bin")), sha256_file(&dst.path("y.bin")));

    // Hostile clients: fifty connections that never start a handshake do not
    // keep an honest client out, and a silent one is cut off after the
    // handshake timeout (10 s) instead of holding its slot for ever.
    let port: u16 = url.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap();
    let silent: Vec<std::net::TcpStream> =
        (0..50).map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    let opened = Instant::now();
    let (ok, _, err) = ferry(&[&["jobs"], &conn[..]].concat());
    assert!(ok, "an honest client was kept out by fifty silent connections: {err}");
    assert!(opened.elapsed() < Duration::from_secs(8), "the honest client waited {:?}", opened.elapsed());
    let mut first = &silent[0];
    first.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut byte = [0u8; 1];
    let cut = match std::io::Read::read(&mut first, &mut byte) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    };
    assert!(cut, "a silent connection was not closed");
    let waited = opened.elapsed();
    assert!(
        waited >= Duration::from_secs(8) && waited < Duration::from_secs(25),
        "a silent connection was closed after {waited:?}, not after the 10 s handshake timeout"
    );
    drop(silent);

    // The dashboard's sign-in page comes over HTTPS with its Secure cookie.
    let out = Command::new(require("curl"))
        .args(["-s", "-S", "-i", "--max-time", "30", "--cacert", &ca, &format!("{url}/")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.to_ascii_lowercase().contains("set-cookie: ferry_login_csrf=") && text.contains("Secure"), "{text}");
}

#[test]
fn bad_submissions_get_clear_4xx_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("service.db").display());
    let alice = token(&db, "alice", false);
    let service = Service::start(&db, dir.path(), "n1", &["--max-files", "100000"]);
    let jobs = format!("{}/api/v1/jobs", service.url);
    let file = |src: &str, dst: &str| format!(r#"{{"sources": ["{src}"], "destinations": ["{dst}"]}}"#);
    let ok_file = file("ftp://127.0.0.1:1/a", "ftp://127.0.0.1:2/b");
    let cases: Vec<(String, u16, &str)> = vec![
        ("{\"files\": [".into(), 400, "not valid JSON"),
        (format!(r#"{{"files": [{ok_file}], "paramz": {{}}}}"#), 400, "unknown field `paramz`"),
        (
            format!(r#"{{"files": [{ok_file}], "params": {{"verify_checksum": true, "retries": 3}}}}"#),
            400,
            "unknown field `retries`",
        ),
        (format!(r#"{{"files": [{}]}}"#, file("gsiftp://h/a", "ftp://h/b")), 400, "unsupported URL scheme"),
        (format!(r#"{{"files": [{}]}}"#, file("http://h/a", "ftp://h/b")), 400, "unsupported URL scheme"),
        (format!(r#"{{"files": [{}]}}"#, file("file:///etc/shadow", "ftp://h/b")), 400, "file://"),
        (format!(r#"{{"files": [{}]}}"#, file("ftp://u:pw@h/a", "ftp://h/b")), 400, "must not carry passwords"),
        (format!(r#"{{"files": [{ok_file}], "params": {{"transport": "udt5"}}}}"#), 400, "not supported"),
        ("{\"files\": []}".into(), 400, "no files"),
    ];
    for (body, code, msg) in &cases {
        let (c, v) = api("POST", &jobs, Some(&alice), Some(body.as_bytes()));
        assert_eq!(c, *code, "{body}: {v}");
        assert!(v["error"].as_str().unwrap_or("").contains(msg), "{body}: {v}");
    }
    // No token, an unknown token.
    assert_eq!(api("POST", &jobs, None, Some(ok_file.as_bytes())).0, 401);
    assert_eq!(api("GET", &jobs, Some("fy_0000"), None).0, 401);

    // 100,001 files: refused whole; 100,000 whose last is bad: refused
    // whole; neither leaves a row.
    let many = |n: usize, last_bad: bool| -> Vec<u8> {
        let mut s = String::from("{\"files\": [");
        for i in 0..n {
            if i > 0 {
                s.push(',');
            }
            let scheme = if last_bad && i == n - 1 { "sftp" } else { "ftp" };
            s.push_str(&file(&format!("{scheme}://127.0.0.1:1/d/{i}"), &format!("ftp://127.0.0.1:2/d/{i}")));
        }
        s.push_str("]}");
        s.into_bytes()
    };
    let (c, v) = api("POST", &jobs, Some(&alice), Some(&many(100_001, false)));
    assert_eq!(c, 413, "{v}");
    assert!(v["error"].as_str().unwrap().contains("at most 100000"), "{v}");
    let (c, v) = api("POST", &jobs, Some(&alice), Some(&many(100_000, true)));
    assert_eq!(c, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("file 99999"), "{v}");
    let (_, v) = api("GET", &jobs, Some(&alice), None);
    assert_eq!(v["jobs"].as_array().unwrap().len(), 0, "something was stored: {v}");

    // SQL-significant characters in every field are data.
    let evil = "x'); DELETE FROM jobs; --";
    let body = format!(
        r#"{{"files": [{{"sources": ["ftp://127.0.0.1:1/{evil}"], "destinations": ["ftp://127.0.0.1:2/{evil}%22"],
            "activity": "{evil}", "metadata": {{"k": "{evil}"}}, "checksum": "adler32:0a"}}],
            "params": {{"job_metadata": {{"\"; DROP TABLE files; --": 1}}, "priority": 1, "retry": 0}}}}"#
    );
    let (c, v) = api("POST", &jobs, Some(&alice), Some(body.as_bytes()));
    assert_eq!(c, 201, "{v}");
    let id = v["job_id"].as_str().unwrap().to_string();
    let (c, v) = api("GET", &format!("{jobs}/{id}"), Some(&alice), None);
    assert_eq!(c, 200);
    assert_eq!(v["files"][0]["source"], format!("ftp://127.0.0.1:1/{evil}"));
    // ... and 100,000 good files are accepted in one job.
    let started = Instant::now();
    let (c, v) = api("POST", &jobs, Some(&alice), Some(&many(100_000, false)));
    assert_eq!(c, 201, "{v}");
    assert_eq!(v["files"], 100_000);
    eprintln!("100,000-file job stored in {:.1} s", started.elapsed().as_secs_f64());
    let (c, v) = api("DELETE", &format!("{jobs}/{}", v["job_id"].as_str().unwrap()), Some(&alice), None);
    assert_eq!((c, v["state"].as_str()), (200, Some("canceled")), "{v}");
}

/// Two nodes on one PostgreSQL, 200 files; one node is SIGKILLed while it
/// has transfers under way, then the database restarts. Every file ends
/// verified, no file is sent twice from the start, and the killed node's
/// transfers are resumed by the other from their stored restart ranges.
#[test]
fn two_nodes_on_postgres_survive_a_killed_node_and_a_database_restart() {
    const FILES: usize = 200;
    // Restart markers cover whole MODE E blocks (1 MiB): files of two
    // blocks, paced so each takes a few seconds and a kill lands mid-file.
    const SIZE: u64 = 2 << 20;
    const RATE: u64 = 768 * 1024;
    const BLOCK: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let mut pg = pg::Postgres::start();
    let rate = RATE.to_string();
    let slow = ["--max-transfer-rate", rate.as_str(), "--marker-interval", "1"];
    let src = FerryServer::start_with(&[&["--anonymous", "read"][..], &slow[..]].concat());
    let dst = FerryServer::start_with(&slow);
    for i in 0..FILES {
        random_file(&src.path(&format!("set/f{i:03}")), SIZE, i as u64);
    }
    let db = pg.url();
    let creds = credentials(dir.path(), &[&dst]);
    let alice = token(&db, "alice", false);
    let flags = [
        "--credentials",
        creds.to_str().unwrap(),
        "--lease",
        "3s",
        "--heartbeat",
        "500ms",
        "--optimiser-interval",
        "2s",
        "--min-active",
        "8",
        "--max-active-per-link",
        "16",
        "--tick",
        "200ms",
    ];
    let mut a = Service::start(&db, dir.path(), "node-a", &flags);
    let b = Service::start(&db, dir.path(), "node-b", &flags);
    let id = submit(&a, &alice, &["-r", &src.anon_url("/set/"), &alice_url(&dst, "/copy/")]);

    // Wait until every transfer node A runs has restart ranges stored
    // (its first files start together, so there is such a moment before
    // they end), then SIGKILL it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let victims: Vec<String> = loop {
        let (_, v) = api("GET", &format!("{}/api/v1/jobs/{id}?files={FILES}", b.url), Some(&alice), None);
        let mine: Vec<&Value> = v["files"]
            .as_array()
            .map(|fs| fs.iter().filter(|f| f["state"] == "active" && f["node"] == "node-a").collect())
            .unwrap_or_default();
        if mine.len() >= 2 && mine.iter().all(|f| f["ranges"] != "") {
            break mine.iter().map(|f| f["destination"].as_str().unwrap().to_string()).collect();
        }
        assert!(Instant::now() < deadline, "node A never had transfers with ranges: {v}\n{}", a.log_text());
        std::thread::sleep(Duration::from_millis(100));
    };
    a.kill();
    // Let node B take them over, then restart the database under it.
    std::thread::sleep(Duration::from_secs(5));
    pg.restart();

    let job = wait_job(&b, &alice, &id, Duration::from_secs(150));
    if let Some(f) = job["files"].as_array().unwrap().iter().find(|f| f["state"] != "done") {
        let dest = f["destination"].as_str().unwrap();
        let path = &dest[dest.find("/copy/").unwrap()..];
        let name = path.trim_start_matches("/copy/");
        let logs: Vec<String> =
            [a.log_text(), b.log_text()].concat().lines().filter(|l| l.contains(name)).map(str::to_string).collect();
        panic!("{f}\ndestination log: {:?}\nnodes: {}", dst.transfers(path), logs.join("\n"));
    }
    assert_all_verified(&job, FILES);
    assert_eq!(tree_digest(&src.path("set")), tree_digest(&dst.path("copy")));

    // The destination's transfer log: one complete receive per file, and
    // no file whose bytes arrived twice from the start. What the killed
    // node's transfer received after its last restart marker (at most a
    // block and a marker interval) may be sent again; never the file twice.
    let mut resumed_by_b = 0;
    for i in 0..FILES {
        let path = format!("/copy/f{i:03}");
        let lines = dst.transfers(&path);
        let complete: Vec<&Value> = lines.iter().filter(|l| l["status"] == "complete").collect();
        assert!(complete.len() <= 1, "{path} completed {} times: {lines:?}", complete.len());
        let received: u64 = lines.iter().map(|l| l["bytes"].as_u64().unwrap_or(0)).sum();
        assert!(
            received <= SIZE + BLOCK + RATE,
            "{path} received {received} bytes for {SIZE}: {lines:?}\n{}",
            [a.log_text(), b.log_text()]
                .concat()
                .lines()
                .filter(|l| l.contains(&format!("f{i:03}")))
                .collect::<Vec<_>>()
                .join("\n")
        );
        if complete.first().is_some_and(|l| l["restart"] == true) {
            resumed_by_b += 1;
        }
    }
    let files = job["files"].as_array().unwrap();
    let victims_done: Vec<&Value> =
        files.iter().filter(|f| victims.contains(&f["destination"].as_str().unwrap().to_string())).collect();
    assert!(
        victims_done.iter().all(|f| f["node"] == "node-b" || f["takeovers"].as_i64() > Some(0)),
        "{victims_done:?}"
    );
    assert!(
        resumed_by_b >= 1 && files.iter().any(|f| f["resumed"].as_i64() > Some(0) && f["takeovers"].as_i64() > Some(0)),
        "no transfer of the killed node was resumed from its ranges: {victims_done:?}"
    );
    assert!(b.log_text().contains("took over transfers"), "{}", b.log_text());
}

#[test]
fn ferry_serve_exposes_its_own_metrics() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let server = FerryServer::start_with(&["--anonymous", "read", "--metrics", &addr]);
    random_file(&server.path("m.bin"), 100_000, 1);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.bin");
    let (ok, _, err) = ferry(&["cp", &server.anon_url("/m.bin"), out.to_str().unwrap()]);
    assert!(ok, "{err}");
    let (code, body) = api("GET", &format!("http://{addr}/metrics"), None, None);
    let text = body.as_str().unwrap_or_default().to_string();
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("ferry_server_transfers_total{direction=\"send\",result=\"complete\"} 1"), "{text}");
    assert!(text.contains("ferry_server_bytes_total{direction=\"send\"} 100000"), "{text}");
    assert!(text.contains("ferry_server_logins_total{result=\"ok\"}"), "{text}");
}
