//! One narrow storage interface, implemented by each store. The stores settle
//! races (unique constraint, row locks, guarded updates); the decisions come
//! from the pure [`crate::domain::transition`] module.
//!
//! # Layout: the two write paths and when each runs
//!
//! - The **locked path** ([`locked`]): begin a write transaction, lock the
//!   operation's row (`SELECT … FOR UPDATE`; SQLite: the one writer), read the
//!   database clock, decide in the pure domain, write guarded by the fence and
//!   state read and append history ([`Sql::apply`]), commit; run again
//!   on a conflict ([`dialect::retry_on_conflict`]). Both databases. It runs
//!   for every [`Store::transition`]: a Claim whose scope has a record that
//!   the read alone cannot answer (takeover, retry, replay of a live
//!   attempt), a Fail with no one-statement case, Reconcile; and for every
//!   owner write (Renew, Complete, Fail) that the batched path did not settle.
//!   The sweep decides each due record the same way ([`decide_sweep`]).
//! - The **one-statement batched path** (Postgres only: [`postgres`]'s
//!   `batched` statements, with concurrent calls of one replica queued into
//!   one statement by its `batcher`): `INSERT_OR_FIND` for the first step of
//!   every Claim ([`Store::insert_or_find`]; SQLite runs the same step as a
//!   transaction of its own), and `WRITE_GUARDED` for the common case of
//!   Renew, Complete and Fail ([`Store::write`], in [`paths`]). A member whose
//!   guard does not hold, or whose row is locked elsewhere (lock timeout), is
//!   not written there: [`Store::write`] falls back to the locked path, which
//!   decides it. SQLite has no batched write: its [`Store::write`] is the
//!   locked path.
//!
//! # Files: what differs, the statements, the flows
//!
//! [`dialect`]'s `Dialect` is what each database does its own way (how a
//! write transaction begins, a row is locked, a fence drawn, timestamps
//! stored, errors read), and the one retry loop. [`statements`]' `Sql` is
//! every statement both databases run, bound and decoded once: it exists
//! because sqlx's bind/decode bounds are not implied at a `D: Dialect` use
//! (rust-lang/rust#20671), so its one blanket impl is the one place they are
//! written, and the code above it names none. The flows are the public
//! contracts' own impls, each method the flow itself: [`Store`] in [`paths`]
//! (reads, sweep, authentication; the [`locked`] path shared by `write` and
//! `transition`), [`Credentials`] in [`credentials`] (tenants, tokens, audit,
//! apply; its values and the contract itself are `access.rs`, low enough for
//! this file and the statements to name). Statement text both share is in
//! `sql.rs`; the large statements are `.sql` files beside their dialect.
//!
//! [`Sql::apply`]: statements::Sql::apply
//! [`decide_sweep`]: crate::domain::transition::decide_sweep
//!
//! # Rules written in Rust and again in SQL
//!
//! Each rule has one Rust spec in the domain; the SQL that restates it names
//! the spec in a comment, and a test per mirror (`mirror_tests`) drives random
//! inputs through the SQL on a real database and through the spec, and
//! compares.
//!
//! | rule | Rust spec | SQL mirrors | test (`store::mirror_tests::…`) |
//! |---|---|---|---|
//! | lease cap (never past the attempt deadline) | `transition::lease_within_attempt`, via `guarded::Write::apply` | `postgres/sql/write_guarded.sql` (`lease_expires_at = LEAST(…)`) | `guarded::postgres_write_guarded_set_is_write_apply` |
//! | guarded write's effect on the row | `guarded::Write::apply` | `postgres/sql/write_guarded.sql` (SET of `updated`); `sqlite/sql/write_guarded.sql` (SET of its UPDATE) | `guarded::postgres_write_guarded_set_is_write_apply`, `guarded::sqlite_write_guarded_set_is_write_apply` |
//! | guarded write's precondition | `guarded::Guard::holds` | `postgres/sql/write_guarded.sql` (WHERE of `updated`); `sqlite/sql/write_guarded.sql` (WHERE of its UPDATE) | `guarded::postgres_write_guarded_where_is_guard_holds`, `guarded::sqlite_write_guarded_where_is_guard_holds` |
//! | history placement (count, append, truncation marker) | `HistoryCap::place` | `postgres/sql/append_history.sql`; `postgres/sql/write_guarded.sql` (`last`, `coalesced`, `history`); `sqlite/sql/count_into_last_history_entry.sql` + `sqlite/sql/append_history.sql`; `sqlite/sql/append_entry_after_update.sql` (an entry appended whatever the last); `sqlite/sql/write_guarded.sql` (`placed`, the INSERT … ON CONFLICT) | `history::postgres_append_history_is_history_cap_place`, `history::postgres_write_guarded_history_is_history_cap_place`, `history::sqlite_append_history_is_history_cap_place`, `history::sqlite_entry_written_with_its_update_is_history_cap_place`, `history::sqlite_write_guarded_history_is_history_cap_place` |
//! | first claim of a scope | `transition::decide_first_claim` | `postgres/sql/insert_or_find.sql`; `sqlite/sql/insert_first_claim.sql` | `first_claim::postgres_insert_or_find_is_decide_first_claim`, `first_claim::sqlite_insert_first_claim_is_decide_first_claim` |
//! | due for the sweep (tombstone, deadline) | `transition::decide_sweep` | `sql.rs` `due_for_tombstone_sql!`, `due_for_deadline_sql!` (both stores) | `due::{postgres,sqlite}_due_for_sweep_is_decide_sweep` |
//! | tombstone past its retention (no domain spec: stated in the test) | `retain_until <= now` | `sql.rs` `delete_expired_tombstones_sql!` | `due::{postgres,sqlite}_expired_tombstones_are_deleted_past_their_retention` |
//! | unresolved | `OperationRecord::unresolved` | `sql.rs` `SELECT_UNRESOLVED`, and `unresolved_sql!` in ListOperations' `state:unresolved` (`statements/listing.rs`) | `due::{postgres,sqlite}_select_unresolved_is_unresolved` |
//! | counting a refused conflicting Claim | `OperationRecord::with_conflict_counted` | `sql.rs` `COUNT_CONFLICT` (both stores) | `conflict::{postgres,sqlite}_count_conflict_is_with_conflict_counted` |
//! | adding replicas' answer counts (no domain spec: the columns only add up) | `service::tallies` counts | `postgres/sql/add_answer_counts.sql`; `sqlite/sql/add_answer_counts.sql` | `tests/it/answer_counts.rs` (through the API, both stores) |
//! | gauges' conditions | `OperationRecord::lease_expired` / `unresolved` / `decide_sweep` | `sql.rs` `COUNT_OPERATIONS` | `due::{postgres,sqlite}_count_operations_is_the_domains_conditions` |

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::guarded::GuardedWrite;
use crate::domain::{
    Answer, ClaimCommand, Decision, Found, HistoryPage, OperationId, OperationRecord,
    OperationsPage, OperationsQuery, Result, SweepPolicy, Target, TenantId, UnresolvedPage,
    UnresolvedQuery,
};

