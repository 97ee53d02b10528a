-- Appends one history entry once count_into_last_history_entry.sql counted
-- nothing: the entry itself while the history has room (or the entry is
-- kept past the cap), the truncation marker otherwise. With that statement,
-- a mirror of HistoryCap::place (crates/idemd-domain/src/model.rs); tested by
-- store::mirror_tests::history.
--
-- Parameters, by number: 1 operation_id, 2 event, 3 from_state, 4 to_state,
-- 5 fence, 6 attempt, 7 detail, 8 now, 9 its coalesce key, 10 whether it is
-- kept past the cap, 11 the cap, and the truncation marker's 12 event,
-- 13 detail and 14 key; 15 the credential that acted (NULL: an owner or the
-- sweeper) and 16 whether it was an admin on the tenant's behalf, kept on
-- the entry itself only (never on a truncation marker).
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state,
    fence, attempt, detail, count, first_at, last_at, coalesce_key, acted_by, admin_on_behalf)
SELECT $1, COALESCE(max(sequence), 0) + 1,
    CASE WHEN $10 OR COALESCE(max(sequence), 0) < $11 - 1 THEN $2 ELSE $12 END,
    $3, $4, $5, $6,
    CASE WHEN $10 OR COALESCE(max(sequence), 0) < $11 - 1 THEN $7 ELSE $13 END,
    1, $8, $8,
    CASE WHEN $10 OR COALESCE(max(sequence), 0) < $11 - 1 THEN $9 ELSE $14 END,
    CASE WHEN $10 OR COALESCE(max(sequence), 0) < $11 - 1 THEN $15 END,
    CASE WHEN $10 OR COALESCE(max(sequence), 0) < $11 - 1 THEN $16 ELSE 0 END
FROM operation_history WHERE operation_id = $1
