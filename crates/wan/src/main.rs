//! `ferry-wan`: bring an emulated long path up between two network
//! namespaces, check one, or clean up after one that was killed.

use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use ferry_wan::units::{format_delay, parse_bytes, parse_delay, parse_loss};
use ferry_wan::{
    DirectionSnapshot, Ipv4Cidr, Link, LinkConfig, LinkStats, PathConfig, Rate, SelftestConfig, Shaper, WanError,
};

#[derive(Parser, Debug)]
#[command(
    name = "ferry-wan",
    version,
    about = "User-space long-path link emulator between two network namespaces",
    long_about = "Creates namespaces NAME-c (client) and NAME-s (server), each with a TUN \
                  device `wan0`, and forwards between them with a one-way delay, a bottleneck \
                  rate with a bounded tail-drop queue, and random loss, per direction. \
                  Run programs at either end with `ip netns exec NAME-c ...`."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Bring a link up and hold it until SIGINT/SIGTERM (or until COMMAND exits).
    Up(UpArgs),
    /// Measure RTT and iperf3 throughput through a fresh link and compare them
    /// with the configuration (exit status 1 on a mismatch).
    Selftest(SelftestArgs),
    /// Several hosts NAME-h0.. around a router NAME-r, each host behind its
    /// own link (delay, rate, loss, queue, the same for every host); held
    /// until SIGINT/SIGTERM or until COMMAND exits.
    Topology(TopologyArgs),
    /// Remove a link (or topology) whose ferry-wan process died without cleaning up.
    Down {
        #[arg(long)]
        name: String,
        /// Remove it even if the recorded process still runs.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Args, Debug)]
struct LinkArgs {
    /// One-way delay client -> server (e.g. 30ms) [default: 0ms for `up`,
    /// 10ms for `selftest`].
    #[arg(long, value_parser = parse_delay)]
    delay: Option<Duration>,
    /// One-way delay server -> client [default: --delay].
    #[arg(long, value_parser = parse_delay)]
    delay_back: Option<Duration>,
    /// Bottleneck rate client -> server on IP bytes (e.g. 1gbit, or
    /// `unlimited`) [default: unlimited for `up`, 200mbit for `selftest`].
    #[arg(long, value_parser = parse_rate_arg)]
    rate: Option<RateArg>,
    /// Bottleneck rate server -> client [default: --rate].
    #[arg(long, value_parser = parse_rate_arg)]
    rate_back: Option<RateArg>,
    /// Random loss client -> server (e.g. 0.1%).
    #[arg(long, value_parser = parse_loss, default_value = "0")]
    loss: f64,
    /// Random loss server -> client [default: --loss].
    #[arg(long, value_parser = parse_loss)]
    loss_back: Option<f64>,
    /// Bottleneck queue client -> server in bytes (e.g. 25MB)
    /// [default: 200 ms at the rate + 256 KiB, as the Globus baseline's tbf].
    #[arg(long, value_parser = parse_bytes)]
    queue: Option<u64>,
    /// Bottleneck queue server -> client [default: --queue].
    #[arg(long, value_parser = parse_bytes)]
    queue_back: Option<u64>,
    #[arg(long, default_value_t = 9000)]
    mtu: u32,
    #[arg(long, default_value = "10.77.0.1/24")]
    client_addr: Ipv4Cidr,
    #[arg(long, default_value = "10.77.0.2/24")]
    server_addr: Ipv4Cidr,
    /// Keep the namespaces' default TCP buffer limits (an "untuned host";
    /// tcp_wmem max 4 MiB) instead of raising them to 64 MiB.
    #[arg(long)]
    untuned: bool,
    /// Where the rate is enforced: `forwarder` (virtual link clock, real drops)
    /// or `tbf` (qdisc on the sender's TUN egress, as the Python prototype did).
    #[arg(long, default_value = "forwarder")]
    shaper: Shaper,
    /// Seed for the loss generator (repeatable runs).
    #[arg(long)]
    seed: Option<u64>,
    /// Packets each TUN device may hold before the forwarder reads them;
    /// only used while the forwarder is starved of CPU.
    #[arg(long, default_value_t = LinkConfig::DEFAULT_TXQUEUELEN)]
    txqueuelen: u32,
}

/// A rate option's value: `unlimited` is how a user overrides the self-test's
/// default rate.
#[derive(Debug, Clone, Copy)]
enum RateArg {
    Limited(Rate),
    Unlimited,
}

fn parse_rate_arg(text: &str) -> Result<RateArg, ferry_wan::ParseError> {
    if text.eq_ignore_ascii_case("unlimited") {
        Ok(RateArg::Unlimited)
    } else {
        text.parse().map(RateArg::Limited)
    }
}

impl RateArg {
    fn rate(self) -> Option<Rate> {
        match self {
            RateArg::Limited(r) => Some(r),
            RateArg::Unlimited => None,
        }
    }
}

impl LinkArgs {
    /// The link these options describe, with the subcommand's defaults for
    /// delay and rate.
    fn config(&self, name: String, default_delay: Duration, default_rate: Option<Rate>) -> LinkConfig {
        let delay = self.delay.unwrap_or(default_delay);
        let rate = self.rate.map_or(default_rate, RateArg::rate);
        let forward = PathConfig { delay, rate, loss: self.loss, queue: self.queue };
        let back = PathConfig {
            delay: self.delay_back.unwrap_or(delay),
            rate: self.rate_back.map_or(rate, RateArg::rate),
            loss: self.loss_back.unwrap_or(self.loss),
            queue: self.queue_back.or(self.queue),
        };
        LinkConfig {
            mtu: self.mtu,
            client_addr: self.client_addr,
            server_addr: self.server_addr,
            tuned: !self.untuned,
            shaper: self.shaper,
            seed: self.seed,
            txqueuelen: self.txqueuelen,
            back,
            ..LinkConfig::new(name, forward)
        }
    }
}

#[derive(Args, Debug)]
struct UpArgs {
    /// Base name; namespaces are NAME-c and NAME-s.
    #[arg(long)]
    name: String,
    #[command(flatten)]
    link: LinkArgs,
    /// Print both directions' counters at this interval (e.g. 1s).
    #[arg(long, value_parser = parse_delay)]
    stats: Option<Duration>,
    /// Run this command (in the root namespace, with FERRY_WAN_* variables
    /// set) while the link is up, then tear down and exit with its status.
    #[arg(last = true)]
    command: Vec<String>,
}

#[derive(Args, Debug)]
struct TopologyArgs {
    /// Base name (1-12 letters, digits, '_'): namespaces NAME-r, NAME-h0, ...
    #[arg(long)]
    name: String,
    /// Number of hosts.
    #[arg(long, default_value_t = 2)]
    hosts: usize,
    /// One-way delay of each host's link.
    #[arg(long, value_parser = parse_delay, default_value = "0ms")]
    delay: Duration,
    /// Rate of each host's link, each direction (e.g. 100mbit).
    #[arg(long)]
    rate: Option<Rate>,
    /// Random loss on each link, each direction.
    #[arg(long, value_parser = parse_loss, default_value = "0")]
    loss: f64,
    /// Bottleneck queue of each link, bytes.
    #[arg(long, value_parser = parse_bytes)]
    queue: Option<u64>,
    #[arg(long, default_value_t = 9000)]
    mtu: u32,
    /// Keep the hosts' default TCP buffer limits.
    #[arg(long)]
    untuned: bool,
    /// Run this command (root namespace, FERRY_WAN_HOSTS="NS=IP ...") while
    /// the topology is up, then tear down and exit with its status.
    #[arg(last = true)]
    command: Vec<String>,
}

#[derive(Args, Debug)]
struct SelftestArgs {
    /// Base name [default: ferry-wan-selftest-PID].
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    link: LinkArgs,
    /// iperf3 seconds per direction (after one omitted second).
    #[arg(long, default_value_t = 3)]
    seconds: u32,
    /// Also measure server -> client throughput.
    #[arg(long)]
    reverse: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Up(args) => up(args),
        Cmd::Selftest(args) => selftest(args),
        Cmd::Topology(args) => topology(args),
        Cmd::Down { name, force } => down(&name, force),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferry-wan: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Signals that end the link. SIGHUP too: a closed terminal should not leave
/// namespaces behind.
const STOP_SIGNALS: [i32; 3] = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP];

fn topology(args: TopologyArgs) -> Result<ExitCode> {
    let path = PathConfig { delay: args.delay, rate: args.rate, loss: args.loss, queue: args.queue };
    let config = ferry_wan::TopologyConfig {
        mtu: args.mtu,
        tuned: !args.untuned,
        ..ferry_wan::TopologyConfig::uniform(args.name.clone(), args.hosts, path.clone())
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in STOP_SIGNALS {
        signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&stop))?;
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let t = ferry_wan::Topology::up(config.clone()).context("bringing the topology up")?;
    let hosts: Vec<String> = (0..t.hosts()).map(|i| format!("{}={}", t.host_ns(i), t.host_ip(i))).collect();
    println!("ferry-wan: topology {:?} up: router {} and hosts {}", config.name, config.router_ns(), hosts.join(" "));
    println!("  every host link: {path}");
    let mut child = if args.command.is_empty() {
        println!("  Ctrl-C or SIGTERM tears it down");
        None
    } else {
        let mut c = Command::new(&args.command[0]);
        c.args(&args.command[1..]).env("FERRY_WAN_HOSTS", hosts.join(" "));
        Some(c.spawn().with_context(|| format!("starting {:?}", args.command[0]))?)
    };
    let mut exit = ExitCode::SUCCESS;
    let mut failure = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            if let Some(c) = child.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
            exit = ExitCode::FAILURE;
            break;
        }
        if let Some(c) = child.as_mut() {
            if let Some(status) = c.try_wait()? {
                exit = if status.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE };
                break;
            }
        }
        if let Err(e) = t.check() {
            failure = Some(e);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    t.down()?;
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(exit),
    }
}

