//! The arbitration knobs: the global document (`arbitration_config`, one row at most) and the
//! documents of clusters that have their own (`cluster_arbitration_config`, one row per cluster,
//! deleted with the cluster).
//!
//! Owns: reading and writing both tables as JSON values.
//! Must not: validate or interpret the knobs (that is the executor's `arbitration` module), or
//! decide which document a cluster follows.

use sqlx::Row;

use super::{Store, StoreError, now_ms};

impl Store {
    /// The stored global arbitration knobs (JSON), `None` when never set.
    pub async fn arbitration_config(&self) -> Result<Option<serde_json::Value>, StoreError> {
        let text: Option<String> =
            sqlx::query_scalar("SELECT config FROM arbitration_config WHERE id = 1")
                .fetch_optional(&self.pool)
                .await?;
        text.map(|t| super::from_json("arbitration config", &t))
            .transpose()
    }

    /// Replace the global arbitration knobs.
    pub async fn put_arbitration_config(
        &self,
        config: &serde_json::Value,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO arbitration_config (id, config, updated_at) VALUES (1, ?, ?) \
             ON CONFLICT (id) DO UPDATE SET config = excluded.config, \
             updated_at = excluded.updated_at",
        )
        .bind(super::to_json("arbitration config", config)?)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every cluster's own arbitration knobs, by cluster name.
    pub async fn cluster_arbitration_configs(
        &self,
    ) -> Result<Vec<(String, serde_json::Value)>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.name, a.config FROM cluster_arbitration_config a \
             JOIN clusters c ON c.id = a.cluster_id ORDER BY c.name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let name: String = r.try_get("name")?;
                let what = format!("arbitration config of cluster \"{name}\"");
                let config = super::from_json(&what, &r.try_get::<String, _>("config")?)?;
                Ok((name, config))
            })
            .collect()
    }

    /// The arbitration knobs of cluster `name` when it has its own (`None`: it follows the
    /// global ones). `NotFound` when there is no such cluster.
    pub async fn cluster_arbitration_config(
        &self,
        name: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let row = sqlx::query(
            "SELECT a.config FROM clusters c \
             LEFT JOIN cluster_arbitration_config a ON a.cluster_id = c.id WHERE c.name = ?",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| cluster_not_found(name))?;
        let text: Option<String> = row.try_get("config")?;
        text.map(|t| super::from_json(&format!("arbitration config of cluster \"{name}\""), &t))
            .transpose()
    }

    /// Give cluster `name` its own arbitration knobs (replacing any it had). `NotFound` when
    /// there is no such cluster.
    pub async fn put_cluster_arbitration_config(
        &self,
        name: &str,
        config: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let written = sqlx::query(
            "INSERT INTO cluster_arbitration_config (cluster_id, config, updated_at) \
             SELECT id, ?, ? FROM clusters WHERE name = ? \
             ON CONFLICT (cluster_id) DO UPDATE SET config = excluded.config, \
             updated_at = excluded.updated_at",
        )
        .bind(super::to_json("arbitration config", config)?)
        .bind(now_ms())
        .bind(name)
        .execute(&self.pool)
        .await?;
        if written.rows_affected() == 0 {
            return Err(cluster_not_found(name));
        }
        Ok(())
    }

    /// Make cluster `name` follow the global knobs again. Returns whether it had its own.
    /// `NotFound` when there is no such cluster.
    pub async fn delete_cluster_arbitration_config(&self, name: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let id: i64 = sqlx::query_scalar("SELECT id FROM clusters WHERE name = ?")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| cluster_not_found(name))?;
        let deleted = sqlx::query("DELETE FROM cluster_arbitration_config WHERE cluster_id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(deleted.rows_affected() > 0)
    }
}

fn cluster_not_found(name: &str) -> StoreError {
    StoreError::NotFound {
        what: format!("cluster \"{name}\""),
    }
}
