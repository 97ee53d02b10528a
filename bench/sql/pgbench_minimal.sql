-- pgbench script: the MINIMAL SQL ceiling of one logical operation (Claim +
-- Complete of a new key). This is the least durable work any correct
-- implementation must do, not idemd's work (idemd's own statements, replayed
-- on idemd's own schema, are pgbench_claim_complete.sql): two statements on
-- the one table of minimal_schema.sql, each its own autocommit transaction,
-- so two commits, which is what a durable Claim and a durable Complete cost
-- when nothing batches them.
--
-- 1. The Claim: INSERT ... ON CONFLICT DO NOTHING, returning the fence (the
--    caller must learn that it acquired; a new key never conflicts here). The
--    fence is per key: it starts at 1, and a takeover would raise it in its
--    own guarded UPDATE. Fencing needs it monotonic per key only, so no
--    sequence is drawn.
-- 2. The Complete: the UPDATE guarded by fence and state, writing the state,
--    the result and the time. No indexed column changes (HOT-eligible).
--
-- Variables: :tenant_id and :run (-D; :run makes this cell's keys its own, so
-- that bench/run can count the records it completed), :client_id (pgbench's).
\set key_number random(1, 9000000000000000000)
INSERT INTO minimal.operations (tenant_id, operation, idempotency_key, state, fingerprint,
    fence, lease_expires_at, result, created_at, updated_at)
VALUES (:tenant_id, 'payments.charge',
    'minimal-' || :run::text || '-' || :client_id::text || '-' || :key_number::text,
    'in_progress', '\x6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b'::bytea,
    1, now() + interval '30 seconds', NULL, now(), now())
ON CONFLICT DO NOTHING
RETURNING fence
\gset claimed_
UPDATE minimal.operations
SET state = 'succeeded', result = '\x7b22636861726765223a2263685f31227d'::bytea,
    lease_expires_at = NULL, updated_at = now()
WHERE tenant_id = :tenant_id AND operation = 'payments.charge'
    AND idempotency_key = 'minimal-' || :run::text || '-' || :client_id::text || '-' || :key_number::text
    AND fence = :claimed_fence AND state = 'in_progress';
