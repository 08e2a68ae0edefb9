//! TYPE A (RFC 959 §3.1.1.1): text travels with CRLF line ends.
//!
//! The sender turns each bare LF into CRLF; the receiver turns CRLF back
//! into LF. Both are streaming, so a CR at the end of one chunk and its LF at
//! the start of the next are handled.

/// Converts local text (LF) to network text (CRLF).
#[derive(Debug, Default)]
pub struct AsciiEncoder {
    last_was_cr: bool,
}

impl AsciiEncoder {
    pub fn encode(&mut self, input: &[u8], out: &mut Vec<u8>) {
        out.reserve(input.len() + input.len() / 32);
        for &b in input {
            if b == b'\n' && !self.last_was_cr {
                out.push(b'\r');
            }
            out.push(b);
            self.last_was_cr = b == b'\r';
        }
    }
}

/// Converts network text (CRLF) to local text (LF). A CR not followed by LF
/// is kept.
#[derive(Debug, Default)]
pub struct AsciiDecoder {
    pending_cr: bool,
}

impl AsciiDecoder {
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) {
        out.reserve(input.len());
        for &b in input {
            if self.pending_cr {
                self.pending_cr = false;
                if b != b'\n' {
                    out.push(b'\r');
                }
            }
            if b == b'\r' {
                self.pending_cr = true;
            } else {
                out.push(b);
            }
        }
    }

    /// Flushes a CR held back at the very end of the stream.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.pending_cr) {
            out.push(b'\r');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(chunks: &[&[u8]]) -> Vec<u8> {
        let mut e = AsciiEncoder::default();
        let mut out = Vec::new();
        for c in chunks {
            e.encode(c, &mut out);
        }
        out
    }

    #[test]
    fn encodes_bare_lf_only() {
        assert_eq!(enc(&[b"a\nb\r\nc"]), b"a\r\nb\r\nc");
        assert_eq!(enc(&[b"a\r", b"\nb\n"]), b"a\r\nb\r\n");
    }

    proptest! {
        #[test]
        fn decode_inverts_encode_for_text_without_cr(text in "[a-z\n]{0,64}", split in 0usize..64) {
            let wire = enc(&[text.as_bytes()]);
            let split = split.min(wire.len());
            let mut d = AsciiDecoder::default();
            let mut out = Vec::new();
            d.decode(&wire[..split], &mut out);
            d.decode(&wire[split..], &mut out);
            d.finish(&mut out);
            prop_assert_eq!(out, text.as_bytes());
        }
    }
}
