//! UDT4 packets as libudt 4.11 puts them on the wire (`src/packet.cpp`,
//! `src/channel.cpp`; the same layout is in draft-gg-udt-03 §2).
//!
//! Every packet starts with a 16-byte header of four 32-bit words in
//! network byte order:
//!
//! ```text
//! data:     |0|  sequence number (31)  |ff|o| message number (29) | timestamp | destination socket id |
//! control:  |1| type (15) | reserved (16) | additional info      | timestamp | destination socket id |
//! ```
//!
//! `ff` is the message boundary (`11` solo, `10` first, `01` last, `00`
//! middle), `o` asks for in-order delivery. The timestamp counts microseconds
//! since the sender's connection began (libudt fills it for data packets and
//! leaves 0 in control packets).
//!
//! libudt converts the *whole* control-information field of a control packet
//! to network order word by word (`CChannel::sendto`), so every control body
//! is a sequence of big-endian 32-bit words; a data payload is sent as is.
//! Control types (`CPacket::pack`): 0 handshake, 1 keep-alive, 2 ACK,
//! 3 NAK, 4 congestion warning, 5 shutdown, 6 ACK2, 7 message drop request,
//! 8 peer error, 0x7FFF user-defined. Bodies libudt declares empty still
//! carry one word of padding ("writev does not allow" an empty iovec); we
//! send that word too and accept bodies of any length for those types.

use crate::loss::{LossRanges, NakError};
use crate::seq::SeqNo;
use thiserror::Error;

/// Header size of every UDT packet.
pub const HEADER_LEN: usize = 16;
/// Handshake body size (`CHandShake::m_iContentSize`).
pub const HANDSHAKE_LEN: usize = 48;
/// IPv4 + UDP header bytes libudt subtracts from the MSS (`m_iPktSize = m_iMSS - 28`).
pub const IP_UDP_OVERHEAD: usize = 28;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PacketError {
    #[error("datagram of {0} bytes is shorter than the 16-byte UDT header")]
    Truncated(usize),
    #[error("control packet type {0:#x} body of {1} bytes is malformed")]
    BadBody(u16, usize),
    #[error("unknown control packet type {0:#x}")]
    UnknownType(u16),
    #[error("loss list: {0}")]
    Nak(#[from] NakError),
}

fn word(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

/// Destination socket id of a datagram (the fourth header word), without
/// parsing the rest: how a multiplexer routes packets (`CRcvQueue::worker`).
pub fn destination_socket_id(datagram: &[u8]) -> Option<u32> {
    (datagram.len() >= HEADER_LEN).then(|| word(datagram, 3))
}

/// Message boundary bits of a data packet (`CPacket::getMsgBoundary`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    Middle = 0,
    Last = 1,
    First = 2,
    Solo = 3,
}

impl Boundary {
    fn from_bits(b: u32) -> Boundary {
        match b & 3 {
            0 => Boundary::Middle,
            1 => Boundary::Last,
            2 => Boundary::First,
            _ => Boundary::Solo,
        }
    }
}

/// The header of a data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    pub seq: SeqNo,
    pub boundary: Boundary,
    pub in_order: bool,
    /// 29-bit message number.
    pub msg_no: u32,
    pub timestamp: u32,
    pub dest_socket: u32,
}

impl DataHeader {
    pub fn encode(&self, out: &mut [u8; HEADER_LEN]) {
        let w1 = ((self.boundary as u32) << 30) | (u32::from(self.in_order) << 29) | (self.msg_no & 0x1FFF_FFFF);
        out[0..4].copy_from_slice(&self.seq.get().to_be_bytes());
        out[4..8].copy_from_slice(&w1.to_be_bytes());
        out[8..12].copy_from_slice(&self.timestamp.to_be_bytes());
        out[12..16].copy_from_slice(&self.dest_socket.to_be_bytes());
    }
}

/// Socket type in the handshake (`UDTSockType`).
pub const SOCK_STREAM: i32 = 1;
pub const SOCK_DGRAM: i32 = 2;

/// Request types of the handshake (`m_iReqType`, see `CUDT::connect` and
/// `CUDT::listen`): a caller's first request is 1 (rendezvous peers send 0),
/// a request carrying the cookie and every final response is -1, a
/// rendezvous peer that is already connected answers -2, and a refusal is 1002.
pub mod req_type {
    pub const REQUEST: i32 = 1;
    pub const RENDEZVOUS: i32 = 0;
    pub const RESPONSE: i32 = -1;
    pub const RENDEZVOUS_RESPONSE: i32 = -2;
    pub const REJECT: i32 = 1002;
}

