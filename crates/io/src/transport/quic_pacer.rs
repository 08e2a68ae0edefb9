//! A pacer below quinn: the congestion controller's rate on the wire
//! (issue 19, session 6).
//!
//! quinn 0.11 takes a window from its congestion controller and no pacing
//! rate (`ControllerMetrics::pacing_rate` goes only to qlog); its own pacer
//! (`quinn-proto/src/connection/pacing.rs`) refills at 1.25 × window /
//! smoothed RTT. With the window a few rate × RTT products, as the ferry
//! controller needs to keep a lossy path full, quinn sent 200–260 Mbit/s
//! into a 150 Mbit/s path, the path's queue dropped a quarter or more of
//! it, and the loss the controller then saw (4–8 %) was over its
//! excess-loss threshold: it capped its rate at 0.75–0.85 of the link
//! (`bench/results/quic-s5-quiet/`).
//!
//! [`PacedSocket`] wraps the endpoint's UDP socket
//! (`quinn::Endpoint::new_with_abstract_socket`). quinn's connection
//! driver asks the socket's [`quinn::UdpPoller`] whether it may send
//! before every `try_send`; the paced poller answers "not yet" while a
//! [`TokenBucket`] filled at the pacing rate is empty, and sets a timer for
//! when it will not be. `try_send` takes the datagrams' bytes out of the
//! bucket. The bucket holds a few GSO batches (or 8 ms at the rate, if
//! more), so GSO keeps its batches and the wire sees the rate within a
//! couple of milliseconds.
//!
//! **Whose rate.** The rate is the sum of the pacing rates of the ferry
//! controllers of the endpoint's live connections ([`PacingRate`]; each
//! controller holds a [`RateShare`] and gives its part back when quinn
//! drops it). The poller cannot tell which connection it sends for (quinn
//! makes one poller per connection but does not say which), so the bucket
//! is the endpoint's. A listener's endpoint carries one data channel set,
//! one connection: its rate is that connection's. The client's endpoint is
//! shared by every connection the process makes from one local address (a
//! third-party copy, or `ferry cp` of several sources): its rate is the
//! sum, and each connection's own window (a couple of its rate × RTT
//! products) keeps one from taking the others' share for long. One
//! endpoint per data channel set would pace each exactly but costs a UDP
//! socket and a driver task per set; the sum is exact for the common case
//! of one set per endpoint.
//!
//! **What is not paced.** Datagrams below [`MIN_PACED`] bytes (ACK-only
//! and other control packets; QUIC pads every packet that carries a
//! handshake to 1,200 bytes) neither wait nor spend: quinn does not pace
//! ACKs either, and a receiver whose controller sits at its start rate
//! must not hold back the ACKs of a transfer at the link's rate. With no
//! ferry controller on the endpoint (quinn's BBR, CUBIC or NewReno chosen
//! with `--congestion`) the rate is 0 and nothing is held: quinn's own
//! pacer does what it did.

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use std::fmt;
use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Datagrams smaller than this neither wait for the bucket nor spend from
/// it (see the module doc): QUIC's minimum datagram size, below which no
/// full data packet is.
pub const MIN_PACED: usize = 1200;

/// The bucket's least depth: three GSO batches of ten 1,452-byte datagrams.
pub const MIN_DEPTH: f64 = 3.0 * 10.0 * 1452.0;

/// The bucket's depth in time at the rate, when that is more than
/// [`MIN_DEPTH`]: what a wake-up may be late by without the rate losing
/// anything. tokio's timers have a 1 ms grain and a connection driver on a
/// loaded 2-core machine runs late by several: with 2 ms a sender woken
/// every 3 ms got 0.77 of the rate (`the_bucket_lets_the_rate_through`),
/// and with 4 ms the paced sender of an 80 ms, 1 % copy at load 10 put
/// 134–146 Mbit/s of the controller's 149 on the wire
/// (`bench/results/quic-s6/traces/pacer-v1-new-1-cold.txt`). At 150 Mbit/s,
/// 8 ms is 150 kB, a burst the emulated path's queue (200 ms) takes
/// without a drop.
pub const DEPTH_TIME: Duration = Duration::from_millis(8);

