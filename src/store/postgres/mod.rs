//! The production store. Races are settled by Postgres: the unique scope
//! constraint for first claims, `SELECT … FOR UPDATE` for every other
//! transition, and an UPDATE guarded by the fence and state it read. The
//! SQL is the shared one ([`super::statements`]) but for the batched path
//! ([`batched`], run by [`batcher`]); this file holds what Postgres does its
//! own way.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Postgres;
use sqlx::postgres::{PgConnection, PgPool, PgPoolOptions};
use tracing::{Instrument, info, warn};

use self::batched::{ClaimRequest, WriteRequest};
use self::batcher::Batcher;
pub(crate) use self::held::polled;
use self::held::{Connections, Held, HeldTransaction};
pub use self::keepalive::DatabaseKeepalive;
use self::keepalive::DatabaseSockets;
use self::notifier::Notifier;
use self::session::checked_settings;
pub use self::session::{PLANNER_SETTINGS, SessionTimeouts, session_settings};
pub(crate) use self::topology::explain_connect_error;
use self::topology::{DatabaseTargets, PrimaryTracker};
use self::warm::{KEPT_IDLE, SwitchedAfter, Warm};
use super::dialect::{AtClock, Dialect, retry_on_conflict};
use super::error::{ErrorClass, StoreResult};
use super::sql::{
    delete_expired_tombstones_sql, due_for_deadline_sql, due_for_tombstone_sql, guarded_update_sql,
    select_history_sql, select_operation_sql,
};
use super::statements::Sql;
use super::{AnswerTally, Applied, ClaimStart, PauseHook, PoolUsage};
use crate::backoff::Backoff;
use crate::domain::guarded::GuardedWrite;
use crate::domain::{
    ClaimCommand, Error, HistoryCap, NewHistoryEntry, OperationId, OperationRecord, Result, Target,
    TenantId,
};

mod batched;
mod batcher;
mod held;
pub mod in_transaction;
mod keepalive;
mod notifier;
mod session;
mod topology;
mod warm;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// The same pool, with the waits for its connections counted: every
    /// store call's connection comes from here.
    connections: Connections,
    pause_before_write: Option<PauseHook>,
    /// Sends NOTIFY of state changes after they commit, so waiting Claims on
    /// other replicas wake at once. `None` for Postgres-compatible engines
    /// without LISTEN/NOTIFY: waiters poll anyway.
    notifier: Option<Notifier>,
    /// The client end of TCP keepalive, for the connections opened outside
    /// the pool (LISTEN, NOTIFY, migrations). `None`: off, or a Unix socket.
    sockets: Option<Arc<DatabaseSockets>>,
    /// Concurrent Claims' first steps, sharing statements.
    claims: Batcher<ClaimRequest, Option<ClaimStart>>,
    /// Concurrent owner writes' common cases, sharing statements.
    writes: Batcher<WriteRequest, Option<Applied>>,
    history_cap: HistoryCap,
    /// How long a statement this store runs on a task of its own (a shared
    /// statement) may take: past it, it is abandoned with its
    /// connection, as the caller's own call is by `--db-call-timeout`.
    call_bound: Duration,
}

/// [`PostgresStore::call_bound`] until [`PostgresStore::with_call_bound`]
/// says otherwise: `--db-call-timeout`'s default.
const DEFAULT_CALL_BOUND: Duration = Duration::from_secs(10);

/// Statements in flight per kind (claims, owner writes); concurrent calls
/// beyond them wait and share the next statement. Few and full beats many
/// and small: measured on 2 cores at 64 clients, Claim + Complete ran at
/// 3.8k–4.1k ops/s with 1 or 2, 2.8k with 4 and 2.1k with 8. Two keep one
/// slow statement (a row lock waited for) from holding up every call.
const STATEMENTS_IN_FLIGHT: usize = 2;

/// How many connections the shared statements keep between statements
/// (`warm`): one per statement slot of both batchers, and never more than
/// a quarter of the pool, which everything else shares (none in a pool of
/// fewer than four).
fn kept_connections(max_connections: u32) -> usize {
    let quarter = usize::try_from(max_connections / 4).unwrap_or(usize::MAX);
    (2 * STATEMENTS_IN_FLIGHT).min(quarter)
}

/// How long migrations at start-up may take.
const MIGRATION_BOUND: Duration = Duration::from_secs(300);

