//! `on_failed: new_attempt` (issue 20 item 5) on both stores, through the
//! API: a Claim of a FAILED operation whose policy opted in executes again
//! (counted at the provider), exactly once however many Claims race for it;
//! an operation without the opt-in, or past its operation deadline, replays
//! the failure; a replay this replica answered (and could have cached) never
//! hides the new attempt; GetPolicy and Lookup show the stored choice.

use std::sync::Arc;
use std::time::Duration;

use idemd::domain::OnFailed;
use idemd::domain::policy::{OperationPattern, OperationPolicy, Policies};
use idemd::proto;
use idemd::proto::claim_response::Outcome;
use tokio::sync::Barrier;

use crate::harness::*;

store_tests!(
    an_opted_in_failure_executes_again_and_then_replays_its_success,
    an_operation_without_the_opt_in_replays_its_failure,
    a_replayed_failure_never_hides_the_new_attempt,
    concurrent_claims_of_an_opted_in_failure_start_one_attempt,
    past_the_operation_deadline_the_failure_is_replayed,
);

const RETRIED: &str = "payments.charge";
const NOT_RETRIED: &str = "emails.send";
const CONCURRENT_CLAIMS: usize = 16;

/// `payments.*` opts in; every other operation keeps the replay.
async fn world(backend: Backend) -> World {
    let limits = test_limits();
    let mut payments =
        OperationPolicy::new(OperationPattern::parse("payments.*").expect("a pattern"));
    payments.on_failed = OnFailed::NewAttempt;
    let policies = Policies::new(vec![payments], &limits).expect("a valid policy");
    let config = ServerConfig {
        policies,
        ..ServerConfig::default()
    };
    World::start_configured(backend, limits, config).await
}

