//! One UDP socket and the thread that drives every UDT connection on it.
//!
//! The thread owns the socket; the connections live in [`State`] behind one
//! mutex shared with the application threads, which copy bytes in and out
//! and wait on a condition variable. The loop, per wake-up:
//!
//! 1. under the lock: run due timers, collect every datagram the
//!    connections want to send now (control first, data as pacing allows);
//! 2. outside the lock: send them in one batch (GSO or `sendmmsg`);
//! 3. sleep in `ppoll` on the socket and an eventfd (which application
//!    threads signal after a write or a close) until the earliest deadline;
//! 4. receive a batch (`recvmmsg`, GRO) and, under the lock, route each
//!    datagram by destination socket id — id 0 to the listener — checking
//!    the source address as libudt does (`CRcvQueue::worker`).
//!
//! Time for the sans-IO core is nanoseconds since the endpoint started. A
//! received datagram is handed over at the time the kernel received it
//! (`SO_TIMESTAMPNS`, see [`arrival`]), not the time this thread got round
//! to reading it: under load the thread runs milliseconds late, and an ACK
//! read late stretched the sender's delivery samples (docs/udt.md, "The
//! driver").

use super::socket::{Received, UdpEndpointSocket};
use super::UdtConfig;
use ferry_udt::packet::destination_socket_id;
use ferry_udt::{Connection, Listener, ListenerOutput, Time};
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::eventfd::{EfdFlags, EventFd};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A connection and what its application handle needs to know.
#[derive(Debug)]
pub struct Entry {
    pub conn: Connection,
    /// The application dropped its handle: remove once drained.
    pub orphaned: bool,
    /// A writer waits until the send buffer has this much room (0: none
    /// waits). See [`State::wanted`].
    pub want_space: usize,
    /// A reader waits for data (or the end of the stream).
    pub want_read: bool,
    /// A thread waits until everything written has been sent once
    /// (`UdtStream::wait_sent`): the I/O thread signals when the
    /// connection's send queue drains in its send phase, not only after a
    /// receive or a timer.
    pub want_sent: bool,
}

impl Entry {
    pub fn new(conn: Connection) -> Entry {
        Entry { conn, orphaned: false, want_space: 0, want_read: false, want_sent: false }
    }

    /// What this connection's waiting reader or writer waits for is there.
    fn wanted(&self) -> bool {
        let c = &self.conn;
        (self.want_space > 0 && (c.send_space() >= self.want_space || !c.is_established()))
            || (self.want_read && (c.readable() > 0 || c.at_eof() || c.is_closed()))
            || (self.want_sent && self.sent())
    }

    /// Everything written has been sent once and no reported loss waits
    /// (or the connection closed): what `UdtStream::wait_sent` waits for.
    pub fn sent(&self) -> bool {
        !self.conn.has_unsent() || self.conn.is_closed()
    }
}

#[derive(Debug)]
pub struct State {
    pub conns: HashMap<u32, Entry>,
    pub listener: Option<Listener>,
    pub accept_queue: VecDeque<u32>,
    /// Waits in `accept` return at once (the listener's owner is gone;
    /// see `UdtListener::stop_accepting`).
    pub accepts_stopped: bool,
    /// Threads in `accept`, and in other waits (a connect, a shutdown, an
    /// acknowledgement) that any change may end.
    pub accepting: usize,
    pub other_waiters: usize,
    pub backlog: usize,
    /// The I/O thread stopped (socket error or shutdown).
    pub dead: Option<String>,
    pub next_id: u32,
}

