//! How long store calls wait for a pool connection: sqlx counts a pool's
//! connections (in use, idle) but not the calls waiting for one, and a pool
//! that is too small shows first as waits, before any connection count
//! moves. Every acquire of a store's pool goes through [`AcquireWaits::time`];
//! the gauges task reads the totals ([`super::PoolUsage`]).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub struct AcquireWaits {
    acquires: AtomicU64,
    waited_micros: AtomicU64,
    waiting: AtomicU64,
}

/// The totals since the store opened, and the calls waiting now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcquireTotals {
    /// Acquires that ended (with a connection or an error).
    pub acquires: u64,
    /// Their waits, added up.
    pub waited: Duration,
    /// Calls waiting for a connection at this moment.
    pub waiting: u64,
}

/// Counts a waiting call out however its wait ends, a cancelled call
/// included.
struct Waiting<'a>(&'a AtomicU64);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl AcquireWaits {
    /// Runs `acquire`, counting the call as waiting meanwhile and its wait
    /// once it ends.
    pub async fn time<T>(&self, acquire: impl Future<Output = T>) -> T {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let _waiting = Waiting(&self.waiting);
        let started = Instant::now();
        let acquired = acquire.await;
        let waited = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.acquires.fetch_add(1, Ordering::Relaxed);
        self.waited_micros.fetch_add(waited, Ordering::Relaxed);
        acquired
    }

    pub fn totals(&self) -> AcquireTotals {
        AcquireTotals {
            acquires: self.acquires.load(Ordering::Relaxed),
            waited: Duration::from_micros(self.waited_micros.load(Ordering::Relaxed)),
            waiting: self.waiting.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_are_counted_while_they_last_and_added_up_once_they_end() {
        let waits = std::sync::Arc::new(AcquireWaits::default());
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let waiter = {
            let waits = waits.clone();
            tokio::spawn(async move {
                waits
                    .time(async {
                        tokio::time::sleep(Duration::from_millis(40)).await;
                        released.await
                    })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(waits.totals().waiting, 1);
        assert_eq!(waits.totals().acquires, 0);
        tokio::time::sleep(Duration::from_millis(40)).await;
        release.send(()).expect("the waiter waits");
        waiter.await.expect("joined").expect("released");
        let totals = waits.totals();
        assert_eq!((totals.waiting, totals.acquires), (0, 1));
        assert!(totals.waited >= Duration::from_millis(40), "{totals:?}");
    }

    #[tokio::test]
    async fn a_cancelled_wait_is_counted_out() {
        let waits = AcquireWaits::default();
        let never = std::future::pending::<()>();
        let cancelled = tokio::time::timeout(Duration::from_millis(5), waits.time(never)).await;
        assert!(cancelled.is_err());
        assert_eq!(waits.totals().waiting, 0);
    }
}
