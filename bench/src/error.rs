//! The harness's error type.
//!
//! Messages say what to do next, because the person reading them is
//! usually watching a long benchmark run stop. Underlying errors are folded
//! into the message rather than chained as `source()`, so printing once
//! (anyhow's `{:#}`) shows each cause exactly once.

use std::io;

use ferry_wan::WanError;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("interrupted (Ctrl-C, SIGTERM or SIGHUP)")]
    Interrupted,
    #[error("`{program}` not found: {hint}")]
    MissingProgram { program: String, hint: String },
    #[error("{0}")]
    Precondition(String),
    #[error("{context}: {error}")]
    Io { context: String, error: io::Error },
    #[error("{what} did not finish within {secs:.0} s and was killed")]
    Timeout { what: String, secs: f64 },
    #[error("{what} failed ({status}): {detail}")]
    Failed { what: String, status: String, detail: String },
    #[error("{what}: unexpected output: {detail}")]
    Output { what: String, detail: String },
    #[error("emulated link: {0}")]
    Wan(#[from] WanError),
}

impl BenchError {
    pub fn io(context: impl Into<String>, error: io::Error) -> Self {
        BenchError::Io { context: context.into(), error }
    }

    pub fn output(what: impl Into<String>, detail: impl Into<String>) -> Self {
        BenchError::Output { what: what.into(), detail: detail.into() }
    }
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Ctrl-C handling shared by every wait in the harness.
///
/// A global flag rather than a handle threaded through every call: signals
/// are process-wide anyway, and each blocking wait (child processes, server
/// start-up, data generation) checks it so an interrupted run unwinds
/// through the guards that stop servers and tear the emulated link down.
pub mod interrupt {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock};

    use super::BenchError;

    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

    /// The flag signal handlers set; created on first use.
    pub fn flag() -> Arc<AtomicBool> {
        Arc::clone(FLAG.get_or_init(|| Arc::new(AtomicBool::new(false))))
    }

    pub fn requested() -> bool {
        FLAG.get().is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// `Err(Interrupted)` once a stop signal has arrived.
    pub fn check() -> Result<(), BenchError> {
        if requested() {
            Err(BenchError::Interrupted)
        } else {
            Ok(())
        }
    }
}
