//! The one retry policy every RPC of [`crate::Client`] goes through.
//!
//! Re-sent unchanged (same claim_token, same fence, same result), with
//! exponential backoff and full jitter, within a number of sends and a total
//! deadline: UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED and transport
//! errors (no answer from idemd). Every idemd RPC is safe to re-send after
//! those: a re-sent Claim with the owner's claim_token gets the same answer, a
//! re-sent Complete/Fail/Reconcile the original's. A RetryInfo delay is the
//! least wait. Never re-sent: INVALID_ARGUMENT, FAILED_PRECONDITION,
//! PERMISSION_DENIED, UNAUTHENTICATED, NOT_FOUND, ABORTED and everything else:
//! sending the same request again cannot change their answer.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::Error;

/// How often and how long a call is re-sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Sends in all, the first included. 1 means never re-send.
    pub max_sends: u32,
    /// The backoff cap of the first re-send; doubled for each one after.
    pub initial_backoff: Duration,
    /// The largest backoff cap.
    pub max_backoff: Duration,
    /// No re-send starts later than this after the first send.
    pub total_deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_sends: 8,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            total_deadline: Duration::from_secs(20),
        }
    }
}

/// Whether an error may be re-sent unchanged, and the least wait before it
/// (RetryInfo's delay).
pub fn retryable(error: &Error) -> Option<Duration> {
    match error {
        Error::Unavailable { retry_after, .. } | Error::ResourceExhausted { retry_after, .. } => {
            Some(retry_after.unwrap_or_default())
        }
        Error::DeadlineExceeded { .. } | Error::Transport { .. } => Some(Duration::ZERO),
        _ => None,
    }
}

impl RetryPolicy {
    /// Never re-send.
    pub fn none() -> Self {
        Self {
            max_sends: 1,
            ..Self::default()
        }
    }

    /// After the `sends`-th send failed with `error`, `elapsed` after the
    /// first send: how long to wait before re-sending it, or `None` to give up
    /// and return the error. Full jitter: a uniform draw from zero to the
    /// capped exponential backoff, raised to RetryInfo's delay; given up when
    /// that would start the re-send past `total_deadline`.
    pub fn next_delay(
        &self,
        error: &Error,
        sends: u32,
        elapsed: Duration,
        jitter: &mut Jitter,
    ) -> Option<Duration> {
        let least = retryable(error)?;
        if sends >= self.max_sends {
            return None;
        }
        let doublings = sends.saturating_sub(1).min(31);
        let cap = self
            .initial_backoff
            .saturating_mul(1u32 << doublings)
            .min(self.max_backoff);
        let delay = jitter.up_to(cap).max(least);
        (elapsed.saturating_add(delay) <= self.total_deadline).then_some(delay)
    }

    /// The re-send decision of one call (every send of every RPC goes
    /// through it, and so do the protocol vectors' scripted sends): after
    /// the `sends`-th send, begun first at `first_sent`, failed with `error`
    /// at `now`, how long to wait before re-sending it unchanged, or `None`
    /// to give up and return the error: never when the re-send would start
    /// at or past `until`.
    pub(crate) fn resend_after(
        &self,
        error: &Error,
        sends: u32,
        first_sent: Instant,
        now: Instant,
        until: Option<Instant>,
        jitter: &mut Jitter,
    ) -> Option<Duration> {
        let delay = self.next_delay(
            error,
            sends,
            now.saturating_duration_since(first_sent),
            jitter,
        )?;
        if until.is_some_and(|until| now + delay >= until) {
            return None;
        }
        Some(delay)
    }
}

/// A small pseudo-random source for backoff jitter (SplitMix64): seeded from
/// the OS for use, from a number for deterministic tests, or none at all
/// (every draw zero: each re-send waits only what RetryInfo asks). Not for
/// secrets: claim tokens come from the OS directly.
#[derive(Debug, Clone)]
pub struct Jitter(Option<u64>);

impl Jitter {
    pub fn seeded(seed: u64) -> Self {
        Self(Some(seed))
    }

    /// No jitter: every draw is zero (the protocol vectors' sends).
    pub fn none() -> Self {
        Self(None)
    }

    /// Seeded from the OS; a fixed seed if it has no randomness (jitter
    /// only spreads load, it protects nothing).
    pub fn from_entropy() -> Self {
        let mut seed = [0u8; 8];
        let _ = getrandom::fill(&mut seed);
        Self::seeded(u64::from_le_bytes(seed))
    }

