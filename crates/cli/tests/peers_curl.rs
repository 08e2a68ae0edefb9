//! curl against `ferry serve`: uploads, downloads and listings in passive
//! (EPSV and PASV) and active (EPRT and PORT) modes, byte-identical.

mod support;
use std::process::Command;
use support::*;

fn curl(args: &[&str]) -> (bool, Vec<u8>, String) {
    let out = Command::new(require("curl")).args(["-sS", "--max-time", "60"]).args(args).output().unwrap();
    (out.status.success(), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn upload_download_list_in_every_data_mode() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, (5 << 20) + 3, 42);
    let want = sha256_file(&src);
    let modes: [(&str, &[&str]); 4] = [
        ("epsv", &[]),
        ("pasv", &["--disable-epsv"]),
        ("eprt", &["-P", "127.0.0.1"]),
        ("port", &["-P", "127.0.0.1", "--disable-eprt"]),
    ];
    for (name, flags) in modes {
        let url = server.url(ALICE, &format!("/up/{name}/file.bin"));
        let mut args: Vec<&str> = flags.to_vec();
        args.extend(["--ftp-create-dirs", "-T", src.to_str().unwrap(), &url]);
        let (ok, _, err) = curl(&args);
        assert!(ok, "{name} upload: {err}");
        assert_eq!(sha256_file(&server.path(&format!("up/{name}/file.bin"))), want, "{name} upload");
        let out = local.path().join(format!("{name}.bin"));
        let mut args: Vec<&str> = flags.to_vec();
        args.extend(["-o", out.to_str().unwrap(), &url]);
        let (ok, _, err) = curl(&args);
        assert!(ok, "{name} download: {err}");
        assert_eq!(sha256_file(&out), want, "{name} download");
    }
    // LIST and NLST of a directory.
    let (ok, list, err) = curl(&[&server.url(ALICE, "/up/epsv/")]);
    assert!(ok, "{err}");
    let list = String::from_utf8(list).unwrap();
    assert!(
        list.lines().any(|l| l.starts_with("-rw") && l.ends_with(" file.bin") && l.contains(" 5242883 ")),
        "{list}"
    );
    let (ok, names, _) = curl(&["-l", &server.url(ALICE, "/up/")]);
    assert!(ok);
    let mut names: Vec<_> = String::from_utf8(names).unwrap().lines().map(str::to_string).collect();
    names.sort();
    assert_eq!(names, ["eprt", "epsv", "pasv", "port"]);
    // Anonymous download works; anonymous upload is refused.
    let out = local.path().join("anon.bin");
    let (ok, _, err) = curl(&["-o", out.to_str().unwrap(), &server.anon_url("/up/pasv/file.bin")]);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&out), want);
    let (ok, _, err) = curl(&["-T", src.to_str().unwrap(), &server.anon_url("/anon.bin")]);
    assert!(!ok, "anonymous upload must fail");
    assert!(err.contains("550") || err.contains("denied"), "{err}");
    assert!(!server.path("anon.bin").exists());
}

#[test]
fn resume_download_and_quote_commands() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let src = server.path("r.bin");
    random_file(&src, 3 << 20, 5);
    let out = local.path().join("r.bin");
    // A partial local copy: curl -C - asks SIZE, then REST + RETR.
    std::fs::write(&out, &std::fs::read(&src).unwrap()[..1_000_000]).unwrap();
    let (ok, _, err) = curl(&["-C", "-", "-o", out.to_str().unwrap(), &server.url(ALICE, "/r.bin")]);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&out), sha256_file(&src));
    // -Q sends raw commands before the transfer.
    let (ok, _, err) = curl(&["-Q", "RNFR r.bin", "-Q", "RNTO renamed.bin", &server.url(ALICE, "/")]);
    assert!(ok, "{err}");
    assert!(server.path("renamed.bin").exists() && !src.exists());
    let (ok, _, err) = curl(&["-Q", "DELE renamed.bin", &server.url(ALICE, "/")]);
    assert!(ok, "{err}");
    assert!(!server.path("renamed.bin").exists());
    let (ok, _, err) = curl(&["-o", "/dev/null", &server.url(ALICE, "/renamed.bin")]);
    assert!(!ok);
    assert!(err.contains("(78)") && err.contains("does not exist"), "{err}");
}
