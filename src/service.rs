//! The operations of the API, between the thin gRPC handlers and the store:
//! the claim loop, waiting for pending operations, and change notification.

pub mod cache;
pub mod diagnosis;
pub mod holds;
pub mod new_keys;
pub mod tallies;
mod waiters;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::backoff::Backoff;
use crate::domain::guarded::{GuardedWrite, complete_write, fail_write, renew_write};
use crate::domain::transition::{
    PendingReason, decide_claim, decide_complete, decide_fail, decide_forget, decide_reconcile,
    decide_renew,
};
use crate::domain::{
    ActedBy, Answer, AuditNote, ClaimAnswer, ClaimCommand, ClaimOutcome, CompleteCommand, Error,
    FailCommand, ForgetCommand, Found, HistoryPage, HoldCommand, OperationId, OperationRecord,
    OperationsPage, OperationsQuery, ReconcileCommand, Refusal, RenewCommand, Resolution, Result,
    Target, TenantId, TenantSelection, UnresolvedPage, UnresolvedQuery, WriteAnswer,
};
use crate::metrics::Metrics;
use crate::store::holds::{Hold, HoldSet};
use crate::store::{Actor, Applied, ClaimStart, Decide, Store};
use crate::telemetry::{LogLimiter, current_trace_id};

use cache::TerminalCache;
use holds::HoldsInForce;
use new_keys::{NewKeyRetries, NewKeySettings};
use tallies::{AnswerTallies, Counted};
pub use waiters::WaiterLimits;
use waiters::Waiters;

/// Ids are drawn here, where the first Claim of a scope is stored, and not in
/// the domain: a draw reads the clock and a random source, and the domain
/// stays a pure function of what it is handed (`decide_first_claim` takes the
/// id the store inserted). A trait, since `OperationId` is the domain
/// crate's: `OperationId::generate()` where it is in scope.
pub trait DrawOperationId {
    /// Time-ordered (UUIDv7), which keeps index inserts local.
    fn generate() -> Self;
}

impl DrawOperationId for OperationId {
    #[expect(
        clippy::disallowed_methods,
        reason = "the service draws ids; the domain is handed them"
    )]
    fn generate() -> Self {
        Self(uuid::Uuid::now_v7())
    }
}

/// A claim that finds the scope neither insertable nor present (it was swept
/// in between) tries again, this many times in all.
const CLAIM_ROUNDS: usize = 3;
/// Waiters poll at least this often, since another replica's change reaches
/// this one only through the database.
const WAIT_POLL_START: Duration = Duration::from_millis(25);
const WAIT_POLL_MAX: Duration = Duration::from_millis(500);
/// At most one log line per this interval for refused stale writes, and one
/// for late ones, per replica.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(1);
/// The longest pause before listening again for other replicas' changes.
const RELAY_MAX_PAUSE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct ClaimReply {
    pub answer: ClaimAnswer,
    /// `None` only for a Pending answer to a scope with no operation yet,
    /// whose name or tenant is held: nothing was created.
    pub record: Option<OperationRecord>,
    pub now: DateTime<Utc>,
    /// How long the Claim waited for the operation to change (its `wait`):
    /// kept apart from the time it worked, for `idemd_claim_wait_seconds`.
    pub waited: Duration,
}

#[derive(Debug, Clone)]
pub struct WriteReply {
    pub record: OperationRecord,
    pub now: DateTime<Utc>,
    /// False when the write was a re-sent one, answered from its receipt.
    pub changed: bool,
}

impl WriteReply {
    /// What a Complete, Fail or Reconcile answers: the answer its receipt
    /// keeps, so that a re-sent write gets the original answer however the
    /// record moved on since (receipts from before answers were kept: the
    /// record, as then).
    pub fn answer(&self) -> WriteAnswer {
        self.record
            .last_write
            .and_then(|receipt| receipt.answer)
            .unwrap_or_else(|| WriteAnswer::of(&self.record))
    }
}

