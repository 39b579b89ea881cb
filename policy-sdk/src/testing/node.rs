//! [`TestNode`]: a hand-built node (labels, taints, allocatable, readiness, schedulability).
//!
//! Owns the node builder only; turning it into snapshot rows is [`super::cluster`].

use super::selectors::set_pair;
use super::*;

/// A node: 4 cpu, 16Gi memory, 110 pods, Ready and schedulable unless told otherwise, labelled
/// `kubernetes.io/hostname=<name>`.
#[derive(Debug, Clone)]
pub struct TestNode {
    pub(super) name: String,
    pub(super) labels: Vec<(String, String)>,
    pub(super) taints: Vec<(String, String, TaintEffect)>,
    pub(super) allocatable: Vec<(String, String)>,
    pub(super) unschedulable: bool,
    pub(super) ready: bool,
    pub(super) annotations: Vec<(String, String)>,
    /// Measured usage: the node's, the system's, raw allocatable, where from, how old.
    pub(super) usage: Vec<(String, String)>,
    pub(super) system_usage: Vec<(String, String)>,
    pub(super) gone_pods_usage: Vec<(String, String)>,
    pub(super) raw_allocatable: Vec<(String, String)>,
    pub(super) usage_source: UsageSource,
    pub(super) usage_age_ms: Option<i64>,
    pub(super) usage_window_ms: Option<i64>,
    pub(super) cpu: TestCpuTopology,
}

