-- Clusters kept apart in arbitration, and least-privilege tokens (issue #14, items 2 and 4):
-- a cluster's own arbitration knobs, the `operator` role, and token expiry.
--
-- Timestamps are INTEGER milliseconds since the Unix epoch (UTC); JSON is stored as TEXT.

-- A cluster's own arbitration knobs (a whole MigrationControllerArgs document, as JSON). A
-- cluster without a row follows the global knobs of `arbitration_config`. Deleting the cluster
-- deletes its knobs.
CREATE TABLE cluster_arbitration_config (
    cluster_id INTEGER PRIMARY KEY REFERENCES clusters (id) ON DELETE CASCADE,
    config     TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);

-- api_tokens again, with the `operator` role in its CHECK and an optional expiry. SQLite cannot
-- change a CHECK constraint in place: the table is rebuilt and its rows copied (no other table
-- references it).
CREATE TABLE api_tokens_new (
    id         INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL UNIQUE,
    role       TEXT    NOT NULL CHECK (role IN ('viewer', 'approver', 'operator', 'admin')),
    -- sha256 of the token, hex.
    token_hash TEXT    NOT NULL UNIQUE,
    -- 'api': created with POST /api/v1/tokens; 'bootstrap': the admin token generated on the
    -- first start; 'env': REBALANCER_ADMIN_TOKEN (replaced at every start while it is set,
    -- removed at a start without it).
    origin     TEXT    NOT NULL CHECK (origin IN ('api', 'bootstrap', 'env')),
    -- Name of the token that created this one (NULL for 'bootstrap' and 'env').
    created_by TEXT,
    created_at INTEGER NOT NULL,
    -- From this instant on the token is refused (401 token_expired); NULL: it never expires.
    expires_at INTEGER
);
INSERT INTO api_tokens_new (id, name, role, token_hash, origin, created_by, created_at)
    SELECT id, name, role, token_hash, origin, created_by, created_at FROM api_tokens;
DROP TABLE api_tokens;
ALTER TABLE api_tokens_new RENAME TO api_tokens;
