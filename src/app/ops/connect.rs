//! The channel to a running server: plaintext or TLS (optionally mutual),
//! a deadline on every call, and the credential: a bearer token on every
//! request, or a client certificate alone (the server maps it to a tenant
//! and scopes).

use std::path::Path;
use std::time::Duration;

use tonic::Request;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::failure::{EXIT_UNREACHABLE, OpsFailure};
use crate::config::OpsConnectionArgs;
use crate::error::BoxError;
use crate::proto::idempotency_service_client::IdempotencyServiceClient;

/// A connected client and what every request carries. Cloning shares the
/// channel (`idemd mcp` answers tool calls concurrently).
#[derive(Clone)]
pub(in crate::app) struct Server {
    pub(in crate::app) client: IdempotencyServiceClient<Channel>,
    /// None: the client certificate is the credential.
    authorization: Option<AsciiMetadataValue>,
    timeout: Duration,
}

impl Server {
    pub(in crate::app) async fn connect(args: &OpsConnectionArgs) -> Result<Self, BoxError> {
        // Checked before any connection: no credential at all (an unset
        // variable in a script) would only come back as UNAUTHENTICATED,
        // later and less clearly.
        let token = args.token.as_deref().unwrap_or_default().trim();
        let authorization = if token.is_empty() {
            if args.client_cert.is_none() {
                return Err(OpsFailure::usage(
                    "no credential: pass --token (or set IDEMD_TOKEN) to a token with the scopes \
                     the command needs, or --client-cert and --client-key for mutual TLS",
                )
                .into());
            }
            None
        } else {
            // The error never quotes the token: it may be a secret with a typo.
            Some(
                MetadataValue::try_from(format!("Bearer {token}")).map_err(|_| {
                    OpsFailure::usage("the token has characters a header cannot carry")
                })?,
            )
        };
        let uri = address_uri(&args.addr);
        let mut endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|error| OpsFailure::usage(format!("--addr {:?}: {error}", args.addr)))?
            .connect_timeout(args.timeout)
            .timeout(args.timeout);
        if uri.starts_with("https://") {
            endpoint = endpoint
                .tls_config(tls_config(args)?)
                .map_err(|error| OpsFailure::usage(format!("TLS settings: {error}")))?;
        } else if args.ca_cert.is_some() || args.client_cert.is_some() {
            return Err(
                OpsFailure::usage("--ca-cert and --client-cert need an https:// --addr").into(),
            );
        }
        let channel = endpoint.connect().await.map_err(|error| {
            OpsFailure::new(
                EXIT_UNREACHABLE,
                format!("cannot reach the server at {uri}: {}", error_chain(&error)),
            )
        })?;
        Ok(Self {
            client: IdempotencyServiceClient::new(channel),
            authorization,
            timeout: args.timeout,
        })
    }

    /// `message` with the bearer token (if the credential is one) and the
    /// call's deadline (which the server also sees, as grpc-timeout).
    pub(in crate::app) fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(authorization) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", authorization.clone());
        }
        request.set_timeout(self.timeout);
        request
    }
}

/// `host:port` means plaintext, as grpcurl's `-plaintext` users expect.
fn address_uri(addr: &str) -> String {
    if addr.starts_with("http://") || addr.starts_with("https://") {
        addr.to_owned()
    } else {
        format!("http://{addr}")
    }
}

fn tls_config(args: &OpsConnectionArgs) -> Result<ClientTlsConfig, BoxError> {
    // Only the ring provider is built in, without a system root store: the
    // CA that signed the server's certificate must be named.
    let Some(ca_cert) = &args.ca_cert else {
        return Err(OpsFailure::usage(
            "an https:// address needs --ca-cert (or IDEMD_CA_CERT): the PEM CA that signed the \
             server's certificate",
        )
        .into());
    };
    let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca_cert)?));
    if let (Some(cert), Some(key)) = (&args.client_cert, &args.client_key) {
        config = config.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    Ok(config)
}

fn read(path: &Path) -> Result<Vec<u8>, OpsFailure> {
    std::fs::read(path)
        .map_err(|error| OpsFailure::usage(format!("cannot read {}: {error}", path.display())))
}

/// tonic's transport error says only "transport error"; the cause is below.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
