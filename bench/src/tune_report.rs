//! The tune scenario's own figures: `ferry tune`'s pick against the best
//! of an exhaustive grid over the same space, from the JSON the probe,
//! tune and grid rows recorded (`extra.json` in `runs.jsonl`), beside the
//! head-to-head copies. Formerly the Python inside `bench/tune-vs-grid.sh`;
//! like the rest of the report, a pure function of the records.

use std::fmt::Write as _;

use serde_json::Value;

use crate::plot::Series;
use crate::record::{Phase, Role};
use crate::report::{fmt_summary, row_stats, ScenarioData};
use crate::runner::TUNE_JSON;
use crate::stats::Summary;

/// The acceptance of the issue that built `ferry tune`: its pick reaches
/// at least this share of the grid's best.
pub const TUNE_SHARE: f64 = 0.9;

/// The JSON a row of the search recorded (first successful run).
fn json_of<'a>(s: &'a ScenarioData, variant: &str) -> Option<&'a Value> {
    s.runs
        .iter()
        .filter(|r| r.variant == variant && r.phase == Phase::Main && r.is_ok())
        .find_map(|r| r.extra.get(TUNE_JSON))
}

/// A trial's configuration as (streams, TCP buffer or auto).
fn key(config: &Value) -> (u64, Option<u64>) {
    (config["streams"].as_u64().unwrap_or(0), config["tcp_buffer"].as_u64())
}

fn buf(b: Option<u64>) -> String {
    match b {
        None => "auto".into(),
        Some(b) => {
            let mib = b as f64 / f64::from(1u32 << 20);
            if mib >= 1.0 {
                let text = format!("{mib:.2}");
                format!("{} MiB", text.trim_end_matches('0').trim_end_matches('.'))
            } else {
                format!("{} KiB", b >> 10)
            }
        }
    }
}

/// What the search came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Tune's pick, measured in the grid run, ÷ the grid's best.
    pub share_in_grid: f64,
    /// Tune's pick in its own run ÷ the grid's best.
    pub share_own: f64,
    pub pick: (u64, Option<u64>),
    pub best: (u64, Option<u64>),
    /// bytes/s
    pub best_rate: f64,
    pub pick_rate_in_grid: f64,
    pub pick_rate_own: f64,
    pub tune_trials: usize,
    pub grid_points: usize,
}

/// Tune's pick against the grid's best, when both ran.
pub fn outcome(s: &ScenarioData) -> Option<Outcome> {
    let tune = json_of(s, "tune")?;
    let grid = json_of(s, "grid")?;
    let best = key(&grid["result"]["best"]);
    let best_rate = grid["result"]["best_rate"].as_f64()?;
    let pick = key(&tune["result"]["best"]);
    let pick_rate_own = tune["result"]["best_rate"].as_f64()?;
    let trials = grid["result"]["trials"].as_array()?;
    let pick_rate_in_grid = trials.iter().find(|t| key(&t["config"]) == pick)?["rate"].as_f64()?;
    if best_rate <= 0.0 {
        return None;
    }
    Some(Outcome {
        share_in_grid: pick_rate_in_grid / best_rate,
        share_own: pick_rate_own / best_rate,
        pick,
        best,
        best_rate,
        pick_rate_in_grid,
        pick_rate_own,
        tune_trials: tune["result"]["trials"].as_array().map_or(0, Vec::len),
        grid_points: trials.len(),
    })
}

/// One sentence for the index page.
pub fn summary(s: &ScenarioData) -> Option<String> {
    let o = outcome(s)?;
    Some(format!(
        "**Tune's pick reaches {:.1} % of the grid's best** (both measured in the grid run; the rule: at least {:.0} %), \
         {} trials against {} grid points.",
        o.share_in_grid * 100.0,
        TUNE_SHARE * 100.0,
        o.tune_trials,
        o.grid_points
    ))
}

fn mb(rate: f64) -> String {
    format!("{:.1} MB/s ({:.0} Mbit/s)", rate / 1e6, rate * 8.0 / 1e6)
}

fn cfg(c: (u64, Option<u64>)) -> String {
    format!("{} streams, TCP buffer {}", c.0, buf(c.1))
}

