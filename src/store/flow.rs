//! The one store skeleton both databases run: the transition flow (lock,
//! read the clock, decide, write guarded, append history, commit), the
//! sweep, reads, tenants. It is written once, generic over the database, and
//! asks its [`Dialect`] only for what the two databases really do
//! differently: how a write transaction begins, how a row is locked, how a
//! fence is drawn, how history coalesces in SQL, how timestamps are stored,
//! and which errors are transient.

use std::future::Future;
use std::ops::DerefMut;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Type};
use tracing::{Instrument, instrument};
use uuid::Uuid;

use super::credentials::{CredentialQueries, Credentials, TokenGrant};
use super::error::{ErrorClass, StoreError, StoreResult, connection_class};
use super::row::{HistoryRow, OperationRow, OperationWrite, RowWithClock, signed};
use super::sql;
use super::{
    Applied, ClaimStart, Decide, OperationCounts, PauseHook, PoolUsage, Store, SweepReport,
};
use crate::domain::guarded::GuardedWrite;
use crate::domain::transition::decide_sweep;
use crate::domain::{
    ClaimCommand, Effects, Error, Found, HistoryCap, HistoryEntry, HistoryEvent, HistoryPage,
    Metadata, NewHistoryEntry, OperationId, OperationRecord, Result, SweepPolicy, Target, TenantId,
    UnresolvedPage, UnresolvedQuery,
};

