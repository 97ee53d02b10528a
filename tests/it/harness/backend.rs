//! The stores a test runs on (a fresh Postgres database, or a fresh SQLite
//! data directory), and `store_tests!`, which runs one test on each.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use idemd::store::postgres::PostgresStore;
use idemd::store::sqlite::{DatabaseLock, SqliteOptions, SqliteStore};
use idemd::store::{PauseHook, Store};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::temp_dir::TempDir;

/// A pool with the session settings the server's own pool uses.
pub async fn pool(connect: PgConnectOptions) -> PgPool {
    PgPoolOptions::new()
        .max_connections(20)
        .connect_with(idemd::store::postgres::session_settings(
            connect,
            &idemd::store::postgres::SessionTimeouts::default(),
            idemd::store::postgres::DatabaseKeepalive::default(),
        ))
        .await
        .expect("test database reachable")
}

/// Emits, for each named `async fn name(backend: Backend)` of the calling
/// module, a module `name` with two tests: `postgres` (a fresh database per
/// test, created by `#[sqlx::test]` on DATABASE_URL's server and migrated)
/// and `sqlite` (a fresh data directory, removed afterwards).
macro_rules! store_tests {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
            async fn postgres(
                _: sqlx::postgres::PgPoolOptions,
                connect: sqlx::postgres::PgConnectOptions,
            ) {
                super::$name(crate::harness::Backend::postgres(connect).await).await;
            }

            #[tokio::test]
            async fn sqlite() {
                super::$name(crate::harness::Backend::sqlite().await).await;
            }
        }
    )+};
}
pub(crate) use store_tests;

/// The store a test runs on, with the handles a test needs to reach under
/// the API: the same data reopened as a restarted process would, and the
/// few statements a test must run on the database itself.
pub enum Backend {
    Postgres {
        connect: Box<PgConnectOptions>,
        pool: PgPool,
        store: PostgresStore,
    },
    Sqlite {
        directory: Arc<TempDir>,
        store: SqliteStore,
    },
}

impl Backend {
    /// The database `#[sqlx::test]` created and migrated for this test.
    pub async fn postgres(connect: PgConnectOptions) -> Self {
        let pool = pool(connect.clone()).await;
        Self::Postgres {
            connect: Box::new(connect),
            store: PostgresStore::from_pool(pool.clone()),
            pool,
        }
    }

    /// A fresh data directory with a new embedded store, owned (locked) by
    /// this test.
    pub async fn sqlite() -> Self {
        let directory = Arc::new(TempDir::new());
        let store = open_sqlite(directory.path()).await;
        Self::Sqlite { directory, store }
    }

    /// The same store, holding each operation's history to `max_entries`.
    pub fn with_history_cap(self, max_entries: u32) -> Self {
        let cap = idemd::domain::HistoryCap { max_entries };
        match self {
            Self::Postgres {
                connect,
                pool,
                store,
            } => Self::Postgres {
                connect,
                pool,
                store: store.with_history_cap(cap),
            },
            Self::Sqlite { directory, store } => Self::Sqlite {
                directory,
                store: store.with_history_cap(cap),
            },
        }
    }

    pub fn store(&self) -> Arc<dyn Store> {
        match self {
            Self::Postgres { store, .. } => Arc::new(store.clone()),
            Self::Sqlite { store, .. } => Arc::new(store.clone()),
        }
    }

    /// The same store, pausing in every transition between its read and its
    /// write until the hook returns.
    pub fn paused(&self, hook: PauseHook) -> Arc<dyn Store> {
        match self {
            Self::Postgres { store, .. } => Arc::new(store.with_pause_before_write(hook)),
            Self::Sqlite { store, .. } => Arc::new(store.with_pause_before_write(hook)),
        }
    }

    /// Closes this store and opens the same data again, as a new process
    /// would: new connections, nothing kept in memory.
    pub async fn reopen(self) -> Self {
        match self {
            Self::Postgres { connect, pool, .. } => {
                pool.close().await;
                Self::postgres(*connect).await
            }
            Self::Sqlite { directory, store } => {
                store.close().await;
                let store = open_sqlite(directory.path()).await;
                Self::Sqlite { directory, store }
            }
        }
    }

    /// Runs one statement on the database, outside the store; for SQL that
    /// both dialects spell alike. Without the server's statement timeout: a
    /// test's own setup statement is not what is under test, and on a loaded
    /// CI machine a one-row UPDATE once took longer than its 5 s.
    pub async fn execute(&self, statement: &'static str) -> u64 {
        match self {
            Self::Postgres { pool, .. } => {
                async {
                    let mut transaction = pool.begin().await?;
                    sqlx::query("SET LOCAL statement_timeout = 0")
                        .execute(&mut *transaction)
                        .await?;
                    let done = sqlx::query(statement).execute(&mut *transaction).await?;
                    transaction.commit().await?;
                    Ok::<_, sqlx::Error>(done.rows_affected())
                }
                .await
            }
            Self::Sqlite { store, .. } => sqlx::query(statement)
                .execute(store.writer_pool())
                .await
                .map(|done| done.rows_affected()),
        }
        .expect("statement runs")
    }

    /// `SELECT count(*) …` on the database, outside the store.
    pub async fn count(&self, query: &'static str) -> i64 {
        match self {
            Self::Postgres { pool, .. } => sqlx::query_scalar(query).fetch_one(pool).await,
            Self::Sqlite { store, .. } => {
                sqlx::query_scalar(query)
                    .fetch_one(store.writer_pool())
                    .await
            }
        }
        .expect("count")
    }

    /// Moves every record's retention a second into the past, by the
    /// database's clock, so the next sweep finds it due.
    pub async fn age_retention(&self) {
        let statement = match self {
            Self::Postgres { .. } => {
                "UPDATE operations SET retain_until = clock_timestamp() - interval '1 second'"
            }
            Self::Sqlite { .. } => {
                "UPDATE operations SET retain_until = \
                     strftime('%Y-%m-%dT%H:%M:%f', 'now', '-1 second') || '000Z'"
            }
        };
        self.execute(statement).await;
    }
}

pub fn sqlite_options(directory: &Path) -> SqliteOptions {
    SqliteOptions {
        path: directory.join("idemd.db"),
        max_read_connections: 8,
        acquire_timeout: Duration::from_secs(5),
    }
}

pub async fn open_sqlite(directory: &Path) -> SqliteStore {
    let options = sqlite_options(directory);
    let lock = DatabaseLock::try_acquire(&options.path)
        .expect("lock file")
        .expect("nobody else owns a fresh test directory");
    SqliteStore::open(&options, lock)
        .await
        .expect("sqlite store opens")
}
