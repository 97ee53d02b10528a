//! The execute-once helper: the client protocol of the README, done right
//! once, so that a caller writes only its effect.
//!
//! ```text
//! loop (until the caller's deadline):
//!   Claim (fresh random claim_token; re-sent unchanged after UNAVAILABLE or a lost reply)
//!     Completed            -> replay the stored result or error; nothing runs
//!     Pending              -> the server waited (`wait`); sleep retry_after; Claim again
//!     NeedsReconciliation  -> error; nothing runs
//!     an unknown outcome   -> error; nothing runs
//!     Acquired             -> run the effect, renewing; Complete / Fail
//!     ReconcileFirst       -> with a lookup: ask the provider; "found" is
//!                             recorded at once, "not found" counts only from a
//!                             lookup started once the earlier attempt settled
//!                             (its deadline), else wait for that and ask again;
//!                             with provider_deduplicates: run the effect;
//!                             with neither: decline (Fail NOT_STARTED), error
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until};

use crate::error::UnknownBecause;
use crate::proto::{self, OperationState, claim_response};
use crate::retry::retryable;
use crate::{Client, Error};

/// What identifies the request, so that the same key with another request
/// is a conflict instead of a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// A JSON document (I-JSON); the server fingerprints its canonical form.
    Json(String),
    /// Opaque bytes, fingerprinted as given.
    Bytes(Vec<u8>),
    /// A 32-byte fingerprint computed by the caller (see the README).
    Fingerprint(Vec<u8>),
}

/// One logical operation: the same on every execution of the same intent.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The action, e.g. "orders.create".
    pub name: String,
    /// The idempotency key: made once per intent and persisted before the
    /// first execution.
    pub key: String,
    pub payload: Payload,
    /// The lease asked for; renewed every third of it while the effect runs.
    pub lease: Duration,
    /// The longest one attempt may run (the server's max_attempt_duration,
    /// fixed by the first Claim of the scope); `None`: the server's default.
    /// The effect is cancelled at it.
    pub attempt_duration: Option<Duration>,
    /// The attempt budget (fixed by the first Claim); `None`: the server's.
    pub max_attempts: Option<u32>,
    /// How long the result is replayed (fixed by the first Claim).
    pub retention: Option<Duration>,
    /// No new attempt after this long from the first Claim (fixed by it).
    pub operation_deadline: Option<Duration>,
    /// This execution's overall deadline: no Claim is sent later than this
    /// after the call began (an owned attempt still runs to its end).
    pub deadline: Duration,
    /// The effect is not started with less than this of the lease (or twice
    /// this of the attempt) left, and is cancelled this long before the
    /// attempt deadline so the outcome can still be reported. At most a third
    /// of the lease counts.
    pub safety_margin: Duration,
    /// The server-side wait of each Claim while the operation is pending.
    pub wait: Duration,
    /// The caller's declaration that the provider deduplicates by the key the
    /// effect passes it ([`EffectContext::operation_id`]), so that running the
    /// effect again after an earlier attempt that may have taken effect does
    /// no harm. It decides what [`Client::execute_once`] (no lookup) does on a
    /// takeover whose earlier attempt is in doubt (ReconcileFirst): `true`
    /// runs the effect; `false` (the default) never runs it there, declines
    /// the attempt (Fail NOT_STARTED, which keeps the earlier attempt's doubt)
    /// and returns [`Error::OutcomeUnknown`]. With a lookup
    /// ([`Client::execute_once_with_lookup`]) the lookup decides and this is
    /// not consulted.
    pub provider_deduplicates: bool,
}

impl Operation {
    pub fn new(name: impl Into<String>, key: impl Into<String>, payload: Payload) -> Self {
        Self {
            name: name.into(),
            key: key.into(),
            payload,
            lease: Duration::from_secs(30),
            attempt_duration: None,
            max_attempts: None,
            retention: None,
            operation_deadline: None,
            deadline: Duration::from_secs(60),
            safety_margin: Duration::from_secs(2),
            wait: Duration::from_secs(10),
            provider_deduplicates: false,
        }
    }

    fn margin(&self) -> Duration {
        self.safety_margin.min(self.lease / 3)
    }

    fn claim_request(&self, claim_token: Vec<u8>, wait: Duration) -> proto::ClaimRequest {
        use proto::claim_request::RequestIdentity;
        let request_identity = match &self.payload {
            Payload::Json(document) => RequestIdentity::JsonPayload(document.clone()),
            Payload::Bytes(bytes) => RequestIdentity::BytesPayload(bytes.clone()),
            Payload::Fingerprint(fingerprint) => RequestIdentity::Fingerprint(fingerprint.clone()),
        };
        proto::ClaimRequest {
            scope: Some(proto::Scope {
                operation: self.name.clone(),
                key: self.key.clone(),
            }),
            request_identity: Some(request_identity),
            claim_token,
            lease: proto_duration(self.lease),
            max_attempt_duration: self.attempt_duration.and_then(proto_duration),
            max_attempts: self.max_attempts.unwrap_or(0),
            retention: self.retention.and_then(proto_duration),
            operation_deadline: self.operation_deadline.and_then(proto_duration),
            wait: proto_duration(wait),
        }
    }
}

