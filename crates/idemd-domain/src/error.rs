//! Every error the API can answer with. Each variant except `Internal` is
//! something the caller can act on; `grpc::status` maps them, exhaustively.

use std::time::Duration;

use super::model::{Fence, OperationId, State};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    /// The request field, as named in the proto (`scope.key`).
    pub field: String,
    pub description: String,
}

impl FieldViolation {
    pub fn new(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            description: description.into(),
        }
    }
}

/// Collects every violation of one request, so the caller sees them all at once.
#[derive(Debug, Default)]
pub struct Violations(pub Vec<FieldViolation>);

impl Violations {
    pub fn add(&mut self, field: impl Into<String>, description: impl Into<String>) {
        self.0.push(FieldViolation::new(field, description));
    }

    pub fn into_result(self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(self.0))
        }
    }
}

/// Why a write that carried the current fence (or none) was still refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The operation already ended; terminal records never change.
    OperationTerminal,
    /// The same fence was re-sent with a different request.
    RequestMismatch,
    /// Reconcile while an owner still holds a live lease.
    LeaseStillLive,
    /// NOT_APPLIED before the last attempt's deadline: its effect may still be in flight.
    AttemptStillRunning,
    /// The owner's attempt deadline has passed; it must not write any more.
    AttemptDeadlinePassed,
    /// Any other write the state does not allow.
    StateForbids,
    /// Forget of an operation that has not ended: only an ended one's result
    /// may be dropped (an unresolved one's effect is still in question).
    OperationUnresolved,
    /// Forget of a tombstone: there is nothing left to forget.
    AlreadyForgotten,
}

impl Refusal {
    pub fn reason(self) -> ErrorReason {
        match self {
            Refusal::OperationTerminal => ErrorReason::OperationTerminal,
            Refusal::RequestMismatch => ErrorReason::RequestMismatch,
            Refusal::LeaseStillLive => ErrorReason::LeaseStillLive,
            Refusal::AttemptStillRunning => ErrorReason::AttemptStillRunning,
            Refusal::AttemptDeadlinePassed => ErrorReason::AttemptDeadlinePassed,
            Refusal::StateForbids => ErrorReason::StateForbids,
            Refusal::OperationUnresolved => ErrorReason::OperationUnresolved,
            Refusal::AlreadyForgotten => ErrorReason::AlreadyForgotten,
        }
    }
}

/// Every ErrorInfo reason idemd answers with, in one place: API, stable,
/// documented in the proto and README. Every status carries one (AIP-193), so
/// clients branch on the reason alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorReason {
    /// INVALID_ARGUMENT, with BadRequest field violations.
    InvalidRequest,
    /// UNAUTHENTICATED: no bearer token was sent.
    MissingCredentials,
    /// UNAUTHENTICATED: a token was sent but is unknown, revoked or malformed.
    InvalidCredentials,
    /// NOT_FOUND: no such scope or id, or another tenant's.
    OperationNotFound,
    /// UNAVAILABLE, with RetryInfo.
    StoreUnavailable,
    /// INTERNAL: a fault of the server, logged; not the caller's to fix.
    Internal,
    IdempotencyKeyReused,
    ResultExpired,
    LeaseLost,
    OperationTerminal,
    RequestMismatch,
    LeaseStillLive,
    AttemptStillRunning,
    AttemptDeadlinePassed,
    StateForbids,
    /// RESOURCE_EXHAUSTED: a request message larger than any legal request.
    RequestTooLarge,
    /// DEADLINE_EXCEEDED: the call took longer than the server's request
    /// timeout (a stalled request body, for one).
    RequestTimeout,
    /// UNAVAILABLE, with RetryInfo: this replica has as many calls in flight
    /// as it admits; another replica, or this one a moment later, serves it.
    Overloaded,
    /// RESOURCE_EXHAUSTED, with RetryInfo: the tenant has as many calls in
    /// flight on this replica as one tenant may.
    TenantConcurrencyLimit,
    /// PERMISSION_DENIED: the credential lacks the scope the RPC needs
    /// (metadata `scope`).
    MissingScope,
    /// UNAUTHENTICATED: the listener requires a client certificate and the
    /// connection brought none.
    CertificateRequired,
    /// UNAUTHENTICATED: a client certificate not signed by the configured
    /// client CAs (or otherwise not a valid chain for client use).
    CertificateUntrusted,
    /// UNAUTHENTICATED: a client certificate outside its validity period.
    CertificateExpired,
    /// UNAUTHENTICATED: a valid client certificate whose identities the
    /// mapping does not name, or that names no active tenant.
    CertificateUnmapped,
    /// NOT_FOUND: an admin named a tenant that no active tenant is called.
    TenantNotFound,
    /// FAILED_PRECONDITION: Forget of an operation that has not ended.
    OperationUnresolved,
    /// FAILED_PRECONDITION: Forget of a tombstone.
    AlreadyForgotten,
    /// INVALID_ARGUMENT: Diagnose evidence that carries a secret (metadata
    /// `field` and `kind`; never the value).
    EvidenceCarriesSecret,
    /// PERMISSION_DENIED: a Diagnose plan needs a scope the credential lacks.
    PlanExceedsScope,
    /// PERMISSION_DENIED: a Diagnose plan needs a move the caller's
    /// constraints (its authority) forbid.
    PlanExceedsAuthority,
    /// PERMISSION_DENIED: a Diagnose plan needs a move that cannot be
    /// undone, and the caller allows only reversible ones.
    PlanNotReversible,
    /// PERMISSION_DENIED: a Diagnose plan needs more attempts or a longer
    /// wait than the caller's budget.
    PlanExceedsBudget,
}