/// Pauses before listening again for other replicas' changes.
const LISTEN_FIRST_PAUSE: Duration = Duration::from_millis(100);
const LISTEN_MAX_PAUSE: Duration = Duration::from_secs(10);

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PostgresStore")
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
pub struct PostgresOptions {
    pub url: String,
    pub max_connections: u32,
    pub acquire_timeout: Duration,
    pub timeouts: SessionTimeouts,
    pub keepalive: DatabaseKeepalive,
}

/// What [`write_in_parts`] answers, each member's write or `None`.
type Written<'a> =
    std::pin::Pin<Box<dyn Future<Output = StoreResult<Vec<Option<Applied>>>> + Send + 'a>>;

/// The batchers of Claims' first steps and of owner writes.
type Batchers = (
    Batcher<ClaimRequest, Option<ClaimStart>>,
    Batcher<WriteRequest, Option<Applied>>,
);

/// Owner writes' common cases, one statement for all; a statement that ran
/// past `statement_timeout` runs again in two halves, down to members
/// alone, before any member hears UNAVAILABLE: a batch slow as a whole is
/// no member's fault.
fn write_in_parts<'a>(
    pool: &'a Connections,
    members: &'a [batched::WriteMember<'a>],
) -> Written<'a> {
    Box::pin(async move {
        match batched::write_guarded(pool, members).await {
            // A row held elsewhere: each member decides alone, in the
            // locked path.
            Err(error) if batched::is_lock_timeout(&error) => {
                Ok(members.iter().map(|_| None).collect())
            }
            Err(error) if members.len() > 1 && batched::is_statement_timeout(&error) => {
                let (first, second) = members.split_at(members.len() / 2);
                let mut written = write_in_parts(pool, first).await?;
                written.extend(write_in_parts(pool, second).await?);
                Ok(written)
            }
            written => written,
        }
    })
}

impl PostgresStore {
    pub async fn connect(options: &PostgresOptions) -> Result<Self> {
        let mut targets = DatabaseTargets::parse(&options.url).map_err(Error::Internal)?;
        // Every host's options carry the session settings: the pool gets a
        // host's options as they are when the primary moves to it.
        targets.hosts = targets
            .hosts
            .into_iter()
            .map(|host| session_settings(host, &options.timeouts, options.keepalive))
            .collect();
        // Keepalive on the sockets to every host of the URL, not only the
        // one the pool starts on: it follows the primary.
        let sockets = DatabaseSockets::of(&targets.hosts, options.keepalive);
        let tracker = match targets.needs_tracking() {
            true => Some(
                PrimaryTracker::start(targets.clone(), sockets.clone())
                    .await
                    .map_err(|reason| Error::Unavailable {
                        reason,
                        retry_after: Duration::from_secs(1),
                    })?,
            ),
            false => None,
        };
        let connect_options = match &tracker {
            Some(tracker) => tracker.current(),
            None => targets.hosts[0].clone(),
        };
        let mut pool = PgPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            // A broken connection shows in the statement that uses it (an
            // UNAVAILABLE the caller retries); a ping before every acquire
            // would cost a round trip per call.
            .test_before_acquire(false)
            // Nothing goes back to the pool without a bound: see `held`.
            .after_release(held::check_on_release);
        if let Some(tracker) = &tracker {
            pool = pool.before_acquire(topology::close_if_opened_before_a_switch(tracker));
        }
        let pool = keepalive::configure_on_connect(pool, sockets.as_ref())
            .connect_with(connect_options)
            .await
            .map_err(|error| match topology::explain_connect_error(&error) {
                Some(explained) => Error::Internal(explained),
                None => Self::translate(error.into()),
            })?;
        let switched_after = tracker.as_ref().map(|tracker| {
            let tracker = Arc::clone(tracker);
            let switched_after: SwitchedAfter =
                Arc::new(move |moment| tracker.switched_after(moment));
            switched_after
        });
        if let Some(tracker) = tracker {
            tokio::spawn(tracker.follow(pool.clone()));
        }
        Ok(Self::from_pool_with(pool, sockets, switched_after))
    }

    /// Refuses a pooler that would lose idemd's session state (see
    /// [`topology::check_sessions`]); for `idemd serve`, at start-up.
    pub async fn check_sessions(&self, timeouts: &SessionTimeouts) -> Result<()> {
        let connect = self.pool.connect_options();
        topology::check_sessions(&connect, &checked_settings(timeouts))
            .await
            .map_err(Error::Internal)
    }

