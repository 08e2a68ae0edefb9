//! The kernel calls std does not offer for child processes: a descriptor
//! that becomes readable when a child exits (`pidfd_open`), waiting on it
//! with a timeout (`poll`), reaping with the child's resource usage
//! (`wait4`), signalling a whole process group (`kill`), and the clock-tick
//! rate `/proc/PID/stat` counts in (`sysconf`), and a parent-death signal
//! for every child (`prctl`); and `syncfs`, which the small-files harness
//! runs before each timed command.
//!
//! Why not `Child::wait`: it neither takes a timeout nor returns the child's
//! `rusage`, and the harness needs both — every run is bounded in time, and
//! the client's CPU seconds are part of every result. A pidfd makes the
//! timeout exact without a polling loop that would blur the wall-clock
//! figure, and `wait4` gives microsecond CPU times where `/proc` gives
//! 10 ms ticks. Every `unsafe` block is here, each with its justification.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

/// CPU time a reaped child (and the children it reaped) used.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rusage {
    pub user_s: f64,
    pub system_s: f64,
}

/// Opens a pidfd for `pid`, which must be an unreaped child of ours (so the
/// number cannot have been reused yet).
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags by value and returns a new
    // descriptor or -1; no memory is shared with the kernel.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("pidfd_open returned an out-of-range descriptor"))?;
    // SAFETY: the kernel has just returned this descriptor to us and nobody
    // else holds it, so OwnedFd may take ownership (and close it on drop).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Waits until `fd` is readable (for a pidfd: the process has exited) or
/// `timeout` passes. Returns whether it became readable.
pub fn poll_readable(fd: &OwnedFd, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    loop {
        // SAFETY: `pfd` is a valid, initialised pollfd that lives across the
        // call, and we pass a count of exactly one.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n >= 0 {
            return Ok(n > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Reaps child `pid` (blocking until it exits) and returns its raw wait
/// status and resource usage.
pub fn wait4(pid: i32) -> io::Result<(i32, Rusage)> {
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct
    // of integers and timevals.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers refer to live, writable locals of the types
        // wait4 expects; the kernel writes only within them.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if r < 0 && e.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return Err(if r < 0 { e } else { io::Error::other(format!("wait4 returned pid {r}, expected {pid}")) });
    }
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    Ok((status, Rusage { user_s: secs(usage.ru_utime), system_s: secs(usage.ru_stime) }))
}

/// Sends `signal` to process group `pgid` (one we created with
/// `process_group(0)`, so it holds only our child and its descendants).
pub fn kill_group(pgid: i32, signal: i32) -> io::Result<()> {
    if pgid <= 1 {
        return Err(io::Error::other(format!("refusing to signal process group {pgid}")));
    }
    // SAFETY: kill takes plain integers; a negative pid addresses the group.
    let r = unsafe { libc::kill(-pgid, signal) };
    if r == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        // The group is already gone: nothing left to stop.
        if e.raw_os_error() == Some(libc::ESRCH) {
            Ok(())
        } else {
            Err(e)
        }
    }
}

/// Clock ticks per second, the unit of the CPU fields in `/proc/PID/stat`.
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Makes the child receive SIGKILL when the harness dies, even by SIGKILL,
/// so no server or client outlives a killed run. (A child that changes its
/// user, like the Globus daemon under setpriv, loses this; the servers'
/// registry covers it.) Children must be spawned from the main thread: the
/// signal fires when the spawning thread exits.
pub fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and makes
    // only async-signal-safe system calls (prctl, getppid, _exit); it does
    // not allocate (last_os_error wraps the errno value).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Writes back the file system holding `f` (`syncfs(2)`).
pub fn syncfs(f: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: syncfs takes a descriptor by value, which `f` keeps open for
    // the call's duration; no memory is shared with the kernel.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
