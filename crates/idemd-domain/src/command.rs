//! Validated requests, as the pure transitions and the stores take them.

use chrono::TimeDelta;
use sha2::{Digest, Sha256};

use super::model::{
    ErrorReport, Fence, Fingerprint, Metadata, OnFailed, OperationId, RequestDigest, Scope,
    SuccessResult,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimCommand {
    pub scope: Scope,
    pub fingerprint: Fingerprint,
    pub claim_token: Vec<u8>,
    pub lease: TimeDelta,
    pub max_attempt_duration: TimeDelta,
    pub max_attempts: u32,
    pub retention: TimeDelta,
    pub operation_deadline: Option<TimeDelta>,
    /// What a Claim of the operation gets once it is FAILED: its policy's
    /// `on_failed`, stored by the first Claim.
    pub on_failed: OnFailed,
    /// Added to every deadline that decides whether an earlier attempt may
    /// still be in flight (server policy, not the caller's).
    pub clock_margin: TimeDelta,
    /// The request's fingerprints under earlier normalisations: a stored
    /// fingerprint equal to one of them is this same request, not a
    /// conflict. Empty outside a migration window.
    pub previous_fingerprints: Vec<Fingerprint>,
    /// An administrator holds the operation name (or the tenant): no Claim
    /// is made an owner, new operation or new attempt alike; it is told
    /// Pending (`Held`) with this retry_after instead. Replays, the owner's
    /// re-sent Claim and everything but a new owner go on. `None` when no
    /// hold is in force (the service decides, from its holds).
    pub held: Option<TimeDelta>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewCommand {
    pub operation_id: OperationId,
    pub fence: Fence,
    /// None: the lease length the owner was granted.
    pub lease: Option<TimeDelta>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompleteCommand {
    pub operation_id: OperationId,
    pub fence: Fence,
    pub result: SuccessResult,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailDisposition {
    Terminal,
    Retryable,
    Unknown,
    /// The attempt declined before starting the effect: the operation is
    /// handed on as it was before the attempt (released, or still in the
    /// doubt the attempt took over, with that doubt's deadline).
    NotStarted,
}

impl FailDisposition {
    /// The name in digests, metric labels and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            FailDisposition::Terminal => "terminal",
            FailDisposition::Retryable => "retryable",
            FailDisposition::Unknown => "unknown",
            FailDisposition::NotStarted => "not_started",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailCommand {
    pub operation_id: OperationId,
    pub fence: Fence,
    pub disposition: FailDisposition,
    pub error: ErrorReport,
    pub retry_after: TimeDelta,
    /// As [`ClaimCommand::clock_margin`]; not part of the request's digest.
    pub clock_margin: TimeDelta,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Succeeded(SuccessResult),
    Failed(ErrorReport),
    NotApplied,
}

/// A hold to set or release ([`crate::Limits::hold`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldCommand {
    /// `None`: every operation of the tenant.
    pub operation: Option<String>,
    /// Why, as the audit log keeps it (bounded, no control characters).
    pub reason: String,
    /// What a held Claim is told to wait (unused by a release).
    pub retry_after: TimeDelta,
}

/// An admin's Forget: turn an ended operation into a tombstone now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgetCommand {
    pub operation_id: OperationId,
    pub expected_fence: Fence,
    /// Why, as the history and the audit log keep it (bounded, no control
    /// characters).
    pub reason: String,
    /// How long the tombstone is kept ([`crate::Limits::tombstone_retention`]).
    pub tombstone_retention: TimeDelta,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileCommand {
    pub operation_id: OperationId,
    pub expected_fence: Fence,
    pub resolution: Resolution,
    /// As [`ClaimCommand::clock_margin`]; not part of the request's digest.
    pub clock_margin: TimeDelta,
}

impl CompleteCommand {
    pub fn digest(&self) -> RequestDigest {
        DigestBuilder::new("complete").result(&self.result).finish()
    }
}

impl FailCommand {
    pub fn digest(&self) -> RequestDigest {
        DigestBuilder::new("fail")
            .field(self.disposition.as_str().as_bytes())
            .error(&self.error)
            .field(&self.retry_after.num_milliseconds().to_be_bytes())
            .finish()
    }
}

impl ReconcileCommand {
    pub fn digest(&self) -> RequestDigest {
        let builder = DigestBuilder::new("reconcile");
        match &self.resolution {
            Resolution::Succeeded(result) => builder.field(b"succeeded").result(result),
            Resolution::Failed(error) => builder.field(b"failed").error(error),
            Resolution::NotApplied => builder.field(b"not_applied"),
        }
        .finish()
    }
}

/// Length-prefixed fields, so that no two different requests share an encoding.
/// The fence is not part of the digest: it is compared on its own.
struct DigestBuilder(Sha256);

impl DigestBuilder {
    fn new(rpc: &str) -> Self {
        Self(Sha256::new()).field(rpc.as_bytes())
    }

    fn field(mut self, bytes: &[u8]) -> Self {
        self.0.update((bytes.len() as u64).to_be_bytes());
        self.0.update(bytes);
        self
    }

    fn metadata(self, metadata: &Metadata) -> Self {
        // BTreeMap iterates in key order: the encoding is canonical.
        let builder = self.field(&(metadata.len() as u64).to_be_bytes());
        metadata.iter().fold(builder, |builder, (name, value)| {
            builder.field(name.as_bytes()).field(value.as_bytes())
        })
    }

    fn result(self, result: &SuccessResult) -> Self {
        self.field(&result.body)
            .field(result.content_type.as_bytes())
            .metadata(&result.metadata)
    }

    fn error(self, error: &ErrorReport) -> Self {
        self.field(error.code.as_bytes())
            .field(error.message.as_bytes())
            .metadata(&error.metadata)
    }

    fn finish(self) -> RequestDigest {
        RequestDigest(self.0.finalize().into())
    }
}
