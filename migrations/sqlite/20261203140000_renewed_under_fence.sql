-- The fence whose owner last renewed its lease (issue 23, the claim_token
-- guard): while it is the operation's current fence, the owner's claim_token
-- is spent. As in Postgres.
ALTER TABLE operations ADD COLUMN renewed_under_fence INTEGER;
