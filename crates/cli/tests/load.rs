//! Load (issue 7): many concurrent sessions against one `ferry serve`,
//! each looping over login, listing, upload, download (checked byte for
//! byte) and logout for a bounded time. Counts failed transfers (there
//! must be none), and checks that the server's descriptors and threads
//! return to their baseline afterwards; records peak RSS (VmHWM).
//!
//! Not part of the normal suite (it takes a minute and both cores):
//! `scripts/load.sh` runs it and writes `bench/results/load.md`.
//! FERRY_LOAD_SESSIONS (default 200) and FERRY_LOAD_SECS (default 60) set
//! its size.

mod support;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

#[derive(Default)]
struct Counts {
    logins: AtomicU64,
    listings: AtomicU64,
    uploads: AtomicU64,
    downloads: AtomicU64,
    bytes: AtomicU64,
    failed_transfers: AtomicU64,
    other_failures: AtomicU64,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Deterministic content for session `s`, round `r`: 4 KiB to 1 MiB.
fn content(s: u64, r: u64) -> Vec<u8> {
    let len = 4096 + ((s * 7919 + r * 104_729) % (1 << 20)) as usize;
    (0..len).map(|i| (i as u64 ^ s ^ (r << 3)) as u8).collect()
}

/// PASV, then `cmd`; uploads `up` or reads the download. Returns (final
/// reply, downloaded bytes).
fn transfer(c: &mut RawControl, cmd: &str, up: Option<&[u8]>) -> Result<(String, Vec<u8>), String> {
    let p = c.cmd("PASV");
    if !p.starts_with("227") {
        return Err(format!("PASV: {p}"));
    }
    let mut d = TcpStream::connect(pasv_addr(&p)).map_err(|e| format!("data connect: {e}"))?;
    d.set_read_timeout(Some(Duration::from_secs(60))).ok();
    let first = c.cmd(cmd);
    if !first.starts_with('1') {
        return Err(format!("{cmd}: {first}"));
    }
    let mut got = Vec::new();
    match up {
        Some(b) => d.write_all(b).map_err(|e| format!("{cmd}: write {e}"))?,
        None => {
            d.read_to_end(&mut got).map_err(|e| format!("{cmd}: read {e}"))?;
        }
    }
    drop(d);
    Ok((c.reply(), got))
}

/// One session's loop until `until`.
fn session_loop(server: std::net::SocketAddr, s: u64, until: Instant, n: &Counts) {
    let mut round = 0u64;
    while Instant::now() < until {
        round += 1;
        let mut c = RawControl::connect(server);
        c.login(ALICE);
        n.logins.fetch_add(1, Ordering::Relaxed);
        let _ = c.cmd("TYPE I");
        let dir = format!("s{s}");
        let _ = c.cmd(&format!("MKD {dir}"));
        let name = format!("{dir}/f{}", round % 4);
        let body = content(s, round);
        // Upload, list, download, compare.
        match transfer(&mut c, &format!("STOR {name}"), Some(&body)) {
            Ok((r, _)) if r.starts_with("226") => {
                n.uploads.fetch_add(1, Ordering::Relaxed);
                n.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
            }
            other => {
                eprintln!("session {s} round {round}: upload failed: {:?}", other.map(|(r, _)| r));
                n.failed_transfers.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        }
        match transfer(&mut c, &format!("MLSD {dir}"), None) {
            Ok((r, list))
                if r.starts_with("226")
                    && String::from_utf8_lossy(&list).to_ascii_lowercase().contains("type=file") =>
            {
                n.listings.fetch_add(1, Ordering::Relaxed);
            }
            other => {
                eprintln!("session {s} round {round}: listing failed: {:?}", other.map(|(r, l)| (r, l.len())));
                n.other_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        match transfer(&mut c, &format!("RETR {name}"), None) {
            Ok((r, got)) if r.starts_with("226") && got == body => {
                n.downloads.fetch_add(1, Ordering::Relaxed);
                n.bytes.fetch_add(got.len() as u64, Ordering::Relaxed);
            }
            Ok((r, got)) => {
                eprintln!("session {s} round {round}: download {r:?}, {} of {} bytes", got.len(), body.len());
                n.failed_transfers.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                eprintln!("session {s} round {round}: download failed: {e}");
                n.failed_transfers.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !c.cmd("QUIT").starts_with("221") {
            n.other_failures.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Polls until the server's descriptors and threads are back at (or
/// below) the baseline, or `limit` passes; returns the last reading.
fn settle(pid: u32, fds: usize, threads: u64, limit: Duration) -> (usize, u64, Duration) {
    let started = Instant::now();
    loop {
        let (f, t) = (fd_count(pid), thread_count(pid));
        if (f <= fds && t <= threads) || started.elapsed() > limit {
            return (f, t, started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "a minute of load on both cores: run by scripts/load.sh"]
fn concurrent_sessions_mixing_logins_listings_and_transfers() {
    let sessions = env_u64("FERRY_LOAD_SESSIONS", 200);
    let secs = env_u64("FERRY_LOAD_SECS", 60);
    let max = (sessions + 56).to_string();
    let server = FerryServer::start_with(&["--max-sessions", &max, "--max-sessions-per-ip", &max]);
    let pid = server.pid();
    // Baseline after one session, so lazily started pools are counted.
    {
        let mut c = RawControl::connect(server.addr);
        c.login(ALICE);
        let _ = c.cmd("QUIT");
    }
    let (fds0, threads0, _) = settle(pid, usize::MAX, u64::MAX, Duration::ZERO);
    std::thread::sleep(Duration::from_secs(12)); // idle blocking-pool threads expire after 10 s
    let (fds0, threads0) = (fd_count(pid).min(fds0), thread_count(pid).min(threads0));
    let rss0 = proc_status(pid, "VmRSS");

    let counts = Arc::new(Counts::default());
    let until = Instant::now() + Duration::from_secs(secs);
    let peak = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let sampler = {
        let peak = peak.clone();
        std::thread::spawn(move || {
            while Instant::now() < until {
                peak.0.fetch_max(fd_count(pid) as u64, Ordering::Relaxed);
                peak.1.fetch_max(thread_count(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };
    let addr = server.addr;
    let workers: Vec<_> = (0..sessions)
        .map(|s| {
            let n = counts.clone();
            std::thread::Builder::new().stack_size(256 << 10).spawn(move || session_loop(addr, s, until, &n)).unwrap()
        })
        .collect();
    let mut panicked = 0;
    for w in workers {
        if w.join().is_err() {
            panicked += 1;
        }
    }
    sampler.join().unwrap();
    let hwm = proc_status(pid, "VmHWM");
    let (fds1, threads1, waited) = settle(pid, fds0, threads0, Duration::from_secs(30));
    let n = &counts;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let transfers = get(&n.uploads) + get(&n.downloads);
    println!("| sessions (concurrent) | {sessions} |");
    println!("| duration | {secs} s |");
    println!("| logins | {} |", get(&n.logins));
    println!("| listings (MLSD) | {} |", get(&n.listings));
    println!("| transfers (STOR + RETR, verified) | {transfers} ({} + {}) |", get(&n.uploads), get(&n.downloads));
    println!("| bytes moved | {:.1} MiB |", get(&n.bytes) as f64 / 1048576.0);
    println!("| failed transfers | {} |", get(&n.failed_transfers));
    println!("| other failures (listings, QUIT), panicked sessions | {}, {panicked} |", get(&n.other_failures));
    println!("| RSS before | {rss0} KiB |");
    println!("| peak RSS (VmHWM) | {hwm} KiB |");
    println!("| fds before / peak / after | {fds0} / {} / {fds1} |", peak.0.load(Ordering::Relaxed));
    println!("| threads before / peak / after | {threads0} / {} / {threads1} |", peak.1.load(Ordering::Relaxed));
    println!("| time for fds and threads to return | {:.1} s |", waited.as_secs_f64());
    assert_eq!(get(&n.failed_transfers), 0, "failed transfers");
    assert_eq!(panicked, 0, "sessions panicked (a control-channel assertion failed)");
    assert_eq!(get(&n.other_failures), 0);
    assert!(transfers >= sessions, "only {transfers} transfers in {secs} s");
    assert!(fds1 <= fds0, "descriptors: {fds0} before, {fds1} after");
    assert!(threads1 <= threads0, "threads: {threads0} before, {threads1} after");
}
