//! Parsing of the quantities a link is described with: delays, rates, byte
//! sizes and loss probabilities.
//!
//! The spellings follow `tc` (`30ms`, `1gbit`, `25MB`) because the people who
//! run this tool already type those for `netem` on other machines. Rates use
//! SI prefixes on **bits** (`1gbit` = 10^9 bit/s); byte sizes use SI for `KB`,
//! `MB`, `GB` and binary for `KiB`, `MiB`, `GiB`. `tc`'s `bps` (bytes per
//! second) is refused on purpose: it is the most common way to be off by a
//! factor of eight.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A quantity that could not be parsed; carries the text and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse {what} from {text:?}: {hint}")]
pub struct ParseError {
    what: &'static str,
    text: String,
    hint: &'static str,
}

impl ParseError {
    fn new(what: &'static str, text: &str, hint: &'static str) -> Self {
        ParseError { what, text: text.to_string(), hint }
    }
}

/// Splits `"12.5ms"` into `(12.5, "ms")`.
fn split_number(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (num, unit) = text.split_at(end);
    let value: f64 = num.parse().ok()?;
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    Some((value, unit.trim()))
}

/// Parses a one-way delay such as `30ms`, `100us`, `1.5s` or `0`.
pub fn parse_delay(text: &str) -> Result<Duration, ParseError> {
    const HINT: &str = "expected a number with unit s, ms, us or ns (e.g. 30ms)";
    let (value, unit) = split_number(text).ok_or_else(|| ParseError::new("delay", text, HINT))?;
    let seconds = match unit.to_ascii_lowercase().as_str() {
        "s" | "sec" => value,
        "ms" | "msec" => value * 1e-3,
        "us" | "usec" | "µs" => value * 1e-6,
        "ns" | "nsec" => value * 1e-9,
        "" if value == 0.0 => 0.0,
        _ => return Err(ParseError::new("delay", text, HINT)),
    };
    // An hour of delay is certainly a typo and would hold unbounded memory.
    if seconds > 3600.0 {
        return Err(ParseError::new("delay", text, "delay above one hour"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A link rate in bits per second on IP packets (what the TUN device carries;
/// there is no link-layer header on a TUN device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate {
    bits_per_second: u64,
}

impl Rate {
    /// A rate of `bits_per_second`; zero is refused by the parser, not here,
    /// so that arithmetic elsewhere can assume a positive rate.
    pub const fn from_bits_per_second(bits_per_second: u64) -> Self {
        Rate { bits_per_second }
    }

    pub const fn bits_per_second(self) -> u64 {
        self.bits_per_second
    }

    pub fn bytes_per_second(self) -> f64 {
        self.bits_per_second as f64 / 8.0
    }

    /// Bytes that drain at this rate in `duration`.
    pub fn bytes_in(self, duration: Duration) -> u64 {
        (self.bits_per_second as u128 * duration.as_nanos() / 8_000_000_000) as u64
    }
}

impl FromStr for Rate {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, ParseError> {
        const HINT: &str = "expected a number with unit bit, kbit, mbit, gbit or tbit (e.g. 1gbit)";
        let (value, unit) = split_number(text).ok_or_else(|| ParseError::new("rate", text, HINT))?;
        let unit = unit.to_ascii_lowercase();
        let unit = unit.strip_suffix("/s").unwrap_or(&unit);
        let multiplier = match unit {
            "bit" => 1.0,
            "kbit" => 1e3,
            "mbit" => 1e6,
            "gbit" => 1e9,
            "tbit" => 1e12,
            "bps" | "kbps" | "mbps" | "gbps" => {
                return Err(ParseError::new(
                    "rate",
                    text,
                    "tc's `bps` means bytes per second; write the rate in bits (e.g. 1gbit)",
                ))
            }
            _ => return Err(ParseError::new("rate", text, HINT)),
        };
        let bits = (value * multiplier).round();
        if bits < 8_000.0 {
            return Err(ParseError::new("rate", text, "rate below 8 kbit/s"));
        }
        if bits > 1e13 {
            return Err(ParseError::new("rate", text, "rate above 10 tbit/s"));
        }
        Ok(Rate::from_bits_per_second(bits as u64))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bits_per_second as f64;
        if b >= 1e9 {
            write!(f, "{}gbit", trim_float(b / 1e9))
        } else if b >= 1e6 {
            write!(f, "{}mbit", trim_float(b / 1e6))
        } else if b >= 1e3 {
            write!(f, "{}kbit", trim_float(b / 1e3))
        } else {
            write!(f, "{}bit", b)
        }
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Parses a byte size such as `25MB`, `512KiB` or `1000`.
pub fn parse_bytes(text: &str) -> Result<u64, ParseError> {
    const HINT: &str = "expected a number with unit B, KB, MB, GB, KiB, MiB or GiB (e.g. 25MB)";
    let (value, unit) = split_number(text).ok_or_else(|| ParseError::new("size", text, HINT))?;
    let multiplier = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(ParseError::new("size", text, HINT)),
    };
    let bytes = (value * multiplier).round();
    if bytes > 64e9 {
        return Err(ParseError::new("size", text, "size above 64 GB"));
    }
    Ok(bytes as u64)
}

/// Parses a loss probability: `0.1%` or the fraction `0.001`.
pub fn parse_loss(text: &str) -> Result<f64, ParseError> {
    const HINT: &str = "expected a percentage (0.1%) or a fraction between 0 and 1 (0.001)";
    let t = text.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (t, 1.0),
    };
    let value: f64 = number.parse().map_err(|_| ParseError::new("loss", text, HINT))?;
    let p = value * scale;
    if !(0.0..=1.0).contains(&p) || !p.is_finite() {
        return Err(ParseError::new("loss", text, HINT));
    }
    Ok(p)
}

/// Formats a duration the way it is typed on the command line.
pub fn format_delay(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0ms".to_string()
    } else if ns % 1_000_000 == 0 {
        format!("{}ms", ns / 1_000_000)
    } else if ns % 1_000 == 0 {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays() {
        assert_eq!(parse_delay("30ms").unwrap(), Duration::from_millis(30));
        assert_eq!(parse_delay("100us").unwrap(), Duration::from_micros(100));
        assert_eq!(parse_delay("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_delay("0").unwrap(), Duration::ZERO);
        assert!(parse_delay("30").is_err(), "a bare number is ambiguous");
        assert!(parse_delay("-1ms").is_err());
        assert!(parse_delay("2h").is_err());
        assert_eq!(format_delay(Duration::from_millis(80)), "80ms");
        assert_eq!(format_delay(Duration::from_micros(10)), "10us");
    }

    #[test]
    fn rates() {
        assert_eq!("1gbit".parse::<Rate>().unwrap().bits_per_second(), 1_000_000_000);
        assert_eq!("200Mbit".parse::<Rate>().unwrap().bits_per_second(), 200_000_000);
        assert_eq!("2.5gbit/s".parse::<Rate>().unwrap().bits_per_second(), 2_500_000_000);
        assert!("1gbps".parse::<Rate>().is_err(), "bytes per second is refused");
        assert!("0mbit".parse::<Rate>().is_err());
        assert_eq!(Rate::from_bits_per_second(200_000_000).to_string(), "200mbit");
        assert_eq!(Rate::from_bits_per_second(1_000_000_000).bytes_in(Duration::from_millis(200)), 25_000_000);
    }

    #[test]
    fn sizes_and_loss() {
        assert_eq!(parse_bytes("25MB").unwrap(), 25_000_000);
        assert_eq!(parse_bytes("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_bytes("9000").unwrap(), 9000);
        assert!(parse_bytes("5 parsecs").is_err());
        assert!((parse_loss("0.1%").unwrap() - 0.001).abs() < 1e-12);
        assert!((parse_loss("0.25").unwrap() - 0.25).abs() < 1e-12);
        assert!(parse_loss("150%").is_err());
        assert!(parse_loss("x").is_err());
    }
}
