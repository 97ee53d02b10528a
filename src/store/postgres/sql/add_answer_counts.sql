-- Adds one replica's counts of replays and Pending answers, counted in
-- memory since its last flush, to their operations: one statement for the
-- whole batch, its members as arrays side by side (operation_id, replays,
-- pendings, and how many milliseconds before this statement the last
-- counted replay was answered, NULL when none was). The last replay's time
-- is placed on this statement's clock, so no replica's wall clock is
-- compared with the database's; GREATEST ignores NULL and keeps the later
-- of two replicas' times. It sets these three columns only: not the state,
-- fence, lease or updated_at, so an owner's fence-guarded write still holds
-- after it, and that write, which sets only its own columns, never
-- overwrites a count. Operations swept away since are skipped.
UPDATE operations AS o
   SET replays = o.replays + c.replays,
       pendings = o.pendings + c.pendings,
       last_replay_at = GREATEST(
           o.last_replay_at,
           clock_timestamp() - c.ago_ms * INTERVAL '1 millisecond')
  FROM unnest($1::uuid[], $2::int8[], $3::int8[], $4::int8[])
       AS c(operation_id, replays, pendings, ago_ms)
 WHERE o.operation_id = c.operation_id
