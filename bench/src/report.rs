//! Markdown tables from the raw lines of `runs.jsonl`.
//!
//! Pure functions of the records (no clock, no files), so the formatting is
//! unit-tested and `--report-only` rebuilds exactly what a run wrote.
//! Every figure is a median over the repetitions with its min–max range;
//! ratios divide medians measured in the same invocation, because absolute
//! figures on the shared machines drift between runs (DESIGN.md, "How we
//! measure").

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::record::{
    Comparison, GroupInfo, Layout, Line, Meta, Metric, Outcome, Phase, Role, RunRecord, ScenarioInfo, VariantInfo,
};
use crate::stats::{old_new, standing, NoSlower, Standing, Summary, LEVEL_BAND, NO_SLOWER};

/// One scenario's lines, gathered.
#[derive(Debug, Clone)]
pub struct ScenarioData {
    pub info: ScenarioInfo,
    pub groups: Vec<GroupInfo>,
    pub runs: Vec<RunRecord>,
}

/// Splits the lines of a `runs.jsonl` into the invocation's meta and the
/// scenarios, ordered by their number. Later group lines with the same id
/// replace earlier ones.
pub fn collect(lines: &[Line]) -> (Option<Meta>, Vec<ScenarioData>) {
    let mut meta = None;
    let mut by_name: BTreeMap<String, ScenarioData> = BTreeMap::new();
    let mut pending_groups = Vec::new();
    let mut pending_runs = Vec::new();
    for l in lines {
        match l {
            Line::Meta(m) => meta = Some(m.clone()),
            Line::Scenario(s) => {
                by_name.insert(s.name.clone(), ScenarioData { info: s.clone(), groups: vec![], runs: vec![] });
            }
            Line::Group(g) => pending_groups.push(g.clone()),
            Line::Run(r) => pending_runs.push(r.clone()),
        }
    }
    for g in pending_groups {
        if let Some(s) = by_name.get_mut(&g.scenario) {
            s.groups.retain(|x| x.id != g.id);
            s.groups.push(g);
        }
    }
    for r in pending_runs {
        if let Some(s) = by_name.get_mut(&r.scenario) {
            s.runs.push(r);
        }
    }
    let mut out: Vec<ScenarioData> = by_name.into_values().collect();
    out.sort_by_key(|a| number_key(&a.info.number));
    (meta, out)
}

/// "4a" sorts after "4" and before "5".
fn number_key(n: &str) -> (u32, String) {
    let digits: String = n.chars().take_while(|c| c.is_ascii_digit()).collect();
    (digits.parse().unwrap_or(u32::MAX), n[digits.len()..].to_string())
}

/// What the repetitions of one row came to.
#[derive(Debug, Clone, Default)]
pub struct RowStats {
    pub attempted: usize,
    pub ok: usize,
    pub first_error: Option<String>,
    pub not_applicable: Option<String>,
    pub bytes: u64,
    pub files: u64,
    pub rate: Option<Summary>,
    pub seconds: Option<Summary>,
    pub until_sync_rate: Option<Summary>,
    pub until_sync_seconds: Option<Summary>,
    pub client_cpu_per_gb: Option<Summary>,
    pub server_cpu_per_gb: Option<Summary>,
    pub total_cpu_per_gb: Option<Summary>,
    pub background: Option<Summary>,
    /// Seconds of the same command on a one-file set.
    pub setup_seconds: Option<Summary>,
    /// The server's peak resident memory in MiB (rows with their own server).
    pub server_peak_rss_mib: Option<Summary>,
    pub commands: Vec<String>,
}

impl RowStats {
    pub fn of(runs: &[&RunRecord]) -> RowStats {
        let main: Vec<&&RunRecord> = runs.iter().filter(|r| r.phase == Phase::Main).collect();
        let ok: Vec<&RunRecord> = main.iter().filter(|r| r.is_ok()).map(|r| **r).collect();
        let setup_ok = runs.iter().filter(|r| r.phase == Phase::Setup && r.is_ok());
        let mut commands: Vec<String> = Vec::new();
        for r in runs {
            if !r.command.is_empty() && !commands.contains(&r.command) {
                commands.push(r.command.clone());
            }
        }
        RowStats {
            attempted: main.iter().filter(|r| r.outcome != Outcome::NotApplicable).count(),
            ok: ok.len(),
            first_error: main.iter().find(|r| r.outcome == Outcome::Failed).and_then(|r| r.error.clone()),
            not_applicable: main
                .iter()
                .find(|r| r.outcome == Outcome::NotApplicable)
                .map(|r| r.error.clone().unwrap_or_default()),
            bytes: ok.first().map_or(0, |r| r.bytes),
            files: ok.first().map_or(0, |r| r.files),
            rate: Summary::of(ok.iter().filter_map(|r| r.rate())),
            seconds: Summary::of(ok.iter().filter_map(|r| r.seconds)),
            until_sync_rate: Summary::of(ok.iter().filter_map(|r| r.rate_until_sync())),
            until_sync_seconds: Summary::of(ok.iter().filter_map(|r| r.seconds_until_sync)),
            client_cpu_per_gb: Summary::of(ok.iter().filter_map(|r| r.per_gb(r.client_cpu_s))),
            server_cpu_per_gb: Summary::of(ok.iter().filter_map(|r| r.per_gb(r.server_cpu_s))),
            total_cpu_per_gb: Summary::of(ok.iter().filter_map(|r| {
                if r.client_cpu_s.is_none() && r.server_cpu_s.is_none() {
                    return None;
                }
                r.per_gb(Some(r.client_cpu_s.unwrap_or(0.0) + r.server_cpu_s.unwrap_or(0.0)))
            })),
            background: Summary::of(ok.iter().filter_map(|r| r.background_cores)),
            setup_seconds: Summary::of(setup_ok.filter_map(|r| r.seconds)),
            server_peak_rss_mib: Summary::of(ok.iter().filter_map(|r| {
                r.extra.get(crate::runner::SERVER_PEAK_RSS).and_then(|v| v.as_f64()).map(|b| b / (1u64 << 20) as f64)
            })),
            commands,
        }
    }

