//! What a link looks like: per-direction path properties, addresses, MTU and
//! host tuning.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;
use std::time::Duration;

use crate::units::{format_delay, Rate};
use crate::WanError;

/// How long a full bottleneck queue takes to drain when the user does not give
/// `--queue`. 200 ms plus a 256 KiB burst is what the Globus baseline's `tbf`
/// (`latency 200ms burst 256kb`) amounted to, so the default keeps Ferry's
/// figures comparable with that baseline (about 25 MB at 1 Gbit/s, which is
/// more than one bandwidth-delay product at 80 ms one way).
pub const DEFAULT_QUEUE_DRAIN: Duration = Duration::from_millis(200);
/// See [`DEFAULT_QUEUE_DRAIN`].
pub const DEFAULT_QUEUE_BURST: u64 = 256 * 1024;
/// Queue bound used when a direction has no rate limit: nothing ever waits
/// for the link then, so this only caps what the delay line may hold.
pub const UNLIMITED_HELD_BYTES: u64 = 1 << 30;

/// One direction of the emulated path.
#[derive(Debug, Clone, PartialEq)]
pub struct PathConfig {
    /// One-way propagation delay added to every packet.
    pub delay: Duration,
    /// Bottleneck rate on IP bytes; `None` forwards as fast as packets come.
    pub rate: Option<Rate>,
    /// Probability that a packet is dropped at random before it is queued.
    pub loss: f64,
    /// Bottleneck queue bound in bytes (tail drop); `None` picks
    /// [`PathConfig::queue_bytes`]'s default.
    pub queue: Option<u64>,
}

impl PathConfig {
    /// A loss-free path with only a delay.
    pub fn delay_only(delay: Duration) -> Self {
        PathConfig { delay, rate: None, loss: 0.0, queue: None }
    }

    /// The effective bottleneck queue bound in bytes.
    pub fn queue_bytes(&self) -> u64 {
        match (self.queue, self.rate) {
            (Some(q), _) => q,
            (None, Some(rate)) => rate.bytes_in(DEFAULT_QUEUE_DRAIN) + DEFAULT_QUEUE_BURST,
            (None, None) => UNLIMITED_HELD_BYTES,
        }
    }
}

impl fmt::Display for PathConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "delay {}", format_delay(self.delay))?;
        match self.rate {
            Some(r) => write!(f, ", rate {r}, queue {} B", self.queue_bytes())?,
            None => write!(f, ", rate unlimited")?,
        }
        if self.loss > 0.0 {
            write!(f, ", loss {}%", self.loss * 100.0)?;
        }
        Ok(())
    }
}

/// An IPv4 address with its prefix length, as typed for `ip addr add`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

impl Ipv4Cidr {
    pub const fn new(addr: Ipv4Addr, prefix: u8) -> Self {
        Ipv4Cidr { addr, prefix }
    }

    fn network(self) -> u32 {
        let mask = if self.prefix == 0 { 0 } else { u32::MAX << (32 - self.prefix) };
        u32::from(self.addr) & mask
    }
}

impl FromStr for Ipv4Cidr {
    type Err = WanError;

    fn from_str(text: &str) -> Result<Self, WanError> {
        let bad = || WanError::InvalidConfig(format!("{text:?} is not an IPv4 address/prefix such as 10.77.0.1/24"));
        let (addr, prefix) = text.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if !(8..=30).contains(&prefix) {
            return Err(WanError::InvalidConfig(format!(
                "prefix /{prefix} in {text:?}: use /8 to /30 so both ends share a subnet"
            )));
        }
        Ok(Ipv4Cidr { addr, prefix })
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Where the bottleneck rate is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shaper {
    /// The forwarder schedules each packet on a virtual link clock (exact
    /// serialisation times, bounded byte queue, tail drop); drops are real
    /// network drops the sender must detect.
    #[default]
    Forwarder,
    /// A `tbf` qdisc on the sending namespace's TUN egress, as in the Python
    /// prototype. The queue then sits in the sending host's own stack, where
    /// TCP Small Queues throttles the sender locally instead of losing packets.
    Tbf,
}

impl FromStr for Shaper {
    type Err = WanError;

    fn from_str(s: &str) -> Result<Self, WanError> {
        match s {
            "forwarder" => Ok(Shaper::Forwarder),
            "tbf" => Ok(Shaper::Tbf),
            _ => Err(WanError::InvalidConfig(format!("shaper {s:?}: expected `forwarder` or `tbf`"))),
        }
    }
}

/// Everything needed to bring a link up.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Base name; the namespaces are `NAME-c` (client) and `NAME-s` (server).
    pub name: String,
    /// Client → server.
    pub forward: PathConfig,
    /// Server → client.
    pub back: PathConfig,
    pub mtu: u32,
    pub client_addr: Ipv4Cidr,
    pub server_addr: Ipv4Cidr,
    /// Raise `tcp_rmem`/`tcp_wmem` maxima to 64 MiB inside both namespaces
    /// ("a well-tuned host"); otherwise keep the namespace defaults.
    pub tuned: bool,
    pub shaper: Shaper,
    /// Seed for the loss generator, for repeatable runs.
    pub seed: Option<u64>,
    /// Packets each TUN device's ring may hold before the forwarder reads
    /// them. The ring only fills while the forwarder is off the CPU; what is
    /// dropped there is an artefact of the emulator, not part of the path.
    pub txqueuelen: u32,
}

impl LinkConfig {
    /// See [`LinkConfig::txqueuelen`]. With the kernel's 1000 (or the TUN
    /// default of 500), a sender bursting at BBR's start-up gain overflowed
    /// the ring whenever the forwarder lost its core for a few milliseconds
    /// on this shared 2-core machine (up to 14 000 drops in 10 s at 80 ms,
    /// unshaped); at 10 000 (90 MB of 9000-byte packets, held only while the
    /// forwarder is late) none were seen.
    pub const DEFAULT_TXQUEUELEN: u32 = 10_000;

