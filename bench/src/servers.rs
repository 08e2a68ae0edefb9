//! The servers under test: `ferry serve` and `globus-gridftp-server`, on
//! the server side of a [`Net`], with the CPU accounting each needs.
//!
//! * Ferry serves every session from one multi-threaded process, so its CPU
//!   for a run is the delta of that process's utime + stime.
//! * The Globus daemon forks and execs a fresh server for each control
//!   connection and reaps it when the session ends, so a run's CPU is the
//!   delta of the daemon's utime + stime + cutime + cstime, read only once
//!   every session child has been reaped (the reference's method, README
//!   §5). It runs as `nobody`, as the reference ran it as `gftp`: anonymous
//!   sessions of a root daemon would refuse logins without
//!   `-anonymous-user`, and a benchmark has no business serving files as
//!   root.

use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

use ferry_wan::Side;

use crate::error::{interrupt, BenchError, Result};
use crate::net::Net;
use crate::proc::{self, command_line, tail, Spawned};

const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Where running servers are recorded (see [`registry`]).
const REGISTRY_DIR: &str = "/run/ferry-bench";
/// How long a server may take to finish sessions after the client exits.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    Ferry,
    /// `ferry serve` of the `--ferry-old` build.
    FerryOld,
    Globus,
}

/// A running server of either kind.
#[derive(Debug)]
pub struct Server {
    pub kind: ServerKind,
    proc: Option<Spawned>,
    pub ip: Ipv4Addr,
    pub port: u16,
    /// Ferry's served directory; URLs are relative to it. Globus serves `/`.
    pub root: PathBuf,
    pub command: String,
}

impl Server {
    pub fn start_ferry(net: &Net, ferry: &Path, root: &Path, logs: &Path) -> Result<Server> {
        Self::start_ferry_with(net, ferry, root, logs, &[], &[])
    }

    /// `ferry serve` with extra flags (e.g. `--staging 16M`) and
    /// environment (e.g. `FERRY_DATA_PATH=buffered`), for rows that
    /// measure a server setting.
    pub fn start_ferry_with(
        net: &Net,
        ferry: &Path,
        root: &Path,
        logs: &Path,
        flags: &[String],
        env: &[(String, String)],
    ) -> Result<Server> {
        let ip = net.server_ip();
        let mut cmd = net.command(Side::Server, &ferry.to_string_lossy());
        cmd.arg("serve").arg(root).args(["--listen", &format!("{ip}:0")]);
        // Anonymous access with writes (the upload rows need them: the
        // server lives only for the benchmark) unless the row says otherwise.
        if !flags.iter().any(|f| f == "--anonymous") {
            cmd.args(["--anonymous", "write"]);
        }
        cmd.args(flags);
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let command = env_prefix(env) + &command_line(&cmd);
        let p = Spawned::start(cmd, "ferry serve", logs)?;
        let deadline = Instant::now() + START_TIMEOUT;
        // The first stdout line names the port: "ferry: serving DIR on ftp://IP:PORT/".
        let port = loop {
            interrupt::check()?;
            let out = fs::read_to_string(p.stdout_path()).unwrap_or_default();
            if let Some(port) = out.lines().next().and_then(parse_serving_port) {
                break port;
            }
            if p.exited()? || Instant::now() > deadline {
                let err = fs::read_to_string(p.stderr_path()).unwrap_or_default();
                return Err(BenchError::Precondition(format!(
                    "`{command}` did not start (stdout: {:?}, stderr: {})",
                    tail(&out, 200),
                    tail(&err, 400)
                )));
            }
            sleep(Duration::from_millis(20));
        };
        registry::add(p.pid());
        Ok(Server { kind: ServerKind::Ferry, proc: Some(p), ip, port, root: root.to_path_buf(), command })
    }

    pub fn start_globus(net: &Net, logs: &Path) -> Result<Server> {
        Self::start_globus_with(net, logs, &[])
    }

