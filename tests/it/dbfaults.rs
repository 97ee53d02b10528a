//! The database stalls, fails over or refuses: every transient condition
//! answers UNAVAILABLE with RetryInfo (reason STORE_UNAVAILABLE), never
//! INTERNAL, and the server recovers by itself. Postgres only: these are
//! Postgres's own conditions, provoked for real on the test's database.

use std::sync::Arc;
use std::time::Duration;

use idemd::proto;
use idemd::store::postgres::{DatabaseKeepalive, PostgresStore, SessionTimeouts, session_settings};
use idemd::store::{Bounded, Store};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
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

/// A TCP proxy in front of Postgres that can freeze: stop forwarding, in
/// both directions and on every connection, new ones included, without
/// closing any, as a network path that silently drops packets would. Thawed,
/// it forwards again.
struct FreezingProxy {
    addr: std::net::SocketAddr,
    frozen: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl FreezingProxy {
    async fn start(upstream: (String, u16)) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (frozen, watching) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let watching = watching.clone();
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::select! {
                        () = forward(client_read, server_write, watching.clone()) => {}
                        () = forward(server_read, client_write, watching) => {}
                    }
                });
            }
        });
        Self { addr, frozen, task }
    }

    fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    fn thaw(&self) {
        self.frozen.send_replace(false);
    }
}

impl Drop for FreezingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to` while not frozen; frozen, reads and writes nothing.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        if frozen.wait_for(|frozen| !frozen).await.is_err() {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            _ = frozen.changed() => continue,
        };
        let Ok(read) = read else { return };
        if read == 0 {
            return;
        }
        // Bytes read before a freeze still go out after it.
        if frozen.wait_for(|frozen| !frozen).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

/// The readiness of `idem.v1.IdempotencyService` on `addr`, as a probe sees it.
async fn readiness(addr: std::net::SocketAddr) -> Option<i32> {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .ok()?;
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: "idem.v1.IdempotencyService".into(),
        })
        .await
        .ok()
        .map(|answer| answer.into_inner().status)
}

/// Polls until readiness is `wanted`; panics after a generous deadline.
async fn await_readiness(daemon: &Daemon, wanted: tonic_health::ServingStatus) {
    use tonic_health::pb::health_check_response::ServingStatus;
    let wanted = match wanted {
        tonic_health::ServingStatus::Serving => ServingStatus::Serving,
        _ => ServingStatus::NotServing,
    } as i32;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while readiness(daemon.addr).await != Some(wanted) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "readiness never became {wanted}: {}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// DATABASE_URL naming the test's database at `addr`.
fn database_url_at(connect: &PgConnectOptions, addr: std::net::SocketAddr) -> String {
    format!(
        "postgres://{}@{addr}/{}",
        connect.get_username(),
        connect.get_database().expect("a test database")
    )
}

/// The database vanishes silently (packets dropped, nothing closed): calls
/// answer UNAVAILABLE within the call bound and readiness reports
/// NOT_SERVING; once the network works again, calls succeed and readiness is
/// SERVING, without a restart.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn a_silently_vanished_database_is_unavailable_and_recovered_from_without_a_restart(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let backend = Backend::postgres(connect.clone()).await;
    let token = create_tenant(backend.store().as_ref(), "tenant-a").await;
    let data = backend.into_process_data().await;
    let proxy = FreezingProxy::start((connect.get_host().to_owned(), connect.get_port())).await;
    let daemon = data
        .serve_with(
            &[],
            &[
                ("DATABASE_URL", database_url_at(&connect, proxy.addr)),
                ("IDEMD_READINESS_INTERVAL", "100ms".into()),
                ("IDEMD_DB_CALL_TIMEOUT", "1s".into()),
                ("IDEMD_DB_ACQUIRE_TIMEOUT", "500ms".into()),
                ("IDEMD_AUTH_CACHE_TTL", "0s".into()),
            ],
        )
        .await;
    let mut client = daemon.client().await;
    let (operation_id, fence) = acquire(&mut client, &token, "before").await;

    proxy.freeze();
    for key in ["during-1", "during-2"] {
        let status = tokio::time::timeout(
            Duration::from_secs(30),
            client.claim(authorized(&token, claim_json("payments.charge", key, "{}"))),
        )
        .await
        .expect("answered within the call bound")
        .expect_err("the database is unreachable");
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    }
    await_readiness(&daemon, tonic_health::ServingStatus::NotServing).await;

    proxy.thaw();
    await_readiness(&daemon, tonic_health::ServingStatus::Serving).await;
    // Connections broken by the outage may fail a call or two first.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match client
            .complete(authorized(&token, complete(&operation_id, fence)))
            .await
        {
            Ok(_) => break,
            Err(status) => {
                assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                assert!(tokio::time::Instant::now() < deadline, "{}", daemon.log());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    acquire(&mut client, &token, "after").await;
}

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

/// Lookup reads the record and its history from one snapshot: a history
/// entry committed between the two reads is in neither.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn lookup_reads_record_and_history_from_one_snapshot(
    _: sqlx::postgres::PgPoolOptions,
    connect: PgConnectOptions,
) {
    let world = World::start(Backend::postgres(connect.clone()).await).await;
    let mut client = world.client().await;
    let (operation_id, _) = acquire(&mut client, &world.tenant_a, "k").await;

    // The history table is held while the Lookup reads the record, so its
    // history read waits; meanwhile an entry is appended and committed.
    let mut writer = outside(&connect).await;
    sqlx::query("BEGIN")
        .execute(&mut writer)
        .await
        .expect("begin");
    sqlx::query("LOCK TABLE operation_history IN ACCESS EXCLUSIVE MODE")
        .execute(&mut writer)
        .await
        .expect("locked");
    let looking = {
        let mut client = client.clone();
        let token = world.tenant_a.clone();
        let operation_id = operation_id.clone();
        tokio::spawn(async move { history(&mut client, &token, &operation_id).await })
    };
    let Backend::Postgres { pool, .. } = &world.backend else {
        unreachable!("a Postgres test")
    };
    lock_waiters(pool).await;
    sqlx::query(
        "INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state, \
             fence, attempt, detail, count, first_at, last_at, coalesce_key) \
         SELECT operation_id, sequence + 1, event, from_state, to_state, fence, attempt, \
             detail, count, first_at, last_at, NULL \
         FROM operation_history WHERE operation_id = $1::uuid",
    )
    .bind(&operation_id)
    .execute(&mut writer)
    .await
    .expect("appended");
    sqlx::query("COMMIT")
        .execute(&mut writer)
        .await
        .expect("commit");

    let seen = looking.await.expect("joined");
    assert_eq!(
        seen.len(),
        1,
        "the history as of the record's snapshot: {seen:#?}"
    );
    // Read again, both entries are there.
    assert_eq!(
        history(&mut client, &world.tenant_a, &operation_id)
            .await
            .len(),
        2
    );
}
