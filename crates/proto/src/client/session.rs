//! A client's control connection as a state machine: bytes in, commands
//! out, events up, time passed in (the shape of `quinn-proto`'s
//! `Connection`). It composes what the socket-driving client uses — the
//! reply parser, the [`LoginSequence`], the [`Pipeline`] of commands in
//! flight, the marker and passive-reply parsers — and is what the `Pair`
//! tests drive against a server [`Session`](crate::Session) in memory.
//!
//! A driver loops: write what [`poll_transmit`](ClientSession::poll_transmit)
//! gives, feed what it reads to [`handle_input`](ClientSession::handle_input),
//! take [`poll_event`](ClientSession::poll_event)s, and call
//! [`handle_timeout`](ClientSession::handle_timeout) at
//! [`poll_timeout`](ClientSession::poll_timeout).

use super::expect::{Expect, Marker};
use super::features::Features;
use super::login::{LoginError, LoginOutcome, LoginSequence};
use super::parse::passive_address;
use super::pipeline::{Pipeline, PipelineEvent, Tag};
use crate::command::Command;
use crate::reply::{Reply, ReplyError, ReplyParser};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// What happened on the control connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent {
    LoggedIn(LoginOutcome),
    LoginFailed(LoginError),
    /// A 1yz for command `tag`: its transfer runs.
    Preliminary {
        tag: Tag,
        reply: Reply,
    },
    Marker {
        tag: Option<Tag>,
        marker: Marker,
    },
    /// The final reply to command `tag`. `passive`: the data address of an
    /// accepted PASV/EPSV.
    Done {
        tag: Tag,
        command: Command,
        reply: Reply,
        accepted: bool,
        passive: Option<SocketAddr>,
    },
    /// A reply nothing waited for (a `421` before the server closes).
    Unsolicited(Reply),
    /// No reply in time: the connection is to be given up.
    TimedOut {
        waiting_for: Option<Command>,
    },
    /// The server broke the reply framing: the connection is to be given up.
    Protocol(ReplyError),
}

#[derive(Debug)]
pub struct ClientSession {
    parser: ReplyParser,
    pipeline: Pipeline,
    login: Option<(LoginSequence, Instant)>,
    transmit: Vec<u8>,
    events: VecDeque<ClientEvent>,
    features: Features,
    peer: IpAddr,
    timeout: Duration,
    broken: bool,
}

impl ClientSession {
    /// `peer`: the control connection's peer, where passive data
    /// connections go (see [`passive_address`]).
    pub fn new(peer: IpAddr, timeout: Duration) -> Self {
        Self {
            parser: ReplyParser::default(),
            pipeline: Pipeline::new(timeout),
            login: None,
            transmit: Vec::new(),
            events: VecDeque::new(),
            features: Features::default(),
            peer,
            timeout,
            broken: false,
        }
    }

    /// Queues the login batch (see [`LoginSequence`]); the greeting is
    /// expected first.
    pub fn login(&mut self, user: &str, password: &str, tls: bool, probe: Option<&str>, now: Instant) {
        let (seq, cmds) = LoginSequence::new(user, password, tls, probe, false);
        for c in &cmds {
            self.transmit.extend_from_slice(&c.to_wire());
        }
        self.login = Some((seq, now));
    }

    /// Queues a command; its final reply comes back as
    /// [`ClientEvent::Done`] with the returned tag.
    pub fn send(&mut self, cmd: Command, expect: Expect, now: Instant) -> Tag {
        self.transmit.extend_from_slice(&cmd.to_wire());
        self.pipeline.sent(cmd, expect, now)
    }

    /// Queues a command whose replies depend on another party (a
    /// third-party copy: a Globus destination answers its STOR only once
    /// the source has connected), so no deadline applies to it; see
    /// [`Pipeline::sent_untimed`].
    pub fn send_untimed(&mut self, cmd: Command, expect: Expect, now: Instant) -> Tag {
        self.transmit.extend_from_slice(&cmd.to_wire());
        self.pipeline.sent_untimed(cmd, expect, now)
    }

    /// Bytes to write to the control connection.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        (!self.transmit.is_empty()).then(|| std::mem::take(&mut self.transmit))
    }

    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Bytes read from the control connection.
    pub fn handle_input(&mut self, bytes: &[u8], now: Instant) {
        if self.broken {
            return;
        }
        self.parser.push(bytes);
        // Once broken (a refused login, bad framing), nothing more is
        // read: replies to the rest of a refused login batch answer
        // nothing the client asked.
        while !self.broken {
            match self.parser.next_reply() {
                Ok(Some(r)) => self.on_reply(r, now),
                Ok(None) => break,
                Err(e) => {
                    self.broken = true;
                    self.events.push_back(ClientEvent::Protocol(e));
                    break;
                }
            }
        }
    }

    fn on_reply(&mut self, r: Reply, now: Instant) {
        if let Some((seq, since)) = &mut self.login {
            *since = now;
            match seq.on_reply(&r) {
                Ok(None) => {}
                Ok(Some(outcome)) => {
                    self.features = outcome.features.clone();
                    self.login = None;
                    self.events.push_back(ClientEvent::LoggedIn(outcome));
                }
                Err(e) => {
                    self.login = None;
                    self.broken = true;
                    self.events.push_back(ClientEvent::LoginFailed(e));
                }
            }
            return;
        }
        let ev = match self.pipeline.on_reply(r, now) {
            PipelineEvent::Preliminary { tag, reply } => ClientEvent::Preliminary { tag, reply },
            PipelineEvent::Marker { tag, marker: Some(marker), .. } => ClientEvent::Marker { tag, marker },
            PipelineEvent::Marker { marker: None, .. } => return,
            PipelineEvent::Final { tag, command, reply, accepted } => {
                let passive = if accepted { passive_address(&reply, self.peer) } else { None };
                ClientEvent::Done { tag, command, reply, accepted, passive }
            }
            PipelineEvent::Unsolicited(r) => ClientEvent::Unsolicited(r),
        };
        self.events.push_back(ev);
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.broken {
            return None;
        }
        match &self.login {
            Some((_, since)) => Some(*since + self.timeout),
            None => self.pipeline.deadline(),
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.poll_timeout().is_some_and(|d| now >= d) {
            self.broken = true;
            let waiting_for = self.pipeline.front().map(|(_, c)| c.clone());
            self.events.push_back(ClientEvent::TimedOut { waiting_for });
        }
    }

    /// What FEAT listed at login.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// Commands sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.pipeline.len()
    }

    pub fn is_logging_in(&self) -> bool {
        self.login.is_some()
    }

    /// Whether the connection must be given up (login refused, timeout,
    /// broken framing).
    pub fn is_broken(&self) -> bool {
        self.broken
    }
}
