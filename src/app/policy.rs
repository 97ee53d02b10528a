//! The operation policy file (`--policy-file`): read at start-up (a file
//! that does not make valid policies stops the server before it serves),
//! then read again every `--policy-reload-interval`, as a ConfigMap mounted
//! in a pod changes in place. A changed file that makes valid policies
//! replaces the ones in force for every Claim admitted after; one that does
//! not is logged and counted, and the ones in force stay.
//!
//! ```yaml
//! policies:
//!   - operation: "payments.*"        # an exact name, a prefix ending in `*`, or `*`
//!     lease: { default: 15s, max: 1m }
//!     max_attempt_duration: { max: 5m }
//!     max_attempts: { default: 3, max: 5 }
//!     retention: { default: 7d, max: 30d }
//!     operation_deadline: { default: 1h }
//!     on_failed: new_attempt         # replay (the default) or new_attempt
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use serde::Deserialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::config::{OutputFormat, PolicyCommand};
use crate::domain::policy::{Bound, OperationPattern, OperationPolicy, Policies};
use crate::domain::{Limits, OnFailed};
use crate::error::BoxError;
use crate::metrics::Metrics;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    policies: Vec<PolicyEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyEntry {
    operation: String,
    #[serde(default)]
    lease: DurationBound,
    #[serde(default)]
    max_attempt_duration: DurationBound,
    #[serde(default)]
    max_attempts: CountBound,
    #[serde(default)]
    retention: DurationBound,
    #[serde(default)]
    operation_deadline: DurationBound,
    /// `replay` (the default) or `new_attempt`.
    on_failed: Option<String>,
}

/// Durations as `30s`, `5m`, `7d` (humantime).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DurationBound {
    default: Option<String>,
    max: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CountBound {
    default: Option<u32>,
    max: Option<u32>,
}

/// The policies a file's text makes, checked against the server's bounds;
/// every problem is in the message.
pub(super) fn parse(text: &str, server: &Limits) -> Result<Policies, String> {
    let file: PolicyFile = serde_norway::from_str(text).map_err(|error| error.to_string())?;
    let mut problems = Vec::new();
    let mut rules = Vec::new();
    for entry in file.policies {
        let pattern = match OperationPattern::parse(&entry.operation) {
            Ok(pattern) => pattern,
            Err(problem) => {
                problems.push(problem);
                continue;
            }
        };
        let mut rule = OperationPolicy::new(pattern);
        let name = entry.operation;
        let mut durations = |field: &str, bound: DurationBound| -> Bound<TimeDelta> {
            let mut read = |which: &str, text: Option<String>| {
                let text = text?;
                match humantime::parse_duration(&text)
                    .ok()
                    .and_then(|duration| TimeDelta::from_std(duration).ok())
                {
                    Some(duration) => Some(duration),
                    None => {
                        problems.push(format!(
                            "{name}: {field}.{which} `{text}` is not a duration (30s, 5m, 7d)"
                        ));
                        None
                    }
                }
            };
            Bound {
                default: read("default", bound.default),
                max: read("max", bound.max),
            }
        };
        rule.lease = durations("lease", entry.lease);
        rule.max_attempt_duration = durations("max_attempt_duration", entry.max_attempt_duration);
        rule.retention = durations("retention", entry.retention);
        rule.operation_deadline = durations("operation_deadline", entry.operation_deadline);
        rule.max_attempts = Bound {
            default: entry.max_attempts.default,
            max: entry.max_attempts.max,
        };
        if let Some(text) = entry.on_failed {
            match OnFailed::parse(&text) {
                Some(on_failed) => rule.on_failed = on_failed,
                None => problems.push(format!(
                    "{name}: on_failed `{text}` is not replay or new_attempt"
                )),
            }
        }
        rules.push(rule);
    }
    let policies = Policies::new(rules, server);
    match policies {
        Ok(policies) if problems.is_empty() => Ok(policies),
        Ok(_) => Err(problems.join("; ")),
        Err(more) => {
            problems.extend(more);
            Err(problems.join("; "))
        }
    }
}

/// The file's contents and the policies they make, for start-up.
fn load(path: &Path, server: &Limits) -> Result<(String, Policies), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("--policy-file {}: {error}", path.display()))?;
    let policies = parse(&text, server)
        .map_err(|problems| format!("--policy-file {}: {problems}", path.display()))?;
    Ok((text, policies))
}

/// What a server starts with: the file's policies, or none without a file.
pub(super) struct LoadedPolicies {
    pub(super) in_force: watch::Sender<Arc<Policies>>,
    /// The file and what it held when read, to reload it.
    pub(super) file: Option<(PathBuf, String)>,
}

