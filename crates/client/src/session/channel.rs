//! Data channels: which way they point, opening and accepting data
//! connections through the session's [`Transport`](transport::Transport),
//! and the profiler's hook on each.
//!
//! In extended block mode the sender opens the connections (GFD.20), so a
//! download listens (PORT) and an upload connects (PASV). Connections are
//! cached across files while the direction stays the same.

use super::ServerSession;
use crate::error::ClientError;
use ferry_io::transport::{self, ChannelOptions as DataChannelOptions, Connection, DataConn, DataListener};
use ferry_profile::{StreamHandle, StreamRegistry};
use ferry_proto::command::Command;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::mpsc;

/// A listener of the named transport and its TCP twin on the same port.
pub(super) type ListenerPair = (Arc<dyn DataListener>, Arc<dyn DataListener>);

#[derive(Debug, Default)]
pub(super) enum Channel {
    #[default]
    None,
    /// Download: we listen (PORT sent), the server connects.
    Listening { listener: Arc<dyn DataListener>, cached: Vec<DataConn> },
    /// Upload: the server listens (PASV answered), we connect.
    Connecting { addr: SocketAddr, cached: Vec<DataConn> },
    /// Third-party destination listening at `addr`.
    Destination { addr: SocketAddr },
    /// Third-party source told to connect to `to`.
    Source { to: SocketAddr },
}

impl ServerSession {
    pub(super) fn data_transport(&self) -> Arc<dyn transport::Transport> {
        transport::by_name(&self.transport).unwrap_or_else(transport::default_transport)
    }

    /// How this session's data connections are opened: `--tcp-bs`, the
    /// timeout, PROT, and the profiler's hook (`ferry profile`).
    pub(crate) fn data_options(&self) -> DataChannelOptions {
        DataChannelOptions {
            buffer: self.opts.tcp_buffer,
            timeout: self.opts.timeout,
            protection: self.ctrl.data_protection(),
            sealing: self.ctrl.udt_secret().filter(|_| self.udt_sealed && self.transport == "udt"),
            // This copy's (`--path-rate`), capped by its `--max-rate`.
            path_rate: self.path_rate().map(|(r, _)| r),
            observer: observer(&self.opts.streams, &self.probes),
        }
    }

    /// Opens one data connection to `addr` (stream mode, or one of a MODE E
    /// upload's), the way every data connection is opened.
    pub(crate) async fn connect_data(&self, addr: SocketAddr) -> Result<DataConn, ClientError> {
        connect_over(&*self.data_transport(), &self.data_options(), addr).await
    }

    /// Opens `n` data connections to `addr` at once: one after another
    /// would cost a round trip each.
    pub(super) async fn connect_many(&self, addr: SocketAddr, n: usize) -> Result<Vec<DataConn>, ClientError> {
        futures::future::join_all((0..n).map(|_| self.connect_data(addr))).await.into_iter().collect()
    }

    /// Makes sure we listen and the server will know it (PORT queued): in
    /// MODE E the sender connects.
    pub(super) fn ensure_listening(&mut self) -> Result<(), ClientError> {
        self.set_data_protection(true);
        self.prepare_e();
        self.set_parallelism();
        if !matches!(self.channel, Channel::Listening { .. }) {
            let listener = self.listen()?;
            self.port(listener.local_addr()?);
            self.channel = Channel::Listening { listener, cached: Vec::new() };
        }
        Ok(())
    }

    /// A listener for the server's data connections, on the address the
    /// control connection uses.
    pub(super) fn listen(&self) -> Result<Arc<dyn DataListener>, ClientError> {
        let local = self.ctrl.local_addr()?;
        let opts = self.data_options();
        Ok(transport::PortAllocator::new(None).bind(&*self.data_transport(), local.ip(), &opts)?)
    }

    /// A listener of the transport the user named (`--transport`) and a
    /// TCP listener on the same port number, for a download whose PORT
    /// goes out before the server has said whether it takes `TPRT`: a
    /// server that refused it connects by TCP to the port it was given,
    /// and finds this session there rather than nothing (a transfer that
    /// fails) or another program that happens to hold that TCP port (data
    /// handed to a stranger). The one not used is dropped once the
    /// `TPRT` reply is read. A port whose TCP twin is taken is given back
    /// and another tried.
    pub(super) fn listen_twinned(&self) -> Result<ListenerPair, ClientError> {
        let name = self.opts.transport.as_deref().unwrap_or("tcp");
        let named = transport::by_name(name)
            .ok_or_else(|| ClientError::Usage(format!("this client has no transport {name:?}")))?;
        let ip = self.ctrl.local_addr()?.ip();
        let opts = self.data_options();
        let tcp = transport::default_transport();
        let mut last = None;
        for _ in 0..16 {
            let l = transport::PortAllocator::new(None).bind(&*named, ip, &opts)?;
            match tcp.listen(SocketAddr::new(ip, l.local_addr()?.port()), &opts) {
                Ok(t) => return Ok((l, t)),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
                Err(e) => return Err(e.into()),
            }
        }
        Err(last.map_or_else(|| ClientError::Data("no port for a data listener".into()), Into::into))
    }

