//! One campaign: real replicas on one store, proxies in front of them, the
//! provider, workers delivering intents with twists, faults on a schedule and
//! at random, then a reconciler, a settling pass and the checks.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idemd_client::proto::{self, reconcile_request::Resolution};
use idemd_client::retry::RetryPolicy;
use idemd_client::{
    Client, ClientConfig, Disposition, EffectContext, Error, Execution, Operation, OperationState,
    Outcome, Payload, Source,
};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, sleep_until};

use crate::database;
use crate::duplicator::{Duplicator, DuplicatorCounters};
use crate::lock::locked;
use crate::process::{Postgres, Replica, StoreConfig, prepare_store};
use crate::provider::Provider;
use crate::proxy::{FaultRates, Protocol, Proxy, ProxyCounters};
use crate::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// Two replicas on one Postgres of the campaign's own.
    Postgres,
    /// One replica on the embedded store.
    Embedded,
}

#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) operations: usize,
    pub(crate) concurrency: usize,
    pub(crate) lease: Duration,
    pub(crate) attempt_duration: Duration,
    /// The mean pause between two scheduled faults (each is drawn between
    /// half and one and a half of it).
    pub(crate) fault_every: Duration,
    pub(crate) rates: FaultRates,
    /// (Postgres) The fraction of statements on `operations` that fail while
    /// a window of failing statements is on.
    pub(crate) statement_failure_rate: f64,
    /// (Postgres) The mean pause between two rounds of terminated idemd
    /// backends (each drawn between half and one and a half of it).
    pub(crate) terminate_every: Duration,
    pub(crate) seed: u64,
}

/// What a campaign counted and what it found wrong.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) title: String,
    pub(crate) rows: Vec<(&'static str, u64)>,
    pub(crate) checks: Vec<(&'static str, bool)>,
    pub(crate) violations: Vec<String>,
    pub(crate) elapsed: Duration,
}

impl Report {
    pub(crate) fn passed(&self) -> bool {
        self.violations.is_empty() && self.checks.iter().all(|(_, passed)| *passed)
    }
}

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Rounds of reconciling and delivering again after the faults stop.
const SETTLING_ROUNDS: u64 = 3;

/// How long a slow lookup (the late-landing twist's) takes from its read of
/// the provider to its answer.
const SLOW_LOOKUP: (Duration, Duration) = (Duration::from_millis(800), Duration::from_millis(1200));

/// A slow lookup that read the provider before the earlier attempt's
/// deadline answers no sooner than this long after that deadline (and in
/// at most [`SLOW_LOOKUP_MAX`]): it straddles the deadline, however long the
/// takeover's Claim took on a loaded machine.
const STRADDLE_PAST_DEADLINE: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_millis(300));
const SLOW_LOOKUP_MAX: Duration = Duration::from_secs(2);

/// The latest a late-landing effect lands: this long before its attempt
/// deadline (local clock, counted from the Claim's send: before the server's).
const LANDING_BEFORE_DEADLINE: Duration = Duration::from_millis(50);

#[derive(Debug, Default)]
struct Stats {
    deliveries: AtomicU64,
    acknowledged: AtomicU64,
    executed: AtomicU64,
    replayed: AtomicU64,
    reconciled_by_lookup: AtomicU64,
    superseded: AtomicU64,
    lease_lost: AtomicU64,
    outcome_unknown: AtomicU64,
    deadline_passed: AtomicU64,
    needs_reconciliation: AtomicU64,
    other_errors: AtomicU64,
    conflicts_sent: AtomicU64,
    conflicts_rejected: AtomicU64,
    stalled: AtomicU64,
    crashed_before: AtomicU64,
    crashed_after: AtomicU64,
    crashed_in_flight: AtomicU64,
    landed_after_a_negative_read: AtomicU64,
    landed_just_before_the_deadline: AtomicU64,
    lookups_straddling: AtomicU64,
    lookups_straddling_stale: AtomicU64,
    reconciler_succeeded: AtomicU64,
    reconciler_not_applied: AtomicU64,
    attempts: Mutex<HashSet<(String, u64)>>,
    takeovers: Mutex<HashSet<(String, u64)>>,
    violations: Mutex<Vec<String>>,
}

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::SeqCst);
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::SeqCst)
}

impl Stats {
    fn violation(&self, message: String) {
        locked(&self.violations).push(message);
    }
}

#[derive(Debug, Default)]
struct FaultCounts {
    replica_kills: u64,
    database_restarts: u64,
    database_kills: u64,
    database_freezes: u64,
    statement_failure_windows: u64,
}

