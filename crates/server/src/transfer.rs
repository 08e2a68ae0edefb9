//! One data transfer, run as a task beside the control connection.
//!
//! The task prepares its source or sink (opening the file, or building a
//! listing), tells the control loop to send the preliminary reply, opens the
//! data connection, and hands the copy to a blocking thread (see
//! `ferry_io::stream`). The control loop keeps reading commands meanwhile,
//! so ABOR and STAT are answered during the transfer.

use crate::data;
use ferry_io::root::{Root, StoreMode, Upload};
use ferry_io::stream::{self, AbortSignal, CopyError};
use ferry_proto::command::{RestArg, TransferType};
use ferry_proto::session::{
    DataEndpoint, FsError, ListFormat, TransferError, TransferKind, TransferOutcome,
    TransferRequest,
};
use std::fs::File;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};

/// What the transfer task reports to the control loop.
#[derive(Debug)]
pub(crate) enum TransferEvent {
    /// Source or sink is ready: send 150 (with the size when known).
    Started {
        size: Option<u64>,
    },
    Finished(TransferOutcome),
}

/// The control loop's handle on a running transfer.
#[derive(Debug)]
pub(crate) struct ActiveTransfer {
    pub events: mpsc::Receiver<TransferEvent>,
    pub request: TransferRequest,
    pub started: Instant,
    pub progress: Arc<AtomicU64>,
    abort: Arc<AbortSignal>,
    abort_notify: Arc<Notify>,
}

impl ActiveTransfer {
    pub fn abort(&self) {
        self.abort.abort();
        self.abort_notify.notify_one();
    }
}

/// What a transfer needs from its session.
#[derive(Debug)]
pub(crate) struct TransferContext {
    pub root: Arc<Root>,
    pub passive: Option<TcpListener>,
    pub peer_ip: IpAddr,
    pub local_ip: IpAddr,
    pub data_timeout: Duration,
    /// Set by the control connection's reader when the client hangs up.
    pub control_closed: Arc<AtomicBool>,
}

enum Copied {
    Sent(u64),
    Received {
        upload: Upload,
        bytes: u64,
        end: u64,
    },
}

enum Prepared {
    Send { file: File, offset: u64 },
    Listing(Vec<u8>),
    Receive { upload: Upload, offset: u64 },
}

pub(crate) fn spawn(request: TransferRequest, ctx: TransferContext) -> ActiveTransfer {
    let (tx, events) = mpsc::channel(8);
    let abort = Arc::new(AbortSignal::new());
    let abort_notify = Arc::new(Notify::new());
    let progress = Arc::new(AtomicU64::new(0));
    let task = Task {
        request: request.clone(),
        ctx,
        tx,
        abort: abort.clone(),
        abort_notify: abort_notify.clone(),
        progress: progress.clone(),
    };
    tokio::spawn(task.run());
    ActiveTransfer {
        events,
        request,
        started: Instant::now(),
        progress,
        abort,
        abort_notify,
    }
}

struct Task {
    request: TransferRequest,
    ctx: TransferContext,
    tx: mpsc::Sender<TransferEvent>,
    abort: Arc<AbortSignal>,
    abort_notify: Arc<Notify>,
    progress: Arc<AtomicU64>,
}

impl Task {
    async fn run(mut self) {
        let outcome = match self.execute().await {
            Ok(bytes) => TransferOutcome::Complete { bytes },
            Err(e) => TransferOutcome::Failed(e),
        };
        let _ = self.tx.send(TransferEvent::Finished(outcome)).await;
    }

    async fn execute(&mut self) -> Result<u64, TransferError> {
        let root = self.ctx.root.clone();
        let req = self.request.clone();
        let (prepared, size) = tokio::task::spawn_blocking(move || prepare(&root, &req))
            .await
            .map_err(|e| TransferError::Local(e.to_string()))??;
        let _ = self.tx.send(TransferEvent::Started { size }).await;

        let notify = self.abort_notify.clone();
        let stream = tokio::select! {
            s = self.open_data() => s.map_err(|e| TransferError::DataConnection(e.to_string()))?,
            _ = notify.notified() => return Err(TransferError::Aborted),
        };
        let sock = stream
            .into_std()
            .map_err(|e| TransferError::DataConnection(e.to_string()))?;
        let setup = |sock: &std::net::TcpStream| -> io::Result<()> {
            sock.set_nonblocking(false)?;
            sock.set_read_timeout(Some(self.ctx.data_timeout))?;
            sock.set_write_timeout(Some(self.ctx.data_timeout))?;
            self.abort.register(sock)
        };
        setup(&sock).map_err(|e| TransferError::DataConnection(e.to_string()))?;

        let ascii = self.request.ty == TransferType::Ascii;
        let progress = self.progress.clone();
        let abort = self.abort.clone();
        let timeout = self.ctx.data_timeout;
        let copied = tokio::task::spawn_blocking(move || -> Result<Copied, TransferError> {
            let map = |e: CopyError| copy_error(e, timeout);
            let sent = match prepared {
                Prepared::Send { file, offset } if ascii => {
                    stream::send_file_ascii(&file, offset, &sock, &progress, &abort)
                }
                Prepared::Send { file, offset } => {
                    stream::send_file(&file, offset, None, &sock, &progress, &abort)
                }
                Prepared::Listing(bytes) => stream::send_bytes(&bytes, &sock, &abort),
                Prepared::Receive { upload, offset } => {
                    let bytes =
                        stream::receive_file(&sock, &upload.file, offset, ascii, &progress, &abort)
                            .map_err(map)?;
                    let end = upload
                        .file
                        .metadata()
                        .map(|m| m.len())
                        .unwrap_or(offset + bytes);
                    return Ok(Copied::Received { upload, bytes, end });
                }
            };
            let n = sent.map_err(map)?;
            stream::finish_send(&sock).map_err(map)?;
            Ok(Copied::Sent(n))
        })
        .await
        .map_err(|e| TransferError::Local(e.to_string()))??;
        match copied {
            Copied::Sent(n) => Ok(n),
            Copied::Received { upload, bytes, end } => {
                self.check_complete(end).await?;
                let root = self.ctx.root.clone();
                tokio::task::spawn_blocking(move || root.commit(upload))
                    .await
                    .map_err(|e| TransferError::Local(e.to_string()))?
                    .map_err(fs_to_transfer)?;
                Ok(bytes)
            }
        }
    }

