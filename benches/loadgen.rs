//! The load generator of `bench/run` (see bench/README.md), which drives it
//! once per measured cell and reads the one JSON object it prints.
//!
//! `grpc` drives a running idemd only through its public gRPC API, like any
//! client would, and counts business effects, not responses: an execution is
//! an Acquired (or ReconcileFirst) answer followed by a successful Complete,
//! a duplicate execution is a second one for the same logical operation, a
//! false conflict is IDEMPOTENCY_KEY_REUSED for a request whose payload was
//! identical. `sqlite-ceiling` is the embedded store's ceiling: the same
//! INSERT and UPDATE on the same schema through the same SQLite library, with
//! the same durability, and nothing else.
//!
//! The token comes from `IDEMD_BENCH_TOKEN`, so it is never on a command line.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use hdrhistogram::Histogram;
use idemd::proto::idempotency_service_client::IdempotencyServiceClient;
use idemd::proto::{self, claim_response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use tonic::Request;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body every execution completes with, and every replay must return.
const RESULT_BODY: &[u8] = br#"{"charge":"ch_1"}"#;
const RESULT_CONTENT_TYPE: &str = "application/json";
const OPERATION: &str = "payments.charge";
/// Replays checked for their stored result before the timed window opens.
const REPLAYS_CHECKED_BEFORE_TIMING: u64 = 5;
/// How long the hot workload keeps every client on one scope.
const HOT_KEY_PERIOD_MS: u128 = 10;
/// The mixed workload, per block of ten requests of one client: 70% new
/// operations, 20% identical retries, 10% the same key with another payload.
/// It starts with a new operation, so every retry and conflict has a target.
const MIXED_PATTERN: [MixedRequest; 10] = [
    MixedRequest::New,
    MixedRequest::New,
    MixedRequest::IdenticalRetry,
    MixedRequest::New,
    MixedRequest::New,
    MixedRequest::OtherPayload,
    MixedRequest::New,
    MixedRequest::IdenticalRetry,
    MixedRequest::New,
    MixedRequest::New,
];

#[derive(Parser)]
#[command(about = "Load generator of bench/run: one measured cell per invocation, JSON on stdout")]
struct Cli {
    /// Passed by `cargo bench`; the benchmark itself is `bench/run`.
    #[arg(long, hide = true)]
    bench: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Drive a running idemd through its gRPC API.
    Grpc(GrpcArgs),
    /// The embedded store's ceiling: plain INSERT + UPDATE transactions.
    SqliteCeiling(SqliteCeilingArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Workload {
    /// All-new keys; one logical operation is Claim + Complete.
    Fresh,
    /// Claims of operations completed before the run (preloaded).
    Replay,
    /// Every client on one scope per 10 ms.
    Hot,
    /// 70% new, 20% identical retries, 10% same key with another payload.
    Mixed,
    /// grpc.health.v1.Health/Check: the gRPC floor of the same server.
    Floor,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Fresh => "fresh",
            Workload::Replay => "replay",
            Workload::Hot => "hot",
            Workload::Mixed => "mixed",
            Workload::Floor => "floor",
        }
    }
}

#[derive(clap::Args)]
struct Limits {
    /// Concurrent clients, each on its own connection.
    #[arg(long)]
    concurrency: usize,
    /// Stop starting operations after this many seconds (0: no time limit).
    #[arg(long, default_value_t = 0.0)]
    duration: f64,
    /// Stop after this many logical operations in all (mixed: exactly this many).
    #[arg(long)]
    operations: Option<u64>,
}

#[derive(clap::Args)]
struct GrpcArgs {
    /// e.g. http://127.0.0.1:50051
    #[arg(long)]
    address: String,
    #[arg(long, value_enum)]
    workload: Workload,
    #[command(flatten)]
    limits: Limits,
    /// Makes this cell's keys its own, so cells never share a scope.
    #[arg(long)]
    run_id: String,
    /// Keys `<replay-prefix><n>` (n zero-padded to 10 digits), n in
    /// 1..=replay-keys, were completed before the run.
    #[arg(long, default_value_t = 0)]
    replay_keys: u64,
    #[arg(long, default_value = "replay-")]
    replay_prefix: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(clap::Args)]
struct SqliteCeilingArgs {
    /// A database file with idemd's migrated schema.
    #[arg(long)]
    path: std::path::PathBuf,
    /// The tenant the rows belong to (the schema's foreign key).
    #[arg(long)]
    tenant_id: i64,
    #[command(flatten)]
    limits: Limits,
    #[arg(long)]
    run_id: String,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let cli = Cli::parse();
    let report = match cli.command {
        Some(Command::Grpc(args)) => run_grpc(args).await?,
        Some(Command::SqliteCeiling(args)) => run_sqlite_ceiling(args).await?,
        None => {
            eprintln!("this is bench/run's load generator; run the benchmark with `bench/run`");
            return Ok(());
        }
    };
    println!("{report}");
    Ok(())
}

/// What one client saw; merged over clients at the end.
struct Tally {
    latency_us: Histogram<u64>,
    operations: u64,
    outcomes: BTreeMap<&'static str, u64>,
    statuses: BTreeMap<String, u64>,
    /// Executions per logical operation (its key).
    executions: HashMap<String, u32>,
    conflicts: u64,
    expected_conflicts: u64,
    false_conflicts: u64,
    /// Logical operations that did not end as their workload requires.
    unsettled: u64,
    /// Replays whose result was not the stored one.
    wrong_replays: u64,
}

impl Tally {
    fn new() -> Result<Self, BoxError> {
        Ok(Self {
            latency_us: Histogram::new_with_bounds(1, 60_000_000, 3)?,
            operations: 0,
            outcomes: BTreeMap::new(),
            statuses: BTreeMap::new(),
            executions: HashMap::new(),
            conflicts: 0,
            expected_conflicts: 0,
            false_conflicts: 0,
            unsettled: 0,
            wrong_replays: 0,
        })
    }

    fn record_latency(&mut self, started: Instant) {
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.latency_us.saturating_record(micros.max(1));
        self.operations += 1;
    }

    fn status(&mut self, code: tonic::Code) {
        *self.statuses.entry(format!("{code:?}")).or_default() += 1;
    }

    fn outcome(&mut self, outcome: &'static str) {
        *self.outcomes.entry(outcome).or_default() += 1;
    }

    fn merge(&mut self, other: Tally) -> Result<(), BoxError> {
        self.latency_us.add(&other.latency_us)?;
        self.operations += other.operations;
        for (outcome, count) in other.outcomes {
            *self.outcomes.entry(outcome).or_default() += count;
        }
        for (status, count) in other.statuses {
            *self.statuses.entry(status).or_default() += count;
        }
        for (key, count) in other.executions {
            *self.executions.entry(key).or_default() += count;
        }
        self.conflicts += other.conflicts;
        self.expected_conflicts += other.expected_conflicts;
        self.false_conflicts += other.false_conflicts;
        self.unsettled += other.unsettled;
        self.wrong_replays += other.wrong_replays;
        Ok(())
    }
}

/// What a Claim told the client to do.
enum ClaimAnswer {
    Execute {
        operation_id: String,
        fence: u64,
    },
    /// Only from `claim_and_execute`: owned, executed and completed.
    Executed,
    Pending,
    Completed {
        body: Option<Vec<u8>>,
    },
    Conflict,
    /// Needs reconciliation, an unknown outcome, or an error status.
    Other,
}

struct Client {
    idempotency: IdempotencyServiceClient<Channel>,
    health: HealthClient<Channel>,
    authorization: MetadataValue<tonic::metadata::Ascii>,
}

impl Client {
    async fn connect(address: &str, token: &str) -> Result<Self, BoxError> {
        // One connection per client, as separate client processes would have.
        let channel = Channel::from_shared(address.to_owned())?
            .tcp_nodelay(true)
            .connect()
            .await?;
        Ok(Self {
            idempotency: IdempotencyServiceClient::new(channel.clone()),
            health: HealthClient::new(channel),
            authorization: format!("Bearer {token}").parse()?,
        })
    }

    fn authorized<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request
            .metadata_mut()
            .insert("authorization", self.authorization.clone());
        request
    }

    async fn claim(&mut self, tally: &mut Tally, key: &str, fingerprint: [u8; 32]) -> ClaimAnswer {
        let request = self.authorized(proto::ClaimRequest {
            scope: Some(proto::Scope {
                operation: OPERATION.into(),
                key: key.into(),
            }),
            request_identity: Some(proto::claim_request::RequestIdentity::Fingerprint(
                fingerprint.to_vec(),
            )),
            ..Default::default()
        });
        let response = match self.idempotency.claim(request).await {
            Ok(response) => response.into_inner(),
            Err(status) => {
                tally.status(status.code());
                let reason = status.get_details_error_info().map(|info| info.reason);
                if status.code() == tonic::Code::FailedPrecondition
                    && reason.as_deref() == Some("IDEMPOTENCY_KEY_REUSED")
                {
                    tally.outcome("conflict");
                    return ClaimAnswer::Conflict;
                }
                tally.outcome("error");
                return ClaimAnswer::Other;
            }
        };
        tally.status(tonic::Code::Ok);
        let ownership = |ownership: Option<proto::Ownership>| match ownership {
            Some(ownership) => ClaimAnswer::Execute {
                operation_id: ownership.operation_id,
                fence: ownership.fence,
            },
            None => ClaimAnswer::Other,
        };
        match response.outcome {
            Some(claim_response::Outcome::Acquired(acquired)) => {
                tally.outcome("acquired");
                ownership(acquired.ownership)
            }
            Some(claim_response::Outcome::ReconcileFirst(reconcile_first)) => {
                // Nothing in these workloads happened outside idemd, so the
                // owner has nothing to find at the provider and executes.
                tally.outcome("reconcile_first");
                ownership(reconcile_first.ownership)
            }
            Some(claim_response::Outcome::Pending(_)) => {
                tally.outcome("pending");
                ClaimAnswer::Pending
            }
            Some(claim_response::Outcome::Completed(completed)) => {
                tally.outcome("completed");
                let body = match completed.outcome {
                    Some(proto::completed::Outcome::Result(result)) => Some(result.body),
                    _ => None,
                };
                ClaimAnswer::Completed { body }
            }
            Some(claim_response::Outcome::NeedsReconciliation(_)) => {
                tally.outcome("needs_reconciliation");
                ClaimAnswer::Other
            }
            None => {
                tally.outcome("unknown");
                ClaimAnswer::Other
            }
        }
    }

    /// Executes the (empty) effect and completes; counts the execution.
    async fn complete(
        &mut self,
        tally: &mut Tally,
        key: &str,
        operation_id: String,
        fence: u64,
    ) -> bool {
        let request = self.authorized(proto::CompleteRequest {
            operation_id,
            fence,
            result: Some(proto::Result {
                body: RESULT_BODY.to_vec(),
                content_type: RESULT_CONTENT_TYPE.into(),
                metadata: Default::default(),
            }),
        });
        match self.idempotency.complete(request).await {
            Ok(_) => {
                tally.status(tonic::Code::Ok);
                *tally.executions.entry(key.to_owned()).or_default() += 1;
                true
            }
            Err(status) => {
                tally.status(status.code());
                false
            }
        }
    }

    /// Claim, and on ownership execute and Complete.
    async fn claim_and_execute(
        &mut self,
        tally: &mut Tally,
        key: &str,
        fingerprint: [u8; 32],
    ) -> ClaimAnswer {
        match self.claim(tally, key, fingerprint).await {
            ClaimAnswer::Execute {
                operation_id,
                fence,
            } => {
                if self.complete(tally, key, operation_id, fence).await {
                    ClaimAnswer::Executed
                } else {
                    ClaimAnswer::Other
                }
            }
            other => other,
        }
    }
}

