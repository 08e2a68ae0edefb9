//! Encrypted, authenticated records over a UDT byte stream: what carries
//! data under `PROT P` when the data channel is `udt` (docs/udt.md,
//! "Encryption after PROT P").
//!
//! UDT has no TLS. Instead both ends of a Ferry control session take one
//! secret from the control channel's TLS session with the TLS exporter
//! (RFC 5705 / RFC 8446 §7.5, label [`EXPORTER_LABEL`]): only the two
//! parties of that TLS session know it, and its certificate checks are the
//! control channel's. Each data connection then derives its own keys:
//!
//! * **Hello.** As soon as the UDT connection is up, each side sends
//!   [`HELLO_LEN`] bytes in clear: a magic and 32 random bytes. Nothing
//!   secret is in it; a man in the middle who changes it only makes the
//!   keys differ, so the first record fails.
//! * **Keys.** HKDF-SHA256 (RFC 5869), salt = connector's random ‖
//!   acceptor's random, input = the exported secret, one AES-256-GCM key per
//!   direction (info names the direction). Both sides contribute fresh
//!   randomness, so no two data connections — of one session, or a record
//!   of one replayed into another — share a key, and (key, nonce) never
//!   repeats.
//! * **Records.** `type (1) ‖ length (4, big-endian) ‖ ciphertext ‖ tag (16)`,
//!   length = ciphertext + tag, at most [`MAX_RECORD`] bytes of plaintext;
//!   the 5-byte header is the additional authenticated data; the nonce is
//!   the record's sequence number in this direction (never sent), so a
//!   dropped, repeated or reordered record fails authentication.
//! * **End.** A sender that finishes sends an authenticated close record
//!   before UDT's shutdown; a stream that ends without it is reported as
//!   truncated, never as a complete transfer.
//! * **Failure.** A record that fails authentication, has an unknown type or
//!   a length beyond the bound poisons the reader: every later read fails
//!   with `InvalidData` and the connection aborts the UDT stream. Memory is
//!   one record buffer per direction, whatever the peer claims.
//!
//! ring does the cryptography (it is in the tree already as rustls's and
//! quinn's provider; AES-GCM with AES-NI/CLMUL, HKDF).

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::hkdf;
use ring::rand::{SecureRandom, SystemRandom};
use std::fmt;
use std::io::{self, IoSlice, Read};
use std::sync::Arc;

/// The TLS exporter label: Ferry's own, so no other protocol on the same
/// TLS session derives the same bytes (RFC 5705 §4: labels beginning
/// "EXPORTER" are for private use).
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-ferry-udt-data-v1";
/// The magic at the start of each side's hello.
pub const HELLO_MAGIC: &[u8; 8] = b"FERRYUS1";
/// Bytes of one hello: the magic and 32 random bytes.
pub const HELLO_LEN: usize = 8 + 32;
/// Largest plaintext of one record (64 KiB): what bounds a reader's memory.
pub const MAX_RECORD: usize = 64 * 1024;
/// AES-GCM's tag.
pub const TAG_LEN: usize = 16;
/// type + length.
pub const HEADER_LEN: usize = 5;
const DATA: u8 = 0x17;
const CLOSE: u8 = 0x15;

/// The secret one control session's data channels are keyed from (32 bytes
/// from the TLS exporter). `Debug` never prints it.
#[derive(Clone)]
pub struct SealSecret(Arc<[u8; 32]>);

impl SealSecret {
    pub fn new(bytes: [u8; 32]) -> Self {
        Self(Arc::new(bytes))
    }

    /// Exports the secret from an established TLS session (`None` before
    /// the handshake completed).
    pub fn export<D>(conn: &rustls::ConnectionCommon<D>) -> Option<Self> {
        conn.export_keying_material([0u8; 32], EXPORTER_LABEL, None).ok().map(Self::new)
    }
}

impl fmt::Debug for SealSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealSecret(..)")
    }
}

/// Which end of the UDT connection this is (the side that called
/// `connect`, or the listener's side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Connector,
    Acceptor,
}

