//! Postgres on Linux: every socket the store opens to the database, in its
//! pool and outside it (LISTEN, NOTIFY), has TCP keepalive and
//! TCP_USER_TIMEOUT as configured, and every session carries the server's
//! end of them; with keepalive off, neither end gets anything.
//!
//! The sockets are found here independently of the code under test: the
//! sessions on the test's own database that idemd opened (by
//! `application_name`, so the sqlx test harness's are left out) give their
//! client ports, and this process's sockets with those local ports are read
//! through duplicates taken with pidfd_getfd(2).

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use idemd::domain::*;
use idemd::store::Store;
use idemd::store::postgres::{DatabaseKeepalive, PostgresOptions, PostgresStore, SessionTimeouts};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection};

use crate::harness::{claim_and_complete, create_tenant};

/// The store configures every socket of the process that peers the database
/// (one store per process in production), so a store opened by one test
/// also configures the sockets of another's: the tests that open stores with
/// `PostgresStore::connect` take turns. (The harness's stores, built with
/// `from_pool`, configure nothing.)
static ONE_STORE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What one socket says of its keepalive.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SocketKeepalive {
    keepalive: bool,
    idle: Duration,
    interval: Duration,
    probes: u32,
    user_timeout: Option<Duration>,
}

/// This process's TCP sockets to `database_port`, by local port.
fn sockets_to(database_port: u16) -> HashMap<u16, SocketKeepalive> {
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};
    let this_process = pidfd_open(getpid(), PidfdFlags::empty()).expect("pidfd_open");
    let mut sockets = HashMap::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd") {
        let entry = entry.expect("an entry");
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if !target.as_os_str().as_bytes().starts_with(b"socket:[") {
            continue;
        }
        let descriptor = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse().ok())
            .expect("a descriptor number");
        let Ok(duplicate) = pidfd_getfd(&this_process, descriptor, PidfdGetfdFlags::empty()) else {
            continue;
        };
        let socket = socket2::SockRef::from(&duplicate);
        let (Some(local), Some(peer)) = (
            socket.local_addr().ok().and_then(|local| local.as_socket()),
            socket.peer_addr().ok().and_then(|peer| peer.as_socket()),
        ) else {
            continue;
        };
        if peer.port() != database_port {
            continue;
        }
        sockets.insert(
            local.port(),
            SocketKeepalive {
                keepalive: socket.keepalive().expect("SO_KEEPALIVE"),
                idle: socket.tcp_keepalive_time().expect("TCP_KEEPIDLE"),
                interval: socket.tcp_keepalive_interval().expect("TCP_KEEPINTVL"),
                probes: socket.tcp_keepalive_retries().expect("TCP_KEEPCNT"),
                user_timeout: socket.tcp_user_timeout().expect("TCP_USER_TIMEOUT"),
            },
        );
    }
    sockets
}

/// The store as `idemd serve` opens it, on the test's database.
async fn store_as_served(
    connect: &PgConnectOptions,
    keepalive: DatabaseKeepalive,
) -> PostgresStore {
    let url = format!(
        "postgres://{}@{}:{}/{}",
        connect.get_username(),
        connect.get_host(),
        connect.get_port(),
        connect.get_database().expect("the test's database")
    );
    PostgresStore::connect(&PostgresOptions {
        url,
        max_connections: 8,
        acquire_timeout: Duration::from_secs(5),
        timeouts: SessionTimeouts::default(),
        keepalive,
    })
    .await
    .expect("the store opens")
}

/// Makes the store open several pool connections, then its LISTEN
/// connection, then its NOTIFY connection, and after each kind asserts
/// `expected` of the sockets of all of idemd's sessions on the test's
/// database. One kind after the other, each checked before the next opens:
/// the pass made for a later connection would configure the earlier ones
/// too, and hide one that failed to configure its own.
async fn open_every_kind_of_connection(
    store: &PostgresStore,
    database_port: u16,
    expected: &dyn Fn(&SocketKeepalive) -> bool,
) {
    // Held at once, so each is a connection of its own.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(store.pool().acquire().await.expect("a pooled connection"));
    }
    drop(held);
    let pooled = assert_session_sockets(store, database_port, "pooled", expected).await;
    assert!(pooled >= 4, "{pooled} sessions");

    let listening = store.clone();
    let listener = tokio::spawn(async move {
        let ignore = |_: OperationId| {};
        listening.listen_for_changes(&ignore).await
    });
    // Each configures its socket before its first statement: once that
    // shows, it is done.
    wait_for_session(store, "LISTEN%").await;
    let with_listener = assert_session_sockets(store, database_port, "LISTEN", expected).await;
    assert!(with_listener > pooled, "{with_listener} sessions");
    // A state change, for the notifier to announce on its connection.
    let token = create_tenant(store, "keepalive").await;
    let tenant = store
        .authenticate(&idemd::auth::token_sha256(&token))
        .await
        .expect("auth")
        .expect("tenant")
        .tenant;
    claim_and_complete(store, tenant, "k-1").await;
    wait_for_session(store, "%pg_notify%").await;
    let with_notifier = assert_session_sockets(store, database_port, "NOTIFY", expected).await;
    assert!(with_notifier > with_listener, "{with_notifier} sessions");
    listener.abort();
}

