//! A data node of a striped server: `ferry serve DIR --data-node --listen
//! HOST:PORT --node-secret FILE`.
//!
//! It has no user sessions. Whoever connects must first prove the shared
//! secret (`ferry_proto::node`, HMAC challenge both ways); a peer that
//! cannot is told so and disconnected, and nothing it sent is acted on.
//! An authenticated front end then asks for data listeners, receptions and
//! sends; every path it names is resolved again here, lexically and under
//! the node's own [`Root`], so a compromised or buggy front end still
//! cannot make the node read or write outside the served directory.
//!
//! When the front end's connection ends, everything it started is
//! stopped: a node never moves data nobody is responsible for.

use super::read_line;
use ferry_io::mode_e::{self, BlockSink, ReceiveSpec, ReceiveState, SendPlan, TransferControl};
use ferry_io::root::Root;
use ferry_io::stream::AbortSignal;
use ferry_io::tls::DataProtection;
use ferry_io::transport::{self, ChannelOptions, ConnectionObserver, DataConn, DataListener, PortAllocator, Transport};
use ferry_proto::node::{NodeEvent, NodeHandshake, NodeRequest, RecvRequest, RecvTarget, SendRequest, MAX_LINE};
use ferry_proto::VirtualPath;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How long a connecting front end has to authenticate.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a running task reports its bytes.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// How often a receiving task syncs what it wrote and reports it as
/// ranges on disk (the front end's restart markers).
const RANGES_EVERY: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct DataNodeConfig {
    pub root: PathBuf,
    pub listen: SocketAddr,
    pub secret: Vec<u8>,
    /// How long a data connection may stall or take to open.
    pub data_timeout: Duration,
    /// Data ports of this node's listeners (`--passive-ports`), as a single
    /// server's PASV; the kernel picks when `None`.
    pub passive_ports: Option<(u16, u16)>,
    /// Told about every data connection opened (the profiler's hook, as
    /// [`ChannelOptions::observer`]).
    pub observer: Option<ConnectionObserver>,
    /// The TLS server configuration for PROT P data connections: the
    /// front end's certificate (`--tls-cert`/`--tls-key`, the same files),
    /// so a client checks every stripe against the name it connected to.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl std::fmt::Debug for DataNodeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataNodeConfig")
            .field("root", &self.root)
            .field("listen", &self.listen)
            .field("data_timeout", &self.data_timeout)
            .field("passive_ports", &self.passive_ports)
            .field("observed", &self.observer.is_some())
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl DataNodeConfig {
    pub fn new(root: PathBuf, listen: SocketAddr, secret: Vec<u8>, data_timeout: Duration) -> Self {
        Self { root, listen, secret, data_timeout, passive_ports: None, observer: None, tls: None }
    }
}

struct Shared {
    root: Arc<Root>,
    secret: Vec<u8>,
    timeout: Duration,
    /// Data connections go through the transport, as a single server's:
    /// the same socket set-up, buffer sizing and profiler hook.
    transport: Arc<dyn Transport>,
    ports: PortAllocator,
    observer: Option<ConnectionObserver>,
    tls: Option<Arc<rustls::ServerConfig>>,
}

impl Shared {
    /// How a data connection of a task is opened; `buffer` is the front
    /// end's session buffer size (SBUF), passed in the request; `private`
    /// its PROT P.
    fn channel(&self, buffer: Option<u32>, private: bool) -> Result<ChannelOptions, String> {
        let protection = match (private, &self.tls) {
            (false, _) => DataProtection::Clear,
            (true, Some(config)) => DataProtection::Server(config.clone()),
            (true, None) => {
                return Err("PROT P: this data node has no certificate (start it with --tls-cert and --tls-key, \
                            the front end's)"
                    .into())
            }
        };
        Ok(ChannelOptions { buffer, protection, observer: self.observer.clone(), ..ChannelOptions::new(self.timeout) })
    }
}

pub struct DataNode {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for DataNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataNode").field("listener", &self.listener).finish()
    }
}

