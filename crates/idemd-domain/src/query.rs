//! What reads address and what they return: the record with the database's
//! clock, so that every answer about time is computed against that clock.

use chrono::{DateTime, Utc};

use super::filter::OperationFilter;
use super::model::{HistoryEntry, OperationId, OperationRecord, Scope, TenantId};

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
    /// One page of the history, oldest first (empty when not asked for).
    pub history: Vec<HistoryEntry>,
    /// Entries follow the page: ask again after its last sequence.
    pub more_history: bool,
    pub now: DateTime<Utc>,
}

impl Found {
    /// A record read without its history, at the database clock `now`.
    pub fn without_history(record: OperationRecord, now: DateTime<Utc>) -> Self {
        Self {
            record,
            history: Vec::new(),
            more_history: false,
            now,
        }
    }
}

/// Which page of an operation's history a read returns: the entries after
/// sequence `after` (0: from the first), at most `limit` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryPage {
    pub after: u64,
    pub limit: u32,
    /// The operation a page token was made for; a read of another
    /// operation (another incarnation of the scope) refuses the token.
    pub of: Option<OperationId>,
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

/// Whose operations a ListOperations call reads: the caller's own tenant,
/// or, for an admin credential, one tenant by name or every tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TenantSelection {
    Own(TenantId),
    /// Every tenant of that name (revoked ones included: their operations
    /// are still stored); none: an empty page.
    Named(String),
    All,
}

/// The order of a listing, by (created_at, operation_id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListOrder {
    OldestFirst,
    NewestFirst,
}

/// One page of a ListOperations call, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationsQuery {
    /// Its `tenant` term, if any, is already in `tenants`.
    pub filter: OperationFilter,
    pub tenants: TenantSelection,
    pub order: ListOrder,
    pub limit: u32,
    /// Strictly after this (created_at, operation_id) in `order`.
    pub after: Option<(DateTime<Utc>, OperationId)>,
}

/// An operation as listed, with the name of its tenant.
#[derive(Debug, Clone)]
pub struct ListedOperation {
    pub record: OperationRecord,
    pub tenant_name: String,
}

#[derive(Debug, Clone)]
pub struct OperationsPage {
    pub operations: Vec<ListedOperation>,
    pub now: DateTime<Utc>,
}
