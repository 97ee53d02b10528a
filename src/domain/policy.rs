//! Per-operation policy: defaults and ceilings chosen by operation name.
//!
//! A payments team wants a short lease and a week of retention for
//! `payments.*`, an email sender a long attempt and one day; one server
//! serves both. A policy names operations by a pattern (an exact name, a
//! prefix ending in `*`, or `*` alone) and may set, for each duration and
//! for the attempt budget, the default a Claim gets when it leaves the field
//! out and the ceiling it may ask up to. The most specific pattern that
//! matches decides (an exact name, then the longest prefix, then `*`); what
//! a policy leaves unset is the server's own bound. A policy can only narrow
//! the server's ceilings, never widen them, and a Claim can only narrow a
//! policy's ceiling: asked for more, it is refused (INVALID_ARGUMENT) with
//! the policy named in the violation.
//!
//! Applied where a Claim is admitted: the first Claim of a scope stores what
//! it was given (lease, attempt duration and budget, retention, operation
//! deadline), and every later answer follows the stored values, so a policy
//! changed later applies to new operations only.

use std::fmt;

use chrono::TimeDelta;

use super::admit::describe;
use super::command::ClaimCommand;
use super::error::{Error, FieldViolation, Result, Violations};
use super::limits::Limits;
use super::model::OnFailed;
use super::requested::ClaimRequested;

/// Which operation names a policy applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperationPattern {
    /// `*`: every operation.
    Any,
    /// `payments.*`: every name starting with `payments.`.
    Prefix(String),
    /// `payments.charge`: that name only.
    Exact(String),
}

impl OperationPattern {
    /// An operation name (`[A-Za-z0-9._/-]`, 1-128 characters, as Claim
    /// requires), optionally ending in `*`; or `*` alone.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let allowed = |character: char| {
            character.is_ascii_alphanumeric() || matches!(character, '.' | '_' | '/' | '-')
        };
        let (name, prefix) = match text.strip_suffix('*') {
            Some(name) => (name, true),
            None => (text, false),
        };
        if prefix && name.is_empty() {
            return Ok(OperationPattern::Any);
        }
        if name.is_empty() || name.chars().count() > Limits::default().max_operation_chars {
            return Err(format!(
                "`{text}`: a pattern is an operation name (1-128 characters), a prefix \
                 ending in `*`, or `*`"
            ));
        }
        if !name.chars().all(allowed) {
            return Err(format!(
                "`{text}`: may contain only A-Z a-z 0-9 . _ / - and a final `*`"
            ));
        }
        Ok(if prefix {
            OperationPattern::Prefix(name.to_owned())
        } else {
            OperationPattern::Exact(name.to_owned())
        })
    }

    pub fn matches(&self, operation: &str) -> bool {
        match self {
            OperationPattern::Any => true,
            OperationPattern::Prefix(prefix) => operation.starts_with(prefix.as_str()),
            OperationPattern::Exact(name) => operation == name,
        }
    }

    /// Greater is more specific: an exact name, then longer prefixes, then
    /// `*`.
    fn specificity(&self) -> (u8, usize) {
        match self {
            OperationPattern::Any => (0, 0),
            OperationPattern::Prefix(prefix) => (1, prefix.len()),
            OperationPattern::Exact(name) => (2, name.len()),
        }
    }
}

impl fmt::Display for OperationPattern {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OperationPattern::Any => formatter.write_str("*"),
            OperationPattern::Prefix(prefix) => write!(formatter, "{prefix}*"),
            OperationPattern::Exact(name) => formatter.write_str(name),
        }
    }
}

/// A policy's default and ceiling for one field; either may be unset (the
/// server's own applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bound<T> {
    pub default: Option<T>,
    pub max: Option<T>,
}