/// The preloaded keys, as bench/sql/preload_*.sql write them.
fn replay_key(prefix: &str, number: u64) -> String {
    format!("{prefix}{number:010}")
}

fn fingerprint_of(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// The fingerprint of another request under the same key.
fn other_fingerprint_of(key: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(key.as_bytes());
    hasher.update(b"\0another payload");
    hasher.finalize().into()
}

/// splitmix64: a deterministic, dependency-free choice of replay keys and
/// retry targets.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 { 0 } else { self.next() % bound }
    }
}

#[derive(Clone, Copy)]
enum MixedRequest {
    New,
    IdenticalRetry,
    OtherPayload,
}

/// When a client stops starting operations.
#[derive(Clone)]
struct Stop {
    deadline: Option<Instant>,
    budget: Option<Arc<AtomicU64>>,
}

impl Stop {
    fn new(limits: &Limits, started: Instant) -> Self {
        Self {
            deadline: (limits.duration > 0.0)
                .then(|| started + Duration::from_secs_f64(limits.duration)),
            budget: limits
                .operations
                .map(|operations| Arc::new(AtomicU64::new(operations))),
        }
    }

    /// Takes one operation from the budget; false once time or budget is up.
    fn another(&self) -> bool {
        if self
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            return false;
        }
        match &self.budget {
            Some(budget) => budget
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    left.checked_sub(1)
                })
                .is_ok(),
            None => true,
        }
    }
}

