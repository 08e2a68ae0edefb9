//! The data channel: PASV/EPSV/SPAS and PORT/EPRT/SPOR set-ups, their
//! generations (cached MODE E connections belong to one), TCP buffer sizes.
//!
//! GFD.20: in extended block mode the sender opens the data connections;
//! RFC 2577 §3: PORT may only name the client's own address unless the
//! administrator allows third-party copies.

use super::{Action, Pending, PortPolicy, Session};
use crate::host_port::format_host_port;
use crate::reply::{Reply, ReplyCode};
use std::net::{IpAddr, SocketAddr};

/// Data-channel parameters of one transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelPlan {
    /// Identifies the data-channel setup (PASV/PORT...) this transfer uses:
    /// MODE E connections cached under another id must be closed.
    pub generation: u64,
    /// MODE E connections cached by the previous transfer in the same
    /// direction on this setup may carry this one (`125` instead of `150`).
    pub reuse: bool,
    /// Connections the sending side opens (OPTS RETR Parallelism).
    pub parallelism: u32,
    /// TCP buffer size for data sockets (SBUF, SITE RETRBUFSIZE...).
    pub buffer_size: Option<u32>,
    /// The path's bottleneck rate the client measured, bytes/s (`OPTS
    /// TPRT Rate=N;`): UDT senders start at it.
    pub path_rate: Option<u64>,
    /// The transport of the data connections (`TPRT`).
    pub transport: crate::transport::TransportName,
}

/// How the data connection(s) for a transfer are obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataEndpoint {
    /// Accept on the listener the driver opened for the last PASV/EPSV/SPAS.
    Passive,
    /// Delayed passive (Globus `OPTS PASV AllowDelayed=1;`): open a listener
    /// now and announce it with [`Session::delayed_passive_reply`] before
    /// the 150.
    DelayedPassive(PassiveKind),
    /// Connect to the address given by PORT/EPRT/SPOR.
    Active(SocketAddr),
}

/// Which passive command asked for a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassiveKind {
    Pasv,
    Epsv,
    /// GridFTP striped passive; Ferry is one stripe.
    Spas,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum DataSetup {
    None,
    /// A listener is open (`delayed: false`), or will be opened at the
    /// next transfer command (`delayed: true`).
    Passive {
        delayed: bool,
        kind: PassiveKind,
    },
    Active(SocketAddr),
}

/// Most streams one transfer may use; beyond this parallel TCP brings
/// nothing but contention.
pub const MAX_PARALLELISM: u32 = 64;

/// Largest TCP buffer a client may ask for (SBUF and SITE ...BUFSIZE).
pub const MAX_BUFFER_SIZE: u64 = 256 << 20;

impl Session {
    /// Starts a new data-channel generation: cached MODE E connections of
    /// the previous one are to be closed by the driver.
    pub(super) fn new_generation(&mut self) {
        self.generation += 1;
        self.cached = None;
    }

    /// Applies a transport choice (`TPRT`, `SITE SETNETSTACK`): a change
    /// starts a new data-channel generation (connections of the old
    /// transport are not reused).
    pub(super) fn set_transport(
        &mut self,
        chosen: Result<crate::transport::TransportName, Reply>,
    ) -> Result<Action, Reply> {
        let t = chosen?;
        if t.needs_tls() && !self.tls {
            return Err(Reply::new(
                ReplyCode::POLICY_DENIED,
                format!(
                    "Transport {t} is encrypted with the server's certificate and needs a TLS control channel: send AUTH \
                     TLS, PBSZ 0 and PROT P first. Data channels stay on {}.",
                    self.transport
                ),
            ));
        }
        let before = self.data_transport();
        self.transport_selected = true;
        if t != self.transport || self.data_transport() != before {
            self.new_generation();
            self.transport = t;
        }
        Ok(Action::Reply(crate::transport::selected(t)))
    }

    /// Whether `TPRT udt:aes-gcm` may be accepted: the server has a
    /// certificate (so UDT data can be keyed from a TLS control channel)
    /// and this session's control channel is TLS.
    pub(super) fn may_seal_udt(&self) -> Result<(), Reply> {
        let offered = self.config.tls_available && self.config.transports.iter().any(|t| t.as_str() == "udt");
        if !offered {
            return Err(crate::transport::refuse_option(
                &self.config.transports,
                self.transport,
                crate::transport::SEALED_UDT,
            ));
        }
        if !self.tls {
            return Err(Reply::new(
                ReplyCode::POLICY_DENIED,
                format!(
                    "Transport {} is keyed from the control channel's TLS session: send AUTH TLS first. Data \
                     channels stay on {}.",
                    crate::transport::SEALED_UDT,
                    self.transport
                ),
            ));
        }
        Ok(())
    }

    /// Records whether UDT data channels encrypt under PROT P; a change
    /// starts a new generation (cached connections were keyed, or not,
    /// the other way).
    pub(super) fn set_udt_sealed(&mut self, sealed: bool) {
        if sealed != self.udt_sealed {
            self.new_generation();
            self.udt_sealed = sealed;
        }
    }

