//! `ferry serve` and `ferry passwd`.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use ferry_server::config::{AnonymousSetting, PortRange};
use ferry_server::users::{AccessSetting, UserDb};
use ferry_server::{Server, ServerConfig};
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Anonymous {
    Off,
    Read,
    Write,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Directory to serve (overrides `root` in the config file).
    dir: Option<PathBuf>,
    /// TOML config file; flags given here override its settings.
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Control address, HOST:PORT (port 0 picks a free one). Default 127.0.0.1:2811.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Users file (see `ferry passwd`).
    #[arg(long)]
    users: Option<PathBuf>,
    /// Anonymous logins (user `anonymous` or `ftp`).
    #[arg(long, value_enum)]
    anonymous: Option<Anonymous>,
    /// Passive data ports, LOW-HIGH.
    #[arg(long)]
    passive_ports: Option<PortRange>,
    #[arg(long)]
    max_sessions: Option<usize>,
    #[arg(long)]
    max_sessions_per_ip: Option<usize>,
    /// Seconds without a command before a session is closed.
    #[arg(long)]
    idle_timeout: Option<u64>,
    /// Seconds a client has to log in.
    #[arg(long)]
    login_timeout: Option<u64>,
    /// Seconds a data connection may stall.
    #[arg(long)]
    data_timeout: Option<u64>,
    /// Milliseconds to wait before answering a failed login.
    #[arg(long)]
    login_failure_delay_ms: Option<u64>,
    /// Failed logins from one address after which it is refused for
    /// --login-lockout-secs (0: never).
    #[arg(long)]
    login_lockout_failures: Option<u32>,
    /// Seconds over which failed logins are counted, and for which a
    /// locked-out address is refused.
    #[arg(long)]
    login_lockout_secs: Option<u64>,
    /// Allow PORT/EPRT to other hosts than the client (third-party copies
    /// from this server to another host).
    #[arg(long)]
    allow_third_party: bool,
    /// Give --data-transport quic to sessions that never selected a
    /// transport (TPRT) too, as Globus's -dc-default does; without it they
    /// get TCP, which standard FTPS clients (curl, lftp) speak.
    #[arg(long)]
    data_transport_for_all: bool,
    /// Do not advertise batches (BRET/BSTO, docs/batch.md) in FEAT: Ferry
    /// clients then pipeline one command per file.
    #[arg(long)]
    no_batch: bool,
    /// Write streamed upload lines' files of 64 KiB or more with O_DIRECT
    /// (config `stream_direct`; off: through the page cache).
    #[arg(long)]
    stream_direct: bool,
    /// Cap each transfer's rate, e.g. 100M (bytes per second, all streams).
    #[arg(long, value_parser = crate::copy::parse_size)]
    max_transfer_rate: Option<u64>,
    /// Seconds between restart and performance markers (GridFTP 111/112).
    #[arg(long)]
    marker_interval: Option<u32>,
    /// Serve a virtual /dev/zero (source) and /dev/null (sink) for
    /// memory-to-memory measurements.
    #[arg(long)]
    memory_paths: bool,
    /// Size of the virtual /dev/zero, e.g. 64G.
    #[arg(long, value_parser = crate::copy::parse_size)]
    memory_zero_size: Option<u64>,
    /// MODE E data path: off (synchronous), auto (a staging ring sized from
    /// the path) or a ring size such as 16M.
    #[arg(long)]
    staging: Option<ferry_server::config::Staging>,
    /// Read and write files with O_DIRECT in MODE E (bypassing the page
    /// cache; implies a staging ring).
    #[arg(long)]
    direct_io: bool,
    /// The data channels' transport until a client selects another (TPRT,
    /// SITE SETNETSTACK), as Globus's -dc-default. Ferry has: tcp, udt
    /// (clear data only: refused under PROT P) and quic (needs --tls-cert).
    #[arg(long, value_name = "NAME")]
    data_transport: Option<String>,
    /// The congestion controller of data channels, for every transport
    /// that has it: udt's ferry (default), udt (DAIMD) or blast:RATE;
    /// quic's ferry (default: the same rate-based controller), bbr, cubic
    /// or newreno.
    #[arg(long, value_name = "NAME", value_parser = crate::congestion::parse_name)]
    congestion: Option<String>,
    /// PEM certificate chain for AUTH TLS (explicit FTPS, RFC 4217).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Refuse USER/PASS until the client has switched to TLS (530).
    #[arg(long)]
    require_tls: bool,
    /// Refuse transfers whose data connections are not protected (PROT P).
    #[arg(long)]
    require_protected_data: bool,
    /// PEM CA certificates that client certificates are verified against.
    #[arg(long)]
    tls_client_ca: Option<PathBuf>,
    /// PEM CA certificates that other servers' certificates are verified
    /// against in third-party copies over QUIC (DCAU S; docs/transports.md).
    #[arg(long, requires = "tls_cert")]
    tls_peer_ca: Option<PathBuf>,
    /// Client-certificate map: lines of `"<subject DN>" user` (grid-mapfile).
    #[arg(long)]
    cert_map: Option<PathBuf>,
    /// On SIGTERM, seconds that transfers in progress may take to finish
    /// before the server exits (default 60).
    #[arg(long)]
    shutdown_grace: Option<u64>,
    /// Log format on standard error.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Serve Prometheus metrics (sessions, logins, transfers, bytes) at
    /// http://ADDR/metrics, e.g. 127.0.0.1:9811.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Largest file an upload may create, e.g. 4T (default 4 TiB).
    #[arg(long, value_parser = crate::copy::parse_size)]
    max_file_size: Option<u64>,
    /// Seconds an abandoned partial upload is kept (0: for ever; default a week).
    #[arg(long, value_name = "SECS")]
    partial_expiry: Option<u64>,
    /// Checksums computed at once, server-wide (default 4).
    #[arg(long)]
    max_checksums: Option<usize>,
    /// Data connections one session may have (default 64).
    #[arg(long)]
    max_data_connections_per_session: Option<usize>,
    /// Data connections the whole server may have (default 1024).
    #[arg(long)]
    max_data_connections: Option<usize>,
    // --- Striping (issue 20, docs/striping.md) ---
    /// Run as a data node of a striped server: no user sessions; only
    /// front ends that prove --node-secret may use it.
    #[arg(long, requires = "node_secret", conflicts_with = "stripe_nodes")]
    data_node: bool,
    /// Run as a striping front end over these data nodes, HOST:PORT,...
    #[arg(long, value_delimiter = ',', requires = "node_secret")]
    stripe_nodes: Vec<SocketAddr>,
    /// File holding the secret front end and data nodes share (mode 600).
    #[arg(long)]
    node_secret: Option<PathBuf>,
}