impl ErrorReason {
    /// Every reason, so that tests can hold the documentation to this list.
    pub const ALL: [ErrorReason; 32] = [
        ErrorReason::InvalidRequest,
        ErrorReason::MissingCredentials,
        ErrorReason::InvalidCredentials,
        ErrorReason::OperationNotFound,
        ErrorReason::StoreUnavailable,
        ErrorReason::Internal,
        ErrorReason::IdempotencyKeyReused,
        ErrorReason::ResultExpired,
        ErrorReason::LeaseLost,
        ErrorReason::OperationTerminal,
        ErrorReason::RequestMismatch,
        ErrorReason::LeaseStillLive,
        ErrorReason::AttemptStillRunning,
        ErrorReason::AttemptDeadlinePassed,
        ErrorReason::StateForbids,
        ErrorReason::RequestTooLarge,
        ErrorReason::RequestTimeout,
        ErrorReason::Overloaded,
        ErrorReason::TenantConcurrencyLimit,
        ErrorReason::MissingScope,
        ErrorReason::CertificateRequired,
        ErrorReason::CertificateUntrusted,
        ErrorReason::CertificateExpired,
        ErrorReason::CertificateUnmapped,
        ErrorReason::TenantNotFound,
        ErrorReason::OperationUnresolved,
        ErrorReason::AlreadyForgotten,
        ErrorReason::EvidenceCarriesSecret,
        ErrorReason::PlanExceedsScope,
        ErrorReason::PlanExceedsAuthority,
        ErrorReason::PlanNotReversible,
        ErrorReason::PlanExceedsBudget,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorReason::InvalidRequest => "INVALID_REQUEST",
            ErrorReason::MissingCredentials => "MISSING_CREDENTIALS",
            ErrorReason::InvalidCredentials => "INVALID_CREDENTIALS",
            ErrorReason::OperationNotFound => "OPERATION_NOT_FOUND",
            ErrorReason::StoreUnavailable => "STORE_UNAVAILABLE",
            ErrorReason::Internal => "INTERNAL",
            ErrorReason::IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
            ErrorReason::ResultExpired => "RESULT_EXPIRED",
            ErrorReason::LeaseLost => "LEASE_LOST",
            ErrorReason::OperationTerminal => "OPERATION_TERMINAL",
            ErrorReason::RequestMismatch => "REQUEST_MISMATCH",
            ErrorReason::LeaseStillLive => "LEASE_STILL_LIVE",
            ErrorReason::AttemptStillRunning => "ATTEMPT_STILL_RUNNING",
            ErrorReason::AttemptDeadlinePassed => "ATTEMPT_DEADLINE_PASSED",
            ErrorReason::StateForbids => "STATE_FORBIDS",
            ErrorReason::RequestTooLarge => "REQUEST_TOO_LARGE",
            ErrorReason::RequestTimeout => "REQUEST_TIMEOUT",
            ErrorReason::Overloaded => "OVERLOADED",
            ErrorReason::TenantConcurrencyLimit => "TENANT_CONCURRENCY_LIMIT",
            ErrorReason::MissingScope => "MISSING_SCOPE",
            ErrorReason::CertificateRequired => "CERTIFICATE_REQUIRED",
            ErrorReason::CertificateUntrusted => "CERTIFICATE_UNTRUSTED",
            ErrorReason::CertificateExpired => "CERTIFICATE_EXPIRED",
            ErrorReason::CertificateUnmapped => "CERTIFICATE_UNMAPPED",
            ErrorReason::TenantNotFound => "TENANT_NOT_FOUND",
            ErrorReason::OperationUnresolved => "OPERATION_UNRESOLVED",
            ErrorReason::AlreadyForgotten => "ALREADY_FORGOTTEN",
            ErrorReason::EvidenceCarriesSecret => "EVIDENCE_CARRIES_SECRET",
            ErrorReason::PlanExceedsScope => "PLAN_EXCEEDS_SCOPE",
            ErrorReason::PlanExceedsAuthority => "PLAN_EXCEEDS_AUTHORITY",
            ErrorReason::PlanNotReversible => "PLAN_NOT_REVERSIBLE",
            ErrorReason::PlanExceedsBudget => "PLAN_EXCEEDS_BUDGET",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("invalid argument: {}", .0.iter().map(|v| format!("{}: {}", v.field, v.description)).collect::<Vec<_>>().join("; "))]
    InvalidArgument(Vec<FieldViolation>),
    /// A bearer token was sent, but it is unknown, revoked or malformed.
    #[error("invalid credentials")]
    Unauthenticated,
    /// No `authorization: Bearer <token>` metadata at all.
    #[error("missing credentials: send authorization: Bearer <token>")]
    MissingCredentials,
    /// Unknown scope or id, or another tenant's: indistinguishable on purpose.
    #[error("operation not found")]
    NotFound,
    /// An admin named a tenant that no active tenant is called. Only an
    /// admin may name one, so telling it apart from NotFound leaks nothing.
    #[error("no active tenant has that name")]
    TenantNotFound,
    #[error("idempotency key reused with a different request")]
    KeyReused { operation_id: OperationId },
    #[error("the result of this operation has expired")]
    ResultExpired { operation_id: OperationId },
    #[error("lease lost: the fence is stale")]
    LeaseLost {
        operation_id: OperationId,
        current_fence: Fence,
        state: State,
    },
    #[error("refused in state {state:?}: {}", refusal.reason().as_str())]
    Refused {
        refusal: Refusal,
        operation_id: OperationId,
        state: State,
    },
    #[error("temporarily unavailable: {reason}")]
    Unavailable {
        reason: String,
        retry_after: Duration,
    },
    /// A request message longer than the decode limit; refused from its
    /// length prefix, before its body is buffered.
    #[error("request too large: the limit is {limit} bytes")]
    RequestTooLarge { limit: usize },
    /// The call outlived the server's request timeout.
    #[error("request timed out after {timeout:?}")]
    RequestTimeout { timeout: Duration },
    /// The replica admits no more calls now: shed, not queued.
    #[error("overloaded: too many calls in flight on this server")]
    Overloaded { retry_after: Duration },
    /// The tenant has its whole share of calls in flight.
    #[error("too many calls in flight for this tenant (at most {limit})")]
    TenantConcurrencyLimit { limit: usize, retry_after: Duration },
    /// The credential is valid but lacks the scope the call needs.
    #[error("permission denied: the credential lacks the scope `{scope}`")]
    MissingScope { scope: &'static str },
    /// The connection's client certificate does not authenticate the call.
    #[error("client certificate refused: {}", .0.explanation())]
    CertificateRefused(CertificateRefusal),
    /// Diagnose evidence carries a secret: refused before anything is read,
    /// and never stored or logged. Names the field and the kind only.
    #[error("the field {field} carries {}: remove it; evidence must never hold secrets", .kind.as_str())]
    EvidenceCarriesSecret {
        field: &'static str,
        kind: crate::diagnose::SecretKind,
    },
    /// A Diagnose plan goes beyond the caller's scopes or constraints: the
    /// caller stops and hands over.
    #[error("the plan for this diagnosis ({cause:?}) goes beyond what the caller may do: {}", .stop.explain())]
    PlanStopped {
        stop: crate::diagnose::Stop,
        cause: crate::diagnose::Cause,
        operation_id: Option<OperationId>,
    },
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why a client certificate authenticates no call: decided once per
/// connection, after its TLS handshake, and answered on each of its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertificateRefusal {
    Required,
    Untrusted,
    Expired,
    Unmapped,
}

impl CertificateRefusal {
    pub fn reason(self) -> ErrorReason {
        match self {
            CertificateRefusal::Required => ErrorReason::CertificateRequired,
            CertificateRefusal::Untrusted => ErrorReason::CertificateUntrusted,
            CertificateRefusal::Expired => ErrorReason::CertificateExpired,
            CertificateRefusal::Unmapped => ErrorReason::CertificateUnmapped,
        }
    }

