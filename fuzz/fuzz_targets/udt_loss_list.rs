//! See `ferry_udt::fuzz_checks::loss_list_decoder` for the properties checked; the
//! committed corpus is replayed on stable by `crates/udt/tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferry_udt::fuzz_checks::loss_list_decoder(data));