    fn next_u64(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = *state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    /// Uniform in `[0, cap]`, to the nanosecond.
    pub fn up_to(&mut self, cap: Duration) -> Duration {
        let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
        let Some(state) = self.0.as_mut() else {
            return Duration::ZERO;
        };
        if nanos == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(Self::next_u64(state) % nanos.saturating_add(1))
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    fn unavailable(retry_after: Option<Duration>) -> Error {
        Error::Unavailable {
            retry_after,
            message: String::new(),
        }
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_sends: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(400),
            total_deadline: Duration::from_secs(10),
        }
    }

    #[test]
    fn transient_errors_are_resent_and_refusals_never() {
        let transient = [
            unavailable(None),
            Error::ResourceExhausted {
                retry_after: None,
                message: String::new(),
            },
            Error::DeadlineExceeded {
                message: String::new(),
            },
            Error::Transport {
                code: Code::Unknown,
                message: String::new(),
            },
        ];
        for error in &transient {
            assert!(retryable(error).is_some(), "{error:?} is re-sent");
        }
        let refusals = [
            Error::InvalidArgument {
                field_violations: Vec::new(),
                message: String::new(),
            },
            Error::Conflict {
                operation_id: "op".into(),
            },
            Error::FailedPrecondition {
                reason: "LEASE_STILL_LIVE".into(),
                operation_id: None,
                state: None,
                message: String::new(),
            },
            Error::PermissionDenied {
                message: String::new(),
            },
            Error::Unauthenticated {
                reason: "INVALID_CREDENTIALS".into(),
                message: String::new(),
            },
            Error::NotFound {
                message: String::new(),
            },
            Error::LeaseLost {
                operation_id: "op".into(),
                current_fence: Some(2),
                state: None,
            },
            Error::Internal {
                message: String::new(),
            },
            Error::Unknown {
                reason: String::new(),
                code: Code::Aborted,
                message: String::new(),
            },
        ];
        let mut jitter = Jitter::seeded(1);
        for error in &refusals {
            assert_eq!(retryable(error), None, "{error:?} is never re-sent");
            assert_eq!(
                policy().next_delay(error, 1, Duration::ZERO, &mut jitter),
                None
            );
        }
    }

    #[test]
    fn backoff_is_full_jitter_under_a_doubling_cap() {
        let policy = policy();
        let mut jitter = Jitter::seeded(42);
        let caps = [100, 200, 400, 400];
        for _ in 0..200 {
            for (sends, cap) in (1..).zip(caps) {
                let delay = policy
                    .next_delay(&unavailable(None), sends, Duration::ZERO, &mut jitter)
                    .expect("within the budget");
                assert!(delay <= Duration::from_millis(cap), "{sends}: {delay:?}");
            }
        }
        // Full jitter spreads the draws over the whole range, not near the cap.
        let draws: Vec<Duration> = (0..200)
            .map(|_| {
                policy
                    .next_delay(&unavailable(None), 3, Duration::ZERO, &mut jitter)
                    .expect("within the budget")
            })
            .collect();
        assert!(
            draws
                .iter()
                .any(|delay| *delay < Duration::from_millis(100))
        );
        assert!(
            draws
                .iter()
                .any(|delay| *delay > Duration::from_millis(300))
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_delays() {
        let delays = |seed| {
            let mut jitter = Jitter::seeded(seed);
            (1..5)
                .map(|sends| {
                    policy().next_delay(&unavailable(None), sends, Duration::ZERO, &mut jitter)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(delays(7), delays(7));
        assert_ne!(delays(7), delays(8));
    }

    #[test]
    fn retry_info_is_the_least_delay() {
        let mut jitter = Jitter::seeded(3);
        for _ in 0..100 {
            let delay = policy()
                .next_delay(
                    &unavailable(Some(Duration::from_secs(1))),
                    1,
                    Duration::ZERO,
                    &mut jitter,
                )
                .expect("within the budget");
            assert!(delay >= Duration::from_secs(1), "{delay:?}");
        }
    }

    #[test]
    fn sends_and_the_total_deadline_bound_the_retries() {
        let policy = policy();
        let mut jitter = Jitter::seeded(5);
        assert_eq!(
            policy.next_delay(&unavailable(None), 5, Duration::ZERO, &mut jitter),
            None,
            "the fifth send was the last"
        );
        assert!(
            policy
                .next_delay(&unavailable(None), 4, Duration::ZERO, &mut jitter)
                .is_some()
        );
        assert_eq!(
            policy.next_delay(
                &unavailable(Some(Duration::from_secs(2))),
                1,
                Duration::from_secs(9),
                &mut jitter
            ),
            None,
            "a re-send that would start past the total deadline is not made"
        );
        assert_eq!(
            RetryPolicy::none().next_delay(&unavailable(None), 1, Duration::ZERO, &mut jitter),
            None
        );
    }
}
