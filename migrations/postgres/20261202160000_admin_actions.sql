-- Who reconciled or forgot an operation (issue 20 item 4): each history
-- entry of a reconciliation or a Forget names the credential that made it
-- (`token:NAME`, `certificate:IDENTITY`: never a secret) and whether it was an
-- admin acting on another tenant's behalf. Expand only: both columns are
-- nullable or have a default, so a binary that predates this migration keeps
-- appending history during a rolling upgrade (its entries name no
-- credential). Adding a nullable column, or one with a constant default,
-- rewrites nothing in Postgres 11 and later.
ALTER TABLE operation_history ADD COLUMN acted_by TEXT;
ALTER TABLE operation_history ADD COLUMN admin_on_behalf BOOLEAN NOT NULL DEFAULT FALSE;
