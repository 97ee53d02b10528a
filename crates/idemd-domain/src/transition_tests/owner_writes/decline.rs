//! IN_PROGRESS f → Fail f NOT_STARTED (a decline: the effect never started)

use crate::command::{FailDisposition, Resolution};
use crate::error::Refusal;
use crate::model::{FailureReason, HistoryEvent, State};
use crate::transition::{ClaimAnswer, Doubt};

use crate::transition_tests::{
    CODE, FIRST_FENCE, OTHER, Sim, at, entry, every_state, lease_lost, refused, retry_wait, secs,
};

#[test]
fn a_declined_fresh_attempt_is_released_for_the_next_at_once() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let step = sim.fail(FIRST_FENCE, FailDisposition::NotStarted, secs(0));
    step.written();
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::RetryWait, FIRST_FENCE, 1)
    );
    assert_eq!(next.retry_at, Some(at(10)), "due at once");
    assert_eq!(next.lease_expires_at, None);
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
    // Nothing was in doubt: the next Claim is a plain new attempt.
    assert_eq!(sim.claim_as(OTHER).claim_answer(), ClaimAnswer::Acquired);
    assert_eq!(sim.record.attempt, 2);
}

#[test]
fn a_declined_last_attempt_ends_the_operation_as_a_retry_would() {
    let mut fresh_last = Sim::last_attempt();
    fresh_last.now = at(10);
    let step = fresh_last.fail(FIRST_FENCE, FailDisposition::NotStarted, secs(0));
    step.written();
    assert_eq!(
        step.failure_reason(),
        Some(FailureReason::AttemptsExhausted)
    );

    let mut past_deadline = Sim::fresh_with(|record| record.operation_deadline_at = Some(at(10)));
    past_deadline.now = at(10);
    let step = past_deadline.fail(FIRST_FENCE, FailDisposition::NotStarted, secs(0));
    assert_eq!(step.failure_reason(), Some(FailureReason::DeadlineExceeded));
}

/// The long fault run's liveness failure: a takeover that declined reported
/// UNKNOWN, so the next takeover waited for the decliner's deadline, and so
/// on until the budget was spent with no attempt ever running. A decline
/// keeps the doubt where it was.
#[test]
fn a_declined_takeover_keeps_the_doubt_of_the_attempt_it_took_over() {
    let mut sim = Sim::new();
    // The first attempt (deadline at 300) stalls; its lease runs out.
    sim.now = at(31);
    let ClaimAnswer::ReconcileFirst(Doubt {
        previous: first, ..
    }) = sim.claim_as(b"second").claim_answer()
    else {
        panic!("not a takeover");
    };
    assert_eq!(first.attempt_deadline_at, Some(at(300)));
    assert_eq!(sim.record.attempt_deadline_at, Some(at(331)));

    // The second declines: its attempt ends before the doubt could.
    sim.now = at(40);
    let step = sim.fail(FIRST_FENCE + 1, FailDisposition::NotStarted, secs(0));
    step.written();
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::Unknown, FIRST_FENCE + 1, 2)
    );
    assert_eq!(
        next.attempt_deadline_at,
        Some(at(300)),
        "the doubt ends with the first attempt, not the second"
    );
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::OutcomeUnknown,
            State::InProgress,
            State::Unknown,
            FIRST_FENCE + 1,
            2,
            CODE
        )
    );

    // However many decline in turn, each next owner is told the same end.
    for attempt in 3..=4 {
        sim.now += secs(10);
        let ClaimAnswer::ReconcileFirst(doubt) = sim.claim_as(b"next").claim_answer() else {
            panic!("attempt {attempt}: not a takeover");
        };
        let previous = doubt.previous;
        assert_eq!(previous.state, State::Unknown, "attempt {attempt}");
        assert_eq!(
            previous.attempt_deadline_at,
            Some(at(300)),
            "attempt {attempt}"
        );
        assert_eq!(
            doubt.settles_at.map(|settles_at| settles_at - sim.now),
            Some(at(300) - sim.now),
            "attempt {attempt}"
        );
        sim.now += secs(1);
        let fence = sim.record.fence;
        sim.fail(fence, FailDisposition::NotStarted, secs(0))
            .written();
        assert_eq!(sim.record.attempt_deadline_at, Some(at(300)));
    }

    // A reconciler may settle it as not applied once the first attempt is
    // over, not only after the decliners' deadlines.
    let fence = sim.record.fence;
    sim.now = at(299);
    assert_eq!(
        sim.reconcile(fence, Resolution::NotApplied).error(),
        &refused(Refusal::AttemptStillRunning, State::Unknown)
    );
    sim.now = at(300);
    sim.reconcile(fence, Resolution::NotApplied).written();
    assert_eq!(sim.record.state, State::RetryWait);
}

