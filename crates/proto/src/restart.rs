//! Restart markers: sets of byte ranges already received.
//!
//! GridFTP extended block mode delivers blocks out of order over parallel
//! streams, so "how much arrived" is a set of ranges, not an offset. The
//! receiving server reports them as `111 Range Marker 0-100,200-300` (GFD.20
//! §"Restart markers"; Globus sends only the ranges new since the previous
//! marker), the client keeps their union, and on restart sends it back as
//! `REST 0-100,200-300` so only the holes travel again.
//!
//! Ranges are end-exclusive (`0-100` is bytes 0..=99), as Globus GridFTP
//! writes and reads them; see `docs/restart-ranges.md` for why Ferry follows
//! that rather than the inclusive reading of older drafts.

use std::fmt;
use std::ops::Range;
use thiserror::Error;

/// Upper bound on ranges accepted from the network in one marker or REST.
pub const MAX_RANGES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RangeError {
    #[error("expected start-end[,start-end...] with end >= start")]
    Syntax,
    #[error("more than {MAX_RANGES} ranges")]
    TooMany,
}

/// A set of half-open byte ranges, kept sorted and coalesced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<Range<u64>>,
}

impl RangeSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_range(r: Range<u64>) -> Self {
        let mut s = Self::new();
        s.insert(r);
        s
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn ranges(&self) -> &[Range<u64>] {
        &self.ranges
    }

    /// Total bytes covered.
    pub fn covered(&self) -> u64 {
        self.ranges.iter().map(|r| r.end - r.start).sum()
    }

    /// Adds `r`, merging with neighbours it touches or overlaps.
    pub fn insert(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        // First range whose end reaches r.start (may merge).
        let i = self.ranges.partition_point(|x| x.end < r.start);
        // First range that starts after r.end (cannot merge).
        let j = self.ranges.partition_point(|x| x.start <= r.end);
        if i == j {
            self.ranges.insert(i, r);
            return;
        }
        let start = r.start.min(self.ranges[i].start);
        let end = r.end.max(self.ranges[j - 1].end);
        self.ranges.splice(i..j, std::iter::once(start..end));
    }

    pub fn union(&mut self, other: &RangeSet) {
        for r in &other.ranges {
            self.insert(r.clone());
        }
    }

    /// Whether every byte of `r` is in the set.
    pub fn contains_range(&self, r: &Range<u64>) -> bool {
        if r.start >= r.end {
            return true;
        }
        let i = self.ranges.partition_point(|x| x.end <= r.start);
        self.ranges.get(i).is_some_and(|x| x.start <= r.start && r.end <= x.end)
    }

    /// Whether any byte of `r` is already in the set.
    pub fn overlaps(&self, r: &Range<u64>) -> bool {
        if r.start >= r.end {
            return false;
        }
        let i = self.ranges.partition_point(|x| x.end <= r.start);
        self.ranges.get(i).is_some_and(|x| x.start < r.end)
    }

    /// The parts of `0..len` not in the set: what still has to be sent.
    pub fn missing(&self, len: u64) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        let mut pos = 0;
        for r in &self.ranges {
            if r.start >= len {
                break;
            }
            if r.start > pos {
                out.push(pos..r.start);
            }
            pos = pos.max(r.end);
        }
        if pos < len {
            out.push(pos..len);
        }
        out
    }

    /// The ranges of `self` not in `earlier`: what a new `111` marker reports.
    pub fn difference(&self, earlier: &RangeSet) -> RangeSet {
        let mut out = RangeSet::new();
        for r in &self.ranges {
            let mut pos = r.start;
            for e in &earlier.ranges {
                if e.end <= pos || e.start >= r.end {
                    continue;
                }
                if e.start > pos {
                    out.ranges.push(pos..e.start);
                }
                pos = pos.max(e.end);
            }
            if pos < r.end {
                out.ranges.push(pos..r.end);
            }
        }
        out
    }

    /// Parses `a-b,c-d`. Whitespace around items is tolerated.
    pub fn parse(s: &str) -> Result<Self, RangeError> {
        let mut set = RangeSet::new();
        let s = s.trim();
        if s.is_empty() {
            return Err(RangeError::Syntax);
        }
        for (n, item) in s.split(',').enumerate() {
            if n >= MAX_RANGES {
                return Err(RangeError::TooMany);
            }
            let (a, b) = item.trim().split_once('-').ok_or(RangeError::Syntax)?;
            let a = parse_u64(a)?;
            let b = parse_u64(b)?;
            if b < a {
                return Err(RangeError::Syntax);
            }
            set.insert(a..b);
        }
        Ok(set)
    }
}

