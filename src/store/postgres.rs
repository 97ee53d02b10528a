//! The production store. Races are settled by Postgres: the unique scope
//! constraint for first claims, `SELECT … FOR UPDATE` for every other
//! transition, and an UPDATE guarded by the fence and state it read.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};
use tracing::{Instrument, instrument, warn};

use super::row::{
    HistoryRow, OperationRow, OperationWrite, bind_guarded_update, guarded_update_sql,
    operation_columns, signed,
};
use super::{Applied, Decide, OperationCounts, PauseHook, PoolUsage, Store, SweepReport};
use crate::domain::transition::decide_sweep;
use crate::domain::{
    ClaimCommand, Effects, Error, Found, HistoryEntry, NewHistoryEntry, OperationId,
    OperationRecord, Result, Target, TenantId, UnresolvedPage, UnresolvedQuery,
};

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// A row and the database clock, read by one statement.
#[derive(sqlx::FromRow)]
struct RowWithClock {
    #[sqlx(flatten)]
    row: OperationRow,
    db_now: DateTime<Utc>,
}

/// Serialization failures and deadlocks are retried this many times in all.
const TRANSACTION_ATTEMPTS: usize = 5;

#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    pause_before_write: Option<PauseHook>,
    /// Send NOTIFY on state changes, so waiting Claims on other replicas wake
    /// at once. Off for Postgres-compatible engines without LISTEN/NOTIFY:
    /// waiters poll anyway.
    notify_changes: bool,
}

/// The channel state changes are announced on; the payload is the operation_id.
const CHANGES_CHANNEL: &str = "idemd_operation_changed";

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PostgresStore")
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
pub struct PostgresOptions {
    pub url: String,
    pub max_connections: u32,
    pub acquire_timeout: Duration,
}

