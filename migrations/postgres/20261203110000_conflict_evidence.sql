-- Durable evidence of refused conflicting Claims (issue 20 item 1): a Claim
-- whose request fingerprint differs from the stored one is refused
-- (IDEMPOTENCY_KEY_REUSED) and now counted on the operation, with the
-- database time of the last one, beside a coalesced
-- CONFLICTING_CLAIM_REFUSED history entry. Expand only: both columns are
-- nullable or have a constant default, so a binary that predates this
-- migration keeps running during a rolling upgrade (its refusals are not
-- counted), and adding them rewrites nothing in Postgres 11 and later.
--
-- No index: `conflicted` and `conflicts>N` are checked on the rows the
-- listing's index already reads, and an index on a column that changes
-- would make its updates non-HOT.
ALTER TABLE operations ADD COLUMN conflicts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN last_conflict_at TIMESTAMPTZ;
