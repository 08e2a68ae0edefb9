//! `Pair`: a client [`ClientSession`] and a server [`Session`] wired in
//! memory with a simulated clock, as quinn tests `quinn-proto` with its
//! in-memory `Pair`. No sockets, no threads, no sleeps.
//!
//! The server's driver is modelled here the way `ferry-server` drives the
//! session: logins checked against one password, file operations on an
//! in-memory file system, commands that arrive during a transfer queued
//! (ABOR, NOOP and STAT served at once), MODE E receives through the
//! production reader ([`BlockReader`] per connection, one
//! [`ReceiveTracker`]), `111`/`112` markers on the simulated clock.
//!
//! Data connections are [`Pipe`]s: bytes one way, kept across transfers
//! in MODE E (GFD.20 channel caching: each transfer ends with EOD on every
//! connection and the next one follows on the same pipes), one per
//! transfer in stream mode (ended by closing it).

use ferry_proto::client::{ClientEvent, ClientSession, Expect, Tag};
use ferry_proto::command::{Command, RestArg, TransferMode};
use ferry_proto::line::{parse_line, LineBuffer};
use ferry_proto::markers::{range_marker, PerfMarker};
use ferry_proto::mode_e::{BlockHeader, BlockLimits, BlockReader, ReceiveTracker, Want};
use ferry_proto::session::{
    Access, Action, FileDone, FileOp, FsError, Grant, LoginRequest, SessionConfig, TransferError, TransferKind,
    TransferOutcome, TransferRequest,
};
use ferry_proto::{RangeSet, Reply, Session};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub const PASSWORD: &str = "right";
pub const SERVER: &str = "127.0.0.1:2811";
pub const CLIENT: &str = "127.0.0.1:40000";

/// One direction of a data connection.
#[derive(Debug, Default, Clone)]
pub struct Pipe {
    pub bytes: VecDeque<u8>,
    /// The writer closed it (stream mode: the end of the file).
    pub closed: bool,
}

impl Pipe {
    pub fn write(&mut self, data: &[u8]) {
        self.bytes.extend(data);
    }

    pub fn read(&mut self, max: usize) -> Vec<u8> {
        let n = max.min(self.bytes.len());
        self.bytes.drain(..n).collect()
    }
}

/// The data connections between the two ends.
#[derive(Debug, Default)]
pub struct DataChannel {
    /// MODE E connections the client sends on (STOR); cached across files.
    pub up: Vec<Pipe>,
    /// MODE E connections the server sends on (RETR); cached across files.
    pub down: Vec<Pipe>,
    /// Stream-mode connections, one per transfer, in order.
    pub stream_up: VecDeque<Pipe>,
    pub stream_down: VecDeque<Pipe>,
}

/// An upload the server holds but has not committed.
#[derive(Debug, Clone, Default)]
pub struct Partial {
    pub data: Vec<u8>,
    pub have: RangeSet,
}

#[derive(Debug, Default)]
pub struct Fs {
    pub files: BTreeMap<String, Vec<u8>>,
    pub partial: BTreeMap<String, Partial>,
}

/// A transfer the server's driver runs.
#[derive(Debug)]
struct Running {
    req: TransferRequest,
    /// MODE E receive: one reader per connection, one tracker.
    readers: Vec<BlockReader>,
    tracker: ReceiveTracker,
    /// Stream-mode receive: bytes so far, from the REST offset.
    stream_at: u64,
    /// The transfer's own data is all sent (a RETR or listing).
    sent: bool,
    next_marker: Instant,
    bytes: u64,
}

/// The server end: the session and a driver for it.
pub struct Server {
    pub session: Session,
    lines: LineBuffer,
    queue: VecDeque<Result<Command, ferry_proto::CommandError>>,
    pub out: Vec<u8>,
    pub fs: Fs,
    running: Option<Running>,
    next_port: u16,
    /// Bytes of each MODE E connection the receiver reads per tick.
    pub chunk: usize,
    pub closed: bool,
}

impl Server {
    pub fn new(config: SessionConfig, fs: Fs) -> Self {
        let session = Session::new(config, CLIENT.parse().expect("address"));
        let mut s = Self {
            session,
            lines: LineBuffer::new(8192),
            queue: VecDeque::new(),
            out: Vec::new(),
            fs,
            running: None,
            next_port: 50000,
            chunk: 1 << 20,
            closed: false,
        };
        let greeting = s.session.greeting();
        s.reply(&greeting);
        s
    }

    fn reply(&mut self, r: &Reply) {
        self.out.extend_from_slice(&r.to_bytes());
    }