pub fn init_logging(format: LogFormat) {
    let filter = crate::log_filter("info");
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    if format == LogFormat::Json {
        builder.json().init();
    } else {
        // Field values (file names) cannot forge fields or lines, nor
        // reach a terminal as escape codes (crate::logfmt).
        builder.fmt_fields(crate::logfmt::EscapedFields).init();
    }
}

pub fn config_from(args: &ServeArgs) -> anyhow::Result<ServerConfig> {
    let mut c = match &args.config {
        Some(p) => ServerConfig::load(p)?,
        None => ServerConfig::default(),
    };
    match (&args.dir, &args.config) {
        (Some(d), _) => c.root = d.clone(),
        (None, None) => {
            bail!("say which directory to serve: ferry serve DIR (or root = \"...\" in --config)")
        }
        (None, Some(_)) => {}
    }
    if let Some(v) = args.listen {
        c.listen = v;
    }
    if let Some(v) = &args.users {
        c.users = Some(v.clone());
    }
    if let Some(v) = args.anonymous {
        c.anonymous = match v {
            Anonymous::Off => AnonymousSetting::Off,
            Anonymous::Read => AnonymousSetting::Read,
            Anonymous::Write => AnonymousSetting::Write,
        };
    }
    if let Some(v) = args.passive_ports {
        c.passive_ports = Some(v);
    }
    if let Some(v) = args.max_sessions {
        c.max_sessions = v;
    }
    if let Some(v) = args.max_sessions_per_ip {
        c.max_sessions_per_ip = v;
    }
    if let Some(v) = args.idle_timeout {
        c.idle_timeout_secs = v;
    }
    if let Some(v) = args.login_timeout {
        c.login_timeout_secs = v;
    }
    if let Some(v) = args.data_timeout {
        c.data_timeout_secs = v;
    }
    if let Some(v) = args.login_failure_delay_ms {
        c.login_failure_delay_ms = v;
    }
    if let Some(v) = args.login_lockout_failures {
        c.login_lockout_failures = v;
    }
    if let Some(v) = args.login_lockout_secs {
        c.login_lockout_secs = v;
    }
    if args.allow_third_party {
        c.allow_third_party = true;
    }
    if args.data_transport_for_all {
        c.data_transport_for_all = true;
    }
    if args.no_batch {
        c.batch = false;
    }
    if args.stream_direct {
        c.stream_direct = true;
    }
    if let Some(v) = args.max_transfer_rate {
        c.max_transfer_rate = Some(v);
    }
    if let Some(v) = args.marker_interval {
        c.marker_interval_secs = v;
    }
    if args.memory_paths {
        c.memory_paths = true;
    }
    if let Some(v) = args.memory_zero_size {
        c.memory_zero_size = v;
    }
    if let Some(v) = &args.tls_cert {
        c.tls_cert = Some(v.clone());
    }
    if let Some(v) = &args.tls_key {
        c.tls_key = Some(v.clone());
    }
    if args.require_tls {
        c.require_tls = true;
    }
    if args.require_protected_data {
        c.require_protected_data = true;
    }
    if let Some(v) = &args.tls_client_ca {
        c.tls_client_ca = Some(v.clone());
    }
    if let Some(v) = &args.tls_peer_ca {
        c.tls_peer_ca = Some(v.clone());
    }
    if let Some(v) = &args.cert_map {
        c.cert_map = Some(v.clone());
    }
    if let Some(v) = args.staging {
        c.staging = v;
    }
    if let Some(t) = &args.data_transport {
        c.data_transport = t.clone();
    }
    // A process-wide choice, made here at the edge.
    crate::congestion::apply_for_server(args.congestion.as_deref(), c.max_transfer_rate)?;
    // The buffered path, for measurements (docs/data-path.md): chosen
    // here, passed down explicitly.
    c.data_path = crate::copy::data_path_from_env();
    if args.direct_io {
        c.direct_io = true;
    }
    if let Some(v) = args.shutdown_grace {
        c.shutdown_grace_secs = v;
    }
    if let Some(v) = args.max_file_size {
        c.max_file_size = v;
    }
    if let Some(v) = args.partial_expiry {
        c.partial_expiry_secs = v;
    }
    if let Some(v) = args.max_checksums {
        c.max_checksums = v;
    }
    if let Some(v) = args.max_data_connections_per_session {
        c.max_data_connections_per_session = v;
    }
    if let Some(v) = args.max_data_connections {
        c.max_data_connections = v;
    }
    if !args.stripe_nodes.is_empty() {
        c.stripe_nodes = args.stripe_nodes.clone();
    }
    if let Some(v) = &args.node_secret {
        c.node_secret = Some(v.clone());
    }
    if c.striped() {
        let path = c.node_secret.as_ref().context("--stripe-nodes needs --node-secret")?;
        ferry_server::stripe::load_secret(path)?;
    }
    Ok(c)
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    init_logging(args.log_format);
    let config = config_from(&args)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    if args.data_node {
        // Striping (issue 20): a data node, not a server of sessions.
        let secret = ferry_server::stripe::load_secret(args.node_secret.as_deref().context("--node-secret")?)?;
        let (root, listen, data_timeout) = (config.root.clone(), config.listen, config.data_timeout());
        let mut node = ferry_server::stripe::node::DataNodeConfig::new(root, listen, secret, data_timeout);
        node.passive_ports = config.passive_ports.map(|r| (r.low, r.high));
        // PROT P data connections with the front end's certificate.
        node.tls = ferry_server::tls::ServerTls::from_config(&config)?.map(|t| t.data);
        rt.block_on(ferry_server::stripe::node::serve_until_signal(node))?;
        return Ok(ExitCode::SUCCESS);
    }
    rt.block_on(async move {
        let root = config.root.clone();
        let anonymous = config.anonymous;
        let server = Server::bind(config).await?;
        let addr = server.local_addr()?;
        if let Some(m) = args.metrics {
            let at = ferry_server::metrics::serve(m, server.metrics()).await?;
            tracing::info!(%at, "metrics at http://{at}/metrics");
        }
        if server.user_count() == 0 && anonymous == AnonymousSetting::Off {
            tracing::warn!("no users and anonymous access is off: nobody can log in (see ferry passwd)");
        }
        // The first line on stdout says where we listen; scripts and tests
        // that start the server with port 0 read it.
        // ftp:// without a port means 21; say the URL to use, port and all.
        let host = if addr.ip().is_unspecified() {
            std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or("HOST".into())
        } else if addr.is_ipv6() {
            format!("[{}]", addr.ip())
        } else {
            addr.ip().to_string()
        };
        let port = addr.port();
        let banner = format!(
            "ferry: serving {} on ftp://{addr}/\n\
             ferry: clients use ftp://USER@{host}:{port}/ (the port is part of the URL), e.g. ferry ls ftp://USER@{host}:{port}/\n",
            root.display()
        );
        // One write: a reader that takes the first line and goes away
        // must not make the second one fail (EPIPE would stop the server).
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(banner.as_bytes()).and_then(|_| out.flush());
        drop(out);
        let handle = server.handle();
        server
            .run(async move {
                use tokio::signal::unix::{signal, SignalKind};
                let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
                let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
                loop {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => break,
                        _ = term.recv() => break,
                        _ = hup.recv() => match handle.reload() {
                            Ok(what) => tracing::info!(reloaded = %what, "SIGHUP: reloaded"),
                            Err(e) => tracing::error!(error = %format!("{e:#}"), "SIGHUP: reload failed; the old settings stay"),
                        },
                    }
                }
                tracing::info!("shutting down: no new connections; transfers in progress may finish");
            })
            .await?;
        tracing::info!("stopped");
        Ok(ExitCode::SUCCESS)
    })
}

