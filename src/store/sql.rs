//! SQL text that both dialects run. Where the dialects disagree, the macros
//! take the dialect's fragment (a clock expression, a lock clause, a fence
//! expression) as a literal, so every statement stays one `&'static str`.

/// The columns of `operations`, in [`super::row::OperationRow`]'s order.
macro_rules! operation_columns {
    () => {
        "operation_id, tenant_id, operation, idempotency_key, fingerprint, state, fence, \
         attempt, max_attempts, claim_token, taken_over_state, taken_over_fence, lease_ms, \
         max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at, retry_at, \
         operation_deadline_at, outcome_state, result_body, result_content_type, result_metadata, \
         failure_reason, error_code, error_message, error_metadata, last_write_fence, \
         last_write_digest, last_write_by, created_at, updated_at, completed_at, retain_until, \
         last_write_state, last_write_failure, last_write_retry_at, last_write_answer_fence, \
         taken_over_deadline_at, failed_gets_new_attempt, conflicts, last_conflict_at, \
         replays, pendings, last_replay_at, renewed_under_fence"
    };
}
pub(crate) use operation_columns;

/// One operation of a tenant, by scope (`$2`, `$3`) or by id (`$2`).
/// `$extra_column` adds a column (the dialect's clock, for reads that answer
/// with it); `$lock` ends the statement (Postgres: `FOR UPDATE`).
macro_rules! select_operation_sql {
    (by_scope, $extra_column:literal, $lock:literal) => {
        concat!(
            "SELECT ",
            $crate::store::sql::operation_columns!(),
            $extra_column,
            " FROM operations WHERE tenant_id = $1 AND operation = $2 AND idempotency_key = $3",
            $lock
        )
    };
    (by_id, $extra_column:literal, $lock:literal) => {
        concat!(
            "SELECT ",
            $crate::store::sql::operation_columns!(),
            $extra_column,
            // By the primary key; the tenant is a check, not `=`, so that no
            // plan reads the scope index by tenant alone (see WRITE_GUARDED in
            // postgres/batched.rs).
            " FROM operations WHERE operation_id = $2 AND tenant_id IS NOT DISTINCT FROM $1",
            $lock
        )
    };
}
pub(crate) use select_operation_sql;

/// The guarded UPDATE a decided record is written with. The WHERE states the
/// fence and state the decision was made from; `$4` says whether the write
/// takes a new fence, which `$new_fence` (the dialect's expression) yields.
macro_rules! guarded_update_sql {
    ($new_fence:literal) => {
        concat!(
            "UPDATE operations SET state = $3, fence = CASE WHEN $4 THEN ",
            $new_fence,
            " ELSE fence END, attempt = $5, claim_token = $6, taken_over_state = $7, \
             taken_over_fence = $8, lease_ms = $9, lease_expires_at = $10, \
             attempt_deadline_at = $11, retry_at = $12, outcome_state = $13, result_body = $14, \
             result_content_type = $15, result_metadata = $16, failure_reason = $17, \
             error_code = $18, error_message = $19, error_metadata = $20, \
             last_write_fence = $21, last_write_digest = $22, updated_at = $23, \
             completed_at = $24, retain_until = $25, last_write_by = $27, max_attempts = $28, \
             last_write_state = $29, last_write_failure = $30, last_write_retry_at = $31, \
             last_write_answer_fence = $32, taken_over_deadline_at = $33, \
             renewed_under_fence = $34 \
             WHERE operation_id = $1 AND fence = $2 AND state = $26 \
             RETURNING fence"
        )
    };
}
pub(crate) use guarded_update_sql;

// The sweeper's and the gauges' conditions repeat the WHERE of the partial
// index each one reads (operations_retention, operations_retry_deadline,
// operations_unresolved, operations_retry_wait) word for word, so that SQLite,
// which proves a partial index usable only from terms it finds in the query,
// reads the index and not the whole table, as Postgres does.

/// Terminal records past retention, due to become tombstones; `$lock` lets a
/// dialect skip rows that other sweepers or claims hold. Mirror of
/// [`decide_sweep`]'s first case (SUCCEEDED or FAILED, `retain_until <= now`);
/// tested by `mirror_tests::due`.
///
/// [`decide_sweep`]: crate::domain::transition::decide_sweep
macro_rules! due_for_tombstone_sql {
    ($lock:literal) => {
        concat!(
            "SELECT ",
            $crate::store::sql::operation_columns!(),
            " FROM operations \
              WHERE state IN ('succeeded', 'failed', 'expired') AND state <> 'expired' \
                AND retain_until <= $1 \
              LIMIT $2",
            $lock
        )
    };
}
pub(crate) use due_for_tombstone_sql;

/// Retries past their operation deadline, due to end DEADLINE_EXCEEDED.
/// Mirror of [`decide_sweep`]'s second case (RETRY_WAIT, operation deadline
/// `<= now`); tested by `mirror_tests::due`.
///
/// [`decide_sweep`]: crate::domain::transition::decide_sweep
macro_rules! due_for_deadline_sql {
    ($lock:literal) => {
        concat!(
            "SELECT ",
            $crate::store::sql::operation_columns!(),
            " FROM operations \
              WHERE state = 'retry_wait' AND operation_deadline_at IS NOT NULL \
                AND operation_deadline_at <= $1 \
              LIMIT $2",
            $lock
        )
    };
}
pub(crate) use due_for_deadline_sql;

