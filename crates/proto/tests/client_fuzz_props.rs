//! The client parsers' fuzz properties (`ferry_proto::fuzz_checks`), run in
//! the normal suite on generated input: random bytes, and replies,
//! listings and markers shaped like the real ones, so the checks reach past
//! the framing without a fuzzer.

use ferry_proto::fuzz_checks;
use ferry_proto::{Reply, ReplyCode};
use proptest::prelude::*;

fn arb_reply() -> impl Strategy<Value = Reply> {
    let code = prop_oneof![
        Just(111u16),
        Just(112),
        Just(150),
        Just(125),
        Just(200),
        Just(211),
        Just(213),
        Just(220),
        Just(226),
        Just(227),
        Just(229),
        Just(230),
        Just(232),
        Just(250),
        Just(331),
        Just(350),
        Just(425),
        Just(530),
        Just(550),
        100u16..600,
    ];
    let text = prop_oneof![
        Just("Range Marker 0-10,20-30".to_string()),
        Just("Entering Passive Mode (127,0,0,1,4,1).".to_string()),
        Just("Entering Extended Passive Mode (|||6446|)".to_string()),
        Just(" Stripe Bytes Transferred: 99".to_string()),
        "[ -~]{0,40}",
    ];
    (code, prop::collection::vec(text, 1..4)).prop_map(|(c, lines)| {
        let code = ReplyCode::new(c).expect("in range");
        if lines.len() == 1 {
            Reply::new(code, lines[0].clone())
        } else {
            let n = lines.len();
            Reply::multiline(code, lines[0].clone(), lines[1..n - 1].to_vec(), lines[n - 1].clone())
        }
    })
}

fn wire(replies: &[Reply]) -> Vec<u8> {
    replies.iter().flat_map(|r| r.to_bytes()).collect()
}

fn arb_fact_line() -> impl Strategy<Value = String> {
    let fact = prop_oneof![
        Just("Type=file".to_string()),
        Just("Type=dir".to_string()),
        Just("Type=cdir".to_string()),
        Just("Type=OS.unix=slink:/a".to_string()),
        (0u64..u64::MAX).prop_map(|n| format!("Size={n}")),
        Just("Modify=20261121011836".to_string()),
        "UNIX.mode=[0-7]{1,5}",
        "Unique=[0-9a-f]{1,8}-[0-9a-f]{1,8}",
        "[A-Za-z.]{1,8}=[ -:<-~]{0,8}",
    ];
    (prop::collection::vec(fact, 0..6), "[ -~]{0,20}").prop_map(|(facts, name)| format!("{}; {name}", facts.join(";")))
}

proptest! {
    #[test]
    fn client_session_on_bytes(data in prop::collection::vec(any::<u8>(), 0..1024)) {
        fuzz_checks::client_session(&data);
    }

    #[test]
    fn client_session_on_replies(replies in prop::collection::vec(arb_reply(), 0..24)) {
        // A login that goes through, then anything.
        let mut data = Vec::new();
        data.extend(b"220 hi\r\n331 pw\r\n230 in\r\n211-x\r\n MLST\r\n211 End\r\n200 u\r\n");
        data.extend(wire(&replies));
        fuzz_checks::client_session(&data);
    }

    #[test]
    fn client_listing_on_lines(lines in prop::collection::vec(arb_fact_line(), 0..20), crlf in any::<bool>()) {
        let sep = if crlf { "\r\n" } else { "\n" };
        fuzz_checks::client_listing(lines.join(sep).as_bytes());
    }

    #[test]
    fn client_feat_on_replies(lines in prop::collection::vec("[ -~]{0,30}", 0..12)) {
        let body: Vec<String> = lines.iter().map(|l| format!(" {l}")).collect();
        let r = Reply::multiline(ReplyCode::SYSTEM_STATUS, "Extensions supported", body, "End.");
        fuzz_checks::client_feat(&r.to_bytes());
    }

    #[test]
    fn client_markers_on_replies(replies in prop::collection::vec(arb_reply(), 0..16)) {
        fuzz_checks::client_markers(&wire(&replies));
    }

    #[test]
    fn mode_e_reader_on_bytes(data in prop::collection::vec(any::<u8>(), 0..2048)) {
        fuzz_checks::mode_e_decoder(&data);
    }
}
