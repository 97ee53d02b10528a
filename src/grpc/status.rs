//! The one mapping from domain errors to gRPC statuses with google.rpc details.

use std::collections::HashMap;
use std::time::Duration;

use tonic::metadata::MetadataValue;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};
use tracing::error;

use super::response::state_name;
use crate::domain::{Error, ErrorReason, OperationId};

/// The ErrorInfo domain of every reason idemd sends.
pub const ERROR_DOMAIN: &str = "idem.v1";

/// The trailer gRPC clients with a retry policy read as the server's pushback
/// (gRFC A6): the delay before the next attempt, in whole milliseconds.
pub const RETRY_PUSHBACK_TRAILER: &str = "grpc-retry-pushback-ms";

/// A transient refusal, UNAVAILABLE or RESOURCE_EXHAUSTED: the reason, a
/// RetryInfo with `retry_after`, and the same delay as the
/// `grpc-retry-pushback-ms` trailer, so that a client's own retry policy
/// waits as long as one reading RetryInfo. The only way idemd builds either
/// code: a status of either without both would leave a client guessing.
pub fn transient(
    code: Code,
    message: String,
    reason: ErrorReason,
    retry_after: Duration,
) -> Status {
    debug_assert!(matches!(code, Code::Unavailable | Code::ResourceExhausted));
    let mut details = reason_details(reason);
    details.set_retry_info(Some(retry_after));
    let mut status = Status::with_error_details(code, message, details);
    // Rounded up: a pushback shorter than RetryInfo's delay would contradict it.
    let millis = u64::try_from(retry_after.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    status
        .metadata_mut()
        .insert(RETRY_PUSHBACK_TRAILER, MetadataValue::from(millis));
    status
}

fn error_info(
    code: Code,
    message: String,
    reason: ErrorReason,
    operation_id: OperationId,
    extra: &[(&str, String)],
) -> Status {
    let mut metadata: HashMap<String, String> =
        HashMap::from([("operation_id".to_owned(), operation_id.to_string())]);
    metadata.extend(
        extra
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone())),
    );
    Status::with_error_details(
        code,
        message,
        ErrorDetails::with_error_info(reason.as_str(), ERROR_DOMAIN, metadata),
    )
}

/// An ErrorInfo that names nothing but the reason: NOT_FOUND in particular
/// must not say which operation it looked for, or another tenant's would be
/// told apart from a missing one.
fn reason_only(code: Code, message: String, reason: ErrorReason) -> Status {
    Status::with_error_details(code, message, reason_details(reason))
}

fn reason_details(reason: ErrorReason) -> ErrorDetails {
    ErrorDetails::with_error_info(reason.as_str(), ERROR_DOMAIN, HashMap::new())
}

