//! Striped serving (issue 20, `docs/striping.md`): a front end that speaks
//! the control protocol and hands each stripe's data channel to a data
//! node, and the data node itself.
//!
//! * [`node`]: `ferry serve DIR --data-node --listen HOST:PORT
//!   --node-secret FILE` — accepts only front ends that prove the shared
//!   secret (`ferry_proto::node`), opens data listeners, receives and
//!   sends MODE E blocks at absolute offsets under its own confined root.
//! * [`front`]: the front end's side — one authenticated connection per
//!   node per client session, SPAS answered with one address per node,
//!   SPOR's addresses dealt to nodes, per-stripe markers relayed to the
//!   client, and a failed node named in the reply.

pub(crate) mod front;
pub mod node;

use std::io;
use std::path::Path;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Shortest secret accepted: 16 bytes, so it cannot be guessed.
pub const MIN_SECRET_LEN: usize = 16;

/// Reads the shared node secret: the file's bytes, surrounding whitespace
/// removed. Refused if short or readable by others than its owner, as ssh
/// refuses a private key (anyone who reads it can command the nodes).
pub fn load_secret(path: &Path) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    let md = std::fs::metadata(path)
        .map_err(|e| io::Error::new(e.kind(), format!("node secret {}: {e}", path.display())))?;
    if md.permissions().mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("node secret {} is readable by others; chmod 600 it", path.display()),
        ));
    }
    let raw = std::fs::read(path)?;
    let secret = raw.trim_ascii().to_vec();
    if secret.len() < MIN_SECRET_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "node secret {} is shorter than {MIN_SECRET_LEN} bytes (make one with: head -c 32 /dev/urandom | base64 > FILE)",
                path.display()
            ),
        ));
    }
    Ok(secret)
}

/// One LF-terminated line of at most `max` bytes (without the LF or a CR
/// before it); `None` at the end of the stream.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R, max: usize) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return if line.is_empty() {
                Ok(None)
            } else {
                Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-line"))
            };
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if line.len() > max + 2 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
        }
        if done {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return String::from_utf8(line)
                .map(Some)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "line is not UTF-8"));
        }
    }
}

/// A fresh random nonce for the handshake.
pub(crate) fn nonce() -> [u8; ferry_proto::node::NONCE_LEN] {
    use rand::RngCore;
    let mut n = [0u8; ferry_proto::node::NONCE_LEN];
    rand::rngs::OsRng.fill_bytes(&mut n);
    n
}
