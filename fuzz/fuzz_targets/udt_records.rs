//! Encrypted UDT records (`ferry_io::transport::udt_seal`): untrusted bytes
//! decode without panicking in bounded memory, and a sealed stream with one
//! flipped byte never decodes. See `udt_seal::fuzz_check`; the committed
//! corpus is replayed on stable by that module's `fuzz_corpus_replays`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferry_io::transport::udt_seal::fuzz_check(data));
