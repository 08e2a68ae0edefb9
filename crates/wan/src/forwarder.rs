//! One direction of the emulated path: read packets from one TUN device,
//! pass them through a bottleneck and a delay line, write them to the other.
//!
//! # Model
//!
//! A packet that arrives at time `t` is first subject to random loss (as
//! `netem loss` does: before the queue, so a lost packet costs no link time).
//! It then joins the bottleneck queue. The link serialises one packet after
//! another at the configured rate, so the packet starts transmission at
//! `start = max(t, link_free)` and finishes at `end = start + len·8/rate`;
//! `link_free` becomes `end`. The bytes still waiting at `t` are
//! `(link_free − t)·rate/8`, so the byte-bounded tail-drop queue is a closed
//! formula on the virtual link clock and needs no second data structure.
//! Finally the packet propagates for the one-way delay and is delivered at
//! `end + delay`.
//!
//! Because the delay is constant and `end` never decreases, delivery times
//! never decrease either: the "time-ordered delay queue" is a plain FIFO, and
//! packets keep their order.
//!
//! # Loop
//!
//! One thread per direction. It waits on the input descriptor with a timeout
//! that ends at the head packet's delivery time, then drains up to
//! [`READ_BATCH`] packets and delivers everything that is due. The link clock
//! is virtual, so a late wake-up delivers a small burst but never shifts the
//! long-run rate.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::PathConfig;
use crate::sys;
use crate::units::Rate;

/// Packets read per wake-up before delivering what is due. Large enough that
/// a wake-up serves many packets at high rates, small enough that deliveries
/// are not held back behind a long read burst.
pub const READ_BATCH: usize = 64;
/// Longest sleep, so the thread notices the stop flag promptly.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// Largest packet a TUN device can hand us (IP's 16-bit total length).
const MAX_PACKET: usize = 65_536;

/// What the bottleneck decides for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Deliver at this time (nanoseconds on the forwarder's clock).
    DeliverAt(u64),
    /// The queue would exceed its byte bound: tail drop.
    QueueFull,
}

/// The bottleneck link and propagation delay of one direction, as pure
/// arithmetic on a nanosecond clock so it can be tested without time passing.
#[derive(Debug, Clone)]
pub struct Bottleneck {
    rate: Option<Rate>,
    queue_limit: u64,
    delay_ns: u64,
    /// When the link finishes the last admitted packet.
    link_free_ns: u64,
}

impl Bottleneck {
    /// `rate: None` models an unlimited link: nothing queues, and
    /// `queue_limit` is ignored (the delay line has its own memory cap).
    pub fn new(rate: Option<Rate>, queue_limit: u64, delay: Duration) -> Self {
        Bottleneck { rate, queue_limit, delay_ns: delay.as_nanos() as u64, link_free_ns: 0 }
    }

    /// Bytes queued but not yet serialised at `now`.
    pub fn backlog(&self, now: u64) -> u64 {
        match self.rate {
            Some(rate) if self.link_free_ns > now => {
                (u128::from(self.link_free_ns - now) * u128::from(rate.bits_per_second()) / 8_000_000_000) as u64
            }
            _ => 0,
        }
    }

    /// Admits a packet of `len` bytes arriving at `now`.
    pub fn admit(&mut self, now: u64, len: usize) -> Admission {
        let Some(rate) = self.rate else {
            return Admission::DeliverAt(now + self.delay_ns);
        };
        if self.backlog(now) + len as u64 > self.queue_limit {
            return Admission::QueueFull;
        }
        let start = self.link_free_ns.max(now);
        let tx_ns = (len as u128 * 8_000_000_000).div_ceil(u128::from(rate.bits_per_second()));
        self.link_free_ns = start + tx_ns as u64;
        Admission::DeliverAt(self.link_free_ns + self.delay_ns)
    }
}

/// A small, fast generator for the loss decision (xorshift64*): the quality
/// needed is "independent-looking coin flips", and a seed makes runs
/// repeatable.
#[derive(Debug, Clone)]
pub struct LossGenerator {
    state: u64,
    threshold: u64,
}

impl LossGenerator {
    pub fn new(probability: f64, seed: u64) -> Self {
        // splitmix64 once, so that small or similar seeds diverge at once.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let threshold = if probability >= 1.0 { u64::MAX } else { (probability * 2f64.powi(64)) as u64 };
        LossGenerator { state: z | 1, threshold }
    }

    /// True if this packet is lost.
    pub fn lose(&mut self) -> bool {
        if self.threshold == 0 {
            return false;
        }
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D) < self.threshold
    }
}

