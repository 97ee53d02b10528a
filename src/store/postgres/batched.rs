//! The one-statement paths of Postgres, each written for many operations at
//! once: every member's values travel as arrays (`unnest … WITH ORDINALITY`)
//! and every returned row names its member by ordinal. A batch of one is the
//! same statement. Each member's atomicity is its own row's: the statement
//! holds no lock beyond the rows it touches, and a member whose row does not
//! qualify is simply absent from the result.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgConnection;
use tracing::Instrument;

use super::super::dialect::statement_span;
use super::super::error::{StoreError, StoreResult};
use super::super::row::{OperationRow, OutcomeColumns};
use super::super::{Applied, ClaimStart};
use super::held::{Connections, Held};
use crate::domain::guarded::{GuardedWrite, LeaseWrite};
use crate::domain::{
    Answer, ClaimCommand, Found, HistoryCap, HistoryEvent, Metadata, OperationId, OperationRecord,
    Outcome, TenantId, decide_first_claim,
};

/// One Claim's first step, as queued for a shared statement.
#[derive(Debug)]
pub(super) struct ClaimRequest {
    pub(super) tenant: TenantId,
    pub(super) operation_id: OperationId,
    pub(super) command: ClaimCommand,
}

/// One owner write's common case, as queued for a shared statement.
#[derive(Debug)]
pub(super) struct WriteRequest {
    pub(super) tenant: TenantId,
    pub(super) guarded: GuardedWrite,
    pub(super) history_cap: HistoryCap,
}

/// Two claims of one scope never share a statement.
pub(super) fn claim_key(request: &ClaimRequest) -> Vec<u8> {
    let scope = &request.command.scope;
    let mut key = Vec::with_capacity(8 + scope.operation.len() + 1 + scope.key.len());
    key.extend_from_slice(&request.tenant.0.to_be_bytes());
    key.extend_from_slice(scope.operation.as_bytes());
    key.push(0);
    key.extend_from_slice(scope.key.as_bytes());
    key
}

/// Two writes of one operation never share a statement.
pub(super) fn write_key(request: &WriteRequest) -> Vec<u8> {
    request.guarded.operation_id.0.as_bytes().to_vec()
}

/// What a claim's values take in a statement, about.
pub(super) fn claim_size(request: &ClaimRequest) -> usize {
    let scope = &request.command.scope;
    256 + scope.operation.len() + scope.key.len()
}

/// What an owner write's values take in a statement, about: its outcome.
pub(super) fn write_size(request: &WriteRequest) -> usize {
    let metadata = |metadata: &Metadata| {
        metadata
            .iter()
            .map(|(name, value)| name.len() + value.len() + 8)
            .sum::<usize>()
    };
    let outcome = match &request.guarded.write.outcome {
        Some(Outcome::Succeeded(result)) => {
            result.body.len() + result.content_type.len() + metadata(&result.metadata)
        }
        Some(Outcome::Failed { error, .. }) => {
            error.code.len() + error.message.len() + metadata(&error.metadata)
        }
        None => 0,
    };
    512 + outcome
}

/// A statement cancelled by `statement_timeout` (or a cancel request).
pub(super) fn is_statement_timeout(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::Database(sqlx::Error::Database(database))
            if database.code().as_deref() == Some("57014")
    )
}

impl ClaimRequest {
    pub(super) fn member(&self) -> ClaimMember<'_> {
        ClaimMember {
            tenant: self.tenant,
            operation_id: self.operation_id,
            command: &self.command,
        }
    }
}

impl WriteRequest {
    pub(super) fn member(&self) -> WriteMember<'_> {
        WriteMember {
            tenant: self.tenant,
            guarded: &self.guarded,
            history_cap: self.history_cap,
        }
    }
}

/// One Claim's first step.
#[derive(Debug, Clone, Copy)]
pub(super) struct ClaimMember<'a> {
    pub(super) tenant: TenantId,
    pub(super) operation_id: OperationId,
    pub(super) command: &'a ClaimCommand,
}

/// One owner write's common case.
#[derive(Debug, Clone, Copy)]
pub(super) struct WriteMember<'a> {
    pub(super) tenant: TenantId,
    pub(super) guarded: &'a GuardedWrite,
    pub(super) history_cap: HistoryCap,
}

