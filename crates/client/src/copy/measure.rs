//! Bounded measuring transfers for `ferry probe` and `ferry tune`.
//!
//! A measurement is an ordinary MODE E transfer with the client's options
//! (streams, TCP buffer, block size, staging), the same code path as
//! `ferry cp`, with two bounds so it can be pointed at anything: at most
//! `max_bytes` (a download of a larger file becomes a partial retrieve,
//! `ERET P 0 n`, which Ferry and Globus servers both offer; the server's
//! 64 GiB `/dev/zero` is the usual target) and at most `time_limit` (the
//! data connections are then shut down and the session is dropped; what
//! arrived counts). Downloaded data is discarded in the kernel
//! (`/dev/null` semantics); uploads send whatever source the caller gives
//! (generated zeros or a local file).

use super::{Client, ClientError, Location};
use crate::location::RemoteUrl;
use ferry_io::mode_e::{BlockSource, ReceiveState};
use ferry_proto::facts::FileKind;
use ferry_proto::RangeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a measuring transfer moved, and how fast.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Measurement {
    /// Payload bytes moved.
    pub bytes: u64,
    /// From sending the transfer command to its end (or to the time
    /// limit): data-channel set-up, TCP start-up and the data.
    pub seconds: f64,
    /// The same plus connecting and logging in: what `ferry cp` reports.
    pub total_seconds: f64,
    /// Rate over the second half of the transfer (bytes/s), when it lasted
    /// long enough to tell: closer to the path's steady rate than the
    /// average, which includes TCP's start.
    pub steady_rate: Option<f64>,
    /// The time limit ended the transfer before all bytes moved.
    pub cut_short: bool,
    /// Data connections used.
    pub streams: u32,
    /// The control connection's smoothed RTT after login, milliseconds.
    pub rtt_ms: f64,
    /// `true` for a partial retrieve (ERET), `false` for the whole file.
    pub partial: bool,
}

impl Measurement {
    /// Average rate of the data phase, bytes per second.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Progress samples taken while a transfer runs, for the steady rate.
#[derive(Default)]
struct Progress(Vec<(f64, u64)>);

impl Progress {
    fn record(&mut self, t: f64, bytes: u64) {
        self.0.push((t, bytes));
    }

    /// Rate between the sample nearest half the duration and the end.
    fn steady_rate(&self, end_t: f64, end_bytes: u64) -> Option<f64> {
        if end_t < 0.5 {
            return None;
        }
        let &(t0, b0) = self.0.iter().min_by(|a, b| (a.0 - end_t / 2.0).abs().total_cmp(&(b.0 - end_t / 2.0).abs()))?;
        (end_t - t0 > 0.2).then(|| end_bytes.saturating_sub(b0) as f64 / (end_t - t0))
    }
}

impl Client {
    /// Downloads at most `max_bytes` of `src` (a file, or a Ferry server's
    /// `/dev/zero`) in MODE E, discarding the data, for at most
    /// `time_limit`. Needs a GridFTP server (MODE E and ERET).
    pub async fn measure_download(
        &mut self,
        src: &RemoteUrl,
        max_bytes: u64,
        time_limit: Duration,
    ) -> Result<Measurement, ClientError> {
        let started = Instant::now();
        let facts = self
            .facts(&Location::Remote(src.clone()))
            .await?
            .ok_or_else(|| ClientError::Usage(format!("{src}: no such file on the server")))?;
        if facts.kind != FileKind::File {
            return Err(ClientError::Usage(format!("{src} is not a regular file; name a file to download")));
        }
        self.require_mode_e(src).await?;
        let len = facts.size.min(max_bytes);
        if len == 0 {
            return Err(ClientError::Usage(format!("{src} is empty: there is nothing to measure with")));
        }
        let partial = len < facts.size;
        let sink: Arc<dyn ferry_io::mode_e::BlockSink> = Arc::new(ferry_io::endpoint::NullSink);
        let state = Arc::new(ReceiveState::default());
        let ctl = self.control();
        let before = ctl.progress.load(Ordering::Relaxed);
        let path = src.path.clone();
        let session = self.session(src).await?;
        let (streams, rtt_ms) = (session.parallelism(), session.rtt.as_secs_f64() * 1e3);
        let nothing_yet = RangeSet::default();
        let result = {
            let transfer: std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ClientError>> + Send + '_>> =
                if partial {
                    Box::pin(session.retrieve_part_e(&path, 0, len, sink, state.clone(), &ctl))
                } else {
                    Box::pin(session.retrieve_e(&path, sink, Some(len), &nothing_yet, state.clone(), &ctl))
                };
            run_bounded(transfer, &ctl, before, time_limit).await
        };
        self.finish_measurement(src, result, &ctl, before, started, streams, rtt_ms, partial, || {
            let got = state.received.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let missing: u64 = got.missing(len).iter().map(|r| r.end - r.start).sum();
            (missing > 0).then(|| ClientError::Incomplete { path: src.to_string(), expected: len, got: len - missing })
        })
    }

