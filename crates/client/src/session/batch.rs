//! Ferry-to-Ferry batches: many files named in one `BRET`/`BSTO` line
//! (docs/batch.md) instead of one `RETR` or `ALLO`+`STOR` per file.
//!
//! The data path is the pipelined one's (`retrieve`, `store`): the files
//! travel one after the other over the cached MODE E channels, each with
//! its own replies, markers and commit, so per-file atomicity and
//! resumption are unchanged. What changes is the control channel: a line
//! of a few hundred names instead of a few hundred lines, which the server
//! queues in one step. A server that does not list `BATCH` in FEAT gets
//! the pipelined commands ([`ServerSession::supports_batch`] decides).

use super::{BatchFile, Channel, ServerSession};
use crate::control::{event_reply, refused};
use crate::error::ClientError;
use ferry_io::mode_e::{self, BlockSink, BlockSource, ReceiveState, SendPlan, TransferControl};
use ferry_io::stream::CopyError;
use ferry_proto::batch::{
    fits, fits_stream, fits_with_facts, Batch, BatchKind, EntryFacts, StreamLayout, FACTS_WORD, STREAM_STOR_WORD,
    STREAM_WORD, SYNC_WORD,
};
use ferry_proto::client::PipelineEvent;
use ferry_proto::command::{Allo, Command};
use ferry_proto::line::DEFAULT_MAX_LINE;
use std::ops::Range;
use std::sync::Arc;

use super::Marker;

/// The next slice of `items` that fits one batch line.
fn next_chunk<D>(kind: BatchKind, items: &[BatchFile<D>], from: usize) -> Range<usize> {
    next_chunk_facts(kind, items, from, false)
}

/// [`next_chunk`], leaving room for each entry's facts when `facts`.
fn next_chunk_facts<D>(kind: BatchKind, items: &[BatchFile<D>], from: usize, facts: bool) -> Range<usize> {
    let rest: Vec<(&str, u64)> = items[from..].iter().map(|f| (f.path.as_str(), f.size)).collect();
    if rest.is_empty() {
        return from..from;
    }
    let n = if facts && kind == BatchKind::Store {
        fits_with_facts(&rest, DEFAULT_MAX_LINE)
    } else {
        fits(kind, &rest, DEFAULT_MAX_LINE)
    };
    from..from + n
}

fn batch_command<D>(kind: BatchKind, items: &[BatchFile<D>], sync: bool) -> Command {
    batch_command_facts(kind, items, &[], sync)
}

/// [`batch_command`] with each upload's facts (`facts[i]` for
/// `items[i]`; an empty slice: none, the plain form).
fn batch_command_facts<D>(
    kind: BatchKind,
    items: &[BatchFile<D>],
    facts: &[Option<EntryFacts>],
    sync: bool,
) -> Command {
    let b = match kind {
        BatchKind::Retrieve => Batch::retrieve(items.iter().map(|f| f.path.clone())),
        BatchKind::Store if facts.is_empty() => Batch::store(items.iter().map(|f| (f.path.clone(), f.size))),
        BatchKind::Store => {
            Batch::store_with_facts(items.iter().zip(facts).map(|(f, x)| (f.path.clone(), f.size, x.clone())))
        }
    };
    Command::Batch(if sync { b.durable_at_end() } else { b })
}

impl ServerSession {
    /// Whether the server takes `BRET`/`BSTO` (FEAT lists `BATCH`).
    pub fn supports_batch(&self) -> bool {
        self.ctrl.features.line("BATCH").is_some()
    }

    /// Whether the server makes an upload batch durable in one pass
    /// (`BSTO SYNC`: FEAT lists `BATCH RETR,STOR,SYNC`).
    pub fn supports_batch_sync(&self) -> bool {
        self.ctrl.features.line("BATCH").is_some_and(|l| {
            l.split_whitespace().nth(1).is_some_and(|w| w.split(',').any(|x| x.eq_ignore_ascii_case(SYNC_WORD)))
        })
    }

    /// Whether the server sets each upload's time and mode from its
    /// `BSTO` entry (FEAT lists `BATCH RETR,STOR,SYNC,FACTS`): the client
    /// then sends no MFMT or SITE CHMOD for those files.
    pub fn supports_batch_facts(&self) -> bool {
        self.supports_batch_sync()
            && self.ctrl.features.line("BATCH").is_some_and(|l| {
                l.split_whitespace().nth(1).is_some_and(|w| w.split(',').any(|x| x.eq_ignore_ascii_case(FACTS_WORD)))
            })
    }

    /// Whether the server sends a download batch's files as one transfer
    /// (FEAT lists `BATCH ...,STREAM`; docs/batch.md, "The streamed batch").
    pub fn supports_batch_stream(&self) -> bool {
        self.ctrl.features.line("BATCH").is_some_and(|l| {
            l.split_whitespace().nth(1).is_some_and(|w| w.split(',').any(|x| x.eq_ignore_ascii_case(STREAM_WORD)))
        })
    }

