//! The statements both databases run, each bound and decoded once, generic
//! over the database: [`Sql`].
//!
//! Why a trait beside [`Dialect`]: sqlx binds and decodes a value only where
//! bounds such as `for<'q> i64: Encode<'q, Db>` and `OperationRow: FromRow<'r,
//! Db::Row>` hold, and Rust does not carry a trait's where-clause on other
//! types to its users (rust-lang/rust#20671), so a bound written on
//! `Dialect` would have to be written again at every `D: Dialect`. The one
//! blanket impl of `Sql` ([`bind`]) is where they are written, once; each of
//! its methods is one statement (or a run that always goes together, such
//! as the guarded write and its history entry), and the flows built on them
//! (the [`Store`](super::Store) impl in `paths.rs`, the locked path,
//! `credentials/`) name no sqlx bound at all.

use std::future::Future;

use chrono::{DateTime, Utc};
use sqlx::{Database, Executor};

use super::OperationCounts;
use super::dialect::Dialect;
use super::error::StoreResult;
use crate::domain::{
    ActedBy, AuditNote, Effects, HistoryCap, HistoryEntry, HistoryPage, ListedOperation,
    NewHistoryEntry, OperationId, OperationRecord, OperationsQuery, Target, TenantId,
    UnresolvedQuery,
};

mod bind;
mod holds;
pub(super) mod listing;
mod tenants;

pub(crate) use holds::HoldRow;
pub use holds::MOST_HOLDS;
#[cfg(test)]
pub(crate) use tenants::AUTHENTICATE;
pub(crate) use tenants::{
    AuditRow, GrantRow, HashOwner, NewAuditEntry, StoredToken, TenantRow, TokenRow, TokenWrite,
};

/// The connection a dialect's statements run on (inside a transaction, or
/// taken from the pool for one read).
pub(crate) type Connection<D> = <<D as Dialect>::Db as Database>::Connection;

/// The statements, for every [`Dialect`] whose database binds and reads the
/// values they use (both do).
pub(crate) trait Sql: Dialect {
    /// A write transaction and the database clock read first in it: how
    /// every write flow but the locked path (which reads the clock under
    /// its lock) begins.
    fn begin_write_at_clock(
        &self,
    ) -> impl Future<Output = StoreResult<(Self::Write, DateTime<Utc>)>> + Send {
        async {
            let mut transaction = self.begin_write().await?;
            let now = Self::database_now(&mut transaction).await?;
            Ok((transaction, now))
        }
    }

    /// A read transaction ([`Dialect::begin_read`]) and its clock.
    fn begin_read_at_clock(
        &self,
    ) -> impl Future<Output = StoreResult<(Self::ReadTransaction, DateTime<Utc>)>> + Send {
        async {
            let mut transaction = self.begin_read().await?;
            let now = Self::database_now(&mut transaction).await?;
            Ok((transaction, now))
        }
    }

    /// The database clock, read inside `connection`'s transaction.
    fn database_now(
        connection: &mut Connection<Self>,
    ) -> impl Future<Output = StoreResult<DateTime<Utc>>> + Send;

    /// One operation under the write lock.
    fn lock(
        connection: &mut Connection<Self>,
        tenant: TenantId,
        target: &Target,
    ) -> impl Future<Output = StoreResult<Option<OperationRecord>>> + Send;