/// Counters of one direction, shared with whoever wants to watch the link.
#[derive(Debug, Default)]
pub struct DirectionStats {
    pub rx_packets: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub tx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
    pub lost: AtomicU64,
    pub queue_drops: AtomicU64,
    pub overflow_drops: AtomicU64,
    pub write_errors: AtomicU64,
    pub max_backlog_bytes: AtomicU64,
    pub max_held_bytes: AtomicU64,
    pub wakeups: AtomicU64,
    pub cpu_ns: AtomicU64,
}

/// A copy of [`DirectionStats`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionSnapshot {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Dropped by the random loss model.
    pub lost: u64,
    /// Dropped because the bottleneck queue was full.
    pub queue_drops: u64,
    /// Dropped because the delay line hit its memory cap.
    pub overflow_drops: u64,
    pub write_errors: u64,
    pub max_backlog_bytes: u64,
    pub max_held_bytes: u64,
    pub wakeups: u64,
    /// CPU time of the forwarder thread, including the receiving stack work
    /// the kernel does inside its writes to the TUN device.
    pub cpu_ns: u64,
    /// Packets the sending namespace's TUN device dropped before the
    /// forwarder saw them, because its ring was full: the forwarder did not
    /// keep up. Filled by [`crate::LinkGuard::stats`]; `None` if unknown.
    pub device_drops: Option<u64>,
}

impl DirectionStats {
    pub fn snapshot(&self) -> DirectionSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DirectionSnapshot {
            rx_packets: g(&self.rx_packets),
            rx_bytes: g(&self.rx_bytes),
            tx_packets: g(&self.tx_packets),
            tx_bytes: g(&self.tx_bytes),
            lost: g(&self.lost),
            queue_drops: g(&self.queue_drops),
            overflow_drops: g(&self.overflow_drops),
            write_errors: g(&self.write_errors),
            max_backlog_bytes: g(&self.max_backlog_bytes),
            max_held_bytes: g(&self.max_held_bytes),
            wakeups: g(&self.wakeups),
            cpu_ns: g(&self.cpu_ns),
            device_drops: None,
        }
    }
}

struct Packet {
    deliver_at: u64,
    data: Box<[u8]>,
}

/// Everything one forwarding thread owns.
pub(crate) struct Forwarder {
    pub input: Arc<File>,
    pub output: Arc<File>,
    pub bottleneck: Bottleneck,
    pub loss: LossGenerator,
    /// Cap on bytes held in the delay line (queued plus propagating), so an
    /// unlimited-rate link with a long delay cannot exhaust memory.
    pub held_cap: u64,
    pub stats: Arc<DirectionStats>,
    pub stop: Arc<AtomicBool>,
}

impl Forwarder {
    pub(crate) fn new(
        input: Arc<File>,
        output: Arc<File>,
        path: &PathConfig,
        rate: Option<Rate>,
        seed: u64,
        stop: Arc<AtomicBool>,
    ) -> Self {
        let queue = path.queue_bytes();
        let held_cap = match rate {
            Some(r) => queue + r.bytes_in(path.delay) + (1 << 20),
            None => crate::config::UNLIMITED_HELD_BYTES,
        };
        Forwarder {
            input,
            output,
            bottleneck: Bottleneck::new(rate, queue, path.delay),
            loss: LossGenerator::new(path.loss, seed),
            held_cap,
            stats: Arc::new(DirectionStats::default()),
            stop,
        }
    }

