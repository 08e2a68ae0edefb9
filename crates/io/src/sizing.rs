//! Choosing stream count and staging size from the path, when the user
//! gives none.
//!
//! What a long fat network needs is enough bytes in flight: the
//! bandwidth-delay product. A single TCP stream can keep at most its socket
//! buffer in flight, and the kernel caps that at `tcp_wmem`/`tcp_rmem` (4
//! MiB on an untuned host), so the stream count has to make up the rest;
//! and a fresh connection starts with ten segments and doubles per round
//! trip, so on a long path more streams also mean a faster start. On a LAN
//! or loopback neither applies and one stream is best (the reference runs
//! show parallel streams buying nothing there). Socket buffers are left to
//! the kernel's autotuning: setting them fixes them at that size and caps
//! them at `rmem_max`, which the reference found halves throughput at 80 ms.
//! The rules are deliberately simple and every choice is logged; `ferry
//! tune` measures instead of guessing. See `docs/data-path.md`.

use std::time::Duration;

/// What is known about the path and the host.
#[derive(Debug, Clone, Copy)]
pub struct PathEstimate {
    pub rtt: Duration,
    /// Bottleneck rate in bytes per second, when measured.
    pub rate: Option<u64>,
    /// The kernel's cap on one socket's buffer (min of tcp_wmem and
    /// tcp_rmem maxima).
    pub socket_buffer_max: u64,
}

/// The chosen knobs and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizing {
    pub parallelism: u32,
    pub staging_bytes: usize,
    pub reason: String,
}

/// Rate assumed when none was measured: a 10 Gbit/s path, the fastest the
/// sites Ferry serves commonly have; over-estimating only adds streams.
pub const ASSUMED_RATE: u64 = 10_000_000_000 / 8;

/// What one fresh TCP connection safely delivers in its first round trip:
/// the receiver's initial window is about 64 KiB with the default
/// `tcp_rmem` (131072, half of it advertised, rounded down to whole
/// segments: 62,636 bytes at MTU 9000), less MODE E headers.
pub const FIRST_FLIGHT: u64 = 56 << 10;

/// Most streams chosen automatically.
pub const MAX_AUTO_STREAMS: u32 = 32;

pub fn choose(path: PathEstimate, file_size: Option<u64>) -> Sizing {
    let rtt = path.rtt.as_secs_f64();
    let rate = path.rate.unwrap_or(ASSUMED_RATE) as f64;
    let bdp = rate * rtt;
    let staging_bytes = ((bdp / 4.0) as usize).clamp(crate::staging::MIN_STAGING, crate::staging::MAX_STAGING);
    if path.rtt < Duration::from_millis(1) {
        return Sizing {
            parallelism: 1,
            staging_bytes,
            reason: format!("RTT {:.2} ms: a local path, one stream", rtt * 1e3),
        };
    }
    // Enough streams that their buffers together can hold the BDP...
    let by_buffers = (bdp / path.socket_buffer_max.max(1) as f64).ceil() as u32;
    // ...and that their first flights carry the file, or a BDP, at once:
    // a fresh connection's first flight is capped by the receiver's
    // initial window (64 KiB with the default tcp_rmem), and each further
    // flight costs a round trip (a 1 MiB file on one stream needs five).
    let target = file_size.map_or(bdp, |s| bdp.min(s as f64));
    let by_start = (target / FIRST_FLIGHT as f64).ceil() as u32;
    let parallelism = by_buffers.max(by_start).clamp(1, MAX_AUTO_STREAMS);
    Sizing {
        parallelism,
        staging_bytes,
        reason: format!(
            "RTT {:.1} ms, {} rate {:.0} Mbit/s, BDP {:.1} MB; socket buffers up to {} MiB need {} stream(s), a \
             quick start {}",
            rtt * 1e3,
            if path.rate.is_some() { "measured" } else { "assumed" },
            rate * 8.0 / 1e6,
            bdp / 1e6,
            path.socket_buffer_max >> 20,
            by_buffers,
            by_start
        ),
    }
}

/// Flow-control windows and UDP socket buffers of a QUIC data channel
/// (`transport::quic`), bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuicWindows {
    /// What one stream may have unread at the receiver.
    pub stream: u32,
    /// What the whole connection may have unread.
    pub connection: u32,
    /// What the sender keeps unacknowledged.
    pub send: u32,
    /// SO_RCVBUF / SO_SNDBUF of the UDP socket.
    pub socket: u32,
}

