//! Claim while an administrator holds the operation name (or the tenant):
//! nobody is made an owner, everything else goes on.

use chrono::TimeDelta;

use crate::command::{ClaimCommand, FailDisposition};
use crate::model::{OperationRecord, State};
use crate::transition::{ClaimAnswer, PendingReason};
use crate::transition_tests::{
    FIRST_FENCE, OTHER, OWNER, Sim, Step, assert_pending, at, claim_as, fingerprint, retry_wait,
    secs,
};

const HELD_RETRY: TimeDelta = TimeDelta::seconds(30);

fn held(token: &[u8]) -> ClaimCommand {
    ClaimCommand {
        held: Some(HELD_RETRY),
        ..claim_as(token)
    }
}

/// The held Claim's step, which must write nothing and leave the record.
fn held_step(sim: &mut Sim, token: &[u8]) -> Step {
    let before: OperationRecord = sim.record.clone();
    let step = sim.claim(&held(token));
    step.assert_no_effects();
    assert_eq!(sim.record, before);
    step
}

#[test]
fn a_held_claim_is_never_made_an_owner_it_is_told_pending_held() {
    // A takeover of an expired lease.
    let mut expired = Sim::new();
    expired.now = at(31);
    assert_pending(
        &held_step(&mut expired, OTHER),
        PendingReason::Held,
        HELD_RETRY,
    );

    // A due retry.
    let mut due = retry_wait(|_| {});
    due.now = at(11);
    assert_pending(&held_step(&mut due, OTHER), PendingReason::Held, HELD_RETRY);

    // An attempt reported UNKNOWN, the budget left.
    let mut unknown = Sim::new();
    unknown.now = at(2);
    unknown.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0));
    unknown.now = at(3);
    assert_pending(
        &held_step(&mut unknown, OTHER),
        PendingReason::Held,
        HELD_RETRY,
    );

    // The same Claims once the hold is released make their owners.
    assert!(matches!(
        expired.claim_as(OTHER).claim_answer(),
        ClaimAnswer::ReconcileFirst(_)
    ));
    assert_eq!(due.claim_as(OTHER).claim_answer(), ClaimAnswer::Acquired);
    assert!(matches!(
        unknown.claim_as(OTHER).claim_answer(),
        ClaimAnswer::ReconcileFirst(_)
    ));
}

#[test]
fn a_hold_changes_nothing_but_who_may_become_an_owner() {
    // The owner's own re-sent Claim: the same Acquired, nothing written.
    let mut live = Sim::new();
    live.now = at(5);
    assert_eq!(
        held_step(&mut live, OWNER).claim_answer(),
        ClaimAnswer::Acquired
    );
    // Another caller on a live lease: Pending as ever, for the lease.
    assert_pending(
        &held_step(&mut live, OTHER),
        PendingReason::InProgress,
        secs(25),
    );

    // A completed operation replays.
    let mut done = Sim::new();
    done.now = at(5);
    done.complete(FIRST_FENCE, "ok").written();
    done.now = at(6);
    assert_eq!(
        held_step(&mut done, OTHER).claim_answer(),
        ClaimAnswer::Completed
    );

    // Another request under the key is a conflict, held or not.
    let mut conflicting = Sim::new();
    conflicting.now = at(5);
    let step = conflicting.claim(&ClaimCommand {
        fingerprint: fingerprint(9),
        ..held(OTHER)
    });
    assert!(step.answer.is_err(), "{step:#?}");
}

#[test]
fn a_spent_budget_still_escalates_while_held() {
    // Marking an operation for reconciliation makes no owner: it goes on.
    let mut last = Sim::last_attempt();
    last.now = at(31);
    let step = last.claim(&held(OTHER));
    assert_eq!(step.claim_answer(), ClaimAnswer::NeedsReconciliation);
    assert_eq!(step.next().state, State::Unknown);
}
