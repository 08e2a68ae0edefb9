//! The listening side of the handshake (`CUDT::listen(sockaddr*, CPacket&)`).
//!
//! libudt's listener answers a first request (request type 1) by echoing it
//! with a SYN cookie and keeps no state; only a request that returns the
//! cookie (request type −1) creates a connection. libudt's cookie is the
//! first word of MD5("host:port:minute") — predictable by anyone. The
//! caller treats the cookie as opaque, so Ferry uses a keyed hash instead:
//! the first four bytes of SHA-256(secret ‖ address ‖ port ‖ minute), the
//! secret chosen at random by the driver. As in libudt, a cookie from the
//! previous minute is still accepted.
//!
//! The listener decides nothing about existing connections: it hands a
//! validated request to the driver ([`ListenerOutput::Accept`]), which looks
//! up (address, peer socket id, ISN) among its connections and either
//! re-sends that connection's response ([`crate::Connection::handle_repeated_request`])
//! or accepts a new one ([`crate::Connection::accept`]) or refuses
//! ([`Listener::reject`], when its backlog is full).

use crate::connection::UDT_VERSION;
use crate::packet::{encode, req_type, Control, ControlPacket, Handshake, Packet, HANDSHAKE_LEN, SOCK_STREAM};
use crate::time::Time;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::time::Duration;

const COOKIE_PERIOD: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct Listener {
    secret: [u8; 32],
    start: Time,
}

/// What the driver should do with a datagram addressed to socket id 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenerOutput {
    /// Send this datagram back to the sender (cookie challenge or refusal).
    Reply(Vec<u8>),
    /// A request that carried a valid cookie.
    Accept(Handshake),
    /// Not a valid request: ignore it.
    Drop,
}

impl Listener {
    /// `secret` keys the SYN cookies; the driver draws it at random.
    pub fn new(secret: [u8; 32], now: Time) -> Listener {
        Listener { secret, start: now }
    }

    fn cookie(&self, from: SocketAddr, bucket: u64) -> i32 {
        let mut h = Sha256::new();
        h.update(self.secret);
        match from.ip() {
            std::net::IpAddr::V4(a) => h.update(a.octets()),
            std::net::IpAddr::V6(a) => h.update(a.octets()),
        }
        h.update(from.port().to_be_bytes());
        h.update(bucket.to_be_bytes());
        let d = h.finalize();
        i32::from_be_bytes([d[0], d[1], d[2], d[3]])
    }

    pub fn handle(&self, now: Time, from: SocketAddr, datagram: &[u8]) -> ListenerOutput {
        // libudt: "if (packet.getLength() != CHandShake::m_iContentSize) return 1004"
        if datagram.len() != crate::packet::HEADER_LEN + HANDSHAKE_LEN {
            return ListenerOutput::Drop;
        }
        let Ok(Packet::Control(ControlPacket { control: Control::Handshake(hs), .. })) = Packet::decode(datagram)
        else {
            return ListenerOutput::Drop;
        };
        let bucket = now.saturating_since(self.start).as_secs() / COOKIE_PERIOD.as_secs();
        if hs.req_type == req_type::REQUEST {
            let mut reply = hs;
            reply.cookie = self.cookie(from, bucket);
            let mut d = Vec::new();
            encode::handshake(&mut d, &reply, 0, hs.socket_id as u32);
            return ListenerOutput::Reply(d);
        }
        if hs.req_type != req_type::RESPONSE {
            return ListenerOutput::Drop;
        }
        let valid =
            hs.cookie == self.cookie(from, bucket) || (bucket > 0 && hs.cookie == self.cookie(from, bucket - 1));
        if !valid {
            return ListenerOutput::Drop;
        }
        // libudt's queue drops packets whose socket id is not positive.
        if hs.socket_id <= 0 {
            return ListenerOutput::Drop;
        }
        if hs.version != UDT_VERSION || hs.sock_type != SOCK_STREAM {
            return ListenerOutput::Reply(Self::reject(&hs));
        }
        ListenerOutput::Accept(hs)
    }

    /// The refusal libudt sends: the request echoed with type 1002.
    pub fn reject(request: &Handshake) -> Vec<u8> {
        let mut r = *request;
        r.req_type = req_type::REJECT;
        let mut d = Vec::new();
        encode::handshake(&mut d, &r, 0, request.socket_id as u32);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::ip_words;

    fn request(cookie: i32, req: i32) -> Vec<u8> {
        let hs = Handshake {
            version: 4,
            sock_type: SOCK_STREAM,
            isn: 1,
            mss: 1500,
            flight_flag_size: 8192,
            req_type: req,
            socket_id: 9,
            cookie,
            peer_ip: ip_words("127.0.0.1".parse().unwrap()),
        };
        let mut d = Vec::new();
        encode::handshake(&mut d, &hs, 0, 0);
        d
    }

    #[test]
    fn cookie_round_trip_and_expiry() {
        let l = Listener::new([7; 32], Time(0));
        let from: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let ListenerOutput::Reply(r) = l.handle(Time(1), from, &request(0, 1)) else { panic!() };
        let Ok(Packet::Control(ControlPacket { control: Control::Handshake(hs), dest_socket, .. })) =
            Packet::decode(&r)
        else {
            panic!()
        };
        assert_eq!(dest_socket, 9);
        assert!(matches!(l.handle(Time(2), from, &request(hs.cookie, -1)), ListenerOutput::Accept(_)));
        // a minute later still fine, two minutes later not
        assert!(matches!(l.handle(Time(61_000_000_000), from, &request(hs.cookie, -1)), ListenerOutput::Accept(_)));
        assert_eq!(l.handle(Time(121_000_000_000), from, &request(hs.cookie, -1)), ListenerOutput::Drop);
        // another port, or a forged cookie: dropped without a reply
        let other: SocketAddr = "127.0.0.1:5001".parse().unwrap();
        assert_eq!(l.handle(Time(2), other, &request(hs.cookie, -1)), ListenerOutput::Drop);
        assert_eq!(l.handle(Time(2), from, &request(hs.cookie ^ 1, -1)), ListenerOutput::Drop);
        // a truncated handshake
        assert_eq!(l.handle(Time(2), from, &request(0, 1)[..60]), ListenerOutput::Drop);
    }
}
