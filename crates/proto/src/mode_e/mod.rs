//! GridFTP extended block mode (GFD.20 §"Extended Block Mode").
//!
//! Every block on a data connection starts with a 17-byte header:
//!
//! ```text
//! +------------+--------------------+--------------------+----------------
//! | descriptor |  byte count (u64)  |   offset (u64)     | count bytes ...
//! |   1 byte   |  big-endian        |   big-endian       |
//! ```
//!
//! Blocks of one file travel over any number of connections, in any order;
//! the receiver writes each at its offset. The end of a transfer is explicit,
//! unlike stream mode: every connection sends one header with the EOD bit,
//! and exactly one of them also carries EOF with the *number of data
//! connections* (EODC) in its offset field. The transfer is complete when
//! EOF has been seen and EODC EODs have arrived (see
//! `docs/gridftp-wire-notes.md` §4 for what Globus does and tolerates).
//!
//! The receiving side is sans-IO, in three rooms:
//!
//! * [`BlockReader`] (`reader.rs`): one connection's reader state machine.
//!   It says what it wants next (header bytes, so many payload bytes at
//!   an offset, the end of a block) and checks every header, so a driver
//!   can read payloads straight into a file or discard them in the kernel
//!   and still run the same checks as the fuzzer.
//! * [`ReceiveTracker`] (`tracker.rs`): what one transfer has received
//!   across all its connections: overlap checks, the EOD/EOF count, the
//!   received ranges and the restart markers made from them.
//! * [`BlockDecoder`] (`decoder.rs`): the reader over bytes held in memory
//!   (listings, tests, the fuzzer, the `Pair` harness).

use thiserror::Error;

mod decoder;
mod reader;
mod tracker;

pub use decoder::{Block, BlockDecoder};
pub use reader::{BlockLimits, BlockReader, ReadEvent, Want};
pub use tracker::ReceiveTracker;

pub const HEADER_LEN: usize = 17;

/// Descriptor bits (GFD.20).
pub mod flags {
    /// End of record (legacy; treated as data).
    pub const EOR: u8 = 0x80;
    /// End of file: `offset` holds the EOD count; the block carries no data.
    pub const EOF: u8 = 0x40;
    /// Suspected errors in the data (treated as data, like Globus).
    pub const SUSPECT: u8 = 0x20;
    /// Restart marker block (treated as data, like Globus).
    pub const RESTART: u8 = 0x10;
    /// End of data on this connection for this transfer.
    pub const EOD: u8 = 0x08;
    /// The sender closes this connection after this header.
    pub const CLOSE: u8 = 0x04;
}

/// Upper bound on EODC accepted from a peer: more connections than this in
/// one transfer is an attack or a bug, not a data set.
pub const MAX_EODC: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    pub descriptor: u8,
    pub count: u64,
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ModeEError {
    #[error("block at offset {offset} with {count} bytes runs past the largest file offset")]
    Overflow { offset: u64, count: u64 },
    #[error("an EOF block carries {0} bytes of data; EOF blocks must be empty")]
    DataInEof(u64),
    #[error("EOF announces {0} data connections, more than the {MAX_EODC} allowed")]
    TooManyConnections(u64),
    #[error("a second EOF arrived (EODC {second} after {first})")]
    DuplicateEof { first: u64, second: u64 },
    #[error("{eods} EODs arrived but EOF announced only {eodc} data connections")]
    TooManyEods { eods: u64, eodc: u64 },
    #[error("block ends at byte {end}, beyond the {limit} bytes announced for this transfer")]
    BeyondLimit { end: u64, limit: u64 },
    #[error("a block of {count} bytes is larger than the {max} bytes this receiver accepts in one block")]
    BlockTooLarge { count: u64, max: u64 },
    #[error("a block for bytes {start}-{end} overlaps data already received in this transfer")]
    Overlap { start: u64, end: u64 },
    #[error("more than {0} data connections for one transfer")]
    TooManyDataConnections(usize),
    #[error("a data connection closed mid-header")]
    ClosedMidHeader,
    #[error("a data connection closed before its end-of-data marker")]
    ClosedBeforeEod,
}

impl BlockHeader {
    pub fn data(offset: u64, count: u64) -> Self {
        Self { descriptor: 0, count, offset }
    }

    /// The EOD header a connection sends when it has no more data; exactly
    /// one connection of a transfer sends `eof(eodc)` instead.
    pub fn eod() -> Self {
        Self { descriptor: flags::EOD, count: 0, offset: 0 }
    }

    pub fn eof(eodc: u64) -> Self {
        Self { descriptor: flags::EOF | flags::EOD, count: 0, offset: eodc }
    }

    pub fn with_close(mut self) -> Self {
        self.descriptor |= flags::CLOSE;
        self
    }

    pub fn is_eof(&self) -> bool {
        self.descriptor & flags::EOF != 0
    }

    pub fn is_eod(&self) -> bool {
        self.descriptor & flags::EOD != 0
    }

    pub fn closes(&self) -> bool {
        self.descriptor & flags::CLOSE != 0
    }