/// The scenario page's section: the result, the path, every grid point,
/// tune's trials in order, and the head-to-head copies.
pub fn section(s: &ScenarioData) -> String {
    let mut out = String::new();
    let Some(o) = outcome(s) else {
        return "The search did not finish (see the failed rows above): no comparison.\n".into();
    };
    let tune = json_of(s, "tune").expect("outcome had it");
    let grid = json_of(s, "grid").expect("outcome had it");
    let _ = writeln!(out, "{}\n", summary(s).unwrap_or_default());
    let _ = writeln!(out, "| | configuration | rate | ÷ the grid's best |\n|---|---|---|---|");
    let _ = writeln!(out, "| grid's best | {} | {} | 1 |", cfg(o.best), mb(o.best_rate));
    let _ = writeln!(
        out,
        "| tune's pick, in the grid run | {} | {} | **{:.3}** |",
        cfg(o.pick),
        mb(o.pick_rate_in_grid),
        o.share_in_grid
    );
    let _ = writeln!(out, "| tune's pick, in the tune run | same | {} | {:.3} |", mb(o.pick_rate_own), o.share_own);
    let (ht, hg) = (row_stats(s, "h2h", "cp-tune").rate, row_stats(s, "h2h", "cp-grid").rate);
    if let (Some(t), Some(g)) = (ht, hg) {
        let _ = writeln!(
            out,
            "| head to head, `ferry cp` × {} each, alternating (medians, wall clock) | tune: `{}`, grid: `{}` | {} vs {} MB/s | {:.3} |",
            t.n,
            tune["flags"].as_str().unwrap_or(""),
            grid["flags"].as_str().unwrap_or(""),
            fmt_summary(Some(t)),
            fmt_summary(Some(g)),
            t.median / g.median
        );
    }
    out.push('\n');
    if let Some(p) = json_of(s, "probe") {
        let rep = &p["report"];
        let m = &p["measurement"];
        let rate = match (m["bytes"].as_f64(), m["seconds"].as_f64()) {
            (Some(b), Some(t)) if t > 0.0 => format!("{:.0} Mbit/s", b / t * 8.0 / 1e6),
            _ => "–".into(),
        };
        let _ = writeln!(
            out,
            "## The path\n\n`ferry probe`: kernel RTT of the control connection {:.1} ms; a download of the virtual \
             /dev/zero at {rate} on average; bandwidth-delay product {}.\n",
            rep["rtt_ms"].as_f64().unwrap_or(f64::NAN),
            buf(rep["bdp_bytes"].as_u64()),
        );
    }
    // Every grid point.
    let trials = grid["result"]["trials"].as_array().cloned().unwrap_or_default();
    let mut streams: Vec<u64> = trials.iter().map(|t| key(&t["config"]).0).collect();
    streams.sort();
    streams.dedup();
    let mut bufs: Vec<Option<u64>> = Vec::new();
    for t in &trials {
        let b = key(&t["config"]).1;
        if !bufs.contains(&b) {
            bufs.push(b);
        }
    }
    bufs.sort();
    let _ = writeln!(
        out,
        "## Every grid point (MB/s, median of {} passes; each pass in brackets)\n",
        grid["budget"]["repeats"].as_u64().unwrap_or(1)
    );
    let _ = writeln!(
        out,
        "| streams \\ TCP buffer | {} |\n|---|{}",
        bufs.iter().map(|b| buf(*b)).collect::<Vec<_>>().join(" | "),
        "---|".repeat(bufs.len())
    );
    for st in &streams {
        let cells: Vec<String> = bufs
            .iter()
            .map(|b| {
                let Some(t) = trials.iter().find(|t| key(&t["config"]) == (*st, *b)) else { return "–".into() };
                if !t["error"].is_null() {
                    return "failed".into();
                }
                let passes: Vec<String> = t["rates"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_f64).map(|r| format!("{:.0}", r / 1e6)).collect())
                    .unwrap_or_default();
                let mut c = format!("{:.1} [{}]", t["rate"].as_f64().unwrap_or(0.0) / 1e6, passes.join(" "));
                if (*st, *b) == o.best {
                    c = format!("**{c}** best");
                }
                if (*st, *b) == o.pick {
                    c += " ← tune";
                }
                c
            })
            .collect();
        let _ = writeln!(out, "| {st} | {} |", cells.join(" | "));
    }
    let _ = writeln!(out, "\n## Tune's trials, in order\n\n| # | knob | streams | TCP buffer | MB/s | verdict |\n|---|---|---|---|---|---|");
    for t in tune["result"]["trials"].as_array().into_iter().flatten() {
        let (st, b) = key(&t["config"]);
        let verdict = if !t["error"].is_null() {
            format!("failed: {}", t["error"].as_str().unwrap_or(""))
        } else if t["accepted"].as_bool() == Some(true) && t["knob"].is_null() {
            "start".into()
        } else if t["accepted"].as_bool() == Some(true) {
            "kept".into()
        } else {
            "not enough gain".into()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {st} | {} | {:.1} | {verdict} |",
            t["index"],
            t["knob"].as_str().unwrap_or("–"),
            buf(b),
            t["rate"].as_f64().unwrap_or(0.0) / 1e6
        );
    }
    let _ = writeln!(out, "\nTune's recommendation: {}\n", tune["recommendation"].as_str().unwrap_or("–"));
    out
}

