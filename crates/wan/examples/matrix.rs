//! Measures iperf3 throughput through the emulator over a range of one-way
//! delays and prints a Markdown table; the figures in `docs/wan-emulator.md`
//! come from this program.
//!
//! ```text
//! cargo run --release -p ferry-wan --example matrix -- \
//!     [--delays 0,10,30,80] [--rate 1gbit|unlimited] [--shapers forwarder,tbf] \
//!     [--untuned] [--streams 1] [--reverse] [--mtu 9000] [--seconds N] [--queue 25MB]
//!     [--txqueuelen 1000]
//! ```
//!
//! Run lengths follow the Globus baseline (`reference/globus/wan.md`): 10 s
//! up to 10 ms, 15 s at 30 ms, 20 s from 80 ms, unless `--seconds` is given.
//! Throughput is iperf3's receiver average over the whole run (start-up
//! included, as in the baseline); "steady" is the mean of the last five
//! one-second intervals.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use ferry_wan::selftest::{iperf3, probe_rtt, IperfOptions};
use ferry_wan::{Link, LinkConfig, PathConfig, Rate, Shaper};

fn main() -> Result<()> {
    let mut delays = vec![0u64, 10, 30, 80];
    let mut rate: Option<Rate> = Some("1gbit".parse()?);
    let mut shapers = vec![Shaper::Forwarder];
    let mut tuned = true;
    let mut streams = 1;
    let mut reverse = false;
    let mut mtu = 9000;
    let mut seconds = None;
    let mut queue = None;
    let mut txqueuelen = LinkConfig::DEFAULT_TXQUEUELEN;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().context("missing value");
        match a.as_str() {
            "--delays" => delays = val()?.split(',').map(|d| d.trim().parse()).collect::<Result<_, _>>()?,
            "--rate" => {
                let v = val()?;
                rate = if v == "unlimited" { None } else { Some(v.parse()?) }
            }
            "--shapers" => shapers = val()?.split(',').map(|s| s.parse()).collect::<Result<_, _>>()?,
            "--untuned" => tuned = false,
            "--streams" => streams = val()?.parse()?,
            "--reverse" => reverse = true,
            "--mtu" => mtu = val()?.parse()?,
            "--seconds" => seconds = Some(val()?.parse()?),
            "--txqueuelen" => txqueuelen = val()?.parse()?,
            "--queue" => queue = Some(ferry_wan::units::parse_bytes(&val()?)?),
            other => bail!("unknown argument {other:?}"),
        }
    }

    println!(
        "| one-way delay | shaper | rate | queue | hosts | MTU | connect RTT ms | iperf3 Mbit/s | steady Mbit/s | retrans | queue drops | TUN ring drops | iperf3 mean RTT ms | fwd CPU c->s | fwd CPU s->c | machine busy |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &delay_ms in &delays {
        for &shaper in &shapers {
            let secs = seconds.unwrap_or(match delay_ms {
                0..=10 => 10,
                11..=30 => 15,
                _ => 20,
            });
            let path = PathConfig { rate, queue, ..PathConfig::delay_only(Duration::from_millis(delay_ms)) };
            let config = LinkConfig {
                tuned,
                shaper,
                mtu,
                txqueuelen,
                ..LinkConfig::new(format!("fwm-{}", std::process::id()), path)
            };
            let queue_label = if rate.is_some() {
                format!("{:.1} MB", config.forward.queue_bytes() as f64 / 1e6)
            } else {
                "-".into()
            };
            // Other work on a shared 2-core machine skews every figure; wait
            // (bounded) for a quiet second before each run.
            wait_quiet()?;
            let link = Link::up(config)?;
            let rtt = probe_rtt(&link, 5)?;
            let mut sorted = rtt.clone();
            sorted.sort();
            let busy_before = cpu_busy()?;
            let before = link.stats();
            let run = iperf3(&link, &IperfOptions { seconds: secs, omit: 0, reverse, streams })?;
            let after = link.stats();
            let busy_after = cpu_busy()?;
            link.down()?;

            let wall = (after.elapsed - before.elapsed).as_secs_f64();
            let pct = |a: u64, b: u64| (b - a) as f64 / 1e9 / wall * 100.0;
            let tail = &run.intervals[run.intervals.len().saturating_sub(5)..];
            let steady = tail.iter().sum::<f64>() / tail.len().max(1) as f64;
            let busy = (busy_after.0 - busy_before.0) as f64 / (busy_after.1 - busy_before.1) as f64;
            println!(
                "| {delay_ms} ms | {} | {} | {} | {} | {mtu} | {:.2} | {:.0} | {:.0} | {} | {} | {} | {} | {:.0}% | {:.0}% | {:.0}% of 2 cores |",
                match shaper {
                    Shaper::Forwarder => "forwarder",
                    Shaper::Tbf => "tbf",
                },
                rate.map(|r| r.to_string()).unwrap_or_else(|| "unlimited".into()),
                queue_label,
                if tuned { "tuned" } else { "untuned" },
                sorted[sorted.len() / 2].as_secs_f64() * 1e3,
                run.received_bits_per_second / 1e6,
                steady / 1e6,
                run.retransmits,
                after.forward.queue_drops - before.forward.queue_drops,
                after.forward.device_drops.unwrap_or(0) - before.forward.device_drops.unwrap_or(0),
                run.mean_rtt
                    .map(|d| format!("{:.1}", d.as_secs_f64() * 1e3))
                    .unwrap_or_default(),
                pct(before.forward.cpu_ns, after.forward.cpu_ns),
                pct(before.back.cpu_ns, after.back.cpu_ns),
                busy * 100.0,
            );
        }
    }
    Ok(())
}

/// Waits up to a minute for a second in which the machine is < 15 % busy.
fn wait_quiet() -> Result<()> {
    for _ in 0..60 {
        let a = cpu_busy()?;
        std::thread::sleep(Duration::from_secs(1));
        let b = cpu_busy()?;
        if ((b.0 - a.0) as f64) < 0.15 * (b.1 - a.1) as f64 {
            return Ok(());
        }
    }
    eprintln!("matrix: machine still busy after 60 s; measuring anyway");
    Ok(())
}

/// (busy, total) jiffies of all CPUs from /proc/stat.
fn cpu_busy() -> Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat.lines().next().context("empty /proc/stat")?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total: u64 = v.iter().sum();
    // idle + iowait
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Ok((total - idle, total))
}
