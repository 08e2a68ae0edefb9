//! The send and receive buffers, both bounded by the configuration.
//!
//! libudt's `CSndBuffer` cuts each `send()` call into packets up front and
//! grows without limit (`increase()`); its `CRcvBuffer` is a ring of
//! `m_iRcvBufSize` packet slots. Here the send buffer is a byte ring of at
//! most `send_buffer` bytes that is cut into packets only when a packet is
//! first sent (so small writes coalesce), and the receive buffer is a ring of
//! `recv_buffer_packets` slots whose payload allocations are recycled.

use std::collections::VecDeque;

/// Bytes written by the application and not yet acknowledged by the peer.
#[derive(Debug)]
pub struct SendBuffer {
    data: VecDeque<u8>,
    capacity: usize,
    /// Absolute stream offset of `data[0]`.
    base_offset: u64,
    /// Packet number of the first unacknowledged packet.
    base_pn: u64,
    /// Absolute start offset of every sent, unacknowledged packet.
    starts: VecDeque<u64>,
    /// Absolute offset one past the last sent byte.
    sent_end: u64,
}

/// The capacity a buffer grown with the path takes next, or `None` to stay:
/// what is wanted, but at least a quarter more than it has (each growth
/// moves what the buffer holds, so a want that creeps up ACK by ACK must
/// not copy a send buffer of tens of MB at every ACK), never past `limit`.
pub fn grown_capacity(have: usize, want: usize, limit: usize) -> Option<usize> {
    (want > have && have < limit).then(|| want.max(have + have / 4).min(limit))
}

/// What a send buffer grown with the path holds: what is unacknowledged
/// after the ACK at hand, plus a quarter of that unsent, never past `limit`.
///
/// The sender cannot free a byte before the cumulative ACK passes it, so it
/// must hold everything unacknowledged; a quarter more unsent (at 1 Gbit/s
/// and 160 ms about 40 ms of sending) keeps packets ready between ACKs, and
/// when the window, not the buffer, is what limits the sender, that is all
/// it needs. When the buffer limits, the sender sends it empty, what is
/// unacknowledged comes up to the capacity, and this want (a quarter more)
/// grows it at the next ACK, a quarter an ACK. Until session 18 the want
/// was twice what was unacknowledged before the ACK was applied: behind a
/// hole at 1-5 % loss the cumulative ACK lags a round trip or more, what
/// is unacknowledged is several BDPs, and twice that reached the cap
/// (191 MB) however little was on the wire.
pub fn send_want(unacked: usize, limit: usize) -> usize {
    unacked.saturating_add(unacked / 4).min(limit)
}

impl SendBuffer {
    pub fn new(capacity: usize, first_pn: u64) -> SendBuffer {
        SendBuffer {
            data: VecDeque::new(),
            capacity,
            base_offset: 0,
            base_pn: first_pn,
            starts: VecDeque::new(),
            sent_end: 0,
        }
    }

    /// Copies as much of `buf` as fits; returns the count.
    pub fn write(&mut self, buf: &[u8]) -> usize {
        let n = buf.len().min(self.capacity - self.data.len());
        self.data.extend(&buf[..n]);
        n
    }

