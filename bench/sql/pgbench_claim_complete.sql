-- pgbench script: the SQL ceiling of one logical operation (Claim + Complete
-- of a new key): the durable writes idemd makes for it, each reduced to its
-- plainest single statement in its own autocommit transaction.
--
-- 1. The Claim: INSERT ... ON CONFLICT DO NOTHING with its history row in a
--    CTE, returning the row. (idemd's own statement, `INSERT_OR_FIND` in
--    src/store/postgres/statements.rs, does the same for a batch of claims
--    from unnest() arrays and reads the existing record of a replay in the
--    same statement; this is its single-claim minimum.) The operation_id is a
--    UUIDv7 like the server's (PostgreSQL 15 has no uuidv7(): its bytes are
--    built from the clock and gen_random_uuid()).
-- 2. The Complete: the UPDATE guarded by fence and state of every column the
--    server writes on Complete, with its history row, in one statement (idemd's
--    batched form: `write_guarded` in the same file).
--
-- Variables: :tenant_id (-D), :client_id (pgbench's own).
\set key_number random(1, 9000000000000000000)
WITH clock AS (SELECT clock_timestamp() AS now), inserted AS (
    INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key,
        fingerprint, state, fence, attempt, max_attempts, claim_token, lease_ms,
        max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at,
        operation_deadline_at, created_at, updated_at)
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
               placing substring(int8send(floor(extract(epoch FROM now) * 1000)::bigint) FROM 3)
               FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
        :tenant_id, 'payments.charge', 'pgbench-' || :client_id || '-' || :key_number,
        '\x6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b'::bytea,
        'in_progress', nextval('operation_fence'), 1, 5, '\x'::bytea, 30000, 300000, 86400000,
        now + make_interval(secs => LEAST(30000, 300000) / 1000.0),
        now + make_interval(secs => 300000 / 1000.0),
        now + make_interval(secs => NULL::bigint / 1000.0), now, now
    FROM clock
    ON CONFLICT ON CONSTRAINT operations_scope DO NOTHING
    RETURNING *
), history AS (
    INSERT INTO operation_history (operation_id, sequence, event, from_state,
        to_state, fence, attempt, detail, count, first_at, last_at)
    SELECT operation_id, 1, 'CLAIMED', NULL, 'in_progress', fence, 1, '', 1,
        created_at, created_at FROM inserted
) SELECT operation_id, tenant_id, operation, idempotency_key, fingerprint, state, fence,
    attempt, max_attempts, claim_token, taken_over_state, taken_over_fence, lease_ms,
    max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at, retry_at,
    operation_deadline_at, outcome_state, result_body, result_content_type, result_metadata,
    failure_reason, error_code, error_message, error_metadata, last_write_fence,
    last_write_digest, last_write_by, created_at, updated_at, completed_at, retain_until
  FROM inserted
\gset claimed_
WITH clock AS (SELECT clock_timestamp() AS now), updated AS (
    UPDATE operations SET state = 'succeeded', fence = fence, attempt = 1,
        claim_token = '\x'::bytea, taken_over_state = NULL, taken_over_fence = NULL,
        lease_ms = 30000, lease_expires_at = NULL, attempt_deadline_at = attempt_deadline_at,
        retry_at = NULL, outcome_state = 'succeeded', result_body = '\x7b22636861726765223a2263685f31227d'::bytea,
        result_content_type = 'application/json', result_metadata = '{}'::jsonb,
        failure_reason = NULL, error_code = NULL, error_message = NULL, error_metadata = NULL,
        last_write_fence = :claimed_fence,
        last_write_digest = '\xd4735e3a265e16eee03f59718b9b5d03019c07d8b6c51f90da3a666eec13ab35'::bytea,
        updated_at = clock.now, completed_at = clock.now,
        retain_until = clock.now + make_interval(secs => 86400000 / 1000.0), last_write_by = 'owner'
    FROM clock
    WHERE operation_id = :claimed_operation_id AND fence = :claimed_fence AND state = 'in_progress'
    RETURNING operations.operation_id, operations.fence, operations.completed_at
)
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state, fence,
    attempt, detail, count, first_at, last_at)
SELECT operation_id, 2, 'COMPLETED', 'in_progress', 'succeeded', fence, 1, '', 1,
    completed_at, completed_at FROM updated;
