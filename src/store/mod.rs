//! One narrow storage interface, implemented by each store. The stores settle
//! races (unique constraint, row locks, guarded updates); the decisions come
//! from the pure [`crate::domain::transition`] module.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::guarded::GuardedWrite;
use crate::domain::{
    Answer, ClaimCommand, Decision, Found, HistoryPage, OperationId, OperationRecord, Result,
    SweepPolicy, Target, TenantId, UnresolvedPage, UnresolvedQuery,
};

mod batch;
mod bounded;
pub mod credentials;
mod error;
mod flow;
pub mod open;
pub mod postgres;
mod row;
mod sql;
pub mod sqlite;

pub use bounded::Bounded;
pub use credentials::{
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
    /// The database clock the counts were read at.
    pub database_now: DateTime<Utc>,
}

/// Connections of the store's pool (the writer's and readers' together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolUsage {
    pub size: u32,
    pub idle: u32,
    pub max: u32,
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

    /// Tenants, credentials and the audit log, for the CLI.
    fn credentials(&self) -> &dyn Credentials;

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
