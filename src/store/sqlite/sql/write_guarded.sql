-- The common case of owner writes (Renew, Complete, Fail), two statements run
-- in turn by the queued writer (sqlite/one_query.rs) in its group's
-- transaction: the row updated when the whole guard holds, and its history
-- entry placed. `RETURNING *` returns the operation's columns in
-- OperationRow's order (one_query.rs puts them there). When the guard does not hold, the UPDATE changes and returns
-- nothing, and so the entry's statement writes nothing (`changes()`: the rows
-- the UPDATE changed); the locked path then decides.
--
-- Mirrors of Rust specs, as Postgres's write_guarded.sql is (each tested by
-- store::mirror_tests::guarded and store::mirror_tests::history against the
-- spec on a real database):
--   WHERE of the UPDATE   Guard::holds       (crates/idemd-domain/src/guarded.rs)
--   SET of the UPDATE     Write::apply       (crates/idemd-domain/src/guarded.rs),
--     its lease_expires_at the lease cap, as decide_renew's lease_within_attempt
--   `placed`              HistoryCap::place  (crates/idemd-domain/src/model.rs)
--   the INSERT            GuardedWrite::history, appended, or counted into the
--                         last entry through the history's key (ON CONFLICT)
-- The clock is SQLite's, in milliseconds, stamped with six digits of seconds as
-- `stamp` writes them, so that stamps compare as text. It is read where it is
-- used, not once in a FROM clause: SQLite's 'now' is one value for the whole
-- statement, and an `UPDATE … FROM` runs as a join (measured: the benchmark's
-- Complete at 0.8x).
--
-- Parameters, by number (Postgres's, for one write): 1 operation_id,
-- 2 tenant_id, 3 the guard's fence, 4 its state, 5 no owner receipt for the
-- fence required, 6 attempt budget left required, 7 operation deadline beyond
-- (ms, NULL: not required), 8 the state written, 9 whether the outcome is set,
-- 10 outcome_state, 11 result_body, 12 result_content_type, 13 result_metadata,
-- 14 failure_reason, 15 error_code, 16 error_message, 17 error_metadata,
-- 18 whether the lease is cleared, 19 the lease asked for (ms, NULL: the row's),
-- 20 retry after (ms, NULL: unchanged), 21 whether the operation ends,
-- 22 whether a receipt is kept, 23 its digest, the entry's 24 event, 25 detail,
-- 26 coalesce key, 27 whether it is kept past the cap, 28 the cap, and the
-- truncation marker's 29 event, 30 detail and 31 key.
UPDATE operations SET
    state = $8,
    outcome_state = CASE WHEN $9 THEN $10 ELSE outcome_state END,
    result_body = CASE WHEN $9 THEN $11 ELSE result_body END,
    result_content_type = CASE WHEN $9 THEN $12 ELSE result_content_type END,
    result_metadata = CASE WHEN $9 THEN $13 ELSE result_metadata END,
    failure_reason = CASE WHEN $9 THEN $14 ELSE failure_reason END,
    error_code = CASE WHEN $9 THEN $15 ELSE error_code END,
    error_message = CASE WHEN $9 THEN $16 ELSE error_message END,
    error_metadata = CASE WHEN $9 THEN $17 ELSE error_metadata END,
    -- Only a Renew extends the lease: its owner has written, and its
    -- claim_token is spent.
    renewed_under_fence = CASE WHEN $18 THEN renewed_under_fence ELSE fence END,
    -- The lease cap: never past the attempt deadline (which the guard
    -- requires to lie ahead).
    lease_expires_at = CASE WHEN $18 THEN NULL
        ELSE min(strftime('%Y-%m-%dT%H:%M:%f', 'now',
                printf('%+.3f seconds', COALESCE($19, lease_ms) / 1000.0)) || '000Z',
            attempt_deadline_at) END,
    retry_at = CASE WHEN $21 THEN NULL
        WHEN $20 IS NOT NULL THEN strftime('%Y-%m-%dT%H:%M:%f', 'now',
            printf('%+.3f seconds', $20 / 1000.0)) || '000Z'
        ELSE retry_at END,
    completed_at = CASE WHEN $21 THEN strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
        ELSE completed_at END,
    retain_until = CASE WHEN $21 THEN strftime('%Y-%m-%dT%H:%M:%f', 'now',
            printf('%+.3f seconds', retention_ms / 1000.0)) || '000Z'
        ELSE retain_until END,
    last_write_fence = CASE WHEN $22 THEN $3 ELSE last_write_fence END,
    last_write_digest = CASE WHEN $22 THEN $23 ELSE last_write_digest END,
    last_write_by = CASE WHEN $22 THEN 'owner' ELSE last_write_by END,
    last_write_state = CASE WHEN $22 THEN $8 ELSE last_write_state END,
    last_write_failure = CASE WHEN $22 THEN
        CASE WHEN $9 THEN $14 ELSE failure_reason END
        ELSE last_write_failure END,
    last_write_retry_at = CASE WHEN NOT $22 THEN last_write_retry_at
        WHEN $21 THEN NULL
        WHEN $20 IS NOT NULL THEN strftime('%Y-%m-%dT%H:%M:%f', 'now',
            printf('%+.3f seconds', $20 / 1000.0)) || '000Z'
        ELSE retry_at END,
    last_write_answer_fence = CASE WHEN $22 THEN $3 ELSE last_write_answer_fence END,
    updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
WHERE operation_id = $1 AND tenant_id = $2
  -- Guard::holds
  AND fence = $3 AND state = $4
  AND attempt_deadline_at > strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
  AND NOT ($5 AND COALESCE(last_write_by = 'owner' AND last_write_fence = $3, 0))
  AND (NOT $6 OR attempt < max_attempts)
  AND ($7 IS NULL OR operation_deadline_at IS NULL
      OR operation_deadline_at > strftime('%Y-%m-%dT%H:%M:%f', 'now',
          printf('%+.3f seconds', $7 / 1000.0)) || '000Z')
RETURNING *, updated_at AS db_now;
-- HistoryCap::place: count into the last entry when the keys match, else
-- append while there is room (or the entry is kept past the cap), else count
-- into the truncation marker when it is last, else append one. Counting is the
-- conflict on the last entry's key.
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state,
    fence, attempt, detail, count, first_at, last_at, coalesce_key, acted_by, admin_on_behalf)
SELECT o.operation_id,
    CASE WHEN placed.placement = 'count' THEN placed.last_sequence
        ELSE placed.last_sequence + 1 END,
    CASE WHEN placed.placement = 'append' THEN $24 ELSE $29 END,
    $4, o.state, o.fence, o.attempt,
    CASE WHEN placed.placement = 'append' THEN $25 ELSE $30 END,
    1, o.updated_at, o.updated_at,
    CASE WHEN placed.placement = 'append' THEN $26 ELSE $31 END,
    NULL, 0
FROM operations AS o, (
    SELECT COALESCE(last_entry.sequence, 0) AS last_sequence,
        CASE WHEN last_entry.coalesce_key = $26 THEN 'count'
             WHEN $27 OR COALESCE(last_entry.sequence, 0) < $28 - 1 THEN 'append'
             WHEN last_entry.coalesce_key = $31 THEN 'count'
             ELSE 'marker' END AS placement
    FROM (SELECT 1) LEFT JOIN (
        SELECT sequence, coalesce_key FROM operation_history
        WHERE operation_id = $1 ORDER BY sequence DESC LIMIT 1) AS last_entry ON true) AS placed
WHERE o.operation_id = $1 AND changes() = 1
ON CONFLICT (operation_id, sequence) DO UPDATE SET
    count = count + 1, last_at = excluded.last_at, last_fence = excluded.fence,
    to_state = excluded.to_state, attempt = excluded.attempt
