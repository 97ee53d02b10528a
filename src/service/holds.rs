//! The holds in force, as this replica knows them: read from the store
//! every refresh interval (about a second) and at once after this replica's
//! own Hold or Release, so that a Claim asks memory, never the database.
//! Another replica's hold or release reaches this one within an interval.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use chrono::TimeDelta;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::domain::TenantId;
use crate::store::Store;
use crate::store::holds::Hold;

/// How often the holds are read, by default.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(1);

/// While the holds cannot be read (a database outage fails every refresh),
/// the warning is said again this often, not at every refresh.
const SAY_AGAIN_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
struct TenantHolds {
    /// The whole tenant's hold: its retry_after.
    whole: Option<TimeDelta>,
    operations: HashMap<String, TimeDelta>,
}

/// Clones share one view.
#[derive(Debug, Clone, Default)]
pub struct HoldsInForce {
    by_tenant: Arc<RwLock<HashMap<TenantId, TenantHolds>>>,
}

impl HoldsInForce {
    /// The retry_after a held Claim of `operation` is told; `None` when
    /// neither the name nor the tenant is held.
    pub fn held(&self, tenant: TenantId, operation: &str) -> Option<TimeDelta> {
        let by_tenant = self
            .by_tenant
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let holds = by_tenant.get(&tenant)?;
        match (holds.whole, holds.operations.get(operation)) {
            (Some(whole), Some(named)) => Some(whole.max(*named)),
            (whole, named) => whole.or(named.copied()),
        }
    }

    /// Replaces the view with `holds`, as the store listed them.
    pub fn replace(&self, holds: &[Hold]) {
        let mut fresh: HashMap<TenantId, TenantHolds> = HashMap::new();
        for hold in holds {
            let tenant = fresh.entry(hold.tenant).or_default();
            match &hold.operation {
                None => tenant.whole = Some(hold.retry_after),
                Some(operation) => {
                    tenant
                        .operations
                        .insert(operation.clone(), hold.retry_after);
                }
            }
        }
        *self
            .by_tenant
            .write()
            .unwrap_or_else(PoisonError::into_inner) = fresh;
    }

    /// Reads the holds from `store` into the view.
    pub async fn refresh(&self, store: &dyn Store) -> crate::domain::Result<()> {
        let holds = store.holds().list_holds().await?;
        self.replace(&holds);
        Ok(())
    }

    /// Refreshes every `interval` until `stop`. A failed read keeps the
    /// view it had (a database outage neither lifts nor sets a hold).
    pub async fn refresh_every(
        self,
        store: Arc<dyn Store>,
        interval: Duration,
        stop: CancellationToken,
    ) {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failures = Failures::default();
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = stop.cancelled() => return,
            }
            match self.refresh(store.as_ref()).await {
                Ok(()) => {
                    if let Some(ended) = failures.succeeded(Instant::now()) {
                        info!(
                            failed_reads = ended.failed_reads,
                            for_s = ended.lasted.as_secs(),
                            "the holds are read again"
                        );
                    }
                }
                Err(error) => match failures.failed(Instant::now()) {
                    Say::First => {
                        warn!(%error, "could not read the holds; keeping the ones known");
                    }
                    Say::Again(failing) => warn!(
                        %error,
                        failed_reads = failing.failed_reads,
                        for_s = failing.lasted.as_secs(),
                        "still cannot read the holds; keeping the ones known"
                    ),
                    Say::Nothing => {}
                },
            }
        }
    }
}

/// Failed reads in a row: when to say so (the first, then once every
/// [`SAY_AGAIN_EVERY`]) and that they ended.
#[derive(Debug, Default)]
struct Failures {
    failing: Option<Failing>,
}

#[derive(Debug, Clone, Copy)]
struct Failing {
    since: Instant,
    said_at: Instant,
    failed_reads: u64,
}

/// Failed reads in a row, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Streak {
    failed_reads: u64,
    lasted: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Say {
    First,
    Again(Streak),
    Nothing,
}

impl Failures {
    fn failed(&mut self, now: Instant) -> Say {
        let Some(failing) = &mut self.failing else {
            self.failing = Some(Failing {
                since: now,
                said_at: now,
                failed_reads: 1,
            });
            return Say::First;
        };
        failing.failed_reads += 1;
        if now.duration_since(failing.said_at) < SAY_AGAIN_EVERY {
            return Say::Nothing;
        }
        failing.said_at = now;
        Say::Again(Streak {
            failed_reads: failing.failed_reads,
            lasted: now.duration_since(failing.since),
        })
    }

    /// The streak a success ended, if one did.
    fn succeeded(&mut self, now: Instant) -> Option<Streak> {
        self.failing.take().map(|failing| Streak {
            failed_reads: failing.failed_reads,
            lasted: now.duration_since(failing.since),
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;

    #[test]
    fn an_outage_is_said_when_it_starts_once_a_minute_while_it_lasts_and_when_it_ends() {
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let mut failures = Failures::default();
        assert_eq!(failures.succeeded(at(0)), None, "nothing to end");
        assert_eq!(failures.failed(at(1)), Say::First);
        for second in 2..61 {
            assert_eq!(failures.failed(at(second)), Say::Nothing, "second {second}");
        }
        assert_eq!(
            failures.failed(at(61)),
            Say::Again(Streak {
                failed_reads: 61,
                lasted: Duration::from_secs(60)
            })
        );
        assert_eq!(failures.failed(at(62)), Say::Nothing);
        assert_eq!(
            failures.succeeded(at(63)),
            Some(Streak {
                failed_reads: 62,
                lasted: Duration::from_secs(62)
            })
        );
        assert_eq!(failures.succeeded(at(64)), None, "said once");
        // The next outage is new: said at once.
        assert_eq!(failures.failed(at(65)), Say::First);
    }

    fn hold(tenant: i64, operation: Option<&str>, seconds: i64) -> Hold {
        Hold {
            tenant: TenantId(tenant),
            tenant_name: format!("t{tenant}"),
            operation: operation.map(str::to_owned),
            reason: "incident".into(),
            retry_after: TimeDelta::seconds(seconds),
            held_at: DateTime::UNIX_EPOCH,
            held_by: "token:ops".into(),
        }
    }

    #[test]
    fn a_name_or_its_whole_tenant_is_held_and_nothing_else() {
        let holds = HoldsInForce::default();
        holds.replace(&[
            hold(1, Some("payments.charge"), 30),
            hold(2, None, 60),
            hold(2, Some("orders.ship"), 90),
        ]);
        assert_eq!(
            holds.held(TenantId(1), "payments.charge"),
            Some(TimeDelta::seconds(30))
        );
        assert_eq!(holds.held(TenantId(1), "payments.refund"), None);
        assert_eq!(holds.held(TenantId(3), "payments.charge"), None);
        assert_eq!(
            holds.held(TenantId(2), "anything"),
            Some(TimeDelta::seconds(60))
        );
        // Both apply: the longer wait.
        assert_eq!(
            holds.held(TenantId(2), "orders.ship"),
            Some(TimeDelta::seconds(90))
        );
        // A release is the next listing without it.
        holds.replace(&[hold(2, None, 60)]);
        assert_eq!(holds.held(TenantId(1), "payments.charge"), None);
    }
}