    fn explanation(self) -> &'static str {
        match self {
            CertificateRefusal::Required => "this server requires one, and none was sent",
            CertificateRefusal::Untrusted => "not issued by a trusted client CA",
            CertificateRefusal::Expired => "outside its validity period",
            CertificateRefusal::Unmapped => "its identity maps to no tenant",
        }
    }
}

impl Error {
    pub fn invalid(field: impl Into<String>, description: impl Into<String>) -> Self {
        Error::InvalidArgument(vec![FieldViolation::new(field, description)])
    }

    /// The ErrorInfo reason this error answers with.
    pub fn reason(&self) -> ErrorReason {
        match self {
            Error::InvalidArgument(_) => ErrorReason::InvalidRequest,
            Error::Unauthenticated => ErrorReason::InvalidCredentials,
            Error::MissingCredentials => ErrorReason::MissingCredentials,
            Error::NotFound => ErrorReason::OperationNotFound,
            Error::TenantNotFound => ErrorReason::TenantNotFound,
            Error::KeyReused { .. } => ErrorReason::IdempotencyKeyReused,
            Error::ResultExpired { .. } => ErrorReason::ResultExpired,
            Error::LeaseLost { .. } => ErrorReason::LeaseLost,
            Error::Refused { refusal, .. } => refusal.reason(),
            Error::Unavailable { .. } => ErrorReason::StoreUnavailable,
            Error::RequestTooLarge { .. } => ErrorReason::RequestTooLarge,
            Error::RequestTimeout { .. } => ErrorReason::RequestTimeout,
            Error::Overloaded { .. } => ErrorReason::Overloaded,
            Error::TenantConcurrencyLimit { .. } => ErrorReason::TenantConcurrencyLimit,
            Error::MissingScope { .. } => ErrorReason::MissingScope,
            Error::CertificateRefused(refusal) => refusal.reason(),
            Error::EvidenceCarriesSecret { .. } => ErrorReason::EvidenceCarriesSecret,
            Error::PlanStopped { stop, .. } => stop.reason(),
            Error::Internal(_) => ErrorReason::Internal,
        }
    }

