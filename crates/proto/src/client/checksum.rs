//! Choosing a checksum algorithm both ends of a copy have (`--verify`),
//! and comparing the digests they report.
//!
//! GFD.47 (`CKSM`) names algorithms, and a server lists the ones it has in
//! FEAT (`CKSM ADLER32,MD5,...`). With `auto` the client takes the first of
//! [`PREFERENCE`] that every server involved lists: fast non-cryptographic
//! hashes first, since verification guards against corruption, not
//! forgery.

/// The order `auto` tries algorithms in.
pub const PREFERENCE: [&str; 7] = ["XXH128", "MD5", "ADLER32", "CRC32C", "SHA256", "SHA1", "SHA512"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChecksumChoiceError {
    #[error("cannot verify: the servers have no checksum algorithm in common (CKSM)")]
    NoneInCommon,
    #[error("cannot verify with {requested}: supported at both ends are {}", supported.join(", "))]
    Unsupported { requested: String, supported: Vec<String> },
}

/// The algorithm to verify with: `requested` (a name, or `auto`; any
/// case), if every end supports it. `supported`: upper-case names every
/// end has.
pub fn choose(requested: &str, supported: &[String]) -> Result<String, ChecksumChoiceError> {
    let requested = requested.to_ascii_uppercase();
    if requested == "AUTO" {
        return PREFERENCE
            .into_iter()
            .find(|a| supported.iter().any(|s| s == a))
            .map(str::to_string)
            .ok_or(ChecksumChoiceError::NoneInCommon);
    }
    if supported.contains(&requested) {
        Ok(requested)
    } else {
        Err(ChecksumChoiceError::Unsupported { requested, supported: supported.to_vec() })
    }
}

/// The algorithms two ends have in common, in `a`'s order.
pub fn common(a: Vec<String>, b: &[String]) -> Vec<String> {
    a.into_iter().filter(|x| b.contains(x)).collect()
}

/// Whether two hex digests are the same value: gfal2 compares ignoring
/// case and leading zeros (an ADLER32 may come with or without them), and
/// so does Ferry.
pub fn same_digest(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.trim_start_matches('0').to_ascii_lowercase();
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn auto_takes_the_first_preferred_algorithm_both_ends_have() {
        let both = common(names(&["SHA1", "MD5", "ADLER32"]), &names(&["ADLER32", "MD5"]));
        assert_eq!(both, names(&["MD5", "ADLER32"]));
        assert_eq!(choose("auto", &both).unwrap(), "MD5");
        assert_eq!(choose("adler32", &both).unwrap(), "ADLER32");
        assert_eq!(choose("auto", &[]), Err(ChecksumChoiceError::NoneInCommon));
        let e = choose("sha512", &both).unwrap_err();
        assert_eq!(e.to_string(), "cannot verify with SHA512: supported at both ends are MD5, ADLER32");
    }

    #[test]
    fn digests_compare_without_case_or_leading_zeros() {
        assert!(same_digest("00aBc1", "abc1"));
        assert!(!same_digest("abc1", "abc2"));
    }
}