/// What the effect decided; the helper records it.
#[derive(Debug, Clone, PartialEq)]
pub enum Disposition {
    /// It happened: Complete with this result.
    Success(proto::Result),
    /// It ended in a final error: Fail TERMINAL, stored and replayed.
    Terminal(proto::OperationError),
    /// It certainly did not happen: Fail RETRYABLE; the helper claims again
    /// after the delay, within the caller's deadline and the attempt budget.
    Retryable(proto::OperationError, Duration),
    /// It may have happened: Fail UNKNOWN; the next owner reconciles first.
    Unknown(proto::OperationError),
}

/// The operation's outcome, as stored.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Succeeded(proto::Result),
    Failed(proto::OperationError),
}

/// How this execution came by its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// This call ran the effect and recorded it.
    Executed,
    /// The stored outcome was replayed; nothing ran.
    Replayed,
    /// A takeover found the earlier attempt's effect at the provider (the
    /// lookup) and recorded it; the effect did not run again.
    Reconciled,
    /// A newer owner or a reconciler took the operation over (LEASE_LOST) and
    /// this is what it stored; the effect was not run again.
    Superseded,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    pub operation_id: String,
    pub outcome: Outcome,
    pub source: Source,
    /// The attempt that produced the outcome (for a replay: how many the
    /// operation took).
    pub attempt: u32,
}

/// How the deadline of an earlier, doubtful attempt was learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadlineSource {
    /// The server's `previous_attempt_deadline`.
    Server,
    /// The earlier attempt was this call's own: its deadline is known here.
    OwnAttempt,
    /// Neither: assumed to be a whole attempt duration after this Claim was
    /// sent (the earlier attempt began before this one and had the same
    /// duration, so its deadline is no later).
    Assumed,
}

/// An earlier attempt whose outcome is in doubt (ReconcileFirst).
#[derive(Debug, Clone, PartialEq)]
pub struct PreviousAttempt {
    /// IN_PROGRESS (its lease expired) or UNKNOWN (its owner said so).
    pub state: OperationState,
    pub fence: u64,
    /// By this instant (local clock) the earlier attempt's effect is no longer
    /// in flight: it has settled. A lookup reads the provider at some moment
    /// between its start and its answer, so one that finds nothing proves
    /// something only if it was started at or after this instant.
    pub attempt_deadline: Instant,
    pub deadline_source: DeadlineSource,
}

/// What the effect is given.
#[derive(Debug, Clone)]
pub struct EffectContext {
    operation_id: String,
    fence: u64,
    attempt: u32,
    max_attempts: u32,
    attempt_deadline: Instant,
    previous: Option<PreviousAttempt>,
    cancelled: watch::Receiver<bool>,
}

impl EffectContext {
    /// The server's id of this operation, the same on every attempt: pass it
    /// to the provider as ITS idempotency key (or client reference).
    pub fn operation_id(&self) -> &str {
        &self.operation_id
    }

    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// 1-based; counts every owner, takeovers included.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// When this attempt must be over (local clock); the effect is cancelled
    /// a safety margin before it.
    pub fn attempt_deadline(&self) -> Instant {
        self.attempt_deadline
    }

    /// Set when an earlier attempt's outcome is unknown (ReconcileFirst): it
    /// may have taken effect. The lookup is asked with it set; the effect
    /// runs with it set only after a negative lookup that counts, or when
    /// the operation declared [`Operation::provider_deduplicates`] (then the
    /// effect must pass [`EffectContext::operation_id`] as the provider's
    /// idempotency key).
    pub fn previous_outcome_unknown(&self) -> Option<&PreviousAttempt> {
        self.previous.as_ref()
    }

    /// Whether the helper has given up on this attempt (the effect's future
    /// is dropped then; this is for work it spawned).
    pub fn is_cancelled(&self) -> bool {
        *self.cancelled.borrow()
    }

    /// Resolves once the helper has given up on this attempt.
    pub async fn cancelled(&self) {
        let mut cancelled = self.cancelled.clone();
        let _ = cancelled.wait_for(|cancelled| *cancelled).await;
    }
}

/// A lookup that never finds anything, for [`Client::execute_once`].
type NoLookup = fn(EffectContext) -> std::future::Ready<Option<Disposition>>;

impl Client {
    /// Runs `effect` at most once for `operation` (across every caller and
    /// process executing the same intent) and returns the operation's outcome:
    /// the new one, or the stored one replayed. See the crate docs for the
    /// rules. Without a lookup, a takeover of an attempt whose outcome is
    /// unknown (ReconcileFirst) cannot check whether that attempt took
    /// effect, so the call site must have chosen: with
    /// [`Operation::provider_deduplicates`] the effect runs (with
    /// [`EffectContext::previous_outcome_unknown`] set, and it must pass the
    /// operation_id as the provider's idempotency key); without it the effect
    /// never runs there: the attempt is declined (Fail NOT_STARTED, the
    /// earlier attempt's doubt and deadline kept) and the call returns
    /// [`Error::OutcomeUnknown`] ([`UnknownBecause::EarlierAttemptUnchecked`]).
    /// Use [`Client::execute_once_with_lookup`] when the provider can be asked.
    pub async fn execute_once<E, F>(
        &self,
        operation: &Operation,
        effect: E,
    ) -> Result<Execution, Error>
    where
        E: FnMut(EffectContext) -> F,
        F: Future<Output = Disposition>,
    {
        self.execute(operation, None::<NoLookup>, effect).await
    }

