//! A real idemd server on 127.0.0.1:0 over a fresh store (a fresh Postgres
//! database, or a fresh SQLite data directory), real tonic clients, a fault
//! layer that loses requests or replies, and a provider that counts business
//! effects.
//!
//! Every test that touches a store is written once, as `async fn
//! name(backend: Backend)`, and listed in [`store_tests!`], which runs it as
//! `name::postgres` and as `name::sqlite`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use chrono::TimeDelta;
use idemd::app::{ConnectionSettings, ServerSettings};
use idemd::auth::AuthSettings;
use idemd::cache::TerminalCache;
use idemd::domain::Limits;
use idemd::grpc::admission::AdmissionSettings;
use idemd::metrics::{LabelPolicy, Metrics};
use idemd::proto::idempotency_service_client::IdempotencyServiceClient;
use idemd::proto::{self, claim_response::Outcome};
use idemd::service::{IdempotencyService, WaiterLimits};
use idemd::store::postgres::PostgresStore;
use idemd::store::sqlite::{DatabaseLock, SqliteOptions, SqliteStore};
use idemd::store::{PauseHook, Store};
use idemd::{Application, auth};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic::codegen::http;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

/// Claims `key` and completes it directly on `store` (no gRPC): a state
/// change, for the tests that watch what a store announces.
pub async fn claim_and_complete(
    store: &impl Store,
    tenant: idemd::domain::TenantId,
    key: &str,
) -> idemd::domain::OperationRecord {
    use idemd::domain::{CompleteCommand, OperationId, OperationRecord, SuccessResult, Target};
    let record = store
        .insert_new(tenant, OperationId::generate(), &claim_command(key))
        .await
        .expect("insert")
        .expect("new");
    let complete = CompleteCommand {
        operation_id: record.operation_id,
        fence: record.fence,
        result: SuccessResult::default(),
    };
    let decide = |record: &OperationRecord, now| {
        idemd::domain::transition::decide_complete(record, &complete, now)
    };
    store
        .transition(tenant, &Target::Id(record.operation_id), &decide)
        .await
        .expect("complete")
        .expect("row");
    record
}

/// A first Claim of `key` as the domain sees it (the service's and the
/// stores' own input): a JSON-free byte fingerprint of the key, a 30 s lease
/// within a 60 s attempt, five attempts, an hour's retention. Tests change
/// what they need with `..claim_command(key)`.
pub fn claim_command(key: &str) -> idemd::domain::ClaimCommand {
    idemd::domain::ClaimCommand {
        scope: idemd::domain::Scope {
            operation: "payments.charge".into(),
            key: key.into(),
        },
        fingerprint: idemd::domain::fingerprint::of_bytes(key.as_bytes()),
        claim_token: Vec::new(),
        lease: TimeDelta::seconds(30),
        max_attempt_duration: TimeDelta::seconds(60),
        max_attempts: 5,
        retention: TimeDelta::hours(1),
        operation_deadline: None,
        clock_margin: TimeDelta::zero(),
    }
}

pub type Client = IdempotencyServiceClient<Channel>;

/// Short leases so expiry tests need no long sleeps.
/// Retention with tombstones kept for `tombstone_retention` and no clock
/// margin (as [`test_limits`]).
pub fn sweep_policy(tombstone_retention: TimeDelta) -> idemd::domain::SweepPolicy {
    idemd::domain::SweepPolicy {
        tombstone_retention,
        clock_margin: TimeDelta::zero(),
    }
}

/// No clock margin: the tests that wait for an attempt deadline wait for it
/// alone; the margin's own tests set one.
pub fn test_limits() -> Limits {
    Limits {
        min_lease: TimeDelta::milliseconds(10),
        clock_margin: TimeDelta::zero(),
        ..Limits::default()
    }
}

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

// ---- one test, every store ------------------------------------------------

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

