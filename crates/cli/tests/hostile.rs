//! The hostile-input suite (issue 7): every command that takes a path is
//! tried with paths that try to leave the user's root — lexically (`..`
//! clamps at the root, as POSIX and the Globus server have it), through
//! symbolic links planted inside it, through hard links an administrator
//! made — and with percent-encoded names; data connections from and to
//! third addresses; over-long and endless lines; slow and flooding
//! clients; MODE E streams with absurd headers; REST, ERET and CKSM ranges
//! past the end. Each case states the reply it expects, checks that
//! nothing outside the root was read or changed and that nothing appeared
//! under a final name, and that the server still serves the next client
//! with its memory bounded. `docs/security.md` lists the cases and results.

mod support;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::*;

/// A user confined to `/dave` inside the served directory.
const DAVE: (&str, &str) = ("dave", "dave-secret");
/// What the files outside the root hold; must never reach a client.
const SECRET: &[u8] = b"OUTSIDE-SECRET-5f1c";
/// RSS a server may reach in these tests (it starts near 10 MiB).
const RSS_BOUND_KIB: u64 = 128 * 1024;

fn start(flags: &[&str]) -> FerryServer {
    let s = FerryServer::start_with_users(&[(DAVE.0, DAVE.1, &["--write", "--root", "/dave"])], flags);
    std::fs::create_dir_all(s.path("dave")).unwrap();
    s
}

/// The server answers a fresh client, and its memory stayed bounded.
fn still_serves(server: &FerryServer) {
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    let r = c.cmd("NOOP");
    assert!(r.starts_with("200"), "{r}");
    let rss = rss_kib(server.pid());
    assert!(rss < RSS_BOUND_KIB, "server RSS {rss} KiB exceeds {RSS_BOUND_KIB} KiB");
}

/// Sends a transfer command after PASV. Returns (first reply, data read,
/// final reply); `upload` is written on the data connection when the
/// server accepts the command.
fn transfer(c: &mut RawControl, cmd: &str, upload: Option<&[u8]>) -> (String, Vec<u8>, String) {
    let p = c.cmd("PASV");
    assert!(p.starts_with("227"), "{p}");
    let addr = pasv_addr(&p);
    let data = TcpStream::connect(addr).unwrap();
    data.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let first = c.cmd(cmd);
    if !first.starts_with('1') {
        return (first, Vec::new(), String::new());
    }
    let mut got = Vec::new();
    let mut data = data;
    match upload {
        Some(bytes) => {
            data.write_all(bytes).unwrap();
        }
        None => {
            let _ = data.read_to_end(&mut got);
        }
    }
    drop(data);
    let last = c.reply();
    (first, got, last)
}

/// Every file and directory under `dir` with its content digest, size,
/// mode and mtime: compared before and after to prove nothing changed.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (String, u64, u32, i64)> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, (String, u64, u32, i64)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let md = std::fs::symlink_metadata(&p).unwrap();
            let digest = if md.is_file() { sha256_file(&p) } else { String::new() };
            out.insert(p.clone(), (digest, md.len(), md.mode(), md.mtime()));
            if md.is_dir() {
                walk(&p, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &mut out);
    out
}

/// The layout: served root R with `/dave` (dave's root) and
/// `/top-secret.txt` (outside dave's root); a directory O outside R with
/// secrets; inside `/dave`, links that lead out of it.
struct Layout {
    outside: tempfile::TempDir,
}

fn layout(server: &FerryServer) -> Layout {
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path();
    std::fs::write(o.join("secret.txt"), SECRET).unwrap();
    std::fs::create_dir(o.join("dir")).unwrap();
    std::fs::write(o.join("dir/secret.txt"), SECRET).unwrap();
    std::fs::write(o.join("hardlinked.txt"), SECRET).unwrap();
    std::fs::write(server.path("top-secret.txt"), SECRET).unwrap();
    populate_dave(server, o);
    Layout { outside }
}

/// (Re)creates dave's files and the links that lead out of his root.
fn populate_dave(server: &FerryServer, o: &Path) {
    let d = server.path("dave");
    // Empty it, keeping the directory itself: a logged-in session holds it
    // open as its root.
    for e in std::fs::read_dir(&d).unwrap() {
        let p = e.unwrap().path();
        match std::fs::symlink_metadata(&p).unwrap().is_dir() {
            true => std::fs::remove_dir_all(&p).unwrap(),
            false => std::fs::remove_file(&p).unwrap(),
        }
    }
    std::fs::write(d.join("inside.txt"), b"inside").unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::os::unix::fs::symlink(o, d.join("abs")).unwrap();
    std::os::unix::fs::symlink(o.join("secret.txt"), d.join("abs-file")).unwrap();
    std::os::unix::fs::symlink("..", d.join("up")).unwrap();
    std::os::unix::fs::symlink("../top-secret.txt", d.join("uptop")).unwrap();
    std::os::unix::fs::symlink("../../../../../../../../etc/passwd", d.join("rel-etc")).unwrap();
    // An administrator's hard link to a file outside the root.
    std::fs::hard_link(o.join("hardlinked.txt"), d.join("hl")).unwrap();
}

/// Hostile path arguments: (path, what kind of escape).
const HOSTILE: &[&str] = &[
    "..",
    "../top-secret.txt",
    "../../../../../../etc/passwd",
    "/../top-secret.txt",
    "sub/../../top-secret.txt",
    "/etc/passwd",
    "%2e%2e/top-secret.txt",
    "%2e%2e%2ftop-secret.txt",
    "..%2ftop-secret.txt",
    "abs/secret.txt",
    "abs/dir/secret.txt",
    "abs/new.txt",
    "abs-file",
    "up/top-secret.txt",
    "up",
    "uptop",
    "rel-etc",
];

/// Every command taking a path, as a template (`{}` is the path) and
/// whether it moves data (needs PASV; `Some(upload)`).
fn commands() -> Vec<(&'static str, Option<Option<&'static [u8]>>)> {
    vec![
        ("CWD {}", None),
        ("RETR {}", Some(None)),
        ("STOR {}", Some(Some(b"evil"))),
        ("APPE {}", Some(Some(b"evil"))),
        ("DELE {}", None),
        ("RMD {}", None),
        ("MKD {}", None),
        ("RNFR {}", None),
        ("RNTO {}", None),
        ("SIZE {}", None),
        ("MDTM {}", None),
        ("MFMT 20000101000000 {}", None),
        ("MLST {}", None),
        ("MLSD {}", Some(None)),
        ("LIST {}", Some(None)),
        ("NLST {}", Some(None)),
        ("STAT {}", None),
        ("SITE CHMOD 777 {}", None),
        ("SITE UTIME 20000101000000 {}", None),
        // A group the server may give (its own): only the path is hostile.
        (Box::leak(format!("SITE CHGRP {} {{}}", nix::unistd::getegid()).into_boxed_str()), None),
        ("CKSM MD5 0 -1 {}", None),
        ("ERET P 0 10 {}", Some(None)),
        ("ESTO A 0 {}", Some(Some(b"evil"))),
    ]
}

