//! IN_PROGRESS f → Renew f

use chrono::TimeDelta;

use crate::error::{Error, Refusal};
use crate::model::{HistoryEvent, State};
use crate::transition::PendingReason;

use crate::transition_tests::{
    FIRST_FENCE, OTHER, Sim, assert_pending, at, entry, every_state, fresh, lease, lease_lost,
    refused, secs,
};

#[test]
fn renew_with_the_current_fence_extends_the_lease_from_now() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let step = sim.renew(FIRST_FENCE);
    step.written();
    assert_eq!(step.drawn_fence, None);
    let next = step.next();
    assert_eq!(next.lease_expires_at, Some(at(40)));
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::InProgress, FIRST_FENCE, 1)
    );
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::Renewed,
            State::InProgress,
            State::InProgress,
            FIRST_FENCE,
            1,
            ""
        )
    );
}

#[test]
fn renew_may_ask_for_another_lease_length() {
    let mut sim = Sim::new();
    sim.now = at(10);
    let step = sim.renew_for(FIRST_FENCE, Some(secs(60)));
    step.written();
    assert_eq!(step.next().lease_expires_at, Some(at(70)));
    assert_eq!(
        step.next().lease_duration,
        lease(),
        "the default lease is kept"
    );
}

#[test]
fn renew_is_capped_at_the_attempt_deadline() {
    let mut sim = Sim::new();
    sim.now = at(290);
    let step = sim.renew(FIRST_FENCE);
    step.written();
    assert_eq!(step.next().lease_expires_at, Some(at(300)));
    sim.now = at(299);
    let step = sim.renew_for(FIRST_FENCE, Some(TimeDelta::hours(1)));
    assert_eq!(step.next().lease_expires_at, Some(at(300)));
}

#[test]
fn renew_by_an_owner_whose_lease_ran_out_unreplaced_extends_it_again() {
    let mut sim = Sim::new();
    sim.now = at(45);
    sim.renew(FIRST_FENCE).written();
    assert_eq!(sim.record.lease_expires_at, Some(at(75)));
    assert_pending(&sim.claim_as(OTHER), PendingReason::InProgress, secs(30));
}

#[test]
fn renew_at_or_after_the_attempt_deadline_is_refused_as_a_late_write() {
    for offset in [300, 301, 10_000] {
        let mut sim = Sim::new();
        sim.now = at(offset);
        let step = sim.renew(FIRST_FENCE);
        assert_eq!(
            step.error(),
            &refused(Refusal::AttemptDeadlinePassed, State::InProgress)
        );
        step.assert_only_history(entry(
            HistoryEvent::LateWriteRefused,
            State::InProgress,
            State::InProgress,
            FIRST_FENCE,
            1,
            "renew",
        ));
        assert_eq!(sim.record, fresh());
    }
}

#[test]
fn stale_fence_cannot_renew_after_takeover() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.claim_as(b"taker");
    let after_takeover = sim.record.clone();
    sim.now = at(32);
    let step = sim.renew(FIRST_FENCE);
    assert_eq!(step.error(), &lease_lost(11, State::InProgress));
    step.assert_only_history(entry(
        HistoryEvent::StaleWriteRefused,
        State::InProgress,
        State::InProgress,
        FIRST_FENCE,
        2,
        "renew",
    ));
    assert_eq!(sim.record, after_takeover);
}

#[test]
fn renew_is_refused_once_the_attempt_is_no_longer_in_progress() {
    let cases: Vec<(&str, Sim, Error)> = every_state()
        .into_iter()
        .filter_map(|(name, sim)| {
            let expected = match sim.record.state {
                State::Succeeded | State::Failed | State::Expired => {
                    refused(Refusal::OperationTerminal, sim.record.state)
                }
                State::Unknown | State::RetryWait => {
                    refused(Refusal::StateForbids, sim.record.state)
                }
                State::InProgress => return None,
            };
            Some((name, sim, expected))
        })
        .collect();
    assert_eq!(cases.len(), 7);
    for (name, mut sim, expected) in cases {
        let before = sim.record.clone();
        let step = sim.renew(FIRST_FENCE);
        assert_eq!(step.error(), &expected, "{name}");
        step.assert_no_effects();
        assert_eq!(sim.record, before, "{name}");
    }
}
