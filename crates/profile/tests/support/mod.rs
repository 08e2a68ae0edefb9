//! A synthetic profile with every optional field filled, so the rendered
//! report and the serialised JSON exercise every documented field.

#![allow(dead_code)]

use std::collections::BTreeMap;

use ferry_profile::*;

const MIB: f64 = 1024.0 * 1024.0;

fn tcp(t: f64, stream: u64, sender: bool) -> TcpInfo {
    let k = t * 10.0;
    TcpInfo {
        state: "established".into(),
        ca_state: "open".into(),
        retransmits: 0,
        backoff: 0,
        snd_wscale: 7,
        rcv_wscale: 7,
        delivery_rate_app_limited: stream == 3 && (k as u64) % 2 == 0,
        rto_us: 231_000,
        ato_us: 40_000,
        snd_mss: 1448,
        rcv_mss: 1448,
        unacked: 120,
        sacked: 0,
        lost: 0,
        retrans: 0,
        last_data_sent_ms: 0,
        last_data_recv_ms: 12,
        last_ack_recv_ms: 0,
        pmtu: 1500,
        rcv_ssthresh: 64_000,
        rtt_us: (30_000.0 + 2_000.0 * (k / 7.0 + stream as f64).sin()) as u32,
        rttvar_us: 500,
        snd_ssthresh: Some(400 + 20 * stream as u32),
        snd_cwnd: (100.0 + 300.0 * (1.0 - (-k / 8.0).exp()) + 20.0 * stream as f64) as u32,
        advmss: 1448,
        reordering: 3,
        rcv_rtt_us: 30_500,
        rcv_space: 14_480,
        total_retrans: (k / 10.0) as u32,
        pacing_rate: 120_000_000,
        max_pacing_rate: None,
        bytes_acked: if sender { (k * 12.0 * MIB) as u64 } else { 1 },
        bytes_received: if sender { 0 } else { (k * 12.0 * MIB) as u64 },
        segs_out: (k * 8000.0) as u32,
        segs_in: (k * 4000.0) as u32,
        // The sender waits for its disk: nothing queued, busy half the time.
        notsent_bytes: 0,
        min_rtt_us: 29_800,
        data_segs_in: 0,
        data_segs_out: (k * 8000.0) as u32,
        delivery_rate: 118_000_000,
        busy_time_us: (t * 0.5e6) as u64,
        rwnd_limited_us: if stream == 2 { (t * 0.3e6) as u64 } else { 0 },
        sndbuf_limited_us: if stream == 4 { (t * 0.2e6) as u64 } else { 0 },
        delivered: (k * 8000.0) as u32,
        delivered_ce: 0,
        bytes_sent: (k * 12.0 * MIB) as u64,
        bytes_retrans: 0,
        dsack_dups: 0,
        reord_seen: 0,
        rcv_ooopack: 0,
        snd_wnd: 6 << 20,
        rcv_wnd: Some(6 << 20),
        rehash: Some(0),
        total_rto: Some(0),
        total_rto_recoveries: Some(0),
        total_rto_time_ms: Some(0),
        send_buffer_bytes: Some(16 << 20),
        receive_buffer_bytes: Some(12 << 20),
    }
}

