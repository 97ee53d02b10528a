//! The outbox end to end: entries enqueued with business changes, the
//! `idemd-local dispatch` binary delivering them through a real idemd server
//! (the `idemd` binary, embedded store, a free loopback port) to an HTTP
//! recipient that counts its effects, and the dispatcher SIGKILLed between
//! a delivery and its mark.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use idemd_local::outbox::NewEntry;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::process::{Child, Command};

use crate::app::{App, Charge, SCHEMA, insert_charge};

const ENTRIES: usize = 20;

/// What the recipient saw: each idempotency key it was called with, how
/// often, and how often it applied one (a provider that deduplicates: once).
#[derive(Clone, Default)]
struct Effects {
    calls: Arc<Mutex<HashMap<String, usize>>>,
    applied: Arc<Mutex<HashMap<String, usize>>>,
    /// The next call applies its effect, then never answers (the answer is
    /// lost with the dispatcher).
    hold_next: Arc<AtomicBool>,
}

impl Effects {
    fn calls(&self) -> usize {
        self.calls.lock().expect("calls").values().sum()
    }

    fn of(&self) -> HashMap<String, usize> {
        self.calls.lock().expect("calls").clone()
    }

    fn applied(&self) -> HashMap<String, usize> {
        self.applied.lock().expect("applied").clone()
    }
}

async fn receive(State(effects): State<Effects>, headers: HeaderMap, body: String) -> String {
    let key = headers
        .get("idempotency-key")
        .and_then(|key| key.to_str().ok())
        .unwrap_or("")
        .to_owned();
    *effects
        .calls
        .lock()
        .expect("calls")
        .entry(key.clone())
        .or_default() += 1;
    {
        let mut applied = effects.applied.lock().expect("applied");
        let times = applied.entry(key.clone()).or_default();
        // A key applied before is answered, not applied again.
        *times = (*times).max(1);
    }
    if effects.hold_next.swap(false, Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_secs(120)).await;
    }
    format!("applied {body} under {key}")
}

