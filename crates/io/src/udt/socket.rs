//! The UDP socket under a UDT endpoint: buffer sizing, and batched sends
//! and receives.
//!
//! * **Send**: consecutive datagrams to one address of one size (the last
//!   may be shorter) go out as one UDP GSO "super-datagram" (`sendmsg` with a
//!   `UDP_SEGMENT` control message, Linux ≥ 4.18): the kernel cuts it into
//!   datagrams, so 40 packets cost one system call. Without GSO (or after
//!   the kernel refuses it once) a batch goes out with one `sendmmsg`.
//! * **Receive**: `recvmmsg` fills up to [`RECV_BATCH`] buffers per call;
//!   with `UDP_GRO` (Linux ≥ 5.0) each buffer may hold several datagrams of
//!   the size the `UDP_GRO` control message names.
//! * **Arrival times**: `SO_TIMESTAMPNS` makes every `recvmmsg` buffer
//!   carry the kernel's receive time (`SCM_TIMESTAMPNS`, the wall clock):
//!   [`Received::at`]. A GRO aggregate has one, its first datagram's.
//! * **Buffers**: `SO_SNDBUF`/`SO_RCVBUF` are sized from the path's
//!   bandwidth-delay product; as root the `…FORCE` variants pass
//!   `net.core.[rw]mem_max`, otherwise the kernel's cap applies (reported in
//!   [`SocketInfo`]).
//!
//! No unsafe code: nix wraps every call used here.

use nix::sys::socket::{
    recvmmsg, sendmmsg, sendmsg, setsockopt, sockopt, ControlMessage, ControlMessageOwned, MsgFlags, MultiHeaders,
    SockaddrStorage,
};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// Receive buffers per `recvmmsg`.
pub const RECV_BATCH: usize = 16;
/// Largest datagram (or GRO aggregate) a receive buffer holds.
const RECV_BUF: usize = 65_536;
/// At most this many segments in one GSO send (the kernel's limit is 64
/// on older kernels, 128 on newer) and 64 KiB in all.
const GSO_MAX_SEGMENTS: usize = 64;
const GSO_MAX_BYTES: usize = 65_000;

/// The largest MSS a path is given ([`path_mss`]): jumbo frames. Beyond it
/// a packet lost costs more than the system calls saved (and loopback's
/// 65 536-byte MTU would make every packet a 64 KiB datagram).
pub const MAX_PATH_MSS: u32 = 9000;

/// The UDT MSS (IP packet size: IP and UDP headers included, as libudt
/// counts it) for datagrams to `peer`: the path MTU the kernel knows for
/// that destination (`IP_MTU` of a UDP socket connected to it, which is
/// the route's MTU or its interface's, lowered by any PMTU discovery),
/// at most [`MAX_PATH_MSS`]. `None` when the kernel cannot tell (no
/// route). Connecting a UDP socket sends nothing.
///
/// UDT counts 28 bytes of IPv4 and UDP headers in the MSS; an IPv6
/// header is 20 bytes longer, so a path to an IPv6 peer gets 20 less.
pub fn path_mss(peer: SocketAddr) -> Option<u32> {
    let domain = Domain::for_address(peer);
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP)).ok()?;
    socket.connect(&peer.into()).ok()?;
    // Linux answers IP_MTU for an IPv6 socket too (`ipv6_getsockopt`
    // hands SOL_IP to the IPv4 code, which reads the socket's route).
    let mtu = nix::sys::socket::getsockopt(&socket, sockopt::IpMtu).ok()?;
    let ipv4 = match peer {
        SocketAddr::V4(_) => true,
        SocketAddr::V6(a) => a.ip().to_ipv4_mapped().is_some(),
    };
    let ipv6_extra = if ipv4 { 0 } else { 20 };
    u32::try_from(mtu).ok().map(|m| m.saturating_sub(ipv6_extra).min(MAX_PATH_MSS)).filter(|&m| m >= 76)
}

/// What the socket ended up with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SocketInfo {
    pub send_buffer: usize,
    pub recv_buffer: usize,
    pub gso: bool,
    pub gro: bool,
    /// The kernel stamps each received datagram (`SO_TIMESTAMPNS`).
    pub timestamps: bool,
}

