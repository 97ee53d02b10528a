//! Stale owners, the attempt budget spent on takeovers, the releases
//! (NOT_APPLIED, RETRYABLE) and Renew.

use std::time::Duration;

use idemd::proto;
use idemd::proto::claim_response::Outcome;
use tonic::Code;

use crate::harness::*;

use super::{short_lease_claim, sleep_past_lease};

async fn stale_owner_cannot_complete_after_takeover(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;

    let first = client
        .claim(authorized(token, short_lease_claim("k", 5)))
        .await
        .expect("claim")
        .into_inner();
    let owner_one = ownership(&first).expect("acquired").clone();
    sleep_past_lease().await; // owner one stalls

    let second = client
        .claim(authorized(token, short_lease_claim("k", 5)))
        .await
        .expect("claim")
        .into_inner();
    let Some(Outcome::ReconcileFirst(takeover)) = &second.outcome else {
        panic!("expected ReconcileFirst, got {second:?}");
    };
    let owner_two = takeover.ownership.clone().expect("ownership");
    assert_eq!(takeover.previous_fence, owner_one.fence);
    assert_eq!(
        takeover.previous_state,
        proto::OperationState::InProgress as i32
    );
    assert!(owner_two.fence > owner_one.fence);
    assert_eq!(owner_two.attempt, 2);
    assert_eq!(owner_two.operation_id, owner_one.operation_id);

    let late = client
        .complete(authorized(
            token,
            proto::CompleteRequest {
                operation_id: owner_one.operation_id.clone(),
                fence: owner_one.fence,
                result: result("late"),
            },
        ))
        .await
        .expect_err("the stale owner is refused");
    assert_status(&late, Code::Aborted, "LEASE_LOST");
    let (_, details) = error_info(&late);
    assert_eq!(details["current_fence"], owner_two.fence.to_string());
    assert_eq!(details["state"], "IN_PROGRESS");

    // The new owner still completes; the refusal is in the history.
    client
        .complete(authorized(
            token,
            proto::CompleteRequest {
                operation_id: owner_two.operation_id.clone(),
                fence: owner_two.fence,
                result: result("reconciled"),
            },
        ))
        .await
        .expect("current owner completes");
    let history = history(&mut client, token, &owner_one.operation_id).await;
    assert_eq!(
        events(&history),
        ["CLAIMED", "TAKEN_OVER", "STALE_WRITE_REFUSED", "COMPLETED"]
    );
    assert_eq!(history[2].fence, owner_one.fence);
    assert_eq!(history[2].detail, "complete");
}

async fn repeated_stale_writes_coalesce_in_history(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let first = client
        .claim(authorized(token, short_lease_claim("k", 5)))
        .await
        .expect("claim")
        .into_inner();
    let stale = ownership(&first).expect("acquired").clone();
    sleep_past_lease().await;
    client
        .claim(authorized(token, short_lease_claim("k", 5)))
        .await
        .expect("takeover");
    for _ in 0..3 {
        let refused = client
            .renew(authorized(
                token,
                proto::RenewRequest {
                    operation_id: stale.operation_id.clone(),
                    fence: stale.fence,
                    lease: None,
                },
            ))
            .await
            .expect_err("stale renew");
        assert_status(&refused, Code::Aborted, "LEASE_LOST");
    }
    let history = history(&mut client, token, &stale.operation_id).await;
    assert_eq!(
        events(&history),
        ["CLAIMED", "TAKEN_OVER", "STALE_WRITE_REFUSED"]
    );
    assert_eq!(history[2].count, 3);
}

