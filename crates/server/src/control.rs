//! The control connection: reads command lines, drives the sans-IO
//! [`Session`], and carries out what it asks for.
//!
//! A reader task frames lines and parses them into a bounded channel, so a
//! flood of commands exerts back-pressure on the socket rather than on
//! memory. The loop here serves one command at a time; while a transfer
//! runs it keeps reading, answers ABOR/STAT/NOOP at once and queues the
//! rest (bounded) to serve them, in order, when the transfer ends — which is
//! what GridFTP pipelining (`globus-url-copy -pp`) needs. It also sends the
//! transfer's restart (111) and performance (112) markers on their clocks.
//!
//! `AUTH TLS` (RFC 4217 §4): the reader pauses after passing an AUTH line
//! on, because the bytes that follow the `234` are the client's TLS
//! handshake, not commands. If the session accepts, the reader hands its
//! half of the socket back, the control loop runs the handshake on the
//! whole connection and starts a new reader on the TLS stream; otherwise
//! the reader is told to go on in clear.

use crate::profiling::Profiler;
use crate::server::{ServerContext, SessionSlot};
use crate::transfer::{self, ActiveTransfer, DataChannels, TransferContext, TransferEvent};
use ferry_io::root::{BatchDurability, Root, SessionPasses};
use ferry_proto::command::Command;
use ferry_proto::line::{parse_line, LineBuffer, DEFAULT_MAX_LINE};
use ferry_proto::markers::{range_marker, PerfMarker};
use ferry_proto::session::{
    Action, FileDone, FileOp, FsError, Grant, LoginRequest, Session, TransferError, TransferKind, TransferOutcome,
};
use ferry_proto::{CommandError, Reply, ReplyCode, VirtualPath};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

type TlsControl = tokio_rustls::server::TlsStream<TcpStream>;

/// The sending half of the control connection, in clear or in TLS.
enum ControlWriter {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<TlsControl>),
    /// Only while the connection is being upgraded.
    Detached,
}

impl ControlWriter {
    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            ControlWriter::Plain(w) => w.write_all(bytes).await,
            ControlWriter::Tls(w) => {
                w.write_all(bytes).await?;
                // A TLS stream buffers records until flushed.
                w.flush().await
            }
            ControlWriter::Detached => Err(std::io::ErrorKind::NotConnected.into()),
        }
    }

    async fn shutdown(&mut self) -> std::io::Result<()> {
        match self {
            ControlWriter::Plain(w) => w.shutdown().await,
            ControlWriter::Tls(w) => w.shutdown().await,
            ControlWriter::Detached => Ok(()),
        }
    }
}

/// What the control loop tells a clear-text reader paused after AUTH.
enum Gate {
    /// AUTH was refused: keep reading commands in clear.
    Continue,
    /// AUTH was accepted: give the socket back for the handshake.
    Handover(oneshot::Sender<Handover>),
}

/// A clear-text reader's socket half, returned for the TLS upgrade.
struct Handover {
    rd: OwnedReadHalf,
    tx: mpsc::Sender<Parsed>,
    /// Bytes the client sent after AUTH before it could have seen the 234.
    early: usize,
}

type Parsed = Result<Command, CommandError>;

/// Commands buffered while a transfer runs (pipelining depth). Globus
/// clients keep about a dozen outstanding.
const MAX_QUEUED: usize = 256;

/// How often a busy session looks at its control socket's TCP state for a
/// hang-up its reader has not passed on (see [`Control::converse`]).
const HANG_UP_CHECK: Duration = Duration::from_millis(500);

enum Flow {
    Continue,
    Close,
}

pub(crate) async fn serve(stream: TcpStream, peer: SocketAddr, ctx: Arc<ServerContext>, slot: SessionSlot) {
    let local = match stream.local_addr() {
        Ok(a) => a,
        Err(_) => return,
    };
    let _ = stream.set_nodelay(true);
    // ABOR may be sent as TCP urgent data (RFC 959 §4.1.3); keep it inline
    // so the line is not cut short by the out-of-band byte.
    let _ = socket2::SockRef::from(&stream).set_out_of_band_inline(true);
    // A duplicate of the socket, for TCP_INFO whatever wraps it later.
    let probe = match stream.as_fd().try_clone_to_owned() {
        Ok(fd) => Arc::new(fd),
        Err(_) => return,
    };
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Parsed>(MAX_QUEUED);
    let (gate_tx, gate_rx) = mpsc::channel::<Gate>(1);
    let control_closed = Arc::new(AtomicBool::new(false));
    let reader = tokio::spawn(read_clear(rd, tx, control_closed.clone(), gate_rx));
    let session = Session::new(ctx.session_config.clone(), peer);
    let ctx_login_timeout = ctx.config.login_timeout();
    let ctx_drain = ctx.draining.clone();
    let batch_sync_interval_ms = ctx.config.batch_sync_interval_ms;
    let mut control = Control {
        ctx,
        session,
        peer,
        local,
        writer: ControlWriter::Plain(wr),
        pending: Vec::new(),
        holding: false,
        hold_until: None,
        from_line: false,
        stream: None,
        probe,
        gate: Some(gate_tx),
        reader,
        root: None,
        channels: DataChannels::default(),
        user: String::from("-"),
        control_closed,
        profiler: Profiler::default(),
        login_by: Instant::now() + ctx_login_timeout,
        drain: ctx_drain,
        running: None,
        stripes: crate::stripe::front::Stripes::default(),
        udt_secret: None,
        batch: None,
        facts: None,
        batch_passes: SessionPasses::new(Duration::from_millis(batch_sync_interval_ms)),
        pass: None,
    };
    let result = control.run(rx).await;
    control.reader.abort();
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "control connection ended with an error");
    }
    tracing::info!(%peer, user = %control.user, "session closed");
    drop(slot);
}

/// Reads command lines in clear. After passing on an AUTH line it waits
/// for the control loop's verdict ([`Gate`]) before reading on.
async fn read_clear(
    rd: OwnedReadHalf,
    tx: mpsc::Sender<Parsed>,
    closed: Arc<AtomicBool>,
    mut gate: mpsc::Receiver<Gate>,
) {
    let mut lines = LineBuffer::new(DEFAULT_MAX_LINE);
    let mut buf = vec![0u8; 8192];
    loop {
        // Read until the socket is drained, not just once: a read stops
        // at the TCP urgent mark, and tokio's `read` takes any short
        // read as "drained" and waits for a new wake-up, which would
        // strand the rest of an ABOR sent as urgent data. `try_read`
        // only stops at WouldBlock.
        if rd.readable().await.is_err() {
            closed.store(true, Ordering::SeqCst);
            return;
        }
        loop {
            let n = match rd.try_read(&mut buf) {
                Ok(0) => {
                    closed.store(true, Ordering::SeqCst);
                    return;
                }
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    closed.store(true, Ordering::SeqCst);
                    return;
                }
            };
            lines.push(&buf[..n]);
            while let Some(line) = lines.next_line() {
                let parsed = parse_line(line);
                let is_auth = matches!(parsed, Ok(Command::Auth(_)));
                if tx.send(parsed).await.is_err() {
                    return;
                }
                if is_auth {
                    match gate.recv().await {
                        Some(Gate::Continue) => {}
                        Some(Gate::Handover(back)) => {
                            let early = lines.buffered();
                            let _ = back.send(Handover { rd, tx, early });
                            return;
                        }
                        None => return,
                    }
                }
            }
        }
    }
}

