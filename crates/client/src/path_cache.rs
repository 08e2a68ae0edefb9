//! The remembered path rate: what the last copies to a host delivered, so
//! the next one's UDT senders start at the path's rate instead of ramping
//! up from a few packets per round trip (issue 17: "starts at the rate the
//! path probe measured instead of ramping from nothing").
//!
//! The idea is the kernel's `tcp_metrics` cache, which remembers a
//! destination's RTT and `ssthresh` so the next connection to it does not
//! start blind. Here the client remembers, per remote host (the host of
//! the URL, lower-cased), the *delivered* rate of its recent transfers and
//! what `ferry probe` measured, in a small JSON file under the user's cache
//! directory (`docs/udt.md`, "Starting at a measured rate"):
//!
//! * **What counts.** A transfer is a sample only when it ran long enough
//!   that its start-up does not dominate: at least [`MIN_SAMPLE_BYTES`]
//!   and [`MIN_SAMPLE_SECS`], and at least ten round trips. A single
//!   short file's rate would understate the path. Of one run's samples to
//!   a host, the best is kept (the run's sustained best).
//! * **What rate.** A transfer's steady state, not its average
//!   ([`steady_rate`]: from the moment its one-second rate first reached
//!   0.8 of the late median to its end), so the next copy starts at what
//!   the path carries once the start-up is over; the average counted the
//!   set-up and the start-up, and a copy started at it ramped again.
//! * **What is announced.** The best of the last [`SAMPLES_PER_HOST`]
//!   runs' samples, each decayed by its age (as it is for [`FRESH`], then
//!   halved every [`HALF_LIFE`]); samples older than [`TTL`] are dropped.
//! * **When the path got worse.** The announced rate is only a start: the
//!   ferry controller still measures delivery rate and RTT and backs off
//!   on loss and queueing within a few round trips, so a start above the
//!   path costs a burst, not the transfer. The worse path's lower samples
//!   replace the old ones within [`SAMPLES_PER_HOST`] runs, and the decay
//!   and expiry forget an old best within a day.
//! * **When the path is another one.** A sample is used only while the
//!   session's control-channel RTT is within [`RTT_MATCH`] of the RTT it
//!   was taken at: a laptop that moved networks, a host name that now
//!   resolves elsewhere or, on an emulated testbed, paths that share an
//!   address are different paths, and a rate from one must not start the
//!   other (a 100 Mbit/s sample at 20 ms would overrun a 10 Mbit/s path at
//!   260 ms tenfold).
//!
//! The file is bounded ([`MAX_HOSTS`] hosts, the least recently updated
//! dropped), written atomically (a temporary file renamed over it, after
//! re-reading it so concurrent copies to other hosts are kept), and a
//! corrupt or unreadable file is treated as empty. `ferry cp
//! --no-path-cache` or `FERRY_PATH_CACHE=off` turn it off;
//! `FERRY_PATH_CACHE=FILE` puts it elsewhere (tests do).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Samples older than this are forgotten.
pub const TTL: Duration = Duration::from_secs(24 * 3600);
/// How far the RTT now may be from a sample's, as a factor either way (or
/// within a millisecond), for the sample to describe the same path (tighter than the 2x between
/// the nearest of the comparative evaluation's paths, 20 and 40 ms).
pub const RTT_MATCH: f64 = 1.5;
/// A sample younger than this is taken as it is...
pub const FRESH: Duration = Duration::from_secs(3600);
/// ... then its weight halves every this long.
pub const HALF_LIFE: Duration = Duration::from_secs(12 * 3600);
/// Runs remembered per host.
pub const SAMPLES_PER_HOST: usize = 4;
/// Hosts remembered.
pub const MAX_HOSTS: usize = 256;
/// A transfer shorter than this (bytes) says little about the path.
pub const MIN_SAMPLE_BYTES: u64 = 4 << 20;
/// ... or than this (seconds).
pub const MIN_SAMPLE_SECS: f64 = 1.0;
/// The file name under `$XDG_CACHE_HOME/ferry` or `~/.cache/ferry`.
pub const FILE_NAME: &str = "path-rates.json";

/// One measurement of a path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Delivered (or measured) rate, bytes/s.
    pub rate: f64,
    /// The round trip when it was measured, milliseconds (0 if unknown).
    pub rtt_ms: f64,
    /// Payload bytes and seconds it was measured over.
    pub bytes: u64,
    pub seconds: f64,
    /// Unix seconds when it was recorded.
    pub at: u64,
    /// What measured it: `udt transfer`, `tcp transfer`, `probe`...
    pub how: String,
}

