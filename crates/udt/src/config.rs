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
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mss: 1500,
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
        }
    }
}

impl Config {
    /// The smallest MSS libudt accepts (`28 + 48`, room for a handshake).
    pub const MIN_MSS: u32 = 76;

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
    /// that brings it down to 1 500 does not shrink it six times.
    pub fn at_mss(mut self, mss: u32) -> Config {
        let mss = mss.max(Self::MIN_MSS);
        if mss == self.mss {
            return self;
        }
        let (from, to) = (Self::payload_size(self.mss.max(Self::MIN_MSS)) as u64, Self::payload_size(mss) as u64);
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
