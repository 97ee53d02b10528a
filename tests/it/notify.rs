//! Postgres only: a state change made through one replica's store is heard by
//! another replica's listener (LISTEN/NOTIFY), so its waiting Claims wake at
//! once. (A store owned by one process has no one else to hear from.)

use std::time::Duration;

use idemd::domain::*;
use idemd::store::Store;
use idemd::store::postgres::PostgresStore;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::harness::{claim_and_complete, create_tenant, pool};

#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_completion_on_one_replica_is_heard_on_another(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let writing_replica = PostgresStore::from_pool(pool(connect.clone()).await);
    let (changed, heard) = complete_one_while_listening(connect, writing_replica).await;
    let heard = heard.expect("the change is heard");
    assert_eq!(heard, changed);
}

/// For engines without LISTEN/NOTIFY (IDEMD_PG_NOTIFY=false): nothing is
/// announced, and waiting Claims rely on polling alone.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn with_notifications_off_no_change_is_announced(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let writing_replica =
        PostgresStore::from_pool(pool(connect.clone()).await).without_change_notifications();
    let (_, heard) = complete_one_while_listening(connect, writing_replica).await;
    assert_eq!(heard, None, "nothing may be announced");
}

/// Listens on one replica, completes an operation through `writing_replica`,
/// and returns it with what the listener heard within a few seconds.
async fn complete_one_while_listening(
    connect: PgConnectOptions,
    writing_replica: PostgresStore,
) -> (OperationId, Option<OperationId>) {
    let listening_replica = PostgresStore::from_pool(pool(connect).await);
    let token = create_tenant(&writing_replica, "notify").await;
    let tenant = writing_replica
        .authenticate(&idemd::auth::token_sha256(&token))
        .await
        .expect("auth")
        .expect("tenant")
        .tenant;

    let (heard, mut hear) = tokio::sync::mpsc::unbounded_channel();
    let listener = tokio::spawn(async move {
        let relay = move |operation_id: OperationId| {
            let _ = heard.send(operation_id);
        };
        listening_replica.listen_for_changes(&relay).await
    });
    // Wait until the listener's LISTEN has run.
    for _ in 0..100 {
        let listening: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database()",
        )
        .fetch_one(writing_replica.pool())
        .await
        .expect("pg_stat_activity");
        if listening > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let record = claim_and_complete(&writing_replica, tenant, "evt-1").await;

    let heard = tokio::time::timeout(Duration::from_secs(3), hear.recv())
        .await
        .ok()
        .flatten();
    listener.abort();
    (record.operation_id, heard)
}
