-- Approval and pod migrations: who moved a decision along its life, auto-approve rules per
-- profile, the arbitration knobs, and the pod migrations with every step they took.
--
-- Timestamps are INTEGER milliseconds since the Unix epoch (UTC); JSON is stored as TEXT.

-- Why a decision ended where it did (e.g. "stale: pod shop/web-1 is now on node n2"), for
-- `expired`, `failed` and `rejected` decisions; NULL otherwise.
ALTER TABLE decisions ADD COLUMN status_reason TEXT;

-- Every status change of a decision: who did it, when, and the comment they gave.
-- `actor` is a token name (`alice`), `auto-approve:<rule>`, or `system:<what>` (expiry, executor).
CREATE TABLE decision_events (
    id          INTEGER PRIMARY KEY,
    decision_id INTEGER NOT NULL REFERENCES decisions (id),
    from_status TEXT    NOT NULL,
    to_status   TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    comment     TEXT,
    time        INTEGER NOT NULL
);
CREATE INDEX decision_events_by_decision ON decision_events (decision_id, id);

-- Auto-approve rules of a profile: a JSON array of {name, plugins, namespaces, podSelector}.
-- Kept beside the profile (not inside its DeschedulerPolicy document, which stays exactly what
-- the user sent).
CREATE TABLE profile_auto_approve (
    profile    TEXT    PRIMARY KEY REFERENCES profiles (name) ON DELETE CASCADE,
    rules      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);

-- The arbitration knobs (Koordinator's MigrationControllerArgs subset) as JSON; one row at most.
-- No row means the defaults.
CREATE TABLE arbitration_config (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    config     TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);

-- One pod migration per approved decision (Koordinator's PodMigrationJob).
CREATE TABLE pod_migrations (
    id             INTEGER PRIMARY KEY,
    decision_id    INTEGER NOT NULL REFERENCES decisions (id),
    cluster        TEXT    NOT NULL,
    pod_uid        TEXT    NOT NULL,
    pod_namespace  TEXT    NOT NULL,
    pod_name       TEXT    NOT NULL,
    mode           TEXT    NOT NULL CHECK (mode IN ('ReservationFirst', 'EvictDirectly')),
    phase          TEXT    NOT NULL CHECK (phase IN ('Pending', 'Running', 'Succeeded', 'Failed',
                                                      'Aborted')),
    -- Where the state machine stands (executor-internal, see executor::machine::Step).
    step           TEXT    NOT NULL,
    -- Koordinator's `status`: the type of the last condition set, or `Complete`.
    status         TEXT    NOT NULL,
    reason         TEXT    NOT NULL,
    message        TEXT    NOT NULL,
    source_node    TEXT    NOT NULL,
    target_node    TEXT,
    -- Name of the reservation (set, and persisted, before it is created).
    reservation    TEXT,
    -- 1 once the reservation has been released (abort, failure, replacement elsewhere).
    reservation_released INTEGER NOT NULL DEFAULT 0 CHECK (reservation_released IN (0, 1)),
    -- The replacement pod (bound into the reservation, or landed elsewhere).
    new_pod_uid    TEXT,
    new_pod_name   TEXT,
    new_pod_node   TEXT,
    -- The pod's controller, for the per-workload limits (kind/name/uid), when it has one.
    workload       TEXT,
    ttl_ms         INTEGER NOT NULL,
    -- When arbitration admitted it (the TTL counts from here).
    started_at     INTEGER,
    -- Write-ahead marker: set before the eviction call, so a restart knows it may have happened.
    eviction_requested_at INTEGER,
    -- Set once the eviction is confirmed (feeds the object limiters after a restart).
    evicted_at     INTEGER,
    finished_at    INTEGER,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
-- A decision is executed at most once, whatever races the approval.
CREATE UNIQUE INDEX pod_migrations_one_per_decision ON pod_migrations (decision_id);
CREATE INDEX pod_migrations_by_phase ON pod_migrations (phase, id);

-- What happened to a pod migration, in order (Koordinator's events on the job).
CREATE TABLE pod_migration_events (
    id               INTEGER PRIMARY KEY,
    pod_migration_id INTEGER NOT NULL REFERENCES pod_migrations (id),
    time             INTEGER NOT NULL,
    type             TEXT    NOT NULL CHECK (type IN ('Normal', 'Warning')),
    reason           TEXT    NOT NULL,
    message          TEXT    NOT NULL
);
CREATE INDEX pod_migration_events_by_migration ON pod_migration_events (pod_migration_id, id);
