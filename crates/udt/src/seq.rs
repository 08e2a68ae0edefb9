//! UDT's sequence-number arithmetic.
//!
//! Data packets carry a 31-bit sequence number that wraps from 2^31 − 1 to 0
//! (libudt `common.h`, class `CSeqNo`: `m_iMaxSeqNo = 0x7FFFFFFF`, comparisons
//! valid while two numbers are less than `m_iSeqNoTH = 0x3FFFFFFF` apart).
//! ACK packets carry a separate 31-bit "ACK sequence number" (`CAckNo`) that
//! the ACK2 echoes, and data packets a 29-bit message number (`CMsgNo`,
//! wrapping from 2^29 − 1 back to 1).
//!
//! Inside this crate every data packet is named by an unwrapped 64-bit
//! *packet number* (the initial sequence number plus the count of packets
//! before it), so no window arithmetic ever wraps; [`SeqNo::unwrap_near`]
//! turns a wire number back into a packet number next to a reference point.

use std::cmp::Ordering;

/// Largest sequence number; the next one is 0.
pub const MAX_SEQ: u32 = 0x7FFF_FFFF;
/// Half the comparison range (`CSeqNo::m_iSeqNoTH`).
pub const SEQ_THRESHOLD: u32 = 0x3FFF_FFFF;
const SEQ_SPACE: u64 = 1 << 31;

/// A data-packet sequence number as it is on the wire (31 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNo(u32);

impl SeqNo {
    /// `None` when the top bit is set (that bit marks ranges in loss lists
    /// and control packets in headers; it is never part of a number).
    pub fn new(v: u32) -> Option<SeqNo> {
        (v <= MAX_SEQ).then_some(SeqNo(v))
    }

    /// The low 31 bits of `v`.
    pub const fn from_masked(v: u32) -> SeqNo {
        SeqNo(v & MAX_SEQ)
    }

    /// The wire number of an unwrapped packet number.
    pub const fn from_pn(pn: u64) -> SeqNo {
        SeqNo((pn % SEQ_SPACE) as u32)
    }

    pub const fn get(self) -> u32 {
        self.0
    }

    pub fn next(self) -> SeqNo {
        self.add_packets(1)
    }

    pub fn prev(self) -> SeqNo {
        SeqNo(if self.0 == 0 { MAX_SEQ } else { self.0 - 1 })
    }

    pub fn add_packets(self, n: u32) -> SeqNo {
        SeqNo(((u64::from(self.0) + u64::from(n)) % SEQ_SPACE) as u32)
    }

    /// Signed distance from `self` to `other` (`CSeqNo::seqoff(self, other)`),
    /// meaningful while they are within 2^30 of each other.
    pub fn offset_to(self, other: SeqNo) -> i64 {
        let d = (i64::from(other.0) - i64::from(self.0)).rem_euclid(SEQ_SPACE as i64);
        if d > i64::from(SEQ_THRESHOLD) {
            d - SEQ_SPACE as i64
        } else {
            d
        }
    }

    /// Circular comparison (`CSeqNo::seqcmp`).
    pub fn cmp_seq(self, other: SeqNo) -> Ordering {
        0.cmp(&other.offset_to(self)).reverse()
    }

    /// The packet number `x` with `x mod 2^31 == self` closest to `reference`.
    pub fn unwrap_near(self, reference: u64) -> u64 {
        let candidate = (reference & !(SEQ_SPACE - 1)) | u64::from(self.0);
        let half = SEQ_SPACE / 2;
        if candidate > reference && candidate - reference > half && candidate >= SEQ_SPACE {
            candidate - SEQ_SPACE
        } else if candidate < reference && reference - candidate > half {
            candidate + SEQ_SPACE
        } else {
            candidate
        }
    }
}

/// The ACK sub-sequence number (`CAckNo`): 31 bits, wrapping to 0.
pub fn next_ack_no(n: u32) -> u32 {
    if n >= MAX_SEQ {
        0
    } else {
        n + 1
    }
}

/// Largest message number (`CMsgNo::m_iMaxMsgNo`); numbering restarts at 1.
pub const MAX_MSG_NO: u32 = 0x1FFF_FFFF;

pub fn next_msg_no(n: u32) -> u32 {
    if n + 1 >= MAX_MSG_NO {
        1
    } else {
        n + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_at_two_to_the_31() {
        assert_eq!(SeqNo::from_masked(MAX_SEQ).next(), SeqNo::from_masked(0));
        assert_eq!(SeqNo::from_masked(0).prev(), SeqNo::from_masked(MAX_SEQ));
        assert_eq!(SeqNo::from_masked(MAX_SEQ).add_packets(5).get(), 4);
        assert_eq!(SeqNo::from_masked(MAX_SEQ - 1).offset_to(SeqNo::from_masked(3)), 5);
        assert_eq!(SeqNo::from_masked(3).offset_to(SeqNo::from_masked(MAX_SEQ - 1)), -5);
        assert_eq!(SeqNo::from_masked(MAX_SEQ).cmp_seq(SeqNo::from_masked(0)), Ordering::Less);
        assert!(SeqNo::new(0x8000_0000).is_none());
    }

    #[test]
    fn message_numbers_restart_at_one() {
        assert_eq!(next_msg_no(MAX_MSG_NO - 1), 1);
        assert_eq!(next_ack_no(MAX_SEQ), 0);
    }

    proptest! {
        #[test]
        fn unwrap_inverts_from_pn(pn in 0u64..(1u64 << 40), delta in -(1i64 << 29)..(1i64 << 29)) {
            let reference = (pn as i64 + delta).max(0) as u64;
            prop_assert_eq!(SeqNo::from_pn(pn).unwrap_near(reference), pn);
        }

        #[test]
        fn offset_matches_packet_numbers(a in 0u64..(1u64 << 40), d in -(1i64 << 29)..(1i64 << 29)) {
            let b = (a as i64 + d).max(0) as u64;
            prop_assert_eq!(SeqNo::from_pn(a).offset_to(SeqNo::from_pn(b)), b as i64 - a as i64);
        }
    }
}
