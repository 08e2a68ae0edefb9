//! `ferry submit`, `jobs`, `job`, `cancel`: the transfer service's API from
//! the command line.

use anyhow::{bail, Context};
use clap::Args;
use ferry_client::{Client, CopyOptions, Location};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Args, Clone)]
pub struct ServiceConn {
    /// The service's URL, e.g. http://127.0.0.1:2880.
    #[arg(long, env = "FERRY_SERVICE")]
    service: String,
    /// API token (`ferry service token add`); better from $FERRY_TOKEN than
    /// on the command line.
    #[arg(long, env = "FERRY_TOKEN", hide_env_values = true)]
    token: String,
    /// CA certificates (PEM) that signed an https:// service's certificate,
    /// beside the system's trust store.
    #[arg(long, env = "FERRY_SERVICE_CA", value_name = "PEM")]
    service_ca: Option<PathBuf>,
}

impl ServiceConn {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.service.trim_end_matches('/'))
    }

    fn client(&self) -> anyhow::Result<reqwest::Client> {
        let mut b = reqwest::Client::builder().timeout(Duration::from_secs(300));
        if let Some(ca) = &self.service_ca {
            let pem = std::fs::read(ca).with_context(|| format!("cannot read {}", ca.display()))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)
                .with_context(|| format!("{} holds no PEM certificate", ca.display()))?
            {
                b = b.add_root_certificate(cert);
            }
        }
        Ok(b.build()?)
    }

    /// Sends a request and returns the JSON answer, or the service's error.
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Vec<u8>>) -> anyhow::Result<Value> {
        let mut req = self.client()?.request(method, self.url(path)).bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req.send().await.with_context(|| format!("cannot reach the service at {}", self.service))?;
        let status = resp.status();
        let text = resp.text().await?;
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| json!({ "error": text }));
        if !status.is_success() {
            bail!("the service answered {status}: {}", v["error"].as_str().unwrap_or(&text));
        }
        Ok(v)
    }
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// Source URL (ftp:// or ftps://, no password) — or a job JSON file
    /// when it is the only argument.
    src: String,
    /// Destination URL; with -r, the directory the tree's files go under.
    dst: Option<String>,
    /// Submit every file under SRC (listed now, by this command, with the
    /// credentials `ferry cp` would use; the job itself carries no password).
    #[arg(short = 'r', long)]
    recursive: bool,
    /// Replace destination files that exist.
    #[arg(long)]
    overwrite: bool,
    /// Do not compare checksums after each file.
    #[arg(long)]
    no_verify: bool,
    /// Retries after a failed attempt (default 3).
    #[arg(long)]
    retry: Option<u32>,
    /// Parallel streams per transfer (default: the optimiser's choice).
    #[arg(short = 'p', long)]
    streams: Option<u32>,
    /// 1 (lowest) to 5 (highest).
    #[arg(long)]
    priority: Option<u8>,
    #[command(flatten)]
    conn: ServiceConn,
    #[command(flatten)]
    tls: crate::copy::TlsArgs,
}

#[derive(Debug, Args)]
pub struct JobsArgs {
    #[command(flatten)]
    conn: ServiceConn,
    /// Print the service's JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct JobArgs {
    id: String,
    /// Follow the job until it ends, showing its counts.
    #[arg(long)]
    watch: bool,
    /// Print the job (with its files) as JSON; its `state` is `done` when
    /// every file is done.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: ServiceConn,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    id: String,
    #[command(flatten)]
    conn: ServiceConn,
}

/// A URL as the service may store it: without a password.
fn without_password(s: &str) -> String {
    match url::Url::parse(s) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(None);
            u.to_string()
        }
        _ => s.to_string(),
    }
}

fn join(base: &str, rel: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), rel)
}

/// Lists every file under a remote directory: (path relative to it, size).
async fn walk(client: &mut Client, root: &Location) -> anyhow::Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    let mut dirs = vec![(root.clone(), String::new())];
    while let Some((dir, rel)) = dirs.pop() {
        let entries = client.read_dir(&dir).await.with_context(|| format!("cannot list {dir}"))?;
        for e in entries {
            let r = if rel.is_empty() { e.name.clone() } else { format!("{rel}/{}", e.name) };
            let child = match &dir {
                Location::Remote(u) => Location::Remote(u.with_path(join(&u.path, &e.name))),
                Location::Local(p) => Location::Local(p.join(&e.name)),
            };
            match e.kind {
                ferry_proto::facts::FileKind::Dir => dirs.push((child, r)),
                ferry_proto::facts::FileKind::File => out.push((r, e.size)),
                _ => {}
            }
        }
    }
    out.sort();
    Ok(out)
}

