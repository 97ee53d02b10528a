//! What a server starts on: a pool of one connection, commit settings a
//! failover can lose, a schema newer than the binary.

use std::time::Duration;

use sqlx::postgres::PgConnectOptions;

use crate::harness::*;

use super::{complete, outside};

/// A pool of one connection serves: the LISTEN connection is not one of
/// the pool's.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_pool_of_one_connection_serves_claims(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let backend = Backend::postgres(connect.clone()).await;
    let token = create_tenant(backend.store().as_ref(), "tenant-a").await;
    let data = backend.into_process_data().await;
    let daemon = data
        .serve_with(
            &["--db-max-connections", "1"],
            &[("IDEMD_DB_ACQUIRE_TIMEOUT", "5s".into())],
        )
        .await;
    let mut client = daemon.client().await;
    let (operation_id, fence) = acquire(&mut client, &token, "k").await;
    // The listener has had time to take its connection.
    tokio::time::sleep(Duration::from_millis(200)).await;
    client
        .complete(authorized(&token, complete(&operation_id, fence)))
        .await
        .expect("complete");
    let replay = client
        .claim(authorized(&token, claim_json("payments.charge", "k", "{}")))
        .await
        .expect("replay")
        .into_inner();
    assert_eq!(outcome_name(&replay), "completed");
    let (_, fence) = acquire(&mut client, &token, "other").await;
    assert!(fence > 0);
}

/// The start-up warning of commit settings that can lose acknowledged
/// results on a failover, and the flag of an operator whose database has no
/// standby; `synchronous_commit = off` (lost in a crash) warns regardless.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn commit_settings_that_a_failover_can_lose_are_warned_about_unless_single_node(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    const FAILOVER: &str = "a failover can lose results";
    const CRASH: &str = "a database crash can lose results";
    let database = connect.get_database().expect("a test database").to_owned();
    let data = Backend::postgres(connect.clone())
        .await
        .into_process_data()
        .await;
    // The test cluster has no synchronous standby.
    let warned = data.serve(&[]).await;
    assert!(warned.log().contains(FAILOVER), "{}", warned.log());
    assert!(!warned.log().contains(CRASH), "{}", warned.log());
    warned.kill();

    let single_node = [("IDEMD_SINGLE_NODE_DURABILITY_OK", "true".to_owned())];
    let acknowledged = data.serve_with(&[], &single_node).await;
    assert!(
        !acknowledged.log().contains(FAILOVER),
        "{}",
        acknowledged.log()
    );
    acknowledged.kill();

    let mut admin = outside(&connect).await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER DATABASE \"{database}\" SET synchronous_commit = off"
    )))
    .execute(&mut admin)
    .await
    .expect("alter");
    let unsafe_anyway = data.serve_with(&[], &single_node).await;
    assert!(
        unsafe_anyway.log().contains(CRASH),
        "{}",
        unsafe_anyway.log()
    );
}

/// Binary N starts against schema N+1: a migration it does not know (a
/// newer binary applied it) stops neither `serve` nor `migrate`.
async fn a_newer_schema_is_served_and_migrated_by_an_older_binary(backend: Backend) {
    backend
        .execute(match &backend {
            Backend::Sqlite { .. } => {
                "INSERT INTO _sqlx_migrations \
                     (version, description, success, checksum, execution_time) \
                 VALUES (99990101000000, 'from a newer idemd', 1, X'00', 0)"
            }
            Backend::Postgres { .. } => {
                "INSERT INTO _sqlx_migrations \
                     (version, description, success, checksum, execution_time) \
                 VALUES (99990101000000, 'from a newer idemd', true, '\\x00'::bytea, 0)"
            }
        })
        .await;
    let data = backend.into_process_data().await;
    let migrated = data.command(&["migrate"]).output().expect("idemd runs");
    assert!(
        migrated.status.success(),
        "migrate refused a newer schema: {}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let token = data.create_tenant("tenant-a");
    let daemon = data.serve(&[]).await;
    let mut client = daemon.client().await;
    acquire(&mut client, &token, "k").await;
}

store_tests!(a_newer_schema_is_served_and_migrated_by_an_older_binary);
