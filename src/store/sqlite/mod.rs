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
//! The flow is the shared one ([`super::flow`]); this file holds what SQLite
//! does its own way. The database file is locked ([`lock`]) for the life of
//! the store, so a second idemd process cannot open it as well.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Sqlite;
use sqlx::pool::PoolConnection;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use tracing::Instrument;

use super::acquire::AcquireWaits;
use super::dialect::{AtClock, Dialect};
use super::error::{ErrorClass, StoreError, StoreResult};
use super::one_at_a_time::OneAtATime;
use super::row::signed;
use super::sql::{
    delete_expired_tombstones_sql, due_for_deadline_sql, due_for_tombstone_sql, guarded_update_sql,
    select_history_sql, select_operation_sql,
};
use super::statements::Sql;
use super::{AnswerTally, Applied, ClaimStart, PauseHook, PoolUsage};
use crate::domain::guarded::GuardedWrite;
use crate::domain::{
    Answer, ClaimCommand, Error, Found, HistoryCap, NewHistoryEntry, OperationId, OperationRecord,
    Result, Target, TenantId,
};

mod group;
mod lock;
mod one_query;
mod point_reads;
mod queued;
mod rusqlite_rows;

use self::group::{GroupWriter, Member, OpenedStatement, with_savepoint};
use self::point_reads::{PointReaderOptions, PointReaders, PointStatements};

