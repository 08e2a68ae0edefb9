//! Server-to-server (third-party) copies in extended block mode: the
//! destination listens (PASV), the source connects to it (PORT), and the
//! data never passes through the client (GFD.20; RFC 959 §5.2 for the
//! stream-mode original). Both servers are commanded before either's 150
//! is awaited, because a Globus destination answers only once the source
//! has connected.

use super::{channel_changed, Channel, Marker, ServerSession};
use crate::control::refused;
use crate::error::ClientError;
use ferry_proto::client::{BatchWindow, Expect, PipelineEvent};
use ferry_proto::command::{Allo, Command, Dcau};
use ferry_proto::{RangeSet, Reply};
use std::net::SocketAddr;
use std::time::Duration;

impl ServerSession {
    /// Queues what a third-party destination needs: MODE E, and PASV
    /// unless it listens already.
    pub(super) fn prepare_destination(&mut self, quic: bool) {
        self.set_data_protection(quic);
        self.prepare_e();
        if !matches!(self.channel, Channel::Destination { .. }) {
            self.queue_passive();
        }
    }

    /// Flushes a destination's set-up with `then`; returns where it listens.
    pub(super) async fn flush_destination(&mut self, then: &[Command]) -> Result<SocketAddr, ClientError> {
        // The destination's STOR is answered only once the source has
        // connected (Globus): no deadline for it.
        match self.flush_with(then, true).await? {
            Some(addr) => {
                self.channel = Channel::Destination { addr };
                Ok(addr)
            }
            None => match self.channel {
                Channel::Destination { addr } => Ok(addr),
                _ => Err(channel_changed()),
            },
        }
    }

    /// Tells this server the name its data channel's peer (the other
    /// server) must hold a certificate for (`DCAU S`); whether it agreed.
    async fn name_data_peer(&mut self, peer: &str) -> Result<bool, ClientError> {
        if self.data_peer.as_deref() == Some(peer) {
            return Ok(true);
        }
        self.settle().await?;
        if !self.queued.is_empty() {
            self.flush(&[]).await?;
        }
        let r = self.ctrl.command(&Command::Dcau(Dcau::Subject(peer.to_string()))).await?;
        if !r.code.is_positive_completion() {
            tracing::warn!(server = %self.url, reply = %r.text(), "the server cannot verify another server's certificate");
            return Ok(false);
        }
        // A new data-channel generation at the server.
        self.channel = Channel::None;
        self.data_peer = Some(peer.to_string());
        Ok(true)
    }

    /// Queues what a third-party source needs to send to `to`.
    pub(super) fn prepare_source(&mut self, to: SocketAddr, quic: bool) {
        self.set_data_protection(quic);
        self.prepare_e();
        self.set_parallelism();
        if !matches!(self.channel, Channel::Source { to: t } if t == to) {
            self.port(to);
            self.channel = Channel::Source { to };
        }
    }
}

/// Whether a third-party copy between `src` and `dst` runs over QUIC: both
/// sessions selected it (TPRT) on TLS control channels, and each server
/// agreed to verify the other's certificate for the name this client
/// verified on its control channel (`DCAU S`; the servers need
/// `--tls-peer-ca`). Otherwise the data moves over TCP in clear (`PROT C`),
/// as between any two FTPS servers (RFC 4217 §7), with a warning.
async fn quic_between(src: &mut ServerSession, dst: &mut ServerSession) -> Result<bool, ClientError> {
    let wants = |s: &ServerSession| s.transport == "quic" && s.ctrl.is_tls();
    if !wants(src) || !wants(dst) {
        return Ok(false);
    }
    let (src_name, dst_name) = (src.url.host.clone(), dst.url.host.clone());
    if src.name_data_peer(&dst_name).await? && dst.name_data_peer(&src_name).await? {
        return Ok(true);
    }
    tracing::warn!(
        source = %src.url,
        destination = %dst.url,
        "third-party over QUIC needs both servers to verify each other's certificate (ferry serve --tls-peer-ca); \
         the data moves over TCP in clear"
    );
    Ok(false)
}