/// What one database does its own way. Everything else is [`Shared`].
pub(crate) trait Dialect: Send + Sync + Sized + 'static {
    type Db: Database;
    /// A timestamp as this database stores it.
    type Stamp: Send + Sync + 'static;

    /// `postgres` or `sqlite`, for logs.
    const KIND: &'static str;
    /// OpenTelemetry's `db.system`.
    const SYSTEM: &'static str;
    /// How many times a transaction that hit a [`ErrorClass::Conflict`] runs in all.
    const TRANSACTION_ATTEMPTS: usize;
    /// One operation, held for the rest of the write transaction.
    const LOCK_BY_SCOPE: &'static str;
    const LOCK_BY_ID: &'static str;
    /// One operation and the clock (`db_now`), read by one statement.
    const READ_BY_SCOPE: &'static str;
    const READ_BY_ID: &'static str;
    /// The database clock, alone.
    const CLOCK: &'static str;
    const GUARDED_UPDATE: &'static str;
    const DUE_FOR_TOMBSTONE: &'static str;
    const DUE_FOR_DEADLINE: &'static str;
    const DELETE_EXPIRED_TOMBSTONES: &'static str;
    /// One page of history ([`sql::select_history_sql`]).
    const SELECT_HISTORY: &'static str;

    fn stamp(moment: DateTime<Utc>) -> Self::Stamp;
    fn rows_affected(result: &<Self::Db as Database>::QueryResult) -> u64;
    /// What the database's own error code (SQLSTATE, SQLite result code)
    /// says: see [`ErrorClass`].
    fn classify_code(code: &str) -> ErrorClass;

    /// The pool's and the connection's own failures read alike everywhere;
    /// database errors by their code.
    fn classify(error: &sqlx::Error) -> ErrorClass {
        if let Some(class) = connection_class(error) {
            return class;
        }
        match error {
            sqlx::Error::Database(database_error) => database_error
                .code()
                .map_or(ErrorClass::Internal, |code| Self::classify_code(&code)),
            _ => ErrorClass::Internal,
        }
    }
    /// The pool reads and read transactions use.
    fn readers(&self) -> &Pool<Self::Db>;

    /// A transaction for reads that must agree with each other (a page and
    /// the clock it was read at).
    fn begin_read(
        &self,
    ) -> impl Future<Output = StoreResult<sqlx::Transaction<'static, Self::Db>>> + Send {
        async { Ok(self.readers().begin().await?) }
    }

    /// A read-only transaction whose statements all read one snapshot, so
    /// that a record and its history agree.
    fn begin_snapshot(
        &self,
    ) -> impl Future<Output = StoreResult<sqlx::Transaction<'static, Self::Db>>> + Send {
        async { Ok(self.readers().begin().await?) }
    }
    fn pause_before_write(&self) -> Option<&PauseHook>;

    /// A write transaction; it derefs to the connection it runs on.
    type Write: DerefMut<Target = <Self::Db as Database>::Connection> + Send;

    /// A transaction that may write, holding whatever write lock the
    /// database needs before its first read.
    fn begin_write(&self) -> impl Future<Output = StoreResult<Self::Write>> + Send;

    /// Makes the transaction's writes durable; `Ok` only once they are.
    fn commit(&self, write: Self::Write) -> impl Future<Output = StoreResult<()>> + Send;

    /// Undoes the transaction's writes.
    fn rollback(&self, write: Self::Write) -> impl Future<Output = StoreResult<()>> + Send;

    /// Runs before a guarded UPDATE that takes a new fence, in its
    /// transaction, so that [`Dialect::GUARDED_UPDATE`]'s fence expression
    /// yields the next fence of the one ever-growing sequence.
    fn advance_fence(
        connection: &mut <Self::Db as Database>::Connection,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Appends a history entry, bound as [`Shared::append_history`] binds
    /// it, as itself or as the truncation marker past the cap
    /// ([`HistoryCap::place`]); a dialect that can also count into the last
    /// entry in this statement does so here.
    const APPEND_HISTORY: &'static str;

    /// Counts `entry` into the operation's last history entry when
    /// [`HistoryCap::place`] says so (their coalesce keys are equal, or the
    /// cap is reached and the last entry is the truncation marker), in one
    /// statement; `false`: nothing counted, append it.
    fn count_into_last_history_entry(
        connection: &mut <Self::Db as Database>::Connection,
        operation_id: OperationId,
        entry: &NewHistoryEntry,
        coalesce_key: Option<&str>,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// How many entries an operation's history holds.
    fn history_cap(&self) -> HistoryCap;

    /// The first step of a Claim ([`Store::insert_or_find`]): the scope's
    /// first record inserted as [`decide_first_claim`] says, or the record
    /// it has, read unlocked with the clock.
    ///
    /// [`decide_first_claim`]: crate::domain::decide_first_claim
    fn insert_or_find(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> impl Future<Output = StoreResult<Option<ClaimStart>>> + Send;

    /// Runs an owner write's common case as one guarded statement, if this
    /// database can: `None` when it did not apply (the guard did not hold,
    /// or the dialect has no such path) and the locked path must decide.
    fn write_guarded(
        &self,
        tenant: TenantId,
        guarded: GuardedWrite,
    ) -> impl Future<Output = StoreResult<Option<Applied>>> + Send {
        let _ = (tenant, guarded);
        std::future::ready(Ok(None))
    }

    fn pool_usage(&self) -> PoolUsage;

    /// See [`Store::listen_for_changes`]; a store that one process owns has
    /// no other writers to hear from.
    fn listen_for_changes(
        &self,
        changed: &(dyn Fn(OperationId) + Send + Sync),
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = changed;
        std::future::pending()
    }

    fn close(&self) -> impl Future<Output = ()> + Send;

    /// Tells other replicas that an operation changed state, after the
    /// change committed (best effort: their waiters poll anyway).
    fn announce_change(&self, operation_id: OperationId) {
        let _ = operation_id;
    }
}

/// A child span per statement, so a trace shows where a call's time went.
pub(crate) fn statement_span(system: &'static str, name: &'static str) -> tracing::Span {
    tracing::info_span!(
        "db.statement",
        otel.name = name,
        otel.kind = "client",
        db.system = system,
        db.operation = name,
    )
}

/// The flow and the queries both databases share, for every [`Dialect`]
/// whose database can bind and read the values they use.
pub(crate) trait Shared: Dialect {
    /// A store error as the caller sees it.
    fn translate(error: StoreError) -> Error {
        error.into_domain(Self::classify)
    }

    fn statement(name: &'static str) -> tracing::Span {
        statement_span(Self::SYSTEM, name)
    }

    fn transition_flow(
        &self,
        tenant: TenantId,
        target: &Target,
        decide: &Decide<'_>,
    ) -> impl Future<Output = Result<Option<Applied>>> + Send;

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
    async fn transition_flow(
        &self,
        tenant: TenantId,
        target: &Target,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>> {
        let mut attempt = 1;
        loop {
            match try_transition(self, tenant, target, decide).await {
                Err(error)
                    if attempt < D::TRANSACTION_ATTEMPTS
                        && error.class(D::classify) == ErrorClass::Conflict =>
                {
                    attempt += 1;
                }
                result => return result.map_err(D::translate),
            }
        }
    }

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
                .bind(write.taken_over_deadline_fence)
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

/// Every store is a dialect running the shared flow. Errors are translated
/// inside the flows; spans name the call and the database.
#[async_trait]
impl<D: Shared + CredentialQueries + Credentials> Store for D {
    fn kind(&self) -> &'static str {
        D::KIND
    }

    #[instrument(name = "store.insert_or_find", skip_all, fields(db.system = D::SYSTEM))]
    async fn insert_or_find(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> Result<Option<ClaimStart>> {
        Dialect::insert_or_find(self, tenant, operation_id, command)
            .await
            .map_err(D::translate)
    }

    #[instrument(name = "store.write", skip_all, fields(db.system = D::SYSTEM))]
    async fn write(
        &self,
        tenant: TenantId,
        guarded: GuardedWrite,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>> {
        let target = Target::Id(guarded.operation_id);
        let written = self
            .write_guarded(tenant, guarded)
            .await
            .map_err(D::translate)?;
        if let Some(applied) = written {
            self.announce_change(applied.record.operation_id);
            return Ok(Some(applied));
        }
        self.transition_flow(tenant, &target, decide).await
    }

    #[instrument(name = "store.transition", skip_all, fields(db.system = D::SYSTEM))]
    async fn transition(
        &self,
        tenant: TenantId,
        target: &Target,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>> {
        self.transition_flow(tenant, target, decide).await
    }

    #[instrument(name = "store.find", skip_all, fields(db.system = D::SYSTEM))]
    async fn find(
        &self,
        tenant: TenantId,
        target: &Target,
        history: Option<HistoryPage>,
    ) -> Result<Option<Found>> {
        self.find_flow(tenant, target, history).await
    }

    #[instrument(name = "store.list_unresolved", skip_all, fields(db.system = D::SYSTEM))]
    async fn list_unresolved(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> Result<UnresolvedPage> {
        self.list_unresolved_flow(tenant, query).await
    }

    #[instrument(name = "store.sweep", skip_all, fields(db.system = D::SYSTEM))]
    async fn sweep(&self, batch: u32, policy: SweepPolicy) -> Result<SweepReport> {
        self.sweep_flow(batch, policy).await
    }

    #[instrument(name = "store.count_operations", skip_all, fields(db.system = D::SYSTEM))]
    async fn count_operations(&self) -> Result<OperationCounts> {
        self.count_operations_flow().await
    }

    fn pool_usage(&self) -> PoolUsage {
        Dialect::pool_usage(self)
    }

    async fn authenticate(&self, token_sha256: &[u8; 32]) -> Result<Option<TokenGrant>> {
        self.authenticate_token(token_sha256).await
    }

    async fn tenant_by_name(&self, name: &str) -> Result<Option<TenantId>> {
        self.active_tenant(name).await
    }

    async fn record_tokens_used(&self, token_hashes: &[[u8; 32]]) -> Result<()> {
        self.mark_tokens_used(token_hashes).await
    }

    fn credentials(&self) -> &dyn Credentials {
        self
    }

    async fn listen_for_changes(
        &self,
        changed: &(dyn Fn(OperationId) + Send + Sync),
    ) -> Result<()> {
        Dialect::listen_for_changes(self, changed).await
    }

    async fn check_ready(&self) -> Result<()> {
        self.check_ready_flow().await
    }

    async fn close(&self) {
        Dialect::close(self).await;
    }
}

/// Lock, read the clock (after the lock is held: the time the decision is
/// made at), decide, write, commit.
async fn try_transition<D: Shared>(
    dialect: &D,
    tenant: TenantId,
    target: &Target,
    decide: &Decide<'_>,
) -> StoreResult<Option<Applied>> {
    let mut transaction = dialect.begin_write().await?;
    let Some(record) = D::lock(&mut transaction, tenant, target).await? else {
        dialect.rollback(transaction).await?;
        return Ok(None);
    };
    let now = D::database_now(&mut transaction).await?;
    if let Some(pause) = dialect.pause_before_write() {
        pause().await;
    }
    let decision = decide(&record, now);
    if decision.effects.is_empty() {
        dialect.rollback(transaction).await?;
        return Ok(Some(Applied {
            record,
            answer: decision.answer,
            now,
            record_changed: false,
        }));
    }
    let record_after = D::apply(
        &mut transaction,
        &record,
        decision.effects,
        dialect.history_cap(),
        now,
    )
    .await?;
    dialect.commit(transaction).await?;
    if record_after.state != record.state {
        dialect.announce_change(record.operation_id);
    }
    Ok(Some(Applied {
        record_changed: record_after != record,
        record: record_after,
        answer: decision.answer,
        now,
    }))
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
