//! Passwords off the command line (issue 13, item 7): FERRY_PASSWORD,
//! ~/.netrc, a prompt on a terminal; never printed, never on disk; `ferry
//! passwd` on a terminal, and a changed password keeps the permissions.

mod support;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use support::*;

/// `ferry` with a clean environment for credentials: its own HOME (no
/// netrc of the machine's user) and state directory.
fn ferry_env(args: &[&str], home: &Path, env: &[(&str, &str)]) -> (bool, String, String) {
    let mut cmd = Command::new(ferry_bin());
    cmd.env("HOME", home).env("FERRY_STATE_DIR", home.join("state")).env_remove("FERRY_PASSWORD").env_remove("NETRC");
    cmd.envs(env.iter().copied());
    ferry_with(args, &mut cmd)
}

#[test]
fn passwords_come_from_the_environment_netrc_or_nowhere_with_a_clear_error() {
    let server = FerryServer::start();
    let home = tempfile::tempdir().unwrap();
    let src = home.path().join("f.bin");
    random_file(&src, 1000, 1);
    let url = format!("ftp://alice@{}/from-env.bin", server.addr);
    let (ok, _, err) =
        ferry_env(&["cp", "-q", src.to_str().unwrap(), &url], home.path(), &[("FERRY_PASSWORD", ALICE.1)]);
    assert!(ok, "{err}");
    assert!(server.path("from-env.bin").exists());
    // No password anywhere, no terminal: say where to put it.
    let (ok, _, err) = ferry_env(&["cp", "-q", src.to_str().unwrap(), &url], home.path(), &[]);
    assert!(!ok);
    assert!(err.contains("FERRY_PASSWORD") && err.contains(".netrc") && err.contains("alice"), "{err}");
    // ~/.netrc, as curl reads it: for the user in the URL, and for a URL
    // without a user (the login comes from the file: alice may write,
    // anonymous may not).
    std::fs::write(home.path().join(".netrc"), format!("machine 127.0.0.1 login alice password {}\n", ALICE.1))
        .unwrap();
    let (ok, _, err) = ferry_env(&["cp", "-q", src.to_str().unwrap(), &url], home.path(), &[]);
    assert!(ok, "{err}");
    let no_user = format!("ftp://{}/from-netrc.bin", server.addr);
    let (ok, _, err) = ferry_env(&["cp", "-q", src.to_str().unwrap(), &no_user], home.path(), &[]);
    assert!(ok, "{err}");
    assert!(server.path("from-netrc.bin").exists());
    // ls, rm and probe use the same lookup.
    let (ok, out, err) = ferry_env(&["ls", &format!("ftp://alice@{}/", server.addr)], home.path(), &[]);
    assert!(ok && out.contains("from-netrc.bin"), "{out}{err}");
}

#[test]
fn a_password_is_never_printed_nor_written_to_disk() {
    let server = FerryServer::start();
    let home = tempfile::tempdir().unwrap();
    let secret = "S3cret-never-shown";
    let with = format!("ftp://alice:{secret}@{}/x.bin", server.addr);
    let typo = format!("ftp:/alice:{secret}@{}/x.bin", server.addr);
    let out = home.path().join("out.bin");
    let cases: Vec<Vec<&str>> = vec![
        // An argument error that echoes the URL.
        vec!["cp", "a", "b", &with],
        // A URL with one slash: a typo, not a local file.
        vec!["cp", &typo, out.to_str().unwrap()],
        vec!["cp", "/etc/hostname", &typo],
        // A bad port: the URL parser's complaint.
        vec!["cp", "/etc/hostname", "ftp://alice:S3cret-never-shown@127.0.0.1:99999/x"],
        // A failing copy, with the most logging there is.
        vec!["cp", &with, out.to_str().unwrap()],
        vec!["cp", "--json", &with, out.to_str().unwrap()],
    ];
    for args in &cases {
        let (ok, stdout, stderr) = ferry_env(args, home.path(), &[("FERRY_LOG", "trace")]);
        assert!(!ok, "{args:?}");
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{args:?} printed the password:\n{stdout}{stderr}"
        );
    }
    let (_, _, err) = ferry_env(&["cp", &typo, out.to_str().unwrap()], home.path(), &[]);
    assert!(err.contains("slash missing"), "{err}");
    // Nothing on disk holds it: restart records, anything under HOME.
    fn grep(dir: &Path, needle: &str) -> Vec<String> {
        let mut hits = Vec::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                hits.extend(grep(&p, needle));
            } else if std::fs::read(&p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle)) {
                hits.push(p.display().to_string());
            }
        }
        hits
    }
    assert!(grep(home.path(), secret).is_empty(), "{:?}", grep(home.path(), secret));
    assert!(!server.log_text().contains(secret));
}