    /// [`Client::execute_once`] with a provider lookup for takeovers: on
    /// ReconcileFirst, `lookup` is asked whether the earlier attempt's effect
    /// happened (by the operation_id, or the caller's stable reference). It
    /// must read the provider's current state: not a cache, not a lagging
    /// replica.
    ///
    /// - `Some(Success)` or `Some(Terminal)` (found: the earlier attempt's
    ///   outcome) is recorded at once, without running the effect.
    /// - `None` (not found) or `Some(Retryable)` (certainly not applied) is
    ///   negative: a lookup observes the provider at some moment between its
    ///   start and its answer, so it counts only if it was started at or after
    ///   the moment the earlier attempt settled
    ///   ([`PreviousAttempt::attempt_deadline`]). Then `None` runs the effect
    ///   and `Retryable` is recorded. A lookup started earlier is asked again
    ///   once that moment has come (at once if it has), the helper renewing
    ///   meanwhile; an attempt that ends first is declined (Fail
    ///   NOT_STARTED) and the earlier attempt's doubt handed on to the next.
    /// - `Some(Unknown)` (the lookup could not tell) declines the attempt
    ///   (Fail NOT_STARTED) and returns [`Error::OutcomeUnknown`]
    ///   ([`UnknownBecause::LookupInconclusive`]).
    pub async fn execute_once_with_lookup<E, F, L, LF>(
        &self,
        operation: &Operation,
        lookup: L,
        effect: E,
    ) -> Result<Execution, Error>
    where
        E: FnMut(EffectContext) -> F,
        F: Future<Output = Disposition>,
        L: FnMut(EffectContext) -> LF,
        LF: Future<Output = Option<Disposition>>,
    {
        self.execute(operation, Some(lookup), effect).await
    }

    async fn execute<E, F, L, LF>(
        &self,
        operation: &Operation,
        mut lookup: Option<L>,
        mut effect: E,
    ) -> Result<Execution, Error>
    where
        E: FnMut(EffectContext) -> F,
        F: Future<Output = Disposition>,
        L: FnMut(EffectContext) -> LF,
        LF: Future<Output = Option<Disposition>>,
    {
        let overall = Instant::now() + operation.deadline;
        let mut run = Run {
            client: self,
            operation,
            own_deadlines: HashMap::new(),
            operation_id: None,
        };
        loop {
            let now = Instant::now();
            if now >= overall {
                return Err(Error::DeadlinePassed {
                    operation_id: run.operation_id,
                });
            }
            let wait = operation.wait.min(overall - now);
            // Fresh per attempt; the retries inside claim_until re-send this
            // very request, token included, so the server recognises them.
            let request = operation.claim_request(random_claim_token()?, wait);
            // Lease and attempt deadline count from the send that was
            // answered (a re-sent Claim is answered with what is left at the
            // server's handling of that very send).
            let (response, sent_at) = self.claim_until(request, Some(overall)).await?;
            let received_at = Instant::now();
            match claim_step(response)? {
                ClaimStep::Own {
                    ownership,
                    previous,
                } => {
                    run.operation_id = Some(ownership.operation_id.clone());
                    let step = run
                        .own(
                            ownership,
                            (sent_at, received_at),
                            previous,
                            lookup.as_mut(),
                            &mut effect,
                        )
                        .await?;
                    match step {
                        Step::Done(execution) => return Ok(execution),
                        Step::Reclaim(after) => {
                            sleep(after.min(overall.saturating_duration_since(Instant::now())))
                                .await;
                        }
                    }
                }
                ClaimStep::Pending {
                    operation_id,
                    retry_after,
                } => {
                    run.operation_id = Some(operation_id);
                    // The server already waited up to `wait`; a retry_after of
                    // zero still gets a short pause, not a busy loop.
                    let nap = retry_after
                        .max(Duration::from_millis(10))
                        .min(overall.saturating_duration_since(Instant::now()));
                    sleep(nap).await;
                }
                ClaimStep::Done(execution) => return Ok(execution),
            }
        }
    }
}

/// What a Claim answer asks of the helper.
#[derive(Debug)]
enum ClaimStep {
    Own {
        ownership: proto::Ownership,
        previous: Option<proto::ReconcileFirst>,
    },
    Pending {
        operation_id: String,
        retry_after: Duration,
    },
    Done(Execution),
}

