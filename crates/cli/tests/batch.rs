//! Ferry-to-Ferry batches (`BRET`/`BSTO`, docs/batch.md): a tree copied
//! both ways with the files named in batch lines arrives byte-identical; a
//! batch killed mid-way resumes file by file and range by range; a
//! malformed batch is refused with 501 and runs nothing.

mod support;

use std::process::Command;
use std::time::Duration;
use support::*;

/// A tree of `n` files of mixed sizes (one with a space in its name).
fn make_tree(dir: &std::path::Path, n: u64, big: u64) {
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for i in 0..n {
        let size = if i % 7 == 0 { big } else { 1 + i * 997 % 70_000 };
        let name = if i == 3 { format!("f {i}.dat") } else { format!("f{i:03}.dat") };
        let path = if i % 2 == 0 { dir.join(&name) } else { dir.join("sub").join(&name) };
        random_file(&path, size, 900 + i);
    }
}

fn cp(args: &[&str], state: &std::path::Path) -> (bool, String, String) {
    let out = Command::new(ferry_bin())
        .args(["cp", "--json"])
        .args(args)
        .env("FERRY_STATE_DIR", state)
        .env("FERRY_LOG", "ferry_client=debug")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Alice logged in over a raw control connection in binary MODE E, and
/// a data connection to the server's passive address.
fn mode_e_session(server: &FerryServer) -> (RawControl, std::net::TcpStream) {
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("TYPE I").starts_with("200"));
    assert!(c.cmd("MODE E").starts_with("200"));
    let data = pasv_addr(&c.cmd("PASV"));
    (c, std::net::TcpStream::connect(data).unwrap())
}

#[test]
fn batch_upload_and_download_of_a_tree_are_byte_identical() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let src = local.path().join("src");
    make_tree(&src, 60, 300_000);
    let up = server.url(ALICE, "/up/");
    let (ok, _, err) = cp(&["-r", &format!("{}/", src.display()), &up], state.path());
    assert!(ok, "{err}");
    assert!(err.contains("BSTO"), "the upload named its files in BSTO lines: {err}");
    assert_eq!(tree_digest(&server.path("up")), tree_digest(&src));
    // Durability per batch: every file the client counted came through a
    // batch whose one durability pass ran, and the client heard each
    // pass's final reply before it reported success.
    let passes: Vec<serde_json::Value> = server
        .log_text()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "batch durable")
        .map(|v| v["fields"].clone())
        .collect();
    assert!(!passes.is_empty(), "no batch durability pass: {}", server.log_text());
    let synced: u64 = passes.iter().map(|p| p["synced"].as_u64().unwrap()).sum();
    assert_eq!(synced, 60, "each uploaded file in exactly one pass: {passes:?}");
    assert_eq!(err.matches("upload batch durable").count(), passes.len(), "the client waited for every final reply");
    let dst = local.path().join("dst");
    let (ok, _, err) = cp(&["-r", &server.url(ALICE, "/up/"), &format!("{}/", dst.display())], state.path());
    assert!(ok, "{err}");
    assert!(err.contains("BRET"), "the download named its files in BRET lines: {err}");
    assert_eq!(tree_digest(&dst), tree_digest(&src));
}

#[test]
fn a_killed_batch_resumes_file_by_file_and_range_by_range() {
    for upload in [false, true] {
        let server = FerryServer::start_with(&["--anonymous", "read", "--marker-interval", "1"]);
        let local = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let tree = if upload { local.path().join("src") } else { server.path("tree") };
        // 14 files, two of them 24 MiB: at 16 MB/s the kill lands mid-batch.
        make_tree(&tree, 14, 24 << 20);
        let (from, to) = if upload {
            (format!("{}/", tree.display()), server.url(ALICE, "/tree/"))
        } else {
            (server.url(ALICE, "/tree/"), format!("{}/", local.path().join("dst").display()))
        };
        start_and_kill(&["-r", &from, &to], state.path(), 8 << 20);
        let (ok, out, err) = cp(&["-r", "-p", "4", &from, &to], state.path());
        assert!(ok, "upload={upload}: {err}");
        let dst = if upload { server.path("tree") } else { local.path().join("dst") };
        let src = if upload { local.path().join("src") } else { server.path("tree") };
        assert_eq!(tree_digest(&dst), tree_digest(&src), "upload={upload}");
        let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap_or("{}")).unwrap();
        let kept = v["skipped"].as_u64().unwrap_or(0) + v["resumed"].as_u64().unwrap_or(0);
        assert!(kept > 0, "upload={upload}: the second run kept what the first moved: {out}");
        assert!(v["bytes"].as_u64().unwrap_or(u64::MAX) < 48 << 20, "upload={upload}: moved everything again: {out}");
    }
}

#[test]
fn a_malformed_batch_is_refused_and_the_session_goes_on() {
    let server = FerryServer::start();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    let feat = c.cmd("FEAT");
    assert!(feat.contains(" BATCH RETR,STOR"), "{feat}");
    for line in [
        "BRET",
        "BRET 2 /a",
        "BRET 1 /a /b",
        "BRET 0",
        "BRET 100000 /a",
        "BRET 1 /a%zz",
        "BRET 1 /a%00",
        "BSTO 1 /a",
        "BSTO 1 -5:/a",
        "BSTO 1 999999999999999999999:/a",
    ] {
        let r = c.cmd(line);
        assert!(r.starts_with("501"), "{line}: {r}");
    }
    let r = c.cmd(&format!("BRET 1 {}", "a".repeat(9000)));
    assert!(r.starts_with("500") || r.starts_with("501"), "an over-long line: {r}");
    assert!(c.cmd("NOOP").starts_with("200"));
    // A batch of a missing file answers like its RETR.
    assert!(c.cmd("MODE E").starts_with("200"));
    let r = c.cmd("BRET 1 /missing.dat");
    assert!(r.starts_with("4") || r.starts_with("5"), "{r}");
    assert!(c.cmd("NOOP").starts_with("200"));
}