impl LoadedPolicies {
    pub(super) fn start(path: Option<&Path>, server: &Limits) -> Result<Self, String> {
        let Some(path) = path else {
            return Ok(Self {
                in_force: watch::Sender::new(Arc::new(Policies::default())),
                file: None,
            });
        };
        let (text, policies) = load(path, server)?;
        info!(
            file = %path.display(),
            policies = policies.len(),
            "operation policies loaded"
        );
        Ok(Self {
            in_force: watch::Sender::new(Arc::new(policies)),
            file: Some((path.to_owned(), text)),
        })
    }
}

/// Reads `path` every `interval` until `stop`, starting from `tried` (what
/// start-up read); valid changes go to `in_force`.
pub(super) async fn reload_every(
    path: PathBuf,
    mut tried: String,
    server: Limits,
    in_force: watch::Sender<Arc<Policies>>,
    interval: Duration,
    metrics: Metrics,
    stop: CancellationToken,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    // Logged once until it changes: a file missing for a minute is one
    // error, not twelve.
    let mut unreadable: Option<String> = None;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = stop.cancelled() => return,
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(reason) => {
                let reason = reason.to_string();
                if unreadable.as_ref() != Some(&reason) {
                    error!(file = %path.display(), error = %reason, "policy file unreadable: the policies in force stay");
                    metrics.policy_reload_failed();
                    unreadable = Some(reason);
                }
                continue;
            }
        };
        unreadable = None;
        if text == tried {
            continue;
        }
        match parse(&text, &server) {
            Ok(policies) => {
                info!(
                    file = %path.display(),
                    policies = policies.len(),
                    "operation policies reloaded: Claims admitted from now on follow them"
                );
                in_force.send_replace(Arc::new(policies));
            }
            Err(problems) => {
                error!(
                    file = %path.display(),
                    problems = %problems,
                    "policy file refused: the policies in force stay"
                );
                metrics.policy_reload_failed();
            }
        }
        tried = text;
    }
}

/// `idemd policy check`: every problem, or the effective values for each
/// operation asked about.
pub(super) fn check(command: PolicyCommand) -> Result<(), BoxError> {
    let PolicyCommand::Check {
        file,
        operation,
        output,
        bounds,
    } = command;
    let server = super::settings::limits_from(&bounds)?;
    let (_, policies) = load(&file, &server)?;
    let effective: Vec<Effective> = operation
        .iter()
        .map(|operation| Effective::of(operation, &policies, &server))
        .collect();
    match output {
        OutputFormat::Json => {
            let report = serde_json::json!({
                "file": file.display().to_string(),
                "policies": policies.len(),
                "operations": effective,
            });
            println!("{report:#}");
        }
        OutputFormat::Table => {
            println!("{}: {} policies, valid", file.display(), policies.len());
            for one in &effective {
                println!();
                println!(
                    "{} (policy: {})",
                    one.operation,
                    one.policy.as_deref().unwrap_or("none: the server's bounds")
                );
                println!("  {:<22} {:>10} {:>10}", "", "default", "max");
                for (field, default, max) in one.rows() {
                    println!("  {field:<22} {default:>10} {max:>10}");
                }
                println!("  {:<22} {:>10}", "on_failed", one.on_failed);
            }
        }
    }
    Ok(())
}

/// What a Claim of one operation gets, as `policy check` prints it.
#[derive(Debug, serde::Serialize)]
struct Effective {
    operation: String,
    /// The deciding policy's pattern.
    policy: Option<String>,
    lease: (String, String),
    max_attempt_duration: (String, String),
    max_attempts: (String, String),
    retention: (String, String),
    operation_deadline: (String, String),
    /// What a Claim gets once the operation is FAILED.
    on_failed: &'static str,
}

impl Effective {
    fn of(operation: &str, policies: &Policies, server: &Limits) -> Self {
        let limits = policies.limits_for(operation, server);
        let show = |duration: TimeDelta| {
            humantime::format_duration(duration.to_std().unwrap_or_default()).to_string()
        };
        Self {
            operation: operation.to_owned(),
            policy: policies
                .for_operation(operation)
                .map(|policy| policy.pattern.to_string()),
            lease: (show(limits.default_lease), show(limits.max_lease)),
            max_attempt_duration: (
                show(
                    limits
                        .default_max_attempt_duration
                        .max(limits.default_lease),
                ),
                show(limits.max_attempt_duration),
            ),
            max_attempts: (
                limits.default_max_attempts.to_string(),
                limits.max_attempts.to_string(),
            ),
            retention: (show(limits.default_retention), show(limits.max_retention)),
            operation_deadline: (
                limits
                    .default_operation_deadline
                    .map_or_else(|| "none".to_owned(), show),
                show(limits.max_operation_deadline),
            ),
            on_failed: policies.on_failed(operation).as_str(),
        }
    }

