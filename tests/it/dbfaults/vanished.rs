//! A database that vanishes silently behind a freezing proxy, and comes back.

use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use tonic::Code;

use crate::harness::*;

use super::complete;

/// The readiness of `idem.v1.IdempotencyService` on `addr`, as a probe sees it.
async fn readiness(addr: std::net::SocketAddr) -> Option<i32> {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .ok()?;
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: "idem.v1.IdempotencyService".into(),
        })
        .await
        .ok()
        .map(|answer| answer.into_inner().status)
}

/// Polls until readiness is `wanted`; panics after a generous deadline.
async fn await_readiness(daemon: &Daemon, wanted: tonic_health::ServingStatus) {
    use tonic_health::pb::health_check_response::ServingStatus;
    let wanted = match wanted {
        tonic_health::ServingStatus::Serving => ServingStatus::Serving,
        _ => ServingStatus::NotServing,
    } as i32;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while readiness(daemon.addr).await != Some(wanted) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "readiness never became {wanted}: {}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// DATABASE_URL naming the test's database at `addr`.
fn database_url_at(connect: &PgConnectOptions, addr: std::net::SocketAddr) -> String {
    format!(
        "postgres://{}@{addr}/{}",
        connect.get_username(),
        connect.get_database().expect("a test database")
    )
}

/// The database vanishes silently (packets dropped, nothing closed): calls
/// answer UNAVAILABLE within the call bound and readiness reports
/// NOT_SERVING; once the network works again, calls succeed and readiness is
/// SERVING, without a restart.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_silently_vanished_database_is_unavailable_and_recovered_from_without_a_restart(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let backend = Backend::postgres(connect.clone()).await;
    let token = create_tenant(backend.store().as_ref(), "tenant-a").await;
    let data = backend.into_process_data().await;
    let upstream =
        std::net::ToSocketAddrs::to_socket_addrs(&(connect.get_host(), connect.get_port()))
            .expect("the test database's address")
            .next()
            .expect("an address");
    let proxy = FrozenPath::start(upstream).await;
    let daemon = data
        .serve_with(
            &[],
            &[
                ("DATABASE_URL", database_url_at(&connect, proxy.addr)),
                ("IDEMD_READINESS_INTERVAL", "100ms".into()),
                ("IDEMD_DB_CALL_TIMEOUT", "1s".into()),
                ("IDEMD_DB_ACQUIRE_TIMEOUT", "500ms".into()),
                ("IDEMD_AUTH_CACHE_TTL", "0s".into()),
            ],
        )
        .await;
    let mut client = daemon.client().await;
    let (operation_id, fence) = acquire(&mut client, &token, "before").await;

    proxy.freeze();
    for key in ["during-1", "during-2"] {
        let status = tokio::time::timeout(
            Duration::from_secs(30),
            client.claim(authorized(&token, claim_json("payments.charge", key, "{}"))),
        )
        .await
        .expect("answered within the call bound")
        .expect_err("the database is unreachable");
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    }
    await_readiness(&daemon, tonic_health::ServingStatus::NotServing).await;

    proxy.thaw();
    await_readiness(&daemon, tonic_health::ServingStatus::Serving).await;
    // Connections broken by the outage may fail a call or two first.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match client
            .complete(authorized(&token, complete(&operation_id, fence)))
            .await
        {
            Ok(_) => break,
            Err(status) => {
                assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                assert!(tokio::time::Instant::now() < deadline, "{}", daemon.log());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    acquire(&mut client, &token, "after").await;
}
