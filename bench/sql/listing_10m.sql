-- ListOperations' statements on 10 000 000 operations: EXPLAIN (ANALYZE,
-- BUFFERS) of each, three times. The table comes from
-- bench/sql/listing_10m_load.sql (its header says how to run both); the
-- figures are in docs/api.md ("What a listing costs").
--
-- The statements are the ones src/store/statements/listing.rs builds for
-- each filter, in its words and order: the operation's columns, its tenant's
-- name, `WHERE TRUE` and one condition per term, then the keyset position of
-- a page token and `ORDER BY created_at, operation_id LIMIT <page size>`
-- (100, the default). Its values are bound, never written into the text, so
-- each is PREPAREd with the parameter types sqlx sends (text, int8,
-- timestamptz, uuid) and EXECUTEd, as the server's prepared statements are;
-- `now` is the database clock, as the server reads it in the same
-- transaction.
--
--   psql postgres://postgres@127.0.0.1:55432/idemd_10m -f bench/sql/listing_10m.sql \
--     | grep -E '^(-- |QUERY PLAN|.*(Index|Seq|Bitmap|Sort|Limit|Buffers|Execution))'
\set ON_ERROR_STOP on

SELECT tenant_id AS tenant FROM tenants WHERE name = 'tenant-07' \gset
SELECT now() AS now \gset
-- A key of that tenant's, for `key:` alone.
SELECT idempotency_key AS key FROM operations WHERE tenant_id = :tenant
    AND created_at > now() - interval '1 day' ORDER BY created_at LIMIT 1 \gset

\set columns 'operation_id, tenant_id, operation, idempotency_key, fingerprint, state, fence, attempt, max_attempts, claim_token, taken_over_state, taken_over_fence, lease_ms, max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at, retry_at, operation_deadline_at, outcome_state, result_body, result_content_type, result_metadata, failure_reason, error_code, error_message, error_metadata, last_write_fence, last_write_digest, last_write_by, created_at, updated_at, completed_at, retain_until, last_write_state, last_write_failure, last_write_retry_at, last_write_answer_fence, taken_over_deadline_at, (SELECT name FROM tenants WHERE tenants.tenant_id = operations.tenant_id) AS tenant_name FROM operations WHERE TRUE'

-- 1. `state:unknown op:payments.* age>10m`, one tenant.
PREPARE unknown_payments (int8, text, text, text, timestamptz, int8) AS
SELECT :columns AND tenant_id = $1 AND (FALSE OR state IN ($2))
    AND operation >= $3 AND operation < $4 AND created_at < $5
    ORDER BY created_at, operation_id LIMIT $6;

-- 2. `state:unresolved`, one tenant: the unresolved queue, oldest first.
PREPARE unresolved_tenant (int8, timestamptz, int8) AS
SELECT :columns AND tenant_id = $1
    AND (FALSE OR (state IN ('in_progress', 'unknown') AND (state = 'unknown' OR lease_expires_at <= $2)))
    ORDER BY created_at, operation_id LIMIT $3;

-- 3. `key:"…"` alone, one tenant.
PREPARE key_alone (int8, text, int8) AS
SELECT :columns AND tenant_id = $1 AND idempotency_key = $2
    ORDER BY created_at, operation_id LIMIT $3;

-- 4. An admin's `state:unresolved` across every tenant.
PREPARE unresolved_all (timestamptz, int8) AS
SELECT :columns
    AND (FALSE OR (state IN ('in_progress', 'unknown') AND (state = 'unknown' OR lease_expires_at <= $1)))
    ORDER BY created_at, operation_id LIMIT $2;

-- 5. The page after the first of 2. (its token's created_at, operation_id).
PREPARE unresolved_tenant_after (int8, timestamptz, timestamptz, uuid, int8) AS
SELECT :columns AND tenant_id = $1
    AND (FALSE OR (state IN ('in_progress', 'unknown') AND (state = 'unknown' OR lease_expires_at <= $2)))
    AND (created_at, operation_id) > ($3, $4)
    ORDER BY created_at, operation_id LIMIT $5;

-- 6. No filter, one tenant, newest first, page 2 (the console's first view,
-- scrolled once).
PREPARE newest_after (int8, timestamptz, uuid, int8) AS
SELECT :columns AND tenant_id = $1 AND (created_at, operation_id) < ($2, $3)
    ORDER BY created_at DESC, operation_id DESC LIMIT $4;

-- Where the first pages of 5. and 6. end: their tokens' positions.
SELECT created_at AS after_at, operation_id AS after_id FROM operations
WHERE tenant_id = :tenant AND state IN ('in_progress', 'unknown')
    AND (state = 'unknown' OR lease_expires_at <= :'now')
ORDER BY created_at, operation_id OFFSET 99 LIMIT 1 \gset
SELECT created_at AS newest_at, operation_id AS newest_id FROM operations
WHERE tenant_id = :tenant ORDER BY created_at DESC, operation_id DESC OFFSET 99 LIMIT 1 \gset

\echo '-- 1. state:unknown op:payments.* age>10m (one tenant)'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unknown_payments(:tenant, 'unknown', 'payments.', 'payments/', :'now'::timestamptz - interval '10 minutes', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unknown_payments(:tenant, 'unknown', 'payments.', 'payments/', :'now'::timestamptz - interval '10 minutes', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unknown_payments(:tenant, 'unknown', 'payments.', 'payments/', :'now'::timestamptz - interval '10 minutes', 100);

\echo '-- 2. state:unresolved (one tenant)'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_tenant(:tenant, :'now', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_tenant(:tenant, :'now', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_tenant(:tenant, :'now', 100);

\echo '-- 3. key:"…" alone (one tenant)'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE key_alone(:tenant, :'key', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE key_alone(:tenant, :'key', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE key_alone(:tenant, :'key', 100);

\echo '-- 4. state:unresolved, admin, every tenant'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_all(:'now', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_all(:'now', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_all(:'now', 100);

\echo '-- 5. state:unresolved (one tenant), the page after the first'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_tenant_after(:tenant, :'now', :'after_at', :'after_id', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_tenant_after(:tenant, :'now', :'after_at', :'after_id', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_tenant_after(:tenant, :'now', :'after_at', :'after_id', 100);

\echo '-- 6. no filter (one tenant), newest first, the page after the first'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE newest_after(:tenant, :'newest_at', :'newest_id', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE newest_after(:tenant, :'newest_at', :'newest_id', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE newest_after(:tenant, :'newest_at', :'newest_id', 100);

-- After five executions Postgres may switch a prepared statement to its
-- generic plan (plan_cache_mode = auto), which a long-lived server
-- connection reaches: the plans it would use.
SET plan_cache_mode = force_generic_plan;
\echo '-- generic plans'
\echo '-- 1.'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unknown_payments(:tenant, 'unknown', 'payments.', 'payments/', :'now'::timestamptz - interval '10 minutes', 100);
\echo '-- 2.'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_tenant(:tenant, :'now', 100);
\echo '-- 3.'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE key_alone(:tenant, :'key', 100);
\echo '-- 4.'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_all(:'now', 100);
\echo '-- 5.'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unresolved_tenant_after(:tenant, :'now', :'after_at', :'after_id', 100);
\echo '-- 6.'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE newest_after(:tenant, :'newest_at', :'newest_id', 100);
