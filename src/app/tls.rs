//! The API's TLS identity.

use std::path::Path;

use tonic::transport::{Identity, ServerTlsConfig};

use crate::config::ServeArgs;
use crate::error::BoxError;

/// The API's TLS identity, when configured; read at start-up, so a bad file
/// stops the server before it listens.
pub(super) fn tls_config(args: &ServeArgs) -> Result<Option<ServerTlsConfig>, BoxError> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let read = |path: &Path| {
        std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))
    };
    let identity = Identity::from_pem(read(cert)?, read(key)?);
    Ok(Some(ServerTlsConfig::new().identity(identity)))
}
