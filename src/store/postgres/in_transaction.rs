//! The Postgres store's statements on a transaction someone else holds:
//! idemd-local runs idemd's state machine inside an application's own
//! transaction, on the application's database, with these very statements
//! (the first claim step, the locked path's lock, clock and guarded write,
//! tenants by name). Nothing here begins, commits or retries: the
//! transaction, and what to do when it fails, are the caller's. A
//! serialization failure or deadlock is UNAVAILABLE, as the store answers
//! it once its own attempts are spent: the caller's transaction is dead
//! and runs again as a whole.
//!
//! The statements name their tables unqualified: the caller sets the
//! `search_path` to the schema its migrations ([`super::MIGRATOR`]) went to.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgConnection;

use super::PostgresStore;
use super::batched::{ClaimMember, insert_or_find_on};
use crate::domain::{
    ClaimCommand, Decision, HistoryCap, OperationId, OperationRecord, Result, Target, TenantId,
};
use crate::store::dialect::Dialect;
use crate::store::error::{StoreError, StoreResult};
use crate::store::statements::Sql;
use crate::store::{Applied, ClaimStart};

fn domain_error(error: StoreError) -> crate::domain::Error {
    error.into_domain(PostgresStore::classify)
}

/// The first step of a Claim ([`crate::store::Store::insert_or_find`]'s
/// statement): the scope's first record inserted with `operation_id`, or the
/// record it has; `None` when another transaction inserted one after this
/// statement's snapshot (claim again: the next statement sees it).
pub async fn insert_or_find(
    connection: &mut PgConnection,
    tenant: TenantId,
    operation_id: OperationId,
    command: &ClaimCommand,
) -> Result<Option<ClaimStart>> {
    let member = ClaimMember {
        tenant,
        operation_id,
        command,
    };
    let mut started = insert_or_find_on(connection, &[member])
        .await
        .map_err(domain_error)?;
    Ok(started.pop().flatten())
}

/// The locked path without its transaction ([`crate::store::Store::transition`]):
/// lock the target's row, read the database clock, decide, and write
/// guarded with its history entry. `None`: the target is not the tenant's.
pub async fn transition(
    connection: &mut PgConnection,
    tenant: TenantId,
    target: &Target,
    decide: impl FnOnce(&OperationRecord, DateTime<Utc>) -> Decision,
    cap: HistoryCap,
) -> Result<Option<Applied>> {
    let applied: StoreResult<Option<Applied>> = async {
        let Some(record) = PostgresStore::lock(connection, tenant, target).await? else {
            return Ok(None);
        };
        let now = PostgresStore::database_now(connection).await?;
        let decision = decide(&record, now);
        if decision.effects.is_empty() {
            return Ok(Some(Applied {
                record,
                answer: decision.answer,
                now,
                record_changed: false,
            }));
        }
        let written = PostgresStore::apply(connection, &record, decision.effects, cap, now).await?;
        Ok(Some(Applied {
            record_changed: written != record,
            record: written,
            answer: decision.answer,
            now,
        }))
    }
    .await;
    applied.map_err(domain_error)
}

/// The active tenant of that name, created when there is none (a tenant
/// revoked earlier is not reused: its name gets a new tenant).
pub async fn tenant(connection: &mut PgConnection, name: &str) -> Result<TenantId> {
    let found: StoreResult<TenantId> = async {
        if let Some(tenant) = PostgresStore::active_tenant(connection, name).await? {
            return Ok(tenant);
        }
        let now = PostgresStore::database_now(connection).await?;
        if let Some(tenant) = PostgresStore::insert_tenant(connection, name, now).await? {
            return Ok(tenant);
        }
        // Inserted concurrently and committed: this statement's snapshot,
        // taken after the insert above waited for it, sees it.
        PostgresStore::active_tenant(connection, name)
            .await?
            .ok_or_else(|| {
                StoreError::Domain(crate::domain::Error::unavailable(
                    "the tenant changed during the call",
                ))
            })
    }
    .await;
    found.map_err(domain_error)
}

/// A database error as the store answers it: a serialization failure,
/// deadlock or outage UNAVAILABLE (run the transaction again), anything
/// else INTERNAL.
pub fn database_error(error: sqlx::Error) -> crate::domain::Error {
    domain_error(StoreError::Database(error))
}
