-- Identity (API tokens with roles), the append-only audit log, and run triggers (schedules,
-- dry runs). Never edit this file once it has been released: add a new numbered file instead.
--
-- Timestamps are INTEGER milliseconds since the Unix epoch (UTC); JSON is stored as TEXT.

-- Bearer tokens. Only the sha256 of a token is kept; the token itself is shown once, when it
-- is created.
CREATE TABLE api_tokens (
    id         INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL UNIQUE,
    role       TEXT    NOT NULL CHECK (role IN ('viewer', 'approver', 'admin')),
    -- sha256 of the token, hex.
    token_hash TEXT    NOT NULL UNIQUE,
    -- 'api': created with POST /api/v1/tokens; 'bootstrap': the admin token generated on the
    -- first start; 'env': REBALANCER_ADMIN_TOKEN (replaced at every start while it is set,
    -- removed at a start without it).
    origin     TEXT    NOT NULL CHECK (origin IN ('api', 'bootstrap', 'env')),
    -- Name of the token that created this one (NULL for 'bootstrap' and 'env').
    created_by TEXT,
    created_at INTEGER NOT NULL
);

-- Who did what to which object, when. Append-only: the triggers below refuse UPDATE and
-- DELETE, so history cannot be rewritten through SQL either.
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY,
    at          INTEGER NOT NULL,
    -- The token that acted (kept by value: the token may be deleted later). NULL id for the
    -- server itself (e.g. a scheduled run).
    actor_id    INTEGER,
    actor_name  TEXT    NOT NULL,
    actor_role  TEXT    NOT NULL,
    -- e.g. 'policy.upload', 'decision.approve', 'token.delete'.
    action      TEXT    NOT NULL,
    -- e.g. 'policy', 'decision', 'token'.
    object_kind TEXT    NOT NULL,
    -- The object's id or name.
    object_id   TEXT,
    -- Extra facts as a JSON object (comment, counts, …), or NULL.
    detail      TEXT
);
CREATE INDEX audit_log_by_actor ON audit_log (actor_name, id);
CREATE INDEX audit_log_by_action ON audit_log (action, id);
CREATE INDEX audit_log_by_kind ON audit_log (object_kind, id);
CREATE INDEX audit_log_by_time ON audit_log (at);

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

-- Runs started automatically: periodically (interval_seconds) and/or after the cluster's state
-- changed (on_change, debounced). Cluster and profile are kept by name, like runs.
CREATE TABLE schedules (
    id                INTEGER PRIMARY KEY,
    cluster           TEXT    NOT NULL,
    profile           TEXT    NOT NULL,
    -- NULL: no periodic runs.
    interval_seconds  INTEGER CHECK (interval_seconds IS NULL OR interval_seconds >= 1),
    on_change         INTEGER NOT NULL CHECK (on_change IN (0, 1)),
    -- Quiet time after the last change before an on-change run starts.
    debounce_seconds  INTEGER NOT NULL CHECK (debounce_seconds >= 0),
    dry_run           INTEGER NOT NULL CHECK (dry_run IN (0, 1)),
    enabled           INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    -- When this schedule last started a run (the next periodic run is due an interval later;
    -- NULL: due now).
    last_triggered_at INTEGER,
    -- The cluster revision the last run of this schedule evaluated: an on-change run is due
    -- when the cluster's revision differs.
    last_revision     INTEGER,
    last_run_id       INTEGER,
    -- Why the last attempt did not start a run (e.g. the profile was deleted), or NULL.
    last_error        TEXT,
    CHECK (interval_seconds IS NOT NULL OR on_change = 1)
);

-- What started a run. A dry run's decisions can never be approved or executed.
ALTER TABLE runs ADD COLUMN dry_run INTEGER NOT NULL DEFAULT 0 CHECK (dry_run IN (0, 1));
ALTER TABLE runs ADD COLUMN triggered_by TEXT NOT NULL DEFAULT 'manual'
    CHECK (triggered_by IN ('manual', 'schedule', 'change'));
-- The schedule that started it (no foreign key: history outlives the schedule).
ALTER TABLE runs ADD COLUMN schedule_id INTEGER;
