//! Choosing the transport of the data channels: the FEAT line that lists
//! them, the `TPRT` command that selects one (the FTP-ADTS paper's idea:
//! the client names the channel before the data connection is made, and
//! falls back to TCP), and Globus's `SITE SETNETSTACK`, which names an XIO
//! driver stack. The grammar is in `docs/transports.md`:
//!
//! ```text
//! feat-line   = SP "TRANSPORTS" SP name *( ";" name )
//! tprt        = "TPRT" SP name
//! setnetstack = "SITE" SP "SETNETSTACK" SP driver *( "," driver )
//! driver      = name [ ":" options ]
//! name        = 1*15( ALPHA / DIGIT / "-" / "_" )   ; case-insensitive
//! ```
//!
//! `TPRT` answers `200` when the server offers the transport and `504`
//! (RFC 959: "command not implemented for that parameter") when it does
//! not; the session then carries on over the transport it had (TCP unless
//! the server's default says otherwise). A change of transport starts a
//! new data-channel generation, like a change of MODE: cached MODE E
//! connections of the old transport are not reused. A client or server
//! that sends neither command sees the dialogue it always saw, apart from
//! the FEAT line.

use crate::reply::{Reply, ReplyCode};
use std::fmt;

/// Longest transport name.
pub const MAX_NAME: usize = 15;

/// A transport's name, lower case: small and `Copy`, so the data-channel
/// plan of a transfer can carry it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransportName {
    len: u8,
    bytes: [u8; MAX_NAME],
}

impl TransportName {
    /// TCP: every GridFTP peer's transport and the default.
    pub const TCP: TransportName = TransportName { len: 3, bytes: *b"tcp\0\0\0\0\0\0\0\0\0\0\0\0" };

    /// A name as the grammar allows it, lower-cased.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        if s.is_empty() || s.len() > MAX_NAME || !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return None;
        }
        let mut bytes = [0u8; MAX_NAME];
        bytes[..s.len()].copy_from_slice(s.to_ascii_lowercase().as_bytes());
        Some(Self { len: s.len() as u8, bytes })
    }

    /// Transports that are TLS themselves (QUIC is TLS 1.3 with the
    /// server's certificate): offered only to a session whose control
    /// channel is TLS, and used only while the data is private (PROT P).
    pub fn needs_tls(&self) -> bool {
        self.as_str() == "quic"
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII goes in (`parse`), so this cannot fail.
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("tcp")
    }
}

impl Default for TransportName {
    fn default() -> Self {
        Self::TCP
    }
}

impl fmt::Debug for TransportName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TransportName({})", self.as_str())
    }
}

impl fmt::Display for TransportName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The FEAT line listing the offered transports: ` TRANSPORTS tcp`.
pub fn feat_line(offered: &[TransportName]) -> String {
    let names: Vec<&str> = offered.iter().map(TransportName::as_str).collect();
    format!(" TRANSPORTS {}", if names.is_empty() { "tcp".to_string() } else { names.join(";") })
}

/// The transports a FEAT line lists (for a client), if it is that line.
pub fn parse_feat_line(line: &str) -> Option<Vec<TransportName>> {
    let rest = line.trim().strip_prefix("TRANSPORTS")?;
    Some(rest.split(';').filter_map(TransportName::parse).collect())
}

/// `TPRT <name>`: the transport chosen, or the refusal. `current` is what
/// the data channels keep when the name is refused.
pub fn select(offered: &[TransportName], current: TransportName, requested: &str) -> Result<TransportName, Reply> {
    match TransportName::parse(requested) {
        Some(t) if offered.contains(&t) => Ok(t),
        Some(t) => Err(refusal(offered, current, &format!("Transport {t} is not offered"))),
        None => Err(Reply::new(
            ReplyCode::PARAMETER_SYNTAX_ERROR,
            "TPRT: expected a transport name (letters, digits, '-' or '_', at most 15).",
        )),
    }
}

/// `TPRT udt:aes-gcm`: UDT whose data under PROT P is AES-GCM records
/// keyed from the control channel's TLS session (docs/udt.md, "Encryption
/// after PROT P"). FEAT advertises it as ` TPRT udt:aes-gcm`; servers that
/// do not know it answer 501 (`:` is not in the name grammar), so a
/// client falls back to plain `TPRT udt`, whose PROT P data is refused.
pub const SEALED_UDT: &str = "udt:aes-gcm";

