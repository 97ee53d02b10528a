-- idemd schema, version 4 (expand only): the answer a write got is kept with
-- its receipt, so that a re-sent write gets that same answer however the
-- record moved on since. NULL on receipts written before (answered from the
-- record, as binaries of version 3 do).
ALTER TABLE operations
    ADD COLUMN last_write_state TEXT,
    ADD COLUMN last_write_failure TEXT,
    ADD COLUMN last_write_retry_at TIMESTAMPTZ,
    ADD COLUMN last_write_answer_fence BIGINT;
