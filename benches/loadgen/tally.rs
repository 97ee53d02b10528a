//! What the clients saw, merged, and the JSON report of one cell.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{Value, json};

use crate::BoxError;

/// What one client saw; merged over clients at the end.
pub(crate) struct Tally {
    pub(crate) latency_us: Histogram<u64>,
    pub(crate) operations: u64,
    pub(crate) outcomes: BTreeMap<&'static str, u64>,
    pub(crate) statuses: BTreeMap<String, u64>,
    /// Executions per logical operation (its key).
    pub(crate) executions: HashMap<String, u32>,
    pub(crate) conflicts: u64,
    pub(crate) expected_conflicts: u64,
    pub(crate) false_conflicts: u64,
    /// Logical operations that did not end as their workload requires.
    pub(crate) unsettled: u64,
    /// Replays whose result was not the stored one.
    pub(crate) wrong_replays: u64,
}

impl Tally {
    pub(crate) fn new() -> Result<Self, BoxError> {
        Ok(Self {
            latency_us: Histogram::new_with_bounds(1, 60_000_000, 3)?,
            operations: 0,
            outcomes: BTreeMap::new(),
            statuses: BTreeMap::new(),
            executions: HashMap::new(),
            conflicts: 0,
            expected_conflicts: 0,
            false_conflicts: 0,
            unsettled: 0,
            wrong_replays: 0,
        })
    }

    pub(crate) fn record_latency(&mut self, started: Instant) {
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.latency_us.saturating_record(micros.max(1));
        self.operations += 1;
    }

    pub(crate) fn status(&mut self, code: tonic::Code) {
        *self.statuses.entry(format!("{code:?}")).or_default() += 1;
    }

    pub(crate) fn outcome(&mut self, outcome: &'static str) {
        *self.outcomes.entry(outcome).or_default() += 1;
    }

    pub(crate) fn merge(&mut self, other: Tally) -> Result<(), BoxError> {
        self.latency_us.add(&other.latency_us)?;
        self.operations += other.operations;
        for (outcome, count) in other.outcomes {
            *self.outcomes.entry(outcome).or_default() += count;
        }
        for (status, count) in other.statuses {
            *self.statuses.entry(status).or_default() += count;
        }
        for (key, count) in other.executions {
            *self.executions.entry(key).or_default() += count;
        }
        self.conflicts += other.conflicts;
        self.expected_conflicts += other.expected_conflicts;
        self.false_conflicts += other.false_conflicts;
        self.unsettled += other.unsettled;
        self.wrong_replays += other.wrong_replays;
        Ok(())
    }
}

pub(crate) fn report(
    workload: &str,
    concurrency: usize,
    elapsed: Duration,
    tally: &Tally,
    every_execution_is_a_duplicate: bool,
    expected_conflicts: Option<u64>,
    client_cpu_seconds: Option<f64>,
) -> Value {
    let executions: u64 = tally
        .executions
        .values()
        .map(|&count| u64::from(count))
        .sum();
    let duplicate_executions: u64 = if every_execution_is_a_duplicate {
        executions
    } else {
        tally
            .executions
            .values()
            .map(|&count| u64::from(count.saturating_sub(1)))
            .sum()
    };
    let histogram = &tally.latency_us;
    let seconds = elapsed.as_secs_f64();
    let mut violations = Vec::new();
    if duplicate_executions > 0 {
        violations.push(format!("{duplicate_executions} duplicate executions"));
    }
    if tally.false_conflicts > 0 {
        violations.push(format!("{} false conflicts", tally.false_conflicts));
    }
    if let Some(expected) = expected_conflicts
        && expected != tally.conflicts
    {
        violations.push(format!(
            "{} conflicts counted, {expected} expected",
            tally.conflicts
        ));
    }
    if tally.unsettled > 0 {
        violations.push(format!("{} operations not settled", tally.unsettled));
    }
    if tally.wrong_replays > 0 {
        violations.push(format!(
            "{} replays returned another result",
            tally.wrong_replays
        ));
    }
    let errors: u64 = tally
        .statuses
        .iter()
        .filter(|(status, _)| status.as_str() != "Ok" && status.as_str() != "FailedPrecondition")
        .map(|(_, count)| count)
        .sum();
    if errors > 0 {
        violations.push(format!("{errors} error statuses"));
    }
    json!({
        "workload": workload,
        "concurrency": concurrency,
        "elapsed_s": seconds,
        "operations": tally.operations,
        "ops_per_s": if seconds > 0.0 { tally.operations as f64 / seconds } else { 0.0 },
        "latency_us": {
            "p50": histogram.value_at_quantile(0.50),
            "p90": histogram.value_at_quantile(0.90),
            "p99": histogram.value_at_quantile(0.99),
            "p999": histogram.value_at_quantile(0.999),
            "max": histogram.max(),
            "mean": histogram.mean(),
        },
        "outcomes": tally.outcomes,
        "statuses": tally.statuses,
        "executions": executions,
        "duplicate_executions": duplicate_executions,
        "false_conflicts": tally.false_conflicts,
        "conflicts": tally.conflicts,
        "expected_conflicts": expected_conflicts,
        "unsettled": tally.unsettled,
        "wrong_replays": tally.wrong_replays,
        "violations": violations,
        "client_cpu_s": client_cpu_seconds,
    })
}

/// utime + stime of this process, from /proc (Linux).
pub(crate) fn own_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name, which may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    // Linux reports these in USER_HZ, 100 on every supported architecture.
    Some((user + system) / 100.0)
}
