//! Policy state scopes (`policy_state`): loading a profile's scopes before a run; committing
//! what the run changed is part of [`super::Store::finish_run`].
//!
//! Owns the optimistic-concurrency rule: a scope is written only at the version the run loaded
//! (version 0: the scope did not exist), so of two runs that changed the same scope, the first
//! to finish commits and the second learns of the conflict instead of overwriting it.

use sqlx::Row;

use super::{Store, StoreError};

/// One stored scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredScope {
    pub plugin_set: String,
    pub policy: String,
    /// Commits so far (at least 1).
    pub version: i64,
    /// The scope in `rebalancer_policy_sdk::state::encode`'s form.
    pub data: Vec<u8>,
}

/// A scope a run changed: its new data, and the version the run loaded (0: none).
#[derive(Debug, Clone, Copy)]
pub struct StateWrite<'a> {
    pub plugin_set: &'a str,
    pub policy: &'a str,
    pub base_version: i64,
    pub data: &'a [u8],
}

impl Store {
    /// Every scope of `profile` on `cluster` (none for an unknown cluster).
    pub async fn load_policy_state(
        &self,
        cluster: &str,
        profile: &str,
    ) -> Result<Vec<StoredScope>, StoreError> {
        let rows = sqlx::query(
            "SELECT s.plugin_set, s.policy, s.version, s.data FROM policy_state s \
             JOIN clusters c ON c.id = s.cluster_id WHERE c.name = ? AND s.profile = ? \
             ORDER BY s.plugin_set, s.policy",
        )
        .bind(cluster)
        .bind(profile)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(StoredScope {
                    plugin_set: row.try_get("plugin_set")?,
                    policy: row.try_get("policy")?,
                    version: row.try_get("version")?,
                    data: row.try_get("data")?,
                })
            })
            .collect()
    }
}

/// Write `writes` for (`cluster`, `profile`) in `tx`; the indexes of the writes that lost to a
/// concurrent commit (or whose cluster is gone).
pub(crate) async fn commit(
    tx: &mut sqlx::SqliteConnection,
    cluster: &str,
    profile: &str,
    run_id: i64,
    writes: &[StateWrite<'_>],
    now: i64,
) -> Result<Vec<usize>, StoreError> {
    let mut conflicts = Vec::new();
    if writes.is_empty() {
        return Ok(conflicts);
    }
    let cluster_id: Option<i64> = sqlx::query_scalar("SELECT id FROM clusters WHERE name = ?")
        .bind(cluster)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(cluster_id) = cluster_id else {
        return Ok((0..writes.len()).collect());
    };
    for (i, w) in writes.iter().enumerate() {
        let done = if w.base_version == 0 {
            sqlx::query(
                "INSERT INTO policy_state (cluster_id, profile, plugin_set, policy, version, \
                 data, run_id, updated_at) VALUES (?, ?, ?, ?, 1, ?, ?, ?) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(cluster_id)
            .bind(profile)
            .bind(w.plugin_set)
            .bind(w.policy)
            .bind(w.data)
            .bind(run_id)
            .bind(now)
            .execute(&mut *tx)
            .await?
        } else {
            sqlx::query(
                "UPDATE policy_state SET version = version + 1, data = ?, run_id = ?, \
                 updated_at = ? WHERE cluster_id = ? AND profile = ? AND plugin_set = ? \
                 AND policy = ? AND version = ?",
            )
            .bind(w.data)
            .bind(run_id)
            .bind(now)
            .bind(cluster_id)
            .bind(profile)
            .bind(w.plugin_set)
            .bind(w.policy)
            .bind(w.base_version)
            .execute(&mut *tx)
            .await?
        };
        if done.rows_affected() == 0 {
            conflicts.push(i);
        }
    }
    Ok(conflicts)
}
