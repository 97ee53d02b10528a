//! What a caller gives [`Client::execute_once`] and gets back: the operation,
//! the effect's disposition, the execution's outcome, and the effect's context.
//!
//! [`Client::execute_once`]: crate::Client::execute_once

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::proto_duration;
use crate::proto::{self, OperationState};

/// What identifies the request, so that the same key with another request
/// is a conflict instead of a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// A JSON document (I-JSON); the server fingerprints its canonical form.
    Json(String),
    /// Opaque bytes, fingerprinted as given.
    Bytes(Vec<u8>),
    /// A 32-byte fingerprint computed by the caller (see the README).
    Fingerprint(Vec<u8>),
}

/// One logical operation: the same on every execution of the same intent.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The action, e.g. "orders.create".
    pub name: String,
    /// The idempotency key: made once per intent and persisted before the
    /// first execution.
    pub key: String,
    pub payload: Payload,
    /// The lease asked for; renewed a third into each grant while the
    /// attempt runs (its lookups and its effect).
    pub lease: Duration,
    /// The longest one attempt may run (the server's max_attempt_duration,
    /// fixed by the first Claim of the scope); `None`: the server's default.
    /// The effect is cancelled a margin before it (a tenth of the attempt,
    /// within [50 ms, 1 s]), so that its outcome can still be reported.
    pub attempt_duration: Option<Duration>,
    /// The attempt budget (fixed by the first Claim); `None`: the server's.
    pub max_attempts: Option<u32>,
    /// How long the result is replayed (fixed by the first Claim).
    pub retention: Option<Duration>,
    /// No new attempt after this long from the first Claim (fixed by it).
    pub operation_deadline: Option<Duration>,
    /// How long this call waits for its turn (docs/client-protocol.md,
    /// "Claiming"): while another attempt holds the operation, or a retry is
    /// not yet due, the call Claims again (asking the server to wait) until
    /// this long after it began, then returns [`crate::Error::DeadlinePassed`]
    /// (pending). It does not bound an owned attempt, which runs to its own
    /// deadline, nor a Claim's re-sends, which get at least a second (zero:
    /// "do not wait for another attempt").
    pub deadline: Duration,
    /// The pause between provider lookups while an earlier attempt may
    /// still be running (a takeover with a lookup).
    pub lookup_interval: Duration,
    /// The caller's declaration that the provider deduplicates by the key the
    /// effect passes it ([`EffectContext::operation_id`]), so that running the
    /// effect again after an earlier attempt that may have taken effect does
    /// no harm. It decides what [`Client::execute_once`](crate::Client::execute_once) (no lookup) does on a
    /// takeover whose earlier attempt is in doubt (ReconcileFirst): `true`
    /// runs the effect; `false` (the default) never runs it there, declines
    /// the attempt (Fail NOT_STARTED, which keeps the earlier attempt's doubt)
    /// and returns [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown). With a lookup
    /// ([`Client::execute_once_with_lookup`](crate::Client::execute_once_with_lookup)) the lookup decides and this is
    /// not consulted.
    pub provider_deduplicates: bool,
    /// While a deployment changes how the request is normalised (a field
    /// added with a default, a changed [`Selector`](crate::Selector)): the
    /// request's fingerprints under the earlier normalisations (at most 4;
    /// e.g. `old_selector.fingerprint(body, headers)?`). An operation a
    /// previous version claimed under one of them is this same request, not
    /// a conflict. Empty (the default) outside such a window.
    pub previous_fingerprints: Vec<[u8; 32]>,
}

impl Operation {
    pub fn new(name: impl Into<String>, key: impl Into<String>, payload: Payload) -> Self {
        Self {
            name: name.into(),
            key: key.into(),
            payload,
            lease: Duration::from_secs(30),
            attempt_duration: None,
            max_attempts: None,
            retention: None,
            operation_deadline: None,
            deadline: Duration::from_secs(60),
            lookup_interval: Duration::from_secs(1),
            provider_deduplicates: false,
            previous_fingerprints: Vec::new(),
        }
    }

    pub(super) fn claim_request(
        &self,
        claim_token: Vec<u8>,
        wait: Option<Duration>,
    ) -> proto::ClaimRequest {
        use proto::claim_request::RequestIdentity;
        let request_identity = match &self.payload {
            Payload::Json(document) => RequestIdentity::JsonPayload(document.clone()),
            Payload::Bytes(bytes) => RequestIdentity::BytesPayload(bytes.clone()),
            Payload::Fingerprint(fingerprint) => RequestIdentity::Fingerprint(fingerprint.clone()),
        };
        proto::ClaimRequest {
            scope: Some(proto::Scope {
                operation: self.name.clone(),
                key: self.key.clone(),
            }),
            request_identity: Some(request_identity),
            claim_token,
            lease: proto_duration(self.lease),
            max_attempt_duration: self.attempt_duration.and_then(proto_duration),
            max_attempts: self.max_attempts.unwrap_or(0),
            retention: self.retention.and_then(proto_duration),
            operation_deadline: self.operation_deadline.and_then(proto_duration),
            wait: wait.and_then(proto_duration),
            previous_fingerprints: self
                .previous_fingerprints
                .iter()
                .map(|fingerprint| fingerprint.to_vec())
                .collect(),
        }
    }
}