/// `BSTO SYNC` on the wire: the file's replies, its 226 when it is under
/// its name, then the batch's final reply after the durability pass; a
/// plain `BSTO` has no such reply.
#[test]
fn a_sync_batch_answers_once_more_after_its_durability_pass() {
    use std::io::Write;
    let server = FerryServer::start();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("FEAT").contains(" BATCH RETR,STOR,SYNC"));
    assert!(c.cmd("TYPE I").starts_with("200"));
    for (sync, name) in [(true, "synced.dat"), (false, "plain.dat")] {
        let data = pasv_addr(&c.cmd("PASV"));
        let mut d = std::net::TcpStream::connect(data).unwrap();
        c.send(format!("BSTO {}1 3:/{name}", if sync { "SYNC " } else { "" }).as_bytes());
        assert!(c.reply().starts_with("200"), "ALLO");
        let r = c.reply();
        assert!(r.starts_with("150") || r.starts_with("125"), "{r}");
        d.write_all(b"abc").unwrap();
        drop(d);
        let r = c.reply();
        assert!(r.starts_with("226"), "{r}");
        assert_eq!(std::fs::read(server.path(name)).unwrap(), b"abc", "complete under its name at its 226");
        if sync {
            let r = c.reply();
            assert!(r.starts_with("250") && r.contains("durable"), "the batch's final reply: {r}");
        }
        assert!(c.cmd("NOOP").starts_with("200"), "no other reply is pending");
    }
    let passes = server.log_text().lines().filter(|l| l.contains("batch durable")).count();
    assert_eq!(passes, 1, "one pass, for the SYNC batch only");
}

/// A client of `BSTO SYNC` sends each file's data without waiting for its
/// 125: when the server refuses a file, that file's data is on the data
/// channel, and must never become the next file's. The server refuses the
/// rest of the batch, and the final reply says the batch failed.
#[test]
fn a_refused_file_of_a_sync_batch_refuses_the_rest_and_its_data_goes_nowhere() {
    use ferry_proto::mode_e::BlockHeader;
    use std::io::Write;
    let server = FerryServer::start();
    std::fs::create_dir(server.path("adir")).unwrap();
    let (mut c, mut d) = mode_e_session(&server);
    // Both files' data at once, as Ferry's client sends a SYNC batch.
    for payload in [b"abc", b"xyz"] {
        d.write_all(&BlockHeader::data(0, 3).encode()).unwrap();
        d.write_all(payload).unwrap();
        d.write_all(&BlockHeader::eof(1).encode()).unwrap();
    }
    c.send(b"BSTO SYNC 2 3:/adir 3:/next.dat");
    assert!(c.reply().starts_with("200"), "ALLO");
    let r = c.reply();
    assert!(r.starts_with('4') || r.starts_with('5'), "a directory is refused: {r}");
    assert!(c.reply().starts_with("200"), "ALLO");
    let r = c.reply();
    assert!(r.starts_with("451") && r.contains("earlier file"), "the rest of the batch is not run: {r}");
    let r = c.reply();
    assert!(r.starts_with("451") && r.contains("failed"), "the batch's final reply: {r}");
    assert!(!server.path("next.dat").exists(), "the refused file's data became the next file");
    assert!(c.cmd("NOOP").starts_with("200"));
}

/// Issue 18 (session 7): a client of `BSTO SYNC` sends its next line (and
/// that line's data) before it has read the replies of the one before. When
/// a file of the first line fails, the server closes the cached data
/// connections the next line's data was on; that line's first file then
/// waited the whole data timeout (60 s) for a data connection that never
/// came. Every `BSTO SYNC` line the server had already read when the failed
/// batch ended is refused with it, at once.
#[test]
fn a_failed_sync_batch_refuses_the_lines_queued_behind_it_without_waiting() {
    use ferry_proto::mode_e::BlockHeader;
    use std::io::Write;
    let server = FerryServer::start();
    std::fs::create_dir(server.path("adir")).unwrap();
    let (mut c, mut d) = mode_e_session(&server);
    for payload in [b"abc", b"xyz", b"123"] {
        d.write_all(&BlockHeader::data(0, 3).encode()).unwrap();
        d.write_all(payload).unwrap();
        d.write_all(&BlockHeader::eof(1).encode()).unwrap();
    }
    // Both lines at once, as Ferry's client pipelines them.
    c.send(b"BSTO SYNC 2 3:/adir 3:/next.dat\r\nBSTO SYNC 1 3:/after.dat");
    let started = std::time::Instant::now();
    let mut replies = Vec::new();
    for _ in 0..7 {
        let r = c.reply();
        assert!(!r.is_empty(), "the server closed or the reply took over 20 s; so far {replies:?}");
        replies.push(r);
    }
    let waited = started.elapsed();
    assert!(
        replies[0].starts_with("200") && (replies[1].starts_with('4') || replies[1].starts_with('5')),
        "{replies:?}"
    );
    assert!(replies[3].starts_with("451") && replies[4].starts_with("451"), "first line: {replies:?}");
    assert!(replies[5].starts_with("200"), "the second line's ALLO: {replies:?}");
    assert!(replies[6].starts_with("451") && replies[6].contains("earlier"), "second line's file: {replies:?}");
    let end = c.reply();
    assert!(end.starts_with("451") && end.contains("failed"), "second line's final reply: {end}");
    assert!(waited < std::time::Duration::from_secs(10), "the queued line waited {waited:?}");
    assert!(!server.path("next.dat").exists() && !server.path("after.dat").exists());
    // A line sent after the failed batch's final reply runs as usual.
    drop(d);
    let data = pasv_addr(&c.cmd("PASV"));
    let mut d = std::net::TcpStream::connect(data).unwrap();
    d.write_all(&BlockHeader::data(0, 3).encode()).unwrap();
    d.write_all(b"new").unwrap();
    d.write_all(&BlockHeader::eof(1).encode()).unwrap();
    c.send(b"BSTO SYNC 1 3:/fresh.dat");
    // 200 ALLO, 150, markers, 226, then the batch's 250.
    let mut rs: Vec<String> = Vec::new();
    while rs.len() < 12 && !rs.last().is_some_and(|r| r.starts_with("250") || r.starts_with('4') || r.is_empty()) {
        rs.push(c.reply());
    }
    assert!(rs.iter().any(|r| r.starts_with("226")) && rs.last().unwrap().starts_with("250"), "{rs:?}");
    assert_eq!(std::fs::read(server.path("fresh.dat")).unwrap(), b"new");
}

