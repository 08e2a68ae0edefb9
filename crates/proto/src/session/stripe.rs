//! Striping on a front end (issue 20; the grammar is in `crate::stripe`):
//! SPOR with one address per receiving stripe, SPAS answered with one
//! listener per data node, and the layout OPTS RETR asked for.

use super::channel::DataSetup;
use super::{Action, Pending, Session};
use crate::reply::{Reply, ReplyCode};
use std::net::{SocketAddr, SocketAddrV4};

impl Session {
    /// `SPOR a1 a2 ...` on a striping front end: each address passes the
    /// checks PORT makes; the list is kept for this data-channel generation.
    pub(super) fn on_spor(&mut self, addrs: Vec<SocketAddrV4>) -> Action {
        for a in &addrs {
            let reply = self.on_active(SocketAddr::V4(*a));
            if !matches!(&reply, Action::Reply(r) if r.code == ReplyCode::OK) {
                return reply;
            }
        }
        self.data = DataSetup::Active(SocketAddr::V4(addrs[0]));
        self.stripe.set_spor(self.generation, addrs);
        Self::reply(ReplyCode::OK, "PORT Command successful.")
    }

    /// The SPOR addresses, while the current data setup is that SPOR.
    pub fn striped_port(&self) -> Option<&[SocketAddrV4]> {
        self.stripe.spor(self.generation)
    }

    /// The layout OPTS RETR asked for (Blocked, 1 MiB, by default).
    pub fn stripe_layout(&self) -> crate::stripe::StripeLayout {
        self.stripe.options.layout()
    }

    /// A front end's outcome of an [`Action::Passive`] for SPAS: one
    /// listener per data node, answered with the multi-line 229.
    pub fn striped_passive_result(&mut self, result: Result<Vec<SocketAddrV4>, String>) -> Reply {
        let Pending::Passive(kind) = std::mem::replace(&mut self.pending, Pending::None) else {
            return Reply::new(ReplyCode::BAD_SEQUENCE, "No passive request in progress.");
        };
        match result {
            Ok(addrs) if !addrs.is_empty() => {
                self.data = DataSetup::Passive { delayed: false, kind };
                crate::stripe::spas_reply(&addrs)
            }
            Ok(_) => Reply::new(ReplyCode::CANT_OPEN_DATA, "Cannot open a passive data port: no data node."),
            Err(why) => {
                self.data = DataSetup::None;
                Reply::new(ReplyCode::CANT_OPEN_DATA, format!("Cannot open a passive data port: {why}."))
            }
        }
    }
}