impl Sample {
    /// A transfer's sample, or `None` if it was too short to speak for
    /// the path (see the module's "What counts").
    pub fn of_transfer(bytes: u64, seconds: f64, rtt: Duration, how: &str) -> Option<Self> {
        let long = bytes >= MIN_SAMPLE_BYTES
            && seconds >= MIN_SAMPLE_SECS
            && seconds >= 10.0 * rtt.as_secs_f64()
            && seconds.is_finite();
        long.then(|| Sample {
            rate: bytes as f64 / seconds,
            rtt_ms: rtt.as_secs_f64() * 1e3,
            bytes,
            seconds,
            at: unix_now(),
            how: how.to_string(),
        })
    }

    /// Like [`of_transfer`](Self::of_transfer), but the rate is the
    /// transfer's steady state ([`steady_rate`] of `trace`) rather than its
    /// average, when the trace shows one: the average counts the
    /// controller's start-up, so a copy started at it starts below the
    /// path's rate again (session 6: three QUIC copies in a row, each
    /// remembering about 0.78 of the link). `bytes` and `seconds` stay
    /// the whole transfer's.
    pub fn of_transfer_traced(
        bytes: u64,
        seconds: f64,
        rtt: Duration,
        how: &str,
        trace: &[(f64, u64)],
    ) -> Option<Self> {
        let mut s = Self::of_transfer(bytes, seconds, rtt, how)?;
        if let Some(r) = steady_rate(trace, rtt) {
            if r > s.rate {
                s.rate = r;
                s.how = format!("{how}, steady state");
            }
        }
        Some(s)
    }

    /// A measurement taken now (`ferry probe`'s), whatever its length.
    pub fn measured(rate: f64, rtt: Duration, bytes: u64, seconds: f64, how: &str) -> Self {
        Sample { rate, rtt_ms: rtt.as_secs_f64() * 1e3, bytes, seconds, at: unix_now(), how: how.to_string() }
    }

    fn valid(&self) -> bool {
        self.rate.is_finite() && self.rate >= 1.0
    }

    /// Whether it was taken on a path with about the round-trip time `rtt`
    /// (zero: unknown, assumed the same).
    fn same_path(&self, rtt: Duration) -> bool {
        let now_ms = rtt.as_secs_f64() * 1e3;
        if now_ms <= 0.0 || self.rtt_ms.is_nan() || self.rtt_ms <= 0.0 {
            return true;
        }
        // Within a millisecond is the same path whatever the ratio: on a
        // LAN or loopback the RTT is tens of microseconds and jitters by
        // more than the factor.
        if (now_ms - self.rtt_ms).abs() <= 1.0 {
            return true;
        }
        let ratio = now_ms / self.rtt_ms;
        (1.0 / RTT_MATCH..=RTT_MATCH).contains(&ratio)
    }

    /// Its rate weighed by its age at `now`; `None` once expired.
    fn decayed(&self, now: u64) -> Option<f64> {
        let age = now.saturating_sub(self.at);
        let halvings = age.saturating_sub(FRESH.as_secs()) as f64 / HALF_LIFE.as_secs_f64();
        (self.valid() && age < TTL.as_secs()).then(|| self.rate * 0.5f64.powf(halvings))
    }
}

/// What the cache says about a host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Remembered {
    /// The rate to start at, bytes/s (decayed).
    pub rate: f64,
    /// The sample it came from.
    pub sample: Sample,
    /// How old that sample is, seconds.
    pub age_secs: u64,
}

impl Remembered {
    /// Where the rate came from, for the log and `--json`.
    pub fn describe(&self) -> String {
        format!(
            "path cache: {} {:.1} MB/s over {:.1} MB in {:.1} s, {} ago{}",
            self.sample.how,
            self.sample.rate / 1e6,
            self.sample.bytes as f64 / 1e6,
            self.sample.seconds,
            human_age(self.age_secs),
            if self.rate < self.sample.rate { ", decayed by age" } else { "" }
        )
    }
}

fn human_age(s: u64) -> String {
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ => format!("{:.1} h", s as f64 / 3600.0),
    }
}

/// The file's contents.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Entries {
    /// Newest first, per host.
    pub hosts: BTreeMap<String, Vec<Sample>>,
}

