//! Retention: what the sweeper does to a record it found due.

use chrono::{DateTime, TimeDelta, Utc};

use super::deadlines::operation_deadline_passed;
use super::decision::{Answer, Decision};
use super::ending::{end_without_new_attempt, keep_doubt};
#[cfg(doc)]
use crate::command::ClaimCommand;
use crate::model::{FailureReason, HistoryEvent, OperationRecord, State};

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
            let next = tombstone(record, now, tombstone_retention);
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

/// The tombstone an ended record becomes: scope, fingerprint, operation_id
/// and fence kept, the result or error dropped, kept itself for
/// `tombstone_retention` from `now`. One for retention and Forget alike, so a
/// forgotten scope answers Claims exactly as an expired one
/// (RESULT_EXPIRED).
pub(super) fn tombstone(
    record: &OperationRecord,
    now: DateTime<Utc>,
    tombstone_retention: TimeDelta,
) -> OperationRecord {
    OperationRecord {
        state: State::Expired,
        outcome: None,
        retain_until: Some(now + tombstone_retention),
        updated_at: now,
        ..record.clone()
    }
}