    /// Uploads `size` bytes of `source` to `dst` in MODE E for at most
    /// `time_limit` (a new file, or a Ferry server's `/dev/null`).
    pub async fn measure_upload(
        &mut self,
        source: Arc<dyn BlockSource>,
        size: u64,
        dst: &RemoteUrl,
        time_limit: Duration,
    ) -> Result<Measurement, ClientError> {
        let started = Instant::now();
        if size == 0 {
            return Err(ClientError::Usage("nothing to upload: the source is empty".into()));
        }
        self.require_mode_e(dst).await?;
        let ctl = self.control();
        let before = ctl.progress.load(Ordering::Relaxed);
        let path = dst.path.clone();
        let session = self.session(dst).await?;
        let (streams, rtt_ms) = (session.parallelism(), session.rtt.as_secs_f64() * 1e3);
        let nothing_yet = RangeSet::default();
        let mut ignore_markers = |_: crate::session::Marker| {};
        let result = {
            let transfer = session.store_e(&path, source, size, &nothing_yet, &ctl, &mut ignore_markers);
            run_bounded(transfer, &ctl, before, time_limit).await
        };
        self.finish_measurement(dst, result, &ctl, before, started, streams, rtt_ms, false, || None)
    }

    async fn require_mode_e(&mut self, url: &RemoteUrl) -> Result<(), ClientError> {
        if self.session(url).await?.supports_mode_e() {
            Ok(())
        } else {
            Err(ClientError::Usage(format!(
                "{url}: measuring needs a GridFTP server (extended block mode, as Ferry and Globus offer); this one \
                 offers plain FTP only"
            )))
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_measurement(
        &mut self,
        url: &RemoteUrl,
        result: Bounded,
        ctl: &ferry_io::mode_e::TransferControl,
        before: u64,
        started: Instant,
        streams: u32,
        rtt_ms: f64,
        partial: bool,
        incomplete: impl FnOnce() -> Option<ClientError>,
    ) -> Result<Measurement, ClientError> {
        let (cut_short, progress, seconds) = match result {
            Bounded::Done(Err(e), _, _) => {
                self.forget(url);
                return Err(e);
            }
            Bounded::Done(Ok(()), p, s) => {
                if let Some(e) = incomplete() {
                    self.forget(url);
                    return Err(e);
                }
                (false, p, s)
            }
            Bounded::TimedOut(p, s) => {
                // The data connections were shut down mid-transfer: the
                // session is in no state to be used again.
                self.forget(url);
                (true, p, s)
            }
        };
        let bytes = ctl.progress.load(Ordering::Relaxed) - before;
        Ok(Measurement {
            bytes,
            seconds,
            total_seconds: started.elapsed().as_secs_f64(),
            steady_rate: progress.steady_rate(seconds, bytes),
            cut_short,
            streams,
            rtt_ms,
            partial,
        })
    }
}

enum Bounded {
    Done(Result<(), ClientError>, Progress, f64),
    TimedOut(Progress, f64),
}

/// Runs a transfer, sampling its progress, until it ends or `limit`
/// passes; then its data connections are shut down.
async fn run_bounded(
    transfer: impl std::future::Future<Output = Result<(), ClientError>>,
    ctl: &ferry_io::mode_e::TransferControl,
    before: u64,
    limit: Duration,
) -> Bounded {
    let t1 = Instant::now();
    tokio::pin!(transfer);
    let mut progress = Progress::default();
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            r = &mut transfer => return Bounded::Done(r, progress, t1.elapsed().as_secs_f64()),
            _ = tick.tick() => {
                progress.record(t1.elapsed().as_secs_f64(), ctl.progress.load(Ordering::Relaxed) - before);
            }
            _ = &mut deadline => {
                let s = t1.elapsed().as_secs_f64();
                ctl.abort.abort();
                return Bounded::TimedOut(progress, s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_rate_uses_the_second_half() {
        let mut p = Progress::default();
        // Slow for the first second, then 100 bytes/s.
        for i in 0..=20 {
            let t = i as f64 * 0.1;
            let b = if t <= 1.0 { (t * 10.0) as u64 } else { 10 + ((t - 1.0) * 100.0).round() as u64 };
            p.record(t, b);
        }
        let r = p.steady_rate(2.0, 110).unwrap();
        assert!((r - 100.0).abs() < 1.0, "{r}");
        assert_eq!(Progress::default().steady_rate(0.3, 10), None);
    }
}
