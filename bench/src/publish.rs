//! Writes the results directory from `runs.jsonl`: an index page, one
//! Markdown page per scenario, and its SVG plots. Used after every
//! scenario of a run (so an interrupted run still leaves readable pages)
//! and by `--report-only`.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};
use crate::plot::{self, Series};
use crate::record::{self, Layout, Metric, Outcome, Phase, PlotKind, Role};
use crate::report::{self, row_stats, ScenarioData};
use crate::stats::Summary;

pub const RUNS_FILE: &str = "runs.jsonl";

/// Regenerates every page and plot in `dir` from `dir/runs.jsonl`.
/// Returns the files written.
pub fn publish(dir: &Path) -> Result<Vec<PathBuf>> {
    let lines = record::read_lines(&dir.join(RUNS_FILE))?;
    let (meta, scenarios) = report::collect(&lines);
    let mut written = Vec::new();
    for s in &scenarios {
        let stem = report::stem(&s.info);
        let mut plots = Vec::new();
        for (suffix, caption, kind) in plot_set(s) {
            let file = format!("{stem}{suffix}.svg");
            let path = dir.join(&file);
            draw(s, &path, &caption, kind)?;
            written.push(path);
            plots.push((file, caption));
        }
        let page = dir.join(format!("{stem}.md"));
        write(&page, &report::scenario_page(s, &plots))?;
        written.push(page);
    }
    let index = dir.join("README.md");
    write(&index, &report::index_page(meta.as_ref(), &scenarios))?;
    written.push(index);
    Ok(written)
}

fn write(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text).map_err(|e| BenchError::io(format!("writing {}", path.display()), e))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Chart {
    Rate(Metric),
    CpuPerGb,
    /// The tune scenario's grid points and tune's trials.
    TuneGrid,
}

fn plot_set(s: &ScenarioData) -> Vec<(&'static str, String, Chart)> {
    let t = &s.info.title;
    let mut v = vec![("", format!("{t}: throughput (MB/s, median, whiskers min–max)"), Chart::Rate(Metric::Rate))];
    if matches!(s.info.layout, Layout::UntilSync | Layout::DataPath) {
        v.push(("-sync", format!("{t}: throughput until sync (MB/s)"), Chart::Rate(Metric::RateUntilSync)));
    }
    v.push(("-cpu", format!("{t}: CPU seconds per GB, client + server"), Chart::CpuPerGb));
    if s.info.layout == Layout::Tune && crate::tune_report::grid_chart(s).is_some() {
        v.push(("-grid", "Every grid point and tune's trials (MB/s)".to_string(), Chart::TuneGrid));
    }
    v
}

/// Series across groups, keyed by the rows' legend names.
fn series(s: &ScenarioData, groups: &[&record::GroupInfo], chart: Chart) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        for v in &g.variants {
            if v.not_applicable.is_some() {
                continue;
            }
            let st = row_stats(s, &g.id, &v.id);
            let value: Option<Summary> = match chart {
                Chart::Rate(m) => st.metric(m),
                Chart::CpuPerGb | Chart::TuneGrid => st.total_cpu_per_gb,
            };
            let Some(value) = value else { continue };
            let name = if v.series.is_empty() { v.label.clone() } else { v.series.clone() };
            match out.iter_mut().find(|x| x.name == name) {
                Some(x) => x.points.push((gi, value)),
                None => out.push(Series { name, role: v.role, points: vec![(gi, value)] }),
            }
        }
    }
    // Ferry first, then Globus, crosses, network, disk: the legend reads
    // from the subject to its anchors.
    let rank = |r: Role| match r {
        Role::Ferry => 0,
        Role::FerryOld => 1,
        Role::Globus => 2,
        Role::Cross => 3,
        Role::Network => 4,
        Role::Disk => 5,
    };
    out.sort_by_key(|x| rank(x.role));
    out
}

fn draw(s: &ScenarioData, path: &Path, caption: &str, chart: Chart) -> Result<()> {
    if chart == Chart::TuneGrid {
        let (cats, series) = crate::tune_report::grid_chart(s).unwrap_or_default();
        return plot::bars(path, caption, "MB/s", &cats, &series);
    }
    let mut groups: Vec<&record::GroupInfo> = s.groups.iter().collect();
    let y = match chart {
        Chart::Rate(_) => "MB/s",
        Chart::CpuPerGb | Chart::TuneGrid => "CPU s per GB",
    };
    if s.info.plot == PlotKind::VsDelay && matches!(chart, Chart::Rate(_)) {
        groups.sort_by(|a, b| a.x.unwrap_or(0.0).total_cmp(&b.x.unwrap_or(0.0)));
        let xs: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
        return plot::lines(path, caption, "one-way delay (1 Gbit/s)", y, &xs, &series(s, &groups, chart));
    }
    if s.info.plot == PlotKind::VsDelay {
        groups.sort_by(|a, b| a.x.unwrap_or(0.0).total_cmp(&b.x.unwrap_or(0.0)));
    }
    let cats: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
    plot::bars(path, caption, y, &cats, &series(s, &groups, chart))
}

/// Whether any main run of the lines failed (for the exit status).
pub fn failures(dir: &Path) -> Result<usize> {
    let lines = record::read_lines(&dir.join(RUNS_FILE))?;
    Ok(lines
        .iter()
        .filter(|l| matches!(l, record::Line::Run(r) if r.outcome == Outcome::Failed && r.phase == Phase::Main))
        .count())
}
