-- Durable evidence of refused conflicting Claims (issue 20 item 1): see
-- migrations/postgres. Expand only; the timestamp is TEXT in the schema's one
-- format, like every other.
ALTER TABLE operations ADD COLUMN conflicts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN last_conflict_at TEXT;
