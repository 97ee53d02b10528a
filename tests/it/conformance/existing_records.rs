//! Claims on an existing record: live leases, takeovers and the attempt budget.

use chrono::TimeDelta;
use idemd::domain::transition::takeover_detail;
use idemd::domain::*;

use super::fixture::*;
use crate::harness::*;

async fn a_live_lease_answers_pending_its_own_token_acquired_and_another_request_conflict(
    backend: Backend,
) {
    let fixture = Fixture::new(backend).await;
    let owner_command = ClaimCommand {
        claim_token: b"attempt-1".to_vec(),
        ..command("k", 30_000)
    };
    let owner = acquired(fixture.claim(&owner_command).await);

    let (other, unchanged) = fixture.claim(&command("k", 30_000)).await;
    let Ok(ClaimAnswer::Pending {
        reason: PendingReason::InProgress,
        retry_after,
    }) = other
    else {
        panic!("expected Pending, got {other:?}");
    };
    assert!(retry_after > TimeDelta::seconds(25) && retry_after <= TimeDelta::seconds(30));
    assert_eq!(unchanged, owner);

    let (resent, same) = fixture.claim(&owner_command).await;
    assert_eq!(resent, Ok(ClaimAnswer::Acquired));
    assert_eq!((same.fence, same.attempt), (owner.fence, 1));

    let different_request = ClaimCommand {
        fingerprint: fingerprint::of_bytes(b"another request"),
        ..command("k", 30_000)
    };
    let (conflict, unchanged) = fixture.claim(&different_request).await;
    assert_eq!(
        conflict,
        Err(Error::KeyReused {
            operation_id: owner.operation_id
        })
    );
    // Refused and counted as evidence; nothing else of the record moved.
    assert_eq!(unchanged.conflicts, 1);
    assert!(unchanged.last_conflict_at.is_some());
    assert_eq!(
        OperationRecord {
            conflicts: 0,
            last_conflict_at: None,
            ..unchanged
        },
        owner
    );
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED", "CONFLICTING_CLAIM_REFUSED"]
    );
}

async fn an_expired_lease_is_taken_over_with_reconcile_first_until_the_budget_is_spent(
    backend: Backend,
) {
    let fixture = Fixture::new(backend).await;
    let lease_ms = 40;
    let budget_of_two = ClaimCommand {
        max_attempts: 2,
        ..command("k", lease_ms)
    };
    let first = acquired(fixture.claim(&budget_of_two).await);
    sleep_ms(80).await;

    let (answer, second) = fixture.claim(&budget_of_two).await;
    assert_eq!(
        answer,
        Ok(ClaimAnswer::ReconcileFirst(Doubt {
            previous: PreviousAttempt {
                state: State::InProgress,
                fence: first.fence,
                attempt_deadline_at: first.attempt_deadline_at,
            },
            settles_at: first.attempt_deadline_at,
        }))
    );
    assert_eq!(second.state, State::InProgress);
    assert_eq!(second.attempt, 2);
    assert!(second.fence > first.fence);
    assert_eq!(second.operation_id, first.operation_id);
    // The takeover's record is what the store keeps.
    assert_eq!(
        fixture.find(first.operation_id).await.expect("exists").0,
        second_as_stored(&second)
    );
    sleep_ms(80).await;

    let (answer, spent) = fixture.claim(&budget_of_two).await;
    assert_eq!(answer, Ok(ClaimAnswer::NeedsReconciliation));
    assert_eq!(spent.state, State::Unknown);
    assert_eq!(spent.fence, second.fence, "marking unknown takes no fence");
    let (again, unchanged) = fixture.claim(&budget_of_two).await;
    assert_eq!(again, Ok(ClaimAnswer::NeedsReconciliation));
    assert_eq!(unchanged.state, State::Unknown);

    let history = fixture.history(first.operation_id).await;
    assert_eq!(
        event_names(&history),
        ["CLAIMED", "TAKEN_OVER", "MARKED_UNKNOWN"]
    );
    assert_eq!(history[1].from_state, Some(State::InProgress));
    assert_eq!(
        (history[1].fence, history[1].attempt),
        (second.fence, 2),
        "the history entry carries the fence the store drew"
    );
    assert_eq!(
        history[1].detail,
        takeover_detail(&PreviousAttempt {
            state: State::InProgress,
            fence: first.fence,
            attempt_deadline_at: first.attempt_deadline_at,
        }),
        "why, and the replaced attempt's deadline"
    );
    assert!(
        history[1]
            .detail
            .starts_with("lease expired; previous attempt deadline ")
    );
    assert_eq!(
        (history[2].from_state, history[2].to_state),
        (Some(State::InProgress), State::Unknown)
    );
}

store_tests!(
    a_live_lease_answers_pending_its_own_token_acquired_and_another_request_conflict,
    an_expired_lease_is_taken_over_with_reconcile_first_until_the_budget_is_spent,
);
