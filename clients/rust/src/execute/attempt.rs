//! One owned attempt's state, as the protocol core keeps it: its lease and
//! deadlines (local instants), its margins, its background renewals, and the
//! requests that speak for it. Pure: every instant comes in from the caller.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::{DeadlineSource, EffectContext, PreviousAttempt, proto_duration, std_duration};
use crate::error::Error;
use crate::proto;

/// The attempt margin's bounds (docs/client-protocol.md, "The constants"): a
/// tenth of the attempt, within these.
const MIN_ATTEMPT_MARGIN: Duration = Duration::from_millis(50);
const MAX_ATTEMPT_MARGIN: Duration = Duration::from_secs(1);

/// What an attempt stopped at its cancel point reports (Fail UNKNOWN), and
/// what one that never started the effect reports (Fail NOT_STARTED): one
/// value each, the same in every client, so that a re-sent report is the
/// same request, answered from the first one's receipt.
pub(super) const ATTEMPT_DEADLINE_REPORT: (&str, &str) = (
    "attempt_deadline",
    "the effect was cancelled at the attempt deadline",
);
pub(super) const NOT_STARTED_REPORT: (&str, &str) = (
    "not_started",
    "the effect was not started: too little of the lease or attempt was left, or an earlier \
     attempt may still be running",
);

/// Why an attempt must stop now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Interruption {
    /// Another owner took over (LEASE_LOST).
    Lost,
    /// The attempt's time is up: its cancel point, or ATTEMPT_DEADLINE_PASSED
    /// (nobody took over).
    Stopped,
}

/// A refusal that ends the attempt's hold on the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lost {
    Lease,
    AttemptDeadlinePassed,
}

pub(super) fn is_refused(error: &Error, reason: &str) -> bool {
    matches!(error, Error::FailedPrecondition { reason: given, .. } if given == reason)
}

/// The margin of an attempt of this length: a tenth, within [50 ms, 1 s].
pub(super) fn attempt_margin(attempt: Duration) -> Duration {
    (attempt / 10).clamp(MIN_ATTEMPT_MARGIN, MAX_ATTEMPT_MARGIN)
}

