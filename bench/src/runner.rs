//! Executes scenarios: prepares their data, brings each stage's path and
//! servers up, runs every row of every group once per repetition
//! (interleaved, so slow drift of a shared machine spreads over all rows
//! instead of favouring whichever ran first), and records each run.
//!
//! A failed run is recorded with its error and the server's last log
//! lines, and the suite goes on; only an interrupt or a broken set-up
//! (a server or the link that cannot be brought up) stops it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::data::{self, tree_bytes};
use crate::error::{interrupt, BenchError, Result};
use crate::net::Net;
use crate::proc::{self, command_line};
use crate::record::{GroupInfo, Line, Outcome, Phase, Recorder, RunRecord, ScenarioInfo};
use crate::scenarios::{Action, DataSpec, Dirs, Group, Mode, Scenario, Stage, TuneRun, TuneStep, Variant};
use crate::servers::{Server, ServerKind};
use crate::tools::{self, ClientKind, Dest};

#[derive(Debug, Clone)]
pub struct Settings {
    pub ferry_bin: PathBuf,
    /// The baseline build (`--ferry-old`), for the old-new scenario.
    pub ferry_old: Option<PathBuf>,
    pub dirs: Dirs,
    pub keep_data: bool,
    /// The invocation, as typed.
    pub command: String,
    pub mode: Mode,
}

impl Settings {
    /// The `--ferry-old` binary, which rows of the old build need.
    pub fn old_bin(&self) -> Result<&Path> {
        self.ferry_old.as_deref().ok_or_else(|| {
            BenchError::Precondition("rows of the old build need --ferry-old PATH (the baseline's ferry binary)".into())
        })
    }

    /// The `ferry` binary a client of `kind` runs.
    fn client_bin(&self, kind: ClientKind) -> Result<&Path> {
        match kind {
            ClientKind::FerryOld => self.old_bin(),
            _ => Ok(&self.ferry_bin),
        }
    }
}

/// The stage's path and servers. Fields drop in order: servers stop
/// before the link under them is torn down.
struct Env {
    ferry: Option<Server>,
    ferry_old: Option<Server>,
    globus: Option<Server>,
    net: Net,
    ferry_root: PathBuf,
    rtt_ms: Option<f64>,
    /// The JSON of the tune scenario's `ferry tune` runs ("tune", "grid"),
    /// which later rows read their flags from.
    tuned: std::collections::HashMap<&'static str, serde_json::Value>,
}

impl Env {
    fn up(stage: &Stage, s: &Settings) -> Result<Env> {
        let net = match &stage.wan {
            None => Net::Loopback,
            Some(p) => Net::wan(p.clone())?,
        };
        let rtt_ms = net.connect_rtt_ms()?;
        let mut env = Env {
            ferry: None,
            ferry_old: None,
            globus: None,
            net,
            ferry_root: stage.ferry_root.clone(),
            rtt_ms,
            tuned: Default::default(),
        };
        env.ensure_server(ServerKind::Ferry, s)?;
        env.ensure_server(ServerKind::Globus, s)?;
        let needs_old = stage
            .groups
            .iter()
            .flat_map(|g| &g.variants)
            .any(|v| matches!(v.action, Action::Transfer { server: ServerKind::FerryOld, .. }));
        if needs_old {
            env.ensure_server(ServerKind::FerryOld, s)?;
        }
        Ok(env)
    }

    /// Starts the server of `kind`, or restarts it if it has died.
    fn ensure_server(&mut self, kind: ServerKind, s: &Settings) -> Result<()> {
        let logs = s.dirs.logs();
        let slot = match kind {
            ServerKind::Ferry => &mut self.ferry,
            ServerKind::FerryOld => &mut self.ferry_old,
            ServerKind::Globus => &mut self.globus,
        };
        if let Some(old) = slot.take_if(|srv| !srv.alive()) {
            let log = old.stop();
            eprintln!(
                "ferry-bench: the {kind:?} server had exited; restarting it. Its log ended: {}",
                proc::tail(&log, 400)
            );
        }
        if slot.is_none() {
            *slot = Some(match kind {
                ServerKind::Ferry => Server::start_ferry(&self.net, &s.ferry_bin, &self.ferry_root, &logs)?,
                ServerKind::FerryOld => {
                    let mut srv = Server::start_ferry(&self.net, s.old_bin()?, &self.ferry_root, &logs)?;
                    srv.kind = ServerKind::FerryOld;
                    srv
                }
                ServerKind::Globus => Server::start_globus(&self.net, &logs)?,
            });
        }
        Ok(())
    }

