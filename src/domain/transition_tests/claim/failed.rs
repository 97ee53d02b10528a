//! FAILED → Claim, for an operation whose policy says `on_failed:
//! new_attempt` (and for one that does not: the replay).

use chrono::TimeDelta;

use crate::domain::command::{ClaimCommand, FailDisposition};
use crate::domain::error::Error;
use crate::domain::model::{HistoryEvent, OnFailed, OperationRecord, PreviousAttempt, State};
use crate::domain::transition::{ClaimAnswer, PendingReason};

use crate::domain::transition_tests::{
    FIRST_FENCE, MAX_ATTEMPTS, OTHER, OWNER, Sim, assert_pending, at, claim_as, entry, fingerprint,
    inserted_record, op_id, reconcile_first, retention, secs, t0,
};

/// The fresh operation (`on_failed` as given, then `adjust`ed) whose first
/// attempt failed TERMINAL at t0+1; now t0+2.
fn failed_with(on_failed: OnFailed, adjust: impl FnOnce(&mut OperationRecord)) -> Sim {
    let command = ClaimCommand {
        on_failed,
        ..claim_as(OWNER)
    };
    let mut record = inserted_record(&command, FIRST_FENCE, t0());
    adjust(&mut record);
    let mut sim = Sim::with(record);
    sim.now = at(1);
    sim.fail(FIRST_FENCE, FailDisposition::Terminal, secs(0))
        .written();
    assert_eq!(sim.record.state, State::Failed);
    sim.now = at(2);
    sim
}

fn failed(on_failed: OnFailed) -> Sim {
    failed_with(on_failed, |_| {})
}

const REPLACED: &str = "replaces the failure of attempt 1 (fence 10, terminal: card_declined)";

/// What a Claim of a FAILED operation is told.
#[derive(Debug, Clone, Copy)]
enum Expected {
    Replay,
    NewAttempt,
    KeyReused,
}

#[test]
fn a_claim_of_a_failed_operation_replays_unless_its_policy_opted_in() {
    use Expected::{KeyReused, NewAttempt, Replay};
    // (case, on_failed, token, fingerprint byte, expected)
    let cases: [(&str, OnFailed, &[u8], u8, Expected); 8] = [
        ("replay: another caller", OnFailed::Replay, OTHER, 1, Replay),
        ("replay: no token", OnFailed::Replay, b"", 1, Replay),
        (
            "replay: the failed owner",
            OnFailed::Replay,
            OWNER,
            1,
            Replay,
        ),
        (
            "replay: another request",
            OnFailed::Replay,
            OTHER,
            3,
            KeyReused,
        ),
        (
            "new attempt: another caller",
            OnFailed::NewAttempt,
            OTHER,
            1,
            NewAttempt,
        ),
        (
            "new attempt: no token",
            OnFailed::NewAttempt,
            b"",
            1,
            NewAttempt,
        ),
        // Tokens are fresh per attempt: the failed attempt's own token is
        // its Claim re-sent late, not a decision to try again.
        (
            "new attempt: the failed owner re-sent",
            OnFailed::NewAttempt,
            OWNER,
            1,
            Replay,
        ),
        (
            "new attempt: another request",
            OnFailed::NewAttempt,
            OTHER,
            3,
            KeyReused,
        ),
    ];
    for (case, on_failed, token, print, expected) in cases {
        let mut sim = failed(on_failed);
        let before = sim.record.clone();
        let step = sim.claim(&ClaimCommand {
            fingerprint: fingerprint(print),
            ..claim_as(token)
        });
        match expected {
            KeyReused => {
                assert_eq!(
                    step.error(),
                    &Error::KeyReused {
                        operation_id: op_id()
                    },
                    "{case}"
                );
                step.assert_conflict_counted();
            }
            Replay => {
                assert_eq!(step.claim_answer(), ClaimAnswer::Completed, "{case}");
                step.assert_no_effects();
                assert_eq!(sim.record, before, "{case}");
            }
            NewAttempt => {
                assert_eq!(step.claim_answer(), ClaimAnswer::Acquired, "{case}");
                assert_eq!(step.drawn_fence, Some(FIRST_FENCE + 1), "{case}");
                let next = step.next();
                assert_eq!(
                    (next.state, next.fence, next.attempt, next.max_attempts),
                    (State::InProgress, FIRST_FENCE + 1, 2, MAX_ATTEMPTS),
                    "{case}"
                );
                assert_eq!(next.claim_token, token.to_vec(), "{case}");
                assert_eq!(next.taken_over_from, None, "{case}");
                assert_eq!(next.lease_expires_at, Some(at(32)), "{case}");
                assert_eq!(next.attempt_deadline_at, Some(at(302)), "{case}");
                assert_eq!((&next.outcome, next.outcome_kind), (&None, None), "{case}");
                assert_eq!(
                    (next.completed_at, next.retain_until),
                    (None, None),
                    "{case}"
                );
                assert_eq!(next.on_failed, OnFailed::NewAttempt, "{case}");
                assert_eq!(
                    step.history(),
                    &entry(
                        HistoryEvent::RetriedAfterFailure,
                        State::Failed,
                        State::InProgress,
                        FIRST_FENCE + 1,
                        2,
                        REPLACED
                    ),
                    "{case}"
                );
            }
        }
    }
}

