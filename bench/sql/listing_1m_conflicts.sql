-- The filter terms `is:conflicted`, `conflicts>N` and `last:EVENT` on
-- 1 000 000 operations with their history: EXPLAIN (ANALYZE, BUFFERS) of
-- each, three times. The table comes from
-- bench/sql/listing_1m_conflicts_load.sql (its header says how to run both);
-- the figures are in docs/api.md ("What a listing costs"). Written as
-- bench/sql/listing_10m.sql is: the statements src/store/statements/listing.rs
-- builds, in its words and order, PREPAREd with the parameter types sqlx
-- sends and EXECUTEd, page size 100, oldest first.
--
--   psql postgres://postgres@127.0.0.1:55432/idemd_1m -f bench/sql/listing_1m_conflicts.sql \
--     | grep -E '^(-- |QUERY PLAN|.*(Index|Seq|Bitmap|Sort|Limit|SubPlan|Buffers|Execution))'
\set ON_ERROR_STOP on

SELECT tenant_id AS tenant FROM tenants WHERE name = 'tenant-07' \gset

\set columns 'operation_id, tenant_id, operation, idempotency_key, fingerprint, state, fence, attempt, max_attempts, claim_token, taken_over_state, taken_over_fence, lease_ms, max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at, retry_at, operation_deadline_at, outcome_state, result_body, result_content_type, result_metadata, failure_reason, error_code, error_message, error_metadata, last_write_fence, last_write_digest, last_write_by, created_at, updated_at, completed_at, retain_until, last_write_state, last_write_failure, last_write_retry_at, last_write_answer_fence, taken_over_deadline_at, conflicts, last_conflict_at, (SELECT name FROM tenants WHERE tenants.tenant_id = operations.tenant_id) AS tenant_name FROM operations WHERE TRUE'
\set last_event ' AND (SELECT h.event FROM operation_history AS h WHERE h.operation_id = operations.operation_id ORDER BY h.sequence DESC LIMIT 1) = '

-- 1. `is:conflicted`, one tenant.
PREPARE conflicted_tenant (int8, int8) AS
SELECT :columns AND tenant_id = $1 AND conflicts > 0
    ORDER BY created_at, operation_id LIMIT $2;

-- 2. `conflicts>10`, one tenant.
PREPARE conflicts_over (int8, int8, int8) AS
SELECT :columns AND tenant_id = $1 AND conflicts > $2
    ORDER BY created_at, operation_id LIMIT $3;

-- 3. `last:EVENT`, one tenant.
PREPARE last_tenant (int8, text, int8) AS
SELECT :columns AND tenant_id = $1 :last_event $2
    ORDER BY created_at, operation_id LIMIT $3;

-- 4. `state:unknown last:outcome_unknown`, one tenant.
PREPARE unknown_last (int8, text, text, int8) AS
SELECT :columns AND tenant_id = $1 AND (FALSE OR state IN ($2)) :last_event $3
    ORDER BY created_at, operation_id LIMIT $4;

-- 5. `is:conflicted`, admin, every tenant.
PREPARE conflicted_all (int8) AS
SELECT :columns AND conflicts > 0
    ORDER BY created_at, operation_id LIMIT $1;

-- 6. `last:EVENT`, admin, every tenant.
PREPARE last_all (text, int8) AS
SELECT :columns :last_event $1
    ORDER BY created_at, operation_id LIMIT $2;

\echo '-- 1. is:conflicted (one tenant)'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE conflicted_tenant(:tenant, 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE conflicted_tenant(:tenant, 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE conflicted_tenant(:tenant, 100);

\echo '-- 2. conflicts>10 (one tenant)'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE conflicts_over(:tenant, 10, 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE conflicts_over(:tenant, 10, 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE conflicts_over(:tenant, 10, 100);

\echo '-- 3a. last:conflicting_claim_refused (one tenant)'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_tenant(:tenant, 'CONFLICTING_CLAIM_REFUSED', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_tenant(:tenant, 'CONFLICTING_CLAIM_REFUSED', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_tenant(:tenant, 'CONFLICTING_CLAIM_REFUSED', 100);

\echo '-- 3b. last:reconciled (one tenant): no match, every row probed'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_tenant(:tenant, 'RECONCILED', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_tenant(:tenant, 'RECONCILED', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_tenant(:tenant, 'RECONCILED', 100);

\echo '-- 3c. last:completed (one tenant): most rows match'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_tenant(:tenant, 'COMPLETED', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_tenant(:tenant, 'COMPLETED', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_tenant(:tenant, 'COMPLETED', 100);

\echo '-- 4. state:unknown last:outcome_unknown (one tenant)'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unknown_last(:tenant, 'unknown', 'OUTCOME_UNKNOWN', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unknown_last(:tenant, 'unknown', 'OUTCOME_UNKNOWN', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE unknown_last(:tenant, 'unknown', 'OUTCOME_UNKNOWN', 100);

\echo '-- 5. is:conflicted, admin, every tenant'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE conflicted_all(100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE conflicted_all(100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE conflicted_all(100);

\echo '-- 6. last:reconciled, admin, every tenant: no match, every row probed'
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_all('RECONCILED', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_all('RECONCILED', 100);
EXPLAIN (ANALYZE, BUFFERS) EXECUTE last_all('RECONCILED', 100);
