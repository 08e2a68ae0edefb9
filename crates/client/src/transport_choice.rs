//! `--transport auto`: which data-channel transport to ask a server for,
//! from what the path measures (docs/transports.md, "Choosing a transport
//! automatically").
//!
//! The facts are the ones `ferry probe` reports, read from the control
//! connection after the login (no extra traffic): the kernel's RTT
//! estimate, the connection's retransmissions against the segments it
//! sent (a coarse loss figure — a login is a few dozen segments, so any
//! retransmission at all reads as a lossy path), and this host's
//! largest TCP buffers (`tcp_rmem`/`tcp_wmem`). The rule:
//!
//! * **long** — a round trip of at least [`LONG_RTT`], or of at least
//!   [`MEDIUM_RTT`] when one TCP stream's largest window divided by the
//!   round trip is below [`WINDOW_LIMITED_RATE`] (the buffers cannot fill
//!   a gigabit path; parallel streams help, but each still ramps and
//!   backs off like TCP);
//! * **lossy** — a loss rate of at least [`LOSSY`] (or any retransmission
//!   at all), where loss-based TCP backs off on every random drop;
//! * on a long or lossy path, **UDT** when the data is clear and the server
//!   offers it, **QUIC** when the control channel is TLS (data under
//!   `PROT P` must be encrypted; QUIC is TLS itself, and `auto` does not
//!   choose UDT's encrypted records yet, `--transport udt` does) and the server
//!   offers it; **TCP** otherwise — short clean paths, and servers that do
//!   not offer the choice (no `TRANSPORTS` line in FEAT: Globus, other FTP
//!   servers).
//!
//! `auto:LIST` (e.g. `auto:udt`) limits the candidates besides TCP; `ferry
//! cp --congestion NAME --transport auto` uses it for the transports that
//! have that controller.

use std::time::Duration;

/// A round trip this long is a long path whatever the buffers.
pub const LONG_RTT: Duration = Duration::from_millis(40);
/// Shortest round trip at which window-limited TCP counts as long.
pub const MEDIUM_RTT: Duration = Duration::from_millis(10);
/// The rate (bytes/s) one TCP stream's largest window should reach: 1 Gbit/s.
pub const WINDOW_LIMITED_RATE: f64 = 125e6;
/// A loss rate at which loss-based TCP is the wrong tool: 0.1 %.
pub const LOSSY: f64 = 1e-3;

/// What was measured about the path to one server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathFacts {
    /// Smoothed round-trip time of the control connection.
    pub rtt: Duration,
    /// Retransmitted segments / segments sent on the control connection,
    /// `None` when nothing was measured.
    pub loss: Option<f64>,
    /// Retransmitted segments (any at all on a login means loss).
    pub retransmits: u32,
    /// The largest TCP buffer this host's autotuning reaches, bytes.
    pub socket_buffer_max: u64,
}

/// The choice and why, in a sentence for the log and `--json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportChoice {
    pub transport: &'static str,
    pub reason: String,
}

/// Parses `auto` (every candidate) or `auto:udt,quic`; `None` if `name`
/// is not an automatic choice.
pub fn parse_auto(name: &str) -> Option<Vec<String>> {
    let lower = name.trim().to_ascii_lowercase();
    if lower == "auto" {
        return Some(vec!["udt".into(), "quic".into()]);
    }
    let list = lower.strip_prefix("auto:")?;
    Some(list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect())
}