#[derive(sqlx::FromRow)]
struct ClaimRow {
    inserted: bool,
    ordinal: i64,
    #[sqlx(flatten)]
    row: OperationRow,
    db_now: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct WrittenRow {
    ordinal: i64,
    #[sqlx(flatten)]
    row: OperationRow,
    db_now: DateTime<Utc>,
}

fn statement(name: &'static str) -> tracing::Span {
    statement_span("postgresql", name)
}

fn millis(delta: chrono::TimeDelta) -> i64 {
    delta.num_milliseconds()
}

fn small(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// The place of a returned row's member, if it names one of ours.
fn member_index(ordinal: i64, members: usize) -> Option<usize> {
    usize::try_from(ordinal)
        .ok()
        .and_then(|ordinal| ordinal.checked_sub(1))
        .filter(|index| *index < members)
}

/// One array parameter of a batched statement: each member's value, in
/// the members' order (the statement unnests them side by side).
fn column<'a, T, U>(members: &'a [T], value: impl FnMut(&'a T) -> U) -> Vec<U> {
    members.iter().map(value).collect()
}

/// The statement of [`insert_or_find`]: a mirror of
/// [`decide_first_claim`], reviewed as SQL in its own file.
const INSERT_OR_FIND: &str = include_str!("sql/insert_or_find.sql");

/// Inserts the first record of each member's scope, or reads the record it
/// has: one statement for all. A scope that has a record (in this
/// statement's snapshot) is read, not inserted, so a replay draws no fence;
/// one inserted concurrently, after the snapshot, is neither (`None`), and
/// its claim tries again. Members must name distinct scopes.
pub(super) async fn insert_or_find(
    pool: &Connections,
    members: &[ClaimMember<'_>],
) -> StoreResult<Vec<Option<ClaimStart>>> {
    let mut connection = Held::acquire(pool).await?;
    let started = insert_or_find_on(&mut connection, members).await;
    connection.keep_if(started.is_ok(), pool);
    started
}

/// [`insert_or_find`] on a connection the caller holds, in whatever
/// transaction it has open: the pool's, or (idemd-local) the application's.
pub(super) async fn insert_or_find_on(
    connection: &mut PgConnection,
    members: &[ClaimMember<'_>],
) -> StoreResult<Vec<Option<ClaimStart>>> {
    let firsts: Vec<_> = members
        .iter()
        .map(|member| decide_first_claim(member.command))
        .collect();
    let coalesce_keys: Vec<Option<String>> = firsts
        .iter()
        .map(|first| first.history.coalesce_key())
        .collect();
    let rows: Vec<ClaimRow> = sqlx::query_as(INSERT_OR_FIND)
        .bind(column(members, |m| m.operation_id.0))
        .bind(column(members, |m| m.tenant.0))
        .bind(column(members, |m| m.command.scope.operation.as_str()))
        .bind(column(members, |m| m.command.scope.key.as_str()))
        .bind(column(members, |m| &m.command.fingerprint.0[..]))
        .bind(column(members, |m| small(m.command.max_attempts)))
        .bind(column(members, |m| m.command.claim_token.as_slice()))
        .bind(column(members, |m| millis(m.command.lease)))
        .bind(column(members, |m| millis(m.command.max_attempt_duration)))
        .bind(column(members, |m| millis(m.command.retention)))
        .bind(column(&firsts, |f| millis(f.lease_expires_in)))
        .bind(column(&firsts, |f| millis(f.attempt_deadline_in)))
        .bind(column(&firsts, |f| f.operation_deadline_in.map(millis)))
        .bind(column(&firsts, |f| f.history.to_state.as_str()))
        .bind(column(&firsts, |f| small(f.history.attempt)))
        .bind(column(&firsts, |f| f.history.event.as_str()))
        .bind(column(&firsts, |f| f.history.detail.as_str()))
        .bind(coalesce_keys)
        .bind(column(members, |m| m.command.on_failed.gets_new_attempt()))
        .fetch_all(&mut *connection)
        .instrument(statement("INSERT operations"))
        .await?;
    let mut started: Vec<Option<ClaimStart>> = vec![None; members.len()];
    for ClaimRow {
        inserted,
        ordinal,
        row,
        db_now,
    } in rows
    {
        let Some(index) = member_index(ordinal, members.len()) else {
            continue;
        };
        let record = OperationRecord::try_from(row)?;
        started[index] = Some(if inserted {
            ClaimStart::Inserted(record)
        } else {
            ClaimStart::Existing(Found::without_history(record, db_now))
        });
    }
    Ok(started)
}

/// A statement that waited for a row lock past `lock_timeout`.
pub(super) fn is_lock_timeout(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::Database(sqlx::Error::Database(database))
            if database.code().as_deref() == Some("55P03")
    )
}

/// The statement of [`write_guarded`]: a mirror of
/// [`crate::domain::guarded::Guard::holds`], [`crate::domain::guarded::Write::apply`]
/// and [`HistoryCap::place`], reviewed as SQL in its own file.
///
/// The tenant of the row is compared with `IS NOT DISTINCT FROM` (the same,
/// for a NOT NULL column), not `=`, which would make the scope index
/// (`tenant_id, operation, idempotency_key`) usable with its first column
/// alone. A generic plan made while the table was small can pick it over the
/// primary key and then read every row of the tenant per call (measured:
/// 11,000 rows filtered per member, Claim + Complete at a third of its rate).
/// Operations are found by their primary key; the tenant is a check.
const WRITE_GUARDED: &str = include_str!("sql/write_guarded.sql");

/// Runs each member's guarded write: one `UPDATE … FROM unnest(…)` whose
/// WHERE states each member's whole precondition ([`crate::domain::guarded::Guard`])
/// and whose SET is its [`crate::domain::guarded::Write`], relative to the
/// statement's clock and the row's own columns, with the history entries in
/// the same statement. A member whose guard does not hold is `None`: the
/// locked path decides and explains it. Members must name distinct
/// operations.
///
/// The statement waits at most 100 ms for a row another
/// transaction holds (`set_config(…, true)` lasts for this statement's
/// implicit transaction only, and the clock it is read with comes first);
/// past it, it fails with SQLSTATE 55P03, and its caller hands every member
/// to the locked path ([`is_lock_timeout`]), where each waits alone, up to
/// the session's `lock_timeout`. So one held row costs the other members a
/// short delay, not the session's whole lock timeout and not an error, and
/// the common case pays for no row lock of its own (`SKIP LOCKED` would
/// write one per row: in a micro-benchmark of a 16-member UPDATE it cut
/// throughput roughly in half).
pub(super) async fn write_guarded(
    pool: &Connections,
    members: &[WriteMember<'_>],
) -> StoreResult<Vec<Option<Applied>>> {
    let outcomes: Vec<OutcomeColumns<'_>> = members
        .iter()
        .map(|m| OutcomeColumns::of(m.guarded.write.outcome.as_ref()))
        .collect();
    let mut connection = Held::acquire(pool).await?;
    let rows: Result<Vec<WrittenRow>, _> = sqlx::query_as(WRITE_GUARDED)
        .bind(column(members, |m| m.guarded.operation_id.0))
        .bind(column(members, |m| m.tenant.0))
        .bind(column(members, |m| {
            i64::try_from(m.guarded.guard.fence).unwrap_or(i64::MAX)
        }))
        .bind(column(members, |m| m.guarded.guard.from.as_str()))
        .bind(column(members, |m| m.guarded.guard.no_receipt_for_fence))
        .bind(column(members, |m| m.guarded.guard.attempt_budget_left))
        .bind(column(members, |m| {
            m.guarded.guard.operation_deadline_beyond.map(millis)
        }))
        .bind(column(members, |m| m.guarded.write.state.as_str()))
        .bind(column(members, |m| m.guarded.write.outcome.is_some()))
        .bind(column(&outcomes, |o| o.state))
        .bind(column(&outcomes, |o| o.body))
        .bind(column(&outcomes, |o| o.content_type))
        .bind(column(&outcomes, |o| o.result_metadata))
        .bind(column(&outcomes, |o| o.failure_reason))
        .bind(column(&outcomes, |o| o.code))
        .bind(column(&outcomes, |o| o.message))
        .bind(column(&outcomes, |o| o.error_metadata))
        .bind(column(members, |m| {
            m.guarded.write.lease == LeaseWrite::Clear
        }))
        .bind(column(members, |m| match m.guarded.write.lease {
            LeaseWrite::Extend(Some(lease)) => Some(millis(lease)),
            LeaseWrite::Extend(None) | LeaseWrite::Clear => None,
        }))
        .bind(column(members, |m| m.guarded.write.retry_after.map(millis)))
        .bind(column(members, |m| m.guarded.write.finishes))
        .bind(column(members, |m| m.guarded.write.receipt.is_some()))
        .bind(column(members, |m| {
            m.guarded
                .write
                .receipt
                .as_ref()
                .map(|r| r.digest.0.to_vec())
        }))
        .bind(column(members, |m| m.guarded.event.as_str()))
        .bind(column(members, |m| m.guarded.detail.as_str()))
        .bind(column(members, |m| m.guarded.coalesce_key()))
        .bind(column(members, |m| m.guarded.kept_past_cap()))
        .bind(column(members, |m| small(m.history_cap.max_entries)))
        .bind(HistoryEvent::HistoryTruncated.as_str())
        .bind(HistoryCap::TRUNCATED_DETAIL)
        .bind(HistoryCap::TRUNCATED_KEY)
        .fetch_all(&mut *connection)
        .instrument(statement("UPDATE operations"))
        .await;
    connection.keep_if(rows.is_ok(), pool);
    let rows = rows?;
    let mut written: Vec<Option<Applied>> = vec![None; members.len()];
    for WrittenRow {
        ordinal,
        row,
        db_now,
    } in rows
    {
        let Some(index) = member_index(ordinal, members.len()) else {
            continue;
        };
        written[index] = Some(Applied {
            record: OperationRecord::try_from(row)?,
            answer: Ok(Answer::Written),
            now: db_now,
            record_changed: true,
        });
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use sqlx::PgPool;

    use super::super::MIGRATOR;
    use super::*;

    /// The hot statements run with generic plans, made once per connection
    /// and kept while the table grows; a plan made on an empty table must
    /// still reach rows through a unique index, by the primary key or the
    /// whole scope. Otherwise every call reads a table (or all of a tenant's
    /// rows) growing under it until autovacuum next analyzes it (measured: a
    /// new table ran Claim + Complete at 0.4x the rate of one of 1M rows,
    /// falling as it grew).
    #[sqlx::test(migrator = "MIGRATOR")]
    async fn hot_statements_use_a_unique_index_even_when_planned_on_an_empty_table(pool: PgPool) {
        use crate::store::dialect::Dialect;
        type Pg = super::super::PostgresStore;
        let mut connection = pool.acquire().await.expect("a connection");
        for (name, value) in super::super::session::PLANNER_SETTINGS {
            sqlx::query(sqlx::AssertSqlSafe(format!("SET {name} = {value}")))
                .execute(&mut *connection)
                .await
                .expect("set");
        }
        for (name, sql) in [
            ("insert_or_find", INSERT_OR_FIND),
            ("write_guarded", WRITE_GUARDED),
            ("lock by scope", Pg::LOCK_BY_SCOPE),
            ("lock by id", Pg::LOCK_BY_ID),
            ("read by scope", Pg::READ_BY_SCOPE),
            ("read by id", Pg::READ_BY_ID),
            ("guarded update", Pg::GUARDED_UPDATE),
        ] {
            let parameters = (1..=64)
                .rev()
                .find(|index| sql.contains(&format!("${index}")))
                .unwrap_or(0);
            sqlx::query(sqlx::AssertSqlSafe(format!("PREPARE hot AS {sql}")))
                .execute(&mut *connection)
                .await
                .unwrap_or_else(|error| panic!("{name}: {error}"));
            let nulls = vec!["NULL"; parameters].join(", ");
            let plan: Vec<String> =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("EXPLAIN EXECUTE hot({nulls})")))
                    .fetch_all(&mut *connection)
                    .await
                    .unwrap_or_else(|error| panic!("{name}: {error}"));
            sqlx::query("DEALLOCATE hot")
                .execute(&mut *connection)
                .await
                .expect("deallocate");
            assert!(
                !plan
                    .iter()
                    .any(|line| line.contains("Seq Scan on operations")),
                "{name} scans the table: {plan:#?}"
            );
            for (index, line) in plan.iter().enumerate() {
                if line.contains("Scan using operations_") && line.contains(" on operations ") {
                    let condition = plan.get(index + 1).map(String::as_str).unwrap_or("");
                    // ListOperations' key index holds the scope's three
                    // columns (key first): through it, a plan that binds all
                    // three reaches the scope's one row as the unique index does.
                    let whole_scope = condition.contains("idempotency_key")
                        && condition.contains("operation =")
                        && condition.contains("tenant_id");
                    assert!(
                        line.contains("operations_pkey")
                            || (line.contains("operations_scope")
                                && condition.contains("idempotency_key"))
                            || (line.contains("operations_tenant_key") && whole_scope),
                        "{name} reads operations through a non-unique prefix: {plan:#?}"
                    );
                }
            }
        }
    }
}
