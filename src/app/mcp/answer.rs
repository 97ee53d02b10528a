//! What a tool call returns: the server's answer as JSON, or a tool error
//! (`isError`) that says who refused and why in the words of the API: the
//! gRPC code, the message and the google.rpc details (ErrorInfo's reason and
//! metadata, BadRequest's fields, RetryInfo's delay), so that an agent reads
//! EVIDENCE_CARRIES_SECRET or PLAN_EXCEEDS_SCOPE exactly as the RPC said it.

use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};
use tonic::{Code, Status};

use super::super::ops::failure::StatusDetails;

/// A successful call: the JSON document, as structured content and as text.
pub(super) fn success(document: Value) -> CallToolResult {
    CallToolResult::structured(document)
}

/// A refusal from the server (or from the channel to it) of `rpc`.
pub(super) fn refused_by_server(rpc: &str, status: &Status) -> CallToolResult {
    CallToolResult::structured_error(status_document(rpc, status))
}

/// A call `idemd mcp` refused itself, before sending anything: arguments
/// that name no request, or a reconcile without its confirmation.
pub(super) fn refused_here(reason: &str, message: impl Into<String>) -> CallToolResult {
    CallToolResult::structured_error(json!({
        "refused_by": "idemd mcp",
        "sent": false,
        "code": code_name(Code::InvalidArgument),
        "reason": reason,
        "message": message.into(),
    }))
}

/// A document the server's JSON could not be made into (never expected:
/// the generated types serialize by construction).
pub(super) fn internal(message: impl std::fmt::Display) -> CallToolResult {
    CallToolResult::structured_error(json!({
        "refused_by": "idemd mcp",
        "code": code_name(Code::Internal),
        "message": message.to_string(),
    }))
}

fn status_document(rpc: &str, status: &Status) -> Value {
    let details = StatusDetails::of(status);
    let mut document = Map::new();
    document.insert("refused_by".into(), json!("server"));
    document.insert("rpc".into(), json!(rpc));
    document.insert("code".into(), json!(code_name(status.code())));
    document.insert("message".into(), json!(status.message()));
    if let Some(reason) = details.reason {
        document.insert("reason".into(), json!(reason));
        let metadata: Map<String, Value> = details
            .metadata
            .into_iter()
            .map(|(name, value)| (name, Value::String(value)))
            .collect();
        document.insert("metadata".into(), Value::Object(metadata));
    }
    if !details.field_violations.is_empty() {
        let fields: Vec<Value> = details
            .field_violations
            .into_iter()
            .map(|(field, description)| json!({"field": field, "description": description}))
            .collect();
        document.insert("field_violations".into(), Value::Array(fields));
    }
    if let Some(delay) = details.retry_delay {
        document.insert("retry_after_seconds".into(), json!(delay.as_secs_f64()));
    }
    Value::Object(document)
}

/// The code's name as the gRPC specification spells it (and as grpcurl and
/// the API's documentation print it).
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use tonic_types::{ErrorDetails, StatusExt};

    use super::*;

    #[test]
    fn a_refusal_carries_the_code_the_reason_its_metadata_and_the_fields() {
        let mut details = ErrorDetails::with_error_info(
            "EVIDENCE_CARRIES_SECRET",
            "idemd.dev",
            [
                ("field".to_owned(), "evidence.notes".to_owned()),
                ("kind".to_owned(), "private_key".to_owned()),
            ],
        );
        details.add_bad_request_violation("evidence.notes", "carries a private key");
        details.set_retry_info(Some(std::time::Duration::from_millis(1500)));
        let status = Status::with_error_details(
            Code::InvalidArgument,
            "the evidence carries a secret",
            details,
        );
        let document = status_document("Diagnose", &status);
        assert_eq!(
            document,
            json!({
                "refused_by": "server",
                "rpc": "Diagnose",
                "code": "INVALID_ARGUMENT",
                "message": "the evidence carries a secret",
                "reason": "EVIDENCE_CARRIES_SECRET",
                "metadata": {"field": "evidence.notes", "kind": "private_key"},
                "field_violations": [
                    {"field": "evidence.notes", "description": "carries a private key"}
                ],
                "retry_after_seconds": 1.5,
            })
        );
    }

    #[test]
    fn a_bare_status_is_its_code_and_message() {
        let status = Status::unimplemented("not yet");
        assert_eq!(
            status_document("Diagnose", &status),
            json!({
                "refused_by": "server",
                "rpc": "Diagnose",
                "code": "UNIMPLEMENTED",
                "message": "not yet",
            })
        );
    }
}
