//! Hand-built clusters and a native host, so policy authors can unit-test with `cargo test`.
//!
//! Owns the test builders ([`TestCluster`], [`TestNode`], [`TestPod`], [`TestPdb`], …) and the
//! native runner ([`run`], [`TestSession`]) that evaluates a [`Policy`] against the same
//! [`Evictor`] the server uses (DefaultEvictor, limits, PDB admission), so a policy behaves the
//! same here, natively in the server and as a wasm component.
//!
//! ```
//! use rebalancer_policy_sdk::testing::*;
//!
//! let cluster = TestCluster::new()
//!     .node(TestNode::new("n1").cpu("4").memory("16Gi").pods(110).label("zone", "a"))
//!     .node(TestNode::new("n2").taint("dedicated", "gpu", NoSchedule))
//!     .pod(TestPod::new("shop", "web-1").on_node("n1").owned_by("ReplicaSet", "web").cpu("500m"))
//!     .pdb(TestPdb::new("shop", "web").match_label("app", "web").disruptions_allowed(1));
//! let session = cluster.session();
//! assert_eq!(session.cluster().pod_count(), 1);
//! ```
//!
//! Requests and QoS are computed from the containers with [`crate::k8s::resources`], exactly as
//! the host computes them from real pods. Must not be used by the server outside tests.

use std::collections::BTreeSet;

use crate::build::SnapshotBuilder;
use crate::evictor::{ClusterIndex, DefaultEvictorArgs, Evictor, EvictorConfig, RunState};
use crate::k8s::selector::Selector;
use crate::k8s::{quantity, resources};
use crate::model::{
    self, Affinity, Container, ContainerKind, KeyValue, LabelSelector, Namespace, Node,
    NodeSelectorTerm, OwnerRef, Pdb, Pod, PodAffinityTerm, PodCondition, PreferredSchedulingTerm,
    PriorityClass, Pvc, Quantity, Requirement, Snapshot, Taint, Toleration,
    TopologySpreadConstraint, Volume, VolumeKind, WeightedPodAffinityTerm,
};
use crate::policy::{ArgError, Context, ExtensionPoint, Policy, Refusal, evaluate};
use crate::view::Cluster;

pub use crate::evictor::{Limits, LogEntry};
pub use crate::model::TaintEffect::{self, NoExecute, NoSchedule, PreferNoSchedule};
pub use crate::model::{
    InclusionPolicy, PodPhase, QosClass, SelectorOperator, TolerationOperator,
    UnhealthyPodEvictionPolicy, WhenUnsatisfiable,
};
pub use crate::policy::ExtensionPoint::{Balance, Deschedule};

/// Default snapshot time: 2023-11-14T22:13:20Z.
pub const DEFAULT_NOW_MS: i64 = 1_700_000_000_000;
const DAY_MS: i64 = 86_400_000;

fn owned(pairs: &[&str]) -> Vec<String> {
    pairs.iter().map(|s| (*s).to_owned()).collect()
}

// =============================================================================================
// Selectors used by the builders
// =============================================================================================

/// A `metav1.LabelSelector` under construction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct SelectorSpec {
    labels: Vec<(String, String)>,
    exprs: Vec<(String, SelectorOperator, Vec<String>)>,
}

impl SelectorSpec {
    fn build(&self, b: &mut SnapshotBuilder) -> LabelSelector {
        LabelSelector {
            match_labels: self
                .labels
                .iter()
                .map(|(k, v)| KeyValue {
                    key: b.intern(k),
                    value: b.intern(v),
                })
                .collect(),
            match_expressions: self
                .exprs
                .iter()
                .map(|(k, op, vs)| requirement(b, k, *op, vs))
                .collect(),
        }
    }
}

fn requirement(
    b: &mut SnapshotBuilder,
    key: &str,
    operator: SelectorOperator,
    values: &[String],
) -> Requirement {
    Requirement {
        key: b.intern(key),
        operator,
        values: values.iter().map(|v| b.intern(v)).collect(),
    }
}

fn kvs(b: &mut SnapshotBuilder, pairs: &[(String, String)]) -> Vec<KeyValue> {
    pairs
        .iter()
        .map(|(k, v)| KeyValue {
            key: b.intern(k),
            value: b.intern(v),
        })
        .collect()
}

/// Set `key` in a key/value list, replacing an earlier value.
fn set_pair(list: &mut Vec<(String, String)>, key: &str, value: &str) {
    match list.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value.to_owned(),
        None => list.push((key.to_owned(), value.to_owned())),
    }
}

// =============================================================================================
// Nodes
// =============================================================================================

/// A node: 4 cpu, 16Gi memory, 110 pods, Ready and schedulable unless told otherwise, labelled
/// `kubernetes.io/hostname=<name>`.
#[derive(Debug, Clone)]
pub struct TestNode {
    name: String,
    labels: Vec<(String, String)>,
    taints: Vec<(String, String, TaintEffect)>,
    allocatable: Vec<(String, String)>,
    unschedulable: bool,
    ready: bool,
}

impl TestNode {
    pub fn new(name: &str) -> Self {
        TestNode {
            name: name.to_owned(),
            labels: vec![("kubernetes.io/hostname".into(), name.to_owned())],
            taints: Vec::new(),
            allocatable: vec![
                ("cpu".into(), "4".into()),
                ("memory".into(), "16Gi".into()),
                ("pods".into(), "110".into()),
            ],
            unschedulable: false,
            ready: true,
        }
    }

    /// Allocatable cpu (a quantity: `"4"`, `"3500m"`).
    pub fn cpu(self, quantity: &str) -> Self {
        self.allocatable("cpu", quantity)
    }

    /// Allocatable memory (`"16Gi"`).
    pub fn memory(self, quantity: &str) -> Self {
        self.allocatable("memory", quantity)
    }

    /// Allocatable pod slots.
    pub fn pods(self, count: u32) -> Self {
        self.allocatable("pods", &count.to_string())
    }

    /// Allocatable amount of any resource (`"nvidia.com/gpu"`, `"2"`).
    pub fn allocatable(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.allocatable, resource, quantity);
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.labels, key, value);
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: TaintEffect) -> Self {
        self.taints.push((key.to_owned(), value.to_owned(), effect));
        self
    }

    /// Cordoned (`spec.unschedulable`).
    pub fn unschedulable(mut self) -> Self {
        self.unschedulable = true;
        self
    }

    /// The Ready condition is not True.
    pub fn not_ready(mut self) -> Self {
        self.ready = false;
        self
    }
}

// =============================================================================================
// Pods
// =============================================================================================

/// A container of a [`TestPod`].
#[derive(Debug, Clone)]
pub struct TestContainer {
    name: String,
    image: String,
    requests: Vec<(String, String)>,
    limits: Vec<(String, String)>,
    restart_count: i32,
    ready: Option<bool>,
    waiting_reason: Option<String>,
    terminated: Option<(String, i32)>,
    sidecar: bool,
}

impl TestContainer {
    pub fn new(name: &str, image: &str) -> Self {
        TestContainer {
            name: name.to_owned(),
            image: image.to_owned(),
            requests: Vec::new(),
            limits: Vec::new(),
            restart_count: 0,
            ready: None,
            waiting_reason: None,
            terminated: None,
            sidecar: false,
        }
    }

