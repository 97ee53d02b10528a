//! The one impl of [`Sql`]: every statement bound and decoded, for every
//! [`Dialect`] whose database can bind and read the values they use. Its
//! where-clause is the one place the store writes sqlx's bounds.

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, QueryBuilder, Type};
use tracing::Instrument;
use uuid::Uuid;

use super::super::OperationCounts;
use super::super::dialect::Dialect;
use super::super::error::StoreResult;
use super::super::row::{
    HistoryRow, ListedRow, OperationRow, OperationWrite, RowWithClock, signed,
};
use super::super::sql;
use super::holds::{DELETE_HOLD, HOLD, HoldRow, INSERT_HOLD, LIST_HOLDS, MOST_HOLDS};
use super::listing::{self, Piece};
use super::tenants::{
    ACTIVE_TENANT, ACTIVE_TOKEN_NAMED, ACTIVE_TOKENS, AUDIT_LOG, AUTHENTICATE, AuditRow, GrantRow,
    HashOwner, INSERT_AUDIT, INSERT_OPERATION_AUDIT, INSERT_TENANT, INSERT_TOKEN, LIST_TENANTS,
    LIST_TOKENS, MARK_USED, NewAuditEntry, PRUNE_AUDIT, REVOKE_TENANT, REVOKE_TENANT_TOKENS,
    REVOKE_TOKEN, REVOKE_TOKEN_BY_HASH, StoredToken, TOKEN_BY_HASH, TenantRow, TokenRow,
    TokenWrite, UPDATE_TOKEN,
};
use super::{Connection, HoldWrite, Sql};
use crate::domain::{
    ActedBy, AuditNote, Effects, Error, HistoryCap, HistoryEntry, HistoryEvent, HistoryPage,
    ListedOperation, Metadata, NewHistoryEntry, OperationId, OperationRecord, OperationsQuery,
    Result, Target, TenantId, UnresolvedQuery,
};

/// Binds a history entry's event, states, fence, attempt, detail and time,
/// in that order (append_history.sql's `$2`–`$8`;
/// append_entry_after_update.sql's `$35`–`$41`).
macro_rules! bind_history_entry {
    ($query:expr, $entry:expr, $now:expr) => {
        $query
            .bind($entry.event.as_str())
            .bind($entry.from_state.map(|state| state.as_str()))
            .bind($entry.to_state.as_str())
            .bind(signed($entry.fence)?)
            .bind(i32::try_from($entry.attempt).unwrap_or(i32::MAX))
            .bind($entry.detail.as_str())
            .bind(D::stamp($now))
    };
}

