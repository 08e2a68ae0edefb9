//! The cautious sweep behind `ferry tune`: one knob at a time, grow while
//! throughput rises by more than a threshold, stop when it does not (the
//! TCP buffer is probed from its largest size down instead; see
//! `probe_largest`).
//!
//! Why this shape rather than a search over the whole grid: every trial is
//! a real transfer over a real (often shared, often expensive) path, so the
//! budget is a few dozen trials at most; and the knobs are close to
//! monotone with diminishing returns (more streams or more buffer help until
//! the path is full, then cost memory and fairness). Walking each knob
//! upward from a modest start and keeping a step only if it buys at least
//! `min_gain` finds the knee of each curve and recommends the smallest
//! settings that reach it. The result is within `min_gain` of the best
//! configuration it measured, by construction: any trial that beat the
//! current choice by more than that would have been accepted.
//!
//! The measuring function is the caller's (a real transfer in `ferry tune`,
//! a formula in the tests); [`exhaustive`] runs the full grid with the same
//! function so the benchmark can check the sweep against it.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::units::{format_bytes, format_rate_both};

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

/// The four knobs `ferry tune` turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Knob {
    Streams,
    TcpBuffer,
    BlockSize,
    StagingSize,
}

impl Knob {
    pub fn label(self) -> &'static str {
        match self {
            Knob::Streams => "parallel streams",
            Knob::TcpBuffer => "TCP buffer",
            Knob::BlockSize => "block size",
            Knob::StagingSize => "staging size",
        }
    }
}

/// One point of the search space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TuneConfig {
    pub streams: u32,
    /// Socket buffer size in bytes; `None` leaves it to the kernel's
    /// autotuning (which only setting no size achieves).
    pub tcp_buffer: Option<u64>,
    pub block_size: u64,
    pub staging_size: u64,
}

impl TuneConfig {
    fn key(&self, knob: Knob) -> u64 {
        match knob {
            Knob::Streams => self.streams as u64,
            Knob::TcpBuffer => self.tcp_buffer.unwrap_or(0),
            Knob::BlockSize => self.block_size,
            Knob::StagingSize => self.staging_size,
        }
    }

    fn with(mut self, knob: Knob, key: u64) -> TuneConfig {
        match knob {
            Knob::Streams => self.streams = key as u32,
            Knob::TcpBuffer => self.tcp_buffer = (key != 0).then_some(key),
            Knob::BlockSize => self.block_size = key,
            Knob::StagingSize => self.staging_size = key,
        }
        self
    }
}

impl fmt::Display for TuneConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let buf = self.tcp_buffer.map(format_bytes).unwrap_or_else(|| "auto".into());
        write!(
            f,
            "{} stream{}, TCP buffer {buf}, block {}, staging {}",
            self.streams,
            if self.streams == 1 { "" } else { "s" },
            format_bytes(self.block_size),
            format_bytes(self.staging_size)
        )
    }
}

/// The values each knob may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneSpace {
    pub streams: Vec<u32>,
    /// `None` is autotuning and always comes first.
    pub tcp_buffers: Vec<Option<u64>>,
    pub block_sizes: Vec<u64>,
    pub staging_sizes: Vec<u64>,
}

impl TuneSpace {
    /// The space: 1–16 streams; TCP buffer auto, the path's BDP
    /// (if known) and 4–32 MiB; blocks of 256 KiB–16 MiB; staging of
    /// 2–64 MiB (DESIGN.md's range).
    pub fn standard(bdp_bytes: Option<u64>) -> TuneSpace {
        let mut buffers: Vec<u64> = vec![4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB];
        if let Some(bdp) = bdp_bytes {
            let bdp = bdp.clamp(64 * KIB, 256 * MIB);
            // A BDP within 10% of a listed size adds nothing but a trial.
            if !buffers.iter().any(|&b| (b as f64 - bdp as f64).abs() < 0.1 * b as f64) {
                buffers.push(bdp);
            }
        }
        buffers.sort_unstable();
        let mut tcp_buffers = vec![None];
        tcp_buffers.extend(buffers.into_iter().map(Some));
        TuneSpace {
            streams: vec![1, 2, 4, 8, 16],
            tcp_buffers,
            block_sizes: vec![256 * KIB, MIB, 4 * MIB, 16 * MIB],
            staging_sizes: vec![2 * MIB, 8 * MIB, 32 * MIB, 64 * MIB],
        }
    }

