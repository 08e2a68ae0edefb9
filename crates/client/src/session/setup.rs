//! The set-up commands queued ahead of a transfer and sent in the same
//! write as it: MODE, TYPE, the TCP buffer size (SBUF or SITE
//! RETRBUFSIZE/STORBUFSIZE), parallelism (OPTS RETR), PASV/EPSV, PORT/EPRT,
//! REST, and PROT (RFC 4217 §9). Each is queued only when the server's
//! state must change.

use super::{Channel, ServerSession};
use ferry_proto::client::Expect;
use ferry_proto::command::{Command, EpsvArg, Opts, ProtectionLevel, RestArg, TransferMode, TransferType};
use ferry_proto::RangeSet;
use std::net::SocketAddr;

impl ServerSession {
    pub(super) fn set_mode(&mut self, mode: TransferMode) {
        if self.mode != Some(mode) {
            self.queue(Command::Mode(mode), Expect::Positive);
            self.mode = Some(mode);
            self.channel = Channel::None;
        }
    }

    /// `--tcp-bs`: SBUF when FEAT lists it, else the SITE family Globus
    /// servers take (what globus-url-copy does).
    pub(super) fn send_buffer_size(&mut self) {
        let Some(n) = self.opts.tcp_buffer else { return };
        if self.buffer_sent {
            return;
        }
        if self.ctrl.features.has("SBUF") {
            self.queue(Command::Sbuf(n.into()), Expect::Positive);
        } else {
            use ferry_proto::command::SiteCommand::{RetrBufSize, StorBufSize};
            self.queue(Command::Site(RetrBufSize(n.into())), Expect::Positive);
            self.queue(Command::Site(StorBufSize(n.into())), Expect::Positive);
        }
        self.buffer_sent = true;
    }

    pub(super) fn prepare_e(&mut self) {
        self.set_mode(TransferMode::ExtendedBlock);
        if let Some(cmd) = self.ctrl.switch_type(TransferType::Image) {
            self.queue(cmd, Expect::Positive);
        }
        self.send_buffer_size();
    }

    /// The server is the sender: tell it how many streams to open.
    pub(super) fn set_parallelism(&mut self) {
        let p = self.parallelism;
        if self.parallelism_sent != Some(p) {
            let v = format!("{p},{p},{p}");
            self.queue(Command::Opts(Opts::Retr(vec![("Parallelism".into(), v)])), Expect::Positive);
            // Globus fixes parallelism when PORT is processed: set it up anew.
            if self.parallelism_sent.is_some() {
                self.channel = Channel::None;
            }
            self.parallelism_sent = Some(p);
        }
    }

    /// Queues PASV (EPSV on IPv6, where PASV cannot work): its reply comes
    /// back from [`flush`](Self::flush). EPSV is not tried first on IPv4
    /// because its failure would cost a second round trip.
    pub(super) fn queue_passive(&mut self) {
        let cmd = if self.ctrl.peer().is_ipv6() { Command::Epsv(EpsvArg::Any) } else { Command::Pasv };
        self.queue(cmd, Expect::Passive);
    }

    pub(super) fn port(&mut self, addr: SocketAddr) {
        let cmd = match addr {
            SocketAddr::V4(a) => Command::Port(a),
            v6 => Command::Eprt(v6),
        };
        self.queue(cmd, Expect::Positive);
    }

    pub(super) fn rest(&mut self, done: &RangeSet) {
        if !done.is_empty() {
            self.queue(Command::Rest(RestArg::Ranges(done.clone())), Expect::Restart);
        }
    }

    /// Queues `PROT P` or `PROT C` on a TLS session when the data
    /// connections must change: private for transfers with this client,
    /// clear for third-party copies, whose data connection runs between
    /// two servers that would both be the TLS server (RFC 4217 §7).
    pub(super) fn set_data_protection(&mut self, private: bool) {
        if !self.ctrl.is_tls() || self.ctrl.data_private() == private {
            return;
        }
        let level = if private { ProtectionLevel::Private } else { ProtectionLevel::Clear };
        self.queue(Command::Prot(level), Expect::Positive);
        self.ctrl.set_data_protection(level);
        self.channel = Channel::None;
    }
}
