-- Completed records in the minimal ceiling's table (minimal_schema.sql), as
-- many as bench/run preloads into idemd's table, so that both ceilings and
-- idemd write into a table of the same row count. Not idemd's data: the
-- least a completed record holds.
-- Variables: :tenant_id, :rows, :prefix (psql -v).
INSERT INTO minimal.operations (tenant_id, operation, idempotency_key, state, fingerprint,
    fence, lease_expires_at, result, created_at, updated_at)
SELECT :tenant_id, 'payments.charge', :'prefix' || lpad(n::text, 10, '0'), 'succeeded',
    sha256(convert_to(:'prefix' || lpad(n::text, 10, '0'), 'UTF8')), 1, NULL,
    '\x7b22636861726765223a2263685f31227d'::bytea, clock_timestamp(), clock_timestamp()
FROM generate_series(1, :rows) AS n;