/// A directory under the system's temp dir, removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> Self {
        let path = std::env::temp_dir().join(format!("idemd-test-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&path).expect("temp dir");
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

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
    /// both dialects spell alike.
    pub async fn execute(&self, statement: &'static str) -> u64 {
        match self {
            Self::Postgres { pool, .. } => sqlx::query(statement)
                .execute(pool)
                .await
                .map(|done| done.rows_affected()),
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

// ---- fault injection -----------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The request never reaches idemd (lost on the way, connection reset).
    LoseRequest,
    /// idemd handles and commits, then the reply is lost on the way back.
    LoseReply,
}

/// Faults armed per RPC method name (`Claim`, `Complete`, …), each used once.
#[derive(Debug, Clone, Default)]
pub struct Faults(Arc<Mutex<HashMap<&'static str, Vec<Fault>>>>);

impl Faults {
    pub fn arm(&self, method: &'static str, fault: Fault) {
        self.0
            .lock()
            .expect("faults lock")
            .entry(method)
            .or_default()
            .push(fault);
    }

    fn take(&self, path: &str) -> Option<Fault> {
        let method = path.rsplit('/').next()?;
        let mut faults = self.0.lock().expect("faults lock");
        let armed = faults.get_mut(method)?;
        (!armed.is_empty()).then(|| armed.remove(0))
    }
}

#[derive(Clone)]
struct FaultLayer(Faults);

impl<S> tower::Layer<S> for FaultLayer {
    type Service = FaultService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        FaultService {
            inner,
            faults: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct FaultService<S> {
    inner: S,
    faults: Faults,
}

impl<S, B> tower::Service<http::Request<B>> for FaultService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        std::pin::Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let fault = self.faults.take(request.uri().path());
        let lost = || Status::unavailable("connection reset (injected by the test)").into_http();
        match fault {
            None => Box::pin(self.inner.call(request)),
            Some(Fault::LoseRequest) => Box::pin(async move { Ok(lost()) }),
            Some(Fault::LoseReply) => {
                let call = self.inner.call(request);
                Box::pin(async move {
                    // A unary response is complete once the handler returned:
                    // the transaction has committed. Then the reply is lost.
                    let _committed = call.await?;
                    Ok(lost())
                })
            }
        }
    }
}

// ---- the service, without a server ----------------------------------------

/// `IdempotencyService` over a store, wired as `Application::new` wires it:
/// a metrics registry of its own that nothing serves. The only place tests
/// build one, so a change to its constructor is one edit here.
pub struct ServiceUnderTest {
    pub service: IdempotencyService,
}

impl ServiceUnderTest {
    pub fn over(store: Arc<dyn Store>) -> Self {
        let (metrics, _) =
            Metrics::new(LabelPolicy::default(), None).expect("a metrics registry builds");
        // Never cancelled: a waiting Claim is never told the server drains.
        let draining = tokio_util::sync::CancellationToken::new();
        Self {
            service: IdempotencyService::new(store, metrics, draining),
        }
    }
}

// ---- the server ----------------------------------------------------------

pub struct TestServer {
    pub addr: SocketAddr,
    pub faults: Faults,
    pub application: Arc<Application>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// The server-side settings a test may change; the defaults are the binary's.
#[derive(Debug, Clone, Default)]
pub struct ServerConfig {
    pub server: ServerSettings,
    pub admission: AdmissionSettings,
    pub auth: AuthSettings,
    pub waiters: WaiterLimits,
    pub connections: ConnectionSettings,
}

impl TestServer {
    pub async fn start(store: Arc<dyn Store>, limits: Limits) -> Self {
        Self::start_configured(store, limits, ServerConfig::default()).await
    }

    pub async fn start_configured(
        store: Arc<dyn Store>,
        limits: Limits,
        config: ServerConfig,
    ) -> Self {
        let (metrics, _) =
            Metrics::new(LabelPolicy::default(), None).expect("a metrics registry builds");
        let application = Arc::new(
            Application::build(
                store,
                limits,
                config.auth,
                config.admission,
                config.waiters,
                metrics,
                TerminalCache::new(idemd::cache::DEFAULT_BUDGET_BYTES),
            )
            .await
            .expect("application builds"),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let faults = Faults::default();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let routes = application.routes.clone();
        let layer = FaultLayer(faults.clone());
        let server = config.server.server();
        // The binary's own accept loop, bounds and all.
        let incoming = idemd::app::incoming(
            listener,
            config.connections,
            None,
            application.service.metrics().clone(),
        );
        let task = tokio::spawn(async move {
            server
                .layer(layer)
                .add_routes(routes)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await
                .expect("server runs");
        });
        Self {
            addr,
            faults,
            application,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .expect("uri")
            .connect()
            .await
            .expect("connect")
    }

    pub async fn client(&self) -> Client {
        IdempotencyServiceClient::new(self.channel().await)
    }

    /// Graceful stop, as on SIGTERM.
    pub async fn stop(mut self) {
        self.application.begin_drain().await;
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task");
        }
    }
}

/// A server over a fresh store, with two tenants.
pub struct World {
    pub backend: Backend,
    pub store: Arc<dyn Store>,
    pub server: TestServer,
    pub tenant_a: String,
    pub tenant_b: String,
}

impl World {
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, test_limits()).await
    }

    pub async fn start_with(backend: Backend, limits: Limits) -> Self {
        Self::start_configured(backend, limits, ServerConfig::default()).await
    }

    pub async fn start_configured(backend: Backend, limits: Limits, config: ServerConfig) -> Self {
        let store = backend.store();
        let tenant_a = create_tenant(store.as_ref(), "tenant-a").await;
        let tenant_b = create_tenant(store.as_ref(), "tenant-b").await;
        let server = TestServer::start_configured(store.clone(), limits, config).await;
        Self {
            backend,
            store,
            server,
            tenant_a,
            tenant_b,
        }
    }

    pub async fn client(&self) -> Client {
        self.server.client().await
    }
}

pub async fn create_tenant(store: &dyn Store, name: &str) -> String {
    let token = auth::generate_token().expect("token");
    store
        .create_tenant(name, &auth::token_sha256(&token))
        .await
        .expect("tenant created");
    token
}

// ---- requests ------------------------------------------------------------

/// The fields a status's BadRequest names, in order.
pub fn violated_fields(status: &tonic::Status) -> Vec<String> {
    use tonic_types::StatusExt;
    status
        .get_details_bad_request()
        .expect("BadRequest")
        .field_violations
        .into_iter()
        .map(|violation| violation.field)
        .collect()
}

pub fn authorized<T>(token: &str, message: T) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("ascii token"),
    );
    request
}

pub fn scope(operation: &str, key: &str) -> Option<proto::Scope> {
    Some(proto::Scope {
        operation: operation.into(),
        key: key.into(),
    })
}

pub fn millis(millis: u64) -> Option<pbjson_types::Duration> {
    let duration = Duration::from_millis(millis);
    Some(pbjson_types::Duration {
        seconds: duration.as_secs() as i64,
        nanos: duration.subsec_nanos() as i32,
    })
}

pub fn claim_json(operation: &str, key: &str, json: &str) -> proto::ClaimRequest {
    proto::ClaimRequest {
        scope: scope(operation, key),
        request_identity: Some(proto::claim_request::RequestIdentity::JsonPayload(
            json.into(),
        )),
        ..Default::default()
    }
}

pub fn result(body: &str) -> Option<proto::Result> {
    Some(proto::Result {
        body: body.as_bytes().to_vec(),
        content_type: "application/json".into(),
        metadata: HashMap::from([("provider".to_owned(), "test".to_owned())]),
    })
}

pub fn ownership(response: &proto::ClaimResponse) -> Option<&proto::Ownership> {
    match response.outcome.as_ref()? {
        Outcome::Acquired(acquired) => acquired.ownership.as_ref(),
        Outcome::ReconcileFirst(reconcile) => reconcile.ownership.as_ref(),
        _ => None,
    }
}

pub fn outcome_name(response: &proto::ClaimResponse) -> &'static str {
    match response.outcome {
        Some(Outcome::Acquired(_)) => "acquired",
        Some(Outcome::ReconcileFirst(_)) => "reconcile_first",
        Some(Outcome::Pending(_)) => "pending",
        Some(Outcome::Completed(_)) => "completed",
        Some(Outcome::NeedsReconciliation(_)) => "needs_reconciliation",
        None => "none",
    }
}

/// The ErrorInfo reason and metadata of a status.
pub fn error_info(status: &Status) -> (String, HashMap<String, String>) {
    use tonic_types::StatusExt;
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("status {status:?} has no ErrorInfo"));
    assert_eq!(info.domain, "idem.v1");
    (info.reason, info.metadata)
}

