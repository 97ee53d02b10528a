//! Tenants, their credentials and the audit log, for both databases. A
//! tenant keeps its id for ever and holds any number of bearer tokens, each
//! stored as its SHA-256 with a name, scopes (the comma-separated names of
//! `auth::scopes`, kept as text here: the store knows no more of them), an
//! optional expiry and a last-used time. Every change is written in the same
//! transaction as its audit entry, so the log never misses one nor records
//! one that did not happen.

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};
use tracing::{Instrument, instrument};

use super::error::StoreError;
use super::shared::Shared;
use crate::domain::{Result, TenantId};

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantInfo {
    pub id: TenantId,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// Active (unrevoked) tokens, expired ones included.
    pub credentials: u64,
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

/// What creating a token did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCreated {
    Created,
    NoSuchTenant,
    /// The tenant has an active token of that name.
    NameTaken,
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

pub(crate) const AUTHENTICATE: &str = "SELECT tenants.tenant_id, tenant_tokens.name, tenant_tokens.scopes, \
     tenant_tokens.expires_at \
     FROM tenant_tokens JOIN tenants USING (tenant_id) \
     WHERE token_sha256 = $1 AND tenant_tokens.revoked_at IS NULL \
       AND tenants.revoked_at IS NULL \
       AND (tenant_tokens.expires_at IS NULL OR tenant_tokens.expires_at > $2)";

const ACTIVE_TENANT: &str = "SELECT tenant_id FROM tenants WHERE name = $1 AND revoked_at IS NULL";

const INSERT_TENANT: &str = "INSERT INTO tenants (name, created_at) VALUES ($1, $2) \
     ON CONFLICT (name) WHERE revoked_at IS NULL DO NOTHING RETURNING tenant_id";

const INSERT_TOKEN: &str = "INSERT INTO tenant_tokens \
     (token_sha256, tenant_id, created_at, name, scopes, expires_at) \
     VALUES ($1, $2, $3, $4, $5, $6)";

const ACTIVE_TOKEN_NAMED: &str = "SELECT count(*) FROM tenant_tokens \
     WHERE tenant_id = $1 AND name = $2 AND revoked_at IS NULL";

const REVOKE_TENANT: &str = "UPDATE tenants SET revoked_at = $2 \
     WHERE name = $1 AND revoked_at IS NULL RETURNING tenant_id";

const REVOKE_TENANT_TOKENS: &str = "UPDATE tenant_tokens SET revoked_at = $2 \
     WHERE tenant_id = $1 AND revoked_at IS NULL";

const REVOKE_TOKEN: &str = "UPDATE tenant_tokens SET revoked_at = $3 \
     WHERE tenant_id = $1 AND name = $2 AND revoked_at IS NULL";

const LIST_TOKENS: &str = "SELECT COALESCE(name, 'unnamed') AS name, scopes, created_at, \
     expires_at, last_used_at \
     FROM tenant_tokens WHERE tenant_id = $1 AND revoked_at IS NULL \
     ORDER BY created_at, name";

const LIST_TENANTS: &str = "SELECT tenant_id, name, created_at, revoked_at, \
     (SELECT count(*) FROM tenant_tokens \
      WHERE tenant_tokens.tenant_id = tenants.tenant_id \
        AND tenant_tokens.revoked_at IS NULL) AS credentials \
     FROM tenants ORDER BY tenant_id";

const MARK_USED: &str = "UPDATE tenant_tokens SET last_used_at = $2 \
     WHERE token_sha256 = $1 AND (last_used_at IS NULL OR last_used_at < $2)";

const INSERT_AUDIT: &str = "INSERT INTO audit_log \
     (at, actor, action, tenant, target, detail, reason) VALUES ($1, $2, $3, $4, $5, $6, $7)";

const AUDIT_LOG: &str = "SELECT at, actor, action, tenant, target, detail, reason FROM audit_log \
     WHERE ($1 IS NULL OR tenant = $1) ORDER BY audit_id DESC LIMIT $2";

const ACTIVE_TOKENS: &str = "SELECT name, token_sha256, scopes, expires_at FROM tenant_tokens \
     WHERE tenant_id = $1 AND revoked_at IS NULL";

const TOKEN_BY_HASH: &str = "SELECT tenant_id, revoked_at FROM tenant_tokens \
     WHERE token_sha256 = $1";

const UPDATE_TOKEN: &str = "UPDATE tenant_tokens SET scopes = $2, expires_at = $3 \
     WHERE token_sha256 = $1";

const REVOKE_TOKEN_BY_HASH: &str = "UPDATE tenant_tokens SET revoked_at = $2 \
     WHERE token_sha256 = $1 AND revoked_at IS NULL";

const PRUNE_AUDIT: &str = "DELETE FROM audit_log WHERE at < $1";

#[derive(FromRow)]
struct GrantRow {
    tenant_id: i64,
    name: Option<String>,
    scopes: String,
    expires_at: Option<DateTime<Utc>>,
}

#[derive(FromRow)]
struct TokenRow {
    name: String,
    scopes: String,
    created_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    last_used_at: Option<DateTime<Utc>>,
}

#[derive(FromRow)]
struct StoredToken {
    name: Option<String>,
    token_sha256: Vec<u8>,
    scopes: String,
    expires_at: Option<DateTime<Utc>>,
}

#[derive(FromRow)]
struct HashOwner {
    tenant_id: i64,
    revoked_at: Option<DateTime<Utc>>,
}

#[derive(FromRow)]
struct TenantRow {
    tenant_id: i64,
    name: String,
    created_at: DateTime<Utc>,
    revoked_at: Option<DateTime<Utc>>,
    credentials: i64,
}

#[derive(FromRow)]
struct AuditRow {
    at: DateTime<Utc>,
    actor: String,
    action: String,
    tenant: Option<String>,
    target: Option<String>,
    detail: Option<String>,
    reason: Option<String>,
}

/// One audit entry, as [`INSERT_AUDIT`] binds it.
struct Entry<'a> {
    action: &'a str,
    tenant: Option<&'a str>,
    target: Option<&'a str>,
    detail: Option<String>,
}

