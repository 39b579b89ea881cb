//! Policy modules: bytes, identity and metadata. Built-ins are re-written from the binary at
//! every start; uploads are kept until deleted.

use sqlx::Row;

use super::{Store, StoreError, now_ms};

/// A stored policy, without its module bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyRecord {
    pub name: String,
    pub version: String,
    pub digest: String,
    pub abi_version: String,
    pub builtin: bool,
    /// The engine's metadata (PolicyMeta) as JSON.
    pub metadata: serde_json::Value,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What to store for a policy.
#[derive(Clone, Debug)]
pub struct NewPolicy<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub digest: &'a str,
    pub abi_version: &'a str,
    pub wasm: &'a [u8],
    pub metadata: &'a serde_json::Value,
}

/// Why an upload could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum PutPolicyError {
    #[error("\"{0}\" is a built-in policy")]
    Builtin(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for PutPolicyError {
    fn from(e: sqlx::Error) -> Self {
        PutPolicyError::Store(e.into())
    }
}

const COLUMNS: &str =
    "name, version, digest, abi_version, builtin, metadata, created_at, updated_at";

fn policy_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<PolicyRecord, StoreError> {
    let name: String = row.try_get("name")?;
    let metadata: String = row.try_get("metadata")?;
    Ok(PolicyRecord {
        metadata: super::from_json(&format!("metadata of policy {name}"), &metadata)?,
        version: row.try_get("version")?,
        digest: row.try_get("digest")?,
        abi_version: row.try_get("abi_version")?,
        builtin: row.try_get("builtin")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        name,
    })
}

impl Store {
    /// Store a built-in policy (replacing whatever had its name).
    pub async fn upsert_builtin_policy(&self, policy: &NewPolicy<'_>) -> Result<(), StoreError> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO policies (name, version, digest, abi_version, builtin, wasm, metadata, \
             created_at, updated_at) VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET version = excluded.version, \
             digest = excluded.digest, abi_version = excluded.abi_version, builtin = 1, \
             wasm = excluded.wasm, metadata = excluded.metadata, \
             updated_at = CASE WHEN policies.digest = excluded.digest AND policies.builtin = 1 \
                          THEN policies.updated_at ELSE excluded.updated_at END",
        )
        .bind(policy.name)
        .bind(policy.version)
        .bind(policy.digest)
        .bind(policy.abi_version)
        .bind(policy.wasm)
        .bind(policy.metadata.to_string())
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Remove built-in rows whose names this binary no longer ships. Returns the names removed.
    pub async fn remove_builtins_except(&self, keep: &[&str]) -> Result<Vec<String>, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let names: Vec<String> =
            sqlx::query_scalar("SELECT name FROM policies WHERE builtin = 1 ORDER BY name")
                .fetch_all(&mut *tx)
                .await?;
        let mut removed = Vec::new();
        for name in names {
            if !keep.contains(&name.as_str()) {
                sqlx::query("DELETE FROM policies WHERE name = ? AND builtin = 1")
                    .bind(&name)
                    .execute(&mut *tx)
                    .await?;
                removed.push(name);
            }
        }
        tx.commit().await?;
        Ok(removed)
    }

    /// Store an uploaded policy. Returns the record and whether it is new (false: it replaced an
    /// upload of the same name). A built-in of that name is never replaced.
    pub async fn put_user_policy(
        &self,
        policy: &NewPolicy<'_>,
    ) -> Result<(PolicyRecord, bool), PutPolicyError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let existing: Option<bool> =
            sqlx::query_scalar("SELECT builtin FROM policies WHERE name = ?")
                .bind(policy.name)
                .fetch_optional(&mut *tx)
                .await?;
        if existing == Some(true) {
            return Err(PutPolicyError::Builtin(policy.name.to_string()));
        }
        sqlx::query(
            "INSERT INTO policies (name, version, digest, abi_version, builtin, wasm, metadata, \
             created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET version = excluded.version, \
             digest = excluded.digest, abi_version = excluded.abi_version, wasm = excluded.wasm, \
             metadata = excluded.metadata, updated_at = excluded.updated_at",
        )
        .bind(policy.name)
        .bind(policy.version)
        .bind(policy.digest)
        .bind(policy.abi_version)
        .bind(policy.wasm)
        .bind(policy.metadata.to_string())
        .bind(now)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM policies WHERE name = ?"
        )))
        .bind(policy.name)
        .fetch_one(&mut *tx)
        .await?;
        let record = policy_from_row(&row)?;
        tx.commit().await?;
        Ok((record, existing.is_none()))
    }

    pub async fn list_policies(&self) -> Result<Vec<PolicyRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM policies ORDER BY name"
        )))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(policy_from_row).collect()
    }

    pub async fn get_policy(&self, name: &str) -> Result<PolicyRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM policies WHERE name = ?"
        )))
        .bind(name)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("policy \"{name}\""),
        })?;
        policy_from_row(&row)
    }

    /// The uploaded (non built-in) modules: (name, wasm bytes), for loading at start-up.
    pub async fn user_policy_modules(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let rows = sqlx::query("SELECT name, wasm FROM policies WHERE builtin = 0 ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("name")?, row.try_get("wasm")?)))
            .collect()
    }

    /// Delete an uploaded policy. Returns false when there is no upload with that name
    /// (built-ins are never deleted here).
    pub async fn delete_user_policy(&self, name: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM policies WHERE name = ? AND builtin = 0")
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
