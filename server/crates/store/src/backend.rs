//! The simulated backend's writes: one change of a cluster's objects (evict a pod, create its
//! replacement, place or release a reservation) plus its events, in one transaction; and the
//! event log.

use std::collections::BTreeMap;

use sqlx::Row;

use super::clusters::{ObjectRow, StoredObject};
use super::{Store, StoreError, to_json};

/// One event of the simulated backend's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimEvent {
    pub id: i64,
    pub cluster: String,
    pub time_ms: i64,
    pub reason: String,
    pub pod_uid: Option<String>,
    pub namespace: Option<String>,
    pub pod_name: Option<String>,
    pub node: Option<String>,
    pub replacement_uid: Option<String>,
    pub reservation: Option<String>,
    pub message: String,
}

/// An event to append.
#[derive(Clone, Debug, Default)]
pub struct NewSimEvent {
    pub reason: &'static str,
    pub pod_uid: Option<String>,
    pub namespace: Option<String>,
    pub pod_name: Option<String>,
    pub node: Option<String>,
    pub replacement_uid: Option<String>,
    pub reservation: Option<String>,
    pub message: String,
}

/// A change of one cluster's objects, with the cluster summary after it.
#[derive(Clone, Debug)]
pub struct BackendChange<'a> {
    pub cluster_id: i64,
    pub cluster: &'a str,
    /// The revision the change was computed against; the change is refused when the cluster
    /// moved on meanwhile (a snapshot push).
    pub base_revision: i64,
    pub revision: i64,
    pub snapshot_time_ms: i64,
    pub node_count: i64,
    pub pod_count: i64,
    pub object_count: i64,
    pub counts: &'a BTreeMap<String, u64>,
    /// A JSON array.
    pub warnings: &'a serde_json::Value,
    /// Pods (by uid) to delete; each must exist.
    pub delete_pods: Vec<&'a str>,
    /// Objects to write, replacing any object of the same kind, namespace and name.
    pub upserts: Vec<ObjectRow<'a>>,
    pub events: Vec<NewSimEvent>,
}

/// Why a change was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// The cluster's state changed since the change was computed: nothing was written.
    #[error("the cluster changed meanwhile: {0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for ChangeError {
    fn from(e: sqlx::Error) -> Self {
        ChangeError::Store(e.into())
    }
}

fn object_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<StoredObject, StoreError> {
    Ok(StoredObject {
        kind: row.try_get("kind")?,
        api_version: row.try_get("api_version")?,
        namespace: row.try_get("namespace")?,
        name: row.try_get("name")?,
        uid: row.try_get("uid")?,
        body: row.try_get("body")?,
    })
}

fn event_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<SimEvent, StoreError> {
    Ok(SimEvent {
        id: row.try_get("id")?,
        cluster: row.try_get("cluster")?,
        time_ms: row.try_get("time_ms")?,
        reason: row.try_get("reason")?,
        pod_uid: row.try_get("pod_uid")?,
        namespace: row.try_get("namespace")?,
        pod_name: row.try_get("pod_name")?,
        node: row.try_get("node")?,
        replacement_uid: row.try_get("replacement_uid")?,
        reservation: row.try_get("reservation")?,
        message: row.try_get("message")?,
    })
}

const EVENT_COLUMNS: &str = "id, cluster, time_ms, reason, pod_uid, namespace, pod_name, node, \
     replacement_uid, reservation, message";

impl Store {
    /// A cluster's objects of one kind, in the order they were stored.
    pub async fn cluster_objects_of_kind(
        &self,
        cluster_id: i64,
        kind: &str,
    ) -> Result<Vec<StoredObject>, StoreError> {
        let rows = sqlx::query(
            "SELECT kind, api_version, namespace, name, uid, body FROM cluster_objects \
             WHERE cluster_id = ? AND kind = ? ORDER BY id",
        )
        .bind(cluster_id)
        .bind(kind)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(object_from_row).collect()
    }

