//! Memory-to-memory throughput of the UDT driver (development measurements;
//! the formal benchmark scenario belongs in `bench/`).
//!
//!   udt_perf server ADDR:PORT recv|send BYTES [--cc udt|ferry|blast:RATE] [--mss N] [--rtt-ms N --rate-mbit N]
//!   udt_perf client ADDR:PORT recv|send BYTES [same options]
//!   (--seconds N: a sender stops after N s; --start-mbit N: ferry starts at N Mbit/s;
//!    --max-mbit N: no controller sends faster, as `--max-rate`)
//!
//! Prints one line: `OK bytes seconds cpu_seconds MB/s` (CPU of this process,
//! user + system, from getrusage via /proc/self/stat).

use ferry_io::udt::{UdtConfig, UdtListener, UdtStream};
use ferry_udt::CongestionKind;
use std::time::{Duration, Instant};

fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 =
        f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0) + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!(
            "usage: udt_perf server|client ADDR:PORT recv|send BYTES [--cc NAME] [--mss N] [--rtt-ms N --rate-mbit N]"
        );
        std::process::exit(2);
    }
    let (role, addr, mode, bytes) =
        (&args[1], args[2].parse().expect("address"), &args[3], args[4].parse::<u64>().expect("bytes"));
    let mut cfg = UdtConfig::default();
    let mut i = 5;
    let (mut rtt_ms, mut rate_mbit) = (None, None);
    let (mut seconds, mut start_mbit): (Option<f64>, Option<f64>) = (None, None);
    let mut max_mbit: Option<f64> = None;
    while i < args.len() {
        match args[i].as_str() {
            "--no-gso" => {
                cfg.gso = false;
                i += 1;
                continue;
            }
            "--no-gro" => {
                cfg.gro = false;
                i += 1;
                continue;
            }
            "--seconds" => seconds = Some(args[i + 1].parse::<f64>().expect("seconds")),
            "--start-mbit" => start_mbit = Some(args[i + 1].parse::<f64>().expect("rate")),
            "--max-mbit" => max_mbit = Some(args[i + 1].parse::<f64>().expect("rate")),
            "--cc" => cfg.protocol.congestion = CongestionKind::parse(&args[i + 1]).expect("congestion control"),
            "--mss" => {
                // A fixed MSS, not the path's (which loopback would make 9 000).
                cfg.protocol.mss = args[i + 1].parse().expect("mss");
                cfg.mss_from_path = false;
            }
            "--rtt-ms" => rtt_ms = Some(args[i + 1].parse::<f64>().expect("rtt")),
            "--rate-mbit" => rate_mbit = Some(args[i + 1].parse::<f64>().expect("rate")),
            other => panic!("unknown option {other}"),
        }
        i += 2;
    }
    if let (Some(r), Some(m)) = (rtt_ms, rate_mbit) {
        let sized = UdtConfig::for_path(m * 1e6 / 8.0, Duration::from_secs_f64(r / 1000.0));
        cfg.socket_buffer = sized.socket_buffer;
        cfg.protocol =
            ferry_udt::Config { mss: cfg.protocol.mss, congestion: cfg.protocol.congestion, ..sized.protocol };
    }
    if let (Some(r), CongestionKind::Ferry { max_rate, .. }) = (start_mbit, cfg.protocol.congestion) {
        cfg.protocol.congestion = CongestionKind::Ferry { initial_rate: Some(r * 1e6 / 8.0), max_rate };
    }
    if let Some(m) = max_mbit {
        cfg.protocol.max_bandwidth = Some(m * 1e6 / 8.0);
        if let CongestionKind::Ferry { initial_rate, .. } = cfg.protocol.congestion {
            cfg.protocol.congestion = CongestionKind::Ferry { initial_rate, max_rate: Some(m * 1e6 / 8.0) };
        }
    }
    let stream = if role == "server" {
        let l = UdtListener::bind(addr, cfg).expect("bind");
        println!("PORT {}", l.local_addr().port());
        l.accept().expect("accept")
    } else {
        UdtStream::connect(addr, cfg).expect("connect")
    };
    let t0 = Instant::now();
    let c0 = cpu_seconds();
    let mut buf = vec![0u8; 4 << 20];
    let mut done = 0u64;
    if mode == "send" {
        while done < bytes && seconds.is_none_or(|s| t0.elapsed().as_secs_f64() < s) {
            let k = (bytes - done).min(buf.len() as u64) as usize;
            stream.write_all(&buf[..k]).expect("write");
            done += k as u64;
        }
        stream.shutdown().expect("shutdown");
    } else {
        // read to the sender's shutdown, so our last ACK reaches it
        loop {
            let n = stream.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            done += n as u64;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - c0;
    let st = stream.stats();
    println!("OK {done} {secs:.3} {cpu:.3} {:.1}", done as f64 / secs / 1e6);
    eprintln!("stats: {st:?}");
}
