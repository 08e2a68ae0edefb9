//! The Globus client library itself (Debian's libglobus-ftp-client) sends
//! what no Debian program does — `SITE UTIME`, `SITE CHGRP`, `MLSR` — as
//! `:globus-mapping:`, its default user, to `ferry serve` and to the real
//! globus-gridftp-server, and both must answer alike. The client is
//! `tests/globus_client/globus_ext.c`, built here with gcc and pkg-config.

mod support;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use support::*;

/// Builds the C client once per test run.
fn globus_ext() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let gcc = require("gcc");
        let pkg = require("pkg-config");
        let flags = Command::new(&pkg).args(["--cflags", "--libs", "globus-ftp-client", "globus-common"]).output();
        let flags = match flags {
            Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap(),
            _ => {
                panic!("pkg-config finds no globus-ftp-client: install libglobus-ftp-client-dev (scripts/deps.sh does)")
            }
        };
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/globus_client/globus_ext.c");
        let dir = std::env::temp_dir().join(format!("ferry-globus-ext-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("globus_ext");
        let out = Command::new(gcc)
            .args(["-O1", "-Wall", "-Werror", "-o"])
            .arg(&bin)
            .arg(&src)
            .args(flags.split_whitespace())
            .output()
            .unwrap();
        assert!(out.status.success(), "building {}: {}", src.display(), String::from_utf8_lossy(&out.stderr));
        bin
    })
}

/// Runs the client as `:globus-mapping:`; (success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new("timeout").arg("60").arg(globus_ext()).arg("-m").args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What each server is: a URL base for `d/...`, the host path of `d`, the
/// group its process may give and one it may not.
struct Side {
    name: &'static str,
    base: String,
    dir: PathBuf,
    own_group: String,
    foreign_group: String,
}

fn group_name(gid: u32) -> String {
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)).unwrap().unwrap().name
}

fn tree(dir: &Path) {
    random_file(&dir.join("a"), 2, 1);
    random_file(&dir.join("sub/b"), 3, 2);
    random_file(&dir.join("sub/deeper/c"), 4, 3);
}

fn sides(ferry: &FerryServer, globus: &GlobusServer) -> [Side; 2] {
    tree(&ferry.path("d"));
    tree(&globus.path("d"));
    chown_nobody(globus.dir.path());
    let me = nix::unistd::getegid().as_raw();
    assert_ne!(me, 65534, "the suite runs as root (CI does), not as nogroup");
    [
        Side {
            name: "ferry",
            base: format!("ftp://{}/d", ferry.addr),
            dir: ferry.path("d"),
            // `ferry serve` runs as this test's user: its own group.
            own_group: group_name(me),
            foreign_group: group_name(65534),
        },
        Side {
            name: "globus",
            base: format!("ftp://127.0.0.1:{}{}", globus.port, globus.path("d").display()),
            dir: globus.path("d"),
            // The Globus server runs as nobody:nogroup.
            own_group: group_name(65534),
            foreign_group: group_name(me),
        },
    ]
}

#[test]
fn site_utime_and_chgrp_from_the_globus_client_library_as_on_globus() {
    let ferry = FerryServer::start_with(&["--anonymous", "write"]);
    let globus = GlobusServer::start();
    let mut outcomes = Vec::new();
    for s in sides(&ferry, &globus) {
        let a = format!("{}/a", s.base);
        // SITE UTIME: a UTC time, as MFMT.
        let (ok, _, err) = run(&["utime", &a, "20200102030405"]);
        assert!(ok, "{}: utime: {err}", s.name);
        assert_eq!(std::fs::metadata(s.dir.join("a")).unwrap().mtime(), 1_577_934_245, "{}", s.name);
        let (ok_missing, _, err) = run(&["utime", &format!("{}/missing", s.base), "20200102030405"]);
        assert!(!ok_missing && err.contains("550"), "{}: utime of a missing file: {err}", s.name);

        // SITE CHGRP: from another group to the server's own...
        let before = if s.name == "ferry" { 65534 } else { 0 };
        nix::unistd::chown(&s.dir.join("a"), None, Some(nix::unistd::Gid::from_raw(before))).unwrap();
        let (ok_own, _, err) = run(&["chgrp", &a, &s.own_group]);
        assert!(ok_own, "{}: chgrp {}: {err}", s.name, s.own_group);
        let gid = std::fs::metadata(s.dir.join("a")).unwrap().gid();
        assert_eq!(group_name(gid), s.own_group, "{}", s.name);
        // ...but never to a group the server is not in.
        let (ok_foreign, _, err) = run(&["chgrp", &a, &s.foreign_group]);
        assert!(!ok_foreign && err.contains("550"), "{}: chgrp {}: {err}", s.name, s.foreign_group);
        assert_eq!(std::fs::metadata(s.dir.join("a")).unwrap().gid(), gid, "{}: unchanged", s.name);
        let (ok_nogroup, _, err) = run(&["chgrp", &a, "no-such-group-ferry"]);
        assert!(!ok_nogroup && err.contains("550"), "{}: {err}", s.name);
        outcomes.push((ok, ok_missing, ok_own, ok_foreign, ok_nogroup));
    }
    assert_eq!(outcomes[0], outcomes[1], "Ferry and Globus answer alike");
}

