//! The retention sweeper: tombstones, and what it never sweeps.

use chrono::TimeDelta;

use crate::command::FailDisposition;
use crate::error::Error;
use crate::model::{FailureReason, HistoryEvent, Outcome, State};

use super::{
    FIRST_FENCE, OTHER, Sim, at, entry, every_state, op_id, retention, retry_wait, secs,
    tombstone_retention,
};

// ---------------------------------------------------------------------------
// Sweeper: terminal past retention → tombstone; tombstone → Claim
// ---------------------------------------------------------------------------

#[test]
fn sweeper_turns_a_terminal_record_past_retention_into_a_tombstone() {
    let mut succeeded = Sim::new();
    succeeded.now = at(1);
    succeeded.complete(FIRST_FENCE, "ok").written();
    let mut failed = Sim::new();
    failed.now = at(1);
    failed
        .fail(FIRST_FENCE, FailDisposition::Terminal, secs(0))
        .written();
    for (mut sim, kind) in [(succeeded, State::Succeeded), (failed, State::Failed)] {
        let retain_until = at(1) + retention();
        assert_eq!(sim.record.retain_until, Some(retain_until));
        sim.now = retain_until - TimeDelta::milliseconds(1);
        assert!(sim.sweep().is_none(), "{kind:?} swept before retention");

        sim.now = retain_until;
        let before = sim.record.clone();
        let step = sim.sweep().expect("retention passed");
        assert_eq!(step.drawn_fence, None);
        let next = step.next();
        assert_eq!(next.state, State::Expired);
        assert_eq!(next.outcome, None, "a tombstone keeps no result");
        assert_eq!(
            next.outcome_kind,
            Some(kind),
            "but says which outcome it had"
        );
        assert_eq!(next.fingerprint, before.fingerprint);
        assert_eq!(next.operation_id, before.operation_id);
        assert_eq!(next.scope, before.scope);
        assert_eq!(
            next.retain_until,
            Some(retain_until + tombstone_retention())
        );
        assert_eq!(
            step.history(),
            &entry(
                HistoryEvent::Expired,
                kind,
                State::Expired,
                FIRST_FENCE,
                1,
                "retention passed"
            )
        );

        // Tombstone → Claim: never a new execution.
        let claim = sim.claim_as(OTHER);
        assert_eq!(
            claim.answer,
            Err(Error::ResultExpired {
                operation_id: op_id()
            })
        );
        claim.assert_no_effects();
    }
}

#[test]
fn sweeper_never_changes_a_tombstone() {
    let (_, mut sim) = every_state()
        .into_iter()
        .find(|(_, sim)| sim.record.state == State::Expired)
        .expect("a tombstone");
    let tombstone = sim.record.clone();
    sim.now += tombstone_retention() + TimeDelta::days(1);
    // Deleting it is the store's; the record itself never changes.
    if let Some(step) = sim.sweep() {
        assert_eq!(step.effects.update, None, "{step:#?}");
    }
    assert_eq!(sim.record, tombstone);
}

#[test]
fn sweeper_never_sweeps_unresolved_or_running_records() {
    for (name, sim) in every_state() {
        if sim.record.state.is_terminal() {
            continue;
        }
        for later in [secs(0), TimeDelta::days(2), TimeDelta::days(400)] {
            let mut sim = sim.clone();
            sim.now += later;
            let before = sim.record.clone();
            assert!(sim.sweep().is_none(), "{name} swept after {later}");
            assert_eq!(sim.record, before);
        }
    }
}

#[test]
fn sweeper_ends_a_retry_past_the_operation_deadline_as_deadline_exceeded() {
    let mut sim = retry_wait(|record| record.operation_deadline_at = Some(at(60)));
    sim.now = at(60) - TimeDelta::milliseconds(1);
    assert!(sim.sweep().is_none());
    sim.now = at(60);
    let step = sim.sweep().expect("the operation deadline passed");
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
    assert_eq!(next.retain_until, Some(at(60) + retention()));
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
    // Then it expires like any terminal record.
    sim.now = at(60) + retention();
    assert_eq!(
        sim.sweep().expect("retention passed").next().state,
        State::Expired
    );
}

#[test]
fn sweeper_leaves_a_retry_past_the_operation_deadline_unknown_while_it_doubts_an_earlier_attempt() {
    // The retry took over a stalled attempt (deadline at 300) and failed
    // RETRYABLE; the operation deadline passes before that attempt settles.
    let mut sim = Sim::fresh_with(|record| record.operation_deadline_at = Some(at(60)));
    sim.now = at(31);
    sim.claim_as(OTHER);
    sim.now = at(40);
    sim.fail(FIRST_FENCE + 1, FailDisposition::Retryable, secs(5))
        .written();
    sim.now = at(60);
    let step = sim.sweep().expect("the operation deadline passed");
    let next = step.next();
    assert_eq!(
        (next.state, next.attempt_deadline_at),
        (State::Unknown, Some(at(300)))
    );
    assert_eq!(next.outcome, None, "nobody knows the outcome");
    assert_eq!(step.history().event, HistoryEvent::MarkedUnknown);
    assert!(
        step.history().detail.starts_with(
            "deadline_exceeded; earlier attempt may still be in flight; previous attempt deadline"
        ),
        "{}",
        step.history().detail
    );
    // Unresolved: the sweeper leaves it to a reconciler from now on.
    sim.now = at(400);
    assert!(sim.sweep().is_none());
}
