//! One logged-in server and its data channels, seen from the client.
//!
//! In extended block mode the data connections outlive a transfer: after
//! the first file the server answers `125` and the next file travels on the
//! same connections, without a round trip for PASV/PORT or a TCP handshake.
//! The session remembers which way its channels point and drops them when
//! the direction changes (a new PASV or PORT tells the server to do the
//! same). GFD.20 has the sender open the connections, so downloads listen
//! (PORT) and uploads connect (PASV); a third-party copy gives the
//! destination PASV and the source PORT.
//!
//! The rooms, in the order a transfer passes through them:
//!
//! * `login` — connecting (TLS for `ftps://`), the login batch, sizing
//!   the stream count from the measured RTT, `TPRT`.
//! * this module — the session's state, and `flush`:
//!   the queued set-up and the transfer commands in one write.
//! * `setup` — MODE, TYPE, SBUF, OPTS RETR, PASV/PORT, REST, PROT: queued
//!   only when the server's state must change.
//! * `channel` — data connections: listen, accept, connect, the cache.
//! * `replies` — preliminary and final replies, 111/112 markers.
//! * `retrieve`, `store` — MODE E downloads and uploads, one file or a
//!   pipelined batch.
//! * `stream` — stream mode (RFC 959).
//! * `third_party` — server-to-server copies.
//!
//! What is a pure function of replies (reply classes, the login sequence,
//! FEAT, markers, passive addresses, listings) lives in the protocol core,
//! `ferry_proto::client`, where it is fuzzed and tested without sockets.

use crate::control::{refused, ControlChannel};
use crate::error::ClientError;
use crate::location::RemoteUrl;
use ferry_io::mode_e;
use ferry_profile::{StreamHandle, StreamRegistry};
use ferry_proto::client::parse::{partial_answer, passive_address, PartialAnswer};
use ferry_proto::client::{Expect, PipelineEvent};
use ferry_proto::command::{Command, TransferMode};
use ferry_proto::facts::FileFacts;
use ferry_proto::Reply;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

mod batch;
mod channel;
mod login;
mod replies;
mod retrieve;
mod setup;
mod store;
mod stream;
mod third_party;

pub use batch::LineShare;

pub(crate) use channel::connect_with;
use channel::{channel_changed, Channel};
pub use third_party::{third_party_e, third_party_many};

/// Knobs that shape data channels.
#[derive(Debug, Clone)]
pub struct ChannelOptions {
    pub timeout: Duration,
    /// Parallel TCP streams per transfer (`-p`); chosen from the measured
    /// path when `None`.
    pub parallelism: Option<u32>,
    /// TCP buffer size for data sockets (`--tcp-bs`); kernel autotuning
    /// when unset.
    pub tcp_buffer: Option<u32>,
    /// MODE E block size when this side sends (`--block-size`).
    pub block_size: usize,
    /// `ferry profile`: data connections register here so the client's
    /// sampler reads their TCP_INFO.
    pub streams: Option<StreamRegistry>,
    /// The TLS configuration for `ftps://` servers.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// `--transport`: the data-channel transport to ask for (`TPRT`);
    /// TCP when unset, refused, or not one this client has.
    pub transport: Option<String>,
    /// `--path-rate`: the path's bottleneck rate, bytes/s, this copy was
    /// given. A UDT sender starts at it — this client's for uploads, and a
    /// Ferry server's for downloads once announced (`OPTS TPRT Rate=N;`).
    /// Per copy, so two copies in one process never share one.
    pub path_rate: Option<f64>,
    /// `--max-rate`, bytes/s: caps the rate announced.
    pub max_rate: Option<f64>,
    /// The remembered path rates (`path_cache`): without `path_rate`, a
    /// session's UDT senders start at what the last copies to its host
    /// delivered, and this session's long transfers are recorded.
    pub path_cache: Option<Arc<crate::path_cache::PathCache>>,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            parallelism: None,
            tcp_buffer: None,
            block_size: mode_e::DEFAULT_BLOCK_SIZE,
            streams: None,
            tls: None,
            transport: None,
            path_rate: None,
            max_rate: None,
            path_cache: None,
        }
    }
}

/// One file of a pipelined batch: its path on the server, its size, and
/// where its data comes from or goes.
#[derive(Clone)]
pub struct BatchFile<D> {
    pub path: String,
    pub size: u64,
    pub data: D,
}

impl<D> std::fmt::Debug for BatchFile<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BatchFile({}, {} bytes)", self.path, self.size)
    }
}

/// What a server holds of an interrupted upload (`SITE PARTIAL`), and
/// the markers a receiving server sends during a transfer (`111` ranges
/// newly written, `112` bytes so far): parsed by the protocol core.
pub use ferry_proto::client::{Marker, PartialUpload};

