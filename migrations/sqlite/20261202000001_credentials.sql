-- Credentials apart from tenants (issue 19): each token gets a name, a set of
-- scopes, an optional expiry and a last-used time; admin actions go to an
-- audit log. Expand only: every new column is nullable or has a default, so
-- a binary that predates this migration keeps reading and inserting tokens
-- during a rolling upgrade (what it inserts gets today's scopes and, until a
-- later migration names it, lists as unnamed).

ALTER TABLE tenant_tokens ADD COLUMN name TEXT;
-- Comma-separated scope names (src/auth/scopes.rs); the default is what every
-- token could do before scopes existed.
ALTER TABLE tenant_tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT 'operations,reconcile';
ALTER TABLE tenant_tokens ADD COLUMN expires_at TEXT;
-- Written at most once a minute per replica (src/auth/mod.rs), not per call.
ALTER TABLE tenant_tokens ADD COLUMN last_used_at TEXT;

-- The tokens a tenant already holds keep working and get names: its first
-- (oldest) token `initial`, the next ones `token-2`, `token-3`, ...
UPDATE tenant_tokens SET name = (
    SELECT CASE WHEN count(*) = 1 THEN 'initial' ELSE 'token-' || count(*) END
    FROM tenant_tokens AS earlier
    WHERE earlier.tenant_id = tenant_tokens.tenant_id
      AND (earlier.created_at < tenant_tokens.created_at
           OR (earlier.created_at = tenant_tokens.created_at
               AND earlier.token_sha256 <= tenant_tokens.token_sha256))
);

-- A name is unique among a tenant's active tokens: revoke by name, rotate by
-- creating a new name and revoking the old one.
CREATE UNIQUE INDEX tenant_tokens_active_name ON tenant_tokens (tenant_id, name)
    WHERE revoked_at IS NULL;

-- Who did what to which tenant and credential, and why: never a secret.
-- Pruned by the sweeper past IDEMD_AUDIT_RETENTION (400 days by default).
CREATE TABLE audit_log (
    audit_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    at         TEXT NOT NULL,
    -- `cli:USER@HOST` for the command line, `token:NAME` or
    -- `certificate:IDENTITY` for a call.
    actor      TEXT NOT NULL,
    action     TEXT NOT NULL,
    tenant     TEXT,
    target     TEXT,
    detail     TEXT,
    reason     TEXT
) STRICT;
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_tenant ON audit_log (tenant, at);
