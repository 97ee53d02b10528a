//! Connections the shared statements keep from one statement to the next.
//!
//! sqlx 0.9 returns every connection to its pool through a ping
//! (`Floating::return_to_pool`: a Sync round trip, whatever
//! `test_before_acquire` says), on a task of its own: under load, one more
//! round trip and two more wake-ups, on both sides, for each shared
//! statement (bench/README.md: idemd's CPU per Claim + Complete 171 → 157 µs
//! and Postgres's 230 → 220 µs with that ping taken out of sqlx). A
//! connection whose statement ended (it was released, not abandoned: see
//! `held`) is idle and ready, so the batchers' statements keep a few such
//! connections here and take them back for the next statement, and the
//! ping is paid only by a connection that goes back to the pool.
//!
//! What the pool would have checked on the way out is checked here on the
//! way back in:
//! - a connection kept longer than [`Warm::idle`] goes back to the pool
//!   (through the ping, bounded as every release is): after a quiet spell the
//!   database may have restarted, and the ping finds out instead of a
//!   caller's statement;
//! - with several hosts, a connection vetted before the primary last moved
//!   is closed, as the pool's `before_acquire` closes one opened before it;
//! - once the pool closes, nothing is kept and what was kept is handed back
//!   (the pool's `close` waits for every connection out of it, and code
//!   holding the pool may close it without the store).
//!
//! At most [`Warm::capacity`] connections are kept: the batchers' statement
//! slots, well below the pool's size, so everything else that takes a
//! connection from the pool still finds one.

use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use sqlx::Postgres;
use sqlx::pool::PoolConnection;

/// Whether the primary moved after a moment (with several hosts: the
/// topology tracker's answer).
pub(crate) type SwitchedAfter = Arc<dyn Fn(Instant) -> bool + Send + Sync>;

/// How long a kept connection may sit unused and still be taken without
/// the pool's check: under load a connection is taken back within
/// milliseconds; after a quiet second it goes back through the ping.
pub(super) const KEPT_IDLE: Duration = Duration::from_secs(1);

pub(crate) struct Warm {
    capacity: usize,
    idle: Duration,
    switched_after: Option<SwitchedAfter>,
    state: Mutex<Kept>,
    watching: Once,
}

#[derive(Default)]
struct Kept {
    connections: Vec<KeptConnection>,
    closed: bool,
}

struct KeptConnection {
    connection: PoolConnection<Postgres>,
    vetted: Instant,
    kept_at: Instant,
}

/// What [`Warm::take`] found.
pub(super) enum Taken {
    /// Ready for the next statement; `vetted` is when it left the pool.
    Ready(PoolConnection<Postgres>, Instant),
    /// Kept too long: back to the pool through its ping.
    Idle(PoolConnection<Postgres>),
    /// Vetted before the primary moved: to be closed.
    Stale(PoolConnection<Postgres>),
    Nothing,
}

impl Warm {
    pub(crate) fn new(
        capacity: usize,
        idle: Duration,
        switched_after: Option<SwitchedAfter>,
    ) -> Self {
        Self {
            capacity,
            idle,
            switched_after,
            state: Mutex::default(),
            watching: Once::new(),
        }
    }

    /// The connection kept last (the warmest), if any.
    pub(super) fn take(&self) -> Taken {
        let Some(kept) = self.state().connections.pop() else {
            return Taken::Nothing;
        };
        if self
            .switched_after
            .as_ref()
            .is_some_and(|switched_after| switched_after(kept.vetted))
        {
            return Taken::Stale(kept.connection);
        }
        if kept.kept_at.elapsed() > self.idle {
            return Taken::Idle(kept.connection);
        }
        Taken::Ready(kept.connection, kept.vetted)
    }

    /// Keeps a connection whose statements ended, or hands it back (full,
    /// or the pool closed) for the caller to release to the pool.
    pub(super) fn keep(
        &self,
        connection: PoolConnection<Postgres>,
        vetted: Instant,
    ) -> Result<(), PoolConnection<Postgres>> {
        let mut state = self.state();
        if state.closed || state.connections.len() >= self.capacity {
            return Err(connection);
        }
        state.connections.push(KeptConnection {
            connection,
            vetted,
            kept_at: Instant::now(),
        });
        Ok(())
    }

    /// Keeps nothing from now on; what was kept, for the caller to release.
    pub(super) fn close(&self) -> Vec<PoolConnection<Postgres>> {
        let mut state = self.state();
        state.closed = true;
        state
            .connections
            .drain(..)
            .map(|kept| kept.connection)
            .collect()
    }

    /// Runs `watch` the first time only: what hands the kept connections back
    /// when the pool closes.
    pub(super) fn watch_once(&self, watch: impl FnOnce()) {
        self.watching.call_once(watch);
    }

