//! One data connection's reader, as a state machine.
//!
//! GFD.20, "Extended Block Mode": a connection carries a sequence of
//! blocks, each a 17-byte header and `count` payload bytes, until a header
//! with the EOD bit; a header with the CLOSE bit says the sender closes the
//! connection after it (otherwise it is cached for the next transfer).
//!
//! The reader owns no buffer for payloads. It tells its driver what it
//! [`Want`]s next — header bytes, payload bytes for an offset, the end of a
//! block — and the driver reads them however its transport reads best
//! (`read` into a buffer, `splice`, a discard with `MSG_TRUNC`, an
//! in-memory channel) and reports back. Every header is checked here
//! ([`BlockHeader::validate`] against the transfer's size, and
//! [`BlockLimits::max_block`]) before a byte of its payload is asked for,
//! so production and the fuzzer run the same checks.
//!
//! A driver's loop:
//!
//! ```
//! # use ferry_proto::mode_e::{BlockHeader, BlockLimits, BlockReader, ReceiveTracker, Want};
//! # let mut wire: &[u8] =
//! #     &[&BlockHeader::data(0, 3).encode()[..], &b"abc"[..], &BlockHeader::eof(1).encode()[..]].concat();
//! # let mut file = vec![0u8; 3];
//! let mut reader = BlockReader::new(BlockLimits::default());
//! let mut tracker = ReceiveTracker::default();
//! loop {
//!     match reader.want() {
//!         Want::Header { missing } => {
//!             let (bytes, rest) = wire.split_at(missing.min(wire.len()));
//!             wire = rest;
//!             if let Some(header) = reader.push_header(bytes).unwrap() {
//!                 tracker.begin_block(&header).unwrap();
//!             }
//!         }
//!         Want::Payload { offset, len } => {
//!             let (bytes, rest) = wire.split_at(len as usize);
//!             wire = rest;
//!             file[offset as usize..][..bytes.len()].copy_from_slice(bytes);
//!             tracker.written(reader.payload_consumed(bytes.len() as u64));
//!         }
//!         Want::EndOfBlock(header) => {
//!             tracker.end_block(&header).unwrap();
//!             reader.end_block();
//!         }
//!         Want::Done { close: _ } => break,
//!     }
//! }
//! assert!(tracker.is_complete());
//! assert_eq!(file, b"abc");
//! ```

use super::{BlockHeader, ModeEError, HEADER_LEN};
use std::ops::Range;

/// What a receiver accepts in one transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLimits {
    /// The size the transfer may reach, in header coordinates, when known
    /// (ALLO, the ERET window, the size the client expects).
    pub transfer_len: Option<u64>,
    /// The largest payload of one block. Senders cut files into blocks of
    /// their block size (Globus: 256 KiB unless `-bs`; Ferry: 1 MiB, at
    /// most the staging block); a count far beyond any of them is a broken
    /// or hostile peer, refused before anything is read.
    pub max_block: u64,
}

impl BlockLimits {
    /// 4 GiB: far beyond any block size a GridFTP sender uses, small
    /// enough that a corrupt count is caught at once.
    pub const DEFAULT_MAX_BLOCK: u64 = 4 << 30;

    pub fn new(transfer_len: Option<u64>) -> Self {
        Self { transfer_len, max_block: Self::DEFAULT_MAX_BLOCK }
    }
}

impl Default for BlockLimits {
    fn default() -> Self {
        Self::new(None)
    }
}

/// What the reader needs next from its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Up to `missing` more header bytes, for [`BlockReader::push_header`].
    Header { missing: usize },
    /// `len` more payload bytes of the current block, which belong at
    /// header offset `offset` (add the ESTO/ERET base for a file offset);
    /// report them with [`BlockReader::payload_consumed`].
    Payload { offset: u64, len: u64 },
    /// The current block's payload is all in: account for its EOD/EOF bits
    /// (`ReceiveTracker::end_block`), then call [`BlockReader::end_block`].
    EndOfBlock(BlockHeader),
    /// EOD arrived: this connection's part of the transfer is over. With
    /// `close` the sender closes it; otherwise it may carry the next
    /// transfer (GFD.20 data channel caching).
    Done { close: bool },
}

