//! A real profile without a Ferry server: N parallel TCP streams over
//! loopback, sampled on the "server" (sending) and "client" (receiving)
//! side, written as report.json / report.html and summarised on the
//! terminal. Shows the library calls `ferry profile` makes.
//!
//! ```sh
//! cargo run --release -p ferry-profile --example loopback_profile -- \
//!     [--out DIR] [--mib 1024] [--streams 4] [--perf] [--tune]
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_profile::{
    exhaustive, tune, PerfConfig, Profile, ProgressRecorder, Sampler, SamplerConfig, Side, StreamRegistry,
    ThroughputComparison, TuneConfig, TunePlan, TuneSpace,
};

const MIB: u64 = 1 << 20;

struct Args {
    out: PathBuf,
    mib: u64,
    streams: u32,
    perf: bool,
    tune: bool,
}

fn args() -> Args {
    let mut a = Args { out: PathBuf::from("profile-report"), mib: 1024, streams: 4, perf: false, tune: false };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--out" => a.out = it.next().expect("--out DIR").into(),
            "--mib" => a.mib = it.next().and_then(|v| v.parse().ok()).expect("--mib N"),
            "--streams" => a.streams = it.next().and_then(|v| v.parse().ok()).expect("--streams N"),
            "--perf" => a.perf = true,
            "--tune" => a.tune = true,
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

/// Moves `total` bytes over `streams` loopback connections with the given
/// socket buffer and write size; returns bytes/s. Sockets are registered
/// with the two registries when given, and progress goes to `progress`.
fn transfer(
    total: u64,
    streams: u32,
    tcp_buffer: Option<u64>,
    block: u64,
    registries: Option<(&StreamRegistry, &StreamRegistry)>,
    progress: Option<&ProgressRecorder>,
) -> std::io::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let per_stream = total / streams as u64;
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for i in 0..streams {
        let client = TcpStream::connect(addr)?;
        let (server, _) = listener.accept()?;
        for s in [&client, &server] {
            if let Some(b) = tcp_buffer {
                let s = socket2::SockRef::from(s);
                s.set_send_buffer_size(b as usize)?;
                s.set_recv_buffer_size(b as usize)?;
            }
        }
        // Without registries (tuning trials) the sockets are tracked by
        // throwaway ones, which costs a dup and keeps the code to one path.
        let (srv_reg, cli_reg) = match registries {
            Some((s, c)) => (s.clone(), c.clone()),
            None => (StreamRegistry::new(), StreamRegistry::new()),
        };
        let label = format!("data {}", i + 1);
        let mut server = srv_reg.track(server, label.clone()).map_err(std::io::Error::other)?;
        let mut client = cli_reg.track(client, label).map_err(std::io::Error::other)?;
        senders.push(std::thread::spawn(move || -> std::io::Result<()> {
            let buf = vec![0xa5u8; block as usize];
            let mut left = per_stream;
            while left > 0 {
                let n = left.min(block) as usize;
                server.write_all(&buf[..n])?;
                left -= n as u64;
            }
            Ok(())
        }));
        let done = Arc::clone(&done);
        let progress = progress.cloned();
        receivers.push(std::thread::spawn(move || -> std::io::Result<()> {
            let mut buf = vec![0u8; block as usize];
            loop {
                let n = client.read(&mut buf)?;
                if n == 0 {
                    return Ok(());
                }
                let so_far = done.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
                if let Some(p) = &progress {
                    p.record(so_far);
                }
            }
        }));
    }
    for t in senders.into_iter().chain(receivers) {
        t.join().expect("transfer thread")?;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = args();
    let server_streams = StreamRegistry::new();
    let client_streams = StreamRegistry::new();
    let interval = Duration::from_millis(250);
    let mut server_cfg =
        SamplerConfig::every(interval).with_process(std::process::id()).with_streams(server_streams.clone());
    if a.perf {
        server_cfg = server_cfg.with_perf(PerfConfig::system_wide());
    }
    let server = Sampler::start(server_cfg)?;
    let client = Sampler::start(SamplerConfig::every(interval).with_streams(client_streams.clone()))?;
    std::thread::sleep(Duration::from_millis(500));

    let progress = ProgressRecorder::new(format!("loopback, {} streams", a.streams), Some(a.mib * MIB));
    let rate = transfer(a.mib * MIB, a.streams, None, MIB, Some((&server_streams, &client_streams)), Some(&progress))?;
    std::thread::sleep(Duration::from_millis(500));

    let mut profile = Profile::new(std::env::args().collect::<Vec<_>>().join(" "));
    profile.meta.settings.reader = Some(Side::Server);
    profile.meta.settings.transport = Some("tcp (loopback)".into());
    profile.meta.settings.parallel_streams = Some(a.streams);
    profile.meta.settings.block_size_bytes = Some(MIB);
    profile.meta.settings.bytes = Some(a.mib * MIB);
    profile.client = Some(client.stop()?);
    profile.server = Some(server.stop()?);
    profile.transfers.push(progress.snapshot());
    // Memory to memory is all this example does; a real `--compare-memory`
    // adds the disk variants.
    profile.comparison = Some(ThroughputComparison { memory_to_memory: Some(rate), ..Default::default() });

    if a.tune {
        let mut space = TuneSpace::standard(None);
        space.streams = vec![1, 2, 4, 8];
        space.tcp_buffers = vec![None, Some(4 * MIB), Some(16 * MIB)];
        space.block_sizes = vec![256 * 1024, MIB, 4 * MIB];
        space.staging_sizes = vec![8 * MIB];
        let measure = |c: &TuneConfig| transfer(256 * MIB, c.streams, c.tcp_buffer, c.block_size, None, None);
        let plan = TunePlan::new(space.clone());
        let result = tune(&plan, measure)?;
        let grid = exhaustive(&space, measure);
        println!(
            "sweep: {} trials, best {:.0} MiB/s; grid: {} trials, best {:.0} MiB/s ({:.0}%)",
            result.trials.len(),
            result.best_rate / MIB as f64,
            grid.trials.len(),
            grid.best_rate / MIB as f64,
            100.0 * result.best_rate / grid.best_rate
        );
        profile.tuning = Some(result);
    }

    let files = profile.write_report(&a.out)?;
    print!("{}", profile.to_text());
    println!("\nwrote {} and {}", files.json.display(), files.html.display());
    Ok(())
}
