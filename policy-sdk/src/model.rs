//! The snapshot archive: the cluster as policies see it.
//!
//! Owns the layout of the bytes the host hands to a guest (`cluster.snapshot` and
//! `cluster.snapshot-section`). The host builds a [`Snapshot`] once per cluster revision
//! ([`crate::build::SnapshotBuilder`]) and serializes it with [`to_bytes`] into one buffer of
//! [`Section`]s, each an rkyv archive; guests read them in place through [`crate::view`], and
//! pull a section only when they first read it. Nothing here knows about wasmtime, SQL or HTTP.
//!
//! Sections: the **core** ([`ArchivedSnapshot`]: strings, nodes, owners, namespaces, PDBs,
//! priority classes, PVCs and the pods' compact rows, [`ArchivedPod`]) and one **column** per bulky
//! pod field (names, annotations, node selector, affinity, tolerations, topology spread,
//! containers, conditions, volumes), indexed by pod id: layout 2, sections 0–9. Layout 3 adds node
//! annotations, measured node and pod usage and node CPU topology (sections 10–13). A policy that
//! never reads a pod's conditions never receives them: on the reference cluster (150,000 pods) the
//! whole archive is about 100 MiB, the core about a third of it.
//!
//! Layout rules (see `docs/abi.md`):
//! - Strings that repeat (namespaces, label keys and values, images, node names, resource names…)
//!   are interned once in [`Snapshot::strings`] and referenced by [`StrId`]; id 0 is always `""`.
//!   Strings that are always unique (pod name and uid) are stored inline.
//! - Cross references are `u32` table indexes; [`NONE`] means "absent".
//! - Quantities are integers in milli-units (`MilliValue` in Kubernetes terms) for every
//!   resource: cpu in millicores, memory in milli-bytes, pods in milli-pods.
//! - Adding a field is a layout change: bump [`LAYOUT_VERSION`] and the ABI minor version.

use rkyv::with::Inline;
use rkyv::{Archive, Deserialize, Serialize};

/// Version of this layout; reported in `snapshot-info.layout-version` to guests built with this
/// SDK. Layout 3 (ABI 1.3) is layout 2 plus the sections from [`Section::NodeAnnotations`] on.
pub const LAYOUT_VERSION: u32 = 3;

/// The layout of the core section and the pod columns (sections 0–9), unchanged since layout
/// 2: the core's own `layout_version` field says this, so that those sections stay
/// byte-identical for guests built for layout 2 (ABI 1.1 and 1.2), which the host still runs.
pub const CORE_LAYOUT_VERSION: u32 = 2;

/// "No such entry" for `u32` references (pod not bound, no owner, …).
pub const NONE: u32 = u32::MAX;

/// Index into [`Snapshot::strings`]. `0` is the empty string.
pub type StrId = u32;

/// The whole cluster at one revision: what the host (or a test) builds. It is archived as
/// [`Section`]s by [`to_bytes`]; policies read it through [`crate::view::Cluster`].
#[derive(Debug, Clone, Default, PartialEq)]
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
    /// Node annotations, indexed by node id (layout 3).
    pub node_annotations: Vec<Vec<KeyValue>>,
    /// Measured node usage, indexed by node id; [`UsageSource::None`] where none was reported
    /// (layout 3).
    pub node_usage: Vec<NodeUsage>,
    /// Measured pod usage, indexed by pod id (layout 3).
    pub pod_usage: Vec<PodUsage>,
    /// CPU topology and orchestration state, indexed by node id (layout 3).
    pub node_cpu: Vec<NodeCpuTopology>,
}

/// Where a usage figure comes from.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum UsageSource {
    /// Nothing reported.
    #[default]
    None,
    /// Koordinator's `slo.koordinator.sh/v1alpha1` NodeMetric (koordlet).
    NodeMetric,
    /// `metrics.k8s.io/v1beta1` NodeMetrics / PodMetrics (metrics-server).
    MetricsApi,
}