    /// Records a TCP buffer size; the refusal is a reply.
    pub(super) fn set_buffer(&mut self, n: u64) -> Result<(), Reply> {
        if n == 0 || n > MAX_BUFFER_SIZE {
            return Err(Reply::new(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                format!("Buffer size must be between 1 and {MAX_BUFFER_SIZE} bytes."),
            ));
        }
        self.buffer_size = Some(n as u32);
        Ok(())
    }

    pub(super) fn on_passive(&mut self, kind: PassiveKind) -> Action {
        if self.epsv_all && kind != PassiveKind::Epsv {
            return Self::reply(ReplyCode::BAD_SEQUENCE, "Only EPSV is allowed after EPSV ALL.");
        }
        if self.peer.is_ipv6() && kind != PassiveKind::Epsv {
            return Self::reply(ReplyCode::CANT_OPEN_DATA, "PASV cannot describe an IPv6 address; use EPSV.");
        }
        self.new_generation();
        if self.allow_delayed {
            // The listener is opened when the transfer command names the
            // file (Globus delayed passive, used by gfal2).
            self.data = DataSetup::Passive { delayed: true, kind };
            return Self::reply(ReplyCode::OK, "Passive delayed.");
        }
        self.pending = Pending::Passive(kind);
        Action::Passive(kind)
    }

    pub(super) fn on_active(&mut self, addr: SocketAddr) -> Action {
        if self.epsv_all {
            return Self::reply(ReplyCode::BAD_SEQUENCE, "PORT and EPRT are not allowed after EPSV ALL.");
        }
        if addr.port() < 1024 {
            return Self::reply(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                "Refusing a data connection to a privileged port (below 1024).",
            );
        }
        if self.config.port_policy == PortPolicy::PeerOnly && !same_host(addr.ip(), self.peer.ip()) {
            return Self::reply(
                ReplyCode::PARAMETER_SYNTAX_ERROR,
                "Data connections may only go to the client's own address (FTP bounce \
                 protection; the administrator can allow third-party copies with allow_third_party).",
            );
        }
        self.new_generation();
        // A PORT ends delayed passive mode, as in Globus.
        self.allow_delayed = false;
        self.data = DataSetup::Active(addr);
        Self::reply(ReplyCode::OK, "PORT Command successful.")
    }

    /// The driver's outcome of an [`Action::Passive`]: the address the
    /// listener is bound to, or why none could be opened.
    pub fn passive_result(&mut self, result: Result<SocketAddr, String>) -> Reply {
        let Pending::Passive(kind) = std::mem::replace(&mut self.pending, Pending::None) else {
            return Reply::new(ReplyCode::BAD_SEQUENCE, "No passive request in progress.");
        };
        match result.and_then(|addr| passive_reply(kind, addr, false)) {
            Ok(reply) => {
                self.data = DataSetup::Passive { delayed: false, kind };
                reply
            }
            Err(why) => {
                self.data = DataSetup::None;
                Reply::new(ReplyCode::CANT_OPEN_DATA, format!("Cannot open a passive data port: {why}."))
            }
        }
    }

    /// The `127`/`129` reply that announces a delayed-passive listener,
    /// sent before the transfer's 150 (Globus delayed passive).
    pub fn delayed_passive_reply(&mut self, kind: PassiveKind, addr: SocketAddr) -> Reply {
        // From now on the listener exists; later MODE E transfers reuse it.
        self.data = DataSetup::Passive { delayed: false, kind };
        passive_reply(kind, addr, true).unwrap_or_else(|why| Reply::new(ReplyCode::CANT_OPEN_DATA, why))
    }
}

/// Formats the reply announcing a passive listener: 227/229 for PASV,
/// EPSV and SPAS, or 127/129 under delayed passive. The SPAS form must
/// contain no `(` and exactly one address line: globus-url-copy counts
/// addresses as "newlines minus two" (`docs/gridftp-wire-notes.md` §1).
pub(super) fn passive_reply(kind: PassiveKind, addr: SocketAddr, delayed: bool) -> Result<Reply, String> {
    let shift = if delayed { 100 } else { 0 };
    let code = |c: u16| ReplyCode::new(c - shift).unwrap_or(ReplyCode::CANT_OPEN_DATA);
    match (kind, addr) {
        (PassiveKind::Pasv, SocketAddr::V4(a)) => {
            Ok(Reply::new(code(227), format!("Entering Passive Mode ({}).", format_host_port(a))))
        }
        (PassiveKind::Epsv, a) => {
            Ok(Reply::new(code(229), format!("Entering Extended Passive Mode (|||{}|)", a.port())))
        }
        (PassiveKind::Spas, SocketAddr::V4(a)) => Ok(Reply::multiline(
            code(229),
            "Entering Striped Passive Mode.",
            [format!(" {}", format_host_port(a))],
            "End",
        )),
        (_, SocketAddr::V6(_)) => Err("PASV and SPAS cannot describe an IPv6 address; use EPSV".into()),
    }
}

/// Compares addresses treating IPv4-mapped IPv6 as IPv4.
pub(super) fn same_host(a: IpAddr, b: IpAddr) -> bool {
    let norm = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    norm(a) == norm(b)
}
