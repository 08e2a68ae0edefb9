//! Connection settings. Defaults are libudt 4.11's (`CUDT::CUDT()`) except
//! where noted; every buffer is bounded by one of these numbers.

use crate::cc::CongestionKind;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Config {
    /// Maximum segment size: the largest IP packet, IP and UDP headers
    /// included (`UDT_MSS`, default 1500). The smaller of the two ends' MSS
    /// is used. Payload per packet is `mss − 28 − 16`. The packet counts
    /// below are packets of this MSS ([`Config::at_mss`] recounts them).
    pub mss: u32,
    /// Largest flow window we advertise, packets (`UDT_FC`, default 25600).
    pub flight_flag_size: u32,
    /// Receive buffer, packets (`UDT_RCVBUF` / payload size, default 8192).
    pub recv_buffer_packets: u32,
    /// Send buffer, bytes (`UDT_SNDBUF`, default 8192 packets).
    pub send_buffer_bytes: usize,
    pub congestion: CongestionKind,
    /// Cap on the sending rate whatever the controller says, bytes/s
    /// (`UDT_MAXBW`; none by default).
    pub max_bandwidth: Option<f64>,
    /// Rendezvous connection setup (`UDT_RENDEZVOUS`).
    pub rendezvous: bool,
    /// Give up connecting after this long (libudt: 3 s, 30 s in rendezvous).
    pub connect_timeout: Duration,
    /// Interval between handshake retransmissions (libudt: 250 ms).
    pub handshake_interval: Duration,
    /// How long `close` waits for unacknowledged data (`UDT_LINGER`, 180 s).
    pub linger: Duration,
    /// Minimum retransmission (EXP) interval (libudt: 300 ms).
    pub min_exp_interval: Duration,
    /// The peer is dead after more than this many EXP expirations
    /// and at least `dead_after` of silence (libudt: 16 and 5 s, which in
    /// practice comes to about 46 s because the silence is counted from the
    /// last expiration).
    pub max_exp_count: u32,
    pub dead_after: Duration,
    /// Re-send the receiver's loss list every NAK interval (RTT + 4·RTTVar,
    /// at least `nak_min_interval`). libudt 4.11 disabled this ("rely on the
    /// sender's EXP"); earlier UDT versions and the UDT specification have
    /// it. A libudt sender accepts the extra NAKs. Without it, a lost
    /// retransmission stalls the receiver until the sender's EXP timer, and
    /// that timer only runs while the receiver is silent.
    pub periodic_nak: bool,
    pub nak_min_interval: Duration,
    /// Packets sent back to back when the pacing clock fell behind (the
    /// driver wakes late); the average rate is kept either way.
    pub max_burst: Duration,
    /// Queued control packets beyond this many are dropped (ACKs and NAKs
    /// are periodic; a peer cannot make us queue without bound).
    pub max_control_queue: usize,
    /// How far the buffers may grow with the measured path, bytes (0, the
    /// default: they stay as configured, as libudt's do). A receiver sizes
    /// its buffer, and so the flow window it advertises, at
    /// [`Config::PATH_BUFFER_BDPS`] times its arrival rate times the RTT
    /// when that is more than configured; a sender lets its send buffer
    /// hold the window the peer advertises. Neither exceeds this, and
    /// neither shrinks (docs/udt.md, "Session 17").
    pub max_path_buffer_bytes: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mss: Self::DEFAULT_MSS,
            flight_flag_size: 25_600,
            recv_buffer_packets: 8192,
            send_buffer_bytes: 8192 * 1456,
            congestion: CongestionKind::Ferry { initial_rate: None, max_rate: None },
            max_bandwidth: None,
            rendezvous: false,
            connect_timeout: Duration::from_secs(3),
            handshake_interval: Duration::from_millis(250),
            linger: Duration::from_secs(180),
            min_exp_interval: Duration::from_millis(300),
            max_exp_count: 16,
            dead_after: Duration::from_secs(5),
            periodic_nak: true,
            nak_min_interval: Duration::from_millis(20),
            max_burst: Duration::from_millis(1),
            max_control_queue: 256,
            max_path_buffer_bytes: 0,
        }
    }
}

impl Config {
    /// The smallest MSS libudt accepts (`28 + 48`, room for a handshake).
    pub const MIN_MSS: u32 = 76;
    /// UDT4's default MSS (`UDT_MSS`), what libudt and Globus UDT offer.
    pub const DEFAULT_MSS: u32 = 1500;

