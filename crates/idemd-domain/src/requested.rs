//! What a caller asked for, as plain values: read from the wire, but with no
//! default, bound or cross-field rule applied yet. [`Limits`](super::Limits)
//! applies those and builds the commands. Fields keep the proto's names, so
//! that a violation names the field the caller sent.

use chrono::{DateTime, TimeDelta, Utc};

use super::command::{FailDisposition, Resolution};
use super::model::{ErrorReport, Fence, OperationId, Scope, SuccessResult};

/// How a Claim identifies its request, to be fingerprinted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestIdentity {
    /// Computed by the caller.
    Fingerprint(Vec<u8>),
    /// Canonicalized (RFC 8785) and hashed here.
    JsonPayload(String),
    /// Hashed here as given.
    BytesPayload(Vec<u8>),
}

/// A duration left out (None) takes its default, as does `max_attempts` left
/// at zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequested {
    pub scope: Option<Scope>,
    pub identity: Option<RequestIdentity>,
    pub claim_token: Vec<u8>,
    pub lease: Option<TimeDelta>,
    pub max_attempt_duration: Option<TimeDelta>,
    pub max_attempts: u32,
    pub retention: Option<TimeDelta>,
    pub operation_deadline: Option<TimeDelta>,
    pub wait: Option<TimeDelta>,
    /// The request's fingerprints under earlier normalisations (a rolling
    /// deployment's migration window), as sent: checked by `Limits::claim`.
    pub previous_fingerprints: Vec<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewRequested {
    pub operation_id: OperationId,
    pub fence: Fence,
    pub lease: Option<TimeDelta>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompleteRequested {
    pub operation_id: OperationId,
    pub fence: Fence,
    pub result: Option<SuccessResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailRequested {
    pub operation_id: OperationId,
    pub fence: Fence,
    /// None: the caller named no disposition this server knows.
    pub disposition: Option<FailDisposition>,
    pub error: Option<ErrorReport>,
    pub retry_after: Option<TimeDelta>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileRequested {
    pub operation_id: OperationId,
    pub expected_fence: Fence,
    pub resolution: Option<Resolution>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgetRequested {
    pub operation_id: OperationId,
    pub expected_fence: Fence,
    pub reason: String,
}

/// A Hold or a Release as the transport read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldRequested {
    /// Empty: the whole tenant.
    pub operation: String,
    pub reason: String,
    /// Hold only; `None`: the default.
    pub retry_after: Option<TimeDelta>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnresolvedRequested {
    /// None: every operation name.
    pub operation: Option<String>,
    /// Zero: the default page size.
    pub page_size: u32,
    /// Strictly after this (created_at, operation_id), as a page token said.
    pub after: Option<(DateTime<Utc>, OperationId)>,
}
