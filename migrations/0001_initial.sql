-- Rebalancer schema, first version.
-- Applied by `store::MIGRATOR` at start-up and in tests. Never edit this file once it has been
-- released: add a new numbered file instead.
--
-- Timestamps are INTEGER milliseconds since the Unix epoch (UTC); JSON is stored as TEXT.

-- One row per cluster Rebalancer knows. `revision` changes every time the cluster's state is
-- replaced; `snapshot_time_ms` is the clock policies see for that state.
CREATE TABLE clusters (
    id               INTEGER PRIMARY KEY,
    name             TEXT    NOT NULL UNIQUE,
    -- 'simulated' for now; 'kubernetes' comes with the Kubernetes backend.
    backend          TEXT    NOT NULL,
    revision         INTEGER NOT NULL,
    snapshot_time_ms INTEGER NOT NULL,
    node_count       INTEGER NOT NULL,
    pod_count        INTEGER NOT NULL,
    object_count     INTEGER NOT NULL,
    -- {"Node": 20, "Pod": 300, ...}
    counts           TEXT    NOT NULL,
    -- ["pod default/x is bound to node n-9, which is not in the snapshot", ...]
    warnings         TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);

-- The Kubernetes objects of a cluster's current state, in ingest order (`id`).
CREATE TABLE cluster_objects (
    id          INTEGER PRIMARY KEY,
    cluster_id  INTEGER NOT NULL REFERENCES clusters (id) ON DELETE CASCADE,
    kind        TEXT    NOT NULL,
    api_version TEXT    NOT NULL,
    -- NULL for cluster-scoped objects.
    namespace   TEXT,
    name        TEXT    NOT NULL,
    uid         TEXT,
    -- The object as JSON.
    body        TEXT    NOT NULL
);
CREATE INDEX cluster_objects_by_kind ON cluster_objects (cluster_id, kind);

-- Policy modules: the built-ins (re-registered from the binary at every start) and uploads.
CREATE TABLE policies (
    name        TEXT    PRIMARY KEY,
    version     TEXT    NOT NULL,
    -- sha256 of `wasm`, hex.
    digest      TEXT    NOT NULL,
    abi_version TEXT    NOT NULL,
    builtin     INTEGER NOT NULL CHECK (builtin IN (0, 1)),
    wasm        BLOB    NOT NULL,
    -- The engine's PolicyMeta as JSON.
    metadata    TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- A profile is one DeschedulerPolicy (descheduler/v1alpha2) document.
CREATE TABLE profiles (
    name       TEXT    PRIMARY KEY,
    -- The document as the user sent it (converted to JSON when it came as YAML).
    document   TEXT    NOT NULL,
    -- The parsed, normalised ProfileSpec a run evaluates.
    spec       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

-- One evaluation of a profile over one cluster revision. Cluster and profile are kept by name so
-- history survives their deletion.
CREATE TABLE runs (
    id               INTEGER PRIMARY KEY,
    cluster          TEXT    NOT NULL,
    cluster_revision INTEGER NOT NULL,
    profile          TEXT    NOT NULL,
    status           TEXT    NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
    started_at       INTEGER NOT NULL,
    finished_at      INTEGER,
    -- The run report (per-policy outcome, timings) as JSON, once finished.
    report           TEXT,
    -- Why the run failed, when it did.
    error            TEXT
);

-- Every proposal of a run, and its life afterwards (approval, pod migration).
CREATE TABLE decisions (
    id            INTEGER PRIMARY KEY,
    run_id        INTEGER NOT NULL REFERENCES runs (id),
    cluster       TEXT    NOT NULL,
    profile       TEXT    NOT NULL,
    -- The name of the DeschedulerPolicy profiles[] entry that proposed it.
    plugin_set    TEXT    NOT NULL,
    plugin        TEXT    NOT NULL,
    pod_uid       TEXT    NOT NULL,
    pod_namespace TEXT    NOT NULL,
    pod_name      TEXT    NOT NULL,
    -- The node the pod was on when proposed.
    node          TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    status        TEXT    NOT NULL CHECK (status IN ('proposed', 'approved', 'rejected', 'expired',
                                                     'executing', 'succeeded', 'failed')),
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX decisions_by_run ON decisions (run_id);
CREATE INDEX decisions_by_status ON decisions (status, id);