/// What must be escaped in a URL path segment (RFC 3986 §3.3), plus `%`
/// itself; everything else stays readable in the job.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b']')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Percent-encodes each path segment of `rel` for a URL.
fn encode_rel(rel: &str) -> String {
    rel.split('/')
        .map(|seg| percent_encoding::utf8_percent_encode(seg, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

pub fn submit(args: SubmitArgs) -> anyhow::Result<ExitCode> {
    let rt = crate::copy::runtime()?;
    rt.block_on(async {
        let body = match &args.dst {
            None => {
                let path = PathBuf::from(&args.src);
                std::fs::read(&path).with_context(|| format!("cannot read the job file {}", path.display()))?
            }
            Some(dst) => {
                let mut params = serde_json::Map::new();
                if args.overwrite {
                    params.insert("overwrite".into(), json!(true));
                }
                if args.no_verify {
                    params.insert("verify_checksum".into(), json!(false));
                }
                if let Some(r) = args.retry {
                    params.insert("retry".into(), json!(r));
                }
                if let Some(s) = args.streams {
                    params.insert("nostreams".into(), json!(s));
                }
                if let Some(p) = args.priority {
                    params.insert("priority".into(), json!(p));
                }
                let files: Vec<Value> = if args.recursive {
                    let src = Location::parse(&args.src)?;
                    if !matches!(src, Location::Remote(_)) {
                        bail!("{}: the service copies between servers; give an ftp:// or ftps:// URL", args.src);
                    }
                    let mut client = Client::new(CopyOptions {
                        tls: args.tls.options(),
                        credentials: crate::copy::credentials(),
                        ..CopyOptions::default()
                    });
                    let list = walk(&mut client, &src).await?;
                    client.close().await;
                    if list.is_empty() {
                        bail!("{}: no files to copy", args.src);
                    }
                    let (s, d) = (without_password(&args.src), without_password(dst));
                    list.iter()
                        .map(|(rel, size)| {
                            json!({
                                "sources": [join(&s, &encode_rel(rel))],
                                "destinations": [join(&d, &encode_rel(rel))],
                                "filesize": size,
                            })
                        })
                        .collect()
                } else {
                    vec![json!({ "sources": [without_password(&args.src)], "destinations": [without_password(dst)] })]
                };
                eprintln!("ferry: submitting {} file{}", files.len(), if files.len() == 1 { "" } else { "s" });
                serde_json::to_vec(&json!({ "files": files, "params": params }))?
            }
        };
        let v = args.conn.call(reqwest::Method::POST, "/api/v1/jobs", Some(body)).await?;
        let id = v["job_id"].as_str().context("the service did not return a job id")?;
        eprintln!("ferry: job submitted with {} file(s); follow it with: ferry job --watch {id}", v["files"]);
        println!("{id}");
        Ok(ExitCode::SUCCESS)
    })
}

fn counts_line(j: &Value) -> String {
    let c = &j["counts"];
    format!(
        "{} {:<9} {:>6} files: {} done, {} active, {} queued, {} failed, {} canceled",
        j["job_id"].as_str().unwrap_or("?"),
        j["state"].as_str().unwrap_or("?"),
        j["files_total"],
        c["done"],
        c["active"],
        c["queued"],
        c["failed"],
        c["canceled"]
    )
}

pub fn jobs(args: JobsArgs) -> anyhow::Result<ExitCode> {
    let rt = crate::copy::runtime()?;
    rt.block_on(async {
        let v = args.conn.call(reqwest::Method::GET, "/api/v1/jobs", None).await?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            for j in v["jobs"].as_array().into_iter().flatten() {
                println!("{}  ({})", counts_line(j), j["owner"].as_str().unwrap_or(""));
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub fn job(args: JobArgs) -> anyhow::Result<ExitCode> {
    let rt = crate::copy::runtime()?;
    rt.block_on(async {
        let path = format!(
            "/api/v1/jobs/{}",
            percent_encoding::utf8_percent_encode(&args.id, percent_encoding::NON_ALPHANUMERIC)
        );
        loop {
            let files = if args.json { "" } else { "?files=0" };
            let v = args.conn.call(reqwest::Method::GET, &format!("{path}{files}"), None).await?;
            let state = v["state"].as_str().unwrap_or("").to_string();
            let running = matches!(state.as_str(), "queued" | "active");
            if args.watch && running {
                if !args.json {
                    eprintln!("{}", counts_line(&v));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            if args.json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("{}", counts_line(&v));
                if let Some(r) = v["reason"].as_str() {
                    println!("{r}");
                }
            }
            return Ok(if matches!(state.as_str(), "done" | "queued" | "active") || !args.watch {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
    })
}

pub fn cancel(args: CancelArgs) -> anyhow::Result<ExitCode> {
    let rt = crate::copy::runtime()?;
    rt.block_on(async {
        let path = format!(
            "/api/v1/jobs/{}",
            percent_encoding::utf8_percent_encode(&args.id, percent_encoding::NON_ALPHANUMERIC)
        );
        let v = args.conn.call(reqwest::Method::DELETE, &path, None).await?;
        println!("{} {}", v["job_id"].as_str().unwrap_or(&args.id), v["state"].as_str().unwrap_or(""));
        Ok(ExitCode::SUCCESS)
    })
}