struct ClientPlan {
    index: usize,
    workload: Workload,
    run_id: Arc<str>,
    replay_keys: u64,
    replay_prefix: Arc<str>,
    /// Mixed only: exactly this many requests.
    mixed_requests: u64,
    seed: u64,
}

async fn drive_client(
    mut client: Client,
    plan: ClientPlan,
    start: Arc<tokio::sync::Barrier>,
    run_limits: Arc<std::sync::OnceLock<Stop>>,
) -> Result<Tally, BoxError> {
    let mut tally = Tally::new()?;
    let mut random = Random(plan.seed ^ (plan.index as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    start.wait().await;
    let stop = run_limits
        .get()
        .ok_or("the run started without its limits")?
        .clone();
    match plan.workload {
        Workload::Fresh => {
            let mut sequence = 0u64;
            while stop.another() {
                sequence += 1;
                let key = format!("{}-c{}-{sequence}", plan.run_id, plan.index);
                let started = Instant::now();
                let answer = client
                    .claim_and_execute(&mut tally, &key, fingerprint_of(&key))
                    .await;
                tally.record_latency(started);
                settle_new(&mut tally, &answer);
            }
        }
        Workload::Replay => {
            while stop.another() {
                let key = replay_key(&plan.replay_prefix, 1 + random.below(plan.replay_keys));
                let started = Instant::now();
                let answer = client.claim(&mut tally, &key, fingerprint_of(&key)).await;
                tally.record_latency(started);
                settle_replay(&mut client, &mut tally, &key, answer).await;
            }
        }
        Workload::Hot => {
            while stop.another() {
                // Every client of this process counts periods from one
                // instant, so they meet on the same scope in each.
                let period = hot_key_epoch().elapsed().as_millis() / HOT_KEY_PERIOD_MS;
                let key = format!("{}-hot-{period}", plan.run_id);
                let started = Instant::now();
                let answer = client
                    .claim_and_execute(&mut tally, &key, fingerprint_of(&key))
                    .await;
                tally.record_latency(started);
                match answer {
                    ClaimAnswer::Executed | ClaimAnswer::Pending => {}
                    ClaimAnswer::Completed { body } => {
                        if body.as_deref() != Some(RESULT_BODY) {
                            tally.wrong_replays += 1;
                        }
                    }
                    ClaimAnswer::Conflict => tally.false_conflicts += 1,
                    ClaimAnswer::Execute { .. } | ClaimAnswer::Other => tally.unsettled += 1,
                }
            }
        }
        Workload::Mixed => {
            let mut created: Vec<String> = Vec::new();
            for position in 0..plan.mixed_requests {
                let request = MIXED_PATTERN[(position % MIXED_PATTERN.len() as u64) as usize];
                let started = Instant::now();
                match request {
                    MixedRequest::New => {
                        let key = format!("{}-c{}-mixed-{position}", plan.run_id, plan.index);
                        let answer = client
                            .claim_and_execute(&mut tally, &key, fingerprint_of(&key))
                            .await;
                        tally.record_latency(started);
                        settle_new(&mut tally, &answer);
                        created.push(key);
                    }
                    MixedRequest::IdenticalRetry => {
                        let target = random.below(created.len() as u64) as usize;
                        let key = created.get(target).ok_or("a retry before any operation")?;
                        let answer = client.claim(&mut tally, key, fingerprint_of(key)).await;
                        tally.record_latency(started);
                        settle_replay(&mut client, &mut tally, key, answer).await;
                    }
                    MixedRequest::OtherPayload => {
                        tally.expected_conflicts += 1;
                        let target = random.below(created.len() as u64) as usize;
                        let key = created
                            .get(target)
                            .ok_or("a conflict before any operation")?;
                        let answer = client
                            .claim(&mut tally, key, other_fingerprint_of(key))
                            .await;
                        tally.record_latency(started);
                        match answer {
                            ClaimAnswer::Conflict => tally.conflicts += 1,
                            ClaimAnswer::Execute {
                                operation_id,
                                fence,
                            } => {
                                // Refused by nobody: a second execution of this key.
                                client.complete(&mut tally, key, operation_id, fence).await;
                                tally.unsettled += 1;
                            }
                            _ => tally.unsettled += 1,
                        }
                    }
                }
            }
        }
        Workload::Floor => {
            while stop.another() {
                let started = Instant::now();
                let answer = client
                    .health
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await;
                tally.record_latency(started);
                match answer {
                    Ok(_) => {
                        tally.status(tonic::Code::Ok);
                        tally.outcome("serving");
                    }
                    Err(status) => {
                        tally.status(status.code());
                        tally.unsettled += 1;
                    }
                }
            }
        }
    }
    Ok(tally)
}

/// A new operation must have been executed exactly here.
fn settle_new(tally: &mut Tally, answer: &ClaimAnswer) {
    match answer {
        ClaimAnswer::Executed => {}
        ClaimAnswer::Conflict => {
            tally.false_conflicts += 1;
            tally.unsettled += 1;
        }
        _ => tally.unsettled += 1,
    }
}

/// A Claim of a completed operation must replay its stored result and
/// execute nothing.
async fn settle_replay(client: &mut Client, tally: &mut Tally, key: &str, answer: ClaimAnswer) {
    match answer {
        ClaimAnswer::Completed { body } => {
            if body.as_deref() != Some(RESULT_BODY) {
                tally.wrong_replays += 1;
            }
        }
        ClaimAnswer::Execute {
            operation_id,
            fence,
        } => {
            // Completed operations must never be handed out again; if one
            // is, the client executes, as a real one would, and it counts.
            client.complete(tally, key, operation_id, fence).await;
            tally.unsettled += 1;
        }
        ClaimAnswer::Conflict => {
            tally.false_conflicts += 1;
            tally.unsettled += 1;
        }
        ClaimAnswer::Executed | ClaimAnswer::Pending | ClaimAnswer::Other => tally.unsettled += 1,
    }
}

async fn run_grpc(args: GrpcArgs) -> Result<Value, BoxError> {
    let token = std::env::var("IDEMD_BENCH_TOKEN").unwrap_or_default();
    if token.is_empty() && args.workload != Workload::Floor {
        return Err("set IDEMD_BENCH_TOKEN to a tenant's bearer token".into());
    }
    if args.workload == Workload::Replay && args.replay_keys == 0 {
        return Err("replay needs --replay-keys (operations completed before the run)".into());
    }
    let concurrency = args.limits.concurrency.max(1);
    if args.workload == Workload::Mixed && args.limits.operations.is_none() {
        return Err("mixed needs --operations: its conflicts are counted in advance".into());
    }
    if args.workload == Workload::Replay {
        check_replays_before_timing(&args, &token).await?;
    }
    let total_mixed = args.limits.operations.unwrap_or(0);
    let start = Arc::new(tokio::sync::Barrier::new(concurrency + 1));
    let stop = Arc::new(std::sync::OnceLock::new());
    let run_id: Arc<str> = args.run_id.clone().into();
    let replay_prefix: Arc<str> = args.replay_prefix.clone().into();
    let mut clients = Vec::with_capacity(concurrency);
    for index in 0..concurrency {
        let client = Client::connect(&args.address, &token).await?;
        let share = total_mixed / concurrency as u64
            + u64::from((index as u64) < total_mixed % concurrency as u64);
        let plan = ClientPlan {
            index,
            workload: args.workload,
            run_id: run_id.clone(),
            replay_keys: args.replay_keys,
            replay_prefix: replay_prefix.clone(),
            mixed_requests: share,
            seed: args.seed,
        };
        clients.push(tokio::spawn(drive_client(
            client,
            plan,
            start.clone(),
            stop.clone(),
        )));
    }
    let cpu_before = own_cpu_seconds();
    let started = Instant::now();
    // Mixed runs its plan to the end: its conflicts were counted from it.
    stop.set(Stop::new(&args.limits, started))
        .map_err(|_| "limits set twice")?;
    start.wait().await;
    let mut tally = Tally::new()?;
    for client in clients {
        tally.merge(client.await??)?;
    }
    let elapsed = started.elapsed();
    let cpu = own_cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let replayed_keys_are_executed = args.workload == Workload::Replay;
    Ok(report(
        args.workload.name(),
        concurrency,
        elapsed,
        &tally,
        replayed_keys_are_executed,
        (args.workload == Workload::Mixed).then_some(tally.expected_conflicts),
        cpu,
    ))
}

/// A few replays must return the stored result before anything is timed:
/// otherwise the preload and the load generator disagree and the numbers
/// would mean nothing.
async fn check_replays_before_timing(args: &GrpcArgs, token: &str) -> Result<(), BoxError> {
    let mut client = Client::connect(&args.address, token).await?;
    let mut tally = Tally::new()?;
    let checked = REPLAYS_CHECKED_BEFORE_TIMING.min(args.replay_keys);
    for step in 0..checked {
        let key = replay_key(
            &args.replay_prefix,
            1 + step * (args.replay_keys / checked.max(1)),
        );
        match client.claim(&mut tally, &key, fingerprint_of(&key)).await {
            ClaimAnswer::Completed { body } if body.as_deref() == Some(RESULT_BODY) => {}
            _ => {
                return Err(format!(
                    "replay check failed: a preloaded operation did not replay its stored \
                     result (outcomes {:?}, statuses {:?})",
                    tally.outcomes, tally.statuses
                )
                .into());
            }
        }
    }
    Ok(())
}

fn report(
    workload: &str,
    concurrency: usize,
    elapsed: Duration,
    tally: &Tally,
    every_execution_is_a_duplicate: bool,
    expected_conflicts: Option<u64>,
    client_cpu_seconds: Option<f64>,
) -> Value {
    let executions: u64 = tally
        .executions
        .values()
        .map(|&count| u64::from(count))
        .sum();
    let duplicate_executions: u64 = if every_execution_is_a_duplicate {
        executions
    } else {
        tally
            .executions
            .values()
            .map(|&count| u64::from(count.saturating_sub(1)))
            .sum()
    };
    let histogram = &tally.latency_us;
    let seconds = elapsed.as_secs_f64();
    let mut violations = Vec::new();
    if duplicate_executions > 0 {
        violations.push(format!("{duplicate_executions} duplicate executions"));
    }
    if tally.false_conflicts > 0 {
        violations.push(format!("{} false conflicts", tally.false_conflicts));
    }
    if let Some(expected) = expected_conflicts
        && expected != tally.conflicts
    {
        violations.push(format!(
            "{} conflicts counted, {expected} expected",
            tally.conflicts
        ));
    }
    if tally.unsettled > 0 {
        violations.push(format!("{} operations not settled", tally.unsettled));
    }
    if tally.wrong_replays > 0 {
        violations.push(format!(
            "{} replays returned another result",
            tally.wrong_replays
        ));
    }
    let errors: u64 = tally
        .statuses
        .iter()
        .filter(|(status, _)| status.as_str() != "Ok" && status.as_str() != "FailedPrecondition")
        .map(|(_, count)| count)
        .sum();
    if errors > 0 {
        violations.push(format!("{errors} error statuses"));
    }
    json!({
        "workload": workload,
        "concurrency": concurrency,
        "elapsed_s": seconds,
        "operations": tally.operations,
        "ops_per_s": if seconds > 0.0 { tally.operations as f64 / seconds } else { 0.0 },
        "latency_us": {
            "p50": histogram.value_at_quantile(0.50),
            "p90": histogram.value_at_quantile(0.90),
            "p99": histogram.value_at_quantile(0.99),
            "p999": histogram.value_at_quantile(0.999),
            "max": histogram.max(),
            "mean": histogram.mean(),
        },
        "outcomes": tally.outcomes,
        "statuses": tally.statuses,
        "executions": executions,
        "duplicate_executions": duplicate_executions,
        "false_conflicts": tally.false_conflicts,
        "conflicts": tally.conflicts,
        "expected_conflicts": expected_conflicts,
        "unsettled": tally.unsettled,
        "wrong_replays": tally.wrong_replays,
        "violations": violations,
        "client_cpu_s": client_cpu_seconds,
    })
}

/// utime + stime of this process, from /proc (Linux).
fn own_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name, which may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    // Linux reports these in USER_HZ, 100 on every supported architecture.
    Some((user + system) / 100.0)
}

/// The embedded store's ceiling: per logical operation one transaction that
/// draws a fence and inserts the operation with its history row, and one that
/// updates it to succeeded with its history row — the writes the embedded store
/// makes, without its reads, clock queries or anything else — on one writer
/// connection in WAL with synchronous=FULL, as the store runs.
async fn run_sqlite_ceiling(args: SqliteCeilingArgs) -> Result<Value, BoxError> {
    let options = SqliteConnectOptions::new()
        .filename(&args.path)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(10));
    let writer = SqlitePoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(60))
        .connect_with(options)
        .await?;
    let concurrency = args.limits.concurrency.max(1);
    let start = Arc::new(tokio::sync::Barrier::new(concurrency + 1));
    let stop = Arc::new(std::sync::OnceLock::<Stop>::new());
    let mut clients = Vec::new();
    for index in 0..concurrency {
        let writer = writer.clone();
        let start = start.clone();
        let stop = stop.clone();
        let run_id = args.run_id.clone();
        let tenant_id = args.tenant_id;
        clients.push(tokio::spawn(async move {
            let mut tally = Tally::new()?;
            start.wait().await;
            let stop = stop
                .get()
                .ok_or("the run started without its limits")?
                .clone();
            let mut sequence = 0u64;
            while stop.another() {
                sequence += 1;
                let key = format!("{run_id}-c{index}-{sequence}");
                let started = Instant::now();
                let outcome = sqlite_insert_then_update(&writer, tenant_id, &key).await;
                tally.record_latency(started);
                match outcome {
                    Ok(()) => {
                        tally.status(tonic::Code::Ok);
                        *tally.executions.entry(key).or_default() += 1;
                    }
                    Err(error) => {
                        eprintln!("sqlite ceiling: {error}");
                        tally.status(tonic::Code::Internal);
                        tally.unsettled += 1;
                    }
                }
            }
            Ok::<_, BoxError>(tally)
        }));
    }
    let cpu_before = own_cpu_seconds();
    let started = Instant::now();
    stop.set(Stop::new(&args.limits, started))
        .map_err(|_| "limits set twice")?;
    start.wait().await;
    let mut tally = Tally::new()?;
    for client in clients {
        tally.merge(client.await??)?;
    }
    let elapsed = started.elapsed();
    let cpu = own_cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    writer.close().await;
    Ok(report(
        "sqlite-ceiling",
        concurrency,
        elapsed,
        &tally,
        false,
        None,
        cpu,
    ))
}

