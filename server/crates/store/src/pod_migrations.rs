//! Pod migrations (one per approved decision) and their events.
//!
//! Every change of a pod migration is a conditional UPDATE on its current `step` (optimistic
//! concurrency: a change computed from a stale read applies to nothing), committed together
//! with its event and the decision's status change ([`Store::change_pod_migration`], in
//! `transitions`). The executor persists a step *before* the side effect it leads to.

use std::collections::HashMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::decisions::DecisionStatus;
use super::{Store, StoreError, now_ms};

/// Koordinator's job phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum MigrationPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Aborted,
}

impl MigrationPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            MigrationPhase::Pending => "Pending",
            MigrationPhase::Running => "Running",
            MigrationPhase::Succeeded => "Succeeded",
            MigrationPhase::Failed => "Failed",
            MigrationPhase::Aborted => "Aborted",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            MigrationPhase::Succeeded | MigrationPhase::Failed | MigrationPhase::Aborted
        )
    }
}

impl FromStr for MigrationPhase {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "Pending" => MigrationPhase::Pending,
            "Running" => MigrationPhase::Running,
            "Succeeded" => MigrationPhase::Succeeded,
            "Failed" => MigrationPhase::Failed,
            "Aborted" => MigrationPhase::Aborted,
            other => {
                return Err(StoreError::corrupt(
                    "pod migration phase",
                    format!("`{other}`"),
                ));
            }
        })
    }
}

/// The step a new pod migration starts at (waiting for arbitration).
pub const FIRST_STEP: &str = "Arbitration";
/// The step of a finished pod migration.
pub const DONE_STEP: &str = "Done";

#[derive(Clone, Debug, PartialEq)]
pub struct PodMigrationRecord {
    pub id: i64,
    pub decision_id: i64,
    pub cluster: String,
    pub pod_uid: String,
    pub pod_namespace: String,
    pub pod_name: String,
    pub mode: String,
    pub phase: MigrationPhase,
    pub step: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub source_node: String,
    pub target_node: Option<String>,
    pub reservation: Option<String>,
    /// What the reservation is (`Reservation`, `placeholder pod`), once one is made.
    pub reservation_kind: Option<String>,
    pub reservation_released: bool,
    pub new_pod_uid: Option<String>,
    pub new_pod_name: Option<String>,
    pub new_pod_node: Option<String>,
    pub workload: Option<String>,
    pub ttl_ms: i64,
    pub started_at: Option<i64>,
    pub eviction_requested_at: Option<i64>,
    pub evicted_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    /// From the decision: the plugin that proposed it, the stored profile and the plugin set
    /// (the DeschedulerPolicy's `profiles[].name`) it ran in (for metrics).
    pub plugin: String,
    pub profile: String,
    pub plugin_set: String,
    /// The decision's reason (why the pod is moved): the eviction's Event message.
    pub decision_reason: String,
    /// The profile's `gracePeriodSeconds`, if it sets one (read when the record is).
    pub grace_period_seconds: Option<i64>,
}

/// One event of a pod migration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationEvent {
    pub time: i64,
    /// `Normal` or `Warning`.
    pub kind: String,
    pub reason: String,
    pub message: String,
}

/// An event to append with a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

impl NewEvent {
    pub fn normal(reason: &str, message: impl Into<String>) -> NewEvent {
        NewEvent {
            warning: false,
            reason: reason.into(),
            message: message.into(),
        }
    }