/// One logical operation: its key and payload are fixed for every delivery.
#[derive(Debug)]
struct Intent {
    key: String,
    payload: String,
    /// The provider honours the operation_id as its idempotency key; such
    /// intents run through `execute_once` (no lookup), as the client's README
    /// allows only then.
    honour_key: bool,
    /// Its takeovers' lookups are slow (the late-landing twist).
    slow_lookup: bool,
    /// Told by a lookup that read the provider and found nothing (the
    /// late-landing twist's request in flight lands right after).
    read_nothing: Arc<Notify>,
    operation_id: Mutex<Option<String>>,
    acknowledged: Mutex<Vec<Vec<u8>>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CrashPoint {
    /// The caller dies after its Claim, before the effect.
    BeforeEffect,
    /// The caller dies after the effect, before Complete.
    AfterEffect,
    /// The caller dies while its provider request is in flight; the effect
    /// lands later, within the attempt deadline.
    EffectInFlight,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Twist {
    Plain,
    /// The same intent delivered this many times at once, over different
    /// connections and replicas.
    Concurrent(u64),
    /// Delivered again after the first delivery ended.
    Later,
    /// Delivered, then the key reused with another payload: must be rejected.
    Conflict,
    /// The effect outlasts the attempt deadline (the client's deadline is
    /// shorter than the effect); with `true` it had taken effect first.
    Stall(bool),
    Crash(CrashPoint),
    /// The owner stalls with its provider request in flight, and the request
    /// lands just before the attempt deadline, while the takeover's slow
    /// lookup is in flight: a lookup that read the provider before it landed
    /// answers "not found" after the deadline.
    LateLanding,
}

fn pick_twist(rng: &mut Rng) -> Twist {
    match rng.below(100) {
        0..34 => Twist::Plain,
        34..49 => Twist::Concurrent(2 + rng.below(2)),
        49..59 => Twist::Later,
        59..67 => Twist::Conflict,
        67..74 => Twist::Stall(rng.chance(0.5)),
        74..81 => Twist::Crash(CrashPoint::BeforeEffect),
        81..88 => Twist::Crash(CrashPoint::AfterEffect),
        88..94 => Twist::Crash(CrashPoint::EffectInFlight),
        _ => Twist::LateLanding,
    }
}

fn result(body: Vec<u8>) -> proto::Result {
    proto::Result {
        body,
        content_type: "application/json".into(),
        metadata: HashMap::new(),
    }
}

struct World {
    settings: Settings,
    clients: Vec<Client>,
    provider: Provider,
    stats: Stats,
}

impl World {
    fn client(&self, rng: &mut Rng) -> &Client {
        let index = rng.below(self.clients.len() as u64) as usize;
        &self.clients[index]
    }

    fn operation(&self, intent: &Intent, payload: &str) -> Operation {
        let mut operation = Operation::new(
            "faults.transfer",
            intent.key.clone(),
            Payload::Json(payload.to_owned()),
        );
        operation.lease = self.settings.lease;
        operation.attempt_duration = Some(self.settings.attempt_duration);
        operation.max_attempts = Some(20);
        operation.deadline = Duration::from_secs(30);
        operation.safety_margin = Duration::from_millis(200);
        operation.wait = Duration::from_secs(1);
        // Such intents run through `execute_once`, without a lookup: a
        // takeover runs the effect again, which the key makes harmless.
        operation.provider_deduplicates = intent.honour_key;
        operation
    }

    fn note_attempt(&self, context: &EffectContext) {
        let attempt = (context.operation_id().to_owned(), context.fence());
        if context.previous_outcome_unknown().is_some() {
            locked(&self.stats.takeovers).insert(attempt.clone());
        }
        locked(&self.stats.attempts).insert(attempt);
    }

    fn note(&self, intent: &Intent, outcome: &Result<Execution, Error>) {
        let operation_id = match outcome {
            Ok(execution) => Some(execution.operation_id.as_str()),
            Err(error) => error.operation_id(),
        };
        if let Some(operation_id) = operation_id {
            let mut known = locked(&intent.operation_id);
            if known.as_deref().is_some_and(|known| known != operation_id) {
                self.stats.violation(format!(
                    "key {} named two operations: {known:?} and {operation_id}",
                    intent.key
                ));
            }
            *known = Some(operation_id.to_owned());
        }
        match outcome {
            Ok(execution) => match &execution.outcome {
                Outcome::Succeeded(stored) => {
                    add(&self.stats.acknowledged);
                    locked(&intent.acknowledged).push(stored.body.clone());
                    add(match execution.source {
                        Source::Executed => &self.stats.executed,
                        Source::Replayed => &self.stats.replayed,
                        Source::Reconciled => &self.stats.reconciled_by_lookup,
                        Source::Superseded => &self.stats.superseded,
                    });
                }
                Outcome::Failed(error) => self.stats.violation(format!(
                    "key {} ended failed ({:?}), though no effect fails",
                    intent.key, error.code
                )),
            },
            Err(Error::Conflict { .. }) => self.stats.violation(format!(
                "key {} was rejected as a conflict with its own payload",
                intent.key
            )),
            Err(Error::LeaseLost { .. }) => add(&self.stats.lease_lost),
            Err(Error::OutcomeUnknown { .. }) => add(&self.stats.outcome_unknown),
            Err(Error::DeadlinePassed { .. }) => add(&self.stats.deadline_passed),
            Err(Error::NeedsReconciliation { .. }) => add(&self.stats.needs_reconciliation),
            Err(_) => add(&self.stats.other_errors),
        }
    }

    fn effect(
        self: &Arc<Self>,
        honour_key: bool,
        work: Duration,
    ) -> impl FnMut(EffectContext) -> Boxed<Disposition> + Send + use<> {
        let world = self.clone();
        move |context| {
            world.note_attempt(&context);
            let world = world.clone();
            Box::pin(async move {
                sleep(work).await;
                let body = world.provider.perform(context.operation_id(), honour_key);
                Disposition::Success(result(body))
            })
        }
    }

    /// The takeover's lookup: it reads the provider as it starts; for a
    /// slow-lookup intent its answer comes 0.8-1.2 s later, and, if it read
    /// before the earlier attempt's deadline, just after that deadline (up to
    /// 2 s; counted when it straddles it), else at once.
    fn lookup(
        self: &Arc<Self>,
        intent: &Intent,
        mut rng: Rng,
    ) -> impl FnMut(EffectContext) -> Boxed<Option<Disposition>> + Send + use<> {
        let world = self.clone();
        let (slow, read_nothing) = (intent.slow_lookup, intent.read_nothing.clone());
        move |context| {
            world.note_attempt(&context);
            let read_at = Instant::now();
            let found = world.provider.lookup(context.operation_id());
            if found.is_none() {
                read_nothing.notify_one();
            }
            if !slow {
                return Box::pin(std::future::ready(
                    found.map(|body| Disposition::Success(result(body))),
                ));
            }
            let mut answer_after = rng.between(SLOW_LOOKUP.0, SLOW_LOOKUP.1);
            if let Some(previous) = context.previous_outcome_unknown() {
                let past_deadline = previous.attempt_deadline.saturating_duration_since(read_at)
                    + rng.between(STRADDLE_PAST_DEADLINE.0, STRADDLE_PAST_DEADLINE.1);
                answer_after = answer_after.max(past_deadline.min(SLOW_LOOKUP_MAX));
            }
            let world = world.clone();
            Box::pin(async move {
                sleep(answer_after).await;
                let settles_at = context
                    .previous_outcome_unknown()
                    .map(|previous| previous.attempt_deadline);
                if found.is_none()
                    && settles_at.is_some_and(|settles_at| {
                        read_at < settles_at && Instant::now() >= settles_at
                    })
                {
                    add(&world.stats.lookups_straddling);
                    if world.provider.lookup(context.operation_id()).is_some() {
                        add(&world.stats.lookups_straddling_stale);
                    }
                }
                found.map(|body| Disposition::Success(result(body)))
            })
        }
    }

    /// One delivery of the intent: one `execute_once` call.
    async fn deliver(self: &Arc<Self>, intent: &Intent, rng: &mut Rng) -> Result<Execution, Error> {
        add(&self.stats.deliveries);
        let client = self.client(rng).clone();
        let operation = self.operation(intent, &intent.payload);
        let work = rng.between(Duration::ZERO, Duration::from_millis(30));
        let outcome = if intent.honour_key {
            client
                .execute_once(&operation, self.effect(true, work))
                .await
        } else {
            client
                .execute_once_with_lookup(
                    &operation,
                    self.lookup(intent, rng.fork()),
                    self.effect(false, work),
                )
                .await
        };
        self.note(intent, &outcome);
        outcome
    }

    /// Delivers until an outcome is acknowledged (as a caller that retries
    /// would), or leaves the intent to the reconciler.
    async fn deliver_until_settled(self: &Arc<Self>, intent: &Intent, rng: &mut Rng) {
        for _ in 0..8 {
            match self.deliver(intent, rng).await {
                Ok(_) | Err(Error::NeedsReconciliation { .. }) => return,
                Err(_) => {
                    sleep(rng.between(Duration::from_millis(100), Duration::from_millis(600))).await
                }
            }
        }
    }

    /// The key reused with another payload, after its first delivery was
    /// acknowledged: every answer but a conflict is a violation.
    async fn deliver_conflicting(self: &Arc<Self>, intent: &Intent, rng: &mut Rng) {
        add(&self.stats.conflicts_sent);
        let payload = format!("{{\"conflicting\":{}}}", rng.next_u64() >> 12);
        let operation = self.operation(intent, &payload);
        for _ in 0..8 {
            add(&self.stats.deliveries);
            let world = self.clone();
            let key = intent.key.clone();
            let outcome = self
                .client(rng)
                .execute_once(&operation, move |_context| {
                    world
                        .stats
                        .violation(format!("a conflicting reuse of key {key} ran its effect"));
                    Box::pin(std::future::ready(Disposition::Terminal(
                        proto::OperationError {
                            code: "CONFLICT_EXECUTED".into(),
                            ..Default::default()
                        },
                    ))) as Boxed<Disposition>
                })
                .await;
            match outcome {
                Err(Error::Conflict { .. }) => {
                    add(&self.stats.conflicts_rejected);
                    return;
                }
                Ok(_) => {
                    self.stats.violation(format!(
                        "a conflicting reuse of key {} was answered as the original",
                        intent.key
                    ));
                    return;
                }
                Err(_) => {
                    sleep(rng.between(Duration::from_millis(100), Duration::from_millis(600))).await
                }
            }
        }
    }

    /// A delivery whose effect outlasts the attempt deadline: the helper
    /// cancels it and reports UNKNOWN; `performed_first` says whether it had
    /// taken effect before it stalled. Past the deadline it would take effect
    /// (too late): it must have been dropped by then.
    async fn deliver_stalling(
        self: &Arc<Self>,
        intent: &Intent,
        performed_first: bool,
        rng: &mut Rng,
    ) {
        add(&self.stats.deliveries);
        add(&self.stats.stalled);
        let stall = self.settings.attempt_duration + Duration::from_secs(1);
        let world = self.clone();
        let effect = move |context: EffectContext| {
            world.note_attempt(&context);
            let world = world.clone();
            Box::pin(async move {
                if performed_first {
                    world.provider.perform(context.operation_id(), false);
                }
                sleep(stall).await;
                let body = world.provider.perform(context.operation_id(), false);
                Disposition::Success(result(body))
            }) as Boxed<Disposition>
        };
        let operation = self.operation(intent, &intent.payload);
        let lookup = self.lookup(intent, rng.fork());
        let outcome = self
            .client(rng)
            .execute_once_with_lookup(&operation, lookup, effect)
            .await;
        self.note(intent, &outcome);
    }

    /// A delivery whose owner stalls with its provider request in flight:
    /// the helper gives the attempt up a margin before its deadline and
    /// reports UNKNOWN, and the request lands at the worst moment the rules
    /// allow: right after a takeover's lookup has read the provider and found
    /// nothing, if that is still before the attempt deadline, else just
    /// before that deadline. Either way it lands in time: legitimately.
    async fn deliver_landing_late(self: &Arc<Self>, intent: &Intent, rng: &mut Rng) {
        add(&self.stats.deliveries);
        let world = self.clone();
        let read_nothing = intent.read_nothing.clone();
        let effect = move |context: EffectContext| {
            world.note_attempt(&context);
            let (world, read_nothing) = (world.clone(), read_nothing.clone());
            let reference = context.operation_id().to_owned();
            let last_moment = context
                .attempt_deadline()
                .checked_sub(LANDING_BEFORE_DEADLINE)
                .unwrap_or_else(Instant::now);
            Box::pin(async move {
                // The request outlives the owner that sent it.
                tokio::spawn(async move {
                    let after_a_negative_read = tokio::select! {
                        () = read_nothing.notified() => true,
                        () = sleep_until(last_moment) => false,
                    };
                    world.provider.perform(&reference, false);
                    add(if after_a_negative_read {
                        &world.stats.landed_after_a_negative_read
                    } else {
                        &world.stats.landed_just_before_the_deadline
                    });
                });
                std::future::pending::<Disposition>().await
            }) as Boxed<Disposition>
        };
        // The owner's client gives the attempt up a third of it before its
        // deadline (its lease the whole attempt, so that the margin counts
        // whole), and the caller's next delivery takes over while the
        // request is still in flight, with time to spare on a loaded machine.
        let operation = Operation {
            lease: self.settings.attempt_duration,
            safety_margin: self.settings.attempt_duration / 3,
            ..self.operation(intent, &intent.payload)
        };
        let lookup = self.lookup(intent, rng.fork());
        let outcome = self
            .client(rng)
            .execute_once_with_lookup(&operation, lookup, effect)
            .await;
        self.note(intent, &outcome);
    }

    /// A delivery whose caller dies (its task is aborted) at `point`.
    async fn deliver_crashing(self: &Arc<Self>, intent: &Intent, point: CrashPoint, rng: &mut Rng) {
        add(&self.stats.deliveries);
        let reached = Arc::new(Notify::new());
        let client = self.client(rng).clone();
        let operation = self.operation(intent, &intent.payload);
        let world = self.clone();
        let signal = reached.clone();
        let effect = move |context: EffectContext| {
            world.note_attempt(&context);
            let world = world.clone();
            let signal = signal.clone();
            Box::pin(async move {
                match point {
                    CrashPoint::BeforeEffect => {}
                    CrashPoint::AfterEffect => {
                        world.provider.perform(context.operation_id(), false);
                    }
                    CrashPoint::EffectInFlight => {
                        // Lands two thirds of the way to the attempt deadline
                        // (local clock, which runs ahead of the server's).
                        let now = Instant::now();
                        let room = context.attempt_deadline().saturating_duration_since(now);
                        let landing = now + room * 2 / 3;
                        let reference = context.operation_id().to_owned();
                        tokio::spawn(async move {
                            sleep_until(landing).await;
                            world.provider.perform(&reference, false);
                        });
                    }
                }
                signal.notify_one();
                std::future::pending::<Disposition>().await
            }) as Boxed<Disposition>
        };
        let lookup = self.lookup(intent, rng.fork());
        let mut task = tokio::spawn(async move {
            client
                .execute_once_with_lookup(&operation, lookup, effect)
                .await
        });
        tokio::select! {
            () = reached.notified() => {
                task.abort();
                let _ = (&mut task).await;
                add(match point {
                    CrashPoint::BeforeEffect => &self.stats.crashed_before,
                    CrashPoint::AfterEffect => &self.stats.crashed_after,
                    CrashPoint::EffectInFlight => &self.stats.crashed_in_flight,
                });
            }
            joined = &mut task => {
                // It never reached the effect (e.g. its Claim's answer was
                // lost for good): an ordinary failed delivery.
                if let Ok(outcome) = joined {
                    self.note(intent, &outcome);
                }
            }
        }
    }

    async fn run_intent(self: Arc<Self>, intent: Arc<Intent>, twist: Twist, mut rng: Rng) {
        match twist {
            Twist::Plain => self.deliver_until_settled(&intent, &mut rng).await,
            Twist::Concurrent(copies) => {
                let mut deliveries = JoinSet::new();
                for _ in 0..copies {
                    let (world, intent, mut rng) = (self.clone(), intent.clone(), rng.fork());
                    deliveries
                        .spawn(async move { world.deliver_until_settled(&intent, &mut rng).await });
                }
                while deliveries.join_next().await.is_some() {}
            }
            Twist::Later => {
                self.deliver_until_settled(&intent, &mut rng).await;
                sleep(rng.between(Duration::from_millis(100), Duration::from_secs(2))).await;
                self.deliver_until_settled(&intent, &mut rng).await;
            }
            Twist::Conflict => {
                self.deliver_until_settled(&intent, &mut rng).await;
                let acknowledged = !locked(&intent.acknowledged).is_empty();
                if acknowledged {
                    self.deliver_conflicting(&intent, &mut rng).await;
                }
            }
            Twist::Stall(performed_first) => {
                self.deliver_stalling(&intent, performed_first, &mut rng)
                    .await;
                self.deliver_until_settled(&intent, &mut rng).await;
            }
            Twist::LateLanding => {
                self.deliver_landing_late(&intent, &mut rng).await;
                self.deliver_until_settled(&intent, &mut rng).await;
            }
            Twist::Crash(point) => {
                self.deliver_crashing(&intent, point, &mut rng).await;
                // Some callers never come back: the reconciler finds those.
                if rng.chance(0.3) {
                    return;
                }
                // Re-delivered later: sometimes while the dead owner's lease
                // still runs, mostly after it.
                let lease = self.settings.lease;
                sleep(rng.between(lease / 2, lease * 2)).await;
                self.deliver_until_settled(&intent, &mut rng).await;
            }
        }
    }

    async fn list_unresolved(&self) -> Result<Vec<proto::Operation>, Error> {
        let client = &self.clients[0];
        let mut operations = Vec::new();
        let mut page_token = String::new();
        loop {
            let page = client
                .list_unresolved(proto::ListUnresolvedRequest {
                    operation: String::new(),
                    page_size: 500,
                    page_token,
                })
                .await?;
            operations.extend(page.operations);
            if page.next_page_token.is_empty() {
                return Ok(operations);
            }
            page_token = page.next_page_token;
        }
    }

    /// The reconciler: drains ListUnresolved with the provider's evidence
    /// (the effect found: succeeded with its result; not found: not applied,
    /// which the server allows only once the attempt deadline has passed).
    async fn reconcile_all(&self) -> Result<usize, Error> {
        // Every dead owner's lease has run out by then.
        sleep(self.settings.lease + Duration::from_millis(300)).await;
        let give_up = Instant::now() + self.settings.attempt_duration * 4 + Duration::from_secs(10);
        loop {
            let unresolved = self.list_unresolved().await?;
            if unresolved.is_empty() || Instant::now() > give_up {
                return Ok(unresolved.len());
            }
            for operation in unresolved {
                let resolution = match self.provider.lookup(&operation.operation_id) {
                    Some(body) => Resolution::Succeeded(result(body)),
                    None => Resolution::NotApplied(proto::NotApplied {}),
                };
                let not_applied = matches!(resolution, Resolution::NotApplied(_));
                let reconciled = self.clients[0]
                    .reconcile(proto::ReconcileRequest {
                        operation_id: operation.operation_id.clone(),
                        expected_fence: operation.fence,
                        resolution: Some(resolution),
                    })
                    .await;
                match reconciled {
                    Ok(_) if not_applied => add(&self.stats.reconciler_not_applied),
                    Ok(_) => add(&self.stats.reconciler_succeeded),
                    // Still running, or moved on meanwhile: the next round.
                    Err(Error::FailedPrecondition { .. } | Error::LeaseLost { .. }) => {}
                    Err(error) => return Err(error),
                }
            }
            sleep(Duration::from_millis(300)).await;
        }
    }

    /// `job` for every intent, at most `concurrency` at a time, each with a
    /// random source of its own; the answers, in the order they came. A job
    /// that panics is a violation.
    async fn each_intent<T, Job, Done>(
        self: &Arc<Self>,
        intents: &[Arc<Intent>],
        rng: &mut Rng,
        job: Job,
    ) -> Vec<T>
    where
        Job: Fn(Arc<World>, Arc<Intent>, Rng) -> Done,
        Done: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let mut running = JoinSet::new();
        let permits = Arc::new(Semaphore::new(self.settings.concurrency));
        for intent in intents {
            let permits = permits.clone();
            let done = job(self.clone(), intent.clone(), rng.fork());
            running.spawn(async move {
                let _permit = permits.acquire_owned().await;
                done.await
            });
        }
        let mut answers = Vec::with_capacity(intents.len());
        while let Some(joined) = running.join_next().await {
            match joined {
                Ok(answer) => answers.push(answer),
                Err(error) => self.stats.violation(format!("a worker panicked: {error}")),
            }
        }
        answers
    }

    /// After the reconciler: each intent delivered once more (a caller that
    /// comes back). Returns those still not SUCCEEDED.
    async fn settle(self: &Arc<Self>, intents: &[Arc<Intent>], rng: &mut Rng) -> Vec<Arc<Intent>> {
        let answers = self
            .each_intent(intents, rng, |world, intent, mut rng| async move {
                world.deliver_until_settled(&intent, &mut rng).await;
                let operation_id = locked(&intent.operation_id).clone();
                let settled = match operation_id {
                    Some(operation_id) => world.clients[0]
                        .lookup_operation(&operation_id)
                        .await
                        .is_ok_and(|stored| stored.state == OperationState::Succeeded as i32),
                    None => false,
                };
                (!settled).then_some(intent)
            })
            .await;
        answers.into_iter().flatten().collect()
    }

    /// The intent's operation as stored, with its whole history.
    async fn stored(
        &self,
        intent: &Intent,
    ) -> Option<(proto::Operation, Vec<proto::HistoryEntry>)> {
        let operation_id = locked(&intent.operation_id).clone()?;
        let mut history = Vec::new();
        let mut page_token = String::new();
        loop {
            let found = self.clients[0]
                .lookup(proto::LookupRequest {
                    target: Some(proto::lookup_request::Target::OperationId(
                        operation_id.clone(),
                    )),
                    include_history: true,
                    history_page_size: 1000,
                    history_page_token: page_token,
                })
                .await
                .ok()?;
            history.extend(found.history);
            if found.next_history_page_token.is_empty() {
                return Some((found.operation?, history));
            }
            page_token = found.next_history_page_token;
        }
    }

    /// [`World::verify`] for every intent, summed: (settled, lost, declined).
    async fn verify_all(
        self: &Arc<Self>,
        intents: &[Arc<Intent>],
        rng: &mut Rng,
    ) -> (u64, u64, u64) {
        let answers = self
            .each_intent(intents, rng, |world, intent, _rng| async move {
                world.verify(&intent).await
            })
            .await;
        answers
            .into_iter()
            .fold((0, 0, 0), |(settled, lost, declined), answer| {
                (
                    settled + u64::from(answer.0),
                    lost + answer.1,
                    declined + answer.2,
                )
            })
    }

    /// The intent's stored state compared with what was acknowledged and with
    /// the provider. Returns (settled, lost acknowledged results, attempts
    /// declined before their effect).
    async fn verify(&self, intent: &Intent) -> (bool, u64, u64) {
        let acknowledged = locked(&intent.acknowledged).clone();
        let Some(operation_id) = locked(&intent.operation_id).clone() else {
            self.stats
                .violation(format!("key {} never got an operation", intent.key));
            return (false, acknowledged.len() as u64, 0);
        };
        let Some((stored, history)) = self.stored(intent).await else {
            self.stats
                .violation(format!("lookup of {operation_id} failed"));
            return (false, acknowledged.len() as u64, 0);
        };
        let declined = history
            .iter()
            .filter(|entry| entry.detail == "not_started")
            .count() as u64;
        let body = stored.result.map(|stored| stored.body);
        let settled = stored.state == OperationState::Succeeded as i32 && body.is_some();
        let lost = acknowledged
            .iter()
            .filter(|acknowledged| body.as_ref() != Some(*acknowledged))
            .count() as u64;
        if settled && body != self.provider.lookup(&operation_id) {
            self.stats.violation(format!(
                "{operation_id}: the stored result is not the provider's first effect"
            ));
        }
        if !settled {
            self.stats.violation(format!(
                "{operation_id} (key {}) is not settled: state {}, history {:?}",
                intent.key,
                stored.state,
                history
                    .iter()
                    .map(|entry| format!("{} {}", entry.event, entry.detail))
                    .collect::<Vec<_>>()
            ));
        }
        (settled, lost, declined)
    }
}

/// The processes of one campaign, and the faults done to them.
struct Processes {
    replicas: Vec<Replica>,
    postgres: Option<Arc<Postgres>>,
    database_proxy: Option<Arc<Proxy>>,
}

async fn blocking<T: Send + 'static>(
    postgres: &Arc<Postgres>,
    action: impl FnOnce(&Postgres) -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let postgres = postgres.clone();
    tokio::task::spawn_blocking(move || action(&postgres))
        .await
        .map_err(|error| format!("a blocking task failed: {error}"))?
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillReplica,
    RestartDatabase,
    KillDatabase,
    FreezeDatabase,
    /// A window during which a fraction of the statements on `operations`
    /// fail with a transient SQLSTATE (the trigger's switch on, then off).
    FailStatements,
}