#[derive(Debug)]
pub struct Shared {
    pub state: Mutex<State>,
    /// Signalled when data arrived, send space freed, a state changed.
    pub changed: Condvar,
    /// Signalled for threads in `accept` only: a connection queued, accepts
    /// stopped, the thread died. On one condition variable with the
    /// readers, a client's data listener (a blocking accept for the whole
    /// download) was woken with the reader for every batch it was handed,
    /// to find nothing and wait again — a third of the receiving client's
    /// futex time (session 13, docs/udt.md "The driver").
    pub accepted: Condvar,
    pub wake: EventFd,
    pub start: Instant,
    pub stop: AtomicBool,
    /// Counts the thread's send phases: a datagram polled before epoch `e`
    /// was handed to the kernel once the epoch passes `e`.
    pub send_epoch: AtomicU64,
    pub config: UdtConfig,
    pub local: SocketAddr,
    pub socket_info: super::socket::SocketInfo,
    /// Datagrams handed over at their kernel arrival time, and the sum of
    /// how long they waited in the socket before this thread read them
    /// (nanoseconds): the trace's `rx_stamped` and `rx_wait_us`.
    pub rx_stamped: AtomicU64,
    pub rx_wait_ns: AtomicU64,
}

impl Shared {
    pub fn now(&self) -> Time {
        Time::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the I/O thread (after a write, a read that opened the window,
    /// a close).
    pub fn kick(&self) {
        let _ = self.wake.write(1);
    }

    /// Waits on the condition variable for at most `limit`.
    pub fn wait<'a>(&self, g: MutexGuard<'a, State>, limit: Duration) -> MutexGuard<'a, State> {
        match self.changed.wait_timeout(g, limit) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }

    /// Waits on the accept condition variable for at most `limit`.
    pub fn wait_accept<'a>(&self, g: MutexGuard<'a, State>, limit: Duration) -> MutexGuard<'a, State> {
        match self.accepted.wait_timeout(g, limit) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }

    /// Wakes the waiters [`State::to_wake`] named (called after the lock
    /// is released, so that they do not wake into a held mutex).
    fn signal(&self, (changed, accepted): (bool, bool)) {
        if changed {
            self.changed.notify_all();
        }
        if accepted {
            self.accepted.notify_all();
        }
    }
}

/// Random 32 bits from the kernel's generator (socket ids, ISNs, the
/// cookie secret); falls back to time and address if it is unavailable.
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| io::Read::read_exact(&mut f, &mut b)).is_ok() {
        return u64::from_ne_bytes(b);
    }
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (t.as_nanos() as u64) ^ (u64::from(std::process::id()) << 32)
}

/// Starts an endpoint on `bind`; `listen` makes it accept connections.
pub fn start(bind: SocketAddr, config: UdtConfig, listen: bool) -> io::Result<Arc<Shared>> {
    let socket = UdpEndpointSocket::bind(bind, config.socket_buffer, config.gso, config.gro)?;
    let local = socket.local_addr()?;
    let wake = EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?;
    let start = Instant::now();
    let mut secret = [0u8; 32];
    for chunk in secret.chunks_mut(8) {
        chunk.copy_from_slice(&random_u64().to_ne_bytes());
    }
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            conns: HashMap::new(),
            listener: listen.then(|| Listener::new(secret, Time::ZERO)),
            accept_queue: VecDeque::new(),
            accepts_stopped: false,
            accepting: 0,
            other_waiters: 0,
            backlog: config.backlog,
            dead: None,
            // libudt: a random start in [1, 2^30], decreasing
            next_id: 1 + (random_u64() % (1 << 30)) as u32,
        }),
        changed: Condvar::new(),
        accepted: Condvar::new(),
        wake,
        start,
        stop: AtomicBool::new(false),
        send_epoch: AtomicU64::new(0),
        socket_info: socket.info(),
        rx_stamped: AtomicU64::new(0),
        rx_wait_ns: AtomicU64::new(0),
        config,
        local,
    });
    let s = Arc::clone(&shared);
    std::thread::Builder::new().name(format!("udt-{}", local.port())).spawn(move || {
        let err = run(&s, socket).err();
        let mut st = s.lock();
        st.dead = Some(err.map_or_else(|| "endpoint closed".to_string(), |e| e.to_string()));
        drop(st);
        s.changed.notify_all();
        s.accepted.notify_all();
    })?;
    Ok(shared)
}

