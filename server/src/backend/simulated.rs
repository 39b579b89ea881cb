//! The simulated backend: the cluster lives in the database, the server plays scheduler and
//! controllers.
//!
//! - **Reservations** are cluster objects of kind `Reservation`
//!   (`scheduling.koordinator.sh/v1alpha1`, cluster-scoped, shaped like Koordinator's: the pod's
//!   template, `owners` = the pod's controller, `status.nodeName`/`phase`/`allocatable`/
//!   `currentOwners`), so they persist with the cluster and a snapshot push replaces them with the
//!   rest of its state. An `Available` reservation holds its `allocatable` (and a pod slot) on its
//!   node for every placement. The scheduler ([`rebalancer_cluster::scheduling`]) places a reservation
//!   at once, or reports why it cannot; an unschedulable reservation is **not** stored (no side
//!   effects), so asking again re-evaluates.
//! - **Evictions** follow policy/v1 Eviction: the pod's PDB is evaluated live
//!   ([`rebalancer_cluster::pdb`]); more than one PDB is refused; an evicted pod is deleted at once.
//! - **Controllers**: a pod controlled by a ReplicaSet, ReplicationController, StatefulSet or
//!   Job (not terminal) gets a replacement in the same transaction: same spec, new uid, name
//!   `<owner>-<5 chars>` (ReplicaSet, ReplicationController, Job) or the same name (StatefulSet),
//!   deterministic from the evicted uid. It binds into the oldest `Available` reservation whose
//!   owners match its controller (the reservation becomes `Succeeded`), else the scheduler places
//!   it by score (it may land back on the node it left); it is Running and Ready at once. When no
//!   node fits it stays Pending (`PodScheduled=False`, `Unschedulable`). Bare pods are not recreated.
//! - Every change is one SQL transaction (objects, cluster summary, event log), committed before
//!   the call returns; the in-memory snapshot is swapped right after, under the same lock as
//!   snapshot ingest, so a concurrent push and a backend change never interleave. Evicting a pod
//!   that is gone answers `NotFound` and changes nothing; the event log's unique index records
//!   each pod's eviction at most once.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use rebalancer_policy_sdk::evictor::PodPdbs;
use rebalancer_policy_sdk::k8s::quantity::parse_milli;
use rebalancer_policy_sdk::model::PodPhase;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use super::{
    Backend, BackendError, EvictionCheck, EvictionRequest, EvictionResult, OwnerRef, PodState,
    RESERVATION_ALLOCATED, ReservationRequest, ReservationState, controller_of, reservation_of,
};
use crate::ingest::Ingest;
use rebalancer_cluster::Clusters;
use rebalancer_cluster::pdb::{self, Budget, EvictedPod, Verdict};
use rebalancer_cluster::scheduling::{Constraints, Held, Scheduler};
use rebalancer_cluster::{ClusterSnapshot, ObjectKind, ResourceAmounts, StoredObjectBuf};
use rebalancer_store::backend::{BackendChange, ChangeError, NewSimEvent, SimEvent};
use rebalancer_store::{self as store, ClusterRecord, ObjectRow, Store, StoreError};

/// API version and kind of reservation objects.
pub const RESERVATION_API_VERSION: &str = "scheduling.koordinator.sh/v1alpha1";
pub const RESERVATION_KIND: &str = "Reservation";
/// Reservation label ordering reservations (oldest wins), Koordinator's.
pub const RESERVATION_ORDER: &str = "scheduling.koordinator.sh/reservation-order";
/// Reservation annotation: the uid of the pod it was made for.
pub const RESERVATION_FOR_POD: &str = "rebalancer.io/reserved-for-pod";
/// Pod annotation on a replacement: the uid of the pod it replaces.
pub const REPLACEMENT_OF: &str = "rebalancer.io/replacement-of";

/// Controllers that recreate their evicted pods.
const RECREATING_CONTROLLERS: [&str; 4] =
    ["ReplicaSet", "ReplicationController", "StatefulSet", "Job"];

/// Backend for clusters whose state lives in the database.
pub struct SimulatedBackend {
    store: Store,
    clusters: Clusters,
    /// The ingest lock ([`Ingest::lock`]): one change of a cluster's state at a time.
    lock: Arc<Mutex<()>>,
}

/// A reservation object, parsed.
#[derive(Debug, Clone)]
struct Reservation {
    name: String,
    body: Value,
}

