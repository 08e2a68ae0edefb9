//! `ferry probe HOST|URL`: the path to a server in numbers — round-trip
//! time, achievable rate, their product (the bandwidth-delay product) and
//! what it means for `--tcp-bs` and `-p` on this machine.
//!
//! The RTT is the kernel's own estimate for the control connection
//! (`TCP_INFO`: smoothed and minimum RTT, measured per segment, excluding
//! the server's processing time), read after a few NOOP round trips, which
//! are also timed and shown. The rate comes from a short, bounded
//! download (`--bytes`, `--seconds`) that discards what it receives:
//! of the file the URL names, or else — on a Ferry server started with
//! `--memory-paths` — of its virtual `/dev/zero`, so no disk at either end
//! takes part. The output says which. See `docs/tune.md`.

use anyhow::{bail, Context};
use clap::Args;
use ferry_client::{Client, CopyOptions, Location, Measurement, ModeChoice, RemoteUrl};
use ferry_profile::{format_bits, format_bytes, format_ms, BufferLimits, ProbeReport, RttEstimate};
use ferry_proto::command::Command;
use ferry_proto::facts::FileKind;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// A server (`host`, `host:port`; GridFTP's port 2811 when none is
    /// given) or an ftp:// URL; a URL that names a file measures the rate
    /// by downloading (the start of) that file.
    pub target: String,
    /// Download at most this many bytes to measure the rate.
    #[arg(long, default_value = "256M", value_parser = crate::copy::parse_size)]
    pub bytes: u64,
    /// Stop the rate measurement after this many seconds (what arrived counts).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Parallel streams for the rate measurement (several, so that one
    /// stream's window does not hide the path's rate).
    #[arg(short = 'p', long = "parallel", default_value_t = 4)]
    pub parallel: u32,
    /// Timed NOOP round trips on the control connection.
    #[arg(long, default_value_t = 5)]
    pub samples: u32,
    /// Measure the round-trip time only, no rate.
    #[arg(long)]
    pub rtt_only: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// The data-channel transport of the measuring download: tcp (the
    /// default) or udt. A TCP download from a host with small socket
    /// buffers understates a long path; a UDT one is paced by its own
    /// controller (one connection; -p applies to TCP). The rate is
    /// remembered for `ferry cp` either way (the path cache).
    #[arg(long, value_name = "NAME", default_value = "tcp")]
    pub transport: String,
    /// Do not record the measured rate in the path cache (which `ferry cp`
    /// starts UDT senders at; FERRY_PATH_CACHE=off turns it off too).
    #[arg(long)]
    pub no_path_cache: bool,
    /// Seconds to wait for a server reply.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

/// A server given as `host`, `host:port` or a URL.
pub fn target_url(target: &str) -> anyhow::Result<RemoteUrl> {
    let text = if target.contains("://") {
        target.to_string()
    } else if target.parse::<std::net::SocketAddr>().is_ok()
        || target.rsplit_once(':').is_some_and(|(h, p)| !h.contains(':') && p.parse::<u16>().is_ok())
    {
        format!("ftp://{target}/")
    } else if target.contains(':') {
        format!("ftp://[{target}]:2811/")
    } else {
        format!("ftp://{target}:2811/")
    };
    match Location::parse(&text)? {
        Location::Remote(u) => Ok(u),
        Location::Local(_) => bail!("{target} is not a server or an ftp:// URL"),
    }
}

/// Where the rate was measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateSource {
    /// The server's virtual `/dev/zero` (memory to memory).
    MemoryZero,
    /// A file the URL named (the server's disk or cache is part of it).
    File,
}

/// The round trips measured on the control connection.
#[derive(Debug, Clone)]
pub struct RttSamples {
    /// Timed NOOP exchanges, milliseconds.
    pub noop_ms: Vec<f64>,
    pub kernel: RttEstimate,
}

impl RttSamples {
    fn median_ms(&self) -> Option<f64> {
        let mut v = self.noop_ms.clone();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    }
}

