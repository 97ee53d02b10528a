//! The gRPC client, the requests tests send, and what they read and assert
//! of the answers.

use std::collections::HashMap;
use std::time::Duration;

use idemd::proto::idempotency_service_client::IdempotencyServiceClient;
use idemd::proto::{self, claim_response::Outcome};
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

pub type Client = IdempotencyServiceClient<Channel>;

/// The fields a status's BadRequest names, in order.
pub fn violated_fields(status: &tonic::Status) -> Vec<String> {
    use tonic_types::StatusExt;
    status
        .get_details_bad_request()
        .expect("BadRequest")
        .field_violations
        .into_iter()
        .map(|violation| violation.field)
        .collect()
}

pub fn authorized<T>(token: &str, message: T) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("ascii token"),
    );
    request
}

pub fn scope(operation: &str, key: &str) -> Option<proto::Scope> {
    Some(proto::Scope {
        operation: operation.into(),
        key: key.into(),
    })
}

pub fn millis(millis: u64) -> Option<pbjson_types::Duration> {
    let duration = Duration::from_millis(millis);
    Some(pbjson_types::Duration {
        seconds: duration.as_secs() as i64,
        nanos: duration.subsec_nanos() as i32,
    })
}

pub fn claim_json(operation: &str, key: &str, json: &str) -> proto::ClaimRequest {
    proto::ClaimRequest {
        scope: scope(operation, key),
        request_identity: Some(proto::claim_request::RequestIdentity::JsonPayload(
            json.into(),
        )),
        ..Default::default()
    }
}

pub fn result(body: &str) -> Option<proto::Result> {
    Some(proto::Result {
        body: body.as_bytes().to_vec(),
        content_type: "application/json".into(),
        metadata: HashMap::from([("provider".to_owned(), "test".to_owned())]),
    })
}

pub fn ownership(response: &proto::ClaimResponse) -> Option<&proto::Ownership> {
    match response.outcome.as_ref()? {
        Outcome::Acquired(acquired) => acquired.ownership.as_ref(),
        Outcome::ReconcileFirst(reconcile) => reconcile.ownership.as_ref(),
        _ => None,
    }
}

/// Claims `key` until a Claim is admitted, every refusal meanwhile being
/// `code` with `reason`: a released share of a bound comes back within a few
/// seconds (`what` names it when it does not).
pub async fn claim_once_admitted(
    client: &mut Client,
    token: &str,
    key: &str,
    (code, reason): (Code, &str),
    what: &str,
) {
    for attempt in 0.. {
        let claimed = client
            .claim(authorized(token, claim_json("payments.charge", key, "{}")))
            .await;
        match claimed {
            Ok(_) => return,
            Err(status) => {
                assert_status(&status, code, reason);
                assert!(attempt < 500, "{what} never came back");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Claims `key` of `payments.charge` for `token`, which must acquire it;
/// returns (operation_id, fence).
pub async fn acquire(client: &mut Client, token: &str, key: &str) -> (String, u64) {
    let response = client
        .claim(authorized(token, claim_json("payments.charge", key, "{}")))
        .await
        .expect("claim")
        .into_inner();
    let ownership = ownership(&response).expect("acquired").clone();
    (ownership.operation_id, ownership.fence)
}

pub fn outcome_name(response: &proto::ClaimResponse) -> &'static str {
    match response.outcome {
        Some(Outcome::Acquired(_)) => "acquired",
        Some(Outcome::ReconcileFirst(_)) => "reconcile_first",
        Some(Outcome::Pending(_)) => "pending",
        Some(Outcome::Completed(_)) => "completed",
        Some(Outcome::NeedsReconciliation(_)) => "needs_reconciliation",
        None => "none",
    }
}

/// The ErrorInfo reason and metadata of a status.
pub fn error_info(status: &Status) -> (String, HashMap<String, String>) {
    use tonic_types::StatusExt;
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("status {status:?} has no ErrorInfo"));
    assert_eq!(info.domain, "idem.v1");
    (info.reason, info.metadata)
}

pub fn assert_status(status: &Status, code: Code, reason: &str) {
    assert_eq!(status.code(), code, "unexpected status: {status:?}");
    assert_eq!(
        error_info(status).0,
        reason,
        "unexpected reason: {status:?}"
    );
}

pub async fn history(
    client: &mut Client,
    token: &str,
    operation_id: &str,
) -> Vec<proto::HistoryEntry> {
    client
        .lookup(authorized(
            token,
            proto::LookupRequest {
                target: Some(proto::lookup_request::Target::OperationId(
                    operation_id.into(),
                )),
                include_history: true,
                ..Default::default()
            },
        ))
        .await
        .expect("lookup")
        .into_inner()
        .history
}

pub fn events(history: &[proto::HistoryEntry]) -> Vec<String> {
    history.iter().map(|entry| entry.event.clone()).collect()
}

/// Claims as `token` and returns the ownership it must have been given.
pub async fn claim_owned(
    client: &mut Client,
    token: &str,
    request: proto::ClaimRequest,
) -> proto::Ownership {
    let response = client
        .claim(authorized(token, request))
        .await
        .expect("claim")
        .into_inner();
    ownership(&response)
        .unwrap_or_else(|| panic!("owned: {response:?}"))
        .clone()
}

/// Reports the owned attempt's outcome UNKNOWN (a provider timeout), as a
/// caller whose call to its provider went unanswered; it must be UNKNOWN
/// afterwards.
pub async fn fail_unknown(client: &mut Client, token: &str, owned: &proto::Ownership) {
    let answer = client
        .fail(authorized(
            token,
            proto::FailRequest {
                operation_id: owned.operation_id.clone(),
                fence: owned.fence,
                disposition: proto::FailDisposition::Unknown.into(),
                error: Some(proto::OperationError {
                    code: "provider_timeout".into(),
                    ..Default::default()
                }),
                retry_after: None,
            },
        ))
        .await
        .expect("fail unknown")
        .into_inner();
    assert_eq!(answer.state(), proto::OperationState::Unknown);
}

/// Completes the owned attempt with `body` as its result.
pub async fn complete(client: &mut Client, token: &str, owned: &proto::Ownership, body: &str) {
    client
        .complete(authorized(
            token,
            proto::CompleteRequest {
                operation_id: owned.operation_id.clone(),
                fence: owned.fence,
                result: result(body),
            },
        ))
        .await
        .expect("complete");
}

/// Reports the owned attempt's failure TERMINAL (`card_declined`), as a
/// caller whose provider refused for good; it must be FAILED afterwards.
pub async fn fail_terminal(client: &mut Client, token: &str, owned: &proto::Ownership) {
    let answer = client
        .fail(authorized(
            token,
            proto::FailRequest {
                operation_id: owned.operation_id.clone(),
                fence: owned.fence,
                disposition: proto::FailDisposition::Terminal.into(),
                error: Some(proto::OperationError {
                    code: "card_declined".into(),
                    message: "declined".into(),
                    ..Default::default()
                }),
                retry_after: None,
            },
        ))
        .await
        .expect("fail terminal")
        .into_inner();
    assert_eq!(answer.state(), proto::OperationState::Failed);
}

/// The operation of `operation_id`, without history, as `token` reads it.
pub async fn operation_by_id(
    client: &mut Client,
    token: &str,
    operation_id: &str,
) -> proto::Operation {
    client
        .lookup(authorized(
            token,
            proto::LookupRequest {
                target: Some(proto::lookup_request::Target::OperationId(
                    operation_id.into(),
                )),
                ..Default::default()
            },
        ))
        .await
        .expect("lookup")
        .into_inner()
        .operation
        .expect("operation")
}
