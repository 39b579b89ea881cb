//! Snapshot ingest: a Kubernetes document (pushed, or the objects stored at start-up) →
//! parsed objects → a built snapshot → persisted → swapped into [`Clusters`].
//!
//! Owns: [`Ingest`] (the store, the live clusters and the ingest lock: one change of a
//! cluster's state at a time, shared with the simulated backend), [`Ingest::snapshot`] (a push:
//! the previous state is untouched on any error), [`Ingest::load_stored`] (start-up), and the
//! naming rule of clusters and profiles ([`check_name`]).
//! Must not: hold SQL (that is `store`), parse Kubernetes objects itself (that is
//! `rebalancer_cluster`) or build HTTP responses (`http::clusters` maps [`IngestFailure`]).

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Mutex;

use rebalancer_cluster::{self as cluster, ClusterSnapshot, Clusters, StoredObjectBuf};
use rebalancer_store::{self as store, ClusterRecord, NewClusterState, Store};

/// The cluster lives in the database (pushed snapshots; the simulated backend acts on it).
pub const BACKEND_SIMULATED: &str = "simulated";
/// The cluster lives in a Kubernetes API server the server watches (`rebalancer-kube`).
pub const BACKEND_KUBERNETES: &str = "kubernetes";

/// What ingest needs. Cheap to clone.
#[derive(Clone)]
pub struct Ingest {
    pub store: Store,
    pub clusters: Clusters,
    /// One change of a cluster's state at a time (a push may hold several hundred MB while it
    /// runs; the simulated backend takes it for every change it makes).
    pub lock: Arc<Mutex<()>>,
}

/// Why a snapshot was not ingested.
#[derive(Debug, thiserror::Error)]
pub enum IngestFailure {
    #[error("invalid cluster name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error(transparent)]
    Document(#[from] cluster::IngestError),
    /// No node and no pod, and the client did not say `allowEmpty`: most likely a failed
    /// `kubectl get` piped into the push, which would wipe the cluster.
    #[error("the snapshot for cluster {name:?} holds no node and no pod")]
    Empty {
        name: String,
        /// Objects of other kinds in the snapshot.
        objects: usize,
        /// Nodes and pods of the state it would replace (`None`: a new cluster).
        replaces: Option<(i64, i64)>,
    },
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("ingest task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// What an ingest did.
#[derive(Debug)]
pub struct IngestOutcome {
    pub record: ClusterRecord,
    pub created: bool,
    pub parse_ms: f64,
    pub build_ms: f64,
    pub persist_ms: f64,
    pub total_ms: f64,
}

/// Names of clusters and profiles (they appear in URLs): 1–63 of `a-z 0-9 - . _`, starting and
/// ending with a letter or digit.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 63 {
        return Err("must be 1 to 63 characters long");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err("may only contain lower-case letters, digits, '-', '.' and '_'");
    }
    let edge = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !edge(name.as_bytes()[0]) || !edge(name.as_bytes()[name.len() - 1]) {
        return Err("must start and end with a lower-case letter or a digit");
    }
    Ok(())
}

/// Milliseconds since `since`.
pub(crate) fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// Build a snapshot from stored objects (in the database's order) and compact it. CPU-bound:
/// call from `spawn_blocking`.
pub(crate) fn build_stored(
    objects: impl IntoIterator<Item = StoredObjectBuf>,
    revision: u64,
    time_ms: i64,
) -> Result<ClusterSnapshot, cluster::IngestError> {
    let set = cluster::ObjectSet::from_stored(objects)?;
    let mut snapshot = cluster::build_snapshot(&set, revision, time_ms)?;
    drop(set);
    snapshot.compact_json();
    Ok(snapshot)
}

impl Ingest {
    pub fn new(store: Store, clusters: Clusters) -> Ingest {
        Ingest {
            store,
            clusters,
            lock: Arc::new(Mutex::new(())),
        }
    }

