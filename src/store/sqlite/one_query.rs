//! The embedded store's one-query writes, as the queued writer's thread
//! runs them ([`super::queued`]): a first claim (sql/insert_first_claim.sql)
//! and the common case of an owner's Renew, Complete and Fail
//! (sql/write_guarded.sql). Each file is several statements; they are
//! prepared one by one (and kept in the connection's statement cache), bound
//! by their `$N` numbers, and run in turn, each to its end before the next
//! (a statement after an `INSERT … RETURNING` sees what it wrote, and
//! `changes()` counts the rows of the statement before).
//!
//! `RETURNING *` in a file returns the operation's columns in
//! [`OperationRow`](super::super::row::OperationRow)'s order
//! (`operation_columns!`), which the statement is given when it is
//! prepared, so that the row is read by position as the point reads read
//! theirs.

use std::sync::LazyLock;

use chrono::{DateTime, TimeDelta, Utc};
use rusqlite::{Connection, ToSql};

use super::super::dialect::Dialect as _;
use super::super::row::{OperationRow, OutcomeColumns};
use super::super::sql::operation_columns;
use super::SqliteStore;
use super::rusqlite_rows::{Failure, bind_numbered, decode};
use crate::domain::guarded::{GuardedWrite, LeaseWrite};
use crate::domain::{
    ClaimCommand, Error, HistoryCap, HistoryEvent, OperationId, TenantId, decide_first_claim,
};

/// A query's statements, in order, as they are prepared.
struct Statements(Vec<String>);

impl Statements {
    /// The statements of `sql`: each ends with a `;` at the end of a line
    /// (the last may not), comment lines aside; `RETURNING *` names the
    /// operation's columns.
    fn of(sql: &str) -> Self {
        let mut statements = Vec::new();
        let mut current = String::new();
        for line in sql.lines() {
            current.push_str(line);
            current.push('\n');
            let code = line.trim_end();
            if !code.trim_start().starts_with("--") && code.ends_with(';') {
                statements.push(std::mem::take(&mut current));
            }
        }
        if current.lines().any(|line| {
            let line = line.trim();
            !line.is_empty() && !line.starts_with("--")
        }) {
            statements.push(current);
        }
        let returning = concat!("RETURNING ", operation_columns!());
        Self(
            statements
                .into_iter()
                .map(|statement| statement.replace("RETURNING *", returning))
                .collect(),
        )
    }

    /// Runs every statement with `values` bound by number, and decodes the
    /// rows they return (the operation's columns, then the clock).
    fn run(
        &self,
        connection: &Connection,
        values: &[&dyn ToSql],
    ) -> Result<Vec<(OperationRow, DateTime<Utc>)>, Failure> {
        let mut rows = Vec::new();
        for sql in &self.0 {
            let mut statement = connection.prepare_cached(sql)?;
            bind_numbered(&mut statement, values)?;
            let mut returned = statement.raw_query();
            while let Some(row) = returned.next()? {
                rows.push(decode(row)?);
            }
        }
        Ok(rows)
    }
}

static FIRST_CLAIM: LazyLock<Statements> =
    LazyLock::new(|| Statements::of(include_str!("sql/insert_first_claim.sql")));

static WRITE_GUARDED: LazyLock<Statements> =
    LazyLock::new(|| Statements::of(include_str!("sql/write_guarded.sql")));

/// Runs insert_first_claim.sql with [`decide_first_claim`]'s values: the
/// inserted row, or none when the scope has a record.
pub(super) fn insert_first_claim(
    connection: &Connection,
    tenant: TenantId,
    operation_id: OperationId,
    command: &ClaimCommand,
) -> Result<Option<OperationRow>, Error> {
    let first = decide_first_claim(command);
    let history = &first.history;
    let values: [&dyn ToSql; 19] = [
        &operation_id.0.as_bytes().as_slice(),
        &tenant.0,
        &command.scope.operation,
        &command.scope.key,
        &command.fingerprint.0.as_slice(),
        &history.to_state.as_str(),
        &i32::try_from(history.attempt).unwrap_or(i32::MAX),
        &i32::try_from(command.max_attempts).unwrap_or(i32::MAX),
        &command.claim_token,
        &command.lease.num_milliseconds(),
        &command.max_attempt_duration.num_milliseconds(),
        &command.retention.num_milliseconds(),
        &first.lease_expires_in.num_milliseconds(),
        &first.attempt_deadline_in.num_milliseconds(),
        &first
            .operation_deadline_in
            .map(|offset| offset.num_milliseconds()),
        &command.on_failed.gets_new_attempt(),
        &history.event.as_str(),
        &history.detail.as_str(),
        &history.coalesce_key(),
    ];
    let rows = SqliteStore::statement("INSERT operations")
        .in_scope(|| FIRST_CLAIM.run(connection, &values))
        .map_err(Failure::into_domain)?;
    Ok(rows.into_iter().next().map(|(row, _)| row))
}

