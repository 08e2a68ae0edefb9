//! Pluggable congestion control.
//!
//! A controller sees only transport-neutral facts — bytes and packets
//! acknowledged or lost, RTT samples, delivery-rate samples, the time — and
//! answers with two numbers: a pacing rate and a window. Nothing in the
//! trait names UDT, so a QUIC transport (quinn's `congestion::Controller`
//! takes acks, losses and RTT the same way and gives a window; its pacer
//! takes a rate) can wrap the same controllers later.
//!
//! Units: "bytes" are whatever unit the transport counts its packets in,
//! used consistently (the UDT connection counts every packet as one MSS, the
//! size of a full IP packet, so rates are close to wire rates). Packet
//! numbers are the transport's own, unwrapped and increasing.
//!
//! Three controllers:
//! * [`Daimd`] — UDT's native decreasing-AIMD rate control (libudt `CUDTCC`),
//!   for parity with UDT peers and for the benchmarks' "UDT's own" rows.
//! * [`FerryRate`] — Ferry's default: a model of the path's bottleneck rate
//!   and minimum RTT in the manner of BBR, which paces at the measured rate
//!   and so does not mistake random loss for congestion; it can start at a
//!   rate measured by a path probe instead of ramping up.
//! * [`Blast`] — a fixed rate, no congestion control (RBUDP, `CUDPBlast`):
//!   only for dedicated circuits; it cannot be built without a rate.

mod blast;
mod daimd;
mod ferry;

pub use blast::Blast;
pub use daimd::Daimd;
pub use ferry::FerryRate;

use crate::time::Time;
use std::time::Duration;

/// A delivery-rate sample (the BBR "rate sample" of the newest packet acked).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateSample {
    /// Bytes per second delivered over `interval`.
    pub rate: f64,
    pub interval: Duration,
    /// The sender had nothing to send when the sampled packet left, so the
    /// rate may be below what the path carries.
    pub app_limited: bool,
    /// Bytes delivered before the sampled packet was sent: the start of its
    /// round trip (a new round begins when this passes the previous round's end).
    pub prior_delivered: u64,
}

/// Acknowledgement of new data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AckSample {
    pub now: Time,
    pub acked_bytes: u64,
    /// Every packet before this one has been delivered.
    pub ack_point: u64,
    /// Total bytes delivered since the connection began (after this ACK).
    pub delivered: u64,
    pub bytes_in_flight: u64,
    /// Newest RTT sample, if this ACK gave one, and the smoothed RTT.
    pub rtt_sample: Option<Duration>,
    pub smoothed_rtt: Duration,
    pub rate: Option<RateSample>,
    /// The peer's own measurements, if the transport reports them
    /// (UDT's ACK carries the receiver's arrival speed and its packet-pair
    /// estimate of the link capacity), in bytes per second.
    pub peer_receive_rate: Option<f64>,
    pub link_capacity: Option<f64>,
}

/// A report of lost packets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossSample {
    pub now: Time,
    /// Smallest lost packet number in the report.
    pub first_lost: u64,
    /// Packets reported lost for the first time (a repeated report of the
    /// same loss is not counted again).
    pub lost_packets: u64,
    pub lost_bytes: u64,
    /// Largest packet number sent so far.
    pub largest_sent: u64,
    pub bytes_in_flight: u64,
}

/// A congestion controller: facts in, pacing rate and window out.
pub trait CongestionControl: std::fmt::Debug + Send {
    fn name(&self) -> &'static str;
    /// Called once when the connection is established: the size of a full
    /// packet in the transport's byte unit, the largest window the receiver
    /// allows (bytes), the first packet number and an RTT estimate if the
    /// handshake gave one.
    fn init(&mut self, now: Time, mss: u64, max_window: u64, first_pn: u64, rtt: Option<Duration>);
    fn on_sent(&mut self, _now: Time, _pn: u64, _bytes: u64, _bytes_in_flight: u64) {}
    fn on_ack(&mut self, ack: &AckSample);
    fn on_loss(&mut self, loss: &LossSample);
    /// The peer reported at once that packet `pn`, first sent at `sent`,
    /// arrived: UDT's receiver NAKs a fresh gap as the packet after it
    /// arrives, and an ACK that passed no hole reports its newest packet.
    /// Without SACK the cumulative ACK waits behind every hole for its
    /// repair; these reports do not, so they give an RTT sample a round
    /// trip before the smoothed RTT shows a change, and their progress
    /// (packet numbers over time, less the packets reported lost, which
    /// `on_loss` has counted before) a delivery rate no hole delays.
    fn on_prompt_report(&mut self, _now: Time, _pn: u64, _sent: Time) {}
    /// The retransmission timer fired: nothing was heard for a long time.
    fn on_timeout(&mut self, _now: Time) {}
    /// The receiver's window changed (bytes).
    fn set_max_window(&mut self, _bytes: u64) {}
    /// Bytes per second; `f64::INFINITY` for no pacing.
    fn pacing_rate(&self) -> f64;
    /// Bytes allowed in flight.
    fn window(&self) -> u64;
    /// Whether the controller is still searching for the path's rate (a
    /// start-up phase), so its pacing rate is a guess that grows each round
    /// rather than an estimate: a pacer below the transport (QUIC's) holds
    /// sends to the rate only once this is over.
    fn in_start_up(&self) -> bool {
        false
    }
    /// The controller's state in a line, for logs and traces.
    fn describe(&self) -> String {
        format!("{} rate {:.0} B/s window {} B", self.name(), self.pacing_rate(), self.window())
    }
}

/// The controllers by name, as `--congestion NAME` spells them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CongestionKind {
    /// UDT's DAIMD.
    Udt,
    /// Ferry's rate/RTT model; optionally starting at a measured rate and capped.
    Ferry { initial_rate: Option<f64>, max_rate: Option<f64> },
    /// A fixed rate in bytes per second.
    Blast { rate: f64 },
}

impl CongestionKind {
    pub fn build(&self) -> Box<dyn CongestionControl> {
        match *self {
            CongestionKind::Udt => Box::new(Daimd::new()),
            CongestionKind::Ferry { initial_rate, max_rate } => Box::new(FerryRate::new(initial_rate, max_rate)),
            CongestionKind::Blast { rate } => Box::new(Blast::new(rate)),
        }
    }

    /// Parses `udt`, `ferry` or `blast:RATE` (bytes/s); blast without a rate
    /// is refused, because a fixed rate that nobody chose is a guess.
    pub fn parse(s: &str) -> Result<CongestionKind, String> {
        match s {
            "udt" | "daimd" => Ok(CongestionKind::Udt),
            "ferry" | "default" => Ok(CongestionKind::Ferry { initial_rate: None, max_rate: None }),
            "blast" => Err("blast needs an explicit rate: blast:BYTES_PER_SECOND".into()),
            _ => match s.strip_prefix("blast:") {
                Some(r) => match r.parse::<f64>() {
                    Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(CongestionKind::Blast { rate }),
                    _ => Err(format!("blast rate {r:?} is not a positive number of bytes per second")),
                },
                None => Err(format!("unknown congestion control {s:?} (udt, ferry, blast:RATE)")),
            },
        }
    }
}
