//! Claim: the first Claim of a scope (an insert, decided here as offsets
//! from the database clock) and a Claim of an existing record (replay,
//! pending, takeover, retry, or escalation to a reconciler).

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};

use super::deadlines::{lease_within_attempt, operation_deadline_passed};
use super::decision::{Answer, ClaimAnswer, Decision, Doubt, PendingReason};
use super::ending::{doubt_detail, end_without_new_attempt, keep_doubt};
use crate::command::ClaimCommand;
use crate::error::Error;
use crate::model::{
    AnswerCounts, FailureReason, Fence, HistoryEvent, NewHistoryEntry, OperationId,
    OperationRecord, Outcome, PreviousAttempt, State, TenantId, time_left,
};

/// The `(none) → Claim` row: what a store inserts when the scope has no
/// record yet. Deadlines are offsets from the database clock of the insert,
/// which each store's statement reads and adds them to itself. The fence is
/// drawn by the store and stamped into the history entry as it is written.
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
            renewed_under_fence: None,
            taken_over_from: None,
            lease_duration: command.lease,
            max_attempt_duration: command.max_attempt_duration,
            retention: command.retention,
            on_failed: command.on_failed,
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
            conflicts: 0,
            last_conflict_at: None,
            answers: AnswerCounts::default(),
        }
    }
}

/// The most attempts one operation ever runs when FAILED grants new ones
/// (`on_failed: new_attempt`): the largest attempt budget the server allows
/// a Claim to ask for.
pub const MOST_ATTEMPTS_EVER: u32 = 100;

pub fn decide_claim(
    record: &OperationRecord,
    command: &ClaimCommand,
    now: DateTime<Utc>,
) -> Decision {
    // The stored fingerprint may be this request's under an earlier
    // normalisation (a rolling deployment's migration window): the same
    // request, decided as if the fingerprints were equal. A Claim that
    // writes says so in its history entry; a replay writes nothing.
    let matched_previous = (record.fingerprint != command.fingerprint)
        .then(|| {
            command
                .previous_fingerprints
                .iter()
                .position(|previous| *previous == record.fingerprint)
        })
        .flatten();
    let mut decision = decide_same_or_conflicting(record, command, matched_previous.is_some(), now);
    if let Some(retry_after) = command.held
        && decision.makes_an_owner()
    {
        // Held: the owner this Claim would have become is not made, and
        // nothing is written (the record stays as it is for the release).
        return Decision::answer(Answer::Claim(ClaimAnswer::Pending {
            reason: PendingReason::Held,
            retry_after,
        }));
    }
    if let (Some(index), Some(history)) = (matched_previous, decision.effects.history.as_mut()) {
        let matched = format!("request matched by previous_fingerprints[{index}]");
        history.detail = if history.detail.is_empty() {
            matched
        } else {
            format!("{}; {matched}", history.detail)
        };
    }
    decision
}

fn decide_same_or_conflicting(
    record: &OperationRecord,
    command: &ClaimCommand,
    matched_previous: bool,
    now: DateTime<Utc>,
) -> Decision {
    let operation_id = record.operation_id;
    if record.fingerprint != command.fingerprint && !matched_previous {
        // Refused as before, and counted on the record with a history entry
        // (coalesced: one growing entry however often it happens). Neither
        // changes the state, the fence or the lease.
        return Decision::refuse_and_count_conflict(
            Error::KeyReused { operation_id },
            NewHistoryEntry {
                event: HistoryEvent::ConflictingClaimRefused,
                from_state: Some(record.state),
                to_state: record.state,
                fence: record.fence,
                attempt: record.attempt,
                detail: String::new(),
            },
        );
    }
    match record.state {
        State::Expired => Decision::refuse(Error::ResultExpired { operation_id }),
        State::Failed if record.on_failed.gets_new_attempt() => {
            retry_after_failure(record, command, now)
        }
        State::Succeeded | State::Failed => Decision::answer(Answer::Claim(ClaimAnswer::Completed)),
        State::InProgress if !record.lease_expired(now) => {
            // The owner's Claim re-sent after a lost reply: only until the
            // owner has written (it writes only after it got the reply), so
            // a token shared by two senders never gives both the fence.
            let resent_by_owner = !command.claim_token.is_empty()
                && command.claim_token == record.claim_token
                && !record.owner_renewed();
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

/// A Claim of a FAILED operation whose policy opted in (`on_failed:
/// new_attempt`): a new attempt, as after a retryable failure, and one more
/// attempt granted when the budget is spent (the history says so), since the
/// caller's Claim after a FAILED answer is its own decision to try again.
/// The failure is replayed instead when the operation deadline has passed,
/// and to a Claim carrying the failed attempt's own claim_token: tokens are
/// fresh per attempt, so that is the Claim which started the failed attempt,
/// re-sent (a late duplicate), not a decision to try again. An attempt the
/// failed one took over whose effect may still be in flight (a terminal
/// Fail does not settle it) is doubted as a retry doubts it: the new owner
/// is told ReconcileFirst. And an operation never runs more attempts than
/// [`MOST_ATTEMPTS_EVER`]: past it the failure is replayed (a new intent
/// needs a new key), so that a caller which keeps failing and claiming again
/// cannot grow one record's history without end.
fn retry_after_failure(
    record: &OperationRecord,
    command: &ClaimCommand,
    now: DateTime<Utc>,
) -> Decision {
    let replay = Decision::answer(Answer::Claim(ClaimAnswer::Completed));
    let resent_by_failed_owner =
        !command.claim_token.is_empty() && command.claim_token == record.claim_token;
    if resent_by_failed_owner
        || operation_deadline_passed(record, now)
        || record.attempt >= MOST_ATTEMPTS_EVER
    {
        return replay;
    }
    let doubt = record
        .taken_over_from
        .filter(|previous| previous.may_still_run(now, command.clock_margin));
    let budget_spent = record.attempt >= record.max_attempts;
    let mut next = start_attempt(record, command, now, doubt);
    next.outcome = None;
    next.outcome_kind = None;
    next.completed_at = None;
    next.retain_until = None;
    if budget_spent {
        next.max_attempts = next.attempt;
    }
    let mut detail = failure_replaced(record);
    if budget_spent {
        detail.push_str("; one more attempt granted");
    }
    let answer = match doubt {
        Some(previous) => {
            detail.push_str("; ");
            detail.push_str(&doubt_detail(&previous));
            ClaimAnswer::ReconcileFirst(Doubt::of(previous, command.clock_margin))
        }
        None => ClaimAnswer::Acquired,
    };
    Decision::transition(
        record,
        next,
        true,
        HistoryEvent::RetriedAfterFailure,
        detail,
        Answer::Claim(answer),
    )
}

/// The RETRIED_AFTER_FAILURE entry's detail: the failure the new attempt
/// replaces, e.g. `replaces the failure of attempt 2 (fence 7, terminal:
/// CARD_DECLINED)`. The error code is the owner's (as the FAILED entry's
/// detail); never the message or metadata.
fn failure_replaced(record: &OperationRecord) -> String {
    let failure = match &record.outcome {
        Some(Outcome::Failed { reason, error }) if error.code.is_empty() => {
            format!(", {}", reason.as_str())
        }
        Some(Outcome::Failed { reason, error }) => {
            format!(", {}: {}", reason.as_str(), error.code)
        }
        _ => String::new(),
    };
    format!(
        "replaces the failure of attempt {} (fence {}{failure})",
        record.attempt, record.fence
    )
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
