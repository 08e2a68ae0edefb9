//! `--congestion NAME`: one flag for whichever rate-controlled transport
//! carries the data (docs/transports.md, docs/udt.md).
//!
//! * UDT (`crates/udt/src/cc`): `ferry` (the default, a BBR-like path
//!   model), `udt` (libudt's DAIMD, for parity with UDT peers) and
//!   `blast:RATE` (a fixed rate, e.g. `blast:100M` bytes per second; no
//!   congestion control, for dedicated circuits only — refused without a
//!   rate).
//! * QUIC (`ferry_io::transport::quic::Congestion`): `bbr` (its default),
//!   `cubic`, `newreno`, and whatever else that enum learns to parse.
//!
//! A name is accepted on the command line when some transport has it; it
//! must then fit the transport the copy asks for (`--transport`), and a
//! name the chosen transport does not have is an error that says which
//! transports do have it. TCP's controller is the kernel's
//! (`net.ipv4.tcp_congestion_control`), so `--congestion` with a TCP copy
//! is an error too rather than silently ignored. `--transport auto`
//! chooses only among the transports that have the name.
//! `ferry serve --congestion` sets it for every transport that has it
//! (the server does not know which one its clients will select).

use anyhow::bail;
use ferry_io::transport::quic;
use ferry_io::transport::udt::{self, CongestionKind, UdtCongestion};

/// The UDT controller `name` means, or why it means none.
pub fn udt_kind(name: &str) -> Result<CongestionKind, String> {
    let name = name.trim().to_ascii_lowercase();
    match name.strip_prefix("blast:") {
        Some(rate) => {
            let r = crate::copy::parse_size(rate)
                .map_err(|e| format!("blast:{rate}: {e} (blast:RATE takes bytes per second, e.g. blast:100M)"))?;
            if r == 0 {
                return Err("blast needs a positive rate: blast:RATE, e.g. blast:100M (bytes per second)".into());
            }
            Ok(CongestionKind::Blast { rate: r as f64 })
        }
        None if name == "blast" => Err("blast sends at a fixed rate with no congestion control, so it needs one: \
                                        blast:RATE, e.g. blast:100M (bytes per second)"
            .into()),
        None => CongestionKind::parse(&name),
    }
}

/// The QUIC controller `name` means.
pub fn quic_kind(name: &str) -> Result<quic::Congestion, String> {
    name.trim().parse::<quic::Congestion>()
}

/// The transports that have a controller called `name`.
pub fn transports_having(name: &str) -> Vec<&'static str> {
    let mut v = Vec::new();
    if udt_kind(name).is_ok() {
        v.push("udt");
    }
    if quic_kind(name).is_ok() {
        v.push("quic");
    }
    v
}

/// clap's parser: a name some transport has (lower-cased). A bare
/// `blast` gets blast's own explanation.
pub fn parse_name(s: &str) -> Result<String, String> {
    let lower = s.trim().to_ascii_lowercase();
    if !transports_having(&lower).is_empty() {
        return Ok(lower);
    }
    if lower == "blast" || lower.starts_with("blast:") {
        return Err(udt_kind(&lower).unwrap_err());
    }
    Err(format!(
        "unknown congestion control '{s}': udt data channels have ferry (default), udt and blast:RATE; \
         quic data channels have ferry (default), bbr, cubic and newreno"
    ))
}