    /// Whether the server takes an upload batch as one transfer (FEAT
    /// lists `BATCH ...,STREAM-STOR`; docs/batch.md, "The streamed upload").
    pub fn supports_batch_stream_stor(&self) -> bool {
        self.ctrl.features.line("BATCH").is_some_and(|l| {
            l.split_whitespace().nth(1).is_some_and(|w| w.split(',').any(|x| x.eq_ignore_ascii_case(STREAM_STOR_WORD)))
        })
    }

    /// [`retrieve_batch`](Self::retrieve_batch) as `BRET STREAM` lines:
    /// each line's files arrive back to back as one MODE E transfer (one
    /// 125, one 226, no per-file data-channel end). A file is complete —
    /// and `on_done` runs for it — when its last byte arrived (an empty
    /// file once a later file completed, or at the line's 226); files are
    /// reported in order, so `done` is always a prefix. A line the server
    /// cut before a file that changed or vanished ends with its `451`: the
    /// files before it are done, the caller copies the rest one by one.
    async fn retrieve_batch_streamed(
        &mut self,
        items: &[BatchFile<Arc<dyn BlockSink>>],
        control: impl Fn() -> TransferControl,
        states: &[Arc<ReceiveState>],
        on_done: &mut (dyn FnMut(usize) + Send),
    ) -> (usize, Result<(), ClientError>) {
        let (acceptor, mut rx) = match self.listen_and_accept() {
            Ok(x) => x,
            Err(e) => return (0, Err(e)),
        };
        let mut lines: Vec<Range<usize>> = Vec::new();
        while lines.last().map_or(0, |r| r.end) < items.len() {
            let from = lines.last().map_or(0, |r| r.end);
            let rest: Vec<(&str, u64)> = items[from..].iter().map(|f| (f.path.as_str(), f.size)).collect();
            lines.push(from..from + fits_stream(&rest, DEFAULT_MAX_LINE));
        }
        let line = |r: &Range<usize>| {
            Command::Batch(Batch::retrieve_stream(items[r.clone()].iter().map(|f| (f.path.clone(), f.size))))
        };
        let mut done = 0;
        let result = async {
            let Some(first) = lines.first() else { return Ok(()) };
            self.flush(&[line(first)]).await?;
            let mut sent = 1;
            for (li, r) in lines.iter().enumerate() {
                // The next line is on its way while this one's data flows.
                if sent < lines.len() && sent <= li + 1 {
                    self.ctrl.send(&line(&lines[sent])).await?;
                    sent += 1;
                }
                let cmd = Command::Retr(items[r.start].path.clone());
                self.preliminary(&cmd, &mut |_| {}).await?;
                let (tx, mut completed) = tokio::sync::mpsc::unbounded_channel();
                let sink = Arc::new(StreamSink::new(&items[r.clone()], &states[r.clone()], tx));
                let total = sink.total();
                let n = r.len();
                let mut complete = vec![false; n];
                let mut next = 0;
                let mut report = |complete: &[bool], next: &mut usize, all_empty: bool| {
                    let last_complete = complete.iter().rposition(|c| *c);
                    while *next < n {
                        let empty_ok =
                            items[r.start + *next].size == 0 && (all_empty || last_complete.is_some_and(|l| l > *next));
                        if !(complete[*next] || empty_ok) {
                            break;
                        }
                        on_done(r.start + *next);
                        *next += 1;
                    }
                };
                let ctl = control();
                let recv = self.receive_line(&cmd, &mut rx, sink.clone(), total, &ctl);
                tokio::pin!(recv);
                let res = loop {
                    tokio::select! {
                        res = &mut recv => break res,
                        Some(k) = completed.recv() => {
                            complete[k] = true;
                            report(&complete, &mut next, false);
                        }
                    }
                };
                while let Ok(k) = completed.try_recv() {
                    complete[k] = true;
                }
                report(&complete, &mut next, res.is_ok());
                done = r.start + next;
                res?;
                if next < n {
                    let k = r.start + next;
                    let got = states[k].received.lock().unwrap_or_else(|e| e.into_inner()).covered();
                    return Err(ClientError::Incomplete { path: items[k].path.clone(), expected: items[k].size, got });
                }
            }
            Ok(())
        }
        .await;
        acceptor.abort();
        self.batch_outcome(done, result)
    }

    /// The data of one `BRET STREAM` line whose 125 has arrived: as
    /// [`receive_retrieved`](Self::receive_retrieved), except that a
    /// failure reply lets the data side end by itself (a line cut before a
    /// changed file ends with the files before it, then its 451).
    async fn receive_line(
        &mut self,
        cmd: &Command,
        incoming: &mut tokio::sync::mpsc::Receiver<ferry_io::transport::DataConn>,
        sink: Arc<dyn BlockSink>,
        total: u64,
        ctl: &TransferControl,
    ) -> Result<(), ClientError> {
        let Channel::Listening { cached, .. } = &mut self.channel else {
            return Err(super::channel_changed());
        };
        let initial = std::mem::take(cached);
        let spec = mode_e::ReceiveSpec::new(0, Some(total));
        let state = Arc::new(ReceiveState::default());
        let recv = mode_e::receive(initial, incoming, sink, spec, state, ctl.clone(), self.opts.timeout);
        let kept = self.run_with_replies_then(cmd, recv, ctl, &mut |_| {}, false).await?;
        if let Channel::Listening { cached, .. } = &mut self.channel {
            *cached = kept;
        }
        Ok(())
    }

