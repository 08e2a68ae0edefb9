//! The transfer service's dashboard in a real browser: headless Chromium
//! driven over the DevTools protocol signs in through the form with a
//! token, sees the jobs, the per-link throughput plot and the optimiser's
//! decisions, and its session cookie is Secure, HttpOnly and
//! SameSite=Strict; an action without the CSRF token is refused. The
//! screenshot is kept (`FERRY_UPDATE_SCREENSHOT=1` writes
//! docs/img/service-dashboard.png).

mod support;

use base64::Engine;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("FERRY_CHROMIUM") {
        return PathBuf::from(p);
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output() {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !path.is_empty() {
                return PathBuf::from(path);
            }
        }
    }
    panic!("headless Chromium is needed for the dashboard test; apt-get install -y chromium (scripts/deps.sh does)");
}

/// A DevTools-protocol connection to one page.
struct Cdp {
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next: u64,
    events: Vec<Value>,
}

impl Cdp {
    fn raw(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).unwrap();
        loop {
            let m = self.ws.read().unwrap();
            let Ok(text) = m.to_text() else { continue };
            let v: Value = serde_json::from_str(text).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
            self.events.push(v);
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let s = self.session.clone();
        self.raw(Some(&s), method, params)
    }

    /// Waits for an event (already queued or arriving within `limit`).
    fn wait_event(&mut self, method: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
                self.events.drain(..=i);
                return;
            }
            assert!(Instant::now() < deadline, "no {method} within {limit:?}");
            if let MaybeTlsStream::Plain(s) = self.ws.get_mut() {
                s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            }
            match self.ws.read() {
                Ok(m) => {
                    if let Ok(t) = m.to_text() {
                        self.events.push(serde_json::from_str(t).unwrap());
                    }
                }
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => panic!("devtools connection: {e}"),
            }
            if let MaybeTlsStream::Plain(s) = self.ws.get_mut() {
                s.set_read_timeout(None).unwrap();
            }
        }
    }

    fn eval(&mut self, js: &str) -> Value {
        self.call("Runtime.evaluate", json!({ "expression": js, "returnByValue": true }))["result"]["value"].clone()
    }

    fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({ "url": url }));
        self.wait_event("Page.loadEventFired", Duration::from_secs(30));
    }
}

struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn open_browser() -> (Browser, Cdp) {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut url = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = String::new();
    while url.is_none() && Instant::now() < deadline {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        url = line.trim().strip_prefix("DevTools listening on ").map(str::to_string);
    }
    // Keep draining chromium's stderr so it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let url = url.unwrap_or_else(|| panic!("chromium printed no DevTools address: {seen}"));
    let (ws, _) = tungstenite::connect(url.as_str()).unwrap();
    let mut cdp = Cdp { ws, session: String::new(), next: 0, events: Vec::new() };
    let target = cdp.raw(None, "Target.createTarget", json!({ "url": "about:blank" }))["targetId"].clone();
    let attached = cdp.raw(None, "Target.attachToTarget", json!({ "targetId": target, "flatten": true }));
    cdp.session = attached["sessionId"].as_str().unwrap().to_string();
    cdp.call("Page.enable", json!({}));
    cdp.call("Network.enable", json!({}));
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false }),
    );
    (Browser { child, _profile: profile }, cdp)
}

fn token(db: &str, user: &str) -> String {
    let (ok, out, err) = ferry(&["service", "token", "add", user, "--db", db]);
    assert!(ok, "{err}");
    out.lines().last().unwrap().trim().to_string()
}

fn start_service(db: &str, dir: &Path, creds: &Path) -> (Child, String) {
    let log = std::fs::File::create(dir.join("service.log")).unwrap();
    let mut child = Command::new(ferry_bin())
        .args(["service", "--db", db, "--listen", "127.0.0.1:0", "--node-id", "dash-node"])
        .args(["--credentials", creds.to_str().unwrap(), "--optimiser-interval", "1s", "--tick", "100ms"])
        .env("FERRY_LOG", "info,sqlx=warn")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.split(" on ").nth(1).and_then(|r| r.split_whitespace().next()).expect("service address");
    (child, url.trim_end_matches('/').to_string())
}