impl State {
    /// Whether a waiting application thread has something to wake for:
    /// the I/O thread signals the condition variable only then (session
    /// 12). It used to signal after every receive batch and every timer,
    /// which on a fast stream woke the reader for every batch, the writer
    /// for every ACK (to write the few packets it freed) and a data
    /// listener's accepting thread for nothing, each wake a context switch
    /// on both sides (docs/udt.md, "The driver").
    pub fn wanted(&self) -> bool {
        self.other_waiters > 0 || self.conns.values().any(Entry::wanted)
    }

    /// A thread in `accept` has something to wake for (on
    /// [`Shared::accepted`]).
    pub fn accept_wanted(&self) -> bool {
        self.accepting > 0 && (!self.accept_queue.is_empty() || self.accepts_stopped)
    }

    /// Which condition variables to signal: readers, writers and other
    /// waiters on [`Shared::changed`] when they have what they wait for
    /// (all of them after a state change, `any`), threads in `accept` on
    /// [`Shared::accepted`].
    fn to_wake(&self, any: bool) -> (bool, bool) {
        (any || self.wanted(), self.accept_wanted())
    }

    pub fn new_id(&mut self) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = if self.next_id <= 1 { 1 << 30 } else { self.next_id - 1 };
            if !self.conns.contains_key(&id) {
                return id;
            }
        }
    }
}

/// Pending datagrams, each in its own buffer, kept for reuse: a
/// connection writes its next datagram straight into the next free one
/// (`Connection::poll_transmit`), and the send's I/O vectors point at them.
/// (The datagrams used to be written to a scratch buffer and copied back to
/// back into one: a third copy of every byte sent, ~0.08 CPU s/GB of the
/// sender on loopback, session 13.)
#[derive(Debug, Default)]
struct OutBatch {
    bufs: Vec<Vec<u8>>,
    /// Address of each pending datagram; datagram `i` is `bufs[i]`.
    to: Vec<SocketAddr>,
}

impl OutBatch {
    fn clear(&mut self) {
        self.to.clear();
    }

    fn len(&self) -> usize {
        self.to.len()
    }

    fn is_empty(&self) -> bool {
        self.to.is_empty()
    }

    /// The next free buffer (its old contents still in it).
    fn next_buf(&mut self) -> &mut Vec<u8> {
        let i = self.to.len();
        if self.bufs.len() <= i {
            // grows to the connection's MSS on first use
            self.bufs.push(Vec::with_capacity(1500));
        }
        &mut self.bufs[i]
    }

    /// Makes the buffer [`next_buf`](Self::next_buf) gave, cut to `len`
    /// bytes, a datagram to `to`.
    fn commit(&mut self, to: SocketAddr, len: usize) {
        let i = self.to.len();
        self.bufs[i].truncate(len);
        self.to.push(to);
    }

    fn push(&mut self, to: SocketAddr, d: &[u8]) {
        let b = self.next_buf();
        b.clear();
        b.extend_from_slice(d);
        self.commit(to, d.len());
    }

    fn list(&self) -> Vec<(SocketAddr, &[u8])> {
        self.to.iter().zip(&self.bufs).map(|(&a, b)| (a, &b[..])).collect()
    }
}

