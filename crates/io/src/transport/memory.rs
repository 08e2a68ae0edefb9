//! In-memory data channels, for tests: a transport with no sockets, whose
//! faults are injected on purpose and happen the same way every run.
//!
//! A [`Memory`] transport owns a small network of its own: listeners are
//! found by address, a connection is two bounded byte pipes (so a slow
//! reader holds its writer back, as a full socket buffer does), and the
//! [`Faults`] say what goes wrong: a delay before every write, connections
//! accepted in reverse order, a connection whose writes wait until the
//! others have carried a number of bytes (blocks then arrive out of order,
//! deterministically), and a connection that stalls after so many bytes
//! (the receiver's data timeout then fires). Reads and writes honour the
//! connection's timeout like a socket's `SO_RCVTIMEO`/`SO_SNDTIMEO`, and an
//! abort ends them as a TCP shutdown does.
//!
//! It is also the worked example of `docs/architecture.md`: a transport is
//! this one file and its line in `transport::TRANSPORTS`.

use super::{AbortHandle, BoxFuture, ChannelOptions, Connection, DataConn, DataListener, Transport, TransportStats};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// What goes wrong, on purpose.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Slept before every write: latency per block.
    pub delay: Duration,
    /// Accept the most recent pending connection first.
    pub reorder_accepts: bool,
    /// The first connection made writes nothing until the other
    /// connections together have written this many bytes (or have all
    /// finished): its blocks arrive after theirs.
    pub hold_first_until: Option<u64>,
    /// Every connection stops taking writes after this many bytes: the
    /// writer blocks until its timeout or an abort.
    pub stall_after: Option<u64>,
    /// Bytes a pipe holds before a writer waits (a socket buffer). 0: 256 KiB.
    pub capacity: usize,
}

/// The in-memory transport; clones share one network.
#[derive(Debug, Clone)]
pub struct Memory {
    net: Arc<Net>,
}

#[derive(Debug, Default)]
struct Net {
    faults: Faults,
    state: Mutex<NetState>,
    /// Bytes written by every connection but the held one, and how many
    /// connections are still open; the held one waits on it.
    others: Mutex<(u64, usize)>,
    others_cv: Condvar,
}

#[derive(Debug, Default)]
struct NetState {
    next_port: u16,
    next_conn: u64,
    listeners: HashMap<SocketAddr, Arc<AcceptQueue>>,
}

#[derive(Debug, Default)]
struct AcceptQueue {
    pending: Mutex<VecDeque<(MemoryConn, SocketAddr)>>,
    notify: tokio::sync::Notify,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The registry's constructor: one process-wide network, so that a
/// listener and a connector made separately find each other.
pub fn transport() -> Arc<dyn Transport> {
    static NET: OnceLock<Memory> = OnceLock::new();
    Arc::new(NET.get_or_init(|| Memory::new(Faults::default())).clone())
}

impl Memory {
    /// A transport with a network of its own.
    pub fn new(faults: Faults) -> Self {
        let net =
            Net { faults, state: Mutex::new(NetState { next_port: 40000, ..NetState::default() }), ..Net::default() };
        Self { net: Arc::new(net) }
    }

    /// A connected pair without a listener: (connector's end, acceptor's end).
    pub fn pair(&self, timeout: Duration) -> (MemoryConn, MemoryConn) {
        let a: SocketAddr = (Ipv4Addr::LOCALHOST, 1).into();
        let b: SocketAddr = (Ipv4Addr::LOCALHOST, 2).into();
        self.connected(a, b, timeout, timeout)
    }

