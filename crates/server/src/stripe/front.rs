//! The front end of a striped server: `ferry serve DIR --stripe-nodes
//! A,B,... --node-secret FILE`.
//!
//! The front end serves the control connection as any Ferry server does,
//! and serves by itself everything that is not striped (listings, MODE S,
//! PASV/PORT transfers: the Globus `-hybrid` behaviour). Transfers whose
//! data channels were set up with `SPAS` or `SPOR` go to the data nodes:
//!
//! * `SPAS`: every node opens a listener on its own address; the `229`
//!   lists them, one line per node, in node order.
//! * `STOR`/`ESTO` after `SPAS`: the front end begins the upload (its
//!   partial file, on the file system the nodes share), and each node
//!   receives its stripe's connections and writes every block at its
//!   offset into that partial. Nodes report the ranges they have synced;
//!   the front end records them (the upload's checkpoint), sends `111`
//!   with what is new and one `112` per stripe, and commits the upload
//!   when every node has had its stripe's EOF and EODs.
//! * `RETR`/`ERET` after `SPOR a1 ... am`: stripe `i` connects to `ai` and
//!   sends the bytes the layout gives stripe `i` of `m`; stripe `i` runs
//!   on node `i mod n` (one to one when both sides have as many nodes,
//!   the Globus default).
//! * A node that fails or whose connection drops fails the transfer with
//!   a reply naming it; what other stripes wrote stays recorded for a
//!   resume (`REST` with the ranges of the `111` markers).

use super::read_line;
use crate::server::ServerContext;
use crate::transfer::{self, ActiveTransfer, DataChannels, ExternalTransfer, TransferEvent};
use ferry_io::root::{Root, StoreMode, Upload, UploadInfo};
use ferry_proto::command::{RestArg, TransferMode};
use ferry_proto::node::{FrontHandshake, NodeEvent, NodeRequest, RecvRequest, RecvTarget, SendRequest, MAX_LINE};
use ferry_proto::session::{DataEndpoint, Session, TransferError, TransferKind, TransferOutcome, TransferRequest};
use ferry_proto::stripe::{perf_markers, StripeLayout};
use ferry_proto::RangeSet;
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// How long connecting to a node and its handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long nodes have to answer a LISTEN.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long stopped stripes have to report their end after ABORT.
const ABORT_GRACE: Duration = Duration::from_secs(5);

/// A session's hold on the data nodes.
#[derive(Default)]
pub(crate) struct Stripes {
    links: Arc<tokio::sync::Mutex<Links>>,
    passive: Option<PassiveSet>,
}

impl std::fmt::Debug for Stripes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stripes").field("passive", &self.passive).finish()
    }
}

/// The listeners the last SPAS opened, one per node.
#[derive(Debug, Clone)]
struct PassiveSet {
    generation: u64,
    /// Listener id on node `i`.
    listeners: Vec<u64>,
}

/// What a link's reader reports.
enum LinkEvent {
    Event(NodeEvent),
    Lost(String),
}

struct NodeLink {
    serial: u64,
    wr: OwnedWriteHalf,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for NodeLink {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The connections to the nodes, and their events merged in one queue:
/// `(node, link serial, event)`.
struct Links {
    nodes: Vec<Option<NodeLink>>,
    tx: mpsc::Sender<(usize, u64, LinkEvent)>,
    rx: mpsc::Receiver<(usize, u64, LinkEvent)>,
    next_id: u64,
    serial: u64,
}

impl Default for Links {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel(1024);
        Self { nodes: Vec::new(), tx, rx, next_id: 1, serial: 0 }
    }
}

impl Links {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Connects (and authenticates to) every node not connected yet.
    async fn ensure(&mut self, ctx: &ServerContext) -> Result<(), String> {
        let nodes = &ctx.config.stripe_nodes;
        self.nodes.resize_with(nodes.len(), || None);
        self.drain();
        let mut secret = None;
        for (i, addr) in nodes.iter().enumerate() {
            if self.nodes[i].is_some() {
                continue;
            }
            if secret.is_none() {
                let path = ctx.config.node_secret.as_ref().ok_or("no node secret is configured (--node-secret)")?;
                secret = Some(super::load_secret(path).map_err(|e| e.to_string())?);
            }
            self.serial += 1;
            let link = connect(*addr, secret.as_deref().unwrap_or_default(), i, self.serial, self.tx.clone()).await?;
            self.nodes[i] = Some(link);
        }
        Ok(())
    }