    pub fn metric(&self, m: Metric) -> Option<Summary> {
        match m {
            Metric::Rate => self.rate,
            Metric::RateUntilSync => self.until_sync_rate,
        }
    }
}

/// Statistics of every (group, variant) of a scenario.
pub fn row_stats(s: &ScenarioData, group: &str, variant: &str) -> RowStats {
    let runs: Vec<&RunRecord> = s.runs.iter().filter(|r| r.group == group && r.variant == variant).collect();
    RowStats::of(&runs)
}

/// A number with as many decimals as its size deserves.
pub fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// "1234 (1200–1250)", or just the value for a single sample.
pub fn fmt_summary(s: Option<Summary>) -> String {
    match s {
        None => "–".into(),
        Some(s) if s.n == 1 || s.min == s.max => fmt_num(s.median),
        Some(s) => format!("{} ({}–{})", fmt_num(s.median), fmt_num(s.min), fmt_num(s.max)),
    }
}

fn fmt_median(s: Option<Summary>) -> String {
    s.map_or("–".into(), |s| fmt_num(s.median))
}

/// Escapes the characters that would break a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Distinct reasons for "not applicable" rows, numbered as footnotes.
fn na_notes(s: &ScenarioData) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    for g in &s.groups {
        for v in &g.variants {
            if let Some(why) = row_stats(s, &g.id, &v.id).not_applicable {
                if !notes.contains(&why) {
                    notes.push(why);
                }
            }
        }
    }
    notes
}

fn runs_cell(st: &RowStats, reps: u32, notes: &[String]) -> String {
    if let Some(why) = &st.not_applicable {
        let n = notes.iter().position(|x| x == why).map_or(0, |i| i + 1);
        return format!("not applicable (note {n})");
    }
    if st.attempted == 0 {
        format!("0/{reps} (not run)")
    } else if st.ok == st.attempted {
        format!("{}/{}", st.ok, st.attempted)
    } else {
        let err = st.first_error.as_deref().map(|e| crate::proc::tail(e, 160)).unwrap_or_default();
        format!("**{}/{} ok**; failed: {}", st.ok, st.attempted, cell(&err))
    }
}

/// The main table of a scenario: one row per (group, variant).
pub fn main_table(s: &ScenarioData) -> String {
    let mut out = String::new();
    let layout = s.info.layout;
    let mut header = vec!["path / case", "row", "role", "runs ok", "MB/s median (min–max)", "seconds"];
    match layout {
        Layout::Throughput | Layout::Tune => {}
        Layout::UntilSync => header.extend(["until sync: MB/s", "until sync: s"]),
        Layout::SetupSplit => header.extend(["files/s", "set-up s (1 file)", "data s (total − set-up)", "ms per file"]),
        Layout::DataPath => header.extend(["until sync: MB/s", "server peak RSS MiB", "round trips (s ÷ RTT)"]),
    }
    header.extend(["client CPU s/GB", "server CPU s/GB", "other load (cores)"]);
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    let notes = na_notes(s);
    for g in &s.groups {
        for (i, v) in g.variants.iter().enumerate() {
            let st = row_stats(s, &g.id, &v.id);
            let case = if i == 0 { cell(&g.label) } else { String::new() };
            let label = if v.role == Role::Ferry { format!("**{}**", cell(&v.label)) } else { cell(&v.label) };
            let mut cols = vec![
                case,
                label,
                v.role.name().to_string(),
                runs_cell(&st, s.info.reps, &notes),
                fmt_summary(st.rate),
                fmt_median(st.seconds),
            ];
            match layout {
                Layout::Throughput | Layout::Tune => {}
                Layout::UntilSync => {
                    cols.push(fmt_summary(st.until_sync_rate));
                    cols.push(fmt_median(st.until_sync_seconds));
                }
                Layout::DataPath => {
                    cols.push(fmt_summary(st.until_sync_rate));
                    cols.push(fmt_median(st.server_peak_rss_mib));
                    let rt = match (st.seconds, g.rtt_ms) {
                        (Some(t), Some(rtt)) if rtt >= 1.0 && !matches!(v.role, Role::Network | Role::Disk) => {
                            fmt_num(t.median / (rtt / 1e3))
                        }
                        _ => "–".into(),
                    };
                    cols.push(rt);
                }
                Layout::SetupSplit if matches!(v.role, Role::Network | Role::Disk) => {
                    cols.extend(["–".to_string(), "–".into(), "–".into(), "–".into()]);
                }
                Layout::SetupSplit => {
                    let split = setup_split(&st);
                    cols.push(split.files_per_s.map_or("–".into(), fmt_num));
                    cols.push(fmt_median(st.setup_seconds));
                    cols.push(split.data_s.map_or("–".into(), fmt_num));
                    cols.push(split.per_file_ms.map_or("–".into(), fmt_num));
                }
            }
            cols.push(fmt_median(st.client_cpu_per_gb));
            cols.push(fmt_median(st.server_cpu_per_gb));
            cols.push(fmt_median(st.background));
            let _ = writeln!(out, "| {} |", cols.join(" | "));
        }
    }
    for (i, n) in notes.iter().enumerate() {
        let _ = writeln!(out, "\nNote {}: not applicable: {}", i + 1, n);
    }
    out
}

