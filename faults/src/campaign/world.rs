//! What every part of a campaign shares: the settings, the clients, the
//! provider and the intents (the counters are `stats.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idemd_client::proto;
use idemd_client::{Client, EffectContext, Error, Execution, Operation, Outcome, Payload, Source};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

use super::external::{Reply, Worker};
use super::settings::Settings;
use super::stats::{Stats, add};
use crate::lock::locked;
use crate::provider::Provider;
use crate::rng::Rng;

pub(super) type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One logical operation: its key and payload are fixed for every delivery.
#[derive(Debug)]
pub(super) struct Intent {
    pub(super) key: String,
    pub(super) payload: String,
    /// The provider honours the operation_id as its idempotency key; such
    /// intents run through `execute_once` (no lookup), as the client's README
    /// allows only then.
    pub(super) honour_key: bool,
    /// Its takeovers' lookups are slow (the late-landing twist).
    pub(super) slow_lookup: bool,
    /// Told by a lookup that read the provider and found nothing (the
    /// late-landing twist's request in flight lands right after).
    pub(super) read_nothing: Arc<Notify>,
    pub(super) operation_id: Mutex<Option<String>>,
    pub(super) acknowledged: Mutex<Vec<Vec<u8>>>,
}

pub(super) fn result(body: Vec<u8>) -> proto::Result {
    proto::Result {
        body,
        content_type: "application/json".into(),
        metadata: HashMap::new(),
    }
}

pub(super) struct World {
    pub(super) settings: Settings,
    pub(super) clients: Vec<Client>,
    pub(super) provider: Arc<Provider>,
    pub(super) stats: Arc<Stats>,
    /// The worker process, when the deliveries run out of process.
    pub(super) worker: Option<Worker>,
}

impl World {
    pub(super) fn new(settings: Settings, clients: Vec<Client>) -> Self {
        Self {
            settings,
            clients,
            provider: Arc::default(),
            stats: Arc::default(),
            worker: None,
        }
    }

    /// The number of client connections a delivery picks from.
    pub(super) fn connections(&self) -> u64 {
        self.clients.len() as u64
    }

    pub(super) fn client(&self, rng: &mut Rng) -> &Client {
        let index = rng.below(self.clients.len() as u64) as usize;
        &self.clients[index]
    }

    pub(super) fn operation(&self, intent: &Intent, payload: &str) -> Operation {
        let mut operation = Operation::new(
            "faults.transfer",
            intent.key.clone(),
            Payload::Json(payload.to_owned()),
        );
        operation.lease = self.settings.lease;
        operation.attempt_duration = Some(self.settings.attempt_duration);
        operation.max_attempts = Some(20);
        operation.deadline = Duration::from_secs(30);
        // Such intents run through `execute_once`, without a lookup: a
        // takeover runs the effect again, which the key makes harmless.
        operation.provider_deduplicates = intent.honour_key;
        operation
    }

    pub(super) fn note_attempt(&self, context: &EffectContext) {
        self.stats.note_attempt(
            context.operation_id(),
            context.fence(),
            context.previous_outcome_unknown().is_some(),
        );
    }

    /// A delivery's outcome as an external worker reported it, counted as
    /// [`World::note`] counts the Rust client's.
    pub(super) fn note_reply(&self, intent: &Intent, reply: &Reply) {
        if let Some(operation_id) = reply.operation_id() {
            let mut known = locked(&intent.operation_id);
            if known.as_deref().is_some_and(|known| known != operation_id) {
                self.stats.violation(format!(
                    "key {} named two operations: {known:?} and {operation_id}",
                    intent.key
                ));
            }
            *known = Some(operation_id.to_owned());
        }
        match reply {
            Reply::Succeeded { body, source, .. } => {
                add(&self.stats.acknowledged);
                locked(&intent.acknowledged).push(body.clone());
                add(match source.as_str() {
                    "replayed" => &self.stats.replayed,
                    "reconciled" => &self.stats.reconciled_by_lookup,
                    "superseded" => &self.stats.superseded,
                    _ => &self.stats.executed,
                });
            }
            Reply::Failed { code, .. } => self.stats.violation(format!(
                "key {} ended failed ({code:?}), though no effect fails",
                intent.key
            )),
            Reply::Error { kind, .. } => match kind.as_str() {
                "conflict" => self.stats.violation(format!(
                    "key {} was rejected as a conflict with its own payload",
                    intent.key
                )),
                "lease_lost" => add(&self.stats.lease_lost),
                "outcome_unknown" => add(&self.stats.outcome_unknown),
                "deadline_passed" => add(&self.stats.deadline_passed),
                "needs_reconciliation" => add(&self.stats.needs_reconciliation),
                _ => add(&self.stats.other_errors),
            },
        }
    }

    pub(super) fn note(&self, intent: &Intent, outcome: &Result<Execution, Error>) {
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
            // Told LEASE_LOST: the stored record was not ended yet.
            Err(Error::LeaseLost { .. } | Error::Superseded { .. }) => add(&self.stats.lease_lost),
            Err(Error::OutcomeUnknown { .. }) => add(&self.stats.outcome_unknown),
            Err(Error::DeadlinePassed { .. }) => add(&self.stats.deadline_passed),
            Err(Error::NeedsReconciliation { .. }) => add(&self.stats.needs_reconciliation),
            Err(_) => add(&self.stats.other_errors),
        }
    }

    /// `job` for every intent, at most `concurrency` at a time, each with a
    /// random source of its own; the answers, in the order they came. A job
    /// that panics is a violation.
    pub(super) async fn each_intent<T, Job, Done>(
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
}
