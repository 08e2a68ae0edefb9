//! GridFTP striping (GFD.20 §3.4 "Striped passive / Striped port" and the
//! `StripeLayout` options of `OPTS RETR`): one transfer spread over several
//! data movers ("stripes"), each with its own data address, its own MODE E
//! connections and its own end-of-file accounting.
//!
//! What is on the wire, as the Grid Community Toolkit speaks it (and as
//! `docs/striping.md` records from captures):
//!
//! ```text
//! SPAS
//! 229-Entering Striped Passive Mode.
//!  127,0,0,1,156,64
//!  127,0,0,1,156,65
//! 229 End
//!
//! SPOR 127,0,0,1,156,64 127,0,0,1,156,65
//! 200 PORT Command successful.
//!
//! OPTS RETR StripeLayout=Blocked;BlockSize=1048576;
//! OPTS RETR StripeLayout=Partitioned;
//! ```
//!
//! * Which stripe carries which bytes is the *sender's* business: the
//!   layout is an option of `RETR`. A receiver writes every block where its
//!   header says, whichever stripe it came on.
//! * Each receiving stripe counts its own end of data: exactly one EOF
//!   block arrives on it, carrying the number of connections opened *to
//!   that stripe* (EODC), and it is complete when as many EODs arrived
//!   ([`StripedEnd`]). The transfer is complete when every stripe is.
//! * Stripes are matched one to one (the Globus default, "stripe_mode 1"):
//!   sending stripe `i` of `n` connects to the `i`-th address of `SPOR` and
//!   carries the bytes [`StripeLayout::ranges`] gives stripe `i` of `n`.
//!   When the two sides have different numbers of data nodes, the number of
//!   stripes is the number of receiving addresses, and a sender with fewer
//!   nodes runs several stripes on one node.
//! * Performance markers (`112`) are sent per stripe: `Stripe Index: i`,
//!   `Total Stripe Count: n`, with that stripe's byte count.

use crate::host_port::{format_host_port, parse_host_port};
use crate::markers::PerfMarker;
use crate::mode_e::{BlockHeader, EndOfData, ModeEError};
use crate::reply::{Reply, ReplyCode};
use crate::restart::RangeSet;
use std::fmt;
use std::net::SocketAddrV4;
use std::ops::Range;
use thiserror::Error;

/// The Globus server's default stripe block (`-stripe-blocksize`, 1 MiB).
pub const DEFAULT_STRIPE_BLOCK: u64 = 1 << 20;

/// Smallest stripe block accepted: below this the 17-byte headers and the
/// per-block system calls dominate and a file turns into millions of
/// ranges.
pub const MIN_STRIPE_BLOCK: u64 = 4096;

/// Largest number of stripes one transfer may use (addresses in `SPOR`,
/// nodes of a front end).
pub const MAX_STRIPES: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StripeError {
    #[error("unknown stripe layout {0:?}; use Blocked or Partitioned")]
    UnknownLayout(String),
    #[error("BlockSize must be a number of bytes from 4096 to 4294967295")]
    BadBlockSize,
    #[error("not a striped passive reply: {0}")]
    NotSpas(String),
    #[error("bad address in a striped passive reply: {0:?}")]
    BadAddress(String),
    #[error("more than 256 stripes")]
    TooMany,
}

/// How a sender deals a file's bytes to its stripes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripeLayout {
    /// Round robin in blocks: block `k` (bytes `k*B .. (k+1)*B`) goes to
    /// stripe `k % n`.
    Blocked { block_size: u64 },
    /// One contiguous part per stripe: stripe `i` carries
    /// `i*P .. (i+1)*P` with `P = ceil(len / n)`, as the Globus server's
    /// data nodes read it (`globus_gridftp_server_get_read_range`).
    Partitioned,
}

impl Default for StripeLayout {
    fn default() -> Self {
        StripeLayout::Blocked { block_size: DEFAULT_STRIPE_BLOCK }
    }
}

