-- idemd schema for the embedded SQLite store, version 2 (expand only).
-- History coalescing compares one key that the domain computes for each new
-- entry (NewHistoryEntry::coalesce_key); NULL never coalesces.
ALTER TABLE operation_history ADD COLUMN coalesce_key TEXT;
