//! IN_PROGRESS f → Complete f

use crate::command::FailDisposition;
use crate::error::Refusal;
use crate::model::{
    FailureReason, HistoryEvent, OperationRecord, Outcome, State, WriteAnswer, WriteReceipt, Writer,
};
use crate::transition::ClaimAnswer;

use crate::transition_tests::{
    CODE, FIRST_FENCE, OTHER, Sim, at, complete_cmd, entry, fresh, lease_lost, refused, report,
    result, retention, secs,
};

#[test]
fn complete_with_the_current_fence_succeeds_and_keeps_a_receipt() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let command = complete_cmd(FIRST_FENCE, "ok");
    let step = sim.complete(FIRST_FENCE, "ok");
    step.written();
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::Succeeded, FIRST_FENCE, 1)
    );
    assert_eq!(next.outcome, Some(Outcome::Succeeded(result("ok"))));
    assert_eq!(next.outcome_kind, Some(State::Succeeded));
    assert_eq!(next.lease_expires_at, None);
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
            HistoryEvent::Completed,
            State::InProgress,
            State::Succeeded,
            FIRST_FENCE,
            1,
            ""
        )
    );
}

#[test]
fn owner_whose_lease_ran_out_unreplaced_may_still_complete_before_its_attempt_deadline() {
    let mut sim = Sim::new();
    sim.now = at(299);
    let step = sim.complete(FIRST_FENCE, "ok");
    step.written();
    assert_eq!(step.next().state, State::Succeeded);
}

#[test]
fn owner_marked_unknown_by_a_claim_may_still_complete_before_its_attempt_deadline() {
    let mut sim = Sim::last_attempt();
    sim.now = at(31);
    assert_eq!(
        sim.claim_as(OTHER).claim_answer(),
        ClaimAnswer::NeedsReconciliation
    );
    sim.now = at(40);
    let step = sim.complete(FIRST_FENCE, "ok");
    step.written();
    assert_eq!(step.next().state, State::Succeeded);
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::Completed,
            State::Unknown,
            State::Succeeded,
            FIRST_FENCE,
            1,
            ""
        )
    );
}

#[test]
fn owner_marked_unknown_by_a_claim_may_still_fail_before_its_attempt_deadline() {
    let mut sim = Sim::last_attempt();
    sim.now = at(31);
    sim.claim_as(OTHER);
    sim.now = at(40);
    let step = sim.fail(FIRST_FENCE, FailDisposition::Retryable, secs(1));
    step.written();
    assert_eq!(
        step.failure_reason(),
        Some(FailureReason::AttemptsExhausted)
    );
}

#[test]
fn complete_at_or_after_the_attempt_deadline_is_refused_as_a_late_write() {
    let mut expired = Sim::new();
    expired.now = at(300);
    let mut marked = Sim::last_attempt();
    marked.now = at(31);
    marked.claim_as(OTHER);
    marked.now = at(300);
    for (mut sim, state) in [(expired, State::InProgress), (marked, State::Unknown)] {
        let before = sim.record.clone();
        let step = sim.complete(FIRST_FENCE, "late");
        assert_eq!(
            step.error(),
            &refused(Refusal::AttemptDeadlinePassed, state)
        );
        step.assert_only_history(entry(
            HistoryEvent::LateWriteRefused,
            state,
            state,
            FIRST_FENCE,
            1,
            "complete",
        ));
        assert_eq!(sim.record, before);
    }
}

#[test]
fn stale_fence_cannot_complete_after_takeover() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.claim_as(b"taker");
    let after_takeover = sim.record.clone();
    sim.now = at(40);
    let step = sim.complete(FIRST_FENCE, "late");
    assert_eq!(step.error(), &lease_lost(11, State::InProgress));
    step.assert_only_history(entry(
        HistoryEvent::StaleWriteRefused,
        State::InProgress,
        State::InProgress,
        FIRST_FENCE,
        2,
        "complete",
    ));
    assert_eq!(sim.record, after_takeover);
    // The new owner still can.
    sim.complete(11, "ok").written();
}

#[test]
fn resent_complete_with_same_fence_and_digest_is_written_without_effects() {
    let mut sim = Sim::new();
    sim.now = at(10);
    sim.complete(FIRST_FENCE, "ok").written();
    let completed = sim.record.clone();
    // Even after the attempt deadline: it is the original answer, not a write.
    for offset in [11, 400] {
        sim.now = at(offset);
        let step = sim.complete(FIRST_FENCE, "ok");
        step.written();
        step.assert_no_effects();
    }
    assert_eq!(sim.record, completed);
}

#[test]
fn complete_resent_with_another_result_is_request_mismatch() {
    let mut sim = Sim::new();
    sim.now = at(10);
    sim.complete(FIRST_FENCE, "ok").written();
    let step = sim.complete(FIRST_FENCE, "different");
    assert_eq!(
        step.error(),
        &refused(Refusal::RequestMismatch, State::Succeeded)
    );
    step.assert_no_effects();
}

#[test]
fn complete_after_the_owner_failed_is_refused() {
    let mut sim = Sim::new();
    sim.now = at(10);
    sim.fail(FIRST_FENCE, FailDisposition::Terminal, secs(0))
        .written();
    let failed = sim.record.clone();
    let step = sim.complete(FIRST_FENCE, "ok");
    // Same fence, another request: FAILED_PRECONDITION with the state.
    assert_eq!(
        step.error(),
        &refused(Refusal::RequestMismatch, State::Failed)
    );
    step.assert_no_effects();
    assert_eq!(sim.record, failed);
}

#[test]
fn complete_on_a_failed_record_without_a_receipt_for_that_fence_is_operation_terminal() {
    let mut sim = Sim::with(OperationRecord {
        state: State::Failed,
        outcome: Some(Outcome::Failed {
            reason: FailureReason::Terminal,
            error: report(CODE),
        }),
        outcome_kind: Some(State::Failed),
        lease_expires_at: None,
        ..fresh()
    });
    sim.now = at(10);
    let step = sim.complete(FIRST_FENCE, "ok");
    assert_eq!(
        step.error(),
        &refused(Refusal::OperationTerminal, State::Failed)
    );
    step.assert_no_effects();
}
