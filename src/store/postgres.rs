//! The production store. Races are settled by Postgres: the unique scope
//! constraint for first claims, `SELECT … FOR UPDATE` for every other
//! transition, and an UPDATE guarded by the fence and state it read. The
//! flow is the shared one ([`super::flow`]); this file holds what Postgres
//! does its own way.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};
use tracing::{Instrument, warn};

use super::error::{ErrorClass, StoreResult};
use super::flow::{Dialect, Shared};
use super::row::OperationRow;
use super::sql::{
    delete_expired_tombstones_sql, due_for_sweep_sql, guarded_update_sql, operation_columns,
    select_operation_sql,
};
use super::{PauseHook, PoolUsage};
use crate::domain::{
    ClaimCommand, Error, OperationId, OperationRecord, Result, TenantId, decide_first_claim,
};

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

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
            .map_err(|error| Self::translate(error.into()))?;
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
        super::run_migrations(&MIGRATOR, &self.pool).await
    }

    /// Acknowledged results must survive a crash; with asynchronous commit
    /// they may not.
    pub async fn warn_if_commits_are_asynchronous(&self) -> Result<()> {
        let setting: String = sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
            .fetch_one(&self.pool)
            .instrument(Self::statement("SHOW synchronous_commit"))
            .await
            .map_err(|error| Self::translate(error.into()))?;
        if setting == "off" {
            warn!(
                synchronous_commit = %setting,
                "postgres synchronous_commit is off: a database crash can lose results that \
                 idemd already acknowledged, and a retry would then execute the effect again"
            );
        }
        Ok(())
    }
}

impl Dialect for PostgresStore {
    type Db = Postgres;
    type Stamp = DateTime<Utc>;

    const KIND: &'static str = "postgres";
    const SYSTEM: &'static str = "postgresql";
    const TRANSACTION_ATTEMPTS: usize = 5;
    const LOCK_BY_SCOPE: &'static str = select_operation_sql!(by_scope, "", " FOR UPDATE");
    const LOCK_BY_ID: &'static str = select_operation_sql!(by_id, "", " FOR UPDATE");
    const READ_BY_SCOPE: &'static str =
        select_operation_sql!(by_scope, ", clock_timestamp() AS db_now", "");
    const READ_BY_ID: &'static str =
        select_operation_sql!(by_id, ", clock_timestamp() AS db_now", "");
    const CLOCK: &'static str = "SELECT clock_timestamp()";
    const GUARDED_UPDATE: &'static str = guarded_update_sql!("nextval('operation_fence')");
    // Rows a Claim or another sweeper holds are skipped, not waited for.
    const DUE_FOR_SWEEP: &'static str = due_for_sweep_sql!(" FOR UPDATE SKIP LOCKED");
    const DELETE_EXPIRED_TOMBSTONES: &'static str =
        delete_expired_tombstones_sql!(" FOR UPDATE SKIP LOCKED");
    // One statement: count into the last entry when the keys match, append
    // otherwise.
    const APPEND_HISTORY: &'static str = "WITH last AS ( \
             SELECT sequence, coalesce_key FROM operation_history \
             WHERE operation_id = $1 ORDER BY sequence DESC LIMIT 1 \
         ), coalesced AS ( \
             UPDATE operation_history AS history SET count = history.count + 1, last_at = $8 \
             FROM last \
             WHERE history.operation_id = $1 AND history.sequence = last.sequence \
               AND last.coalesce_key = $9 \
             RETURNING history.sequence \
         ) \
         INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state, \
             fence, attempt, detail, count, first_at, last_at, coalesce_key) \
         SELECT $1, COALESCE((SELECT sequence FROM last), 0) + 1, $2, $3, $4, $5, $6, $7, \
             1, $8, $8, $9 \
         WHERE NOT EXISTS (SELECT 1 FROM coalesced)";

    fn stamp(moment: DateTime<Utc>) -> DateTime<Utc> {
        moment
    }

    fn rows_affected(result: &sqlx::postgres::PgQueryResult) -> u64 {
        result.rows_affected()
    }

    fn classify_code(sqlstate: &str) -> ErrorClass {
        match sqlstate {
            // Serialization failure, deadlock: run the transaction again.
            "40001" | "40P01" => ErrorClass::Conflict,
            // Connection exceptions, insufficient resources, operator
            // intervention.
            code if code.starts_with("08") || code.starts_with("53") || code.starts_with("57P") => {
                ErrorClass::Unavailable
            }
            _ => ErrorClass::Internal,
        }
    }

