//! Claims waiting for a pending operation, counted per tenant and per
//! replica. A waiter holds no connection, but it holds a call, a task and a
//! subscription to changes: bounded, so that waiting cannot grow without
//! limit. Past a bound a Claim answers Pending at once (with its
//! retry_after) instead of waiting.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::domain::TenantId;
use crate::metrics::Metrics;

/// Claims waiting at once on one replica by default.
const DEFAULT_MAX_WAITERS: usize = 512;
/// Claims of one tenant waiting at once on one replica by default: below
/// the tenant's share of calls in flight, so its waiters cannot take all of
/// it.
const DEFAULT_MAX_WAITERS_PER_TENANT: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaiterLimits {
    pub per_replica: usize,
    pub per_tenant: usize,
}

impl Default for WaiterLimits {
    fn default() -> Self {
        Self {
            per_replica: DEFAULT_MAX_WAITERS,
            per_tenant: DEFAULT_MAX_WAITERS_PER_TENANT,
        }
    }
}

#[derive(Default)]
struct Counts {
    total: usize,
    /// A tenant without waiters has no entry.
    per_tenant: HashMap<TenantId, usize>,
}

pub(super) struct Waiters {
    limits: WaiterLimits,
    counts: Mutex<Counts>,
    metrics: Metrics,
}

/// One waiting Claim, counted until dropped.
pub(super) struct Waiting {
    waiters: Arc<Waiters>,
    tenant: TenantId,
}

impl Waiters {
    pub(super) fn new(limits: WaiterLimits, metrics: Metrics) -> Arc<Self> {
        Arc::new(Self {
            limits,
            counts: Mutex::default(),
            metrics,
        })
    }

    /// A place to wait, unless the replica or the tenant has none left.
    pub(super) fn enter(self: &Arc<Self>, tenant: TenantId) -> Option<Waiting> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let of_tenant = counts.per_tenant.get(&tenant).copied().unwrap_or(0);
        if counts.total >= self.limits.per_replica || of_tenant >= self.limits.per_tenant {
            drop(counts);
            self.metrics.waiter_refused();
            return None;
        }
        counts.total += 1;
        counts.per_tenant.insert(tenant, of_tenant + 1);
        self.metrics.waiting_claims(counts.total);
        Some(Waiting {
            waiters: self.clone(),
            tenant,
        })
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut counts = self
            .waiters
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        if let Some(count) = counts.per_tenant.get_mut(&self.tenant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.per_tenant.remove(&self.tenant);
            }
        }
        self.waiters.metrics.waiting_claims(counts.total);
    }
}
