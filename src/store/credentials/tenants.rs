//! Tenants as the CLI lists them.

use chrono::{DateTime, Utc};

use super::super::statements::TenantRow;
use crate::domain::TenantId;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantInfo {
    pub id: TenantId,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// Active (unrevoked) tokens, expired ones included.
    pub credentials: u64,
}

impl From<TenantRow> for TenantInfo {
    fn from(row: TenantRow) -> Self {
        Self {
            id: TenantId(row.tenant_id),
            name: row.name,
            created_at: row.created_at,
            revoked_at: row.revoked_at,
            credentials: u64::try_from(row.credentials).unwrap_or(0),
        }
    }
}