    fn readers(&self) -> &PgPool {
        &self.pool
    }

    fn pause_before_write(&self) -> Option<&PauseHook> {
        self.pause_before_write.as_ref()
    }

    async fn begin_write(&self) -> StoreResult<Transaction<'static, Postgres>> {
        Ok(self.pool.begin().await?)
    }

    async fn advance_fence(_connection: &mut PgConnection) -> StoreResult<()> {
        // The guarded UPDATE draws from the sequence itself.
        Ok(())
    }

    async fn count_into_last_history_entry(
        _connection: &mut PgConnection,
        _operation_id: OperationId,
        _coalesce_key: &str,
        _now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        // APPEND_HISTORY counts or appends in one statement.
        Ok(false)
    }

    fn pool_usage(&self) -> PoolUsage {
        PoolUsage {
            size: self.pool.size(),
            idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
            max: self.pool.options().get_max_connections(),
        }
    }

    async fn close(&self) {
        self.pool.close().await;
    }

    async fn listen_for_changes(
        &self,
        changed: &(dyn Fn(OperationId) + Send + Sync),
    ) -> Result<()> {
        if !self.notify_changes {
            std::future::pending::<()>().await;
        }
        let translate = |error: sqlx::Error| Self::translate(error.into());
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(translate)?;
        listener.listen(CHANGES_CHANNEL).await.map_err(translate)?;
        loop {
            let notification = listener.recv().await.map_err(translate)?;
            if let Ok(operation_id) = uuid::Uuid::parse_str(notification.payload()) {
                changed(OperationId(operation_id));
            }
        }
    }

    /// One statement: the insert settles concurrent first claims on the
    /// unique scope, its deadlines are offsets from the clock it reads, and
    /// its history entry lands atomically with it.
    async fn insert_first_claim(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> StoreResult<Option<OperationRecord>> {
        let first = decide_first_claim(command);
        let row: Option<OperationRow> = sqlx::query_as(concat!(
            "WITH clock AS (SELECT clock_timestamp() AS now), inserted AS ( \
                 INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key, \
                     fingerprint, state, fence, attempt, max_attempts, claim_token, lease_ms, \
                     max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at, \
                     operation_deadline_at, created_at, updated_at) \
                 SELECT $1, $2, $3, $4, $5, $12, nextval('operation_fence'), $13, $6, $7, \
                     $8, $9, $10, \
                     now + make_interval(secs => $14 / 1000.0), \
                     now + make_interval(secs => $15 / 1000.0), \
                     now + make_interval(secs => $11 / 1000.0), now, now \
                 FROM clock \
                 ON CONFLICT ON CONSTRAINT operations_scope DO NOTHING \
                 RETURNING * \
             ), history AS ( \
                 INSERT INTO operation_history (operation_id, sequence, event, from_state, \
                     to_state, fence, attempt, detail, count, first_at, last_at, coalesce_key) \
                 SELECT operation_id, 1, $16, NULL, state, fence, attempt, $17, 1, \
                     created_at, created_at, $18 FROM inserted \
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
            first
                .operation_deadline_in
                .map(|in_| in_.num_milliseconds()),
        )
        .bind(first.history.to_state.as_str())
        .bind(i32::try_from(first.history.attempt).unwrap_or(i32::MAX))
        .bind(first.lease_expires_in.num_milliseconds())
        .bind(first.attempt_deadline_in.num_milliseconds())
        .bind(first.history.event.as_str())
        .bind(&first.history.detail)
        .bind(first.history.coalesce_key())
        .fetch_optional(&self.pool)
        .instrument(Self::statement("INSERT operations"))
        .await?;
        Ok(row.map(OperationRecord::try_from).transpose()?)
    }

    async fn announce_change(
        &self,
        connection: &mut PgConnection,
        operation_id: OperationId,
    ) -> StoreResult<()> {
        if !self.notify_changes {
            return Ok(());
        }
        // Delivered at commit, and only if it commits.
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CHANGES_CHANNEL)
            .bind(operation_id.to_string())
            .execute(&mut *connection)
            .instrument(Self::statement("NOTIFY operation changed"))
            .await?;
        Ok(())
    }
}