    /// A store on a pool made elsewhere; its connections outside the pool
    /// get no client-side keepalive (the server's end is in the pool's
    /// connect options, if they carry it).
    pub fn from_pool(pool: PgPool) -> Self {
        Self::from_pool_with(pool, None, None)
    }

    /// `switched_after`: with several hosts, whether the primary moved after
    /// a moment (a kept connection vetted before is not used again).
    fn from_pool_with(
        pool: PgPool,
        sockets: Option<Arc<DatabaseSockets>>,
        switched_after: Option<SwitchedAfter>,
    ) -> Self {
        let notifier = Notifier::new(pool.clone(), sockets.clone());
        let connections = Connections::new(pool.clone()).keeping(Warm::new(
            kept_connections(pool.options().get_max_connections()),
            KEPT_IDLE,
            switched_after,
        ));
        let (claims, writes) = Self::batchers(&connections, DEFAULT_CALL_BOUND);
        Self {
            pool,
            connections,
            pause_before_write: None,
            notifier: Some(notifier),
            sockets,
            claims,
            writes,
            history_cap: HistoryCap::default(),
            call_bound: DEFAULT_CALL_BOUND,
        }
    }

    /// The same store, abandoning what it runs on tasks of its own past
    /// `bound` (zero: never), as `--db-call-timeout` bounds each call.
    pub fn with_call_bound(&self, bound: Duration) -> Self {
        let (claims, writes) = Self::batchers(&self.connections, bound);
        Self {
            claims,
            writes,
            call_bound: bound,
            ..self.clone()
        }
    }

    /// The shared statements of Claims' first steps and of owner writes.
    fn batchers(pool: &Connections, bound: Duration) -> Batchers {
        let in_flight = STATEMENTS_IN_FLIGHT;
        let claims = {
            let pool = pool.clone();
            Batcher::new(
                in_flight,
                bound,
                batched::claim_key,
                batched::claim_size,
                move |requests| {
                    let pool = pool.clone();
                    Box::pin(async move {
                        let members: Vec<_> = requests.iter().map(ClaimRequest::member).collect();
                        retry_on_conflict::<Self, _, _, _>(|| {
                            batched::insert_or_find(&pool, &members)
                        })
                        .await
                    })
                },
            )
        };
        let writes = {
            let pool = pool.clone();
            Batcher::new(
                in_flight,
                bound,
                batched::write_key,
                batched::write_size,
                move |requests| {
                    let pool = pool.clone();
                    Box::pin(async move {
                        let members: Vec<_> = requests.iter().map(WriteRequest::member).collect();
                        retry_on_conflict::<Self, _, _, _>(|| write_in_parts(&pool, &members)).await
                    })
                },
            )
        };
        (claims, writes)
    }

    /// The same store, holding each operation's history to `cap`.
    pub fn with_history_cap(&self, cap: HistoryCap) -> Self {
        Self {
            history_cap: cap,
            ..self.clone()
        }
    }

    /// For engines without LISTEN/NOTIFY: no NOTIFY is sent, nothing listens.
    pub fn without_change_notifications(mut self) -> Self {
        self.notifier = None;
        self
    }