#[test]
fn without_batch_in_feat_the_client_pipelines() {
    let server = FerryServer::start_with(&["--anonymous", "read", "--no-batch"]);
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let src = local.path().join("src");
    make_tree(&src, 20, 50_000);
    let (ok, _, err) = cp(&["-r", &format!("{}/", src.display()), &server.url(ALICE, "/up/")], state.path());
    assert!(ok, "{err}");
    assert!(!err.contains("batch sent"), "no BSTO to a server that does not list BATCH: {err}");
    assert_eq!(tree_digest(&server.path("up")), tree_digest(&src));
}

/// Gives every file of `dir` a distinct old modification time and mode.
fn stamp_tree(dir: &std::path::Path) -> Vec<(std::path::PathBuf, i64, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut files: Vec<_> = walk(dir);
    files.sort();
    for (i, p) in files.into_iter().enumerate() {
        let (secs, mode) = (1_500_000_000 + i as i64 * 3600, [0o600, 0o640, 0o755, 0o444][i % 4]);
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64);
        std::fs::File::options().write(true).open(&p).unwrap().set_modified(t).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        out.push((p.strip_prefix(dir).unwrap().to_path_buf(), secs, mode));
    }
    out
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The MFMT and SITE CHMOD commands a server received (its dialogue log).
fn meta_commands(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains("\"message\":\"> ") && (l.contains("MFMT") || l.contains("CHMOD"))).collect()
}

fn assert_kept(dst: &std::path::Path, stamps: &[(std::path::PathBuf, i64, u32)]) {
    use std::os::unix::fs::MetadataExt;
    for (rel, secs, mode) in stamps {
        let md = std::fs::metadata(dst.join(rel)).unwrap();
        assert_eq!((md.mtime(), md.mode() & 0o7777), (*secs, *mode), "{}", rel.display());
    }
}

#[test]
fn batch_entries_carry_mtime_and_mode_and_old_servers_still_get_mfmt_and_chmod() {
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let src = local.path().join("src");
    make_tree(&src, 24, 40_000);
    let stamps = stamp_tree(&src);
    // The servers (children of this test's own process) log the dialogue.
    // (Edition 2021: a safe call; each test runs in its own process.)
    std::env::set_var("FERRY_LOG", "info,ferry::dialogue=debug");
    // A server whose FEAT lists BATCH ...,FACTS sets them before the
    // rename: no MFMT or SITE CHMOD follows the batch.
    let server = FerryServer::start();
    let (ok, _, err) = cp(&["-r", &format!("{}/", src.display()), &server.url(ALICE, "/up/")], state.path());
    assert!(ok, "{err}");
    assert!(err.contains("BSTO"), "{err}");
    assert_kept(&server.path("up"), &stamps);
    let dialogue = server.log_text();
    assert!(dialogue.contains("\"message\":\"> BSTO"), "the dialogue is logged");
    let sent = meta_commands(&dialogue);
    assert!(sent.is_empty(), "no MFMT/SITE CHMOD after a batch with facts: {sent:?}");
    // A server without batches gets MFMT and SITE CHMOD, as before.
    let old = FerryServer::start_with(&["--anonymous", "read", "--no-batch"]);
    let (ok, _, err) = cp(&["-r", &format!("{}/", src.display()), &old.url(ALICE, "/up/")], state.path());
    assert!(ok, "{err}");
    assert_kept(&old.path("up"), &stamps);
    let dialogue = old.log_text();
    let sent = meta_commands(&dialogue);
    assert!(
        sent.iter().any(|l| l.contains("MFMT")) && sent.iter().any(|l| l.contains("CHMOD")),
        "the old way: {sent:?}"
    );
}

/// Session 9: a small file of a `BSTO SYNC` batch on the session's one
/// cached MODE E connection is received and committed on one server
/// thread (`Task::one_thread`). A sender that counts a second connection
/// (EODC 2) gets the rest of the file received the usual way, from a
/// connection opened after the first one's EOD: the file arrives whole,
/// under its name at its 226, and the batch ends durable.
#[test]
fn a_sync_batch_file_sent_on_a_cached_and_a_new_connection_arrives_whole() {
    use ferry_proto::mode_e::BlockHeader;
    use std::io::Write;
    let server = FerryServer::start();
    let mut c = RawControl::connect(server.addr);
    // The next reply that is not a 111/112 marker.
    let reply = |c: &mut RawControl| loop {
        let r = c.reply();
        if !(r.starts_with("111") || r.starts_with("112")) {
            break r;
        }
    };
    c.login(ALICE);
    assert!(c.cmd("TYPE I").starts_with("200"));
    assert!(c.cmd("MODE E").starts_with("200"));
    let data = pasv_addr(&c.cmd("PASV"));
    let mut a = std::net::TcpStream::connect(data).unwrap();
    // The first file on A alone; the first half of the second on A too,
    // whose EOF counts two connections.
    for (offset, payload, eodc) in [(0, b"abc", 1), (0, b"xyz", 2)] {
        a.write_all(&BlockHeader::data(offset, 3).encode()).unwrap();
        a.write_all(payload).unwrap();
        a.write_all(&BlockHeader::eof(eodc).encode()).unwrap();
    }
    c.send(b"BSTO SYNC 2 3:/one.dat 6:/two.dat");
    assert!(reply(&mut c).starts_with("200"), "ALLO");
    let r = reply(&mut c);
    assert!(r.starts_with("125") || r.starts_with("150"), "{r}");
    let r = reply(&mut c);
    assert!(r.starts_with("226"), "{r}");
    assert_eq!(std::fs::read(server.path("one.dat")).unwrap(), b"abc");
    assert!(reply(&mut c).starts_with("200"), "ALLO");
    // The second connection, after A has carried its part of two.dat.
    let mut b = std::net::TcpStream::connect(data).unwrap();
    b.write_all(&BlockHeader::data(3, 3).encode()).unwrap();
    b.write_all(b"def").unwrap();
    b.write_all(&BlockHeader::eod().encode()).unwrap();
    let r = reply(&mut c);
    assert!(r.starts_with("125") || r.starts_with("150"), "{r}");
    let r = reply(&mut c);
    assert!(r.starts_with("226"), "{r}");
    assert_eq!(std::fs::read(server.path("two.dat")).unwrap(), b"xyzdef", "whole, under its name at its 226");
    let r = reply(&mut c);
    assert!(r.starts_with("250") && r.contains("2 stored"), "the batch's final reply: {r}");
    assert!(c.cmd("NOOP").starts_with("200"), "no other reply is pending");
    drop((a, b));
    assert!(
        server.log_text().contains("the rest of the file comes on them"),
        "two.dat began on one thread and went on the usual way"
    );
}

