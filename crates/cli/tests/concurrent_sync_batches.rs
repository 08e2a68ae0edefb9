//! Two sessions at once, each sending `BSTO SYNC` batches whose files
//! fail part-way (docs/batch.md, "No wait for the 125 in a `BSTO SYNC`
//! batch"): each session's failure is its own — its first file stored,
//! the failed file and the rest of its batch and the line queued behind it
//! refused at once, nothing of the other session's refused — then each
//! sends a good batch, which completes with its durability reply. No
//! session waits for the data timeout, and a third session is served
//! meanwhile. The durability passes are shared between sessions
//! (`SyncPasses`), so this is where one session's failure could reach
//! another's batch.

mod support;

use ferry_proto::mode_e::BlockHeader;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use support::*;

/// Whether `r` is a batch line's final reply (`250 Batch of …` or
/// `451 Batch of … failed`).
fn batch_end(r: &str) -> bool {
    (r.starts_with("250") || r.starts_with("451")) && r.contains("Batch of")
}

/// Replies until `lines` batch lines have ended, or the server closes
/// (an empty reply), or 40 replies came.
fn replies_of(c: &mut RawControl, lines: usize) -> Vec<String> {
    let mut rs: Vec<String> = Vec::new();
    while rs.iter().filter(|r| batch_end(r)).count() < lines && rs.len() < 40 {
        let r = c.reply();
        if r.is_empty() {
            break;
        }
        rs.push(r);
    }
    rs
}

/// A barrier that gives up after 30 s (a session that panicked never
/// arrives; the others must not wait for ever).
struct Gate {
    parties: usize,
    state: Mutex<(usize, u64)>,
    turn: Condvar,
}

impl Gate {
    fn new(parties: usize) -> Arc<Self> {
        Arc::new(Self { parties, state: Mutex::new((0, 0)), turn: Condvar::new() })
    }

    fn wait(&self) {
        let mut s = self.state.lock().unwrap();
        let generation = s.1;
        s.0 += 1;
        if s.0 == self.parties {
            *s = (0, generation + 1);
            self.turn.notify_all();
            return;
        }
        let (s, timeout) = self.turn.wait_timeout_while(s, Duration::from_secs(30), |s| s.1 == generation).unwrap();
        assert!(!timeout.timed_out() || s.1 != generation, "another session did not arrive within 30 s");
    }
}

/// One MODE E file of 3 bytes on `d`.
fn send_file(d: &mut std::net::TcpStream, payload: &[u8; 3]) {
    d.write_all(&BlockHeader::data(0, 3).encode()).unwrap();
    d.write_all(payload).unwrap();
    d.write_all(&BlockHeader::eof(1).encode()).unwrap();
}