#[test]
fn an_attempt_that_reports_unknown_after_a_takeover_extends_the_doubt_to_its_own_deadline() {
    // The contrast: UNKNOWN says this attempt may have run its effect.
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.claim_as(b"second");
    sim.now = at(40);
    sim.fail(FIRST_FENCE + 1, FailDisposition::Unknown, secs(0))
        .written();
    assert_eq!(sim.record.attempt_deadline_at, Some(at(331)));
    sim.now = at(50);
    let ClaimAnswer::ReconcileFirst(Doubt { previous, .. }) = sim.claim_as(b"third").claim_answer()
    else {
        panic!("not a takeover");
    };
    assert_eq!(previous.attempt_deadline_at, Some(at(331)));
}

#[test]
fn a_declined_takeover_on_the_last_attempt_needs_reconciliation() {
    let mut sim = Sim::fresh_with(|record| record.max_attempts = 2);
    sim.now = at(31);
    sim.claim_as(b"second");
    sim.now = at(40);
    sim.fail(FIRST_FENCE + 1, FailDisposition::NotStarted, secs(0))
        .written();
    assert_eq!(sim.record.state, State::Unknown);
    sim.now = at(50);
    let step = sim.claim_as(b"third");
    assert_eq!(step.claim_answer(), ClaimAnswer::NeedsReconciliation);
    step.assert_no_effects();
}

#[test]
fn a_resent_decline_is_written_again_and_a_different_fail_after_it_is_a_mismatch() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.claim_as(b"second");
    sim.now = at(40);
    sim.fail(FIRST_FENCE + 1, FailDisposition::NotStarted, secs(0))
        .written();
    let after = sim.record.clone();
    sim.now = at(41);
    let resent = sim.fail(FIRST_FENCE + 1, FailDisposition::NotStarted, secs(0));
    resent.written();
    resent.assert_no_effects();
    let other = sim.fail(FIRST_FENCE + 1, FailDisposition::Unknown, secs(0));
    assert_eq!(
        other.error(),
        &refused(Refusal::RequestMismatch, State::Unknown)
    );
    assert_eq!(sim.record, after);
}

#[test]
fn resent_fail_is_written_without_effects_even_after_a_new_owner_took_over() {
    let mut sim = retry_wait(|_| {});
    sim.now = at(2);
    let resent = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(10));
    resent.written();
    resent.assert_no_effects();

    sim.now = at(11);
    assert_eq!(
        sim.claim_as(b"retrier").claim_answer(),
        ClaimAnswer::Acquired
    );
    let retried = sim.record.clone();
    sim.now = at(12);
    let resent = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(10));
    resent.written();
    resent.assert_no_effects();
    assert_eq!(sim.record, retried);
}

#[test]
fn fail_resent_with_another_request_is_request_mismatch() {
    let mut sim = Sim::new();
    sim.now = at(10);
    sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0))
        .written();
    for (disposition, retry_after) in [
        (FailDisposition::Terminal, secs(0)),
        (FailDisposition::Retryable, secs(0)),
        (FailDisposition::Unknown, secs(5)),
    ] {
        let step = sim.fail(FIRST_FENCE, disposition, retry_after);
        assert_eq!(
            step.error(),
            &refused(Refusal::RequestMismatch, State::Unknown)
        );
        step.assert_no_effects();
    }
    let step = sim.complete(FIRST_FENCE, "it worked after all");
    assert_eq!(
        step.error(),
        &refused(Refusal::RequestMismatch, State::Unknown)
    );
}

#[test]
fn stale_fence_cannot_fail_after_takeover() {
    for disposition in [
        FailDisposition::Terminal,
        FailDisposition::Retryable,
        FailDisposition::Unknown,
    ] {
        let mut sim = Sim::new();
        sim.now = at(31);
        sim.claim_as(b"taker");
        let after_takeover = sim.record.clone();
        let step = sim.fail(FIRST_FENCE, disposition, secs(1));
        assert_eq!(step.error(), &lease_lost(11, State::InProgress));
        step.assert_only_history(entry(
            HistoryEvent::StaleWriteRefused,
            State::InProgress,
            State::InProgress,
            FIRST_FENCE,
            2,
            "fail",
        ));
        assert_eq!(sim.record, after_takeover);
    }
}