/// Session 13: a file of a `BSTO SYNC` batch gets no zero-byte
/// performance marker with its 125 and no final one before its 226 (its
/// client does not wait for the 125 and counts the file at the batch's
/// final reply); the same file in a plain `BSTO` line still gets both, as
/// Globus sends them in MODE E.
#[test]
fn a_sync_batch_file_is_answered_without_performance_markers() {
    use ferry_proto::mode_e::BlockHeader;
    use std::io::Write;
    let server = FerryServer::start();
    let (mut c, mut d) = mode_e_session(&server);
    let mut replies = |c: &mut RawControl, line: &[u8], name: &str, last: &str| {
        d.write_all(&BlockHeader::data(0, 3).encode()).unwrap();
        d.write_all(b"abc").unwrap();
        d.write_all(&BlockHeader::eof(1).encode()).unwrap();
        c.send(line);
        let mut rs: Vec<String> = Vec::new();
        while rs.len() < 12 && !rs.last().is_some_and(|r| r.starts_with(last) || r.starts_with('4') || r.is_empty()) {
            rs.push(c.reply());
        }
        assert_eq!(std::fs::read(server.path(name)).unwrap(), b"abc", "{rs:?}");
        rs
    };
    let sync = replies(&mut c, b"BSTO SYNC 1 3:/s.dat", "s.dat", "250");
    assert!(sync.iter().any(|r| r.starts_with("226")) && sync.last().unwrap().starts_with("250"), "{sync:?}");
    assert!(!sync.iter().any(|r| r.starts_with("112")), "no markers in a BSTO SYNC batch: {sync:?}");
    let plain = replies(&mut c, b"BSTO 1 3:/p.dat", "p.dat", "226");
    assert!(plain.last().unwrap().starts_with("226"), "{plain:?}");
    assert!(plain.iter().filter(|r| r.starts_with("112")).count() >= 2, "a plain batch keeps them: {plain:?}");
}

/// Reads one MODE E transfer from `d` (GFD.20 blocks, until the EOD of
/// this connection; the sender counts one connection): the bytes by offset.
fn read_mode_e(d: &mut std::net::TcpStream) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    loop {
        let mut h = [0u8; 17];
        d.read_exact(&mut h).unwrap();
        let count = u64::from_be_bytes(h[1..9].try_into().unwrap());
        let offset = u64::from_be_bytes(h[9..17].try_into().unwrap());
        let eod = h[0] & 0x08 != 0;
        if eod {
            return out;
        }
        let mut payload = vec![0u8; count as usize];
        d.read_exact(&mut payload).unwrap();
        let end = (offset + count) as usize;
        if out.len() < end {
            out.resize(end, 0);
        }
        out[offset as usize..end].copy_from_slice(&payload);
    }
}

/// `BRET STREAM` on the wire (docs/batch.md, "The streamed batch"): the
/// line's files back to back as one transfer with one 125 and one 226; a
/// file whose size differs from its entry cuts the stream before it (the
/// files before it arrive, then a 451 naming it); a first file that is
/// missing refuses the line before any 125; the session goes on.
#[test]
fn a_streamed_batch_is_one_transfer_and_a_changed_file_cuts_it_before_itself() {
    let server = FerryServer::start();
    std::fs::write(server.path("a"), b"aaaa").unwrap();
    std::fs::write(server.path("e"), b"").unwrap();
    std::fs::write(server.path("b"), b"bbbbb").unwrap();
    std::fs::write(server.path("c"), b"cccc").unwrap();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    let feat = c.cmd("FEAT");
    assert!(feat.contains(" BATCH RETR,STOR,SYNC,FACTS,STREAM"), "{feat}");
    assert!(c.cmd("TYPE I").starts_with("200"));
    assert!(c.cmd("MODE E").starts_with("200"));
    // In MODE E the sender (here the server) opens the data connection.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(c.cmd(&format!("PORT 127,0,0,1,{},{}", port >> 8, port & 255)).starts_with("200"));
    c.send(b"BRET STREAM 3 4:/a 0:/e 4:/c");
    let (mut d, _) = listener.accept().unwrap();
    let r = c.reply();
    assert!(r.starts_with("150") || r.starts_with("125"), "{r}");
    assert_eq!(read_mode_e(&mut d), b"aaaacccc", "a, the empty e, then c, at the sums of the earlier sizes");
    assert!(c.reply().starts_with("226"), "one final reply for the line");
    // b grew since the client listed it (4 bytes): a is sent, b and c are not.
    c.send(b"BRET STREAM 3 4:/a 4:/b 4:/c");
    assert!(c.reply().starts_with("125"));
    assert_eq!(read_mode_e(&mut d), b"aaaa");
    let r = c.reply();
    assert!(r.starts_with("451") && r.contains("(/b)") && r.contains("size"), "{r}");
    // A later file that is gone: the cut says why in words, not a code name.
    // (the cut above closed the data channel, so the server connects anew)
    c.send(b"BRET STREAM 2 4:/a 4:/gone");
    let (mut d, _) = listener.accept().unwrap();
    assert!(c.reply().starts_with("150"));
    assert_eq!(read_mode_e(&mut d), b"aaaa");
    let r = c.reply();
    assert!(r.starts_with("451") && r.contains("(/gone): no such file or directory"), "{r}");
    // A missing first file: refused like its RETR, before any 125.
    let r = c.cmd("BRET STREAM 2 4:/missing 4:/a");
    assert!(r.starts_with('4') || r.starts_with('5'), "{r}");
    assert!(!r.starts_with("125"), "{r}");
    assert!(c.cmd("NOOP").starts_with("200"));
    // A REST before it: a streamed line is sent whole, never from an offset.
    assert!(c.cmd("REST 2").starts_with("350"));
    let r = c.cmd("BRET STREAM 1 4:/a");
    assert!(r.starts_with("554"), "{r}");
    // Hostile lines: refused once, nothing run.
    for line in [
        format!("BRET STREAM 2 {}:/a 1:/b", u64::MAX),
        "BRET STREAM 1 /a".into(),
        "BRET STREAM 1 4,20261126203500,644:/a".into(),
    ] {
        assert!(c.cmd(&line).starts_with("501"), "{line}");
    }
    assert!(c.cmd("NOOP").starts_with("200"));
}

