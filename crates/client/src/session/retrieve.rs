//! Downloads in extended block mode: one file (RETR, or a window of it
//! with ERET), and many files pipelined over the cached channels.

use super::{channel_changed, BatchFile, Channel, ServerSession};
use crate::error::ClientError;
use ferry_io::mode_e::{self, BlockSink, ReceiveSpec, ReceiveState, TransferControl};
use ferry_io::transport::DataConn;
use ferry_proto::client::BatchWindow;
use ferry_proto::command::Command;
use ferry_proto::RangeSet;
use std::sync::Arc;
use tokio::sync::mpsc;

impl ServerSession {
    /// Receives the data of a RETR whose preliminary reply has arrived.
    pub(super) async fn receive_retrieved(
        &mut self,
        cmd: &Command,
        incoming: &mut mpsc::Receiver<DataConn>,
        sink: Arc<dyn BlockSink>,
        size: Option<u64>,
        state: Arc<ReceiveState>,
        ctl: &TransferControl,
    ) -> Result<(), ClientError> {
        let Channel::Listening { cached, .. } = &mut self.channel else {
            return Err(channel_changed());
        };
        let initial = std::mem::take(cached);
        let spec = ReceiveSpec::new(0, size);
        let recv = mode_e::receive(initial, incoming, sink, spec, state, ctl.clone(), self.opts.timeout);
        let kept = self.run_with_replies(cmd, recv, ctl, &mut |_| {}).await?;
        if let Channel::Listening { cached, .. } = &mut self.channel {
            *cached = kept;
        }
        Ok(())
    }

    /// A MODE E download of `path` into `sink`, skipping the ranges in
    /// `done`. `state` collects the received ranges (restart markers of our
    /// own).
    pub async fn retrieve_e(
        &mut self,
        path: &str,
        sink: Arc<dyn BlockSink>,
        size: Option<u64>,
        done: &RangeSet,
        state: Arc<ReceiveState>,
        ctl: &TransferControl,
    ) -> Result<(), ClientError> {
        self.retrieve_cmd_e(Command::Retr(path.to_string()), sink, size, done, state, ctl).await
    }

    /// A MODE E download of `length` bytes of `path` from `offset` (GridFTP
    /// `ERET P`); block offsets in `sink` count from `offset`.
    pub async fn retrieve_range_e(
        &mut self,
        path: &str,
        offset: u64,
        length: u64,
        sink: Arc<dyn BlockSink>,
        state: Arc<ReceiveState>,
        ctl: &TransferControl,
    ) -> Result<(), ClientError> {
        let cmd = Command::Eret { offset, length, path: path.to_string() };
        self.retrieve_cmd_e(cmd, sink, Some(length), &RangeSet::new(), state, ctl).await
    }

    pub(super) async fn retrieve_cmd_e(
        &mut self,
        cmd: Command,
        sink: Arc<dyn BlockSink>,
        size: Option<u64>,
        done: &RangeSet,
        state: Arc<ReceiveState>,
        ctl: &TransferControl,
    ) -> Result<(), ClientError> {
        let path = match &cmd {
            Command::Retr(p) | Command::Eret { path: p, .. } => p.clone(),
            other => return Err(ClientError::Usage(format!("{other} is not a download command"))),
        };
        let path = path.as_str();
        let sent_with_login = matches!(cmd, Command::Retr(_))
            && self.pending.as_deref() == Some(path)
            && done.is_empty()
            && matches!(self.channel, Channel::Listening { .. });
        if sent_with_login {
            self.pending = None;
        } else {
            self.ensure_listening()?;
            self.rest(done);
            self.flush(std::slice::from_ref(&cmd)).await?;
        }
        self.preliminary(&cmd, &mut |_| {}).await?;
        let (acceptor, mut rx) = self.spawn_acceptor()?;
        let result = self.receive_retrieved(&cmd, &mut rx, sink, size, state, ctl).await;
        acceptor.abort();
        result
    }