#[test]
fn the_operation_deadline_passed_replays_the_failure() {
    for (deadline, new_attempt) in [(at(2), false), (at(1), false), (at(3), true)] {
        let mut sim = failed_with(OnFailed::NewAttempt, |record| {
            record.operation_deadline_at = Some(deadline);
        });
        let step = sim.claim_as(OTHER);
        if new_attempt {
            assert_eq!(step.claim_answer(), ClaimAnswer::Acquired, "{deadline}");
            assert_eq!(step.next().state, State::InProgress);
        } else {
            assert_eq!(step.claim_answer(), ClaimAnswer::Completed, "{deadline}");
            step.assert_no_effects();
        }
    }
}

#[test]
fn a_spent_budget_grants_one_more_attempt_recorded_in_history() {
    let mut sim = failed_with(OnFailed::NewAttempt, |record| record.max_attempts = 1);
    let step = sim.claim_as(OTHER);
    assert_eq!(step.claim_answer(), ClaimAnswer::Acquired);
    let next = step.next();
    assert_eq!((next.attempt, next.max_attempts), (2, 2));
    assert_eq!(
        step.history().detail,
        format!("{REPLACED}; one more attempt granted")
    );
    // Failing again ends it at once (no budget left), and the next Claim
    // grants another: every new attempt is a caller's own decision.
    sim.now = at(3);
    sim.fail(FIRST_FENCE + 1, FailDisposition::Retryable, secs(1))
        .written();
    assert_eq!(sim.record.state, State::Failed);
    sim.now = at(4);
    let again = sim.claim_as(b"third");
    assert_eq!(again.claim_answer(), ClaimAnswer::Acquired);
    assert_eq!((again.next().attempt, again.next().max_attempts), (3, 3));
    assert!(
        again
            .history()
            .detail
            .starts_with("replaces the failure of attempt 2 (fence 11, attempts_exhausted: ")
    );
}

#[test]
fn past_the_most_attempts_an_operation_ever_runs_the_failure_is_replayed() {
    use crate::domain::transition::MOST_ATTEMPTS_EVER;
    for (attempt, new_attempt) in [
        (MOST_ATTEMPTS_EVER - 1, true),
        (MOST_ATTEMPTS_EVER, false),
        (MOST_ATTEMPTS_EVER + 1, false),
    ] {
        let mut sim = failed_with(OnFailed::NewAttempt, |record| {
            record.attempt = attempt;
            record.max_attempts = attempt;
        });
        let step = sim.claim_as(OTHER);
        if new_attempt {
            assert_eq!(step.claim_answer(), ClaimAnswer::Acquired, "{attempt}");
            assert_eq!(step.next().attempt, MOST_ATTEMPTS_EVER);
        } else {
            assert_eq!(step.claim_answer(), ClaimAnswer::Completed, "{attempt}");
            step.assert_no_effects();
        }
    }
}

#[test]
fn the_most_attempts_ever_is_the_largest_budget_a_claim_may_ask() {
    assert_eq!(
        crate::domain::transition::MOST_ATTEMPTS_EVER,
        crate::domain::limits::Limits::default().max_attempts
    );
}

#[test]
fn within_the_budget_the_new_attempt_counts_against_it() {
    let mut sim = failed(OnFailed::NewAttempt);
    let step = sim.claim_as(OTHER);
    assert_eq!(step.next().max_attempts, MAX_ATTEMPTS);
    assert_eq!(step.history().detail, REPLACED);
}

#[test]
fn the_new_owner_resending_its_claim_gets_the_same_answer_and_others_wait() {
    let mut sim = failed(OnFailed::NewAttempt);
    let first = sim.claim_as(OTHER);
    assert_eq!(first.claim_answer(), ClaimAnswer::Acquired);
    let owner = sim.record.clone();
    sim.now = at(3);
    let resent = sim.claim_as(OTHER);
    assert_eq!(resent.claim_answer(), ClaimAnswer::Acquired);
    resent.assert_no_effects();
    // A concurrent Claim decided after the winner's write: IN_PROGRESS.
    for token in [b"third".as_slice(), b"", OWNER] {
        assert_pending(&sim.claim_as(token), PendingReason::InProgress, secs(29));
    }
    assert_eq!(sim.record, owner, "one new attempt, not two");
}

