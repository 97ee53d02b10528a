//! IN_PROGRESS expired / UNKNOWN, budget left → Claim → ReconcileFirst

use chrono::TimeDelta;

use crate::command::{ClaimCommand, FailDisposition};
use crate::model::{HistoryEvent, PreviousAttempt, State};
use crate::transition::{ClaimAnswer, Doubt, takeover_detail};

use crate::transition_tests::{
    FIRST_FENCE, MAX_ATTEMPTS, Sim, at, claim_as, entry, lease, reconcile_first, secs,
};

#[test]
fn expired_lease_with_budget_left_is_taken_over_with_reconcile_first() {
    let mut sim = Sim::new();
    sim.now = at(30); // the instant the lease expires counts as expired
    let step = sim.claim_as(b"taker");
    let previous = PreviousAttempt {
        state: State::InProgress,
        fence: FIRST_FENCE,
        attempt_deadline_at: Some(at(300)),
    };
    assert_eq!(step.claim_answer(), reconcile_first(previous));
    assert_eq!(step.drawn_fence, Some(11));
    let next = step.next();
    assert_eq!(next.state, State::InProgress);
    assert_eq!(next.fence, 11);
    assert_eq!(next.attempt, 2);
    assert_eq!(next.claim_token, b"taker".to_vec());
    assert_eq!(next.taken_over_from, Some(previous));
    assert_eq!(next.lease_duration, lease());
    assert_eq!(next.lease_expires_at, Some(at(60)));
    assert_eq!(next.attempt_deadline_at, Some(at(330)));
    assert_eq!(next.retry_at, None);
    assert_eq!(next.updated_at, at(30));
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::TakenOver,
            State::InProgress,
            State::InProgress,
            11,
            2,
            "lease expired; previous attempt deadline 2025-06-15T15:11:40.000Z"
        )
    );
}

#[test]
fn unknown_outcome_with_budget_left_is_taken_over_with_reconcile_first() {
    let mut sim = Sim::new();
    sim.now = at(1);
    sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0))
        .written();
    sim.now = at(2);
    let step = sim.claim_as(b"taker");
    let previous = PreviousAttempt {
        state: State::Unknown,
        fence: FIRST_FENCE,
        attempt_deadline_at: Some(at(300)),
    };
    assert_eq!(step.claim_answer(), reconcile_first(previous));
    assert_eq!(step.drawn_fence, Some(11));
    let next = step.next();
    assert_eq!(
        (next.state, next.fence, next.attempt),
        (State::InProgress, 11, 2)
    );
    assert_eq!(next.taken_over_from, Some(previous));
    assert_eq!(next.lease_expires_at, Some(at(32)));
    assert_eq!(next.attempt_deadline_at, Some(at(302)));
    assert_eq!(
        step.history(),
        &entry(
            HistoryEvent::TakenOver,
            State::Unknown,
            State::InProgress,
            11,
            2,
            "outcome unknown; previous attempt deadline 2025-06-15T15:11:40.000Z"
        )
    );
}

