//! Which store a command uses, as DATABASE_URL (or its absence) says, and
//! opening it from plain options for what the command does: serving,
//! migrating, or a short tenant write beside a running server. The app fills
//! the options from its flags.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::migrate::MigrateDatabase;
use tracing::{info, warn};

use crate::domain::HistoryCap;
use crate::error::BoxError;
use crate::store::Store;
use crate::store::bounded::Bounded;
use crate::store::postgres::{DatabaseKeepalive, PostgresOptions, PostgresStore, SessionTimeouts};
use crate::store::sqlite::{DatabaseLock, SqliteOptions, SqliteStore};

/// The embedded store's file in the data directory.
pub const SQLITE_FILE_NAME: &str = "idemd.db";

/// Where a command keeps its records, as DATABASE_URL (or its absence) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    Postgres {
        url: String,
    },
    /// The embedded store's database file.
    Sqlite {
        path: PathBuf,
    },
}

impl StoreLocation {
    /// `postgres://…`/`postgresql://…` or `sqlite://PATH` pick the store; no
    /// URL picks the embedded store in `data_dir`.
    pub fn of(database_url: Option<&str>, data_dir: &Path) -> Result<Self, BoxError> {
        let url = database_url.map(str::trim).filter(|url| !url.is_empty());
        let Some(url) = url else {
            return Ok(Self::Sqlite {
                path: data_dir.join(SQLITE_FILE_NAME),
            });
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres {
                url: url.to_owned(),
            });
        }
        // The URL is not echoed: it may hold a password.
        let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        else {
            return Err(
                "DATABASE_URL must start with postgres://, postgresql:// or sqlite:// \
                 (or be unset for the embedded store in --data-dir)"
                    .into(),
            );
        };
        if path.is_empty() || path.contains(":memory:") || path.contains('?') {
            return Err(
                "a sqlite:// DATABASE_URL names a database file, without parameters \
                 (idemd sets SQLite's options itself; an in-memory database would lose \
                 every record)"
                    .into(),
            );
        }
        Ok(Self::Sqlite {
            path: PathBuf::from(path),
        })
    }
}

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub location: StoreLocation,
    /// Postgres: the pool's size; SQLite: its readers'.
    pub max_connections: u32,
    pub acquire_timeout: Duration,
    /// The most one store call may take ([`Bounded`]).
    pub call_timeout: Duration,
    pub session_timeouts: SessionTimeouts,
    pub tcp_keepalive: Duration,
    pub tcp_user_timeout: Duration,
    /// Postgres: tell other replicas of changes (LISTEN/NOTIFY).
    pub change_notifications: bool,
    pub history_cap: HistoryCap,
    /// Serving on Postgres settings that can lose acknowledged results is
    /// accepted, not refused.
    pub single_node_durability_ok: bool,
}

/// What a command opens its store for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// Serving; for Postgres, whether to migrate first (the embedded store is
    /// always migrated by its owner).
    Serve(bool),
    Migrate,
    /// A tenant command: a short write, possibly beside a running server.
    Administer,
}

pub(crate) struct OpenedStore {
    pub(crate) store: Arc<dyn Store>,
    /// Where the records live, for the operator (no credentials).
    pub(crate) location: String,
}

pub(crate) async fn open_store(
    options: &StoreOptions,
    purpose: Purpose,
) -> Result<OpenedStore, BoxError> {
    let opened = match &options.location {
        StoreLocation::Postgres { url } => {
            let migrate = match purpose {
                Purpose::Serve(migrate) => migrate,
                Purpose::Migrate => true,
                Purpose::Administer => false,
            };
            let location = postgres_location(url);
            let store = open_postgres(options, url.clone(), migrate).await?;
            if matches!(purpose, Purpose::Serve(_)) {
                store
                    .warn_about_durability(options.single_node_durability_ok)
                    .await?;
            }
            OpenedStore {
                store: Arc::new(store),
                location,
            }
        }
        StoreLocation::Sqlite { path } => {
            let store = open_sqlite(options, path, purpose).await?;
            let location = std::path::absolute(path).unwrap_or_else(|_| path.clone());
            OpenedStore {
                store: Arc::new(store),
                location: location.display().to_string(),
            }
        }
    };
    Ok(OpenedStore {
        store: Arc::new(Bounded::new(opened.store, options.call_timeout)),
        location: opened.location,
    })
}