    /// Drops what stale events say: links that were lost meanwhile.
    fn drain(&mut self) {
        while let Ok((node, serial, ev)) = self.rx.try_recv() {
            if let LinkEvent::Lost(why) = ev {
                if self.nodes.get(node).and_then(|l| l.as_ref()).is_some_and(|l| l.serial == serial) {
                    tracing::warn!(node, %why, "lost the connection to a data node");
                    self.nodes[node] = None;
                }
            }
        }
    }

    async fn request(&mut self, node: usize, addr: SocketAddr, req: &NodeRequest) -> Result<(), String> {
        let Some(link) = self.nodes.get_mut(node).and_then(|l| l.as_mut()) else {
            return Err(format!("data node {addr} is not connected"));
        };
        let line = format!("{req}\n");
        if let Err(e) = link.wr.write_all(line.as_bytes()).await {
            self.nodes[node] = None;
            return Err(format!("data node {addr}: {e}"));
        }
        Ok(())
    }

    /// The next event of a live link; a loss of a link that has since
    /// been replaced is skipped.
    async fn next(&mut self) -> (usize, LinkEvent) {
        loop {
            // The sender lives in `self`, so the queue never ends.
            let Some((node, serial, ev)) = self.rx.recv().await else { return std::future::pending().await };
            let live = self.nodes.get(node).and_then(|l| l.as_ref()).is_some_and(|l| l.serial == serial);
            if !live {
                continue;
            }
            if matches!(ev, LinkEvent::Lost(_)) {
                self.nodes[node] = None;
            }
            return (node, ev);
        }
    }
}

/// Opens and authenticates a link to the node at `addr`.
async fn connect(
    addr: SocketAddr,
    secret: &[u8],
    node: usize,
    serial: u64,
    tx: mpsc::Sender<(usize, u64, LinkEvent)>,
) -> Result<NodeLink, String> {
    let fail = |why: String| format!("data node {addr}: {why}");
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| fail("connecting timed out".into()))?
        .map_err(|e| fail(format!("cannot connect: {e}")))?;
    let _ = stream.set_nodelay(true);
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let handshake = async {
        let greeting = read_line(&mut rd, 1024).await.map_err(|e| e.to_string())?.ok_or("closed the connection")?;
        let mut hs = FrontHandshake::new(super::nonce());
        let auth = hs.on_greeting(secret, &greeting)?;
        wr.write_all(format!("{auth}\n").as_bytes()).await.map_err(|e| e.to_string())?;
        let welcome = read_line(&mut rd, 1024).await.map_err(|e| e.to_string())?.ok_or("closed the connection")?;
        hs.on_welcome(secret, &welcome)
    };
    tokio::time::timeout(CONNECT_TIMEOUT, handshake)
        .await
        .map_err(|_| fail("no handshake in time".into()))?
        .map_err(fail)?;
    let reader = tokio::spawn(async move {
        let why = loop {
            match read_line(&mut rd, MAX_LINE).await {
                Ok(Some(line)) => match NodeEvent::parse(&line) {
                    Ok(ev) => {
                        if tx.send((node, serial, LinkEvent::Event(ev))).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => break format!("sent a message this front end does not understand ({e})"),
                },
                Ok(None) => break "closed the connection".to_string(),
                Err(e) => break e.to_string(),
            }
        };
        let _ = tx.send((node, serial, LinkEvent::Lost(why))).await;
    });
    Ok(NodeLink { serial, wr, reader })
}

/// What a striped transfer needs from the session besides its request.
#[derive(Debug, Clone)]
pub(crate) struct StripePlan {
    layout: StripeLayout,
    spor: Option<Vec<SocketAddrV4>>,
    peer_ip: IpAddr,
    user: String,
}

impl StripePlan {
    pub fn of(session: &Session, _req: &TransferRequest, peer_ip: IpAddr, user: &str) -> Self {
        Self {
            layout: session.stripe_layout(),
            spor: session.striped_port().map(<[_]>::to_vec),
            peer_ip,
            user: user.to_string(),
        }
    }
}

impl Stripes {
    /// SPAS on a front end: one listener per node, on the node's address.
    pub async fn passive(
        &mut self,
        ctx: &ServerContext,
        generation: u64,
        buffer: Option<u32>,
    ) -> Result<Vec<SocketAddrV4>, String> {
        let nodes = ctx.config.stripe_nodes.clone();
        let mut links = self.links.lock().await;
        links.ensure(ctx).await?;
        // The listeners of an earlier SPAS are closed (best effort).
        if let Some(old) = self.passive.take() {
            for (i, listener) in old.listeners.iter().enumerate() {
                let _ = links.request(i, nodes[i], &NodeRequest::Close { listener: *listener }).await;
            }
        }
        let mut ids = Vec::new();
        for (i, addr) in nodes.iter().enumerate() {
            let id = links.id();
            links.request(i, *addr, &NodeRequest::Listen { id, ip: addr.ip(), buffer }).await?;
            ids.push(id);
        }
        let mut got: Vec<Option<SocketAddrV4>> = vec![None; nodes.len()];
        let wait = async {
            while got.iter().any(Option::is_none) {
                match links.next().await {
                    (i, LinkEvent::Event(NodeEvent::Listening { id, addr })) if ids.get(i) == Some(&id) => match addr {
                        SocketAddr::V4(a) => got[i] = Some(a),
                        SocketAddr::V6(_) => {
                            return Err(format!("data node {} listens on IPv6, which SPAS cannot describe", nodes[i]))
                        }
                    },
                    (i, LinkEvent::Event(NodeEvent::Failed { id, text })) if ids.get(i) == Some(&id) => {
                        return Err(format!("data node {}: {text}", nodes[i]))
                    }
                    (i, LinkEvent::Lost(why)) => return Err(format!("data node {}: {why}", nodes[i])),
                    _ => {}
                }
            }
            Ok(())
        };
        tokio::time::timeout(LISTEN_TIMEOUT, wait)
            .await
            .map_err(|_| "the data nodes did not answer in time".to_string())??;
        self.passive = Some(PassiveSet { generation, listeners: ids });
        Ok(got.into_iter().flatten().collect())
    }

