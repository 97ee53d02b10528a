//! A connection's client certificate, as the server judged it once after
//! the TLS handshake, and how it combines with a bearer token on each call.
//!
//! Which credential decides a call:
//! - a certificate that was sent but is refused (another CA, expired,
//!   unmapped, or mapped to a tenant that does not exist) refuses every
//!   call on its connection, whatever token comes with it: a caller presenting a bad certificate is misconfigured or
//!   hostile, and a token must not paper over that;
//! - with `--tls-require-client-cert`, a connection without a certificate
//!   is refused (CERTIFICATE_REQUIRED), token or not;
//! - a valid bearer token wins over a valid certificate: it is the more
//!   specific credential (a workload's certificate names the workload, a
//!   token is handed to one use of it, with its own scopes and expiry);
//! - otherwise a mapped certificate decides, and without one the token does.

use std::sync::Arc;

use super::identities::MappedIdentity;
use super::{Authenticator, Principal};
use crate::domain::{CertificateRefusal, Error, Result};

/// The verdict on a connection's client certificate.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PeerCertificate {
    /// The listener does not ask for client certificates (plaintext, or TLS
    /// without `--tls-client-ca`).
    #[default]
    NotAsked,
    /// Asked for, and none was sent.
    Absent { required: bool },
    /// A valid chain to a client CA, with an identity the mapping names.
    Mapped(Arc<MappedIdentity>),
    /// Sent, and refused.
    Refused(CertificateRefusal),
}

impl Authenticator {
    /// The principal of a call on a connection whose certificate was judged
    /// `certificate`, with the `authorization` header value it sent (the
    /// order of precedence is this module's).
    pub async fn authenticate(
        &self,
        certificate: &PeerCertificate,
        authorization: Option<&str>,
    ) -> Result<Principal> {
        let has_token = authorization.is_some_and(|value| !value.trim().is_empty());
        match certificate {
            PeerCertificate::Refused(refusal) => Err(Error::CertificateRefused(*refusal)),
            PeerCertificate::Absent { required: true } => {
                Err(Error::CertificateRefused(CertificateRefusal::Required))
            }
            PeerCertificate::Mapped(mapped) => {
                // Resolved even when a token comes, so that a certificate
                // mapped to a tenant that does not exist (or no longer)
                // refuses the call like any other bad certificate; the
                // lookup is cached as tokens' are.
                let principal = self
                    .certificate_principal(&mapped.tenant, mapped.scopes, &mapped.identity)
                    .await
                    .map_err(|error| match error {
                        Error::Unauthenticated => {
                            Error::CertificateRefused(CertificateRefusal::Unmapped)
                        }
                        other => other,
                    })?;
                if has_token {
                    self.principal(authorization).await
                } else {
                    Ok(principal)
                }
            }
            _ => self.principal(authorization).await,
        }
    }
}
