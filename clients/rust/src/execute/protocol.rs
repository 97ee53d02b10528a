//! The client protocol of docs/client-protocol.md, as a core that performs
//! no I/O: [`Protocol::start`] gives the first [`Step`], and each
//! [`Protocol::next`] takes the answer to the last step and the clock and
//! gives the next (send this Claim, Renew, Complete or Fail with this
//! bound; sleep; run the effect, the provider lookup or a pause under the
//! attempt's guard; look the operation up), until [`Step::Finish`] or
//! [`Step::Raise`]. While a guarded step runs, the driver renews the lease
//! in the background through [`Protocol::renewal_due`],
//! [`Protocol::renewal`] and [`Protocol::background_renewal`].
//!
//! `Client::execute_once` (mod.rs) is the driver over tokio and the gRPC
//! client; the shared protocol vectors (testdata/protocol/, vectors.rs)
//! drive the same core with a scripted server and clock. The decisions are
//! those of the Python core (clients/python/src/idemd/protocol.py, the
//! reference) and the Java one (ExecuteOnceProtocol), whose shape this
//! follows.

use std::time::Duration;

use tokio::time::Instant;

use super::attempt::{ATTEMPT_DEADLINE_REPORT, Attempt, Interruption, is_refused};
use super::{Disposition, EffectContext, Execution, Operation, Outcome, Source, std_duration};
use crate::error::{Error, UnknownBecause};
use crate::proto::{self, OperationState, PendingReason, claim_response};
use crate::retry::retryable;

/// The longest `wait` one Claim asks for while the operation is pending.
pub(crate) const MAX_CLAIM_WAIT: Duration = Duration::from_secs(20);
/// With this little (or less) of the caller's deadline left, Pending is
/// final; the `wait` asked for is what is left less this.
pub(crate) const PENDING_SLACK: Duration = Duration::from_millis(50);
/// A Claim's sends get at least this long, whatever is left of the caller's
/// deadline: a deadline of zero means "do not wait", not "fail if idemd
/// takes more than a moment".
pub(crate) const MIN_CLAIM_TIME: Duration = Duration::from_secs(1);
/// The longest pause before a Claim after a Pending the server did not wait on.
pub(crate) const NO_SPIN_PAUSE: Duration = Duration::from_secs(1);

/// What the core asks its driver to do next.
#[derive(Debug)]
pub(crate) enum Step {
    /// Send the Claim, re-sent unchanged as the retry policy says but never
    /// starting a re-send at or past `until`. Answered
    /// [`Answer::Claimed`] or [`Answer::Refused`].
    Claim {
        request: proto::ClaimRequest,
        until: Instant,
    },
    /// Send a Renew (before the effect). [`Answer::Renewed`] or refused.
    Renew {
        request: proto::RenewRequest,
        until: Instant,
    },
    /// [`Answer::Completed`] or refused.
    Complete {
        request: proto::CompleteRequest,
        until: Instant,
    },
    /// [`Answer::Failed`] or refused.
    Fail {
        request: proto::FailRequest,
        until: Instant,
    },
    /// The Lookup RPC by operation_id. [`Answer::Stored`] or refused.
    Lookup { operation_id: String },
    /// Pause outside an attempt. [`Answer::Done`].
    Sleep(Duration),
    /// Run the effect under the attempt's guard (ended early, and answered
    /// [`Answer::Interrupted`], at the attempt's cancel point or when a
    /// background Renew says to stop). [`Answer::Returned`] or
    /// [`Answer::Raised`].
    Effect(EffectContext),
    /// Ask the caller's provider lookup, guarded. [`Answer::LookedUp`] or
    /// [`Answer::Raised`].
    ProviderLookup(EffectContext),
    /// Pause within the attempt, guarded. [`Answer::Done`].
    Pause(Duration),
    /// The call's answer.
    Finish(Execution),
    /// The call's error.
    Raise(Error),
}