    /// In stream mode the end of the data is just the connection closing,
    /// which a client that died mid-upload also does. Before an upload is
    /// renamed to its final name, refuse it when the size announced by ALLO
    /// was not reached, or when the client's control connection is gone
    /// (a killed client closes both; its control socket is the older one and
    /// is normally closed first).
    async fn check_complete(&self, end: u64) -> Result<(), TransferError> {
        if let (Some(announced), TransferType::Image) = (self.request.allocation, self.request.ty) {
            if end != announced {
                return Err(TransferError::ConnectionLost(format!(
                    "the file has {end} bytes but ALLO announced {announced}; the partial upload is kept for a resume"
                )));
            }
        }
        tokio::task::yield_now().await;
        if self.abort.is_aborted() || self.ctx.control_closed.load(Ordering::SeqCst) {
            return Err(TransferError::ConnectionLost(
                "the client closed its control connection during the upload; the partial upload is kept for a resume"
                    .into(),
            ));
        }
        Ok(())
    }

    async fn open_data(&mut self) -> io::Result<TcpStream> {
        match &self.request.endpoint {
            DataEndpoint::Passive => {
                let listener = self.ctx.passive.take().ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotConnected, "no passive listener is open")
                })?;
                data::accept_from(&listener, self.ctx.peer_ip, self.ctx.data_timeout).await
            }
            DataEndpoint::Active(addr) => {
                data::connect_from(*addr, self.ctx.local_ip, self.ctx.data_timeout).await
            }
        }
    }
}

fn fs_to_transfer(e: FsError) -> TransferError {
    match e {
        FsError::NoSpace => TransferError::NoSpace,
        other => TransferError::File(other),
    }
}

fn copy_error(e: CopyError, timeout: Duration) -> TransferError {
    match e {
        CopyError::Aborted => TransferError::Aborted,
        CopyError::Network(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            TransferError::ConnectionLost(format!("no data moved for {} s", timeout.as_secs()))
        }
        CopyError::Network(e) => TransferError::ConnectionLost(e.to_string()),
        CopyError::Disk(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) => {
            TransferError::NoSpace
        }
        CopyError::Disk(e) => TransferError::Local(e.to_string()),
    }
}

/// Opens the file or builds the listing, before any data connection.
fn prepare(root: &Root, req: &TransferRequest) -> Result<(Prepared, Option<u64>), TransferError> {
    let offset = match &req.restart {
        Some(RestArg::Offset(o)) => *o,
        _ => 0,
    };
    match &req.kind {
        TransferKind::Retrieve => {
            let (file, facts) = root.open_read(&req.path).map_err(TransferError::File)?;
            if offset > facts.size {
                return Err(TransferError::BadRestart(format!(
                    "offset {offset} is beyond the end of the file ({} bytes)",
                    facts.size
                )));
            }
            Ok((Prepared::Send { file, offset }, Some(facts.size - offset)))
        }
        TransferKind::Store | TransferKind::Append => {
            let mode = match (&req.kind, offset) {
                (TransferKind::Append, _) => StoreMode::Append,
                (_, 0) => StoreMode::Replace,
                _ => StoreMode::Resume,
            };
            let upload = root.begin_store(&req.path, mode).map_err(fs_to_transfer)?;
            let offset = match mode {
                StoreMode::Append => upload.existing_len,
                StoreMode::Resume if offset > upload.existing_len => {
                    return Err(TransferError::BadRestart(format!(
                        "offset {offset} is beyond the {} bytes received so far",
                        upload.existing_len
                    )))
                }
                _ => offset,
            };
            Ok((Prepared::Receive { upload, offset }, None))
        }
        TransferKind::List {
            format,
            show_hidden,
        } => {
            let entries = root
                .list(&req.path, *show_hidden)
                .map_err(TransferError::File)?;
            if *format == ListFormat::Machine {
                // MLSD lists directories only (RFC 3659 §7.1).
                root.is_dir(&req.path).map_err(TransferError::File)?;
            }
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            let mut out = String::new();
            for e in &entries {
                let line = match format {
                    ListFormat::Long => e.list_line(now),
                    ListFormat::Names => e.name.clone(),
                    ListFormat::Machine => e.mlsx_line(req.writable, &e.name),
                };
                out.push_str(&line.replace(['\r', '\n'], " "));
                out.push_str("\r\n");
            }
            Ok((Prepared::Listing(out.into_bytes()), None))
        }
    }
}
