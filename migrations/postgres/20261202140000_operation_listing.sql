-- Indexes for ListOperations (issue 20), so that support staff's searches
-- read a page's worth of index entries, not the whole table. Expand only.
-- Each index is on columns that never change after the insert (tenant_id,
-- created_at, operation_id, idempotency_key), so updates of the hot row stay
-- HOT and only inserts pay for them.
--
-- Plain CREATE INDEX blocks writes to `operations` while it builds. On a
-- large table, create them beforehand with CREATE INDEX CONCURRENTLY under
-- the same names: IF NOT EXISTS then makes this migration a no-op.

-- One tenant's operations in created_at order, either way (a B-tree reads
-- backwards for newest first), continuing after a page token's
-- (created_at, operation_id); `age` terms are ranges of it. Every filter of
-- a non-admin credential starts with the tenant, so this is the default
-- plan. (operations_unresolved has the same columns but only unresolved rows.)
CREATE INDEX IF NOT EXISTS operations_tenant_created
    ON operations (tenant_id, created_at, operation_id);

-- `key:` without `op:`: the scope constraint (tenant_id, operation,
-- idempotency_key) serves `op:` terms, exact or prefix (a range of its second
-- column), but a key alone would read every row of the tenant. It ends with
-- `operation` so that it holds the scope's three columns too: the hot
-- statements' plans, made once on a possibly empty table, may pick it for a
-- scope and still reach the scope's one row through all three (with
-- (tenant_id, idempotency_key) alone they read every operation of that key;
-- store/postgres/batched.rs tests the plans).
CREATE INDEX IF NOT EXISTS operations_tenant_key
    ON operations (tenant_id, idempotency_key, operation);

-- An admin's listing of every tenant, in created_at order: without it, the
-- first page of an unfiltered listing sorts the whole table.
CREATE INDEX IF NOT EXISTS operations_created
    ON operations (created_at, operation_id);
