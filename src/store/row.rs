//! Rows as the databases hold them, and their conversion to the domain.
//! Shared by the stores: the column names and meanings are the same in each.

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use crate::domain::{
    ActedBy, AnswerCounts, Error, ErrorReport, FailureReason, Fingerprint, HistoryEntry, Metadata,
    OnFailed, OperationId, OperationRecord, Outcome, PreviousAttempt, RequestDigest, Result, Scope,
    State, SuccessResult, TenantId, WriteAnswer, WriteReceipt, Writer,
};

#[derive(Debug, sqlx::FromRow)]
pub(crate) struct OperationRow {
    pub(crate) operation_id: Uuid,
    pub(crate) tenant_id: i64,
    pub(crate) operation: String,
    pub(crate) idempotency_key: String,
    pub(crate) fingerprint: Vec<u8>,
    pub(crate) state: String,
    pub(crate) fence: i64,
    pub(crate) attempt: i32,
    pub(crate) max_attempts: i32,
    pub(crate) claim_token: Vec<u8>,
    pub(crate) taken_over_state: Option<String>,
    pub(crate) taken_over_fence: Option<i64>,
    pub(crate) lease_ms: i64,
    pub(crate) max_attempt_duration_ms: i64,
    pub(crate) retention_ms: i64,
    pub(crate) lease_expires_at: Option<DateTime<Utc>>,
    pub(crate) attempt_deadline_at: Option<DateTime<Utc>>,
    pub(crate) retry_at: Option<DateTime<Utc>>,
    pub(crate) operation_deadline_at: Option<DateTime<Utc>>,
    pub(crate) outcome_state: Option<String>,
    pub(crate) result_body: Option<Vec<u8>>,
    pub(crate) result_content_type: Option<String>,
    pub(crate) result_metadata: Option<Json<Metadata>>,
    pub(crate) failure_reason: Option<String>,
    pub(crate) error_code: Option<String>,
    pub(crate) error_message: Option<String>,
    pub(crate) error_metadata: Option<Json<Metadata>>,
    pub(crate) last_write_fence: Option<i64>,
    pub(crate) last_write_digest: Option<Vec<u8>>,
    pub(crate) last_write_by: Option<String>,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
    pub(crate) completed_at: Option<DateTime<Utc>>,
    pub(crate) retain_until: Option<DateTime<Utc>>,
    pub(crate) last_write_state: Option<String>,
    pub(crate) last_write_failure: Option<String>,
    pub(crate) last_write_retry_at: Option<DateTime<Utc>>,
    pub(crate) last_write_answer_fence: Option<i64>,
    pub(crate) taken_over_deadline_at: Option<DateTime<Utc>>,
    pub(crate) failed_gets_new_attempt: bool,
    pub(crate) conflicts: i64,
    pub(crate) last_conflict_at: Option<DateTime<Utc>>,
    pub(crate) replays: i64,
    pub(crate) pendings: i64,
    pub(crate) last_replay_at: Option<DateTime<Utc>>,
    pub(crate) renewed_under_fence: Option<i64>,
}

fn corrupt(what: &str) -> Error {
    Error::Internal(format!("stored operation has an invalid {what}"))
}

fn state(stored: &str) -> Result<State> {
    State::parse(stored).ok_or_else(|| corrupt("state"))
}

fn unsigned<T: TryFrom<i64>>(value: i64, what: &str) -> Result<T> {
    T::try_from(value).map_err(|_| corrupt(what))
}

impl TryFrom<OperationRow> for OperationRecord {
    type Error = Error;