    pub fn request(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.requests, resource, quantity);
        self
    }

    pub fn limit(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.limits, resource, quantity);
        self
    }

    pub fn cpu(self, quantity: &str) -> Self {
        self.request("cpu", quantity)
    }

    pub fn memory(self, quantity: &str) -> Self {
        self.request("memory", quantity)
    }

    pub fn restarts(mut self, count: i32) -> Self {
        self.restart_count = count;
        self
    }

    /// `state.waiting.reason` (`CrashLoopBackOff`, `ImagePullBackOff`, …).
    pub fn waiting(mut self, reason: &str) -> Self {
        self.waiting_reason = Some(reason.to_owned());
        self
    }

    /// `state.terminated` with a reason and an exit code.
    pub fn terminated(mut self, reason: &str, exit_code: i32) -> Self {
        self.terminated = Some((reason.to_owned(), exit_code));
        self
    }

    /// The container's `ready` flag (default: the pod's readiness).
    pub fn ready(mut self, ready: bool) -> Self {
        self.ready = Some(ready);
        self
    }

    /// An init container with `restartPolicy: Always` (a sidecar).
    pub fn sidecar(mut self) -> Self {
        self.sidecar = true;
        self
    }
}

/// A term of node affinity: expressions on labels and fields, ANDed.
#[derive(Debug, Clone, Default)]
pub struct TestTerm {
    exprs: Vec<(String, SelectorOperator, Vec<String>)>,
    fields: Vec<(String, SelectorOperator, Vec<String>)>,
}

impl TestTerm {
    pub fn new() -> Self {
        TestTerm::default()
    }

    /// A label requirement (`zone In [a, b]`).
    pub fn expr(mut self, key: &str, operator: SelectorOperator, values: &[&str]) -> Self {
        self.exprs.push((key.to_owned(), operator, owned(values)));
        self
    }

    /// A field requirement (`metadata.name In [n1]`).
    pub fn field(mut self, key: &str, operator: SelectorOperator, values: &[&str]) -> Self {
        self.fields.push((key.to_owned(), operator, owned(values)));
        self
    }

    fn build(&self, b: &mut SnapshotBuilder) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: self
                .exprs
                .iter()
                .map(|(k, o, v)| requirement(b, k, *o, v))
                .collect(),
            match_fields: self
                .fields
                .iter()
                .map(|(k, o, v)| requirement(b, k, *o, v))
                .collect(),
        }
    }
}

/// A pod (anti-)affinity term. Without `match_label`/`match_expression`/`select_all` its label
/// selector is nil and selects nothing, as in Kubernetes.
#[derive(Debug, Clone)]
pub struct TestAffinityTerm {
    topology_key: String,
    selector: Option<SelectorSpec>,
    namespaces: Vec<String>,
    match_label_keys: Vec<String>,
}

impl TestAffinityTerm {
    pub fn new(topology_key: &str) -> Self {
        TestAffinityTerm {
            topology_key: topology_key.to_owned(),
            selector: None,
            namespaces: Vec::new(),
            match_label_keys: Vec::new(),
        }
    }

    pub fn match_label(mut self, key: &str, value: &str) -> Self {
        self.selector
            .get_or_insert_with(SelectorSpec::default)
            .labels
            .push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn match_expression(
        mut self,
        key: &str,
        operator: SelectorOperator,
        values: &[&str],
    ) -> Self {
        self.selector
            .get_or_insert_with(SelectorSpec::default)
            .exprs
            .push((key.to_owned(), operator, owned(values)));
        self
    }

    /// An empty (non-nil) selector: every pod of the term's namespaces.
    pub fn select_all(mut self) -> Self {
        self.selector.get_or_insert_with(SelectorSpec::default);
        self
    }

    /// `namespaces` of the term (default: the pod's own namespace).
    pub fn namespaces(mut self, namespaces: &[&str]) -> Self {
        self.namespaces = owned(namespaces);
        self
    }

    pub fn match_label_keys(mut self, keys: &[&str]) -> Self {
        self.match_label_keys = owned(keys);
        self
    }

    fn build(&self, b: &mut SnapshotBuilder) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: self.selector.as_ref().map(|s| s.build(b)),
            namespaces: self.namespaces.iter().map(|n| b.intern(n)).collect(),
            namespace_selector: None,
            topology_key: b.intern(&self.topology_key),
            match_label_keys: self.match_label_keys.iter().map(|k| b.intern(k)).collect(),
            mismatch_label_keys: Vec::new(),
        }
    }
}

/// A topology spread constraint (`DoNotSchedule` unless [`TestSpread::schedule_anyway`]).
#[derive(Debug, Clone)]
pub struct TestSpread {
    max_skew: i32,
    topology_key: String,
    when_unsatisfiable: WhenUnsatisfiable,
    selector: Option<SelectorSpec>,
    min_domains: Option<i32>,
    node_affinity_policy: Option<InclusionPolicy>,
    node_taints_policy: Option<InclusionPolicy>,
    match_label_keys: Vec<String>,
}

impl TestSpread {
    pub fn new(max_skew: i32, topology_key: &str) -> Self {
        TestSpread {
            max_skew,
            topology_key: topology_key.to_owned(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            selector: None,
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
        }
    }

    pub fn schedule_anyway(mut self) -> Self {
        self.when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
        self
    }

    pub fn match_label(mut self, key: &str, value: &str) -> Self {
        self.selector
            .get_or_insert_with(SelectorSpec::default)
            .labels
            .push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn match_expression(
        mut self,
        key: &str,
        operator: SelectorOperator,
        values: &[&str],
    ) -> Self {
        self.selector
            .get_or_insert_with(SelectorSpec::default)
            .exprs
            .push((key.to_owned(), operator, owned(values)));
        self
    }

    pub fn min_domains(mut self, n: i32) -> Self {
        self.min_domains = Some(n);
        self
    }

    pub fn node_affinity_policy(mut self, policy: InclusionPolicy) -> Self {
        self.node_affinity_policy = Some(policy);
        self
    }

    pub fn node_taints_policy(mut self, policy: InclusionPolicy) -> Self {
        self.node_taints_policy = Some(policy);
        self
    }

    pub fn match_label_keys(mut self, keys: &[&str]) -> Self {
        self.match_label_keys = owned(keys);
        self
    }

    fn build(&self, b: &mut SnapshotBuilder) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: self.max_skew,
            topology_key: b.intern(&self.topology_key),
            when_unsatisfiable: self.when_unsatisfiable,
            label_selector: self.selector.as_ref().map(|s| s.build(b)),
            min_domains: self.min_domains,
            node_affinity_policy: self.node_affinity_policy,
            node_taints_policy: self.node_taints_policy,
            match_label_keys: self.match_label_keys.iter().map(|k| b.intern(k)).collect(),
        }
    }
}

/// A pod. By default: Running and Ready, created and started a day before the snapshot time,
/// one app container `main` with image `image` and no requests (BestEffort), no owner.
#[derive(Debug, Clone)]
pub struct TestPod {
    namespace: String,
    name: String,
    uid: Option<String>,
    node: Option<String>,
    owners: Vec<(String, String, String)>,
    labels: Vec<(String, String)>,
    annotations: Vec<(String, String)>,
    priority: Option<i32>,
    priority_class: Option<String>,
    phase: PodPhase,
    reason: Option<String>,
    ready: Option<bool>,
    created_ago_ms: i64,
    started_ago_ms: Option<i64>,
    terminating: bool,
    containers: Vec<TestContainer>,
    init_containers: Vec<TestContainer>,
    qos: Option<QosClass>,
    node_selector: Vec<(String, String)>,
    node_required: Option<Vec<TestTerm>>,
    node_preferred: Vec<(i32, TestTerm)>,
    pod_affinity: Vec<TestAffinityTerm>,
    pod_affinity_preferred: Vec<(i32, TestAffinityTerm)>,
    anti_affinity: Vec<TestAffinityTerm>,
    anti_affinity_preferred: Vec<(i32, TestAffinityTerm)>,
    tolerations: Vec<(String, TolerationOperator, String, Option<TaintEffect>)>,
    spread: Vec<TestSpread>,
    volumes: Vec<(String, VolumeKind, String)>,
    resource_claims: bool,
    conditions: Vec<(String, String, String, Option<i64>)>,
}

