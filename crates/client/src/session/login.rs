//! Opening a session: the control connection (plain, or TLS for
//! `ftps://`), the login batch, the first question riding along with it,
//! the stream count chosen from the measured path, and the data-channel
//! transport (`TPRT`).

use super::{Channel, ChannelOptions, ServerSession};
use crate::control::ControlChannel;
use crate::error::ClientError;
use crate::location::RemoteUrl;
use ferry_io::transport;
use ferry_proto::client::Expect;
use ferry_proto::command::{Command, SiteCommand};
use ferry_proto::facts::{FileFacts, FileKind};
use ferry_proto::Reply;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

impl ServerSession {
    /// Connects and logs in. `probe` is a path whose facts the caller will
    /// want: its MLST rides along with the login (see [`take_probe`]), and a
    /// file's size informs the stream count.
    ///
    /// [`take_probe`]: Self::take_probe
    pub async fn open(url: &RemoteUrl, opts: ChannelOptions, probe: Option<&str>) -> Result<Self, ClientError> {
        let ctrl = Self::connect(url, &opts).await?;
        let mut s = Self::new(ctrl, url, opts);
        // A transport named outright (not `auto`, which needs what the
        // login measures) is asked for in the login's write: one round
        // trip less (see `pipelined_tprt`).
        let tprt = s.pipelined_tprt();
        let then: Vec<Command> = tprt.as_ref().map(|t| t.commands()).unwrap_or_default();
        let facts = s.ctrl.login_with(&url.user, &url.password, probe, &then).await?;
        // The handshake and the login gave the kernel round trips to measure.
        let file_size = facts.as_ref().and_then(|f| f.as_ref()).filter(|f| f.kind == FileKind::File).map(|f| f.size);
        s.size_streams(file_size);
        s.probe = probe.zip(facts).map(|(p, f)| (p.to_string(), f));
        if let Some(t) = tprt {
            s.finish_pipelined_tprt(t).await?;
        } else if let Some(name) = s.opts.transport.clone() {
            match crate::transport_choice::parse_auto(&name) {
                Some(candidates) => {
                    let choice = s.choose_transport(&candidates);
                    tracing::info!(server = %s.url, transport = choice.transport, why = %choice.reason, "transport auto");
                    s.transport_choice = Some(format!("{}: {}", choice.transport, choice.reason));
                    s.select_transport(choice.transport).await?;
                }
                None => s.select_transport(&name).await?,
            }
        }
        Ok(s)
    }

    /// `--transport auto`: the choice for this server from what the login
    /// measured on the control connection, the host's buffer limits, the
    /// server's FEAT and whether data will be encrypted.
    fn choose_transport(&self, candidates: &[String]) -> crate::transport_choice::TransportChoice {
        use std::os::fd::AsFd;
        let raw = ferry_io::tcpinfo::raw_tcp_info(self.ctrl.as_fd()).ok().map(|(r, _)| r);
        let facts = crate::transport_choice::PathFacts {
            rtt: self.rtt,
            loss: raw.filter(|r| r.segs_out > 0).map(|r| f64::from(r.total_retrans) / f64::from(r.segs_out)),
            retransmits: raw.map_or(0, |r| r.total_retrans),
            socket_buffer_max: ferry_io::sizing::socket_buffer_max(),
        };
        let offered: Option<Vec<String>> = self
            .ctrl
            .features
            .line("TRANSPORTS")
            .and_then(ferry_proto::transport::parse_feat_line)
            .map(|v| v.iter().map(|t| t.as_str().to_string()).collect());
        crate::transport_choice::choose(&facts, offered.as_deref(), self.ctrl.is_tls(), candidates)
    }

