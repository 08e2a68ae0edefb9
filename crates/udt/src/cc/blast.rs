//! Blast: a fixed sending rate, no reaction to loss or delay (the RBUDP idea,
//! libudt's example `CUDPBlast`). The window is only the receiver's flow
//! window. Unfair to every other flow on the path by design: for dedicated
//! circuits, never the default.

use super::{AckSample, CongestionControl, LossSample};
use crate::time::Time;
use std::time::Duration;

#[derive(Debug)]
pub struct Blast {
    rate: f64,
    max_window: u64,
}

impl Blast {
    /// `rate` in bytes per second; must be positive and finite.
    pub fn new(rate: f64) -> Blast {
        assert!(rate.is_finite() && rate > 0.0, "blast needs an explicit positive rate");
        Blast { rate, max_window: u64::MAX }
    }
}

impl CongestionControl for Blast {
    fn name(&self) -> &'static str {
        "blast"
    }
    fn init(&mut self, _now: Time, _mss: u64, max_window: u64, _first_pn: u64, _rtt: Option<Duration>) {
        self.max_window = max_window;
    }
    fn on_ack(&mut self, _ack: &AckSample) {}
    fn on_loss(&mut self, _loss: &LossSample) {}
    fn set_max_window(&mut self, bytes: u64) {
        self.max_window = bytes;
    }
    fn pacing_rate(&self) -> f64 {
        self.rate
    }
    fn window(&self) -> u64 {
        self.max_window
    }
}
