//! What each database does its own way ([`Dialect`]), and the one retry
//! loop every write path runs in.

use std::future::Future;
use std::ops::DerefMut;

use chrono::{DateTime, Utc};
use sqlx::Database;

use super::error::{ErrorClass, StoreError, StoreResult, connection_class};
use super::{AnswerTally, Applied, ClaimStart, PauseHook, PoolUsage};
use crate::domain::guarded::GuardedWrite;
use crate::domain::{
    ClaimCommand, Error, HistoryCap, NewHistoryEntry, OperationId, OperationRecord, Result, Target,
    TenantId,
};

/// An operation and the database clock, read together.
pub(crate) type AtClock = (OperationRecord, DateTime<Utc>);

/// What one database does its own way. Everything else is the statements
/// both run, bound once ([`Sql`](super::statements::Sql)), and the flows
/// built on them ([`super::locked`], `paths.rs`, [`super::credentials`]);
/// [`super::postgres`]'s batched path is its own.
pub(crate) trait Dialect: Send + Sync + Sized + 'static {
    type Db: Database;
    /// A timestamp as this database stores it.
    type Stamp: Send + Sync + 'static;

    /// `postgres` or `sqlite`, for logs.
    const KIND: &'static str;
    /// OpenTelemetry's `db.system`.
    const SYSTEM: &'static str;
    /// How many times a transaction that hit a [`ErrorClass::Conflict`] runs in all.
    const TRANSACTION_ATTEMPTS: usize;
    /// One operation, held for the rest of the write transaction.
    const LOCK_BY_SCOPE: &'static str;
    const LOCK_BY_ID: &'static str;
    /// One operation and the clock (`db_now`), read by one statement.
    const READ_BY_SCOPE: &'static str;
    const READ_BY_ID: &'static str;
    /// The database clock, alone.
    const CLOCK: &'static str;
    const GUARDED_UPDATE: &'static str;
    /// [`Dialect::GUARDED_UPDATE`] and, in the same query, the append of a
    /// history entry [`HistoryCap::place`] appends whatever the last entry
    /// is ([`NewHistoryEntry::appended_whatever_the_last`]), bound from `$35`
    /// on as [`Sql::apply`] binds it: for a dialect where each statement is
    /// a round trip of its own. `None`: two statements.
    ///
    /// [`Sql::apply`]: super::statements::Sql::apply
    const GUARDED_UPDATE_THEN_APPEND: Option<&'static str> = None;
    const DUE_FOR_TOMBSTONE: &'static str;
    const DUE_FOR_DEADLINE: &'static str;
    const DELETE_EXPIRED_TOMBSTONES: &'static str;
    /// One page of history ([`sql::select_history_sql`]).
    const SELECT_HISTORY: &'static str;

    fn stamp(moment: DateTime<Utc>) -> Self::Stamp;
    fn rows_affected(result: &<Self::Db as Database>::QueryResult) -> u64;
    /// What the database's own error code (SQLSTATE, SQLite result code)
    /// says: see [`ErrorClass`].
    fn classify_code(code: &str) -> ErrorClass;

    /// The pool's and the connection's own failures read alike everywhere;
    /// database errors by their code.
    fn classify(error: &sqlx::Error) -> ErrorClass {
        if let Some(class) = connection_class(error) {
            return class;
        }
        match error {
            sqlx::Error::Database(database_error) => database_error
                .code()
                .map_or(ErrorClass::Internal, |code| Self::classify_code(&code)),
            _ => ErrorClass::Internal,
        }
    }
    /// A connection for reads outside a transaction; it derefs to the
    /// connection.
    type Read: DerefMut<Target = <Self::Db as Database>::Connection> + Send;

    /// A connection of the readers for statements outside a transaction.
    fn acquire_read(&self) -> impl Future<Output = StoreResult<Self::Read>> + Send;

    /// Hands a read's connection back once its statements ended, whatever
    /// they answered. Dropped instead (with its call, a statement perhaps on
    /// the wire), the dialect decides what becomes of it.
    fn release_read(read: Self::Read);

    /// One operation and the clock, by one statement outside a transaction:
    /// a Claim's look at its scope, a waiting Claim's poll, a lookup without
    /// history.
    fn read_alone(
        &self,
        tenant: TenantId,
        target: &Target,
    ) -> impl Future<Output = StoreResult<Option<(OperationRecord, DateTime<Utc>)>>> + Send;

    /// A read transaction; it derefs to the connection it runs on.
    type ReadTransaction: DerefMut<Target = <Self::Db as Database>::Connection> + Send;

    /// A transaction for reads that must agree with each other (a page and
    /// the clock it was read at).
    fn begin_read(&self) -> impl Future<Output = StoreResult<Self::ReadTransaction>> + Send;

    /// A read-only transaction whose statements all read one snapshot, so
    /// that a record and its history agree.
    fn begin_snapshot(&self) -> impl Future<Output = StoreResult<Self::ReadTransaction>> + Send;

    /// Ends a read transaction (it wrote nothing: rolled back).
    fn end_read(&self, read: Self::ReadTransaction)
    -> impl Future<Output = StoreResult<()>> + Send;

    fn pause_before_write(&self) -> Option<&PauseHook>;

    /// A write transaction; it derefs to the connection it runs on.
    type Write: DerefMut<Target = <Self::Db as Database>::Connection> + Send;

    /// A transaction that may write, holding whatever write lock the
    /// database needs before its first read.
    fn begin_write(&self) -> impl Future<Output = StoreResult<Self::Write>> + Send;

    /// [`Dialect::begin_write`], then one operation under the write lock
    /// and the clock, read once the lock is held (the time a decision is
    /// made at): how the locked path starts, in as few round trips as the
    /// database allows.
    fn begin_write_locked(
        &self,
        tenant: TenantId,
        target: &Target,
    ) -> impl Future<Output = StoreResult<(Self::Write, Option<AtClock>)>> + Send;

    /// Makes the transaction's writes durable; `Ok` only once they are.
    fn commit(&self, write: Self::Write) -> impl Future<Output = StoreResult<()>> + Send;

    /// Undoes the transaction's writes.
    fn rollback(&self, write: Self::Write) -> impl Future<Output = StoreResult<()>> + Send;

    /// Runs before a guarded UPDATE that takes a new fence, in its
    /// transaction, so that [`Dialect::GUARDED_UPDATE`]'s fence expression
    /// yields the next fence of the one ever-growing sequence.
    fn advance_fence(
        connection: &mut <Self::Db as Database>::Connection,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Appends a history entry, bound as [`Sql::append_history`] binds
    /// it, as itself or as the truncation marker past the cap
    /// ([`HistoryCap::place`]); a dialect that can also count into the last
    /// entry in this statement does so here.
    ///
    /// [`Sql::append_history`]: super::statements::Sql::append_history
    const APPEND_HISTORY: &'static str;

    /// Counts `entry` into the operation's last history entry when
    /// [`HistoryCap::place`] says so (their coalesce keys are equal, or the
    /// cap is reached and the last entry is the truncation marker), in one
    /// statement; `false`: nothing counted, append it.
    fn count_into_last_history_entry(
        connection: &mut <Self::Db as Database>::Connection,
        operation_id: OperationId,
        entry: &NewHistoryEntry,
        coalesce_key: Option<&str>,
        cap: HistoryCap,
        now: DateTime<Utc>,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// How many entries an operation's history holds.
    fn history_cap(&self) -> HistoryCap;

    /// The first step of a Claim ([`Store::insert_or_find`]): the scope's
    /// first record inserted as [`decide_first_claim`] says, or the record
    /// it has, read unlocked with the clock.
    ///
    /// [`decide_first_claim`]: crate::domain::decide_first_claim
    fn insert_or_find(
        &self,
        tenant: TenantId,
        operation_id: OperationId,
        command: &ClaimCommand,
    ) -> impl Future<Output = StoreResult<Option<ClaimStart>>> + Send;

    /// Runs an owner write's common case as one guarded statement, if this
    /// database can: `None` when it did not apply (the guard did not hold,
    /// or the dialect has no such path) and the locked path must decide.
    fn write_guarded(
        &self,
        tenant: TenantId,
        guarded: GuardedWrite,
    ) -> impl Future<Output = StoreResult<Option<Applied>>> + Send {
        let _ = (tenant, guarded);
        std::future::ready(Ok(None))
    }

    fn pool_usage(&self) -> PoolUsage;

    /// [`Store::add_answer_counts`](super::Store::add_answer_counts), as
    /// this database does it best (never empty).
    fn add_answer_counts(
        &self,
        tallies: &[AnswerTally],
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// See [`Store::listen_for_changes`]; a store that one process owns has
    /// no other writers to hear from.
    fn listen_for_changes(
        &self,
        changed: &(dyn Fn(OperationId) + Send + Sync),
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = changed;
        std::future::pending()
    }

    fn close(&self) -> impl Future<Output = ()> + Send;

    /// Tells other replicas that an operation changed state, after the
    /// change committed (best effort: their waiters poll anyway).
    fn announce_change(&self, operation_id: OperationId) {
        let _ = operation_id;
    }

    /// A store error as the caller sees it.
    fn translate(error: StoreError) -> Error {
        error.into_domain(Self::classify)
    }

    fn statement(name: &'static str) -> tracing::Span {
        statement_span(Self::SYSTEM, name)
    }
}

/// A child span per statement, so a trace shows where a call's time went.
pub(crate) fn statement_span(system: &'static str, name: &'static str) -> tracing::Span {
    tracing::info_span!(
        "db.statement",
        otel.name = name,
        otel.kind = "client",
        db.system = system,
        db.operation = name,
    )
}

/// Runs `run` again after a serialization failure, deadlock or history
/// sequence collision ([`ErrorClass::Conflict`]), up to
/// [`Dialect::TRANSACTION_ATTEMPTS`] runs in all: the one retry loop, for
/// the locked path's transactions and the batched path's statements alike.
pub(crate) async fn retry_on_conflict<D, T, Run, Ran>(mut run: Run) -> Result<T>
where
    D: Dialect,
    Run: FnMut() -> Ran,
    Ran: Future<Output = StoreResult<T>>,
{
    let mut attempt = 1;
    loop {
        match run().await {
            Err(error)
                if attempt < D::TRANSACTION_ATTEMPTS
                    && error.class(D::classify) == ErrorClass::Conflict =>
            {
                attempt += 1;
            }
            outcome => return outcome.map_err(D::translate),
        }
    }
}