    fn server(&self, kind: ServerKind) -> Option<&Server> {
        match kind {
            ServerKind::Ferry => self.ferry.as_ref(),
            ServerKind::FerryOld => self.ferry_old.as_ref(),
            ServerKind::Globus => self.globus.as_ref(),
        }
    }

    fn down(mut self) -> Result<()> {
        for f in [self.ferry.take(), self.ferry_old.take()].into_iter().flatten() {
            f.stop();
        }
        if let Some(g) = self.globus.take() {
            g.stop();
        }
        self.net.down()
    }
}

/// The `extra` key of a run's server peak resident memory (bytes).
pub const SERVER_PEAK_RSS: &str = "server_peak_rss";

/// Wall-clock limit of one run: generous for the expected rate (a quarter
/// of the link, or 100 MB/s locally; a sixteenth at 1 % loss) plus per-file
/// round trips, so only a hang reaches it.
fn timeout_for(net: &Net, bytes: u64, files: u64) -> Duration {
    let (floor, rtt) = match net {
        Net::Loopback => (100e6, 0.0),
        Net::Wan { path, .. } => {
            let loss_factor = if path.loss >= 0.005 { 0.25 } else { 1.0 };
            (path.rate.bytes_per_second() * 0.25 * loss_factor, 2.0 * path.delay.as_secs_f64())
        }
    };
    Duration::from_secs_f64(60.0 + bytes as f64 / floor + files as f64 * (8.0 * rtt + 0.05))
}

#[derive(Debug)]
pub struct Runner<'a> {
    pub settings: &'a Settings,
    pub recorder: &'a mut Recorder,
}

