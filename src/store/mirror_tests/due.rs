//! The conditions of the statements that read many records at a moment
//! (store/sql.rs): the sweeper's selections against [`decide_sweep`],
//! ListUnresolved's against [`OperationRecord::unresolved`], the gauges'
//! against both. Each statement runs as the stores run it, with a `now` of
//! the test's choosing, so that moments on the boundary are tried too.

use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Type};
use uuid::Uuid;

use super::{
    Backend, CASES, Fixture, Shape, TempSqlite, claim_command, failed, for_random, millis, shape,
};
use crate::domain::transition::decide_sweep;
use crate::domain::{HistoryCap, OperationRecord, State, SweepPolicy, Target, TenantId};
use crate::store::dialect::Dialect;
use crate::store::postgres::{MIGRATOR, PostgresStore};
use crate::store::row::OperationRow;
use crate::store::sql::{COUNT_OPERATIONS, SELECT_UNRESOLVED};
use crate::store::sqlite::SqliteStore;

/// The moment the statements are run at.
#[derive(Debug, Clone)]
enum Now {
    /// Milliseconds from the first record's claim.
    Offset(i64),
    /// One of one record's moments (the record by index), exactly: where a
    /// condition's `<` and `<=` part.
    OfRecord(usize, Moment),
}

#[derive(Debug, Clone, Copy)]
enum Moment {
    LeaseExpires,
    RetainUntil,
    OperationDeadline,
}

#[derive(Debug, Clone)]
struct DueInput {
    records: Vec<(Shape, Option<i64>)>,
    now: Now,
}

fn inputs() -> impl Strategy<Value = DueInput> {
    let record = (
        shape(super::any_state()),
        proptest::option::of(super::offset()),
    );
    let moment = prop_oneof![
        Just(Moment::LeaseExpires),
        Just(Moment::RetainUntil),
        Just(Moment::OperationDeadline),
    ];
    let now = prop_oneof![
        1 => super::offset().prop_map(Now::Offset),
        2 => (0usize..8, moment).prop_map(|(index, moment)| Now::OfRecord(index, moment)),
    ];
    (proptest::collection::vec(record, 1..8), now)
        .prop_map(|(records, now)| DueInput { records, now })
}

/// The statements, run on a store's pool as they are.
struct Statements<D: Dialect> {
    pool: Pool<D::Db>,
}

