//! Admission: credentials are checked before a request body is read, bogus
//! tokens do not reach the database, and lookups cannot take the pool.

use std::sync::Arc;
use std::time::Duration;

use idemd::auth::AuthSettings;
use tonic::codegen::Bytes;
use tonic::{Code, Status};

use crate::harness::{
    Backend, CountingStore, ServerConfig, TestServer, assert_status, authorized, claim_json,
    create_tenant, outcome_name, store_tests, test_limits,
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
    let name = format!("tenant-{}", uuid::Uuid::now_v7());
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
    let auth = AuthSettings {
        lookup_concurrency: 3,
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

store_tests!(
    tokens_of_the_wrong_shape_never_reach_the_store,
    an_unknown_token_is_looked_up_once_however_often_it_is_sent,
);
