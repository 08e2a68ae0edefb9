//! The congestion controllers on simulated long paths. These are
//! behaviour checks in simulated time (deterministic, seeded), not
//! performance measurements: real-time figures live in `bench/`.

mod sim;

use ferry_udt::cc::FerryRate;
use ferry_udt::{Config, CongestionKind, Time};
use sim::{LinkConfig, Sim};
use std::time::Duration;

const MBIT: f64 = 1e6 / 8.0;

fn path_config(kind: CongestionKind, rate: f64, one_way_ms: u64) -> Config {
    Config { congestion: kind, ..Config::default() }.for_path(rate, Duration::from_millis(2 * one_way_ms))
}

/// Uploads for `secs` of simulated time over a `mbit` link with `loss` and
/// returns the receiver's goodput from `from_s` to the end as a fraction of
/// the link's payload capacity.
fn utilisation(kind: CongestionKind, mbit: f64, one_way_ms: u64, loss: f64, secs: u64, from_s: u64) -> (f64, Sim) {
    let c = path_config(kind, mbit * MBIT, one_way_ms);
    let up = LinkConfig::new(one_way_ms).rate_mbit(mbit).loss(loss);
    let down = LinkConfig::new(one_way_ms);
    let mut s = Sim::upload(c.clone(), c, up, down, u64::MAX / 2, 12345, 99);
    s.sample_every = Duration::from_millis(100);
    let start = s.now;
    s.run_until(Duration::from_secs(secs), |_| false);
    assert!(!s.server.corrupt);
    let g = s.goodput_between(start + Duration::from_secs(from_s), s.now);
    // payload share of a 1500-byte packet on the wire (IP+UDP+UDT headers)
    let capacity = mbit * MBIT * (1500.0 - 44.0) / 1500.0;
    (g / capacity, s)
}

#[test]
fn ferry_default_fills_a_long_path_despite_one_percent_random_loss() {
    let (u, s) = utilisation(CongestionKind::Ferry { initial_rate: None, max_rate: None }, 200.0, 80, 0.01, 30, 10);
    let st = s.client().stats();
    assert!(u >= 0.85, "ferry at 80 ms, 1 % loss: {u:.3} of the link; {st:?}");
    assert!(st.retransmitted > 1000);
}

#[test]
fn ferry_from_cold_reaches_085_of_the_link_within_forty_round_trips() {
    // 200 Mbit/s, 80 ms one way (RTT 160 ms), 1 % random loss each packet:
    // from 40 RTTs (6.4 s) on, the cold-started default runs at ≥ 0.85.
    let (u, s) = utilisation(CongestionKind::Ferry { initial_rate: None, max_rate: None }, 200.0, 80, 0.01, 16, 7);
    assert!(u >= 0.85, "ferry cold, 80 ms, 1 % loss, from 40 RTTs: {u:.3}; {}", s.client().congestion().describe());
}

#[test]
fn ferry_started_at_the_probed_rate_holds_085_at_one_percent_loss() {
    let rate = 200.0 * MBIT;
    let (u, s) =
        utilisation(CongestionKind::Ferry { initial_rate: Some(rate), max_rate: None }, 200.0, 80, 0.01, 10, 1);
    assert!(u >= 0.85, "probed start, 80 ms, 1 % loss, from 1 s: {u:.3}; {}", s.client().congestion().describe());
}

/// Writes pattern bytes into the client until `upto` is written or its
/// send buffer is full.
fn feed(s: &mut Sim, upto: u64) {
    let now = s.now;
    let side = &mut s.client;
    let Some(c) = side.conn.as_mut() else { return };
    if !c.is_established() {
        return;
    }
    while side.written < upto {
        let k = (c.send_space() as u64).min(upto - side.written).min(1 << 20) as usize;
        if k == 0 {
            break;
        }
        let buf: Vec<u8> = (0..k as u64).map(|i| sim::pattern(side.written + i)).collect();
        side.written += c.write(now, &buf) as u64;
    }
}

#[test]
fn application_pauses_do_not_collapse_the_rate() {
    // Bulk for 10 s, then the application trickles 20 kB every 200 ms for
    // 8 s (50 round trips: the bandwidth window would have aged out five
    // times over), then bulk again: the sender resumes near the path's
    // rate, not at the trickle's.
    let link = 200.0 * MBIT;
    let c = path_config(CongestionKind::Ferry { initial_rate: None, max_rate: None }, link, 80);
    let up = LinkConfig::new(80).rate_mbit(200.0).loss(0.01);
    let mut s = Sim::new(c.clone(), c, up, LinkConfig::new(80), 7, 21);
    s.server.app = sim::App::Receive;
    s.sample_every = Duration::from_millis(50);
    let t0 = s.now;
    let mut k = 0;
    while s.now < t0 + Duration::from_secs(10) {
        feed(&mut s, u64::MAX / 2);
        s.run_until(Duration::from_millis(5), |_| false);
        k += 1;
        if k % 50 == 0 && std::env::var("TRACE").is_ok() {
            let st = s.client().stats();
            eprintln!(
                "{:.2} read {} retx {} qdrop {} fw {} | {}",
                s.now.saturating_since(t0).as_secs_f64(),
                s.server.read,
                st.retransmitted,
                s.up.dropped_queue,
                st.flow_window,
                s.client().congestion().describe()
            );
        }
    }
    let before = s.client().stats().pacing_rate;
    assert!(before >= 0.7 * link, "bulk phase: {}", s.client().congestion().describe());
    // drain what is buffered, then trickle
    let mut upto = s.client.written;
    for _ in 0..40 {
        upto += 20_000;
        feed(&mut s, upto);
        s.run_until(Duration::from_millis(200), |_| false);
    }
    let resumed = s.client().stats().pacing_rate;
    assert!(
        resumed >= 0.7 * link,
        "after 8 s of trickle the pacing rate is {:.1} Mbit/s: {}",
        resumed / MBIT,
        s.client().congestion().describe()
    );
    let t1 = s.now;
    while s.now < t1 + Duration::from_secs(3) {
        feed(&mut s, u64::MAX / 2);
        s.run_until(Duration::from_millis(5), |_| false);
    }
    assert!(!s.server.corrupt);
    let first = t1 + Duration::from_millis(300);
    let g = s.goodput_between(first, first + Duration::from_secs(2)) / (link * 1456.0 / 1500.0);
    assert!(g >= 0.7, "goodput after the pause {g:.3}: {}", s.client().congestion().describe());
}

