//! The client's TLS settings for `ftps://` (explicit FTPS, RFC 4217).
//!
//! One rustls client configuration serves the control connection and every
//! data connection of a run. rustls keeps the sessions it learns per server
//! name, so data connections resume the control connection's session (an
//! abbreviated handshake) where the server allows it.

use crate::error::ClientError;
use ferry_io::tls as io_tls;
use std::path::PathBuf;
use std::sync::Arc;

/// What the user said about TLS (`--ca`, `--cert`, `--key`).
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// PEM file of CA certificates to trust; the system's store otherwise.
    pub ca: Option<PathBuf>,
    /// PEM client certificate chain, for servers that map certificates to
    /// users (no password needed then).
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert`.
    pub key: Option<PathBuf>,
}

impl TlsOptions {
    /// Builds the rustls configuration: trust anchors, and the client
    /// certificate if one was given.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, ClientError> {
        let tls = |e: io_tls::TlsSetupError| ClientError::Usage(format!("TLS: {e}"));
        let roots = match &self.ca {
            Some(path) => io_tls::load_roots(path).map_err(tls)?,
            None => io_tls::system_roots().map_err(tls)?,
        };
        let builder = rustls::ClientConfig::builder_with_provider(io_tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls(e.into()))?
            .with_root_certificates(roots.clone());
        let config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let chain = io_tls::load_certs(cert).map_err(tls)?;
                let key = io_tls::load_key(key).map_err(tls)?;
                builder.with_client_auth_cert(chain, key).map_err(|e| tls(e.into()))?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => return Err(ClientError::Usage("--cert and --key must be given together".into())),
        };
        let config = Arc::new(config);
        // A QUIC data connection the server opens to this client (PORT)
        // is verified with the same roots (transport/quic.rs, "Roles").
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), io_tls::provider())
            .build()
            .map_err(|e| tls(io_tls::TlsSetupError::Verifier(e.to_string())))?;
        ferry_io::transport::quic::register_client_trust(&config, verifier);
        Ok(config)
    }
}
