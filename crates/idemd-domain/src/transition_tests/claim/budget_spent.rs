//! IN_PROGRESS expired / UNKNOWN, budget spent → NeedsReconciliation

use crate::command::FailDisposition;
use crate::model::{HistoryEvent, State};
use crate::transition::ClaimAnswer;

use crate::transition_tests::{FIRST_FENCE, MAX_ATTEMPTS, OTHER, OWNER, Sim, at, entry, secs};

#[test]
fn expired_lease_with_budget_spent_is_marked_unknown_then_needs_reconciliation_without_writing() {
    let mut sim = Sim::fresh_with(|record| record.attempt = MAX_ATTEMPTS);
    sim.now = at(31);
    let step = sim.claim_as(OTHER);
    assert_eq!(step.claim_answer(), ClaimAnswer::NeedsReconciliation);
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(next.state, State::Unknown);
    assert_eq!(next.fence, FIRST_FENCE);
    assert_eq!(next.attempt, MAX_ATTEMPTS);
    assert_eq!(next.claim_token, OWNER.to_vec(), "the owner is unchanged");
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::MarkedUnknown,
            State::InProgress,
            State::Unknown,
            FIRST_FENCE,
            MAX_ATTEMPTS,
            "attempt budget spent"
        )
    );

    let marked = sim.record.clone();
    for token in [OTHER, OWNER, b"third".as_slice()] {
        sim.now += secs(100);
        let again = sim.claim_as(token);
        assert_eq!(again.claim_answer(), ClaimAnswer::NeedsReconciliation);
        again.assert_no_effects();
    }
    assert_eq!(sim.record, marked);
}

#[test]
fn unknown_reported_with_budget_spent_needs_reconciliation_without_writing() {
    let mut sim = Sim::last_attempt();
    sim.now = at(1);
    sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0))
        .written();
    sim.now = at(400);
    let step = sim.claim_as(OTHER);
    assert_eq!(step.claim_answer(), ClaimAnswer::NeedsReconciliation);
    step.assert_no_effects();
}

#[test]
fn expired_lease_past_the_operation_deadline_is_marked_unknown_even_with_budget_left() {
    let mut sim = Sim::fresh_with(|record| record.operation_deadline_at = Some(at(20)));
    sim.now = at(31);
    let step = sim.claim_as(OTHER);
    assert_eq!(step.claim_answer(), ClaimAnswer::NeedsReconciliation);
    assert_eq!(step.drawn_fence, None);
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::MarkedUnknown,
            State::InProgress,
            State::Unknown,
            FIRST_FENCE,
            1,
            "operation deadline passed"
        )
    );
    // UNKNOWN past the operation deadline: nothing more to write.
    let again = sim.claim_as(OTHER);
    assert_eq!(again.claim_answer(), ClaimAnswer::NeedsReconciliation);
    again.assert_no_effects();
}
