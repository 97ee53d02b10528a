-- idemd schema for the embedded SQLite store, version 3 (expand only): every
-- RETRY_WAIT row in one partial index, so that counting them (a gauge) never
-- reads the whole table.
CREATE INDEX operations_retry_wait ON operations (retry_at) WHERE state = 'retry_wait';
