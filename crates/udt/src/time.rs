//! Time as the caller tells it: a monotonic count of nanoseconds from an
//! origin the caller picks (the driver's start, or zero in a simulation).
//! The protocol never reads a clock.

use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, nanoseconds since the caller's origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);

    pub fn from_nanos(ns: u64) -> Self {
        Time(ns)
    }

    pub fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since `earlier`, zero if `earlier` is later (clocks passed in
    /// by callers are trusted to be monotonic, but never panic on them).
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// Microseconds since `earlier`, the unit of UDT's wire fields.
    pub fn micros_since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0) / 1_000
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Time {
    type Output = Time;
    fn sub(self, d: Duration) -> Time {
        Time(self.0.saturating_sub(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }
}

/// Microseconds as a `Duration` (UDT's timers are specified in µs).
pub fn us(v: u64) -> Duration {
    Duration::from_micros(v)
}