/// The round trip a QUIC channel is sized for when the session gave no
/// buffer size: a long intercontinental path (the reference's 80 ms
/// one-way delay).
pub const QUIC_SIZING_RTT: Duration = Duration::from_millis(160);

/// QUIC has no kernel autotuning to lean on, unlike TCP, and quinn's
/// defaults (1.25 MB per stream) hold one stream to about 100 Mbit/s at
/// 100 ms. With a buffer size from the session (SBUF, `--tcp-bs`) that is
/// one stream's window, as for TCP, and the connection's is four of them;
/// without one, the connection window is the BDP of the assumed rate over
/// [`QUIC_SIZING_RTT`] (capped at 256 MiB) and a stream may use a quarter
/// of it. Windows are limits, not allocations: memory is used only by
/// data the reader has not taken yet. The socket buffers hold a few
/// milliseconds at the assumed rate, so a scheduling hiccup of the
/// receiving thread does not drop datagrams.
pub fn quic_windows(buffer: Option<u32>) -> QuicWindows {
    const CAP: u64 = 256 << 20;
    let (stream, connection) = match buffer {
        Some(b) => {
            let b = u64::from(b).max(64 << 10);
            (b, (b * 4).min(CAP))
        }
        None => {
            let bdp = (ASSUMED_RATE as f64 * QUIC_SIZING_RTT.as_secs_f64()) as u64;
            let conn = bdp.min(CAP);
            (conn / 4, conn)
        }
    };
    QuicWindows {
        stream: stream.min(CAP) as u32,
        connection: connection as u32,
        send: connection as u32,
        socket: (ASSUMED_RATE / 100).min(16 << 20) as u32,
    }
}

/// The smaller of the kernel's maximum send and receive buffer sizes
/// (`net.ipv4.tcp_wmem`/`tcp_rmem`, third field).
pub fn socket_buffer_max() -> u64 {
    let max_of = |path: &str| {
        std::fs::read_to_string(path).ok().and_then(|s| s.split_whitespace().nth(2).and_then(|v| v.parse::<u64>().ok()))
    };
    match (max_of("/proc/sys/net/ipv4/tcp_wmem"), max_of("/proc/sys/net/ipv4/tcp_rmem")) {
        (Some(w), Some(r)) => w.min(r),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => 4 << 20,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(ms: f64, buf_mib: u64) -> PathEstimate {
        PathEstimate {
            rtt: Duration::from_secs_f64(ms / 1e3),
            rate: Some(125_000_000),
            socket_buffer_max: buf_mib << 20,
        }
    }

    #[test]
    fn local_paths_get_one_stream() {
        assert_eq!(choose(est(0.05, 64), None).parallelism, 1);
    }

    #[test]
    fn long_paths_get_more_streams_and_untuned_hosts_even_more() {
        // 1 Gbit/s at 160 ms RTT: BDP 20 MB.
        let tuned = choose(est(160.0, 64), None);
        assert!(tuned.parallelism >= 8, "{tuned:?}");
        let small_file = choose(est(160.0, 64), Some(256 << 10));
        assert!(small_file.parallelism < tuned.parallelism, "{small_file:?}");
        assert_eq!(choose(est(160.0, 64), Some(1 << 20)).parallelism, 19, "1 MiB in one flight");
        let untuned = choose(PathEstimate { rate: Some(125_000_000), ..est(60.0, 4) }, Some(64 << 20));
        assert!(untuned.parallelism >= 2, "{untuned:?}");
        assert!(choose(est(2000.0, 1), None).parallelism <= MAX_AUTO_STREAMS);
    }

    #[test]
    fn quic_windows_follow_the_buffer_or_a_long_path() {
        let w = quic_windows(Some(8 << 20));
        assert_eq!((w.stream, w.connection), (8 << 20, 32 << 20));
        let w = quic_windows(None);
        // 10 Gbit/s x 160 ms is 200 MB: one connection may hold it.
        assert_eq!(w.connection, 200_000_000);
        assert!(w.stream >= 16 << 20, "{w:?}");
        assert!(w.socket >= 4 << 20);
    }

    #[test]
    fn staging_follows_the_bdp_within_bounds() {
        assert_eq!(choose(est(0.05, 64), None).staging_bytes, crate::staging::MIN_STAGING);
        assert_eq!(choose(est(160.0, 64), None).staging_bytes, 5_000_000);
        let big = PathEstimate { rate: Some(10_000_000_000), ..est(160.0, 64) };
        assert_eq!(choose(big, None).staging_bytes, crate::staging::MAX_STAGING);
    }
}
