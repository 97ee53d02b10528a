-- no-transaction
-- idemd schema, version 3 (expand only): every RETRY_WAIT row in one partial
-- index, so that counting them (a gauge) never reads the whole table. Built
-- CONCURRENTLY (outside a transaction), so a large table keeps taking writes
-- meanwhile; IF NOT EXISTS lets an interrupted build be resumed after its
-- invalid index is dropped.
CREATE INDEX CONCURRENTLY IF NOT EXISTS operations_retry_wait ON operations (retry_at)
    WHERE state = 'retry_wait';