/// Something the reader found in bytes pushed with [`BlockReader::feed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadEvent<'a> {
    /// A block's header, checked; its payload follows.
    Header(BlockHeader),
    /// Payload bytes at header offset `offset` (a block's payload may come
    /// in several pieces).
    Data { offset: u64, bytes: &'a [u8] },
    /// A block is complete (its EOD/EOF bits now count).
    EndOfBlock(BlockHeader),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Header { got: usize },
    Payload { header: BlockHeader, done: u64 },
    EndOfBlock(BlockHeader),
    Done { close: bool },
}

/// One connection's reader; see the module documentation.
#[derive(Debug, Clone)]
pub struct BlockReader {
    raw: [u8; HEADER_LEN],
    state: State,
    limits: BlockLimits,
    /// Blocks completed on this connection in this transfer.
    blocks: u64,
}

impl BlockReader {
    pub fn new(limits: BlockLimits) -> Self {
        Self { raw: [0; HEADER_LEN], state: State::Header { got: 0 }, limits, blocks: 0 }
    }

    pub fn limits(&self) -> BlockLimits {
        self.limits
    }

    /// Changes the limits for the headers still to come (a cached
    /// connection carrying the next transfer).
    pub fn set_limits(&mut self, limits: BlockLimits) {
        self.limits = limits;
    }

    /// Starts the next transfer on a connection that ended the last one
    /// with EOD and no CLOSE (a cached connection).
    pub fn restart(&mut self, limits: BlockLimits) {
        *self = Self::new(limits);
    }

    pub fn want(&self) -> Want {
        match self.state {
            State::Header { got } => Want::Header { missing: HEADER_LEN - got },
            State::Payload { header, done } => {
                Want::Payload { offset: header.offset + done, len: header.payload_len() - done }
            }
            State::EndOfBlock(h) => Want::EndOfBlock(h),
            State::Done { close } => Want::Done { close },
        }
    }

    /// Whether nothing of this transfer has arrived on this connection
    /// yet: a cached connection the peer closes now, between transfers, is
    /// not part of the transfer ([`on_close`](Self::on_close) accepts it).
    pub fn is_idle(&self) -> bool {
        self.blocks == 0 && self.state == State::Header { got: 0 }
    }

    /// Takes header bytes (at most what [`Want::Header`] asked for; the
    /// rest is left unused). Returns the number used, and the header once
    /// it is complete and has passed the checks.
    pub fn push_header(&mut self, bytes: &[u8]) -> Result<Option<BlockHeader>, ModeEError> {
        let State::Header { got } = self.state else {
            return Ok(None);
        };
        let take = bytes.len().min(HEADER_LEN - got);
        self.raw[got..got + take].copy_from_slice(&bytes[..take]);
        let got = got + take;
        if got < HEADER_LEN {
            self.state = State::Header { got };
            return Ok(None);
        }
        let header = BlockHeader::decode(&self.raw);
        header.validate(self.limits.transfer_len)?;
        if header.payload_len() > self.limits.max_block {
            return Err(ModeEError::BlockTooLarge { count: header.payload_len(), max: self.limits.max_block });
        }
        self.state =
            if header.payload_len() == 0 { State::EndOfBlock(header) } else { State::Payload { header, done: 0 } };
        Ok(Some(header))
    }

