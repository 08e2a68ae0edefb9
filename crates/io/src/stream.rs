//! Stream mode (RFC 959 §3.4.1): the data connection carries the file's
//! bytes and its close marks the end.
//!
//! These loops run on a blocking thread per transfer: the control channel
//! stays on the async runtime, while the kernel does the copying — binary
//! sends go through `std::io::copy`, which on Linux uses `sendfile(2)` from
//! the page cache to the socket, so file bytes never enter user space.
//! ASCII transfers and listings need conversion and take the buffered path.

use crate::endpoint::{BlockSink, BlockSource};
use crate::pipeline::{DataPath, Meter, STEP};
use crate::rate::RateLimit;
use crate::transport::{AbortHandle, Connection, DataConn, Payload};
use ferry_proto::ascii::{AsciiDecoder, AsciiEncoder};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use thiserror::Error;

/// Receive buffer, allocated once per transfer.
const RECV_BUF: usize = 1 << 20;

/// Which side of a copy failed: the peer's network or our disk. The reply
/// differs (426 vs 451/552) and so does what a user should do.
#[derive(Debug, Error)]
pub enum CopyError {
    #[error("data connection: {0}")]
    Network(io::Error),
    #[error("disk: {0}")]
    Disk(io::Error),
    #[error("aborted")]
    Aborted,
}

/// Lets the control channel stop a transfer that is blocked in a system
/// call: it aborts the data connections (TCP shuts the sockets down),
/// which makes the call return.
#[derive(Debug, Default)]
pub struct AbortSignal {
    aborted: AtomicBool,
    sockets: Mutex<Vec<AbortHandle>>,
}

impl AbortSignal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a data connection so [`abort`](Self::abort) can stop it.
    pub fn register(&self, conn: &dyn Connection) -> io::Result<()> {
        let handle = conn.abort_handle()?;
        let mut sockets = self.sockets.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_aborted() {
            handle.abort();
        }
        sockets.push(handle);
        Ok(())
    }

    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        let sockets = self.sockets.lock().unwrap_or_else(|e| e.into_inner());
        for s in sockets.iter() {
            s.abort();
        }
    }

    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }
}

/// Sends `len` bytes of `source` from `offset` (to its end when `None`).
/// Zero-copy sources go through `sendfile(2)`: the kernel moves page-cache
/// (or memfd) pages to the socket and the bytes never enter user space.
/// (`std::io::copy` promises the same for files but fell back to 8 KiB
/// reads and writes here, at a third of the speed.) A source that ends
/// before `len` bytes (a file truncated while it is sent) is an error:
/// the receiver would otherwise take the short file for the whole one.
#[allow(clippy::too_many_arguments)]
pub fn send(
    source: &dyn BlockSource,
    offset: u64,
    len: Option<u64>,
    sock: &mut DataConn,
    progress: &AtomicU64,
    abort: &AbortSignal,
    rate: Option<&RateLimit>,
    path: DataPath,
) -> Result<u64, CopyError> {
    // A TLS stream must see every byte to encrypt it: no sendfile there.
    let m = Meter::new(progress, abort, rate);
    let zero_copy = path == DataPath::ZeroCopy && source.zero_copy() && sock.zero_copy();
    let mut buf = if zero_copy { Vec::new() } else { vec![0u8; RECV_BUF] };
    let mut pos = offset;
    let mut remaining = len.unwrap_or(u64::MAX);
    let mut sent = 0;
    while remaining > 0 {
        let step = m.step(remaining) as usize;
        m.before_send(step)?;
        let n = if zero_copy {
            match sock.send_block(&[], Payload::Source { source, offset: pos, len: step }) {
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::EIO) => return Err(CopyError::Disk(e)),
                Err(e) => return Err(m.net(e)),
            }
        } else {
            let want = step.min(buf.len());
            let n = source.read_at(&mut buf[..want], pos).map_err(CopyError::Disk)?;
            sock.write_all(&buf[..n]).map_err(|e| m.net(e))?;
            n as u64
        };
        if n == 0 {
            if len.is_some() {
                return Err(source_ended(pos));
            }
            break; // end of the source
        }
        pos += n;
        sent += n;
        remaining -= n;
        m.moved(n);
    }
    Ok(sent)
}

fn source_ended(at: u64) -> CopyError {
    CopyError::Disk(io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the file ended at byte {at} while it was being sent (it shrank)"),
    ))
}

