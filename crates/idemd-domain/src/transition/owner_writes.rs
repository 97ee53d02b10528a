//! The owner's writes: Renew, Complete and Fail, each through the checks
//! every owner write passes (a re-sent write, a stale fence, a terminal
//! record, a passed attempt deadline).

use chrono::{DateTime, TimeDelta, Utc};

use super::deadlines::lease_within_attempt;
use super::decision::{Answer, Decision};
use super::ending::finish;
use super::refusal::{refusal_history, refuse, refuse_stale, refused};
use crate::command::{CompleteCommand, FailCommand, FailDisposition, RenewCommand};
use crate::error::Refusal;
use crate::model::{
    FailureReason, Fence, HistoryEvent, OperationRecord, Outcome, RequestDigest, State,
    WriteAnswer, WriteReceipt, Writer,
};

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
        renewed_under_fence: Some(record.fence),
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
