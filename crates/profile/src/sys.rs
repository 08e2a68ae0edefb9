//! The one kernel call the profiler makes that neither std nor a safe
//! wrapper offers: `sysconf(_SC_CLK_TCK)`. (TCP_INFO comes from
//! `ferry_io::tcpinfo`, shared with the data path.)
//!
//! Every `unsafe` block of the crate is in this module.

#![allow(unsafe_code)]

/// USER_HZ, the unit of `/proc/PID/stat`'s utime and stime.
pub(crate) fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a constant of the C library; it has no
    // pointer arguments and no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // USER_HZ is 100 on every architecture Linux runs Ferry on; the fallback
    // only matters if sysconf fails, which it does not for this name.
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_ticks() {
        assert!(clock_ticks_per_second() >= 100);
    }
}