#[derive(Clone)]
pub struct IdempotencyService {
    store: Arc<dyn Store>,
    metrics: Metrics,
    /// Operations that changed on this replica, for waiting Claims.
    changes: broadcast::Sender<OperationId>,
    /// Cancelled when the server drains: waiting Claims answer at once.
    draining: CancellationToken,
    /// Terminal records, to answer replays without the database.
    results: TerminalCache,
    /// Refused stale and late writes are logged at most once a second each.
    stale_writes: Arc<LogLimiter>,
    late_writes: Arc<LogLimiter>,
    /// Claims waiting now, within their bounds.
    waiters: Arc<Waiters>,
    /// Replays and Pending answers, counted per operation in memory and
    /// added to the database in batches (never a write per answer).
    tallies: AnswerTallies,
    /// The same request under many new keys, watched in memory.
    new_keys: NewKeyRetries,
    /// The holds in force, as this replica last read them.
    holds: HoldsInForce,
    /// Suspected new-key retries are logged at most once a second.
    new_key_logs: Arc<LogLimiter>,
}

impl std::fmt::Debug for IdempotencyService {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("IdempotencyService")
            .field("store", &self.store.kind())
            .finish_non_exhaustive()
    }
}

impl IdempotencyService {
    pub fn new(store: Arc<dyn Store>, metrics: Metrics, draining: CancellationToken) -> Self {
        let (changes, _) = broadcast::channel(1024);
        Self {
            store,
            waiters: Waiters::new(WaiterLimits::default(), metrics.clone()),
            tallies: AnswerTallies::new(tallies::DEFAULT_CAPACITY, metrics.clone()),
            new_keys: NewKeyRetries::new(NewKeySettings::default(), metrics.clone()),
            holds: HoldsInForce::default(),
            new_key_logs: Arc::new(LogLimiter::new(REFUSAL_LOG_INTERVAL)),
            metrics,
            changes,
            draining,
            results: TerminalCache::new(0),
            stale_writes: Arc::new(LogLimiter::new(REFUSAL_LOG_INTERVAL)),
            late_writes: Arc::new(LogLimiter::new(REFUSAL_LOG_INTERVAL)),
        }
    }

    /// The same service, with these bounds on waiting Claims.
    pub fn with_waiter_limits(mut self, limits: WaiterLimits) -> Self {
        self.waiters = Waiters::new(limits, self.metrics.clone());
        self
    }

    /// The same service, answering replays of terminal records from `results`.
    pub fn with_result_cache(mut self, results: TerminalCache) -> Self {
        self.results = results;
        self
    }

    /// This replica's counts of replays and Pending answers, to flush
    /// ([`AnswerTallies::flush_every`], which `serve` runs).
    pub fn answer_tallies(&self) -> &AnswerTallies {
        &self.tallies
    }

    /// The holds in force, as this replica knows them (refreshed by
    /// `serve`, and at once after this replica's own Hold and Release).
    pub fn holds_in_force(&self) -> &HoldsInForce {
        &self.holds
    }