/// A node's CPU topology and koordlet's CPU annotations, as [`TestNode`]'s CPU builders set
/// them (CPU lists as text, parsed when the snapshot is built).
#[derive(Debug, Clone, Default)]
pub(super) struct TestCpuTopology {
    pub(super) has_nrt: bool,
    /// (id, core, socket, NUMA node).
    pub(super) cpus: Vec<(u32, u32, u32, u32)>,
    pub(super) kubelet_policy: Option<(String, String)>,
    pub(super) kubelet_options: Vec<(String, String)>,
    /// (namespace, name, CPU list).
    pub(super) pod_allocs: Vec<(String, String, String)>,
    /// (socket, NUMA node, CPU list).
    pub(super) shared_pools: Vec<(i32, i32, String)>,
    pub(super) be_shared_pools: Vec<(i32, i32, String)>,
    pub(super) node_reserved: Option<(String, String)>,
    pub(super) system_qos: Option<(String, bool)>,
    pub(super) topology_policies: Vec<String>,
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
            annotations: Vec::new(),
            usage: Vec::new(),
            system_usage: Vec::new(),
            gone_pods_usage: Vec::new(),
            raw_allocatable: Vec::new(),
            usage_source: UsageSource::None,
            usage_age_ms: Some(0),
            usage_window_ms: None,
            cpu: TestCpuTopology::default(),
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

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.annotations, key, value);
        self
    }

    /// The node's measured usage of `resource` (`"cpu"`, `"3"`), as a NodeMetric reports it
    /// (measured at the snapshot time unless [`TestNode::usage_age_ms`] says otherwise).
    pub fn usage(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.usage, resource, quantity);
        if self.usage_source == UsageSource::None {
            self.usage_source = UsageSource::NodeMetric;
        }
        self
    }

    /// Usage outside pods (NodeMetric `systemUsage`).
    pub fn system_usage(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.system_usage, resource, quantity);
        self
    }

    /// Usage reported for pods no longer in the cluster.
    pub fn gone_pods_usage(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.gone_pods_usage, resource, quantity);
        self
    }

    /// The `node.koordinator.sh/raw-allocatable` amount of `resource`.
    pub fn raw_allocatable(mut self, resource: &str, quantity: &str) -> Self {
        set_pair(&mut self.raw_allocatable, resource, quantity);
        self
    }

    /// Where the usage comes from (NodeMetric by default once usage is set).
    pub fn usage_source(mut self, source: UsageSource) -> Self {
        self.usage_source = source;
        self
    }

    /// How long before the snapshot time the usage was measured (`None`: not said).
    pub fn usage_age_ms(mut self, age: Option<i64>) -> Self {
        self.usage_age_ms = age;
        self
    }

    /// The window the usage averages over.
    pub fn usage_window_ms(mut self, window: Option<i64>) -> Self {
        self.usage_window_ms = window;
        self
    }

    /// A NodeResourceTopology with `sockets` × `numa_per_socket` NUMA nodes of
    /// `cores_per_numa` physical cores with `threads_per_core` threads, numbered as Linux does
    /// on most x86 machines: core `c`'s threads are CPUs `c`, `c + cores`, `c + 2 × cores`…
    /// (so with SMT 2 on 8 cores, CPUs 0 and 8 are siblings).
    pub fn cpus(
        mut self,
        sockets: u32,
        numa_per_socket: u32,
        cores_per_numa: u32,
        threads_per_core: u32,
    ) -> Self {
        let cores = sockets * numa_per_socket * cores_per_numa;
        self.cpu.has_nrt = true;
        self.cpu.cpus = (0..threads_per_core)
            .flat_map(|t| {
                (0..cores).map(move |c| {
                    let numa = c / cores_per_numa;
                    (t * cores + c, c, numa / numa_per_socket, numa)
                })
            })
            .collect();
        self.cpu.cpus.sort_unstable();
        self
    }

    /// `kubelet.koordinator.sh/cpu-manager-policy`: `policy` (`static`, `none`) and its reserved
    /// CPUs (a CPU list).
    pub fn kubelet_cpu_policy(mut self, policy: &str, reserved: &str) -> Self {
        self.cpu.has_nrt = true;
        self.cpu.kubelet_policy = Some((policy.to_owned(), reserved.to_owned()));
        self
    }

    /// A kubelet CPU manager option (`full-pcpus-only`, `"true"`).
    pub fn kubelet_cpu_option(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.cpu.kubelet_options, key, value);
        self
    }

    /// `pod-cpu-allocs`: CPUs the kubelet static policy pinned for pod `namespace/name`.
    pub fn kubelet_pinned(mut self, namespace: &str, name: &str, cpus: &str) -> Self {
        self.cpu.has_nrt = true;
        self.cpu
            .pod_allocs
            .push((namespace.to_owned(), name.to_owned(), cpus.to_owned()));
        self
    }

    /// `cpu-shared-pools`: the LS pool of one NUMA node.
    pub fn shared_pool(mut self, socket: i32, numa: i32, cpus: &str) -> Self {
        self.cpu.has_nrt = true;
        self.cpu.shared_pools.push((socket, numa, cpus.to_owned()));
        self
    }

    /// `be-cpu-shared-pools`: the BE pool of one NUMA node.
    pub fn be_shared_pool(mut self, socket: i32, numa: i32, cpus: &str) -> Self {
        self.cpu.has_nrt = true;
        self.cpu
            .be_shared_pools
            .push((socket, numa, cpus.to_owned()));
        self
    }

    /// `node.koordinator.sh/reservation`: reserved CPUs and the apply policy.
    pub fn reserved_cpus(mut self, cpus: &str, apply_policy: &str) -> Self {
        self.cpu.node_reserved = Some((cpus.to_owned(), apply_policy.to_owned()));
        self
    }

    /// `node.koordinator.sh/system-qos-resource`: the system-QoS cpuset.
    pub fn system_qos_cpus(mut self, cpus: &str, exclusive: bool) -> Self {
        self.cpu.system_qos = Some((cpus.to_owned(), exclusive));
        self
    }

    /// A NodeResourceTopology `topologyPolicies` entry (`SingleNUMANodePodLevel`).
    pub fn topology_policy(mut self, policy: &str) -> Self {
        self.cpu.has_nrt = true;
        self.cpu.topology_policies.push(policy.to_owned());
        self
    }
}
