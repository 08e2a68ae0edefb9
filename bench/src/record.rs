//! The raw data: one JSON object per line in `runs.jsonl`.
//!
//! Everything the report shows is derived from these lines alone, so tables
//! and plots can be regenerated (`--report-only`) after the report code
//! changes, and nothing measured is lost when a run is interrupted: each
//! line is written and flushed the moment it exists. A scenario's lines
//! are a `scenario` header, a `group` line per group (written when the
//! group's path is up, with its measured RTT), then its `run` lines.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

/// What a row of a table stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Ferry's client against Ferry's server.
    Ferry,
    /// The same, built from an older commit (`--ferry-old`): the baseline
    /// a change must not be slower than.
    FerryOld,
    /// globus-url-copy against globus-gridftp-server.
    Globus,
    /// One side Ferry, the other Globus: isolates client or server.
    Cross,
    /// iperf3: the network's limit.
    Network,
    /// fio or cp: the disk's limit.
    Disk,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Ferry => "Ferry",
            Role::FerryOld => "Ferry (old)",
            Role::Globus => "Globus",
            Role::Cross => "cross",
            Role::Network => "iperf3",
            Role::Disk => "disk",
        }
    }
}

/// One row of a group: a tool with its flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantInfo {
    /// Stable across groups (the series of a plot).
    pub id: String,
    pub label: String,
    pub role: Role,
    /// The legend name where one series spans groups whose labels differ
    /// (e.g. "ferry cp -p N" across stream counts); empty: the label.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub series: String,
    /// Why it was not run, for anchors that do not apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
}

/// Which figure a comparison divides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Bytes over the transfer's seconds.
    Rate,
    /// Bytes over the seconds until `sync` returned.
    RateUntilSync,
}

/// "Ferry ÷ anchor" for one pair of rows of a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub ferry: String,
    pub anchor: String,
    pub metric: Metric,
    /// The anchor's group when it is not the Ferry row's own (the disk's
    /// limits are measured once, beside every stream count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_group: Option<String>,
}

impl Comparison {
    pub fn rate(ferry: &str, anchor: &str) -> Self {
        Comparison { ferry: ferry.into(), anchor: anchor.into(), metric: Metric::Rate, anchor_group: None }
    }

    pub fn until_sync(ferry: &str, anchor: &str) -> Self {
        Comparison { ferry: ferry.into(), anchor: anchor.into(), metric: Metric::RateUntilSync, anchor_group: None }
    }

    pub fn in_group(mut self, group: &str) -> Self {
        self.anchor_group = Some(group.into());
        self
    }
}

/// Which extra columns a scenario's table has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    Throughput,
    /// Disk-to-disk: also the time until the destination was on disk.
    UntilSync,
    /// Many files: also set-up time (a one-file copy) and per-file time.
    SetupSplit,
    /// Data-path variants: until sync, the server's peak resident memory,
    /// and the wall time in round trips of the path.
    DataPath,
    /// `ferry tune` against the grid: the search's figures from the rows'
    /// JSON (`extra.json`), beside the head-to-head copies.
    Tune,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlotKind {
    /// Grouped bars of throughput.
    Bars,
    /// Throughput against one-way delay (the papers' figures).
    VsDelay,
}

/// Written once per invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub started: String,
    pub command: String,
    pub mode: String,
    pub machine: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioInfo {
    pub name: String,
    /// As in the list ("1", "4a"), for ordering and headings.
    pub number: String,
    pub title: String,
    /// Markdown: data, path, what is timed, how CPU is counted.
    pub description: String,
    pub layout: Layout,
    pub plot: PlotKind,
    pub reps: u32,
    pub mode: String,
    pub started: String,
    pub command: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupInfo {
    pub scenario: String,
    pub id: String,
    pub label: String,
    /// Position on a plot's x axis (the one-way delay in ms for sweeps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<f64>,
    /// The network path, e.g. "loopback" or "1 Gbit/s, 30 ms one way".
    pub path: String,
    /// Median TCP connect time across the path, measured before the runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    pub variants: Vec<VariantInfo>,
    pub comparisons: Vec<Comparison>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The measured transfer.
    #[default]
    Main,
    /// The same command on a one-file, one-byte set: its fixed cost.
    Setup,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Failed,
    NotApplicable,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub scenario: String,
    pub group: String,
    pub variant: String,
    #[serde(default)]
    pub phase: Phase,
    pub rep: u32,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The exact client command (and server command where one was started).
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_command: Option<String>,
    pub bytes: u64,
    pub files: u64,
    /// The seconds the rate is computed from: wall clock of the client
    /// process for transfers; the tool's own figure for iperf3 and fio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_until_sync: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_s: Option<f64>,
    /// CPU in use on the machine during the run by anything other than the
    /// measured processes and the link emulator, in cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_cores: Option<f64>,
    pub at: String,
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl RunRecord {
    /// A record with identity and command filled in, to be completed.
    pub fn new(scenario: &str, group: &str, variant: &str, phase: Phase, rep: u32) -> Self {
        RunRecord {
            scenario: scenario.into(),
            group: group.into(),
            variant: variant.into(),
            phase,
            rep,
            outcome: Outcome::Failed,
            error: None,
            command: String::new(),
            server_command: None,
            bytes: 0,
            files: 0,
            seconds: None,
            wall_seconds: None,
            seconds_until_sync: None,
            client_cpu_s: None,
            server_cpu_s: None,
            background_cores: None,
            at: now_rfc3339(),
            extra: serde_json::Map::new(),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }

    /// MB/s (10^6 bytes per second), as in the Globus reference.
    pub fn rate(&self) -> Option<f64> {
        rate(self.bytes, self.seconds?)
    }

    pub fn rate_until_sync(&self) -> Option<f64> {
        rate(self.bytes, self.seconds_until_sync?)
    }

    pub fn metric(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::Rate => self.rate(),
            Metric::RateUntilSync => self.rate_until_sync(),
        }
    }

    /// CPU seconds per 10^9 bytes moved.
    pub fn per_gb(&self, cpu: Option<f64>) -> Option<f64> {
        if self.bytes == 0 {
            return None;
        }
        cpu.map(|c| c / (self.bytes as f64 / 1e9))
    }
}

fn rate(bytes: u64, seconds: f64) -> Option<f64> {
    (seconds > 0.0).then(|| bytes as f64 / seconds / 1e6)
}

pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| "unknown".into())
}

