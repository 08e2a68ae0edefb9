//! Transfers: RETR, STOR, APPE, ERET, ESTO and listings: what the driver
//! is asked to run, the preliminary reply, and the final replies
//! (RFC 959 §4.1.3 for ABOR, GFD.20 for extended block mode).

use super::channel::DataSetup;
use super::files::path_error_reply;
use super::{Action, ChannelPlan, DataEndpoint, FsError, ListFormat, Session};
use crate::command::{ProtectionLevel, RestArg, TransferMode, TransferType};
use crate::path::VirtualPath;
use crate::reply::{Reply, ReplyCode};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferKind {
    Retrieve,
    Store,
    Append,
    List { format: ListFormat, show_hidden: bool },
}

impl TransferKind {
    /// True when the server sends on the data connection.
    pub fn server_sends(&self) -> bool {
        matches!(self, TransferKind::Retrieve | TransferKind::List { .. })
    }

    pub fn direction(&self) -> Direction {
        if self.server_sends() {
            Direction::Send
        } else {
            Direction::Receive
        }
    }
}

/// Which way data flows, seen from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Send,
    Receive,
}

/// The part of a file a transfer covers: ERET P (offset, length) or
/// ESTO A (offset). Block offsets, REST ranges and markers are relative to
/// `offset` (GFD.20 §"ERET"/§"ESTO").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub offset: u64,
    pub length: Option<u64>,
}

/// When to send markers during a transfer; `None` sends none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MarkerPlan {
    /// Seconds between `112` performance markers.
    pub perf_secs: Option<u32>,
    /// Seconds between `111` restart markers.
    pub restart_secs: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferRequest {
    pub kind: TransferKind,
    pub path: VirtualPath,
    pub restart: Option<RestArg>,
    pub ty: TransferType,
    pub mode: TransferMode,
    pub endpoint: DataEndpoint,
    pub channel: ChannelPlan,
    pub markers: MarkerPlan,
    /// ERET/ESTO window.
    pub window: Option<Window>,
    /// Size announced by ALLO, for preallocation.
    pub allocation: Option<u64>,
    /// Whether the user may write (shapes the MLSD `Perm` fact).
    pub writable: bool,
    /// The facts MLSD lines carry (`OPTS MLST`, RFC 3659 §7.9).
    pub mlst_facts: crate::facts::FactSet,
    /// `PROT P`: every data connection of this transfer is TLS, with the
    /// server as TLS server (RFC 4217 §7).
    pub protected: bool,
}

/// Why a transfer ended without success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferError {
    /// The file could not be opened or created (nothing was sent yet).
    File(FsError),
    /// The data connection could not be established.
    DataConnection(String),
    /// The data connection broke or timed out mid-transfer.
    ConnectionLost(String),
    /// ABOR stopped it.
    Aborted,
    /// Disk full while storing.
    NoSpace,
    /// Another local failure (read/write error).
    Local(String),
    /// The REST offset does not fit the file (RFC 3659 §5.5: 554).
    BadRestart(String),
}

/// What the driver reports when a transfer ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferOutcome {
    Complete { bytes: u64 },
    Failed(TransferError),
}

