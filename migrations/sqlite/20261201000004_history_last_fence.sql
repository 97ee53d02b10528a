-- idemd schema for the embedded SQLite store, version 5 (expand only): the
-- last fence a coalesced history entry counts; NULL: the entry's own fence.
ALTER TABLE operation_history ADD COLUMN last_fence INTEGER;
