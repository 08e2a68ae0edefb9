//! Formatting of sizes and rates, shared by the report, the probe and the
//! tuner so that one figure reads the same everywhere.
//!
//! Sizes use binary units (MiB), as file sizes and buffer sizes do
//! everywhere else in Ferry; rates are shown in MiB/s and, for comparison
//! with link speeds, in decimal bits per second.

/// "0 B", "512 B", "1.5 KiB", "64.0 MiB", "2.50 GiB".
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{} {}", three_digits(v), UNITS[unit])
}

/// Bytes per second as "117 MiB/s".
pub fn format_rate(bytes_per_s: f64) -> String {
    if !bytes_per_s.is_finite() || bytes_per_s <= 0.0 {
        return "0 B/s".into();
    }
    let s = format_bytes(bytes_per_s.round() as u64);
    format!("{s}/s")
}

/// Bytes per second as bits: "984 Mbit/s", "9.41 Gbit/s".
pub fn format_bits(bytes_per_s: f64) -> String {
    let bits = bytes_per_s * 8.0;
    if !bits.is_finite() || bits <= 0.0 {
        return "0 bit/s".into();
    }
    let (v, unit) = if bits >= 1e9 {
        (bits / 1e9, "Gbit/s")
    } else if bits >= 1e6 {
        (bits / 1e6, "Mbit/s")
    } else if bits >= 1e3 {
        (bits / 1e3, "kbit/s")
    } else {
        (bits, "bit/s")
    };
    format!("{} {unit}", three_digits(v))
}

/// "117 MiB/s (984 Mbit/s)".
pub fn format_rate_both(bytes_per_s: f64) -> String {
    format!("{} ({})", format_rate(bytes_per_s), format_bits(bytes_per_s))
}

/// Three significant digits: 1.23, 12.3, 123.
pub(crate) fn three_digits(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Milliseconds with sensible precision for RTTs from 10 µs to seconds.
pub fn format_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.0} µs", ms * 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_rates() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(64 << 20), "64.0 MiB");
        assert_eq!(format_bytes(300 << 30), "300 GiB");
        assert_eq!(format_rate(117.0 * 1024.0 * 1024.0), "117 MiB/s");
        assert_eq!(format_bits(125_000_000.0), "1.00 Gbit/s");
        assert_eq!(format_bits(123_000.0), "984 kbit/s");
        assert_eq!(format_ms(0.042), "42 µs");
        assert_eq!(format_ms(30.04), "30.0 ms");
    }
}
