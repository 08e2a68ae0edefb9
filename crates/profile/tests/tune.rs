//! The cautious sweep against synthetic throughput functions.

use ferry_profile::{exhaustive, tune, Knob, TuneConfig, TuneError, TunePlan, TuneSpace};

const MIB: u64 = 1 << 20;
const MB: f64 = 1_000_000.0;

/// Separable and concave in every knob, with an interior optimum in each:
/// 8 streams, 16 MiB buffers, 4 MiB blocks, 32 MiB staging.
fn concave(c: &TuneConfig) -> Result<f64, String> {
    let streams = match c.streams {
        1 => 0.30,
        2 => 0.55,
        4 => 0.85,
        8 => 1.00,
        16 => 0.90,
        _ => 0.0,
    };
    let buffer = match c.tcp_buffer.map(|b| b / MIB) {
        None => 0.70,
        Some(4) => 0.80,
        Some(8) => 0.92,
        Some(16) => 1.00,
        Some(32) => 0.97,
        _ => 0.5,
    };
    let block = match c.block_size / 1024 {
        256 => 0.85,
        1024 => 0.95,
        4096 => 1.00,
        16384 => 0.93,
        _ => 0.5,
    };
    let staging = match c.staging_size / MIB {
        2 => 0.80,
        8 => 0.93,
        32 => 1.00,
        64 => 0.96,
        _ => 0.5,
    };
    Ok(1000.0 * MB * streams * buffer * block * staging)
}

/// A long fat path: 30 ms RTT, 1 GB/s bottleneck. Each stream's rate is
/// its window over the RTT (autotuning stops at 4 MiB), streams cost 1%
/// each, small blocks and small staging cost CPU and stalls.
fn long_path(c: &TuneConfig) -> Result<f64, String> {
    Ok(path_with_window(c, c.tcp_buffer.unwrap_or(4 * MIB) as f64))
}

fn path_with_window(c: &TuneConfig, window: f64) -> f64 {
    let per_stream = window / 0.030;
    let net = (c.streams as f64 * per_stream).min(1000.0 * MB) * (1.0 - 0.01 * c.streams as f64);
    let block = 1.0 - 0.15 * (256.0 * 1024.0 / c.block_size as f64).min(1.0);
    let staging = (c.staging_size as f64 / (24.0 * MIB as f64)).min(1.0).powf(0.3);
    net * block * staging
}

#[test]
fn finds_the_optimum_of_a_concave_function() {
    let plan = TunePlan::new(TuneSpace::standard(None));
    let grid = exhaustive(&plan.space, concave);
    let mut calls = 0;
    let r = tune(&plan, |c: &TuneConfig| {
        calls += 1;
        concave(c)
    })
    .unwrap();
    assert_eq!(r.best, grid.best, "evidence:\n{}", r.evidence_table());
    assert_eq!(r.best_rate, grid.best_rate);
    assert!(r.trials.len() <= plan.max_trials);
    assert_eq!(calls, r.trials.len(), "each configuration is measured once");
    assert!(r.trials.len() < grid.trials.len() / 5, "{} trials of a {}-point grid", r.trials.len(), grid.trials.len());
    // docs/profiler.md quotes this: 17 trials of the 400-point grid.
    assert_eq!((r.trials.len(), grid.trials.len()), (17, 400));
    assert!(!r.budget_exhausted);
    assert_eq!(
        r.best,
        TuneConfig { streams: 8, tcp_buffer: Some(16 * MIB), block_size: 4 * MIB, staging_size: 32 * MIB }
    );
    // The evidence shows the start and every kept step.
    let table = r.evidence_table();
    assert!(table.contains("start") && table.contains("kept"), "{table}");
    assert!(r.recommendation().starts_with("Recommended: 8 streams, TCP buffer 16.0 MiB"), "{}", r.recommendation());
}

