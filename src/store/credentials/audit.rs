//! Who changed what: the audit log's entries, each written in the same
//! transaction as the change it records.

use chrono::{DateTime, Utc};

use super::super::statements::{AuditRow, NewAuditEntry};

/// Who changes something, and why: what the audit entry records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// `cli:USER@HOST`, `token:NAME`, `certificate:IDENTITY`.
    pub name: String,
    pub reason: Option<String>,
}

impl Actor {
    /// idemd itself (the `--dev` tenant), or code with no person behind it.
    pub fn system() -> Self {
        Self {
            name: "idemd".into(),
            reason: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub at: DateTime<Utc>,
    pub actor: String,
    pub action: String,
    pub tenant: Option<String>,
    pub target: Option<String>,
    pub detail: Option<String>,
    pub reason: Option<String>,
}

impl Actor {
    /// An entry by this actor for `action`; the rest is set by the caller.
    pub(super) fn entry<'a>(&'a self, action: &'a str) -> NewAuditEntry<'a> {
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
