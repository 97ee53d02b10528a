//! The one mapping from domain errors to gRPC statuses with google.rpc details.

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};
use tracing::error;

use crate::domain::{Error, ErrorReason, OperationId, State};

/// The ErrorInfo domain of every reason idemd sends.
pub const ERROR_DOMAIN: &str = "idem.v1";

fn state_name(state: State) -> &'static str {
    match state {
        State::InProgress => "IN_PROGRESS",
        State::Succeeded => "SUCCEEDED",
        State::Failed => "FAILED",
        State::RetryWait => "RETRY_WAIT",
        State::Unknown => "UNKNOWN",
        State::Expired => "EXPIRED",
    }
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

impl From<Error> for Status {
    fn from(error: Error) -> Self {
        let message = error.to_string();
        match error {
            Error::InvalidArgument(violations) => {
                let mut details = ErrorDetails::new();
                for violation in violations {
                    details.add_bad_request_violation(violation.field, violation.description);
                }
                Status::with_error_details(Code::InvalidArgument, message, details)
            }
            Error::Unauthenticated => Status::unauthenticated(message),
            Error::NotFound => Status::not_found(message),
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
            Error::Unavailable { retry_after, .. } => Status::with_error_details(
                Code::Unavailable,
                message,
                ErrorDetails::with_retry_info(Some(retry_after)),
            ),
            Error::Internal(detail) => {
                error!(error = %detail, "internal error");
                Status::internal("internal error")
            }
        }
    }
}
