//! Claim: the command, and how long the caller will wait for a pending
//! answer to change.

use chrono::TimeDelta;

use super::fields::{check_between, describe, duration_or_default, within};
use crate::command::ClaimCommand;
use crate::error::{Error, Result, Violations};
use crate::limits::Limits;
use crate::model::OnFailed;
use crate::requested::ClaimRequested;

impl Limits {
    /// The command, and how long the caller is willing to wait for a pending
    /// answer to change.
    pub fn claim(
        &self,
        requested: ClaimRequested,
        mut violations: Violations,
    ) -> Result<(ClaimCommand, TimeDelta)> {
        let scope = self.scope("scope", requested.scope, &mut violations);
        let fingerprint = self.fingerprint_of(requested.identity, &mut violations);
        self.check_claim_token("claim_token", &requested.claim_token, &mut violations);
        let lease = duration_or_default(
            "lease",
            requested.lease,
            self.default_lease,
            (self.min_lease, self.max_lease),
            &mut violations,
        );
        // By default an attempt outlasts its first lease, whatever lease was
        // asked for; asked for both, an attempt shorter than its own lease
        // is a contradiction, refused rather than silently cut short.
        let max_attempt_duration = duration_or_default(
            "max_attempt_duration",
            requested.max_attempt_duration,
            self.default_max_attempt_duration.max(lease),
            (self.min_lease, self.max_attempt_duration),
            &mut violations,
        );
        if let (Some(asked_lease), Some(asked_attempt)) =
            (requested.lease, requested.max_attempt_duration)
            && within(asked_lease, (self.min_lease, self.max_lease))
            && within(asked_attempt, (self.min_lease, self.max_attempt_duration))
            && asked_attempt < asked_lease
        {
            violations.add(
                "max_attempt_duration",
                format!("must be at least the lease ({})", describe(asked_lease)),
            );
        }
        let max_attempts = match requested.max_attempts {
            0 => self.default_max_attempts,
            asked if asked > self.max_attempts => {
                violations.add(
                    "max_attempts",
                    format!("must be at most {}", self.max_attempts),
                );
                asked
            }
            asked => asked,
        };
        let operation_deadline = requested
            .operation_deadline
            .or(self.default_operation_deadline);
        let retry_window = RetryWindow::of(operation_deadline, max_attempts, max_attempt_duration);
        // Retention never shorter than the retry window: a retry after the
        // result expired (and, later, its tombstone) would run the effect
        // again. Asked for, a shorter one is refused; by default, it grows
        // to the window, up to the longest allowed.
        let retention = duration_or_default(
            "retention",
            requested.retention,
            self.default_retention
                .max(retry_window.length.min(self.max_retention)),
            (TimeDelta::zero(), self.max_retention),
            &mut violations,
        );
        // Judged only from a valid budget: a refused one is named already.
        let window_known = max_attempts <= self.max_attempts
            && within(
                max_attempt_duration,
                (self.min_lease, self.max_attempt_duration),
            )
            && operation_deadline.is_none_or(|deadline| {
                within(deadline, (self.min_lease, self.max_operation_deadline))
            });
        if window_known
            && retention < retry_window.length
            && within(retention, (TimeDelta::zero(), self.max_retention))
        {
            let asked = match requested.retention {
                Some(_) => describe(retention),
                None => format!("its longest allowed, {}", describe(self.max_retention)),
            };
            violations.add(
                "retention",
                format!(
                    "must be at least the operation's retry window, {}, not {asked}: a retry \
                     after the result expired would run the effect again",
                    retry_window.describe()
                ),
            );
        }
        if let Some(deadline) = requested.operation_deadline {
            check_between(
                "operation_deadline",
                deadline,
                (self.min_lease, self.max_operation_deadline),
                &mut violations,
            );
        }
        // Clamped, never refused: a caller that will wait long takes the
        // server's cap (and the server keeps its bound on waiters).
        let wait = match requested.wait {
            None => TimeDelta::zero(),
            Some(asked) if asked < TimeDelta::zero() => {
                violations.add("wait", "must be a non-negative duration");
                TimeDelta::zero()
            }
            Some(asked) => asked.min(self.max_wait),
        };
        let previous_fingerprints =
            self.previous_fingerprints(requested.previous_fingerprints, &mut violations);
        violations.into_result()?;
        let fingerprint = fingerprint
            .ok_or_else(|| Error::Internal("fingerprint missing after validation".into()))?;
        Ok((
            ClaimCommand {
                scope,
                fingerprint,
                claim_token: requested.claim_token,
                lease,
                max_attempt_duration,
                max_attempts,
                retention,
                operation_deadline,
                // The server's own: the replay. A policy may opt in.
                on_failed: OnFailed::Replay,
                clock_margin: self.clock_margin,
                previous_fingerprints,
                // Holds are the service's to know.
                held: None,
            },
            wait,
        ))
    }
}