async fn budget_spent_on_takeovers_needs_reconciliation_then_reconcile_resolves(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let provider = Provider::default();

    let first = client
        .claim(authorized(token, short_lease_claim("k", 2)))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&first), "acquired");
    sleep_past_lease().await;
    let second = client
        .claim(authorized(token, short_lease_claim("k", 2)))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&second), "reconcile_first");
    sleep_past_lease().await;

    let third = client
        .claim(authorized(token, short_lease_claim("k", 2)))
        .await
        .expect("claim")
        .into_inner();
    let Some(Outcome::NeedsReconciliation(needs)) = third.outcome else {
        panic!("expected NeedsReconciliation, got {third:?}");
    };
    assert_eq!(needs.attempts, 2);
    // Asking again changes nothing and executes nothing.
    let again = attempt(&mut client, token, short_lease_claim("k", 2), &provider).await;
    assert_eq!(again, Attempt::NeedsReconciliation);

    let unresolved = client
        .list_unresolved(authorized(token, proto::ListUnresolvedRequest::default()))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(unresolved.operations.len(), 1);
    let listed = &unresolved.operations[0];
    assert_eq!(listed.operation_id, needs.operation_id);
    assert_eq!(listed.state, proto::OperationState::Unknown as i32);
    assert_eq!(listed.fence, needs.fence);

    // A reconciler found the charge at the provider.
    let reconciled = client
        .reconcile(authorized(
            token,
            proto::ReconcileRequest {
                tenant: String::new(),
                operation_id: needs.operation_id.clone(),
                expected_fence: needs.fence,
                resolution: Some(proto::reconcile_request::Resolution::Succeeded(
                    result("found at provider").expect("result"),
                )),
            },
        ))
        .await
        .expect("reconcile")
        .into_inner();
    assert_eq!(reconciled.state, proto::OperationState::Succeeded as i32);
    assert!(reconciled.fence > needs.fence);

    let replay = attempt(&mut client, token, short_lease_claim("k", 2), &provider).await;
    assert_eq!(replay, Attempt::Replayed);
    assert_eq!(provider.effects(), 0);
    let history = history(&mut client, token, &needs.operation_id).await;
    assert_eq!(
        events(&history),
        ["CLAIMED", "TAKEN_OVER", "MARKED_UNKNOWN", "RECONCILED"]
    );
}

async fn not_applied_waits_for_the_attempt_deadline_then_releases(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let request = proto::ClaimRequest {
        // Long enough that the early NOT_APPLIED below is early even on a
        // loaded machine.
        max_attempt_duration: millis(2_000),
        ..short_lease_claim("k", 5)
    };
    let first = client
        .claim(authorized(token, request.clone()))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&first).expect("acquired").clone();
    client
        .fail(authorized(
            token,
            proto::FailRequest {
                operation_id: owner.operation_id.clone(),
                fence: owner.fence,
                disposition: proto::FailDisposition::Unknown as i32,
                error: Some(proto::OperationError {
                    code: "timeout".into(),
                    ..Default::default()
                }),
                retry_after: None,
            },
        ))
        .await
        .expect("fail unknown");
    let not_applied = |fence| proto::ReconcileRequest {
        tenant: String::new(),
        operation_id: owner.operation_id.clone(),
        expected_fence: fence,
        resolution: Some(proto::reconcile_request::Resolution::NotApplied(
            proto::NotApplied {},
        )),
    };

    let early = client
        .reconcile(authorized(token, not_applied(owner.fence)))
        .await
        .expect_err("the attempt may still be running");
    assert_status(&early, Code::FailedPrecondition, "ATTEMPT_STILL_RUNNING");

    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let released = client
        .reconcile(authorized(token, not_applied(owner.fence)))
        .await
        .expect("released")
        .into_inner();
    assert_eq!(released.state, proto::OperationState::RetryWait as i32);

    let next = client
        .claim(authorized(token, request))
        .await
        .expect("claim")
        .into_inner();
    let next_owner = ownership(&next).expect("a fresh attempt").clone();
    assert_eq!(outcome_name(&next), "acquired");
    assert_eq!(next_owner.attempt, 2);
    assert!(next_owner.fence > released.fence);
}

