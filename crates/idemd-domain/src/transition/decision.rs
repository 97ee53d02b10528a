//! What every `decide_*` returns: the effects to apply (the record to
//! write, the history entry to append) and the answer.

use chrono::{DateTime, TimeDelta, Utc};

use crate::error::Error;
use crate::model::{
    ActedBy, AuditNote, DRAWN_FENCE, Fence, HistoryEvent, NewHistoryEntry, OperationRecord,
    PreviousAttempt,
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
    pub(super) fn of(previous: PreviousAttempt, clock_margin: TimeDelta) -> Self {
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
    /// An administrator holds the operation name or the tenant: nothing new
    /// is started until the hold is released.
    Held,
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
    /// Who made the change, recorded with its history entry (a
    /// reconciliation, a Forget); `None` for owners and the sweeper.
    pub acted_by: Option<ActedBy>,
    /// The audit row an admin action writes with its change, in the same
    /// transaction (written only when the record changes).
    pub audit: Option<AuditNote>,
    /// Count a refused conflicting Claim on the record (`conflicts + 1`,
    /// `last_conflict_at = now`): evidence, not a transition. The store
    /// writes those two columns only, never the state, fence, lease or
    /// `updated_at`, so a concurrent owner's fence-guarded write still holds.
    pub conflict: bool,
}

impl Effects {
    pub fn is_empty(&self) -> bool {
        self.update.is_none() && self.history.is_none() && !self.conflict
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
    /// The same decision, made by `acted_by`: its history entry names the
    /// credential, and a change it makes writes `audit` too. Said after the
    /// pure decision (who asks never changes what is decided).
    #[must_use]
    pub fn acted_by(mut self, acted_by: &ActedBy, audit: Option<AuditNote>) -> Self {
        if self.effects.history.is_some() {
            self.effects.acted_by = Some(acted_by.clone());
        }
        if self.effects.update.is_some() {
            self.effects.audit = audit;
        }
        self
    }

    /// Whether this decision makes a new owner: a Claim answered Acquired or
    /// ReconcileFirst with a new fence (not the owner's re-sent Claim, which
    /// writes nothing).
    pub fn makes_an_owner(&self) -> bool {
        matches!(
            self.answer,
            Ok(Answer::Claim(
                ClaimAnswer::Acquired | ClaimAnswer::ReconcileFirst(_)
            ))
        ) && self.effects.takes_new_fence()
    }

    pub(super) fn answer(answer: Answer) -> Self {
        Self {
            effects: Effects::default(),
            answer: Ok(answer),
        }
    }

    pub(super) fn refuse(error: Error) -> Self {
        Self {
            effects: Effects::default(),
            answer: Err(error),
        }
    }

    pub(super) fn refuse_and_record(error: Error, history: NewHistoryEntry) -> Self {
        Self {
            effects: Effects {
                update: None,
                history: Some(history),
                ..Effects::default()
            },
            answer: Err(error),
        }
    }

    /// A refusal that leaves evidence on the record: counted
    /// ([`Effects::conflict`]) and recorded in history.
    pub(super) fn refuse_and_count_conflict(error: Error, history: NewHistoryEntry) -> Self {
        Self {
            effects: Effects {
                update: None,
                history: Some(history),
                conflict: true,
                ..Effects::default()
            },
            answer: Err(error),
        }
    }

    pub(super) fn transition(
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
                ..Effects::default()
            },
            answer: Ok(answer),
        }
    }
}
