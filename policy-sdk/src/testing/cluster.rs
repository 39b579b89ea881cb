//! [`TestCluster`]: the hand-built cluster plus what a run needs besides the policy
//! (DefaultEvictor args, limits, the policy-level node selector), and its conversion into a
//! snapshot ([`TestCluster::snapshot`]) and a [`TestSession`].
//!
//! Owns the builder-to-snapshot conversion; must not run policies itself (that is
//! [`super::session`]).

use std::collections::BTreeSet;

use super::selectors::kvs;
use super::*;
use crate::build::SnapshotBuilder;
use crate::evictor::{ClusterIndex, DefaultEvictorArgs, EvictorConfig, RunState};
use crate::k8s::selector::Selector;
use crate::k8s::{quantity, resources};
use crate::model::{
    self, Affinity, Container, ContainerKind, Namespace, Node, NodeUsage, OwnerRef, Pdb, Pod,
    PodCondition, PodUsage, PreferredSchedulingTerm, PriorityClass, Pvc, Quantity, Snapshot, Taint,
    Toleration, Volume, WeightedPodAffinityTerm,
};
use crate::policy::{ExtensionPoint, Policy};
use crate::view::Cluster;

/// A hand-built cluster plus what a run needs besides the policy: DefaultEvictor args, limits and
/// the policy-level node selector.
#[derive(Debug, Clone)]
pub struct TestCluster {
    pub(super) now_ms: i64,
    pub(super) nodes: Vec<TestNode>,
    pub(super) pods: Vec<TestPod>,
    pub(super) pdbs: Vec<TestPdb>,
    pub(super) namespaces: Vec<TestNamespace>,
    pub(super) priority_classes: Vec<(String, i32)>,
    pub(super) pvcs: Vec<(String, String, Option<String>)>,
    pub(super) evictor_args: String,
    pub(super) limits: Limits,
    pub(super) node_selector: String,
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
            let annotations = kvs(&mut b, &n.annotations);
            let what = format!("node {}", n.name);
            let usage = NodeUsage {
                source: n.usage_source,
                update_ms: n.usage_age_ms.map(|age| now - age),
                window_ms: n.usage_window_ms,
                node: quantities(&mut b, &n.usage, &what),
                system: quantities(&mut b, &n.system_usage, &what),
                gone_pods: quantities(&mut b, &n.gone_pods_usage, &what),
                raw_allocatable: quantities(&mut b, &n.raw_allocatable, &what),
            };
            let cpu = cpu_topology(&mut b, &n.cpu, &self.pods, &what);
            let t = b.snapshot_mut();
            t.nodes.push(node);
            t.node_annotations.push(annotations);
            t.node_usage.push(usage);
            t.node_cpu.push(cpu);
        }

        for p in &self.pods {
            let pod = self.build_pod(&mut b, p);
            let what = format!("pod {}/{}", p.namespace, p.name);
            let usage = PodUsage {
                source: p.usage_source,
                usage: quantities(&mut b, &p.usage, &what),
            };
            let t = b.snapshot_mut();
            t.pods.push(pod);
            t.pod_usage.push(usage);
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

    /// Run one extension point of `P` in a fresh run with `state` as its policy state (committed
    /// into `state` only if the run succeeds; see [`TestSession::run_with_state`]).
    pub fn run_with_state<P: Policy>(
        &self,
        point: ExtensionPoint,
        args: &str,
        state: &mut crate::state::StateScope,
    ) -> TestRun {
        self.session().run_with_state::<P>(point, args, state)
    }
}

/// `(resource, quantity)` pairs in milli-units.
fn quantities(b: &mut SnapshotBuilder, list: &[(String, String)], what: &str) -> Vec<Quantity> {
    list.iter()
        .map(|(res, q)| Quantity {
            resource: b.intern(res),
            milli: quantity::parse_milli(q)
                .unwrap_or_else(|e| panic!("{what}: usage {res}={q:?}: {e}")),
        })
        .collect()
}

/// A test node's CPU topology rows; pinned pods resolve to their index among `pods`.
fn cpu_topology(
    b: &mut SnapshotBuilder,
    t: &super::node::TestCpuTopology,
    pods: &[TestPod],
    what: &str,
) -> model::NodeCpuTopology {
    let list = |text: &str| {
        crate::k8s::cpuset::parse_cpu_list(text)
            .unwrap_or_else(|e| panic!("{what}: CPU list {text:?}: {e}"))
    };
    let pools = |pools: &[(i32, i32, String)]| -> Vec<model::CpuPool> {
        pools
            .iter()
            .map(|(socket, numa, cpus)| model::CpuPool {
                socket: *socket,
                numa: *numa,
                cpus: list(cpus),
            })
            .collect()
    };
    let (policy, reserved) = t.kubelet_policy.clone().unwrap_or_default();
    let (node_reserved, apply) = t.node_reserved.clone().unwrap_or_default();
    let (qos, qos_exclusive) = t.system_qos.clone().unwrap_or((String::new(), true));
    model::NodeCpuTopology {
        has_nrt: t.has_nrt,
        cpus: t
            .cpus
            .iter()
            .map(|&(id, core, socket, numa)| model::CpuInfo {
                id,
                core,
                socket,
                numa,
            })
            .collect(),
        kubelet_policy: if policy.is_empty() {
            0
        } else {
            b.intern(&policy)
        },
        kubelet_options: kvs(b, &t.kubelet_options),
        kubelet_reserved: list(&reserved),
        pod_allocs: t
            .pod_allocs
            .iter()
            .map(|(ns, name, cpus)| {
                let index = pods
                    .iter()
                    .position(|p| &p.namespace == ns && &p.name == name);
                let uid = index
                    .and_then(|i| pods[i].uid.clone())
                    .unwrap_or_else(|| format!("uid-pod-{ns}-{name}"));
                model::PodCpuAlloc {
                    namespace: b.intern(ns),
                    name: b.intern(name),
                    uid: b.intern(&uid),
                    pod: index.map_or(model::NONE, |i| i as u32),
                    cpus: list(cpus),
                    managed_by_kubelet: true,
                }
            })
            .collect(),
        shared_pools: pools(&t.shared_pools),
        be_shared_pools: pools(&t.be_shared_pools),
        node_reserved: list(&node_reserved),
        node_reservation_policy: if apply.is_empty() {
            0
        } else {
            b.intern(&apply)
        },
        system_qos_cpus: list(&qos),
        system_qos_exclusive: qos_exclusive,
        topology_policies: t.topology_policies.iter().map(|p| b.intern(p)).collect(),
        zones: Vec::new(),
    }
}