    fn try_from(row: OperationRow) -> Result<Self> {
        let outcome = match row.outcome_state.as_deref() {
            _ if matches!(row.state.as_str(), "expired") => None,
            Some("succeeded") => Some(Outcome::Succeeded(SuccessResult {
                body: row.result_body.unwrap_or_default(),
                content_type: row.result_content_type.unwrap_or_default(),
                metadata: row.result_metadata.map(|json| json.0).unwrap_or_default(),
            })),
            Some("failed") => Some(Outcome::Failed {
                reason: row
                    .failure_reason
                    .as_deref()
                    .and_then(FailureReason::parse)
                    .ok_or_else(|| corrupt("failure reason"))?,
                error: ErrorReport {
                    code: row.error_code.unwrap_or_default(),
                    message: row.error_message.unwrap_or_default(),
                    metadata: row.error_metadata.map(|json| json.0).unwrap_or_default(),
                },
            }),
            Some(_) => return Err(corrupt("outcome")),
            None => None,
        };
        let taken_over_from = match (row.taken_over_state.as_deref(), row.taken_over_fence) {
            (Some(previous_state), Some(fence)) => Some(PreviousAttempt {
                state: state(previous_state)?,
                fence: unsigned(fence, "fence")?,
                attempt_deadline_at: row.taken_over_deadline_at,
            }),
            _ => None,
        };
        let last_write = match (
            row.last_write_fence,
            row.last_write_digest,
            row.last_write_by,
        ) {
            (Some(fence), Some(digest), Some(writer)) => {
                let writer = Writer::parse(&writer).ok_or_else(|| corrupt("writer"))?;
                let answer = match (row.last_write_state.as_deref(), row.last_write_answer_fence) {
                    (Some(answered), Some(answer_fence))
                        if answer_belongs_to_receipt(writer, fence, answer_fence) =>
                    {
                        Some(WriteAnswer {
                            state: state(answered)?,
                            failure: row
                                .last_write_failure
                                .as_deref()
                                .map(|reason| {
                                    FailureReason::parse(reason)
                                        .ok_or_else(|| corrupt("answered failure reason"))
                                })
                                .transpose()?,
                            retry_at: row.last_write_retry_at,
                            fence: unsigned(answer_fence, "answered fence")?,
                        })
                    }
                    _ => None,
                };
                Some(WriteReceipt {
                    fence: unsigned(fence, "fence")?,
                    digest: RequestDigest(digest.try_into().map_err(|_| corrupt("digest"))?),
                    writer,
                    answer,
                })
            }
            _ => None,
        };
        Ok(OperationRecord {
            operation_id: OperationId(row.operation_id),
            tenant_id: TenantId(row.tenant_id),
            scope: Scope {
                operation: row.operation,
                key: row.idempotency_key,
            },
            fingerprint: Fingerprint(
                row.fingerprint
                    .try_into()
                    .map_err(|_| corrupt("fingerprint"))?,
            ),
            state: state(&row.state)?,
            fence: unsigned(row.fence, "fence")?,
            attempt: unsigned(row.attempt.into(), "attempt")?,
            max_attempts: unsigned(row.max_attempts.into(), "max_attempts")?,
            claim_token: row.claim_token,
            renewed_under_fence: row
                .renewed_under_fence
                .map(|fence| unsigned(fence, "renewed_under_fence"))
                .transpose()?,
            taken_over_from,
            lease_duration: TimeDelta::milliseconds(row.lease_ms),
            max_attempt_duration: TimeDelta::milliseconds(row.max_attempt_duration_ms),
            retention: TimeDelta::milliseconds(row.retention_ms),
            on_failed: OnFailed::from_stored(row.failed_gets_new_attempt),
            lease_expires_at: row.lease_expires_at,
            attempt_deadline_at: row.attempt_deadline_at,
            retry_at: row.retry_at,
            operation_deadline_at: row.operation_deadline_at,
            outcome,
            outcome_kind: row.outcome_state.as_deref().map(state).transpose()?,
            last_write,
            created_at: row.created_at,
            updated_at: row.updated_at,
            completed_at: row.completed_at,
            retain_until: row.retain_until,
            conflicts: unsigned(row.conflicts, "conflicts")?,
            last_conflict_at: row.last_conflict_at,
            answers: AnswerCounts {
                replays: unsigned(row.replays, "replays")?,
                pendings: unsigned(row.pendings, "pendings")?,
                last_replay_at: row.last_replay_at,
            },
        })
    }
}

/// Whether the answer columns were written with the receipt beside them.
/// A binary from before the answer columns updates the receipt and leaves
/// the answer another write left; read as this receipt's answer, a re-sent
/// write would be told another write's outcome. An owner write answers with
/// its own fence; a reconciliation with the fence it drew, always above the
/// one it expected (the receipt's), which no earlier answer can reach.
fn answer_belongs_to_receipt(writer: Writer, receipt_fence: i64, answer_fence: i64) -> bool {
    match writer {
        Writer::Owner => answer_fence == receipt_fence,
        Writer::Reconciler => answer_fence > receipt_fence,
    }
}

