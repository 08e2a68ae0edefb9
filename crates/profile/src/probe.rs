//! Path helpers for `ferry probe` and `ferry tune`: the RTT of a connected
//! socket from the kernel's own estimate, and the bandwidth-delay product
//! with what it means for buffer sizes on this machine.
//!
//! The kernel's RTT estimate is better than timing a request ourselves:
//! it is measured per segment, excludes the peer's processing time (ACKs
//! are sent by its kernel), and `tcpi_min_rtt` is the propagation delay
//! without the queueing that a busy transfer adds to `tcpi_rtt`.

use std::fmt;
use std::os::fd::AsFd;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::streams::tcp_info;
use crate::units::{format_bits, format_bytes, format_ms};

/// The kernel's RTT estimate for one connection.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RttEstimate {
    /// Smoothed RTT (`tcpi_rtt`).
    pub srtt: Duration,
    /// Its mean deviation (`tcpi_rttvar`).
    pub rttvar: Duration,
    /// Lowest RTT seen (`tcpi_min_rtt`), `None` before the first ACK of data.
    pub min_rtt: Option<Duration>,
}

impl RttEstimate {
    /// The RTT to size buffers with: the minimum when known (propagation
    /// delay, not queueing), else the smoothed value.
    pub fn base(&self) -> Duration {
        self.min_rtt.unwrap_or(self.srtt)
    }
}

/// Reads the RTT estimate of a connected TCP socket (the control channel
/// after login has seen a few exchanges, which is enough).
pub fn rtt_estimate(socket: &impl AsFd) -> Result<RttEstimate> {
    let i = tcp_info(socket)?;
    Ok(RttEstimate {
        srtt: Duration::from_micros(i.rtt_us as u64),
        rttvar: Duration::from_micros(i.rttvar_us as u64),
        // The kernel reports ~0U until it has a sample.
        min_rtt: (i.min_rtt_us != 0 && i.min_rtt_us != u32::MAX).then(|| Duration::from_micros(i.min_rtt_us as u64)),
    })
}

/// Bandwidth × delay in bytes: how much data must be in flight to fill the path.
pub fn bdp_bytes(rate_bytes_per_s: f64, rtt: Duration) -> u64 {
    (rate_bytes_per_s.max(0.0) * rtt.as_secs_f64()).ceil() as u64
}

/// The limits the kernel puts on TCP buffers, from `/proc/sys/net`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferLimits {
    /// Third value of `net.ipv4.tcp_rmem`: how far receive autotuning grows.
    pub autotune_rmem_max: u64,
    /// Third value of `net.ipv4.tcp_wmem`.
    pub autotune_wmem_max: u64,
    /// `net.core.rmem_max`: the most `SO_RCVBUF` may ask for.
    pub rmem_max: u64,
    /// `net.core.wmem_max`.
    pub wmem_max: u64,
}

impl BufferLimits {
    /// Reads this machine's limits (zeros where a file is unreadable).
    pub fn current() -> BufferLimits {
        let third = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|t| t.split_ascii_whitespace().nth(2).and_then(|v| v.parse().ok()))
                .unwrap_or(0)
        };
        let one = |p: &str| std::fs::read_to_string(p).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0);
        BufferLimits {
            autotune_rmem_max: third("/proc/sys/net/ipv4/tcp_rmem"),
            autotune_wmem_max: third("/proc/sys/net/ipv4/tcp_wmem"),
            rmem_max: one("/proc/sys/net/core/rmem_max"),
            wmem_max: one("/proc/sys/net/core/wmem_max"),
        }
    }
}

/// What `ferry probe` prints: RTT, rate, BDP, and what follows for buffers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    pub rtt_ms: f64,
    pub rtt_min_ms: Option<f64>,
    pub rtt_var_ms: f64,
    /// Achievable rate measured by the caller (bytes/s), if any.
    pub rate_bytes_per_s: Option<f64>,
    pub bdp_bytes: Option<u64>,
    /// BDP rounded up to a power of two: the `--tcp-bs` to try.
    pub suggested_tcp_buffer_bytes: Option<u64>,
    /// Streams needed to cover the BDP if every stream stays within the
    /// kernel's autotuning limit (so without raising any sysctl).
    pub streams_within_autotune: Option<u32>,
    pub limits: BufferLimits,
}

