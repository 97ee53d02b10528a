//! Tokens: what the hot path's authentication grants, what the CLI creates
//! and lists. A token is stored as its SHA-256 only.

use chrono::{DateTime, TimeDelta, Utc};

use super::super::error::StoreResult;
use super::super::statements::{Connection, NewAuditEntry, Sql, TokenRow, TokenWrite};
use crate::domain::TenantId;

/// A token the store accepted: its tenant, name, scopes and how long it
/// stays valid from now, by the database's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenGrant {
    pub tenant: TenantId,
    pub name: String,
    pub scopes: String,
    /// `None`: the token does not expire.
    pub expires_in: Option<std::time::Duration>,
}

/// A token to store (its hash only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    pub name: String,
    pub token_sha256: [u8; 32],
    pub scopes: String,
    /// From now, by the database's clock; `None`: never expires.
    pub expires_in: Option<TimeDelta>,
}

/// A token as `idemd tenant token list` shows it: never the secret, nor
/// its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenInfo {
    pub name: String,
    pub scopes: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    /// Whether it is past its expiry, by the database's clock.
    pub expired: bool,
}

/// What creating a token did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCreated {
    Created,
    NoSuchTenant,
    /// The tenant has an active token of that name.
    NameTaken,
}

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

    /// What the token's audit entry says of it: its scopes and expiry.
    fn detail(&self) -> String {
        match self.expires_in {
            Some(expires_in) => format!(
                "scopes={} expires_in={}s",
                self.scopes,
                expires_in.num_seconds()
            ),
            None => format!("scopes={}", self.scopes),
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