    /// This replica's watch for the same request under many new keys
    /// (configured by `serve`; read by Lookup).
    pub fn new_key_retries(&self) -> &NewKeyRetries {
        &self.new_keys
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Times a store call for `idemd_store_duration_seconds`.
    async fn timed<T>(&self, call: &'static str, future: impl Future<Output = T>) -> T {
        let started = std::time::Instant::now();
        let output = future.await;
        self.metrics.store_latency(call, started.elapsed());
        output
    }

    /// Claims, and while the answer is Pending and `wait` allows, waits for
    /// the operation to change and claims again. Waiting holds no connection.
    pub async fn claim(
        &self,
        tenant: TenantId,
        command: &ClaimCommand,
        wait: Duration,
    ) -> Result<ClaimReply> {
        let mut waited = Duration::ZERO;
        let reply = self
            .claim_and_wait(tenant, command, wait, &mut waited)
            .await
            .map(|reply| ClaimReply { waited, ..reply });
        if !waited.is_zero() {
            self.metrics.claim_wait(waited);
        }
        let Some(outcome) = ClaimOutcome::of(reply.as_ref().map(|reply| &reply.answer)) else {
            return reply;
        };
        // In memory only: the flush adds the counts to the record later.
        let counted = match outcome {
            ClaimOutcome::Replayed => Some(Counted::Replay),
            ClaimOutcome::Pending => Some(Counted::Pending),
            _ => None,
        };
        if let (Some(counted), Ok(Some(record))) =
            (counted, reply.as_ref().map(|reply| reply.record.as_ref()))
        {
            self.tallies.count(record.operation_id, counted);
        }
        self.metrics
            .claim(tenant, &command.scope.operation, outcome);
        reply
    }

    /// Adds the time spent waiting (not polling) to `waited`.
    async fn claim_and_wait(
        &self,
        tenant: TenantId,
        command: &ClaimCommand,
        wait: Duration,
        waited: &mut Duration,
    ) -> Result<ClaimReply> {
        let give_up_at = tokio::time::Instant::now() + wait;
        let mut poll = WAIT_POLL_START;
        let mut polls = 0_u32;
        // Taken before the first wait, held until the Claim answers.
        let mut waiting = None;
        loop {
            // Only a Claim that may wait listens for changes.
            let mut changes = (!wait.is_zero()).then(|| self.changes.subscribe());
            // After the first, polls read: only a poll that finds something
            // to do (a lease that ran out, a retry that is due) claims.
            let reply = if polls == 0 {
                self.claim_once(tenant, command).await?
            } else {
                self.poll_pending(tenant, command).await?
            };
            polls = polls.saturating_add(1);
            let ClaimAnswer::Pending { retry_after, .. } = reply.answer else {
                return Ok(reply);
            };
            let now = tokio::time::Instant::now();
            if now >= give_up_at || self.draining.is_cancelled() {
                return Ok(reply);
            }
            let due = retry_after.to_std().unwrap_or_default();
            let nap = poll.min(due.max(Duration::from_millis(1)));
            let wake_at = (now + nap).min(give_up_at);
            // Held with no operation yet: nothing to wait for a change of.
            let Some(operation_id) = reply.record.as_ref().map(|record| record.operation_id) else {
                return Ok(reply);
            };
            let Some(changes) = changes.as_mut() else {
                return Ok(reply);
            };
            if waiting.is_none() {
                // No place left to wait: Pending now, with its retry_after.
                let Some(place) = self.waiters.enter(tenant) else {
                    return Ok(reply);
                };
                waiting = Some(place);
            }
            let napping = tokio::time::Instant::now();
            tokio::select! {
                () = wait_for_change(changes, operation_id) => {}
                () = tokio::time::sleep_until(wake_at) => {}
                () = self.draining.cancelled() => {}
            }
            *waited += napping.elapsed();
            poll = (poll * 2).min(WAIT_POLL_MAX);
        }
    }

    /// A Claim while its name or tenant is held: nothing is inserted. A
    /// scope with no operation is told Pending (Held); an existing one is
    /// decided as ever, with the hold (no new owner is made).
    async fn claim_held(&self, tenant: TenantId, command: &ClaimCommand) -> Result<ClaimReply> {
        let retry_after = command.held.unwrap_or_default();
        let target = Target::Scope(command.scope.clone());
        let found = self
            .timed("find", self.store.find(tenant, &target, None))
            .await?;
        let Some(found) = found else {
            return Ok(ClaimReply {
                answer: ClaimAnswer::Pending {
                    reason: PendingReason::Held,
                    retry_after,
                },
                record: None,
                // Read by nothing: a Pending names no moment, and no store
                // read gave a clock (there was nothing to read).
                now: DateTime::UNIX_EPOCH,
                waited: Duration::ZERO,
            });
        };
        if let Some(reply) = self.answer_from_read(found, command) {
            return reply;
        }
        // A write that makes no owner (an escalation to reconciliation),
        // under the lock as every Claim that writes.
        self.claim_under_lock(tenant, command)
            .await?
            .ok_or_else(|| Error::unavailable("the operation changed while held: retry"))
    }

    /// A Claim decided under its operation's lock (it writes); `None` when
    /// the scope's record went away meanwhile.
    async fn claim_under_lock(
        &self,
        tenant: TenantId,
        command: &ClaimCommand,
    ) -> Result<Option<ClaimReply>> {
        let decide = |record: &OperationRecord, now| decide_claim(record, command, now);
        let target = Target::Scope(command.scope.clone());
        let applied = self
            .timed(
                "transition",
                self.store.transition(tenant, &target, &decide),
            )
            .await?;
        let Some(applied) = applied else {
            return Ok(None);
        };
        self.announce(&applied);
        claim_reply(applied.record, applied.now, applied.answer).map(Some)
    }

    /// A waiting Claim's poll: a read, decided without the lock. It claims
    /// for real only when the decision would write, so waiting never draws
    /// fences nor takes write locks.
    async fn poll_pending(&self, tenant: TenantId, command: &ClaimCommand) -> Result<ClaimReply> {
        if let Some(reply) = self.cached_answer(tenant, command) {
            return reply;
        }
        let target = Target::Scope(command.scope.clone());
        let found = self
            .timed("find", self.store.find(tenant, &target, None))
            .await?;
        if let Some(reply) = found.and_then(|found| self.answer_from_read(found, command)) {
            return reply;
        }
        self.claim_once(tenant, command).await
    }

    /// The answer to a replay of a terminal record this replica holds.
    fn cached_answer(
        &self,
        tenant: TenantId,
        command: &ClaimCommand,
    ) -> Option<Result<ClaimReply>> {
        let cached = self.results.get(tenant, &command.scope);
        if self.results.is_enabled() {
            self.metrics.result_cache_lookup(cached.is_some());
        }
        let cached = cached?;
        let decision = decide_claim(&cached.record, command, cached.now);
        decision
            .effects
            .is_empty()
            .then(|| claim_reply(cached.record, cached.now, decision.answer))
    }

    /// Most claims of an existing scope are replays or duplicates of a
    /// running attempt: answers that change nothing. Decided on an unlocked
    /// read they are exactly as true at that read's clock (terminal records
    /// never change), so only a claim that must write takes the row lock
    /// (`None`).
    fn answer_from_read(&self, found: Found, command: &ClaimCommand) -> Option<Result<ClaimReply>> {
        let decision = decide_claim(&found.record, command, found.now);
        if !decision.effects.is_empty() {
            return None;
        }
        self.results.offer(&found.record, found.now);
        Some(claim_reply(found.record, found.now, decision.answer))
    }

    async fn claim_once(&self, tenant: TenantId, command: &ClaimCommand) -> Result<ClaimReply> {
        // A replay of a terminal record this replica holds: no round trip.
        if let Some(reply) = self.cached_answer(tenant, command) {
            return reply;
        }
        if let Some(retry_after) = self.holds.held(tenant, &command.scope.operation) {
            let held = ClaimCommand {
                held: Some(retry_after),
                ..command.clone()
            };
            return self.claim_held(tenant, &held).await;
        }
        for _ in 0..CLAIM_ROUNDS {
            let operation_id = OperationId::generate();
            let started = self
                .timed(
                    "insert_or_find",
                    self.store.insert_or_find(tenant, operation_id, command),
                )
                .await?;
            let found = match started {
                Some(ClaimStart::Inserted(record)) => {
                    debug!(%operation_id, fence = record.fence, "operation acquired");
                    self.watch_for_new_key_retries(tenant, &record);
                    return Ok(ClaimReply {
                        answer: ClaimAnswer::Acquired,
                        now: record.created_at,
                        record: Some(record),
                        waited: Duration::ZERO,
                    });
                }
                Some(ClaimStart::Existing(found)) => found,
                None => continue,
            };
            if let Some(reply) = self.answer_from_read(found, command) {
                return reply;
            }
            if let Some(reply) = self.claim_under_lock(tenant, command).await? {
                return Ok(reply);
            }
        }
        Err(Error::unavailable(
            "the scope changed repeatedly during the claim",
        ))
    }

    pub async fn renew(&self, tenant: TenantId, command: &RenewCommand) -> Result<WriteReply> {
        let decide = |record: &OperationRecord, now| decide_renew(record, command, now);
        self.write(tenant, renew_write(command), "renew", &decide)
            .await
    }

    pub async fn complete(
        &self,
        tenant: TenantId,
        command: &CompleteCommand,
    ) -> Result<WriteReply> {
        let decide = |record: &OperationRecord, now| decide_complete(record, command, now);
        let reply = self
            .write(tenant, complete_write(command), "complete", &decide)
            .await?;
        if reply.changed {
            self.metrics
                .completion(tenant, &reply.record.scope.operation);
        }
        Ok(reply)
    }

    pub async fn fail(&self, tenant: TenantId, command: &FailCommand) -> Result<WriteReply> {
        let decide = |record: &OperationRecord, now| decide_fail(record, command, now);
        let reply = match fail_write(command) {
            Some(guarded) => self.write(tenant, guarded, "fail", &decide).await?,
            None => {
                self.locked_write(tenant, command.operation_id, "fail", &decide)
                    .await?
            }
        };
        if reply.changed {
            self.metrics
                .failure(tenant, &reply.record.scope.operation, command.disposition);
        }
        Ok(reply)
    }

    /// A reconciliation by `acted_by`, recorded in the history entry; one
    /// made by an admin on the tenant's behalf is audited too, in the same
    /// transaction.
    pub async fn reconcile(
        &self,
        tenant: TenantId,
        command: &ReconcileCommand,
        acted_by: &ActedBy,
    ) -> Result<WriteReply> {
        let audit = acted_by.admin_on_behalf.then(|| AuditNote {
            action: "operation.reconcile",
            detail: match &command.resolution {
                Resolution::Succeeded(_) => "succeeded",
                Resolution::Failed(_) => "failed",
                Resolution::NotApplied => "not_applied",
            }
            .to_owned(),
            reason: None,
        });
        let decide = |record: &OperationRecord, now| {
            decide_reconcile(record, command, now).acted_by(acted_by, audit.clone())
        };
        let reply = self
            .locked_write(tenant, command.operation_id, "reconcile", &decide)
            .await?;
        if reply.changed {
            self.metrics
                .reconciliation(tenant, &reply.record.scope.operation, &command.resolution);
            info!(
                operation_id = %command.operation_id,
                state = reply.record.state.as_str(),
                fence = reply.record.fence,
                trace_id = current_trace_id().as_deref(),
                "operation reconciled"
            );
        }
        Ok(reply)
    }

    /// An admin's Forget: the ended operation becomes a tombstone now, with
    /// its history entry and audit row in the same transaction (the locked
    /// path: the row lock, then an UPDATE guarded by the fence and the state
    /// decided from). Answers the record as written and how many bytes of
    /// result or error were dropped. No replica replays the forgotten
    /// result afterwards: this one drops its cached entry here, the others
    /// when the change notification reaches them
    /// ([`Self::relay_changes_from_other_replicas`]).
    pub async fn forget(
        &self,
        tenant: TenantId,
        command: &ForgetCommand,
        acted_by: &ActedBy,
    ) -> Result<(WriteReply, u64)> {
        // What the decision that committed dropped (the locked path may
        // decide again after a conflict: the last decision is the one).
        let dropped = std::sync::atomic::AtomicU64::new(0);
        let decide = |record: &OperationRecord, now| {
            let bytes = record
                .outcome
                .as_ref()
                .map_or(0, |outcome| outcome.stored_bytes());
            let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
            dropped.store(bytes, std::sync::atomic::Ordering::Relaxed);
            let audit = AuditNote {
                action: "operation.forget",
                detail: format!(
                    "operation={} state={} dropped_bytes={bytes}",
                    record.scope.operation,
                    record.state.as_str()
                ),
                reason: Some(command.reason.clone()),
            };
            decide_forget(record, command, now).acted_by(acted_by, Some(audit))
        };
        let reply = self
            .locked_write(tenant, command.operation_id, "forget", &decide)
            .await?;
        if reply.changed {
            // The record is a tombstone now: a cached replay must not outlive it.
            self.results.remove(tenant, &reply.record.scope);
            info!(
                operation_id = %command.operation_id,
                credential = %acted_by.credential,
                admin_on_behalf = acted_by.admin_on_behalf,
                trace_id = current_trace_id().as_deref(),
                "operation forgotten"
            );
        }
        let dropped = dropped.load(std::sync::atomic::Ordering::Relaxed);
        Ok((reply, dropped))
    }

    /// The tenant a call addresses: the caller's own, or (for an admin) the
    /// active tenant of the name it gave (TENANT_NOT_FOUND when none is).
    pub async fn tenant_of(&self, selection: &TenantSelection) -> Result<TenantId> {
        match selection {
            TenantSelection::Own(tenant) => Ok(*tenant),
            TenantSelection::Named(name) => self
                .timed("tenant_by_name", self.store.tenant_by_name(name))
                .await?
                .ok_or(Error::TenantNotFound),
            TenantSelection::All => Err(Error::Internal(
                "a call on one operation selected every tenant".into(),
            )),
        }
    }

    /// Holds `command.operation` (or the whole tenant), audited with
    /// `actor`. This replica sees the holds at once; the others within their
    /// refresh interval.
    pub async fn hold(
        &self,
        tenant: TenantId,
        command: &HoldCommand,
        actor: &Actor,
    ) -> Result<HoldSet> {
        let operation = command.operation.as_deref();
        let set = self
            .timed(
                "hold",
                self.store
                    .holds()
                    .hold(tenant, operation, command.retry_after, actor),
            )
            .await?;
        self.refresh_holds().await;
        if let HoldSet::Held(hold) = &set {
            info!(
                tenant = tenant.0,
                operation = hold.operation.as_deref().unwrap_or("*"),
                held_by = %hold.held_by,
                "held: no new owners until released"
            );
        }
        Ok(set)
    }

    /// Releases the hold on `command.operation` (or the whole tenant's),
    /// audited with `actor`; the hold that was in force.
    pub async fn release(
        &self,
        tenant: TenantId,
        command: &HoldCommand,
        actor: &Actor,
    ) -> Result<Option<Hold>> {
        let operation = command.operation.as_deref();
        let released = self
            .timed(
                "release",
                self.store.holds().release(tenant, operation, actor),
            )
            .await?;
        self.refresh_holds().await;
        if released.is_some() {
            info!(
                tenant = tenant.0,
                operation = operation.unwrap_or("*"),
                released_by = %actor.name,
                "hold released"
            );
        }
        Ok(released)
    }

    /// Every hold in force, from the store.
    pub async fn list_holds(&self) -> Result<Vec<Hold>> {
        self.timed("list_holds", self.store.holds().list_holds())
            .await
    }

    /// This replica's view after its own change; a failed read leaves it
    /// to the next refresh.
    async fn refresh_holds(&self) {
        if let Err(error) = self.holds.refresh(self.store.as_ref()).await {
            warn!(%error, "could not read the holds after a change; the next refresh will");
        }
    }

    /// One operation, with one page of its history when `history` asks.
    /// A page token made for another operation (another incarnation of the
    /// scope) is INVALID_ARGUMENT.
    pub async fn lookup(
        &self,
        tenant: TenantId,
        target: &Target,
        history: Option<HistoryPage>,
    ) -> Result<Found> {
        let found = self
            .timed("find", self.store.find(tenant, target, history))
            .await?
            .ok_or(Error::NotFound)?;
        let token_operation = history.and_then(|page| page.of);
        if token_operation.is_some_and(|operation_id| operation_id != found.record.operation_id) {
            return Err(Error::invalid(
                "history_page_token",
                "was made for another operation",
            ));
        }
        Ok(found)
    }

    /// One page of ListOperations: the store reads it with its own clock.
    pub async fn list_operations(&self, query: &OperationsQuery) -> Result<OperationsPage> {
        self.timed("list_operations", self.store.list_operations(query))
            .await
    }

    pub async fn list_unresolved(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> Result<UnresolvedPage> {
        self.timed("list_unresolved", self.store.list_unresolved(tenant, query))
            .await
    }

    /// An owner write: its one-statement common case, or the locked path.
    async fn write(
        &self,
        tenant: TenantId,
        guarded: GuardedWrite,
        rpc: &'static str,
        decide: &Decide<'_>,
    ) -> Result<WriteReply> {
        let operation_id = guarded.operation_id;
        let applied = self
            .timed("write", self.store.write(tenant, guarded, decide))
            .await?;
        self.written(tenant, operation_id, rpc, applied)
    }

    /// A write with no one-statement common case: the locked path only.
    async fn locked_write(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        rpc: &'static str,
        decide: &Decide<'_>,
    ) -> Result<WriteReply> {
        let applied = self
            .timed(
                "transition",
                self.store
                    .transition(tenant, &Target::Id(operation_id), decide),
            )
            .await?;
        self.written(tenant, operation_id, rpc, applied)
    }

    /// What a write did, counted, logged and answered.
    fn written(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        rpc: &'static str,
        applied: Option<Applied>,
    ) -> Result<WriteReply> {
        let applied = applied.ok_or(Error::NotFound)?;
        self.announce(&applied);
        if applied.answer.is_ok() {
            // The next Claim of a finished operation is a replay.
            self.results.offer(&applied.record, applied.now);
        }
        let record = applied.record;
        let operation = &record.scope.operation;
        match &applied.answer {
            Err(Error::LeaseLost { current_fence, .. }) => {
                self.metrics.stale_write(tenant, operation, rpc);
                if let Some(suppressed) = self.stale_writes.admit(std::time::Instant::now()) {
                    info!(
                        %operation_id,
                        rpc,
                        current_fence,
                        suppressed,
                        trace_id = current_trace_id().as_deref(),
                        "stale write refused"
                    );
                }
            }
            Err(Error::Refused {
                refusal: Refusal::AttemptDeadlinePassed,
                ..
            }) => {
                self.metrics.late_write(tenant, operation, rpc);
                if let Some(suppressed) = self.late_writes.admit(std::time::Instant::now()) {
                    info!(
                        %operation_id,
                        rpc,
                        suppressed,
                        trace_id = current_trace_id().as_deref(),
                        "late write refused: past the attempt deadline"
                    );
                }
            }
            _ => {}
        }
        applied.answer?;
        Ok(WriteReply {
            changed: applied.record_changed,
            record,
            now: applied.now,
        })
    }

    /// Relays changes made by other replicas (as the store hears of them) to
    /// this replica's waiting Claims, until `stop` is cancelled; reconnects
    /// after a failure. Waiters poll as well, so a lost notification costs
    /// latency, never correctness.
    pub async fn relay_changes_from_other_replicas(self, stop: CancellationToken) {
        let mut backoff = Backoff::new(Duration::from_millis(100), RELAY_MAX_PAUSE);
        let mut listened_before = false;
        loop {
            let started = tokio::time::Instant::now();
            let changes = self.changes.clone();
            let results = self.results.clone();
            // Notifications sent while no listener ran are lost: a cached
            // result forgotten meanwhile must not keep answering.
            if listened_before {
                results.clear();
            }
            listened_before = true;
            let relay = move |operation_id: OperationId| {
                // A terminal record changes only by Forget: whatever changed,
                // a cached copy of it no longer stands.
                results.remove_operation(operation_id);
                let _ = changes.send(operation_id);
            };
            // Stopping drops the listener, which gives its connection back
            // to the pool before the store closes.
            match stop
                .run_until_cancelled(self.store.listen_for_changes(&relay))
                .await
            {
                None => return,
                Some(Err(error)) => {
                    tracing::warn!(%error, "change notifications interrupted; waiters poll meanwhile");
                }
                Some(Ok(())) => {}
            }
            // A listener that ran a while had worked: start over.
            if started.elapsed() >= RELAY_MAX_PAUSE {
                backoff.reset();
            }
            if stop
                .run_until_cancelled(tokio::time::sleep(backoff.pause()))
                .await
                .is_none()
            {
                return;
            }
        }
    }

    /// Wakes this replica's waiters when the record changed.
    fn announce(&self, applied: &Applied) {
        if applied.record_changed {
            // No receiver is fine: nobody waits.
            let _ = self.changes.send(applied.record.operation_id);
        }
    }
}

async fn wait_for_change(
    changes: &mut broadcast::Receiver<OperationId>,
    operation_id: OperationId,
) {
    loop {
        match changes.recv().await {
            Ok(changed) if changed == operation_id => return,
            Ok(_) => {}
            // Missed some: ours may be among them.
            Err(broadcast::error::RecvError::Lagged(_)) => return,
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

impl IdempotencyService {
    /// Notes a new operation with the detector; logs (at most once a
    /// second) when its request has now come under too many keys. The log
    /// names the operation, never the payload or its fingerprint.
    fn watch_for_new_key_retries(&self, tenant: TenantId, record: &OperationRecord) {
        let Some(seen) = self.new_keys.observe(
            tenant,
            &record.scope.operation,
            record.fingerprint,
            record.operation_id,
        ) else {
            return;
        };
        if let Some(suppressed) = self.new_key_logs.admit(std::time::Instant::now()) {
            warn!(
                operation_id = %record.operation_id,
                tenant = tenant.0,
                operation = %record.scope.operation,
                keys = seen.keys,
                window_seconds = seen.window.as_secs(),
                suppressed,
                "the same request under many new idempotency keys: the caller may make a new \
                 key per retry instead of per intent"
            );
        }
    }
}

fn claim_reply(
    record: OperationRecord,
    now: DateTime<Utc>,
    answer: Result<Answer>,
) -> Result<ClaimReply> {
    match answer {
        Ok(Answer::Claim(answer)) => {
            log_claim_answer(&record, &answer);
            Ok(ClaimReply {
                answer,
                record: Some(record),
                now,
                waited: Duration::ZERO,
            })
        }
        Ok(Answer::Written) => Err(Error::Internal("claim decided a write".into())),
        Err(error) => {
            if let Error::KeyReused { operation_id } = &error {
                info!(
                    %operation_id,
                    trace_id = current_trace_id().as_deref(),
                    "claim refused: idempotency key reused with a different request"
                );
            }
            Err(error)
        }
    }
}

fn log_claim_answer(record: &OperationRecord, answer: &ClaimAnswer) {
    let operation_id = record.operation_id;
    match answer {
        ClaimAnswer::ReconcileFirst(doubt) => info!(
            %operation_id,
            trace_id = current_trace_id().as_deref(),
            fence = record.fence,
            previous_fence = doubt.previous.fence,
            previous_state = doubt.previous.state.as_str(),
            attempt = record.attempt,
            "operation taken over: the new owner must reconcile first"
        ),
        ClaimAnswer::NeedsReconciliation => info!(
            %operation_id,
            trace_id = current_trace_id().as_deref(),
            attempt = record.attempt,
            "operation needs reconciliation: attempt budget or deadline spent"
        ),
        _ => {}
    }
}