/// One node's measured usage (a NodeMetric, else metrics.k8s.io's NodeMetrics), with what
/// Koordinator's load-aware plugins read beside it.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct NodeUsage {
    pub source: UsageSource,
    /// When it was measured (NodeMetric `status.updateTime`, NodeMetrics `timestamp`), ms since
    /// the Unix epoch; `None` when the object does not say.
    pub update_ms: Option<i64>,
    /// The window it averages over (NodeMetric `spec.metricCollectPolicy
    /// .aggregateDurationSeconds`, NodeMetrics `window`), ms; `None` when not said.
    pub window_ms: Option<i64>,
    /// The whole node's usage (NodeMetric `status.nodeMetric.nodeUsage`, NodeMetrics `usage`).
    pub node: Vec<Quantity>,
    /// Usage outside pods (NodeMetric `status.nodeMetric.systemUsage`; empty otherwise).
    pub system: Vec<Quantity>,
    /// The sum of the NodeMetric's `status.podsMetric` entries whose pod is not in the snapshot
    /// (Koordinator still counts them); empty when there are none.
    pub gone_pods: Vec<Quantity>,
    /// The `node.koordinator.sh/raw-allocatable` annotation (what allocatable was before
    /// Koordinator's overcommitment), parsed; empty when absent or unreadable.
    pub raw_allocatable: Vec<Quantity>,
}

/// One pod's measured usage: its NodeMetric `podsMetric` entry, else the sum of its
/// PodMetrics containers.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct PodUsage {
    pub source: UsageSource,
    pub usage: Vec<Quantity>,
}

/// One logical CPU of a node (koordlet's `node.koordinator.sh/cpu-topology`).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuInfo {
    pub id: u32,
    /// Physical core id (unique node-wide).
    pub core: u32,
    pub socket: u32,
    /// NUMA node id.
    pub numa: u32,
}

/// A pod's CPUs pinned by the kubelet static policy (`node.koordinator.sh/pod-cpu-allocs`).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct PodCpuAlloc {
    pub namespace: StrId,
    pub name: StrId,
    pub uid: StrId,
    /// The pod's index in the snapshot, [`NONE`] when it is not there.
    pub pod: u32,
    /// Ascending CPU ids.
    pub cpus: Vec<u32>,
    pub managed_by_kubelet: bool,
}

/// A shared CPU pool of one NUMA node (`cpu-shared-pools`, `be-cpu-shared-pools`).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct CpuPool {
    pub socket: i32,
    pub numa: i32,
    pub cpus: Vec<u32>,
}

/// One resource of a NodeResourceTopology zone, in milli-units.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct ZoneResource {
    pub name: StrId,
    pub capacity: i64,
    pub allocatable: i64,
    pub available: i64,
}

/// A NodeResourceTopology zone (`zones[]`: `node-<numa id>`, type `Node`).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct NumaZone {
    pub name: StrId,
    /// The NUMA id of a `node-<id>` zone.
    pub numa: Option<u32>,
    pub zone_type: StrId,
    pub resources: Vec<ZoneResource>,
}

/// A node's CPU topology and CPU orchestration state: its NodeResourceTopology (`zones`,
/// `topologyPolicies`) and koordlet's annotations on it, parsed. Empty fields mean "not
/// reported" (or not readable: the cluster's warnings say which).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct NodeCpuTopology {
    /// The node has a NodeResourceTopology.
    pub has_nrt: bool,
    /// `node.koordinator.sh/cpu-topology`, ascending by id; empty when absent or invalid.
    pub cpus: Vec<CpuInfo>,
    /// `kubelet.koordinator.sh/cpu-manager-policy`: `policy` (`static`, `none`; 0: unknown),
    /// `options` and `reservedCPUs`.
    pub kubelet_policy: StrId,
    pub kubelet_options: Vec<KeyValue>,
    pub kubelet_reserved: Vec<u32>,
    /// `node.koordinator.sh/pod-cpu-allocs`.
    pub pod_allocs: Vec<PodCpuAlloc>,
    /// `node.koordinator.sh/cpu-shared-pools` (the LS pool) and `be-cpu-shared-pools`.
    pub shared_pools: Vec<CpuPool>,
    pub be_shared_pools: Vec<CpuPool>,
    /// `node.koordinator.sh/reservation`: `reservedCPUs` and `applyPolicy` (0: unset).
    pub node_reserved: Vec<u32>,
    pub node_reservation_policy: StrId,
    /// `node.koordinator.sh/system-qos-resource`: `cpuset`, and whether it is exclusive
    /// (default true).
    pub system_qos_cpus: Vec<u32>,
    pub system_qos_exclusive: bool,
    /// NRT `topologyPolicies`.
    pub topology_policies: Vec<StrId>,
    pub zones: Vec<NumaZone>,
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

