//! Reconcile: resolving unresolved operations from outside evidence.

use crate::command::{FailDisposition, Resolution};
use crate::error::Refusal;
use crate::model::{
    FailureReason, HistoryEvent, Outcome, State, WriteAnswer, WriteReceipt, Writer,
};
use crate::transition::{ClaimAnswer, NOT_APPLIED_WITH_GRANT};

use super::{
    CODE, FIRST_FENCE, OTHER, Sim, at, entry, every_state, lease_lost, reconcile_cmd, refused,
    report, result, retention, retry_wait, secs, terminal_states,
};

// ---------------------------------------------------------------------------
// Reconcile
// ---------------------------------------------------------------------------

#[test]
fn reconcile_on_a_live_lease_is_refused_lease_still_live() {
    let mut sim = Sim::new();
    sim.now = at(29);
    for resolution in [
        Resolution::Succeeded(result("ok")),
        Resolution::Failed(report(CODE)),
        Resolution::NotApplied,
    ] {
        let step = sim.reconcile(FIRST_FENCE, resolution);
        assert_eq!(
            step.error(),
            &refused(Refusal::LeaseStillLive, State::InProgress)
        );
        step.assert_no_effects();
    }
}

/// The unresolved states a Reconcile may resolve, before the attempt deadline.
fn unresolved_states() -> Vec<(&'static str, Sim)> {
    every_state()
        .into_iter()
        .filter(|(_, sim)| sim.record.unresolved(sim.now) || sim.record.state == State::RetryWait)
        .collect()
}

#[test]
fn reconcile_succeeded_or_failed_resolves_every_unresolved_state_with_a_new_fence() {
    let states = unresolved_states();
    assert_eq!(states.len(), 5);
    for (name, sim) in states {
        for (resolution, state, detail) in [
            (
                Resolution::Succeeded(result("found")),
                State::Succeeded,
                "succeeded",
            ),
            (Resolution::Failed(report(CODE)), State::Failed, "failed"),
        ] {
            let mut sim = sim.clone();
            if state == State::Failed && sim.record.state != State::RetryWait {
                // FAILED, like NOT_APPLIED, waits for the attempt deadline.
                sim.now = at(300);
            }
            let before = sim.record.clone();
            let command = reconcile_cmd(before.fence, resolution.clone());
            let step = sim.reconcile(before.fence, resolution);
            step.written();
            assert_eq!(step.drawn_fence, Some(before.fence + 1), "{name}");
            let next = step.next();
            assert_eq!(next.state, state, "{name}");
            assert_eq!(next.fence, before.fence + 1, "{name}");
            assert_eq!(
                next.attempt, before.attempt,
                "a reconciler is not an attempt"
            );
            let expected_outcome = match state {
                State::Succeeded => Outcome::Succeeded(result("found")),
                _ => Outcome::Failed {
                    reason: FailureReason::Terminal,
                    error: report(CODE),
                },
            };
            assert_eq!(next.outcome, Some(expected_outcome), "{name}");
            assert_eq!(next.completed_at, Some(sim.now));
            assert_eq!(next.retain_until, Some(sim.now + retention()));
            assert_eq!(
                next.last_write,
                Some(WriteReceipt {
                    fence: before.fence,
                    digest: command.digest(),
                    writer: Writer::Reconciler,
                    answer: Some(WriteAnswer::of(next)),
                }),
                "the receipt names the fence the reconciler expected, and answers \
                 with the one it drew"
            );
            assert_eq!(
                step.history(),
                &entry(
                    HistoryEvent::Reconciled,
                    before.state,
                    state,
                    before.fence + 1,
                    before.attempt,
                    detail
                ),
                "{name}"
            );
        }
    }
}

#[test]
fn not_applied_or_failed_before_the_attempt_deadline_is_refused_attempt_still_running() {
    // Both say the effect did not happen; a stalled owner's call may still
    // land until the deadline (issue 17, item 8, for FAILED).
    for (name, sim) in unresolved_states() {
        if sim.record.state == State::RetryWait {
            continue;
        }
        for resolution in [Resolution::NotApplied, Resolution::Failed(report(CODE))] {
            let mut sim = sim.clone();
            let before = sim.record.clone();
            let step = sim.reconcile(before.fence, resolution);
            assert_eq!(
                step.error(),
                &refused(Refusal::AttemptStillRunning, before.state),
                "{name}"
            );
            step.assert_no_effects();
        }
    }
}

