//! [`BlockReader`] over bytes held in memory: whole blocks out.

use super::{BlockHeader, BlockLimits, BlockReader, ModeEError, ReadEvent, Want};

/// Incremental decoder over a byte stream of one connection, for callers
/// that have the bytes in memory (listings, tests, the fuzzer, the `Pair`
/// harness). It runs the same [`BlockReader`] the data path runs; after
/// an EOD it starts over, as a cached connection carries the next
/// transfer.
#[derive(Debug, Default)]
pub struct BlockDecoder {
    buf: Vec<u8>,
    reader: BlockReader,
    current: Option<Block>,
}

/// One decoded item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub header: BlockHeader,
    pub payload: Vec<u8>,
}

impl BlockDecoder {
    /// Largest payload this decoder buffers; bigger blocks are an error here
    /// (the data path streams them through [`BlockReader`] instead).
    pub const MAX_PAYLOAD: u64 = 64 << 20;

    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Bytes pushed and not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete block, `Ok(None)` if more bytes are needed.
    /// `limit` bounds block ends (the transfer's size, when known).
    pub fn next_block(&mut self, limit: Option<u64>) -> Result<Option<Block>, ModeEError> {
        self.reader.set_limits(BlockLimits { transfer_len: limit, max_block: Self::MAX_PAYLOAD });
        let mut pos = 0;
        let result = loop {
            let (used, event) = match self.reader.feed(&self.buf[pos..]) {
                Ok(step) => step,
                Err(e) => break Err(e),
            };
            pos += used;
            match event {
                Some(ReadEvent::Header(header)) => {
                    self.current = Some(Block { header, payload: Vec::new() });
                }
                Some(ReadEvent::Data { bytes, .. }) => {
                    if let Some(b) = &mut self.current {
                        b.payload.extend_from_slice(bytes);
                    }
                }
                Some(ReadEvent::EndOfBlock(header)) => {
                    if let Want::Done { .. } = self.reader.want() {
                        self.reader.restart(self.reader.limits());
                    }
                    break Ok(Some(self.current.take().unwrap_or(Block { header, payload: Vec::new() })));
                }
                None => break Ok(None),
            }
        };
        self.buf.drain(..pos);
        result
    }
}