#[derive(Debug)]
pub struct ServerSession {
    pub ctrl: ControlChannel,
    pub url: RemoteUrl,
    opts: ChannelOptions,
    mode: Option<TransferMode>,
    channel: Channel,
    parallelism_sent: Option<u32>,
    buffer_sent: bool,
    broken: bool,
    /// Set-up commands (MODE, TYPE, PORT...) waiting to go out in one
    /// write with the next transfer command: on a long path every separate
    /// command costs a round trip.
    queued: Vec<(Command, Expect)>,
    /// The facts of the path probed at login, until asked for.
    probe: Option<(String, Option<FileFacts>)>,
    /// A RETR sent with the login whose answer is unread.
    pending: Option<String>,
    /// The profiler's registrations of data connections. A registration
    /// holds a duplicate descriptor, so a connection dropped earlier stays
    /// half-open until the session ends; only `ferry profile` registers.
    probes: Arc<std::sync::Mutex<Vec<StreamHandle>>>,
    /// Streams per transfer: the user's, or chosen from the path at login.
    parallelism: u32,
    /// What the control connection measured: the path's round-trip time.
    pub rtt: Duration,
    /// How the stream count was chosen (logged, and in `--json` output).
    pub sizing: String,
    /// Whether the server took `SITE UTIME` / `SITE CHMOD` (unknown until
    /// tried): a tree copy stops asking a server that refused.
    pub utime_works: Option<bool>,
    pub chmod_works: Option<bool>,
    /// The transport of the data channels: `tcp` unless `TPRT` chose
    /// another.
    transport: String,
    /// The server accepted `TPRT udt:aes-gcm`: UDT data under PROT P is
    /// encrypted with keys from the control channel's TLS session.
    udt_sealed: bool,
    /// `--transport auto`: what it chose and why (`transport_choice.rs`).
    pub transport_choice: Option<String>,
    /// The server took a path rate the path cache remembered for the
    /// client's path to it (`OPTS TPRT Rate=N;`): a third-party copy,
    /// whose data takes another path, has it forget that.
    remembered_rate_announced: bool,
    /// The name this server was told its data channels' peer must prove
    /// (`DCAU S`, third-party QUIC), once it accepted it.
    data_peer: Option<String>,
    /// What the session's first streamed upload line is cut to (given by
    /// a copy of several sessions; taken by that line).
    first_line_share: Option<LineShare>,
}

impl ServerSession {
    /// Cuts this session's next streamed upload's first line to `share`
    /// of a full line ([`LineShare`]).
    pub fn stagger_first_line(&mut self, share: Option<LineShare>) {
        self.first_line_share = share;
    }

    /// Holds `cmd` back until the next [`flush`](Self::flush).
    fn queue(&mut self, cmd: Command, expect: Expect) {
        self.queued.push((cmd, expect));
    }

    /// Sends the queued set-up commands and then `then` (the transfer
    /// commands) in one write, and checks the set-up replies; returns the
    /// address of a queued PASV/EPSV. If a set-up command is refused, the
    /// transfer commands are already on their way and the server's state
    /// is unknown: the session is marked broken and must be reopened.
    async fn flush(&mut self, then: &[Command]) -> Result<Option<SocketAddr>, ClientError> {
        self.flush_with(then, false).await
    }

    /// [`flush`](Self::flush); `untimed`: the transfer commands' replies
    /// depend on another server (a third-party copy), so the pipeline sets
    /// them no deadline.
    async fn flush_with(&mut self, then: &[Command], untimed: bool) -> Result<Option<SocketAddr>, ClientError> {
        self.settle().await?;
        if self.broken {
            return Err(ClientError::Data("the session was left mid-transfer; it must be reopened".into()));
        }
        let queued = std::mem::take(&mut self.queued);
        // A transfer may change what was probed.
        self.probe = None;
        if queued.is_empty() && then.is_empty() {
            return Ok(None);
        }
        let setup = queued.len();
        let mut all = queued;
        all.extend(then.iter().map(|c| (c.clone(), Expect::for_command(c))));
        self.ctrl.send_expecting(&all, if untimed { setup } else { all.len() }).await?;
        // The pipeline matches each reply to its command and says whether
        // it is what the command needed; markers answer nothing.
        let mut passive = None;
        let mut left = setup;
        while left > 0 {
            let (command, reply, accepted) = match self.ctrl.next_event().await? {
                PipelineEvent::Final { command, reply, accepted, .. } => (command, reply, accepted),
                PipelineEvent::Marker { .. } => continue,
                PipelineEvent::Preliminary { tag, reply } => {
                    // A set-up command does not start a transfer.
                    tracing::debug!(tag, code = reply.code.get(), "unexpected preliminary reply to a set-up command");
                    continue;
                }
                PipelineEvent::Unsolicited(reply) => {
                    self.reset_after_batch();
                    return Err(ClientError::Refused { command: "(none)".into(), reply });
                }
            };
            left -= 1;
            let ok = accepted
                && match Expect::for_command(&command) {
                    Expect::Passive => {
                        passive = self.passive_reply(&reply);
                        passive.is_some()
                    }
                    _ => true,
                };
            if !ok {
                self.reset_after_batch();
                return Err(refused(&command, reply));
            }
        }
        Ok(passive)
    }