/// Lexical escapes clamp at the user's root (`/..` is `/`): each names
/// the same thing as its clamped form, inside the root, and must get the
/// same reply.
fn clamped(path: &str) -> Option<&'static str> {
    match path {
        ".." => Some("/"),
        "../top-secret.txt" | "/../top-secret.txt" | "sub/../../top-secret.txt" => Some("/top-secret.txt"),
        "../../../../../../etc/passwd" => Some("/etc/passwd"),
        _ => None,
    }
}

/// The reply each other hostile path gets from each command (`verb` is
/// the command line up to the path).
fn expected(verb: &str, path: &str) -> (u16, &'static str) {
    let creates = ["STOR", "APPE", "ESTO A 0"].contains(&verb);
    match path {
        // Absolute paths are inside the user's root: no /etc there.
        "/etc/passwd" | "%2e%2e/top-secret.txt" => (550, "No such file"),
        // Percent signs are literal: one odd name inside the root.
        "%2e%2e%2ftop-secret.txt" | "..%2ftop-secret.txt" => match verb {
            _ if creates => (226, "Transfer complete"),
            "MKD" => (257, "created"),
            "RNTO" => (250, "Renamed /inside.txt"),
            _ => (550, "No such file"),
        },
        // Through a link that leads out: refused by the capability.
        "abs/secret.txt" | "abs/dir/secret.txt" | "abs/new.txt" | "up/top-secret.txt" => {
            (550, "leads outside the served directory")
        }
        // The link itself: it may be deleted or renamed (its target is
        // not touched), never followed.
        _ => match verb {
            "DELE" => (250, "file deleted"),
            "RNFR" => (350, "File exists"),
            "RNTO" => (250, "Renamed /inside.txt"),
            "RMD" => (550, "Not a directory"),
            "MKD" => (550, "File exists"),
            _ => (550, "leads outside the served directory"),
        },
    }
}

