//! idemd's errors, decoded from the gRPC status and its google.rpc details
//! into one enum a caller can match on. The ErrorInfo reason (domain
//! `idem.v1`) decides; the status code only where idemd sent no ErrorInfo,
//! which means the status did not come from idemd (a proxy, the transport).

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use tonic::{Code, Status};
use tonic_types::StatusExt;

use crate::proto::{OperationState, PendingReason};

/// The ErrorInfo domain of every status idemd sends.
pub const ERROR_DOMAIN: &str = "idem.v1";

/// One field the server refused, from BadRequest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    pub field: String,
    pub description: String,
}

/// Everything that can go wrong talking to idemd or executing through it.
/// The first group mirrors the ErrorInfo reasons of the proto's header
/// comment; the last group is what [`crate::Client::execute_once`] itself
/// concludes.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// IDEMPOTENCY_KEY_REUSED: the key was used with a different request. Never a
    /// replay, never an execution: use a new key for a new intent.
    Conflict { operation_id: String },
    /// RESULT_EXPIRED: the scope's result passed retention; nothing executes.
    ResultExpired { operation_id: String },
    /// LEASE_LOST: the write carried a stale fence; a newer owner or a
    /// reconciler holds the operation.
    LeaseLost {
        operation_id: String,
        current_fence: Option<u64>,
        state: Option<OperationState>,
    },
    /// REQUEST_MISMATCH: the same fence re-sent with another request.
    RequestMismatch {
        operation_id: String,
        state: Option<OperationState>,
    },
    /// OPERATION_TERMINAL: the operation already ended.
    OperationTerminal {
        operation_id: String,
        state: Option<OperationState>,
    },
    /// Any other FAILED_PRECONDITION reason: LEASE_STILL_LIVE,
    /// ATTEMPT_STILL_RUNNING, ATTEMPT_DEADLINE_PASSED, STATE_FORBIDS (or one
    /// added later).
    FailedPrecondition {
        reason: String,
        operation_id: Option<String>,
        state: Option<OperationState>,
        message: String,
    },
    /// UNAVAILABLE from idemd (STORE_UNAVAILABLE): re-send unchanged after
    /// `retry_after`.
    Unavailable {
        retry_after: Option<Duration>,
        message: String,
    },
    /// RESOURCE_EXHAUSTED `REQUEST_TOO_LARGE`: the message is longer than any
    /// legal request. Never re-sent: the same bytes would be refused again.
    RequestTooLarge { message: String },
    /// RESOURCE_EXHAUSTED: overload; re-send unchanged after `retry_after`.
    ResourceExhausted {
        retry_after: Option<Duration>,
        message: String,
    },
    /// DEADLINE_EXCEEDED: the call's deadline passed before an answer came; the
    /// request may or may not have been applied (re-send unchanged).
    DeadlineExceeded { message: String },
    /// INVALID_ARGUMENT (INVALID_REQUEST), one violation per refused field.
    InvalidArgument {
        field_violations: Vec<FieldViolation>,
        message: String,
    },
    /// UNAUTHENTICATED: MISSING_CREDENTIALS or INVALID_CREDENTIALS.
    Unauthenticated { reason: String, message: String },
    /// PERMISSION_DENIED.
    PermissionDenied { message: String },
    /// NOT_FOUND (OPERATION_NOT_FOUND): no such scope or operation_id, or
    /// another tenant's.
    NotFound { message: String },
    /// No answer from idemd: the connection failed, was reset or closed, or a
    /// proxy answered. The request may or may not have been applied.
    Transport { code: Code, message: String },
    /// INTERNAL: a fault of the server, logged there.
    Internal { message: String },
    /// A reason or code this client does not know.
    Unknown {
        reason: String,
        code: Code,
        message: String,
    },

    /// The server answered something the protocol does not allow (e.g.
    /// ownership without its details).
    InvalidResponse(String),
    /// Claim answered NeedsReconciliation: the attempt budget is spent on
    /// unknown outcomes; only Reconcile can resolve it. Nothing executed.
    NeedsReconciliation {
        operation_id: String,
        fence: u64,
        attempts: u32,
    },
    /// Claim answered an outcome this client does not know. Nothing executed.
    UnrecognisedOutcome,
    /// Whether the operation's effect happened is unknown to this call;
    /// `because` says why and what to do. Either this call's effect ended with
    /// an unknown outcome (Fail UNKNOWN was sent; executing the same intent
    /// again reconciles it instead of repeating it blindly), or this call
    /// took over an earlier attempt whose outcome is unknown and could not
    /// check it, so it ran nothing and declined (Fail NOT_STARTED, the
    /// earlier attempt's doubt kept).
    OutcomeUnknown {
        operation_id: String,
        attempt: u32,
        because: UnknownBecause,
    },
    /// Pending: the caller's deadline passed while another attempt held the
    /// operation, or before the next attempt was due (a retry scheduled, or
    /// this call's attempt declined). Nothing ran in this call's last
    /// attempt. `retry_after`: when the next attempt is due, as the server
    /// last said; `reason`: why it is pending. `operation_id` is known if the
    /// server named one.
    DeadlinePassed {
        operation_id: Option<String>,
        retry_after: Duration,
        reason: PendingReason,
    },
    /// Told LEASE_LOST, this call looked the operation up and found it not
    /// ended: another owner (or a reconciler) holds it. Nothing runs here
    /// again; execute the same intent later for its outcome.
    Superseded {
        operation_id: String,
        state: OperationState,
        attempt: u32,
    },
}