impl DataNode {
    pub async fn bind(config: DataNodeConfig) -> anyhow::Result<Self> {
        use anyhow::Context;
        let root = Root::open(&config.root).with_context(|| format!("cannot open {}", config.root.display()))?;
        let listener =
            TcpListener::bind(config.listen).await.with_context(|| format!("cannot listen on {}", config.listen))?;
        Ok(Self {
            listener,
            shared: Arc::new(Shared {
                root: Arc::new(root),
                secret: config.secret,
                timeout: config.data_timeout,
                transport: transport::tcp::transport(),
                ports: PortAllocator::new(config.passive_ports),
                observer: config.observer,
                tls: config.tls,
            }),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves front ends until `shutdown` completes.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                accepted = self.listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    let shared = self.shared.clone();
                    tokio::spawn(async move {
                        if let Err(e) = serve_front(stream, peer, shared).await {
                            tracing::debug!(%peer, error = %e, "front-end connection ended");
                        }
                    });
                }
            }
        }
    }
}

/// `ferry serve DIR --data-node`: binds, says where on the first line of
/// standard output (as `ferry serve` does), and serves until SIGINT or
/// SIGTERM.
pub async fn serve_until_signal(config: DataNodeConfig) -> anyhow::Result<()> {
    use std::io::Write;
    let root = config.root.clone();
    let node = DataNode::bind(config).await?;
    let addr = node.local_addr()?;
    let line = format!("ferry: data node for {} on {addr}\n", root.display());
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes()).and_then(|_| out.flush());
    drop(out);
    node.run(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    })
    .await
}

async fn serve_front(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let hs = NodeHandshake::new(super::nonce());
    wr.write_all(format!("{}\n", hs.greeting()).as_bytes()).await?;
    let auth = tokio::time::timeout(HANDSHAKE_TIMEOUT, read_line(&mut rd, 1024))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no AUTH in time"))??
        .unwrap_or_default();
    match hs.on_auth(&shared.secret, &auth) {
        Ok(welcome) => wr.write_all(format!("{welcome}\n").as_bytes()).await?,
        Err(denied) => {
            tracing::warn!(%peer, "refused a connection that did not prove the node secret");
            let _ = wr.write_all(format!("{denied}\n").as_bytes()).await;
            return Ok(());
        }
    }
    tracing::info!(%peer, "front end authenticated");
    let (tx, mut rx) = mpsc::channel::<NodeEvent>(256);
    let writer = tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            if wr.write_all(format!("{ev}\n").as_bytes()).await.is_err() {
                break;
            }
        }
    });
    let mut listeners: HashMap<u64, Arc<dyn DataListener>> = HashMap::new();
    let mut tasks: HashMap<u64, Arc<AbortSignal>> = HashMap::new();
    let result = loop {
        let line = match read_line(&mut rd, MAX_LINE).await {
            Ok(Some(l)) => l,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        let req = match NodeRequest::parse(&line) {
            Ok(r) => r,
            Err(e) => {
                // An authenticated front end that sends nonsense is a bug
                // or another version: stop rather than guess.
                tracing::warn!(%peer, error = %e, "bad request from the front end; closing");
                break Ok(());
            }
        };
        tasks.retain(|_, a| !a.is_aborted() && Arc::strong_count(a) > 1);
        match req {
            NodeRequest::Listen { id, ip, buffer } => {
                let opts = ChannelOptions { buffer, ..ChannelOptions::new(shared.timeout) };
                let ev = match shared.ports.bind(&*shared.transport, ip, &opts) {
                    Ok(l) => match l.local_addr() {
                        Ok(addr) => {
                            listeners.insert(id, l);
                            NodeEvent::Listening { id, addr }
                        }
                        Err(e) => NodeEvent::Failed { id, text: e.to_string() },
                    },
                    Err(e) => NodeEvent::Failed { id, text: format!("cannot open a data port on {ip}: {e}") },
                };
                let _ = tx.send(ev).await;
            }
            NodeRequest::Recv(req) => {
                let Some(listener) = listeners.get(&req.listener).cloned() else {
                    let text = format!("no listener {}", req.listener);
                    let _ = tx.send(NodeEvent::Failed { id: req.id, text }).await;
                    continue;
                };
                start(Job::Recv(Recv { req, listener }), &mut tasks, &shared, &tx);
            }
            NodeRequest::Send(req) => start(Job::Send(Send(req)), &mut tasks, &shared, &tx),
            NodeRequest::Abort { id } => {
                if let Some(a) = tasks.remove(&id) {
                    a.abort();
                }
            }
            NodeRequest::Close { listener } => {
                listeners.remove(&listener);
            }
        }
    };
    // The front end is gone: nothing it started goes on.
    for a in tasks.values() {
        a.abort();
    }
    drop(tx);
    let _ = writer.await;
    result
}

