//! Who may call, as the store keeps it: tenants, their bearer tokens (each
//! stored as its SHA-256 with a name, scopes, an optional expiry and a
//! last-used time), the audit log, and declarations to converge to; and the
//! [`Credentials`] contract the CLI administers them through. Values only:
//! the flows are `credentials/`, over the statements of `statements/`. Scopes
//! are the comma-separated names of `auth::scopes`, kept as text here: the
//! store knows no more of them.

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, TimeDelta, Utc};

use crate::domain::{Result, TenantId};

// Tokens.

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
    /// What the token's audit entry says of it: its scopes and expiry.
    pub(super) fn detail(&self) -> String {
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

// Tenants and the audit log.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantInfo {
    pub id: TenantId,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// Active (unrevoked) tokens, expired ones included.
    pub credentials: u64,
}

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

// Declarations (`idemd tenant apply`).

/// A tenant as a declaration file states it ([`Credentials::apply_tenant`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredTenant {
    pub name: String,
    pub tokens: Vec<DeclaredToken>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredToken {
    pub name: String,
    pub token_sha256: [u8; 32],
    pub scopes: String,
    /// Absolute, so that applying the same file twice declares the same.
    pub expires_at: Option<DateTime<Utc>>,
}

/// What converging one tenant changed; all empty: nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Converged {
    pub tenant_created: bool,
    pub created: Vec<String>,
    /// Same token, other scopes or expiry.
    pub updated: Vec<String>,
    /// Revoked: replaced by another token of the same name, or (with
    /// prune) not declared.
    pub revoked: Vec<String>,
}

impl Converged {
    pub fn changed(&self) -> bool {
        self.tenant_created
            || !self.created.is_empty()
            || !self.updated.is_empty()
            || !self.revoked.is_empty()
    }
}

impl DeclaredToken {
    /// Whether `stored`, the same token, has other scopes or another
    /// expiry (to the microsecond, as the databases keep it).
    pub(super) fn differs_from(&self, scopes: &str, expires_at: Option<DateTime<Utc>>) -> bool {
        let micros = |at: DateTime<Utc>| at.trunc_subsecs(6);
        scopes != self.scopes || expires_at.map(micros) != self.expires_at.map(micros)
    }

    /// What the token's audit entry says of it.
    pub(super) fn detail(&self) -> String {
        match self.expires_at {
            Some(expires_at) => format!(
                "scopes={} expires_at={}",
                self.scopes,
                expires_at.format("%Y-%m-%dT%H:%M:%SZ")
            ),
            None => format!("scopes={}", self.scopes),
        }
    }
}

/// The administration of tenants and credentials: the CLI's, not the hot
/// path's (that is [`super::Store::authenticate`]).
#[async_trait]
pub trait Credentials: Send + Sync {
    /// Creates a tenant and its first token; `Err` (INVALID_ARGUMENT on
    /// `name`) when an active tenant has that name.
    async fn create_tenant_with(
        &self,
        name: &str,
        first: &NewToken,
        actor: &Actor,
    ) -> Result<TenantId>;

    /// Revokes the active tenant of that name and all its tokens.
    async fn revoke_tenant_as(&self, name: &str, actor: &Actor) -> Result<bool>;

    async fn create_token(
        &self,
        tenant: &str,
        token: &NewToken,
        actor: &Actor,
    ) -> Result<TokenCreated>;

    /// Revokes the tenant's active token of that name.
    async fn revoke_token(&self, tenant: &str, name: &str, actor: &Actor) -> Result<bool>;

    /// The active tenant's unrevoked tokens; `None`: no such tenant.
    async fn list_tokens(&self, tenant: &str) -> Result<Option<Vec<TokenInfo>>>;

    /// Every tenant, revoked ones included, oldest first.
    async fn list_tenants(&self) -> Result<Vec<TenantInfo>>;

    /// The last `limit` entries, of one tenant or all, oldest first.
    async fn audit_log(&self, tenant: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>>;

    /// Records an entry that goes with no change of these tables.
    async fn record_audit(
        &self,
        actor: &Actor,
        action: &str,
        tenant: Option<&str>,
        detail: Option<&str>,
    ) -> Result<()>;

    /// Deletes entries older than `age`; how many.
    async fn prune_audit_log(&self, age: TimeDelta) -> Result<u64>;

    /// Converges one tenant to `declared`, in one transaction: creates the
    /// tenant and the tokens it lacks, updates a token's scopes or expiry,
    /// replaces a token whose hash changed under the same name, and (with
    /// `prune`) revokes its active tokens the declaration does not name.
    /// Applying the same declaration again changes nothing. A hash that is
    /// stored already under another name, tenant, or revoked, is refused
    /// (INVALID_ARGUMENT): a revoked token never comes back.
    async fn apply_tenant(
        &self,
        declared: &DeclaredTenant,
        prune: bool,
        actor: &Actor,
    ) -> Result<Converged>;
}
