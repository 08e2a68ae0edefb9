//! Striped copies: `ferry cp --stripe`, as `globus-url-copy -stripe`
//! (`docs/striping.md`).
//!
//! * Upload: `SPAS` to the server; its `229` lists one address per data
//!   node. The client opens `-p` connections to *every* address and sends
//!   each stripe the bytes the layout gives it, each stripe ending with its
//!   own EOF and EOD count.
//! * Download: the client listens on one address per stripe and names
//!   them all in `SPOR`; the server's nodes connect and each sends its
//!   share. The number of stripes is the server's node count, learnt from
//!   a `SPAS` (unless `--stripes N`).
//! * Server to server: `SPAS` to the destination, its addresses in `SPOR`
//!   (or `PORT` for one) to the source, then `STOR` and `RETR`.
//!
//! Per-stripe performance markers are gathered ([`StripeProgress`]); the
//! ranges a download received are kept beside the file
//! (`<file>.ferry-stripes`) when it fails, so the next run asks only for
//! the missing ranges (`REST`); an upload resumes from what `SITE
//! PARTIAL` says the server holds.

use crate::error::ClientError;
use crate::location::{Location, RemoteUrl};
use crate::session::{ChannelOptions, ServerSession};
use ferry_io::mode_e::{self, BlockSink, ReceiveSpec, ReceiveState, SendPlan, TransferControl};
use ferry_io::transport::{self, DataConn};
use ferry_proto::command::{Allo, Command, Opts, ProtectionLevel, RestArg, TransferMode, TransferType};
use ferry_proto::markers::{parse_range_marker, PerfMarker};
use ferry_proto::stripe::{parse_spas_reply, StripeLayout, StripeProgress};
use ferry_proto::{RangeSet, Reply};
use std::net::{SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct StripeOptions {
    /// Connections per stripe.
    pub parallelism: u32,
    pub timeout: Duration,
    /// How this side deals bytes to stripes when it sends (and what it
    /// asks a sending server for).
    pub layout: StripeLayout,
    /// Stripes for a download; the server's node count when `None`.
    pub stripes: Option<usize>,
    /// Continue an interrupted copy (only the missing ranges).
    pub resume: bool,
    /// Socket buffer size of every data connection (`--tcp-bs`); kernel
    /// autotuning when `None`.
    pub tcp_buffer: Option<u32>,
    /// Certificates to trust for `ftps://` servers.
    pub tls: crate::tls::TlsOptions,
    /// `ferry profile`: data connections register here.
    pub streams: Option<ferry_profile::StreamRegistry>,
}

impl Default for StripeOptions {
    fn default() -> Self {
        Self {
            parallelism: 1,
            timeout: Duration::from_secs(60),
            layout: StripeLayout::default(),
            stripes: None,
            resume: true,
            tcp_buffer: None,
            tls: crate::tls::TlsOptions::default(),
            streams: None,
        }
    }
}

/// What a striped copy did.
#[derive(Debug, Clone, Default)]
pub struct StripeReport {
    /// Bytes moved by this run (not those a resume skipped).
    pub bytes: u64,
    pub stripes: usize,
    /// The receiving server's last performance marker of each stripe.
    pub progress: StripeProgress,
    /// Performance markers seen.
    pub perf_markers: usize,
    /// Ranges the receiving server reported in restart markers.
    pub ranges: RangeSet,
    /// Ranges a resume did not send again.
    pub resumed: RangeSet,
}

pub async fn copy(src: &Location, dst: &Location, opts: &StripeOptions) -> Result<StripeReport, ClientError> {
    match (src, dst) {
        (Location::Remote(s), Location::Local(d)) => download(s, d, opts).await,
        (Location::Local(s), Location::Remote(d)) => upload(s, d, opts).await,
        (Location::Remote(s), Location::Remote(d)) => third_party(s, d, opts).await,
        (Location::Local(_), Location::Local(_)) => {
            Err(ClientError::Usage("--stripe needs a server on at least one side".into()))
        }
    }
}

/// Logs in and sets binary MODE E.
async fn open(url: &RemoteUrl, opts: &StripeOptions) -> Result<ServerSession, ClientError> {
    let tls = match url.scheme {
        crate::location::Scheme::Ftps => Some(opts.tls.client_config()?),
        _ => None,
    };
    let channel = ChannelOptions {
        timeout: opts.timeout,
        parallelism: Some(opts.parallelism),
        tcp_buffer: opts.tcp_buffer,
        streams: opts.streams.clone(),
        tls,
        ..Default::default()
    };
    let mut s = ServerSession::open(url, channel, None).await?;
    s.ctrl.expect(&Command::Type(TransferType::Image)).await?;
    s.ctrl.expect(&Command::Mode(TransferMode::ExtendedBlock)).await?;
    Ok(s)
}

/// `OPTS RETR StripeLayout=...;Parallelism=p,p,p;` for a sending server.
fn opts_retr(opts: &StripeOptions) -> Command {
    let p = opts.parallelism.max(1);
    let mut kv = vec![];
    match opts.layout {
        StripeLayout::Blocked { block_size } => {
            kv.push(("StripeLayout".to_string(), "Blocked".to_string()));
            kv.push(("BlockSize".to_string(), block_size.to_string()));
        }
        StripeLayout::Partitioned => kv.push(("StripeLayout".to_string(), "Partitioned".to_string())),
    }
    kv.push(("Parallelism".to_string(), format!("{p},{p},{p}")));
    Command::Opts(Opts::Retr(kv))
}

fn refused(cmd: &Command, reply: Reply) -> ClientError {
    ClientError::Refused { command: cmd.to_string(), reply }
}

/// Reads a transfer's replies up to the final one, gathering markers.
async fn follow(s: &mut ServerSession, report: &mut StripeReport) -> Result<Reply, ClientError> {
    loop {
        let r = s.ctrl.reply_untimed().await?;
        if let Some(m) = PerfMarker::parse(&r) {
            report.perf_markers += 1;
            report.progress.on_marker(&m);
            continue;
        }
        if let Some(ranges) = parse_range_marker(&r) {
            report.ranges.union(&ranges);
            continue;
        }
        if !r.code.is_preliminary() {
            return Ok(r);
        }
    }
}

/// Waits for every stripe's task (senders or receivers alike); the first
/// failure, if any.
async fn first_failure<E: std::fmt::Display + 'static>(mut set: tokio::task::JoinSet<Result<(), E>>) -> Option<String> {
    let mut failure = None;
    while let Some(r) = set.join_next().await {
        let why = match r {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        failure = failure.or(Some(why));
    }
    failure
}

/// The file beside a download that records the ranges received.
fn record_path(dst: &Path) -> PathBuf {
    let mut name = dst.file_name().unwrap_or_default().to_os_string();
    name.push(".ferry-stripes");
    dst.with_file_name(name)
}

async fn download(src: &RemoteUrl, dst: &Path, opts: &StripeOptions) -> Result<StripeReport, ClientError> {
    let mut report = StripeReport::default();
    let mut s = open(src, opts).await?;
    let cmd = opts_retr(opts);
    s.ctrl.expect(&cmd).await?;
    let k = match opts.stripes {
        Some(k) => k.max(1),
        None => {
            let r = s.ctrl.command(&Command::Spas).await?;
            parse_spas_reply(&r).map(|a| a.len()).unwrap_or(1)
        }
    };
    report.stripes = k;
    let SocketAddr::V4(local) = s.ctrl.local_addr()? else {
        return Err(ClientError::Usage("striped transfers need IPv4 (SPOR has no IPv6 form)".into()));
    };
    // Data connections as the session's: --tcp-bs, PROT, the profiler.
    let data = s.data_options();
    let tcp = transport::tcp::transport();
    let mut listeners = Vec::new();
    let mut addrs: Vec<SocketAddrV4> = Vec::new();
    for _ in 0..k {
        let l = tcp.listen(SocketAddr::V4(SocketAddrV4::new(*local.ip(), 0)), &data)?;
        let SocketAddr::V4(a) = l.local_addr()? else { unreachable!("bound to IPv4") };
        addrs.push(a);
        listeners.push(l);
    }
    let record = record_path(dst);
    let done = if opts.resume && dst.exists() {
        std::fs::read_to_string(&record).ok().and_then(|t| RangeSet::parse(t.trim()).ok()).unwrap_or_default()
    } else {
        RangeSet::new()
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(done.is_empty())
        .open(dst)
        .map_err(|e| ClientError::Local { path: dst.display().to_string(), error: e })?;
    let spor = Command::Spor(addrs.clone());
    s.ctrl.expect(&spor).await?;
    if !done.is_empty() {
        s.ctrl.expect(&Command::Rest(RestArg::Ranges(done.clone()))).await?;
        report.resumed = done.clone();
    }
    let path = src.path.clone();
    s.ctrl.send(&Command::Retr(path.clone())).await?;
    let sink: Arc<dyn BlockSink> = Arc::new(file);
    let progress = Arc::new(AtomicU64::new(0));
    let ctl = TransferControl::shared(progress.clone(), None);
    let mut receivers = tokio::task::JoinSet::new();
    let mut states = Vec::new();
    for l in listeners {
        let state = Arc::new(ReceiveState::default());
        states.push(state.clone());
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let (data, abort) = (data.clone(), ctl.abort.clone());
        let acceptor = tokio::spawn(async move {
            // Data comes from the data nodes, not from the front end's
            // address: accepted from anyone, as a third-party destination
            // does; overlapping blocks still fail the transfer.
            while let Ok((conn, _)) = l.accept(&data, None).await {
                if abort.register(&*conn).is_err() {
                    continue;
                }
                if tx.send(conn).await.is_err() {
                    break;
                }
            }
        });
        let (sink, ctl, timeout) = (sink.clone(), ctl.clone(), opts.timeout);
        receivers.spawn(async move {
            let r = mode_e::receive(Vec::new(), &mut rx, sink, ReceiveSpec::new(0, None), state, ctl, timeout).await;
            acceptor.abort();
            r.map(drop)
        });
    }
    let final_reply = follow(&mut s, &mut report).await;
    let ok = matches!(&final_reply, Ok(r) if r.code.is_positive_completion());
    if !ok {
        ctl.abort.abort();
    }
    let failure = first_failure(receivers).await;
    let mut got = done.clone();
    for st in &states {
        got.union(&st.received.lock().unwrap_or_else(|e| e.into_inner()));
    }
    report.bytes = progress.load(std::sync::atomic::Ordering::Relaxed);
    match (final_reply?, failure) {
        (r, None) if r.code.is_positive_completion() => {
            let _ = std::fs::remove_file(&record);
            s.ctrl.quit().await;
            Ok(report)
        }
        (r, why) => {
            // What arrived stays, and is recorded: the next run asks only
            // for what is missing.
            if !got.is_empty() {
                let _ = std::fs::write(&record, got.to_string());
            }
            if r.code.is_positive_completion() {
                Err(ClientError::Data(why.unwrap_or_default()))
            } else {
                Err(refused(&Command::Retr(path), r))
            }
        }
    }
}

async fn upload(src: &Path, dst: &RemoteUrl, opts: &StripeOptions) -> Result<StripeReport, ClientError> {
    let mut report = StripeReport::default();
    let file =
        std::fs::File::open(src).map_err(|e| ClientError::Local { path: src.display().to_string(), error: e })?;
    let len = file.metadata().map_err(|e| ClientError::Local { path: src.display().to_string(), error: e })?.len();
    let mut s = open(dst, opts).await?;
    let done = if opts.resume {
        s.partial(&dst.path).await?.filter(|p| p.size.is_none_or(|n| n == len)).map(|p| p.ranges).unwrap_or_default()
    } else {
        RangeSet::new()
    };
    let r = s.ctrl.command(&Command::Spas).await?;
    let addrs = parse_spas_reply(&r).map_err(|_| refused(&Command::Spas, r.clone()))?;
    report.stripes = addrs.len();
    s.ctrl.expect(&Command::Allo(Allo { size: len, record: None })).await?;
    if !done.is_empty() {
        s.ctrl.expect(&Command::Rest(RestArg::Ranges(done.clone()))).await?;
        report.resumed = done.clone();
    }
    s.ctrl.send(&Command::Stor(dst.path.clone())).await?;
    let progress = Arc::new(AtomicU64::new(0));
    let ctl = TransferControl::shared(progress.clone(), None);
    let file = Arc::new(file);
    let count = addrs.len();
    let (data, tcp) = (s.data_options(), transport::tcp::transport());
    let mut senders = tokio::task::JoinSet::new();
    for (k, addr) in addrs.iter().enumerate() {
        let mut streams: Vec<DataConn> = Vec::new();
        for _ in 0..opts.parallelism.max(1) {
            let conn = tcp
                .connect(SocketAddr::V4(*addr), None, &data)
                .await
                .map_err(|e| ClientError::Data(format!("stripe {k} at {addr}: {e}")))?;
            ctl.abort.register(&*conn)?;
            streams.push(conn);
        }
        let plan = SendPlan {
            ranges: opts.layout.missing(k, count, len, &done),
            header_base: 0,
            block_size: mode_e::DEFAULT_BLOCK_SIZE,
        };
        let (file, ctl) = (file.clone(), ctl.clone());
        senders.spawn_blocking(move || mode_e::send(streams, &*file, &plan, &ctl).map(drop));
    }
    // The replies are read while the stripes send: a server that fails the
    // transfer (a node that cannot take it) stops the senders at once,
    // rather than after they time out.
    let abort = ctl.abort.clone();
    let replies = async {
        let r = follow(&mut s, &mut report).await;
        if !matches!(&r, Ok(r) if r.code.is_positive_completion()) {
            abort.abort();
        }
        r
    };
    let (r, failure) = tokio::join!(replies, first_failure(senders));
    let r = r?;
    report.bytes = progress.load(std::sync::atomic::Ordering::Relaxed);
    if !r.code.is_positive_completion() {
        return Err(refused(&Command::Stor(dst.path.clone()), r));
    }
    if let Some(why) = failure {
        return Err(ClientError::Data(why));
    }
    s.ctrl.quit().await;
    Ok(report)
}

async fn third_party(src: &RemoteUrl, dst: &RemoteUrl, opts: &StripeOptions) -> Result<StripeReport, ClientError> {
    let mut report = StripeReport::default();
    let mut a = open(src, opts).await?;
    let mut b = open(dst, opts).await?;
    // The data connections run between the two servers, which would both
    // be TLS servers under PROT P (RFC 4217 §7): clear, as single copies.
    for s in [&mut a, &mut b] {
        if s.ctrl.data_private() {
            s.ctrl.expect(&Command::Prot(ProtectionLevel::Clear)).await?;
            s.ctrl.set_data_protection(ProtectionLevel::Clear);
        }
    }
    let size = a.ctrl.size(&src.path).await?;
    a.ctrl.expect(&opts_retr(opts)).await?;
    let r = b.ctrl.command(&Command::Spas).await?;
    let addrs = parse_spas_reply(&r).map_err(|_| refused(&Command::Spas, r.clone()))?;
    report.stripes = addrs.len();
    // Globus' client sends PORT when there is one address.
    let setup = match addrs.as_slice() {
        [one] => Command::Port(*one),
        _ => Command::Spor(addrs.clone()),
    };
    a.ctrl.expect(&setup).await?;
    if let Some(n) = size {
        b.ctrl.expect(&Command::Allo(Allo { size: n, record: None })).await?;
    }
    b.ctrl.send(&Command::Stor(dst.path.clone())).await?;
    a.ctrl.send(&Command::Retr(src.path.clone())).await?;
    let mut sent = StripeReport::default();
    let (ra, rb) = tokio::join!(follow(&mut a, &mut sent), follow(&mut b, &mut report));
    let (ra, rb) = (ra?, rb?);
    if !ra.code.is_positive_completion() {
        return Err(refused(&Command::Retr(src.path.clone()), ra));
    }
    if !rb.code.is_positive_completion() {
        return Err(refused(&Command::Stor(dst.path.clone()), rb));
    }
    report.bytes = size.unwrap_or(report.progress.total());
    a.ctrl.quit().await;
    b.ctrl.quit().await;
    Ok(report)
}