impl PostgresStore {
    pub async fn connect(options: &PostgresOptions) -> Result<Self> {
        let connect_options: PgConnectOptions = options
            .url
            .parse()
            .map_err(|error| Error::Internal(format!("invalid DATABASE_URL: {error}")))?;
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect_options.application_name("idemd"))
            .await
            .map_err(map_error)?;
        Ok(Self::from_pool(pool))
    }

    pub fn from_pool(pool: PgPool) -> Self {
        Self {
            pool,
            pause_before_write: None,
            notify_changes: true,
        }
    }

    /// For engines without LISTEN/NOTIFY: no NOTIFY is sent, nothing listens.
    pub fn without_change_notifications(mut self) -> Self {
        self.notify_changes = false;
        self
    }

    /// The same store, pausing in every transition between read and write.
    pub fn with_pause_before_write(&self, hook: PauseHook) -> Self {
        Self {
            pause_before_write: Some(hook),
            ..self.clone()
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies pending migrations. sqlx holds an advisory lock meanwhile, so
    /// replicas starting together migrate once.
    pub async fn migrate(&self) -> Result<()> {
        MIGRATOR
            .run(&self.pool)
            .await
            .map_err(|error| Error::Internal(format!("migration failed: {error}")))
    }

    /// Acknowledged results must survive a crash; with asynchronous commit
    /// they may not.
    pub async fn warn_if_commits_are_asynchronous(&self) -> Result<()> {
        let setting: String = sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
            .fetch_one(&self.pool)
            .instrument(statement("SHOW synchronous_commit"))
            .await
            .map_err(map_error)?;
        if setting == "off" {
            warn!(
                synchronous_commit = %setting,
                "postgres synchronous_commit is off: a database crash can lose results that \
                 idemd already acknowledged, and a retry would then execute the effect again"
            );
        }
        Ok(())
    }

    async fn try_transition(
        &self,
        tenant: TenantId,
        target: &Target,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>, sqlx::Error> {
        let mut transaction = self.pool.begin().await?;
        let Some(row) = lock(&mut transaction, tenant, target).await? else {
            return Ok(None);
        };
        // Read after the lock is held: the clock of the moment we decide.
        let now = database_now(&mut transaction).await?;
        let record = OperationRecord::try_from(row).map_err(decode_error)?;
        if let Some(pause) = &self.pause_before_write {
            pause().await;
        }
        let decision = decide(&record, now);
        if decision.effects.is_empty() {
            transaction.commit().await?;
            return Ok(Some(Applied {
                record,
                answer: decision.answer,
                now,
                record_changed: false,
            }));
        }
        let record_after = apply(&mut transaction, &record, decision.effects, now).await?;
        if self.notify_changes && record_after.state != record.state {
            // Delivered at commit, and only if it commits.
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CHANGES_CHANNEL)
                .bind(record.operation_id.to_string())
                .execute(&mut *transaction)
                .instrument(statement("NOTIFY operation changed"))
                .await?;
        }
        transaction.commit().await?;
        Ok(Some(Applied {
            record_changed: record_after != record,
            record: record_after,
            answer: decision.answer,
            now,
        }))
    }
}

/// The database's clock, which decides every expiry. Read inside the
/// transaction, after any lock it waits for, so decisions use the time they
/// are made at.
async fn database_now(
    transaction: &mut Transaction<'_, Postgres>,
) -> Result<DateTime<Utc>, sqlx::Error> {
    sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(&mut **transaction)
        .instrument(statement("SELECT clock"))
        .await
}

async fn lock(
    transaction: &mut Transaction<'_, Postgres>,
    tenant: TenantId,
    target: &Target,
) -> Result<Option<OperationRow>, sqlx::Error> {
    match target {
        Target::Scope(scope) => {
            sqlx::query_as(concat!(
                "SELECT ",
                operation_columns!(),
                " FROM operations WHERE tenant_id = $1 AND operation = $2 AND idempotency_key = $3 \
                 FOR UPDATE"
            ))
            .bind(tenant.0)
            .bind(&scope.operation)
            .bind(&scope.key)
            .fetch_optional(&mut **transaction)
            .instrument(statement("SELECT FOR UPDATE operations"))
            .await
        }
        Target::Id(operation_id) => {
            sqlx::query_as(concat!(
                "SELECT ",
                operation_columns!(),
                " FROM operations WHERE tenant_id = $1 AND operation_id = $2 FOR UPDATE"
            ))
            .bind(tenant.0)
            .bind(operation_id.0)
            .fetch_optional(&mut **transaction)
            .instrument(statement("SELECT FOR UPDATE operations"))
            .await
        }
    }
}

async fn select_with_clock<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    tenant: TenantId,
    target: &Target,
) -> Result<Option<RowWithClock>> {
    match target {
        Target::Scope(scope) => sqlx::query_as(concat!(
            "SELECT ",
            operation_columns!(),
            ", clock_timestamp() AS db_now FROM operations \
             WHERE tenant_id = $1 AND operation = $2 AND idempotency_key = $3"
        ))
        .bind(tenant.0)
        .bind(&scope.operation)
        .bind(&scope.key)
        .fetch_optional(executor)
        .instrument(statement("SELECT operations"))
        .await
        .map_err(map_error),
        Target::Id(operation_id) => sqlx::query_as(concat!(
            "SELECT ",
            operation_columns!(),
            ", clock_timestamp() AS db_now FROM operations \
             WHERE tenant_id = $1 AND operation_id = $2"
        ))
        .bind(tenant.0)
        .bind(operation_id.0)
        .fetch_optional(executor)
        .instrument(statement("SELECT operations"))
        .await
        .map_err(map_error),
    }
}

/// Writes the decided record, guarded by the fence and state it was decided
/// from, then appends its history entry. Returns the record as written.
async fn apply(
    transaction: &mut Transaction<'_, Postgres>,
    before: &OperationRecord,
    effects: Effects,
    now: DateTime<Utc>,
) -> Result<OperationRecord, sqlx::Error> {
    let mut effects = effects;
    let mut written_record = None;
    if let Some(update) = &effects.update {
        let write = OperationWrite::of(&update.next).map_err(decode_error)?;
        let written_fence: Option<i64> = bind_guarded_update!(
            sqlx::query_scalar(guarded_update_sql!(
                "CASE WHEN $4 THEN nextval('operation_fence') ELSE fence END"
            )),
            before,
            signed(before.fence).map_err(decode_error)?,
            write,
            update.takes_new_fence,
            |moment: DateTime<Utc>| moment
        )
        .fetch_optional(&mut **transaction)
        .instrument(statement("UPDATE operations"))
        .await?;
        let (written, stamped) =
            super::settle_guarded_update(effects, written_fence).map_err(decode_error)?;
        effects = stamped;
        written_record = written;
    }
    if let Some(history) = &effects.history {
        append_history(transaction, before.operation_id, history, now).await?;
    }
    // Without an update (a refusal recorded in history) the record stands.
    Ok(written_record.unwrap_or_else(|| before.clone()))
}