impl Entries {
    /// Parses a cache file; anything unreadable is an empty cache.
    pub fn parse(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_default()
    }

    /// The rate to start at for `host` at `now` (unix seconds), from the
    /// samples taken at about the RTT measured now (`rtt`; zero when it is
    /// unknown, and then every sample counts).
    pub fn lookup(&self, host: &str, now: u64, rtt: Duration) -> Option<Remembered> {
        self.hosts
            .get(&key(host))?
            .iter()
            .filter(|s| s.same_path(rtt))
            .filter_map(|s| Some((s.decayed(now)?, s)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(rate, s)| Remembered { rate, sample: s.clone(), age_secs: now.saturating_sub(s.at) })
    }

    /// Adds `sample` for `host` (newest first), drops what expired at
    /// `now`, and keeps the cache within its bounds.
    pub fn record(&mut self, host: &str, sample: Sample, now: u64) {
        if !sample.valid() {
            return;
        }
        let list = self.hosts.entry(key(host)).or_default();
        list.insert(0, sample);
        list.truncate(SAMPLES_PER_HOST);
        self.prune(now);
    }

    fn prune(&mut self, now: u64) {
        for list in self.hosts.values_mut() {
            list.retain(|s| s.decayed(now).is_some());
        }
        self.hosts.retain(|_, l| !l.is_empty());
        while self.hosts.len() > MAX_HOSTS {
            let oldest = self
                .hosts
                .iter()
                .min_by_key(|(_, l)| l.iter().map(|s| s.at).max().unwrap_or(0))
                .map(|(h, _)| h.clone());
            match oldest {
                Some(h) => self.hosts.remove(&h),
                None => break,
            };
        }
    }
}

fn key(host: &str) -> String {
    host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A rate this copy started a host's UDT senders at, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Announced {
    pub server: String,
    /// bytes/s
    pub rate: f64,
    pub from: String,
}

/// One copy's view of the cache file: read once, samples gathered during
/// the copy, written back by [`save`](Self::save).
#[derive(Debug)]
pub struct PathCache {
    file: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    loaded: Option<Entries>,
    /// This run's best sample per host.
    best: BTreeMap<String, Sample>,
    announced: Vec<Announced>,
}

impl PathCache {
    /// The cache in `file`.
    pub fn at(file: impl Into<PathBuf>) -> Self {
        Self { file: file.into(), state: Mutex::default() }
    }

    /// Where the cache lives: `$FERRY_PATH_CACHE` (a file; `off` or empty
    /// turns it off), else `$XDG_CACHE_HOME/ferry/path-rates.json`, else
    /// `~/.cache/ferry/path-rates.json`; `None` when off or homeless.
    pub fn default_file() -> Option<PathBuf> {
        if let Some(v) = std::env::var_os("FERRY_PATH_CACHE") {
            return (!v.is_empty() && v != "off").then(|| PathBuf::from(v));
        }
        let dir = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".cache")))?;
        Some(dir.join("ferry").join(FILE_NAME))
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> Entries {
        std::fs::read_to_string(&self.file).map(|t| Entries::parse(&t)).unwrap_or_default()
    }

    /// The remembered rate for `host` on a path whose RTT is now `rtt`
    /// (zero if unknown), if any.
    pub fn lookup(&self, host: &str, rtt: Duration) -> Option<Remembered> {
        let mut st = self.lock();
        if st.loaded.is_none() {
            st.loaded = Some(self.read());
        }
        st.loaded.as_ref().and_then(|e| e.lookup(host, unix_now(), rtt))
    }

    /// Notes a sample of `host`'s path; this run keeps its best.
    pub fn observe(&self, host: &str, sample: Sample) {
        if !sample.valid() {
            return;
        }
        let mut st = self.lock();
        match st.best.get(&key(host)) {
            Some(b) if b.rate >= sample.rate => {}
            _ => {
                st.best.insert(key(host), sample);
            }
        }
    }

    /// Notes the rate a session started at, for the log and `--json`.
    pub fn note_announced(&self, a: Announced) {
        self.lock().announced.push(a);
    }

    pub fn announced(&self) -> Vec<Announced> {
        self.lock().announced.clone()
    }

    /// This run's samples, per host.
    pub fn recorded(&self) -> BTreeMap<String, Sample> {
        self.lock().best.clone()
    }

    /// Writes this run's samples into the file (re-read first, so other
    /// copies' entries survive), atomically. Nothing to write, nothing
    /// written.
    pub fn save(&self) -> std::io::Result<()> {
        let best = self.recorded();
        if best.is_empty() {
            return Ok(());
        }
        let mut entries = self.read();
        let now = unix_now();
        for (host, s) in best {
            entries.record(&host, s, now);
        }
        if let Some(dir) = self.file.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = self.file.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(&entries).map_err(std::io::Error::other)?)?;
        std::fs::rename(&tmp, &self.file).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}