/// SQLite's clock, in the form timestamps are read back in (RFC 3339).
macro_rules! now_sql {
    () => {
        "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    };
}

/// An operation and the clock ([`now_sql!`]), by scope or by id: [`Dialect::READ_BY_SCOPE`] and
/// [`Dialect::READ_BY_ID`], and the locked path's first read (under `BEGIN
/// IMMEDIATE`'s write lock, a read is a lock).
macro_rules! read_with_clock_sql {
    ($by:ident) => {
        // `now_sql!()` written out: select_operation_sql! takes literals only.
        select_operation_sql!($by, ", strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS db_now", "")
    };
}

/// [`Dialect::GUARDED_UPDATE`], its new fence the one the write transaction
/// drew.
macro_rules! sqlite_guarded_update_sql {
    () => {
        guarded_update_sql!("(SELECT last_fence FROM operation_fence WHERE singleton = 1)")
    };
}

/// The locked path's first statement, behind its savepoint statements.
const LOCK_BY_SCOPE_OPENED: OpenedStatement = with_savepoint!(read_with_clock_sql!(by_scope));
const LOCK_BY_ID_OPENED: OpenedStatement = with_savepoint!(read_with_clock_sql!(by_id));

pub use lock::{DatabaseLock, create_data_directory};

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// `synchronous=FULL` as `PRAGMA synchronous` reports it (EXTRA, 3, is stronger).
const SYNCHRONOUS_FULL: i64 = 2;

/// Each reader's page cache, in KiB (negative: SQLite's way of saying KiB, not
/// pages). Readers look scopes up at random, so beyond the indexes' upper
/// levels their pages are the operating system's file cache's to keep; at
/// SQLite's default (2,000 KiB) the sixteen readers could hold 32 MiB of copies.
const READER_CACHE_SIZE: &str = "-512";

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

#[derive(Clone)]
pub struct SqliteStore {
    path: PathBuf,
    /// The only connection that writes (a pool of one).
    writer: SqlitePool,
    /// Every write goes through it: group commit on the one writer.
    group: Arc<GroupWriter>,
    /// Read-only connections for lookups, lists and authentication.
    readers: SqlitePool,
    /// Read-only connections of their own for a record read alone (a
    /// Claim's look at its scope: replays, pending answers), the hottest
    /// read: see [`point_reads`].
    point_reads: PointReaders,
    /// Waits for a reader. Writes wait for the group writer instead, which
    /// `idemd_store_duration_seconds` times.
    reader_waits: Arc<AcquireWaits>,
    /// `None` for a store opened beside the owning process (tenant commands).
    lock: Arc<Mutex<Option<DatabaseLock>>>,
    pause_before_write: Option<PauseHook>,
    history_cap: HistoryCap,
    /// First claims of one scope take the writer one at a time (see
    /// `insert_or_find`).
    first_claims: Arc<OneAtATime>,
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
            .connect_with(
                base.pragma("query_only", "ON")
                    .pragma("cache_size", READER_CACHE_SIZE),
            )
            .await;
        let readers = match readers {
            Ok(readers) => readers,
            Err(error) => {
                writer.close().await;
                return Err(open_error(&options.path, error));
            }
        };
        let point_reads = PointReaders::new(PointReaderOptions {
            path: options.path.clone(),
            max_connections: options.max_read_connections,
            acquire_timeout: options.acquire_timeout,
            cache_size: READER_CACHE_SIZE,
            statements: PointStatements {
                by_scope: Self::READ_BY_SCOPE,
                by_id: Self::READ_BY_ID,
            },
        });
        Ok(Self {
            path: options.path.clone(),
            group: Arc::new(GroupWriter::new(
                writer.clone(),
                options.path.clone(),
                options.acquire_timeout,
            )?),
            writer,
            readers,
            point_reads,
            reader_waits: Arc::default(),
            lock: Arc::new(Mutex::new(lock)),
            pause_before_write: None,
            history_cap: HistoryCap::default(),
            first_claims: Arc::default(),
        })
    }

    /// The same store, pausing in every transition between read and write.
    pub fn with_pause_before_write(&self, hook: PauseHook) -> Self {
        Self {
            pause_before_write: Some(hook),
            ..self.clone()
        }
    }

    /// The same store, holding each operation's history to `cap`.
    pub fn with_history_cap(&self, cap: HistoryCap) -> Self {
        Self {
            history_cap: cap,
            ..self.clone()
        }
    }

    /// A record read alone by the sqlx readers, as every other read runs:
    /// for the test that holds [`Dialect::read_alone`] (the point readers)
    /// equal to it.
    #[cfg(test)]
    pub(crate) async fn pooled_read(
        &self,
        tenant: TenantId,
        target: &Target,
    ) -> StoreResult<Option<(OperationRecord, DateTime<Utc>)>> {
        Self::read_with_clock(&self.readers, tenant, target).await
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
        super::run_migrations(&MIGRATOR, &self.writer).await
    }

    async fn pending_migrations(&self) -> Result<usize> {
        let applied: Vec<i64> = sqlx::query_scalar(
            "SELECT version FROM _sqlx_migrations WHERE success = 1 ORDER BY version",
        )
        .fetch_all(&self.readers)
        .instrument(Self::statement("SELECT _sqlx_migrations"))
        .await
        .unwrap_or_default();
        Ok(MIGRATOR
            .iter()
            .filter(|migration| !applied.contains(&migration.version))
            .count())
    }

    /// A scope's record as the readers see it, for a Claim.
    async fn read_existing(
        &self,
        tenant: TenantId,
        target: &Target,
    ) -> StoreResult<Option<ClaimStart>> {
        let found = self.read_alone(tenant, target).await?;
        Ok(found.map(|(record, now)| ClaimStart::Existing(Found::without_history(record, now))))
    }

    /// The first claim of a scope: the fence drawn, the row inserted and
    /// its CLAIMED entry written by one query (insert_first_claim.sql), run
    /// by the writer's committer in its group ([`GroupWriter::write_one`]);
    /// the unique scope settles it. A scope that has a record inserts
    /// nothing; that record is committed by the time the answer comes (an
    /// earlier group's or this one's), so the readers read it.
    async fn insert_first_claim(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> StoreResult<Option<ClaimStart>> {
        let owned = command.clone();
        let inserted = self
            .group
            .write_one(move |connection| {
                one_query::insert_first_claim(connection, tenant, operation_id, &owned)
            })
            .await?;
        match inserted {
            Some(row) => Ok(Some(ClaimStart::Inserted(OperationRecord::try_from(row)?))),
            None => {
                self.read_existing(tenant, &Target::Scope(command.scope.clone()))
                    .await
            }
        }
    }
}

impl Dialect for SqliteStore {
    type Db = Sqlite;
    type Stamp = String;

    const KIND: &'static str = "sqlite";
    const SYSTEM: &'static str = "sqlite";
    // The single writer serialises every write: no transaction conflicts.
    const TRANSACTION_ATTEMPTS: usize = 1;
    // `BEGIN IMMEDIATE` already holds the write lock: nothing to add (the
    // locked path reads record and clock by one statement:
    // `begin_write_locked`).
    const LOCK_BY_SCOPE: &'static str = select_operation_sql!(by_scope, "", "");
    const LOCK_BY_ID: &'static str = select_operation_sql!(by_id, "", "");
    const READ_BY_SCOPE: &'static str = read_with_clock_sql!(by_scope);
    const READ_BY_ID: &'static str = read_with_clock_sql!(by_id);
    const CLOCK: &'static str = concat!("SELECT ", now_sql!());
    const GUARDED_UPDATE: &'static str = sqlite_guarded_update_sql!();
    const GUARDED_UPDATE_THEN_APPEND: Option<&'static str> = Some(concat!(
        sqlite_guarded_update_sql!(),
        ";\n",
        include_str!("sql/append_entry_after_update.sql")
    ));
    // The single writer serialises sweeps with every other write, so no row
    // needs skipping: what this batch selects, nobody else holds.
    const DUE_FOR_TOMBSTONE: &'static str = due_for_tombstone_sql!("");
    const DUE_FOR_DEADLINE: &'static str = due_for_deadline_sql!("");
    const DELETE_EXPIRED_TOMBSTONES: &'static str = delete_expired_tombstones_sql!("");
    // INTEGER columns are 64-bit: nothing to widen.
    const SELECT_HISTORY: &'static str = select_history_sql!("count");
    // Runs when count_into_last_history_entry counted nothing.
    const APPEND_HISTORY: &'static str = include_str!("sql/append_history.sql");

    fn stamp(moment: DateTime<Utc>) -> String {
        stamp(moment)
    }

    fn rows_affected(result: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        result.rows_affected()
    }

    fn classify_code(result_code: &str) -> ErrorClass {
        let unavailable = result_code.parse::<i64>().is_ok_and(is_unavailable_code);
        if unavailable {
            ErrorClass::Unavailable
        } else {
            ErrorClass::Internal
        }
    }

    /// A file on this machine: no connection to lose on the way, so a read
    /// dropped with its call goes back to the pool as sqlx returns it.
    type Read = PoolConnection<Sqlite>;

    async fn acquire_read(&self) -> StoreResult<PoolConnection<Sqlite>> {
        Ok(self.reader_waits.time(self.readers.acquire()).await?)
    }

    fn release_read(read: PoolConnection<Sqlite>) {
        drop(read);
    }

    /// On the point readers ([`point_reads`]), not the pool.
    async fn read_alone(
        &self,
        tenant: TenantId,
        target: &Target,
    ) -> StoreResult<Option<(OperationRecord, DateTime<Utc>)>> {
        Ok(self
            .point_reads
            .read_with_clock(&self.reader_waits, tenant, target)
            .await?)
    }

    type ReadTransaction = sqlx::Transaction<'static, Sqlite>;

    async fn begin_read(&self) -> StoreResult<sqlx::Transaction<'static, Sqlite>> {
        Ok(self.reader_waits.time(self.readers.begin()).await?)
    }

    /// A SQLite transaction reads one snapshot from its first read on.
    async fn begin_snapshot(&self) -> StoreResult<sqlx::Transaction<'static, Sqlite>> {
        Ok(self.reader_waits.time(self.readers.begin()).await?)
    }

    async fn end_read(&self, read: sqlx::Transaction<'static, Sqlite>) -> StoreResult<()> {
        Ok(read.rollback().await?)
    }

    fn pause_before_write(&self) -> Option<&PauseHook> {
        self.pause_before_write.as_ref()
    }

    fn history_cap(&self) -> HistoryCap {
        self.history_cap
    }

    type Write = Member;

    /// A place in the writer's shared transaction (`BEGIN IMMEDIATE`: the
    /// write lock is taken before the first read, so the read, the decision
    /// and the write see no other writer).
    async fn begin_write(&self) -> StoreResult<Member> {
        self.group.begin().await
    }

    /// The savepoint statements and the read of record and clock go to the
    /// writer's thread as one query.
    async fn begin_write_locked(
        &self,
        tenant: TenantId,
        target: &Target,
    ) -> StoreResult<(Member, Option<AtClock>)> {
        let target = target.clone();
        self.group
            .begin_with(move |connection, opening| {
                Box::pin(async move {
                    Self::read_with_clock_by(
                        &mut *connection,
                        opening.pick(&LOCK_BY_SCOPE_OPENED),
                        opening.pick(&LOCK_BY_ID_OPENED),
                        tenant,
                        &target,
                    )
                    .await
                })
            })
            .await
    }

    /// Waits for the group commit that holds this write.
    async fn commit(&self, write: Member) -> StoreResult<()> {
        self.group.commit(write).await
    }

    async fn rollback(&self, write: Member) -> StoreResult<()> {
        self.group.rollback(write).await
    }

    /// The next fence of the one ever-growing counter, which the guarded
    /// UPDATE and the first claim's INSERT then read.
    async fn advance_fence(connection: &mut SqliteConnection) -> StoreResult<()> {
        sqlx::query("UPDATE operation_fence SET last_fence = last_fence + 1 WHERE singleton = 1")
            .execute(&mut *connection)
            .instrument(Self::statement("UPDATE operation_fence"))
            .await?;
        Ok(())
    }

    // SQLite has no writable CTEs: counting into the last entry is a
    // statement of its own (its mirror of HistoryCap::place: see the file).
    async fn count_into_last_history_entry(
        connection: &mut SqliteConnection,
        operation_id: OperationId,
        entry: &NewHistoryEntry,
        coalesce_key: Option<&str>,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let counted = sqlx::query(include_str!("sql/count_into_last_history_entry.sql"))
            .bind(operation_id.0)
            .bind(coalesce_key)
            .bind(stamp(now))
            .bind(signed(entry.fence)?)
            .bind(entry.to_state.as_str())
            .bind(i32::try_from(entry.attempt).unwrap_or(i32::MAX))
            .bind(entry.kept_past_cap())
            .bind(i32::try_from(cap.max_entries).unwrap_or(i32::MAX))
            .bind(HistoryCap::TRUNCATED_KEY)
            .execute(&mut *connection)
            .instrument(Self::statement("UPDATE operation_history"))
            .await?;
        Ok(counted.rows_affected() > 0)
    }

    /// The common case of Renew, Complete and Fail as one query
    /// (write_guarded.sql), queued for the writer's committer; a write whose
    /// guard does not hold writes nothing, and the locked path decides.
    async fn write_guarded(
        &self,
        tenant: TenantId,
        guarded: GuardedWrite,
    ) -> StoreResult<Option<Applied>> {
        // A fence past i64 is no row's: the locked path answers it.
        let Ok(fence) = i64::try_from(guarded.guard.fence) else {
            return Ok(None);
        };
        let cap = self.history_cap;
        let written = self
            .group
            .write_one(move |connection| {
                one_query::write_guarded(connection, tenant, fence, &guarded, cap)
            })
            .await?;
        // Refused, it wrote nothing.
        let Some((row, db_now)) = written else {
            return Ok(None);
        };
        Ok(Some(Applied {
            record: OperationRecord::try_from(row)?,
            answer: Ok(Answer::Written),
            now: db_now,
            record_changed: true,
        }))
    }

    fn pool_usage(&self) -> PoolUsage {
        let count = |value: usize| u32::try_from(value).unwrap_or(u32::MAX);
        let (point_size, point_idle, point_max) = self.point_reads.usage();
        PoolUsage {
            size: self.writer.size() + self.readers.size() + point_size,
            idle: count(self.writer.num_idle())
                .saturating_add(count(self.readers.num_idle()))
                .saturating_add(count(point_idle)),
            max: self.writer.options().get_max_connections()
                + self.readers.options().get_max_connections()
                + point_max,
            waits: self.reader_waits.totals(),
        }
    }

    async fn close(&self) {
        self.group.close().await;
        self.writer.close().await;
        self.readers.close().await;
        self.point_reads.close().await;
        // No connection of this process touches the file any more: another
        // process may own it now.
        if let Ok(mut lock) = self.lock.lock() {
            lock.take();
        }
    }

    /// One write transaction (a place in the writer's group commit), one
    /// UPDATE per operation: SQLite runs in this process, so a statement is
    /// a function call, and the commit is what costs.
    async fn add_answer_counts(&self, tallies: &[AnswerTally]) -> StoreResult<()> {
        let mut transaction = self.begin_write().await?;
        let added = async {
            let now = Self::database_now(&mut transaction).await?;
            for tally in tallies {
                let last_replay_at = tally.last_replay_ago.map(|ago| {
                    stamp(now - chrono::TimeDelta::from_std(ago).unwrap_or(chrono::TimeDelta::MAX))
                });
                sqlx::query(include_str!("sql/add_answer_counts.sql"))
                    .bind(tally.operation_id.0)
                    .bind(i64::try_from(tally.replays).unwrap_or(i64::MAX))
                    .bind(i64::try_from(tally.pendings).unwrap_or(i64::MAX))
                    .bind(last_replay_at)
                    .execute(&mut *transaction)
                    .instrument(Self::statement("UPDATE operations answer counts"))
                    .await?;
            }
            Ok::<_, StoreError>(())
        }
        .await;
        match added {
            Ok(()) => self.commit(transaction).await,
            Err(error) => {
                let _ = self.rollback(transaction).await;
                Err(error)
            }
        }
    }

    /// Replays and duplicates of a running attempt are read by the readers,
    /// beside the writer; only a scope without a record takes the write lock.
    async fn insert_or_find(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> StoreResult<Option<ClaimStart>> {
        let target = Target::Scope(command.scope.clone());
        if let Some(found) = self.read_existing(tenant, &target).await? {
            return Ok(Some(found));
        }
        // Claims of one new scope take the writer one at a time: the first
        // inserts; the others (a hot key: every client on one scope at once)
        // then find its record beside the writer, instead of each queueing
        // on the writer to learn that the scope is taken (at 64 clients,
        // enough to keep a busy writer past its acquire timeout).
        let turn = self.first_claims.turn(tenant, &target).await;
        if turn.waited()
            && let Some(found) = self.read_existing(tenant, &target).await?
        {
            return Ok(Some(found));
        }
        self.insert_first_claim(tenant, operation_id, command).await
    }
}