    /// `n` payload bytes of the current block were taken from the
    /// connection (written, discarded). Returns the header-coordinate range
    /// they cover. More than [`Want::Payload`] asked for is a driver bug;
    /// it is clamped.
    pub fn payload_consumed(&mut self, n: u64) -> Range<u64> {
        let State::Payload { header, done } = self.state else {
            return 0..0;
        };
        let n = n.min(header.payload_len() - done);
        let start = header.offset + done;
        let done = done + n;
        self.state =
            if done == header.payload_len() { State::EndOfBlock(header) } else { State::Payload { header, done } };
        start..start + n
    }

    /// Leaves a complete block: on to the next header, or done after EOD.
    /// Returns the block's header.
    pub fn end_block(&mut self) -> Option<BlockHeader> {
        let State::EndOfBlock(header) = self.state else {
            return None;
        };
        self.blocks += 1;
        self.state = if header.is_eod() { State::Done { close: header.closes() } } else { State::Header { got: 0 } };
        Some(header)
    }

    /// The peer closed the connection (a read returned 0). Fine after EOD,
    /// or before this connection carried anything of this transfer (a
    /// cached connection the peer let go); an error anywhere else.
    pub fn on_close(&self) -> Result<(), ModeEError> {
        match self.state {
            State::Done { .. } => Ok(()),
            _ if self.is_idle() => Ok(()),
            State::Header { got } if got > 0 => Err(ModeEError::ClosedMidHeader),
            _ => Err(ModeEError::ClosedBeforeEod),
        }
    }

    /// Push-style use over bytes in memory: consumes a prefix of `data`
    /// and returns how much, with what it found. Call again with the rest
    /// until it consumes nothing and finds nothing (more bytes needed) or
    /// [`want`](Self::want) is [`Want::Done`]. Blocks end by themselves
    /// here ([`end_block`](Self::end_block) is called for the caller).
    pub fn feed<'a>(&mut self, data: &'a [u8]) -> Result<(usize, Option<ReadEvent<'a>>), ModeEError> {
        match self.want() {
            Want::Header { missing } => {
                let take = missing.min(data.len());
                Ok((take, self.push_header(&data[..take])?.map(ReadEvent::Header)))
            }
            Want::Payload { offset, len } => {
                let take = usize::try_from(len).unwrap_or(usize::MAX).min(data.len());
                if take == 0 {
                    return Ok((0, None));
                }
                self.payload_consumed(take as u64);
                Ok((take, Some(ReadEvent::Data { offset, bytes: &data[..take] })))
            }
            Want::EndOfBlock(_) => Ok((0, self.end_block().map(ReadEvent::EndOfBlock))),
            Want::Done { .. } => Ok((0, None)),
        }
    }
}

