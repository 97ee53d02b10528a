-- idemd schema, version 2 (expand only: binaries of version 1 keep running).
-- History coalescing compares one key that the domain computes for each new
-- entry (NewHistoryEntry::coalesce_key): an entry whose key equals the key of
-- the operation's last entry is counted into it. NULL never coalesces, so rows
-- written before this column existed, and every transition, stand alone.
ALTER TABLE operation_history ADD COLUMN coalesce_key TEXT;