/// `previous_attempt_deadline`: the replaced attempt's deadline, kept by the
/// takeover, and the time left until it at the answer's clock.
#[test]
fn a_takeover_keeps_the_replaced_attempts_deadline_and_counts_what_is_left() {
    struct Case {
        name: &'static str,
        /// Brings the first attempt (deadline at 300) to the state it is
        /// taken over from, at the given instant.
        reported_unknown_at: Option<i64>,
        taken_over_at: i64,
        left_at_takeover: TimeDelta,
    }
    let cases = [
        Case {
            name: "lease expired, deadline ahead",
            reported_unknown_at: None,
            taken_over_at: 31,
            left_at_takeover: secs(269),
        },
        Case {
            name: "lease expired at the deadline itself",
            reported_unknown_at: None,
            taken_over_at: 300,
            left_at_takeover: TimeDelta::zero(),
        },
        Case {
            name: "lease expired, deadline passed",
            reported_unknown_at: None,
            taken_over_at: 400,
            left_at_takeover: TimeDelta::zero(),
        },
        Case {
            name: "outcome unknown, deadline ahead",
            reported_unknown_at: Some(1),
            taken_over_at: 2,
            left_at_takeover: secs(298),
        },
        Case {
            name: "outcome unknown, deadline passed",
            reported_unknown_at: Some(1),
            taken_over_at: 301,
            left_at_takeover: TimeDelta::zero(),
        },
    ];
    for case in cases {
        let mut sim = Sim::new();
        if let Some(reported_at) = case.reported_unknown_at {
            sim.now = at(reported_at);
            sim.fail(FIRST_FENCE, FailDisposition::Unknown, secs(0))
                .written();
        }
        sim.now = at(case.taken_over_at);
        let step = sim.claim_as(b"taker");
        let ClaimAnswer::ReconcileFirst(Doubt { previous, .. }) = step.claim_answer() else {
            panic!("{}: not a takeover", case.name);
        };
        assert_eq!(previous.attempt_deadline_at, Some(at(300)), "{}", case.name);
        assert_eq!(
            previous.attempt_deadline_left(sim.now),
            Some(case.left_at_takeover),
            "{}",
            case.name
        );
        assert_eq!(
            step.next().taken_over_from,
            Some(previous),
            "{}: kept on the record",
            case.name
        );
        assert!(
            step.history()
                .detail
                .ends_with("; previous attempt deadline 2025-06-15T15:11:40.000Z"),
            "{}: {}",
            case.name,
            step.history().detail
        );
        // The new attempt's own deadline is counted from the takeover.
        assert_eq!(
            sim.record.attempt_deadline_at,
            Some(at(case.taken_over_at + 300)),
            "{}",
            case.name
        );

        // A re-sent Claim is told the same deadline, with what is left of it
        // by then.
        sim.now = at(case.taken_over_at + 10);
        let resent = sim.claim_as(b"taker");
        resent.assert_no_effects();
        let ClaimAnswer::ReconcileFirst(Doubt {
            previous: again, ..
        }) = resent.claim_answer()
        else {
            panic!("{}: a re-sent takeover is not ReconcileFirst", case.name);
        };
        assert_eq!(again, previous, "{}", case.name);
        assert_eq!(
            again.attempt_deadline_left(sim.now),
            Some((case.left_at_takeover - secs(10)).max(TimeDelta::zero())),
            "{}",
            case.name
        );
    }
}

#[test]
fn a_second_takeover_reports_the_deadline_of_the_attempt_it_replaces() {
    let mut sim = Sim::new();
    sim.now = at(31);
    sim.claim_as(b"second").claim_answer();
    assert_eq!(sim.record.attempt_deadline_at, Some(at(331)));
    sim.now = at(62);
    let ClaimAnswer::ReconcileFirst(Doubt { previous, .. }) = sim.claim_as(b"third").claim_answer()
    else {
        panic!("not a takeover");
    };
    assert_eq!(previous.fence, FIRST_FENCE + 1);
    assert_eq!(previous.attempt_deadline_at, Some(at(331)));
    assert_eq!(previous.attempt_deadline_left(sim.now), Some(secs(269)));
}

#[test]
fn a_previous_attempt_deadline_not_kept_is_not_known() {
    let previous = PreviousAttempt {
        state: State::InProgress,
        fence: FIRST_FENCE,
        attempt_deadline_at: None,
    };
    assert_eq!(previous.attempt_deadline_left(at(1)), None);
    assert_eq!(takeover_detail(&previous), "lease expired");
}

#[test]
fn new_attempt_lease_is_capped_at_its_attempt_deadline() {
    let mut sim = Sim::new();
    sim.now = at(31);
    let step = sim.claim(&ClaimCommand {
        lease: TimeDelta::minutes(10),
        ..claim_as(b"taker")
    });
    assert!(matches!(
        step.claim_answer(),
        ClaimAnswer::ReconcileFirst(_)
    ));
    assert_eq!(step.next().attempt_deadline_at, Some(at(331)));
    assert_eq!(step.next().lease_expires_at, Some(at(331)));
}

#[test]
fn takeovers_count_against_the_attempt_budget() {
    let mut sim = Sim::new();
    for attempt in 2..=MAX_ATTEMPTS {
        sim.now += secs(31);
        let previous_fence = sim.record.fence;
        let previous_deadline = sim.record.attempt_deadline_at;
        let step = sim.claim_as(format!("taker-{attempt}").as_bytes());
        assert_eq!(
            step.claim_answer(),
            reconcile_first(PreviousAttempt {
                state: State::InProgress,
                fence: previous_fence,
                attempt_deadline_at: previous_deadline,
            })
        );
        assert_eq!(sim.record.attempt, attempt);
        assert_eq!(sim.record.fence, previous_fence + 1);
    }
    sim.now += secs(31);
    let step = sim.claim_as(b"one-too-many");
    assert_eq!(step.claim_answer(), ClaimAnswer::NeedsReconciliation);
    assert_eq!(step.drawn_fence, None);
    assert_eq!(sim.record.state, State::Unknown);
    assert_eq!(sim.record.attempt, MAX_ATTEMPTS);
}