    /// A MODE E download of `length` bytes of `path` from `offset` into
    /// `sink`, whose offsets start at 0 (the window's first byte).
    ///
    /// GFD.20, "Extended Retrieve": `ERET P <offset> <length> <path>`
    /// (the partial-file module) sends that part of the file. Ferry and
    /// Globus number the window's blocks from 0, so the receiver's base
    /// and limit are the window's. `ferry probe` and `ferry tune` use it to
    /// bound a measuring download of a large file (or of `/dev/zero`).
    pub async fn retrieve_part_e(
        &mut self,
        path: &str,
        offset: u64,
        length: u64,
        sink: Arc<dyn BlockSink>,
        state: Arc<ReceiveState>,
        ctl: &TransferControl,
    ) -> Result<(), ClientError> {
        let cmd = Command::Eret { offset, length, path: path.to_string() };
        self.ensure_listening()?;
        self.flush(std::slice::from_ref(&cmd)).await?;
        self.preliminary(&cmd, &mut |_| {}).await?;
        let (acceptor, mut rx) = self.spawn_acceptor()?;
        let result = self.receive_retrieved(&cmd, &mut rx, sink, Some(length), state, ctl).await;
        acceptor.abort();
        result
    }

    /// One file of a pipelined download (`retrieve_many`, `retrieve_batch`):
    /// its preliminary reply, its data, and the check that all of it arrived.
    pub(super) async fn receive_item(
        &mut self,
        item: &BatchFile<Arc<dyn BlockSink>>,
        incoming: &mut mpsc::Receiver<DataConn>,
        state: Arc<ReceiveState>,
        ctl: &TransferControl,
    ) -> Result<(), ClientError> {
        let cmd = Command::Retr(item.path.clone());
        self.preliminary(&cmd, &mut |_| {}).await?;
        self.receive_retrieved(&cmd, incoming, item.data.clone(), Some(item.size), state.clone(), ctl).await?;
        let got = state.received.lock().unwrap_or_else(|e| e.into_inner()).covered();
        if got != item.size {
            return Err(ClientError::Incomplete { path: item.path.clone(), expected: item.size, got });
        }
        Ok(())
    }

    /// Downloads many files over the cached MODE E channel with up to
    /// `window` RETRs in flight, so each file does not cost a round trip.
    /// Stops at the first failure and returns how many files completed;
    /// the caller copies the rest one by one (after an error the state of
    /// cached channels differs between servers, so a batch does not guess).
    ///
    /// `states[i]` collects what arrived of item `i` (the caller records it
    /// for a resume); `on_done(i)` runs as soon as item `i` is complete, so
    /// the caller can commit it before the rest of the batch ends.
    pub async fn retrieve_many(
        &mut self,
        items: &[BatchFile<Arc<dyn BlockSink>>],
        window: usize,
        control: impl Fn() -> TransferControl,
        states: &[Arc<ReceiveState>],
        on_done: &mut (dyn FnMut(usize) + Send),
    ) -> (usize, Result<(), ClientError>) {
        let (acceptor, mut rx) = match self.listen_and_accept() {
            Ok(x) => x,
            Err(e) => return (0, Err(e)),
        };
        let mut w = BatchWindow::new(items.len(), window);
        let result = async {
            // The set-up and the first window of RETRs go in one write.
            let first: Vec<Command> = w.to_send().map(|j| Command::Retr(items[j].path.clone())).collect();
            self.flush(&first).await?;
            for (i, item) in items.iter().enumerate() {
                for j in w.to_send() {
                    self.ctrl.send(&Command::Retr(items[j].path.clone())).await?;
                }
                let state = states.get(i).cloned().unwrap_or_default();
                self.receive_item(item, &mut rx, state, &control()).await?;
                w.completed();
                on_done(i);
            }
            Ok(())
        }
        .await;
        acceptor.abort();
        self.batch_outcome(w.done(), result)
    }
}
