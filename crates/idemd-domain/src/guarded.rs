//! The common case of each owner write, described as one guarded statement.
//!
//! Most Renews, Completes and Fails come from the current owner, before its
//! attempt deadline, with nothing sent before under that fence. For those the
//! decision needs no reading: it is known in advance, as a [`Guard`] (the
//! whole precondition) and a [`Write`] (what to set, relative to the
//! database clock and the row's own columns). A store may run the two as one
//! `UPDATE … WHERE <guard>`; when the guard does not hold, the locked path
//! (`decide_*` in [`super::transition`]) reads, decides and explains the
//! refusal. [`Guard::holds`] and [`Write::apply`] say in Rust exactly what the
//! statement must do; the transition tests hold them equal to the `decide_*`
//! functions for every record, command and clock.

use chrono::{DateTime, TimeDelta, Utc};

use super::command::{CompleteCommand, FailCommand, FailDisposition, RenewCommand};
use super::model::{
    FailureReason, Fence, HistoryEvent, NewHistoryEntry, OperationId, OperationRecord, Outcome,
    State, WriteAnswer, WriteReceipt, Writer,
};

/// The whole precondition of a guarded write. Every condition is required.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// The row still carries this fence: no one replaced the owner.
    pub fence: Fence,
    /// The state the write applies from. An owner's common case writes from
    /// IN_PROGRESS; an owner a Claim marked UNKNOWN takes the locked path.
    pub from: State,
    /// No owner write was recorded under this fence yet: a re-sent or
    /// contradicting write is answered by the locked path, from its receipt.
    pub no_receipt_for_fence: bool,
    /// `attempt < max_attempts`: a retry is still within the budget.
    pub attempt_budget_left: bool,
    /// The operation deadline, if any, lies beyond `now + this`.
    pub operation_deadline_beyond: Option<TimeDelta>,
}

/// The lease column of a guarded write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseWrite {
    /// The attempt ended: no lease.
    Clear,
    /// `now + lease` (the row's own lease length when `None`), never past
    /// the attempt deadline.
    Extend(Option<TimeDelta>),
}

/// What a guarded write sets; every other column stays as it is. The attempt
/// deadline always lies ahead of `now` ([`Guard`] requires it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub state: State,
    /// Set (and with it the outcome kind); `None`: unchanged.
    pub outcome: Option<Outcome>,
    pub lease: LeaseWrite,
    /// `Some(d)`: a retry due at `now + d`; `None`: unchanged.
    pub retry_after: Option<TimeDelta>,
    /// The operation ends: `completed_at = now`, `retain_until = now + the
    /// row's retention`.
    pub finishes: bool,
    /// Recorded with the answer this write gets, so that a re-sent write
    /// gets the same one (`answer` is filled in by [`Write::apply`]).
    pub receipt: Option<WriteReceipt>,
}

/// One owner write's common case: guard, write, and the history entry it
/// appends (from the row's state, with its fence and attempt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedWrite {
    pub operation_id: OperationId,
    pub guard: Guard,
    pub write: Write,
    pub event: HistoryEvent,
    /// No payloads: a failure code, or nothing.
    pub detail: String,
}

impl Guard {
    fn owner(fence: Fence, no_receipt_for_fence: bool) -> Self {
        Self {
            fence,
            from: State::InProgress,
            no_receipt_for_fence,
            attempt_budget_left: false,
            operation_deadline_beyond: None,
        }
    }

    /// Whether the statement's WHERE matches `record` at `now`. The attempt
    /// deadline must lie ahead of `now`: after it, owners may not write.
    pub fn holds(&self, record: &OperationRecord, now: DateTime<Utc>) -> bool {
        let receipt_for_fence = record
            .last_write
            .is_some_and(|receipt| receipt.writer == Writer::Owner && receipt.fence == self.fence);
        record.fence == self.fence
            && record.state == self.from
            && !record.attempt_deadline_passed(now)
            && !(self.no_receipt_for_fence && receipt_for_fence)
            && (!self.attempt_budget_left || record.attempt < record.max_attempts)
            && self.operation_deadline_beyond.is_none_or(|margin| {
                record
                    .operation_deadline_at
                    .is_none_or(|deadline| deadline > now + margin)
            })
    }
}

impl Write {
    /// The record as the statement leaves it.
    pub fn apply(&self, record: &OperationRecord, now: DateTime<Utc>) -> OperationRecord {
        let mut next = record.clone();
        next.state = self.state;
        if let Some(outcome) = &self.outcome {
            next.outcome_kind = Some(outcome_state(outcome));
            next.outcome = Some(outcome.clone());
        }
        next.lease_expires_at = match self.lease {
            LeaseWrite::Clear => None,
            LeaseWrite::Extend(lease) => {
                let lease = lease.unwrap_or(record.lease_duration);
                let extended = now + lease;
                // Never past the attempt deadline (with none, the attempt
                // is over: the lease ends now).
                Some(
                    record
                        .attempt_deadline_at
                        .map_or(now, |deadline| extended.min(deadline)),
                )
            }
        };
        // Only a Renew extends the lease: its owner has written.
        if matches!(self.lease, LeaseWrite::Extend(_)) {
            next.renewed_under_fence = Some(record.fence);
        }
        if let Some(retry_after) = self.retry_after {
            next.retry_at = Some(now + retry_after);
        }
        if self.finishes {
            next.retry_at = None;
            next.completed_at = Some(now);
            next.retain_until = Some(now + record.retention);
        }
        next.updated_at = now;
        if let Some(receipt) = self.receipt {
            next.last_write = Some(WriteReceipt {
                answer: Some(WriteAnswer::of(&next)),
                ..receipt
            });
        }
        next
    }
}