    fn keys(&self, knob: Knob) -> Vec<u64> {
        let mut v: Vec<u64> = match knob {
            Knob::Streams => self.streams.iter().map(|&s| s as u64).collect(),
            Knob::TcpBuffer => self.tcp_buffers.iter().map(|b| b.unwrap_or(0)).collect(),
            Knob::BlockSize => self.block_sizes.clone(),
            Knob::StagingSize => self.staging_sizes.clone(),
        };
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Number of points in the full grid.
    pub fn grid_size(&self) -> usize {
        [Knob::Streams, Knob::TcpBuffer, Knob::BlockSize, Knob::StagingSize]
            .iter()
            .map(|&k| self.keys(k).len())
            .product()
    }
}

/// How to search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunePlan {
    pub space: TuneSpace,
    /// Where to start; every value must be in `space` (it is added if not).
    pub start: TuneConfig,
    /// Knobs in the order they are swept. The TCP buffer comes first: with
    /// one stream it shows whether the path can be filled by a window alone,
    /// which takes fewer connections than filling it with streams (and
    /// streams first would saturate the link and hide any buffer effect).
    pub order: Vec<Knob>,
    /// A step is kept only if it raises throughput by more than this
    /// fraction (0.05 = 5%), which also absorbs measurement noise.
    pub min_gain: f64,
    /// Consecutive steps without gain before a knob's walk stops (1 = stop
    /// at the first step that does not help).
    pub patience: u32,
    /// At most this many distinct configurations are measured.
    pub max_trials: usize,
    /// Each configuration is measured this many times; the median counts.
    pub repeats: u32,
    /// Sweeps over all knobs; a later pass revisits knobs whose best value
    /// may have moved because another knob changed. Stops early when a pass
    /// changes nothing.
    pub passes: u32,
}

impl TunePlan {
    /// A plan over `space` with the defaults: start at one stream,
    /// autotuned buffers, 1 MiB blocks, 8 MiB staging (or the nearest
    /// listed values), 5% minimum gain, patience 1, 24 trials, 2 passes.
    pub fn new(space: TuneSpace) -> TunePlan {
        let nearest = |v: &[u64], want: u64| v.iter().copied().min_by_key(|&x| x.abs_diff(want)).unwrap_or(want);
        let start = TuneConfig {
            streams: space.keys(Knob::Streams).first().copied().unwrap_or(1) as u32,
            tcp_buffer: space.keys(Knob::TcpBuffer).first().and_then(|&b| (b != 0).then_some(b)),
            block_size: nearest(&space.keys(Knob::BlockSize), MIB),
            staging_size: nearest(&space.keys(Knob::StagingSize), 8 * MIB),
        };
        TunePlan {
            space,
            start,
            order: vec![Knob::TcpBuffer, Knob::Streams, Knob::BlockSize, Knob::StagingSize],
            min_gain: 0.05,
            patience: 1,
            max_trials: 24,
            repeats: 1,
            passes: 2,
        }
    }
}

/// One measured configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// 1-based, in the order measured.
    pub index: usize,
    /// The knob being swept when this was measured; `None` for the start.
    pub knob: Option<Knob>,
    pub config: TuneConfig,
    /// Every measurement (bytes/s), `repeats` of them.
    pub rates: Vec<f64>,
    /// Their median; 0 if the trial failed.
    pub rate: f64,
    pub error: Option<String>,
    /// The sweep moved to this configuration.
    pub accepted: bool,
}