fn run(shared: &Arc<Shared>, mut socket: UdpEndpointSocket) -> io::Result<()> {
    let mut out = OutBatch::default();
    let mut received: Vec<Received> = Vec::with_capacity(super::socket::RECV_BATCH * 44);
    let max_batch = shared.config.batch.max(1);
    // The connections in the order they are served this round: the start
    // rotates every round and each gets at most an equal share of the
    // batch, so one busy connection cannot starve the others sharing the
    // socket (a listener's accepted `-p 4` streams).
    let mut order: Vec<u32> = Vec::new();
    let mut turn: usize = 0;
    // The latest arrival time handed over: arrivals never go back in time.
    let mut last_arrival = Time::ZERO;
    loop {
        if shared.stop.load(Ordering::Acquire) {
            let st = shared.lock();
            if st.conns.values().all(|e| e.conn.is_drained()) {
                return Ok(());
            }
        }
        // 1. timers and transmissions
        let now = shared.now();
        let mut deadline: Option<Time> = None;
        let mut more = false;
        {
            let mut st = shared.lock();
            out.clear();
            let mut notify = false;
            let mut event = false;
            // a connection whose `wait_sent` waiter now has its answer
            let mut drained = false;
            order.clear();
            order.extend(st.conns.keys().copied());
            let n = order.len().max(1);
            turn = turn.wrapping_add(1);
            let share = max_batch.div_ceil(n);
            for i in 0..order.len() {
                let id = order[(i + turn) % n];
                let Some(e) = st.conns.get_mut(&id) else { continue };
                let c = &mut e.conn;
                if c.poll_timeout().is_some_and(|t| t <= now) {
                    c.handle_timeout(now);
                    notify = true;
                }
                let to = c.peer_addr();
                let mut sent = 0;
                while sent < share && out.len() < max_batch {
                    let Some(t) = c.poll_transmit(now, out.next_buf()) else { break };
                    out.commit(to, t.len);
                    sent += 1;
                }
                if sent >= share || out.len() >= max_batch {
                    more = true;
                }
                while c.poll_event().is_some() {
                    event = true;
                }
                if let Some(t) = c.poll_timeout() {
                    deadline = Some(deadline.map_or(t, |d: Time| d.min(t)));
                }
                // One flag test per connection and round when nobody waits.
                if e.want_sent && e.sent() {
                    drained = true;
                }
            }
            st.conns.retain(|_, e| !(e.orphaned && e.conn.is_drained()));
            // A timer (pacing, ACK) ran, or a send drained a queue someone
            // waits on: only a state change or what a waiting thread wants
            // is worth waking it for.
            let wake = if event || notify || drained { st.to_wake(event) } else { (false, false) };
            drop(st);
            shared.signal(wake);
        }
        // 2. send
        if !out.is_empty() {
            let list = out.list();
            let mut done = 0;
            while done < list.len() {
                match socket.send_batch(&list[done..]) {
                    Ok(0) => {
                        // socket buffer full: wait until writable (bounded)
                        let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLOUT)];
                        let _ = ppoll(
                            &mut fds,
                            Some(nix::sys::time::TimeSpec::from_duration(Duration::from_millis(5))),
                            None,
                        );
                    }
                    Ok(n) => done += n,
                    // ICMP errors from a vanished peer and the like: the
                    // protocol's timers deal with loss.
                    Err(e) if e.kind() != io::ErrorKind::WouldBlock => {
                        done += 1;
                    }
                    Err(_) => {}
                }
            }
            out.clear();
        }
        shared.send_epoch.fetch_add(1, Ordering::AcqRel);
        // 3. wait
        let now = shared.now();
        let wait = if more {
            Duration::ZERO
        } else {
            match deadline {
                Some(d) => d.saturating_since(now),
                None => Duration::from_millis(100),
            }
        }
        .min(Duration::from_millis(100));
        {
            let mut fds =
                [PollFd::new(socket.as_fd(), PollFlags::POLLIN), PollFd::new(shared.wake.as_fd(), PollFlags::POLLIN)];
            let ts = nix::sys::time::TimeSpec::from_duration(wait);
            match ppoll(&mut fds, Some(ts), None) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
            if fds[1].revents().is_some_and(|r| r.contains(PollFlags::POLLIN)) {
                let _ = shared.wake.read();
            }
        }
        // 4. receive everything waiting (bounded rounds, then send again)
        for _ in 0..8 {
            let n = socket.recv_batch(&mut received)?;
            if n == 0 {
                break;
            }
            // Both clocks once per batch: the kernel stamps with the wall
            // clock, the connections run on `shared.now()`.
            let (mono, wall) = (shared.now(), wall_clock());
            let (mut stamped, mut waited) = (0u64, 0u64);
            // The current GRO aggregate: its first datagram's arrival and
            // the endpoint clock when that one was handed over.
            let mut aggregate = (Time::ZERO, Time::ZERO);
            let mut st = shared.lock();
            for r in &received {
                let d = &socket.recv_buf(r.buf)[r.offset..r.offset + r.len];
                // The time per datagram: arrival spacing feeds the
                // receiver's speed and packet-pair estimates, an ACK's
                // arrival the sender's delivery samples.
                let now = match r.at {
                    Some(at) if r.offset == 0 => {
                        let t = arrival(mono, wall, at, last_arrival);
                        aggregate = (t, shared.now());
                        stamped += 1;
                        waited += mono.saturating_since(t).as_nanos() as u64;
                        t
                    }
                    // A later datagram of a GRO aggregate, which carries
                    // one stamp for all (session 11).
                    Some(_) => {
                        let t = segment_arrival(aggregate.0, aggregate.1, shared.now(), last_arrival);
                        stamped += 1;
                        waited += mono.saturating_since(t).as_nanos() as u64;
                        t
                    }
                    None => shared.now().max(last_arrival),
                };
                last_arrival = now;
                dispatch(shared, &mut st, now, r.from, d, &mut out);
            }
            let wake = st.to_wake(false);
            drop(st);
            shared.signal(wake);
            if stamped > 0 {
                shared.rx_stamped.fetch_add(stamped, Ordering::Relaxed);
                shared.rx_wait_ns.fetch_add(waited, Ordering::Relaxed);
            }
            // replies from the listener (cookies, refusals)
            if !out.is_empty() {
                let list = out.list();
                let _ = socket.send_batch(&list);
                out.clear();
            }
            if n < super::socket::RECV_BATCH {
                break;
            }
        }
    }
}