    /// The Globus server with extra flags (e.g. `-dc-default udt`).
    pub fn start_globus_with(net: &Net, logs: &Path, extra: &[&str]) -> Result<Server> {
        let ip = net.server_ip();
        let port = net.free_server_port()?;
        let mut cmd = net.command(Side::Server, "setpriv");
        cmd.args(["--reuid=nobody", "--regid=nogroup", "--init-groups", "globus-gridftp-server"]);
        cmd.args(["-c", "/dev/null", "-aa", "-p", &port.to_string()]);
        cmd.args(["-control-interface", &ip.to_string(), "-data-interface", &ip.to_string()]);
        cmd.args(extra);
        let command = command_line(&cmd);
        let p = Spawned::start(cmd, "globus-gridftp-server", logs)?;
        let deadline = Instant::now() + START_TIMEOUT;
        while !proc::listening(p.pid(), port) {
            interrupt::check()?;
            if p.exited()? || Instant::now() > deadline {
                let err = fs::read_to_string(p.stderr_path()).unwrap_or_default();
                let out = fs::read_to_string(p.stdout_path()).unwrap_or_default();
                return Err(BenchError::Precondition(format!(
                    "`{command}` did not start listening on port {port}: {}",
                    tail(&format!("{err} {out}"), 500)
                )));
            }
            sleep(Duration::from_millis(20));
        }
        registry::add(p.pid());
        Ok(Server { kind: ServerKind::Globus, proc: Some(p), ip, port, root: PathBuf::from("/"), command })
    }

    /// The URL of `path` (absolute, on the server's file system). A
    /// trailing `/` is kept (directory URLs need it for globus-url-copy).
    pub fn url(&self, path: &Path) -> Result<String> {
        let rel = path.strip_prefix(&self.root).map_err(|_| {
            BenchError::Precondition(format!(
                "{} is outside the served directory {}",
                path.display(),
                self.root.display()
            ))
        })?;
        let slash =
            if path.as_os_str().to_string_lossy().ends_with('/') && !rel.as_os_str().is_empty() { "/" } else { "" };
        // A Ferry server given a certificate is spoken to over FTPS
        // (AUTH TLS, PROT P): the encrypted rows of the quic scenario.
        let scheme =
            if self.kind == ServerKind::Ferry && self.command.contains(" --tls-cert ") { "ftps" } else { "ftp" };
        Ok(format!("{scheme}://{}:{}/{}{slash}", self.ip, self.port, rel.display()))
    }

    pub fn pid(&self) -> Option<i32> {
        self.proc.as_ref().map(Spawned::pid)
    }

    pub fn alive(&self) -> bool {
        self.proc.as_ref().is_some_and(|p| !p.exited().unwrap_or(true))
    }

    /// The server's log so far (for a failed run's diagnosis).
    pub fn log_tail(&self, max: usize) -> String {
        self.proc
            .as_ref()
            .map(|p| tail(&fs::read_to_string(p.stderr_path()).unwrap_or_default(), max))
            .unwrap_or_default()
    }

    /// The server's CPU seconds so far, once it is idle: no Globus session
    /// child left unreaped, no Ferry CPU tick for a while.
    pub fn settled_cpu(&self) -> Result<f64> {
        let pid = self.pid().ok_or_else(|| BenchError::Precondition("server not running".into()))?;
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        match self.kind {
            ServerKind::Globus => {
                while !proc::children(pid).is_empty() {
                    interrupt::check()?;
                    if Instant::now() > deadline {
                        return Err(BenchError::output(
                            "globus-gridftp-server",
                            format!(
                                "session processes still running {} s after the client exited",
                                SETTLE_TIMEOUT.as_secs()
                            ),
                        ));
                    }
                    sleep(Duration::from_millis(10));
                }
                Ok(proc::proc_cpu(pid)?.total())
            }
            ServerKind::Ferry | ServerKind::FerryOld => {
                let mut last = proc::proc_cpu(pid)?.own;
                loop {
                    sleep(Duration::from_millis(30));
                    let now = proc::proc_cpu(pid)?.own;
                    if now == last || Instant::now() > deadline {
                        return Ok(now);
                    }
                    last = now;
                }
            }
        }
    }

    pub fn stop(mut self) -> String {
        let pid = self.pid();
        let log = self.proc.take().map(Spawned::stop).unwrap_or_default();
        if let Some(pid) = pid {
            registry::remove(pid);
        }
        log
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(p) = self.proc.take() {
            let pid = p.pid();
            p.stop();
            registry::remove(pid);
        }
    }
}

/// A record of the servers this run has started, so that the next run can
/// stop them if this one is killed with SIGKILL: the Globus daemon drops
/// to `nobody`, which clears the parent-death signal every other child
/// gets, and it would otherwise keep an emulated link's namespace alive.
/// Each line is a process group id with its leader's start time, so a
/// recycled pid is never signalled.
pub mod registry {
    use std::fs;
    use std::io::Write;
    use std::path::PathBuf;