fn parse_u64(s: &str) -> Result<u64, RangeError> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(RangeError::Syntax);
    }
    s.parse().map_err(|_| RangeError::Syntax)
}

impl fmt::Display for RangeSet {
    /// `a-b,c-d`; the empty set is written `0-0` (nothing received), so it
    /// still parses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ranges.is_empty() {
            return f.write_str("0-0");
        }
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}-{}", r.start, r.end)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn insert_merges_touching_and_overlapping() {
        let mut s = RangeSet::new();
        s.insert(10..20);
        s.insert(30..40);
        s.insert(20..25);
        assert_eq!(s.to_string(), "10-25,30-40");
        s.insert(0..100);
        assert_eq!(s.to_string(), "0-100");
        assert_eq!(s.covered(), 100);
    }

    #[test]
    fn globus_restart_example() {
        let s = RangeSet::parse("0-270008320,270532608-271319040,271581184-272629760").unwrap();
        let missing = s.missing(1073741824);
        assert_eq!(missing, vec![270008320..270532608, 271319040..271581184, 272629760..1073741824]);
        let mut all = s.clone();
        for m in missing {
            all.insert(m);
        }
        assert_eq!(all.to_string(), "0-1073741824");
    }

    #[test]
    fn empty_ranges_round_trip() {
        let s = RangeSet::parse("5-5,00-\u{b}00").unwrap();
        assert!(s.is_empty());
        assert_eq!(s.to_string(), "0-0");
        assert_eq!(RangeSet::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn parse_errors() {
        for bad in ["", "5", "5-", "-5", "9-5", "a-b", "1-2,,3-4", "1-2;3-4"] {
            assert!(RangeSet::parse(bad).is_err(), "{bad}");
        }
        let many = vec!["0-1"; MAX_RANGES + 1].join(",");
        assert_eq!(RangeSet::parse(&many), Err(RangeError::TooMany));
    }

    fn bytes(s: &RangeSet, len: u64) -> Vec<bool> {
        (0..len).map(|i| s.contains_range(&(i..i + 1))).collect()
    }

    proptest! {
        #[test]
        fn set_operations_match_a_bitmap(
            a in proptest::collection::vec((0u64..64, 0u64..16), 0..12),
            b in proptest::collection::vec((0u64..64, 0u64..16), 0..12),
        ) {
            let mut sa = RangeSet::new();
            let mut bits = vec![false; 80];
            for (s, l) in &a {
                sa.insert(*s..s + l);
                for i in *s..s + l { bits[i as usize] = true; }
            }
            prop_assert_eq!(bytes(&sa, 80), bits.clone());
            // Sorted, disjoint, non-touching.
            for w in sa.ranges().windows(2) {
                prop_assert!(w[0].end < w[1].start);
            }
            prop_assert_eq!(RangeSet::parse(&sa.to_string()).ok().unwrap_or_default(), sa.clone());
            let mut sb = RangeSet::new();
            for (s, l) in &b { sb.insert(*s..s + l); }
            let d = sa.difference(&sb);
            let want: Vec<bool> = (0..80).map(|i| bits[i] && !sb.contains_range(&(i as u64..i as u64 + 1))).collect();
            prop_assert_eq!(bytes(&d, 80), want);
            let missing: u64 = sa.missing(70).iter().map(|r| r.end - r.start).sum();
            prop_assert_eq!(missing, bits[..70].iter().filter(|b| !**b).count() as u64);
            for (s, l) in &b {
                let any = (*s..s + l).any(|i| bits[i as usize]);
                prop_assert_eq!(sa.overlaps(&(*s..s + l)), any, "{}..{}", s, s + l);
            }
        }
    }
}
