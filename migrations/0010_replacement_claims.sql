-- Which pod migration took a replacement pod. A pod replaces at most one evicted pod, so
-- concurrent pod migrations of one workload each end with a replacement of their own: the
-- claim is made in the same transaction that records the replacement on the pod migration
-- (`new_pod_uid`), and a pod another pod migration has claimed is never taken again. The rule
-- that picks among the candidates is in docs/operations.md ("Which pod is the replacement").
CREATE TABLE replacement_claims (
    cluster          TEXT    NOT NULL,
    pod_uid          TEXT    NOT NULL,
    pod_migration_id INTEGER NOT NULL REFERENCES pod_migrations (id) ON DELETE CASCADE,
    claimed_at       INTEGER NOT NULL,
    PRIMARY KEY (cluster, pod_uid)
);
CREATE INDEX replacement_claims_by_pod_migration ON replacement_claims (pod_migration_id);

-- Replacements recorded before claims existed: the oldest pod migration keeps a pod that
-- several reported (the later ones shared it by mistake).
INSERT OR IGNORE INTO replacement_claims (cluster, pod_uid, pod_migration_id, claimed_at)
SELECT cluster, new_pod_uid, id, updated_at
FROM pod_migrations
WHERE new_pod_uid IS NOT NULL
ORDER BY id;

-- What holds the room for the replacement: `Reservation` (Koordinator's) or `placeholder pod`
-- (a low-priority pause pod), decided when the reservation is made; messages and the API name
-- it. NULL for pod migrations that made none, and for those made before this column.
ALTER TABLE pod_migrations ADD COLUMN reservation_kind TEXT;