mod access;
pub mod acquire;
pub mod bounded;
pub mod credentials;
mod dialect;
mod error;
pub mod holds;
mod locked;
#[cfg(test)]
mod mirror_tests;
mod one_at_a_time;
pub mod open;
mod paths;
pub mod postgres;
mod row;
mod sql;
pub mod sqlite;
mod statements;

/// The span of one statement, for the logs' test (`telemetry.rs`).
#[cfg(test)]
pub(crate) use dialect::statement_span;

pub use access::{
    Actor, AuditEntry, Converged, Credentials, DeclaredTenant, DeclaredToken, NewToken, TenantInfo,
    TokenCreated, TokenGrant, TokenInfo,
};

/// The pure decision, handed the locked record and the database's clock.
pub type Decide<'a> = dyn Fn(&OperationRecord, DateTime<Utc>) -> Decision + Send + Sync + 'a;

/// What the first step of a Claim found.
#[derive(Debug, Clone)]
pub enum ClaimStart {
    /// The scope had no record: this one was inserted, and its claimer owns it.
    Inserted(OperationRecord),
    /// The scope's record, read unlocked, with the database clock.
    Existing(Found),
}

/// What a transition did.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The record as it stands after the transaction.
    pub record: OperationRecord,
    pub answer: Result<Answer>,
    /// The database clock the decision was made with.
    pub now: DateTime<Utc>,
    /// Whether the record changed (history-only refusals do not count).
    pub record_changed: bool,
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Terminal records whose result passed retention: now tombstones.
    pub tombstoned: u64,
    /// Retries past their operation deadline: now FAILED (DEADLINE_EXCEEDED).
    pub deadline_exceeded: u64,
    /// Tombstones past their own retention: deleted, scope free again.
    pub deleted: u64,
}