/// Appends a history entry, or counts it into the last one when it repeats a
/// coalescing event (the same refusal of the same fence, or another renewal).
async fn append_history(
    transaction: &mut Transaction<'_, Postgres>,
    operation_id: OperationId,
    entry: &NewHistoryEntry,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "WITH last AS ( \
             SELECT sequence, event, fence, detail, to_state FROM operation_history \
             WHERE operation_id = $1 ORDER BY sequence DESC LIMIT 1 \
         ), coalesced AS ( \
             UPDATE operation_history AS history SET count = history.count + 1, last_at = $8 \
             FROM last \
             WHERE $9 AND history.operation_id = $1 AND history.sequence = last.sequence \
               AND last.event = $2 AND last.fence = $5 AND last.detail = $7 AND last.to_state = $4 \
             RETURNING history.sequence \
         ) \
         INSERT INTO operation_history \
             (operation_id, sequence, event, from_state, to_state, fence, attempt, detail, \
              count, first_at, last_at) \
         SELECT $1, COALESCE((SELECT sequence FROM last), 0) + 1, $2, $3, $4, $5, $6, $7, 1, $8, $8 \
         WHERE NOT EXISTS (SELECT 1 FROM coalesced)",
    )
    .bind(operation_id.0)
    .bind(entry.event.as_str())
    .bind(entry.from_state.map(|state| state.as_str()))
    .bind(entry.to_state.as_str())
    .bind(signed(entry.fence).map_err(decode_error)?)
    .bind(i32::try_from(entry.attempt).unwrap_or(i32::MAX))
    .bind(&entry.detail)
    .bind(now)
    .bind(entry.event.coalesces())
    .execute(&mut **transaction)
    .instrument(statement("INSERT operation_history"))
    .await?;
    Ok(())
}

