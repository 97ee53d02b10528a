//! The embedded store: one SQLite database file, owned by one process.
//!
//! Same semantics as the Postgres store, settled differently: every write
//! goes through one writer connection and opens its transaction with
//! `BEGIN IMMEDIATE`, which takes SQLite's write lock before the first read.
//! So a transition reads, decides (with SQLite's clock, read in that
//! transaction) and writes while no other writer can run, and a write never
//! upgrades a read transaction (which is what makes SQLite answer BUSY).
//! Reads use a separate pool of read-only connections; WAL lets them run
//! beside the writer. Every connection is opened with `journal_mode=WAL`,
//! `synchronous=FULL` and `foreign_keys=ON`, and each one is checked after
//! it opens: a connection without them is refused, so is the start-up.
//!
//! The database file is locked (an OS file lock on `<database>.lock`) for
//! the life of the store, so a second idemd process cannot open it as well.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, TimeDelta, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};
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

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// `synchronous=FULL` as `PRAGMA synchronous` reports it (EXTRA, 3, is stronger).
const SYNCHRONOUS_FULL: i64 = 2;

/// Where the embedded database lives and how it is used.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// The database file; created (with its directory) when missing.
    pub path: PathBuf,
    /// Connections of the read pool. Writes always use the one writer.
    pub max_read_connections: u32,
    /// How long a call waits for the writer (or a reader) before answering
    /// UNAVAILABLE; also SQLite's busy timeout for a lock another process holds.
    pub acquire_timeout: Duration,
}

/// The OS lock that makes one process the owner of a database file. Held
/// while the store is open; released by [`Store::close`] or when dropped.
#[derive(Debug)]
pub struct DatabaseLock {
    path: PathBuf,
    file: File,
}

