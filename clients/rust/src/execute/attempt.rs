//! One owned attempt: the lookup on a takeover, the checks before the effect,
//! the effect under its lease and deadline. Recording what happened is
//! `record.rs`'s.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use super::{
    DeadlineSource, Disposition, EffectContext, Execution, Operation, PreviousAttempt, Source,
    proto_duration, std_duration,
};
use crate::client::Client;
use crate::error::Error;
use crate::error::UnknownBecause;
use crate::proto;
use crate::retry::retryable;

/// The rule for a negative provider lookup on a takeover: it counts only if
/// it was started at or after the moment the earlier attempt settled. A
/// lookup observes the provider at some moment between its start and its
/// answer, so one that answers after that moment may still have read the
/// provider before the earlier attempt's effect landed.
fn negative_lookup_counts(asked_at: Instant, earlier_attempt_settles_at: Instant) -> bool {
    asked_at >= earlier_attempt_settles_at
}

/// Whether the effect waits for one Renew first: with less than half of the
/// lease asked for left (docs/client-protocol.md, "renew-first threshold").
/// Judged against the lease asked for, not the one granted: a re-sent Claim is
/// granted only what was left of it, and half of a remnant is no margin.
fn renew_first(lease_left: Duration, lease_asked: Duration) -> bool {
    lease_left < lease_asked / 2
}

/// When the next background Renew is due: a third into the lease granted
/// `since` (docs/client-protocol.md, "background renewal"); `None` once the
/// lease reaches the attempt deadline (within 1 ms), where Renew cannot extend
/// it and renewing again would only shrink it, call after call.
fn next_renewal(since: Instant, granted: Duration, attempt_deadline: Instant) -> Option<Instant> {
    if since + granted + Duration::from_millis(1) >= attempt_deadline {
        return None;
    }
    Some(since + granted / 3)
}

/// The pause before another try after a background Renew whose re-sends all
/// failed: a tenth of the grant, within [50 ms, 1 s] (docs/client-protocol.md,
/// "renewal retry pause").
fn renewal_retry_pause(granted: Duration) -> Duration {
    (granted / 10).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// A background Renew refused STATE_FORBIDS: the lease ran out and a Claim
/// marked the attempt UNKNOWN, but nobody took over, and the owner may still
/// write up to its attempt deadline (the fence decides, not the lease). The
/// renewals stop; the effect goes on and its outcome is recorded
/// (docs/client-protocol.md, "While the effect runs").
fn renewals_stop_but_the_attempt_goes_on(refusal: &Error) -> bool {
    matches!(refusal, Error::FailedPrecondition { reason, .. } if reason == "STATE_FORBIDS")
}

pub(super) enum Step {
    Done(Execution),
    /// Claim again after this long.
    Reclaim(Duration),
}

/// One execution's state across its Claims.
pub(super) struct Run<'a> {
    pub(super) client: &'a Client,
    pub(super) operation: &'a Operation,
    /// The attempt deadlines of the attempts this call owned, by fence: a
    /// takeover of one of them knows exactly when its effect stopped.
    pub(super) own_deadlines: HashMap<u64, Instant>,
    pub(super) operation_id: Option<String>,
}

/// One owned attempt's facts.
pub(super) struct Owned {
    pub(super) ownership: proto::Ownership,
    pub(super) attempt_deadline: Instant,
    /// The effect is cancelled here, a margin before the attempt deadline.
    pub(super) stop_at: Instant,
    /// The lease as last granted: from when (the send of the Claim or the
    /// Renew that got it) and for how long.
    pub(super) lease: Mutex<(Instant, Duration)>,
}

impl Owned {
    pub(super) fn lease(&self) -> (Instant, Duration) {
        *self.lease.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn lease_until(&self) -> Instant {
        let (since, granted) = self.lease();
        since + granted
    }
}

impl Run<'_> {
    pub(super) async fn own<E, F, L, LF>(
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

        if let Some(step) = self
            .before_effect(&owned, previous.as_ref(), margin)
            .await?
        {
            return Ok(step);
        }
        self.run_effect(&owned, context, cancel, effect).await
    }

    /// The checks before the effect starts: never with less than `margin`
    /// left of the attempt, nor of the lease even after one Renew. `Some`:
    /// the attempt does not run (declined, or the lease lost).
    async fn before_effect(
        &mut self,
        owned: &Owned,
        previous: Option<&PreviousAttempt>,
        margin: Duration,
    ) -> Result<Option<Step>, Error> {
        // (lease short, attempt short): less than the margin left of either.
        let short = |owned: &Owned| {
            let now = Instant::now();
            (
                owned.lease_until().saturating_duration_since(now) < margin,
                owned.stop_at.saturating_duration_since(now) < margin,
            )
        };
        let (_, attempt_short) = short(owned);
        if attempt_short {
            return self.decline(owned, previous).await.map(Some);
        }
        let lease_left = owned
            .lease_until()
            .saturating_duration_since(Instant::now());
        if renew_first(lease_left, self.operation.lease) {
            // The lease counts from the Claim's send, which a long-polled
            // Claim (or the wait for an earlier attempt's deadline) may have
            // left far behind, and a re-sent Claim is granted only what was
            // left of it: renew it, counted from the Renew's send, rather
            // than start the effect on a remnant or give the attempt up.
            match self.renew(owned, owned.stop_at).await {
                Ok(()) => {}
                Err(error) if retryable(&error).is_some() => {}
                Err(refusal) => return Self::lost_before_effect(refusal).map(Some),
            }
            if short(owned) != (false, false) {
                return self.decline(owned, previous).await.map(Some);
            }
        }
        Ok(None)
    }

