//! The embedded store's reads of one operation and the clock outside a
//! transaction (`Dialect::read_alone`: a Claim's look at its scope, so every
//! replay and pending answer, a waiting Claim's poll, a lookup without
//! history), on read connections of their own, driven directly through
//! rusqlite. rusqlite links sqlx's own SQLite library (one `libsqlite3-sys`
//! in the build), so SQLite's file locks know every connection of the
//! process.
//!
//! Why not sqlx's reader pool, which every other read uses: a statement on a
//! sqlx SQLite connection is a round trip to that connection's own thread,
//! and sqlx 0.9 pings each connection it takes back into the pool, another
//! round trip. For a replay that misses the result cache those hand-offs
//! were most of the server's CPU (bench/README.md, "Where the time goes").
//! Here the whole read (the statement from the connection's cache, its
//! step, the row decoded) runs where the Claim runs, on its tokio worker,
//! without a hand-off: a point read of a local file takes microseconds, and
//! a read through a blocking task cost a third more CPU per replay
//! (bench/README.md). It never waits there: its connection has no busy
//! timeout, and a read SQLite would make wait for a lock (a WAL being
//! recovered, a checkpoint restarting the log) runs again on a blocking
//! thread, with the busy timeout every other connection has.
//!
//! The statement is the one the sqlx path runs (`Dialect::READ_BY_SCOPE`,
//! `READ_BY_ID`), decoded into the same [`OperationRow`] and converted as
//! every read is; a mirror test (`store::mirror_tests::point_read`) holds the
//! two reads' records equal.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OpenFlags, ToSql};
use tokio::sync::Semaphore;

use super::super::acquire::AcquireWaits;
use super::super::row::OperationRow;
use super::rusqlite_rows::{Failure, decode, is_busy};
use crate::domain::{Error, OperationRecord, Target, TenantId};

/// The statements a point read runs: an operation and the database clock,
/// by scope (`$1` tenant, `$2` operation, `$3` key) or by id (`$1` tenant,
/// `$2` operation id), the columns in [`OperationRow`]'s order, the clock
/// last.
#[derive(Clone, Copy)]
pub(super) struct PointStatements {
    pub(super) by_scope: &'static str,
    pub(super) by_id: &'static str,
}

/// How the point readers open their connections.
pub(super) struct PointReaderOptions {
    pub(super) path: PathBuf,
    /// Connections at most (each opened when first needed).
    pub(super) max_connections: u32,
    /// How long a read waits for a connection, and SQLite's busy timeout.
    pub(super) acquire_timeout: Duration,
    /// `PRAGMA cache_size`, as the sqlx readers have it.
    pub(super) cache_size: &'static str,
    pub(super) statements: PointStatements,
}

#[derive(Clone)]
pub(super) struct PointReaders {
    readers: Arc<Readers>,
    /// One permit per connection: a read holds one from before it takes a
    /// connection until after it gives the connection back.
    permits: Arc<Semaphore>,
    /// Connections at most, the permits' number.
    connections: u32,
}

struct Readers {
    options: PointReaderOptions,
    idle: Mutex<Idle>,
}

/// The connections no read holds, and whether the store closed (read under
/// the same lock that keeps a connection, so none is kept after the close).
#[derive(Default)]
struct Idle {
    connections: Vec<Connection>,
    closed: bool,
}

/// A read on a tokio worker never waits for a lock: SQLITE_BUSY at once.
const NO_WAIT: Duration = Duration::ZERO;

impl PointReaders {
    pub(super) fn new(options: PointReaderOptions) -> Self {
        let connections = options.max_connections.max(1);
        Self {
            readers: Arc::new(Readers {
                options,
                idle: Mutex::default(),
            }),
            permits: Arc::new(Semaphore::new(connections as usize)),
            connections,
        }
    }

    /// The operation of `target` and the database clock, read in one
    /// statement (its own snapshot), or `None` when the tenant has no such
    /// operation. Waits for a connection at most the acquire timeout
    /// (counted in `waits`); a busy or closed database is UNAVAILABLE.
    pub(super) async fn read_with_clock(
        &self,
        waits: &AcquireWaits,
        tenant: TenantId,
        target: &Target,
    ) -> Result<Option<(OperationRecord, DateTime<Utc>)>, Error> {
        let acquire_timeout = self.readers.options.acquire_timeout;
        let permit = waits
            .time(tokio::time::timeout(
                acquire_timeout,
                Arc::clone(&self.permits).acquire_owned(),
            ))
            .await
            .map_err(|_| Error::unavailable("the embedded store's readers are busy"))?
            .map_err(|_| Error::unavailable("the embedded store is closed"))?;
        match self.readers.read(tenant, target, NO_WAIT) {
            Err(Failure::Database(error)) if is_busy(&error) => {}
            read => return read.map_err(Failure::into_domain),
        }
        let readers = Arc::clone(&self.readers);
        let target = target.clone();
        // The task owns the permit and gives the connection back itself, so
        // a caller that goes away leaves nothing behind.
        tokio::task::spawn_blocking(move || {
            let read = readers.read(tenant, &target, acquire_timeout);
            drop(permit);
            read.map_err(Failure::into_domain)
        })
        .await
        .map_err(|error| Error::Internal(format!("a point read failed: {error}")))?
    }

