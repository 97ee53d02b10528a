//! Replays and Pending answers counted per operation without a write on the
//! path that answers them: this replica counts them in memory and a
//! background task adds the counts to the database in one batch every flush
//! interval, and once more when the replica drains
//! ([`Store::add_answer_counts`]). A replay served from the result cache
//! stays free of database round trips; the counts an operator reads lag by
//! up to the interval, and a crash loses at most one interval's.
//!
//! Bounded: at most [`AnswerTallies::capacity`] operations are counted
//! between two flushes. An answer for an operation beyond them is not
//! counted anywhere but in `idemd_answer_counts_dropped_total`, so that a
//! flood of distinct keys cannot grow this replica's memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::domain::OperationId;
use crate::metrics::Metrics;
use crate::store::{AnswerTally, Store};

/// Operations counted between two flushes, by default: a flush is one
/// statement with this many members at most.
pub const DEFAULT_CAPACITY: usize = 10_000;
/// How often the counts are added to the database, by default.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// Which answer a Claim got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Completed: the stored outcome, replayed.
    Replay,
    /// Pending: another attempt holds the lease, or a retry is not yet due.
    Pending,
}

#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    replays: u64,
    pendings: u64,
    last_replay: Option<Instant>,
}

/// This replica's counts since its last flush.
#[derive(Debug, Clone)]
pub struct AnswerTallies {
    counts: Arc<Mutex<HashMap<OperationId, Tally>>>,
    /// Shared by every clone, like the counts: set once at start-up.
    capacity: Arc<AtomicUsize>,
    metrics: Metrics,
}

impl AnswerTallies {
    pub fn new(capacity: usize, metrics: Metrics) -> Self {
        Self {
            counts: Arc::new(Mutex::new(HashMap::new())),
            capacity: Arc::new(AtomicUsize::new(capacity)),
            metrics,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Sets the bound for this replica's every clone (`--answer-count-capacity`).
    pub fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity, Ordering::Relaxed);
    }

    /// Counts one answer: a map update under a lock held for nothing else,
    /// no I/O.
    pub fn count(&self, operation_id: OperationId, answer: Counted) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let full = counts.len() >= self.capacity();
        let tally = match counts.get_mut(&operation_id) {
            Some(tally) => tally,
            None if full => {
                drop(counts);
                self.metrics.answer_counts_dropped(1);
                return;
            }
            None => counts.entry(operation_id).or_default(),
        };
        match answer {
            Counted::Replay => {
                tally.replays = tally.replays.saturating_add(1);
                tally.last_replay = Some(Instant::now());
            }
            Counted::Pending => tally.pendings = tally.pendings.saturating_add(1),
        }
    }

    /// Adds the counts since the last flush to the database, in one store
    /// call. On a store error they are kept (merged with those counted
    /// meanwhile, within the bound) for the next flush.
    pub async fn flush(&self, store: &dyn Store) -> crate::domain::Result<usize> {
        let taken: HashMap<OperationId, Tally> =
            std::mem::take(&mut *self.counts.lock().unwrap_or_else(PoisonError::into_inner));
        if taken.is_empty() {
            return Ok(0);
        }
        let now = Instant::now();
        let tallies: Vec<AnswerTally> = taken
            .iter()
            .map(|(operation_id, tally)| AnswerTally {
                operation_id: *operation_id,
                replays: tally.replays,
                pendings: tally.pendings,
                last_replay_ago: tally
                    .last_replay
                    .map(|at| now.saturating_duration_since(at)),
            })
            .collect();
        match store.add_answer_counts(&tallies).await {
            Ok(()) => Ok(tallies.len()),
            Err(error) => {
                self.put_back(taken);
                Err(error)
            }
        }
    }

    fn put_back(&self, taken: HashMap<OperationId, Tally>) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let mut dropped = 0_u64;
        for (operation_id, old) in taken {
            let full = counts.len() >= self.capacity();
            match counts.get_mut(&operation_id) {
                Some(tally) => {
                    tally.replays = tally.replays.saturating_add(old.replays);
                    tally.pendings = tally.pendings.saturating_add(old.pendings);
                    tally.last_replay = tally.last_replay.max(old.last_replay);
                }
                None if full => dropped = dropped.saturating_add(old.replays + old.pendings),
                None => {
                    counts.insert(operation_id, old);
                }
            }
        }
        drop(counts);
        if dropped > 0 {
            self.metrics.answer_counts_dropped(dropped);
        }
    }

    /// Flushes every `interval` until `stop`, and once more then, so that a
    /// drained replica loses none of its counts.
    pub async fn flush_every(
        self,
        store: Arc<dyn Store>,
        interval: Duration,
        stop: CancellationToken,
    ) {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            let stopping = tokio::select! {
                _ = ticks.tick() => false,
                () = stop.cancelled() => true,
            };
            if let Err(error) = self.flush(store.as_ref()).await {
                warn!(%error, "could not add the counts of replays and Pending answers; kept for the next flush");
            }
            if stopping {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::LabelPolicy;

    fn tallies(capacity: usize) -> (AnswerTallies, Metrics) {
        let (metrics, _) = Metrics::new(LabelPolicy::default(), None).expect("metrics");
        (AnswerTallies::new(capacity, metrics.clone()), metrics)
    }

    fn counts(tallies: &AnswerTallies) -> HashMap<OperationId, (u64, u64, bool)> {
        tallies
            .counts
            .lock()
            .expect("not poisoned")
            .iter()
            .map(|(id, tally)| {
                (
                    *id,
                    (tally.replays, tally.pendings, tally.last_replay.is_some()),
                )
            })
            .collect()
    }

    #[test]
    fn answers_are_counted_per_operation_within_the_bound_and_the_rest_is_a_metric() {
        let (tallies, metrics) = tallies(2);
        let [a, b, c] = [1, 2, 3].map(|n| OperationId(uuid::Uuid::from_u128(n)));
        tallies.count(a, Counted::Replay);
        tallies.count(a, Counted::Replay);
        tallies.count(a, Counted::Pending);
        tallies.count(b, Counted::Pending);
        // Full: a third operation is not counted, the known ones still are.
        tallies.count(c, Counted::Replay);
        tallies.count(b, Counted::Pending);
        assert_eq!(
            counts(&tallies),
            HashMap::from([(a, (2, 1, true)), (b, (0, 2, false))])
        );
        assert!(
            metrics
                .render()
                .lines()
                .any(|line| line == "idemd_answer_counts_dropped_total 1"),
            "{}",
            metrics.render()
        );
    }

    #[test]
    fn counts_kept_after_a_failed_flush_merge_with_new_ones_within_the_bound() {
        let (tallies, _) = tallies(2);
        let [a, b] = [1, 2].map(|n| OperationId(uuid::Uuid::from_u128(n)));
        tallies.count(a, Counted::Replay);
        let taken = std::mem::take(&mut *tallies.counts.lock().expect("not poisoned"));
        tallies.count(a, Counted::Pending);
        tallies.count(b, Counted::Replay);
        tallies.put_back(taken);
        assert_eq!(
            counts(&tallies),
            HashMap::from([(a, (1, 1, true)), (b, (1, 0, true))])
        );
    }
}
