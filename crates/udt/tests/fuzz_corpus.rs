//! Replays the committed fuzz corpus of the UDT targets through the fuzz
//! checks on stable Rust (the targets run with `scripts/fuzz.sh`).

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
fn udt_packet_corpus() {
    let n = replay("udt_packet", ferry_udt::fuzz_checks::packet_decoder);
    assert!(n >= 20, "corpus has only {n} inputs");
}

#[test]
fn udt_loss_list_corpus() {
    let n = replay("udt_loss_list", ferry_udt::fuzz_checks::loss_list_decoder);
    assert!(n >= 9, "corpus has only {n} inputs");
}