impl<D> Sql for D
where
    D: Dialect,
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'q> i64: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> i32: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> bool: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Uuid: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q str: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> &'q [u8]: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Json<&'q Metadata>: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> D::Stamp: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<i64>: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<Uuid>: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<&'q str>: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<&'q [u8]>: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<Json<&'q Metadata>>: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<D::Stamp>: Encode<'q, D::Db> + Type<D::Db>,
    OperationRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    RowWithClock: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    ListedRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    HistoryRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    GrantRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    TokenRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    StoredToken: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    HashOwner: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    TenantRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    AuditRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    HoldRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    (i64,): for<'r> FromRow<'r, <D::Db as Database>::Row>,
    (i64, i64, i64, i64, Option<DateTime<Utc>>): for<'r> FromRow<'r, <D::Db as Database>::Row>,
    (DateTime<Utc>,): for<'r> FromRow<'r, <D::Db as Database>::Row>,
{
    async fn database_now(connection: &mut Connection<D>) -> StoreResult<DateTime<Utc>> {
        let (now,): (DateTime<Utc>,) = sqlx::query_as(D::CLOCK)
            .fetch_one(&mut *connection)
            .instrument(D::statement("SELECT clock"))
            .await?;
        Ok(now)
    }

    async fn lock(
        connection: &mut Connection<D>,
        tenant: TenantId,
        target: &Target,
    ) -> StoreResult<Option<OperationRecord>> {
        let row: Option<OperationRow> = match target {
            Target::Scope(scope) => {
                sqlx::query_as(D::LOCK_BY_SCOPE)
                    .bind(tenant.0)
                    .bind(scope.operation.as_str())
                    .bind(scope.key.as_str())
                    .fetch_optional(&mut *connection)
                    .instrument(D::statement("SELECT FOR UPDATE operations"))
                    .await?
            }
            Target::Id(operation_id) => {
                sqlx::query_as(D::LOCK_BY_ID)
                    .bind(tenant.0)
                    .bind(operation_id.0)
                    .fetch_optional(&mut *connection)
                    .instrument(D::statement("SELECT FOR UPDATE operations"))
                    .await?
            }
        };
        Ok(row.map(OperationRecord::try_from).transpose()?)
    }

    async fn read_with_clock<'e>(
        executor: impl Executor<'e, Database = D::Db>,
        tenant: TenantId,
        target: &Target,
    ) -> StoreResult<Option<(OperationRecord, DateTime<Utc>)>> {
        Self::read_with_clock_by(executor, D::READ_BY_SCOPE, D::READ_BY_ID, tenant, target).await
    }

    async fn read_with_clock_by<'e>(
        executor: impl Executor<'e, Database = D::Db>,
        by_scope: &'static str,
        by_id: &'static str,
        tenant: TenantId,
        target: &Target,
    ) -> StoreResult<Option<(OperationRecord, DateTime<Utc>)>> {
        let row: Option<RowWithClock> = match target {
            Target::Scope(scope) => {
                sqlx::query_as(by_scope)
                    .bind(tenant.0)
                    .bind(scope.operation.as_str())
                    .bind(scope.key.as_str())
                    .fetch_optional(executor)
                    .instrument(D::statement("SELECT operations"))
                    .await?
            }
            Target::Id(operation_id) => {
                sqlx::query_as(by_id)
                    .bind(tenant.0)
                    .bind(operation_id.0)
                    .fetch_optional(executor)
                    .instrument(D::statement("SELECT operations"))
                    .await?
            }
        };
        row.map(|RowWithClock { row, db_now }| Ok((OperationRecord::try_from(row)?, db_now)))
            .transpose()
    }

    async fn append_history(
        connection: &mut Connection<D>,
        operation_id: OperationId,
        entry: &NewHistoryEntry,
        acted_by: Option<&ActedBy>,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        if !entry.appended_whatever_the_last() {
            let counted = D::count_into_last_history_entry(
                &mut *connection,
                operation_id,
                entry,
                entry.coalesce_key().as_deref(),
                cap,
                now,
            )
            .await?;
            if counted {
                return Ok(());
            }
        }
        Self::append_history_entry(connection, operation_id, entry, acted_by, cap, now).await
    }

    async fn append_history_entry(
        connection: &mut Connection<D>,
        operation_id: OperationId,
        entry: &NewHistoryEntry,
        acted_by: Option<&ActedBy>,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let coalesce_key = entry.coalesce_key();
        bind_history_entry!(
            sqlx::query(D::APPEND_HISTORY).bind(operation_id.0),
            entry,
            now
        )
        .bind(coalesce_key.as_deref())
        .bind(entry.kept_past_cap())
        .bind(i32::try_from(cap.max_entries).unwrap_or(i32::MAX))
        .bind(HistoryEvent::HistoryTruncated.as_str())
        .bind(HistoryCap::TRUNCATED_DETAIL)
        .bind(HistoryCap::TRUNCATED_KEY)
        .bind(acted_by.map(|acted_by| acted_by.credential.as_str()))
        .bind(acted_by.is_some_and(|acted_by| acted_by.admin_on_behalf))
        .execute(&mut *connection)
        .instrument(D::statement("INSERT operation_history"))
        .await?;
        Ok(())
    }

    async fn apply(
        connection: &mut Connection<D>,
        before: &OperationRecord,
        effects: Effects,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> StoreResult<OperationRecord> {
        let mut effects = effects;
        let mut written_record = None;
        let mut appended_with_update = false;
        if let Some(update) = &effects.update {
            if update.takes_new_fence {
                D::advance_fence(&mut *connection).await?;
            }
            let write = OperationWrite::of(&update.next)?;
            let answers_with_drawn_fence = write.last_write_answer_fence == Some(0);
            // The entry goes with the UPDATE when nothing the UPDATE returns
            // changes it (no new fence) and its place needs no look at the
            // last entry.
            let history_with_update = D::GUARDED_UPDATE_THEN_APPEND
                .zip(effects.history.as_ref())
                .filter(|(_, entry)| !update.takes_new_fence && entry.appended_whatever_the_last());
            let query = sqlx::query_scalar(
                history_with_update.map_or(D::GUARDED_UPDATE, |(statement, _)| statement),
            )
            .bind(before.operation_id.0)
            .bind(signed(before.fence)?)
            .bind(write.state)
            .bind(update.takes_new_fence)
            .bind(write.attempt)
            .bind(write.claim_token)
            .bind(write.taken_over_state)
            .bind(write.taken_over_fence)
            .bind(write.lease_ms)
            .bind(write.lease_expires_at.map(D::stamp))
            .bind(write.attempt_deadline_at.map(D::stamp))
            .bind(write.retry_at.map(D::stamp))
            .bind(write.outcome_state)
            .bind(write.result_body)
            .bind(write.result_content_type)
            .bind(write.result_metadata)
            .bind(write.failure_reason)
            .bind(write.error_code)
            .bind(write.error_message)
            .bind(write.error_metadata)
            .bind(write.last_write_fence)
            .bind(write.last_write_digest)
            .bind(D::stamp(write.updated_at))
            .bind(write.completed_at.map(D::stamp))
            .bind(write.retain_until.map(D::stamp))
            .bind(before.state.as_str())
            .bind(write.last_write_by)
            .bind(write.max_attempts)
            .bind(write.last_write_state)
            .bind(write.last_write_failure)
            .bind(write.last_write_retry_at.map(D::stamp))
            .bind(write.last_write_answer_fence)
            .bind(write.taken_over_deadline_at.map(D::stamp))
            .bind(write.renewed_under_fence);
            let query = match history_with_update {
                Some((_, entry)) => {
                    appended_with_update = true;
                    let acted_by = effects.acted_by.as_ref();
                    bind_history_entry!(query, entry, now)
                        .bind(acted_by.map(|acted_by| acted_by.credential.as_str()))
                        .bind(acted_by.is_some_and(|acted_by| acted_by.admin_on_behalf))
                }
                None => query,
            };
            // Every row, not the first only: a query of two statements
            // stops at the row it was asked for.
            let written_fence: Option<i64> = query
                .fetch_all(&mut *connection)
                .instrument(D::statement("UPDATE operations"))
                .await?
                .into_iter()
                .next();
            let (written, stamped) = settle_guarded_update(effects, written_fence)?;
            effects = stamped;
            // A reconciler's receipt answers with the fence its write drew,
            // known only now that the UPDATE drew it.
            if answers_with_drawn_fence && let Some(drawn) = written_fence {
                sqlx::query(sql::STAMP_ANSWERED_FENCE)
                    .bind(before.operation_id.0)
                    .bind(drawn)
                    .execute(&mut *connection)
                    .instrument(D::statement("UPDATE operations answer"))
                    .await?;
            }
            written_record = written;
        }
        // A refused conflicting Claim: counted on the locked row, two
        // columns only (`OperationRecord::with_conflict_counted`).
        let mut counted_record = None;
        if effects.conflict {
            sqlx::query(sql::COUNT_CONFLICT)
                .bind(before.operation_id.0)
                .bind(D::stamp(now))
                .execute(&mut *connection)
                .instrument(D::statement("UPDATE operations conflicts"))
                .await?;
            let base = written_record.as_ref().unwrap_or(before);
            counted_record = Some(base.with_conflict_counted(now));
        }
        if let Some(history) = effects.history.as_ref().filter(|_| !appended_with_update) {
            D::append_history(
                &mut *connection,
                before.operation_id,
                history,
                effects.acted_by.as_ref(),
                cap,
                now,
            )
            .await?;
        }
        // An admin action's audit row commits with the change, or neither.
        // (The update was moved into `written_record` above.)
        if let (Some(audit), Some(acted_by), Some(_)) =
            (&effects.audit, &effects.acted_by, &written_record)
        {
            D::insert_operation_audit(&mut *connection, before, acted_by, audit, now).await?;
        }
        // Without an update (a refusal recorded in history) the record stands.
        Ok(counted_record
            .or(written_record)
            .unwrap_or_else(|| before.clone()))
    }

    async fn read_with_clock_in(
        connection: &mut Connection<D>,
        tenant: TenantId,
        target: &Target,
    ) -> StoreResult<Option<(OperationRecord, DateTime<Utc>)>> {
        D::read_with_clock(connection, tenant, target).await
    }

    async fn due(
        connection: &mut Connection<D>,
        statement: &'static str,
        name: &'static str,
        now: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<OperationRecord>> {
        let rows: Vec<OperationRow> = sqlx::query_as(statement)
            .bind(D::stamp(now))
            .bind(limit)
            .fetch_all(&mut *connection)
            .instrument(D::statement(name))
            .await?;
        Ok(rows
            .into_iter()
            .map(OperationRecord::try_from)
            .collect::<Result<_>>()?)
    }

    async fn delete_expired_tombstones(
        connection: &mut Connection<D>,
        now: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<u64> {
        let done = sqlx::query(D::DELETE_EXPIRED_TOMBSTONES)
            .bind(D::stamp(now))
            .bind(limit)
            .execute(&mut *connection)
            .instrument(D::statement("DELETE operations"))
            .await?;
        Ok(D::rows_affected(&done))
    }

    async fn history_page(
        connection: &mut Connection<D>,
        operation_id: OperationId,
        page: HistoryPage,
    ) -> StoreResult<Vec<HistoryEntry>> {
        let rows: Vec<HistoryRow> = sqlx::query_as(D::SELECT_HISTORY)
            .bind(operation_id.0)
            .bind(i64::try_from(page.after).unwrap_or(i64::MAX))
            .bind(i64::from(page.limit) + 1)
            .fetch_all(&mut *connection)
            .instrument(D::statement("SELECT operation_history"))
            .await?;
        Ok(rows
            .into_iter()
            .map(HistoryEntry::try_from)
            .collect::<Result<_>>()?)
    }

    async fn unresolved(
        connection: &mut Connection<D>,
        tenant: TenantId,
        query: &UnresolvedQuery,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<OperationRecord>> {
        let (after_created, after_id) = match query.after {
            Some((created_at, operation_id)) => (Some(D::stamp(created_at)), Some(operation_id.0)),
            None => (None, None),
        };
        let rows: Vec<OperationRow> = sqlx::query_as(sql::SELECT_UNRESOLVED)
            .bind(tenant.0)
            .bind(D::stamp(now))
            .bind(query.operation.as_deref())
            .bind(after_created)
            .bind(after_id)
            .bind(i64::from(query.limit))
            .fetch_all(&mut *connection)
            .instrument(D::statement("SELECT operations"))
            .await?;
        Ok(rows
            .into_iter()
            .map(OperationRecord::try_from)
            .collect::<Result<_>>()?)
    }

    async fn operations(
        connection: &mut Connection<D>,
        query: &OperationsQuery,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<ListedOperation>> {
        let mut builder = QueryBuilder::<D::Db>::new("");
        for piece in listing::operations_statement(query, now) {
            match piece {
                Piece::Sql(text) => builder.push(text),
                Piece::Text(value) => builder.push_bind(value.as_str()),
                Piece::Integer(value) => builder.push_bind(value),
                Piece::Id(value) => builder.push_bind(value),
                Piece::Moment(value) => builder.push_bind(D::stamp(value)),
            };
        }
        let rows: Vec<ListedRow> = builder
            .build_query_as()
            .fetch_all(&mut *connection)
            .instrument(D::statement("SELECT operations"))
            .await?;
        Ok(rows
            .into_iter()
            .map(|listed| {
                Ok(ListedOperation {
                    record: OperationRecord::try_from(listed.row)?,
                    tenant_name: listed.tenant_name.unwrap_or_default(),
                })
            })
            .collect::<Result<_>>()?)
    }

    async fn count_operations(
        connection: &mut Connection<D>,
        now: DateTime<Utc>,
    ) -> StoreResult<OperationCounts> {
        let (in_progress, unresolved, retry_wait, sweep_backlog, oldest_unresolved): (
            i64,
            i64,
            i64,
            i64,
            Option<DateTime<Utc>>,
        ) = sqlx::query_as(sql::COUNT_OPERATIONS)
            .bind(D::stamp(now))
            .fetch_one(&mut *connection)
            .instrument(D::statement("SELECT operation counts"))
            .await?;
        let count = |value: i64| u64::try_from(value).unwrap_or(0);
        Ok(OperationCounts {
            in_progress: count(in_progress),
            unresolved: count(unresolved),
            retry_wait: count(retry_wait),
            sweep_backlog: count(sweep_backlog),
            oldest_unresolved,
            database_now: now,
        })
    }

    async fn ping(connection: &mut Connection<D>) -> StoreResult<()> {
        sqlx::query("SELECT 1")
            .execute(&mut *connection)
            .instrument(D::statement("SELECT 1"))
            .await?;
        Ok(())
    }

    async fn grant(
        connection: &mut Connection<D>,
        token_sha256: &[u8; 32],
        now: DateTime<Utc>,
    ) -> StoreResult<Option<GrantRow>> {
        Ok(sqlx::query_as(AUTHENTICATE)
            .bind(&token_sha256[..])
            .bind(D::stamp(now))
            .fetch_optional(&mut *connection)
            .instrument(D::statement("SELECT tenant_tokens"))
            .await?)
    }

    async fn mark_used(
        connection: &mut Connection<D>,
        token_sha256: &[u8; 32],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(MARK_USED)
            .bind(&token_sha256[..])
            .bind(D::stamp(now))
            .execute(&mut *connection)
            .instrument(D::statement("UPDATE tenant_tokens last_used_at"))
            .await?;
        Ok(())
    }

    async fn active_tenant(
        connection: &mut Connection<D>,
        name: &str,
    ) -> StoreResult<Option<TenantId>> {
        let tenant: Option<(i64,)> = sqlx::query_as(ACTIVE_TENANT)
            .bind(name)
            .fetch_optional(&mut *connection)
            .instrument(D::statement("SELECT tenants"))
            .await?;
        Ok(tenant.map(|(id,)| TenantId(id)))
    }

    async fn insert_tenant(
        connection: &mut Connection<D>,
        name: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<TenantId>> {
        let tenant: Option<i64> = sqlx::query_scalar(INSERT_TENANT)
            .bind(name)
            .bind(D::stamp(now))
            .fetch_optional(&mut *connection)
            .instrument(D::statement("INSERT tenants"))
            .await?;
        Ok(tenant.map(TenantId))
    }

    async fn revoke_tenant(
        connection: &mut Connection<D>,
        name: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<TenantId>> {
        let tenant: Option<i64> = sqlx::query_scalar(REVOKE_TENANT)
            .bind(name)
            .bind(D::stamp(now))
            .fetch_optional(&mut *connection)
            .instrument(D::statement("UPDATE tenants"))
            .await?;
        if let Some(tenant) = tenant {
            sqlx::query(REVOKE_TENANT_TOKENS)
                .bind(tenant)
                .bind(D::stamp(now))
                .execute(&mut *connection)
                .instrument(D::statement("UPDATE tenant_tokens"))
                .await?;
        }
        Ok(tenant.map(TenantId))
    }

    async fn list_tenants(connection: &mut Connection<D>) -> StoreResult<Vec<TenantRow>> {
        Ok(sqlx::query_as(LIST_TENANTS)
            .fetch_all(&mut *connection)
            .instrument(D::statement("SELECT tenants"))
            .await?)
    }

    async fn insert_token(
        connection: &mut Connection<D>,
        tenant: TenantId,
        token: &TokenWrite<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(INSERT_TOKEN)
            .bind(token.token_sha256)
            .bind(tenant.0)
            .bind(D::stamp(now))
            .bind(token.name)
            .bind(token.scopes)
            .bind(token.expires_at.map(D::stamp))
            .execute(&mut *connection)
            .instrument(D::statement("INSERT tenant_tokens"))
            .await?;
        Ok(())
    }

    async fn update_token(
        connection: &mut Connection<D>,
        token: &TokenWrite<'_>,
    ) -> StoreResult<()> {
        sqlx::query(UPDATE_TOKEN)
            .bind(token.token_sha256)
            .bind(token.scopes)
            .bind(token.expires_at.map(D::stamp))
            .execute(&mut *connection)
            .instrument(D::statement("UPDATE tenant_tokens"))
            .await?;
        Ok(())
    }

    async fn token_name_taken(
        connection: &mut Connection<D>,
        tenant: TenantId,
        name: &str,
    ) -> StoreResult<bool> {
        let (taken,): (i64,) = sqlx::query_as(ACTIVE_TOKEN_NAMED)
            .bind(tenant.0)
            .bind(name)
            .fetch_one(&mut *connection)
            .instrument(D::statement("SELECT tenant_tokens"))
            .await?;
        Ok(taken > 0)
    }

    async fn revoke_token(
        connection: &mut Connection<D>,
        tenant: TenantId,
        name: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(REVOKE_TOKEN)
            .bind(tenant.0)
            .bind(name)
            .bind(D::stamp(now))
            .execute(&mut *connection)
            .instrument(D::statement("UPDATE tenant_tokens"))
            .await?;
        Ok(D::rows_affected(&done) > 0)
    }

    async fn revoke_token_by_hash(
        connection: &mut Connection<D>,
        token_sha256: &[u8],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(REVOKE_TOKEN_BY_HASH)
            .bind(token_sha256)
            .bind(D::stamp(now))
            .execute(&mut *connection)
            .instrument(D::statement("UPDATE tenant_tokens"))
            .await?;
        Ok(())
    }

    async fn token_by_hash(
        connection: &mut Connection<D>,
        token_sha256: &[u8],
    ) -> StoreResult<Option<HashOwner>> {
        Ok(sqlx::query_as(TOKEN_BY_HASH)
            .bind(token_sha256)
            .fetch_optional(&mut *connection)
            .instrument(D::statement("SELECT tenant_tokens"))
            .await?)
    }

    async fn active_tokens(
        connection: &mut Connection<D>,
        tenant: TenantId,
    ) -> StoreResult<Vec<StoredToken>> {
        Ok(sqlx::query_as(ACTIVE_TOKENS)
            .bind(tenant.0)
            .fetch_all(&mut *connection)
            .instrument(D::statement("SELECT tenant_tokens"))
            .await?)
    }

    async fn list_tokens(
        connection: &mut Connection<D>,
        tenant: TenantId,
    ) -> StoreResult<Vec<TokenRow>> {
        Ok(sqlx::query_as(LIST_TOKENS)
            .bind(tenant.0)
            .fetch_all(&mut *connection)
            .instrument(D::statement("SELECT tenant_tokens"))
            .await?)
    }

    async fn insert_audit(
        connection: &mut Connection<D>,
        entry: &NewAuditEntry<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(INSERT_AUDIT)
            .bind(D::stamp(now))
            .bind(entry.actor)
            .bind(entry.action)
            .bind(entry.tenant)
            .bind(entry.target)
            .bind(entry.detail)
            .bind(entry.reason)
            .execute(&mut *connection)
            .instrument(D::statement("INSERT audit_log"))
            .await?;
        Ok(())
    }

    async fn insert_operation_audit(
        connection: &mut Connection<D>,
        record: &OperationRecord,
        acted_by: &ActedBy,
        audit: &AuditNote,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let target = record.operation_id.to_string();
        sqlx::query(INSERT_OPERATION_AUDIT)
            .bind(D::stamp(now))
            .bind(acted_by.credential.as_str())
            .bind(audit.action)
            .bind(record.tenant_id.0)
            .bind(target.as_str())
            .bind(audit.detail.as_str())
            .bind(audit.reason.as_deref())
            .execute(&mut *connection)
            .instrument(D::statement("INSERT audit_log"))
            .await?;
        Ok(())
    }

    async fn audit_log(
        connection: &mut Connection<D>,
        tenant: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<AuditRow>> {
        Ok(sqlx::query_as(AUDIT_LOG)
            .bind(tenant)
            .bind(i64::from(limit))
            .fetch_all(&mut *connection)
            .instrument(D::statement("SELECT audit_log"))
            .await?)
    }

    async fn prune_audit(
        connection: &mut Connection<D>,
        before: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let done = sqlx::query(PRUNE_AUDIT)
            .bind(D::stamp(before))
            .execute(&mut *connection)
            .instrument(D::statement("DELETE audit_log"))
            .await?;
        Ok(D::rows_affected(&done))
    }

    async fn insert_hold(
        connection: &mut Connection<D>,
        hold: &HoldWrite<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(INSERT_HOLD)
            .bind(hold.tenant.0)
            .bind(hold.operation)
            .bind(hold.reason)
            .bind(hold.retry_after_ms)
            .bind(D::stamp(now))
            .bind(hold.held_by)
            .bind(MOST_HOLDS)
            .execute(&mut *connection)
            .instrument(D::statement("INSERT holds"))
            .await?;
        Ok(D::rows_affected(&done) == 1)
    }

    async fn delete_hold(
        connection: &mut Connection<D>,
        tenant: TenantId,
        operation: &str,
    ) -> StoreResult<bool> {
        let done = sqlx::query(DELETE_HOLD)
            .bind(tenant.0)
            .bind(operation)
            .execute(&mut *connection)
            .instrument(D::statement("DELETE holds"))
            .await?;
        Ok(D::rows_affected(&done) == 1)
    }

    async fn hold(
        connection: &mut Connection<D>,
        tenant: TenantId,
        operation: &str,
    ) -> StoreResult<Option<HoldRow>> {
        Ok(sqlx::query_as(HOLD)
            .bind(tenant.0)
            .bind(operation)
            .fetch_optional(&mut *connection)
            .instrument(D::statement("SELECT holds"))
            .await?)
    }

    async fn list_holds(connection: &mut Connection<D>) -> StoreResult<Vec<HoldRow>> {
        Ok(sqlx::query_as(LIST_HOLDS)
            .bind(MOST_HOLDS)
            .fetch_all(&mut *connection)
            .instrument(D::statement("SELECT holds"))
            .await?)
    }
}

/// Reads the fence a guarded UPDATE returned: the effects get it stamped in
/// (a new owner's fence is drawn by the store), and the record as written
/// comes back, taken out of the effects (which keep their history entry).
/// No row returned means the guard failed while the store held the row's
/// lock: something other than idemd wrote it, and nothing may be assumed.
fn settle_guarded_update(
    effects: Effects,
    returned_fence: Option<i64>,
) -> Result<(Option<OperationRecord>, Effects)> {
    let fence = returned_fence.ok_or_else(|| {
        Error::Internal("guarded update matched no row while holding its lock".into())
    })?;
    let fence = u64::try_from(fence).map_err(|_| Error::Internal("negative fence".into()))?;
    let mut effects = effects.with_fence(fence);
    // Moved, not copied: a record may carry a result of a megabyte.
    let written = effects.update.take().map(|update| update.next);
    Ok((written, effects))
}