    /// [`retrieve_many`](Self::retrieve_many) with the files named in
    /// `BRET` lines: at least `window` files in flight, a new line when
    /// fewer remain. Same contract: stops at the first failure and returns
    /// how many files completed; `states[i]` collects what arrived of item
    /// `i`, `on_done(i)` runs as soon as it is complete.
    pub async fn retrieve_batch(
        &mut self,
        items: &[BatchFile<Arc<dyn BlockSink>>],
        window: usize,
        control: impl Fn() -> TransferControl,
        states: &[Arc<ReceiveState>],
        on_done: &mut (dyn FnMut(usize) + Send),
    ) -> (usize, Result<(), ClientError>) {
        if !self.supports_batch() {
            return self.retrieve_many(items, window, control, states, on_done).await;
        }
        if self.supports_batch_stream() && std::env::var_os("FERRY_NO_STREAM_BATCH").is_none() {
            return self.retrieve_batch_streamed(items, control, states, on_done).await;
        }
        let (acceptor, mut rx) = match self.listen_and_accept() {
            Ok(x) => x,
            Err(e) => return (0, Err(e)),
        };
        let mut done = 0;
        let result = async {
            let mut sent = next_chunk(BatchKind::Retrieve, items, 0);
            self.flush(&[batch_command(BatchKind::Retrieve, &items[sent.clone()], false)]).await?;
            for (i, item) in items.iter().enumerate() {
                if sent.end < items.len() && sent.end - i < window.max(1) {
                    let next = next_chunk(BatchKind::Retrieve, items, sent.end);
                    self.ctrl.send(&batch_command(BatchKind::Retrieve, &items[next.clone()], false)).await?;
                    sent = next;
                }
                let state = states.get(i).cloned().unwrap_or_default();
                self.receive_item(item, &mut rx, state, &control()).await?;
                done += 1;
                on_done(i);
            }
            Ok(())
        }
        .await;
        acceptor.abort();
        self.batch_outcome(done, result)
    }

    /// [`store_many`](Self::store_many) with the files named in `BSTO`
    /// lines (each entry stands for `ALLO size` + `STOR path`).
    ///
    /// `on_stored(i)`: item `i` is complete under its name (its 226).
    /// `on_done(i)`: it is durable too, and counted. With a server that
    /// makes batches durable in one pass (`BSTO SYNC`, docs/batch.md,
    /// [`store_batch_streamed`](Self::store_batch_streamed)) that is at its
    /// line's final reply; a batch stopped before it leaves its files
    /// uncounted, so they are checked again (size, time, `--verify`
    /// checksums) and sent again if they differ.
    #[allow(clippy::too_many_arguments)] // the callbacks are the copy's bookkeeping
    pub async fn store_batch(
        &mut self,
        items: &[BatchFile<Arc<dyn BlockSource>>],
        facts: &[Option<EntryFacts>],
        window: usize,
        control: impl Fn() -> TransferControl,
        on_marker: &mut (dyn FnMut(usize, Marker) + Send),
        on_stored: &mut (dyn FnMut(usize) + Send),
        on_done: &mut (dyn FnMut(usize) + Send),
    ) -> (usize, Result<(), ClientError>) {
        if !self.supports_batch() {
            return self.store_many(items, window, control, on_marker, on_done).await;
        }
        if self.supports_batch_stream_stor() && std::env::var_os("FERRY_NO_STREAM_BATCH").is_none() {
            return self.store_batch_stream_lines(items, facts, control, on_marker, on_stored, on_done).await;
        }
        if self.supports_batch_sync() {
            return self.store_batch_streamed(items, facts, window, control, on_marker, on_stored, on_done).await;
        }
        // A plain `BSTO` (a server without SYNC): each file durable at
        // its 226, which the client waits for, as for its 125.
        self.ensure_connecting();
        let mut done = 0;
        let result = async {
            let mut sent = next_chunk(BatchKind::Store, items, 0);
            let addr = self.flush_connecting(&[batch_command(BatchKind::Store, &items[sent.clone()], false)]).await?;
            for (i, item) in items.iter().enumerate() {
                if sent.end < items.len() && sent.end - i < window.max(1) {
                    let next = next_chunk(BatchKind::Store, items, sent.end);
                    self.ctrl.send(&batch_command(BatchKind::Store, &items[next.clone()], false)).await?;
                    sent = next;
                }
                let allo = self.ctrl.reply().await?;
                if !allo.code.is_positive_completion() {
                    return Err(refused(&Command::Allo(Allo { size: item.size, record: None }), allo));
                }
                let cmd = Command::Stor(item.path.clone());
                let plan = SendPlan::whole(item.size, self.opts.block_size);
                let control = control();
                self.send_stored(&cmd, addr, item.data.clone(), plan, &control, &mut |m| on_marker(i, m), true).await?;
                on_stored(i);
                done += 1;
                on_done(i);
            }
            Ok(())
        }
        .await;
        self.batch_outcome(done, result)
    }

