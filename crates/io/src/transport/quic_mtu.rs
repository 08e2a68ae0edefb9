//! UDP payload sizes for QUIC data channels, from the MTU of the interface
//! that carries the path (issue 19: CPU per packet).
//!
//! quinn starts at 1,200-byte datagrams and its MTU discovery stops at
//! 1,452 bytes, so on loopback (MTU 65,536) a QUIC data channel sends
//! 50 datagrams where TCP sends one 64 kB segment; every datagram costs a
//! trip through the kernel's UDP stack, quinn's packet builder and parser,
//! a header protection and an AEAD call. The profile of the loopback
//! benchmark (bench/results/quic/dev-notes.md) put about half of QUIC's CPU
//! there. On loopback the interface *is* the path, so its MTU is the
//! endpoint's receive limit, MTU discovery's upper bound and the
//! connection's starting size. On other paths the interface MTU bounds
//! quinn's MTU discovery (jumbo frames: 8,972-byte datagrams), and jumbo
//! datagrams go without GSO batches (see [`PayloadPlan::gso`]: a shaper
//! dropped the batches whole, which made jumbo datagrams look slow).
//!
//! RFC 9000 §14 (datagram size) lets an endpoint use any size the path
//! carries, with DPLPMTUD (RFC 8899) to find it; quinn implements the
//! discovery, and this module only chooses its bounds.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

/// quinn's largest UDP payload: 65,535 bytes less the UDP header.
pub const MAX_PAYLOAD: u16 = 65_527;

/// quinn's own upper bound for MTU discovery (1,500-byte Ethernet less
/// IPv6 and UDP headers); paths with no larger interface MTU keep it.
pub const DEFAULT_UPPER: u16 = 1_452;

/// What the QUIC connection is configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadPlan {
    /// Start at this payload (only where the interface is the whole path).
    pub initial: Option<u16>,
    /// MTU discovery's upper bound.
    pub upper: u16,
}

impl PayloadPlan {
    /// Whether quinn may batch datagrams with GSO at this size: only at
    /// Ethernet sizes. A GSO batch is one buffer in the qdisc, up to ten
    /// datagrams (90 kB of jumbo ones); a shaper whose bucket is smaller
    /// (ferry-wan's `tbf`: 37 kB at 150 Mbit/s, as on many sites' egress)
    /// must split or drop it, and the sender's UDP `SndbufErrors` grew.
    /// Measured on the 80 ms, 1 %, 150 Mbit/s path, one invocation, two
    /// repetitions, debug build, load 6–9 (`bench/results/quic-s4/`):
    /// 8,972-byte datagrams in GSO batches took 14.0 and 25.9 s for
    /// 128 MiB, one at a time 9.6 and 10.0 s, quinn's 1,452-byte batches
    /// 9.8 and 10.9 s. This was the "sender held itself back" of the first
    /// jumbo attempt. (The A/B switch of that measurement,
    /// `FERRY_QUIC_GSO=on`, is gone with the A/B done.)
    pub fn gso(&self) -> bool {
        self.upper <= DEFAULT_UPPER
    }
}

/// The payload plan for a path from an interface of MTU `mtu`, IPv4 or
/// IPv6, and whether the path is loopback (the interface is the path).
pub fn plan_for(mtu: u32, ipv6: bool, loopback: bool) -> PayloadPlan {
    // An IPv4 packet's total length (header included) is a 16-bit field,
    // so lo's MTU of 65,536 still means 65,507-byte UDP payloads; IPv6's
    // payload length leaves out its 40-byte header (RFC 8200 §3).
    let payload = if ipv6 { mtu.saturating_sub(40).min(65_535) - 8 } else { mtu.min(65_535).saturating_sub(20 + 8) };
    let payload = payload.min(u32::from(MAX_PAYLOAD)) as u16;
    // Ethernet-sized interfaces keep quinn's bound (it leaves room for
    // tunnels on the way); only jumbo frames and loopback raise it.
    let upper = if payload <= 1500 { DEFAULT_UPPER } else { payload };
    PayloadPlan { initial: (loopback && upper > DEFAULT_UPPER).then_some(upper), upper }
}

/// The plan for a path to or from `addr` (a peer, or a local address the
/// endpoint is bound to), or `None` (quinn's defaults) when the interface
/// cannot be found. (Session 4's A/B switch to quinn's sizes,
/// `FERRY_QUIC_MTU=default`, is gone: `bench/results/quic-s4-quiet/` holds
/// the A/B — 3.5–4 × the CPU per GB on loopback with quinn's sizes.)
pub fn plan(addr: IpAddr) -> Option<PayloadPlan> {
    if addr.is_unspecified() {
        return None;
    }
    let local = local_toward(addr)?;
    // Jumbo interfaces (MTU 9000 on ferry-wan's paths, as on many
    // research networks) let discovery go up to the interface: DPLPMTUD
    // (RFC 8899) probes the path and falls back if it carries less. Only
    // loopback, where the interface is the whole path, starts there.
    let mtu = interface_mtu(local)?;
    Some(plan_for(mtu, addr.is_ipv6(), local.is_loopback()))
}

/// The local address the kernel routes `to` from (a connected UDP socket
/// sends nothing). A local address routes from itself.
fn local_toward(to: IpAddr) -> Option<IpAddr> {
    let any: IpAddr = if to.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
    let s = UdpSocket::bind(SocketAddr::new(any, 0)).ok()?;
    s.connect(SocketAddr::new(to, 9)).ok()?;
    Some(s.local_addr().ok()?.ip())
}

/// The MTU of the interface holding `local`.
fn interface_mtu(local: IpAddr) -> Option<u32> {
    let name = nix::ifaddrs::getifaddrs().ok()?.find_map(|ifa| {
        let a = ifa.address?;
        let ip: IpAddr =
            if let Some(v4) = a.as_sockaddr_in() { IpAddr::V4(v4.ip()) } else { IpAddr::V6(a.as_sockaddr_in6()?.ip()) };
        (ip == local).then_some(ifa.interface_name)
    })?;
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu")).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_starts_at_the_largest_payload_without_gso() {
        let p = plan_for(65_536, false, true);
        assert_eq!(p, PayloadPlan { initial: Some(65_507), upper: 65_507 });
        assert!(!p.gso());
        assert_eq!(plan_for(65_536, true, true).upper, 65_488);
    }

    #[test]
    fn jumbo_paths_discover_up_to_the_interface_without_gso() {
        let p = plan_for(9000, false, false);
        assert_eq!(p, PayloadPlan { initial: None, upper: 8972 });
        // ten 8,972-byte datagrams in one qdisc buffer: a tbf drops it whole
        assert!(!p.gso());
        assert!(plan_for(1500, false, false).gso());
        assert_eq!(plan_for(9000, true, false).upper, 8952);
    }

    #[test]
    fn ethernet_paths_keep_quinns_defaults() {
        assert_eq!(plan_for(1500, false, false), PayloadPlan { initial: None, upper: DEFAULT_UPPER });
        assert_eq!(plan_for(1280, true, false).upper, DEFAULT_UPPER);
    }

    #[test]
    fn the_loopback_interface_is_found() {
        // Every Linux host has lo; its MTU is at least IPv6's minimum.
        let p = plan(Ipv4Addr::LOCALHOST.into()).expect("lo");
        assert!(p.upper >= DEFAULT_UPPER);
    }
}
