//! Running one measurement: a transfer client against a server, iperf3,
//! fio, `cp`; plus the page-cache and `sync` helpers of the disk scenario.
//!
//! What is timed: a transfer is the wall clock of the client process, from
//! spawn to exit, including its connection set-up and login, as the
//! reference timed `globus-url-copy` (the tools' own rate figures differ in
//! what they leave out). iperf3 and fio are timed by their own reports,
//! which exclude their set-up: they stand for the limit of the network or
//! the disk, not for a tool a user would run.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use ferry_wan::Side;

use crate::error::{interrupt, BenchError, Result};
use crate::net::Net;
use crate::proc::{self, command_line, Finished, Spawned};
use crate::servers::Server;

/// Where a transfer puts its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// `/dev/null` on the client: the memory sink.
    DevNull,
    /// A file on the client's disk.
    File(PathBuf),
    /// A directory that must not exist yet (many-files copies).
    Dir(PathBuf),
    /// An upload: the source is a local file and this file, on the
    /// server's file system (under its served directory, in a directory
    /// the Globus server's `nobody` may write), is the destination.
    Upload(PathBuf),
}

impl Dest {
    pub fn path(&self) -> Option<&Path> {
        match self {
            Dest::DevNull => None,
            Dest::File(p) | Dest::Dir(p) | Dest::Upload(p) => Some(p),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    Ferry,
    /// `ferry cp` of the `--ferry-old` build (same flags as the new one).
    FerryOld,
    GlobusUrlCopy,
}

impl ClientKind {
    /// Either build of `ferry cp`.
    pub fn is_ferry(self) -> bool {
        matches!(self, ClientKind::Ferry | ClientKind::FerryOld)
    }
}

/// A transfer command, fully resolved against a server. `ferry_bin` is
/// the binary of the client's build (new or old).
pub fn transfer_command(
    net: &Net,
    ferry_bin: &Path,
    client: ClientKind,
    flags: &[String],
    server: &Server,
    source: &Path,
    dest: &Dest,
) -> Result<Command> {
    if let Dest::Upload(to) = dest {
        let url = server.url(to)?;
        let mut c = match client {
            ClientKind::Ferry | ClientKind::FerryOld => {
                let mut c = net.command(Side::Client, &ferry_bin.to_string_lossy());
                c.args(["cp", "--json", "--no-resume"]).args(flags).arg(source);
                c
            }
            ClientKind::GlobusUrlCopy => {
                let mut c = net.command(Side::Client, "globus-url-copy");
                c.args(flags).arg(format!("file://{}", source.display()));
                c
            }
        };
        c.arg(url);
        return Ok(c);
    }
    let src = server.url(source)?;
    let cmd = match client {
        ClientKind::Ferry | ClientKind::FerryOld => {
            let mut c = net.command(Side::Client, &ferry_bin.to_string_lossy());
            // --no-resume: a run killed by its timeout must not make the
            // next one resume and move fewer bytes.
            c.args(["cp", "--json", "--no-resume"]).args(flags).arg(&src);
            match dest {
                Dest::DevNull => c.arg("/dev/null"),
                Dest::File(p) | Dest::Dir(p) => c.arg(p),
                Dest::Upload(_) => unreachable!("handled above"),
            };
            c
        }
        ClientKind::GlobusUrlCopy => {
            let mut c = net.command(Side::Client, "globus-url-copy");
            c.args(flags).arg(&src);
            match dest {
                Dest::DevNull => c.arg("file:///dev/null"),
                Dest::File(p) => c.arg(format!("file://{}", p.display())),
                // Directory URLs must end in '/' (reference §6.10).
                Dest::Dir(p) => c.arg(format!("file://{}/", p.display())),
                Dest::Upload(_) => unreachable!("handled above"),
            };
            c
        }
    };
    Ok(cmd)
}

/// What the machine's CPUs did between two readings of `/proc/stat`.
#[derive(Debug, Clone, Copy)]
pub struct CpuStat {
    busy: u64,
}

impl CpuStat {
    pub fn now() -> CpuStat {
        let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
        let v: Vec<u64> =
            stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        let total: u64 = v.iter().take(8).sum();
        // idle + iowait are not busy
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        CpuStat { busy: total.saturating_sub(idle) }
    }

    /// CPU seconds spent busy since `earlier`.
    pub fn busy_seconds_since(&self, earlier: &CpuStat) -> f64 {
        self.busy.saturating_sub(earlier.busy) as f64 / proc::clock_ticks()
    }
}

/// The outcome of a timed client run against a server.
#[derive(Debug, Clone)]
pub struct Timed {
    pub finished: Finished,
    pub server_cpu: Option<f64>,
    /// CPU seconds the whole machine was busy while the client ran.
    pub machine_busy_s: f64,
    /// CPU seconds of the link emulator's forwarder threads meanwhile.
    pub forwarder_cpu_s: f64,
    /// Packets the emulator dropped at random, and from its queue.
    pub link_lost: u64,
    pub link_queue_drops: u64,
}

impl Timed {
    /// Cores busy with anything other than client, server and forwarder.
    pub fn background_cores(&self) -> f64 {
        let wall = self.finished.wall.as_secs_f64().max(1e-6);
        let ours = self.finished.cpu_seconds() + self.server_cpu.unwrap_or(0.0) + self.forwarder_cpu_s;
        ((self.machine_busy_s - ours) / wall).max(0.0)
    }
}

/// Runs `cmd` as the client of `servers` (whose CPU is counted) within
/// `timeout`. The exit status is checked.
pub fn timed_client(
    cmd: Command,
    what: &str,
    net: &Net,
    servers: &[&Server],
    logs: &Path,
    timeout: Duration,
) -> Result<Timed> {
    let mut before = Vec::new();
    for s in servers {
        before.push(s.settled_cpu()?);
    }
    let link0 = net.link_stats();
    let cpu0 = CpuStat::now();
    let spawned = Spawned::start(cmd, what, logs)?;
    let (out, err) = (spawned.stdout_path().to_path_buf(), spawned.stderr_path().to_path_buf());
    let finished = spawned.wait(timeout);
    let cpu1 = CpuStat::now();
    Spawned::remove_logs(&out, &err);
    let finished = finished?.check(what)?;
    let link1 = net.link_stats();
    let mut server_cpu = None;
    for (s, b) in servers.iter().zip(before) {
        let after = s.settled_cpu()?;
        *server_cpu.get_or_insert(0.0) += (after - b).max(0.0);
    }
    let (fwd, lost, qd) = match (link0, link1) {
        (Some(a), Some(b)) => (
            (b.forward.cpu_ns + b.back.cpu_ns).saturating_sub(a.forward.cpu_ns + a.back.cpu_ns) as f64 / 1e9,
            (b.forward.lost + b.back.lost).saturating_sub(a.forward.lost + a.back.lost),
            (b.forward.queue_drops + b.back.queue_drops).saturating_sub(a.forward.queue_drops + a.back.queue_drops),
        ),
        _ => (0.0, 0, 0),
    };
    Ok(Timed {
        finished,
        server_cpu,
        machine_busy_s: cpu1.busy_seconds_since(&cpu0),
        forwarder_cpu_s: fwd,
        link_lost: lost,
        link_queue_drops: qd,
    })
}

/// Bytes in `ferry cp --json`'s summary line.
pub fn ferry_json_bytes(stdout: &str) -> Option<u64> {
    stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|v| v["bytes"].as_u64())
}

/// What iperf3 reported for one run.
#[derive(Debug, Clone)]
pub struct IperfResult {
    pub bytes: u64,
    /// The receiver's measured seconds (excludes iperf3's set-up).
    pub seconds: f64,
    pub wall: f64,
    pub client_cpu: f64,
    pub server_cpu: f64,
    pub retransmits: u64,
    pub machine_busy_s: f64,
    pub forwarder_cpu_s: f64,
}

/// One iperf3 test of `bytes` over `streams` streams, the server sending
/// (`-R`: the direction of a GridFTP RETR). Both ends are children of the
/// harness, so both CPU figures come from `wait4`.
pub fn iperf3(net: &Net, streams: u32, bytes: u64, logs: &Path, timeout: Duration) -> Result<(IperfResult, String)> {
    let ip = net.server_ip().to_string();
    let port = net.free_server_port()?.to_string();
    let mut scmd = net.command(Side::Server, "iperf3");
    scmd.args(["-s", "-1", "-B", &ip, "-p", &port]);
    let server = Spawned::start(scmd, "iperf3 -s", logs)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let port_n: u16 = port.parse().unwrap_or(0);
    while !proc::listening(server.pid(), port_n) {
        interrupt::check()?;
        if server.exited()? || Instant::now() > deadline {
            let err = server.stop();
            return Err(BenchError::Precondition(format!("iperf3 server did not listen on {ip}:{port}: {err}")));
        }
        sleep(Duration::from_millis(10));
    }
    let mut ccmd = net.command(Side::Client, "iperf3");
    ccmd.args(["-c", &ip, "-p", &port, "-R", "-J", "-n", &bytes.to_string(), "-P", &streams.to_string()]);
    let command = command_line(&ccmd);
    let link0 = net.link_stats();
    let cpu0 = CpuStat::now();
    let client = Spawned::start(ccmd, "iperf3 -c", logs)?.wait(timeout);
    let cpu1 = CpuStat::now();
    let link1 = net.link_stats();
    let client = match client {
        Ok(c) => c,
        Err(e) => {
            server.stop();
            return Err(e);
        }
    };
    let server = server.wait(Duration::from_secs(20))?;
    let json: serde_json::Value = serde_json::from_str(&client.stdout)
        .map_err(|e| BenchError::output("iperf3 -J", format!("{e}: {}", proc::tail(&client.stdout, 300))))?;
    if let Some(err) = json["error"].as_str() {
        return Err(BenchError::Failed { what: command, status: client.status.to_string(), detail: err.into() });
    }
    let client = client.check("iperf3 client")?;
    let end = &json["end"];
    let recv = &end["sum_received"];
    let (Some(rb), Some(rs)) = (recv["bytes"].as_u64(), recv["seconds"].as_f64()) else {
        return Err(BenchError::output("iperf3 -J", "no end.sum_received.bytes/seconds"));
    };
    let fwd = match (link0, link1) {
        (Some(a), Some(b)) => {
            (b.forward.cpu_ns + b.back.cpu_ns).saturating_sub(a.forward.cpu_ns + a.back.cpu_ns) as f64 / 1e9
        }
        _ => 0.0,
    };
    Ok((
        IperfResult {
            bytes: rb,
            seconds: rs,
            wall: client.wall.as_secs_f64(),
            client_cpu: client.cpu_seconds(),
            server_cpu: server.cpu_seconds(),
            retransmits: end["sum_sent"]["retransmits"].as_u64().unwrap_or(0),
            machine_busy_s: cpu1.busy_seconds_since(&cpu0),
            forwarder_cpu_s: fwd,
        },
        command,
    ))
}

/// A fio job of the disk anchor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FioJob {
    /// Sequential O_DIRECT read of an existing file.
    Read { file: PathBuf },
    /// Sequential O_DIRECT write of a new file, fsynced at the end.
    Write { file: PathBuf },
    /// Both at once: what a disk-to-disk copy on one device asks of it.
    Copy { from: PathBuf, to: PathBuf },
}