/// Tombstones past their own retention; history goes with them (ON DELETE
/// CASCADE). The domain has no spec of this rule (EXPIRED, `retain_until <=
/// now`); `mirror_tests::due` states it beside the test.
macro_rules! delete_expired_tombstones_sql {
    ($lock:literal) => {
        concat!(
            "DELETE FROM operations WHERE operation_id IN ( \
                 SELECT operation_id FROM operations \
                 WHERE state IN ('succeeded', 'failed', 'expired') AND state = 'expired' \
                   AND retain_until <= $1 \
                 ORDER BY retain_until LIMIT $2",
            $lock,
            ")"
        )
    };
}
pub(crate) use delete_expired_tombstones_sql;

/// Stamps the fence a reconciliation drew into its receipt's answer.
pub(crate) const STAMP_ANSWERED_FENCE: &str =
    "UPDATE operations SET last_write_answer_fence = $2 WHERE operation_id = $1";

/// Counts a refused conflicting Claim on the (locked) record
/// ([`crate::domain::Effects::conflict`]). Mirror of
/// `OperationRecord::with_conflict_counted`; tested by
/// `mirror_tests::conflict`. It touches these two columns only:
/// not the state, fence, lease or `updated_at` (the time of the last
/// transition), so a concurrent owner's fence-guarded write, whose WHERE
/// reads the fence and state, still holds after it, and that write, which
/// sets only its own columns, never overwrites the count.
pub(crate) const COUNT_CONFLICT: &str = "UPDATE operations SET conflicts = conflicts + 1, \
     last_conflict_at = $2 WHERE operation_id = $1";

/// One page of an operation's history: after sequence `$2`, at most `$3`
/// entries. `$count` is the dialect's 64-bit count expression; the sequence
/// is read as 64 bits too, whatever width the column has.
macro_rules! select_history_sql {
    ($count:literal) => {
        concat!(
            "SELECT CAST(sequence AS BIGINT) AS sequence, event, from_state, to_state, fence, \
             last_fence, attempt, detail, ",
            $count,
            " AS count, first_at, last_at, acted_by, admin_on_behalf \
             FROM operation_history WHERE operation_id = $1 AND sequence > $2 \
             ORDER BY sequence LIMIT $3"
        )
    };
}
pub(crate) use select_history_sql;

/// What "unresolved" means in SQL, with `$now` the placeholder of the
/// database clock: UNKNOWN, or IN_PROGRESS whose lease expired. Mirror of
/// [`OperationRecord::unresolved`]; tested by `mirror_tests::due` (through
/// `SELECT_UNRESOLVED`). ListUnresolved and ListOperations' `state:unresolved`
/// both use it, so the two can never disagree; `(@before_now)` is the text
/// up to the clock, for statements built at run time, which bind the clock
/// where the placeholder goes and close the parenthesis.
///
/// [`OperationRecord::unresolved`]: crate::domain::OperationRecord::unresolved
macro_rules! unresolved_sql {
    (@before_now) => {
        "state IN ('in_progress', 'unknown') AND (state = 'unknown' OR lease_expires_at <= "
    };
    ($now:literal) => {
        concat!($crate::store::sql::unresolved_sql!(@before_now), $now, ")")
    };
}
pub(crate) use unresolved_sql;

/// Unresolved candidates oldest first, after a page token's position. Mirror
/// of [`OperationRecord::unresolved`]; tested by `mirror_tests::due`.
///
/// [`OperationRecord::unresolved`]: crate::domain::OperationRecord::unresolved
pub(crate) const SELECT_UNRESOLVED: &str = concat!(
    "SELECT ",
    operation_columns!(),
    " FROM operations WHERE tenant_id = $1 AND ",
    unresolved_sql!("$2"),
    " AND ($3 IS NULL OR operation = $3) \
      AND ($4 IS NULL OR (created_at, operation_id) > ($4, $5)) \
      ORDER BY created_at, operation_id LIMIT $6"
);

/// The gauges' counts at `$1`, each read from the partial index of the rows
/// it counts, never the whole table. Mirrors, in order: IN_PROGRESS and not
/// [`OperationRecord::lease_expired`]; [`OperationRecord::unresolved`];
/// RETRY_WAIT; due for [`decide_sweep`] or a tombstone past its retention.
/// Tested by `mirror_tests::due`.
///
/// [`OperationRecord::lease_expired`]: crate::domain::OperationRecord::lease_expired
/// [`OperationRecord::unresolved`]: crate::domain::OperationRecord::unresolved
/// [`decide_sweep`]: crate::domain::transition::decide_sweep
pub(crate) const COUNT_OPERATIONS: &str = "SELECT \
     (SELECT count(*) FROM operations WHERE state IN ('in_progress', 'unknown') \
         AND state = 'in_progress' AND lease_expires_at > $1), \
     (SELECT count(*) FROM operations WHERE state IN ('in_progress', 'unknown') \
         AND (state = 'unknown' OR lease_expires_at <= $1)), \
     (SELECT count(*) FROM operations WHERE state = 'retry_wait'), \
     (SELECT count(*) FROM operations WHERE state IN ('succeeded', 'failed', 'expired') \
         AND retain_until <= $1) \
     + (SELECT count(*) FROM operations WHERE state = 'retry_wait' \
         AND operation_deadline_at IS NOT NULL AND operation_deadline_at <= $1), \
     (SELECT min(created_at) FROM operations WHERE state IN ('in_progress', 'unknown') \
         AND (state = 'unknown' OR lease_expires_at <= $1))";