pub fn assert_status(status: &Status, code: Code, reason: &str) {
    assert_eq!(status.code(), code, "unexpected status: {status:?}");
    assert_eq!(
        error_info(status).0,
        reason,
        "unexpected reason: {status:?}"
    );
}

pub async fn history(
    client: &mut Client,
    token: &str,
    operation_id: &str,
) -> Vec<proto::HistoryEntry> {
    client
        .lookup(authorized(
            token,
            proto::LookupRequest {
                target: Some(proto::lookup_request::Target::OperationId(
                    operation_id.into(),
                )),
                include_history: true,
                ..Default::default()
            },
        ))
        .await
        .expect("lookup")
        .into_inner()
        .history
}

pub fn events(history: &[proto::HistoryEntry]) -> Vec<String> {
    history.iter().map(|entry| entry.event.clone()).collect()
}

// ---- the provider and the client protocol ----------------------------------

/// The downstream system whose effects must happen at most once. It counts
/// what actually happened, whatever the responses said.
#[derive(Debug, Clone, Default)]
pub struct Provider {
    effects: Arc<Mutex<Vec<String>>>,
}

impl Provider {
    pub fn charge(&self, reference: &str) -> String {
        let mut effects = self.effects.lock().expect("provider lock");
        effects.push(reference.to_owned());
        format!("{{\"charge\":{}}}", effects.len())
    }