impl fmt::Display for StripeLayout {
    /// The `OPTS RETR` argument that selects this layout.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StripeLayout::Blocked { block_size } => write!(f, "StripeLayout=Blocked;BlockSize={block_size};"),
            StripeLayout::Partitioned => f.write_str("StripeLayout=Partitioned;"),
        }
    }
}

impl StripeLayout {
    /// The stripe that carries byte `offset` of a `len`-byte transfer.
    pub fn stripe_of(&self, offset: u64, len: u64, count: usize) -> usize {
        let n = count.max(1) as u64;
        match *self {
            StripeLayout::Blocked { block_size } => ((offset / block_size.max(1)) % n) as usize,
            StripeLayout::Partitioned => (offset / partition(len, count)).min(n - 1) as usize,
        }
    }

    /// The ranges of `0..len` that stripe `index` of `count` carries, in
    /// order. Every byte belongs to exactly one stripe.
    pub fn ranges(&self, index: usize, count: usize, len: u64) -> Vec<Range<u64>> {
        let n = count.max(1) as u64;
        let i = index as u64;
        if i >= n {
            return Vec::new();
        }
        match *self {
            StripeLayout::Blocked { block_size } => {
                let b = block_size.max(1);
                let mut out = Vec::new();
                let mut k = i;
                while let Some(start) = k.checked_mul(b).filter(|s| *s < len) {
                    out.push(start..start.saturating_add(b).min(len));
                    k += n;
                }
                out
            }
            StripeLayout::Partitioned => {
                let p = partition(len, count);
                let start = i.saturating_mul(p).min(len);
                let end = (i + 1).saturating_mul(p).min(len);
                // One range, or none.
                (start < end).then_some(start..end).into_iter().collect()
            }
        }
    }

    /// What stripe `index` of `count` still has to send of a `len`-byte
    /// transfer once `done` (a restart's ranges) has arrived.
    pub fn missing(&self, index: usize, count: usize, len: u64, done: &RangeSet) -> Vec<Range<u64>> {
        let mut mine = RangeSet::new();
        for r in self.ranges(index, count, len) {
            mine.insert(r);
        }
        mine.difference(done).ranges().to_vec()
    }

    /// Cuts `range` of a `len`-byte transfer at stripe boundaries:
    /// `(stripe, piece)` in order. What a striped sender does with each
    /// buffer (`globus_ftp_control_layout_blocked`).
    pub fn split(&self, range: Range<u64>, len: u64, count: usize) -> Vec<(usize, Range<u64>)> {
        let mut out = Vec::new();
        let mut pos = range.start;
        while pos < range.end {
            let stripe = self.stripe_of(pos, len, count);
            let boundary = match *self {
                StripeLayout::Blocked { block_size } => {
                    let b = block_size.max(1);
                    (pos / b).saturating_add(1).saturating_mul(b)
                }
                StripeLayout::Partitioned => {
                    let p = partition(len, count);
                    if stripe + 1 >= count.max(1) {
                        u64::MAX
                    } else {
                        (stripe as u64 + 1).saturating_mul(p)
                    }
                }
            };
            let end = boundary.min(range.end).max(pos + 1);
            out.push((stripe, pos..end));
            pos = end;
        }
        out
    }
}

/// Partition size for `count` stripes: `ceil(len / count)`, at least 1.
fn partition(len: u64, count: usize) -> u64 {
    len.div_ceil(count.max(1) as u64).max(1)
}

/// The striping options a session has been given with `OPTS RETR`.
/// `StripeLayout` and `BlockSize` arrive as separate items
/// (`StripeLayout=Blocked;BlockSize=N;`), in any order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StripeOptions {
    partitioned: bool,
    block_size: Option<u64>,
}

