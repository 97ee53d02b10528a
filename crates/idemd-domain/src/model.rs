//! The operation record and the values it is made of.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

/// Server-side id of a tenant. Drawn from an ever-growing sequence and never
/// reused, so a revoked tenant's records can never surface under a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(pub i64);

/// Server-generated id of one incarnation of a scope. The domain is handed
/// ids, as it is handed the clock; `OperationId::generate` draws them in the
/// service (`crate::service`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperationId(pub Uuid);

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

/// SHA-256 of the canonical request; see [`crate::fingerprint`].
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
    pub const ALL: [State; 6] = [
        State::InProgress,
        State::Succeeded,
        State::Failed,
        State::RetryWait,
        State::Unknown,
        State::Expired,
    ];

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

    /// `as_str` read backwards, so that each name is written once.
    pub fn parse(stored: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == stored)
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

/// What a Claim of a FAILED operation gets, as the operation's policy said
/// when its first Claim was admitted (stored with the record:
/// `failed_gets_new_attempt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OnFailed {
    /// The stored failure, replayed (every operation unless its policy opts
    /// in).
    #[default]
    Replay,
    /// A new attempt: the caller's Claim after a FAILED answer is its own
    /// decision to try again (see `decide_claim`).
    NewAttempt,
}

impl OnFailed {
    /// The name in the policy file, GetPolicy and `policy check`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailed::Replay => "replay",
            OnFailed::NewAttempt => "new_attempt",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "replay" => Some(OnFailed::Replay),
            "new_attempt" => Some(OnFailed::NewAttempt),
            _ => None,
        }
    }

    /// As the `failed_gets_new_attempt` column holds it.
    pub fn from_stored(failed_gets_new_attempt: bool) -> Self {
        if failed_gets_new_attempt {
            OnFailed::NewAttempt
        } else {
            OnFailed::Replay
        }
    }

    pub fn gets_new_attempt(self) -> bool {
        self == OnFailed::NewAttempt
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

impl Outcome {
    /// The bytes stored for it: the result (body, content type, metadata)
    /// or the error (code, message, metadata). What a Forget drops, and
    /// what a cached entry weighs.
    pub fn stored_bytes(&self) -> usize {
        let metadata = |metadata: &Metadata| {
            metadata
                .iter()
                .map(|(name, value)| name.len() + value.len())
                .sum::<usize>()
        };
        match self {
            Outcome::Succeeded(result) => {
                result.body.len() + result.content_type.len() + metadata(&result.metadata)
            }
            Outcome::Failed { error, .. } => {
                error.code.len() + error.message.len() + metadata(&error.metadata)
            }
        }
    }
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

    /// When the replaced attempt's effect can no longer be in flight, by the
    /// database clock: its deadline plus `clock_margin`, which covers a step
    /// of the database clock (its owner counts on a monotonic clock of its
    /// own). `None` when the deadline is not known.
    pub fn settles_at(&self, clock_margin: TimeDelta) -> Option<DateTime<Utc>> {
        self.attempt_deadline_at
            .map(|deadline| deadline + clock_margin)
    }

    /// Whether the replaced attempt's effect may still be in flight at `now`.
    /// An unknown deadline never settles: the doubt is kept.
    pub fn may_still_run(&self, now: DateTime<Utc>, clock_margin: TimeDelta) -> bool {
        self.settles_at(clock_margin)
            .is_none_or(|settles_at| settles_at > now)
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
    /// The fence whose owner last renewed its lease. While it is the
    /// current fence ([`OperationRecord::owner_renewed`]), the owner's
    /// claim_token is spent. A new owner has a new fence, so nothing needs
    /// to clear it (nor does a binary that predates it).
    pub renewed_under_fence: Option<Fence>,
    /// Set when the current owner took over an attempt of unknown outcome, so
    /// that a re-sent Claim is told ReconcileFirst again, never Acquired.
    pub taken_over_from: Option<PreviousAttempt>,
    /// How long a lease lasts when a Claim does not say.
    pub lease_duration: TimeDelta,
    pub max_attempt_duration: TimeDelta,
    pub retention: TimeDelta,
    /// What a Claim gets once the operation is FAILED: the replay, or a new
    /// attempt. Set by the first Claim (from its policy), never changed.
    pub on_failed: OnFailed,
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
    /// Claims refused because their request differed from this one's
    /// (IDEMPOTENCY_KEY_REUSED): evidence, not a transition. Written only by
    /// [`Effects::conflict`](crate::Effects), never by a transition's
    /// update, so neither overwrites the other.
    pub conflicts: u64,
    /// The database time of the last of them.
    pub last_conflict_at: Option<DateTime<Utc>>,
    /// Replays and Pending answers counted by the replicas and added in
    /// batches (`service::tallies`): evidence, not a transition, and never
    /// written by a transition's update.
    pub answers: AnswerCounts,
}

/// How many Claims of an operation were answered with its stored outcome
/// (Completed, a replay) or with Pending, as flushed so far. Each replica
/// counts in memory and adds its counts every flush interval, so these lag
/// by up to that interval, and a replica that crashes loses at most one
/// interval's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnswerCounts {
    pub replays: u64,
    pub pendings: u64,
    /// The database time of the last counted replay (as its replica saw it,
    /// placed on the database clock at the flush).
    pub last_replay_at: Option<DateTime<Utc>>,
}

/// Time left until `moment`, never negative; zero when there is no moment.
pub fn time_left(moment: Option<DateTime<Utc>>, now: DateTime<Utc>) -> TimeDelta {
    moment.map_or(TimeDelta::zero(), |moment| {
        (moment - now).max(TimeDelta::zero())
    })
}

impl OperationRecord {
    /// Whether the current owner has renewed its lease. The owner got its
    /// Claim's answer before it wrote, so from then on a Claim repeating
    /// its claim_token is another sender's (a token derived from a message
    /// id, a duplicate delivery): answered Pending, never Acquired with the
    /// owner's fence.
    pub fn owner_renewed(&self) -> bool {
        self.renewed_under_fence == Some(self.fence)
    }

    /// An IN_PROGRESS record whose lease has run out counts as unknown.
    pub fn lease_expired(&self, now: DateTime<Utc>) -> bool {
        self.state == State::InProgress && self.lease_expires_at.is_none_or(|expiry| expiry <= now)
    }

    pub fn unresolved(&self, now: DateTime<Utc>) -> bool {
        self.state == State::Unknown || self.lease_expired(now)
    }

    /// The record after a refused conflicting Claim is counted at `now`
    /// ([`crate::Effects::conflict`]): one more conflict, the last
    /// at `now`, and nothing else changed (not the state, fence, lease or
    /// `updated_at`). The stores' `COUNT_CONFLICT` statement (`store/sql.rs`)
    /// mirrors it; `store::mirror_tests::conflict` holds them together.
    #[must_use]
    pub fn with_conflict_counted(&self, now: DateTime<Utc>) -> Self {
        Self {
            conflicts: self.conflicts.saturating_add(1),
            last_conflict_at: Some(now),
            ..self.clone()
        }
    }

    pub fn attempt_deadline_passed(&self, now: DateTime<Utc>) -> bool {
        self.attempt_deadline_at
            .is_none_or(|deadline| deadline <= now)
    }

    /// The attempt this record doubts, whose effect may still be in flight at
    /// `now` (its deadline plus `clock_margin` not yet passed): an expired
    /// IN_PROGRESS or UNKNOWN record's own attempt, or, for RETRY_WAIT (whose
    /// own attempt certainly had no effect), the attempt it took over, if
    /// that one may still run. `None`: no effect of this operation can still
    /// land, so "not found at the provider" is evidence.
    pub fn doubt_at(&self, now: DateTime<Utc>, clock_margin: TimeDelta) -> Option<PreviousAttempt> {
        let doubted = match self.state {
            State::InProgress | State::Unknown => PreviousAttempt {
                state: self.state,
                fence: self.fence,
                attempt_deadline_at: self.attempt_deadline_at,
            },
            State::RetryWait => self.taken_over_from?,
            State::Succeeded | State::Failed | State::Expired => return None,
        };
        // An attempt with no deadline has ended (a RETRY_WAIT's own attempt,
        // or a marker written by a Claim); a taken-over one is kept in doubt.
        let settled = match self.state {
            State::RetryWait => !doubted.may_still_run(now, clock_margin),
            _ => doubted
                .settles_at(clock_margin)
                .is_none_or(|settles_at| settles_at <= now),
        };
        (!settled).then_some(doubted)
    }
}

/// What a transition appends to the operation's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HistoryEvent {
    Claimed,
    TakenOver,
    RetryStarted,
    /// A Claim of a FAILED operation whose policy opted in started a new
    /// attempt (detail: the failure it replaces).
    RetriedAfterFailure,
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
    /// An admin turned the ended operation into a tombstone (Forget).
    Forgotten,
    /// Stands for the entries past the operation's history cap.
    HistoryTruncated,
    /// A Claim refused because its request differed from the stored one
    /// (IDEMPOTENCY_KEY_REUSED): evidence, not a transition.
    ConflictingClaimRefused,
}