fn wall_clock() -> Duration {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default()
}

/// The endpoint time at which the kernel received a datagram stamped `at`
/// (wall clock), read when the endpoint clock said `mono` and the wall
/// clock `wall`: `mono` less the datagram's wait in the socket, never
/// before `last` (the previous arrival handed over: time never goes back
/// for the connections; never after `mono` either, as `last` came from
/// an earlier reading of the same clock). A wait over a second is a wall
/// clock step, not a wait: then `mono`.
pub fn arrival(mono: Time, wall: Duration, at: Duration, last: Time) -> Time {
    let waited = wall.saturating_sub(at);
    let t = if waited > Duration::from_secs(1) { mono } else { mono - waited };
    t.max(last)
}

/// The time of a later datagram of a GRO aggregate whose first was handed
/// over at `first` when the endpoint clock read `first_read`, now that it
/// reads `read`: `first` plus the time the driver has spent on the
/// aggregate since (never before `last`).
///
/// The kernel stamps an aggregate once, so its datagrams have no measured
/// spacing; on loopback an aggregate is the sender's GSO send, delivered
/// whole. Handed over at one instant, every packet pair inside one (most
/// of them: 44 datagrams of 1 500 bytes fill one) measured no interval
/// and was skipped, and the receiver's capacity estimate came from the
/// few pairs split across two aggregates — the sender's pacing gap,
/// ~20–60 µs: 16–54 thousand packets/s against 1.5–9.6 million before the
/// stamps, which held DAIMD's increase at its minimum (docs/udt.md, "The
/// driver", session 11). Spaced by the driver's own handling, as every
/// datagram was before the stamps, a pair inside an aggregate measures
/// how fast this receiver takes packets in: the capacity it can observe
/// of a path that delivers 64 KiB at once.
pub fn segment_arrival(first: Time, first_read: Time, read: Time, last: Time) -> Time {
    (first + read.saturating_since(first_read)).max(last)
}

