//! The snapshot archive: the cluster as policies see it.
//!
//! Owns the layout of the bytes the host hands to a guest (`cluster.snapshot`). The host builds a
//! [`Snapshot`] once per cluster revision ([`crate::build::SnapshotBuilder`]) and serializes it
//! with rkyv; guests read the archived form in place through [`crate::view`]. Nothing here knows
//! about wasmtime, SQL or HTTP.
//!
//! Layout rules (see `docs/abi.md`):
//! - Strings that repeat (namespaces, label keys and values, images, node names, resource names…)
//!   are interned once in [`Snapshot::strings`] and referenced by [`StrId`]; id 0 is always `""`.
//!   Strings that are always unique (pod name and uid) are stored inline.
//! - Cross references are `u32` table indexes; [`NONE`] means "absent".
//! - Quantities are integers in milli-units (`MilliValue` in Kubernetes terms) for every
//!   resource: cpu in millicores, memory in milli-bytes, pods in milli-pods.
//! - Adding a field is a layout change: bump [`LAYOUT_VERSION`] and the ABI minor version.

use rkyv::{Archive, Deserialize, Serialize};

/// Version of this layout; reported in `snapshot-info.layout-version`.
pub const LAYOUT_VERSION: u32 = 1;

/// "No such entry" for `u32` references (pod not bound, no owner, …).
pub const NONE: u32 = u32::MAX;

/// Index into [`Snapshot::strings`]. `0` is the empty string.
pub type StrId = u32;

/// The whole cluster at one revision.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub layout_version: u32,
    /// Cluster revision (increases with every change of state).
    pub revision: u64,
    /// Snapshot time, ms since the Unix epoch: the run's clock.
    pub time_ms: i64,
    /// Interned strings; `strings[0] == ""`.
    pub strings: Vec<String>,
    /// Ids of `strings` sorted by their text, for `O(log n)` lookups of a string's id.
    pub strings_sorted: Vec<StrId>,
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    /// Distinct owners referenced by pods (first ownerRef), so policies can group on integers.
    pub owners: Vec<Owner>,
    pub namespaces: Vec<Namespace>,
    pub pdbs: Vec<Pdb>,
    pub priority_classes: Vec<PriorityClass>,
    pub pvcs: Vec<Pvc>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyValue {
    pub key: StrId,
    pub value: StrId,
}

