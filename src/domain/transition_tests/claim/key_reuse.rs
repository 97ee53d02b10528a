//! any → Claim, different fingerprint; tombstone → Claim

use crate::domain::command::ClaimCommand;
use crate::domain::error::Error;
use crate::domain::model::{OperationRecord, State};

use crate::domain::transition_tests::{OTHER, OWNER, claim_as, every_state, fingerprint, op_id};

#[test]
fn claim_with_a_different_fingerprint_is_key_reused_and_counted_in_every_state() {
    for (name, mut sim) in every_state() {
        for token in [OWNER, OTHER, b"".as_slice()] {
            let before = sim.record.clone();
            let step = sim.claim(&ClaimCommand {
                fingerprint: fingerprint(2),
                ..claim_as(token)
            });
            assert_eq!(
                step.answer,
                Err(Error::KeyReused {
                    operation_id: op_id()
                }),
                "{name}"
            );
            step.assert_conflict_counted();
            // Counted on the record, with the database clock; nothing else
            // of it changes (state, fence, lease, updated_at).
            let counted = before.conflicts + 1;
            assert_eq!(sim.record.conflicts, counted, "{name}");
            assert_eq!(sim.record.last_conflict_at, Some(sim.now), "{name}");
            assert_eq!(
                OperationRecord {
                    conflicts: before.conflicts,
                    last_conflict_at: before.last_conflict_at,
                    ..sim.record.clone()
                },
                before,
                "{name}"
            );
        }
    }
}

#[test]
fn claim_on_a_tombstone_is_result_expired_never_a_new_execution() {
    let (_, mut sim) = every_state()
        .into_iter()
        .find(|(_, sim)| sim.record.state == State::Expired)
        .expect("a tombstone");
    for token in [OWNER, OTHER, b"".as_slice()] {
        let step = sim.claim_as(token);
        assert_eq!(
            step.answer,
            Err(Error::ResultExpired {
                operation_id: op_id()
            })
        );
        step.assert_no_effects();
    }
}
