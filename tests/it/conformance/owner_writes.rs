//! Owner writes: Renew, Complete and Fail by the fence holder, and stale fences.

use chrono::TimeDelta;
use idemd::domain::*;

use super::fixture::*;
use crate::harness::*;

async fn renew_extends_the_lease_but_never_past_the_attempt_deadline(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let short_attempt = ClaimCommand {
        max_attempt_duration: TimeDelta::seconds(2),
        ..command("k", 1_000)
    };
    let owner = acquired(fixture.claim(&short_attempt).await);

    let renewed = fixture.renew(&owner, Some(TimeDelta::hours(1))).await;
    assert_eq!(renewed.answer, Ok(Answer::Written));
    assert!(renewed.record_changed);
    assert_eq!(
        renewed.record.lease_expires_at, owner.attempt_deadline_at,
        "capped at the attempt deadline"
    );
    let stored = fixture.find(owner.operation_id).await.expect("exists").0;
    assert_eq!(stored.lease_expires_at, owner.attempt_deadline_at);
    assert_eq!(stored.updated_at, renewed.now);
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED", "RENEWED"]
    );
}

async fn complete_stores_the_result_replays_it_and_answers_a_resend_once(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let owner = acquired(fixture.claim(&command("k", 30_000)).await);

    let completed = fixture.complete(&owner, success(r#"{"charge":1}"#)).await;
    assert_eq!(completed.answer, Ok(Answer::Written));
    let (stored, _) = fixture.find(owner.operation_id).await.expect("exists");
    assert_eq!(stored.state, State::Succeeded);
    assert_eq!(
        stored.outcome,
        Some(Outcome::Succeeded(success(r#"{"charge":1}"#)))
    );
    assert_eq!(stored.outcome_kind, Some(State::Succeeded));
    assert_eq!(stored.completed_at, Some(completed.now));
    assert_eq!(
        stored.retain_until,
        Some(completed.now + TimeDelta::hours(1))
    );
    assert_eq!(stored.lease_expires_at, None);
    let receipt = stored.last_write.expect("a receipt");
    assert_eq!(
        (receipt.fence, receipt.writer),
        (owner.fence, Writer::Owner)
    );

    let (replay, _) = fixture.claim(&command("k", 30_000)).await;
    assert_eq!(replay, Ok(ClaimAnswer::Completed));
    let resent = fixture.complete(&owner, success(r#"{"charge":1}"#)).await;
    assert_eq!(resent.answer, Ok(Answer::Written));
    assert!(!resent.record_changed);
    let changed = fixture.complete(&owner, success(r#"{"charge":2}"#)).await;
    assert!(
        matches!(
            changed.answer,
            Err(Error::Refused {
                refusal: Refusal::RequestMismatch,
                ..
            })
        ),
        "{:?}",
        changed.answer
    );
    assert_eq!(
        fixture.find(owner.operation_id).await.expect("exists").0,
        stored,
        "terminal records never change"
    );
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED", "COMPLETED"]
    );
}

async fn a_terminal_failure_is_stored_and_replayed(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let owner = acquired(fixture.claim(&command("k", 30_000)).await);

    let failed = fixture
        .fail(&owner, FailDisposition::Terminal, TimeDelta::zero())
        .await;
    assert_eq!(failed.answer, Ok(Answer::Written));
    let (stored, history) = fixture.find(owner.operation_id).await.expect("exists");
    assert_eq!(stored.state, State::Failed);
    let Some(Outcome::Failed { reason, error }) = &stored.outcome else {
        panic!("expected a failure, got {:?}", stored.outcome);
    };
    assert_eq!(*reason, FailureReason::Terminal);
    assert_eq!(error.code, "upstream_503");
    assert_eq!(error.message, "the provider said no");
    assert_eq!(error.metadata["region"], "eu");
    assert_eq!(event_names(&history), ["CLAIMED", "FAILED"]);
    let (replay, _) = fixture.claim(&command("k", 30_000)).await;
    assert_eq!(replay, Ok(ClaimAnswer::Completed));
    let late = fixture.complete(&owner, success("late")).await;
    assert!(
        matches!(
            late.answer,
            Err(Error::Refused {
                state: State::Failed,
                ..
            })
        ),
        "{:?}",
        late.answer
    );
}

async fn a_retryable_failure_waits_then_releases_within_the_budget(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let budget_of_two = ClaimCommand {
        max_attempts: 2,
        ..command("k", 30_000)
    };
    let owner = acquired(fixture.claim(&budget_of_two).await);

    let failed = fixture
        .fail(
            &owner,
            FailDisposition::Retryable,
            // Long enough that the claim below is early even on a loaded machine.
            TimeDelta::milliseconds(1_500),
        )
        .await;
    assert_eq!(failed.record.state, State::RetryWait);
    let stored = fixture.find(owner.operation_id).await.expect("exists").0;
    assert_eq!(stored.state, State::RetryWait);
    assert_eq!(
        stored.retry_at,
        Some(failed.now + TimeDelta::milliseconds(1_500))
    );
    let (early, _) = fixture.claim(&budget_of_two).await;
    assert!(
        matches!(
            early,
            Ok(ClaimAnswer::Pending {
                reason: PendingReason::RetryScheduled,
                ..
            })
        ),
        "{early:?}"
    );
    sleep_ms(1_600).await;

    let (due, second) = fixture.claim(&budget_of_two).await;
    assert_eq!(due, Ok(ClaimAnswer::Acquired));
    assert_eq!(second.attempt, 2);
    assert!(second.fence > owner.fence);
    let exhausted = fixture
        .fail(
            &second,
            FailDisposition::Retryable,
            TimeDelta::milliseconds(150),
        )
        .await;
    assert_eq!(exhausted.record.state, State::Failed);
    let stored = fixture.find(owner.operation_id).await.expect("exists").0;
    assert!(matches!(
        stored.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::AttemptsExhausted,
            ..
        })
    ));
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED", "RETRY_SCHEDULED", "RETRY_STARTED", "FAILED"]
    );
}

async fn an_unknown_outcome_is_taken_over_with_reconcile_first(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let owner = acquired(fixture.claim(&command("k", 30_000)).await);
    let reported = fixture
        .fail(&owner, FailDisposition::Unknown, TimeDelta::zero())
        .await;
    assert_eq!(reported.record.state, State::Unknown);
    assert_eq!(
        fixture
            .find(owner.operation_id)
            .await
            .expect("exists")
            .0
            .state,
        State::Unknown
    );

    let (answer, next) = fixture.claim(&command("k", 30_000)).await;
    assert_eq!(
        answer,
        Ok(ClaimAnswer::ReconcileFirst(Doubt {
            previous: PreviousAttempt {
                state: State::Unknown,
                fence: owner.fence,
                attempt_deadline_at: owner.attempt_deadline_at,
            },
            settles_at: owner.attempt_deadline_at,
        }))
    );
    assert_eq!((next.state, next.attempt), (State::InProgress, 2));
    assert_eq!(
        fixture.events(owner.operation_id).await,
        ["CLAIMED", "OUTCOME_UNKNOWN", "TAKEN_OVER"]
    );
}

async fn stale_fences_are_refused_and_their_repeats_coalesce_in_history(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let stale = acquired(fixture.claim(&command("k", 40)).await);
    sleep_ms(80).await;
    let (_, current) = fixture.claim(&command("k", 30_000)).await;

    for _ in 0..3 {
        let refused = fixture.renew(&stale, None).await;
        assert_eq!(
            refused.answer,
            Err(Error::LeaseLost {
                operation_id: stale.operation_id,
                current_fence: current.fence,
                state: State::InProgress,
            })
        );
        assert!(!refused.record_changed);
    }
    let late = fixture.complete(&stale, success("late")).await;
    assert!(matches!(late.answer, Err(Error::LeaseLost { .. })));

    let (stored, history) = fixture.find(stale.operation_id).await.expect("exists");
    assert_eq!(
        stored,
        second_as_stored(&current),
        "refusals change nothing"
    );
    assert_eq!(
        event_names(&history),
        [
            "CLAIMED",
            "TAKEN_OVER",
            "STALE_WRITE_REFUSED",
            "STALE_WRITE_REFUSED"
        ]
    );
    let renewals = &history[2];
    assert_eq!(
        (renewals.fence, renewals.detail.as_str(), renewals.count),
        (stale.fence, "renew", 3)
    );
    assert!(renewals.last_at >= renewals.first_at);
    assert_eq!(
        (history[3].detail.as_str(), history[3].count),
        ("complete", 1)
    );
    assert_eq!(
        history
            .iter()
            .map(|entry| entry.sequence)
            .collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
}

store_tests!(
    renew_extends_the_lease_but_never_past_the_attempt_deadline,
    complete_stores_the_result_replays_it_and_answers_a_resend_once,
    a_terminal_failure_is_stored_and_replayed,
    a_retryable_failure_waits_then_releases_within_the_budget,
    an_unknown_outcome_is_taken_over_with_reconcile_first,
    stale_fences_are_refused_and_their_repeats_coalesce_in_history,
);
