//! Extended block mode (GFD.20) over any number of TCP connections.
//!
//! Sending: one thread per connection takes the next block of the plan
//! (whichever stream is free, as Globus does), reads it at its offset and
//! writes header and payload with one `writev`. When the plan is exhausted
//! each stream sends EOD; exactly one sends EOF|EOD carrying EODC, the
//! number of connections of this transfer.
//!
//! Receiving: one blocking reader per connection writes every block at its
//! offset (`pwrite`, blocks arrive out of order) and records the range; an
//! async coordinator adds connections as they arrive — the sender may open
//! more at any time — and ends the transfer when EOF has been seen and as
//! many EODs as it announced. Connections that ended with EOD (without the
//! close bit) are handed back for the next transfer.

use crate::pipeline::Meter;
use crate::staging::{ReceiveStaging, SendStaging};
use crate::stream::CopyError;
use crate::transport::{write_all_vectored, DataConn, Payload};
use ferry_proto::mode_e::{BlockHeader, BlockLimits, BlockReader, ModeEError, ReceiveTracker, Want, HEADER_LEN};
use ferry_proto::RangeSet;
use std::io::{self, IoSlice, Read, Write};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Default MODE E block size: large enough that the 17-byte header and the
/// per-block system calls vanish, small enough to spread over streams.
pub const DEFAULT_BLOCK_SIZE: usize = 1 << 20;

/// Most connections one receiving transfer accepts by default.
pub const MAX_CONNECTIONS: usize = 256;

pub use crate::endpoint::{BlockSink, BlockSource, MemorySink};

pub use crate::pipeline::{DataPath, TransferControl};

/// What a sender sends: ranges of the source, in source offsets.
#[derive(Debug, Clone)]
pub struct SendPlan {
    pub ranges: Vec<Range<u64>>,
    /// Subtracted from source offsets in block headers: the start of an
    /// ERET window, whose blocks are numbered from 0.
    pub header_base: u64,
    pub block_size: usize,
}

impl SendPlan {
    /// Every byte of a `len`-byte source.
    pub fn whole(len: u64, block_size: usize) -> Self {
        let ranges = if len > 0 { std::iter::once(0..len).collect() } else { Vec::new() };
        Self { ranges, header_base: 0, block_size }
    }

    /// What is left of a `len`-byte source once `done` has arrived.
    pub fn missing(len: u64, done: &RangeSet, block_size: usize) -> Self {
        Self { ranges: done.missing(len), header_base: 0, block_size }
    }
}

/// The smallest block [`send`] cuts a plan into to spread it over streams.
pub const MIN_SPREAD_BLOCK: usize = 32 << 10;

/// The block size for sending `plan` over `streams`: small enough that
/// every stream gets a share of a small transfer (a 1 MiB file in 1 MiB
/// blocks would travel on one stream, ramping up alone, while the others
/// idle), but no smaller than [`MIN_SPREAD_BLOCK`], whose header overhead
/// (17 bytes) is negligible. A share small enough rides in a connection's
/// first flight (see `sizing::FIRST_FLIGHT`).
pub fn spread_block(plan: &SendPlan, streams: usize) -> usize {
    let total: u64 = plan.ranges.iter().map(|r| r.end - r.start).sum();
    // Whole pages, so that blocks stay aligned for direct I/O.
    let page = crate::staging::DIRECT_ALIGN as u64;
    let share = total.div_ceil(streams.max(1) as u64).div_ceil(page).saturating_mul(page);
    let share = usize::try_from(share).unwrap_or(usize::MAX);
    plan.block_size.min(share.max(MIN_SPREAD_BLOCK)).max(1)
}

/// Unsent bytes a stream may queue on a long path; see [`late_binding`].
pub const NOTSENT_LOWAT: u32 = 256 << 10;

/// On a long path, caps the unsent part of each stream's socket buffer,
/// so a stream takes its next block only when the network has taken the
/// last: blocks then go to the streams that are moving, and all streams
/// finish together. Without it, autotuned send buffers swallow megabytes
/// each, and the transfer ends with a few streams draining their backlog
/// while the rest idle (at 80 ms one-way, a 256 MiB file went from 71–72
/// to 75–76 MB/s with 16 streams, 72 to 79 with 32). On loopback or a LAN
/// this only adds wake-ups, and one stream has nobody to share with.
fn late_binding(streams: &[DataConn]) {
    if streams.len() < 2 {
        return;
    }
    let long = streams.first().and_then(|s| s.stats().rtt_us).is_some_and(|rtt| rtt > 1000);
    if long {
        for s in streams {
            if let Err(e) = s.limit_unsent(NOTSENT_LOWAT) {
                tracing::debug!(error = %e, "TCP_NOTSENT_LOWAT unavailable");
            }
        }
    }
}

