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

INSERT INTO tenants (name)
SELECT 'tenant-' || lpad(t::text, 2, '0') FROM generate_series(1, 50) AS t;

INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key,
    fingerprint, state, fence, attempt, max_attempts, claim_token,
    taken_over_state, taken_over_fence, lease_ms, max_attempt_duration_ms,
    retention_ms, lease_expires_at, attempt_deadline_at, retry_at,
    outcome_state, result_body, result_content_type, result_metadata,
    failure_reason, error_code, error_message, created_at, updated_at,
    completed_at, retain_until)
SELECT
    -- UUIDv7: the creation time in milliseconds, then random bits.
    encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
        placing substring(int8send(floor(extract(epoch FROM made_at) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
    tenants.tenant_id,
    (ARRAY['payments', 'orders', 'emails', 'webhooks', 'invoices', 'refunds', 'shipments',
           'sms', 'ledger', 'accounts', 'subscriptions', 'payouts', 'notifications',
           'exports', 'imports', 'reports', 'files', 'kyc', 'transfers', 'coupons'])[1 + name_draw / 10]
        || '.' ||
    (ARRAY['charge', 'capture', 'refund', 'send', 'create', 'update', 'cancel', 'sync',
           'notify', 'settle'])[1 + name_draw % 10],
    'order-' || lpad(n::text, 10, '0'),
    sha256(int8send(n)),
    state,
    n,
    attempt,
    5,
    '\x'::bytea,
    CASE WHEN attempt = 2 THEN 'in_progress' END,
    CASE WHEN attempt = 2 THEN n - 1 END,
    30000,
    300000,
    604800000,
    CASE WHEN state = 'in_progress' THEN made_at + interval '30 seconds' END,
    made_at + interval '5 minutes',
    CASE WHEN state = 'retry_wait' THEN made_at + interval '1 minute' END,
    CASE WHEN state IN ('succeeded', 'expired') THEN 'succeeded'
         WHEN state = 'failed' THEN 'failed' END,
    CASE WHEN state = 'succeeded' THEN convert_to('{"charge":"ch_' || n || '"}', 'UTF8') END,
    CASE WHEN state = 'succeeded' THEN 'application/json' END,
    CASE WHEN state = 'succeeded' THEN '{}'::jsonb END,
    CASE WHEN state = 'failed' THEN 'terminal' END,
    CASE WHEN state = 'failed' THEN 'card_declined' END,
    CASE WHEN state = 'failed' THEN 'the card was declined' END,
    made_at,
    made_at + interval '1 second',
    CASE WHEN state IN ('succeeded', 'failed', 'expired') THEN made_at + interval '1 second' END,
    CASE WHEN state IN ('succeeded', 'failed') THEN made_at + interval '7 days'
         WHEN state = 'expired' THEN made_at + interval '37 days' END
FROM (
    SELECT n,
        now() - interval '30 days' + n * interval '2592 milliseconds' AS made_at,
        abs(hashint8(n)) % 50 AS tenant_draw,
        abs(hashint8(n * 3 + 1)) % 200 AS name_draw,
        CASE WHEN abs(hashint8(n * 7 + 2)) % 7 = 0 THEN 2 ELSE 1 END AS attempt,
        CASE
            WHEN draw < 9000 THEN 'succeeded'
            WHEN draw < 9500 THEN 'failed'
            WHEN draw < 9950 THEN 'expired'
            WHEN draw < 9970 THEN 'retry_wait'
            WHEN draw < 9980 THEN 'in_progress'
            ELSE 'unknown'
        END AS state
    FROM (
        SELECT n, abs(hashint8(n * 5 + 3)) % 10000 AS draw
        FROM generate_series(1::bigint, 1000000) AS n
    ) AS drawn
) AS row
JOIN tenants ON tenants.name = 'tenant-' || lpad((1 + tenant_draw)::text, 2, '0')
ORDER BY n;

SELECT setval('operation_fence', 1000000);

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
