//! The client's side of the protocol, sans-IO: what `ferry-client` (and
//! the `Pair` tests) need to talk to an FTP/GridFTP server, as pure
//! functions of replies and a clock passed in.
//!
//! * [`expect`] — reply classes (RFC 959 §4.2.1), GridFTP markers, and what
//!   a command's final reply must be.
//! * [`pipeline`] — the commands in flight and which reply answers which.
//! * [`login`] — the login batch (USER, PASS, PBSZ/PROT, FEAT, OPTS UTF8,
//!   MLST) and the checks of its replies.
//! * [`fallback`] — EPSV → PASV, SIZE/CWD for servers without MLST.
//! * [`batch`] — which files of a pipelined batch to send when.
//! * [`checksum`] — choosing a `--verify` algorithm, comparing digests.
//! * [`features`] — FEAT.
//! * [`listing`] — MLSx and `ls -l` lines.
//! * [`parse`] — passive addresses, sizes, checksums, `SITE PARTIAL`.
//! * [`session`] — all of it as one state machine, bytes in and out.
//!
//! The server's side is [`crate::session`]. Both live here, as the
//! client and server cores of `rustls` and `quinn-proto` live in one crate:
//! each side's tests can run against the other in memory (`tests/pair`).

pub mod batch;
pub mod checksum;
pub mod expect;
pub mod fallback;
pub mod features;
pub mod listing;
pub mod login;
pub mod parse;
pub mod pipeline;
pub mod session;

pub use batch::BatchWindow;
pub use expect::{classify, Expect, Marker, ReplyClass};
pub use features::Features;
pub use login::{LoginError, LoginOutcome, LoginSequence};
pub use parse::{PartialAnswer, PartialUpload};
pub use pipeline::{Pipeline, PipelineEvent, Tag};
pub use session::{ClientEvent, ClientSession};
