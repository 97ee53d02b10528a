//! Tenants, their credentials and the audit log, for both databases: the
//! one impl of the [`Credentials`] contract (whose values are `access.rs`),
//! each method the flow itself, over the statements of [`Sql`]. A tenant
//! keeps its id for ever and holds any number of bearer tokens. Every change
//! is written in the same transaction as its audit entry, so the log never
//! misses one nor records one that did not happen. By seam: [`tokens`],
//! [`tenants`], [`audit`], and [`apply`] (converging to a declaration).

use async_trait::async_trait;
use chrono::TimeDelta;
use tracing::instrument;

use super::error::StoreError;
use super::statements::{NewAuditEntry, Sql};
use crate::domain::{Result, TenantId};

mod apply;
mod audit;
mod tenants;
mod tokens;

pub use super::access::{
    Actor, AuditEntry, Converged, Credentials, DeclaredTenant, DeclaredToken, NewToken, TenantInfo,
    TokenCreated, TokenGrant, TokenInfo,
};
#[cfg(test)]
pub(crate) use super::statements::AUTHENTICATE;

use self::apply::Converging;

#[async_trait]
impl<D: Sql> Credentials for D {
    #[instrument(name = "store.create_tenant", skip_all, fields(db.system = D::SYSTEM))]
    async fn create_tenant_with(
        &self,
        name: &str,
        first: &NewToken,
        actor: &Actor,
    ) -> Result<TenantId> {
        let created = async {
            let (mut transaction, now) = self.begin_write_at_clock().await?;
            let Some(tenant) = D::insert_tenant(&mut transaction, name, now).await? else {
                return Ok(None);
            };
            let entry = NewAuditEntry {
                tenant: Some(name),
                ..actor.entry("tenant.create")
            };
            first
                .insert::<D>(&mut transaction, tenant, entry, now)
                .await?;
            self.commit(transaction).await?;
            Ok::<_, StoreError>(Some(tenant))
        };
        created
            .await
            .map_err(D::translate)?
            .ok_or_else(|| crate::domain::Error::invalid("name", "an active tenant has this name"))
    }

    #[instrument(name = "store.revoke_tenant", skip_all, fields(db.system = D::SYSTEM))]
    async fn revoke_tenant_as(&self, name: &str, actor: &Actor) -> Result<bool> {
        let revoked = async {
            let (mut transaction, now) = self.begin_write_at_clock().await?;
            let tenant = D::revoke_tenant(&mut transaction, name, now).await?;
            if tenant.is_some() {
                let entry = NewAuditEntry {
                    tenant: Some(name),
                    ..actor.entry("tenant.revoke")
                };
                D::insert_audit(&mut transaction, &entry, now).await?;
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
            let (mut transaction, now) = self.begin_write_at_clock().await?;
            let Some(tenant_id) = D::active_tenant(&mut transaction, tenant).await? else {
                return Ok(TokenCreated::NoSuchTenant);
            };
            if D::token_name_taken(&mut transaction, tenant_id, &token.name).await? {
                return Ok(TokenCreated::NameTaken);
            }
            let entry = NewAuditEntry {
                tenant: Some(tenant),
                ..actor.entry("token.create")
            };
            token
                .insert::<D>(&mut transaction, tenant_id, entry, now)
                .await?;
            self.commit(transaction).await?;
            Ok::<_, StoreError>(TokenCreated::Created)
        };
        created.await.map_err(D::translate)
    }

    #[instrument(name = "store.revoke_token", skip_all, fields(db.system = D::SYSTEM))]
    async fn revoke_token(&self, tenant: &str, name: &str, actor: &Actor) -> Result<bool> {
        let revoked = async {
            let (mut transaction, now) = self.begin_write_at_clock().await?;
            let Some(tenant_id) = D::active_tenant(&mut transaction, tenant).await? else {
                return Ok(false);
            };
            let revoked = D::revoke_token(&mut transaction, tenant_id, name, now).await?;
            if revoked {
                let entry = NewAuditEntry {
                    tenant: Some(tenant),
                    target: Some(name),
                    ..actor.entry("token.revoke")
                };
                D::insert_audit(&mut transaction, &entry, now).await?;
            }
            self.commit(transaction).await?;
            Ok::<_, StoreError>(revoked)
        };
        revoked.await.map_err(D::translate)
    }

    async fn list_tokens(&self, tenant: &str) -> Result<Option<Vec<TokenInfo>>> {
        let listed = async {
            let (mut transaction, now) = self.begin_read_at_clock().await?;
            let Some(tenant_id) = D::active_tenant(&mut transaction, tenant).await? else {
                return Ok(None);
            };
            let rows = D::list_tokens(&mut transaction, tenant_id).await?;
            self.end_read(transaction).await?;
            Ok::<_, StoreError>(Some(
                rows.into_iter()
                    .map(|row| TokenInfo::from_row(row, now))
                    .collect(),
            ))
        };
        listed.await.map_err(D::translate)
    }

    async fn list_tenants(&self) -> Result<Vec<TenantInfo>> {
        let listed = async {
            let mut connection = self.acquire_read().await?;
            let listed = D::list_tenants(&mut connection).await;
            D::release_read(connection);
            listed
        };
        let rows = listed.await.map_err(D::translate)?;
        Ok(rows.into_iter().map(TenantInfo::from).collect())
    }

    async fn audit_log(&self, tenant: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>> {
        let read = async {
            let mut connection = self.acquire_read().await?;
            let read = D::audit_log(&mut connection, tenant, limit).await;
            D::release_read(connection);
            read
        };
        let mut rows = read.await.map_err(D::translate)?;
        // Read newest first, so that the limit keeps the last ones.
        rows.reverse();
        Ok(rows.into_iter().map(AuditEntry::from).collect())
    }

    async fn record_audit(
        &self,
        actor: &Actor,
        action: &str,
        tenant: Option<&str>,
        detail: Option<&str>,
    ) -> Result<()> {
        let recorded = async {
            let (mut transaction, now) = self.begin_write_at_clock().await?;
            let entry = NewAuditEntry {
                tenant,
                detail,
                ..actor.entry(action)
            };
            D::insert_audit(&mut transaction, &entry, now).await?;
            self.commit(transaction).await
        };
        recorded.await.map_err(D::translate)
    }

    async fn prune_audit_log(&self, age: TimeDelta) -> Result<u64> {
        let pruned = async {
            let (mut transaction, now) = self.begin_write_at_clock().await?;
            let pruned = D::prune_audit(&mut transaction, now - age).await?;
            self.commit(transaction).await?;
            Ok::<_, StoreError>(pruned)
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
            let (mut transaction, now) = self.begin_write_at_clock().await?;
            let mut converging =
                Converging::begin::<D>(&mut transaction, declared, actor, now).await?;
            for token in &declared.tokens {
                if let Some(refused) = converging.token::<D>(&mut transaction, token).await? {
                    self.rollback(transaction).await?;
                    return Ok(Err(refused));
                }
            }
            if prune {
                converging.prune::<D>(&mut transaction).await?;
            }
            let converged = converging.audit::<D>(&mut transaction, actor).await?;
            self.commit(transaction).await?;
            Ok::<_, StoreError>(Ok(converged))
        };
        applied.await.map_err(D::translate)?
    }
}