/// What one pattern sets. The attempt budget and durations are the Claim
/// fields of the same names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationPolicy {
    pub pattern: OperationPattern,
    pub lease: Bound<TimeDelta>,
    pub max_attempt_duration: Bound<TimeDelta>,
    pub max_attempts: Bound<u32>,
    pub retention: Bound<TimeDelta>,
    /// No server default exists: without a policy's, an operation has no
    /// deadline unless its first Claim gives one.
    pub operation_deadline: Bound<TimeDelta>,
    /// What a Claim gets once an operation of this policy is FAILED; stored
    /// by its first Claim.
    pub on_failed: OnFailed,
}

impl OperationPolicy {
    pub fn new(pattern: OperationPattern) -> Self {
        Self {
            pattern,
            lease: Bound::default(),
            max_attempt_duration: Bound::default(),
            max_attempts: Bound::default(),
            retention: Bound::default(),
            operation_deadline: Bound::default(),
            on_failed: OnFailed::Replay,
        }
    }

    /// The server's limits with this policy's defaults and ceilings in
    /// their place.
    pub fn applied_to(&self, server: &Limits) -> Limits {
        // A default the policy leaves out is the server's, pulled down to
        // the policy's ceiling when that is lower: a Claim leaving the field
        // out never gets more than a Claim may ask for.
        fn bounded<T: Copy + Ord>(bound: &Bound<T>, server_default: T, server_max: T) -> (T, T) {
            let max = bound.max.unwrap_or(server_max);
            (bound.default.unwrap_or(server_default.min(max)), max)
        }
        let mut limits = server.clone();
        (limits.default_lease, limits.max_lease) =
            bounded(&self.lease, server.default_lease, server.max_lease);
        (
            limits.default_max_attempt_duration,
            limits.max_attempt_duration,
        ) = bounded(
            &self.max_attempt_duration,
            server.default_max_attempt_duration,
            server.max_attempt_duration,
        );
        (limits.default_max_attempts, limits.max_attempts) = bounded(
            &self.max_attempts,
            server.default_max_attempts,
            server.max_attempts,
        );
        (limits.default_retention, limits.max_retention) = bounded(
            &self.retention,
            server.default_retention,
            server.max_retention,
        );
        limits.max_operation_deadline = self
            .operation_deadline
            .max
            .unwrap_or(server.max_operation_deadline);
        limits.default_operation_deadline = self.operation_deadline.default.or(server
            .default_operation_deadline
            .map(|deadline| deadline.min(limits.max_operation_deadline)));
        limits
    }

    /// The Claim fields whose ceiling this policy sets.
    fn capped_fields(&self) -> impl Iterator<Item = &'static str> + '_ {
        [
            ("lease", self.lease.max.is_some()),
            (
                "max_attempt_duration",
                self.max_attempt_duration.max.is_some(),
            ),
            ("max_attempts", self.max_attempts.max.is_some()),
            ("retention", self.retention.max.is_some()),
            ("operation_deadline", self.operation_deadline.max.is_some()),
        ]
        .into_iter()
        .filter_map(|(field, capped)| capped.then_some(field))
    }