    /// The same store, pausing in every transition between read and write.
    pub fn with_pause_before_write(&self, hook: PauseHook) -> Self {
        Self {
            pause_before_write: Some(hook),
            ..self.clone()
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies pending migrations. sqlx holds an advisory lock meanwhile, so
    /// replicas starting together migrate once. They run on a connection of
    /// their own without the session timeouts: waiting for another replica's
    /// migration lock, or rewriting a large table, is no stall.
    pub async fn migrate(&self) -> Result<()> {
        // The pool's connect options already carry the server's end of the
        // keepalive: nothing to add.
        let options = session_settings(
            self.pool.connect_options().as_ref().clone(),
            &SessionTimeouts::NONE,
            DatabaseKeepalive::OFF,
        );
        let connection = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(self.call_bound.max(Duration::from_secs(1)));
        let connection = keepalive::configure_on_connect(connection, self.sockets.as_ref())
            .connect_with(options)
            .await
            .map_err(|error| Self::translate(error.into()))?;
        // Bounded, but generously: another replica's migration may hold
        // the lock for as long as it rewrites a table.
        let migrated = tokio::time::timeout(
            MIGRATION_BOUND,
            super::run_migrations(&MIGRATOR, &connection),
        )
        .await
        .unwrap_or_else(|_| {
            Err(Error::unavailable(
                "migrations did not finish within 5 minutes: the database stopped answering,                  or another replica's migration holds its lock",
            ))
        });
        // Not awaited: a connection to a database that stopped answering
        // may never close.
        drop(connection);
        migrated
    }

    /// Acknowledged results must survive a crash, and a failover: warns
    /// when the database's commit settings say they may not (see
    /// [`durability_risk`]). `single_node`: the operator says there is no
    /// standby to fail over to.
    pub async fn warn_about_durability(&self, single_node: bool) -> Result<()> {
        let mut connection = Held::acquire(&self.connections)
            .await
            .map_err(|error| Self::translate(error.into()))?;
        let read: std::result::Result<(String, String), sqlx::Error> = sqlx::query_as(
            "SELECT current_setting('synchronous_commit'), \
                    current_setting('synchronous_standby_names')",
        )
        .fetch_one(&mut *connection)
        .instrument(Self::statement("SHOW synchronous_commit"))
        .await;
        connection.release();
        let (synchronous_commit, standby_names) =
            read.map_err(|error| Self::translate(error.into()))?;
        match durability_risk(&synchronous_commit, &standby_names) {
            Some(DurabilityRisk::Crash) => warn!(
                synchronous_commit = %synchronous_commit,
                "postgres synchronous_commit is off: a database crash can lose results that \
                 idemd already acknowledged, and a retry would then execute the effect again"
            ),
            Some(DurabilityRisk::Failover) if !single_node => warn!(
                synchronous_commit = %synchronous_commit,
                synchronous_standby_names = %standby_names,
                "postgres commits do not wait for a synchronous standby to flush them: a \
                 failover can lose results that idemd already acknowledged, and a retry would \
                 then execute the effect again. Set synchronous_commit = on (or remote_apply) \
                 with synchronous_standby_names, or, if this database has no standby to fail \
                 over to, acknowledge it with IDEMD_SINGLE_NODE_DURABILITY_OK=true"
            ),
            Some(DurabilityRisk::Failover) => info!(
                synchronous_commit = %synchronous_commit,
                "postgres commits do not wait for a synchronous standby: acknowledged results \
                 survive a crash of this database, not a failover (single node acknowledged)"
            ),
            None => info!(
                synchronous_commit = %synchronous_commit,
                synchronous_standby_names = %standby_names,
                "postgres commits wait for a synchronous standby's flush: acknowledged results \
                 survive a failover to that standby"
            ),
        }
        Ok(())
    }
}

/// How acknowledged results could be lost, by the commit settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DurabilityRisk {
    /// `synchronous_commit = off`: in a crash of the primary itself.
    Crash,
    /// Commits that wait for no standby's flush: on a failover to a standby
    /// that had not received them.
    Failover,
}

/// What `synchronous_commit` and `synchronous_standby_names` risk. Only
/// `on` and `remote_apply` wait for a synchronous standby to flush, and
/// only when one is named; `remote_write` waits for its write, not its
/// flush; `local` waits for none.
pub(crate) fn durability_risk(
    synchronous_commit: &str,
    synchronous_standby_names: &str,
) -> Option<DurabilityRisk> {
    let no_standby = synchronous_standby_names.trim().is_empty();
    match synchronous_commit.trim().to_ascii_lowercase().as_str() {
        "off" | "false" | "no" | "0" => Some(DurabilityRisk::Crash),
        "local" | "remote_write" => Some(DurabilityRisk::Failover),
        _ if no_standby => Some(DurabilityRisk::Failover),
        _ => None,
    }
}

impl Dialect for PostgresStore {
    type Db = Postgres;
    type Stamp = DateTime<Utc>;

