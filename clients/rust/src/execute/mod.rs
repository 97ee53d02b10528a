//! The execute-once helper: the client protocol of docs/client-protocol.md,
//! done right once, so that a caller writes only its effect.
//!
//! The decisions are a core that performs no I/O ([`protocol`]: it says
//! what to send, when to start the effect, what the call answers, and is fed
//! each answer and the clock); [`Client::execute_once`] is the driver around
//! it: the gRPC sends (re-sent by the retry policy), the timers, the effect
//! and the provider lookup under the attempt's guard, and the background
//! Renew alongside them. The shared protocol vectors (testdata/protocol/)
//! drive the same core without a server (`vectors.rs`).

mod attempt;
mod operation;
mod protocol;
#[cfg(test)]
mod vectors;

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, sleep, sleep_until};

pub use self::operation::{
    DeadlineSource, Disposition, EffectContext, Execution, Operation, Outcome, Payload,
    PreviousAttempt, Source,
};
use self::protocol::{Answer, Protocol, Step};
use crate::client::Client;
use crate::error::Error;

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
    /// [`Error::OutcomeUnknown`] ([`UnknownBecause::EarlierAttemptUnchecked`](crate::UnknownBecause::EarlierAttemptUnchecked)).
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
    ///   (Fail NOT_STARTED, best effort) and returns [`Error::OutcomeUnknown`]
    ///   ([`UnknownBecause::LookupInconclusive`](crate::UnknownBecause::LookupInconclusive)); so does a lookup that
    ///   panics, and then the panic resumes.
    ///
    /// An effect that panics is reported (Fail UNKNOWN, `effect_raised`)
    /// before the panic resumes: its outcome is unknown.
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
        let tokens: TokenSource = random_claim_token;
        let mut protocol = Protocol::new(operation, lookup.is_some(), tokens);
        let mut step = protocol.start(Instant::now());
        // A panic of the effect or the lookup: reported first (Fail UNKNOWN,
        // or the decline), then resumed.
        let mut panicked = None;
        loop {
            let answer = match step {
                Step::Finish(execution) => return Ok(execution),
                Step::Raise(error) => {
                    if let Some(payload) = panicked {
                        resume_unwind(payload);
                    }
                    return Err(error);
                }
                Step::Claim { request, until } => {
                    match self.claim_until(request, Some(until)).await {
                        Ok((response, sent_at)) => Answer::Claimed(response, sent_at),
                        Err(error) => Answer::Refused(error),
                    }
                }
                Step::Renew { request, until } => {
                    match self.renew_until(request, Some(until)).await {
                        Ok((response, sent_at)) => Answer::Renewed(response, sent_at),
                        Err(error) => Answer::Refused(error),
                    }
                }
                Step::Complete { request, until } => {
                    match self.complete_until(request, Some(until)).await {
                        Ok(_) => Answer::Completed,
                        Err(error) => Answer::Refused(error),
                    }
                }
                Step::Fail { request, until } => {
                    match self.fail_until(request, Some(until)).await {
                        Ok(response) => Answer::Failed(response),
                        Err(error) => Answer::Refused(error),
                    }
                }
                Step::Lookup { operation_id } => match self.lookup_operation(&operation_id).await {
                    Ok(stored) => Answer::Stored(Box::new(stored)),
                    Err(error) => Answer::Refused(error),
                },
                Step::Sleep(pause) => {
                    sleep(pause).await;
                    Answer::Done
                }
                Step::Pause(pause) => match self.guarded(&mut protocol, sleep(pause)).await {
                    Guarded::Done(()) => Answer::Done,
                    Guarded::Panicked(payload) => {
                        panicked = Some(payload);
                        Answer::Raised("panic".into())
                    }
                    Guarded::Interrupted => Answer::Interrupted,
                },
                Step::Effect(context) => match self.guarded(&mut protocol, effect(context)).await {
                    Guarded::Done(disposition) => Answer::Returned(disposition),
                    Guarded::Panicked(payload) => {
                        panicked = Some(payload);
                        Answer::Raised("panic".into())
                    }
                    Guarded::Interrupted => Answer::Interrupted,
                },
                Step::ProviderLookup(context) => {
                    let Some(lookup) = lookup.as_mut() else {
                        // The core asks only a call that has a lookup.
                        return Err(Error::Internal {
                            message: "execute_once: a provider lookup without one".into(),
                        });
                    };
                    match self.guarded(&mut protocol, lookup(context)).await {
                        Guarded::Done(found) => Answer::LookedUp(found),
                        Guarded::Panicked(payload) => {
                            panicked = Some(payload);
                            Answer::Raised("panic".into())
                        }
                        Guarded::Interrupted => Answer::Interrupted,
                    }
                }
            };
            step = protocol.next(answer, Instant::now());
        }
    }

    /// Runs `work` within the attempt: until it ends, the attempt's cancel
    /// point, or a background Renew refused in a way that ends the attempt
    /// (LEASE_LOST, ATTEMPT_DEADLINE_PASSED). The lease is renewed alongside
    /// as the core says; the work's future is dropped when it is stopped.
    async fn guarded<W, T>(&self, protocol: &mut Protocol<'_, TokenSource>, work: W) -> Guarded<T>
    where
        W: Future<Output = T>,
    {
        let Some(cancel_at) = protocol.cancel_at() else {
            return Guarded::Interrupted;
        };
        let renewing = async {
            loop {
                let (Some(due), Some((request, until))) =
                    (protocol.renewal_due(), protocol.renewal())
                else {
                    return std::future::pending::<()>().await;
                };
                sleep_until(due).await;
                let answer = self.renew_until(request, Some(until)).await;
                let answer = match &answer {
                    Ok((renewed, sent_at)) => Ok((renewed, *sent_at)),
                    Err(error) => Err(error),
                };
                if protocol.background_renewal(answer, Instant::now()) {
                    return;
                }
            }
        };
        tokio::select! {
            biased;
            done = CatchUnwind(Box::pin(work)) => match done {
                Ok(value) => Guarded::Done(value),
                Err(payload) => Guarded::Panicked(payload),
            },
            () = renewing => Guarded::Interrupted,
            () = sleep_until(cancel_at) => Guarded::Interrupted,
        }
    }
}

/// How a guarded step ended.
enum Guarded<T> {
    Done(T),
    Panicked(Box<dyn Any + Send>),
    Interrupted,
}

/// The driver's claim tokens: 16 random bytes each.
type TokenSource = fn() -> Result<Vec<u8>, Error>;

/// A future whose panic is caught and returned (the effect's or the
/// lookup's: the attempt reports it before the panic resumes).
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let work = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(move || work.poll(context))) {
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(payload)),
        }
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

/// The longest duration taken from the server as it is (ten years): local
/// instants are computed from them, and must not overflow.
const LONGEST_DURATION: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// A duration the server sent; a missing or negative one counts as zero.
fn std_duration(duration: Option<prost_types::Duration>) -> Duration {
    duration
        .and_then(|duration| Duration::try_from(duration).ok())
        .unwrap_or_default()
        .min(LONGEST_DURATION)
}