/// The evidence and the recommendation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneResult {
    pub trials: Vec<Trial>,
    pub best: TuneConfig,
    pub best_rate: f64,
    pub start_rate: f64,
    /// The trial budget ran out before every walk had stopped by itself.
    pub budget_exhausted: bool,
    pub min_gain: f64,
}

/// Why a sweep could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// The starting configuration failed, so there is nothing to compare against.
    #[error("the starting configuration ({config}) failed: {error}")]
    Start { config: TuneConfig, error: String },
    #[error("the tuning space has a knob with no values")]
    EmptySpace,
}

struct Search<'a, F> {
    plan: &'a TunePlan,
    measure: F,
    memo: HashMap<TuneConfig, usize>,
    trials: Vec<Trial>,
    budget_exhausted: bool,
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl<F, E> Search<'_, F>
where
    F: FnMut(&TuneConfig) -> Result<f64, E>,
    E: fmt::Display,
{
    /// Measures a configuration (once; later asks are answered from memory).
    /// `None` when the budget is spent.
    fn eval(&mut self, config: TuneConfig, knob: Option<Knob>) -> Option<usize> {
        if let Some(&i) = self.memo.get(&config) {
            return Some(i);
        }
        if self.trials.len() >= self.plan.max_trials.max(1) {
            self.budget_exhausted = true;
            return None;
        }
        let mut rates = Vec::new();
        let mut error = None;
        for _ in 0..self.plan.repeats.max(1) {
            match (self.measure)(&config) {
                Ok(r) if r.is_finite() && r >= 0.0 => rates.push(r),
                Ok(r) => {
                    error = Some(format!("invalid rate {r}"));
                    break;
                }
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            }
        }
        let rate = if error.is_some() { 0.0 } else { median(&mut rates.clone()) };
        let index = self.trials.len();
        self.trials.push(Trial { index: index + 1, knob, config, rates, rate, error, accepted: false });
        self.memo.insert(config, index);
        Some(index)
    }

    /// The TCP buffer's walk. Buffers below the kernel's autotuning limit
    /// perform like "auto" (it grows to them anyway), so growing step by step
    /// from auto stalls on that plateau before reaching the sizes that
    /// matter. Instead: try the largest size; if it does not beat the
    /// current setting, buffers are not the limit (or the peer's
    /// `rmem_max` clamps them) and nothing changes; if it does, step down
    /// while each smaller size stays within `min_gain` of it, and keep the
    /// smallest such size.
    fn probe_largest(&mut self, knob: Knob, current: usize) -> (usize, bool) {
        let keys = self.plan.space.keys(knob);
        let here = self.trials[current].config.key(knob);
        let Some(&top) = keys.last().filter(|&&k| k != here) else { return (current, false) };
        let Some(t) = self.eval(self.trials[current].config.with(knob, top), Some(knob)) else {
            return (current, false);
        };
        let top_rate = self.trials[t].rate;
        if self.trials[t].error.is_some() || top_rate <= self.trials[current].rate * (1.0 + self.plan.min_gain) {
            return (current, false);
        }
        let mut chosen = t;
        for &k in keys.iter().rev().skip(1) {
            if k == 0 || k == here {
                break; // auto, or back where we started: already known to be worse
            }
            let Some(i) = self.eval(self.trials[current].config.with(knob, k), Some(knob)) else { break };
            if self.trials[i].error.is_some() || self.trials[i].rate * (1.0 + self.plan.min_gain) < top_rate {
                break;
            }
            chosen = i;
        }
        self.trials[chosen].accepted = true;
        (chosen, true)
    }

    /// Walks one knob from `current` in direction `dir`; returns the new
    /// current trial index and whether it moved.
    fn walk(&mut self, knob: Knob, current: usize, dir: isize) -> (usize, bool) {
        let keys = self.plan.space.keys(knob);
        let mut cur = current;
        let mut pos = keys.iter().position(|&k| k == self.trials[cur].config.key(knob)).unwrap_or(0) as isize;
        let mut misses = 0;
        let mut moved = false;
        loop {
            pos += dir;
            if pos < 0 || pos as usize >= keys.len() {
                break;
            }
            let cand = self.trials[cur].config.with(knob, keys[pos as usize]);
            let Some(i) = self.eval(cand, Some(knob)) else { break };
            if self.trials[i].error.is_none()
                && self.trials[i].rate > self.trials[cur].rate * (1.0 + self.plan.min_gain)
            {
                self.trials[i].accepted = true;
                cur = i;
                moved = true;
                misses = 0;
            } else {
                misses += 1;
                if misses >= self.plan.patience.max(1) {
                    break;
                }
            }
        }
        (cur, moved)
    }
}

