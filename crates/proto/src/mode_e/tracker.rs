//! What one receiving transfer has got, across all its connections.
//!
//! GFD.20 senders send each byte of a transfer once, on any connection, in
//! any order; the transfer ends when EOF has announced the number of
//! connections (EODC) and that many EODs have arrived. The tracker checks
//! the first (a block overlapping one already announced is refused before
//! any of it is written, so a failed upload is never committed with mixed
//! data), counts the second, and keeps the ranges that reached the sink:
//! the source of `111` restart markers and of a resume after a failure.

use super::{BlockHeader, EndOfData, ModeEError};
use crate::restart::RangeSet;
use std::ops::Range;

/// See the module documentation. One per transfer; a driver with a thread
/// per connection keeps it behind a lock (each call is short).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiveTracker {
    end: EndOfData,
    /// Ranges announced by block headers so far (the overlap check).
    announced: RangeSet,
    /// Ranges written to the sink so far, as each write returned.
    received: RangeSet,
    /// Ranges already reported in restart markers.
    reported: RangeSet,
    connections: usize,
    /// Most data connections this transfer accepts; `None`: no bound.
    max_connections: Option<usize>,
}

impl ReceiveTracker {
    pub fn new(max_connections: Option<usize>) -> Self {
        Self { max_connections, ..Self::default() }
    }

    /// A data connection joined the transfer.
    pub fn connection_opened(&mut self) -> Result<(), ModeEError> {
        self.connections += 1;
        match self.max_connections {
            Some(max) if self.connections > max => Err(ModeEError::TooManyDataConnections(max)),
            _ => Ok(()),
        }
    }

    pub fn connections(&self) -> usize {
        self.connections
    }

    /// A checked header arrived ([`BlockReader::push_header`]): claims
    /// its range.
    ///
    /// [`BlockReader::push_header`]: super::BlockReader::push_header
    pub fn begin_block(&mut self, h: &BlockHeader) -> Result<(), ModeEError> {
        let len = h.payload_len();
        if len == 0 {
            return Ok(());
        }
        let r = h.offset..h.offset.saturating_add(len);
        if self.announced.overlaps(&r) {
            return Err(ModeEError::Overlap { start: r.start, end: r.end });
        }
        self.announced.insert(r);
        Ok(())
    }

    /// Payload bytes reached the sink (header coordinates).
    pub fn written(&mut self, r: Range<u64>) {
        if r.start < r.end {
            self.received.insert(r);
        }
    }

    /// A block's payload is all in: its EOD/EOF bits count now.
    pub fn end_block(&mut self, h: &BlockHeader) -> Result<(), ModeEError> {
        self.end.on_header(h)
    }

    /// EOF seen and as many EODs as it announced.
    pub fn is_complete(&self) -> bool {
        self.end.is_complete()
    }

    pub fn end_of_data(&self) -> &EndOfData {
        &self.end
    }

    pub fn received(&self) -> &RangeSet {
        &self.received
    }

    pub fn announced(&self) -> &RangeSet {
        &self.announced
    }

    /// The ranges received since the last call: the next `111 Range
    /// Marker` (Globus sends only what is new), `None` when nothing is.
    pub fn restart_marker(&mut self) -> Option<RangeSet> {
        let new = self.received.difference(&self.reported);
        if new.is_empty() {
            return None;
        }
        self.reported = self.received.clone();
        Some(new)
    }