/// A many-files copy split into its fixed cost and its per-file cost.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SetupSplit {
    pub files_per_s: Option<f64>,
    pub data_s: Option<f64>,
    pub per_file_ms: Option<f64>,
}

pub fn setup_split(st: &RowStats) -> SetupSplit {
    let total = st.seconds.map(|s| s.median);
    let setup = st.setup_seconds.map(|s| s.median);
    let files_per_s = total.filter(|t| *t > 0.0 && st.files > 0).map(|t| st.files as f64 / t);
    let data_s = match (total, setup) {
        (Some(t), Some(s)) => Some((t - s).max(0.0)),
        _ => None,
    };
    // The one-file set-up run already carried one file.
    let per_file_ms = data_s.filter(|_| st.files > 1).map(|d| d / (st.files - 1) as f64 * 1e3);
    SetupSplit { files_per_s, data_s, per_file_ms }
}

/// One evaluated comparison.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub group: String,
    pub ferry: String,
    pub anchor: String,
    pub metric: Metric,
    pub ferry_value: Option<Summary>,
    pub anchor_value: Option<Summary>,
    pub ratio: Option<f64>,
    pub cpu_ratio: Option<f64>,
    pub standing: Option<Standing>,
    pub overlap: bool,
    /// Whom Ferry is compared with: Globus (the competitor) or a limit.
    pub anchor_role: Option<Role>,
    /// Which build of Ferry the row is (Ferry or FerryOld; Cross for the mixed pairs).
    pub ferry_role: Option<Role>,
    pub anchor_not_applicable: Option<String>,
}

fn variant<'a>(g: &'a GroupInfo, id: &str) -> Option<&'a VariantInfo> {
    g.variants.iter().find(|v| v.id == id)
}

pub fn verdicts(s: &ScenarioData) -> Vec<Verdict> {
    let mut out = Vec::new();
    for g in &s.groups {
        for c in &g.comparisons {
            out.push(evaluate(s, g, c));
        }
    }
    out
}

fn evaluate(s: &ScenarioData, g: &GroupInfo, c: &Comparison) -> Verdict {
    let ag = c.anchor_group.as_deref().and_then(|id| s.groups.iter().find(|x| x.id == id)).unwrap_or(g);
    let label = |grp: &GroupInfo, id: &str| variant(grp, id).map_or(id.to_string(), |v| v.label.clone());
    let f = row_stats(s, &g.id, &c.ferry);
    let a = row_stats(s, &ag.id, &c.anchor);
    let (fv, av) = (f.metric(c.metric), a.metric(c.metric));
    let ratio = match (fv, av) {
        (Some(f), Some(a)) if a.median > 0.0 => Some(f.median / a.median),
        _ => None,
    };
    let cpu_ratio = match (f.total_cpu_per_gb, a.total_cpu_per_gb) {
        (Some(f), Some(a)) if a.median > 0.0 => Some(f.median / a.median),
        _ => None,
    };
    Verdict {
        group: g.label.clone(),
        ferry: label(g, &c.ferry),
        anchor: label(ag, &c.anchor),
        metric: c.metric,
        ferry_value: fv,
        anchor_value: av,
        ratio,
        cpu_ratio,
        standing: ratio.map(standing),
        overlap: matches!((fv, av), (Some(f), Some(a)) if f.overlaps(&a)),
        anchor_role: variant(ag, &c.anchor).map(|v| v.role),
        ferry_role: variant(g, &c.ferry).map(|v| v.role),
        anchor_not_applicable: a.not_applicable.clone(),
    }
}

/// The verdict in words: plain when Ferry is behind.
pub fn verdict_text(v: &Verdict) -> String {
    if let Some(why) = &v.anchor_not_applicable {
        return format!("anchor not applicable ({})", cell(why));
    }
    let (Some(r), Some(st)) = (v.ratio, v.standing) else {
        return "no result (see failed runs)".into();
    };
    let pct = ((r - 1.0) * 100.0).abs();
    let noise = if v.overlap { " (ranges overlap)" } else { "" };
    match st {
        Standing::Ahead => format!("Ferry ahead: {pct:.0} % faster{noise}"),
        Standing::Level => format!("level (within {:.0} %)", LEVEL_BAND * 100.0),
        Standing::Behind => format!("**Ferry behind: {pct:.0} % slower**{noise}"),
    }
}

/// Whether a verdict compares two builds of Ferry (new ÷ old) rather than
/// Ferry with an anchor.
fn is_build_comparison(v: &Verdict) -> bool {
    v.anchor_role == Some(Role::FerryOld)
}

/// Verdicts of Ferry against its anchors (not new ÷ old).
fn anchor_verdicts(s: &ScenarioData) -> Vec<Verdict> {
    verdicts(s).into_iter().filter(|v| !is_build_comparison(v)).collect()
}

pub fn comparison_table(s: &ScenarioData) -> String {
    let vs = anchor_verdicts(s);
    if vs.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| path / case | Ferry row | anchor | measure | Ferry MB/s | anchor MB/s | Ferry ÷ anchor | CPU per GB, Ferry ÷ anchor | verdict |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for v in &vs {
        let measure = match v.metric {
            Metric::Rate => "transfer",
            Metric::RateUntilSync => "until sync",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&v.group),
            cell(&v.ferry),
            cell(&v.anchor),
            measure,
            fmt_median(v.ferry_value),
            fmt_median(v.anchor_value),
            v.ratio.map_or("–".into(), |r| format!("{r:.2}")),
            v.cpu_ratio.map_or("–".into(), |r| format!("{r:.2}")),
            verdict_text(v),
        );
    }
    out
}