/// Session `i` as `user`, in step with the others through `start`: a
/// failing batch (with a line queued behind it), then a good one, three
/// times. Returns the longest wait for a failed batch's replies.
fn session(server_addr: std::net::SocketAddr, user: (&str, &str), i: usize, start: Arc<Gate>) -> Duration {
    let mut c = RawControl::connect(server_addr);
    c.login(user);
    assert!(c.cmd("TYPE I").starts_with("200"));
    assert!(c.cmd("MODE E").starts_with("200"));
    let mut longest = Duration::ZERO;
    for round in 0..3 {
        let data = pasv_addr(&c.cmd("PASV"));
        let mut d = std::net::TcpStream::connect(data).unwrap();
        // The data of all four files first, as Ferry's client sends a
        // SYNC batch: /s{i}/a{round} is stored, the second cannot be
        // created (no such directory; in round 1, a directory's name),
        // c{round} is not run, and the line behind, d{round}, is refused
        // with the batch.
        let tag = |c: u8| [c, b'0' + i as u8, b'0' + round as u8];
        for p in [tag(b'a'), tag(b'x'), tag(b'c'), tag(b'd')] {
            send_file(&mut d, &p);
        }
        start.wait();
        let begun = Instant::now();
        let bad = if round == 1 { format!("/s{i}") } else { format!("/missing{i}/x{round}") };
        c.send(
            format!("BSTO SYNC 3 3:/s{i}/a{round} 3:{bad} 3:/s{i}/c{round}\r\nBSTO SYNC 1 3:/s{i}/d{round}").as_bytes(),
        );
        let rs = replies_of(&mut c, 2);
        let took = begun.elapsed();
        longest = longest.max(took);
        let ctx = format!("session {i} round {round}: {rs:?}");
        if round == 0 {
            eprintln!("{ctx}");
        }
        assert_eq!(rs.iter().filter(|r| batch_end(r)).count(), 2, "both lines end: {ctx}");
        assert!(rs.iter().all(|r| !r.starts_with("250")), "no line of a failed batch is durable: {ctx}");
        assert!(rs.iter().any(|r| r.starts_with("226")), "the first file is stored: {ctx}");
        let refused: Vec<&String> = rs.iter().filter(|r| r.starts_with('4') || r.starts_with('5')).collect();
        assert!(
            refused.first().is_some_and(|r| !r.contains("earlier file")),
            "the missing directory is refused first: {ctx}"
        );
        assert_eq!(
            rs.iter().filter(|r| r.contains("earlier file")).count(),
            2,
            "c and d are not run, nothing else: {ctx}"
        );
        assert!(took < Duration::from_secs(10), "the failed batch's replies took {took:?}: {ctx}");
        assert!(c.cmd("NOOP").starts_with("200"), "no reply left over: {ctx}");
        // A good batch on fresh data connections.
        drop(d);
        let data = pasv_addr(&c.cmd("PASV"));
        let mut d = std::net::TcpStream::connect(data).unwrap();
        send_file(&mut d, &tag(b'g'));
        send_file(&mut d, &tag(b'h'));
        c.send(format!("BSTO SYNC 2 3:/s{i}/g{round} 3:/s{i}/h{round}").as_bytes());
        let rs = replies_of(&mut c, 1);
        let ctx = format!("session {i} round {round}, good batch: {rs:?}");
        assert!(rs.last().is_some_and(|r| r.starts_with("250") && r.contains("2 stored")), "{ctx}");
        assert_eq!(rs.iter().filter(|r| r.starts_with("226")).count(), 2, "{ctx}");
        drop(d);
    }
    assert!(c.cmd("QUIT").starts_with("221"));
    longest
}

#[test]
fn two_sessions_failing_sync_batches_at_once_keep_their_failures_apart() {
    let server = FerryServer::start();
    random_file(&server.path("served.bin"), 1 << 20, 31);
    for i in 0..2 {
        std::fs::create_dir(server.path(&format!("s{i}"))).unwrap();
    }
    let addr = server.addr;
    let start = Gate::new(3);
    let sessions: Vec<_> = [(0, ALICE), (1, CAROL)]
        .into_iter()
        .map(|(i, user)| {
            let start = start.clone();
            std::thread::spawn(move || session(addr, user, i, start))
        })
        .collect();
    // A third session, served while the two fail their batches.
    let mut other = RawControl::connect(addr);
    other.login(BOB);
    let mut slowest = Duration::ZERO;
    for _ in 0..3 {
        start.wait();
        let t = Instant::now();
        let r = other.cmd("SIZE /served.bin");
        assert!(r.starts_with("213 1048576"), "{r}");
        assert!(other.cmd("NOOP").starts_with("200"));
        slowest = slowest.max(t.elapsed());
    }
    let waits: Vec<Duration> = sessions.into_iter().map(|h| h.join().expect("a session failed")).collect();
    eprintln!(
        "longest wait for a failed batch's replies per session: {waits:?}; the third session's slowest: {slowest:?}"
    );
    assert!(slowest < Duration::from_secs(5), "the third session waited {slowest:?}");
    for i in 0..2 {
        for round in 0..3 {
            let f = |name: &str| server.path(&format!("s{i}/{name}{round}"));
            let want = |c: u8| vec![c, b'0' + i as u8, b'0' + round as u8];
            assert_eq!(std::fs::read(f("a")).unwrap(), want(b'a'), "session {i}'s stored file is its own");
            assert_eq!(std::fs::read(f("g")).unwrap(), want(b'g'));
            assert_eq!(std::fs::read(f("h")).unwrap(), want(b'h'));
            assert!(!f("c").exists() && !f("d").exists(), "session {i}: a refused file was stored");
        }
    }
    // Nothing of a refused file's data landed anywhere else either.
    for entry in walk(server.root.path()) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name == "served.bin" || ["a", "g", "h"].iter().any(|p| name.starts_with(p)),
            "unexpected file {}",
            entry.display()
        );
    }
}