impl SweepReport {
    /// Counts one record the sweeper wrote: a tombstone, or a retry it ended.
    pub(crate) fn count(&mut self, swept: &OperationRecord) {
        match swept.state {
            crate::domain::State::Expired => self.tombstoned += 1,
            _ => self.deadline_exceeded += 1,
        }
    }

    pub fn total(&self) -> u64 {
        self.tombstoned + self.deadline_exceeded + self.deleted
    }
}

/// Sums the batches of one sweep.
impl std::ops::AddAssign for SweepReport {
    fn add_assign(&mut self, batch: Self) {
        self.tombstoned += batch.tombstoned;
        self.deadline_exceeded += batch.deadline_exceeded;
        self.deleted += batch.deleted;
    }
}

/// How many operations stand in each condition, by the database's count and
/// clock: an operation may start on one replica and end on another.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OperationCounts {
    /// IN_PROGRESS with a live lease.
    pub in_progress: u64,
    /// UNKNOWN, or IN_PROGRESS with an expired lease.
    pub unresolved: u64,
    pub retry_wait: u64,
    /// Due for the sweeper: results past retention, retries past their
    /// deadline, tombstones past theirs.
    pub sweep_backlog: u64,
    /// When the oldest unresolved operation was created; None: there is none.
    pub oldest_unresolved: Option<DateTime<Utc>>,
    /// The database clock the counts were read at.
    pub database_now: DateTime<Utc>,
}

/// One replica's counts of the answers that change nothing, for one
/// operation, since its last flush ([`Store::add_answer_counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerTally {
    pub operation_id: OperationId,
    /// Claims answered Completed (a replay).
    pub replays: u64,
    /// Claims answered Pending.
    pub pendings: u64,
    /// How long before the flush the last counted replay was answered
    /// (`None`: no replay counted): the store places it on its own clock.
    pub last_replay_ago: Option<std::time::Duration>,
}

/// Connections of the store's pool (the writer's and readers' together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolUsage {
    pub size: u32,
    pub idle: u32,
    pub max: u32,
    /// Waits for a connection ([`acquire::AcquireWaits`]).
    pub waits: acquire::AcquireTotals,
}

/// Applies a store's pending migrations. Migrations this binary does not
/// know (a newer binary applied them) are no error: migrations are
/// expand/contract, so schema N+1 still serves binary N.
async fn run_migrations<'a, A>(migrator: &sqlx::migrate::Migrator, connection: A) -> Result<()>
where
    A: sqlx::Acquire<'a>,
    <A::Connection as std::ops::Deref>::Target: sqlx::migrate::Migrate,
{
    let mut tolerant = sqlx::migrate::Migrator::with_migrations(migrator.iter().cloned().collect());
    tolerant.set_ignore_missing(true);
    tolerant
        .run(connection)
        .await
        .map_err(|error| crate::domain::Error::Internal(format!("migration failed: {error}")))
}