    /// Delete a pushed cluster (see [`Store::delete_cluster`]) and forget its in-memory
    /// state, one change at a time with pushes.
    pub async fn delete_cluster(
        &self,
        name: &str,
        actor: &str,
    ) -> Result<store::ClusterDeletion, store::StoreError> {
        let _one_at_a_time = self.lock.lock().await;
        let outcome = self.store.delete_cluster(name, actor).await?;
        if matches!(outcome, store::ClusterDeletion::Deleted(_)) {
            self.clusters.remove(name);
        }
        Ok(outcome)
    }

    /// Replace (or create) a cluster's state from a Kubernetes `List` document: parse, build
    /// the snapshot, persist in one transaction, and only then swap the in-memory snapshot.
    /// A List without nodes and pods is refused ([`IngestFailure::Empty`]). On any error the
    /// previous state is untouched.
    pub async fn snapshot(
        &self,
        name: &str,
        body: Vec<u8>,
        format: cluster::Format,
        observed_at_ms: Option<i64>,
    ) -> Result<IngestOutcome, IngestFailure> {
        self.snapshot_allowing_empty(name, body, format, observed_at_ms, false)
            .await
    }

    /// [`Ingest::snapshot`], accepting a List without nodes and pods when `allow_empty` (the
    /// client said so: `?allowEmpty=true`).
    pub async fn snapshot_allowing_empty(
        &self,
        name: &str,
        body: Vec<u8>,
        format: cluster::Format,
        observed_at_ms: Option<i64>,
        allow_empty: bool,
    ) -> Result<IngestOutcome, IngestFailure> {
        check_name(name).map_err(|reason| IngestFailure::InvalidName {
            name: name.to_string(),
            reason,
        })?;
        let _one_at_a_time = self.lock.lock().await;
        let started = Instant::now();

        let objects =
            tokio::task::spawn_blocking(move || cluster::parse_list(body, format)).await??;
        let parse_ms = ms(started);
        let revision = self.clusters.next_revision();
        let time_ms = observed_at_ms.unwrap_or_else(store::now_ms);
        let build_started = Instant::now();
        let (objects, snapshot) = tokio::task::spawn_blocking(move || {
            let snapshot = cluster::build_snapshot(&objects, revision, time_ms)?;
            Ok::<_, cluster::IngestError>((objects, snapshot))
        })
        .await??;
        let build_ms = ms(build_started);
        // After every other check: an empty List is refused only when it is otherwise valid.
        let modelled = |kind| objects.count_of(kind);
        if !allow_empty
            && modelled(cluster::ObjectKind::Node) == 0
            && modelled(cluster::ObjectKind::Pod) == 0
        {
            let replaces = match self.store.get_cluster(name).await {
                Ok(current) => Some((current.node_count, current.pod_count)),
                Err(store::StoreError::NotFound { .. }) => None,
                Err(e) => return Err(e.into()),
            };
            return Err(IngestFailure::Empty {
                name: name.to_owned(),
                objects: objects.len(),
                replaces,
            });
        }

        let counts = &snapshot.counts;
        let warnings = serde_json::to_value(&snapshot.warnings)
            .map_err(|e| store::StoreError::corrupt("ingest warnings", e))?;
        let rows = objects.stored_objects().map(|o| store::ObjectRow {
            kind: o.kind,
            api_version: o.api_version,
            namespace: o.namespace,
            name: o.name,
            uid: o.uid,
            body: o.json,
        });
        let persist_started = Instant::now();
        let (record, created) = self
            .store
            .replace_cluster_state(
                &NewClusterState {
                    name,
                    backend: BACKEND_SIMULATED,
                    revision: revision as i64,
                    snapshot_time_ms: time_ms,
                    node_count: counts.get("Node").copied().unwrap_or(0) as i64,
                    pod_count: counts.get("Pod").copied().unwrap_or(0) as i64,
                    counts,
                    warnings: &warnings,
                },
                rows,
            )
            .await?;
        let persist_ms = ms(persist_started);
        // The object set holds the whole pushed document; once persisted, keep only the
        // compressed rows.
        drop(objects);
        let snapshot = tokio::task::spawn_blocking(move || {
            let mut snapshot = snapshot;
            snapshot.compact_json();
            snapshot
        })
        .await?;
        let warning_count = snapshot.warnings.len();
        self.clusters.insert(name, Arc::new(snapshot));
        let outcome = IngestOutcome {
            record,
            created,
            parse_ms,
            build_ms,
            persist_ms,
            total_ms: ms(started),
        };
        tracing::info!(
            cluster = name,
            revision,
            objects = outcome.record.object_count,
            warnings = warning_count,
            parse_ms = outcome.parse_ms,
            build_ms = outcome.build_ms,
            persist_ms = outcome.persist_ms,
            "cluster snapshot ingested"
        );
        Ok(outcome)
    }

