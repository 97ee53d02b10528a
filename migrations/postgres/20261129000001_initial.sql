-- idemd schema, version 1: the first schema any release carries. Nothing was
-- released before it, so the seven migrations written until then are squashed
-- into this one; `pg_dump --schema-only` of a database they migrated is the
-- same as of one this migrates, less the two columns that carried arithmetic
-- for binaries that never shipped (taken_over_deadline_fence, and count_total
-- beside an int4 count: count is a BIGINT now).
-- Migrations follow expand/contract: a later version only adds (nullable or
-- defaulted) columns, tables and indexes while binaries of the previous version
-- still run, and drops only what no running binary reads any more.

CREATE TABLE tenants (
    -- An identity never hands out the same id twice, so a revoked tenant's
    -- operations can never surface under a new tenant of the same name.
    tenant_id  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       TEXT COLLATE "C" NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    revoked_at TIMESTAMPTZ
);
CREATE UNIQUE INDEX tenants_active_name ON tenants (name) WHERE revoked_at IS NULL;

CREATE TABLE tenant_tokens (
    -- SHA-256 of the bearer token; the token itself is never stored.
    token_sha256 BYTEA PRIMARY KEY CHECK (length(token_sha256) = 32),
    tenant_id    BIGINT NOT NULL REFERENCES tenants (tenant_id),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    revoked_at   TIMESTAMPTZ
);

-- Every owner draws its fence from this one ever-growing sequence.
CREATE SEQUENCE operation_fence AS BIGINT MINVALUE 1;

CREATE TABLE operations (
    operation_id            UUID PRIMARY KEY,
    tenant_id               BIGINT NOT NULL REFERENCES tenants (tenant_id),
    operation               TEXT COLLATE "C" NOT NULL,
    idempotency_key         TEXT COLLATE "C" NOT NULL,
    fingerprint             BYTEA NOT NULL CHECK (length(fingerprint) = 32),
    state                   TEXT NOT NULL CHECK (state IN
                              ('in_progress', 'succeeded', 'failed', 'retry_wait', 'unknown', 'expired')),
    fence                   BIGINT NOT NULL,
    attempt                 INTEGER NOT NULL CHECK (attempt >= 1),
    max_attempts            INTEGER NOT NULL CHECK (max_attempts >= 1),
    claim_token             BYTEA NOT NULL DEFAULT '\x',
    taken_over_state        TEXT,
    taken_over_fence        BIGINT,
    lease_ms                BIGINT NOT NULL,
    max_attempt_duration_ms BIGINT NOT NULL,
    retention_ms            BIGINT NOT NULL,
    lease_expires_at        TIMESTAMPTZ,
    attempt_deadline_at     TIMESTAMPTZ,
    retry_at                TIMESTAMPTZ,
    operation_deadline_at   TIMESTAMPTZ,
    outcome_state           TEXT CHECK (outcome_state IN ('succeeded', 'failed')),
    result_body             BYTEA,
    result_content_type     TEXT,
    result_metadata         JSONB,
    failure_reason          TEXT,
    error_code              TEXT,
    error_message           TEXT,
    error_metadata          JSONB,
    last_write_fence        BIGINT,
    last_write_digest       BYTEA,
    last_write_by           TEXT CHECK (last_write_by IN ('owner', 'reconciler')),
    created_at              TIMESTAMPTZ NOT NULL,
    updated_at              TIMESTAMPTZ NOT NULL,
    completed_at            TIMESTAMPTZ,
    retain_until            TIMESTAMPTZ,
    -- The answer a write got, kept with its receipt so that a re-sent write
    -- gets that same answer however the record moved on since.
    last_write_state        TEXT,
    last_write_failure      TEXT,
    last_write_retry_at     TIMESTAMPTZ,
    last_write_answer_fence BIGINT,
    -- A takeover keeps the replaced attempt's deadline, which the new
    -- attempt's overwrites in attempt_deadline_at, so that ReconcileFirst can
    -- say how long that attempt's effect may still be in flight
    -- (previous_attempt_deadline). NULL: no takeover.
    taken_over_deadline_at  TIMESTAMPTZ,
    -- One row per scope: concurrent first claims are settled here.
    CONSTRAINT operations_scope UNIQUE (tenant_id, operation, idempotency_key),
    CONSTRAINT terminal_has_outcome CHECK (state NOT IN ('succeeded', 'failed') OR outcome_state = state)
) WITH (fillfactor = 70); -- room for in-place (HOT) updates of the hot row

-- Feeds ListUnresolved and the unresolved gauge: unresolved candidates only.
CREATE INDEX operations_unresolved ON operations (tenant_id, created_at, operation_id)
    WHERE state IN ('in_progress', 'unknown');
-- Feed the sweeper: terminal rows and tombstones by retention, retries by deadline.
CREATE INDEX operations_retention ON operations (retain_until)
    WHERE state IN ('succeeded', 'failed', 'expired');
CREATE INDEX operations_retry_deadline ON operations (operation_deadline_at)
    WHERE state = 'retry_wait' AND operation_deadline_at IS NOT NULL;
-- Every RETRY_WAIT row, so that counting them (a gauge) never reads the whole
-- table.
CREATE INDEX operations_retry_wait ON operations (retry_at)
    WHERE state = 'retry_wait';

CREATE TABLE operation_history (
    operation_id UUID NOT NULL REFERENCES operations (operation_id) ON DELETE CASCADE,
    sequence     INTEGER NOT NULL,
    event        TEXT NOT NULL,
    from_state   TEXT,
    to_state     TEXT NOT NULL,
    fence        BIGINT NOT NULL,
    attempt      INTEGER NOT NULL,
    detail       TEXT NOT NULL DEFAULT '',
    count        BIGINT NOT NULL DEFAULT 1,
    first_at     TIMESTAMPTZ NOT NULL,
    last_at      TIMESTAMPTZ NOT NULL,
    -- History coalescing compares one key that the domain computes for each
    -- new entry (NewHistoryEntry::coalesce_key): an entry whose key equals
    -- the key of the operation's last entry is counted into it. NULL never
    -- coalesces.
    coalesce_key TEXT,
    -- Refusals coalesce per (event, RPC) whatever the fence, so an entry
    -- keeps the first refused fence (fence) and the last (last_fence). NULL:
    -- the entry's own fence. `sequence` stays int4: the history cap (at most
    -- 10000 + 4 entries) bounds it.
    last_fence   BIGINT,
    PRIMARY KEY (operation_id, sequence)
);