/// `ferry cp -r` from a server that lists `STREAM` sends its download
/// batches as `BRET STREAM` lines (a tree with empty files and a name with
/// a space arrives byte-identical); with `FERRY_NO_STREAM_BATCH` it sends
/// the per-file `BRET` lines of before.
#[test]
fn a_tree_download_goes_as_streamed_batches_and_arrives_whole() {
    let server = FerryServer::start();
    let tree = server.path("tree");
    make_tree(&tree, 40, 0);
    std::fs::write(tree.join("sub").join("empty"), b"").unwrap();
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let dst = local.path().join("dst");
    let (ok, _, err) = cp(&["-r", &server.url(ALICE, "/tree/"), &format!("{}/", dst.display())], state.path());
    assert!(ok, "{err}");
    assert!(err.contains("stream=true"), "the download streamed its batches: {err}");
    assert_eq!(tree_digest(&dst), tree_digest(&tree));
    let dst2 = local.path().join("dst2");
    let out = Command::new(ferry_bin())
        .args(["cp", "--json", "-r", &server.url(ALICE, "/tree/"), &format!("{}/", dst2.display())])
        .env("FERRY_STATE_DIR", state.path())
        .env("FERRY_LOG", "ferry_client=debug")
        .env("FERRY_NO_STREAM_BATCH", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("BRET") && !err.contains("stream=true"), "{err}");
    assert_eq!(tree_digest(&dst2), tree_digest(&tree));
}

/// A file that changes between the listing and its streamed line: the
/// server cuts that line before it (451 naming it), the client keeps every
/// file that arrived whole and copies the rest one by one, so every other
/// file arrives and the changed one arrives whole or is reported failed —
/// never short or long under its name.
#[test]
fn a_file_changed_after_the_listing_cuts_its_streamed_line_and_the_rest_still_arrive() {
    let server = FerryServer::start_with(&["--anonymous", "read"]);
    let tree = server.path("tree");
    std::fs::create_dir_all(&tree).unwrap();
    // The first line carries the big file: at 16 MB/s it takes ~1.6 s, and
    // the server opens a line's files only when the line runs. Long names
    // make several lines (~75 entries each), so the change below lands
    // before its line is opened.
    random_file(&tree.join("a_big"), 24 << 20, 1);
    let name = |i: u64| format!("f{i:03}-{}", "x".repeat(90));
    for i in 0..300 {
        random_file(&tree.join(name(i)), 1000 + i, 100 + i);
    }
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let dst = local.path().join("dst");
    let child = Command::new(ferry_bin())
        .args(["cp", "--json", "-r", "--max-rate", "16M", &server.url(ALICE, "/tree/"), &format!("{}/", dst.display())])
        .env("FERRY_STATE_DIR", state.path())
        .env("FERRY_LOG", "ferry_client=debug")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !dst.join(".a_big.ferry-part").exists() {
        assert!(std::time::Instant::now() < deadline, "the copy never started a_big");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let changed = tree.join(name(280));
    let mut grown = std::fs::read(&changed).unwrap();
    grown.extend_from_slice(b"grown after the listing");
    std::fs::write(&changed, &grown).unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stderr.contains("stream=true"), "the download streamed its batches: {stderr}");
    let log = server.log_text();
    assert!(log.contains("stream ended before file"), "the server cut the line at the changed file: {log}");
    for entry in std::fs::read_dir(&tree).unwrap() {
        let p = entry.unwrap().path();
        let got = dst.join(p.file_name().unwrap());
        if p == changed {
            // Whole (the new bytes) or not there and reported.
            match std::fs::read(&got) {
                Ok(bytes) => assert_eq!(bytes, grown, "the changed file under its name is whole"),
                Err(_) => assert!(
                    !out.status.success() && stderr.contains("failed: ") && stderr.contains("/tree/f280"),
                    "{stdout} {stderr}"
                ),
            }
        } else {
            assert_eq!(sha256_file(&got), sha256_file(&p), "{}", p.display());
        }
    }
}

/// The next reply that is not a 111/112 marker.
fn reply_skipping_markers(c: &mut RawControl) -> String {
    loop {
        let r = c.reply();
        if !(r.starts_with("111") || r.starts_with("112")) {
            break r;
        }
    }
}

