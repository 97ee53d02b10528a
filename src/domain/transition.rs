//! The state machine of DESIGN.md, as pure functions.
//!
//! Each `decide_*` takes the locked record, the validated command and the
//! database's clock, and returns a [`Decision`]: the write to make (if any),
//! the history entry to append (if any) and the answer. It performs no I/O;
//! the stores apply the decision inside the transaction that holds the lock.

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};

use super::command::{
    ClaimCommand, CompleteCommand, FailCommand, FailDisposition, ReconcileCommand, RenewCommand,
    Resolution,
};
use super::error::{Error, Refusal};
use super::model::{
    DRAWN_FENCE, ErrorReport, FailureReason, Fence, HistoryEvent, NewHistoryEntry, OperationId,
    OperationRecord, Outcome, PreviousAttempt, RequestDigest, State, TenantId, WriteAnswer,
    WriteReceipt, Writer, time_left,
};

/// What a Claim answers, besides errors. The ownership details (fence,
/// attempt, lease) are read from the record as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimAnswer {
    Acquired,
    ReconcileFirst(Doubt),
    Pending {
        reason: PendingReason,
        retry_after: TimeDelta,
    },
    Completed,
    NeedsReconciliation,
}

/// What a ReconcileFirst tells the new owner about the earlier attempt whose
/// effect may have happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doubt {
    pub previous: PreviousAttempt,
    /// When that attempt's effect can no longer be in flight (its deadline
    /// plus the clock margin): a provider lookup sent before then that finds
    /// nothing proves nothing. `None`: not known.
    pub settles_at: Option<DateTime<Utc>>,
}

