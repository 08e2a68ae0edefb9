//! Summaries of repeated measurements.
//!
//! With two or three repetitions on a shared machine, a mean would let one
//! disturbed run move the figure; the median does not, and the full range
//! (min–max) is the honest spread for so few samples.

use serde::{Deserialize, Serialize};

/// Median and range of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// `None` for an empty set; NaN samples are ignored.
    pub fn of(samples: impl IntoIterator<Item = f64>) -> Option<Summary> {
        let mut v: Vec<f64> = samples.into_iter().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Summary { n, median, min: v[0], max: v[n - 1] })
    }

    /// Half the range relative to the median, e.g. 0.03 for ±3 %.
    pub fn relative_spread(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / 2.0 / self.median.abs()
        }
    }

    /// Whether the two ranges share any value.
    pub fn overlaps(&self, other: &Summary) -> bool {
        self.min <= other.max && other.min <= self.max
    }
}

/// How a Ferry figure compares with an anchor's, in words a reader can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Ahead,
    Level,
    Behind,
}

/// Within this relative difference of the medians, the two are called level.
pub const LEVEL_BAND: f64 = 0.02;

/// Classifies `ratio` = Ferry ÷ anchor for a higher-is-better figure.
pub fn standing(ratio: f64) -> Standing {
    if ratio > 1.0 + LEVEL_BAND {
        Standing::Ahead
    } else if ratio < 1.0 - LEVEL_BAND {
        Standing::Behind
    } else {
        Standing::Level
    }
}

/// Issue 15's "no slower" threshold: every median new ÷ old at least this.
pub const NO_SLOWER: f64 = 0.97;

/// What one row of a new-against-old comparison says under the rule
/// "median new ÷ old ≥ [`NO_SLOWER`], or where it is below, the two ranges
/// overlap and a rerun of that row says it was noise".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoSlower {
    /// The median ratio is at or above the threshold.
    Holds,
    /// Below the threshold, but the min–max ranges overlap: it may be
    /// noise, and only a rerun of the row can say.
    Rerun,
    /// Below the threshold and the ranges do not overlap: slower.
    Slower,
}

/// One row's new ÷ old: the ratio of the medians, whether the ranges
/// overlap, and the rule's verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OldNew {
    pub ratio: f64,
    pub overlap: bool,
    pub verdict: NoSlower,
}

/// Applies the rule to two summaries of a higher-is-better figure
/// (`None` when the old median is not positive).
pub fn old_new(new: &Summary, old: &Summary, threshold: f64) -> Option<OldNew> {
    if old.median <= 0.0 {
        return None;
    }
    let ratio = new.median / old.median;
    let overlap = new.overlaps(old);
    let verdict = if ratio >= threshold {
        NoSlower::Holds
    } else if overlap {
        NoSlower::Rerun
    } else {
        NoSlower::Slower
    };
    Some(OldNew { ratio, overlap, verdict })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even() {
        let s = Summary::of([3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.n, s.median, s.min, s.max), (3, 2.0, 1.0, 3.0));
        let s = Summary::of([4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!(Summary::of([]).is_none());
        assert_eq!(Summary::of([f64::NAN, 5.0]).unwrap().n, 1);
    }

    #[test]
    fn spread_and_overlap() {
        let a = Summary::of([90.0, 100.0, 110.0]).unwrap();
        assert!((a.relative_spread() - 0.1).abs() < 1e-12);
        let b = Summary::of([109.0, 120.0]).unwrap();
        let c = Summary::of([111.0, 120.0]).unwrap();
        assert!(a.overlaps(&b));
        assert!(!a.overlaps(&c));
    }

    #[test]
    fn old_new_rule() {
        let old = Summary::of([100.0, 98.0, 102.0]).unwrap();
        // At the threshold exactly: holds.
        let r = old_new(&Summary::of([97.0]).unwrap(), &old, NO_SLOWER).unwrap();
        assert!((r.ratio - 0.97).abs() < 1e-12);
        assert_eq!(r.verdict, NoSlower::Holds);
        assert!(!r.overlap);
        // Faster, overlapping.
        let r = old_new(&Summary::of([101.0, 103.0, 99.0]).unwrap(), &old, NO_SLOWER).unwrap();
        assert_eq!((r.verdict, r.overlap), (NoSlower::Holds, true));
        // Below, ranges overlap (new's max reaches old's min): rerun.
        let r = old_new(&Summary::of([90.0, 95.0, 98.0]).unwrap(), &old, NO_SLOWER).unwrap();
        assert!(r.ratio < NO_SLOWER);
        assert_eq!((r.verdict, r.overlap), (NoSlower::Rerun, true));
        // Below, ranges apart: slower.
        let r = old_new(&Summary::of([90.0, 95.0, 97.9]).unwrap(), &old, NO_SLOWER).unwrap();
        assert_eq!((r.verdict, r.overlap), (NoSlower::Slower, false));
        // A zero baseline gives no ratio.
        assert!(old_new(&old, &Summary::of([0.0]).unwrap(), NO_SLOWER).is_none());
    }

    #[test]
    fn standings() {
        assert_eq!(standing(1.5), Standing::Ahead);
        assert_eq!(standing(1.01), Standing::Level);
        assert_eq!(standing(0.99), Standing::Level);
        assert_eq!(standing(0.9), Standing::Behind);
    }
}