/// Decides on a Claim answer. Anything but Acquired and ReconcileFirst means
/// "do not execute"; an outcome this client does not know (a oneof variant
/// added later decodes as none) is an error, never an execution.
fn claim_step(response: proto::ClaimResponse) -> Result<ClaimStep, Error> {
    let owned = |ownership: Option<proto::Ownership>| {
        ownership.ok_or_else(|| Error::InvalidResponse("ownership without its details".into()))
    };
    match response.outcome {
        Some(claim_response::Outcome::Acquired(acquired)) => Ok(ClaimStep::Own {
            ownership: owned(acquired.ownership)?,
            previous: None,
        }),
        Some(claim_response::Outcome::ReconcileFirst(mut reconcile_first)) => Ok(ClaimStep::Own {
            ownership: owned(reconcile_first.ownership.take())?,
            previous: Some(reconcile_first),
        }),
        Some(claim_response::Outcome::Pending(pending)) => Ok(ClaimStep::Pending {
            retry_after: std_duration(pending.retry_after),
            operation_id: pending.operation_id,
        }),
        Some(claim_response::Outcome::Completed(completed)) => {
            let outcome = match completed.outcome {
                Some(proto::completed::Outcome::Result(result)) => Outcome::Succeeded(result),
                Some(proto::completed::Outcome::Error(error)) => Outcome::Failed(error),
                None => return Err(Error::UnrecognisedOutcome),
            };
            Ok(ClaimStep::Done(Execution {
                operation_id: completed.operation_id,
                outcome,
                source: Source::Replayed,
                attempt: completed.attempts,
            }))
        }
        Some(claim_response::Outcome::NeedsReconciliation(needs)) => {
            Err(Error::NeedsReconciliation {
                operation_id: needs.operation_id,
                fence: needs.fence,
                attempts: needs.attempts,
            })
        }
        None => Err(Error::UnrecognisedOutcome),
    }
}

/// The rule for a negative provider lookup on a takeover: it counts only if
/// it was started at or after the moment the earlier attempt settled. A
/// lookup observes the provider at some moment between its start and its
/// answer, so one that answers after that moment may still have read the
/// provider before the earlier attempt's effect landed.
fn negative_lookup_counts(asked_at: Instant, earlier_attempt_settles_at: Instant) -> bool {
    asked_at >= earlier_attempt_settles_at
}

enum Step {
    Done(Execution),
    /// Claim again after this long.
    Reclaim(Duration),
}

/// One execution's state across its Claims.
struct Run<'a> {
    client: &'a Client,
    operation: &'a Operation,
    /// The attempt deadlines of the attempts this call owned, by fence: a
    /// takeover of one of them knows exactly when its effect stopped.
    own_deadlines: HashMap<u64, Instant>,
    operation_id: Option<String>,
}

/// One owned attempt's facts.
struct Owned {
    ownership: proto::Ownership,
    attempt_deadline: Instant,
    /// The effect is cancelled here, a margin before the attempt deadline.
    stop_at: Instant,
    /// The lease as last granted: from when (the send of the Claim or the
    /// Renew that got it) and for how long.
    lease: Mutex<(Instant, Duration)>,
}

