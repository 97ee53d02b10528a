-- 10 000 000 operations for measuring ListOperations' plans
-- (bench/sql/listing_10m.sql; the table in docs/api.md), in the schema's
-- shape, with one INSERT ... SELECT generate_series.
--
-- Run it on an empty, migrated database of its own, then drop that database:
--
--   createdb -h 127.0.0.1 -p 55432 -U postgres idemd_10m
--   idemd --database-url postgres://postgres@127.0.0.1:55432/idemd_10m migrate
--   psql postgres://postgres@127.0.0.1:55432/idemd_10m -f bench/sql/listing_10m_load.sql
--   psql postgres://postgres@127.0.0.1:55432/idemd_10m -f bench/sql/listing_10m.sql
--   dropdb -h 127.0.0.1 -p 55432 -U postgres idemd_10m
--
-- The rows: 50 tenants (tenant-01 .. tenant-50, about 200 000 operations each),
-- 200 operation names (20 prefixes x 10 verbs: `payments.*` is 10 of them, 5%
-- of the rows), created_at spread evenly over the last 30 days and inserted in
-- that order with UUIDv7-like ids (as the server writes them, so every index
-- keyed by time or id is filled in order, as in production). States, drawn
-- from a hash of n: 90% SUCCEEDED (with a small JSON result), 5% FAILED, 4.5%
-- EXPIRED tombstones, 0.2% RETRY_WAIT, 0.1% IN_PROGRESS (all but the last
-- few seconds' with their 30 s lease expired) and 0.2% UNKNOWN: 30 000
-- unresolved operations, about 600 a tenant. One in seven operations is on its
-- second attempt after a takeover. No history rows: ListOperations does not
-- read them. Every index is the migrations' own, present during the load.
-- On the machine of docs/api.md's table the INSERT took 8 min 49 s and the
-- table came to 3.9 GB, its indexes to 4.0 GB.
\set ON_ERROR_STOP on
\timing on
-- How many operations: 10 000 000 unless the including script set `rows`
-- (bench/sql/listing_1m_conflicts_load.sql loads a tenth of them).
\if :{?rows}
\else
\set rows 10000000
\endif

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
        now() - interval '30 days' + n * (interval '30 days' / :rows) AS made_at,
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
        FROM generate_series(1::bigint, :rows) AS n
    ) AS drawn
) AS row
JOIN tenants ON tenants.name = 'tenant-' || lpad((1 + tenant_draw)::text, 2, '0')
ORDER BY n;

SELECT setval('operation_fence', :rows);
VACUUM ANALYZE operations;
VACUUM ANALYZE tenants;

SELECT state, count(*) FROM operations GROUP BY state ORDER BY state;
SELECT pg_size_pretty(pg_table_size('operations')) AS table_size,
       pg_size_pretty(pg_indexes_size('operations')) AS indexes_size;
