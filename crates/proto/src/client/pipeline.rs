//! The commands in flight on one control connection, and which reply
//! answers which.
//!
//! RFC 959 §4.2: replies come in the order of the commands, one final
//! reply each (1yz replies and GridFTP's 111/112 markers come before it).
//! A client that sends several commands in one write — a set-up and a
//! transfer, a window of RETRs — keeps their expectations in a queue and
//! matches each final reply to the oldest command. Time is passed in: the
//! client waits `timeout` for a reply, counted from when the command became
//! the oldest, except while a transfer runs (its final reply comes when the
//! data is through, however long that takes).

use super::expect::{classify, Expect, Marker, ReplyClass};
use crate::command::Command;
use crate::reply::Reply;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Names one command sent through a [`Pipeline`].
pub type Tag = u64;

#[derive(Debug, Clone)]
struct InFlight {
    tag: Tag,
    command: Command,
    expect: Expect,
    /// When this command became the oldest (or was last heard of).
    since: Instant,
    /// A 1yz arrived: a transfer runs.
    started: bool,
    /// No deadline at all (see [`Pipeline::sent_untimed`]).
    untimed: bool,
}

/// What one reply meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PipelineEvent {
    /// A 1yz for the oldest command: a transfer began.
    Preliminary { tag: Tag, reply: Reply },
    /// A 111/112 during the oldest command (`None`: none in flight);
    /// `marker` is `None` when its text does not parse.
    Marker { tag: Option<Tag>, marker: Option<Marker>, reply: Reply },
    /// The final reply to the oldest command, and whether it is what the
    /// command's [`Expect`] needed.
    Final { tag: Tag, command: Command, reply: Reply, accepted: bool },
    /// A reply no command waits for (a `421` before the server closes).
    Unsolicited(Reply),
}

#[derive(Debug, Clone)]
pub struct Pipeline {
    in_flight: VecDeque<InFlight>,
    next_tag: Tag,
    timeout: Duration,
}

impl Pipeline {
    pub fn new(timeout: Duration) -> Self {
        Self { in_flight: VecDeque::new(), next_tag: 0, timeout }
    }

    /// Records a command written to the connection.
    pub fn sent(&mut self, command: Command, expect: Expect, now: Instant) -> Tag {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.in_flight.push_back(InFlight { tag, command, expect, since: now, started: false, untimed: false });
        tag
    }

    /// Records a command whose replies depend on another party, so no
    /// deadline applies to it even before its 1yz: in a third-party copy
    /// a Globus destination answers its STOR only once the source server
    /// has connected, and the source's RETR waits for the destination.
    /// The caller bounds such a wait some other way (the other server's
    /// replies, the data).
    pub fn sent_untimed(&mut self, command: Command, expect: Expect, now: Instant) -> Tag {
        let tag = self.sent(command, expect, now);
        self.in_flight.back_mut().expect("just sent").untimed = true;
        tag
    }