/// Hands out the blocks of a plan to whichever stream asks first.
#[derive(Debug)]
pub(crate) struct BlockCursor {
    ranges: Vec<Range<u64>>,
    idx: usize,
    pos: u64,
    block: u64,
}

impl BlockCursor {
    pub(crate) fn new(ranges: Vec<Range<u64>>, block: u64) -> Self {
        Self { ranges, idx: 0, pos: 0, block: block.max(1) }
    }

    pub(crate) fn next(&mut self) -> Option<Range<u64>> {
        while let Some(r) = self.ranges.get(self.idx) {
            let start = self.pos.max(r.start);
            if start >= r.end {
                self.idx += 1;
                continue;
            }
            let end = (start + self.block).min(r.end);
            self.pos = end;
            return Some(start..end);
        }
        None
    }
}

/// Sends `plan` over `streams` and ends the transfer with EOD on every
/// stream (EOF|EOD with EODC on one). Returns the streams for caching.
pub fn send(
    streams: Vec<DataConn>,
    source: &dyn BlockSource,
    plan: &SendPlan,
    ctl: &TransferControl,
) -> Result<Vec<DataConn>, CopyError> {
    if streams.is_empty() {
        return Err(CopyError::Network(io::Error::new(io::ErrorKind::NotConnected, "no data connections")));
    }
    let eodc = streams.len() as u64;
    let spread = SendPlan { block_size: spread_block(plan, streams.len()), ..plan.clone() };
    let plan = &spread;
    let mut ctl = ctl.clone();
    if let Some(config) = &mut ctl.staging {
        config.block = config.block.min(plan.block_size);
    }
    let ctl = &ctl;
    let mut blocks = BlockCursor::new(plan.ranges.clone(), plan.block_size as u64);
    // Every stream's first block is dealt before any starts: left to the
    // race, the first threads to run fill their socket buffers with the
    // whole of a small file while the other streams idle.
    let firsts: Vec<Option<Range<u64>>> =
        if ctl.staging.is_some() { vec![None; streams.len()] } else { streams.iter().map(|_| blocks.next()).collect() };
    let cursor = Mutex::new(blocks);
    late_binding(&streams);
    let eof_sent = AtomicBool::new(false);
    // One stream and no staging ring (a small file on a session's one
    // cached connection): sent on the calling thread. A thread per file
    // cost a clone3 and seven more syscalls per file at the sending end
    // (5,010 clone3 for a 5,000 x 4 KiB download, `strace -c -f` of
    // `ferry serve`; docs/trees.md).
    if let ([_], None) = (&streams[..], &ctl.staging) {
        let mut sock = streams.into_iter().next().expect("one stream");
        let first = firsts.into_iter().next().flatten();
        let r = send_stream(&mut sock, source, plan, first, &cursor, &eof_sent, eodc, ctl);
        if r.is_err() {
            // As a failed stream thread does below.
            ctl.abort.abort();
        }
        return r.map(|()| vec![sock]);
    }
    let failed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let staging = ctl.staging.map(|config| SendStaging::start(scope, config, source, &plan.ranges, &ctl.abort));
        let handles: Vec<_> = streams
            .into_iter()
            .zip(firsts)
            .map(|(mut sock, first)| {
                let cursor = &cursor;
                let eof_sent = &eof_sent;
                let failed = &failed;
                let staging = staging.clone();
                scope.spawn(move || {
                    let r = match &staging {
                        Some(st) => send_stream_staged(&mut sock, st, plan.header_base, eof_sent, eodc, ctl),
                        None => send_stream(&mut sock, source, plan, first, cursor, eof_sent, eodc, ctl),
                    };
                    if r.is_err() && !failed.swap(true, Ordering::SeqCst) {
                        // One broken stream ends the transfer: unblock the others.
                        ctl.abort.abort();
                    }
                    r.map(|()| sock)
                })
            })
            .collect();
        let mut out = Vec::new();
        let mut first_err = staging.as_ref().and_then(|s| s.take_error());
        for h in handles {
            match h.join() {
                Ok(Ok(sock)) => out.push(sock),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(CopyError::Network(io::Error::other("sender thread panicked")));
                }
            }
        }
        if first_err.is_none() {
            first_err = staging.as_ref().and_then(|s| s.take_error());
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}