/// The pause before another try after a background Renew whose re-sends all
/// failed: a tenth of the grant, within [50 ms, 1 s].
pub(super) fn renewal_retry_pause(granted: Duration) -> Duration {
    (granted / 10).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// One owned attempt.
#[derive(Debug)]
pub(super) struct Attempt {
    pub(super) operation_id: String,
    pub(super) fence: u64,
    pub(super) number: u32,
    /// The lease asked for (the renew-first threshold and the lease margin
    /// are judged against it, not the grant: half of a remnant is no margin).
    lease_asked: Duration,
    /// Room before the attempt deadline to stop the effect and report it;
    /// the effect is not started with less than this before `cancel_at`.
    pub(super) margin: Duration,
    /// The least lease the effect starts with, even after a Renew.
    pub(super) lease_margin: Duration,
    /// Where the effect is cancelled: the attempt deadline less the margin.
    pub(super) cancel_at: Instant,
    /// The lease as last granted, and when it runs out (counted from the
    /// start of the answered send of the Claim or Renew that granted it).
    granted: Duration,
    lease_expires_at: Instant,
    /// The attempt deadline; a Renew may shorten it, never lengthen it.
    pub(super) deadline_at: Instant,
    /// Set just before the effect starts: until then nothing ran, and an
    /// attempt that cannot go on declines instead of reporting UNKNOWN.
    pub(super) started: bool,
    lost: Option<Lost>,
    /// The background renewals: stopped (STATE_FORBIDS), or retrying at an
    /// instant after a Renew whose re-sends all failed.
    renewals_stopped: bool,
    renewal_retry_at: Option<Instant>,
    pub(super) context: EffectContext,
    cancel: watch::Sender<bool>,
}

impl Attempt {
    /// The attempt an Acquired or ReconcileFirst answer hands over. The lease
    /// and the attempt deadline count from `sent_at`, the start of the
    /// answered send (the early end: the server counted them from its
    /// handling of that very send); the earlier attempt's deadline counts
    /// from `received_at`, the reply (the late end: the server measured it
    /// somewhere between, and a long-polled or re-sent Claim may have been
    /// sent long before).
    pub(super) fn new(
        ownership: proto::Ownership,
        reconcile_first: Option<&proto::ReconcileFirst>,
        (sent_at, received_at): (Instant, Instant),
        lease_asked: Duration,
    ) -> Self {
        let duration = std_duration(ownership.attempt_deadline);
        let granted = std_duration(ownership.lease);
        let deadline_at = sent_at + duration;
        let margin = attempt_margin(duration);
        let cancel_at = deadline_at.checked_sub(margin).unwrap_or(sent_at);
        let previous = reconcile_first.map(|first| {
            let (left, deadline_source) = match first.previous_attempt_deadline {
                Some(left) => (std_duration(Some(left)), DeadlineSource::Server),
                // An older server: the earlier attempt may have started just
                // before this Claim was handled, so it may run a whole
                // attempt duration from then.
                None => (duration, DeadlineSource::Assumed),
            };
            PreviousAttempt {
                state: first.previous_state(),
                fence: first.previous_fence,
                attempt_deadline: received_at + left,
                deadline_source,
            }
        });
        let (cancel, cancelled) = watch::channel(false);
        let context = EffectContext {
            operation_id: ownership.operation_id.clone(),
            fence: ownership.fence,
            attempt: ownership.attempt,
            max_attempts: ownership.max_attempts,
            attempt_deadline: deadline_at,
            previous,
            cancelled,
        };
        Self {
            operation_id: ownership.operation_id,
            fence: ownership.fence,
            number: ownership.attempt,
            lease_asked,
            margin,
            lease_margin: margin.min(lease_asked / 3),
            cancel_at,
            granted,
            lease_expires_at: sent_at + granted,
            deadline_at,
            started: false,
            lost: None,
            renewals_stopped: false,
            renewal_retry_at: None,
            context,
            cancel,
        }
    }

    /// When the earlier attempt (ReconcileFirst) has settled, if there is one.
    pub(super) fn previous_settles_at(&self) -> Option<Instant> {
        self.context
            .previous
            .as_ref()
            .map(|previous| previous.attempt_deadline)
    }

    pub(super) fn lease_left(&self, now: Instant) -> Duration {
        self.lease_expires_at.saturating_duration_since(now)
    }

    pub(super) fn attempt_left(&self, now: Instant) -> Duration {
        self.cancel_at.saturating_duration_since(now)
    }

    /// Whether the effect waits for one Renew first: with less than half of
    /// the lease asked for left.
    pub(super) fn renew_first(&self, now: Instant) -> bool {
        self.lease_left(now) < self.lease_asked / 2
    }

    /// The re-check after that Renew: too little lease or attempt left.
    pub(super) fn too_short_to_start(&self, now: Instant) -> bool {
        self.lease_left(now) < self.lease_margin || self.attempt_left(now) < self.margin
    }

    pub(super) fn is_lost(&self) -> bool {
        self.lost.is_some()
    }

    /// Why the attempt must stop now, if it must.
    pub(super) fn interruption(&self, now: Instant) -> Option<Interruption> {
        match self.lost {
            Some(Lost::Lease) => Some(Interruption::Lost),
            Some(Lost::AttemptDeadlinePassed) => Some(Interruption::Stopped),
            None => (now >= self.cancel_at).then_some(Interruption::Stopped),
        }
    }

    /// Tells whatever the effect spawned that this attempt is over.
    pub(super) fn cancel(&self) {
        self.cancel.send_replace(true);
    }

    /// A refusal of a Renew that ends this attempt's hold (LEASE_LOST,
    /// ATTEMPT_DEADLINE_PASSED) marks the lease lost; `false` for any other.
    pub(super) fn mark_lost_by(&mut self, refusal: &Error) -> bool {
        let lost = match refusal {
            Error::LeaseLost { .. } => Lost::Lease,
            refusal if is_refused(refusal, "ATTEMPT_DEADLINE_PASSED") => {
                Lost::AttemptDeadlinePassed
            }
            _ => return false,
        };
        self.lost.get_or_insert(lost);
        self.cancel();
        true
    }

    /// A Renew's answer: the lease counts from the Renew's answered send; the
    /// attempt deadline may shrink, never grow.
    pub(super) fn renewed(&mut self, renewed: &proto::RenewResponse, sent_at: Instant) {
        self.granted = std_duration(renewed.lease);
        self.lease_expires_at = sent_at + self.granted;
        self.deadline_at = self
            .deadline_at
            .min(sent_at + std_duration(renewed.attempt_deadline));
    }

    /// When the next background Renew is due: a third into the grant (or
    /// the retry after a failed one); `None` once the renewals are over (the
    /// lease lost, STATE_FORBIDS, or the lease reaching the attempt deadline
    /// within 1 ms, where Renew cannot extend it).
    pub(super) fn renewal_due(&self) -> Option<Instant> {
        let reaches_deadline = self.lease_expires_at + Duration::from_millis(1) >= self.deadline_at;
        if self.lost.is_some() || self.renewals_stopped || reaches_deadline {
            return None;
        }
        Some(self.renewal_retry_at.unwrap_or_else(|| {
            self.lease_expires_at
                .checked_sub(self.granted * 2 / 3)
                .unwrap_or(self.lease_expires_at)
        }))
    }

    /// A background Renew's answer; `true` when the work it guards must stop
    /// (the lease lost, or ATTEMPT_DEADLINE_PASSED).
    pub(super) fn background_renewal(
        &mut self,
        answer: Result<(&proto::RenewResponse, Instant), &Error>,
        now: Instant,
    ) -> bool {
        match answer {
            Ok((renewed, sent_at)) => {
                self.renewed(renewed, sent_at);
                self.renewal_retry_at = None;
                false
            }
            Err(refusal) if self.mark_lost_by(refusal) => true,
            // Marked UNKNOWN by a Claim after the lease ran out: no more
            // renewals, but the owner may still write up to its deadline.
            Err(refusal) if is_refused(refusal, "STATE_FORBIDS") => {
                self.renewals_stopped = true;
                false
            }
            // Transient failures past the re-sends, or any other refusal:
            // try again shortly. The lease may lapse; then a new owner
            // reconciles first, which is safe.
            Err(_) => {
                self.renewal_retry_at = Some(now + renewal_retry_pause(self.granted));
                false
            }
        }
    }

    pub(super) fn renew_request(&self) -> proto::RenewRequest {
        proto::RenewRequest {
            operation_id: self.operation_id.clone(),
            fence: self.fence,
            lease: proto_duration(self.lease_asked),
        }
    }

    pub(super) fn fail_request(
        &self,
        disposition: proto::FailDisposition,
        error: proto::OperationError,
        retry_after: Option<Duration>,
    ) -> proto::FailRequest {
        proto::FailRequest {
            operation_id: self.operation_id.clone(),
            fence: self.fence,
            disposition: disposition.into(),
            error: Some(error),
            retry_after: retry_after.and_then(proto_duration),
        }
    }

    pub(super) fn report(
        &self,
        disposition: proto::FailDisposition,
        (code, message): (&str, &str),
    ) -> proto::FailRequest {
        let error = proto::OperationError {
            code: code.into(),
            message: message.into(),
            ..Default::default()
        };
        self.fail_request(disposition, error, None)
    }

    /// Fail NOT_STARTED; no retry_after (with NOT_STARTED it is
    /// INVALID_ARGUMENT).
    pub(super) fn decline_request(&self) -> proto::FailRequest {
        self.report(proto::FailDisposition::NotStarted, NOT_STARTED_REPORT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(lease: Duration, attempt: Duration) -> (Attempt, Instant) {
        let sent_at = Instant::now();
        let ownership = proto::Ownership {
            operation_id: "op".into(),
            fence: 3,
            attempt: 1,
            lease: proto_duration(lease),
            attempt_deadline: proto_duration(attempt),
            ..Default::default()
        };
        (
            Attempt::new(ownership, None, (sent_at, sent_at), lease),
            sent_at,
        )
    }

    #[test]
    fn the_margin_is_a_tenth_of_the_attempt_within_bounds() {
        assert_eq!(
            attempt_margin(Duration::from_secs(3)),
            Duration::from_millis(300)
        );
        assert_eq!(
            attempt_margin(Duration::from_millis(100)),
            Duration::from_millis(50)
        );
        assert_eq!(
            attempt_margin(Duration::from_secs(300)),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn background_renewals_fall_due_a_third_into_each_grant_until_the_lease_reaches_the_deadline() {
        let (renewing, sent_at) = attempt(Duration::from_secs(30), Duration::from_secs(300));
        assert_eq!(
            renewing.renewal_due(),
            Some(sent_at + Duration::from_secs(10))
        );
        let (whole, _) = attempt(Duration::from_secs(300), Duration::from_secs(300));
        assert_eq!(whole.renewal_due(), None);
        let (nearly, _) = attempt(Duration::from_micros(299_999_500), Duration::from_secs(300));
        assert_eq!(nearly.renewal_due(), None);
    }

    #[test]
    fn state_forbids_stops_the_renewals_and_other_refusals_retry_after_a_pause() {
        let refused = |reason: &str| Error::FailedPrecondition {
            reason: reason.into(),
            operation_id: None,
            state: None,
            message: String::new(),
        };
        let (mut renewing, sent_at) = attempt(Duration::from_secs(3), Duration::from_secs(300));
        let now = sent_at + Duration::from_secs(1);
        assert!(!renewing.background_renewal(Err(&refused("LEASE_STILL_LIVE")), now));
        assert_eq!(
            renewing.renewal_due(),
            Some(now + Duration::from_millis(300))
        );
        assert!(!renewing.background_renewal(Err(&refused("STATE_FORBIDS")), now));
        assert_eq!(renewing.renewal_due(), None);
        assert!(!renewing.is_lost());

        let (mut ending, _) = attempt(Duration::from_secs(3), Duration::from_secs(300));
        assert!(ending.background_renewal(Err(&refused("ATTEMPT_DEADLINE_PASSED")), now));
        assert_eq!(ending.interruption(now), Some(Interruption::Stopped));
        assert!(*ending.context.cancelled.borrow());
    }

    #[test]
    fn a_renew_never_lengthens_the_attempt_deadline() {
        let (mut renewing, sent_at) = attempt(Duration::from_secs(30), Duration::from_secs(60));
        let later = sent_at + Duration::from_secs(10);
        renewing.renewed(
            &proto::RenewResponse {
                lease: proto_duration(Duration::from_secs(30)),
                attempt_deadline: proto_duration(Duration::from_secs(55)),
            },
            later,
        );
        assert_eq!(renewing.deadline_at, sent_at + Duration::from_secs(60));
        renewing.renewed(
            &proto::RenewResponse {
                lease: proto_duration(Duration::from_secs(30)),
                attempt_deadline: proto_duration(Duration::from_secs(40)),
            },
            later,
        );
        assert_eq!(renewing.deadline_at, later + Duration::from_secs(40));
    }
}
