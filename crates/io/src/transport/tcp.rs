//! TCP data channels, plain or in TLS (RFC 4217 `PROT P`): the transport
//! every GridFTP peer speaks, and Ferry's default.
//!
//! A connection is a [`DataStream`]. On a plain one, a block whose payload
//! is a file range goes out as the header with `MSG_MORE` and the payload
//! with `sendfile(2)`, so file bytes never enter user space and header and
//! payload leave in the same segments; a discarding sink drops bytes in
//! the kernel with `recv(MSG_TRUNC)`. A TLS stream must see every byte, so
//! it takes the buffered path with the same framing. `TCP_INFO` fills
//! [`TransportStats`].

use super::{
    AbortHandle, BoxFuture, ChannelOptions, Connection, DataConn, DataListener, Payload, Transport, TransportStats,
};
use crate::socket::configure_data_socket;
use crate::tls::DataStream;
use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::Arc;

/// The TCP transport (stateless: every option comes with the call).
#[derive(Debug, Default, Clone, Copy)]
pub struct Tcp;

/// The registry's constructor.
pub fn transport() -> Arc<dyn Transport> {
    Arc::new(Tcp)
}

fn socket_for(addr: &SocketAddr, buffer: Option<u32>) -> io::Result<tokio::net::TcpSocket> {
    let sock = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    // Set before listen/connect, so the window scale negotiated in the
    // handshake matches the buffer.
    if let Some(size) = buffer {
        sock.set_recv_buffer_size(size)?;
        sock.set_send_buffer_size(size)?;
    }
    Ok(sock)
}

/// A connected socket made ready for data: options, the observer (the
/// profiler), then TLS when the session has PROT P. The one place every
/// TCP data connection goes through.
pub fn open(sock: TcpStream, opts: &ChannelOptions) -> io::Result<DataConn> {
    configure_data_socket(&sock, opts.buffer, opts.timeout)?;
    let conn: DataConn = Box::new(opts.protection.wrap(sock)?);
    opts.observe(&*conn);
    Ok(conn)
}

impl Transport for Tcp {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn listen(&self, at: SocketAddr, opts: &ChannelOptions) -> io::Result<Arc<dyn DataListener>> {
        let sock = socket_for(&at, opts.buffer)?;
        // Ports of earlier transfers in TIME-WAIT must not fail the bind.
        sock.set_reuseaddr(true)?;
        sock.bind(at)?;
        Ok(Arc::new(TcpDataListener { listener: sock.listen(64)? }))
    }

    fn connect<'a>(
        &'a self,
        to: SocketAddr,
        from: Option<IpAddr>,
        opts: &'a ChannelOptions,
    ) -> BoxFuture<'a, io::Result<DataConn>> {
        Box::pin(async move {
            let sock = socket_for(&to, opts.buffer)?;
            if let Some(ip) = from.filter(|ip| ip.is_ipv4() == to.is_ipv4()) {
                sock.bind(SocketAddr::new(ip, 0))?;
            }
            let s = tokio::time::timeout(opts.timeout, sock.connect(to))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("connecting to {to} timed out")))?
                .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {to}: {e}")))?;
            open(s.into_std()?, opts)
        })
    }
}

/// A listening TCP socket.
#[derive(Debug)]
pub struct TcpDataListener {
    listener: tokio::net::TcpListener,
}

impl DataListener for TcpDataListener {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    fn accept<'a>(
        &'a self,
        opts: &'a ChannelOptions,
        peer: Option<IpAddr>,
    ) -> BoxFuture<'a, io::Result<(DataConn, SocketAddr)>> {
        Box::pin(async move {
            loop {
                let (s, from) = self.listener.accept().await?;
                if !super::admissible(from, peer) {
                    continue;
                }
                match s.into_std().and_then(|s| open(s, opts)) {
                    Ok(conn) => return Ok((conn, from)),
                    Err(e) => tracing::debug!(%from, error = %e, "could not set up a data connection"),
                }
            }
        })
    }
}