/// Refuses a connection that does not have the settings durability and
/// integrity rest on; SQLite ignores a pragma it cannot apply silently.
async fn verify_connection(connection: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    let journal_mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut *connection)
        .instrument(SqliteStore::statement("PRAGMA journal_mode"))
        .await?;
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut *connection)
        .instrument(SqliteStore::statement("PRAGMA synchronous"))
        .await?;
    let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
        .fetch_one(&mut *connection)
        .instrument(SqliteStore::statement("PRAGMA foreign_keys"))
        .await?;
    required_settings(&journal_mode, synchronous, foreign_keys)
        .map_err(|refused| sqlx::Error::Configuration(refused.into()))
}

/// Why a connection with these settings is refused, if it is: WAL,
/// `synchronous=FULL` or more and foreign keys on, which durability and
/// integrity rest on. Every connection to the file is checked by it.
fn required_settings(
    journal_mode: &str,
    synchronous: i64,
    foreign_keys: i64,
) -> Result<(), String> {
    if !journal_mode.eq_ignore_ascii_case("wal")
        || synchronous < SYNCHRONOUS_FULL
        || foreign_keys != 1
    {
        return Err(format!(
            "sqlite connection has journal_mode={journal_mode}, synchronous={synchronous}, \
             foreign_keys={foreign_keys}; idemd needs journal_mode=wal, synchronous=2 (FULL) \
             and foreign_keys=1"
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

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

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
        use sqlx::{ConnectOptions, Connection};
        #[expect(clippy::disallowed_methods, reason = "a test names its own directory")]
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
            // Closed and waited for, not dropped: a dropped connection closes
            // on sqlx's worker thread later, and switching the journal mode
            // away from WAL needs the file to itself.
            good.close().await.expect("closes");
            let mut connection = weaker.connect().await.expect("connects");
            let refused = verify_connection(&mut connection).await;
            assert!(
                matches!(refused, Err(sqlx::Error::Configuration(_))),
                "{refused:?}"
            );
            good = connection;
        }
        good.close().await.expect("closes");
        let _ = std::fs::remove_dir_all(directory);
    }

    /// An owned store on a new file in a new temp directory (removed by the
    /// caller).
    async fn store_in_a_directory_of_its_own(
        name: &str,
        readers: u32,
    ) -> (SqliteStore, std::path::PathBuf) {
        #[expect(clippy::disallowed_methods, reason = "a test names its own directory")]
        let directory = std::env::temp_dir().join(format!("idemd-{name}-{}", uuid::Uuid::now_v7()));
        let path = directory.join(format!("{name}.db"));
        let lock = DatabaseLock::try_acquire(&path)
            .expect("lockable")
            .expect("free");
        let store = SqliteStore::open(
            &SqliteOptions {
                path,
                max_read_connections: readers,
                acquire_timeout: Duration::from_secs(30),
            },
            lock,
        )
        .await
        .expect("opens");
        (store, directory)
    }

    /// The statements that run over many rows (the sweeper's, the gauges',
    /// ListUnresolved) must find their rows through an index: SQLite uses a
    /// partial index only when the query repeats its WHERE, and a plain
    /// `SCAN operations` at 10M rows holds the writer for seconds.
    #[tokio::test]
    async fn background_statements_read_indexes_not_the_whole_table() {
        use crate::store::sql::{COUNT_OPERATIONS, SELECT_UNRESOLVED};
        let (store, directory) = store_in_a_directory_of_its_own("plan", 1).await;
        for (name, sql, parameters) in [
            ("tombstones due", SqliteStore::DUE_FOR_TOMBSTONE, 2),
            ("deadlines due", SqliteStore::DUE_FOR_DEADLINE, 2),
            ("old tombstones", SqliteStore::DELETE_EXPIRED_TOMBSTONES, 2),
            ("gauges", COUNT_OPERATIONS, 1),
            ("unresolved", SELECT_UNRESOLVED, 6),
        ] {
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let mut query =
                sqlx::query_as::<_, (i64, i64, i64, String)>(sqlx::AssertSqlSafe(explain));
            for _ in 0..parameters {
                query = query.bind(Option::<String>::None);
            }
            let plan = query
                .fetch_all(&store.readers)
                .await
                .unwrap_or_else(|error| panic!("{name}: {error}"));
            let full_scans: Vec<_> = plan
                .iter()
                .map(|(_, _, _, detail)| detail)
                .filter(|detail| detail.starts_with("SCAN operations") && !detail.contains("USING"))
                .collect();
            assert!(full_scans.is_empty(), "{name} scans the table: {plan:#?}");
        }
        store.close().await;
        let _ = std::fs::remove_dir_all(directory);
    }

    /// A hot key: many Claims of one new scope at once. One of them takes
    /// the writer; the others wait for it in the replica, not on the writer
    /// (where each would only learn that the scope is taken), then find its
    /// record.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claims_of_one_new_scope_queue_on_the_writer_once() {
        use crate::domain::{Fingerprint, OnFailed, Scope};
        use crate::service::DrawOperationId as _;
        use crate::store::Store;

        let (store, directory) = store_in_a_directory_of_its_own("hot", 2).await;
        let tenant = store
            .create_tenant("hot", &[7; 32])
            .await
            .expect("a tenant");
        let command = Arc::new(ClaimCommand {
            scope: Scope {
                operation: "hot".into(),
                key: "one-key".into(),
            },
            fingerprint: Fingerprint([7; 32]),
            claim_token: b"claimer".to_vec(),
            lease: TimeDelta::seconds(30),
            max_attempt_duration: TimeDelta::seconds(30),
            max_attempts: 3,
            retention: TimeDelta::hours(1),
            operation_deadline: None,
            on_failed: OnFailed::Replay,
            clock_margin: TimeDelta::zero(),
            previous_fingerprints: Vec::new(),
            held: None,
        });
        // The writer busy with another write meanwhile.
        let busy = store.group.begin().await.expect("the writer");
        let claims: Vec<_> = (0..20)
            .map(|_| {
                let store = store.clone();
                let command = Arc::clone(&command);
                tokio::spawn(async move {
                    Store::insert_or_find(&store, tenant, OperationId::generate(), &command).await
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let queued = store.group.waiting();
        store.group.rollback(busy).await.expect("rolled back");
        let mut inserted = 0;
        for claim in claims {
            match claim.await.expect("joined").expect("answered") {
                Some(ClaimStart::Inserted(_)) => inserted += 1,
                Some(ClaimStart::Existing(found)) => {
                    assert_eq!(found.record.scope, command.scope);
                }
                None => panic!("the scope is the tenant's"),
            }
        }
        assert_eq!(inserted, 1, "one Claim inserts the record");
        assert!(
            queued <= 1,
            "{queued} Claims of one scope queued on the writer at once"
        );
        Store::close(&store).await;
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