#[test]
fn stale_fence_is_refused_and_recorded_in_every_state() {
    for (name, mut sim) in every_state() {
        let before = sim.record.clone();
        let current = before.fence;
        for stale in [current - 1, current + 1] {
            let steps = [
                ("renew", sim.renew(stale)),
                ("complete", sim.complete(stale, "x")),
                ("fail", sim.fail(stale, FailDisposition::Terminal, secs(0))),
                ("reconcile", sim.reconcile(stale, Resolution::NotApplied)),
            ];
            for (rpc, step) in steps {
                assert_eq!(
                    step.error(),
                    &lease_lost(current, before.state),
                    "{name} {rpc}"
                );
                step.assert_only_history(entry(
                    HistoryEvent::StaleWriteRefused,
                    before.state,
                    before.state,
                    stale,
                    before.attempt,
                    rpc,
                ));
            }
        }
        assert_eq!(sim.record, before, "{name}");
    }
}

/// Issue 17, item 4: a RETRYABLE from an attempt that took over a doubt says
/// only that this attempt's effect did not happen. The attempt it replaced
/// may still be in flight until its deadline: the next attempt is told so
/// (ReconcileFirst), not Acquired ("no earlier attempt can have taken
/// effect"), and the doubt is not ended as FAILED.
#[test]
fn a_retryable_failure_after_a_takeover_keeps_the_doubt_of_the_attempt_it_took_over() {
    let mut sim = Sim::new();
    sim.clock_margin = secs(3);
    // The first attempt (deadline at 300) stalls; its lease runs out.
    sim.now = at(31);
    let ClaimAnswer::ReconcileFirst(Doubt {
        previous: first, ..
    }) = sim.claim_as(b"second").claim_answer()
    else {
        panic!("not a takeover");
    };
    sim.now = at(40);
    sim.fail(FIRST_FENCE + 1, FailDisposition::Retryable, secs(5))
        .written();
    assert_eq!(sim.record.state, State::RetryWait);
    assert_eq!(sim.record.taken_over_from, Some(first));

    // Due at 45, while the first attempt may still run: ReconcileFirst about
    // the first attempt, settling at its deadline plus the margin.
    sim.now = at(45);
    let step = sim.claim_as(b"third");
    assert_eq!(
        step.claim_answer(),
        ClaimAnswer::ReconcileFirst(Doubt {
            previous: first,
            settles_at: Some(at(303)),
        })
    );
    assert_eq!(step.drawn_fence, Some(FIRST_FENCE + 2));
    assert_eq!(step.history().event, HistoryEvent::RetryStarted);
    assert_eq!(
        step.history().detail,
        "earlier attempt may still be in flight; previous attempt deadline \
         2025-06-15T15:11:40.000Z"
    );
    assert_eq!(sim.record.taken_over_from, Some(first));
    assert_eq!(sim.record.attempt, 3);

    // The same again for the next retry, until the first attempt settles;
    // after that a retry is a fresh attempt.
    sim.now = at(50);
    sim.fail(FIRST_FENCE + 2, FailDisposition::Retryable, secs(1))
        .written();
    sim.now = at(302);
    assert!(matches!(
        sim.claim_as(b"fourth").claim_answer(),
        ClaimAnswer::ReconcileFirst(Doubt { previous, .. }) if previous == first
    ));
    sim.now = at(310);
    sim.fail(FIRST_FENCE + 3, FailDisposition::Retryable, secs(0))
        .written();
    let step = sim.claim_as(b"fifth");
    assert_eq!(step.claim_answer(), ClaimAnswer::Acquired);
    assert_eq!(sim.record.taken_over_from, None);
}

#[test]
fn a_retryable_failure_after_a_takeover_with_no_budget_left_needs_reconciliation() {
    // The last attempt took over a doubt that has not settled: FAILED
    // (ATTEMPTS_EXHAUSTED) would tell callers the effect did not happen.
    let mut sim = Sim::fresh_with(|record| record.max_attempts = 2);
    sim.clock_margin = secs(3);
    sim.now = at(31);
    sim.claim_as(b"second");
    sim.now = at(40);
    let step = sim.fail(FIRST_FENCE + 1, FailDisposition::Retryable, secs(5));
    step.written();
    assert_eq!(sim.record.state, State::Unknown);
    assert_eq!(sim.record.attempt_deadline_at, Some(at(300)));
    assert_eq!(step.history().event, HistoryEvent::OutcomeUnknown);
    sim.now = at(50);
    assert_eq!(
        sim.claim_as(b"third").claim_answer(),
        ClaimAnswer::NeedsReconciliation
    );

    // Once the doubt has settled, the same failure ends the operation.
    let mut settled = Sim::fresh_with(|record| record.max_attempts = 2);
    settled.clock_margin = secs(3);
    settled.now = at(31);
    settled.claim_as(b"second");
    settled.now = at(303);
    let step = settled.fail(FIRST_FENCE + 1, FailDisposition::Retryable, secs(5));
    assert_eq!(
        step.failure_reason(),
        Some(FailureReason::AttemptsExhausted)
    );
}