fn dispatch(shared: &Shared, st: &mut State, now: Time, from: SocketAddr, d: &[u8], out: &mut OutBatch) {
    let Some(dest) = destination_socket_id(d) else { return };
    if dest != 0 {
        if let Some(e) = st.conns.get_mut(&dest) {
            e.conn.handle_datagram(now, from, d);
        }
        return;
    }
    // Connection requests go to the listener.
    let Some(l) = &st.listener else { return };
    match l.handle(now, from, d) {
        ListenerOutput::Drop => {}
        ListenerOutput::Reply(r) => {
            out.push(from, &r);
        }
        ListenerOutput::Accept(hs) => {
            let key = (hs.socket_id as u32, hs.isn as u32 & 0x7FFF_FFFF);
            if let Some(e) = st.conns.values_mut().find(|e| e.conn.peer_addr() == from && e.conn.peer_key() == key) {
                e.conn.handle_repeated_request();
                return;
            }
            if st.accept_queue.len() >= st.backlog {
                let r = Listener::reject(&hs);
                out.push(from, &r);
                return;
            }
            let id = st.new_id();
            let conn = Connection::accept(shared.config.for_peer(from), id, from, &hs, now);
            st.conns.insert(id, Entry::new(conn));
            st.accept_queue.push_back(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_is_timed_at_its_kernel_arrival_never_backwards() {
        let ms = Duration::from_millis;
        let mono = Time::from_nanos(50_000_000);
        let wall = Duration::from_secs(1_000_000);
        // read 4 ms after the kernel received it: handed over 4 ms earlier
        assert_eq!(arrival(mono, wall, wall - ms(4), Time::ZERO), mono - ms(4));
        // never before the previous arrival handed over
        assert_eq!(arrival(mono, wall, wall - ms(4), mono - ms(1)), mono - ms(1));
        // a stamp after the wall clock's reading (a clock step back): now
        assert_eq!(arrival(mono, wall, wall + ms(3), Time::ZERO), mono);
        // a wait of more than a second is a clock step forward: now
        assert_eq!(arrival(mono, wall, wall - ms(1500), Time::ZERO), mono);
    }

    #[test]
    fn threads_in_accept_are_signalled_on_their_own_condition_variable() {
        let mut st = State {
            conns: HashMap::new(),
            listener: None,
            accept_queue: VecDeque::new(),
            accepts_stopped: false,
            accepting: 1,
            other_waiters: 0,
            backlog: 4,
            dead: None,
            next_id: 1,
        };
        // a state change wakes the stream waiters, not an empty accept
        assert_eq!(st.to_wake(true), (true, false));
        assert_eq!(st.to_wake(false), (false, false));
        st.accept_queue.push_back(7);
        assert_eq!(st.to_wake(false), (false, true));
        st.accept_queue.clear();
        st.accepts_stopped = true;
        assert_eq!(st.to_wake(false), (false, true));
        st.accepting = 0;
        st.other_waiters = 1;
        assert_eq!(st.to_wake(false), (true, false));
    }

    /// A `wait_sent` waiter is woken through its entry's `want_sent` (what
    /// the send phase checks), not as one of the `other_waiters` that every
    /// receive batch and timer wakes: nothing queued, it has its answer.
    #[test]
    fn a_wait_sent_waiter_is_woken_when_nothing_is_left_to_send() {
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let conn = Connection::connect(ferry_udt::Config::default(), 7, peer, 1, Time::ZERO);
        let mut st = State {
            conns: HashMap::new(),
            listener: None,
            accept_queue: VecDeque::new(),
            accepts_stopped: false,
            accepting: 0,
            other_waiters: 0,
            backlog: 4,
            dead: None,
            next_id: 1,
        };
        st.conns.insert(7, Entry::new(conn));
        assert!(st.conns[&7].sent(), "a connection that was given nothing has sent it all");
        assert_eq!(st.to_wake(false), (false, false), "nobody waits");
        st.conns.get_mut(&7).unwrap().want_sent = true;
        assert_eq!(st.to_wake(false), (true, false));
    }

    #[test]
    fn the_later_datagrams_of_an_aggregate_are_spaced_by_the_drivers_handling() {
        let us = Duration::from_micros;
        let first = Time::from_nanos(40_000_000);
        let read = Time::from_nanos(50_000_000);
        // 300 ns after the first was handed over: 300 ns after its arrival
        let t = segment_arrival(first, read, read + Duration::from_nanos(300), Time::ZERO);
        assert_eq!(t, first + Duration::from_nanos(300));
        assert!(t > first, "a pair inside the aggregate measures an interval");
        // never before the previous arrival handed over
        assert_eq!(segment_arrival(first, read, read + us(1), first + us(5)), first + us(5));
    }
}