/// `BSTO STREAM` on the wire (docs/batch.md, "The streamed upload"): the
/// line's files back to back as one MODE E transfer, blocks that straddle
/// files split at their boundaries, one ALLO of the total, one 125, one
/// 226, the batch's final reply; each file renamed into place only when
/// its bytes are all there — a line cut short leaves the complete files
/// under their names and the incomplete one as a partial recording what it
/// holds, and says how many were stored; the session goes on.
#[test]
fn a_streamed_upload_is_one_transfer_and_each_file_appears_only_when_complete() {
    use ferry_proto::mode_e::BlockHeader;
    use std::io::Write;
    let server = FerryServer::start();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("FEAT").contains(",STREAM-STOR"), "FEAT lists the streamed upload");
    assert!(c.cmd("TYPE I").starts_with("200"));
    assert!(c.cmd("MODE E").starts_with("200"));
    let data = pasv_addr(&c.cmd("PASV"));
    let mut d = std::net::TcpStream::connect(data).unwrap();
    c.send(b"BSTO STREAM 4 4,20200102030405,600:/a 0:/e 3:/b 2:/c");
    // a = "aaaa", e empty, b = "bbb", c = "cc": 9 bytes, the first block
    // straddles a and b, the second b and c.
    for (offset, payload) in [(0u64, &b"aaaabb"[..]), (6, &b"bcc"[..])] {
        d.write_all(&BlockHeader::data(offset, payload.len() as u64).encode()).unwrap();
        d.write_all(payload).unwrap();
    }
    d.write_all(&BlockHeader::eof(1).encode()).unwrap();
    let r = reply_skipping_markers(&mut c);
    assert!(r.starts_with("200"), "ALLO of the line's total: {r}");
    let r = reply_skipping_markers(&mut c);
    assert!(r.starts_with("125") || r.starts_with("150"), "{r}");
    let r = reply_skipping_markers(&mut c);
    assert!(r.starts_with("226"), "one 226 for the line: {r}");
    let r = reply_skipping_markers(&mut c);
    assert!(r.starts_with("250") && r.contains("4 stored") && r.contains("durable"), "the line's final reply: {r}");
    assert_eq!(std::fs::read(server.path("a")).unwrap(), b"aaaa");
    assert_eq!(std::fs::read(server.path("e")).unwrap(), b"");
    assert_eq!(std::fs::read(server.path("b")).unwrap(), b"bbb");
    assert_eq!(std::fs::read(server.path("c")).unwrap(), b"cc");
    {
        use std::os::unix::fs::PermissionsExt;
        let md = std::fs::metadata(server.path("a")).unwrap();
        assert_eq!(md.permissions().mode() & 0o777, 0o600, "the entry's mode, set before the rename");
        let t = md.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(t, 1_577_934_245, "the entry's time");
    }
    assert!(c.cmd("NOOP").starts_with("200"), "no other reply is pending");
    // Cut short: p arrives whole, q half. p is under its name while the
    // line still runs; q is not, and after the cut it is a partial that
    // records what it holds.
    c.send(b"BSTO STREAM 2 4:/p 4:/q");
    d.write_all(&BlockHeader::data(0, 6).encode()).unwrap();
    d.write_all(b"ppppqq").unwrap();
    d.flush().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !server.path("p").exists() {
        assert!(std::time::Instant::now() < deadline, "p never appeared under its name");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(std::fs::read(server.path("p")).unwrap(), b"pppp", "renamed only when complete");
    assert!(!server.path("q").exists(), "q is not complete: not under its name");
    drop(d);
    let mut rs = Vec::new();
    while !rs.last().is_some_and(|r: &String| r.starts_with("250") || r.starts_with("451") && r.contains("Batch")) {
        let r = reply_skipping_markers(&mut c);
        assert!(!r.is_empty() && rs.len() < 6, "{rs:?}");
        rs.push(r);
    }
    let failed = rs.iter().find(|r| r.starts_with('4') && !r.contains("Batch")).expect("the line's failure");
    assert!(failed.contains("1 of the line's 2 files stored"), "says what was stored: {rs:?}");
    assert!(rs.last().unwrap().contains("1 stored are durable"), "{rs:?}");
    assert!(!server.path("q").exists(), "no file under its name short of its size");
    let held = c.cmd("SITE PARTIAL /q");
    assert!(held.contains("0-2"), "q's partial records its two bytes: {held}");
    assert!(c.cmd("NOOP").starts_with("200"), "the session goes on");
}

