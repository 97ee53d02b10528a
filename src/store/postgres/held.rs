//! What becomes of a pool connection when the call using it is abandoned.
//!
//! A database that stops answering without closing its sockets (a storage
//! stall, a hung pooler or middlebox, a stopped postmaster) keeps
//! acknowledging TCP, so neither keepalive nor `TCP_USER_TIMEOUT` ever ends
//! a connection to it. sqlx 0.9 returns a dropped [`PoolConnection`] to the
//! pool on a task of its own that first pings it (`Floating::return_to_pool`)
//! with no timeout, holding the connection's pool permit meanwhile: every
//! call abandoned on such a database (past `--db-call-timeout`, or a client
//! gone) left its permit on a socket that never answers, and once all were
//! taken the replica answered UNAVAILABLE long after the database was back.
//!
//! So every connection the store uses is a [`Held`] one, and none is ever
//! returned to the pool unbounded: the batched statements, the locked path
//! and read transactions ([`HeldTransaction`]), and plain reads (Lookup,
//! authentication, readiness, the start-up checks) alike.
//!
//! - Released by its call ([`Held::release`], once its statements ended,
//!   whatever they answered), a connection goes back through sqlx's return
//!   path (`after_release`, then its ping) as a whole under
//!   [`RELEASE_BOUND`]: past it, the future is dropped with the connection,
//!   its socket closed and its permit freed. A freeze that begins at any
//!   moment of the return is covered, the ping included: that ping is sqlx's
//!   and cannot be given a timeout of its own, so the bound is put around
//!   the whole return instead.
//! - Dropped without [`Held::release`] (its call abandoned, a statement
//!   perhaps on the wire), it is detached at once (the permit freed, the
//!   pool may open another) and its socket closed on a background task
//!   without a word to the database: no Terminate, no ROLLBACK, no round
//!   trip on a socket that may never answer (Postgres rolls back a session
//!   whose socket closed).
//!
//! The batched statements keep their connections instead ([`Held::keep_if`],
//! `warm`): sqlx's ping is a round trip per statement, paid now only by a
//! connection that goes back to the pool.
//!
//! A released connection pays sqlx's ping and nothing more: the pool's
//! `after_release` ([`check_on_release`]) lets it through without a
//! statement. The check runs only on a connection returned some other way
//! (code outside the store using [`super::PostgresStore::pool`] directly):
//! it reads, within [`RELEASE_BOUND`], whether the session is idle outside
//! a transaction, and closes it otherwise. For those, sqlx's ping after a
//! prompt answer is still unbounded: no store call returns a connection
//! that way.
//!
//! Nothing here depends on a system call a sandbox may refuse: the
//! client-side keepalive ([`super::keepalive`]) needs `pidfd_getfd(2)`,
//! which the chart's seccomp profile refuses, and recovery must not.

use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use sqlx::pool::{PoolConnection, PoolConnectionMetadata};
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{Postgres, Row};

use super::warm::{Taken, Warm};
use crate::store::acquire::AcquireWaits;

/// How long returning a connection to the pool may take (sqlx's ping, or
/// [`check_on_release`]'s statement): a round trip, or a statement the
/// abandoned call left running that ends by the session's own timeouts.
pub(super) const RELEASE_BOUND: Duration = Duration::from_secs(2);

tokio::task_local! {
    /// Set while [`Held::release`] returns a connection it saw complete.
    static RELEASED_CLEAN: ();
}

thread_local! {
    /// Whether a store call is being polled (see [`polled`]).
    static IN_POLL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `call`, marked as running while it is polled: a write transaction that
/// it drops while running (an error returned by `?`) ended its statements
/// and is rolled back, while one dropped with `call` itself (a timeout, a
/// cancelled call) may have a statement on the wire and is abandoned.
pub(crate) fn polled<F: Future>(call: F) -> Polled<F> {
    Polled(Box::pin(call))
}

pub(crate) struct Polled<F: Future>(Pin<Box<F>>);

impl<F: Future> Future for Polled<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<F::Output> {
        let before = IN_POLL.replace(true);
        let polled = self.0.as_mut().poll(context);
        IN_POLL.set(before);
        polled
    }
}

