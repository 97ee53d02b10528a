//! The real `idemd` binary on a fresh store, a TCP proxy that can lose
//! replies or cut the network, and a provider that counts effects.
//!
//! The binary is the one the workspace builds: `cargo test` at the repository
//! root builds it before running these tests (`cargo test -p idemd-client`
//! alone does not: run `cargo build --bin idemd` first), or IDEMD_BIN names
//! one. Every test runs on both stores (`both_stores!`): the embedded one in a
//! fresh data directory, and Postgres in a fresh database on DATABASE_URL's
//! server, which must be set (as for the server's own tests).
#![allow(dead_code, unreachable_pub)] // each test binary uses a part

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idemd_client::{Client, ClientConfig, Error, proto, retry::RetryPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Emits, for each `async fn name(store: Store)`, a module `name` with the
/// tests `embedded` and `postgres`.
#[macro_export]
macro_rules! both_stores {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded() {
                super::$name($crate::support::Store::Embedded).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::support::Store::Postgres).await;
            }
        }
    )+};
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    Embedded,
    Postgres,
}

/// The `idemd` binary under test.
pub fn idemd_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("IDEMD_BIN") {
        return PathBuf::from(path);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    let binary = target.join("debug/idemd");
    assert!(
        binary.exists(),
        "{} is missing: run the tests with `cargo test` at the repository root (which \
         builds it), or `cargo build --bin idemd` first, or set IDEMD_BIN",
        binary.display()
    );
    binary
}

/// A directory under the system's temp dir, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> Self {
        let path = std::env::temp_dir().join(format!("idemd-client-test-{}", unique()));
        std::fs::create_dir_all(&path).expect("temp dir");
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn unique() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("randomness");
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A fresh store and `idemd` processes over it.
pub struct World {
    pub store: Store,
    directory: TempDir,
    database: Option<(String, String)>,
    pub token: String,
    pub port: u16,
    server: Option<Child>,
    log: PathBuf,
}

impl World {
    /// A fresh store, one tenant, and a server on a free loopback port.
    pub async fn start(store: Store) -> Self {
        let directory = TempDir::new();
        let database = match store {
            Store::Embedded => None,
            Store::Postgres => Some(fresh_database()),
        };
        let log = directory.0.join("serve.log");
        let mut world = Self {
            store,
            directory,
            database,
            token: String::new(),
            port: free_port(),
            server: None,
            log,
        };
        if world.database.is_some() {
            let migrated = world.command(&["migrate"]).output().expect("idemd runs");
            assert!(
                migrated.status.success(),
                "idemd migrate: {}",
                String::from_utf8_lossy(&migrated.stderr)
            );
        }
        let created = world
            .command(&["tenant", "create", "client-tests"])
            .output()
            .expect("idemd runs");
        assert!(
            created.status.success(),
            "idemd tenant create: {}",
            String::from_utf8_lossy(&created.stderr)
        );
        world.token = String::from_utf8(created.stdout)
            .expect("utf-8")
            .trim()
            .to_owned();
        world.serve().await;
        world
    }

    /// `idemd ARGS` over this world's store, inheriting nothing else.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(idemd_binary());
        command
            .args(args)
            .env_clear()
            .env("IDEMD_DATA_DIR", &self.directory.0)
            .env("IDEMD_MIN_LEASE", "10ms")
            // The server adds its clock margin to previous_attempt_deadline; these
            // tests time the doubt to the earlier deadline itself (the margin has
            // the server's own tests).
            .env("IDEMD_CLOCK_MARGIN", "0s")
            .env("IDEMD_METRICS_LISTEN", "off")
            // Plaintext on loopback: serve refuses it unless asked.
            .env("IDEMD_INSECURE_PLAINTEXT", "true")
            .stdin(Stdio::null());
        if let Some((url, _)) = &self.database {
            command.env("DATABASE_URL", url);
        }
        command
    }

    pub fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    /// Starts `idemd serve` on this world's port and waits until it answers.
    pub async fn serve(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let child = self
            .command(&["serve"])
            .env("IDEMD_LISTEN", self.addr().to_string())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("idemd starts");
        self.server = Some(child);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self
                .server
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten())
            {
                panic!("idemd exited with {status}: {}", self.log());
            }
            if let Ok(client) = Client::connect(&self.addr().to_string(), &self.token).await {
                let probe = client
                    .with_config(ClientConfig {
                        retry: RetryPolicy::none(),
                        call_timeout: Duration::from_secs(2),
                    })
                    .lookup_operation("00000000-0000-0000-0000-000000000000")
                    .await;
                match probe {
                    Err(Error::NotFound { .. } | Error::InvalidArgument { .. }) => return,
                    other if tokio::time::Instant::now() > deadline => {
                        panic!("idemd does not answer: {other:?}: {}", self.log())
                    }
                    _ => {}
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "idemd did not start: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// SIGKILL: no drain; what was not committed is lost.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.server.take() {
            child.kill().expect("kill");
            child.wait().expect("reaped");
        }
    }

    /// A client straight to the server, with short re-send timings.
    pub async fn client(&self) -> Client {
        client_for(self.addr(), &self.token).await
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the server and drops the Postgres database.
    pub async fn finish(mut self) {
        self.kill();
        if let Some((_, name)) = self.database.take() {
            drop_database(&name).await;
        }
    }
}