/// What the driver hands back for the step it took.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The Claim's answer, and when the answered send began.
    Claimed(proto::ClaimResponse, Instant),
    /// The Renew's answer, and when the answered send began.
    Renewed(proto::RenewResponse, Instant),
    Completed,
    Failed(proto::FailResponse),
    Stored(Box<proto::Operation>),
    /// A send failed with this status, after the re-sends the policy allows.
    Refused(Error),
    /// The effect returned.
    Returned(Disposition),
    /// The provider lookup answered (`None`: nothing found).
    LookedUp(Option<Disposition>),
    /// The effect or the lookup panicked; the kind of failure, for the report.
    Raised(String),
    /// The guard stopped the work: the lease was lost or the time is up.
    Interrupted,
    /// A pause is over.
    Done,
}

/// Where the answer to the last step goes.
#[derive(Debug)]
enum Then {
    Nothing,
    Claimed,
    PausedBeforeClaim,
    RenewedBeforeEffect,
    EffectRan,
    ProviderLooked {
        started_at: Instant,
    },
    PausedBetweenLookups,
    Recorded(Recording),
    Declined,
    /// A best-effort report (Fail UNKNOWN, or a decline): whatever its
    /// answer, the call raises this.
    RaiseAfter(Error),
    AnsweredStored(Source),
}

/// What an owner write records, to answer with once it is written.
#[derive(Debug)]
enum Recording {
    Success(proto::Result, Source),
    Terminal(proto::OperationError, Source),
    Retryable(proto::OperationError, Source),
}

/// One `execute_once` call.
pub(crate) struct Protocol<'a, T> {
    operation: &'a Operation,
    has_lookup: bool,
    new_claim_token: T,
    /// The call's end: its start plus the caller's deadline.
    end: Instant,
    /// The next Claim's `wait` (after a Pending).
    wait: Option<Duration>,
    attempt: Option<Attempt>,
    /// When the last attempt answered "claim again": when the next attempt
    /// is due, and why, should the caller's deadline pass first.
    reclaim_after: Duration,
    reclaim_reason: PendingReason,
    operation_id: Option<String>,
    then: Then,
}

/// The attempt the protocol is in, or a Raise saying it is in none (a bug).
macro_rules! attempt {
    ($self:ident) => {
        match $self.attempt.as_mut() {
            Some(attempt) => attempt,
            None => return $self.broken("no attempt is owned"),
        }
    };
}

