//! Python's standard `ftplib` drives every command against `ferry serve`
//! (the cases live in `tests/peers/ftplib_suite.py`).

mod support;
use support::*;

#[test]
fn ftplib_suite() {
    let python = require("python3");
    let server = FerryServer::start();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/ftplib_suite.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .env("FERRY_HOST", server.addr.ip().to_string())
        .env("FERRY_PORT", server.addr.port().to_string())
        .env("FERRY_USER", ALICE.0)
        .env("FERRY_PASS", ALICE.1)
        .env("FERRY_RO_USER", BOB.0)
        .env("FERRY_RO_PASS", BOB.1)
        .env("FERRY_ROOT", server.root.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ftplib suite failed:\n{report}\nserver log:\n{}", server.log_text());
    // Every case ran (a crash before the summary would hide failures).
    assert!(report.contains("Ran 28 tests"), "{report}");
}