/// Which anchors a summary list covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Against {
    /// Globus GridFTP: the tool Ferry has to beat.
    Globus,
    /// iperf3, fio, cp: what the network or the disk allows.
    Limits,
}

/// One sentence per comparison where Ferry is behind, for summaries.
pub fn behind_list(s: &ScenarioData, against: Against) -> Vec<String> {
    anchor_verdicts(s)
        .iter()
        .filter(|v| v.standing == Some(Standing::Behind))
        .filter(|v| {
            let limit = matches!(v.anchor_role, Some(Role::Network | Role::Disk));
            (against == Against::Limits) == limit
        })
        .map(|v| {
            format!(
                "{} — {}: {} vs {} MB/s with {} ({:.2}×){}",
                v.group,
                v.ferry,
                fmt_median(v.ferry_value),
                fmt_median(v.anchor_value),
                v.anchor,
                v.ratio.unwrap_or(f64::NAN),
                if v.overlap { ", ranges overlap" } else { "" }
            )
        })
        .collect()
}

/// Issue 15: the new build must stay at least this many times as fast as
/// `globus-url-copy` memory to memory.
pub const GLOBUS_FACTOR: f64 = 1.3;

/// One row of the new ÷ old table.
#[derive(Debug, Clone)]
pub struct OldNewRow {
    pub group: String,
    pub label: String,
    pub metric: Metric,
    pub new: Option<Summary>,
    pub old: Option<Summary>,
    /// Ratio of medians, overlap, verdict (`None` without both figures).
    pub rule: Option<crate::stats::OldNew>,
    /// The per-repetition ratios, each of two runs made back to back.
    pub paired: Option<Summary>,
}

/// Per-repetition new ÷ old of one group (repetitions where both ran).
fn paired_ratios(s: &ScenarioData, group: &str, new: &str, old: &str, metric: Metric) -> Option<Summary> {
    let value = |variant: &str, rep: u32| {
        s.runs
            .iter()
            .find(|r| r.group == group && r.variant == variant && r.rep == rep && r.phase == Phase::Main && r.is_ok())
            .and_then(|r| r.metric(metric))
    };
    let reps: Vec<u32> = s.runs.iter().filter(|r| r.group == group && r.variant == new).map(|r| r.rep).collect();
    Summary::of(reps.into_iter().filter_map(|rep| match (value(new, rep), value(old, rep)) {
        (Some(n), Some(o)) if o > 0.0 => Some(n / o),
        _ => None,
    }))
}

/// Every new ÷ old comparison of a scenario, evaluated.
pub fn old_new_rows(s: &ScenarioData) -> Vec<OldNewRow> {
    let mut out = Vec::new();
    for g in &s.groups {
        for c in &g.comparisons {
            if variant(g, &c.anchor).map(|v| v.role) != Some(Role::FerryOld) {
                continue;
            }
            let new = row_stats(s, &g.id, &c.ferry).metric(c.metric);
            let old = row_stats(s, &g.id, &c.anchor).metric(c.metric);
            let rule = match (&new, &old) {
                (Some(n), Some(o)) => old_new(n, o, NO_SLOWER),
                _ => None,
            };
            out.push(OldNewRow {
                group: g.label.clone(),
                label: variant(g, &c.ferry).map_or(c.ferry.clone(), |v| v.label.clone()),
                metric: c.metric,
                new,
                old,
                rule,
                paired: paired_ratios(s, &g.id, &c.ferry, &c.anchor, c.metric),
            });
        }
    }
    out
}

fn no_slower_text(r: &OldNewRow) -> String {
    match r.rule.map(|x| x.verdict) {
        None => "no result (see failed runs)".into(),
        Some(NoSlower::Holds) => format!("≥ {NO_SLOWER}"),
        Some(NoSlower::Rerun) if r.rule.is_some_and(|x| !x.overlap) => {
            format!("**below {NO_SLOWER}**; one repetition, no range to judge: rerun this row")
        }
        Some(NoSlower::Rerun) => format!("**below {NO_SLOWER}**; ranges overlap: rerun this row"),
        Some(NoSlower::Slower) => format!("**below {NO_SLOWER}, ranges apart: slower**"),
    }
}

fn measure_name(m: Metric) -> &'static str {
    match m {
        Metric::Rate => "transfer",
        Metric::RateUntilSync => "until sync",
    }
}

/// The new ÷ old table: one line per comparison.
pub fn old_new_table(rows: &[OldNewRow]) -> String {
    let mut out = String::from(
        "| case | measure | new MB/s median (min–max) | old MB/s median (min–max) | new ÷ old (medians) | \
         paired new ÷ old, per repetition: median (min–max) | ranges overlap | verdict |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let paired = r.paired.map_or("–".into(), |p| {
            if p.n == 1 {
                format!("{:.3}", p.median)
            } else {
                format!("{:.3} ({:.3}–{:.3})", p.median, p.min, p.max)
            }
        });
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&r.group),
            measure_name(r.metric),
            fmt_summary(r.new),
            fmt_summary(r.old),
            r.rule.map_or("–".into(), |x| format!("{:.3}", x.ratio)),
            paired,
            match r.rule {
                None => "–",
                Some(x) if x.overlap => "yes",
                Some(_) => "no",
            },
            no_slower_text(r),
        );
    }
    out
}