#[test]
fn dashboard_signs_in_with_a_token_and_shows_jobs_links_and_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let src = FerryServer::start_with(&["--anonymous", "read", "--max-transfer-rate", "2000000"]);
    let dst = FerryServer::start_with(&["--max-transfer-rate", "2000000"]);
    for i in 0..60 {
        random_file(&src.path(&format!("run42/part-{i:03}.nc")), 1_500_000, i);
    }
    let creds = dir.path().join("creds");
    std::fs::write(&creds, format!("{}\n", dst.url(ALICE, "/"))).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
    let db = format!("sqlite:{}", dir.path().join("service.db").display());
    let tok = token(&db, "alice");
    let (mut service, url) = start_service(&db, dir.path(), &creds);
    let submit = |s: &str, d: &str| {
        let (ok, out, err) = ferry(&["submit", "--service", &url, "--token", &tok, "-r", s, d]);
        assert!(ok, "{err}");
        out.lines().last().unwrap().trim().to_string()
    };
    let done_job = submit(&src.anon_url("/run42/"), &format!("ftp://alice@{}/replica/run42/", dst.addr));
    let _refused = submit(&src.anon_url("/run42/"), &format!("ftp://bob@{}/nope/", dst.addr));
    // Let the optimiser decide a few times while files move.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (ok, out, _) = ferry(&["job", &done_job, "--json", "--service", &url, "--token", &tok]);
        let v: Value = serde_json::from_str(&out).unwrap_or_default();
        if ok && v["state"] == "done" {
            break;
        }
        assert!(Instant::now() < deadline, "job did not finish: {out}");
        std::thread::sleep(Duration::from_millis(500));
    }

    let (_browser, mut cdp) = open_browser();
    cdp.navigate(&format!("{url}/"));
    assert_eq!(cdp.eval("document.querySelector('h2').innerText"), "Sign in");
    // Sign in as a person would: type the token, press the button.
    cdp.eval(&format!(
        "document.getElementById('token').value = {}; document.querySelector('form button').click(); 1",
        json!(tok)
    ));
    cdp.wait_event("Page.loadEventFired", Duration::from_secs(30));
    let text = cdp.eval("document.body.innerText").as_str().unwrap_or_default().to_string();
    assert!(text.contains("Signed in as alice"), "{text}");
    assert!(text.contains(&done_job[..8]), "{text}");
    assert!(text.contains("Optimiser decisions") && text.contains("throughput"), "{text}");
    assert!(cdp.eval("document.querySelectorAll('.plot svg').length").as_u64() >= Some(1), "no throughput plot");
    // The session cookie as the browser keeps it.
    let cookies = cdp.call("Network.getCookies", json!({ "urls": [format!("{url}/")] }));
    let session = cookies["cookies"].as_array().unwrap().iter().find(|c| c["name"] == "ferry_session").cloned();
    let session = session.unwrap_or_else(|| panic!("no session cookie: {cookies}"));
    assert_eq!((session["secure"].as_bool(), session["httpOnly"].as_bool()), (Some(true), Some(true)), "{session}");
    assert_eq!(session["sameSite"], "Strict", "{session}");
    assert_eq!(cdp.eval("document.cookie"), "", "script can read a cookie");

    // Screenshot of the whole page.
    let shot = cdp.call("Page.captureScreenshot", json!({ "format": "png", "captureBeyondViewport": true }));
    let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(png.len() > 40_000, "the page rendered (nearly) empty: {} bytes", png.len());
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("service-dashboard.png");
    std::fs::write(&keep, &png).unwrap();
    if std::env::var_os("FERRY_UPDATE_SCREENSHOT").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img/service-dashboard.png");
        std::fs::write(docs, &png).unwrap();
    }

    // The job page, and a cancel without the CSRF token: refused.
    cdp.navigate(&format!("{url}/jobs/{done_job}"));
    let text = cdp.eval("document.body.innerText").as_str().unwrap_or_default().to_string();
    assert!(text.contains("part-000.nc") && text.contains("ADLER32:"), "{text}");
    let cookie = format!("ferry_session={}", session["value"].as_str().unwrap());
    let curl = |args: &[&str]| {
        let out = Command::new(require("curl"))
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let cancel = format!("{url}/jobs/{}/cancel", _refused);
    assert_eq!(curl(&["-X", "POST", "-H", &format!("Cookie: {cookie}"), "--data", "csrf=wrong", &cancel]), "403");
    assert_eq!(curl(&["-X", "POST", "-H", &format!("Cookie: {cookie}"), &cancel]), "415", "no form at all");
    assert_eq!(curl(&["-X", "POST", "--data", "csrf=x", &cancel]), "403", "no session");
    // A sign-in form posted from another site (no login CSRF cookie).
    assert_eq!(curl(&["-X", "POST", "--data", &format!("token={tok}&csrf=abc"), &format!("{url}/login")]), "403");
    let _ = service.kill();
    let _ = service.wait();
    let _ = std::io::stdout().flush();
}
