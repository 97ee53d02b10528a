//! One client of idemd's gRPC API, as the load generator drives it.

use idemd::proto::idempotency_service_client::IdempotencyServiceClient;
use idemd::proto::{self, claim_response};
use sha2::{Digest, Sha256};
use tonic::Request;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;

use crate::tally::Tally;
use crate::{BoxError, OPERATION, RESULT_BODY, RESULT_CONTENT_TYPE};

/// What a Claim told the client to do.
pub(crate) enum ClaimAnswer {
    Execute {
        operation_id: String,
        fence: u64,
    },
    /// Only from `claim_and_execute`: owned, executed and completed.
    Executed,
    Pending,
    Completed {
        body: Option<Vec<u8>>,
    },
    Conflict,
    /// Needs reconciliation, an unknown outcome, or an error status.
    Other,
}

pub(crate) struct Client {
    pub(crate) idempotency: IdempotencyServiceClient<Channel>,
    pub(crate) health: HealthClient<Channel>,
    pub(crate) authorization: MetadataValue<tonic::metadata::Ascii>,
}

impl Client {
    pub(crate) async fn connect(address: &str, token: &str) -> Result<Self, BoxError> {
        // One connection per client, as separate client processes would have.
        let channel = Channel::from_shared(address.to_owned())?
            .tcp_nodelay(true)
            .connect()
            .await?;
        Ok(Self {
            idempotency: IdempotencyServiceClient::new(channel.clone()),
            health: HealthClient::new(channel),
            authorization: format!("Bearer {token}").parse()?,
        })
    }

    pub(crate) fn authorized<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request
            .metadata_mut()
            .insert("authorization", self.authorization.clone());
        request
    }

    pub(crate) async fn claim(
        &mut self,
        tally: &mut Tally,
        key: &str,
        fingerprint: [u8; 32],
    ) -> ClaimAnswer {
        let request = self.authorized(proto::ClaimRequest {
            scope: Some(proto::Scope {
                operation: OPERATION.into(),
                key: key.into(),
            }),
            request_identity: Some(proto::claim_request::RequestIdentity::Fingerprint(
                fingerprint.to_vec(),
            )),
            ..Default::default()
        });
        let response = match self.idempotency.claim(request).await {
            Ok(response) => response.into_inner(),
            Err(status) => {
                tally.status(status.code());
                let reason = status.get_details_error_info().map(|info| info.reason);
                if status.code() == tonic::Code::FailedPrecondition
                    && reason.as_deref() == Some("IDEMPOTENCY_KEY_REUSED")
                {
                    tally.outcome("conflict");
                    return ClaimAnswer::Conflict;
                }
                tally.outcome("error");
                return ClaimAnswer::Other;
            }
        };
        tally.status(tonic::Code::Ok);
        let ownership = |ownership: Option<proto::Ownership>| match ownership {
            Some(ownership) => ClaimAnswer::Execute {
                operation_id: ownership.operation_id,
                fence: ownership.fence,
            },
            None => ClaimAnswer::Other,
        };
        match response.outcome {
            Some(claim_response::Outcome::Acquired(acquired)) => {
                tally.outcome("acquired");
                ownership(acquired.ownership)
            }
            Some(claim_response::Outcome::ReconcileFirst(reconcile_first)) => {
                // Nothing in these workloads happened outside idemd, so the
                // owner has nothing to find at the provider and executes.
                tally.outcome("reconcile_first");
                ownership(reconcile_first.ownership)
            }
            Some(claim_response::Outcome::Pending(_)) => {
                tally.outcome("pending");
                ClaimAnswer::Pending
            }
            Some(claim_response::Outcome::Completed(completed)) => {
                tally.outcome("completed");
                let body = match completed.outcome {
                    Some(proto::completed::Outcome::Result(result)) => Some(result.body),
                    _ => None,
                };
                ClaimAnswer::Completed { body }
            }
            Some(claim_response::Outcome::NeedsReconciliation(_)) => {
                tally.outcome("needs_reconciliation");
                ClaimAnswer::Other
            }
            None => {
                tally.outcome("unknown");
                ClaimAnswer::Other
            }
        }
    }

    /// Executes the (empty) effect and completes; counts the execution.
    pub(crate) async fn complete(
        &mut self,
        tally: &mut Tally,
        key: &str,
        operation_id: String,
        fence: u64,
    ) -> bool {
        let request = self.authorized(proto::CompleteRequest {
            operation_id,
            fence,
            result: Some(proto::Result {
                body: RESULT_BODY.to_vec(),
                content_type: RESULT_CONTENT_TYPE.into(),
                metadata: Default::default(),
            }),
        });
        match self.idempotency.complete(request).await {
            Ok(_) => {
                tally.status(tonic::Code::Ok);
                *tally.executions.entry(key.to_owned()).or_default() += 1;
                true
            }
            Err(status) => {
                tally.status(status.code());
                false
            }
        }
    }

    /// Lookup by scope, without history: whether it answered the stored
    /// result of a succeeded operation.
    pub(crate) async fn lookup(&mut self, tally: &mut Tally, key: &str) -> bool {
        let request = self.authorized(proto::LookupRequest {
            target: Some(proto::lookup_request::Target::Scope(proto::Scope {
                operation: OPERATION.into(),
                key: key.into(),
            })),
            ..Default::default()
        });
        match self.idempotency.lookup(request).await {
            Ok(response) => {
                tally.status(tonic::Code::Ok);
                let operation = response.into_inner().operation;
                let body = operation
                    .as_ref()
                    .and_then(|operation| operation.result.as_ref())
                    .map(|result| result.body.as_slice());
                tally.outcome("found");
                body == Some(RESULT_BODY)
            }
            Err(status) => {
                tally.status(status.code());
                false
            }
        }
    }

    /// Claim, and on ownership execute and Complete.
    pub(crate) async fn claim_and_execute(
        &mut self,
        tally: &mut Tally,
        key: &str,
        fingerprint: [u8; 32],
    ) -> ClaimAnswer {
        match self.claim(tally, key, fingerprint).await {
            ClaimAnswer::Execute {
                operation_id,
                fence,
            } => {
                if self.complete(tally, key, operation_id, fence).await {
                    ClaimAnswer::Executed
                } else {
                    ClaimAnswer::Other
                }
            }
            other => other,
        }
    }
}

/// The preloaded keys, as bench/sql/preload_*.sql write them.
pub(crate) fn replay_key(prefix: &str, number: u64) -> String {
    format!("{prefix}{number:010}")
}

pub(crate) fn fingerprint_of(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// The fingerprint of another request under the same key.
pub(crate) fn other_fingerprint_of(key: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(key.as_bytes());
    hasher.update(b"\0another payload");
    hasher.finalize().into()
}
