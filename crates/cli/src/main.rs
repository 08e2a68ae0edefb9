//! `ferry`: one binary for serving and copying.

mod congestion;
mod copy;
mod demo;
mod logfmt;
mod probe;
mod profile;
mod serve;
mod service;
mod submit;
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
    /// Run a transfer-service node (HTTP API, dashboard, queue); `service token add` makes API tokens.
    Service(service::ServiceArgs),
    /// Submit a copy (or a job JSON file) to a transfer service; prints the job id.
    Submit(submit::SubmitArgs),
    /// List your jobs on a transfer service.
    Jobs(submit::JobsArgs),
    /// Show (or --watch) one job on a transfer service.
    Job(submit::JobArgs),
    /// Cancel a job on a transfer service.
    Cancel(submit::CancelArgs),
}

/// Flags that users of globus-url-copy, rclone, curl and lftp type, with
/// what to write instead. Checked before parsing, so the answer names the
/// Ferry spelling rather than clap's "unexpected argument".
const FOREIGN_FLAGS: &[(&[&str], &str)] = &[
    (&["-tcp-bs", "-tcp-buffer-size"], "--tcp-bs SIZE (e.g. --tcp-bs 16M)"),
    (&["-bs", "-block-size"], "--block-size SIZE"),
    (&["-parallel"], "-p N (or --parallel N)"),
    (&["-vb", "-verbose-perf"], "nothing: ferry cp shows rate and progress on a terminal (--json for a summary)"),
    (&["-dbg", "-debugftp"], "FERRY_LOG=debug ferry cp ... (the control dialogue, passwords masked)"),
    (&["-recurse"], "-r"),
    (&["-cd", "-create-dest"], "nothing: ferry cp -r creates destination directories"),
    (&["-fast"], "nothing: ferry uses MODE E with data channels kept across files by default"),
    (&["-pp", "-pipeline"], "--pipeline N (pipelining is on by default: 16 commands in flight)"),
    (&["-rst", "-restart"], "nothing: ferry resumes interrupted copies by itself (--retries N within a run)"),
    (&["-rst-retries"], "--retries N"),
    (&["-verify-checksum", "--checksum", "-c"], "--verify (or --verify=MD5, ...)"),
    (&["-f"], "--files-from FILE"),
    (&["-quiet"], "-q"),
    (&["-list"], "ferry ls URL"),
    (&["--bwlimit"], "--max-rate RATE (e.g. --max-rate 100M, bytes per second)"),
    (&["--transfers"], "--pipeline N (transfer commands in flight)"),
    (&["--multi-thread-streams"], "-p N"),
    (&["--buffer-size"], "--staging SIZE"),
    (&["--low-level-retries"], "--retries N"),
    (&["--copy-links"], "-L (--follow-links)"),
    (&["--links", "-l"], "nothing: symbolic links are copied as links where the destination can hold them"),
    (&["--ignore-existing", "--update"], "nothing: ferry cp -r skips files already complete (same size, not older)"),
    (&["--progress", "-P"], "nothing: ferry cp shows progress on a terminal"),
    (&["--filter", "--filter-from"], "--include PATTERN / --exclude PATTERN"),
    (&["--exclude-from", "--include-from"], "--include PATTERN / --exclude PATTERN, once per pattern"),
    (&["-v", "-vv", "--verbose"], "FERRY_LOG=info (or debug) ferry cp ..."),
    (
        &["-u", "--user"],
        "the user in the URL (ftp://USER@HOST:PORT/) and the password in FERRY_PASSWORD, ~/.netrc or at the prompt",
    ),
    (&["--netrc", "--netrc-optional"], "nothing: ferry reads ~/.netrc by itself"),
];

/// globus-url-copy's spellings that `ferry cp` takes as they are, with the
/// same meaning: rewritten to the Ferry flag before parsing.
const GLOBUS_SYNONYMS: &[(&str, &str)] = &[("-cc", "--concurrency"), ("-concurrency", "--concurrency")];

/// Rewrites the Globus synonyms of `ferry cp` (`-cc 4` is `--concurrency 4`).
fn globus_synonyms(mut args: Vec<String>) -> Vec<String> {
    if args.get(1).map(String::as_str) != Some("cp") {
        return args;
    }
    // `-sync-level N` (0 exists, 1 size, 2 time, 3 checksum) says what
    // `-sync` means; either alone turns it on.
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    if let Some(i) = args[..end].iter().position(|a| a == "-sync-level") {
        let level = match args.get(i + 1).map(String::as_str) {
            Some("0") => "exists",
            Some("1") => "size",
            Some("3") => "checksum",
            _ => "time",
        };
        args.splice(i..(i + 2).min(args.len()), [format!("--sync={level}")]);
        args.retain(|a| a != "-sync");
    }
    for a in args.iter_mut().skip(2).take_while(|a| *a != "--") {
        if a == "-sync" {
            *a = "--sync".into();
            continue;
        }
        let (name, value) = a.split_once('=').map_or((a.as_str(), None), |(n, v)| (n, Some(v)));
        if let Some((_, ferry)) = GLOBUS_SYNONYMS.iter().find(|(g, _)| *g == name) {
            *a = match value {
                Some(v) => format!("{ferry}={v}"),
                None => ferry.to_string(),
            };
        }
    }
    args
}

/// "did you mean" for a foreign flag given to `ferry cp`.
fn foreign_flag(args: &[String]) -> Option<String> {
    if args.get(1).map(String::as_str) != Some("cp") {
        return None;
    }
    for a in args.iter().skip(2).take_while(|a| *a != "--") {
        let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
        if let Some((_, hint)) = FOREIGN_FLAGS.iter().find(|(names, _)| names.contains(&name)) {
            return Some(format!("ferry cp has no {name}; use {hint}"));
        }
    }
    None
}

/// The log filter: FERRY_LOG, else RUST_LOG (as Rust programs read it),
/// else `default`.
pub fn log_filter(default: &str) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_env("FERRY_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default))
}

fn main() -> ExitCode {
    use std::io::IsTerminal;
    let args: Vec<String> = globus_synonyms(std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect());
    if let Some(hint) = foreign_flag(&args) {
        eprintln!("ferry: {}", ferry_client::credentials::redact(&hint));
        return ExitCode::from(2);
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // Argument errors echo what was typed: never a password.
            eprint!("{}", ferry_client::credentials::redact(&e.render().to_string()));
            return ExitCode::from(2);
        }
    };
    if !matches!(cli.command, Cmd::Serve(_) | Cmd::Service(_)) {
        // Client commands log warnings only (errors only with -q), unless
        // FERRY_LOG or RUST_LOG says more; no colour codes into a file or pipe.
        let quiet = matches!(&cli.command, Cmd::Cp(a) if a.quiet());
        tracing_subscriber::fmt()
            .with_env_filter(log_filter(if quiet { "error" } else { "warn" }))
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .init();
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
        Cmd::Service(args) => service::run(args),
        Cmd::Submit(args) => submit::submit(args),
        Cmd::Jobs(args) => submit::jobs(args),
        Cmd::Job(args) => submit::job(args),
        Cmd::Cancel(args) => submit::cancel(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferry: {}", ferry_client::credentials::redact(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}
