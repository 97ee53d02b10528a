-- Who reconciled or forgot an operation (issue 20 item 4): each history
-- entry of a reconciliation or a Forget names the credential that made it
-- (`token:NAME`, `certificate:IDENTITY`: never a secret) and whether it was an
-- admin acting on another tenant's behalf. Expand only, as in Postgres; the
-- table is STRICT, so the flag is an INTEGER (0 or 1).
ALTER TABLE operation_history ADD COLUMN acted_by TEXT;
ALTER TABLE operation_history ADD COLUMN admin_on_behalf INTEGER NOT NULL DEFAULT 0;
