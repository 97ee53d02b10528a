-- The fence whose owner last renewed its lease (issue 23, the claim_token
-- guard): while it is the operation's current fence, the owner has written,
-- so its claim_token is spent and a Claim repeating it (a token derived from
-- a message id, a duplicate delivery) is answered Pending, never Acquired
-- with the owner's fence. Kept as a fence rather than a flag so that a new
-- owner needs nothing cleared: its fence is new. Expand only: a binary that
-- predates this migration never writes it (its owners' tokens stay re-sendable
-- as before) and never reads it.
ALTER TABLE operations ADD COLUMN renewed_under_fence BIGINT;
