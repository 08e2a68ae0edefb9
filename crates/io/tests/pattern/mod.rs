//! The bytes the UDT driver's integration tests send and check: each a
//! function of its offset, so a byte lost, repeated or put in the wrong
//! place is caught where it happens, not only by a count.

use ferry_io::udt::UdtStream;

/// The byte at stream offset `i`.
pub fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8 ^ (i as u8)
}

/// Writes the first `n` bytes of the pattern to `s`, 1 MiB at a time.
pub fn send_pattern(s: &UdtStream, n: u64) {
    let mut off = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    while off < n {
        let k = (n - off).min(buf.len() as u64) as usize;
        for (i, b) in buf[..k].iter_mut().enumerate() {
            *b = pattern(off + i as u64);
        }
        s.write_all(&buf[..k]).unwrap();
        off += k as u64;
    }
}