/// Sends data produced while it is sent (a listing too large to build
/// first: MLSR) in blocks on the first stream, one chunk at a time, then
/// ends as [`send`] does: EOF|EOD with EODC on one stream, EOD on the
/// others (GFD.20). A listing is small beside a file and is produced no
/// faster than one stream carries it, so the others only close the
/// transfer. A chunk error is returned as it is; the caller drops the
/// connections, whose state the peer cannot know.
pub fn send_chunks(
    mut streams: Vec<DataConn>,
    chunks: crate::stream::Chunks,
    ctl: &TransferControl,
) -> Result<Vec<DataConn>, CopyError> {
    if streams.is_empty() {
        return Err(CopyError::Network(io::Error::new(io::ErrorKind::NotConnected, "no data connections")));
    }
    let m = ctl.meter();
    let eodc = streams.len() as u64;
    let mut offset = 0u64;
    for chunk in chunks {
        let chunk = chunk?;
        for block in chunk.chunks(DEFAULT_BLOCK_SIZE) {
            m.before_send(block.len())?;
            let header = BlockHeader::data(offset, block.len() as u64).encode();
            write_all_vectored(&mut streams[0], &mut [IoSlice::new(&header), IoSlice::new(block)])
                .map_err(|e| m.net(e))?;
            offset += block.len() as u64;
            m.moved(block.len() as u64);
        }
    }
    for (i, s) in streams.iter_mut().enumerate() {
        let end = if i == 0 { BlockHeader::eof(eodc) } else { BlockHeader::eod() };
        s.write_all(&end.encode()).map_err(|e| m.net(e))?;
        s.flush().map_err(|e| m.net(e))?;
    }
    Ok(streams)
}

/// A stream thread in staged mode: sends blocks the readers have filled,
/// whichever is ready, and returns each buffer to the ring.
fn send_stream_staged(
    sock: &mut DataConn,
    staging: &SendStaging,
    header_base: u64,
    eof_sent: &AtomicBool,
    eodc: u64,
    ctl: &TransferControl,
) -> Result<(), CopyError> {
    let m = ctl.meter();
    while let Some((block, buf)) = staging.next(&ctl.abort) {
        let len = (block.end - block.start) as usize;
        m.pace(len);
        let header = BlockHeader::data(block.start - header_base, len as u64).encode();
        let r = write_all_vectored(sock, &mut [IoSlice::new(&header), IoSlice::new(&buf[..len])]);
        staging.recycle(buf);
        r.map_err(|e| m.net(e))?;
        m.moved(len as u64);
    }
    if m.check().is_err() {
        return Err(staging.take_error().unwrap_or(CopyError::Aborted));
    }
    send_end(sock, eof_sent, eodc, m)
}

/// Fills `buf` from `source` at `offset`: a block is sent whole or not at
/// all, so a source that ends early (a file truncated under the transfer)
/// is an error, not a short block.
pub(crate) fn read_block(source: &dyn BlockSource, buf: &mut [u8], offset: u64) -> Result<(), CopyError> {
    let mut got = 0;
    while got < buf.len() {
        match source.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => return Err(source_ended(offset + got as u64)),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CopyError::Disk(e)),
        }
    }
    Ok(())
}

fn source_ended(at: u64) -> CopyError {
    CopyError::Disk(io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the source ended at byte {at} while it was being sent"),
    ))
}

#[allow(clippy::too_many_arguments)]
fn send_stream(
    sock: &mut DataConn,
    source: &dyn BlockSource,
    plan: &SendPlan,
    mut first: Option<Range<u64>>,
    cursor: &Mutex<BlockCursor>,
    eof_sent: &AtomicBool,
    eodc: u64,
    ctl: &TransferControl,
) -> Result<(), CopyError> {
    // TLS needs the bytes in user space: the buffered path, same framing.
    let zero_copy = ctl.path == DataPath::ZeroCopy && source.zero_copy() && sock.zero_copy();
    let mut buf = if zero_copy { Vec::new() } else { vec![0u8; plan.block_size.max(1)] };
    let m = ctl.meter();
    loop {
        m.check()?;
        let next = first.take().or_else(|| cursor.lock().unwrap_or_else(|e| e.into_inner()).next());
        let Some(block) = next else { break };
        let len = (block.end - block.start) as usize;
        let header = BlockHeader::data(block.start - plan.header_base, len as u64).encode();
        if zero_copy {
            m.pace(len);
            // TCP: the header with MSG_MORE, the payload with sendfile.
            let payload = Payload::Source { source, offset: block.start, len };
            let sent = sock.send_block(&header, payload).map_err(|e| m.net(e))?;
            if sent < len as u64 {
                return Err(source_ended(block.start + sent));
            }
        } else {
            read_block(source, &mut buf[..len], block.start)?;
            m.pace(len);
            write_all_vectored(sock, &mut [IoSlice::new(&header), IoSlice::new(&buf[..len])]).map_err(|e| m.net(e))?;
        }
        m.moved(len as u64);
    }
    send_end(sock, eof_sent, eodc, m)
}

/// Ends one stream's part of a transfer (GFD.20): EOD on every stream,
/// EOF|EOD carrying EODC, the number of streams, on exactly one.
fn send_end(sock: &mut DataConn, eof_sent: &AtomicBool, eodc: u64, m: Meter<'_>) -> Result<(), CopyError> {
    let end = if eof_sent.swap(true, Ordering::SeqCst) { BlockHeader::eod() } else { BlockHeader::eof(eodc) };
    sock.write_all(&end.encode()).map_err(|e| m.net(e))?;
    sock.flush().map_err(|e| m.net(e))?;
    Ok(())
}

