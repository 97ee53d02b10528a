//! Mutual TLS with workload identities, on a real server over real TLS:
//! client certificates mapped to tenants and scopes (SPIFFE URIs, exact
//! and wildcard, and DNS names), each refusal with its ErrorInfo, how a
//! certificate and a bearer token combine, and the TLS files reloaded under
//! live connections (`reload.rs`).

pub mod pki;
mod reload;

use std::path::PathBuf;

use idemd::proto;
use idemd::proto::idempotency_service_client::IdempotencyServiceClient;
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

use crate::harness::{
    Backend, Daemon, ProcessData, assert_status, authorized, claim_json, free_port, fresh_uuid,
    outcome_name, store_tests,
};
use pki::{Ca, ClientNames, Pair};

const API: &str = "spiffe://prod.example/ns/payments/sa/api";
const RECONCILER: &str = "spiffe://prod.example/ns/payments/sa/reconciler";

/// The mapping most tests use: the API workload may run operations, every
/// other service account of the namespace may reconcile, a DNS-named job
/// may do both, and one identity names a tenant that does not exist.
const IDENTITIES: &str = "
identities:
  - uri: spiffe://prod.example/ns/payments/sa/api
    tenant: payments
    scopes: [operations]
  - uri: spiffe://prod.example/ns/payments/sa/*
    tenant: payments
    scopes: [reconcile]
  - dns: batch.payments.internal
    tenant: payments
    scopes: [operations, reconcile]
  - uri: spiffe://prod.example/ns/ghost/sa/api
    tenant: ghost
    scopes: [operations]
";

/// A server with TLS and client CAs, and what its tests need around it.
pub struct MtlsServer {
    pub server: Daemon,
    pub directory: PathBuf,
    /// Issues the server's certificates.
    pub server_ca: Ca,
    /// The client CA the server trusts.
    pub client_ca: Ca,
    /// SHA-256 of the server certificate it started with.
    pub serving_sha256: [u8; 32],
    /// The `payments` tenant's first token (operations and reconcile).
    pub token: String,
    _data: ProcessData,
}

impl MtlsServer {
    pub async fn start(backend: Backend, extra_env: &[(&str, String)]) -> Self {
        let directory = std::env::temp_dir().join(format!("idemd-mtls-{}", fresh_uuid()));
        std::fs::create_dir_all(&directory).expect("temp dir");
        let server_ca = Ca::new("server CA");
        let client_ca = Ca::new("client CA");
        let serving = server_ca.server();
        let cert = pki::write(&directory, "tls.crt", &serving.cert);
        let key = pki::write(&directory, "tls.key", &serving.key);
        let bundle = pki::write(&directory, "client-ca.crt", &client_ca.pem());
        let identities = pki::write(&directory, "identities.yaml", IDENTITIES);
        let data = backend.into_process_data().await;
        let token = data.create_tenant("payments");
        let mut env = vec![
            ("IDEMD_TLS_CERT", cert.display().to_string()),
            ("IDEMD_TLS_KEY", key.display().to_string()),
            ("IDEMD_TLS_CLIENT_CA", bundle.display().to_string()),
            ("IDEMD_TLS_IDENTITIES", identities.display().to_string()),
            // Readiness is probed here: the API port speaks only TLS.
            ("IDEMD_HEALTH_LISTEN", format!("127.0.0.1:{}", free_port())),
            // No plaintext opt-in: TLS is on because the files are given.
            ("IDEMD_INSECURE_PLAINTEXT", "false".to_owned()),
        ];
        env.extend(extra_env.iter().cloned());
        let server = data.serve_with(&[], &env).await;
        Self {
            server,
            directory,
            server_ca,
            client_ca,
            serving_sha256: serving.sha256(),
            token,
            _data: data,
        }
    }

    /// A client on a new connection, trusting the server CA and presenting
    /// `certificate` when given.
    pub async fn client(&self, certificate: Option<&Pair>) -> IdempotencyServiceClient<Channel> {
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(self.server_ca.pem()))
            .domain_name("localhost");
        if let Some(certificate) = certificate {
            tls = tls.identity(certificate.identity());
        }
        let channel = Channel::from_shared(format!("https://{}", self.server.addr))
            .expect("uri")
            .tls_config(tls)
            .expect("tls config")
            .connect()
            .await
            .expect("a TLS connection (refusals come per call)");
        IdempotencyServiceClient::new(channel)
    }

    pub fn client_certificate(&self, uri: &str) -> Pair {
        self.client_ca.client(ClientNames {
            uri: Some(uri),
            ..ClientNames::default()
        })
    }
}

impl Drop for MtlsServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

fn claim(key: &str) -> tonic::Request<proto::ClaimRequest> {
    tonic::Request::new(claim_json("payments.charge", key, "{}"))
}

