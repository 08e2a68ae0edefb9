//! `SITE PROFILE`: the server's half of `ferry profile`.
//!
//! A user with the profiling permission starts a sampler of this host (CPU
//! per core, disks, interfaces, TCP counters, the server process) and of
//! the session's data connections (their `TCP_INFO`), optionally with a
//! perf CPU profile, runs transfers, and stops it; the stop reply carries
//! the samples as JSON. The figures are host-wide, so the permission is an
//! administrator's, granted with `ferry passwd --profile`.
//!
//! The JSON goes on the control connection, cut into lines of at most
//! [`LINE`] characters, each after one space (RFC 959 text lines), between
//! a `250-` first line giving its length and a `250 ` last line: no data
//! connection is needed, and the size is bounded by the sample cap.

use ferry_profile::{HostProfile, PerfConfig, Sampler, SamplerConfig, StreamRegistry};
use ferry_proto::command::ProfileRequest;
use ferry_proto::{Reply, ReplyCode};
use std::time::Duration;

/// Characters of JSON per reply line.
pub const LINE: usize = 1000;

/// Samples kept at most: an hour at the default interval, about 4 MB of
/// JSON, for a client that never stops its profile.
const MAX_SAMPLES: usize = 7_200;

/// Something sampling the host until it is stopped: the real [`Sampler`]
/// in the server. Unit tests pass their own (see [`Profiler::with_sampler`]),
/// so none of them runs a clock; the real one is exercised end to end by
/// `crates/cli/tests/profile.rs` (DESIGN.md, "How we measure").
pub(crate) trait HostSampler: Send {
    /// Stops sampling; the profile taken. May take seconds (perf report).
    fn stop(self: Box<Self>) -> ferry_profile::Result<HostProfile>;
}

impl HostSampler for Sampler {
    fn stop(self: Box<Self>) -> ferry_profile::Result<HostProfile> {
        Sampler::stop(*self)
    }
}

/// Starts a [`HostSampler`]; may block (perf is seen running first).
pub(crate) type StartSampler = fn(SamplerConfig) -> ferry_profile::Result<Box<dyn HostSampler>>;

fn start_real_sampler(config: SamplerConfig) -> ferry_profile::Result<Box<dyn HostSampler>> {
    Ok(Box::new(Sampler::start(config)?))
}

/// A session's profiler: idle, or sampling.
pub(crate) struct Profiler {
    running: Option<Running>,
    start_sampler: StartSampler,
}

impl Default for Profiler {
    fn default() -> Self {
        Self::with_sampler(start_real_sampler)
    }
}

struct Running {
    sampler: Box<dyn HostSampler>,
    registry: StreamRegistry,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler").field("running", &self.running.is_some()).finish()
    }
}

impl Profiler {
    /// A profiler whose samplers `start` makes.
    pub(crate) fn with_sampler(start: StartSampler) -> Self {
        Self { running: None, start_sampler: start }
    }

    /// Where data connections register while the profiler runs.
    pub fn registry(&self) -> Option<StreamRegistry> {
        self.running.as_ref().map(|r| r.registry.clone())
    }

    /// Answers `SITE PROFILE` for a user who `may` profile.
    pub async fn handle(&mut self, req: ProfileRequest, may: bool) -> Reply {
        if !may {
            return Reply::new(
                ReplyCode::FILE_UNAVAILABLE,
                "Permission denied: profiling needs the profile permission (ferry passwd --profile).",
            );
        }
        match req {
            ProfileRequest::Start { .. } if self.running.is_some() => {
                Reply::new(ReplyCode::BAD_SEQUENCE, "A profile is already running; SITE PROFILE STOP first.")
            }
            ProfileRequest::Start { interval_ms, perf } => self.start(interval_ms, perf).await,
            ProfileRequest::Stop => match self.running.take() {
                None => Reply::new(ReplyCode::BAD_SEQUENCE, "No profile is running; SITE PROFILE START first."),
                Some(r) => Self::stop(r).await,
            },
        }
    }

    async fn start(&mut self, interval_ms: u64, perf: bool) -> Reply {
        let registry = StreamRegistry::new();
        let mut config = SamplerConfig::every(Duration::from_millis(interval_ms))
            .with_process(std::process::id())
            .with_streams(registry.clone());
        config.max_samples = MAX_SAMPLES;
        if perf {
            // Whole-system: the kernel's share (TCP stack, driver, file
            // system) is what the profile is for.
            config = config.with_perf(PerfConfig::system_wide());
        }
        // Starting perf waits to see it run: not on the control loop.
        let start = self.start_sampler;
        match tokio::task::spawn_blocking(move || start(config)).await {
            Ok(Ok(sampler)) => {
                self.running = Some(Running { sampler, registry });
                Reply::new(
                    ReplyCode::OK,
                    format!("Profiling every {interval_ms} ms{}.", if perf { " with perf" } else { "" }),
                )
            }
            Ok(Err(e)) => Reply::new(ReplyCode::FILE_UNAVAILABLE, format!("Cannot start the profiler: {e}.")),
            Err(e) => Reply::new(ReplyCode::LOCAL_ERROR, format!("The profiler failed to start: {e}.")),
        }
    }

