//! The time rules every transition that starts or extends an attempt obeys.

use chrono::{DateTime, TimeDelta, Utc};

use crate::model::OperationRecord;

/// A lease never outlives the attempt it belongs to: the one place this rule
/// is written (first claims, new attempts and renewals all go through it).
pub(super) fn lease_within_attempt(lease: TimeDelta, attempt_time_left: TimeDelta) -> TimeDelta {
    lease.min(attempt_time_left)
}

pub(super) fn operation_deadline_passed(record: &OperationRecord, now: DateTime<Utc>) -> bool {
    record
        .operation_deadline_at
        .is_some_and(|deadline| deadline <= now)
}
