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

/// Packet arrival times and packet-pair probe intervals (`CPktTimeWindow`).
///
/// libudt's receiving speed is the median-filtered mean of the last 16
/// arrival intervals, measured one packet at a time in microseconds. A
/// driver that receives in batches (`recvmmsg`, GRO) sees several packets
/// at one instant, so single intervals are often zero; here the speed is
/// the packet count over the time spanned by the last 64 arrivals instead,
/// which batching does not distort. Packet pairs keep libudt's median
/// filter, over pairs whose interval could be measured (non-zero).
#[derive(Debug)]
pub struct ArrivalWindow {
    arrivals: Vec<u64>,
    next_arrival: usize,
    count: u64,
    probes: Vec<u64>,
    next_probe: usize,
    probe_count: usize,
    probe1: Option<Time>,
    /// Packet pairs seen, and how many arrived at one instant (no
    /// interval to measure, skipped): a driver that hands a batch over at
    /// one time shows here (session 11's GRO stamps).
    pairs: u64,
    pairs_same_instant: u64,
}

impl Default for ArrivalWindow {
    fn default() -> Self {
        Self::new()
    }
}

const ARRIVALS: usize = 1024;
const MIN_SPEED_ARRIVALS: usize = 64;
/// Nanoseconds of arrivals the receive speed spans when it can (two of
/// the receiver's 10 ms ACK intervals).
const SPEED_MIN_SPAN: u64 = 20_000_000;
const PROBES: usize = 64;

impl ArrivalWindow {
    pub fn new() -> ArrivalWindow {
        ArrivalWindow {
            arrivals: vec![0; ARRIVALS],
            next_arrival: 0,
            count: 0,
            probes: vec![0; PROBES],
            next_probe: 0,
            probe_count: 0,
            probe1: None,
            pairs: 0,
            pairs_same_instant: 0,
        }
    }

    pub fn on_arrival(&mut self, now: Time, seq_low_bits: u32) {
        self.arrivals[self.next_arrival] = now.as_nanos();
        self.next_arrival = (self.next_arrival + 1) % ARRIVALS;
        self.count += 1;
        // Every 16th packet starts a pair sent back to back (`packData`:
        // `0 == (seq & 0xF)`); the interval to its successor is the probe.
        match seq_low_bits & 0xF {
            0 => self.probe1 = Some(now),
            1 => {
                if let Some(p) = self.probe1.take() {
                    let d = now.as_nanos().saturating_sub(p.as_nanos());
                    self.pairs += 1;
                    self.pairs_same_instant += u64::from(d == 0);
                    if d > 0 {
                        self.probes[self.next_probe] = d;
                        self.next_probe = (self.next_probe + 1) % PROBES;
                        self.probe_count = (self.probe_count + 1).min(PROBES);
                    }
                }
            }
            _ => {}
        }
    }

    /// Packets per second over the last 64 arrivals, or more of the last
    /// 1 024 until they span `SPEED_MIN_SPAN` (0 until there are 16).
    ///
    /// 64 arrivals alone were too few where packets come in bursts: at
    /// 100 Mbit/s they span 7.7 ms, and a forwarder or receiver that hands
    /// them over every few milliseconds made that read up to twice the link
    /// (simulated with deliveries on a 4 ms tick: the sender's estimate at
    /// 1.4 of the link, `trace_table3_short_path`).
    pub fn receive_speed(&self) -> u32 {
        let have = (self.count as usize).min(ARRIVALS);
        if have < 16 {
            return 0;
        }
        // arrival k back from the newest (k = 0: the newest)
        let at = |k: usize| self.arrivals[(self.next_arrival + 2 * ARRIVALS - 1 - k) % ARRIVALS];
        let newest = at(0);
        // The packets that arrived at the newest instant may be only part
        // of a batch still being handed over (a receiver reading in bursts,
        // an ACK between two packets of one instant): the span ends there
        // and counts only the packets before it.
        let mut end = 0;
        while end + 1 < have && at(end + 1) == newest {
            end += 1;
        }
        let end = end + 1; // arrivals at the newest instant
        if end >= have {
            return 0;
        }
        // the fewest older arrivals (at least 64 in all) spanning
        // SPEED_MIN_SPAN: no more, or a transfer resuming after a trickle
        // reads the trickle
        let span_to = |k: usize| newest.saturating_sub(at(k));
        let (mut lo, mut hi) = ((MIN_SPEED_ARRIVALS - 1).clamp(end, have - 1), have - 1);
        if span_to(lo) < SPEED_MIN_SPAN {
            while lo < hi {
                let mid = (lo + hi) / 2;
                if span_to(mid) >= SPEED_MIN_SPAN {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
        }
        // ...and every packet of that oldest instant: the span runs from
        // one instant to another, [oldest, newest)
        while lo + 1 < have && at(lo + 1) == at(lo) {
            lo += 1;
        }
        let span = span_to(lo);
        if span == 0 {
            return 0;
        }
        // arrivals at(lo) ..= at(end): lo - end + 1 packets, lo - end + 1
        // intervals from at(lo) to the newest instant
        ((lo + 1 - end) as f64 * 1e9 / span as f64).ceil().min(i32::MAX as f64) as u32
    }

    /// Packet pairs seen, and those of them that arrived at one instant.
    pub fn pairs(&self) -> (u64, u64) {
        (self.pairs, self.pairs_same_instant)
    }

    /// Link capacity in packets per second from the packet pairs
    /// (`getBandwidth`), 0 until four pairs were measured.
    pub fn bandwidth(&self) -> u32 {
        if self.probe_count < 4 {
            return 0;
        }
        match median_filtered_mean(&self.probes[..self.probe_count], true) {
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
            // packets every 10 µs; each pair's second packet 1 µs after the first
            let t = Time(i * 10_000 - if i % 16 == 1 { 9_000 } else { 0 });
            w.on_arrival(t, i as u32);
        }
        assert!((99_000..=101_000).contains(&w.receive_speed()), "{}", w.receive_speed());
        assert_eq!(w.bandwidth(), 1_000_000);
        assert_eq!(w.pairs(), (4, 0));
        // a batch delivered at one instant does not make the speed infinite or zero
        let mut b = ArrivalWindow::new();
        for i in 0..64u64 {
            b.on_arrival(Time((i / 16) * 160_000), i as u32);
        }
        assert!(b.receive_speed() > 0);
        // ...and its pairs, at one instant, measure nothing
        assert_eq!((b.pairs(), b.bandwidth()), ((4, 4), 0));
    }

    #[test]
    fn the_speed_of_bursty_arrivals_is_their_average() {
        // 8 333 packets/s (100 Mbit/s of 1 500-byte packets) handed over
        // in 4 ms bursts of 33, the newest burst only half read: the speed
        // is the average (64 arrivals read up to twice it)
        let mut w = ArrivalWindow::new();
        let mut seq = 0u32;
        for burst in 0..40u64 {
            let n = if burst == 39 { 16 } else { 33 };
            for _ in 0..n {
                w.on_arrival(Time(burst * 4_000_000), seq);
                seq += 1;
            }
        }
        let s = w.receive_speed();
        assert!((8_000..=8_600).contains(&s), "{s}");
    }
}