    async fn stop(r: Running) -> Reply {
        // Stopping runs `perf report` when perf was on: seconds.
        let profile = tokio::task::spawn_blocking(move || r.sampler.stop().and_then(|p| p.to_json())).await;
        match profile {
            Ok(Ok(json)) => json_reply(&json),
            Ok(Err(e)) => Reply::new(ReplyCode::LOCAL_ERROR, format!("The profiler failed: {e}.")),
            Err(e) => Reply::new(ReplyCode::LOCAL_ERROR, format!("The profiler failed: {e}.")),
        }
    }
}

/// The stop reply: the JSON in lines of at most [`LINE`] characters.
fn json_reply(json: &str) -> Reply {
    let mut lines = Vec::with_capacity(json.len() / LINE + 1);
    let mut rest = json;
    while !rest.is_empty() {
        let mut cut = rest.len().min(LINE);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (line, tail) = rest.split_at(cut);
        lines.push(format!(" {line}"));
        rest = tail;
    }
    Reply::multiline(
        ReplyCode::FILE_ACTION_OK,
        format!("Profile follows: {} bytes of JSON.", json.len()),
        lines,
        "End of profile.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the client does with a stop reply.
    fn body(reply: &Reply) -> String {
        reply.lines[1..reply.lines.len() - 1].iter().map(|l| l.strip_prefix(' ').unwrap_or(l)).collect()
    }

    #[test]
    fn json_survives_the_reply_framing() {
        // Multi-byte characters straddling a cut, and text that looks like
        // the reply's own last line.
        let json = format!("{{\"x\":\"{}250 End\\u0000é\"}}", "é".repeat(1500));
        let reply = json_reply(&json);
        let wire = reply.to_string();
        let mut parser = ferry_proto::ReplyParser::default();
        parser.push(wire.as_bytes());
        let back = parser.next_reply().unwrap().unwrap();
        assert!(back.lines.iter().skip(1).take(back.lines.len() - 2).all(|l| l.len() <= LINE + 1));
        assert_eq!(body(&back), json);
    }

    /// Hands back a fixed profile: no thread, no clock.
    struct FakeSampler(HostProfile);

    impl HostSampler for FakeSampler {
        fn stop(self: Box<Self>) -> ferry_profile::Result<HostProfile> {
            Ok(self.0)
        }
    }

    fn fake(config: SamplerConfig) -> ferry_profile::Result<Box<dyn HostSampler>> {
        assert!(config.streams.is_some(), "the data connections are sampled too");
        let interval_ms = config.interval.as_millis() as u64;
        Ok(Box::new(FakeSampler(HostProfile { interval_ms, duration_s: 1.5, ..HostProfile::default() })))
    }

    #[tokio::test]
    async fn only_permitted_users_profile_and_stop_returns_the_samples() {
        let mut p = Profiler::with_sampler(fake);
        let denied = p.handle(ProfileRequest::Start { interval_ms: 100, perf: false }, false).await;
        assert_eq!(denied.code, ReplyCode::FILE_UNAVAILABLE);
        assert_eq!(p.handle(ProfileRequest::Stop, true).await.code, ReplyCode::BAD_SEQUENCE);
        let started = p.handle(ProfileRequest::Start { interval_ms: 100, perf: false }, true).await;
        assert_eq!(started.code, ReplyCode::OK, "{started:?}");
        assert!(p.registry().is_some());
        let again = p.handle(ProfileRequest::Start { interval_ms: 100, perf: false }, true).await;
        assert_eq!(again.code, ReplyCode::BAD_SEQUENCE);
        // The sampler is injected: what the stop reply carries is exactly
        // what it took, with no clock involved.
        let stopped = p.handle(ProfileRequest::Stop, true).await;
        assert_eq!(stopped.code, ReplyCode::FILE_ACTION_OK, "{:?}", stopped.lines.first());
        let profile = HostProfile::from_json(&body(&stopped)).expect("a profile");
        assert_eq!((profile.interval_ms, profile.duration_s), (100, 1.5));
        assert!(p.registry().is_none());
    }
}
