-- idemd schema for the embedded SQLite store, version 7: nothing to change.
-- Postgres widens the history count beside its int4 column (count_total);
-- SQLite's INTEGER columns are 64-bit already. Kept so both stores share
-- version numbers.
SELECT 1;
