//! A real PostgreSQL from Debian for tests: `initdb` into a temporary
//! directory (as `nobody` when the tests run as root, since PostgreSQL
//! refuses to run as root), a free port on 127.0.0.1, the Unix socket in
//! the same directory, trust authentication, no fsync. Stopped and removed
//! on drop.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
    child: Option<Child>,
}

fn bin_dir() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path().join("bin")).filter(|p| p.join("initdb").exists()).collect())
        .unwrap_or_default();
    versions.sort();
    versions.pop().unwrap_or_else(|| {
        panic!("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); run scripts/deps.sh (package postgresql)")
    })
}

fn as_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// A command run as `nobody` when we are root.
fn unprivileged(program: &Path) -> Command {
    if as_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Postgres {
    pub fn start() -> Self {
        let bin = bin_dir();
        let dir = tempfile::Builder::new().prefix("ferry-pg").tempdir().unwrap();
        if as_root() {
            let ok = Command::new("chown").args(["-R", "nobody:nogroup"]).arg(dir.path()).status().unwrap();
            assert!(ok.success(), "chown of the PostgreSQL directory failed");
        }
        let data = dir.path().join("data");
        let out = unprivileged(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "ferry", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"])
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        let mut pg = Postgres { dir, bin, port: free_port(), child: None };
        pg.spawn();
        pg
    }

    fn spawn(&mut self) {
        let data = self.dir.path().join("data");
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.dir.path().join("postgres.log")).unwrap();
        let child = unprivileged(&self.bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=200"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "ferry", "-q"])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "PostgreSQL did not start:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn url(&self) -> String {
        format!("postgres://ferry@127.0.0.1:{}/postgres", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    /// Stops the server at once (SIGQUIT: immediate shutdown, as a crash
    /// would look to clients).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            send_signal(c.id(), "QUIT");
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port and data.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

fn send_signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}
