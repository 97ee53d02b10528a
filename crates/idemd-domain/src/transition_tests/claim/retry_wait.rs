//! RETRY_WAIT → Claim

use crate::model::{FailureReason, HistoryEvent, OperationRecord, Outcome, State};
use crate::transition::{ClaimAnswer, PendingReason};

use crate::transition_tests::{
    FIRST_FENCE, MAX_ATTEMPTS, OTHER, OWNER, Sim, assert_pending, at, entry, fresh, retention,
    retry_wait, secs,
};

#[test]
fn due_retry_is_acquired_with_a_new_fence_and_the_next_attempt() {
    let mut sim = retry_wait(|_| {});
    sim.now = at(11); // exactly due
    let step = sim.claim_as(b"retrier");
    assert_eq!(step.claim_answer(), ClaimAnswer::Acquired);
    assert_eq!(step.drawn_fence, Some(11));
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::InProgress, 11, 2)
    );
    assert_eq!(next.taken_over_from, None, "a retry is not a takeover");
    assert_eq!(next.claim_token, b"retrier".to_vec());
    assert_eq!(next.retry_at, None);
    assert_eq!(next.lease_expires_at, Some(at(41)));
    assert_eq!(next.attempt_deadline_at, Some(at(311)));
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::RetryStarted,
            State::RetryWait,
            State::InProgress,
            11,
            2,
            ""
        )
    );
    // And the retrier re-sending its Claim is told Acquired again.
    sim.now = at(12);
    let resent = sim.claim_as(b"retrier");
    assert_eq!(resent.claim_answer(), ClaimAnswer::Acquired);
    resent.assert_no_effects();
}

#[test]
fn retry_not_yet_due_is_pending_until_retry_at() {
    let mut sim = retry_wait(|_| {});
    let before = sim.record.clone();
    sim.now = at(4);
    for token in [OTHER, OWNER, b"".as_slice()] {
        assert_pending(&sim.claim_as(token), PendingReason::RetryScheduled, secs(7));
    }
    assert_eq!(sim.record, before);
}

#[test]
fn due_retry_with_budget_spent_fails_attempts_exhausted() {
    // Fail RETRYABLE on the last attempt ends the operation at once, so a
    // RETRY_WAIT on the last attempt comes from a NOT_APPLIED reconciliation
    // (pinned end to end below); here it is built directly.
    let mut sim = Sim::with(OperationRecord {
        state: State::RetryWait,
        attempt: MAX_ATTEMPTS,
        lease_expires_at: None,
        retry_at: Some(at(11)),
        ..fresh()
    });
    sim.now = at(11);
    let step = sim.claim_as(b"retrier");
    assert_eq!(step.claim_answer(), ClaimAnswer::Completed);
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(next.state, State::Failed);
    assert_eq!(next.fence, FIRST_FENCE);
    assert_eq!(next.attempt, MAX_ATTEMPTS);
    assert!(matches!(
        &next.outcome,
        Some(Outcome::Failed { reason: FailureReason::AttemptsExhausted, error })
            if error.code == "attempts_exhausted"
    ));
    assert_eq!(next.outcome_kind, Some(State::Failed));
    assert_eq!(next.completed_at, Some(at(11)));
    assert_eq!(next.retain_until, Some(at(11) + retention()));
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::Failed,
            State::RetryWait,
            State::Failed,
            FIRST_FENCE,
            MAX_ATTEMPTS,
            "attempts_exhausted"
        )
    );
    let replay = sim.claim_as(OTHER);
    assert_eq!(replay.claim_answer(), ClaimAnswer::Completed);
    replay.assert_no_effects();
}

#[test]
fn due_retry_past_the_operation_deadline_fails_deadline_exceeded() {
    let mut sim = retry_wait(|record| record.operation_deadline_at = Some(at(60)));
    sim.now = at(60);
    let step = sim.claim_as(b"retrier");
    assert_eq!(step.claim_answer(), ClaimAnswer::Completed);
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::Failed, FIRST_FENCE, 1)
    );
    assert!(matches!(
        &next.outcome,
        Some(Outcome::Failed { reason: FailureReason::DeadlineExceeded, error })
            if error.code == "deadline_exceeded"
    ));
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::DeadlineExceeded,
            State::RetryWait,
            State::Failed,
            FIRST_FENCE,
            1,
            "deadline_exceeded"
        )
    );
}
