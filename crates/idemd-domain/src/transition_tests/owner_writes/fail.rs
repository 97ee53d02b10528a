//! IN_PROGRESS f → Fail f

use crate::command::FailDisposition;
use crate::model::{
    FailureReason, HistoryEvent, Outcome, State, WriteAnswer, WriteReceipt, Writer,
};

use crate::transition_tests::{
    CODE, FIRST_FENCE, Sim, at, entry, fail_cmd, report, retention, secs,
};

#[test]
fn fail_terminal_ends_failed_with_the_callers_error() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let command = fail_cmd(FIRST_FENCE, FailDisposition::Terminal, secs(0));
    let step = sim.fail(FIRST_FENCE, FailDisposition::Terminal, secs(0));
    step.written();
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::Failed, FIRST_FENCE, 1)
    );
    assert_eq!(
        next.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::Terminal,
            error: report(CODE)
        })
    );
    assert_eq!(next.outcome_kind, Some(State::Failed));
    assert_eq!(next.completed_at, Some(at(10)));
    assert_eq!(next.retain_until, Some(at(10) + retention()));
    assert_eq!(
        next.last_write,
        Some(WriteReceipt {
            fence: FIRST_FENCE,
            digest: command.digest(),
            writer: Writer::Owner,
            answer: Some(WriteAnswer {
                state: next.state,
                failure: match &next.outcome {
                    Some(Outcome::Failed { reason, .. }) => Some(*reason),
                    _ => None,
                },
                retry_at: None,
                fence: FIRST_FENCE,
            }),
        })
    );
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::Failed,
            State::InProgress,
            State::Failed,
            FIRST_FENCE,
            1,
            CODE
        )
    );
}

#[test]
fn fail_retryable_with_budget_schedules_a_retry() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(15));
    step.written();
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::RetryWait, FIRST_FENCE, 1)
    );
    assert_eq!(next.retry_at, Some(at(25)));
    assert_eq!(next.lease_expires_at, None);
    assert_eq!(next.outcome, None);
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::RetryScheduled,
            State::InProgress,
            State::RetryWait,
            FIRST_FENCE,
            1,
            CODE
        )
    );
}

#[test]
fn fail_retryable_without_budget_fails_attempts_exhausted() {
    let mut sim = Sim::last_attempt();
    sim.now = at(10);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(15));
    step.written();
    let next = step.next();
    assert_eq!(next.state, State::Failed);
    assert_eq!(
        next.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::AttemptsExhausted,
            error: report(CODE)
        })
    );
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::Failed,
            State::InProgress,
            State::Failed,
            FIRST_FENCE,
            1,
            CODE
        )
    );
}

#[test]
fn fail_retryable_that_would_retry_past_the_operation_deadline_fails_deadline_exceeded() {
    // Retry due at t0+20: a deadline at t0+20 is too late, t0+21 is not.
    let mut sim = Sim::fresh_with(|record| record.operation_deadline_at = Some(at(20)));
    sim.now = at(10);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(10));
    step.written();
    assert_eq!(
        step.next().outcome,
        Some(Outcome::Failed {
            reason: FailureReason::DeadlineExceeded,
            error: report(CODE)
        })
    );
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::DeadlineExceeded,
            State::InProgress,
            State::Failed,
            FIRST_FENCE,
            1,
            CODE
        )
    );

    let mut sim = Sim::fresh_with(|record| record.operation_deadline_at = Some(at(21)));
    sim.now = at(10);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(10));
    assert_eq!(step.next().state, State::RetryWait);
}

#[test]
fn fail_unknown_leaves_the_outcome_unknown() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0));
    step.written();
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::Unknown, FIRST_FENCE, 1)
    );
    assert_eq!(next.lease_expires_at, None);
    assert_eq!(next.outcome, None);
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::OutcomeUnknown,
            State::InProgress,
            State::Unknown,
            FIRST_FENCE,
            1,
            CODE
        )
    );
}