/// Reads command lines from the TLS stream after AUTH TLS. Urgent data
/// (telnet IP/Synch before ABOR) cannot be mixed into TLS records, so a
/// plain read loop is enough here.
async fn read_tls(mut rd: ReadHalf<TlsControl>, tx: mpsc::Sender<Parsed>, closed: Arc<AtomicBool>) {
    let mut lines = LineBuffer::new(DEFAULT_MAX_LINE);
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match rd.read(&mut buf).await {
            Ok(0) | Err(_) => {
                closed.store(true, Ordering::SeqCst);
                return;
            }
            Ok(n) => n,
        };
        lines.push(&buf[..n]);
        while let Some(line) = lines.next_line() {
            if tx.send(parse_line(line)).await.is_err() {
                return;
            }
        }
    }
}

struct Control {
    ctx: Arc<ServerContext>,
    session: Session,
    peer: SocketAddr,
    local: SocketAddr,
    writer: ControlWriter,
    /// Replies produced together (a file's 226 and the next file's 200 and
    /// 125, say), written in one `send` when the loop is about to wait or
    /// before the next reply that is written at once ([`Control::send_later`]).
    pending: Vec<u8>,
    /// The held replies end with the 125 of a `BSTO SYNC` file, whose
    /// client does not wait for it (docs/batch.md): it goes out with the
    /// file's 226 instead of in a write of its own.
    holding: bool,
    /// When a held `BRET` 125 goes out even without its 226.
    hold_until: Option<Instant>,
    /// The running command came from a batch line.
    from_line: bool,
    /// The files of the `BRET STREAM` line being run (docs/batch.md, "The
    /// streamed batch"): one transfer for all of them.
    stream: Option<Arc<transfer::StreamFiles>>,
    /// The control socket (a duplicate descriptor), for TCP_INFO.
    probe: Arc<OwnedFd>,
    /// Releases the clear-text reader after an AUTH line; `None` once TLS.
    gate: Option<mpsc::Sender<Gate>>,
    reader: JoinHandle<()>,
    root: Option<Arc<Root>>,
    /// The passive listener and cached MODE E connections, while no
    /// transfer holds them.
    channels: DataChannels,
    user: String,
    control_closed: Arc<AtomicBool>,
    /// `SITE PROFILE`'s sampler, while one runs.
    profiler: Profiler,
    /// When a connection that has not logged in is closed.
    login_by: Instant,
    /// True once the server stops accepting (SIGTERM): close when idle.
    drain: tokio::sync::watch::Receiver<bool>,
    /// A long file operation (CKSM, SITE PARTIAL) running beside the
    /// control loop, which meanwhile answers NOOP, STAT and ABOR.
    running: Option<RunningOp>,
    /// A striping front end's links to its data nodes (issue 20).
    stripes: crate::stripe::front::Stripes,
    /// The TLS exporter's secret of this control session, which keys
    /// encrypted UDT data channels (`TPRT udt:aes-gcm`, docs/udt.md);
    /// `None` until AUTH TLS.
    udt_secret: Option<ferry_io::transport::udt_seal::SealSecret>,
    /// The `BSTO SYNC` batch the command being processed belongs to: its
    /// uploads are renamed without a sync of their own and made durable
    /// together before the batch's final reply (docs/batch.md).
    batch: Option<Arc<BatchDurability>>,
    /// The modification time and mode a `BSTO` entry carried for the
    /// upload being processed: set before its rename (docs/batch.md).
    facts: Option<ferry_proto::batch::EntryFacts>,
    /// This session's rate of batch durability passes (docs/batch.md).
    batch_passes: SessionPasses,
    /// The durability pass of the last ended batch, while it runs: the
    /// session goes on with the next batch line's commands meanwhile, so
    /// that line's data is read while the disk writes the last one's
    /// (docs/batch.md, "Durability"). Every reply written until it ends is
    /// held behind its final reply. At most one per session.
    pass: Option<JoinHandle<Reply>>,
}

/// A queued command and the durability-per-batch handle of the
/// `BSTO SYNC` it came from, if any.
/// A queued command, its `BSTO SYNC` batch, its entry's facts, and
/// whether it came from a batch line (`BRET`/`BSTO`).
type Queued = (Parsed, Option<Arc<BatchDurability>>, Option<ferry_proto::batch::EntryFacts>, bool);

/// A `BRET` file's 125 is held for its 226 when the file is at most this
/// big (it fits the sockets' buffers, so its 226 follows at once whether
/// or not the client reads before the 125); a `BSTO SYNC` file's 125 too
/// (its client sends without waiting for it). Either for at most
/// [`HOLD_125_FOR`], for a client that waits all the same.
pub(crate) const HOLD_125_MAX_SIZE: u64 = 64 << 10;
const HOLD_125_FOR: Duration = Duration::from_millis(1);

/// The most reply bytes a session holds behind a running durability pass
/// before it waits for the pass (docs/batch.md, "Durability"): a line's
/// replies are a few hundred bytes.
const MAX_HELD_BEHIND_PASS: usize = 64 << 10;

/// A file operation running in the background.
struct RunningOp {
    done: oneshot::Receiver<Result<FileDone, FsError>>,
    /// Set by ABOR: the operation stops between two reads.
    cancel: Arc<AtomicBool>,
}

/// When the running transfer's next markers are due.
#[derive(Debug, Default)]
struct MarkerClock {
    perf: Option<(Duration, Instant)>,
    restart: Option<(Duration, Instant)>,
}

impl MarkerClock {
    /// Restart markers follow the upload's checkpoints
    /// ([`TransferEvent::Checkpointed`]), not this clock: they report only
    /// what is on disk.
    fn start(t: &ActiveTransfer) -> Self {
        let now = Instant::now();
        let at = |s: Option<u32>| s.map(|s| (Duration::from_secs(s.into()), now + Duration::from_secs(s.into())));
        Self { perf: at(t.request.markers.perf_secs), restart: None }
    }

    fn next(&self) -> Option<Instant> {
        [self.perf, self.restart].iter().flatten().map(|(_, at)| *at).min()
    }
}

fn perf_marker(bytes: u64) -> Reply {
    let millis =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    PerfMarker::new(millis, bytes).reply()
}

impl Control {
    /// Writes `reply` now, after any replies held by [`Control::send_later`]
    /// (in one write with them).
    async fn send(&mut self, reply: &Reply) -> std::io::Result<()> {
        self.send_later(reply);
        self.flush().await
    }

    /// Holds `reply` until the loop is about to wait (the top of its
    /// `select!`) or the next [`Control::send`]: the replies a batch
    /// produces back to back go out in one write instead of one each
    /// (docs/batch.md). Only for replies after which the loop goes on
    /// without waiting for the client.
    fn send_later(&mut self, reply: &Reply) {
        let bytes = reply.to_bytes();
        self.log_reply(&bytes);
        self.pending.extend_from_slice(&bytes);
    }

    fn log_reply(&self, bytes: &[u8]) {
        if tracing::enabled!(target: "ferry::dialogue", tracing::Level::DEBUG) {
            for line in String::from_utf8_lossy(bytes).lines() {
                tracing::debug!(target: "ferry::dialogue", peer = %self.peer, "< {line}");
            }
        }
    }

