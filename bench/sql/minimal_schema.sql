-- The minimal SQL ceiling's table: the least durable state any correct
-- implementation of Claim + Complete must keep. This is NOT idemd's schema
-- (that is migrations/postgres/; its own SQL ceiling is
-- pgbench_claim_complete.sql on idemd's own tables): one table keyed by the
-- scope, no surrogate (UUID) key, no history table, no other index.
--
-- What a correct implementation cannot leave out: the scope as the unique key
-- (the database settles racing claims), the state, the request's fingerprint
-- (a reused key with another payload must be refused), a fence (a holder that
-- lost its lease must not complete), the lease's deadline (a crashed holder's
-- claim must be taken over), the result (a replay returns it) and when the
-- record was made and last changed (retention).
--
-- bench/run creates it in a schema of its own in the idemd store's database,
-- so it shares the server, the disk and the WAL with the cells it is set
-- against, and preloads it (minimal_preload.sql) with as many completed
-- records as idemd's table holds.
CREATE SCHEMA minimal;

CREATE TABLE minimal.operations (
    tenant_id        bigint NOT NULL,
    operation        text COLLATE "C" NOT NULL,
    idempotency_key  text COLLATE "C" NOT NULL,
    state            text NOT NULL,
    fingerprint      bytea NOT NULL,
    fence            bigint NOT NULL,
    lease_expires_at timestamptz,
    result           bytea,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, operation, idempotency_key)
);