impl TestPod {
    pub fn new(namespace: &str, name: &str) -> Self {
        TestPod {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: None,
            node: None,
            owners: Vec::new(),
            labels: Vec::new(),
            annotations: Vec::new(),
            priority: None,
            priority_class: None,
            phase: PodPhase::Running,
            reason: None,
            ready: None,
            created_ago_ms: DAY_MS,
            started_ago_ms: Some(DAY_MS),
            terminating: false,
            containers: vec![TestContainer::new("main", "image")],
            init_containers: Vec::new(),
            qos: None,
            node_selector: Vec::new(),
            node_required: None,
            node_preferred: Vec::new(),
            pod_affinity: Vec::new(),
            pod_affinity_preferred: Vec::new(),
            anti_affinity: Vec::new(),
            anti_affinity_preferred: Vec::new(),
            tolerations: Vec::new(),
            spread: Vec::new(),
            volumes: Vec::new(),
            resource_claims: false,
            conditions: Vec::new(),
        }
    }

    /// Bound to a node (`spec.nodeName`).
    pub fn on_node(mut self, node: &str) -> Self {
        self.node = Some(node.to_owned());
        self
    }

    pub fn uid(mut self, uid: &str) -> Self {
        self.uid = Some(uid.to_owned());
        self
    }

    /// Adds a controller ownerReference; pods owned by the same kind and name in a namespace
    /// share the owner uid.
    pub fn owned_by(self, kind: &str, name: &str) -> Self {
        let uid = format!("uid-{}-{}-{}", kind.to_lowercase(), self.namespace, name);
        self.owned_by_uid(kind, name, &uid)
    }

    /// Adds an ownerReference with an explicit uid.
    pub fn owned_by_uid(mut self, kind: &str, name: &str, uid: &str) -> Self {
        self.owners
            .push((kind.to_owned(), name.to_owned(), uid.to_owned()));
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.labels, key, value);
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.annotations, key, value);
        self
    }

    /// `descheduler.alpha.kubernetes.io/evict`: bypasses every DefaultEvictor Filter check.
    pub fn evict_annotation(self) -> Self {
        self.annotation(crate::evictor::EVICT_ANNOTATION, "true")
    }

    /// `descheduler.alpha.kubernetes.io/prefer-no-eviction`.
    pub fn prefer_no_eviction(self) -> Self {
        self.annotation(crate::evictor::PREFER_NO_EVICTION_ANNOTATION, "true")
    }

    /// A mirror pod (the API copy of a static pod).
    pub fn mirror(self) -> Self {
        self.annotation(crate::evictor::MIRROR_ANNOTATION, "hash")
            .annotation(crate::evictor::SOURCE_ANNOTATION, "file")
    }

    /// A static pod (`kubernetes.io/config.source` other than `api`).
    pub fn static_pod(self) -> Self {
        self.annotation(crate::evictor::SOURCE_ANNOTATION, "file")
    }

    /// `spec.priority`.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = Some(priority);
        self
    }

    /// `spec.priorityClassName`; `spec.priority` is taken from the cluster's class when not set.
    pub fn priority_class(mut self, name: &str) -> Self {
        self.priority_class = Some(name.to_owned());
        self
    }

    /// The phase; readiness follows it (Ready only when Running) unless set with [`TestPod::ready`].
    pub fn phase(mut self, phase: PodPhase) -> Self {
        self.phase = phase;
        self
    }

    /// `status.reason` (`NodeAffinity`, `Evicted`, …).
    pub fn reason(mut self, reason: &str) -> Self {
        self.reason = Some(reason.to_owned());
        self
    }

    /// The Ready condition.
    pub fn ready(mut self, ready: bool) -> Self {
        self.ready = Some(ready);
        self
    }

    pub fn not_ready(self) -> Self {
        self.ready(false)
    }

    /// Created this many seconds before the snapshot time (negative: in the future).
    pub fn created_ago_secs(mut self, secs: i64) -> Self {
        self.created_ago_ms = secs * 1000;
        self
    }

    /// Started (`status.startTime`) this many seconds before the snapshot time.
    pub fn started_ago_secs(mut self, secs: i64) -> Self {
        self.started_ago_ms = Some(secs * 1000);
        self
    }

    /// No `status.startTime`.
    pub fn not_started(mut self) -> Self {
        self.started_ago_ms = None;
        self
    }

    /// `metadata.deletionTimestamp` is set.
    pub fn terminating(mut self) -> Self {
        self.terminating = true;
        self
    }

    fn main(&mut self) -> &mut TestContainer {
        &mut self.containers[0]
    }

    /// Image of the `main` container.
    pub fn image(mut self, image: &str) -> Self {
        self.main().image = image.to_owned();
        self
    }

    /// cpu request of the `main` container.
    pub fn cpu(self, quantity: &str) -> Self {
        self.request("cpu", quantity)
    }

    /// memory request of the `main` container.
    pub fn memory(self, quantity: &str) -> Self {
        self.request("memory", quantity)
    }

    /// A request of the `main` container.
    pub fn request(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.main().requests, resource, quantity);
        self
    }

    /// A limit of the `main` container.
    pub fn limit(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.main().limits, resource, quantity);
        self
    }

    /// Limits equal to requests in every container (Guaranteed when cpu and memory are set).
    pub fn guaranteed(mut self) -> Self {
        for c in self
            .containers
            .iter_mut()
            .chain(self.init_containers.iter_mut())
        {
            c.limits = c.requests.clone();
        }
        self
    }

    /// Restart count of the `main` container.
    pub fn restarts(mut self, count: i32) -> Self {
        self.main().restart_count = count;
        self
    }

    /// Another app container.
    pub fn container(mut self, container: TestContainer) -> Self {
        self.containers.push(container);
        self
    }

    /// Replaces the `main` container.
    pub fn main_container(mut self, container: TestContainer) -> Self {
        self.containers[0] = container;
        self
    }

    pub fn init_container(mut self, container: TestContainer) -> Self {
        self.init_containers.push(container);
        self
    }

    /// Overrides the computed QoS class.
    pub fn qos(mut self, qos: QosClass) -> Self {
        self.qos = Some(qos);
        self
    }

    /// A `spec.nodeSelector` entry.
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.node_selector, key, value);
        self
    }

    /// Adds a required node-affinity term (terms are ORed).
    pub fn require_node_affinity(mut self, term: TestTerm) -> Self {
        self.node_required.get_or_insert_with(Vec::new).push(term);
        self
    }

    /// Required node affinity with no terms (matches no node).
    pub fn require_no_node(mut self) -> Self {
        self.node_required = Some(Vec::new());
        self
    }

    pub fn prefer_node_affinity(mut self, weight: i32, term: TestTerm) -> Self {
        self.node_preferred.push((weight, term));
        self
    }

    /// A required pod-affinity term.
    pub fn pod_affinity(mut self, term: TestAffinityTerm) -> Self {
        self.pod_affinity.push(term);
        self
    }

    pub fn preferred_pod_affinity(mut self, weight: i32, term: TestAffinityTerm) -> Self {
        self.pod_affinity_preferred.push((weight, term));
        self
    }

    /// A required pod anti-affinity term.
    pub fn anti_affinity(mut self, term: TestAffinityTerm) -> Self {
        self.anti_affinity.push(term);
        self
    }

    pub fn preferred_anti_affinity(mut self, weight: i32, term: TestAffinityTerm) -> Self {
        self.anti_affinity_preferred.push((weight, term));
        self
    }

    /// `key=value` toleration (`Equal`); `effect: None` tolerates every effect.
    pub fn toleration(mut self, key: &str, value: &str, effect: Option<TaintEffect>) -> Self {
        self.tolerations.push((
            key.to_owned(),
            TolerationOperator::Equal,
            value.to_owned(),
            effect,
        ));
        self
    }

    /// `Exists` toleration for a key (`""`: every key).
    pub fn toleration_exists(mut self, key: &str, effect: Option<TaintEffect>) -> Self {
        self.tolerations.push((
            key.to_owned(),
            TolerationOperator::Exists,
            String::new(),
            effect,
        ));
        self
    }

    /// Tolerates every taint (`operator: Exists` without a key).
    pub fn tolerate_everything(self) -> Self {
        self.toleration_exists("", None)
    }

    pub fn topology_spread(mut self, constraint: TestSpread) -> Self {
        self.spread.push(constraint);
        self
    }

    pub fn empty_dir(mut self, volume: &str) -> Self {
        self.volumes
            .push((volume.to_owned(), VolumeKind::EmptyDir, String::new()));
        self
    }

    pub fn host_path(mut self, volume: &str) -> Self {
        self.volumes
            .push((volume.to_owned(), VolumeKind::HostPath, String::new()));
        self
    }

    /// A `persistentVolumeClaim` volume using `claim`.
    pub fn pvc(mut self, volume: &str, claim: &str) -> Self {
        self.volumes.push((
            volume.to_owned(),
            VolumeKind::PersistentVolumeClaim,
            claim.to_owned(),
        ));
        self
    }

    /// A generic ephemeral volume.
    pub fn ephemeral_volume(mut self, volume: &str) -> Self {
        self.volumes
            .push((volume.to_owned(), VolumeKind::Ephemeral, String::new()));
        self
    }

    /// `spec.resourceClaims` is not empty (DRA).
    pub fn resource_claims(mut self) -> Self {
        self.resource_claims = true;
        self
    }

    /// A status condition (the Ready condition comes from [`TestPod::ready`]).
    pub fn condition(mut self, type_: &str, status: &str, reason: &str) -> Self {
        self.conditions
            .push((type_.to_owned(), status.to_owned(), reason.to_owned(), None));
        self
    }

    /// A status condition whose last transition was `ago_secs` before the snapshot time.
    pub fn condition_since(
        mut self,
        type_: &str,
        status: &str,
        reason: &str,
        ago_secs: i64,
    ) -> Self {
        self.conditions.push((
            type_.to_owned(),
            status.to_owned(),
            reason.to_owned(),
            Some(ago_secs),
        ));
        self
    }
}

