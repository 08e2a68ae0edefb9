//! Per-address lockout after repeated failed logins.
//!
//! Each connection already gets `max_login_attempts` tries, each failure
//! answered after `login_failure_delay_ms`; but a guesser simply opens
//! new connections (up to `max_sessions_per_ip` at once). This table
//! counts failed logins per client address over a window of
//! `login_lockout_secs`; once `login_lockout_failures` have failed in that
//! window, the address is refused — new connections get `421` instead of
//! the greeting, and logins already under way are refused without the
//! password being checked — until `login_lockout_secs` after its last
//! failure. A successful login does not clear the count (a guesser that
//! owns one account must not be able to reset it).
//!
//! An attempt counts from the moment its check begins ([`LoginLockout::begin`]),
//! not from when it fails: a password check takes a while (argon2id), and
//! sixty connections that all ask at once must not all be checked because
//! none has failed yet. Checks under way count against the threshold; a
//! success gives its place back.
//!
//! IPv6 clients are counted per /64, the block one host usually owns.
//!
//! The table is bounded: at most [`MAX_TRACKED`] addresses, expired
//! entries pruned first, then the oldest, so a spread of source addresses
//! cannot grow it without limit.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most addresses tracked at once.
pub(crate) const MAX_TRACKED: usize = 16_384;

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    /// Checks under way.
    pending: u32,
    last: Instant,
}

/// A login check under way; [`failed`](Self::failed) counts it as a
/// failure, dropping it otherwise gives its place back.
#[derive(Debug)]
pub(crate) struct Attempt<'a> {
    lockout: &'a LoginLockout,
    ip: Option<IpAddr>,
}

impl Attempt<'_> {
    pub fn failed(mut self) {
        if let Some(ip) = self.ip.take() {
            self.lockout.settle(ip, true, Instant::now());
        }
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if let Some(ip) = self.ip.take() {
            self.lockout.settle(ip, false, Instant::now());
        }
    }
}

#[derive(Debug)]
pub(crate) struct LoginLockout {
    /// Failures that lock an address out; 0 turns the lockout off.
    threshold: u32,
    window: Duration,
    entries: Mutex<HashMap<IpAddr, Entry>>,
}

impl LoginLockout {
    pub fn new(threshold: u32, window: Duration) -> Self {
        Self { threshold, window, entries: Mutex::new(HashMap::new()) }
    }

    /// Records a failed login from `ip`; returns whether it is now locked.
    #[cfg(test)]
    pub fn failed(&self, ip: IpAddr) -> bool {
        self.failed_at(key(ip), Instant::now())
    }

    /// Starts a login check from `ip`, or says how long it is locked out:
    /// failures and checks under way together may not pass the threshold.
    pub fn begin(&self, ip: IpAddr) -> Result<Attempt<'_>, Duration> {
        self.begin_at(key(ip), Instant::now())
    }

    fn begin_at(&self, ip: IpAddr, now: Instant) -> Result<Attempt<'_>, Duration> {
        if self.threshold == 0 {
            return Ok(Attempt { lockout: self, ip: None });
        }
        if let Some(left) = self.locked_at(ip, now) {
            return Err(left);
        }
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        self.make_room(&mut map, ip, now);
        let e = map.entry(ip).or_insert(Entry { failures: 0, pending: 0, last: now });
        if now.duration_since(e.last) >= self.window && e.pending == 0 {
            *e = Entry { failures: 0, pending: 0, last: now };
        }
        if e.failures.saturating_add(e.pending) >= self.threshold {
            // Checks under way may still fail: wait for their verdict.
            return Err(self.window);
        }
        e.pending += 1;
        Ok(Attempt { lockout: self, ip: Some(ip) })
    }

    fn settle(&self, ip: IpAddr, failed: bool, now: Instant) {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = map.get_mut(&ip) {
            e.pending = e.pending.saturating_sub(1);
            if failed {
                if now.duration_since(e.last) >= self.window {
                    e.failures = 0;
                }
                e.failures = e.failures.saturating_add(1);
                e.last = now;
            }
        }
    }

    /// Keeps the table bounded before `ip` is added.
    fn make_room(&self, map: &mut HashMap<IpAddr, Entry>, ip: IpAddr, now: Instant) {
        if map.len() >= MAX_TRACKED && !map.contains_key(&ip) {
            let window = self.window;
            map.retain(|_, e| e.pending > 0 || now.duration_since(e.last) < window);
            if map.len() >= MAX_TRACKED {
                if let Some(oldest) =
                    map.iter().filter(|(_, e)| e.pending == 0).min_by_key(|(_, e)| e.last).map(|(k, _)| *k)
                {
                    map.remove(&oldest);
                }
            }
        }
    }

    /// How much longer `ip` is locked out, if it is.
    pub fn locked(&self, ip: IpAddr) -> Option<Duration> {
        self.locked_at(key(ip), Instant::now())
    }

    #[cfg(test)]
    fn failed_at(&self, ip: IpAddr, now: Instant) -> bool {
        if self.threshold == 0 {
            return false;
        }
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        self.make_room(&mut map, ip, now);
        let e = map.entry(ip).or_insert(Entry { failures: 0, pending: 0, last: now });
        if now.duration_since(e.last) >= self.window {
            // The previous burst is over: count afresh.
            *e = Entry { failures: 0, pending: e.pending, last: now };
        }
        e.failures = e.failures.saturating_add(1);
        e.last = now;
        e.failures >= self.threshold
    }

    fn locked_at(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        if self.threshold == 0 {
            return None;
        }
        let map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let e = map.get(&ip)?;
        let until = e.last + self.window;
        (e.failures >= self.threshold && until > now).then(|| until - now)
    }
}

