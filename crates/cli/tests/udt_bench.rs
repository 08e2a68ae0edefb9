//! Issue 17's benchmark scenarios (`ferry_bench::udt_bench`), short
//! version: one Ferry udt row and one anchor row (UDT4's own
//! appclient/appserver, built from libudt-dev's examples) on loopback,
//! memory to memory. Checks the harness end to end (both rows measure
//! something, the page and the plot are written); no figure is judged.

use ferry_bench::udt_bench::{self, PathSpec, Setup};

#[test]
fn udt_benchmark_runs_on_loopback() {
    let work = tempfile::Builder::new().prefix("ferry-udt-bench-").tempdir_in("/dev/shm").unwrap();
    let out = tempfile::tempdir().unwrap();
    let rows: Vec<_> =
        udt_bench::loopback_rows().into_iter().filter(|r| r.id == "ferry-udt" || r.id == "udt4-app").collect();
    assert_eq!(rows.len(), 2);
    let setup = Setup {
        scenario: "udt-loopback".into(),
        ferry: env!("CARGO_BIN_EXE_ferry").into(),
        ferry_old: None,
        work: work.path().to_path_buf(),
        out: out.path().to_path_buf(),
        paths: vec![PathSpec {
            name: "loopback".into(),
            one_way_ms: None,
            rate_mbit: 0.0,
            loss: 0.0,
            queue_packets: None,
            mtu: 1500,
            tcp_mem: String::new(),
            bytes: 16 << 20,
        }],
        rows,
        reps: 1,
        // Ferry's row ends long before; appclient runs this long.
        row_secs: 4,
        file_256: false,
        fair_secs: 0,
        command: "cargo nextest run -p ferry --test udt_bench".into(),
    };
    let samples = udt_bench::run(&setup).expect("the benchmark runs");
    assert_eq!(samples.len(), 2);
    for s in &samples {
        assert!(s.error.is_none(), "{s:?}");
        assert!(s.mbit > 0.0 && s.bytes > 0, "{s:?}");
        assert!(s.client_cpu_s.is_some() && s.server_cpu_s.is_some(), "{s:?}");
    }
    let page = std::fs::read_to_string(out.path().join("README.md")).unwrap();
    assert!(page.contains("| Ferry udt (ferry cc) |") && page.contains("UDT4 appclient"), "{page}");
    assert!(out.path().join("udt-loopback.svg").exists());
}
