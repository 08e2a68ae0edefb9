//! Measurement windows of the receiver (`window.cpp`): the ACK history that
//! turns an ACK2 into an RTT sample, the packet arrival-interval window that
//! gives the receiving speed, and the packet-pair window that gives the link
//! capacity. Both rate windows use libudt's median filter: the median of the
//! window, then the mean of the values within (median/8, median·8).

use crate::time::Time;

/// Recently sent ACKs: ACK number → (acknowledged packet, send time).
/// Bounded ring (libudt `CACKWindow(1024)`): the oldest entry is overwritten.
#[derive(Debug)]
pub struct AckWindow {
    entries: Vec<(u32, u64, Time)>,
    head: usize,
    len: usize,
}

impl AckWindow {
    pub fn new(size: usize) -> AckWindow {
        AckWindow { entries: vec![(0, 0, Time::ZERO); size.max(1)], head: 0, len: 0 }
    }

    pub fn store(&mut self, ack_no: u32, ack_pn: u64, now: Time) {
        let n = self.entries.len();
        self.entries[self.head] = (ack_no, ack_pn, now);
        self.head = (self.head + 1) % n;
        self.len = (self.len + 1).min(n);
    }

    /// Finds `ack_no`; returns the packet it acknowledged and the RTT, and
    /// forgets it and every older entry (as `CACKWindow::acknowledge`).
    pub fn acknowledge(&mut self, ack_no: u32, now: Time) -> Option<(u64, std::time::Duration)> {
        let n = self.entries.len();
        for k in 0..self.len {
            // oldest first
            let i = (self.head + n - self.len + k) % n;
            let (no, pn, t) = self.entries[i];
            if no == ack_no {
                self.len -= k + 1;
                return Some((pn, now.saturating_since(t)));
            }
        }
        None
    }
}

fn median_filtered_mean(values: &[u64], include_median: bool) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    let upper = median.saturating_mul(8);
    let lower = median / 8;
    let (mut count, mut sum) = if include_median { (1u64, median) } else { (0, 0) };
    for &v in values {
        if v < upper && v > lower {
            count += 1;
            sum += v;
        }
    }
    if sum == 0 || count == 0 {
        return None;
    }
    Some(sum as f64 / count as f64)
}

/// Packet arrival intervals and packet-pair probe intervals (`CPktTimeWindow`).
#[derive(Debug)]
pub struct ArrivalWindow {
    intervals: Vec<u64>,
    next_interval: usize,
    probes: Vec<u64>,
    next_probe: usize,
    last_arrival: Option<Time>,
    probe1: Option<Time>,
}

impl Default for ArrivalWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl ArrivalWindow {
    /// libudt's receiver uses 16 arrival intervals and 64 probe intervals,
    /// initialised to 1 s and 1 ms (in µs); we keep nanoseconds.
    pub fn new() -> ArrivalWindow {
        ArrivalWindow {
            intervals: vec![1_000_000_000; 16],
            next_interval: 0,
            probes: vec![1_000_000; 64],
            next_probe: 0,
            last_arrival: None,
            probe1: None,
        }
    }

    pub fn on_arrival(&mut self, now: Time, seq_low_bits: u32) {
        if let Some(last) = self.last_arrival {
            self.intervals[self.next_interval] = now.as_nanos().saturating_sub(last.as_nanos());
            self.next_interval = (self.next_interval + 1) % self.intervals.len();
        }
        self.last_arrival = Some(now);
        // Every 16th packet starts a pair sent back to back (`packData`:
        // `0 == (seq & 0xF)`); the interval to its successor is the probe.
        match seq_low_bits & 0xF {
            0 => self.probe1 = Some(now),
            1 => {
                if let Some(p) = self.probe1.take() {
                    self.probes[self.next_probe] = now.as_nanos().saturating_sub(p.as_nanos());
                    self.next_probe = (self.next_probe + 1) % self.probes.len();
                }
            }
            _ => {}
        }
    }

    /// Packets per second arriving, 0 when fewer than half the intervals
    /// agree with the median (`getPktRcvSpeed`).
    pub fn receive_speed(&self) -> u32 {
        let mut sorted = self.intervals.clone();
        sorted.sort_unstable();
        let median = sorted[sorted.len() / 2];
        let (upper, lower) = (median.saturating_mul(8), median / 8);
        let good: Vec<u64> = self.intervals.iter().copied().filter(|&v| v < upper && v > lower).collect();
        if good.len() <= self.intervals.len() / 2 {
            return 0;
        }
        let mean = good.iter().sum::<u64>() as f64 / good.len() as f64;
        if mean <= 0.0 {
            return 0;
        }
        (1e9 / mean).ceil().min(i32::MAX as f64) as u32
    }

    /// Link capacity in packets per second from the packet pairs (`getBandwidth`).
    pub fn bandwidth(&self) -> u32 {
        match median_filtered_mean(&self.probes, true) {
            Some(mean) if mean > 0.0 => (1e9 / mean).ceil().min(i32::MAX as f64) as u32,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ack_window_gives_rtt_and_forgets_older() {
        let mut w = AckWindow::new(4);
        for i in 1..=6u32 {
            w.store(i, u64::from(i) * 10, Time(u64::from(i) * 1_000_000));
        }
        assert!(w.acknowledge(1, Time(0)).is_none(), "overwritten");
        let (pn, rtt) = w.acknowledge(4, Time(10_000_000)).unwrap();
        assert_eq!((pn, rtt), (40, Duration::from_millis(6)));
        assert!(w.acknowledge(3, Time(10_000_000)).is_none(), "older entries are gone");
        assert!(w.acknowledge(6, Time(10_000_000)).is_some());
    }

    #[test]
    fn speed_and_pairs() {
        let mut w = ArrivalWindow::new();
        for i in 0..64u64 {
            // packets every 10 µs, pairs 1 µs apart
            let t = Time(i * 10_000 + if i % 16 == 1 { 0 } else { 0 });
            w.on_arrival(t, i as u32);
        }
        assert_eq!(w.receive_speed(), 100_000);
        assert!(w.bandwidth() > 0);
    }
}