    fn connected(&self, local: SocketAddr, peer: SocketAddr, t1: Duration, t2: Duration) -> (MemoryConn, MemoryConn) {
        let cap = if self.net.faults.capacity == 0 { 256 << 10 } else { self.net.faults.capacity };
        let up = Arc::new(Pipe::new(cap));
        let down = Arc::new(Pipe::new(cap));
        let id = {
            let mut st = lock(&self.net.state);
            st.next_conn += 1;
            st.next_conn - 1
        };
        let held = self.net.faults.hold_first_until.is_some() && id == 0;
        if !held {
            lock(&self.net.others).1 += 1;
        }
        let mk = |rx: &Arc<Pipe>, tx: &Arc<Pipe>, local: SocketAddr, peer: SocketAddr, timeout: Duration| MemoryConn {
            rx: rx.clone(),
            tx: tx.clone(),
            net: self.net.clone(),
            held,
            counted: !held,
            timeout,
            local,
            peer,
            sent: 0,
            received: 0,
        };
        // Only the connector's end is held (it is the one that sends in
        // MODE E); the acceptor's end is never held, but counts for no one.
        let a = mk(&down, &up, local, peer, t1);
        let mut b = mk(&up, &down, peer, local, t2);
        b.held = false;
        b.counted = false;
        (a, b)
    }
}

impl Transport for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn listen(&self, at: SocketAddr, opts: &ChannelOptions) -> io::Result<Arc<dyn DataListener>> {
        refuse_tls(opts)?;
        let mut st = lock(&self.net.state);
        let mut addr = at;
        if addr.port() == 0 {
            loop {
                st.next_port = st.next_port.wrapping_add(1).max(1024);
                addr.set_port(st.next_port);
                if !st.listeners.contains_key(&addr) {
                    break;
                }
            }
        } else if st.listeners.contains_key(&addr) {
            return Err(io::Error::new(io::ErrorKind::AddrInUse, format!("{addr} is in use")));
        }
        let queue = Arc::new(AcceptQueue::default());
        st.listeners.insert(addr, queue.clone());
        Ok(Arc::new(MemoryListener { addr, queue, net: self.net.clone() }))
    }

    fn connect<'a>(
        &'a self,
        to: SocketAddr,
        from: Option<IpAddr>,
        opts: &'a ChannelOptions,
    ) -> BoxFuture<'a, io::Result<DataConn>> {
        Box::pin(async move {
            refuse_tls(opts)?;
            let queue = lock(&self.net.state).listeners.get(&to).cloned().ok_or_else(|| {
                io::Error::new(io::ErrorKind::ConnectionRefused, format!("nothing listens at memory address {to}"))
            })?;
            let local = SocketAddr::new(from.unwrap_or(Ipv4Addr::LOCALHOST.into()), {
                let mut st = lock(&self.net.state);
                st.next_port = st.next_port.wrapping_add(1).max(1024);
                st.next_port
            });
            // The acceptor's end gets the listener's timeout when accepted.
            let (mine, theirs) = self.connected(local, to, opts.timeout, opts.timeout);
            lock(&queue.pending).push_back((theirs, local));
            queue.notify.notify_one();
            let conn: DataConn = Box::new(mine);
            opts.observe(&*conn);
            Ok(conn)
        })
    }
}

fn refuse_tls(opts: &ChannelOptions) -> io::Result<()> {
    if opts.protection.is_private() {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "TLS data channels run over tcp only"));
    }
    Ok(())
}

/// A listening address on a [`Memory`] network.
#[derive(Debug)]
pub struct MemoryListener {
    addr: SocketAddr,
    queue: Arc<AcceptQueue>,
    net: Arc<Net>,
}

impl Drop for MemoryListener {
    fn drop(&mut self) {
        lock(&self.net.state).listeners.remove(&self.addr);
    }
}

impl DataListener for MemoryListener {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }

    fn accept<'a>(
        &'a self,
        opts: &'a ChannelOptions,
        peer: Option<IpAddr>,
    ) -> BoxFuture<'a, io::Result<(DataConn, SocketAddr)>> {
        Box::pin(async move {
            refuse_tls(opts)?;
            loop {
                let next = {
                    let mut q = lock(&self.queue.pending);
                    if self.net.faults.reorder_accepts {
                        q.pop_back()
                    } else {
                        q.pop_front()
                    }
                };
                if let Some((mut conn, from)) = next {
                    if !super::admissible(from, peer) {
                        continue;
                    }
                    conn.timeout = opts.timeout;
                    let conn: DataConn = Box::new(conn);
                    opts.observe(&*conn);
                    return Ok((conn, from));
                }
                // A permit is stored if the connect came in between.
                self.queue.notify.notified().await;
            }
        })
    }
}

/// One direction of a connection: a bounded byte queue.
#[derive(Debug)]
struct Pipe {
    state: Mutex<PipeState>,
    cv: Condvar,
}