    /// Whether this transfer's data channels are the nodes' (SPAS or SPOR
    /// of the current data-channel generation).
    pub fn takes(&self, req: &TransferRequest, session: &Session) -> bool {
        match req.endpoint {
            DataEndpoint::Passive => self.passive.as_ref().is_some_and(|p| p.generation == req.channel.generation),
            DataEndpoint::Active(_) => session.striped_port().is_some(),
            DataEndpoint::DelayedPassive(_) => false,
        }
    }

    /// Runs a striped transfer; the control loop sees it as any other.
    pub fn spawn(
        &mut self,
        req: TransferRequest,
        plan: StripePlan,
        ctx: Arc<ServerContext>,
        root: Arc<Root>,
    ) -> ActiveTransfer {
        let mut shown = req.clone();
        // Performance markers go per stripe, from the job.
        shown.markers.perf_secs = None;
        let (active, ext) = transfer::external(shown);
        let job = Job { req, plan, ctx, root, links: self.links.clone(), passive: self.passive.clone(), ext };
        tokio::spawn(job.run());
        active
    }
}

/// What woke a striped transfer's watch.
enum Wake {
    Link(usize, LinkEvent),
    Abort,
    Perf,
}

/// One stripe of a running transfer.
#[derive(Debug)]
struct Stripe {
    node: usize,
    id: u64,
    bytes: u64,
    done: bool,
}

struct Job {
    req: TransferRequest,
    plan: StripePlan,
    ctx: Arc<ServerContext>,
    root: Arc<Root>,
    links: Arc<tokio::sync::Mutex<Links>>,
    passive: Option<PassiveSet>,
    ext: ExternalTransfer,
}

impl Job {
    async fn run(self) {
        let generation = self.req.channel.generation;
        let outcome = match self.execute().await {
            Ok(bytes) => TransferOutcome::Complete { bytes },
            Err(e) => TransferOutcome::Failed(e),
        };
        let channels = DataChannels { generation, ..DataChannels::default() };
        let _ = self.ext.tx.send(TransferEvent::Finished { outcome, channels }).await;
    }