impl Reservation {
    fn parse(body: &str) -> Result<Reservation, BackendError> {
        let body: Value = serde_json::from_str(body)
            .map_err(|e| BackendError::Internal(format!("stored reservation is not JSON: {e}")))?;
        let name = body["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Ok(Reservation { name, body })
    }

    fn phase(&self) -> &str {
        self.body["status"]["phase"].as_str().unwrap_or("Pending")
    }

    fn node(&self) -> Option<&str> {
        self.body["status"]["nodeName"]
            .as_str()
            .filter(|n| !n.is_empty())
    }

    fn for_pod(&self) -> &str {
        self.body["metadata"]["annotations"][RESERVATION_FOR_POD]
            .as_str()
            .unwrap_or_default()
    }

    fn order(&self) -> i64 {
        self.body["metadata"]["labels"][RESERVATION_ORDER]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(i64::MAX)
    }

    /// `status.allocatable` as `(resource, milli)`.
    fn allocatable(&self) -> Vec<(String, i64)> {
        self.body["status"]["allocatable"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), parse_milli(v.as_str()?).ok()?)))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn state(&self) -> ReservationState {
        match self.phase() {
            "Available" | "Waiting" => match self.node() {
                Some(node) => ReservationState::Scheduled {
                    node: node.to_owned(),
                },
                None => ReservationState::Pending,
            },
            "Succeeded" => ReservationState::Bound {
                node: self.node().unwrap_or_default().to_owned(),
                pod_uid: self.body["status"]["currentOwners"][0]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            },
            "Failed" => ReservationState::Released,
            _ => ReservationState::Pending,
        }
    }

    /// Owner matching (Koordinator §3.3, `controller` and `object` entries): any entry whose
    /// set fields all match the pod.
    fn matches(&self, namespace: &str, controller: Option<&OwnerRef>, uid: &str) -> bool {
        let Some(owners) = self.body["spec"]["owners"].as_array() else {
            return false;
        };
        owners.iter().any(|o| {
            let eq = |v: &Value, want: &str| v.as_str().is_none_or(|s| s == want);
            if let Some(c) = o.get("controller") {
                let Some(ctl) = controller else { return false };
                return eq(&c["namespace"], namespace)
                    && eq(&c["uid"], &ctl.uid)
                    && eq(&c["name"], &ctl.name)
                    && eq(&c["kind"], &ctl.kind);
            }
            if let Some(obj) = o.get("object") {
                return eq(&obj["uid"], uid) && eq(&obj["namespace"], namespace);
            }
            false
        })
    }
}

/// Exact quantity text for a milli-amount (`"1500m"`, `"2"`, bytes as integers).
fn quantity_text(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

fn rfc3339(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Deterministic identity of the replacement for `evicted_uid`: a uid and a 5-character
/// suffix drawn from the ReplicaSet name generator's alphabet.
fn replacement_identity(cluster: &str, evicted_uid: &str, attempt: u32) -> (String, String) {
    let digest = Sha256::digest(format!("{cluster}/{evicted_uid}/{attempt}").as_bytes());
    let hex = hex::encode(&digest[..16]);
    let uid = format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    );
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix = digest[16..21]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect();
    (uid, suffix)
}

fn phase_name(phase: PodPhase) -> &'static str {
    match phase {
        PodPhase::Pending => "Pending",
        PodPhase::Running => "Running",
        PodPhase::Succeeded => "Succeeded",
        PodPhase::Failed => "Failed",
        PodPhase::Unknown => "Unknown",
    }
}

fn store_error(e: StoreError) -> BackendError {
    match e {
        StoreError::Database(e) => BackendError::Unavailable(format!("database: {e}")),
        other => BackendError::Internal(other.to_string()),
    }
}

fn find_pod(snapshot: &ClusterSnapshot, uid: &str) -> Option<u32> {
    snapshot
        .cluster()
        .pods()
        .find(|p| p.uid() == uid)
        .map(|p| p.id)
}

fn pod_json(snapshot: &ClusterSnapshot, id: u32) -> Result<Value, BackendError> {
    let text = snapshot
        .object_json_of(ObjectKind::Pod, id)
        .ok_or_else(|| BackendError::Internal(format!("pod row {id} has no object")))?;
    serde_json::from_str(&text)
        .map_err(|e| BackendError::Internal(format!("stored pod is not JSON: {e}")))
}

fn pod_state(snapshot: &ClusterSnapshot, id: u32) -> Result<PodState, BackendError> {
    let cluster = snapshot.cluster();
    let pod = cluster.pod(id);
    let json = pod_json(snapshot, id)?;
    let reservation = reservation_of(&json);
    Ok(PodState {
        uid: pod.uid().to_owned(),
        namespace: pod.namespace().to_owned(),
        name: pod.name().to_owned(),
        node: Some(pod.node_name())
            .filter(|n| !n.is_empty())
            .map(str::to_owned),
        phase: phase_name(pod.phase()).to_owned(),
        ready: snapshot.index().pod_is_ready(id),
        owner: controller_of(&json),
        reservation,
        // The simulated cluster removes an evicted pod at once.
        terminating: false,
        created_ms: Some(pod.creation_ms()),
    })
}

