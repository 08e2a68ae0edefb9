//! See `ferry_proto::fuzz_checks::stripe` for the properties checked; the
//! committed corpus is replayed on stable by `crates/proto/tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferry_proto::fuzz_checks::stripe(data));
