//! What idemd holds about the operation, read for one Diagnose call: the
//! record, its history, the database clock, the new-key watch's counts and
//! the policy in force. Built by the service; read here only.

use chrono::{DateTime, TimeDelta, Utc};

use crate::model::{Fingerprint, HistoryEntry, HistoryEvent, OperationRecord, Scope};

#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub scope: &'a Scope,
    /// None: nothing is stored under the scope.
    pub record: Option<&'a OperationRecord>,
    /// Oldest first (the whole of it: histories are capped).
    pub history: &'a [HistoryEntry],
    /// The database clock when the call arrived.
    pub now: DateTime<Utc>,
    /// The server's clock margin: an attempt may still be in flight until
    /// its deadline plus this.
    pub clock_margin: TimeDelta,
    /// Operations of the tenant and name created lately with this request.
    pub same_request_keys: u32,
    /// The new-key watch's threshold was reached.
    pub suspected_new_key_retry: bool,
    /// The retention ceiling the operation policy sets for the name; None
    /// when no policy bounds it (the server's own maximum applies).
    pub retention_ceiling: Option<TimeDelta>,
    pub server_max_retention: TimeDelta,
}

impl Facts<'_> {
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        self.record.map(|record| record.fingerprint)
    }

    /// How many events of a kind the history records (coalesced entries
    /// counted by their count).
    pub fn count(&self, event: HistoryEvent) -> u64 {
        self.history
            .iter()
            .filter(|entry| entry.event == event.as_str())
            .map(|entry| entry.count.max(1))
            .sum()
    }

    /// How many owners the operation had: each Claim that made one.
    pub fn owners(&self) -> u64 {
        [
            HistoryEvent::Claimed,
            HistoryEvent::TakenOver,
            HistoryEvent::RetryStarted,
            HistoryEvent::RetriedAfterFailure,
        ]
        .into_iter()
        .map(|event| self.count(event))
        .sum()
    }

    /// When the last attempt's effect can no longer be in flight.
    pub fn settles_at(&self) -> Option<DateTime<Utc>> {
        let record = self.record?;
        let last = record.attempt_deadline_at?;
        let taken_over = record
            .taken_over_from
            .as_ref()
            .and_then(|previous| previous.attempt_deadline_at);
        Some(taken_over.map_or(last, |earlier| earlier.max(last)) + self.clock_margin)
    }
}