/// `name[:option]` of a `TPRT` argument.
pub fn split_option(requested: &str) -> (&str, Option<&str>) {
    match requested.trim().split_once(':') {
        Some((n, o)) => (n, Some(o)),
        None => (requested.trim(), None),
    }
}

/// Whether `name:option` asks for encrypted UDT.
pub fn is_sealed_udt(name: &str, option: &str) -> bool {
    name.eq_ignore_ascii_case("udt") && option.eq_ignore_ascii_case("aes-gcm")
}

/// The refusal of a transport option this server does not have (504;
/// the transport stays as it was).
pub fn refuse_option(offered: &[TransportName], current: TransportName, requested: &str) -> Reply {
    let shown: String = requested.chars().filter(char::is_ascii_graphic).take(64).collect();
    refusal(offered, current, &format!("Transport {shown} is not offered"))
}

/// The reply to a successful `TPRT`.
pub fn selected(t: TransportName) -> Reply {
    Reply::new(ReplyCode::OK, format!("Transport set to {t}."))
}

/// `SITE SETNETSTACK <driver>[:opts][,<driver>...]`: Globus XIO names the
/// network stack as a list of drivers. Ferry's transports are whole
/// stacks, so the list must be exactly one offered transport (its options
/// are ignored); anything else is refused and the stack stays as it was.
pub fn select_net_stack(
    offered: &[TransportName],
    current: TransportName,
    stack: &str,
) -> Result<TransportName, Reply> {
    let drivers: Vec<&str> = stack.split(',').map(|d| d.split(':').next().unwrap_or("").trim()).collect();
    // Echoed in the reply: printable ASCII only, and not too much of it.
    let stack: String = stack.chars().filter(char::is_ascii_graphic).take(64).collect();
    match drivers.as_slice() {
        [one] => match TransportName::parse(one) {
            Some(t) if offered.contains(&t) => Ok(t),
            _ => Err(refusal(offered, current, &format!("SITE SETNETSTACK {stack}: no such stack here"))),
        },
        _ => Err(refusal(offered, current, &format!("SITE SETNETSTACK {stack}: Ferry's stacks are single drivers"))),
    }
}

fn refusal(offered: &[TransportName], current: TransportName, why: &str) -> Reply {
    let names: Vec<&str> = offered.iter().map(TransportName::as_str).collect();
    Reply::new(
        ReplyCode::PARAMETER_NOT_IMPLEMENTED,
        format!("{why}; this server offers {}. Data channels stay on {current}.", names.join(", ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_small_lower_case_words() {
        assert_eq!(TransportName::parse(" TCP ").unwrap(), TransportName::TCP);
        assert_eq!(TransportName::parse("udt").unwrap().as_str(), "udt");
        assert!(TransportName::parse("a b").is_none());
        assert!(TransportName::parse("").is_none());
        assert!(TransportName::parse("sixteen-letters-").is_none());
        assert_eq!(TransportName::parse("fifteen-letters").unwrap().as_str(), "fifteen-letters");
    }

    #[test]
    fn feat_line_round_trips() {
        let offered = [TransportName::TCP, TransportName::parse("udt").unwrap()];
        assert_eq!(feat_line(&offered[..1]), " TRANSPORTS tcp");
        assert_eq!(feat_line(&offered), " TRANSPORTS tcp;udt");
        assert_eq!(parse_feat_line(&feat_line(&offered)).unwrap(), offered);
        assert!(parse_feat_line(" MLST size;").is_none());
    }

    #[test]
    fn select_takes_offered_names_and_refuses_the_rest_with_504() {
        let offered = [TransportName::TCP];
        assert_eq!(select(&offered, TransportName::TCP, "tcp").unwrap(), TransportName::TCP);
        let r = select(&offered, TransportName::TCP, "quic").unwrap_err();
        assert_eq!(r.code, ReplyCode::PARAMETER_NOT_IMPLEMENTED);
        assert!(r.to_string().contains("stay on tcp"), "{r}");
        assert_eq!(select(&offered, TransportName::TCP, "no way").unwrap_err().code, ReplyCode::PARAMETER_SYNTAX_ERROR);
        assert_eq!(select_net_stack(&offered, TransportName::TCP, "tcp").unwrap(), TransportName::TCP);
        assert_eq!(select_net_stack(&offered, TransportName::TCP, "tcp:nodelay=1").unwrap(), TransportName::TCP);
        assert_eq!(select_net_stack(&offered, TransportName::TCP, "udt").unwrap_err().code.get(), 504);
        assert_eq!(select_net_stack(&offered, TransportName::TCP, "gsi,tcp").unwrap_err().code.get(), 504);
    }
}
