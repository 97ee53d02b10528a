-- idemd schema for the embedded SQLite store, version 1: the first schema any
-- release carries (the migrations written before were squashed into it; see
-- migrations/postgres). INTEGER columns are 64-bit: history counts need no
-- second column here.
-- The same tables, columns and meanings as migrations/postgres; only the types
-- differ. Migrations follow the same expand/contract rule as Postgres.
--
-- Types: ids and hashes are BLOBs (UUIDs as their 16 bytes, so they sort as
-- Postgres sorts them); timestamps are TEXT in one fixed UTC format with
-- microseconds, `YYYY-MM-DDTHH:MM:SS.ffffffZ`, written only by idemd, so that
-- text order is time order and the values keep Postgres's precision; JSON is
-- TEXT. Text compares bytewise (BINARY), like COLLATE "C" in Postgres.
-- STRICT tables refuse a value of the wrong type instead of coercing it.

CREATE TABLE tenants (
    -- AUTOINCREMENT never hands out the same id twice, even after a delete, so
    -- a revoked tenant's operations can never surface under a new tenant.
    tenant_id  INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
) STRICT;
CREATE UNIQUE INDEX tenants_active_name ON tenants (name) WHERE revoked_at IS NULL;

CREATE TABLE tenant_tokens (
    -- SHA-256 of the bearer token; the token itself is never stored.
    token_sha256 BLOB PRIMARY KEY CHECK (length(token_sha256) = 32),
    tenant_id    INTEGER NOT NULL REFERENCES tenants (tenant_id),
    created_at   TEXT NOT NULL,
    revoked_at   TEXT
) STRICT, WITHOUT ROWID;

-- Every owner draws its fence from this one ever-growing counter (Postgres:
-- the sequence operation_fence), inside the write transaction that uses it.
CREATE TABLE operation_fence (
    singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
    last_fence INTEGER NOT NULL CHECK (last_fence >= 0)
) STRICT;
INSERT INTO operation_fence (singleton, last_fence) VALUES (1, 0);

CREATE TABLE operations (
    operation_id            BLOB PRIMARY KEY CHECK (length(operation_id) = 16),
    tenant_id               INTEGER NOT NULL REFERENCES tenants (tenant_id),
    operation               TEXT NOT NULL,
    idempotency_key         TEXT NOT NULL,
    fingerprint             BLOB NOT NULL CHECK (length(fingerprint) = 32),
    state                   TEXT NOT NULL CHECK (state IN
                              ('in_progress', 'succeeded', 'failed', 'retry_wait', 'unknown', 'expired')),
    fence                   INTEGER NOT NULL,
    attempt                 INTEGER NOT NULL CHECK (attempt >= 1),
    max_attempts            INTEGER NOT NULL CHECK (max_attempts >= 1),
    claim_token             BLOB NOT NULL DEFAULT x'',
    taken_over_state        TEXT,
    taken_over_fence        INTEGER,
    lease_ms                INTEGER NOT NULL,
    max_attempt_duration_ms INTEGER NOT NULL,
    retention_ms            INTEGER NOT NULL,
    lease_expires_at        TEXT,
    attempt_deadline_at     TEXT,
    retry_at                TEXT,
    operation_deadline_at   TEXT,
    outcome_state           TEXT CHECK (outcome_state IN ('succeeded', 'failed')),
    result_body             BLOB,
    result_content_type     TEXT,
    result_metadata         TEXT CHECK (result_metadata IS NULL OR json_valid(result_metadata)),
    failure_reason          TEXT,
    error_code              TEXT,
    error_message           TEXT,
    error_metadata          TEXT CHECK (error_metadata IS NULL OR json_valid(error_metadata)),
    last_write_fence        INTEGER,
    last_write_digest       BLOB,
    last_write_by           TEXT CHECK (last_write_by IN ('owner', 'reconciler')),
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL,
    completed_at            TEXT,
    retain_until            TEXT,
    -- The answer a write got, kept with its receipt.
    last_write_state        TEXT,
    last_write_failure      TEXT,
    last_write_retry_at     TEXT,
    last_write_answer_fence INTEGER,
    -- A takeover keeps the replaced attempt's deadline (see the Postgres
    -- schema). NULL: no takeover.
    taken_over_deadline_at  TEXT,
    -- One row per scope: concurrent first claims are settled here.
    CONSTRAINT operations_scope UNIQUE (tenant_id, operation, idempotency_key),
    CONSTRAINT terminal_has_outcome CHECK (state NOT IN ('succeeded', 'failed') OR outcome_state = state)
) STRICT;

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
CREATE INDEX operations_retry_wait ON operations (retry_at) WHERE state = 'retry_wait';

CREATE TABLE operation_history (
    operation_id BLOB NOT NULL REFERENCES operations (operation_id) ON DELETE CASCADE,
    sequence     INTEGER NOT NULL,
    event        TEXT NOT NULL,
    from_state   TEXT,
    to_state     TEXT NOT NULL,
    fence        INTEGER NOT NULL,
    attempt      INTEGER NOT NULL,
    detail       TEXT NOT NULL DEFAULT '',
    count        INTEGER NOT NULL DEFAULT 1,
    first_at     TEXT NOT NULL,
    last_at      TEXT NOT NULL,
    -- Compared with the key of the operation's last entry
    -- (NewHistoryEntry::coalesce_key); NULL never coalesces.
    coalesce_key TEXT,
    -- The last fence a coalesced entry counts; NULL: the entry's own fence.
    last_fence   INTEGER,
    PRIMARY KEY (operation_id, sequence)
) STRICT, WITHOUT ROWID;
