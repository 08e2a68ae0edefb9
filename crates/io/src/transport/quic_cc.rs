//! The congestion controllers of `crates/udt` driving quinn (issue 19:
//! one controller, two transports).
//!
//! quinn's `congestion::Controller` hears about packets sent, packets
//! acknowledged (one call per packet, then one at the end of each ACK
//! frame), and loss events, and answers with a window. A
//! [`CongestionControl`] hears transport-neutral facts — acknowledged
//! bytes with a delivery-rate sample, RTT samples, lost packets — and
//! answers with a pacing rate and a window. This adapter turns the first
//! into the second:
//!
//! * **Delivery-rate samples** are computed here, the way BBR's
//!   `bbr_rate_sample` does: every send records how much had been
//!   delivered by then (and when), and the acknowledgement of that packet
//!   gives `delivered now − delivered then` over the longer of the send
//!   and the ack intervals. quinn gives each acknowledged packet's send
//!   time, which finds its record.
//! * **One `on_ack` per ACK frame** (at quinn's `on_end_acks`), with the
//!   bytes of all the packets it acknowledged and the sample of the newest
//!   one, as a UDT ACK carries.
//! * **Packets**: quinn reports a GSO batch as one send; the controller
//!   counts packets (its loss rate is per packet), so a batch counts as
//!   its bytes over the MTU, and a loss event's bytes likewise.
//! * **Pacing and the window.** quinn paces at 1.25 × window / smoothed
//!   RTT and takes no rate from its controller, so the rate reaches the
//!   wire through [`super::quic_pacer`]: the controller's pacing rate is
//!   published to its endpoint's [`PacingRate`] (a [`RateShare`]) after
//!   every ACK frame and loss event once the controller's start-up is over
//!   (see `UdtController::publish`), and the endpoint's socket holds sends
//!   to it. The window given to quinn then only bounds the data in flight:
//!   the factory's `window_gain` (default [`WINDOW_GAIN`]) times the pacing
//!   rate over the path's minimum RTT, capped by the controller's own
//!   window (four bandwidth-delay products); quinn's pacer, at 1.25 × that
//!   window / RTT, runs faster than the socket's and no longer sets the
//!   rate. Without a pacer (tests, or an endpoint built without one) the
//!   window alone shapes the sending, as in session 5.
//! * `clone_box` (quinn uses it only when a path migrates, which Ferry's
//!   data channels never do) gives a fresh controller of the same kind.

use super::quic_pacer::{PacingRate, RateShare};
use ferry_udt::cc::{AckSample, CongestionControl, CongestionKind, LossSample, RateSample};
use ferry_udt::time::Time;
use quinn::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;
use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The window given to quinn in pacing-rate × minimum-RTT products, with
/// the pacer below quinn holding the wire to the rate (session 6). In
/// session 5, without it, the window set the rate through quinn's pacer
/// (1.25 × window / RTT) and gain 4 was the fastest of 1.5, 2, 3 and 4 on
/// the emulated 150 Mbit/s, 80 ms, 1 % path (`bench/results/quic-s4/`),
/// because it overfilled the path by 1.3–1.7 ×. With the pacer the window
/// only bounds the data in flight: two products cover the rate over a round
/// trip with the ACK delay and the loss recovery of a 1 % path, and keep
/// one connection of a shared endpoint from running far ahead of its share.
pub const WINDOW_GAIN: f64 = 2.0;

/// The window gain of session 5 (no pacer below quinn): quinn's pacer then
/// sets the rate from the window.
pub const WINDOW_GAIN_UNPACED: f64 = 4.0;

