//! The audit log: an entry by its actor, written in the same transaction
//! as the change it records, and read back for the CLI.

use super::super::access::{Actor, AuditEntry};
use super::super::statements::{AuditRow, NewAuditEntry};

impl Actor {
    /// An entry by this actor for `action`; the rest is set by the caller.
    pub(in crate::store) fn entry<'a>(&'a self, action: &'a str) -> NewAuditEntry<'a> {
        NewAuditEntry {
            actor: &self.name,
            reason: self.reason.as_deref(),
            action,
            tenant: None,
            target: None,
            detail: None,
        }
    }
}

impl From<AuditRow> for AuditEntry {
    fn from(row: AuditRow) -> Self {
        Self {
            at: row.at,
            actor: row.actor,
            action: row.action,
            tenant: row.tenant,
            target: row.target,
            detail: row.detail,
            reason: row.reason,
        }
    }
}
