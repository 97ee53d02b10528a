//! The SQL both databases run, written once, generic over the database:
//! the locked path's statements (lock, clock, guarded write, history), the
//! sweep, reads and history pages (tenants and credentials: credentials.rs). It asks its [`Dialect`] only for
//! what the two databases really do differently: how a write transaction
//! begins, how a row is locked, how a fence is drawn, how history coalesces
//! in SQL, how timestamps are stored, and which errors are transient.

use std::future::Future;

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};
use tracing::Instrument;
use uuid::Uuid;

use super::dialect::Dialect;
use super::error::StoreResult;
use super::row::{HistoryRow, OperationRow, OperationWrite, RowWithClock, signed};
use super::sql;
use super::{OperationCounts, SweepReport};
use crate::domain::transition::decide_sweep;
use crate::domain::{
    Effects, Error, Found, HistoryCap, HistoryEntry, HistoryEvent, HistoryPage, Metadata,
    NewHistoryEntry, OperationId, OperationRecord, Result, SweepPolicy, Target, TenantId,
    UnresolvedPage, UnresolvedQuery,
};

/// The flow and the queries both databases share, for every [`Dialect`]
/// whose database can bind and read the values they use.
pub(crate) trait Shared: Dialect {
    fn sweep_flow(
        &self,
        batch: u32,
        policy: SweepPolicy,
    ) -> impl Future<Output = Result<SweepReport>> + Send;

    fn find_flow(
        &self,
        tenant: TenantId,
        target: &Target,
        history: Option<HistoryPage>,
    ) -> impl Future<Output = Result<Option<Found>>> + Send;