#[derive(Debug)]
struct PipeState {
    data: VecDeque<u8>,
    capacity: usize,
    /// The writer finished: the reader sees the end after the data.
    closed: bool,
    /// Aborted, or the reader went away: reads end at once, writes fail.
    reset: bool,
}

impl Pipe {
    fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(PipeState { data: VecDeque::new(), capacity, closed: false, reset: false }),
            cv: Condvar::new(),
        }
    }

    fn set(&self, f: impl FnOnce(&mut PipeState)) {
        f(&mut lock(&self.state));
        self.cv.notify_all();
    }
}

/// Waits on `cv` until `ready`, or fails with `TimedOut` after `timeout`.
fn wait<'a, T>(
    cv: &Condvar,
    mut g: MutexGuard<'a, T>,
    timeout: Duration,
    mut ready: impl FnMut(&T) -> bool,
    what: &str,
) -> io::Result<MutexGuard<'a, T>> {
    let deadline = Instant::now() + timeout;
    while !ready(&*g) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, what.to_string()));
        }
        g = cv.wait_timeout(g, left).unwrap_or_else(|e| e.into_inner()).0;
    }
    Ok(g)
}

/// One end of an in-memory connection.
#[derive(Debug)]
pub struct MemoryConn {
    rx: Arc<Pipe>,
    tx: Arc<Pipe>,
    net: Arc<Net>,
    /// Writes wait for the other connections (`Faults::hold_first_until`).
    held: bool,
    /// Counts towards what the held connection waits for.
    counted: bool,
    timeout: Duration,
    local: SocketAddr,
    peer: SocketAddr,
    sent: u64,
    received: u64,
}

impl MemoryConn {
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn release_others(&mut self) {
        if std::mem::take(&mut self.counted) {
            lock(&self.net.others).1 -= 1;
            self.net.others_cv.notify_all();
        }
    }
}

impl Read for MemoryConn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let g = lock(&self.rx.state);
        let mut g = wait(
            &self.rx.cv,
            g,
            self.timeout,
            |s| s.reset || s.closed || !s.data.is_empty(),
            "no data arrived in time",
        )?;
        if g.reset {
            return Ok(0);
        }
        let n = buf.len().min(g.data.len());
        for (i, b) in g.data.drain(..n).enumerate() {
            buf[i] = b;
        }
        drop(g);
        self.rx.cv.notify_all();
        self.received += n as u64;
        Ok(n)
    }
}

impl Write for MemoryConn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let faults = &self.net.faults;
        if let (true, Some(until)) = (self.held, faults.hold_first_until) {
            let g = lock(&self.net.others);
            drop(wait(&self.net.others_cv, g, self.timeout, |(n, open)| *n >= until || *open == 0, "held too long")?);
            self.held = false;
        }
        if let Some(limit) = faults.stall_after {
            if self.sent >= limit {
                // Stalled: nothing moves until an abort or the timeout.
                let g = lock(&self.tx.state);
                drop(wait(&self.tx.cv, g, self.timeout, |s| s.reset, "the peer took no data in time")?);
                return Err(io::ErrorKind::BrokenPipe.into());
            }
        }
        if !faults.delay.is_zero() {
            std::thread::sleep(faults.delay);
        }
        let g = lock(&self.tx.state);
        let mut g = wait(
            &self.tx.cv,
            g,
            self.timeout,
            |s| s.reset || s.closed || s.data.len() < s.capacity,
            "the peer took no data in time",
        )?;
        if g.reset || g.closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let mut n = buf.len().min(g.capacity - g.data.len());
        if let Some(limit) = faults.stall_after {
            n = n.min((limit - self.sent) as usize);
        }
        g.data.extend(&buf[..n]);
        drop(g);
        self.tx.cv.notify_all();
        self.sent += n as u64;
        if self.counted {
            lock(&self.net.others).0 += n as u64;
            self.net.others_cv.notify_all();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Connection for MemoryConn {
    fn transport(&self) -> &'static str {
        "memory"
    }

    /// Claims the zero-copy path so tests drive the same branches of the
    /// transfer loops as plain TCP does; payloads from sources are read
    /// by the default `send_block`.
    fn zero_copy(&self) -> bool {
        true
    }

    fn finish(&mut self) -> io::Result<()> {
        self.tx.set(|s| s.closed = true);
        self.release_others();
        Ok(())
    }

    fn abort_handle(&self) -> io::Result<AbortHandle> {
        let (rx, tx) = (self.rx.clone(), self.tx.clone());
        Ok(AbortHandle::new(move || {
            rx.set(|s| s.reset = true);
            tx.set(|s| s.reset = true);
        }))
    }

    fn stats(&self) -> TransportStats {
        TransportStats {
            transport: "memory".into(),
            bytes_sent: self.sent,
            bytes_received: self.received,
            rtt_us: Some(2 * self.net.faults.delay.as_micros() as u64),
            ..TransportStats::default()
        }
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        Some(self.peer)
    }
}

