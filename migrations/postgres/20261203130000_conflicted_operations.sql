-- The console's conflicts page and `is:conflicted` listings (issue 20):
-- without these, ListOperations finds the few conflicted operations by
-- reading a tenant's every row (or, for an admin, the whole created_at
-- index) and filtering `conflicts > 0`. Partial indexes on columns that
-- never change, holding the conflicted operations only: an owner's write,
-- which changes neither `conflicts` nor these columns, stays a HOT update;
-- only counting a refused conflicting Claim (already the locked path) may
-- write an index entry. The listing writes `conflicts > 0` as a literal, so
-- the planner proves the predicate. Expand only.
--
-- Plain CREATE INDEX blocks writes to `operations` while it builds (a scan
-- of the table; the indexes themselves are small). On a large table, create
-- them beforehand with CREATE INDEX CONCURRENTLY under the same names: IF
-- NOT EXISTS then makes this migration a no-op.
CREATE INDEX IF NOT EXISTS operations_conflicted
    ON operations (tenant_id, created_at, operation_id) WHERE conflicts > 0;
CREATE INDEX IF NOT EXISTS operations_conflicted_all
    ON operations (created_at, operation_id) WHERE conflicts > 0;