#[test]
fn a_reconciliation_that_says_no_effect_waits_for_the_deadline_plus_the_clock_margin() {
    for (name, sim) in unresolved_states() {
        if sim.record.state == State::RetryWait {
            continue;
        }
        for resolution in [Resolution::NotApplied, Resolution::Failed(report(CODE))] {
            let mut sim = sim.clone();
            sim.clock_margin = secs(3);
            let fence = sim.record.fence;
            sim.now = at(302);
            assert_eq!(
                sim.reconcile(fence, resolution.clone()).error(),
                &refused(Refusal::AttemptStillRunning, sim.record.state),
                "{name}: within the margin"
            );
            sim.now = at(303);
            sim.reconcile(fence, resolution).written();
        }
        // SUCCEEDED is evidence at any time.
        let mut sim = sim.clone();
        sim.clock_margin = secs(3);
        let fence = sim.record.fence;
        sim.reconcile(fence, Resolution::Succeeded(result("found")))
            .written();
    }
}

#[test]
fn a_retry_still_doubting_a_taken_over_attempt_cannot_be_reconciled_as_no_effect() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.claim_as(b"second");
    sim.now = at(40);
    sim.fail(FIRST_FENCE + 1, FailDisposition::Retryable, secs(5))
        .written();
    assert_eq!(sim.record.state, State::RetryWait);
    for resolution in [Resolution::NotApplied, Resolution::Failed(report(CODE))] {
        let step = sim.clone().reconcile(FIRST_FENCE + 1, resolution.clone());
        assert_eq!(
            step.error(),
            &refused(Refusal::AttemptStillRunning, State::RetryWait)
        );
        let mut after = sim.clone();
        after.now = at(300);
        after.reconcile(FIRST_FENCE + 1, resolution).written();
    }
}

#[test]
fn not_applied_after_the_attempt_deadline_releases_a_retry_due_now_with_a_new_fence() {
    for (name, mut sim) in unresolved_states() {
        if sim.record.state == State::RetryWait {
            continue;
        }
        sim.now = at(300);
        let before = sim.record.clone();
        let step = sim.reconcile(before.fence, Resolution::NotApplied);
        step.written();
        assert_eq!(step.drawn_fence, Some(11), "{name}");
        let next = step.next();
        assert_eq!((next.state, next.fence), (State::RetryWait, 11), "{name}");
        assert_eq!(next.retry_at, Some(at(300)));
        assert_eq!(next.lease_expires_at, None);
        assert_eq!(next.attempt, before.attempt);
        // A spent budget gets one more attempt (DESIGN: NOT_APPLIED settles
        // the doubt that spent it).
        let budget_spent = before.attempt >= before.max_attempts;
        assert_eq!(
            next.max_attempts,
            if budget_spent {
                before.attempt + 1
            } else {
                before.max_attempts
            },
            "{name}"
        );
        assert_eq!(
            step.history(),
            &entry(
                HistoryEvent::Reconciled,
                before.state,
                State::RetryWait,
                11,
                before.attempt,
                if budget_spent {
                    NOT_APPLIED_WITH_GRANT
                } else {
                    "not_applied"
                }
            ),
            "{name}"
        );
    }
}

#[test]
fn not_applied_on_retry_wait_is_allowed_before_the_attempt_deadline() {
    let mut sim = retry_wait(|_| {});
    sim.now = at(5);
    let step = sim.reconcile(FIRST_FENCE, Resolution::NotApplied);
    step.written();
    assert_eq!(step.next().state, State::RetryWait);
    assert_eq!(step.next().retry_at, Some(at(5)), "due now, not at t0+11");
    assert_eq!(step.next().fence, 11);
}

#[test]
fn not_applied_then_claim_starts_a_new_attempt_acquired() {
    let mut sim = Sim::new();
    sim.now = at(300);
    sim.reconcile(FIRST_FENCE, Resolution::NotApplied).written();
    let step = sim.claim_as(b"retrier");
    assert_eq!(step.claim_answer(), ClaimAnswer::Acquired);
    assert_eq!(step.drawn_fence, Some(12));
    assert_eq!((sim.record.fence, sim.record.attempt), (12, 2));
}