#[derive(Debug, Args)]
pub struct PasswdArgs {
    /// The users file to change (created if missing).
    #[arg(long)]
    users: PathBuf,
    /// User name.
    name: String,
    /// The user's root inside the served directory (absolute, e.g.
    /// /alice). New users get /; an existing user keeps theirs.
    #[arg(long)]
    root: Option<String>,
    /// Allow uploads, deletes, renames and directory changes. New users
    /// are read-only unless given this; an existing user keeps theirs.
    #[arg(long, conflicts_with = "read_only")]
    write: bool,
    /// Make the user read-only.
    #[arg(long)]
    read_only: bool,
    /// Allow the user to run the server-side profiler (SITE PROFILE: host
    /// CPU, disk and network figures, for `ferry profile`).
    #[arg(long, conflicts_with = "no_profile")]
    profile: bool,
    /// Withdraw the profiling permission.
    #[arg(long)]
    no_profile: bool,
    /// Remove the user instead.
    #[arg(long)]
    delete: bool,
}

/// The new password: asked twice without echo on a terminal, else the
/// first line of standard input (for scripts).
fn read_new_password(name: &str) -> anyhow::Result<String> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password(format!("New password for {name}: "))
            .context("reading the password from the terminal")?;
        let again = rpassword::prompt_password("Again: ").context("reading the password from the terminal")?;
        if first != again {
            bail!("the two passwords differ; nothing was changed");
        }
        return Ok(first);
    }
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).context("reading the password from standard input")?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