    /// Like [`open`](Self::open) with `path` as the probe, and sends a
    /// MODE E download of `path` with the login, in the same write: a
    /// fresh copy then costs one round trip less. Whether the server
    /// speaks GridFTP is not known yet, so the data channel is offered with
    /// SPOR, the GridFTP form of PORT: a plain FTP server refuses it and
    /// then the RETR for want of a data channel, instead of sending the
    /// file in stream mode. [`retrieve_e`](Self::retrieve_e) of `path`
    /// picks up the RETR; anything else first reads and drops its answer.
    /// IPv4 only (SPOR has no IPv6 form). With `--transport quic` on a TLS
    /// control channel, or `--transport udt` on a clear one, `TPRT` goes
    /// first in the same write (for `udt` followed by `SITE SETNETSTACK
    /// udt`) and the client listens for that transport and TCP on one port
    /// number until the replies say which the server will use
    /// (`pipelined_transfer_tprt`).
    pub async fn open_retrieving(url: &RemoteUrl, opts: ChannelOptions, path: &str) -> Result<Self, ClientError> {
        let ctrl = Self::connect(url, &opts).await?;
        let mut s = Self::new(ctrl, url, opts);
        // Only the handshake has been measured: size for the path alone.
        s.size_streams(None);
        // `--transport quic`: its TPRT (and rate) go first, then the
        // set-up and the RETR, all in the login's write (see
        // `pipelined_transfer_tprt`).
        let tprt = s.pipelined_transfer_tprt();
        let tcp_sizing = (s.parallelism, s.sizing.clone());
        if tprt.as_ref().is_some_and(|t| t.name == "udt") && s.opts.parallelism.is_none() {
            // As `size_streams_for_udt` does once UDT is granted: the
            // OPTS RETR goes out before the answer, so one stream is asked
            // for now (a server that grants neither TPRT nor SETNETSTACK
            // then sends this file over one TCP stream; the session's
            // later transfers get the TCP sizing back, below).
            s.set_streams(1, "UDT paces one connection at the path's rate");
        }
        s.prepare_e();
        s.set_parallelism();
        let listeners = match &tprt {
            Some(t) => {
                if t.name == "quic" {
                    // The login's PROT P (a TLS control channel is required
                    // for `quic` here) is in force before any data connection
                    // arrives; the QUIC listener's TLS configuration needs it.
                    s.ctrl.set_data_protection(ferry_proto::command::ProtectionLevel::Private);
                }
                let (named, tcp) = s.listen_twinned()?;
                Listeners::Twinned { named, tcp }
            }
            None => Listeners::One(s.listen()?),
        };
        let SocketAddr::V4(v4) = listeners.local_addr()? else {
            return Err(ClientError::Usage("a pipelined download needs IPv4".into()));
        };
        s.queue(Command::Spor(vec![v4]), Expect::Positive);
        let queued = std::mem::take(&mut s.queued);
        let mut then: Vec<Command> = tprt.as_ref().map(|t| t.commands()).unwrap_or_default();
        then.extend(queued.iter().map(|(c, _)| c.clone()));
        then.push(Command::Retr(path.to_string()));
        let facts = s.ctrl.login_with(&url.user, &url.password, Some(path), &then).await?;
        s.probe = facts.map(|f| (path.to_string(), f));
        let listener = match (tprt, listeners) {
            (Some(t), Listeners::Twinned { named, tcp }) => {
                if s.finish_pipelined_transfer_tprt(t).await? {
                    named
                } else {
                    (s.parallelism, s.sizing) = tcp_sizing;
                    tcp
                }
            }
            (_, Listeners::One(l)) | (None, Listeners::Twinned { named: l, .. }) => l,
        };
        s.channel = Channel::Listening { listener, cached: Vec::new() };
        let mut accepted = true;
        for (_, expect) in &queued {
            let r = s.ctrl.reply().await?;
            accepted &= match expect {
                Expect::Restart => r.code.get() == 350,
                _ => r.code.is_positive_completion(),
            };
        }
        if !accepted {
            // Not a GridFTP server, or not one that takes SPOR: set up
            // anew, the usual way, once the RETR's refusal is read.
            s.mode = None;
            s.channel = Channel::None;
            s.parallelism_sent = None;
            s.buffer_sent = false;
            s.ctrl.forget_type();
        }
        s.pending = Some(path.to_string());
        Ok(s)
    }

