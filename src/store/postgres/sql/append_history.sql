-- Appends one history entry, or counts it into the operation's last entry,
-- in one statement: the locked path's history write.
--
-- Mirror of HistoryCap::place (crates/idemd-domain/src/model.rs): count into the last
-- entry when the keys match (or the cap is reached and the last entry is the
-- truncation marker), else append the entry while there is room (or it is
-- kept past the cap), else append the truncation marker. Tested by
-- store::mirror_tests::history on a real database.
--
-- Parameters, by number: 1 operation_id, 2 event, 3 from_state, 4 to_state,
-- 5 fence, 6 attempt, 7 detail, 8 now, 9 its coalesce key, 10 whether it is
-- kept past the cap, 11 the cap, and the truncation marker's 12 event,
-- 13 detail and 14 key; 15 the credential that acted (NULL: an owner or the
-- sweeper) and 16 whether it was an admin on the tenant's behalf, kept on
-- the entry itself only (never on a truncation marker).
WITH last AS (
    SELECT sequence, coalesce_key FROM operation_history
    WHERE operation_id = $1 ORDER BY sequence DESC LIMIT 1
), placed AS (
    SELECT COALESCE((SELECT sequence FROM last), 0) AS last_sequence,
        CASE WHEN (SELECT coalesce_key FROM last) = $9 THEN 'count'
             WHEN $10 OR COALESCE((SELECT sequence FROM last), 0) < $11 - 1
                 THEN 'append'
             WHEN (SELECT coalesce_key FROM last) = $14 THEN 'count'
             ELSE 'marker' END AS placement
), coalesced AS (
    UPDATE operation_history AS history SET
        count = history.count + 1,
        last_at = $8, last_fence = $5, to_state = $4, attempt = $6
    FROM placed
    WHERE history.operation_id = $1 AND history.sequence = placed.last_sequence
      AND placed.placement = 'count'
)
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state,
    fence, attempt, detail, count, first_at, last_at, coalesce_key, acted_by, admin_on_behalf)
SELECT $1, last_sequence + 1,
    CASE WHEN placement = 'append' THEN $2 ELSE $12 END, $3, $4, $5, $6,
    CASE WHEN placement = 'append' THEN $7 ELSE $13 END, 1, $8, $8,
    CASE WHEN placement = 'append' THEN $9 ELSE $14 END,
    CASE WHEN placement = 'append' THEN CAST($15 AS TEXT) END,
    placement = 'append' AND CAST($16 AS BOOLEAN)
FROM placed WHERE placement <> 'count'