impl HistoryEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryEvent::Claimed => "CLAIMED",
            HistoryEvent::TakenOver => "TAKEN_OVER",
            HistoryEvent::RetryStarted => "RETRY_STARTED",
            HistoryEvent::RetriedAfterFailure => "RETRIED_AFTER_FAILURE",
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
            HistoryEvent::Forgotten => "FORGOTTEN",
            HistoryEvent::HistoryTruncated => "HISTORY_TRUNCATED",
            HistoryEvent::ConflictingClaimRefused => "CONFLICTING_CLAIM_REFUSED",
        }
    }

    /// Every event, in the order the proto documents them.
    pub const ALL: [HistoryEvent; 17] = [
        HistoryEvent::Claimed,
        HistoryEvent::TakenOver,
        HistoryEvent::RetryStarted,
        HistoryEvent::MarkedUnknown,
        HistoryEvent::Renewed,
        HistoryEvent::Completed,
        HistoryEvent::Failed,
        HistoryEvent::DeadlineExceeded,
        HistoryEvent::RetryScheduled,
        HistoryEvent::OutcomeUnknown,
        HistoryEvent::Reconciled,
        HistoryEvent::StaleWriteRefused,
        HistoryEvent::LateWriteRefused,
        HistoryEvent::ConflictingClaimRefused,
        HistoryEvent::Expired,
        HistoryEvent::Forgotten,
        HistoryEvent::HistoryTruncated,
    ];

    /// The event stored as `name` (upper case, as [`Self::as_str`]).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|event| event.as_str() == name)
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
    /// `last_at`, `last_fence`) instead of appended. The stores only compare
    /// keys: the rule lives here.
    ///
    /// - Renewals coalesce per fence: one owner renewing N times is one
    ///   `RENEWED` entry with count N (a new owner starts a new entry).
    /// - Refusals coalesce per (event, RPC), whatever the fence: a stalled
    ///   client, or many of them, retrying stale writes is one entry that
    ///   keeps the first refused fence (`fence`), the last (`last_fence`)
    ///   and the count, however the fences vary.
    /// - Refused conflicting Claims coalesce whatever the fence: a caller
    ///   hammering one key with another request is one growing
    ///   `CONFLICTING_CLAIM_REFUSED` entry, not thousands.
    /// - Every other transition gets an entry of its own (`None`).
    ///
    /// The key depends on the event, the fence and the detail only, never on
    /// the attempt or the states, so a store can compute it before it reads
    /// the row ([`crate::guarded::GuardedWrite::coalesce_key`]).
    pub fn coalesce_key(&self) -> Option<String> {
        coalesce_key(self.event, self.fence, &self.detail)
    }
}

