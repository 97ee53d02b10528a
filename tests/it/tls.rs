//! TLS on the API, and the plaintext health port that Kubernetes' gRPC
//! probes need (they speak neither TLS nor credentials).

use idemd::proto::idempotency_service_client::IdempotencyServiceClient;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::harness::{
    Backend, authorized, claim_json, free_port, fresh_uuid, outcome_name, store_tests,
};

async fn the_api_is_served_over_tls_and_probes_use_the_plaintext_health_port(backend: Backend) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .expect("a self-signed certificate");
    let directory = std::env::temp_dir().join(format!("idemd-tls-{}", fresh_uuid()));
    std::fs::create_dir_all(&directory).expect("temp dir");
    let cert_path = directory.join("tls.crt");
    let key_path = directory.join("tls.key");
    std::fs::write(&cert_path, certified.cert.pem()).expect("write cert");
    std::fs::write(&key_path, certified.signing_key.serialize_pem()).expect("write key");
    let data = backend.into_process_data().await;
    let token = data.create_tenant("tls");
    let health_port = free_port();
    let server = data
        .serve_with(
            &[],
            &[
                ("IDEMD_TLS_CERT", cert_path.display().to_string()),
                ("IDEMD_TLS_KEY", key_path.display().to_string()),
                ("IDEMD_HEALTH_LISTEN", format!("127.0.0.1:{health_port}")),
                ("IDEMD_HANDSHAKE_TIMEOUT", "2s".to_owned()),
            ],
        )
        .await;

    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(certified.cert.pem()))
        .domain_name("localhost");
    let channel = Channel::from_shared(format!("https://{}", server.addr))
        .expect("uri")
        .tls_config(tls)
        .expect("tls config")
        .connect()
        .await
        .expect("a TLS connection");
    let mut client = IdempotencyServiceClient::new(channel);
    let claimed = client
        .claim(authorized(
            &token,
            claim_json("payments.charge", "tls-1", "{}"),
        ))
        .await
        .expect("a claim over TLS")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");

    // The Connect JSON mapping over TLS with HTTP/1.1 only (ALPN http/1.1).
    let port = server.addr.port();
    let mut curl = std::process::Command::new("curl");
    curl.args(["--silent", "--http1.1", "--cacert"])
        .arg(&cert_path)
        .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
        .args(["--header", "Content-Type: application/json"])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--write-out", "\n%{http_code} %{http_version}", "--data"])
        .arg(r#"{"scope":{"operation":"payments.charge","key":"tls-2"},"jsonPayload":"{}"}"#)
        .arg(format!(
            "https://localhost:{port}/idem.v1.IdempotencyService/Claim"
        ));
    let output = tokio::task::spawn_blocking(move || curl.output().expect("curl runs"))
        .await
        .expect("curl task");
    let answer = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(answer.ends_with("\n200 1.1"), "{answer}");
    assert!(answer.contains(r#""acquired""#), "{answer}");

    // Plaintext to the TLS port gets no answer from the API.
    let plaintext = async {
        let channel = Channel::from_shared(format!("http://{}", server.addr))
            .expect("uri")
            .connect()
            .await?;
        IdempotencyServiceClient::new(channel)
            .claim(authorized(
                &token,
                claim_json("payments.charge", "tls-2", "{}"),
            ))
            .await
            .map_err(|status| Box::new(status) as Box<dyn std::error::Error + Send + Sync>)?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    };
    assert!(
        plaintext.await.is_err(),
        "the API must not answer plaintext when TLS is on"
    );

    let health_channel = Channel::from_shared(format!("http://127.0.0.1:{health_port}"))
        .expect("uri")
        .connect()
        .await
        .expect("the plaintext health port");
    let mut health = HealthClient::new(health_channel);
    for service in ["", "idem.v1.IdempotencyService"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health answers without TLS or credentials")
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "service {service:?}");
    }

    // A peer that never starts its TLS handshake is closed after the
    // handshake timeout, not held.
    let mut silent = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let mut buffer = [0_u8; 16];
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        tokio::io::AsyncReadExt::read(&mut silent, &mut buffer),
    )
    .await
    .expect("the server closes a connection without a handshake");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    let _ = std::fs::remove_dir_all(&directory);
}

store_tests!(the_api_is_served_over_tls_and_probes_use_the_plaintext_health_port);

/// Without TLS files and without the opt-in, `serve` refuses to start, in
/// one line that names both ways out; with the opt-in it serves and warns.
#[tokio::test]
async fn plaintext_is_refused_unless_asked_for() {
    let data = crate::harness::ProcessData::embedded();
    let output = data
        .command(&["serve", "--listen", "127.0.0.1:0"])
        .env_remove("IDEMD_INSECURE_PLAINTEXT")
        .output()
        .expect("idemd runs");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let refusal = stderr
        .lines()
        .find(|line| line.starts_with("idemd: "))
        .unwrap_or_else(|| panic!("no refusal line: {stderr}"));
    assert!(
        refusal.contains("refusing to serve the API in plaintext"),
        "{refusal}"
    );
    assert!(refusal.contains("--tls-cert"), "{refusal}");
    assert!(refusal.contains("--insecure-plaintext"), "{refusal}");

    // Asked for: it serves, and says at start-up that it is plaintext.
    let server = data.serve(&[]).await;
    let log = server.log();
    assert!(log.contains("serving the API in plaintext"), "{log}");
    server.kill();
}