/// The (type, name) pairs of an MLSR listing, in order.
fn entries(listing: &str) -> Vec<(String, String)> {
    listing
        .lines()
        .map(|l| {
            let (facts, name) = l.split_once("; ").unwrap_or_else(|| panic!("not an MLSx line: {l:?}"));
            let ty = facts.split(';').find_map(|f| f.strip_prefix("Type=")).unwrap().to_ascii_lowercase();
            (ty, name.to_string())
        })
        .collect()
}

#[test]
fn mlsr_from_the_globus_client_library_as_on_globus() {
    let ferry = FerryServer::start_with(&["--anonymous", "read"]);
    let globus = GlobusServer::start();
    let want: Vec<(String, String)> = [
        ("cdir", "."),
        ("dir", "sub"),
        ("file", "a"),
        ("dir", "sub/deeper"),
        ("file", "sub/b"),
        ("file", "sub/deeper/c"),
    ]
    .iter()
    .map(|(t, n)| (t.to_string(), n.to_string()))
    .collect();
    for s in sides(&ferry, &globus) {
        for mode in [&[][..], &["-e", "1"][..], &["-e", "3"][..]] {
            let url = format!("{}/", s.base);
            let (ok, out, err) = run(&[mode, &["mlsr", url.as_str()][..]].concat());
            assert!(ok, "{} {mode:?}: {err}", s.name);
            let got = entries(&out);
            assert_eq!(got[0], want[0], "{} {mode:?}: the listed directory first, as cdir", s.name);
            // Breadth first: no entry is shallower than the one before.
            let depth = |n: &str| n.matches('/').count();
            assert!(got.windows(2).all(|w| depth(&w[0].1) <= depth(&w[1].1)), "{} {mode:?}: {got:?}", s.name);
            let mut sorted = got.clone();
            sorted.sort();
            let mut want_sorted = want.clone();
            want_sorted.sort();
            assert_eq!(sorted, want_sorted, "{} {mode:?}:\n{out}", s.name);
        }
        // A file lists itself; a missing path is refused.
        let (ok, out, err) = run(&["mlsr", &format!("{}/sub/b", s.base)]);
        assert!(ok, "{}: {err}", s.name);
        assert_eq!(entries(&out), [("file".to_string(), "b".to_string())], "{}", s.name);
        let (ok, _, err) = run(&["mlsr", &format!("{}/missing/", s.base)]);
        assert!(!ok && err.contains("550"), "{}: {err}", s.name);
    }
}

/// `:globus-mapping:` is anonymous: refused where anonymous access is off.
#[test]
fn globus_mapping_needs_anonymous_access() {
    let ferry = FerryServer::start_with(&[]);
    random_file(&ferry.path("d/a"), 2, 1);
    let (ok, _, err) = run(&["mlsr", &format!("ftp://{}/d/", ferry.addr)]);
    assert!(!ok && err.contains("530"), "{err}");
}

/// A tree larger than `mlsr_max_entries` is not sent as if it were whole:
/// the listing ends with an error reply the client reports, in stream mode
/// and MODE E.
#[test]
fn mlsr_past_its_limit_fails_visibly() {
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("ferry.toml");
    std::fs::write(&config, "mlsr_max_entries = 5\n").unwrap();
    let ferry = FerryServer::start_with(&["--anonymous", "read", "--config", config.to_str().unwrap()]);
    for i in 0..8 {
        random_file(&ferry.path(&format!("big/f{i}")), 1, i);
    }
    for mode in [&[][..], &["-e", "2"][..]] {
        let url = format!("ftp://{}/big/", ferry.addr);
        let (ok, _, err) = run(&[mode, &["mlsr", url.as_str()][..]].concat());
        assert!(!ok && err.contains("451") && err.contains("mlsr_max_entries"), "{mode:?}: {err}");
    }
    let (ok, out, err) = run(&["mlsr", &format!("ftp://{}/big/f1", ferry.addr)]);
    assert!(ok && out.contains(" f1"), "a small listing still works: {err}");
}