/// Chooses for `facts`: `offered` is the server's FEAT `TRANSPORTS` list
/// (`None` when it has no such line), `encrypted` whether data goes under
/// `PROT P`, `candidates` what `auto:LIST` allows besides TCP.
pub fn choose(
    facts: &PathFacts,
    offered: Option<&[String]>,
    encrypted: bool,
    candidates: &[String],
) -> TransportChoice {
    let rtt_ms = facts.rtt.as_secs_f64() * 1e3;
    let window_rate = facts.socket_buffer_max as f64 / facts.rtt.as_secs_f64().max(1e-6);
    let long = facts.rtt >= LONG_RTT || (facts.rtt >= MEDIUM_RTT && window_rate < WINDOW_LIMITED_RATE);
    let lossy = facts.retransmits > 0 || facts.loss.is_some_and(|l| l >= LOSSY);
    let mut path = format!(
        "RTT {rtt_ms:.1} ms, {} retransmitted, TCP buffers up to {} MiB ({:.0} Mbit/s per stream at this RTT)",
        match facts.loss {
            Some(l) => format!("{:.2} % of control segments", l * 100.0),
            None => "nothing measured".to_string(),
        },
        facts.socket_buffer_max >> 20,
        window_rate * 8.0 / 1e6,
    );
    if !long && !lossy {
        path.push_str(": a short clean path, where TCP does best");
        return TransportChoice { transport: "tcp", reason: path };
    }
    let what = match (long, lossy) {
        (true, true) => "a long, lossy path",
        (true, false) => "a long path",
        _ => "a lossy path",
    };
    let want: &'static str = if encrypted { "quic" } else { "udt" };
    let why_want = if encrypted {
        "data under PROT P must be encrypted and QUIC is TLS itself, so QUIC"
    } else {
        "clear data, so UDT"
    };
    if !candidates.iter().any(|c| c == want) {
        return TransportChoice {
            transport: "tcp",
            reason: format!("{path}: {what}; {why_want}, but it is not among the candidates asked for, so tcp"),
        };
    }
    match offered {
        None => TransportChoice {
            transport: "tcp",
            reason: format!("{path}: {what}; {why_want}, but the server does not offer a choice of transport (no TRANSPORTS in FEAT), so tcp"),
        },
        Some(o) if !o.iter().any(|t| t.eq_ignore_ascii_case(want)) => TransportChoice {
            transport: "tcp",
            reason: format!("{path}: {what}; {why_want}, but the server offers only {}, so tcp", o.join(";")),
        },
        Some(_) => TransportChoice { transport: want, reason: format!("{path}: {what}; {why_want}") },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(rtt_ms: u64, retransmits: u32, buffers: u64) -> PathFacts {
        PathFacts {
            rtt: Duration::from_millis(rtt_ms),
            loss: Some(f64::from(retransmits) / 40.0),
            retransmits,
            socket_buffer_max: buffers,
        }
    }

    fn all() -> Vec<String> {
        parse_auto("auto").unwrap()
    }

    fn both() -> Vec<String> {
        vec!["tcp".to_string(), "udt".to_string(), "quic".to_string()]
    }

    #[test]
    fn short_clean_paths_stay_on_tcp() {
        let c = choose(&facts(0, 0, 6 << 20), Some(&both()), false, &all());
        assert_eq!(c.transport, "tcp");
        assert!(c.reason.contains("short clean path"), "{}", c.reason);
        // 20 ms with tuned 64 MiB buffers: 26 Gbit/s per stream, TCP copes.
        assert_eq!(choose(&facts(20, 0, 64 << 20), Some(&both()), false, &all()).transport, "tcp");
    }

    #[test]
    fn long_or_lossy_clear_paths_take_udt() {
        assert_eq!(choose(&facts(80, 0, 64 << 20), Some(&both()), false, &all()).transport, "udt");
        // 20 ms with 6 MiB buffers: one stream tops out near 2.5 Gbit/s... not window-limited.
        assert_eq!(choose(&facts(20, 0, 6 << 20), Some(&both()), false, &all()).transport, "tcp");
        // 20 ms with 2 MiB buffers: 0.8 Gbit/s per stream.
        let c = choose(&facts(20, 0, 2 << 20), Some(&both()), false, &all());
        assert_eq!(c.transport, "udt");
        assert!(c.reason.contains("a long path; clear data, so UDT"), "{}", c.reason);
        let c = choose(&facts(1, 2, 6 << 20), Some(&both()), false, &all());
        assert_eq!(c.transport, "udt");
        assert!(c.reason.contains("a lossy path"), "{}", c.reason);
    }

    #[test]
    fn encrypted_long_paths_take_quic_never_udt() {
        let c = choose(&facts(80, 0, 6 << 20), Some(&both()), true, &all());
        assert_eq!(c.transport, "quic");
        assert!(c.reason.contains("PROT P"), "{}", c.reason);
        let udt_only = vec!["tcp".to_string(), "udt".to_string()];
        assert_eq!(choose(&facts(80, 0, 6 << 20), Some(&udt_only), true, &all()).transport, "tcp");
    }

    #[test]
    fn servers_without_the_choice_get_tcp_and_say_so() {
        let c = choose(&facts(80, 3, 6 << 20), None, false, &all());
        assert_eq!(c.transport, "tcp");
        assert!(c.reason.contains("does not offer a choice"), "{}", c.reason);
        let c = choose(&facts(80, 0, 6 << 20), Some(&["tcp".to_string()]), false, &all());
        assert_eq!(c.transport, "tcp");
        assert!(c.reason.contains("offers only tcp"), "{}", c.reason);
    }

    #[test]
    fn auto_lists_limit_the_candidates() {
        assert_eq!(parse_auto("AUTO:quic"), Some(vec!["quic".to_string()]));
        assert_eq!(parse_auto("udt"), None);
        let c = choose(&facts(80, 0, 6 << 20), Some(&both()), false, &parse_auto("auto:quic").unwrap());
        assert_eq!(c.transport, "tcp");
        assert!(c.reason.contains("not among the candidates"), "{}", c.reason);
    }
}