    use crate::proc;

    fn file_of(harness: u32) -> PathBuf {
        PathBuf::from(super::REGISTRY_DIR).join(format!("{harness}.servers"))
    }

    pub(super) fn add(pgid: i32) {
        let Some(start) = proc::start_time(pgid) else { return };
        let _ = fs::create_dir_all(super::REGISTRY_DIR);
        if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(file_of(std::process::id())) {
            let _ = writeln!(f, "{pgid} {start}");
        }
    }

    pub(super) fn remove(pgid: i32) {
        let path = file_of(std::process::id());
        let Ok(text) = fs::read_to_string(&path) else { return };
        let kept: Vec<&str> = text.lines().filter(|l| l.split_whitespace().next() != Some(&pgid.to_string())).collect();
        let _ = if kept.is_empty() { fs::remove_file(&path) } else { fs::write(&path, kept.join("\n") + "\n") };
    }

    /// Stops the servers of earlier runs that are no longer alive; returns
    /// what it stopped.
    pub fn stop_orphans() -> Vec<String> {
        let mut stopped = Vec::new();
        let Ok(entries) = fs::read_dir(super::REGISTRY_DIR) else { return stopped };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(harness) = name.strip_suffix(".servers").and_then(|p| p.parse::<u32>().ok()) else { continue };
            // Every harness binary registers its servers (ferry-bench,
            // ferry-small-files — whose comm is cut to "ferry-small-fil" —,
            // ferry-bottlenecks): a live one of any of them is not a killed
            // run. Checking for "ferry-bench" alone had a ferry-bench run stop
            // the servers of a running ferry-small-files (issue 18's bench).
            let alive =
                fs::read_to_string(format!("/proc/{harness}/comm")).is_ok_and(|c| c.trim().starts_with("ferry-"));
            if alive {
                continue;
            }
            for line in fs::read_to_string(e.path()).unwrap_or_default().lines() {
                let mut it = line.split_whitespace();
                let (Some(pgid), Some(start)) =
                    (it.next().and_then(|v| v.parse::<i32>().ok()), it.next().and_then(|v| v.parse::<u64>().ok()))
                else {
                    continue;
                };
                if proc::start_time(pgid) == Some(start) && proc::kill_group_now(pgid).is_ok() {
                    stopped.push(format!("process group {pgid} (a server of killed run {harness})"));
                }
            }
            let _ = fs::remove_file(e.path());
        }
        stopped
    }
}

/// The port in "ferry: serving DIR on ftp://IP:PORT/".
/// `K=V K2=V2 ` before a command line, as a shell would take it.
pub fn env_prefix(env: &[(String, String)]) -> String {
    env.iter().map(|(k, v)| format!("{k}={v} ")).collect()
}

pub fn parse_serving_port(line: &str) -> Option<u16> {
    let url = line.strip_prefix("ferry: serving ")?.rsplit(" on ").next()?;
    let rest = url.strip_prefix("ftp://")?.trim_end_matches('/');
    rest.rsplit(':').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_line() {
        assert_eq!(parse_serving_port("ferry: serving /dev/shm/x on ftp://127.0.0.1:45343/"), Some(45343));
        assert_eq!(parse_serving_port("ferry: serving /a on b on ftp://10.77.0.2:21/"), Some(21));
        assert_eq!(parse_serving_port("something else"), None);
    }

    #[test]
    fn urls() {
        let s = Server {
            kind: ServerKind::Ferry,
            proc: None,
            ip: Ipv4Addr::LOCALHOST,
            port: 2811,
            root: "/dev/shm/fb".into(),
            command: String::new(),
        };
        assert_eq!(s.url(Path::new("/dev/shm/fb/mem/a.bin")).unwrap(), "ftp://127.0.0.1:2811/mem/a.bin");
        assert_eq!(s.url(Path::new("/dev/shm/fb/tree/")).unwrap(), "ftp://127.0.0.1:2811/tree/");
        assert!(s.url(Path::new("/etc/passwd")).is_err());
        let g = Server {
            kind: ServerKind::Globus,
            proc: None,
            ip: Ipv4Addr::LOCALHOST,
            port: 2811,
            root: "/".into(),
            command: String::new(),
        };
        assert_eq!(g.url(Path::new("/dev/shm/fb/x")).unwrap(), "ftp://127.0.0.1:2811/dev/shm/fb/x");
    }
}
