//! The kernel's view of a TCP connection (`getsockopt(TCP_INFO)`), and the
//! one TCP option Ferry sets that socket2 0.5 lacks (`TCP_NOTSENT_LOWAT`).
//!
//! Ferry reads TCP_INFO to size transfers from the measured round-trip
//! time and, in the profiler, to show each stream's RTT, congestion window,
//! retransmissions and what limited it. This is the one place in the data
//! path that calls the kernel without a safe wrapper: neither std, socket2
//! 0.5 nor nix expose these options, and `libc::tcp_info` (the glibc
//! flavour) stops at `tcpi_total_retrans`, before the delivery rate and
//! the busy/rwnd/sndbuf-limited times that tell a receiver-window limit
//! from a congestion-window limit. [`RawTcpInfo`] is the struct of
//! `include/uapi/linux/tcp.h` (Linux 6.7+); the kernel copies
//! `min(optlen, sizeof)` bytes, so older kernels simply fill less (the
//! returned length says how much).
#![allow(unsafe_code)]

use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

/// The fields Ferry uses, from Linux's `struct tcp_info`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TcpInfo {
    /// Smoothed round-trip time, microseconds.
    pub rtt_us: u32,
    pub rtt_var_us: u32,
    /// Congestion window, segments.
    pub cwnd: u32,
    pub ssthresh: u32,
    pub snd_mss: u32,
    pub total_retrans: u32,
    /// Pacing and delivery rates, bytes per second (0 when unknown).
    pub pacing_rate: u64,
    pub delivery_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    /// Peer's advertised receive window, bytes.
    pub snd_wnd: u32,
    /// The smallest RTT the kernel has sampled on this connection
    /// (`tcpi_min_rtt`, a windowed minimum), microseconds; 0 when unknown.
    #[serde(default)]
    pub min_rtt_us: u32,
}

impl TcpInfo {
    pub fn rtt(&self) -> Duration {
        Duration::from_micros(u64::from(self.rtt_us))
    }

    /// The path's round trip for sizing: the smallest RTT sampled so far,
    /// or the smoothed one when the kernel has no minimum. The smoothed
    /// value taken right after a login carries whatever the server spent
    /// starting the session (0.1 to 14 ms on the same 0 ms path at load,
    /// docs/trees.md), and sizing from it gave the same path 4 or 8
    /// sessions; the minimum of the handshakes' and the login's samples
    /// is the propagation delay a window has to cover.
    pub fn path_rtt(&self) -> Duration {
        match self.min_rtt_us {
            0 => self.rtt(),
            m => Duration::from_micros(u64::from(m)),
        }
    }
}

/// `struct tcp_info` from `include/uapi/linux/tcp.h`, Linux 6.7 and later.
///
/// Fields are in the kernel's order; offsets are checked by a test against
/// `libc::tcp_info` for the common prefix and by the size assertion below.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawTcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    /// `tcpi_snd_wscale : 4, tcpi_rcv_wscale : 4` (low nibble first).
    pub wscale: u8,
    /// `tcpi_delivery_rate_app_limited:1, tcpi_fastopen_client_fail:2`.
    pub app_limited_bits: u8,

    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,

    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,

    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,

    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,

    pub rcv_rtt: u32,
    pub rcv_space: u32,

    pub total_retrans: u32,

    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,

    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,

    pub delivery_rate: u64,

    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,

    pub delivered: u32,
    pub delivered_ce: u32,

    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,

    pub rcv_ooopack: u32,

    pub snd_wnd: u32,
    pub rcv_wnd: u32,

    pub rehash: u32,

    pub total_rto: u16,
    pub total_rto_recoveries: u16,
    pub total_rto_time: u32,
}

const _: () = assert!(mem::size_of::<RawTcpInfo>() == 248);

/// Byte offsets where the fields added after Linux 5.4 start; a kernel that
/// returns fewer bytes than these did not fill them.
pub const OFFSET_RCV_WND: usize = mem::offset_of!(RawTcpInfo, rcv_wnd);
pub const OFFSET_REHASH: usize = mem::offset_of!(RawTcpInfo, rehash);
pub const OFFSET_TOTAL_RTO: usize = mem::offset_of!(RawTcpInfo, total_rto);
/// Everything up to `tcpi_snd_wnd` (Linux 5.4). Shorter answers come from
/// kernels Ferry does not support and are refused.
pub const MIN_LEN: usize = mem::offset_of!(RawTcpInfo, rcv_wnd);

/// Reads `TCP_INFO` of a socket. Returns the struct and how many bytes the
/// kernel filled in.
pub fn raw_tcp_info(fd: BorrowedFd<'_>) -> io::Result<(RawTcpInfo, usize)> {
    let mut info = RawTcpInfo::default();
    let mut len = mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `info` is a live, properly aligned `repr(C)` value of exactly
    // `len` bytes made only of integers (every bit pattern is valid), and
    // the kernel writes at most `len` bytes into it and updates `len`. The
    // descriptor is borrowed for the duration of the call, so it is open.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut RawTcpInfo).cast::<libc::c_void>(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((info, len as usize))
}