/// How received block offsets map to the sink.
#[derive(Debug, Clone, Copy)]
pub struct ReceiveSpec {
    /// Added to header offsets: the ESTO offset, or 0.
    pub base: u64,
    /// Largest end a block may have (header coordinates), when known.
    pub limit: Option<u64>,
    /// Most data connections this transfer accepts.
    pub max_connections: usize,
}

impl ReceiveSpec {
    pub fn new(base: u64, limit: Option<u64>) -> Self {
        Self { base, limit, max_connections: MAX_CONNECTIONS }
    }
}

/// State shared by the readers of one receiving transfer.
#[derive(Debug, Default)]
pub struct ReceiveState {
    /// The overlap check and the EOD/EOF count across connections: the
    /// protocol core's (`ferry_proto::mode_e::ReceiveTracker`), the same
    /// code the fuzzer and the in-memory `Pair` tests run.
    tracker: Mutex<ReceiveTracker>,
    /// Ranges written to the sink so far (each write as it returns, not
    /// whole blocks), in header coordinates: the restart markers, and what
    /// a failed transfer leaves for a resume.
    pub received: Mutex<RangeSet>,
}

impl ReceiveState {
    pub fn is_complete(&self) -> bool {
        self.tracker().is_complete()
    }

    fn tracker(&self) -> std::sync::MutexGuard<'_, ReceiveTracker> {
        self.tracker.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records bytes on their way to disk (the write returned).
    pub fn written(&self, r: Range<u64>) {
        if r.start < r.end {
            self.received.lock().unwrap_or_else(|e| e.into_inner()).insert(r);
        }
    }

    fn describe_end(&self) -> String {
        self.tracker().describe_end()
    }
}

