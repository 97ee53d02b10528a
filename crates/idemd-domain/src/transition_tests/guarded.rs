//! The one-statement path of owner writes: its guard holds in the common
//! case, and stops at everything the locked path must explain.

use crate::command::FailDisposition;
use crate::guarded::{GuardedWrite, complete_write, fail_write, renew_write};
use crate::model::{OperationRecord, State};
use crate::transition::{decide_complete, decide_fail, decide_renew};

use super::{FIRST_FENCE, Sim, at, complete_cmd, fail_cmd, renew_cmd, secs};

/// Holds the guard to the decision on `record` at `sim.now`: when it holds,
/// the decision is exactly its write.
fn assert_agrees(sim: &Sim, guarded: &GuardedWrite, decided: Option<&OperationRecord>) {
    let holds = guarded.guard.holds(&sim.record, sim.now);
    if holds {
        assert_eq!(
            decided,
            Some(&guarded.write.apply(&sim.record, sim.now)),
            "guard held, so the write must be the decision"
        );
    }
}

#[test]
fn the_live_owners_first_write_takes_the_one_statement_path() {
    let mut sim = Sim::new();
    sim.now = at(5);
    let renew = renew_cmd(FIRST_FENCE, None);
    let complete = complete_cmd(FIRST_FENCE, "ok");
    for guarded in [
        renew_write(&renew),
        complete_write(&complete),
        fail_write(&fail_cmd(FIRST_FENCE, FailDisposition::Terminal, secs(0)))
            .expect("a common case"),
        fail_write(&fail_cmd(FIRST_FENCE, FailDisposition::Retryable, secs(1)))
            .expect("a common case"),
        fail_write(&fail_cmd(FIRST_FENCE, FailDisposition::Unknown, secs(0)))
            .expect("a common case"),
    ] {
        assert!(
            guarded.guard.holds(&sim.record, sim.now),
            "{:?} should take the one-statement path",
            guarded.event
        );
    }
    let decided = decide_renew(&sim.record, &renew, sim.now);
    assert_agrees(
        &sim,
        &renew_write(&renew),
        decided.effects.update.as_ref().map(|u| &u.next),
    );
    let decided = decide_complete(&sim.record, &complete, sim.now);
    assert_agrees(
        &sim,
        &complete_write(&complete),
        decided.effects.update.as_ref().map(|u| &u.next),
    );
}

#[test]
fn the_guard_leaves_stale_late_resent_and_terminal_writes_to_the_locked_path() {
    // A stale fence.
    let mut sim = Sim::new();
    sim.now = at(5);
    assert!(
        !complete_write(&complete_cmd(FIRST_FENCE + 1, "ok"))
            .guard
            .holds(&sim.record, sim.now)
    );
    // Past the attempt deadline (5 minutes).
    sim.now = at(300);
    assert!(
        !renew_write(&renew_cmd(FIRST_FENCE, None))
            .guard
            .holds(&sim.record, sim.now)
    );
    assert!(
        !complete_write(&complete_cmd(FIRST_FENCE, "ok"))
            .guard
            .holds(&sim.record, sim.now)
    );
    // A re-sent write after Fail UNKNOWN: the receipt answers it.
    let mut sim = Sim::new();
    sim.now = at(5);
    let unknown = fail_cmd(FIRST_FENCE, FailDisposition::Unknown, secs(0));
    sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0))
        .written();
    assert_eq!(sim.record.state, State::Unknown);
    assert!(
        !fail_write(&unknown)
            .expect("a common case")
            .guard
            .holds(&sim.record, sim.now)
    );
    assert!(
        !complete_write(&complete_cmd(FIRST_FENCE, "ok"))
            .guard
            .holds(&sim.record, sim.now)
    );
    // Renew is for IN_PROGRESS only.
    assert!(
        !renew_write(&renew_cmd(FIRST_FENCE, None))
            .guard
            .holds(&sim.record, sim.now)
    );
    // Terminal.
    let mut sim = Sim::new();
    sim.now = at(5);
    sim.complete(FIRST_FENCE, "ok").written();
    assert!(
        !complete_write(&complete_cmd(FIRST_FENCE, "other"))
            .guard
            .holds(&sim.record, sim.now)
    );
}

#[test]
fn a_retryable_failure_past_the_budget_or_the_deadline_is_left_to_the_locked_path() {
    let mut sim = Sim::last_attempt();
    sim.now = sim.record.updated_at + secs(1);
    let fence = sim.record.fence;
    let exhausted = fail_cmd(fence, FailDisposition::Retryable, secs(1));
    assert!(
        !fail_write(&exhausted)
            .expect("a common case")
            .guard
            .holds(&sim.record, sim.now)
    );
    let decided = decide_fail(&sim.record, &exhausted, sim.now);
    assert_eq!(
        decided.effects.update.map(|update| update.next.state),
        Some(State::Failed),
        "the locked path ends it ATTEMPTS_EXHAUSTED"
    );

    let mut sim = Sim::fresh_with(|record| record.operation_deadline_at = Some(at(10)));
    sim.now = at(5);
    let past_deadline = fail_cmd(FIRST_FENCE, FailDisposition::Retryable, secs(5));
    assert!(
        !fail_write(&past_deadline)
            .expect("a common case")
            .guard
            .holds(&sim.record, sim.now)
    );
    let within = fail_cmd(FIRST_FENCE, FailDisposition::Retryable, secs(4));
    assert!(
        fail_write(&within)
            .expect("a common case")
            .guard
            .holds(&sim.record, sim.now)
    );
}