impl Session {
    pub(super) fn transfer(&mut self, arg: &str, kind: TransferKind, window: Option<Window>) -> Action {
        let needs_write = matches!(kind, TransferKind::Store | TransferKind::Append);
        if needs_write && !self.writable() {
            return Self::reply(ReplyCode::FILE_UNAVAILABLE, "Permission denied: this account is read-only.");
        }
        if self.config.require_protected_data && self.prot != ProtectionLevel::Private {
            //= RFC 4217 §9: a server that does not accept clear data
            //= connections refuses the transfer with 521.
            return Self::reply(
                ReplyCode::PROT_REFUSED,
                "Data connections must be protected on this server: send PBSZ 0 and PROT P first.",
            );
        }
        let path = match self.cwd.resolve(arg) {
            Ok(p) => p,
            Err(e) => return path_error_reply(&e),
        };
        let direction = kind.direction();
        let extended = self.mode == TransferMode::ExtendedBlock;
        let endpoint = match (&self.data, extended) {
            (DataSetup::None, _) => {
                return Self::reply(ReplyCode::CANT_OPEN_DATA, "Use PORT, EPRT, PASV or EPSV first.");
            }
            // GFD.20: in extended block mode the sending side opens the
            // data connections, so it must know where to (PORT), and the
            // receiver must be listening (PASV).
            (DataSetup::Passive { .. }, true) if direction == Direction::Send => {
                return Self::reply(
                    ReplyCode::BAD_SEQUENCE,
                    "In MODE E the sender opens the data connections: send PORT (or EPRT/SPOR) \
                     before RETR, LIST or MLSD.",
                )
            }
            (DataSetup::Active(_), true) if direction == Direction::Receive => {
                return Self::reply(
                    ReplyCode::BAD_SEQUENCE,
                    "In MODE E the sender opens the data connections: send PASV (or EPSV/SPAS) \
                     before STOR, APPE or ESTO.",
                )
            }
            (DataSetup::Passive { delayed: true, kind }, _) => DataEndpoint::DelayedPassive(*kind),
            (DataSetup::Passive { delayed: false, .. }, _) => DataEndpoint::Passive,
            (DataSetup::Active(a), _) => DataEndpoint::Active(*a),
        };
        if !extended {
            // Stream mode: the connection closes with the file, so every
            // transfer needs a new PASV or PORT.
            self.data = DataSetup::None;
        }
        let mut restart = match kind {
            TransferKind::Retrieve | TransferKind::Store => self.rest.take(),
            _ => None,
        };
        self.rest = None;
        if !extended {
            // In stream mode a restart is an offset; a range list that is
            // one prefix means the same (what REST 0-N says in MODE E).
            if let Some(RestArg::Ranges(r)) = &restart {
                match r.ranges() {
                    [] => restart = None,
                    [only] if only.start == 0 => restart = Some(RestArg::Offset(only.end)),
                    _ => {
                        return Self::reply(
                            ReplyCode::INVALID_RESTART,
                            "In stream mode REST takes a single offset; byte-range restarts need MODE E.",
                        )
                    }
                }
            }
        }
        let is_data = matches!(kind, TransferKind::Retrieve | TransferKind::Store);
        let markers = match (direction, extended && is_data) {
            (Direction::Receive, true) => MarkerPlan {
                perf_secs: (self.perf_secs > 0).then_some(self.perf_secs),
                restart_secs: (self.restart_secs > 0).then_some(self.restart_secs),
            },
            (Direction::Send, _) if is_data => MarkerPlan { perf_secs: self.send_markers, restart_secs: None },
            _ => MarkerPlan::default(),
        };
        let req = TransferRequest {
            kind: kind.clone(),
            path,
            restart,
            ty: if matches!(kind, TransferKind::List { .. }) { TransferType::Ascii } else { self.ty },
            mode: self.mode,
            endpoint,
            channel: ChannelPlan {
                generation: self.generation,
                reuse: extended && self.cached == Some(direction),
                parallelism: self.parallelism,
                buffer_size: self.buffer_size,
                path_rate: self.path_rate,
                transport: self.data_transport(),
            },
            markers,
            window,
            allocation: self.allocation.take(),
            writable: self.writable(),
            mlst_facts: self.mlst_facts,
            protected: self.prot == ProtectionLevel::Private,
        };
        // The channels are in use; they are cached again only if this
        // transfer ends cleanly.
        self.cached = None;
        self.transfer = Some(kind);
        self.abort_requested = false;
        Action::Transfer(req)
    }

