//! Bytes from the network through the control-channel parsers: line
//! framing, command parsing and the session state machine (the checks are
//! in `ferry_proto::fuzz_checks`, shared with the corpus replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferry_proto::fuzz_checks::command_parser(data));
