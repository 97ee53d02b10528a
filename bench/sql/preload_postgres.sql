-- Completed operations for the replay workload, in the schema's shape: for n
-- in :low..:high, key :'prefix' || n zero-padded to 10 digits, a UUIDv7
-- operation_id like the server's (both keep the load's index inserts in
-- order), fingerprint SHA-256 of the key (what the
-- load generator sends), a stored result, retained for 30 days, and the two
-- history rows a real operation has (CLAIMED, COMPLETED). No write receipt:
-- these were never completed through the API.
-- Variables: :tenant_id, :low, :high, :prefix (psql -v). bench/run loads
-- disjoint ranges in parallel sessions.
WITH inserted AS (
    INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key,
        fingerprint, state, fence, attempt, max_attempts, claim_token, lease_ms,
        max_attempt_duration_ms, retention_ms, attempt_deadline_at, outcome_state,
        result_body, result_content_type, result_metadata, created_at, updated_at,
        completed_at, retain_until)
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
               placing substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
               FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
        :tenant_id, 'payments.charge', :'prefix' || lpad(n::text, 10, '0'),
        sha256(convert_to(:'prefix' || lpad(n::text, 10, '0'), 'UTF8')), 'succeeded', nextval('operation_fence'),
        1, 5, '\x'::bytea, 30000, 300000, 2592000000,
        clock_timestamp() + interval '300 seconds', 'succeeded',
        '\x7b22636861726765223a2263685f31227d'::bytea, 'application/json', '{}'::jsonb,
        clock_timestamp(), clock_timestamp(), clock_timestamp(),
        clock_timestamp() + interval '30 days'
    FROM generate_series(:low, :high) AS n
    RETURNING operation_id, fence, created_at
)
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state, fence,
    attempt, detail, count, first_at, last_at)
SELECT operation_id, step.sequence, step.event, step.from_state, step.to_state, fence, 1, '',
    1, created_at, created_at
FROM inserted CROSS JOIN (VALUES (1, 'CLAIMED', NULL, 'in_progress'),
                                 (2, 'COMPLETED', 'in_progress', 'succeeded'))
    AS step (sequence, event, from_state, to_state);