    /// [`ensure_listening`](Self::ensure_listening), then
    /// [`spawn_acceptor`](Self::spawn_acceptor), as the pipelined and
    /// batched downloads start (an ERET sends its command in between).
    pub(super) fn listen_and_accept(
        &mut self,
    ) -> Result<(tokio::task::JoinHandle<()>, mpsc::Receiver<DataConn>), ClientError> {
        self.ensure_listening()?;
        self.spawn_acceptor()
    }

    /// Accepts the server's data connections for as long as the returned
    /// receiver is alive.
    pub(super) fn spawn_acceptor(
        &self,
    ) -> Result<(tokio::task::JoinHandle<()>, mpsc::Receiver<DataConn>), ClientError> {
        let Channel::Listening { listener, .. } = &self.channel else {
            return Err(channel_changed());
        };
        let listener = listener.clone();
        let (tx, rx) = mpsc::channel(16);
        // Only the server we talk to may connect (not a port scanner). We
        // are the TLS client even on connections the server opened (RFC
        // 4217 §7); the handshake runs on the reader.
        let peer = self.ctrl.peer().ip();
        let opts = self.data_options();
        let task = tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept(&opts, Some(peer)).await {
                if tx.send(s).await.is_err() {
                    break;
                }
            }
        });
        Ok((task, rx))
    }

    /// Makes sure the server will listen for our connections (PASV
    /// queued unless a channel is cached).
    pub(super) fn ensure_connecting(&mut self) {
        self.set_data_protection(true);
        self.prepare_e();
        if !matches!(self.channel, Channel::Connecting { .. }) {
            self.queue_passive();
        }
    }

    /// Sends the queued set-up with `then` and returns where to connect.
    pub(super) async fn flush_connecting(&mut self, then: &[Command]) -> Result<SocketAddr, ClientError> {
        match self.flush(then).await? {
            Some(addr) => {
                self.channel = Channel::Connecting { addr, cached: Vec::new() };
                Ok(addr)
            }
            None => match &self.channel {
                Channel::Connecting { addr, .. } => Ok(*addr),
                _ => Err(channel_changed()),
            },
        }
    }
}

/// The profiler's hook, if one runs: registers every data connection's
/// socket.
pub(super) fn observer(
    registry: &Option<StreamRegistry>,
    probes: &Arc<std::sync::Mutex<Vec<StreamHandle>>>,
) -> Option<transport::ConnectionObserver> {
    let registry = registry.clone()?;
    let probes = probes.clone();
    Some(Arc::new(move |conn: &dyn Connection| {
        let Some(fd) = conn.socket() else { return };
        let label = conn.peer_addr().map(|a| format!("data {a}")).unwrap_or_else(|| "data".into());
        match registry.register(&fd, label) {
            Ok(h) => probes.lock().unwrap_or_else(|e| e.into_inner()).push(h),
            Err(e) => tracing::debug!(error = %e, "the profiler cannot follow a data connection"),
        }
    }))
}

/// Opens a TCP data connection with `opts`; a timeout is reported as such.
pub(crate) async fn connect_with(opts: &DataChannelOptions, addr: SocketAddr) -> Result<DataConn, ClientError> {
    connect_over(&*transport::default_transport(), opts, addr).await
}

pub(super) async fn connect_over(
    t: &dyn transport::Transport,
    opts: &DataChannelOptions,
    addr: SocketAddr,
) -> Result<DataConn, ClientError> {
    t.connect(addr, None, opts).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::TimedOut {
            ClientError::Timeout { what: format!("opening a data connection to {addr}"), secs: opts.timeout.as_secs() }
        } else {
            ClientError::Data(e.to_string())
        }
    })
}

pub(super) fn channel_changed() -> ClientError {
    ClientError::Data("the data channel changed under a transfer".into())
}

/// The cached upload connections still worth sending on: one the server
/// closed since the last transfer would take the data without complaint
/// while the server waits, for its idle timeout, for a connection that
/// sends ([`peer_closed`]). The caller opens new ones in their place.
///
/// [`peer_closed`]: ferry_io::transport::peer_closed
pub(super) fn live_cached(cached: Vec<DataConn>) -> Vec<DataConn> {
    let before = cached.len();
    let live: Vec<DataConn> = cached.into_iter().filter(|c| !ferry_io::transport::peer_closed(&**c)).collect();
    if live.len() < before {
        tracing::debug!(closed = before - live.len(), "cached data connections the server closed; opening new ones");
    }
    live
}