impl<D> Statements<D>
where
    D: Dialect,
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'q> D::Stamp: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<D::Stamp>: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> i64: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<&'q str>: Encode<'q, D::Db> + Type<D::Db>,
    for<'q> Option<Uuid>: Encode<'q, D::Db> + Type<D::Db>,
    OperationRow: for<'r> FromRow<'r, <D::Db as Database>::Row>,
    (i64, i64, i64, i64, Option<DateTime<Utc>>): for<'r> FromRow<'r, <D::Db as Database>::Row>,
{
    async fn clear(&self) -> Result<(), TestCaseError> {
        sqlx::query("DELETE FROM operations")
            .execute(&self.pool)
            .await
            .map_err(failed)?;
        Ok(())
    }

    /// The ids a sweeper's selection picks at `now`.
    async fn selected(
        &self,
        sql: &'static str,
        now: DateTime<Utc>,
    ) -> Result<Vec<Uuid>, TestCaseError> {
        let rows: Vec<OperationRow> = sqlx::query_as(sql)
            .bind(D::stamp(now))
            .bind(1_000_i64)
            .fetch_all(&self.pool)
            .await
            .map_err(failed)?;
        Ok(sorted(rows.into_iter().map(|row| row.operation_id)))
    }

    async fn unresolved(
        &self,
        tenant: TenantId,
        now: DateTime<Utc>,
    ) -> Result<Vec<Uuid>, TestCaseError> {
        let rows: Vec<OperationRow> = sqlx::query_as(SELECT_UNRESOLVED)
            .bind(tenant.0)
            .bind(D::stamp(now))
            .bind(None::<&str>)
            .bind(None::<D::Stamp>)
            .bind(None::<Uuid>)
            .bind(1_000_i64)
            .fetch_all(&self.pool)
            .await
            .map_err(failed)?;
        Ok(sorted(rows.into_iter().map(|row| row.operation_id)))
    }

    async fn counts(&self, now: DateTime<Utc>) -> Result<Counts, TestCaseError> {
        sqlx::query_as(COUNT_OPERATIONS)
            .bind(D::stamp(now))
            .fetch_one(&self.pool)
            .await
            .map_err(failed)
    }

    async fn delete_expired(&self, now: DateTime<Utc>) -> Result<(), TestCaseError> {
        sqlx::query(D::DELETE_EXPIRED_TOMBSTONES)
            .bind(D::stamp(now))
            .bind(1_000_i64)
            .execute(&self.pool)
            .await
            .map_err(failed)?;
        Ok(())
    }

    /// Runs `mirror`'s statements against their spec for random records.
    async fn check(self, backend: Backend, mirror: Mirror) {
        let fixture = Fixture::new(&backend, HistoryCap::default()).await;
        let statements = std::sync::Arc::new(self);
        for_random(CASES * 3 / 2, inputs(), move |input| {
            let fixture = fixture.clone();
            let statements = statements.clone();
            Box::pin(async move {
                statements.clear().await?;
                let (records, now) = records(&fixture, &input).await?;
                match mirror {
                    Mirror::Sweep => {
                        let terminal = [State::Succeeded, State::Failed];
                        let spec = ids(records.iter().filter(|r| due(r, now, &terminal)));
                        prop_assert_eq!(
                            statements.selected(D::DUE_FOR_TOMBSTONE, now).await?,
                            spec
                        );
                        let retrying = [State::RetryWait];
                        let spec = ids(records.iter().filter(|r| due(r, now, &retrying)));
                        prop_assert_eq!(statements.selected(D::DUE_FOR_DEADLINE, now).await?, spec);
                    }
                    Mirror::Delete => {
                        statements.delete_expired(now).await?;
                        for record in &records {
                            let found = fixture
                                .store
                                .find(fixture.tenant, &Target::Id(record.operation_id), None)
                                .await
                                .map_err(failed)?;
                            prop_assert_eq!(
                                found.is_none(),
                                deletable(record, now),
                                "{:?}",
                                record
                            );
                        }
                    }
                    Mirror::Unresolved => {
                        let spec = ids(records.iter().filter(|r| r.unresolved(now)));
                        prop_assert_eq!(statements.unresolved(fixture.tenant, now).await?, spec);
                    }
                    Mirror::Counts => {
                        let count = |rule: &dyn Fn(&OperationRecord) -> bool| {
                            i64::try_from(records.iter().filter(|r| rule(r)).count())
                                .unwrap_or(i64::MAX)
                        };
                        let any_due = [State::Succeeded, State::Failed, State::RetryWait];
                        let spec = (
                            count(&|r| r.state == State::InProgress && !r.lease_expired(now)),
                            count(&|r| r.unresolved(now)),
                            count(&|r| r.state == State::RetryWait),
                            count(&|r| due(r, now, &any_due) || deletable(r, now)),
                            records
                                .iter()
                                .filter(|r| r.unresolved(now))
                                .map(|r| r.created_at)
                                .min(),
                        );
                        prop_assert_eq!(statements.counts(now).await?, spec);
                    }
                }
                Ok(())
            })
        })
        .await;
    }
}

/// COUNT_OPERATIONS' row: in progress, unresolved, retry wait, sweep
/// backlog, and the oldest unresolved operation's creation.
type Counts = (i64, i64, i64, i64, Option<DateTime<Utc>>);

fn sorted(ids: impl Iterator<Item = Uuid>) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = ids.collect();
    ids.sort();
    ids
}