    /// A symmetric link with the project's defaults (MTU 9000, 10.77.0.0/24,
    /// tuned hosts, forwarder shaping).
    pub fn new(name: impl Into<String>, path: PathConfig) -> Self {
        LinkConfig {
            name: name.into(),
            forward: path.clone(),
            back: path,
            mtu: 9000,
            client_addr: Ipv4Cidr::new(Ipv4Addr::new(10, 77, 0, 1), 24),
            server_addr: Ipv4Cidr::new(Ipv4Addr::new(10, 77, 0, 2), 24),
            tuned: true,
            shaper: Shaper::Forwarder,
            seed: None,
            txqueuelen: Self::DEFAULT_TXQUEUELEN,
        }
    }

    pub fn client_ns(&self) -> String {
        format!("{}-c", self.name)
    }

    pub fn server_ns(&self) -> String {
        format!("{}-s", self.name)
    }

    /// The round-trip time the link should show to a small packet.
    pub fn base_rtt(&self) -> Duration {
        self.forward.delay + self.back.delay
    }

    /// Refuses configurations that would misbehave or reach outside the
    /// emulator's own namespaces.
    pub fn validate(&self) -> Result<(), WanError> {
        let n = &self.name;
        // The name ends up in file names under /run/netns and /etc/netns; keep
        // it to characters that cannot escape those directories.
        let ok_chars = n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
        if n.is_empty() || n.len() > 48 || !ok_chars || n.starts_with(['-', '.']) {
            return Err(WanError::InvalidConfig(format!(
                "link name {n:?}: use 1-48 characters from [A-Za-z0-9._-], not starting with '-' or '.'"
            )));
        }
        if !(576..=65_000).contains(&self.mtu) {
            return Err(WanError::InvalidConfig(format!("MTU {} outside 576..=65000", self.mtu)));
        }
        if self.client_addr.addr == self.server_addr.addr {
            return Err(WanError::InvalidConfig("client and server addresses are the same".into()));
        }
        if self.client_addr.prefix != self.server_addr.prefix
            || self.client_addr.network() != self.server_addr.network()
        {
            return Err(WanError::InvalidConfig(format!(
                "{} and {} are not in the same subnet",
                self.client_addr, self.server_addr
            )));
        }
        for (label, p) in [("forward", &self.forward), ("back", &self.back)] {
            if !(0.0..=1.0).contains(&p.loss) {
                return Err(WanError::InvalidConfig(format!("{label} loss {} outside 0..=1", p.loss)));
            }
            if p.queue_bytes() < u64::from(self.mtu) {
                return Err(WanError::InvalidConfig(format!(
                    "{label} queue of {} B cannot hold one {}-byte packet",
                    p.queue_bytes(),
                    self.mtu
                )));
            }
            if self.shaper == Shaper::Tbf && p.rate.is_none() && p.queue.is_some() {
                return Err(WanError::InvalidConfig(format!(
                    "{label}: a queue bound with the tbf shaper needs a rate"
                )));
            }
        }
        if self.txqueuelen == 0 {
            return Err(WanError::InvalidConfig("txqueuelen must be positive".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_queue_matches_globus_baseline_tbf() {
        let p =
            PathConfig { rate: Some("1gbit".parse().unwrap()), ..PathConfig::delay_only(Duration::from_millis(80)) };
        assert_eq!(p.queue_bytes(), 25_000_000 + 262_144);
    }

    #[test]
    fn validation() {
        let ok = LinkConfig::new("t1", PathConfig::delay_only(Duration::ZERO));
        ok.validate().unwrap();
        for bad in ["", "-x", "../etc", "a/b", "x y"] {
            let c = LinkConfig { name: bad.into(), ..ok.clone() };
            assert!(c.validate().is_err(), "{bad:?} accepted");
        }
        let mut c = ok.clone();
        c.server_addr = "10.78.0.2/24".parse().unwrap();
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.server_addr = c.client_addr;
        assert!(c.validate().is_err());
        assert!("10.77.0.1".parse::<Ipv4Cidr>().is_err());
        assert!("10.77.0.1/32".parse::<Ipv4Cidr>().is_err());
    }
}
