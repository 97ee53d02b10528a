-- Appends a history entry that HistoryCap::place appends as itself whatever
-- the last entry is (NewHistoryEntry::appended_whatever_the_last: no coalesce
-- key, kept past the cap): at the next sequence, counted once. It follows the
-- guarded UPDATE in one query (GUARDED_UPDATE_THEN_APPEND), so that the
-- locked path's write and its entry are one hand-off to the writer's thread;
-- append_history.sql with such an entry writes the same row. Tested by
-- store::mirror_tests::history.
--
-- Parameters, by number: 1 operation_id (the UPDATE's), 35 event,
-- 36 from_state, 37 to_state, 38 fence, 39 attempt, 40 detail, 41 now,
-- 42 the credential that acted (NULL: an owner or the sweeper), 43 whether it
-- was an admin on the tenant's behalf.
INSERT INTO operation_history (operation_id, sequence, event, from_state, to_state,
    fence, attempt, detail, count, first_at, last_at, coalesce_key, acted_by, admin_on_behalf)
SELECT $1, COALESCE(max(sequence), 0) + 1, $35, $36, $37, $38, $39, $40, 1, $41, $41, NULL,
    $42, $43
FROM operation_history WHERE operation_id = $1
