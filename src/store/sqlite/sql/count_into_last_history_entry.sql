-- Counts one history entry into the operation's last entry, when
-- HistoryCap::place (crates/idemd-domain/src/model.rs) says so: the keys match, or the
-- cap is reached and the last entry is the truncation marker. SQLite has no
-- writable CTEs, so this is a statement of its own, run first; when it
-- counted nothing, append_history.sql appends. Together the two mirror
-- HistoryCap::place; tested by store::mirror_tests::history.
--
-- Parameters, by number: 1 operation_id, 2 the entry's coalesce key, 3 now,
-- 4 fence, 5 to_state, 6 attempt, 7 whether it is kept past the cap, 8 the
-- cap, 9 the truncation marker's key.
UPDATE operation_history SET count = count + 1, last_at = $3, last_fence = $4,
    to_state = $5, attempt = $6
WHERE operation_id = $1 AND sequence =
    (SELECT max(sequence) FROM operation_history WHERE operation_id = $1)
  AND (coalesce_key = $2
    OR (NOT $7 AND sequence >= $8 - 1 AND coalesce_key = $9))
