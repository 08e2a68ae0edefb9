//! Loss lists: the sender's list of packets to retransmit, the receiver's
//! list of packets still missing, and the range coding of NAK packets.
//!
//! NAK body coding (`packet.cpp`, "Loss List Field Coding"): a run of two or
//! more lost packets is sent as two words, the first with its top bit set
//! (`1|first`, `0|last`); a single loss is one word `0|seq`. libudt reads the
//! second word of a range without checking it exists; we refuse such bodies.
//!
//! [`LossList`] keeps ranges of unwrapped packet numbers in a `BTreeMap`
//! (`start → end`, inclusive), so a flood of ranges costs one entry each and
//! is bounded by `max_ranges`; callers only insert ranges already checked
//! against their window (libudt's `CSndLossList`/`CRcvLossList` are arrays
//! sized to the flow window for the same reason).

use crate::seq::SeqNo;
use std::collections::BTreeMap;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NakError {
    #[error("empty loss list")]
    Empty,
    #[error("range start at word {0} has no end word")]
    TruncatedRange(usize),
    #[error("range end at word {0} has the range bit set")]
    BadRangeEnd(usize),
}

/// A validated NAK body, iterated as `(first, last)` pairs of wire numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LossRanges<'a> {
    body: &'a [u8],
}

impl<'a> LossRanges<'a> {
    /// Checks the coding; trailing bytes that do not fill a word are
    /// ignored, as libudt ignores them (`getLength() / 4`).
    pub fn parse(body: &'a [u8]) -> Result<LossRanges<'a>, NakError> {
        let n = body.len() / 4;
        if n == 0 {
            return Err(NakError::Empty);
        }
        let mut i = 0;
        while i < n {
            if word(body, i) & 0x8000_0000 != 0 {
                if i + 1 >= n {
                    return Err(NakError::TruncatedRange(i));
                }
                if word(body, i + 1) & 0x8000_0000 != 0 {
                    return Err(NakError::BadRangeEnd(i + 1));
                }
                i += 2;
            } else {
                i += 1;
            }
        }
        Ok(LossRanges { body: &body[..n * 4] })
    }

    pub fn iter(&self) -> LossIter<'a> {
        LossIter { body: self.body, i: 0 }
    }

    /// First sequence number of the list (what `CUDTCC::onLoss` compares).
    pub fn first(&self) -> SeqNo {
        SeqNo::from_masked(word(self.body, 0))
    }

    pub fn words(&self) -> usize {
        self.body.len() / 4
    }
}

fn word(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

#[derive(Debug, Clone)]
pub struct LossIter<'a> {
    body: &'a [u8],
    i: usize,
}

impl Iterator for LossIter<'_> {
    type Item = (SeqNo, SeqNo);
    fn next(&mut self) -> Option<(SeqNo, SeqNo)> {
        let n = self.body.len() / 4;
        if self.i >= n {
            return None;
        }
        let w = word(self.body, self.i);
        if w & 0x8000_0000 != 0 {
            let last = word(self.body, self.i + 1);
            self.i += 2;
            Some((SeqNo::from_masked(w), SeqNo::from_masked(last)))
        } else {
            self.i += 1;
            Some((SeqNo::from_masked(w), SeqNo::from_masked(w)))
        }
    }
}

/// Range-codes `ranges` (inclusive, in order) into NAK words, at most
/// `max_words` words (`CRcvLossList::getLossArray` stops one short of its
/// limit so that a range is never cut in half; so do we).
pub fn encode_nak(ranges: impl IntoIterator<Item = (SeqNo, SeqNo)>, max_words: usize, out: &mut Vec<u32>) {
    out.clear();
    for (a, b) in ranges {
        if out.len() + 2 > max_words {
            break;
        }
        if a == b {
            out.push(a.get());
        } else {
            out.push(a.get() | 0x8000_0000);
            out.push(b.get());
        }
    }
}

/// A bounded set of packet numbers kept as inclusive ranges.
#[derive(Debug, Clone)]
pub struct LossList {
    ranges: BTreeMap<u64, u64>,
    packets: u64,
    max_ranges: usize,
}

impl LossList {
    pub fn new(max_ranges: usize) -> LossList {
        LossList { ranges: BTreeMap::new(), packets: 0, max_ranges: max_ranges.max(1) }
    }

    /// Number of packets in the list.
    pub fn len(&self) -> u64 {
        self.packets
    }

    pub fn is_empty(&self) -> bool {
        self.packets == 0
    }

    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    pub fn first(&self) -> Option<u64> {
        self.ranges.first_key_value().map(|(&a, _)| a)
    }

    pub fn contains(&self, pn: u64) -> bool {
        self.ranges.range(..=pn).next_back().is_some_and(|(_, &e)| e >= pn)
    }

    /// Inserts `[a, b]`; returns how many packets were not yet in the list.
    /// Refuses (returns 0) an insertion that would exceed `max_ranges`.
    pub fn insert(&mut self, a: u64, b: u64) -> u64 {
        if a > b {
            return 0;
        }
        let mut start = a;
        let mut end = b;
        // Absorb a range that starts before `a` and touches it.
        if let Some((&s, &e)) = self.ranges.range(..a).next_back() {
            if e.saturating_add(1) >= a {
                start = s;
                end = end.max(e);
            }
        }
        // Absorb every range starting within [start, end + 1].
        let absorbed: Vec<(u64, u64)> = self.ranges.range(a..=end.saturating_add(1)).map(|(&s, &e)| (s, e)).collect();
        if absorbed.is_empty() && start == a && self.ranges.len() >= self.max_ranges {
            return 0;
        }
        let mut already = 0;
        if start < a {
            let e = self.ranges[&start];
            already += e.min(b).saturating_sub(a) + u64::from(e >= a);
            self.ranges.remove(&start);
        }
        for (s, e) in absorbed {
            end = end.max(e);
            let lo = s.max(a);
            let hi = e.min(b);
            if hi >= lo {
                already += hi - lo + 1;
            }
            self.ranges.remove(&s);
        }
        self.ranges.insert(start, end);
        let added = (b - a + 1) - already;
        self.packets += added;
        added
    }