impl Runner<'_> {
    pub fn run(&mut self, sc: &Scenario) -> Result<()> {
        let s = self.settings;
        let info = ScenarioInfo {
            name: sc.name.into(),
            number: sc.number.into(),
            title: sc.title.clone(),
            description: sc.description.clone(),
            layout: sc.layout,
            plot: sc.plot,
            reps: sc.reps,
            mode: s.mode.name().into(),
            started: crate::record::now_rfc3339(),
            command: s.command.clone(),
        };
        self.recorder.write(&Line::Scenario(info))?;
        eprintln!("\n== {}. {} ({} repetitions)", sc.number, sc.title, sc.reps);
        for d in &sc.data {
            prepare(d)?;
        }
        let result = self.run_stages(sc);
        if !s.keep_data {
            for d in &sc.data {
                let _ = data::remove_path(d.path());
            }
        }
        result
    }

    fn run_stages(&mut self, sc: &Scenario) -> Result<()> {
        let s = self.settings;
        for stage in &sc.stages {
            let mut env = Env::up(stage, s)?;
            eprintln!(
                "-- path: {}{}",
                env.net.describe(),
                env.rtt_ms.map(|r| format!(", connect RTT {r:.2} ms")).unwrap_or_default()
            );
            for g in &stage.groups {
                self.recorder.write(&Line::Group(GroupInfo {
                    scenario: sc.name.into(),
                    id: g.id.clone(),
                    label: g.label.clone(),
                    x: g.x,
                    path: env.net.describe(),
                    rtt_ms: env.rtt_ms,
                    variants: g.variants.iter().map(|v| v.info.clone()).collect(),
                    comparisons: g.comparisons.clone(),
                }))?;
            }
            for rep in 1..=sc.reps {
                for g in &stage.groups {
                    for v in run_order(&g.variants, rep, compares_builds(g)) {
                        interrupt::check()?;
                        if let Action::NotApplicable { reason } = &v.action {
                            if rep == 1 {
                                let mut r = RunRecord::new(sc.name, &g.id, &v.info.id, Phase::Main, rep);
                                r.outcome = Outcome::NotApplicable;
                                r.error = Some(reason.clone());
                                r.command = v.info.label.clone();
                                self.recorder.write(&Line::Run(r))?;
                            }
                            continue;
                        }
                        if rep > 1 && matches!(&v.action, Action::Tune(t) if t.step.once()) {
                            continue;
                        }
                        if matches!(&v.action, Action::Transfer { setup_source: Some(_), .. }) {
                            let r = self.run_one(&mut env, sc, g, v, rep, Phase::Setup)?;
                            progress(sc, g, v, rep, &r);
                            self.recorder.write(&Line::Run(r))?;
                        }
                        let r = self.run_one(&mut env, sc, g, v, rep, Phase::Main)?;
                        progress(sc, g, v, rep, &r);
                        self.recorder.write(&Line::Run(r))?;
                        env.net.check()?;
                    }
                }
            }
            env.down()?;
        }
        Ok(())
    }

    /// One run, always recorded: errors other than an interrupt become a
    /// failed record.
    fn run_one(
        &mut self,
        env: &mut Env,
        sc: &Scenario,
        g: &Group,
        v: &Variant,
        rep: u32,
        phase: Phase,
    ) -> Result<RunRecord> {
        let mut r = RunRecord::new(sc.name, &g.id, &v.info.id, phase, rep);
        match self.measure(env, v, phase, &mut r) {
            Ok(()) => r.outcome = Outcome::Ok,
            Err(BenchError::Interrupted) => return Err(BenchError::Interrupted),
            Err(e) => {
                let mut msg = e.to_string();
                if let Action::Transfer { server, .. } = &v.action {
                    if let Some(srv) = env.server(*server) {
                        msg += &format!(" [server log: {}]", srv.log_tail(300));
                    }
                }
                r.outcome = Outcome::Failed;
                r.error = Some(msg);
            }
        }
        Ok(r)
    }

    fn measure(&mut self, env: &mut Env, v: &Variant, phase: Phase, r: &mut RunRecord) -> Result<()> {
        let s = self.settings;
        let logs = s.dirs.logs();
        match &v.action {
            Action::NotApplicable { .. } => Ok(()),
            Action::Transfer { client, server, flags, source, dest, bytes, files, setup_source } => {
                let (source, dest, bytes, files) = match phase {
                    Phase::Main => (source.clone(), dest.clone(), *bytes, *files),
                    Phase::Setup => {
                        let src =
                            setup_source.clone().ok_or_else(|| BenchError::Precondition("no set-up set".into()))?;
                        let d = match dest {
                            Dest::Dir(p) => Dest::Dir(PathBuf::from(format!("{}-setup", p.display()))),
                            other => other.clone(),
                        };
                        (src, d, 1, 1)
                    }
                };
                r.bytes = bytes;
                r.files = files;
                if let Some(p) = dest.path() {
                    data::remove_path(p)?;
                }
                if let Dest::File(p) = &dest {
                    if p.starts_with(s.dirs.shm_out()) {
                        data::warm_tmpfs(&s.dirs.shm_out(), bytes)?;
                    }
                }
                if v.cold {
                    tools::drop_caches(&logs)?;
                }
                env.ensure_server(*server, s)?;
                let srv = env.server(*server).ok_or_else(|| BenchError::Precondition("server not running".into()))?;
                let bin = s.client_bin(*client)?;
                let cmd = tools::transfer_command(&env.net, bin, *client, flags, srv, &source, &dest)?;
                r.command = command_line(&cmd);
                r.server_command = Some(srv.command.clone());
                let what = r.command.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
                let timed =
                    tools::timed_client(cmd, &what, &env.net, &[srv], &logs, timeout_for(&env.net, bytes, files))?;
                let wall = timed.finished.wall.as_secs_f64();
                r.seconds = Some(wall);
                r.wall_seconds = Some(wall);
                if v.sync_after {
                    r.seconds_until_sync = Some(wall + tools::sync(&logs)?.as_secs_f64());
                }
                r.client_cpu_s = Some(timed.finished.cpu_seconds());
                r.server_cpu_s = timed.server_cpu;
                r.background_cores = Some(timed.background_cores());
                if matches!(env.net, Net::Wan { .. }) {
                    r.extra.insert("link_lost_packets".into(), timed.link_lost.into());
                    r.extra.insert("link_queue_drops".into(), timed.link_queue_drops.into());
                    r.extra.insert("forwarder_cpu_s".into(), timed.forwarder_cpu_s.into());
                }
                let verified = verify(*client, &dest, bytes, files, &timed.finished.stdout);
                if let Some(p) = dest.path() {
                    data::remove_path(p)?;
                }
                verified
            }
            Action::OwnFerryServer(o) => {
                r.bytes = o.bytes;
                r.files = 1;
                if let Some(p) = o.dest.path() {
                    data::remove_path(p)?;
                }
                if v.cold {
                    tools::drop_caches(&logs)?;
                }
                let bin = if o.old { s.old_bin()? } else { &s.ferry_bin };
                let srv = Server::start_ferry_with(&env.net, bin, &env.ferry_root, &logs, &o.serve_flags, &o.env)?;
                let result = (|| -> Result<()> {
                    let mut cmd =
                        tools::transfer_command(&env.net, bin, ClientKind::Ferry, &o.flags, &srv, &o.source, &o.dest)?;
                    cmd.envs(o.env.iter().map(|(k, v)| (k, v)));
                    r.command = crate::servers::env_prefix(&o.env) + &command_line(&cmd);
                    r.server_command = Some(srv.command.clone());
                    let timed = tools::timed_client(
                        cmd,
                        "ferry cp",
                        &env.net,
                        &[&srv],
                        &logs,
                        timeout_for(&env.net, o.bytes, 1),
                    )?;
                    let wall = timed.finished.wall.as_secs_f64();
                    r.seconds = Some(wall);
                    r.wall_seconds = Some(wall);
                    if v.sync_after {
                        r.seconds_until_sync = Some(wall + tools::sync(&logs)?.as_secs_f64());
                    }
                    r.client_cpu_s = Some(timed.finished.cpu_seconds());
                    r.server_cpu_s = timed.server_cpu;
                    r.background_cores = Some(timed.background_cores());
                    if let Some(peak) = srv.pid().and_then(proc::peak_rss) {
                        r.extra.insert(SERVER_PEAK_RSS.into(), peak.into());
                    }
                    verify(ClientKind::Ferry, &o.dest, o.bytes, 1, &timed.finished.stdout)
                })();
                let log = srv.log_tail(300);
                srv.stop();
                if let Some(p) = o.dest.path() {
                    data::remove_path(p)?;
                }
                result.map_err(|e| match e {
                    BenchError::Interrupted => e,
                    other => BenchError::output("ferry cp", format!("{other} [server log: {log}]")),
                })
            }
            Action::Tune(t) => tune_step(env, s, t, r),
            Action::Iperf { streams, bytes } => {
                let (res, command) =
                    tools::iperf3(&env.net, *streams, *bytes, &logs, timeout_for(&env.net, *bytes, 1))?;
                r.command = command;
                r.bytes = res.bytes;
                r.files = 1;
                r.seconds = Some(res.seconds);
                r.wall_seconds = Some(res.wall);
                r.client_cpu_s = Some(res.client_cpu);
                r.server_cpu_s = Some(res.server_cpu);
                let ours = res.client_cpu + res.server_cpu + res.forwarder_cpu_s;
                r.background_cores = Some(((res.machine_busy_s - ours) / res.wall.max(1e-6)).max(0.0));
                r.extra.insert("retransmits".into(), res.retransmits.into());
                if res.bytes < *bytes {
                    return Err(BenchError::output("iperf3", format!("received {} of {} bytes", res.bytes, bytes)));
                }
                Ok(())
            }
            Action::Fio { job, size } => {
                let written = match job {
                    tools::FioJob::Read { .. } => None,
                    tools::FioJob::Write { file } => Some(file.clone()),
                    tools::FioJob::Copy { to, .. } => Some(to.clone()),
                };
                if let Some(w) = &written {
                    data::remove_path(w)?;
                }
                if v.cold {
                    tools::drop_caches(&logs)?;
                }
                let result = tools::fio(job, *size, &logs, Duration::from_secs_f64(120.0 + *size as f64 / 50e6));
                if let Some(w) = &written {
                    data::remove_path(w)?;
                }
                let (res, command) = result?;
                r.command = command;
                r.bytes = res.bytes;
                r.files = 1;
                r.seconds = Some(res.seconds);
                // fio's runtime includes the final fsync of its write jobs
                // (`--end_fsync=1`); a read leaves nothing to flush.
                r.seconds_until_sync = Some(res.seconds);
                r.wall_seconds = Some(res.wall);
                r.client_cpu_s = Some(res.cpu);
                r.background_cores = Some(((res.machine_busy_s - res.cpu) / res.wall.max(1e-6)).max(0.0));
                Ok(())
            }
            Action::Cp { src, dst, bytes } => {
                data::remove_path(dst)?;
                if v.cold {
                    tools::drop_caches(&logs)?;
                }
                let mut cmd = Command::new("cp");
                cmd.arg(src).arg(dst);
                r.command = command_line(&cmd) + " && sync";
                r.bytes = *bytes;
                r.files = 1;
                let cpu0 = tools::CpuStat::now();
                let f = proc::run(cmd, "cp", &logs, Duration::from_secs_f64(120.0 + *bytes as f64 / 50e6));
                let cpu1 = tools::CpuStat::now();
                let f = match f {
                    Ok(f) => f,
                    Err(e) => {
                        let _ = data::remove_path(dst);
                        return Err(e);
                    }
                };
                let wall = f.wall.as_secs_f64();
                r.seconds = Some(wall);
                r.wall_seconds = Some(wall);
                r.seconds_until_sync = Some(wall + tools::sync(&logs)?.as_secs_f64());
                r.client_cpu_s = Some(f.cpu_seconds());
                r.background_cores =
                    Some(((cpu1.busy_seconds_since(&cpu0) - f.cpu_seconds()) / wall.max(1e-6)).max(0.0));
                let size = fs::metadata(dst).map(|m| m.len()).unwrap_or(0);
                data::remove_path(dst)?;
                if size != *bytes {
                    return Err(BenchError::output("cp", format!("destination has {size} bytes, expected {bytes}")));
                }
                Ok(())
            }
        }
    }
}