// =============================================================================================
// Other objects
// =============================================================================================

/// A PodDisruptionBudget with its status. Its selector is nil (selects nothing) until
/// `match_label`, `match_expression` or `select_all` is used; the status starts at zero.
#[derive(Debug, Clone)]
pub struct TestPdb {
    namespace: String,
    name: String,
    selector: Option<SelectorSpec>,
    disruptions_allowed: i32,
    current_healthy: i32,
    desired_healthy: i32,
    expected_pods: i32,
    unhealthy_policy: UnhealthyPodEvictionPolicy,
}

impl TestPdb {
    pub fn new(namespace: &str, name: &str) -> Self {
        TestPdb {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            selector: None,
            disruptions_allowed: 0,
            current_healthy: 0,
            desired_healthy: 0,
            expected_pods: 0,
            unhealthy_policy: UnhealthyPodEvictionPolicy::IfHealthyBudget,
        }
    }

    pub fn match_label(mut self, key: &str, value: &str) -> Self {
        self.selector
            .get_or_insert_with(SelectorSpec::default)
            .labels
            .push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn match_expression(
        mut self,
        key: &str,
        operator: SelectorOperator,
        values: &[&str],
    ) -> Self {
        self.selector
            .get_or_insert_with(SelectorSpec::default)
            .exprs
            .push((key.to_owned(), operator, owned(values)));
        self
    }

    /// An empty selector: every pod of the namespace.
    pub fn select_all(mut self) -> Self {
        self.selector.get_or_insert_with(SelectorSpec::default);
        self
    }

    /// `status.disruptionsAllowed`.
    pub fn disruptions_allowed(mut self, n: i32) -> Self {
        self.disruptions_allowed = n;
        self
    }

    /// `status.currentHealthy` and `status.desiredHealthy`.
    pub fn healthy(mut self, current: i32, desired: i32) -> Self {
        self.current_healthy = current;
        self.desired_healthy = desired;
        self
    }

    /// `status.expectedPods`.
    pub fn expected_pods(mut self, n: i32) -> Self {
        self.expected_pods = n;
        self
    }

    /// `spec.unhealthyPodEvictionPolicy: AlwaysAllow`.
    pub fn always_allow_unhealthy(mut self) -> Self {
        self.unhealthy_policy = UnhealthyPodEvictionPolicy::AlwaysAllow;
        self
    }
}

/// A Namespace object with labels. Namespaces used by pods exist without labels unless declared.
#[derive(Debug, Clone)]
pub struct TestNamespace {
    name: String,
    labels: Vec<(String, String)>,
}

impl TestNamespace {
    pub fn new(name: &str) -> Self {
        TestNamespace {
            name: name.to_owned(),
            labels: Vec::new(),
        }
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.labels, key, value);
        self
    }
}

// =============================================================================================
// The cluster
// =============================================================================================

/// A hand-built cluster plus what a run needs besides the policy: DefaultEvictor args, limits and
/// the policy-level node selector.
#[derive(Debug, Clone)]
pub struct TestCluster {
    now_ms: i64,
    nodes: Vec<TestNode>,
    pods: Vec<TestPod>,
    pdbs: Vec<TestPdb>,
    namespaces: Vec<TestNamespace>,
    priority_classes: Vec<(String, i32)>,
    pvcs: Vec<(String, String, Option<String>)>,
    evictor_args: String,
    limits: Limits,
    node_selector: String,
}

impl Default for TestCluster {
    fn default() -> Self {
        TestCluster::new()
    }
}

impl TestCluster {
    pub fn new() -> Self {
        TestCluster {
            now_ms: DEFAULT_NOW_MS,
            nodes: Vec::new(),
            pods: Vec::new(),
            pdbs: Vec::new(),
            namespaces: Vec::new(),
            priority_classes: Vec::new(),
            pvcs: Vec::new(),
            evictor_args: String::new(),
            limits: Limits::default(),
            node_selector: String::new(),
        }
    }

    /// The snapshot time (ms since the Unix epoch): "now" for every age.
    pub fn now_ms(mut self, now_ms: i64) -> Self {
        self.now_ms = now_ms;
        self
    }

    /// Node ids follow the order nodes are added.
    pub fn node(mut self, node: TestNode) -> Self {
        self.nodes.push(node);
        self
    }

    pub fn nodes(mut self, nodes: impl IntoIterator<Item = TestNode>) -> Self {
        self.nodes.extend(nodes);
        self
    }

    /// Pod ids follow the order pods are added.
    pub fn pod(mut self, pod: TestPod) -> Self {
        self.pods.push(pod);
        self
    }

    pub fn pods(mut self, pods: impl IntoIterator<Item = TestPod>) -> Self {
        self.pods.extend(pods);
        self
    }

