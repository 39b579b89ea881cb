//! Schedules: runs started periodically and/or when a cluster's state changes. The scheduler
//! derives what is due from these rows alone, so a restart picks up where it left off.

use sqlx::Row;

use super::{Store, StoreError, now_ms};

/// What a schedule does (what the API sets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleSpec {
    pub cluster: String,
    pub profile: String,
    /// `None`: no periodic runs.
    pub interval_seconds: Option<i64>,
    pub on_change: bool,
    pub debounce_seconds: i64,
    pub dry_run: bool,
    pub enabled: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleRecord {
    pub id: i64,
    pub spec: ScheduleSpec,
    pub created_at: i64,
    pub updated_at: i64,
    pub last_triggered_at: Option<i64>,
    pub last_revision: Option<i64>,
    pub last_run_id: Option<i64>,
    pub last_error: Option<String>,
}

const COLUMNS: &str = "id, cluster, profile, interval_seconds, on_change, debounce_seconds, \
     dry_run, enabled, created_at, updated_at, last_triggered_at, last_revision, last_run_id, \
     last_error";

fn schedule_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<ScheduleRecord, StoreError> {
    Ok(ScheduleRecord {
        id: row.try_get("id")?,
        spec: ScheduleSpec {
            cluster: row.try_get("cluster")?,
            profile: row.try_get("profile")?,
            interval_seconds: row.try_get("interval_seconds")?,
            on_change: row.try_get("on_change")?,
            debounce_seconds: row.try_get("debounce_seconds")?,
            dry_run: row.try_get("dry_run")?,
            enabled: row.try_get("enabled")?,
        },
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        last_triggered_at: row.try_get("last_triggered_at")?,
        last_revision: row.try_get("last_revision")?,
        last_run_id: row.try_get("last_run_id")?,
        last_error: row.try_get("last_error")?,
    })
}

fn not_found(id: i64) -> StoreError {
    StoreError::NotFound {
        what: format!("schedule {id}"),
    }
}

impl Store {
    /// Create a schedule. `revision` is the cluster's current revision: a change-triggered run
    /// is due only once the cluster changes after this.
    pub async fn insert_schedule(
        &self,
        spec: &ScheduleSpec,
        revision: Option<i64>,
    ) -> Result<ScheduleRecord, StoreError> {
        let now = now_ms();
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO schedules (cluster, profile, interval_seconds, on_change, \
             debounce_seconds, dry_run, enabled, created_at, updated_at, last_revision) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {COLUMNS}"
        )))
        .bind(&spec.cluster)
        .bind(&spec.profile)
        .bind(spec.interval_seconds)
        .bind(spec.on_change)
        .bind(spec.debounce_seconds)
        .bind(spec.dry_run)
        .bind(spec.enabled)
        .bind(now)
        .bind(now)
        .bind(revision)
        .fetch_one(&self.pool)
        .await?;
        schedule_from_row(&row)
    }

    /// Replace what a schedule does; its history (last run, last revision) is kept. When the
    /// cluster changes, `revision` is the new cluster's current revision.
    pub async fn update_schedule(
        &self,
        id: i64,
        spec: &ScheduleSpec,
        revision: Option<i64>,
    ) -> Result<ScheduleRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE schedules SET interval_seconds = ?, on_change = ?, debounce_seconds = ?, \
             dry_run = ?, enabled = ?, profile = ?, updated_at = ?, \
             last_revision = CASE WHEN cluster = ? THEN last_revision ELSE ? END, cluster = ? \
             WHERE id = ? RETURNING {COLUMNS}"
        )))
        .bind(spec.interval_seconds)
        .bind(spec.on_change)
        .bind(spec.debounce_seconds)
        .bind(spec.dry_run)
        .bind(spec.enabled)
        .bind(&spec.profile)
        .bind(now_ms())
        .bind(&spec.cluster)
        .bind(revision)
        .bind(&spec.cluster)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| not_found(id))?;
        schedule_from_row(&row)
    }

    pub async fn get_schedule(&self, id: i64) -> Result<ScheduleRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM schedules WHERE id = ?"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| not_found(id))?;
        schedule_from_row(&row)
    }

    /// Every schedule, in id order.
    pub async fn list_schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM schedules ORDER BY id"
        )))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(schedule_from_row).collect()
    }

    pub async fn delete_schedule(&self, id: i64) -> Result<ScheduleRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM schedules WHERE id = ? RETURNING {COLUMNS}"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| not_found(id))?;
        schedule_from_row(&row)
    }

    /// The scheduler is about to start a run of this schedule over cluster `revision`:
    /// recorded first, so a crash in the middle never starts the same run twice.
    pub async fn schedule_started(
        &self,
        id: i64,
        at: i64,
        revision: Option<i64>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE schedules SET last_triggered_at = ?, \
             last_revision = COALESCE(?, last_revision), last_error = NULL WHERE id = ?",
        )
        .bind(at)
        .bind(revision)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// How the attempt ended: the run it recorded (if any) and why it failed (if it did).
    pub async fn schedule_finished(
        &self,
        id: i64,
        run_id: Option<i64>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE schedules SET last_run_id = COALESCE(?, last_run_id), last_error = ? \
             WHERE id = ?",
        )
        .bind(run_id)
        .bind(error)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