    /// Connections open now (idle, or held by a read), idle now, and at most.
    pub(super) fn usage(&self) -> (u32, usize, u32) {
        let idle = self
            .readers
            .idle
            .lock()
            .map_or(0, |idle| idle.connections.len());
        let held = self
            .connections
            .saturating_sub(u32::try_from(self.permits.available_permits()).unwrap_or(0));
        let open = u32::try_from(idle).unwrap_or(u32::MAX).saturating_add(held);
        (open, idle, self.connections)
    }

    /// Waits for the reads under way (at most the acquire timeout), then
    /// refuses new ones and closes every connection.
    pub(super) async fn close(&self) {
        let _ = tokio::time::timeout(
            self.readers.options.acquire_timeout,
            self.permits.acquire_many(self.connections),
        )
        .await;
        self.permits.close();
        let idle = self
            .readers
            .idle
            .lock()
            .map(|mut idle| {
                idle.closed = true;
                std::mem::take(&mut idle.connections)
            })
            .unwrap_or_default();
        drop(idle);
    }
}

type Read = Result<Option<(OperationRecord, DateTime<Utc>)>, Failure>;

impl Readers {
    /// One read on a connection that waits up to `busy_timeout` for a lock
    /// ([`NO_WAIT`] on a tokio worker).
    fn read(&self, tenant: TenantId, target: &Target, busy_timeout: Duration) -> Read {
        let connection = self.take(busy_timeout)?;
        let read = self.read_on(&connection, tenant, target);
        self.give_back(connection);
        read
    }

    /// An idle connection, or a new one, that waits up to `busy_timeout`
    /// for a lock.
    fn take(&self, busy_timeout: Duration) -> rusqlite::Result<Connection> {
        let idle = self
            .idle
            .lock()
            .ok()
            .and_then(|mut idle| idle.connections.pop());
        let Some(connection) = idle else {
            return self.open(busy_timeout);
        };
        connection.busy_timeout(busy_timeout)?;
        Ok(connection)
    }

    /// Keeps the connection for the next read, without a busy timeout; a
    /// store that closed meanwhile closes it.
    fn give_back(&self, connection: Connection) {
        if connection.busy_timeout(NO_WAIT).is_ok()
            && let Ok(mut idle) = self.idle.lock()
            && !idle.closed
        {
            idle.connections.push(connection);
        }
    }