fn claim(operation: &str, key: &str, token: &[u8]) -> proto::ClaimRequest {
    proto::ClaimRequest {
        claim_token: token.to_vec(),
        ..claim_json(operation, key, r#"{"amount":100}"#)
    }
}

async fn claim_response(
    client: &mut Client,
    tenant: &str,
    request: proto::ClaimRequest,
) -> proto::ClaimResponse {
    client
        .claim(authorized(tenant, request))
        .await
        .expect("claim")
        .into_inner()
}

/// The owner runs the effect and the provider declines: Fail TERMINAL.
async fn execute_and_fail(
    client: &mut Client,
    tenant: &str,
    owned: &proto::Ownership,
    provider: &Provider,
) {
    provider.charge(&owned.operation_id);
    fail_terminal(client, tenant, owned).await;
}

async fn execute_and_complete(
    client: &mut Client,
    tenant: &str,
    owned: &proto::Ownership,
    provider: &Provider,
) {
    let body = provider.charge(&owned.operation_id);
    client
        .complete(authorized(
            tenant,
            proto::CompleteRequest {
                operation_id: owned.operation_id.clone(),
                fence: owned.fence,
                result: result(&body),
            },
        ))
        .await
        .expect("complete");
}

/// The replayed outcome's state: SUCCEEDED or FAILED.
fn replayed(response: &proto::ClaimResponse) -> proto::OperationState {
    match &response.outcome {
        Some(Outcome::Completed(completed)) => completed.state(),
        other => panic!("expected a replay, got {other:?}"),
    }
}

async fn an_opted_in_failure_executes_again_and_then_replays_its_success(backend: Backend) {
    let world = world(backend).await;
    let tenant = world.tenant_a.clone();
    let mut client = world.client().await;
    let provider = Provider::default();

    let first = claim_owned(&mut client, &tenant, claim(RETRIED, "k", b"first")).await;
    execute_and_fail(&mut client, &tenant, &first, &provider).await;
    let stored = operation_by_id(&mut client, &tenant, &first.operation_id).await;
    assert_eq!(stored.on_failed(), proto::OnFailed::NewAttempt);

    // The caller decides to try again: a new attempt, executed.
    let second = claim_owned(&mut client, &tenant, claim(RETRIED, "k", b"second")).await;
    assert_eq!(
        second.operation_id, first.operation_id,
        "the same operation"
    );
    assert!(second.fence > first.fence, "a new fence");
    assert_eq!(second.attempt, 2);
    // Its Claim re-sent after a lost reply: the same attempt, not a third.
    let resent = claim_owned(&mut client, &tenant, claim(RETRIED, "k", b"second")).await;
    assert_eq!((resent.fence, resent.attempt), (second.fence, 2));
    execute_and_complete(&mut client, &tenant, &second, &provider).await;
    assert_eq!(provider.effects(), 2, "the effect ran once per attempt");

    // From now on every Claim replays the success; nothing executes.
    for token in [b"first".as_slice(), b"second", b"third", b""] {
        let response = claim_response(&mut client, &tenant, claim(RETRIED, "k", token)).await;
        assert_eq!(replayed(&response), proto::OperationState::Succeeded);
    }
    assert_eq!(provider.effects(), 2);

    let events = events(&history(&mut client, &tenant, &first.operation_id).await);
    assert_eq!(
        events,
        ["CLAIMED", "FAILED", "RETRIED_AFTER_FAILURE", "COMPLETED"]
    );
    let entries = history(&mut client, &tenant, &first.operation_id).await;
    assert_eq!(
        entries[2].detail,
        format!(
            "replaces the failure of attempt 1 (fence {}, terminal: card_declined)",
            first.fence
        )
    );
}

async fn an_operation_without_the_opt_in_replays_its_failure(backend: Backend) {
    let world = world(backend).await;
    let tenant = world.tenant_a.clone();
    let mut client = world.client().await;
    let provider = Provider::default();

    let first = claim_owned(&mut client, &tenant, claim(NOT_RETRIED, "k", b"first")).await;
    execute_and_fail(&mut client, &tenant, &first, &provider).await;
    let stored = operation_by_id(&mut client, &tenant, &first.operation_id).await;
    assert_eq!(stored.on_failed(), proto::OnFailed::Replay);
    for token in [b"second".as_slice(), b"third", b"first", b""] {
        let response = claim_response(&mut client, &tenant, claim(NOT_RETRIED, "k", token)).await;
        assert_eq!(replayed(&response), proto::OperationState::Failed);
    }
    assert_eq!(provider.effects(), 1);
    // A different request under the key is still refused.
    let reused = client
        .claim(authorized(
            &tenant,
            claim_json(RETRIED, "k", r#"{"amount":1}"#),
        ))
        .await;
    assert!(reused.is_ok(), "another operation's key is another scope");
    let refused = client
        .claim(authorized(
            &tenant,
            claim_json(NOT_RETRIED, "k", r#"{"amount":1}"#),
        ))
        .await
        .expect_err("another request");
    assert_status(
        &refused,
        tonic::Code::FailedPrecondition,
        "IDEMPOTENCY_KEY_REUSED",
    );
}

async fn a_replayed_failure_never_hides_the_new_attempt(backend: Backend) {
    let world = world(backend).await;
    let tenant = world.tenant_a.clone();
    let mut client = world.client().await;
    let provider = Provider::default();

    let first = claim_owned(&mut client, &tenant, claim(RETRIED, "k", b"first")).await;
    execute_and_fail(&mut client, &tenant, &first, &provider).await;
    // The failed attempt's own Claim, re-sent late: replayed (it is not a
    // decision to try again), read from the database by this replica.
    let late = claim_response(&mut client, &tenant, claim(RETRIED, "k", b"first")).await;
    assert_eq!(replayed(&late), proto::OperationState::Failed);

    let second = claim_owned(&mut client, &tenant, claim(RETRIED, "k", b"second")).await;
    assert_eq!(second.attempt, 2);
    // The late Claim again, while the new attempt runs: never the FAILED
    // this replica just replayed.
    let during = claim_response(&mut client, &tenant, claim(RETRIED, "k", b"first")).await;
    assert_eq!(outcome_name(&during), "pending", "{during:?}");
    execute_and_complete(&mut client, &tenant, &second, &provider).await;
    let after = claim_response(&mut client, &tenant, claim(RETRIED, "k", b"first")).await;
    assert_eq!(replayed(&after), proto::OperationState::Succeeded);
    assert_eq!(provider.effects(), 2);
}

async fn concurrent_claims_of_an_opted_in_failure_start_one_attempt(backend: Backend) {
    let world = world(backend).await;
    let tenant = world.tenant_a.clone();
    let mut client = world.client().await;
    let provider = Provider::default();
    let first = claim_owned(&mut client, &tenant, claim(RETRIED, "k", b"first")).await;
    execute_and_fail(&mut client, &tenant, &first, &provider).await;

    let barrier = Arc::new(Barrier::new(CONCURRENT_CLAIMS));
    let mut tasks = Vec::new();
    for index in 0..CONCURRENT_CLAIMS {
        let mut client = world.client().await;
        let tenant = tenant.clone();
        let barrier = barrier.clone();
        let provider = provider.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let token = format!("racer-{index}").into_bytes();
            let response = claim_response(&mut client, &tenant, claim(RETRIED, "k", &token)).await;
            let name = outcome_name(&response);
            if let Some(owned) = ownership(&response) {
                // Only an owner executes, as the client protocol says.
                provider.charge(&owned.operation_id);
            }
            name
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.expect("a racer"));
    }
    let acquired = outcomes.iter().filter(|name| **name == "acquired").count();
    assert_eq!(acquired, 1, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|name| matches!(*name, "acquired" | "pending")),
        "{outcomes:?}"
    );
    assert_eq!(provider.effects(), 2, "the failed attempt and one new one");
    let stored = operation_by_id(&mut client, &tenant, &first.operation_id).await;
    assert_eq!(
        (stored.state(), stored.attempt),
        (proto::OperationState::InProgress, 2)
    );
    let events = events(&history(&mut client, &tenant, &first.operation_id).await);
    assert_eq!(events, ["CLAIMED", "FAILED", "RETRIED_AFTER_FAILURE"]);
}

async fn past_the_operation_deadline_the_failure_is_replayed(backend: Backend) {
    let world = world(backend).await;
    let tenant = world.tenant_a.clone();
    let mut client = world.client().await;
    let provider = Provider::default();
    let request = |token: &[u8]| proto::ClaimRequest {
        operation_deadline: millis(1_000),
        lease: millis(500),
        max_attempt_duration: millis(500),
        ..claim(RETRIED, "k", token)
    };
    let first = claim_owned(&mut client, &tenant, request(b"first")).await;
    execute_and_fail(&mut client, &tenant, &first, &provider).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    for token in [b"second".as_slice(), b""] {
        let response = claim_response(&mut client, &tenant, request(token)).await;
        assert_eq!(replayed(&response), proto::OperationState::Failed);
    }
    assert_eq!(provider.effects(), 1);
    let events = events(&history(&mut client, &tenant, &first.operation_id).await);
    assert_eq!(events, ["CLAIMED", "FAILED"]);
}

#[tokio::test]
async fn get_policy_shows_the_effective_on_failed() {
    let world = world(Backend::sqlite().await).await;
    let mut client = world.client().await;
    for (operation, expected) in [
        (RETRIED, proto::OnFailed::NewAttempt),
        ("payments.refund", proto::OnFailed::NewAttempt),
        (NOT_RETRIED, proto::OnFailed::Replay),
    ] {
        let policy = client
            .get_policy(authorized(
                &world.tenant_a,
                proto::GetPolicyRequest {
                    operation: operation.into(),
                },
            ))
            .await
            .expect("get policy")
            .into_inner();
        assert_eq!(policy.on_failed(), expected, "{operation}");
    }
}
