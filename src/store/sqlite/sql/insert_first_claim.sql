-- The first record of a scope, with the fence the write transaction just
-- drew; a scope that has a record inserts nothing. The values are
-- decide_first_claim's (src/domain/transition/claim.rs), its offsets added to the
-- clock in Rust (SQLite's clock is read first, in the same transaction);
-- tested by store::mirror_tests::first_claim.
INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key,
    fingerprint, state, fence, attempt, max_attempts, claim_token, lease_ms,
    max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at,
    operation_deadline_at, created_at, updated_at, failed_gets_new_attempt)
SELECT $1, $2, $3, $4, $5, $6, last_fence, $7, $8, $9, $10, $11, $12, $13, $14,
    $15, $16, $16, $17 FROM operation_fence WHERE singleton = 1
ON CONFLICT (tenant_id, operation, idempotency_key) DO NOTHING
RETURNING *