/// Sets the controllers for `ferry cp`: `name` must fit `transport` (the
/// `--transport` value; `None` is TCP). `max_rate` (`--max-rate`, bytes
/// per second) caps UDT's controller as well as the copy.
pub fn apply_for_copy(name: Option<&str>, transport: Option<&str>, max_rate: Option<u64>) -> anyhow::Result<()> {
    let transport = transport.map(str::to_ascii_lowercase);
    let cap = max_rate.map(|r| r as f64);
    let mut cc = UdtCongestion { max_rate: cap, ..UdtCongestion::DEFAULT };
    if transport.as_deref() == Some("blast") {
        // `--transport blast`: UDT with a fixed rate, which must be given.
        cc.kind = match name {
            Some(n) => match udt_kind(n) {
                Ok(k @ CongestionKind::Blast { .. }) => k,
                _ => bail!("--transport blast sends at a fixed rate: give it as --congestion blast:RATE (or drop --congestion and give --max-rate RATE)"),
            },
            None => match cap {
                Some(r) => CongestionKind::Blast { rate: r },
                None => bail!(
                    "--transport blast sends at a fixed rate with no congestion control and needs one: \
                     --max-rate RATE or --congestion blast:RATE (bytes per second); it is unfair to other \
                     traffic, for dedicated circuits only"
                ),
            },
        };
        udt::set_congestion(cc);
        return Ok(());
    }
    let Some(name) = name else {
        udt::set_congestion(cc);
        return Ok(());
    };
    let having = transports_having(name);
    match transport.as_deref() {
        Some("udt") => cc.kind = udt_kind(name).map_err(|_| not_for(name, "udt", &having))?,
        Some("quic") => quic::set_congestion(quic_kind(name).map_err(|_| not_for(name, "quic", &having))?),
        Some(t) if t == "auto" || t.starts_with("auto:") => {
            // Set it wherever it exists; `auto` then chooses among those.
            if let Ok(k) = udt_kind(name) {
                cc.kind = k;
            }
            if let Ok(q) = quic_kind(name) {
                quic::set_congestion(q);
            }
        }
        other => bail!(
            "--congestion {name} chooses the controller of {} data channels, and this copy uses {}: \
             add --transport {} (TCP's controller is the kernel's, net.ipv4.tcp_congestion_control)",
            having.join(" or "),
            other.unwrap_or("tcp"),
            having.first().copied().unwrap_or("udt"),
        ),
    }
    udt::set_congestion(cc);
    Ok(())
}

fn not_for(name: &str, transport: &str, having: &[&str]) -> anyhow::Error {
    let has = match transport {
        "udt" => "ferry (default), udt and blast:RATE",
        _ => "ferry (default), bbr, cubic and newreno",
    };
    anyhow::anyhow!(
        "--congestion {name} is not a {transport} controller ({transport} has {has}); {name} is {}'s",
        having.join(" and ")
    )
}

/// Sets the controllers for `ferry serve`: for every transport that has
/// `name` (a client may select any offered transport). The server's
/// `max_transfer_rate` caps each UDT connection's controller too.
pub fn apply_for_server(name: Option<&str>, max_rate: Option<u64>) -> anyhow::Result<()> {
    let max_rate = max_rate.map(|r| r as f64);
    udt::set_congestion(UdtCongestion { max_rate, ..UdtCongestion::DEFAULT });
    let Some(name) = name else { return Ok(()) };
    let mut any = false;
    if let Ok(kind) = udt_kind(name) {
        udt::set_congestion(UdtCongestion { kind, max_rate });
        any = true;
    }
    if let Ok(q) = quic_kind(name) {
        quic::set_congestion(q);
        any = true;
    }
    if !any {
        bail!("{}", parse_name(name).unwrap_err());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_the_transports_that_have_them() {
        // (QUIC may learn `ferry` too: it wraps the same controllers.)
        assert!(transports_having("ferry").contains(&"udt"));
        assert_eq!(transports_having("udt"), vec!["udt"]);
        assert_eq!(transports_having("blast:100M"), vec!["udt"]);
        assert_eq!(transports_having("cubic"), vec!["quic"]);
        assert_eq!(transports_having("BBR"), vec!["quic"]);
        assert!(transports_having("vegas").is_empty());
        assert_eq!(udt_kind("blast:1M"), Ok(CongestionKind::Blast { rate: 1048576.0 }));
        assert_eq!(udt_kind("udt"), Ok(CongestionKind::Udt));
    }

    #[test]
    fn blast_without_a_rate_is_refused() {
        assert!(parse_name("blast").unwrap_err().contains("blast:RATE"));
        assert!(parse_name("blast:0").is_err());
        assert!(parse_name("blast:fast").is_err());
        assert!(parse_name("vegas").unwrap_err().contains("quic data channels have"));
        assert_eq!(parse_name("Ferry").as_deref(), Ok("ferry"));
    }

    #[test]
    fn a_name_the_chosen_transport_lacks_is_an_error() {
        let e = apply_for_copy(Some("cubic"), Some("udt"), None).unwrap_err().to_string();
        assert!(e.contains("not a udt controller") && e.contains("quic"), "{e}");
        let e = apply_for_copy(Some("udt"), Some("quic"), None).unwrap_err().to_string();
        assert!(e.contains("not a quic controller"), "{e}");
        let e = apply_for_copy(Some("ferry"), None, None).unwrap_err().to_string();
        assert!(e.contains("--transport udt"), "{e}");
        let e = apply_for_copy(None, Some("blast"), None).unwrap_err().to_string();
        assert!(e.contains("needs one"), "{e}");
        assert!(apply_for_copy(Some("cubic"), Some("blast"), None).is_err());
    }
}
