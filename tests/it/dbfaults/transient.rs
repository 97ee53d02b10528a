//! A database that refuses writes, cancels a statement or holds a row lock:
//! UNAVAILABLE, and the same call succeeds once it passes.

use std::sync::Arc;
use std::time::Duration;

use idemd::store::Store;
use idemd::store::bounded::Bounded;
use idemd::store::postgres::{DatabaseKeepalive, PostgresStore, SessionTimeouts, session_settings};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::harness::*;

use super::{assert_unavailable, complete, lock_row, lock_waiters, outside};

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

/// A store whose sessions carry `timeouts`, every call bounded by `bound`.
async fn store_with(
    connect: &PgConnectOptions,
    timeouts: SessionTimeouts,
    bound: Duration,
) -> (PostgresStore, Arc<dyn Store>) {
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(session_settings(
            connect.clone(),
            &timeouts,
            DatabaseKeepalive::default(),
        ))
        .await
        .expect("test database reachable");
    let store = PostgresStore::from_pool(pool);
    let bounded: Arc<dyn Store> = Arc::new(Bounded::new(Arc::new(store.clone()), bound));
    (store, bounded)
}

const SHORT_LOCKS: SessionTimeouts = SessionTimeouts {
    lock_timeout: Duration::from_millis(200),
    statement_timeout: Duration::from_secs(3),
    idle_in_transaction_timeout: Duration::from_secs(4),
};

/// Every session of the store carries the configured timeouts; the
/// migrations' own connection carries none, so a migration waits for a lock
/// (another replica migrating) longer than a call would.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn sessions_carry_the_timeouts_and_migrations_wait_for_locks(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (store, _) = store_with(&connect, SHORT_LOCKS, Duration::from_secs(10)).await;
    for (setting, expected) in [
        ("lock_timeout", "200ms"),
        ("statement_timeout", "3s"),
        ("idle_in_transaction_session_timeout", "4s"),
    ] {
        let value: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SHOW {setting}")))
            .fetch_one(store.pool())
            .await
            .expect("show");
        assert_eq!(value, expected, "{setting}");
    }

    let mut holder = outside(&connect).await;
    sqlx::query("BEGIN")
        .execute(&mut holder)
        .await
        .expect("begin");
    sqlx::query("LOCK TABLE _sqlx_migrations IN ACCESS EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .expect("locked");
    let migrating = {
        let store = store.clone();
        tokio::spawn(async move { store.migrate().await })
    };
    let Backend::Postgres { pool, .. } = Backend::postgres(connect.clone()).await else {
        unreachable!("a Postgres backend")
    };
    lock_waiters(&pool).await;
    // Held past the sessions' lock_timeout.
    tokio::time::sleep(SHORT_LOCKS.lock_timeout * 2).await;
    holder.close().await.expect("released");
    migrating
        .await
        .expect("joined")
        .expect("the migration waited for the lock");
}

/// Another transaction holds one operation's row (a stalled replica, an
/// operator's session): the calls on that operation answer UNAVAILABLE once
/// lock_timeout passes, and meanwhile the other tenant's calls keep
/// succeeding, even those that shared a statement with one of them.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_held_row_lock_fails_its_callers_while_other_tenants_keep_working(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let (_, store) = store_with(&connect, SHORT_LOCKS, Duration::from_secs(10)).await;
    let tenant_a = create_tenant(store.as_ref(), "tenant-a").await;
    let tenant_b = create_tenant(store.as_ref(), "tenant-b").await;
    let server = TestServer::start(Arc::clone(&store), test_limits()).await;
    let mut client = server.client().await;
    let (operation_id, fence) = acquire(&mut client, &tenant_a, "held").await;
    let holder = lock_row(&connect, &operation_id).await;

    // Callers of the held row keep re-sending, as clients do on UNAVAILABLE.
    let stuck: Vec<_> = (0..3)
        .map(|_| {
            let mut client = client.clone();
            let token = tenant_a.clone();
            let request = complete(&operation_id, fence);
            tokio::spawn(async move {
                let mut answers = Vec::new();
                for _ in 0..4 {
                    answers.push(client.complete(authorized(&token, request.clone())).await);
                }
                answers
            })
        })
        .collect();
    let stuck_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let others: Vec<_> = (0..4)
        .map(|worker| {
            let mut client = client.clone();
            let token = tenant_b.clone();
            let stuck_done = Arc::clone(&stuck_done);
            tokio::spawn(async move {
                let (mut succeeded, mut failed) = (0, Vec::new());
                let mut round = 0;
                while !stuck_done.load(std::sync::atomic::Ordering::Acquire) || round < 3 {
                    round += 1;
                    let key = format!("other-{worker}-{round}");
                    let claimed = client
                        .claim(authorized(
                            &token,
                            claim_json("payments.charge", &key, "{}"),
                        ))
                        .await;
                    let Some(owned) = claimed
                        .as_ref()
                        .ok()
                        .and_then(|response| ownership(response.get_ref()).cloned())
                    else {
                        failed.push(format!("{claimed:?}"));
                        continue;
                    };
                    match client
                        .complete(authorized(
                            &token,
                            complete(&owned.operation_id, owned.fence),
                        ))
                        .await
                    {
                        Ok(_) => succeeded += 1,
                        Err(status) => failed.push(format!("{status:?}")),
                    }
                }
                (succeeded, failed)
            })
        })
        .collect();

    for caller in stuck {
        let answers = tokio::time::timeout(Duration::from_secs(30), caller)
            .await
            .expect("the held row's callers are answered")
            .expect("joined");
        for answered in answers {
            assert_unavailable(&answered.expect_err("the row is held"));
        }
    }
    stuck_done.store(true, std::sync::atomic::Ordering::Release);
    let mut succeeded = 0;
    for other in others {
        let (done, failed) = other.await.expect("joined");
        assert!(
            failed.is_empty(),
            "the other tenant's calls failed: {failed:#?}"
        );
        succeeded += done;
    }
    assert!(
        succeeded >= 12,
        "{succeeded} of the other tenant's operations"
    );

    holder.close().await.expect("released");
    client
        .complete(authorized(&tenant_a, complete(&operation_id, fence)))
        .await
        .expect("once the row is free, the write succeeds");
}