#[test]
fn daimd_backs_off_on_random_loss_as_udt_does() {
    let ferry = CongestionKind::Ferry { initial_rate: None, max_rate: None };
    let (uf, _) = utilisation(ferry, 200.0, 80, 0.01, 30, 10);
    let (ud, s) = utilisation(CongestionKind::Udt, 200.0, 80, 0.01, 30, 10);
    // UDT reads every NAK as congestion (×8/9 per episode), so random loss
    // holds it well below the link, where the rate model is not fooled.
    assert!(ud < uf * 0.9, "udt {ud:.3} vs ferry {uf:.3}");
    assert!(ud > 0.02, "but it does move data: {ud:.3} ({:?})", s.client().stats());
}

#[test]
fn daimd_on_a_clean_path_leaves_slow_start_and_approaches_the_link() {
    let (u, s) = utilisation(CongestionKind::Udt, 100.0, 10, 0.0, 30, 15);
    let st = s.client().stats();
    assert!(u >= 0.7, "udt on a clean 100 Mbit/s 20 ms path: {u:.3}; {st:?}");
    // the pacing rate came from the receiver's measured rate and the
    // packet-pair capacity, both reported in ACKs
    assert!(st.peer_receive_rate > 0 && st.peer_bandwidth > 0);
}

#[test]
fn ferry_settles_at_a_shallow_bottleneck_without_persistent_drops() {
    // Clean path with a shallow queue (30 packets, a policer-like
    // bottleneck): after start-up the controller runs near the bottleneck
    // rate and its probes cost only a few drops.
    let c = path_config(CongestionKind::Ferry { initial_rate: None, max_rate: None }, 50.0 * MBIT, 40);
    let up = LinkConfig::new(40).rate_mbit(50.0).queue(30 * 1500);
    let mut s = Sim::upload(c.clone(), c, up, LinkConfig::new(40), u64::MAX / 2, 1, 5);
    s.sample_every = Duration::from_millis(100);
    let t0 = s.now;
    s.run_until(Duration::from_secs(10), |_| false);
    let (sent0, drops0) = (s.up.sent, s.up.dropped_queue);
    s.run_until(Duration::from_secs(20), |_| false);
    let g = s.goodput_between(t0 + Duration::from_secs(10), s.now) / (50.0 * MBIT * 1456.0 / 1500.0);
    let drop_share = (s.up.dropped_queue - drops0) as f64 / (s.up.sent - sent0) as f64;
    assert!(g >= 0.8, "utilisation {g:.3}");
    assert!(drop_share < 0.03, "queue drops in steady state {drop_share:.4}");
}

#[test]
fn ferry_with_a_probed_rate_is_at_line_rate_in_the_first_round_trips() {
    // A 256 MiB file at 80 ms: started at the probed rate, the first
    // second already runs near the link; ramping up from nothing does not.
    let rate = 200.0 * MBIT;
    let run = |kind| {
        let c = path_config(kind, rate, 80);
        let up = LinkConfig::new(80).rate_mbit(200.0);
        let mut s = Sim::upload(c.clone(), c, up, LinkConfig::new(80), u64::MAX / 2, 3, 3);
        s.sample_every = Duration::from_millis(50);
        s.run_until(Duration::from_millis(1300), |_| false);
        // goodput over the first second after the first byte arrived
        let first = s.first_byte_at.expect("data arrived");
        s.goodput_between(first, first + Duration::from_millis(1000)) / rate
    };
    let probed = run(CongestionKind::Ferry { initial_rate: Some(rate), max_rate: None });
    let cold = run(CongestionKind::Ferry { initial_rate: None, max_rate: None });
    assert!(probed >= 0.85, "probed start: {probed:.3}");
    assert!(probed > cold, "probed {probed:.3} vs cold {cold:.3}");
}

#[test]
fn max_rate_caps_the_default() {
    let cap = 5.0 * MBIT;
    let (u, s) = utilisation(CongestionKind::Ferry { initial_rate: None, max_rate: Some(cap) }, 100.0, 10, 0.0, 10, 3);
    let mbit = u * 100.0;
    assert!(mbit <= 5.2, "capped at 5 Mbit/s: {mbit:.2}");
    assert!(mbit >= 4.0, "{mbit:.2} ({:?})", s.client().stats());
}

#[test]
fn blast_holds_its_rate_whatever_the_loss() {
    // 80 Mbit/s over a 100 Mbit/s link with 5 % loss: blast neither backs
    // off nor speeds up; goodput ≈ 80 Mbit/s minus the retransmissions.
    let (u, s) = utilisation(CongestionKind::Blast { rate: 80.0 * MBIT }, 100.0, 20, 0.05, 10, 3);
    let st = s.client().stats();
    assert!((st.pacing_rate - 80.0 * MBIT).abs() < 1.0);
    assert!(u > 0.65 && u < 0.82, "{u:.3}");
}

#[test]
fn the_controller_interface_sees_rate_and_rtt_samples() {
    // min RTT converges to the path's (plus at most the 10 ms ACK delay)
    let c = path_config(CongestionKind::Ferry { initial_rate: None, max_rate: None }, 100.0 * MBIT, 30);
    let up = LinkConfig::new(30).rate_mbit(100.0);
    let mut s = Sim::upload(c.clone(), c, up, LinkConfig::new(30), u64::MAX / 2, 3, 3);
    s.run_until(Duration::from_secs(5), |_| false);
    let st = s.client().stats();
    assert!(st.rtt >= Duration::from_millis(60) && st.rtt < Duration::from_millis(200), "{st:?}");
    let _ = Time::ZERO;
    let _: Option<&FerryRate> = None;
}

/// Prints the controller's state every half second (for tuning; run with
/// `--ignored --nocapture`).
#[test]
#[ignore = "diagnostic trace, asserts nothing"]
fn trace_ferry_long_path() {
    let kind = CongestionKind::Ferry { initial_rate: None, max_rate: None };
    let c = path_config(kind, 200.0 * MBIT, 80);
    let up = LinkConfig::new(80).rate_mbit(200.0).loss(0.01);
    let mut s = Sim::upload(c.clone(), c, up, LinkConfig::new(80), u64::MAX / 2, 12345, 99);
    for i in 0..40 {
        s.run_until(Duration::from_millis(500), |_| false);
        let st = s.client().stats();
        println!(
            "{:5.1}s read {:7.1} MB retx {} qdrop {} fw {} | {}",
            i as f64 * 0.5,
            s.server.read as f64 / 1e6,
            st.retransmitted,
            s.up.dropped_queue,
            st.flow_window,
            s.client().congestion().describe()
        );
    }
}

