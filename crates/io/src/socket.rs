//! Options every data socket gets.

use std::io;
use std::net::TcpStream;
use std::time::Duration;

/// Turns an accepted or connected socket into a blocking data socket:
/// `TCP_NODELAY` (a MODE E end-of-data header must not wait for an ACK),
/// stall timeouts, and the buffer size the client asked for, if any.
pub fn configure_data_socket(sock: &TcpStream, buffer: Option<u32>, timeout: Duration) -> io::Result<()> {
    sock.set_nonblocking(false)?;
    sock.set_nodelay(true)?;
    sock.set_read_timeout(Some(timeout))?;
    sock.set_write_timeout(Some(timeout))?;
    if let Some(size) = buffer {
        let s = socket2::SockRef::from(sock);
        s.set_send_buffer_size(size as usize)?;
        s.set_recv_buffer_size(size as usize)?;
    }
    Ok(())
}
