//! The profiler's errors.
//!
//! A profile is a side product of a transfer, so most failures here are
//! reported and survived rather than propagated: a missing `perf` becomes a
//! note in the report, a stream whose socket closed simply stops producing
//! samples. The variants below are the failures a caller must see.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while sampling, profiling or writing a report.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A `/proc` file could not be read. Without `/proc/stat` there is no
    /// CPU sample at all, so the sampler refuses to start rather than
    /// producing an empty profile that looks like an idle machine.
    #[error("cannot read {path}: {source}")]
    Proc {
        /// The file that failed.
        path: PathBuf,
        /// What the kernel said.
        #[source]
        source: io::Error,
    },

    /// A `/proc` file had a layout this parser does not understand (a
    /// kernel far older or newer than the ones Ferry is tested on).
    #[error("unexpected format in {path}: {detail}")]
    ProcFormat {
        /// The file that was read.
        path: &'static str,
        /// What was wrong, for the bug report.
        detail: String,
    },

    /// `getsockopt(TCP_INFO)` failed: the descriptor is not a TCP socket, or
    /// it has been closed.
    #[error("TCP_INFO on descriptor {fd}: {source}")]
    TcpInfo {
        /// The descriptor that was asked.
        fd: i32,
        /// What the kernel said.
        #[source]
        source: io::Error,
    },

    /// The sampler thread could not be started or panicked.
    #[error("sampler thread: {0}")]
    Thread(String),

    /// A stream registry accepts one sampler at a time, because each sample
    /// of a closing stream is handed to exactly one sampler.
    #[error("this stream registry is already attached to a running sampler")]
    RegistryBusy,

    /// `perf` is not installed.
    #[error("perf is not installed (Debian package linux-perf); the profile has no CPU symbol table")]
    PerfMissing,

    /// `perf` ran but failed; `stderr` holds its own explanation (often
    /// `perf_event_paranoid`, or a PID that has exited).
    #[error("{step} failed ({status}): {stderr}")]
    PerfFailed {
        /// `perf record` or `perf report`.
        step: &'static str,
        /// Its exit status.
        status: String,
        /// The last lines of its standard error.
        stderr: String,
    },

    /// `perf` output did not contain the table this parser expects.
    #[error("cannot parse perf report output: {0}")]
    PerfParse(String),

    /// Starting or talking to a child process (perf) failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// What the kernel said.
        #[source]
        source: io::Error,
    },

    /// Writing the report failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file that failed.
        path: PathBuf,
        /// What the kernel said.
        #[source]
        source: io::Error,
    },

    /// Serialising or parsing a report document failed.
    #[error("report JSON: {0}")]
    Json(#[from] serde_json::Error),

    /// Rendering a plot failed (plotters reports its own reason).
    #[error("plot {plot}: {detail}")]
    Plot {
        /// Which plot.
        plot: &'static str,
        /// Plotters' message.
        detail: String,
    },
}

/// The crate's result type.
pub type Result<T, E = ProfileError> = std::result::Result<T, E>;

impl ProfileError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        ProfileError::Io { what: what.into(), source }
    }
}
