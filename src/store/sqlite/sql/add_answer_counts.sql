-- Adds one replica's counts of replays and Pending answers to one operation
-- (the flush runs it per operation in one write transaction: see
-- migrations/postgres/20261203120000_answer_counts.sql and the Postgres
-- statement of the same name). $4: the last counted replay's time on the
-- database clock, or NULL; stamps have one width and sort as time, so the
-- later of two is the greater text. It sets these three columns only.
UPDATE operations
   SET replays = replays + $2,
       pendings = pendings + $3,
       last_replay_at = CASE
           WHEN $4 IS NULL THEN last_replay_at
           WHEN last_replay_at IS NULL OR last_replay_at < $4 THEN $4
           ELSE last_replay_at END
 WHERE operation_id = $1
