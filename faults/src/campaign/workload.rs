//! The workload: one logical operation (an intent) per worker, each with its
//! twist (delivered plainly, at once, later, conflicting, stalling, crashing,
//! landing late), delivered through the Rust client's execute-once helper.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use idemd_client::proto;
use idemd_client::{Disposition, EffectContext, Error, Operation};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, sleep_until};

use serde_json::{Value, json};

use super::external::Reply;
use super::stats::add;
use super::world::{Boxed, Intent, World, result};
use crate::lock::locked;
use crate::rng::Rng;

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

/// The late-landing twist's attempts: long enough for the client's margin (a
/// tenth of the attempt, at most 1 s) to be the whole second a takeover has
/// to start its lookup before the stalled owner's deadline.
const LATE_LANDING_ATTEMPT: Duration = Duration::from_secs(10);

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

/// Every intent of the campaign, drawn from `rng` and run by a worker of
/// its own, at most `concurrency` at a time; returns once every worker has
/// ended (a worker that panics is a violation).
pub(super) async fn run(world: &Arc<World>, rng: &mut Rng) -> Vec<Arc<Intent>> {
    let settings = &world.settings;
    let run_tag = rng.next_u64();
    let permits = Arc::new(Semaphore::new(settings.concurrency));
    let mut intents = Vec::new();
    let mut workers = JoinSet::new();
    for index in 0..settings.operations {
        let mut twist = pick_twist(rng);
        // External workers do not run the twists that kill the caller
        // mid-delivery or need a slow lookup in process: those intents are
        // delivered plainly (faults/README.md, "Other clients").
        if world.worker.is_some() && matches!(twist, Twist::Crash(_) | Twist::LateLanding) {
            twist = Twist::Plain;
        }
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
    intents
}

// The deliveries: one `execute_once` call each, in the way its twist asks.
impl World {
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

    /// What an external worker is asked for one delivery of the intent
    /// (faults/workers/README.md): with `payload`, on a random connection.
    fn request(&self, intent: &Intent, payload: &str, rng: &mut Rng) -> Value {
        let work = rng.between(Duration::ZERO, Duration::from_millis(30));
        json!({
            "key": intent.key,
            "payload": payload,
            "honour_key": intent.honour_key,
            "client": rng.below(self.connections()),
            "lease_ms": self.settings.lease.as_millis() as u64,
            "attempt_ms": self.settings.attempt_duration.as_millis() as u64,
            "max_attempts": 20,
            "deadline_ms": 30_000,
            "work_ms": work.as_millis() as u64,
        })
    }

    /// One delivery of the intent: one `execute_once` call, in process or by
    /// the external worker. True once it needs no other delivery (an answer,
    /// or NeedsReconciliation).
    async fn deliver(self: &Arc<Self>, intent: &Intent, rng: &mut Rng) -> bool {
        add(&self.stats.deliveries);
        if let Some(worker) = &self.worker {
            let reply = worker
                .deliver(self.request(intent, &intent.payload, rng))
                .await;
            self.note_reply(intent, &reply);
            return match &reply {
                Reply::Succeeded { .. } | Reply::Failed { .. } => true,
                Reply::Error { kind, .. } => kind == "needs_reconciliation",
            };
        }
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
        matches!(outcome, Ok(_) | Err(Error::NeedsReconciliation { .. }))
    }

    /// Delivers until an outcome is acknowledged (as a caller that retries
    /// would), or leaves the intent to the reconciler.
    pub(super) async fn deliver_until_settled(self: &Arc<Self>, intent: &Intent, rng: &mut Rng) {
        for _ in 0..8 {
            if self.deliver(intent, rng).await {
                return;
            }
            sleep(rng.between(Duration::from_millis(100), Duration::from_millis(600))).await
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
            if let Some(worker) = &self.worker {
                let mut request = self.request(intent, &payload, rng);
                request["conflict"] = json!(true);
                match worker.deliver(request).await {
                    Reply::Error { kind, .. } if kind == "conflict" => {
                        add(&self.stats.conflicts_rejected);
                        return;
                    }
                    Reply::Succeeded { .. } | Reply::Failed { .. } => {
                        self.stats.violation(format!(
                            "a conflicting reuse of key {} was answered as the original",
                            intent.key
                        ));
                        return;
                    }
                    Reply::Error { .. } => {}
                }
                sleep(rng.between(Duration::from_millis(100), Duration::from_millis(600))).await;
                continue;
            }
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
        if let Some(worker) = &self.worker {
            let mut request = self.request(intent, &intent.payload, rng);
            request["stall"] = json!({
                "performed_first": performed_first,
                "ms": stall.as_millis() as u64,
            });
            let reply = worker.deliver(request).await;
            self.note_reply(intent, &reply);
            return;
        }
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
        // The owner's client gives the attempt up its margin before its
        // deadline (a tenth of the attempt, at most 1 s: this intent's
        // attempts are 10 s, its lease the whole attempt, so that the margin
        // counts whole), and the caller's next delivery takes over while the
        // request is still in flight, with time to spare on a loaded machine.
        let attempt = self.settings.attempt_duration.max(LATE_LANDING_ATTEMPT);
        let operation = Operation {
            lease: attempt,
            attempt_duration: Some(attempt),
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
                add(&self.stats.concurrent);
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