/// Whether an entry from `from_state` to `to_state` is appended even past
/// the history cap: the transitions into a terminal state (and the first
/// entry, CLAIMED, which the cap never reaches). See [`HistoryCap`].
pub fn kept_past_history_cap(from_state: Option<State>, to_state: State) -> bool {
    to_state.is_terminal() && from_state != Some(to_state)
}

impl NewHistoryEntry {
    /// See [`kept_past_history_cap`].
    pub fn kept_past_cap(&self) -> bool {
        kept_past_history_cap(self.from_state, self.to_state)
    }

    /// Whether [`HistoryCap::place`] appends this entry as itself whatever
    /// the operation's last entry is (it has no coalesce key and is kept
    /// past the cap: a terminal transition), so that a store need not look
    /// at the last entry first.
    pub fn appended_whatever_the_last(&self) -> bool {
        self.coalesce_key().is_none() && self.kept_past_cap()
    }
}

/// How many entries an operation's history holds. The first `max_entries
/// - 1` entries are appended (or coalesced, [`NewHistoryEntry::coalesce_key`])
/// as usual; past them, every entry that is not kept past the cap
/// ([`kept_past_history_cap`]: the terminal transitions) is counted into one
/// `HISTORY_TRUNCATED` entry at the end instead (appended once, then counted
/// into while it is the last entry). So the history keeps its beginning
/// (CLAIMED and the first attempts), how much was left out and when, and
/// how the operation ended; an operation holds at most `max_entries + 4`
/// entries (the terminal transition and EXPIRED, each followed by at most one
/// more `HISTORY_TRUNCATED`). The stores enforce it in the statement that
/// writes the entry ([`HistoryCap::place`] says in Rust what it does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryCap {
    pub max_entries: u32,
}

