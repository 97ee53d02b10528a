//! The text of the statements on tenants, their tokens and the audit log,
//! and the rows they read: the store keeps scopes as text and knows no more
//! of them (they are `auth::scopes`' names).

use chrono::{DateTime, Utc};
use sqlx::FromRow;

pub(crate) const AUTHENTICATE: &str = "SELECT tenants.tenant_id, tenant_tokens.name, tenant_tokens.scopes, \
     tenant_tokens.expires_at \
     FROM tenant_tokens JOIN tenants USING (tenant_id) \
     WHERE token_sha256 = $1 AND tenant_tokens.revoked_at IS NULL \
       AND tenants.revoked_at IS NULL \
       AND (tenant_tokens.expires_at IS NULL OR tenant_tokens.expires_at > $2)";

pub(super) const ACTIVE_TENANT: &str =
    "SELECT tenant_id FROM tenants WHERE name = $1 AND revoked_at IS NULL";

pub(super) const INSERT_TENANT: &str = "INSERT INTO tenants (name, created_at) VALUES ($1, $2) \
     ON CONFLICT (name) WHERE revoked_at IS NULL DO NOTHING RETURNING tenant_id";

pub(super) const INSERT_TOKEN: &str = "INSERT INTO tenant_tokens \
     (token_sha256, tenant_id, created_at, name, scopes, expires_at) \
     VALUES ($1, $2, $3, $4, $5, $6)";

pub(super) const ACTIVE_TOKEN_NAMED: &str = "SELECT count(*) FROM tenant_tokens \
     WHERE tenant_id = $1 AND name = $2 AND revoked_at IS NULL";

pub(super) const REVOKE_TENANT: &str = "UPDATE tenants SET revoked_at = $2 \
     WHERE name = $1 AND revoked_at IS NULL RETURNING tenant_id";

pub(super) const REVOKE_TENANT_TOKENS: &str = "UPDATE tenant_tokens SET revoked_at = $2 \
     WHERE tenant_id = $1 AND revoked_at IS NULL";

pub(super) const REVOKE_TOKEN: &str = "UPDATE tenant_tokens SET revoked_at = $3 \
     WHERE tenant_id = $1 AND name = $2 AND revoked_at IS NULL";

pub(super) const LIST_TOKENS: &str = "SELECT COALESCE(name, 'unnamed') AS name, scopes, created_at, \
     expires_at, last_used_at \
     FROM tenant_tokens WHERE tenant_id = $1 AND revoked_at IS NULL \
     ORDER BY created_at, name";

pub(super) const LIST_TENANTS: &str = "SELECT tenant_id, name, created_at, revoked_at, \
     (SELECT count(*) FROM tenant_tokens \
      WHERE tenant_tokens.tenant_id = tenants.tenant_id \
        AND tenant_tokens.revoked_at IS NULL) AS credentials \
     FROM tenants ORDER BY tenant_id";

pub(super) const MARK_USED: &str = "UPDATE tenant_tokens SET last_used_at = $2 \
     WHERE token_sha256 = $1 AND (last_used_at IS NULL OR last_used_at < $2)";

pub(super) const INSERT_AUDIT: &str = "INSERT INTO audit_log \
     (at, actor, action, tenant, target, detail, reason) VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// An admin action on an operation: the tenant is named from the
/// operation's tenant id ($4), as every audit row names tenants.
pub(super) const INSERT_OPERATION_AUDIT: &str = "INSERT INTO audit_log \
     (at, actor, action, tenant, target, detail, reason) \
     SELECT $1, $2, $3, name, $5, $6, $7 FROM tenants WHERE tenant_id = $4";

pub(super) const AUDIT_LOG: &str = "SELECT at, actor, action, tenant, target, detail, reason FROM audit_log \
     WHERE ($1 IS NULL OR tenant = $1) ORDER BY audit_id DESC LIMIT $2";

pub(super) const ACTIVE_TOKENS: &str = "SELECT name, token_sha256, scopes, expires_at FROM tenant_tokens \
     WHERE tenant_id = $1 AND revoked_at IS NULL";

pub(super) const TOKEN_BY_HASH: &str = "SELECT tenant_id, revoked_at FROM tenant_tokens \
     WHERE token_sha256 = $1";

pub(super) const UPDATE_TOKEN: &str = "UPDATE tenant_tokens SET scopes = $2, expires_at = $3 \
     WHERE token_sha256 = $1";

pub(super) const REVOKE_TOKEN_BY_HASH: &str = "UPDATE tenant_tokens SET revoked_at = $2 \
     WHERE token_sha256 = $1 AND revoked_at IS NULL";

pub(super) const PRUNE_AUDIT: &str = "DELETE FROM audit_log WHERE at < $1";

#[derive(FromRow)]
pub(crate) struct GrantRow {
    pub(crate) tenant_id: i64,
    pub(crate) name: Option<String>,
    pub(crate) scopes: String,
    pub(crate) expires_at: Option<DateTime<Utc>>,
}

#[derive(FromRow)]
pub(crate) struct TokenRow {
    pub(crate) name: String,
    pub(crate) scopes: String,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) expires_at: Option<DateTime<Utc>>,
    pub(crate) last_used_at: Option<DateTime<Utc>>,
}

#[derive(FromRow)]
pub(crate) struct StoredToken {
    pub(crate) name: Option<String>,
    pub(crate) token_sha256: Vec<u8>,
    pub(crate) scopes: String,
    pub(crate) expires_at: Option<DateTime<Utc>>,
}

#[derive(FromRow)]
pub(crate) struct HashOwner {
    pub(crate) tenant_id: i64,
    pub(crate) revoked_at: Option<DateTime<Utc>>,
}

#[derive(FromRow)]
pub(crate) struct TenantRow {
    pub(crate) tenant_id: i64,
    pub(crate) name: String,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) revoked_at: Option<DateTime<Utc>>,
    pub(crate) credentials: i64,
}

#[derive(FromRow)]
pub(crate) struct AuditRow {
    pub(crate) at: DateTime<Utc>,
    pub(crate) actor: String,
    pub(crate) action: String,
    pub(crate) tenant: Option<String>,
    pub(crate) target: Option<String>,
    pub(crate) detail: Option<String>,
    pub(crate) reason: Option<String>,
}

/// A token as [`INSERT_TOKEN`] and [`UPDATE_TOKEN`] write it.
pub(crate) struct TokenWrite<'a> {
    pub(crate) token_sha256: &'a [u8],
    pub(crate) name: &'a str,
    pub(crate) scopes: &'a str,
    /// Absolute: a relative expiry is added to the clock before.
    pub(crate) expires_at: Option<DateTime<Utc>>,
}

/// One audit entry, as [`INSERT_AUDIT`] binds it.
pub(crate) struct NewAuditEntry<'a> {
    pub(crate) actor: &'a str,
    pub(crate) reason: Option<&'a str>,
    pub(crate) action: &'a str,
    pub(crate) tenant: Option<&'a str>,
    pub(crate) target: Option<&'a str>,
    pub(crate) detail: Option<&'a str>,
}