/// The rate an endpoint's sends are paced at, bytes per second: the sum of
/// the shares of its connections' controllers; 0 sends unpaced.
#[derive(Debug, Default)]
pub struct PacingRate {
    total: AtomicU64,
}

impl PacingRate {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The endpoint's rate now, bytes per second (0: unpaced).
    pub fn get(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// A new share of this rate, at 0 until it is set.
    pub fn share(self: &Arc<Self>) -> RateShare {
        RateShare { total: self.clone(), mine: 0 }
    }
}

/// One connection's part of its endpoint's [`PacingRate`]; given back when
/// dropped (quinn drops the controller with the connection).
#[derive(Debug)]
pub struct RateShare {
    total: Arc<PacingRate>,
    mine: u64,
}

impl RateShare {
    /// A new share, at 0, of the same endpoint's rate.
    pub fn another(&self) -> RateShare {
        self.total.share()
    }

    /// Sets this connection's rate (bytes per second; not finite or not
    /// positive counts as 0, more than 1 TB/s as 1 TB/s).
    pub fn set(&mut self, rate: f64) {
        let new = if rate.is_finite() && rate > 0.0 { rate.min(1e12) as u64 } else { 0 };
        if new != self.mine {
            // Wrapping add of the difference: exact in both directions.
            self.total.total.fetch_add(new.wrapping_sub(self.mine), Ordering::Relaxed);
            self.mine = new;
        }
    }
}

impl Drop for RateShare {
    fn drop(&mut self) {
        self.set(0.0);
    }
}

/// A token bucket in bytes, filled at a rate given at each call, driven by
/// the caller's clock (so a test can drive it). A send may start while the
/// bucket holds anything and takes its whole size, so the bucket goes
/// below zero by at most one transmit (a GSO batch or one large datagram)
/// and large datagrams are not starved by a shallow bucket.
#[derive(Debug, Clone, Default)]
pub struct TokenBucket {
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    /// The depth at `rate` bytes per second.
    pub fn depth(rate: f64) -> f64 {
        (rate * DEPTH_TIME.as_secs_f64()).max(MIN_DEPTH)
    }

    fn refill(&mut self, now: Instant, rate: f64) {
        let depth = Self::depth(rate);
        self.tokens = match self.last {
            Some(last) => (self.tokens + rate * now.saturating_duration_since(last).as_secs_f64()).min(depth),
            // A new bucket starts full.
            None => depth,
        };
        self.last = Some(now);
    }

    /// How long until a send may start at `rate` (`None`: now).
    pub fn delay(&mut self, now: Instant, rate: f64) -> Option<Duration> {
        self.refill(now, rate);
        (self.tokens <= 0.0).then(|| Duration::from_secs_f64(-self.tokens / rate).max(Duration::from_micros(50)))
    }

    /// Takes `bytes` sent at `now` out of the bucket.
    pub fn spend(&mut self, now: Instant, rate: f64, bytes: usize) {
        self.refill(now, rate);
        self.tokens -= bytes as f64;
    }
}

/// An endpoint's UDP socket, its sends paced at a [`PacingRate`].
pub struct PacedSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    rate: Arc<PacingRate>,
    bucket: Mutex<TokenBucket>,
}

impl fmt::Debug for PacedSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacedSocket").field("inner", &self.inner).field("rate", &self.rate.get()).finish()
    }
}

impl PacedSocket {
    pub fn new(inner: Arc<dyn AsyncUdpSocket>, rate: Arc<PacingRate>) -> Arc<Self> {
        Arc::new(Self { inner, rate, bucket: Mutex::default() })
    }

    fn bucket(&self) -> std::sync::MutexGuard<'_, TokenBucket> {
        self.bucket.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long the next paced send must wait (`None`: it may go now).
    fn delay(&self, now: Instant) -> Option<Duration> {
        match self.rate.get() {
            0 => None,
            rate => self.bucket().delay(now, rate as f64),
        }
    }
}

