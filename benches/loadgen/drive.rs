//! One client's loop over its workload, and how each answer is counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tonic_health::pb::HealthCheckRequest;

use crate::args::{Limits, Workload};
use crate::client::{ClaimAnswer, Client, fingerprint_of, other_fingerprint_of, replay_key};
use crate::tally::Tally;
use crate::{BoxError, RESULT_BODY};

/// How long the hot workload keeps every client on one scope.
pub(crate) const HOT_KEY_PERIOD_MS: u128 = 10;
/// The mixed workload, per block of ten requests of one client: 70% new
/// operations, 20% identical retries, 10% the same key with another payload.
/// It starts with a new operation, so every retry and conflict has a target.
pub(crate) const MIXED_PATTERN: [MixedRequest; 10] = [
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

/// splitmix64: a deterministic, dependency-free choice of replay keys and
/// retry targets.
pub(crate) struct Random(u64);

impl Random {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 { 0 } else { self.next() % bound }
    }
}

#[derive(Clone, Copy)]
pub(crate) enum MixedRequest {
    New,
    IdenticalRetry,
    OtherPayload,
}

/// When a client stops starting operations.
#[derive(Clone)]
pub(crate) struct Stop {
    pub(crate) deadline: Option<Instant>,
    pub(crate) budget: Option<Arc<AtomicU64>>,
}

impl Stop {
    pub(crate) fn new(limits: &Limits, started: Instant) -> Self {
        Self {
            deadline: (limits.duration > 0.0)
                .then(|| started + Duration::from_secs_f64(limits.duration)),
            budget: limits
                .operations
                .map(|operations| Arc::new(AtomicU64::new(operations))),
        }
    }

    /// Takes one operation from the budget; false once time or budget is up.
    pub(crate) fn another(&self) -> bool {
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

pub(crate) struct ClientPlan {
    pub(crate) index: usize,
    pub(crate) workload: Workload,
    pub(crate) run_id: Arc<str>,
    pub(crate) replay_keys: u64,
    pub(crate) replay_prefix: Arc<str>,
    /// Mixed only: exactly this many requests.
    pub(crate) mixed_requests: u64,
    pub(crate) seed: u64,
}

pub(crate) async fn drive_client(
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
        Workload::Mixed => drive_mixed(&mut client, &mut tally, &plan, &mut random).await?,
        Workload::Lookup => {
            while stop.another() {
                let key = replay_key(&plan.replay_prefix, 1 + random.below(plan.replay_keys));
                let started = Instant::now();
                let stored_result = client.lookup(&mut tally, &key).await;
                tally.record_latency(started);
                if !stored_result {
                    tally.wrong_replays += 1;
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

/// The mixed workload of one client: `plan.mixed_requests` requests in the
/// order of [`MIXED_PATTERN`], retries and conflicts aimed at operations
/// this client created.
async fn drive_mixed(
    client: &mut Client,
    tally: &mut Tally,
    plan: &ClientPlan,
    random: &mut Random,
) -> Result<(), BoxError> {
    let mut created: Vec<String> = Vec::new();
    for position in 0..plan.mixed_requests {
        let request = MIXED_PATTERN[(position % MIXED_PATTERN.len() as u64) as usize];
        let started = Instant::now();
        match request {
            MixedRequest::New => {
                let key = format!("{}-c{}-mixed-{position}", plan.run_id, plan.index);
                let answer = client
                    .claim_and_execute(tally, &key, fingerprint_of(&key))
                    .await;
                tally.record_latency(started);
                settle_new(tally, &answer);
                created.push(key);
            }
            MixedRequest::IdenticalRetry => {
                let target = random.below(created.len() as u64) as usize;
                let key = created.get(target).ok_or("a retry before any operation")?;
                let answer = client.claim(tally, key, fingerprint_of(key)).await;
                tally.record_latency(started);
                settle_replay(client, tally, key, answer).await;
            }
            MixedRequest::OtherPayload => {
                tally.expected_conflicts += 1;
                let target = random.below(created.len() as u64) as usize;
                let key = created
                    .get(target)
                    .ok_or("a conflict before any operation")?;
                let answer = client.claim(tally, key, other_fingerprint_of(key)).await;
                tally.record_latency(started);
                match answer {
                    ClaimAnswer::Conflict => tally.conflicts += 1,
                    ClaimAnswer::Execute {
                        operation_id,
                        fence,
                    } => {
                        // Refused by nobody: a second execution of this key.
                        client.complete(tally, key, operation_id, fence).await;
                        tally.unsettled += 1;
                    }
                    _ => tally.unsettled += 1,
                }
            }
        }
    }
    Ok(())
}

/// A new operation must have been executed exactly here.
pub(crate) fn settle_new(tally: &mut Tally, answer: &ClaimAnswer) {
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
pub(crate) async fn settle_replay(
    client: &mut Client,
    tally: &mut Tally,
    key: &str,
    answer: ClaimAnswer,
) {
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

/// The instant hot-key periods are counted from, shared by every client.
pub(crate) fn hot_key_epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

// A ceiling, not the store: its timestamps only need the store's shape, so
// the host clock stands in for SQLite's.
