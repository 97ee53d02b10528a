//! SUCCEEDED / FAILED → Claim

use crate::model::{PreviousAttempt, State};
use crate::transition::{ClaimAnswer, Doubt};

use crate::transition_tests::{FIRST_FENCE, OTHER, OWNER, Sim, at, secs, terminal_states};

#[test]
fn claim_on_succeeded_or_failed_replays_completed_without_writing() {
    for (name, mut sim) in terminal_states() {
        if sim.record.state == State::Expired {
            continue;
        }
        for token in [OWNER, OTHER, b"".as_slice()] {
            let step = sim.claim_as(token);
            assert_eq!(step.claim_answer(), ClaimAnswer::Completed, "{name}");
            step.assert_no_effects();
        }
    }
}

#[test]
fn a_takeover_is_told_the_earlier_deadline_plus_the_clock_margin() {
    // The margin covers a forward step of the database clock, which would
    // otherwise shorten what the new owner waits while the old owner counts
    // on its own monotonic clock (issue 17, item 5).
    let mut sim = Sim::new();
    sim.clock_margin = secs(3);
    sim.now = at(31);
    assert_eq!(
        sim.claim_as(b"taker").claim_answer(),
        ClaimAnswer::ReconcileFirst(Doubt {
            previous: PreviousAttempt {
                state: State::InProgress,
                fence: FIRST_FENCE,
                attempt_deadline_at: Some(at(300)),
            },
            settles_at: Some(at(303)),
        })
    );
}
