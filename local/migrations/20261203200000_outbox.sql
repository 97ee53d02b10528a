-- idemd-local's transactional outbox (local/src/outbox.rs): an
-- entry is inserted by the application's transaction, so it commits with the
-- business change or not at all; the dispatcher delivers it through the idemd
-- service's execute-once, with the entry's id as the idempotency key, and only
-- then marks it sent. A dispatcher that dies between the delivery and the mark
-- delivers again: the service replays the stored result, the recipient is not
-- called twice.
CREATE TABLE outbox (
    entry_id     UUID PRIMARY KEY,
    -- The service operation the delivery runs under (the scope's operation).
    operation    TEXT COLLATE "C" NOT NULL,
    -- Where the dispatcher delivers: a name its recipient understands (the
    -- binary's: an http:// URL).
    recipient    TEXT NOT NULL,
    payload      BYTEA NOT NULL,
    enqueued_at  TIMESTAMPTZ NOT NULL,
    -- Set once the service recorded the delivery's outcome.
    sent_at      TIMESTAMPTZ,
    -- The recipient's answer (or the replayed one).
    result       BYTEA,
    -- Deliveries begun: more than one means a dispatcher retried it.
    deliveries   INT NOT NULL DEFAULT 0,
    last_error   TEXT
);

CREATE INDEX outbox_unsent ON outbox (enqueued_at, entry_id) WHERE sent_at IS NULL;