    /// [`store_batch`](Self::store_batch) to a server that takes
    /// `BSTO SYNC` (docs/batch.md): no round trip per file. The files'
    /// data go one after the other over the cached MODE E connections
    /// from one thread, without waiting for any file's 125 or 226, while
    /// this task reads the replies in order; the server reads a file's
    /// data once it has run the file's STOR, and TCP holds the rest. A
    /// negative reply stops the data (the server refuses the rest of the
    /// batch, so no data of a refused file is ever stored under another
    /// name). A line's files count as done at its final reply (durable).
    #[allow(clippy::too_many_arguments)] // the callbacks are the copy's bookkeeping
    async fn store_batch_streamed(
        &mut self,
        items: &[BatchFile<Arc<dyn BlockSource>>],
        facts: &[Option<EntryFacts>],
        window: usize,
        control: impl Fn() -> TransferControl,
        on_marker: &mut (dyn FnMut(usize, Marker) + Send),
        on_stored: &mut (dyn FnMut(usize) + Send),
        on_done: &mut (dyn FnMut(usize) + Send),
    ) -> (usize, Result<(), ClientError>) {
        self.ensure_connecting();
        let mut done = 0;
        let with_facts = !facts.is_empty();
        let facts_of = |r: Range<usize>| if with_facts { &facts[r] } else { &[][..] };
        let mut sent = next_chunk_facts(BatchKind::Store, items, 0, with_facts);
        let mut ends = std::collections::VecDeque::from([sent.end]);
        let addr = match self
            .flush_connecting(&[batch_command_facts(
                BatchKind::Store,
                &items[sent.clone()],
                facts_of(sent.clone()),
                true,
            )])
            .await
        {
            Ok(a) => a,
            Err(e) => return (0, Err(e)),
        };
        let streams = match self.batch_streams(addr).await {
            Ok(s) => s,
            Err(e) => {
                self.reset_after_batch();
                return (0, Err(e));
            }
        };
        let ctl = control();
        for s in &streams {
            if let Err(e) = ctl.abort.register(&**s) {
                self.reset_after_batch();
                return (0, Err(ClientError::Data(e.to_string())));
            }
        }
        let block_size = self.opts.block_size;
        let work: Vec<(Arc<dyn BlockSource>, SendPlan)> =
            items.iter().map(|f| (f.data.clone(), SendPlan::whole(f.size, block_size))).collect();
        let data_ctl = ctl.clone();
        let mut data = tokio::task::spawn_blocking(move || {
            let mut streams = streams;
            for (source, plan) in &work {
                streams = mode_e::send(streams, &**source, plan, &data_ctl)?;
            }
            Ok::<_, CopyError>(streams)
        });
        let mut data_result: Option<Result<Vec<ferry_io::transport::DataConn>, CopyError>> = None;
        let result = {
            let done = &mut done;
            let mut replies = Box::pin(async {
                for (i, item) in items.iter().enumerate() {
                    if sent.end < items.len() && sent.end - i < window.max(1) {
                        let next = next_chunk_facts(BatchKind::Store, items, sent.end, with_facts);
                        self.ctrl
                            .send(&batch_command_facts(
                                BatchKind::Store,
                                &items[next.clone()],
                                facts_of(next.clone()),
                                true,
                            ))
                            .await?;
                        sent = next;
                        ends.push_back(sent.end);
                    }
                    let allo = self.ctrl.reply_untimed().await?;
                    if !allo.code.is_positive_completion() {
                        return Err(refused(&Command::Allo(Allo { size: item.size, record: None }), allo));
                    }
                    let cmd = Command::Stor(item.path.clone());
                    loop {
                        match self.ctrl.next_event_untimed().await? {
                            PipelineEvent::Marker { marker, .. } => {
                                if let Some(m) = marker {
                                    on_marker(i, m);
                                }
                            }
                            PipelineEvent::Preliminary { .. } => {}
                            PipelineEvent::Final { reply, .. } if reply.code.is_positive_completion() => {
                                on_stored(i);
                                break;
                            }
                            ev => return Err(refused(&cmd, event_reply(ev))),
                        }
                    }
                    if ends.front() != Some(&(i + 1)) {
                        continue;
                    }
                    ends.pop_front();
                    let end = Command::BatchEnd { files: i + 1 - *done };
                    let r = self.ctrl.reply_untimed().await?;
                    if !r.code.is_positive_completion() {
                        return Err(refused(&end, r));
                    }
                    tracing::debug!(files = i + 1 - *done, "upload batch durable");
                    for j in *done..=i {
                        on_done(j);
                    }
                    *done = i + 1;
                }
                Ok::<(), ClientError>(())
            });
            replies_or_failed_data(replies.as_mut(), &mut data, &mut data_result).await
        };
        self.end_upload_batch(done, result, &ctl, data_result, data).await
    }

