//! The report: one campaign's table rows, verdicts and violations, and the
//! table that sets the campaigns side by side.

use std::time::Duration;

use super::checks::{Verified, verdicts};
use super::outages::quantile;
use super::schedule::Injected;
use super::settings::Backend;
use super::settings::Language;
use super::settling::Settling;
use super::setup::Proxies;
use super::stats::get;
use super::world::World;
use crate::lock::locked;

/// What a campaign counted and what it found wrong.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) title: String,
    pub(crate) rows: Vec<(&'static str, u64)>,
    pub(crate) checks: Vec<(&'static str, bool)>,
    pub(crate) violations: Vec<String>,
    pub(crate) elapsed: Duration,
}

impl Report {
    pub(crate) fn passed(&self) -> bool {
        self.violations.is_empty() && self.checks.iter().all(|(_, passed)| *passed)
    }

    /// One line: the client, the store, the counts the run stands on, its
    /// time and its verdict.
    pub(crate) fn summary(&self, language: Language) -> String {
        let row = |label: &str| {
            self.rows
                .iter()
                .find(|(name, _)| *name == label)
                .map_or(0, |(_, count)| *count)
        };
        format!(
            "client {}, {}: {} intents, {} deliveries, {} effects, {} duplicate effects, \
             {} acknowledged results, {} lost; {:.1} s; {}",
            format!("{language:?}").to_lowercase(),
            self.title,
            row("logical operations"),
            row("deliveries"),
            row("effects"),
            row("duplicate effects"),
            row("acknowledged results"),
            row("lost acknowledged results"),
            self.elapsed.as_secs_f64(),
            if self.passed() { "PASS" } else { "FAIL" },
        )
    }
}

type Rows = Vec<(&'static str, u64)>;

/// What a campaign counted, for its report.
pub(super) struct Tally<'a> {
    pub(super) world: &'a World,
    pub(super) proxies: &'a Proxies,
    pub(super) injected: &'a Injected,
    pub(super) settling: &'a Settling,
    pub(super) verified: &'a Verified,
}

/// The report of one campaign (its time is the caller's to set).
pub(super) fn build(backend: Backend, tally: &Tally<'_>) -> Report {
    let mut rows = delivery_rows(tally.world, tally.verified);
    rows.extend(twist_rows(tally.world));
    rows.extend(settling_rows(tally.world, tally.settling, tally.verified));
    rows.extend(fault_rows(tally.injected));
    rows.extend(proxy_rows(tally.proxies));
    rows.push((
        "reconciling and settling took (ms)",
        tally.settling.took.as_millis() as u64,
    ));
    let title = match backend {
        Backend::Postgres => "postgres, 2 replicas",
        Backend::Embedded => "embedded, 1 replica",
        Backend::Failover => "failover (pg_auto_failover), 2 replicas",
    };
    let mut checks = verdicts(tally.world, tally.settling, tally.verified);
    // The failover campaign's faults are the database's alone.
    if backend != Backend::Failover {
        checks.push((
            "every twist and fault occurred",
            every_twist_and_fault_occurred(tally),
        ));
    }
    Report {
        title: title.into(),
        rows,
        checks,
        violations: locked(&tally.world.stats.violations).clone(),
        elapsed: Duration::ZERO,
    }
}

/// A run too small to have delivered an intent at once, reused a key,
/// stalled an effect past its deadline, lost a reply and killed a replica
/// has not shown what its checks claim (a short run with few intents for a
/// slow worker): it fails rather than pass on what it never tried.
fn every_twist_and_fault_occurred(tally: &Tally<'_>) -> bool {
    let stats = &tally.world.stats;
    let replies_lost = tally.proxies.forwarded(|c| &c.replies_lost);
    [
        get(&stats.concurrent),
        get(&stats.conflicts_sent),
        get(&stats.stalled),
        replies_lost,
        tally.injected.counts.replica_kills,
    ]
    .iter()
    .all(|count| *count > 0)
}

/// The deliveries, their effects and their answers.
fn delivery_rows(world: &World, verified: &Verified) -> Rows {
    let stats = &world.stats;
    let operations = world.settings.operations as u64;
    let attempts = locked(&stats.attempts).len() as u64;
    let takeovers = locked(&stats.takeovers).len() as u64;
    let duplicates = world.provider.duplicates();
    let (lost, declined) = (verified.lost, verified.declined);
    vec![
        ("logical operations", operations),
        ("deliveries", get(&stats.deliveries)),
        ("attempts", attempts),
        ("effects", world.provider.performed()),
        ("duplicate effects", duplicates),
        (
            "repeats absorbed by the provider's idempotency key",
            world.provider.absorbed_by_key(),
        ),
        ("acknowledged results", get(&stats.acknowledged)),
        ("  executed", get(&stats.executed)),
        ("  replayed", get(&stats.replayed)),
        (
            "  reconciled by lookup on takeover",
            get(&stats.reconciled_by_lookup),
        ),
        (
            "  superseded (another owner stored it)",
            get(&stats.superseded),
        ),
        ("lost acknowledged results", lost),
        (
            "intents delivered 2-3 times at once",
            get(&stats.concurrent),
        ),
        ("conflicting reuses", get(&stats.conflicts_sent)),
        ("conflicts rejected", get(&stats.conflicts_rejected)),
        ("takeovers", takeovers),
        (
            "attempts declined before their effect (Fail NOT_STARTED)",
            declined,
        ),
        (
            "stale writes refused (LEASE_LOST)",
            get(&stats.superseded) + get(&stats.lease_lost),
        ),
    ]
}

/// What the twists did, and how deliveries ended short of an answer.
fn twist_rows(world: &World) -> Rows {
    let stats = &world.stats;
    vec![
        (
            "outcome unknown (effect past its deadline, cancelled)",
            get(&stats.outcome_unknown),
        ),
        ("stalling effects", get(&stats.stalled)),
        (
            "callers crashed before the effect",
            get(&stats.crashed_before),
        ),
        (
            "callers crashed after the effect",
            get(&stats.crashed_after),
        ),
        (
            "callers crashed during the effect (it landed later)",
            get(&stats.crashed_in_flight),
        ),
        (
            "stalled owners whose request landed just before the deadline",
            get(&stats.landed_after_a_negative_read) + get(&stats.landed_just_before_the_deadline),
        ),
        (
            "  right after a takeover's lookup had read nothing",
            get(&stats.landed_after_a_negative_read),
        ),
        (
            "slow lookups that read before the earlier deadline and answered after it, not found",
            get(&stats.lookups_straddling),
        ),
        (
            "  of those, the earlier effect had landed by their answer",
            get(&stats.lookups_straddling_stale),
        ),
        (
            "deliveries ended by the caller's deadline",
            get(&stats.deadline_passed),
        ),
        (
            "deliveries ended NeedsReconciliation",
            get(&stats.needs_reconciliation),
        ),
        (
            "deliveries ended by other errors (transport, unavailable)",
            get(&stats.other_errors),
        ),
    ]
}

/// The reconciler and the settling rounds.
fn settling_rows(world: &World, settling: &Settling, verified: &Verified) -> Rows {
    let stats = &world.stats;
    let (unresolved, rounds) = (settling.unresolved, settling.rounds);
    let settled_in_later_rounds = settling.settled_in_later_rounds;
    let (unresolved_at_the_end, settled) = (verified.unresolved_at_the_end, verified.settled);
    vec![
        (
            "reconciler: succeeded from provider evidence",
            get(&stats.reconciler_succeeded),
        ),
        (
            "reconciler: not applied",
            get(&stats.reconciler_not_applied),
        ),
        ("unresolved after reconciliation", unresolved),
        ("unresolved at the end", unresolved_at_the_end),
        ("intents settled", settled),
        ("settling rounds (reconcile, deliver again)", rounds),
        (
            "  intents settled only after the first round",
            settled_in_later_rounds,
        ),
    ]
}

/// The scheduled faults and the database's own.
fn fault_rows(injected: &Injected) -> Rows {
    let fault_counts = &injected.counts;
    let failed = |state: &str| injected.failed_statements.get(state).copied().unwrap_or(0);
    let backends_terminated = injected.backends_terminated;
    vec![
        (
            "replica SIGKILLs (restarted after a pause)",
            fault_counts.replica_kills,
        ),
        ("database restarts", fault_counts.database_restarts),
        (
            "database SIGKILLs (postmaster)",
            fault_counts.database_kills,
        ),
        ("database connections frozen", fault_counts.database_freezes),
        (
            "database: windows of failing statements (trigger on)",
            fault_counts.statement_failure_windows,
        ),
        (
            "database: statements failed with 40001 serialization_failure",
            failed("40001"),
        ),
        (
            "database: statements failed with 40P01 deadlock_detected",
            failed("40P01"),
        ),
        (
            "database: statements failed with 57014 query_canceled",
            failed("57014"),
        ),
        (
            "database: statements failed with 55P03 lock_not_available",
            failed("55P03"),
        ),
        (
            "database: idemd backends terminated (pg_terminate_backend)",
            backends_terminated,
        ),
        (
            "failover: primary's postmaster SIGKILLed",
            fault_counts.primary_kills,
        ),
        ("failover: planned switchovers", fault_counts.switchovers),
        (
            "failover: nodes rewound after their timeline diverged",
            fault_counts.rewinds,
        ),
        (
            "failover: outages seen by the write probes",
            injected.outages.len() as u64,
        ),
        (
            "  p50 of the gap (ms)",
            quantile(&injected.outages, 0.5).as_millis() as u64,
        ),
        (
            "  p99 of the gap (ms)",
            quantile(&injected.outages, 0.99).as_millis() as u64,
        ),
    ]
}

/// The proxy stages' faults and copies.
fn proxy_rows(proxies: &Proxies) -> Rows {
    let sum = |counter| proxies.forwarded(counter);
    let duplicated = |counter| proxies.duplicated(counter);
    vec![
        (
            "proxy: requests from the clients",
            duplicated(|c| &c.requests),
        ),
        (
            "proxy: requests forwarded to a replica (copies included)",
            sum(|c| &c.requests),
        ),
        (
            "proxy: replies lost after the server answered",
            sum(|c| &c.replies_lost),
        ),
        ("proxy: replies delayed", sum(|c| &c.replies_delayed)),
        (
            "proxy: requests reset mid-stream",
            sum(|c| &c.requests_reset),
        ),
        (
            "proxy: requests duplicated at once (in flight together)",
            duplicated(|c| &c.duplicated_at_once),
        ),
        (
            "proxy: requests duplicated after the answer",
            duplicated(|c| &c.duplicated_after_answer),
        ),
        (
            "proxy: duplicated requests answered with the copy's response",
            duplicated(|c| &c.answered_by_copy),
        ),
    ]
}

pub(crate) fn print_table(reports: &[Report]) {
    let mut header = String::from("| |");
    let mut rule = String::from("|---|");
    for report in reports {
        header.push_str(&format!(" {} |", report.title));
        rule.push_str("---:|");
    }
    println!("{header}\n{rule}");
    if let Some(first) = reports.first() {
        for (row, (label, _)) in first.rows.iter().enumerate() {
            let mut line = format!("| {label} |");
            for report in reports {
                line.push_str(&format!(" {} |", report.rows[row].1));
            }
            println!("{line}");
        }
        let mut line = String::from("| time (s) |");
        for report in reports {
            line.push_str(&format!(" {:.1} |", report.elapsed.as_secs_f64()));
        }
        println!("{line}");
        println!();
        for (check, (name, _)) in first.checks.iter().enumerate() {
            let mut line = format!("- {name}:");
            for report in reports {
                let passed = report.checks[check].1;
                line.push_str(&format!(
                    " {} {},",
                    report.title,
                    if passed { "PASS" } else { "FAIL" }
                ));
            }
            println!("{}", line.trim_end_matches(','));
        }
    }
    for report in reports {
        for violation in &report.violations {
            println!("- VIOLATION ({}): {violation}", report.title);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_the_client_and_the_counts_the_run_stands_on() {
        let mut report = Report {
            title: "embedded, 1 replica".into(),
            rows: vec![
                ("logical operations", 120),
                ("deliveries", 300),
                ("effects", 121),
                ("duplicate effects", 1),
                ("acknowledged results", 270),
                ("lost acknowledged results", 0),
            ],
            checks: vec![("zero duplicate effects", false)],
            violations: Vec::new(),
            elapsed: Duration::from_millis(18_240),
        };
        assert_eq!(
            report.summary(Language::Typescript),
            "client typescript, embedded, 1 replica: 120 intents, 300 deliveries, 121 effects, \
             1 duplicate effects, 270 acknowledged results, 0 lost; 18.2 s; FAIL"
        );
        report.checks[0].1 = true;
        assert!(report.summary(Language::Java).ends_with("; PASS"));
    }
}