    /// Every way this policy contradicts itself or the server's bounds.
    fn problems(&self, server: &Limits) -> Vec<String> {
        let mut problems = Vec::new();
        let name = &self.pattern;
        let mut durations =
            |field: &str, bound: &Bound<TimeDelta>, (min, server_max): (TimeDelta, TimeDelta)| {
                for (which, value) in [("default", bound.default), ("max", bound.max)] {
                    let Some(value) = value else { continue };
                    if value < min || value > server_max {
                        problems.push(format!(
                        "{name}: {field}.{which} {} must be between {} and {} (the server's bounds)",
                        describe(value),
                        describe(min),
                        describe(server_max)
                    ));
                    }
                }
                if let (Some(default), Some(max)) = (bound.default, bound.max)
                    && default > max
                {
                    problems.push(format!(
                        "{name}: {field}.default {} exceeds its max {}",
                        describe(default),
                        describe(max)
                    ));
                }
            };
        durations("lease", &self.lease, (server.min_lease, server.max_lease));
        durations(
            "max_attempt_duration",
            &self.max_attempt_duration,
            (server.min_lease, server.max_attempt_duration),
        );
        durations(
            "retention",
            &self.retention,
            (TimeDelta::zero(), server.max_retention),
        );
        durations(
            "operation_deadline",
            &self.operation_deadline,
            (server.min_lease, server.max_operation_deadline),
        );
        for (which, value) in [
            ("default", self.max_attempts.default),
            ("max", self.max_attempts.max),
        ] {
            let Some(value) = value else { continue };
            if value == 0 || value > server.max_attempts {
                problems.push(format!(
                    "{name}: max_attempts.{which} {value} must be between 1 and {} (the server's bounds)",
                    server.max_attempts
                ));
            }
        }
        if let (Some(default), Some(max)) = (self.max_attempts.default, self.max_attempts.max)
            && default > max
        {
            problems.push(format!(
                "{name}: max_attempts.default {default} exceeds its max {max}"
            ));
        }
        // What a Claim that leaves both out would get must be admissible:
        // an attempt at least as long as its lease.
        let applied = self.applied_to(server);
        let default_attempt = applied
            .default_max_attempt_duration
            .max(applied.default_lease);
        if default_attempt > applied.max_attempt_duration {
            problems.push(format!(
                "{name}: a Claim leaving max_attempt_duration out would get {} (its default, \
                 at least the default lease), past max_attempt_duration.max {}: set \
                 max_attempt_duration.default",
                describe(default_attempt),
                describe(applied.max_attempt_duration)
            ));
        }
        problems
    }
}

/// Every policy in force, the most specific first, each with the bounds it
/// makes of the server's (computed once, not per Claim).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policies {
    rules: Vec<(OperationPolicy, Limits)>,
}