    const KIND: &'static str = "postgres";
    const SYSTEM: &'static str = "postgresql";
    const TRANSACTION_ATTEMPTS: usize = 5;
    const LOCK_BY_SCOPE: &'static str = select_operation_sql!(by_scope, "", " FOR UPDATE");
    const LOCK_BY_ID: &'static str = select_operation_sql!(by_id, "", " FOR UPDATE");
    const READ_BY_SCOPE: &'static str =
        select_operation_sql!(by_scope, ", clock_timestamp() AS db_now", "");
    const READ_BY_ID: &'static str =
        select_operation_sql!(by_id, ", clock_timestamp() AS db_now", "");
    const CLOCK: &'static str = "SELECT clock_timestamp()";
    const GUARDED_UPDATE: &'static str = guarded_update_sql!("nextval('operation_fence')");
    // Rows a Claim or another sweeper holds are skipped, not waited for.
    const DUE_FOR_TOMBSTONE: &'static str = due_for_tombstone_sql!(" FOR UPDATE SKIP LOCKED");
    const DUE_FOR_DEADLINE: &'static str = due_for_deadline_sql!(" FOR UPDATE SKIP LOCKED");
    const DELETE_EXPIRED_TOMBSTONES: &'static str =
        delete_expired_tombstones_sql!(" FOR UPDATE SKIP LOCKED");
    const SELECT_HISTORY: &'static str = select_history_sql!("count");
    // One statement, HistoryCap::place in SQL (its mirror: see the file).
    const APPEND_HISTORY: &'static str = include_str!("sql/append_history.sql");

    fn stamp(moment: DateTime<Utc>) -> DateTime<Utc> {
        moment
    }

    fn rows_affected(result: &sqlx::postgres::PgQueryResult) -> u64 {
        result.rows_affected()
    }

    fn classify_code(sqlstate: &str) -> ErrorClass {
        match sqlstate {
            // Serialization failure, deadlock: run the transaction again. A
            // unique violation here can only be a history sequence drawn
            // from a snapshot older than a concurrent locked write of the
            // same operation (scopes and tenant names are inserted ON
            // CONFLICT DO NOTHING): again, too.
            // Once the attempts are spent they answer UNAVAILABLE too.
            "40001" | "40P01" | "23505" => ErrorClass::Conflict,
            // Not now, but soon: a lock or statement that took too long
            // (lock_timeout 55P03, statement_timeout or a cancel 57014), a
            // session ended while idle in a transaction (25P03), a primary
            // demoted under us (25006, read-only transaction), the server
            // shutting down or starting (57P01-57P05), connection
            // exceptions (08*), insufficient resources (53*: too many
            // connections, out of memory or disk).
            "55P03" | "57014" | "25006" | "25P03" => ErrorClass::Unavailable,
            code if code.starts_with("08") || code.starts_with("53") || code.starts_with("57P") => {
                ErrorClass::Unavailable
            }
            _ => ErrorClass::Internal,
        }
    }

    /// A [`Held`] connection: released by the call once its statements
    /// ended, under [`held::RELEASE_BOUND`]; dropped with its call, closed
    /// at once without a round trip.
    type Read = Held;

    async fn acquire_read(&self) -> StoreResult<Held> {
        Ok(Held::acquire(&self.connections).await?)
    }

    fn release_read(read: Held) {
        read.release();
    }

    async fn read_alone(
        &self,
        tenant: TenantId,
        target: &Target,
    ) -> StoreResult<Option<(OperationRecord, DateTime<Utc>)>> {
        let mut connection = self.acquire_read().await?;
        let found = Self::read_with_clock_in(&mut connection, tenant, target).await;
        Self::release_read(connection);
        found
    }

    /// On a [`Held`] connection too ([`HeldTransaction`]): a BEGIN dropped
    /// on its way closes the connection instead of handing on a session
    /// inside a transaction nobody ends (sqlx 0.9.0's `pool.begin()` would,
    /// transact-rs/sqlx#4393).
    type ReadTransaction = HeldTransaction;

    async fn begin_read(&self) -> StoreResult<HeldTransaction> {
        Ok(HeldTransaction::begin(&self.connections, "BEGIN").await?)
    }

    /// READ COMMITTED would give each statement a snapshot of its own: a
    /// transition committed between the record's read and the history's
    /// would show in one and not the other.
    async fn begin_snapshot(&self) -> StoreResult<HeldTransaction> {
        Ok(HeldTransaction::begin(
            &self.connections,
            "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
        )
        .await?)
    }

    async fn end_read(&self, read: HeldTransaction) -> StoreResult<()> {
        Ok(read.rollback().await?)
    }

    fn pause_before_write(&self) -> Option<&PauseHook> {
        self.pause_before_write.as_ref()
    }

    fn history_cap(&self) -> HistoryCap {
        self.history_cap
    }

    /// On a connection of its own ([`HeldTransaction`]): abandoned with its
    /// call, it is closed at once, never handed on (a BEGIN dropped on its
    /// way included).
    type Write = HeldTransaction;

    async fn begin_write(&self) -> StoreResult<HeldTransaction> {
        Ok(HeldTransaction::begin(&self.connections, "BEGIN").await?)
    }

