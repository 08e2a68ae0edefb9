//! Child processes with bounded waits and CPU accounting, and the few
//! `/proc` readings the harness needs (a server's CPU, its children, its
//! listening sockets).
//!
//! Every child gets its own process group, so a terminal's Ctrl-C reaches
//! only the harness (which then stops children in order and tears the link
//! down), and so stopping a child also stops whatever it forked (the Globus
//! daemon's per-session servers, `ip netns exec` wrappers). Standard output
//! and error go to files, never pipes: a server that logs a line per file
//! for 2,000 files can then never block on a pipe nobody reads.

use std::fmt;
use std::fs::{self, File};
use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{interrupt, BenchError, Result};
use crate::sys;

/// How often a wait looks at the interrupt flag. The pidfd wakes the wait
/// the moment the child exits, so this does not limit timing precision.
const INTERRUPT_CHECK: Duration = Duration::from_millis(100);
/// Grace period between SIGTERM and SIGKILL when stopping a child.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Renders a command as a shell-like line for records and error messages.
pub fn command_line(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains([' ', '"', '\'', ';', '*']) {
            format!("'{}'", a.replace('\'', r"'\''"))
        } else {
            a.into_owned()
        }
    }));
    parts.join(" ")
}

/// A running child process in its own process group.
pub struct Spawned {
    what: String,
    pid: i32,
    pidfd: OwnedFd,
    started: Instant,
    stdout: PathBuf,
    stderr: PathBuf,
    reaped: bool,
}

impl fmt::Debug for Spawned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spawned").field("what", &self.what).field("pid", &self.pid).finish()
    }
}

/// A child that has exited and been reaped.
#[derive(Debug, Clone)]
pub struct Finished {
    pub status: ExitStatus,
    /// From spawn to exit.
    pub wall: Duration,
    /// User + system seconds of the child and everything it reaped.
    pub cpu: sys::Rusage,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn cpu_seconds(&self) -> f64 {
        self.cpu.user_s + self.cpu.system_s
    }

    /// Turns a non-zero exit into an error carrying the end of stderr.
    pub fn check(self, what: &str) -> Result<Finished> {
        if self.status.success() {
            Ok(self)
        } else {
            Err(BenchError::Failed {
                what: what.to_string(),
                status: self.status.to_string(),
                detail: tail(&format!("{}\n{}", self.stderr, self.stdout), 600),
            })
        }
    }
}