fn host(side: Side, start_unix_ms: u64, with_perf: bool) -> HostProfile {
    let n = 60;
    let dt = 0.5;
    let samples = (1..=n)
        .map(|i| {
            let t = i as f64 * dt;
            let active = (4.0..26.0).contains(&t);
            let a = if active { 1.0 } else { 0.05 };
            let wobble = (t * 0.7).sin().abs();
            let core = |c: u32, busy: f64| CoreShare {
                core: c,
                share: CpuShare {
                    user: busy * 0.3,
                    nice: 0.0,
                    system: busy * 0.45,
                    iowait: if side == Side::Server { 6.0 * a } else { 1.0 },
                    irq: busy * 0.02,
                    softirq: busy * 0.23,
                    steal: 0.0,
                    idle: 100.0 - busy - if side == Side::Server { 6.0 * a } else { 1.0 },
                },
            };
            let c0 = core(0, (92.0 * a + 3.0 * wobble).min(93.0));
            let c1 = core(1, 40.0 * a + 2.0);
            let all = CpuShare {
                user: (c0.share.user + c1.share.user) / 2.0,
                nice: 0.0,
                system: (c0.share.system + c1.share.system) / 2.0,
                iowait: (c0.share.iowait + c1.share.iowait) / 2.0,
                irq: (c0.share.irq + c1.share.irq) / 2.0,
                softirq: (c0.share.softirq + c1.share.softirq) / 2.0,
                steal: 0.0,
                idle: (c0.share.idle + c1.share.idle) / 2.0,
            };
            let rate = a * (110.0 + 8.0 * wobble) * MIB;
            SystemSample {
                t,
                dt,
                cpu: all,
                cores: vec![c0, c1],
                load: LoadAvg { one: 0.3 + 1.5 * a, five: 0.8, fifteen: 0.6, runnable: 2, threads: 412 },
                context_switches_per_s: 4000.0 + 20_000.0 * a,
                interrupts_per_s: 3000.0 + 15_000.0 * a,
                forks_per_s: 0.5,
                procs_running: 2,
                procs_blocked: 0,
                disks: vec![DiskRate {
                    name: "vda".into(),
                    reads_per_s: if side == Side::Server { 900.0 * a } else { 0.0 },
                    writes_per_s: if side == Side::Client { 450.0 * a } else { 2.0 },
                    read_bytes_per_s: if side == Side::Server { rate } else { 0.0 },
                    write_bytes_per_s: if side == Side::Client { rate } else { 8192.0 },
                    util_percent: 70.0 * a,
                    stacked: false,
                }],
                disk_total: DiskTotal {
                    transfers_per_s: 900.0 * a + 2.0,
                    reads_per_s: 900.0 * a,
                    writes_per_s: 2.0,
                    read_bytes_per_s: if side == Side::Server { rate } else { 0.0 },
                    write_bytes_per_s: if side == Side::Client { rate } else { 8192.0 },
                },
                nets: vec![
                    NetRate {
                        name: "eth0".into(),
                        rx_bytes_per_s: if side == Side::Client { rate } else { rate / 50.0 },
                        tx_bytes_per_s: if side == Side::Server { rate } else { rate / 50.0 },
                        rx_packets_per_s: if side == Side::Client { rate / 1448.0 } else { rate / 2896.0 },
                        tx_packets_per_s: if side == Side::Server { rate / 1448.0 } else { rate / 2896.0 },
                        rx_drops_per_s: 0.0,
                        tx_drops_per_s: 0.0,
                        rx_errors_per_s: 0.0,
                        tx_errors_per_s: 0.0,
                    },
                    NetRate {
                        name: "lo".into(),
                        rx_bytes_per_s: 120.0,
                        tx_bytes_per_s: 120.0,
                        rx_packets_per_s: 2.0,
                        tx_packets_per_s: 2.0,
                        ..Default::default()
                    },
                ],
                tcp: TcpRates {
                    in_segs_per_s: rate / 2896.0,
                    out_segs_per_s: rate / 1448.0,
                    retrans_segs_per_s: if (10.0..12.0).contains(&t) { 40.0 } else { 0.0 },
                    in_errs_per_s: 0.0,
                    out_rsts_per_s: 0.0,
                    active_opens_per_s: 0.0,
                    passive_opens_per_s: 0.0,
                    established: 6,
                    timeouts_per_s: 0.0,
                    fast_retrans_per_s: 0.0,
                    lost_retransmit_per_s: 0.0,
                    syn_retrans_per_s: 0.0,
                    ofo_queue_per_s: 0.0,
                    backlog_drops_per_s: 0.0,
                    rcvq_drops_per_s: 0.0,
                    listen_drops_per_s: 0.0,
                },
                memory: Memory {
                    total_bytes: 8 << 30,
                    available_bytes: (6u64 << 30) - i * (10 << 20),
                    cached_bytes: (1u64 << 30) + i * (10 << 20),
                    dirty_bytes: if side == Side::Client { 1200 << 20 } else { 1 << 20 },
                    writeback_bytes: if side == Side::Client { 40 << 20 } else { 0 },
                    shmem_bytes: 64 << 20,
                },
                // The server's reader threads wait for its disk; the client
                // writes what arrives into its page cache.
                process: Some(ProcessSample {
                    user_percent: 25.0 * a,
                    system_percent: 60.0 * a,
                    rss_bytes: 48 << 20,
                    threads: 12,
                    run_delay_percent: 3.0 * a,
                    busiest_thread_percent: 45.0 * a,
                    busiest_thread_wait_percent: 2.0 * a,
                    threads_running: 0.6 * a,
                    threads_blocked: if side == Side::Server { 1.6 * a } else { 0.0 },
                    runnable_percent: 50.0 * a,
                    storage_read_bytes_per_s: if side == Side::Server { rate } else { 0.0 },
                    storage_write_bytes_per_s: if side == Side::Client { rate } else { 0.0 },
                    cgroup_throttled_percent: Some(0.0),
                    cgroup_throttled_ms_per_s: Some(0.0),
                }),
            }
        })
        .collect();
    let sender = side == Side::Server;
    let streams = (1..=4u64)
        .map(|id| StreamSeries {
            id,
            label: format!("data {id}"),
            local: Some(format!("192.0.2.{}:{}", if sender { 1 } else { 2 }, 50000 + id)),
            peer: Some(format!("192.0.2.{}:{}", if sender { 2 } else { 1 }, 40000 + id)),
            first_t: 4.0,
            closed_t: Some(26.0),
            samples: (0..=44)
                .map(|j| {
                    let t = 4.0 + j as f64 * 0.5;
                    StreamSample { t, info: tcp(t - 4.0, id, sender) }
                })
                .collect(),
        })
        .collect();
    let perf = with_perf.then(|| {
        parse_report(include_str!("../fixtures/perf-report.txt"), &["ferry".to_string()], 25)
            .expect("the committed fixture parses")
    });
    HostProfile {
        host: HostInfo {
            hostname: format!("{}.example.org", side.label()),
            kernel: "6.18.44".into(),
            os: "Debian GNU/Linux 12 (bookworm)".into(),
            cpu_model: "Example CPU @ 2.0GHz".into(),
            cores: 2,
            mem_total_bytes: 8 << 30,
        },
        start_unix_ms,
        interval_ms: 500,
        duration_s: n as f64 * dt,
        truncated: false,
        process: Some(ProcessInfo {
            pid: 4242,
            command: "ferry".into(),
            cgroup: Some(CgroupLimits {
                cpu_cgroup: Some("/ferry".into()),
                cpu_quota_cores: Some(1.5),
                io_cgroup: Some("/ferry".into()),
                io_limits: vec![IoLimit {
                    device: "vda".into(),
                    read_bytes_per_s: Some(500 << 20),
                    write_bytes_per_s: None,
                }],
            }),
        }),
        samples,
        streams,
        perf: perf.map(|mut p| {
            p.target = "system-wide".into();
            p.duration_s = 30.0;
            p.frequency_hz = 999;
            p
        }),
        perf_error: if with_perf { None } else { Some("perf is not installed (Debian package linux-perf)".into()) },
        overhead: SamplerOverhead { ticks: n, mean_us: 180.0, max_us: 420.0 },
        warnings: vec!["cannot read /proc/net/netstat: example warning".into()],
    }
}