#[derive(Debug)]
pub struct UdpEndpointSocket {
    socket: UdpSocket,
    info: SocketInfo,
    recv_bufs: Vec<Vec<u8>>,
}

/// One received datagram: its place in the receive buffers.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    pub buf: usize,
    pub offset: usize,
    pub len: usize,
    pub from: SocketAddr,
    /// When the kernel received it (wall clock, since the Unix epoch), if
    /// the socket stamps arrivals.
    pub at: Option<std::time::Duration>,
}

fn to_std(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        Some(SocketAddr::V4((*v4).into()))
    } else {
        a.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
    }
}

impl UdpEndpointSocket {
    /// Binds a UDP socket with buffers of `buffer` bytes each way and
    /// turns on GSO/GRO if asked and available.
    pub fn bind(addr: SocketAddr, buffer: usize, want_gso: bool, want_gro: bool) -> io::Result<UdpEndpointSocket> {
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        let socket: UdpSocket = socket.into();
        let b = buffer.min(i32::MAX as usize / 2);
        // As root the FORCE options ignore net.core.[rw]mem_max; otherwise
        // the plain ones give what the cap allows.
        if setsockopt(&socket, sockopt::SndBufForce, &b).is_err() {
            let _ = setsockopt(&socket, sockopt::SndBuf, &b);
        }
        if setsockopt(&socket, sockopt::RcvBufForce, &b).is_err() {
            let _ = setsockopt(&socket, sockopt::RcvBuf, &b);
        }
        let s2 = socket2::SockRef::from(&socket);
        let gso = want_gso && nix::sys::socket::getsockopt(&socket, sockopt::UdpGsoSegment).is_ok();
        let gro = want_gro && setsockopt(&socket, sockopt::UdpGroSegment, &true).is_ok();
        let timestamps = setsockopt(&socket, sockopt::ReceiveTimestampns, &true).is_ok();
        let info = SocketInfo {
            // the kernel reports twice what it was asked for (bookkeeping overhead)
            send_buffer: s2.send_buffer_size().unwrap_or(0) / 2,
            recv_buffer: s2.recv_buffer_size().unwrap_or(0) / 2,
            gso,
            gro,
            timestamps,
        };
        let per = if gro { RECV_BUF } else { RECV_BUF.min(65_536) };
        Ok(UdpEndpointSocket { socket, info, recv_bufs: (0..RECV_BATCH).map(|_| vec![0u8; per]).collect() })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    pub fn info(&self) -> SocketInfo {
        self.info
    }

    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.socket.as_fd()
    }

    pub fn recv_buf(&self, i: usize) -> &[u8] {
        &self.recv_bufs[i]
    }