/// The mutable columns of a record, flattened for binding in an UPDATE.
pub(crate) struct OperationWrite<'a> {
    pub(crate) state: &'static str,
    pub(crate) attempt: i32,
    /// Raised only when a NOT_APPLIED grants one more attempt.
    pub(crate) max_attempts: i32,
    pub(crate) claim_token: &'a [u8],
    pub(crate) taken_over_state: Option<&'static str>,
    pub(crate) taken_over_fence: Option<i64>,
    pub(crate) lease_ms: i64,
    pub(crate) lease_expires_at: Option<DateTime<Utc>>,
    pub(crate) attempt_deadline_at: Option<DateTime<Utc>>,
    pub(crate) retry_at: Option<DateTime<Utc>>,
    pub(crate) outcome_state: Option<&'static str>,
    pub(crate) result_body: Option<&'a [u8]>,
    pub(crate) result_content_type: Option<&'a str>,
    pub(crate) result_metadata: Option<Json<&'a Metadata>>,
    pub(crate) failure_reason: Option<&'static str>,
    pub(crate) error_code: Option<&'a str>,
    pub(crate) error_message: Option<&'a str>,
    pub(crate) error_metadata: Option<Json<&'a Metadata>>,
    pub(crate) last_write_fence: Option<i64>,
    pub(crate) last_write_digest: Option<&'a [u8]>,
    pub(crate) last_write_by: Option<&'static str>,
    pub(crate) last_write_state: Option<&'static str>,
    pub(crate) last_write_failure: Option<&'static str>,
    pub(crate) last_write_retry_at: Option<DateTime<Utc>>,
    pub(crate) last_write_answer_fence: Option<i64>,
    pub(crate) taken_over_deadline_at: Option<DateTime<Utc>>,
    pub(crate) renewed_under_fence: Option<i64>,
    pub(crate) updated_at: DateTime<Utc>,
    pub(crate) completed_at: Option<DateTime<Utc>>,
    pub(crate) retain_until: Option<DateTime<Utc>>,
}

pub(crate) fn signed(value: u64) -> Result<i64> {
    i64::try_from(value).map_err(|_| Error::invalid("fence", "out of range"))
}

impl<'a> OperationWrite<'a> {
    pub(crate) fn of(record: &'a OperationRecord) -> Result<Self> {
        let answer = record.last_write.and_then(|receipt| receipt.answer);
        let (result, failure) = match &record.outcome {
            Some(Outcome::Succeeded(result)) => (Some(result), None),
            Some(Outcome::Failed { reason, error }) => (None, Some((reason, error))),
            None => (None, None),
        };
        Ok(Self {
            state: record.state.as_str(),
            attempt: i32::try_from(record.attempt).map_err(|_| corrupt("attempt"))?,
            max_attempts: i32::try_from(record.max_attempts)
                .map_err(|_| corrupt("max_attempts"))?,
            claim_token: &record.claim_token,
            taken_over_state: record
                .taken_over_from
                .map(|previous| previous.state.as_str()),
            taken_over_fence: record
                .taken_over_from
                .map(|previous| signed(previous.fence))
                .transpose()?,
            lease_ms: record.lease_duration.num_milliseconds(),
            lease_expires_at: record.lease_expires_at,
            attempt_deadline_at: record.attempt_deadline_at,
            retry_at: record.retry_at,
            outcome_state: record.outcome_kind.map(State::as_str),
            result_body: result.map(|result| result.body.as_slice()),
            result_content_type: result.map(|result| result.content_type.as_str()),
            result_metadata: result.map(|result| Json(&result.metadata)),
            failure_reason: failure.map(|(reason, _)| reason.as_str()),
            error_code: failure.map(|(_, error)| error.code.as_str()),
            error_message: failure.map(|(_, error)| error.message.as_str()),
            error_metadata: failure.map(|(_, error)| Json(&error.metadata)),
            last_write_fence: record
                .last_write
                .map(|receipt| signed(receipt.fence))
                .transpose()?,
            last_write_digest: record
                .last_write
                .as_ref()
                .map(|receipt| &receipt.digest.0[..]),
            last_write_by: record.last_write.map(|receipt| receipt.writer.as_str()),
            last_write_state: answer.map(|answer| answer.state.as_str()),
            last_write_failure: answer
                .and_then(|answer| answer.failure)
                .map(FailureReason::as_str),
            last_write_retry_at: answer.and_then(|answer| answer.retry_at),
            last_write_answer_fence: answer.map(|answer| signed(answer.fence)).transpose()?,
            taken_over_deadline_at: record
                .taken_over_from
                .and_then(|previous| previous.attempt_deadline_at),
            renewed_under_fence: record.renewed_under_fence.map(signed).transpose()?,
            updated_at: record.updated_at,
            completed_at: record.completed_at,
            retain_until: record.retain_until,
        })
    }
}