    /// Control bytes from the client.
    pub fn input(&mut self, bytes: &[u8], now: Instant, data: &mut DataChannel) {
        self.lines.push(bytes);
        while let Some(line) = self.lines.next_line() {
            let cmd = parse_line(line);
            let busy = self.running.is_some();
            match &cmd {
                Ok(c) if busy && (c.is_urgent() || matches!(c, Command::Noop)) => match self.session.handle(cmd) {
                    Action::Reply(r) => self.reply(&r),
                    Action::AbortTransfer => self.finish(TransferOutcome::Failed(TransferError::Aborted), now),
                    _ => {}
                },
                _ => self.queue.push_back(cmd),
            }
        }
        self.run_queue(now, data);
    }

    fn run_queue(&mut self, now: Instant, data: &mut DataChannel) {
        while self.running.is_none() && !self.closed {
            let Some(cmd) = self.queue.pop_front() else { return };
            let action = self.session.handle(cmd);
            self.act(action, now, data);
        }
    }

    fn act(&mut self, action: Action, now: Instant, data: &mut DataChannel) {
        match action {
            Action::Reply(r) => self.reply(&r),
            Action::Close(r) => {
                self.reply(&r);
                self.closed = true;
            }
            Action::Login(req) => {
                let grant = match req {
                    LoginRequest::Password { user, password } => {
                        (password == PASSWORD).then_some(Grant { user, access: Access::ReadWrite })
                    }
                    LoginRequest::Anonymous { access, .. } => Some(Grant { user: "anonymous".into(), access }),
                    LoginRequest::Certificate { user, .. } => Some(Grant { user, access: Access::ReadOnly }),
                };
                let next = self.session.login_result(grant);
                self.act(next, now, data);
            }
            Action::File(op) => {
                let result = self.file_op(op);
                let r = self.session.file_result(result);
                self.reply(&r);
            }
            Action::Passive(_) => {
                self.next_port += 1;
                let addr: SocketAddr = format!("127.0.0.1:{}", self.next_port).parse().expect("address");
                let r = self.session.passive_result(Ok(addr));
                self.reply(&r);
            }
            Action::StartTls(r) => {
                self.reply(&r);
                self.session.tls_started(Default::default());
            }
            Action::Transfer(req) => self.start(req, now, data),
            Action::AbortTransfer | Action::AbortFileOp | Action::Profile(_) => {}
        }
    }

    fn file_op(&mut self, op: FileOp) -> Result<FileDone, FsError> {
        let key = |p: &ferry_proto::VirtualPath| p.as_str().to_string();
        match op {
            FileOp::Size(p) => {
                self.fs.files.get(&key(&p)).map(|f| FileDone::Size(f.len() as u64)).ok_or(FsError::NotFound)
            }
            FileOp::Delete(p) => self.fs.files.remove(&key(&p)).map(|_| FileDone::Done).ok_or(FsError::NotFound),
            FileOp::ChangeDir(_) | FileOp::MakeDir(_) => Ok(FileDone::Done),
            FileOp::Facts(p) => {
                let f = self.fs.files.get(&key(&p)).ok_or(FsError::NotFound)?;
                Ok(FileDone::Facts(facts(p.file_name().unwrap_or("/"), f.len() as u64)))
            }
            _ => Err(FsError::Refused("not modelled by the Pair harness".into())),
        }
    }