/// The queries above, for every dialect whose database binds and reads
/// what they use (both do).
pub(crate) trait CredentialQueries: Shared {
    fn authenticate_token(
        &self,
        token_sha256: &[u8; 32],
    ) -> impl Future<Output = Result<Option<TokenGrant>>> + Send;

    fn active_tenant(&self, name: &str) -> impl Future<Output = Result<Option<TenantId>>> + Send;

    fn mark_tokens_used(&self, hashes: &[[u8; 32]]) -> impl Future<Output = Result<()>> + Send;
}

impl<D> CredentialQueries for D
where
    D: Shared,
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'q> i64: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q str: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q [u8]: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> D::Stamp: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<&'q str>: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<D::Stamp>: Encode<'q, D::Db> + Type<D::Db>,
    GrantRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    (i64,): for<'r> FromRow<'r, <D::Db as Database>::Row>,
    (DateTime<Utc>,): for<'r> FromRow<'r, <D::Db as Database>::Row>,
{
    async fn authenticate_token(&self, token_sha256: &[u8; 32]) -> Result<Option<TokenGrant>> {
        let found = async {
            let (now,): (DateTime<Utc>,) = sqlx::query_as(D::CLOCK)
                .fetch_one(self.readers())
                .instrument(D::statement("SELECT clock"))
                .await?;
            let row: Option<GrantRow> = sqlx::query_as(AUTHENTICATE)
                .bind(&token_sha256[..])
                .bind(D::stamp(now))
                .fetch_optional(self.readers())
                .instrument(D::statement("SELECT tenant_tokens"))
                .await?;
            Ok::<_, sqlx::Error>(row.map(|row| {
                TokenGrant {
                    tenant: TenantId(row.tenant_id),
                    name: row.name.unwrap_or_else(|| "unnamed".into()),
                    scopes: row.scopes,
                    expires_in: row
                        .expires_at
                        .map(|expires_at| (expires_at - now).to_std().unwrap_or_default()),
                }
            }))
        };
        found.await.map_err(|error| D::translate(error.into()))
    }

    async fn active_tenant(&self, name: &str) -> Result<Option<TenantId>> {
        let tenant: Option<(i64,)> = sqlx::query_as(ACTIVE_TENANT)
            .bind(name)
            .fetch_optional(self.readers())
            .instrument(D::statement("SELECT tenants"))
            .await
            .map_err(|error| D::translate(error.into()))?;
        Ok(tenant.map(|(id,)| TenantId(id)))
    }

    async fn mark_tokens_used(&self, hashes: &[[u8; 32]]) -> Result<()> {
        if hashes.is_empty() {
            return Ok(());
        }
        let marked = async {
            let mut transaction = self.begin_write().await?;
            let now = D::database_now(&mut transaction).await?;
            for hash in hashes {
                sqlx::query(MARK_USED)
                    .bind(&hash[..])
                    .bind(D::stamp(now))
                    .execute(&mut *transaction)
                    .instrument(D::statement("UPDATE tenant_tokens last_used_at"))
                    .await?;
            }
            self.commit(transaction).await
        };
        marked.await.map_err(D::translate)
    }
}