    /// Nothing panics while holding the lock; were it poisoned, the list
    /// is still whole.
    fn state(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use sqlx::PgPool;
    use sqlx::postgres::PgPoolOptions;

    use super::*;
    use crate::store::postgres::held::{Connections, Held};

    /// A pool of `size` connections on the test's database, with the count
    /// of connections returned to it (each through sqlx's ping). In a pool
    /// of one, a kept connection is the only one, and a second taken from
    /// the pool is a new session unless the first went back to it.
    async fn pool_of(pool: &PgPool, size: u32) -> (PgPool, Arc<AtomicUsize>) {
        let returned = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&returned);
        let sized = PgPoolOptions::new()
            .max_connections(size)
            .acquire_timeout(Duration::from_secs(5))
            .after_release(move |_, _| {
                counted.fetch_add(1, Ordering::SeqCst);
                Box::pin(async { Ok(true) })
            })
            .connect_with(pool.connect_options().as_ref().clone())
            .await
            .expect("a pool");
        (sized, returned)
    }

    /// Takes a connection, keeps it, and says which session it is.
    async fn kept_once(connections: &Connections) -> i32 {
        let mut first = Held::acquire(connections).await.expect("a connection");
        let session = backend(&mut first).await;
        first.keep_if(true, connections);
        session
    }

    async fn backend(held: &mut Held) -> i32 {
        sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut **held)
            .await
            .expect("a backend pid")
    }

    #[sqlx::test]
    async fn a_kept_connection_serves_the_next_call_without_going_back_to_the_pool(pool: PgPool) {
        let (one, returned) = pool_of(&pool, 1).await;
        let connections =
            Connections::new(one.clone()).keeping(Warm::new(1, Duration::from_secs(60), None));
        let session = kept_once(&connections).await;
        let mut again = Held::acquire(&connections).await.expect("the kept one");
        assert_eq!(backend(&mut again).await, session);
        assert_eq!(returned.load(Ordering::SeqCst), 0, "kept, never returned");
        // A failed statement's connection goes back through the pool.
        again.keep_if(false, &connections);
        let mut from_pool = Held::acquire(&connections).await.expect("from the pool");
        assert_eq!(
            backend(&mut from_pool).await,
            session,
            "returned, then reused"
        );
        assert_eq!(returned.load(Ordering::SeqCst), 1);
        from_pool.release();
    }

    #[sqlx::test]
    async fn a_connection_kept_past_its_idle_time_goes_back_through_the_pool(pool: PgPool) {
        let (one, returned) = pool_of(&pool, 1).await;
        let connections =
            Connections::new(one.clone()).keeping(Warm::new(1, Duration::from_millis(50), None));
        let session = kept_once(&connections).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Past its idle time it is not handed out as kept: it is released
        // (the pool's ping) and this acquire waits for it from the pool, the
        // only connection there is.
        let mut next = Held::acquire(&connections).await.expect("through the pool");
        assert_eq!(backend(&mut next).await, session);
        assert_eq!(
            returned.load(Ordering::SeqCst),
            1,
            "through the pool's return"
        );
        next.release();
    }

    #[sqlx::test]
    async fn a_connection_vetted_before_the_primary_moved_is_closed_not_reused(pool: PgPool) {
        let (one, _) = pool_of(&pool, 1).await;
        let moved = Arc::new(AtomicBool::new(false));
        let switched_after: SwitchedAfter = {
            let moved = Arc::clone(&moved);
            Arc::new(move |_| moved.load(Ordering::SeqCst))
        };
        let connections = Connections::new(one.clone()).keeping(Warm::new(
            1,
            Duration::from_secs(60),
            Some(switched_after),
        ));
        let session = kept_once(&connections).await;
        moved.store(true, Ordering::SeqCst);
        let mut next = Held::acquire(&connections).await.expect("a new connection");
        assert_ne!(backend(&mut next).await, session, "the kept one was closed");
        next.release();
    }

    #[sqlx::test]
    async fn closing_hands_back_what_was_kept_so_the_pool_can_close(pool: PgPool) {
        let (two, _) = pool_of(&pool, 2).await;
        let connections =
            Connections::new(two.clone()).keeping(Warm::new(2, Duration::from_secs(60), None));
        let kept = Held::acquire(&connections).await.expect("a connection");
        let after_close = Held::acquire(&connections).await.expect("another");
        kept.keep_if(true, &connections);
        // Closed by whoever holds the pool, not by the store.
        let closing = tokio::spawn({
            let two = two.clone();
            async move { two.close().await }
        });
        while !two.is_closed() {
            tokio::task::yield_now().await;
        }
        // Done with after the close: released, not kept.
        after_close.keep_if(true, &connections);
        tokio::time::timeout(Duration::from_secs(10), closing)
            .await
            .expect("the pool closes: nothing is kept out of it")
            .expect("joined");
        assert!(matches!(connections.warm.take(), Taken::Nothing));
    }
}