/// A MODE E server-to-server copy: the destination listens (PASV), the
/// source connects to it (PORT); data never passes through the client.
/// Both servers are commanded before either's 150 is awaited, because a
/// Globus destination answers only once the source has connected.
pub async fn third_party_e(
    src: &mut ServerSession,
    dst: &mut ServerSession,
    src_path: &str,
    dst_path: &str,
    size: Option<u64>,
    done: &RangeSet,
    on_marker: &mut (dyn FnMut(Marker) + Send),
) -> Result<(), ClientError> {
    agree_on_transport(src, dst).await?;
    let stor = Command::Stor(dst_path.to_string());
    let retr = Command::Retr(src_path.to_string());
    // One write to each server: the destination's set-up and STOR first
    // (its PASV reply says where the source must connect), then the
    // source's set-up and RETR.
    let quic = quic_between(src, dst).await?;
    dst.prepare_destination(quic);
    if let Some(size) = size {
        dst.queue(Command::Allo(Allo { size, record: None }), Expect::Positive);
    }
    dst.rest(done);
    let addr = dst.flush_destination(std::slice::from_ref(&stor)).await?;
    src.prepare_source(addr, quic);
    src.rest(done);
    if let Err(e) = src.flush_with(std::slice::from_ref(&retr), true).await {
        // The destination waits for a source that will not come.
        dst.reset_after_batch();
        return Err(e);
    }
    let mut src_final: Option<Reply> = None;
    let mut dst_final: Option<Reply> = None;
    while src_final.is_none() || dst_final.is_none() {
        tokio::select! {
            ev = src.ctrl.next_event_untimed(), if src_final.is_none() => {
                if let Some(r) = final_reply(ev?, &mut |_| {}) {
                    if r.code.is_negative() && dst_final.is_none() {
                        // The destination waits for data that will not come.
                        dst.ctrl.send(&Command::Abor).await?;
                    }
                    src_final = Some(r);
                }
            }
            ev = dst.ctrl.next_event_untimed(), if dst_final.is_none() => {
                let Some(r) = final_reply(ev?, on_marker) else { continue };
                if r.code.is_negative() && src_final.is_none() {
                    src.ctrl.send(&Command::Abor).await?;
                }
                dst_final = Some(r);
            }
        }
    }
    let (s, d) = (src_final.expect("loop"), dst_final.expect("loop"));
    if !s.code.is_positive_completion() || !d.code.is_positive_completion() {
        src.channel = Channel::None;
        dst.channel = Channel::None;
        // An ABOR leaves one more reply (226 for the ABOR) on that side.
        drain_abort_reply(src, &s).await;
        drain_abort_reply(dst, &d).await;
        return Err(if !s.code.is_positive_completion() { refused(&retr, s) } else { refused(&stor, d) });
    }
    Ok(())
}

/// The data channel of a third-party copy runs between the two servers,
/// so both must use one transport. Their sessions choose each for itself
/// (`--transport auto` measures each client-to-server path and sees each
/// server's offer; a server may refuse `TPRT udt`); when the choices
/// differ, both go back to TCP, which every server has.
async fn agree_on_transport(src: &mut ServerSession, dst: &mut ServerSession) -> Result<(), ClientError> {
    src.forget_remembered_path_rate().await?;
    dst.forget_remembered_path_rate().await?;
    let (s, d) = (src.transport_name().to_string(), dst.transport_name().to_string());
    if s == d {
        return Ok(());
    }
    src.fall_back_to_tcp(&format!("third-party copy to {} whose data channels use {d}", dst.url)).await?;
    dst.fall_back_to_tcp(&format!("third-party copy from {} whose data channels use {s}", src.url)).await
}

async fn drain_abort_reply(session: &mut ServerSession, last: &Reply) {
    if last.code.get() == 426 {
        let _ = tokio::time::timeout(Duration::from_secs(5), session.ctrl.reply()).await;
    }
}