/// A 30-second download at ~115 MiB/s on four streams, with both ends, perf
/// on the server, a comparison and a tuning sweep.
pub fn synthetic_profile() -> Profile {
    let start = 1_760_000_000_000;
    let mut p = Profile::new("ferry profile -p 4 ftp://alice@server.example.org:2811/data/big.nc");
    p.meta.created_unix_ms = start;
    p.meta.settings = TransferSettings {
        source: Some("ftp://alice@server.example.org:2811/data/big.nc".into()),
        destination: Some("/scratch/big.nc".into()),
        reader: Some(Side::Server),
        mode: Some("E".into()),
        transport: Some("tcp".into()),
        parallel_streams: Some(4),
        tcp_buffer_bytes: Some(8 << 20),
        block_size_bytes: Some(1 << 20),
        staging_bytes: Some(32 << 20),
        files: Some(1),
        bytes: Some(2560 << 20),
        extra: BTreeMap::from([("note".to_string(), "synthetic".to_string())]),
    };
    p.client = Some(host(Side::Client, start, true));
    p.server = Some(host(Side::Server, start + 120, true));
    let mut bytes = 0u64;
    p.transfers.push(TransferSeries {
        label: "download big.nc".into(),
        start_unix_ms: start + 4000,
        expected_bytes: Some(2560 << 20),
        reads_file: Some(true),
        writes_file: Some(true),
        samples: (0..=220)
            .map(|i| {
                let t = i as f64 * 0.1;
                if i > 0 {
                    bytes += ((110.0 + 10.0 * (t * 0.9).sin()) * MIB * 0.1) as u64;
                }
                ProgressSample { t, bytes }
            })
            .collect(),
    });
    p.comparison = Some(ThroughputComparison {
        memory_to_memory: Some(212.0 * MIB),
        disk_to_memory: Some(115.0 * MIB),
        memory_to_disk: Some(190.0 * MIB),
        disk_to_disk: Some(112.0 * MIB),
        reader: Some(Side::Server),
    });
    let plan = TunePlan::new(TuneSpace::standard(Some(4 << 20)));
    p.tuning = Some(
        tune(&plan, |c: &TuneConfig| -> Result<f64, String> {
            if c.staging_size == 64 << 20 {
                return Err("staging buffer refused".into());
            }
            let s = c.streams as f64;
            Ok(MIB * (200.0 * (1.0 - (-s / 2.5).exp())) * if c.tcp_buffer.is_some() { 1.05 } else { 1.0 })
        })
        .expect("synthetic sweep runs"),
    );
    p
}
