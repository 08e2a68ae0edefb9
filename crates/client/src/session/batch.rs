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

use super::{BatchFile, ServerSession};
use crate::control::refused;
use crate::error::ClientError;
use ferry_io::mode_e::{BlockSink, BlockSource, ReceiveState, SendPlan, TransferControl};
use ferry_proto::batch::{fits, Batch, BatchKind, SYNC_WORD};
use ferry_proto::command::{Allo, Command};
use ferry_proto::line::DEFAULT_MAX_LINE;
use std::ops::Range;
use std::sync::Arc;

use super::Marker;

/// The next slice of `items` that fits one batch line.
fn next_chunk<D>(kind: BatchKind, items: &[BatchFile<D>], from: usize) -> Range<usize> {
    let rest: Vec<(&str, u64)> = items[from..].iter().map(|f| (f.path.as_str(), f.size)).collect();
    if rest.is_empty() {
        return from..from;
    }
    from..from + fits(kind, &rest, DEFAULT_MAX_LINE)
}

fn batch_command<D>(kind: BatchKind, items: &[BatchFile<D>], sync: bool) -> Command {
    Command::Batch(match kind {
        BatchKind::Retrieve => Batch::retrieve(items.iter().map(|f| f.path.clone())),
        BatchKind::Store if sync => Batch::store(items.iter().map(|f| (f.path.clone(), f.size))).durable_at_end(),
        BatchKind::Store => Batch::store(items.iter().map(|f| (f.path.clone(), f.size))),
    })
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
        if let Err(e) = self.ensure_listening() {
            return (0, Err(e));
        }
        let (acceptor, mut rx) = match self.spawn_acceptor() {
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
        if result.is_err() {
            self.reset_after_batch();
        }
        (done, result)
    }

    /// [`store_many`](Self::store_many) with the files named in `BSTO`
    /// lines (each entry stands for `ALLO size` + `STOR path`).
    ///
    /// With a server that makes batches durable in one pass (`BSTO SYNC`,
    /// docs/batch.md) a file's 226 means only "complete, under its name":
    /// the files of a line count as done — `on_done`, the returned count —
    /// only when the line's final reply says they are durable. A batch
    /// stopped before it leaves them uncounted, so they are checked again
    /// (size, time, `--verify` checksums) and sent again if they differ.
    pub async fn store_batch(
        &mut self,
        items: &[BatchFile<Arc<dyn BlockSource>>],
        window: usize,
        control: impl Fn() -> TransferControl,
        on_marker: &mut (dyn FnMut(usize, Marker) + Send),
        on_done: &mut (dyn FnMut(usize) + Send),
    ) -> (usize, Result<(), ClientError>) {
        if !self.supports_batch() {
            return self.store_many(items, window, control, on_marker, on_done).await;
        }
        self.ensure_connecting();
        let sync = self.supports_batch_sync();
        let mut done = 0;
        let result = async {
            let mut sent = next_chunk(BatchKind::Store, items, 0);
            // Where each line sent so far ends: its final reply follows
            // that file's 226 (`BSTO SYNC`).
            let mut ends = std::collections::VecDeque::from([sent.end]);
            let addr = self.flush_connecting(&[batch_command(BatchKind::Store, &items[sent.clone()], sync)]).await?;
            for (i, item) in items.iter().enumerate() {
                if sent.end < items.len() && sent.end - i < window.max(1) {
                    let next = next_chunk(BatchKind::Store, items, sent.end);
                    self.ctrl.send(&batch_command(BatchKind::Store, &items[next.clone()], sync)).await?;
                    sent = next;
                    ends.push_back(sent.end);
                }
                let allo = self.ctrl.reply().await?;
                if !allo.code.is_positive_completion() {
                    return Err(refused(&Command::Allo(Allo { size: item.size, record: None }), allo));
                }
                let cmd = Command::Stor(item.path.clone());
                let plan = SendPlan::whole(item.size, self.opts.block_size);
                // In a `BSTO SYNC` batch the data goes without waiting
                // for the file's 125: one round trip less per file.
                let control = control();
                self.send_stored(&cmd, addr, item.data.clone(), plan, &control, &mut |m| on_marker(i, m), !sync)
                    .await?;
                if !sync {
                    done += 1;
                    on_done(i);
                    continue;
                }
                if ends.front() != Some(&(i + 1)) {
                    continue;
                }
                ends.pop_front();
                // The line's final reply: its files are durable (or not).
                let end = Command::BatchEnd { files: i + 1 - done };
                let r = self.ctrl.reply_untimed().await?;
                if !r.code.is_positive_completion() {
                    return Err(refused(&end, r));
                }
                tracing::debug!(files = i + 1 - done, "upload batch durable");
                for j in done..=i {
                    on_done(j);
                }
                done = i + 1;
            }
            Ok(())
        }
        .await;
        if result.is_err() {
            self.reset_after_batch();
        }
        (done, result)
    }
}