    /// Runs the effect, renewing alongside, until it returns, the lease is
    /// lost or the attempt's time is up; records what it came to.
    async fn run_effect<E, F>(
        &mut self,
        owned: &Owned,
        context: EffectContext,
        cancel: watch::Sender<bool>,
        effect: &mut E,
    ) -> Result<Step, Error>
    where
        E: FnMut(EffectContext) -> F,
        F: Future<Output = Disposition>,
    {
        let ran = tokio::select! {
            disposition = effect(context) => Ok(disposition),
            refusal = self.keep_renewing(owned) => Err(Some(refusal)),
            () = sleep_until(owned.stop_at) => Err(None),
        };
        // The effect's future is gone by now; tell whatever it spawned.
        let _ = cancel.send(true);
        match ran {
            Ok(disposition) => self.report(owned, disposition, Source::Executed).await,
            Err(Some(refusal @ Error::LeaseLost { .. })) => self.superseded(owned, refusal).await,
            Err(refusal) => {
                // Cancelled at the attempt deadline, or a Renew refused for
                // another reason: the effect may have happened.
                let abandoned = self
                    .report(
                        owned,
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
    pub(super) async fn reconcile<L, LF>(
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
    pub(super) fn previous_attempt(
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
    /// is refused (returns the refusal) or the lease reaches the attempt
    /// deadline (never returns). Transient failures (already re-sent within
    /// the attempt by the retry policy) do not stop it: the fence, not the
    /// lease, decides who may write.
    pub(super) async fn keep_renewing(&self, owned: &Owned) -> Error {
        let (since, granted) = owned.lease();
        let Some(mut due) = next_renewal(since, granted, owned.attempt_deadline) else {
            return std::future::pending().await;
        };
        loop {
            sleep_until(due.max(Instant::now() + Duration::from_millis(5))).await;
            if Instant::now() >= owned.attempt_deadline {
                return std::future::pending().await;
            }
            match self.renew(owned, owned.attempt_deadline).await {
                Ok(()) => {
                    let (since, granted) = owned.lease();
                    match next_renewal(since, granted, owned.attempt_deadline) {
                        Some(next) => due = next,
                        None => return std::future::pending().await,
                    }
                }
                Err(error) if retryable(&error).is_some() => {
                    due = Instant::now() + renewal_retry_pause(owned.lease().1);
                }
                Err(refusal) if renewals_stop_but_the_attempt_goes_on(&refusal) => {
                    return std::future::pending().await;
                }
                Err(refusal) => return refusal,
            }
        }
    }

    /// One Renew (re-sent on transient failures until `until`); the lease
    /// granted counts from its send.
    pub(super) async fn renew(&self, owned: &Owned, until: Instant) -> Result<(), Error> {
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
    pub(super) fn lost_before_effect(refusal: Error) -> Result<Step, Error> {
        match refusal {
            Error::LeaseLost { .. } => Ok(Step::Reclaim(Duration::ZERO)),
            refusal => Err(refusal),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn an_earlier_attempts_deadline_counts_from_the_reply_and_absent_assumes_a_whole_attempt()
     {
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
    fn background_renewals_fall_due_a_third_into_each_grant_until_the_lease_reaches_the_deadline() {
        let since = Instant::now();
        let deadline = since + Duration::from_secs(300);
        assert_eq!(
            next_renewal(since, Duration::from_secs(30), deadline),
            Some(since + Duration::from_secs(10))
        );
        // The grant ends at the attempt deadline (or within a millisecond of it):
        // nothing more to renew.
        assert_eq!(
            next_renewal(since, Duration::from_secs(300), deadline),
            None
        );
        assert_eq!(
            next_renewal(since, Duration::from_micros(299_999_500), deadline),
            None
        );
        assert!(next_renewal(since, Duration::from_millis(299_998), deadline).is_some());
    }

    #[test]
    fn a_lease_under_half_of_the_one_asked_for_is_renewed_before_the_effect() {
        // A 2 s lease re-sent after 1.25 s is answered with the 0.75 s left.
        assert!(renew_first(
            Duration::from_millis(750),
            Duration::from_secs(2)
        ));
        assert!(renew_first(
            Duration::from_secs(14),
            Duration::from_secs(30)
        ));
        assert!(!renew_first(
            Duration::from_secs(15),
            Duration::from_secs(30)
        ));
    }

    #[test]
    fn state_forbids_stops_the_renewals_and_nothing_else_does() {
        let refused = |reason: &str| Error::FailedPrecondition {
            reason: reason.into(),
            operation_id: None,
            state: None,
            message: String::new(),
        };
        assert!(renewals_stop_but_the_attempt_goes_on(&refused(
            "STATE_FORBIDS"
        )));
        assert!(!renewals_stop_but_the_attempt_goes_on(&refused(
            "ATTEMPT_DEADLINE_PASSED"
        )));
        assert!(!renewals_stop_but_the_attempt_goes_on(&refused(
            "LEASE_STILL_LIVE"
        )));
    }

    #[test]
    fn a_failed_background_renew_is_tried_again_after_a_tenth_of_the_grant_within_bounds() {
        assert_eq!(
            renewal_retry_pause(Duration::from_secs(3)),
            Duration::from_millis(300)
        );
        assert_eq!(
            renewal_retry_pause(Duration::from_millis(100)),
            Duration::from_millis(50)
        );
        assert_eq!(
            renewal_retry_pause(Duration::from_secs(30)),
            Duration::from_secs(1)
        );
    }

    #[test]
    pub(super) fn a_negative_lookup_counts_only_if_started_once_the_earlier_attempt_settled() {
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
}
