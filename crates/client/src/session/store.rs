//! Uploads in extended block mode: one file (ALLO, REST, STOR), and many
//! files pipelined over the cached channels.

use super::{channel_changed, BatchFile, Channel, Marker, ServerSession};
use crate::control::refused;
use crate::error::ClientError;
use ferry_io::mode_e::{self, BlockSource, SendPlan, TransferControl};
use ferry_io::stream::CopyError;
use ferry_proto::client::{BatchWindow, Expect};
use ferry_proto::command::{Allo, Command};
use ferry_proto::RangeSet;
use std::net::SocketAddr;
use std::sync::Arc;

impl ServerSession {
    /// Opens the data connections for a STOR already sent (Globus answers
    /// 150 only once they exist), waits for the 1xx and sends the data.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn send_stored(
        &mut self,
        cmd: &Command,
        addr: SocketAddr,
        source: Arc<dyn BlockSource>,
        plan: SendPlan,
        ctl: &TransferControl,
        on_marker: &mut (dyn FnMut(Marker) + Send),
        wait_preliminary: bool,
    ) -> Result<(), ClientError> {
        let Channel::Connecting { cached, .. } = &mut self.channel else {
            return Err(channel_changed());
        };
        let mut streams = super::channel::live_cached(std::mem::take(cached));
        let missing = (self.parallelism as usize).saturating_sub(streams.len());
        streams.extend(self.connect_many(addr, missing).await?);
        for s in &streams {
            ctl.abort.register(&**s).map_err(|e| ClientError::Data(e.to_string()))?;
        }
        // A refusal resets the channel: the streams close with it and the
        // next transfer sets up a new one (PASV). Without the wait (a
        // `BSTO SYNC` batch, docs/batch.md) the 125 comes while the data
        // goes, and a server that refuses the file refuses the rest of the
        // batch too, so its data is never taken for the next file's.
        if wait_preliminary {
            self.preliminary(cmd, on_marker).await?;
        }
        let c = ctl.clone();
        let send = async move {
            tokio::task::spawn_blocking(move || mode_e::send(streams, &*source, &plan, &c))
                .await
                .map_err(|e| CopyError::Network(std::io::Error::other(e.to_string())))?
        };
        let kept = self.run_with_replies(cmd, send, ctl, on_marker).await?;
        if let Channel::Connecting { cached, .. } = &mut self.channel {
            *cached = kept;
        }
        Ok(())
    }

    /// A MODE E upload of `size` bytes of `source` to `path`, skipping
    /// the ranges in `done` (the destination has them).
    pub async fn store_e(
        &mut self,
        path: &str,
        source: Arc<dyn BlockSource>,
        size: u64,
        done: &RangeSet,
        ctl: &TransferControl,
        on_marker: &mut (dyn FnMut(Marker) + Send),
    ) -> Result<(), ClientError> {
        self.ensure_connecting();
        self.queue(Command::Allo(Allo { size, record: None }), Expect::Positive);
        self.rest(done);
        let plan = SendPlan::missing(size, done, self.opts.block_size);
        let cmd = Command::Stor(path.to_string());
        let addr = self.flush_connecting(std::slice::from_ref(&cmd)).await?;
        self.send_stored(&cmd, addr, source, plan, ctl, on_marker, true).await
    }

    /// Uploads many files over the cached MODE E channel with up to
    /// `window` ALLO+STOR pairs in flight. Like [`retrieve_many`]: stops at
    /// the first failure and returns how many completed.
    ///
    /// [`retrieve_many`]: Self::retrieve_many
    ///
    /// `on_marker(i, m)` gets the destination's markers for item `i`;
    /// `on_done(i)` runs when the server confirmed item `i`.
    pub async fn store_many(
        &mut self,
        items: &[BatchFile<Arc<dyn BlockSource>>],
        window: usize,
        control: impl Fn() -> TransferControl,
        on_marker: &mut (dyn FnMut(usize, Marker) + Send),
        on_done: &mut (dyn FnMut(usize) + Send),
    ) -> (usize, Result<(), ClientError>) {
        self.ensure_connecting();
        let mut w = BatchWindow::new(items.len(), window);
        let result = async {
            // The set-up and the first window of ALLO+STORs go in one write.
            let first: Vec<Command> = items[w.to_send()]
                .iter()
                .flat_map(|f| [Command::Allo(Allo { size: f.size, record: None }), Command::Stor(f.path.clone())])
                .collect();
            let addr = self.flush_connecting(&first).await?;
            for (i, item) in items.iter().enumerate() {
                for it in &items[w.to_send()] {
                    self.ctrl.send(&Command::Allo(Allo { size: it.size, record: None })).await?;
                    self.ctrl.send(&Command::Stor(it.path.clone())).await?;
                }
                let allo = self.ctrl.reply().await?;
                if !allo.code.is_positive_completion() {
                    return Err(refused(&Command::Allo(Allo { size: item.size, record: None }), allo));
                }
                let cmd = Command::Stor(item.path.clone());
                let plan = SendPlan::whole(item.size, self.opts.block_size);
                self.send_stored(&cmd, addr, item.data.clone(), plan, &control(), &mut |m| on_marker(i, m), true)
                    .await?;
                w.completed();
                on_done(i);
            }
            Ok(())
        }
        .await;
        if result.is_err() {
            self.reset_after_batch();
        }
        (w.done(), result)
    }
}
