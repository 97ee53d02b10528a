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

mod attempt;
mod claim;
mod operation;
mod record;

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use tokio::time::{Instant, sleep};

use self::attempt::{Run, Step};
use self::claim::{ClaimStep, claim_step};
pub use self::operation::{
    DeadlineSource, Disposition, EffectContext, Execution, Operation, Outcome, Payload,
    PreviousAttempt, Source,
};
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