/// One pod as the host builds it. In the archive its compact fields form the core row
/// ([`ArchivedPod`]) and the bulky ones (names, annotations, scheduling constraints, containers,
/// conditions, volumes) go to per-field columns ([`Section`]).
#[derive(Debug, Clone, Default, PartialEq)]
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

/// The sections of the archive, by id. The ids are part of the ABI (`cluster.snapshot-section`);
/// a later layout may add sections, never renumber them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum Section {
    /// [`ArchivedSnapshot`]: everything but the pod columns below. `cluster.snapshot` returns it.
    Core = 0,
    /// `ArchivedVec<ArchivedPodNames>`: name and uid.
    PodNames = 1,
    /// `ArchivedVec<ArchivedVec<ArchivedKeyValue>>`: annotations (without
    /// `kubectl.kubernetes.io/last-applied-configuration`).
    PodAnnotations = 2,
    /// `ArchivedVec<ArchivedVec<ArchivedKeyValue>>`: `spec.nodeSelector`.
    PodNodeSelector = 3,
    /// `ArchivedVec<ArchivedAffinity>`: `spec.affinity`.
    PodAffinity = 4,
    /// `ArchivedVec<ArchivedVec<ArchivedToleration>>`: `spec.tolerations`.
    PodTolerations = 5,
    /// `ArchivedVec<ArchivedVec<ArchivedTopologySpreadConstraint>>`.
    PodTopologySpread = 6,
    /// `ArchivedVec<ArchivedVec<ArchivedContainer>>`: containers with their status.
    PodContainers = 7,
    /// `ArchivedVec<ArchivedVec<ArchivedPodCondition>>`: `status.conditions`.
    PodConditions = 8,
    /// `ArchivedVec<ArchivedVec<ArchivedVolume>>`: `spec.volumes`.
    PodVolumes = 9,
    /// Layout 3: `ArchivedVec<ArchivedVec<ArchivedKeyValue>>`, indexed by **node** id: node
    /// annotations.
    NodeAnnotations = 10,
    /// Layout 3: `ArchivedVec<ArchivedNodeUsage>`, indexed by node id.
    NodeUsage = 11,
    /// Layout 3: `ArchivedVec<ArchivedPodUsage>`, indexed by pod id.
    PodUsage = 12,
    /// Layout 3: `ArchivedVec<ArchivedNodeCpuTopology>`, indexed by node id.
    NodeCpuTopology = 13,
}

impl Section {
    /// Every section of this layout, in id order.
    pub const ALL: [Section; 14] = [
        Section::Core,
        Section::PodNames,
        Section::PodAnnotations,
        Section::PodNodeSelector,
        Section::PodAffinity,
        Section::PodTolerations,
        Section::PodTopologySpread,
        Section::PodContainers,
        Section::PodConditions,
        Section::PodVolumes,
        Section::NodeAnnotations,
        Section::NodeUsage,
        Section::PodUsage,
        Section::NodeCpuTopology,
    ];

    /// How many sections a layout has (layout 2: sections 0–9).
    pub fn count_in_layout(layout: u32) -> usize {
        if layout >= 3 { Section::ALL.len() } else { 10 }
    }

    /// Whether the section has one row per node (else per pod; the core has its own shape).
    pub fn per_node(self) -> bool {
        matches!(
            self,
            Section::NodeAnnotations | Section::NodeUsage | Section::NodeCpuTopology
        )
    }

    pub fn id(self) -> u32 {
        self as u32
    }

    pub fn from_id(id: u32) -> Option<Section> {
        Section::ALL.get(id as usize).copied()
    }