fn up(args: UpArgs) -> Result<ExitCode> {
    let config = args.link.config(args.name.clone(), Duration::ZERO, None);
    // Register before anything is created, so a signal during set-up still
    // reaches the teardown path instead of killing the process midway.
    let stop = Arc::new(AtomicBool::new(false));
    let last_signal = Arc::new(AtomicUsize::new(0));
    for sig in STOP_SIGNALS {
        // A second signal while tearing down exits at once (what an
        // impatient Ctrl-C Ctrl-C means); `ferry-wan down` cleans up then.
        signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&stop))?;
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
        signal_hook::flag::register_usize(sig, Arc::clone(&last_signal), sig as usize)?;
    }

    let link = Link::up(config.clone()).context("bringing the link up")?;
    let (cns, sns) = (config.client_ns(), config.server_ns());
    println!(
        "ferry-wan: link {:?} up: {cns} {} <-> {sns} {} (MTU {}, {} hosts, {} shaping)",
        config.name,
        config.client_addr,
        config.server_addr,
        config.mtu,
        if config.tuned { "tuned" } else { "untuned" },
        match config.shaper {
            Shaper::Forwarder => "forwarder",
            Shaper::Tbf => "tbf",
        }
    );
    println!("  client -> server: {}", config.forward);
    println!("  server -> client: {}", config.back);
    println!("  run commands with: ip netns exec {cns} ... / ip netns exec {sns} ...");

    let mut child = if args.command.is_empty() {
        println!("  Ctrl-C or SIGTERM tears the link down");
        None
    } else {
        let mut c = Command::new(&args.command[0]);
        c.args(&args.command[1..])
            .env("FERRY_WAN_CLIENT_NS", &cns)
            .env("FERRY_WAN_SERVER_NS", &sns)
            .env("FERRY_WAN_CLIENT_IP", config.client_addr.addr.to_string())
            .env("FERRY_WAN_SERVER_IP", config.server_addr.addr.to_string());
        Some(c.spawn().with_context(|| format!("starting {:?}", args.command[0]))?)
    };

    let mut last_print = Instant::now();
    let mut last_stats = link.stats();
    let mut exit = ExitCode::SUCCESS;
    let mut failure = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            eprintln!("ferry-wan: signal {} received, tearing down", last_signal.load(Ordering::Relaxed));
            if let Some(c) = child.as_mut() {
                // A Ctrl-C reached the child too (same process group); give
                // it a moment to finish its own cleanup before killing it,
                // our own child, by PID.
                let deadline = Instant::now() + Duration::from_secs(2);
                while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = c.kill();
                let _ = c.wait();
            }
            // The shell convention for "ended by signal N".
            exit = ExitCode::from(128 + last_signal.load(Ordering::Relaxed).min(127) as u8);
            break;
        }
        if let Some(c) = child.as_mut() {
            if let Some(status) = c.try_wait()? {
                exit = match status.code() {
                    Some(0) => ExitCode::SUCCESS,
                    Some(n) => ExitCode::from(n.clamp(1, 255) as u8),
                    None => ExitCode::FAILURE,
                };
                break;
            }
        }
        if let Err(e) = link.check() {
            failure = Some(e);
            break;
        }
        if let Some(every) = args.stats {
            if last_print.elapsed() >= every {
                let now = link.stats();
                print_interval(&last_stats, &now);
                last_stats = now;
                last_print = Instant::now();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    // Counters as of now, in case the teardown cannot return them.
    let running = link.stats();
    let teardown = link.down();
    print_summary(teardown.as_ref().unwrap_or(&running));
    match (failure, teardown) {
        (None, Ok(_)) => Ok(exit),
        // The same failure, seen by `check` first and again, with its
        // cause, by the teardown.
        (Some(_), Err(f @ WanError::Forwarder { .. })) => Err(f.into()),
        (Some(f), Ok(_)) => Err(f.into()),
        (None, Err(t)) => Err(anyhow::Error::new(t).context("tearing the link down")),
        (Some(f), Err(t)) => bail!("{f}; tearing the link down then failed too: {t}"),
    }
}

fn print_interval(a: &LinkStats, b: &LinkStats) {
    let secs = (b.elapsed - a.elapsed).as_secs_f64().max(1e-9);
    let line = |x: &DirectionSnapshot, y: &DirectionSnapshot| {
        format!(
            "{:8.1} Mbit/s {:6} pkt/s lost+queue-dropped {}+{} cpu {:4.1}%",
            (y.tx_bytes - x.tx_bytes) as f64 * 8.0 / secs / 1e6,
            ((y.tx_packets - x.tx_packets) as f64 / secs) as u64,
            y.lost - x.lost,
            y.queue_drops - x.queue_drops,
            (y.cpu_ns.saturating_sub(x.cpu_ns)) as f64 / 1e9 / secs * 100.0
        )
    };
    eprintln!(
        "[{:7.1}s] c->s {} | s->c {}",
        b.elapsed.as_secs_f64(),
        line(&a.forward, &b.forward),
        line(&a.back, &b.back)
    );
}

fn print_summary(s: &LinkStats) {
    let secs = s.elapsed.as_secs_f64().max(1e-9);
    for (label, d) in [("client->server", &s.forward), ("server->client", &s.back)] {
        eprintln!(
            "ferry-wan: {label}: {} packets, {} bytes forwarded; dropped {} by loss, {} by queue \
             (max queue {} B), {} over memory cap, {} write errors, {} in the sender's TUN ring; \
             forwarder CPU {:.2} s ({:.1}% of a core over {:.1} s)",
            d.tx_packets,
            d.tx_bytes,
            d.lost,
            d.queue_drops,
            d.max_backlog_bytes,
            d.overflow_drops,
            d.write_errors,
            d.device_drops.map_or("?".to_string(), |n| n.to_string()),
            d.cpu_ns as f64 / 1e9,
            d.cpu_ns as f64 / 1e9 / secs * 100.0,
            secs
        );
    }
}

fn selftest(args: SelftestArgs) -> Result<ExitCode> {
    let name = args.name.clone().unwrap_or_else(|| format!("ferry-wan-selftest-{}", std::process::id()));
    let config = args.link.config(name, Duration::from_millis(10), Some(Rate::from_bits_per_second(200_000_000)));
    // Under the default disposition a Ctrl-C would kill us before the
    // guard's Drop runs. Caught, it still reaches iperf3 (same process
    // group), whose failure ends the measurement through the normal error
    // path, which tears the link down.
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in STOP_SIGNALS {
        signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&interrupted))?;
        signal_hook::flag::register(sig, Arc::clone(&interrupted))?;
    }
    println!(
        "ferry-wan selftest: client -> server {}; server -> client {}; {} s of iperf3",
        config.forward, config.back, args.seconds
    );
    let st = SelftestConfig { seconds: args.seconds, reverse: args.reverse, ..SelftestConfig::new(config) };
    let report = ferry_wan::selftest::run(&st)?;
    print!("{report}");
    if report.passed() {
        println!(
            "selftest passed (tolerance ±{:.0}%, RTT +{} absolute)",
            ferry_wan::selftest::TOLERANCE * 100.0,
            format_delay(ferry_wan::selftest::RTT_ALLOWANCE)
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!("selftest FAILED: a measurement is outside the tolerance");
        Ok(ExitCode::FAILURE)
    }
}

fn down(name: &str, force: bool) -> Result<ExitCode> {
    let removed = ferry_wan::netns::down(name, force)?;
    if removed.is_empty() {
        println!("ferry-wan: link {name:?}: nothing left to remove; record deleted");
    } else {
        println!("ferry-wan: link {name:?}: removed {}", removed.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}