impl DatabaseLock {
    /// The lock file of a database: `<database>.lock`, beside it.
    pub fn path_for(database: &Path) -> PathBuf {
        let mut name = database.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Takes the lock of `database`, creating its directory if needed.
    /// `Ok(None)`: another process holds it.
    pub fn try_acquire(database: &Path) -> Result<Option<Self>> {
        if let Some(directory) = database
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            create_data_directory(directory).map_err(|error| {
                Error::Internal(format!(
                    "cannot create the data directory {}: {error}",
                    directory.display()
                ))
            })?;
        }
        let path = Self::path_for(database);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|error| Error::Internal(format!("cannot open {}: {error}", path.display())))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(error)) => {
                return Err(Error::Internal(format!(
                    "cannot lock {}: {error}",
                    path.display()
                )));
            }
        }
        // For the message another process shows when it finds the lock held.
        let pid = std::process::id().to_string();
        let noted = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(pid.as_bytes()));
        if let Err(error) = noted {
            warn!(%error, lock = %path.display(), "cannot write the pid into the lock file");
        }
        Ok(Some(Self { path, file }))
    }

    /// The process id the current holder wrote into the lock file, if any.
    pub fn holder(database: &Path) -> Option<u32> {
        let mut contents = String::new();
        File::open(Self::path_for(database))
            .ok()?
            .read_to_string(&mut contents)
            .ok()?;
        contents.trim().parse().ok()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Creates a data directory (and its parents) that only its owner can enter:
/// it holds results and, with `--dev`, a token. An existing one is left as is.
pub fn create_data_directory(directory: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(directory)
}

impl Drop for DatabaseLock {
    fn drop(&mut self) {
        // Closing the file releases the lock too; unlocking first says so.
        let _ = self.file.unlock();
    }
}

#[derive(Clone)]
pub struct SqliteStore {
    path: PathBuf,
    /// The only connection that writes (a pool of one).
    writer: SqlitePool,
    /// Read-only connections for lookups, lists and authentication.
    readers: SqlitePool,
    /// `None` for a store opened beside the owning process (tenant commands).
    lock: Arc<Mutex<Option<DatabaseLock>>>,
    pause_before_write: Option<PauseHook>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating when missing) the database as its owner, holding
    /// `lock`, and applies pending migrations.
    pub async fn open(options: &SqliteOptions, lock: DatabaseLock) -> Result<Self> {
        let store = Self::connect(options, Some(lock), true).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Opens an existing, migrated database while another process owns it,
    /// for a short administrative write (creating or revoking a tenant).
    /// SQLite itself serialises this write with the owner's; the owner's
    /// calls wait for it within their busy timeout.
    pub async fn open_beside_owner(options: &SqliteOptions) -> Result<Self> {
        if !options.path.exists() {
            return Err(Error::Internal(format!(
                "{} does not exist",
                options.path.display()
            )));
        }
        let store = Self::connect(options, None, false).await?;
        let pending = store.pending_migrations().await?;
        if pending > 0 {
            store.close().await;
            return Err(Error::Internal(format!(
                "{} lacks {pending} migration(s); its owner applies them at start-up",
                options.path.display()
            )));
        }
        Ok(store)
    }

    async fn connect(
        options: &SqliteOptions,
        lock: Option<DatabaseLock>,
        create: bool,
    ) -> Result<Self> {
        let base = SqliteConnectOptions::new()
            .filename(&options.path)
            .create_if_missing(create)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(options.acquire_timeout);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(options.acquire_timeout)
            .after_connect(|connection, _| Box::pin(verify_connection(connection)))
            .connect_with(base.clone())
            .await
            .map_err(|error| open_error(&options.path, error))?;
        // The writer created the file and switched it to WAL; readers only read.
        let readers = SqlitePoolOptions::new()
            .max_connections(options.max_read_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .after_connect(|connection, _| Box::pin(verify_connection(connection)))
            .connect_with(base.pragma("query_only", "ON"))
            .await;
        let readers = match readers {
            Ok(readers) => readers,
            Err(error) => {
                writer.close().await;
                return Err(open_error(&options.path, error));
            }
        };
        Ok(Self {
            path: options.path.clone(),
            writer,
            readers,
            lock: Arc::new(Mutex::new(lock)),
            pause_before_write: None,
        })
    }

    /// The same store, pausing in every transition between read and write.
    pub fn with_pause_before_write(&self, hook: PauseHook) -> Self {
        Self {
            pause_before_write: Some(hook),
            ..self.clone()
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The writer connection's pool, for tests and tools that must write raw SQL.
    pub fn writer_pool(&self) -> &SqlitePool {
        &self.writer
    }

    /// Applies pending migrations; only the owner (holding the lock) may.
    pub async fn migrate(&self) -> Result<()> {
        MIGRATOR
            .run(&self.writer)
            .await
            .map_err(|error| Error::Internal(format!("migration failed: {error}")))
    }

    async fn pending_migrations(&self) -> Result<usize> {
        let applied: Vec<i64> = sqlx::query_scalar(
            "SELECT version FROM _sqlx_migrations WHERE success = 1 ORDER BY version",
        )
        .fetch_all(&self.readers)
        .instrument(statement("SELECT _sqlx_migrations"))
        .await
        .unwrap_or_default();
        Ok(MIGRATOR
            .iter()
            .filter(|migration| !applied.contains(&migration.version))
            .count())
    }

    /// `BEGIN IMMEDIATE` on the writer: the write lock is taken before the
    /// first read, so the read, the decision and the write see no other writer.
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
        self.writer.begin_with("BEGIN IMMEDIATE").await
    }

    async fn try_transition(
        &self,
        tenant: TenantId,
        target: &Target,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>, sqlx::Error> {
        let mut transaction = self.begin_write().await?;
        let Some(row) = select(&mut transaction, tenant, target).await? else {
            transaction.rollback().await?;
            return Ok(None);
        };
        // Read with the write lock held: the clock of the moment we decide.
        let now = database_now(&mut transaction).await?;
        let record = OperationRecord::try_from(row).map_err(decode_error)?;
        if let Some(pause) = &self.pause_before_write {
            pause().await;
        }
        let decision = decide(&record, now);
        if decision.effects.is_empty() {
            transaction.rollback().await?;
            return Ok(Some(Applied {
                record,
                answer: decision.answer,
                now,
                record_changed: false,
            }));
        }
        let record_after = apply(&mut transaction, &record, decision.effects, now).await?;
        transaction.commit().await?;
        Ok(Some(Applied {
            record_changed: record_after != record,
            record: record_after,
            answer: decision.answer,
            now,
        }))
    }

    async fn try_insert_new(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> Result<Option<OperationRecord>, sqlx::Error> {
        let mut transaction = self.begin_write().await?;
        let now = database_now(&mut transaction).await?;
        let fence = draw_fence(&mut transaction).await?;
        let lease_ms = command
            .lease
            .num_milliseconds()
            .min(command.max_attempt_duration.num_milliseconds());
        let after = |ms: i64| stamp(now + TimeDelta::milliseconds(ms));
        // The unique scope settles it: a scope that has a record inserts nothing.
        let row: Option<OperationRow> = sqlx::query_as(concat!(
            "INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key, \
                 fingerprint, state, fence, attempt, max_attempts, claim_token, lease_ms, \
                 max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at, \
                 operation_deadline_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, 'in_progress', $6, 1, $7, $8, $9, $10, $11, $12, $13, \
                 $14, $15, $15) \
             ON CONFLICT (tenant_id, operation, idempotency_key) DO NOTHING \
             RETURNING ",
            operation_columns!()
        ))
        .bind(operation_id.0)
        .bind(tenant.0)
        .bind(&command.scope.operation)
        .bind(&command.scope.key)
        .bind(&command.fingerprint.0[..])
        .bind(fence)
        .bind(i32::try_from(command.max_attempts).unwrap_or(i32::MAX))
        .bind(&command.claim_token)
        .bind(command.lease.num_milliseconds())
        .bind(command.max_attempt_duration.num_milliseconds())
        .bind(command.retention.num_milliseconds())
        .bind(after(lease_ms))
        .bind(after(command.max_attempt_duration.num_milliseconds()))
        .bind(
            command
                .operation_deadline
                .map(|deadline| after(deadline.num_milliseconds())),
        )
        .bind(stamp(now))
        .fetch_optional(&mut *transaction)
        .instrument(statement("INSERT operations"))
        .await?;
        let Some(row) = row else {
            // Also returns the fence drawn for it.
            transaction.rollback().await?;
            return Ok(None);
        };
        sqlx::query(
            "INSERT INTO operation_history (operation_id, sequence, event, from_state, \
                 to_state, fence, attempt, detail, count, first_at, last_at) \
             VALUES ($1, 1, 'CLAIMED', NULL, 'in_progress', $2, 1, '', 1, $3, $3)",
        )
        .bind(operation_id.0)
        .bind(fence)
        .bind(stamp(now))
        .execute(&mut *transaction)
        .instrument(statement("INSERT operation_history"))
        .await?;
        transaction.commit().await?;
        OperationRecord::try_from(row)
            .map(Some)
            .map_err(decode_error)
    }

    async fn try_find(
        &self,
        tenant: TenantId,
        target: &Target,
        include_history: bool,
    ) -> Result<Option<Found>, sqlx::Error> {
        // A read transaction: the record, its history and the clock from one snapshot.
        let mut transaction = self.readers.begin().await?;
        let Some(row) = select(&mut transaction, tenant, target).await? else {
            transaction.rollback().await?;
            return Ok(None);
        };
        let record = OperationRecord::try_from(row).map_err(decode_error)?;
        let history = if include_history {
            let rows: Vec<HistoryRow> = sqlx::query_as(
                "SELECT sequence, event, from_state, to_state, fence, attempt, detail, count, \
                     first_at, last_at \
                 FROM operation_history WHERE operation_id = $1 ORDER BY sequence",
            )
            .bind(record.operation_id.0)
            .fetch_all(&mut *transaction)
            .instrument(statement("SELECT operation_history"))
            .await?;
            rows.into_iter()
                .map(HistoryEntry::try_from)
                .collect::<Result<Vec<_>>>()
                .map_err(decode_error)?
        } else {
            Vec::new()
        };
        let now = database_now(&mut transaction).await?;
        transaction.rollback().await?;
        Ok(Some(Found {
            record,
            history,
            now,
        }))
    }

    async fn try_list_unresolved(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> Result<UnresolvedPage, sqlx::Error> {
        let mut transaction = self.readers.begin().await?;
        let now = database_now(&mut transaction).await?;
        let (after_created, after_id) = match query.after {
            Some((created_at, operation_id)) => (Some(stamp(created_at)), Some(operation_id.0)),
            None => (None, None),
        };
        let rows: Vec<OperationRow> = sqlx::query_as(concat!(
            "SELECT ",
            operation_columns!(),
            " FROM operations \
              WHERE tenant_id = $1 AND state IN ('in_progress', 'unknown') \
                AND (state = 'unknown' OR lease_expires_at <= $2) \
                AND ($3 IS NULL OR operation = $3) \
                AND ($4 IS NULL OR (created_at, operation_id) > ($4, $5)) \
              ORDER BY created_at, operation_id LIMIT $6"
        ))
        .bind(tenant.0)
        .bind(stamp(now))
        .bind(query.operation.as_deref())
        .bind(after_created)
        .bind(after_id)
        .bind(i64::from(query.limit))
        .fetch_all(&mut *transaction)
        .instrument(statement("SELECT operations"))
        .await?;
        transaction.rollback().await?;
        let records = rows
            .into_iter()
            .map(OperationRecord::try_from)
            .collect::<Result<Vec<_>>>()
            .map_err(decode_error)?;
        Ok(UnresolvedPage { records, now })
    }

    async fn try_sweep(
        &self,
        batch: u32,
        tombstone_retention: TimeDelta,
    ) -> Result<SweepReport, sqlx::Error> {
        let mut report = SweepReport::default();
        // The single writer serialises sweeps with every other write, so no
        // row needs skipping: what this batch selects, nobody else holds.
        let mut transaction = self.begin_write().await?;
        let now = database_now(&mut transaction).await?;
        let due: Vec<OperationRow> = sqlx::query_as(concat!(
            "SELECT ",
            operation_columns!(),
            " FROM operations \
              WHERE (state IN ('succeeded', 'failed') AND retain_until <= $1) \
                 OR (state = 'retry_wait' AND operation_deadline_at <= $1) \
              LIMIT $2"
        ))
        .bind(stamp(now))
        .bind(i64::from(batch))
        .fetch_all(&mut *transaction)
        .instrument(statement("SELECT operations"))
        .await?;
        for row in due {
            let record = OperationRecord::try_from(row).map_err(decode_error)?;
            let Some(decision) = decide_sweep(&record, now, tombstone_retention) else {
                continue;
            };
            let after = apply(&mut transaction, &record, decision.effects, now).await?;
            report.count(&after);
        }
        // History goes with the operation (ON DELETE CASCADE; foreign_keys=ON
        // is checked on every connection).
        report.deleted = sqlx::query(
            "DELETE FROM operations WHERE operation_id IN ( \
                 SELECT operation_id FROM operations WHERE state = 'expired' AND retain_until <= $1 \
                 ORDER BY retain_until LIMIT $2)",
        )
        .bind(stamp(now))
        .bind(i64::from(batch))
        .execute(&mut *transaction)
        .instrument(statement("DELETE operations"))
        .await?
        .rows_affected();
        transaction.commit().await?;
        Ok(report)
    }

    async fn try_count_operations(&self) -> Result<OperationCounts, sqlx::Error> {
        let mut transaction = self.readers.begin().await?;
        let now = stamp(database_now(&mut transaction).await?);
        // Partial indexes keep these to the unresolved and terminal rows.
        let (in_progress, unresolved, retry_wait, sweep_backlog): (i64, i64, i64, i64) =
            sqlx::query_as(
                "SELECT \
                     (SELECT count(*) FROM operations WHERE state = 'in_progress' \
                         AND lease_expires_at > $1), \
                     (SELECT count(*) FROM operations WHERE state = 'unknown' \
                         OR (state = 'in_progress' AND lease_expires_at <= $1)), \
                     (SELECT count(*) FROM operations WHERE state = 'retry_wait'), \
                     (SELECT count(*) FROM operations \
                         WHERE (state IN ('succeeded', 'failed', 'expired') AND retain_until <= $1) \
                            OR (state = 'retry_wait' AND operation_deadline_at <= $1))",
            )
            .bind(&now)
            .fetch_one(&mut *transaction)
            .instrument(statement("SELECT operation counts"))
            .await?;
        transaction.rollback().await?;
        let count = |value: i64| u64::try_from(value).unwrap_or(0);
        Ok(OperationCounts {
            in_progress: count(in_progress),
            unresolved: count(unresolved),
            retry_wait: count(retry_wait),
            sweep_backlog: count(sweep_backlog),
        })
    }

    async fn try_create_tenant(
        &self,
        name: &str,
        token_sha256: &[u8; 32],
    ) -> Result<TenantId, sqlx::Error> {
        let mut transaction = self.begin_write().await?;
        let now = stamp(database_now(&mut transaction).await?);
        let tenant: Option<i64> = sqlx::query_scalar(
            "INSERT INTO tenants (name, created_at) VALUES ($1, $2) \
             ON CONFLICT (name) WHERE revoked_at IS NULL DO NOTHING RETURNING tenant_id",
        )
        .bind(name)
        .bind(&now)
        .fetch_optional(&mut *transaction)
        .instrument(statement("INSERT tenants"))
        .await?;
        let tenant = tenant.ok_or_else(|| {
            decode_error(Error::invalid("name", "an active tenant has this name"))
        })?;
        sqlx::query(
            "INSERT INTO tenant_tokens (token_sha256, tenant_id, created_at) VALUES ($1, $2, $3)",
        )
        .bind(&token_sha256[..])
        .bind(tenant)
        .bind(&now)
        .execute(&mut *transaction)
        .instrument(statement("INSERT tenant_tokens"))
        .await?;
        transaction.commit().await?;
        Ok(TenantId(tenant))
    }

    async fn try_revoke_tenant(&self, name: &str) -> Result<bool, sqlx::Error> {
        let mut transaction = self.begin_write().await?;
        let now = stamp(database_now(&mut transaction).await?);
        let tenant: Option<i64> = sqlx::query_scalar(
            "UPDATE tenants SET revoked_at = $2 \
             WHERE name = $1 AND revoked_at IS NULL RETURNING tenant_id",
        )
        .bind(name)
        .bind(&now)
        .fetch_optional(&mut *transaction)
        .instrument(statement("UPDATE tenants"))
        .await?;
        if let Some(tenant) = tenant {
            sqlx::query(
                "UPDATE tenant_tokens SET revoked_at = $2 \
                 WHERE tenant_id = $1 AND revoked_at IS NULL",
            )
            .bind(tenant)
            .bind(&now)
            .execute(&mut *transaction)
            .instrument(statement("UPDATE tenant_tokens"))
            .await?;
        }
        transaction.commit().await?;
        Ok(tenant.is_some())
    }
}

/// Refuses a connection that does not have the settings durability and
/// integrity rest on; SQLite ignores a pragma it cannot apply silently.
async fn verify_connection(connection: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    let journal_mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut *connection)
        .instrument(statement("PRAGMA journal_mode"))
        .await?;
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut *connection)
        .instrument(statement("PRAGMA synchronous"))
        .await?;
    let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
        .fetch_one(&mut *connection)
        .instrument(statement("PRAGMA foreign_keys"))
        .await?;
    if !journal_mode.eq_ignore_ascii_case("wal")
        || synchronous < SYNCHRONOUS_FULL
        || foreign_keys != 1
    {
        return Err(sqlx::Error::Configuration(
            format!(
                "sqlite connection has journal_mode={journal_mode}, synchronous={synchronous}, \
                 foreign_keys={foreign_keys}; idemd needs journal_mode=wal, synchronous=2 (FULL) \
                 and foreign_keys=1"
            )
            .into(),
        ));
    }
    Ok(())
}

fn open_error(path: &Path, error: sqlx::Error) -> Error {
    Error::Internal(format!("cannot open {}: {error}", path.display()))
}

/// A timestamp as stored: UTC, microseconds (truncated, as sqlx hands them
/// to Postgres), one fixed width, so that text order is time order.
pub(crate) fn stamp(moment: DateTime<Utc>) -> String {
    use chrono::SubsecRound;
    moment
        .trunc_subsecs(6)
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// SQLite's clock (the host's, in milliseconds), read inside the transaction.
async fn database_now(connection: &mut SqliteConnection) -> Result<DateTime<Utc>, sqlx::Error> {
    let now: String = sqlx::query_scalar("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
        .fetch_one(&mut *connection)
        .instrument(statement("SELECT clock"))
        .await?;
    NaiveDateTime::parse_from_str(&now, "%Y-%m-%d %H:%M:%S%.f")
        .map(|naive| naive.and_utc())
        .map_err(|error| {
            decode_error(Error::Internal(format!(
                "unreadable sqlite clock {now:?}: {error}"
            )))
        })
}

/// The next fence of the one ever-growing sequence.
async fn draw_fence(connection: &mut SqliteConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "UPDATE operation_fence SET last_fence = last_fence + 1 WHERE singleton = 1 \
         RETURNING last_fence",
    )
    .fetch_one(&mut *connection)
    .instrument(statement("UPDATE operation_fence"))
    .await
}

async fn select(
    connection: &mut SqliteConnection,
    tenant: TenantId,
    target: &Target,
) -> Result<Option<OperationRow>, sqlx::Error> {
    match target {
        Target::Scope(scope) => {
            sqlx::query_as(concat!(
                "SELECT ",
                operation_columns!(),
                " FROM operations WHERE tenant_id = $1 AND operation = $2 AND idempotency_key = $3"
            ))
            .bind(tenant.0)
            .bind(&scope.operation)
            .bind(&scope.key)
            .fetch_optional(&mut *connection)
            .instrument(statement("SELECT operations"))
            .await
        }
        Target::Id(operation_id) => {
            sqlx::query_as(concat!(
                "SELECT ",
                operation_columns!(),
                " FROM operations WHERE tenant_id = $1 AND operation_id = $2"
            ))
            .bind(tenant.0)
            .bind(operation_id.0)
            .fetch_optional(&mut *connection)
            .instrument(statement("SELECT operations"))
            .await
        }
    }
}

/// Writes the decided record, guarded by the fence and state it was decided
/// from, then appends its history entry. Returns the record as written.
async fn apply(
    connection: &mut SqliteConnection,
    before: &OperationRecord,
    effects: Effects,
    now: DateTime<Utc>,
) -> Result<OperationRecord, sqlx::Error> {
    let mut effects = effects;
    let mut written_record = None;
    if let Some(update) = &effects.update {
        let write = OperationWrite::of(&update.next).map_err(decode_error)?;
        let fence = if update.takes_new_fence {
            draw_fence(connection).await?
        } else {
            signed(before.fence).map_err(decode_error)?
        };
        let written_fence: Option<i64> = bind_guarded_update!(
            sqlx::query_scalar(guarded_update_sql!("$4")),
            before,
            signed(before.fence).map_err(decode_error)?,
            write,
            fence,
            stamp
        )
        .fetch_optional(&mut *connection)
        .instrument(statement("UPDATE operations"))
        .await?;
        let (written, stamped) =
            super::settle_guarded_update(effects, written_fence).map_err(decode_error)?;
        effects = stamped;
        written_record = written;
    }
    if let Some(history) = &effects.history {
        append_history(connection, before.operation_id, history, now).await?;
    }
    // Without an update (a refusal recorded in history) the record stands.
    Ok(written_record.unwrap_or_else(|| before.clone()))
}

/// Appends a history entry, or counts it into the last one when it repeats a
/// coalescing event (the same refusal of the same fence).
async fn append_history(
    connection: &mut SqliteConnection,
    operation_id: OperationId,
    entry: &NewHistoryEntry,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let fence = signed(entry.fence).map_err(decode_error)?;
    let last: Option<(i32, String, i64, String, String)> = sqlx::query_as(
        "SELECT sequence, event, fence, detail, to_state FROM operation_history \
         WHERE operation_id = $1 ORDER BY sequence DESC LIMIT 1",
    )
    .bind(operation_id.0)
    .fetch_optional(&mut *connection)
    .instrument(statement("SELECT operation_history"))
    .await?;
    let repeats =
        |(_, event, last_fence, detail, to_state): &(i32, String, i64, String, String)| {
            entry.event.coalesces()
                && event == entry.event.as_str()
                && *last_fence == fence
                && *detail == entry.detail
                && to_state == entry.to_state.as_str()
        };
    match &last {
        Some(last) if repeats(last) => {
            sqlx::query(
                "UPDATE operation_history SET count = count + 1, last_at = $3 \
                 WHERE operation_id = $1 AND sequence = $2",
            )
            .bind(operation_id.0)
            .bind(last.0)
            .bind(stamp(now))
            .execute(&mut *connection)
            .instrument(statement("UPDATE operation_history"))
            .await?;
        }
        _ => {
            let sequence = last.as_ref().map_or(0, |last| last.0) + 1;
            sqlx::query(
                "INSERT INTO operation_history \
                     (operation_id, sequence, event, from_state, to_state, fence, attempt, detail, \
                      count, first_at, last_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9, $9)",
            )
            .bind(operation_id.0)
            .bind(sequence)
            .bind(entry.event.as_str())
            .bind(entry.from_state.map(|state| state.as_str()))
            .bind(entry.to_state.as_str())
            .bind(fence)
            .bind(i32::try_from(entry.attempt).unwrap_or(i32::MAX))
            .bind(&entry.detail)
            .bind(stamp(now))
            .execute(&mut *connection)
            .instrument(statement("INSERT operation_history"))
            .await?;
        }
    }
    Ok(())
}

#[async_trait]
impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    #[instrument(name = "store.sqlite.insert_new", skip_all)]
    async fn insert_new(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> Result<Option<OperationRecord>> {
        self.try_insert_new(tenant, operation_id, command)
            .await
            .map_err(map_error)
    }

    #[instrument(name = "store.sqlite.transition", skip_all)]
    async fn transition(
        &self,
        tenant: TenantId,
        target: &Target,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>> {
        self.try_transition(tenant, target, decide)
            .await
            .map_err(map_error)
    }

    #[instrument(name = "store.sqlite.find", skip_all)]
    async fn find(
        &self,
        tenant: TenantId,
        target: &Target,
        include_history: bool,
    ) -> Result<Option<Found>> {
        self.try_find(tenant, target, include_history)
            .await
            .map_err(map_error)
    }

    #[instrument(name = "store.sqlite.list_unresolved", skip_all)]
    async fn list_unresolved(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> Result<UnresolvedPage> {
        self.try_list_unresolved(tenant, query)
            .await
            .map_err(map_error)
    }

    #[instrument(name = "store.sqlite.sweep", skip_all)]
    async fn sweep(&self, batch: u32, tombstone_retention: TimeDelta) -> Result<SweepReport> {
        self.try_sweep(batch, tombstone_retention)
            .await
            .map_err(map_error)
    }

    #[instrument(name = "store.sqlite.count_operations", skip_all)]
    async fn count_operations(&self) -> Result<OperationCounts> {
        self.try_count_operations().await.map_err(map_error)
    }

    fn pool_usage(&self) -> PoolUsage {
        let count = |value: usize| u32::try_from(value).unwrap_or(u32::MAX);
        PoolUsage {
            size: self.writer.size() + self.readers.size(),
            idle: count(self.writer.num_idle()).saturating_add(count(self.readers.num_idle())),
            max: self.writer.options().get_max_connections()
                + self.readers.options().get_max_connections(),
        }
    }

    async fn authenticate(&self, token_sha256: &[u8; 32]) -> Result<Option<TenantId>> {
        let tenant: Option<i64> = sqlx::query_scalar(
            "SELECT tenants.tenant_id FROM tenant_tokens JOIN tenants USING (tenant_id) \
             WHERE token_sha256 = $1 AND tenant_tokens.revoked_at IS NULL \
               AND tenants.revoked_at IS NULL",
        )
        .bind(&token_sha256[..])
        .fetch_optional(&self.readers)
        .instrument(statement("SELECT tenant_tokens"))
        .await
        .map_err(map_error)?;
        Ok(tenant.map(TenantId))
    }

    async fn create_tenant(&self, name: &str, token_sha256: &[u8; 32]) -> Result<TenantId> {
        self.try_create_tenant(name, token_sha256)
            .await
            .map_err(map_error)
    }

    async fn revoke_tenant(&self, name: &str) -> Result<bool> {
        self.try_revoke_tenant(name).await.map_err(map_error)
    }

    async fn check_ready(&self) -> Result<()> {
        sqlx::query("SELECT 1")
            .execute(&self.readers)
            .instrument(statement("SELECT 1"))
            .await
            .map_err(map_error)?;
        Ok(())
    }

    async fn close(&self) {
        self.writer.close().await;
        self.readers.close().await;
        // No connection of this process touches the file any more: another
        // process may own it now.
        if let Ok(mut lock) = self.lock.lock() {
            lock.take();
        }
    }
}

/// A domain error raised inside a transaction, carried out through sqlx's type.
fn decode_error(error: Error) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(error))
}

/// SQLite result codes (the primary code is the low byte of an extended one)
/// that say "not now" rather than "wrong": the write lock is held elsewhere
/// past the busy timeout, or the disk cannot take the write at the moment.
fn is_unavailable_code(code: i64) -> bool {
    const SQLITE_BUSY: i64 = 5;
    const SQLITE_LOCKED: i64 = 6;
    const SQLITE_IOERR: i64 = 10;
    const SQLITE_FULL: i64 = 13;
    const SQLITE_CANTOPEN: i64 = 14;
    matches!(
        code & 0xff,
        SQLITE_BUSY | SQLITE_LOCKED | SQLITE_IOERR | SQLITE_FULL | SQLITE_CANTOPEN
    )
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
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(database_error) => database_error
            .code()
            .and_then(|code| code.parse::<i64>().ok())
            .is_some_and(is_unavailable_code),
        _ => false,
    };
    if unavailable {
        warn!(error = %error, "database unavailable");
        Error::unavailable("the database is unavailable")
    } else {
        Error::Internal(format!("database error: {error}"))
    }
}

fn statement(name: &'static str) -> tracing::Span {
    super::statement_span("sqlite", name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_have_one_width_and_sort_as_time() {
        let base = DateTime::parse_from_rfc3339("2026-11-29T09:21:03Z")
            .expect("valid")
            .to_utc();
        let stamps: Vec<String> = [0, 1, 500, 999_999, 1_000_000]
            .into_iter()
            .map(|micros| stamp(base + TimeDelta::microseconds(micros)))
            .collect();
        assert_eq!(stamps[0], "2026-11-29T09:21:03.000000Z");
        assert_eq!(stamps[2], "2026-11-29T09:21:03.000500Z");
        assert!(
            stamps.windows(2).all(|pair| pair[0] < pair[1]),
            "{stamps:?}"
        );
        assert!(stamps.iter().all(|stamp| stamp.len() == stamps[0].len()));
    }

    #[test]
    fn stamps_keep_microseconds_and_round_trip() {
        let moment = DateTime::parse_from_rfc3339("2026-11-29T09:21:03.177288Z")
            .expect("valid")
            .to_utc();
        let parsed = DateTime::parse_from_rfc3339(&stamp(moment))
            .expect("parses")
            .to_utc();
        assert_eq!(parsed, moment);
        let nanos = moment + TimeDelta::nanoseconds(600);
        assert_eq!(
            stamp(nanos),
            "2026-11-29T09:21:03.177288Z",
            "truncated to microseconds, as Postgres receives them"
        );
    }

    #[tokio::test]
    async fn a_connection_without_full_sync_or_foreign_keys_is_refused() {
        use sqlx::ConnectOptions;
        let directory = std::env::temp_dir().join(format!("idemd-unit-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&directory).expect("temp dir");
        let required = SqliteConnectOptions::new()
            .filename(directory.join("check.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true);
        let mut good = required.connect().await.expect("connects");
        verify_connection(&mut good)
            .await
            .expect("the settings idemd needs");
        for weaker in [
            required.clone().synchronous(SqliteSynchronous::Normal),
            required.clone().foreign_keys(false),
            required.clone().journal_mode(SqliteJournalMode::Delete),
        ] {
            drop(good);
            let mut connection = weaker.connect().await.expect("connects");
            let refused = verify_connection(&mut connection).await;
            assert!(
                matches!(refused, Err(sqlx::Error::Configuration(_))),
                "{refused:?}"
            );
            good = connection;
        }
        drop(good);
        let _ = std::fs::remove_dir_all(directory);
    }

    #[test]
    fn busy_and_locked_are_unavailable_in_all_their_extended_forms() {
        for code in [5, 261, 517, 773, 6, 262, 10, 13, 14] {
            assert!(is_unavailable_code(code), "{code}");
        }
        for code in [1, 19, 2067, 787, 8, 11] {
            assert!(!is_unavailable_code(code), "{code}");
        }
    }
}