impl Drop for MemoryConn {
    fn drop(&mut self) {
        // The peer reads the end of the data; its writes to us fail.
        self.tx.set(|s| s.closed = true);
        self.rx.set(|s| s.reset = true);
        self.release_others();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn listen_connect_accept_and_a_clean_end() {
        let m = Memory::new(Faults { capacity: 7, ..Faults::default() });
        let opts = ChannelOptions::new(Duration::from_secs(5));
        let l = m.listen("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let addr = l.local_addr().unwrap();
        assert_eq!(m.listen(addr, &opts).unwrap_err().kind(), io::ErrorKind::AddrInUse);
        let mut a = m.connect(addr, None, &opts).await.unwrap();
        let (mut b, _) = l.accept(&opts, None).await.unwrap();
        let t = std::thread::spawn(move || {
            a.write_all(b"hello, in-memory world").unwrap();
            a.finish().unwrap();
            a
        });
        let mut got = String::new();
        b.read_to_string(&mut got).unwrap();
        let a = t.join().unwrap();
        assert_eq!(got, "hello, in-memory world");
        assert_eq!(a.stats().bytes_sent, 22);
        drop(l);
        assert!(m.connect(addr, None, &opts).await.is_err(), "the listener is gone");
    }

    #[tokio::test]
    async fn accepts_can_come_in_reverse_order() {
        let m = Memory::new(Faults { reorder_accepts: true, ..Faults::default() });
        let opts = ChannelOptions::new(Duration::from_secs(5));
        let l = m.listen("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let addr = l.local_addr().unwrap();
        let mut first = m.connect(addr, None, &opts).await.unwrap();
        let mut second = m.connect(addr, None, &opts).await.unwrap();
        first.write_all(b"1").unwrap();
        second.write_all(b"2").unwrap();
        let mut buf = [0u8; 1];
        l.accept(&opts, None).await.unwrap().0.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"2");
    }

    #[test]
    fn a_stall_times_out_and_an_abort_ends_a_read() {
        let m = Memory::new(Faults { stall_after: Some(3), ..Faults::default() });
        let (mut a, mut b) = m.pair(Duration::from_millis(20));
        assert_eq!(a.write(b"abcdef").unwrap(), 3);
        assert_eq!(a.write(b"def").unwrap_err().kind(), io::ErrorKind::TimedOut);
        let mut buf = [0u8; 8];
        assert_eq!(b.read(&mut buf).unwrap(), 3);
        assert_eq!(b.read(&mut buf).unwrap_err().kind(), io::ErrorKind::TimedOut);
        b.abort_handle().unwrap().abort();
        assert_eq!(b.read(&mut buf).unwrap(), 0, "an aborted connection reads as ended");
        assert_eq!(a.write(b"x").unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn a_held_connection_writes_after_the_others() {
        let m = Memory::new(Faults { hold_first_until: Some(4), ..Faults::default() });
        let (mut held, mut r1) = m.pair(Duration::from_secs(5));
        let (mut other, mut r2) = m.pair(Duration::from_secs(5));
        let t = std::thread::spawn(move || held.write_all(b"late").map(|()| held));
        // The held writer cannot have written before the other has.
        let mut buf = [0u8; 4];
        other.write_all(b"soon").unwrap();
        r2.read_exact(&mut buf).unwrap();
        let _held = t.join().unwrap().unwrap();
        r1.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"late");
    }
}
