-- The first record of a scope and its CLAIMED entry, three statements run in
-- turn by the queued writer (sqlite/one_query.rs) in its group's transaction:
-- the next fence drawn, the record inserted with it at the statement's clock,
-- and the entry written from the inserted row. `RETURNING *` returns the
-- operation's columns in OperationRow's order (one_query.rs puts them there).
-- A scope that has a record inserts nothing, hence no entry; the fence drawn
-- stays spent (a gap, as a Postgres sequence leaves: fences only grow).
--
-- Mirror of decide_first_claim (crates/idemd-domain/src/transition/claim.rs), as
-- Postgres's insert_or_find.sql is: the row inserted is FirstClaim::record at
-- the statement's clock with the fence drawn here, its entry
-- FirstClaim::history_with_fence. The offsets (lease, deadlines) come from
-- decide_first_claim in milliseconds; this statement adds them to its clock,
-- which SQLite counts in milliseconds, and writes each stamp with six digits
-- of seconds, as `stamp` does. Tested by store::mirror_tests::first_claim.
--
-- Parameters, by number: 1 operation_id, 2 tenant_id, 3 operation, 4 key,
-- 5 fingerprint, 6 state, 7 attempt, 8 max_attempts, 9 claim_token,
-- 10 lease_ms, 11 max_attempt_duration_ms, 12 retention_ms, the offsets from
-- the clock of 13 the lease's expiry, 14 the attempt deadline and 15 the
-- operation deadline (NULL: none), in milliseconds, 16 failed_gets_new_attempt;
-- the entry's 17 event, 18 detail and 19 coalesce key.
UPDATE operation_fence SET last_fence = last_fence + 1 WHERE singleton = 1;
INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key,
    fingerprint, state, fence, attempt, max_attempts, claim_token, lease_ms,
    max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at,
    operation_deadline_at, created_at, updated_at, failed_gets_new_attempt)
SELECT $1, $2, $3, $4, $5, $6, last_fence, $7, $8, $9, $10, $11, $12,
    strftime('%Y-%m-%dT%H:%M:%f', clock.now, printf('%+.3f seconds', $13 / 1000.0)) || '000Z',
    strftime('%Y-%m-%dT%H:%M:%f', clock.now, printf('%+.3f seconds', $14 / 1000.0)) || '000Z',
    CASE WHEN $15 IS NOT NULL THEN strftime('%Y-%m-%dT%H:%M:%f', clock.now,
        printf('%+.3f seconds', $15 / 1000.0)) || '000Z' END,
    clock.now || '000Z', clock.now || '000Z', $16
FROM operation_fence, (SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now') AS now) AS clock
WHERE singleton = 1
ON CONFLICT (tenant_id, operation, idempotency_key) DO NOTHING
RETURNING *, updated_at AS db_now;
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state,
    fence, attempt, detail, count, first_at, last_at, coalesce_key)
SELECT operation_id, 1, $17, NULL, state, fence, attempt, $18, 1, created_at, created_at, $19
FROM operations WHERE operation_id = $1