impl Drop for World {
    /// Also after a failed test: the server stops and the database goes (on
    /// a thread of its own, as a panicking test's runtime may be unusable).
    fn drop(&mut self) {
        self.kill();
        // The data directory (and the server's log in it) goes with the
        // world: a failing test shows what the server said first.
        if std::thread::panicking() {
            eprintln!(
                "---- idemd's log ({}) ----\n{}",
                self.log.display(),
                self.log()
            );
        }
        if let Some((_, name)) = self.database.take() {
            let dropped = std::thread::spawn(move || {
                if let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    runtime.block_on(drop_database(&name));
                }
            });
            let _ = dropped.join();
        }
    }
}

/// A client with timings fit for tests: sends time out after 2 s, re-sends
/// go on for up to 20 s (a restarting server).
pub async fn client_for(addr: SocketAddr, token: &str) -> Client {
    Client::connect(&addr.to_string(), token)
        .await
        .expect("connect")
        .with_config(ClientConfig {
            retry: RetryPolicy {
                max_sends: 100,
                initial_backoff: Duration::from_millis(20),
                max_backoff: Duration::from_millis(200),
                total_deadline: Duration::from_secs(20),
            },
            call_timeout: Duration::from_secs(2),
        })
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

fn database_url() -> String {
    std::env::var("DATABASE_URL").expect(
        "DATABASE_URL must name a Postgres server for the client's Postgres tests \
         (e.g. postgres://postgres@127.0.0.1:5432/postgres), as for the server's tests",
    )
}

/// DATABASE_URL with its database replaced by `name`.
fn url_for(name: &str) -> String {
    let url = database_url();
    let (base, parameters) = match url.split_once('?') {
        Some((base, parameters)) => (base.to_owned(), format!("?{parameters}")),
        None => (url.clone(), String::new()),
    };
    let server = match base.rsplit_once('/') {
        Some((server, _)) if server.contains("://") && !server.ends_with('/') => server.to_owned(),
        _ => base.trim_end_matches('/').to_owned(),
    };
    format!("{server}/{name}{parameters}")
}

/// A name for a new database; `idemd migrate` creates it.
fn fresh_database() -> (String, String) {
    let name = format!("idemd_client_test_{}", unique());
    (url_for(&name), name)
}

async fn drop_database(name: &str) {
    use sqlx::Connection;
    let Ok(mut connection) = sqlx::PgConnection::connect(&database_url()).await else {
        return;
    };
    let statement = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
        .execute(&mut connection)
        .await;
}

// ---- the provider --------------------------------------------------------

/// A stand-in for a provider: it performs every request it gets (keeping
/// that to once is the client's job) and can be asked what a reference got.
#[derive(Debug, Clone, Default)]
pub struct Provider {
    effects: Arc<Mutex<HashMap<String, Vec<Vec<u8>>>>>,
    total: Arc<AtomicUsize>,
}

impl Provider {
    /// Performs the effect for `reference` once more.
    pub fn perform(&self, reference: &str) -> Vec<u8> {
        let number = self.total.fetch_add(1, Ordering::SeqCst) + 1;
        let body = format!("{{\"effect\":{number}}}").into_bytes();
        self.effects
            .lock()
            .expect("provider lock")
            .entry(reference.to_owned())
            .or_default()
            .push(body.clone());
        body
    }

    /// The first effect performed for `reference`.
    pub fn find(&self, reference: &str) -> Option<Vec<u8>> {
        self.effects
            .lock()
            .expect("provider lock")
            .get(reference)
            .and_then(|bodies| bodies.first().cloned())
    }

    pub fn effects(&self, reference: &str) -> usize {
        self.effects
            .lock()
            .expect("provider lock")
            .get(reference)
            .map_or(0, Vec::len)
    }

    pub fn total(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }
}

pub fn result(body: Vec<u8>) -> proto::Result {
    proto::Result {
        body,
        content_type: "application/json".into(),
        metadata: HashMap::new(),
    }
}

// ---- the proxy -----------------------------------------------------------

/// What the proxy does to the n-th response (counted over all connections,
/// 1-based: the first HEADERS frame of each HTTP/2 stream from the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyFault {
    /// The server handled the call (its handler returned: committed); the
    /// reply is dropped and the connection cut.
    Lose,
    /// The reply is held this long.
    Delay(Duration),
}