impl Owned {
    fn lease(&self) -> (Instant, Duration) {
        *self.lease.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lease_until(&self) -> Instant {
        let (since, granted) = self.lease();
        since + granted
    }
}

impl Run<'_> {
    async fn own<E, F, L, LF>(
        &mut self,
        ownership: proto::Ownership,
        (sent_at, received_at): (Instant, Instant),
        previous: Option<proto::ReconcileFirst>,
        lookup: Option<&mut L>,
        effect: &mut E,
    ) -> Result<Step, Error>
    where
        E: FnMut(EffectContext) -> F,
        F: Future<Output = Disposition>,
        L: FnMut(EffectContext) -> LF,
        LF: Future<Output = Option<Disposition>>,
    {
        let margin = self.operation.margin();
        let attempt_deadline = sent_at + std_duration(ownership.attempt_deadline);
        let owned = Owned {
            lease: Mutex::new((sent_at, std_duration(ownership.lease))),
            stop_at: attempt_deadline.checked_sub(margin).unwrap_or(sent_at),
            attempt_deadline,
            ownership,
        };
        let previous = previous.map(|reconcile_first| {
            Self::previous_attempt(
                &reconcile_first,
                received_at,
                &owned,
                self.own_deadlines.get(&reconcile_first.previous_fence),
            )
        });
        // Should a later attempt of this call take this one over, it knows
        // when this one's effect stopped, and that any doubt this one
        // inherited lasts no longer than it did.
        self.own_deadlines.insert(
            owned.ownership.fence,
            previous
                .as_ref()
                .map_or(owned.attempt_deadline, |previous| {
                    previous.attempt_deadline.max(owned.attempt_deadline)
                }),
        );
        let (cancel, cancelled) = watch::channel(false);
        let context = EffectContext {
            operation_id: owned.ownership.operation_id.clone(),
            fence: owned.ownership.fence,
            attempt: owned.ownership.attempt,
            max_attempts: owned.ownership.max_attempts,
            attempt_deadline: owned.attempt_deadline,
            previous: previous.clone(),
            cancelled,
        };

        match (&previous, lookup) {
            (Some(previous), Some(lookup)) => {
                if let Some(step) = self.reconcile(&owned, previous, lookup, &context).await? {
                    return Ok(step);
                }
            }
            (Some(previous), None) if !self.operation.provider_deduplicates => {
                // Nothing can tell whether the earlier attempt took effect,
                // and the call site did not say that running the effect again
                // is harmless: never run it here.
                return self
                    .decline_in_doubt(&owned, previous, UnknownBecause::EarlierAttemptUnchecked)
                    .await;
            }
            _ => {}
        }

        // (lease short, attempt short): less than the margin left of either.
        let short = |owned: &Owned| {
            let now = Instant::now();
            (
                owned.lease_until().saturating_duration_since(now) < margin,
                owned.stop_at.saturating_duration_since(now) < margin,
            )
        };
        let (lease_short, attempt_short) = short(&owned);
        if attempt_short {
            return self.decline(&owned, previous.as_ref()).await;
        }
        if lease_short {
            // The lease counts from the Claim's send, which a long-polled
            // Claim (or the wait for an earlier attempt's deadline) may have
            // left far behind: renew it, counted from the Renew's send,
            // rather than give the attempt up.
            match self.renew(&owned, owned.stop_at).await {
                Ok(()) => {}
                Err(error) if retryable(&error).is_some() => {}
                Err(refusal) => return Self::lost_before_effect(refusal),
            }
            if short(&owned) != (false, false) {
                return self.decline(&owned, previous.as_ref()).await;
            }
        }

        let ran = tokio::select! {
            disposition = effect(context.clone()) => Ok(disposition),
            refusal = self.keep_renewing(&owned) => Err(Some(refusal)),
            () = sleep_until(owned.stop_at) => Err(None),
        };
        // The effect's future is gone by now; tell whatever it spawned.
        let _ = cancel.send(true);
        match ran {
            Ok(disposition) => self.report(&owned, disposition, Source::Executed).await,
            Err(Some(refusal @ Error::LeaseLost { .. })) => self.superseded(&owned, refusal).await,
            Err(refusal) => {
                // Cancelled at the attempt deadline, or a Renew refused for
                // another reason: the effect may have happened.
                let abandoned = self
                    .report(
                        &owned,
                        Disposition::Unknown(proto::OperationError {
                            code: "attempt_deadline".into(),
                            message: "the effect was cancelled at the attempt deadline".into(),
                            ..Default::default()
                        }),
                        Source::Executed,
                    )
                    .await;
                match (refusal, abandoned) {
                    (Some(refusal), Err(Error::OutcomeUnknown { .. })) => Err(refusal),
                    (_, abandoned) => abandoned,
                }
            }
        }
    }

    /// A takeover with a lookup: asks the provider until an answer counts.
    /// `None` when a negative answer counted and the effect is to run; a step
    /// when the lookup decided (recorded, declined, or the lease lost).
    async fn reconcile<L, LF>(
        &mut self,
        owned: &Owned,
        previous: &PreviousAttempt,
        lookup: &mut L,
        context: &EffectContext,
    ) -> Result<Option<Step>, Error>
    where
        L: FnMut(EffectContext) -> LF,
        LF: Future<Output = Option<Disposition>>,
    {
        loop {
            if Instant::now() >= owned.stop_at {
                // This attempt ends before the doubt does (its Claim took
                // long enough, re-sent or long-polled, to eat the gap
                // between the two deadlines, or its lookups did): hand the
                // doubt on as it is (NOT_STARTED keeps the earlier deadline),
                // and the next attempt, which ends later, waits it out.
                // Holding on until now kept duplicates Pending instead of
                // each taking a turn at declining.
                return self.decline(owned, Some(previous)).await.map(Some);
            }
            // Taken before the lookup starts: the earliest moment at which
            // it may read the provider.
            let asked_at = Instant::now();
            let answer = tokio::select! {
                answer = lookup(context.clone()) => answer,
                refusal = self.keep_renewing(owned) => return Self::lost_before_effect(refusal).map(Some),
                () = sleep_until(owned.stop_at) => return self.decline(owned, Some(previous)).await.map(Some),
            };
            let negative = match answer {
                // Found: whatever the moment it read the provider, the
                // earlier attempt's effect is there.
                Some(found @ (Disposition::Success(_) | Disposition::Terminal(_))) => {
                    return self
                        .report(owned, found, Source::Reconciled)
                        .await
                        .map(Some);
                }
                Some(Disposition::Unknown(_)) => {
                    return self
                        .decline_in_doubt(owned, previous, UnknownBecause::LookupInconclusive)
                        .await
                        .map(Some);
                }
                negative @ (None | Some(Disposition::Retryable(..))) => negative,
            };
            if negative_lookup_counts(asked_at, previous.attempt_deadline) {
                return match negative {
                    Some(not_applied) => self
                        .report(owned, not_applied, Source::Reconciled)
                        .await
                        .map(Some),
                    None => Ok(None),
                };
            }
            // Not found, but the lookup may have read the provider before
            // the earlier effect landed: ask again once that attempt has
            // settled (at once if it has by now), within this attempt.
            tokio::select! {
                () = sleep_until(previous.attempt_deadline.min(owned.stop_at)) => {}
                refusal = self.keep_renewing(owned) => return Self::lost_before_effect(refusal).map(Some),
            }
        }
    }