/// idemd's timestamp text: UTC, microseconds, one fixed width.
fn stamp(moment: chrono::DateTime<chrono::Utc>) -> String {
    moment.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// The instant hot-key periods are counted from, shared by every client.
fn hot_key_epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

// A ceiling, not the store: its timestamps only need the store's shape, so
// the host clock stands in for SQLite's.
#[allow(clippy::disallowed_methods)]
async fn sqlite_insert_then_update(
    writer: &sqlx::SqlitePool,
    tenant_id: i64,
    key: &str,
) -> Result<(), sqlx::Error> {
    let operation_id = uuid::Uuid::now_v7();
    let fingerprint = fingerprint_of(key);
    let now = chrono::Utc::now();
    let mut claim = writer.begin_with("BEGIN IMMEDIATE").await?;
    let fence: i64 = sqlx::query_scalar(
        "UPDATE operation_fence SET last_fence = last_fence + 1 WHERE singleton = 1 \
         RETURNING last_fence",
    )
    .fetch_one(&mut *claim)
    .await?;
    sqlx::query(
        "INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key, \
             fingerprint, state, fence, attempt, max_attempts, claim_token, lease_ms, \
             max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at, \
             operation_deadline_at, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, 'in_progress', $6, 1, 5, x'', 30000, 300000, 86400000, \
             $7, $8, NULL, $9, $9) \
         ON CONFLICT (tenant_id, operation, idempotency_key) DO NOTHING RETURNING *",
    )
    .bind(operation_id)
    .bind(tenant_id)
    .bind(OPERATION)
    .bind(key)
    .bind(&fingerprint[..])
    .bind(fence)
    .bind(stamp(now + chrono::TimeDelta::seconds(30)))
    .bind(stamp(now + chrono::TimeDelta::seconds(300)))
    .bind(stamp(now))
    .fetch_optional(&mut *claim)
    .await?;
    sqlx::query(
        "INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state, \
             fence, attempt, detail, count, first_at, last_at) \
         VALUES ($1, 1, 'CLAIMED', NULL, 'in_progress', $2, 1, '', 1, $3, $3)",
    )
    .bind(operation_id)
    .bind(fence)
    .bind(stamp(now))
    .execute(&mut *claim)
    .await?;
    claim.commit().await?;

    let completed_at = chrono::Utc::now();
    let mut complete = writer.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::query(
        "UPDATE operations SET state = 'succeeded', outcome_state = 'succeeded', \
             lease_expires_at = NULL, result_body = $3, result_content_type = $4, \
             result_metadata = '{}', last_write_fence = $2, last_write_digest = $5, \
             last_write_by = 'owner', updated_at = $6, completed_at = $6, retain_until = $7 \
         WHERE operation_id = $1 AND fence = $2 AND state = 'in_progress' RETURNING fence",
    )
    .bind(operation_id)
    .bind(fence)
    .bind(RESULT_BODY)
    .bind(RESULT_CONTENT_TYPE)
    .bind(&fingerprint[..])
    .bind(stamp(completed_at))
    .bind(stamp(completed_at + chrono::TimeDelta::days(1)))
    .fetch_one(&mut *complete)
    .await?;
    sqlx::query(
        "INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state, \
             fence, attempt, detail, count, first_at, last_at) \
         VALUES ($1, 2, 'COMPLETED', 'in_progress', 'succeeded', $2, 1, '', 1, $3, $3)",
    )
    .bind(operation_id)
    .bind(fence)
    .bind(stamp(completed_at))
    .execute(&mut *complete)
    .await?;
    complete.commit().await?;
    Ok(())
}