    pub fn warning(reason: &str, message: impl Into<String>) -> NewEvent {
        NewEvent {
            warning: true,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// What happens to the decision with a pod migration change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionChange {
    pub from: Vec<DecisionStatus>,
    pub to: DecisionStatus,
    pub actor: String,
    pub comment: Option<String>,
    pub reason: Option<String>,
}

/// A change of a pod migration. `None` fields keep their value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrationChange {
    pub step: Option<String>,
    pub phase: Option<MigrationPhase>,
    pub status: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub target_node: Option<String>,
    pub reservation: Option<String>,
    pub reservation_kind: Option<String>,
    pub reservation_released: bool,
    pub new_pod_uid: Option<String>,
    pub new_pod_name: Option<String>,
    pub new_pod_node: Option<String>,
    pub workload: Option<String>,
    pub started_at: Option<i64>,
    pub eviction_requested_at: Option<i64>,
    pub evicted_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub events: Vec<NewEvent>,
    pub decision: Option<DecisionChange>,
}

/// Which pod migrations to list, in id order after `after`.
#[derive(Clone, Debug, Default)]
pub struct MigrationFilter {
    pub decision: Option<i64>,
    pub phase: Option<MigrationPhase>,
    /// Only this cluster's.
    pub cluster: Option<String>,
    /// Only pod migrations that touch this node: moving a pod off it, or reserving or placing
    /// the replacement on it.
    pub node: Option<String>,
    pub after: Option<i64>,
}

const COLUMNS: &str = "m.id, m.decision_id, m.cluster, m.pod_uid, m.pod_namespace, m.pod_name, \
     m.mode, m.phase, m.step, m.status, m.reason, m.message, m.source_node, m.target_node, \
     m.reservation, m.reservation_kind, m.reservation_released, m.new_pod_uid, m.new_pod_name, m.new_pod_node, \
     m.workload, m.ttl_ms, m.started_at, m.eviction_requested_at, m.evicted_at, m.finished_at, \
     m.created_at, m.updated_at, d.plugin, d.profile, d.plugin_set, \
     d.reason AS decision_reason, \
     json_extract(p.document, '$.gracePeriodSeconds') AS grace_period_seconds";
const FROM: &str = "pod_migrations m JOIN decisions d ON d.id = m.decision_id \
     LEFT JOIN profiles p ON p.name = d.profile";

fn migration_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<PodMigrationRecord, StoreError> {
    Ok(PodMigrationRecord {
        id: row.try_get("id")?,
        decision_id: row.try_get("decision_id")?,
        cluster: row.try_get("cluster")?,
        pod_uid: row.try_get("pod_uid")?,
        pod_namespace: row.try_get("pod_namespace")?,
        pod_name: row.try_get("pod_name")?,
        mode: row.try_get("mode")?,
        phase: row.try_get::<String, _>("phase")?.parse()?,
        step: row.try_get("step")?,
        status: row.try_get("status")?,
        reason: row.try_get("reason")?,
        message: row.try_get("message")?,
        source_node: row.try_get("source_node")?,
        target_node: row.try_get("target_node")?,
        reservation: row.try_get("reservation")?,
        reservation_kind: row.try_get("reservation_kind")?,
        reservation_released: row.try_get("reservation_released")?,
        new_pod_uid: row.try_get("new_pod_uid")?,
        new_pod_name: row.try_get("new_pod_name")?,
        new_pod_node: row.try_get("new_pod_node")?,
        workload: row.try_get("workload")?,
        ttl_ms: row.try_get("ttl_ms")?,
        started_at: row.try_get("started_at")?,
        eviction_requested_at: row.try_get("eviction_requested_at")?,
        evicted_at: row.try_get("evicted_at")?,
        finished_at: row.try_get("finished_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        plugin: row.try_get("plugin")?,
        profile: row.try_get("profile")?,
        plugin_set: row.try_get("plugin_set")?,
        decision_reason: row.try_get("decision_reason")?,
        grace_period_seconds: row
            .try_get::<Option<i64>, _>("grace_period_seconds")
            .ok()
            .flatten()
            .filter(|s| *s >= 0),
    })
}

pub(crate) async fn insert_event(
    conn: &mut sqlx::SqliteConnection,
    id: i64,
    event: &NewEvent,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO pod_migration_events (pod_migration_id, time, type, reason, message) \
         VALUES (?, ?, ?, ?, ?)",
    )
    .bind(id)
    .bind(now)
    .bind(if event.warning { "Warning" } else { "Normal" })
    .bind(&event.reason)
    .bind(&event.message)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

impl Store {
    pub async fn get_pod_migration(&self, id: i64) -> Result<PodMigrationRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM {FROM} WHERE m.id = ?"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("pod migration {id}"),
        })?;
        migration_from_row(&row)
    }

    /// Up to `limit` pod migrations matching `filter`, in id order, and the id to continue
    /// after when more match.
    pub async fn list_pod_migrations(
        &self,
        filter: &MigrationFilter,
        limit: u32,
    ) -> Result<(Vec<PodMigrationRecord>, Option<i64>), StoreError> {
        let mut sql = format!("SELECT {COLUMNS} FROM {FROM} WHERE m.id > ?");
        if filter.decision.is_some() {
            sql.push_str(" AND m.decision_id = ?");
        }
        if filter.phase.is_some() {
            sql.push_str(" AND m.phase = ?");
        }
        if filter.cluster.is_some() {
            sql.push_str(" AND m.cluster = ?");
        }
        if filter.node.is_some() {
            sql.push_str(" AND ? IN (m.source_node, m.target_node, m.new_pod_node)");
        }
        sql.push_str(" ORDER BY m.id LIMIT ?");
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(filter.after.unwrap_or(0));
        if let Some(decision) = filter.decision {
            query = query.bind(decision);
        }
        if let Some(phase) = filter.phase {
            query = query.bind(phase.as_str());
        }
        if let Some(cluster) = &filter.cluster {
            query = query.bind(cluster);
        }
        if let Some(node) = &filter.node {
            query = query.bind(node);
        }
        let rows = query
            .bind(i64::from(limit) + 1)
            .fetch_all(&self.pool)
            .await?;
        let mut items = rows
            .iter()
            .map(migration_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|m| m.id)
        } else {
            None
        };
        Ok((items, next))
    }

    /// Every pod migration that is not finished (Pending or Running), oldest first.
    pub async fn active_pod_migrations(&self) -> Result<Vec<PodMigrationRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM {FROM} WHERE m.phase IN ('Pending', 'Running') ORDER BY m.id"
        )))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(migration_from_row).collect()
    }

    /// Finished pod migrations whose reservation still has to be released (a release
    /// interrupted by a crash is repeated). A reservation consumed by the replacement is
    /// marked released when the pod migration completes, so it is not listed.
    pub async fn unreleased_reservations(&self) -> Result<Vec<PodMigrationRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM {FROM} WHERE m.phase IN ('Succeeded', 'Failed', 'Aborted') \
             AND m.reservation IS NOT NULL AND m.reservation_released = 0 ORDER BY m.id"
        )))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(migration_from_row).collect()
    }

    /// Record that a pod migration's reservation has been released.
    pub async fn mark_reservation_released(&self, id: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE pod_migrations SET reservation_released = 1, updated_at = ? WHERE id = ?",
        )
        .bind(now_ms())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Pod migrations whose eviction was confirmed at or after `since` (to rebuild the object
    /// limiters after a restart).
    pub async fn evictions_since(&self, since: i64) -> Result<Vec<PodMigrationRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM {FROM} WHERE m.evicted_at >= ? ORDER BY m.evicted_at"
        )))
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(migration_from_row).collect()
    }

    /// The events of a pod migration, in order.
    /// Which of `pod_uids` other pod migrations of `cluster` took as their replacement:
    /// pod uid → pod migration id.
    pub async fn replacement_claims(
        &self,
        cluster: &str,
        pod_uids: &[String],
    ) -> Result<HashMap<String, i64>, StoreError> {
        if pod_uids.is_empty() {
            return Ok(HashMap::new());
        }
        let uids =
            serde_json::to_string(pod_uids).map_err(|e| StoreError::corrupt("pod uids", e))?;
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT pod_uid, pod_migration_id FROM replacement_claims \
             WHERE cluster = ? AND pod_uid IN (SELECT value FROM json_each(?))",
        )
        .bind(cluster)
        .bind(uids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().collect())
    }

    pub async fn pod_migration_events(&self, id: i64) -> Result<Vec<MigrationEvent>, StoreError> {
        let rows = sqlx::query(
            "SELECT time, type, reason, message FROM pod_migration_events \
             WHERE pod_migration_id = ? ORDER BY id",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(MigrationEvent {
                    time: r.try_get("time")?,
                    kind: r.try_get("type")?,
                    reason: r.try_get("reason")?,
                    message: r.try_get("message")?,
                })
            })
            .collect()
    }
}
