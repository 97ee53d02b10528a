//! The counters a campaign keeps for its report, shared by the in-process
//! workload, the external workers' provider server and the checks.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::lock::locked;

#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) deliveries: AtomicU64,
    pub(super) acknowledged: AtomicU64,
    pub(super) executed: AtomicU64,
    pub(super) replayed: AtomicU64,
    pub(super) reconciled_by_lookup: AtomicU64,
    pub(super) superseded: AtomicU64,
    pub(super) lease_lost: AtomicU64,
    pub(super) outcome_unknown: AtomicU64,
    pub(super) deadline_passed: AtomicU64,
    pub(super) needs_reconciliation: AtomicU64,
    pub(super) other_errors: AtomicU64,
    /// Intents delivered 2-3 times at once (the concurrent twist).
    pub(super) concurrent: AtomicU64,
    pub(super) conflicts_sent: AtomicU64,
    pub(super) conflicts_rejected: AtomicU64,
    pub(super) stalled: AtomicU64,
    pub(super) crashed_before: AtomicU64,
    pub(super) crashed_after: AtomicU64,
    pub(super) crashed_in_flight: AtomicU64,
    pub(super) landed_after_a_negative_read: AtomicU64,
    pub(super) landed_just_before_the_deadline: AtomicU64,
    pub(super) lookups_straddling: AtomicU64,
    pub(super) lookups_straddling_stale: AtomicU64,
    pub(super) reconciler_succeeded: AtomicU64,
    pub(super) reconciler_not_applied: AtomicU64,
    pub(super) attempts: Mutex<HashSet<(String, u64)>>,
    pub(super) takeovers: Mutex<HashSet<(String, u64)>>,
    pub(super) violations: Mutex<Vec<String>>,
}

pub(super) fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::SeqCst);
}

pub(super) fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::SeqCst)
}

impl Stats {
    pub(super) fn violation(&self, message: String) {
        locked(&self.violations).push(message);
    }

    /// An attempt that reached its effect or its lookup (a takeover when it
    /// began with ReconcileFirst).
    pub(super) fn note_attempt(&self, operation_id: &str, fence: u64, takeover: bool) {
        let attempt = (operation_id.to_owned(), fence);
        if takeover {
            locked(&self.takeovers).insert(attempt.clone());
        }
        locked(&self.attempts).insert(attempt);
    }
}
