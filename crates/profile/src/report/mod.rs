//! The profile of one run and its three renderings: `report.json` (every
//! sample, for programs), `report.html` (one self-contained page with
//! plots, for people), and a terminal summary (the paper's tables).
//!
//! A [`Profile`] is plain data the caller assembles from parts that come
//! from different places: the client's own [`HostProfile`], the server's
//! (received as JSON over the control channel), the transfer's progress
//! (from the client's progress callback), and optionally the results of the
//! memory/disk variants and of a tuning sweep. Everything derived — the
//! summary tables, the bottleneck statement, the hints — is computed from
//! that data by [`Profile::analyze`], and written next to it in the JSON so
//! a reader of the file does not have to recompute it.

mod analysis;
mod html;
mod notes;
mod plots;
mod text;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};

pub use analysis::{
    Analysis, CoreSummary, HostSummary, InterfaceSummary, Stat, StreamSummary, TableNote, TransferSummary,
};

use crate::bottleneck::ThroughputComparison;
use crate::error::{ProfileError, Result};
use crate::sampler::{unix_ms, HostProfile};
use crate::tune::TuneResult;

/// Identifies the format of `report.json`; bumped when a field changes meaning.
pub const SCHEMA: &str = "ferry-profile/2";

/// Which end of a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn label(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// How the transfer was run, as the caller describes it. Every field is
/// optional because a profile can also wrap a workload that is not a Ferry
/// transfer (`ferry profile -- cmd`), or a Globus server that reports nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransferSettings {
    pub source: Option<String>,
    pub destination: Option<String>,
    /// Which side reads the source data: `server` for a download, `client`
    /// for an upload. Decides how the bottleneck statement names the disks.
    pub reader: Option<Side>,
    pub mode: Option<String>,
    pub transport: Option<String>,
    pub parallel_streams: Option<u32>,
    pub tcp_buffer_bytes: Option<u64>,
    pub block_size_bytes: Option<u64>,
    pub staging_bytes: Option<u64>,
    pub files: Option<u64>,
    pub bytes: Option<u64>,
    /// Anything else worth recording, as name → value.
    pub extra: BTreeMap<String, String>,
}

/// Run metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// The program and version that wrote the profile.
    pub tool: String,
    pub created_unix_ms: u64,
    /// The command line that was profiled.
    pub command: String,
    pub settings: TransferSettings,
}

/// Cumulative bytes moved by a transfer, `t` seconds after `start_unix_ms`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgressSample {
    pub t: f64,
    pub bytes: u64,
}

/// The progress of one transfer (or of one variant in `--compare-memory`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransferSeries {
    pub label: String,
    pub start_unix_ms: u64,
    /// The size the transfer was expected to reach, if known.
    pub expected_bytes: Option<u64>,
    /// The sending end read a file (not generated data); `null` = unknown.
    #[serde(default)]
    pub reads_file: Option<bool>,
    /// The receiving end wrote a file (not a discarding sink); `null` = unknown.
    #[serde(default)]
    pub writes_file: Option<bool>,
    pub samples: Vec<ProgressSample>,
}

/// Collects progress from a transfer's progress callback. Cheap to clone
/// and callable from any thread. Calls closer together than 20 ms replace
/// the previous sample instead of adding one, so a callback per block does
/// not produce a sample per block.
#[derive(Debug, Clone)]
pub struct ProgressRecorder {
    inner: Arc<Mutex<(Instant, TransferSeries)>>,
}

impl ProgressRecorder {
    /// Starts the clock now, at zero bytes.
    pub fn new(label: impl Into<String>, expected_bytes: Option<u64>) -> ProgressRecorder {
        let series = TransferSeries {
            label: label.into(),
            start_unix_ms: unix_ms(SystemTime::now()),
            expected_bytes,
            reads_file: None,
            writes_file: None,
            samples: vec![ProgressSample { t: 0.0, bytes: 0 }],
        };
        ProgressRecorder { inner: Arc::new(Mutex::new((Instant::now(), series))) }
    }

    /// Says whether the sending end reads a file and the receiving end
    /// writes one (the verdict only blames a disk that was used).
    pub fn with_files(self, reads_file: bool, writes_file: bool) -> ProgressRecorder {
        {
            let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            g.1.reads_file = Some(reads_file);
            g.1.writes_file = Some(writes_file);
        }
        self
    }

    /// Records the cumulative number of bytes moved so far.
    pub fn record(&self, bytes_so_far: u64) {
        let t = self.inner.lock().unwrap_or_else(|e| e.into_inner()).0.elapsed().as_secs_f64();
        self.record_at(t, bytes_so_far);
    }

    /// Records `bytes_so_far` at `t` seconds after the start (for `record`,
    /// and for tests that need no clock).
    fn record_at(&self, t: f64, bytes_so_far: u64) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let samples = &mut g.1.samples;
        let sample = ProgressSample { t, bytes: bytes_so_far };
        let n = samples.len();
        // The last sample is provisional while it is within 20 ms of the one
        // before it: later calls move it forward instead of adding samples.
        // (The first sample, t = 0, is the fixed anchor of the series.)
        if n >= 2 && t - samples[n - 2].t < 0.02 {
            samples[n - 1] = sample;
        } else {
            samples.push(sample);
        }
    }

    /// The series so far (recording may continue).
    pub fn snapshot(&self) -> TransferSeries {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).1.clone()
    }
}

