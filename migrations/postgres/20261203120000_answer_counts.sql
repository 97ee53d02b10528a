-- Replays and Pending answers counted per operation (issue 20, the console's
-- timeline). Each replica counts them in memory and adds its counts in
-- batches every few seconds (one UPDATE … FROM unnest(…) per batch), so the
-- replay path itself writes nothing; the counts lag by that interval, and a
-- crash loses at most one interval's. They are evidence only: adding to
-- them changes neither the state, the fence, the lease nor updated_at.
-- Expand only: constant defaults and a nullable column, so a binary that
-- predates this migration keeps running during a rolling upgrade (its
-- answers are not counted), and adding them rewrites nothing in Postgres 11
-- and later. No index: they are read with the row, and an index on a
-- column that changes would make its updates non-HOT.
ALTER TABLE operations ADD COLUMN replays BIGINT NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN pendings BIGINT NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN last_replay_at TIMESTAMPTZ;