    /// The preliminary reply once the data connection is up (RFC 959 §4.2:
    /// 150 when opening it, 125 when it was already open).
    pub fn transfer_started(&mut self, what: &str, size: Option<u64>, reused: bool) -> Reply {
        let mode = match self.ty {
            TransferType::Ascii => "ASCII",
            TransferType::Image => "BINARY",
        };
        let size = size.map(|s| format!(" ({s} bytes)")).unwrap_or_default();
        if reused {
            Reply::new(
                ReplyCode::DATA_CONNECTION_ALREADY_OPEN,
                format!("Reusing existing data connection; transfer of {what}{size} starting."),
            )
        } else {
            Reply::new(ReplyCode::FILE_STATUS_OK, format!("Opening {mode} mode data connection for {what}{size}."))
        }
    }

    /// The final replies of a transfer: `226`, an error, or after ABOR the
    /// `426` for the transfer followed by `226` for the ABOR (RFC 959 §4.1.3).
    pub fn transfer_finished(&mut self, path: &VirtualPath, outcome: TransferOutcome) -> Vec<Reply> {
        let aborted = std::mem::take(&mut self.abort_requested);
        let Some(kind) = self.transfer.take() else {
            return vec![Reply::new(ReplyCode::BAD_SEQUENCE, "No transfer in progress.")];
        };
        match outcome {
            TransferOutcome::Complete { .. } if !aborted => {
                if self.mode == TransferMode::ExtendedBlock {
                    // MODE E connections stay open for the next transfer
                    // in the same direction (GFD.20 data channel caching).
                    self.cached = Some(kind.direction());
                }
                vec![Reply::new(ReplyCode::CLOSING_DATA, "Transfer complete.")]
            }
            // RFC 959 §4.1.3 ABOR: "the FTP service command was already
            // completed" — the transfer's own 226 stands (an upload that
            // took its final name is not reported aborted), then the 226
            // for the ABOR.
            TransferOutcome::Complete { .. } => vec![
                Reply::new(ReplyCode::CLOSING_DATA, "Transfer complete."),
                Reply::new(ReplyCode::CLOSING_DATA, "ABOR command successful."),
            ],
            TransferOutcome::Failed(TransferError::Aborted) => {
                vec![
                    Reply::new(ReplyCode::TRANSFER_ABORTED, "Connection closed; transfer aborted."),
                    Reply::new(ReplyCode::CLOSING_DATA, "ABOR command successful."),
                ]
            }
            TransferOutcome::Failed(e) => {
                let reply = match e {
                    TransferError::File(fs) => fs.reply(path),
                    TransferError::DataConnection(why) => {
                        Reply::new(ReplyCode::CANT_OPEN_DATA, format!("Cannot open data connection: {why}."))
                    }
                    TransferError::ConnectionLost(why) => Reply::new(
                        ReplyCode::TRANSFER_ABORTED,
                        format!("Data connection lost: {why}; transfer aborted."),
                    ),
                    TransferError::NoSpace => Reply::new(
                        ReplyCode::EXCEEDED_STORAGE,
                        format!("{path}: No space left on the server's disk; transfer aborted."),
                    ),
                    TransferError::Local(why) => {
                        Reply::new(ReplyCode::LOCAL_ERROR, format!("{path}: Local error: {why}."))
                    }
                    TransferError::BadRestart(why) => {
                        Reply::new(ReplyCode::INVALID_RESTART, format!("Invalid REST parameter: {why}."))
                    }
                    TransferError::Aborted => unreachable_aborted(),
                };
                let mut out = vec![reply];
                if aborted {
                    out.push(Reply::new(ReplyCode::CLOSING_DATA, "ABOR command successful."));
                }
                out
            }
        }
    }
}

/// TransferError::Aborted is matched in the arm above; kept as a function so
/// the match stays exhaustive without a panic on the reply path.
pub(super) fn unreachable_aborted() -> Reply {
    Reply::new(ReplyCode::TRANSFER_ABORTED, "Transfer aborted.")
}
