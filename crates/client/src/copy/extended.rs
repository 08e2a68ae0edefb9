//! Files in GridFTP extended block mode (GFD.20): downloads and uploads
//! that record what arrived so an interrupted copy sends only what is
//! missing, an upload resumed from what the server holds (`SITE
//! PARTIAL`, checked against the source), and server-to-server copies.

use super::local::{FileMeta, LocalSink};
use super::{forget_refuted_record, local_err, Client};
use crate::error::ClientError;
use crate::location::RemoteUrl;
use crate::resume::ResumeState;
use crate::session::{third_party_e, Marker};
use ferry_io::mode_e::ReceiveState;
use ferry_proto::RangeSet;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

impl Client {
    pub(super) async fn download_e(
        &mut self,
        src: &RemoteUrl,
        dst: &Path,
        size: u64,
        resume: &mut ResumeState,
        meta: FileMeta,
    ) -> Result<u64, ClientError> {
        let sink = LocalSink::open(dst, !resume.is_empty(), meta)?;
        sink.preallocate(Some(size))?;
        if sink.partial.is_some() && !resume.is_empty() && sink.existing_len == 0 {
            // The partial file is gone: the record describes nothing.
            resume.clear();
        }
        let done = resume.done().clone();
        let file = match sink.file_for_blocks()? {
            Some(f) => {
                let ep = self.endpoint(f);
                let plan = ferry_io::disk::DiskPlan::for_write(&sink.file, Some(size), ep.is_direct());
                self.stats.disk_plan(&plan);
                plan.wrap_sink(&sink.file, ep).map_err(|e| ClientError::local(dst.display(), e))?
            }
            None => sink.block_sink()?,
        };
        let state = Arc::new(ReceiveState::default());
        let ctl = self.control();
        let path = src.path.clone();
        let session = self.session(src).await?;
        let transfer = session.retrieve_e(&path, file, Some(size), &done, state.clone(), &ctl);
        tokio::pin!(transfer);
        // Record what arrives as it arrives, so a kill loses at most a quarter
        // second of it.
        let result = loop {
            tokio::select! {
                r = &mut transfer => break r,
                _ = tokio::time::sleep(Duration::from_millis(250)) => {
                    resume.add(&state.received.lock().unwrap_or_else(|e| e.into_inner()));
                }
            }
        };
        let got = state.received.lock().unwrap_or_else(|e| e.into_inner()).clone();
        resume.add(&got);
        result?;
        let missing = resume.done().missing(size);
        if !missing.is_empty() {
            let absent: u64 = missing.iter().map(|r| r.end - r.start).sum();
            return Err(ClientError::Incomplete { path: src.to_string(), expected: size, got: size - absent });
        }
        sink.finish(size)?;
        Ok(got.covered())
    }

    pub(super) async fn upload_e(
        &mut self,
        src: &Path,
        dst: &RemoteUrl,
        size: u64,
        resume: &mut ResumeState,
    ) -> Result<u64, ClientError> {
        let opened = File::open(src).map_err(local_err(src))?;
        let file = self.endpoint(opened.try_clone().map_err(local_err(src))?);
        let plan = ferry_io::disk::DiskPlan::for_read(&opened, file.is_direct());
        plan.apply_read(&opened);
        self.stats.disk_plan(&plan);
        if self.opts.resume && resume.interrupted() {
            if let Some(held) = self.verified_partial(src, dst, size).await? {
                resume.replace(held);
            }
        }
        let done = resume.done().clone();
        let ctl = self.control();
        let path = dst.path.clone();
        let before = ctl.progress.load(Ordering::Relaxed);
        let session = self.session(dst).await?;
        let mut on_marker = |m: Marker| {
            if let Marker::Restart(r) = m {
                resume.add(&r);
            }
        };
        let result = session.store_e(&path, file, size, &done, &ctl, &mut on_marker).await;
        forget_refuted_record(&result, resume);
        result?;
        Ok(ctl.progress.load(Ordering::Relaxed) - before)
    }

    /// What a Ferry server holds of this upload's earlier, interrupted run
    /// (`SITE PARTIAL`), once the client has checked those bytes against
    /// its source (XXH128): `Some(ranges)` to resume from — empty when
    /// the server holds nothing usable — or `None` when the server cannot
    /// say (then the restart markers recorded locally are all there is).
    pub(super) async fn verified_partial(
        &mut self,
        src: &Path,
        dst: &RemoteUrl,
        size: u64,
    ) -> Result<Option<RangeSet>, ClientError> {
        let path = dst.path.clone();
        let Some(held) = self.session(dst).await?.partial(&path).await? else { return Ok(None) };
        let fits = held.size.is_none_or(|s| s == size) && held.ranges.ranges().last().is_none_or(|r| r.end <= size);
        if !fits || held.ranges.is_empty() {
            return Ok(Some(RangeSet::new()));
        }
        let (src_path, ranges) = (src.to_path_buf(), held.ranges.clone());
        let local = tokio::task::spawn_blocking(move || {
            let f = File::open(&src_path)?;
            ferry_io::checksum::ranges_checksum(&f, "XXH128", ranges.ranges(), &|| false)
        })
        .await
        .map_err(|e| ClientError::Data(e.to_string()))?
        .map_err(local_err(src))?;
        if local != held.xxh128 {
            tracing::warn!(destination = %dst, "the server's partial upload holds other bytes than this source; starting over");
            return Ok(Some(RangeSet::new()));
        }
        tracing::info!(destination = %dst, held = %held.ranges, "the server holds part of this upload; sending the rest");
        Ok(Some(held.ranges))
    }

    pub(super) async fn third_party_e(
        &mut self,
        src: &RemoteUrl,
        dst: &RemoteUrl,
        size: u64,
        resume: &mut ResumeState,
    ) -> Result<u64, ClientError> {
        // Both sessions are needed at once: take them out of the pool.
        let (mut s, mut d) = self.take_pair(src, dst).await?;
        let done = resume.done().clone();
        let progress = self.stats.bytes.clone();
        let base = progress.load(Ordering::Relaxed);
        let mut moved = 0;
        let mut on_marker = |m: Marker| match m {
            Marker::Restart(r) => resume.add(&r),
            // Third-party data never passes here: 112 markers are the
            // only measure of progress.
            Marker::Perf(bytes) => {
                moved = bytes;
                progress.store(base + bytes, Ordering::Relaxed);
            }
        };
        let result = third_party_e(&mut s, &mut d, &src.path, &dst.path, Some(size), &done, &mut on_marker).await;
        forget_refuted_record(&result, resume);
        self.put_pair(src, dst, s, d);
        result?;
        let sent = size - done.covered().min(size);
        self.stats.bytes.store(base + sent, Ordering::Relaxed);
        Ok(sent.max(moved))
    }
}
