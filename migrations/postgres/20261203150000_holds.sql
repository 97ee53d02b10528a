-- Holds (issue 23, item 3): an administrator stops new owners of one
-- operation name of a tenant (operation = '' holds the whole tenant) while
-- the unresolved operations are drained; replays, owner writes and
-- reconciliation go on. Each replica reads the table every second or so;
-- every hold and release is audited with it. Expand only: a binary that
-- predates it never reads it (it does not hold).
CREATE TABLE holds (
    tenant_id      BIGINT NOT NULL REFERENCES tenants (tenant_id),
    operation      TEXT COLLATE "C" NOT NULL,
    reason         TEXT NOT NULL,
    retry_after_ms BIGINT NOT NULL,
    held_at        TIMESTAMPTZ NOT NULL,
    held_by        TEXT NOT NULL,
    PRIMARY KEY (tenant_id, operation)
);