    /// Runs until the stop flag is set or the input device fails.
    pub(crate) fn run(mut self) -> io::Result<()> {
        let epoch = Instant::now();
        let now_ns = || epoch.elapsed().as_nanos() as u64;
        let mut line: VecDeque<Packet> = VecDeque::new();
        let mut held: u64 = 0;
        let mut buf = vec![0u8; MAX_PACKET];
        let mut cpu_checked = Instant::now();
        let stats = Arc::clone(&self.stats);
        let input = Arc::clone(&self.input);
        let output = Arc::clone(&self.output);
        let fd = input.as_fd();

        while !self.stop.load(Ordering::Relaxed) {
            // Deliver everything that is due.
            let now = now_ns();
            while line.front().is_some_and(|p| p.deliver_at <= now) {
                let Some(p) = line.pop_front() else { break };
                held -= p.data.len() as u64;
                // A TUN write takes the whole packet or fails; a short count
                // would mean a truncated packet, counted as an error.
                match (&*output).write(&p.data) {
                    Ok(n) if n == p.data.len() => {
                        stats.tx_packets.fetch_add(1, Ordering::Relaxed);
                        stats.tx_bytes.fetch_add(p.data.len() as u64, Ordering::Relaxed);
                    }
                    // The receiving namespace's stack refused the packet
                    // (e.g. its backlog is full): that is a drop, not a
                    // reason to stop the link.
                    Ok(_) | Err(_) => {
                        stats.write_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }

            let wait = match line.front() {
                Some(p) => Duration::from_nanos(p.deliver_at.saturating_sub(now)).min(MAX_WAIT),
                None => MAX_WAIT,
            };
            if cpu_checked.elapsed() >= Duration::from_millis(100) {
                cpu_checked = Instant::now();
                if let Some(ns) = sys::thread_cpu_ns() {
                    stats.cpu_ns.store(ns, Ordering::Relaxed);
                }
            }
            if !wait.is_zero() && !sys::wait_readable(fd, wait)? {
                continue;
            }
            stats.wakeups.fetch_add(1, Ordering::Relaxed);

            for _ in 0..READ_BATCH {
                let len = match (&*input).read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                stats.rx_packets.fetch_add(1, Ordering::Relaxed);
                stats.rx_bytes.fetch_add(len as u64, Ordering::Relaxed);
                if self.loss.lose() {
                    stats.lost.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if held + len as u64 > self.held_cap {
                    stats.overflow_drops.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let now = now_ns();
                match self.bottleneck.admit(now, len) {
                    Admission::QueueFull => {
                        stats.queue_drops.fetch_add(1, Ordering::Relaxed);
                    }
                    Admission::DeliverAt(deliver_at) => {
                        stats.max_backlog_bytes.fetch_max(self.bottleneck.backlog(now), Ordering::Relaxed);
                        held += len as u64;
                        stats.max_held_bytes.fetch_max(held, Ordering::Relaxed);
                        line.push_back(Packet { deliver_at, data: buf[..len].into() });
                    }
                }
            }
        }
        if let Some(ns) = sys::thread_cpu_ns() {
            stats.cpu_ns.store(ns, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn unlimited_link_only_delays() {
        let mut b = Bottleneck::new(None, 0, Duration::from_millis(30));
        assert_eq!(b.admit(5, 9000), Admission::DeliverAt(5 + 30 * MS));
        assert_eq!(b.admit(5, 9000), Admission::DeliverAt(5 + 30 * MS));
        assert_eq!(b.backlog(5), 0);
    }

    #[test]
    fn rate_spaces_packets_by_serialisation_time() {
        // 1 Gbit/s: 9000 bytes take 72 µs.
        let rate = Rate::from_bits_per_second(1_000_000_000);
        let mut b = Bottleneck::new(Some(rate), 1_000_000, Duration::from_millis(10));
        let t0 = 1_000;
        assert_eq!(b.admit(t0, 9000), Admission::DeliverAt(t0 + 72_000 + 10 * MS));
        assert_eq!(b.admit(t0, 9000), Admission::DeliverAt(t0 + 144_000 + 10 * MS));
        assert_eq!(b.backlog(t0), 18_000);
        // After the link has gone idle, a packet starts at its own arrival.
        let later = t0 + 5 * MS;
        assert_eq!(b.backlog(later), 0);
        assert_eq!(b.admit(later, 1500), Admission::DeliverAt(later + 12_000 + 10 * MS));
    }

    #[test]
    fn queue_is_bounded_in_bytes_with_tail_drop() {
        let rate = Rate::from_bits_per_second(8_000_000); // 1 byte per µs
        let mut b = Bottleneck::new(Some(rate), 25_000, Duration::ZERO);
        let mut admitted = 0;
        for _ in 0..10 {
            if let Admission::DeliverAt(_) = b.admit(0, 9000) {
                admitted += 1;
            }
        }
        // 9000 + 9000 fit in 25 000 bytes; a third would make 27 000.
        assert_eq!(admitted, 2);
        // A small packet still fits behind them.
        assert!(matches!(b.admit(0, 7000), Admission::DeliverAt(_)));
        // Once 9 ms have drained, there is room for a big one again.
        assert!(matches!(b.admit(9 * MS, 9000), Admission::DeliverAt(_)));
    }

    #[test]
    fn delivery_times_never_decrease() {
        let rate = Rate::from_bits_per_second(200_000_000);
        let mut b = Bottleneck::new(Some(rate), 5_000_000, Duration::from_millis(10));
        let mut last = 0;
        let mut t = 0;
        for i in 0..10_000u64 {
            t += (i * 7919) % 50_000;
            let len = 40 + (i as usize * 104_729) % 8960;
            if let Admission::DeliverAt(at) = b.admit(t, len) {
                assert!(at >= last);
                last = at;
            }
        }
    }

    #[test]
    fn loss_rate_is_close_to_configured() {
        let mut g = LossGenerator::new(0.01, 42);
        let lost = (0..1_000_000).filter(|_| g.lose()).count();
        assert!((9_000..11_000).contains(&lost), "lost {lost}");
        let mut none = LossGenerator::new(0.0, 1);
        assert!((0..10_000).all(|_| !none.lose()));
        let mut all = LossGenerator::new(1.0, 1);
        assert!((0..10_000).all(|_| all.lose()));
    }
}