    /// Receives what is waiting (without blocking) into `out`; returns how
    /// many datagrams. `WouldBlock` becomes `Ok(0)`.
    pub fn recv_batch(&mut self, out: &mut Vec<Received>) -> io::Result<usize> {
        out.clear();
        let (gro, stamped) = (self.info.gro, self.info.timestamps);
        let fd = self.socket.as_raw_fd();
        let cmsg = (gro || stamped).then(|| nix::cmsg_space!(i32, nix::sys::time::TimeSpec));
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(RECV_BATCH, cmsg);
        let mut meta: Vec<(usize, Option<SocketAddr>, usize, Option<std::time::Duration>)> =
            Vec::with_capacity(RECV_BATCH);
        {
            let mut slices: Vec<[IoSliceMut<'_>; 1]> =
                self.recv_bufs.iter_mut().map(|b| [IoSliceMut::new(&mut b[..])]).collect();
            let res = match recvmmsg(fd, &mut headers, slices.iter_mut(), MsgFlags::MSG_DONTWAIT, None) {
                Ok(r) => r,
                Err(nix::errno::Errno::EAGAIN) => return Ok(0),
                Err(e) => return Err(e.into()),
            };
            for msg in res {
                let (mut seg, mut at) = (0usize, None);
                if gro || stamped {
                    if let Ok(cmsgs) = msg.cmsgs() {
                        for c in cmsgs {
                            match c {
                                ControlMessageOwned::UdpGroSegments(s) => seg = s.max(0) as usize,
                                ControlMessageOwned::ScmTimestampns(t) => {
                                    at = Some(std::time::Duration::new(t.tv_sec().max(0) as u64, t.tv_nsec() as u32))
                                }
                                _ => {}
                            }
                        }
                    }
                }
                meta.push((msg.bytes, msg.address.as_ref().and_then(to_std), seg, at));
            }
        }
        for (i, (len, from, seg, at)) in meta.into_iter().enumerate() {
            let Some(from) = from else { continue };
            let seg = if seg == 0 || seg >= len { len } else { seg };
            let mut offset = 0;
            while offset < len {
                let l = seg.min(len - offset);
                out.push(Received { buf: i, offset, len: l, from, at });
                offset += l;
            }
        }
        Ok(out.len())
    }

    /// Sends `datagrams` (in order) to their addresses; returns how many
    /// left. `WouldBlock` stops early (the caller keeps the rest).
    pub fn send_batch(&mut self, datagrams: &[(SocketAddr, &[u8])]) -> io::Result<usize> {
        let mut sent = 0;
        while sent < datagrams.len() {
            let n = if self.info.gso {
                match self.send_gso_group(&datagrams[sent..]) {
                    Ok(n) => n,
                    Err(e) if e.raw_os_error() == Some(libc::EIO) || e.raw_os_error() == Some(libc::EINVAL) => {
                        // The device cannot segment (no checksum offload):
                        // stop trying, as the kernel's own docs advise.
                        self.info.gso = false;
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(sent),
                    Err(e) => return Err(e),
                }
            } else {
                match self.send_mmsg(&datagrams[sent..]) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(sent),
                    Err(e) => return Err(e),
                }
            };
            if n == 0 {
                break;
            }
            sent += n;
        }
        Ok(sent)
    }

    /// One GSO send of the longest run at the head of `d` that shares an
    /// address and a segment size (only the last may be shorter).
    fn send_gso_group(&self, d: &[(SocketAddr, &[u8])]) -> io::Result<usize> {
        let (addr, first) = d[0];
        let seg = first.len();
        let mut n = 1;
        let mut total = seg;
        while n < d.len() && n < GSO_MAX_SEGMENTS {
            let (a, p) = d[n];
            if a != addr || p.len() > seg || total + p.len() > GSO_MAX_BYTES {
                break;
            }
            n += 1;
            total += p.len();
            if p.len() < seg {
                break;
            }
        }
        let iov: Vec<IoSlice<'_>> = d[..n].iter().map(|(_, p)| IoSlice::new(p)).collect();
        let to = SockaddrStorage::from(addr);
        let res = if n == 1 {
            sendmsg(self.socket.as_raw_fd(), &iov, &[], MsgFlags::MSG_DONTWAIT, Some(&to))
        } else {
            let seg16 = seg as u16;
            sendmsg(
                self.socket.as_raw_fd(),
                &iov,
                &[ControlMessage::UdpGsoSegments(&seg16)],
                MsgFlags::MSG_DONTWAIT,
                Some(&to),
            )
        };
        match res {
            Ok(_) => Ok(n),
            Err(e) => Err(e.into()),
        }
    }

    fn send_mmsg(&self, d: &[(SocketAddr, &[u8])]) -> io::Result<usize> {
        let n = d.len().min(64);
        let iovs: Vec<[IoSlice<'_>; 1]> = d[..n].iter().map(|(_, p)| [IoSlice::new(p)]).collect();
        let addrs: Vec<Option<SockaddrStorage>> = d[..n].iter().map(|(a, _)| Some(SockaddrStorage::from(*a))).collect();
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(n, None);
        let res = sendmmsg(self.socket.as_raw_fd(), &mut headers, &iovs, addrs, [], MsgFlags::MSG_DONTWAIT)
            .map_err(io::Error::from)?;
        Ok(res.count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback's MTU is 65 536: the path gives the cap, for IPv4 and
    /// IPv6 (whose 20 more header bytes still leave it above the cap).
    #[test]
    fn loopback_paths_get_the_capped_mss() {
        assert_eq!(path_mss("127.0.0.1:9".parse().unwrap()), Some(MAX_PATH_MSS));
        if std::net::UdpSocket::bind("[::1]:0").is_ok() {
            assert_eq!(path_mss("[::1]:9".parse().unwrap()), Some(MAX_PATH_MSS));
        }
    }
}
