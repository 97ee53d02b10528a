//! Tenants as the CLI lists them.

use super::super::access::TenantInfo;
use super::super::statements::TenantRow;
use crate::domain::TenantId;

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