    pub fn pdb(mut self, pdb: TestPdb) -> Self {
        self.pdbs.push(pdb);
        self
    }

    pub fn namespace(mut self, namespace: TestNamespace) -> Self {
        self.namespaces.push(namespace);
        self
    }

    pub fn priority_class(mut self, name: &str, value: i32) -> Self {
        self.priority_classes.push((name.to_owned(), value));
        self
    }

    /// A PersistentVolumeClaim (`storage_class: None`: no `storageClassName`).
    pub fn pvc(mut self, namespace: &str, name: &str, storage_class: Option<&str>) -> Self {
        self.pvcs.push((
            namespace.to_owned(),
            name.to_owned(),
            storage_class.map(str::to_owned),
        ));
        self
    }

    /// DefaultEvictor args as JSON (`{"nodeFit": true}`); default: all defaults.
    pub fn evictor_args(mut self, json: &str) -> Self {
        self.evictor_args = json.to_owned();
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// `maxNoOfPodsToEvictPerNode`.
    pub fn max_per_node(mut self, n: u32) -> Self {
        self.limits.per_node = Some(n);
        self
    }

    /// `maxNoOfPodsToEvictPerNamespace`.
    pub fn max_per_namespace(mut self, n: u32) -> Self {
        self.limits.per_namespace = Some(n);
        self
    }

    /// `maxNoOfPodsToEvictTotal`.
    pub fn max_total(mut self, n: u32) -> Self {
        self.limits.total = Some(n);
        self
    }

    /// The policy-level `nodeSelector` (a string label selector).
    pub fn node_selector(mut self, selector: &str) -> Self {
        self.node_selector = selector.to_owned();
        self
    }

    /// The cluster as a snapshot. Panics on fixture mistakes (a quantity that does not parse),
    /// naming the object.
    pub fn snapshot(&self) -> Snapshot {
        let now = self.now_ms;
        let mut b = SnapshotBuilder::new(1, now);

        let mut namespaces: Vec<TestNamespace> = self.namespaces.clone();
        let declared: BTreeSet<String> = namespaces.iter().map(|n| n.name.clone()).collect();
        let used: BTreeSet<&String> = self.pods.iter().map(|p| &p.namespace).collect();
        for ns in used {
            if !declared.contains(ns) {
                namespaces.push(TestNamespace::new(ns));
            }
        }
        for ns in &namespaces {
            let namespace = Namespace {
                name: b.intern(&ns.name),
                labels: kvs(&mut b, &ns.labels),
            };
            b.snapshot_mut().namespaces.push(namespace);
        }

        for n in &self.nodes {
            let allocatable = n
                .allocatable
                .iter()
                .map(|(res, q)| Quantity {
                    resource: b.intern(res),
                    milli: quantity::parse_milli(q).unwrap_or_else(|e| {
                        panic!("node {}: allocatable {res}={q:?}: {e}", n.name)
                    }),
                })
                .collect();
            let node = Node {
                name: b.intern(&n.name),
                uid: format!("uid-node-{}", n.name),
                labels: kvs(&mut b, &n.labels),
                taints: n
                    .taints
                    .iter()
                    .map(|(k, v, e)| Taint {
                        key: b.intern(k),
                        value: b.intern(v),
                        effect: *e,
                    })
                    .collect(),
                allocatable,
                unschedulable: n.unschedulable,
                ready: n.ready,
                creation_ms: now - 30 * DAY_MS,
            };
            b.snapshot_mut().nodes.push(node);
        }

        for p in &self.pods {
            let pod = self.build_pod(&mut b, p);
            b.snapshot_mut().pods.push(pod);
        }

        for p in &self.pdbs {
            let pdb = Pdb {
                namespace: b.intern(&p.namespace),
                name: b.intern(&p.name),
                selector: p.selector.as_ref().map(|s| s.build(&mut b)),
                disruptions_allowed: p.disruptions_allowed,
                current_healthy: p.current_healthy,
                desired_healthy: p.desired_healthy,
                expected_pods: p.expected_pods,
                unhealthy_pod_eviction_policy: p.unhealthy_policy,
            };
            b.snapshot_mut().pdbs.push(pdb);
        }
        for (name, value) in &self.priority_classes {
            let pc = PriorityClass {
                name: b.intern(name),
                value: *value,
            };
            b.snapshot_mut().priority_classes.push(pc);
        }
        for (ns, name, class) in &self.pvcs {
            let pvc = Pvc {
                namespace: b.intern(ns),
                name: b.intern(name),
                storage_class: class.as_ref().map(|c| b.intern(c)),
            };
            b.snapshot_mut().pvcs.push(pvc);
        }
        b.finish()
    }

    fn build_pod(&self, b: &mut SnapshotBuilder, p: &TestPod) -> Pod {
        let now = self.now_ms;
        let parse = |c: &TestContainer, which: &str, list: &[(String, String)]| {
            resources::parse_list(list.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .unwrap_or_else(|(res, e)| {
                    panic!(
                        "pod {}/{}: container {} {which} {res}: {e}",
                        p.namespace, p.name, c.name
                    )
                })
        };
        let to_resources = |c: &TestContainer| resources::ContainerResources {
            requests: parse(c, "request", &c.requests),
            limits: parse(c, "limit", &c.limits),
            restart_always: c.sidecar,
        };
        let pod_resources = resources::PodResources {
            containers: p.containers.iter().map(to_resources).collect(),
            init_containers: p.init_containers.iter().map(to_resources).collect(),
            overhead: Vec::new(),
            pod_level: None,
        };
        let requests = resources::to_milli(&resources::pod_requests(&pod_resources))
            .into_iter()
            .map(|(res, milli)| Quantity {
                resource: b.intern(&res),
                milli,
            })
            .collect();
        let qos = p
            .qos
            .unwrap_or_else(|| resources::compute_pod_qos(&pod_resources));

        let ready = p.ready.unwrap_or(p.phase == PodPhase::Running);
        let priority = p.priority.or_else(|| {
            p.priority_class.as_ref().and_then(|name| {
                self.priority_classes
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|&(_, v)| v)
            })
        });
        let mut conditions = vec![PodCondition {
            type_: b.intern("Ready"),
            status: b.intern(if ready { "True" } else { "False" }),
            reason: 0,
            last_transition_ms: Some(now - p.started_ago_ms.unwrap_or(p.created_ago_ms)),
        }];
        for (t, s, r, ago) in &p.conditions {
            conditions.push(PodCondition {
                type_: b.intern(t),
                status: b.intern(s),
                reason: b.intern(r),
                last_transition_ms: ago.map(|a| now - a * 1000),
            });
        }
        let container =
            |b: &mut SnapshotBuilder, c: &TestContainer, kind: ContainerKind| Container {
                kind,
                name: b.intern(&c.name),
                image: b.intern(&c.image),
                restart_count: c.restart_count,
                ready: c.ready.unwrap_or(ready),
                waiting_reason: c.waiting_reason.as_ref().map_or(0, |r| b.intern(r)),
                terminated_reason: c.terminated.as_ref().map_or(0, |(r, _)| b.intern(r)),
                exit_code: c.terminated.as_ref().map(|&(_, code)| code),
            };
        let mut containers = Vec::new();
        for c in &p.init_containers {
            containers.push(container(b, c, ContainerKind::Init));
        }
        for c in &p.containers {
            containers.push(container(b, c, ContainerKind::App));
        }
        let weighted = |b: &mut SnapshotBuilder, list: &[(i32, TestAffinityTerm)]| {
            list.iter()
                .map(|(w, t)| WeightedPodAffinityTerm {
                    weight: *w,
                    term: t.build(b),
                })
                .collect()
        };
        let affinity = Affinity {
            node_required: p
                .node_required
                .as_ref()
                .map(|terms| terms.iter().map(|t| t.build(b)).collect()),
            node_preferred: p
                .node_preferred
                .iter()
                .map(|(w, t)| PreferredSchedulingTerm {
                    weight: *w,
                    term: t.build(b),
                })
                .collect(),
            pod_affinity_required: p.pod_affinity.iter().map(|t| t.build(b)).collect(),
            pod_affinity_preferred: weighted(b, &p.pod_affinity_preferred),
            pod_anti_affinity_required: p.anti_affinity.iter().map(|t| t.build(b)).collect(),
            pod_anti_affinity_preferred: weighted(b, &p.anti_affinity_preferred),
        };

        Pod {
            name: p.name.clone(),
            uid: p
                .uid
                .clone()
                .unwrap_or_else(|| format!("uid-pod-{}-{}", p.namespace, p.name)),
            namespace: b.intern(&p.namespace),
            node: model::NONE,
            node_name: p.node.as_ref().map_or(0, |n| b.intern(n)),
            owner_refs: p
                .owners
                .iter()
                .map(|(kind, name, uid)| OwnerRef {
                    kind: b.intern(kind),
                    name: b.intern(name),
                    uid: b.intern(uid),
                    controller: true,
                })
                .collect(),
            owner: model::NONE,
            labels: kvs(b, &p.labels),
            annotations: kvs(b, &p.annotations),
            priority,
            priority_class_name: p.priority_class.as_ref().map_or(0, |c| b.intern(c)),
            qos,
            phase: p.phase,
            reason: p.reason.as_ref().map_or(0, |r| b.intern(r)),
            creation_ms: now - p.created_ago_ms,
            start_ms: p.started_ago_ms.map(|a| now - a),
            deletion_ms: p.terminating.then_some(now - 1000),
            requests,
            node_selector: kvs(b, &p.node_selector),
            affinity,
            tolerations: p
                .tolerations
                .iter()
                .map(|(k, op, v, e)| Toleration {
                    key: b.intern(k),
                    operator: *op,
                    value: b.intern(v),
                    effect: *e,
                })
                .collect(),
            topology_spread: p.spread.iter().map(|s| s.build(b)).collect(),
            containers,
            conditions,
            volumes: p
                .volumes
                .iter()
                .map(|(name, kind, claim)| Volume {
                    name: b.intern(name),
                    kind: *kind,
                    claim: if claim.is_empty() { 0 } else { b.intern(claim) },
                })
                .collect(),
            has_resource_claims: p.resource_claims,
        }
    }

    /// A session: the snapshot, its index, the resolved evictor and one run's state, for running
    /// several policies in one run (shared limits and PDB budgets) or calling the evictor directly.
    pub fn session(&self) -> TestSession {
        let bytes = model::to_bytes(&self.snapshot()).expect("a test snapshot always serializes");
        let cluster = Cluster::from_bytes(&bytes).expect("a test snapshot is a valid archive");
        let index = ClusterIndex::new(cluster);
        let config = DefaultEvictorArgs::from_json(&self.evictor_args)
            .map_err(|e| vec![e])
            .and_then(|args| EvictorConfig::resolve(&args, cluster));
        let nodes_in_scope = Selector::parse(&self.node_selector)
            .map(|s| index.nodes_in_scope(cluster, &s))
            .map_err(|e| e.to_string());
        let state = RunState::new(cluster, self.limits);
        TestSession {
            bytes,
            index,
            config,
            nodes_in_scope,
            state,
            logs: Vec::new(),
        }
    }

    /// Run one extension point of `P` in a fresh run.
    pub fn run<P: Policy>(&self, point: ExtensionPoint, args: &str) -> TestRun {
        self.session().run::<P>(point, args)
    }
}

/// Run one extension point of `P` against `cluster` in a fresh run (see [`TestCluster::run`]).
pub fn run<P: Policy>(cluster: &TestCluster, point: ExtensionPoint, args: &str) -> TestRun {
    cluster.run::<P>(point, args)
}

/// A snapshot with its index, evictor configuration and the state of one run.
pub struct TestSession {
    bytes: rkyv::util::AlignedVec,
    index: ClusterIndex,
    config: Result<EvictorConfig, Vec<ArgError>>,
    nodes_in_scope: Result<Vec<u32>, String>,
    state: RunState,
    logs: Vec<LogEntry>,
}

impl std::fmt::Debug for TestSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestSession")
            .field("cluster", &self.cluster())
            .field("proposals", &self.state.proposals().len())
            .finish()
    }
}