    pub fn free_space(&self) -> usize {
        self.capacity - self.data.len()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Lets the buffer hold up to `capacity` bytes (never less than now).
    /// The storage is reserved exactly, so a grown buffer's memory is its
    /// capacity, not the next power of two a doubling `VecDeque` takes.
    pub fn grow(&mut self, capacity: usize) {
        if capacity > self.capacity {
            self.capacity = capacity;
            self.data.reserve_exact(capacity - self.data.len());
        }
    }

    /// Bytes sent and not yet acknowledged.
    pub fn unacked(&self) -> usize {
        self.data.len() - self.unsent()
    }

    /// Bytes held (unacknowledged plus unsent).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Bytes written but never sent.
    pub fn unsent(&self) -> usize {
        (self.base_offset + self.data.len() as u64 - self.sent_end) as usize
    }

    /// Packets sent and not yet acknowledged.
    pub fn in_flight(&self) -> u64 {
        self.starts.len() as u64
    }

    pub fn next_pn(&self) -> u64 {
        self.base_pn + self.starts.len() as u64
    }

    /// Cuts the next new packet of at most `max` bytes; returns its number.
    pub fn take_new(&mut self, max: usize) -> Option<u64> {
        let n = self.unsent().min(max);
        if n == 0 {
            return None;
        }
        let pn = self.next_pn();
        self.starts.push_back(self.sent_end);
        self.sent_end += n as u64;
        Some(pn)
    }

    /// Appends the payload of sent packet `pn` to `out`; false if `pn` is
    /// not in the buffer (acknowledged already, or never sent).
    pub fn copy_packet(&self, pn: u64, out: &mut Vec<u8>) -> bool {
        let Some(i) = pn.checked_sub(self.base_pn) else { return false };
        let Some(&start) = self.starts.get(i as usize) else { return false };
        let end = self.starts.get(i as usize + 1).copied().unwrap_or(self.sent_end);
        let (a, b) = self.data.as_slices();
        let lo = (start - self.base_offset) as usize;
        let hi = (end - self.base_offset) as usize;
        if hi <= a.len() {
            out.extend_from_slice(&a[lo..hi]);
        } else if lo >= a.len() {
            out.extend_from_slice(&b[lo - a.len()..hi - a.len()]);
        } else {
            out.extend_from_slice(&a[lo..]);
            out.extend_from_slice(&b[..hi - a.len()]);
        }
        true
    }

    /// Length of sent packet `pn`.
    pub fn packet_len(&self, pn: u64) -> Option<usize> {
        let i = pn.checked_sub(self.base_pn)? as usize;
        let start = *self.starts.get(i)?;
        let end = self.starts.get(i + 1).copied().unwrap_or(self.sent_end);
        Some((end - start) as usize)
    }

    /// Frees every packet before `pn` (a cumulative ACK); returns how many.
    pub fn ack_before(&mut self, pn: u64) -> u64 {
        let n = pn.saturating_sub(self.base_pn).min(self.starts.len() as u64);
        if n == 0 {
            return 0;
        }
        let new_base = self.starts.get(n as usize).copied().unwrap_or(self.sent_end);
        self.starts.drain(..n as usize);
        self.data.drain(..(new_base - self.base_offset) as usize);
        self.base_offset = new_base;
        self.base_pn += n;
        n
    }

    pub fn first_unacked(&self) -> u64 {
        self.base_pn
    }
}

/// Payload allocations a receive buffer keeps for reuse once read. With 64,
/// a loopback burst (16 GRO aggregates of 44 packets arrive per `recvmmsg`
/// round) took most slots from `malloc` and gave them back to it: the
/// receiving I/O thread's arena grew and shrank all transfer long (page
/// faults in `sysmalloc`, `mprotect`, 0.05–0.07 CPU s/GB of the client;
/// session 13, docs/udt.md "The driver"). 1 024 slots of one MSS hold at
/// most ~1.5 MB per connection at MSS 1 500, kept while it lives; they are
/// payloads a read freed, so the buffer's allocations stay within its
/// capacity plus these. Larger packets keep fewer ([`SPARE_BYTES`]: 171 of
/// MSS 9 000, session 16), so the bound is in bytes.
pub const SPARE_PACKETS: usize = 1024;
/// The spare payloads' bytes at most (1 024 of MSS 1 500).
pub const SPARE_BYTES: usize = SPARE_PACKETS * 1500;

/// Received packets waiting to be read, in a ring of `capacity` slots.
#[derive(Debug)]
pub struct RecvBuffer {
    slots: Vec<Option<Vec<u8>>>,
    spare: Vec<Vec<u8>>,
    /// Next packet the application reads, and how far into it.
    read_pn: u64,
    read_pos: usize,
    /// One past the last packet of the contiguous prefix from `read_pn`.
    contiguous_end: u64,
    /// Bytes in the contiguous prefix not yet read.
    readable: usize,
}

impl RecvBuffer {
    pub fn new(capacity: usize, first_pn: u64) -> RecvBuffer {
        RecvBuffer {
            slots: (0..capacity.max(2)).map(|_| None).collect(),
            spare: Vec::new(),
            read_pn: first_pn,
            read_pos: 0,
            contiguous_end: first_pn,
            readable: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Grows the ring to `capacity` slots (never shrinks it): every held
    /// packet moves to its slot in the larger ring. The window can only
    /// widen, so no packet the old ring accepted falls outside the new one.
    pub fn grow(&mut self, capacity: usize) {
        if capacity <= self.slots.len() {
            return;
        }
        let old = std::mem::take(&mut self.slots);
        let len = old.len() as u64;
        self.slots = (0..capacity).map(|_| None).collect();
        for (i, v) in old.into_iter().enumerate() {
            if let Some(v) = v {
                // slot i holds the packet pn in [read_pn, read_pn + len) with pn % len == i
                let base = self.read_pn - self.read_pn % len;
                let mut pn = base + i as u64;
                if pn < self.read_pn {
                    pn += len;
                }
                let j = self.slot(pn);
                self.slots[j] = Some(v);
            }
        }
        // packets that arrived beyond the old limit were refused, so the
        // contiguous prefix is unchanged; it may now extend no further
        // either (the new slots are empty).
    }

    /// One past the highest packet number the buffer can take now
    /// (libudt keeps one slot empty to tell full from empty).
    pub fn limit(&self) -> u64 {
        self.read_pn + self.slots.len() as u64 - 1
    }

    /// The first packet not yet received in order: the ACK point.
    pub fn contiguous_end(&self) -> u64 {
        self.contiguous_end
    }

    /// Free slots after the contiguous prefix: the flow window the ACK
    /// advertises (`CRcvBuffer::getAvailBufSize`).
    pub fn available(&self) -> usize {
        self.slots.len() - (self.contiguous_end - self.read_pn) as usize - 1
    }

    pub fn readable(&self) -> usize {
        self.readable
    }

    fn slot(&self, pn: u64) -> usize {
        (pn % self.slots.len() as u64) as usize
    }

    /// Stores packet `pn`; false if it is a duplicate or outside the window.
    pub fn insert(&mut self, pn: u64, payload: &[u8]) -> bool {
        if pn < self.contiguous_end || pn >= self.limit() {
            return false;
        }
        let i = self.slot(pn);
        if self.slots[i].is_some() {
            return false;
        }
        let mut v = self.spare.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(payload);
        self.slots[i] = Some(v);
        while self.contiguous_end < self.limit() {
            let j = self.slot(self.contiguous_end);
            match &self.slots[j] {
                Some(p) => {
                    self.readable += p.len();
                    self.contiguous_end += 1;
                }
                None => break,
            }
        }
        true
    }

    pub fn has(&self, pn: u64) -> bool {
        pn >= self.read_pn && pn < self.limit() && self.slots[self.slot(pn)].is_some()
    }

    /// Copies readable bytes into `out`; returns the count.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let mut n = 0;
        while n < out.len() && self.read_pn < self.contiguous_end {
            let i = self.slot(self.read_pn);
            let Some(p) = &self.slots[i] else { break };
            let take = (p.len() - self.read_pos).min(out.len() - n);
            out[n..n + take].copy_from_slice(&p[self.read_pos..self.read_pos + take]);
            n += take;
            self.read_pos += take;
            if self.read_pos == p.len() {
                if let Some(v) = self.slots[i].take() {
                    if self.spare.len() < SPARE_PACKETS.min(SPARE_BYTES / v.capacity().max(1)) {
                        self.spare.push(v);
                    }
                }
                self.read_pn += 1;
                self.read_pos = 0;
            }
        }
        self.readable -= n;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_grows_by_a_quarter_at_least_and_never_past_its_limit() {
        assert_eq!(grown_capacity(100, 90, 1000), None);
        assert_eq!(grown_capacity(100, 101, 1000), Some(125));
        assert_eq!(grown_capacity(100, 300, 1000), Some(300));
        assert_eq!(grown_capacity(900, 950, 1000), Some(1000));
        assert_eq!(grown_capacity(1000, 5000, 1000), None);
        // a want that creeps up by one each time grows a handful of times
        let (mut have, mut grows) = (1000, 0);
        for want in 1001..=2000 {
            if let Some(c) = grown_capacity(have, want, 4000) {
                have = c;
                grows += 1;
            }
        }
        assert!(grows <= 4, "{grows}");
    }

    #[test]
    fn a_grown_receive_ring_keeps_its_packets_and_takes_more() {
        let mut b = RecvBuffer::new(8, 1000);
        for pn in [1000u64, 1001, 1003, 1006] {
            assert!(b.insert(pn, &[pn as u8; 3]));
        }
        let mut out = [0u8; 3];
        assert_eq!(b.read(&mut out), 3);
        assert!(!b.insert(1009, b"x"), "beyond the old ring");
        b.grow(32);
        assert_eq!(b.capacity(), 32);
        assert!(b.has(1003) && b.has(1006) && !b.has(1002));
        assert!(b.insert(1009, &[9; 3]));
        assert!(b.insert(1002, &[2; 3]));
        assert_eq!(b.contiguous_end(), 1004);
        let mut all = [0u8; 9];
        assert_eq!(b.read(&mut all), 9);
        assert_eq!(
            all,
            [1001u16 as u8, 1001u16 as u8, 1001u16 as u8, 2, 2, 2, 1003u16 as u8, 1003u16 as u8, 1003u16 as u8]
        );
        let mut s = SendBuffer::new(4, 0);
        assert_eq!(s.write(b"abcdef"), 4);
        s.grow(8);
        assert_eq!(s.write(b"ef"), 2);
        assert_eq!(s.capacity(), 8);
    }

    #[test]
    fn send_buffer_cuts_acks_and_retransmits() {
        let mut b = SendBuffer::new(10, 100);
        assert_eq!(b.write(b"hello world"), 10);
        assert_eq!(b.take_new(4), Some(100));
        assert_eq!(b.take_new(4), Some(101));
        assert_eq!(b.take_new(4), Some(102));
        assert_eq!(b.take_new(4), None);
        let mut out = Vec::new();
        assert!(b.copy_packet(101, &mut out));
        assert_eq!(out, b"o wo");
        assert_eq!(b.ack_before(102), 2);
        assert_eq!(b.free_space(), 8);
        assert!(!b.copy_packet(101, &mut out));
        out.clear();
        assert!(b.copy_packet(102, &mut out));
        assert_eq!(out, b"rl");
        assert_eq!(b.ack_before(1_000), 1);
        assert!(b.is_empty());
    }

    #[test]
    fn recv_buffer_reorders_and_bounds() {
        let mut r = RecvBuffer::new(4, 10);
        assert!(r.insert(11, b"bb"));
        assert_eq!(r.readable(), 0);
        assert!(!r.insert(13, b"dd"), "beyond the window (one slot kept free)");
        assert!(r.insert(10, b"a"));
        assert!(!r.insert(10, b"a"), "duplicate");
        assert_eq!(r.contiguous_end(), 12);
        let mut out = [0u8; 2];
        assert_eq!(r.read(&mut out), 2);
        assert_eq!(&out, b"ab");
        assert_eq!(r.read(&mut out), 1);
        assert!(r.insert(13, b"dd"));
        assert_eq!(r.available(), 3);
    }
}