/// The one mapping of a domain error to its gRPC status (a function, not
/// `From`: the error is the domain crate's, the status tonic's).
pub fn to_status(error: Error) -> Status {
    let message = error.to_string();
    match error {
        Error::InvalidArgument(violations) => {
            let mut details = reason_details(ErrorReason::InvalidRequest);
            for violation in violations {
                details.add_bad_request_violation(violation.field, violation.description);
            }
            Status::with_error_details(Code::InvalidArgument, message, details)
        }
        Error::MissingCredentials => reason_only(
            Code::Unauthenticated,
            message,
            ErrorReason::MissingCredentials,
        ),
        Error::Unauthenticated => reason_only(
            Code::Unauthenticated,
            message,
            ErrorReason::InvalidCredentials,
        ),
        Error::NotFound => reason_only(Code::NotFound, message, ErrorReason::OperationNotFound),
        Error::TenantNotFound => reason_only(Code::NotFound, message, ErrorReason::TenantNotFound),
        Error::KeyReused { operation_id } => error_info(
            Code::FailedPrecondition,
            message,
            ErrorReason::IdempotencyKeyReused,
            operation_id,
            &[],
        ),
        Error::ResultExpired { operation_id } => error_info(
            Code::FailedPrecondition,
            message,
            ErrorReason::ResultExpired,
            operation_id,
            &[],
        ),
        Error::LeaseLost {
            operation_id,
            current_fence,
            state,
        } => error_info(
            Code::Aborted,
            message,
            ErrorReason::LeaseLost,
            operation_id,
            &[
                ("current_fence", current_fence.to_string()),
                ("state", state_name(state).to_owned()),
            ],
        ),
        Error::Refused {
            refusal,
            operation_id,
            state,
        } => error_info(
            Code::FailedPrecondition,
            format!(
                "refused in state {}: {}",
                state_name(state),
                refusal.reason().as_str()
            ),
            refusal.reason(),
            operation_id,
            &[("state", state_name(state).to_owned())],
        ),
        Error::Unavailable { retry_after, .. } => transient(
            Code::Unavailable,
            message,
            ErrorReason::StoreUnavailable,
            retry_after,
        ),
        Error::RequestTooLarge { .. } => reason_only(
            Code::ResourceExhausted,
            message,
            ErrorReason::RequestTooLarge,
        ),
        Error::RequestTimeout { .. } => {
            reason_only(Code::DeadlineExceeded, message, ErrorReason::RequestTimeout)
        }
        Error::Overloaded { retry_after } => transient(
            Code::Unavailable,
            message,
            ErrorReason::Overloaded,
            retry_after,
        ),
        Error::TenantConcurrencyLimit { retry_after, .. } => transient(
            Code::ResourceExhausted,
            message,
            ErrorReason::TenantConcurrencyLimit,
            retry_after,
        ),
        Error::MissingScope { scope } => Status::with_error_details(
            Code::PermissionDenied,
            message,
            ErrorDetails::with_error_info(
                ErrorReason::MissingScope.as_str(),
                ERROR_DOMAIN,
                HashMap::from([("scope".to_owned(), scope.to_owned())]),
            ),
        ),
        Error::CertificateRefused(refusal) => {
            reason_only(Code::Unauthenticated, message, refusal.reason())
        }
        // The field and the kind, never the value: the secret is not
        // echoed, logged or kept.
        Error::EvidenceCarriesSecret { field, kind } => {
            let mut details = ErrorDetails::with_error_info(
                ErrorReason::EvidenceCarriesSecret.as_str(),
                ERROR_DOMAIN,
                HashMap::from([
                    ("field".to_owned(), field.to_owned()),
                    ("kind".to_owned(), kind.as_str().to_owned()),
                ]),
            );
            details.add_bad_request_violation(
                field,
                format!(
                    "carries {}: evidence must never hold secrets",
                    kind.as_str()
                ),
            );
            Status::with_error_details(Code::InvalidArgument, message, details)
        }
        Error::PlanStopped {
            stop,
            cause,
            operation_id,
        } => {
            let mut metadata: HashMap<String, String> = stop
                .metadata()
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value))
                .collect();
            metadata.insert("cause".to_owned(), format!("{cause:?}"));
            if let Some(operation_id) = operation_id {
                metadata.insert("operation_id".to_owned(), operation_id.to_string());
            }
            Status::with_error_details(
                Code::PermissionDenied,
                message,
                ErrorDetails::with_error_info(stop.reason().as_str(), ERROR_DOMAIN, metadata),
            )
        }
        Error::Internal(detail) => {
            error!(error = %detail, "internal error");
            reason_only(
                Code::Internal,
                "internal error".to_owned(),
                ErrorReason::Internal,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::domain::{CertificateRefusal, FieldViolation, Refusal, State};

    fn reason_and_domain(status: &Status) -> (String, String) {
        let info = status
            .get_details_error_info()
            .unwrap_or_else(|| panic!("{status:?} carries no ErrorInfo"));
        (info.reason, info.domain)
    }

    #[test]
    fn every_state_has_one_wire_name_and_one_stored_name_read_back() {
        let names: Vec<_> = State::ALL
            .into_iter()
            .map(|state| (state_name(state), state.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("IN_PROGRESS", "in_progress"),
                ("SUCCEEDED", "succeeded"),
                ("FAILED", "failed"),
                ("RETRY_WAIT", "retry_wait"),
                ("UNKNOWN", "unknown"),
                ("EXPIRED", "expired"),
            ]
        );
        for state in State::ALL {
            assert_eq!(State::parse(state.as_str()), Some(state));
        }
        assert_eq!(State::parse("IN_PROGRESS"), None);
    }

    #[test]
    fn every_error_answers_with_an_error_info_reason_of_its_own() {
        let operation_id = OperationId(Uuid::nil());
        for (error, code, reason) in [
            (
                Error::invalid("scope.key", "must be 1-255 bytes"),
                Code::InvalidArgument,
                "INVALID_REQUEST",
            ),
            (
                Error::MissingCredentials,
                Code::Unauthenticated,
                "MISSING_CREDENTIALS",
            ),
            (
                Error::Unauthenticated,
                Code::Unauthenticated,
                "INVALID_CREDENTIALS",
            ),
            (Error::NotFound, Code::NotFound, "OPERATION_NOT_FOUND"),
            (
                Error::KeyReused { operation_id },
                Code::FailedPrecondition,
                "IDEMPOTENCY_KEY_REUSED",
            ),
            (
                Error::ResultExpired { operation_id },
                Code::FailedPrecondition,
                "RESULT_EXPIRED",
            ),
            (
                Error::LeaseLost {
                    operation_id,
                    current_fence: 2,
                    state: State::InProgress,
                },
                Code::Aborted,
                "LEASE_LOST",
            ),
            (
                Error::Refused {
                    refusal: Refusal::LeaseStillLive,
                    operation_id,
                    state: State::InProgress,
                },
                Code::FailedPrecondition,
                "LEASE_STILL_LIVE",
            ),
            (
                Error::unavailable("the database is unavailable"),
                Code::Unavailable,
                "STORE_UNAVAILABLE",
            ),
            (
                Error::RequestTooLarge { limit: 10 },
                Code::ResourceExhausted,
                "REQUEST_TOO_LARGE",
            ),
            (
                Error::RequestTimeout {
                    timeout: Duration::from_secs(1),
                },
                Code::DeadlineExceeded,
                "REQUEST_TIMEOUT",
            ),
            (
                Error::Overloaded {
                    retry_after: Duration::from_millis(100),
                },
                Code::Unavailable,
                "OVERLOADED",
            ),
            (
                Error::TenantConcurrencyLimit {
                    limit: 1,
                    retry_after: Duration::from_millis(100),
                },
                Code::ResourceExhausted,
                "TENANT_CONCURRENCY_LIMIT",
            ),
            (
                Error::MissingScope { scope: "reconcile" },
                Code::PermissionDenied,
                "MISSING_SCOPE",
            ),
            (
                Error::CertificateRefused(CertificateRefusal::Required),
                Code::Unauthenticated,
                "CERTIFICATE_REQUIRED",
            ),
            (
                Error::CertificateRefused(CertificateRefusal::Untrusted),
                Code::Unauthenticated,
                "CERTIFICATE_UNTRUSTED",
            ),
            (
                Error::CertificateRefused(CertificateRefusal::Expired),
                Code::Unauthenticated,
                "CERTIFICATE_EXPIRED",
            ),
            (
                Error::CertificateRefused(CertificateRefusal::Unmapped),
                Code::Unauthenticated,
                "CERTIFICATE_UNMAPPED",
            ),
            (
                Error::Internal("a cause that stays in the log".into()),
                Code::Internal,
                "INTERNAL",
            ),
        ] {
            let reason_of_error = error.reason().as_str();
            let status = to_status(error);
            assert_eq!(status.code(), code, "{status:?}");
            assert_eq!(reason_of_error, reason);
            assert_eq!(
                reason_and_domain(&status),
                (reason.to_owned(), ERROR_DOMAIN.to_owned())
            );
        }
    }

    #[test]
    fn invalid_argument_keeps_its_field_violations_and_unavailable_its_retry_info() {
        let status = to_status(Error::InvalidArgument(vec![
            FieldViolation::new("lease", "must be between 1s and 1h"),
            FieldViolation::new("wait", "must be a non-negative duration"),
        ]));
        let fields: Vec<String> = status
            .get_details_bad_request()
            .expect("BadRequest")
            .field_violations
            .into_iter()
            .map(|violation| violation.field)
            .collect();
        assert_eq!(fields, ["lease", "wait"]);

        let status = to_status(Error::Unavailable {
            reason: "pool exhausted".into(),
            retry_after: Duration::from_millis(250),
        });
        assert_eq!(
            status
                .get_details_retry_info()
                .expect("RetryInfo")
                .retry_delay,
            Some(Duration::from_millis(250))
        );
    }

    /// The pushback trailer of a status, in milliseconds.
    fn pushback_millis(status: &Status) -> Option<u64> {
        status
            .metadata()
            .get(RETRY_PUSHBACK_TRAILER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse().ok())
    }

    #[test]
    fn transient_statuses_push_back_as_long_as_their_retry_info() {
        for (code, retry_after, millis) in [
            (Code::Unavailable, Duration::from_millis(250), 250),
            (Code::Unavailable, Duration::ZERO, 0),
            (Code::ResourceExhausted, Duration::from_secs(2), 2000),
            // Never shorter than RetryInfo's delay.
            (Code::ResourceExhausted, Duration::from_micros(1500), 2),
        ] {
            let status = transient(
                code,
                "try again".into(),
                ErrorReason::StoreUnavailable,
                retry_after,
            );
            assert_eq!(status.code(), code);
            assert_eq!(
                status
                    .get_details_retry_info()
                    .expect("RetryInfo")
                    .retry_delay,
                Some(retry_after)
            );
            assert_eq!(pushback_millis(&status), Some(millis), "{retry_after:?}");
        }

        let status = to_status(Error::Unavailable {
            reason: "pool exhausted".into(),
            retry_after: Duration::from_millis(250),
        });
        assert_eq!(pushback_millis(&status), Some(250));
        // Only transient statuses push back.
        assert_eq!(pushback_millis(&to_status(Error::NotFound)), None);
    }

    #[test]
    fn internal_errors_keep_their_cause_out_of_the_answer() {
        let status = to_status(Error::Internal("database error: secret detail".into()));
        assert_eq!(status.message(), "internal error");
        assert!(
            status
                .get_details_error_info()
                .expect("ErrorInfo")
                .metadata
                .is_empty()
        );
    }
}