#[test]
fn reaches_90_percent_of_the_grid_on_a_long_path() {
    let plan = TunePlan::new(TuneSpace::standard(Some(3_750_000)));
    let grid = exhaustive(&plan.space, long_path);
    let r = tune(&plan, long_path).unwrap();
    assert!(
        r.best_rate >= 0.9 * grid.best_rate,
        "sweep {:.0} MB/s ({}), grid {:.0} MB/s ({})\n{}",
        r.best_rate / MB,
        r.best,
        grid.best_rate / MB,
        grid.best,
        r.evidence_table()
    );
    assert!(r.trials.len() <= plan.max_trials);
}

/// The same path, but the receiver's `net.core.rmem_max` is Debian's
/// default (212,992 bytes; SO_RCVBUF doubles it), so an explicit buffer is
/// clamped below what autotuning reaches: buffers hurt, streams must do it.
fn clamped_buffers(c: &TuneConfig) -> Result<f64, String> {
    let window = match c.tcp_buffer {
        Some(b) => b.min(425_984) as f64,
        None => 3.0 * MIB as f64,
    };
    Ok(path_with_window(c, window))
}

#[test]
fn clamped_buffers_leave_it_to_streams() {
    let plan = TunePlan::new(TuneSpace::standard(Some(3_750_000)));
    let grid = exhaustive(&plan.space, clamped_buffers);
    let r = tune(&plan, clamped_buffers).unwrap();
    assert_eq!(r.best.tcp_buffer, None, "{}", r.evidence_table());
    assert_eq!(r.best.streams, 16, "{}", r.evidence_table());
    assert!(r.best_rate >= 0.9 * grid.best_rate, "{}", r.evidence_table());
}

#[test]
fn noisy_measurements_still_land_near_the_best() {
    // ±3% deterministic noise: the 5% threshold keeps the sweep from
    // chasing it.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut noisy = |c: &TuneConfig| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let jitter = 1.0 + 0.03 * ((seed % 2001) as f64 / 1000.0 - 1.0);
        long_path(c).map(|r| r * jitter)
    };
    let mut plan = TunePlan::new(TuneSpace::standard(Some(3_750_000)));
    plan.repeats = 3;
    let r = tune(&plan, &mut noisy).unwrap();
    let grid = exhaustive(&plan.space, long_path);
    let true_rate = long_path(&r.best).unwrap();
    assert!(true_rate >= 0.9 * grid.best_rate, "{}\n{}", r.best, r.evidence_table());
    assert!(r.trials.iter().all(|t| t.rates.len() == 3));
}

#[test]
fn a_flat_function_stops_quickly() {
    let plan = TunePlan::new(TuneSpace::standard(None));
    let r = tune(&plan, |_: &TuneConfig| Ok::<f64, String>(100.0 * MB)).unwrap();
    // The start, then one step up per knob, and one step down for the two
    // knobs that start in the middle of their range (block, staging).
    assert_eq!(r.trials.len(), 1 + 4 + 2, "{}", r.evidence_table());
    assert_eq!(r.best, plan.start);
}

#[test]
fn failed_trials_are_evidence_not_the_end() {
    let plan = TunePlan::new(TuneSpace::standard(None));
    let r =
        tune(&plan, |c: &TuneConfig| if c.streams >= 4 { Err("too many connections".to_string()) } else { concave(c) })
            .unwrap();
    assert_eq!(r.best.streams, 2);
    let failed: Vec<_> = r.trials.iter().filter(|t| t.error.is_some()).collect();
    assert!(!failed.is_empty());
    assert!(failed.iter().all(|t| !t.accepted && t.rate == 0.0 && t.knob == Some(Knob::Streams)));
    assert!(r.evidence_table().contains("failed: too many connections"));
}

#[test]
fn a_failing_start_is_an_error() {
    let plan = TunePlan::new(TuneSpace::standard(None));
    let e = tune(&plan, |_: &TuneConfig| Err::<f64, _>("connection refused")).unwrap_err();
    assert!(matches!(e, TuneError::Start { .. }));
    assert!(e.to_string().contains("connection refused"));
}

#[test]
fn the_budget_is_respected() {
    let mut plan = TunePlan::new(TuneSpace::standard(None));
    plan.max_trials = 5;
    let r = tune(&plan, concave).unwrap();
    assert_eq!(r.trials.len(), 5);
    assert!(r.budget_exhausted);
    assert!(r.recommendation().contains("budget ran out"));
}