    /// Removes one packet; true if it was there.
    pub fn remove(&mut self, pn: u64) -> bool {
        let Some((&s, &e)) = self.ranges.range(..=pn).next_back() else { return false };
        if e < pn {
            return false;
        }
        self.ranges.remove(&s);
        if s < pn {
            self.ranges.insert(s, pn - 1);
        }
        if e > pn {
            self.ranges.insert(pn + 1, e);
        }
        self.packets -= 1;
        true
    }

    /// Removes every packet up to and including `pn`.
    pub fn remove_through(&mut self, pn: u64) {
        while let Some((&s, &e)) = self.ranges.first_key_value() {
            if s > pn {
                break;
            }
            self.ranges.remove(&s);
            if e > pn {
                self.ranges.insert(pn + 1, e);
                self.packets -= pn - s + 1;
                break;
            }
            self.packets -= e - s + 1;
        }
    }

    /// Removes every packet in `[a, b]`.
    pub fn remove_range(&mut self, a: u64, b: u64) {
        if a > b {
            return;
        }
        let hit: Vec<(u64, u64)> =
            self.ranges.range(..=b).rev().take_while(|(_, &e)| e >= a).map(|(&s, &e)| (s, e)).collect();
        for (s, e) in hit {
            self.ranges.remove(&s);
            let lo = s.max(a);
            let hi = e.min(b);
            self.packets -= hi - lo + 1;
            if s < a {
                self.ranges.insert(s, a - 1);
            }
            if e > b {
                self.ranges.insert(b + 1, e);
            }
        }
    }

    /// Removes and returns the smallest packet number.
    pub fn pop_first(&mut self) -> Option<u64> {
        let (&s, &e) = self.ranges.first_key_value()?;
        self.ranges.remove(&s);
        if e > s {
            self.ranges.insert(s + 1, e);
        }
        self.packets -= 1;
        Some(s)
    }

    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&s, &e)| (s, e))
    }

    pub fn clear(&mut self) {
        self.ranges.clear();
        self.packets = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn nak_coding_round_trips() {
        let mut words = Vec::new();
        let ranges = [(SeqNo::from_masked(5), SeqNo::from_masked(5)), (SeqNo::from_masked(9), SeqNo::from_masked(20))];
        encode_nak(ranges, 100, &mut words);
        assert_eq!(words, vec![5, 0x8000_0009, 20]);
        let body: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        let parsed = LossRanges::parse(&body).unwrap();
        assert_eq!(parsed.iter().collect::<Vec<_>>(), ranges.to_vec());
    }

    #[test]
    fn malformed_naks_are_refused() {
        assert_eq!(LossRanges::parse(&[]), Err(NakError::Empty));
        assert_eq!(LossRanges::parse(&0x8000_0001u32.to_be_bytes()), Err(NakError::TruncatedRange(0)));
        let body: Vec<u8> = [0x8000_0001u32, 0x8000_0002].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(LossRanges::parse(&body), Err(NakError::BadRangeEnd(1)));
    }

    #[test]
    fn encode_never_splits_a_range() {
        let mut words = Vec::new();
        let r = (0..10).map(|i| (SeqNo::from_masked(i * 10), SeqNo::from_masked(i * 10 + 3)));
        encode_nak(r, 5, &mut words);
        assert_eq!(words.len(), 4);
    }

    #[test]
    fn range_cap_refuses_new_ranges_only() {
        let mut l = LossList::new(2);
        assert_eq!(l.insert(1, 1), 1);
        assert_eq!(l.insert(10, 12), 3);
        assert_eq!(l.insert(20, 20), 0, "third disjoint range refused");
        assert_eq!(l.insert(2, 3), 2, "extending an existing range is fine");
        assert_eq!(l.len(), 6);
    }

    proptest! {
        #[test]
        fn behaves_like_a_set(ops in proptest::collection::vec((0u8..4, 0u64..200, 0u64..20), 1..200)) {
            let mut l = LossList::new(usize::MAX);
            let mut model = BTreeSet::new();
            for (op, a, n) in ops {
                match op {
                    0 => {
                        let added = l.insert(a, a + n);
                        let before = model.len();
                        model.extend(a..=a + n);
                        prop_assert_eq!(added as usize, model.len() - before);
                    }
                    1 => prop_assert_eq!(l.remove(a), model.remove(&a)),
                    2 => { l.remove_through(a); model.retain(|&x| x > a); }
                    _ => { l.remove_range(a, a + n); model.retain(|&x| x < a || x > a + n); }
                }
                prop_assert_eq!(l.len() as usize, model.len());
                prop_assert_eq!(l.first(), model.first().copied());
                // ranges are disjoint and non-adjacent
                let r: Vec<_> = l.ranges().collect();
                for w in r.windows(2) { prop_assert!(w[0].1 + 1 < w[1].0); }
            }
            while let Some(x) = l.pop_first() { prop_assert_eq!(Some(x), model.pop_first()); }
            prop_assert!(model.is_empty());
        }
    }
}
