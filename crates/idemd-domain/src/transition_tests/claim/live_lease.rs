//! IN_PROGRESS, live lease → Claim

use chrono::TimeDelta;

use crate::model::{PreviousAttempt, State};
use crate::transition::{ClaimAnswer, PendingReason};

use crate::transition_tests::{
    FIRST_FENCE, OTHER, OWNER, Sim, assert_pending, at, claim_as, fresh, inserted_record,
    reconcile_first, secs, t0,
};

#[test]
fn resent_claim_with_the_owners_token_gets_the_same_acquired_without_writing() {
    let mut sim = Sim::new();
    for offset in [0, 1, 29] {
        sim.now = at(offset);
        let step = sim.claim_as(OWNER);
        assert_eq!(step.claim_answer(), ClaimAnswer::Acquired);
        step.assert_no_effects();
        assert_eq!(sim.record, fresh(), "not counted as another attempt");
    }
}

#[test]
fn a_claim_repeating_the_owners_token_after_it_renewed_is_pending_never_acquired() {
    // A token derived from a message id: the duplicate delivery repeats it.
    // Before the owner writes, the two cannot be told apart from a re-sent
    // Claim; once the owner renewed, the token is spent.
    let mut sim = Sim::new();
    sim.now = at(5);
    sim.renew(FIRST_FENCE).written();
    assert!(sim.record.owner_renewed());
    let renewed = sim.record.clone();
    sim.now = at(6);
    let duplicate = sim.claim_as(OWNER);
    assert_pending(&duplicate, PendingReason::InProgress, secs(29));
    duplicate.assert_no_effects();
    assert_eq!(sim.record, renewed);
}

#[test]
fn a_new_owner_starts_with_an_unspent_token() {
    let mut sim = Sim::new();
    sim.now = at(5);
    sim.renew(FIRST_FENCE).written();
    sim.now = at(36);
    let takeover = sim.claim_as(b"taker");
    assert!(matches!(
        takeover.claim_answer(),
        ClaimAnswer::ReconcileFirst(_)
    ));
    assert!(!sim.record.owner_renewed());
    sim.now = at(37);
    assert!(matches!(
        sim.claim_as(b"taker").claim_answer(),
        ClaimAnswer::ReconcileFirst(_)
    ));
}

#[test]
fn claim_with_another_token_on_a_live_lease_is_pending_for_the_remaining_lease() {
    let mut sim = Sim::new();
    sim.now = at(12);
    assert_pending(&sim.claim_as(OTHER), PendingReason::InProgress, secs(18));
    assert_pending(&sim.claim_as(b""), PendingReason::InProgress, secs(18));
    sim.now = at(30) - TimeDelta::milliseconds(1);
    assert_pending(
        &sim.claim_as(OTHER),
        PendingReason::InProgress,
        TimeDelta::milliseconds(1),
    );
    assert_eq!(sim.record, fresh());
}

#[test]
fn claim_without_a_token_never_counts_as_the_owner() {
    let mut sim = Sim::with(inserted_record(&claim_as(b""), FIRST_FENCE, t0()));
    sim.now = at(5);
    assert_pending(&sim.claim_as(b""), PendingReason::InProgress, secs(25));
}

#[test]
fn pending_retry_after_follows_a_renewed_lease() {
    let mut sim = Sim::new();
    sim.now = at(20);
    sim.renew(FIRST_FENCE).written();
    sim.now = at(25);
    assert_pending(&sim.claim_as(OTHER), PendingReason::InProgress, secs(25));
}

#[test]
fn resent_claim_after_a_takeover_is_told_reconcile_first_again() {
    let mut sim = Sim::new();
    sim.now = at(31);
    let previous = PreviousAttempt {
        state: State::InProgress,
        fence: FIRST_FENCE,
        attempt_deadline_at: Some(at(300)),
    };
    let takeover = sim.claim_as(b"taker");
    assert_eq!(takeover.claim_answer(), reconcile_first(previous));
    let after_takeover = sim.record.clone();

    sim.now = at(32);
    let resent = sim.claim_as(b"taker");
    assert_eq!(resent.claim_answer(), reconcile_first(previous));
    resent.assert_no_effects();
    assert_eq!(sim.record, after_takeover);

    // The replaced owner's own token no longer identifies the owner.
    assert_pending(&sim.claim_as(OWNER), PendingReason::InProgress, secs(29));
}