impl AsyncUdpSocket for PacedSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(PacedPoller { inner: self.inner.clone().create_io_poller(), socket: self, timer: None })
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.inner.try_send(transmit)?;
        let len = transmit.contents.len();
        let rate = self.rate.get();
        if rate > 0 && len >= MIN_PACED {
            self.bucket().spend(Instant::now(), rate as f64, len);
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// One connection driver's poller: the bucket first, then the socket.
/// (quinn asks before every send, whatever its size; a small one waits
/// only while the bucket is empty, at most one transmit's time.)
struct PacedPoller {
    socket: Arc<PacedSocket>,
    inner: Pin<Box<dyn UdpPoller>>,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl fmt::Debug for PacedPoller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacedPoller").field("socket", &self.socket).finish()
    }
}

impl UdpPoller for PacedPoller {
    fn poll_writable(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            let now = Instant::now();
            let Some(wait) = this.socket.delay(now) else {
                this.timer = None;
                break;
            };
            let at = tokio::time::Instant::from_std(now + wait);
            match this.timer.as_mut() {
                Some(t) => t.as_mut().reset(at),
                None => this.timer = Some(Box::pin(tokio::time::sleep_until(at))),
            }
            let timer = this.timer.as_mut().expect("set above");
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        this.inner.as_mut().poll_writable(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `size`-byte transmits whenever the bucket lets them, on a
    /// clock stepped by `step`, for `secs`: the bytes sent and the largest
    /// burst (bytes sent within one step beyond what the rate refilled).
    fn drive(rate: f64, size: usize, step: Duration, secs: f64) -> (f64, f64) {
        let start = Instant::now();
        let mut b = TokenBucket::default();
        let mut now = start;
        let mut sent = 0.0;
        let mut burst: f64 = 0.0;
        while now.duration_since(start).as_secs_f64() < secs {
            let mut this_step = 0.0;
            while b.delay(now, rate).is_none() {
                b.spend(now, rate, size);
                sent += size as f64;
                this_step += size as f64;
            }
            burst = burst.max(this_step);
            now += step;
        }
        (sent, burst)
    }

    #[test]
    fn the_bucket_lets_the_rate_through() {
        for (rate, size) in [(150e6 / 8.0, 14_520), (150e6 / 8.0, 1452), (1e9, 65_507), (1e6, 1452)] {
            for step in [Duration::from_micros(100), Duration::from_millis(1), Duration::from_millis(3)] {
                let secs = 2.0;
                let (sent, _) = drive(rate, size, step, secs);
                let got = sent / secs;
                // The full bucket at the start and one transmit of
                // overshoot are all it may add; nothing is lost to the
                // clock's grain.
                let slack = (TokenBucket::depth(rate) + size as f64) / secs;
                assert!(
                    got >= rate * 0.99 && got <= rate + slack,
                    "rate {rate} size {size} step {step:?}: {got:.0} B/s"
                );
            }
        }
    }

    #[test]
    fn bursts_are_bounded_by_the_depth() {
        let rate = 150e6 / 8.0;
        // A sender that wakes up late (every 10 ms) gets at most the depth
        // plus one transmit at once, however long it slept.
        let (_, burst) = drive(rate, 1452, Duration::from_millis(10), 1.0);
        assert!(burst <= TokenBucket::depth(rate) + 1452.0, "burst {burst}");
        // After a long idle time, the same.
        let mut b = TokenBucket::default();
        let t0 = Instant::now();
        b.spend(t0, rate, 1452);
        let later = t0 + Duration::from_secs(5);
        let mut n = 0.0;
        while b.delay(later, rate).is_none() {
            b.spend(later, rate, 1452);
            n += 1452.0;
        }
        assert!(n <= TokenBucket::depth(rate) + 1452.0, "after idle: {n}");
        // And the wait it announces is the time to refill the deficit.
        let d = b.delay(later, rate).expect("empty");
        assert!(d <= Duration::from_secs_f64(1452.0 / rate) + Duration::from_micros(50), "{d:?}");
    }

    #[test]
    fn shares_add_up_and_are_given_back() {
        let r = PacingRate::new();
        let mut a = r.share();
        let mut b = r.share();
        a.set(1000.0);
        b.set(500.0);
        assert_eq!(r.get(), 1500);
        a.set(200.0);
        assert_eq!(r.get(), 700);
        b.set(f64::NAN);
        assert_eq!(r.get(), 200);
        drop(a);
        assert_eq!(r.get(), 0);
        b.set(f64::INFINITY);
        assert_eq!(r.get(), 0);
    }
}
