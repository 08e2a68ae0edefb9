//! Ferry's default congestion control: a model of the path, in the manner of
//! BBR (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM
//! Queue 14(5), 2016).
//!
//! The sender keeps two numbers: the bottleneck rate (the largest delivery
//! rate measured over the last ten round trips) and the minimum RTT (over the
//! last ten seconds). It paces at the bottleneck rate times a gain that
//! cycles 1.25, 0.75, 1, 1, 1, 1, 1, 1 (one phase per minimum RTT) to probe
//! for more and drain what the probe queued, and caps the data in flight at
//! a few bandwidth-delay products. Loss does not enter the model at all: a
//! randomly lost packet does not lower the delivery rate, so 1 % random loss
//! on a long path costs about 1 % of the rate (DAIMD, like TCP, would cut its
//! rate on every loss episode). A real bottleneck still bounds the rate,
//! because delivery rate cannot exceed it.
//!
//! Without a starting rate the controller begins in a start-up phase that
//! doubles the rate every round trip (gain 2/ln 2) until the measured rate
//! stops growing by 25 % for three rounds, then drains the queue it made.
//! Given a starting rate (from `ferry probe`), it skips start-up and paces
//! at that rate from the first packet; the rate stays in the model only as
//! long as a measured rate would (ten rounds), so a wrong probe corrects
//! itself. `max_rate` caps the pacing rate (`--max-rate`).
//!
//! Not done (see docs/udt.md): BBR's PROBE_RTT phase (the minimum RTT here
//! simply expires and is re-measured) and BBRv2's loss-rate ceiling.

use super::{AckSample, CongestionControl, LossSample};
use crate::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

const STARTUP_GAIN: f64 = 2.885;
const CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
const BW_WINDOW_ROUNDS: u64 = 10;
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// In-flight cap in bandwidth-delay products. UDT acknowledges cumulatively,
/// so packets that arrived behind a hole stay "in flight" until the hole is
/// repaired one round trip later; four BDPs leave room for that and for one
/// lost retransmission.
const CWND_GAIN: f64 = 4.0;
/// UDT acknowledges every 10 ms; that delay is part of every RTT sample.
const ACK_DELAY: Duration = Duration::from_millis(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Startup,
    Drain,
    ProbeBw,
}

#[derive(Debug)]
pub struct FerryRate {
    mss: f64,
    max_window: u64,
    initial_rate: Option<f64>,
    max_rate: Option<f64>,
    phase: Phase,
    /// (round, max rate in that round), newest last, at most BW_WINDOW_ROUNDS.
    bw_rounds: VecDeque<(u64, f64)>,
    btl_bw: f64,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Time,
    round: u64,
    next_round_delivered: u64,
    full_bw: f64,
    full_bw_rounds: u32,
    cycle_index: usize,
    cycle_stamp: Time,
    in_flight: u64,
}