pub fn passwd(args: PasswdArgs) -> anyhow::Result<ExitCode> {
    let mut db = UserDb::load(&args.users)?;
    let what = if args.delete {
        if !db.remove(&args.name) {
            bail!("no user {} in {}", args.name, args.users.display());
        }
        "removed"
    } else {
        // Changing a password changes nothing else: root, access and the
        // profiling permission stay as they were unless a flag says.
        let existing = db.get(&args.name).cloned();
        let root =
            args.root.clone().or_else(|| existing.as_ref().map(|e| e.root.clone())).unwrap_or_else(|| "/".into());
        let access = if args.write {
            AccessSetting::Write
        } else if args.read_only {
            AccessSetting::Read
        } else {
            existing.as_ref().map(|e| e.access).unwrap_or(AccessSetting::Read)
        };
        let profile = if args.profile {
            true
        } else if args.no_profile {
            false
        } else {
            existing.as_ref().is_some_and(|e| e.profile)
        };
        let password = read_new_password(&args.name)?;
        db.set(&args.name, &password, &root, access)?;
        db.set_profile(&args.name, profile);
        if existing.is_some() {
            "changed"
        } else {
            "added"
        }
    };
    db.save(&args.users)?;
    let entry = db.get(&args.name);
    let access = entry.map(|e| match e.access {
        AccessSetting::Write => "read-write",
        AccessSetting::Read => "read-only",
    });
    match (entry, access) {
        (Some(e), Some(access)) => eprintln!(
            "ferry: {what} {} in {} ({access}, root {}{})",
            args.name,
            args.users.display(),
            e.root,
            if e.profile { ", may profile" } else { "" }
        ),
        _ => eprintln!("ferry: {what} {} in {}", args.name, args.users.display()),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        serve: ServeArgs,
    }

    #[test]
    fn flags_override_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ferry.toml");
        std::fs::write(
            &file,
            "root = \"/srv/a\"\nlisten = \"0.0.0.0:2811\"\nanonymous = \"read\"\nmax_sessions = 7\nidle_timeout_secs = 9\n",
        )
        .unwrap();
        let args = Wrapper::parse_from(["x", "--config", file.to_str().unwrap()]).serve;
        let c = config_from(&args).unwrap();
        assert_eq!(
            (c.root.to_str(), c.listen.port(), c.max_sessions, c.idle_timeout_secs),
            (Some("/srv/a"), 2811, 7, 9)
        );
        assert_eq!(c.anonymous, AnonymousSetting::Read);
        let args = Wrapper::parse_from([
            "x",
            "/srv/b",
            "--config",
            file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--anonymous",
            "off",
            "--idle-timeout",
            "30",
        ])
        .serve;
        let c = config_from(&args).unwrap();
        assert_eq!((c.root.to_str(), c.listen.port(), c.max_sessions, c.idle_timeout_secs), (Some("/srv/b"), 0, 7, 30));
        assert_eq!(c.anonymous, AnonymousSetting::Off);
        // Without a directory or a config file there is nothing to serve.
        assert!(config_from(&Wrapper::parse_from(["x"]).serve).is_err());
    }

    #[test]
    fn the_example_config_and_the_systemd_unit_fit_the_server() {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let example = repo.join("ferry.example.toml");
        let args = Wrapper::parse_from(["x", "--config", example.to_str().unwrap()]).serve;
        let c = config_from(&args).unwrap();
        assert_eq!((c.listen.port(), c.shutdown_grace_secs), (2811, 60));
        assert_eq!(c.passive_ports.map(|p| (p.low, p.high)), Some((50000, 50999)));
        let unit = std::fs::read_to_string(repo.join("dist/ferry.service")).unwrap();
        assert!(unit.contains("ExecReload=/bin/kill -HUP $MAINPID") && unit.contains("--config /etc/ferry/ferry.toml"));
        // systemd must wait longer than the grace period before SIGKILL.
        let stop: u64 = unit.lines().find_map(|l| l.strip_prefix("TimeoutStopSec=")).unwrap().parse().unwrap();
        assert!(stop > c.shutdown_grace_secs);
    }
}