impl<'a, T> Protocol<'a, T>
where
    T: FnMut() -> Result<Vec<u8>, Error>,
{
    /// `new_claim_token` makes a fresh random claim token (16 bytes); the
    /// vectors number theirs.
    pub(crate) fn new(operation: &'a Operation, has_lookup: bool, new_claim_token: T) -> Self {
        Self {
            operation,
            has_lookup,
            new_claim_token,
            end: Instant::now(),
            wait: None,
            attempt: None,
            reclaim_after: Duration::ZERO,
            reclaim_reason: PendingReason::RetryScheduled,
            operation_id: None,
            then: Then::Nothing,
        }
    }

    /// The first step: the first Claim.
    pub(crate) fn start(&mut self, now: Instant) -> Step {
        self.end = now + self.operation.deadline;
        self.claim(now)
    }

    /// The step after `answer`, the answer to the last step, at `now`.
    pub(crate) fn next(&mut self, answer: Answer, now: Instant) -> Step {
        match std::mem::replace(&mut self.then, Then::Nothing) {
            Then::Nothing => self.broken("the protocol was not waiting for an answer"),
            Then::Claimed => self.claimed(answer, now),
            Then::PausedBeforeClaim => match answer {
                Answer::Done => self.claim(now),
                other => self.unexpected(&other),
            },
            Then::RenewedBeforeEffect => self.renewed_before_effect(answer, now),
            Then::EffectRan => self.effect_ran(answer, now),
            Then::ProviderLooked { started_at } => self.provider_looked(answer, started_at, now),
            Then::PausedBetweenLookups => match answer {
                Answer::Done => self.look_up_provider(now),
                Answer::Interrupted => self.interrupted(now),
                other => self.unexpected(&other),
            },
            Then::Recorded(recording) => self.recorded(answer, recording, now),
            Then::Declined => self.declined(answer, now),
            Then::RaiseAfter(error) => self.raise(error),
            Then::AnsweredStored(source) => self.answered_stored(answer, source),
        }
    }

    /// While a guarded step runs: its end (the attempt's cancel point).
    pub(crate) fn cancel_at(&self) -> Option<Instant> {
        self.attempt.as_ref().map(|attempt| attempt.cancel_at)
    }

    /// While a guarded step runs: when the next background Renew is due
    /// (`None`: no more renewals).
    pub(crate) fn renewal_due(&self) -> Option<Instant> {
        self.attempt.as_ref().and_then(Attempt::renewal_due)
    }

    /// The background Renew to send now, and the bound of its re-sends.
    pub(crate) fn renewal(&self) -> Option<(proto::RenewRequest, Instant)> {
        self.attempt
            .as_ref()
            .map(|attempt| (attempt.renew_request(), attempt.cancel_at))
    }

    /// A background Renew's answer (the response and when its answered send
    /// began, or the refusal); `true` when the guarded work must stop.
    pub(crate) fn background_renewal(
        &mut self,
        answer: Result<(&proto::RenewResponse, Instant), &Error>,
        now: Instant,
    ) -> bool {
        self.attempt
            .as_mut()
            .is_some_and(|attempt| attempt.background_renewal(answer, now))
    }

    fn ask(&mut self, then: Then, step: Step) -> Step {
        self.then = then;
        step
    }

    fn broken(&mut self, what: &str) -> Step {
        self.raise(Error::Internal {
            message: format!("execute_once: {what}"),
        })
    }

    fn unexpected(&mut self, answer: &Answer) -> Step {
        self.broken(&format!("an unexpected answer: {answer:?}"))
    }

    fn end_attempt(&mut self) {
        if let Some(attempt) = self.attempt.take() {
            attempt.cancel();
        }
    }

    fn raise(&mut self, error: Error) -> Step {
        self.end_attempt();
        Step::Raise(error)
    }

    fn finish(&mut self, execution: Execution) -> Step {
        self.end_attempt();
        Step::Finish(execution)
    }

    fn outcome_unknown(&self, because: UnknownBecause) -> Error {
        let (operation_id, attempt) = self.attempt.as_ref().map_or_else(
            || (self.operation_id.clone().unwrap_or_default(), 0),
            |attempt| (attempt.operation_id.clone(), attempt.number),
        );
        Error::OutcomeUnknown {
            operation_id,
            attempt,
            because,
        }
    }

    // ---- claiming ---------------------------------------------------------

    fn claim(&mut self, now: Instant) -> Step {
        let token = match (self.new_claim_token)() {
            Ok(token) => token,
            Err(error) => return self.raise(error),
        };
        // A fresh token per Claim; its re-sends carry this very request.
        let request = self.operation.claim_request(token, self.wait);
        let until = self.end.max(now + MIN_CLAIM_TIME);
        self.ask(Then::Claimed, Step::Claim { request, until })
    }

    fn claimed(&mut self, answer: Answer, now: Instant) -> Step {
        let (response, sent_at) = match answer {
            Answer::Claimed(response, sent_at) => (response, sent_at),
            Answer::Refused(error) => return self.raise(error),
            other => return self.unexpected(&other),
        };
        let missing = || Error::InvalidResponse("ownership without its details".into());
        match response.outcome {
            Some(claim_response::Outcome::Acquired(acquired)) => match acquired.ownership {
                Some(ownership) => self.own(ownership, None, (sent_at, now)),
                None => self.raise(missing()),
            },
            Some(claim_response::Outcome::ReconcileFirst(mut first)) => {
                match first.ownership.take() {
                    Some(ownership) => self.own(ownership, Some(&first), (sent_at, now)),
                    None => self.raise(missing()),
                }
            }
            Some(claim_response::Outcome::Completed(completed)) => {
                let outcome = match completed.outcome {
                    Some(proto::completed::Outcome::Result(result)) => Outcome::Succeeded(result),
                    Some(proto::completed::Outcome::Error(error)) => Outcome::Failed(error),
                    None => return self.raise(Error::UnrecognisedOutcome),
                };
                self.finish(Execution {
                    operation_id: completed.operation_id,
                    outcome,
                    source: Source::Replayed,
                    attempt: completed.attempts,
                })
            }
            Some(claim_response::Outcome::Pending(pending)) => self.pending(pending, sent_at, now),
            Some(claim_response::Outcome::NeedsReconciliation(needs)) => {
                self.raise(Error::NeedsReconciliation {
                    operation_id: needs.operation_id,
                    fence: needs.fence,
                    attempts: needs.attempts,
                })
            }
            // An outcome added after this client was built decodes as none:
            // never an execution.
            None => self.raise(Error::UnrecognisedOutcome),
        }
    }

    fn pending(&mut self, pending: proto::Pending, sent_at: Instant, now: Instant) -> Step {
        let retry_after = std_duration(pending.retry_after);
        let reason = pending.reason();
        self.operation_id = Some(pending.operation_id);
        let remaining = self.end.saturating_duration_since(now);
        if remaining <= PENDING_SLACK {
            return self.raise(Error::DeadlinePassed {
                operation_id: self.operation_id.clone(),
                retry_after,
                reason,
            });
        }
        let waited = now.saturating_duration_since(sent_at);
        let asked = self.wait;
        self.wait = Some((remaining - PENDING_SLACK).min(MAX_CLAIM_WAIT));
        if asked.is_some_and(|asked| waited < PENDING_SLACK.min(asked)) {
            // The server did not wait (it clamps `wait`, or has as many
            // waiters as it allows): do not spin.
            let pause = retry_after.min(remaining).min(NO_SPIN_PAUSE);
            return self.ask(Then::PausedBeforeClaim, Step::Sleep(pause));
        }
        self.claim(now)
    }

    /// The last attempt ended without an answer (a retry scheduled, or
    /// declined before the effect): claim again at once, with a fresh token
    /// and no `wait`, unless the caller's deadline has passed.
    fn reclaim(&mut self, now: Instant) -> Step {
        self.end_attempt();
        if now >= self.end {
            return self.raise(Error::DeadlinePassed {
                operation_id: self.operation_id.clone(),
                retry_after: self.reclaim_after,
                reason: self.reclaim_reason,
            });
        }
        self.wait = None;
        self.claim(now)
    }

    // ---- an owned attempt ---------------------------------------------------

    fn own(
        &mut self,
        ownership: proto::Ownership,
        first: Option<&proto::ReconcileFirst>,
        claimed: (Instant, Instant),
    ) -> Step {
        let now = claimed.1;
        self.operation_id = Some(ownership.operation_id.clone());
        self.reclaim_after = Duration::ZERO;
        self.reclaim_reason = PendingReason::RetryScheduled;
        self.attempt = Some(Attempt::new(
            ownership,
            first,
            claimed,
            self.operation.lease,
        ));
        let attempt = attempt!(self);
        if attempt.context.previous.is_some() {
            if self.has_lookup {
                return self.look_up_provider(now);
            }
            if !self.operation.provider_deduplicates {
                // Running the effect again could repeat the earlier one, and
                // nothing here can tell whether it happened. NOT_STARTED hands
                // the doubt on with the earlier attempt's deadline, for a
                // caller (or reconciler) that can check.
                let request = attempt.decline_request();
                let until = attempt.deadline_at;
                let error = self.outcome_unknown(UnknownBecause::EarlierAttemptUnchecked);
                return self.ask(Then::RaiseAfter(error), Step::Fail { request, until });
            }
        }
        self.before_effect(now)
    }

    /// The lease was lost or the attempt's time is up.
    fn interrupted(&mut self, now: Instant) -> Step {
        let attempt = attempt!(self);
        let why = attempt.interruption(now).unwrap_or(Interruption::Stopped);
        self.interrupted_by(why, now)
    }

    fn interrupted_by(&mut self, why: Interruption, now: Instant) -> Step {
        let attempt = attempt!(self);
        attempt.cancel();
        match (why, attempt.started) {
            // Nothing ran here: another owner has the operation; claim again.
            (Interruption::Lost, false) => {
                self.reclaim_reason = PendingReason::InProgress;
                self.reclaim(now)
            }
            (Interruption::Lost, true) => self.answer_stored(Source::Superseded),
            (Interruption::Stopped, false) => self.decline(),
            (Interruption::Stopped, true) => {
                let request =
                    attempt.report(proto::FailDisposition::Unknown, ATTEMPT_DEADLINE_REPORT);
                let until = attempt.deadline_at;
                let error = self.outcome_unknown(UnknownBecause::AttemptTimedOut);
                self.ask(Then::RaiseAfter(error), Step::Fail { request, until })
            }
        }
    }

    fn look_up_provider(&mut self, now: Instant) -> Step {
        let attempt = attempt!(self);
        // Taken before the lookup starts: it may read the provider at any
        // moment up to its answer, so only its start is known to precede
        // the read.
        let context = attempt.context.clone();
        self.ask(
            Then::ProviderLooked { started_at: now },
            Step::ProviderLookup(context),
        )
    }

    fn provider_looked(&mut self, answer: Answer, started_at: Instant, now: Instant) -> Step {
        let found = match answer {
            Answer::LookedUp(found) => found,
            Answer::Interrupted => return self.interrupted(now),
            Answer::Raised(_) => return self.decline_and_raise(UnknownBecause::LookupInconclusive),
            other => return self.unexpected(&other),
        };
        let negative = match found {
            // Found: whatever the moment it read the provider, the earlier
            // attempt's effect is there.
            Some(found @ (Disposition::Success(_) | Disposition::Terminal(_))) => {
                return self.record(found, Source::Reconciled);
            }
            // The lookup could not tell: nothing ran here, but this call
            // cannot tell the outcome either.
            Some(Disposition::Unknown(_)) => {
                return self.decline_and_raise(UnknownBecause::LookupInconclusive);
            }
            // Nothing there, or certainly not applied.
            negative @ (None | Some(Disposition::Retryable(..))) => negative,
        };
        let attempt = attempt!(self);
        let Some(settles_at) = attempt.previous_settles_at() else {
            return self.broken("a provider lookup without an earlier attempt");
        };
        if started_at >= settles_at {
            return match negative {
                Some(not_applied) => self.record(not_applied, Source::Reconciled),
                None => self.before_effect(now),
            };
        }
        // Nothing found proves nothing if the lookup began while the earlier
        // attempt could still run (even when it answered after that): its
        // read may precede an effect that landed before the earlier deadline.
        let interval = self.operation.lookup_interval;
        if settles_at >= attempt.cancel_at && now + interval >= attempt.cancel_at {
            // This attempt ends before the doubt does: having looked until
            // now, hand the doubt on as it is (NOT_STARTED keeps the earlier
            // deadline); the next attempt, ending later, waits it out.
            return self.interrupted_by(Interruption::Stopped, now);
        }
        let pause = interval.min(settles_at.saturating_duration_since(now));
        self.ask(Then::PausedBetweenLookups, Step::Pause(pause))
    }

    /// A best-effort decline, then outcome-unknown.
    fn decline_and_raise(&mut self, because: UnknownBecause) -> Step {
        let attempt = attempt!(self);
        let request = attempt.decline_request();
        let until = attempt.deadline_at;
        let error = self.outcome_unknown(because);
        self.ask(Then::RaiseAfter(error), Step::Fail { request, until })
    }

    /// The checks before the effect: never start it so close to the cancel
    /// point that it would be cancelled as soon as it started (checked
    /// before renewing too), nor on a lease that may be running out (renew
    /// it once first, and decline only if too little is left even then).
    fn before_effect(&mut self, now: Instant) -> Step {
        let attempt = attempt!(self);
        if attempt.attempt_left(now) < attempt.margin {
            return self.decline();
        }
        if attempt.renew_first(now) {
            let request = attempt.renew_request();
            let until = attempt.cancel_at;
            return self.ask(Then::RenewedBeforeEffect, Step::Renew { request, until });
        }
        self.start_effect()
    }

    fn renewed_before_effect(&mut self, answer: Answer, now: Instant) -> Step {
        let attempt = attempt!(self);
        match answer {
            Answer::Renewed(renewed, sent_at) => attempt.renewed(&renewed, sent_at),
            Answer::Refused(refusal) => {
                // LEASE_LOST or ATTEMPT_DEADLINE_PASSED mark the lease lost;
                // transient failures past the re-sends, or STATE_FORBIDS (the
                // lease ran out and a Claim marked the attempt), leave it to
                // the re-check.
                let go_on = attempt.mark_lost_by(&refusal)
                    || retryable(&refusal).is_some()
                    || is_refused(&refusal, "STATE_FORBIDS");
                if !go_on {
                    return self.raise(refusal);
                }
            }
            other => return self.unexpected(&other),
        }
        if attempt.is_lost()
            && let Some(why) = attempt.interruption(now)
        {
            // LEASE_LOST: claim again; ATTEMPT_DEADLINE_PASSED: decline.
            return self.interrupted_by(why, now);
        }
        if attempt.too_short_to_start(now) {
            return self.decline();
        }
        self.start_effect()
    }

    fn start_effect(&mut self) -> Step {
        let attempt = attempt!(self);
        attempt.started = true;
        let context = attempt.context.clone();
        self.ask(Then::EffectRan, Step::Effect(context))
    }

    fn effect_ran(&mut self, answer: Answer, now: Instant) -> Step {
        match answer {
            Answer::Returned(disposition) => {
                attempt!(self).cancel();
                self.record(disposition, Source::Executed)
            }
            Answer::Interrupted => self.interrupted(now),
            Answer::Raised(kind) => {
                // The effect failed in a way nobody can tell. The report
                // names the kind of failure only.
                let attempt = attempt!(self);
                attempt.cancel();
                let request = attempt.report(
                    proto::FailDisposition::Unknown,
                    ("effect_raised", kind.as_str()),
                );
                let until = attempt.deadline_at;
                let error = self.outcome_unknown(UnknownBecause::EffectPanicked);
                self.ask(Then::RaiseAfter(error), Step::Fail { request, until })
            }
            other => self.unexpected(&other),
        }
    }

    // ---- recording the outcome ----------------------------------------------

    fn record(&mut self, disposition: Disposition, source: Source) -> Step {
        let attempt = attempt!(self);
        let until = attempt.deadline_at;
        match disposition {
            Disposition::Success(result) => {
                let request = proto::CompleteRequest {
                    operation_id: attempt.operation_id.clone(),
                    fence: attempt.fence,
                    result: Some(result.clone()),
                };
                self.ask(
                    Then::Recorded(Recording::Success(result, source)),
                    Step::Complete { request, until },
                )
            }
            Disposition::Terminal(error) => {
                let request =
                    attempt.fail_request(proto::FailDisposition::Terminal, error.clone(), None);
                self.ask(
                    Then::Recorded(Recording::Terminal(error, source)),
                    Step::Fail { request, until },
                )
            }
            Disposition::Retryable(error, retry_after) => {
                let request = attempt.fail_request(
                    proto::FailDisposition::Retryable,
                    error.clone(),
                    Some(retry_after),
                );
                self.ask(
                    Then::Recorded(Recording::Retryable(error, source)),
                    Step::Fail { request, until },
                )
            }
            Disposition::Unknown(error) => {
                // Best effort: if it cannot be said, the lease runs out and
                // the next owner reconciles first all the same.
                let request = attempt.fail_request(proto::FailDisposition::Unknown, error, None);
                let error = self.outcome_unknown(UnknownBecause::EffectUnknown);
                self.ask(Then::RaiseAfter(error), Step::Fail { request, until })
            }
        }
    }

    fn recorded(&mut self, answer: Answer, recording: Recording, now: Instant) -> Step {
        let attempt = attempt!(self);
        let done = |outcome, source| Execution {
            operation_id: attempt.operation_id.clone(),
            outcome,
            source,
            attempt: attempt.number,
        };
        match (answer, recording) {
            (Answer::Completed, Recording::Success(result, source)) => {
                let execution = done(Outcome::Succeeded(result), source);
                self.finish(execution)
            }
            (Answer::Failed(_), Recording::Terminal(mut error, source)) => {
                error.set_reason(proto::FailureReason::Terminal);
                let execution = done(Outcome::Failed(error), source);
                self.finish(execution)
            }
            (Answer::Failed(failed), Recording::Retryable(mut error, source)) => {
                if failed.state() == OperationState::RetryWait {
                    self.reclaim_after = std_duration(failed.retry_after);
                    return self.reclaim(now);
                }
                // The budget or the operation deadline is spent.
                error.set_reason(failed.reason());
                let execution = done(Outcome::Failed(error), source);
                self.finish(execution)
            }
            // Another owner (or a reconciler) took over: answer with what
            // is stored, never redo the effect.
            (Answer::Refused(Error::LeaseLost { .. }), _) => self.answer_stored(Source::Superseded),
            (Answer::Refused(refusal), _) if is_refused(&refusal, "ATTEMPT_DEADLINE_PASSED") => {
                let error = self.outcome_unknown(UnknownBecause::NotRecordedInTime);
                self.raise(error)
            }
            (Answer::Refused(refusal), _) => self.raise(refusal),
            (other, _) => self.unexpected(&other),
        }
    }

    /// The effect is not started: Fail NOT_STARTED, which hands the
    /// operation on as it was before this attempt (released, or still in
    /// the doubt it took over, ending with that attempt's deadline). Then
    /// claim again; or, when the decline ended the operation (the budget or
    /// the operation deadline is spent), answer with what is stored.
    fn decline(&mut self) -> Step {
        let attempt = attempt!(self);
        let request = attempt.decline_request();
        let until = attempt.deadline_at;
        self.ask(Then::Declined, Step::Fail { request, until })
    }

    fn declined(&mut self, answer: Answer, now: Instant) -> Step {
        match answer {
            Answer::Failed(failed) if failed.state() == OperationState::Failed => {
                self.answer_stored(Source::Replayed)
            }
            Answer::Failed(failed) => {
                self.reclaim_after = std_duration(failed.retry_after);
                self.reclaim(now)
            }
            // Taken over meanwhile, too late to say so, or not answered in
            // time: nothing ran here, and the next Claim learns where things
            // stand.
            Answer::Refused(refusal)
                if matches!(refusal, Error::LeaseLost { .. })
                    || is_refused(&refusal, "ATTEMPT_DEADLINE_PASSED")
                    || retryable(&refusal).is_some() =>
            {
                self.reclaim(now)
            }
            Answer::Refused(refusal) => self.raise(refusal),
            other => self.unexpected(&other),
        }
    }

    /// Told LEASE_LOST (or a decline that ended the operation): answer with
    /// what is stored; never redo the effect.
    fn answer_stored(&mut self, source: Source) -> Step {
        let attempt = attempt!(self);
        let operation_id = attempt.operation_id.clone();
        self.ask(Then::AnsweredStored(source), Step::Lookup { operation_id })
    }

    fn answered_stored(&mut self, answer: Answer, source: Source) -> Step {
        let stored = match answer {
            Answer::Stored(stored) => *stored,
            Answer::Refused(error) => return self.raise(error),
            other => return self.unexpected(&other),
        };
        let outcome = match stored.state() {
            OperationState::Succeeded => Outcome::Succeeded(stored.result.unwrap_or_default()),
            OperationState::Failed => Outcome::Failed(stored.error.unwrap_or_default()),
            state => {
                return self.raise(Error::Superseded {
                    operation_id: stored.operation_id,
                    state,
                    attempt: stored.attempt,
                });
            }
        };
        self.finish(Execution {
            operation_id: stored.operation_id,
            outcome,
            source,
            attempt: stored.attempt,
        })
    }
}