/// A row and the database clock, read by one statement.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RowWithClock {
    #[sqlx(flatten)]
    pub(crate) row: OperationRow,
    pub(crate) db_now: DateTime<Utc>,
}

/// A row of ListOperations: the operation and its tenant's name.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ListedRow {
    #[sqlx(flatten)]
    pub(crate) row: OperationRow,
    /// NULL only if the tenant row were gone, which its foreign key forbids.
    pub(crate) tenant_name: Option<String>,
}

#[derive(Debug, sqlx::FromRow)]
pub(crate) struct HistoryRow {
    pub(crate) sequence: i64,
    pub(crate) event: String,
    pub(crate) from_state: Option<String>,
    pub(crate) to_state: String,
    pub(crate) fence: i64,
    /// NULL: the entry's own fence (never coalesced across fences, or
    /// written before the column existed).
    pub(crate) last_fence: Option<i64>,
    pub(crate) attempt: i32,
    pub(crate) detail: String,
    pub(crate) count: i64,
    pub(crate) first_at: DateTime<Utc>,
    pub(crate) last_at: DateTime<Utc>,
    /// NULL: an owner's or the sweeper's entry (or one from before it was
    /// recorded).
    pub(crate) acted_by: Option<String>,
    pub(crate) admin_on_behalf: bool,
}

impl TryFrom<HistoryRow> for HistoryEntry {
    type Error = Error;

    fn try_from(row: HistoryRow) -> Result<Self> {
        Ok(HistoryEntry {
            sequence: unsigned(row.sequence, "history sequence")?,
            event: row.event,
            from_state: row.from_state.as_deref().map(state).transpose()?,
            to_state: state(&row.to_state)?,
            fence: unsigned(row.fence, "fence")?,
            last_fence: unsigned(row.last_fence.unwrap_or(row.fence), "fence")?,
            attempt: unsigned(row.attempt.into(), "attempt")?,
            detail: row.detail,
            count: unsigned(row.count, "history count")?,
            first_at: row.first_at,
            last_at: row.last_at,
            acted_by: row.acted_by.map(|credential| ActedBy {
                credential,
                admin_on_behalf: row.admin_on_behalf,
            }),
        })
    }
}

/// The columns an outcome is stored in, for one guarded write (`None`:
/// each NULL).
pub(crate) struct OutcomeColumns<'a> {
    pub(crate) state: Option<&'static str>,
    pub(crate) body: Option<&'a [u8]>,
    pub(crate) content_type: Option<&'a str>,
    pub(crate) result_metadata: Option<Json<&'a Metadata>>,
    pub(crate) failure_reason: Option<&'static str>,
    pub(crate) code: Option<&'a str>,
    pub(crate) message: Option<&'a str>,
    pub(crate) error_metadata: Option<Json<&'a Metadata>>,
}

impl<'a> OutcomeColumns<'a> {
    pub(crate) fn of(outcome: Option<&'a Outcome>) -> Self {
        let mut columns = Self {
            state: None,
            body: None,
            content_type: None,
            result_metadata: None,
            failure_reason: None,
            code: None,
            message: None,
            error_metadata: None,
        };
        match outcome {
            Some(Outcome::Succeeded(result)) => {
                columns.state = Some("succeeded");
                columns.body = Some(&result.body);
                columns.content_type = Some(&result.content_type);
                columns.result_metadata = Some(Json(&result.metadata));
            }
            Some(Outcome::Failed { reason, error }) => {
                columns.state = Some("failed");
                columns.failure_reason = Some(reason.as_str());
                columns.code = Some(&error.code);
                columns.message = Some(&error.message);
                columns.error_metadata = Some(Json(&error.metadata));
            }
            None => {}
        }
        columns
    }
}
