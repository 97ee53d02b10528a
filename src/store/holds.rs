//! Holds: an administrator stops new owners of one operation name of a
//! tenant, or of the whole tenant, while the unresolved operations are
//! drained; replays, owner writes and reconciliation go on (the domain's
//! `ClaimCommand::held`). The one impl of the [`Holds`] contract, for both
//! databases, over the statements of `statements/holds.rs`. Every hold and
//! release is written in the same transaction as its audit entry.

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use tracing::instrument;

use super::access::Actor;
use super::error::StoreError;
use super::statements::{HoldRow, HoldWrite, NewAuditEntry, Sql};

pub use super::statements::MOST_HOLDS;
use crate::domain::{Result, TenantId};

/// A hold in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub tenant: TenantId,
    pub tenant_name: String,
    /// `None`: the whole tenant.
    pub operation: Option<String>,
    pub reason: String,
    /// What a held Claim is told to wait before it claims again.
    pub retry_after: TimeDelta,
    pub held_at: DateTime<Utc>,
    /// The actor that set it (`token:NAME`, `cli:USER@HOST`, …).
    pub held_by: String,
}

/// What a Hold did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldSet {
    /// Held now.
    Held(Hold),
    /// It was held already: the first hold stays as it was set.
    AlreadyHeld(Hold),
    /// As many holds as the server keeps are in force.
    Full,
}

#[async_trait]
pub trait Holds: Send + Sync {
    /// Holds `operation` (`None`: the whole tenant), audited with `actor`.
    async fn hold(
        &self,
        tenant: TenantId,
        operation: Option<&str>,
        retry_after: TimeDelta,
        actor: &Actor,
    ) -> Result<HoldSet>;

    /// Releases the hold, audited with `actor`; the hold that was in force.
    async fn release(
        &self,
        tenant: TenantId,
        operation: Option<&str>,
        actor: &Actor,
    ) -> Result<Option<Hold>>;

    /// Every hold in force, by tenant and operation name.
    async fn list_holds(&self) -> Result<Vec<Hold>>;
}

/// The whole tenant is stored as the empty name, which no operation has.
fn stored_name(operation: Option<&str>) -> &str {
    operation.unwrap_or("")
}

impl From<HoldRow> for Hold {
    fn from(row: HoldRow) -> Self {
        Self {
            tenant: TenantId(row.tenant_id),
            tenant_name: row.tenant,
            operation: (!row.operation.is_empty()).then_some(row.operation),
            reason: row.reason,
            retry_after: TimeDelta::milliseconds(row.retry_after_ms),
            held_at: row.held_at,
            held_by: row.held_by,
        }
    }
}

/// What the audit log says a hold or release was about.
fn audit_target(operation: Option<&str>) -> &str {
    operation.unwrap_or("*")
}

#[async_trait]
impl<D: Sql> Holds for D {
    #[instrument(name = "store.hold", skip_all, fields(db.system = D::SYSTEM))]
    async fn hold(
        &self,
        tenant: TenantId,
        operation: Option<&str>,
        retry_after: TimeDelta,
        actor: &Actor,
    ) -> Result<HoldSet> {
        let reason = actor.reason.as_deref().unwrap_or_default();
        let held = async {
            let (mut transaction, now) = self.begin_write_at_clock().await?;
            let write = HoldWrite {
                tenant,
                operation: stored_name(operation),
                reason,
                retry_after_ms: retry_after.num_milliseconds(),
                held_by: &actor.name,
            };
            let inserted = D::insert_hold(&mut transaction, &write, now).await?;
            let Some(row) = D::hold(&mut transaction, tenant, stored_name(operation)).await? else {
                // Not inserted and not there: the table is full.
                self.commit(transaction).await?;
                return Ok(HoldSet::Full);
            };
            let hold = Hold::from(row);
            if !inserted {
                self.commit(transaction).await?;
                return Ok(HoldSet::AlreadyHeld(hold));
            }
            let detail = format!("retry_after={}ms", retry_after.num_milliseconds());
            let entry = NewAuditEntry {
                tenant: Some(&hold.tenant_name),
                target: Some(audit_target(operation)),
                detail: Some(&detail),
                ..actor.entry("hold.set")
            };
            D::insert_audit(&mut transaction, &entry, now).await?;
            self.commit(transaction).await?;
            Ok::<_, StoreError>(HoldSet::Held(hold))
        };
        held.await.map_err(D::translate)
    }

    #[instrument(name = "store.release", skip_all, fields(db.system = D::SYSTEM))]
    async fn release(
        &self,
        tenant: TenantId,
        operation: Option<&str>,
        actor: &Actor,
    ) -> Result<Option<Hold>> {
        let released = async {
            let (mut transaction, now) = self.begin_write_at_clock().await?;
            let Some(row) = D::hold(&mut transaction, tenant, stored_name(operation)).await? else {
                self.commit(transaction).await?;
                return Ok(None);
            };
            let hold = Hold::from(row);
            if !D::delete_hold(&mut transaction, tenant, stored_name(operation)).await? {
                // Released by someone else between the two statements.
                self.commit(transaction).await?;
                return Ok(None);
            }
            let entry = NewAuditEntry {
                tenant: Some(&hold.tenant_name),
                target: Some(audit_target(operation)),
                ..actor.entry("hold.release")
            };
            D::insert_audit(&mut transaction, &entry, now).await?;
            self.commit(transaction).await?;
            Ok::<_, StoreError>(Some(hold))
        };
        released.await.map_err(D::translate)
    }

    async fn list_holds(&self) -> Result<Vec<Hold>> {
        let listed = async {
            let mut connection = self.acquire_read().await?;
            let listed = D::list_holds(&mut connection).await;
            D::release_read(connection);
            listed
        };
        let rows = listed.await.map_err(D::translate)?;
        Ok(rows.into_iter().map(Hold::from).collect())
    }
}
