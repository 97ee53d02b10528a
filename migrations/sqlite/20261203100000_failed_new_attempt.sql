-- What a Claim on a FAILED operation gets (issue 20 item 5): the replay (0,
-- every operation so far) or, for operations whose policy says `on_failed:
-- new_attempt`, a new attempt (1). Resolved from the policy when the first
-- Claim is admitted and stored with the record, so that a policy changed
-- later applies to new operations only. As in Postgres; the table is STRICT,
-- so the flag is an INTEGER (0 or 1).
ALTER TABLE operations ADD COLUMN failed_gets_new_attempt INTEGER NOT NULL DEFAULT 0;