/// The 48-byte handshake (`CHandShake`): twelve 32-bit words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Handshake {
    /// UDT version, 4.
    pub version: i32,
    /// [`SOCK_STREAM`] or [`SOCK_DGRAM`].
    pub sock_type: i32,
    /// Initial sequence number.
    pub isn: i32,
    /// Maximum segment size: the largest IP packet, headers included.
    pub mss: i32,
    /// Flow control window: packets the sender of this handshake can receive.
    pub flight_flag_size: i32,
    /// See [`req_type`].
    pub req_type: i32,
    /// Sender's socket id.
    pub socket_id: i32,
    /// SYN cookie.
    pub cookie: i32,
    /// The address of the *receiver* of this handshake as its sender sees it,
    /// in libudt's layout (see [`ip_words`]).
    pub peer_ip: [u32; 4],
}

impl Handshake {
    pub fn encode(&self, out: &mut [u8]) {
        let words = [
            self.version as u32,
            self.sock_type as u32,
            self.isn as u32,
            self.mss as u32,
            self.flight_flag_size as u32,
            self.req_type as u32,
            self.socket_id as u32,
            self.cookie as u32,
            self.peer_ip[0],
            self.peer_ip[1],
            self.peer_ip[2],
            self.peer_ip[3],
        ];
        for (i, w) in words.iter().enumerate() {
            out[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
    }

    /// libudt reads the first 48 bytes and ignores the rest
    /// (`CHandShake::deserialize`); shorter bodies are refused.
    pub fn decode(body: &[u8]) -> Option<Handshake> {
        if body.len() < HANDSHAKE_LEN {
            return None;
        }
        let w = |i| word(body, i);
        Some(Handshake {
            version: w(0) as i32,
            sock_type: w(1) as i32,
            isn: w(2) as i32,
            mss: w(3) as i32,
            flight_flag_size: w(4) as i32,
            req_type: w(5) as i32,
            socket_id: w(6) as i32,
            cookie: w(7) as i32,
            peer_ip: [w(8), w(9), w(10), w(11)],
        })
    }
}

/// An IP address in the handshake's peer-IP field the way libudt 4.11 on a
/// little-endian host writes it (`CIPAddress::ntop` then `htonl` per word):
/// each group of four address bytes is read as a little-endian word, so on
/// the wire the bytes of every group appear reversed. IPv4 uses word 0 only.
pub fn ip_words(ip: std::net::IpAddr) -> [u32; 4] {
    let mut out = [0u32; 4];
    match ip {
        std::net::IpAddr::V4(v4) => out[0] = u32::from_le_bytes(v4.octets()),
        std::net::IpAddr::V6(v6) => {
            let o = v6.octets();
            for (i, w) in out.iter_mut().enumerate() {
                *w = u32::from_le_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]]);
            }
        }
    }
    out
}

/// The optional part of a full ACK (`CUDT::sendCtrl` case 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckInfo {
    /// Receiver's RTT estimate, µs.
    pub rtt_us: i32,
    pub rtt_var_us: i32,
    /// Available receive buffer, packets (the new flow window; at least 2).
    pub avail_buf: i32,
    /// Packet arrival speed (packets/s) and packet-pair link capacity
    /// (packets/s): present in "24-byte" ACKs, at most one per SYN interval.
    pub rates: Option<(i32, i32)>,
}

/// A decoded control packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control<'a> {
    Handshake(Handshake),
    KeepAlive,
    /// A full ACK: its ACK sequence number, the acknowledged sequence number
    /// (every packet before it has arrived), and the measurements.
    Ack {
        ack_no: u32,
        ack: SeqNo,
        info: AckInfo,
    },
    /// A light ACK (4-byte body, sent every 64 packets between full ACKs).
    LightAck {
        ack: SeqNo,
    },
    Nak(LossRanges<'a>),
    CongestionWarning,
    Shutdown,
    Ack2 {
        ack_no: u32,
    },
    /// Message drop request: message number and its first and last sequence numbers.
    DropRequest {
        msg_no: u32,
        first: SeqNo,
        last: SeqNo,
    },
    PeerError {
        code: u32,
    },
    /// 0x7FFF, user-defined (`CCC::processCustomMsg`): ignored here.
    User {
        ext_type: u16,
    },
}

/// A control packet with its header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlPacket<'a> {
    pub control: Control<'a>,
    pub timestamp: u32,
    pub dest_socket: u32,
}