    fn list_unresolved_flow(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> impl Future<Output = Result<UnresolvedPage>> + Send;

    fn count_operations_flow(&self) -> impl Future<Output = Result<OperationCounts>> + Send;

    fn check_ready_flow(&self) -> impl Future<Output = Result<()>> + Send;

    /// The database clock, read inside `connection`'s transaction.
    fn database_now(
        connection: &mut <Self::Db as Database>::Connection,
    ) -> impl Future<Output = StoreResult<DateTime<Utc>>> + Send;

    /// One operation under the write lock.
    fn lock(
        connection: &mut <Self::Db as Database>::Connection,
        tenant: TenantId,
        target: &Target,
    ) -> impl Future<Output = StoreResult<Option<OperationRecord>>> + Send;

    /// Appends `entry` to the operation's history, or counts it into the
    /// last entry, as [`HistoryCap::place`] says. [`Dialect::APPEND_HISTORY`]
    /// gets the entry as `$1` operation_id, `$2` event, `$3` from_state,
    /// `$4` to_state, `$5` fence, `$6` attempt, `$7` detail, `$8` now, `$9`
    /// its coalesce key, `$10` whether it is kept past the cap, `$11` the
    /// cap, and the truncation marker's `$12` event, `$13` detail and `$14`
    /// key.
    fn append_history(
        connection: &mut <Self::Db as Database>::Connection,
        operation_id: OperationId,
        entry: &NewHistoryEntry,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// One operation and the clock, by one statement on `executor`.
    fn read_with_clock<'e>(
        executor: impl Executor<'e, Database = Self::Db>,
        tenant: TenantId,
        target: &Target,
    ) -> impl Future<Output = StoreResult<Option<(OperationRecord, DateTime<Utc>)>>> + Send;

    /// Writes the decided record, guarded by the fence and state it was
    /// decided from, then its history entry. Returns the record as written.
    fn apply(
        connection: &mut <Self::Db as Database>::Connection,
        before: &OperationRecord,
        effects: Effects,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<OperationRecord>> + Send;
}

impl<D> Shared for D
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
    HistoryRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    (i64,): for<'r> FromRow<'r, <D::Db as Database>::Row>,
    (i64, i64, i64, i64): for<'r> FromRow<'r, <D::Db as Database>::Row>,
    (DateTime<Utc>,): for<'r> FromRow<'r, <D::Db as Database>::Row>,
{
    async fn sweep_flow(&self, batch: u32, policy: SweepPolicy) -> Result<SweepReport> {
        let swept = async {
            let mut report = SweepReport::default();
            let mut transaction = self.begin_write().await?;
            let now = D::database_now(&mut transaction).await?;
            // One batch: results past retention first, then retries past
            // their deadline, `batch` records in all.
            let mut due: Vec<OperationRow> = Vec::new();
            for (sql, name) in [
                (D::DUE_FOR_TOMBSTONE, "SELECT operations past retention"),
                (D::DUE_FOR_DEADLINE, "SELECT retries past their deadline"),
            ] {
                let room = i64::from(batch) - i64::try_from(due.len()).unwrap_or(i64::MAX);
                if room <= 0 {
                    break;
                }
                let rows: Vec<OperationRow> = sqlx::query_as(sql)
                    .bind(D::stamp(now))
                    .bind(room)
                    .fetch_all(&mut *transaction)
                    .instrument(D::statement(name))
                    .await?;
                due.extend(rows);
            }
            for row in due {
                let record = OperationRecord::try_from(row)?;
                let Some(decision) = decide_sweep(&record, now, policy) else {
                    continue;
                };
                let after = D::apply(
                    &mut transaction,
                    &record,
                    decision.effects,
                    self.history_cap(),
                    now,
                )
                .await?;
                report.count(&after);
            }
            report.deleted = sqlx::query(D::DELETE_EXPIRED_TOMBSTONES)
                .bind(D::stamp(now))
                .bind(i64::from(batch))
                .execute(&mut *transaction)
                .instrument(D::statement("DELETE operations"))
                .await
                .map(|result| D::rows_affected(&result))?;
            self.commit(transaction).await?;
            Ok(report)
        };
        swept.await.map_err(D::translate)
    }

    async fn find_flow(
        &self,
        tenant: TenantId,
        target: &Target,
        history: Option<HistoryPage>,
    ) -> Result<Option<Found>> {
        let found = async {
            // Without history (the Claim replay path) one statement reads the
            // record and the clock; with history, one snapshot, so that
            // record, history and clock agree.
            let Some(page) = history else {
                let found = D::read_with_clock(self.readers(), tenant, target).await?;
                return found
                    .map(|(record, now)| {
                        Ok(Found {
                            record,
                            history: Vec::new(),
                            more_history: false,
                            now,
                        })
                    })
                    .transpose();
            };
            let mut transaction = self.begin_snapshot().await?;
            let Some((record, now)) = D::read_with_clock(&mut *transaction, tenant, target).await?
            else {
                transaction.rollback().await?;
                return Ok(None);
            };
            // One entry more than the page: whether another page follows.
            let rows: Vec<HistoryRow> = sqlx::query_as(D::SELECT_HISTORY)
                .bind(record.operation_id.0)
                .bind(i64::try_from(page.after).unwrap_or(i64::MAX))
                .bind(i64::from(page.limit) + 1)
                .fetch_all(&mut *transaction)
                .instrument(D::statement("SELECT operation_history"))
                .await?;
            transaction.rollback().await?;
            let mut history = rows
                .into_iter()
                .map(HistoryEntry::try_from)
                .collect::<Result<Vec<_>>>()?;
            let limit = usize::try_from(page.limit).unwrap_or(usize::MAX);
            let more_history = history.len() > limit;
            history.truncate(limit);
            Ok(Some(Found {
                record,
                history,
                more_history,
                now,
            }))
        };
        found.await.map_err(D::translate)
    }

    async fn list_unresolved_flow(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> Result<UnresolvedPage> {
        let page = async {
            let mut transaction = self.begin_read().await?;
            let now = D::database_now(&mut transaction).await?;
            let (after_created, after_id) = match query.after {
                Some((created_at, operation_id)) => {
                    (Some(D::stamp(created_at)), Some(operation_id.0))
                }
                None => (None, None),
            };
            let rows: Vec<OperationRow> = sqlx::query_as(sql::SELECT_UNRESOLVED)
                .bind(tenant.0)
                .bind(D::stamp(now))
                .bind(query.operation.as_deref())
                .bind(after_created)
                .bind(after_id)
                .bind(i64::from(query.limit))
                .fetch_all(&mut *transaction)
                .instrument(D::statement("SELECT operations"))
                .await?;
            transaction.rollback().await?;
            let records = rows
                .into_iter()
                .map(OperationRecord::try_from)
                .collect::<Result<Vec<_>>>()?;
            Ok(UnresolvedPage { records, now })
        };
        page.await.map_err(D::translate)
    }

    async fn count_operations_flow(&self) -> Result<OperationCounts> {
        let counts = async {
            let mut transaction = self.begin_read().await?;
            let now = D::database_now(&mut transaction).await?;
            let (in_progress, unresolved, retry_wait, sweep_backlog): (i64, i64, i64, i64) =
                sqlx::query_as(sql::COUNT_OPERATIONS)
                    .bind(D::stamp(now))
                    .fetch_one(&mut *transaction)
                    .instrument(D::statement("SELECT operation counts"))
                    .await?;
            transaction.rollback().await?;
            let count = |value: i64| u64::try_from(value).unwrap_or(0);
            Ok(OperationCounts {
                in_progress: count(in_progress),
                unresolved: count(unresolved),
                retry_wait: count(retry_wait),
                sweep_backlog: count(sweep_backlog),
                database_now: now,
            })
        };
        counts.await.map_err(D::translate)
    }

    async fn check_ready_flow(&self) -> Result<()> {
        sqlx::query("SELECT 1")
            .execute(self.readers())
            .instrument(D::statement("SELECT 1"))
            .await
            .map_err(|error| D::translate(error.into()))?;
        Ok(())
    }

    async fn database_now(
        connection: &mut <D::Db as Database>::Connection,
    ) -> StoreResult<DateTime<Utc>> {
        let (now,): (DateTime<Utc>,) = sqlx::query_as(D::CLOCK)
            .fetch_one(&mut *connection)
            .instrument(D::statement("SELECT clock"))
            .await?;
        Ok(now)
    }

    async fn lock(
        connection: &mut <D::Db as Database>::Connection,
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
        let row: Option<RowWithClock> = match target {
            Target::Scope(scope) => {
                sqlx::query_as(D::READ_BY_SCOPE)
                    .bind(tenant.0)
                    .bind(scope.operation.as_str())
                    .bind(scope.key.as_str())
                    .fetch_optional(executor)
                    .instrument(D::statement("SELECT operations"))
                    .await?
            }
            Target::Id(operation_id) => {
                sqlx::query_as(D::READ_BY_ID)
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
        connection: &mut <D::Db as Database>::Connection,
        operation_id: OperationId,
        entry: &NewHistoryEntry,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let coalesce_key = entry.coalesce_key();
        let counted = D::count_into_last_history_entry(
            &mut *connection,
            operation_id,
            entry,
            coalesce_key.as_deref(),
            cap,
            now,
        )
        .await?;
        if counted {
            return Ok(());
        }
        sqlx::query(D::APPEND_HISTORY)
            .bind(operation_id.0)
            .bind(entry.event.as_str())
            .bind(entry.from_state.map(|state| state.as_str()))
            .bind(entry.to_state.as_str())
            .bind(signed(entry.fence)?)
            .bind(i32::try_from(entry.attempt).unwrap_or(i32::MAX))
            .bind(entry.detail.as_str())
            .bind(D::stamp(now))
            .bind(coalesce_key.as_deref())
            .bind(entry.kept_past_cap())
            .bind(i32::try_from(cap.max_entries).unwrap_or(i32::MAX))
            .bind(HistoryEvent::HistoryTruncated.as_str())
            .bind(HistoryCap::TRUNCATED_DETAIL)
            .bind(HistoryCap::TRUNCATED_KEY)
            .execute(&mut *connection)
            .instrument(D::statement("INSERT operation_history"))
            .await?;
        Ok(())
    }

    async fn apply(
        connection: &mut <D::Db as Database>::Connection,
        before: &OperationRecord,
        effects: Effects,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> StoreResult<OperationRecord> {
        let mut effects = effects;
        let mut written_record = None;
        if let Some(update) = &effects.update {
            if update.takes_new_fence {
                D::advance_fence(&mut *connection).await?;
            }
            let write = OperationWrite::of(&update.next)?;
            let written_fence: Option<i64> = sqlx::query_scalar(D::GUARDED_UPDATE)
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
                .fetch_optional(&mut *connection)
                .instrument(D::statement("UPDATE operations"))
                .await?;
            let answers_with_drawn_fence = write.last_write_answer_fence == Some(0);
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
        if let Some(history) = &effects.history {
            D::append_history(&mut *connection, before.operation_id, history, cap, now).await?;
        }
        // Without an update (a refusal recorded in history) the record stands.
        Ok(written_record.unwrap_or_else(|| before.clone()))
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