/// The plot of every grid point (median with the passes' range) beside
/// tune's own trials at the same configurations.
pub fn grid_chart(s: &ScenarioData) -> Option<(Vec<String>, Vec<Series>)> {
    let grid = json_of(s, "grid")?;
    let tune = json_of(s, "tune");
    let trials = grid["result"]["trials"].as_array()?;
    let cats: Vec<String> = trials
        .iter()
        .map(|t| {
            let (st, b) = key(&t["config"]);
            format!("{st}s {}", buf(b))
        })
        .collect();
    let mut grid_points = Vec::new();
    for (i, t) in trials.iter().enumerate() {
        let rates: Vec<f64> = t["rates"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).map(|r| r / 1e6).collect())
            .unwrap_or_default();
        if let Some(sum) = Summary::of(rates) {
            grid_points.push((i, Summary { median: t["rate"].as_f64().unwrap_or(sum.median * 1e6) / 1e6, ..sum }));
        }
    }
    let mut series =
        vec![Series { name: "grid point (median, passes' range)".into(), role: Role::Ferry, points: grid_points }];
    if let Some(tune) = tune {
        let mut points = Vec::new();
        for t in tune["result"]["trials"].as_array().into_iter().flatten() {
            if !t["error"].is_null() {
                continue;
            }
            if let Some(i) = trials.iter().position(|g| key(&g["config"]) == key(&t["config"])) {
                if let Some(r) = t["rate"].as_f64() {
                    points.push((i, Summary::of([r / 1e6]).expect("one sample")));
                }
            }
        }
        series.push(Series { name: "tune's trial (its own run)".into(), role: Role::Globus, points });
    }
    Some((cats, series))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{
        GroupInfo, Layout, Line, Outcome as RunOutcome, PlotKind, RunRecord, ScenarioInfo, VariantInfo,
    };
    use serde_json::json;

    fn trial(i: u64, streams: u64, buf: Option<u64>, rates: &[f64], knob: Option<&str>, accepted: bool) -> Value {
        let mut v = rates.to_vec();
        v.sort_by(f64::total_cmp);
        json!({"index": i, "knob": knob, "config": {"streams": streams, "tcp_buffer": buf}, "rates": rates,
               "rate": v[v.len() / 2], "error": null, "accepted": accepted})
    }

    fn data() -> ScenarioData {
        let info = ScenarioInfo {
            name: "tune".into(),
            number: "10".into(),
            title: "tune".into(),
            description: String::new(),
            layout: Layout::Tune,
            plot: PlotKind::Bars,
            reps: 2,
            mode: "quick".into(),
            started: "t".into(),
            command: "c".into(),
        };
        let v = |id: &str| VariantInfo {
            id: id.into(),
            label: id.into(),
            role: Role::Ferry,
            series: String::new(),
            not_applicable: None,
        };
        let group = |id: &str, vs: &[&str]| GroupInfo {
            scenario: "tune".into(),
            id: id.into(),
            label: id.into(),
            x: None,
            path: "p".into(),
            rtt_ms: Some(60.0),
            variants: vs.iter().map(|x| v(x)).collect(),
            comparisons: vec![],
        };
        let grid = json!({"budget": {"repeats": 2}, "flags": "-p 8", "result": {
            "best": {"streams": 8, "tcp_buffer": null}, "best_rate": 120e6,
            "trials": [trial(1, 1, None, &[90e6, 100e6], None, true), trial(2, 4, None, &[108e6, 110e6], None, true),
                       trial(3, 8, None, &[120e6, 119e6], None, true), trial(4, 8, Some(8 << 20), &[70e6, 72e6], None, true)]}});
        let tune = json!({"flags": "-p 4", "recommendation": "use -p 4", "result": {
            "best": {"streams": 4, "tcp_buffer": null}, "best_rate": 111e6,
            "trials": [trial(1, 1, None, &[95e6], None, true), trial(2, 4, None, &[111e6], Some("streams"), true),
                       trial(3, 8, None, &[112e6], Some("streams"), false)]}});
        let probe =
            json!({"report": {"rtt_ms": 60.2, "bdp_bytes": 7_500_000}, "measurement": {"bytes": 64e6, "seconds": 0.6}});
        let mut lines = vec![
            Line::Scenario(info),
            Line::Group(group("search", &["probe", "tune", "grid"])),
            Line::Group(group("h2h", &["cp-tune", "cp-grid"])),
        ];
        for (id, j) in [("probe", probe), ("tune", tune), ("grid", grid)] {
            let mut r = RunRecord::new("tune", "search", id, Phase::Main, 1);
            r.outcome = RunOutcome::Ok;
            r.extra.insert(TUNE_JSON.into(), j);
            lines.push(Line::Run(r));
        }
        for rep in 1..=2 {
            for (id, secs) in [("cp-tune", 1.0), ("cp-grid", 0.95)] {
                let mut r = RunRecord::new("tune", "h2h", id, Phase::Main, rep);
                r.outcome = RunOutcome::Ok;
                r.bytes = 100_000_000;
                r.seconds = Some(secs);
                lines.push(Line::Run(r));
            }
        }
        crate::report::collect(&lines).1.remove(0)
    }

    #[test]
    fn pick_against_grid() {
        let s = data();
        let o = outcome(&s).unwrap();
        assert_eq!(o.pick, (4, None));
        assert_eq!(o.best, (8, None));
        assert!((o.share_in_grid - 110e6 / 120e6).abs() < 1e-12, "{o:?}");
        assert!((o.share_own - 111e6 / 120e6).abs() < 1e-12);
        assert_eq!((o.tune_trials, o.grid_points), (3, 4));
        assert!(summary(&s).unwrap().contains("**Tune's pick reaches 91.7 % of the grid's best**"));
        let text = section(&s);
        assert!(text.contains("| 4 | 110.0 [108 110] ← tune |"), "{text}");
        assert!(text.contains("**120.0 [120 119]** best"), "{text}");
        assert!(text.contains("| 2 | streams | 4 | auto | 111.0 | kept |"), "{text}");
        assert!(text.contains("| 3 | streams | 8 | auto | 112.0 | not enough gain |"), "{text}");
        assert!(text.contains("tune: `-p 4`, grid: `-p 8` | 100 vs 105 MB/s | 0.950 |"), "{text}");
        assert!(text.contains("kernel RTT of the control connection 60.2 ms"), "{text}");
        let (cats, series) = grid_chart(&s).unwrap();
        assert_eq!(cats, ["1s auto", "4s auto", "8s auto", "8s 8 MiB"]);
        assert_eq!(series[0].points.len(), 4);
        assert_eq!(series[1].points.iter().map(|p| p.0).collect::<Vec<_>>(), [0, 1, 2]);
        let page = crate::report::scenario_page(&s, &[]);
        assert!(page.contains("## Tune's pick against the grid's best"));
    }
}