    /// The section's name in reports and docs (`pod-tolerations`).
    pub fn name(self) -> &'static str {
        match self {
            Section::Core => "core",
            Section::PodNames => "pod-names",
            Section::PodAnnotations => "pod-annotations",
            Section::PodNodeSelector => "pod-node-selector",
            Section::PodAffinity => "pod-affinity",
            Section::PodTolerations => "pod-tolerations",
            Section::PodTopologySpread => "pod-topology-spread",
            Section::PodContainers => "pod-containers",
            Section::PodConditions => "pod-conditions",
            Section::PodVolumes => "pod-volumes",
            Section::NodeAnnotations => "node-annotations",
            Section::NodeUsage => "node-usage",
            Section::PodUsage => "pod-usage",
            Section::NodeCpuTopology => "node-cpu-topology",
        }
    }
}

/// The core section: a [`Snapshot`] without the pod columns. Borrows from the snapshot, so
/// archiving copies nothing twice.
#[derive(Archive, Serialize)]
pub struct CoreSection<'a> {
    pub layout_version: u32,
    pub revision: u64,
    pub time_ms: i64,
    #[rkyv(with = Inline)]
    pub strings: &'a Vec<String>,
    #[rkyv(with = Inline)]
    pub strings_sorted: &'a Vec<StrId>,
    #[rkyv(with = Inline)]
    pub nodes: &'a Vec<Node>,
    pub pods: Vec<PodRow<'a>>,
    #[rkyv(with = Inline)]
    pub owners: &'a Vec<Owner>,
    #[rkyv(with = Inline)]
    pub namespaces: &'a Vec<Namespace>,
    #[rkyv(with = Inline)]
    pub pdbs: &'a Vec<Pdb>,
    #[rkyv(with = Inline)]
    pub priority_classes: &'a Vec<PriorityClass>,
    #[rkyv(with = Inline)]
    pub pvcs: &'a Vec<Pvc>,
}

/// A pod's core row: the fields (almost) every policy reads. See [`Pod`] for their meaning.
#[derive(Archive, Serialize)]
pub struct PodRow<'a> {
    pub namespace: StrId,
    pub node: u32,
    pub node_name: StrId,
    #[rkyv(with = Inline)]
    pub owner_refs: &'a Vec<OwnerRef>,
    pub owner: u32,
    #[rkyv(with = Inline)]
    pub labels: &'a Vec<KeyValue>,
    pub priority: Option<i32>,
    pub priority_class_name: StrId,
    pub qos: QosClass,
    pub phase: PodPhase,
    pub reason: StrId,
    pub creation_ms: i64,
    pub start_ms: Option<i64>,
    pub deletion_ms: Option<i64>,
    #[rkyv(with = Inline)]
    pub requests: &'a Vec<Quantity>,
    pub has_resource_claims: bool,
}

impl<'a> PodRow<'a> {
    fn of(pod: &'a Pod) -> Self {
        PodRow {
            namespace: pod.namespace,
            node: pod.node,
            node_name: pod.node_name,
            owner_refs: &pod.owner_refs,
            owner: pod.owner,
            labels: &pod.labels,
            priority: pod.priority,
            priority_class_name: pod.priority_class_name,
            qos: pod.qos,
            phase: pod.phase,
            reason: pod.reason,
            creation_ms: pod.creation_ms,
            start_ms: pod.start_ms,
            deletion_ms: pod.deletion_ms,
            requests: &pod.requests,
            has_resource_claims: pod.has_resource_claims,
        }
    }
}

/// A row of the [`Section::PodNames`] column.
#[derive(Archive, Serialize)]
pub struct PodNamesRow<'a> {
    #[rkyv(with = Inline)]
    pub name: &'a String,
    #[rkyv(with = Inline)]
    pub uid: &'a String,
}

/// The archived core section. (The lifetime of the borrowing serializer type is a phantom here.)
pub type ArchivedSnapshot = ArchivedCoreSection<'static>;
/// An archived pod core row.
pub type ArchivedPod = ArchivedPodRow<'static>;
/// An archived row of the [`Section::PodNames`] column.
pub type ArchivedPodNames = ArchivedPodNamesRow<'static>;

/// The archive's header: where each section lies in the buffer.
///
/// ```text
/// 0   magic "RBSA"
/// 4   layout version (u32, little-endian)
/// 8   section count N (u32)
/// 12  reserved (0)
/// 16  N × (offset u32, length u32), offsets from the start of the buffer, 16-byte aligned
/// ```
pub mod header {
    use std::ops::Range;

