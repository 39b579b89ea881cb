//! Clusters and their Kubernetes objects.
//!
//! A cluster's state is replaced as a whole, in one transaction ([`Store::replace_cluster_state`]):
//! either the new objects and counters are all committed or the previous state stays.

use std::collections::BTreeMap;

use futures::TryStreamExt;
use sqlx::{Row, Sqlite, Transaction};

use super::{Store, StoreError, from_json, now_ms, to_json};

/// Rows per multi-row INSERT: 7 parameters each stays far below SQLite's 32,766-variable limit,
/// while 150,000 objects take ~300 statements.
const INSERT_BATCH: usize = 1000;
const OBJECT_COLUMNS: &str = "(cluster_id, kind, api_version, namespace, name, uid, body)";

/// One Kubernetes object to store (borrowed from the caller's parsed document).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRow<'a> {
    pub kind: &'a str,
    pub api_version: &'a str,
    /// None for cluster-scoped objects.
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub uid: Option<&'a str>,
    /// The object as JSON.
    pub body: std::borrow::Cow<'a, str>,
}

/// One Kubernetes object as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredObject {
    pub kind: String,
    pub api_version: String,
    /// None for cluster-scoped objects.
    pub namespace: Option<String>,
    pub name: String,
    pub uid: Option<String>,
    /// The object as JSON.
    pub body: String,
}

/// A cluster's summary row.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterRecord {
    pub id: i64,
    /// Never the same for two clusters, even of the same name one after the other (unlike
    /// `id`, which SQLite may reuse after a deletion).
    pub incarnation: i64,
    pub name: String,
    pub backend: String,
    pub revision: i64,
    pub snapshot_time_ms: i64,
    pub node_count: i64,
    pub pod_count: i64,
    pub object_count: i64,
    /// Objects by kind.
    pub counts: BTreeMap<String, u64>,
    /// The ingest warnings, as a JSON array.
    pub warnings: serde_json::Value,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The summary of a new state for a cluster.
#[derive(Clone, Debug)]
pub struct NewClusterState<'a> {
    pub name: &'a str,
    pub backend: &'a str,
    pub revision: i64,
    pub snapshot_time_ms: i64,
    pub node_count: i64,
    pub pod_count: i64,
    pub counts: &'a BTreeMap<String, u64>,
    /// A JSON array.
    pub warnings: &'a serde_json::Value,
}

const CLUSTER_COLUMNS: &str = "id, incarnation, name, backend, revision, snapshot_time_ms, node_count, \
     pod_count, object_count, counts, warnings, created_at, updated_at";

fn cluster_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<ClusterRecord, StoreError> {
    let name: String = row.try_get("name")?;
    let counts: String = row.try_get("counts")?;
    let warnings: String = row.try_get("warnings")?;
    Ok(ClusterRecord {
        id: row.try_get("id")?,
        incarnation: row.try_get("incarnation")?,
        backend: row.try_get("backend")?,
        revision: row.try_get("revision")?,
        snapshot_time_ms: row.try_get("snapshot_time_ms")?,
        node_count: row.try_get("node_count")?,
        pod_count: row.try_get("pod_count")?,
        object_count: row.try_get("object_count")?,
        counts: from_json(&format!("object counts of cluster {name}"), &counts)?,
        warnings: from_json(&format!("warnings of cluster {name}"), &warnings)?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        name,
    })
}

/// What [`Store::delete_cluster`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterDeletion {
    Deleted(DeletedCluster),
    /// Refused: these pod migrations of the cluster have not finished.
    MigrationsInFlight(Vec<i64>),
}

/// What went with a deleted cluster. Its runs, decisions, pod migrations and the simulated
/// backend's events stay: they are history, kept by the cluster's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletedCluster {
    /// Stored objects of its state.
    pub objects: i64,
    /// Policy state scopes (cooldowns, LowNodeLoad's detectors…).
    pub policy_state_scopes: i64,
    /// Schedules that ran profiles on it.
    pub schedules: Vec<i64>,
    /// Proposals nobody can act on any more, marked expired.
    pub expired_decisions: u64,
    /// Whether it had its own arbitration knobs (deleted with it).
    pub arbitration_config: bool,
}