    fn start(&mut self, req: TransferRequest, now: Instant, data: &mut DataChannel) {
        let path = req.path.as_str().to_string();
        let extended = req.mode == TransferMode::ExtendedBlock;
        let mut run = Running {
            readers: Vec::new(),
            tracker: ReceiveTracker::new(Some(64)),
            stream_at: 0,
            sent: false,
            next_marker: now + Duration::from_secs(u64::from(req.markers.restart_secs.unwrap_or(1))),
            bytes: 0,
            req: req.clone(),
        };
        match &req.kind {
            TransferKind::Retrieve => {
                let Some(file) = self.fs.files.get(&path).cloned() else {
                    self.running = Some(run);
                    return self.finish(TransferOutcome::Failed(TransferError::File(FsError::NotFound)), now);
                };
                let r = self.session.transfer_started(&path, Some(file.len() as u64), req.channel.reuse);
                self.reply(&r);
                let done = match &req.restart {
                    Some(RestArg::Ranges(r)) => r.clone(),
                    Some(RestArg::Offset(o)) => RangeSet::from_range(0..*o),
                    None => RangeSet::new(),
                };
                if extended {
                    let streams = req.channel.parallelism as usize;
                    if data.down.len() != streams {
                        data.down = vec![Pipe::default(); streams];
                    }
                    encode_mode_e(&file, &done.missing(file.len() as u64), 64 << 10, &mut data.down);
                } else {
                    let from = done.ranges().first().map_or(0, |r| r.end) as usize;
                    data.stream_down.push_back(Pipe {
                        bytes: file[from.min(file.len())..].iter().copied().collect(),
                        closed: true,
                    });
                }
                run.bytes = file.len() as u64;
                run.sent = true;
                self.running = Some(run);
                self.finish(TransferOutcome::Complete { bytes: file.len() as u64 }, now);
            }
            TransferKind::Store | TransferKind::Append => {
                let resumed = match &req.restart {
                    Some(RestArg::Ranges(r)) => {
                        let held = self.fs.partial.get(&path).map(|p| p.have.clone()).unwrap_or_default();
                        if r.ranges().iter().any(|x| !held.contains_range(x)) {
                            self.running = Some(run);
                            let why = "the server does not hold those ranges".to_string();
                            return self.finish(TransferOutcome::Failed(TransferError::BadRestart(why)), now);
                        }
                        true
                    }
                    Some(RestArg::Offset(o)) => {
                        run.stream_at = *o;
                        true
                    }
                    None => false,
                };
                if !resumed {
                    self.fs.partial.insert(path.clone(), Partial::default());
                }
                let r = self.session.transfer_started(&path, req.allocation, req.channel.reuse);
                self.reply(&r);
                if extended {
                    let limits = BlockLimits::new(req.allocation);
                    run.readers = data.up.iter().map(|_| BlockReader::new(limits)).collect();
                    for _ in &data.up {
                        let _ = run.tracker.connection_opened();
                    }
                }
                self.running = Some(run);
            }
            TransferKind::List { .. } => {
                let r = self.session.transfer_started(&path, None, req.channel.reuse);
                self.reply(&r);
                let listing: String = self.fs.files.keys().map(|k| format!("Type=file; {k}\r\n")).collect();
                data.stream_down.push_back(Pipe { bytes: listing.into_bytes().into(), closed: true });
                self.running = Some(run);
                self.finish(TransferOutcome::Complete { bytes: 0 }, now);
            }
        }
    }

    /// One tick of the receiving side: each connection gives up to
    /// `chunk` bytes; markers when due.
    pub fn tick(&mut self, now: Instant, data: &mut DataChannel) {
        let Some(run) = self.running.as_mut() else { return };
        if run.sent || !matches!(run.req.kind, TransferKind::Store | TransferKind::Append) {
            return;
        }
        let path = run.req.path.as_str().to_string();
        let partial = self.fs.partial.entry(path.clone()).or_default();
        let mut failure = None;
        if run.req.mode == TransferMode::ExtendedBlock {
            for (reader, pipe) in run.readers.iter_mut().zip(data.up.iter_mut()) {
                let mut budget = self.chunk;
                while budget > 0 {
                    match reader.want() {
                        Want::Header { missing } => {
                            let b = pipe.read(missing.min(budget));
                            if b.is_empty() {
                                break;
                            }
                            budget -= b.len();
                            match reader.push_header(&b) {
                                Ok(Some(h)) => {
                                    if let Err(e) = run.tracker.begin_block(&h) {
                                        failure = Some(e.to_string());
                                    }
                                }
                                Ok(None) => {}
                                Err(e) => failure = Some(e.to_string()),
                            }
                        }
                        Want::Payload { offset, len } => {
                            let b = pipe.read((len as usize).min(budget));
                            if b.is_empty() {
                                break;
                            }
                            budget -= b.len();
                            write_at(&mut partial.data, offset, &b);
                            let r = reader.payload_consumed(b.len() as u64);
                            partial.have.insert(r.clone());
                            run.bytes += b.len() as u64;
                            run.tracker.written(r);
                        }
                        Want::EndOfBlock(h) => {
                            if let Err(e) = run.tracker.end_block(&h) {
                                failure = Some(e.to_string());
                            }
                            reader.end_block();
                        }
                        Want::Done { .. } => break,
                    }
                    if failure.is_some() {
                        break;
                    }
                }
            }
        } else if let Some(pipe) = data.stream_up.front_mut() {
            let b = pipe.read(self.chunk);
            write_at(&mut partial.data, run.stream_at, &b);
            partial.have.insert(run.stream_at..run.stream_at + b.len() as u64);
            run.stream_at += b.len() as u64;
            run.bytes += b.len() as u64;
        }
        if let Some(why) = failure {
            return self.finish(TransferOutcome::Failed(TransferError::ConnectionLost(why)), now);
        }
        let run = self.running.as_mut().expect("running");
        if run.req.markers.restart_secs.is_some() && now >= run.next_marker {
            run.next_marker = now + Duration::from_secs(u64::from(run.req.markers.restart_secs.unwrap_or(1)));
            let perf = PerfMarker::new(0, run.bytes).reply();
            let marker = run.tracker.restart_marker().map(|m| range_marker(&m));
            self.reply(&perf);
            if let Some(m) = marker {
                self.reply(&m);
            }
        }
        let run = self.running.as_ref().expect("running");
        let complete = if run.req.mode == TransferMode::ExtendedBlock {
            run.tracker.is_complete() && run.readers.iter().all(|r| matches!(r.want(), Want::Done { .. }))
        } else {
            data.stream_up.front().is_some_and(|p| p.closed && p.bytes.is_empty())
        };
        if complete {
            if run.req.mode == TransferMode::Stream {
                data.stream_up.pop_front();
            }
            let partial = self.fs.partial.get(&path).cloned().unwrap_or_default();
            let size = run.req.allocation.unwrap_or(partial.data.len() as u64);
            if partial.have.missing(size).is_empty() {
                self.fs.partial.remove(&path);
                let mut bytes = partial.data;
                bytes.resize(size as usize, 0);
                self.fs.files.insert(path, bytes);
                let marker = self.running.as_mut().and_then(|r| r.tracker.restart_marker());
                if let Some(m) = marker {
                    self.reply(&range_marker(&m));
                }
                self.finish(TransferOutcome::Complete { bytes: size }, now);
            } else {
                let why = format!("ranges {:?} are missing", partial.have.missing(size));
                self.finish(TransferOutcome::Failed(TransferError::ConnectionLost(why)), now);
            }
        }
    }