/// One step of the tune scenario against a `ferry serve --memory-paths`
/// started for it: probe, tune and grid record their JSON in `extra.json`
/// (the report reads everything from there); the copies are timed like
/// any transfer.
fn tune_step(env: &mut Env, s: &Settings, t: &TuneRun, r: &mut RunRecord) -> Result<()> {
    let logs = s.dirs.logs();
    let serve = vec!["--memory-paths".to_string(), "--memory-zero-size".into(), t.bytes.to_string()];
    let srv = Server::start_ferry_with(&env.net, &s.ferry_bin, &env.ferry_root, &logs, &serve, &[])?;
    let result = (|| -> Result<()> {
        let base = format!("ftp://{}:{}", srv.ip, srv.port);
        let zero = format!("{base}/dev/zero");
        let mut cmd = env.net.command(ferry_wan::Side::Client, &s.ferry_bin.to_string_lossy());
        // Trials and copies must not read or write anyone's client config.
        cmd.env("FERRY_CONFIG", "/dev/null");
        let (bytes, secs) = (t.bytes.to_string(), t.trial_seconds.to_string());
        let flags_of = |key: &str| -> Result<Vec<String>> {
            let j = env.tuned.get(key).ok_or_else(|| {
                BenchError::Precondition(format!("no result of the {key} step to take settings from (it failed)"))
            })?;
            Ok(j["flags"].as_str().unwrap_or_default().split_whitespace().map(String::from).collect())
        };
        let timeout = match t.step {
            TuneStep::Probe => {
                cmd.args(["probe", &format!("{base}/"), "--json", "--bytes", &bytes]);
                Duration::from_secs(180)
            }
            TuneStep::Tune => {
                cmd.args(["tune", &zero, "--bytes", &bytes, "--seconds", &secs, "--json"]);
                Duration::from_secs(1800)
            }
            TuneStep::Grid { repeats } => {
                let tune = env.tuned.get("tune").ok_or_else(|| {
                    BenchError::Precondition("no result of the tune step to take its space from (it failed)".into())
                })?;
                let space = &tune["space"];
                let list = |k: &str| -> Vec<String> {
                    space[k]
                        .as_array()
                        .map(|a| a.iter().map(|v| if v.is_null() { "auto".into() } else { v.to_string() }).collect())
                        .unwrap_or_default()
                };
                let (streams, bufs) = (list("streams"), list("tcp_buffers"));
                if streams.is_empty() || bufs.is_empty() {
                    return Err(BenchError::output(
                        "ferry tune --json",
                        "no space (streams, tcp_buffers) in its output",
                    ));
                }
                let points = (streams.len() * bufs.len()) as u64 * u64::from(repeats);
                cmd.args(["tune", &zero, "--exhaustive", "--repeats", &repeats.to_string()]);
                cmd.args(["--streams", &streams.join(","), "--tcp-bs", &bufs.join(",")]);
                cmd.args(["--bytes", &bytes, "--seconds", &secs, "--json"]);
                Duration::from_secs(120 + points * (u64::from(t.trial_seconds) + 5))
            }
            TuneStep::Copy { grid } => {
                let flags = flags_of(if grid { "grid" } else { "tune" })?;
                cmd.args(["cp", "--json", "--no-resume", "--retries", "0"]).args(&flags).arg(&zero).arg("/dev/null");
                timeout_for(&env.net, t.bytes, 1)
            }
        };
        r.command = format!("FERRY_CONFIG=/dev/null {}", command_line(&cmd));
        r.server_command = Some(srv.command.clone());
        let timed = tools::timed_client(cmd, "ferry", &env.net, &[&srv], &logs, timeout)?;
        let wall = timed.finished.wall.as_secs_f64();
        r.wall_seconds = Some(wall);
        r.client_cpu_s = Some(timed.finished.cpu_seconds());
        r.server_cpu_s = timed.server_cpu;
        r.background_cores = Some(timed.background_cores());
        if let TuneStep::Copy { .. } = t.step {
            r.bytes = t.bytes;
            r.files = 1;
            r.seconds = Some(wall);
            return verify(ClientKind::Ferry, &Dest::DevNull, t.bytes, 1, &timed.finished.stdout);
        }
        // Probe, tune, grid: their output is the result.
        let json: serde_json::Value = serde_json::from_str(&timed.finished.stdout)
            .map_err(|e| BenchError::output("ferry --json", format!("not JSON: {e}")))?;
        match t.step {
            TuneStep::Tune => {
                env.tuned.insert("tune", json.clone());
            }
            TuneStep::Grid { .. } => {
                env.tuned.insert("grid", json.clone());
            }
            _ => {}
        }
        r.extra.insert(TUNE_JSON.into(), json);
        Ok(())
    })();
    let log = srv.log_tail(300);
    srv.stop();
    result.map_err(|e| match e {
        BenchError::Interrupted => e,
        other => BenchError::output("tune step", format!("{other} [server log: {log}]")),
    })
}

