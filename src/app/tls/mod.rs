//! The API's TLS: its identity (certificate and key) and, for mutual TLS,
//! the client CAs and the identity mapping; and the web console's, which
//! is an identity only (a browser must not be asked for a client
//! certificate), loaded and reloaded the same way. Read at start-up, so that a bad
//! file stops the server before it listens, and read again whenever the
//! files change ([`reload`]): each new connection takes the configuration
//! in force when it arrives; connections already open keep theirs. The
//! handshake itself is the accept loop's (`connections.rs`), under its
//! timeout; client certificates are judged after it ([`verifier`]).

mod reload;
mod verifier;

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use sha2::{Digest, Sha256};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::client::verify_server_name;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::server::danger::ClientCertVerifier;
use tokio_rustls::rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use tokio_rustls::rustls::{RootCertStore, ServerConfig, ServerConnection};
use tracing::warn;

pub(super) use reload::reload_every;

use crate::auth::{IdentityMap, PeerCertificate};
use crate::config::ServeArgs;
use crate::domain::model::hex;
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

/// Where the TLS material lives.
#[derive(Debug, Clone)]
pub(super) struct TlsFiles {
    /// Whose files these are (`api`, `console`), for the log.
    listener: &'static str,
    cert: PathBuf,
    key: PathBuf,
    /// With `identities`: mutual TLS.
    client_ca: Option<(PathBuf, PathBuf)>,
    require_client_cert: bool,
}

impl TlsFiles {
    pub(super) fn from_args(args: &ServeArgs) -> Option<Self> {
        let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
            return None;
        };
        Some(Self {
            listener: "api",
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.tls_client_ca.clone().zip(args.tls_identities.clone()),
            require_client_cert: args.tls_require_client_cert,
        })
    }

    /// The web console's: a certificate and key, never a client CA.
    pub(super) fn console_from_args(args: &ServeArgs) -> Option<Self> {
        let (Some(cert), Some(key)) = (&args.console_tls_cert, &args.console_tls_key) else {
            return None;
        };
        Some(Self {
            listener: "console",
            cert: cert.clone(),
            key: key.clone(),
            client_ca: None,
            require_client_cert: false,
        })
    }

    /// The files' bytes, as they are now.
    fn read(&self) -> Result<Contents, String> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))
        };
        Ok(Contents {
            cert: read(&self.cert)?,
            key: read(&self.key)?,
            client_ca: match &self.client_ca {
                Some((bundle, identities)) => Some((read(bundle)?, read(identities)?)),
                None => None,
            },
        })
    }

    /// A configuration from `contents`, or why it cannot be one (naming the
    /// file): nothing of a bad set is used.
    fn build(&self, contents: &Contents) -> Result<Loaded, String> {
        let chain = CertificateDer::pem_slice_iter(&contents.cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| {
                format!(
                    "{}: not a PEM certificate chain: {error}",
                    self.cert.display()
                )
            })?;
        let leaf = chain
            .first()
            .ok_or_else(|| format!("{}: no certificate in it", self.cert.display()))?;
        let fingerprint = hex(&Sha256::digest(leaf.as_ref()));
        let leaf = leaf.clone().into_owned();
        ParsedCertificate::try_from(&leaf)
            .map_err(|error| format!("{}: not a certificate: {error}", self.cert.display()))?;
        let key = PrivateKeyDer::from_pem_slice(&contents.key)
            .map_err(|error| format!("{}: not a PEM private key: {error}", self.key.display()))?;
        let (builder, client_auth) = match (&self.client_ca, &contents.client_ca) {
            (Some((bundle_path, identities_path)), Some((bundle, identities))) => {
                let client_auth = ClientAuth::build(
                    (bundle_path, bundle),
                    (identities_path, identities),
                    self.require_client_cert,
                )?;
                let deferred = verifier::DeferredChainVerifier {
                    chain: client_auth.chain.clone(),
                };
                (
                    ServerConfig::builder().with_client_cert_verifier(Arc::new(deferred)),
                    Some(client_auth),
                )
            }
            _ => (ServerConfig::builder().with_no_client_auth(), None),
        };
        let mut config = builder.with_single_cert(chain, key).map_err(|error| {
            format!(
                "{} and {}: {error}",
                self.cert.display(),
                self.key.display()
            )
        })?;
        // gRPC is HTTP/2 only; the Connect JSON mapping also takes HTTP/1.1
        // (rustls picks the first of ours the client offers: h2 when it can).
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Loaded {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            client_auth,
            fingerprint,
            leaf,
        })
    }
}

/// The bytes of the TLS files, compared to tell a change.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
    /// The client CA bundle and the identity mapping.
    client_ca: Option<(Vec<u8>, Vec<u8>)>,
}

/// Mutual TLS: the chain verifier over the client CAs, and the mapping.
struct ClientAuth {
    chain: Arc<dyn ClientCertVerifier>,
    identities: IdentityMap,
    required: bool,
}