/// The fault schedule: one fault at a time, a random pause apart, cycling
/// through the plan with random targets and durations; until `stop`.
async fn inject_faults(
    mut processes: Processes,
    every: Duration,
    statement_failure_rate: f64,
    mut rng: Rng,
    mut stop: watch::Receiver<bool>,
) -> (Processes, FaultCounts, Result<(), String>) {
    let plan: &[Fault] = if processes.postgres.is_some() {
        &[
            Fault::KillReplica,
            Fault::FailStatements,
            Fault::RestartDatabase,
            Fault::KillReplica,
            Fault::FreezeDatabase,
            Fault::FailStatements,
            Fault::KillReplica,
            Fault::KillDatabase,
        ]
    } else {
        &[Fault::KillReplica]
    };
    let mut counts = FaultCounts::default();
    let mut step = 0;
    let outcome = loop {
        let pause = rng.between(every / 2, every * 3 / 2);
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break Ok(()),
            () = sleep(pause) => {}
        }
        let fault = plan[step % plan.len()];
        step += 1;
        let done = match (fault, &processes.postgres, &processes.database_proxy) {
            (Fault::KillReplica, _, _) => {
                let index = rng.below(processes.replicas.len() as u64) as usize;
                let replica = &mut processes.replicas[index];
                replica.kill();
                counts.replica_kills += 1;
                sleep(rng.between(Duration::from_millis(200), Duration::from_millis(1500))).await;
                replica.start().await
            }
            (Fault::RestartDatabase, Some(postgres), _) => {
                counts.database_restarts += 1;
                blocking(postgres, Postgres::restart).await
            }
            (Fault::KillDatabase, Some(postgres), _) => {
                counts.database_kills += 1;
                match blocking(postgres, Postgres::kill).await {
                    Ok(()) => {
                        sleep(rng.between(Duration::from_millis(100), Duration::from_millis(800)))
                            .await;
                        blocking(postgres, Postgres::start).await
                    }
                    Err(error) => Err(error),
                }
            }
            (Fault::FreezeDatabase, _, Some(proxy)) => {
                counts.database_freezes += 1;
                proxy.set_frozen(true);
                sleep(rng.between(Duration::from_millis(500), Duration::from_millis(2500))).await;
                proxy.set_frozen(false);
                Ok(())
            }
            (Fault::FailStatements, Some(postgres), _) => {
                counts.statement_failure_windows += 1;
                let window = rng.between(Duration::from_millis(1000), Duration::from_millis(4000));
                match blocking(postgres, move |postgres| {
                    database::set_failure_rate(postgres, statement_failure_rate)
                })
                .await
                {
                    Ok(()) => {
                        sleep(window).await;
                        blocking(postgres, |postgres| {
                            database::set_failure_rate(postgres, 0.0)
                        })
                        .await
                    }
                    Err(error) => Err(error),
                }
            }
            _ => Ok(()),
        };
        if let Err(error) = done {
            break Err(error);
        }
    };
    (processes, counts, outcome)
}