/// The `extra` key holding a tune-scenario row's JSON output.
pub const TUNE_JSON: &str = "json";

/// Whether a group holds rows of the old build (`--ferry-old`) beside the
/// new one's.
fn compares_builds(g: &Group) -> bool {
    g.variants.iter().any(|v| matches!(v.action, Action::Transfer { client: ClientKind::FerryOld, .. }))
}

/// The rows of a group in the order repetition `rep` runs them: as listed,
/// or, when `alternate` (a group comparing two builds), reversed in every even repetition, so
/// that neither of two builds compared row against row always runs first
/// (right after the other's cache-warming or right after a pause).
fn run_order(variants: &[Variant], rep: u32, alternate: bool) -> Vec<&Variant> {
    if alternate && rep % 2 == 0 {
        variants.iter().rev().collect()
    } else {
        variants.iter().collect()
    }
}

/// Checks that the transfer delivered what it should have.
fn verify(client: ClientKind, dest: &Dest, bytes: u64, files: u64, stdout: &str) -> Result<()> {
    match dest {
        Dest::DevNull => {
            if client.is_ferry() {
                match tools::ferry_json_bytes(stdout) {
                    Some(b) if b == bytes => {}
                    other => {
                        return Err(BenchError::output(
                            "ferry cp --json",
                            format!("reported {other:?} bytes, expected {bytes}"),
                        ))
                    }
                }
            }
            // globus-url-copy prints nothing; its exit status was checked.
            Ok(())
        }
        Dest::File(p) | Dest::Upload(p) => {
            let size = fs::metadata(p).map(|m| m.len()).unwrap_or(0);
            if size == bytes {
                Ok(())
            } else {
                Err(BenchError::output("transfer", format!("{} has {size} bytes, expected {bytes}", p.display())))
            }
        }
        Dest::Dir(p) => {
            let (b, f) = tree_bytes(p).unwrap_or((0, 0));
            if (b, f) == (bytes, files) {
                Ok(())
            } else {
                Err(BenchError::output(
                    "transfer",
                    format!("{} holds {b} bytes in {f} files, expected {bytes} in {files}", p.display()),
                ))
            }
        }
    }
}

