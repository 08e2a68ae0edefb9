//! A MODE E copy killed half-way — download or upload — resumes with
//! `ferry cp`: only the missing ranges travel (checked on the server's
//! transfer log) and the result is byte-identical.

mod support;
use std::process::Command;

use support::*;

const SIZE: u64 = 64 << 20;

fn resumed_bytes(server: &FerryServer, path: &str) -> u64 {
    let all = server.transfers(path);
    let resumed: Vec<_> = all.iter().filter(|t| t["restart"] == true).collect();
    assert_eq!(resumed.len(), 1, "{all:?}");
    assert_eq!(resumed[0]["status"], "complete");
    resumed[0]["bytes"].as_u64().unwrap()
}

#[test]
fn killed_mode_e_download_resumes() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    random_file(&server.path("big.bin"), SIZE, 50);
    let dst = local.path().join("big.bin");
    let url = server.url(ALICE, "/big.bin");
    start_and_kill(&[&url, dst.to_str().unwrap()], state.path(), 16 << 20);
    assert!(!dst.exists(), "no file under the final name after the kill");
    let out = Command::new(ferry_bin())
        .args(["cp", "--json", "-p", "4", &url, dst.to_str().unwrap()])
        .env("FERRY_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"resumed\":1"));
    assert_eq!(sha256_file(&dst), sha256_file(&server.path("big.bin")));
    let bytes = resumed_bytes(&server, "/big.bin");
    assert!(bytes <= SIZE - (16 << 20), "the resumed download moved {bytes} of {SIZE} bytes");
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0, "the record is gone once complete");
}

#[test]
fn killed_mode_e_upload_resumes() {
    let server = FerryServer::start_with(&["--anonymous", "read", "--marker-interval", "1"]);
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let src = local.path().join("big.bin");
    random_file(&src, SIZE, 51);
    let url = server.url(ALICE, "/big.bin");
    start_and_kill(&[src.to_str().unwrap(), &url], state.path(), 16 << 20);
    assert!(!server.path("big.bin").exists(), "no file under the final name after the kill");
    let (ok, _, err) = {
        let out = Command::new(ferry_bin())
            .args(["cp", "-q", "-p", "4", "--verify", src.to_str().unwrap(), &url])
            .env("FERRY_STATE_DIR", state.path())
            .output()
            .unwrap();
        (out.status.success(), (), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&server.path("big.bin")), sha256_file(&src));
    let bytes = resumed_bytes(&server, "/big.bin");
    assert!(bytes <= SIZE - (16 << 20), "the resumed upload moved {bytes} of {SIZE} bytes");
}

#[test]
fn a_wrong_restart_record_is_detected_and_the_copy_starts_over() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let src = local.path().join("f.bin");
    random_file(&src, 3 << 20, 52);
    let url = server.url(ALICE, "/f.bin");
    // A record claiming the server has half the file, which it does not:
    // written through the client's own restart store, as a killed copy
    // would have left it.
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(&src).unwrap();
    std::env::set_var("FERRY_STATE_DIR", state.path());
    let dst_shown = format!("ftp://alice@{}:{}/f.bin", server.addr.ip(), server.addr.port());
    let mut record =
        ferry_client::resume::ResumeState::load(&src.display().to_string(), &dst_shown, md.len(), md.mtime());
    record.add(&ferry_proto::RangeSet::parse("0-1572864").unwrap());
    record.save();
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 1);
    let out = Command::new(ferry_bin())
        .args(["cp", "-q", src.to_str().unwrap(), &url])
        .env("FERRY_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(sha256_file(&server.path("f.bin")), sha256_file(&src));
    // The client asked the server what it holds (SITE PARTIAL: nothing)
    // instead of trusting the record, and sent the whole file at once.
    let attempts = server.transfers("/f.bin");
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(
        (&attempts[0]["status"], &attempts[0]["restart"]),
        (&serde_json::json!("complete"), &serde_json::json!(false))
    );
    // A client that sends the false claim anyway is refused (554): the
    // server holds none of those bytes.
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    for cmd in ["TYPE I", "MODE E"] {
        assert!(c.cmd(cmd).starts_with("200"));
    }
    let _data = std::net::TcpStream::connect(pasv_addr(&c.cmd("PASV"))).unwrap();
    assert!(c.cmd("REST 0-1572864").starts_with("350"));
    let r = c.cmd("STOR other.bin");
    assert!(r.starts_with("554") && r.contains("does not hold"), "{r}");
}
