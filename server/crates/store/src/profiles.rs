//! Profiles: the DeschedulerPolicy document as sent and the spec parsed from it; deleting one
//! with what belongs to it.

use sqlx::Row;

use super::{Store, StoreError, from_json, now_ms};

#[derive(Clone, Debug, PartialEq)]
pub struct ProfileRecord {
    pub name: String,
    pub document: serde_json::Value,
    /// The parsed ProfileSpec as JSON.
    pub spec: serde_json::Value,
    pub created_at: i64,
    pub updated_at: i64,
}

fn profile_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<ProfileRecord, StoreError> {
    let name: String = row.try_get("name")?;
    let document: String = row.try_get("document")?;
    let spec: String = row.try_get("spec")?;
    Ok(ProfileRecord {
        document: from_json(&format!("document of profile {name}"), &document)?,
        spec: from_json(&format!("spec of profile {name}"), &spec)?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        name,
    })
}

/// What [`Store::delete_profile`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileDeletion {
    Deleted(DeletedProfile),
    /// Refused: these pod migrations of the profile's decisions have not finished.
    MigrationsInFlight(Vec<i64>),
}

/// What went with a deleted profile. Its runs, decisions and pod migrations stay: they are
/// history, kept by the profile's name (and pruned by retention like any other).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletedProfile {
    /// Schedules that ran it, deleted.
    pub schedules: Vec<i64>,
    /// Its policy state scopes on every cluster (cooldowns, LowNodeLoad's detectors…).
    pub policy_state_scopes: u64,
    /// It had auto-approve rules (deleted with it).
    pub auto_approve_rules: bool,
    /// Proposals nobody can act on any more, marked expired.
    pub expired_decisions: u64,
}

impl Store {
    /// Delete a profile: its auto-approve rules, its policy state, the schedules that run it,
    /// and expire its open proposals, in one transaction; refused while a pod migration of one
    /// of its decisions is unfinished.
    pub async fn delete_profile(
        &self,
        name: &str,
        actor: &str,
    ) -> Result<ProfileDeletion, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let exists: Option<i64> = sqlx::query_scalar("SELECT 1 FROM profiles WHERE name = ?")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound {
                what: format!("profile \"{name}\""),
            });
        }
        let unfinished: Vec<i64> = sqlx::query_scalar(
            "SELECT m.id FROM pod_migrations m JOIN decisions d ON d.id = m.decision_id \
             WHERE m.phase IN ('Pending', 'Running') AND d.profile = ? ORDER BY m.id",
        )
        .bind(name)
        .fetch_all(&mut *tx)
        .await?;
        if !unfinished.is_empty() {
            return Ok(ProfileDeletion::MigrationsInFlight(unfinished));
        }
        let policy_state_scopes = sqlx::query("DELETE FROM policy_state WHERE profile = ?")
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let mut schedules: Vec<i64> =
            sqlx::query_scalar("DELETE FROM schedules WHERE profile = ? RETURNING id")
                .bind(name)
                .fetch_all(&mut *tx)
                .await?;
        schedules.sort_unstable();
        let auto_approve_rules: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM profile_auto_approve WHERE profile = ?")
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
        let expired_decisions = crate::transitions::expire_profile_proposals(
            &mut tx,
            name,
            actor,
            &format!("expired: profile \"{name}\" was deleted"),
            now_ms(),
        )
        .await?;
        // Its auto-approve rules go with it (ON DELETE CASCADE).
        sqlx::query("DELETE FROM profiles WHERE name = ?")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.events_committed();
        Ok(ProfileDeletion::Deleted(DeletedProfile {
            schedules,
            policy_state_scopes,
            auto_approve_rules: auto_approve_rules.is_some(),
            expired_decisions,
        }))
    }

    /// Create or replace a profile. Returns the record and whether it was created.
    pub async fn put_profile(
        &self,
        name: &str,
        document: &serde_json::Value,
        spec: &serde_json::Value,
    ) -> Result<(ProfileRecord, bool), StoreError> {
        let now = now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let exists: Option<i64> = sqlx::query_scalar("SELECT 1 FROM profiles WHERE name = ?")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
        let row = sqlx::query(
            "INSERT INTO profiles (name, document, spec, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET document = excluded.document, \
             spec = excluded.spec, updated_at = excluded.updated_at \
             RETURNING name, document, spec, created_at, updated_at",
        )
        .bind(name)
        .bind(document.to_string())
        .bind(spec.to_string())
        .bind(now)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        let record = profile_from_row(&row)?;
        tx.commit().await?;
        Ok((record, exists.is_none()))
    }

    /// Create a profile only when no profile has that name. Returns whether it was created.
    pub async fn create_profile_if_missing(
        &self,
        name: &str,
        document: &serde_json::Value,
        spec: &serde_json::Value,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let done = sqlx::query(
            "INSERT INTO profiles (name, document, spec, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(document.to_string())
        .bind(spec.to_string())
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    pub async fn get_profile(&self, name: &str) -> Result<ProfileRecord, StoreError> {
        let row = sqlx::query(
            "SELECT name, document, spec, created_at, updated_at FROM profiles WHERE name = ?",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("profile \"{name}\""),
        })?;
        profile_from_row(&row)
    }

    pub async fn list_profiles(&self) -> Result<Vec<ProfileRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT name, document, spec, created_at, updated_at FROM profiles ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(profile_from_row).collect()
    }
}