    async fn execute(&self) -> Result<u64, TransferError> {
        if self.req.mode != TransferMode::ExtendedBlock {
            return Err(TransferError::DataConnection(
                "SPAS and SPOR data channels carry MODE E only; send MODE E, or use PASV/PORT".into(),
            ));
        }
        match (&self.req.kind, &self.req.endpoint) {
            (TransferKind::Retrieve, DataEndpoint::Active(_)) => self.send().await,
            (TransferKind::Store, DataEndpoint::Passive) => self.receive().await,
            _ => Err(TransferError::DataConnection(
                "striped data channels (SPAS/SPOR) carry RETR, ERET, STOR and ESTO; use PASV or PORT for this command"
                    .into(),
            )),
        }
    }

    fn node_addr(&self, node: usize) -> SocketAddr {
        self.ctx.config.stripe_nodes[node]
    }

    /// RETR/ERET: every stripe sends its share from its node.
    async fn send(&self) -> Result<u64, TransferError> {
        let root = self.root.clone();
        let path = self.req.path.clone();
        let (_, facts) = tokio::task::spawn_blocking(move || root.open_read(&path))
            .await
            .map_err(|e| TransferError::Local(e.to_string()))?
            .map_err(TransferError::File)?;
        let size = facts.size;
        let (offset, len) = match self.req.window {
            Some(w) => {
                let off = w.offset.min(size);
                (off, w.length.map_or(size - off, |l| l.min(size - off)))
            }
            None => (0, size),
        };
        let done = match &self.req.restart {
            Some(RestArg::Ranges(r)) => r.clone(),
            Some(RestArg::Offset(n)) => RangeSet::from_range(0..(*n).min(len)),
            None => RangeSet::new(),
        };
        let addrs = self.plan.spor.clone().unwrap_or_default();
        let nodes = self.ctx.config.stripe_nodes.len().max(1);
        let mut links = self.links.lock().await;
        links.ensure(&self.ctx).await.map_err(TransferError::DataConnection)?;
        let _ = self.ext.tx.send(TransferEvent::Started { size: Some(len), reused: false }).await;
        let mut stripes = Vec::new();
        for (i, to) in addrs.iter().enumerate() {
            let node = i % nodes;
            let id = links.id();
            let req = NodeRequest::Send(SendRequest {
                id,
                to: SocketAddr::V4(*to),
                streams: self.req.channel.parallelism.max(1),
                buffer: self.req.channel.buffer_size,
                stripe: i as u32,
                count: addrs.len() as u32,
                layout: self.plan.layout,
                len,
                window_offset: offset,
                done: Some(done.clone()),
                private: self.req.protected,
                path: self.req.path.as_str().to_string(),
            });
            stripes.push(Stripe { node, id, bytes: 0, done: false });
            if let Err(e) = links.request(node, self.node_addr(node), &req).await {
                self.stop(&mut links, &stripes).await;
                return Err(TransferError::ConnectionLost(e));
            }
        }
        self.watch(&mut links, &mut stripes, |_| {}).await
    }