impl Default for HistoryCap {
    fn default() -> Self {
        Self {
            max_entries: Self::DEFAULT_MAX_ENTRIES,
        }
    }
}

/// Where a new history entry goes; see [`HistoryCap::place`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryPlacement {
    /// Counted into the last entry (its key matched, or it is the
    /// truncation marker and the cap is reached).
    CountIntoLast,
    /// Appended as itself.
    Append,
    /// Appended as a new `HISTORY_TRUNCATED` entry.
    AppendTruncationMarker,
}

impl HistoryCap {
    pub const DEFAULT_MAX_ENTRIES: u32 = 100;
    /// Room for CLAIMED, a few attempts and the marker.
    pub const MIN_MAX_ENTRIES: u32 = 10;
    pub const MAX_MAX_ENTRIES: u32 = 10_000;
    /// The coalesce key of the truncation marker; no entry's key equals it.
    pub const TRUNCATED_KEY: &'static str = "HISTORY_TRUNCATED";
    /// The truncation marker's detail.
    pub const TRUNCATED_DETAIL: &'static str = "entries past the history cap, counted";

    /// Where `entry` goes, given the operation's last entry (its sequence,
    /// which is the number of entries, and its coalesce key). The stores'
    /// SQL does exactly this, in the statement that writes the entry.
    pub fn place(
        self,
        entry: &NewHistoryEntry,
        last: Option<(u64, Option<&str>)>,
    ) -> HistoryPlacement {
        let (last_sequence, last_key) = last.unwrap_or((0, None));
        let key = entry.coalesce_key();
        if key.is_some() && key.as_deref() == last_key {
            return HistoryPlacement::CountIntoLast;
        }
        if entry.kept_past_cap() || last_sequence < u64::from(self.max_entries).saturating_sub(1) {
            return HistoryPlacement::Append;
        }
        if last_key == Some(Self::TRUNCATED_KEY) {
            return HistoryPlacement::CountIntoLast;
        }
        HistoryPlacement::AppendTruncationMarker
    }
}

/// See [`NewHistoryEntry::coalesce_key`].
pub fn coalesce_key(event: HistoryEvent, fence: Fence, detail: &str) -> Option<String> {
    match event {
        HistoryEvent::Renewed => Some(format!("{}/{fence}", event.as_str())),
        HistoryEvent::StaleWriteRefused | HistoryEvent::LateWriteRefused => {
            Some(format!("{}/{detail}", event.as_str()))
        }
        HistoryEvent::ConflictingClaimRefused => Some(event.as_str().to_owned()),
        _ => None,
    }
}

/// A history entry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub sequence: u64,
    pub event: String,
    pub from_state: Option<State>,
    pub to_state: State,
    /// The fence of the first event the entry stands for (for a refusal,
    /// the refused one).
    pub fence: Fence,
    /// The fence of the last event it stands for: differs from `fence` only
    /// for refusals that coalesced across fences.
    pub last_fence: Fence,
    pub attempt: u32,
    pub detail: String,
    pub count: u64,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
    /// Who made the change, for reconciliations and Forget.
    pub acted_by: Option<ActedBy>,
}

