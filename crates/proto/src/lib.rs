//! Ferry's protocol core: the FTP/GridFTP control channel and data formats
//! as pure functions of bytes.
//!
//! Both sides live here: the server's session ([`session`]) and the
//! client's ([`client`]), so each is tested against the other in memory
//! (`tests/pair`).
//!
//! Nothing in this crate opens a socket, touches a file or reads a clock —
//! the same discipline as `quinn-proto` and the `rustls` core — so every rule
//! is testable by feeding bytes and reading the result, and every parser of
//! network input can be fuzzed (see `fuzz/`).

#![forbid(unsafe_code)]

pub mod ascii;
pub mod batch;
pub mod client;
pub mod command;
pub mod facts;
#[doc(hidden)]
pub mod fuzz_checks;
pub mod host_port;
pub mod line;
pub mod markers;
pub mod mode_e;
pub mod node;
pub mod octets;
pub mod path;
pub mod reply;
pub mod restart;
pub mod session;
pub mod stripe;
pub mod transport;

pub use command::{Command, CommandError, TransferMode, TransferType};
pub use line::LineBuffer;
pub use path::VirtualPath;
pub use reply::{Reply, ReplyCode, ReplyParser};
pub use restart::RangeSet;
pub use session::{Action, Session, SessionConfig};