    /// Writes the held replies, unless a batch's durability pass runs:
    /// they follow its final reply ([`Control::put_pass_reply`]).
    async fn flush(&mut self) -> std::io::Result<()> {
        if let Some(pass) = self.pass.as_mut() {
            if self.pending.len() < MAX_HELD_BEHIND_PASS {
                // Nothing is held for a 226 then: everything waits for the pass.
                self.holding = false;
                self.hold_until = None;
                return Ok(());
            }
            // A client whose commands make replies faster than a pass ends
            // (a flood of NOOPs during the next line's transfer): the
            // session waits for the pass, so what it holds stays bounded.
            let ended = pass.await;
            self.put_pass_reply(ended);
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        // A client that stops reading its replies blocks this write, and
        // with it the idle timeout: bound the write by that timeout.
        let limit = self.ctx.config.idle_timeout();
        let result = tokio::time::timeout(limit, self.writer.write_all(&self.pending))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "the client stopped reading replies"))?;
        self.pending.clear();
        self.holding = false;
        self.hold_until = None;
        result
    }

    fn deadline(&self) -> Instant {
        if self.session.user().is_some() {
            Instant::now() + self.ctx.config.idle_timeout()
        } else {
            // The login timeout counts from the connection, not from the
            // last command: NOOPs (or anything else) before logging in
            // must not hold a session open forever.
            self.login_by
        }
    }

    /// Closes data channels that a PASV, PORT, MODE, DCAU or PROT made
    /// stale (GFD.20: cached connections belong to one setup).
    fn sync_channels(&mut self) {
        let generation = self.session.data_generation();
        if self.channels.generation != generation {
            self.channels = DataChannels { generation, ..DataChannels::default() };
        }
    }

    /// Serves the session. However it ends, no transfer outlives it: a
    /// transfer still running when the control connection fails (a reply
    /// that cannot be written) is stopped and waited for here, so its
    /// upload's claim on the name goes at once, not after the data timeout.
    async fn run(&mut self, commands: mpsc::Receiver<Parsed>) -> std::io::Result<()> {
        let mut active: Option<ActiveTransfer> = None;
        let result = self.converse(commands, &mut active).await;
        if let Some(t) = active.take() {
            // Only an error leaves a transfer behind; nothing more can be
            // said on this connection.
            self.cancel_running();
            self.end_transfer(t, false).await;
        }
        result
    }

    async fn converse(
        &mut self,
        mut commands: mpsc::Receiver<Parsed>,
        active: &mut Option<ActiveTransfer>,
    ) -> std::io::Result<()> {
        let greeting = self.session.greeting();
        self.send(&greeting).await?;
        let mut queue: VecDeque<Queued> = VecDeque::new();
        let mut clock = MarkerClock::default();
        let mut deadline = self.deadline();
        // While busy the loop reads no command once its queue is full (and
        // the reader then stops reading the socket), so a hang-up would go
        // unseen until the transfer ended by itself: the socket's state is
        // looked at too.
        let mut hang_up_check = tokio::time::interval(HANG_UP_CHECK);
        hang_up_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let idle = active.is_none() && self.running.is_none();
            if idle && self.pass.is_none() && *self.drain.borrow() {
                // The server is shutting down: transfers finish, then go.
                let r = Reply::new(ReplyCode::SERVICE_UNAVAILABLE, "Server shutting down; try again later.");
                self.send(&r).await?;
                let _ = self.writer.shutdown().await;
                return Ok(());
            }
            // While a batch's durability pass runs, only the next batch
            // line's commands go ahead of its final reply, and not that
            // line's own end: a second pass waits for the first.
            let may_pop = self.pass.is_none()
                || queue.front().is_some_and(|(c, _, _, line)| *line && !matches!(c, Ok(Command::BatchEnd { .. })));
            if idle && may_pop {
                if let Some((cmd, batch, facts, from_line)) = queue.pop_front() {
                    // Kept while the command's transfer runs: its failure
                    // fails the batch (`Finished` below).
                    self.batch = batch;
                    self.facts = facts;
                    self.from_line = from_line;
                    // A streamed download line runs as one RETR of its
                    // first file whose data is the line's files back to
                    // back (docs/batch.md, "The streamed batch").
                    let cmd = match cmd {
                        Ok(Command::Batch(b)) if b.stream && !b.files.is_empty() => {
                            self.stream = Some(Arc::new(self.stream_files(&b)));
                            match b.kind {
                                // A streamed upload line: its ALLO (the
                                // total) ran before, its final reply runs
                                // after (docs/batch.md, "The streamed upload").
                                ferry_proto::batch::BatchKind::Store => Ok(Command::Stor(b.files[0].path.clone())),
                                ferry_proto::batch::BatchKind::Retrieve => Ok(Command::Retr(b.files[0].path.clone())),
                            }
                        }
                        cmd => {
                            self.stream = None;
                            cmd
                        }
                    };
                    let is_store = matches!(cmd, Ok(Command::Stor(_)));
                    let flow = match cmd {
                        Ok(Command::BatchEnd { files }) => {
                            if self.batch.as_ref().is_some_and(|b| b.has_failed()) {
                                // The lines the client sent behind the failed
                                // one, before it could read of the failure:
                                // their data went to the connections the
                                // failure closed (docs/batch.md). Read before
                                // the final reply goes out, so that a line
                                // sent after the client read it is not
                                // among them.
                                while queue.len() < MAX_QUEUED {
                                    let Ok(next) = commands.try_recv() else { break };
                                    self.enqueue(next, &mut queue);
                                }
                                for (_, b, _, _) in &queue {
                                    if let Some(b) = b {
                                        b.fail();
                                    }
                                }
                            }
                            self.end_batch(files).await
                        }
                        Ok(Command::Stor(_)) if self.batch.as_ref().is_some_and(|b| b.has_failed()) => {
                            let r = Reply::new(
                                ReplyCode::LOCAL_ERROR,
                                "Not run: an earlier file of this batch failed, and this file's data may already be on its way.",
                            );
                            self.send(&r).await.map(|()| Flow::Continue)
                        }
                        cmd => self.process(cmd, active).await,
                    };
                    if is_store && active.is_none() {
                        // Refused before any data was read.
                        self.fail_batch();
                    }
                    match flow? {
                        Flow::Continue => {}
                        Flow::Close => return Ok(()),
                    }
                    deadline = self.deadline();
                    continue;
                }
            }
            // Everything answered so far goes out before the loop waits
            // (a held 125 with its 226).
            if !(self.holding && active.is_some()) {
                self.flush().await?;
            }
            let next_marker = clock.next();
            tokio::select! {
                cmd = commands.recv(), if queue.len() < MAX_QUEUED => {
                    let Some(cmd) = cmd else {
                        self.cancel_running();
                        self.client_gone(active.take()).await;
                        return Ok(());
                    };
                    deadline = self.deadline();
                    let busy = active.is_some() || self.running.is_some();
                    match (busy, &cmd) {
                        (true, Ok(c)) if c.is_urgent() || matches!(c, Command::Noop) => {
                            match self.session.handle(cmd) {
                                Action::AbortTransfer => {
                                    if let Some(t) = active.as_ref() {
                                        t.abort();
                                    }
                                }
                                Action::AbortFileOp => {
                                    if let Some(op) = &self.running {
                                        op.cancel.store(true, Ordering::SeqCst);
                                    }
                                }
                                Action::Reply(r) => self.send(&r).await?,
                                other => tracing::warn!(?other, "unexpected action during a transfer"),
                            }
                        }
                        // A batch (BRET/BSTO, docs/batch.md) is the
                        // pipelined commands it names, queued in its place.
                        // `BSTO SYNC`: one durability pass for the batch,
                        // before its final reply (the expansion's last).
                        (_, Ok(Command::Batch(_))) => self.enqueue(cmd, &mut queue),
                        _ => queue.push_back((cmd, None, None, false)),
                    }
                }
                ended = pass_done(&mut self.pass) => {
                    self.put_pass_reply(ended);
                    self.flush().await?;
                    deadline = self.deadline();
                }
                done = running_done(&mut self.running) => {
                    let result = done.unwrap_or_else(|_| Err(FsError::Other("internal error".into())));
                    self.running = None;
                    let reply = self.session.file_result(result);
                    self.send(&reply).await?;
                    if let Some(r) = self.session.file_abort_reply() {
                        self.send(&r).await?;
                    }
                    deadline = self.deadline();
                }
                ev = next_event(active) => match ev {
                    Some(TransferEvent::DelayedPassive { kind, addr }) => {
                        let reply = self.session.delayed_passive_reply(kind, addr);
                        self.send(&reply).await?;
                    }
                    Some(TransferEvent::Reply(r)) => self.send(&r).await?,
                    Some(TransferEvent::Checkpointed) => {
                        if let Some(t) = active.as_mut().filter(|t| t.request.markers.restart_secs.is_some()) {
                            let new = t.new_ranges();
                            if !new.is_empty() {
                                self.send(&range_marker(&new)).await?;
                            }
                        }
                    }
                    Some(TransferEvent::Started { size, reused }) => {
                        let Some(t) = active.as_ref() else { continue };
                        let what = describe(t);
                        // A `BSTO SYNC` file gets no zero-byte marker at its
                        // start and no final one (below): its client sends
                        // the data without waiting for the 125 and counts
                        // the file at the batch's final reply, and for a
                        // small file the two lines were half its replies
                        // and kept its 125 from going out with its 226
                        // (docs/batch.md, "Replies written together").
                        // Periodic markers still come while it runs.
                        let first_perf = t.request.markers.perf_secs.is_some() && self.batch.is_none();
                        clock = MarkerClock::start(t);
                        let reply = self.session.transfer_started(&what, size, reused);
                        self.send_later(&reply);
                        if first_perf {
                            // Globus sends a zero-byte marker right away.
                            self.send_later(&perf_marker(0));
                        }
                        // A `BSTO SYNC` file's client does not wait for the
                        // 125; a small `BRET` file's 226 comes right after
                        // it: either goes out with the 226 (docs/batch.md).
                        let small_retr = self.from_line
                            && matches!(t.request.kind, ferry_proto::session::TransferKind::Retrieve)
                            && size.is_some_and(|s| s <= HOLD_125_MAX_SIZE);
                        // MODE E only, and never for longer than HOLD_125_FOR:
                        // a client that waits for the 125 all the same (a
                        // stream-mode upload does) loses at most that.
                        let block = t.request.mode == ferry_proto::command::TransferMode::ExtendedBlock;
                        self.holding = block && (self.batch.is_some() || small_retr) && !first_perf;
                        self.hold_until = self.holding.then(|| Instant::now() + HOLD_125_FOR);
                    }
                    Some(TransferEvent::Finished { outcome, channels }) => {
                        clock = MarkerClock::default();
                        self.holding = false;
                        self.hold_until = None;
                        self.channels = channels;
                        self.sync_channels();
                        if !matches!(outcome, TransferOutcome::Complete { .. }) {
                            self.fail_batch();
                        }
                        if let Some(t) = active.take() {
                            self.finish(t, outcome, queue.len()).await?;
                        }
                        deadline = self.deadline();
                    }
                    None => {
                        // The task vanished without reporting (it panicked).
                        clock = MarkerClock::default();
                        if let Some(t) = active.take() {
                            let outcome = TransferOutcome::Failed(TransferError::Local("internal error".into()));
                            self.finish(t, outcome, queue.len()).await?;
                        }
                    }
                },
                _ = sleep_until_opt(self.hold_until), if self.hold_until.is_some() => {
                    self.flush().await?;
                }
                _ = sleep_until_opt(next_marker), if next_marker.is_some() && active.is_some() => {
                    let now = Instant::now();
                    if let (Some(t), Some((every, at))) = (active.as_mut(), clock.perf.as_mut()) {
                        if *at <= now {
                            *at = now + *every;
                            let bytes = t.progress.load(Ordering::Relaxed);
                            self.send(&perf_marker(bytes)).await?;
                        }
                    }
                }
                _ = self.drain.changed(), if !*self.drain.borrow() => {}
                _ = hang_up_check.tick(), if active.is_some() || self.running.is_some() => {
                    if self.control_closed.load(Ordering::SeqCst) || transfer::hung_up(self.probe.as_fd()) {
                        tracing::debug!(peer = %self.peer, queued = queue.len(), "the client hung up during a transfer");
                        self.cancel_running();
                        self.client_gone(active.take()).await;
                        return Ok(());
                    }
                }
                _ = tokio::time::sleep_until(deadline), if active.is_none() && self.running.is_none() && self.pass.is_none() => {
                    let text = if self.session.user().is_some() {
                        format!("Idle for {} s; closing the control connection.", self.ctx.config.idle_timeout_secs)
                    } else {
                        format!("Not logged in after {} s; closing the control connection.", self.ctx.config.login_timeout_secs)
                    };
                    self.send(&Reply::new(ReplyCode::SERVICE_UNAVAILABLE, text)).await?;
                    return Ok(());
                }
            }
        }
    }

    /// Queues a command read while idle or one that does not interrupt a
    /// transfer. A batch (BRET/BSTO, docs/batch.md) is the pipelined
    /// commands it names, queued in its place. `BSTO SYNC`: one durability
    /// pass for the batch, before its final reply (the expansion's last).
    fn enqueue(&self, cmd: Parsed, queue: &mut VecDeque<Queued>) {
        let Ok(Command::Batch(b)) = cmd else {
            queue.push_back((cmd, None, None, false));
            return;
        };
        if b.stream && b.kind == ferry_proto::batch::BatchKind::Retrieve {
            tracing::debug!(target: "ferry::dialogue", peer = %self.peer, "> BRET STREAM ({} files)", b.files.len());
            queue.push_back((Ok(Command::Batch(b)), None, None, true));
            return;
        }
        if b.stream {
            // `ALLO <total>`, the line as its first file's STOR, the
            // batch's final reply (`Batch::expand`).
            tracing::debug!(target: "ferry::dialogue", peer = %self.peer, "> BSTO STREAM ({} files)", b.files.len());
            tracing::info!(peer = %self.peer, files = b.files.len(), "a BSTO STREAM line");
            let batch = Arc::new(BatchDurability::shared(self.ctx.config.batch_sync, self.ctx.batch_passes.clone()));
            let mut expanded = b.expand().into_iter();
            let allo = expanded.next();
            let end = expanded.last();
            for c in [allo, Some(Command::Batch(b)), end].into_iter().flatten() {
                queue.push_back((Ok(c), Some(batch.clone()), None, true));
            }
            return;
        }
        tracing::debug!(target: "ferry::dialogue", peer = %self.peer, "> {} ({} files{})", b.verb(), b.files.len(), if b.sync { ", durable at the end" } else { "" });
        let batch = b
            .sync
            .then(|| Arc::new(BatchDurability::shared(self.ctx.config.batch_sync, self.ctx.batch_passes.clone())));
        // An entry's facts go with its STOR (the expansion's ALLO + STOR
        // per entry).
        let mut facts = b.files.iter().map(|f| f.facts.clone());
        queue.extend(b.expand().into_iter().map(|c| {
            let f = if matches!(c, Command::Stor(_)) { facts.next().flatten() } else { None };
            (Ok(c), batch.clone(), f, true)
        }));
    }

    /// A `BRET STREAM` line's files, resolved as its RETRs would be (from
    /// the working directory when the line runs).
    fn stream_files(&self, b: &ferry_proto::batch::Batch) -> transfer::StreamFiles {
        let cwd = self.session.cwd();
        transfer::StreamFiles {
            files: b
                .files
                .iter()
                .map(|f| (cwd.resolve(&f.path).map_err(|e| e.to_string()), f.path.clone(), f.size.unwrap_or(0)))
                .collect(),
            facts: b.files.iter().map(|f| f.facts.clone()).collect(),
        }
    }

    /// A file of a `BSTO SYNC` batch was refused or failed: the client
    /// sends a batch's data without waiting for each file's 125, so what
    /// is on the data channel may be this file's; the channel is closed
    /// and no later file of the batch runs (each is answered 451).
    fn fail_batch(&mut self) {
        if let Some(b) = &self.batch {
            b.fail();
            let generation = self.channels.generation;
            self.channels = DataChannels { generation, ..DataChannels::default() };
        }
    }

    /// The end of a `BSTO SYNC` batch: one durability pass over the files
    /// it committed (each already renamed under its name), then the final
    /// reply — 250 only when every one of them is durable. The pass runs
    /// beside the loop ([`Control::pass`]); the loop only pops this
    /// command when no other pass runs.
    async fn end_batch(&mut self, files: usize) -> std::io::Result<Flow> {
        // The batch's last replies go out before its durability pass.
        self.flush().await?;
        let Some(batch) = self.batch.take() else {
            self.send(&Reply::new(ReplyCode::BAD_SEQUENCE, "No batch to end.")).await?;
            return Ok(Flow::Continue);
        };
        // At most one pass per interval for this session.
        let wait = if batch.pending() > 0 { self.batch_passes.next_pass() } else { Duration::ZERO };
        let peer = self.peer;
        self.pass = Some(tokio::spawn(async move {
            let started = Instant::now();
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let noun = if files == 1 { "file" } else { "files" };
            let pass = batch.clone();
            let result = tokio::task::spawn_blocking(move || pass.finish())
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
            match result {
                Ok(synced) if batch.has_failed() => Reply::new(
                    ReplyCode::LOCAL_ERROR,
                    format!("Batch of {files} {noun} failed; the {synced} stored are durable."),
                ),
                Ok(synced) => {
                    tracing::info!(%peer, files, synced, ms = started.elapsed().as_secs_f64() * 1e3, "batch durable");
                    Reply::new(ReplyCode::FILE_ACTION_OK, format!("Batch of {files} {noun}: {synced} stored, durable."))
                }
                Err(e) => {
                    tracing::warn!(%peer, files, error = %e, "the batch's durability pass failed");
                    Reply::new(
                        ReplyCode::LOCAL_ERROR,
                        format!("Batch of {files} {noun}: could not make them durable ({e}); send them again."),
                    )
                }
            }
        }));
        Ok(Flow::Continue)
    }

    /// A batch's durability pass ended: its final reply goes in front of
    /// every reply held while it ran (the next line's ALLO, 150, markers
    /// and 226, in the order they were made), for the next flush.
    fn put_pass_reply(&mut self, ended: Result<Reply, tokio::task::JoinError>) {
        self.pass = None;
        let reply = ended.unwrap_or_else(|e| {
            Reply::new(ReplyCode::LOCAL_ERROR, format!("The batch's durability pass failed ({e}); send it again."))
        });
        let bytes = reply.to_bytes();
        self.log_reply(&bytes);
        self.pending.splice(0..0, bytes);
    }

    /// Stops a running file operation (a checksum stops between reads).
    fn cancel_running(&mut self) {
        if let Some(op) = self.running.take() {
            op.cancel.store(true, Ordering::SeqCst);
        }
    }

    /// The client closed the control connection: stop a running transfer,
    /// wait for it so it is logged and its files are closed.
    async fn client_gone(&mut self, active: Option<ActiveTransfer>) {
        if let Some(t) = active {
            self.end_transfer(t, true).await;
        }
    }

    /// Stops `t` and waits for it, so it is logged and its files are
    /// closed (an upload's partial is recorded and its name released).
    /// `reply`: the final replies are still worth trying to send.
    async fn end_transfer(&mut self, mut t: ActiveTransfer, reply: bool) {
        t.abort();
        let mut outcome = None;
        while let Some(ev) = t.events.recv().await {
            if let TransferEvent::Finished { outcome: o, .. } = ev {
                outcome = Some(o);
            }
        }
        // What the task found (a missing file) stays the reason; only a
        // transfer cut short by the hang-up is "connection lost".
        let outcome = match outcome {
            Some(TransferOutcome::Failed(TransferError::Aborted)) | None => TransferOutcome::Failed(
                TransferError::ConnectionLost("the client closed the control connection".into()),
            ),
            Some(o) => o,
        };
        if reply {
            if self.finish(t, outcome, 0).await.is_ok() {
                let _ = self.flush().await;
            }
        } else {
            self.log_finished(&t, &outcome, 0);
        }
    }

    /// Logs a finished transfer (and counts it in the metrics).
    fn log_finished(&self, t: &ActiveTransfer, outcome: &TransferOutcome, queued: usize) {
        let secs = t.started.elapsed().as_secs_f64();
        let bytes = t.progress.load(Ordering::Relaxed);
        let direction = match t.request.kind {
            TransferKind::Retrieve => Some("send"),
            TransferKind::Store | TransferKind::Append => Some("receive"),
            TransferKind::List { .. } => None,
        };
        let status = match outcome {
            TransferOutcome::Complete { .. } => "complete".to_string(),
            TransferOutcome::Failed(e) => format!("failed: {}", transfer_words(e)),
        };
        let mode = match t.request.mode {
            ferry_proto::command::TransferMode::Stream => "stream",
            ferry_proto::command::TransferMode::ExtendedBlock => "extended block",
        };
        // UDT's counters over the transfer (process-wide: a concurrent
        // transfer's packets count too); absent when no UDT packet moved.
        let udt = ferry_io::udt::totals().since(&t.udt_before);
        let udt = (udt.counters.packets_sent + udt.counters.packets_received > 0).then(|| udt.to_string());
        if let Some(direction) = direction {
            self.ctx.metrics.transfer(direction, matches!(outcome, TransferOutcome::Complete { .. }), bytes);
            tracing::info!(
                target: "ferry::transfer",
                peer = %self.peer,
                user = %self.user,
                path = %t.request.path,
                direction,
                mode,
                restart = t.request.restart.is_some(),
                reused = t.request.channel.reuse,
                transport = %t.request.channel.transport,
                protected = t.request.protected,
                queued,
                bytes,
                // Numbers, not strings, in JSON logs.
                seconds = (secs * 1e3).round() / 1e3,
                rate_mb_s = (bytes as f64 / secs.max(1e-9) / 1e5).round() / 10.0,
                status = %status,
                udt = udt.as_deref(),
                // Bytes of its staging ring; 0 without one.
                staging = t.staging.load(Ordering::Relaxed),
                "transfer finished"
            );
        }
    }

    /// Logs a finished transfer and sends its final markers and replies.
    /// `queued`: commands the client pipelined behind it.
    async fn finish(&mut self, mut t: ActiveTransfer, outcome: TransferOutcome, queued: usize) -> std::io::Result<()> {
        self.log_finished(&t, &outcome, queued);
        let bytes = t.progress.load(Ordering::Relaxed);
        if matches!(outcome, TransferOutcome::Complete { .. }) {
            // The final markers come just before the 226, as Globus sends them
            // (not for a `BSTO SYNC` file: above, at `Started`).
            if t.request.markers.perf_secs.is_some() && self.batch.is_none() {
                self.send_later(&perf_marker(bytes));
            }
            if t.request.markers.restart_secs.is_some() {
                // Committed: every byte is on disk and marked durable.
                let new = t.new_ranges();
                if !new.is_empty() {
                    self.send_later(&range_marker(&new));
                }
            }
        }
        for reply in self.session.transfer_finished(&t.request.path, outcome) {
            self.send_later(&reply);
        }
        Ok(())
    }

    async fn process(&mut self, cmd: Parsed, active: &mut Option<ActiveTransfer>) -> std::io::Result<Flow> {
        match &cmd {
            // The control dialogue at debug level, the password masked.
            Ok(Command::Pass(_)) => tracing::debug!(target: "ferry::dialogue", peer = %self.peer, "> PASS ****"),
            Ok(c) => tracing::debug!(target: "ferry::dialogue", peer = %self.peer, "> {c}"),
            Err(e) => tracing::debug!(target: "ferry::dialogue", peer = %self.peer, "> (unparsable: {e})"),
        }
        if let Ok(Command::Site(ferry_proto::command::SiteCommand::ClientInfo(info))) = &cmd {
            tracing::debug!(peer = %self.peer, %info, "client info");
        }
        let is_auth = matches!(cmd, Ok(Command::Auth(_)));
        let action = self.session.handle(cmd);
        if is_auth && !matches!(action, Action::StartTls(_)) {
            // The clear-text reader waits after every AUTH line.
            if let Some(gate) = &self.gate {
                let _ = gate.send(Gate::Continue).await;
            }
        }
        let flow = self.act(action, active).await;
        if active.is_none() {
            self.sync_channels();
        }
        flow
    }

    async fn act(&mut self, action: Action, active: &mut Option<ActiveTransfer>) -> std::io::Result<Flow> {
        match action {
            // Written with the replies that follow it, or before the loop
            // waits.
            Action::Reply(r) => self.send_later(&r),
            Action::Close(r) => {
                self.send(&r).await?;
                let _ = self.writer.shutdown().await;
                return Ok(Flow::Close);
            }
            Action::StartTls(r) => {
                self.send(&r).await?;
                return self.start_tls().await;
            }
            Action::Login(req) => {
                // An address locked out after repeated failures is refused
                // without its password being checked (lockout.rs). The
                // attempt counts from now, not from when it fails: checks
                // under way count against the threshold too.
                let ctx = self.ctx.clone();
                let attempt = match ctx.lockout.begin(self.peer.ip()) {
                    Ok(a) => a,
                    Err(left) => {
                        self.send(&Reply::new(ReplyCode::SERVICE_UNAVAILABLE, crate::lockout::refusal(left))).await?;
                        let _ = self.writer.shutdown().await;
                        return Ok(Flow::Close);
                    }
                };
                let granted = self.login(req).await;
                if granted.is_none() {
                    attempt.failed();
                    tokio::time::sleep(Duration::from_millis(self.ctx.config.login_failure_delay_ms)).await;
                } else {
                    drop(attempt);
                }
                let next = self.session.login_result(granted);
                return Box::pin(self.act(next, active)).await;
            }
            Action::File(op @ (FileOp::Checksum { .. } | FileOp::Partial(_))) => {
                let Some(root) = self.root.clone() else {
                    let reply = self.session.file_result(Err(FsError::PermissionDenied));
                    self.send(&reply).await?;
                    return Ok(Flow::Continue);
                };
                self.running = Some(self.start_long_op(root, op));
            }
            Action::File(op) => {
                let change = change_of(&op);
                let reply = match self.root.clone() {
                    Some(root) => {
                        let ctx = self.ctx.clone();
                        let closed = self.control_closed.clone();
                        let result = tokio::task::spawn_blocking(move || file_op(&root, &ctx, op, &closed))
                            .await
                            .unwrap_or_else(|e| Err(FsError::Other(e.to_string())));
                        if let Some((operation, path, to)) = change {
                            // Changes to the tree are logged as transfers are.
                            let status = match &result {
                                Ok(_) => "complete".to_string(),
                                Err(e) => format!("failed: {}", fs_words(e)),
                            };
                            tracing::info!(
                                target: "ferry::change",
                                peer = %self.peer,
                                user = %self.user,
                                operation,
                                path = %path,
                                to = to.as_deref().unwrap_or(""),
                                status = %status,
                                "file changed"
                            );
                        }
                        self.session.file_result(result)
                    }
                    None => self.session.file_result(Err(FsError::PermissionDenied)),
                };
                self.send(&reply).await?;
            }
            Action::Passive(ferry_proto::session::PassiveKind::Spas) if self.ctx.config.striped() => {
                // Striping (issue 20): one listener per data node.
                let generation = self.session.data_generation();
                self.channels = DataChannels { generation, ..DataChannels::default() };
                let result = self.stripes.passive(&self.ctx, generation, self.session.buffer_size()).await;
                let reply = self.session.striped_passive_result(result);
                self.send(&reply).await?;
            }
            Action::Passive(_) => {
                let generation = self.session.data_generation();
                self.channels = DataChannels { generation, ..DataChannels::default() };
                let opts = ferry_io::transport::ChannelOptions {
                    buffer: self.session.buffer_size(),
                    // The listener's UDT connections start at the
                    // client's measured rate (OPTS TPRT Rate=N;).
                    path_rate: self.session.path_rate().map(|r| r as f64),
                    ..ferry_io::transport::ChannelOptions::new(self.ctx.config.data_timeout())
                };
                let transport = crate::transfer::transport_for(&self.ctx, self.session.data_transport());
                let result =
                    self.ctx.ports.bind(&*transport, self.local.ip(), &opts).map_err(|e| e.to_string()).and_then(|l| {
                        let mut addr = l.local_addr().map_err(|e| e.to_string())?;
                        if let (Some(public), SocketAddr::V4(_)) = (self.ctx.config.passive_address, addr) {
                            addr.set_ip(public.into());
                        }
                        self.channels.listener = Some(l);
                        Ok(addr)
                    });
                let reply = self.session.passive_result(result);
                self.send(&reply).await?;
            }
            Action::Transfer(req) if self.stripes.takes(&req, &self.session) => {
                // Striping (issue 20): the data nodes move the data.
                let Some(root) = self.root.clone() else {
                    return Ok(Flow::Continue);
                };
                let plan = crate::stripe::front::StripePlan::of(&self.session, &req, self.peer.ip(), &self.user);
                *active = Some(self.stripes.spawn(req, plan, self.ctx.clone(), root));
            }
            Action::Transfer(req) => {
                let Some(root) = self.root.clone() else {
                    return Ok(Flow::Continue);
                };
                let peer = self.session.data_peer().filter(|_| req.channel.transport.needs_tls());
                let protection = match (&self.ctx.tls(), req.protected, peer) {
                    // A third-party QUIC data channel (DCAU S): the other
                    // server's certificate is verified for its name.
                    // Without a trust store or with a name that is not one,
                    // nothing is opened (Clear: QUIC refuses), never an
                    // unverified channel.
                    (Some(tls), true, Some(name)) => {
                        match (&tls.peer_trust, rustls::pki_types::ServerName::try_from(name.to_string())) {
                            (Some(trust), Ok(name)) => ferry_io::tls::DataProtection::Peer {
                                config: tls.data.clone(),
                                name,
                                trust: trust.clone(),
                            },
                            _ => ferry_io::tls::DataProtection::Clear,
                        }
                    }
                    (Some(tls), true, _) => ferry_io::tls::DataProtection::Server(tls.data.clone()),
                    _ => ferry_io::tls::DataProtection::Clear,
                };
                self.sync_channels();
                // One TCP_INFO for both round trips.
                let info = ferry_io::tcpinfo::tcp_info(&self.probe);
                let ctx = TransferContext {
                    user: self.user.clone(),
                    control: self.probe.clone(),
                    server: self.ctx.clone(),
                    root,
                    channels: std::mem::take(&mut self.channels),
                    peer_ip: self.peer.ip(),
                    local_ip: self.local.ip(),
                    control_closed: self.control_closed.clone(),
                    rtt: info.as_ref().map(|i| i.rtt()).unwrap_or_default(),
                    path_rtt: info.as_ref().map(|i| i.path_rtt()).unwrap_or_default(),
                    streams: self.profiler.registry(),
                    protection,
                    // Only a session that negotiated encrypted UDT gets the
                    // secret: any other UDT channel under PROT P is refused.
                    sealing: self.udt_secret.clone().filter(|_| self.session.udt_sealed()),
                    batch: self.batch.clone(),
                    facts: self.facts.clone(),
                    from_line: self.from_line,
                    stream: self.stream.clone(),
                };
                self.channels.generation = ctx.channels.generation;
                *active = Some(transfer::spawn(req, ctx));
            }
            Action::AbortTransfer | Action::AbortFileOp => {}
            Action::Profile(req) => {
                let may = self.ctx.users().may_profile(&self.user);
                let reply = self.profiler.handle(req, may).await;
                self.send(&reply).await?;
            }
        }
        Ok(Flow::Continue)
    }

    /// Starts a checksum (CKSM, SITE PARTIAL) beside the control loop. At
    /// most `max_checksums` run server-wide; the others wait for a slot
    /// (without a thread), and ABOR or the client leaving stops one
    /// waiting or running.
    fn start_long_op(&self, root: Arc<Root>, op: FileOp) -> RunningOp {
        let (tx, done) = oneshot::channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let (ctx, closed, stop) = (self.ctx.clone(), self.control_closed.clone(), cancel.clone());
        let closed_now = self.control_closed.clone();
        let peer = self.peer;
        tokio::spawn(async move {
            let slots = ctx.checksum_slots.clone();
            let permit = match slots.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) => {
                    tracing::info!(%peer, limit = ctx.config.max_checksums, "checksum waits for a free slot");
                    loop {
                        tokio::select! {
                            p = slots.clone().acquire_owned() => break p.expect("never closed"),
                            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                                if stop.load(Ordering::SeqCst) || closed.load(Ordering::SeqCst) {
                                    tracing::info!(%peer, "checksum abandoned before it started");
                                    let _ = tx.send(Err(FsError::Aborted));
                                    return;
                                }
                            }
                        }
                    }
                }
            };
            let abandoned = move || stop.load(Ordering::SeqCst) || closed.load(Ordering::SeqCst);
            let result = tokio::task::spawn_blocking(move || {
                let _permit = permit;
                long_file_op(&root, &ctx, op, &abandoned)
            })
            .await
            .unwrap_or_else(|e| Err(FsError::Other(e.to_string())));
            if result == Err(FsError::Aborted) {
                if closed_now.load(Ordering::SeqCst) {
                    tracing::info!(%peer, "checksum abandoned: the client closed the connection");
                } else {
                    tracing::info!(%peer, "checksum stopped by ABOR");
                }
            }
            let _ = tx.send(result);
        });
        RunningOp { done, cancel }
    }

    /// Runs the TLS handshake after the `234` (RFC 4217 §4). A failed
    /// handshake leaves nothing to talk over: the connection is closed.
    async fn start_tls(&mut self) -> std::io::Result<Flow> {
        let Some(tls) = self.ctx.tls() else { return Ok(Flow::Close) };
        let Some(gate) = self.gate.take() else { return Ok(Flow::Close) };
        let (back_tx, back_rx) = oneshot::channel();
        if gate.send(Gate::Handover(back_tx)).await.is_err() {
            return Ok(Flow::Close);
        }
        let Ok(Handover { rd, tx, early }) = back_rx.await else { return Ok(Flow::Close) };
        if early > 0 {
            // Whatever came before the 234 was read as clear text; the
            // handshake cannot be resumed from the middle.
            tracing::warn!(peer = %self.peer, early, "bytes sent after AUTH TLS before its reply; closing");
            return Ok(Flow::Close);
        }
        let ControlWriter::Plain(wr) = std::mem::replace(&mut self.writer, ControlWriter::Detached) else {
            return Ok(Flow::Close);
        };
        let stream = match rd.reunite(wr) {
            Ok(s) => s,
            Err(_) => return Ok(Flow::Close),
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.control.clone());
        let timeout = self.ctx.config.login_timeout();
        let stream = match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::warn!(peer = %self.peer, error = %e, "TLS handshake on the control connection failed");
                return Ok(Flow::Close);
            }
            Err(_) => {
                tracing::warn!(peer = %self.peer, "TLS handshake on the control connection timed out");
                return Ok(Flow::Close);
            }
        };
        let (_, conn) = stream.get_ref();
        self.udt_secret = ferry_io::transport::udt_seal::SealSecret::export(&**conn);
        let identity = tls.identity(conn.peer_certificates());
        tracing::info!(
            peer = %self.peer,
            version = ?conn.protocol_version(),
            cipher = ?conn.negotiated_cipher_suite().map(|c| c.suite()),
            client_certificate = identity.subject.as_deref().unwrap_or("-"),
            mapped_to = %identity.users.join(","),
            "control connection protected by TLS"
        );
        let (rd, wr) = tokio::io::split(stream);
        self.writer = ControlWriter::Tls(wr);
        self.reader = tokio::spawn(read_tls(rd, tx, self.control_closed.clone()));
        self.session.tls_started(identity);
        Ok(Flow::Continue)
    }

    /// Checks credentials; on success binds the session to its root.
    async fn login(&mut self, req: LoginRequest) -> Option<Grant> {
        let (grant, home) = match req {
            LoginRequest::Anonymous { access, .. } => (Grant { user: "anonymous".into(), access }, VirtualPath::root()),
            LoginRequest::Certificate { user, subject } => {
                // The certificate was verified in the handshake and the
                // map says it speaks for `user`; the users file still
                // decides the root and the access.
                let Some(entry) = self.ctx.users().get(&user).cloned() else {
                    tracing::warn!(peer = %self.peer, %user, %subject, "certificate mapped to a user not in the users file");
                    return None;
                };
                tracing::info!(peer = %self.peer, %user, %subject, "login by client certificate");
                let home = VirtualPath::root().resolve(&entry.root).ok()?;
                (Grant { user: entry.name.clone(), access: entry.access.into() }, home)
            }
            LoginRequest::Password { user, password } => {
                let ctx = self.ctx.clone();
                // On the password threads (passwords.rs): each check takes
                // 19 MiB, so they must not run once per client at a time.
                let check = ctx.clone();
                let tried = user.clone();
                let entry = ctx.passwords.run(move || check.users().verify(&user, &password).cloned()).await.flatten();
                let Some(entry) = entry else {
                    self.ctx.metrics.login(false);
                    tracing::warn!(peer = %self.peer, user = %tried, "failed login");
                    return None;
                };
                let home = VirtualPath::root().resolve(&entry.root).ok()?;
                (Grant { user: entry.name.clone(), access: entry.access.into() }, home)
            }
        };
        let root = if home.is_root() {
            self.ctx.root.clone()
        } else {
            match self.ctx.root.subroot(&home) {
                Ok(r) => Arc::new(r),
                Err(e) => {
                    tracing::error!(user = %grant.user, home = %home, error = %fs_words(&e), "user's root is not usable");
                    return None;
                }
            }
        };
        let access = match grant.access {
            ferry_proto::session::Access::ReadOnly => "read-only",
            ferry_proto::session::Access::ReadWrite => "read-write",
        };
        self.ctx.metrics.login(true);
        tracing::info!(peer = %self.peer, user = %grant.user, access, "login");
        self.user = grant.user.clone();
        self.root = Some(root);
        Some(grant)
    }
}