/// The rate a transfer moved at once its start-up was over, bytes/s, from
/// `trace`: (seconds since the transfer began, bytes moved by then),
/// sampled every ~100 ms, in order.
///
/// The rate over each window of [`STEADY_WINDOW`] (or four round trips,
/// if longer) is taken at every sample; the reference is the median of
/// the windows ending in the trace's second half; the start-up is over
/// at the first window end whose rate reaches [`STEADY_REACHED`] of the
/// reference; the steady rate is the average from there to the end.
///
/// Why not the best one-second window: a receiver counts bytes as they
/// come out in order, so the second after a loss repaired delivers the
/// data held behind it at once and its window reads above the link. An
/// average over the whole remainder of the copy (at least
/// [`STEADY_MIN_SECS`], and half the copy) counts each such burst
/// once, against the time it took, and so stays at or below what the
/// path carried — the guard against remembering a rate above the link.
/// `None` when the trace is too short to tell.
pub fn steady_rate(trace: &[(f64, u64)], rtt: Duration) -> Option<f64> {
    let (t_end, b_end) = *trace.last()?;
    let window = STEADY_WINDOW.max(4.0 * rtt.as_secs_f64());
    if t_end < 2.0 * STEADY_MIN_SECS.max(window) {
        return None;
    }
    // (window end, its rate) for every sample a whole window in.
    let mut windows = Vec::new();
    let mut j = 0;
    for &(t, b) in trace {
        while j + 1 < trace.len() && t - trace[j + 1].0 >= window {
            j += 1;
        }
        let (tj, bj) = trace[j];
        if t - tj >= window && b >= bj {
            windows.push((t, (b - bj) as f64 / (t - tj)));
        }
    }
    let mut late: Vec<f64> = windows.iter().filter(|(t, _)| *t >= t_end / 2.0).map(|(_, r)| *r).collect();
    if late.is_empty() {
        return None;
    }
    late.sort_by(f64::total_cmp);
    let reference = late[late.len() / 2];
    let (t_s, _) = windows.iter().find(|(_, r)| *r >= STEADY_REACHED * reference)?;
    // the bytes moved by t_s: the sample taken then
    let b_s = trace.iter().find(|(t, _)| t >= t_s).map(|(_, b)| *b)?;
    let tail = t_end - t_s;
    if tail < STEADY_MIN_SECS.max(t_end / 2.0) || b_end <= b_s {
        return None;
    }
    Some((b_end - b_s) as f64 / tail)
}

