//! Reading a transfer's control replies: up to its preliminary reply
//! (150/125), and then, while the data side runs, to its final one —
//! with the GridFTP markers (111 restart, 112 performance) handed on as
//! they come.

use super::{Channel, Marker, ServerSession};
use crate::control::{event_reply, refused};
use crate::error::ClientError;
use ferry_io::mode_e::TransferControl;
use ferry_io::stream::CopyError;
use ferry_proto::client::PipelineEvent;
use ferry_proto::command::Command;
use ferry_proto::Reply;

/// How often a transfer's progress is sampled for the path cache.
const TRACE_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
/// Most samples a trace holds: at this length every other one is dropped,
/// so a copy of any length keeps a bounded trace whose older part is
/// coarser (`steady_rate` windows by time, not by sample).
const TRACE_MAX: usize = 4096;

/// Appends a progress sample, halving the trace when it is full.
fn push_sample(trace: &mut Vec<(f64, u64)>, sample: (f64, u64)) {
    if trace.len() >= TRACE_MAX {
        let mut i = 0;
        trace.retain(|_| {
            i += 1;
            i % 2 == 1
        });
    }
    trace.push(sample);
}

impl ServerSession {
    /// The first reply to a transfer command that is not a marker.
    pub(super) async fn preliminary_or_refusal(&mut self) -> Result<Reply, ClientError> {
        loop {
            match self.ctrl.next_event().await? {
                PipelineEvent::Marker { .. } => continue,
                ev => return Ok(event_reply(ev)),
            }
        }
    }

    /// Reads replies up to the transfer's preliminary one (150/125): the
    /// pipeline says which reply is which.
    pub(super) async fn preliminary(
        &mut self,
        cmd: &Command,
        on_marker: &mut (dyn FnMut(Marker) + Send),
    ) -> Result<Reply, ClientError> {
        loop {
            match self.ctrl.next_event().await? {
                PipelineEvent::Marker { marker, .. } => {
                    if let Some(m) = marker {
                        on_marker(m);
                    }
                }
                PipelineEvent::Preliminary { reply, .. } => return Ok(reply),
                ev => {
                    self.channel = Channel::None;
                    return Err(refused(cmd, event_reply(ev)));
                }
            }
        }
    }

    /// Runs the data side of a transfer while reading its control replies;
    /// a failure reply stops the data side instead of waiting for a timeout.
    pub(super) async fn run_with_replies<T>(
        &mut self,
        cmd: &Command,
        data: impl std::future::Future<Output = Result<T, CopyError>>,
        ctl: &TransferControl,
        on_marker: &mut (dyn FnMut(Marker) + Send),
    ) -> Result<T, ClientError> {
        self.run_with_replies_then(cmd, data, ctl, on_marker, true).await
    }

    /// [`run_with_replies`](Self::run_with_replies); with `stop_on_refusal`
    /// false a failure reply does not stop the data side, which ends by
    /// itself: a streamed batch line cut before a changed file
    /// (docs/batch.md) sends the files before it whole, then its EOD, then
    /// the 451, which may come before the client read all of that data. A
    /// server that fails otherwise drops the data connections, which ends
    /// the data side too (or its stall timeout does).
    pub(super) async fn run_with_replies_then<T>(
        &mut self,
        cmd: &Command,
        data: impl std::future::Future<Output = Result<T, CopyError>>,
        ctl: &TransferControl,
        on_marker: &mut (dyn FnMut(Marker) + Send),
        stop_on_refusal: bool,
    ) -> Result<T, ClientError> {
        tokio::pin!(data);
        let (started, before) = (std::time::Instant::now(), ctl.progress.load(std::sync::atomic::Ordering::Relaxed));
        let mut data_result = None;
        let mut final_reply: Option<Reply> = None;
        // What moved by when, for the path cache's steady rate
        // (`path_cache::steady_rate`); only when a cache is kept.
        let tracing_rate = self.opts.path_cache.is_some();
        let mut trace: Vec<(f64, u64)> = Vec::new();
        let mut tick = tokio::time::interval(TRACE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let moved = || ctl.progress.load(std::sync::atomic::Ordering::Relaxed).saturating_sub(before);
        while data_result.is_none() || final_reply.is_none() {
            tokio::select! {
                r = &mut data, if data_result.is_none() => {
                    if r.is_err() {
                        ctl.abort.abort();
                    }
                    if tracing_rate {
                        push_sample(&mut trace, (started.elapsed().as_secs_f64(), moved()));
                    }
                    data_result = Some(r);
                }
                _ = tick.tick(), if tracing_rate && data_result.is_none() => {
                    push_sample(&mut trace, (started.elapsed().as_secs_f64(), moved()));
                }
                ev = self.ctrl.next_event_untimed(), if final_reply.is_none() => {
                    let r = match ev? {
                        PipelineEvent::Marker { marker, .. } => {
                            if let Some(m) = marker {
                                on_marker(m);
                            }
                            continue;
                        }
                        PipelineEvent::Preliminary { .. } => continue,
                        PipelineEvent::Final { reply, .. } | PipelineEvent::Unsolicited(reply) => reply,
                    };
                    if r.code.is_negative() && stop_on_refusal {
                        ctl.abort.abort();
                    }
                    final_reply = Some(r);
                }
            }
        }
        let reply = final_reply.expect("loop ends with a reply");
        if !reply.code.is_positive_completion() {
            self.channel = Channel::None;
            // A local disk error (disk full) is the cause; the server's
            // 426 for the connections we dropped is only the effect.
            if let Some(Err(CopyError::Disk(e))) = data_result {
                return Err(ClientError::Local { path: "local file".into(), error: e });
            }
            return Err(refused(cmd, reply));
        }
        match data_result.expect("loop ends with a result") {
            Ok(v) => {
                // The data side's end, not the 226's arrival, ends the sample.
                let (secs, bytes) = trace.last().copied().unwrap_or((started.elapsed().as_secs_f64(), moved()));
                self.record_path_sample(bytes, std::time::Duration::from_secs_f64(secs), &trace);
                Ok(v)
            }
            Err(e) => {
                self.channel = Channel::None;
                Err(match e {
                    CopyError::Disk(e) => ClientError::Local { path: "local file".into(), error: e },
                    e => ClientError::Data(e.to_string()),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_stays_bounded_and_keeps_its_ends() {
        let mut trace = Vec::new();
        for i in 0..100_000u64 {
            push_sample(&mut trace, (i as f64 / 10.0, i));
        }
        assert!(trace.len() <= TRACE_MAX, "{}", trace.len());
        assert_eq!(trace.first(), Some(&(0.0, 0)));
        assert_eq!(trace.last(), Some(&(9999.9, 99_999)));
        assert!(trace.windows(2).all(|w| w[0].0 < w[1].0), "in order");
    }
}