/// The recipient: an HTTP server on a free loopback port.
async fn start_recipient() -> (String, Effects) {
    let effects = Effects::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("its address");
    let router = axum::Router::new()
        .route("/deliver", post(receive))
        .with_state(effects.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (format!("http://{address}/deliver"), effects)
}

/// The `idemd` binary the workspace builds (`cargo test` at the root
/// builds it), or IDEMD_BIN.
fn idemd_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("IDEMD_BIN") {
        return PathBuf::from(path);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    let binary = target.join("debug/idemd");
    assert!(
        binary.exists(),
        "{} is missing: run `cargo test` at the repository root (which builds it), \
         or `cargo build --bin idemd` first, or set IDEMD_BIN",
        binary.display()
    );
    binary
}

/// A real idemd server over a fresh embedded store.
struct Service {
    directory: PathBuf,
    address: String,
    token: String,
    server: Child,
}

impl Service {
    async fn start() -> Self {
        let directory = std::env::temp_dir().join(format!(
            "idemd-local-outbox-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&directory).expect("a data directory");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let command = |args: &[&str]| {
            let mut command = Command::new(idemd_binary());
            command
                .args(args)
                .env_clear()
                .env("IDEMD_DATA_DIR", &directory)
                .env("IDEMD_MIN_LEASE", "10ms")
                .env("IDEMD_METRICS_LISTEN", "off")
                .env("IDEMD_INSECURE_PLAINTEXT", "true")
                .env("IDEMD_LISTEN", format!("127.0.0.1:{port}"))
                .stdin(Stdio::null());
            command
        };
        let created = command(&["tenant", "create", "outbox"])
            .output()
            .await
            .expect("idemd runs");
        assert!(
            created.status.success(),
            "idemd tenant create: {}",
            String::from_utf8_lossy(&created.stderr)
        );
        let token = String::from_utf8(created.stdout)
            .expect("utf-8")
            .trim()
            .to_owned();
        let server = command(&["serve"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("idemd serves");
        let address = format!("http://127.0.0.1:{port}");
        let up_by = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(tokio::time::Instant::now() < up_by, "idemd did not start");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Self {
            directory,
            address,
            token,
            server,
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.server.start_kill();
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

/// DATABASE_URL with the test's database in place of its own.
fn database_url(database: &str) -> String {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let (without_query, query) = url.split_once('?').unwrap_or((&url, ""));
    let (server, _) = without_query
        .rsplit_once('/')
        .filter(|(server, _)| server.contains("://") && !server.ends_with('/'))
        .unwrap_or((without_query, ""));
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    format!("{server}/{database}{query}")
}

fn dispatcher(service: &Service, database: &str, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_idemd-local"))
        .arg("dispatch")
        .args(extra)
        .env("DATABASE_URL", database_url(database))
        .env("IDEMD_LOCAL_SCHEMA", SCHEMA)
        .env("IDEMD_ADDR", &service.address)
        .env("IDEMD_TOKEN", &service.token)
        .env("IDEMD_LOCAL_IDLE", "50ms")
        .env("IDEMD_LOCAL_LEASE", "1s")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("idemd-local dispatch starts")
}

async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let by = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done().await {
        assert!(tokio::time::Instant::now() < by, "{what}: not within 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[sqlx::test(migrations = false)]
async fn every_entry_is_delivered_once_across_a_dispatcher_killed_before_its_mark(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let database = connect
        .get_database()
        .expect("sqlx::test names the database")
        .to_owned();
    let app = App::start(connect).await;
    let (recipient, effects) = start_recipient().await;
    let service = Service::start().await;

    // Each entry commits with its business row; one rolled back, with its.
    let mut committed = Vec::new();
    for n in 0..=ENTRIES {
        let charge = Charge::new("outbox", "acme", &format!("k-outbox-{n}"), 100);
        let mut transaction = app.pool.begin().await.expect("begin");
        insert_charge(&mut transaction, &charge).await;
        let entry_id = app
            .local
            .enqueue(
                &mut transaction,
                NewEntry {
                    operation: "receipts.send".into(),
                    recipient: recipient.clone(),
                    payload: format!("receipt {n}").into_bytes(),
                },
            )
            .await
            .expect("enqueue");
        if n == ENTRIES {
            transaction.rollback().await.expect("rollback");
        } else {
            transaction.commit().await.expect("commit");
            committed.push(entry_id.to_string());
        }
    }
    let unsent = async || -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM idemd.outbox WHERE sent_at IS NULL")
            .fetch_one(&app.pool)
            .await
            .expect("count unsent")
    };
    assert_eq!(
        unsent().await,
        ENTRIES as i64,
        "the rolled-back entry is not there"
    );

    // The first dispatcher delivers one entry, then waits before marking
    // it: killed there.
    let mut first = dispatcher(&service, &database, &["--pause-before-mark", "30s"]);
    wait_until("the first delivery", async || effects.calls() >= 1).await;
    // Killed once the service has recorded the delivery (the window the
    // kill is meant for), not while its Complete may still be on its way:
    // killed there, the delivery is in doubt and is retried, which is
    // a_dispatcher_killed_during_the_recipients_call_leaves_one_effect.
    let delivered = effects
        .of()
        .into_keys()
        .next()
        .expect("the first delivery's key");
    let client = idemd_client::Client::connect(&service.address, &service.token)
        .await
        .expect("a client of the service");
    wait_until("the first delivery recorded at the service", async || {
        let looked_up = client
            .lookup(idemd_client::proto::LookupRequest {
                target: Some(idemd_client::proto::lookup_request::Target::Scope(
                    idemd_client::proto::Scope {
                        operation: "receipts.send".into(),
                        key: delivered.clone(),
                    },
                )),
                ..Default::default()
            })
            .await;
        looked_up
            .ok()
            .and_then(|found| found.operation)
            .is_some_and(|operation| operation.state() == idemd_client::OperationState::Succeeded)
    })
    .await;
    first.start_kill().expect("SIGKILL");
    first.wait().await.expect("reaped");
    assert_eq!(effects.calls(), 1, "one delivery before the kill");
    assert_eq!(unsent().await, ENTRIES as i64, "killed before its mark");

    // The next dispatcher delivers everything; the service replays the one
    // delivered before the kill.
    let mut second = dispatcher(&service, &database, &[]);
    wait_until("every entry sent", async || unsent().await == 0).await;
    second.start_kill().expect("SIGKILL");
    second.wait().await.expect("reaped");

    let effects = effects.of();
    assert_eq!(
        effects.len(),
        ENTRIES,
        "every committed entry delivered: {effects:?}"
    );
    for key in &committed {
        assert_eq!(effects.get(key), Some(&1), "{key}: exactly one effect");
    }
    let delivered_twice: i64 =
        sqlx::query_scalar("SELECT count(*) FROM idemd.outbox WHERE deliveries = 2")
            .fetch_one(&app.pool)
            .await
            .expect("count redeliveries");
    assert_eq!(
        delivered_twice, 1,
        "the entry killed before its mark was delivered again (and replayed)"
    );
    let results: Vec<String> = sqlx::query_scalar(
        "SELECT convert_from(result, 'UTF8') FROM idemd.outbox ORDER BY enqueued_at",
    )
    .fetch_all(&app.pool)
    .await
    .expect("results");
    for (n, result) in results.iter().enumerate() {
        assert!(
            result.starts_with(&format!("applied receipt {n} under ")),
            "entry {n}'s stored answer: {result}"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn a_dispatcher_killed_during_the_recipients_call_leaves_one_effect(
    _: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let database = connect
        .get_database()
        .expect("sqlx::test names the database")
        .to_owned();
    let app = App::start(connect).await;
    let (recipient, effects) = start_recipient().await;
    let service = Service::start().await;
    let mut keys = Vec::new();
    for n in 0..3 {
        let mut transaction = app.pool.begin().await.expect("begin");
        let entry_id = app
            .local
            .enqueue(
                &mut transaction,
                NewEntry {
                    operation: "receipts.send".into(),
                    recipient: recipient.clone(),
                    payload: format!("receipt {n}").into_bytes(),
                },
            )
            .await
            .expect("enqueue");
        transaction.commit().await.expect("commit");
        keys.push(entry_id.to_string());
    }
    // The first call applies its effect and never answers: the dispatcher
    // is killed while it waits.
    effects.hold_next.store(true, Ordering::SeqCst);
    let mut first = dispatcher(&service, &database, &[]);
    wait_until("the first call", async || effects.calls() >= 1).await;
    first.start_kill().expect("SIGKILL");
    first.wait().await.expect("reaped");

    // The next dispatcher finds the delivery in doubt at the service; once
    // its lease (1 s) has run out it takes it over and calls again with
    // the same key, which the recipient applies once.
    let mut second = dispatcher(&service, &database, &[]);
    let unsent = async || -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM idemd.outbox WHERE sent_at IS NULL")
            .fetch_one(&app.pool)
            .await
            .expect("count unsent")
    };
    wait_until("every entry sent", async || unsent().await == 0).await;
    second.start_kill().expect("SIGKILL");
    second.wait().await.expect("reaped");

    let calls = effects.of();
    let applied = effects.applied();
    assert_eq!(
        calls.get(&keys[0]),
        Some(&2),
        "called again after the kill: {calls:?}"
    );
    // The call after the takeover carried the same key (a new one would be
    // a second effect here): every entry's key, and no other, was applied.
    assert_eq!(applied.len(), keys.len(), "{applied:?}");
    for key in &keys {
        assert_eq!(
            applied.get(key),
            Some(&1),
            "{key}: applied once: {applied:?}"
        );
    }
    assert_eq!(calls.values().sum::<usize>(), keys.len() + 1, "{calls:?}");
}
