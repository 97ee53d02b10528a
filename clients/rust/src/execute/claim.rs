//! What a Claim's answer asks of the helper.

use std::time::Duration;

use super::std_duration;
use super::{Execution, Outcome, Source};
use crate::error::Error;
use crate::proto::{self, claim_response};

/// What a Claim answer asks of the helper.
#[derive(Debug)]
pub(super) enum ClaimStep {
    Own {
        ownership: proto::Ownership,
        previous: Option<proto::ReconcileFirst>,
    },
    Pending {
        operation_id: String,
        retry_after: Duration,
    },
    Done(Execution),
}

/// Decides on a Claim answer. Anything but Acquired and ReconcileFirst means
/// "do not execute"; an outcome this client does not know (a oneof variant
/// added later decodes as none) is an error, never an execution.
pub(super) fn claim_step(response: proto::ClaimResponse) -> Result<ClaimStep, Error> {
    let owned = |ownership: Option<proto::Ownership>| {
        ownership.ok_or_else(|| Error::InvalidResponse("ownership without its details".into()))
    };
    match response.outcome {
        Some(claim_response::Outcome::Acquired(acquired)) => Ok(ClaimStep::Own {
            ownership: owned(acquired.ownership)?,
            previous: None,
        }),
        Some(claim_response::Outcome::ReconcileFirst(mut reconcile_first)) => Ok(ClaimStep::Own {
            ownership: owned(reconcile_first.ownership.take())?,
            previous: Some(reconcile_first),
        }),
        Some(claim_response::Outcome::Pending(pending)) => Ok(ClaimStep::Pending {
            retry_after: std_duration(pending.retry_after),
            operation_id: pending.operation_id,
        }),
        Some(claim_response::Outcome::Completed(completed)) => {
            let outcome = match completed.outcome {
                Some(proto::completed::Outcome::Result(result)) => Outcome::Succeeded(result),
                Some(proto::completed::Outcome::Error(error)) => Outcome::Failed(error),
                None => return Err(Error::UnrecognisedOutcome),
            };
            Ok(ClaimStep::Done(Execution {
                operation_id: completed.operation_id,
                outcome,
                source: Source::Replayed,
                attempt: completed.attempts,
            }))
        }
        Some(claim_response::Outcome::NeedsReconciliation(needs)) => {
            Err(Error::NeedsReconciliation {
                operation_id: needs.operation_id,
                fence: needs.fence,
                attempts: needs.attempts,
            })
        }
        None => Err(Error::UnrecognisedOutcome),
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::proto::OperationState;

    #[test]
    fn an_outcome_this_client_does_not_know_is_never_executed() {
        // A ClaimResponse whose oneof carries a variant added after this
        // client was built (field 9): prost skips it, leaving no outcome.
        let mut encoded = Vec::new();
        prost::encoding::message::encode(9, &proto::Pending::default(), &mut encoded);
        let response = proto::ClaimResponse::decode(encoded.as_slice()).expect("decodes");
        assert!(response.outcome.is_none());
        assert!(matches!(
            claim_step(response),
            Err(Error::UnrecognisedOutcome)
        ));
    }

    #[test]
    fn needs_reconciliation_is_an_error_and_completed_a_replay() {
        let needs = proto::ClaimResponse {
            outcome: Some(claim_response::Outcome::NeedsReconciliation(
                proto::NeedsReconciliation {
                    operation_id: "op".into(),
                    fence: 4,
                    attempts: 5,
                },
            )),
        };
        assert!(matches!(
            claim_step(needs),
            Err(Error::NeedsReconciliation { fence: 4, .. })
        ));
        let completed = proto::ClaimResponse {
            outcome: Some(claim_response::Outcome::Completed(proto::Completed {
                operation_id: "op".into(),
                state: OperationState::Succeeded.into(),
                outcome: Some(proto::completed::Outcome::Result(proto::Result {
                    body: b"ok".to_vec(),
                    ..Default::default()
                })),
                attempts: 2,
                completed_at: None,
                retain_until: None,
            })),
        };
        let Ok(ClaimStep::Done(execution)) = claim_step(completed) else {
            panic!("a replay");
        };
        assert_eq!(execution.source, Source::Replayed);
        assert_eq!(execution.attempt, 2);
        let acquired_without_details = proto::ClaimResponse {
            outcome: Some(claim_response::Outcome::Acquired(proto::Acquired {
                ownership: None,
            })),
        };
        assert!(matches!(
            claim_step(acquired_without_details),
            Err(Error::InvalidResponse(_))
        ));
    }
}
