//! File checksums for `CKSM` and `--verify`.
//!
//! Hex output follows Globus GridFTP exactly, because globus-url-copy
//! compares checksums with `strcmp`: lowercase hex of the digest for MD5,
//! SHA and XXH128; `%08x` of the 32-bit value for ADLER32 and CRC32C.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// A running checksum of one of the supported algorithms.
#[derive(Clone)]
pub enum Checksum {
    Adler32(adler2::Adler32),
    Crc32c(u32),
    Md5(md5::Md5),
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
    Sha512(sha2::Sha512),
    Xxh128(Box<xxhash_rust::xxh3::Xxh3>),
}

impl std::fmt::Debug for Checksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Checksum({})", self.name())
    }
}

impl Checksum {
    /// A checksum by its CKSM name (case-insensitive), `None` if unknown.
    pub fn new(name: &str) -> Option<Self> {
        use sha2::Digest;
        Some(match name.to_ascii_uppercase().as_str() {
            "ADLER32" => Self::Adler32(adler2::Adler32::new()),
            "CRC32C" => Self::Crc32c(0),
            "MD5" => Self::Md5(md5::Md5::new()),
            "SHA1" => Self::Sha1(sha1::Sha1::new()),
            "SHA256" => Self::Sha256(sha2::Sha256::new()),
            "SHA512" => Self::Sha512(sha2::Sha512::new()),
            "XXH128" => Self::Xxh128(Box::new(xxhash_rust::xxh3::Xxh3::new())),
            _ => return None,
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Adler32(_) => "ADLER32",
            Self::Crc32c(_) => "CRC32C",
            Self::Md5(_) => "MD5",
            Self::Sha1(_) => "SHA1",
            Self::Sha256(_) => "SHA256",
            Self::Sha512(_) => "SHA512",
            Self::Xxh128(_) => "XXH128",
        }
    }

    pub fn update(&mut self, data: &[u8]) {
        use sha2::Digest;
        match self {
            Self::Adler32(a) => a.write_slice(data),
            Self::Crc32c(c) => *c = crc32c::crc32c_append(*c, data),
            Self::Md5(h) => h.update(data),
            Self::Sha1(h) => h.update(data),
            Self::Sha256(h) => h.update(data),
            Self::Sha512(h) => h.update(data),
            Self::Xxh128(h) => h.update(data),
        }
    }

    pub fn finish_hex(self) -> String {
        use sha2::Digest;
        match self {
            Self::Adler32(a) => format!("{:08x}", a.checksum()),
            Self::Crc32c(c) => format!("{c:08x}"),
            Self::Md5(h) => hex::encode(h.finalize()),
            Self::Sha1(h) => hex::encode(h.finalize()),
            Self::Sha256(h) => hex::encode(h.finalize()),
            Self::Sha512(h) => hex::encode(h.finalize()),
            Self::Xxh128(h) => format!("{:032x}", h.digest128()),
        }
    }
}

/// Checksums `length` bytes of `file` from `offset` (to the end when
/// `None`); a range past the end is cut there, as Globus does.
pub fn file_checksum(file: &File, algorithm: &str, offset: u64, length: Option<u64>) -> io::Result<String> {
    file_checksum_unless(file, algorithm, offset, length, &|| false)
}

/// [`file_checksum`], given up (`ConnectionAborted`) as soon as
/// `abandoned` says so between two reads. A CKSM of a large (or sparse,
/// terabyte-sized) file reads for minutes; a client that asks and hangs up
/// must not leave the server reading for nobody.
pub fn file_checksum_unless(
    file: &File,
    algorithm: &str,
    offset: u64,
    length: Option<u64>,
    abandoned: &dyn Fn() -> bool,
) -> io::Result<String> {
    let mut sum = Checksum::new(algorithm)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("unknown checksum {algorithm}")))?;
    let mut buf = vec![0u8; 4 << 20];
    let mut pos = offset;
    let mut left = length.unwrap_or(u64::MAX);
    while left > 0 {
        // No file reaches past i64::MAX (what pread takes): such an
        // offset is past the end, cut there like any other.
        if i64::try_from(pos).is_err() {
            break;
        }
        if abandoned() {
            return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "checksum abandoned"));
        }
        let want = left.min(buf.len() as u64) as usize;
        let n = match file.read_at(&mut buf[..want], pos) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        sum.update(&buf[..n]);
        pos += n as u64;
        left -= n as u64;
    }
    Ok(sum.finish_hex())
}