/// Logs in, times `samples` NOOPs and reads the kernel's RTT estimate.
pub async fn measure_rtt(client: &mut Client, url: &RemoteUrl, samples: u32) -> anyhow::Result<RttSamples> {
    let ctrl = client.connection(url).await.with_context(|| format!("cannot log in to {url}"))?;
    let mut noop_ms = Vec::new();
    for _ in 0..samples.min(100) {
        let t = Instant::now();
        ctrl.expect(&Command::Noop).await?;
        noop_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let kernel = ferry_profile::rtt_estimate(&*ctrl).context("cannot read the control connection's TCP_INFO")?;
    Ok(RttSamples { noop_ms, kernel })
}

/// Which file to measure the rate with: the URL's own file, else the
/// server's `/dev/zero` if it offers memory paths; `None` if neither.
pub async fn rate_source(client: &mut Client, url: &RemoteUrl) -> anyhow::Result<Option<(RemoteUrl, RateSource)>> {
    let ctrl = client.connection(url).await?;
    if !url.is_dir_url() {
        match ctrl.stat(&url.path).await? {
            Some(f) if f.kind == FileKind::File && f.size > 0 => return Ok(Some((url.clone(), RateSource::File))),
            Some(f) if f.kind == FileKind::File => bail!("{url} is empty: there is nothing to measure the rate with"),
            _ => {}
        }
    }
    let zero = url.with_path("/dev/zero".into());
    Ok(match ctrl.stat("/dev/zero").await? {
        Some(f) if f.kind == FileKind::File && f.size > 0 => Some((zero, RateSource::MemoryZero)),
        _ => None,
    })
}

/// Describes a measurement in one sentence.
pub fn describe_measurement(m: &Measurement, source: RateSource, path: &str) -> String {
    let what = match source {
        RateSource::MemoryZero => {
            "memory-to-memory download of the server's /dev/zero (no disk at either end)".to_string()
        }
        RateSource::File => format!("download of {path} to /dev/null (the server reads its disk or cache)"),
    };
    let mut s = format!(
        "{} {what}, {} stream{}, {:.2} s{}",
        format_bytes(m.bytes),
        m.streams,
        if m.streams == 1 { "" } else { "s" },
        m.seconds,
        if m.cut_short { " (stopped at the time limit)" } else { "" }
    );
    s.push_str(&format!(": {} on average", format_bits(m.rate())));
    if let Some(r) = m.steady_rate {
        s.push_str(&format!(", {} in its second half", format_bits(r)));
    }
    s
}

pub async fn run(args: ProbeArgs) -> anyhow::Result<()> {
    let url = target_url(&args.target)?;
    let udt = args.transport.eq_ignore_ascii_case("udt");
    if !udt && !args.transport.eq_ignore_ascii_case("tcp") {
        bail!("--transport {}: ferry probe measures over tcp or udt", args.transport);
    }
    let opts = CopyOptions {
        timeout: Duration::from_secs(args.timeout),
        mode: ModeChoice::Extended,
        // One UDT connection paces at the path's rate (the session
        // chooses one when not told); -p is TCP's.
        parallelism: (!udt).then_some(args.parallel.clamp(1, 64)),
        transport: (!args.transport.eq_ignore_ascii_case("tcp")).then(|| args.transport.to_ascii_lowercase()),
        retries: 0,
        resume: false,
        ..CopyOptions::default()
    };
    let mut client = Client::new(opts);
    let rtt = measure_rtt(&mut client, &url, args.samples).await?;
    let mut measured = None;
    let mut used: Option<String> = None;
    let mut note = None;
    if !args.rtt_only {
        match rate_source(&mut client, &url).await? {
            Some((src, source)) => {
                let m = client
                    .measure_download(&src, args.bytes.max(1), Duration::from_secs_f64(args.seconds.max(0.1)))
                    .await
                    .with_context(|| format!("cannot measure the rate with {src}"))?;
                measured = Some((m, source, src.path.clone()));
                // What the data channels used: a server may have refused TPRT.
                used = client.session(&src).await.ok().map(|s| s.transport_name().to_string());
            }
            None => {
                note = Some(format!(
                    "No rate measured: {url} names no file, and the server has no /dev/zero (a Ferry server offers \
                     one with --memory-paths). Give the URL of a large file to measure with."
                ))
            }
        }
    }
    client.close().await;
    // The steady rate is the better estimate of what the path carries:
    // the average includes TCP's start, which the BDP is not about.
    let rate = measured.as_ref().map(|(m, _, _)| m.steady_rate.unwrap_or(m.rate()));
    let report = ProbeReport::new(&rtt.kernel, rate, BufferLimits::current());
    let remembered = match (&measured, rate) {
        (Some((m, _, _)), Some(rate)) if !args.no_path_cache => {
            remember(&url, m, rate, rtt.kernel.srtt, used.as_deref().unwrap_or("tcp"))
        }
        _ => None,
    };
    if args.json {
        let out = serde_json::json!({
            "target": url.to_string(),
            "rtt": {
                "noop_ms": rtt.noop_ms,
                "kernel_srtt_ms": rtt.kernel.srtt.as_secs_f64() * 1e3,
                "kernel_min_rtt_ms": rtt.kernel.min_rtt.map(|d| d.as_secs_f64() * 1e3),
            },
            "rate_source": measured.as_ref().map(|(_, s, _)| *s),
            "rate_path": measured.as_ref().map(|(_, _, p)| p.clone()),
            "measurement": measured.as_ref().map(|(m, _, _)| m),
            "report": report,
            "note": note,
            "transport": used,
            "path_cache": remembered,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("ferry probe {url}");
    let noop = match rtt.median_ms() {
        Some(med) => format!(
            "; {} NOOP round trips: median {} (min {})",
            rtt.noop_ms.len(),
            format_ms(med),
            format_ms(rtt.noop_ms.iter().copied().fold(f64::INFINITY, f64::min))
        ),
        None => String::new(),
    };
    println!("Round trip: the kernel's estimate for the control connection{noop}.");
    if let Some((m, source, path)) = &measured {
        println!("Rate: {}, over {}.", describe_measurement(m, *source, path), used.as_deref().unwrap_or("tcp"));
        println!(
            "The bandwidth-delay product uses the {} rate.",
            if m.steady_rate.is_some() { "second-half" } else { "average" }
        );
    }
    if let Some(n) = &note {
        println!("{n}");
    }
    print!("{report}");
    let l = report.limits;
    println!(
        "Buffer limits here: tcp_rmem max {}, tcp_wmem max {} (autotuning), net.core.rmem_max {}, wmem_max {} (the \
         most --tcp-bs can set).",
        format_bytes(l.autotune_rmem_max),
        format_bytes(l.autotune_wmem_max),
        format_bytes(l.rmem_max),
        format_bytes(l.wmem_max)
    );
    if let Some(f) = &remembered {
        println!("Remembered in {f}: the next `ferry cp --transport udt` to this host starts at this rate.");
    }
    if rate.is_some() {
        println!("`ferry tune URL` measures which settings work best instead of computing them.");
    }
    Ok(())
}

/// Records the measured rate in the path cache, so the next `ferry cp`
/// to this host starts its UDT senders at it (`ferry_client::path_cache`;
/// a TCP download from a host with small buffers understates the path,
/// and a later UDT transfer's higher sample then wins). Returns the
/// file written, or `None` when off or it failed (logged).
fn remember(url: &RemoteUrl, m: &Measurement, rate: f64, rtt: Duration, transport: &str) -> Option<String> {
    use ferry_client::path_cache::{PathCache, Sample};
    let cache = PathCache::at(PathCache::default_file()?);
    let how = format!("probe ({transport} download, {} stream{})", m.streams, if m.streams == 1 { "" } else { "s" });
    cache.observe(&url.host, Sample::measured(rate, rtt, m.bytes, m.seconds, &how));
    match cache.save() {
        Ok(()) => {
            tracing::info!(server = %url.host, rate, file = %cache.file().display(), "path rate remembered");
            Some(cache.file().display().to_string())
        }
        Err(e) => {
            tracing::warn!(file = %cache.file().display(), error = %e, "cannot update the path cache");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let u = target_url("example.org").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.path.as_str()), ("example.org", 2811, "/"));
        let u = target_url("example.org:2121").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("example.org", 2121));
        let u = target_url("127.0.0.1:5000").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("127.0.0.1", 5000));
        let u = target_url("::1").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 2811));
        let u = target_url("ftp://alice:pw@h:21/data/x").unwrap();
        assert_eq!((u.user.as_str(), u.path.as_str(), u.port), ("alice", "/data/x", 21));
        assert!(target_url("file:///tmp/x").is_err());
    }
}