/// Why [`Error::OutcomeUnknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnknownBecause {
    /// This call's effect said its outcome is unknown, or was cancelled at
    /// the attempt deadline: it may have happened. Fail UNKNOWN was sent.
    EffectUnknown,
    /// A takeover (ReconcileFirst) of an earlier attempt that may have taken
    /// effect, with neither a lookup nor [`crate::Operation::provider_deduplicates`]:
    /// nothing ran, the attempt was declined (Fail NOT_STARTED). Pass a
    /// lookup, or declare provider deduplication if the provider honours the
    /// key, or reconcile the operation.
    EarlierAttemptUnchecked,
    /// A takeover whose lookup answered [`crate::Disposition::Unknown`] (it
    /// could not tell) or panicked: nothing ran, the attempt was declined
    /// (Fail NOT_STARTED).
    LookupInconclusive,
    /// The effect was cancelled at the attempt's cancel point (the attempt
    /// deadline less its margin): it may have happened. Fail UNKNOWN was
    /// sent (`attempt_deadline`).
    AttemptTimedOut,
    /// The effect panicked: it may have happened. Fail UNKNOWN was sent
    /// (`effect_raised`) before the panic resumed.
    EffectPanicked,
    /// The outcome could not be recorded: the attempt deadline passed
    /// first (ATTEMPT_DEADLINE_PASSED). A reconciler settles it.
    NotRecordedInTime,
}

impl Error {
    /// The operation this error is about, where the server named it.
    pub fn operation_id(&self) -> Option<&str> {
        match self {
            Error::Conflict { operation_id }
            | Error::ResultExpired { operation_id }
            | Error::LeaseLost { operation_id, .. }
            | Error::RequestMismatch { operation_id, .. }
            | Error::OperationTerminal { operation_id, .. }
            | Error::NeedsReconciliation { operation_id, .. }
            | Error::OutcomeUnknown { operation_id, .. }
            | Error::Superseded { operation_id, .. } => Some(operation_id),
            Error::FailedPrecondition { operation_id, .. }
            | Error::DeadlinePassed { operation_id, .. } => operation_id.as_deref(),
            _ => None,
        }
    }