/// A decoded datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet<'a> {
    Data { header: DataHeader, payload: &'a [u8] },
    Control(ControlPacket<'a>),
}

impl<'a> Packet<'a> {
    /// Parses one datagram. Never panics; every malformed input is an error
    /// (libudt would read past short bodies; we refuse them).
    pub fn decode(dgram: &'a [u8]) -> Result<Packet<'a>, PacketError> {
        if dgram.len() < HEADER_LEN {
            return Err(PacketError::Truncated(dgram.len()));
        }
        let w0 = word(dgram, 0);
        let w1 = word(dgram, 1);
        let timestamp = word(dgram, 2);
        let dest_socket = word(dgram, 3);
        let body = &dgram[HEADER_LEN..];
        if w0 & 0x8000_0000 == 0 {
            let header = DataHeader {
                seq: SeqNo::from_masked(w0),
                boundary: Boundary::from_bits(w1 >> 30),
                in_order: (w1 >> 29) & 1 == 1,
                msg_no: w1 & 0x1FFF_FFFF,
                timestamp,
                dest_socket,
            };
            return Ok(Packet::Data { header, payload: body });
        }
        let ty = ((w0 >> 16) & 0x7FFF) as u16;
        let bad = || PacketError::BadBody(ty, body.len());
        let control = match ty {
            0 => Control::Handshake(Handshake::decode(body).ok_or_else(bad)?),
            1 => Control::KeepAlive,
            2 => {
                if body.len() == 4 {
                    Control::LightAck { ack: SeqNo::new(word(body, 0)).ok_or_else(bad)? }
                } else if body.len() >= 16 {
                    let n = body.len() / 4;
                    let rates = (n >= 6).then(|| (word(body, 4) as i32, word(body, 5) as i32));
                    Control::Ack {
                        ack_no: w1,
                        ack: SeqNo::new(word(body, 0)).ok_or_else(bad)?,
                        info: AckInfo {
                            rtt_us: word(body, 1) as i32,
                            rtt_var_us: word(body, 2) as i32,
                            avail_buf: word(body, 3) as i32,
                            rates,
                        },
                    }
                } else {
                    return Err(bad());
                }
            }
            3 => Control::Nak(LossRanges::parse(body)?),
            4 => Control::CongestionWarning,
            5 => Control::Shutdown,
            6 => Control::Ack2 { ack_no: w1 },
            7 => {
                if body.len() < 8 {
                    return Err(bad());
                }
                Control::DropRequest {
                    msg_no: w1 & 0x1FFF_FFFF,
                    first: SeqNo::new(word(body, 0)).ok_or_else(bad)?,
                    last: SeqNo::new(word(body, 1)).ok_or_else(bad)?,
                }
            }
            8 => Control::PeerError { code: w1 },
            0x7FFF => Control::User { ext_type: (w0 & 0xFFFF) as u16 },
            other => return Err(PacketError::UnknownType(other)),
        };
        Ok(Packet::Control(ControlPacket { control, timestamp, dest_socket }))
    }
}

/// Writes a control header (type, additional info, timestamp, destination).
fn control_header(out: &mut Vec<u8>, ty: u16, info: u32, timestamp: u32, dest: u32) {
    out.extend_from_slice(&(0x8000_0000u32 | (u32::from(ty) << 16)).to_be_bytes());
    out.extend_from_slice(&info.to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&dest.to_be_bytes());
}

/// Encoders for the control packets this crate sends. Each clears `out`
/// and writes one complete datagram.
pub mod encode {
    use super::*;

    pub fn handshake(out: &mut Vec<u8>, hs: &Handshake, timestamp: u32, dest: u32) {
        out.clear();
        control_header(out, 0, 0, timestamp, dest);
        let start = out.len();
        out.resize(start + HANDSHAKE_LEN, 0);
        hs.encode(&mut out[start..]);
    }

    /// Keep-alive (1), congestion warning (4), shutdown (5): one padding word.
    pub fn empty(out: &mut Vec<u8>, ty: u16, timestamp: u32, dest: u32) {
        out.clear();
        control_header(out, ty, 0, timestamp, dest);
        out.extend_from_slice(&[0; 4]);
    }

    pub fn keep_alive(out: &mut Vec<u8>, timestamp: u32, dest: u32) {
        empty(out, 1, timestamp, dest)
    }

    pub fn shutdown(out: &mut Vec<u8>, timestamp: u32, dest: u32) {
        empty(out, 5, timestamp, dest)
    }

    pub fn light_ack(out: &mut Vec<u8>, ack: SeqNo, timestamp: u32, dest: u32) {
        out.clear();
        control_header(out, 2, 0, timestamp, dest);
        out.extend_from_slice(&ack.get().to_be_bytes());
    }

    pub fn ack(out: &mut Vec<u8>, ack_no: u32, ack: SeqNo, info: &AckInfo, timestamp: u32, dest: u32) {
        out.clear();
        control_header(out, 2, ack_no, timestamp, dest);
        for w in [ack.get() as i32, info.rtt_us, info.rtt_var_us, info.avail_buf] {
            out.extend_from_slice(&w.to_be_bytes());
        }
        if let Some((speed, bw)) = info.rates {
            out.extend_from_slice(&speed.to_be_bytes());
            out.extend_from_slice(&bw.to_be_bytes());
        }
    }

    pub fn ack2(out: &mut Vec<u8>, ack_no: u32, timestamp: u32, dest: u32) {
        out.clear();
        control_header(out, 6, ack_no, timestamp, dest);
        out.extend_from_slice(&[0; 4]);
    }

    /// A NAK whose body is already range coded (see [`crate::loss::encode_nak`]).
    pub fn nak(out: &mut Vec<u8>, words: &[u32], timestamp: u32, dest: u32) {
        out.clear();
        control_header(out, 3, 0, timestamp, dest);
        for w in words {
            out.extend_from_slice(&w.to_be_bytes());
        }
    }

    pub fn drop_request(out: &mut Vec<u8>, msg_no: u32, first: SeqNo, last: SeqNo, timestamp: u32, dest: u32) {
        out.clear();
        control_header(out, 7, msg_no, timestamp, dest);
        out.extend_from_slice(&first.get().to_be_bytes());
        out.extend_from_slice(&last.get().to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_round_trips_and_is_48_bytes() {
        let hs = Handshake {
            version: 4,
            sock_type: SOCK_STREAM,
            isn: 12345,
            mss: 1500,
            flight_flag_size: 8192,
            req_type: req_type::REQUEST,
            socket_id: 77,
            cookie: -5,
            peer_ip: ip_words("127.0.0.1".parse().unwrap()),
        };
        let mut out = Vec::new();
        encode::handshake(&mut out, &hs, 0, 0);
        assert_eq!(out.len(), HEADER_LEN + HANDSHAKE_LEN);
        // control bit + type 0, then the request type word in network order
        assert_eq!(&out[0..4], &[0x80, 0, 0, 0]);
        assert_eq!(&out[16 + 20..16 + 24], &[0, 0, 0, 1]);
        // 127.0.0.1 as libudt writes it on x86: bytes reversed in the word
        assert_eq!(&out[16 + 32..16 + 36], &[1, 0, 0, 127]);
        match Packet::decode(&out).unwrap() {
            Packet::Control(ControlPacket { control: Control::Handshake(h), .. }) => assert_eq!(h, hs),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn data_header_bits() {
        let h = DataHeader {
            seq: SeqNo::from_masked(0x7FFF_FFFF),
            boundary: Boundary::Solo,
            in_order: false,
            msg_no: 9,
            timestamp: 1000,
            dest_socket: 42,
        };
        let mut b = [0u8; 16];
        h.encode(&mut b);
        assert_eq!(&b[0..8], &[0x7F, 0xFF, 0xFF, 0xFF, 0xC0, 0, 0, 9]);
        let mut d = b.to_vec();
        d.extend_from_slice(b"xyz");
        match Packet::decode(&d).unwrap() {
            Packet::Data { header, payload } => {
                assert_eq!(header, h);
                assert_eq!(payload, b"xyz");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ack_lengths() {
        let mut out = Vec::new();
        let info = AckInfo { rtt_us: 100_000, rtt_var_us: 50_000, avail_buf: 8190, rates: Some((1000, 2000)) };
        encode::ack(&mut out, 7, SeqNo::from_masked(99), &info, 0, 3);
        assert_eq!(out.len(), 16 + 24);
        assert!(
            matches!(Packet::decode(&out), Ok(Packet::Control(ControlPacket { control: Control::Ack { ack_no: 7, info: i, .. }, .. })) if i == info)
        );
        encode::light_ack(&mut out, SeqNo::from_masked(5), 0, 3);
        assert_eq!(out.len(), 20);
        assert!(matches!(
            Packet::decode(&out),
            Ok(Packet::Control(ControlPacket { control: Control::LightAck { .. }, .. }))
        ));
        out.truncate(16 + 2);
        assert!(Packet::decode(&out).is_err());
    }

    #[test]
    fn short_and_unknown_inputs_are_errors() {
        assert_eq!(Packet::decode(&[0; 15]), Err(PacketError::Truncated(15)));
        let mut p = vec![0x80, 0x09, 0, 0];
        p.extend_from_slice(&[0; 12]);
        assert_eq!(Packet::decode(&p), Err(PacketError::UnknownType(9)));
        let mut hs = vec![0x80, 0, 0, 0];
        hs.extend_from_slice(&[0; 12 + 47]);
        assert!(matches!(Packet::decode(&hs), Err(PacketError::BadBody(0, 47))));
    }
}
