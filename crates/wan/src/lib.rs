//! Ferry's long-path link emulator.
//!
//! The kernel on the project's machines has no `netem`, yet the papers Ferry
//! follows measure GridFTP over paths of 10–80 ms one-way delay. This crate
//! builds such a path in user space: two network namespaces, `NAME-c`
//! (client) and `NAME-s` (server), each holding one TUN device, with a
//! forwarder thread per direction between the two devices that applies a
//! one-way delay, a bottleneck rate with a byte-bounded tail-drop queue, and
//! random loss. See `docs/wan-emulator.md` for the design and its measured
//! limits.
//!
//! ```no_run
//! use std::time::Duration;
//! use ferry_wan::{Link, LinkConfig, PathConfig};
//!
//! let path = PathConfig {
//!     rate: Some("1gbit".parse()?),
//!     ..PathConfig::delay_only(Duration::from_millis(30))
//! };
//! let link = Link::up(LinkConfig::new("bench", path))?;
//! let status = link.command(ferry_wan::Side::Client, "iperf3")
//!     .args(["-c", &link.server_ip().to_string(), "-t", "10"])
//!     .status()?;
//! drop(link); // tears the namespaces down
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod config;
pub mod forwarder;
pub mod link;
pub mod netns;
pub mod selftest;
mod sys;
pub mod topology;
pub mod units;

use std::io;
use std::path::PathBuf;

pub use config::{Ipv4Cidr, LinkConfig, PathConfig, Shaper};
pub use forwarder::DirectionSnapshot;
pub use link::{Link, LinkGuard, LinkStats, Side};
pub use selftest::{SelftestConfig, SelftestReport};
pub use topology::{Topology, TopologyConfig};
pub use units::{ParseError, Rate};

/// Everything that can go wrong bringing a link up, running it or taking it
/// down. Messages say what to do, because the person reading them is usually
/// in the middle of a benchmark script. Underlying I/O errors are part of the
/// message (and kept in the variant) rather than exposed as `source()`, so
/// that printing an error once, from `Drop` or through anyhow's `{:#}`,
/// shows the cause exactly once.
#[derive(Debug, thiserror::Error)]
pub enum WanError {
    #[error(
        "ferry-wan must run as root: it creates network namespaces and TUN devices \
         (run it with sudo, or as root in CI)"
    )]
    NotRoot,
    #[error(
        "network namespace {0:?} already exists; refusing to touch a namespace this link \
         did not create (if a killed ferry-wan left it behind, `ferry-wan down --name {1}` \
         removes it)"
    )]
    NamespaceExists(String, String),
    #[error("{0} already exists; refusing to overwrite configuration this link did not create")]
    PathExists(PathBuf),
    #[error("invalid link configuration: {0}")]
    InvalidConfig(String),
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error("`{command}` failed ({status}): {stderr}")]
    Command { command: String, status: String, stderr: String },
    #[error("{context}: {error}")]
    Io { context: String, error: io::Error },
    #[error("required program `{0}` not found in PATH (Debian: apt-get install {0})")]
    MissingProgram(&'static str),
    #[error("forwarder {direction} stopped: {error}")]
    Forwarder { direction: &'static str, error: io::Error },
    #[error("iperf3: {0}")]
    Iperf(String),
    #[error("no link named {0:?} is recorded in /run/ferry-wan")]
    UnknownLink(String),
    #[error(
        "link {name:?} is held by running process {pid}; stop that process (SIGTERM) \
         so it tears the link down itself, or pass --force"
    )]
    LinkInUse { name: String, pid: u32 },
    #[error("tearing down link {name:?} left: {leftovers}")]
    Teardown { name: String, leftovers: String },
}

impl WanError {
    pub(crate) fn io(context: impl Into<String>, error: io::Error) -> Self {
        WanError::Io { context: context.into(), error }
    }
}
