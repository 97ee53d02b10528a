-- The console's conflicts page and `is:conflicted` listings: see
-- migrations/postgres. The same partial indexes, under the same names.
CREATE INDEX IF NOT EXISTS operations_conflicted
    ON operations (tenant_id, created_at, operation_id) WHERE conflicts > 0;
CREATE INDEX IF NOT EXISTS operations_conflicted_all
    ON operations (created_at, operation_id) WHERE conflicts > 0;