impl Store {
    /// Delete a cluster: its state, its policy state and its schedules, and expire its open
    /// proposals, in one transaction; refused while a pod migration of it is unfinished.
    pub async fn delete_cluster(
        &self,
        name: &str,
        actor: &str,
    ) -> Result<ClusterDeletion, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let id: i64 = sqlx::query_scalar("SELECT id FROM clusters WHERE name = ?")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: format!("cluster \"{name}\""),
            })?;
        let unfinished: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM pod_migrations WHERE cluster = ? \
             AND phase NOT IN ('Succeeded', 'Failed', 'Aborted') ORDER BY id",
        )
        .bind(name)
        .fetch_all(&mut *tx)
        .await?;
        if !unfinished.is_empty() {
            return Ok(ClusterDeletion::MigrationsInFlight(unfinished));
        }
        let objects: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM cluster_objects WHERE cluster_id = ?")
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
        let policy_state_scopes: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM policy_state WHERE cluster_id = ?")
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
        let arbitration_config: Option<i64> = sqlx::query_scalar(
            "SELECT cluster_id FROM cluster_arbitration_config WHERE cluster_id = ?",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let schedules: Vec<i64> =
            sqlx::query_scalar("DELETE FROM schedules WHERE cluster = ? RETURNING id")
                .bind(name)
                .fetch_all(&mut *tx)
                .await?;
        let now = crate::now_ms();
        let expired_decisions = crate::transitions::expire_cluster_proposals(
            &mut tx,
            name,
            actor,
            &format!("expired: cluster \"{name}\" was deleted"),
            now,
        )
        .await?;
        // Its objects, policy state and arbitration knobs go with it (ON DELETE CASCADE).
        sqlx::query("DELETE FROM clusters WHERE id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let data = serde_json::json!({ "name": name, "deleted": true });
        super::events::append_event(&mut tx, super::EventKind::Cluster, Some(name), &data).await?;
        tx.commit().await?;
        self.events_committed();
        let mut schedules = schedules;
        schedules.sort_unstable();
        Ok(ClusterDeletion::Deleted(DeletedCluster {
            objects,
            policy_state_scopes,
            schedules,
            expired_decisions,
            arbitration_config: arbitration_config.is_some(),
        }))
    }

    /// Replace a cluster's state (creating the cluster when new) in one transaction.
    /// Returns the new summary and whether the cluster was created.
    pub async fn replace_cluster_state<'a>(
        &self,
        state: &NewClusterState<'_>,
        objects: impl ExactSizeIterator<Item = ObjectRow<'a>> + Send,
    ) -> Result<(ClusterRecord, bool), StoreError> {
        let object_count = i64::try_from(objects.len()).unwrap_or(i64::MAX);
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let (id, created) = upsert_summary(&mut tx, state, object_count).await?;
        insert_objects(&mut tx, id, objects).await?;
        let record = cluster_by_id(&mut tx, id).await?;
        super::events::append_revision(&mut tx, state.name, state.revision).await?;
        tx.commit().await?;
        self.events_committed();
        Ok((record, created))
    }

    /// Record the summary of a cluster whose state lives elsewhere (a Kubernetes API server):
    /// creates or updates its row and keeps no objects (stored ones, from a time it was
    /// pushed, are deleted). `object_count` is what the live state holds.
    pub async fn record_live_cluster_state(
        &self,
        state: &NewClusterState<'_>,
        object_count: i64,
    ) -> Result<ClusterRecord, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let (id, _) = upsert_summary(&mut tx, state, object_count).await?;
        let record = cluster_by_id(&mut tx, id).await?;
        super::events::append_revision(&mut tx, state.name, state.revision).await?;
        tx.commit().await?;
        self.events_committed();
        Ok(record)
    }

    pub async fn list_clusters(&self) -> Result<Vec<ClusterRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {CLUSTER_COLUMNS} FROM clusters ORDER BY name"
        )))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(cluster_from_row).collect()
    }

    pub async fn get_cluster(&self, name: &str) -> Result<ClusterRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {CLUSTER_COLUMNS} FROM clusters WHERE name = ?"
        )))
        .bind(name)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("cluster \"{name}\""),
        })?;
        cluster_from_row(&row)
    }

    /// A cluster's objects, in the order they were stored.
    pub async fn cluster_objects(&self, cluster_id: i64) -> Result<Vec<StoredObject>, StoreError> {
        let mut rows = sqlx::query(
            "SELECT kind, api_version, namespace, name, uid, body FROM cluster_objects \
             WHERE cluster_id = ? ORDER BY id",
        )
        .bind(cluster_id)
        .fetch(&self.pool);
        let mut objects = Vec::new();
        while let Some(row) = rows.try_next().await? {
            objects.push(StoredObject {
                kind: row.try_get("kind")?,
                api_version: row.try_get("api_version")?,
                namespace: row.try_get("namespace")?,
                name: row.try_get("name")?,
                uid: row.try_get("uid")?,
                body: row.try_get("body")?,
            });
        }
        Ok(objects)
    }

    /// The highest cluster revision stored (0 when there is none).
    pub async fn max_cluster_revision(&self) -> Result<i64, StoreError> {
        let max: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(revision), 0) FROM clusters")
            .fetch_one(&self.pool)
            .await?;
        Ok(max)
    }
}

