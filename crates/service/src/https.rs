//! The API and dashboard over HTTPS.
//!
//! axum's own `serve` speaks plain HTTP only, so TLS connections are
//! accepted here with tokio-rustls and each is handed to hyper. Bearer
//! tokens and the dashboard's `Secure` session cookie need this as soon as
//! the service listens beyond loopback. A handshake that does not finish in
//! ten seconds is dropped, and at most [`MAX_CONNECTIONS`] are served at
//! once, so slow or hostile clients cannot exhaust the listener.

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

/// Connections served at once; the next waits in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 512;
/// A client that has not finished its TLS handshake by then is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` with TLS until the listener fails.
pub async fn serve(listener: TcpListener, app: Router, tls: Arc<rustls::ServerConfig>) -> anyhow::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = slots.clone().acquire_owned().await?;
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors and the like: wait, do not spin.
                tracing::warn!(error = %e, "accepting an HTTPS connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let service = TowerToHyperService::new(app);
            let conn = hyper::server::conn::http1::Builder::new()
                .header_read_timeout(Duration::from_secs(30))
                .timer(hyper_util::rt::TokioTimer::new())
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "HTTPS connection ended");
            }
        });
    }
}
