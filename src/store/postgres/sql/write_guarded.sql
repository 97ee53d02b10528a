-- The common case of owner writes (Renew, Complete, Fail), one statement for
-- a batch of members: each member's values travel as arrays, and each
-- returned row names its member by ordinal. A member whose guard does not
-- hold is absent from the result; the locked path decides it.
--
-- Mirrors of Rust specs (each tested by store::mirror_tests::guarded and
-- store::mirror_tests::history against the spec on a real database):
--   WHERE of `updated`               Guard::holds       (crates/idemd-domain/src/guarded.rs)
--   SET of `updated`                 Write::apply       (crates/idemd-domain/src/guarded.rs),
--     its lease_expires_at the lease cap, as decide_renew's lease_within_attempt
--   `last`                           HistoryCap::place  (crates/idemd-domain/src/model.rs)
--   `coalesced`, `history`           GuardedWrite::history, counted or appended
--
-- The tenant is compared with IS NOT DISTINCT FROM, not `=`, so that no
-- generic plan reads the scope index by tenant alone (see write_guarded in
-- batched.rs); operations are found by their primary key.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::int8[], $3::int8[], $4::text[], $5::bool[],
        $6::bool[], $7::int8[], $8::text[], $9::bool[], $10::text[], $11::bytea[],
        $12::text[], $13::jsonb[], $14::text[], $15::text[], $16::text[], $17::jsonb[],
        $18::bool[], $19::int8[], $20::int8[], $21::bool[], $22::bool[],
        $23::bytea[], $24::text[], $25::text[], $26::text[],
        $27::bool[], $28::int4[])
    WITH ORDINALITY AS input(in_operation_id, in_tenant_id, in_fence, in_from_state,
        in_no_receipt, in_budget_left, in_deadline_beyond_ms, in_state, in_set_outcome,
        in_outcome_state, in_result_body, in_result_content_type, in_result_metadata,
        in_failure_reason, in_error_code, in_error_message, in_error_metadata,
        in_lease_clear, in_lease_ms, in_retry_after_ms, in_finishes, in_receipt,
        in_receipt_digest, in_event, in_detail, in_coalesce_key, in_kept_past_cap,
        in_history_cap, ordinal)
), clock AS (
    SELECT clock_timestamp() AS now,
        set_config('lock_timeout', '100ms', true) AS lock_wait
), updated AS (
    UPDATE operations AS o SET
        state = in_state,
        outcome_state = CASE WHEN in_set_outcome THEN in_outcome_state
            ELSE o.outcome_state END,
        result_body = CASE WHEN in_set_outcome THEN in_result_body
            ELSE o.result_body END,
        result_content_type = CASE WHEN in_set_outcome THEN in_result_content_type
            ELSE o.result_content_type END,
        result_metadata = CASE WHEN in_set_outcome THEN in_result_metadata
            ELSE o.result_metadata END,
        failure_reason = CASE WHEN in_set_outcome THEN in_failure_reason
            ELSE o.failure_reason END,
        error_code = CASE WHEN in_set_outcome THEN in_error_code ELSE o.error_code END,
        error_message = CASE WHEN in_set_outcome THEN in_error_message
            ELSE o.error_message END,
        error_metadata = CASE WHEN in_set_outcome THEN in_error_metadata
            ELSE o.error_metadata END,
        -- Only a Renew extends the lease: its owner has written, and its
        -- claim_token is spent.
        renewed_under_fence = CASE WHEN in_lease_clear THEN o.renewed_under_fence
            ELSE o.fence END,
        -- The lease cap: never past the attempt deadline.
        lease_expires_at = CASE WHEN in_lease_clear THEN NULL
            ELSE LEAST(clock.now
                + COALESCE(in_lease_ms, o.lease_ms) * interval '1 millisecond',
                o.attempt_deadline_at) END,
        retry_at = CASE WHEN in_finishes THEN NULL
            WHEN in_retry_after_ms IS NOT NULL
                THEN clock.now + in_retry_after_ms * interval '1 millisecond'
            ELSE o.retry_at END,
        completed_at = CASE WHEN in_finishes THEN clock.now ELSE o.completed_at END,
        retain_until = CASE WHEN in_finishes
            THEN clock.now + o.retention_ms * interval '1 millisecond'
            ELSE o.retain_until END,
        last_write_fence = CASE WHEN in_receipt THEN in_fence
            ELSE o.last_write_fence END,
        last_write_digest = CASE WHEN in_receipt THEN in_receipt_digest
            ELSE o.last_write_digest END,
        last_write_by = CASE WHEN in_receipt THEN 'owner' ELSE o.last_write_by END,
        last_write_state = CASE WHEN in_receipt THEN in_state
            ELSE o.last_write_state END,
        last_write_failure = CASE WHEN in_receipt THEN
            CASE WHEN in_set_outcome THEN in_failure_reason ELSE o.failure_reason END
            ELSE o.last_write_failure END,
        last_write_retry_at = CASE WHEN NOT in_receipt THEN o.last_write_retry_at
            WHEN in_finishes THEN NULL
            WHEN in_retry_after_ms IS NOT NULL
                THEN clock.now + in_retry_after_ms * interval '1 millisecond'
            ELSE o.retry_at END,
        last_write_answer_fence = CASE WHEN in_receipt THEN in_fence
            ELSE o.last_write_answer_fence END,
        updated_at = clock.now
    FROM input CROSS JOIN clock
    WHERE o.operation_id = in_operation_id
      AND o.tenant_id IS NOT DISTINCT FROM in_tenant_id
      AND clock.lock_wait IS NOT NULL
      -- Guard::holds
      AND o.fence = in_fence AND o.state = in_from_state
      AND o.attempt_deadline_at > clock.now
      AND NOT (in_no_receipt AND COALESCE(o.last_write_by = 'owner'
          AND o.last_write_fence = in_fence, false))
      AND (NOT in_budget_left OR o.attempt < o.max_attempts)
      AND (in_deadline_beyond_ms IS NULL OR o.operation_deadline_at IS NULL
          OR o.operation_deadline_at
              > clock.now + in_deadline_beyond_ms * interval '1 millisecond')
    RETURNING o.*, input.ordinal, input.in_from_state, input.in_event,
        input.in_detail, input.in_coalesce_key, input.in_kept_past_cap,
        input.in_history_cap, clock.now AS db_now
), last AS (
    -- HistoryCap::place: count into the last entry when the keys match, else
    -- append while there is room (or the entry is kept past the cap), else
    -- count into the truncation marker when it is last, else append one.
    SELECT updated.operation_id, COALESCE(last_entry.sequence, 0) AS last_sequence,
        CASE WHEN last_entry.coalesce_key = updated.in_coalesce_key THEN 'count'
             WHEN updated.in_kept_past_cap
                 OR COALESCE(last_entry.sequence, 0) < updated.in_history_cap - 1
                 THEN 'append'
             WHEN last_entry.coalesce_key = $31 THEN 'count'
             ELSE 'marker' END AS placement
    FROM updated LEFT JOIN LATERAL (
        SELECT h.sequence, h.coalesce_key FROM operation_history AS h
        WHERE h.operation_id = updated.operation_id
        ORDER BY h.sequence DESC LIMIT 1) AS last_entry ON true
), coalesced AS (
    UPDATE operation_history AS h SET
        count = h.count + 1,
        last_at = updated.db_now,
        last_fence = updated.fence, to_state = updated.state,
        attempt = updated.attempt
    FROM updated JOIN last ON last.operation_id = updated.operation_id
    WHERE h.operation_id = updated.operation_id AND h.sequence = last.last_sequence
      AND last.placement = 'count'
), history AS (
    INSERT INTO operation_history (operation_id, sequence, event, from_state,
        to_state, fence, attempt, detail, count, first_at, last_at, coalesce_key)
    SELECT updated.operation_id, last.last_sequence + 1,
        CASE WHEN last.placement = 'append' THEN in_event ELSE $29 END,
        in_from_state, updated.state, updated.fence, updated.attempt,
        CASE WHEN last.placement = 'append' THEN in_detail ELSE $30 END,
        1, db_now, db_now,
        CASE WHEN last.placement = 'append' THEN in_coalesce_key ELSE $31 END
    FROM updated JOIN last ON last.operation_id = updated.operation_id
    WHERE last.placement <> 'count'
)
SELECT * FROM updated