/// Third-party copies of many files with up to `window` STOR/RETR pairs in
/// flight on both servers (what globus-url-copy `-pp` does). Stops at the
/// first failure and returns how many completed. `on_perf` gets the bytes
/// moved so far in the whole batch.
pub async fn third_party_many(
    src: &mut ServerSession,
    dst: &mut ServerSession,
    items: &[(String, String, u64)],
    window: usize,
    on_perf: &mut (dyn FnMut(u64) + Send),
    on_restart: &mut (dyn FnMut(usize, RangeSet) + Send),
    on_done: &mut (dyn FnMut(usize) + Send),
) -> (usize, Result<(), ClientError>) {
    if items.is_empty() {
        return (0, Ok(()));
    }
    if let Err(e) = agree_on_transport(src, dst).await {
        return (0, Err(e));
    }
    let mut w = BatchWindow::new(items.len(), window);
    let result = async {
        // The set-ups and the first window go in one write to each server.
        let quic = quic_between(src, dst).await?;
        let first = &items[w.to_send()];
        dst.prepare_destination(quic);
        let stors: Vec<Command> = first
            .iter()
            .flat_map(|(_, dp, sz)| [Command::Allo(Allo { size: *sz, record: None }), Command::Stor(dp.clone())])
            .collect();
        let addr = dst.flush_destination(&stors).await?;
        src.prepare_source(addr, quic);
        let retrs: Vec<Command> = first.iter().map(|(sp, _, _)| Command::Retr(sp.clone())).collect();
        src.flush_with(&retrs, true).await?;
        let mut moved = 0u64;
        for (i, (src_path, dst_path, size)) in items.iter().enumerate() {
            for (sp, dp, sz) in &items[w.to_send()] {
                let allo = (Command::Allo(Allo { size: *sz, record: None }), Expect::Positive);
                dst.ctrl.send_expecting(&[allo, (Command::Stor(dp.clone()), Expect::Completion)], 1).await?;
                src.ctrl.send_expecting(&[(Command::Retr(sp.clone()), Expect::Completion)], 0).await?;
            }
            let allo = Command::Allo(Allo { size: *size, record: None });
            let r = dst.ctrl.reply().await?;
            if !r.code.is_positive_completion() {
                return Err(refused(&allo, r));
            }
            let (stor, retr) = (Command::Stor(dst_path.clone()), Command::Retr(src_path.clone()));
            let mut src_final: Option<Reply> = None;
            let mut dst_final: Option<Reply> = None;
            while src_final.is_none() || dst_final.is_none() {
                tokio::select! {
                    ev = src.ctrl.next_event_untimed(), if src_final.is_none() => {
                        if let Some(r) = final_reply(ev?, &mut |_| {}) {
                            if r.code.is_negative() {
                                return Err(refused(&retr, r));
                            }
                            src_final = Some(r);
                        }
                    }
                    ev = dst.ctrl.next_event_untimed(), if dst_final.is_none() => {
                        let mut on_marker = |m| match m {
                            Marker::Perf(bytes) => on_perf(moved + bytes.min(*size)),
                            Marker::Restart(ranges) => on_restart(i, ranges),
                        };
                        let Some(r) = final_reply(ev?, &mut on_marker) else { continue };
                        if r.code.is_negative() {
                            return Err(refused(&stor, r));
                        }
                        dst_final = Some(r);
                    }
                }
            }
            moved += size;
            on_perf(moved);
            w.completed();
            on_done(i);
        }
        Ok(())
    }
    .await;
    if result.is_err() {
        src.reset_after_batch();
        dst.reset_after_batch();
    }
    (w.done(), result)
}

/// The final reply an event brings (or an unsolicited one, which ends the
/// wait too); markers go to `on_marker`, a 1yz is passed over.
fn final_reply(ev: PipelineEvent, on_marker: &mut (dyn FnMut(Marker) + Send)) -> Option<Reply> {
    match ev {
        PipelineEvent::Final { reply, .. } | PipelineEvent::Unsolicited(reply) => Some(reply),
        PipelineEvent::Marker { marker, .. } => {
            if let Some(m) = marker {
                on_marker(m);
            }
            None
        }
        PipelineEvent::Preliminary { .. } => None,
    }
}
