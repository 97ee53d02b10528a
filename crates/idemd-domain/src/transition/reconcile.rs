//! Reconcile: a reconciler settles an operation whose outcome is unknown.

use chrono::{DateTime, Utc};

use super::decision::{Answer, Decision};
use super::ending::finish;
use super::refusal::{refuse, refuse_stale};
use crate::command::{ReconcileCommand, Resolution};
use crate::error::Refusal;
use crate::model::{
    DRAWN_FENCE, FailureReason, HistoryEvent, OperationRecord, Outcome, State, WriteAnswer,
    WriteReceipt, Writer,
};

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