impl StripeOptions {
    /// Applies one `OPTS RETR` item; `Ok(false)` when the key is not a
    /// striping option.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, StripeError> {
        match key.trim().to_ascii_lowercase().as_str() {
            "stripelayout" => {
                match value.trim().to_ascii_lowercase().as_str() {
                    "blocked" => self.partitioned = false,
                    "partitioned" => self.partitioned = true,
                    _ => return Err(StripeError::UnknownLayout(value.chars().take(40).collect())),
                }
                Ok(true)
            }
            "blocksize" => {
                let v = value.trim();
                let n: u64 = (!v.is_empty() && v.len() <= 10 && v.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| v.parse().ok())
                    .flatten()
                    .filter(|n| (MIN_STRIPE_BLOCK..=u64::from(u32::MAX)).contains(n))
                    .ok_or(StripeError::BadBlockSize)?;
                self.block_size = Some(n);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    pub fn layout(&self) -> StripeLayout {
        if self.partitioned {
            StripeLayout::Partitioned
        } else {
            StripeLayout::Blocked { block_size: self.block_size.unwrap_or(DEFAULT_STRIPE_BLOCK) }
        }
    }
}

/// A session's striping state: the layout options and the addresses of
/// the last `SPOR`, valid for the data-channel generation it set up (any
/// later PORT, PASV or MODE change starts a new generation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionStripes {
    pub options: StripeOptions,
    spor: Option<(u64, Vec<SocketAddrV4>)>,
}

impl SessionStripes {
    pub fn set_spor(&mut self, generation: u64, addrs: Vec<SocketAddrV4>) {
        self.spor = Some((generation, addrs));
    }

    /// The SPOR addresses if `generation` is still the one they set up.
    pub fn spor(&self, generation: u64) -> Option<&[SocketAddrV4]> {
        match &self.spor {
            Some((g, addrs)) if *g == generation => Some(addrs),
            _ => None,
        }
    }
}

/// `229-Entering Striped Passive Mode.` with one ` h1,h2,h3,h4,p1,p2`
/// line per stripe and `229 End` (the Globus server's words).
pub fn spas_reply(addrs: &[SocketAddrV4]) -> Reply {
    Reply::multiline(
        ReplyCode::STRIPED_PASSIVE,
        "Entering Striped Passive Mode.",
        addrs.iter().map(|a| format!(" {}", format_host_port(*a))),
        "End",
    )
}

/// The stripe addresses of a `229` reply to `SPAS`: every body line that
/// holds a host-port. A single-line `229` with one address in parentheses
/// (a server that answers SPAS like PASV) counts as one stripe.
pub fn parse_spas_reply(reply: &Reply) -> Result<Vec<SocketAddrV4>, StripeError> {
    if reply.code != ReplyCode::STRIPED_PASSIVE {
        return Err(StripeError::NotSpas(format!("reply code {}", reply.code)));
    }
    let mut out = Vec::new();
    if reply.lines.len() == 1 {
        return crate::host_port::parse_pasv_reply(&reply.lines[0])
            .map(|a| vec![a])
            .ok_or_else(|| StripeError::NotSpas(reply.lines[0].chars().take(60).collect()));
    }
    for line in &reply.lines[1..reply.lines.len() - 1] {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if out.len() >= MAX_STRIPES {
            return Err(StripeError::TooMany);
        }
        let bad = || StripeError::BadAddress(t.chars().take(60).collect());
        // `SPAS 2` answers in the EPRT form, `|1|host|port|`.
        let addr = if t.starts_with('|') {
            match crate::host_port::parse_eprt(t).map_err(|_| bad())? {
                std::net::SocketAddr::V4(a) => a,
                std::net::SocketAddr::V6(_) => return Err(bad()),
            }
        } else {
            parse_host_port(t).map_err(|_| bad())?
        };
        out.push(addr);
    }
    if out.is_empty() {
        return Err(StripeError::NotSpas("no address in the reply".into()));
    }
    Ok(out)
}

/// The `SPOR` command line for `addrs` (one per receiving stripe).
pub fn spor_command(addrs: &[SocketAddrV4]) -> String {
    let mut s = String::from("SPOR");
    for a in addrs {
        s.push(' ');
        s.push_str(&format_host_port(*a));
    }
    s
}

/// One `112` per stripe, each with that stripe's bytes.
pub fn perf_markers(unix_millis: u64, per_stripe: &[u64]) -> Vec<Reply> {
    let count = per_stripe.len().max(1) as u32;
    per_stripe
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            PerfMarker { stripe_index: i as u32, stripe_count: count, ..PerfMarker::new(unix_millis, *bytes) }.reply()
        })
        .collect()
}