/// How long a caller may retry an operation: until its operation deadline,
/// or, without one, for its whole attempt budget (each attempt at most its
/// duration).
struct RetryWindow {
    length: TimeDelta,
    operation_deadline: Option<TimeDelta>,
    max_attempts: u32,
    max_attempt_duration: TimeDelta,
}

impl RetryWindow {
    fn of(
        operation_deadline: Option<TimeDelta>,
        max_attempts: u32,
        max_attempt_duration: TimeDelta,
    ) -> Self {
        let length = operation_deadline.unwrap_or_else(|| {
            max_attempt_duration
                .checked_mul(i32::try_from(max_attempts).unwrap_or(i32::MAX))
                .unwrap_or(TimeDelta::MAX)
        });
        Self {
            length,
            operation_deadline,
            max_attempts,
            max_attempt_duration,
        }
    }

    fn describe(&self) -> String {
        match self.operation_deadline {
            Some(deadline) => format!("the operation deadline, {}", describe(deadline)),
            None => format!(
                "max_attempts ({}) × max_attempt_duration ({}) = {}",
                self.max_attempts,
                describe(self.max_attempt_duration),
                describe(self.length)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use crate::admit::testing::{claim_requested, refused_fields, violations_of};
    use crate::error::{Error, FieldViolation, Violations};
    use crate::fingerprint;
    use crate::limits::Limits;
    use crate::model::Fingerprint;
    use crate::requested::ClaimRequested;

    #[test]
    fn a_claim_that_leaves_everything_out_gets_the_defaults() {
        let limits = Limits::default();
        let (command, wait) = limits
            .claim(claim_requested(), Violations::default())
            .expect("valid");
        assert_eq!(command.lease, limits.default_lease);
        assert_eq!(
            command.max_attempt_duration,
            limits.default_max_attempt_duration
        );
        assert_eq!(command.max_attempts, limits.default_max_attempts);
        assert_eq!(command.retention, limits.default_retention);
        assert_eq!(command.operation_deadline, None);
        assert_eq!(command.fingerprint, fingerprint::of_bytes(b"payload"));
        assert_eq!(wait, TimeDelta::zero());
    }

    #[test]
    fn max_attempt_duration_defaults_to_outlast_a_lease_longer_than_the_default() {
        let limits = Limits::default();
        let lease = limits.default_max_attempt_duration + TimeDelta::minutes(10);
        let requested = ClaimRequested {
            lease: Some(lease),
            ..claim_requested()
        };
        let (command, _) = limits
            .claim(requested, Violations::default())
            .expect("valid");
        assert_eq!(command.max_attempt_duration, lease);
    }

    /// The one violation of `requested`, which must be on `retention`.
    fn retention_refusal(limits: &Limits, requested: ClaimRequested) -> String {
        let violations = violations_of(limits.claim(requested, Violations::default()));
        match violations.as_slice() {
            [FieldViolation { field, description }] if field == "retention" => description.clone(),
            other => panic!("expected one violation on retention, got {other:?}"),
        }
    }

    #[test]
    fn retention_shorter_than_the_retry_window_is_refused_naming_both() {
        let limits = Limits::default();
        // Five attempts of five minutes (the defaults): retried for 25 minutes.
        let short = ClaimRequested {
            retention: Some(TimeDelta::minutes(10)),
            ..claim_requested()
        };
        assert_eq!(
            retention_refusal(&limits, short),
            "must be at least the operation's retry window, max_attempts (5) × \
             max_attempt_duration (5m) = 25m, not 10m: a retry after the result expired would \
             run the effect again"
        );
        // With an operation deadline, retried until it.
        let deadline = ClaimRequested {
            retention: Some(TimeDelta::hours(1)),
            operation_deadline: Some(TimeDelta::hours(2)),
            ..claim_requested()
        };
        assert!(retention_refusal(&limits, deadline).starts_with(
            "must be at least the operation's retry window, the operation \
                              deadline, 2h, not 1h"
        ),);
        // Zero retention (no replay at all) is refused as well.
        let none = ClaimRequested {
            retention: Some(TimeDelta::zero()),
            ..claim_requested()
        };
        assert!(retention_refusal(&limits, none).contains("not 0s"));
    }

    #[test]
    fn retention_as_long_as_the_retry_window_is_accepted() {
        let limits = Limits::default();
        for requested in [
            ClaimRequested {
                retention: Some(TimeDelta::minutes(25)),
                ..claim_requested()
            },
            ClaimRequested {
                retention: Some(TimeDelta::minutes(1)),
                max_attempts: 1,
                max_attempt_duration: Some(TimeDelta::minutes(1)),
                ..claim_requested()
            },
            ClaimRequested {
                retention: Some(TimeDelta::minutes(30)),
                operation_deadline: Some(TimeDelta::minutes(30)),
                max_attempts: 100,
                ..claim_requested()
            },
        ] {
            let (command, _) = limits
                .claim(requested.clone(), Violations::default())
                .expect("valid");
            assert_eq!(Some(command.retention), requested.retention);
        }
    }

    #[test]
    fn the_default_retention_grows_to_the_retry_window_within_the_longest_allowed() {
        let limits = Limits::default();
        let long_budget = ClaimRequested {
            max_attempts: 100,
            max_attempt_duration: Some(TimeDelta::hours(1)),
            ..claim_requested()
        };
        let (command, _) = limits
            .claim(long_budget, Violations::default())
            .expect("valid");
        assert_eq!(command.retention, TimeDelta::hours(100));

        let beyond = ClaimRequested {
            max_attempts: 100,
            max_attempt_duration: Some(TimeDelta::hours(24)),
            ..claim_requested()
        };
        assert_eq!(
            retention_refusal(&limits, beyond),
            "must be at least the operation's retry window, max_attempts (100) × \
             max_attempt_duration (24h) = 2400h, not its longest allowed, 720h: a retry after \
             the result expired would run the effect again"
        );
    }

    #[test]
    fn every_bad_claim_field_is_named_at_once_in_field_order() {
        let limits = Limits::default();
        let requested = ClaimRequested {
            scope: None,
            identity: None,
            claim_token: vec![0; limits.max_claim_token_bytes + 1],
            lease: Some(limits.max_lease + TimeDelta::seconds(1)),
            max_attempt_duration: Some(TimeDelta::zero()),
            max_attempts: limits.max_attempts + 1,
            retention: Some(limits.max_retention + TimeDelta::seconds(1)),
            operation_deadline: Some(TimeDelta::zero()),
            // Above the cap a wait is clamped; only a negative one is refused.
            wait: Some(TimeDelta::seconds(-1)),
            previous_fingerprints: vec![vec![0; 32], vec![0; 31]],
        };
        assert_eq!(
            refused_fields(limits.claim(requested, Violations::default())),
            [
                "scope",
                "request_identity",
                "claim_token",
                "lease",
                "max_attempt_duration",
                "max_attempts",
                "retention",
                "operation_deadline",
                "wait",
                "previous_fingerprints[1]"
            ]
        );
    }

    #[test]
    fn previous_fingerprints_are_bounded_and_kept_in_order() {
        let limits = Limits::default();
        let previous = |count: u8| ClaimRequested {
            previous_fingerprints: (0..count).map(|byte| vec![byte; 32]).collect(),
            ..claim_requested()
        };
        let (command, _) = limits
            .claim(previous(4), Violations::default())
            .expect("four are allowed");
        assert_eq!(
            command.previous_fingerprints,
            (0..4)
                .map(|byte| Fingerprint([byte; 32]))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            refused_fields(limits.claim(previous(5), Violations::default())),
            ["previous_fingerprints"]
        );
    }

    #[test]
    fn violations_the_transport_found_are_answered_with_the_rest() {
        let mut transport = Violations::default();
        transport.add("wait", "must be a non-negative duration");
        let requested = ClaimRequested {
            scope: None,
            ..claim_requested()
        };
        assert_eq!(
            refused_fields(Limits::default().claim(requested, transport)),
            ["wait", "scope"]
        );
    }

    #[test]
    fn bounds_read_in_units_a_caller_would_write() {
        let limits = Limits::default();
        let requested = ClaimRequested {
            lease: Some(TimeDelta::milliseconds(500)),
            ..claim_requested()
        };
        let Err(Error::InvalidArgument(violations)) =
            limits.claim(requested, Violations::default())
        else {
            panic!("a lease below the minimum is refused");
        };
        assert_eq!(
            violations,
            [FieldViolation::new("lease", "must be between 1s and 1h")]
        );
    }

    #[test]
    fn a_wait_above_the_cap_is_clamped_and_a_negative_one_refused() {
        let limits = Limits::default();
        let waiting = |wait| ClaimRequested {
            wait: Some(wait),
            ..claim_requested()
        };
        let (_, wait) = limits
            .claim(waiting(TimeDelta::hours(10)), Violations::default())
            .expect("a long wait is not an error");
        assert_eq!(wait, limits.max_wait);
        let (_, wait) = limits
            .claim(waiting(TimeDelta::seconds(2)), Violations::default())
            .expect("valid");
        assert_eq!(wait, TimeDelta::seconds(2));
        assert_eq!(
            refused_fields(limits.claim(waiting(TimeDelta::seconds(-1)), Violations::default())),
            ["wait"]
        );
    }

    #[test]
    fn an_attempt_shorter_than_its_own_lease_is_refused() {
        let limits = Limits::default();
        let asked = |lease, max_attempt_duration| ClaimRequested {
            lease: Some(lease),
            max_attempt_duration: Some(max_attempt_duration),
            ..claim_requested()
        };
        assert_eq!(
            violations_of(limits.claim(
                asked(TimeDelta::minutes(10), TimeDelta::minutes(2)),
                Violations::default()
            )),
            [FieldViolation::new(
                "max_attempt_duration",
                "must be at least the lease (10m)"
            )]
        );
        let (command, _) = limits
            .claim(
                asked(TimeDelta::minutes(10), TimeDelta::minutes(10)),
                Violations::default(),
            )
            .expect("an attempt as long as its lease");
        assert_eq!(command.max_attempt_duration, TimeDelta::minutes(10));
        // Only the attempt given, shorter than the default lease: the lease
        // is the server's choice, so it is cut to the attempt, not refused.
        let only_attempt = ClaimRequested {
            max_attempt_duration: Some(TimeDelta::seconds(10)),
            ..claim_requested()
        };
        limits
            .claim(only_attempt, Violations::default())
            .expect("the default lease gives way");
    }
}