    /// An internal error caused by `source`, with the source's whole chain
    /// of causes in its message: `Error` is `Clone` and `Eq` (a batch answers
    /// each member with the same error), so it cannot hold the source itself.
    /// The answer stays generic; the log line (grpc/status.rs) carries it all.
    pub fn internal_from(context: &str, source: &(dyn std::error::Error + 'static)) -> Self {
        let mut message = format!("{context}: {source}");
        let mut cause = source.source();
        while let Some(next) = cause {
            message.push_str(": ");
            message.push_str(&next.to_string());
            cause = next.source();
        }
        Error::Internal(message)
    }

    pub fn unavailable(reason: impl Into<String>) -> Self {
        Error::Unavailable {
            reason: reason.into(),
            retry_after: Duration::from_millis(200),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner")]
    struct Inner;

    #[test]
    fn an_internal_error_keeps_its_sources_chain() {
        let error = Error::internal_from("an answer did not decode", &Outer(Inner));
        assert_eq!(
            error,
            Error::Internal("an answer did not decode: outer: inner".to_owned())
        );
        assert_eq!(error.reason(), ErrorReason::Internal);
    }

    #[test]
    fn reasons_are_distinct_upper_snake_names() {
        let mut names: Vec<&str> = ErrorReason::ALL
            .iter()
            .map(|reason| reason.as_str())
            .collect();
        assert!(names.iter().all(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|character| character.is_ascii_uppercase() || character == '_')
        }));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorReason::ALL.len());
    }
}