    /// STOR/ESTO: every node receives its stripe's connections into the
    /// upload the front end began.
    async fn receive(&self) -> Result<u64, TransferError> {
        let Some(passive) = self.passive.clone() else {
            return Err(TransferError::DataConnection("no striped passive listeners; send SPAS".into()));
        };
        let mode = match (&self.req.window, &self.req.restart) {
            (Some(_), _) => StoreMode::Patch,
            (None, Some(_)) => StoreMode::Resume,
            (None, None) => StoreMode::Replace,
        };
        let base = self.req.window.map_or(0, |w| w.offset);
        let info = UploadInfo { user: self.plan.user.clone(), allocation: self.req.allocation };
        let (root, path) = (self.root.clone(), self.req.path.clone());
        let upload: Arc<Upload> = Arc::new(
            tokio::task::spawn_blocking(move || root.begin_store(&path, mode, &info))
                .await
                .map_err(|e| TransferError::Local(e.to_string()))?
                .map_err(TransferError::File)?,
        );
        let target = if upload.in_place() { RecvTarget::File } else { RecvTarget::Partial };
        let limit = self.ctx.config.max_file_size.checked_sub(base);
        let from = (!self.ctx.config.allow_third_party).then_some(self.plan.peer_ip);
        let mut links = self.links.lock().await;
        let result = async {
            links.ensure(&self.ctx).await.map_err(TransferError::DataConnection)?;
            let _ = self.ext.tx.send(TransferEvent::Started { size: None, reused: false }).await;
            if self.req.markers.perf_secs.is_some() {
                let zeros = vec![0; passive.listeners.len()];
                for r in perf_markers(unix_millis(), &zeros) {
                    let _ = self.ext.tx.send(TransferEvent::Reply(r)).await;
                }
            }
            let mut stripes = Vec::new();
            for (node, listener) in passive.listeners.iter().enumerate() {
                let id = links.id();
                let req = NodeRequest::Recv(RecvRequest {
                    id,
                    listener: *listener,
                    base,
                    limit,
                    peer: from,
                    target,
                    private: self.req.protected,
                    path: self.req.path.as_str().to_string(),
                });
                stripes.push(Stripe { node, id, bytes: 0, done: false });
                if let Err(e) = links.request(node, self.node_addr(node), &req).await {
                    self.stop(&mut links, &stripes).await;
                    return Err(TransferError::ConnectionLost(e));
                }
            }
            let (durable, tx, up) = (self.ext.durable.clone(), self.ext.tx.clone(), upload.clone());
            self.watch(&mut links, &mut stripes, move |ranges: &RangeSet| {
                let now = {
                    let mut d = durable.lock().unwrap_or_else(|e| e.into_inner());
                    d.union(ranges);
                    d.clone()
                };
                // The nodes synced these bytes; the record says so.
                let _ = up.checkpoint(&shift(&now, base));
                let _ = tx.try_send(TransferEvent::Checkpointed);
            })
            .await
        }
        .await;
        let durable = self.ext.durable.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let up = upload.clone();
        match result {
            Ok(bytes) if self.ext.verdict.commit() => tokio::task::spawn_blocking(move || up.commit())
                .await
                .map_err(|e| TransferError::Local(e.to_string()))?
                .map(|()| bytes)
                .map_err(TransferError::File),
            Ok(_) => {
                let _ = tokio::task::spawn_blocking(move || up.abandon(&shift(&durable, base))).await;
                Err(TransferError::Aborted)
            }
            Err(e) => {
                let _ = tokio::task::spawn_blocking(move || up.abandon(&shift(&durable, base))).await;
                Err(e)
            }
        }
    }