/// One resource amount in milli-units.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quantity {
    pub resource: StrId,
    pub milli: i64,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Node {
    pub name: StrId,
    pub uid: String,
    pub labels: Vec<KeyValue>,
    pub taints: Vec<Taint>,
    /// `status.allocatable`, or `status.capacity` when allocatable is empty (as descheduler does).
    pub allocatable: Vec<Quantity>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    pub creation_ms: i64,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum TaintEffect {
    #[default]
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Taint {
    pub key: StrId,
    pub value: StrId,
    pub effect: TaintEffect,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum TolerationOperator {
    #[default]
    Equal,
    Exists,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Toleration {
    /// Empty key with `Exists` tolerates every taint.
    pub key: StrId,
    pub operator: TolerationOperator,
    pub value: StrId,
    /// `None`: all effects.
    pub effect: Option<TaintEffect>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum PodPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum QosClass {
    #[default]
    BestEffort,
    Burstable,
    Guaranteed,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct OwnerRef {
    pub kind: StrId,
    pub name: StrId,
    pub uid: StrId,
    pub controller: bool,
}

/// A distinct (namespace, kind, name, uid) owner; [`Pod::owner`] points here.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Owner {
    pub namespace: StrId,
    pub kind: StrId,
    pub name: StrId,
    pub uid: StrId,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum ContainerKind {
    #[default]
    App,
    Init,
    Ephemeral,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Container {
    pub kind: ContainerKind,
    pub name: StrId,
    pub image: StrId,
    pub restart_count: i32,
    pub ready: bool,
    /// `state.waiting.reason`, or 0.
    pub waiting_reason: StrId,
    /// `state.terminated.reason`, or 0.
    pub terminated_reason: StrId,
    /// `state.terminated.exitCode`, when terminated.
    pub exit_code: Option<i32>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct PodCondition {
    pub type_: StrId,
    pub status: StrId,
    pub reason: StrId,
    pub last_transition_ms: Option<i64>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum VolumeKind {
    #[default]
    Other,
    EmptyDir,
    HostPath,
    PersistentVolumeClaim,
    /// A generic ephemeral volume (its PVC is named `<pod>-<volume>`).
    Ephemeral,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Volume {
    pub name: StrId,
    pub kind: VolumeKind,
    /// Claim name for `PersistentVolumeClaim` volumes, else 0.
    pub claim: StrId,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum SelectorOperator {
    #[default]
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

/// A label-selector or node-selector requirement.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Requirement {
    pub key: StrId,
    pub operator: SelectorOperator,
    pub values: Vec<StrId>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    pub match_labels: Vec<KeyValue>,
    pub match_expressions: Vec<Requirement>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<Requirement>,
    pub match_fields: Vec<Requirement>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct PreferredSchedulingTerm {
    pub weight: i32,
    pub term: NodeSelectorTerm,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct PodAffinityTerm {
    pub label_selector: Option<LabelSelector>,
    pub namespaces: Vec<StrId>,
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: StrId,
    pub match_label_keys: Vec<StrId>,
    pub mismatch_label_keys: Vec<StrId>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct WeightedPodAffinityTerm {
    pub weight: i32,
    pub term: PodAffinityTerm,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Affinity {
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms` (ORed); `None` when unset.
    pub node_required: Option<Vec<NodeSelectorTerm>>,
    pub node_preferred: Vec<PreferredSchedulingTerm>,
    pub pod_affinity_required: Vec<PodAffinityTerm>,
    pub pod_affinity_preferred: Vec<WeightedPodAffinityTerm>,
    pub pod_anti_affinity_required: Vec<PodAffinityTerm>,
    pub pod_anti_affinity_preferred: Vec<WeightedPodAffinityTerm>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum WhenUnsatisfiable {
    #[default]
    DoNotSchedule,
    ScheduleAnyway,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum InclusionPolicy {
    #[default]
    Honor,
    Ignore,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct TopologySpreadConstraint {
    pub max_skew: i32,
    pub topology_key: StrId,
    pub when_unsatisfiable: WhenUnsatisfiable,
    pub label_selector: Option<LabelSelector>,
    pub min_domains: Option<i32>,
    /// `None` when unset (the scheduler defaults it to Honor).
    pub node_affinity_policy: Option<InclusionPolicy>,
    /// `None` when unset (the scheduler defaults it to Ignore).
    pub node_taints_policy: Option<InclusionPolicy>,
    pub match_label_keys: Vec<StrId>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Pod {
    pub name: String,
    pub uid: String,
    pub namespace: StrId,
    /// Index into [`Snapshot::nodes`] of `spec.nodeName`; [`NONE`] when unbound or the node is
    /// not in the snapshot.
    pub node: u32,
    /// `spec.nodeName` as written (kept even when the node is gone).
    pub node_name: StrId,
    pub owner_refs: Vec<OwnerRef>,
    /// Index into [`Snapshot::owners`] of the first ownerRef; [`NONE`] for bare pods.
    pub owner: u32,
    pub labels: Vec<KeyValue>,
    /// Annotations, except `kubectl.kubernetes.io/last-applied-configuration`.
    pub annotations: Vec<KeyValue>,
    pub priority: Option<i32>,
    pub priority_class_name: StrId,
    pub qos: QosClass,
    pub phase: PodPhase,
    /// `status.reason`.
    pub reason: StrId,
    pub creation_ms: i64,
    /// `status.startTime`.
    pub start_ms: Option<i64>,
    /// `metadata.deletionTimestamp`: the pod is terminating.
    pub deletion_ms: Option<i64>,
    /// Effective pod requests (`max(sum(app), max(init))` per resource, plus overhead), the way
    /// `resourcehelper.PodRequests` computes them.
    pub requests: Vec<Quantity>,
    pub node_selector: Vec<KeyValue>,
    pub affinity: Affinity,
    pub tolerations: Vec<Toleration>,
    pub topology_spread: Vec<TopologySpreadConstraint>,
    pub containers: Vec<Container>,
    pub conditions: Vec<PodCondition>,
    pub volumes: Vec<Volume>,
    /// `spec.resourceClaims` is not empty (DRA).
    pub has_resource_claims: bool,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Namespace {
    pub name: StrId,
    pub labels: Vec<KeyValue>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum UnhealthyPodEvictionPolicy {
    /// The default: an unhealthy pod may be evicted only while the budget is not exceeded.
    #[default]
    IfHealthyBudget,
    AlwaysAllow,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Pdb {
    pub namespace: StrId,
    pub name: StrId,
    /// `None`: selects nothing (a nil selector); an empty selector selects every pod.
    pub selector: Option<LabelSelector>,
    pub disruptions_allowed: i32,
    pub current_healthy: i32,
    pub desired_healthy: i32,
    pub expected_pods: i32,
    pub unhealthy_pod_eviction_policy: UnhealthyPodEvictionPolicy,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct PriorityClass {
    pub name: StrId,
    pub value: i32,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Pvc {
    pub namespace: StrId,
    pub name: StrId,
    /// `spec.storageClassName`; `None` when unset.
    pub storage_class: Option<StrId>,
}

/// Serialize a snapshot into the archive bytes handed to guests.
pub fn to_bytes(snapshot: &Snapshot) -> Result<rkyv::util::AlignedVec, rkyv::rancor::Error> {
    rkyv::to_bytes::<rkyv::rancor::Error>(snapshot)
}