async fn client_certificates_map_to_tenants_and_scopes(backend: Backend) {
    let mtls = MtlsServer::start(backend, &[]).await;

    // The exact mapping: the API workload claims, as tenant `payments`.
    let api = mtls.client_certificate(API);
    let mut as_api = mtls.client(Some(&api)).await;
    let claimed = as_api
        .claim(claim("mtls-1"))
        .await
        .expect("a mapped certificate authenticates")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");
    // The same tenant as its token: the token's Claim meets the same
    // operation, held by the certificate's attempt.
    let mut as_token = mtls.client(None).await;
    let again = as_token
        .claim(authorized(
            &mtls.token,
            claim_json("payments.charge", "mtls-1", "{}"),
        ))
        .await
        .expect("the token's claim")
        .into_inner();
    assert_ne!(outcome_name(&again), "acquired", "{again:?}");

    // The wildcard: any other service account of the namespace reconciles,
    // and the scopes of its mapping are enforced.
    let reconciler = mtls.client_certificate(RECONCILER);
    let mut as_reconciler = mtls.client(Some(&reconciler)).await;
    as_reconciler
        .list_unresolved(tonic::Request::new(proto::ListUnresolvedRequest::default()))
        .await
        .expect("reconcile is the wildcard's scope");
    let refused = as_reconciler
        .claim(claim("mtls-2"))
        .await
        .expect_err("operations is not");
    assert_status(&refused, Code::PermissionDenied, "MISSING_SCOPE");

    // A DNS SAN.
    let batch = mtls.client_ca.client(ClientNames {
        dns: Some("batch.payments.internal"),
        ..ClientNames::default()
    });
    let claimed = mtls
        .client(Some(&batch))
        .await
        .claim(claim("mtls-3"))
        .await
        .expect("a mapped DNS name authenticates")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");

    // The Connect JSON mapping reads the same verdict.
    let port = mtls.server.addr.port();
    let files = |name: &str, contents: &str| pki::write(&mtls.directory, name, contents);
    let curl = |cert: &Pair, name: &str, key: &str| {
        let cert_path = files(&format!("{name}.crt"), &cert.cert);
        let key_path = files(&format!("{name}.key"), &cert.key);
        let ca_path = files("server-ca.crt", &mtls.server_ca.pem());
        let mut curl = std::process::Command::new("curl");
        curl.args(["--silent", "--http1.1", "--cacert"])
            .arg(ca_path)
            .arg("--cert")
            .arg(cert_path)
            .arg("--key")
            .arg(key_path)
            .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
            .args(["--header", "Content-Type: application/json"])
            .args(["--write-out", "\n%{http_code}", "--data"])
            .arg(format!(
                r#"{{"scope":{{"operation":"payments.charge","key":"{key}"}},"jsonPayload":"{{}}"}}"#
            ))
            .arg(format!(
                "https://localhost:{port}/idem.v1.IdempotencyService/Claim"
            ));
        curl
    };
    for (certificate, name, key, expected) in [
        (&api, "api", "mtls-json-1", "200"),
        (&reconciler, "reconciler", "mtls-json-2", "403"),
    ] {
        let mut command = curl(certificate, name, key);
        let output = tokio::task::spawn_blocking(move || command.output().expect("curl runs"))
            .await
            .expect("curl task");
        let answer = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(answer.ends_with(&format!("\n{expected}")), "{answer}");
    }
}

async fn each_refused_certificate_says_why(backend: Backend) {
    let mtls = MtlsServer::start(backend, &[]).await;
    let other_ca = Ca::new("another CA");
    let cases = [
        (
            other_ca.client(ClientNames {
                uri: Some(API),
                ..ClientNames::default()
            }),
            "CERTIFICATE_UNTRUSTED",
        ),
        (
            mtls.client_ca.client(ClientNames {
                uri: Some(API),
                expired: true,
                ..ClientNames::default()
            }),
            "CERTIFICATE_EXPIRED",
        ),
        (
            // Deeper than the wildcard's one segment.
            mtls.client_certificate("spiffe://prod.example/ns/payments/sa/api/extra"),
            "CERTIFICATE_UNMAPPED",
        ),
        (
            mtls.client_certificate("spiffe://prod.example/ns/billing/sa/api"),
            "CERTIFICATE_UNMAPPED",
        ),
        (
            // Mapped, to a tenant that does not exist.
            mtls.client_certificate("spiffe://prod.example/ns/ghost/sa/api"),
            "CERTIFICATE_UNMAPPED",
        ),
    ];
    for (certificate, reason) in &cases {
        let mut client = mtls.client(Some(certificate)).await;
        let refused = client
            .claim(claim("refused"))
            .await
            .expect_err("a refused certificate");
        assert_status(&refused, Code::Unauthenticated, reason);
        // A valid token does not make up for a bad certificate.
        let refused = client
            .claim(authorized(
                &mtls.token,
                claim_json("payments.charge", "refused", "{}"),
            ))
            .await
            .expect_err("a refused certificate, whatever the token");
        assert_status(&refused, Code::Unauthenticated, reason);
    }

    // No certificate: the token decides, and without one nothing does.
    let mut anonymous = mtls.client(None).await;
    let refused = anonymous
        .claim(claim("refused"))
        .await
        .expect_err("neither certificate nor token");
    assert_status(&refused, Code::Unauthenticated, "MISSING_CREDENTIALS");
    let claimed = anonymous
        .claim(authorized(
            &mtls.token,
            claim_json("payments.charge", "token-only", "{}"),
        ))
        .await
        .expect("a bearer token works without a certificate")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");
    // Nothing was written by the refused calls.
    let replay = anonymous
        .claim(authorized(
            &mtls.token,
            claim_json("payments.charge", "refused", "{}"),
        ))
        .await
        .expect("the token claims the refused key")
        .into_inner();
    assert_eq!(outcome_name(&replay), "acquired");
}