/// A streamed line's durability pass runs beside the session
/// (docs/batch.md, "Durability"): the next line's data is read and its
/// files are renamed into place while the pass runs, but every reply of
/// that line waits behind the pass's final reply, so the client reads the
/// lines' replies in order. Here the session's second pass is held back by
/// `batch_sync_interval_ms` (3 s after its first), so the third line runs
/// wholly while the second line's pass waits: its file is under its name
/// while no reply of the second line's end has come (before, the server
/// ran the third line only after writing that reply). Then a fourth line
/// stays open while the client floods NOOPs, whose replies pile up behind
/// the pass: the session holds at most `MAX_HELD_BEHIND_PASS` of them
/// (140 KB of replies here) before it waits for the pass — what it holds
/// is not visible from here; the test checks that every reply still
/// comes, in order, and the session goes on.
#[test]
fn the_next_streamed_line_is_received_while_the_last_ones_pass_runs() {
    use ferry_proto::mode_e::BlockHeader;
    use std::io::Write;
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("ferry.toml");
    std::fs::write(&config, "batch_sync_interval_ms = 3000\n").unwrap();
    let server = FerryServer::start_with(&["--anonymous", "read", "--config", config.to_str().unwrap()]);
    let (mut c, mut d) = mode_e_session(&server);
    let mut line = |c: &mut RawControl, name: &str, payload: &[u8], end: bool| {
        c.send(format!("BSTO STREAM 1 4:/{name}").as_bytes());
        d.write_all(&BlockHeader::data(0, payload.len() as u64).encode()).unwrap();
        d.write_all(payload).unwrap();
        if end {
            d.write_all(&BlockHeader::eof(1).encode()).unwrap();
        }
        d.flush().unwrap();
    };
    let replies = |c: &mut RawControl, n: usize| (0..n).map(|_| reply_skipping_markers(c)).collect::<Vec<_>>();
    let is_line = |rs: &[String]| {
        rs[0].starts_with("200")
            && (rs[1].starts_with("125") || rs[1].starts_with("150"))
            && rs[2].starts_with("226")
            && rs.get(3).is_none_or(|r| r.starts_with("250") && r.contains("durable"))
    };
    // The session's first pass: not held back.
    line(&mut c, "a", b"aaaa", true);
    let rs = replies(&mut c, 4);
    assert!(is_line(&rs), "{rs:?}");
    // The second line's pass waits for the interval; the third line runs
    // meanwhile.
    line(&mut c, "b", b"bbbb", true);
    line(&mut c, "c", b"cccc", true);
    let rs = replies(&mut c, 3);
    assert!(is_line(&rs), "the second line's replies before its pass: {rs:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !server.path("c").exists() {
        assert!(std::time::Instant::now() < deadline, "the third line never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(std::fs::read(server.path("c")).unwrap(), b"cccc");
    // Nothing of the second line's end or the third line is on the
    // control connection: the third line ran before the pass ended.
    c.stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let early = c.reply();
    assert!(early.is_empty(), "a reply came before the second line's pass ended: {early}");
    c.stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // A fourth line, half sent (its transfer stays open), and a flood of
    // NOOPs, answered at once during a transfer, held behind the pass.
    const NOOPS: usize = 10_000;
    line(&mut c, "e", b"ee", false);
    let mut flood = Vec::new();
    for _ in 0..NOOPS {
        flood.extend_from_slice(b"NOOP\r\n");
    }
    c.stream.write_all(&flood).unwrap();
    // Not a measurement: time for the server to read the flood while the
    // fourth line's transfer is still open.
    std::thread::sleep(Duration::from_millis(300));
    d.write_all(&BlockHeader::data(2, 2).encode()).unwrap();
    d.write_all(b"ee").unwrap();
    d.write_all(&BlockHeader::eof(1).encode()).unwrap();
    // Then the second line's final reply, the third line's, and the
    // fourth line's with every NOOP's among them, in order.
    let end = reply_skipping_markers(&mut c);
    assert!(end.starts_with("250") && end.contains("1 stored, durable"), "{end}");
    let rs = replies(&mut c, 4);
    assert!(is_line(&rs), "the third line's replies after the second's pass: {rs:?}");
    let (mut noops, mut fourth) = (0, Vec::new());
    while noops < NOOPS || fourth.len() < 4 {
        let r = reply_skipping_markers(&mut c);
        assert!(!r.is_empty(), "the session ended: {noops} NOOPs answered, fourth line {fourth:?}");
        if r.starts_with("200 NOOP") {
            noops += 1;
        } else {
            fourth.push(r);
        }
    }
    assert!(is_line(&fourth), "the fourth line's replies: {fourth:?}");
    assert!(c.cmd("NOOP").starts_with("200"), "no other reply is pending");
    assert_eq!(std::fs::read(server.path("b")).unwrap(), b"bbbb");
    assert_eq!(std::fs::read(server.path("e")).unwrap(), b"eeee");
}

/// Hostile and refused `BSTO STREAM` lines: a name twice in a line (the
/// second cannot be claimed), a directory, more bytes than a file
/// declared, a block past the line's total, absurd counts and sizes. Each
/// gets a clear 4xx/5xx, nothing appears under a name short or long, and
/// the session goes on.
#[test]
fn hostile_and_refused_streamed_uploads_get_clear_replies_and_store_nothing_wrong() {
    use ferry_proto::mode_e::BlockHeader;
    use std::io::Write;
    let server = FerryServer::start();
    std::fs::create_dir(server.path("adir")).unwrap();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("TYPE I").starts_with("200"));
    assert!(c.cmd("MODE E").starts_with("200"));
    for line in [
        "BSTO STREAM 100000 1:/x".to_string(),
        "BSTO STREAM 0".into(),
        format!("BSTO STREAM 2 {}:/x 1:/y", u64::MAX),
        "BSTO STREAM 2 1:/x".into(),
        "BSTO STREAM 1 1:/x 1:/y".into(),
    ] {
        assert!(c.cmd(&line).starts_with("501"), "{line}");
    }
    // Refused before the 125, naming the file; nothing is written.
    for (line, named) in [("BSTO STREAM 2 3:/twice 3:/twice", "/twice"), ("BSTO STREAM 2 3:/ok 3:/adir", "/adir")] {
        let _ = pasv_addr(&c.cmd("PASV"));
        c.send(line.as_bytes());
        assert!(reply_skipping_markers(&mut c).starts_with("200"), "ALLO");
        let r = reply_skipping_markers(&mut c);
        assert!((r.starts_with('4') || r.starts_with('5')) && r.contains(named), "{line}: {r}");
        let r = reply_skipping_markers(&mut c);
        assert!(r.starts_with("451") && r.contains("failed"), "{line}: the batch's final reply: {r}");
        assert!(!server.path("twice").exists() && !server.path("ok").exists(), "{line}");
        assert!(c.cmd("NOOP").starts_with("200"));
    }
    // Data that does not fit what the line declared.
    for (name, blocks) in [
        // A block past the line's total.
        ("past", vec![(0u64, b"abc".to_vec()), (3, b"zz".to_vec())]),
        // One block of more bytes than the line declared.
        ("long", vec![(0, b"abcde".to_vec())]),
    ] {
        let data = pasv_addr(&c.cmd("PASV"));
        let mut d = std::net::TcpStream::connect(data).unwrap();
        c.send(format!("BSTO STREAM 1 3:/{name}").as_bytes());
        for (offset, payload) in &blocks {
            d.write_all(&BlockHeader::data(*offset, payload.len() as u64).encode()).unwrap();
            d.write_all(payload).unwrap();
        }
        let _ = d.write_all(&BlockHeader::eof(1).encode());
        assert!(reply_skipping_markers(&mut c).starts_with("200"), "ALLO");
        let mut rs = vec![reply_skipping_markers(&mut c)];
        if rs[0].starts_with("125") || rs[0].starts_with("150") {
            rs.push(reply_skipping_markers(&mut c));
        }
        assert!(rs.last().unwrap().starts_with('4') || rs.last().unwrap().starts_with('5'), "{name}: {rs:?}");
        let end = reply_skipping_markers(&mut c);
        assert!(end.starts_with("451"), "{name}: {end}");
        if let Ok(bytes) = std::fs::read(server.path(name)) {
            assert_eq!(bytes, b"abc", "{name}: never more than declared under its name");
        }
        assert!(c.cmd("NOOP").starts_with("200"), "{name}: the session goes on");
    }
}

/// `ferry cp -r` to a server that lists `STREAM-STOR` sends its upload
/// batches as `BSTO STREAM` lines (a tree with empty files and a name with
/// a space arrives byte-identical, times and modes kept); with
/// `FERRY_NO_STREAM_BATCH` it sends the per-file `BSTO SYNC` lines.
#[test]
fn a_tree_upload_goes_as_streamed_lines_and_arrives_whole() {
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src");
    make_tree(&src, 40, 300_000);
    std::fs::write(src.join("sub").join("empty"), b"").unwrap();
    let stamps = stamp_tree(&src);
    // Through the page cache (the default) and with O_DIRECT for files
    // of 64 KiB or more (`--stream-direct`, its staging ring included).
    for direct in [false, true] {
        let server = FerryServer::start_with(if direct { &["--stream-direct"][..] } else { &[] });
        tree_upload_streamed(&server, &src, &stamps, direct);
    }
}

fn tree_upload_streamed(
    server: &FerryServer,
    src: &std::path::Path,
    stamps: &[(std::path::PathBuf, i64, u32)],
    direct_wanted: bool,
) {
    let state = tempfile::tempdir().unwrap();
    for (env, dir) in [(None, "up"), (Some("1"), "up2")] {
        let mut cmd = Command::new(ferry_bin());
        cmd.args(["cp", "--json", "-r", &format!("{}/", src.display()), &server.url(ALICE, &format!("/{dir}/"))])
            .env("FERRY_STATE_DIR", state.path())
            .env("FERRY_LOG", "ferry_client=debug");
        if let Some(v) = env {
            cmd.env("FERRY_NO_STREAM_BATCH", v);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert_eq!(tree_digest(&server.path(dir)), tree_digest(src), "{dir}");
        assert_kept(&server.path(dir), stamps);
        let streamed = err.contains("upload batch durable") && err.contains("stream=true");
        assert_eq!(streamed, env.is_none(), "{dir}: {err}");
    }
    let log = server.log_text();
    assert!(log.contains("BSTO STREAM"), "the server ran streamed lines");
    // Each line says how many of its files went around the page cache.
    let direct: u64 = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "a streamed upload line's files")
        .map(|v| v["fields"]["direct"].as_u64().unwrap())
        .sum();
    assert_eq!(direct > 0, direct_wanted, "files written with O_DIRECT: {direct}");
}

/// A streamed upload killed mid-line: the next `ferry cp -r` keeps the
/// files the line stored and resumes the one it cut range by range from
/// what the server recorded (its restart markers, in the line's
/// coordinates, mapped to the files' records).
#[test]
fn a_killed_streamed_upload_resumes_file_by_file_and_range_by_range() {
    let server = FerryServer::start_with(&["--marker-interval", "1"]);
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let src = local.path().join("src");
    make_tree(&src, 14, 24 << 20);
    let to = server.url(ALICE, "/tree/");
    let from = format!("{}/", src.display());
    start_and_kill(&["-r", &from, &to], state.path(), 8 << 20);
    assert!(server.log_text().contains("BSTO STREAM"), "the killed copy streamed its lines");
    let (ok, out, err) = cp(&["-r", "-p", "4", &from, &to], state.path());
    assert!(ok, "{err}");
    assert_eq!(tree_digest(&server.path("tree")), tree_digest(&src));
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap_or("{}")).unwrap();
    assert!(v["resumed"].as_u64().unwrap_or(0) > 0, "a cut file resumed from its ranges: {out}");
    assert!(v["bytes"].as_u64().unwrap_or(u64::MAX) < 48 << 20, "moved everything again: {out}");
}

