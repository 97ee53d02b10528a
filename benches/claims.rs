//! Claim throughput and latency through the real gRPC server on Postgres,
//! next to a baseline measured in the same run: the same number of rows
//! inserted and updated by plain SQL, which is the floor any durable
//! idempotency layer on this database pays.
//!
//! Run: `DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo bench --bench claims`
//! Options (env): BENCH_OPERATIONS (default 4000), BENCH_CONCURRENCY (default 32).

use std::sync::Arc;
use std::time::{Duration, Instant};

use idemd::proto::idempotency_client::IdempotencyClient;
use idemd::proto::{self, claim_response::Outcome};
use idemd::store::Store;
use idemd::store::postgres::{PostgresOptions, PostgresStore};
use idemd::{Application, auth};
use sqlx::migrate::MigrateDatabase;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::Request;
use tonic::transport::Channel;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Figures {
    name: &'static str,
    operations: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Figures {
    fn print(&mut self) {
        self.latencies.sort_unstable();
        let percentile = |p: f64| {
            let index = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
            self.latencies.get(index).copied().unwrap_or_default()
        };
        println!(
            "{:<44} {:>8} ops {:>10.0} ops/s   p50 {:>7.2} ms   p99 {:>7.2} ms",
            self.name,
            self.operations,
            self.operations as f64 / self.elapsed.as_secs_f64(),
            percentile(0.50).as_secs_f64() * 1000.0,
            percentile(0.99).as_secs_f64() * 1000.0,
        );
    }
}

fn resident_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// Runs `operations` calls of `one` on `concurrency` tasks; one latency each.
async fn measure<F, Fut>(
    name: &'static str,
    operations: usize,
    concurrency: usize,
    one: F,
) -> Result<Figures, BoxError>
where
    F: Fn(usize) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send,
{
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..concurrency {
        let one = one.clone();
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut index = worker;
            while index < operations {
                let call_started = Instant::now();
                one(index).await?;
                latencies.push(call_started.elapsed());
                index += concurrency;
            }
            Ok::<_, BoxError>(latencies)
        }));
    }
    let mut latencies = Vec::with_capacity(operations);
    for worker in workers {
        latencies.extend(worker.await??);
    }
    Ok(Figures {
        name,
        operations,
        elapsed: started.elapsed(),
        latencies,
    })
}

fn authorized<T>(token: &str, message: T) -> Result<Request<T>, BoxError> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    Ok(request)
}

fn claim(key: String) -> proto::ClaimRequest {
    proto::ClaimRequest {
        scope: Some(proto::Scope {
            operation: "payments.charge".into(),
            key,
        }),
        request_identity: Some(proto::claim_request::RequestIdentity::JsonPayload(
            r#"{"amount":1000,"currency":"EUR"}"#.into(),
        )),
        ..Default::default()
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let base = std::env::var("DATABASE_URL").map_err(
        |_| "set DATABASE_URL to a Postgres server (the bench creates its own database)",
    )?;
    let operations = env_number("BENCH_OPERATIONS", 4000);
    let concurrency = env_number("BENCH_CONCURRENCY", 32);
    let database = format!("idemd_bench_{}", std::process::id());
    let url = match base.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{database}"),
        None => return Err("DATABASE_URL has no database part".into()),
    };
    sqlx::Postgres::create_database(&url).await?;
    let outcome = run(&url, operations, concurrency).await;
    sqlx::Postgres::force_drop_database(&url).await?;
    outcome
}

async fn run(url: &str, operations: usize, concurrency: usize) -> Result<(), BoxError> {
    let store = PostgresStore::connect(&PostgresOptions {
        url: url.to_owned(),
        max_connections: 16,
        acquire_timeout: Duration::from_secs(10),
    })
    .await?;
    store.migrate().await?;
    let token = auth::generate_token()?;
    store
        .create_tenant("bench", &auth::token_sha256(&token))
        .await?;
    let pool = store.pool().clone();
    let memory_before = resident_memory_kib();

    let application = Application::new(
        Arc::new(store),
        idemd::domain::Limits::default(),
        Duration::from_secs(60),
    )
    .await?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let routes = application.routes.clone();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_routes(routes)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let channel = Channel::from_shared(format!("http://{address}"))?
        .connect()
        .await?;
    println!(
        "idemd claims benchmark: {operations} operations, {concurrency} concurrent callers, \
         Postgres, one process"
    );

    // Baseline: the database work alone (insert a row, then update it).
    sqlx::query(
        "CREATE TABLE bench_baseline (key TEXT PRIMARY KEY, state TEXT NOT NULL, body BYTEA)",
    )
    .execute(&pool)
    .await?;
    let baseline_pool = pool.clone();
    let mut baseline = measure(
        "baseline: SQL INSERT + UPDATE per operation",
        operations,
        concurrency,
        move |index| {
            let pool = baseline_pool.clone();
            async move {
                sqlx::query("INSERT INTO bench_baseline (key, state) VALUES ($1, 'in_progress')")
                    .bind(format!("k{index}"))
                    .execute(&pool)
                    .await?;
                sqlx::query(
                    "UPDATE bench_baseline SET state = 'succeeded', body = $2 WHERE key = $1",
                )
                .bind(format!("k{index}"))
                .bind(b"{\"charge\":\"ch_1\"}".to_vec())
                .execute(&pool)
                .await?;
                Ok(())
            }
        },
    )
    .await?;
    baseline.print();

    // idemd: Claim (Acquired) then Complete, fresh keys.
    let execute_channel = channel.clone();
    let execute_token = token.clone();
    let mut execute = measure(
        "idemd: Claim + Complete (new key)",
        operations,
        concurrency,
        move |index| {
            let mut client = IdempotencyClient::new(execute_channel.clone());
            let token = execute_token.clone();
            async move {
                let response = client
                    .claim(authorized(&token, claim(format!("k{index}")))?)
                    .await?
                    .into_inner();
                let Some(Outcome::Acquired(acquired)) = response.outcome else {
                    return Err("expected Acquired".into());
                };
                let ownership = acquired.ownership.ok_or("no ownership")?;
                client
                    .complete(authorized(
                        &token,
                        proto::CompleteRequest {
                            operation_id: ownership.operation_id,
                            fence: ownership.fence,
                            result: Some(proto::Result {
                                body: b"{\"charge\":\"ch_1\"}".to_vec(),
                                content_type: "application/json".into(),
                                metadata: Default::default(),
                            }),
                        },
                    )?)
                    .await?;
                Ok(())
            }
        },
    )
    .await?;
    execute.print();

    // idemd: a retry of a completed operation (the replay path).
    let replay_channel = channel.clone();
    let replay_token = token.clone();
    let mut replay = measure(
        "idemd: Claim replay (completed key)",
        operations,
        concurrency,
        move |index| {
            let mut client = IdempotencyClient::new(replay_channel.clone());
            let token = replay_token.clone();
            async move {
                let response = client
                    .claim(authorized(&token, claim(format!("k{index}")))?)
                    .await?
                    .into_inner();
                match response.outcome {
                    Some(Outcome::Completed(_)) => Ok(()),
                    other => Err(format!("expected a replay, got {other:?}").into()),
                }
            }
        },
    )
    .await?;
    replay.print();

    let ratio = execute.elapsed.as_secs_f64() / baseline.elapsed.as_secs_f64();
    println!("claim+complete costs {ratio:.2}x the baseline's wall time");
    if let (Some(before), Some(after)) = (memory_before, resident_memory_kib()) {
        println!("resident memory: {before} KiB before the server, {after} KiB after the runs");
    }
    Ok(())
}
