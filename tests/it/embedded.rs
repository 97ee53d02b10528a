//! What only the embedded store has: its pragmas, its single writer, the
//! lock that gives the data directory to one process, and BUSY answered as
//! UNAVAILABLE. Its semantics are the conformance suite's, not repeated here.

use std::time::Duration;

use idemd::domain::{Error, OperationId};
use idemd::store::Store;
use idemd::store::sqlite::{DatabaseLock, SqliteOptions, SqliteStore};
use sqlx::{Connection, SqliteConnection};

use crate::harness::*;
use idemd::service::DrawOperationId as _;

async fn open(options: &SqliteOptions) -> SqliteStore {
    let lock = DatabaseLock::try_acquire(&options.path)
        .expect("lock file")
        .expect("free");
    SqliteStore::open(options, lock).await.expect("opens")
}

#[tokio::test]
async fn every_connection_runs_wal_with_full_sync_and_foreign_keys() {
    let directory = TempDir::new();
    let store = open(&sqlite_options(directory.path())).await;
    let pool = store.writer_pool();
    let journal_mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(pool)
        .await
        .expect("pragma");
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(pool)
        .await
        .expect("pragma");
    let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
        .fetch_one(pool)
        .await
        .expect("pragma");
    assert_eq!(
        (journal_mode.as_str(), synchronous, foreign_keys),
        ("wal", 2, 1)
    );
    store.close().await;
}

#[tokio::test]
async fn the_data_directory_belongs_to_one_store_until_it_closes() {
    let directory = TempDir::new();
    let options = sqlite_options(directory.path());
    let store = open(&options).await;

    assert!(
        DatabaseLock::try_acquire(&options.path)
            .expect("lock file")
            .is_none(),
        "a second owner is refused"
    );
    assert_eq!(
        DatabaseLock::holder(&options.path),
        Some(std::process::id())
    );
    store.close().await;
    let again = DatabaseLock::try_acquire(&options.path).expect("lock file");
    assert!(again.is_some(), "closing the store releases the directory");
}

#[tokio::test]
async fn a_write_lock_held_elsewhere_past_the_busy_timeout_is_unavailable() {
    let directory = TempDir::new();
    let options = SqliteOptions {
        acquire_timeout: Duration::from_millis(200),
        ..sqlite_options(directory.path())
    };
    let store = open(&options).await;
    let tenant_token = create_tenant(&store, "busy").await;
    let tenant = store
        .authenticate(&idemd::auth::token_sha256(&tenant_token))
        .await
        .expect("auth")
        .expect("tenant")
        .tenant;
    let existing = store
        .insert_new(tenant, OperationId::generate(), &claim_command("before"))
        .await
        .expect("insert")
        .expect("new");

    // Another process (a tenant command, say) holds SQLite's write lock.
    let mut other = SqliteConnection::connect(&format!("sqlite://{}", options.path.display()))
        .await
        .expect("second connection");
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .expect("write lock");

    let refused = store
        .insert_new(tenant, OperationId::generate(), &claim_command("during"))
        .await;
    assert!(
        matches!(refused, Err(Error::Unavailable { .. })),
        "{refused:?}"
    );
    // Readers are not blocked by a writer (WAL).
    let found = store
        .find(
            tenant,
            &idemd::domain::Target::Id(existing.operation_id),
            None,
        )
        .await
        .expect("reads go on");
    assert!(found.is_some());

    sqlx::query("ROLLBACK")
        .execute(&mut other)
        .await
        .expect("release");
    let after = store
        .insert_new(tenant, OperationId::generate(), &claim_command("after"))
        .await
        .expect("writes resume");
    assert!(after.is_some());
    store.close().await;
}

#[tokio::test]
async fn a_closed_store_is_unavailable() {
    let directory = TempDir::new();
    let store = open(&sqlite_options(directory.path())).await;
    store.close().await;
    let refused = store.create_tenant("late", &[7; 32]).await;
    assert!(
        matches!(refused, Err(Error::Unavailable { .. })),
        "{refused:?}"
    );
}