/// The least window in the controller's start-up, bytes: the first round
/// trips of a cold copy send this much rather than sixteen 1200-byte
/// packets (the floor until quinn's path MTU discovery raises the MTU),
/// so the delivery-rate samples that drive the start-up begin some of
/// its 2.885× rounds higher. quinn's pacer spreads it over the round trip
/// the handshake measured (1.25 × window / RTT): not a burst, but more
/// than a path below about 26 Mbit/s at 160 ms holds in the first round
/// (the controller's loss response then takes over). Session 7 raised it
/// from 16 packets to 128 KiB (bench/results/quic-s7); session 8 to
/// 512 KiB, a sixth of one bandwidth-delay product of the 150 Mbit/s,
/// 160 ms path: cold copies alternating with the 128 KiB build in one
/// ferry-wan session, six pairs, medians 8.69 against 8.85 s, packets
/// lost per copy 381–875 against 862–959
/// (bench/results/quic-s8-setup/by-hand/ab-sw512).
pub const START_WINDOW: u64 = 512 * 1024;

/// Records of packets in flight kept at most (a bound on memory if ACKs
/// stop coming): far more than a 10 Gbit/s × 200 ms window of full packets.
const MAX_RECORDS: usize = 1 << 20;

/// Builds the adapter around a `crates/udt` controller for every QUIC
/// connection (`quinn::TransportConfig::congestion_controller_factory`).
#[derive(Debug, Clone)]
pub struct UdtControllerFactory {
    pub kind: CongestionKind,
    /// The pacing rate of the endpoint the connections are made on (see
    /// [`super::quic_pacer`]); `None` leaves pacing to quinn.
    pub pacer: Option<Arc<PacingRate>>,
    /// The window given to quinn in pacing-rate × minimum-RTT products.
    pub window_gain: f64,
}

impl UdtControllerFactory {
    /// Ferry's rate/RTT model (`FerryRate`), ramping up by itself.
    pub fn ferry() -> Self {
        Self::ferry_at(None)
    }

    /// Ferry's rate/RTT model, starting at `path_rate` (bytes/s) when one
    /// is known — the rate the client measured and announced (`ferry cp
    /// --path-rate`, `OPTS TPRT Rate=N;`), as the `udt` transport's
    /// senders do (docs/udt.md, "Starting at a measured rate"): on an
    /// 80 ms path the cold start-up from ten packets per round trip takes
    /// about eight round trips (1.3 s) to reach the link. A rate that is
    /// not finite and positive is ignored.
    pub fn ferry_at(path_rate: Option<f64>) -> Self {
        let initial_rate = path_rate.filter(|r| r.is_finite() && *r > 0.0);
        Self {
            kind: CongestionKind::Ferry { initial_rate, max_rate: None },
            pacer: None,
            window_gain: WINDOW_GAIN_UNPACED,
        }
    }

    /// The same, its rate on the wire through `pacer` (the endpoint's), and
    /// the window [`WINDOW_GAIN`] rate × RTT products.
    pub fn paced(self, pacer: Arc<PacingRate>) -> Self {
        Self { pacer: Some(pacer), window_gain: WINDOW_GAIN, ..self }
    }
}

impl ControllerFactory for UdtControllerFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let mut c = UdtController::new(self.kind, now, current_mtu);
        c.window_gain = self.window_gain;
        if let Some(p) = &self.pacer {
            c.pace(p.share());
        }
        Box::new(c)
    }
}

/// What a send left for its acknowledgement to measure (BBR's per-packet
/// rate-sample state).
#[derive(Debug, Clone, Copy)]
struct SendRecord {
    sent: Instant,
    /// Bytes delivered, and when the last of them was, when this was sent.
    delivered: u64,
    delivered_time: Instant,
    /// Send time of the packet whose ACK started the current interval.
    first_sent: Instant,
}