    /// The data address in a PASV or EPSV reply. A PASV address is
    /// replaced by the control connection's peer: servers behind NAT
    /// announce unusable ones (curl and lftp do the same).
    fn passive_reply(&self, r: &Reply) -> Option<SocketAddr> {
        passive_address(r, self.ctrl.peer().ip())
    }

    /// Streams per MODE E transfer: the user's choice or the automatic one.
    pub fn parallelism(&self) -> u32 {
        self.parallelism
    }

    /// Changes the streams per transfer of an open session: the login
    /// sized them for one large file on this path, but a tree of small
    /// files wants one stream per session (every file ends with an EOD on
    /// every stream, and the receiver waits for all of them), with the
    /// sessions giving the concurrency. Downloads tell the server with the
    /// next transfer's OPTS RETR; cached upload connections are dropped so
    /// the next upload opens as many as now asked.
    pub fn set_streams(&mut self, streams: u32, why: &str) {
        let streams = streams.max(1);
        if streams == self.parallelism {
            return;
        }
        self.parallelism = streams;
        self.sizing = format!("{streams} stream(s): {why}");
        if matches!(self.channel, Channel::Connecting { .. }) {
            self.channel = Channel::None;
        }
    }

    /// Whether the server speaks GridFTP extended block mode (Globus and
    /// Ferry advertise `PARALLEL`).
    pub fn supports_mode_e(&self) -> bool {
        self.ctrl.features.mode_e()
    }

    /// Checksum algorithms the server's FEAT lists for CKSM.
    pub fn checksums(&self) -> Vec<String> {
        self.ctrl.features.checksums()
    }

    pub async fn checksum(&mut self, algorithm: &str, path: &str) -> Result<String, ClientError> {
        self.flush(&[]).await?;
        let cmd = Command::Cksm { algorithm: algorithm.to_string(), offset: 0, length: None, path: path.to_string() };
        let r = self.ctrl.command(&cmd).await?;
        match ferry_proto::client::parse::checksum(&r) {
            Some(hex) => Ok(hex),
            None => Err(refused(&cmd, r)),
        }
    }

    /// Checksums of many files, `window` CKSM commands at a time in one
    /// write (the control channel answers in order, RFC 959 §4.2). The
    /// outer error is for the session; the inner ones are per file.
    pub async fn checksum_many(
        &mut self,
        algorithm: &str,
        paths: &[String],
        window: usize,
    ) -> Result<Vec<Result<String, ClientError>>, ClientError> {
        self.flush(&[]).await?;
        let mut out = Vec::with_capacity(paths.len());
        for group in paths.chunks(window.max(1)) {
            let cmds: Vec<Command> = group
                .iter()
                .map(|p| Command::Cksm { algorithm: algorithm.to_string(), offset: 0, length: None, path: p.clone() })
                .collect();
            self.ctrl.send_batch(&cmds).await?;
            for cmd in cmds {
                let r = self.ctrl.reply().await?;
                out.push(match ferry_proto::client::parse::checksum(&r) {
                    Some(hex) => Ok(hex),
                    None => Err(refused(&cmd, r)),
                });
            }
        }
        Ok(out)
    }

    /// Forgets the data channels (after an error: their state is unknown).
    pub fn reset_channel(&mut self) {
        self.channel = Channel::None;
    }

    /// What a batch returns: the files done and its result, with the
    /// session reset when it failed (see `reset_after_batch`).
    fn batch_outcome(&mut self, done: usize, result: Result<(), ClientError>) -> (usize, Result<(), ClientError>) {
        if result.is_err() {
            self.reset_after_batch();
        }
        (done, result)
    }

    /// After a failed batch, commands may still be queued at the server:
    /// this session is not reusable, so the caller opens a new one.
    fn reset_after_batch(&mut self) {
        self.channel = Channel::None;
        self.broken = true;
    }

    /// Whether a failed batch left this session unusable.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// What the server holds of an interrupted upload to `path` (Ferry's
    /// `SITE PARTIAL`, when FEAT lists it): `Ok(None)` when the server
    /// cannot say, `Some` of the size ALLO announced, the ranges and the
    /// XXH128 of their bytes. A live upload to the name (`450`, e.g. the
    /// killed copy's session not yet noticed by the server) is waited for
    /// up to the session's timeout.
    pub async fn partial(&mut self, path: &str) -> Result<Option<PartialUpload>, ClientError> {
        if !self.ctrl.features.has_line("SITE PARTIAL") {
            return Ok(None);
        }
        self.flush(&[]).await?;
        let cmd = Command::Site(ferry_proto::command::SiteCommand::Partial(path.to_string()));
        let deadline = tokio::time::Instant::now() + self.opts.timeout.min(Duration::from_secs(30));
        loop {
            let r = self.ctrl.command(&cmd).await?;
            match partial_answer(&r) {
                PartialAnswer::Held(p) => return Ok(Some(p)),
                PartialAnswer::Busy if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                PartialAnswer::Nothing => return Ok(Some(PartialUpload::default())),
                PartialAnswer::Busy | PartialAnswer::Unknown => return Ok(None),
            }
        }
    }
}