fn describe(t: &ActiveTransfer) -> String {
    match t.request.kind {
        TransferKind::List { .. } => "directory listing".to_string(),
        _ => t.request.path.to_string(),
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn pass_done(pass: &mut Option<JoinHandle<Reply>>) -> Result<Reply, tokio::task::JoinError> {
    match pass {
        Some(p) => p.await,
        None => std::future::pending().await,
    }
}

async fn running_done(running: &mut Option<RunningOp>) -> Result<Result<FileDone, FsError>, oneshot::error::RecvError> {
    match running {
        Some(op) => (&mut op.done).await,
        None => std::future::pending().await,
    }
}

async fn next_event(active: &mut Option<ActiveTransfer>) -> Option<TransferEvent> {
    match active {
        Some(t) => t.events.recv().await,
        None => std::future::pending().await,
    }
}

/// Facts of the virtual `/dev/zero` and `/dev/null` (with `memory_paths`).
fn memory_facts(ctx: &ServerContext, path: &VirtualPath) -> Option<ferry_proto::facts::FileFacts> {
    let size = match path.as_str() {
        "/dev/zero" => ctx.config.memory_zero_size,
        "/dev/null" => 0,
        _ => return None,
    };
    ctx.config.memory_paths.then(|| ferry_proto::facts::FileFacts {
        name: path.file_name().unwrap_or_default().to_string(),
        kind: ferry_proto::facts::FileKind::File,
        size,
        modified: 0,
        mode: 0o666,
        uid: 0,
        gid: 0,
        nlink: 1,
        unique: (0, if size == 0 { 1 } else { 2 }),
    })
}

/// A checksum (CKSM of a file, or of a partial upload's ranges), on a
/// blocking thread; `abandoned` says ABOR came or the client has gone.
fn long_file_op(
    root: &Root,
    ctx: &ServerContext,
    op: FileOp,
    abandoned: &dyn Fn() -> bool,
) -> Result<FileDone, FsError> {
    match op {
        FileOp::Checksum { path, algorithm, offset, length } => {
            let r = ctx.checksums.get_or_compute(root, &path, &algorithm, offset, length, abandoned);
            if r.is_err() && abandoned() {
                return Err(FsError::Aborted);
            }
            r.map(FileDone::Checksum)
        }
        FileOp::Partial(path) => {
            let r = root.partial_facts(&path, abandoned);
            if r.is_err() && abandoned() {
                return Err(FsError::Aborted);
            }
            r.map(FileDone::Partial)
        }
        other => file_op(root, ctx, other, &AtomicBool::new(false)),
    }
}

/// Runs a file-system command on a blocking thread.
fn file_op(root: &Root, ctx: &ServerContext, op: FileOp, _closed: &AtomicBool) -> Result<FileDone, FsError> {
    match &op {
        FileOp::Size(p) | FileOp::Facts(p) => {
            if let Some(f) = memory_facts(ctx, p) {
                return Ok(match op {
                    FileOp::Size(_) => FileDone::Size(f.size),
                    _ => FileDone::Facts(f),
                });
            }
        }
        _ => {}
    }
    match op {
        FileOp::ChangeDir(p) => root.is_dir(&p).map(|_| FileDone::Done),
        FileOp::MakeDir(p) => root.make_dir(&p).map(|_| FileDone::Done),
        FileOp::RemoveDir(p) => root.remove_dir(&p).map(|_| FileDone::Done),
        FileOp::Delete(p) => root.remove_file(&p).map(|_| FileDone::Done),
        FileOp::RenameFrom(p) => root.exists(&p).map(|_| FileDone::Done),
        FileOp::Rename { from, to } => root.rename(&from, &to).map(|_| FileDone::Done),
        FileOp::Size(p) => {
            let f = root.facts(&p)?;
            if f.kind == ferry_proto::facts::FileKind::Dir {
                return Err(FsError::IsADirectory);
            }
            Ok(FileDone::Size(f.size))
        }
        FileOp::ModTime(p) => root.facts(&p).map(|f| FileDone::ModTime(f.modified)),
        FileOp::SetModTime { path, unix_secs } => root.set_modified(&path, unix_secs).map(FileDone::ModTime),
        FileOp::Utime { path, unix_secs } => root.set_modified(&path, unix_secs).map(|_| FileDone::Done),
        FileOp::Chgrp { path, group } => {
            let gid = crate::groups::allowed_gid(&group)?;
            root.chgrp(&path, gid).map(|_| FileDone::Done)
        }
        FileOp::Facts(p) => root.facts(&p).map(FileDone::Facts),
        FileOp::StatListing(p) => root.list(&p, false).map(FileDone::Listing),
        FileOp::Chmod { path, mode } => root.chmod(&path, mode).map(|_| FileDone::Done),
        op @ (FileOp::Checksum { .. } | FileOp::Partial(_)) => long_file_op(root, ctx, op, &|| false),
    }
}

/// A file-system error in words, for logs.
fn fs_words(e: &FsError) -> String {
    match e {
        FsError::NotFound => "no such file or directory".into(),
        FsError::PermissionDenied => "permission denied".into(),
        FsError::AlreadyExists => "already exists".into(),
        FsError::NotADirectory => "not a directory".into(),
        FsError::IsADirectory => "is a directory".into(),
        FsError::DirectoryNotEmpty => "directory not empty".into(),
        FsError::Escapes => "leads outside the served directory".into(),
        FsError::InvalidName(why) => format!("invalid name ({why})"),
        FsError::NoSpace => "no space left".into(),
        FsError::HardLinked => "has other hard links; not changed in place".into(),
        FsError::NotRegularFile => "not a regular file".into(),
        FsError::UploadInProgress => "an upload to this name is in progress".into(),
        FsError::TooLarge(max) => format!("beyond the largest file this server stores ({max} bytes)"),
        FsError::Aborted => "aborted by ABOR".into(),
        FsError::Refused(why) | FsError::Other(why) => why.clone(),
    }
}

/// Why a transfer failed, in words, for logs.
fn transfer_words(e: &TransferError) -> String {
    match e {
        TransferError::File(f) => fs_words(f),
        TransferError::DataConnection(why) => format!("no data connection ({why})"),
        TransferError::ConnectionLost(why) => format!("connection lost ({why})"),
        TransferError::Aborted => "aborted by the client".into(),
        TransferError::NoSpace => "no space left".into(),
        TransferError::Local(why) => why.clone(),
        TransferError::BadRestart(why) => format!("bad restart ({why})"),
    }
}

/// The operations that change the tree, for the log: (operation, path,
/// new name).
fn change_of(op: &FileOp) -> Option<(&'static str, String, Option<String>)> {
    match op {
        FileOp::MakeDir(p) => Some(("mkdir", p.to_string(), None)),
        FileOp::RemoveDir(p) => Some(("rmdir", p.to_string(), None)),
        FileOp::Delete(p) => Some(("delete", p.to_string(), None)),
        FileOp::Rename { from, to } => Some(("rename", from.to_string(), Some(to.to_string()))),
        // Times and modes follow every uploaded file of a tree copy: at
        // info level they would bury the changes an administrator looks
        // for (they show in the dialogue at debug level).
        _ => None,
    }
}