/// A `crates/udt` congestion controller as quinn's.
#[derive(Debug)]
pub struct UdtController {
    kind: CongestionKind,
    /// quinn wants `Sync`; `CongestionControl` is only `Send`. The lock
    /// is uncontended (one connection's state), and `&mut self` calls take
    /// `get_mut` without locking.
    cc: Mutex<Box<dyn CongestionControl>>,
    epoch: Instant,
    mtu: u16,
    records: VecDeque<SendRecord>,
    delivered: u64,
    delivered_time: Instant,
    first_sent: Instant,
    in_flight: u64,
    /// Packets counted as sent so far (the controller's packet numbers).
    packets_sent: u64,
    /// This ACK frame so far: bytes, the newest sample, and its record.
    acked_bytes: u64,
    sample: Option<(SendRecord, bool)>,
    rtt_sample: Option<Duration>,
    smoothed_rtt: Duration,
    min_rtt: Option<Duration>,
    /// When the controller's state was last logged (debug level, once a
    /// second).
    logged: Instant,
    /// This connection's part of its endpoint's pacing rate.
    share: Option<RateShare>,
    window_gain: f64,
}

impl UdtController {
    pub fn new(kind: CongestionKind, now: Instant, mtu: u16) -> Self {
        let mut cc = kind.build();
        cc.init(Time::ZERO, u64::from(mtu), u64::MAX, 0, None);
        Self {
            kind,
            cc: Mutex::new(cc),
            epoch: now,
            mtu,
            records: VecDeque::new(),
            delivered: 0,
            delivered_time: now,
            first_sent: now,
            in_flight: 0,
            packets_sent: 0,
            acked_bytes: 0,
            sample: None,
            rtt_sample: None,
            smoothed_rtt: Duration::ZERO,
            min_rtt: None,
            logged: now,
            share: None,
            window_gain: WINDOW_GAIN_UNPACED,
        }
    }

    /// Puts this controller's pacing rate on the wire through `share`.
    pub fn pace(&mut self, share: RateShare) {
        self.share = Some(share);
        self.publish();
    }

    /// Gives the endpoint's pacer the controller's rate now — once the
    /// controller's start-up is over. During `FerryRate`'s start-up the
    /// connection goes unpaced, with session 5's window
    /// ([`WINDOW_GAIN_UNPACED`]), and quinn's pacer spreads it: paced at
    /// exactly the start-up rate (2.885 × the bottleneck estimate) the
    /// delivery-rate samples grew by that factor per round, and the cold
    /// start reached 2.9 MB/s by round 5 where session 5's sending had
    /// 14.2 MB/s (ferry-wan, 150 Mbit/s, 80 ms, 1 %; release builds;
    /// `bench/results/quic-s6/README.md`), and the copy took 0.6–1.6 s
    /// longer. The phase comes from `CongestionControl::in_start_up`.
    fn publish(&mut self) {
        if self.share.is_none() {
            return;
        }
        let cc = self.cc_mut();
        let rate = if cc.in_start_up() { 0.0 } else { cc.pacing_rate() };
        if let Some(s) = self.share.as_mut() {
            s.set(rate);
        }
    }

    /// The window gain now: session 5's while unpaced in start-up.
    fn gain(&self) -> f64 {
        if self.share.is_some() && self.cc().in_start_up() {
            WINDOW_GAIN_UNPACED
        } else {
            self.window_gain
        }
    }

