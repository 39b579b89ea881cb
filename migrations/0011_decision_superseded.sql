-- One open proposal per pod (issue #24, item 1): a run's proposal for a pod supersedes the same
-- profile's earlier open proposals for that pod in that cluster. `superseded` joins the
-- statuses, and `superseded_by` links a superseded decision to the newer one.
--
-- SQLite cannot change a CHECK constraint in place, so `decisions` is rebuilt. `pod_migrations`
-- and `decision_events` reference it (without ON DELETE actions). SQLite's documented procedure
-- (https://sqlite.org/lang_altertable.html#otheralter) switches foreign keys off, which SQLite
-- ignores inside a transaction, so the migration would have to run outside one, and a crash
-- between its commit and sqlx recording it would run it twice. Instead the checks are deferred
-- to the commit: the rows are kept aside, the table is dropped (its referencing rows become
-- orphans, counted) and made again under its own name, and putting the rows back resolves
-- every orphan (every id is kept). A reference left unresolved fails the commit, so the rebuild
-- cannot lose a row another table needs; and it is recorded in the same transaction.
PRAGMA defer_foreign_keys = ON;

CREATE TEMP TABLE decisions_rows AS SELECT * FROM decisions;
DROP TABLE decisions;

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
                                                     'superseded', 'executing', 'succeeded',
                                                     'failed')),
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    -- Why it ended where it did (`expired`, `failed`, `rejected`, `superseded` decisions).
    status_reason TEXT,
    -- The newer decision that superseded it (status `superseded`); NULL otherwise. Not a foreign
    -- key: retention may delete the newer decision first.
    superseded_by INTEGER
);
INSERT INTO decisions (id, run_id, cluster, profile, plugin_set, plugin, pod_uid,
                       pod_namespace, pod_name, node, reason, status, created_at, updated_at,
                       status_reason)
    SELECT id, run_id, cluster, profile, plugin_set, plugin, pod_uid, pod_namespace, pod_name,
           node, reason, status, created_at, updated_at, status_reason
    FROM decisions_rows;
DROP TABLE decisions_rows;

CREATE INDEX decisions_by_run ON decisions (run_id);
-- The queue: newest first within a status, and the status counts.
CREATE INDEX decisions_by_status ON decisions (status, id);
-- Superseding: a pod's open proposals of one profile in one cluster.
CREATE INDEX decisions_by_pod ON decisions (cluster, profile, pod_uid, status);

-- Existing open duplicates: each open proposal with a newer open proposal for the same pod,
-- profile and cluster is superseded by the newest of them. A dry run's proposal never
-- supersedes a real run's (as when runs record them: see store::runs).
CREATE TEMP TABLE supersede (id INTEGER PRIMARY KEY, newer INTEGER);
INSERT INTO supersede (id, newer)
SELECT o.id,
       (SELECT MAX(n.id) FROM decisions n
        WHERE n.cluster = o.cluster AND n.profile = o.profile AND n.pod_uid = o.pod_uid
          AND n.status = 'proposed' AND n.id > o.id
          AND (od.dry_run = 1 OR (SELECT dry_run FROM runs WHERE id = n.run_id) = 0))
FROM decisions o JOIN runs od ON od.id = o.run_id
WHERE o.status = 'proposed';
DELETE FROM supersede WHERE newer IS NULL;

INSERT INTO decision_events (decision_id, from_status, to_status, actor, comment, time)
    SELECT s.id, 'proposed', 'superseded', 'system:supersede',
           'superseded by decision ' || s.newer || ' (run ' || n.run_id || ')',
           CAST(strftime('%s', 'now') AS INTEGER) * 1000
    FROM supersede s JOIN decisions n ON n.id = s.newer;
UPDATE decisions
SET status = 'superseded',
    superseded_by = (SELECT newer FROM supersede WHERE supersede.id = decisions.id),
    status_reason = 'superseded: pod ' || pod_namespace || '/' || pod_name
        || ' was proposed again by decision '
        || (SELECT newer FROM supersede WHERE supersede.id = decisions.id),
    updated_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000
WHERE id IN (SELECT id FROM supersede);
DROP TABLE supersede;