/// Both builds ÷ `globus-url-copy` wherever a scenario comparing builds
/// has a Globus anchor, with the factor the new build must keep.
pub fn globus_factor_table(s: &ScenarioData) -> String {
    let vs: Vec<Verdict> = anchor_verdicts(s).into_iter().filter(|v| v.anchor_role == Some(Role::Globus)).collect();
    if vs.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| case | row | MB/s | Globus row | Globus MB/s | ÷ Globus | at least 1.3× |\n|---|---|---|---|---|---|---|\n",
    );
    for v in &vs {
        let ok = match v.ratio {
            None => "–".to_string(),
            Some(r) if r >= GLOBUS_FACTOR => "yes".into(),
            Some(_) => "**no**".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {ok} |",
            cell(&v.group),
            cell(&v.ferry),
            fmt_summary(v.ferry_value),
            cell(&v.anchor),
            fmt_summary(v.anchor_value),
            v.ratio.map_or("–".into(), |r| format!("{r:.2}")),
        );
    }
    out
}

/// The few sentences that say whether the new build is slower: for the
/// scenario page and the index.
pub fn old_new_summary(s: &ScenarioData, rows: &[OldNewRow]) -> Vec<String> {
    let mut out = Vec::new();
    if s.info.reps < 5 {
        out.push(format!(
            "**Smoke run: {} repetition{} per row.** The rule needs at least 5; these figures show the harness \
             works, they decide nothing.",
            s.info.reps,
            if s.info.reps == 1 { "" } else { "s" }
        ));
    }
    let count = |k: NoSlower| rows.iter().filter(|r| r.rule.map(|x| x.verdict) == Some(k)).count();
    let missing = rows.iter().filter(|r| r.rule.is_none()).count();
    let (holds, rerun, slower) = (count(NoSlower::Holds), count(NoSlower::Rerun), count(NoSlower::Slower));
    let worst = rows
        .iter()
        .filter_map(|r| r.rule.map(|x| (x.ratio, r)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(x, r)| format!("; lowest {x:.3} ({}, {})", r.group, measure_name(r.metric)))
        .unwrap_or_default();
    out.push(if holds == rows.len() {
        format!("**New ÷ old: every one of {} rows ≥ {NO_SLOWER}**{worst}.", rows.len())
    } else {
        let mut parts = vec![format!("{holds} of {} rows ≥ {NO_SLOWER}", rows.len())];
        if rerun > 0 {
            let which: Vec<String> = rows
                .iter()
                .filter(|r| r.rule.map(|x| x.verdict) == Some(NoSlower::Rerun))
                .map(|r| format!("{} ({})", r.group, measure_name(r.metric)))
                .collect();
            parts.push(format!(
                "{rerun} below with overlapping ranges (or one repetition), to rerun: {}",
                which.join(", ")
            ));
        }
        if slower > 0 {
            let which: Vec<String> = rows
                .iter()
                .filter(|r| r.rule.map(|x| x.verdict) == Some(NoSlower::Slower))
                .map(|r| format!("{} ({})", r.group, measure_name(r.metric)))
                .collect();
            parts.push(format!("**{slower} slower, ranges apart: {}**", which.join(", ")));
        }
        if missing > 0 {
            parts.push(format!("{missing} without a result"));
        }
        format!("**New ÷ old:** {}{worst}.", parts.join("; "))
    });
    let globus: Vec<f64> = anchor_verdicts(s)
        .iter()
        .filter(|v| v.anchor_role == Some(Role::Globus) && v.ferry_role == Some(Role::Ferry))
        .filter_map(|v| v.ratio)
        .collect();
    if let Some(min) = globus.iter().copied().min_by(f64::total_cmp) {
        out.push(format!(
            "**New ÷ Globus memory to memory: at least {min:.2}×** ({} the {GLOBUS_FACTOR}× the rule asks for).",
            if min >= GLOBUS_FACTOR { "above" } else { "**below**" }
        ));
    }
    out
}

/// The exact commands of each row, for reproduction.
pub fn commands_block(s: &ScenarioData) -> String {
    let mut out = String::from("<details><summary>Exact commands (first repetition of each row)</summary>\n\n```sh\n");
    let mut servers: Vec<String> = Vec::new();
    for g in &s.groups {
        let _ = writeln!(out, "# {}", g.label);
        for v in &g.variants {
            let runs: Vec<&RunRecord> =
                s.runs.iter().filter(|r| r.group == g.id && r.variant == v.id && r.phase == Phase::Main).collect();
            if let Some(r) = runs.first() {
                if r.outcome == Outcome::NotApplicable {
                    let _ = writeln!(out, "#   {}: not applicable", v.label);
                } else {
                    let _ = writeln!(out, "{}", r.command);
                }
                if let Some(sc) = &r.server_command {
                    if !servers.contains(sc) {
                        servers.push(sc.clone());
                    }
                }
            }
        }
    }
    if !servers.is_empty() {
        out.push_str("# servers\n");
        for sc in servers {
            let _ = writeln!(out, "{sc}");
        }
    }
    out.push_str("```\n\n</details>\n");
    out
}

/// The network paths of a scenario with their measured RTT.
pub fn paths_table(s: &ScenarioData) -> String {
    let mut out = String::from("| case | path | connect RTT (median of 5) |\n|---|---|---|\n");
    for g in &s.groups {
        let rtt = g.rtt_ms.map_or("–".into(), |r| format!("{r:.2} ms"));
        let _ = writeln!(out, "| {} | {} | {rtt} |", cell(&g.label), cell(&g.path));
    }
    out
}

/// File name stem of a scenario's outputs, e.g. `1-mem`.
pub fn stem(info: &ScenarioInfo) -> String {
    format!("{}-{}", info.number, info.name)
}

/// The scenario's Markdown page; `plots` are the SVG file names beside it.
pub fn scenario_page(s: &ScenarioData, plots: &[(String, String)]) -> String {
    let i = &s.info;
    let mut out = String::new();
    let _ = writeln!(out, "# {}. {}\n", i.number, i.title);
    let _ = writeln!(out, "{}\n", i.description.trim());
    let _ = writeln!(
        out,
        "Mode `{}`, {} repetition{} per row (rows interleaved within each repetition), started {}.\n\
         Command: `{}`\n",
        i.mode,
        i.reps,
        if i.reps == 1 { "" } else { "s" },
        i.started,
        i.command
    );
    let _ = writeln!(out, "{}", paths_table(s));
    let builds = old_new_rows(s);
    if !builds.is_empty() {
        let _ = writeln!(out, "{}\n", old_new_summary(s, &builds).join("\n\n"));
    }
    if !anchor_verdicts(s).is_empty() {
        let globus = behind_list(s, Against::Globus);
        if globus.is_empty() {
            let _ = writeln!(
                out,
                "**Ferry is not behind Globus anywhere in this scenario** (by medians; within ±{:.0} % counts as level).\n",
                LEVEL_BAND * 100.0
            );
        } else {
            let _ = writeln!(out, "**Where Ferry is behind Globus:**\n");
            for b in globus {
                let _ = writeln!(out, "* {b}");
            }
            out.push('\n');
        }
        let limits = behind_list(s, Against::Limits);
        if !limits.is_empty() {
            let _ = writeln!(out, "**Where Ferry is below the network's or the disk's limit (iperf3, fio, cp):**\n");
            for b in limits {
                let _ = writeln!(out, "* {b}");
            }
            out.push('\n');
        }
    }
    let _ = writeln!(out, "## Results\n\n{}", main_table(s));
    let _ = writeln!(
        out,
        "MB/s = 10^6 bytes per second over the row's seconds; CPU = user + system seconds per 10^9 bytes; \
         \"other load\" = cores busy with anything but the measured processes and the link emulator.\n"
    );
    if !builds.is_empty() {
        let _ = writeln!(out, "## New build ÷ old build\n\n{}", old_new_table(&builds));
        let g = globus_factor_table(s);
        if !g.is_empty() {
            let _ =
                writeln!(out, "## New build ÷ Globus (the rule: at least {GLOBUS_FACTOR}× memory to memory)\n\n{g}");
        }
    }
    if i.layout == Layout::Tune {
        let _ = writeln!(out, "## Tune's pick against the grid's best\n\n{}", crate::tune_report::section(s));
    }
    let cmp = comparison_table(s);
    if !cmp.is_empty() {
        let _ = writeln!(out, "## Ferry against the anchors\n\n{cmp}");
    }
    for (file, caption) in plots {
        let _ = writeln!(out, "![{caption}]({file})\n");
    }
    out.push_str(&commands_block(s));
    out
}

/// The index page: machine, command, and each scenario's verdicts.
pub fn index_page(meta: Option<&Meta>, scenarios: &[ScenarioData]) -> String {
    let mut out = String::from("# Ferry benchmark results\n\n");
    if let Some(m) = meta {
        let _ = writeln!(out, "Mode `{}`, last invocation started {}: `{}`\n", m.mode, m.started, m.command);
        let _ = writeln!(out, "## Machine\n\n| item | value |\n|---|---|");
        for (k, v) in &m.machine {
            let _ = writeln!(out, "| {} | {} |", cell(k), cell(v));
        }
        out.push('\n');
    }
    let _ = writeln!(out, "## Scenarios\n");
    let _ = writeln!(
        out,
        "| # | scenario | rows | runs ok | Ferry behind Globus | Ferry below iperf3/fio/cp |\n|---|---|---|---|---|---|"
    );
    for s in scenarios {
        let rows: usize = s.groups.iter().map(|g| g.variants.len()).sum();
        let main: Vec<&RunRecord> =
            s.runs.iter().filter(|r| r.phase == Phase::Main && r.outcome != Outcome::NotApplicable).collect();
        let ok = main.iter().filter(|r| r.is_ok()).count();
        let count = |a: Against| match behind_list(s, a).len() {
            0 => "nowhere".to_string(),
            n => format!("in {n} comparison{}", if n == 1 { "" } else { "s" }),
        };
        let _ = writeln!(
            out,
            "| {} | [{}]({}.md) | {rows} | {ok}/{} | {} | {} |",
            s.info.number,
            cell(&s.info.title),
            stem(&s.info),
            main.len(),
            count(Against::Globus),
            count(Against::Limits)
        );
    }
    out.push('\n');
    for s in scenarios {
        if let Some(t) = crate::tune_report::summary(s) {
            let _ = writeln!(out, "### {}. {}\n\n{t}\n", s.info.number, s.info.title);
        }
        let builds = old_new_rows(s);
        if !builds.is_empty() {
            let _ = writeln!(out, "### {}. {}\n", s.info.number, s.info.title);
            for line in old_new_summary(s, &builds) {
                let _ = writeln!(out, "{line}\n");
            }
        }
    }
    for s in scenarios {
        let behind = behind_list(s, Against::Globus);
        if !behind.is_empty() {
            let _ = writeln!(out, "### {}. {}: Ferry behind Globus\n", s.info.number, s.info.title);
            for b in behind {
                let _ = writeln!(out, "* {b}");
            }
            out.push('\n');
        }
    }
    out.push_str(
        "Raw per-run data: `runs.jsonl` (one JSON object per line); `bench/run --report-only` regenerates these pages and plots from it.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{PlotKind, Role};

    fn info() -> ScenarioInfo {
        ScenarioInfo {
            name: "mem".into(),
            number: "1".into(),
            title: "Memory to memory".into(),
            description: "desc".into(),
            layout: Layout::Throughput,
            plot: PlotKind::Bars,
            reps: 3,
            mode: "quick".into(),
            started: "t".into(),
            command: "bench/run --quick".into(),
        }
    }

    fn group() -> GroupInfo {
        GroupInfo {
            scenario: "mem".into(),
            id: "p1".into(),
            label: "1 stream".into(),
            x: None,
            path: "loopback".into(),
            rtt_ms: None,
            variants: vec![
                VariantInfo {
                    id: "ferry".into(),
                    label: "ferry cp -p 1".into(),
                    role: Role::Ferry,
                    series: String::new(),
                    not_applicable: None,
                },
                VariantInfo {
                    id: "guc".into(),
                    label: "globus-url-copy -p 1".into(),
                    role: Role::Globus,
                    series: String::new(),
                    not_applicable: None,
                },
                VariantInfo {
                    id: "udt".into(),
                    label: "globus-url-copy -udt".into(),
                    role: Role::Globus,
                    series: String::new(),
                    not_applicable: Some("ignored".into()),
                },
            ],
            comparisons: vec![Comparison::rate("ferry", "guc"), Comparison::rate("ferry", "udt")],
        }
    }

    fn run(variant: &str, rep: u32, secs: f64, ok: bool) -> RunRecord {
        let mut r = RunRecord::new("mem", "p1", variant, Phase::Main, rep);
        r.outcome = if ok { Outcome::Ok } else { Outcome::Failed };
        r.bytes = 1_000_000_000;
        r.files = 1;
        r.seconds = ok.then_some(secs);
        r.client_cpu_s = Some(0.5);
        r.server_cpu_s = Some(1.0);
        r.command = format!("{variant} --flag");
        if !ok {
            r.error = Some("connection refused | twice".into());
        }
        r
    }

    fn data(runs: Vec<RunRecord>) -> ScenarioData {
        let mut lines = vec![Line::Scenario(info()), Line::Group(group())];
        lines.extend(runs.into_iter().map(Line::Run));
        let mut na = RunRecord::new("mem", "p1", "udt", Phase::Main, 1);
        na.outcome = Outcome::NotApplicable;
        na.error = Some("-udt is ignored for ftp:// URLs".into());
        lines.push(Line::Run(na));
        collect(&lines).1.remove(0)
    }

    #[test]
    fn ferry_behind_is_said_plainly() {
        let s = data(vec![
            run("ferry", 1, 1.0, true),
            run("ferry", 2, 1.25, true),
            run("ferry", 3, 1.1, true),
            run("guc", 1, 0.5, true),
            run("guc", 2, 0.5, true),
            run("guc", 3, 0.5, false),
        ]);
        let st = row_stats(&s, "p1", "ferry");
        assert_eq!(st.ok, 3);
        let rate = st.rate.unwrap();
        assert!((rate.median - 1000.0 / 1.1).abs() < 1e-6);
        assert!((st.total_cpu_per_gb.unwrap().median - 1.5).abs() < 1e-9);
        let v = verdicts(&s);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].standing, Some(Standing::Behind));
        assert!(verdict_text(&v[0]).contains("**Ferry behind: 55 % slower**"), "{}", verdict_text(&v[0]));
        assert!(verdict_text(&v[1]).starts_with("anchor not applicable"));
        let table = main_table(&s);
        assert!(table.contains("**2/3 ok**; failed: connection refused \\| twice"), "{table}");
        assert!(table.contains("not applicable (note 1)"), "{table}");
        assert!(table.contains("Note 1: not applicable: -udt is ignored"), "{table}");
        assert!(table.contains("| 1 stream | **ferry cp -p 1** | Ferry | 3/3 | 909 (800–1000) | 1.10 |"), "{table}");
        let page = scenario_page(&s, &[("1-mem.svg".into(), "throughput".into())]);
        assert!(page.contains("**Where Ferry is behind Globus:**"));
        assert!(page.contains("![throughput](1-mem.svg)"));
        assert!(page.contains("ferry --flag"));
        let index = index_page(None, std::slice::from_ref(&s));
        assert!(index.contains("[Memory to memory](1-mem.md)"));
        assert!(index.contains("5/6"), "{index}");
    }

    #[test]
    fn ahead_and_level() {
        let s = data(vec![run("ferry", 1, 0.5, true), run("guc", 1, 1.0, true)]);
        assert!(verdict_text(&verdicts(&s)[0]).starts_with("Ferry ahead: 100 % faster"));
        let s = data(vec![run("ferry", 1, 1.0, true), run("guc", 1, 1.01, true)]);
        assert!(verdict_text(&verdicts(&s)[0]).starts_with("level"));
    }

    fn old_new_data(reps: u32, new_secs: &[f64], old_secs: &[f64]) -> ScenarioData {
        let mut i = info();
        i.name = "old-new".into();
        i.number = "8".into();
        i.reps = reps;
        let v = |id: &str, role: Role| VariantInfo {
            id: id.into(),
            label: format!("ferry cp -p 1 ({id})"),
            role,
            series: String::new(),
            not_applicable: None,
        };
        let g = GroupInfo {
            scenario: "old-new".into(),
            id: "mem-p1".into(),
            label: "memory, 1 stream".into(),
            x: None,
            path: "loopback".into(),
            rtt_ms: None,
            variants: vec![v("new", Role::Ferry), v("old", Role::FerryOld), v("guc", Role::Globus)],
            comparisons: vec![
                Comparison::rate("new", "old"),
                Comparison::rate("new", "guc"),
                Comparison::rate("old", "guc"),
            ],
        };
        let mut lines = vec![Line::Scenario(i), Line::Group(g)];
        for (variant, secs) in [("new", new_secs), ("old", old_secs), ("guc", &[2.0, 2.0, 2.0, 2.0, 2.0][..])] {
            for (k, t) in secs.iter().enumerate() {
                let mut r = run(variant, k as u32 + 1, *t, true);
                r.scenario = "old-new".into();
                r.group = "mem-p1".into();
                lines.push(Line::Run(r));
            }
        }
        collect(&lines).1.remove(0)
    }

    #[test]
    fn new_against_old() {
        // 1 GB each: new at 1000 MB/s in every repetition, old 960–1010.
        let s = old_new_data(5, &[1.0; 5], &[1.0, 0.99, 1.02, 1.04, 1.0]);
        let rows = old_new_rows(&s);
        assert_eq!(rows.len(), 1, "only new ÷ old, not the Globus anchors");
        let r = &rows[0];
        let rule = r.rule.unwrap();
        assert!((rule.ratio - 1.0).abs() < 1e-9);
        assert!(rule.overlap);
        assert_eq!(rule.verdict, NoSlower::Holds);
        let p = r.paired.unwrap();
        assert_eq!(p.n, 5);
        assert!((p.median - 1.0).abs() < 1e-9 && (p.max - 1.04).abs() < 1e-9, "{p:?}");
        let table = old_new_table(&rows);
        assert!(
            table.contains(
                "| memory, 1 stream | transfer | 1000 | 1000 (962–1010) | 1.000 | 1.000 (0.990–1.040) | yes | ≥ 0.97 |"
            ),
            "{table}"
        );
        let page = scenario_page(&s, &[]);
        assert!(page.contains("**New ÷ old: every one of 1 rows ≥ 0.97**"), "{page}");
        assert!(page.contains("**New ÷ Globus memory to memory: at least 2.00×** (above"), "{page}");
        assert!(!page.contains("Smoke run"));
        // The anchors table keeps new ÷ Globus and old ÷ Globus, not new ÷ old.
        let anchors = comparison_table(&s);
        assert_eq!(anchors.lines().count(), 4, "{anchors}");
        assert!(globus_factor_table(&s).contains("| yes |"));

        // Below 0.97 with overlapping ranges: rerun; apart: slower.
        let s = old_new_data(5, &[1.05, 1.06, 1.0, 1.07, 1.05], &[1.0; 5]);
        let rows = old_new_rows(&s);
        assert_eq!(rows[0].rule.unwrap().verdict, NoSlower::Rerun);
        assert!(old_new_table(&rows).contains("**below 0.97**; ranges overlap: rerun this row"));
        let s = old_new_data(5, &[1.2, 1.21, 1.19, 1.22, 1.2], &[1.0, 1.01, 0.99, 1.02, 1.0]);
        let rows = old_new_rows(&s);
        assert_eq!(rows[0].rule.unwrap().verdict, NoSlower::Slower);
        let summary = old_new_summary(&s, &rows).join("\n");
        assert!(summary.contains("**1 slower, ranges apart: memory, 1 stream (transfer)**"), "{summary}");
        let index = index_page(None, std::slice::from_ref(&s));
        assert!(index.contains("### 8. Memory to memory") && index.contains("1 slower"), "{index}");
        // One repetition: a smoke run, and below is "rerun", not "slower".
        let s = old_new_data(1, &[1.2], &[1.0]);
        let rows = old_new_rows(&s);
        assert_eq!(rows[0].rule.unwrap().verdict, NoSlower::Rerun);
        assert!(old_new_table(&rows).contains("one repetition, no range to judge"));
        let summary = old_new_summary(&s, &rows).join("\n");
        assert!(summary.contains("Smoke run: 1 repetition per row"), "{summary}");
    }

    #[test]
    fn setup_split_arithmetic() {
        let st = RowStats {
            files: 11,
            seconds: Summary::of([2.0]),
            setup_seconds: Summary::of([0.5]),
            ..RowStats::default()
        };
        let s = setup_split(&st);
        assert_eq!(s.files_per_s, Some(5.5));
        assert_eq!(s.data_s, Some(1.5));
        assert!((s.per_file_ms.unwrap() - 150.0).abs() < 1e-9);
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_num(1234.4), "1234");
        assert_eq!(fmt_num(12.34), "12.3");
        assert_eq!(fmt_num(1.234), "1.23");
        assert_eq!(fmt_num(0.1234), "0.123");
        assert_eq!(fmt_summary(Summary::of([1.0, 3.0, 2.0])), "2.00 (1.00–3.00)");
        assert_eq!(fmt_summary(None), "–");
        assert_eq!(number_key("4a"), (4, "a".into()));
        assert!(number_key("4a") > number_key("4") && number_key("4a") < number_key("5"));
    }
}