/// The expectation the ferry-wan benchmark is compared with: simulated
/// 150 Mbit/s, 80 ms one way, 0/1/5 % loss, 20 s per sender as
/// `bench/udt-wan.sh` runs them (run with `--ignored --nocapture`).
#[test]
#[ignore = "prints the simulated counterpart of bench/udt-wan.sh, asserts nothing"]
fn expectation_for_the_wan_bench() {
    let rate = 150.0 * MBIT;
    for loss in [0.0, 0.01, 0.05] {
        for (name, kind) in [
            ("ferry cold", CongestionKind::Ferry { initial_rate: None, max_rate: None }),
            ("ferry at rate", CongestionKind::Ferry { initial_rate: Some(rate), max_rate: None }),
            ("udt", CongestionKind::Udt),
        ] {
            let c = Config { mss: 9000, ..path_config(kind, rate, 80) };
            let up = LinkConfig::new(80).rate_mbit(150.0).loss(loss).queue((rate * 0.2) as usize + 262_144);
            let down = LinkConfig::new(80).loss(loss);
            let mut s = Sim::upload(c.clone(), c, up, down, u64::MAX / 2, 12345, 99);
            s.sample_every = Duration::from_millis(100);
            let t0 = s.now;
            s.run_until(Duration::from_secs(20), |_| false);
            let g = s.goodput_between(t0, s.now);
            let st = s.client().stats();
            println!(
                "loss {:4.1}% {name:14} {:6.1} Mbit/s {:.2} of link  retx {} qdrop {} | {}",
                loss * 100.0,
                g * 8.0 / 1e6,
                g / rate,
                st.retransmitted,
                s.up.dropped_queue,
                s.client().congestion().describe()
            );
        }
    }
}

/// Cold start under random loss (run with `--ignored --nocapture`):
/// 150 Mbit/s at 80 ms one way with MSS 9000 as the ferry-wan bench, and
/// 200 Mbit/s with MSS 1500, at 1 and 5 % loss, four seeds each; goodput
/// from forty round trips (6.4 s) to 16 s as a share of the link's payload
/// capacity, each seed and the mean. The figures in docs/udt.md
/// ("Cold start") come from here. `SEEDS=a,b,…` runs other seeds,
/// `MSS=1500` or `MSS=9000` one of the two paths.
#[test]
#[ignore = "prints cold-start figures, asserts nothing"]
fn cold_start_trace() {
    // `SEEDS=a,b,…` for other seeds, `MSS=1500` (or 9000) for one path
    let seeds: Vec<u64> = std::env::var("SEEDS")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.parse().ok()).collect())
        .unwrap_or_else(|| vec![99, 7, 31, 1234]);
    let only_mss: Option<u32> = std::env::var("MSS").ok().and_then(|v| v.parse().ok());
    for (mbit, mss) in [(150.0, 9000u32), (200.0, 1500)] {
        if only_mss.is_some_and(|m| m != mss) {
            continue;
        }
        for loss in [0.01, 0.05] {
            let rate = mbit * MBIT;
            let kind = CongestionKind::Ferry { initial_rate: None, max_rate: None };
            let mut all = Vec::new();
            let mut last = String::new();
            for &seed in &seeds {
                let c = Config { mss, ..path_config(kind, rate, 80) };
                let up = LinkConfig::new(80).rate_mbit(mbit).loss(loss).queue((rate * 0.2) as usize + 262_144);
                let down = LinkConfig::new(80).loss(loss);
                let mut s = Sim::upload(c.clone(), c, up, down, u64::MAX / 2, 12345 + seed as u32, seed);
                s.sample_every = Duration::from_millis(100);
                let t0 = s.now;
                s.run_until(Duration::from_secs(16), |_| false);
                let capacity = rate * (f64::from(mss) - 44.0) / f64::from(mss);
                all.push(s.goodput_between(t0 + Duration::from_millis(6400), s.now) / capacity);
                last = s.client().congestion().describe();
            }
            let mean = all.iter().sum::<f64>() / all.len() as f64;
            let each: Vec<String> = all.iter().map(|g| format!("{g:.2}")).collect();
            println!(
                "{mbit} Mbit/s mss {mss} loss {:.0}%: from 40 RTTs mean {mean:.3} ({})",
                loss * 100.0,
                each.join(" ")
            );
            println!("    {last}");
        }
    }
}

