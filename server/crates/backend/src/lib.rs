//! # The backend contract
//!
//! Where pod migrations act on a cluster. Owns the [`Backend`] trait the pod-migration executor
//! calls (pod lookup, PDB pre-check, reservations, eviction, finding the replacement) and its
//! value types. Implementations live elsewhere: the simulated backend in the server (the
//! cluster lives in the database; the server plays scheduler and controllers) and the
//! Kubernetes backend in `rebalancer-kube` (kube-rs against a real API server).
//! Must not: decide *whether* to move a pod (that is the executor and arbitration) or build
//! HTTP responses.
//!
//! Every method is idempotent or read-only, so the executor can repeat any step after a crash:
//! `reserve` is keyed by the reservation name, `release` of a released or unknown reservation
//! is a no-op, `evict` of a pod that is already gone answers [`EvictionResult::NotFound`] and of
//! one that is already terminating [`EvictionResult::AlreadyTerminating`], changing nothing, and
//! `record_eviction` writes what the cluster is told of an eviction once per pod, however often
//! it is called.

mod repeated;

pub use repeated::Repeated;

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use rebalancer_cluster::ResourceAmounts;

/// A pod's controller (`ownerReferences[]` entry with `controller: true`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// A pod as the backend sees it now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodState {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName`; `None` while the pod is not scheduled.
    pub node: Option<String>,
    /// `status.phase` (`Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`).
    pub phase: String,
    /// The pod's `Ready` condition is `True`.
    pub ready: bool,
    /// The controller owner reference, if any.
    pub owner: Option<OwnerRef>,
    /// Name of the reservation this pod was bound into, if any.
    pub reservation: Option<String>,
    /// Deletion has started (`metadata.deletionTimestamp` is set): the pod is on its way out,
    /// still holding its node until its containers stop.
    #[serde(default)]
    pub terminating: bool,
    /// `metadata.creationTimestamp`, in ms since the epoch (when known).
    #[serde(default)]
    pub created_ms: Option<i64>,
}

/// Whether the Eviction API would admit evicting a pod now, judged from its PDBs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum EvictionCheck {
    /// No PDB covers the pod, or its PDB has headroom (`pdb` names it when there is one).
    Allowed { pdb: Option<String> },
    /// The covering PDB has no disruption left (the Eviction API would answer 429).
    Blocked { pdb: String, reason: String },
    /// More than one PDB selects the pod: the Eviction API refuses such pods outright.
    MultiplePdbs { pdbs: Vec<String> },
    /// The pod does not exist (any more).
    PodNotFound,
}

/// What the replacement pod's reservation should look like.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationRequest {
    /// Unique name; `reserve` is idempotent on it (a second call returns the existing state).
    pub name: String,
    /// The pod to be replaced: the reservation copies its requests, node selector, required node
    /// affinity, tolerations and required pod anti-affinity, and is owned by its controller.
    pub pod_uid: String,
    /// Pin the reservation to this node (fails as unschedulable when it does not fit there).
    pub target_node: Option<String>,
    /// Nodes the reservation must not land on (normally the pod's current node).
    pub exclude_nodes: Vec<String>,
}

/// What holds room for a replacement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReservationKind {
    /// A reservation object the scheduler honours (Koordinator's `Reservation`, or the
    /// simulated backend's own).
    Reservation,
    /// A low-priority pause pod holding the requests on the target node until the replacement
    /// is Ready (preempted by the replacement where the node has no room for both).
    PlaceholderPod,
}

impl ReservationKind {
    /// How messages name it: `Reservation`, `placeholder pod`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationKind::Reservation => "Reservation",
            ReservationKind::PlaceholderPod => "placeholder pod",
        }
    }
}

impl std::fmt::Display for ReservationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reservation's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "camelCase")]
pub enum ReservationState {
    /// Created, not yet placed (a backend with an asynchronous scheduler).
    Pending,
    /// Placed: capacity is held on `node`.
    Scheduled { node: String },
    /// The scheduler found no node; `reason` says why (per-node reasons summarised).
    Unschedulable { reason: String },
    /// A replacement pod consumed it.
    Bound { node: String, pod_uid: String },
    /// Released (or expired): holds nothing.
    Released,
}