/// Runs the cautious sweep. `measure` returns bytes per second for a
/// configuration (an error marks that trial failed, it does not end the sweep).
pub fn tune<F, E>(plan: &TunePlan, measure: F) -> Result<TuneResult, TuneError>
where
    F: FnMut(&TuneConfig) -> Result<f64, E>,
    E: fmt::Display,
{
    let mut plan = plan.clone();
    for knob in [Knob::Streams, Knob::TcpBuffer, Knob::BlockSize, Knob::StagingSize] {
        if plan.space.keys(knob).is_empty() {
            return Err(TuneError::EmptySpace);
        }
    }
    // Make sure the start is a point of the space, so walks can find it.
    let s = plan.start;
    if !plan.space.streams.contains(&s.streams) {
        plan.space.streams.push(s.streams);
    }
    if !plan.space.tcp_buffers.contains(&s.tcp_buffer) {
        plan.space.tcp_buffers.push(s.tcp_buffer);
    }
    if !plan.space.block_sizes.contains(&s.block_size) {
        plan.space.block_sizes.push(s.block_size);
    }
    if !plan.space.staging_sizes.contains(&s.staging_size) {
        plan.space.staging_sizes.push(s.staging_size);
    }
    let mut search = Search { plan: &plan, measure, memo: HashMap::new(), trials: Vec::new(), budget_exhausted: false };
    let start = search.eval(plan.start, None).ok_or(TuneError::EmptySpace)?;
    if let Some(e) = &search.trials[start].error {
        return Err(TuneError::Start { config: plan.start, error: e.clone() });
    }
    search.trials[start].accepted = true;
    let mut cur = start;
    for _ in 0..plan.passes.max(1) {
        let mut changed = false;
        for &knob in &plan.order {
            if knob == Knob::TcpBuffer {
                let (c, moved) = search.probe_largest(knob, cur);
                cur = c;
                changed |= moved;
                continue;
            }
            let (c, up) = search.walk(knob, cur, 1);
            cur = c;
            changed |= up;
            if !up {
                let (c, down) = search.walk(knob, cur, -1);
                cur = c;
                changed |= down;
            }
        }
        if !changed || search.budget_exhausted {
            break;
        }
    }
    Ok(TuneResult {
        best: search.trials[cur].config,
        best_rate: search.trials[cur].rate,
        start_rate: search.trials[start].rate,
        budget_exhausted: search.budget_exhausted,
        min_gain: plan.min_gain,
        trials: search.trials,
    })
}

