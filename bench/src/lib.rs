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