    /// The end of an upload batch whose data went out on its own thread
    /// (`store_batch_streamed`, `store_batch_stream_lines`): a failure of
    /// the replies stops the data, which is waited for; when both
    /// succeeded, its channels stay cached for the next batch, otherwise
    /// the session is not reused.
    async fn end_upload_batch(
        &mut self,
        done: usize,
        result: Result<(), ClientError>,
        ctl: &TransferControl,
        data_result: Option<Result<Vec<ferry_io::transport::DataConn>, CopyError>>,
        data: UploadData,
    ) -> (usize, Result<(), ClientError>) {
        if result.is_err() {
            ctl.abort.abort();
        }
        let data_result = match data_result {
            Some(d) => d,
            None => data.await.unwrap_or_else(|e| Err(CopyError::Network(std::io::Error::other(e.to_string())))),
        };
        match (result, data_result) {
            (Ok(()), Ok(streams)) => {
                if let Channel::Connecting { cached, .. } = &mut self.channel {
                    *cached = streams;
                }
                (done, Ok(()))
            }
            (Ok(()), Err(e)) => self.batch_outcome(done, Err(ClientError::Data(e.to_string()))),
            (Err(e), _) => self.batch_outcome(done, Err(e)),
        }
    }

    /// [`store_batch`](Self::store_batch) as `BSTO STREAM` lines
    /// (docs/batch.md, "The streamed upload"): each line's files go back
    /// to back as one MODE E transfer (file `k` at the sum of the earlier
    /// sizes), answered with the line's ALLO, one 125, one 226 (every file
    /// complete under its name: `on_stored`) and the batch's final reply
    /// (durable: `on_done`). One thread sends every line's data while this
    /// task reads the replies; the next line goes out while the current
    /// one's data flows. The server's restart markers are in the line's
    /// coordinates and are mapped to its files (`on_marker`). A failure
    /// stops at its line: the lines before it are done, the caller copies
    /// the rest one by one.
    async fn store_batch_stream_lines(
        &mut self,
        items: &[BatchFile<Arc<dyn BlockSource>>],
        facts: &[Option<EntryFacts>],
        control: impl Fn() -> TransferControl,
        on_marker: &mut (dyn FnMut(usize, Marker) + Send),
        on_stored: &mut (dyn FnMut(usize) + Send),
        on_done: &mut (dyn FnMut(usize) + Send),
    ) -> (usize, Result<(), ClientError>) {
        let with_facts = !facts.is_empty();
        // The session's first streamed run is cut short by its share, if
        // its copy gave it one ([`LineShare`]).
        let lines = stream_lines(items, with_facts, self.first_line_share.take());
        let line =
            |r: &Range<usize>| {
                Command::Batch(Batch::store_stream(items[r.clone()].iter().enumerate().map(|(j, f)| {
                    (f.path.clone(), f.size, if with_facts { facts[r.start + j].clone() } else { None })
                })))
            };
        self.ensure_connecting();
        let Some(first) = lines.first() else { return (0, Ok(())) };
        // A file worth resuming gets its restart record (no ranges yet)
        // when its line goes out: a copy killed before the server's first
        // marker resumes it from what the server recorded (`SITE PARTIAL`).
        // The server's files are anonymous until that marker, but a line
        // cut short names every incomplete file in its area with the
        // ranges it holds, markers or not; without this record the next
        // run sent such a file afresh and its partial stayed in
        // `.ferry-partial` (session 28 removed the record and
        // `an_interrupted_tree_copy_resumes_file_by_file` failed so).
        let mark_under_way = |r: &Range<usize>, on_marker: &mut (dyn FnMut(usize, Marker) + Send)| {
            for i in r.clone().filter(|&i| items[i].size >= RECORD_AT_START) {
                on_marker(i, Marker::Restart(ferry_proto::RangeSet::new()));
            }
        };
        mark_under_way(first, on_marker);
        let addr = match self.flush_connecting(&[line(first)]).await {
            Ok(a) => a,
            Err(e) => return (0, Err(e)),
        };
        let streams = match self.batch_streams(addr).await {
            Ok(s) => s,
            Err(e) => {
                self.reset_after_batch();
                return (0, Err(e));
            }
        };
        let ctl = control();
        for s in &streams {
            if let Err(e) = ctl.abort.register(&**s) {
                self.reset_after_batch();
                return (0, Err(ClientError::Data(e.to_string())));
            }
        }
        let block_size = self.opts.block_size;
        let work: Vec<(Arc<dyn BlockSource>, SendPlan)> = lines
            .iter()
            .map(|r| {
                let src = ConcatSource::new(items[r.clone()].iter().map(|f| (f.data.clone(), f.size)));
                let total = src.total();
                (Arc::new(src) as Arc<dyn BlockSource>, SendPlan::whole(total, block_size))
            })
            .collect();
        let data_ctl = ctl.clone();
        let mut data = tokio::task::spawn_blocking(move || {
            let mut streams = streams;
            for (source, plan) in &work {
                streams = mode_e::send(streams, &**source, plan, &data_ctl)?;
            }
            Ok::<_, CopyError>(streams)
        });
        let mut data_result: Option<Result<Vec<ferry_io::transport::DataConn>, CopyError>> = None;
        let mut done = 0;
        let result = {
            let done = &mut done;
            let mut replies = Box::pin(async {
                let mut sent = 1;
                for (li, r) in lines.iter().enumerate() {
                    if sent < lines.len() && sent <= li + 1 {
                        mark_under_way(&lines[sent], on_marker);
                        self.ctrl.send(&line(&lines[sent])).await?;
                        sent += 1;
                    }
                    let total: u64 = items[r.clone()].iter().map(|f| f.size).sum();
                    let allo = self.ctrl.reply_untimed().await?;
                    if !allo.code.is_positive_completion() {
                        return Err(refused(&Command::Allo(Allo { size: total, record: None }), allo));
                    }
                    let cmd = Command::Stor(items[r.start].path.clone());
                    let layout: StreamLayout = items[r.clone()].iter().map(|f| f.size).collect();
                    loop {
                        match self.ctrl.next_event_untimed().await? {
                            PipelineEvent::Marker { marker, .. } => match marker {
                                Some(Marker::Restart(ranges)) => {
                                    // The line's coordinates to each file's.
                                    for (j, f) in items[r.clone()].iter().enumerate() {
                                        let (s, e) = (layout.start(j), layout.start(j) + layout.size(j));
                                        let mut mine = ferry_proto::RangeSet::new();
                                        for x in ranges.ranges() {
                                            let (a, b) = (x.start.max(s), x.end.min(e));
                                            if a < b {
                                                mine.insert(a - s..b - s);
                                            }
                                        }
                                        if f.size > 0 && mine.covered() == f.size {
                                            // Complete, so renamed under
                                            // its name: nothing to resume.
                                            on_stored(r.start + j);
                                        } else if !mine.is_empty() {
                                            on_marker(r.start + j, Marker::Restart(mine));
                                        }
                                    }
                                }
                                Some(m) => on_marker(r.start, m),
                                None => {}
                            },
                            PipelineEvent::Preliminary { .. } => {}
                            PipelineEvent::Final { reply, .. } if reply.code.is_positive_completion() => {
                                for i in r.clone() {
                                    on_stored(i);
                                }
                                break;
                            }
                            ev => return Err(refused(&cmd, event_reply(ev))),
                        }
                    }
                    let end = Command::BatchEnd { files: r.len() };
                    let reply = self.ctrl.reply_untimed().await?;
                    if !reply.code.is_positive_completion() {
                        return Err(refused(&end, reply));
                    }
                    tracing::debug!(files = r.len(), stream = true, "upload batch durable");
                    for j in r.clone() {
                        on_done(j);
                    }
                    *done = r.end;
                }
                Ok::<(), ClientError>(())
            });
            replies_or_failed_data(replies.as_mut(), &mut data, &mut data_result).await
        };
        self.end_upload_batch(done, result, &ctl, data_result, data).await
    }

