//! The server's TLS: certificate, client-certificate verification, session
//! resumption and the certificate map (RFC 4217 explicit FTPS).
//!
//! One rustls configuration serves the control connection; data
//! connections use a copy that shares its certificate, verifier and
//! session cache but sends no TLS 1.3 tickets (see
//! `ferry_io::tls::data_server_config`). Session resumption is on both
//! ways rustls offers it — a stateful cache (TLS 1.2 session IDs, TLS 1.3
//! stateful tickets) and stateless tickets — so a client that resumes its
//! control session on each data connection, as lftp with GnuTLS does, gets
//! an abbreviated handshake instead of a full one per file.

use crate::config::ServerConfig;
use ferry_io::tls::{self as io_tls, TlsSetupError};
use rustls::pki_types::CertificateDer;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use thiserror::Error;

/// Sessions remembered for resumption. A few thousand clients, each
/// resuming on its data connections, fit; rustls evicts the oldest.
const SESSION_CACHE: usize = 4096;

#[derive(Debug, Error)]
pub enum TlsConfigError {
    #[error(transparent)]
    Setup(#[from] TlsSetupError),
    #[error("{0}")]
    Inconsistent(&'static str),
    #[error("cannot read the certificate map {path}: {error}")]
    MapRead { path: String, error: std::io::Error },
    #[error("{path}:{line}: {why} (expected a line like \"/O=Grid/CN=Alice Example\" alice)")]
    MapSyntax { path: String, line: usize, why: String },
}

/// Everything a session needs for TLS.
#[derive(Debug)]
pub struct ServerTls {
    /// For the control connection (AUTH TLS).
    pub control: Arc<rustls::ServerConfig>,
    /// For protected data connections (PROT P).
    pub data: Arc<rustls::ServerConfig>,
    pub cert_map: CertMap,
    /// Verifies other servers' certificates (`tls_peer_ca`) for
    /// third-party QUIC data channels (`DCAU S`).
    pub peer_trust: Option<Arc<dyn rustls::client::danger::ServerCertVerifier>>,
}

impl ServerTls {
    /// Builds the TLS configuration from the server configuration; `None`
    /// when no certificate is configured. Settings that make no sense
    /// without TLS are refused here, at start, not at the first login.
    pub fn from_config(c: &ServerConfig) -> Result<Option<Self>, TlsConfigError> {
        let (cert, key) = match (&c.tls_cert, &c.tls_key) {
            (Some(cert), Some(key)) => (cert, key),
            (None, None) => {
                if c.require_tls || c.require_protected_data {
                    return Err(TlsConfigError::Inconsistent(
                        "require_tls and require_protected_data need a certificate: set tls_cert and tls_key",
                    ));
                }
                if c.tls_client_ca.is_some() || c.cert_map.is_some() {
                    return Err(TlsConfigError::Inconsistent(
                        "tls_client_ca and cert_map need a server certificate: set tls_cert and tls_key",
                    ));
                }
                return Ok(None);
            }
            _ => return Err(TlsConfigError::Inconsistent("tls_cert and tls_key must be given together")),
        };
        if c.cert_map.is_some() && c.tls_client_ca.is_none() {
            return Err(TlsConfigError::Inconsistent(
                "cert_map needs tls_client_ca: only certificates verified against a CA may be mapped to users",
            ));
        }
        let chain = io_tls::load_certs(cert)?;
        let key = io_tls::load_key(key)?;
        let provider = io_tls::provider();
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsSetupError::from)?;
        let builder = match &c.tls_client_ca {
            Some(ca) => {
                let roots = io_tls::load_roots(ca)?;
                // Optional: clients without a certificate log in with a
                // password; a certificate that is presented must verify.
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| TlsSetupError::Verifier(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut control = builder.with_single_cert(chain.clone(), key.clone_key()).map_err(TlsSetupError::from)?;
        control.session_storage = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE);
        control.ticketer = rustls::crypto::ring::Ticketer::new().map_err(TlsSetupError::from)?;
        let data = io_tls::data_server_config(&control);
        // A QUIC data connection this server opens presents the same
        // certificate as a client certificate (transport/quic.rs, "Roles").
        ferry_io::transport::quic::register_server_identity(&data, chain, key);
        let cert_map = match &c.cert_map {
            Some(p) => CertMap::load(p)?,
            None => CertMap::default(),
        };
        let peer_trust = match &c.tls_peer_ca {
            Some(ca) => {
                let roots = Arc::new(io_tls::load_roots(ca)?);
                let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, io_tls::provider())
                    .build()
                    .map_err(|e| TlsSetupError::Verifier(e.to_string()))?;
                Some(verifier as Arc<dyn rustls::client::danger::ServerCertVerifier>)
            }
            None => None,
        };
        Ok(Some(Self { control: Arc::new(control), data, cert_map, peer_trust }))
    }

    /// Who the client is, from the certificate it presented (already
    /// verified by rustls against `tls_client_ca`).
    pub fn identity(&self, certs: Option<&[CertificateDer<'static>]>) -> ferry_proto::session::TlsIdentity {
        let subject = certs.and_then(|c| c.first()).and_then(io_tls::subject_dn);
        let users = subject.as_deref().map(|s| self.cert_map.users(s).to_vec()).unwrap_or_default();
        ferry_proto::session::TlsIdentity { subject, users }
    }
}

/// Client-certificate subjects and the local users each may log in as,
/// in the grid-mapfile format Globus sites already keep:
///
/// ```text
/// # subject (OpenSSL one-line form, quoted)      users
/// "/C=DE/O=Grid/CN=Alice Example"                 alice
/// "/C=DE/O=Grid/CN=Robot"                         ingest,archive
/// ```
#[derive(Debug, Default)]
pub struct CertMap {
    subjects: HashMap<String, Vec<String>>,
}

impl CertMap {
    pub fn load(path: &Path) -> Result<Self, TlsConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| TlsConfigError::MapRead { path: path.display().to_string(), error })?;
        Self::parse(&text).map_err(|(line, why)| TlsConfigError::MapSyntax {
            path: path.display().to_string(),
            line,
            why,
        })
    }

    /// Parses the map; an error names the line (1-based) and the problem.
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        let mut subjects: HashMap<String, Vec<String>> = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |why: &str| (i + 1, why.to_string());
            let rest = line.strip_prefix('"').ok_or_else(|| err("the subject must be in double quotes"))?;
            // A quote inside the subject is written \" (as in grid-mapfiles).
            let mut subject = String::new();
            let mut chars = rest.char_indices();
            let mut end = None;
            while let Some((at, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, next)) => subject.push(next),
                        None => return Err(err("a backslash ends the line")),
                    },
                    '"' => {
                        end = Some(at + 1);
                        break;
                    }
                    c => subject.push(c),
                }
            }
            let end = end.ok_or_else(|| err("the subject's closing quote is missing"))?;
            if !subject.starts_with('/') {
                return Err(err("the subject must be in /KEY=value/... form"));
            }
            let users: Vec<String> = rest[end..]
                .split([',', ' ', '\t'])
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(str::to_string)
                .collect();
            if users.is_empty() {
                return Err(err("no user name after the subject"));
            }
            let entry = subjects.entry(subject).or_default();
            for u in users {
                if !entry.contains(&u) {
                    entry.push(u);
                }
            }
        }
        Ok(Self { subjects })
    }

    /// The users `subject` may log in as (none when it is not mapped).
    pub fn users(&self, subject: &str) -> &[String] {
        self.subjects.get(subject).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.subjects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.subjects.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_grid_mapfile() {
        let m = CertMap::parse(
            "# comment\n\n\"/C=DE/O=Grid/CN=Alice Example\" alice\n  \"/O=Grid/CN=Ro\\\"bot\"  ingest,archive\n\"/O=Grid/CN=Robot\" x\n",
        )
        .unwrap();
        assert_eq!(m.users("/C=DE/O=Grid/CN=Alice Example"), ["alice"]);
        assert_eq!(m.users("/O=Grid/CN=Ro\"bot"), ["ingest", "archive"]);
        assert!(m.users("/O=Grid/CN=alice example").is_empty(), "subjects compare exactly");
        assert_eq!(m.len(), 3);
        assert_eq!(CertMap::parse("/CN=x alice").unwrap_err().0, 1);
        assert_eq!(CertMap::parse("\n\"/CN=x\"").unwrap_err().0, 2);
        assert!(CertMap::parse("\"/CN=x alice").unwrap_err().1.contains("closing quote"));
        assert!(CertMap::parse("\"CN=x\" alice").unwrap_err().1.contains("/KEY=value"));
    }

    #[test]
    fn refuses_inconsistent_settings() {
        let c = ServerConfig { require_tls: true, ..ServerConfig::default() };
        assert!(ServerTls::from_config(&c).unwrap_err().to_string().contains("tls_cert"));
        let c = ServerConfig { tls_cert: Some("/nonexistent.pem".into()), ..ServerConfig::default() };
        assert!(ServerTls::from_config(&c).unwrap_err().to_string().contains("together"));
        let c = ServerConfig {
            tls_cert: Some("/nonexistent.pem".into()),
            tls_key: Some("/nonexistent.key".into()),
            cert_map: Some("/m".into()),
            ..ServerConfig::default()
        };
        assert!(ServerTls::from_config(&c).unwrap_err().to_string().contains("tls_client_ca"));
        assert!(ServerTls::from_config(&ServerConfig::default()).unwrap().is_none());
    }
}
