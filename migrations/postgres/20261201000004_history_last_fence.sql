-- idemd schema, version 5 (expand only: binaries of version 4 keep running).
-- Refusals coalesce per (event, RPC) whatever the fence, so an entry keeps
-- the first refused fence (fence) and the last (last_fence). NULL: the
-- entry's own fence (nothing coalesced across fences, or written by an
-- earlier binary, which never coalesces across fences).
ALTER TABLE operation_history ADD COLUMN last_fence BIGINT;