/// A fresh hello to send.
pub fn hello() -> io::Result<[u8; HELLO_LEN]> {
    let mut h = [0u8; HELLO_LEN];
    h[..8].copy_from_slice(HELLO_MAGIC);
    SystemRandom::new().fill(&mut h[8..]).map_err(|_| io::Error::other("no randomness for the UDT data channel"))?;
    Ok(h)
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// The two record keys of one connection, from the session's secret and
/// both hellos.
pub fn keys(secret: &SealSecret, role: Role, ours: &[u8], theirs: &[u8]) -> io::Result<(RecordWriter, RecordReader)> {
    if theirs.len() != HELLO_LEN || &theirs[..8] != HELLO_MAGIC {
        return Err(invalid(
            "the peer did not start the encrypted UDT data channel with Ferry's hello (is it Ferry with PROT P?)",
        ));
    }
    let (c, a) = match role {
        Role::Connector => (ours, theirs),
        Role::Acceptor => (theirs, ours),
    };
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(&c[8..]);
    salt[32..].copy_from_slice(&a[8..]);
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &salt).extract(&secret.0[..]);
    let key = |info: &[u8]| -> io::Result<LessSafeKey> {
        let info = [info];
        let okm = prk.expand(&info, &AES_256_GCM).map_err(|_| io::Error::other("HKDF expand failed"))?;
        Ok(LessSafeKey::new(UnboundKey::from(okm)))
    };
    let c2a = key(b"ferry udt data: connector to acceptor")?;
    let a2c = key(b"ferry udt data: acceptor to connector")?;
    let (send, recv) = match role {
        Role::Connector => (c2a, a2c),
        Role::Acceptor => (a2c, c2a),
    };
    Ok((RecordWriter::new(send), RecordReader::new(recv)))
}

fn nonce(seq: u64) -> Nonce {
    let mut n = [0u8; NONCE_LEN];
    n[4..].copy_from_slice(&seq.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

/// Seals plaintext into records, numbering them.
pub struct RecordWriter {
    key: LessSafeKey,
    seq: u64,
    closed: bool,
}

impl fmt::Debug for RecordWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordWriter").field("seq", &self.seq).finish()
    }
}

impl RecordWriter {
    fn new(key: LessSafeKey) -> Self {
        Self { key, seq: 0, closed: false }
    }

    /// Appends to `out` one data record holding at most [`MAX_RECORD`]
    /// bytes of `bufs`, after skipping their first `skip` bytes; returns
    /// how many plaintext bytes it holds.
    pub fn seal_data(&mut self, bufs: &[IoSlice<'_>], mut skip: usize, out: &mut Vec<u8>) -> io::Result<usize> {
        if self.closed {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "the encrypted UDT data channel was closed"));
        }
        let at = out.len();
        out.extend_from_slice(&[DATA, 0, 0, 0, 0]);
        let mut taken = 0;
        for b in bufs {
            if skip >= b.len() {
                skip -= b.len();
                continue;
            }
            let n = (b.len() - skip).min(MAX_RECORD - taken);
            out.extend_from_slice(&b[skip..skip + n]);
            skip = 0;
            taken += n;
            if taken == MAX_RECORD {
                break;
            }
        }
        self.seal(out, at)?;
        Ok(taken)
    }

    /// Appends the authenticated end of the stream; nothing may follow it.
    pub fn seal_close(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        let at = out.len();
        out.extend_from_slice(&[CLOSE, 0, 0, 0, 0]);
        self.seal(out, at)?;
        self.closed = true;
        Ok(())
    }

    /// Seals the record that starts at `out[at]` (header, then plaintext).
    fn seal(&mut self, out: &mut Vec<u8>, at: usize) -> io::Result<()> {
        if self.seq == u64::MAX {
            return Err(io::Error::other("the encrypted UDT data channel ran out of record numbers"));
        }
        let len = (out.len() - at - HEADER_LEN + TAG_LEN) as u32;
        out[at + 1..at + HEADER_LEN].copy_from_slice(&len.to_be_bytes());
        let n = nonce(self.seq);
        self.seq += 1;
        let (header, body) = out[at..].split_at_mut(HEADER_LEN);
        let tag = self
            .key
            .seal_in_place_separate_tag(n, Aad::from(&*header), body)
            .map_err(|_| io::Error::other("AES-GCM sealing failed"))?;
        out.extend_from_slice(tag.as_ref());
        Ok(())
    }
}