/// The checksum of the bytes of `ranges` of `file`, concatenated in
/// order: what `SITE PARTIAL` reports of a partial upload, and what a
/// client computes over its source before it trusts those ranges. A range
/// the file does not reach is an error (`UnexpectedEof`): the bytes it
/// names are not there.
pub fn ranges_checksum(
    file: &File,
    algorithm: &str,
    ranges: &[std::ops::Range<u64>],
    abandoned: &dyn Fn() -> bool,
) -> io::Result<String> {
    let mut sum = Checksum::new(algorithm)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("unknown checksum {algorithm}")))?;
    let mut buf = vec![0u8; 4 << 20];
    for r in ranges {
        let mut pos = r.start;
        while pos < r.end {
            if abandoned() {
                return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "checksum abandoned"));
            }
            let want = (r.end - pos).min(buf.len() as u64) as usize;
            let n = match file.read_at(&mut buf[..want], pos) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the file ends before byte {pos}"),
                    ))
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            sum.update(&buf[..n]);
            pos += n as u64;
        }
    }
    Ok(sum.finish_hex())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn ranges_checksum_concatenates_and_refuses_missing_bytes() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"hello world!").unwrap();
        assert_eq!(ranges_checksum(&f, "XXH128", &[0..5, 6..12], &|| false).unwrap(), sum("XXH128", b"helloworld!"));
        assert_eq!(ranges_checksum(&f, "XXH128", &[], &|| false).unwrap(), sum("XXH128", b""));
        assert_eq!(
            ranges_checksum(&f, "MD5", std::slice::from_ref(&(0..13)), &|| false).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }

    fn sum(alg: &str, data: &[u8]) -> String {
        let mut c = Checksum::new(alg).unwrap();
        c.update(data);
        c.finish_hex()
    }

    #[test]
    fn known_values() {
        // Globus / zlib conventions (docs/gridftp-wire-notes.md §8).
        assert_eq!(sum("ADLER32", b""), "00000001");
        assert_eq!(sum("adler32", b"a"), "00620062");
        assert_eq!(sum("ADLER32", &[0u8; 1000]), "03e80001");
        assert_eq!(sum("MD5", b""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(sum("SHA256", b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(sum("CRC32C", &[0u8; 32]), "8a9136aa");
        assert_eq!(sum("CRC32C", b"123456789"), "e3069283");
        assert_eq!(sum("XXH128", b"").len(), 32);
        assert!(Checksum::new("CRC32").is_none());
    }

    #[test]
    fn ranges_are_cut_at_the_end() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"hello world!").unwrap();
        assert_eq!(file_checksum(&f, "MD5", 0, Some(5)).unwrap(), sum("MD5", b"hello"));
        assert_eq!(file_checksum(&f, "MD5", 6, None).unwrap(), sum("MD5", b"world!"));
        assert_eq!(file_checksum(&f, "MD5", 6, Some(100)).unwrap(), sum("MD5", b"world!"));
        assert_eq!(file_checksum(&f, "MD5", 100, None).unwrap(), sum("MD5", b""));
        assert_eq!(file_checksum(&f, "MD5", u64::MAX, Some(u64::MAX)).unwrap(), sum("MD5", b""));
        assert_eq!(file_checksum(&f, "MD5", 1 << 63, Some(10)).unwrap(), sum("MD5", b""));
        assert_eq!(file_checksum(&f, "MD5", 0, Some(u64::MAX)).unwrap(), sum("MD5", b"hello world!"));
        let e = file_checksum_unless(&f, "MD5", 0, None, &|| true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionAborted);
    }
}
