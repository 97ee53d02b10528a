//! Admission: credentials are checked before a request body is read, bogus
//! tokens do not reach the database, lookups cannot take the pool, a
//! replica sheds what it cannot serve and a tenant cannot take the others'
//! share.

use std::sync::Arc;
use std::time::Duration;

use idemd::auth::AuthSettings;
use idemd::grpc::admission::AdmissionSettings;
use idemd::proto;
use idemd::service::WaiterLimits;
use tonic::codegen::Bytes;
use tonic::{Code, Status};

use crate::harness::{
    Backend, CountingStore, ServerConfig, TestServer, World, assert_status, authorized, claim_json,
    claim_once_admitted, create_tenant, fresh_uuid, millis, outcome_name, store_tests, test_limits,
};
use crate::transport::{answer_to, call_headers, message_prefix, raw_client};

/// A token of the right shape that no tenant has.
fn unknown_token() -> String {
    idemd::auth::generate_token().expect("a token")
}

async fn counted_server(
    backend: &Backend,
    lookup_time: Duration,
    auth: AuthSettings,
) -> (Arc<CountingStore>, TestServer, String) {
    let name = format!("tenant-{}", fresh_uuid());
    let token = create_tenant(backend.store().as_ref(), &name).await;
    let counting = CountingStore::new(backend.store(), lookup_time);
    let config = ServerConfig {
        auth,
        ..ServerConfig::default()
    };
    let server = TestServer::start_configured(counting.clone(), test_limits(), config).await;
    (counting, server, token)
}

async fn tokens_of_the_wrong_shape_never_reach_the_store(backend: Backend) {
    let (counting, server, token) =
        counted_server(&backend, Duration::ZERO, AuthSettings::default()).await;
    let mut client = server.client().await;
    let well_formed = unknown_token();
    let mut bogus: Vec<String> = (0..20).map(|index| format!("nope-{index}")).collect();
    bogus.extend([
        well_formed[..well_formed.len() - 1].to_owned(),
        format!("{well_formed}0"),
        well_formed.to_uppercase(),
        well_formed.replace("idem_", "idem-"),
        format!("idem_{}", "g".repeat(64)),
        token.replace("idem_", "IDEM_"),
    ]);
    for bogus in &bogus {
        let status = client
            .claim(authorized(bogus, claim_json("payments.charge", "k", "{}")))
            .await
            .expect_err("refused");
        assert_status(&status, Code::Unauthenticated, "INVALID_CREDENTIALS");
    }
    let status = client
        .claim(tonic::Request::new(claim_json(
            "payments.charge",
            "k",
            "{}",
        )))
        .await
        .expect_err("refused");
    assert_status(&status, Code::Unauthenticated, "MISSING_CREDENTIALS");
    assert_eq!(
        counting.authentications(),
        0,
        "no bogus token reached the store"
    );

    // The real token does, once, and is cached.
    for _ in 0..3 {
        client
            .claim(authorized(&token, claim_json("payments.charge", "k", "{}")))
            .await
            .expect("served");
    }
    assert_eq!(counting.authentications(), 1);
}

