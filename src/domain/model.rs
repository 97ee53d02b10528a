//! The operation record and the values it is made of.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

/// Server-side id of a tenant. Drawn from an ever-growing sequence and never
/// reused, so a revoked tenant's records can never surface under a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(pub i64);

/// Server-generated id of one incarnation of a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperationId(pub Uuid);

impl OperationId {
    /// Time-ordered (UUIDv7), which keeps index inserts local.
    pub fn generate() -> Self {
        Self(Uuid::now_v7())
    }
}

impl std::fmt::Display for OperationId {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(formatter)
    }
}

/// The caller's name of a logical operation within its tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    pub operation: String,
    pub key: String,
}

/// SHA-256 of the canonical request; see [`crate::domain::fingerprint`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "Fingerprint({})", hex(&self.0))
    }
}

/// A fence: drawn from one ever-growing sequence for each new owner.
pub type Fence = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    InProgress,
    Succeeded,
    Failed,
    RetryWait,
    Unknown,
    /// Tombstone: a terminal record whose result passed retention.
    Expired,
}

impl State {
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Succeeded | State::Failed | State::Expired)
    }

    /// The stable lowercase name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            State::InProgress => "in_progress",
            State::Succeeded => "succeeded",
            State::Failed => "failed",
            State::RetryWait => "retry_wait",
            State::Unknown => "unknown",
            State::Expired => "expired",
        }
    }

    pub fn parse(stored: &str) -> Option<Self> {
        Some(match stored {
            "in_progress" => State::InProgress,
            "succeeded" => State::Succeeded,
            "failed" => State::Failed,
            "retry_wait" => State::RetryWait,
            "unknown" => State::Unknown,
            "expired" => State::Expired,
            _ => return None,
        })
    }
}

pub type Metadata = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SuccessResult {
    pub body: Vec<u8>,
    pub content_type: String,
    pub metadata: Metadata,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureReason {
    Terminal,
    AttemptsExhausted,
    DeadlineExceeded,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Terminal => "terminal",
            FailureReason::AttemptsExhausted => "attempts_exhausted",
            FailureReason::DeadlineExceeded => "deadline_exceeded",
        }
    }

    pub fn parse(stored: &str) -> Option<Self> {
        Some(match stored {
            "terminal" => FailureReason::Terminal,
            "attempts_exhausted" => FailureReason::AttemptsExhausted,
            "deadline_exceeded" => FailureReason::DeadlineExceeded,
            _ => return None,
        })
    }
}

/// An error as the caller reported it; the reason is the server's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ErrorReport {
    pub code: String,
    pub message: String,
    pub metadata: Metadata,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Succeeded(SuccessResult),
    Failed {
        reason: FailureReason,
        error: ErrorReport,
    },
}

/// Proof of the last owner or reconciler write, so that a re-sent write is
/// answered like the original instead of being applied twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteReceipt {
    pub fence: Fence,
    pub digest: RequestDigest,
    pub writer: Writer,
    /// What the write answered; `None` for receipts stored before answers
    /// were kept (they are answered from the record, as they were then).
    pub answer: Option<WriteAnswer>,
}

/// The answer a write got, kept with its receipt: a re-sent write gets this
/// same answer however the record moved on since (a new attempt, a sweep).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteAnswer {
    pub state: State,
    pub failure: Option<FailureReason>,
    pub retry_at: Option<DateTime<Utc>>,
    /// The fence the operation carried after the write (a reconciler's new
    /// one). [`DRAWN_FENCE`] until the store stamps the fence it drew.
    pub fence: Fence,
}

/// Stands for the fence a write draws, until the store stamps it (fences
/// start at 1).
pub const DRAWN_FENCE: Fence = 0;

impl WriteAnswer {
    /// The answer of a write that left `record` as it is.
    pub fn of(record: &OperationRecord) -> Self {
        Self {
            state: record.state,
            failure: match &record.outcome {
                Some(Outcome::Failed { reason, .. }) => Some(*reason),
                _ => None,
            },
            retry_at: record.retry_at,
            fence: record.fence,
        }
    }
}

/// Who made the write a receipt stands for. A reconciler's write takes a new
/// fence, so only this tells its re-sent (or changed) request from an owner's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Writer {
    Owner,
    Reconciler,
}

impl Writer {
    pub fn as_str(self) -> &'static str {
        match self {
            Writer::Owner => "owner",
            Writer::Reconciler => "reconciler",
        }
    }

    pub fn parse(stored: &str) -> Option<Self> {
        Some(match stored {
            "owner" => Writer::Owner,
            "reconciler" => Writer::Reconciler,
            _ => return None,
        })
    }
}

/// SHA-256 over a canonical encoding of a write request; see [`RequestDigest::of`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestDigest(pub [u8; 32]);

impl std::fmt::Debug for RequestDigest {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "RequestDigest({})", hex(&self.0))
    }
}

/// The attempt a takeover replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreviousAttempt {
    /// IN_PROGRESS (its lease expired) or UNKNOWN (reported or marked).
    pub state: State,
    pub fence: Fence,
    /// The replaced attempt's deadline: until it passes, that attempt's effect
    /// may still be in flight, so a provider lookup that finds nothing proves
    /// nothing. `None` only for a takeover recorded by a binary that did not
    /// keep it (before schema version 6): not known.
    pub attempt_deadline_at: Option<DateTime<Utc>>,
}