/// The Eviction API's judgement of the pod's PDBs, evaluated on the live pods.
fn eviction_check_of(snapshot: &ClusterSnapshot, id: u32) -> Result<EvictionCheck, BackendError> {
    let cluster = snapshot.cluster();
    let index = snapshot.index();
    let pdb_name = |p: u32| {
        let raw = &cluster.archive().pdbs[p as usize];
        format!(
            "{}/{}",
            cluster.str(raw.namespace.to_native()),
            cluster.str(raw.name.to_native())
        )
    };
    let p = match index.pdbs_of_pod(id) {
        PodPdbs::None => return Ok(EvictionCheck::Allowed { pdb: None }),
        PodPdbs::Many(_) => {
            let pdbs = (0..cluster.archive().pdbs.len() as u32)
                .filter(|&p| index.pdb_pods(p).contains(&id))
                .map(pdb_name)
                .collect();
            return Ok(EvictionCheck::MultiplePdbs { pdbs });
        }
        PodPdbs::One(p) => p,
    };
    let name = pdb_name(p);
    let json: Value = snapshot
        .object_json_of(ObjectKind::PodDisruptionBudget, p)
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let budget = match Budget::from_pdb(&json) {
        Ok(b) => b,
        Err(e) => {
            return Ok(EvictionCheck::Blocked {
                pdb: name.clone(),
                reason: format!("PodDisruptionBudget {name} is invalid: {e}"),
            });
        }
    };
    let selected = index.pdb_pods(p);
    let healthy = selected
        .iter()
        .filter(|&&q| !cluster.pod(q).has_deletion_timestamp() && index.pod_is_ready(q))
        .count();
    // The controllers' scale: their non-terminal pods (the simulated controllers keep every
    // replica they want; pods without a controller are not counted, as upstream ignores them).
    let mut controllers = HashSet::new();
    for &q in selected {
        let pod = cluster.pod(q);
        if let Some(r) = pod.raw.owner_refs.iter().find(|r| r.controller) {
            controllers.insert(r.uid.to_native());
        }
    }
    let scale = if budget.uses_scale() {
        cluster
            .pods()
            .filter(|pod| {
                !pod.is_terminal()
                    && pod
                        .raw
                        .owner_refs
                        .iter()
                        .any(|r| r.controller && controllers.contains(&r.uid.to_native()))
            })
            .count()
    } else {
        0
    };
    let to_i32 = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let status = pdb::compute_status(
        &budget,
        to_i32(selected.len()),
        to_i32(scale),
        to_i32(healthy),
    );
    let pod = cluster.pod(id);
    let verdict = pdb::eviction_verdict(
        &name,
        &budget,
        &status,
        EvictedPod {
            not_running: pod.phase() != PodPhase::Running,
            terminating: pod.has_deletion_timestamp(),
            ready: index.pod_is_ready(id),
        },
    );
    Ok(match verdict {
        Verdict::Allowed { .. } => EvictionCheck::Allowed { pdb: Some(name) },
        Verdict::Blocked { message } => EvictionCheck::Blocked {
            pdb: name,
            reason: message,
        },
    })
}

/// A consistent view of one cluster for a change: its summary row and the snapshot of the
/// same revision.
struct Current {
    record: ClusterRecord,
    snapshot: Arc<ClusterSnapshot>,
}

impl SimulatedBackend {
    /// Changes the clusters `ingest` holds, under its lock, so a concurrent snapshot push and
    /// a backend change never interleave.
    pub fn new(ingest: Ingest) -> Self {
        let Ingest {
            store,
            clusters,
            lock,
        } = ingest;
        SimulatedBackend {
            store,
            clusters,
            lock,
        }
    }

    fn snapshot(&self, cluster: &str) -> Result<Arc<ClusterSnapshot>, BackendError> {
        self.clusters
            .get(cluster)
            .ok_or_else(|| BackendError::UnknownCluster(cluster.to_owned()))
    }

    /// Summary and snapshot at the same revision (call with the lock held).
    async fn current(&self, cluster: &str) -> Result<Current, BackendError> {
        let record = match self.store.get_cluster(cluster).await {
            Ok(r) => r,
            Err(StoreError::NotFound { .. }) => {
                return Err(BackendError::UnknownCluster(cluster.to_owned()));
            }
            Err(e) => return Err(store_error(e)),
        };
        let snapshot = self.snapshot(cluster)?;
        if snapshot.revision != record.revision as u64 {
            return Err(BackendError::Unavailable(format!(
                "cluster {cluster} is at revision {} in the database but {} in memory; \
                 its stored state did not load — push a new snapshot",
                record.revision, snapshot.revision
            )));
        }
        Ok(Current { record, snapshot })
    }

    async fn reservations(&self, cluster_id: i64) -> Result<Vec<Reservation>, BackendError> {
        self.store
            .cluster_objects_of_kind(cluster_id, RESERVATION_KIND)
            .await
            .map_err(store_error)?
            .iter()
            .map(|o| Reservation::parse(&o.body))
            .collect()
    }

    /// The capacity `Available` reservations hold, for the scheduler.
    fn held(snapshot: &ClusterSnapshot, reservations: &[Reservation]) -> Vec<Held> {
        let cluster = snapshot.cluster();
        reservations
            .iter()
            .filter(|r| matches!(r.state(), ReservationState::Scheduled { .. }))
            .filter_map(|r| {
                let node = r.node()?;
                let node = cluster.nodes().find(|n| n.name() == node)?.id;
                Some(Held {
                    node,
                    requests: r.allocatable(),
                    template_pod: find_pod(snapshot, r.for_pod()),
                })
            })
            .collect()
    }