fn ids<'a>(records: impl Iterator<Item = &'a OperationRecord>) -> Vec<Uuid> {
    sorted(records.map(|record| record.operation_id.0))
}

/// The records of `input`, as stored, and the moment to run the statements at.
async fn records(
    fixture: &Fixture,
    input: &DueInput,
) -> Result<(Vec<OperationRecord>, DateTime<Utc>), TestCaseError> {
    let mut base = None;
    let mut records = Vec::new();
    for (shape, operation_deadline) in &input.records {
        let mut command = claim_command(millis(30_000), millis(60_000), 3);
        command.operation_deadline = operation_deadline.map(millis);
        let claimed = fixture.claim(&command).await?;
        let base = *base.get_or_insert(claimed.created_at);
        records.push(fixture.set(shape.on(&claimed, base)).await?);
    }
    let base = base.ok_or_else(|| failed("no records"))?;
    let now = match input.now {
        Now::Offset(offset) => base + millis(offset),
        Now::OfRecord(index, moment) => records
            .get(index % records.len())
            .and_then(|record| match moment {
                Moment::LeaseExpires => record.lease_expires_at,
                Moment::RetainUntil => record.retain_until,
                Moment::OperationDeadline => record.operation_deadline_at,
            })
            .unwrap_or(base),
    };
    Ok((records, now))
}

fn policy() -> SweepPolicy {
    SweepPolicy {
        tombstone_retention: TimeDelta::hours(1),
        clock_margin: TimeDelta::zero(),
    }
}

/// Due for the sweeper, by [`decide_sweep`], in the state `of`.
fn due(record: &OperationRecord, now: DateTime<Utc>, of: &[State]) -> bool {
    of.contains(&record.state) && decide_sweep(record, now, policy()).is_some()
}

/// A tombstone past its own retention: the domain has no spec of this rule
/// (the sweeper deletes such records without deciding), so it is stated here.
fn deletable(record: &OperationRecord, now: DateTime<Utc>) -> bool {
    record.state == State::Expired && record.retain_until.is_some_and(|until| until <= now)
}

/// Which statement a test holds against its spec.
#[derive(Debug, Clone, Copy)]
enum Mirror {
    Sweep,
    Delete,
    Unresolved,
    Counts,
}

async fn on_postgres(pool: sqlx::PgPool, mirror: Mirror) {
    let store = PostgresStore::from_pool(pool);
    let statements = Statements::<PostgresStore> {
        pool: store.pool().clone(),
    };
    statements.check(Backend::Postgres(store), mirror).await;
}

async fn on_sqlite(mirror: Mirror) {
    let sqlite = TempSqlite::open().await;
    let statements = Statements::<SqliteStore> {
        pool: sqlite.store.writer_pool().clone(),
    };
    statements.check(sqlite.backend(), mirror).await;
    sqlite.close().await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn postgres_due_for_sweep_is_decide_sweep(pool: sqlx::PgPool) {
    on_postgres(pool, Mirror::Sweep).await;
}

#[tokio::test]
async fn sqlite_due_for_sweep_is_decide_sweep() {
    on_sqlite(Mirror::Sweep).await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn postgres_expired_tombstones_are_deleted_past_their_retention(pool: sqlx::PgPool) {
    on_postgres(pool, Mirror::Delete).await;
}

#[tokio::test]
async fn sqlite_expired_tombstones_are_deleted_past_their_retention() {
    on_sqlite(Mirror::Delete).await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn postgres_select_unresolved_is_unresolved(pool: sqlx::PgPool) {
    on_postgres(pool, Mirror::Unresolved).await;
}

#[tokio::test]
async fn sqlite_select_unresolved_is_unresolved() {
    on_sqlite(Mirror::Unresolved).await;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn postgres_count_operations_is_the_domains_conditions(pool: sqlx::PgPool) {
    on_postgres(pool, Mirror::Counts).await;
}

#[tokio::test]
async fn sqlite_count_operations_is_the_domains_conditions() {
    on_sqlite(Mirror::Counts).await;
}