impl Policies {
    /// The policies, checked against each other and the server's bounds:
    /// every problem is reported, none is applied.
    pub fn new(
        mut rules: Vec<OperationPolicy>,
        server: &Limits,
    ) -> std::result::Result<Self, Vec<String>> {
        let mut problems: Vec<String> = rules
            .iter()
            .flat_map(|rule| rule.problems(server))
            .collect();
        rules.sort_by_key(|rule| std::cmp::Reverse(rule.pattern.specificity()));
        for pair in rules.windows(2) {
            if pair[0].pattern == pair[1].pattern {
                problems.push(format!("{}: given twice", pair[0].pattern));
            }
        }
        if problems.is_empty() {
            let rules = rules
                .into_iter()
                .map(|rule| {
                    let limits = rule.applied_to(server);
                    (rule, limits)
                })
                .collect();
            Ok(Self { rules })
        } else {
            Err(problems)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// The policy that decides for `operation`, if any.
    pub fn for_operation(&self, operation: &str) -> Option<&OperationPolicy> {
        self.deciding(operation).map(|(policy, _)| policy)
    }

    fn deciding(&self, operation: &str) -> Option<&(OperationPolicy, Limits)> {
        self.rules
            .iter()
            .find(|(policy, _)| policy.pattern.matches(operation))
    }

    /// What GetPolicy answers for `operation`: the pattern of the policy
    /// that decides (`None`: the server's bounds apply) and the bounds a
    /// Claim of that name is admitted with. The same resolution as
    /// [`Policies::claim`]'s.
    pub fn effective(
        &self,
        operation: &str,
        server: &Limits,
    ) -> (Option<&OperationPattern>, Limits) {
        match self.deciding(operation) {
            Some((policy, limits)) => (Some(&policy.pattern), limits.clone()),
            None => (None, server.clone()),
        }
    }

    /// What a Claim of `operation` gets once it is FAILED: the deciding
    /// policy's `on_failed`; the replay when no policy decides.
    pub fn on_failed(&self, operation: &str) -> OnFailed {
        self.for_operation(operation)
            .map_or(OnFailed::Replay, |policy| policy.on_failed)
    }

    /// The effective bounds for `operation`: the server's, with the
    /// deciding policy's in their place.
    pub fn limits_for(&self, operation: &str, server: &Limits) -> Limits {
        match self.deciding(operation) {
            Some((_, limits)) => limits.clone(),
            None => server.clone(),
        }
    }

    /// Admits a Claim under the policy of its operation: the server's
    /// [`Limits::claim`] with that policy's defaults and ceilings; a field
    /// refused for passing a policy's ceiling names the policy.
    ///
    /// `server` is the bounds these policies were made from ([`Policies::new`]),
    /// for operations no policy decides.
    pub fn claim(
        &self,
        requested: ClaimRequested,
        violations: Violations,
        server: &Limits,
    ) -> Result<(ClaimCommand, TimeDelta)> {
        let deciding = requested
            .scope
            .as_ref()
            .and_then(|scope| self.deciding(&scope.operation));
        let Some((policy, limits)) = deciding else {
            return server.claim(requested, violations);
        };
        limits
            .claim(requested, violations)
            .map(|(command, wait)| {
                let on_failed = policy.on_failed;
                (
                    ClaimCommand {
                        on_failed,
                        ..command
                    },
                    wait,
                )
            })
            .map_err(|error| match error {
                Error::InvalidArgument(violations) => {
                    Error::InvalidArgument(name_the_policy(violations, policy))
                }
                other => other,
            })
    }
}

fn name_the_policy(
    violations: Vec<FieldViolation>,
    policy: &OperationPolicy,
) -> Vec<FieldViolation> {
    violations
        .into_iter()
        .map(|violation| {
            if policy.capped_fields().any(|field| field == violation.field) {
                FieldViolation::new(
                    violation.field.clone(),
                    format!(
                        "{} (the ceiling of the operation policy `{}`)",
                        violation.description, policy.pattern
                    ),
                )
            } else {
                violation
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::admit::testing::{claim_requested, violations_of};

    fn pattern(text: &str) -> OperationPattern {
        OperationPattern::parse(text).expect("a valid pattern")
    }

    fn policy(text: &str) -> OperationPolicy {
        OperationPolicy::new(pattern(text))
    }

    #[test]
    fn patterns_parse_as_written() {
        let cases = [
            ("*", Ok(OperationPattern::Any)),
            (
                "payments.*",
                Ok(OperationPattern::Prefix("payments.".into())),
            ),
            (
                "payments.charge",
                Ok(OperationPattern::Exact("payments.charge".into())),
            ),
            ("a/b-c_d*", Ok(OperationPattern::Prefix("a/b-c_d".into()))),
            ("", Err(())),
            ("pay ments", Err(())),
            ("pay*ments", Err(())),
            ("**", Err(())),
        ];
        for (text, expected) in cases {
            let parsed = OperationPattern::parse(text).map_err(|_| ());
            assert_eq!(parsed, expected, "{text:?}");
            if let Ok(parsed) = parsed {
                assert_eq!(parsed.to_string(), text, "renders as written");
            }
        }
        assert!(OperationPattern::parse(&"a".repeat(129)).is_err());
    }

    #[test]
    fn the_most_specific_pattern_decides() {
        let rules = [
            "*",
            "payments.*",
            "payments.charge",
            "payments.ch*",
            "emails.*",
        ]
        .map(policy)
        .to_vec();
        let policies = Policies::new(rules, &Limits::default()).expect("valid");
        let decided = |operation: &str| {
            policies
                .for_operation(operation)
                .map(|policy| policy.pattern.to_string())
        };
        assert_eq!(
            decided("payments.charge").as_deref(),
            Some("payments.charge")
        );
        assert_eq!(
            decided("payments.chargeback").as_deref(),
            Some("payments.ch*")
        );
        assert_eq!(decided("payments.refund").as_deref(), Some("payments.*"));
        assert_eq!(decided("emails.send").as_deref(), Some("emails.*"));
        assert_eq!(decided("sms.send").as_deref(), Some("*"));
        let without_any =
            Policies::new(vec![policy("payments.*")], &Limits::default()).expect("valid");
        assert_eq!(without_any.for_operation("sms.send"), None);
    }

    #[test]
    fn a_claim_gets_the_policy_defaults_and_unset_fields_the_servers() {
        let server = Limits::default();
        let mut payments = policy("payments.*");
        payments.lease.default = Some(TimeDelta::seconds(10));
        payments.max_attempts.default = Some(2);
        payments.retention.default = Some(TimeDelta::days(7));
        payments.operation_deadline.default = Some(TimeDelta::hours(1));
        let policies = Policies::new(vec![payments], &server).expect("valid");
        let (command, _) = policies
            .claim(claim_requested(), Violations::default(), &server)
            .expect("admitted");
        assert_eq!(command.lease, TimeDelta::seconds(10));
        assert_eq!(command.max_attempts, 2);
        assert_eq!(command.retention, TimeDelta::days(7));
        assert_eq!(command.operation_deadline, Some(TimeDelta::hours(1)));
        assert_eq!(
            command.max_attempt_duration, server.default_max_attempt_duration,
            "unset: the server's default"
        );
    }

    #[test]
    fn a_claim_past_a_policy_ceiling_is_refused_naming_the_policy() {
        let server = Limits::default();
        let mut payments = policy("payments.*");
        payments.lease.max = Some(TimeDelta::minutes(1));
        payments.max_attempts.max = Some(3);
        let policies = Policies::new(vec![payments], &server).expect("valid");
        let requested = ClaimRequested {
            lease: Some(TimeDelta::minutes(2)),
            max_attempts: 4,
            retention: Some(TimeDelta::days(31)),
            ..claim_requested()
        };
        let violations = violations_of(policies.claim(requested, Violations::default(), &server));
        let described = |field: &str| {
            violations
                .iter()
                .find(|violation| violation.field == field)
                .map(|violation| violation.description.clone())
                .unwrap_or_default()
        };
        assert!(
            described("lease").ends_with("(the ceiling of the operation policy `payments.*`)"),
            "{violations:?}"
        );
        assert!(described("lease").contains("1m"), "{violations:?}");
        assert_eq!(
            described("max_attempts"),
            "must be at most 3 (the ceiling of the operation policy `payments.*`)"
        );
        assert!(
            !described("retention").contains("policy"),
            "the server's own ceiling: {violations:?}"
        );
        // Within the ceiling: admitted as asked.
        let narrower = ClaimRequested {
            lease: Some(TimeDelta::seconds(45)),
            max_attempts: 3,
            ..claim_requested()
        };
        let (command, _) = policies
            .claim(narrower, Violations::default(), &server)
            .expect("narrowing is allowed");
        assert_eq!(command.lease, TimeDelta::seconds(45));
    }

    #[test]
    fn a_claim_carries_its_policys_on_failed_and_the_replay_elsewhere() {
        let server = Limits::default();
        let mut payments = policy("payments.*");
        payments.on_failed = OnFailed::NewAttempt;
        let charge = policy("payments.charge");
        let policies = Policies::new(vec![payments, charge], &server).expect("valid");
        let on_failed_of = |operation: &str| {
            let requested = ClaimRequested {
                scope: Some(crate::domain::model::Scope {
                    operation: operation.into(),
                    key: "k".into(),
                }),
                ..claim_requested()
            };
            let (command, _) = policies
                .claim(requested, Violations::default(), &server)
                .expect("admitted");
            assert_eq!(
                command.on_failed,
                policies.on_failed(operation),
                "{operation}"
            );
            command.on_failed
        };
        assert_eq!(on_failed_of("payments.refund"), OnFailed::NewAttempt);
        assert_eq!(
            on_failed_of("payments.charge"),
            OnFailed::Replay,
            "the most specific entry decides, and it leaves on_failed out"
        );
        assert_eq!(on_failed_of("emails.send"), OnFailed::Replay, "no policy");
    }

    #[test]
    fn an_operation_no_policy_matches_gets_the_servers_bounds() {
        let server = Limits::default();
        let mut emails = policy("emails.*");
        emails.lease.max = Some(TimeDelta::seconds(5));
        let policies = Policies::new(vec![emails], &server).expect("valid");
        let requested = ClaimRequested {
            lease: Some(TimeDelta::minutes(10)),
            ..claim_requested()
        };
        let (command, _) = policies
            .claim(requested, Violations::default(), &server)
            .expect("the server's ceiling is an hour");
        assert_eq!(command.lease, TimeDelta::minutes(10));
    }

    #[test]
    fn a_policy_that_widens_the_server_or_contradicts_itself_is_refused() {
        let server = Limits::default();
        let mut wide = policy("payments.*");
        wide.lease.max = Some(server.max_lease + TimeDelta::seconds(1));
        let mut upside_down = policy("emails.*");
        upside_down.max_attempts = Bound {
            default: Some(5),
            max: Some(3),
        };
        let mut zero = policy("sms.*");
        zero.max_attempts.max = Some(0);
        let mut short_attempt = policy("push.*");
        short_attempt.max_attempt_duration.max = Some(TimeDelta::seconds(10));
        let problems = Policies::new(vec![wide, upside_down, zero, short_attempt], &server)
            .expect_err("four problems");
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(
            problems[0]
                == "payments.*: lease.max 3601s must be between 1s and 1h (the server's bounds)",
            "{problems:?}"
        );
        assert!(problems[1].contains("max_attempts.default 5 exceeds its max 3"));
        assert!(problems[2].contains("max_attempts.max 0 must be between 1 and 100"));
        assert!(
            problems[3].contains(
                "would get 30s (its default, at least the default lease), past max_attempt_duration.max 10s"
            ),
            "{problems:?}"
        );
        let twice =
            Policies::new(vec![policy("a.*"), policy("a.*")], &server).expect_err("duplicate");
        assert_eq!(twice, ["a.*: given twice"]);
    }

    #[test]
    fn a_ceiling_below_the_servers_default_pulls_the_default_down() {
        let server = Limits::default();
        let mut tight = policy("payments.*");
        tight.lease.max = Some(TimeDelta::seconds(10));
        tight.max_attempt_duration.max = Some(TimeDelta::minutes(1));
        tight.max_attempts.max = Some(3);
        tight.retention.max = Some(TimeDelta::hours(1));
        let policies = Policies::new(vec![tight], &server).expect("valid");
        let (command, _) = policies
            .claim(claim_requested(), Violations::default(), &server)
            .expect("a Claim leaving everything out is admitted");
        assert_eq!(command.lease, TimeDelta::seconds(10));
        assert_eq!(command.max_attempt_duration, TimeDelta::minutes(1));
        assert_eq!(command.max_attempts, 3);
        assert_eq!(command.retention, TimeDelta::hours(1));
    }

    #[test]
    fn a_policy_default_is_within_its_own_ceiling_and_the_servers() {
        let server = Limits::default();
        let mut retention = policy("payments.*");
        retention.retention = Bound {
            default: Some(TimeDelta::days(7)),
            max: Some(TimeDelta::days(30)),
        };
        Policies::new(vec![retention], &server).expect("the server allows 30 days");
        let mut beyond = policy("payments.*");
        beyond.retention.default = Some(TimeDelta::days(31));
        let problems = Policies::new(vec![beyond], &server).expect_err("past the server's");
        assert_eq!(
            problems,
            [
                "payments.*: retention.default 744h must be between 0s and 720h (the server's bounds)"
            ]
        );
    }
}