/// What a client learns from per-stripe performance markers: the latest
/// byte count of each stripe, and so the total.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StripeProgress {
    bytes: Vec<u64>,
}

impl StripeProgress {
    /// Takes a `112` marker; false for a marker that names an impossible
    /// stripe (index not below its count, or more than [`MAX_STRIPES`]).
    pub fn on_marker(&mut self, m: &PerfMarker) -> bool {
        let count = m.stripe_count as usize;
        if count == 0 || count > MAX_STRIPES || m.stripe_index as usize >= count {
            return false;
        }
        if self.bytes.len() != count {
            self.bytes.resize(count, 0);
        }
        self.bytes[m.stripe_index as usize] = m.bytes;
        true
    }

    pub fn stripes(&self) -> &[u64] {
        &self.bytes
    }

    pub fn total(&self) -> u64 {
        self.bytes.iter().fold(0u64, |a, b| a.saturating_add(*b))
    }
}

/// End-of-data accounting of a striped receiver: one [`EndOfData`] per
/// receiving stripe, each with its own EOF and EODC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripedEnd {
    stripes: Vec<EndOfData>,
}

impl StripedEnd {
    pub fn new(count: usize) -> Self {
        Self { stripes: vec![EndOfData::default(); count.clamp(1, MAX_STRIPES)] }
    }

    /// Accounts for a header received on a connection of `stripe`.
    pub fn on_header(&mut self, stripe: usize, h: &BlockHeader) -> Result<(), ModeEError> {
        match self.stripes.get_mut(stripe) {
            Some(end) => end.on_header(h),
            // A connection on a stripe that does not exist is a driver
            // bug; counted as a stray EOF so it cannot pass unnoticed.
            None => Err(ModeEError::DuplicateEof { first: stripe as u64, second: h.offset }),
        }
    }

    pub fn stripe(&self, stripe: usize) -> Option<&EndOfData> {
        self.stripes.get(stripe)
    }

    /// Every stripe has its EOF and all the EODs it announced.
    pub fn is_complete(&self) -> bool {
        self.stripes.iter().all(EndOfData::is_complete)
    }