impl ProbeReport {
    /// Combines an RTT estimate with a measured rate (if one was measured)
    /// and this machine's buffer limits.
    pub fn new(rtt: &RttEstimate, rate_bytes_per_s: Option<f64>, limits: BufferLimits) -> ProbeReport {
        let bdp = rate_bytes_per_s.map(|r| bdp_bytes(r, rtt.base()));
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        // Receive autotuning gives the application roughly half of tcp_rmem
        // (the rest is overhead, net.ipv4.tcp_adv_win_scale), hence / 2.
        let per_stream = limits.autotune_rmem_max / 2;
        ProbeReport {
            rtt_ms: ms(rtt.srtt),
            rtt_min_ms: rtt.min_rtt.map(ms),
            rtt_var_ms: ms(rtt.rttvar),
            rate_bytes_per_s,
            bdp_bytes: bdp,
            suggested_tcp_buffer_bytes: bdp.map(|b| b.max(64 * 1024).next_power_of_two()),
            streams_within_autotune: bdp
                .filter(|_| per_stream > 0)
                .map(|b| b.div_ceil(per_stream).clamp(1, u32::MAX as u64) as u32),
            limits,
        }
    }
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RTT {}", format_ms(self.rtt_ms))?;
        if let Some(min) = self.rtt_min_ms {
            write!(f, " (min {})", format_ms(min))?;
        }
        writeln!(f, ", variation {}", format_ms(self.rtt_var_ms))?;
        let (Some(rate), Some(bdp)) = (self.rate_bytes_per_s, self.bdp_bytes) else {
            return writeln!(f, "No rate measured, so no bandwidth-delay product.");
        };
        writeln!(f, "Rate {}; bandwidth-delay product {}.", format_bits(rate), format_bytes(bdp))?;
        if let Some(buf) = self.suggested_tcp_buffer_bytes {
            write!(
                f,
                "Each stream needs {} in flight to fill the path alone: try --tcp-bs {}",
                format_bytes(bdp),
                format_bytes(buf)
            )?;
            if self.limits.rmem_max > 0 && buf > self.limits.rmem_max {
                write!(
                    f,
                    " (net.core.rmem_max is {}, so the kernel caps it there unless raised)",
                    format_bytes(self.limits.rmem_max)
                )?;
            }
            writeln!(f, ".")?;
        }
        if let Some(n) = self.streams_within_autotune {
            if n > 1 {
                writeln!(
                    f,
                    "With the kernel's automatic buffers (up to {} per stream) that takes about {n} parallel streams (-p {n}).",
                    format_bytes(self.limits.autotune_rmem_max / 2)
                )?;
            } else {
                writeln!(f, "The kernel's automatic buffers are large enough for one stream.")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdp_at_30ms() {
        // 1 Gbit/s for 30 ms: 3.75 MB.
        assert_eq!(bdp_bytes(125_000_000.0, Duration::from_millis(30)), 3_750_000);
        let rtt = RttEstimate {
            srtt: Duration::from_millis(31),
            rttvar: Duration::from_millis(1),
            min_rtt: Some(Duration::from_millis(30)),
        };
        let limits = BufferLimits {
            autotune_rmem_max: 6 << 20,
            autotune_wmem_max: 4 << 20,
            rmem_max: 212_992,
            wmem_max: 212_992,
        };
        let p = ProbeReport::new(&rtt, Some(125_000_000.0), limits);
        assert_eq!(p.bdp_bytes, Some(3_750_000));
        assert_eq!(p.suggested_tcp_buffer_bytes, Some(4 << 20));
        assert_eq!(p.streams_within_autotune, Some(2));
        let text = p.to_string();
        assert!(text.contains("bandwidth-delay product 3.58 MiB"), "{text}");
        assert!(text.contains("-p 2"), "{text}");
        assert!(text.contains("rmem_max"), "{text}");
    }
}