    /// The `TPRT` to send with a pipelined download's set-up: for `quic`
    /// on a TLS control channel (QUIC data needs PROT P, which the login
    /// sends), and for `udt` on a clear one. Any server then gets the same
    /// answer as un-pipelined: a Ferry server takes `TPRT quic` and
    /// connects by QUIC; one that refuses it (a Ferry server without QUIC:
    /// 501/504) or does not know it (Globus, pure-ftpd: 500) connects by
    /// TCP to the same port (`listen_twinned`), which is where an
    /// un-pipelined session ended too (Globus's `SITE SETNETSTACK quic`
    /// names no driver it has).
    ///
    /// `udt` also sends Globus's way of asking, `SITE SETNETSTACK udt`,
    /// right after its TPRT (and rate), before the transfer's SPOR: a
    /// Globus server with the UDT driver answers the TPRT 500 and the SITE
    /// 250, and connects by UDT; a Ferry server takes both (the second
    /// names the transport it already has and changes nothing, the rate
    /// included); a server with neither refuses both and connects by TCP
    /// to the twinned listener. One round trip less than asking first
    /// (session 12: `docs/udt.md`, "Starting at a measured rate").
    /// Encrypted UDT (a TLS control channel) keeps its own round trips.
    fn pipelined_transfer_tprt(&mut self) -> Option<PipelinedTprt> {
        let name = self.opts.transport.as_deref()?;
        let quic = name.eq_ignore_ascii_case("quic") && self.ctrl.is_tls();
        let udt = name.eq_ignore_ascii_case("udt") && !self.ctrl.is_tls();
        if !quic && !udt {
            return None;
        }
        let mut t = self.pipelined_tprt()?;
        t.netstack = udt;
        Some(t)
    }

    /// Reads the replies to the `TPRT` of a pipelined download; whether
    /// the server's data connections will be QUIC (else TCP). Unlike
    /// [`finish_pipelined_tprt`](Self::finish_pipelined_tprt) it asks
    /// nothing more: the transfer's set-up and RETR are already sent.
    async fn finish_pipelined_transfer_tprt(&mut self, t: PipelinedTprt) -> Result<bool, ClientError> {
        let r = self.ctrl.reply().await?;
        let rate_reply = match &t.rate {
            Some(_) => Some(self.ctrl.reply().await?),
            None => None,
        };
        let site = match t.netstack {
            true => Some(self.ctrl.reply().await?),
            false => None,
        };
        if r.code.is_positive_completion() {
            self.transport = t.name.clone();
            self.on_pipelined_rate(t.rate, rate_reply);
            return Ok(true);
        }
        match site {
            Some(s) if s.code.is_positive_completion() => {
                // Globus's way: it never sees a rate (its 5xx to the OPTS
                // does not matter).
                tracing::debug!(server = %self.url, reply = %r.text(), "TPRT unknown; SITE SETNETSTACK took it");
                self.transport = t.name.clone();
                Ok(true)
            }
            Some(s) => {
                tracing::warn!(server = %self.url, transport = %t.name, reply = %r.text(), site = %s.text(), "transport refused; using tcp");
                Ok(false)
            }
            None => {
                tracing::warn!(server = %self.url, transport = %t.name, reply = %r.text(), "transport refused; using tcp");
                Ok(false)
            }
        }
    }

    pub(super) async fn connect(url: &RemoteUrl, opts: &ChannelOptions) -> Result<ControlChannel, ClientError> {
        if url.scheme == crate::location::Scheme::Ftps {
            let config = match &opts.tls {
                Some(c) => c.clone(),
                None => crate::tls::TlsOptions::default().client_config()?,
            };
            return ControlChannel::connect_tls(&url.host, url.port, opts.timeout, config).await;
        }
        ControlChannel::connect(&url.host, url.port, opts.timeout).await
    }