    /// The event log of a cluster, oldest first.
    pub async fn events(&self, cluster: &str) -> Result<Vec<SimEvent>, BackendError> {
        self.store
            .simulated_events(cluster)
            .await
            .map_err(store_error)
    }

    /// Persist a change and swap in the snapshot built from the objects after it (call with
    /// the lock held). Objects keep the database's order, so a restart rebuilds the same
    /// snapshot.
    async fn commit(
        &self,
        current: &Current,
        delete_pods: Vec<String>,
        mut upserts: Vec<StoredObjectBuf>,
        events: Vec<NewSimEvent>,
    ) -> Result<(), BackendError> {
        let record = &current.record;
        let stored = self
            .store
            .cluster_objects(record.id)
            .await
            .map_err(store_error)?;
        let time_ms = store::now_ms();
        upserts.extend(koordlet_report(&stored, &delete_pods, &upserts, time_ms));
        let mut objects: Vec<StoredObjectBuf> = stored
            .into_iter()
            .filter(|o| {
                !(o.kind == "Pod"
                    && o.uid
                        .as_deref()
                        .is_some_and(|u| delete_pods.iter().any(|d| d == u)))
            })
            .map(|o| StoredObjectBuf {
                kind: o.kind,
                api_version: o.api_version,
                namespace: o.namespace,
                name: o.name,
                uid: o.uid,
                json: o.body,
            })
            .collect();
        for u in &upserts {
            objects
                .retain(|o| !(o.kind == u.kind && o.namespace == u.namespace && o.name == u.name));
            objects.push(u.clone());
        }
        let revision = self.clusters.next_revision();
        let snapshot = tokio::task::spawn_blocking(move || {
            crate::ingest::build_stored(objects, revision, time_ms)
        })
        .await
        .map_err(|e| BackendError::Internal(format!("snapshot task failed: {e}")))?
        .map_err(|e| BackendError::Internal(format!("the changed cluster does not build: {e}")))?;
        let counts = &snapshot.counts;
        let warnings = serde_json::to_value(&snapshot.warnings)
            .map_err(|e| BackendError::Internal(e.to_string()))?;
        let object_count = counts.values().sum::<u64>() as i64;
        let change = BackendChange {
            cluster_id: record.id,
            cluster: &record.name,
            base_revision: record.revision,
            revision: revision as i64,
            snapshot_time_ms: time_ms,
            node_count: counts.get("Node").copied().unwrap_or(0) as i64,
            pod_count: counts.get("Pod").copied().unwrap_or(0) as i64,
            object_count,
            counts,
            warnings: &warnings,
            delete_pods: delete_pods.iter().map(String::as_str).collect(),
            upserts: upserts
                .iter()
                .map(|o| ObjectRow {
                    kind: &o.kind,
                    api_version: &o.api_version,
                    namespace: o.namespace.as_deref(),
                    name: &o.name,
                    uid: o.uid.as_deref(),
                    body: o.json.as_str().into(),
                })
                .collect(),
            events,
        };
        match self.store.apply_backend_change(&change).await {
            Ok(()) => {}
            Err(ChangeError::Conflict(m)) => return Err(BackendError::Unavailable(m)),
            Err(ChangeError::Store(e)) => return Err(store_error(e)),
        }
        tracing::debug!(cluster = %record.name, revision, "simulated cluster changed");
        self.clusters.insert(&record.name, Arc::new(snapshot));
        Ok(())
    }

    /// The reservation object for pod `id`, placed on `node`.
    fn reservation_object(
        current: &Current,
        req: &ReservationRequest,
        id: u32,
        node: &str,
        pod: &Value,
    ) -> StoredObjectBuf {
        let snapshot = &current.snapshot;
        let cluster = snapshot.cluster();
        let p = cluster.pod(id);
        let now = store::now_ms();
        let mut template_spec = pod["spec"].clone();
        if let Some(spec) = template_spec.as_object_mut() {
            spec.remove("nodeName");
        }
        if !req.exclude_nodes.is_empty() {
            // Koordinator adds `metadata.name NotIn [current node]` to every required term.
            let not_in =
                json!({"key": "metadata.name", "operator": "NotIn", "values": req.exclude_nodes});
            let required = &mut template_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"];
            match required.as_array_mut() {
                Some(terms) if !terms.is_empty() => {
                    for t in terms {
                        match t["matchFields"].as_array_mut() {
                            Some(f) => f.push(not_in.clone()),
                            None => t["matchFields"] = json!([not_in.clone()]),
                        }
                    }
                }
                _ => *required = json!([{"matchFields": [not_in]}]),
            }
        }
        let owner = match controller_of(pod) {
            Some(c) => json!({"controller": {
                "apiVersion": c.api_version, "kind": c.kind, "name": c.name, "uid": c.uid,
                "controller": true, "namespace": p.namespace(),
            }}),
            None => json!({"object": {
                "apiVersion": "v1", "kind": "Pod", "name": p.name(), "namespace": p.namespace(),
                "uid": p.uid(),
            }}),
        };
        let allocatable: serde_json::Map<String, Value> = p
            .raw
            .requests
            .iter()
            .map(|q| {
                (
                    cluster.str(q.resource.to_native()).to_owned(),
                    Value::String(quantity_text(q.milli.to_native())),
                )
            })
            .collect();
        let (uid, _) = replacement_identity(
            &current.record.name,
            &format!("reservation/{}", req.name),
            0,
        );
        let ts = rfc3339(now);
        let body = json!({
            "apiVersion": RESERVATION_API_VERSION,
            "kind": RESERVATION_KIND,
            "metadata": {
                "name": req.name,
                "uid": uid,
                "creationTimestamp": ts,
                "labels": {
                    "app.kubernetes.io/created-by": "rebalancer",
                    RESERVATION_ORDER: now.to_string(),
                },
                "annotations": { RESERVATION_FOR_POD: p.uid() },
            },
            "spec": {
                "template": {
                    "metadata": {
                        "namespace": p.namespace(),
                        "labels": pod["metadata"]["labels"].clone(),
                    },
                    "spec": template_spec,
                },
                "owners": [owner],
                "allocateOnce": true,
            },
            "status": {
                "phase": "Available",
                "nodeName": node,
                "allocatable": allocatable,
                "conditions": [
                    {"type": "Scheduled", "status": "True", "reason": "Scheduled", "lastTransitionTime": ts},
                    {"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": ts},
                ],
            },
        });
        StoredObjectBuf {
            kind: RESERVATION_KIND.into(),
            api_version: RESERVATION_API_VERSION.into(),
            namespace: None,
            name: req.name.clone(),
            uid: Some(uid),
            json: body.to_string(),
        }
    }

