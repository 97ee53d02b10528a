//! Concurrent duplicates of one scope.

use std::sync::Arc;

use idemd::proto;
use idemd::proto::claim_response::Outcome;
use tokio::sync::Barrier;

use crate::harness::*;

const CONCURRENT_CLAIMS: usize = 64;

/// A Claim that waits for another attempt polls by reading: however long it
/// waits, it draws no fence and writes nothing (before, every poll re-ran the
/// whole claim: one `wait=10s` drew 25 fences).
async fn a_waiting_claim_draws_no_fence_and_writes_nothing_while_it_waits(backend: Backend) {
    let world = World::start(backend).await;
    let mut client = world.client().await;
    let token = world.tenant_a.clone();
    let owner = client
        .claim(authorized(
            &token,
            proto::ClaimRequest {
                lease: millis(5_000),
                ..claim_json("orders.create", "running", r#"{"sku":"A1"}"#)
            },
        ))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&owner).expect("acquired").clone();
    let history_before = history(&mut client, &token, &owner.operation_id)
        .await
        .len();

    let started = std::time::Instant::now();
    let waited = client
        .claim(authorized(
            &token,
            proto::ClaimRequest {
                wait: millis(1_500),
                ..claim_json("orders.create", "running", r#"{"sku":"A1"}"#)
            },
        ))
        .await
        .expect("claim")
        .into_inner();
    assert!(
        matches!(waited.outcome, Some(Outcome::Pending(_))),
        "{waited:?}"
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(1_400));

    // The next fence drawn follows the owner's: the wait drew none.
    let next = client
        .claim(authorized(
            &token,
            claim_json("orders.create", "after-the-wait", r#"{"sku":"A1"}"#),
        ))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(ownership(&next).expect("acquired").fence, owner.fence + 1);
    assert_eq!(
        history(&mut client, &token, &owner.operation_id)
            .await
            .len(),
        history_before,
        "waiting wrote no history"
    );
}

async fn sixty_four_concurrent_claims_acquire_once_and_execute_once(backend: Backend) {
    let world = World::start(backend).await;
    let provider = Provider::default();
    // Everyone claims before the owner completes, so no one may see a replay.
    let all_claimed = Arc::new(Barrier::new(CONCURRENT_CLAIMS));
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENT_CLAIMS {
        let mut client = world.client().await;
        let token = world.tenant_a.clone();
        let provider = provider.clone();
        let all_claimed = all_claimed.clone();
        tasks.push(tokio::spawn(async move {
            let response = client
                .claim(authorized(
                    &token,
                    claim_json("orders.create", "order-42", r#"{"sku":"A1","qty":2}"#),
                ))
                .await
                .expect("claim answers")
                .into_inner();
            all_claimed.wait().await;
            if let Some(Outcome::Acquired(acquired)) = &response.outcome {
                let ownership = acquired.ownership.clone().expect("ownership");
                let body = provider.charge(&ownership.operation_id);
                client
                    .complete(authorized(
                        &token,
                        proto::CompleteRequest {
                            operation_id: ownership.operation_id,
                            fence: ownership.fence,
                            result: result(&body),
                        },
                    ))
                    .await
                    .expect("owner completes");
            }
            outcome_name(&response)
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.expect("task"));
    }

    let acquired = outcomes
        .iter()
        .filter(|outcome| **outcome == "acquired")
        .count();
    let pending = outcomes
        .iter()
        .filter(|outcome| **outcome == "pending")
        .count();
    assert_eq!(acquired, 1, "outcomes: {outcomes:?}");
    assert_eq!(pending, CONCURRENT_CLAIMS - 1, "outcomes: {outcomes:?}");
    assert_eq!(provider.effects(), 1);
}

async fn a_waiting_claim_receives_the_result_when_the_owner_completes(backend: Backend) {
    let world = World::start(backend).await;
    let mut owner = world.client().await;
    let mut waiter = world.client().await;
    let request = claim_json("orders.create", "order-7", r#"{"sku":"B2"}"#);
    let acquired = owner
        .claim(authorized(&world.tenant_a, request.clone()))
        .await
        .expect("claim")
        .into_inner();
    let ownership = ownership(&acquired).expect("acquired").clone();

    let token = world.tenant_a.clone();
    let waiting = tokio::spawn(async move {
        let request = proto::ClaimRequest {
            wait: millis(10_000),
            ..request
        };
        waiter.claim(authorized(&token, request)).await
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "the waiter must wait for the owner");
    owner
        .complete(authorized(
            &world.tenant_a,
            proto::CompleteRequest {
                operation_id: ownership.operation_id,
                fence: ownership.fence,
                result: result("done"),
            },
        ))
        .await
        .expect("complete");

    let answer = waiting.await.expect("task").expect("claim").into_inner();
    assert_eq!(outcome_name(&answer), "completed");
}

store_tests!(
    a_waiting_claim_draws_no_fence_and_writes_nothing_while_it_waits,
    sixty_four_concurrent_claims_acquire_once_and_execute_once,
    a_waiting_claim_receives_the_result_when_the_owner_completes,
);
