//! Stream mode (RFC 959 §3.4.1): one data connection per transfer, opened
//! by the client to the server's passive address, and the stream-mode
//! third-party copy (the destination listens, the source is sent PORT).

use super::{channel_changed, Channel, ServerSession};
use crate::error::ClientError;
use ferry_proto::client::Expect;
use ferry_proto::command::{Allo, Command, RestArg, TransferMode, TransferType};
use std::net::SocketAddr;

impl ServerSession {
    /// Starts a stream-mode (RFC 959) transfer: MODE S, TYPE I, PASV,
    /// ALLO `allo` bytes (advisory: Ferry preallocates and refuses short
    /// uploads, other servers may ignore it), then `cmd`, in one write.
    /// Returns where to open the data connection; the caller then reads
    /// the preliminary reply.
    pub async fn stream_transfer(&mut self, cmd: &Command, allo: Option<u64>) -> Result<SocketAddr, ClientError> {
        self.set_data_protection(true);
        self.stream_passive(cmd, allo, None).await
    }

    /// Like [`stream_transfer`](Self::stream_transfer), resuming at `rest`
    /// (`REST rest` before `cmd`; RFC 3659 §5).
    pub async fn stream_transfer_from(
        &mut self,
        cmd: &Command,
        allo: Option<u64>,
        rest: u64,
    ) -> Result<SocketAddr, ClientError> {
        self.set_data_protection(true);
        self.stream_passive(cmd, allo, Some(rest)).await
    }

    /// Starts the destination side of a stream-mode third-party copy: like
    /// [`stream_transfer`](Self::stream_transfer), with clear data.
    pub async fn stream_destination(&mut self, cmd: &Command) -> Result<SocketAddr, ClientError> {
        self.set_data_protection(false);
        self.stream_passive(cmd, None, None).await
    }

    pub(super) async fn stream_passive(
        &mut self,
        cmd: &Command,
        allo: Option<u64>,
        rest: Option<u64>,
    ) -> Result<SocketAddr, ClientError> {
        self.stream_setup();
        self.queue_passive();
        if let Some(size) = allo {
            self.queue(Command::Allo(Allo { size, record: None }), Expect::Any);
        }
        if let Some(offset) = rest {
            self.queue(Command::Rest(RestArg::Offset(offset)), Expect::Restart);
        }
        self.flush(std::slice::from_ref(cmd)).await?.ok_or_else(channel_changed)
    }

    /// Starts the source side of a stream-mode third-party copy: PORT to
    /// `to` (IPv4 only, as RFC 959 has it) and `retr`, in one write.
    pub async fn stream_source(&mut self, to: SocketAddr, retr: &Command) -> Result<(), ClientError> {
        let SocketAddr::V4(v4) = to else {
            return Err(ClientError::Usage("stream-mode third-party copies over IPv6 are not supported".into()));
        };
        self.set_data_protection(false);
        self.stream_setup();
        self.queue(Command::Port(v4), Expect::Positive);
        self.flush(std::slice::from_ref(retr)).await.map(|_| ())
    }

    pub(super) fn stream_setup(&mut self) {
        self.set_mode(TransferMode::Stream);
        if let Some(cmd) = self.ctrl.switch_type(TransferType::Image) {
            self.queue(cmd, Expect::Positive);
        }
        self.channel = Channel::None;
    }
}
