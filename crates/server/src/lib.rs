//! Ferry's server: binds the control port, enforces connection limits and
//! drives one `ferry_proto::Session` per control connection with real
//! sockets and the confined file-system root.

mod checksums;
pub mod config;
mod control;
mod data;
mod groups;
mod lockout;
pub mod metrics;
mod mlsr;
mod passwords;
mod profiling;
mod server;
pub mod stripe;
pub mod tls;
mod transfer;
pub mod users;

pub use config::ServerConfig;
pub use server::{Server, ServerHandle};
