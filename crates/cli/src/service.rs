//! `ferry service`: run a transfer-service node; `ferry service token`.

use anyhow::Context;
use clap::{Args, Subcommand};
use ferry_service::credentials::{Credentials, NoCredentials, UrlFile};
use ferry_service::node::NodeConfig;
use ferry_service::store::Store;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServiceArgs {
    #[command(subcommand)]
    command: Option<ServiceCmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum ServiceCmd {
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCmd,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCmd {
    /// Create a token for USER and print it (on the last line).
    Add {
        user: String,
        #[command(flatten)]
        db: DbArg,
        /// The user sees and cancels every user's jobs.
        #[arg(long)]
        admin: bool,
    },
    /// Remove every token (and dashboard session) of USER.
    Revoke {
        user: String,
        #[command(flatten)]
        db: DbArg,
    },
}

#[derive(Debug, Args)]
struct DbArg {
    /// The database: sqlite:PATH (embedded, one node) or
    /// postgres://USER@HOST:PORT/DB (shared by several nodes). Default:
    /// sqlite: in $XDG_STATE_HOME/ferry/service.db (~/.local/state/...).
    #[arg(long, env = "FERRY_SERVICE_DB")]
    db: Option<String>,
}

impl DbArg {
    fn url(&self) -> anyhow::Result<String> {
        if let Some(u) = &self.db {
            return Ok(u.clone());
        }
        let base = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
            .context("no --db, and neither XDG_STATE_HOME nor HOME is set")?
            .join("ferry");
        std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
        Ok(format!("sqlite:{}", base.join("service.db").display()))
    }
}

/// Parses `90`, `90s`, `500ms`, `5m`, `2h`, `7d`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit() && c != '.').map_or((s, "s"), |i| s.split_at(i));
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration (e.g. 30s, 500ms, 5m, 7d)"))?;
    let secs = match unit {
        "ms" => n / 1e3,
        "s" | "" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h, d)")),
    };
    if !(secs > 0.0 && secs < 1e9) {
        return Err(format!("{s:?} must be positive"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    db: DbArg,
    /// HTTP address of the API and dashboard (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:2880")]
    listen: SocketAddr,
    /// Serve the API and dashboard over HTTPS with this certificate chain
    /// (PEM, leaf first). Without it the service speaks plain HTTP, which
    /// is fit for loopback only: tokens and session cookies would travel
    /// in clear.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// This node's name in the database (default: host name and a random suffix).
    #[arg(long)]
    node_id: Option<String>,
    /// A file of ftp://user:password@host:port URLs (mode 600): the
    /// passwords this node logs in with (then ~/.netrc). Job URLs never
    /// carry passwords.
    #[arg(long, value_name = "FILE")]
    credentials: Option<PathBuf>,
    /// How long a claimed file stays this node's without renewal.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    lease: Duration,
    /// How often leases are renewed and byte counters reported (default: a
    /// sixth of --lease, at most half the optimiser interval).
    #[arg(long, value_parser = parse_duration)]
    heartbeat: Option<Duration>,
    /// How often the optimiser re-decides each link.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    optimiser_interval: Duration,
    /// Transfers a link starts with and never goes below.
    #[arg(long, default_value_t = 2)]
    min_active: u32,
    /// The most transfers the optimiser allows on one link.
    #[arg(long, default_value_t = 16)]
    max_active_per_link: u32,
    /// The most transfers at once to or from one storage endpoint (host:port).
    #[arg(long, default_value_t = 64)]
    max_active_per_endpoint: i64,
    /// The most parallel streams the optimiser gives a transfer.
    #[arg(long, default_value_t = 8)]
    max_streams: u32,
    /// Transfers this node runs at once, over all links.
    #[arg(long, default_value_t = 64)]
    max_transfers: usize,
    /// The most files one job may hold.
    #[arg(long, default_value_t = ferry_service::job::DEFAULT_MAX_FILES)]
    max_files: usize,
    /// Finished jobs are deleted this long after they finished.
    #[arg(long, default_value = "7d", value_parser = parse_duration)]
    purge_after: Duration,
    /// Control-channel and data-stall timeout of each copy.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    timeout: Duration,
    /// How often the queue is looked at for files to start.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    tick: Duration,
    /// Only claim files between these storage endpoints (host or
    /// host:port, comma-separated): for nodes that reach only some sites.
    #[arg(long, value_delimiter = ',')]
    endpoints: Vec<String>,
    #[command(flatten)]
    tls: crate::copy::TlsArgs,
}

pub fn run(args: ServiceArgs) -> anyhow::Result<ExitCode> {
    let rt = crate::copy::runtime()?;
    match args.command {
        Some(ServiceCmd::Token { command: TokenCmd::Add { user, db, admin } }) => rt.block_on(async {
            if !ferry_service::auth::valid_user(&user) {
                anyhow::bail!("{user:?} is not a valid user name (letters, digits, - _ . @; at most 64)");
            }
            let url = db.url()?;
            let store = Store::connect(&url).await.with_context(|| format!("cannot open {url}"))?;
            let token = store.add_token(&user, admin).await?;
            eprintln!(
                "ferry: token for {user}{} (shown once; the database keeps only its hash):",
                if admin { " (admin)" } else { "" }
            );
            println!("{token}");
            Ok(ExitCode::SUCCESS)
        }),
        Some(ServiceCmd::Token { command: TokenCmd::Revoke { user, db } }) => rt.block_on(async {
            let url = db.url()?;
            let store = Store::connect(&url).await.with_context(|| format!("cannot open {url}"))?;
            let n = store.revoke_tokens(&user).await?;
            eprintln!("ferry: removed {n} token{} of {user}", if n == 1 { "" } else { "s" });
            Ok(ExitCode::SUCCESS)
        }),
        None => run_node(args.run, rt),
    }
}

fn run_node(a: RunArgs, rt: tokio::runtime::Runtime) -> anyhow::Result<ExitCode> {
    crate::serve::init_logging(crate::serve::LogFormat::Text);
    let creds: Arc<dyn Credentials> = match &a.credentials {
        Some(p) => Arc::new(UrlFile::load(p)?),
        None => Arc::new(NoCredentials),
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "node".into());
    let node_id =
        a.node_id.clone().unwrap_or_else(|| format!("{}-{}", host.trim(), &ferry_service::auth::new_secret("")[..6]));
    let mut config = NodeConfig::new(node_id.clone());
    config.lease = a.lease;
    // Heartbeats also carry the byte counters the optimiser measures
    // throughput from: at least two per optimiser interval.
    config.heartbeat = a.heartbeat.unwrap_or((a.lease / 6).min(a.optimiser_interval / 2));
    config.optimiser_interval = a.optimiser_interval;
    config.limits.min_active = a.min_active.max(1);
    config.limits.max_active = a.max_active_per_link.max(config.limits.min_active);
    config.limits.max_streams = a.max_streams.clamp(1, 64);
    config.max_active_per_endpoint = a.max_active_per_endpoint.max(1);
    config.max_transfers = a.max_transfers.max(1);
    config.purge_after = a.purge_after;
    config.timeout = a.timeout;
    config.tick = a.tick;
    config.tls = a.tls.options();
    config.endpoints = (!a.endpoints.is_empty()).then(|| a.endpoints.clone());
    if config.heartbeat >= config.lease {
        anyhow::bail!("--heartbeat must be shorter than --lease");
    }
    let https = https_config(&a)?;
    if https.is_none() && !a.listen.ip().is_loopback() {
        tracing::warn!(
            listen = %a.listen,
            "the API listens beyond loopback over plain HTTP: tokens and dashboard sessions travel in clear (give --tls-cert and --tls-key)"
        );
    }
    rt.block_on(async move {
        let url = a.db.url()?;
        let store = Store::connect(&url).await.with_context(|| format!("cannot open the database {}", redact(&url)))?;
        let listener =
            tokio::net::TcpListener::bind(a.listen).await.with_context(|| format!("cannot listen on {}", a.listen))?;
        let addr = listener.local_addr()?;
        // The first line on stdout says where we listen (tests use port 0).
        let mut out = std::io::stdout().lock();
        let scheme = if https.is_some() { "https" } else { "http" };
        writeln!(out, "ferry: service node {node_id} on {scheme}://{addr}/ with {}", redact(&url))?;
        out.flush()?;
        drop(out);
        let serve = ferry_service::serve(store, listener, config, creds, a.max_files, https);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = serve => r?,
            _ = tokio::signal::ctrl_c() => {},
            _ = term.recv() => {},
        }
        // Leases not renewed expire; other nodes (or this one, restarted)
        // resume the transfers from their restart ranges.
        tracing::info!("service node stopping");
        Ok(ExitCode::SUCCESS)
    })
}

/// The HTTPS listener's TLS settings, from --tls-cert and --tls-key.
fn https_config(a: &RunArgs) -> anyhow::Result<Option<Arc<rustls::ServerConfig>>> {
    let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) else { return Ok(None) };
    let chain = ferry_io::tls::load_certs(cert)?;
    let key = ferry_io::tls::load_key(key)?;
    let mut config = rustls::ServerConfig::builder_with_provider(ferry_io::tls::provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .with_context(|| format!("{} does not go with {}", cert.display(), a.tls_key.as_ref().unwrap().display()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(Arc::new(config)))
}

/// A database URL without its password.
fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}