    /// Follows the stripes' events until all are done, one fails, or the
    /// transfer is aborted; sends per-stripe performance markers.
    async fn watch(
        &self,
        links: &mut Links,
        stripes: &mut [Stripe],
        mut on_ranges: impl FnMut(&RangeSet),
    ) -> Result<u64, TransferError> {
        let mut perf = self.req.markers.perf_secs.map(|s| {
            let every = Duration::from_secs(u64::from(s.max(1)));
            let mut t = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        let count = stripes.len();
        loop {
            let total: u64 = stripes.iter().map(|s| s.bytes).sum();
            self.ext.progress.store(total, Ordering::Relaxed);
            if stripes.iter().all(|s| s.done) {
                if perf.is_some() {
                    self.markers(stripes).await;
                }
                return Ok(total);
            }
            if self.ext.abort.is_aborted() {
                on_ranges(&self.stop(links, stripes).await);
                return Err(TransferError::Aborted);
            }
            let wake = tokio::select! {
                (node, ev) = links.next() => Wake::Link(node, ev),
                _ = self.ext.abort_notify.notified() => Wake::Abort,
                _ = async { perf.as_mut().expect("guarded").tick().await }, if perf.is_some() => Wake::Perf,
            };
            match wake {
                Wake::Abort => {}
                Wake::Perf => self.markers(stripes).await,
                Wake::Link(_, LinkEvent::Event(ev)) => {
                    let Some(i) = stripes.iter().position(|s| s.id == ev.id()) else { continue };
                    match ev {
                        NodeEvent::Progress { bytes, .. } => stripes[i].bytes = bytes,
                        NodeEvent::Ranges { ranges, .. } => on_ranges(&ranges),
                        NodeEvent::Done { bytes, .. } => {
                            stripes[i].bytes = bytes;
                            stripes[i].done = true;
                        }
                        NodeEvent::Failed { text, .. } => {
                            stripes[i].done = true;
                            on_ranges(&self.stop(links, stripes).await);
                            return Err(TransferError::ConnectionLost(format!(
                                "data node {} (stripe {i} of {count}) failed: {text}",
                                self.node_addr(stripes[i].node)
                            )));
                        }
                        NodeEvent::Listening { .. } => {}
                    }
                }
                Wake::Link(node, LinkEvent::Lost(why)) => {
                    let Some(i) = stripes.iter().position(|s| s.node == node && !s.done) else { continue };
                    on_ranges(&self.stop(links, stripes).await);
                    return Err(TransferError::ConnectionLost(format!(
                        "data node {} (stripe {i} of {count}) failed: lost the connection to it ({why})",
                        self.node_addr(node)
                    )));
                }
            }
        }
    }

    async fn markers(&self, stripes: &[Stripe]) {
        let bytes: Vec<u64> = stripes.iter().map(|s| s.bytes).collect();
        for r in perf_markers(unix_millis(), &bytes) {
            let _ = self.ext.tx.send(TransferEvent::Reply(r)).await;
        }
    }

    /// Stops every stripe still running and waits (briefly) for their
    /// ends, so no node writes after the transfer has been answered.
    /// Returns the ranges the stopped stripes reported synced on their
    /// way out, which a resume may rely on.
    async fn stop(&self, links: &mut Links, stripes: &[Stripe]) -> RangeSet {
        let mut synced = RangeSet::new();
        let mut running: Vec<u64> = Vec::new();
        for s in stripes.iter().filter(|s| !s.done) {
            if links.request(s.node, self.node_addr(s.node), &NodeRequest::Abort { id: s.id }).await.is_ok() {
                running.push(s.id);
            }
        }
        let wait = async {
            while !running.is_empty() {
                match links.next().await {
                    (_, LinkEvent::Event(NodeEvent::Done { id, .. } | NodeEvent::Failed { id, .. })) => {
                        running.retain(|r| *r != id)
                    }
                    (_, LinkEvent::Event(NodeEvent::Ranges { id, ranges })) if stripes.iter().any(|s| s.id == id) => {
                        synced.union(&ranges)
                    }
                    (node, LinkEvent::Lost(_)) => {
                        running.retain(|r| stripes.iter().any(|s| s.id == *r && s.node != node));
                    }
                    _ => {}
                }
            }
        };
        let _ = tokio::time::timeout(ABORT_GRACE, wait).await;
        synced
    }
}

/// `ranges` moved by `base` (header coordinates to file offsets).
fn shift(ranges: &RangeSet, base: u64) -> RangeSet {
    let mut out = RangeSet::new();
    for r in ranges.ranges() {
        out.insert(r.start.saturating_add(base)..r.end.saturating_add(base));
    }
    out
}

fn unix_millis() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
