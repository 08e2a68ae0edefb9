//! `ferry`: one binary for serving and copying.

mod copy;
mod demo;
mod probe;
mod profile;
mod serve;
mod tune;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "ferry", version, about = "Fast, GridFTP-compatible bulk data transfer", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Serve a directory over FTP/GridFTP.
    Serve(serve::ServeArgs),
    /// Add, change or remove a user in a users file (password on stdin).
    Passwd(serve::PasswdArgs),
    /// Copy files or trees between local paths and servers.
    Cp(copy::CpArgs),
    /// List a directory on a server.
    Ls(copy::LsArgs),
    /// Create a directory on a server.
    Mkdir(copy::MkdirArgs),
    /// Remove a file or directory on a server.
    Rm(copy::RmArgs),
    /// Start a server on a temporary directory and copy a file through it.
    Demo(demo::DemoArgs),
    /// Run a transfer while both ends sample CPU, disks, network and every
    /// stream's TCP state; write report.html/report.json and say what limits it.
    Profile(profile::ProfileArgs),
    /// Measure the path to a server: RTT, rate, bandwidth-delay product, buffer advice.
    Probe(probe::ProbeArgs),
    /// Find the fastest streams/buffer/block/staging settings for a server by measuring.
    Tune(tune::TuneArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Cmd::Serve(_)) {
        // Client commands log warnings only, unless FERRY_LOG says more.
        let filter = tracing_subscriber::EnvFilter::try_from_env("FERRY_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    }
    let result = match cli.command {
        Cmd::Serve(args) => serve::run(args),
        Cmd::Passwd(args) => serve::passwd(args),
        Cmd::Cp(args) => copy::cp(args),
        Cmd::Ls(args) => copy::ls(args),
        Cmd::Mkdir(args) => copy::mkdir(args),
        Cmd::Rm(args) => copy::rm(args),
        Cmd::Demo(args) => demo::run(args),
        Cmd::Profile(args) => profile::run(args),
        Cmd::Probe(args) => tune::block_on(probe::run(args)),
        Cmd::Tune(args) => tune::block_on(tune::run(args)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferry: {e:#}");
            ExitCode::FAILURE
        }
    }
}
