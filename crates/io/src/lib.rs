//! Ferry's I/O room: the confined file-system root, data channels and the
//! loops that move bytes between them. Everything that owns a file
//! descriptor lives here; the protocol rules live in `ferry-proto`.

pub mod anonymous;
pub mod checksum;
pub mod disk;
pub mod endpoint;
pub mod mode_e;
pub mod partial;
pub mod pipeline;
pub mod rate;
pub mod root;
pub mod sizing;
pub mod socket;
pub mod staging;
pub mod stream;
pub mod tcpinfo;
pub mod tls;
pub mod transport;
pub mod udt;