/// Two clients upload different trees under the same names into one
/// directory at the same moment, both as streamed lines (session 23: a
/// streamed line's small files are anonymous until complete, so this is
/// where two lines could meet on a name). No file may be a mixture or
/// short: each is one client's version, whole. A file that one client
/// reported stored exists. Then the first client alone copies its tree
/// again and the directory is exactly its tree.
#[test]
fn two_clients_streaming_the_same_names_at_once_leave_whole_files() {
    // Through the page cache (the default) and with O_DIRECT.
    for flags in [&[][..], &["--stream-direct"][..]] {
        two_clients_on_the_same_names(&FerryServer::start_with(flags));
    }
}

fn two_clients_on_the_same_names(server: &FerryServer) {
    let local = tempfile::tempdir().unwrap();
    let (a, b) = (local.path().join("a"), local.path().join("b"));
    let names: Vec<String> = (0..120).map(|i| format!("f{i:03}.dat")).collect();
    for (i, name) in names.iter().enumerate() {
        // 64 KiB to 1 MiB: direct and anonymous on a disk file system.
        let size = 65_536 + (i as u64 * 7_919) % 900_000;
        random_file(&a.join(name), size, 5_000 + i as u64);
        random_file(&b.join(name), size, 7_000 + i as u64);
        // Times apart: the copy skips a file whose size and time match,
        // and the rerun below must tell b's files from a's.
        let t = |secs| std::time::UNIX_EPOCH + Duration::from_secs(secs);
        std::fs::File::options().write(true).open(a.join(name)).unwrap().set_modified(t(1_700_000_000)).unwrap();
        std::fs::File::options().write(true).open(b.join(name)).unwrap().set_modified(t(1_600_000_000)).unwrap();
    }
    let (da, db) = (tree_digest(&a), tree_digest(&b));
    let to = server.url(ALICE, "/up/");
    let start = |src: &std::path::Path, state: &std::path::Path| {
        Command::new(ferry_bin())
            .args(["cp", "--json", "-r", "--retries", "2", &format!("{}/", src.display()), &to])
            .env("FERRY_STATE_DIR", state)
            .env("FERRY_LOG", "ferry_client=debug")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (sa, sb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (pa, pb) = (start(&a, sa.path()), start(&b, sb.path()));
    let (oa, ob) = (pa.wait_with_output().unwrap(), pb.wait_with_output().unwrap());
    let err_a = String::from_utf8_lossy(&oa.stderr).into_owned();
    let err_b = String::from_utf8_lossy(&ob.stderr).into_owned();
    let said = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).lines().last().unwrap_or("").to_string();
    eprintln!("a: {} {}\nb: {} {}", oa.status, said(&oa), ob.status, said(&ob));
    assert!(server.log_text().contains("BSTO STREAM"), "the clients streamed their lines");
    let up = server.path("up");
    let (mut from, mut missing) = ((0, 0), 0);
    for name in &names {
        let path = up.join(name);
        if !path.exists() {
            missing += 1;
            assert!(
                !oa.status.success() && !ob.status.success(),
                "{name} missing though a client reported every file stored:\n{err_a}\n{err_b}"
            );
            continue;
        }
        let got = sha256_file(&path);
        if got == da[name] {
            from.0 += 1;
        } else if got == db[name] {
            from.1 += 1;
        } else {
            panic!("{name} is neither client's file (a mixture or short)");
        }
    }
    eprintln!("files from a: {}, from b: {}", from.0, from.1);
    // The first client alone again: replaces what the race left of b's
    // (another time) and ends with its own tree.
    let (ok, out, err) = cp(&["-r", &format!("{}/", a.display()), &to], sa.path());
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap_or("{}")).unwrap();
    assert_eq!(v["files"].as_u64(), Some(from.1 + missing), "b's files copied again, a's skipped: {out}");
    let got = tree_digest(&up);
    let visible: std::collections::BTreeMap<_, _> = got.into_iter().filter(|(k, _)| !k.starts_with('.')).collect();
    assert_eq!(visible, da, "{out}");
}