    /// Decodes a status: by its idemd ErrorInfo reason where it has one,
    /// else by its code.
    pub fn from_status(status: &Status) -> Self {
        let details = status.get_error_details();
        let message = status.message().to_owned();
        let retry_after = details
            .retry_info()
            .and_then(|retry_info| retry_info.retry_delay);
        let Some(info) = details
            .error_info()
            .filter(|info| info.domain == ERROR_DOMAIN)
        else {
            return Self::from_code(status.code(), message, retry_after);
        };
        let metadata = &info.metadata;
        let operation_id = metadata.get("operation_id").cloned();
        let state = parse_state(metadata);
        let with_id = || operation_id.clone().unwrap_or_default();
        match info.reason.as_str() {
            "IDEMPOTENCY_KEY_REUSED" => Error::Conflict {
                operation_id: with_id(),
            },
            "RESULT_EXPIRED" => Error::ResultExpired {
                operation_id: with_id(),
            },
            "LEASE_LOST" => Error::LeaseLost {
                operation_id: with_id(),
                current_fence: metadata
                    .get("current_fence")
                    .and_then(|fence| fence.parse().ok()),
                state,
            },
            "REQUEST_MISMATCH" => Error::RequestMismatch {
                operation_id: with_id(),
                state,
            },
            "OPERATION_TERMINAL" => Error::OperationTerminal {
                operation_id: with_id(),
                state,
            },
            "INVALID_REQUEST" => Error::InvalidArgument {
                field_violations: details
                    .bad_request()
                    .map(|bad_request| {
                        bad_request
                            .field_violations
                            .iter()
                            .map(|violation| FieldViolation {
                                field: violation.field.clone(),
                                description: violation.description.clone(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                message,
            },
            "MISSING_CREDENTIALS" | "INVALID_CREDENTIALS" => Error::Unauthenticated {
                reason: info.reason.clone(),
                message,
            },
            "OPERATION_NOT_FOUND" => Error::NotFound { message },
            "REQUEST_TOO_LARGE" => Error::RequestTooLarge { message },
            "STORE_UNAVAILABLE" => Error::Unavailable {
                retry_after,
                message,
            },
            "INTERNAL" => Error::Internal { message },
            reason if status.code() == Code::FailedPrecondition => Error::FailedPrecondition {
                reason: reason.to_owned(),
                operation_id,
                state,
                message,
            },
            // A reason added after this client was written: branch on the
            // code where the taxonomy needs it (retries), keep the reason.
            reason => match status.code() {
                Code::Unavailable => Error::Unavailable {
                    retry_after,
                    message,
                },
                Code::ResourceExhausted => Error::ResourceExhausted {
                    retry_after,
                    message,
                },
                Code::DeadlineExceeded => Error::DeadlineExceeded { message },
                code => Error::Unknown {
                    reason: reason.to_owned(),
                    code,
                    message,
                },
            },
        }
    }

    /// A status without idemd's ErrorInfo.
    fn from_code(code: Code, message: String, retry_after: Option<Duration>) -> Self {
        match code {
            Code::ResourceExhausted => Error::ResourceExhausted {
                retry_after,
                message,
            },
            Code::DeadlineExceeded => Error::DeadlineExceeded { message },
            Code::InvalidArgument => Error::InvalidArgument {
                field_violations: Vec::new(),
                message,
            },
            Code::Unauthenticated => Error::Unauthenticated {
                reason: String::new(),
                message,
            },
            Code::PermissionDenied => Error::PermissionDenied { message },
            Code::NotFound => Error::NotFound { message },
            // UNAVAILABLE asking for a delay (RetryInfo) is honoured as such,
            // whoever sent it: the re-send waits at least that long.
            Code::Unavailable if retry_after.is_some() => Error::Unavailable {
                retry_after,
                message,
            },
            // idemd attaches an ErrorInfo to every status it sends; these
            // codes without one come from the connection (tonic reports a
            // refused, reset or closed connection as UNAVAILABLE, UNKNOWN,
            // INTERNAL or CANCELLED) or from a proxy in between.
            Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled => {
                Error::Transport { code, message }
            }
            code => Error::Unknown {
                reason: String::new(),
                code,
                message,
            },
        }
    }
}

/// `state` in ErrorInfo metadata, as idemd spells it (`IN_PROGRESS`, …).
fn parse_state(metadata: &HashMap<String, String>) -> Option<OperationState> {
    let name = metadata.get("state")?;
    OperationState::from_str_name(&format!("OPERATION_STATE_{name}"))
}

impl From<Status> for Error {
    fn from(status: Status) -> Self {
        Self::from_status(&status)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Conflict { operation_id } => write!(
                formatter,
                "the idempotency key was already used with a different request (operation {operation_id})"
            ),
            Error::ResultExpired { operation_id } => write!(
                formatter,
                "the result of operation {operation_id} passed retention"
            ),
            Error::LeaseLost {
                operation_id,
                current_fence,
                state,
            } => write!(
                formatter,
                "lease lost on operation {operation_id} (current fence {current_fence:?}, state {state:?})"
            ),
            Error::RequestMismatch { operation_id, .. } => write!(
                formatter,
                "operation {operation_id}: the same fence was sent with another request"
            ),
            Error::OperationTerminal { operation_id, .. } => {
                write!(formatter, "operation {operation_id} already ended")
            }
            Error::FailedPrecondition {
                reason, message, ..
            } => write!(formatter, "refused ({reason}): {message}"),
            Error::Unavailable { message, .. } => write!(formatter, "unavailable: {message}"),
            Error::RequestTooLarge { message } => write!(formatter, "request too large: {message}"),
            Error::ResourceExhausted { message, .. } => {
                write!(formatter, "resource exhausted: {message}")
            }
            Error::DeadlineExceeded { message } => {
                write!(formatter, "deadline exceeded: {message}")
            }
            Error::InvalidArgument {
                field_violations,
                message,
            } => {
                write!(formatter, "invalid argument: {message}")?;
                for violation in field_violations {
                    write!(
                        formatter,
                        "; {}: {}",
                        violation.field, violation.description
                    )?;
                }
                Ok(())
            }
            Error::Unauthenticated { reason, message } => {
                write!(formatter, "unauthenticated ({reason}): {message}")
            }
            Error::PermissionDenied { message } => {
                write!(formatter, "permission denied: {message}")
            }
            Error::NotFound { message } => write!(formatter, "not found: {message}"),
            Error::Transport { code, message } => {
                write!(formatter, "no answer from idemd ({code:?}): {message}")
            }
            Error::Internal { message } => write!(formatter, "idemd internal error: {message}"),
            Error::Unknown {
                reason,
                code,
                message,
            } => write!(formatter, "unknown error {reason} ({code:?}): {message}"),
            Error::InvalidResponse(what) => write!(formatter, "invalid response: {what}"),
            Error::NeedsReconciliation {
                operation_id,
                fence,
                ..
            } => write!(
                formatter,
                "operation {operation_id} needs reconciliation (fence {fence}); nothing executed"
            ),
            Error::UnrecognisedOutcome => {
                write!(formatter, "an unknown Claim outcome; nothing executed")
            }
            Error::OutcomeUnknown {
                operation_id,
                attempt,
                because,
            } => match because {
                UnknownBecause::EffectUnknown => write!(
                    formatter,
                    "operation {operation_id}, attempt {attempt}: the effect's outcome is unknown \
                     (reported to idemd)"
                ),
                UnknownBecause::EarlierAttemptUnchecked => write!(
                    formatter,
                    "operation {operation_id}, attempt {attempt}: an earlier attempt may have \
                     taken effect and this call cannot check it: pass a lookup \
                     (execute_once_with_lookup), or declare provider deduplication \
                     (Operation::provider_deduplicates) if the provider honours the \
                     operation_id as its idempotency key, or reconcile the operation; \
                     nothing ran (declined: Fail NOT_STARTED)"
                ),
                UnknownBecause::LookupInconclusive => write!(
                    formatter,
                    "operation {operation_id}, attempt {attempt}: the lookup could not tell \
                     whether an earlier attempt took effect: execute again later, or \
                     reconcile the operation; nothing ran (declined: Fail NOT_STARTED)"
                ),
                UnknownBecause::AttemptTimedOut => write!(
                    formatter,
                    "operation {operation_id}, attempt {attempt}: the effect was cancelled at \
                     the attempt deadline; its outcome is unknown (reported to idemd)"
                ),
                UnknownBecause::EffectPanicked => write!(
                    formatter,
                    "operation {operation_id}, attempt {attempt}: the effect panicked; its \
                     outcome is unknown (reported to idemd)"
                ),
                UnknownBecause::NotRecordedInTime => write!(
                    formatter,
                    "operation {operation_id}, attempt {attempt}: the attempt deadline passed \
                     before the outcome was recorded; a reconciler must settle it"
                ),
            },
            Error::DeadlinePassed {
                operation_id,
                retry_after,
                reason,
            } => write!(
                formatter,
                "the deadline passed while operation {} was pending ({}; the next attempt is due \
                 in {retry_after:?})",
                operation_id.as_deref().unwrap_or("(not yet named)"),
                reason.as_str_name()
            ),
            Error::Superseded {
                operation_id,
                state,
                attempt,
            } => write!(
                formatter,
                "operation {operation_id} was taken over (lease lost); it is {} at attempt \
                 {attempt}: nothing runs here again",
                state.as_str_name()
            ),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use tonic_types::{ErrorDetails, StatusExt};

    use super::*;

    fn idemd_status(code: Code, reason: &str, metadata: &[(&str, &str)]) -> Status {
        let metadata: HashMap<String, String> = metadata
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        Status::with_error_details(
            code,
            "message",
            ErrorDetails::with_error_info(reason, ERROR_DOMAIN, metadata),
        )
    }

    #[test]
    fn every_documented_reason_decodes_to_its_variant() {
        let lease_lost = idemd_status(
            Code::Aborted,
            "LEASE_LOST",
            &[
                ("operation_id", "op-1"),
                ("current_fence", "7"),
                ("state", "SUCCEEDED"),
            ],
        );
        assert_eq!(
            Error::from_status(&lease_lost),
            Error::LeaseLost {
                operation_id: "op-1".into(),
                current_fence: Some(7),
                state: Some(OperationState::Succeeded),
            }
        );
        let too_large = idemd_status(Code::ResourceExhausted, "REQUEST_TOO_LARGE", &[]);
        assert_eq!(
            Error::from_status(&too_large),
            Error::RequestTooLarge {
                message: "message".into()
            }
        );
        assert_eq!(
            crate::retry::retryable(&Error::from_status(&too_large)),
            None
        );
        let conflict = idemd_status(
            Code::FailedPrecondition,
            "IDEMPOTENCY_KEY_REUSED",
            &[("operation_id", "op-2")],
        );
        assert_eq!(
            Error::from_status(&conflict),
            Error::Conflict {
                operation_id: "op-2".into()
            }
        );
        let still_live = idemd_status(
            Code::FailedPrecondition,
            "LEASE_STILL_LIVE",
            &[("operation_id", "op-3"), ("state", "IN_PROGRESS")],
        );
        assert_eq!(
            Error::from_status(&still_live),
            Error::FailedPrecondition {
                reason: "LEASE_STILL_LIVE".into(),
                operation_id: Some("op-3".into()),
                state: Some(OperationState::InProgress),
                message: "message".into(),
            }
        );
        for (reason, code) in [
            ("RESULT_EXPIRED", Code::FailedPrecondition),
            ("REQUEST_MISMATCH", Code::FailedPrecondition),
            ("OPERATION_TERMINAL", Code::FailedPrecondition),
        ] {
            let decoded =
                Error::from_status(&idemd_status(code, reason, &[("operation_id", "op-4")]));
            assert_eq!(
                decoded.operation_id(),
                Some("op-4"),
                "{reason}: {decoded:?}"
            );
            assert!(
                !matches!(decoded, Error::FailedPrecondition { .. }),
                "{reason} has a variant of its own"
            );
        }
        assert!(matches!(
            Error::from_status(&idemd_status(Code::NotFound, "OPERATION_NOT_FOUND", &[])),
            Error::NotFound { .. }
        ));
        assert!(matches!(
            Error::from_status(&idemd_status(Code::Internal, "INTERNAL", &[])),
            Error::Internal { .. }
        ));
        assert!(matches!(
            Error::from_status(&idemd_status(
                Code::Unauthenticated,
                "MISSING_CREDENTIALS",
                &[]
            )),
            Error::Unauthenticated { reason, .. } if reason == "MISSING_CREDENTIALS"
        ));
    }

    #[test]
    fn unavailable_keeps_retry_info_and_invalid_argument_its_violations() {
        let mut details = ErrorDetails::with_error_info(
            "STORE_UNAVAILABLE",
            ERROR_DOMAIN,
            HashMap::<String, String>::new(),
        );
        details.set_retry_info(Some(Duration::from_millis(250)));
        let unavailable = Status::with_error_details(Code::Unavailable, "down", details);
        assert_eq!(
            Error::from_status(&unavailable),
            Error::Unavailable {
                retry_after: Some(Duration::from_millis(250)),
                message: "down".into()
            }
        );

        let mut details = ErrorDetails::with_error_info(
            "INVALID_REQUEST",
            ERROR_DOMAIN,
            HashMap::<String, String>::new(),
        );
        details.add_bad_request_violation("scope.key", "must not be empty");
        let invalid = Status::with_error_details(Code::InvalidArgument, "bad", details);
        assert_eq!(
            Error::from_status(&invalid),
            Error::InvalidArgument {
                field_violations: vec![FieldViolation {
                    field: "scope.key".into(),
                    description: "must not be empty".into()
                }],
                message: "bad".into()
            }
        );
    }

    #[test]
    fn statuses_without_idemd_error_info_are_transport_or_by_code() {
        assert!(matches!(
            Error::from_status(&Status::unavailable("connection refused")),
            Error::Transport {
                code: Code::Unavailable,
                ..
            }
        ));
        assert!(matches!(
            Error::from_status(&Status::unknown("transport error")),
            Error::Transport { .. }
        ));
        assert!(matches!(
            Error::from_status(&Status::deadline_exceeded("timeout")),
            Error::DeadlineExceeded { .. }
        ));
        assert!(matches!(
            Error::from_status(&Status::resource_exhausted("slow down")),
            Error::ResourceExhausted {
                retry_after: None,
                ..
            }
        ));
        // Another service's ErrorInfo is not idemd's.
        let foreign = Status::with_error_details(
            Code::FailedPrecondition,
            "x",
            ErrorDetails::with_error_info(
                "LEASE_LOST",
                "example.com",
                HashMap::<String, String>::new(),
            ),
        );
        assert!(matches!(
            Error::from_status(&foreign),
            Error::Unknown {
                code: Code::FailedPrecondition,
                ..
            }
        ));
        // A reason added later keeps its retryable code.
        let future = idemd_status(Code::Unavailable, "SHEDDING_LOAD", &[]);
        assert!(matches!(
            Error::from_status(&future),
            Error::Unavailable { .. }
        ));
        let future = idemd_status(Code::Aborted, "SOMETHING_NEW", &[]);
        assert!(matches!(
            Error::from_status(&future),
            Error::Unknown { reason, .. } if reason == "SOMETHING_NEW"
        ));
    }
}
