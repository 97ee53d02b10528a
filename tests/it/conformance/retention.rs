//! Retention: what a sweep tombstones, ends and deletes.

use chrono::TimeDelta;
use idemd::domain::*;

use super::fixture::*;
use crate::harness::*;

async fn sweep_tombstones_results_ends_late_retries_and_deletes_old_tombstones(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let no_retention = |key: &str| ClaimCommand {
        retention: TimeDelta::zero(),
        ..command(key, 40)
    };
    let mut results = Vec::new();
    for index in 0..3 {
        let owner = acquired(fixture.claim(&no_retention(&format!("done-{index}"))).await);
        fixture.complete(&owner, success("ok")).await;
        results.push(owner);
    }
    // Retention of its own, so that it stays FAILED once the sweeper ends it.
    let late_retry = ClaimCommand {
        operation_deadline: Some(TimeDelta::milliseconds(1_500)),
        ..command("late-retry", 40)
    };
    let retrying = acquired(fixture.claim(&late_retry).await);
    let scheduled = fixture
        .fail(
            &retrying,
            FailDisposition::Retryable,
            TimeDelta::milliseconds(20),
        )
        .await;
    assert_eq!(scheduled.record.state, State::RetryWait);
    let unknown = acquired(fixture.claim(&no_retention("unknown")).await);
    fixture
        .fail(&unknown, FailDisposition::Unknown, TimeDelta::zero())
        .await;
    acquired(fixture.claim(&no_retention("stalled")).await);
    sleep_ms(1_600).await;

    // Batches of two: the backlog takes several sweeps, none does work twice.
    let tombstone_retention = TimeDelta::hours(1);
    let first = fixture
        .store
        .sweep(2, sweep_policy(tombstone_retention))
        .await
        .expect("sweep");
    assert_eq!(first.tombstoned + first.deadline_exceeded, 2);
    let mut total = first;
    loop {
        let report = fixture
            .store
            .sweep(2, sweep_policy(tombstone_retention))
            .await
            .expect("sweep");
        if report.total() == 0 {
            break;
        }
        total.tombstoned += report.tombstoned;
        total.deadline_exceeded += report.deadline_exceeded;
        total.deleted += report.deleted;
    }
    assert_eq!(
        (total.tombstoned, total.deadline_exceeded, total.deleted),
        (3, 1, 0)
    );

    let (tombstone, history) = fixture.find(results[0].operation_id).await.expect("kept");
    assert_eq!(tombstone.state, State::Expired);
    assert_eq!(tombstone.outcome, None, "the result is gone");
    assert_eq!(tombstone.outcome_kind, Some(State::Succeeded));
    assert_eq!(tombstone.fingerprint, results[0].fingerprint);
    let expired_at = history.last().expect("history").last_at;
    assert_eq!(
        tombstone.retain_until,
        Some(expired_at + tombstone_retention)
    );
    assert_eq!(event_names(&history), ["CLAIMED", "COMPLETED", "EXPIRED"]);
    let (refused, _) = fixture.claim(&no_retention("done-0")).await;
    assert_eq!(
        refused,
        Err(Error::ResultExpired {
            operation_id: results[0].operation_id
        })
    );
    let (retry, retry_history) = fixture.find(retrying.operation_id).await.expect("kept");
    assert!(matches!(
        retry.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::DeadlineExceeded,
            ..
        })
    ));
    assert_eq!(
        event_names(&retry_history),
        ["CLAIMED", "RETRY_SCHEDULED", "DEADLINE_EXCEEDED"]
    );
    let (unresolved, _) = fixture
        .find(unknown.operation_id)
        .await
        .expect("never swept");
    assert_eq!(unresolved.state, State::Unknown);

    // Past the tombstones' own retention they go, with their history, and
    // the scope starts afresh with a higher fence than any before.
    fixture.backend.age_retention().await;
    let mut deleted = 0;
    loop {
        let report = fixture
            .store
            .sweep(2, sweep_policy(tombstone_retention))
            .await
            .expect("sweep");
        deleted += report.deleted;
        if report.total() == 0 {
            break;
        }
    }
    assert_eq!(deleted, 3);
    assert!(fixture.find(results[0].operation_id).await.is_none());
    assert_eq!(
        fixture
            .backend
            .count(
                "SELECT count(*) FROM operation_history \
                 WHERE operation_id NOT IN (SELECT operation_id FROM operations)"
            )
            .await,
        0,
        "history is deleted with its operation"
    );
    let highest_fence = [&results[..], &[retrying, unknown]]
        .concat()
        .iter()
        .map(|record| record.fence)
        .max()
        .expect("fences");
    let (answer, fresh) = fixture.claim(&no_retention("done-0")).await;
    assert_eq!(answer, Ok(ClaimAnswer::Acquired));
    assert_ne!(fresh.operation_id, results[0].operation_id);
    assert!(fresh.fence > highest_fence);
}

store_tests!(sweep_tombstones_results_ends_late_retries_and_deletes_old_tombstones,);