    /// A connection as the sqlx readers have theirs: the file the writer
    /// created (and switched to WAL, which the file keeps), read only;
    /// waiting up to `busy_timeout` for a lock.
    fn open(&self, busy_timeout: Duration) -> rusqlite::Result<Connection> {
        let options = &self.options;
        let connection = Connection::open_with_flags(
            &options.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        connection.busy_timeout(busy_timeout)?;
        connection.pragma_update(None, "query_only", true)?;
        connection.execute_batch(&format!("PRAGMA cache_size = {}", options.cache_size))?;
        Ok(connection)
    }

    fn read_on(&self, connection: &Connection, tenant: TenantId, target: &Target) -> Read {
        let statements = self.options.statements;
        let found = match target {
            Target::Scope(scope) => query_one(
                connection,
                statements.by_scope,
                &[
                    ("$1", &tenant.0),
                    ("$2", &scope.operation),
                    ("$3", &scope.key),
                ],
            ),
            Target::Id(operation_id) => query_one(
                connection,
                statements.by_id,
                &[
                    ("$1", &tenant.0),
                    ("$2", &operation_id.0.as_bytes().as_slice()),
                ],
            ),
        }?;
        found
            .map(|(row, now)| Ok((OperationRecord::try_from(row)?, now)))
            .transpose()
    }
}

/// Runs `sql` (named parameters, as sqlx's `$N` are to SQLite) and decodes
/// its row, if any.
fn query_one(
    connection: &Connection,
    sql: &str,
    parameters: &[(&str, &dyn ToSql)],
) -> Result<Option<(OperationRow, DateTime<Utc>)>, Failure> {
    let mut statement = connection.prepare_cached(sql)?;
    let mut rows = statement.query(parameters)?;
    match rows.next()? {
        Some(row) => Ok(Some(decode(row)?)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::mpsc;
    use std::time::Instant;

    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool};

    use super::super::super::dialect::Dialect as _;
    use super::super::{MIGRATOR, SqliteStore};
    use super::*;
    use crate::domain::Scope;
    use uuid::Uuid;

    /// A directory of the test's own, removed when it ends.
    struct Directory(PathBuf);

    impl Directory {
        fn new() -> Self {
            let path = std::env::temp_dir().join(format!("idemd-point-{}", Uuid::new_v4()));
            std::fs::create_dir_all(&path).expect("a directory");
            Self(path)
        }
    }

    impl Drop for Directory {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A WAL reader seldom has to wait for a lock; in a rollback-journal
    /// file, a writer holding its exclusive lock makes every reader wait.
    /// So the waiting is tested on such a file, with idemd's schema.
    async fn journal_database(directory: &Path) -> PathBuf {
        let path = directory.join("journal.db");
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Delete);
        let pool = SqlitePool::connect_with(options).await.expect("opens");
        MIGRATOR.run(&pool).await.expect("migrates");
        pool.close().await;
        path
    }

    fn readers(path: PathBuf, acquire_timeout: Duration) -> PointReaders {
        PointReaders::new(PointReaderOptions {
            path,
            max_connections: 2,
            acquire_timeout,
            cache_size: "-512",
            statements: PointStatements {
                by_scope: SqliteStore::READ_BY_SCOPE,
                by_id: SqliteStore::READ_BY_ID,
            },
        })
    }

    /// Holds the file's exclusive lock for `held`, from a connection of its
    /// own; returns once the lock is taken.
    fn hold_exclusive_lock(path: &Path, held: Duration) -> std::thread::JoinHandle<()> {
        let path = path.to_owned();
        let (taken, is_taken) = mpsc::channel();
        #[expect(
            clippy::disallowed_methods,
            reason = "a thread of its own, not a tokio worker"
        )]
        let holder = std::thread::spawn(move || {
            let connection = Connection::open(&path).expect("opens");
            connection
                .execute_batch("BEGIN EXCLUSIVE")
                .expect("the lock");
            taken.send(()).expect("told");
            std::thread::sleep(held);
            connection.execute_batch("COMMIT").expect("released");
        });
        is_taken.recv().expect("the lock is taken");
        holder
    }

    fn scope() -> Target {
        Target::Scope(Scope {
            operation: "charge".into(),
            key: "k-1".into(),
        })
    }

    /// A read of the point readers (waiting at most `acquire_timeout`)
    /// started while another connection holds the file's lock for `held`.
    struct UnderLock {
        readers: PointReaders,
        waits: AcquireWaits,
        holder: std::thread::JoinHandle<()>,
        read: Result<Option<(OperationRecord, DateTime<Utc>)>, Error>,
        took: Duration,
        _directory: Directory,
    }

    async fn read_under_lock(acquire_timeout: Duration, held: Duration) -> UnderLock {
        let directory = Directory::new();
        let path = journal_database(&directory.0).await;
        let readers = readers(path.clone(), acquire_timeout);
        let waits = AcquireWaits::default();
        let holder = hold_exclusive_lock(&path, held);
        let started = Instant::now();
        let read = readers.read_with_clock(&waits, TenantId(1), &scope()).await;
        UnderLock {
            readers,
            waits,
            holder,
            read,
            took: started.elapsed(),
            _directory: directory,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_that_must_wait_for_a_lock_waits_for_it_off_the_worker() {
        let ran = read_under_lock(Duration::from_secs(10), Duration::from_millis(300)).await;
        let read = &ran.read;
        assert!(
            matches!(read, Ok(None)),
            "the read waited for the lock and found nothing: {read:?}"
        );
        assert!(ran.took >= Duration::from_millis(200), "it waited");
        ran.holder.join().expect("the holder ends");
        ran.readers.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lock_held_past_the_acquire_timeout_is_unavailable() {
        let ran = read_under_lock(Duration::from_millis(200), Duration::from_secs(2)).await;
        let read = &ran.read;
        assert!(
            matches!(read, Err(Error::Unavailable { .. })),
            "a busy database is UNAVAILABLE: {read:?}"
        );
        assert!(
            ran.took < Duration::from_millis(1_500),
            "within the timeout"
        );
        ran.holder.join().expect("the holder ends");
        let (readers, waits) = (&ran.readers, &ran.waits);
        let after = readers.read_with_clock(waits, TenantId(1), &scope()).await;
        assert!(
            matches!(after, Ok(None)),
            "reads again once it is free: {after:?}"
        );
        readers.close().await;
        let closed = readers.read_with_clock(waits, TenantId(1), &scope()).await;
        assert!(
            matches!(closed, Err(Error::Unavailable { .. })),
            "closed: {closed:?}"
        );
    }
}
