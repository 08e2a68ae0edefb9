//! The three kernel calls std does not offer: creating a TUN device
//! (`TUNSETIFF`), waiting for a descriptor with a sub-millisecond timeout
//! (`ppoll`), and moving a thread into a network namespace (`setns`).
//!
//! They are written against `libc` directly rather than through the `tun` or
//! `tun-tap` crates: what we need is one ioctl with a fixed-layout request,
//! and those crates bring async runtimes, platform layers and their own
//! device-configuration code (which would run in the root namespace, the one
//! place this tool must not configure anything). Every `unsafe` block is
//! here, each with its justification.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

const IFNAMSIZ: usize = 16;

/// `struct ifreq` as `TUNSETIFF` reads it: the name, then the flags at the
/// start of the union. Declared here (instead of `libc::ifreq`) so that every
/// byte, including the unused rest of the union, is initialised without
/// `mem::zeroed`.
#[repr(C)]
struct IfReqFlags {
    name: [u8; IFNAMSIZ],
    flags: libc::c_short,
    _rest_of_union: [u8; 22],
}

// The kernel copies sizeof(struct ifreq) = 40 bytes on 64-bit Linux.
const _: () = assert!(std::mem::size_of::<IfReqFlags>() == std::mem::size_of::<libc::ifreq>());

/// An open, kernel-created TUN device (layer 3, no packet-information
/// header). The device lives exactly as long as this descriptor: it is not
/// made persistent, so closing the file removes it wherever it has been moved.
#[derive(Debug)]
pub struct Tun {
    file: File,
    name: String,
}

impl Tun {
    /// Creates a *new* TUN device whose name the kernel picks from `pattern`
    /// (which must contain `%d`).
    ///
    /// Asking for a pattern rather than a fixed name is what guarantees we
    /// never attach to somebody else's existing persistent TUN device:
    /// `TUNSETIFF` with an existing name would open that device instead.
    pub fn create(pattern: &str) -> io::Result<Tun> {
        if !pattern.contains("%d") || pattern.len() >= IFNAMSIZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "TUN name pattern must contain %d and fit IFNAMSIZ",
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")?;
        let mut req = IfReqFlags {
            name: [0; IFNAMSIZ],
            flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
            _rest_of_union: [0; 22],
        };
        req.name[..pattern.len()].copy_from_slice(pattern.as_bytes());
        // SAFETY: `file` is an open /dev/net/tun descriptor for the whole
        // call; TUNSETIFF reads and writes one `struct ifreq`, and `req` is a
        // fully initialised, exclusively borrowed value of exactly that size
        // and layout (checked by the const assertion above).
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let len = req.name.iter().position(|&b| b == 0).unwrap_or(IFNAMSIZ);
        let name = String::from_utf8_lossy(&req.name[..len]).into_owned();
        Ok(Tun { file, name })
    }

    /// The name the kernel gave the device in the namespace it was created in.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives up the name and keeps the descriptor (the device's name changes
    /// once it is moved and renamed in its namespace anyway).
    pub fn into_file(self) -> File {
        self.file
    }
}

/// Waits until `fd` is readable or `timeout` passes; `Ok(true)` if readable.
///
/// `ppoll` rather than `poll` because the delay line needs wake-ups finer than
/// a millisecond: at 1 Gbit/s a 9000-byte packet lasts 72 µs on the wire.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `pfd` and `ts` are valid, initialised and live across the call;
    // nfds is 1, matching the single pollfd; a null sigmask means "leave the
    // signal mask alone", which ppoll documents.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    match rc {
        -1 => {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(err)
            }
        }
        0 => Ok(false),
        _ => {
            if pfd.revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
                Err(io::Error::other(format!(
                    "the TUN device reports an error (poll revents {:#x}); it is gone if its namespace was deleted",
                    pfd.revents
                )))
            } else {
                Ok(pfd.revents & libc::POLLIN != 0)
            }
        }
    }
}

/// Moves the *calling thread* into the network namespace `ns` (a descriptor
/// of `/run/netns/NAME`). Sockets the thread creates afterwards belong to
/// that namespace; other threads of the process are unaffected. Meant for a
/// short-lived helper thread.
pub fn enter_netns(ns: &File) -> io::Result<()> {
    let fd = ns.as_fd();
    // SAFETY: `fd` is a valid open descriptor borrowed for the duration of the
    // call; setns only reads it, and CLONE_NEWNET restricts the switch to the
    // network namespace of the calling thread.
    let rc = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// CPU time the calling thread has used, in nanoseconds (user + system, from
/// the scheduler's own accounting), or `None` if the kernel does not expose it.
pub fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}