    /// When the earlier attempt's effect is surely no longer in flight, as
    /// a local instant. Where a lease counts from the send of the Claim (the
    /// early end), this counts from its reply (the late end): the server
    /// measured the time left somewhere in between.
    fn previous_attempt(
        reconcile_first: &proto::ReconcileFirst,
        received_at: Instant,
        owned: &Owned,
        own_deadline: Option<&Instant>,
    ) -> PreviousAttempt {
        let (attempt_deadline, deadline_source) =
            match (reconcile_first.previous_attempt_deadline, own_deadline) {
                (Some(left), _) => (
                    received_at + std_duration(Some(left)),
                    DeadlineSource::Server,
                ),
                (None, Some(own)) => (*own, DeadlineSource::OwnAttempt),
                // The server could not tell previous_attempt_deadline (absent:
                // a takeover recorded by an older server). Then assume the
                // worst: the earlier attempt began before this one and its
                // duration is the same (fixed per operation), so its deadline
                // is at most a whole attempt duration after the server took
                // this Claim, which was before its reply.
                (None, None) => (
                    received_at + std_duration(owned.ownership.attempt_deadline),
                    DeadlineSource::Assumed,
                ),
            };
        PreviousAttempt {
            state: reconcile_first.previous_state(),
            fence: reconcile_first.previous_fence,
            attempt_deadline,
            deadline_source,
        }
    }

    /// Renews a third of the way through each granted lease until a Renew
    /// is refused; returns the refusal. Transient failures (already re-sent
    /// within the attempt by the retry policy) do not stop it: the fence, not
    /// the lease, decides who may write.
    async fn keep_renewing(&self, owned: &Owned) -> Error {
        let (since, granted) = owned.lease();
        let mut due = since + granted / 3;
        loop {
            sleep_until(due.max(Instant::now() + Duration::from_millis(5))).await;
            if Instant::now() >= owned.attempt_deadline {
                return std::future::pending().await;
            }
            match self.renew(owned, owned.attempt_deadline).await {
                Ok(()) => {
                    let (since, granted) = owned.lease();
                    due = since + granted / 3;
                }
                Err(error) if retryable(&error).is_some() => {
                    due = Instant::now() + self.operation.lease / 10;
                }
                Err(refusal) => return refusal,
            }
        }
    }

    /// One Renew (re-sent on transient failures until `until`); the lease
    /// granted counts from its send.
    async fn renew(&self, owned: &Owned, until: Instant) -> Result<(), Error> {
        let request = proto::RenewRequest {
            operation_id: owned.ownership.operation_id.clone(),
            fence: owned.ownership.fence,
            lease: proto_duration(self.operation.lease),
        };
        let (renewed, sent) = self.client.renew_until(request, Some(until)).await?;
        let granted = std_duration(renewed.lease);
        *owned.lease.lock().unwrap_or_else(PoisonError::into_inner) = (sent, granted);
        Ok(())
    }

    /// A Renew was refused before the effect ran: nothing happened here, so
    /// a lost lease means simply claiming again.
    fn lost_before_effect(refusal: Error) -> Result<Step, Error> {
        match refusal {
            Error::LeaseLost { .. } => Ok(Step::Reclaim(Duration::ZERO)),
            refusal => Err(refusal),
        }
    }

    /// The effect is not started (too little lease or attempt left, or an
    /// earlier attempt's doubt outlasts this one): Fail NOT_STARTED, which
    /// hands the operation on as it was before this attempt (released, or
    /// still in the doubt it took over, with that doubt's deadline), and
    /// claim again.
    async fn decline(
        &mut self,
        owned: &Owned,
        inherited: Option<&PreviousAttempt>,
    ) -> Result<Step, Error> {
        self.decline_saying(
            owned,
            inherited,
            "the effect was not started: too little of the lease or attempt was left, or an \
             earlier attempt may still be running",
        )
        .await
    }

    /// A takeover that cannot find out whether the earlier attempt took
    /// effect (no lookup and no provider deduplication declared, or a lookup
    /// that could not tell): decline, keeping the earlier attempt's doubt and
    /// deadline on the server, and say so to the caller instead of claiming
    /// again, which would meet the same doubt.
    async fn decline_in_doubt(
        &mut self,
        owned: &Owned,
        previous: &PreviousAttempt,
        because: UnknownBecause,
    ) -> Result<Step, Error> {
        let message = match because {
            UnknownBecause::LookupInconclusive => {
                "the effect was not started: the lookup could not tell whether an earlier \
                 attempt took effect"
            }
            _ => {
                "the effect was not started: an earlier attempt may have taken effect and this \
                 call cannot check it (no lookup, no provider deduplication declared)"
            }
        };
        match self.decline_saying(owned, Some(previous), message).await? {
            // The server ended the operation meanwhile: its stored outcome.
            done @ Step::Done(_) => Ok(done),
            Step::Reclaim(_) => Err(Error::OutcomeUnknown {
                operation_id: owned.ownership.operation_id.clone(),
                attempt: owned.ownership.attempt,
                because,
            }),
        }
    }