/// What the effect decided; the helper records it. A provider lookup
/// answers with one too (docs/client-protocol.md, "After a takeover"):
/// `Success` or `Terminal` is what it found, `None` that it found nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Disposition {
    /// It happened: Complete with this result.
    Success(proto::Result),
    /// It ended in a final error: Fail TERMINAL, stored and replayed.
    Terminal(proto::OperationError),
    /// It certainly did not happen: Fail RETRYABLE with this delay; the helper
    /// claims again at once (the server answers Pending until the retry is
    /// due), within the caller's deadline and the attempt budget.
    Retryable(proto::OperationError, Duration),
    /// It may have happened: Fail UNKNOWN; the next owner reconciles first.
    Unknown(proto::OperationError),
}

/// The operation's outcome, as stored.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Succeeded(proto::Result),
    Failed(proto::OperationError),
}

/// How this execution came by its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// This call ran the effect and recorded it.
    Executed,
    /// The stored outcome was replayed; nothing ran.
    Replayed,
    /// A takeover found the earlier attempt's effect at the provider (the
    /// lookup) and recorded it; the effect did not run again.
    Reconciled,
    /// A newer owner or a reconciler took the operation over (LEASE_LOST) and
    /// this is what it stored; the effect was not run again.
    Superseded,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    pub operation_id: String,
    pub outcome: Outcome,
    pub source: Source,
    /// The attempt that produced the outcome (for a replay: how many the
    /// operation took).
    pub attempt: u32,
}

/// How the deadline of an earlier, doubtful attempt was learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadlineSource {
    /// The server's `previous_attempt_deadline`.
    Server,
    /// Absent (a takeover recorded by an older server): assumed to be a
    /// whole attempt duration after this Claim's reply (the earlier attempt
    /// began before this one and had the same duration, so its deadline is
    /// no later).
    Assumed,
}

/// An earlier attempt whose outcome is in doubt (ReconcileFirst).
#[derive(Debug, Clone, PartialEq)]
pub struct PreviousAttempt {
    /// IN_PROGRESS (its lease expired) or UNKNOWN (its owner said so).
    pub state: OperationState,
    pub fence: u64,
    /// By this instant (local clock) the earlier attempt's effect is no longer
    /// in flight: it has settled. A lookup reads the provider at some moment
    /// between its start and its answer, so one that finds nothing proves
    /// something only if it was started at or after this instant.
    pub attempt_deadline: Instant,
    pub deadline_source: DeadlineSource,
}

/// What the effect is given.
#[derive(Debug, Clone)]
pub struct EffectContext {
    pub(super) operation_id: String,
    pub(super) fence: u64,
    pub(super) attempt: u32,
    pub(super) max_attempts: u32,
    pub(super) attempt_deadline: Instant,
    pub(super) previous: Option<PreviousAttempt>,
    pub(super) cancelled: watch::Receiver<bool>,
}

impl EffectContext {
    /// The server's id of this operation, the same on every attempt: pass it
    /// to the provider as ITS idempotency key (or client reference).
    pub fn operation_id(&self) -> &str {
        &self.operation_id
    }

    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// 1-based; counts every owner, takeovers included.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// When this attempt must be over (local clock); the effect is cancelled
    /// a margin before it (a tenth of the attempt, within [50 ms, 1 s]).
    pub fn attempt_deadline(&self) -> Instant {
        self.attempt_deadline
    }

    /// Set when an earlier attempt's outcome is unknown (ReconcileFirst): it
    /// may have taken effect. The lookup is asked with it set; the effect
    /// runs with it set only after a negative lookup that counts, or when
    /// the operation declared [`Operation::provider_deduplicates`] (then the
    /// effect must pass [`EffectContext::operation_id`] as the provider's
    /// idempotency key).
    pub fn previous_outcome_unknown(&self) -> Option<&PreviousAttempt> {
        self.previous.as_ref()
    }

    /// Whether the helper has given up on this attempt (the effect's future
    /// is dropped then; this is for work it spawned).
    pub fn is_cancelled(&self) -> bool {
        *self.cancelled.borrow()
    }

    /// Resolves once the helper has given up on this attempt.
    pub async fn cancelled(&self) {
        let mut cancelled = self.cancelled.clone();
        let _ = cancelled.wait_for(|cancelled| *cancelled).await;
    }
}
