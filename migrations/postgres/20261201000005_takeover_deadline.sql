-- idemd schema, version 6 (expand only): a takeover keeps the replaced
-- attempt's deadline, which the new attempt's overwrites in
-- attempt_deadline_at, so that ReconcileFirst can say how long that attempt's
-- effect may still be in flight (previous_attempt_deadline).
--
-- taken_over_deadline_fence names the replaced attempt the deadline belongs
-- to: binaries of version 5 and older, which may still run on this schema
-- during a rolling upgrade, take over without writing these columns, so a
-- deadline is believed only while its fence equals taken_over_fence. NULL on
-- takeovers recorded before (reported as not known).
ALTER TABLE operations
    ADD COLUMN taken_over_deadline_at TIMESTAMPTZ,
    ADD COLUMN taken_over_deadline_fence BIGINT;