    pub(super) fn new(ctrl: ControlChannel, url: &RemoteUrl, opts: ChannelOptions) -> Self {
        Self {
            parallelism: 1,
            rtt: Duration::ZERO,
            sizing: String::new(),
            ctrl,
            url: url.clone(),
            opts,
            mode: None,
            channel: Channel::None,
            parallelism_sent: None,
            buffer_sent: false,
            broken: false,
            queued: Vec::new(),
            probe: None,
            pending: None,
            probes: Arc::default(),
            utime_works: None,
            chmod_works: None,
            transport: "tcp".to_string(),
            udt_sealed: false,
            transport_choice: None,
            remembered_rate_announced: false,
            data_peer: None,
            first_line_share: None,
        }
    }

    /// Asks the server for the data-channel transport `name` (`TPRT`,
    /// `docs/transports.md`). TCP needs no asking: it is every server's
    /// default, and a Globus server would only answer 500. A refusal (5xx)
    /// leaves the session on TCP with a warning, as does a transport the
    /// server accepts but this client does not have (it is switched back).
    pub async fn select_transport(&mut self, name: &str) -> Result<(), ClientError> {
        if name.eq_ignore_ascii_case("tcp") {
            return Ok(());
        }
        if name.eq_ignore_ascii_case("udt") && self.ctrl.udt_secret().is_some() {
            // On a TLS control channel, ask for UDT whose PROT P data is
            // encrypted (a Ferry server); a server without it answers 501
            // or 504, and plain `TPRT udt` follows (whose PROT P data that
            // server refuses with a 425, never moving it in clear).
            let sealed = Command::Tprt(ferry_proto::transport::SEALED_UDT.to_string());
            let r = self.ctrl.command(&sealed).await?;
            if r.code.is_positive_completion() {
                self.transport = "udt".to_string();
                self.udt_sealed = true;
                self.size_streams_for_udt();
                self.announce_path_rate().await?;
                return Ok(());
            }
            tracing::debug!(server = %self.url, reply = %r.text(), "no encrypted udt; asking for plain udt");
        }
        let mut r = self.ctrl.command(&Command::Tprt(name.to_string())).await?;
        let by_tprt = !matches!(r.code.get(), 500 | 502);
        if !by_tprt {
            // A server that does not know TPRT may still speak Globus's
            // way of choosing a data-channel stack (a Globus server with
            // the UDT driver answers 250 to `SITE SETNETSTACK udt`).
            let site = Command::Site(SiteCommand::SetNetStack(name.to_ascii_lowercase()));
            r = self.ctrl.command(&site).await?;
        }
        if !r.code.is_positive_completion() {
            tracing::warn!(server = %self.url, transport = name, reply = %r.text(), "transport refused; using tcp");
            return Ok(());
        }
        let here = transport::by_name(name).filter(|t| transport::networked().contains(&t.name()));
        match here {
            Some(t) => {
                self.transport = t.name().to_string();
                self.size_streams_for_udt();
                if matches!(self.transport.as_str(), "udt" | "quic") && by_tprt {
                    self.announce_path_rate().await?;
                }
            }
            None => {
                tracing::warn!(transport = name, "this client has no such transport; using tcp");
                let _ = self.ctrl.command(&Command::Tprt("tcp".into())).await?;
            }
        }
        Ok(())
    }

    /// The `TPRT` (and `OPTS TPRT Rate=N;`) to send in the login's write,
    /// when the user named a transport this client has and whose request
    /// takes one command: `quic`, or `udt` on a clear control channel
    /// (encrypted UDT asks for its sealed form first and falls back on the
    /// reply, so it keeps its own round trips). Pipelining them is safe
    /// with any RFC 959 server: they follow PASS, so a server processes
    /// them logged in, and one that does not know them answers 500 (Globus)
    /// or 501, which decides nothing the other commands of the batch
    /// depend on. The rate is looked up at the RTT the connection's
    /// handshakes measured (`path_rate`); `size_streams` measures again
    /// after the login.
    fn pipelined_tprt(&mut self) -> Option<PipelinedTprt> {
        let name = self.opts.transport.clone()?.to_ascii_lowercase();
        let here = transport::by_name(&name).filter(|t| transport::networked().contains(&t.name()))?;
        let pipelines = name == "quic" || (name == "udt" && self.ctrl.udt_secret().is_none());
        if !pipelines || here.name() != name {
            return None;
        }
        self.rtt = self.ctrl.tcp_info().map(|i| i.path_rtt()).unwrap_or_default();
        let rate = self.path_rate();
        Some(PipelinedTprt { name, rate, netstack: false })
    }