    async fn begin_write_locked(
        &self,
        tenant: TenantId,
        target: &Target,
    ) -> StoreResult<(HeldTransaction, Option<AtClock>)> {
        // A row lock of its own, then the clock.
        let mut transaction = self.begin_write().await?;
        let Some(record) = Self::lock(&mut transaction, tenant, target).await? else {
            return Ok((transaction, None));
        };
        let now = Self::database_now(&mut transaction).await?;
        Ok((transaction, Some((record, now))))
    }

    async fn commit(&self, write: HeldTransaction) -> StoreResult<()> {
        Ok(write.commit().await?)
    }

    async fn rollback(&self, write: HeldTransaction) -> StoreResult<()> {
        Ok(write.rollback().await?)
    }

    async fn advance_fence(_connection: &mut PgConnection) -> StoreResult<()> {
        // The guarded UPDATE draws from the sequence itself.
        Ok(())
    }

    async fn count_into_last_history_entry(
        _connection: &mut PgConnection,
        _operation_id: OperationId,
        _entry: &NewHistoryEntry,
        _coalesce_key: Option<&str>,
        _cap: HistoryCap,
        _now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        // APPEND_HISTORY counts or appends in one statement.
        Ok(false)
    }

    fn pool_usage(&self) -> PoolUsage {
        PoolUsage {
            size: self.pool.size(),
            idle: u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX),
            max: self.pool.options().get_max_connections(),
            waits: self.connections.waits.totals(),
        }
    }

    async fn close(&self) {
        if let Some(notifier) = &self.notifier {
            notifier.close();
        }
        self.pool.close().await;
    }

    /// Listens on a connection of its own, outside the pool, checked while
    /// silent; a lost one is listened on again after a pause that doubles
    /// while it keeps failing and starts over once listening worked.
    async fn listen_for_changes(
        &self,
        changed: &(dyn Fn(OperationId) + Send + Sync),
    ) -> Result<()> {
        if self.notifier.is_none() {
            std::future::pending::<()>().await;
        }
        let mut backoff = Backoff::new(LISTEN_FIRST_PAUSE, LISTEN_MAX_PAUSE);
        loop {
            // Each time to the pool's current target: after a failover, the
            // new primary.
            let listened =
                notifier::listen(&self.pool, self.sockets.as_ref(), changed, &mut backoff).await;
            if let Err(error) = listened {
                warn!(%error, "not listening for other replicas' changes; waiters poll meanwhile");
            }
            tokio::time::sleep(backoff.pause()).await;
        }
    }

    async fn insert_or_find(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> StoreResult<Option<ClaimStart>> {
        let request = ClaimRequest {
            tenant,
            operation_id,
            command: command.clone(),
        };
        Ok(self.claims.call(request).await?)
    }

    async fn write_guarded(
        &self,
        tenant: TenantId,
        guarded: GuardedWrite,
    ) -> StoreResult<Option<Applied>> {
        let request = WriteRequest {
            tenant,
            guarded,
            history_cap: self.history_cap,
        };
        Ok(self.writes.call(request).await?)
    }

    /// One statement for the batch (sorted by operation_id), outside any
    /// explicit transaction.
    async fn add_answer_counts(&self, sorted: &[AnswerTally]) -> StoreResult<()> {
        let wide = |count: u64| i64::try_from(count).unwrap_or(i64::MAX);
        let mut connection = Held::acquire(&self.connections).await?;
        let added = sqlx::query(include_str!("sql/add_answer_counts.sql"))
            .bind(sorted.iter().map(|t| t.operation_id.0).collect::<Vec<_>>())
            .bind(sorted.iter().map(|t| wide(t.replays)).collect::<Vec<_>>())
            .bind(sorted.iter().map(|t| wide(t.pendings)).collect::<Vec<_>>())
            .bind(
                sorted
                    .iter()
                    .map(|t| {
                        t.last_replay_ago
                            .map(|ago| i64::try_from(ago.as_millis()).unwrap_or(i64::MAX))
                    })
                    .collect::<Vec<_>>(),
            )
            .execute(&mut *connection)
            .instrument(Self::statement("UPDATE operations answer counts"))
            .await;
        connection.release();
        added?;
        Ok(())
    }

    fn announce_change(&self, operation_id: OperationId) {
        if let Some(notifier) = &self.notifier {
            notifier.changed(operation_id);
        }
    }
}

#[cfg(test)]
mod tests;