/// Runs `ferry passwd` under a pseudo-terminal (script(1)), typing `input`.
fn passwd_on_a_terminal(users: &Path, name: &str, input: &str) -> (bool, String) {
    on_a_terminal(&format!("{} passwd --users {} {name}", ferry_bin(), users.display()), input, None)
}

/// Runs `cmd` under a pseudo-terminal (script(1)), typing `input` line by
/// line; `home` replaces HOME (and drops FERRY_PASSWORD).
fn on_a_terminal(cmd: &str, input: &str, home: Option<&Path>) -> (bool, String) {
    require("script");
    let mut script = Command::new("script");
    if let Some(h) = home {
        script.env("HOME", h).env_remove("FERRY_PASSWORD").env_remove("NETRC").env("FERRY_STATE_DIR", h.join("state"));
    }
    let mut child = script
        .args(["-qec", cmd, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Typed slowly, as a person would: each answer after its prompt.
    for line in input.lines() {
        std::thread::sleep(std::time::Duration::from_millis(400));
        stdin.write_all(format!("{line}\r").as_bytes()).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(400));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

#[test]
fn on_a_terminal_ferry_asks_for_the_password_without_echo() {
    let server = FerryServer::start();
    random_file(&server.path("seen.bin"), 10, 1);
    let home = tempfile::tempdir().unwrap();
    let cmd = format!("{} ls ftp://alice@{}/", ferry_bin(), server.addr);
    let (ok, screen) = on_a_terminal(&cmd, &format!("{}\n", ALICE.1), Some(home.path()));
    assert!(ok, "{screen}");
    assert!(screen.contains(&format!("Password for alice@127.0.0.1:{}", server.addr.port())), "{screen}");
    assert!(screen.contains("seen.bin"), "{screen}");
    assert!(!screen.contains(ALICE.1), "the password was echoed: {screen}");
}

#[test]
fn passwd_asks_twice_without_echo_and_keeps_the_users_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.toml");
    let set = |args: &[&str], pw: &str| {
        let mut child = Command::new(ferry_bin())
            .args(["passwd", "--users", users.to_str().unwrap()])
            .args(args)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(format!("{pw}\n").as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    set(&["alice", "--write", "--root", "/alice", "--profile"], "first");
    // Changing only the password changes only the password.
    set(&["alice"], "second");
    let text = std::fs::read_to_string(&users).unwrap();
    assert!(
        text.contains("access = \"write\"") && text.contains("root = \"/alice\"") && text.contains("profile = true"),
        "{text}"
    );

    // On a terminal: asked twice, nothing echoed.
    let (ok, screen) = passwd_on_a_terminal(&users, "alice", "third-pw\nthird-pw\n");
    assert!(ok, "{screen}");
    assert!(screen.contains("New password") && screen.contains("Again"), "{screen}");
    assert!(!screen.contains("third-pw"), "the password was echoed: {screen}");
    let (ok, screen) = passwd_on_a_terminal(&users, "alice", "one\ntwo\n");
    assert!(!ok && screen.contains("differ"), "{screen}");
    let text = std::fs::read_to_string(&users).unwrap();
    assert!(text.contains("access = \"write\"") && text.contains("root = \"/alice\""), "{text}");

    // The new password works; the old one does not.
    std::fs::create_dir_all(dir.path().join("served/alice")).unwrap();
    let server_dir = dir.path().join("served");
    let mut server = Command::new(ferry_bin())
        .args(["serve", server_dir.to_str().unwrap(), "--users", users.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(server.stdout.take().unwrap()), &mut line).unwrap();
    let addr = line.trim().rsplit_once("ftp://").unwrap().1.trim_end_matches('/').to_string();
    let (ok, _, err) = ferry(&["ls", &format!("ftp://alice:third-pw@{addr}/")]);
    assert!(ok, "{err}");
    let (ok, _, _) = ferry(&["ls", &format!("ftp://alice:second@{addr}/")]);
    assert!(!ok);
    let _ = server.kill();
    let _ = server.wait();
}