/// The last `max` characters of `text`, trimmed, on one line.
pub fn tail(text: &str, max: usize) -> String {
    let t = text.trim();
    let start = t.char_indices().rev().nth(max.saturating_sub(1)).map(|(i, _)| i).unwrap_or(0);
    let cut = &t[start..];
    let one_line = cut.split_whitespace().collect::<Vec<_>>().join(" ");
    if start > 0 {
        format!("…{one_line}")
    } else {
        one_line
    }
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

impl Spawned {
    /// Starts `cmd` with stdin from /dev/null and stdout/stderr in files
    /// under `log_dir`.
    pub fn start(mut cmd: Command, what: &str, log_dir: &Path) -> Result<Spawned> {
        interrupt::check()?;
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let slug: String =
            what.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).take(40).collect::<String>();
        let stdout = log_dir.join(format!("{n:05}-{slug}.out"));
        let stderr = log_dir.join(format!("{n:05}-{slug}.err"));
        let out = File::create(&stdout).map_err(|e| BenchError::io(format!("creating {}", stdout.display()), e))?;
        let err = File::create(&stderr).map_err(|e| BenchError::io(format!("creating {}", stderr.display()), e))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
        sys::die_with_parent(&mut cmd);
        let started = Instant::now();
        let child = cmd.spawn().map_err(|e| {
            let program = cmd.get_program().to_string_lossy().into_owned();
            if e.kind() == std::io::ErrorKind::NotFound {
                BenchError::MissingProgram { hint: "run bench/deps.sh (or install it)".into(), program }
            } else {
                BenchError::io(format!("starting {what} ({})", command_line(&cmd)), e)
            }
        })?;
        let pid = i32::try_from(child.id()).map_err(|_| BenchError::output(what, "pid out of range"))?;
        // From here on this struct owns the child: std's `Child` is dropped
        // without waiting (which std allows), and only we reap it.
        drop(child);
        let pidfd = match sys::pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) => {
                // Cannot bound the wait without it; do not leave the child.
                let _ = sys::kill_group(pid, libc::SIGKILL);
                let _ = sys::wait4(pid);
                return Err(BenchError::io("pidfd_open (needs Linux 5.3 or newer)", e));
            }
        };
        Ok(Spawned { what: what.to_string(), pid, pidfd, started, stdout, stderr, reaped: false })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub fn what(&self) -> &str {
        &self.what
    }

    pub fn stdout_path(&self) -> &Path {
        &self.stdout
    }

    pub fn stderr_path(&self) -> &Path {
        &self.stderr
    }

    /// Whether the child has exited (it stays unreaped until `wait`).
    pub fn exited(&self) -> Result<bool> {
        sys::poll_readable(&self.pidfd, Duration::ZERO).map_err(|e| BenchError::io("polling a pidfd", e))
    }

    /// Waits for the child to exit, at most `timeout` from now (a server
    /// started long before it is waited for gets the full `timeout` too);
    /// on timeout or interrupt the whole process group is killed and
    /// reaped first.
    pub fn wait(mut self, timeout: Duration) -> Result<Finished> {
        let deadline = Instant::now() + timeout;
        loop {
            if interrupt::requested() {
                self.kill_and_reap();
                return Err(BenchError::Interrupted);
            }
            let now = Instant::now();
            if now >= deadline {
                let stderr = self.read_logs().1;
                self.kill_and_reap();
                return Err(BenchError::Timeout {
                    what: format!("{} (stderr: {})", self.what, tail(&stderr, 300)),
                    secs: timeout.as_secs_f64(),
                });
            }
            let slice = (deadline - now).min(INTERRUPT_CHECK);
            if sys::poll_readable(&self.pidfd, slice).map_err(|e| BenchError::io("polling a pidfd", e))? {
                break;
            }
        }
        let wall = self.started.elapsed();
        // Anything the child left running in its group must not outlive the
        // measurement. Signalled before reaping: while the leader is an
        // unreaped zombie its pid, the group id, cannot be reused.
        let _ = sys::kill_group(self.pid, libc::SIGKILL);
        let (status, cpu) = sys::wait4(self.pid).map_err(|e| BenchError::io(format!("reaping {}", self.what), e))?;
        self.reaped = true;
        let (stdout, stderr) = self.read_logs();
        Ok(Finished { status: ExitStatus::from_raw(status), wall, cpu, stdout, stderr })
    }

    /// Stops a long-running child (SIGTERM, then SIGKILL after a grace
    /// period) and returns its stderr.
    pub fn stop(mut self) -> String {
        self.kill_and_reap();
        self.read_logs().1
    }

    fn read_logs(&self) -> (String, String) {
        let read = |p: &Path| fs::read(p).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        (read(&self.stdout), read(&self.stderr))
    }

    fn kill_and_reap(&mut self) {
        if self.reaped {
            return;
        }
        let _ = sys::kill_group(self.pid, libc::SIGTERM);
        let exited = sys::poll_readable(&self.pidfd, STOP_GRACE).unwrap_or(false);
        if !exited {
            let _ = sys::kill_group(self.pid, libc::SIGKILL);
        }
        // The group leader is still unreaped, so its pid (= the group id)
        // cannot have been reused: this SIGKILL reaches only our processes.
        let _ = sys::kill_group(self.pid, libc::SIGKILL);
        let _ = sys::wait4(self.pid);
        self.reaped = true;
    }

    /// Removes the stdout/stderr files (kept until now for diagnosis).
    pub fn remove_logs(stdout: &Path, stderr: &Path) {
        let _ = fs::remove_file(stdout);
        let _ = fs::remove_file(stderr);
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

/// Runs `cmd` to completion within `timeout` and checks its exit status.
pub fn run(cmd: Command, what: &str, log_dir: &Path, timeout: Duration) -> Result<Finished> {
    let spawned = Spawned::start(cmd, what, log_dir)?;
    let (out, err) = (spawned.stdout_path().to_path_buf(), spawned.stderr_path().to_path_buf());
    let result = spawned.wait(timeout);
    Spawned::remove_logs(&out, &err);
    result?.check(what)
}

/// CPU counters of a process from `/proc/PID/stat`, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcCpu {
    /// utime + stime: the process's own threads.
    pub own: f64,
    /// cutime + cstime: children it has reaped.
    pub children: f64,
}

impl ProcCpu {
    pub fn total(&self) -> f64 {
        self.own + self.children
    }
}