/// What failures are counted against: the IPv4 address, or the IPv6 /64
/// — one host on IPv6 usually owns a whole /64 (SLAAC privacy addresses,
/// a routed prefix), so counting single addresses would let it guess on
/// for ever by changing its address.
fn key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        v4 => v4,
    }
}

/// The reply text for a refused address.
pub(crate) fn refusal(left: Duration) -> String {
    format!(
        "Too many failed logins from your address; try again in {} s.",
        left.as_secs() + u64::from(left.subsec_nanos() > 0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_after_the_threshold_and_unlocks_after_the_window() {
        let l = LoginLockout::new(3, Duration::from_secs(60));
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        let t0 = Instant::now();
        assert!(!l.failed_at(ip, t0));
        assert!(!l.failed_at(ip, t0 + Duration::from_secs(1)));
        assert_eq!(l.locked_at(ip, t0 + Duration::from_secs(1)), None);
        assert!(l.failed_at(ip, t0 + Duration::from_secs(2)));
        assert_eq!(l.locked_at(ip, t0 + Duration::from_secs(2)), Some(Duration::from_secs(60)));
        assert_eq!(l.locked_at(other, t0 + Duration::from_secs(2)), None, "only that address");
        assert_eq!(l.locked_at(ip, t0 + Duration::from_secs(62)), None, "unlocked after the window");
        // A failure long after the last starts a new count.
        assert!(!l.failed_at(ip, t0 + Duration::from_secs(200)));
        assert_eq!(refusal(Duration::from_millis(1500)), "Too many failed logins from your address; try again in 2 s.");
    }

    #[test]
    fn attempts_count_from_when_they_start() {
        let l = LoginLockout::new(3, Duration::from_secs(60));
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let t0 = Instant::now();
        // Three checks at once fill the threshold; a fourth is refused
        // before any has failed.
        let a: Vec<_> = (0..3).map(|_| l.begin_at(ip, t0).unwrap()).collect();
        assert!(l.begin_at(ip, t0).is_err());
        // A success gives its place back; failures stay counted.
        let mut a = a.into_iter();
        drop(a.next());
        assert!(l.begin_at(ip, t0).is_ok());
        a.for_each(Attempt::failed);
        let b = l.begin_at(ip, t0).unwrap();
        b.failed();
        assert!(l.locked_at(ip, t0).is_some(), "three failures lock the address");
    }

    #[test]
    fn off_when_the_threshold_is_zero() {
        let l = LoginLockout::new(0, Duration::from_secs(60));
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..100 {
            assert!(!l.failed(ip));
        }
        assert_eq!(l.locked(ip), None);
    }

    #[test]
    fn the_table_is_bounded() {
        let l = LoginLockout::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        for i in 0..(MAX_TRACKED as u32 + 100) {
            l.failed_at(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i)), t0);
        }
        assert!(l.entries.lock().unwrap().len() <= MAX_TRACKED);
    }

    #[test]
    fn ipv6_addresses_count_per_64() {
        let l = LoginLockout::new(2, Duration::from_secs(60));
        l.failed("2001:db8:1:2::a".parse().unwrap());
        assert!(l.failed("2001:db8:1:2:ffff::b".parse().unwrap()), "same /64");
        assert!(l.locked("2001:db8:1:2::c".parse().unwrap()).is_some());
        assert_eq!(l.locked("2001:db8:1:3::a".parse().unwrap()), None, "another /64");
    }

    #[test]
    fn ipv4_mapped_addresses_count_as_ipv4() {
        let l = LoginLockout::new(2, Duration::from_secs(60));
        l.failed("::ffff:192.0.2.9".parse().unwrap());
        assert!(l.failed("192.0.2.9".parse().unwrap()));
    }
}
