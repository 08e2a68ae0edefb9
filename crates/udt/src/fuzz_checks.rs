//! Properties the fuzz targets check (`fuzz/fuzz_targets/udt_*.rs`); the
//! committed corpus is replayed on stable by `tests/fuzz_corpus.rs`.

use crate::loss::{encode_nak, LossRanges};
use crate::packet::Packet;

/// Any datagram: decoding never panics, and a NAK body that parses
/// re-encodes to the same words.
pub fn packet_decoder(data: &[u8]) {
    if let Ok(Packet::Control(c)) = Packet::decode(data) {
        if let crate::packet::Control::Nak(r) = c.control {
            loss_ranges_roundtrip(r);
        }
    }
}

/// Any NAK body: parsing never panics; a parsed list re-encodes to the same
/// bytes (minus a trailing partial word).
pub fn loss_list_decoder(data: &[u8]) {
    if let Ok(r) = LossRanges::parse(data) {
        loss_ranges_roundtrip(r);
    }
}

fn loss_ranges_roundtrip(r: LossRanges<'_>) {
    let ranges: Vec<_> = r.iter().collect();
    let mut words = Vec::new();
    encode_nak(ranges.iter().copied(), usize::MAX, &mut words);
    // A range whose two ends are equal is re-encoded as a single word;
    // every other list re-encodes exactly.
    let singles_as_ranges = r.iter().count() * 2 - words.len();
    assert!(words.len() <= r.words());
    assert!(singles_as_ranges <= r.iter().count());
    let again: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    let reparsed = LossRanges::parse(&again).expect("re-encoded list parses");
    assert_eq!(reparsed.iter().collect::<Vec<_>>(), ranges);
}