#[async_trait]
impl<D> Credentials for D
where
    D: Shared,
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'q> i64: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q str: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q [u8]: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> D::Stamp: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<&'q str>: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<D::Stamp>: Encode<'q, D::Db> + Type<D::Db>,
    TokenRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    StoredToken: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    HashOwner: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    TenantRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    AuditRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    (i64,): for<'r> FromRow<'r, <D::Db as Database>::Row>,
    (DateTime<Utc>,): for<'r> FromRow<'r, <D::Db as Database>::Row>,
{
    #[instrument(name = "store.create_tenant", skip_all, fields(db.system = D::SYSTEM))]
    async fn create_tenant_with(
        &self,
        name: &str,
        first: &NewToken,
        actor: &Actor,
    ) -> Result<TenantId> {
        let created = async {
            let mut transaction = self.begin_write().await?;
            let now = D::database_now(&mut transaction).await?;
            let tenant: Option<i64> = sqlx::query_scalar(INSERT_TENANT)
                .bind(name)
                .bind(D::stamp(now))
                .fetch_optional(&mut *transaction)
                .instrument(D::statement("INSERT tenants"))
                .await?;
            let Some(tenant) = tenant else {
                return Ok(None);
            };
            insert_token::<D>(&mut transaction, TenantId(tenant), first, now).await?;
            let entry = Entry {
                action: "tenant.create",
                tenant: Some(name),
                target: Some(&first.name),
                detail: Some(token_detail(first)),
            };
            audit::<D>(&mut transaction, actor, &entry, now).await?;
            self.commit(transaction).await?;
            Ok::<_, StoreError>(Some(TenantId(tenant)))
        };
        created
            .await
            .map_err(D::translate)?
            .ok_or_else(|| crate::domain::Error::invalid("name", "an active tenant has this name"))
    }

    #[instrument(name = "store.revoke_tenant", skip_all, fields(db.system = D::SYSTEM))]
    async fn revoke_tenant_as(&self, name: &str, actor: &Actor) -> Result<bool> {
        let revoked = async {
            let mut transaction = self.begin_write().await?;
            let now = D::database_now(&mut transaction).await?;
            let tenant: Option<i64> = sqlx::query_scalar(REVOKE_TENANT)
                .bind(name)
                .bind(D::stamp(now))
                .fetch_optional(&mut *transaction)
                .instrument(D::statement("UPDATE tenants"))
                .await?;
            if let Some(tenant) = tenant {
                sqlx::query(REVOKE_TENANT_TOKENS)
                    .bind(tenant)
                    .bind(D::stamp(now))
                    .execute(&mut *transaction)
                    .instrument(D::statement("UPDATE tenant_tokens"))
                    .await?;
                let entry = Entry {
                    action: "tenant.revoke",
                    tenant: Some(name),
                    target: None,
                    detail: None,
                };
                audit::<D>(&mut transaction, actor, &entry, now).await?;
            }
            self.commit(transaction).await?;
            Ok::<_, StoreError>(tenant.is_some())
        };
        revoked.await.map_err(D::translate)
    }

    #[instrument(name = "store.create_token", skip_all, fields(db.system = D::SYSTEM))]
    async fn create_token(
        &self,
        tenant: &str,
        token: &NewToken,
        actor: &Actor,
    ) -> Result<TokenCreated> {
        let created = async {
            let mut transaction = self.begin_write().await?;
            let now = D::database_now(&mut transaction).await?;
            let Some(tenant_id) = tenant_in::<D>(&mut transaction, tenant).await? else {
                return Ok(TokenCreated::NoSuchTenant);
            };
            let (taken,): (i64,) = sqlx::query_as(ACTIVE_TOKEN_NAMED)
                .bind(tenant_id.0)
                .bind(token.name.as_str())
                .fetch_one(&mut *transaction)
                .instrument(D::statement("SELECT tenant_tokens"))
                .await?;
            if taken > 0 {
                return Ok(TokenCreated::NameTaken);
            }
            insert_token::<D>(&mut transaction, tenant_id, token, now).await?;
            let entry = Entry {
                action: "token.create",
                tenant: Some(tenant),
                target: Some(&token.name),
                detail: Some(token_detail(token)),
            };
            audit::<D>(&mut transaction, actor, &entry, now).await?;
            self.commit(transaction).await?;
            Ok::<_, StoreError>(TokenCreated::Created)
        };
        created.await.map_err(D::translate)
    }

    #[instrument(name = "store.revoke_token", skip_all, fields(db.system = D::SYSTEM))]
    async fn revoke_token(&self, tenant: &str, name: &str, actor: &Actor) -> Result<bool> {
        let revoked = async {
            let mut transaction = self.begin_write().await?;
            let now = D::database_now(&mut transaction).await?;
            let Some(tenant_id) = tenant_in::<D>(&mut transaction, tenant).await? else {
                return Ok(false);
            };
            let done = sqlx::query(REVOKE_TOKEN)
                .bind(tenant_id.0)
                .bind(name)
                .bind(D::stamp(now))
                .execute(&mut *transaction)
                .instrument(D::statement("UPDATE tenant_tokens"))
                .await?;
            let revoked = D::rows_affected(&done) > 0;
            if revoked {
                let entry = Entry {
                    action: "token.revoke",
                    tenant: Some(tenant),
                    target: Some(name),
                    detail: None,
                };
                audit::<D>(&mut transaction, actor, &entry, now).await?;
            }
            self.commit(transaction).await?;
            Ok::<_, StoreError>(revoked)
        };
        revoked.await.map_err(D::translate)
    }

    async fn list_tokens(&self, tenant: &str) -> Result<Option<Vec<TokenInfo>>> {
        let listed = async {
            let mut transaction = self.begin_read().await?;
            let now = D::database_now(&mut transaction).await?;
            let Some(tenant_id) = tenant_in::<D>(&mut transaction, tenant).await? else {
                return Ok(None);
            };
            let rows: Vec<TokenRow> = sqlx::query_as(LIST_TOKENS)
                .bind(tenant_id.0)
                .fetch_all(&mut *transaction)
                .instrument(D::statement("SELECT tenant_tokens"))
                .await?;
            transaction.rollback().await?;
            Ok(Some(
                rows.into_iter()
                    .map(|row| TokenInfo {
                        expired: row.expires_at.is_some_and(|at| at <= now),
                        name: row.name,
                        scopes: row.scopes,
                        created_at: row.created_at,
                        expires_at: row.expires_at,
                        last_used_at: row.last_used_at,
                    })
                    .collect(),
            ))
        };
        listed.await.map_err(D::translate)
    }

    async fn list_tenants(&self) -> Result<Vec<TenantInfo>> {
        let rows: Vec<TenantRow> = sqlx::query_as(LIST_TENANTS)
            .fetch_all(self.readers())
            .instrument(D::statement("SELECT tenants"))
            .await
            .map_err(|error| D::translate(error.into()))?;
        Ok(rows
            .into_iter()
            .map(|row| TenantInfo {
                id: TenantId(row.tenant_id),
                name: row.name,
                created_at: row.created_at,
                revoked_at: row.revoked_at,
                credentials: u64::try_from(row.credentials).unwrap_or(0),
            })
            .collect())
    }

    async fn audit_log(&self, tenant: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>> {
        let mut rows: Vec<AuditRow> = sqlx::query_as(AUDIT_LOG)
            .bind(tenant)
            .bind(i64::from(limit))
            .fetch_all(self.readers())
            .instrument(D::statement("SELECT audit_log"))
            .await
            .map_err(|error| D::translate(error.into()))?;
        rows.reverse();
        Ok(rows
            .into_iter()
            .map(|row| AuditEntry {
                at: row.at,
                actor: row.actor,
                action: row.action,
                tenant: row.tenant,
                target: row.target,
                detail: row.detail,
                reason: row.reason,
            })
            .collect())
    }

    async fn record_audit(
        &self,
        actor: &Actor,
        action: &str,
        tenant: Option<&str>,
        detail: Option<&str>,
    ) -> Result<()> {
        let recorded = async {
            let mut transaction = self.begin_write().await?;
            let now = D::database_now(&mut transaction).await?;
            let entry = Entry {
                action,
                tenant,
                target: None,
                detail: detail.map(str::to_owned),
            };
            audit::<D>(&mut transaction, actor, &entry, now).await?;
            self.commit(transaction).await
        };
        recorded.await.map_err(D::translate)
    }

    async fn prune_audit_log(&self, age: TimeDelta) -> Result<u64> {
        let pruned = async {
            let mut transaction = self.begin_write().await?;
            let now = D::database_now(&mut transaction).await?;
            let done = sqlx::query(PRUNE_AUDIT)
                .bind(D::stamp(now - age))
                .execute(&mut *transaction)
                .instrument(D::statement("DELETE audit_log"))
                .await?;
            self.commit(transaction).await?;
            Ok::<_, StoreError>(D::rows_affected(&done))
        };
        pruned.await.map_err(D::translate)
    }

    #[instrument(name = "store.apply_tenant", skip_all, fields(db.system = D::SYSTEM))]
    async fn apply_tenant(
        &self,
        declared: &DeclaredTenant,
        prune: bool,
        actor: &Actor,
    ) -> Result<Converged> {
        let applied = async {
            let mut transaction = self.begin_write().await?;
            let now = D::database_now(&mut transaction).await?;
            let mut applied = Converged::default();
            let tenant = match tenant_in::<D>(&mut transaction, &declared.name).await? {
                Some(tenant) => tenant,
                None => {
                    let tenant: i64 = sqlx::query_scalar(INSERT_TENANT)
                        .bind(declared.name.as_str())
                        .bind(D::stamp(now))
                        .fetch_one(&mut *transaction)
                        .instrument(D::statement("INSERT tenants"))
                        .await?;
                    let entry = Entry {
                        action: "tenant.create",
                        tenant: Some(&declared.name),
                        target: None,
                        detail: Some("declared".into()),
                    };
                    audit::<D>(&mut transaction, actor, &entry, now).await?;
                    applied.tenant_created = true;
                    TenantId(tenant)
                }
            };
            let stored: Vec<StoredToken> = sqlx::query_as(ACTIVE_TOKENS)
                .bind(tenant.0)
                .fetch_all(&mut *transaction)
                .instrument(D::statement("SELECT tenant_tokens"))
                .await?;
            let mut changes: Vec<(&str, String, Option<String>)> = Vec::new();
            for token in &declared.tokens {
                let same_name = stored
                    .iter()
                    .find(|stored| stored.name.as_deref() == Some(token.name.as_str()));
                match same_name {
                    Some(stored) if stored.token_sha256 == token.token_sha256 => {
                        let micros = |at: DateTime<Utc>| at.trunc_subsecs(6);
                        if stored.scopes != token.scopes
                            || stored.expires_at.map(micros) != token.expires_at.map(micros)
                        {
                            sqlx::query(UPDATE_TOKEN)
                                .bind(&token.token_sha256[..])
                                .bind(token.scopes.as_str())
                                .bind(token.expires_at.map(D::stamp))
                                .execute(&mut *transaction)
                                .instrument(D::statement("UPDATE tenant_tokens"))
                                .await?;
                            changes.push((
                                "token.update",
                                token.name.clone(),
                                Some(declared_detail(token)),
                            ));
                            applied.updated.push(token.name.clone());
                        }
                        continue;
                    }
                    Some(stored) => {
                        sqlx::query(REVOKE_TOKEN_BY_HASH)
                            .bind(&stored.token_sha256[..])
                            .bind(D::stamp(now))
                            .execute(&mut *transaction)
                            .instrument(D::statement("UPDATE tenant_tokens"))
                            .await?;
                        changes.push(("token.revoke", token.name.clone(), Some("replaced".into())));
                        applied.revoked.push(token.name.clone());
                    }
                    None => {}
                }
                let owner: Option<HashOwner> = sqlx::query_as(TOKEN_BY_HASH)
                    .bind(&token.token_sha256[..])
                    .fetch_optional(&mut *transaction)
                    .instrument(D::statement("SELECT tenant_tokens"))
                    .await?;
                if let Some(owner) = owner {
                    self.rollback(transaction).await?;
                    let held = if owner.revoked_at.is_some() {
                        "a revoked token"
                    } else if owner.tenant_id == tenant.0 {
                        "another of this tenant's tokens"
                    } else {
                        "another tenant's token"
                    };
                    return Ok(Err(crate::domain::Error::invalid(
                        format!("{}.tokens.{}", declared.name, token.name),
                        format!("this hash is {held}: declare a new token"),
                    )));
                }
                let new = NewToken {
                    name: token.name.clone(),
                    token_sha256: token.token_sha256,
                    scopes: token.scopes.clone(),
                    expires_in: None,
                };
                insert_token::<D>(&mut transaction, tenant, &new, now).await?;
                if token.expires_at.is_some() {
                    sqlx::query(UPDATE_TOKEN)
                        .bind(&token.token_sha256[..])
                        .bind(token.scopes.as_str())
                        .bind(token.expires_at.map(D::stamp))
                        .execute(&mut *transaction)
                        .instrument(D::statement("UPDATE tenant_tokens"))
                        .await?;
                }
                changes.push((
                    "token.create",
                    token.name.clone(),
                    Some(declared_detail(token)),
                ));
                applied.created.push(token.name.clone());
            }
            if prune {
                for stored in &stored {
                    let name = stored.name.clone().unwrap_or_else(|| "unnamed".into());
                    let declared_here = declared
                        .tokens
                        .iter()
                        .any(|token| stored.name.as_deref() == Some(token.name.as_str()));
                    if declared_here {
                        continue;
                    }
                    sqlx::query(REVOKE_TOKEN_BY_HASH)
                        .bind(&stored.token_sha256[..])
                        .bind(D::stamp(now))
                        .execute(&mut *transaction)
                        .instrument(D::statement("UPDATE tenant_tokens"))
                        .await?;
                    changes.push(("token.revoke", name.clone(), Some("pruned".into())));
                    applied.revoked.push(name);
                }
            }
            for (action, target, detail) in &changes {
                let entry = Entry {
                    action,
                    tenant: Some(&declared.name),
                    target: Some(target),
                    detail: detail.clone(),
                };
                audit::<D>(&mut transaction, actor, &entry, now).await?;
            }
            self.commit(transaction).await?;
            Ok::<_, StoreError>(Ok(applied))
        };
        applied.await.map_err(D::translate)?
    }
}

/// What a declared token's audit entry says of it.
fn declared_detail(token: &DeclaredToken) -> String {
    match token.expires_at {
        Some(expires_at) => format!(
            "scopes={} expires_at={}",
            token.scopes,
            expires_at.format("%Y-%m-%dT%H:%M:%SZ")
        ),
        None => format!("scopes={}", token.scopes),
    }
}

/// What a token's audit entry says of it: its scopes and expiry.
fn token_detail(token: &NewToken) -> String {
    match token.expires_in {
        Some(expires_in) => format!(
            "scopes={} expires_in={}s",
            token.scopes,
            expires_in.num_seconds()
        ),
        None => format!("scopes={}", token.scopes),
    }
}

async fn tenant_in<D>(
    connection: &mut <D::Db as Database>::Connection,
    name: &str,
) -> Result<Option<TenantId>, sqlx::Error>
where
    D: Shared,
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'q> &'q str: Encode<'q, D::Db> + Type<D::Db>,
    (i64,): for<'r> FromRow<'r, <D::Db as Database>::Row>,
{
    let tenant: Option<(i64,)> = sqlx::query_as(ACTIVE_TENANT)
        .bind(name)
        .fetch_optional(&mut *connection)
        .instrument(D::statement("SELECT tenants"))
        .await?;
    Ok(tenant.map(|(id,)| TenantId(id)))
}

async fn insert_token<D>(
    connection: &mut <D::Db as Database>::Connection,
    tenant: TenantId,
    token: &NewToken,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error>
where
    D: Shared,
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'q> i64: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q str: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q [u8]: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> D::Stamp: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<D::Stamp>: Encode<'q, D::Db> + Type<D::Db>,
{
    sqlx::query(INSERT_TOKEN)
        .bind(&token.token_sha256[..])
        .bind(tenant.0)
        .bind(D::stamp(now))
        .bind(token.name.as_str())
        .bind(token.scopes.as_str())
        .bind(
            token
                .expires_in
                .map(|expires_in| D::stamp(now + expires_in)),
        )
        .execute(&mut *connection)
        .instrument(D::statement("INSERT tenant_tokens"))
        .await?;
    Ok(())
}

async fn audit<D>(
    connection: &mut <D::Db as Database>::Connection,
    actor: &Actor,
    entry: &Entry<'_>,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error>
where
    D: Shared,
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'q> &'q str: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> D::Stamp: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<&'q str>: Encode<'q, D::Db> + Type<D::Db>,
{
    sqlx::query(INSERT_AUDIT)
        .bind(D::stamp(now))
        .bind(actor.name.as_str())
        .bind(entry.action)
        .bind(entry.tenant)
        .bind(entry.target)
        .bind(entry.detail.as_deref())
        .bind(actor.reason.as_deref())
        .execute(&mut *connection)
        .instrument(D::statement("INSERT audit_log"))
        .await?;
    Ok(())
}
