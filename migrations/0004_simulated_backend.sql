-- The simulated backend's event log: what its scheduler and controllers did to a cluster's
-- objects (reservations placed and released, pods evicted, replacements created and bound).
-- Kept by cluster name, like runs, so the history survives a snapshot push or the cluster's
-- deletion. Reservations themselves are cluster objects (kind `Reservation`).
CREATE TABLE simulated_events (
    id          INTEGER PRIMARY KEY,
    cluster     TEXT    NOT NULL,
    time_ms     INTEGER NOT NULL,
    -- 'ReservationScheduled', 'ReservationReleased', 'Evicted', 'ReplacementCreated'.
    reason      TEXT    NOT NULL,
    -- The pod concerned (the evicted one for 'Evicted' and 'ReplacementCreated').
    pod_uid     TEXT,
    namespace   TEXT,
    pod_name    TEXT,
    node        TEXT,
    -- 'ReplacementCreated': the new pod.
    replacement_uid TEXT,
    reservation TEXT,
    message     TEXT    NOT NULL
);
CREATE INDEX simulated_events_by_cluster ON simulated_events (cluster, id);
-- A pod is evicted at most once: the executor's crash safety leans on this.
CREATE UNIQUE INDEX simulated_events_one_eviction
    ON simulated_events (cluster, pod_uid) WHERE reason = 'Evicted';
CREATE UNIQUE INDEX simulated_events_one_replacement
    ON simulated_events (cluster, pod_uid) WHERE reason = 'ReplacementCreated';