fn in_poll() -> bool {
    IN_POLL.get()
}

/// The store's pool, the count of waits for its connections, and the
/// connections the shared statements keep ([`Warm`]): every [`Held`] comes
/// from here.
#[derive(Clone)]
pub(crate) struct Connections {
    pub(super) pool: PgPool,
    pub(super) waits: Arc<AcquireWaits>,
    pub(super) warm: Arc<Warm>,
}

impl Connections {
    /// `warm`: no connection is kept unless it is given room
    /// ([`Connections::keeping`]).
    pub(crate) fn new(pool: PgPool) -> Self {
        Self {
            pool,
            waits: Arc::default(),
            warm: Arc::new(Warm::new(0, Duration::ZERO, None)),
        }
    }

    /// The same connections, keeping `warm`'s between shared statements.
    pub(crate) fn keeping(self, warm: Warm) -> Self {
        Self {
            warm: Arc::new(warm),
            ..self
        }
    }

    /// Once the pool closes (its `close`, or its last handle dropped), keeps
    /// nothing and releases what was kept: `close` waits for every
    /// connection out of the pool, whoever closes it (the store, or code
    /// holding the pool). Started by the first connection kept.
    fn hand_back_when_the_pool_closes(&self) {
        self.warm.watch_once(|| {
            let closed = self.pool.close_event();
            // Weak: a store dropped without closing drops what it kept.
            let warm = Arc::downgrade(&self.warm);
            tokio::spawn(async move {
                closed.await;
                if let Some(warm) = warm.upgrade() {
                    for connection in warm.close() {
                        Held::from_pool(connection, Instant::now()).release();
                    }
                }
            });
        });
    }
}

/// A pool connection a store call holds: released when the call is done
/// with it, abandoned (closed at once, its permit freed) when dropped.
pub(crate) struct Held {
    connection: Option<PoolConnection<Postgres>>,
    /// When it was taken from the pool (and so checked by its
    /// `before_acquire`), or before: a switch of primary after this moment
    /// makes a kept connection stale.
    vetted: Instant,
}

impl Held {
    /// A connection a shared statement kept ([`Held::keep_if`]) if one is
    /// ready, else one from the pool.
    pub(super) async fn acquire(connections: &Connections) -> Result<Self, sqlx::Error> {
        loop {
            match connections.warm.take() {
                Taken::Ready(connection, vetted) => return Ok(Self::from_pool(connection, vetted)),
                Taken::Idle(connection) => Self::from_pool(connection, Instant::now()).release(),
                Taken::Stale(connection) => abandon(connection),
                Taken::Nothing => break,
            }
        }
        // Read before asking: a switch while the pool vets it counts as after.
        let vetted = Instant::now();
        let connection = connections.waits.time(connections.pool.acquire()).await?;
        Ok(Self::from_pool(connection, vetted))
    }

    fn from_pool(connection: PoolConnection<Postgres>, vetted: Instant) -> Self {
        Self {
            connection: Some(connection),
            vetted,
        }
    }

    /// Done with, its statements ended: kept for the next shared statement
    /// if they succeeded and there is room, else back to the pool
    /// ([`Held::release`]): after an error, the pool's ping finds out whether
    /// the connection still works, instead of the next statement.
    pub(super) fn keep_if(mut self, succeeded: bool, connections: &Connections) {
        if !succeeded || connections.pool.is_closed() {
            return self.release();
        }
        let Some(connection) = self.connection.take() else {
            return;
        };
        connections.hand_back_when_the_pool_closes();
        if let Err(connection) = connections.warm.keep(connection, self.vetted) {
            Self::from_pool(connection, self.vetted).release();
        }
    }

    /// Back to the pool through sqlx's ping, bounded by [`RELEASE_BOUND`].
    pub(super) fn release(mut self) {
        let Some(mut connection) = self.connection.take() else {
            return;
        };
        let returning = connection.return_to_pool();
        drop(connection);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(RELEASED_CLEAN.scope((), async move {
            // Past the bound the connection is dropped with the future: its
            // socket closed and its permit freed.
            let _ = tokio::time::timeout(RELEASE_BOUND, returning).await;
        }));
    }
}