    /// Apply a change in one transaction: all of it or nothing.
    pub async fn apply_backend_change(
        &self,
        change: &BackendChange<'_>,
    ) -> Result<(), ChangeError> {
        let counts = to_json("object counts", change.counts)?;
        let warnings = to_json("warnings", change.warnings)?;
        let now = super::now_ms();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let updated = sqlx::query(
            "UPDATE clusters SET revision = ?, snapshot_time_ms = ?, node_count = ?, \
             pod_count = ?, object_count = ?, counts = ?, warnings = ?, updated_at = ? \
             WHERE id = ? AND revision = ?",
        )
        .bind(change.revision)
        .bind(change.snapshot_time_ms)
        .bind(change.node_count)
        .bind(change.pod_count)
        .bind(change.object_count)
        .bind(&counts)
        .bind(&warnings)
        .bind(now)
        .bind(change.cluster_id)
        .bind(change.base_revision)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            return Err(ChangeError::Conflict(format!(
                "cluster {} is no longer at revision {}",
                change.cluster, change.base_revision
            )));
        }
        for uid in &change.delete_pods {
            let deleted = sqlx::query(
                "DELETE FROM cluster_objects WHERE cluster_id = ? AND kind = 'Pod' AND uid = ?",
            )
            .bind(change.cluster_id)
            .bind(uid)
            .execute(&mut *tx)
            .await?;
            if deleted.rows_affected() == 0 {
                return Err(ChangeError::Conflict(format!("pod {uid} is already gone")));
            }
        }
        for o in &change.upserts {
            sqlx::query(
                "DELETE FROM cluster_objects WHERE cluster_id = ? AND kind = ? \
                 AND namespace IS ? AND name = ?",
            )
            .bind(change.cluster_id)
            .bind(o.kind)
            .bind(o.namespace)
            .bind(o.name)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO cluster_objects (cluster_id, kind, api_version, namespace, name, \
                 uid, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(change.cluster_id)
            .bind(o.kind)
            .bind(o.api_version)
            .bind(o.namespace)
            .bind(o.name)
            .bind(o.uid)
            .bind(&*o.body)
            .execute(&mut *tx)
            .await?;
        }
        for e in &change.events {
            sqlx::query(
                "INSERT INTO simulated_events (cluster, time_ms, reason, pod_uid, namespace, \
                 pod_name, node, replacement_uid, reservation, message) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(change.cluster)
            .bind(now)
            .bind(e.reason)
            .bind(&e.pod_uid)
            .bind(&e.namespace)
            .bind(&e.pod_name)
            .bind(&e.node)
            .bind(&e.replacement_uid)
            .bind(&e.reservation)
            .bind(&e.message)
            .execute(&mut *tx)
            .await
            .map_err(|err| match &err {
                sqlx::Error::Database(d) if d.is_unique_violation() => ChangeError::Conflict(
                    format!("{} already recorded for pod {:?}", e.reason, e.pod_uid),
                ),
                _ => err.into(),
            })?;
        }
        super::events::append_revision(&mut tx, change.cluster, change.revision).await?;
        tx.commit().await?;
        self.events_committed();
        Ok(())
    }

    /// A cluster's simulated-backend events, oldest first.
    pub async fn simulated_events(&self, cluster: &str) -> Result<Vec<SimEvent>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {EVENT_COLUMNS} FROM simulated_events WHERE cluster = ? ORDER BY id"
        )))
        .bind(cluster)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// The uid of the replacement created for an evicted pod, if one was.
    pub async fn simulated_replacement(
        &self,
        cluster: &str,
        evicted_uid: &str,
    ) -> Result<Option<String>, StoreError> {
        let uid: Option<Option<String>> = sqlx::query_scalar(
            "SELECT replacement_uid FROM simulated_events \
             WHERE cluster = ? AND pod_uid = ? AND reason = 'ReplacementCreated'",
        )
        .bind(cluster)
        .bind(evicted_uid)
        .fetch_optional(&self.pool)
        .await?;
        Ok(uid.flatten())
    }
}
