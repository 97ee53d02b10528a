-- The common case of an owner write that ends its operation (Complete, a
-- TERMINAL Fail: see finishes_in_one_query in sqlite/mod.rs), two statements
-- sent to the writer's thread as one query behind the member's savepoint
-- statements (one hand-off): the row updated when the whole guard holds, and
-- its history entry appended. When the guard does not hold, the UPDATE
-- changes and returns nothing, and so the INSERT inserts nothing
-- (`changes()`: rows the UPDATE changed); the locked path then decides.
--
-- Mirrors of Rust specs, for such writes, as Postgres's write_guarded.sql is
-- (tested by store::mirror_tests::guarded and store::mirror_tests::history
-- against the spec on a real database):
--   WHERE        Guard::holds (crates/idemd-domain/src/guarded.rs), with no
--                attempt-budget or operation-deadline term (a finishing
--                write's guard has neither)
--   SET          Write::apply: the outcome, no lease, no retry, completed now,
--                retained for the row's retention from now, the owner's
--                receipt with the answer the write gets
--   the INSERT   GuardedWrite::history, appended whatever the last entry is
--                (NewHistoryEntry::appended_whatever_the_last)
-- The clock is SQLite's, in milliseconds, stamped with six digits of seconds
-- as `stamp` writes them, so that stamps compare as text. It is read where it
-- is used, not once in a FROM clause: SQLite's 'now' is one value for the
-- whole statement, and an UPDATE … FROM plans as a join (measured: the
-- Complete of the benchmark at 0.8x).
--
-- Parameters, by number: 1 operation_id, 2 tenant_id, 3 the guard's fence,
-- 4 the guard's state, 5 the state written, 6 outcome_state, 7 result_body,
-- 8 result_content_type, 9 result_metadata, 10 failure_reason, 11 error_code,
-- 12 error_message, 13 error_metadata, 14 the receipt's fence, 15 its digest,
-- 16 the entry's event, 17 its detail.
UPDATE operations SET
    state = $5,
    outcome_state = $6, result_body = $7, result_content_type = $8, result_metadata = $9,
    failure_reason = $10, error_code = $11, error_message = $12, error_metadata = $13,
    lease_expires_at = NULL,
    retry_at = NULL,
    completed_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z',
    retain_until = strftime('%Y-%m-%dT%H:%M:%f', 'now',
        printf('%+.3f seconds', retention_ms / 1000.0)) || '000Z',
    last_write_fence = $14, last_write_digest = $15, last_write_by = 'owner',
    last_write_state = $5, last_write_failure = $10, last_write_retry_at = NULL,
    last_write_answer_fence = $14,
    updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
WHERE operation_id = $1 AND tenant_id = $2
  -- Guard::holds
  AND fence = $3 AND state = $4
  AND attempt_deadline_at > strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
  AND NOT COALESCE(last_write_by = 'owner' AND last_write_fence = $3, 0)
RETURNING *, updated_at AS db_now;
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state,
    fence, attempt, detail, count, first_at, last_at, coalesce_key, acted_by, admin_on_behalf)
SELECT operation_id,
    (SELECT COALESCE(max(sequence), 0) + 1 FROM operation_history WHERE operation_id = $1),
    $16, $4, state, fence, attempt, $17, 1, updated_at, updated_at, NULL, NULL, 0
FROM operations WHERE operation_id = $1 AND changes() = 1
