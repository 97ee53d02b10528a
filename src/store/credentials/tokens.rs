//! Tokens: stored with the audit entry that names them, listed as the CLI
//! shows them.

use chrono::{DateTime, Utc};

use super::super::access::{NewToken, TokenInfo};
use super::super::error::StoreResult;
use super::super::statements::{Connection, NewAuditEntry, Sql, TokenRow, TokenWrite};
use crate::domain::TenantId;

impl NewToken {
    /// Stores the token for `tenant`, with `entry` (an audit entry by its
    /// actor, of its tenant) naming it and saying what it grants.
    pub(super) async fn insert<D: Sql>(
        &self,
        connection: &mut Connection<D>,
        tenant: TenantId,
        entry: NewAuditEntry<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        D::insert_token(connection, tenant, &self.write(now), now).await?;
        let detail = self.detail();
        let entry = NewAuditEntry {
            target: Some(&self.name),
            detail: Some(&detail),
            ..entry
        };
        D::insert_audit(connection, &entry, now).await
    }

    /// The token as stored, its expiry made absolute at `now`.
    fn write(&self, now: DateTime<Utc>) -> TokenWrite<'_> {
        TokenWrite {
            token_sha256: &self.token_sha256,
            name: &self.name,
            scopes: &self.scopes,
            expires_at: self.expires_in.map(|expires_in| now + expires_in),
        }
    }
}

impl TokenInfo {
    /// Expired by `now`, the database's clock.
    pub(super) fn from_row(row: TokenRow, now: DateTime<Utc>) -> Self {
        Self {
            expired: row.expires_at.is_some_and(|at| at <= now),
            name: row.name,
            scopes: row.scopes,
            created_at: row.created_at,
            expires_at: row.expires_at,
            last_used_at: row.last_used_at,
        }
    }
}
