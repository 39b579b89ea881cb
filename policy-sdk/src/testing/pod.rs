//! [`TestPod`] and its [`TestContainer`]s: a hand-built pod (owners, labels, phase, ages,
//! containers and requests, scheduling constraints, volumes, conditions).
//!
//! Owns the pod builder only; turning it into snapshot rows (requests and QoS through
//! [`crate::k8s::resources`]) is [`super::cluster`].

use super::selectors::set_pair;
use super::*;
use crate::model::VolumeKind;

/// A container of a [`TestPod`].
#[derive(Debug, Clone)]
pub struct TestContainer {
    pub(super) name: String,
    pub(super) image: String,
    pub(super) requests: Vec<(String, String)>,
    pub(super) limits: Vec<(String, String)>,
    pub(super) restart_count: i32,
    pub(super) ready: Option<bool>,
    pub(super) waiting_reason: Option<String>,
    pub(super) terminated: Option<(String, i32)>,
    pub(super) sidecar: bool,
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

/// A pod. By default: Running and Ready, created and started a day before the snapshot time,
/// one app container `main` with image `image` and no requests (BestEffort), no owner.
#[derive(Debug, Clone)]
pub struct TestPod {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) uid: Option<String>,
    pub(super) node: Option<String>,
    pub(super) owners: Vec<(String, String, String)>,
    pub(super) labels: Vec<(String, String)>,
    pub(super) annotations: Vec<(String, String)>,
    pub(super) priority: Option<i32>,
    pub(super) priority_class: Option<String>,
    pub(super) phase: PodPhase,
    pub(super) reason: Option<String>,
    pub(super) ready: Option<bool>,
    pub(super) created_ago_ms: i64,
    pub(super) started_ago_ms: Option<i64>,
    pub(super) terminating: bool,
    pub(super) containers: Vec<TestContainer>,
    pub(super) init_containers: Vec<TestContainer>,
    pub(super) qos: Option<QosClass>,
    pub(super) node_selector: Vec<(String, String)>,
    pub(super) node_required: Option<Vec<TestTerm>>,
    pub(super) node_preferred: Vec<(i32, TestTerm)>,
    pub(super) pod_affinity: Vec<TestAffinityTerm>,
    pub(super) pod_affinity_preferred: Vec<(i32, TestAffinityTerm)>,
    pub(super) anti_affinity: Vec<TestAffinityTerm>,
    pub(super) anti_affinity_preferred: Vec<(i32, TestAffinityTerm)>,
    pub(super) tolerations: Vec<(String, TolerationOperator, String, Option<TaintEffect>)>,
    pub(super) spread: Vec<TestSpread>,
    pub(super) volumes: Vec<(String, VolumeKind, String)>,
    pub(super) resource_claims: bool,
    pub(super) conditions: Vec<(String, String, String, Option<i64>)>,
    /// Measured usage (resource, quantity) and where it comes from.
    pub(super) usage: Vec<(String, String)>,
    pub(super) usage_source: UsageSource,
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
            usage: Vec::new(),
            usage_source: UsageSource::None,
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

    pub(super) fn main(&mut self) -> &mut TestContainer {
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

impl TestPod {
    /// Measured usage of `resource` (`"cpu"`, `"500m"`), as its node's NodeMetric reports it.
    pub fn usage(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.usage, resource, quantity);
        if self.usage_source == UsageSource::None {
            self.usage_source = UsageSource::NodeMetric;
        }
        self
    }

    /// Where [`TestPod::usage`] comes from (NodeMetric by default).
    pub fn usage_source(mut self, source: UsageSource) -> Self {
        self.usage_source = source;
        self
    }
}