async fn an_unknown_token_is_looked_up_once_however_often_it_is_sent(backend: Backend) {
    let (counting, server, token) =
        counted_server(&backend, Duration::from_millis(20), AuthSettings::default()).await;
    let unknown = unknown_token();
    // Concurrent calls share the first one's lookup; later ones hit the
    // negative cache.
    let tokens = vec![unknown.clone(); 16];
    for status in refusals_of_concurrent_claims(&server, tokens).await {
        assert_status(&status, Code::Unauthenticated, "INVALID_CREDENTIALS");
    }
    let mut client = server.client().await;
    for _ in 0..16 {
        let status = client
            .claim(authorized(
                &unknown,
                claim_json("payments.charge", "k", "{}"),
            ))
            .await
            .expect_err("refused");
        assert_status(&status, Code::Unauthenticated, "INVALID_CREDENTIALS");
    }
    assert_eq!(counting.authentications(), 1);

    // The negative entry expires like a positive one does.
    let (counting, server, _) = counted_server(
        &backend,
        Duration::ZERO,
        AuthSettings {
            negative_cache_ttl: Duration::from_millis(50),
            ..AuthSettings::default()
        },
    )
    .await;
    let mut client = server.client().await;
    let refuse = async |client: &mut crate::harness::Client| {
        client
            .claim(authorized(
                &unknown,
                claim_json("payments.charge", "k", "{}"),
            ))
            .await
            .expect_err("refused")
    };
    refuse(&mut client).await;
    refuse(&mut client).await;
    assert_eq!(counting.authentications(), 1);
    tokio::time::sleep(Duration::from_millis(60)).await;
    refuse(&mut client).await;
    assert_eq!(counting.authentications(), 2);
    let claimed = client
        .claim(authorized(&token, claim_json("payments.charge", "k", "{}")))
        .await
        .expect("served")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");
}

/// Makes every call at once, each on a task and a connection of its own,
/// and returns their refusals.
async fn refusals_of_concurrent_claims(server: &TestServer, tokens: Vec<String>) -> Vec<Status> {
    let mut calls = tokio::task::JoinSet::new();
    for token in tokens {
        let mut client = server.client().await;
        calls.spawn(async move {
            client
                .claim(authorized(&token, claim_json("payments.charge", "k", "{}")))
                .await
                .expect_err("refused")
        });
    }
    calls.join_all().await
}

#[tokio::test]
async fn store_lookups_for_uncached_tokens_are_bounded_in_number() {
    let backend = Backend::sqlite().await;
    // Room for all of them to wait: this pins the bound on lookups in
    // flight, not the queue's (tests/it/bounds.rs).
    let auth = AuthSettings {
        lookup_concurrency: 3,
        lookup_queue: 24,
        lookup_queue_timeout: Duration::from_secs(10),
        ..AuthSettings::default()
    };
    let (counting, server, _) = counted_server(&backend, Duration::from_millis(30), auth).await;
    let tokens = (0..24).map(|_| unknown_token()).collect();
    for status in refusals_of_concurrent_claims(&server, tokens).await {
        assert_status(&status, Code::Unauthenticated, "INVALID_CREDENTIALS");
    }
    assert_eq!(counting.authentications(), 24);
    assert!(
        counting.most_in_flight() <= 3,
        "{} lookups ran at once",
        counting.most_in_flight()
    );
}

#[tokio::test]
async fn a_call_without_valid_credentials_is_refused_before_its_body_is_read() {
    let backend = Backend::sqlite().await;
    let (counting, server, _) =
        counted_server(&backend, Duration::ZERO, AuthSettings::default()).await;
    let sender = raw_client(server.addr).await;
    let limit = test_limits().max_request_bytes();

    // A legal length declared, a little of it sent, the stream left open:
    // the refusal does not wait for the rest.
    let mut data = message_prefix(limit - 1).to_vec();
    data.extend_from_slice(&[0_u8; 16 * 1024]);
    let status = answer_to(
        &sender,
        call_headers(server.addr, "Complete", None),
        Bytes::from(data),
        false,
    )
    .await;
    assert_status(&status, Code::Unauthenticated, "MISSING_CREDENTIALS");

    // Nothing of the body at all, with a bogus token.
    let status = answer_to(
        &sender,
        call_headers(server.addr, "Claim", Some("nope")),
        Bytes::new(),
        false,
    )
    .await;
    assert_status(&status, Code::Unauthenticated, "INVALID_CREDENTIALS");
    assert_eq!(counting.authentications(), 0);
}

// ---- load shedding and per-tenant concurrency ------------------------------

