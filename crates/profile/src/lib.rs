//! Ferry's built-in profiler (issue 6, after the FTPProfiler paper): where
//! is the bottleneck of a transfer, and what should change?
//!
//! The crate never sits on the data path. It reads the system (`/proc`),
//! the data sockets' kernel state (`TCP_INFO`) and optionally a `perf`
//! CPU profile, and turns what it read into a report. The same sampler runs
//! on both ends; the server's half travels to the client as JSON.
//!
//! # For the server (`SITE PROFILE`)
//!
//! Keep one [`StreamRegistry`] per session (or per server) and register
//! every data socket when it is opened — registration is cheap and nothing
//! is read unless a sampler is attached, so channels opened before the
//! profile started are covered too:
//!
//! ```no_run
//! # fn demo(sock: std::net::TcpStream) -> Result<(), ferry_profile::ProfileError> {
//! use ferry_profile::{Sampler, SamplerConfig, StreamRegistry, PerfConfig};
//! use std::time::Duration;
//!
//! let registry = StreamRegistry::new();
//! // In the data path: the returned value deregisters, then closes, on drop.
//! let sock = registry.track(sock, "data 1")?;
//!
//! // SITE PROFILE START (only for users with the profiling permission):
//! let config = SamplerConfig::every(Duration::from_millis(500))
//!     .with_process(std::process::id())
//!     .with_streams(registry.clone())
//!     .with_perf(PerfConfig::system_wide()); // optional
//! let sampler = Sampler::start(config)?;
//! // ... transfer ...
//! // SITE PROFILE STOP: reply with the JSON (or send it on a data channel).
//! let server_half = sampler.stop()?;
//! let json = server_half.to_json()?;
//! # drop(sock); let _ = json; Ok(()) }
//! ```
//!
//! `Sampler::start` and `stop` block (start waits up to a quarter of a
//! second to see that perf runs; stop runs `perf report`, which can take
//! seconds), so an async server calls them from `spawn_blocking`. The
//! server's half can be large (about 1 KiB per sample plus 0.5 KiB per
//! stream and sample), so it is better sent on a data connection or stored
//! for `RETR` than put in a single reply line.
//!
//! # For the client (`ferry profile`)
//!
//! Start a [`Sampler`] locally with the client's own registry, record
//! progress with a [`ProgressRecorder`], receive the server's half with
//! [`HostProfile::from_json`], and assemble a [`Profile`]:
//!
//! ```no_run
//! # fn demo(server_json: &str) -> Result<(), ferry_profile::ProfileError> {
//! use ferry_profile::*;
//! let registry = StreamRegistry::new();
//! let sampler = Sampler::start(SamplerConfig::default().with_streams(registry.clone()))?;
//! let progress = ProgressRecorder::new("download big.nc", Some(1 << 30));
//! // ... the copy calls progress.record(bytes_so_far) from its progress callback ...
//! let mut profile = Profile::new("ferry profile ftp://host/big.nc");
//! profile.meta.settings.parallel_streams = Some(4);
//! profile.meta.settings.reader = Some(Side::Server);
//! profile.client = Some(sampler.stop()?);
//! profile.server = Some(HostProfile::from_json(server_json)?);
//! profile.transfers.push(progress.snapshot());
//! // With --compare-memory, the four variants' rates:
//! profile.comparison = Some(ThroughputComparison { memory_to_memory: Some(9.5e8), disk_to_memory: Some(5.1e8), ..Default::default() });
//! let files = profile.write_report(std::path::Path::new("."))?; // report.json, report.html
//! print!("{}", profile.to_text());
//! # let _ = files; Ok(()) }
//! ```
//!
//! # For `ferry probe` and `ferry tune`
//!
//! [`rtt_estimate`] reads the kernel's RTT of a connected socket (the
//! control channel will do), [`ProbeReport`] combines it with a measured
//! rate into the bandwidth-delay product and buffer advice, and [`tune`]
//! runs the cautious one-knob-at-a-time sweep with a caller-supplied
//! measuring closure; [`exhaustive`] runs the full grid for comparison.
//!
//! The fields of `report.json` are documented in Ferry's `docs/profiler.md`;
//! a test keeps that list and the serialised keys identical.

mod bottleneck;
mod error;
mod facts;
mod perf;
mod probe;
mod process;
mod procfs;
mod report;
mod sampler;
mod streams;
mod sys;
mod tune;
mod units;
mod verdict;

pub use bottleneck::{bottleneck, hints, reconcile, Bottleneck, Hint, HintKind, Limit, ThroughputComparison, KEEPS_UP};
pub use error::{ProfileError, Result};
pub use facts::{all_stream_facts, side_facts, stream_facts, ProcessFacts, SideFacts, StreamFacts, Window};
pub use perf::{
    classify, parse_report, perf_available, record_for, summarize, DsoShare, GroupShare, ModuleGroup, PerfConfig,
    PerfRecording, PerfSummary, PerfTarget, SymbolShare,
};
pub use probe::{bdp_bytes, rtt_estimate, BufferLimits, ProbeReport, RttEstimate};
pub use process::{CgroupLimits, IoLimit};
pub use report::{
    text_table, Analysis, CoreSummary, HostSummary, InterfaceSummary, Profile, ProgressRecorder, ProgressSample,
    ReportDocument, ReportFiles, RunMeta, Side, Stat, StreamSummary, TableNote, TransferSeries, TransferSettings,
    TransferSummary, SCHEMA,
};
pub use sampler::{
    CoreShare, CpuShare, DiskRate, DiskTotal, HostInfo, HostProfile, LoadAvg, Memory, NetRate, ProcessInfo,
    ProcessSample, Sampler, SamplerConfig, SamplerOverhead, SystemReader, SystemSample, TcpRates,
};
pub use streams::{tcp_info, StreamHandle, StreamRegistry, StreamSample, StreamSeries, TcpInfo, Tracked};
pub use tune::{exhaustive, tune, Knob, Trial, TuneConfig, TuneError, TunePlan, TuneResult, TuneSpace};
pub use units::{format_bits, format_bytes, format_ms, format_rate, format_rate_both};
pub use verdict::{judge, Candidate, Context, LimitKind, Verdict};