/// One whole `TCP_INFO` reading with the socket's buffer sizes: the
/// detail a TCP connection adds to its `TransportStats` for the
/// profiler's per-stream series (docs/profiler.md lists the fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSnapshot {
    pub raw: RawTcpInfo,
    /// How many bytes of `raw` the kernel filled in.
    pub len: usize,
    /// `SO_SNDBUF` and `SO_RCVBUF` as autotuning has grown them.
    pub send_buffer_bytes: Option<u32>,
    pub receive_buffer_bytes: Option<u32>,
}

/// Reads a [`TcpSnapshot`] of a socket.
pub fn snapshot(fd: BorrowedFd<'_>) -> io::Result<TcpSnapshot> {
    let (raw, len) = raw_tcp_info(fd)?;
    let sock = socket2::SockRef::from(&fd);
    Ok(TcpSnapshot {
        raw,
        len,
        send_buffer_bytes: sock.send_buffer_size().ok().map(|v| v as u32),
        receive_buffer_bytes: sock.recv_buffer_size().ok().map(|v| v as u32),
    })
}

/// Reads TCP_INFO of a connected TCP socket.
pub fn tcp_info(sock: &impl AsFd) -> io::Result<TcpInfo> {
    let (t, _) = raw_tcp_info(sock.as_fd())?;
    Ok(TcpInfo {
        rtt_us: t.rtt,
        rtt_var_us: t.rttvar,
        cwnd: t.snd_cwnd,
        ssthresh: t.snd_ssthresh,
        snd_mss: t.snd_mss,
        total_retrans: t.total_retrans,
        pacing_rate: t.pacing_rate,
        delivery_rate: t.delivery_rate,
        bytes_acked: t.bytes_acked,
        bytes_received: t.bytes_received,
        snd_wnd: t.snd_wnd,
        min_rtt_us: t.min_rtt,
    })
}

/// Sets `TCP_NOTSENT_LOWAT`: the socket counts as writable only while
/// fewer than `bytes` of its queue are unsent, so a blocked writer wakes
/// when the network, not the buffer, has room.
pub fn set_notsent_lowat(sock: &impl AsFd, bytes: u32) -> io::Result<()> {
    let value = bytes as libc::c_int;
    // SAFETY: passes a pointer to a live c_int and its exact size; the fd
    // is borrowed from a live socket.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&value as *const libc::c_int).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// The common prefix must match libc's declaration of the same kernel
    /// struct, which catches a transposed field in the copy above.
    #[test]
    fn layout_matches_libc_prefix() {
        assert_eq!(offset_of!(RawTcpInfo, rto), offset_of!(libc::tcp_info, tcpi_rto));
        assert_eq!(offset_of!(RawTcpInfo, rtt), offset_of!(libc::tcp_info, tcpi_rtt));
        assert_eq!(offset_of!(RawTcpInfo, snd_cwnd), offset_of!(libc::tcp_info, tcpi_snd_cwnd));
        assert_eq!(offset_of!(RawTcpInfo, total_retrans), offset_of!(libc::tcp_info, tcpi_total_retrans));
        assert_eq!(offset_of!(RawTcpInfo, pacing_rate), 104);
        assert_eq!(offset_of!(RawTcpInfo, delivery_rate), 160);
        assert_eq!(offset_of!(RawTcpInfo, snd_wnd), 228);
        assert_eq!(MIN_LEN, 232);
        assert_eq!((OFFSET_RCV_WND, OFFSET_REHASH, OFFSET_TOTAL_RTO), (232, 236, 240));
    }

    #[test]
    fn loopback_connection_has_a_small_rtt_and_a_window() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        std::io::Write::write_all(&mut &a, &[0u8; 100_000]).unwrap();
        let mut buf = vec![0u8; 100_000];
        std::io::Read::read_exact(&mut &b, &mut buf).unwrap();
        let i = tcp_info(&a).unwrap();
        assert!(i.rtt_us > 0 && i.rtt_us < 100_000, "{i:?}");
        assert!(i.cwnd >= 1 && i.snd_mss > 0, "{i:?}");
        assert!(i.bytes_acked >= 100_000, "{i:?}");
        assert!(i.min_rtt_us > 0 && i.path_rtt() <= i.rtt(), "{i:?}");
    }

    #[test]
    fn the_path_rtt_is_the_smallest_sample_when_the_kernel_has_one() {
        // Smoothed 14.3 ms after a busy login on a path whose samples went
        // as low as 0.1 ms: sizing takes the 0.1 ms.
        let busy = TcpInfo { rtt_us: 14_300, min_rtt_us: 100, ..TcpInfo::default() };
        assert_eq!(busy.path_rtt(), Duration::from_micros(100));
        let unknown = TcpInfo { rtt_us: 2_500, ..TcpInfo::default() };
        assert_eq!(unknown.path_rtt(), Duration::from_micros(2_500));
    }

    #[test]
    fn notsent_lowat_applies_to_tcp_sockets_only() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_notsent_lowat(&a, 256 << 10).unwrap();
        let file = tempfile::tempfile().unwrap();
        assert!(set_notsent_lowat(&file, 1).is_err());
    }
}
