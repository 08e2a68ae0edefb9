//! UDT's native congestion control, as libudt 4.11's `CUDTCC` (`ccc.cpp`)
//! behaves, restated in the units of [`CongestionControl`].
//!
//! * The rate is a packet sending period; every rate-control interval
//!   (SYN = 10 ms) without a loss the period shrinks so the rate grows by
//!   `inc` packets per interval, where `inc` scales with the spare capacity
//!   `B = link capacity − current rate` as `10^⌈log10(B·MSS·8)⌉ · 1.5e-6 / MSS`
//!   packets (at least 0.01) — large steps far below capacity, small near it.
//! * On a NAK whose first loss is newer than the last decrease, the period is
//!   multiplied by 1.125 (rate × 8/9); further NAKs of the same congestion
//!   episode decrease it again at random intervals (every `DecRandom`-th NAK,
//!   at most 5 times: 0.875^5 ≈ 0.51).
//! * Slow start grows a window by the packets acknowledged, with the period
//!   at 1 µs, until the window exceeds the receiver's flow window or a loss
//!   comes; then the period becomes 1/receive-rate. After slow start the
//!   window is `receive rate · (RTT + SYN) + 16` packets.
//! * A timeout ends slow start and otherwise changes nothing.

use super::{AckSample, CongestionControl, LossSample};
use crate::time::Time;
use std::time::Duration;

const SYN_US: f64 = 10_000.0;

#[derive(Debug)]
pub struct Daimd {
    mss: f64,
    period_us: f64,
    cwnd: f64,
    max_cwnd: f64,
    slow_start: bool,
    last_ack: u64,
    loss: bool,
    last_dec_seq: i64,
    last_dec_period: f64,
    nak_count: u64,
    dec_random: u64,
    avg_nak_num: u64,
    dec_count: u64,
    last_rc_time: Time,
    rcv_rate: f64,
    bandwidth: f64,
    rtt_us: f64,
    snd_curr: i64,
}

impl Default for Daimd {
    fn default() -> Self {
        Self::new()
    }
}

impl Daimd {
    pub fn new() -> Daimd {
        Daimd {
            mss: 1500.0,
            period_us: 1.0,
            cwnd: 16.0,
            max_cwnd: 25_600.0,
            slow_start: true,
            last_ack: 0,
            loss: false,
            last_dec_seq: -1,
            last_dec_period: 1.0,
            nak_count: 0,
            dec_random: 1,
            avg_nak_num: 0,
            dec_count: 0,
            last_rc_time: Time::ZERO,
            // libudt's initial `m_iDeliveryRate` (16 packets/s) and `m_iBandwidth` (1)
            rcv_rate: 16.0,
            bandwidth: 1.0,
            rtt_us: 100_000.0,
            snd_curr: -1,
        }
    }

    /// The sending period in microseconds (for tests and traces).
    pub fn period_us(&self) -> f64 {
        self.period_us
    }

    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    /// libudt seeds `rand()` with the sequence number of the last decrease
    /// to desynchronise flows; any deterministic mix of it does the same.
    fn random_fraction(seed: i64) -> f64 {
        let mut x = (seed as u64) ^ 0x9E37_79B9_7F4A_7C15;
        x ^= x >> 33;
        x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        x ^= x >> 33;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    fn end_slow_start(&mut self) {
        self.slow_start = false;
        if self.rcv_rate > 0.0 {
            self.period_us = 1e6 / self.rcv_rate;
        } else {
            self.period_us = (self.rtt_us + SYN_US) / self.cwnd;
        }
    }
}

impl CongestionControl for Daimd {
    fn name(&self) -> &'static str {
        "udt"
    }

    fn init(&mut self, now: Time, mss: u64, max_window: u64, first_pn: u64, rtt: Option<Duration>) {
        self.mss = mss.max(1) as f64;
        self.max_cwnd = (max_window as f64 / self.mss).max(2.0);
        self.last_rc_time = now;
        self.last_ack = first_pn.saturating_sub(1);
        self.last_dec_seq = first_pn as i64 - 2;
        self.snd_curr = first_pn as i64 - 1;
        if let Some(r) = rtt {
            self.rtt_us = r.as_micros() as f64;
        }
    }

    fn on_sent(&mut self, _now: Time, pn: u64, _bytes: u64, _in_flight: u64) {
        self.snd_curr = self.snd_curr.max(pn as i64);
    }

    fn set_max_window(&mut self, bytes: u64) {
        self.max_cwnd = (bytes as f64 / self.mss).max(2.0);
    }

    fn on_ack(&mut self, ack: &AckSample) {
        self.rtt_us = ack.smoothed_rtt.as_micros() as f64;
        if let Some(r) = ack.peer_receive_rate {
            self.rcv_rate = r / self.mss;
        }
        if let Some(b) = ack.link_capacity {
            self.bandwidth = b / self.mss;
        }
        if ack.now.saturating_since(self.last_rc_time) < Duration::from_micros(SYN_US as u64) {
            return;
        }
        self.last_rc_time = ack.now;
        if self.slow_start {
            // `CSeqNo::seqlen(m_iLastAck, ack)` counts both ends
            self.cwnd += (ack.ack_point as f64 - self.last_ack as f64 + 1.0).max(0.0);
            self.last_ack = ack.ack_point;
            if self.cwnd > self.max_cwnd {
                self.end_slow_start();
            }
        } else {
            self.cwnd = self.rcv_rate / 1e6 * (self.rtt_us + SYN_US) + 16.0;
        }
        if self.slow_start {
            return;
        }
        if self.loss {
            self.loss = false;
            return;
        }
        let min_inc = 0.01;
        let mut b = self.bandwidth - 1e6 / self.period_us;
        if self.period_us > self.last_dec_period && self.bandwidth / 9.0 < b {
            b = self.bandwidth / 9.0;
        }
        let inc = if b <= 0.0 {
            min_inc
        } else {
            (10f64.powf((b * self.mss * 8.0).log10().ceil()) * 0.000_001_5 / self.mss).max(min_inc)
        };
        self.period_us = (self.period_us * SYN_US) / (self.period_us * inc + SYN_US);
    }