impl Default for BlockReader {
    fn default() -> Self {
        Self::new(BlockLimits::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode_e::flags;

    fn wire(blocks: &[(u64, &[u8])], end: BlockHeader) -> Vec<u8> {
        let mut w = Vec::new();
        for (off, data) in blocks {
            w.extend_from_slice(&BlockHeader::data(*off, data.len() as u64).encode());
            w.extend_from_slice(data);
        }
        w.extend_from_slice(&end.encode());
        w
    }

    /// Payload pieces as they were asked for: (header offset, bytes).
    type Pieces = Vec<(u64, Vec<u8>)>;

    /// Runs `bytes` through the pull interface, `step` bytes at a time.
    fn pull(r: &mut BlockReader, bytes: &[u8], step: usize) -> Result<(Pieces, usize), ModeEError> {
        let mut pos = 0;
        let mut out: Pieces = Vec::new();
        loop {
            match r.want() {
                Want::Header { missing } => {
                    let n = missing.min(step).min(bytes.len() - pos);
                    if n == 0 {
                        return Ok((out, pos));
                    }
                    r.push_header(&bytes[pos..pos + n])?;
                    pos += n;
                }
                Want::Payload { offset, len } => {
                    let n = (len as usize).min(step).min(bytes.len() - pos);
                    if n == 0 {
                        return Ok((out, pos));
                    }
                    let range = r.payload_consumed(n as u64);
                    assert_eq!(range, offset..offset + n as u64);
                    out.push((offset, bytes[pos..pos + n].to_vec()));
                    pos += n;
                }
                Want::EndOfBlock(_) => {
                    r.end_block();
                }
                Want::Done { .. } => return Ok((out, pos)),
            }
        }
    }

    #[test]
    fn blocks_then_eod_with_close() {
        let w = wire(&[(10, b"hello"), (0, b"0123456789")], BlockHeader::eod().with_close());
        let mut r = BlockReader::default();
        assert!(r.is_idle());
        let (got, used) = pull(&mut r, &w, 4).unwrap();
        assert_eq!(used, w.len());
        let joined: Vec<u8> = got.iter().flat_map(|(_, d)| d.clone()).collect();
        assert_eq!(joined, b"hello0123456789");
        assert_eq!(r.want(), Want::Done { close: true });
        assert!(r.on_close().is_ok());
    }

    #[test]
    fn closes_are_judged_by_position() {
        let r = BlockReader::default();
        assert!(r.on_close().is_ok(), "a cached connection closed before the transfer");
        let mut r = BlockReader::default();
        r.push_header(&[0, 0]).unwrap();
        assert_eq!(r.on_close(), Err(ModeEError::ClosedMidHeader));
        let mut r = BlockReader::default();
        r.push_header(&BlockHeader::data(0, 4).encode()).unwrap();
        assert_eq!(r.on_close(), Err(ModeEError::ClosedBeforeEod));
        r.payload_consumed(4);
        r.end_block();
        assert_eq!(r.on_close(), Err(ModeEError::ClosedBeforeEod), "data but no EOD");
    }

    #[test]
    fn limits_are_checked_before_the_payload() {
        let mut r = BlockReader::new(BlockLimits { transfer_len: Some(100), max_block: 50 });
        assert!(matches!(
            r.push_header(&BlockHeader::data(0, 60).encode()),
            Err(ModeEError::BlockTooLarge { count: 60, max: 50 })
        ));
        let mut r = BlockReader::new(BlockLimits { transfer_len: Some(100), max_block: 50 });
        assert!(matches!(r.push_header(&BlockHeader::data(90, 20).encode()), Err(ModeEError::BeyondLimit { .. })));
        // An EOF's offset is EODC, not a position: not held to the size.
        let mut r = BlockReader::new(BlockLimits { transfer_len: Some(1), max_block: 1 });
        assert!(r.push_header(&BlockHeader::eof(8).encode()).is_ok());
    }

    #[test]
    fn a_cached_connection_carries_the_next_transfer() {
        let mut r = BlockReader::default();
        let first = wire(&[(0, b"ab")], BlockHeader::eod());
        pull(&mut r, &first, 100).unwrap();
        assert_eq!(r.want(), Want::Done { close: false });
        r.restart(BlockLimits::new(Some(3)));
        let second = wire(&[(0, b"xyz")], BlockHeader::eof(1));
        let (got, _) = pull(&mut r, &second, 100).unwrap();
        assert_eq!(got, vec![(0, b"xyz".to_vec())]);
    }

    #[test]
    fn data_with_the_eod_bit_ends_the_connection_after_its_payload() {
        let mut h = BlockHeader::data(0, 3);
        h.descriptor |= flags::EOD;
        let mut w = h.encode().to_vec();
        w.extend_from_slice(b"abc");
        let mut r = BlockReader::default();
        let (got, _) = pull(&mut r, &w, 2).unwrap();
        assert_eq!(got.concat_bytes(), b"abc");
        assert_eq!(r.want(), Want::Done { close: false });
    }

    trait Concat {
        fn concat_bytes(&self) -> Vec<u8>;
    }
    impl Concat for Pieces {
        fn concat_bytes(&self) -> Vec<u8> {
            self.iter().flat_map(|(_, d)| d.clone()).collect()
        }
    }
}
