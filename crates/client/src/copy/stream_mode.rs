//! Files in stream mode (RFC 959 §3.4.1), for servers without GridFTP's
//! extended block mode: download, upload (resumed from a prefix the
//! server holds), and the stream-mode server-to-server copy.

use super::local::{FileMeta, LocalSink};
use super::{local_err, Client};
use crate::control::{refused, ControlChannel};
use crate::error::ClientError;
use crate::location::RemoteUrl;
use crate::resume::ResumeState;
use ferry_io::stream::{self, AbortSignal, CopyError};
use ferry_proto::command::Command;
use ferry_proto::RangeSet;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Client {
    pub(super) async fn download_s(
        &mut self,
        src: &RemoteUrl,
        dst: &Path,
        size: u64,
        meta: FileMeta,
    ) -> Result<u64, ClientError> {
        let progress = self.stats.bytes.clone();
        let rate = self.rate.clone();
        let path = self.opts.data_path;
        let sink = LocalSink::open(dst, false, meta)?;
        let s = self.session(src).await?;
        let cmd = Command::Retr(src.path.clone());
        let addr = s.stream_transfer(&cmd, None).await?;
        let mut data = s.connect_data(addr).await?;
        let c = &mut s.ctrl;
        let r = c.reply().await?;
        if !r.code.is_preliminary() {
            return Err(refused(&cmd, r));
        }
        let target = sink.block_sink()?;
        let file = sink.file.try_clone().map_err(local_err(dst))?;
        let regular = sink.partial.is_some();
        let abort = Arc::new(AbortSignal::new());
        abort.register(&*data).map_err(|e| ClientError::Data(e.to_string()))?;
        let a = abort.clone();
        let copy = tokio::task::spawn_blocking(move || {
            let to = stream::ReceiveTo::default();
            let (n, end) = stream::receive(&mut data, &*target, to, &progress, &a, rate.as_deref(), path)?;
            if regular {
                file.set_len(end).map_err(CopyError::Disk)?;
            }
            Ok(n)
        });
        let got = finish_transfer(c, &cmd, copy, &abort).await?;
        if got != size {
            return Err(ClientError::Incomplete { path: src.to_string(), expected: size, got });
        }
        sink.commit()?;
        Ok(got)
    }

    pub(super) async fn upload_s(
        &mut self,
        src: &Path,
        dst: &RemoteUrl,
        size: u64,
        resume: &mut ResumeState,
    ) -> Result<u64, ClientError> {
        let progress = self.stats.bytes.clone();
        let rate = self.rate.clone();
        let path = self.opts.data_path;
        let file = File::open(src).map_err(local_err(src))?;
        let md = file.metadata().map_err(local_err(src))?;
        // Stream mode resumes from a prefix the server holds and the
        // client has checked against its own bytes.
        let mut from = 0;
        if self.opts.resume && resume.interrupted() && md.is_file() {
            if let Some(held) = self.verified_partial(src, dst, size).await? {
                from = held.ranges().first().filter(|r| r.start == 0).map_or(0, |r| r.end);
                resume.replace(RangeSet::from_range(0..from));
            }
        }
        let s = self.session(dst).await?;
        let cmd = Command::Stor(dst.path.clone());
        // ALLO (RFC 959 §4.1.3) tells the server the size: Ferry servers
        // preallocate and refuse to commit a short upload. A pipe or device
        // has no size to announce.
        let allo = md.is_file().then_some(md.len());
        let addr = if from > 0 {
            tracing::info!(source = %src.display(), from, "resuming a stream-mode upload");
            s.stream_transfer_from(&cmd, allo, from).await?
        } else {
            s.stream_transfer(&cmd, allo).await?
        };
        let mut data = s.connect_data(addr).await?;
        let c = &mut s.ctrl;
        let r = c.reply().await?;
        if !r.code.is_preliminary() {
            return Err(refused(&cmd, r));
        }
        let abort = Arc::new(AbortSignal::new());
        abort.register(&*data).map_err(|e| ClientError::Data(e.to_string()))?;
        let a = abort.clone();
        let copy = tokio::task::spawn_blocking(move || {
            let n = stream::send(&file, from, None, &mut data, &progress, &a, rate.as_deref(), path)?;
            stream::finish_send(&mut data)?;
            Ok(n)
        });
        finish_transfer(c, &cmd, copy, &abort).await
    }

    /// A stream-mode server-to-server copy (RFC 959 §5.2): the destination
    /// listens, the source connects to it.
    pub(super) async fn third_party_s(&mut self, src: &RemoteUrl, dst: &RemoteUrl) -> Result<u64, ClientError> {
        let d = self.session(dst).await?;
        let stor = Command::Stor(dst.path.clone());
        // Clear data between the servers (PROT C on TLS sessions): both
        // would be the TLS server on it (RFC 4217 §7).
        let addr = d.stream_destination(&stor).await?;
        let s = self.session(src).await?;
        let retr = Command::Retr(src.path.clone());
        let src_result = if let Err(e) = s.stream_source(addr, &retr).await {
            Err(e)
        } else {
            async {
                loop {
                    let r = s.ctrl.reply_untimed().await?;
                    if r.code.is_preliminary() {
                        continue;
                    }
                    return if r.code.is_positive_completion() { Ok(()) } else { Err(refused(&retr, r)) };
                }
            }
            .await
        };
        let d = self.session(dst).await?;
        if let Err(e) = src_result {
            // The destination is waiting for a connection that will not come.
            let _ = d.ctrl.send(&Command::Abor).await;
            while let Ok(r) = d.ctrl.reply().await {
                if ferry_proto::client::expect::ends_abort(&r) {
                    break;
                }
            }
            return Err(e);
        }
        loop {
            let r = d.ctrl.reply_untimed().await?;
            if r.code.is_preliminary() {
                continue;
            }
            if !r.code.is_positive_completion() {
                return Err(refused(&stor, r));
            }
            break;
        }
        let size = d.ctrl.size(&dst.path).await?.unwrap_or(0);
        self.stats.bytes.fetch_add(size, Ordering::Relaxed);
        Ok(size)
    }
}

/// Waits for the end of a stream-mode transfer on both channels: the copy
/// thread and the final reply. If the server reports failure first, the
/// copy is stopped rather than left to time out.
pub(super) async fn finish_transfer(
    c: &mut ControlChannel,
    cmd: &Command,
    mut copy: tokio::task::JoinHandle<Result<u64, CopyError>>,
    abort: &AbortSignal,
) -> Result<u64, ClientError> {
    let map_copy = |r: Result<Result<u64, CopyError>, tokio::task::JoinError>| -> Result<u64, ClientError> {
        match r {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(CopyError::Disk(e))) => Err(ClientError::Local { path: "local file".into(), error: e }),
            Ok(Err(e)) => Err(ClientError::Data(e.to_string())),
            Err(e) => Err(ClientError::Data(e.to_string())),
        }
    };
    let (reply, copied) = tokio::select! {
        r = c.reply_untimed() => {
            let r = r?;
            if r.code.is_negative() {
                abort.abort();
            }
            (r, map_copy(copy.await))
        }
        done = &mut copy => {
            let copied = map_copy(done);
            (c.reply().await?, copied)
        }
    };
    if !reply.code.is_positive_completion() {
        // A local disk error (disk full) is the cause; the server's 426
        // for the connection we dropped because of it is only the effect.
        if let Err(e @ ClientError::Local { .. }) = copied {
            return Err(e);
        }
        return Err(refused(cmd, reply));
    }
    copied
}
