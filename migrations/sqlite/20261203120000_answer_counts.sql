-- Replays and Pending answers counted per operation: see migrations/postgres.
-- Expand only; the timestamp is TEXT in the schema's one format, like every
-- other.
ALTER TABLE operations ADD COLUMN replays INTEGER NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN pendings INTEGER NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN last_replay_at TEXT;