    /// One operation and the clock, by one statement on `executor` (a pool,
    /// or a transaction's connection): for a dialect's own code, which can
    /// name its executors.
    fn read_with_clock<'e>(
        executor: impl Executor<'e, Database = Self::Db>,
        tenant: TenantId,
        target: &Target,
    ) -> impl Future<Output = StoreResult<Option<(OperationRecord, DateTime<Utc>)>>> + Send;

    /// [`Sql::read_with_clock`] by other statements that bind and read as
    /// [`Dialect::READ_BY_SCOPE`] and [`Dialect::READ_BY_ID`] do (the same
    /// read with statements of the dialect's own in front).
    fn read_with_clock_by<'e>(
        executor: impl Executor<'e, Database = Self::Db>,
        by_scope: &'static str,
        by_id: &'static str,
        tenant: TenantId,
        target: &Target,
    ) -> impl Future<Output = StoreResult<Option<(OperationRecord, DateTime<Utc>)>>> + Send;

    /// [`Sql::read_with_clock`] on a connection, for code generic over the
    /// database (to which a connection is no executor: the same bound).
    fn read_with_clock_in(
        connection: &mut Connection<Self>,
        tenant: TenantId,
        target: &Target,
    ) -> impl Future<Output = StoreResult<Option<(OperationRecord, DateTime<Utc>)>>> + Send;

    /// Appends `entry` to the operation's history, or counts it into the
    /// last entry, as [`HistoryCap::place`] says. [`Dialect::APPEND_HISTORY`]
    /// gets the entry as `$1` operation_id, `$2` event, `$3` from_state,
    /// `$4` to_state, `$5` fence, `$6` attempt, `$7` detail, `$8` now, `$9`
    /// its coalesce key, `$10` whether it is kept past the cap, `$11` the
    /// cap, and the truncation marker's `$12` event, `$13` detail and `$14`
    /// key; `$15` the credential that acted and `$16` whether it was an
    /// admin on the tenant's behalf.
    fn append_history(
        connection: &mut Connection<Self>,
        operation_id: OperationId,
        entry: &NewHistoryEntry,
        acted_by: Option<&ActedBy>,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// The append step of [`Sql::append_history`] alone, counting nothing
    /// into the last entry first: for an entry [`HistoryCap::place`] appends
    /// whatever the last one is
    /// ([`NewHistoryEntry::appended_whatever_the_last`]), and for an
    /// operation's first entry (there is no last). Past the cap it is still
    /// appended as the truncation marker.
    fn append_history_entry(
        connection: &mut Connection<Self>,
        operation_id: OperationId,
        entry: &NewHistoryEntry,
        acted_by: Option<&ActedBy>,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Writes the decided record, guarded by the fence and state it was
    /// decided from, then its history entry, and the audit row of an admin
    /// action that changed it. Returns the record as written.
    fn apply(
        connection: &mut Connection<Self>,
        before: &OperationRecord,
        effects: Effects,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<OperationRecord>> + Send;

    /// At most `limit` records due for the sweep by `statement`
    /// ([`Dialect::DUE_FOR_TOMBSTONE`], [`Dialect::DUE_FOR_DEADLINE`]),
    /// locked.
    fn due(
        connection: &mut Connection<Self>,
        statement: &'static str,
        name: &'static str,
        now: DateTime<Utc>,
        limit: i64,
    ) -> impl Future<Output = StoreResult<Vec<OperationRecord>>> + Send;

    /// Deletes at most `limit` tombstones past their retention; how many.
    fn delete_expired_tombstones(
        connection: &mut Connection<Self>,
        now: DateTime<Utc>,
        limit: i64,
    ) -> impl Future<Output = StoreResult<u64>> + Send;

    /// The page of the operation's history, and one entry more when another
    /// page follows.
    fn history_page(
        connection: &mut Connection<Self>,
        operation_id: OperationId,
        page: HistoryPage,
    ) -> impl Future<Output = StoreResult<Vec<HistoryEntry>>> + Send;

    /// The tenant's unresolved operations at `now`, one page.
    fn unresolved(
        connection: &mut Connection<Self>,
        tenant: TenantId,
        query: &UnresolvedQuery,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<Vec<OperationRecord>>> + Send;

    /// One page of ListOperations at `now`, with each operation's tenant
    /// name: the statement is built from the filter's terms
    /// ([`listing`]), every value bound.
    fn operations(
        connection: &mut Connection<Self>,
        query: &OperationsQuery,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<Vec<ListedOperation>>> + Send;

    /// The gauges' counts at `now`.
    fn count_operations(
        connection: &mut Connection<Self>,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<OperationCounts>> + Send;

    /// `SELECT 1`.
    fn ping(connection: &mut Connection<Self>) -> impl Future<Output = StoreResult<()>> + Send;

    // Tenants, tokens and the audit log ([`tenants`] has their text and rows).

    /// What an active, unexpired token of an active tenant grants at `now`.
    fn grant(
        connection: &mut Connection<Self>,
        token_sha256: &[u8; 32],
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<Option<GrantRow>>> + Send;

    /// Sets a token's `last_used_at` to `now`, unless it is later already.
    fn mark_used(
        connection: &mut Connection<Self>,
        token_sha256: &[u8; 32],
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// The active tenant of that name.
    fn active_tenant(
        connection: &mut Connection<Self>,
        name: &str,
    ) -> impl Future<Output = StoreResult<Option<TenantId>>> + Send;

    /// A new tenant; `None`: an active tenant has that name.
    fn insert_tenant(
        connection: &mut Connection<Self>,
        name: &str,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<Option<TenantId>>> + Send;

    /// Revokes the active tenant of that name and its tokens.
    fn revoke_tenant(
        connection: &mut Connection<Self>,
        name: &str,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<Option<TenantId>>> + Send;

    /// Every tenant, revoked ones included, oldest first.
    fn list_tenants(
        connection: &mut Connection<Self>,
    ) -> impl Future<Output = StoreResult<Vec<TenantRow>>> + Send;

    /// A new token of `tenant`, with its absolute expiry.
    fn insert_token(
        connection: &mut Connection<Self>,
        tenant: TenantId,
        token: &TokenWrite<'_>,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Sets the token's scopes and expiry, by its hash.
    fn update_token(
        connection: &mut Connection<Self>,
        token: &TokenWrite<'_>,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Whether the tenant has an active token of that name.
    fn token_name_taken(
        connection: &mut Connection<Self>,
        tenant: TenantId,
        name: &str,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// Revokes the tenant's active token of that name; whether it had one.
    fn revoke_token(
        connection: &mut Connection<Self>,
        tenant: TenantId,
        name: &str,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// Revokes the token of that hash, unless it is revoked already.
    fn revoke_token_by_hash(
        connection: &mut Connection<Self>,
        token_sha256: &[u8],
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Whose the hash is, revoked or not.
    fn token_by_hash(
        connection: &mut Connection<Self>,
        token_sha256: &[u8],
    ) -> impl Future<Output = StoreResult<Option<HashOwner>>> + Send;

    /// The tenant's active tokens, with their hashes.
    fn active_tokens(
        connection: &mut Connection<Self>,
        tenant: TenantId,
    ) -> impl Future<Output = StoreResult<Vec<StoredToken>>> + Send;

    /// The tenant's active tokens as the CLI lists them.
    fn list_tokens(
        connection: &mut Connection<Self>,
        tenant: TenantId,
    ) -> impl Future<Output = StoreResult<Vec<TokenRow>>> + Send;

    fn insert_audit(
        connection: &mut Connection<Self>,
        entry: &NewAuditEntry<'_>,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// The audit row of an admin action on `record` (a reconciliation on a
    /// tenant's behalf, a Forget), in the transaction of the change.
    fn insert_operation_audit(
        connection: &mut Connection<Self>,
        record: &OperationRecord,
        acted_by: &ActedBy,
        audit: &AuditNote,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// The last `limit` entries, of one tenant or all, newest first.
    fn audit_log(
        connection: &mut Connection<Self>,
        tenant: Option<&str>,
        limit: u32,
    ) -> impl Future<Output = StoreResult<Vec<AuditRow>>> + Send;

    /// Deletes the entries older than `before`; how many.
    fn prune_audit(
        connection: &mut Connection<Self>,
        before: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<u64>> + Send;

    /// Holds `operation` ('' for the whole tenant) unless it is held
    /// already or [`MOST_HOLDS`] are; whether it did.
    fn insert_hold(
        connection: &mut Connection<Self>,
        hold: &HoldWrite<'_>,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// Releases the hold; whether there was one.
    fn delete_hold(
        connection: &mut Connection<Self>,
        tenant: TenantId,
        operation: &str,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// The hold on `operation` ('' for the whole tenant), if any.
    fn hold(
        connection: &mut Connection<Self>,
        tenant: TenantId,
        operation: &str,
    ) -> impl Future<Output = StoreResult<Option<HoldRow>>> + Send;

    /// Every hold (at most [`MOST_HOLDS`]), by tenant and name.
    fn list_holds(
        connection: &mut Connection<Self>,
    ) -> impl Future<Output = StoreResult<Vec<HoldRow>>> + Send;
}

/// A hold as [`Sql::insert_hold`] writes it.
pub(crate) struct HoldWrite<'a> {
    pub(crate) tenant: TenantId,
    /// '' for the whole tenant.
    pub(crate) operation: &'a str,
    pub(crate) reason: &'a str,
    pub(crate) retry_after_ms: i64,
    pub(crate) held_by: &'a str,
}