    async fn decline_saying(
        &mut self,
        owned: &Owned,
        inherited: Option<&PreviousAttempt>,
        message: &str,
    ) -> Result<Step, Error> {
        // This attempt ran nothing: a later takeover of it by this call is
        // in doubt only as long as the attempt it took over was.
        if let Some(previous) = inherited {
            self.own_deadlines
                .insert(owned.ownership.fence, previous.attempt_deadline);
        }
        let request = proto::FailRequest {
            operation_id: owned.ownership.operation_id.clone(),
            fence: owned.ownership.fence,
            disposition: proto::FailDisposition::NotStarted.into(),
            error: Some(proto::OperationError {
                code: "not_started".into(),
                message: message.into(),
                ..Default::default()
            }),
            retry_after: None,
        };
        match self.client.fail_until(request, None).await {
            Ok(failed) if failed.state() == OperationState::Failed => {
                // The budget or the operation deadline is spent: the server
                // ended it; replay what it stored.
                self.stored(owned, Source::Replayed).await.map(Step::Done)
            }
            Ok(failed) => Ok(Step::Reclaim(std_duration(failed.retry_after))),
            Err(Error::LeaseLost { .. }) => Ok(Step::Reclaim(Duration::ZERO)),
            Err(error) => Err(error),
        }
    }

    /// Records the effect's disposition.
    async fn report(
        &self,
        owned: &Owned,
        disposition: Disposition,
        source: Source,
    ) -> Result<Step, Error> {
        let ownership = &owned.ownership;
        let done = |outcome| {
            Step::Done(Execution {
                operation_id: ownership.operation_id.clone(),
                outcome,
                source,
                attempt: ownership.attempt,
            })
        };
        let fail =
            |disposition: proto::FailDisposition, error: &proto::OperationError, retry_after| {
                proto::FailRequest {
                    operation_id: ownership.operation_id.clone(),
                    fence: ownership.fence,
                    disposition: disposition.into(),
                    error: Some(error.clone()),
                    retry_after,
                }
            };
        let written = match disposition {
            Disposition::Success(result) => {
                let request = proto::CompleteRequest {
                    operation_id: ownership.operation_id.clone(),
                    fence: ownership.fence,
                    result: Some(result.clone()),
                };
                self.client
                    .complete_until(request, None)
                    .await
                    .map(|_| done(Outcome::Succeeded(result)))
            }
            Disposition::Terminal(mut error) => {
                let request = fail(proto::FailDisposition::Terminal, &error, None);
                self.client.fail_until(request, None).await.map(|_| {
                    error.set_reason(proto::FailureReason::Terminal);
                    done(Outcome::Failed(error))
                })
            }
            Disposition::Retryable(mut error, retry_after) => {
                let request = fail(
                    proto::FailDisposition::Retryable,
                    &error,
                    proto_duration(retry_after),
                );
                self.client.fail_until(request, None).await.map(|failed| {
                    if failed.state() == OperationState::Failed {
                        error.set_reason(failed.reason());
                        done(Outcome::Failed(error))
                    } else {
                        Step::Reclaim(std_duration(failed.retry_after))
                    }
                })
            }
            Disposition::Unknown(error) => {
                let request = fail(proto::FailDisposition::Unknown, &error, None);
                let unknown = || Error::OutcomeUnknown {
                    operation_id: ownership.operation_id.clone(),
                    attempt: ownership.attempt,
                    because: UnknownBecause::EffectUnknown,
                };
                match self.client.fail_until(request, None).await {
                    Ok(_) => Err(unknown()),
                    // Refused as too late, the attempt is just as unknown: the
                    // server hands the next owner a takeover either way.
                    Err(Error::FailedPrecondition { reason, .. })
                        if reason == "ATTEMPT_DEADLINE_PASSED" =>
                    {
                        Err(unknown())
                    }
                    Err(error) => Err(error),
                }
            }
        };
        match written {
            Err(refusal @ Error::LeaseLost { .. }) => self.superseded(owned, refusal).await,
            written => written,
        }
    }

    /// Told LEASE_LOST: look the operation up and answer with what is stored;
    /// never run the effect again.
    async fn superseded(&self, owned: &Owned, refusal: Error) -> Result<Step, Error> {
        match self.stored(owned, Source::Superseded).await {
            Ok(execution) => Ok(Step::Done(execution)),
            Err(Error::InvalidResponse(_)) => Err(refusal),
            Err(error) => Err(error),
        }
    }

    /// The operation's stored outcome; `InvalidResponse` if it has none yet.
    async fn stored(&self, owned: &Owned, source: Source) -> Result<Execution, Error> {
        let operation = self
            .client
            .lookup_operation(&owned.ownership.operation_id)
            .await?;
        let outcome = match operation.state() {
            OperationState::Succeeded => Outcome::Succeeded(operation.result.unwrap_or_default()),
            OperationState::Failed => Outcome::Failed(operation.error.unwrap_or_default()),
            state => {
                return Err(Error::InvalidResponse(format!(
                    "the operation is {state:?}, not ended"
                )));
            }
        };
        Ok(Execution {
            operation_id: operation.operation_id,
            outcome,
            source,
            attempt: operation.attempt,
        })
    }
}

