//! The TLS files reloaded while the server runs: a new server certificate
//! reaches new connections while a call already in flight on an old one
//! finishes; a bad file keeps the identity in force; a new client CA bundle
//! admits its certificates, a new identity mapping its identities.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tonic::Code;

use super::pki::{self, Ca, ClientNames};
use super::{API, MtlsServer, claim};
use crate::harness::{Backend, Daemon, assert_status, authorized, claim_json, millis, store_tests};

/// The SHA-256 of the certificate the server presents to a new connection.
async fn served_certificate(addr: SocketAddr, server_ca: &Ca) -> [u8; 32] {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(server_ca.pem().as_bytes()).expect("CA pem"))
        .expect("CA");
    let config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("a name"), tcp)
        .await
        .expect("a handshake");
    let certificates = tls.get_ref().1.peer_certificates().expect("the server's");
    Sha256::digest(certificates[0].as_ref()).into()
}

/// Waits until the server's log holds `needle` `count` times.
async fn logged(server: &Daemon, needle: &str, count: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while server.log().matches(needle).count() < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never logged {needle:?} {count} times: {}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const RELOADED: &str = "tls files reloaded";
const KEPT: &str = "tls files changed but cannot be used";

async fn tls_files_are_reloaded_under_live_connections(backend: Backend) {
    let mtls = MtlsServer::start(
        backend,
        &[("IDEMD_TLS_RELOAD_INTERVAL", "100ms".to_owned())],
    )
    .await;
    let addr = mtls.server.addr;
    assert_eq!(
        served_certificate(addr, &mtls.server_ca).await,
        mtls.serving_sha256
    );

    // A connection opened before the rotation, with a call in flight on it
    // across the rotation: a Claim that waits for a held operation.
    let old = mtls.client(None).await;
    let token = mtls.token.clone();
    let held = old
        .clone()
        .claim(authorized(
            &token,
            claim_json("payments.charge", "held", "{}"),
        ))
        .await
        .expect("the first claim")
        .into_inner();
    assert_eq!(crate::harness::outcome_name(&held), "acquired");
    let mut waiting = claim_json("payments.charge", "held", "{}");
    waiting.wait = millis(5_000);
    let in_flight = tokio::spawn({
        let mut old = old.clone();
        let token = token.clone();
        async move { old.claim(authorized(&token, waiting)).await }
    });

    let rotated = mtls.server_ca.server();
    pki::write(&mtls.directory, "tls.key", &rotated.key);
    pki::write(&mtls.directory, "tls.crt", &rotated.cert);
    logged(&mtls.server, RELOADED, 1).await;
    assert_eq!(
        served_certificate(addr, &mtls.server_ca).await,
        rotated.sha256(),
        "a new connection gets the new certificate"
    );
    let answered = in_flight
        .await
        .expect("task")
        .expect("the call in flight across the rotation finishes")
        .into_inner();
    assert_eq!(crate::harness::outcome_name(&answered), "pending");
    old.clone()
        .claim(authorized(
            &token,
            claim_json("payments.charge", "after", "{}"),
        ))
        .await
        .expect("the old connection serves on");

    // A bad certificate file: the identity in force stays.
    pki::write(&mtls.directory, "tls.crt", "not a certificate\n");
    logged(&mtls.server, KEPT, 1).await;
    assert_eq!(
        served_certificate(addr, &mtls.server_ca).await,
        rotated.sha256(),
        "a bad file keeps the identity in force"
    );
    pki::write(&mtls.directory, "tls.crt", &rotated.cert);
    logged(&mtls.server, RELOADED, 2).await;

    // A new client CA bundle: certificates of the added CA are trusted from
    // the next connection on.
    let added = Ca::new("added client CA");
    let newcomer = added.client(ClientNames {
        uri: Some(API),
        ..ClientNames::default()
    });
    let refused = mtls
        .client(Some(&newcomer))
        .await
        .claim(claim("newcomer"))
        .await
        .expect_err("not trusted yet");
    assert_status(&refused, Code::Unauthenticated, "CERTIFICATE_UNTRUSTED");
    let bundle = format!("{}{}", mtls.client_ca.pem(), added.pem());
    pki::write(&mtls.directory, "client-ca.crt", &bundle);
    logged(&mtls.server, RELOADED, 3).await;
    mtls.client(Some(&newcomer))
        .await
        .claim(claim("newcomer"))
        .await
        .expect("trusted after the bundle's reload");

    // A new identity in the mapping: mapped from the next connection on.
    const BILLING: &str = "spiffe://prod.example/ns/billing/sa/api";
    let billing = mtls.client_certificate(BILLING);
    let refused = mtls
        .client(Some(&billing))
        .await
        .claim(claim("billing"))
        .await
        .expect_err("not mapped yet");
    assert_status(&refused, Code::Unauthenticated, "CERTIFICATE_UNMAPPED");
    let mapping = format!(
        "{}  - uri: {BILLING}\n    tenant: payments\n    scopes: [operations]\n",
        super::IDENTITIES
    );
    pki::write(&mtls.directory, "identities.yaml", &mapping);
    logged(&mtls.server, RELOADED, 4).await;
    mtls.client(Some(&billing))
        .await
        .claim(claim("billing"))
        .await
        .expect("mapped after the identities' reload");
}

store_tests!(tls_files_are_reloaded_under_live_connections);
