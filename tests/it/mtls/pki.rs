//! A throwaway PKI for the mutual TLS tests: CAs, server and client
//! certificates made with rcgen, written where the server reads them.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
};
use sha2::{Digest, Sha256};

/// A certificate authority.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, PEM.
pub struct Pair {
    pub cert: String,
    pub key: String,
    der: Vec<u8>,
    /// The DER SubjectPublicKeyInfo of its key.
    spki: Vec<u8>,
}

/// What a client certificate names, and when it is valid.
#[derive(Default)]
pub struct ClientNames<'a> {
    pub uri: Option<&'a str>,
    pub dns: Option<&'a str>,
    pub expired: bool,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        Self {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA certificate"),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `localhost`.
    pub fn server(&self) -> Pair {
        self.server_for(&["localhost"])
    }

    /// A server certificate for these names (DNS names or IP addresses).
    pub fn server_for(&self, names: &[&str]) -> Pair {
        let names = names
            .iter()
            .map(|name| (*name).to_owned())
            .collect::<Vec<_>>();
        let mut params = CertificateParams::new(names).expect("server params");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate with these names.
    pub fn client(&self, names: ClientNames<'_>) -> Pair {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params
            .distinguished_name
            .push(DnType::CommonName, "a workload");
        if let Some(uri) = names.uri {
            params
                .subject_alt_names
                .push(SanType::URI(uri.try_into().expect("an ia5 uri")));
        }
        if let Some(dns) = names.dns {
            params
                .subject_alt_names
                .push(SanType::DnsName(dns.try_into().expect("an ia5 name")));
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if names.expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> Pair {
        let key = KeyPair::generate().expect("leaf key");
        let certificate = params.signed_by(&key, &self.issuer).expect("signed");
        Pair {
            cert: certificate.pem(),
            key: key.serialize_pem(),
            der: certificate.der().to_vec(),
            spki: key.subject_public_key_info(),
        }
    }
}

impl Pair {
    pub fn sha256(&self) -> [u8; 32] {
        Sha256::digest(&self.der).into()
    }

    /// Base64 of the SHA-256 of its public key: what Chromium's
    /// `--ignore-certificate-errors-spki-list` names a certificate by.
    pub fn spki_sha256_base64(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&self.spki))
    }

    pub fn identity(&self) -> tonic::transport::Identity {
        tonic::transport::Identity::from_pem(&self.cert, &self.key)
    }
}

/// Writes `contents` to `directory/name` in one step (a rename), as
/// cert-manager and SPIRE do, so that the server never reads half a file.
pub fn write(directory: &Path, name: &str, contents: &str) -> PathBuf {
    let path = directory.join(name);
    let staged = directory.join(format!(".{name}.new"));
    std::fs::write(&staged, contents).expect("write");
    std::fs::rename(&staged, &path).expect("rename");
    path
}