    /// The session's cached upload connections, topped up to its number
    /// of parallel streams.
    async fn batch_streams(
        &mut self,
        addr: std::net::SocketAddr,
    ) -> Result<Vec<ferry_io::transport::DataConn>, ClientError> {
        let Channel::Connecting { cached, .. } = &mut self.channel else {
            return Err(super::channel_changed());
        };
        let mut streams = super::channel::live_cached(std::mem::take(cached));
        let missing = (self.parallelism as usize).saturating_sub(streams.len());
        streams.extend(self.connect_many(addr, missing).await?);
        Ok(streams)
    }
}

/// Cuts a streamed upload into `BSTO STREAM` lines: each within the
/// command line's bytes and [`STREAM_LINE_BYTES`] (at least one file),
/// the first cut to `share` of a full line when given.
fn stream_lines<D>(items: &[BatchFile<D>], with_facts: bool, share: Option<LineShare>) -> Vec<Range<usize>> {
    let mut lines: Vec<Range<usize>> = Vec::new();
    while lines.last().map_or(0, |r| r.end) < items.len() {
        let from = lines.last().map_or(0, |r| r.end);
        let mut n = next_chunk_facts(BatchKind::Store, items, from, with_facts).len();
        if let (true, Some(share)) = (lines.is_empty(), share) {
            n = share.of(n);
        }
        // A line's total stays within STREAM_LINE_BYTES (at least one
        // file), so a line is one transfer of bounded length.
        let mut total = 0u64;
        let mut k = 0;
        while k < n && (k == 0 || total.saturating_add(items[from + k].size) <= STREAM_LINE_BYTES) {
            total = total.saturating_add(items[from + k].size);
            k += 1;
        }
        lines.push(from..from + k);
    }
    lines
}