    pub fn effects(&self) -> usize {
        self.effects.lock().expect("provider lock").len()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// This attempt executed the effect and recorded it.
    Executed,
    /// The stored result was replayed; nothing executed.
    Replayed,
    /// Same key, different request: refused.
    Conflict,
    /// Another attempt holds it; nothing executed.
    Pending,
    /// Only a reconciler can resolve it; nothing executed.
    NeedsReconciliation,
    /// The call failed in transport; the caller does not know what happened.
    Unavailable,
}

/// One attempt of the documented client protocol: Claim; execute only on
/// Acquired; Complete; replay on Completed; never execute otherwise.
pub async fn attempt(
    client: &mut Client,
    token: &str,
    request: proto::ClaimRequest,
    provider: &Provider,
) -> Attempt {
    let response = match client.claim(authorized(token, request)).await {
        Ok(response) => response.into_inner(),
        Err(status) if status.code() == Code::Unavailable => return Attempt::Unavailable,
        Err(status) if status.code() == Code::FailedPrecondition => {
            assert_eq!(error_info(&status).0, "IDEMPOTENCY_KEY_REUSED");
            return Attempt::Conflict;
        }
        Err(status) => panic!("unexpected claim error: {status:?}"),
    };
    match response.outcome {
        Some(Outcome::Acquired(acquired)) => {
            let ownership = acquired.ownership.expect("ownership");
            let body = provider.charge(&ownership.operation_id);
            let completed = client
                .complete(authorized(
                    token,
                    proto::CompleteRequest {
                        operation_id: ownership.operation_id,
                        fence: ownership.fence,
                        result: result(&body),
                    },
                ))
                .await;
            match completed {
                Ok(_) => Attempt::Executed,
                Err(status) if status.code() == Code::Unavailable => Attempt::Unavailable,
                Err(status) => panic!("unexpected complete error: {status:?}"),
            }
        }
        Some(Outcome::Completed(_)) => Attempt::Replayed,
        Some(Outcome::Pending(_)) => Attempt::Pending,
        Some(Outcome::NeedsReconciliation(_)) => Attempt::NeedsReconciliation,
        other => panic!("unexpected claim outcome: {other:?}"),
    }
}

// ---- the real binary -------------------------------------------------------

impl Backend {
    /// Hands the data to `idemd` processes: closes this process's store
    /// (for SQLite, releasing the data directory's lock) and says how a
    /// process finds the same data.
    pub async fn into_process_data(self) -> ProcessData {
        match self {
            Self::Postgres { connect, pool, .. } => {
                pool.close().await;
                let database = connect.get_database().expect("a test database");
                ProcessData {
                    env: vec![("DATABASE_URL".into(), database_url_for(database))],
                    directory: Arc::new(TempDir::new()),
                }
            }
            Self::Sqlite { directory, store } => {
                store.close().await;
                ProcessData {
                    env: Vec::new(),
                    directory,
                }
            }
        }
    }
}

/// DATABASE_URL (the server `#[sqlx::test]` uses) naming another database;
/// credentials and parameters kept.
fn database_url_for(database: &str) -> String {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL names the test server");
    let (base, parameters) = match url.split_once('?') {
        Some((base, parameters)) => (base, format!("?{parameters}")),
        None => (url.as_str(), String::new()),
    };
    let server = match base.rsplit_once('/') {
        Some((server, _)) if server.contains("://") && !server.ends_with('/') => server,
        _ => base.trim_end_matches('/'),
    };
    format!("{server}/{database}{parameters}")
}

/// Where `idemd` processes find a test's data: a Postgres database, or the
/// embedded store in `directory` (which is also every process's data dir).
pub struct ProcessData {
    env: Vec<(String, String)>,
    directory: Arc<TempDir>,
}

impl ProcessData {
    /// A fresh data directory for the embedded store.
    pub fn embedded() -> Self {
        Self {
            env: Vec::new(),
            directory: Arc::new(TempDir::new()),
        }
    }