impl GuardedWrite {
    /// The history entry the statement appends for `record`.
    pub fn history(&self, record: &OperationRecord) -> NewHistoryEntry {
        NewHistoryEntry {
            event: self.event,
            from_state: Some(record.state),
            to_state: self.write.state,
            fence: record.fence,
            attempt: record.attempt,
            detail: self.detail.clone(),
        }
    }

    /// Whether [`GuardedWrite::history`]'s entry is kept past the history
    /// cap (the guard's state is the row's).
    pub fn kept_past_cap(&self) -> bool {
        super::model::kept_past_history_cap(Some(self.guard.from), self.write.state)
    }

    /// The coalesce key of [`GuardedWrite::history`]'s entry, known before
    /// the row is read: under the guard, the row carries the guard's fence.
    pub fn coalesce_key(&self) -> Option<String> {
        super::model::coalesce_key(self.event, self.guard.fence, &self.detail)
    }
}

fn outcome_state(outcome: &Outcome) -> State {
    match outcome {
        Outcome::Succeeded(_) => State::Succeeded,
        Outcome::Failed { .. } => State::Failed,
    }
}

/// Renew by the live owner: the lease extended from now, capped at the
/// attempt deadline.
pub fn renew_write(command: &RenewCommand) -> GuardedWrite {
    GuardedWrite {
        operation_id: command.operation_id,
        guard: Guard::owner(command.fence, false),
        write: Write {
            state: State::InProgress,
            outcome: None,
            lease: LeaseWrite::Extend(command.lease),
            retry_after: None,
            finishes: false,
            receipt: None,
        },
        event: HistoryEvent::Renewed,
        detail: String::new(),
    }
}

/// Complete by the owner, the first write under its fence.
pub fn complete_write(command: &CompleteCommand) -> GuardedWrite {
    GuardedWrite {
        operation_id: command.operation_id,
        guard: Guard::owner(command.fence, true),
        write: Write {
            state: State::Succeeded,
            outcome: Some(Outcome::Succeeded(command.result.clone())),
            lease: LeaseWrite::Clear,
            retry_after: None,
            finishes: true,
            receipt: Some(owner_receipt(command.fence, command.digest())),
        },
        event: HistoryEvent::Completed,
        detail: String::new(),
    }
}

/// Fail by the owner, the first write under its fence. A RETRYABLE failure's
/// common case is a retry within the budget and the operation deadline; the
/// rest (ending the operation instead) is left to the locked path. A decline
/// (NOT_STARTED) has no common case: it is rare, and what it writes depends
/// on the attempt the owner took over, so the locked path decides it (`None`).
pub fn fail_write(command: &FailCommand) -> Option<GuardedWrite> {
    let receipt = Some(owner_receipt(command.fence, command.digest()));
    let mut guard = Guard::owner(command.fence, true);
    let failed = |reason| {
        Some(Outcome::Failed {
            reason,
            error: command.error.clone(),
        })
    };
    let (write, event) = match command.disposition {
        FailDisposition::Terminal => (
            Write {
                state: State::Failed,
                outcome: failed(FailureReason::Terminal),
                lease: LeaseWrite::Clear,
                retry_after: None,
                finishes: true,
                receipt,
            },
            HistoryEvent::Failed,
        ),
        FailDisposition::Retryable => {
            guard.attempt_budget_left = true;
            guard.operation_deadline_beyond = Some(command.retry_after);
            (
                Write {
                    state: State::RetryWait,
                    outcome: None,
                    lease: LeaseWrite::Clear,
                    retry_after: Some(command.retry_after),
                    finishes: false,
                    receipt,
                },
                HistoryEvent::RetryScheduled,
            )
        }
        FailDisposition::Unknown => (
            Write {
                state: State::Unknown,
                outcome: None,
                lease: LeaseWrite::Clear,
                retry_after: None,
                finishes: false,
                receipt,
            },
            HistoryEvent::OutcomeUnknown,
        ),
        FailDisposition::NotStarted => return None,
    };
    Some(GuardedWrite {
        operation_id: command.operation_id,
        guard,
        write,
        event,
        detail: command.error.code.clone(),
    })
}

fn owner_receipt(fence: Fence, digest: super::model::RequestDigest) -> WriteReceipt {
    WriteReceipt {
        fence,
        digest,
        writer: Writer::Owner,
        answer: None,
    }
}