    /// Reads the replies to a pipelined `TPRT` (and its rate), and does
    /// what [`select_transport`](Self::select_transport) does with them.
    async fn finish_pipelined_tprt(&mut self, t: PipelinedTprt) -> Result<(), ClientError> {
        let r = self.ctrl.reply().await?;
        let rate_reply = match &t.rate {
            Some(_) => Some(self.ctrl.reply().await?),
            None => None,
        };
        if matches!(r.code.get(), 500 | 502) {
            // Not a Ferry server: the rate's 5xx does not matter; Globus's
            // way is asked as before.
            tracing::debug!(server = %self.url, reply = %r.text(), "TPRT unknown; asking with SITE SETNETSTACK");
            return self.select_transport(&t.name).await;
        }
        if !r.code.is_positive_completion() {
            tracing::warn!(server = %self.url, transport = %t.name, reply = %r.text(), "transport refused; using tcp");
            return Ok(());
        }
        self.transport = t.name.clone();
        self.size_streams_for_udt();
        self.on_pipelined_rate(t.rate, rate_reply);
        Ok(())
    }

    /// Tells a Ferry server that accepted `TPRT udt` (or `TPRT quic`) the
    /// path rate this client measured (`ferry cp --path-rate`, from `ferry
    /// probe`), so its UDT or QUIC senders — the server sends a download — start at it
    /// rather than cold: `OPTS TPRT Rate=N;`, capped by this copy's
    /// `--max-rate`. Sent only after `TPRT` succeeded (a Globus server,
    /// reached through `SITE SETNETSTACK`, never sees it); a server that
    /// does not know it answers 501 and its senders start cold.
    async fn announce_path_rate(&mut self) -> Result<(), ClientError> {
        let Some((rate, from)) = self.path_rate() else {
            tracing::info!(server = %self.url, "no path rate given or remembered; udt senders start cold");
            return Ok(());
        };
        self.note_announced_rate(rate, from);
        let r = self.ctrl.command(&rate_command(rate)).await?;
        self.on_rate_reply(rate, &r);
        Ok(())
    }

    /// The rate announced with a pipelined `TPRT` (if any) and the
    /// server's answer to it.
    fn on_pipelined_rate(&mut self, rate: Option<(f64, String)>, reply: Option<Reply>) {
        match (rate, reply) {
            (Some((rate, from)), Some(rr)) => {
                self.note_announced_rate(rate, from);
                self.on_rate_reply(rate, &rr);
            }
            _ => tracing::info!(server = %self.url, "no path rate given or remembered; senders start cold"),
        }
    }

    /// Logs the rate about to be announced and tells the path cache, so
    /// the copy's sample is judged against it.
    fn note_announced_rate(&self, rate: f64, from: String) {
        tracing::info!(server = %self.url, rate, from = %from, "udt senders start at the path rate");
        if let Some(c) = &self.opts.path_cache {
            c.note_announced(crate::path_cache::Announced { server: self.url.host.clone(), rate, from });
        }
    }

    /// The server's answer to `OPTS TPRT Rate=N;`.
    fn on_rate_reply(&mut self, rate: f64, r: &Reply) {
        if r.code.is_positive_completion() {
            self.remembered_rate_announced = self.opts.path_rate.is_none();
            tracing::debug!(server = %self.url, rate, "announced the path rate to the server's udt senders");
        } else {
            tracing::info!(server = %self.url, reply = %r.text(), "the server takes no path rate; its udt senders start cold");
        }
    }