impl Doubt {
    fn of(previous: PreviousAttempt, clock_margin: TimeDelta) -> Self {
        Self {
            previous,
            settles_at: previous.settles_at(clock_margin),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingReason {
    InProgress,
    RetryScheduled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Claim(ClaimAnswer),
    /// A write (Renew, Complete, Fail, Reconcile) took effect now or earlier;
    /// its answer is read from the record.
    Written,
}

/// The record as it is to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub next: OperationRecord,
    /// A new owner or a reconciler: the store draws the next fence from the
    /// sequence and hands it to [`Effects::with_fence`].
    pub takes_new_fence: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Effects {
    pub update: Option<Update>,
    pub history: Option<NewHistoryEntry>,
}

impl Effects {
    pub fn is_empty(&self) -> bool {
        self.update.is_none() && self.history.is_none()
    }

    pub fn takes_new_fence(&self) -> bool {
        self.update
            .as_ref()
            .is_some_and(|update| update.takes_new_fence)
    }

    /// Stamps the fence the store drew onto the record and its history entry.
    pub fn with_fence(mut self, fence: Fence) -> Self {
        if let Some(update) = self.update.as_mut().filter(|update| update.takes_new_fence) {
            update.next.fence = fence;
            if let Some(history) = self.history.as_mut() {
                history.fence = fence;
            }
            // A receipt this decision wrote answers with the fence drawn.
            if let Some(answer) = update
                .next
                .last_write
                .as_mut()
                .and_then(|receipt| receipt.answer.as_mut())
                .filter(|answer| answer.fence == DRAWN_FENCE)
            {
                answer.fence = fence;
            }
        }
        self
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub effects: Effects,
    pub answer: Result<Answer, Error>,
}

impl Decision {
    fn answer(answer: Answer) -> Self {
        Self {
            effects: Effects::default(),
            answer: Ok(answer),
        }
    }

    fn refuse(error: Error) -> Self {
        Self {
            effects: Effects::default(),
            answer: Err(error),
        }
    }

    fn refuse_and_record(error: Error, history: NewHistoryEntry) -> Self {
        Self {
            effects: Effects {
                update: None,
                history: Some(history),
            },
            answer: Err(error),
        }
    }

    fn transition(
        record: &OperationRecord,
        next: OperationRecord,
        takes_new_fence: bool,
        event: HistoryEvent,
        detail: impl Into<String>,
        answer: Answer,
    ) -> Self {
        let history = NewHistoryEntry {
            event,
            from_state: Some(record.state),
            to_state: next.state,
            fence: next.fence,
            attempt: next.attempt,
            detail: detail.into(),
        };
        Self {
            effects: Effects {
                update: Some(Update {
                    next,
                    takes_new_fence,
                }),
                history: Some(history),
            },
            answer: Ok(answer),
        }
    }
}

/// The `(none) → Claim` row: what a store inserts when the scope has no
/// record yet. Deadlines are offsets from the database clock of the insert,
/// so a store that reads its clock inside the statement (Postgres) and one
/// that reads it first (SQLite) bind the same values. The fence is drawn by
/// the store and stamped into the history entry as it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstClaim {
    /// The first lease, capped at the attempt deadline.
    pub lease_expires_in: TimeDelta,
    pub attempt_deadline_in: TimeDelta,
    pub operation_deadline_in: Option<TimeDelta>,
    /// CLAIMED, into IN_PROGRESS, attempt 1.
    pub history: NewHistoryEntry,
}

pub fn decide_first_claim(command: &ClaimCommand) -> FirstClaim {
    FirstClaim {
        lease_expires_in: lease_within_attempt(command.lease, command.max_attempt_duration),
        attempt_deadline_in: command.max_attempt_duration,
        operation_deadline_in: command.operation_deadline,
        history: NewHistoryEntry {
            event: HistoryEvent::Claimed,
            from_state: None,
            to_state: State::InProgress,
            fence: 0,
            attempt: 1,
            detail: String::new(),
        },
    }
}

impl FirstClaim {
    /// The CLAIMED entry with the fence the store drew.
    pub fn history_with_fence(&self, fence: Fence) -> NewHistoryEntry {
        NewHistoryEntry {
            fence,
            ..self.history.clone()
        }
    }

    /// The record a store holds after inserting this claim at `now` with the
    /// fence it drew.
    pub fn record(
        &self,
        operation_id: OperationId,
        tenant_id: TenantId,
        command: &ClaimCommand,
        fence: Fence,
        now: DateTime<Utc>,
    ) -> OperationRecord {
        OperationRecord {
            operation_id,
            tenant_id,
            scope: command.scope.clone(),
            fingerprint: command.fingerprint,
            state: self.history.to_state,
            fence,
            attempt: self.history.attempt,
            max_attempts: command.max_attempts,
            claim_token: command.claim_token.clone(),
            taken_over_from: None,
            lease_duration: command.lease,
            max_attempt_duration: command.max_attempt_duration,
            retention: command.retention,
            lease_expires_at: Some(now + self.lease_expires_in),
            attempt_deadline_at: Some(now + self.attempt_deadline_in),
            retry_at: None,
            operation_deadline_at: self.operation_deadline_in.map(|deadline| now + deadline),
            outcome: None,
            outcome_kind: None,
            last_write: None,
            created_at: now,
            updated_at: now,
            completed_at: None,
            retain_until: None,
        }
    }
}

/// A lease never outlives the attempt it belongs to: the one place this rule
/// is written (first claims, new attempts and renewals all go through it).
fn lease_within_attempt(lease: TimeDelta, attempt_time_left: TimeDelta) -> TimeDelta {
    lease.min(attempt_time_left)
}

pub fn decide_claim(
    record: &OperationRecord,
    command: &ClaimCommand,
    now: DateTime<Utc>,
) -> Decision {
    let operation_id = record.operation_id;
    if record.fingerprint != command.fingerprint {
        return Decision::refuse(Error::KeyReused { operation_id });
    }
    match record.state {
        State::Expired => Decision::refuse(Error::ResultExpired { operation_id }),
        State::Succeeded | State::Failed => Decision::answer(Answer::Claim(ClaimAnswer::Completed)),
        State::InProgress if !record.lease_expired(now) => {
            let resent_by_owner =
                !command.claim_token.is_empty() && command.claim_token == record.claim_token;
            if resent_by_owner {
                // The same answer again; the attempt is not counted twice.
                let answer = match record.taken_over_from {
                    Some(previous) => {
                        ClaimAnswer::ReconcileFirst(Doubt::of(previous, command.clock_margin))
                    }
                    None => ClaimAnswer::Acquired,
                };
                return Decision::answer(Answer::Claim(answer));
            }
            Decision::answer(Answer::Claim(ClaimAnswer::Pending {
                reason: PendingReason::InProgress,
                retry_after: time_left(record.lease_expires_at, now),
            }))
        }
        State::InProgress | State::Unknown => take_over_or_escalate(record, command, now),
        State::RetryWait => {
            let due = record.retry_at.is_none_or(|retry_at| retry_at <= now);
            if !due {
                return Decision::answer(Answer::Claim(ClaimAnswer::Pending {
                    reason: PendingReason::RetryScheduled,
                    retry_after: time_left(record.retry_at, now),
                }));
            }
            // The last attempt certainly had no effect. If it took over an
            // attempt that may still be in flight, that doubt outlives it.
            let doubt = record.doubt_at(now, command.clock_margin);
            let ended = if operation_deadline_passed(record, now) {
                Some(FailureReason::DeadlineExceeded)
            } else if record.attempt >= record.max_attempts {
                Some(FailureReason::AttemptsExhausted)
            } else {
                None
            };
            match (ended, doubt) {
                (Some(reason), None) => end_without_new_attempt(record, reason, now),
                (Some(reason), Some(previous)) => {
                    keep_doubt_without_new_attempt(record, previous, reason, now)
                }
                (None, None) => Decision::transition(
                    record,
                    start_attempt(record, command, now, None),
                    true,
                    HistoryEvent::RetryStarted,
                    "",
                    Answer::Claim(ClaimAnswer::Acquired),
                ),
                (None, Some(previous)) => Decision::transition(
                    record,
                    start_attempt(record, command, now, Some(previous)),
                    true,
                    HistoryEvent::RetryStarted,
                    doubt_detail(&previous),
                    Answer::Claim(ClaimAnswer::ReconcileFirst(Doubt::of(
                        previous,
                        command.clock_margin,
                    ))),
                ),
            }
        }
    }
}

/// A retry that may not start (`reason`: the budget or the operation
/// deadline is spent) while an attempt it took over may still be in flight:
/// nobody knows that attempt's outcome, so the operation is UNKNOWN (with
/// that attempt's deadline), for a reconciler, not FAILED.
fn keep_doubt_without_new_attempt(
    record: &OperationRecord,
    previous: PreviousAttempt,
    reason: FailureReason,
    now: DateTime<Utc>,
) -> Decision {
    let answer = Answer::Claim(ClaimAnswer::NeedsReconciliation);
    keep_doubt(record, previous, reason, now, answer)
}

/// The record of an operation that ends no attempt of its own but still
/// doubts `previous`: UNKNOWN until that attempt's deadline, as a decline
/// after a takeover leaves it.
fn keep_doubt(
    record: &OperationRecord,
    previous: PreviousAttempt,
    reason: FailureReason,
    now: DateTime<Utc>,
    answer: Answer,
) -> Decision {
    let next = OperationRecord {
        state: State::Unknown,
        lease_expires_at: None,
        attempt_deadline_at: previous.attempt_deadline_at.or(record.attempt_deadline_at),
        retry_at: None,
        updated_at: now,
        ..record.clone()
    };
    Decision::transition(
        record,
        next,
        false,
        HistoryEvent::MarkedUnknown,
        format!("{}; {}", reason.as_str(), doubt_detail(&previous)),
        answer,
    )
}

/// An attempt of unknown outcome: the next owner must reconcile first, or, with
/// no budget or time left, only a reconciler may resolve it.
fn take_over_or_escalate(
    record: &OperationRecord,
    command: &ClaimCommand,
    now: DateTime<Utc>,
) -> Decision {
    // The new attempt's deadline overwrites the replaced one's, which the new
    // owner still needs: kept with the takeover and in its history entry.
    let previous = PreviousAttempt {
        state: record.state,
        fence: record.fence,
        attempt_deadline_at: record.attempt_deadline_at,
    };
    let budget_left = record.attempt < record.max_attempts;
    if budget_left && !operation_deadline_passed(record, now) {
        let next = start_attempt(record, command, now, Some(previous));
        return Decision::transition(
            record,
            next,
            true,
            HistoryEvent::TakenOver,
            takeover_detail(&previous),
            Answer::Claim(ClaimAnswer::ReconcileFirst(Doubt::of(
                previous,
                command.clock_margin,
            ))),
        );
    }
    if record.state == State::Unknown {
        return Decision::answer(Answer::Claim(ClaimAnswer::NeedsReconciliation));
    }
    let why = if budget_left {
        "operation deadline passed"
    } else {
        "attempt budget spent"
    };
    let next = OperationRecord {
        state: State::Unknown,
        updated_at: now,
        ..record.clone()
    };
    Decision::transition(
        record,
        next,
        false,
        HistoryEvent::MarkedUnknown,
        why,
        Answer::Claim(ClaimAnswer::NeedsReconciliation),
    )
}

/// Why an operation stays in doubt after the attempt that took over: the
/// earlier attempt's deadline (RFC 3339, UTC, milliseconds), e.g. `earlier
/// attempt may still be in flight; previous attempt deadline
/// 2026-12-01T12:00:00.000Z`.
pub fn doubt_detail(previous: &PreviousAttempt) -> String {
    let why = "earlier attempt may still be in flight";
    match previous.attempt_deadline_at {
        Some(deadline) => format!(
            "{why}; previous attempt deadline {}",
            deadline.to_rfc3339_opts(SecondsFormat::Millis, true)
        ),
        None => why.to_owned(),
    }
}

/// The TAKEN_OVER entry's detail: why, and the replaced attempt's deadline
/// (RFC 3339, UTC, milliseconds), e.g. `lease expired; previous attempt
/// deadline 2026-12-01T12:00:00.000Z`.
pub fn takeover_detail(previous: &PreviousAttempt) -> String {
    let why = match previous.state {
        State::InProgress => "lease expired",
        _ => "outcome unknown",
    };
    match previous.attempt_deadline_at {
        Some(deadline) => format!(
            "{why}; previous attempt deadline {}",
            deadline.to_rfc3339_opts(SecondsFormat::Millis, true)
        ),
        None => why.to_owned(),
    }
}

fn start_attempt(
    record: &OperationRecord,
    command: &ClaimCommand,
    now: DateTime<Utc>,
    taken_over_from: Option<PreviousAttempt>,
) -> OperationRecord {
    OperationRecord {
        state: State::InProgress,
        attempt: record.attempt + 1,
        claim_token: command.claim_token.clone(),
        taken_over_from,
        lease_duration: command.lease,
        lease_expires_at: Some(
            now + lease_within_attempt(command.lease, record.max_attempt_duration),
        ),
        attempt_deadline_at: Some(now + record.max_attempt_duration),
        retry_at: None,
        updated_at: now,
        ..record.clone()
    }
}

fn end_without_new_attempt(
    record: &OperationRecord,
    reason: FailureReason,
    now: DateTime<Utc>,
) -> Decision {
    let error = ErrorReport {
        code: reason.as_str().to_owned(),
        message: match reason {
            FailureReason::DeadlineExceeded => {
                "the operation deadline passed before a retry".into()
            }
            _ => "the attempt budget is spent".into(),
        },
        ..ErrorReport::default()
    };
    let next = finish(record, Outcome::Failed { reason, error }, now);
    let event = match reason {
        FailureReason::DeadlineExceeded => HistoryEvent::DeadlineExceeded,
        _ => HistoryEvent::Failed,
    };
    Decision::transition(
        record,
        next,
        false,
        event,
        reason.as_str(),
        Answer::Claim(ClaimAnswer::Completed),
    )
}

fn finish(record: &OperationRecord, outcome: Outcome, now: DateTime<Utc>) -> OperationRecord {
    let state = match outcome {
        Outcome::Succeeded(_) => State::Succeeded,
        Outcome::Failed { .. } => State::Failed,
    };
    OperationRecord {
        state,
        outcome: Some(outcome),
        outcome_kind: Some(state),
        lease_expires_at: None,
        retry_at: None,
        completed_at: Some(now),
        retain_until: Some(now + record.retention),
        updated_at: now,
        ..record.clone()
    }
}

/// The checks every owner write (Renew, Complete, Fail) passes through, in
/// order. `Some` carries the decision to return instead of writing.
fn refuse_owner_write(
    record: &OperationRecord,
    fence: Fence,
    digest: Option<RequestDigest>,
    rpc: &'static str,
    now: DateTime<Utc>,
) -> Option<Decision> {
    let receipt_for_fence = record
        .last_write
        .filter(|receipt| receipt.writer == Writer::Owner && receipt.fence == fence);
    if let (Some(receipt), Some(digest)) = (receipt_for_fence, digest)
        && receipt.digest == digest
    {
        // A re-sent write whose reply was lost: the original answer.
        return Some(Decision::answer(Answer::Written));
    }
    if fence != record.fence {
        return Some(refuse_stale(record, fence, rpc));
    }
    if digest.is_some() && receipt_for_fence.is_some() {
        return Some(refuse(Refusal::RequestMismatch, record));
    }
    if record.state.is_terminal() {
        return Some(refuse(Refusal::OperationTerminal, record));
    }
    // UNKNOWN with the owner's own fence was marked by a Claim, not reported
    // by the owner (that would have left a receipt): nobody replaced the owner.
    if !matches!(record.state, State::InProgress | State::Unknown) {
        return Some(refuse(Refusal::StateForbids, record));
    }
    if record.attempt_deadline_passed(now) {
        let history = refusal_history(record, HistoryEvent::LateWriteRefused, fence, rpc);
        return Some(Decision::refuse_and_record(
            refused(Refusal::AttemptDeadlinePassed, record),
            history,
        ));
    }
    None
}

pub fn decide_renew(
    record: &OperationRecord,
    command: &RenewCommand,
    now: DateTime<Utc>,
) -> Decision {
    if let Some(decision) = refuse_owner_write(record, command.fence, None, "renew", now) {
        return decision;
    }
    if record.state != State::InProgress {
        return refuse(Refusal::StateForbids, record);
    }
    let lease = command.lease.unwrap_or(record.lease_duration);
    let attempt_time_left = record
        .attempt_deadline_at
        .map_or(TimeDelta::zero(), |deadline| deadline - now);
    let next = OperationRecord {
        lease_expires_at: Some(now + lease_within_attempt(lease, attempt_time_left)),
        updated_at: now,
        ..record.clone()
    };
    Decision::transition(
        record,
        next,
        false,
        HistoryEvent::Renewed,
        "",
        Answer::Written,
    )
}

pub fn decide_complete(
    record: &OperationRecord,
    command: &CompleteCommand,
    now: DateTime<Utc>,
) -> Decision {
    let digest = command.digest();
    if let Some(decision) = refuse_owner_write(record, command.fence, Some(digest), "complete", now)
    {
        return decision;
    }
    let mut next = finish(record, Outcome::Succeeded(command.result.clone()), now);
    next.last_write = Some(WriteReceipt {
        fence: command.fence,
        digest,
        writer: Writer::Owner,
        answer: Some(WriteAnswer::of(&next)),
    });
    Decision::transition(
        record,
        next,
        false,
        HistoryEvent::Completed,
        "",
        Answer::Written,
    )
}

pub fn decide_fail(
    record: &OperationRecord,
    command: &FailCommand,
    now: DateTime<Utc>,
) -> Decision {
    let digest = command.digest();
    if let Some(decision) = refuse_owner_write(record, command.fence, Some(digest), "fail", now) {
        return decision;
    }
    let receipt = WriteReceipt {
        fence: command.fence,
        digest,
        writer: Writer::Owner,
        answer: None,
    };
    let failed = |reason| Outcome::Failed {
        reason,
        error: command.error.clone(),
    };
    // In doubt until `attempt_deadline_at`: the next owner reconciles first,
    // and NOT_APPLIED waits for it.
    let in_doubt = |attempt_deadline_at| {
        (
            OperationRecord {
                state: State::Unknown,
                lease_expires_at: None,
                attempt_deadline_at,
                updated_at: now,
                ..record.clone()
            },
            HistoryEvent::OutcomeUnknown,
        )
    };
    // An attempt this one took over whose effect may still be in flight:
    // this attempt's own outcome does not settle it.
    let earlier_in_doubt = record
        .taken_over_from
        .filter(|previous| previous.may_still_run(now, command.clock_margin));
    // Released for a later attempt (which is told of an earlier attempt still
    // in doubt: RETRY_WAIT keeps `taken_over_from`), unless the budget or the
    // operation deadline ends it: FAILED, as this attempt's effect certainly
    // did not happen, or UNKNOWN while the earlier attempt's may still land.
    let released = |retry_after: TimeDelta| {
        let ends = record.attempt >= record.max_attempts
            || record
                .operation_deadline_at
                .is_some_and(|deadline| deadline <= now + retry_after);
        if let (true, Some(previous)) = (ends, earlier_in_doubt) {
            in_doubt(previous.attempt_deadline_at.or(record.attempt_deadline_at))
        } else if record.attempt >= record.max_attempts {
            (
                finish(record, failed(FailureReason::AttemptsExhausted), now),
                HistoryEvent::Failed,
            )
        } else if record
            .operation_deadline_at
            .is_some_and(|deadline| deadline <= now + retry_after)
        {
            (
                finish(record, failed(FailureReason::DeadlineExceeded), now),
                HistoryEvent::DeadlineExceeded,
            )
        } else {
            (
                OperationRecord {
                    state: State::RetryWait,
                    retry_at: Some(now + retry_after),
                    lease_expires_at: None,
                    updated_at: now,
                    ..record.clone()
                },
                HistoryEvent::RetryScheduled,
            )
        }
    };
    let (next, event) = match command.disposition {
        FailDisposition::Terminal => (
            finish(record, failed(FailureReason::Terminal), now),
            HistoryEvent::Failed,
        ),
        FailDisposition::Retryable => released(command.retry_after),
        FailDisposition::Unknown => in_doubt(record.attempt_deadline_at),
        // A decline hands the operation on as it was before this attempt. A
        // takeover's doubt lasts until the attempt it replaced is over, not
        // until this one (which never started an effect) would have been:
        // otherwise every decline would push the doubt forward, and a chain
        // of them could spend the budget without any attempt ever running.
        FailDisposition::NotStarted => match record.taken_over_from {
            Some(previous) => in_doubt(previous.attempt_deadline_at.or(record.attempt_deadline_at)),
            None => released(TimeDelta::zero()),
        },
    };
    let next = OperationRecord {
        last_write: Some(WriteReceipt {
            answer: Some(WriteAnswer::of(&next)),
            ..receipt
        }),
        ..next
    };
    Decision::transition(
        record,
        next,
        false,
        event,
        command.error.code.clone(),
        Answer::Written,
    )
}

/// The history detail of a NOT_APPLIED that granted an attempt beyond the
/// spent budget.
pub const NOT_APPLIED_WITH_GRANT: &str = "not_applied; one more attempt granted";

pub fn decide_reconcile(
    record: &OperationRecord,
    command: &ReconcileCommand,
    now: DateTime<Utc>,
) -> Decision {
    let digest = command.digest();
    let reconciled_with_this_fence = record.last_write.filter(|receipt| {
        receipt.writer == Writer::Reconciler && receipt.fence == command.expected_fence
    });
    if let Some(receipt) = reconciled_with_this_fence {
        // The same reconciliation again: its original answer. Another one
        // with the same fence contradicts it.
        if receipt.digest == digest {
            return Decision::answer(Answer::Written);
        }
        return refuse(Refusal::RequestMismatch, record);
    }
    if command.expected_fence != record.fence {
        return refuse_stale(record, command.expected_fence, "reconcile");
    }
    if record.state.is_terminal() {
        return refuse(Refusal::OperationTerminal, record);
    }
    if record.state == State::InProgress && !record.lease_expired(now) {
        return refuse(Refusal::LeaseStillLive, record);
    }
    // FAILED and NOT_APPLIED both say the effect did not happen: evidence
    // only once no attempt's effect can still land (a provider that answers
    // "not found" while a stalled owner's call is in flight proves nothing).
    // SUCCEEDED needs no wait: the effect was seen.
    let says_no_effect = !matches!(command.resolution, Resolution::Succeeded(_));
    if says_no_effect && record.doubt_at(now, command.clock_margin).is_some() {
        return refuse(Refusal::AttemptStillRunning, record);
    }
    let receipt = WriteReceipt {
        fence: command.expected_fence,
        digest,
        writer: Writer::Reconciler,
        answer: None,
    };
    let (next, detail) = match &command.resolution {
        Resolution::Succeeded(result) => (
            finish(record, Outcome::Succeeded(result.clone()), now),
            "succeeded",
        ),
        Resolution::Failed(error) => (
            finish(
                record,
                Outcome::Failed {
                    reason: FailureReason::Terminal,
                    error: error.clone(),
                },
                now,
            ),
            "failed",
        ),
        Resolution::NotApplied => {
            // Due now. The evidence that the effect never happened settles
            // the doubt that spent the budget: one more attempt is always
            // granted, recorded in history. The operation deadline still
            // holds (the next Claim ends it DEADLINE_EXCEEDED once passed).
            let budget_spent = record.attempt >= record.max_attempts;
            let next = OperationRecord {
                state: State::RetryWait,
                retry_at: Some(now),
                lease_expires_at: None,
                max_attempts: if budget_spent {
                    record.attempt + 1
                } else {
                    record.max_attempts
                },
                updated_at: now,
                ..record.clone()
            };
            let detail = if budget_spent {
                NOT_APPLIED_WITH_GRANT
            } else {
                "not_applied"
            };
            (next, detail)
        }
    };
    // The answer's fence is the one this reconciliation draws.
    let answer = WriteAnswer {
        fence: DRAWN_FENCE,
        ..WriteAnswer::of(&next)
    };
    let next = OperationRecord {
        last_write: Some(WriteReceipt {
            answer: Some(answer),
            ..receipt
        }),
        ..next
    };
    Decision::transition(
        record,
        next,
        true,
        HistoryEvent::Reconciled,
        detail,
        Answer::Written,
    )
}

fn refuse_stale(record: &OperationRecord, stale_fence: Fence, rpc: &'static str) -> Decision {
    let history = refusal_history(record, HistoryEvent::StaleWriteRefused, stale_fence, rpc);
    Decision::refuse_and_record(
        Error::LeaseLost {
            operation_id: record.operation_id,
            current_fence: record.fence,
            state: record.state,
        },
        history,
    )
}

fn refusal_history(
    record: &OperationRecord,
    event: HistoryEvent,
    fence: Fence,
    rpc: &'static str,
) -> NewHistoryEntry {
    NewHistoryEntry {
        event,
        from_state: Some(record.state),
        to_state: record.state,
        fence,
        attempt: record.attempt,
        detail: rpc.to_owned(),
    }
}

fn refused(refusal: Refusal, record: &OperationRecord) -> Error {
    Error::Refused {
        refusal,
        operation_id: record.operation_id,
        state: record.state,
    }
}

fn refuse(refusal: Refusal, record: &OperationRecord) -> Decision {
    Decision::refuse(refused(refusal, record))
}

fn operation_deadline_passed(record: &OperationRecord, now: DateTime<Utc>) -> bool {
    record
        .operation_deadline_at
        .is_some_and(|deadline| deadline <= now)
}

/// What retention keeps and for how long, beyond each record's own retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepPolicy {
    /// How long a tombstone answers RESULT_EXPIRED before it is deleted.
    pub tombstone_retention: TimeDelta,
    /// As [`ClaimCommand::clock_margin`].
    pub clock_margin: TimeDelta,
}

/// Retention, for one record the sweeper found due: a terminal record past
/// its retention becomes a tombstone (scope, fingerprint, outcome kind; no
/// result), and a retry past the operation deadline ends as FAILED
/// (DEADLINE_EXCEEDED) so that it, too, can expire — or as UNKNOWN, for a
/// reconciler, while an attempt it took over may still be in flight.
/// Unresolved records are never swept: `None`.
pub fn decide_sweep(
    record: &OperationRecord,
    now: DateTime<Utc>,
    policy: SweepPolicy,
) -> Option<Decision> {
    let SweepPolicy {
        tombstone_retention,
        clock_margin,
    } = policy;
    let retention_passed = record.retain_until.is_some_and(|until| until <= now);
    match record.state {
        State::Succeeded | State::Failed if retention_passed => {
            let next = OperationRecord {
                state: State::Expired,
                outcome: None,
                retain_until: Some(now + tombstone_retention),
                updated_at: now,
                ..record.clone()
            };
            Some(Decision::transition(
                record,
                next,
                false,
                HistoryEvent::Expired,
                "retention passed",
                Answer::Written,
            ))
        }
        State::RetryWait if operation_deadline_passed(record, now) => {
            let reason = FailureReason::DeadlineExceeded;
            Some(match record.doubt_at(now, clock_margin) {
                None => end_without_new_attempt(record, reason, now),
                Some(previous) => keep_doubt(record, previous, reason, now, Answer::Written),
            })
        }
        _ => None,
    }
}