/// Measures every point of the space (for the benchmark's check of the
/// sweep, and for small spaces). The best is the highest median.
pub fn exhaustive<F, E>(space: &TuneSpace, mut measure: F) -> TuneResult
where
    F: FnMut(&TuneConfig) -> Result<f64, E>,
    E: fmt::Display,
{
    let mut trials = Vec::new();
    for &streams in &space.keys(Knob::Streams) {
        for &buf in &space.keys(Knob::TcpBuffer) {
            for &block in &space.keys(Knob::BlockSize) {
                for &staging in &space.keys(Knob::StagingSize) {
                    let config = TuneConfig {
                        streams: streams as u32,
                        tcp_buffer: (buf != 0).then_some(buf),
                        block_size: block,
                        staging_size: staging,
                    };
                    let (rates, rate, error) = match measure(&config) {
                        Ok(r) => (vec![r], r, None),
                        Err(e) => (vec![], 0.0, Some(e.to_string())),
                    };
                    trials.push(Trial {
                        index: trials.len() + 1,
                        knob: None,
                        config,
                        rates,
                        rate,
                        error,
                        accepted: false,
                    });
                }
            }
        }
    }
    let best = trials.iter().enumerate().max_by(|a, b| a.1.rate.total_cmp(&b.1.rate)).map(|(i, _)| i).unwrap_or(0);
    if let Some(t) = trials.get_mut(best) {
        t.accepted = true;
    }
    let start_rate = trials.first().map(|t| t.rate).unwrap_or(0.0);
    TuneResult {
        best: trials.get(best).map(|t| t.config).unwrap_or(TuneConfig {
            streams: 1,
            tcp_buffer: None,
            block_size: MIB,
            staging_size: 8 * MIB,
        }),
        best_rate: trials.get(best).map(|t| t.rate).unwrap_or(0.0),
        start_rate,
        budget_exhausted: false,
        min_gain: 0.0,
        trials,
    }
}

impl TuneResult {
    /// The evidence as a plain-text table, one line per trial.
    pub fn evidence_table(&self) -> String {
        let mut rows = vec![vec![
            "#".to_string(),
            "knob".into(),
            "streams".into(),
            "TCP buffer".into(),
            "block".into(),
            "staging".into(),
            "throughput".into(),
            "vs start".into(),
            "verdict".into(),
        ]];
        for t in &self.trials {
            let verdict = match (&t.error, t.accepted, t.knob) {
                (Some(e), _, _) => format!("failed: {e}"),
                (None, true, None) => "start".into(),
                (None, true, Some(_)) => "kept".into(),
                (None, false, _) => format!("< +{:.0}%", self.min_gain * 100.0),
            };
            rows.push(vec![
                t.index.to_string(),
                t.knob.map(|k| k.label().to_string()).unwrap_or_else(|| "—".into()),
                t.config.streams.to_string(),
                t.config.tcp_buffer.map(format_bytes).unwrap_or_else(|| "auto".into()),
                format_bytes(t.config.block_size),
                format_bytes(t.config.staging_size),
                format_rate_both(t.rate),
                if self.start_rate > 0.0 { format!("{:.2}×", t.rate / self.start_rate) } else { "—".into() },
                verdict,
            ]);
        }
        crate::report::text_table(&rows)
    }

    /// One paragraph: what to use and the evidence for it.
    pub fn recommendation(&self) -> String {
        let mut s = format!(
            "Recommended: {} — {} ({:.2}× the starting point), from {} trial{}",
            self.best,
            format_rate_both(self.best_rate),
            if self.start_rate > 0.0 { self.best_rate / self.start_rate } else { 0.0 },
            self.trials.len(),
            if self.trials.len() == 1 { "" } else { "s" },
        );
        if self.budget_exhausted {
            s.push_str("; the trial budget ran out, so a larger budget may find more");
        }
        s.push('.');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_space_places_bdp() {
        let s = TuneSpace::standard(Some(4_000_000));
        // 4 MB is within 10% of 4 MiB, so it adds no trial.
        assert_eq!(s.tcp_buffers, vec![None, Some(4 * MIB), Some(8 * MIB), Some(16 * MIB), Some(32 * MIB)]);
        let s = TuneSpace::standard(Some(100 * MIB));
        assert_eq!(s.tcp_buffers.last(), Some(&Some(100 * MIB)));
        assert_eq!(s.grid_size(), 5 * 6 * 4 * 4);
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