    /// Stripes not yet complete, for an error message.
    pub fn incomplete(&self) -> Vec<usize> {
        self.stripes.iter().enumerate().filter(|(_, e)| !e.is_complete()).map(|(i, _)| i).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::ReplyParser;
    use proptest::prelude::*;

    fn covered(layout: StripeLayout, count: usize, len: u64) -> Vec<Vec<Range<u64>>> {
        (0..count).map(|i| layout.ranges(i, count, len)).collect()
    }

    #[test]
    fn blocked_deals_blocks_round_robin() {
        let l = StripeLayout::Blocked { block_size: 10 };
        assert_eq!(covered(l, 2, 35), vec![vec![0..10, 20..30], vec![10..20, 30..35]]);
        assert_eq!(l.stripe_of(25, 35, 2), 0);
        assert_eq!(l.split(5..27, 35, 2), vec![(0, 5..10), (1, 10..20), (0, 20..27)]);
        assert_eq!(covered(l, 3, 0), vec![Vec::<Range<u64>>::new(); 3]);
    }

    #[test]
    fn partitioned_gives_each_stripe_one_part() {
        let l = StripeLayout::Partitioned;
        // ceil(10/3) = 4: 0-4, 4-8, 8-10 (the Globus data nodes' split).
        assert_eq!(covered(l, 3, 10), vec![vec![0..4], vec![4..8], vec![8..10]]);
        // Fewer bytes than stripes: the last stripes carry nothing.
        assert_eq!(covered(l, 3, 2), vec![vec![0..1], vec![1..2], vec![]]);
        assert_eq!(l.split(0..10, 10, 3), vec![(0, 0..4), (1, 4..8), (2, 8..10)]);
    }

    #[test]
    fn missing_leaves_out_what_a_restart_holds() {
        let l = StripeLayout::Blocked { block_size: 10 };
        let done = RangeSet::parse("0-15,22-25").unwrap();
        assert_eq!(l.missing(0, 2, 40, &done), vec![20..22, 25..30]);
        assert_eq!(l.missing(1, 2, 40, &done), vec![15..20, 30..40]);
    }

    #[test]
    fn opts_items_make_a_layout() {
        let mut o = StripeOptions::default();
        assert_eq!(o.layout(), StripeLayout::Blocked { block_size: DEFAULT_STRIPE_BLOCK });
        assert_eq!(o.apply("StripeLayout", "Blocked"), Ok(true));
        assert_eq!(o.apply("BlockSize", "262144"), Ok(true));
        assert_eq!(o.layout(), StripeLayout::Blocked { block_size: 262144 });
        assert_eq!(o.apply("stripelayout", "PARTITIONED"), Ok(true));
        assert_eq!(o.layout(), StripeLayout::Partitioned);
        assert_eq!(o.apply("Parallelism", "4,4,4"), Ok(false));
        assert!(o.apply("StripeLayout", "Cyclic").is_err());
        assert_eq!(o.apply("BlockSize", "12"), Err(StripeError::BadBlockSize));
        assert_eq!(o.apply("BlockSize", "-1"), Err(StripeError::BadBlockSize));
        assert_eq!(
            StripeLayout::Blocked { block_size: 1048576 }.to_string(),
            "StripeLayout=Blocked;BlockSize=1048576;"
        );
    }

    #[test]
    fn spas_reply_is_the_globus_text_and_parses_back() {
        let addrs: Vec<SocketAddrV4> = vec!["127.0.0.1:40000".parse().unwrap(), "127.0.0.1:40001".parse().unwrap()];
        let r = spas_reply(&addrs);
        assert_eq!(
            r.to_string(),
            "229-Entering Striped Passive Mode.\r\n 127,0,0,1,156,64\r\n 127,0,0,1,156,65\r\n229 End\r\n"
        );
        let mut p = ReplyParser::default();
        p.push(r.to_string().as_bytes());
        assert_eq!(parse_spas_reply(&p.next_reply().unwrap().unwrap()), Ok(addrs.clone()));
        assert_eq!(spor_command(&addrs), "SPOR 127,0,0,1,156,64 127,0,0,1,156,65");
        let single = Reply::new(ReplyCode::STRIPED_PASSIVE, "Entering Striped Passive Mode (127,0,0,1,156,64)");
        assert_eq!(parse_spas_reply(&single), Ok(vec![addrs[0]]));
        assert!(parse_spas_reply(&Reply::new(ReplyCode::PASSIVE, "x")).is_err());
        let eprt_form = Reply::multiline(ReplyCode::STRIPED_PASSIVE, "x", [" |1|127.0.0.1|40000|".into()], "End");
        assert_eq!(parse_spas_reply(&eprt_form), Ok(vec![addrs[0]]));
    }

    #[test]
    fn perf_markers_per_stripe() {
        let m = perf_markers(17952239168 * 100, &[10, 20]);
        assert_eq!(m.len(), 2);
        let mut progress = StripeProgress::default();
        for r in &m {
            assert!(progress.on_marker(&PerfMarker::parse(r).unwrap()));
        }
        assert_eq!(progress.stripes(), &[10, 20]);
        assert_eq!(progress.total(), 30);
        assert!(m[1].to_string().contains(" Stripe Index: 1\r\n"));
        assert!(m[1].to_string().contains(" Total Stripe Count: 2\r\n"));
        let bad = PerfMarker { stripe_index: 2, stripe_count: 2, ..PerfMarker::new(0, 1) };
        assert!(!progress.on_marker(&bad));
    }

    #[test]
    fn each_stripe_counts_its_own_eods() {
        // EOF carries EOD too (GFD.20: EOF|EOD on one connection).
        let mut end = StripedEnd::new(2);
        end.on_header(0, &BlockHeader::eof(2)).unwrap();
        end.on_header(1, &BlockHeader::eod()).unwrap();
        assert!(!end.is_complete());
        assert_eq!(end.incomplete(), vec![0, 1]);
        end.on_header(0, &BlockHeader::eod()).unwrap();
        assert_eq!(end.incomplete(), vec![1]);
        end.on_header(1, &BlockHeader::eof(2)).unwrap();
        assert!(end.is_complete());
        assert!(end.on_header(0, &BlockHeader::eod()).is_err());
        assert!(end.on_header(5, &BlockHeader::eod()).is_err());
    }

    #[test]
    fn a_front_end_session_keeps_spor_addresses_and_the_layout() {
        use crate::session::{Access, Action, AnonymousAccess, Grant, PassiveKind, Session, SessionConfig};
        use crate::Command;
        let cfg = SessionConfig { anonymous: AnonymousAccess::Write, striped: true, ..SessionConfig::default() };
        let mut s = Session::new(cfg, "127.0.0.1:1".parse().unwrap());
        let line = |s: &mut Session, l: &str| match s.handle(Command::parse(l.as_bytes())) {
            Action::Reply(r) => r,
            Action::Login(_) => {
                let _ = s.login_result(Some(Grant { user: "anonymous".into(), access: Access::ReadWrite }));
                Reply::new(ReplyCode::LOGGED_IN, "in")
            }
            other => panic!("{l}: {other:?}"),
        };
        line(&mut s, "USER anonymous");
        line(&mut s, "PASS x");
        assert_eq!(
            line(&mut s, "OPTS RETR StripeLayout=Blocked;BlockSize=65536;Parallelism=2,2,2;").code,
            ReplyCode::OK
        );
        assert_eq!(s.stripe_layout(), StripeLayout::Blocked { block_size: 65536 });
        assert_eq!(line(&mut s, "OPTS RETR StripeLayout=Diagonal;").code.get(), 501);
        let r = line(&mut s, "SPOR 127,0,0,1,156,64 127,0,0,1,156,65");
        assert_eq!(r.code, ReplyCode::OK, "{r:?}");
        assert_eq!(s.striped_port().map(<[_]>::len), Some(2));
        // A bounce to another host is refused, whichever address it is.
        assert_eq!(line(&mut s, "SPOR 127,0,0,1,156,64 10,0,0,1,156,65").code.get(), 501);
        assert_eq!(s.striped_port(), None);
        line(&mut s, "SPOR 127,0,0,1,156,64 127,0,0,1,156,65");
        line(&mut s, "PORT 127,0,0,1,156,66");
        assert_eq!(s.striped_port(), None, "PORT replaces the striped setup");
        // SPAS: the driver's node listeners become one 229 line each.
        assert_eq!(s.handle(Command::parse(b"SPAS")), Action::Passive(PassiveKind::Spas));
        let r =
            s.striped_passive_result(Ok(vec!["127.0.0.1:40000".parse().unwrap(), "127.0.0.1:40001".parse().unwrap()]));
        assert_eq!(parse_spas_reply(&r).map(|a| a.len()), Ok(2));
    }

    proptest! {
        #[test]
        fn every_byte_belongs_to_exactly_one_stripe(
            len in 0u64..5000, count in 1usize..6, block in 1u64..700, partitioned in any::<bool>()
        ) {
            let l = if partitioned { StripeLayout::Partitioned } else { StripeLayout::Blocked { block_size: block } };
            let mut all = RangeSet::new();
            let mut total = 0;
            for i in 0..count {
                for r in l.ranges(i, count, len) {
                    prop_assert!(r.start < r.end && r.end <= len);
                    prop_assert!(!all.overlaps(&r));
                    prop_assert_eq!(l.stripe_of(r.start, len, count), i);
                    prop_assert_eq!(l.stripe_of(r.end - 1, len, count), i);
                    total += r.end - r.start;
                    all.insert(r);
                }
            }
            prop_assert_eq!(total, len);
            let pieces = l.split(0..len, len, count);
            prop_assert_eq!(pieces.iter().map(|(_, r)| r.end - r.start).sum::<u64>(), len);
            for (s, r) in pieces {
                prop_assert!(l.ranges(s, count, len).iter().any(|m| m.start <= r.start && r.end <= m.end));
            }
        }
    }
}