fn sendfile(sock: &TcpStream, from: BorrowedFd<'_>, offset: u64, len: usize) -> io::Result<usize> {
    let mut off = i64::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    loop {
        match nix::sys::sendfile::sendfile(sock, from, Some(&mut off), len) {
            Ok(n) => return Ok(n),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(nix::errno::Errno::EAGAIN) => {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "the peer took no data in time"))
            }
            Err(e) => return Err(io::Error::from_raw_os_error(e as i32)),
        }
    }
}

/// Sends a block header with `MSG_MORE`, so the kernel holds it for the
/// payload that `sendfile` adds next and both leave in the same segments.
fn send_more(sock: &TcpStream, mut data: &[u8]) -> io::Result<()> {
    use nix::sys::socket::{send, MsgFlags};
    while !data.is_empty() {
        match send(sock.as_raw_fd(), data, MsgFlags::from_bits_retain(libc::MSG_MORE | libc::MSG_NOSIGNAL)) {
            Ok(n) => data = &data[n..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "the peer took no data in time"))
            }
            Err(e) => return Err(io::Error::from_raw_os_error(e as i32)),
        }
    }
    Ok(())
}

/// Drops up to `max` bytes from a TCP socket without copying them out
/// (`recv` with `MSG_TRUNC` discards in the kernel); 0 at the end.
fn discard_some(sock: &TcpStream, max: usize) -> io::Result<usize> {
    use nix::sys::socket::{recv, MsgFlags};
    // With MSG_TRUNC, TCP never writes this buffer; its length only bounds
    // how much one call drops.
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 4 << 20]);
    }
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let want = max.min(scratch.len());
        loop {
            match recv(sock.as_raw_fd(), &mut scratch[..want], MsgFlags::MSG_TRUNC) {
                Ok(n) => return Ok(n),
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "no data arrived in time"))
                }
                Err(e) => return Err(io::Error::from_raw_os_error(e as i32)),
            }
        }
    })
}

impl Connection for DataStream {
    fn transport(&self) -> &'static str {
        "tcp"
    }

    fn zero_copy(&self) -> bool {
        self.plain().is_some()
    }

    fn is_encrypted(&self) -> bool {
        self.is_tls()
    }

    fn handshake(&mut self) -> io::Result<()> {
        DataStream::handshake(self)
    }

    fn send_block(&mut self, header: &[u8], payload: Payload<'_>) -> io::Result<u64> {
        let (Payload::Source { source, offset, len }, Some(tcp)) = (payload, self.plain()) else {
            return super::send_block_buffered(self, header, payload);
        };
        if source.file_range(offset, 0).is_none() {
            return super::send_block_buffered(self, header, payload);
        }
        send_more(tcp, header)?;
        let mut sent = 0usize;
        while sent < len {
            let Some(r) = source.file_range(offset + sent as u64, len - sent) else { break };
            if r.len == 0 {
                break;
            }
            match sendfile(tcp, r.fd, r.offset, r.len)? {
                0 => break, // the source ended
                n => sent += n,
            }
        }
        Ok(sent as u64)
    }

    fn discard(&mut self, max: usize) -> io::Result<usize> {
        match self.plain() {
            Some(tcp) => discard_some(tcp, max),
            None => {
                let mut buf = vec![0u8; max.min(1 << 20)];
                io::Read::read(self, &mut buf)
            }
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        DataStream::finish(self)
    }

    fn abort_handle(&self) -> io::Result<AbortHandle> {
        // A duplicate descriptor: shutting it down ends every blocked call
        // on the original, whichever thread holds it.
        let dup = self.tcp().try_clone()?;
        Ok(AbortHandle::new(move || {
            let _ = dup.shutdown(Shutdown::Both);
        }))
    }

    fn stats(&self) -> TransportStats {
        stats_of(self.tcp())
    }

    fn stats_probe(&self) -> Option<super::StatsProbe> {
        // A duplicate descriptor, as for the abort handle: the loop owns
        // the connection, and a number could be reused once it closes,
        // where a duplicate cannot. It is the transport's, never the
        // profiler's.
        let dup = self.tcp().try_clone().ok()?;
        Some(super::StatsProbe::new(move || Some(stats_of(&dup)).filter(|s| s.tcp.is_some())))
    }

    fn limit_unsent(&self, bytes: u32) -> io::Result<()> {
        crate::tcpinfo::set_notsent_lowat(self.tcp(), bytes)
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.tcp().peer_addr().ok()
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        self.tcp().local_addr().ok()
    }

    fn socket(&self) -> Option<BorrowedFd<'_>> {
        Some(self.tcp().as_fd())
    }
}

