//! Rows and parameters of the embedded store's statements driven directly
//! through rusqlite (the point reads, the one-query writes), read and bound
//! as the sqlx path reads and binds them: ids and bytes as BLOBs, moments as
//! RFC 3339 text (`stamp`, `now_sql!`), metadata as JSON text.

use chrono::{DateTime, Utc};
use rusqlite::types::FromSql;
use rusqlite::{Row, Statement, ToSql};
use sqlx::types::Json;
use uuid::Uuid;

use super::super::error::unavailable_database;
use super::super::row::OperationRow;
use crate::domain::Error;

/// Why a statement failed: SQLite said so, or the row did not decode.
pub(super) enum Failure {
    Database(rusqlite::Error),
    Domain(Error),
}

impl From<rusqlite::Error> for Failure {
    fn from(error: rusqlite::Error) -> Self {
        Failure::Database(error)
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::Domain(error)
    }
}

impl Failure {
    /// A busy, locked or unreachable database is UNAVAILABLE, as the sqlx
    /// path's errors are (`is_unavailable_code`); anything else INTERNAL.
    pub(super) fn into_domain(self) -> Error {
        match self {
            Failure::Domain(error) => error,
            Failure::Database(error) => match error.sqlite_error() {
                Some(failure) if super::is_unavailable_code(i64::from(failure.extended_code)) => {
                    unavailable_database(&error)
                }
                _ => Error::Internal(format!("database error: {error}")),
            },
        }
    }
}

pub(super) fn is_busy(error: &rusqlite::Error) -> bool {
    error.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
}

/// Binds a statement's parameters by their numbers (`$N`, as sqlx numbers
/// them, are named parameters to SQLite): `$N` takes `values[N - 1]`. A
/// statement of a multi-statement query names only the numbers it uses.
pub(super) fn bind_numbered(
    statement: &mut Statement<'_>,
    values: &[&dyn ToSql],
) -> rusqlite::Result<()> {
    for index in 1..=statement.parameter_count() {
        let name = statement.parameter_name(index).unwrap_or_default();
        let value = name
            .strip_prefix('$')
            .and_then(|number| number.parse::<usize>().ok())
            .and_then(|number| number.checked_sub(1))
            .and_then(|position| values.get(position));
        let Some(value) = value else {
            return Err(rusqlite::Error::InvalidParameterName(name.to_owned()));
        };
        statement.raw_bind_parameter(index, *value)?;
    }
    Ok(())
}

/// The row, its columns in [`OperationRow`]'s order (`operation_columns!`),
/// then the clock. Stored as idemd writes them: ids and bytes as BLOBs,
/// moments as RFC 3339 text (`stamp`, `now_sql!`), metadata as JSON text.
pub(super) fn decode(row: &Row<'_>) -> Result<(OperationRow, DateTime<Utc>), Error> {
    let decoded = OperationRow {
        operation_id: uuid(row, 0)?,
        tenant_id: column(row, 1)?,
        operation: column(row, 2)?,
        idempotency_key: column(row, 3)?,
        fingerprint: column(row, 4)?,
        state: column(row, 5)?,
        fence: column(row, 6)?,
        attempt: column(row, 7)?,
        max_attempts: column(row, 8)?,
        claim_token: column(row, 9)?,
        taken_over_state: column(row, 10)?,
        taken_over_fence: column(row, 11)?,
        lease_ms: column(row, 12)?,
        max_attempt_duration_ms: column(row, 13)?,
        retention_ms: column(row, 14)?,
        lease_expires_at: moment(row, 15)?,
        attempt_deadline_at: moment(row, 16)?,
        retry_at: moment(row, 17)?,
        operation_deadline_at: moment(row, 18)?,
        outcome_state: column(row, 19)?,
        result_body: column(row, 20)?,
        result_content_type: column(row, 21)?,
        result_metadata: json(row, 22)?,
        failure_reason: column(row, 23)?,
        error_code: column(row, 24)?,
        error_message: column(row, 25)?,
        error_metadata: json(row, 26)?,
        last_write_fence: column(row, 27)?,
        last_write_digest: column(row, 28)?,
        last_write_by: column(row, 29)?,
        created_at: required_moment(row, 30)?,
        updated_at: required_moment(row, 31)?,
        completed_at: moment(row, 32)?,
        retain_until: moment(row, 33)?,
        last_write_state: column(row, 34)?,
        last_write_failure: column(row, 35)?,
        last_write_retry_at: moment(row, 36)?,
        last_write_answer_fence: column(row, 37)?,
        taken_over_deadline_at: moment(row, 38)?,
        failed_gets_new_attempt: column(row, 39)?,
        conflicts: column(row, 40)?,
        last_conflict_at: moment(row, 41)?,
        replays: column(row, 42)?,
        pendings: column(row, 43)?,
        last_replay_at: moment(row, 44)?,
        renewed_under_fence: column(row, 45)?,
    };
    Ok((decoded, required_moment(row, 46)?))
}

fn undecodable(index: usize, error: impl std::fmt::Display) -> Error {
    Error::Internal(format!(
        "stored operation has an invalid column {index}: {error}"
    ))
}

fn column<T: FromSql>(row: &Row<'_>, index: usize) -> Result<T, Error> {
    row.get(index).map_err(|error| undecodable(index, error))
}

fn uuid(row: &Row<'_>, index: usize) -> Result<Uuid, Error> {
    let bytes: Vec<u8> = column(row, index)?;
    Uuid::from_slice(&bytes).map_err(|error| undecodable(index, error))
}

fn moment(row: &Row<'_>, index: usize) -> Result<Option<DateTime<Utc>>, Error> {
    let text: Option<String> = column(row, index)?;
    text.map(|text| {
        DateTime::parse_from_rfc3339(&text)
            .map(|moment| moment.with_timezone(&Utc))
            .map_err(|error| undecodable(index, error))
    })
    .transpose()
}

pub(super) fn required_moment(row: &Row<'_>, index: usize) -> Result<DateTime<Utc>, Error> {
    moment(row, index)?.ok_or_else(|| undecodable(index, "NULL"))
}

fn json<T: serde::de::DeserializeOwned>(
    row: &Row<'_>,
    index: usize,
) -> Result<Option<Json<T>>, Error> {
    let text: Option<String> = column(row, index)?;
    text.map(|text| {
        serde_json::from_str(&text)
            .map(Json)
            .map_err(|error| undecodable(index, error))
    })
    .transpose()
}