/// Bytes a reader buffers: four largest records, so one `read` of the
/// stream takes many records at once (each read of the UDT stream takes
/// its lock and wakes its I/O thread).
const IN_CAP: usize = 4 * (HEADER_LEN + MAX_RECORD + TAG_LEN);

/// Opens records read from a byte stream: resumable (a read that times out
/// mid-record keeps what it had), bounded (a fixed buffer of [`IN_CAP`]
/// bytes, whatever the peer claims), and poisoned by the first bad record.
pub struct RecordReader {
    key: LessSafeKey,
    seq: u64,
    /// Raw bytes from the stream: `buf[start..end]` not yet opened.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Opened plaintext not yet handed out: `buf[pos..lim]` (before `start`).
    pos: usize,
    lim: usize,
    closed: bool,
    failed: Option<String>,
}

impl fmt::Debug for RecordReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordReader").field("seq", &self.seq).field("failed", &self.failed).finish()
    }
}

impl RecordReader {
    fn new(key: LessSafeKey) -> Self {
        Self { key, seq: 0, buf: vec![0u8; IN_CAP], start: 0, end: 0, pos: 0, lim: 0, closed: false, failed: None }
    }

    /// Whether a record failed (the channel is dead).
    pub fn failed(&self) -> bool {
        self.failed.is_some()
    }

    fn fail(&mut self, msg: String) -> io::Error {
        self.failed = Some(msg.clone());
        invalid(msg)
    }

    /// Reads plaintext into `out` from records read from `src`; `Ok(0)`
    /// only after the authenticated close record.
    pub fn read(&mut self, src: &mut impl Read, out: &mut [u8]) -> io::Result<usize> {
        if let Some(f) = &self.failed {
            return Err(invalid(f.clone()));
        }
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            if self.pos < self.lim {
                let n = (self.lim - self.pos).min(out.len());
                out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if self.closed {
                return Ok(0);
            }
            self.next_record(src)?;
        }
    }