/// Runs `job` under a fresh abort signal, kept in `tasks` by its id.
fn start(job: Job, tasks: &mut HashMap<u64, Arc<AbortSignal>>, shared: &Arc<Shared>, tx: &mpsc::Sender<NodeEvent>) {
    let abort = Arc::new(AbortSignal::new());
    tasks.insert(job.id(), abort.clone());
    tokio::spawn(job.run(shared.clone(), abort, tx.clone()));
}

fn resolve(path: &str) -> Result<VirtualPath, String> {
    VirtualPath::root().resolve(path).map_err(|e| format!("{path}: {e}"))
}

/// Reports a task's bytes every [`PROGRESS_EVERY`] until dropped.
fn reporter(id: u64, progress: Arc<AtomicU64>, tx: mpsc::Sender<NodeEvent>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PROGRESS_EVERY);
        let mut last = u64::MAX;
        loop {
            tick.tick().await;
            let bytes = progress.load(Ordering::Relaxed);
            if bytes != last {
                last = bytes;
                if tx.send(NodeEvent::Progress { id, bytes }).await.is_err() {
                    return;
                }
            }
        }
    })
}

/// A node's task, either direction: its progress reports and its final
/// `DONE`/`FAILED` are the same, only the data moves differently.
enum Job {
    Recv(Recv),
    Send(Send),
}

impl Job {
    fn id(&self) -> u64 {
        match self {
            Job::Recv(j) => j.req.id,
            Job::Send(j) => j.0.id,
        }
    }

    async fn run(self, shared: Arc<Shared>, abort: Arc<AbortSignal>, tx: mpsc::Sender<NodeEvent>) {
        let id = self.id();
        let progress = Arc::new(AtomicU64::new(0));
        let report = reporter(id, progress.clone(), tx.clone());
        let outcome = match self {
            Job::Recv(j) => j.receive(&shared, &abort, &progress, &tx).await,
            Job::Send(j) => j.send(&shared, &abort, &progress).await,
        };
        report.abort();
        let bytes = progress.load(Ordering::Relaxed);
        let ev = match outcome {
            Ok(()) => NodeEvent::Done { id, bytes },
            Err(text) => NodeEvent::Failed { id, text },
        };
        let _ = tx.send(ev).await;
    }
}

/// A `RECV` with the listener it names.
struct Recv {
    req: RecvRequest,
    listener: Arc<dyn DataListener>,
}