/// Terminates one or two random idemd backends at random pauses, alongside
/// the schedule, until `stop`; how many it terminated. A round that finds
/// the database down (restarting) terminates nothing.
async fn terminate_backends_at_random(
    postgres: Arc<Postgres>,
    every: Duration,
    mut rng: Rng,
    mut stop: watch::Receiver<bool>,
) -> u64 {
    let mut terminated = 0;
    loop {
        let pause = rng.between(every / 2, every * 3 / 2);
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => return terminated,
            () = sleep(pause) => {}
        }
        let count = 1 + rng.below(2);
        if let Ok(ended) = blocking(&postgres, move |postgres| {
            database::terminate_backends(postgres, count)
        })
        .await
        {
            terminated += ended;
        }
    }
}

/// Runs one campaign in `directory` (created; the caller removes it).
pub(crate) async fn run(
    backend: Backend,
    settings: Settings,
    directory: &Path,
) -> Result<Report, String> {
    let started = Instant::now();
    let mut rng = Rng::seeded(settings.seed);
    std::fs::create_dir_all(directory).map_err(|error| format!("mkdir: {error}"))?;

    let (postgres, database_proxy, direct, for_replicas, replica_count) = match backend {
        Backend::Postgres => {
            let pg_directory = directory.join("postgres");
            let postgres = tokio::task::spawn_blocking(move || Postgres::create(&pg_directory))
                .await
                .map_err(|error| format!("initdb task: {error}"))??;
            let proxy = Proxy::start(postgres.addr(), Protocol::Raw, rng.next_u64())
                .await
                .map_err(|error| format!("database proxy: {error}"))?;
            let direct = StoreConfig::Postgres {
                url: postgres.url(),
            };
            let for_replicas = StoreConfig::Postgres {
                url: format!("postgres://postgres@{}/postgres", proxy.addr),
            };
            (
                Some(Arc::new(postgres)),
                Some(Arc::new(proxy)),
                direct,
                for_replicas,
                2,
            )
        }
        Backend::Embedded => {
            let store = StoreConfig::Embedded {
                data_dir: directory.join("data"),
            };
            (None, None, store.clone(), store, 1)
        }
    };
    let outcome = campaign(
        backend,
        &settings,
        directory,
        &mut rng,
        Processes {
            replicas: Vec::new(),
            postgres: postgres.clone(),
            database_proxy,
        },
        &direct,
        &for_replicas,
        replica_count,
    )
    .await;
    // The last handle: dropping it stops the cluster (off the runtime's
    // threads, as pg_ctl blocks).
    if let Some(postgres) = postgres {
        let _ = tokio::task::spawn_blocking(move || drop(postgres)).await;
    }
    let mut report = outcome?;
    report.elapsed = started.elapsed();
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
async fn campaign(
    backend: Backend,
    settings: &Settings,
    directory: &Path,
    rng: &mut Rng,
    mut processes: Processes,
    direct: &StoreConfig,
    for_replicas: &StoreConfig,
    replica_count: usize,
) -> Result<Report, String> {
    let store = direct.clone();
    let token = tokio::task::spawn_blocking(move || prepare_store(&store))
        .await
        .map_err(|error| format!("prepare task: {error}"))??;
    // On idemd's migrated schema, before any replica runs.
    if let Some(postgres) = &processes.postgres {
        blocking(postgres, database::install).await?;
    }
    let mut proxies = Vec::new();
    let mut duplicators = Vec::new();
    let mut clients = Vec::new();
    for number in 0..replica_count {
        let mut replica = Replica::new(
            &format!("replica-{number}"),
            for_replicas.clone(),
            &token,
            directory,
        )?;
        replica.start().await?;
        let proxy = Proxy::start(replica.addr(), Protocol::Http2, rng.next_u64())
            .await
            .map_err(|error| format!("proxy: {error}"))?;
        proxy.set_rates(settings.rates);
        // The clients reach the frame proxy through the duplicating stage,
        // so that the copies it forges meet the frame proxy's faults too.
        let duplicator = Duplicator::start(proxy.addr, rng.next_u64())
            .await
            .map_err(|error| format!("duplicator: {error}"))?;
        duplicator.set_rates(settings.rates);
        // Two connections per replica: a cut connection takes every call on
        // it down, as it would in production.
        for _ in 0..2 {
            let client = Client::connect(&duplicator.addr.to_string(), &token)
                .await
                .map_err(|error| format!("connect: {error:?}"))?
                .with_config(ClientConfig {
                    retry: RetryPolicy {
                        max_sends: 200,
                        initial_backoff: Duration::from_millis(20),
                        max_backoff: Duration::from_millis(300),
                        total_deadline: Duration::from_secs(20),
                    },
                    call_timeout: Duration::from_secs(2),
                })
                .with_jitter_seed(rng.next_u64());
            clients.push(client);
        }
        proxies.push(proxy);
        duplicators.push(duplicator);
        processes.replicas.push(replica);
    }
    let world = Arc::new(World {
        settings: settings.clone(),
        clients,
        provider: Provider::default(),
        stats: Stats::default(),
    });

    let (stop, stopped) = watch::channel(false);
    let postgres = processes.postgres.clone();
    let terminator = postgres.clone().map(|postgres| {
        tokio::spawn(terminate_backends_at_random(
            postgres,
            settings.terminate_every,
            rng.fork(),
            stopped.clone(),
        ))
    });
    let faults = tokio::spawn(inject_faults(
        processes,
        settings.fault_every,
        settings.statement_failure_rate,
        rng.fork(),
        stopped,
    ));

    let run_tag = rng.next_u64();
    let permits = Arc::new(Semaphore::new(settings.concurrency));
    let mut intents = Vec::new();
    let mut workers = JoinSet::new();
    for index in 0..settings.operations {
        let twist = pick_twist(rng);
        let honour_key = matches!(twist, Twist::Plain | Twist::Later) && rng.chance(0.3);
        let intent = Arc::new(Intent {
            key: format!("{run_tag:016x}-{index}"),
            payload: format!(
                "{{\"amount\":{},\"currency\":\"EUR\",\"to\":\"{:x}\"}}",
                rng.below(1_000_000),
                rng.next_u64()
            ),
            honour_key,
            slow_lookup: twist == Twist::LateLanding,
            read_nothing: Arc::new(Notify::new()),
            operation_id: Mutex::new(None),
            acknowledged: Mutex::new(Vec::new()),
        });
        intents.push(intent.clone());
        let (world, permits, worker_rng) = (world.clone(), permits.clone(), rng.fork());
        workers.spawn(async move {
            let _permit = permits.acquire_owned().await;
            world.run_intent(intent, twist, worker_rng).await;
        });
    }
    while let Some(joined) = workers.join_next().await {
        if let Err(error) = joined {
            world.stats.violation(format!("a worker panicked: {error}"));
        }
    }

    stop.send_replace(true);
    let (processes, fault_counts, injected) = faults
        .await
        .map_err(|error| format!("the fault task failed: {error}"))?;
    injected?;
    let backends_terminated = match terminator {
        Some(terminator) => terminator
            .await
            .map_err(|error| format!("the terminator failed: {error}"))?,
        None => 0,
    };
    // The schedule ends every window it opens; switched off once more, so
    // that the reconciler and the settling pass certainly run without.
    let failed_statements = match &postgres {
        Some(postgres) => {
            blocking(postgres, |postgres| {
                database::set_failure_rate(postgres, 0.0)
            })
            .await?;
            blocking(postgres, database::injected_failures).await?
        }
        None => Default::default(),
    };
    for proxy in &proxies {
        proxy.set_rates(FaultRates::default());
    }
    for duplicator in &duplicators {
        duplicator.set_rates(FaultRates::default());
    }

    // The reconciler drains what is unresolved, then every caller comes back
    // once; as a reconciler that keeps running would, it drains again what
    // those deliveries left unresolved, and their callers come back, for at
    // most three rounds.
    let reconciler_started = Instant::now();
    let mut unresolved = None;
    let mut unsettled = intents.clone();
    let mut rounds = 0u64;
    let mut settled_in_later_rounds = 0u64;
    while !unsettled.is_empty() && rounds < SETTLING_ROUNDS {
        rounds += 1;
        let left = world
            .reconcile_all()
            .await
            .map_err(|error| format!("the reconciler failed: {error:?}"))?
            as u64;
        unresolved.get_or_insert(left);
        let before = unsettled.len() as u64;
        unsettled = world.settle(&unsettled, rng).await;
        if rounds > 1 {
            settled_in_later_rounds += before - unsettled.len() as u64;
        }
    }
    let unresolved = unresolved.unwrap_or(0);
    let reconciliation = reconciler_started.elapsed();
    let (settled, lost, declined) = world.verify_all(&intents, rng).await;
    let unresolved_at_the_end = world
        .list_unresolved()
        .await
        .map_err(|error| format!("ListUnresolved failed: {error:?}"))?
        .len() as u64;
    drop(processes);
    if let Some(postgres) = &postgres {
        let at_the_end = blocking(postgres, database::injected_failures).await?;
        if at_the_end != failed_statements {
            world.stats.violation(format!(
                "statements failed after the faults were switched off: {failed_statements:?} \
                 before the reconciler, {at_the_end:?} at the end"
            ));
        }
    }
    let failed = |state: &str| failed_statements.get(state).copied().unwrap_or(0);

    let stats = &world.stats;
    let attempts = locked(&stats.attempts).len() as u64;
    let takeovers = locked(&stats.takeovers).len() as u64;
    let duplicates = world.provider.duplicates();
    let operations = settings.operations as u64;
    let sum = |counter: fn(&ProxyCounters) -> &AtomicU64| {
        proxies
            .iter()
            .map(|proxy| ProxyCounters::get(counter(proxy.counters())))
            .sum::<u64>()
    };
    let duplicated = |counter: fn(&DuplicatorCounters) -> &AtomicU64| {
        duplicators
            .iter()
            .map(|duplicator| counter(duplicator.counters()).load(Ordering::SeqCst))
            .sum::<u64>()
    };
    let rows = vec![
        ("logical operations", operations),
        ("deliveries", get(&stats.deliveries)),
        ("attempts", attempts),
        ("effects", world.provider.performed()),
        ("duplicate effects", duplicates),
        (
            "repeats absorbed by the provider's idempotency key",
            world.provider.absorbed_by_key(),
        ),
        ("acknowledged results", get(&stats.acknowledged)),
        ("  executed", get(&stats.executed)),
        ("  replayed", get(&stats.replayed)),
        (
            "  reconciled by lookup on takeover",
            get(&stats.reconciled_by_lookup),
        ),
        (
            "  superseded (another owner stored it)",
            get(&stats.superseded),
        ),
        ("lost acknowledged results", lost),
        ("conflicting reuses", get(&stats.conflicts_sent)),
        ("conflicts rejected", get(&stats.conflicts_rejected)),
        ("takeovers", takeovers),
        (
            "attempts declined before their effect (Fail NOT_STARTED)",
            declined,
        ),
        (
            "stale writes refused (LEASE_LOST)",
            get(&stats.superseded) + get(&stats.lease_lost),
        ),
        (
            "outcome unknown (effect past its deadline, cancelled)",
            get(&stats.outcome_unknown),
        ),
        ("stalling effects", get(&stats.stalled)),
        (
            "callers crashed before the effect",
            get(&stats.crashed_before),
        ),
        (
            "callers crashed after the effect",
            get(&stats.crashed_after),
        ),
        (
            "callers crashed during the effect (it landed later)",
            get(&stats.crashed_in_flight),
        ),
        (
            "stalled owners whose request landed just before the deadline",
            get(&stats.landed_after_a_negative_read) + get(&stats.landed_just_before_the_deadline),
        ),
        (
            "  right after a takeover's lookup had read nothing",
            get(&stats.landed_after_a_negative_read),
        ),
        (
            "slow lookups that read before the earlier deadline and answered after it, not found",
            get(&stats.lookups_straddling),
        ),
        (
            "  of those, the earlier effect had landed by their answer",
            get(&stats.lookups_straddling_stale),
        ),
        (
            "deliveries ended by the caller's deadline",
            get(&stats.deadline_passed),
        ),
        (
            "deliveries ended NeedsReconciliation",
            get(&stats.needs_reconciliation),
        ),
        (
            "deliveries ended by other errors (transport, unavailable)",
            get(&stats.other_errors),
        ),
        (
            "reconciler: succeeded from provider evidence",
            get(&stats.reconciler_succeeded),
        ),
        (
            "reconciler: not applied",
            get(&stats.reconciler_not_applied),
        ),
        ("unresolved after reconciliation", unresolved),
        ("unresolved at the end", unresolved_at_the_end),
        ("intents settled", settled),
        ("settling rounds (reconcile, deliver again)", rounds),
        (
            "  intents settled only after the first round",
            settled_in_later_rounds,
        ),
        (
            "replica SIGKILLs (restarted after a pause)",
            fault_counts.replica_kills,
        ),
        ("database restarts", fault_counts.database_restarts),
        (
            "database SIGKILLs (postmaster)",
            fault_counts.database_kills,
        ),
        ("database connections frozen", fault_counts.database_freezes),
        (
            "database: windows of failing statements (trigger on)",
            fault_counts.statement_failure_windows,
        ),
        (
            "database: statements failed with 40001 serialization_failure",
            failed("40001"),
        ),
        (
            "database: statements failed with 40P01 deadlock_detected",
            failed("40P01"),
        ),
        (
            "database: statements failed with 57014 query_canceled",
            failed("57014"),
        ),
        (
            "database: statements failed with 55P03 lock_not_available",
            failed("55P03"),
        ),
        (
            "database: idemd backends terminated (pg_terminate_backend)",
            backends_terminated,
        ),
        (
            "proxy: requests from the clients",
            duplicated(|c| &c.requests),
        ),
        (
            "proxy: requests forwarded to a replica (copies included)",
            sum(|c| &c.requests),
        ),
        (
            "proxy: replies lost after the server answered",
            sum(|c| &c.replies_lost),
        ),
        ("proxy: replies delayed", sum(|c| &c.replies_delayed)),
        (
            "proxy: requests reset mid-stream",
            sum(|c| &c.requests_reset),
        ),
        (
            "proxy: requests duplicated at once (in flight together)",
            duplicated(|c| &c.duplicated_at_once),
        ),
        (
            "proxy: requests duplicated after the answer",
            duplicated(|c| &c.duplicated_after_answer),
        ),
        (
            "proxy: duplicated requests answered with the copy's response",
            duplicated(|c| &c.answered_by_copy),
        ),
        (
            "reconciling and settling took (ms)",
            reconciliation.as_millis() as u64,
        ),
    ];
    let checks = vec![
        ("zero duplicate effects", duplicates == 0),
        ("zero lost acknowledged results", lost == 0),
        (
            "every conflict rejected",
            get(&stats.conflicts_rejected) == get(&stats.conflicts_sent),
        ),
        (
            "zero unresolved after reconciliation",
            unresolved == 0 && unresolved_at_the_end == 0,
        ),
        ("every intent settled", settled == operations),
    ];
    let violations = locked(&stats.violations).clone();
    let title = match backend {
        Backend::Postgres => "postgres, 2 replicas",
        Backend::Embedded => "embedded, 1 replica",
    };
    Ok(Report {
        title: title.into(),
        rows,
        checks,
        violations,
        elapsed: Duration::ZERO,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_twist_is_drawn_at_its_share() {
        let mut rng = Rng::seeded(17);
        let draws = 100_000;
        let mut late_landings = 0;
        let mut plain = 0;
        for _ in 0..draws {
            match pick_twist(&mut rng) {
                Twist::LateLanding => late_landings += 1,
                Twist::Plain => plain += 1,
                _ => {}
            }
        }
        let share = |count: u64| count as f64 / draws as f64;
        assert!(
            (share(late_landings) - 0.06).abs() < 0.005,
            "{late_landings}"
        );
        assert!((share(plain) - 0.34).abs() < 0.01, "{plain}");
    }
}