/// The window [`steady_rate`] measures the rate over, seconds.
pub const STEADY_WINDOW: f64 = 1.0;
/// The share of the late rate that ends the start-up.
pub const STEADY_REACHED: f64 = 0.8;
/// The shortest steady state that speaks for the path, seconds.
pub const STEADY_MIN_SECS: f64 = 2.0;

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rate: f64, at: u64) -> Sample {
        Sample { rate, rtt_ms: 160.0, bytes: 256 << 20, seconds: 10.0, at, how: "udt transfer".into() }
    }

    #[test]
    fn short_transfers_are_not_samples() {
        let rtt = Duration::from_millis(160);
        assert!(Sample::of_transfer(1 << 20, 5.0, rtt, "udt transfer").is_none(), "too few bytes");
        assert!(Sample::of_transfer(64 << 20, 0.5, Duration::ZERO, "udt transfer").is_none(), "too short");
        assert!(Sample::of_transfer(64 << 20, 1.2, rtt, "udt transfer").is_none(), "under ten round trips");
        let s = Sample::of_transfer(64 << 20, 4.0, rtt, "udt transfer").unwrap();
        assert_eq!(s.rate, (64 << 20) as f64 / 4.0);
    }

    /// A trace every 100 ms: `rate(t)` bytes/s.
    fn trace(secs: f64, rate: impl Fn(f64) -> f64) -> Vec<(f64, u64)> {
        let mut v = vec![(0.0, 0u64)];
        let mut b = 0.0;
        let n = (secs * 10.0).round() as usize;
        for i in 1..=n {
            let t = i as f64 / 10.0;
            b += rate(t) * 0.1;
            v.push((t, b as u64));
        }
        v
    }

    #[test]
    fn the_steady_rate_leaves_the_start_up_out() {
        let rtt = Duration::from_millis(160);
        // 1.2 s of nothing (set-up), 1.5 s ramping, then 18.75 MB/s: the
        // copy's average is well under the link, the steady rate at it.
        let link = 18.75e6;
        let tr = trace(9.0, |t| {
            if t < 1.2 {
                0.0
            } else if t < 2.7 {
                link * (t - 1.2) / 1.5
            } else {
                link
            }
        });
        let (t, b) = *tr.last().unwrap();
        let average = b as f64 / t;
        let steady = steady_rate(&tr, rtt).unwrap();
        assert!(average < 0.85 * link, "{average}");
        assert!(steady > 0.97 * link && steady <= 1.001 * link, "{steady}");
        let s = Sample::of_transfer_traced(b, t, rtt, "quic transfer", &tr).unwrap();
        assert_eq!(s.rate, steady);
        assert!(s.how.contains("steady"), "{}", s.how);
    }

    #[test]
    fn a_burst_after_a_repaired_loss_does_not_lift_the_steady_rate_above_the_link() {
        let rtt = Duration::from_millis(160);
        let link = 18.75e6;
        // In-order delivery: every 2 s, 200 ms of nothing and then the held
        // data at twice the link for 200 ms. What crossed the link is
        // `link` throughout.
        let tr = trace(10.0, |t| {
            let p = t % 2.0;
            if t < 1.0 || (1.0..1.2).contains(&p) {
                0.0
            } else if (1.2..1.4).contains(&p) {
                2.0 * link
            } else {
                link
            }
        });
        let steady = steady_rate(&tr, rtt).unwrap();
        assert!(steady <= 1.05 * link, "{steady}");
        assert!(steady >= 0.9 * link, "{steady}");
    }

    #[test]
    fn short_or_flat_traces_give_no_steady_rate() {
        let rtt = Duration::from_millis(160);
        assert!(steady_rate(&[], rtt).is_none());
        assert!(steady_rate(&trace(3.0, |_| 1e6), rtt).is_none(), "too short to tell");
        // Nothing moved at all: no rate to remember.
        assert!(steady_rate(&trace(10.0, |_| 0.0), rtt).is_none());
        // A steady copy from the start: the steady rate is its rate, and
        // the sample keeps the average (no higher).
        let tr = trace(10.0, |_| 5e6);
        let r = steady_rate(&tr, rtt).unwrap();
        assert!((r - 5e6).abs() < 0.02 * 5e6, "{r}");
        // A copy slower at the end than at the start is not lifted: the
        // steady rate is never above the late windows' median by much.
        let tr = trace(10.0, |t| if t < 5.0 { 10e6 } else { 5e6 });
        let r = steady_rate(&tr, rtt).unwrap();
        assert!(r <= 10e6, "{r}");
    }

    #[test]
    fn the_best_recent_sample_is_announced_and_decays_and_expires() {
        let now = 1_000_000;
        let mut e = Entries::default();
        e.record("Example.org", sample(10e6, now - 60), now);
        e.record("example.org", sample(12e6, now - 30), now);
        let r = e.lookup("EXAMPLE.ORG", now, Duration::ZERO).unwrap();
        assert!((r.rate - 12e6).abs() < 1e3, "{r:?}");
        assert!(e.lookup("other.org", now, Duration::ZERO).is_none());
        // twelve hours on, half; a day on, nothing
        assert!(!e
            .lookup("example.org", now + FRESH.as_secs() - 60, Duration::ZERO)
            .unwrap()
            .describe()
            .contains("decayed"));
        let r = e.lookup("example.org", now + FRESH.as_secs() + HALF_LIFE.as_secs() - 30, Duration::ZERO).unwrap();
        assert!((r.rate - 6e6).abs() < 1e3, "{r:?}");
        assert!(r.describe().contains("decayed"), "{}", r.describe());
        assert!(e.lookup("example.org", now + TTL.as_secs(), Duration::ZERO).is_none());
        // pruned from the file on the next write
        e.record("b.org", sample(1e6, now + TTL.as_secs()), now + TTL.as_secs());
        assert_eq!(e.hosts.keys().collect::<Vec<_>>(), ["b.org"]);
    }

    #[test]
    fn a_sample_starts_only_a_path_with_about_its_round_trip_time() {
        let now = 1_000_000;
        let mut e = Entries::default();
        // sample() is taken at 160 ms
        e.record("h", sample(12e6, now), now);
        let at = |e: &Entries, ms| e.lookup("h", now, Duration::from_millis(ms));
        assert!(at(&e, 160).is_some() && at(&e, 120).is_some() && at(&e, 220).is_some());
        assert!(at(&e, 40).is_none(), "a 40 ms path is another path");
        assert!(at(&e, 520).is_none(), "so is a 520 ms one");
        assert!(e.lookup("h", now, Duration::ZERO).is_some(), "an unknown RTT does not exclude it");
        // the sample of the path in use is chosen over a faster one of another
        e.record("h", sample(50e6, now), now);
        e.hosts.get_mut("h").unwrap()[0].rtt_ms = 20.0;
        assert_eq!(at(&e, 160).unwrap().sample.rate, 12e6);
        assert_eq!(at(&e, 21).unwrap().sample.rate, 50e6);
        // on loopback, microseconds apart is the same path
        e.hosts.get_mut("h").unwrap()[0].rtt_ms = 0.03;
        assert_eq!(e.lookup("h", now, Duration::from_micros(90)).unwrap().sample.rate, 50e6);
    }

    #[test]
    fn the_cache_is_bounded() {
        let now = 1_000_000;
        let mut e = Entries::default();
        for i in 0..10 {
            e.record("h", sample(1e6 + i as f64, now), now);
        }
        assert_eq!(e.hosts["h"].len(), SAMPLES_PER_HOST);
        assert_eq!(e.hosts["h"][0].rate, 1e6 + 9.0, "newest first");
        for i in 0..(MAX_HOSTS + 10) as u64 {
            e.record(&format!("host{i}"), sample(1e6, now - 1000 + i), now);
        }
        assert_eq!(e.hosts.len(), MAX_HOSTS);
        // the least recently updated went
        assert!(!e.hosts.contains_key("host0") && e.hosts.contains_key(&format!("host{}", MAX_HOSTS + 9)));
        // and garbage samples never enter
        e.record("nan", sample(f64::NAN, now), now);
        e.record("zero", sample(0.0, now), now);
        assert!(!e.hosts.contains_key("nan") && !e.hosts.contains_key("zero"));
    }

    #[test]
    fn the_file_round_trips_atomically_and_a_corrupt_one_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sub/path-rates.json");
        let c = PathCache::at(&file);
        assert!(c.lookup("a", Duration::ZERO).is_none());
        c.save().unwrap();
        assert!(!file.exists(), "nothing recorded, nothing written");
        c.observe("a", Sample { at: unix_now(), ..sample(5e6, 0) });
        c.observe("a", Sample { at: unix_now(), ..sample(9e6, 0) });
        c.observe("a", Sample { at: unix_now(), ..sample(7e6, 0) });
        c.save().unwrap();
        // another copy, another host, the same file: both kept
        let d = PathCache::at(&file);
        d.observe("b", Sample { at: unix_now(), ..sample(3e6, 0) });
        d.save().unwrap();
        let e = PathCache::at(&file);
        assert_eq!(e.lookup("a", Duration::ZERO).unwrap().sample.rate, 9e6, "the run's best");
        assert_eq!(e.lookup("b", Duration::ZERO).unwrap().sample.rate, 3e6);
        let names: Vec<_> =
            std::fs::read_dir(file.parent().unwrap()).unwrap().map(|d| d.unwrap().file_name()).collect();
        assert_eq!(names, ["path-rates.json"], "no temporary file left");
        for junk in ["", "{", "not json", "{\"hosts\": 5}", "{\"hosts\": {\"a\": [{\"rate\": \"x\"}]}}"] {
            std::fs::write(&file, junk).unwrap();
            let c = PathCache::at(&file);
            assert!(c.lookup("a", Duration::ZERO).is_none(), "{junk:?}");
            c.observe("a", Sample { at: unix_now(), ..sample(4e6, 0) });
            c.save().unwrap();
            assert_eq!(
                PathCache::at(&file).lookup("a", Duration::ZERO).unwrap().sample.rate,
                4e6,
                "{junk:?} is overwritten"
            );
        }
    }
}
