//! How many transfers (and streams each) a link runs at once, adapted to
//! what the link delivers — in the manner of FTS3's optimiser.
//!
//! Every interval one node measures the link: the bytes all nodes moved on
//! it since the last decision (their progress counters, so long files count
//! while they run), and the attempts that ended (for the success rate).
//! Throughput is smoothed with an exponential moving average; then:
//!
//! 1. a success rate below 90 % (over at least a few attempts) takes a step
//!    back — two below 80 % — because more concurrency on a failing link
//!    makes it fail faster;
//! 2. otherwise a smoothed throughput more than 5 % below the last one
//!    takes one transfer away (the link or an endpoint is saturated);
//! 3. otherwise, while files are waiting, one more transfer is tried —
//!    FTS3 also probes upwards while throughput holds — and at the link's
//!    ceiling, one more stream per transfer instead;
//! 4. nothing waiting: the setting stays.
//!
//! Steps are small (one, or two on a bad success rate) so one noisy sample
//! cannot swing the link, and every decision carries the reason it was
//! made, stored and shown. This module is a pure function of its inputs so
//! it is tested with made-up samples, no clocks or sockets.

use serde::Serialize;

/// Bounds the optimiser works within.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub min_active: u32,
    pub max_active: u32,
    pub max_streams: u32,
    /// Weight of the newest sample in the moving average.
    pub alpha: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { min_active: 2, max_active: 16, max_streams: 8, alpha: 0.5 }
    }
}

/// What the link is set to now.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Setting {
    pub active: u32,
    pub streams: u32,
    /// Smoothed throughput, bytes per second (0 before the first sample).
    pub ema: f64,
}

/// One interval's measurements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    /// Bytes per second moved on the link during the interval.
    pub throughput: f64,
    /// Attempts that ended during the interval, and how many succeeded.
    pub attempts: u32,
    pub succeeded: u32,
    /// Files waiting (queued) and running on the link.
    pub queued: u64,
    pub running: u64,
}

/// A decision and why it was made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub setting: Setting,
    pub reason: String,
}

fn mbps(b: f64) -> String {
    format!("{:.1} MB/s", b / 1e6)
}

/// A decision's kind, for metrics: the first words of its reason.
pub fn kind(reason: &str) -> &'static str {
    const KINDS: [(&str, &str); 7] = [
        ("idle", "idle"),
        ("success rate", "success_rate"),
        ("throughput fell", "decrease"),
        ("throughput held", "increase"),
        ("at the link's limit of", "more_streams"),
        ("nothing waiting", "steady"),
        ("only", "underused"),
    ];
    KINDS.iter().find(|(p, _)| reason.starts_with(p)).map_or("ceiling", |(_, k)| k)
}

