//! Password checks on a few dedicated threads.
//!
//! An argon2id check (the users file's hashes, `users.rs`) allocates the
//! hash's memory cost — 19 MiB with the default parameters — for its
//! duration. Run on tokio's blocking pool, N clients sending `PASS` at
//! once made the server allocate N × 19 MiB: 150 unauthenticated clients
//! took it to 2.9 GB (`tests/hostile.rs`, concurrent_logins_keep_memory_
//! bounded). Here at most [`threads`] checks run at a time, on threads of
//! their own, so the memory they use (and the allocator keeps for reuse)
//! is a small constant; the others wait in a bounded queue, and a full
//! queue fails the login rather than growing.
//!
//! Bounding the concurrency was not enough: glibc's malloc raises its mmap
//! threshold after the first 19 MiB block is freed, serves the next ones
//! from its heaps and keeps them, so RSS climbed by 19 MiB a login to a
//! plateau of 380 MiB after 30 sequential failed logins (11.5 MiB with the
//! threshold fixed). [`fix_mmap_threshold`] pins the threshold, so blocks
//! that large are mapped and unmapped each time and return to the system.
#![allow(unsafe_code)]

use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// Checks waiting beyond those running; a flood past it is refused.
pub(crate) const MAX_QUEUED: usize = 1024;

/// Threads checking passwords: the cores, at most 4.
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 4)
}

#[derive(Debug)]
pub(crate) struct PasswordChecker {
    jobs: SyncSender<Job>,
}

impl PasswordChecker {
    pub fn new() -> Self {
        fix_mmap_threshold();
        let (jobs, rx) = sync_channel::<Job>(MAX_QUEUED);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads() {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new().name(format!("ferry-passwd-{i}")).spawn(move || loop {
                let job = match rx.lock().unwrap_or_else(|e| e.into_inner()).recv() {
                    Ok(job) => job,
                    Err(_) => return, // the server is gone
                };
                // A panicking check fails that login, not the thread.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start a password-check thread");
            }
        }
        Self { jobs }
    }

    /// Runs `check` on a password thread; `None` when the queue is full or
    /// the check panicked (both count as a failed login).
    pub async fn run<T: Send + 'static>(&self, check: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(check());
        });
        match self.jobs.try_send(job) {
            Ok(()) => rx.await.ok(),
            Err(TrySendError::Full(_)) => {
                tracing::warn!("password checks are queued to the limit; refusing a login");
                None
            }
            Err(TrySendError::Disconnected(_)) => None,
        }
    }
}

/// Allocations at least this large are always mapped (and unmapped when
/// freed), never kept in malloc's heaps: argon2's 19 MiB, staging rings.
/// The 1 MiB MODE E block buffers stay below it.
pub(crate) const MMAP_THRESHOLD: i32 = 4 << 20;

/// Pins glibc's mmap threshold (disabling its dynamic adjustment).
fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it takes plain
    // integers and is safe to call at any time from any thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_jobs_and_bounds_the_threads() {
        let p = PasswordChecker::new();
        let results = futures::future::join_all(
            (0..50).map(|i| p.run(move || (i, std::thread::current().name().map(String::from)))),
        )
        .await;
        let mut names = std::collections::BTreeSet::new();
        for (i, r) in results.into_iter().enumerate() {
            let (j, name) = r.unwrap();
            assert_eq!(i, j);
            names.insert(name.unwrap());
        }
        assert!(names.len() <= threads(), "{names:?}");
        assert!(names.iter().all(|n| n.starts_with("ferry-passwd-")));
    }
}
