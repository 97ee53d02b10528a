//! (none) → Claim

use crate::command::ClaimCommand;
use crate::model::{HistoryEvent, NewHistoryEntry, State, TenantId};
use crate::transition::{ClaimAnswer, PendingReason, decide_first_claim};

use crate::transition_tests::{
    FIRST_FENCE, OTHER, OWNER, Sim, assert_pending, at, claim_as, lease, op_id, secs, t0,
};

#[test]
fn first_claim_record_is_a_live_first_attempt_the_state_machine_accepts() {
    let mut sim = Sim::new();
    assert_eq!(sim.record.state, State::InProgress);
    assert_eq!(sim.record.attempt, 1);
    assert_eq!(sim.record.fence, FIRST_FENCE);
    assert_eq!(sim.record.lease_expires_at, Some(at(30)));
    assert_eq!(sim.record.attempt_deadline_at, Some(at(300)));

    sim.now = at(1);
    assert_eq!(sim.claim_as(OWNER).claim_answer(), ClaimAnswer::Acquired);
    assert_pending(&sim.claim_as(OTHER), PendingReason::InProgress, secs(29));
    sim.renew(FIRST_FENCE).written();
}

#[test]
fn first_claim_deadlines_are_offsets_and_its_lease_is_capped_at_the_attempt_deadline() {
    let long_lease = ClaimCommand {
        lease: secs(600),
        max_attempt_duration: secs(120),
        operation_deadline: Some(secs(3600)),
        ..claim_as(OWNER)
    };
    let first = decide_first_claim(&long_lease);
    assert_eq!(first.lease_expires_in, secs(120), "capped at the attempt");
    assert_eq!(first.attempt_deadline_in, secs(120));
    assert_eq!(first.operation_deadline_in, Some(secs(3600)));
    assert_eq!(
        first.history_with_fence(FIRST_FENCE),
        NewHistoryEntry {
            event: HistoryEvent::Claimed,
            from_state: None,
            to_state: State::InProgress,
            fence: FIRST_FENCE,
            attempt: 1,
            detail: String::new(),
        }
    );
    let record = first.record(op_id(), TenantId(7), &long_lease, FIRST_FENCE, t0());
    assert_eq!(record.lease_expires_at, Some(at(120)));
    assert_eq!(record.attempt_deadline_at, Some(at(120)));
    assert_eq!(record.operation_deadline_at, Some(at(3600)));
    assert_eq!(
        record.lease_duration,
        secs(600),
        "the requested length is kept"
    );

    let short_lease = decide_first_claim(&claim_as(OWNER));
    assert_eq!(short_lease.lease_expires_in, lease());
    assert_eq!(short_lease.operation_deadline_in, None);
}