/// Create or update a cluster's summary row and delete its stored objects; its id and whether
/// it was created.
async fn upsert_summary(
    tx: &mut Transaction<'_, Sqlite>,
    state: &NewClusterState<'_>,
    object_count: i64,
) -> Result<(i64, bool), StoreError> {
    let now = now_ms();
    let counts = to_json("object counts", state.counts)?;
    let warnings = to_json("warnings", state.warnings)?;
    let created = sqlx::query_scalar::<_, i64>("SELECT id FROM clusters WHERE name = ?")
        .bind(state.name)
        .fetch_optional(&mut **tx)
        .await?
        .is_none();
    // A new cluster is a new incarnation, whatever clusters had its name before.
    let incarnation: Option<i64> = if created {
        Some(
            sqlx::query_scalar("INSERT INTO cluster_incarnations DEFAULT VALUES RETURNING id")
                .fetch_one(&mut **tx)
                .await?,
        )
    } else {
        None
    };
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO clusters (name, backend, revision, snapshot_time_ms, node_count, \
         pod_count, object_count, counts, warnings, created_at, updated_at, incarnation) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (name) DO UPDATE SET backend = excluded.backend, \
         revision = excluded.revision, snapshot_time_ms = excluded.snapshot_time_ms, \
         node_count = excluded.node_count, pod_count = excluded.pod_count, \
         object_count = excluded.object_count, counts = excluded.counts, \
         warnings = excluded.warnings, updated_at = excluded.updated_at \
         RETURNING id",
    )
    .bind(state.name)
    .bind(state.backend)
    .bind(state.revision)
    .bind(state.snapshot_time_ms)
    .bind(state.node_count)
    .bind(state.pod_count)
    .bind(object_count)
    .bind(&counts)
    .bind(&warnings)
    .bind(now)
    .bind(now)
    .bind(incarnation)
    .fetch_one(&mut **tx)
    .await?;
    sqlx::query("DELETE FROM cluster_objects WHERE cluster_id = ?")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok((id, created))
}

async fn cluster_by_id(
    tx: &mut Transaction<'_, Sqlite>,
    id: i64,
) -> Result<ClusterRecord, StoreError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {CLUSTER_COLUMNS} FROM clusters WHERE id = ?"
    )))
    .bind(id)
    .fetch_one(&mut **tx)
    .await?;
    cluster_from_row(&row)
}

async fn insert_objects<'a>(
    tx: &mut Transaction<'static, Sqlite>,
    cluster_id: i64,
    mut objects: impl Iterator<Item = ObjectRow<'a>> + Send,
) -> Result<(), StoreError> {
    let full_batch_sql = insert_sql(INSERT_BATCH);
    let mut batch: Vec<ObjectRow<'a>> = Vec::with_capacity(INSERT_BATCH);
    loop {
        batch.clear();
        batch.extend(objects.by_ref().take(INSERT_BATCH));
        if batch.is_empty() {
            return Ok(());
        }
        let sql = if batch.len() == INSERT_BATCH {
            full_batch_sql.clone()
        } else {
            insert_sql(batch.len())
        };
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for object in &batch {
            query = query
                .bind(cluster_id)
                .bind(object.kind)
                .bind(object.api_version)
                .bind(object.namespace)
                .bind(object.name)
                .bind(object.uid)
                .bind(&*object.body);
        }
        query.execute(&mut **tx).await?;
    }
}

fn insert_sql(rows: usize) -> String {
    let mut sql = format!("INSERT INTO cluster_objects {OBJECT_COLUMNS} VALUES ");
    for i in 0..rows {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str("(?,?,?,?,?,?,?)");
    }
    sql
}
