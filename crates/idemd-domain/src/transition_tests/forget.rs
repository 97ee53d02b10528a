//! Forget: an admin turns an ended operation into retention's tombstone, at
//! the fence it saw, and never an unresolved one.

use chrono::TimeDelta;

use crate::command::{FailDisposition, ForgetCommand};
use crate::error::{Error, Refusal};
use crate::model::{HistoryEvent, State};
use crate::transition::decide_forget;

use super::{FIRST_FENCE, OTHER, Sim, at, every_state, op_id, secs, tombstone_retention};

fn forget_command(expected_fence: u64) -> ForgetCommand {
    ForgetCommand {
        operation_id: op_id(),
        expected_fence,
        reason: "erasure request #42".into(),
        tombstone_retention: tombstone_retention(),
    }
}

impl Sim {
    fn forget(&mut self, expected_fence: u64) -> super::Step {
        let command = forget_command(expected_fence);
        self.step(|record, now| decide_forget(record, &command, now))
    }
}

#[test]
fn forget_makes_the_tombstone_retention_makes_and_claims_get_result_expired() {
    let mut succeeded = Sim::new();
    succeeded.now = at(1);
    succeeded.complete(FIRST_FENCE, "ok").written();
    let mut failed = Sim::new();
    failed.now = at(1);
    failed
        .fail(FIRST_FENCE, FailDisposition::Terminal, secs(0))
        .written();
    for (mut forgotten, kind) in [(succeeded, State::Succeeded), (failed, State::Failed)] {
        // The same record, swept at the same clock after its retention: the
        // tombstone Forget makes is retention's, bar the history entry.
        let mut swept = forgotten.clone();
        forgotten.now = at(2);
        let step = forgotten.forget(FIRST_FENCE);
        step.written();
        assert_eq!(step.drawn_fence, None, "forget draws no fence");
        let history = step.history();
        assert_eq!(history.event, HistoryEvent::Forgotten);
        assert_eq!(
            (history.from_state, history.to_state),
            (Some(kind), State::Expired)
        );
        assert_eq!(history.detail, "erasure request #42");
        let tombstone = step.next().clone();
        assert_eq!(tombstone.outcome, None, "the result is dropped");
        assert_eq!(tombstone.outcome_kind, Some(kind));
        assert_eq!(tombstone.retain_until, Some(at(2) + tombstone_retention()));

        swept.now = at(2);
        swept.record.retain_until = Some(at(2));
        let swept_step = swept.sweep().expect("retention passed");
        assert_eq!(
            super::super::model::OperationRecord {
                retain_until: tombstone.retain_until,
                ..swept_step.next().clone()
            },
            tombstone
        );

        let claim = forgotten.claim_as(OTHER);
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
fn forget_refuses_what_has_not_ended_and_tombstones_and_changes_nothing() {
    for (name, mut sim) in every_state() {
        let before = sim.record.clone();
        let expected = match before.state {
            State::Succeeded | State::Failed => continue,
            State::Expired => Refusal::AlreadyForgotten,
            State::InProgress | State::RetryWait | State::Unknown => Refusal::OperationUnresolved,
        };
        sim.now += TimeDelta::days(1);
        let step = sim.forget(before.fence);
        assert_eq!(
            step.answer,
            Err(Error::Refused {
                refusal: expected,
                operation_id: before.operation_id,
                state: before.state,
            }),
            "{name}"
        );
        step.assert_no_effects();
        assert_eq!(sim.record, before, "{name}");
    }
}

#[test]
fn forget_with_a_stale_fence_is_refused_as_a_stale_write() {
    let mut sim = Sim::new();
    sim.complete(FIRST_FENCE, "ok").written();
    let before = sim.record.clone();
    let step = sim.forget(FIRST_FENCE + 7);
    assert_eq!(
        step.answer,
        Err(Error::LeaseLost {
            operation_id: before.operation_id,
            current_fence: before.fence,
            state: State::Succeeded,
        })
    );
    assert_eq!(step.effects.update, None);
    assert_eq!(step.history().event, HistoryEvent::StaleWriteRefused);
    assert_eq!(sim.record, before);
}