    pub const MAGIC: [u8; 4] = *b"RBSA";
    /// Sections start at multiples of this (rkyv archives need 8; 16 leaves room).
    pub const ALIGN: usize = 16;

    pub fn len(sections: usize) -> usize {
        (16 + 8 * sections).next_multiple_of(ALIGN)
    }

    fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
        let b = bytes.get(at..at + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The layout version and section count, if `bytes` starts with a header.
    pub fn read(bytes: &[u8]) -> Result<(u32, u32), String> {
        if bytes.get(..4) != Some(&MAGIC[..]) {
            return Err("not a Rebalancer snapshot archive (bad magic)".into());
        }
        let version = u32_at(bytes, 4).ok_or("truncated header")?;
        let count = u32_at(bytes, 8).ok_or("truncated header")?;
        if bytes.len() < len(count as usize) {
            return Err(format!("truncated header ({count} sections)"));
        }
        Ok((version, count))
    }

    /// The byte range of section `id`. The caller has checked the header with [`read`].
    pub fn range(bytes: &[u8], id: u32) -> Option<Range<usize>> {
        let count = u32_at(bytes, 8)?;
        if id >= count {
            return None;
        }
        let entry = 16 + 8 * id as usize;
        let offset = u32_at(bytes, entry)? as usize;
        let length = u32_at(bytes, entry + 4)? as usize;
        let end = offset.checked_add(length)?;
        (end <= bytes.len() && offset.is_multiple_of(ALIGN)).then_some(offset..end)
    }

    pub(crate) fn write(buffer: &mut [u8], version: u32, ranges: &[Range<usize>]) {
        buffer[..4].copy_from_slice(&MAGIC);
        buffer[4..8].copy_from_slice(&version.to_le_bytes());
        buffer[8..12].copy_from_slice(&(ranges.len() as u32).to_le_bytes());
        buffer[12..16].fill(0);
        for (i, r) in ranges.iter().enumerate() {
            let entry = 16 + 8 * i;
            buffer[entry..entry + 4].copy_from_slice(&(r.start as u32).to_le_bytes());
            buffer[entry + 4..entry + 8].copy_from_slice(&((r.end - r.start) as u32).to_le_bytes());
        }
    }
}

/// The archive buffer: 16-byte aligned, so sections can be read in place.
pub type ArchiveBuffer = rkyv::util::AlignedVec<16>;

/// Serialize a snapshot into the archive handed to guests (header + every [`Section`]).
pub fn to_bytes(snapshot: &Snapshot) -> Result<ArchiveBuffer, rkyv::rancor::Error> {
    to_bytes_in(snapshot, ArchiveBuffer::new())
}

/// [`to_bytes`] into a buffer the caller sized (its contents are replaced).
pub fn to_bytes_in(
    snapshot: &Snapshot,
    buffer: ArchiveBuffer,
) -> Result<ArchiveBuffer, rkyv::rancor::Error> {
    to_bytes_aligned(snapshot, buffer, header::ALIGN)
}

/// Sections of an archive a host maps into guests' linear memory start at multiples of this:
/// the wasm page size, a multiple of every host page size (see `cluster.map-section`).
pub const MAP_ALIGN: usize = 64 << 10;

/// [`to_bytes_in`] with every section starting at a multiple of `section_align` (a power of two,
/// at least [`header::ALIGN`]), and the buffer padded to one, so that each section can be
/// mapped from a file on its own ([`MAP_ALIGN`]). Readers only rely on [`header::ALIGN`]; the
/// padding is zeros.
pub fn to_bytes_aligned(
    snapshot: &Snapshot,
    mut buffer: ArchiveBuffer,
    section_align: usize,
) -> Result<ArchiveBuffer, rkyv::rancor::Error> {
    use rkyv::api::high::to_bytes_in;
    use rkyv::with::{Map, With};

    assert!(
        section_align.is_power_of_two() && section_align >= header::ALIGN,
        "section alignment {section_align} is not a power of two of at least {}",
        header::ALIGN
    );
    buffer.clear();
    buffer.resize(header::len(Section::ALL.len()), 0);
    let mut ranges = Vec::with_capacity(Section::ALL.len());
    let pods = &snapshot.pods;
    for section in Section::ALL {
        let start = buffer.len().next_multiple_of(section_align);
        buffer.resize(start, 0);
        buffer = match section {
            Section::Core => to_bytes_in(
                &CoreSection {
                    layout_version: CORE_LAYOUT_VERSION,
                    revision: snapshot.revision,
                    time_ms: snapshot.time_ms,
                    strings: &snapshot.strings,
                    strings_sorted: &snapshot.strings_sorted,
                    nodes: &snapshot.nodes,
                    pods: pods.iter().map(PodRow::of).collect(),
                    owners: &snapshot.owners,
                    namespaces: &snapshot.namespaces,
                    pdbs: &snapshot.pdbs,
                    priority_classes: &snapshot.priority_classes,
                    pvcs: &snapshot.pvcs,
                },
                buffer,
            )?,
            Section::PodNames => {
                let names: Vec<PodNamesRow<'_>> = pods
                    .iter()
                    .map(|p| PodNamesRow {
                        name: &p.name,
                        uid: &p.uid,
                    })
                    .collect();
                to_bytes_in(&names, buffer)?
            }
            Section::PodAnnotations => column(pods, |p| &p.annotations, buffer)?,
            Section::PodNodeSelector => column(pods, |p| &p.node_selector, buffer)?,
            Section::PodAffinity => column(pods, |p| &p.affinity, buffer)?,
            Section::PodTolerations => column(pods, |p| &p.tolerations, buffer)?,
            Section::PodTopologySpread => column(pods, |p| &p.topology_spread, buffer)?,
            Section::PodContainers => column(pods, |p| &p.containers, buffer)?,
            Section::PodConditions => column(pods, |p| &p.conditions, buffer)?,
            Section::PodVolumes => column(pods, |p| &p.volumes, buffer)?,
            Section::NodeAnnotations => rows(
                &snapshot.node_annotations,
                snapshot.nodes.len(),
                &Vec::new(),
                buffer,
            )?,
            Section::NodeUsage => rows(
                &snapshot.node_usage,
                snapshot.nodes.len(),
                &NodeUsage::default(),
                buffer,
            )?,
            Section::PodUsage => rows(
                &snapshot.pod_usage,
                pods.len(),
                &PodUsage::default(),
                buffer,
            )?,
            Section::NodeCpuTopology => rows(
                &snapshot.node_cpu,
                snapshot.nodes.len(),
                &NodeCpuTopology::default(),
                buffer,
            )?,
        };
        ranges.push(start..buffer.len());
    }
    let end = buffer.len().next_multiple_of(section_align);
    buffer.resize(end, 0);
    header::write(&mut buffer, snapshot.layout_version, &ranges);
    return Ok(buffer);

    /// One field of every pod, archived as a vector indexed by pod id, borrowing the values.
    fn column<'a, T>(
        pods: &'a [Pod],
        field: impl Fn(&'a Pod) -> &'a T,
        buffer: ArchiveBuffer,
    ) -> Result<ArchiveBuffer, rkyv::rancor::Error>
    where
        T: rkyv::Archive
            + for<'s> rkyv::Serialize<
                rkyv::api::high::HighSerializer<
                    ArchiveBuffer,
                    rkyv::ser::allocator::ArenaHandle<'s>,
                    rkyv::rancor::Error,
                >,
            > + 'a,
    {
        let rows: Vec<&T> = pods.iter().map(field).collect();
        to_bytes_in(With::<_, Map<Inline>>::cast(&rows), buffer)
    }

    /// A table indexed by node or pod id, archived with exactly `count` rows: missing rows
    /// (a snapshot built without them) are `default`, extra ones are dropped.
    fn rows<'a, T>(
        table: &'a [T],
        count: usize,
        default: &'a T,
        buffer: ArchiveBuffer,
    ) -> Result<ArchiveBuffer, rkyv::rancor::Error>
    where
        T: rkyv::Archive
            + for<'s> rkyv::Serialize<
                rkyv::api::high::HighSerializer<
                    ArchiveBuffer,
                    rkyv::ser::allocator::ArenaHandle<'s>,
                    rkyv::rancor::Error,
                >,
            > + 'a,
    {
        let rows: Vec<&T> = (0..count)
            .map(|i| table.get(i).unwrap_or(default))
            .collect();
        to_bytes_in(With::<_, Map<Inline>>::cast(&rows), buffer)
    }
}