/// `TCP_INFO` in the transport-neutral form.
pub fn stats_of(sock: &impl AsFd) -> TransportStats {
    let mut s = TransportStats { transport: "tcp".into(), ..TransportStats::default() };
    if let Ok(snap) = crate::tcpinfo::snapshot(sock.as_fd()) {
        let t = snap.raw;
        s.tcp = Some(snap);
        s.bytes_sent = t.bytes_sent;
        s.bytes_received = t.bytes_received;
        s.rtt_us = Some(u64::from(t.rtt));
        s.window_bytes = Some(u64::from(t.snd_cwnd) * u64::from(t.snd_mss));
        s.rate = Some(if t.pacing_rate > 0 && t.pacing_rate != u64::MAX { t.pacing_rate } else { t.delivery_rate });
        s.retransmissions = u64::from(t.total_retrans);
        s.losses = u64::from(t.lost);
        s.busy_us = Some(t.busy_time);
        s.rwnd_limited_us = Some(t.rwnd_limited);
        s.sndbuf_limited_us = Some(t.sndbuf_limited);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Payload;
    use std::io::{Read, Write};
    use std::time::Duration;

    async fn pair() -> (DataConn, DataConn) {
        let opts = ChannelOptions::new(Duration::from_secs(5));
        let l = Tcp.listen("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let addr = l.local_addr().unwrap();
        let (a, b) = tokio::join!(Tcp.connect(addr, None, &opts), l.accept(&opts, None));
        (a.unwrap(), b.unwrap().0)
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn file_ranges_go_out_with_sendfile_and_honour_offsets() {
        let (mut a, mut b) = pair().await;
        assert!(a.zero_copy() && !a.is_encrypted());
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"0123456789").unwrap();
        let n = a.send_block(b"H:", Payload::Source { source: &f, offset: 3, len: 4 }).unwrap();
        assert_eq!(n, 4);
        // Past the end: what there is, then nothing.
        assert_eq!(a.send_block(b"", Payload::Source { source: &f, offset: 8, len: 5 }).unwrap(), 2);
        a.finish().unwrap();
        let mut got = String::new();
        b.read_to_string(&mut got).unwrap();
        assert_eq!(got, "H:345689");
        assert_eq!(a.stats().transport, "tcp");
        assert!(a.stats().rtt_us.is_some());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn discard_drops_exactly_what_is_asked() {
        let (mut a, mut b) = pair().await;
        a.write_all(&vec![7u8; 3_000_000]).unwrap();
        a.write_all(b"next").unwrap();
        let mut left = 3_000_000usize;
        while left > 0 {
            left -= b.discard(left).unwrap();
        }
        let mut rest = [0u8; 4];
        b.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"next");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_abort_handle_unblocks_a_read() {
        let (_a, mut b) = pair().await;
        let h = b.abort_handle().unwrap();
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 8];
            b.read(&mut buf)
        });
        h.abort();
        assert_eq!(t.join().unwrap().unwrap(), 0, "a shut-down socket reads as its end");
    }
}