fn arg_errors(errors: &[ArgError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl TestSession {
    pub fn cluster(&self) -> Cluster<'_> {
        // SAFETY: `bytes` came from `model::to_bytes` and was validated in `TestCluster::session`.
        unsafe { Cluster::from_bytes_unchecked(&self.bytes) }
    }

    pub fn index(&self) -> &ClusterIndex {
        &self.index
    }

    /// The resolved evictor configuration, or why the evictor args were rejected.
    pub fn config(&self) -> Result<&EvictorConfig, &[ArgError]> {
        self.config.as_ref().map_err(Vec::as_slice)
    }

    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// Id of the pod `namespace/name`. Panics when there is none.
    pub fn pod_id(&self, namespace: &str, name: &str) -> u32 {
        self.cluster()
            .pods()
            .find(|p| p.namespace() == namespace && p.name() == name)
            .map(|p| p.id)
            .unwrap_or_else(|| panic!("no pod {namespace}/{name} in the test cluster"))
    }

    /// Id of the node `name`. Panics when there is none.
    pub fn node_id(&self, name: &str) -> u32 {
        self.cluster()
            .nodes()
            .find(|n| n.name() == name)
            .map(|n| n.id)
            .unwrap_or_else(|| panic!("no node {name} in the test cluster"))
    }

    /// The evictor as a plugin of plugin set `default` sees it (its log lines stay in it). Panics
    /// when the evictor args or the node selector are invalid.
    pub fn evictor(&mut self, plugin: &'static str) -> Evictor<'_> {
        let config = match &self.config {
            Ok(c) => c,
            Err(e) => panic!("invalid evictor args: {}", arg_errors(e)),
        };
        let nodes = match &self.nodes_in_scope {
            Ok(n) => n,
            Err(e) => panic!("invalid node selector: {e}"),
        };
        // SAFETY: as in `cluster`.
        let cluster = unsafe { Cluster::from_bytes_unchecked(&self.bytes) };
        Evictor::new(
            cluster,
            &self.index,
            config,
            &mut self.state,
            nodes,
            plugin,
            "default",
        )
    }

    /// Run `P` as a plugin of plugin set `default`, continuing this session's run.
    pub fn run<P: Policy>(&mut self, point: ExtensionPoint, args: &str) -> TestRun {
        self.run_in::<P>("default", point, args)
    }

    /// Run `P` as a plugin of `plugin_set`, continuing this session's run.
    pub fn run_in<P: Policy>(
        &mut self,
        plugin_set: &str,
        point: ExtensionPoint,
        args: &str,
    ) -> TestRun {
        let (p0, r0, l0) = (
            self.state.proposals().len(),
            self.state.refusals().len(),
            self.logs.len(),
        );
        let plugin = P::info().name;
        // SAFETY: as in `cluster`.
        let cluster = unsafe { Cluster::from_bytes_unchecked(&self.bytes) };
        let result = match (&self.config, &self.nodes_in_scope) {
            (Err(e), _) => Err(format!("invalid evictor args: {}", arg_errors(e))),
            (_, Err(e)) => Err(format!("invalid node selector: {e}")),
            (Ok(config), Ok(nodes)) => {
                let mut evictor = Evictor::new(
                    cluster,
                    &self.index,
                    config,
                    &mut self.state,
                    nodes,
                    &plugin,
                    plugin_set,
                );
                let mut ctx = Context::new(cluster, &mut evictor);
                let result = evaluate::<P>(&mut ctx, point, args);
                self.logs.append(&mut evictor.logs);
                result
            }
        };
        let describe = |pod: u32| {
            if (pod as usize) < cluster.pod_count() {
                let p = cluster.pod(pod);
                (
                    p.namespace().to_owned(),
                    p.name().to_owned(),
                    p.node_name().to_owned(),
                )
            } else {
                (String::new(), format!("<unknown pod {pod}>"), String::new())
            }
        };
        TestRun {
            proposals: self.state.proposals()[p0..]
                .iter()
                .map(|a| {
                    let (namespace, name, node) = describe(a.pod);
                    Proposal {
                        pod: a.pod,
                        namespace,
                        name,
                        node,
                        reason: a.reason.clone(),
                        plugin: a.plugin.clone(),
                        plugin_set: a.plugin_set.clone(),
                    }
                })
                .collect(),
            refusals: self.state.refusals()[r0..]
                .iter()
                .map(|r| {
                    let (namespace, name, _) = describe(r.pod);
                    Refused {
                        pod: r.pod,
                        namespace,
                        name,
                        reason: r.reason.clone(),
                        refusal: r.refusal.clone(),
                    }
                })
                .collect(),
            logs: self.logs[l0..].to_vec(),
            result,
        }
    }
}

/// An accepted proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub pod: u32,
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName` of the pod.
    pub node: String,
    pub reason: String,
    pub plugin: String,
    pub plugin_set: String,
}

/// A refused proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub pod: u32,
    pub namespace: String,
    pub name: String,
    pub reason: String,
    pub refusal: Refusal,
}

/// What one policy did in a run.
#[derive(Debug, Clone)]
pub struct TestRun {
    /// Accepted proposals, in order.
    pub proposals: Vec<Proposal>,
    pub refusals: Vec<Refused>,
    pub logs: Vec<LogEntry>,
    /// The policy's result (`Err` also when the args, evictor args or node selector are invalid).
    pub result: Result<(), String>,
}

impl TestRun {
    /// Names of the proposed pods, in order.
    pub fn evicted_names(&self) -> Vec<&str> {
        self.proposals.iter().map(|p| p.name.as_str()).collect()
    }

    /// `(namespace, name)` of the proposed pods, in order.
    pub fn evicted(&self) -> Vec<(&str, &str)> {
        self.proposals
            .iter()
            .map(|p| (p.namespace.as_str(), p.name.as_str()))
            .collect()
    }

    /// Names of the pods proposed from `node`.
    pub fn evicted_from(&self, node: &str) -> Vec<&str> {
        self.proposals
            .iter()
            .filter(|p| p.node == node)
            .map(|p| p.name.as_str())
            .collect()
    }

    pub fn was_evicted(&self, namespace: &str, name: &str) -> bool {
        self.proposals
            .iter()
            .any(|p| p.namespace == namespace && p.name == name)
    }

    /// Names of the pods whose proposals were refused, in order.
    pub fn refused_names(&self) -> Vec<&str> {
        self.refusals.iter().map(|r| r.name.as_str()).collect()
    }

    pub fn log_messages(&self) -> Vec<&str> {
        self.logs.iter().map(|l| l.message.as_str()).collect()
    }

    /// Panics with the error and the policy's logs unless the policy succeeded.
    #[track_caller]
    pub fn assert_ok(&self) -> &Self {
        if let Err(e) = &self.result {
            panic!(
                "policy failed: {e}\nlogs:\n{}",
                self.log_messages().join("\n")
            );
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PolicyInfo, Refusal};
    use serde::{Deserialize, Serialize};

    /// Proposes every pod on the nodes in scope that passes both filters, node by node.
    struct EvictEverything;

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Args {
        #[serde(default)]
        namespace: Option<String>,
    }

    impl Policy for EvictEverything {
        type Args = Args;

        fn info() -> PolicyInfo {
            PolicyInfo {
                name: "EvictEverything".into(),
                version: "0.1.0".into(),
                description: "test policy".into(),
                extension_points: vec![ExtensionPoint::Deschedule],
                args_schema: serde_json::json!({}),
                default_args: serde_json::json!({}),
            }
        }

        fn deschedule(ctx: &mut Context<'_>, args: &Args) -> Result<(), String> {
            let cluster = ctx.cluster;
            let by_node = cluster.pods_by_node();
            for node in ctx.nodes() {
                let pods: Vec<u32> = by_node[node as usize]
                    .iter()
                    .copied()
                    .filter(|&p| {
                        args.namespace
                            .as_deref()
                            .is_none_or(|ns| cluster.pod(p).namespace() == ns)
                    })
                    .collect();
                let pods = ctx.filter(&pods);
                let pods = ctx.pre_eviction_filter(&pods);
                for pod in pods {
                    match ctx.propose_eviction(pod, "everything must go") {
                        Ok(()) => ctx.info(&format!("proposed {}", cluster.pod(pod).name())),
                        Err(Refusal::NodeLimit) => break,
                        Err(Refusal::TotalLimit) => return Ok(()),
                        Err(_) => {}
                    }
                }
            }
            Ok(())
        }
    }

    fn cluster() -> TestCluster {
        TestCluster::new()
            .node(TestNode::new("n1").label("pool", "a"))
            .node(TestNode::new("n2").label("pool", "b"))
            .pod(
                TestPod::new("shop", "web-1")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "web"),
            )
            .pod(
                TestPod::new("shop", "web-2")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "web"),
            )
            .pod(
                TestPod::new("pay", "api-1")
                    .on_node("n2")
                    .owned_by("ReplicaSet", "api"),
            )
            .pod(
                TestPod::new("kube-system", "agent")
                    .on_node("n2")
                    .owned_by("DaemonSet", "agent"),
            )
            .pod(TestPod::new("shop", "bare").on_node("n2"))
    }

    #[test]
    fn run_reports_proposals_and_logs() {
        let run = run::<EvictEverything>(&cluster(), Deschedule, "");
        run.assert_ok();
        assert_eq!(run.evicted_names(), vec!["web-1", "web-2", "api-1"]);
        assert_eq!(run.evicted_from("n2"), vec!["api-1"]);
        assert_eq!(run.evicted()[2], ("pay", "api-1"));
        assert!(run.was_evicted("shop", "web-2"));
        assert!(!run.was_evicted("shop", "bare"));
        let p = &run.proposals[0];
        assert_eq!(
            (
                p.node.as_str(),
                p.reason.as_str(),
                p.plugin.as_str(),
                p.plugin_set.as_str()
            ),
            ("n1", "everything must go", "EvictEverything", "default")
        );
        assert_eq!(
            run.log_messages(),
            vec!["proposed web-1", "proposed web-2", "proposed api-1"]
        );
        assert!(run.refusals.is_empty());

        let run = cluster().run::<EvictEverything>(Deschedule, r#"{"namespace": "pay"}"#);
        assert_eq!(run.evicted_names(), vec!["api-1"]);
    }

    #[test]
    fn run_applies_limits_selector_and_evictor_args() {
        let run = cluster()
            .max_per_node(1)
            .run::<EvictEverything>(Deschedule, "{}");
        assert_eq!(run.evicted_names(), vec!["web-1", "api-1"]);
        assert_eq!(run.refused_names(), vec!["web-2"]);
        assert_eq!(run.refusals[0].refusal, Refusal::NodeLimit);

        let run = cluster()
            .node_selector("pool=b")
            .run::<EvictEverything>(Deschedule, "{}");
        assert_eq!(run.evicted_names(), vec!["api-1"]);

        let run = cluster()
            .evictor_args(r#"{"podProtections": {"defaultDisabled": ["DaemonSetPods"]}}"#)
            .run::<EvictEverything>(Deschedule, "{}");
        assert_eq!(
            run.evicted_names(),
            vec!["web-1", "web-2", "api-1", "agent"]
        );
    }

    #[test]
    fn run_reports_setup_and_policy_errors() {
        let run = cluster().run::<EvictEverything>(Deschedule, r#"{"bogus": 1}"#);
        assert!(
            run.result.as_ref().unwrap_err().contains("invalid args"),
            "{:?}",
            run.result
        );
        let run = cluster()
            .evictor_args(r#"{"noEvictionPolicy": "Never"}"#)
            .run::<EvictEverything>(Deschedule, "");
        assert!(
            run.result
                .unwrap_err()
                .contains("invalid evictor args: noEvictionPolicy")
        );
        let run = cluster()
            .evictor_args("{")
            .run::<EvictEverything>(Deschedule, "");
        assert!(run.result.unwrap_err().contains("invalid evictor args"));
        let run = cluster()
            .node_selector("pool in a")
            .run::<EvictEverything>(Deschedule, "");
        assert!(run.result.unwrap_err().contains("invalid node selector"));
        let run = cluster().run::<EvictEverything>(Balance, "");
        assert!(
            run.result
                .unwrap_err()
                .contains("does not implement the balance")
        );
    }

    #[test]
    #[should_panic(expected = "policy failed")]
    fn assert_ok_panics_on_errors() {
        cluster().run::<EvictEverything>(Balance, "").assert_ok();
    }

    #[test]
    fn session_runs_share_the_run_state() {
        let mut session = cluster().max_total(2).session();
        let first =
            session.run_in::<EvictEverything>("hygiene", Deschedule, r#"{"namespace": "pay"}"#);
        assert_eq!(first.evicted_names(), vec!["api-1"]);
        assert_eq!(first.proposals[0].plugin_set, "hygiene");
        let second = session.run::<EvictEverything>(Deschedule, "{}");
        assert_eq!(
            second.evicted_names(),
            vec!["web-1"],
            "one left of the total limit"
        );
        assert_eq!(second.refused_names(), vec!["web-2"]);
        assert_eq!(session.state().total(), 2);
        let third = session.run::<EvictEverything>(Deschedule, "{}");
        assert!(third.proposals.is_empty());
        assert_eq!(
            third.refused_names(),
            vec!["web-2"],
            "web-1 and api-1 are terminating now"
        );
    }

    #[test]
    fn snapshot_contents() {
        let c = TestCluster::new()
            .now_ms(10 * DAY_MS)
            .priority_class("high", 5000)
            .namespace(TestNamespace::new("shop").label("team", "a"))
            .node(
                TestNode::new("n1")
                    .cpu("8")
                    .allocatable("nvidia.com/gpu", "2")
                    .taint("k", "v", NoExecute)
                    .unschedulable(),
            )
            .pvc("shop", "data", Some("gp3"))
            .pod(
                TestPod::new("shop", "app")
                    .on_node("n1")
                    .owned_by("ReplicaSet", "app")
                    .priority_class("high")
                    .cpu("250m")
                    .memory("64Mi")
                    .guaranteed()
                    .image("nginx:1")
                    .container(
                        TestContainer::new("side", "envoy")
                            .cpu("100m")
                            .limit("cpu", "100m")
                            .memory("1Mi")
                            .limit("memory", "1Mi"),
                    )
                    .init_container(TestContainer::new("init", "busybox").cpu("2"))
                    .restarts(3)
                    .toleration("k", "v", Some(NoExecute))
                    .pvc("data", "data")
                    .created_ago_secs(60)
                    .started_ago_secs(30),
            )
            .pod(
                TestPod::new("other", "pending")
                    .phase(PodPhase::Pending)
                    .not_started(),
            )
            .pod(
                TestPod::new("other", "sidecars")
                    .cpu("1")
                    .init_container(TestContainer::new("s", "x").cpu("500m").sidecar()),
            )
            .pdb(
                TestPdb::new("shop", "app")
                    .match_label("app", "x")
                    .disruptions_allowed(1)
                    .healthy(2, 1)
                    .expected_pods(2),
            );
        let s = c.session();
        let cluster = s.cluster();
        assert_eq!(cluster.time_ms(), 10 * DAY_MS);
        let app = cluster.pod(0);
        let cpu = cluster.lookup("cpu").unwrap();
        assert_eq!(app.request(cpu), 2000, "max(app sum 350m, init 2)");
        assert_eq!(
            app.qos(),
            QosClass::Burstable,
            "the init container has no limits"
        );
        assert_eq!(app.priority(), Some(5000));
        assert_eq!(app.owner_kind(), "ReplicaSet");
        assert_eq!(app.start_ms(), Some(10 * DAY_MS - 30_000));
        assert_eq!(app.creation_ms(), 10 * DAY_MS - 60_000);
        assert!(s.index().pod_is_ready(0));
        let images: Vec<&str> = app
            .containers(ContainerKind::App)
            .map(|c| cluster.str(c.image.to_native()))
            .collect();
        assert_eq!(images, vec!["nginx:1", "envoy"]);
        assert_eq!(
            app.containers(ContainerKind::App)
                .next()
                .unwrap()
                .restart_count
                .to_native(),
            3
        );
        let pending = cluster.pod(1);
        assert_eq!(pending.node(), None);
        assert_eq!(pending.start_ms(), None);
        assert!(!s.index().pod_is_ready(1));
        assert_eq!(
            cluster.pod(2).request(cpu),
            1500,
            "sidecars add to the app containers"
        );
        assert_eq!(cluster.pod(2).qos(), QosClass::Burstable);
        let node = cluster.node(0);
        assert_eq!(node.label("kubernetes.io/hostname"), Some("n1"));
        assert_eq!(node.allocatable(cpu), 8000);
        assert_eq!(
            node.allocatable(cluster.lookup("nvidia.com/gpu").unwrap()),
            2000
        );
        assert!(node.is_unschedulable() && node.is_ready());
        let namespaces: Vec<&str> = cluster
            .archive()
            .namespaces
            .iter()
            .map(|n| cluster.str(n.name.to_native()))
            .collect();
        assert_eq!(namespaces, vec!["shop", "other"]);
        let archive = cluster.archive();
        assert_eq!(archive.pvcs.len(), 1);
        assert_eq!(archive.pdbs[0].expected_pods.to_native(), 2);
        assert_eq!(s.pod_id("other", "sidecars"), 2);

        let guaranteed = TestCluster::new()
            .pod(TestPod::new("a", "g").cpu("1").memory("1Gi").guaranteed())
            .pod(TestPod::new("a", "b"))
            .session();
        assert_eq!(guaranteed.cluster().pod(0).qos(), QosClass::Guaranteed);
        assert_eq!(guaranteed.cluster().pod(1).qos(), QosClass::BestEffort);
    }

    #[test]
    #[should_panic(expected = "pod a/p: container main request cpu")]
    fn bad_quantities_name_the_object() {
        TestCluster::new()
            .pod(TestPod::new("a", "p").cpu("lots"))
            .snapshot();
    }
}