/// A framing error found by the protocol core: the peer's fault.
fn invalid(e: ModeEError) -> CopyError {
    CopyError::Network(io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Reads blocks from one connection until its EOD. Returns the socket for
/// reuse unless the sender said it closes it.
///
/// GFD.20 framing and every check on it (header validity, block size,
/// overlaps, the EOD/EOF count) belong to the protocol core's
/// [`BlockReader`] and [`ReceiveTracker`]; this loop only moves the bytes
/// the reader asks for to where it says they go.
pub fn receive_stream(
    mut sock: DataConn,
    sink: &dyn BlockSink,
    spec: ReceiveSpec,
    state: &ReceiveState,
    ctl: &TransferControl,
    staging: Option<&ReceiveStaging>,
) -> Result<Option<DataConn>, CopyError> {
    let m = ctl.meter();
    let discard = ctl.path == DataPath::ZeroCopy && sink.zero_copy() && sock.zero_copy();
    // A plain TCP socket into a file: splice(2), one copy instead of two.
    let splice = ctl.path == DataPath::ZeroCopy
        && !discard
        && staging.is_none()
        && sock.zero_copy()
        && sock.transport() == "tcp"
        && sock.socket().is_some();
    // Grown on first use to what the blocks need, at most a block: a fresh
    // 1 MiB buffer zeroed per file and stream was 8 % of a client's CPU
    // receiving 4 KiB files, and the discard, splice and staged paths never
    // touch it.
    let mut buf = Vec::new();
    let mut reader = BlockReader::new(BlockLimits::new(spec.limit));
    let mut raw = [0u8; HEADER_LEN];
    loop {
        m.check()?;
        match reader.want() {
            Want::Header { missing } => {
                let n = match sock.read(&mut raw[..missing]) {
                    // A cached connection the peer closed between
                    // transfers, before sending anything for this one, is
                    // not part of this transfer; the EOF count decides
                    // completeness, not the connection count.
                    Ok(0) if reader.is_idle() => return Ok(None),
                    Ok(0) => {
                        let e = reader.on_close().err().unwrap_or(ModeEError::ClosedBeforeEod);
                        return Err(m.net(io::Error::new(io::ErrorKind::UnexpectedEof, e)));
                    }
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(m.net(e)),
                };
                if let Some(h) = reader.push_header(&raw[..n]).map_err(invalid)? {
                    state.tracker().begin_block(&h).map_err(invalid)?;
                }
            }
            Want::Payload { offset, len } => {
                let n = if discard {
                    // A discarding sink: the transport drops the payload
                    // (TCP in the kernel, MSG_TRUNC).
                    match sock.discard(usize::try_from(len).unwrap_or(usize::MAX)) {
                        Ok(0) => {
                            let e = io::Error::new(io::ErrorKind::UnexpectedEof, ModeEError::ClosedBeforeEod);
                            return Err(m.net(e));
                        }
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(m.net(e)),
                    }
                } else if let Some(st) = staging {
                    // Staged: read into a ring buffer and let a writer
                    // thread put it on disk while this thread reads the
                    // next block.
                    let n = len.min(st.block() as u64) as usize;
                    let Some(mut b) = st.buffer() else { return Err(CopyError::Aborted) };
                    sock.read_exact(&mut b[..n]).map_err(|e| m.net(e))?;
                    if !st.submit(spec.base + offset, b, n) {
                        return Err(CopyError::Aborted);
                    }
                    n
                } else if let Some(r) = splice.then(|| sock.socket()).flatten().and_then(|fd| {
                    sink.splice_from(fd, spec.base + offset, len.min(DEFAULT_BLOCK_SIZE as u64) as usize)
                }) {
                    match r {
                        Ok(0) => {
                            let e = io::Error::new(io::ErrorKind::UnexpectedEof, ModeEError::ClosedBeforeEod);
                            return Err(m.net(e));
                        }
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) if crate::disk::is_network(&e) => return Err(m.net(e)),
                        Err(e) => return Err(CopyError::Disk(e)),
                    }
                } else {
                    let n = len.min(DEFAULT_BLOCK_SIZE as u64) as usize;
                    if buf.len() < n {
                        buf.resize(n, 0);
                    }
                    sock.read_exact(&mut buf[..n]).map_err(|e| m.net(e))?;
                    sink.write_at(&buf[..n], spec.base + offset).map_err(CopyError::Disk)?;
                    n
                };
                let written = reader.payload_consumed(n as u64);
                if staging.is_none() {
                    // (Staged, the writer threads record what reached the
                    // file.)
                    state.written(written);
                }
                m.received(n);
            }
            Want::EndOfBlock(h) => {
                state.tracker().end_block(&h).map_err(invalid)?;
                reader.end_block();
            }
            Want::Done { close } => return Ok((!close).then_some(sock)),
        }
    }
}

/// Receives one transfer: readers on `initial` (cached) connections and on
/// every connection that arrives through `incoming`, until EOF and EODC
/// EODs. Returns the connections to keep for the next transfer.
pub async fn receive(
    initial: Vec<DataConn>,
    incoming: &mut mpsc::Receiver<DataConn>,
    sink: Arc<dyn BlockSink>,
    spec: ReceiveSpec,
    state: Arc<ReceiveState>,
    ctl: TransferControl,
    timeout: Duration,
) -> Result<Vec<DataConn>, CopyError> {
    // A discard needs no disk threads.
    let staging = match ctl.staging {
        Some(config) if !(ctl.path == DataPath::ZeroCopy && sink.zero_copy()) => {
            // The writer threads say what reached the file (in header
            // coordinates for the markers).
            let (st, base) = (state.clone(), spec.base);
            let on_written: Arc<dyn Fn(Range<u64>) + Send + Sync> =
                Arc::new(move |r: Range<u64>| st.written(r.start - base..r.end - base));
            Some(ReceiveStaging::start(config, sink.clone(), ctl.abort.clone(), Some(on_written)))
        }
        _ => None,
    };
    let mut readers = tokio::task::JoinSet::new();
    let spawn = |readers: &mut tokio::task::JoinSet<_>, sock: DataConn| {
        let (sink, state, ctl, staging) = (sink.clone(), state.clone(), ctl.clone(), staging.clone());
        let _ = ctl.abort.register(&*sock);
        readers.spawn_blocking(move || receive_stream(sock, &*sink, spec, &state, &ctl, staging.as_deref()));
    };
    let result = receive_all(initial, incoming, &mut readers, spawn, &state, &ctl, timeout, spec.max_connections).await;
    if let Some(st) = staging {
        // Everything received must be on its way to disk before the
        // transfer counts as done (and the file is renamed).
        let flushed = tokio::task::spawn_blocking(move || st.finish())
            .await
            .map_err(|e| CopyError::Disk(io::Error::other(e.to_string())))?;
        if let (Ok(_), Err(e)) = (&result, flushed) {
            return Err(CopyError::Disk(e));
        }
    }
    result
}

#[allow(clippy::too_many_arguments)]
async fn receive_all(
    initial: Vec<DataConn>,
    incoming: &mut mpsc::Receiver<DataConn>,
    readers: &mut tokio::task::JoinSet<Result<Option<DataConn>, CopyError>>,
    spawn: impl Fn(&mut tokio::task::JoinSet<Result<Option<DataConn>, CopyError>>, DataConn),
    state: &ReceiveState,
    ctl: &TransferControl,
    timeout: Duration,
    max_connections: usize,
) -> Result<Vec<DataConn>, CopyError> {
    let mut connections = 0usize;
    for sock in initial {
        connections += 1;
        spawn(readers, sock);
    }
    let mut keep = Vec::new();
    let mut incoming_open = true;
    // An abort (ABOR, the session ending) shuts the sockets down, which
    // ends every reader; this tick notices it while none runs (before the
    // first connection, say), so the transfer ends only once no thread can
    // write any more. The tick is always polled: a branch disabled when
    // the select began would not wake it when the abort comes later.
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // No data for `timeout` while no reader runs: counted from the last
    // connection or reader that came or went.
    let mut last_event = tokio::time::Instant::now();
    loop {
        let complete = state.is_complete();
        if complete && readers.is_empty() {
            return Ok(keep);
        }
        tokio::select! {
            _ = tick.tick() => {
                if ctl.abort.is_aborted() {
                    while readers.join_next().await.is_some() {}
                    return Err(CopyError::Aborted);
                }
                continue;
            }
            r = readers.join_next(), if !readers.is_empty() => match r {
                Some(Ok(Ok(Some(sock)))) => keep.push(sock),
                Some(Ok(Ok(None))) => {}
                Some(Ok(Err(e))) => {
                    if complete {
                        // A connection beyond those the sender counted
                        // failed after the data was complete: drop it.
                        continue;
                    }
                    ctl.abort.abort();
                    while readers.join_next().await.is_some() {}
                    return Err(e);
                }
                Some(Err(join)) => {
                    ctl.abort.abort();
                    while readers.join_next().await.is_some() {}
                    return Err(CopyError::Network(io::Error::other(join.to_string())));
                }
                None => {}
            },
            sock = incoming.recv(), if incoming_open && !complete => match sock {
                Some(sock) => {
                    connections += 1;
                    if connections > max_connections {
                        ctl.abort.abort();
                        while readers.join_next().await.is_some() {}
                        return Err(CopyError::Network(io::Error::other(format!(
                            "more than {max_connections} data connections for one transfer"
                        ))));
                    }
                    spawn(readers, sock);
                }
                None => incoming_open = false,
            },
            _ = tokio::time::sleep_until(last_event + timeout), if readers.is_empty() && !complete => {
                return Err(CopyError::Network(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("transfer incomplete after {} s without data: {}", timeout.as_secs(), state.describe_end()),
                )));
            }
        }
        last_event = tokio::time::Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::staging::StagingConfig;
    use crate::tls::DataStream;
    use std::net::{TcpListener, TcpStream};

    fn pairs(n: usize) -> (Vec<DataConn>, Vec<DataConn>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut a = Vec::new();
        let mut b = Vec::new();
        for _ in 0..n {
            a.push(Box::new(DataStream::Plain(TcpStream::connect(addr).unwrap())) as DataConn);
            b.push(Box::new(DataStream::Plain(l.accept().unwrap().0)) as DataConn);
        }
        (a, b)
    }

    #[test]
    fn small_transfers_are_spread_over_every_stream() {
        let mib = SendPlan::whole(1 << 20, DEFAULT_BLOCK_SIZE);
        assert_eq!(spread_block(&mib, 16), 64 << 10);
        assert_eq!(spread_block(&mib, 64), MIN_SPREAD_BLOCK);
        assert_eq!(spread_block(&mib, 4), 256 << 10);
        assert_eq!(spread_block(&mib, 1), 1 << 20);
        assert_eq!(spread_block(&SendPlan::whole(1 << 30, DEFAULT_BLOCK_SIZE), 16), DEFAULT_BLOCK_SIZE);
        assert_eq!(spread_block(&SendPlan::whole(1000, DEFAULT_BLOCK_SIZE), 16), MIN_SPREAD_BLOCK);
        assert_eq!(spread_block(&SendPlan::whole(1 << 20, 4096), 16), 4096, "a user's small block stays");
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    async fn transfer(data: Vec<u8>, streams: usize, plan: SendPlan) -> (Vec<u8>, RangeSet, usize) {
        let (senders, receivers) = pairs(streams);
        let send = std::thread::spawn(move || send(senders, &data, &plan, &TransferControl::new()).map(|v| v.len()));
        let (_tx, mut rx) = mpsc::channel(1);
        let sink = Arc::new(MemorySink::default());
        let state = Arc::new(ReceiveState::default());
        let kept = receive(
            receivers,
            &mut rx,
            sink.clone(),
            ReceiveSpec::new(0, None),
            state.clone(),
            TransferControl::new(),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(send.join().unwrap().unwrap(), streams);
        let received = state.received.lock().unwrap().clone();
        drop(state);
        (Arc::try_unwrap(sink).unwrap().into_inner(), received, kept.len())
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn parallel_streams_deliver_every_byte() {
        let data = pattern(5_000_003);
        let (got, ranges, kept) = transfer(data.clone(), 4, SendPlan::whole(data.len() as u64, 65536)).await;
        assert_eq!(got, data);
        assert_eq!(ranges.to_string(), "0-5000003");
        assert_eq!(kept, 4, "connections are kept for the next transfer");
    }

    /// A listing produced while it is sent arrives whole over several
    /// streams: blocks on the first, EOF with EODC on one, EOD on all.
    #[tokio::test(flavor = "multi_thread")]
    async fn chunks_arrive_whole_and_end_every_stream() {
        let parts: Vec<Vec<u8>> = vec![pattern(10), Vec::new(), pattern(DEFAULT_BLOCK_SIZE + 5), pattern(3)];
        let want: Vec<u8> = parts.concat();
        let (senders, receivers) = pairs(3);
        let chunks: crate::stream::Chunks = Box::new(parts.into_iter().map(Ok));
        let send = std::thread::spawn(move || send_chunks(senders, chunks, &TransferControl::new()).map(|v| v.len()));
        let (_tx, mut rx) = mpsc::channel(1);
        let sink = Arc::new(MemorySink::default());
        let state = Arc::new(ReceiveState::default());
        let spec = ReceiveSpec::new(0, None);
        let kept = receive(
            receivers,
            &mut rx,
            sink.clone(),
            spec,
            state.clone(),
            TransferControl::new(),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(send.join().unwrap().unwrap(), 3);
        assert_eq!(kept.len(), 3, "connections stay open for the next transfer");
        assert_eq!(Arc::try_unwrap(sink).unwrap().into_inner(), want);
        // A failing chunk is the sender's error.
        let (senders, _receivers) = pairs(1);
        let failing: crate::stream::Chunks =
            Box::new(vec![Ok(pattern(4)), Err(CopyError::Disk(io::Error::other("too many entries")))].into_iter());
        let err = send_chunks(senders, failing, &TransferControl::new()).unwrap_err();
        assert!(err.to_string().contains("too many entries"), "{err}");
    }

    /// The kernel-side paths: a file source through sendfile with headers
    /// sent MSG_MORE, into a file (buffered) and into a discard (MSG_TRUNC),
    /// each compared with the buffered path's result.
    #[tokio::test(flavor = "multi_thread")]
    async fn zero_copy_and_buffered_paths_agree() {
        let data = pattern(3_000_017);
        let mut src = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut src, &data).unwrap();
        let src = Arc::new(src);
        for (send_path, sink_is_null) in
            [(DataPath::ZeroCopy, false), (DataPath::Buffered, false), (DataPath::ZeroCopy, true)]
        {
            let (senders, receivers) = pairs(3);
            let plan = SendPlan::whole(data.len() as u64, 100_000);
            let s = src.clone();
            let send = std::thread::spawn(move || {
                let ctl = TransferControl { path: send_path, ..TransferControl::new() };
                send(senders, &*s, &plan, &ctl).map(|v| v.len())
            });
            let (_tx, mut rx) = mpsc::channel(1);
            let out = Arc::new(tempfile::tempfile().unwrap());
            let sink: Arc<dyn BlockSink> =
                if sink_is_null { Arc::new(crate::endpoint::NullSink) } else { Arc::new(out.try_clone().unwrap()) };
            let ctl = TransferControl::new();
            let state = Arc::new(ReceiveState::default());
            let spec = ReceiveSpec::new(0, None);
            receive(receivers, &mut rx, sink, spec, state.clone(), ctl.clone(), Duration::from_secs(5)).await.unwrap();
            assert_eq!(send.join().unwrap().unwrap(), 3);
            assert_eq!(ctl.progress.load(Ordering::Relaxed), data.len() as u64);
            assert_eq!(state.received.lock().unwrap().to_string(), format!("0-{}", data.len()));
            if !sink_is_null {
                let mut got = Vec::new();
                std::io::Read::read_to_end(&mut &*out, &mut got).unwrap();
                assert!(got == data, "{send_path:?}");
            }
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn staged_mode_delivers_the_same_bytes() {
        let data = pattern(7_340_039);
        let mut src = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut src, &data).unwrap();
        let src = Arc::new(src);
        let staging = Some(StagingConfig { bytes: 2 << 20, block: 256 << 10, disk_threads: 2 });
        for (send_staged, recv_staged) in [(true, false), (false, true), (true, true)] {
            let (senders, receivers) = pairs(4);
            let plan = SendPlan::missing(data.len() as u64, &RangeSet::parse("0-3").unwrap(), 256 << 10);
            let s = src.clone();
            let send = std::thread::spawn(move || {
                let ctl =
                    TransferControl { staging: if send_staged { staging } else { None }, ..TransferControl::new() };
                send(senders, &*s, &plan, &ctl).map(|v| v.len())
            });
            let out = Arc::new(tempfile::tempfile().unwrap());
            let (_tx, mut rx) = mpsc::channel(1);
            let ctl = TransferControl { staging: if recv_staged { staging } else { None }, ..TransferControl::new() };
            let state = Arc::new(ReceiveState::default());
            let sink: Arc<dyn BlockSink> = Arc::new(out.try_clone().unwrap());
            receive(receivers, &mut rx, sink, ReceiveSpec::new(0, None), state.clone(), ctl, Duration::from_secs(5))
                .await
                .unwrap();
            assert_eq!(send.join().unwrap().unwrap(), 4);
            let mut got = Vec::new();
            std::io::Read::read_to_end(&mut &*out, &mut got).unwrap();
            assert_eq!(got.len(), data.len());
            assert!(got[3..] == data[3..], "staged send {send_staged}, receive {recv_staged}");
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn empty_file_over_many_streams() {
        let (got, ranges, kept) = transfer(Vec::new(), 3, SendPlan::whole(0, 65536)).await;
        assert!(got.is_empty() && ranges.is_empty());
        assert_eq!(kept, 3);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn only_the_missing_ranges_travel() {
        let data = pattern(1_000_000);
        let done = RangeSet::parse("0-100000,600000-700000").unwrap();
        let (got, ranges, _) = transfer(data.clone(), 2, SendPlan::missing(1_000_000, &done, 30000)).await;
        assert_eq!(ranges.to_string(), "100000-600000,700000-1000000");
        assert_eq!(&got[100_000..600_000], &data[100_000..600_000]);
        assert!(got[..100_000].iter().all(|b| *b == 0));
    }

    /// ABOR (or the client leaving) while the receiver waits for its
    /// first data connection ends the receive then, not at the data
    /// timeout: the upload's name stays claimed until the receive ends.
    #[tokio::test(start_paused = true)]
    async fn an_abort_before_any_connection_ends_the_receive() {
        let (_tx, mut rx) = mpsc::channel(1);
        let ctl = TransferControl::new();
        let abort = ctl.abort.clone();
        // On the simulated clock: the abort comes after a second, long
        // after the receive began waiting, and long before its timeout.
        let aborter = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            abort.abort();
        });
        let sink = Arc::new(MemorySink::default());
        let state = Arc::new(ReceiveState::default());
        let r =
            receive(Vec::new(), &mut rx, sink, ReceiveSpec::new(0, None), state, ctl, Duration::from_secs(3600)).await;
        assert!(matches!(r, Err(CopyError::Aborted)), "{r:?}");
        aborter.await.unwrap();
    }

    /// Without data or an abort, the receive still times out.
    #[tokio::test(start_paused = true)]
    async fn a_receive_without_connections_times_out() {
        let (_tx, mut rx) = mpsc::channel(1);
        let sink = Arc::new(MemorySink::default());
        let state = Arc::new(ReceiveState::default());
        let spec = ReceiveSpec::new(0, None);
        let r = receive(Vec::new(), &mut rx, sink, spec, state, TransferControl::new(), Duration::from_secs(60)).await;
        assert!(matches!(&r, Err(CopyError::Network(e)) if e.kind() == io::ErrorKind::TimedOut), "{r:?}");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn late_connections_are_accepted_until_eodc() {
        let data = pattern(300_000);
        let (mut senders, mut receivers) = pairs(3);
        let late = receivers.pop().unwrap();
        let (tx, mut rx) = mpsc::channel(1);
        let d = data.clone();
        let send = std::thread::spawn(move || {
            let plan = SendPlan::whole(d.len() as u64, 10000);
            send(std::mem::take(&mut senders), &d, &plan, &TransferControl::new())
        });
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            tx.send(late).await.unwrap();
        });
        let sink = Arc::new(MemorySink::default());
        let state = Arc::new(ReceiveState::default());
        receive(
            receivers,
            &mut rx,
            sink.clone(),
            ReceiveSpec::new(0, None),
            state,
            TransferControl::new(),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        send.join().unwrap().unwrap();
        assert_eq!(Arc::try_unwrap(sink).unwrap().into_inner(), data);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_connection_closed_before_eod_fails_the_transfer() {
        let (mut senders, receivers) = pairs(2);
        senders[0].write_all(&BlockHeader::eof(2).encode()).unwrap();
        senders[1].write_all(&BlockHeader::data(0, 3).encode()).unwrap();
        senders[1].write_all(b"abc").unwrap();
        senders.clear(); // closed without EOD
        let (_tx, mut rx) = mpsc::channel(1);
        let r = receive(
            receivers,
            &mut rx,
            Arc::new(MemorySink::default()),
            ReceiveSpec::new(0, None),
            Arc::new(ReceiveState::default()),
            TransferControl::new(),
            Duration::from_secs(5),
        )
        .await;
        assert!(matches!(r, Err(CopyError::Network(_))), "{r:?}");
    }
}
