-- Which incarnation of its cluster a run ran on. Never edit this file once it has been
-- released: add a new numbered file instead.
--
-- A cluster deleted and created again under the same name is a new cluster, but it may get
-- the same `clusters.id` back (SQLite reuses the largest rowid once it is deleted). A run
-- that started on the old one and finishes after the new one exists must not leave its
-- proposals and policy state to the new one, so clusters get an incarnation number that is
-- never reused (AUTOINCREMENT), and a run records the one it ran on: at its end it compares
-- it with the current cluster's, and is recorded as failed when they differ or the cluster
-- is gone.
CREATE TABLE cluster_incarnations (
    id INTEGER PRIMARY KEY AUTOINCREMENT
);
-- Each existing cluster is its own first incarnation.
INSERT INTO cluster_incarnations (id) SELECT id FROM clusters;
ALTER TABLE clusters ADD COLUMN incarnation INTEGER;
UPDATE clusters SET incarnation = id;

-- NULL for runs recorded before this migration. No foreign key: the cluster may be deleted
-- while the run is in progress, which is the point.
ALTER TABLE runs ADD COLUMN cluster_incarnation INTEGER;