/// Called by a store between reading the locked record and writing; tests use
/// it to hold a transaction open while a racing call arrives.
pub type PauseHook =
    Arc<dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// `postgres` or `sqlite`, for logs.
    fn kind(&self) -> &'static str;

    /// The first step of every Claim: inserts the scope's first record (the
    /// `(none) → Claim` row: attempt 1, a new fence, CLAIMED in history) or,
    /// when the scope has one, reads it with the database clock, unlocked.
    /// `None`: neither (a record inserted or deleted concurrently, not yet
    /// visible): the caller tries again.
    async fn insert_or_find(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> Result<Option<ClaimStart>>;

    /// Inserts the scope's first record unless it already has one (`None`).
    async fn insert_new(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> Result<Option<OperationRecord>> {
        Ok(
            match self.insert_or_find(tenant, operation_id, command).await? {
                Some(ClaimStart::Inserted(record)) => Some(record),
                Some(ClaimStart::Existing(_)) | None => None,
            },
        )
    }

    /// Locks the record, asks `decide` with the database clock, applies the
    /// decision and its history entry, commits. `None`: no such record.
    async fn transition(
        &self,
        tenant: TenantId,
        target: &Target,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>>;

    /// An owner write. `guarded` is its common case as one guarded
    /// statement, which the store may run first; when its guard does not
    /// hold, the store decides with `decide` under the row lock, exactly as
    /// [`Store::transition`] does. `None`: no such record.
    async fn write(
        &self,
        tenant: TenantId,
        guarded: GuardedWrite,
        decide: &Decide<'_>,
    ) -> Result<Option<Applied>>;

    /// One operation, with the page `history` names of its history (none
    /// when `None`).
    async fn find(
        &self,
        tenant: TenantId,
        target: &Target,
        history: Option<HistoryPage>,
    ) -> Result<Option<Found>>;

    async fn list_unresolved(
        &self,
        tenant: TenantId,
        query: &UnresolvedQuery,
    ) -> Result<UnresolvedPage>;

    /// One page of the operations `query` selects (ListOperations), with
    /// their tenants' names, in its order, at the database clock.
    async fn list_operations(&self, query: &OperationsQuery) -> Result<OperationsPage>;

    /// One batch of retention work, at most `batch` records of each kind.
    /// Safe to run from many replicas at once: rows another sweeper holds are
    /// skipped, not waited for.
    async fn sweep(&self, batch: u32, policy: SweepPolicy) -> Result<SweepReport>;

    /// Counts for the gauges, across all tenants.
    async fn count_operations(&self) -> Result<OperationCounts>;

    fn pool_usage(&self) -> PoolUsage;

    /// What an active, unexpired token of an active tenant grants, by the
    /// token's SHA-256.
    async fn authenticate(&self, token_sha256: &[u8; 32]) -> Result<Option<TokenGrant>>;

    /// The active tenant of that name (for a certificate mapping, which
    /// names tenants).
    async fn tenant_by_name(&self, name: &str) -> Result<Option<TenantId>>;

    /// Sets `last_used_at` to now for these tokens (by SHA-256): called in
    /// batches, never per call.
    async fn record_tokens_used(&self, token_hashes: &[[u8; 32]]) -> Result<()>;

    /// Adds replicas' in-memory counts of replays and Pending answers to
    /// their operations (`replays`, `pendings`, `last_replay_at`): called by
    /// the flush every few seconds with a batch, never per answer, so that a
    /// replay stays free of writes. One statement for the batch on Postgres
    /// (`postgres/sql/add_answer_counts.sql`), one write transaction on
    /// SQLite. It touches no other column; operations no longer stored are
    /// skipped.
    async fn add_answer_counts(&self, tallies: &[AnswerTally]) -> Result<()>;

    /// Tenants, credentials and the audit log, for the CLI.
    fn credentials(&self) -> &dyn Credentials;

    /// Holds of operation names and tenants, for the service and its admins.
    fn holds(&self) -> &dyn holds::Holds;

    /// A tenant and its first token, named `initial`, with the default
    /// scopes and no expiry (the dev tenant's, and tests').
    async fn create_tenant(&self, name: &str, token_sha256: &[u8; 32]) -> Result<TenantId> {
        let first = NewToken {
            name: "initial".into(),
            token_sha256: *token_sha256,
            scopes: "operations,reconcile".into(),
            expires_in: None,
        };
        self.credentials()
            .create_tenant_with(name, &first, &Actor::system())
            .await
    }

    /// Revokes the active tenant of that name and all its tokens.
    async fn revoke_tenant(&self, name: &str) -> Result<bool> {
        self.credentials()
            .revoke_tenant_as(name, &Actor::system())
            .await
    }

    /// Runs until the store fails, calling `changed` for each operation whose
    /// state another process changed, so this replica's waiting Claims wake
    /// at once instead of at their next poll. A store that one process owns
    /// has no other writers to hear from: the default waits forever.
    async fn listen_for_changes(
        &self,
        changed: &(dyn Fn(OperationId) + Send + Sync),
    ) -> Result<()> {
        let _ = changed;
        std::future::pending::<()>().await;
        Ok(())
    }

    /// Whether the store answers; feeds the readiness probe.
    async fn check_ready(&self) -> Result<()>;

    async fn close(&self);
}