impl FerryRate {
    /// Rates in bytes per second.
    pub fn new(initial_rate: Option<f64>, max_rate: Option<f64>) -> FerryRate {
        FerryRate {
            mss: 1500.0,
            max_window: u64::MAX,
            initial_rate: initial_rate.filter(|r| r.is_finite() && *r > 0.0),
            max_rate: max_rate.filter(|r| r.is_finite() && *r > 0.0),
            phase: Phase::Startup,
            bw_rounds: VecDeque::new(),
            btl_bw: 0.0,
            min_rtt: None,
            min_rtt_stamp: Time::ZERO,
            round: 0,
            next_round_delivered: 0,
            full_bw: 0.0,
            full_bw_rounds: 0,
            cycle_index: 0,
            cycle_stamp: Time::ZERO,
            in_flight: 0,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The modelled bottleneck rate, bytes per second.
    pub fn bottleneck_rate(&self) -> f64 {
        self.btl_bw
    }

    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    fn rtt_or_default(&self) -> Duration {
        self.min_rtt.unwrap_or(Duration::from_millis(100))
    }

    fn bdp(&self) -> f64 {
        self.btl_bw * (self.rtt_or_default() + ACK_DELAY).as_secs_f64()
    }

    fn update_bw(&mut self, sample: f64) {
        match self.bw_rounds.back_mut() {
            Some((r, v)) if *r == self.round => *v = v.max(sample),
            _ => self.bw_rounds.push_back((self.round, sample)),
        }
        while self.bw_rounds.front().is_some_and(|(r, _)| r + BW_WINDOW_ROUNDS <= self.round) {
            self.bw_rounds.pop_front();
        }
        self.btl_bw = self.bw_rounds.iter().map(|&(_, v)| v).fold(0.0, f64::max);
    }

    fn gain(&self) -> f64 {
        match self.phase {
            Phase::Startup => STARTUP_GAIN,
            Phase::Drain => 1.0 / STARTUP_GAIN,
            Phase::ProbeBw => CYCLE[self.cycle_index],
        }
    }
}

impl CongestionControl for FerryRate {
    fn name(&self) -> &'static str {
        "ferry"
    }

    fn init(&mut self, now: Time, mss: u64, max_window: u64, _first_pn: u64, rtt: Option<Duration>) {
        self.mss = mss.max(1) as f64;
        self.max_window = max_window;
        if let Some(r) = rtt {
            self.min_rtt = Some(r);
            self.min_rtt_stamp = now;
        }
        if let Some(rate) = self.initial_rate {
            // Treat the probe's figure as this round's sample: it ages out
            // of the window like any measurement.
            self.update_bw(rate);
            self.phase = Phase::ProbeBw;
            // start in a cruising phase, not the 1.25 probe
            self.cycle_index = 2;
            self.cycle_stamp = now;
        }
    }

    fn on_sent(&mut self, _now: Time, _pn: u64, _bytes: u64, bytes_in_flight: u64) {
        self.in_flight = bytes_in_flight;
    }

    fn set_max_window(&mut self, bytes: u64) {
        self.max_window = bytes;
    }

    fn on_ack(&mut self, ack: &AckSample) {
        self.in_flight = ack.bytes_in_flight;
        let now = ack.now;
        if let Some(rtt) = ack.rtt_sample {
            let expired = now.saturating_since(self.min_rtt_stamp) > MIN_RTT_WINDOW;
            if self.min_rtt.is_none_or(|m| rtt <= m) || expired {
                self.min_rtt = Some(rtt);
                self.min_rtt_stamp = now;
            }
        }
        let mut round_start = false;
        if let Some(rs) = ack.rate {
            if rs.prior_delivered >= self.next_round_delivered {
                self.next_round_delivered = ack.delivered;
                self.round += 1;
                round_start = true;
            }
            if !rs.app_limited || rs.rate >= self.btl_bw {
                self.update_bw(rs.rate);
            } else if self.bw_rounds.front().is_some_and(|(r, _)| r + BW_WINDOW_ROUNDS <= self.round) {
                self.update_bw(0.0);
            }
        }
        match self.phase {
            Phase::Startup => {
                if round_start {
                    if self.btl_bw >= self.full_bw * 1.25 {
                        self.full_bw = self.btl_bw;
                        self.full_bw_rounds = 0;
                    } else {
                        self.full_bw_rounds += 1;
                        if self.full_bw_rounds >= 3 {
                            self.phase = Phase::Drain;
                        }
                    }
                }
            }
            Phase::Drain => {
                if (self.in_flight as f64) <= self.bdp() {
                    self.phase = Phase::ProbeBw;
                    self.cycle_index = 2;
                    self.cycle_stamp = now;
                }
            }
            Phase::ProbeBw => {
                let phase_len = self.rtt_or_default();
                let mut advance = now.saturating_since(self.cycle_stamp) > phase_len;
                // leave the draining phase early once the queue is gone
                if CYCLE[self.cycle_index] < 1.0 && (self.in_flight as f64) <= self.bdp() {
                    advance = true;
                }
                if advance {
                    self.cycle_index = (self.cycle_index + 1) % CYCLE.len();
                    self.cycle_stamp = now;
                }
            }
        }
    }

    fn on_loss(&mut self, loss: &LossSample) {
        // Loss is not a congestion signal in this model (see the module doc).
        self.in_flight = loss.bytes_in_flight;
    }

    fn pacing_rate(&self) -> f64 {
        let rate = if self.btl_bw > 0.0 {
            self.btl_bw * self.gain()
        } else {
            // Nothing measured yet: ten packets per RTT, doubled by the
            // start-up gain, like a TCP initial window.
            10.0 * self.mss / self.rtt_or_default().as_secs_f64() * STARTUP_GAIN
        };
        match self.max_rate {
            Some(m) => rate.min(m),
            None => rate,
        }
    }

    fn describe(&self) -> String {
        format!(
            "ferry {:?} btl_bw {:.0} B/s min_rtt {:?} gain {} rate {:.0} window {} round {}",
            self.phase,
            self.btl_bw,
            self.min_rtt,
            self.gain(),
            self.pacing_rate(),
            self.window(),
            self.round
        )
    }

    fn window(&self) -> u64 {
        let floor = 16.0 * self.mss;
        let w = if self.btl_bw > 0.0 {
            let gain = if self.phase == Phase::Startup { STARTUP_GAIN.max(CWND_GAIN) } else { CWND_GAIN };
            (self.bdp() * gain).max(floor)
        } else {
            // before the first sample: pacing limits, the window only guards
            (64.0 * self.mss).max(floor)
        };
        (w as u64).min(self.max_window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::RateSample;

    fn ack(now_ms: u64, delivered: u64, prior: u64, rate: f64, rtt_ms: u64) -> AckSample {
        AckSample {
            now: Time(now_ms * 1_000_000),
            acked_bytes: 1500,
            ack_point: 0,
            delivered,
            bytes_in_flight: 0,
            rtt_sample: Some(Duration::from_millis(rtt_ms)),
            smoothed_rtt: Duration::from_millis(rtt_ms),
            rate: Some(RateSample {
                rate,
                interval: Duration::from_millis(rtt_ms),
                app_limited: false,
                prior_delivered: prior,
            }),
            peer_receive_rate: None,
            link_capacity: None,
        }
    }

    #[test]
    fn starts_at_the_probed_rate() {
        let mut f = FerryRate::new(Some(100e6), None);
        f.init(Time(0), 1500, u64::MAX, 0, Some(Duration::from_millis(160)));
        assert_eq!(f.phase(), Phase::ProbeBw);
        assert_eq!(f.pacing_rate(), 100e6);
        assert!(f.window() as f64 > 100e6 * 0.16 * 3.0);
    }

    #[test]
    fn loss_does_not_lower_the_rate() {
        let mut f = FerryRate::new(Some(100e6), None);
        f.init(Time(0), 1500, u64::MAX, 0, Some(Duration::from_millis(160)));
        let before = f.pacing_rate();
        for i in 0..100 {
            f.on_loss(&LossSample {
                now: Time(i),
                first_lost: i,
                lost_packets: 1,
                lost_bytes: 1500,
                largest_sent: 1000,
                bytes_in_flight: 0,
            });
        }
        assert_eq!(f.pacing_rate(), before);
    }

    #[test]
    fn startup_finds_the_bottleneck_then_cruises() {
        let mut f = FerryRate::new(None, Some(200e6));
        f.init(Time(0), 1500, u64::MAX, 0, None);
        assert_eq!(f.phase(), Phase::Startup);
        let mut delivered = 0;
        let mut rate = 1e6;
        for round in 0..20u64 {
            let prior = delivered;
            delivered += 1_000_000;
            rate = (rate * 2.0f64).min(50e6); // the path saturates at 50 MB/s
            f.on_ack(&ack(round * 100, delivered, prior, rate, 100));
        }
        assert_eq!(f.phase(), Phase::ProbeBw);
        assert!((f.bottleneck_rate() - 50e6).abs() < 1.0);
        assert!(f.pacing_rate() <= 50e6 * 1.25 + 1.0);
    }

    #[test]
    fn a_wrong_probe_ages_out() {
        let mut f = FerryRate::new(Some(500e6), None);
        f.init(Time(0), 1500, u64::MAX, 0, Some(Duration::from_millis(50)));
        let mut delivered = 0;
        for round in 0..12u64 {
            let prior = delivered;
            delivered += 1_000_000;
            f.on_ack(&ack(round * 50, delivered, prior, 20e6, 50));
        }
        assert!((f.bottleneck_rate() - 20e6).abs() < 1.0, "{}", f.bottleneck_rate());
    }
}
