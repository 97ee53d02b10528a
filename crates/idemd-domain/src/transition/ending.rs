//! How an operation ends without a new attempt: finished with an outcome,
//! FAILED when its budget or deadline is spent, or UNKNOWN while an attempt
//! it took over may still be in flight.

use chrono::{DateTime, SecondsFormat, Utc};

use super::decision::{Answer, ClaimAnswer, Decision};
use crate::model::{
    ErrorReport, FailureReason, HistoryEvent, OperationRecord, Outcome, PreviousAttempt, State,
};

/// The record of an operation that ends no attempt of its own but still
/// doubts `previous`: UNKNOWN until that attempt's deadline, as a decline
/// after a takeover leaves it.
pub(super) fn keep_doubt(
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

pub(super) fn end_without_new_attempt(
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

pub(super) fn finish(
    record: &OperationRecord,
    outcome: Outcome,
    now: DateTime<Utc>,
) -> OperationRecord {
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