impl Recv {
    async fn receive(
        self,
        shared: &Shared,
        abort: &Arc<AbortSignal>,
        progress: &Arc<AtomicU64>,
        tx: &mpsc::Sender<NodeEvent>,
    ) -> Result<(), String> {
        let Recv { req, listener } = self;
        let state = &Arc::new(ReceiveState::default());
        let vp = resolve(&req.path)?;
        let root = shared.root.clone();
        let partial = req.target == RecvTarget::Partial;
        let file = tokio::task::spawn_blocking(move || root.open_upload_target(&vp, partial))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("{}: {e:?}", req.path))?;
        let file = Arc::new(file);
        let (conn_tx, mut conn_rx) = mpsc::channel(64);
        let (listener, from, acc_abort) = (listener, req.peer, abort.clone());
        // The buffer was set on the listener (before listen, for the
        // window scale); accepted sockets inherit it.
        let opts = shared.channel(None, req.private)?;
        let acceptor = tokio::spawn(async move {
            loop {
                // Connections from other than `from` are dropped unopened
                // by the transport.
                let Ok((conn, _)) = listener.accept(&opts, from).await else { break };
                if acc_abort.register(&*conn).is_err() {
                    continue;
                }
                if conn_tx.send(conn).await.is_err() {
                    break;
                }
            }
        });
        let sink: Arc<dyn BlockSink> = file.clone();
        let ctl = TransferControl { abort: abort.clone(), ..TransferControl::shared(progress.clone(), None) };
        let spec = ReceiveSpec::new(req.base, req.limit);
        let recv = mode_e::receive(Vec::new(), &mut conn_rx, sink, spec, state.clone(), ctl, shared.timeout);
        tokio::pin!(recv);
        let mut tick = tokio::time::interval(RANGES_EVERY);
        tick.tick().await;
        let result = loop {
            tokio::select! {
                r = &mut recv => break r,
                _ = tick.tick() => {
                    // Only synced bytes are reported: a restart marker
                    // must never claim what a crash could lose.
                    let ranges = state.received.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    let f = file.clone();
                    if tokio::task::spawn_blocking(move || f.sync_data()).await.is_ok_and(|r| r.is_ok()) && !ranges.is_empty() {
                        let _ = tx.send(NodeEvent::Ranges { id: req.id, ranges }).await;
                    }
                }
            }
        };
        acceptor.abort();
        // Whatever arrived is synced and reported, so a resume sends only
        // what is missing, whether or not this stripe completed.
        let ranges = state.received.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let f = file.clone();
        let synced = tokio::task::spawn_blocking(move || f.sync_data()).await.map_err(|e| e.to_string())?;
        if synced.is_ok() && !ranges.is_empty() {
            let _ = tx.send(NodeEvent::Ranges { id: req.id, ranges }).await;
        }
        result.map_err(|e| e.to_string())?;
        synced.map_err(|e| format!("syncing {}: {e}", req.path))
    }
}

/// A `SEND`.
struct Send(SendRequest);

impl Send {
    async fn send(self, shared: &Shared, abort: &Arc<AbortSignal>, progress: &Arc<AtomicU64>) -> Result<(), String> {
        let req = self.0;
        let vp = resolve(&req.path)?;
        let root = shared.root.clone();
        let (file, facts) = tokio::task::spawn_blocking(move || root.open_read(&vp))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("{}: {e:?}", req.path))?;
        let (stripe, count, len, offset) = (req.stripe as usize, req.count as usize, req.len, req.window_offset);
        let done = req.done.unwrap_or_default();
        if offset.saturating_add(len) > facts.size {
            return Err(format!("{}: the file is shorter than the front end said", req.path));
        }
        let ranges: Vec<_> = req
            .layout
            .missing(stripe, count, len, &done)
            .into_iter()
            .map(|r| r.start + offset..r.end + offset)
            .collect();
        let block = match req.layout {
            ferry_proto::stripe::StripeLayout::Blocked { block_size } => {
                usize::try_from(block_size).unwrap_or(usize::MAX).min(mode_e::DEFAULT_BLOCK_SIZE)
            }
            ferry_proto::stripe::StripeLayout::Partitioned => mode_e::DEFAULT_BLOCK_SIZE,
        };
        let plan = SendPlan { ranges, header_base: offset, block_size: block };
        let mut streams: Vec<DataConn> = Vec::new();
        let opts = shared.channel(req.buffer, req.private)?;
        for _ in 0..req.streams.max(1) {
            let conn = shared.transport.connect(req.to, None, &opts).await.map_err(|e| e.to_string())?;
            abort.register(&*conn).map_err(|e| e.to_string())?;
            streams.push(conn);
        }
        let ctl = TransferControl { abort: abort.clone(), ..TransferControl::shared(progress.clone(), None) };
        let file = Arc::new(file);
        tokio::task::spawn_blocking(move || mode_e::send(streams, &*file, &plan, &ctl))
            .await
            .map_err(|e| e.to_string())?
            .map(drop)
            .map_err(|e| e.to_string())
    }
}
