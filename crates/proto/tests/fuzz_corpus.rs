//! Replays the committed fuzz corpus through the fuzz checks on stable
//! Rust, so every input the fuzzer ever kept stays clean in CI.

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        check(&std::fs::read(&path).unwrap());
        n += 1;
    }
    n
}

#[test]
fn command_parser_corpus() {
    let n = replay("command_parser", ferry_proto::fuzz_checks::command_parser);
    assert!(n >= 10, "corpus has only {n} inputs");
}

#[test]
fn mode_e_decoder_corpus() {
    assert!(replay("mode_e_decoder", ferry_proto::fuzz_checks::mode_e_decoder) >= 5);
}

#[test]
fn reply_parser_corpus() {
    assert!(replay("reply_parser", ferry_proto::fuzz_checks::reply_parser) >= 5);
}

#[test]
fn restart_ranges_corpus() {
    assert!(replay("restart_ranges", ferry_proto::fuzz_checks::restart_ranges) >= 5);
}

#[test]
fn host_port_corpus() {
    assert!(replay("host_port", ferry_proto::fuzz_checks::host_port) >= 5);
}

#[test]
fn virtual_path_corpus() {
    assert!(replay("virtual_path", ferry_proto::fuzz_checks::virtual_path) >= 5);
}

#[test]
fn transport_negotiation_corpus() {
    assert!(replay("transport_negotiation", ferry_proto::fuzz_checks::transport_negotiation) >= 5);
}

#[test]
fn client_session_corpus() {
    assert!(replay("client_session", ferry_proto::fuzz_checks::client_session) >= 5);
}

#[test]
fn client_listing_corpus() {
    assert!(replay("client_listing", ferry_proto::fuzz_checks::client_listing) >= 5);
}

#[test]
fn client_feat_corpus() {
    assert!(replay("client_feat", ferry_proto::fuzz_checks::client_feat) >= 5);
}

#[test]
fn client_markers_corpus() {
    assert!(replay("client_markers", ferry_proto::fuzz_checks::client_markers) >= 5);
}

#[test]
fn stripe_corpus() {
    assert!(replay("stripe", ferry_proto::fuzz_checks::stripe) >= 5);
}

#[test]
fn node_message_corpus() {
    assert!(replay("node_message", ferry_proto::fuzz_checks::node_message) >= 5);
}
