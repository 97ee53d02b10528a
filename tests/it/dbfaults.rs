//! The database stalls, fails over or refuses: every transient condition
//! answers UNAVAILABLE with RetryInfo (reason STORE_UNAVAILABLE), never
//! INTERNAL, and the server recovers by itself. Postgres only: these are
//! Postgres's own conditions, provoked for real on the test's database.

use std::time::Duration;

use idemd::proto;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};
use tonic::Code;
use tonic_types::StatusExt;

use crate::harness::*;

/// UNAVAILABLE, STORE_UNAVAILABLE, with a RetryInfo.
fn assert_unavailable(status: &tonic::Status) {
    assert_status(status, Code::Unavailable, "STORE_UNAVAILABLE");
    assert!(
        status.get_details_retry_info().is_some(),
        "RetryInfo expected: {status:?}"
    );
}

/// A connection of the test's own, outside every store.
async fn outside(connect: &PgConnectOptions) -> PgConnection {
    PgConnection::connect_with(connect)
        .await
        .expect("an outside connection")
}

/// Claims `key` for `token` and returns (operation_id, fence).
async fn acquire(client: &mut Client, token: &str, key: &str) -> (String, u64) {
    let response = client
        .claim(authorized(token, claim_json("payments.charge", key, "{}")))
        .await
        .expect("claim")
        .into_inner();
    let ownership = ownership(&response).expect("acquired").clone();
    (ownership.operation_id, ownership.fence)
}

fn complete(operation_id: &str, fence: u64) -> proto::CompleteRequest {
    proto::CompleteRequest {
        operation_id: operation_id.into(),
        fence,
        result: result("ok"),
    }
}

/// Holds the row lock of one operation in an open transaction of its own.
async fn lock_row(connect: &PgConnectOptions, operation_id: &str) -> PgConnection {
    let mut holder = outside(connect).await;
    sqlx::query("BEGIN")
        .execute(&mut holder)
        .await
        .expect("begin");
    let locked = sqlx::query("SELECT 1 FROM operations WHERE operation_id = $1::uuid FOR UPDATE")
        .bind(operation_id)
        .execute(&mut holder)
        .await
        .expect("row locked");
    assert_eq!(locked.rows_affected(), 1);
    holder
}

/// The backends of this database waiting for a lock, once there is one.
async fn lock_waiters(pool: &PgPool) -> Vec<i32> {
    loop {
        let waiting: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_all(pool)
        .await
        .expect("pg_stat_activity");
        if !waiting.is_empty() {
            return waiting;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A primary demoted to a standby (or a database put read-only) refuses
/// writes with SQLSTATE 25006: the caller is told to retry, and once the
/// database takes writes again the same call succeeds.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_read_only_database_is_unavailable_then_serves_again(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let database = connect.get_database().expect("a test database").to_owned();
    let setup = Backend::postgres(connect.clone()).await;
    let token = create_tenant(setup.store().as_ref(), "tenant-a").await;
    let mut admin = outside(&connect).await;
    // This session stays writable whatever the database's default says.
    sqlx::query("SET default_transaction_read_only = off")
        .execute(&mut admin)
        .await
        .expect("set");
    let alter = |value: &str| {
        sqlx::AssertSqlSafe(format!(
            "ALTER DATABASE \"{database}\" SET default_transaction_read_only = {value}"
        ))
    };
    sqlx::query(alter("on"))
        .execute(&mut admin)
        .await
        .expect("read-only");
    // New sessions are read-only.
    let backend = setup.reopen().await;
    let server = TestServer::start(backend.store(), test_limits()).await;
    let mut client = server.client().await;

    let status = client
        .claim(authorized(&token, claim_json("payments.charge", "k", "{}")))
        .await
        .expect_err("a read-only database takes no claim");
    assert_unavailable(&status);

    sqlx::query(alter("off"))
        .execute(&mut admin)
        .await
        .expect("writable");
    let backend = backend.reopen().await;
    let server = TestServer::start(backend.store(), test_limits()).await;
    let mut client = server.client().await;
    acquire(&mut client, &token, "k").await;
}

/// A statement cancelled by the server (a statement_timeout, or an
/// operator's pg_cancel_backend: SQLSTATE 57014) is UNAVAILABLE; the
/// record is unchanged and the write succeeds when sent again.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_cancelled_statement_is_unavailable_and_the_write_can_be_sent_again(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let world = World::start(Backend::postgres(connect.clone()).await).await;
    let mut client = world.client().await;
    let (operation_id, fence) = acquire(&mut client, &world.tenant_a, "k").await;
    let holder = lock_row(&connect, &operation_id).await;

    let waiting = {
        let mut client = client.clone();
        let token = world.tenant_a.clone();
        let request = complete(&operation_id, fence);
        tokio::spawn(async move { client.complete(authorized(&token, request)).await })
    };
    let Backend::Postgres { pool, .. } = &world.backend else {
        unreachable!("a Postgres test")
    };
    for pid in lock_waiters(pool).await {
        sqlx::query("SELECT pg_cancel_backend($1)")
            .bind(pid)
            .execute(pool)
            .await
            .expect("cancel");
    }
    let status = waiting
        .await
        .expect("joined")
        .expect_err("a cancelled statement");
    assert_unavailable(&status);

    holder.close().await.expect("lock released");
    client
        .complete(authorized(&world.tenant_a, complete(&operation_id, fence)))
        .await
        .expect("the same write, sent again, succeeds");
}