#[test]
fn not_applied_with_budget_spent_grants_one_more_attempt_recorded_in_history() {
    // The budget is spent on unknown outcomes: only a reconciler may resolve it.
    let mut sim = Sim::last_attempt();
    sim.now = at(31);
    assert_eq!(
        sim.claim_as(OTHER).claim_answer(),
        ClaimAnswer::NeedsReconciliation
    );
    let spent = sim.record.clone();
    assert_eq!(spent.attempt, spent.max_attempts);
    // Evidence that the effect never happened: the request provably never
    // ran, so it gets its attempt, not ATTEMPTS_EXHAUSTED.
    sim.now = at(300);
    let step = sim.reconcile(FIRST_FENCE, Resolution::NotApplied);
    step.written();
    assert_eq!(step.next().max_attempts, spent.attempt + 1);
    assert_eq!(step.history().detail, NOT_APPLIED_WITH_GRANT);
    let step = sim.claim_as(OTHER);
    assert_eq!(step.claim_answer(), ClaimAnswer::Acquired);
    assert_eq!(sim.record.state, State::InProgress);
    assert_eq!(sim.record.attempt, spent.attempt + 1);
    assert_eq!(
        sim.record.attempt, sim.record.max_attempts,
        "exactly one more"
    );
    // The old owner's late write is stale.
    let step = sim.complete(FIRST_FENCE, "ok");
    assert_eq!(
        step.error(),
        &lease_lost(sim.record.fence, State::InProgress)
    );
    // That attempt failing retryably again ends it: one attempt was granted.
    let fence = sim.record.fence;
    sim.fail(fence, FailDisposition::Retryable, secs(1))
        .written();
    assert_eq!(sim.record.state, State::Failed);
    assert!(matches!(
        sim.record.outcome,
        Some(Outcome::Failed {
            reason: FailureReason::AttemptsExhausted,
            ..
        })
    ));
}

#[test]
fn not_applied_within_the_budget_grants_nothing_extra() {
    let mut sim = Sim::new();
    sim.now = at(300);
    let before = sim.record.clone();
    let step = sim.reconcile(FIRST_FENCE, Resolution::NotApplied);
    assert_eq!(step.next().max_attempts, before.max_attempts);
    assert_eq!(step.history().detail, "not_applied");
}

#[test]
fn resent_reconcile_is_written_without_effects_even_after_the_record_moved_on() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.reconcile(FIRST_FENCE, Resolution::Succeeded(result("found")))
        .written();
    let reconciled = sim.record.clone();
    sim.now = at(32);
    let step = sim.reconcile(FIRST_FENCE, Resolution::Succeeded(result("found")));
    step.written();
    step.assert_no_effects();
    assert_eq!(sim.record, reconciled);

    let mut sim = Sim::new();
    sim.now = at(300);
    sim.reconcile(FIRST_FENCE, Resolution::NotApplied).written();
    sim.claim_as(b"retrier");
    let retried = sim.record.clone();
    let step = sim.reconcile(FIRST_FENCE, Resolution::NotApplied);
    step.written();
    step.assert_no_effects();
    assert_eq!(sim.record, retried);
}

#[test]
fn reconcile_resent_with_another_resolution_is_request_mismatch() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.reconcile(FIRST_FENCE, Resolution::Succeeded(result("found")))
        .written();
    let step = sim.reconcile(FIRST_FENCE, Resolution::Failed(report(CODE)));
    assert_eq!(
        step.error(),
        &refused(Refusal::RequestMismatch, State::Succeeded)
    );
    step.assert_no_effects();
}

#[test]
fn late_owner_complete_after_a_reconcile_is_lease_lost_not_request_mismatch() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.reconcile(FIRST_FENCE, Resolution::Succeeded(result("found")))
        .written();
    let reconciled = sim.record.clone();
    sim.now = at(40);
    // The same bytes the reconciler stored: still another request.
    for body in ["found", "mine"] {
        let step = sim.complete(FIRST_FENCE, body);
        assert_eq!(step.error(), &lease_lost(11, State::Succeeded));
        step.assert_only_history(entry(
            HistoryEvent::StaleWriteRefused,
            State::Succeeded,
            State::Succeeded,
            FIRST_FENCE,
            1,
            "complete",
        ));
    }
    let step = sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0));
    assert_eq!(step.error(), &lease_lost(11, State::Succeeded));
    assert_eq!(sim.record, reconciled);
}

#[test]
fn reconcile_on_a_terminal_record_is_refused_operation_terminal() {
    for (name, mut sim) in terminal_states() {
        let before = sim.record.clone();
        for resolution in [
            Resolution::Succeeded(result("found")),
            Resolution::Failed(report(CODE)),
            Resolution::NotApplied,
        ] {
            let step = sim.reconcile(before.fence, resolution);
            assert_eq!(
                step.error(),
                &refused(Refusal::OperationTerminal, before.state),
                "{name}"
            );
            step.assert_no_effects();
        }
    }
}