#[derive(Debug, Clone)]
pub struct FioResult {
    pub bytes: u64,
    /// The longest job's runtime.
    pub seconds: f64,
    pub wall: f64,
    pub cpu: f64,
    pub machine_busy_s: f64,
}

/// Runs a fio job of `size` bytes with 1 MiB blocks and queue depth 1,
/// as the reference's disk rows did.
pub fn fio(job: &FioJob, size: u64, logs: &Path, timeout: Duration) -> Result<(FioResult, String)> {
    let mut cmd = Command::new("fio");
    cmd.args(["--output-format=json", "--bs=1M", "--direct=1", "--ioengine=psync"]);
    cmd.arg(format!("--size={size}"));
    let add = |cmd: &mut Command, name: &str, rw: &str, file: &Path| {
        cmd.arg(format!("--name={name}")).arg(format!("--filename={}", file.display())).arg(format!("--rw={rw}"));
        if rw == "write" {
            cmd.arg("--end_fsync=1");
        }
    };
    match job {
        FioJob::Read { file } => add(&mut cmd, "read", "read", file),
        FioJob::Write { file } => add(&mut cmd, "write", "write", file),
        FioJob::Copy { from, to } => {
            add(&mut cmd, "copy-read", "read", from);
            add(&mut cmd, "copy-write", "write", to);
        }
    }
    let command = command_line(&cmd);
    let cpu0 = CpuStat::now();
    let f = proc::run(cmd, "fio", logs, timeout)?;
    let cpu1 = CpuStat::now();
    // fio may print notes before the JSON object.
    let start = f.stdout.find('{').ok_or_else(|| BenchError::output("fio", proc::tail(&f.stdout, 200)))?;
    let json: serde_json::Value =
        serde_json::from_str(&f.stdout[start..]).map_err(|e| BenchError::output("fio JSON", e.to_string()))?;
    let jobs = json["jobs"].as_array().ok_or_else(|| BenchError::output("fio JSON", "no jobs"))?;
    let mut seconds: f64 = 0.0;
    let mut bytes = 0;
    for j in jobs {
        for dir in ["read", "write"] {
            let b = j[dir]["io_bytes"].as_u64().unwrap_or(0);
            if b > 0 {
                seconds = seconds.max(j[dir]["runtime"].as_f64().unwrap_or(0.0) / 1e3);
                bytes = bytes.max(b);
            }
        }
    }
    if bytes == 0 || seconds <= 0.0 {
        return Err(BenchError::output("fio", "no bytes or runtime in the JSON report"));
    }
    Ok((
        FioResult {
            bytes,
            seconds,
            wall: f.wall.as_secs_f64(),
            cpu: f.cpu_seconds(),
            machine_busy_s: cpu1.busy_seconds_since(&cpu0),
        },
        command,
    ))
}

/// Flushes every dirty page to disk and returns how long that took.
pub fn sync(logs: &Path) -> Result<Duration> {
    let t = Instant::now();
    proc::run(Command::new("sync"), "sync", logs, Duration::from_secs(600))?;
    Ok(t.elapsed())
}

/// Empties the page cache so the next read comes from the disk (as root).
pub fn drop_caches(logs: &Path) -> Result<()> {
    sync(logs)?;
    fs::write("/proc/sys/vm/drop_caches", "3\n")
        .map_err(|e| BenchError::io("writing 3 to /proc/sys/vm/drop_caches (needs root)", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ferry_summary() {
        let out = "note\n{\"bytes\":1073741824,\"seconds\":0.42,\"mb_per_s\":2509.4}\n";
        assert_eq!(ferry_json_bytes(out), Some(1_073_741_824));
        assert_eq!(ferry_json_bytes("garbage"), None);
    }
}