    fn reservation_buf(r: &Reservation) -> StoredObjectBuf {
        StoredObjectBuf {
            kind: RESERVATION_KIND.into(),
            api_version: RESERVATION_API_VERSION.into(),
            namespace: None,
            name: r.name.clone(),
            uid: r.body["metadata"]["uid"].as_str().map(str::to_owned),
            json: r.body.to_string(),
        }
    }
}

/// The simulated cluster's koordlet: after a change, the NodeMetrics as koordlet would report
/// them next (see [`rebalancer_sim::koordlet::report`]): evicted pods leave their node's metric,
/// a replacement that landed carries the evicted pod's usage on its node, and every metric is
/// stamped now, so a simulated cluster's metrics never expire. Clusters without NodeMetrics
/// get nothing.
fn koordlet_report(
    stored: &[store::StoredObject],
    delete_pods: &[String],
    upserts: &[StoredObjectBuf],
    now_ms: i64,
) -> Vec<StoredObjectBuf> {
    use rebalancer_sim::koordlet::{PodRef, report};
    let metric_rows: Vec<&store::StoredObject> =
        stored.iter().filter(|o| o.kind == "NodeMetric").collect();
    if metric_rows.is_empty() {
        return Vec::new();
    }
    /// A pod's namespace, name and node.
    type Placed = (String, String, String);
    let pod_ref = |pod: &Value| -> Option<Placed> {
        Some((
            pod["metadata"]["namespace"].as_str()?.to_owned(),
            pod["metadata"]["name"].as_str()?.to_owned(),
            pod["spec"]["nodeName"].as_str()?.to_owned(),
        ))
    };
    // Only the few pods a change names are decoded, not every stored pod.
    let by_uid = |uid: &str| {
        let row = stored
            .iter()
            .find(|o| o.kind == "Pod" && o.uid.as_deref() == Some(uid))?;
        pod_ref(&serde_json::from_str(&row.body).ok()?)
    };
    let gone: Vec<Placed> = delete_pods.iter().filter_map(|uid| by_uid(uid)).collect();
    let moved: Vec<(Placed, Placed)> = upserts
        .iter()
        .filter(|o| o.kind == "Pod")
        .filter_map(|o| {
            let pod: Value = serde_json::from_str(&o.json).ok()?;
            let replaced = pod["metadata"]["annotations"][REPLACEMENT_OF].as_str()?;
            if pod["status"]["phase"] != "Running" {
                return None;
            }
            Some((pod_ref(&pod)?, by_uid(replaced)?))
        })
        .collect();
    fn as_ref((namespace, name, node): &(String, String, String)) -> PodRef<'_> {
        PodRef {
            namespace,
            name,
            node,
        }
    }
    let gone_refs: Vec<PodRef<'_>> = gone
        .iter()
        .filter(|g| !moved.iter().any(|(_, old)| old == *g))
        .map(as_ref)
        .collect();
    let moved_refs: Vec<(PodRef<'_>, PodRef<'_>)> = moved
        .iter()
        .map(|(new, old)| (as_ref(new), as_ref(old)))
        .collect();
    let mut metrics: Vec<Value> = metric_rows
        .iter()
        .map(|o| serde_json::from_str(&o.body).unwrap_or(Value::Null))
        .collect();
    let changed = report(&mut metrics, &gone_refs, &moved_refs, &rfc3339(now_ms));
    changed
        .into_iter()
        .map(|i| {
            let row = metric_rows[i];
            StoredObjectBuf {
                kind: row.kind.clone(),
                api_version: row.api_version.clone(),
                namespace: row.namespace.clone(),
                name: row.name.clone(),
                uid: row.uid.clone(),
                json: metrics[i].to_string(),
            }
        })
        .collect()
}