/// The part of a full line a session's first streamed upload line is cut
/// to: session `i` of a copy's `n` gets `(n - i) / n`, so the lines of
/// sessions begun together end at different moments and stay apart. When
/// they all ended together (equal lines, begun together), every session's
/// durability pass (`syncfs`, which waits for all the file system's
/// writes) and next line's creates came at once and the device's queue
/// emptied: 16 direct writes in flight fell to 1 for 30–40 ms at every
/// line's end, four times in a 0.68-s upload of 2,000 × 256 KiB
/// (`bench/results/small-files-s23`, `depth.py`). Given per copy, not per
/// process, so that a long-lived process (the transfer service) staggers
/// every copy's sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineShare {
    num: usize,
    den: usize,
}

impl LineShare {
    /// Session `index` (from 0, the copy's first) of `sessions`; `None`
    /// for the first, whose lines are whole.
    pub fn of_session(index: usize, sessions: usize) -> Option<Self> {
        (index > 0 && index < sessions).then_some(Self { num: sessions - index, den: sessions })
    }

    /// This share of `n` files, at least one.
    fn of(self, n: usize) -> usize {
        (n * self.num / self.den).max(1)
    }
}

/// Most bytes one `BSTO STREAM` line carries (at least one file): a line
/// is one transfer, and a failure or a kill costs at most its
/// incomplete files' resumes.
const STREAM_LINE_BYTES: u64 = 256 << 20;

/// Files of a streamed upload from this size up get a restart record when
/// their line goes out (smaller ones are sent again whole after a kill).
const RECORD_AT_START: u64 = 1 << 20;

/// A streamed upload line's files as one source: file `k`'s bytes at the
/// sum of the earlier sizes (docs/batch.md, "The streamed upload").
struct ConcatSource {
    sources: Vec<Arc<dyn BlockSource>>,
    layout: StreamLayout,
}

impl ConcatSource {
    fn new(files: impl IntoIterator<Item = (Arc<dyn BlockSource>, u64)>) -> Self {
        let (sources, sizes): (Vec<_>, Vec<u64>) = files.into_iter().unzip();
        Self { sources, layout: sizes.into_iter().collect() }
    }

    fn total(&self) -> u64 {
        self.layout.total()
    }
}

impl BlockSource for ConcatSource {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let Some((k, at, left)) = self.layout.locate(offset) else { return Ok(0) };
        let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let got = self.sources[k].read_at(&mut buf[..n], at)?;
        if got == 0 && n > 0 {
            // A source shorter than listed: the line cannot be sent as
            // declared (the server would store a short file otherwise).
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "a file of the line is shorter than when it was listed",
            ));
        }
        Ok(got)
    }

    fn file_range(&self, offset: u64, len: usize) -> Option<ferry_io::endpoint::FileRange<'_>> {
        let (k, at, left) = self.layout.locate(offset)?;
        let len = len.min(usize::try_from(left).unwrap_or(usize::MAX));
        self.sources[k].file_range(at, len)
    }

    fn zero_copy(&self) -> bool {
        self.sources.iter().all(|s| s.zero_copy())
    }
}

/// The sink of a streamed download line: stream byte `o` goes to the file
/// whose range holds it (file `k` at the sum of the earlier sizes), and each
/// file's arrived ranges go to its own [`ReceiveState`] (its restart
/// record). A file whose byte count reaches its size is reported complete.
struct StreamSink {
    sinks: Vec<Arc<dyn BlockSink>>,
    layout: StreamLayout,
    counts: Vec<std::sync::atomic::AtomicU64>,
    states: Vec<Arc<ReceiveState>>,
    completed: tokio::sync::mpsc::UnboundedSender<usize>,
}

impl StreamSink {
    fn new(
        items: &[BatchFile<Arc<dyn BlockSink>>],
        states: &[Arc<ReceiveState>],
        completed: tokio::sync::mpsc::UnboundedSender<usize>,
    ) -> Self {
        let layout = items.iter().map(|f| f.size).collect();
        Self {
            sinks: items.iter().map(|f| f.data.clone()).collect(),
            layout,
            counts: items.iter().map(|_| Default::default()).collect(),
            states: states.to_vec(),
            completed,
        }
    }

    fn total(&self) -> u64 {
        self.layout.total()
    }

    /// The file holding stream byte `offset`, the offset in it and the
    /// bytes of it from there.
    fn locate(&self, offset: u64) -> std::io::Result<(usize, u64, u64)> {
        self.layout.locate(offset).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a block at byte {offset} beyond the streamed batch's {} bytes", self.total()),
            )
        })
    }

    fn arrived(&self, k: usize, at: u64, n: u64) {
        self.states[k].written(at..at + n);
        let size = self.layout.size(k);
        let before = self.counts[k].fetch_add(n, std::sync::atomic::Ordering::AcqRel);
        if before < size && before + n >= size {
            let _ = self.completed.send(k);
        }
    }
}

