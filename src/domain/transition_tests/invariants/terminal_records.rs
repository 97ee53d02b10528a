//! Terminal records never change

use chrono::TimeDelta;

use crate::domain::command::{ClaimCommand, FailDisposition, Resolution};
use crate::domain::model::{HistoryEvent, OperationRecord};

use crate::domain::transition_tests::{
    CODE, OTHER, OWNER, claim_as, fingerprint, report, result, secs, terminal_states,
};

#[test]
fn terminal_records_never_change_under_any_command() {
    for (name, sim) in terminal_states() {
        let start = sim.now;
        for later in [secs(0), TimeDelta::hours(1), TimeDelta::days(3)] {
            let mut sim = sim.clone();
            sim.now = start + later;
            let before = sim.record.clone();
            let current = before.fence;
            let mut steps = Vec::new();
            for token in [OWNER, OTHER, b"".as_slice()] {
                steps.push(sim.claim_as(token));
                steps.push(sim.claim(&ClaimCommand {
                    fingerprint: fingerprint(3),
                    ..claim_as(token)
                }));
            }
            for fence in [current - 1, current, current + 1] {
                steps.push(sim.renew(fence));
                steps.push(sim.complete(fence, "ok"));
                steps.push(sim.complete(fence, "other"));
                for disposition in [
                    FailDisposition::Terminal,
                    FailDisposition::Retryable,
                    FailDisposition::Unknown,
                    FailDisposition::NotStarted,
                ] {
                    steps.push(sim.fail(fence, disposition, secs(1)));
                }
                steps.push(sim.reconcile(fence, Resolution::Succeeded(result("ok"))));
                steps.push(sim.reconcile(fence, Resolution::Failed(report(CODE))));
                steps.push(sim.reconcile(fence, Resolution::NotApplied));
            }
            for step in &steps {
                assert_eq!(step.effects.update, None, "{name}: {step:#?}");
                if let Some(history) = &step.effects.history {
                    // A Claim with another request is counted (evidence,
                    // not a change of the record's outcome).
                    let expected = if step.effects.conflict {
                        HistoryEvent::ConflictingClaimRefused
                    } else {
                        HistoryEvent::StaleWriteRefused
                    };
                    assert_eq!(history.event, expected, "{name}");
                    assert_eq!(history.to_state, before.state);
                }
            }
            assert_eq!(sim.record.conflicts, before.conflicts + 3, "{name}");
            let counted = OperationRecord {
                conflicts: before.conflicts,
                last_conflict_at: before.last_conflict_at,
                ..sim.record.clone()
            };
            assert_eq!(counted, before, "{name}");
        }
    }
}