    /// Bandwidth-delay products a receive buffer grown with the path holds
    /// ([`Config::max_path_buffer_bytes`]), as [`Config::for_path`]'s: the
    /// data behind a hole waits a round trip and the NAK's delay for its
    /// repair, two or three more when the repair is lost too.
    pub const PATH_BUFFER_BDPS: f64 = 8.0;

    /// Payload bytes per data packet at MSS `mss`.
    pub fn payload_size(mss: u32) -> usize {
        mss as usize - crate::packet::IP_UDP_OVERHEAD - crate::packet::HEADER_LEN
    }

    /// The same buffers in packets of MSS `mss`: the receive buffer and
    /// flow window, counted in packets of the configured MSS, are recounted
    /// so that they hold the same bytes (rounded up, at least 32 packets);
    /// the send buffer is in bytes already. A connection calls this once
    /// the handshake settled its MSS, so a 9 000-byte MSS does not make a
    /// 16 384-packet receive buffer six times larger in memory, and a peer
    /// that brings it down to 1 500 does not shrink it six times. Below
    /// 1 500 (or the configured MSS, if smaller) the counts stay those of
    /// that size and the bytes shrink: the receive buffer keeps a slot per
    /// packet, so a hostile peer offering the 76-byte minimum would
    /// otherwise make it ~786,000 slots (19 MB of bookkeeping) for 24 MB.
    pub fn at_mss(mut self, mss: u32) -> Config {
        let mss = mss.max(Self::MIN_MSS);
        if mss == self.mss {
            return self;
        }
        let floor = self.mss.min(Self::DEFAULT_MSS);
        let from = Self::payload_size(self.mss.max(Self::MIN_MSS)) as u64;
        let to = Self::payload_size(mss.max(floor)) as u64;
        let recount = |packets: u32| -> u32 {
            let n = (u64::from(packets) * from).div_ceil(to).clamp(32, i32::MAX as u64);
            n as u32
        };
        self.recv_buffer_packets = recount(self.recv_buffer_packets);
        self.flight_flag_size = recount(self.flight_flag_size);
        self.mss = mss;
        self
    }

    /// Buffers sized for a path of `rate` bytes/s and `rtt`: the receive
    /// buffer and flow window hold eight bandwidth-delay products (room for
    /// the data behind a hole that waits for its repair, two or three round
    /// trips more when the retransmission is lost too: at 5 % loss the ACK
    /// point stands 4–5 round trips behind the newest packet), the send
    /// buffer as much. At least libudt's defaults.
    pub fn for_path(mut self, rate: f64, rtt: Duration) -> Config {
        let payload = Self::payload_size(self.mss) as f64;
        let bdp_packets = (rate * rtt.as_secs_f64() / payload).ceil();
        let packets = ((bdp_packets * 8.0) as u32).clamp(8192, 1 << 20);
        self.recv_buffer_packets = self.recv_buffer_packets.max(packets);
        self.flight_flag_size = self.flight_flag_size.max(packets);
        self.send_buffer_bytes = self.send_buffer_bytes.max(packets as usize * payload as usize);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recounting keeps the bytes at and above 1 500, and keeps the counts
    /// below it: the 76-byte minimum a hostile peer may offer does not
    /// multiply the receive buffer's slots.
    #[test]
    fn a_small_mss_does_not_multiply_the_packet_counts() {
        let base = Config::default();
        let tiny = base.clone().at_mss(Config::MIN_MSS);
        assert_eq!(
            (tiny.mss, tiny.recv_buffer_packets, tiny.flight_flag_size),
            (Config::MIN_MSS, base.recv_buffer_packets, base.flight_flag_size)
        );
        let jumbo = base.clone().at_mss(9000);
        assert!(jumbo.recv_buffer_packets < base.recv_buffer_packets / 5);
        // From a path's 9 000 down to a peer's 76: back to the 1 500 counts
        // (to rounding), not 117 times more.
        let down = jumbo.at_mss(Config::MIN_MSS);
        assert!(down.recv_buffer_packets.abs_diff(base.recv_buffer_packets) <= 8, "{down:?}");
        assert!(down.flight_flag_size.abs_diff(base.flight_flag_size) <= 8, "{down:?}");
    }
}