    /// The path rate this session's UDT senders start at, bytes/s, and
    /// where it came from: the copy's `--path-rate`, else what the path
    /// cache remembers of this host at about this session's RTT; capped by
    /// the copy's `--max-rate`.
    pub(crate) fn path_rate(&self) -> Option<(f64, String)> {
        let given = self.opts.path_rate.filter(|r| r.is_finite() && *r >= 1.0).map(|r| (r, "--path-rate".to_string()));
        let (r, mut from) = given.or_else(|| {
            let m = self.opts.path_cache.as_ref()?.lookup(&self.url.host, self.rtt)?;
            Some((m.rate, m.describe()))
        })?;
        match self.opts.max_rate {
            Some(c) if c < r => {
                from.push_str(&format!(", capped by --max-rate from {:.1} MB/s", r / 1e6));
                Some((c, from))
            }
            _ => Some((r, from)),
        }
    }

    /// Has the server forget a path rate the path cache gave it (`OPTS
    /// TPRT Rate=0;`): before a third-party copy, whose data runs between
    /// the servers, not over the client's path the cache measured. A rate
    /// the user gave (`--path-rate`) stays: they chose it for this copy.
    pub(super) async fn forget_remembered_path_rate(&mut self) -> Result<(), ClientError> {
        if !std::mem::take(&mut self.remembered_rate_announced) {
            return Ok(());
        }
        let opts = Command::Opts(ferry_proto::command::Opts::Other { command: "TPRT".into(), args: "Rate=0;".into() });
        let r = self.ctrl.command(&opts).await?;
        tracing::info!(server = %self.url, reply = %r.text(), "third-party copy: the server's udt senders start cold, not at the rate remembered for this client's path");
        Ok(())
    }

    /// Records what a transfer of this session delivered in the path
    /// cache, when it was long enough to speak for the path
    /// (`path_cache::Sample::of_transfer`). `bytes` is what the copy's
    /// progress counter moved meanwhile: with several sessions to one
    /// host at once, their sum, which is what the path carried.
    /// `trace` is what had moved by when (`path_cache::steady_rate`): the
    /// sample remembers the steady state, not the start-up's average.
    pub(super) fn record_path_sample(&self, bytes: u64, took: Duration, trace: &[(f64, u64)]) {
        let Some(c) = &self.opts.path_cache else { return };
        let how = format!("{} transfer", self.transport_name());
        if let Some(s) = crate::path_cache::Sample::of_transfer_traced(bytes, took.as_secs_f64(), self.rtt, &how, trace)
        {
            tracing::debug!(server = %self.url, rate = s.rate, bytes, secs = s.seconds, "path rate sample");
            c.observe(&self.url.host, s);
        }
    }

    /// Moves this session's data channels back to TCP (`TPRT tcp`, or
    /// Globus's `SITE SETNETSTACK tcp` where TPRT is unknown): the two
    /// servers of a third-party copy must use one transport between them.
    pub async fn fall_back_to_tcp(&mut self, why: &str) -> Result<(), ClientError> {
        if self.transport == "tcp" {
            return Ok(());
        }
        let tprt = Command::Tprt("tcp".into());
        let mut r = self.ctrl.command(&tprt).await?;
        if matches!(r.code.get(), 500 | 502) {
            r = self.ctrl.command(&Command::Site(SiteCommand::SetNetStack("tcp".into()))).await?;
        }
        if !r.code.is_positive_completion() {
            return Err(crate::control::refused(&tprt, r));
        }
        tracing::warn!(server = %self.url, from = %self.transport, why, "data channels back to tcp");
        if let Some(c) = &mut self.transport_choice {
            c.push_str(&format!("; then tcp: {why}"));
        }
        self.transport = "tcp".to_string();
        self.udt_sealed = false;
        // A listener or cached connection of the old transport is no use.
        self.channel = Channel::None;
        Ok(())
    }

    /// The transport this session's data channels use: the one `TPRT`
    /// chose, except that a transport that is TLS itself (`quic`) is used
    /// by the server only under `PROT P`, so a session left in `PROT C`
    /// (a third-party copy the servers cannot run over QUIC) moved its
    /// data over TCP.
    pub fn transport_name(&self) -> &str {
        if self.transport == "quic" && !self.ctrl.data_private() {
            return "tcp";
        }
        &self.transport
    }

