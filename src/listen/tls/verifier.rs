//! Client certificates, judged after the handshake instead of during it.
//!
//! A certificate refused during the handshake reaches the caller as a TLS
//! alert: an opaque connection error that says nothing a client library
//! shows. So the handshake accepts any certificate whose holder proves it
//! has the key (the signature over the handshake is checked, with the
//! certificate's public key, by rustls' webpki verifier), and the chain is
//! checked once the handshake is done, by the same webpki verifier against
//! the client CAs; the verdict travels with the connection and each call
//! on it is answered UNAUTHENTICATED with the reason
//! (`crate::auth::certificate`).

use std::sync::Arc;

use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::pki_types::{CertificateDer, UnixTime};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, Error, SignatureScheme,
};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::auth::{IdentityMap, PeerCertificate};
use crate::domain::CertificateRefusal;

/// Asks every client for a certificate, takes any whose handshake signature
/// verifies, and leaves the chain to [`judge`].
#[derive(Debug)]
pub(super) struct DeferredChainVerifier {
    /// rustls' webpki verifier over the client CAs: the hints it sends, the
    /// signature schemes and checks are its own.
    pub(super) chain: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for DeferredChainVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    /// Never at the handshake: a missing certificate, when one is required,
    /// is refused on each call, with its reason.
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.chain.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        // Deferred to `judge`, which runs on every connection before any
        // of its calls is served.
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.chain.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.chain.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain.supported_verify_schemes()
    }
}

/// The verdict on the certificates a client sent (`None`: it sent none).
pub(super) fn judge(
    chain: &dyn ClientCertVerifier,
    identities: &IdentityMap,
    required: bool,
    sent: Option<&[CertificateDer<'_>]>,
) -> PeerCertificate {
    let Some((end_entity, intermediates)) = sent.and_then(<[_]>::split_first) else {
        return PeerCertificate::Absent { required };
    };
    if let Err(error) = chain.verify_client_cert(end_entity, intermediates, UnixTime::now()) {
        let refusal = match error {
            Error::InvalidCertificate(
                CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. },
            ) => CertificateRefusal::Expired,
            _ => CertificateRefusal::Untrusted,
        };
        return PeerCertificate::Refused(refusal);
    }
    let (uris, dns_names) = subject_alt_names(end_entity);
    match identities.lookup(&uris, &dns_names) {
        Some(mapped) => PeerCertificate::Mapped(Arc::new(mapped)),
        None => PeerCertificate::Refused(CertificateRefusal::Unmapped),
    }
}

/// The SAN URIs and DNS names of a certificate, in its order; none when it
/// cannot be read (webpki parsed it already, so that does not happen).
fn subject_alt_names(certificate: &CertificateDer<'_>) -> (Vec<String>, Vec<String>) {
    let mut uris = Vec::new();
    let mut dns_names = Vec::new();
    let Ok((_, parsed)) = X509Certificate::from_der(certificate.as_ref()) else {
        return (uris, dns_names);
    };
    if let Ok(Some(names)) = parsed.subject_alternative_name() {
        for name in &names.value.general_names {
            match name {
                GeneralName::URI(uri) => uris.push((*uri).to_owned()),
                GeneralName::DNSName(dns) => dns_names.push((*dns).to_owned()),
                _ => {}
            }
        }
    }
    (uris, dns_names)
}