    /// Payload bytes that follow this header on the wire. An EOF header's
    /// count field is not a payload length (Globus ignores it); a non-zero
    /// value there is rejected by [`validate`](Self::validate).
    pub fn payload_len(&self) -> u64 {
        if self.is_eof() {
            0
        } else {
            self.count
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.descriptor;
        b[1..9].copy_from_slice(&self.count.to_be_bytes());
        b[9..17].copy_from_slice(&self.offset.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; HEADER_LEN]) -> Self {
        let mut count = [0u8; 8];
        let mut offset = [0u8; 8];
        count.copy_from_slice(&b[1..9]);
        offset.copy_from_slice(&b[9..17]);
        Self { descriptor: b[0], count: u64::from_be_bytes(count), offset: u64::from_be_bytes(offset) }
    }

    /// Checks a header received from the network. `limit` is the size the
    /// transfer may reach (from ALLO or the ERET window), when known.
    pub fn validate(&self, limit: Option<u64>) -> Result<(), ModeEError> {
        if self.is_eof() {
            if self.count != 0 {
                return Err(ModeEError::DataInEof(self.count));
            }
            if self.offset > MAX_EODC {
                return Err(ModeEError::TooManyConnections(self.offset));
            }
            return Ok(());
        }
        // Offsets are file positions: keep them within i64 (what pwrite takes).
        let end = self
            .offset
            .checked_add(self.count)
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or(ModeEError::Overflow { offset: self.offset, count: self.count })?;
        if let Some(limit) = limit {
            if self.count > 0 && end > limit {
                return Err(ModeEError::BeyondLimit { end, limit });
            }
        }
        Ok(())
    }
}

/// What a receiver knows about the end of one transfer, across all its
/// connections.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EndOfData {
    eodc: Option<u64>,
    eods: u64,
}

impl EndOfData {
    /// Accounts for one received header's EOF/EOD bits.
    pub fn on_header(&mut self, h: &BlockHeader) -> Result<(), ModeEError> {
        if h.is_eof() {
            if let Some(first) = self.eodc {
                return Err(ModeEError::DuplicateEof { first, second: h.offset });
            }
            self.eodc = Some(h.offset);
        }
        if h.is_eod() {
            self.eods += 1;
        }
        match self.eodc {
            Some(eodc) if self.eods > eodc => Err(ModeEError::TooManyEods { eods: self.eods, eodc }),
            _ => Ok(()),
        }
    }

    /// EOF seen and as many EODs as it announced.
    pub fn is_complete(&self) -> bool {
        self.eodc == Some(self.eods)
    }

    pub fn eods(&self) -> u64 {
        self.eods
    }

    pub fn eodc(&self) -> Option<u64> {
        self.eodc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn globus_headers_from_the_captures() {
        // `00 0000000000040000 0000000000080000`: 256 KiB at offset 512 KiB.
        let raw = [0u8, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0];
        let h = BlockHeader::decode(&raw);
        assert_eq!(h, BlockHeader::data(512 << 10, 256 << 10));
        // `48 0000000000000000 0000000000000004`: EOF|EOD with EODC 4.
        let eof = BlockHeader::eof(4);
        assert_eq!(eof.encode()[0], 0x48);
        assert_eq!(&eof.encode()[9..], &[0, 0, 0, 0, 0, 0, 0, 4]);
        assert_eq!(BlockHeader::eod().with_close().encode()[0], 0x0c);
    }

    #[test]
    fn end_of_data_accounting() {
        let mut e = EndOfData::default();
        e.on_header(&BlockHeader::eod()).unwrap();
        e.on_header(&BlockHeader::eod()).unwrap();
        assert!(!e.is_complete(), "EODs before EOF are not the end");
        e.on_header(&BlockHeader::eof(4)).unwrap();
        assert!(!e.is_complete());
        e.on_header(&BlockHeader::eod()).unwrap();
        assert!(e.is_complete());
        assert!(matches!(e.on_header(&BlockHeader::eod()), Err(ModeEError::TooManyEods { .. })));
        let mut e = EndOfData::default();
        e.on_header(&BlockHeader::eof(1)).unwrap();
        assert!(e.is_complete());
        assert!(matches!(e.on_header(&BlockHeader::eof(1)), Err(ModeEError::DuplicateEof { .. })));
    }

    #[test]
    fn hostile_headers_are_rejected() {
        assert!(BlockHeader { descriptor: flags::EOF, count: 3, offset: 1 }.validate(None).is_err());
        assert!(BlockHeader::eof(MAX_EODC + 1).validate(None).is_err());
        assert!(BlockHeader::data(u64::MAX - 1, 10).validate(None).is_err());
        assert!(BlockHeader::data(1 << 63, 0).validate(None).is_err());
        assert!(BlockHeader::data(90, 20).validate(Some(100)).is_err());
        assert!(BlockHeader::data(80, 20).validate(Some(100)).is_ok());
    }

    proptest! {
        #[test]
        fn header_round_trips(d in any::<u8>(), c in any::<u64>(), o in any::<u64>()) {
            let h = BlockHeader { descriptor: d, count: c, offset: o };
            prop_assert_eq!(BlockHeader::decode(&h.encode()), h);
        }

        #[test]
        fn decoder_reassembles_split_streams(
            blocks in prop::collection::vec((0u64..1 << 20, prop::collection::vec(any::<u8>(), 0..300)), 0..8),
            split in 1usize..64,
        ) {
            let mut wire = Vec::new();
            for (off, data) in &blocks {
                wire.extend_from_slice(&BlockHeader::data(*off, data.len() as u64).encode());
                wire.extend_from_slice(data);
            }
            wire.extend_from_slice(&BlockHeader::eof(1).encode());
            let mut d = BlockDecoder::default();
            let mut got = Vec::new();
            for chunk in wire.chunks(split) {
                d.push(chunk);
                while let Some(b) = d.next_block(None).unwrap() {
                    got.push(b);
                }
            }
            prop_assert_eq!(got.len(), blocks.len() + 1);
            for (b, (off, data)) in got.iter().zip(&blocks) {
                prop_assert_eq!(b.header.offset, *off);
                prop_assert_eq!(&b.payload, data);
            }
            prop_assert!(got.last().unwrap().header.is_eof());
        }
    }
}
