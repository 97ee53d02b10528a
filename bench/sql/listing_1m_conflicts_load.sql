-- 1 000 000 operations with their history and conflict evidence, for
-- measuring the filter terms `is:conflicted`, `conflicts>N` and `last:EVENT`
-- (bench/sql/listing_1m_conflicts.sql; the table in docs/api.md). The
-- operations are those of bench/sql/listing_10m_load.sql at a tenth of the
-- count (50 tenants of about 20 000, created over the same 30 days), plus
-- what that script leaves out: every operation's history (CLAIMED; TAKEN_OVER
-- for the one in seven on a second attempt; COMPLETED, FAILED,
-- RETRY_SCHEDULED or OUTCOME_UNKNOWN by state; COMPLETED then EXPIRED for
-- tombstones) and, for one operation in 200 (0.5%), 1 to 20 refused
-- conflicting Claims counted on it with their CONFLICTING_CLAIM_REFUSED entry
-- last. No RECONCILED entry: `last:reconciled` matches nothing, the dearest
-- case (every row of the tenant is probed).
--
-- Run it on an empty, migrated database of its own, then drop that database:
--
--   createdb -h 127.0.0.1 -p 55432 -U postgres idemd_1m
--   idemd --database-url postgres://postgres@127.0.0.1:55432/idemd_1m migrate
--   psql postgres://postgres@127.0.0.1:55432/idemd_1m -f bench/sql/listing_1m_conflicts_load.sql
--   psql postgres://postgres@127.0.0.1:55432/idemd_1m -f bench/sql/listing_1m_conflicts.sql
--   dropdb -h 127.0.0.1 -p 55432 -U postgres idemd_1m
\set ON_ERROR_STOP on
\timing on

-- The operations: listing_10m_load.sql's, a tenth as many.
\set rows 1000000
\ir listing_10m_load.sql

-- History: CLAIMED, TAKEN_OVER on a second attempt, then the ending.
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state,
    fence, attempt, count, first_at, last_at)
SELECT operation_id, 1, 'CLAIMED', NULL, 'in_progress', fence, 1, 1, created_at, created_at
FROM operations;
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state,
    fence, attempt, count, first_at, last_at)
SELECT operation_id, 2, 'TAKEN_OVER', 'in_progress', 'in_progress', fence, 2, 1,
    created_at, created_at
FROM operations WHERE attempt = 2;
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state,
    fence, attempt, count, first_at, last_at)
SELECT operation_id, attempt + 1,
    CASE state WHEN 'succeeded' THEN 'COMPLETED' WHEN 'expired' THEN 'COMPLETED'
        WHEN 'failed' THEN 'FAILED' WHEN 'retry_wait' THEN 'RETRY_SCHEDULED'
        ELSE 'OUTCOME_UNKNOWN' END,
    'in_progress',
    CASE state WHEN 'expired' THEN 'succeeded' ELSE state END,
    fence, attempt, 1, updated_at, updated_at
FROM operations WHERE state <> 'in_progress';
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state,
    fence, attempt, count, first_at, last_at)
SELECT operation_id, attempt + 2, 'EXPIRED', 'succeeded', 'expired', fence, attempt, 1,
    retain_until, retain_until
FROM operations WHERE state = 'expired';

-- Conflict evidence on one operation in 200, its entry last.
UPDATE operations SET conflicts = 1 + abs(hashint8(fence * 11 + 5)) % 20,
    last_conflict_at = updated_at + interval '1 minute'
WHERE abs(hashint8(fence * 13 + 7)) % 200 = 0;
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state,
    fence, attempt, count, first_at, last_at, coalesce_key)
SELECT o.operation_id,
    (SELECT max(h.sequence) FROM operation_history AS h
     WHERE h.operation_id = o.operation_id) + 1,
    'CONFLICTING_CLAIM_REFUSED', o.state, o.state, o.fence, o.attempt, o.conflicts,
    o.created_at, o.last_conflict_at, 'CONFLICTING_CLAIM_REFUSED'
FROM operations AS o WHERE o.conflicts > 0;

VACUUM ANALYZE operations;
VACUUM ANALYZE operation_history;
VACUUM ANALYZE tenants;

SELECT state, count(*), count(*) FILTER (WHERE conflicts > 0) AS conflicted
FROM operations GROUP BY state ORDER BY state;
SELECT count(*) AS history_entries FROM operation_history;
SELECT pg_size_pretty(pg_table_size('operations')) AS table_size,
       pg_size_pretty(pg_indexes_size('operations')) AS indexes_size,
       pg_size_pretty(pg_total_relation_size('operation_history')) AS history_size;
