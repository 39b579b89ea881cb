-- Policy state (ABI 1.3 `state` interface): the keys and values a policy keeps from one run to
-- the next, one scope per (cluster, profile, plugin set, policy). `data` is the scope in the
-- SDK's encoding (`rebalancer_policy_sdk::state::encode`). `version` counts commits: a run
-- commits a scope only if it is still at the version the run loaded (else the run reports a
-- conflict), so concurrent runs never overwrite each other silently. Deleting the cluster
-- deletes its state.
CREATE TABLE policy_state (
    cluster_id  INTEGER NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
    profile     TEXT    NOT NULL,
    plugin_set  TEXT    NOT NULL,
    policy      TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    data        BLOB    NOT NULL,
    -- The run that committed this version.
    run_id      INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (cluster_id, profile, plugin_set, policy)
);