    fn finish(&mut self, outcome: TransferOutcome, _now: Instant) {
        let Some(run) = self.running.take() else { return };
        for r in self.session.transfer_finished(&run.req.path, outcome) {
            self.reply(&r);
        }
    }

    /// The client vanished: the transfer fails, what arrived stays.
    pub fn client_gone(&mut self, now: Instant) {
        self.finish(TransferOutcome::Failed(TransferError::ConnectionLost("client gone".into())), now);
        self.closed = true;
    }

    pub fn is_transferring(&self) -> bool {
        self.running.is_some()
    }

    pub fn after_tick(&mut self, now: Instant, data: &mut DataChannel) {
        self.run_queue(now, data);
    }
}

fn write_at(buf: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[offset as usize..end].copy_from_slice(data);
}

pub fn facts(name: &str, size: u64) -> ferry_proto::facts::FileFacts {
    ferry_proto::client::listing::minimal_facts(name, ferry_proto::facts::FileKind::File, size)
}

/// GFD.20 sender: `ranges` of `file` in blocks of `block`, dealt round
/// robin over `pipes`; then EOD on every pipe, EOF with EODC on the first.
pub fn encode_mode_e(file: &[u8], ranges: &[std::ops::Range<u64>], block: usize, pipes: &mut [Pipe]) {
    let mut i = 0;
    for r in ranges {
        let mut at = r.start;
        while at < r.end {
            let end = (at + block as u64).min(r.end);
            let p = &mut pipes[i % pipes.len()];
            p.write(&BlockHeader::data(at, end - at).encode());
            p.write(&file[at as usize..end as usize]);
            at = end;
            i += 1;
        }
    }
    let n = pipes.len() as u64;
    for (k, p) in pipes.iter_mut().enumerate() {
        p.write(&if k == 0 { BlockHeader::eof(n) } else { BlockHeader::eod() }.encode());
    }
}

/// GFD.20 receiver, as the client's data path runs it: one transfer's
/// worth from every pipe, through the production reader and tracker.
pub fn decode_mode_e(pipes: &mut [Pipe], len: usize) -> (Vec<u8>, ReceiveTracker) {
    let mut out = vec![0u8; len];
    let mut tracker = ReceiveTracker::new(None);
    for p in pipes.iter_mut() {
        tracker.connection_opened().expect("no bound");
        let mut reader = BlockReader::new(BlockLimits::new(Some(len as u64)));
        loop {
            match reader.want() {
                Want::Header { missing } => {
                    let b = p.read(missing);
                    assert!(!b.is_empty(), "the connection ended before EOD");
                    if let Some(h) = reader.push_header(&b).expect("valid header") {
                        tracker.begin_block(&h).expect("no overlap");
                    }
                }
                Want::Payload { offset, len } => {
                    let b = p.read(len as usize);
                    out[offset as usize..offset as usize + b.len()].copy_from_slice(&b);
                    tracker.written(reader.payload_consumed(b.len() as u64));
                }
                Want::EndOfBlock(h) => {
                    tracker.end_block(&h).expect("EOD accounting");
                    reader.end_block();
                }
                Want::Done { .. } => break,
            }
        }
    }
    (out, tracker)
}