/// Asserts `expected` of this process's socket of every session idemd has
/// on the test's database (`stage` says when); returns how many there are.
async fn assert_session_sockets(
    store: &PostgresStore,
    database_port: u16,
    stage: &str,
    expected: &dyn Fn(&SocketKeepalive) -> bool,
) -> usize {
    let client_ports: Vec<i32> = sqlx::query_scalar(
        "SELECT client_port FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = 'idemd' \
           AND backend_type = 'client backend'",
    )
    .fetch_all(store.pool())
    .await
    .expect("pg_stat_activity");
    let sockets = sockets_to(database_port);
    for port in &client_ports {
        let port = u16::try_from(*port).expect("a TCP client port");
        let socket = sockets
            .get(&port)
            .unwrap_or_else(|| panic!("{stage}: no socket of this process has local port {port}"));
        assert!(
            expected(socket),
            "{stage}: the socket from local port {port}: {socket:?}"
        );
    }
    client_ports.len()
}

/// Waits until one of idemd's sessions on the test's database runs a
/// statement `LIKE pattern`.
async fn wait_for_session(store: &PostgresStore, pattern: &str) {
    for _ in 0..250 {
        let running: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = 'idemd' \
               AND query LIKE $1",
        )
        .bind(pattern)
        .fetch_one(store.pool())
        .await
        .expect("pg_stat_activity");
        if running > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no session of the store runs {pattern}");
}

/// The four server-side settings, as a session shows them.
async fn server_keepalive(connection: &mut PgConnection) -> Vec<String> {
    let mut shown = Vec::new();
    for setting in [
        "tcp_keepalives_idle",
        "tcp_keepalives_interval",
        "tcp_keepalives_count",
        "tcp_user_timeout",
    ] {
        let value: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SHOW {setting}")))
            .fetch_one(&mut *connection)
            .await
            .expect("show");
        shown.push(value);
    }
    shown
}

/// Not the defaults, nor the system's (7200 s, 75 s, 9 probes, no user
/// timeout): what the sockets show can only come from the setting.
fn configured() -> DatabaseKeepalive {
    DatabaseKeepalive::new(Duration::from_secs(7), Duration::from_secs(23)).expect("valid")
}

#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn every_database_socket_of_the_store_keeps_alive_as_configured(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let _turn = ONE_STORE_AT_A_TIME.lock().await;
    let store = store_as_served(&connect, configured()).await;
    let configured_socket = SocketKeepalive {
        keepalive: true,
        idle: Duration::from_secs(7),
        interval: DatabaseKeepalive::PROBE_INTERVAL,
        probes: DatabaseKeepalive::PROBES,
        user_timeout: Some(Duration::from_secs(23)),
    };
    open_every_kind_of_connection(&store, connect.get_port(), &|socket| {
        socket == &configured_socket
    })
    .await;
    store.close().await;
}

#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn every_session_carries_the_servers_end_of_the_keepalive(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let _turn = ONE_STORE_AT_A_TIME.lock().await;
    let store = store_as_served(&connect, configured()).await;
    let mut pooled = store.pool().acquire().await.expect("a pooled connection");
    assert_eq!(
        server_keepalive(&mut pooled).await,
        ["7", "5", "3", "23000"],
        "tcp_keepalives_idle, _interval, _count, tcp_user_timeout"
    );
    drop(pooled);
    store.close().await;
}

#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn with_keepalive_off_neither_end_gets_anything(_: PgPoolOptions, connect: PgConnectOptions) {
    let _turn = ONE_STORE_AT_A_TIME.lock().await;
    let store = store_as_served(&connect, DatabaseKeepalive::OFF).await;
    open_every_kind_of_connection(&store, connect.get_port(), &|socket| {
        !socket.keepalive && socket.user_timeout.is_none()
    })
    .await;

    // The server's end: what a session of nobody's settings shows.
    let mut plain = PgConnection::connect_with(&connect)
        .await
        .expect("a plain connection");
    let system = server_keepalive(&mut plain).await;
    plain.close().await.expect("closed");
    let mut pooled = store.pool().acquire().await.expect("a pooled connection");
    assert_eq!(server_keepalive(&mut pooled).await, system);
    assert_eq!(system[3], "0", "tcp_user_timeout unset");
    drop(pooled);
    store.close().await;
}

// ---- after a failover ---------------------------------------------------------

