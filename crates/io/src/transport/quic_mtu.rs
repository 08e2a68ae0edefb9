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
//! connection's starting size. Other paths keep quinn's sizes for now
//! (see [`plan`]: jumbo datagrams were slower on the 80 ms path).
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

/// Above this payload one datagram per `sendmsg` already carries as much
/// as a GSO batch may (the kernel caps a GSO send at 64 KiB), so
/// segmentation offload is turned off rather than have quinn build a
/// batch the kernel refuses.
pub const NO_GSO_ABOVE: u16 = 32 << 10;

/// What the QUIC connection is configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadPlan {
    /// Start at this payload (only where the interface is the whole path).
    pub initial: Option<u16>,
    /// MTU discovery's upper bound.
    pub upper: u16,
}

impl PayloadPlan {
    /// Whether quinn may batch datagrams with GSO at this size.
    pub fn gso(&self) -> bool {
        self.upper <= NO_GSO_ABOVE
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
/// endpoint is bound to), or `None` when the interface cannot be found or
/// `FERRY_QUIC_MTU=default` asks for quinn's defaults (the A/B switch the
/// benchmarks use).
pub fn plan(addr: IpAddr) -> Option<PayloadPlan> {
    if std::env::var("FERRY_QUIC_MTU").is_ok_and(|v| v == "default") {
        return None;
    }
    if addr.is_unspecified() {
        return None;
    }
    let local = local_toward(addr)?;
    // Loopback only, for now: on the emulated 80 ms path (MTU 9000)
    // discovery up to 8,972-byte datagrams made a QUIC copy 3–4 × slower
    // with nothing dropped — the sender held itself back (the rate-based
    // controller counts in the segment size it was built with; treating
    // each large datagram as several such segments did not help). Until
    // that is understood, other paths keep quinn's sizes.
    if !local.is_loopback() {
        return None;
    }
    let mtu = interface_mtu(local)?;
    Some(plan_for(mtu, addr.is_ipv6(), true))
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
    fn jumbo_paths_discover_up_to_the_interface_and_keep_gso() {
        let p = plan_for(9000, false, false);
        assert_eq!(p, PayloadPlan { initial: None, upper: 8972 });
        assert!(p.gso());
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
