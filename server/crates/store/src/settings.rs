//! Settings changed at run time (`settings`): JSON values by key, overriding what the command
//! line set (e.g. `retention`, the keep times of `PUT /api/v1/retention`, and
//! `retention.lastPass`, what the last retention pass did).
//!
//! Owns: reading and replacing a key's value.
//! Must not: know what a value means or validate it (the server does, before it stores one).

use super::{Store, StoreError, from_json, now_ms, to_json};

impl Store {
    /// A setting's value and when it was last set (ms), `None` when it was never set.
    pub async fn setting(&self, key: &str) -> Result<Option<(serde_json::Value, i64)>, StoreError> {
        let row: Option<(String, i64)> =
            sqlx::query_as("SELECT value, updated_at FROM settings WHERE key = ?")
                .bind(key)
                .fetch_optional(&self.pool)
                .await?;
        row.map(|(value, at)| Ok((from_json(&format!("setting {key}"), &value)?, at)))
            .transpose()
    }

    /// Set a setting (replacing its value). Returns when.
    pub async fn put_setting(
        &self,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<i64, StoreError> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, \
             updated_at = excluded.updated_at",
        )
        .bind(key)
        .bind(to_json(&format!("setting {key}"), value)?)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_setting_is_replaced_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("settings.db")).await.unwrap();
        assert_eq!(store.setting("retention").await.unwrap(), None);
        store
            .put_setting("retention", &serde_json::json!({"runs": "7d"}))
            .await
            .unwrap();
        store
            .put_setting("retention", &serde_json::json!({"audit": "0"}))
            .await
            .unwrap();
        let (value, _) = store.setting("retention").await.unwrap().unwrap();
        assert_eq!(value, serde_json::json!({"audit": "0"}));
    }
}