impl ClientAuth {
    fn build(
        (bundle_path, bundle): (&Path, &[u8]),
        (identities_path, identities): (&Path, &[u8]),
        required: bool,
    ) -> Result<Self, String> {
        let mut roots = RootCertStore::empty();
        for certificate in CertificateDer::pem_slice_iter(bundle) {
            let certificate = certificate.map_err(|error| {
                format!(
                    "{}: not a PEM certificate bundle: {error}",
                    bundle_path.display()
                )
            })?;
            roots.add(certificate).map_err(|error| {
                format!("{}: not a CA certificate: {error}", bundle_path.display())
            })?;
        }
        let chain = WebPkiClientVerifier::builder(Arc::new(roots))
            .build()
            .map_err(|error| format!("{}: {error}", bundle_path.display()))?;
        let identities = std::str::from_utf8(identities)
            .map_err(|_| "not UTF-8".to_owned())
            .and_then(IdentityMap::parse)
            .map_err(|error| format!("{}: {error}", identities_path.display()))?;
        Ok(Self {
            chain,
            identities,
            required,
        })
    }
}

/// One configuration: what a connection accepted under it is served with.
pub(crate) struct Loaded {
    acceptor: TlsAcceptor,
    client_auth: Option<ClientAuth>,
    /// SHA-256 of the server certificate, hex: logged on each (re)load, so
    /// that an operator can tell which one serves.
    fingerprint: String,
    /// The server certificate (parsed once at load, so it parses again).
    leaf: CertificateDer<'static>,
}

impl Loaded {
    pub(super) fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }

    /// Whether the server certificate is valid for `host` (a DNS name or an
    /// IP address, without port or brackets), as a browser checks it: its
    /// subject alternative names, wildcards for one label.
    pub(crate) fn certifies(&self, host: &str) -> bool {
        let Ok(name) = ServerName::try_from(host) else {
            return false;
        };
        ParsedCertificate::try_from(&self.leaf)
            .is_ok_and(|certificate| verify_server_name(&certificate, &name).is_ok())
    }

    /// The verdict on the client certificate of a connection whose
    /// handshake just finished under this configuration.
    pub(super) fn judge(&self, connection: &ServerConnection) -> PeerCertificate {
        match &self.client_auth {
            None => PeerCertificate::NotAsked,
            Some(auth) => verifier::judge(
                auth.chain.as_ref(),
                &auth.identities,
                auth.required,
                connection.peer_certificates(),
            ),
        }
    }
}

/// The configuration in force, shared by the accept loop (which takes it
/// for each new connection) and the reload task (which replaces it whole).
#[derive(Clone)]
pub struct ServerTls {
    current: Arc<RwLock<Arc<Loaded>>>,
}

impl ServerTls {
    /// The files as they are at start-up: an error stops the server.
    pub(super) fn load(files: &TlsFiles) -> Result<(Self, Contents), BoxError> {
        let contents = files.read()?;
        let loaded = files.build(&contents)?;
        tracing::info!(
            listener = files.listener,
            certificate_sha256 = %loaded.fingerprint,
            mutual = loaded.client_auth.is_some(),
            identities = loaded.client_auth.as_ref().map_or(0, |auth| auth.identities.len()),
            "tls on"
        );
        let tls = Self {
            current: Arc::new(RwLock::new(Arc::new(loaded))),
        };
        Ok((tls, contents))
    }

    /// The configuration for a connection arriving now.
    pub(super) fn current(&self) -> Arc<Loaded> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn replace(&self, loaded: Loaded) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(loaded);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration of a self-signed certificate for `names`.
    fn loaded(names: &[&str]) -> Loaded {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let certified = rcgen::generate_simple_self_signed(names).expect("a certificate");
        let files = TlsFiles {
            listener: "console",
            cert: "tls.crt".into(),
            key: "tls.key".into(),
            client_ca: None,
            require_client_cert: false,
        };
        let contents = Contents {
            cert: certified.cert.pem().into_bytes(),
            key: certified.signing_key.serialize_pem().into_bytes(),
            client_ca: None,
        };
        files
            .build(&contents)
            .unwrap_or_else(|error| panic!("{error}"))
    }

    #[test]
    fn a_certificate_certifies_its_names_as_a_browser_reads_them() {
        let config = loaded(&["console.example.com", "*.ops.example.com", "10.0.0.7"]);
        let cases = [
            ("console.example.com", true),
            ("CONSOLE.example.com", true),
            ("idemd.ops.example.com", true),
            // A wildcard stands for one label, never none or two.
            ("ops.example.com", false),
            ("a.b.ops.example.com", false),
            ("10.0.0.7", true),
            ("10.0.0.8", false),
            ("example.com", false),
            ("console.example.com.attacker.example", false),
            ("attacker.example", false),
            ("localhost", false),
            ("127.0.0.1", false),
            ("", false),
        ];
        for (host, expected) in cases {
            assert_eq!(config.certifies(host), expected, "{host}");
        }
    }

    #[test]
    fn a_file_that_is_no_certificate_is_refused_naming_it() {
        let files = TlsFiles {
            listener: "console",
            cert: "console.crt".into(),
            key: "console.key".into(),
            client_ca: None,
            require_client_cert: false,
        };
        let contents = Contents {
            cert: b"not pem".to_vec(),
            key: b"not pem".to_vec(),
            client_ca: None,
        };
        let Err(error) = files.build(&contents) else {
            panic!("built from garbage");
        };
        assert!(error.starts_with("console.crt: no certificate"), "{error}");
    }
}
