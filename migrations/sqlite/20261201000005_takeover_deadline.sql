-- idemd schema for the embedded SQLite store, version 6 (expand only): a
-- takeover keeps the replaced attempt's deadline (see the Postgres migration
-- of the same version); believed only while taken_over_deadline_fence equals
-- taken_over_fence, NULL on takeovers recorded before.
ALTER TABLE operations ADD COLUMN taken_over_deadline_at TEXT;
ALTER TABLE operations ADD COLUMN taken_over_deadline_fence INTEGER;
