//! A token bucket shared by the streams of one transfer, for a bandwidth
//! cap (`ferry cp --max-rate`, the server's `max_transfer_rate`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct RateLimit {
    bytes_per_sec: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimit {
    pub fn new(bytes_per_sec: u64) -> Self {
        Self { bytes_per_sec: bytes_per_sec.max(1) as f64, state: Mutex::new((0.0, Instant::now())) }
    }

    /// Blocks the calling thread until `n` more bytes fit under the rate.
    /// Allows a burst of 50 ms worth of data.
    pub fn acquire(&self, n: usize) {
        let wait = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let burst = self.bytes_per_sec * 0.05;
            let refill = now.duration_since(st.1).as_secs_f64() * self.bytes_per_sec;
            st.0 = (st.0 + refill).min(burst);
            st.1 = now;
            st.0 -= n as f64;
            if st.0 < 0.0 {
                Duration::from_secs_f64(-st.0 / self.bytes_per_sec)
            } else {
                Duration::ZERO
            }
        };
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}