/// The outcome of an eviction (policy/v1 Eviction semantics).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum EvictionResult {
    /// The pod was evicted; its controller (if any) creates a replacement.
    Evicted,
    /// The pod is already terminating (an earlier eviction, perhaps this pod migration's own
    /// before a crash, or a deletion): no second eviction was requested.
    AlreadyTerminating,
    /// Refused by a PDB (HTTP 429): retry later.
    BlockedByPdb { pdb: String, message: String },
    /// Refused for a reason retrying will not fix (e.g. the pod has several PDBs).
    Refused { message: String },
    /// The pod is already gone: nothing was done.
    NotFound,
}

/// One eviction, with what the cluster should be told about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionRequest {
    /// The pod to evict: only this uid (a same-named replacement is never evicted).
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `deleteOptions.gracePeriodSeconds` (the profile's `gracePeriodSeconds`); `None` leaves
    /// the pod's own `terminationGracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// Why (the decision's reason); written into the eviction's Event and annotations.
    pub reason: String,
    /// Who asked (the plugin that proposed the move).
    pub trigger: String,
}

/// An evicted pod whose replacement is looked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictedPod {
    pub uid: String,
    pub namespace: String,
    /// The uid of the pod's controller; a replacement is a newer pod of the same controller.
    pub owner_uid: Option<String>,
    /// When the eviction was requested (ms since the epoch): a replacement is created after it.
    pub evicted_at_ms: Option<i64>,
    /// The reservation made for the replacement, if any: a pod bound into it comes first.
    pub reservation: Option<String>,
}

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("cluster {0:?} is not known to the backend")]
    UnknownCluster(String),
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The cluster's credentials do not allow the call (401/403): retrying cannot help until
    /// the RBAC or the credentials change.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// A failure that may go away on retry (database busy, API server unreachable).
    #[error("backend temporarily unavailable: {0}")]
    Unavailable(String),
    #[error("backend failure: {0}")]
    Internal(String),
}

impl BackendError {
    /// Worth retrying the same call later. Everything else fails the step that made the call
    /// at once: an invalid or forbidden request stays invalid or forbidden.
    pub fn is_transient(&self) -> bool {
        matches!(self, BackendError::Unavailable(_))
    }
}

/// What the pod-migration executor needs from a cluster. Object safe: held as `Arc<dyn Backend>`.
#[async_trait]
pub trait Backend: Send + Sync {
    /// The pod now, `None` when it no longer exists.
    async fn pod(&self, cluster: &str, uid: &str) -> Result<Option<PodState>, BackendError>;

    /// PDB headroom for evicting this pod now, as the Eviction API would judge it.
    async fn eviction_check(&self, cluster: &str, uid: &str)
    -> Result<EvictionCheck, BackendError>;

    /// What a reservation for a replacement of pod `pod_uid` would be (asked before `reserve`,
    /// so that messages name it).
    async fn reservation_kind(
        &self,
        cluster: &str,
        pod_uid: &str,
    ) -> Result<ReservationKind, BackendError> {
        let _ = (cluster, pod_uid);
        Ok(ReservationKind::Reservation)
    }

    /// Create (idempotently, keyed by `req.name`) a reservation for a replacement of pod
    /// `req.pod_uid`. The simulated scheduler places it at once or reports why not; a
    /// reservation that is `Unschedulable` holds nothing.
    async fn reserve(
        &self,
        cluster: &str,
        req: &ReservationRequest,
    ) -> Result<ReservationState, BackendError>;

