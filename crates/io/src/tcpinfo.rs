//! The kernel's view of a TCP connection (`getsockopt(TCP_INFO)`), and the
//! one TCP option Ferry sets that socket2 0.5 lacks (`TCP_NOTSENT_LOWAT`).
//!
//! Ferry reads it to size transfers from the measured round-trip time and,
//! in the profiler, to show each stream's RTT, congestion window and
//! retransmissions. This is the one place in the data path that calls the
//! kernel without a safe wrapper: neither std, socket2 0.5 nor nix expose
//! TCP_INFO or TCP_NOTSENT_LOWAT on Linux.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;
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
}

impl TcpInfo {
    pub fn rtt(&self) -> Duration {
        Duration::from_micros(u64::from(self.rtt_us))
    }
}

/// Reads TCP_INFO of a connected TCP socket.
pub fn tcp_info(sock: &impl AsRawFd) -> io::Result<TcpInfo> {
    let mut raw = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `raw` is a zeroed buffer of exactly `len` bytes, valid for
    // writes; the kernel writes at most `len` bytes into it and updates
    // `len`. The fd is borrowed from a live socket.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            raw.as_mut_ptr().cast::<libc::c_void>(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zeroed memory is a valid `tcp_info` (plain integers), and the
    // kernel filled the first `len` bytes; older kernels leave the rest 0.
    let t = unsafe { raw.assume_init() };
    Ok(TcpInfo {
        rtt_us: t.tcpi_rtt,
        rtt_var_us: t.tcpi_rttvar,
        cwnd: t.tcpi_snd_cwnd,
        ssthresh: t.tcpi_snd_ssthresh,
        snd_mss: t.tcpi_snd_mss,
        total_retrans: t.tcpi_total_retrans,
        pacing_rate: t.tcpi_pacing_rate,
        delivery_rate: t.tcpi_delivery_rate,
        bytes_acked: t.tcpi_bytes_acked,
        bytes_received: t.tcpi_bytes_received,
        snd_wnd: t.tcpi_snd_wnd,
    })
}

/// Sets `TCP_NOTSENT_LOWAT`: the socket counts as writable only while
/// fewer than `bytes` of its queue are unsent, so a blocked writer wakes
/// when the network, not the buffer, has room.
pub fn set_notsent_lowat(sock: &impl AsRawFd, bytes: u32) -> io::Result<()> {
    let value = bytes as libc::c_int;
    // SAFETY: passes a pointer to a live c_int and its exact size; the fd
    // is borrowed from a live socket.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
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
