//! The API's TLS identity.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use tracing::warn;

use crate::config::ServeArgs;
use crate::error::BoxError;

/// Refuses to serve the API in plaintext unless asked to: tokens and
/// results would cross the network readable by anyone on the path. `--dev`
/// listens on loopback only (checked before this), so it needs no TLS.
/// Asked for, plaintext is logged as a warning at every start.
pub(super) fn refuse_unasked_plaintext(args: &ServeArgs) -> Result<(), BoxError> {
    if args.tls_cert.is_some() || args.dev {
        return Ok(());
    }
    if !args.insecure_plaintext {
        return Err(
            "refusing to serve the API in plaintext: give --tls-cert and --tls-key \
                    (IDEMD_TLS_CERT, IDEMD_TLS_KEY), or --insecure-plaintext \
                    (IDEMD_INSECURE_PLAINTEXT=true) only behind a mesh or proxy that \
                    terminates TLS"
                .into(),
        );
    }
    warn!(
        listen = %args.listen,
        "serving the API in plaintext (--insecure-plaintext): bearer tokens and results \
         cross the network unencrypted; only behind a mesh or proxy that terminates TLS"
    );
    Ok(())
}

/// The API's TLS acceptor, when configured; read at start-up, so a bad file
/// stops the server before it listens. The handshake itself is the accept
/// loop's (`connections.rs`), under its timeout.
pub(super) fn tls_acceptor(args: &ServeArgs) -> Result<Option<TlsAcceptor>, BoxError> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let read = |path: &Path| {
        std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))
    };
    let chain = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("{}: not a PEM certificate chain: {error}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_slice(&read(key)?)
        .map_err(|error| format!("{}: not a PEM private key: {error}", key.display()))?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    // gRPC is HTTP/2 only; the Connect JSON mapping also takes HTTP/1.1
    // (rustls picks the first of ours the client offers: h2 when it can).
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some(TlsAcceptor::from(Arc::new(config))))
}
