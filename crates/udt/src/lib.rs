//! A sans-IO implementation of UDT4 — the rate-based reliable UDP protocol of
//! Gu and Grossman — speaking the wire protocol exactly as libudt 4.11 (the
//! Debian `libudt0` package, and the Globus XIO UDT driver built on it) does.
//!
//! Like `quinn-proto`, nothing here opens a socket or reads a clock: a
//! [`Connection`] is fed datagrams with [`Connection::handle_datagram`] and
//! the passage of time with [`Connection::handle_timeout`], and hands back the
//! datagrams it wants sent from [`Connection::poll_transmit`]. Time is a
//! monotonic nanosecond count ([`Time`]) chosen by the caller, so the whole
//! protocol runs in a simulated clock in tests (`tests/sim.rs`) and in real
//! time in `ferry_io::udt`.
//!
//! Rooms: [`seq`] (31-bit sequence arithmetic), [`packet`] (the 16-byte
//! headers, control packets, the 48-byte handshake), [`loss`] (loss lists and
//! their range coding), [`buffer`] (bounded send and receive buffers),
//! [`window`] (ACK history, arrival-speed and packet-pair estimators),
//! [`cc`] (pluggable congestion control: UDT's DAIMD, Ferry's rate/RTT model,
//! blast), [`listener`] (SYN-cookie handshake of the listening side) and
//! [`connection`] (the state machine). `docs/udt.md` explains the choices.

#![forbid(unsafe_code)]

pub mod buffer;
pub mod cc;
pub mod config;
pub mod connection;
#[doc(hidden)]
pub mod fuzz_checks;
pub mod listener;
pub mod loss;
pub mod packet;
pub mod seq;
pub mod time;
pub mod window;

pub use cc::{Blast, CongestionControl, CongestionKind, Daimd, FerryRate};
pub use config::Config;
pub use connection::{Connection, ConnectionError, Event, Footprint, State, Stats, Transmit};
pub use listener::{Listener, ListenerOutput};
pub use packet::{Packet, PacketError};
pub use seq::SeqNo;
pub use time::Time;