    /// Rebuild the snapshot of every stored cluster (start-up). A cluster whose stored objects
    /// no longer build stays in the database, unloaded, with an error in the log.
    /// Clusters named in `live` (and every cluster last seen live) keep no stored objects:
    /// their state comes from their API server.
    pub async fn load_stored(&self, live: &[String]) -> Result<(), IngestFailure> {
        for record in self.store.list_clusters().await? {
            self.clusters.raise_revision(record.revision as u64);
            if record.backend == BACKEND_KUBERNETES || live.contains(&record.name) {
                continue;
            }
            let started = Instant::now();
            let objects = self.store.cluster_objects(record.id).await?;
            let (revision, time_ms) = (record.revision as u64, record.snapshot_time_ms);
            let built = tokio::task::spawn_blocking(move || {
                let objects = objects.into_iter().map(|o| StoredObjectBuf {
                    kind: o.kind,
                    api_version: o.api_version,
                    namespace: o.namespace,
                    name: o.name,
                    uid: o.uid,
                    json: o.body,
                });
                build_stored(objects, revision, time_ms)
            })
            .await?;
            match built {
                Ok(snapshot) => {
                    tracing::info!(cluster = %record.name, revision, objects = record.object_count, load_ms = ms(started), "cluster loaded");
                    self.clusters.insert(&record.name, Arc::new(snapshot));
                }
                Err(e) => tracing::error!(
                    cluster = %record.name,
                    error = %e,
                    "the stored state of this cluster does not build; push a new snapshot"
                ),
            }
        }
        Ok(())
    }
}

/// Live revisions of Kubernetes clusters: persisted as a summary row (no objects) under the
/// ingest lock, then made current.
#[async_trait::async_trait]
impl rebalancer_kube::SnapshotSink for Ingest {
    fn next_revision(&self) -> u64 {
        self.clusters.next_revision()
    }

    async fn install(&self, name: &str, snapshot: ClusterSnapshot) -> Result<(), String> {
        let _one_at_a_time = self.lock.lock().await;
        let counts = &snapshot.counts;
        let warnings = serde_json::to_value(&snapshot.warnings).map_err(|e| e.to_string())?;
        let objects: u64 = counts.values().sum();
        self.store
            .record_live_cluster_state(
                &NewClusterState {
                    name,
                    backend: BACKEND_KUBERNETES,
                    revision: snapshot.revision as i64,
                    snapshot_time_ms: snapshot.time_ms,
                    node_count: counts.get("Node").copied().unwrap_or(0) as i64,
                    pod_count: counts.get("Pod").copied().unwrap_or(0) as i64,
                    counts,
                    warnings: &warnings,
                },
                objects as i64,
            )
            .await
            .map_err(|e| e.to_string())?;
        self.clusters.insert(name, Arc::new(snapshot));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["demo", "prod-eu-1", "a", "x.y_z", "0"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Prod", "-a", "a-", "a b", "é", &"x".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
