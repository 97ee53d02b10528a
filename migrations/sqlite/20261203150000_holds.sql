-- Holds (issue 23, item 3): an administrator stops new owners of one
-- operation name of a tenant (operation = '' holds the whole tenant). As in
-- Postgres.
CREATE TABLE holds (
    tenant_id      INTEGER NOT NULL REFERENCES tenants (tenant_id),
    operation      TEXT NOT NULL,
    reason         TEXT NOT NULL,
    retry_after_ms INTEGER NOT NULL,
    held_at        TEXT NOT NULL,
    held_by        TEXT NOT NULL,
    PRIMARY KEY (tenant_id, operation)
) STRICT;