/// Decides the link's next setting.
pub fn decide(prev: Setting, s: Sample, limits: Limits) -> Decision {
    let ema =
        if prev.ema == 0.0 { s.throughput } else { limits.alpha * s.throughput + (1.0 - limits.alpha) * prev.ema };
    let clamp = |a: i64| a.clamp(limits.min_active as i64, limits.max_active as i64) as u32;
    let mut next =
        Setting { active: clamp(prev.active as i64), streams: prev.streams.clamp(1, limits.max_streams), ema };
    let rate = (s.attempts > 0).then(|| s.succeeded as f64 / s.attempts as f64);
    let reason;
    if s.queued == 0 && s.running == 0 {
        reason = "idle: nothing queued or running; setting kept".to_string();
    } else if let Some(r) = rate.filter(|_| s.attempts >= 3).filter(|r| *r < 0.9) {
        let step = if r < 0.8 { 2 } else { 1 };
        next.active = clamp(prev.active as i64 - step);
        reason = format!(
            "success rate {:.0}% ({} of {} attempts) is below 90%: {} active {} -> {}",
            r * 100.0,
            s.succeeded,
            s.attempts,
            if step == 2 { "two fewer" } else { "one fewer" },
            prev.active,
            next.active
        );
    } else if prev.ema > 0.0 && ema < prev.ema * 0.95 {
        next.active = clamp(prev.active as i64 - 1);
        if next.active == prev.active && prev.streams > 1 {
            next.streams = prev.streams - 1;
        }
        reason = format!(
            "throughput fell: EMA {} -> {} (sample {}): active {} -> {}, streams {} -> {}",
            mbps(prev.ema),
            mbps(ema),
            mbps(s.throughput),
            prev.active,
            next.active,
            prev.streams,
            next.streams
        );
    } else if s.queued == 0 {
        reason = format!("nothing waiting: active {} kept (EMA {})", next.active, mbps(ema));
    } else if (s.running as u32) < prev.active {
        // The link did not even use what it had: more would not be measured.
        reason = format!("only {} of {} allowed transfers running: kept (EMA {})", s.running, prev.active, mbps(ema));
    } else if prev.active < limits.max_active {
        next.active = clamp(prev.active as i64 + 1);
        reason = format!(
            "throughput held or rose (EMA {} -> {}) with {} waiting: active {} -> {}",
            mbps(prev.ema),
            mbps(ema),
            s.queued,
            prev.active,
            next.active
        );
    } else if prev.streams < limits.max_streams && ema >= prev.ema {
        next.streams = prev.streams + 1;
        reason = format!(
            "at the link's limit of {} active and throughput held (EMA {}): streams {} -> {}",
            limits.max_active,
            mbps(ema),
            prev.streams,
            next.streams
        );
    } else {
        reason = format!("at the link's limits ({} active, {} streams): kept", next.active, next.streams);
    }
    Decision { setting: next, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(mb: f64, attempts: u32, ok: u32, queued: u64, running: u64) -> Sample {
        Sample { throughput: mb * 1e6, attempts, succeeded: ok, queued, running }
    }
    const L: Limits = Limits { min_active: 2, max_active: 6, max_streams: 4, alpha: 0.5 };

    #[test]
    fn probes_upwards_while_throughput_holds_and_backs_off_when_it_falls() {
        let mut s = Setting { active: 2, streams: 1, ema: 0.0 };
        for mb in [10.0, 20.0, 30.0] {
            let d = decide(s, sample(mb, 2, 2, 100, s.active as u64), L);
            assert!(d.setting.active == s.active + 1, "{}", d.reason);
            s = d.setting;
        }
        assert_eq!(s.active, 5);
        let d = decide(s, sample(5.0, 2, 2, 100, 5), L);
        assert_eq!(d.setting.active, 4, "{}", d.reason);
        assert!(d.reason.starts_with("throughput fell"), "{}", d.reason);
    }

    #[test]
    fn a_failing_link_steps_back_by_its_success_rate() {
        let s = Setting { active: 6, streams: 2, ema: 50e6 };
        let d = decide(s, sample(50.0, 10, 7, 100, 6), L);
        assert_eq!(d.setting.active, 4, "{}", d.reason);
        assert!(d.reason.contains("70%"), "{}", d.reason);
        let d = decide(s, sample(50.0, 10, 85, 100, 6).with_ok(17, 20), L);
        assert_eq!(d.setting.active, 5, "{}", d.reason);
        // Too few attempts to judge: two failures of two do not count.
        let d = decide(s, sample(50.0, 2, 0, 100, 6), L);
        assert_ne!(d.setting.active, 4, "{}", d.reason);
    }

    #[test]
    fn at_the_ceiling_it_adds_streams_and_idle_links_keep_their_setting() {
        let s = Setting { active: 6, streams: 1, ema: 50e6 };
        let d = decide(s, sample(52.0, 3, 3, 10, 6), L);
        assert_eq!((d.setting.active, d.setting.streams), (6, 2), "{}", d.reason);
        let d = decide(s, sample(0.0, 0, 0, 0, 0), L);
        assert_eq!(d.setting.active, 6);
        assert!(d.reason.starts_with("idle"));
        let d = decide(Setting { active: 4, ..s }, sample(50.0, 3, 3, 10, 1), L);
        assert_eq!(d.setting.active, 4, "{}", d.reason);
    }

    impl Sample {
        fn with_ok(mut self, ok: u32, attempts: u32) -> Self {
            self.succeeded = ok;
            self.attempts = attempts;
            self
        }
    }
}