/// `(name, uid)` of the reservation a replacement binds into.
type ReservationRef<'a> = (&'a str, &'a str);

/// The replacement pod of an evicted one: the evicted pod's spec with a new identity,
/// bound to `node` (Running and Ready) or left Pending with the scheduler's message.
fn replacement_pod(
    evicted: &Value,
    name: &str,
    uid: &str,
    placement: Result<(&str, Option<ReservationRef<'_>>), &str>,
    now_ms: i64,
) -> Value {
    let ts = rfc3339(now_ms);
    let mut pod = evicted.clone();
    let meta = &mut pod["metadata"];
    if let Some(m) = meta.as_object_mut() {
        for k in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            m.remove(k);
        }
    }
    meta["name"] = json!(name);
    meta["uid"] = json!(uid);
    meta["creationTimestamp"] = json!(ts);
    if !meta["annotations"].is_object() {
        meta["annotations"] = json!({});
    }
    if let Some(a) = meta["annotations"].as_object_mut() {
        a.remove(RESERVATION_ALLOCATED);
    }
    meta["annotations"][REPLACEMENT_OF] = evicted["metadata"]["uid"].clone();
    let status = match placement {
        Ok((node, reservation)) => {
            pod["spec"]["nodeName"] = json!(node);
            if let Some((r_name, r_uid)) = reservation {
                pod["metadata"]["annotations"][RESERVATION_ALLOCATED] =
                    json!(json!({"name": r_name, "uid": r_uid}).to_string());
            }
            let containers: Vec<Value> = pod["spec"]["containers"]
                .as_array()
                .map(|cs| {
                    cs.iter()
                        .map(|c| {
                            json!({
                                "name": c["name"], "image": c["image"], "ready": true,
                                "started": true, "restartCount": 0,
                                "state": {"running": {"startedAt": ts}},
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            let cond = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": ts});
            json!({
                "phase": "Running",
                "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"), cond("ContainersReady"), cond("PodScheduled")],
                "containerStatuses": containers,
                "qosClass": evicted["status"]["qosClass"],
                "startTime": ts,
            })
        }
        Err(message) => {
            if let Some(spec) = pod["spec"].as_object_mut() {
                spec.remove("nodeName");
            }
            json!({
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                "message": message, "lastTransitionTime": ts}],
                "qosClass": evicted["status"]["qosClass"],
            })
        }
    };
    pod["status"] = status;
    pod
}

#[async_trait]
impl Backend for SimulatedBackend {
    async fn pod(&self, cluster: &str, uid: &str) -> Result<Option<PodState>, BackendError> {
        let snapshot = self.snapshot(cluster)?;
        find_pod(&snapshot, uid)
            .map(|id| pod_state(&snapshot, id))
            .transpose()
    }

    async fn eviction_check(
        &self,
        cluster: &str,
        uid: &str,
    ) -> Result<EvictionCheck, BackendError> {
        let snapshot = self.snapshot(cluster)?;
        match find_pod(&snapshot, uid) {
            Some(id) => eviction_check_of(&snapshot, id),
            None => Ok(EvictionCheck::PodNotFound),
        }
    }

    async fn reserve(
        &self,
        cluster: &str,
        req: &ReservationRequest,
    ) -> Result<ReservationState, BackendError> {
        if req.name.is_empty() || req.name.len() > 253 {
            return Err(BackendError::Invalid(format!(
                "reservation name {:?} must be 1 to 253 characters",
                req.name
            )));
        }
        let _one_change_at_a_time = self.lock.lock().await;
        let current = self.current(cluster).await?;
        let reservations = self.reservations(current.record.id).await?;
        if let Some(existing) = reservations.iter().find(|r| r.name == req.name) {
            if existing.for_pod() != req.pod_uid {
                return Err(BackendError::Invalid(format!(
                    "reservation {} already exists for another pod ({})",
                    req.name,
                    existing.for_pod()
                )));
            }
            return Ok(existing.state());
        }
        let snapshot = &current.snapshot;
        let Some(id) = find_pod(snapshot, &req.pod_uid) else {
            return Ok(ReservationState::Unschedulable {
                reason: format!("pod {} no longer exists", req.pod_uid),
            });
        };
        let held = Self::held(snapshot, &reservations);
        let index = snapshot.index();
        let scheduler = Scheduler::new(snapshot.cluster(), &index, &held);
        let constraints = Constraints {
            target: req.target_node.as_deref(),
            exclude: &req.exclude_nodes,
        };
        let node = match scheduler.place(snapshot.cluster().pod(id), constraints) {
            Ok(node) => snapshot.cluster().node(node).name().to_owned(),
            Err(unschedulable) => {
                return Ok(ReservationState::Unschedulable {
                    reason: unschedulable.to_string(),
                });
            }
        };
        let pod = pod_json(snapshot, id)?;
        let object = Self::reservation_object(&current, req, id, &node, &pod);
        let p = snapshot.cluster().pod(id);
        let event = NewSimEvent {
            reason: "ReservationScheduled",
            pod_uid: Some(req.pod_uid.clone()),
            namespace: Some(p.namespace().to_owned()),
            pod_name: Some(p.name().to_owned()),
            node: Some(node.clone()),
            reservation: Some(req.name.clone()),
            message: format!("Assigned Reservation {} to node {node}", req.name),
            ..Default::default()
        };
        self.commit(&current, Vec::new(), vec![object], vec![event])
            .await?;
        Ok(ReservationState::Scheduled { node })
    }

    async fn reservation(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<Option<ReservationState>, BackendError> {
        let record = self.store.get_cluster(cluster).await.map_err(|e| match e {
            StoreError::NotFound { .. } => BackendError::UnknownCluster(cluster.to_owned()),
            e => store_error(e),
        })?;
        Ok(self
            .reservations(record.id)
            .await?
            .iter()
            .find(|r| r.name == name)
            .map(Reservation::state))
    }

    async fn release(&self, cluster: &str, name: &str) -> Result<(), BackendError> {
        let _one_change_at_a_time = self.lock.lock().await;
        let current = self.current(cluster).await?;
        let reservations = self.reservations(current.record.id).await?;
        let Some(r) = reservations.iter().find(|r| r.name == name) else {
            return Ok(());
        };
        if !matches!(
            r.state(),
            ReservationState::Scheduled { .. } | ReservationState::Pending
        ) {
            return Ok(());
        }
        let mut released = r.clone();
        let ts = rfc3339(store::now_ms());
        released.body["status"]["phase"] = json!("Failed");
        released.body["status"]["conditions"] = json!([
            {"type": "Scheduled", "status": "True", "reason": "Scheduled"},
            {"type": "Ready", "status": "False", "reason": "Released",
             "message": "released by Rebalancer", "lastTransitionTime": ts},
        ]);
        let event = NewSimEvent {
            reason: "ReservationReleased",
            pod_uid: Some(r.for_pod().to_owned()),
            node: r.node().map(str::to_owned),
            reservation: Some(name.to_owned()),
            message: format!("Released Reservation {name}"),
            ..Default::default()
        };
        self.commit(
            &current,
            Vec::new(),
            vec![Self::reservation_buf(&released)],
            vec![event],
        )
        .await
    }

    async fn evict(
        &self,
        cluster: &str,
        request: &EvictionRequest,
    ) -> Result<EvictionResult, BackendError> {
        let uid = request.uid.as_str();
        let _one_change_at_a_time = self.lock.lock().await;
        let current = self.current(cluster).await?;
        let snapshot = &current.snapshot;
        let Some(id) = find_pod(snapshot, uid) else {
            return Ok(EvictionResult::NotFound);
        };
        match eviction_check_of(snapshot, id)? {
            EvictionCheck::Allowed { .. } => {}
            EvictionCheck::Blocked { pdb, reason } => {
                return Ok(EvictionResult::BlockedByPdb {
                    pdb,
                    message: reason,
                });
            }
            EvictionCheck::MultiplePdbs { pdbs } => {
                return Ok(EvictionResult::Refused {
                    message: format!(
                        "This pod has more than one PodDisruptionBudget, which the eviction \
                         subresource does not support ({})",
                        pdbs.join(", ")
                    ),
                });
            }
            EvictionCheck::PodNotFound => return Ok(EvictionResult::NotFound),
        }
        let cl = snapshot.cluster();
        let p = cl.pod(id);
        let pod = pod_json(snapshot, id)?;
        let node = p.node_name().to_owned();
        let now = store::now_ms();
        let mut events = vec![NewSimEvent {
            reason: "Evicted",
            pod_uid: Some(uid.to_owned()),
            namespace: Some(p.namespace().to_owned()),
            pod_name: Some(p.name().to_owned()),
            node: Some(node.clone()).filter(|n| !n.is_empty()),
            message: format!(
                "Evicted pod {}/{} from node {node}",
                p.namespace(),
                p.name()
            ),
            ..Default::default()
        }];
        let mut upserts = Vec::new();
        let controller = controller_of(&pod);
        let recreate = controller
            .as_ref()
            .is_some_and(|c| RECREATING_CONTROLLERS.contains(&c.kind.as_str()))
            && !p.is_terminal();
        if let (true, Some(ctl)) = (recreate, controller.as_ref()) {
            // Identity: StatefulSets keep the name; the others generate one.
            let mut attempt = 0;
            let (new_uid, new_name) = loop {
                let (u, suffix) = replacement_identity(cluster, uid, attempt);
                let name = if ctl.kind == "StatefulSet" {
                    p.name().to_owned()
                } else {
                    format!("{}-{suffix}", ctl.name)
                };
                let taken = cl
                    .pods()
                    .any(|o| o.id != id && o.namespace() == p.namespace() && o.name() == name);
                if !taken || attempt > 16 {
                    break (u, name);
                }
                attempt += 1;
            };
            let reservations = self.reservations(current.record.id).await?;
            let bound = reservations
                .iter()
                .filter(|r| {
                    matches!(r.state(), ReservationState::Scheduled { .. })
                        && r.matches(p.namespace(), Some(ctl), &new_uid)
                        && r.node().is_some_and(|n| cl.nodes().any(|x| x.name() == n))
                })
                .min_by(|a, b| a.order().cmp(&b.order()).then_with(|| a.name.cmp(&b.name)));
            let (placement, message) = match bound {
                Some(r) => {
                    let node = r.node().unwrap_or_default().to_owned();
                    let mut consumed = r.clone();
                    let ts = rfc3339(now);
                    consumed.body["status"]["phase"] = json!("Succeeded");
                    consumed.body["status"]["currentOwners"] =
                        json!([{"namespace": p.namespace(), "name": new_name, "uid": new_uid}]);
                    consumed.body["status"]["allocated"] =
                        consumed.body["status"]["allocatable"].clone();
                    consumed.body["status"]["conditions"] = json!([
                        {"type": "Scheduled", "status": "True", "reason": "Scheduled"},
                        {"type": "Ready", "status": "False", "reason": "Succeeded", "lastTransitionTime": ts},
                    ]);
                    upserts.push(Self::reservation_buf(&consumed));
                    let msg = format!(
                        "Created pod {}/{new_name} replacing {}, bound into Reservation {} on node {node}",
                        p.namespace(),
                        p.name(),
                        r.name
                    );
                    (
                        Ok((
                            node,
                            Some((
                                r.name.clone(),
                                consumed.body["metadata"]["uid"]
                                    .as_str()
                                    .unwrap_or_default()
                                    .to_owned(),
                            )),
                        )),
                        msg,
                    )
                }
                None => {
                    let held = Self::held(snapshot, &reservations);
                    let index = snapshot.index();
                    let scheduler = Scheduler::new(cl, &index, &held);
                    match scheduler.place(p, Constraints::default()) {
                        Ok(n) => {
                            let node = cl.node(n).name().to_owned();
                            let msg = format!(
                                "Created pod {}/{new_name} replacing {}, scheduled on node {node}",
                                p.namespace(),
                                p.name()
                            );
                            (Ok((node, None)), msg)
                        }
                        Err(u) => {
                            let msg = format!(
                                "Created pod {}/{new_name} replacing {}; it stays Pending: {u}",
                                p.namespace(),
                                p.name()
                            );
                            (Err(u.to_string()), msg)
                        }
                    }
                }
            };
            let replacement = replacement_pod(
                &pod,
                &new_name,
                &new_uid,
                match &placement {
                    Ok((node, r)) => Ok((
                        node.as_str(),
                        r.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
                    )),
                    Err(m) => Err(m.as_str()),
                },
                now,
            );
            upserts.push(StoredObjectBuf {
                kind: "Pod".into(),
                api_version: "v1".into(),
                namespace: Some(p.namespace().to_owned()),
                name: new_name.clone(),
                uid: Some(new_uid.clone()),
                json: replacement.to_string(),
            });
            events.push(NewSimEvent {
                reason: "ReplacementCreated",
                pod_uid: Some(uid.to_owned()),
                namespace: Some(p.namespace().to_owned()),
                pod_name: Some(new_name),
                node: placement.as_ref().ok().map(|(n, _)| n.clone()),
                replacement_uid: Some(new_uid),
                reservation: placement.ok().and_then(|(_, r)| r.map(|(name, _)| name)),
                message,
            });
        }
        self.commit(&current, vec![uid.to_owned()], upserts, events)
            .await?;
        Ok(EvictionResult::Evicted)
    }

    async fn reserved(
        &self,
        cluster: &str,
    ) -> Result<BTreeMap<String, ResourceAmounts>, BackendError> {
        let record = self.store.get_cluster(cluster).await.map_err(|e| match e {
            StoreError::NotFound { .. } => BackendError::UnknownCluster(cluster.to_owned()),
            e => store_error(e),
        })?;
        let mut out: BTreeMap<String, ResourceAmounts> = BTreeMap::new();
        for r in self.reservations(record.id).await? {
            if let ReservationState::Scheduled { node } = r.state() {
                let e = out.entry(node).or_default();
                for (res, milli) in r.allocatable() {
                    match res.as_str() {
                        "cpu" => e.cpu_milli += milli,
                        // Bytes, rounded up like `requested`.
                        "memory" => {
                            e.memory_bytes +=
                                milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0)
                        }
                        _ => {}
                    }
                }
                e.pods += 1;
            }
        }
        Ok(out)
    }

    /// The simulated controllers record which pod replaced which: that one, and only it.
    async fn replacements_of(
        &self,
        cluster: &str,
        evicted: &super::EvictedPod,
    ) -> Result<Vec<PodState>, BackendError> {
        let snapshot = self.snapshot(cluster)?;
        let Some(uid) = self
            .store
            .simulated_replacement(cluster, &evicted.uid)
            .await
            .map_err(store_error)?
        else {
            return Ok(Vec::new());
        };
        find_pod(&snapshot, &uid)
            .map(|id| pod_state(&snapshot, id))
            .transpose()
            .map(|p| p.into_iter().collect())
    }
}