/// Parses the CPU fields of a `/proc/PID/stat` line. The command name is in
/// parentheses and may contain spaces, so fields are counted after the
/// last ')'.
pub fn parse_stat_cpu(stat: &str, ticks_per_second: f64) -> Option<ProcCpu> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) ... utime(14) stime(15) cutime(16)
    // cstime(17); `f[0]` is field 3.
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let (ut, st, cut, cst) = (field(14)?, field(15)?, field(16)?, field(17)?);
    Some(ProcCpu { own: (ut + st) / ticks_per_second, children: (cut + cst) / ticks_per_second })
}

/// The start time of a process (clock ticks since boot, `/proc/PID/stat`
/// field 22): with the pid, it identifies a process across pid reuse.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// SIGKILLs process group `pgid` at once (for orphans of a killed run).
pub fn kill_group_now(pgid: i32) -> Result<()> {
    sys::kill_group(pgid, libc::SIGKILL).map_err(|e| BenchError::io(format!("killing process group {pgid}"), e))
}

/// Clock ticks per second of `/proc` CPU counters.
pub fn clock_ticks() -> f64 {
    sys::clock_ticks()
}

pub fn proc_cpu(pid: i32) -> Result<ProcCpu> {
    let path = format!("/proc/{pid}/stat");
    let stat = fs::read_to_string(&path).map_err(|e| BenchError::io(format!("reading {path}"), e))?;
    parse_stat_cpu(&stat, sys::clock_ticks()).ok_or_else(|| BenchError::output(path, "unparsable stat line"))
}

/// Direct children of `pid` (all its threads').
/// The peak resident set of a process (`VmHWM` in `/proc/PID/status`), in
/// bytes.
pub fn peak_rss(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_hwm(&status)
}

/// `VmHWM:   123456 kB` → bytes.
pub fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

pub fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for t in tasks.flatten() {
        if let Ok(s) = fs::read_to_string(t.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|v| v.parse::<i32>().ok()));
        }
    }
    out
}

/// Whether a socket in the network namespace of `pid` listens on `port`
/// (IPv4 or IPv6). Reading the server's own `/proc/PID/net` works for
/// servers inside an emulated link's namespace too, and unlike a test
/// connection it does not count as a client (iperf3 `-1` would exit).
pub fn listening(pid: i32, port: u16) -> bool {
    ["tcp", "tcp6"]
        .iter()
        .any(|f| fs::read_to_string(format!("/proc/{pid}/net/{f}")).is_ok_and(|table| listens_on(&table, port)))
}

/// Whether a `/proc/net/tcp`-format table has a LISTEN (state 0A) socket
/// on `port`.
pub fn listens_on(table: &str, port: u16) -> bool {
    table.lines().skip(1).any(|line| {
        let mut cols = line.split_whitespace();
        let local = cols.nth(1).unwrap_or("");
        let state = cols.nth(1).unwrap_or("");
        let local_port = local.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
        state == "0A" && local_port == Some(port)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_hwm() {
        assert_eq!(parse_vm_hwm("Name:\tferry\nVmPeak:\t 9 kB\nVmHWM:\t   2048 kB\n"), Some(2 << 20));
        assert_eq!(parse_vm_hwm("Name:\tferry\n"), None);
    }

    #[test]
    fn stat_with_spaces_in_name() {
        let line = "1234 (globus gridftp) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 30 20 20 0 1 0 100 0 0";
        let cpu = parse_stat_cpu(line, 100.0).unwrap();
        assert!((cpu.own - 3.0).abs() < 1e-9);
        assert!((cpu.children - 0.5).abs() < 1e-9);
        assert!((cpu.total() - 3.5).abs() < 1e-9);
    }

    #[test]
    fn own_start_time() {
        let me = std::process::id() as i32;
        assert!(start_time(me).is_some());
        assert_eq!(start_time(me), start_time(me));
    }

    #[test]
    fn listen_table() {
        let table =
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n\
           1: 0100007F:0050 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 2\n";
        assert!(listens_on(table, 8080));
        assert!(!listens_on(table, 80), "established, not listening");
        assert!(!listens_on(table, 81));
    }

    #[test]
    fn tails() {
        assert_eq!(tail("  a\nb  ", 10), "a b");
        assert_eq!(tail("abcdef", 3), "…def");
    }

    #[test]
    fn quoting() {
        let mut c = Command::new("guc");
        c.args(["-p", "4", "a b", ""]);
        assert_eq!(command_line(&c), "guc -p 4 'a b' ''");
    }
}