impl PreviousAttempt {
    /// Time left until the replaced attempt's deadline at `now`; zero once it
    /// has passed, `None` when it is not known.
    pub fn attempt_deadline_left(&self, now: DateTime<Utc>) -> Option<TimeDelta> {
        self.attempt_deadline_at
            .map(|deadline| time_left(Some(deadline), now))
    }
}

/// Everything stored about one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationRecord {
    pub operation_id: OperationId,
    pub tenant_id: TenantId,
    pub scope: Scope,
    pub fingerprint: Fingerprint,
    pub state: State,
    pub fence: Fence,
    pub attempt: u32,
    pub max_attempts: u32,
    /// Token of the Claim that made the current owner; empty when none.
    pub claim_token: Vec<u8>,
    /// Set when the current owner took over an attempt of unknown outcome, so
    /// that a re-sent Claim is told ReconcileFirst again, never Acquired.
    pub taken_over_from: Option<PreviousAttempt>,
    /// How long a lease lasts when a Claim does not say.
    pub lease_duration: TimeDelta,
    pub max_attempt_duration: TimeDelta,
    pub retention: TimeDelta,
    /// Meaningful while IN_PROGRESS.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// The deadline of the current or last attempt; kept after the attempt
    /// ends, since NOT_APPLIED is allowed only once it has passed.
    pub attempt_deadline_at: Option<DateTime<Utc>>,
    /// Meaningful while RETRY_WAIT.
    pub retry_at: Option<DateTime<Utc>>,
    pub operation_deadline_at: Option<DateTime<Utc>>,
    /// Set for SUCCEEDED and FAILED; cleared by the tombstone.
    pub outcome: Option<Outcome>,
    /// Kept on tombstones, so a replay can still tell which outcome it had.
    pub outcome_kind: Option<State>,
    pub last_write: Option<WriteReceipt>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    pub retain_until: Option<DateTime<Utc>>,
}

/// Time left until `moment`, never negative; zero when there is no moment.
pub fn time_left(moment: Option<DateTime<Utc>>, now: DateTime<Utc>) -> TimeDelta {
    moment.map_or(TimeDelta::zero(), |moment| {
        (moment - now).max(TimeDelta::zero())
    })
}

impl OperationRecord {
    /// An IN_PROGRESS record whose lease has run out counts as unknown.
    pub fn lease_expired(&self, now: DateTime<Utc>) -> bool {
        self.state == State::InProgress && self.lease_expires_at.is_none_or(|expiry| expiry <= now)
    }

    pub fn unresolved(&self, now: DateTime<Utc>) -> bool {
        self.state == State::Unknown || self.lease_expired(now)
    }

    pub fn attempt_deadline_passed(&self, now: DateTime<Utc>) -> bool {
        self.attempt_deadline_at
            .is_none_or(|deadline| deadline <= now)
    }
}

/// What a transition appends to the operation's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HistoryEvent {
    Claimed,
    TakenOver,
    RetryStarted,
    MarkedUnknown,
    Renewed,
    Completed,
    Failed,
    RetryScheduled,
    OutcomeUnknown,
    Reconciled,
    DeadlineExceeded,
    StaleWriteRefused,
    LateWriteRefused,
    Expired,
}

impl HistoryEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryEvent::Claimed => "CLAIMED",
            HistoryEvent::TakenOver => "TAKEN_OVER",
            HistoryEvent::RetryStarted => "RETRY_STARTED",
            HistoryEvent::MarkedUnknown => "MARKED_UNKNOWN",
            HistoryEvent::Renewed => "RENEWED",
            HistoryEvent::Completed => "COMPLETED",
            HistoryEvent::Failed => "FAILED",
            HistoryEvent::RetryScheduled => "RETRY_SCHEDULED",
            HistoryEvent::OutcomeUnknown => "OUTCOME_UNKNOWN",
            HistoryEvent::Reconciled => "RECONCILED",
            HistoryEvent::DeadlineExceeded => "DEADLINE_EXCEEDED",
            HistoryEvent::StaleWriteRefused => "STALE_WRITE_REFUSED",
            HistoryEvent::LateWriteRefused => "LATE_WRITE_REFUSED",
            HistoryEvent::Expired => "EXPIRED",
        }
    }
}

/// A history entry about to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewHistoryEntry {
    pub event: HistoryEvent,
    pub from_state: Option<State>,
    pub to_state: State,
    pub fence: Fence,
    pub attempt: u32,
    /// No payloads: an RPC name, a failure code, a reason.
    pub detail: String,
}

impl NewHistoryEntry {
    /// The one rule for coalescing history: an entry whose key equals the key
    /// of the operation's last entry is counted into that entry (`count`,
    /// `last_at`) instead of appended. Refusals repeat (a stalled client
    /// retrying the same write), so the same refusal of the same fence by the
    /// same RPC coalesces; every transition gets an entry of its own (`None`).
    /// The stores only compare keys: the rule lives here.
    pub fn coalesce_key(&self) -> Option<String> {
        match self.event {
            HistoryEvent::StaleWriteRefused | HistoryEvent::LateWriteRefused => Some(format!(
                "{}/{}/{}/{}",
                self.event.as_str(),
                self.fence,
                self.detail,
                self.to_state.as_str()
            )),
            _ => None,
        }
    }
}

/// A history entry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub sequence: u64,
    pub event: String,
    pub from_state: Option<State>,
    pub to_state: State,
    pub fence: Fence,
    pub attempt: u32,
    pub detail: String,
    pub count: u32,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
            let _ = write!(out, "{byte:02x}");
            out
        })
}