    fn cc_mut(&mut self) -> &mut dyn CongestionControl {
        &mut **self.cc.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    fn cc(&self) -> std::sync::MutexGuard<'_, Box<dyn CongestionControl>> {
        self.cc.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn time(&self, at: Instant) -> Time {
        Time::from_nanos(at.saturating_duration_since(self.epoch).as_nanos() as u64)
    }

    fn packets(&self, bytes: u64) -> u64 {
        bytes.div_ceil(u64::from(self.mtu.max(1))).max(1)
    }

    /// One acknowledged packet (quinn's `on_ack`, with the figures of its
    /// RTT estimator: smoothed and minimum).
    fn acked(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool, smoothed: Duration, min: Duration) {
        self.delivered += bytes;
        self.delivered_time = now;
        self.acked_bytes += bytes;
        self.in_flight = self.in_flight.saturating_sub(bytes);
        // This packet's own round trip (ACK delay included).
        let sample = now.saturating_duration_since(sent);
        self.rtt_sample = Some(self.rtt_sample.map_or(sample, |r| r.min(sample)));
        self.smoothed_rtt = smoothed;
        self.min_rtt = Some(min);
        // The record of this packet's send (a GSO batch shares one); older
        // ones are acknowledged or will be declared lost.
        let i = self.records.partition_point(|r| r.sent < sent);
        if let Some(r) = self.records.get(i).copied().filter(|r| r.sent == sent) {
            if self.sample.is_none_or(|(s, _)| r.delivered >= s.delivered) {
                self.sample = Some((r, app_limited));
                self.first_sent = r.sent;
            }
        }
        self.records.drain(..i);
    }

    /// The end of one ACK frame: one `on_ack` for the controller.
    fn end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool, largest: Option<u64>) {
        self.in_flight = in_flight;
        if self.acked_bytes == 0 {
            return;
        }
        let rate = self.sample.take().and_then(|(r, limited)| {
            let send_elapsed = r.sent.saturating_duration_since(r.first_sent);
            let ack_elapsed = self.delivered_time.saturating_duration_since(r.delivered_time);
            let interval = send_elapsed.max(ack_elapsed);
            let bytes = self.delivered - r.delivered;
            // An interval shorter than the path's minimum RTT measures a
            // burst, not the path (BBR discards those too).
            let floor = self.min_rtt.unwrap_or_default();
            (interval > Duration::ZERO && interval >= floor).then(|| RateSample {
                rate: bytes as f64 / interval.as_secs_f64(),
                interval,
                app_limited: limited || app_limited,
                prior_delivered: r.delivered,
            })
        });
        let ack = AckSample {
            now: self.time(now),
            acked_bytes: std::mem::take(&mut self.acked_bytes),
            ack_point: largest.unwrap_or(0),
            delivered: self.delivered,
            bytes_in_flight: in_flight,
            rtt_sample: self.rtt_sample.take(),
            smoothed_rtt: self.smoothed_rtt,
            rate,
            peer_receive_rate: None,
            link_capacity: None,
        };
        self.cc_mut().on_ack(&ack);
        self.publish();
        if now.saturating_duration_since(self.logged) >= Duration::from_secs(1)
            && tracing::enabled!(tracing::Level::DEBUG)
        {
            self.logged = now;
            tracing::debug!(
                t = format!("{:.1}", now.saturating_duration_since(self.epoch).as_secs_f64()),
                window = self.window(),
                in_flight,
                delivered = self.delivered,
                "QUIC controller: {}",
                self.describe()
            );
        }
    }

    /// The controller's state in a line (for logs and tests).
    pub fn describe(&self) -> String {
        self.cc().describe()
    }

    /// The controller's pacing rate, bytes per second.
    pub fn pacing_rate(&self) -> f64 {
        self.cc().pacing_rate()
    }
}

