//! Forget: an admin turns an ended operation into a tombstone before its
//! retention ends (a legal deletion request, a poisoned result).

use chrono::{DateTime, Utc};

use super::decision::{Answer, Decision};
use super::refusal::{refuse, refuse_stale};
use super::sweep::tombstone;
use crate::command::ForgetCommand;
use crate::error::Refusal;
use crate::model::{HistoryEvent, OperationRecord, State};

/// Only an ended operation (SUCCEEDED, FAILED) may be forgotten, and only at
/// the fence the admin saw: its record becomes the very tombstone retention
/// makes ([`tombstone`]), so the scope answers Claims RESULT_EXPIRED, never
/// a new execution. An unresolved operation is refused: its effect is still
/// in question, and forgetting it would hide that.
pub fn decide_forget(
    record: &OperationRecord,
    command: &ForgetCommand,
    now: DateTime<Utc>,
) -> Decision {
    if command.expected_fence != record.fence {
        return refuse_stale(record, command.expected_fence, "forget");
    }
    match record.state {
        State::Succeeded | State::Failed => {
            let next = tombstone(record, now, command.tombstone_retention);
            Decision::transition(
                record,
                next,
                false,
                HistoryEvent::Forgotten,
                command.reason.clone(),
                Answer::Written,
            )
        }
        State::Expired => refuse(Refusal::AlreadyForgotten, record),
        State::InProgress | State::RetryWait | State::Unknown => {
            refuse(Refusal::OperationUnresolved, record)
        }
    }
}
