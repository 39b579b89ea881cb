-- Clusters kept apart in arbitration (issue #14, item 2): a cluster's own arbitration knobs.
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