#[async_trait]
impl Store for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    #[instrument(name = "store.postgres.insert_new", skip_all)]
    async fn insert_new(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> Result<Option<OperationRecord>> {
        // One statement: the insert settles concurrent first claims on the
        // unique scope, and its history entry lands atomically with it.
        let row: Option<OperationRow> = sqlx::query_as(concat!(
            "WITH clock AS (SELECT clock_timestamp() AS now), inserted AS ( \
                 INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key, \
                     fingerprint, state, fence, attempt, max_attempts, claim_token, lease_ms, \
                     max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at, \
                     operation_deadline_at, created_at, updated_at) \
                 SELECT $1, $2, $3, $4, $5, 'in_progress', nextval('operation_fence'), 1, $6, $7, \
                     $8, $9, $10, \
                     now + make_interval(secs => LEAST($8, $9) / 1000.0), \
                     now + make_interval(secs => $9 / 1000.0), \
                     now + make_interval(secs => $11 / 1000.0), now, now \
                 FROM clock \
                 ON CONFLICT ON CONSTRAINT operations_scope DO NOTHING \
                 RETURNING * \
             ), history AS ( \
                 INSERT INTO operation_history (operation_id, sequence, event, from_state, \
                     to_state, fence, attempt, detail, count, first_at, last_at) \
                 SELECT operation_id, 1, 'CLAIMED', NULL, 'in_progress', fence, 1, '', 1, \
                     created_at, created_at FROM inserted \
             ) SELECT ",
            operation_columns!(),
            " FROM inserted"
        ))
        .bind(operation_id.0)
        .bind(tenant.0)
        .bind(&command.scope.operation)
        .bind(&command.scope.key)
        .bind(&command.fingerprint.0[..])
        .bind(i32::try_from(command.max_attempts).unwrap_or(i32::MAX))
        .bind(&command.claim_token)
        .bind(command.lease.num_milliseconds())
        .bind(command.max_attempt_duration.num_milliseconds())
        .bind(command.retention.num_milliseconds())
        .bind(
            command
                .operation_deadline
                .map(|deadline| deadline.num_milliseconds()),
        )
        .fetch_optional(&self.pool)
        .instrument(statement("INSERT operations"))
        .await
        .map_err(map_error)?;
        row.map(OperationRecord::try_from).transpose()
    }

    #[instrument(name = "store.postgres.transition", skip_all)]
    async fn transition(
        &self,
        tenant: TenantId,
        target: &Target,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>> {
        let mut attempt = 1;
        loop {
            match self.try_transition(tenant, target, decide).await {
                Err(error) if attempt < TRANSACTION_ATTEMPTS && is_transient_conflict(&error) => {
                    attempt += 1;
                }
                result => return result.map_err(map_error),
            }
        }
    }

    #[instrument(name = "store.postgres.find", skip_all)]
    async fn find(
        &self,
        tenant: TenantId,
        target: &Target,
        include_history: bool,
    ) -> Result<Option<Found>> {
        // The clock is read by the same statement: one round trip when no
        // history is wanted (the Claim replay path); with history, one
        // transaction so the two agree.
        if !include_history {
            let Some(RowWithClock { row, db_now: now }) =
                select_with_clock(&self.pool, tenant, target).await?
            else {
                return Ok(None);
            };
            return Ok(Some(Found {
                record: OperationRecord::try_from(row)?,
                history: Vec::new(),
                now,
            }));
        }
        let mut transaction = self.pool.begin().await.map_err(map_error)?;
        let found = select_with_clock(&mut *transaction, tenant, target).await?;
        let Some(RowWithClock { row, db_now: now }) = found else {
            return Ok(None);
        };
        let record = OperationRecord::try_from(row)?;
        let history = {
            let rows: Vec<HistoryRow> = sqlx::query_as(
                "SELECT sequence, event, from_state, to_state, fence, attempt, detail, count, \
                     first_at, last_at \
                 FROM operation_history WHERE operation_id = $1 ORDER BY sequence",
            )
            .bind(record.operation_id.0)
            .fetch_all(&mut *transaction)
            .instrument(statement("SELECT operation_history"))
            .await
            .map_err(map_error)?;
            rows.into_iter()
                .map(HistoryEntry::try_from)
                .collect::<Result<Vec<_>>>()?
        };
        transaction.commit().await.map_err(map_error)?;
        Ok(Some(Found {
            record,
            history,
            now,
        }))
    }

    #[instrument(name = "store.postgres.list_unresolved", skip_all)]
    async fn list_unresolved(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> Result<UnresolvedPage> {
        let mut transaction = self.pool.begin().await.map_err(map_error)?;
        let now = database_now(&mut transaction).await.map_err(map_error)?;
        let (after_created, after_id) = match query.after {
            Some((created_at, operation_id)) => (Some(created_at), Some(operation_id.0)),
            None => (None, None),
        };
        let rows: Vec<OperationRow> = sqlx::query_as(concat!(
            "SELECT ",
            operation_columns!(),
            " FROM operations \
              WHERE tenant_id = $1 AND state IN ('in_progress', 'unknown') \
                AND (state = 'unknown' OR lease_expires_at <= $2) \
                AND ($3::text IS NULL OR operation = $3) \
                AND ($4::timestamptz IS NULL OR (created_at, operation_id) > ($4, $5)) \
              ORDER BY created_at, operation_id LIMIT $6"
        ))
        .bind(tenant.0)
        .bind(now)
        .bind(query.operation.as_deref())
        .bind(after_created)
        .bind(after_id)
        .bind(i64::from(query.limit))
        .fetch_all(&mut *transaction)
        .instrument(statement("SELECT operations"))
        .await
        .map_err(map_error)?;
        transaction.commit().await.map_err(map_error)?;
        let records = rows
            .into_iter()
            .map(OperationRecord::try_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(UnresolvedPage { records, now })
    }

    #[instrument(name = "store.postgres.sweep", skip_all)]
    async fn sweep(&self, batch: u32, tombstone_retention: TimeDelta) -> Result<SweepReport> {
        let mut report = SweepReport::default();
        let mut transaction = self.pool.begin().await.map_err(map_error)?;
        let now = database_now(&mut transaction).await.map_err(map_error)?;
        // Rows a Claim or another sweeper holds are skipped, not waited for.
        let due: Vec<OperationRow> = sqlx::query_as(concat!(
            "SELECT ",
            operation_columns!(),
            " FROM operations \
              WHERE (state IN ('succeeded', 'failed') AND retain_until <= $1) \
                 OR (state = 'retry_wait' AND operation_deadline_at <= $1) \
              LIMIT $2 FOR UPDATE SKIP LOCKED"
        ))
        .bind(now)
        .bind(i64::from(batch))
        .fetch_all(&mut *transaction)
        .instrument(statement("SELECT FOR UPDATE operations"))
        .await
        .map_err(map_error)?;
        for row in due {
            let record = OperationRecord::try_from(row)?;
            let Some(decision) = decide_sweep(&record, now, tombstone_retention) else {
                continue;
            };
            let after = apply(&mut transaction, &record, decision.effects, now)
                .await
                .map_err(map_error)?;
            report.count(&after);
        }
        // History goes with the operation (ON DELETE CASCADE).
        report.deleted = sqlx::query(
            "DELETE FROM operations WHERE operation_id IN ( \
                 SELECT operation_id FROM operations WHERE state = 'expired' AND retain_until <= $1 \
                 ORDER BY retain_until LIMIT $2 FOR UPDATE SKIP LOCKED)",
        )
        .bind(now)
        .bind(i64::from(batch))
        .execute(&mut *transaction)
        .instrument(statement("DELETE operations"))
        .await
        .map_err(map_error)?
        .rows_affected();
        transaction.commit().await.map_err(map_error)?;
        Ok(report)
    }

    #[instrument(name = "store.postgres.count_operations", skip_all)]
    async fn count_operations(&self) -> Result<OperationCounts> {
        // Partial indexes keep these to the unresolved and terminal rows.
        let (in_progress, unresolved, retry_wait, sweep_backlog): (i64, i64, i64, i64) =
            sqlx::query_as(
                "WITH clock AS (SELECT clock_timestamp() AS now) SELECT \
                     (SELECT count(*) FROM operations, clock WHERE state = 'in_progress' \
                         AND lease_expires_at > clock.now), \
                     (SELECT count(*) FROM operations, clock WHERE state = 'unknown' \
                         OR (state = 'in_progress' AND lease_expires_at <= clock.now)), \
                     (SELECT count(*) FROM operations WHERE state = 'retry_wait'), \
                     (SELECT count(*) FROM operations, clock \
                         WHERE (state IN ('succeeded', 'failed', 'expired') AND retain_until <= clock.now) \
                            OR (state = 'retry_wait' AND operation_deadline_at <= clock.now))",
            )
            .fetch_one(&self.pool)
            .instrument(statement("SELECT operation counts"))
            .await
            .map_err(map_error)?;
        let count = |value: i64| u64::try_from(value).unwrap_or(0);
        Ok(OperationCounts {
            in_progress: count(in_progress),
            unresolved: count(unresolved),
            retry_wait: count(retry_wait),
            sweep_backlog: count(sweep_backlog),
        })
    }

    fn pool_usage(&self) -> PoolUsage {
        PoolUsage {
            size: self.pool.size(),
            idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
            max: self.pool.options().get_max_connections(),
        }
    }

    async fn authenticate(&self, token_sha256: &[u8; 32]) -> Result<Option<TenantId>> {
        let tenant: Option<i64> = sqlx::query_scalar(
            "SELECT tenants.tenant_id FROM tenant_tokens JOIN tenants USING (tenant_id) \
             WHERE token_sha256 = $1 AND tenant_tokens.revoked_at IS NULL \
               AND tenants.revoked_at IS NULL",
        )
        .bind(&token_sha256[..])
        .fetch_optional(&self.pool)
        .instrument(statement("SELECT tenant_tokens"))
        .await
        .map_err(map_error)?;
        Ok(tenant.map(TenantId))
    }

    async fn create_tenant(&self, name: &str, token_sha256: &[u8; 32]) -> Result<TenantId> {
        let mut transaction = self.pool.begin().await.map_err(map_error)?;
        let tenant: Option<i64> = sqlx::query_scalar(
            "INSERT INTO tenants (name) VALUES ($1) \
             ON CONFLICT (name) WHERE revoked_at IS NULL DO NOTHING RETURNING tenant_id",
        )
        .bind(name)
        .fetch_optional(&mut *transaction)
        .instrument(statement("INSERT tenants"))
        .await
        .map_err(map_error)?;
        let tenant =
            tenant.ok_or_else(|| Error::invalid("name", "an active tenant has this name"))?;
        sqlx::query("INSERT INTO tenant_tokens (token_sha256, tenant_id) VALUES ($1, $2)")
            .bind(&token_sha256[..])
            .bind(tenant)
            .execute(&mut *transaction)
            .instrument(statement("INSERT tenant_tokens"))
            .await
            .map_err(map_error)?;
        transaction.commit().await.map_err(map_error)?;
        Ok(TenantId(tenant))
    }

    async fn revoke_tenant(&self, name: &str) -> Result<bool> {
        let mut transaction = self.pool.begin().await.map_err(map_error)?;
        let tenant: Option<i64> = sqlx::query_scalar(
            "UPDATE tenants SET revoked_at = clock_timestamp() \
             WHERE name = $1 AND revoked_at IS NULL RETURNING tenant_id",
        )
        .bind(name)
        .fetch_optional(&mut *transaction)
        .instrument(statement("UPDATE tenants"))
        .await
        .map_err(map_error)?;
        if let Some(tenant) = tenant {
            sqlx::query(
                "UPDATE tenant_tokens SET revoked_at = clock_timestamp() \
                 WHERE tenant_id = $1 AND revoked_at IS NULL",
            )
            .bind(tenant)
            .execute(&mut *transaction)
            .instrument(statement("UPDATE tenant_tokens"))
            .await
            .map_err(map_error)?;
        }
        transaction.commit().await.map_err(map_error)?;
        Ok(tenant.is_some())
    }

    async fn listen_for_changes(
        &self,
        changed: &(dyn Fn(OperationId) + Send + Sync),
    ) -> Result<()> {
        if !self.notify_changes {
            std::future::pending::<()>().await;
        }
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(map_error)?;
        listener.listen(CHANGES_CHANNEL).await.map_err(map_error)?;
        loop {
            let notification = listener.recv().await.map_err(map_error)?;
            if let Ok(operation_id) = uuid::Uuid::parse_str(notification.payload()) {
                changed(OperationId(operation_id));
            }
        }
    }

    async fn check_ready(&self) -> Result<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .instrument(statement("SELECT 1"))
            .await
            .map_err(map_error)?;
        Ok(())
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

fn statement(name: &'static str) -> tracing::Span {
    super::statement_span("postgresql", name)
}

/// A domain error raised inside a transaction, carried out through sqlx's type.
fn decode_error(error: Error) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(error))
}

fn sqlstate(error: &sqlx::Error) -> Option<String> {
    match error {
        sqlx::Error::Database(database_error) => {
            database_error.code().map(|code| code.into_owned())
        }
        _ => None,
    }
}

/// Serialization failure or deadlock: the transaction may simply be re-run.
fn is_transient_conflict(error: &sqlx::Error) -> bool {
    matches!(sqlstate(error).as_deref(), Some("40001" | "40P01"))
}

pub(crate) fn map_error(error: sqlx::Error) -> Error {
    if let sqlx::Error::Decode(source) = &error
        && let Some(domain_error) = source.downcast_ref::<Error>()
    {
        return domain_error.clone();
    }
    let unavailable = match &error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        // Connection exceptions, resources, operator intervention, and
        // conflicts that survived their retries.
        sqlx::Error::Database(_) => sqlstate(&error).is_some_and(|code| {
            code.starts_with("08")
                || code.starts_with("53")
                || code.starts_with("57P")
                || code == "40001"
                || code == "40P01"
        }),
        _ => false,
    };
    if unavailable {
        warn!(error = %error, "database unavailable");
        Error::unavailable("the database is unavailable")
    } else {
        Error::Internal(format!("database error: {error}"))
    }
}
