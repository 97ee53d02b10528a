//! any → Claim, different fingerprint; tombstone → Claim

use crate::domain::command::ClaimCommand;
use crate::domain::error::Error;
use crate::domain::model::State;

use crate::domain::transition_tests::{OTHER, OWNER, claim_as, every_state, fingerprint, op_id};

#[test]
fn claim_with_a_different_fingerprint_is_key_reused_in_every_state() {
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
            step.assert_no_effects();
            assert_eq!(sim.record, before, "{name}");
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
