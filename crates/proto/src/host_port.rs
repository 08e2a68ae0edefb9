//! Data-connection addresses: `PORT`/`PASV` (RFC 959 §4.1.2), `EPRT`/`EPSV`
//! (RFC 2428) and the GridFTP striped forms `SPOR`/`SPAS` (GFD.20 §3.4).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostPortError {
    #[error("expected h1,h2,h3,h4,p1,p2 with numbers 0-255")]
    BadPort,
    #[error("expected |proto|address|port| (RFC 2428)")]
    BadEprt,
    #[error("network protocol {0} is not supported (use 1 for IPv4, 2 for IPv6)")]
    UnsupportedProtocol(String),
}

/// Parses the `h1,h2,h3,h4,p1,p2` form used by PORT, SPOR and the PASV reply.
pub fn parse_host_port(s: &str) -> Result<SocketAddrV4, HostPortError> {
    let s = s.trim();
    let mut n = [0u8; 6];
    let mut count = 0;
    for part in s.split(',') {
        if count == 6 {
            return Err(HostPortError::BadPort);
        }
        let part = part.trim();
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(HostPortError::BadPort);
        }
        n[count] = part.parse().map_err(|_| HostPortError::BadPort)?;
        count += 1;
    }
    if count != 6 {
        return Err(HostPortError::BadPort);
    }
    Ok(SocketAddrV4::new(Ipv4Addr::new(n[0], n[1], n[2], n[3]), u16::from(n[4]) << 8 | u16::from(n[5])))
}

pub fn format_host_port(addr: SocketAddrV4) -> String {
    let [a, b, c, d] = addr.ip().octets();
    let port = addr.port();
    format!("{a},{b},{c},{d},{},{}", port >> 8, port & 0xff)
}

/// Parses an `EPRT` argument: `<d><proto><d><addr><d><port><d>`, where the
/// delimiter `d` is the first character (RFC 2428 §2).
pub fn parse_eprt(s: &str) -> Result<SocketAddr, HostPortError> {
    let mut chars = s.chars();
    let d = chars.next().ok_or(HostPortError::BadEprt)?;
    if !(33..=126).contains(&(d as u32)) {
        return Err(HostPortError::BadEprt);
    }
    let fields: Vec<&str> = s[d.len_utf8()..].split(d).collect();
    if fields.len() != 4 || !fields[3].is_empty() {
        return Err(HostPortError::BadEprt);
    }
    let port: u16 = fields[2].parse().map_err(|_| HostPortError::BadEprt)?;
    let ip: IpAddr = match fields[0] {
        "1" => IpAddr::V4(fields[1].parse::<Ipv4Addr>().map_err(|_| HostPortError::BadEprt)?),
        "2" => IpAddr::V6(fields[1].parse::<Ipv6Addr>().map_err(|_| HostPortError::BadEprt)?),
        other => return Err(HostPortError::UnsupportedProtocol(other.to_string())),
    };
    Ok(SocketAddr::new(ip, port))
}

pub fn format_eprt(addr: SocketAddr) -> String {
    let proto = if addr.is_ipv4() { 1 } else { 2 };
    format!("|{proto}|{}|{}|", addr.ip(), addr.port())
}

/// Extracts the address from a `227 Entering Passive Mode (h1,...,p2)` or
/// `127` reply text: the first run of six comma-separated numbers.
pub fn parse_pasv_reply(text: &str) -> Option<SocketAddrV4> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let rest = &text[start..];
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == ',')).unwrap_or(rest.len());
    parse_host_port(&rest[..end]).ok()
}

/// Extracts the port from `229 Entering Extended Passive Mode (|||port|)`.
pub fn parse_epsv_reply(text: &str) -> Option<u16> {
    let open = text.find('(')?;
    let close = text[open..].find(')')? + open;
    let inner = &text[open + 1..close];
    let d = inner.chars().next()?;
    let fields: Vec<&str> = inner[d.len_utf8()..].split(d).collect();
    if fields.len() != 4 {
        return None;
    }
    fields[2].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn port_round_trip_and_errors() {
        let a = parse_host_port("127,0,0,1,113,186").unwrap();
        assert_eq!(a, "127.0.0.1:29114".parse().unwrap());
        assert_eq!(format_host_port(a), "127,0,0,1,113,186");
        for bad in ["", "1,2,3,4,5", "1,2,3,4,5,6,7", "256,0,0,1,1,1", "a,b,c,d,e,f", "1,2,3,4,5,+6"] {
            assert!(parse_host_port(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn eprt_forms() {
        assert_eq!(parse_eprt("|1|132.235.1.2|6275|").unwrap(), "132.235.1.2:6275".parse().unwrap());
        assert_eq!(parse_eprt("|2|::1|5282|").unwrap(), "[::1]:5282".parse().unwrap());
        assert_eq!(parse_eprt("!1!10.0.0.1!21!").unwrap(), "10.0.0.1:21".parse().unwrap());
        assert!(parse_eprt("|3|x|1|").is_err());
        assert!(parse_eprt("|1|::1|1|").is_err());
        assert!(parse_eprt("|1|1.2.3.4|70000|").is_err());
        assert!(parse_eprt("").is_err());
    }

    #[test]
    fn passive_replies() {
        assert_eq!(
            parse_pasv_reply("Entering Passive Mode (127,0,0,1,113,186)"),
            Some("127.0.0.1:29114".parse().unwrap())
        );
        assert_eq!(parse_epsv_reply("Entering Extended Passive Mode (|||6446|)"), Some(6446));
    }

    proptest! {
        #[test]
        fn host_port_round_trips(ip in any::<[u8; 4]>(), port in any::<u16>()) {
            let a = SocketAddrV4::new(ip.into(), port);
            prop_assert_eq!(parse_host_port(&format_host_port(a)).unwrap(), a);
            let s = SocketAddr::V4(a);
            prop_assert_eq!(parse_eprt(&format_eprt(s)).unwrap(), s);
        }
        #[test]
        fn parsers_never_panic(s in "\\PC{0,40}") {
            let _ = parse_host_port(&s);
            let _ = parse_eprt(&s);
            let _ = parse_pasv_reply(&s);
            let _ = parse_epsv_reply(&s);
        }
    }
}