impl Deref for Held {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.connection.as_deref().expect("a held connection")
    }
}

impl DerefMut for Held {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.connection.as_deref_mut().expect("a held connection")
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            abandon(connection);
        }
    }
}

/// Out of the pool at once, closed without a round trip.
fn abandon(connection: PoolConnection<Postgres>) {
    let raw = connection.detach();
    match tokio::runtime::Handle::try_current() {
        // Dropping closes the socket: no Terminate, nothing to wait for.
        Ok(runtime) => drop(runtime.spawn(async move { drop(raw) })),
        Err(_) => drop(raw),
    }
}

/// The pool's `after_release`: a connection returned by anything but
/// [`Held::release`] (code outside the store using the pool directly,
/// perhaps abandoned mid-statement) goes back only if, within
/// [`RELEASE_BOUND`], it answers as a session idle outside any transaction.
/// A BEGIN abandoned on its way (transact-rs/sqlx#4393) would otherwise
/// hand the next caller a session inside a transaction.
pub(super) fn check_on_release(
    connection: &mut PgConnection,
    _: PoolConnectionMetadata,
) -> futures_util::future::BoxFuture<'_, Result<bool, sqlx::Error>> {
    Box::pin(async move {
        if RELEASED_CLEAN.try_with(|()| ()).is_ok() {
            return Ok(true);
        }
        // A simple query (no extended protocol): its statement time is its
        // transaction's start unless an earlier BEGIN opened one.
        let idle = tokio::time::timeout(
            RELEASE_BOUND,
            sqlx::raw_sql("SELECT statement_timestamp() = transaction_timestamp()")
                .fetch_one(&mut *connection),
        )
        .await;
        match idle {
            Ok(Ok(row)) if row.try_get::<bool, _>(0).unwrap_or(false) => Ok(true),
            Ok(Ok(_)) => Err(sqlx::Error::Protocol(
                "a connection came back inside a transaction".into(),
            )),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(sqlx::Error::Protocol(
                "a released connection did not answer in time".into(),
            )),
        }
    })
}

/// The locked path's transaction, on a [`Held`] connection.
pub(crate) struct HeldTransaction {
    held: Option<Held>,
}

impl HeldTransaction {
    pub(super) async fn begin(
        connections: &Connections,
        statement: &'static str,
    ) -> Result<Self, sqlx::Error> {
        let mut held = Held::acquire(connections).await?;
        // Dropped during BEGIN, `held` is abandoned: no session is ever
        // handed on inside a transaction nobody ends.
        sqlx::raw_sql(statement).execute(&mut *held).await?;
        Ok(Self { held: Some(held) })
    }

    pub(super) async fn commit(mut self) -> Result<(), sqlx::Error> {
        self.end("COMMIT").await
    }

    pub(super) async fn rollback(mut self) -> Result<(), sqlx::Error> {
        self.end("ROLLBACK").await
    }

    async fn end(&mut self, statement: &'static str) -> Result<(), sqlx::Error> {
        let Some(held) = self.held.as_mut() else {
            return Ok(());
        };
        sqlx::raw_sql(statement).execute(&mut **held).await?;
        if let Some(held) = self.held.take() {
            held.release();
        }
        Ok(())
    }
}

impl Deref for HeldTransaction {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.held.as_deref().expect("an open transaction")
    }
}

impl DerefMut for HeldTransaction {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.held.as_deref_mut().expect("an open transaction")
    }
}

impl Drop for HeldTransaction {
    fn drop(&mut self) {
        let Some(mut held) = self.held.take() else {
            return;
        };
        // Dropped with its call (not while the call runs): a statement may
        // be on the wire, so nothing more is said on this connection.
        if !in_poll() {
            return;
        }
        // Dropped by the call itself, after a statement failed: roll back
        // and reuse the session, within the bound (dropped with the task
        // past it, `held` is abandoned).
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let rolled_back =
                tokio::time::timeout(RELEASE_BOUND, sqlx::raw_sql("ROLLBACK").execute(&mut *held))
                    .await;
            if matches!(rolled_back, Ok(Ok(_))) {
                held.release();
            }
        });
    }
}
