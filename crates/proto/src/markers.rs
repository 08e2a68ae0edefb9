//! Restart (`111`) and performance (`112`) markers, as Globus GridFTP
//! writes them and globus-url-copy parses them (`docs/gridftp-wire-notes.md`
//! §5, §6).
//!
//! ```text
//! 111 Range Marker 0-473956352,474000000-474100000
//!
//! 112-Perf Marker
//!  Timestamp:  1795223916.8
//!  Stripe Index: 0
//!  Stripe Bytes Transferred: 473956352
//!  Total Stripe Count: 1
//! 112 End.
//! ```
//!
//! The timestamp has exactly one decimal after two spaces: globus-url-copy
//! silently drops a marker with two decimals.

use crate::reply::{Reply, ReplyCode};
use crate::restart::RangeSet;

/// `111 Range Marker <ranges>`: the ranges received since the last marker.
pub fn range_marker(new_ranges: &RangeSet) -> Reply {
    Reply::new(ReplyCode::RANGE_MARKER, format!("Range Marker {new_ranges}"))
}

/// Parses the ranges of a `111` reply; `None` for other replies.
pub fn parse_range_marker(reply: &Reply) -> Option<RangeSet> {
    if reply.code != ReplyCode::RANGE_MARKER {
        return None;
    }
    let text = reply.lines.first()?;
    let ranges = text.trim().strip_prefix("Range Marker")?.trim();
    RangeSet::parse(ranges).ok()
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerfMarker {
    /// Seconds since the Unix epoch, with tenths.
    pub timestamp_tenths: u64,
    pub stripe_index: u32,
    pub bytes: u64,
    pub stripe_count: u32,
}

impl PerfMarker {
    pub fn new(unix_millis: u64, bytes: u64) -> Self {
        Self { timestamp_tenths: unix_millis / 100, stripe_index: 0, bytes, stripe_count: 1 }
    }

    pub fn reply(&self) -> Reply {
        Reply::multiline(
            ReplyCode::PERF_MARKER,
            "Perf Marker",
            [
                format!(" Timestamp:  {}.{}", self.timestamp_tenths / 10, self.timestamp_tenths % 10),
                format!(" Stripe Index: {}", self.stripe_index),
                format!(" Stripe Bytes Transferred: {}", self.bytes),
                format!(" Total Stripe Count: {}", self.stripe_count),
            ],
            "End.",
        )
    }

    /// Parses a `112` reply (the fields may come in any order).
    pub fn parse(reply: &Reply) -> Option<Self> {
        if reply.code != ReplyCode::PERF_MARKER {
            return None;
        }
        let mut m = PerfMarker { timestamp_tenths: 0, stripe_index: 0, bytes: 0, stripe_count: 1 };
        let mut saw_bytes = false;
        for line in &reply.lines {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let v = v.trim();
            match k.trim() {
                "Timestamp" => {
                    let (s, t) = v.split_once('.').unwrap_or((v, "0"));
                    // A hostile timestamp must not overflow (it did, until
                    // the client_markers fuzz target found it).
                    let tenth = u64::from(t.chars().next()?.to_digit(10)?);
                    m.timestamp_tenths = s.parse::<u64>().ok()?.checked_mul(10)?.checked_add(tenth)?;
                }
                "Stripe Index" => m.stripe_index = v.parse().ok()?,
                "Stripe Bytes Transferred" => {
                    m.bytes = v.parse().ok()?;
                    saw_bytes = true;
                }
                "Total Stripe Count" => m.stripe_count = v.parse().ok()?,
                _ => {}
            }
        }
        saw_bytes.then_some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::ReplyParser;

    #[test]
    fn perf_marker_matches_globus_bytes() {
        let m = PerfMarker { timestamp_tenths: 17952239168, stripe_index: 0, bytes: 473956352, stripe_count: 1 };
        assert_eq!(
            m.reply().to_string(),
            "112-Perf Marker\r\n Timestamp:  1795223916.8\r\n Stripe Index: 0\r\n \
             Stripe Bytes Transferred: 473956352\r\n Total Stripe Count: 1\r\n112 End.\r\n"
        );
        let mut p = ReplyParser::default();
        p.push(m.reply().to_string().as_bytes());
        assert_eq!(PerfMarker::parse(&p.next_reply().unwrap().unwrap()), Some(m));
    }

    #[test]
    fn a_huge_timestamp_is_refused_not_overflowed() {
        let r = Reply::multiline(
            ReplyCode::PERF_MARKER,
            "Perf Marker",
            [" Timestamp:  17952239173956352000.5".to_string(), " Stripe Bytes Transferred: 1".to_string()],
            "End.",
        );
        assert_eq!(PerfMarker::parse(&r), None);
    }

    #[test]
    fn range_marker_round_trip() {
        let s = RangeSet::parse("0-270008320,270532608-271319040").unwrap();
        let r = range_marker(&s);
        assert_eq!(r.to_string(), "111 Range Marker 0-270008320,270532608-271319040\r\n");
        assert_eq!(parse_range_marker(&r), Some(s));
    }
}