    /// Chooses the stream count from the control connection's RTT (and
    /// the file's size, when known), unless the user gave one.
    pub(super) fn size_streams(&mut self, file_size: Option<u64>) {
        self.rtt = self.ctrl.tcp_info().map(|i| i.path_rtt()).unwrap_or_default();
        (self.parallelism, self.sizing) = match self.opts.parallelism {
            Some(p) => (p.max(1), format!("{p} stream(s) as asked")),
            None => {
                let est = ferry_io::sizing::PathEstimate {
                    rtt: self.rtt,
                    rate: None,
                    socket_buffer_max: ferry_io::sizing::socket_buffer_max(),
                };
                let s = ferry_io::sizing::choose(est, file_size);
                (s.parallelism, format!("{} stream(s): {}", s.parallelism, s.reason))
            }
        };
        tracing::info!(server = %self.url, rtt_ms = self.rtt.as_secs_f64() * 1e3, sizing = %self.sizing, "data channel sizing");
    }

    /// One stream on UDT unless the user asked for more. The login sized
    /// the streams for TCP, whose per-connection window is capped by the
    /// socket buffers (32 streams on a long path with 128 KiB buffers);
    /// a UDT connection paces at the path's rate by itself, and each of
    /// those streams would run its own controller, or its own fixed
    /// blast rate: 32 blasts at the path's capacity overflowed the
    /// bottleneck many times over (bench/results/udt-table3, "Findings").
    pub(super) fn size_streams_for_udt(&mut self) {
        if self.transport == "udt" && self.opts.parallelism.is_none() && self.parallelism > 1 {
            self.set_streams(1, "UDT paces one connection at the path's rate");
            tracing::info!(server = %self.url, sizing = %self.sizing, "data channel sizing");
        }
    }

    /// Reads the answer to a RETR sent with the login and not used. If the
    /// server took it and is sending, the session is beyond repair.
    pub async fn settle(&mut self) -> Result<(), ClientError> {
        if self.pending.take().is_none() {
            return Ok(());
        }
        let r = self.preliminary_or_refusal().await?;
        if r.code.is_preliminary() {
            tracing::debug!("a pipelined RETR went unused; reopening the session");
            self.reset_after_batch();
        }
        Ok(())
    }

    /// The facts of `path` if it was probed at login (once: later calls
    /// ask the server again, since the file may have changed).
    pub fn take_probe(&mut self, path: &str) -> Option<Option<FileFacts>> {
        match self.probe.take() {
            Some((p, facts)) if p == path => Some(facts),
            other => {
                self.probe = other;
                None
            }
        }
    }
}

/// The data listener(s) of a pipelined download: one, or the named
/// transport's and TCP's on the same port number until the server's
/// answer to `TPRT` says which it will use.
enum Listeners {
    One(Arc<dyn ferry_io::transport::DataListener>),
    Twinned { named: Arc<dyn ferry_io::transport::DataListener>, tcp: Arc<dyn ferry_io::transport::DataListener> },
}

impl Listeners {
    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match self {
            Self::One(l) | Self::Twinned { named: l, .. } => l.local_addr(),
        }
    }
}

/// A `TPRT` sent with the login: the transport, and the path rate
/// announced after it, if any.
struct PipelinedTprt {
    name: String,
    rate: Option<(f64, String)>,
    /// `SITE SETNETSTACK name` follows (a pipelined UDT download: Globus's
    /// way of asking, for a server that does not know TPRT).
    netstack: bool,
}

impl PipelinedTprt {
    fn commands(&self) -> Vec<Command> {
        let mut v = vec![Command::Tprt(self.name.clone())];
        if let Some((rate, _)) = &self.rate {
            v.push(rate_command(*rate));
        }
        if self.netstack {
            v.push(Command::Site(SiteCommand::SetNetStack(self.name.clone())));
        }
        v
    }
}

/// `OPTS TPRT Rate=N;`: the path rate, bytes/s, a Ferry server's senders
/// start at.
fn rate_command(rate: f64) -> Command {
    Command::Opts(ferry_proto::command::Opts::Other {
        command: "TPRT".into(),
        args: format!("Rate={};", rate.round().max(1.0) as u64),
    })
}