/// Everything known about one profiled run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub meta: RunMeta,
    pub client: Option<HostProfile>,
    pub server: Option<HostProfile>,
    pub transfers: Vec<TransferSeries>,
    /// Throughput of the memory/disk variants (`--compare-memory`).
    pub comparison: Option<ThroughputComparison>,
    /// The sweep, when the profile comes from `ferry tune`.
    pub tuning: Option<TuneResult>,
}

/// The content of `report.json`: the profile and its analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportDocument {
    pub schema: String,
    pub profile: Profile,
    pub analysis: Analysis,
}

impl ReportDocument {
    /// Reads a `report.json` written by [`Profile::write_report`].
    pub fn read(path: &Path) -> Result<ReportDocument> {
        let text =
            std::fs::read_to_string(path).map_err(|e| ProfileError::io(format!("reading {}", path.display()), e))?;
        Ok(serde_json::from_str(&text)?)
    }
}

/// Where [`Profile::write_report`] put its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportFiles {
    pub json: PathBuf,
    pub html: PathBuf,
}

impl Profile {
    /// An empty profile of `command`, stamped now.
    pub fn new(command: impl Into<String>) -> Profile {
        Profile {
            meta: RunMeta {
                tool: format!("ferry-profile {}", env!("CARGO_PKG_VERSION")),
                created_unix_ms: unix_ms(SystemTime::now()),
                command: command.into(),
                settings: TransferSettings::default(),
            },
            ..Profile::default()
        }
    }

    /// The side's host profile, if present.
    pub fn host(&self, side: Side) -> Option<&HostProfile> {
        match side {
            Side::Client => self.client.as_ref(),
            Side::Server => self.server.as_ref(),
        }
    }

    /// Summary tables, bottleneck statement and hints.
    pub fn analyze(&self) -> Analysis {
        analysis::analyze(self)
    }

    /// The `report.json` document.
    pub fn to_document(&self) -> ReportDocument {
        ReportDocument { schema: SCHEMA.to_string(), profile: self.clone(), analysis: self.analyze() }
    }

    /// `report.json` as a string (pretty-printed: people open it too).
    pub fn to_json(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(&self.to_document())?)
    }

    /// The self-contained HTML page.
    pub fn to_html(&self) -> Result<String> {
        html::render(self, &self.analyze())
    }

    /// The terminal summary.
    pub fn to_text(&self) -> String {
        text::render(self, &self.analyze())
    }

    /// Writes `report.json` and `report.html` into `dir` (created if needed).
    pub fn write_report(&self, dir: &Path) -> Result<ReportFiles> {
        std::fs::create_dir_all(dir).map_err(|source| ProfileError::Write { path: dir.to_path_buf(), source })?;
        let files = ReportFiles { json: dir.join("report.json"), html: dir.join("report.html") };
        let json = self.to_json()?;
        std::fs::write(&files.json, json).map_err(|source| ProfileError::Write { path: files.json.clone(), source })?;
        let html = self.to_html()?;
        std::fs::write(&files.html, html).map_err(|source| ProfileError::Write { path: files.html.clone(), source })?;
        Ok(files)
    }

    /// The earliest wall-clock start of any series: `t = 0` of every plot.
    pub(crate) fn origin_unix_ms(&self) -> u64 {
        [self.client.as_ref().map(|h| h.start_unix_ms), self.server.as_ref().map(|h| h.start_unix_ms)]
            .into_iter()
            .flatten()
            .chain(self.transfers.iter().map(|t| t.start_unix_ms))
            .min()
            .unwrap_or(0)
    }
}

/// Lays out rows as a plain-text table: columns padded to their widest
/// cell, numbers right-aligned, the first row treated as the header.
pub fn text_table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let width = |c: usize| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols).map(width).collect();
    // Figures right-aligned, words left-aligned.
    let numeric = |s: &str| s.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+' || c == '—');
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c].saturating_sub(cell.chars().count());
            if c > 0 {
                line.push_str("  ");
            }
            if c > 0 && i > 0 && numeric(cell) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                if c + 1 < row.len() {
                    line.push_str(&" ".repeat(pad));
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if i == 0 && rows.len() > 1 {
            let total: usize = widths.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_coalesces_fast_calls() {
        let p = ProgressRecorder::new("t", Some(100));
        // A callback every 1 ms for 150 ms: samples end up ~20 ms apart.
        for ms in 1..=150u64 {
            p.record_at(ms as f64 / 1e3, ms);
        }
        let s = p.snapshot();
        assert!((7..=9).contains(&s.samples.len()), "{} samples", s.samples.len());
        assert_eq!(s.samples.last().unwrap().bytes, 150);
        assert_eq!(s.samples[0].bytes, 0);
        assert!(s.samples.windows(3).all(|w| w[2].t - w[0].t >= 0.02));
    }

    #[test]
    fn table_alignment() {
        let t = text_table(&[vec!["a".into(), "value".into()], vec!["long name".into(), "12%".into()]]);
        assert_eq!(t, "a          value\n----------------\nlong name    12%\n");
    }
}
