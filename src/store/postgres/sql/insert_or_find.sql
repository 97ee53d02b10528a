-- The first step of a batch of Claims, one statement for all members: a
-- scope that has a record (in this statement's snapshot) is read, not
-- inserted, so a replay draws no fence; a scope without one gets its first
-- record and its CLAIMED entry. Each member's values travel as arrays, and
-- each returned row names its member by ordinal.
--
-- Mirror of decide_first_claim (src/domain/transition/claim.rs): the row inserted
-- is FirstClaim::record at the statement's clock with the fence drawn here,
-- its history entry FirstClaim::history_with_fence. The offsets (lease,
-- deadlines) come from decide_first_claim; this statement adds them to its
-- clock. Tested by store::mirror_tests::first_claim on a real database.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::int8[], $3::text[], $4::text[], $5::bytea[],
        $6::int4[], $7::bytea[], $8::int8[], $9::int8[], $10::int8[], $11::int8[],
        $12::int8[], $13::int8[], $14::text[], $15::int4[], $16::text[], $17::text[],
        $18::text[], $19::bool[])
    WITH ORDINALITY AS input(in_operation_id, in_tenant_id, in_operation, in_key,
        in_fingerprint, in_max_attempts, in_claim_token, in_lease_ms,
        in_max_attempt_duration_ms, in_retention_ms, in_lease_expires_in_ms,
        in_attempt_deadline_in_ms, in_operation_deadline_in_ms, in_state, in_attempt,
        in_event, in_detail, in_coalesce_key, in_failed_gets_new_attempt, ordinal)
), clock AS (SELECT clock_timestamp() AS now),
existing AS (
    SELECT found.*, input.ordinal FROM input CROSS JOIN LATERAL (
        SELECT * FROM operations
        WHERE operations.tenant_id = input.in_tenant_id
          AND operations.operation = input.in_operation
          AND operations.idempotency_key = input.in_key
        LIMIT 1) AS found
), inserted AS (
    INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key,
        fingerprint, state, fence, attempt, max_attempts, claim_token, lease_ms,
        max_attempt_duration_ms, retention_ms, lease_expires_at, attempt_deadline_at,
        operation_deadline_at, created_at, updated_at, failed_gets_new_attempt)
    SELECT in_operation_id, in_tenant_id, in_operation, in_key, in_fingerprint,
        in_state, nextval('operation_fence'), in_attempt, in_max_attempts,
        in_claim_token, in_lease_ms, in_max_attempt_duration_ms, in_retention_ms,
        clock.now + in_lease_expires_in_ms * interval '1 millisecond',
        clock.now + in_attempt_deadline_in_ms * interval '1 millisecond',
        clock.now + in_operation_deadline_in_ms * interval '1 millisecond',
        clock.now, clock.now, in_failed_gets_new_attempt
    FROM input CROSS JOIN clock
    WHERE NOT EXISTS (SELECT 1 FROM existing WHERE existing.ordinal = input.ordinal)
    ORDER BY in_tenant_id, in_operation, in_key
    ON CONFLICT ON CONSTRAINT operations_scope DO NOTHING
    RETURNING *
), history AS (
    INSERT INTO operation_history (operation_id, sequence, event, from_state,
        to_state, fence, attempt, detail, count, first_at, last_at, coalesce_key)
    SELECT inserted.operation_id, 1, in_event, NULL, inserted.state, inserted.fence,
        inserted.attempt, in_detail, 1, inserted.created_at, inserted.created_at,
        in_coalesce_key
    FROM inserted JOIN input ON input.in_operation_id = inserted.operation_id
)
-- Both branches: the table's columns in its order, then ordinal and clock.
SELECT true AS inserted, inserted.*, input.ordinal, clock.now AS db_now
FROM inserted JOIN input ON input.in_operation_id = inserted.operation_id
CROSS JOIN clock
UNION ALL
SELECT false, existing.*, clock.now FROM existing CROSS JOIN clock