    /// Why the transfer is not complete, for an error message.
    pub fn describe_end(&self) -> String {
        match self.end.eodc() {
            Some(eodc) => format!("{} of {eodc} end-of-data markers arrived", self.end.eods()),
            None => format!("{} end-of-data markers and no end-of-file arrived", self.end.eods()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlaps_are_refused_and_markers_report_what_is_new() {
        let mut t = ReceiveTracker::new(Some(2));
        t.connection_opened().unwrap();
        t.connection_opened().unwrap();
        assert_eq!(t.connection_opened(), Err(ModeEError::TooManyDataConnections(2)));
        t.begin_block(&BlockHeader::data(0, 10)).unwrap();
        assert_eq!(t.begin_block(&BlockHeader::data(5, 10)), Err(ModeEError::Overlap { start: 5, end: 15 }));
        t.begin_block(&BlockHeader::data(10, 10)).unwrap();
        t.written(0..4);
        assert_eq!(t.restart_marker().map(|r| r.to_string()), Some("0-4".into()));
        assert_eq!(t.restart_marker(), None);
        t.written(4..10);
        t.written(12..20);
        assert_eq!(t.restart_marker().map(|r| r.to_string()), Some("4-10,12-20".into()));
        assert_eq!(t.received().to_string(), "0-10,12-20");
        t.end_block(&BlockHeader::eof(2)).unwrap();
        assert!(!t.is_complete());
        assert_eq!(t.describe_end(), "1 of 2 end-of-data markers arrived");
        t.end_block(&BlockHeader::eod()).unwrap();
        assert!(t.is_complete());
    }

    mod properties {
        use crate::mode_e::{BlockHeader, BlockLimits, BlockReader, ReceiveTracker, Want};
        use crate::restart::RangeSet;
        use proptest::prelude::*;

        /// A file cut into blocks dealt to `streams` connections, each
        /// ending with EOD (one with EOF and EODC), read with every
        /// connection's reader interleaved `step` bytes at a time, as
        /// parallel readers sharing one tracker would.
        fn run(
            file: &[u8],
            block: usize,
            streams: usize,
            step: usize,
            order: &[usize],
        ) -> (Vec<u8>, ReceiveTracker, RangeSet) {
            let mut wires = vec![Vec::new(); streams];
            for (i, chunk) in file.chunks(block).enumerate() {
                let w = &mut wires[order.get(i).copied().unwrap_or(i) % streams];
                w.extend_from_slice(&BlockHeader::data((i * block) as u64, chunk.len() as u64).encode());
                w.extend_from_slice(chunk);
            }
            for (i, w) in wires.iter_mut().enumerate() {
                let end = if i == streams - 1 { BlockHeader::eof(streams as u64) } else { BlockHeader::eod() };
                w.extend_from_slice(&end.encode());
            }
            let mut readers = vec![BlockReader::new(BlockLimits::new(Some(file.len() as u64))); streams];
            let mut pos = vec![0usize; streams];
            let mut tracker = ReceiveTracker::new(Some(streams));
            let mut out = vec![0u8; file.len()];
            let mut markers = RangeSet::new();
            for _ in 0..streams {
                tracker.connection_opened().unwrap();
            }
            let mut turn = 0usize;
            while readers.iter().any(|r| !matches!(r.want(), Want::Done { .. })) {
                let c = turn % streams;
                turn += 1;
                let (r, w, p) = (&mut readers[c], &wires[c], &mut pos[c]);
                match r.want() {
                    Want::Header { missing } => {
                        let n = missing.min(step);
                        if let Some(h) = r.push_header(&w[*p..*p + n]).unwrap() {
                            tracker.begin_block(&h).unwrap();
                        }
                        *p += n;
                    }
                    Want::Payload { offset, len } => {
                        let n = (len as usize).min(step);
                        out[offset as usize..offset as usize + n].copy_from_slice(&w[*p..*p + n]);
                        tracker.written(r.payload_consumed(n as u64));
                        *p += n;
                        if turn % 5 == 0 {
                            if let Some(m) = tracker.restart_marker() {
                                markers.union(&m);
                            }
                        }
                    }
                    Want::EndOfBlock(h) => {
                        tracker.end_block(&h).unwrap();
                        r.end_block();
                    }
                    Want::Done { .. } => {}
                }
            }
            if let Some(m) = tracker.restart_marker() {
                markers.union(&m);
            }
            (out, tracker, markers)
        }

        proptest! {
            #[test]
            fn a_file_over_parallel_connections_reassembles(
                file in prop::collection::vec(any::<u8>(), 0..3000),
                block in 1usize..700,
                streams in 1usize..9,
                step in 1usize..40,
                order in prop::collection::vec(0usize..8, 0..40),
            ) {
                let (out, tracker, markers) = run(&file, block, streams, step, &order);
                prop_assert_eq!(&out, &file);
                prop_assert!(tracker.is_complete());
                let all = if file.is_empty() { RangeSet::new() } else { RangeSet::from_range(0..file.len() as u64) };
                prop_assert_eq!(tracker.received(), &all);
                prop_assert_eq!(&markers, &all, "restart markers add up to everything received");
            }

            /// A block that repeats bytes already announced (a broken or
            /// hostile sender) is refused, however the blocks are cut.
            #[test]
            fn overlapping_blocks_are_refused(a in 0u64..1000, la in 1u64..500, b in 0u64..1000, lb in 1u64..500) {
                let mut t = ReceiveTracker::default();
                t.begin_block(&BlockHeader::data(a, la)).unwrap();
                let overlaps = b < a + la && a < b + lb;
                prop_assert_eq!(t.begin_block(&BlockHeader::data(b, lb)).is_err(), overlaps);
            }
        }
    }
}
