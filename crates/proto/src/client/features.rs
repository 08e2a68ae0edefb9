//! What a server says it supports in FEAT (RFC 2389 §3).
//!
//! ```text
//! 211-Extensions supported
//!  MLST Type*;Size*;Modify*;
//!  PARALLEL
//! 211 End.
//! ```
//!
//! Each feature line starts with a space and a feature name; lines that do
//! not (servers differ) are taken as they come.

use crate::reply::Reply;
use std::collections::BTreeSet;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    names: BTreeSet<String>,
    lines: Vec<String>,
}

impl Features {
    /// The features of a `211` FEAT reply; anything else (a `500` from a
    /// server without FEAT) lists none.
    pub fn parse(reply: &Reply) -> Self {
        let mut f = Features::default();
        if reply.code.get() != 211 {
            return f;
        }
        let n = reply.lines.len();
        for line in reply.lines.iter().take(n.saturating_sub(1)).skip(1) {
            let line = line.trim();
            if let Some(name) = line.split_whitespace().next() {
                f.names.insert(name.to_ascii_uppercase());
                f.lines.push(line.to_string());
            }
        }
        f
    }

    pub fn has(&self, name: &str) -> bool {
        self.names.contains(&name.to_ascii_uppercase())
    }

    /// Whether FEAT listed exactly `line` (e.g. `SITE PARTIAL`), ignoring case.
    pub fn has_line(&self, line: &str) -> bool {
        self.lines.iter().any(|l| l.eq_ignore_ascii_case(line))
    }

    /// The full FEAT line for `name` (e.g. `CKSM MD5:10;ADLER32:10;`).
    pub fn line(&self, name: &str) -> Option<&str> {
        self.lines
            .iter()
            .find(|l| l.split_whitespace().next().is_some_and(|n| n.eq_ignore_ascii_case(name)))
            .map(String::as_str)
    }

    /// Every feature line, as listed.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// Whether the server speaks GridFTP extended block mode (Globus and
    /// Ferry advertise `PARALLEL`, GFD.20).
    pub fn mode_e(&self) -> bool {
        self.has("PARALLEL")
    }

    /// Checksum algorithms the `CKSM` line lists, upper case: Globus writes
    /// `CKSM MD5:10;ADLER32:10;` (a cost after the colon), Ferry
    /// `CKSM ADLER32;MD5;`.
    pub fn checksums(&self) -> Vec<String> {
        let Some(line) = self.line("CKSM") else { return Vec::new() };
        line.split_whitespace()
            .nth(1)
            .unwrap_or("")
            .split(';')
            .filter_map(|a| a.split(':').next())
            .filter(|a| !a.is_empty())
            .map(|a| a.to_ascii_uppercase())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::ReplyParser;

    fn reply(text: &str) -> Reply {
        let mut p = ReplyParser::default();
        p.push(text.as_bytes());
        p.next_reply().unwrap().unwrap()
    }

    #[test]
    fn globus_and_ferry_feat_replies() {
        let globus = reply(
            "211-Extensions supported\r\n UTF8\r\n LANG EN\r\n DCAU\r\n PARALLEL\r\n SIZE\r\n MLST Type*;Size*;\r\n \
             ERET\r\n ESTO\r\n SPAS\r\n SPOR\r\n REST STREAM\r\n MDTM\r\n PASV AllowDelayed;\r\n \
             CKSM MD5:10;ADLER32:10;CRC32C:10;\r\n211 End.\r\n",
        );
        let f = Features::parse(&globus);
        assert!(f.mode_e() && f.has("mlst") && f.has_line("rest stream") && !f.has("SBUF"));
        assert_eq!(f.checksums(), ["MD5", "ADLER32", "CRC32C"]);
        assert_eq!(f.line("pasv"), Some("PASV AllowDelayed;"));
        assert_eq!(Features::parse(&reply("500 FEAT not understood\r\n")), Features::default());
    }
}