    /// More bytes from `src` (at least one), moving a partial record to
    /// the front when the buffer's tail could not hold a whole one.
    fn fill(&mut self, src: &mut impl Read) -> io::Result<()> {
        if self.start > 0 && IN_CAP - self.start < HEADER_LEN + MAX_RECORD + TAG_LEN {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            self.pos = 0;
            self.lim = 0;
        }
        loop {
            match src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    let inside = self.end > self.start;
                    return Err(self.fail(format!(
                        "the encrypted UDT data channel ended without its authenticated end record \
                         (truncated after {} records{})",
                        self.seq,
                        if inside { ", inside one" } else { "" }
                    )));
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn next_record(&mut self, src: &mut impl Read) -> io::Result<()> {
        while self.end - self.start < HEADER_LEN {
            self.fill(src)?;
        }
        let h = &self.buf[self.start..self.start + HEADER_LEN];
        let (kind, len) = (h[0], u32::from_be_bytes([h[1], h[2], h[3], h[4]]) as usize);
        if kind != DATA && kind != CLOSE {
            return Err(
                self.fail(format!("encrypted UDT data channel: record {} has unknown type {kind:#x}", self.seq))
            );
        }
        if !(TAG_LEN..=MAX_RECORD + TAG_LEN).contains(&len) {
            return Err(self.fail(format!(
                "encrypted UDT data channel: record {} claims {len} bytes (the bound is {} with its tag)",
                self.seq,
                MAX_RECORD + TAG_LEN
            )));
        }
        let total = HEADER_LEN + len;
        while self.end - self.start < total {
            self.fill(src)?;
        }
        let n = nonce(self.seq);
        let (header, body) = self.buf[self.start..self.start + total].split_at_mut(HEADER_LEN);
        let plain = match self.key.open_in_place(n, Aad::from(&*header), body) {
            Ok(p) => p.len(),
            Err(_) => {
                return Err(self.fail(format!(
                    "encrypted UDT data channel: record {} failed authentication (tampered with, or not from \
                     this session's peer); the channel is closed",
                    self.seq
                )))
            }
        };
        self.seq += 1;
        self.pos = self.start + HEADER_LEN;
        self.lim = self.pos + plain;
        self.start += total;
        if kind == CLOSE {
            if plain != 0 {
                return Err(self.fail("encrypted UDT data channel: a close record with data".into()));
            }
            self.closed = true;
        }
        Ok(())
    }
}

/// Decodes arbitrary bytes as records with a fixed key (the fuzz target
/// and the hostile tests): never panics, never holds more than one record.
pub fn decode_untrusted(bytes: &[u8]) -> io::Result<Vec<u8>> {
    let secret = SealSecret::new([7u8; 32]);
    let (_, mut reader) = pair_for_tests(&secret)?;
    let mut src = bytes;
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match reader.read(&mut src, &mut chunk)? {
            0 => return Ok(out),
            n => {
                if out.len() < (1 << 20) {
                    out.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }
}

/// The fuzz target's property (`fuzz/fuzz_targets/udt_records.rs`; the
/// committed corpus is replayed by this module's tests): with an even
/// first byte the rest is decoded as untrusted records (no panic, bounded
/// memory); with an odd one the rest is sealed, one byte of the wire is
/// flipped unless the first byte is 1, and decoding must then either fail
/// or — only when nothing was flipped — return exactly the plaintext.
pub fn fuzz_check(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 1 == 0 {
        let _ = decode_untrusted(rest);
        return;
    }
    let secret = SealSecret::new([7u8; 32]);
    let (mut w, _) = pair_for_tests(&secret).expect("keys");
    let mut wire = Vec::new();
    let mut done = 0;
    while done < rest.len() {
        done += w.seal_data(&[IoSlice::new(rest)], done, &mut wire).expect("seal");
    }
    w.seal_close(&mut wire).expect("close");
    let flip = usize::from(mode >> 1);
    if flip != 0 {
        let i = (flip * 7919 + rest.len()) % wire.len();
        wire[i] ^= 0x80;
    }
    match decode_untrusted(&wire) {
        Ok(out) => assert!(flip == 0 && out == rest, "a tampered stream decoded"),
        Err(e) => assert!(flip != 0, "an intact stream failed: {e}"),
    }
}

/// A connector's writer and the acceptor's reader for fixed hellos: both
/// ends of one direction, for tests and the fuzzer.
pub fn pair_for_tests(secret: &SealSecret) -> io::Result<(RecordWriter, RecordReader)> {
    let mut hc = [1u8; HELLO_LEN];
    hc[..8].copy_from_slice(HELLO_MAGIC);
    let mut ha = [2u8; HELLO_LEN];
    ha[..8].copy_from_slice(HELLO_MAGIC);
    let (w, _) = keys(secret, Role::Connector, &hc, &ha)?;
    let (_, r) = keys(secret, Role::Acceptor, &ha, &hc)?;
    Ok((w, r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(w: &mut RecordWriter, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut done = 0;
        while done < data.len() {
            done += w.seal_data(&[IoSlice::new(data)], done, &mut out).unwrap();
        }
        out
    }

    fn close(w: &mut RecordWriter) -> Vec<u8> {
        let mut out = Vec::new();
        w.seal_close(&mut out).unwrap();
        out
    }

    fn one(w: &mut RecordWriter, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        w.seal_data(&[IoSlice::new(data)], 0, &mut out).unwrap();
        out
    }

    fn read_all(r: &mut RecordReader, mut wire: &[u8]) -> io::Result<Vec<u8>> {
        let mut got = Vec::new();
        let mut b = [0u8; 10_000];
        loop {
            match r.read(&mut wire, &mut b)? {
                0 => return Ok(got),
                n => got.extend_from_slice(&b[..n]),
            }
        }
    }

    #[test]
    fn records_round_trip_and_hide_the_plaintext() {
        let secret = SealSecret::new([9u8; 32]);
        let (mut w, mut r) = pair_for_tests(&secret).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 7) as u8).collect();
        let mut wire = sealed(&mut w, &data);
        wire.extend_from_slice(&close(&mut w));
        assert_eq!(wire.len(), data.len() + 5 * (HEADER_LEN + TAG_LEN) + HEADER_LEN + TAG_LEN);
        assert!(!wire.windows(64).any(|win| data.windows(64).take(100).any(|d| d == win)));
        assert_eq!(read_all(&mut r, &wire).unwrap(), data);
    }

    /// What sealing and opening cost without a transport: CPU seconds of
    /// this thread per GB through the record layer (a diagnostic, not a
    /// test of timing; docs/udt.md quotes it). `cargo nextest run -p
    /// ferry-io --lib seal_and_open_cost --run-ignored ignored-only
    /// --no-capture`.
    #[test]
    #[ignore]
    fn seal_and_open_cost() {
        // utime + stime of this thread, in ticks of 1/100 s (Linux's USER_HZ).
        fn cpu() -> f64 {
            let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            let f: Vec<&str> = after.split_whitespace().collect();
            (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
        }
        // Seal 1 GiB (64 MiB of records at a time, reusing the buffer),
        // then open 64 MiB of records 16 times: each phase timed whole.
        let secret = SealSecret::new([1u8; 32]);
        let block = vec![0x5au8; 64 << 20];
        let mut wire = Vec::with_capacity((64 << 20) + (64 << 20) / MAX_RECORD * (HEADER_LEN + TAG_LEN) + 64);
        let reps = 16;
        let (mut w, _) = pair_for_tests(&secret).unwrap();
        let t = cpu();
        for _ in 0..reps {
            wire.clear();
            let mut done = 0;
            while done < block.len() {
                done += w.seal_data(&[IoSlice::new(&block)], done, &mut wire).unwrap();
            }
        }
        let seal_s = cpu() - t;
        // The first 64 MiB of a fresh writer, for readers starting at 0.
        let (mut w, _) = pair_for_tests(&secret).unwrap();
        wire.clear();
        let mut done = 0;
        while done < block.len() {
            done += w.seal_data(&[IoSlice::new(&block)], done, &mut wire).unwrap();
        }
        let mut out = vec![0u8; 1 << 20];
        let t = cpu();
        for _ in 0..reps {
            let (_, mut r) = pair_for_tests(&secret).unwrap();
            let mut src = &wire[..];
            let mut got = 0;
            while got < block.len() {
                got += r.read(&mut src, &mut out).unwrap();
            }
        }
        let open_s = cpu() - t;
        let gb = (reps * block.len()) as f64 / 1e9;
        println!("seal {:.3} CPU s/GB, open (with the copy out) {:.3} CPU s/GB", seal_s / gb, open_s / gb);
    }

    /// Replays the committed corpus of the `udt_records` fuzz target.
    #[test]
    fn fuzz_corpus_replays() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/udt_records");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            fuzz_check(&std::fs::read(entry.unwrap().path()).unwrap());
            n += 1;
        }
        assert!(n >= 8, "corpus has only {n} inputs");
    }

    /// A read that times out inside a record loses nothing: the next read
    /// carries on where it stopped.
    #[test]
    fn reads_resume_after_a_timeout_mid_record() {
        struct Choppy<'a>(&'a [u8], bool);
        impl Read for Choppy<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                self.1 = !self.1;
                if self.1 {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                let n = buf.len().min(self.0.len()).min(7);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let secret = SealSecret::new([2u8; 32]);
        let (mut w, mut r) = pair_for_tests(&secret).unwrap();
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let mut wire = sealed(&mut w, &data);
        wire.extend_from_slice(&close(&mut w));
        let mut src = Choppy(&wire, false);
        let (mut got, mut b, mut timeouts) = (Vec::new(), [0u8; 3000], 0);
        loop {
            match r.read(&mut src, &mut b) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&b[..n]),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => timeouts += 1,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(timeouts > 100);
        assert_eq!(got, data);
    }

    #[test]
    fn records_gather_across_slices_after_a_skip() {
        let secret = SealSecret::new([8u8; 32]);
        let (mut w, mut r) = pair_for_tests(&secret).unwrap();
        let a = b"abc".to_vec();
        let b: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let bufs = [IoSlice::new(&a), IoSlice::new(&[]), IoSlice::new(&b)];
        let mut wire = Vec::new();
        let mut done = 0;
        while done < a.len() + b.len() {
            let n = w.seal_data(&bufs, done, &mut wire).unwrap();
            assert!(n > 0 && n <= MAX_RECORD);
            done += n;
        }
        wire.extend_from_slice(&close(&mut w));
        assert_eq!(read_all(&mut r, &wire).unwrap(), [a, b].concat());
    }

    #[test]
    fn a_flipped_bit_anywhere_fails_and_poisons_the_reader() {
        let secret = SealSecret::new([3u8; 32]);
        let (mut w, _) = pair_for_tests(&secret).unwrap();
        let mut wire = sealed(&mut w, &[5u8; 1000]);
        wire.extend_from_slice(&close(&mut w));
        for i in (0..wire.len()).step_by(37) {
            let mut bad = wire.clone();
            bad[i] ^= 0x40;
            let (_, mut r) = pair_for_tests(&secret).unwrap();
            let err = read_all(&mut r, &bad).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "byte {i}: {err}");
            assert!(r.failed());
            assert!(r.read(&mut &wire[..], &mut [0u8; 8]).is_err());
        }
    }

    #[test]
    fn truncation_replay_and_reorder_are_detected() {
        let secret = SealSecret::new([4u8; 32]);
        let (mut w, _) = pair_for_tests(&secret).unwrap();
        let a = one(&mut w, b"first");
        let b = one(&mut w, b"second");
        let close = close(&mut w);
        let fresh = || pair_for_tests(&secret).unwrap().1;
        // No close record: truncated, not a clean end.
        let e = read_all(&mut fresh(), &[a.clone(), b.clone()].concat()).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        // Cut inside a record.
        let whole = [a.clone(), b.clone(), close.clone()].concat();
        assert!(read_all(&mut fresh(), &whole[..whole.len() - 3]).is_err());
        // Reordered, replayed, dropped.
        assert!(read_all(&mut fresh(), &[b.clone(), a.clone(), close.clone()].concat()).is_err());
        assert!(read_all(&mut fresh(), &[a.clone(), a.clone(), b.clone(), close.clone()].concat()).is_err());
        assert!(read_all(&mut fresh(), &[b.clone(), close.clone()].concat()).is_err());
        assert_eq!(read_all(&mut fresh(), &whole).unwrap(), b"firstsecond");
    }

    #[test]
    fn oversized_lengths_and_garbage_fail_without_allocating() {
        let mut huge = vec![DATA];
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        huge.extend_from_slice(&[0u8; 100]);
        let e = decode_untrusted(&huge).unwrap_err();
        assert!(e.to_string().contains("claims"), "{e}");
        assert!(decode_untrusted(b"GET / HTTP/1.1\r\n\r\n").is_err());
        assert!(decode_untrusted(&[CLOSE, 0, 0, 0, 16]).is_err());
        assert!(decode_untrusted(&[]).is_err());
    }

    #[test]
    fn different_hellos_or_secrets_give_different_keys() {
        let s = SealSecret::new([1u8; 32]);
        let h1 = hello().unwrap();
        let h2 = hello().unwrap();
        assert_ne!(h1, h2);
        let (mut w, _) = keys(&s, Role::Connector, &h1, &h2).unwrap();
        let rec = one(&mut w, b"x");
        // The right acceptor opens it; one with another session's secret or
        // another hello does not.
        let (_, mut ok) = keys(&s, Role::Acceptor, &h2, &h1).unwrap();
        assert_eq!(ok.read(&mut &rec[..], &mut [0u8; 4]).unwrap(), 1);
        let (_, mut other) = keys(&SealSecret::new([2u8; 32]), Role::Acceptor, &h2, &h1).unwrap();
        assert!(other.read(&mut &rec[..], &mut [0u8; 4]).is_err());
        let h3 = hello().unwrap();
        let (_, mut replayed) = keys(&s, Role::Acceptor, &h3, &h1).unwrap();
        assert!(replayed.read(&mut &rec[..], &mut [0u8; 4]).is_err());
        assert!(keys(&s, Role::Acceptor, &h2, b"not a hello").is_err());
    }
}