    fn on_loss(&mut self, loss: &LossSample) {
        if self.slow_start {
            self.slow_start = false;
            if self.rcv_rate > 0.0 {
                self.period_us = 1e6 / self.rcv_rate;
                return;
            }
            self.period_us = self.cwnd / (self.rtt_us + SYN_US);
        }
        self.loss = true;
        self.snd_curr = self.snd_curr.max(loss.largest_sent as i64);
        if loss.first_lost as i64 > self.last_dec_seq {
            self.last_dec_period = self.period_us;
            self.period_us = (self.period_us * 1.125).ceil();
            self.avg_nak_num = (self.avg_nak_num as f64 * 0.875 + self.nak_count as f64 * 0.125).ceil() as u64;
            self.nak_count = 1;
            self.dec_count = 1;
            self.last_dec_seq = self.snd_curr;
            self.dec_random =
                ((self.avg_nak_num as f64 * Self::random_fraction(self.last_dec_seq)).ceil() as u64).max(1);
        } else {
            let allowed = self.dec_count < 5;
            self.dec_count += 1;
            if allowed {
                self.nak_count += 1;
                if self.nak_count % self.dec_random == 0 {
                    self.period_us = (self.period_us * 1.125).ceil();
                    self.last_dec_seq = self.snd_curr;
                }
            }
        }
    }

    fn on_timeout(&mut self, _now: Time) {
        if self.slow_start {
            self.end_slow_start();
        }
    }

    fn pacing_rate(&self) -> f64 {
        self.mss * 1e6 / self.period_us.max(1e-3)
    }

    fn window(&self) -> u64 {
        (self.cwnd * self.mss) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(now_ms: u64, ack_point: u64, rcv_pps: f64, bw_pps: f64) -> AckSample {
        AckSample {
            now: Time(now_ms * 1_000_000),
            acked_bytes: 0,
            ack_point,
            delivered: 0,
            bytes_in_flight: 0,
            rtt_sample: None,
            smoothed_rtt: Duration::from_millis(100),
            rate: None,
            peer_receive_rate: Some(rcv_pps * 1500.0),
            link_capacity: Some(bw_pps * 1500.0),
        }
    }

    #[test]
    fn slow_start_ends_at_the_flow_window_then_rate_is_receive_rate() {
        let mut d = Daimd::new();
        d.init(Time(0), 1500, 100 * 1500, 1000, None);
        assert!(d.in_slow_start());
        d.on_ack(&ack(20, 1050, 8000.0, 10_000.0));
        assert!(d.in_slow_start());
        d.on_ack(&ack(40, 1100, 8000.0, 10_000.0));
        assert!(!d.in_slow_start(), "window {} passed 100 packets", d.window() / 1500);
        // 1/8000 s, then one rate increase in the same ACK (as libudt does)
        assert!(d.period_us() <= 125.0 && d.period_us() > 120.0, "{}", d.period_us());
    }

    #[test]
    fn loss_multiplies_the_period_by_one_and_an_eighth_once_per_episode() {
        let mut d = Daimd::new();
        d.init(Time(0), 1500, 1_000_000, 0, None);
        d.on_ack(&ack(20, 10, 10_000.0, 10_000.0));
        d.on_sent(Time(0), 500, 1500, 0);
        let l = |first| LossSample {
            now: Time(0),
            first_lost: first,
            lost_packets: 1,
            lost_bytes: 1500,
            largest_sent: 500,
            bytes_in_flight: 0,
        };
        d.on_loss(&l(100)); // ends slow start: period = 1/rcv rate = 100 µs
        assert_eq!(d.period_us(), 100.0);
        d.on_loss(&l(200)); // new episode: ×1.125
        assert_eq!(d.period_us(), 113.0);
        // Older losses (before last_dec_seq = 500) decrease at most 4 more times.
        for _ in 0..20 {
            d.on_loss(&l(300));
        }
        assert!(d.period_us() <= (113.0f64 * 1.125f64.powi(4)).ceil() + 4.0);
    }

    #[test]
    fn increase_is_large_far_below_capacity_and_small_near_it() {
        let mut far = Daimd::new();
        far.init(Time(0), 1500, 15_000, 0, None);
        far.on_ack(&ack(20, 100, 1000.0, 80_000.0)); // leaves slow start
        let p0 = far.period_us();
        far.on_ack(&ack(40, 200, 1000.0, 80_000.0));
        let gain_far = 1e6 / far.period_us() - 1e6 / p0;
        let mut near = Daimd::new();
        near.init(Time(0), 1500, 15_000, 0, None);
        near.on_ack(&ack(20, 100, 79_000.0, 80_000.0));
        let q0 = near.period_us();
        near.on_ack(&ack(40, 200, 79_000.0, 80_000.0));
        let gain_near = 1e6 / near.period_us() - 1e6 / q0;
        assert!(gain_far >= 5.0 * gain_near, "{gain_far} vs {gain_near}");
    }
}
