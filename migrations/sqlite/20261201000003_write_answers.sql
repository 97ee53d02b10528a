-- idemd schema for the embedded SQLite store, version 4 (expand only): the
-- answer a write got is kept with its receipt; NULL on receipts written before.
ALTER TABLE operations ADD COLUMN last_write_state TEXT;
ALTER TABLE operations ADD COLUMN last_write_failure TEXT;
ALTER TABLE operations ADD COLUMN last_write_retry_at TEXT;
ALTER TABLE operations ADD COLUMN last_write_answer_fence INTEGER;