/// Cold start, 200 Mbit/s, 80 ms one way, 5 % loss, the seed whose run
/// left start-up at round 3 on an RTT that looked queued (0.16 MB/s, 1 %
/// of the link, for the rest of the run): start-up now leaves on a queue
/// only once the estimate stopped growing. Set `TRACE=1` for the trace.
#[test]
fn cold_start_at_five_percent_loss_does_not_strand_at_an_early_queue_signal() {
    let seed: u64 = std::env::var("SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1234);
    let (mbit, mss, loss) = (200.0, 1500u32, 0.05);
    let rate = mbit * MBIT;
    let kind = CongestionKind::Ferry { initial_rate: None, max_rate: None };
    let c = Config { mss, ..path_config(kind, rate, 80) };
    let up = LinkConfig::new(80).rate_mbit(mbit).loss(loss).queue((rate * 0.2) as usize + 262_144);
    let down = LinkConfig::new(80).loss(loss);
    let mut s = Sim::upload(c.clone(), c, up, down, u64::MAX / 2, 12345 + seed as u32, seed);
    s.sample_every = Duration::from_millis(100);
    let t0 = s.now;
    for k in 1..=40u64 {
        s.run_until(Duration::from_millis(400), |_| false);
        let g = s.goodput_between(t0 + Duration::from_millis(400 * (k - 1)), s.now) / rate;
        let st = s.client().stats();
        if std::env::var("TRACE").is_err() {
            continue;
        }
        println!(
            "{:5.1}s g {g:.2} retx {} fw {} lost {}/{} qdrop {} | {}",
            k as f64 * 0.4,
            st.retransmitted,
            st.flow_window,
            st.lost_reported,
            st.lost_detected,
            s.up.dropped_queue,
            s.client().congestion().describe()
        );
    }
    let g = s.goodput_between(t0 + Duration::from_millis(6400), s.now) / rate;
    assert!(g >= 0.1, "cold, 5 % loss, seed {seed}: {g:.3} of the link; {}", s.client().congestion().describe());
}

/// Cold start at 5 % loss with 1 500-byte packets (what `ferry cp` sends
/// on benchmark 2's path): start-up's window must follow the rate it
/// paces at, not its estimate, or the oldest hole's wait (3–4 round trips)
/// keeps start-up's samples at the window's rate and it leaves on that
/// plateau. Seeds 7 and 31 gave 0.15 and 0.02 of the link from forty
/// round trips on; now 0.51 and 0.47.
#[test]
fn cold_start_at_five_percent_loss_is_not_held_by_start_ups_window() {
    let (mbit, mss, loss) = (200.0, 1500u32, 0.05);
    let rate = mbit * MBIT;
    let kind = CongestionKind::Ferry { initial_rate: None, max_rate: None };
    for seed in [7u64, 31] {
        let c = Config { mss, ..path_config(kind, rate, 80) };
        let up = LinkConfig::new(80).rate_mbit(mbit).loss(loss).queue((rate * 0.2) as usize + 262_144);
        let down = LinkConfig::new(80).loss(loss);
        let mut s = Sim::upload(c.clone(), c, up, down, u64::MAX / 2, 12345 + seed as u32, seed);
        s.sample_every = Duration::from_millis(100);
        let t0 = s.now;
        s.run_until(Duration::from_secs(16), |_| false);
        let capacity = rate * (f64::from(mss) - 44.0) / f64::from(mss);
        let g = s.goodput_between(t0 + Duration::from_millis(6400), s.now) / capacity;
        assert!(g >= 0.3, "cold, 5 % loss, seed {seed}: {g:.3} of the link; {}", s.client().congestion().describe());
    }
}

/// A blast sender that has been running, then is polled `late` after its
/// pacing clock: how many data packets it releases at that instant.
fn burst_after_late_wakeup(mbit: f64, late: Duration) -> usize {
    let c = path_config(CongestionKind::Blast { rate: mbit * MBIT }, mbit * MBIT, 20);
    let up = LinkConfig::new(20).rate_mbit(1000.0);
    let down = LinkConfig::new(20);
    let mut s = Sim::upload(c.clone(), c, up, down, u64::MAX / 2, 12345, 7);
    s.run_until(Duration::from_millis(500), |_| false);
    let now = s.now + late;
    let conn = s.client.conn.as_mut().expect("connected");
    let mut buf = Vec::new();
    let mut data = 0;
    while let Some(t) = conn.poll_transmit(now, &mut buf) {
        data += usize::from(t.data);
    }
    data
}

#[test]
fn a_late_wakeup_sends_at_most_a_quarter_millisecond_of_the_rate() {
    // 100 Mbit/s: 1500-byte packets every 120 µs. Woken 5 ms late, the old
    // 1 ms allowance let 9 packets go back to back (a 4-packet policer
    // keeps 4); 250 µs of the rate is 2-3.
    let n = burst_after_late_wakeup(100.0, Duration::from_millis(5));
    assert!((1..=3).contains(&n), "{n} packets at once at 100 Mbit/s");
    // 10 Mbit/s: one packet every 1.2 ms; at most two at once.
    let n = burst_after_late_wakeup(10.0, Duration::from_millis(5));
    assert!((1..=2).contains(&n), "{n} packets at once at 10 Mbit/s");
    // 800 Mbit/s keeps batches for GSO: 250 µs is ~17 packets.
    let n = burst_after_late_wakeup(800.0, Duration::from_millis(5));
    assert!((10..=18).contains(&n), "{n} packets at once at 800 Mbit/s");
}

#[test]
fn blast_never_sends_faster_than_its_rate_on_a_lossy_link() {
    // Retransmissions go through the same pacer as new data: over 10 s at
    // 40 Mbit/s with 5 % loss each way, packets sent (new + retransmitted)
    // stay within the rate plus a few bursts.
    let rate = 40.0 * MBIT;
    let c = path_config(CongestionKind::Blast { rate }, rate, 20);
    let up = LinkConfig::new(20).rate_mbit(100.0).loss(0.05);
    let down = LinkConfig::new(20).loss(0.05);
    let mut s = Sim::upload(c.clone(), c, up, down, u64::MAX / 2, 12345, 11);
    let start = s.now;
    s.run_until(Duration::from_secs(10), |_| false);
    let secs = s.now.saturating_since(start).as_secs_f64();
    let st = s.client().stats();
    let allowed = rate * secs / 1500.0;
    assert!(st.retransmitted > 1000, "{st:?}");
    assert!((st.packets_sent as f64) < allowed * 1.02 + 10.0, "{} sent, {allowed:.0} allowed", st.packets_sent);
    assert!((st.packets_sent as f64) > allowed * 0.9, "{} sent, {allowed:.0} allowed", st.packets_sent);
}

#[test]
#[ignore = "a trace for reading, not a check"]
fn trace_far_policed_path() {
    for kind in [
        CongestionKind::Ferry { initial_rate: None, max_rate: None },
        CongestionKind::Udt,
        CongestionKind::Ferry { initial_rate: Some(0.5 * 10.0 * MBIT), max_rate: None },
    ] {
        let c = Config { congestion: kind, ..Config::default() };
        // the bench's far path: random loss each way (TABLE3_LOSS's 3.5 %
        // since session 10), `LOSS=PCT` overrides
        let loss = std::env::var("LOSS").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(3.5) / 100.0;
        let up = LinkConfig::new(130).rate_mbit(10.0).queue(FAR_QUEUE_PACKETS * 1500).loss(loss);
        // `SEED=N` (5 by default)
        let seed = std::env::var("SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
        let mut s = Sim::upload(c.clone(), c, up, LinkConfig::new(130).loss(loss), u64::MAX / 2, 1, seed);
        s.sample_every = Duration::from_millis(1000);
        let t0 = s.now;
        for i in 1..=25u64 {
            let (sent, drops) = (s.up.sent, s.up.dropped_queue);
            s.run_until(Duration::from_secs(1), |_| false);
            if std::env::var("TRACE").is_ok() {
                let st = s.client().stats();
                println!(
                    "  {i}s sent {} drops {} retx {} {}",
                    s.up.sent - sent,
                    s.up.dropped_queue - drops,
                    st.retransmitted,
                    s.client().congestion().describe()
                );
            }
        }
        let g = s.goodput_between(t0, s.now) * 8.0 / 1e6;
        let st = s.client().stats();
        println!(
            "{kind:?}: {g:.2} Mbit/s, sent {} drops {} retx {} rate {:.0} cwnd {}",
            s.up.sent,
            s.up.dropped_queue,
            st.retransmitted,
            st.pacing_rate * 8.0 / 1e6,
            st.cwnd_packets
        );
        let mut last = 0;
        for (t, b) in &s.samples {
            print!("{:.1}:{:.2} ", t.saturating_since(t0).as_secs_f64(), (b - last) as f64 * 8.0 / 1e6);
            last = *b;
        }
        println!();
    }
}

#[test]
fn ferry_cold_start_leaves_start_up_at_a_shallow_policer_without_a_loss_storm() {
    // bench udt-table3 `far-client`: 10 Mbit/s, 260 ms, a policer's queue.
    // Start-up at 2.9× the link loses two thirds of what it sends, and
    // with the cumulative ACK stuck behind the holes its round did not end
    // for ten seconds (5.4 Mbit/s, 4 809 queue drops in 25 s).
    let c = Config { congestion: CongestionKind::Ferry { initial_rate: None, max_rate: None }, ..Config::default() };
    let up = LinkConfig::new(130).rate_mbit(10.0).queue(FAR_QUEUE_PACKETS * 1500);
    let mut s = Sim::upload(c.clone(), c, up, LinkConfig::new(130), u64::MAX / 2, 1, 5);
    s.sample_every = Duration::from_millis(1000);
    let t0 = s.now;
    s.run_until(Duration::from_secs(25), |_| false);
    let mbit = s.goodput_between(t0, s.now) * 8.0 / 1e6;
    assert!(mbit >= 7.0, "{mbit:.2} Mbit/s in 25 s");
    assert!(s.up.dropped_queue < 1500, "{} queue drops", s.up.dropped_queue);
}

/// The far path with random loss as the bench runs it (10 Mbit/s, 260 ms,
/// a policer's few-packet queue, loss each way): 25 s cold, goodput Mbit/s.
fn far_policed_cold(loss: f64, seed: u64) -> f64 {
    far_policed_cold_for(loss, seed, 25)
}

fn far_policed_cold_for(loss: f64, seed: u64, secs: u64) -> f64 {
    let c = Config { congestion: CongestionKind::Ferry { initial_rate: None, max_rate: None }, ..Config::default() };
    let up = LinkConfig::new(130).rate_mbit(10.0).queue(FAR_QUEUE_PACKETS * 1500).loss(loss);
    let mut s = Sim::upload(c.clone(), c, up, LinkConfig::new(130).loss(loss), u64::MAX / 2, 1, seed);
    let t0 = s.now;
    s.run_until(Duration::from_secs(secs), |_| false);
    s.goodput_between(t0, s.now) * 8.0 / 1e6
}

/// The far path as the bench runs it (3.5 % each way), cold, over twelve
/// seeds (`SEEDS=a,b,…`), `FAR_SECS` long (25 by default): each seed's
/// goodput and the mean, Mbit/s of the 10 Mbit/s policer.
#[test]
#[ignore = "a trace for reading, not a check"]
fn trace_far_seeds() {
    let secs = std::env::var("FAR_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(25);
    let seeds: Vec<u64> = std::env::var("SEEDS")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.parse().ok()).collect())
        .unwrap_or_else(|| (1..=12).collect());
    let all: Vec<f64> = seeds.iter().map(|&seed| far_policed_cold_for(0.035, seed, secs)).collect();
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    let text: Vec<String> = all.iter().map(|g| format!("{g:.2}")).collect();
    println!("far, 3.5 %, {secs} s, seeds {seeds:?}: {} (mean {mean:.2})", text.join(" "));
}

#[test]
fn a_start_up_that_a_shallow_policer_ends_keeps_what_the_policer_passed() {
    // Session 10: on ferry-wan's far path (1.5 % loss) start-up left on the
    // policer's losses at 0.59 MB/s of 1.21, its estimate a round behind,
    // and the 1.25 probes took 30 s to climb to the link. Simulated, seeds
    // 5, 7, 31 at 1.5 % then 3 %: before 6.04 5.33 4.90 5.39 5.52 4.21
    // (mean 5.23); taking what the policer passed, capped by the packet
    // pairs, 6.61 7.62 7.40 7.34 7.21 6.52 (mean 7.12).
    let mut all = Vec::new();
    for loss in [0.015, 0.03] {
        for seed in [5, 7, 31] {
            let g = far_policed_cold(loss, seed);
            println!("loss {loss} seed {seed}: {g:.2} Mbit/s");
            all.push(g);
        }
    }
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    assert!(mean >= 6.5, "{all:?}: mean {mean:.2} Mbit/s in 25 s");
}

/// Benchmark 2's lossy rows as `ferry cp` runs them: 150 Mbit/s, 80 ms one
/// way, MSS 1500 (Ferry's UDT at MTU 9000), the driver's default buffers
/// (no `for_path`: the client gives none), started at the link rate, loss
/// both ways, 30 s. Prints the per-second trace with `TRACE=1`
/// (`--run-ignored ignored-only --no-capture`).
#[test]
#[ignore = "a trace for reading, not a check"]
fn trace_bench2_lossy_rows() {
    for loss in [0.01, 0.05] {
        let (u, _) = bench2_row(loss, 99, std::env::var("TRACE").is_ok());
        println!("loss {:.0}%: {u:.3} of the link from 2 s to 30 s", loss * 100.0);
    }
}

/// Benchmark 2's cold row (80 ms, 1 %, MSS 1500, the driver's buffers),
/// traced every 250 ms (`TRACE_MS=N`) for the first 8 s with `TRACE=1`;
/// `SEEDS=a,b`.
/// Prints each seed's goodput from 0 and from 2 s to 30 s.
#[test]
#[ignore = "a trace for reading, not a check"]
fn trace_bench2_cold_row() {
    let loss = std::env::var("LOSS").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(1.0) / 100.0;
    let seeds: Vec<u64> = std::env::var("SEEDS")
        .map(|v| v.split(',').map(|x| x.parse().unwrap()).collect())
        .unwrap_or(vec![99, 7, 31, 1234]);
    let mut all = Vec::new();
    for seed in seeds {
        let trace_ms = std::env::var("TRACE_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(250);
        let (u, s) = bench2_row_from(None, loss, seed, std::env::var("TRACE").is_ok(), trace_ms);
        let capacity = 150.0 * MBIT * 1456.0 / 1500.0;
        let from0 = s.goodput_between(Time::ZERO, s.now) / capacity;
        println!("seed {seed}: cold {from0:.3} of the link from 0 s, {u:.3} from 2 s; qdrop {}", s.up.dropped_queue);
        all.push(from0);
    }
    println!("mean from 0 s {:.3}", all.iter().sum::<f64>() / all.len() as f64);
}

/// Benchmark 2's cold row (150 Mbit/s, 80 ms one way, 1 % each way,
/// ferry-wan's 200 ms + 256 KiB queue, MSS 1500), the seed whose start-up
/// overflowed the queue in session 10's build: start-up paced at 2.9 times
/// an estimate a round behind until the losses ended it, 5 878 queue drops,
/// an EXP timeout, then 4.5 s of drain at a third of the rate (the ACK point
/// stood behind the holes, so "in flight" never fell to a BDP): 0.769 of
/// the link over 30 s. Start-up now leaves on the smoothed RTT's rise
/// before the queue is full, and drain ends when that RTT is back.
#[test]
fn a_cold_start_leaves_start_up_before_the_deep_queue_overflows() {
    let (u, s) = bench2_row_from(None, 0.01, 7, false, 1000);
    let from0 = s.goodput_between(Time::ZERO, s.now) / (150.0 * MBIT * 1456.0 / 1500.0);
    let d = s.client().congestion().describe();
    assert!(s.up.dropped_queue < 500, "{} queue drops; {d}", s.up.dropped_queue);
    assert!(from0 >= 0.85, "{from0:.3} of the link over 30 s ({u:.3} from 2 s); {d}");
}

/// Benchmark 2's cold row, the two seeds whose start-up still overflowed
/// ferry-wan's queue after session 11's delay exit (99: 1 050 queue drops,
/// 0.853 of the link over 30 s; 31: 2 101, 0.866): UDT's smoothed RTT,
/// averaged 7/8 old at both ends, rose a round trip after the queue did,
/// and start-up's rounds lasted two round trips behind the holes, so its
/// estimate trailed what it sent. Start-up now reads the queue and its
/// delivery rate from the receiver's prompt reports (a NAK as the packet
/// after a fresh gap arrives; an ACK that passed no hole), and its window
/// is counted from the newest packet known to have arrived.
#[test]
fn a_cold_start_at_one_percent_loss_neither_overflows_the_queue_nor_trails_the_link() {
    for seed in [99, 31] {
        let (u, s) = bench2_row_from(None, 0.01, seed, false, 1000);
        let from0 = s.goodput_between(Time::ZERO, s.now) / (150.0 * MBIT * 1456.0 / 1500.0);
        let d = s.client().congestion().describe();
        assert!(s.up.dropped_queue < 200, "seed {seed}: {} queue drops; {d}", s.up.dropped_queue);
        assert!(from0 >= 0.88, "seed {seed}: {from0:.3} of the link over 30 s ({u:.3} from 2 s); {d}");
    }
}

/// The far path's policer queue, packets: `TABLE3_FAR_QUEUE` in
/// bench/src/udt_bench.rs (this crate cannot see it), 3 since session 11.
const FAR_QUEUE_PACKETS: usize = 3;

/// `ferry_io::udt::DEFAULT_BUFFER_PACKETS` (this crate cannot see it).
const DRIVER_BUFFER_PACKETS: u32 = 16_384;

/// Benchmark 2 at 5 % loss each way, started at the link rate: goodput
/// is bounded by (1 − p) of the link, not by the windows. Before, the
/// ACK point stood 4–5 round trips behind the newest packet (holes whose
/// retransmission was lost again) and the in-flight cap of four BDPs, or
/// libudt's 8 192-packet buffers, stopped the sender in every round: 0.71
/// of the link (0.75 with only the window fix, 0.76 with only the
/// buffers). Now 0.93.
#[test]
fn five_percent_loss_at_the_link_rate_is_not_held_by_the_window() {
    for (loss, want) in [(0.05, 0.85), (0.01, 0.9)] {
        let (u, s) = bench2_row(loss, 99, false);
        let st = s.client().stats();
        assert!(
            u >= want,
            "150 Mbit/s, 80 ms, {:.0} % loss, at the link rate: {u:.3} of the link; {st:?} {}",
            loss * 100.0,
            s.client().congestion().describe()
        );
    }
}

fn bench2_row(loss: f64, seed: u64, trace: bool) -> (f64, Sim) {
    bench2_row_from(Some(150.0 * MBIT), loss, seed, trace, 1000)
}

/// `bench2_row` started at `initial` (None: cold), traced every
/// `trace_ms` of the first 8 s (every second after).
fn bench2_row_from(initial: Option<f64>, loss: f64, seed: u64, trace: bool, trace_ms: u64) -> (f64, Sim) {
    let mbit = 150.0;
    let rate = mbit * MBIT;
    let kind = CongestionKind::Ferry { initial_rate: initial, max_rate: None };
    // the driver's buffers when the path gives none
    // (`ferry_io::udt::DEFAULT_BUFFER_PACKETS`); `BUFPKTS=N` overrides
    let n: u32 = std::env::var("BUFPKTS").ok().and_then(|v| v.parse().ok()).unwrap_or(DRIVER_BUFFER_PACKETS);
    let mut c = Config { congestion: kind, ..Config::default() };
    c.recv_buffer_packets = n;
    c.flight_flag_size = c.flight_flag_size.max(n);
    c.send_buffer_bytes = n as usize * 1456;
    let up = LinkConfig::new(80).rate_mbit(mbit).loss(loss).queue((rate * 0.2) as usize + 262_144);
    let down = LinkConfig::new(80).loss(loss);
    let mut s = Sim::upload(c.clone(), c, up, down, u64::MAX / 2, 12345 + seed as u32, seed);
    s.sample_every = Duration::from_millis(100);
    let t0 = s.now;
    let capacity = rate * 1456.0 / 1500.0;
    let mut last = t0;
    let (mut last_sent, mut last_retx, mut last_drops) = (0, 0, 0);
    while s.now < t0 + Duration::from_secs(30) {
        let step = if s.now < t0 + Duration::from_secs(8) { trace_ms } else { 1000 };
        s.run_until(Duration::from_millis(step), |_| false);
        if trace {
            let g = s.goodput_between(last, s.now) / capacity;
            last = s.now;
            let st = s.client().stats();
            let cl = s.client();
            println!(
                "{:5.2}s g {g:.2} sent {} retx {} qdrop {} fw {} exp {} rtt {:?} | {}",
                s.now.saturating_since(t0).as_secs_f64(),
                st.packets_sent - last_sent,
                st.retransmitted - last_retx,
                s.up.dropped_queue - last_drops,
                st.flow_window,
                st.exp_timeouts,
                st.rtt,
                cl.congestion().describe()
            );
            (last_sent, last_retx, last_drops) = (st.packets_sent, st.retransmitted, s.up.dropped_queue);
        }
    }
    let g = s.goodput_between(t0 + Duration::from_secs(2), s.now) / capacity;
    (g, s)
}

/// A Table 3 short path as ferry-wan emulates it (`udt-table3` rtt20):
/// 100 Mbit/s, 10 ms one way, 0.5 % random loss, a queue of 200 ms +
/// 256 KiB; `TICK_US=N` delivers packets only at multiples of N µs (a
/// forwarder or receiver that reads in batches), `RATE=1` starts at the
/// link's payload rate. Returns (goodput share of payload capacity from
/// 1 s to 10 s, mean bottleneck estimate over link rate, queue drops).
fn table3_short_row(tick_us: u64, at_rate: bool, seed: u64, trace: bool) -> (f64, f64, u64) {
    let mbit = 100.0;
    let rate = mbit * MBIT;
    let initial = at_rate.then_some(rate * 1456.0 / 1500.0);
    let c = Config { congestion: CongestionKind::Ferry { initial_rate: initial, max_rate: None }, ..Config::default() };
    let mut up = LinkConfig::new(10).rate_mbit(mbit).loss(0.005).queue((rate * 0.2) as usize + 262_144);
    if tick_us > 0 {
        up = up.tick(Duration::from_micros(tick_us));
    }
    let down = LinkConfig::new(10);
    let mut s = Sim::upload(c.clone(), c, up, down, u64::MAX / 2, 777 + seed as u32, seed);
    s.sample_every = Duration::from_millis(100);
    let t0 = s.now;
    let (mut est, mut n) = (0.0, 0.0);
    for i in 1..=10u64 {
        let drops = s.up.dropped_queue;
        s.run_until(Duration::from_secs(1), |_| false);
        let f = s.client().congestion().describe();
        let st = s.client().stats();
        if i > 1 {
            if let Some(b) =
                f.split("btl_bw ").nth(1).and_then(|x| x.split(' ').next()).and_then(|x| x.parse::<f64>().ok())
            {
                est += b / rate;
                n += 1.0;
            }
        }
        if trace {
            println!(
                "  {i}s drops {} retx {} rtt {:?} peer_rate {} | {f}",
                s.up.dropped_queue - drops,
                st.retransmitted,
                st.rtt,
                st.peer_receive_rate
            );
        }
    }
    let g = s.goodput_between(t0 + Duration::from_secs(1), s.now);
    (g / (rate * 1456.0 / 1500.0), est / n, s.up.dropped_queue)
}

#[test]
#[ignore = "a trace for reading, not a check"]
fn trace_table3_short_path() {
    let trace = std::env::var("TRACE").is_ok();
    for tick in std::env::var("TICKS")
        .map(|v| v.split(',').map(|x| x.parse().unwrap()).collect::<Vec<u64>>())
        .unwrap_or(vec![0, 1000, 4000])
    {
        for at_rate in [false, true] {
            for seed in [3, 5] {
                let (u, e, d) = table3_short_row(tick, at_rate, seed, trace);
                println!("tick {tick} µs at_rate {at_rate} seed {seed}: goodput {u:.3} of payload, estimate {e:.3} of link, {d} queue drops");
            }
        }
    }
}

/// The steady state on a Table 3 short path (100 Mbit/s, 20 ms, 0.5 %):
/// the bottleneck estimate stays at the link, not above it, so the sender
/// does not keep the emulator's 200 ms queue full — also when packets
/// arrive in 4 ms bursts. Before: the estimate at 1.09–1.15 of the link
/// (1.39–1.59 with the bursts; the receiver's speed over 64 arrivals read
/// a burst), goodput 0.92–0.97 of the payload capacity.
#[test]
fn the_estimate_stays_at_the_link_on_a_table3_short_path() {
    for (tick, at_rate) in [(0, false), (4000, true)] {
        let (u, e, drops) = table3_short_row(tick, at_rate, 5, false);
        assert!(
            (0.9..=1.03).contains(&e) && u >= 0.95,
            "tick {tick} µs, at rate {at_rate}: estimate {e:.3} of the link, goodput {u:.3}, {drops} queue drops"
        );
    }
}

/// A loopback-like path (no delay, 800 Mbit/s) whose sender runs only
/// once every `late` (its timers and the ACKs wait for that), as a thread
/// on a host at load 9 on two cores (session 9): the transfer's goodput
/// over its last two of `secs` seconds, bytes/s, and the simulation.
fn late_sender_row(late: Duration, secs: u64) -> (f64, Sim) {
    let link = 800.0 * MBIT;
    let kind = CongestionKind::Ferry { initial_rate: Some(link), max_rate: None };
    let c = path_config(kind, link, 1);
    let up = LinkConfig::new(0).rate_mbit(800.0);
    let mut s = Sim::upload(c.clone(), c, up, LinkConfig::new(0).tick(late), u64::MAX / 2, 5, 17);
    s.sample_every = Duration::from_millis(100);
    s.client_late = late;
    let start = s.now;
    s.run_until(Duration::from_secs(secs), |_| false);
    assert!(!s.server.corrupt);
    let end = start + Duration::from_secs(secs);
    (s.goodput_between(end - Duration::from_secs(2), end), s)
}

#[test]
fn a_sender_that_wakes_late_does_not_read_its_lateness_as_the_path() {
    // The sender runs once every 3 ms: the pacing credit (250 µs of the
    // rate) lets each run send a little more than 250 µs of packets, so
    // the rate actually sent is a fraction of the estimate. Before the fix
    // the delivery samples read that fraction, the estimate followed it
    // every bandwidth window and the shortfall compounded down to one
    // packet per run (here 500 kB/s, goodput 0.47 MB/s; a loaded loopback
    // copy crawled at 35 kB/s). Now sends after a late wake-up are an
    // application-limited bubble (here: estimate 65 MB/s, goodput 20 MB/s).
    let (g, s) = late_sender_row(Duration::from_millis(3), 6);
    let c = s.client();
    assert!(
        c.stats().pacing_rate >= 0.5 * 800.0 * MBIT,
        "pacing {:.0} B/s, goodput {g:.0} B/s: {}",
        c.stats().pacing_rate,
        c.congestion().describe()
    );
    assert!(c.stats().late_sends > 0);
    assert!(g >= 10e6, "goodput {g:.0} B/s: {}", c.congestion().describe());
}

/// Table 3's rtt65 path as ferry-wan emulates it: 100 Mbit/s, 32.5 ms one
/// way, no loss, a queue of 200 ms + 256 KiB, the driver's buffers; a
/// cold 100 MB upload (the bench's file). Returns the seconds from the
/// connection request to the receiver's last byte, and the simulation.
/// With `trace`, the first `trace_secs` every 65 ms: packets sent, queue
/// drops, goodput share, the controller.
fn rtt65_cold_row(seed: u64, trace: bool, trace_secs: f64) -> (f64, Sim) {
    let mbit = 100.0;
    let rate = mbit * MBIT;
    let mut c =
        Config { congestion: CongestionKind::Ferry { initial_rate: None, max_rate: None }, ..Config::default() };
    c.recv_buffer_packets = DRIVER_BUFFER_PACKETS;
    c.flight_flag_size = c.flight_flag_size.max(DRIVER_BUFFER_PACKETS);
    c.send_buffer_bytes = DRIVER_BUFFER_PACKETS as usize * 1456;
    let one_way = Duration::from_micros(32_500);
    let up = LinkConfig { delay: one_way, ..LinkConfig::new(0) }.rate_mbit(mbit).queue((rate * 0.2) as usize + 262_144);
    let down = LinkConfig { delay: one_way, ..LinkConfig::new(0) };
    let mut s = Sim::upload(c.clone(), c, up, down, 100_000_000, 4242 + seed as u32, seed);
    s.sample_every = Duration::from_millis(5);
    let t0 = s.now;
    let capacity = rate * 1456.0 / 1500.0;
    let (mut last, mut last_sent, mut last_drops) = (t0, 0, 0);
    while trace && s.now < t0 + Duration::from_secs_f64(trace_secs) && s.done_at.is_none() {
        s.run_until(Duration::from_millis(65), |s| s.done_at.is_some());
        let g = s.goodput_between(last, s.now) / capacity;
        last = s.now;
        let st = s.client.conn.as_ref().map(|c| c.stats());
        let sent = st.as_ref().map_or(0, |st| st.packets_sent);
        println!(
            "{:6.3}s sent {:4} qdrop {} g {g:.2} | {}",
            s.now.saturating_since(t0).as_secs_f64(),
            sent - last_sent,
            s.up.dropped_queue - last_drops,
            s.client.conn.as_ref().map_or(String::new(), |c| c.congestion().describe())
        );
        (last_sent, last_drops) = (sent, s.up.dropped_queue);
    }
    assert!(s.run_transfer(Duration::from_secs(60)), "seed {seed}: the transfer did not finish");
    (s.done_at.unwrap().saturating_since(t0).as_secs_f64(), s)
}

/// `rtt65_cold_row` for seeds `SEEDS=a,b` (default 1, 2, 3, 4): seconds
/// for the 100 MB and the share of the ideal (the payload at the link's
/// payload rate, with no set-up), `TRACE=1 TRACE_SECS=N` for the first N s.
#[test]
#[ignore = "a trace for reading, not a check"]
fn trace_rtt65_cold_row() {
    let seeds: Vec<u64> =
        std::env::var("SEEDS").map(|v| v.split(',').map(|x| x.parse().unwrap()).collect()).unwrap_or(vec![1, 2, 3, 4]);
    let trace_secs = std::env::var("TRACE_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(1.5);
    let ideal = 100e6 / (100.0 * MBIT * 1456.0 / 1500.0);
    let mut all = Vec::new();
    for seed in seeds {
        let (t, s) = rtt65_cold_row(seed, std::env::var("TRACE").is_ok(), trace_secs);
        println!(
            "seed {seed}: {t:.3} s ({:.2} Mbit/s of payload, {:.3} of ideal {ideal:.3} s), queue drops {}, retx {} | {}",
            100e6 * 8.0 / 1e6 / t,
            ideal / t,
            s.up.dropped_queue,
            s.client().stats().retransmitted,
            s.client().congestion().describe()
        );
        all.push(t);
    }
    println!("mean {:.3} s", all.iter().sum::<f64>() / all.len() as f64);
}

/// Table 3's rtt65 path (100 Mbit/s, 65 ms, no loss), a cold 100 MB row.
/// Session 13: start-up's delay exit was followed by a drain that the
/// smoothed RTT, a round trip behind the queue, ended at its first ACK;
/// start-up's queue stood for seconds, the standing-queue rules halved the
/// window and ran a PROBE_RTT (0.12 s of the link): 8.849 s. A drain that
/// a recent prompt sample showing the queue keeps going: 8.724 s, no
/// PROBE_RTT; starting from 32 packets a round trip rather than ten:
/// 8.612 s (the ideal, the payload at the link's payload rate with no
/// set-up, is 8.242 s).
#[test]
fn a_cold_rtt65_row_drains_start_ups_queue_and_climbs_from_32_packets() {
    let (t, s) = rtt65_cold_row(1, false, 0.0);
    let d = s.client().congestion().describe();
    let probe_rtt: u64 = d.split("probe_rtt ").nth(1).and_then(|x| x.split(' ').next()).unwrap().parse().unwrap();
    assert_eq!(probe_rtt, 0, "{t:.3} s; {d}");
    assert_eq!(s.up.dropped_queue, 0, "{t:.3} s; {d}");
    assert!(t <= 8.66, "{t:.3} s for 100 MB; {d}");
}

/// Session 14: on the far path a congestion round right after start-up's
/// drain judged start-up's overshoot and took its cap on the drain's
/// delivery rate: ferry-wan's cold rows (`udt-traces-s13/far-1`) paced
/// 1.4–2.8 Mbit/s for 2–5 s with an estimate of 7.3–8.9. Checks, over the
/// far seeds, every 50 ms in the first 12 s after start-up, that the pacing
/// rate never falls under half the estimate (the 0.75 phase under a cap of
/// 0.85 is 0.64 of it).
#[test]
fn the_far_paths_cap_after_start_up_is_not_the_drains_rate() {
    let mut worst = Vec::new();
    for (loss, seed) in [(0.015, 5), (0.015, 7), (0.015, 31), (0.03, 5), (0.03, 7), (0.03, 31), (0.035, 5)] {
        let c =
            Config { congestion: CongestionKind::Ferry { initial_rate: None, max_rate: None }, ..Config::default() };
        let up = LinkConfig::new(130).rate_mbit(10.0).queue(FAR_QUEUE_PACKETS * 1500).loss(loss);
        let mut s = Sim::upload(c.clone(), c, up, LinkConfig::new(130).loss(loss), u64::MAX / 2, 1, seed);
        let mut low = f64::MAX;
        let mut at = 0.0;
        for i in 1..=240u64 {
            s.run_until(Duration::from_millis(50), |_| false);
            let d = s.client().congestion().describe();
            if !d.starts_with("ferry ProbeBw") {
                continue;
            }
            let bw = d.split("btl_bw ").nth(1).and_then(|r| r.split(' ').next()).and_then(|v| v.parse::<f64>().ok());
            let rate = s.client().stats().pacing_rate;
            if let Some(bw) = bw.filter(|b| *b > 0.0) {
                if rate / bw < low {
                    low = rate / bw;
                    at = i as f64 * 0.05;
                }
            }
        }
        println!("loss {loss} seed {seed}: lowest pacing ÷ estimate {low:.2} at {at:.2} s");
        worst.push((loss, seed, low, at));
    }
    for (loss, seed, low, at) in &worst {
        assert!(*low >= 0.5, "loss {loss} seed {seed}: pacing {low:.2} of the estimate at {at:.2} s; {worst:?}");
    }
}

/// Session 14: in the probing cycle the far path's estimate stood at
/// 0.68–0.80 of the policer for the whole row: a 1.25 probe lasts one
/// round trip (260 ms) and the cumulative ACK, behind a hole in every
/// round trip at 3.5 % loss each way (its lag 0.7–2 s), smears the probe's
/// deliveries over seconds, so no sample showed them. The prompt reports'
/// delivery samples (start-up's) in the cycle too on paths losing 2 % or
/// more: 100 s cold, seeds 1–4, 7.87 7.33 7.76 7.84 Mbit/s before, 8.77
/// 8.38 8.59 8.82 after.
#[test]
fn the_far_paths_estimate_reaches_the_policer_in_a_100_s_row() {
    let all: Vec<f64> = (1..=4).map(|seed| far_policed_cold_for(0.035, seed, 100)).collect();
    for (i, g) in all.iter().enumerate() {
        assert!(*g >= 8.2, "seed {}: {g:.2} Mbit/s of 10 in 100 s; {all:?}", i + 1);
    }
}