impl Controller for UdtController {
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        if self.in_flight == 0 {
            // Nothing in flight: a new interval starts here (BBR).
            self.first_sent = now;
            self.delivered_time = now;
        }
        if self.records.len() >= MAX_RECORDS {
            self.records.pop_front();
        }
        self.records.push_back(SendRecord {
            sent: now,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent: self.first_sent,
        });
        self.in_flight += bytes;
        let t = self.time(now);
        let per = u64::from(self.mtu);
        let mut left = bytes;
        for _ in 0..self.packets(bytes) {
            let b = left.min(per);
            left -= b;
            let (pn, inf) = (self.packets_sent, self.in_flight);
            self.cc_mut().on_sent(t, pn, b, inf);
            self.packets_sent += 1;
        }
    }

    fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool, rtt: &RttEstimator) {
        self.acked(now, sent, bytes, app_limited, rtt.get(), rtt.min());
    }

    fn on_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool, largest: Option<u64>) {
        self.end_acks(now, in_flight, app_limited, largest);
    }
    fn on_congestion_event(&mut self, now: Instant, _sent: Instant, is_persistent_congestion: bool, lost_bytes: u64) {
        let t = self.time(now);
        if is_persistent_congestion {
            self.cc_mut().on_timeout(t);
        }
        let lost_packets = self.packets(lost_bytes);
        let (first_lost, largest_sent, bytes_in_flight) =
            (self.packets_sent.saturating_sub(lost_packets), self.packets_sent.saturating_sub(1), self.in_flight);
        self.cc_mut().on_loss(&LossSample {
            now: t,
            first_lost,
            lost_packets,
            lost_bytes,
            largest_sent,
            bytes_in_flight,
        });
        self.publish();
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = new_mtu;
    }

    /// `window_gain` pacing-rate × minimum-RTT products, capped by the
    /// controller's window (see the module doc).
    fn window(&self) -> u64 {
        // In start-up the window is at least START_WINDOW (see there).
        let floor = if self.cc().in_start_up() { START_WINDOW } else { 0 }.max(16 * u64::from(self.mtu));
        let rtt = self.min_rtt.filter(|r| !r.is_zero()).unwrap_or(Duration::from_millis(100));
        let rate = self.cc().pacing_rate();
        let w = if rate.is_finite() { (self.gain() * rate * rtt.as_secs_f64()) as u64 } else { u64::MAX };
        w.min(self.cc().window()).max(floor)
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = ControllerMetrics::default();
        m.congestion_window = self.window();
        let rate = self.cc().pacing_rate();
        m.pacing_rate = rate.is_finite().then_some((rate * 8.0) as u64);
        m
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        let mut c = UdtController::new(self.kind, Instant::now(), self.mtu);
        c.window_gain = self.window_gain;
        if let Some(s) = &self.share {
            c.pace(s.another());
        }
        Box::new(c)
    }

    fn initial_window(&self) -> u64 {
        self.window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path of `rate` bytes/s and `rtt`, losing every `loss_every`th
    /// packet at random positions, driven as quinn would: sends paced by
    /// the window, one ACK frame per millisecond.
    fn run(rate: f64, rtt: Duration, loss_every: Option<u64>, secs: u64) -> (UdtController, f64) {
        let start = Instant::now();
        let c = UdtController::new(CongestionKind::Ferry { initial_rate: None, max_rate: None }, start, 1200);
        drive(c, start, rate, rtt, loss_every, secs)
    }

    fn drive(
        mut c: UdtController,
        start: Instant,
        rate: f64,
        rtt: Duration,
        loss_every: Option<u64>,
        secs: u64,
    ) -> (UdtController, f64) {
        let mtu = 1200u16;
        let step = Duration::from_millis(1);
        // (arrival at the receiver's ACK back here, sent, bytes, lost)
        let mut pipe: VecDeque<(Instant, Instant, u64, bool)> = VecDeque::new();
        let mut link_free = start;
        let mut n = 0u64;
        let mut seed = 12345u64;
        let mut delivered = 0u64;
        let end = start + Duration::from_secs(secs);
        let mut now = start;
        let mut in_flight = 0u64;
        while now < end {
            // Send what the window allows this millisecond.
            while in_flight + u64::from(mtu) <= c.window() && link_free < now + step {
                let depart = link_free.max(now);
                link_free = depart + Duration::from_secs_f64(f64::from(mtu) / rate);
                c.on_sent(now, u64::from(mtu), n);
                n += 1;
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let lost = loss_every.is_some_and(|k| (seed >> 33) % k == 0);
                pipe.push_back((link_free + rtt, now, u64::from(mtu), lost));
                in_flight += u64::from(mtu);
            }
            now += step;
            let mut acked_any = false;
            let mut lost_bytes = 0;
            while pipe.front().is_some_and(|p| p.0 <= now) {
                let (_, sent, bytes, lost) = pipe.pop_front().unwrap();
                in_flight -= bytes;
                if lost {
                    lost_bytes += bytes;
                } else {
                    c.acked(now, sent, bytes, false, rtt, rtt);
                    delivered += bytes;
                    acked_any = true;
                }
            }
            if acked_any {
                c.on_end_acks(now, in_flight, false, Some(n));
            }
            if lost_bytes > 0 {
                c.on_congestion_event(now, now, false, lost_bytes);
            }
        }
        (c, delivered as f64 / secs as f64)
    }

    #[test]
    fn it_fills_a_long_path_and_shrugs_off_random_loss() {
        let rate = 150e6 / 8.0;
        let rtt = Duration::from_millis(160);
        for loss in [None, Some(100), Some(20)] {
            let (c, got) = run(rate, rtt, loss, 20);
            // The last ten seconds matter; over twenty, start-up included,
            // at least 0.8 of the link (minus the loss itself).
            let want = 0.8 * rate * (1.0 - loss.map_or(0.0, |k| 1.0 / k as f64));
            assert!(got >= want, "loss 1/{loss:?}: {got:.0} B/s < {want:.0}: {}", c.describe());
            assert!(c.pacing_rate() < 3.0 * rate, "{}", c.describe());
        }
    }

    #[test]
    fn the_window_stays_within_a_few_bdps() {
        let rate = 100e6 / 8.0;
        let rtt = Duration::from_millis(50);
        let (c, _) = run(rate, rtt, None, 10);
        let bdp = rate * rtt.as_secs_f64();
        let w = c.window() as f64;
        assert!(w <= 6.0 * bdp && w >= 0.5 * bdp, "window {w:.0} vs bdp {bdp:.0}: {}", c.describe());
    }

    #[test]
    fn an_announced_path_rate_starts_the_controller_at_it() {
        let rate = 150e6 / 8.0;
        let build = |f: UdtControllerFactory| {
            Arc::new(f).build(Instant::now(), 1200).into_any().downcast::<UdtController>().expect("ours")
        };
        let warm = build(UdtControllerFactory::ferry_at(Some(rate)));
        assert!(warm.pacing_rate() >= 0.9 * rate, "{}", warm.describe());
        // The window quinn gets covers the rate over a long round trip
        // before any ACK (the default RTT until the first sample).
        assert!(warm.window() as f64 >= rate * 0.1, "{}", warm.describe());
        let cold = build(UdtControllerFactory::ferry());
        assert!(cold.pacing_rate() < 0.1 * rate, "{}", cold.describe());
        for garbage in [f64::NAN, f64::INFINITY, 0.0, -1.0] {
            let g = build(UdtControllerFactory::ferry_at(Some(garbage)));
            assert!(g.pacing_rate() < 0.1 * rate, "{garbage}: {}", g.describe());
        }
    }

    #[test]
    fn the_pacer_gets_the_rate_once_start_up_is_over() {
        let pacer = PacingRate::new();
        let start = Instant::now();
        let f = Arc::new(UdtControllerFactory::ferry().paced(pacer.clone()));
        let c = f.build(start, 1200).into_any().downcast::<UdtController>().expect("ours");
        // Cold: in start-up, unpaced (quinn's pacer and session 5's window).
        assert_eq!(pacer.get(), 0, "{}", c.describe());
        let rate = 150e6 / 8.0;
        let (c, _) = drive(*c, start, rate, Duration::from_millis(160), Some(100), 10);
        let paced = pacer.get() as f64;
        assert!(!c.describe().starts_with("ferry Startup"), "{}", c.describe());
        assert!((paced - c.pacing_rate()).abs() <= 1.0, "{paced} vs {}", c.pacing_rate());
        assert!(paced >= 0.5 * rate && paced <= 2.0 * rate, "{paced}: {}", c.describe());
        drop(c);
        assert_eq!(pacer.get(), 0, "the share is given back with the controller");
    }

    #[test]
    fn the_factory_builds_through_quinns_trait() {
        let f: Arc<dyn ControllerFactory + Send + Sync> = Arc::new(UdtControllerFactory::ferry());
        let c = f.build(Instant::now(), 1200);
        assert!(c.window() >= 16 * 1200);
        assert!(c.into_any().downcast::<UdtController>().is_ok());
    }
}
