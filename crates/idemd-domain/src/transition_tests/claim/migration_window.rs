//! any → Claim whose fingerprint differs but whose previous_fingerprints
//! hold the stored one (a rolling deployment changed the normalisation)

use crate::command::ClaimCommand;
use crate::error::Error;
use crate::model::NewHistoryEntry;

use crate::transition_tests::{OTHER, OWNER, claim_as, every_state, fingerprint, op_id};

/// The stored fingerprint is `the_fingerprint()` (byte 1); the new version's
/// normalisation gives byte 2.
fn migrated(token: &[u8], previous: Vec<u8>) -> ClaimCommand {
    ClaimCommand {
        fingerprint: fingerprint(2),
        previous_fingerprints: previous.into_iter().map(fingerprint).collect(),
        ..claim_as(token)
    }
}

#[test]
fn a_stored_fingerprint_among_the_previous_ones_is_decided_as_the_same_request() {
    let mut claims_that_wrote = 0;
    for (name, sim) in every_state() {
        for token in [OWNER, OTHER, b"".as_slice()] {
            for (previous, index) in [(vec![1], 0), (vec![9, 8, 1], 2)] {
                let same = sim.clone().claim(&claim_as(token));
                let mut migrating = sim.clone();
                let step = migrating.claim(&migrated(token, previous.clone()));
                let case = format!("{name}, token {token:?}, previous {previous:?}");
                assert_eq!(step.answer, same.answer, "{case}");
                assert_eq!(step.drawn_fence, same.drawn_fence, "{case}");
                assert_eq!(step.effects.update, same.effects.update, "{case}");
                assert!(
                    !step.effects.conflict,
                    "{case}: never counted as a conflict"
                );
                // A Claim that writes says which previous fingerprint matched.
                let noted = same.effects.history.clone().map(|entry| {
                    let matched = format!("request matched by previous_fingerprints[{index}]");
                    NewHistoryEntry {
                        detail: if entry.detail.is_empty() {
                            matched
                        } else {
                            format!("{}; {matched}", entry.detail)
                        },
                        ..entry
                    }
                });
                assert_eq!(step.effects.history, noted, "{case}");
                claims_that_wrote += usize::from(noted.is_some());
            }
        }
    }
    assert!(claims_that_wrote > 0, "some state's Claim writes history");
}

#[test]
fn previous_fingerprints_that_miss_the_stored_one_still_conflict() {
    for (name, mut sim) in every_state() {
        let step = sim.claim(&migrated(OTHER, vec![3, 4]));
        assert_eq!(
            step.answer,
            Err(Error::KeyReused {
                operation_id: op_id()
            }),
            "{name}"
        );
        step.assert_conflict_counted();
    }
}

#[test]
fn previous_fingerprints_change_nothing_when_the_fingerprint_is_the_stored_one() {
    for (name, sim) in every_state() {
        let same = sim.clone().claim(&claim_as(OTHER));
        let with_previous = sim.clone().claim(&ClaimCommand {
            previous_fingerprints: vec![fingerprint(5)],
            ..claim_as(OTHER)
        });
        assert_eq!(with_previous.answer, same.answer, "{name}");
        assert_eq!(with_previous.effects, same.effects, "{name}");
    }
}