/// Claims `key` for `token` with a long lease, then starts `waiters` Claims
/// of the same request that wait on it (each Pending, holding its call), on
/// connections of their own. Aborting a task cancels its call.
async fn hold_calls(
    world: &World,
    token: &str,
    key: &str,
    waiters: usize,
) -> Vec<tokio::task::JoinHandle<()>> {
    let request = || claim_json("payments.charge", key, "{}");
    let held = world
        .client()
        .await
        .claim(authorized(
            token,
            proto::ClaimRequest {
                lease: millis(60_000),
                ..request()
            },
        ))
        .await
        .expect("claimed")
        .into_inner();
    assert_eq!(outcome_name(&held), "acquired");
    let mut handles = Vec::new();
    for _ in 0..waiters {
        let mut client = world.client().await;
        let waiting = authorized(
            token,
            proto::ClaimRequest {
                wait: millis(30_000),
                ..request()
            },
        );
        handles.push(tokio::spawn(async move {
            let _ = client.claim(waiting).await;
        }));
    }
    handles
}

/// Lookups by `token` until one is refused (the waiters are in flight by
/// then); its refusal.
async fn first_refusal(world: &World, token: &str) -> Status {
    let mut client = world.client().await;
    for _ in 0..1000 {
        let looked_up = client
            .lookup(authorized(
                token,
                proto::LookupRequest {
                    target: Some(proto::lookup_request::Target::Scope(proto::Scope {
                        operation: "payments.charge".into(),
                        key: "absent".into(),
                    })),
                    include_history: false,
                    ..Default::default()
                },
            ))
            .await;
        match looked_up {
            Err(status) if status.code() != Code::NotFound => return status,
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    panic!("calls past the limit were never refused");
}

fn retry_delay(status: &Status) -> Option<Duration> {
    use tonic_types::StatusExt;
    status.get_details_retry_info()?.retry_delay
}

async fn a_tenant_past_its_share_is_refused_while_another_is_served(backend: Backend) {
    let config = ServerConfig {
        admission: AdmissionSettings {
            max_in_flight_per_tenant: 3,
            ..AdmissionSettings::default()
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(backend, test_limits(), config).await;
    let waiters = hold_calls(&world, &world.tenant_a, "held", 3).await;

    let refused = first_refusal(&world, &world.tenant_a).await;
    assert_status(
        &refused,
        Code::ResourceExhausted,
        "TENANT_CONCURRENCY_LIMIT",
    );
    assert!(retry_delay(&refused).is_some(), "RetryInfo: {refused:?}");
    let claimed = world
        .client()
        .await
        .claim(authorized(
            &world.tenant_b,
            claim_json("payments.charge", "held", "{}"),
        ))
        .await
        .expect("the other tenant is served")
        .into_inner();
    assert_eq!(outcome_name(&claimed), "acquired");
    let rendered = world.server.application.service.metrics().render();
    assert!(
        rendered.contains("idemd_calls_refused_total{reason=\"TENANT_CONCURRENCY_LIMIT\"}"),
        "{rendered}"
    );

    // Cancelled calls give their share back.
    for waiter in &waiters {
        waiter.abort();
    }
    let mut client = world.client().await;
    claim_once_admitted(
        &mut client,
        &world.tenant_a,
        "after",
        (Code::ResourceExhausted, "TENANT_CONCURRENCY_LIMIT"),
        "the share",
    )
    .await;
}

#[tokio::test]
async fn a_replica_past_its_in_flight_limit_sheds_calls_with_retry_info() {
    let config = ServerConfig {
        admission: AdmissionSettings {
            max_in_flight: 3,
            ..AdmissionSettings::default()
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(Backend::sqlite().await, test_limits(), config).await;
    let waiters = hold_calls(&world, &world.tenant_a, "held", 3).await;

    // Another tenant's call is shed too: the budget is the replica's.
    let shed = first_refusal(&world, &world.tenant_b).await;
    assert_status(&shed, Code::Unavailable, "OVERLOADED");
    assert!(retry_delay(&shed).is_some(), "RetryInfo: {shed:?}");

    for waiter in &waiters {
        waiter.abort();
    }
    let mut client = world.client().await;
    for attempt in 0.. {
        let claimed = client
            .claim(authorized(
                &world.tenant_b,
                claim_json("payments.charge", "after", "{}"),
            ))
            .await;
        match claimed {
            Ok(_) => break,
            Err(status) => {
                assert_status(&status, Code::Unavailable, "OVERLOADED");
                assert!(attempt < 500, "the replica never took calls again");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

// ---- waiting Claims --------------------------------------------------------

/// A sample of the server's metrics (0 when the series does not exist yet).
fn sample(world: &World, series: &str) -> f64 {
    world
        .server
        .application
        .service
        .metrics()
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Until `count` Claims wait on the server.
async fn until_waiting(world: &World, count: usize) {
    for _ in 0..1000 {
        if sample(world, "idemd_waiting_claims ") == count as f64 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{count} Claims never waited");
}

/// A Claim of `key` by `token` that would wait up to the server's cap; it
/// must answer Pending without waiting (else the guard fails the test).
async fn answered_without_waiting(world: &World, token: &str, key: &str) {
    let mut client = world.client().await;
    let claim = client.claim(authorized(
        token,
        proto::ClaimRequest {
            wait: millis(60_000),
            ..claim_json("payments.charge", key, "{}")
        },
    ));
    let answer = tokio::time::timeout(Duration::from_secs(10), claim)
        .await
        .expect("answered at once, not after its wait")
        .expect("a claim")
        .into_inner();
    let Some(proto::claim_response::Outcome::Pending(pending)) = answer.outcome else {
        panic!("pending expected: {answer:?}");
    };
    assert!(pending.retry_after.is_some(), "{pending:?}");
}

async fn claims_past_the_tenants_waiter_cap_answer_pending_at_once(backend: Backend) {
    let config = ServerConfig {
        waiters: WaiterLimits {
            per_replica: 100,
            per_tenant: 2,
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(backend, test_limits(), config).await;
    let mut held = hold_calls(&world, &world.tenant_a, "held", 2).await;
    until_waiting(&world, 2).await;

    answered_without_waiting(&world, &world.tenant_a, "held").await;
    assert_eq!(sample(&world, "idemd_waits_refused_total "), 1.0);
    assert_eq!(sample(&world, "idemd_waiting_claims "), 2.0);

    // Another tenant still waits.
    held.extend(hold_calls(&world, &world.tenant_b, "held", 1).await);
    until_waiting(&world, 3).await;
    for waiter in held {
        waiter.abort();
    }
    until_waiting(&world, 0).await;
}

#[tokio::test]
async fn claims_past_the_replicas_waiter_cap_answer_pending_at_once() {
    let config = ServerConfig {
        waiters: WaiterLimits {
            per_replica: 2,
            per_tenant: 100,
        },
        ..ServerConfig::default()
    };
    let world = World::start_configured(Backend::sqlite().await, test_limits(), config).await;
    let held = hold_calls(&world, &world.tenant_a, "held", 2).await;
    until_waiting(&world, 2).await;

    // Tenant B holds an operation of its own; its waiter finds no place.
    let mut client = world.client().await;
    client
        .claim(authorized(
            &world.tenant_b,
            proto::ClaimRequest {
                lease: millis(60_000),
                ..claim_json("payments.charge", "held-b", "{}")
            },
        ))
        .await
        .expect("claimed");
    answered_without_waiting(&world, &world.tenant_b, "held-b").await;
    assert_eq!(sample(&world, "idemd_waits_refused_total "), 1.0);
    for waiter in held {
        waiter.abort();
    }
}

store_tests!(
    tokens_of_the_wrong_shape_never_reach_the_store,
    an_unknown_token_is_looked_up_once_however_often_it_is_sent,
    a_tenant_past_its_share_is_refused_while_another_is_served,
    claims_past_the_tenants_waiter_cap_answer_pending_at_once,
);