/// Every regular file under `dir`, hidden ones (partial areas) skipped.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `ferry cp -r` of `src` to `url` with its own state directory: success,
/// stderr, and how long it took.
fn upload(src: &std::path::Path, url: &str, state: &std::path::Path) -> (bool, String, Duration) {
    let t = Instant::now();
    let out = std::process::Command::new(ferry_bin())
        .args(["cp", "-r"])
        .arg(format!("{}/", src.display()))
        .arg(url)
        .env("FERRY_STATE_DIR", state)
        .env("FERRY_LOG", "ferry_client=debug")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned(), t.elapsed())
}

/// The same with Ferry's client: two `ferry cp -r` uploads at once, each
/// into a destination where one of its files' names is taken by a
/// directory. Each fails for that file alone, in bounded time, with every
/// other file stored; once the names are free, both uploads run again at
/// once and complete.
#[test]
fn two_tree_uploads_with_a_failing_file_each_fail_alone_and_then_complete() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let trees: Vec<std::path::PathBuf> = (0..2)
        .map(|i| {
            let src = local.path().join(format!("src{i}"));
            std::fs::create_dir(&src).unwrap();
            for f in 0..40u64 {
                random_file(&src.join(format!("f{f:03}.dat")), 1 + (f * 4099 + i) % 50_000, 500 + 100 * i + f);
            }
            // Taken on the server by a directory (with a file in it, so
            // nothing removes it on the way).
            std::fs::create_dir_all(server.path(&format!("up{i}/f{:03}.dat/keep", 7 + 20 * i))).unwrap();
            src
        })
        .collect();
    let run_both = || -> Vec<(bool, String, Duration)> {
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let src = trees[i].clone();
                let url = server.url(if i == 0 { ALICE } else { CAROL }, &format!("/up{i}/"));
                let state = local.path().join(format!("state{i}"));
                std::thread::spawn(move || upload(&src, &url, &state))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    };
    for (i, (ok, err, took)) in run_both().into_iter().enumerate() {
        let blocked = 7 + 20 * i as u64;
        assert!(!ok, "upload {i} reported success with f{blocked:03}.dat blocked:\n{err}");
        assert!(err.contains("batch sent command=\"BSTO\""), "upload {i} sent no BSTO line:\n{err}");
        assert!(took < Duration::from_secs(40), "upload {i} took {took:?} (a data timeout?):\n{err}");
        for f in (0..40u64).filter(|&f| f != blocked) {
            let name = format!("f{f:03}.dat");
            assert_eq!(
                sha256_file(&server.path(&format!("up{i}/{name}"))),
                sha256_file(&trees[i].join(&name)),
                "upload {i}: {name}:\n{err}"
            );
        }
        assert!(server.path(&format!("up{i}/f{blocked:03}.dat/keep")).is_dir());
        eprintln!("upload {i}: failed as it should, in {took:?}");
    }
    // The batches were SYNC ones: a durability pass ran for those that
    // completed.
    assert!(server.log_text().contains("batch durable"), "{}", server.log_text());
    for i in 0..2 {
        std::fs::remove_dir_all(server.path(&format!("up{i}/f{:03}.dat", 7 + 20 * i))).unwrap();
    }
    for (i, (ok, err, took)) in run_both().into_iter().enumerate() {
        assert!(ok, "upload {i} again:\n{err}");
        assert!(took < Duration::from_secs(40), "upload {i} again took {took:?}");
        assert_eq!(tree_digest(&server.path(&format!("up{i}"))), tree_digest(&trees[i]), "upload {i}");
        eprintln!("upload {i} again: complete in {took:?}");
    }
}
