//! What reads address and what they return: the record with the database's
//! clock, so that every answer about time is computed against that clock.

use chrono::{DateTime, Utc};

use super::model::{HistoryEntry, OperationId, OperationRecord, Scope};

/// Which operation a read or a transition addresses, always within a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Scope(Scope),
    Id(OperationId),
}

/// A record as read, with its history when asked for, and the database clock
/// of the read.
#[derive(Debug, Clone)]
pub struct Found {
    pub record: OperationRecord,
    pub history: Vec<HistoryEntry>,
    pub now: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnresolvedQuery {
    pub operation: Option<String>,
    pub limit: u32,
    /// Strictly after this (created_at, operation_id), oldest first.
    pub after: Option<(DateTime<Utc>, OperationId)>,
}

#[derive(Debug, Clone)]
pub struct UnresolvedPage {
    pub records: Vec<OperationRecord>,
    pub now: DateTime<Utc>,
}
