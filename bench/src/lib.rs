//! Ferry's benchmark harness: runs Ferry beside its anchors (Globus
//! GridFTP, iperf3, fio) on the same data in the same invocation, and
//! writes raw per-run records, Markdown tables and SVG plots.
//!
//! `bench/README.md` describes the scenarios and how to run them.

pub mod bottlenecks;
pub mod data;
pub mod disk_io;
pub mod error;
pub mod machine;
pub mod net;
pub mod plot;
pub mod proc;
pub mod publish;
pub mod quic_bench;
pub mod record;
pub mod report;
pub mod runner;
pub mod scenarios;
pub mod servers;
pub mod small_files;
pub mod stats;
pub mod stripe;
mod sys;
pub mod tools;
pub mod tune_report;
pub mod udt_bench;

/// Every `ferry cp` a benchmark starts begins cold unless its row says
/// otherwise: the client's path cache would carry a rate from one row, path
/// or run into the next (the emulated paths share their addresses) and make
/// the figures depend on the order of the rows. A `FERRY_PATH_CACHE` already
/// set is kept, so a run can ask for warm rows. Call first in `main`, before
/// any thread starts.
pub fn forget_path_rates() {
    if std::env::var_os("FERRY_PATH_CACHE").is_none() {
        std::env::set_var("FERRY_PATH_CACHE", "off");
    }
}