async fn a_valid_token_wins_over_a_valid_certificate(backend: Backend) {
    let mtls = MtlsServer::start(backend, &[]).await;
    // The reconciler's certificate may not Claim; its token (operations +
    // reconcile) may: with both, the token decides.
    let reconciler = mtls.client_certificate(RECONCILER);
    let mut client = mtls.client(Some(&reconciler)).await;
    let claimed = client
        .claim(authorized(
            &mtls.token,
            claim_json("payments.charge", "both-1", "{}"),
        ))
        .await
        .expect("the token's scopes, not the certificate's")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");
    // And a bad token is not rescued by a good certificate.
    let bogus = format!("idem_{}", "0".repeat(64));
    let api = mtls.client_certificate(API);
    let refused = mtls
        .client(Some(&api))
        .await
        .claim(authorized(
            &bogus,
            claim_json("payments.charge", "both-2", "{}"),
        ))
        .await
        .expect_err("the token decides, and it is unknown");
    assert_status(&refused, Code::Unauthenticated, "INVALID_CREDENTIALS");
}

async fn a_required_certificate_refuses_token_only_calls(backend: Backend) {
    let mtls = MtlsServer::start(
        backend,
        &[("IDEMD_TLS_REQUIRE_CLIENT_CERT", "true".to_owned())],
    )
    .await;
    let mut anonymous = mtls.client(None).await;
    let refused = anonymous
        .claim(authorized(
            &mtls.token,
            claim_json("payments.charge", "k", "{}"),
        ))
        .await
        .expect_err("a certificate is required");
    assert_status(&refused, Code::Unauthenticated, "CERTIFICATE_REQUIRED");
    let api = mtls.client_certificate(API);
    let claimed = mtls
        .client(Some(&api))
        .await
        .claim(claim("k"))
        .await
        .expect("with one")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");
}

/// `idemd ops` over mutual TLS with a client certificate and no token: the
/// certificate is the credential, with the scopes its mapping grants.
async fn ops_commands_take_a_client_certificate_as_their_credential(backend: Backend) {
    let mtls = MtlsServer::start(backend, &[]).await;
    let server_ca = pki::write(&mtls.directory, "ops-server-ca.crt", &mtls.server_ca.pem());
    let ops = |certificate: Option<&Pair>, name: &str| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_idemd"));
        command
            .args(["ops", "unresolved", "-o", "json"])
            .args([
                "--addr",
                &format!("https://localhost:{}", mtls.server.addr.port()),
            ])
            .args(["--ca-cert", &server_ca.display().to_string()])
            .env_remove("IDEMD_TOKEN");
        if let Some(certificate) = certificate {
            let cert = pki::write(&mtls.directory, &format!("{name}.crt"), &certificate.cert);
            let key = pki::write(&mtls.directory, &format!("{name}.key"), &certificate.key);
            command
                .args(["--client-cert", &cert.display().to_string()])
                .args(["--client-key", &key.display().to_string()]);
        }
        command.output().expect("idemd runs")
    };

    // A reconciler's certificate lists the tenant's unresolved operations.
    let reconciler = ops(Some(&mtls.client_certificate(RECONCILER)), "reconciler");
    let stderr = String::from_utf8_lossy(&reconciler.stderr);
    assert_eq!(reconciler.status.code(), Some(0), "{stderr}");
    let listed: serde_json::Value =
        serde_json::from_slice(&reconciler.stdout).expect("a JSON document");
    assert!(listed.is_object(), "{listed}");

    // The API workload's certificate holds only `operations`: refused, by the server.
    let api = ops(Some(&mtls.client_certificate(API)), "api");
    let stderr = String::from_utf8_lossy(&api.stderr);
    assert_eq!(api.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("MISSING_SCOPE"), "{stderr}");

    // Neither a token nor a certificate: refused before any connection.
    let nothing = ops(None, "none");
    let stderr = String::from_utf8_lossy(&nothing.stderr);
    assert_eq!(nothing.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--client-cert"), "{stderr}");
}

store_tests!(
    client_certificates_map_to_tenants_and_scopes,
    each_refused_certificate_says_why,
    a_valid_token_wins_over_a_valid_certificate,
    a_required_certificate_refuses_token_only_calls,
    ops_commands_take_a_client_certificate_as_their_credential,
);