/// Sends a source as ASCII text (LF → CRLF) from `offset` to `end` (to
/// its end when `None`; a source that ends before `end` is an error).
pub fn send_ascii(
    source: &dyn BlockSource,
    offset: u64,
    end: Option<u64>,
    sock: &mut DataConn,
    progress: &AtomicU64,
    abort: &AbortSignal,
) -> Result<u64, CopyError> {
    let m = Meter::new(progress, abort, None);
    let mut buf = vec![0u8; 256 * 1024];
    let mut out = Vec::with_capacity(300 * 1024);
    let mut enc = AsciiEncoder::default();
    let mut pos = offset;
    let mut sent = 0;
    loop {
        m.check()?;
        let want = end.map_or(buf.len(), |e| (e.saturating_sub(pos)).min(buf.len() as u64) as usize);
        if want == 0 {
            return Ok(sent);
        }
        let n = source.read_at(&mut buf[..want], pos).map_err(CopyError::Disk)?;
        if n == 0 {
            return match end {
                Some(_) => Err(source_ended(pos)),
                None => Ok(sent),
            };
        }
        pos += n as u64;
        out.clear();
        enc.encode(&buf[..n], &mut out);
        sock.write_all(&out).map_err(|e| m.net(e))?;
        sent += out.len() as u64;
        m.moved(n as u64);
    }
}

/// Sends an in-memory buffer (a listing).
pub fn send_bytes(data: &[u8], sock: &mut DataConn, abort: &AbortSignal) -> Result<u64, CopyError> {
    let m = Meter::uncounted(abort);
    m.check()?;
    sock.write_all(data).map_err(|e| m.net(e))?;
    Ok(data.len() as u64)
}

/// Data produced while it is sent — a listing too large to build first
/// (MLSR) — as chunks; a chunk may be an error, which ends the transfer.
pub type Chunks = Box<dyn Iterator<Item = Result<Vec<u8>, CopyError>> + Send>;

/// Sends every chunk in turn; memory holds one chunk at a time. On a chunk
/// error the data so far is ended cleanly (the peer sees the end of the
/// data, and the failure in the reply that follows) and the error returned.
pub fn send_chunks(chunks: Chunks, sock: &mut DataConn, abort: &AbortSignal) -> Result<u64, CopyError> {
    let mut sent = 0;
    for chunk in chunks {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                let _ = finish_send(sock);
                return Err(e);
            }
        };
        sent += send_bytes(&chunk, sock, abort)?;
    }
    Ok(sent)
}

/// Marks the end of the data in stream mode (RFC 959 §3.4.1: the sender
/// closes; RFC 4217 §7: after a TLS `close_notify`). An explicit shutdown,
/// because [`AbortSignal`] holds a duplicate of the socket and dropping
/// one descriptor would not close it.
pub fn finish_send(sock: &mut DataConn) -> Result<(), CopyError> {
    sock.finish().map_err(CopyError::Network)
}

/// Where received stream-mode data goes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReceiveTo<'a> {
    /// File offset of the first byte.
    pub offset: u64,
    /// TYPE A: CRLF → LF.
    pub ascii: bool,
    /// Largest file offset the data may reach (the largest file the server
    /// stores); beyond it the copy fails with `EFBIG`.
    pub limit: Option<u64>,
    /// Updated with the position after the last byte written, as it grows:
    /// what a checkpoint may record.
    pub written: Option<&'a AtomicU64>,
}

