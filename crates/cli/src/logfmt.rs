//! Fields of the text log, written so that a value cannot pass for
//! something else.
//!
//! The server logs names clients chose (`path=...`). With tracing's
//! default text fields a name holding a CR, an escape sequence or
//! ` status=complete` would start a fake line, colour a terminal or add a
//! field a log reader trusts. Here every value that is not a plain word is
//! quoted and escaped as Rust escapes a string (`"a\r\u{1b}b"`), the same
//! characters the JSON log escapes; octets that are not UTF-8 show as
//! `\xNN`. The event's message is Ferry's own text and stays unquoted, with
//! control characters escaped all the same.

use std::fmt::{self, Write as _};
use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::FormatFields;

/// The text log's field formatter (see the module documentation).
#[derive(Debug, Default, Clone, Copy)]
pub struct EscapedFields;

impl<'w> FormatFields<'w> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut v = Visitor { writer, first: true, result: Ok(()) };
        fields.record(&mut v);
        v.result
    }
}

struct Visitor<'w> {
    writer: Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl Visitor<'_> {
    fn field(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        let sep = if self.first { "" } else { " " };
        self.first = false;
        let value = ferry_proto::octets::for_display(value);
        self.result = if field.name() == "message" {
            write!(self.writer, "{sep}{}", escape_controls(&value))
        } else if is_plain(&value) {
            write!(self.writer, "{sep}{}={value}", field.name())
        } else {
            write!(self.writer, "{sep}{}=\"{}\"", field.name(), value.escape_debug())
        };
    }
}

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.field(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut s = String::new();
        let _ = write!(s, "{value:?}");
        self.field(field, &s);
    }
}

/// A value that reads the same unquoted: no spaces, quotes, `=` or control
/// characters.
fn is_plain(v: &str) -> bool {
    !v.is_empty() && v.chars().all(|c| !c.is_whitespace() && !c.is_control() && c != '"' && c != '=' && c != '\\')
}

fn escape_controls(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_quoted_and_escaped_when_needed() {
        assert!(is_plain("/data/file.bin") && is_plain("127.0.0.1:2811"));
        assert!(!is_plain("a b") && !is_plain("x=y") && !is_plain("a\rb") && !is_plain(""));
        assert_eq!("/evil\u{1b}[31m\r x=1".escape_debug().to_string(), "/evil\\u{1b}[31m\\r x=1");
        assert_eq!(escape_controls("ok\nnext"), "ok\\nnext");
    }
}
