//! A per-second trace of every UDT connection of this process, for
//! diagnosing a transfer on a real path (docs/udt.md, "Tracing a
//! transfer"): with `FERRY_UDT_TRACE=DIR` in the environment, a thread
//! appends one JSON line per open connection per second to
//! `DIR/udt-trace-<pid>.jsonl` — cumulative counters (the reader takes
//! differences), RTT, pacing rate, windows, what the send buffer and loss
//! lists hold, the socket's buffers and the controller's state. Off
//! (no thread, no cost) unless the variable is set; never on by default.

use super::{Shared, LIVE};
use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Starts the trace thread once, if `FERRY_UDT_TRACE` names a directory.
pub(super) fn ensure_started() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let Some(dir) = std::env::var_os("FERRY_UDT_TRACE").filter(|d| !d.is_empty()) else { return };
        let path = std::path::Path::new(&dir).join(format!("udt-trace-{}.jsonl", std::process::id()));
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&path);
        let Ok(file) = file else { return };
        let _ = std::thread::Builder::new().name("udt-trace".into()).spawn(move || run(file));
    });
}

fn run(mut file: std::fs::File) {
    let started = Instant::now();
    let mut next = started;
    loop {
        next += Duration::from_secs(1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let t = started.elapsed().as_secs_f64();
        let live: Vec<(Arc<Shared>, u32)> = LIVE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(|(s, id)| s.upgrade().map(|s| (s, *id)))
            .collect();
        let mut out = String::new();
        for (shared, id) in live {
            let info = shared.socket_info;
            let st = shared.lock();
            let Some(e) = st.conns.get(&id) else { continue };
            let c = &e.conn;
            let s = c.stats();
            let f = c.footprint();
            let line = serde_json::json!({
                "t": (t * 1000.0).round() / 1000.0,
                "id": id,
                "peer": c.peer_addr().to_string(),
                "state": format!("{:?}", c.state()),
                "bytes_sent": s.bytes_sent,
                "bytes_received": s.bytes_received,
                "packets_sent": s.packets_sent,
                "packets_received": s.packets_received,
                "retransmitted": s.retransmitted,
                "lost_reported": s.lost_reported,
                "lost_detected": s.lost_detected,
                "naks_sent": s.naks_sent,
                "naks_received": s.naks_received,
                "acks_sent": s.acks_sent,
                "acks_received": s.acks_received,
                "dropped": s.dropped,
                "exp_timeouts": s.exp_timeouts,
                "late_sends": s.late_sends,
                "rtt_us": s.rtt.as_micros() as u64,
                "rtt_var_us": s.rtt_var.as_micros() as u64,
                "pacing_rate": s.pacing_rate.round(),
                "cwnd_packets": s.cwnd_packets,
                "flow_window": s.flow_window,
                "peer_receive_rate_pps": s.peer_receive_rate,
                "peer_bandwidth_pps": s.peer_bandwidth,
                "send_buffered": f.send_buffered,
                "send_loss_packets": f.send_loss_packets,
                "recv_loss_ranges": f.recv_loss_ranges,
                "socket_send_buffer": info.send_buffer,
                "socket_recv_buffer": info.recv_buffer,
                "gso": info.gso,
                "gro": info.gro,
                "rx_timestamps": info.timestamps,
                "rx_stamped": shared.rx_stamped.load(std::sync::atomic::Ordering::Relaxed),
                "rx_wait_us": shared.rx_wait_ns.load(std::sync::atomic::Ordering::Relaxed) / 1000,
                "rx_pairs": s.probe_pairs,
                "rx_pairs_same_instant": s.probe_pairs_same_instant,
                "cc": c.congestion().describe(),
            });
            out.push_str(&line.to_string());
            out.push('\n');
        }
        if !out.is_empty() && file.write_all(out.as_bytes()).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::udt::{UdtConfig, UdtListener, UdtStream};
    use std::io::Read;

    /// With `FERRY_UDT_TRACE=DIR`, an open connection gets a JSON line a
    /// second in `DIR/udt-trace-<pid>.jsonl`. (nextest runs each test in a
    /// process of its own, so the variable reaches only this one.)
    #[test]
    fn the_trace_records_open_connections_every_second() {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("FERRY_UDT_TRACE", dir.path());
        let l = UdtListener::bind("127.0.0.1:0".parse().unwrap(), UdtConfig::default()).unwrap();
        let to = l.local_addr();
        let t = std::thread::spawn(move || {
            let s = l.accept().unwrap();
            let mut b = vec![0u8; 1 << 20];
            (&s).read_exact(&mut b).unwrap();
        });
        let c = UdtStream::connect(to, UdtConfig::default()).unwrap();
        c.write_all(&vec![7u8; 1 << 20]).unwrap();
        t.join().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1300));
        let file = dir.path().join(format!("udt-trace-{}.jsonl", std::process::id()));
        let text = std::fs::read_to_string(&file).unwrap();
        let sender = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["bytes_sent"].as_u64() >= Some(1 << 20))
            .unwrap_or_else(|| panic!("no line of the sender: {text}"));
        for k in ["rtt_us", "pacing_rate", "flow_window", "send_buffered", "socket_recv_buffer", "cc"] {
            assert!(!sender[k].is_null(), "{k}: {sender}");
        }
        drop(c);
    }
}