    /// Current state of a reservation, `None` if it was never created.
    async fn reservation(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<Option<ReservationState>, BackendError>;

    /// Release (idempotent): frees held capacity; the state becomes `Released`. Releasing an
    /// unknown or already released reservation does nothing; a `Bound` one holds nothing any
    /// more and stays `Bound` (the pod bound into it keeps running).
    async fn release(&self, cluster: &str, name: &str) -> Result<(), BackendError>;

    /// Evict like policy/v1 Eviction, with the pod's uid as a precondition, at most once: a pod
    /// that is gone or has another uid answers [`EvictionResult::NotFound`], one that is already
    /// terminating [`EvictionResult::AlreadyTerminating`], and neither is evicted again (a real
    /// API server accepts a second eviction of a terminating pod).
    async fn evict(
        &self,
        cluster: &str,
        request: &EvictionRequest,
    ) -> Result<EvictionResult, BackendError>;

    /// Tell the cluster about an eviction this server requested (Kubernetes: the `Descheduled`
    /// Event on the pod), exactly once per pod uid however often it is called, so the executor
    /// calls it after every `evict` that did not fail, and again when it resumes a pod
    /// migration that may have evicted before a crash. A backend that records evictions
    /// within `evict` keeps this default.
    async fn record_eviction(
        &self,
        cluster: &str,
        request: &EvictionRequest,
    ) -> Result<(), BackendError> {
        let _ = (cluster, request);
        Ok(())
    }

    /// The pods that may be the replacement of an evicted pod, best first: a pod bound into
    /// `evicted.reservation`, then the newer pods of its controller by creation time. Pods that
    /// are terminating are not candidates. The executor takes the first that no other pod
    /// migration has claimed (see `docs/operations.md`, "Which pod is the replacement").
    async fn replacements_of(
        &self,
        cluster: &str,
        evicted: &EvictedPod,
    ) -> Result<Vec<PodState>, BackendError>;

    /// What reservations hold now, per node name (`pods` counts the reservations); nodes
    /// without any are absent. For display (`GET /clusters/{name}/nodes`); a backend that
    /// cannot tell reports nothing held.
    async fn reserved(
        &self,
        cluster: &str,
    ) -> Result<BTreeMap<String, ResourceAmounts>, BackendError> {
        let _ = cluster;
        Ok(BTreeMap::new())
    }
}

/// Pod annotation naming the reservation a pod was bound into (Koordinator's
/// `{"name": …, "uid": …}`).
pub const RESERVATION_ALLOCATED: &str = "scheduling.koordinator.sh/reservation-allocated";

/// The controller owner reference (`ownerReferences[]` entry with `controller: true`) of a pod
/// given as JSON.
pub fn controller_of(pod: &serde_json::Value) -> Option<OwnerRef> {
    pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"].as_bool() == Some(true))
        .map(|r| OwnerRef {
            api_version: r["apiVersion"].as_str().unwrap_or_default().to_owned(),
            kind: r["kind"].as_str().unwrap_or_default().to_owned(),
            name: r["name"].as_str().unwrap_or_default().to_owned(),
            uid: r["uid"].as_str().unwrap_or_default().to_owned(),
        })
}

/// The reservation a pod was bound into, from its `reservation-allocated` annotation.
pub fn reservation_of(pod: &serde_json::Value) -> Option<String> {
    pod["metadata"]["annotations"][RESERVATION_ALLOCATED]
        .as_str()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
        .and_then(|v| v["name"].as_str().map(str::to_owned))
}

impl PodState {
    /// A pod's state from its JSON as the API server serves it. `phase` is `Unknown` when the
    /// pod has no status yet; `ready` is its `Ready` condition.
    pub fn from_json(pod: &serde_json::Value) -> PodState {
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
        let ready = pod["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        PodState {
            uid: text(&pod["metadata"]["uid"]),
            namespace: text(&pod["metadata"]["namespace"]),
            name: text(&pod["metadata"]["name"]),
            node: pod["spec"]["nodeName"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
            phase: pod["status"]["phase"]
                .as_str()
                .unwrap_or("Unknown")
                .to_owned(),
            ready,
            owner: controller_of(pod),
            reservation: reservation_of(pod),
            terminating: pod["metadata"]["deletionTimestamp"].is_string(),
            created_ms: pod["metadata"]["creationTimestamp"]
                .as_str()
                .and_then(rebalancer_cluster::parse_time_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_state_from_api_json() {
        let pod = json!({
            "metadata": {
                "name": "web-1", "namespace": "shop", "uid": "u1",
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Other", "name": "x", "uid": "o0"},
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "o1", "controller": true}
                ],
                "annotations": {RESERVATION_ALLOCATED: "{\"name\":\"r1\",\"uid\":\"ru\"}"}
            },
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let state = PodState::from_json(&pod);
        assert_eq!(state.uid, "u1");
        assert_eq!(state.node.as_deref(), Some("n1"));
        assert!(state.ready);
        assert_eq!(state.owner.as_ref().map(|o| o.uid.as_str()), Some("o1"));
        assert_eq!(state.reservation.as_deref(), Some("r1"));

        let pending = PodState::from_json(&json!({
            "metadata": {"name": "p", "namespace": "d", "uid": "u2"},
            "spec": {"nodeName": ""},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}
        }));
        assert_eq!(pending.node, None);
        assert_eq!(pending.phase, "Unknown");
        assert!(!pending.ready);
        assert_eq!(pending.owner, None);
    }
}
