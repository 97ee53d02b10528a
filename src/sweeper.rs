//! Retention: turns expired results into tombstones, ends retries past their
//! deadline, deletes old tombstones. Every replica runs one; the store skips
//! rows another replica holds, so they share the work without coordination.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::TimeDelta;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::domain::SweepPolicy;
use crate::metrics::Metrics;
use crate::store::{Store, SweepReport};

/// The share of each interval a tick may go on sweeping full batches. The
/// sweeper is sequential (one connection, one batch at a time), so this bounds
/// what retention takes from the replica, while a backlog is still worked off
/// at the database's pace: a fixed number of batches per tick would cap every
/// replica's retention rate below the rate at which it can create operations
/// (20 batches of 500 per 30 s is 333 records/s), and the table would grow for
/// ever under sustained load.
const TICK_SHARE_OF_INTERVAL: u32 = 2;

#[derive(Debug, Clone, Copy)]
pub struct SweeperSettings {
    pub interval: Duration,
    pub batch: u32,
    pub tombstone_retention: TimeDelta,
    /// As [`crate::domain::ClaimCommand::clock_margin`].
    pub clock_margin: TimeDelta,
}

impl SweeperSettings {
    fn policy(&self) -> SweepPolicy {
        SweepPolicy {
            tombstone_retention: self.tombstone_retention,
            clock_margin: self.clock_margin,
        }
    }
}

pub async fn run(
    store: Arc<dyn Store>,
    settings: SweeperSettings,
    metrics: Metrics,
    stop: CancellationToken,
) {
    crate::shutdown::every(settings.interval, stop.clone(), || async {
        let report = sweep_backlog_until_cancelled(store.as_ref(), settings, &stop).await;
        metrics.swept(&report);
    })
    .await;
}

/// Sweeps batch after batch while batches come back full, for at most half
/// the interval.
pub async fn sweep_backlog(store: &dyn Store, settings: SweeperSettings) -> SweepReport {
    sweep_backlog_until_cancelled(store, settings, &CancellationToken::new()).await
}

/// [`sweep_backlog`], stopping after the batch under way once `stop` is
/// cancelled: a draining server finishes its transaction, not the backlog.
async fn sweep_backlog_until_cancelled(
    store: &dyn Store,
    settings: SweeperSettings,
    stop: &CancellationToken,
) -> SweepReport {
    let mut total = SweepReport::default();
    let started = Instant::now();
    let budget = settings.interval / TICK_SHARE_OF_INTERVAL;
    loop {
        if stop.is_cancelled() {
            break;
        }
        let report = match store.sweep(settings.batch, settings.policy()).await {
            Ok(report) => report,
            Err(error) => {
                warn!(%error, "sweep failed; retrying at the next tick");
                break;
            }
        };
        total += report;
        let batch = u64::from(settings.batch);
        let full = report.tombstoned + report.deadline_exceeded >= batch || report.deleted >= batch;
        if !full || started.elapsed() >= budget {
            break;
        }
    }
    if total.total() > 0 {
        info!(
            tombstoned = total.tombstoned,
            deadline_exceeded = total.deadline_exceeded,
            deleted = total.deleted,
            "retention sweep"
        );
    }
    total
}

/// How often the audit trail is pruned: its retention is counted in days.
pub const AUDIT_PRUNE_INTERVAL: Duration = Duration::from_secs(3600);

/// Deletes audit entries older than `retention` every `interval` until
/// `stop`. Every replica may run it: a delete by age is the same from any.
pub async fn prune_audit_log(
    store: Arc<dyn Store>,
    retention: TimeDelta,
    interval: Duration,
    stop: CancellationToken,
) {
    crate::shutdown::every(interval, stop, || async {
        match store.credentials().prune_audit_log(retention).await {
            Ok(0) => {}
            Ok(pruned) => info!(pruned, "audit trail pruned"),
            Err(error) => warn!(%error, "audit pruning failed; retrying at the next tick"),
        }
    })
    .await;
}