/// When the pool follows the primary to another host of a multi-host URL,
/// every connection follows it: the pool's (with the session settings,
/// the server's end of the keepalive included), LISTEN (a change announced
/// on the new primary is heard) and NOTIFY (a change made through the store
/// is announced there), and every socket to the new host keeps alive as
/// configured.
///
/// The two hosts are one Postgres reached two ways: first through a proxy,
/// which then freezes (a primary gone silent), and directly. The sessions
/// the proxy carried are ended on the server once the pool has moved, so
/// that every session left is one opened since.
#[sqlx::test(migrator = "idemd::store::postgres::MIGRATOR")]
async fn after_the_primary_moves_every_connection_follows_it_and_keeps_alive(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    use crate::harness::FrozenPath;
    use idemd::service::DrawOperationId as _;

    let _turn = ONE_STORE_AT_A_TIME.lock().await;
    let database_port = connect.get_port();
    let direct: std::net::SocketAddr = ([127, 0, 0, 1], database_port).into();
    let proxy = FrozenPath::start(direct).await;
    let url = format!(
        "postgres://{}@127.0.0.1:{},127.0.0.1:{database_port}/{}?target_session_attrs=read-write",
        connect.get_username(),
        proxy.addr.port(),
        connect.get_database().expect("the test's database")
    );
    let store = PostgresStore::connect(&PostgresOptions {
        url,
        max_connections: 8,
        acquire_timeout: Duration::from_secs(5),
        timeouts: SessionTimeouts::default(),
        keepalive: configured(),
    })
    .await
    .expect("the store opens");
    assert_eq!(
        store.pool().connect_options().get_port(),
        proxy.addr.port(),
        "the first host of the URL, while it takes writes"
    );

    let (heard, mut hear) = tokio::sync::mpsc::unbounded_channel();
    let listening = store.clone();
    let listener = tokio::spawn(async move {
        let relay = move |operation_id: OperationId| {
            let _ = heard.send(operation_id);
        };
        listening.listen_for_changes(&relay).await
    });
    // LISTEN and NOTIFY both open on the first host.
    wait_for_session(&store, "LISTEN%").await;
    let token = create_tenant(&store, "follow").await;
    let tenant = store
        .authenticate(&idemd::auth::token_sha256(&token))
        .await
        .expect("auth")
        .expect("tenant")
        .tenant;
    claim_and_complete(&store, tenant, "before").await;
    wait_for_session(&store, "%pg_notify%").await;

    let mut admin = PgConnection::connect_with(&connect)
        .await
        .expect("a plain connection");
    let frozen_at: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&mut admin)
        .await
        .expect("now");
    proxy.freeze_existing();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while store.pool().connect_options().get_port() != database_port {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pool did not follow the primary"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = 'idemd' \
           AND backend_start < $1",
    )
    .bind(frozen_at)
    .execute(&mut admin)
    .await
    .expect("the sessions through the proxy ended");

    // LISTEN: a change announced on the new primary is heard there.
    let announced = OperationId::generate();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        sqlx::query("SELECT pg_notify('idemd_operation_changed', $1)")
            .bind(announced.to_string())
            .execute(&mut admin)
            .await
            .expect("notify");
        match tokio::time::timeout(Duration::from_millis(200), hear.recv()).await {
            Ok(Some(operation_id)) if operation_id == announced => break,
            _ => assert!(
                tokio::time::Instant::now() < deadline,
                "LISTEN did not follow the primary"
            ),
        }
    }

    // NOTIFY: a change made through the store is announced on the new
    // primary (and heard by the listener there).
    let after = claim_and_complete(&store, tenant, "after").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(remaining, hear.recv()).await {
            Ok(Some(operation_id)) if operation_id == after.operation_id => break,
            Ok(Some(_)) => {}
            _ => panic!("NOTIFY did not follow the primary"),
        }
    }

    // The pool's new connections carry the session settings.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(store.pool().acquire().await.expect("a pooled connection"));
    }
    assert_eq!(
        server_keepalive(&mut held[0]).await,
        ["7", "5", "3", "23000"],
        "tcp_keepalives_idle, _interval, _count, tcp_user_timeout on the new primary"
    );
    drop(held);
    let configured_socket = SocketKeepalive {
        keepalive: true,
        idle: Duration::from_secs(7),
        interval: DatabaseKeepalive::PROBE_INTERVAL,
        probes: DatabaseKeepalive::PROBES,
        user_timeout: Some(Duration::from_secs(23)),
    };
    let sessions = assert_session_sockets(&store, database_port, "after the move", &|socket| {
        socket == &configured_socket
    })
    .await;
    // Four pooled, LISTEN, NOTIFY (and the primary's check).
    assert!(sessions >= 6, "{sessions} sessions on the new primary");
    listener.abort();
    admin.close().await.expect("closed");
    store.close().await;
}
