//! Retention: turns expired results into tombstones, ends retries past their
//! deadline, deletes old tombstones. Every replica runs one; the store skips
//! rows another replica holds, so they share the work without coordination.

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::store::{Store, SweepReport};

/// Batches per tick at most, so one replica's backlog cannot starve the rest
/// of its work; the next tick goes on.
const MAX_BATCHES_PER_TICK: usize = 20;

#[derive(Debug, Clone, Copy)]
pub struct SweeperSettings {
    pub interval: Duration,
    pub batch: u32,
    pub tombstone_retention: TimeDelta,
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

/// Sweeps batch after batch while batches come back full.
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
    for _ in 0..MAX_BATCHES_PER_TICK {
        if stop.is_cancelled() {
            break;
        }
        let report = match store
            .sweep(settings.batch, settings.tombstone_retention)
            .await
        {
            Ok(report) => report,
            Err(error) => {
                warn!(%error, "sweep failed; retrying at the next tick");
                break;
            }
        };
        total += report;
        let batch = u64::from(settings.batch);
        let full = report.tombstoned + report.deadline_exceeded >= batch || report.deleted >= batch;
        if !full {
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