impl BlockSink for StreamSink {
    fn write_at(&self, data: &[u8], offset: u64) -> std::io::Result<()> {
        let mut pos = 0usize;
        while pos < data.len() {
            let (k, at, left) = self.locate(offset + pos as u64)?;
            let n = (data.len() - pos).min(usize::try_from(left).unwrap_or(usize::MAX));
            self.sinks[k].write_at(&data[pos..pos + n], at)?;
            self.arrived(k, at, n as u64);
            pos += n;
        }
        Ok(())
    }

    fn splice_from(
        &self,
        sock: std::os::fd::BorrowedFd<'_>,
        offset: u64,
        len: usize,
    ) -> Option<std::io::Result<usize>> {
        let (k, at, left) = match self.locate(offset) {
            Ok(x) => x,
            Err(e) => return Some(Err(e)),
        };
        let n = len.min(usize::try_from(left).unwrap_or(usize::MAX));
        let r = self.sinks[k].splice_from(sock, at, n);
        if let Some(Ok(m)) = &r {
            if *m > 0 {
                self.arrived(k, at, *m as u64);
            }
        }
        r
    }
}

/// Reads an upload batch's replies while its data goes out on its own
/// thread. The data's end is kept in `data_result`; if it failed, the
/// replies are not waited for: the server waits for data that will not
/// come.
async fn replies_or_failed_data(
    mut replies: std::pin::Pin<&mut impl std::future::Future<Output = Result<(), ClientError>>>,
    data: &mut UploadData,
    data_result: &mut Option<Result<Vec<ferry_io::transport::DataConn>, CopyError>>,
) -> Result<(), ClientError> {
    loop {
        tokio::select! {
            r = &mut replies => return r,
            d = &mut *data, if data_result.is_none() => {
                let d = d.unwrap_or_else(|e| Err(CopyError::Network(std::io::Error::other(e.to_string()))));
                let failed = d.as_ref().err().map(|e| ClientError::Data(e.to_string()));
                *data_result = Some(d);
                if let Some(e) = failed {
                    return Err(e);
                }
            }
        }
    }
}

/// An upload batch's data thread: its channels back when it is done.
type UploadData = tokio::task::JoinHandle<Result<Vec<ferry_io::transport::DataConn>, CopyError>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn files(n: usize, size: u64) -> Vec<BatchFile<()>> {
        (0..n).map(|i| BatchFile { path: format!("d/f{i:05}"), size, data: () }).collect()
    }

    fn lens(lines: &[Range<usize>]) -> Vec<usize> {
        lines.iter().map(|r| r.len()).collect()
    }

    #[test]
    fn lines_cover_every_file_once_in_order() {
        let items = files(2000, 256 << 10);
        for share in [None, LineShare::of_session(3, 8)] {
            let lines = stream_lines(&items, true, share);
            assert_eq!(lines.first().map(|r| r.start), Some(0));
            assert!(lines.windows(2).all(|w| w[0].end == w[1].start && !w[0].is_empty()));
            assert_eq!(lines.last().map(|r| r.end), Some(items.len()));
        }
    }

    #[test]
    fn the_sessions_first_lines_are_cut_to_their_shares_and_the_rest_are_whole() {
        let items = files(2000, 256 << 10);
        let whole = lens(&stream_lines(&items, true, None));
        let full = whole[0];
        assert!(full > 8, "a full line holds many small files ({full})");
        // Session 0 of 8 keeps whole lines; session i's first line is
        // (8 - i) / 8 of a full one, and its next lines are full again.
        assert_eq!(LineShare::of_session(0, 8), None);
        let mut firsts = Vec::new();
        for i in 1..8 {
            let cut = lens(&stream_lines(&items, true, LineShare::of_session(i, 8)));
            assert_eq!(cut[0], full * (8 - i) / 8, "session {i}");
            assert_eq!(cut[1], full, "session {i}: the second line is whole");
            firsts.push(cut[0]);
        }
        // Every session's first line ends at a different file.
        firsts.push(full);
        firsts.sort_unstable();
        firsts.dedup();
        assert_eq!(firsts.len(), 8);
    }

    #[test]
    fn a_cut_line_keeps_at_least_one_file_and_big_files_stay_within_a_lines_bytes() {
        let one = files(1, 1 << 30);
        assert_eq!(lens(&stream_lines(&one, false, LineShare::of_session(7, 8))), vec![1]);
        // 100 files of 100 MiB: a line carries at most STREAM_LINE_BYTES
        // (two of them), the first too (its cut, an eighth of the files a
        // command line holds, is more than two).
        let big = files(100, 100 << 20);
        let lines = lens(&stream_lines(&big, false, LineShare::of_session(7, 8)));
        assert!(lines.iter().all(|&n| n == 2), "{lines:?}");
        assert_eq!(LineShare::of_session(8, 8), None, "no session past the copy's count");
    }
}