    fn rows(&self) -> [(&'static str, &str, &str); 5] {
        fn row<'a>(
            field: &'static str,
            bound: &'a (String, String),
        ) -> (&'static str, &'a str, &'a str) {
            (field, bound.0.as_str(), bound.1.as_str())
        }
        [
            row("lease", &self.lease),
            row("max_attempt_duration", &self.max_attempt_duration),
            row("max_attempts", &self.max_attempts),
            row("retention", &self.retention),
            row("operation_deadline", &self.operation_deadline),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reads_into_policies() {
        let text = r#"
policies:
  - operation: "payments.*"
    lease: { default: 15s, max: 1m }
    max_attempts: { default: 3, max: 5 }
    retention: { default: 7d }
    operation_deadline: { default: 1h, max: 24h }
  - operation: "*"
    max_attempt_duration: { max: 10m }
"#;
        let server = Limits::default();
        let policies = parse(text, &server).expect("valid");
        assert_eq!(policies.len(), 2);
        let payments = policies.limits_for("payments.charge", &server);
        assert_eq!(payments.default_lease, TimeDelta::seconds(15));
        assert_eq!(payments.max_lease, TimeDelta::minutes(1));
        assert_eq!(payments.default_max_attempts, 3);
        assert_eq!(payments.max_attempts, 5);
        assert_eq!(payments.default_retention, TimeDelta::days(7));
        assert_eq!(payments.max_retention, server.max_retention);
        assert_eq!(
            payments.default_operation_deadline,
            Some(TimeDelta::hours(1))
        );
        assert_eq!(payments.max_operation_deadline, TimeDelta::hours(24));
        let others = policies.limits_for("emails.send", &server);
        assert_eq!(others.max_attempt_duration, TimeDelta::minutes(10));
        assert_eq!(others.default_lease, server.default_lease);
    }

    #[test]
    fn on_failed_reads_replay_or_new_attempt_and_nothing_else() {
        let text = r#"
policies:
  - operation: "payments.*"
    on_failed: new_attempt
  - operation: "payments.charge"
    on_failed: replay
  - operation: "emails.*"
"#;
        let server = Limits::default();
        let policies = parse(text, &server).expect("valid");
        assert_eq!(policies.on_failed("payments.refund"), OnFailed::NewAttempt);
        assert_eq!(policies.on_failed("payments.charge"), OnFailed::Replay);
        assert_eq!(policies.on_failed("emails.send"), OnFailed::Replay);
        assert_eq!(policies.on_failed("sms.send"), OnFailed::Replay);
        let problems = parse(
            "policies:\n  - operation: \"a.*\"\n    on_failed: retry\n",
            &server,
        )
        .expect_err("not a choice");
        assert!(
            problems.contains("a.*: on_failed `retry` is not replay or new_attempt"),
            "{problems}"
        );
    }

    #[test]
    fn an_empty_file_or_list_makes_no_policies() {
        let server = Limits::default();
        assert!(parse("policies: []", &server).expect("valid").is_empty());
        assert!(parse("{}", &server).expect("valid").is_empty());
    }

    #[test]
    fn every_problem_is_reported_and_none_applied() {
        let text = r#"
policies:
  - operation: "pay ments"
  - operation: "emails.*"
    lease: { max: soon }
  - operation: "sms.*"
    max_attempts: { max: 1000 }
"#;
        let problems = parse(text, &Limits::default()).expect_err("three problems");
        assert!(
            problems.contains("`pay ments`: may contain only"),
            "{problems}"
        );
        assert!(
            problems.contains("emails.*: lease.max `soon` is not a duration"),
            "{problems}"
        );
        assert!(
            problems.contains("sms.*: max_attempts.max 1000 must be between 1 and 100"),
            "{problems}"
        );
    }

    #[test]
    fn unknown_fields_are_refused_not_ignored() {
        let problems = parse(
            "policies:\n  - operation: \"a.*\"\n    leese: { max: 1m }\n",
            &Limits::default(),
        )
        .expect_err("a typo");
        assert!(problems.contains("leese"), "{problems}");
    }
}