    pub fn directory(&self) -> &Path {
        self.directory.path()
    }

    /// `idemd ARGS` with nothing inherited but this data (no stray
    /// DATABASE_URL or IDEMD_* from the test's environment).
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_idemd"));
        command
            .args(args)
            .env_clear()
            .env("IDEMD_DATA_DIR", self.directory.path())
            .env("IDEMD_MIN_LEASE", "10ms")
            .env("IDEMD_CLOCK_MARGIN", "0s")
            // Several servers run at once: no fixed ports besides the API's.
            .env("IDEMD_METRICS_LISTEN", "off")
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(std::process::Stdio::null());
        command
    }

    /// `idemd tenant create NAME`: the token it prints.
    pub fn create_tenant(&self, name: &str) -> String {
        let output = self
            .command(&["tenant", "create", name])
            .output()
            .expect("idemd runs");
        assert!(
            output.status.success(),
            "tenant create failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout)
            .expect("utf-8")
            .trim()
            .to_owned()
    }

    /// `idemd serve ARGS` on a free loopback port, once it answers health
    /// checks as SERVING.
    pub async fn serve(&self, args: &[&str]) -> Daemon {
        self.serve_with(args, &[]).await
    }

    /// The same, with extra environment (which wins over the defaults of
    /// [`ProcessData::command`]). With IDEMD_HEALTH_LISTEN the readiness
    /// check goes there: the API port may speak only TLS.
    pub async fn serve_with(&self, args: &[&str], env: &[(&str, String)]) -> Daemon {
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let log = self
            .directory
            .path()
            .join(format!("serve-{}.log", uuid::Uuid::now_v7()));
        let mut command = self.command(&[&["serve"], args].concat());
        command
            .env("IDEMD_LISTEN", addr.to_string())
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"));
        let health = env
            .iter()
            .find(|(name, _)| *name == "IDEMD_HEALTH_LISTEN")
            .map_or(addr, |(_, value)| value.parse().expect("a health address"));
        let child = command.spawn().expect("idemd starts");
        let mut daemon = Daemon { child, addr, log };
        daemon.wait_until_serving(health).await;
        daemon
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// A running `idemd serve` process.
pub struct Daemon {
    child: std::process::Child,
    pub addr: SocketAddr,
    log: PathBuf,
}

impl Daemon {
    async fn wait_until_serving(&mut self, health: SocketAddr) {
        use tonic_health::pb::HealthCheckRequest;
        use tonic_health::pb::health_check_response::ServingStatus;
        use tonic_health::pb::health_client::HealthClient;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("child status") {
                panic!("idemd exited with {status}: {}", self.log());
            }
            let channel = Channel::from_shared(format!("http://{health}"))
                .expect("uri")
                .connect()
                .await;
            if let Ok(channel) = channel {
                let answer = HealthClient::new(channel)
                    .check(HealthCheckRequest {
                        service: "idem.v1.IdempotencyService".into(),
                    })
                    .await;
                if answer
                    .is_ok_and(|answer| answer.into_inner().status == ServingStatus::Serving as i32)
                {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "idemd did not start serving: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn client(&self) -> Client {
        IdempotencyServiceClient::new(
            Channel::from_shared(format!("http://{}", self.addr))
                .expect("uri")
                .connect()
                .await
                .expect("connect"),
        )
    }

    /// The next `lines` lines of its standard output, read while it runs
    /// (`--dev` prints its token there at start-up).
    pub fn stdout_lines(&mut self, lines: usize) -> Vec<String> {
        use std::io::BufRead;
        let stdout = self.child.stdout.as_mut().expect("piped stdout");
        let mut reader = std::io::BufReader::new(stdout);
        (0..lines)
            .map(|_| {
                let mut line = String::new();
                reader.read_line(&mut line).expect("stdout");
                line.trim_end().to_owned()
            })
            .collect()
    }

    /// SIGKILL: no drain, no clean close; whatever was not committed is lost.
    pub fn kill(mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("reaped");
    }

    /// GET /metrics from its metrics listener on `port`.
    pub async fn scrape(&self, port: u16) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("metrics port");
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .expect("request");
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .await
            .expect("response");
        let (head, body) = response.split_once("\r\n\r\n").expect("http response");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        body.to_owned()
    }

    /// Its log (stderr) so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- a store that counts what authentication asks of it --------------------

/// A store that counts `authenticate` calls, and how many run at once (each
/// takes `lookup_time`, so that concurrent ones overlap), and passes every
/// call on to the store it wraps.
pub struct CountingStore {
    inner: Arc<dyn Store>,
    lookup_time: Duration,
    pub authentications: std::sync::atomic::AtomicUsize,
    in_flight: std::sync::atomic::AtomicUsize,
    pub most_in_flight: std::sync::atomic::AtomicUsize,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn Store>, lookup_time: Duration) -> Arc<Self> {
        Arc::new(Self {
            inner,
            lookup_time,
            authentications: Default::default(),
            in_flight: Default::default(),
            most_in_flight: Default::default(),
        })
    }

    pub fn authentications(&self) -> usize {
        self.authentications
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn most_in_flight(&self) -> usize {
        self.most_in_flight
            .load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Store for CountingStore {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    async fn insert_or_find(
        &self,
        tenant: idemd::domain::TenantId,
        operation_id: idemd::domain::OperationId,
        command: &idemd::domain::ClaimCommand,
    ) -> idemd::domain::Result<Option<idemd::store::ClaimStart>> {
        self.inner
            .insert_or_find(tenant, operation_id, command)
            .await
    }

    async fn transition(
        &self,
        tenant: idemd::domain::TenantId,
        target: &idemd::domain::Target,
        decide: &idemd::store::Decide<'_>,
    ) -> idemd::domain::Result<Option<idemd::store::Applied>> {
        self.inner.transition(tenant, target, decide).await
    }

    async fn write(
        &self,
        tenant: idemd::domain::TenantId,
        guarded: idemd::domain::guarded::GuardedWrite,
        decide: &idemd::store::Decide<'_>,
    ) -> idemd::domain::Result<Option<idemd::store::Applied>> {
        self.inner.write(tenant, guarded, decide).await
    }

    async fn find(
        &self,
        tenant: idemd::domain::TenantId,
        target: &idemd::domain::Target,
        history: Option<idemd::domain::HistoryPage>,
    ) -> idemd::domain::Result<Option<idemd::domain::Found>> {
        self.inner.find(tenant, target, history).await
    }

    async fn list_unresolved(
        &self,
        tenant: idemd::domain::TenantId,
        query: &idemd::domain::UnresolvedQuery,
    ) -> idemd::domain::Result<idemd::domain::UnresolvedPage> {
        self.inner.list_unresolved(tenant, query).await
    }

    async fn sweep(
        &self,
        batch: u32,
        policy: idemd::domain::SweepPolicy,
    ) -> idemd::domain::Result<idemd::store::SweepReport> {
        self.inner.sweep(batch, policy).await
    }

    async fn count_operations(&self) -> idemd::domain::Result<idemd::store::OperationCounts> {
        self.inner.count_operations().await
    }

    fn pool_usage(&self) -> idemd::store::PoolUsage {
        self.inner.pool_usage()
    }

    async fn authenticate(
        &self,
        token_sha256: &[u8; 32],
    ) -> idemd::domain::Result<Option<idemd::store::TokenGrant>> {
        use std::sync::atomic::Ordering::SeqCst;
        self.authentications.fetch_add(1, SeqCst);
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.most_in_flight.fetch_max(now, SeqCst);
        tokio::time::sleep(self.lookup_time).await;
        let found = self.inner.authenticate(token_sha256).await;
        self.in_flight.fetch_sub(1, SeqCst);
        found
    }

    async fn tenant_by_name(
        &self,
        name: &str,
    ) -> idemd::domain::Result<Option<idemd::domain::TenantId>> {
        self.inner.tenant_by_name(name).await
    }

    async fn record_tokens_used(&self, token_hashes: &[[u8; 32]]) -> idemd::domain::Result<()> {
        self.inner.record_tokens_used(token_hashes).await
    }

    fn credentials(&self) -> &dyn idemd::store::Credentials {
        self.inner.credentials()
    }

    async fn listen_for_changes(
        &self,
        changed: &(dyn Fn(idemd::domain::OperationId) + Send + Sync),
    ) -> idemd::domain::Result<()> {
        self.inner.listen_for_changes(changed).await
    }

    async fn check_ready(&self) -> idemd::domain::Result<()> {
        self.inner.check_ready().await
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}
