//! Ferry's client: URLs, the control channel, and copies between local
//! paths and FTP/GridFTP servers, including server-to-server copies.

pub mod config;
pub mod control;
pub mod copy;
pub mod credentials;
pub mod error;
pub mod filter;
pub mod location;
pub mod path_cache;
pub mod resume;
pub mod session;
pub mod stripe;
pub mod tls;
pub mod transport_choice;

pub use config::ClientConfig;
pub use control::ControlChannel;
pub use copy::{Client, CopyOptions, CopySummary, Measurement, ModeChoice, PlanLine, Problem, Stats};
pub use credentials::{CredentialLookup, Prompt, Secret};
pub use error::ClientError;
pub use location::{Location, RemoteUrl};
pub use resume::RestartStore;
pub use tls::TlsOptions;