#[test]
fn the_new_attempt_completes_and_then_every_claim_replays_it() {
    let mut sim = failed(OnFailed::NewAttempt);
    sim.claim_as(OTHER);
    sim.now = at(5);
    sim.complete(FIRST_FENCE + 1, "ok").written();
    assert_eq!(sim.record.state, State::Succeeded);
    assert_eq!(sim.record.retain_until, Some(at(5) + retention()));
    sim.now = at(6);
    for token in [OTHER, OWNER, b"late".as_slice()] {
        let step = sim.claim_as(token);
        assert_eq!(step.claim_answer(), ClaimAnswer::Completed);
        step.assert_no_effects();
    }
}

#[test]
fn the_failed_owners_late_writes_are_stale_after_the_new_attempt() {
    let mut sim = failed(OnFailed::NewAttempt);
    sim.claim_as(OTHER);
    sim.now = at(3);
    // Its Fail re-sent after a lost reply: still its original answer.
    sim.fail(FIRST_FENCE, FailDisposition::Terminal, secs(0))
        .written()
        .assert_no_effects();
    // Anything else with its fence is refused.
    let complete = sim.complete(FIRST_FENCE, "late");
    assert!(matches!(complete.error(), Error::LeaseLost { .. }));
    assert_eq!(sim.record.state, State::InProgress);
}

/// A taken-over attempt that may still run: the taker fails TERMINAL,
/// which settles its own attempt but not the one it took over.
fn failed_after_takeover() -> (Sim, PreviousAttempt) {
    let command = ClaimCommand {
        on_failed: OnFailed::NewAttempt,
        ..claim_as(OWNER)
    };
    let mut sim = Sim::with(inserted_record(&command, FIRST_FENCE, t0()));
    sim.now = at(31);
    let previous = PreviousAttempt {
        state: State::InProgress,
        fence: FIRST_FENCE,
        attempt_deadline_at: Some(at(300)),
    };
    let taken = sim.claim_as(b"taker");
    assert_eq!(taken.claim_answer(), reconcile_first(previous));
    sim.now = at(32);
    sim.fail(FIRST_FENCE + 1, FailDisposition::Terminal, secs(0))
        .written();
    assert_eq!(sim.record.state, State::Failed);
    assert_eq!(sim.record.taken_over_from, Some(previous));
    (sim, previous)
}

#[test]
fn a_failure_that_still_doubts_a_taken_over_attempt_is_retried_reconcile_first() {
    let (mut sim, previous) = failed_after_takeover();
    sim.now = at(33);
    let step = sim.claim_as(OTHER);
    assert_eq!(step.claim_answer(), reconcile_first(previous));
    let next = step.next();
    assert_eq!((next.state, next.attempt), (State::InProgress, 3));
    assert_eq!(next.taken_over_from, Some(previous));
    assert_eq!(
        step.history().detail,
        "replaces the failure of attempt 2 (fence 11, terminal: card_declined); earlier \
         attempt may still be in flight; previous attempt deadline 2025-06-15T15:11:40.000Z"
    );
    // Re-sent: ReconcileFirst again, never Acquired.
    sim.now = at(34);
    let resent = sim.claim_as(OTHER);
    assert_eq!(resent.claim_answer(), reconcile_first(previous));
    resent.assert_no_effects();
}

#[test]
fn once_the_taken_over_attempt_has_settled_the_retry_is_acquired() {
    let (mut sim, _) = failed_after_takeover();
    for (margin, now, doubted) in [
        (TimeDelta::zero(), at(300), false),
        (secs(3), at(302), true),
        (secs(3), at(303), false),
    ] {
        let mut sim = sim.clone();
        sim.clock_margin = margin;
        sim.now = now;
        let step = sim.claim_as(OTHER);
        match step.claim_answer() {
            ClaimAnswer::ReconcileFirst(_) => assert!(doubted, "{now}"),
            ClaimAnswer::Acquired => {
                assert!(!doubted, "{now}");
                assert_eq!(step.next().taken_over_from, None);
            }
            other => panic!("{other:?}"),
        }
    }
    sim.now = at(301);
    assert_eq!(sim.claim_as(OTHER).claim_answer(), ClaimAnswer::Acquired);
}

#[test]
fn a_tombstone_of_an_opted_in_failure_still_answers_result_expired() {
    let mut sim = failed(OnFailed::NewAttempt);
    sim.now = at(1) + retention();
    sim.sweep().expect("past retention");
    assert_eq!(sim.record.state, State::Expired);
    let step = sim.claim_as(OTHER);
    assert_eq!(
        step.error(),
        &Error::ResultExpired {
            operation_id: op_id()
        }
    );
    step.assert_no_effects();
}

#[test]
fn a_first_claim_stores_the_policys_on_failed() {
    for on_failed in [OnFailed::Replay, OnFailed::NewAttempt] {
        let command = ClaimCommand {
            on_failed,
            ..claim_as(OWNER)
        };
        assert_eq!(
            inserted_record(&command, FIRST_FENCE, t0()).on_failed,
            on_failed
        );
    }
}
