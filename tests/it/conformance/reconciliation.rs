//! Reconciliation: outside evidence settles unknown and expired operations.

use chrono::TimeDelta;
use idemd::domain::*;

use super::fixture::*;
use crate::harness::*;

async fn reconcile_resolves_unknown_and_expired_operations_with_a_new_fence(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let unknown = acquired(fixture.claim(&command("unknown", 30_000)).await);
    let unknown = fixture
        .fail(&unknown, FailDisposition::Unknown, TimeDelta::zero())
        .await
        .record;
    // Past its lease and its attempt deadline, so that FAILED is evidence.
    let expired = ClaimCommand {
        max_attempt_duration: TimeDelta::milliseconds(60),
        ..command("expired", 40)
    };
    let expired = acquired(fixture.claim(&expired).await);
    let live = acquired(fixture.claim(&command("live", 30_000)).await);
    sleep_ms(80).await;

    let found = fixture
        .reconcile(&unknown, Resolution::Succeeded(success("found")))
        .await;
    assert_eq!(found.answer, Ok(Answer::Written));
    assert_eq!(found.record.state, State::Succeeded);
    assert!(found.record.fence > unknown.fence);
    let stored = fixture.find(unknown.operation_id).await.expect("exists").0;
    assert_eq!(stored.fence, found.record.fence);
    assert_eq!(
        stored.last_write.map(|receipt| receipt.writer),
        Some(Writer::Reconciler)
    );

    let not_found = fixture
        .reconcile(
            &expired,
            Resolution::Failed(ErrorReport {
                code: "not_at_provider".into(),
                ..ErrorReport::default()
            }),
        )
        .await;
    assert_eq!(not_found.record.state, State::Failed);
    assert_eq!(
        fixture
            .find(expired.operation_id)
            .await
            .expect("exists")
            .0
            .state,
        State::Failed
    );

    let refused = fixture
        .reconcile(&live, Resolution::Succeeded(success("x")))
        .await;
    assert!(matches!(
        refused.answer,
        Err(Error::Refused {
            refusal: Refusal::LeaseStillLive,
            ..
        })
    ));
    assert_eq!(
        fixture.events(unknown.operation_id).await,
        ["CLAIMED", "OUTCOME_UNKNOWN", "RECONCILED"]
    );
    assert_eq!(
        fixture.events(expired.operation_id).await,
        ["CLAIMED", "RECONCILED"]
    );
}

async fn not_applied_waits_for_the_attempt_deadline_then_releases_for_a_new_attempt(
    backend: Backend,
) {
    let fixture = Fixture::new(backend).await;
    let short_attempt = ClaimCommand {
        max_attempt_duration: TimeDelta::milliseconds(2_000),
        ..command("k", 30_000)
    };
    let owner = acquired(fixture.claim(&short_attempt).await);
    let unknown = fixture
        .fail(&owner, FailDisposition::Unknown, TimeDelta::zero())
        .await
        .record;

    let early = fixture.reconcile(&unknown, Resolution::NotApplied).await;
    assert!(matches!(
        early.answer,
        Err(Error::Refused {
            refusal: Refusal::AttemptStillRunning,
            ..
        })
    ));
    sleep_ms(2_100).await;
    let released = fixture.reconcile(&unknown, Resolution::NotApplied).await;
    assert_eq!(released.answer, Ok(Answer::Written));
    assert_eq!(released.record.state, State::RetryWait);
    assert!(released.record.fence > owner.fence);

    let (answer, next) = fixture.claim(&short_attempt).await;
    assert_eq!(answer, Ok(ClaimAnswer::Acquired));
    assert_eq!(next.attempt, 2);
    assert!(next.fence > released.record.fence);
}

/// A budget spent on unknown outcomes ends in NeedsReconciliation; NOT_APPLIED
/// (the effect provably never happened) grants one more attempt, stored with
/// the record and recorded in history, so the next Claim executes instead of
/// failing ATTEMPTS_EXHAUSTED.
async fn not_applied_with_the_budget_spent_grants_one_more_attempt(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let one_attempt = ClaimCommand {
        max_attempts: 1,
        max_attempt_duration: TimeDelta::milliseconds(300),
        ..command("budget", 100)
    };
    let owner = acquired(fixture.claim(&one_attempt).await);
    sleep_ms(400).await; // lease and attempt deadline pass
    let (answer, spent) = fixture.claim(&one_attempt).await;
    assert_eq!(answer, Ok(ClaimAnswer::NeedsReconciliation));
    assert_eq!((spent.attempt, spent.max_attempts), (1, 1));

    let released = fixture.reconcile(&spent, Resolution::NotApplied).await;
    assert_eq!(released.answer, Ok(Answer::Written));
    assert_eq!(released.record.max_attempts, 2, "the grant is stored");
    let (reread, history) = fixture.find(owner.operation_id).await.expect("exists");
    assert_eq!(reread.max_attempts, 2);
    assert_eq!(
        history.last().map(|entry| entry.detail.as_str()),
        Some(idemd::domain::transition::NOT_APPLIED_WITH_GRANT)
    );

    let (answer, next) = fixture.claim(&one_attempt).await;
    assert_eq!(answer, Ok(ClaimAnswer::Acquired));
    assert_eq!((next.attempt, next.max_attempts), (2, 2));
}

store_tests!(
    reconcile_resolves_unknown_and_expired_operations_with_a_new_fence,
    not_applied_waits_for_the_attempt_deadline_then_releases_for_a_new_attempt,
    not_applied_with_the_budget_spent_grants_one_more_attempt,
);