    /// Matches a reply to the command it answers.
    pub fn on_reply(&mut self, reply: Reply, now: Instant) -> PipelineEvent {
        let class = classify(&reply);
        let Some(front) = self.in_flight.front_mut() else {
            return match class {
                ReplyClass::Marker(marker) => PipelineEvent::Marker { tag: None, marker, reply },
                _ => PipelineEvent::Unsolicited(reply),
            };
        };
        front.since = now;
        match class {
            ReplyClass::Marker(marker) => PipelineEvent::Marker { tag: Some(front.tag), marker, reply },
            ReplyClass::Preliminary => {
                front.started = true;
                PipelineEvent::Preliminary { tag: front.tag, reply }
            }
            _ => {
                let done = self.in_flight.pop_front().expect("front exists");
                if let Some(next) = self.in_flight.front_mut() {
                    next.since = now;
                }
                let accepted = done.expect.accepts(&reply);
                PipelineEvent::Final { tag: done.tag, command: done.command, reply, accepted }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// The oldest command, whose reply comes next.
    pub fn front(&self) -> Option<(Tag, &Command)> {
        self.in_flight.front().map(|f| (f.tag, &f.command))
    }

    /// When the client stops waiting for the oldest command's reply;
    /// `None` when nothing is awaited or a transfer runs.
    pub fn deadline(&self) -> Option<Instant> {
        self.in_flight.front().filter(|f| !f.started && !f.untimed).map(|f| f.since + self.timeout)
    }

    pub fn is_timed_out(&self, now: Instant) -> bool {
        self.deadline().is_some_and(|d| now >= d)
    }

    /// Forgets everything in flight (the connection is given up): returns
    /// what was never answered.
    pub fn abandon(&mut self) -> Vec<(Tag, Command)> {
        self.in_flight.drain(..).map(|f| (f.tag, f.command)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{TransferMode, TransferType};
    use crate::reply::ReplyCode;

    fn r(code: u16, text: &str) -> Reply {
        Reply::new(ReplyCode::new(code).unwrap(), text)
    }

    #[test]
    fn replies_match_commands_in_order_with_time_passed_in() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut p = Pipeline::new(Duration::from_secs(10));
        let mode = p.sent(Command::Mode(TransferMode::ExtendedBlock), Expect::Positive, t0);
        let pasv = p.sent(Command::Pasv, Expect::Passive, t0);
        let stor = p.sent(Command::Stor("f".into()), Expect::Completion, t0);
        assert_eq!(p.deadline(), Some(t0 + 10 * s));
        assert!(
            matches!(p.on_reply(r(200, "ok"), t0 + s), PipelineEvent::Final { tag, accepted: true, .. } if tag == mode)
        );
        assert_eq!(p.deadline(), Some(t0 + 11 * s), "the next command's wait starts now");
        assert!(
            matches!(p.on_reply(r(200, "no"), t0 + s), PipelineEvent::Final { tag, accepted: false, .. } if tag == pasv)
        );
        assert!(matches!(p.on_reply(r(150, "go"), t0 + s), PipelineEvent::Preliminary { tag, .. } if tag == stor));
        assert_eq!(p.deadline(), None, "no deadline while a transfer runs");
        assert!(!p.is_timed_out(t0 + 1000 * s));
        assert!(matches!(
            p.on_reply(r(112, "Perf Marker"), t0 + 2 * s),
            PipelineEvent::Marker { tag: Some(t), marker: None, .. } if t == stor
        ));
        assert!(matches!(p.on_reply(r(226, "done"), t0 + 3 * s), PipelineEvent::Final { accepted: true, .. }));
        assert!(p.is_empty());
        assert!(matches!(p.on_reply(r(421, "bye"), t0), PipelineEvent::Unsolicited(_)));
        p.sent(Command::Type(TransferType::Image), Expect::Positive, t0);
        assert!(p.is_timed_out(t0 + 10 * s));
        assert_eq!(p.abandon().len(), 1);
    }

    #[test]
    fn deadline_expires_on_a_simulated_clock_and_markers_keep_a_wait_alive() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut p = Pipeline::new(Duration::from_secs(5));
        assert_eq!(p.deadline(), None, "nothing awaited");
        let setup = p.sent(Command::Type(crate::command::TransferType::Image), Expect::Positive, t0);
        let retr = p.sent(Command::Retr("f".into()), Expect::Completion, t0);
        assert!(!p.is_timed_out(t0 + 4 * s) && p.is_timed_out(t0 + 5 * s));
        assert!(matches!(p.on_reply(r(200, "ok"), t0 + 4 * s), PipelineEvent::Final { tag, .. } if tag == setup));
        // A marker before the 1yz (a server that sends 112 early) answers
        // nothing but shows the server alive: the wait restarts.
        assert!(matches!(
            p.on_reply(r(112, "Perf Marker"), t0 + 8 * s),
            PipelineEvent::Marker { tag: Some(t), .. } if t == retr
        ));
        assert_eq!(p.deadline(), Some(t0 + 13 * s));
        assert!(matches!(p.on_reply(r(150, "go"), t0 + 9 * s), PipelineEvent::Preliminary { tag, .. } if tag == retr));
        assert!(!p.is_timed_out(t0 + 10_000 * s), "the transfer's final reply is awaited untimed");
        assert!(matches!(
            p.on_reply(r(111, "Range Marker 0-10"), t0 + 10 * s),
            PipelineEvent::Marker { marker: Some(Marker::Restart(_)), .. }
        ));
        assert!(matches!(p.on_reply(r(150, "again"), t0 + 11 * s), PipelineEvent::Preliminary { .. }));
        assert!(matches!(
            p.on_reply(r(451, "disk"), t0 + 12 * s),
            PipelineEvent::Final { tag, accepted: false, .. } if tag == retr
        ));
        assert!(p.is_empty() && p.deadline().is_none());
    }

    #[test]
    fn untimed_commands_have_no_deadline_and_the_next_one_is_timed_from_their_reply() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut p = Pipeline::new(Duration::from_secs(5));
        let stor = p.sent_untimed(Command::Stor("f".into()), Expect::Completion, t0);
        let noop = p.sent(Command::Noop, Expect::Positive, t0);
        assert_eq!(p.deadline(), None, "a third-party STOR waits for the other server");
        assert!(!p.is_timed_out(t0 + 3600 * s));
        assert!(matches!(p.on_reply(r(226, "ok"), t0 + 3600 * s), PipelineEvent::Final { tag, .. } if tag == stor));
        assert_eq!(p.deadline(), Some(t0 + 3605 * s));
        assert!(matches!(p.on_reply(r(200, "ok"), t0 + 3601 * s), PipelineEvent::Final { tag, .. } if tag == noop));
    }
}