/// One line of `runs.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Line {
    Meta(Meta),
    Scenario(ScenarioInfo),
    Group(GroupInfo),
    Run(RunRecord),
}

impl Line {
    /// The scenario a line belongs to (`None` for the invocation's meta).
    pub fn scenario(&self) -> Option<&str> {
        match self {
            Line::Meta(_) => None,
            Line::Scenario(s) => Some(&s.name),
            Line::Group(g) => Some(&g.scenario),
            Line::Run(r) => Some(&r.scenario),
        }
    }
}

/// Reads every line of a `runs.jsonl`; a line that does not parse is an
/// error naming its number (the file is data we must not silently skip).
pub fn read_lines(path: &Path) -> Result<Vec<Line>> {
    let f = File::open(path).map_err(|e| BenchError::io(format!("opening {}", path.display()), e))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| BenchError::io(format!("reading {}", path.display()), e))?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line = serde_json::from_str(&line)
            .map_err(|e| BenchError::output(format!("{} line {}", path.display(), i + 1), e.to_string()))?;
        out.push(parsed);
    }
    Ok(out)
}

/// Appends lines to `runs.jsonl`, flushing each.
#[derive(Debug)]
pub struct Recorder {
    path: PathBuf,
    file: File,
}

impl Recorder {
    /// Opens `path` for a run of `scenarios`: lines of those scenarios from
    /// an earlier invocation are dropped (they are being measured again),
    /// other scenarios' lines are kept, and the old meta line is replaced.
    pub fn open(path: &Path, scenarios: &[&str], meta: Meta) -> Result<Recorder> {
        let kept: Vec<Line> = if path.exists() {
            read_lines(path)?.into_iter().filter(|l| l.scenario().is_some_and(|s| !scenarios.contains(&s))).collect()
        } else {
            Vec::new()
        };
        let tmp = path.with_extension("jsonl.tmp");
        {
            let mut f = File::create(&tmp).map_err(|e| BenchError::io(format!("creating {}", tmp.display()), e))?;
            for l in std::iter::once(Line::Meta(meta)).chain(kept) {
                writeln!(f, "{}", serde_json::to_string(&l).expect("records serialise"))
                    .map_err(|e| BenchError::io(format!("writing {}", tmp.display()), e))?;
            }
        }
        fs::rename(&tmp, path).map_err(|e| BenchError::io(format!("replacing {}", path.display()), e))?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| BenchError::io(format!("opening {}", path.display()), e))?;
        Ok(Recorder { path: path.to_path_buf(), file })
    }

    pub fn write(&mut self, line: &Line) -> Result<()> {
        let text = serde_json::to_string(line).expect("records serialise");
        writeln!(self.file, "{text}")
            .and_then(|_| self.file.flush())
            .map_err(|e| BenchError::io(format!("writing {}", self.path.display()), e))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(variant: &str, bytes: u64, secs: f64) -> RunRecord {
        let mut r = RunRecord::new("mem", "p1", variant, Phase::Main, 1);
        r.outcome = Outcome::Ok;
        r.bytes = bytes;
        r.seconds = Some(secs);
        r
    }

    #[test]
    fn rates_and_cpu_per_gb() {
        let mut r = run("ferry", 4_000_000_000, 2.0);
        assert_eq!(r.rate(), Some(2000.0));
        assert_eq!(r.rate_until_sync(), None);
        r.seconds_until_sync = Some(4.0);
        assert_eq!(r.metric(Metric::RateUntilSync), Some(1000.0));
        assert_eq!(r.per_gb(Some(2.0)), Some(0.5));
        assert_eq!(r.per_gb(None), None);
    }

    #[test]
    fn lines_round_trip_and_recorder_replaces_rerun_scenarios() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let meta = Meta { started: "t".into(), command: "c".into(), mode: "quick".into(), machine: vec![] };
        let mut rec = Recorder::open(&path, &["mem", "disk"], meta.clone()).unwrap();
        let mut a = run("ferry", 1, 1.0);
        rec.write(&Line::Run(a.clone())).unwrap();
        a.scenario = "disk".into();
        rec.write(&Line::Run(a.clone())).unwrap();
        drop(rec);
        // Re-running only "mem" keeps disk's line and drops mem's.
        let rec = Recorder::open(&path, &["mem"], meta).unwrap();
        drop(rec);
        let lines = read_lines(&path).unwrap();
        assert_eq!(lines.len(), 2);
        assert!(matches!(&lines[0], Line::Meta(_)));
        assert_eq!(lines[1], Line::Run(a));
    }
}