fn random_claim_token() -> Result<Vec<u8>, Error> {
    let mut token = [0u8; 16];
    getrandom::fill(&mut token).map_err(|error| Error::Internal {
        message: format!("no randomness for a claim token: {error}"),
    })?;
    Ok(token.to_vec())
}

fn proto_duration(duration: Duration) -> Option<prost_types::Duration> {
    prost_types::Duration::try_from(duration).ok()
}

/// A duration the server sent; a missing or negative one counts as zero.
fn std_duration(duration: Option<prost_types::Duration>) -> Duration {
    duration
        .and_then(|duration| Duration::try_from(duration).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn an_earlier_attempts_deadline_counts_from_the_reply_and_absent_assumes_a_whole_attempt() {
        let sent_at = Instant::now();
        let received_at = sent_at + Duration::from_millis(40);
        let owned = Owned {
            ownership: proto::Ownership {
                attempt_deadline: proto_duration(Duration::from_secs(60)),
                ..Default::default()
            },
            attempt_deadline: sent_at + Duration::from_secs(60),
            stop_at: sent_at + Duration::from_secs(58),
            lease: Mutex::new((sent_at, Duration::from_secs(30))),
        };
        let told = proto::ReconcileFirst {
            previous_fence: 3,
            previous_attempt_deadline: proto_duration(Duration::from_secs(5)),
            ..Default::default()
        };
        let previous = Run::previous_attempt(&told, received_at, &owned, None);
        assert_eq!(previous.deadline_source, DeadlineSource::Server);
        assert_eq!(
            previous.attempt_deadline,
            received_at + Duration::from_secs(5)
        );

        let absent = proto::ReconcileFirst {
            previous_fence: 3,
            previous_attempt_deadline: None,
            ..Default::default()
        };
        let previous = Run::previous_attempt(&absent, received_at, &owned, None);
        assert_eq!(previous.deadline_source, DeadlineSource::Assumed);
        assert_eq!(
            previous.attempt_deadline,
            received_at + Duration::from_secs(60)
        );
        assert!(previous.attempt_deadline > owned.attempt_deadline);

        let own = sent_at + Duration::from_secs(2);
        let previous = Run::previous_attempt(&absent, received_at, &owned, Some(&own));
        assert_eq!(previous.deadline_source, DeadlineSource::OwnAttempt);
        assert_eq!(previous.attempt_deadline, own);
    }

    #[test]
    fn a_negative_lookup_counts_only_if_started_once_the_earlier_attempt_settled() {
        let settles_at = Instant::now() + Duration::from_secs(10);
        // Issue 17's trace: started at 9.53 s (and read the provider then),
        // the earlier charge landed at 9.81 s, "not found" came at 10.73 s.
        // When it came does not matter: when it started does.
        let started = settles_at - Duration::from_millis(470);
        assert!(!negative_lookup_counts(started, settles_at));
        assert!(negative_lookup_counts(settles_at, settles_at));
        assert!(negative_lookup_counts(
            settles_at + Duration::from_millis(1),
            settles_at
        ));
    }

    #[test]
    fn an_outcome_this_client_does_not_know_is_never_executed() {
        // A ClaimResponse whose oneof carries a variant added after this
        // client was built (field 9): prost skips it, leaving no outcome.
        let mut encoded = Vec::new();
        prost::encoding::message::encode(9, &proto::Pending::default(), &mut encoded);
        let response = proto::ClaimResponse::decode(encoded.as_slice()).expect("decodes");
        assert!(response.outcome.is_none());
        assert!(matches!(
            claim_step(response),
            Err(Error::UnrecognisedOutcome)
        ));
    }

    #[test]
    fn needs_reconciliation_is_an_error_and_completed_a_replay() {
        let needs = proto::ClaimResponse {
            outcome: Some(claim_response::Outcome::NeedsReconciliation(
                proto::NeedsReconciliation {
                    operation_id: "op".into(),
                    fence: 4,
                    attempts: 5,
                },
            )),
        };
        assert!(matches!(
            claim_step(needs),
            Err(Error::NeedsReconciliation { fence: 4, .. })
        ));
        let completed = proto::ClaimResponse {
            outcome: Some(claim_response::Outcome::Completed(proto::Completed {
                operation_id: "op".into(),
                state: OperationState::Succeeded.into(),
                outcome: Some(proto::completed::Outcome::Result(proto::Result {
                    body: b"ok".to_vec(),
                    ..Default::default()
                })),
                attempts: 2,
                completed_at: None,
            })),
        };
        let Ok(ClaimStep::Done(execution)) = claim_step(completed) else {
            panic!("a replay");
        };
        assert_eq!(execution.source, Source::Replayed);
        assert_eq!(execution.attempt, 2);
        let acquired_without_details = proto::ClaimResponse {
            outcome: Some(claim_response::Outcome::Acquired(proto::Acquired {
                ownership: None,
            })),
        };
        assert!(matches!(
            claim_step(acquired_without_details),
            Err(Error::InvalidResponse(_))
        ));
    }
}