/// The credential behind a reconciliation or a Forget, as history and the
/// audit log record it: never a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActedBy {
    /// `token:NAME` or `certificate:IDENTITY`.
    pub credential: String,
    /// An admin credential of another tenant, acting on this one's behalf.
    pub admin_on_behalf: bool,
}

/// The durable audit row an admin action writes in the transaction of its
/// change: who is [`ActedBy`], the tenant and target are the operation's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditNote {
    /// `operation.reconcile`, `operation.forget`.
    pub action: &'static str,
    pub detail: String,
    pub reason: Option<String>,
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
            let _ = write!(out, "{byte:02x}");
            out
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(event: HistoryEvent, fence: Fence, detail: &str) -> NewHistoryEntry {
        NewHistoryEntry {
            event,
            from_state: Some(State::InProgress),
            to_state: State::InProgress,
            fence,
            attempt: 1,
            detail: detail.into(),
        }
    }

    #[test]
    fn renewals_coalesce_per_fence() {
        let key = |fence| entry(HistoryEvent::Renewed, fence, "").coalesce_key();
        assert!(key(7).is_some());
        assert_eq!(key(7), key(7), "the same owner renewing again");
        assert_ne!(key(7), key(8), "a new owner starts an entry of its own");
        let later_attempt = NewHistoryEntry {
            attempt: 3,
            ..entry(HistoryEvent::Renewed, 7, "")
        };
        assert_eq!(
            later_attempt.coalesce_key(),
            key(7),
            "the key names the fence only"
        );
    }

    #[test]
    fn refusals_coalesce_per_event_and_rpc_whatever_the_fence() {
        for event in [
            HistoryEvent::StaleWriteRefused,
            HistoryEvent::LateWriteRefused,
        ] {
            let key = |fence, rpc| entry(event, fence, rpc).coalesce_key();
            assert!(key(1, "renew").is_some());
            assert_eq!(key(1, "renew"), key(999, "renew"), "{event:?}");
            assert_ne!(key(1, "renew"), key(1, "complete"), "{event:?}");
            let in_another_state = NewHistoryEntry {
                to_state: State::Succeeded,
                from_state: Some(State::Succeeded),
                ..entry(event, 2, "renew")
            };
            assert_eq!(in_another_state.coalesce_key(), key(1, "renew"));
        }
        assert_ne!(
            entry(HistoryEvent::StaleWriteRefused, 1, "renew").coalesce_key(),
            entry(HistoryEvent::LateWriteRefused, 1, "renew").coalesce_key()
        );
        assert_ne!(
            entry(HistoryEvent::StaleWriteRefused, 1, "renew").coalesce_key(),
            entry(HistoryEvent::Renewed, 1, "renew").coalesce_key()
        );
    }

    #[test]
    fn refused_conflicting_claims_coalesce_whatever_the_fence() {
        let key = |fence| entry(HistoryEvent::ConflictingClaimRefused, fence, "").coalesce_key();
        assert!(key(1).is_some());
        assert_eq!(key(1), key(9));
        assert_ne!(
            key(1),
            entry(HistoryEvent::StaleWriteRefused, 1, "").coalesce_key()
        );
        for event in HistoryEvent::ALL {
            assert_eq!(HistoryEvent::parse(event.as_str()), Some(event));
        }
        assert_eq!(HistoryEvent::parse("claimed"), None);
    }

    #[test]
    fn every_other_transition_has_an_entry_of_its_own() {
        for event in [
            HistoryEvent::Claimed,
            HistoryEvent::TakenOver,
            HistoryEvent::RetryStarted,
            HistoryEvent::MarkedUnknown,
            HistoryEvent::Completed,
            HistoryEvent::Failed,
            HistoryEvent::RetryScheduled,
            HistoryEvent::OutcomeUnknown,
            HistoryEvent::Reconciled,
            HistoryEvent::DeadlineExceeded,
            HistoryEvent::Expired,
        ] {
            assert_eq!(entry(event, 1, "").coalesce_key(), None, "{event:?}");
        }
    }

    #[test]
    fn past_the_cap_entries_fold_into_one_truncation_marker_but_terminal_ones_are_kept() {
        let cap = HistoryCap { max_entries: 10 };
        let renewal = entry(HistoryEvent::Renewed, 7, "");
        let renewal_key = renewal.coalesce_key();
        let taken_over = entry(HistoryEvent::TakenOver, 8, "lease expired");
        let completed = NewHistoryEntry {
            to_state: State::Succeeded,
            ..entry(HistoryEvent::Completed, 8, "")
        };
        let refused_after_the_end = NewHistoryEntry {
            from_state: Some(State::Succeeded),
            to_state: State::Succeeded,
            ..entry(HistoryEvent::StaleWriteRefused, 3, "complete")
        };
        let marker = Some(HistoryCap::TRUNCATED_KEY);

        // Below the cap: as usual.
        assert_eq!(cap.place(&taken_over, None), HistoryPlacement::Append);
        assert_eq!(
            cap.place(&taken_over, Some((8, None))),
            HistoryPlacement::Append
        );
        assert_eq!(
            cap.place(&renewal, Some((8, renewal_key.as_deref()))),
            HistoryPlacement::CountIntoLast
        );
        // At the cap: a matching last entry still coalesces; anything else
        // becomes (or counts into) the marker.
        assert_eq!(
            cap.place(&renewal, Some((9, renewal_key.as_deref()))),
            HistoryPlacement::CountIntoLast
        );
        assert_eq!(
            cap.place(&taken_over, Some((9, None))),
            HistoryPlacement::AppendTruncationMarker
        );
        assert_eq!(
            cap.place(&taken_over, Some((10, marker))),
            HistoryPlacement::CountIntoLast
        );
        assert_eq!(
            cap.place(&renewal, Some((10, marker))),
            HistoryPlacement::CountIntoLast
        );
        // Terminal transitions are kept, and what follows them folds again.
        assert!(completed.kept_past_cap());
        assert_eq!(
            cap.place(&completed, Some((10, marker))),
            HistoryPlacement::Append
        );
        assert!(!refused_after_the_end.kept_past_cap(), "no transition");
        assert_eq!(
            cap.place(&refused_after_the_end, Some((11, None))),
            HistoryPlacement::AppendTruncationMarker
        );
        let expired = NewHistoryEntry {
            from_state: Some(State::Succeeded),
            to_state: State::Expired,
            ..entry(HistoryEvent::Expired, 8, "")
        };
        assert_eq!(
            cap.place(&expired, Some((12, marker))),
            HistoryPlacement::Append
        );
        assert_ne!(
            renewal_key.as_deref(),
            marker,
            "no entry's key is the marker's"
        );
    }

    /// A store skips looking at the last entry only where `place` would
    /// append whatever it found: every event, state pair and last entry
    /// (none, short of the cap, at it, past it; with no key, the entry's own
    /// key, the truncation marker's).
    #[test]
    fn an_entry_appended_whatever_the_last_is_appended_by_place() {
        let cap = HistoryCap { max_entries: 10 };
        let mut skipped = 0;
        for event in HistoryEvent::ALL {
            for from_state in std::iter::once(None).chain(State::ALL.map(Some)) {
                for to_state in State::ALL {
                    let entry = NewHistoryEntry {
                        from_state,
                        to_state,
                        ..entry(event, 5, "complete")
                    };
                    if !entry.appended_whatever_the_last() {
                        continue;
                    }
                    skipped += 1;
                    let own_key = entry.coalesce_key();
                    for sequence in [1, 8, 9, 10, 50] {
                        for key in [None, own_key.as_deref(), Some(HistoryCap::TRUNCATED_KEY)] {
                            assert_eq!(
                                cap.place(&entry, Some((sequence, key))),
                                HistoryPlacement::Append,
                                "{entry:?} after entry {sequence} keyed {key:?}"
                            );
                        }
                    }
                    assert_eq!(cap.place(&entry, None), HistoryPlacement::Append);
                }
            }
        }
        let completed = NewHistoryEntry {
            from_state: Some(State::InProgress),
            to_state: State::Succeeded,
            ..entry(HistoryEvent::Completed, 5, "complete")
        };
        assert!(
            completed.appended_whatever_the_last() && skipped > 1,
            "a Complete skips the look at the last entry"
        );
    }
}