/// A TCP proxy in front of the server.
pub struct Proxy {
    pub addr: SocketAddr,
    faults: Arc<Mutex<HashMap<usize, ReplyFault>>>,
    responses: Arc<AtomicUsize>,
    blackout: watch::Sender<bool>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (blackout, _) = watch::channel(false);
        let proxy = Self {
            addr,
            faults: Arc::default(),
            responses: Arc::default(),
            blackout,
        };
        let (faults, responses, blackout) = (
            proxy.faults.clone(),
            proxy.responses.clone(),
            proxy.blackout.clone(),
        );
        tokio::spawn(async move {
            while let Ok((downstream, _)) = listener.accept().await {
                if *blackout.borrow() {
                    drop(downstream);
                    continue;
                }
                let (faults, responses, blackout) =
                    (faults.clone(), responses.clone(), blackout.subscribe());
                tokio::spawn(async move {
                    let Ok(upstream) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    relay(downstream, upstream, faults, responses, blackout).await;
                });
            }
        });
        proxy
    }

    pub fn arm(&self, response: usize, fault: ReplyFault) {
        self.faults
            .lock()
            .expect("faults lock")
            .insert(response, fault);
    }

    /// How many responses the server sent through the proxy.
    pub fn responses(&self) -> usize {
        self.responses.load(Ordering::SeqCst)
    }

    /// Cuts every connection and refuses new ones until `false`.
    pub fn set_blackout(&self, on: bool) {
        self.blackout.send_replace(on);
    }

    pub async fn client(&self, token: &str) -> Client {
        client_for(self.addr, token).await
    }
}

async fn relay(
    downstream: TcpStream,
    upstream: TcpStream,
    faults: Arc<Mutex<HashMap<usize, ReplyFault>>>,
    responses: Arc<AtomicUsize>,
    mut blackout: watch::Receiver<bool>,
) {
    let _ = downstream.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (mut down_read, mut down_write) = downstream.into_split();
    let (mut up_read, mut up_write) = upstream.into_split();
    let requests = async {
        let _ = tokio::io::copy(&mut down_read, &mut up_write).await;
    };
    let replies = async {
        let mut streams = HashSet::new();
        loop {
            let mut header = [0u8; 9];
            if up_read.read_exact(&mut header).await.is_err() {
                return;
            }
            let length =
                usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            let mut payload = vec![0u8; length];
            if up_read.read_exact(&mut payload).await.is_err() {
                return;
            }
            let stream =
                u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
            const HEADERS: u8 = 0x1;
            if header[3] == HEADERS && stream != 0 && streams.insert(stream) {
                let number = responses.fetch_add(1, Ordering::SeqCst) + 1;
                let fault = faults.lock().expect("faults lock").remove(&number);
                match fault {
                    Some(ReplyFault::Lose) => return,
                    Some(ReplyFault::Delay(delay)) => tokio::time::sleep(delay).await,
                    None => {}
                }
            }
            if down_write.write_all(&header).await.is_err()
                || down_write.write_all(&payload).await.is_err()
            {
                return;
            }
        }
    };
    let cut = async {
        let _ = blackout.wait_for(|on| *on).await;
    };
    // Whichever ends first ends the connection: both halves are dropped.
    tokio::select! {
        () = requests => {}
        () = replies => {}
        () = cut => {}
    }
}

/// A Claim straight through the typed wrapper, for setting a scene.
pub fn claim_json(operation: &str, key: &str, document: &str) -> proto::ClaimRequest {
    proto::ClaimRequest {
        scope: Some(proto::Scope {
            operation: operation.into(),
            key: key.into(),
        }),
        request_identity: Some(proto::claim_request::RequestIdentity::JsonPayload(
            document.into(),
        )),
        ..Default::default()
    }
}

pub fn millis(milliseconds: u64) -> Option<prost_types::Duration> {
    prost_types::Duration::try_from(Duration::from_millis(milliseconds)).ok()
}