/// Runs write_guarded.sql (`fence`: the guard's, as stored): the written
/// row and the clock, or none when the guard does not hold.
pub(super) fn write_guarded(
    connection: &Connection,
    tenant: TenantId,
    fence: i64,
    guarded: &GuardedWrite,
    cap: HistoryCap,
) -> Result<Option<(OperationRow, DateTime<Utc>)>, Error> {
    let millis = |delta: TimeDelta| delta.num_milliseconds();
    let (guard, write) = (&guarded.guard, &guarded.write);
    let outcome = OutcomeColumns::of(write.outcome.as_ref());
    let json = |metadata: Option<sqlx::types::Json<_>>| {
        metadata
            .map(|sqlx::types::Json(metadata)| serde_json::to_string(metadata))
            .transpose()
            .map_err(|error| Error::Internal(format!("metadata does not encode: {error}")))
    };
    let result_metadata = json(outcome.result_metadata)?;
    let error_metadata = json(outcome.error_metadata)?;
    let lease = match write.lease {
        LeaseWrite::Extend(Some(lease)) => Some(millis(lease)),
        LeaseWrite::Extend(None) | LeaseWrite::Clear => None,
    };
    let receipt = write.receipt.as_ref().map(|receipt| receipt.digest.0);
    let values: [&dyn ToSql; 31] = [
        &guarded.operation_id.0.as_bytes().as_slice(),
        &tenant.0,
        &fence,
        &guard.from.as_str(),
        &guard.no_receipt_for_fence,
        &guard.attempt_budget_left,
        &guard.operation_deadline_beyond.map(millis),
        &write.state.as_str(),
        &write.outcome.is_some(),
        &outcome.state,
        &outcome.body,
        &outcome.content_type,
        &result_metadata,
        &outcome.failure_reason,
        &outcome.code,
        &outcome.message,
        &error_metadata,
        &(write.lease == LeaseWrite::Clear),
        &lease,
        &write.retry_after.map(millis),
        &write.finishes,
        &receipt.is_some(),
        &receipt.as_ref().map(<[u8; 32]>::as_slice),
        &guarded.event.as_str(),
        &guarded.detail.as_str(),
        &guarded.coalesce_key(),
        &guarded.kept_past_cap(),
        &i32::try_from(cap.max_entries).unwrap_or(i32::MAX),
        &HistoryEvent::HistoryTruncated.as_str(),
        &HistoryCap::TRUNCATED_DETAIL,
        &HistoryCap::TRUNCATED_KEY,
    ];
    let rows = SqliteStore::statement("UPDATE operations")
        .in_scope(|| WRITE_GUARDED.run(connection, &values))
        .map_err(Failure::into_domain)?;
    Ok(rows.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each file splits into the statements it has, each one statement
    /// that SQLite prepares on the schema (rusqlite refuses more than one),
    /// `RETURNING *` made the operation's columns.
    #[test]
    fn the_files_split_into_their_statements() {
        let connection = Connection::open_in_memory().expect("opens");
        for migration in super::super::MIGRATOR.iter() {
            connection
                .execute_batch(migration.sql.as_str())
                .expect("the schema is made");
        }
        for (statements, count) in [(&*FIRST_CLAIM, 3), (&*WRITE_GUARDED, 2)] {
            assert_eq!(statements.0.len(), count, "{:?}", statements.0);
            for statement in &statements.0 {
                assert!(!statement.contains("RETURNING *"), "{statement}");
                if let Err(error) = connection.prepare(statement) {
                    panic!("{error}: {statement}");
                }
            }
        }
    }
}