/// The two ends, the wires between them, and the simulated clock.
pub struct Pair {
    pub client: ClientSession,
    pub server: Server,
    pub data: DataChannel,
    pub now: Instant,
    /// Simulated time per step.
    pub tick: Duration,
    /// Every event the client reported, in order.
    pub events: Vec<ClientEvent>,
    /// Control-channel writes from the client (each a round trip's worth).
    pub client_writes: usize,
    pub connected: bool,
}

impl Pair {
    pub fn new(config: SessionConfig, fs: Fs) -> Self {
        let now = Instant::now();
        Self {
            client: ClientSession::new(SERVER.parse::<SocketAddr>().expect("address").ip(), Duration::from_secs(60)),
            server: Server::new(config, fs),
            data: DataChannel::default(),
            now,
            tick: Duration::from_millis(10),
            events: Vec::new(),
            client_writes: 0,
            connected: true,
        }
    }

    /// Moves control bytes both ways, runs the server's receiving side
    /// for one tick, and advances the clock. True if anything moved.
    pub fn step(&mut self) -> bool {
        if !self.connected {
            return false;
        }
        let mut moved = false;
        if let Some(bytes) = self.client.poll_transmit() {
            self.client_writes += 1;
            self.server.input(&bytes, self.now, &mut self.data);
            moved = true;
        }
        let busy = self.server.is_transferring();
        self.server.tick(self.now, &mut self.data);
        self.server.after_tick(self.now, &mut self.data);
        moved |= busy;
        if !self.server.out.is_empty() {
            let out = std::mem::take(&mut self.server.out);
            self.client.handle_input(&out, self.now);
            moved = true;
        }
        while let Some(ev) = self.client.poll_event() {
            self.events.push(ev);
        }
        self.now += self.tick;
        self.client.handle_timeout(self.now);
        while let Some(ev) = self.client.poll_event() {
            self.events.push(ev);
        }
        moved
    }

    /// Steps until nothing moves (or `max` steps).
    pub fn drive(&mut self, max: usize) {
        for _ in 0..max {
            if !self.step() {
                return;
            }
        }
    }

    /// Steps until `done` holds for the events so far.
    pub fn drive_until(&mut self, max: usize, done: impl Fn(&[ClientEvent]) -> bool) {
        for _ in 0..max {
            if done(&self.events) {
                return;
            }
            self.step();
        }
        assert!(done(&self.events), "not reached in {max} steps; events: {:#?}", self.events);
    }

    pub fn login(&mut self, user: &str) {
        self.client.login(user, PASSWORD, false, None, self.now);
        self.drive_until(100, |ev| {
            ev.iter().any(|e| matches!(e, ClientEvent::LoggedIn(_) | ClientEvent::LoginFailed(_)))
        });
    }

    pub fn send(&mut self, cmd: Command, expect: Expect) -> Tag {
        self.client.send(cmd, expect, self.now)
    }

    /// The final reply to `tag`, once it has come.
    pub fn done(&self, tag: Tag) -> Option<(&Reply, bool, Option<SocketAddr>)> {
        self.events.iter().find_map(|e| match e {
            ClientEvent::Done { tag: t, reply, accepted, passive, .. } if *t == tag => {
                Some((reply, *accepted, *passive))
            }
            _ => None,
        })
    }

    pub fn wait(&mut self, tag: Tag, max: usize) -> (Reply, bool, Option<SocketAddr>) {
        self.drive_until(max, |ev| ev.iter().any(|e| matches!(e, ClientEvent::Done { tag: t, .. } if *t == tag)));
        let (r, a, p) = self.done(tag).expect("reached");
        (r.clone(), a, p)
    }

    /// The union of the restart markers the client has received.
    pub fn restart_record(&self) -> RangeSet {
        let mut all = RangeSet::new();
        for e in &self.events {
            if let ClientEvent::Marker { marker: ferry_proto::client::Marker::Restart(r), .. } = e {
                all.union(r);
            }
        }
        all
    }

    /// Kills the client: its control and data connections vanish.
    pub fn kill_client(mut self) -> Fs {
        self.connected = false;
        self.server.client_gone(self.now);
        self.server.fs
    }
}
