-- The embedded store's twin of preload_postgres.sql, in its types (see
-- migrations/sqlite): completed operations n in :low..:high, key :prefix || n
-- zero-padded to 10 digits, a time-ordered operation_id, fingerprint SHA-256
-- of the key (bench/run registers key(), sha256() and operation_id()), a
-- stored result retained for 30 days, CLAIMED and COMPLETED history rows, no
-- write receipt. Fences continue the store's counter from :fence_base;
-- bench/run advances the counter past them.
WITH RECURSIVE numbers (n) AS (SELECT :low UNION ALL SELECT n + 1 FROM numbers WHERE n < :high)
INSERT INTO operations (operation_id, tenant_id, operation, idempotency_key, fingerprint,
    state, fence, attempt, max_attempts, claim_token, lease_ms, max_attempt_duration_ms,
    retention_ms, attempt_deadline_at, outcome_state, result_body, result_content_type,
    result_metadata, created_at, updated_at, completed_at, retain_until)
SELECT operation_id(n), :tenant_id, 'payments.charge', key(:prefix, n), sha256(key(:prefix, n)),
    'succeeded', :fence_base + n, 1, 5, x'', 30000, 300000, 2592000000, :attempt_deadline,
    'succeeded', :body, 'application/json', '{}', :now, :now, :now, :retain_until
FROM numbers;
WITH RECURSIVE numbers (n) AS (SELECT :low UNION ALL SELECT n + 1 FROM numbers WHERE n < :high),
steps (sequence, event, from_state, to_state) AS (
    VALUES (1, 'CLAIMED', NULL, 'in_progress'), (2, 'COMPLETED', 'in_progress', 'succeeded'))
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state, fence,
    attempt, detail, count, first_at, last_at)
SELECT operations.operation_id, steps.sequence, steps.event, steps.from_state, steps.to_state,
    operations.fence, 1, '', 1, :now, :now
FROM numbers
JOIN operations ON operations.tenant_id = :tenant_id AND operations.operation = 'payments.charge'
    AND operations.idempotency_key = key(:prefix, numbers.n)
CROSS JOIN steps;