fn prepare(d: &DataSpec) -> Result<()> {
    let t = std::time::Instant::now();
    let created = match d {
        DataSpec::File { path, size } => data::ensure_file(path, *size, 0xFE44_7B3C ^ size)?,
        DataSpec::Tree(tree) => {
            let existed = tree.dir.exists();
            tree.ensure(0xB3C4)?;
            !existed
        }
    };
    if created {
        eprintln!(
            "   data: wrote {} ({:.2} GB) in {:.1} s",
            d.path().display(),
            d.bytes() as f64 / 1e9,
            t.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

fn progress(sc: &Scenario, g: &Group, v: &Variant, rep: u32, r: &RunRecord) {
    let phase = if r.phase == Phase::Setup { " (set-up)" } else { "" };
    let result = match r.outcome {
        Outcome::Ok if r.phase == Phase::Setup => format!("{:>20.3} s", r.seconds.unwrap_or(0.0)),
        // A search step of the tune scenario: no bytes of its own, its wall time.
        Outcome::Ok if r.seconds.is_none() => format!("{:>20.1} s (wall)", r.wall_seconds.unwrap_or(0.0)),
        Outcome::Ok => format!(
            "{:>8.1} MB/s {:>7.2} s{}  cpu c/s {:.2}/{}",
            r.rate().unwrap_or(0.0),
            r.seconds.unwrap_or(0.0),
            r.seconds_until_sync.map(|u| format!(" (sync {u:.2} s)")).unwrap_or_default(),
            r.client_cpu_s.unwrap_or(0.0),
            r.server_cpu_s.map_or("-".into(), |c| format!("{c:.2}")),
        ),
        Outcome::Failed => format!("FAILED: {}", proc::tail(r.error.as_deref().unwrap_or(""), 300)),
        Outcome::NotApplicable => "not applicable".into(),
    };
    eprintln!("   [{} {rep}/{}] {:<22} {:<42}{phase} {result}", sc.name, sc.reps, g.label, v.info.label);
}

/// Directories the harness writes into.
pub fn make_dirs(d: &Dirs) -> Result<()> {
    for p in [d.shm_data(), d.shm_out(), d.disk_data(), d.out(), d.logs()] {
        data::make_dir(&p)?;
    }
    Ok(())
}

/// Removes everything the harness created under its scratch directories
/// (unless data is kept for the next invocation).
pub fn clean_dirs(d: &Dirs, keep_data: bool) {
    let _ = data::remove_path(&d.out());
    let _ = data::remove_path(&d.shm_out());
    let _ = data::remove_path(&d.logs());
    if !keep_data {
        let _ = data::remove_path(&d.shm);
        let _ = data::remove_path(&d.disk);
    }
}

/// Whether `p` is usable scratch: exists or can be made, and is writable.
pub fn check_writable(p: &Path) -> Result<()> {
    data::make_dir(p)?;
    let probe = p.join(".ferry-bench-probe");
    fs::write(&probe, b"x").map_err(|e| BenchError::io(format!("writing in {}", p.display()), e))?;
    let _ = fs::remove_file(probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_generous_but_bounded() {
        let t = timeout_for(&Net::Loopback, 4 << 30, 1);
        assert!(t > Duration::from_secs(60) && t < Duration::from_secs(120), "{t:?}");
    }

    #[test]
    fn builds_alternate_which_runs_first() {
        let plan = crate::scenarios::Plan::new(Mode::Quick);
        let dirs = Dirs { shm: "/dev/shm/fb".into(), disk: "/var/tmp/fb".into() };
        let sc = crate::scenarios::all(&plan, &dirs, "x", &["old-new".into(), "mem".into()]);
        let ids = |g: &Group, rep| {
            run_order(&g.variants, rep, compares_builds(g)).iter().map(|v| v.info.id.clone()).collect::<Vec<_>>()
        };
        let mem = sc.iter().find(|s| s.name == "mem").unwrap();
        let g = &mem.stages[0].groups[1];
        assert!(!compares_builds(g));
        assert_eq!(ids(g, 1), ids(g, 2));
        let on = sc.iter().find(|s| s.name == "old-new").unwrap();
        let g = &on.stages[0].groups[0];
        assert!(compares_builds(g));
        assert_eq!(ids(g, 1), ["new", "old", "guc"]);
        assert_eq!(ids(g, 2), ["guc", "old", "new"]);
        assert_eq!(ids(g, 3), ids(g, 1));
    }
}
