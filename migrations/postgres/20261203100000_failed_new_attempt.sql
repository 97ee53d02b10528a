-- What a Claim on a FAILED operation gets (issue 20 item 5): the replay
-- (false, every operation so far) or, for operations whose policy says
-- `on_failed: new_attempt`, a new attempt. Resolved from the policy when the
-- first Claim is admitted and stored with the record, so that a policy
-- changed later applies to new operations only. Expand only: a binary that
-- predates this migration inserts rows without it (false: the replay it
-- gives anyway) and never reads it. A constant default rewrites nothing in
-- Postgres 11 and later.
ALTER TABLE operations ADD COLUMN failed_gets_new_attempt BOOLEAN NOT NULL DEFAULT FALSE;
