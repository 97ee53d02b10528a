//! The provider whose effects are counted, and one attempt of the
//! documented client protocol against it.

use std::sync::{Arc, Mutex};

use idemd::proto::{self, claim_response::Outcome};
use tonic::Code;

use super::requests::{Client, authorized, error_info, result};

/// The downstream system whose effects must happen at most once. It counts
/// what actually happened, whatever the responses said.
#[derive(Debug, Clone, Default)]
pub struct Provider {
    effects: Arc<Mutex<Vec<String>>>,
}

impl Provider {
    pub fn charge(&self, reference: &str) -> String {
        let mut effects = self.effects.lock().expect("provider lock");
        effects.push(reference.to_owned());
        format!("{{\"charge\":{}}}", effects.len())
    }

    pub fn effects(&self) -> usize {
        self.effects.lock().expect("provider lock").len()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// This attempt executed the effect and recorded it.
    Executed,
    /// The stored result was replayed; nothing executed.
    Replayed,
    /// Same key, different request: refused.
    Conflict,
    /// Another attempt holds it; nothing executed.
    Pending,
    /// Only a reconciler can resolve it; nothing executed.
    NeedsReconciliation,
    /// The call failed in transport; the caller does not know what happened.
    Unavailable,
}

/// One attempt of the documented client protocol: Claim; execute only on
/// Acquired; Complete; replay on Completed; never execute otherwise.
pub async fn attempt(
    client: &mut Client,
    token: &str,
    request: proto::ClaimRequest,
    provider: &Provider,
) -> Attempt {
    let response = match client.claim(authorized(token, request)).await {
        Ok(response) => response.into_inner(),
        Err(status) if status.code() == Code::Unavailable => return Attempt::Unavailable,
        Err(status) if status.code() == Code::FailedPrecondition => {
            assert_eq!(error_info(&status).0, "IDEMPOTENCY_KEY_REUSED");
            return Attempt::Conflict;
        }
        Err(status) => panic!("unexpected claim error: {status:?}"),
    };
    match response.outcome {
        Some(Outcome::Acquired(acquired)) => {
            let ownership = acquired.ownership.expect("ownership");
            let body = provider.charge(&ownership.operation_id);
            let completed = client
                .complete(authorized(
                    token,
                    proto::CompleteRequest {
                        operation_id: ownership.operation_id,
                        fence: ownership.fence,
                        result: result(&body),
                    },
                ))
                .await;
            match completed {
                Ok(_) => Attempt::Executed,
                Err(status) if status.code() == Code::Unavailable => Attempt::Unavailable,
                Err(status) => panic!("unexpected complete error: {status:?}"),
            }
        }
        Some(Outcome::Completed(_)) => Attempt::Replayed,
        Some(Outcome::Pending(_)) => Attempt::Pending,
        Some(Outcome::NeedsReconciliation(_)) => Attempt::NeedsReconciliation,
        other => panic!("unexpected claim outcome: {other:?}"),
    }
}
