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
//! is a no-op, and `evict` of a pod that is already gone answers [`EvictionResult::NotFound`]
//! and changes nothing.

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

    /// Evict like policy/v1 Eviction, with the pod's uid as a precondition.
    async fn evict(
        &self,
        cluster: &str,
        request: &EvictionRequest,
    ) -> Result<EvictionResult, BackendError>;

    /// The replacement created for an evicted pod, once it exists.
    async fn replacement_of(
        &self,
        cluster: &str,
        evicted: &EvictedPod,
    ) -> Result<Option<PodState>, BackendError>;

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
