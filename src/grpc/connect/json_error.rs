//! Connect's JSON errors: a status's code as Connect names it, the HTTP
//! status it answers with, and its google.rpc details.

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use bytes::Bytes;
use prost::Message;
use serde::Serialize;
use tonic::codegen::http::{self, HeaderValue, StatusCode, header};
use tonic::{Code, Status};

/// Connect's name of a code (its JSON error's `code`).
pub(super) fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "canceled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

/// The HTTP status Connect answers a code with.
pub(super) fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::Cancelled => StatusCode::REQUEST_TIMEOUT,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
            StatusCode::BAD_REQUEST
        }
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
    }
}

#[derive(Serialize)]
struct ErrorDetail {
    #[serde(rename = "type")]
    type_name: String,
    value: String,
    /// Connect's optional human-readable form of the detail, the message in
    /// proto3 JSON: a curl user can branch on `debug.reason` without
    /// decoding protobuf. Clients read `value`; this is for people and
    /// scripts.
    #[serde(skip_serializing_if = "Option::is_none")]
    debug: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    details: Vec<ErrorDetail>,
}

/// Every google.rpc detail the status carries, as Connect's `details`: the
/// message's full name and its protobuf bytes in unpadded base64.
fn error_details(status: &Status) -> Vec<ErrorDetail> {
    let Ok(carried) = tonic_types::pb::Status::decode(status.details()) else {
        return Vec::new();
    };
    carried
        .details
        .into_iter()
        .map(|any| {
            let type_name = any
                .type_url
                .rsplit_once('/')
                .map_or(any.type_url.as_str(), |(_, name)| name)
                .to_owned();
            ErrorDetail {
                debug: debug_form(&type_name, &any.value),
                value: STANDARD_NO_PAD.encode(&any.value),
                type_name,
            }
        })
        .collect()
}

/// The proto3 JSON of the details idemd sends (ErrorInfo, BadRequest,
/// RetryInfo); `None` for any other type or undecodable bytes.
fn debug_form(type_name: &str, value: &[u8]) -> Option<serde_json::Value> {
    use serde_json::json;
    use tonic_types::pb;
    match type_name {
        "google.rpc.ErrorInfo" => {
            let info = pb::ErrorInfo::decode(value).ok()?;
            let metadata: serde_json::Map<String, serde_json::Value> = info
                .metadata
                .into_iter()
                .map(|(key, value)| (key, value.into()))
                .collect();
            Some(json!({"reason": info.reason, "domain": info.domain, "metadata": metadata}))
        }
        "google.rpc.BadRequest" => {
            let request = pb::BadRequest::decode(value).ok()?;
            let violations: Vec<serde_json::Value> = request
                .field_violations
                .into_iter()
                .map(|violation| {
                    json!({"field": violation.field, "description": violation.description})
                })
                .collect();
            Some(json!({ "fieldViolations": violations }))
        }
        "google.rpc.RetryInfo" => {
            let info = pb::RetryInfo::decode(value).ok()?;
            let delay = info.retry_delay.unwrap_or_default();
            // proto3 JSON's Duration: seconds with up to nine decimals, "s".
            let seconds = delay.seconds as f64 + f64::from(delay.nanos) / 1e9;
            Some(json!({ "retryDelay": format!("{}s", trim_decimals(seconds)) }))
        }
        _ => None,
    }
}

/// `1.5`, `2`, `0.25`: a duration's seconds without trailing zeros.
fn trim_decimals(seconds: f64) -> String {
    let fixed = format!("{seconds:.9}");
    fixed.trim_end_matches('0').trim_end_matches('.').to_owned()
}

pub(super) fn json_response(
    status: StatusCode,
    body: Vec<u8>,
) -> http::Response<tonic::body::Body> {
    let mut response = http::Response::new(tonic::body::Body::new(http_body_util::Full::new(
        Bytes::from(body),
    )));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A status as Connect's JSON error.
pub(super) fn error_response(status: &Status) -> http::Response<tonic::body::Body> {
    let body = ErrorBody {
        code: code_name(status.code()),
        message: status.message(),
        details: error_details(status),
    };
    let json = serde_json::to_vec(&body).unwrap_or_else(|_| br#"{"code":"internal"}"#.to_vec());
    json_response(http_status(status.code()), json)
}

/// A refusal of the request's form (method, media type), before the API
/// service sees it.
pub(super) fn form_refusal(
    http_status: StatusCode,
    message: &str,
    extra: Option<(header::HeaderName, &'static str)>,
) -> http::Response<tonic::body::Body> {
    let status = Status::unimplemented(message);
    let mut response = error_response(&status);
    *response.status_mut() = http_status;
    if let Some((name, value)) = extra {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_debug_form_is_the_details_proto3_json() {
        let info = tonic_types::pb::ErrorInfo {
            reason: "LEASE_LOST".into(),
            domain: "idem.v1".into(),
            metadata: [("operation_id".to_owned(), "0190".to_owned())].into(),
        };
        assert_eq!(
            debug_form("google.rpc.ErrorInfo", &info.encode_to_vec()),
            Some(serde_json::json!({
                "reason": "LEASE_LOST",
                "domain": "idem.v1",
                "metadata": {"operation_id": "0190"}
            }))
        );
        let retry = |seconds, nanos| tonic_types::pb::RetryInfo {
            retry_delay: Some(prost_types::Duration { seconds, nanos }),
        };
        for (seconds, nanos, expected) in [
            (1, 500_000_000, "1.5s"),
            (2, 0, "2s"),
            (0, 250_000_000, "0.25s"),
        ] {
            assert_eq!(
                debug_form(
                    "google.rpc.RetryInfo",
                    &retry(seconds, nanos).encode_to_vec()
                ),
                Some(serde_json::json!({ "retryDelay": expected }))
            );
        }
        assert_eq!(debug_form("google.rpc.Help", b""), None);
        assert_eq!(debug_form("google.rpc.ErrorInfo", b"\xff"), None);
    }
}
