//! Converging a tenant to a declaration (`idemd tenant apply`), in one
//! transaction, step by step, each a short run of statements.

use chrono::{DateTime, Utc};

use super::super::access::{Actor, Converged, DeclaredTenant, DeclaredToken};
use super::super::error::StoreResult;
use super::super::statements::{Connection, NewAuditEntry, Sql, StoredToken, TokenWrite};
use crate::domain::{Error, TenantId};

impl DeclaredToken {
    fn write(&self) -> TokenWrite<'_> {
        TokenWrite {
            token_sha256: &self.token_sha256,
            name: &self.name,
            scopes: &self.scopes,
            expires_at: self.expires_at,
        }
    }
}

/// One tenant's convergence, under way in its write transaction: what it
/// changed so far, and the audit entries it owes, written last in the order
/// of the changes.
pub(super) struct Converging<'a> {
    declared: &'a DeclaredTenant,
    tenant: TenantId,
    now: DateTime<Utc>,
    /// The tenant's active tokens before any change.
    stored: Vec<StoredToken>,
    /// Action, token name, detail.
    changes: Vec<(&'static str, String, Option<String>)>,
    converged: Converged,
}

impl<'a> Converging<'a> {
    /// Finds the tenant, or creates it (its audit entry written at once),
    /// and reads its active tokens.
    pub(super) async fn begin<D: Sql>(
        connection: &mut Connection<D>,
        declared: &'a DeclaredTenant,
        actor: &Actor,
        now: DateTime<Utc>,
    ) -> StoreResult<Self> {
        let mut converged = Converged::default();
        let tenant = match D::active_tenant(connection, &declared.name).await? {
            Some(tenant) => tenant,
            None => {
                let tenant = D::insert_tenant(connection, &declared.name, now)
                    .await?
                    .ok_or(sqlx::Error::RowNotFound)?;
                let entry = NewAuditEntry {
                    tenant: Some(&declared.name),
                    detail: Some("declared"),
                    ..actor.entry("tenant.create")
                };
                D::insert_audit(connection, &entry, now).await?;
                converged.tenant_created = true;
                tenant
            }
        };
        let stored = D::active_tokens(connection, tenant).await?;
        Ok(Self {
            declared,
            tenant,
            now,
            stored,
            changes: Vec::new(),
            converged,
        })
    }

    /// Converges one declared token: updates it, or replaces the token of
    /// its name, or creates it. `Some`: refused, as its hash is stored
    /// already (under another name, tenant, or revoked); the caller rolls
    /// back.
    pub(super) async fn token<D: Sql>(
        &mut self,
        connection: &mut Connection<D>,
        token: &DeclaredToken,
    ) -> StoreResult<Option<Error>> {
        let name = || token.name.clone();
        let same_name = self
            .stored
            .iter()
            .find(|stored| stored.name.as_deref() == Some(token.name.as_str()));
        match same_name {
            Some(stored) if stored.token_sha256 == token.token_sha256 => {
                if token.differs_from(&stored.scopes, stored.expires_at) {
                    D::update_token(connection, &token.write()).await?;
                    self.changes
                        .push(("token.update", name(), Some(token.detail())));
                    self.converged.updated.push(name());
                }
                return Ok(None);
            }
            Some(stored) => {
                D::revoke_token_by_hash(connection, &stored.token_sha256, self.now).await?;
                self.changes
                    .push(("token.revoke", name(), Some("replaced".into())));
                self.converged.revoked.push(name());
            }
            None => {}
        }
        if let Some(owner) = D::token_by_hash(connection, &token.token_sha256).await? {
            let held = if owner.revoked_at.is_some() {
                "a revoked token"
            } else if owner.tenant_id == self.tenant.0 {
                "another of this tenant's tokens"
            } else {
                "another tenant's token"
            };
            return Ok(Some(Error::invalid(
                format!("{}.tokens.{}", self.declared.name, token.name),
                format!("this hash is {held}: declare a new token"),
            )));
        }
        D::insert_token(connection, self.tenant, &token.write(), self.now).await?;
        self.changes
            .push(("token.create", name(), Some(token.detail())));
        self.converged.created.push(name());
        Ok(None)
    }

    /// Revokes the active tokens the declaration does not name.
    pub(super) async fn prune<D: Sql>(
        &mut self,
        connection: &mut Connection<D>,
    ) -> StoreResult<()> {
        for stored in &self.stored {
            let declared_here = self
                .declared
                .tokens
                .iter()
                .any(|token| stored.name.as_deref() == Some(token.name.as_str()));
            if declared_here {
                continue;
            }
            D::revoke_token_by_hash(connection, &stored.token_sha256, self.now).await?;
            let name = stored.name.clone().unwrap_or_else(|| "unnamed".into());
            self.changes
                .push(("token.revoke", name.clone(), Some("pruned".into())));
            self.converged.revoked.push(name);
        }
        Ok(())
    }

    /// Writes the audit entries the changes owe; what converging changed.
    pub(super) async fn audit<D: Sql>(
        self,
        connection: &mut Connection<D>,
        actor: &Actor,
    ) -> StoreResult<Converged> {
        for (action, target, detail) in &self.changes {
            let entry = NewAuditEntry {
                tenant: Some(&self.declared.name),
                target: Some(target),
                detail: detail.as_deref(),
                ..actor.entry(action)
            };
            D::insert_audit(connection, &entry, self.now).await?;
        }
        Ok(self.converged)
    }
}