async fn retryable_failure_releases_after_retry_after_within_the_budget(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let request = short_lease_claim("k", 2);
    let fail_retryable = |ownership: &proto::Ownership| proto::FailRequest {
        operation_id: ownership.operation_id.clone(),
        fence: ownership.fence,
        disposition: proto::FailDisposition::Retryable as i32,
        error: Some(proto::OperationError {
            code: "rate_limited".into(),
            ..Default::default()
        }),
        // Long enough that the claim below is too early even on a loaded machine.
        retry_after: millis(1_500),
    };

    let first = client
        .claim(authorized(token, request.clone()))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&first).expect("acquired").clone();
    let failed = client
        .fail(authorized(token, fail_retryable(&owner)))
        .await
        .expect("fail")
        .into_inner();
    assert_eq!(failed.state, proto::OperationState::RetryWait as i32);

    let too_early = client
        .claim(authorized(token, request.clone()))
        .await
        .expect("claim")
        .into_inner();
    let Some(Outcome::Pending(pending)) = too_early.outcome else {
        panic!("expected Pending, got {too_early:?}");
    };
    assert_eq!(pending.reason, proto::PendingReason::RetryScheduled as i32);

    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let second = client
        .claim(authorized(token, request.clone()))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome_name(&second), "acquired");
    let owner = ownership(&second).expect("acquired").clone();
    assert_eq!(owner.attempt, 2);

    // The budget is spent: a retryable failure now ends the operation.
    let exhausted = client
        .fail(authorized(token, fail_retryable(&owner)))
        .await
        .expect("fail")
        .into_inner();
    assert_eq!(exhausted.state, proto::OperationState::Failed as i32);
    assert_eq!(
        exhausted.reason,
        proto::FailureReason::AttemptsExhausted as i32
    );
    let replay = client
        .claim(authorized(token, request))
        .await
        .expect("claim")
        .into_inner();
    let Some(Outcome::Completed(completed)) = replay.outcome else {
        panic!("expected the stored failure, got {replay:?}");
    };
    let Some(proto::completed::Outcome::Error(error)) = completed.outcome else {
        panic!("expected an error outcome");
    };
    assert_eq!(error.reason, proto::FailureReason::AttemptsExhausted as i32);
    assert_eq!(error.code, "rate_limited");
}

async fn renew_extends_the_lease_but_never_past_the_attempt_deadline(backend: Backend) {
    let world = World::start(backend).await;
    let token = &world.tenant_a;
    let mut client = world.client().await;
    let request = proto::ClaimRequest {
        lease: millis(100),
        max_attempt_duration: millis(1_500),
        ..claim_json("payments.charge", "k", "{}")
    };
    let first = client
        .claim(authorized(token, request))
        .await
        .expect("claim")
        .into_inner();
    let owner = ownership(&first).expect("acquired").clone();
    let renew = |lease_ms| proto::RenewRequest {
        operation_id: owner.operation_id.clone(),
        fence: owner.fence,
        lease: millis(lease_ms),
    };

    let renewed = client
        .renew(authorized(token, renew(10_000)))
        .await
        .expect("renew")
        .into_inner();
    let granted = renewed.lease.expect("lease");
    let granted = Duration::new(granted.seconds as u64, granted.nanos as u32);
    assert!(
        granted <= Duration::from_millis(1_500) && granted > Duration::from_millis(100),
        "the lease is extended but capped at the attempt deadline: {granted:?}"
    );

    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let late = client
        .renew(authorized(token, renew(100)))
        .await
        .expect_err("past the deadline");
    assert_status(&late, Code::FailedPrecondition, "ATTEMPT_DEADLINE_PASSED");
}

store_tests!(
    stale_owner_cannot_complete_after_takeover,
    repeated_stale_writes_coalesce_in_history,
    budget_spent_on_takeovers_needs_reconciliation_then_reconcile_resolves,
    not_applied_waits_for_the_attempt_deadline_then_releases,
    retryable_failure_releases_after_retry_after_within_the_budget,
    renew_extends_the_lease_but_never_past_the_attempt_deadline,
);