/// host:port/database of a Postgres URL, without user or password.
fn postgres_location(url: &str) -> String {
    match url.parse::<sqlx::postgres::PgConnectOptions>() {
        Ok(options) => format!(
            "postgres {}:{}/{}",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or_default()
        ),
        Err(_) => "postgres".to_owned(),
    }
}

async fn open_postgres(
    options: &StoreOptions,
    url: String,
    migrate: bool,
) -> Result<PostgresStore, BoxError> {
    // A multi-host URL (a failover formation) names a database its operator
    // created; sqlx reads one host only.
    let single_host = url.parse::<sqlx::postgres::PgConnectOptions>().is_ok();
    let exists = || async {
        sqlx::Postgres::database_exists(&url)
            .await
            .map_err(|error| -> BoxError {
                match crate::store::postgres::explain_connect_error(&error) {
                    Some(explained) => explained.into(),
                    None => error.into(),
                }
            })
    };
    if migrate && single_host && !exists().await? {
        warn!("database does not exist: creating it");
        sqlx::Postgres::create_database(&url).await?;
    }
    let keepalive = DatabaseKeepalive::new(options.tcp_keepalive, options.tcp_user_timeout)?;
    let store = PostgresStore::connect(&PostgresOptions {
        url,
        max_connections: options.max_connections,
        acquire_timeout: options.acquire_timeout,
        timeouts: options.session_timeouts,
        keepalive,
    })
    .await?;
    // Before migrating: sqlx's migration lock is a session's advisory lock,
    // which a transaction pooler would leave held on a server session.
    store.check_sessions(&options.session_timeouts).await?;
    if migrate {
        store.migrate().await?;
    }
    let store = store
        .with_history_cap(options.history_cap)
        .with_call_bound(options.call_timeout);
    if !options.change_notifications {
        return Ok(store.without_change_notifications());
    }
    Ok(store)
}

/// Opens the embedded store. Serving and migrating need to own the file (its
/// lock); a tenant command owns it when nobody does, and otherwise writes
/// beside the running server, which SQLite serialises with the server's
/// writes.
async fn open_sqlite(
    options: &StoreOptions,
    path: &Path,
    purpose: Purpose,
) -> Result<SqliteStore, BoxError> {
    let history_cap = options.history_cap;
    let options = SqliteOptions {
        path: path.to_owned(),
        max_read_connections: options.max_connections,
        acquire_timeout: options.acquire_timeout,
    };
    if let Some(lock) = DatabaseLock::try_acquire(path)? {
        let store = SqliteStore::open(&options, lock)
            .await?
            .with_history_cap(history_cap);
        info!(database = %path.display(), "embedded sqlite store opened and migrated");
        return Ok(store);
    }
    let holder = DatabaseLock::holder(path)
        .map(|pid| format!(" (pid {pid})"))
        .unwrap_or_default();
    match purpose {
        Purpose::Administer => {
            info!(
                database = %path.display(),
                "another idemd process{holder} owns the embedded store: writing beside it"
            );
            Ok(SqliteStore::open_beside_owner(&options)
                .await?
                .with_history_cap(history_cap))
        }
        Purpose::Serve(_) => Err(format!(
            "{} is in use by another idemd process{holder}: the embedded store belongs to one \
             process. Stop that one, point --data-dir elsewhere, or use Postgres \
             (DATABASE_URL=postgres://…) to run several replicas",
            path.display()
        )
        .into()),
        Purpose::Migrate => Err(format!(
            "{} is in use by another idemd process{holder}, which migrated it when it started",
            path.display()
        )
        .into()),
    }
}
