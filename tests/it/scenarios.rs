//! The six cases of the sequential model, through the gRPC API.

use crate::harness::*;

const CHARGE: &str = "payments.charge";
const BODY: &str = r#"{"amount":1000,"currency":"EUR"}"#;

async fn response_lost_before_commit_executes_once_without_replay(backend: Backend) {
    let world = World::start(backend).await;
    let provider = Provider::default();
    let mut client = world.client().await;
    world.server.faults.arm("Claim", Fault::LoseRequest);

    let first = attempt(
        &mut client,
        &world.tenant_a,
        claim_json(CHARGE, "k1", BODY),
        &provider,
    )
    .await;
    let second = attempt(
        &mut client,
        &world.tenant_a,
        claim_json(CHARGE, "k1", BODY),
        &provider,
    )
    .await;

    assert_eq!((first, second), (Attempt::Unavailable, Attempt::Executed));
    assert_eq!(provider.effects(), 1);
}

async fn response_lost_after_commit_is_replayed_not_reexecuted(backend: Backend) {
    let world = World::start(backend).await;
    let provider = Provider::default();
    let mut client = world.client().await;
    world.server.faults.arm("Complete", Fault::LoseReply);

    let first = attempt(
        &mut client,
        &world.tenant_a,
        claim_json(CHARGE, "k1", BODY),
        &provider,
    )
    .await;
    let second = attempt(
        &mut client,
        &world.tenant_a,
        claim_json(CHARGE, "k1", BODY),
        &provider,
    )
    .await;

    assert_eq!((first, second), (Attempt::Unavailable, Attempt::Replayed));
    assert_eq!(provider.effects(), 1);
}

async fn same_request_delivered_three_times_executes_once(backend: Backend) {
    let world = World::start(backend).await;
    let provider = Provider::default();
    let mut client = world.client().await;

    let mut attempts = Vec::new();
    for _ in 0..3 {
        attempts.push(
            attempt(
                &mut client,
                &world.tenant_a,
                claim_json(CHARGE, "k1", BODY),
                &provider,
            )
            .await,
        );
    }

    assert_eq!(
        attempts,
        [Attempt::Executed, Attempt::Replayed, Attempt::Replayed]
    );
    assert_eq!(provider.effects(), 1);
}

async fn same_key_with_changed_payload_is_a_conflict(backend: Backend) {
    let world = World::start(backend).await;
    let provider = Provider::default();
    let mut client = world.client().await;

    let first = attempt(
        &mut client,
        &world.tenant_a,
        claim_json(CHARGE, "k1", BODY),
        &provider,
    )
    .await;
    let changed = r#"{"amount":2000,"currency":"EUR"}"#;
    let second = attempt(
        &mut client,
        &world.tenant_a,
        claim_json(CHARGE, "k1", changed),
        &provider,
    )
    .await;

    assert_eq!((first, second), (Attempt::Executed, Attempt::Conflict));
    assert_eq!(provider.effects(), 1);
}

async fn same_key_under_two_tenants_executes_twice(backend: Backend) {
    let world = World::start(backend).await;
    let provider = Provider::default();
    let mut client = world.client().await;

    let first = attempt(
        &mut client,
        &world.tenant_a,
        claim_json(CHARGE, "k1", BODY),
        &provider,
    )
    .await;
    let second = attempt(
        &mut client,
        &world.tenant_b,
        claim_json(CHARGE, "k1", BODY),
        &provider,
    )
    .await;

    assert_eq!((first, second), (Attempt::Executed, Attempt::Executed));
    assert_eq!(provider.effects(), 2);
}

async fn a_retry_with_a_new_key_executes_twice(backend: Backend) {
    let world = World::start(backend).await;
    let provider = Provider::default();
    let mut client = world.client().await;

    let first = attempt(
        &mut client,
        &world.tenant_a,
        claim_json(CHARGE, "k1", BODY),
        &provider,
    )
    .await;
    let second = attempt(
        &mut client,
        &world.tenant_a,
        claim_json(CHARGE, "k2", BODY),
        &provider,
    )
    .await;

    assert_eq!((first, second), (Attempt::Executed, Attempt::Executed));
    assert_eq!(provider.effects(), 2);
}

async fn the_replay_carries_the_stored_result_byte_for_byte(backend: Backend) {
    use idemd::proto::claim_response::Outcome;
    use idemd::proto::completed::Outcome as Stored;
    let world = World::start(backend).await;
    let provider = Provider::default();
    let mut client = world.client().await;
    attempt(
        &mut client,
        &world.tenant_a,
        claim_json(CHARGE, "k1", BODY),
        &provider,
    )
    .await;

    let replay = client
        .claim(authorized(&world.tenant_a, claim_json(CHARGE, "k1", BODY)))
        .await
        .expect("claim")
        .into_inner();

    let Some(Outcome::Completed(completed)) = replay.outcome else {
        panic!("expected a replay, got {replay:?}");
    };
    let Some(Stored::Result(stored)) = completed.outcome else {
        panic!("expected a stored result");
    };
    assert_eq!(stored.body, br#"{"charge":1}"#);
    assert_eq!(stored.content_type, "application/json");
    assert_eq!(
        stored.metadata.get("provider").map(String::as_str),
        Some("test")
    );
    assert_eq!(completed.attempts, 1);
}

store_tests!(
    response_lost_before_commit_executes_once_without_replay,
    response_lost_after_commit_is_replayed_not_reexecuted,
    same_request_delivered_three_times_executes_once,
    same_key_with_changed_payload_is_a_conflict,
    same_key_under_two_tenants_executes_twice,
    a_retry_with_a_new_key_executes_twice,
    the_replay_carries_the_stored_result_byte_for_byte,
);