#[test]
fn path_traversal_in_every_command() {
    let server = start(&[]);
    let lay = layout(&server);
    let before_out = snapshot(lay.outside.path());
    let top_before = sha256_file(&server.path("top-secret.txt"));
    let mut c = RawControl::connect(server.addr);
    c.login(DAVE);
    let mut table = Vec::new();
    let run = |c: &mut RawControl, template: &str, path: &str, data: Option<Option<&[u8]>>| {
        populate_dave(&server, lay.outside.path());
        let cmd = template.replace("{}", path);
        if template.starts_with("RNTO") {
            let r = c.cmd("RNFR inside.txt");
            assert!(r.starts_with("350"), "{r}");
        }
        let (first, got, last) = match data {
            Some(upload) => transfer(c, &cmd, upload),
            None => (c.cmd(&cmd), Vec::new(), String::new()),
        };
        let leaked = got.windows(SECRET.len()).any(|w| w == SECRET)
            || first.contains("OUTSIDE-SECRET")
            || first.contains("root:x:0:0");
        // Back to dave's root, whatever CWD did.
        c.cmd("CWD /");
        (cmd, first.trim_end().replace("\r\n", " | "), last.trim_end().to_string(), leaked)
    };
    for (template, data) in commands() {
        for path in HOSTILE {
            let row = run(&mut c, template, path, data);
            // The clamped form, for comparison (its own leak check too).
            let same = clamped(path).map(|p| run(&mut c, template, p, data));
            table.push((row, same));
        }
    }
    let mut failures = Vec::new();
    for ((cmd, first, last, leaked), same) in &table {
        println!("{cmd:40} -> {first} {last}");
        let (verb, path) = cmd.rsplit_once(' ').unwrap();
        if let Some((clamped_cmd, c_first, c_last, c_leaked)) = same {
            // `..` clamps: the same reply as the clamped form, and no
            // refusal for "escaping" any more.
            // A listing's Modify fact may tick between the two runs (the
            // commands between them create and delete in the root).
            let (first_m, c_first_m) = (without_modify(first), without_modify(c_first));
            if *leaked || *c_leaked || first.contains("escapes") || (&first_m, last) != (&c_first_m, c_last) {
                failures.push(format!(
                    "{cmd}: expected what {clamped_cmd} got ({c_first} {c_last}), got {first} {last} \
                     (leaked: {leaked}/{c_leaked})"
                ));
            }
            continue;
        }
        let (want, text) = expected(verb, path);
        let got = if first.starts_with("150") { last } else { first };
        if *leaked || !got.starts_with(&want.to_string()) || !got.contains(text) {
            failures.push(format!("{cmd}: expected {want} ..{text}.., got {first} {last} (leaked: {leaked})"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), table.len(), failures.join("\n"));
    // CDUP climbs, and at the user's root stays there (POSIX `/..`, as
    // the Globus server); STOU is not offered.
    populate_dave(&server, lay.outside.path());
    let r = c.cmd("CDUP");
    assert!(r.starts_with("250") && r.contains("Directory changed to /."), "{r}");
    assert!(c.cmd("CWD sub").starts_with("250"));
    let r = c.cmd("CDUP");
    assert!(r.starts_with("250") && r.contains("Directory changed to /."), "{r}");
    assert!(c.cmd("CDUP").starts_with("250"));
    let r = c.cmd("PWD");
    assert!(r.starts_with("257 \"/\""), "dave's root is his /: {r}");
    assert!(c.cmd("STOU").starts_with("502"));
    assert_eq!(snapshot(lay.outside.path()), before_out, "something outside the root changed");
    assert_eq!(sha256_file(&server.path("top-secret.txt")), top_before);
    still_serves(&server);
}

/// The next reply that is not a preliminary one (GridFTP 111/112
/// markers come before a MODE E transfer's 226).
fn final_reply(c: &mut RawControl) -> String {
    loop {
        let r = c.reply();
        if !r.starts_with('1') {
            return r;
        }
    }
}

/// A TCP connection to `to` from the loopback address `from` (any
/// 127.0.0.0/8 address works on Linux's loopback): a "third host".
fn connect_from(from: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.bind(&SocketAddr::new(from.parse().unwrap(), 0).into())?;
    s.connect_timeout(&to.into(), Duration::from_secs(5))?;
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    Ok(s)
}

fn control_from(from: &str, to: SocketAddr) -> TcpStream {
    connect_from(from, to).unwrap()
}

/// Reads one reply line (or "" on close) from a raw stream.
fn read_reply(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    while let Ok(1) = s.read(&mut b) {
        out.push(b[0]);
        if b[0] == b'\n' {
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn percent_encoded_names_are_literal() {
    let server = start(&[]);
    std::fs::write(server.path("top-secret.txt"), SECRET).unwrap();
    let mut c = RawControl::connect(server.addr);
    c.login(DAVE);
    // Not decoded: a literal name that does not exist...
    for p in ["%2e%2e/top-secret.txt", "%2E%2E%2Ftop-secret.txt", "..%2ftop-secret.txt", "%252e%252e/x"] {
        let r = c.cmd(&format!("SIZE {p}"));
        assert!(r.starts_with("550") && r.contains("No such file"), "{p}: {r}");
    }
    // ...and a literal name that can be created, inside the root.
    let r = c.cmd("MKD %2e%2e");
    assert!(r.starts_with("257"), "{r}");
    assert!(server.path("dave/%2e%2e").is_dir());
    let (first, _, last) = transfer(&mut c, "STOR %2e%2e/x", Some(b"literal"));
    assert!(first.starts_with("150") && last.starts_with("226"), "{first}{last}");
    assert_eq!(std::fs::read(server.path("dave/%2e%2e/x")).unwrap(), b"literal");
    let r = c.cmd("CWD %2e%2e");
    assert!(r.starts_with("250"), "{r}");
    let r = c.cmd("PWD");
    assert!(r.contains("\"/%2e%2e\""), "{r}");
    still_serves(&server);
}

#[test]
fn hard_links_are_read_but_never_written_through() {
    let server = start(&[]);
    let lay = layout(&server);
    let linked = lay.outside.path().join("hardlinked.txt");
    let before = snapshot(lay.outside.path());
    let mut c = RawControl::connect(server.addr);
    c.login(DAVE);
    // Reading: the administrator put the file there.
    let (first, got, last) = transfer(&mut c, "RETR hl", None);
    assert!(first.starts_with("150") && last.starts_with("226") && got == SECRET, "{first}{last}");
    // Changing it in place: refused, with the reason.
    let refusals = [
        ("APPE hl", Some(&b"evil"[..])),
        ("SITE CHMOD 777 hl", None),
        ("MFMT 20000101000000 hl", None),
        ("SITE UTIME 20000101000000 hl", None),
        (&*Box::leak(format!("SITE CHGRP {} hl", nix::unistd::getegid()).into_boxed_str()), None),
    ];
    for (cmd, upload) in refusals {
        let first = match upload {
            Some(u) => transfer(&mut c, cmd, Some(u)).0,
            None => c.cmd(cmd),
        };
        assert!(first.starts_with("550") && first.contains("hard links"), "{cmd}: {first}");
    }
    // REST + STOR with no partial would resume the file in place: refused.
    assert!(c.cmd("TYPE I").starts_with("200"));
    assert!(c.cmd("REST 3").starts_with("350"));
    let (first, _, _) = transfer(&mut c, "STOR hl", Some(b"evil"));
    assert!(first.starts_with("550") && first.contains("hard links"), "{first}");
    assert_eq!(snapshot(lay.outside.path()), before, "the linked file changed");
    // STOR replaces the name (a new file renamed over it), DELE removes
    // the name: neither touches the other link.
    let (first, _, last) = transfer(&mut c, "STOR hl", Some(b"replaced"));
    assert!(first.starts_with("150") && last.starts_with("226"), "{first}{last}");
    assert_eq!(std::fs::read(server.path("dave/hl")).unwrap(), b"replaced");
    assert_eq!(std::fs::read(&linked).unwrap(), SECRET);
    // ESTO works on a copy that replaces the name, like STOR.
    std::fs::remove_file(server.path("dave/hl")).unwrap();
    std::fs::hard_link(&linked, server.path("dave/hl")).unwrap();
    let (first, _, last) = transfer(&mut c, "ESTO A 0 hl", Some(b"evil"));
    assert!(first.starts_with("150") && last.starts_with("226"), "{first}{last}");
    assert!(std::fs::read(server.path("dave/hl")).unwrap().starts_with(b"evil"));
    assert_eq!(std::fs::read(&linked).unwrap(), SECRET);
    std::fs::remove_file(server.path("dave/hl")).unwrap();
    std::fs::hard_link(&linked, server.path("dave/hl")).unwrap();
    assert!(c.cmd("DELE hl").starts_with("250"));
    assert_eq!(std::fs::read(&linked).unwrap(), SECRET);
    still_serves(&server);
}

/// Replaces directory `d` by a symbolic link to `to`, keeping the real
/// directory as `keep`.
fn swap_in_link(d: &Path, keep: &Path, to: &Path) {
    std::fs::rename(d, keep).unwrap();
    std::os::unix::fs::symlink(to, d).unwrap();
}

#[test]
fn symlink_swapped_in_during_a_download_and_an_upload() {
    // 2 MB/s: an 8 MiB file takes about 4 s, time to swap mid-way.
    let server = start(&["--max-transfer-rate", "2M"]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("big.bin"), SECRET.repeat(8 << 20 >> 4)).unwrap();
    let d = server.path("dave/d");
    random_file(&d.join("big.bin"), 8 << 20, 71);
    let want = sha256_file(&d.join("big.bin"));
    let before = snapshot(outside.path());
    let mut c = RawControl::connect(server.addr);
    c.login(DAVE);
    assert!(c.cmd("TYPE I").starts_with("200"));

    // Download: the file was opened before the swap; what arrives is the
    // original, never the outside file.
    let addr = pasv_addr(&c.cmd("PASV"));
    let mut data = TcpStream::connect(addr).unwrap();
    let r = c.cmd("RETR d/big.bin");
    assert!(r.starts_with("150"), "{r}");
    let mut got = vec![0u8; 1 << 20];
    data.read_exact(&mut got).unwrap();
    swap_in_link(&d, &server.path("dave/d-real"), outside.path());
    data.read_to_end(&mut got).unwrap();
    assert!(c.reply().starts_with("226"));
    let local = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(local.path(), &got).unwrap();
    assert_eq!(sha256_file(local.path()), want, "the download changed source mid-way");
    // The link itself is now refused.
    let r = c.cmd("SIZE d/big.bin");
    assert!(r.starts_with("550") && r.contains("outside"), "{r}");

    // Upload: swap back, start an upload into d, swap d for the link
    // mid-way. The upload holds the directory it began in (a descriptor,
    // not a path looked up again), so it ends there, inside the root;
    // nothing is written outside.
    std::fs::remove_file(&d).unwrap();
    std::fs::rename(server.path("dave/d-real"), &d).unwrap();
    let addr = pasv_addr(&c.cmd("PASV"));
    let mut data = TcpStream::connect(addr).unwrap();
    let r = c.cmd("STOR d/up.bin");
    assert!(r.starts_with("150"), "{r}");
    data.write_all(&vec![1u8; 1 << 20]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    swap_in_link(&d, &server.path("dave/d-real"), outside.path());
    data.write_all(&vec![2u8; 1 << 20]).unwrap();
    drop(data);
    let r = c.reply();
    assert!(r.starts_with("226"), "{r}");
    assert_eq!(snapshot(outside.path()), before, "something was written outside the root");
    assert_eq!(std::fs::metadata(server.path("dave/d-real/up.bin")).unwrap().len(), 2 << 20);
    still_serves(&server);
}

#[test]
fn symlink_flipping_race_never_leaks() {
    let server = start(&[]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("f.txt"), SECRET).unwrap();
    std::fs::create_dir(outside.path().join("sub")).unwrap();
    let dave = server.path("dave");
    std::fs::create_dir(dave.join("real")).unwrap();
    std::fs::write(dave.join("real/f.txt"), b"inside").unwrap();
    std::fs::create_dir(dave.join("real/sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dave.join("evil")).unwrap();
    std::os::unix::fs::symlink("real", dave.join("r")).unwrap();
    let before = snapshot(outside.path());
    // Flip `r` between the real directory and the link to outside, as fast
    // as the machine allows, while a client works through it.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        let dave = dave.clone();
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let target = if flips % 2 == 0 { "evil" } else { "real" };
                let tmp = dave.join(".flip");
                let _ = std::fs::remove_file(&tmp);
                std::os::unix::fs::symlink(target, &tmp).unwrap();
                std::fs::rename(&tmp, dave.join("r")).unwrap();
                flips += 1;
            }
            flips
        })
    };
    let mut c = RawControl::connect(server.addr);
    c.login(DAVE);
    let mut seen_ok = 0;
    let started = Instant::now();
    for i in 0..60 {
        if started.elapsed() > Duration::from_secs(40) {
            break;
        }
        for cmd in ["RETR r/f.txt", "LIST r", "MLSD r", "NLST r"] {
            let (first, got, last) = transfer(&mut c, cmd, None);
            assert!(!got.windows(SECRET.len()).any(|w| w == SECRET), "{cmd} leaked the outside file");
            if first.starts_with("150") {
                assert!(last.starts_with("226"), "{cmd}: {last}");
                seen_ok += 1;
            } else {
                assert!(first.starts_with("550"), "{cmd}: {first}");
            }
        }
        let (first, _, last) = transfer(&mut c, &format!("STOR r/up-{i}"), Some(b"x"));
        assert!(first.starts_with("150") || first.starts_with("550"), "{first}");
        assert!(last.is_empty() || last.starts_with("226") || last.starts_with("550"), "{last}");
        for cmd in ["SIZE r/f.txt", "CKSM MD5 0 -1 r/f.txt", "MLST r/f.txt", "MKD r/sub/m", "CWD r/sub"] {
            let r = c.cmd(cmd);
            assert!(!r.contains("OUTSIDE"), "{cmd}: {r}");
            assert!(r.starts_with('2') || r.starts_with("550"), "{cmd}: {r}");
        }
        c.cmd("CWD /");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    println!("{flips} flips, {seen_ok} listings/downloads served from inside");
    assert!(flips > 100);
    assert_eq!(snapshot(outside.path()), before, "something was written outside the root");
    still_serves(&server);
}

#[test]
fn port_and_eprt_to_a_third_address_are_refused() {
    let server = start(&[]);
    std::fs::write(server.path("f.txt"), b"data").unwrap();
    // A listener on the "third host" 127.0.0.2: nothing may connect to it.
    let third = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    third.set_nonblocking(true).unwrap();
    let port = third.local_addr().unwrap().port();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    let (p1, p2) = (port >> 8, port & 0xff);
    for cmd in [
        format!("PORT 127,0,0,2,{p1},{p2}"),
        format!("EPRT |1|127.0.0.2|{port}|"),
        format!("EPRT |2|::1|{port}|"),
        format!("SPOR 127,0,0,2,{p1},{p2}"),
    ] {
        let r = c.cmd(&cmd);
        assert!(r.starts_with("501") && r.contains("client's own address"), "{cmd}: {r}");
        // No data setup was made: a transfer now is refused, not sent.
        let r = c.cmd("RETR f.txt");
        assert!(r.starts_with("425"), "{cmd} then RETR: {r}");
    }
    // A privileged port on the client's own address is refused too.
    let r = c.cmd("PORT 127,0,0,1,0,22");
    assert!(r.starts_with("501") && r.contains("privileged"), "{r}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(third.accept().is_err(), "the server connected to the third address");
    still_serves(&server);
}

#[test]
fn passive_connections_from_a_third_address_are_dropped() {
    let server = start(&["--data-timeout", "10"]);
    std::fs::write(server.path("f.txt"), b"the data").unwrap();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    // Stream mode download: the thief connects first and gets nothing.
    let addr = pasv_addr(&c.cmd("PASV"));
    let mut thief = connect_from("127.0.0.2", addr).unwrap();
    let r = c.cmd("RETR f.txt");
    assert!(r.starts_with("150"), "{r}");
    let mut stolen = Vec::new();
    let _ = thief.read_to_end(&mut stolen);
    assert!(stolen.is_empty(), "data went to a third address");
    let mut data = TcpStream::connect(addr).unwrap();
    let mut got = Vec::new();
    data.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"the data");
    assert!(c.reply().starts_with("226"));
    // MODE E upload: blocks injected from a third address are not written.
    assert!(c.cmd("TYPE I").starts_with("200"));
    assert!(c.cmd("MODE E").starts_with("200"));
    let addr = pasv_addr(&c.cmd("PASV"));
    let r = c.cmd("STOR up.bin");
    assert!(r.starts_with("150") || r.starts_with("125"), "{r}");
    use ferry_proto::mode_e::BlockHeader;
    let mut inject = connect_from("127.0.0.2", addr).unwrap();
    let _ = inject.write_all(&BlockHeader::data(0, 4).encode());
    let _ = inject.write_all(b"EVIL");
    let _ = inject.write_all(&BlockHeader::eof(1).encode());
    let mut rest = Vec::new();
    let _ = inject.read_to_end(&mut rest); // closed by the server
    let mut ok = TcpStream::connect(addr).unwrap();
    ok.write_all(&BlockHeader::data(0, 4).encode()).unwrap();
    ok.write_all(b"GOOD").unwrap();
    ok.write_all(&BlockHeader::eof(1).encode()).unwrap();
    let r = final_reply(&mut c);
    assert!(r.starts_with("226"), "{r}");
    assert_eq!(std::fs::read(server.path("up.bin")).unwrap(), b"GOOD");
    let log = server.log_text();
    assert!(log.contains("dropped a data connection from a foreign address"), "{log}");
    still_serves(&server);
}

#[test]
fn endless_line_and_unread_reply_flood_keep_memory_bounded() {
    let server = start(&["--idle-timeout", "5", "--login-timeout", "30"]);
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    // After a login: the password checkers' memory is part of the baseline.
    let before = rss_kib(server.pid());
    // 32 MiB without a line end: one 500 reply, the rest is discarded.
    let chunk = vec![b'A'; 1 << 20];
    c.stream.write_all(b"RETR ").unwrap();
    for _ in 0..32 {
        c.stream.write_all(&chunk).unwrap();
    }
    let r = c.reply();
    assert!(r.starts_with("500") && r.contains("longer than 8192"), "{r}");
    let during = rss_kib(server.pid());
    // The line ends; the session goes on.
    c.stream.write_all(b"\r\n").unwrap();
    assert!(c.cmd("NOOP").starts_with("200"));
    // Without a line end at all, the idle timeout closes the connection.
    c.stream.write_all(&chunk).unwrap();
    let r = c.reply();
    assert!(r.starts_with("500"), "{r}");
    let r = c.reply();
    assert!(r.starts_with("421") && r.contains("Idle"), "{r}");

    assert!(during < before + 32 * 1024, "RSS grew from {before} KiB to {during} KiB on an endless line");

    // 4 M pipelined NOOPs from a client that never reads its replies:
    // back-pressure, not memory.
    let mut f = RawControl::connect(server.addr);
    f.login(ALICE);
    f.stream.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let noops = b"NOOP\r\n".repeat(1 << 16);
    let mut sent = 0usize;
    let started = Instant::now();
    while sent < 4 << 20 && started.elapsed() < Duration::from_secs(20) {
        match f.stream.write(&noops) {
            Ok(n) => sent += n / 6,
            Err(_) => break, // the server stopped reading: back-pressure
        }
    }
    let flooded = rss_kib(server.pid());
    assert!(flooded < before + 32 * 1024, "RSS grew from {before} KiB to {flooded} KiB ({sent} NOOPs unread)");
    // A client that stopped reading is not kept past the idle timeout: the
    // server gives up on its blocked reply and closes the connection, so
    // reading now ends (after what was queued) instead of going on.
    std::thread::sleep(Duration::from_secs(7));
    f.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    let mut buf = vec![0u8; 1 << 16];
    let closed = loop {
        match f.stream.read(&mut buf) {
            Ok(0) | Err(_) => break true,
            Ok(_) if started.elapsed() > Duration::from_secs(10) => break false,
            Ok(_) => {}
        }
    };
    assert!(closed, "the server kept serving a client that does not read its replies");
    drop(f);
    still_serves(&server);
}

#[test]
fn concurrent_logins_keep_memory_bounded() {
    // Each argon2id check takes 19 MiB; 150 clients sending PASS at once
    // must not make the server hold 150 of them.
    let server = start(&["--max-sessions-per-ip", "200", "--login-lockout-failures", "0"]);
    let pid = server.pid();
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampler = {
        let peak = peak.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(15);
            while Instant::now() < until {
                peak.fetch_max(rss_kib(pid), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let mut conns: Vec<RawControl> = (0..150).map(|_| RawControl::connect(server.addr)).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        c.send(b"USER alice");
        // Half guess, half know the password.
        let pass = if i % 2 == 0 { "PASS wrong".to_string() } else { format!("PASS {}", ALICE.1) };
        c.send(pass.as_bytes());
    }
    for (i, c) in conns.iter_mut().enumerate() {
        assert!(c.reply().starts_with("331"));
        let r = c.reply();
        let want = if i % 2 == 0 { "530" } else { "230" };
        assert!(r.starts_with(want), "{i}: {r}");
    }
    sampler.join().unwrap();
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    println!("peak RSS during 150 concurrent logins: {peak} KiB");
    assert!(peak < RSS_BOUND_KIB, "RSS peaked at {peak} KiB during 150 concurrent logins");
    drop(conns);
    still_serves(&server);
}

#[test]
fn half_a_command_line_then_silence_is_cut_off() {
    let server = start(&["--idle-timeout", "3", "--login-timeout", "3"]);
    // Before login: half of USER, then nothing.
    let mut before = RawControl::connect(server.addr);
    before.stream.write_all(b"USER ali").unwrap();
    // Logged in: half of RETR, then nothing.
    let mut after = RawControl::connect(server.addr);
    after.login(ALICE);
    after.stream.write_all(b"RETR some").unwrap();
    // A slowloris: one byte a second before login, never a line end. The
    // login timeout counts from the connection, not from the last byte.
    let mut slow = RawControl::connect(server.addr);
    let started = Instant::now();
    let mut slow_closed = false;
    for b in b"USER alice-and-more-and-more".iter().cycle().take(12) {
        if slow.stream.write_all(&[*b]).is_err() {
            slow_closed = true;
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let r = before.reply();
    assert!(r.starts_with("421") && r.contains("Not logged in"), "half USER: {r}");
    assert_eq!(before.reply(), "", "closed after the 421");
    let r = after.reply();
    assert!(r.starts_with("421") && r.contains("Idle"), "half RETR: {r}");
    assert_eq!(after.reply(), "", "closed after the 421");
    let r = slow.reply();
    assert!(slow_closed || (r.starts_with("421") && r.contains("Not logged in")), "slowloris: {r}");
    assert_eq!(slow.reply(), "");
    assert!(started.elapsed() < Duration::from_secs(15));
    still_serves(&server);
}

#[test]
fn connection_floods_past_the_limits_get_421() {
    let server = start(&["--max-sessions", "40", "--max-sessions-per-ip", "10"]);
    // Per address: 10 from 127.0.0.1 are served, the 11th is refused.
    let held: Vec<_> = (0..10).map(|_| RawControl::connect(server.addr)).collect();
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let r = read_reply(&mut s);
    assert_eq!(r, "421 Too many sessions from your address; try again later.\r\n");
    assert_eq!(read_reply(&mut s), "", "closed after the 421");
    // Other addresses still get in, up to the server's total of 40.
    let mut others = Vec::new();
    for i in 0..30 {
        let mut c = control_from(&format!("127.0.0.{}", 2 + i / 10), server.addr);
        let r = read_reply(&mut c);
        assert!(r.starts_with("220"), "{i}: {r}");
        others.push(c);
    }
    let mut c = control_from("127.0.0.9", server.addr);
    let r = read_reply(&mut c);
    assert_eq!(r, "421 Too many sessions on this server; try again later.\r\n");
    // A flood of 300 connections while full: each gets its 421, the
    // server's memory and descriptors stay bounded.
    let fds_before = fd_count(server.pid());
    for i in 0..300 {
        let mut c = control_from(&format!("127.0.1.{}", 1 + i % 200), server.addr);
        let r = read_reply(&mut c);
        assert!(r.starts_with("421"), "{i}: {r}");
    }
    std::thread::sleep(Duration::from_millis(300));
    let fds_after = fd_count(server.pid());
    assert!(fds_after <= fds_before + 5, "descriptors grew from {fds_before} to {fds_after}");
    drop(held);
    drop(others);
    std::thread::sleep(Duration::from_millis(500));
    still_serves(&server);
}

/// Logs in as alice and starts a MODE E upload of `name`; returns the
/// control connection and a data connection.
fn mode_e_upload(server: &FerryServer, name: &str) -> (RawControl, TcpStream) {
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("TYPE I").starts_with("200"));
    assert!(c.cmd("MODE E").starts_with("200"));
    let addr = pasv_addr(&c.cmd("PASV"));
    let r = c.cmd(&format!("STOR {name}"));
    assert!(r.starts_with("150") || r.starts_with("125"), "{r}");
    let d = TcpStream::connect(addr).unwrap();
    d.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    (c, d)
}

#[test]
fn mode_e_blocks_with_absurd_headers_fail_the_upload_cleanly() {
    use ferry_proto::mode_e::BlockHeader;
    let server = start(&["--data-timeout", "5"]);
    let before = rss_kib(server.pid());
    // (case, what the data connection carries, the final reply's code and text)
    let hdr = |h: BlockHeader| h.encode().to_vec();
    let data = |off: u64, bytes: &[u8]| [hdr(BlockHeader::data(off, bytes.len() as u64)), bytes.to_vec()].concat();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // A block announcing 2^63 bytes, followed by a few.
        ("absurd count", [hdr(BlockHeader::data(0, 1 << 63)), b"abc".to_vec()].concat()),
        // A block past any file offset.
        ("offset near u64::MAX", data(u64::MAX - 2, b"abcd")),
        // An EOF announcing 2^40 data connections.
        ("absurd EOD count", [data(0, b"abcd"), hdr(BlockHeader::eof(1 << 40))].concat()),
        // Two blocks writing the same bytes.
        ("overlapping blocks", [data(0, b"abcd"), data(2, b"XYZW"), hdr(BlockHeader::eof(1))].concat()),
        // EOF says 3 connections; one came and closed.
        ("wrong EOD count", [data(0, b"abcd"), hdr(BlockHeader::eof(3))].concat()),
    ];
    let mut results = Vec::new();
    for (i, (case, bytes)) in cases.iter().enumerate() {
        let name = format!("e{i}.bin");
        let (mut c, mut d) = mode_e_upload(&server, &name);
        let _ = d.write_all(bytes);
        let _ = d.shutdown(std::net::Shutdown::Write);
        let r = final_reply(&mut c);
        println!("{case}: {}", r.trim_end());
        results.push((case, r.clone()));
        assert!(!server.path(&name).exists(), "{case}: a failed upload appeared under its final name");
        // The same session goes on.
        assert!(c.cmd("NOOP").starts_with("200"), "{case}: session unusable after {r}");
    }
    // Each fails the transfer with 426 and says why; the EOF that
    // announces connections that never come waits out the data timeout.
    let want: &[(&str, &str)] = &[
        ("absurd count", "426 Data connection lost: block at offset 0 with 9223372036854775808 bytes runs past the largest file offset"),
        ("offset near u64::MAX", "426 Data connection lost: block at offset 18446744073709551613 with 4 bytes runs past the largest file offset"),
        ("absurd EOD count", "426 Data connection lost: EOF announces 1099511627776 data connections, more than the 4096 allowed"),
        ("overlapping blocks", "426 Data connection lost: a block for bytes 2-6 overlaps data already received in this transfer"),
        ("wrong EOD count", "426 Data connection lost: no data moved for 5 s"),
    ];
    for ((case, r), (wcase, text)) in results.iter().zip(want) {
        assert_eq!(*case, wcase);
        assert!(r.starts_with(text), "{case}: expected {text}, got {r}");
    }
    let after = rss_kib(server.pid());
    assert!(after < before + 64 * 1024, "RSS grew from {before} to {after} KiB");
    still_serves(&server);
}

#[test]
fn ranges_past_the_end_rest_eret_cksm() {
    let server = start(&[]);
    std::fs::write(server.path("f.txt"), b"0123456789").unwrap();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("TYPE I").starts_with("200"));
    // REST beyond the end: accepted (the size may change), RETR then
    // refuses it with the file's size.
    let r = c.cmd("REST 100");
    assert!(r.starts_with("350"), "{r}");
    let (first, got, last) = transfer(&mut c, "RETR f.txt", None);
    println!("REST 100 + RETR: {first} {last}");
    assert!(got.is_empty());
    assert!(first.starts_with("554") || last.starts_with("554"), "{first} {last}");
    let r = c.cmd(&format!("REST {}", u64::MAX));
    println!("REST max: {r}");
    assert!(r.starts_with("350"), "{r}");
    let started = Instant::now();
    let (first, got, last) = transfer(&mut c, "RETR f.txt", None);
    println!("REST max + RETR: {first} {last} ({:?})", started.elapsed());
    assert!(got.is_empty());
    assert!(first.starts_with("554") && first.contains("beyond the end of the file"), "{first} {last}");
    // ERET past EOF: the part that exists, in MODE E framing, or none.
    assert!(c.cmd("MODE E").starts_with("200"));
    for (off, len) in [(8u64, 100u64), (100, 10), (u64::MAX - 1, u64::MAX)] {
        // In MODE E the sender connects: PORT to a listener of ours.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let r = c.cmd(&format!("PORT 127,0,0,1,{},{}", port >> 8, port & 0xff));
        assert!(r.starts_with("200"), "{r}");
        let first = c.cmd(&format!("ERET P {off} {len} f.txt"));
        let mut payload = 0u64;
        let mut last = String::new();
        if first.starts_with('1') {
            // Blocks up to the EOF block: the data channel stays open (MODE E
            // keeps it for the next transfer).
            let (mut d, _) = l.accept().unwrap();
            d.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            loop {
                let mut h = [0u8; 17];
                d.read_exact(&mut h).unwrap();
                let h = ferry_proto::mode_e::BlockHeader::decode(&h);
                let mut body = vec![0u8; h.payload_len() as usize];
                d.read_exact(&mut body).unwrap();
                payload += body.len() as u64;
                if h.is_eof() {
                    break;
                }
            }
            last = final_reply(&mut c);
        }
        println!("ERET P {off} {len}: {} {} ({payload} bytes)", first.trim_end(), last.trim_end());
        // The part that exists (none past the end), then EOF.
        assert_eq!(payload, 10u64.saturating_sub(off), "ERET {off} {len}");
        assert!(first.starts_with("150") && last.starts_with("226"), "{first} {last}");
    }
    assert!(c.cmd("MODE S").starts_with("200"));
    // CKSM on huge ranges: bounded by the file, answered at once.
    for (off, len, want) in [
        ("0", "-1", "781e5e245d69b566979b86e28d23f2c7"),
        ("0", &u64::MAX.to_string()[..], "781e5e245d69b566979b86e28d23f2c7"),
        (&u64::MAX.to_string()[..], "10", "d41d8cd98f00b204e9800998ecf8427e"),
        ("5", "1000000000000", "099ebea48ea9666a7da2177267983138"),
    ] {
        let started = Instant::now();
        let r = c.cmd(&format!("CKSM MD5 {off} {len} f.txt"));
        println!("CKSM {off} {len}: {}", r.trim_end());
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(r, format!("213 {want}\r\n"), "CKSM {off} {len}");
    }
    let r = c.cmd("CKSM MD5 -5 10 f.txt");
    assert!(r.starts_with("501"), "{r}");
    still_serves(&server);
}

#[test]
fn login_brute_force_is_delayed_then_locked_out() {
    let server = start(&["--login-lockout-failures", "6", "--login-lockout-secs", "60"]);
    // Two connections of three guesses each: the second's last guess locks
    // 127.0.0.1 out.
    for round in 0..2 {
        let mut c = RawControl::connect(server.addr);
        for attempt in 1..=3 {
            assert!(c.cmd("USER alice").starts_with("331"));
            let started = Instant::now();
            let r = c.cmd("PASS guess");
            assert!(started.elapsed() >= Duration::from_millis(90), "failure answered without delay");
            let want = if attempt < 3 { "530" } else { "421" };
            assert!(r.starts_with(want), "round {round} attempt {attempt}: {r}");
        }
        assert_eq!(c.reply(), "", "connection closed after too many failures");
    }
    // Locked: new connections get 421 instead of the greeting, even with
    // the right password.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let r = read_reply(&mut s);
    assert!(r.starts_with("421 Too many failed logins from your address; try again in"), "{r}");
    assert_eq!(read_reply(&mut s), "");
    // Another address is not affected.
    let mut other = control_from("127.0.0.3", server.addr);
    assert!(read_reply(&mut other).starts_with("220"));
    other.write_all(b"USER alice\r\n").unwrap();
    assert!(read_reply(&mut other).starts_with("331"));
    other.write_all(format!("PASS {}\r\n", ALICE.1).as_bytes()).unwrap();
    assert!(read_reply(&mut other).starts_with("230"));
    let log = server.log_text();
    assert!(log.contains("locked out"), "{log}");
}

#[test]
fn cksm_of_a_huge_file_stops_when_the_client_leaves() {
    let server = start(&[]);
    // 1 TiB, sparse: a full MD5 would read for many minutes.
    let f = std::fs::File::create(server.path("huge.bin")).unwrap();
    f.set_len(1 << 40).unwrap();
    drop(f);
    std::fs::write(server.path("small.txt"), b"0123456789").unwrap();
    for _ in 0..4 {
        let mut c = RawControl::connect(server.addr);
        c.login(ALICE);
        c.send(b"CKSM MD5 0 -1 huge.bin");
        std::thread::sleep(Duration::from_millis(300));
        // Hang up without waiting for the answer.
    }
    let started = Instant::now();
    let abandoned = loop {
        let n = server.log_text().matches("checksum abandoned: the client closed the connection").count();
        if n == 4 || started.elapsed() > Duration::from_secs(20) {
            break n;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(abandoned, 4, "checksums went on after their clients left");
    // The next client's CKSM is answered at once.
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert_eq!(c.cmd("CKSM MD5 0 -1 small.txt"), "213 781e5e245d69b566979b86e28d23f2c7\r\n");
    still_serves(&server);
}

#[test]
fn stalled_data_connections_are_cut_by_the_data_timeout() {
    let server = start(&["--data-timeout", "3"]);
    random_file(&server.path("big.bin"), 64 << 20, 90);
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("TYPE I").starts_with("200"));
    // A download whose client never reads: the socket buffers fill, then
    // nothing moves.
    let addr = pasv_addr(&c.cmd("PASV"));
    let reader = TcpStream::connect(addr).unwrap();
    let r = c.cmd("RETR big.bin");
    assert!(r.starts_with("150"), "{r}");
    let started = Instant::now();
    let r = c.reply();
    println!("unread RETR: {} after {:?}", r.trim_end(), started.elapsed());
    assert!(r.starts_with("426"), "{r}");
    drop(reader);
    // An upload whose client connects and sends nothing.
    let addr = pasv_addr(&c.cmd("PASV"));
    let writer = TcpStream::connect(addr).unwrap();
    let r = c.cmd("STOR silent.bin");
    assert!(r.starts_with("150"), "{r}");
    let r = c.reply();
    println!("silent STOR: {}", r.trim_end());
    assert!(r.starts_with("426") && r.contains("no data"), "{r}");
    drop(writer);
    assert!(!server.path("silent.bin").exists());
    // A PASV nobody connects to.
    let _ = pasv_addr(&c.cmd("PASV"));
    let r = c.cmd("RETR big.bin");
    println!("unconnected PASV: {}", r.trim_end());
    let r = if r.starts_with("150") { c.reply() } else { r };
    assert!(r.starts_with("425"), "{r}");
    // The session goes on.
    assert!(c.cmd("NOOP").starts_with("200"));
    still_serves(&server);
}

/// Writes `chunk` again and again on a client that never reads its
/// replies, until the server stops reading (the write times out: back
/// pressure) or `for_at_most` passes. Returns how many chunks went out.
fn flood_unread(c: &mut RawControl, chunk: &[u8], for_at_most: Duration) -> usize {
    c.stream.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let started = Instant::now();
    let mut sent = 0;
    while started.elapsed() < for_at_most {
        if c.stream.write_all(chunk).is_err() {
            break;
        }
        sent += 1;
    }
    sent
}

/// Everything the server still sends on `c`, read until it closes the
/// connection, is silent for `quiet` or `for_at_most` passes: the complete reply lines
/// (continuation lines included), whether it closed, and the part of a
/// last line cut off by the close (a server that gives up on a client
/// that does not read stops mid-write).
fn drain_lines(c: &mut RawControl, quiet: Duration, for_at_most: Duration) -> (Vec<String>, bool, Option<String>) {
    c.stream.set_read_timeout(Some(quiet)).unwrap();
    let mut all = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let until = Instant::now() + for_at_most;
    let closed = loop {
        if Instant::now() > until {
            break false;
        }
        match c.stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => break false,
            Err(_) => break true,
        }
    };
    let text = String::from_utf8_lossy(&all);
    let (whole, cut) = match text.rfind('\n') {
        Some(i) if i + 1 < text.len() => (&text[..=i], Some(text[i + 1..].to_string())),
        Some(_) => (&text[..], None),
        None if text.is_empty() => ("", None),
        None => ("", Some(text.to_string())),
    };
    (whole.lines().map(str::to_string).collect(), closed, cut)
}

/// A `BSTO SYNC` line of `n` empty files under `/flood/`.
fn sync_batch_line(n: usize, tag: usize) -> Vec<u8> {
    let names: Vec<String> = (0..n).map(|i| format!("0:/flood/{tag}-{i}")).collect();
    format!("BSTO SYNC {n} {}\r\n", names.join(" ")).into_bytes()
}

/// A client floods `BSTO SYNC` lines of 512 files each (every line
/// expands into 1025 commands and replies) without sending any data and
/// without reading a reply: first with no data connection at all, then
/// with one that carries nothing. The server reads no more than its
/// command queue holds, so memory and open files stay where they were;
/// another client is served meanwhile; every reply the flooder reads is a
/// clear one (ALLO's 200, the first file's refusal, `451 Not run` for the
/// rest, the batch's `451 ... failed`), or the session is cut after the
/// idle timeout; and nothing appears under a final name.
#[test]
fn bsto_sync_flood_without_data_stays_bounded() {
    let server = start(&["--idle-timeout", "5", "--data-timeout", "3"]);
    std::fs::create_dir_all(server.path("flood")).unwrap();
    let pid = server.pid();
    let mut warm = RawControl::connect(server.addr);
    warm.login(ALICE);
    let rss_before = rss_kib(pid);
    let fds_before = fd_count(pid);

    for with_data_connection in [false, true] {
        let mut c = RawControl::connect(server.addr);
        c.login(ALICE);
        assert!(c.cmd("TYPE I").starts_with("200"));
        assert!(c.cmd("MODE E").starts_with("200"));
        // With a data connection that never carries a block, the first
        // file waits for its data until the data timeout.
        let _data = with_data_connection.then(|| TcpStream::connect(pasv_addr(&c.cmd("PASV"))).unwrap());
        let lines: Vec<u8> = (0..8).flat_map(|t| sync_batch_line(512, t)).collect();
        assert!(sync_batch_line(512, 7).len() < 8192, "each line within the control line limit");
        let sent = flood_unread(&mut c, &lines, Duration::from_secs(10));
        let rss = rss_kib(pid);
        let fds = fd_count(pid);
        println!(
            "data connection {with_data_connection}: {} BSTO SYNC lines sent unread; RSS {rss_before} -> {rss} KiB, fds \
             {fds_before} -> {fds}",
            sent * 8
        );
        assert!(rss < rss_before + 32 * 1024, "RSS grew from {rss_before} KiB to {rss} KiB");
        assert!(fds <= fds_before + 8, "open files grew from {fds_before} to {fds}");
        // Another client is served while the flooder's session is stuck.
        let mut other = RawControl::connect(server.addr);
        other.login(ALICE);
        let r = other.cmd("MLST /flood");
        assert!(r.starts_with("250"), "{r}");
        drop(other);

        // Without a data connection every command is answered at once,
        // so the flooder reads everything; with one, the first file of
        // each batch waits for its data (the data timeout) on the passive
        // listener, so it reads for a while and then leaves.
        let (got, closed, cut) = drain_lines(&mut c, Duration::from_secs(12), Duration::from_secs(30));
        assert!(cut.is_none() || closed, "a reply line was left unfinished on an open session: {cut:?}");
        let mut ends = 0;
        for l in &got {
            let ok = l.starts_with("200 ALLO")
                || l.starts_with("200 ")
                || (l.starts_with("451 Not run") && l.contains("earlier file"))
                || l.starts_with("425 ")
                || l.starts_with("426 ")
                || l.starts_with("421 ")
                || l.starts_with("150 ")
                || l.starts_with("125 ")
                // The waiting file's MODE E perf markers (`112-Perf Marker`,
                // its indented lines, `112 End.`).
                || l.starts_with("112")
                || l.starts_with(' ');
            if l.starts_with("451 Batch of 512 files failed; the 0 stored are durable.") {
                ends += 1;
            } else {
                assert!(ok, "an unclear reply to the flood: {l:?}");
            }
        }
        println!(
            "data connection {with_data_connection}: read {} reply lines, {ends} batch ends, closed {closed}, last line \
             cut by the close: {cut:?}",
            got.len()
        );
        assert!(ends >= 1, "no batch's final reply among {} lines: {:?}", got.len(), got.first());
        // The flooder leaves; its session goes, and with it its files.
        drop(c);
        let left = Instant::now();
        while fd_count(pid) > fds_before && left.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(fd_count(pid) <= fds_before, "open files {} after the flooder left (was {fds_before})", fd_count(pid));
        // Under a final name, nothing; a file that waited for its data and
        // failed leaves its partial upload for a resume, as any failed
        // upload does (docs/partial-files.md).
        let names: Vec<String> = std::fs::read_dir(server.path("flood"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != ".ferry-partial")
            .collect();
        assert!(names.is_empty(), "files appeared from no data: {names:?}");
        // At most one per batch (its first file, which waited), each empty.
        // (Each is kept with its record until the partial expiry, even
        // though no byte of it arrived: see docs/security.md.)
        if let Ok(area) = std::fs::read_dir(server.path("flood/.ferry-partial")) {
            let parts: Vec<u64> = area
                .map(|e| e.unwrap())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".part"))
                .map(|e| e.metadata().unwrap().len())
                .collect();
            println!("data connection {with_data_connection}: {} empty partial uploads left", parts.len());
            assert!(parts.len() <= ends + 1, "{} partials from {ends} batches", parts.len());
            assert!(parts.iter().all(|&n| n == 0), "a partial with data that was never sent: {parts:?}");
        }
    }
    let rss = rss_kib(pid);
    assert!(rss < rss_before + 32 * 1024, "RSS grew from {rss_before} KiB to {rss} KiB");
    drop(warm);
    still_serves(&server);
}

/// Pipelined MLST, MLSD (no data connection: 425 at once), SITE HELP,
/// STAT of a directory of 3000 names (a reply of some 150 KB on the
/// control connection) and HELP, never read: the server writes one reply
/// at a time and reads no further command while it cannot, so nothing
/// queues up in it, and it cuts the session once a reply has waited the
/// idle timeout.
#[test]
fn unread_listing_and_site_flood_keeps_the_output_bounded() {
    let server = start(&["--idle-timeout", "5"]);
    let dir = server.path("many");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..3000 {
        std::fs::write(dir.join(format!("file-with-a-longish-name-{i:05}")), b"").unwrap();
    }
    let pid = server.pid();
    let mut warm = RawControl::connect(server.addr);
    warm.login(ALICE);
    let stat = warm.cmd("STAT /many");
    assert!(stat.starts_with("213") && stat.len() > 100_000, "{}", stat.len());
    let rss_before = rss_kib(pid);
    let fds_before = fd_count(pid);

    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    let round = b"MLST /many\r\nMLSD /many\r\nSITE HELP\r\nSTAT /many\r\nHELP\r\nMLST /\r\n".repeat(64);
    let started = Instant::now();
    let sent = flood_unread(&mut c, &round, Duration::from_secs(10));
    let rss = rss_kib(pid);
    let fds = fd_count(pid);
    println!(
        "{} pipelined commands sent unread in {:?}; RSS {rss_before} -> {rss} KiB, fds {fds_before} -> {fds}",
        sent * 64 * 6,
        started.elapsed()
    );
    assert!(rss < rss_before + 32 * 1024, "RSS grew from {rss_before} KiB to {rss} KiB");
    assert!(fds <= fds_before + 8, "open files grew from {fds_before} to {fds}");
    let mut other = RawControl::connect(server.addr);
    other.login(ALICE);
    assert!(other.cmd("MLST /many").starts_with("250"));
    drop(other);
    // Not read for longer than the idle timeout: the server gives up on
    // its blocked reply and closes; what was queued reads, then the end.
    std::thread::sleep(Duration::from_secs(7));
    let (got, closed, _cut) = drain_lines(&mut c, Duration::from_secs(10), Duration::from_secs(60));
    assert!(closed, "the server kept a session that does not read its replies ({} lines read)", got.len());
    let codes: std::collections::BTreeSet<&str> = got
        .iter()
        .filter(|l| l.len() > 4 && l.as_bytes()[..3].iter().all(u8::is_ascii_digit) && l.as_bytes()[3] == b' ')
        .map(|l| &l[..3])
        .collect();
    println!("reply codes read before the close: {codes:?}");
    for code in &codes {
        assert!(["250", "425", "214", "213", "421"].contains(code), "unexpected reply {code} in {codes:?}");
    }
    drop(warm);
    still_serves(&server);
}

/// `text` with every MLSx `Modify=<digits>;` fact's value blanked.
fn without_modify(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("Modify=") {
        let (head, tail) = rest.split_at(i + "Modify=".len());
        out.push_str(head);
        out.push('*');
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    }
    out.push_str(rest);
    out
}
