//! File names are octets; Ferry's paths are strings.
//!
//! RFC 959 and RFC 3659 §2.2 define pathnames as sequences of octets, and
//! a Linux file name is any byte string without `/` and NUL. Most are
//! UTF-8, but not all: a Latin-1 name written years ago is `caf\xe9`.
//! Globus, lftp and pure-ftpd pass such names through untouched, and so
//! does Ferry: a listing carries the name's own octets, and a client that
//! sends those octets back gets that file.
//!
//! Inside, paths stay `String`s (every layer compares, joins and prints
//! them), so the octets that are not UTF-8 are carried by a reversible
//! escape: each such byte `b` (always ≥ 0x80) becomes the character
//! U+10FF00 + `b`, at the top of the last private-use plane. A name that
//! really contains a character from U+10FF80–U+10FFFF has that character's
//! own four bytes escaped the same way, so the mapping is exact in both
//! directions: [`encode`]`(`[`decode`]`(b)) == b` for every byte string.
//! [`decode`] is applied where octets enter (command lines, directory
//! entries, listings a client reads) and [`encode`] where they leave
//! (replies, listings, file-system calls, command lines a client sends).
//! Logs show the escapes as `\xNN` ([`for_display`]).

use std::borrow::Cow;

/// The first character of the escape range; byte `b` maps to `BASE + b`.
const BASE: u32 = 0x10_FF00;
/// Characters at or above this one are escapes (bytes 0x80–0xFF).
const FIRST: u32 = BASE + 0x80;

fn is_escape(c: char) -> bool {
    u32::from(c) >= FIRST
}

fn escape(b: u8) -> char {
    char::from_u32(BASE + u32::from(b)).expect("U+10FF80..U+10FFFF are characters")
}

/// Octets from the wire or the file system as a path string. Valid UTF-8
/// passes unchanged (except characters of the escape range themselves).
pub fn decode(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        if !s.chars().any(is_escape) {
            return Cow::Borrowed(s);
        }
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                push_valid(&mut out, s);
                break;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                push_valid(&mut out, std::str::from_utf8(valid).expect("checked by valid_up_to"));
                // The invalid sequence's bytes, or at least one.
                let bad = e.error_len().unwrap_or(after.len()).max(1);
                for &b in &after[..bad] {
                    out.push(escape(b));
                }
                rest = &after[bad..];
            }
        }
    }
    Cow::Owned(out)
}

/// Appends valid UTF-8, escaping the bytes of escape-range characters.
fn push_valid(out: &mut String, s: &str) {
    for c in s.chars() {
        if is_escape(c) {
            let mut buf = [0u8; 4];
            for &b in c.encode_utf8(&mut buf).as_bytes() {
                out.push(escape(b));
            }
        } else {
            out.push(c);
        }
    }
}

/// A path string back as the octets it stands for.
pub fn encode(s: &str) -> Cow<'_, [u8]> {
    if !s.chars().any(is_escape) {
        return Cow::Borrowed(s.as_bytes());
    }
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        if is_escape(c) {
            out.push((u32::from(c) - BASE) as u8);
        } else {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    Cow::Owned(out)
}

/// The octets of `s` as they travel on the control connection, which is
/// a Telnet stream: a 0xFF octet (Telnet's IAC) is doubled (RFC 854; RFC
/// 2640 §3.1 for path names). The server strips Telnet sequences from
/// command lines (`line::strip_telnet`), and a reply parser undoes this
/// with [`from_control`].
pub fn to_control(s: &str) -> Vec<u8> {
    let bytes = encode(s);
    let mut out = Vec::with_capacity(bytes.len());
    for &b in bytes.iter() {
        out.push(b);
        if b == 0xFF {
            out.push(0xFF);
        }
    }
    out
}

/// A control-connection line's octets with doubled 0xFF undone, as a
/// path string (see [`to_control`]).
pub fn from_control(line: &[u8]) -> String {
    if !line.windows(2).any(|w| w == [0xFF, 0xFF]) {
        return decode(line).into_owned();
    }
    let mut out = Vec::with_capacity(line.len());
    let mut i = 0;
    while i < line.len() {
        out.push(line[i]);
        i += if line[i] == 0xFF && line.get(i + 1) == Some(&0xFF) { 2 } else { 1 };
    }
    decode(&out).into_owned()
}

/// Whether `s` stands for octets that are not UTF-8.
pub fn has_raw_octets(s: &str) -> bool {
    s.chars().any(is_escape)
}

/// `s` for people: escaped octets as `\xNN`.
pub fn for_display(s: &str) -> Cow<'_, str> {
    if !has_raw_octets(s) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if is_escape(c) {
            out.push_str(&format!("\\x{:02x}", u32::from(c) - BASE));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn utf8_passes_and_other_octets_round_trip() {
        assert!(matches!(decode(b"caf\xc3\xa9"), Cow::Borrowed("café")));
        let latin1 = decode(b"caf\xe9.txt");
        assert_eq!(latin1.chars().count(), 8);
        assert_eq!(&*encode(&latin1), b"caf\xe9.txt");
        assert_eq!(for_display(&latin1), "caf\\xe9.txt");
        assert!(has_raw_octets(&latin1) && !has_raw_octets("café"));
        // A truncated sequence at the end, and one in the middle.
        for raw in [&b"a\xe2\x82"[..], b"\xff\xfe", b"x\xc3y"] {
            assert_eq!(&*encode(&decode(raw)), raw);
        }
        // A genuine character from the escape range keeps its own bytes.
        let real = "name-\u{10FFAA}";
        let d = decode(real.as_bytes());
        assert_ne!(d, real);
        assert_eq!(&*encode(&d), real.as_bytes());
        // '/', '.' and NUL are never escaped: paths split the same way.
        assert_eq!(decode(b"a/\xff/./b"), format!("a/{}/./b", escape(0xff)));
    }

    #[test]
    fn iac_is_doubled_on_the_control_connection() {
        let name = decode(b"bad-\xff\xfe");
        assert_eq!(to_control(&name), b"bad-\xff\xff\xfe");
        assert_eq!(from_control(&to_control(&name)), name);
        assert_eq!(crate::line::strip_telnet(&to_control(&name)), b"bad-\xff\xfe");
    }

    proptest! {
        #[test]
        fn every_byte_string_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let d = decode(&bytes);
            prop_assert_eq!(&*encode(&d), &bytes[..]);
            // Decoding is a function of the octets: the same octets, the
            // same string (what makes listing and fetching agree).
            let again = encode(&d).into_owned();
            prop_assert_eq!(decode(&again), d.clone());
        }
    }
}