/// Receives until the peer closes, writing at `to.offset` onwards. Returns
/// the bytes received and the position after the last one written (they
/// differ for ASCII); the caller truncates there when the upload replaces
/// the file's content (not for APPE or ESTO). A zero-copy sink (a discard)
/// takes the bytes inside the kernel.
pub fn receive(
    sock: &mut DataConn,
    sink: &dyn BlockSink,
    to: ReceiveTo<'_>,
    progress: &AtomicU64,
    abort: &AbortSignal,
    rate: Option<&RateLimit>,
    path: DataPath,
) -> Result<(u64, u64), CopyError> {
    let ReceiveTo { offset, ascii, limit, written } = to;
    let m = Meter::new(progress, abort, rate);
    if let (false, DataPath::ZeroCopy, true, true) = (ascii, path, sink.zero_copy(), sock.zero_copy()) {
        return receive_discarding(sock, m).map(|n| (n, offset + n));
    }
    let mut buf = vec![0u8; RECV_BUF];
    let mut text = Vec::new();
    let mut dec = AsciiDecoder::default();
    let mut pos = offset;
    let mut received = 0;
    loop {
        m.check()?;
        let n = match sock.read(&mut buf) {
            // A socket shut down by ABOR also reads as end of stream.
            Ok(0) => {
                m.check()?;
                break;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(m.net(e)),
        };
        received += n as u64;
        m.received(n);
        let chunk = if ascii {
            text.clear();
            dec.decode(&buf[..n], &mut text);
            &text[..]
        } else {
            &buf[..n]
        };
        beyond_limit(pos, chunk.len(), limit)?;
        sink.write_at(chunk, pos).map_err(CopyError::Disk)?;
        pos += chunk.len() as u64;
        if let Some(w) = written {
            w.store(pos, Ordering::Release);
        }
    }
    if ascii {
        text.clear();
        dec.finish(&mut text);
        beyond_limit(pos, text.len(), limit)?;
        sink.write_at(&text, pos).map_err(CopyError::Disk)?;
        pos += text.len() as u64;
        if let Some(w) = written {
            w.store(pos, Ordering::Release);
        }
    }
    if sock.is_encrypted() {
        // Answer the sender's close_notify with ours: clients such as
        // Python's ssl `unwrap()` wait for it before they call the upload
        // done. The data is complete either way.
        let _ = sock.finish();
    }
    Ok((received, pos))
}

/// `EFBIG` when `len` bytes at `pos` would pass `limit`.
fn beyond_limit(pos: u64, len: usize, limit: Option<u64>) -> Result<(), CopyError> {
    match limit {
        Some(l) if pos.saturating_add(len as u64) > l => {
            Err(CopyError::Disk(io::Error::from_raw_os_error(libc::EFBIG)))
        }
        _ => Ok(()),
    }
}

/// Drops everything until the peer closes, without copying where the
/// transport can (TCP: in the kernel, `MSG_TRUNC`).
fn receive_discarding(sock: &mut DataConn, m: Meter<'_>) -> Result<u64, CopyError> {
    let mut received = 0;
    loop {
        m.check()?;
        match sock.discard(STEP as usize) {
            Ok(0) => {
                m.check()?;
                return Ok(received);
            }
            Ok(n) => {
                received += n as u64;
                m.received(n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(m.net(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::DataStream;
    use std::net::{TcpListener, TcpStream};

    fn plain(s: TcpStream) -> DataConn {
        Box::new(DataStream::Plain(s))
    }

    #[test]
    fn send_and_receive_round_trip_with_offset() {
        let dir = tempfile::tempdir().unwrap();
        let src_path = dir.path().join("src");
        let data: Vec<u8> = (0..(9u32 << 20) + 7).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&src_path, &data).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let sender = std::thread::spawn(move || {
            let mut sock = plain(TcpStream::connect(addr).unwrap());
            let f = std::fs::File::open(src_path).unwrap();
            let p = AtomicU64::new(0);
            let n = send(&f, 1000, None, &mut sock, &p, &AbortSignal::new(), None, DataPath::ZeroCopy).unwrap();
            finish_send(&mut sock).unwrap();
            assert_eq!(p.load(Ordering::Relaxed), n);
            n
        });
        let mut sock = plain(listener.accept().unwrap().0);
        let dst = tempfile::tempfile().unwrap();
        dst.set_len(5_000_000_000).unwrap(); // longer stale content, cut by the caller
        let p = AtomicU64::new(0);
        let written = AtomicU64::new(0);
        let to = ReceiveTo { written: Some(&written), ..ReceiveTo::default() };
        let (n, end) = receive(&mut sock, &dst, to, &p, &AbortSignal::new(), None, DataPath::Buffered).unwrap();
        assert_eq!(written.load(Ordering::Relaxed), end);
        assert_eq!(sender.join().unwrap(), n);
        assert_eq!(end, n);
        dst.set_len(end).unwrap();
        let mut got = Vec::new();
        (&dst).read_to_end(&mut got).unwrap();
        assert_eq!(got, &data[1000..]);
    }

    #[test]
    fn a_source_shorter_than_announced_is_an_error() {
        let f = tempfile::tempfile().unwrap();
        f.set_len(1000).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut sock = plain(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
        let _peer = listener.accept().unwrap();
        let p = AtomicU64::new(0);
        let a = AbortSignal::new();
        for path in [DataPath::ZeroCopy, DataPath::Buffered] {
            let r = send(&f, 0, Some(5000), &mut sock, &p, &a, None, path);
            assert!(matches!(&r, Err(CopyError::Disk(e)) if e.to_string().contains("byte 1000")), "{r:?}");
        }
        let r = send_ascii(&f, 0, Some(5000), &mut sock, &p, &a);
        assert!(matches!(r, Err(CopyError::Disk(_))), "{r:?}");
        assert_eq!(send_ascii(&f, 0, Some(1000), &mut sock, &p, &a).unwrap(), 1000);
    }

    #[test]
    fn abort_unblocks_a_stalled_receive() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = TcpStream::connect(addr).unwrap(); // never sends
        let mut sock = plain(listener.accept().unwrap().0);
        let abort = std::sync::Arc::new(AbortSignal::new());
        abort.register(&*sock).unwrap();
        let a = abort.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            a.abort();
        });
        let f = tempfile::tempfile().unwrap();
        let r = receive(&mut sock, &f, ReceiveTo::default(), &AtomicU64::new(0), &abort, None, DataPath::Buffered);
        assert!(matches!(r, Err(CopyError::Aborted)), "{r:?}");
        assert!(abort.is_aborted());
    }
}
