//! The Koordinator layer of a reference cluster (`rebalancer-bench generate <size> --koordinator`):
//! what koordlet and a Koordinator-scheduled cluster add to gen_large.py's objects, so
//! LowNodeLoad and CpuOrchestration have their inputs at the benchmark's scale.
//!
//! Owns the layer's decisions: a NodeMetric and a NodeResourceTopology per node, measured pod
//! usage, and the cpusets of the cpuset pods. It draws from its own PRNG, never from
//! gen_large.py's, so every object the base generator writes keeps its content and order; the
//! layer only adds labels and an annotation to the cpuset pods and appends its objects before
//! the namespaces.
//!
//! What it models:
//! - **Usage.** Each node has a usage factor: most nodes use 25–65 % of what their pods request,
//!   about 8 % are "hot" (their pods burst to 140–190 % of their requests: hot on usage, not on
//!   requests). A pod's cpu usage is its request × the node factor × a jitter of ±20 %; memory
//!   is 55–95 % of the request. koordlet's system usage is 4 % of the node's cpu and 1 GiB.
//!   DaemonSet pods are counted in the system usage (the layer does not see their generated
//!   names); every other running pod has a `podsMetric` entry.
//! - **Topology.** 64 logical CPUs on the 8-core instance types and 128 on the 16-core ones
//!   (the benchmark's prescription: 2 sockets, one NUMA node each, SMT 2, numbered as Linux does
//!   on x86). Allocatable cpu stays gen_large.py's; the topology describes the machine, of which
//!   the kubelet offers only part. The kubelet CPU manager policy is `none`.
//! - **cpuset pods.** Workloads requesting exactly one cpu are koord-prod LSR pods with a
//!   one-CPU cpuset in `scheduling.koordinator.sh/resource-status`, handed out in CPU order per
//!   node. About 1 % of them are given the CPU of the previous cpuset pod of their node instead
//!   (two pods pinned to one CPU: invariant H8), the drift a CPU orchestration check exists for.
//!
//! Must not: draw from the base generator's PRNG or change what it writes without the layer.

use super::json::{Json, Obj, obj};
use crate::demo::Rng;

/// The time every NodeMetric was reported: 2026-11-25T11:59:30Z (30 s before
/// [`OBSERVED_AT`]).
pub(crate) const METRICS_AT: &str = "2026-11-25T11:59:30Z";
/// The scenario's `observedAt`: when the cluster is taken to have been recorded. The bench
/// passes it with the snapshot, so metric ages are measured from it and not from today.
pub(crate) const OBSERVED_AT: &str = "2026-11-25T12:00:00Z";
/// koordlet's default reporting window.
const AGGREGATE_SECONDS: i64 = 300;

/// Uniform in `[lo, hi)`.
fn between(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.unit()
}

/// One running pod's measured usage.
struct PodUse {
    namespace: String,
    name: String,
    cpu_m: i64,
    mem_mi: i64,
}

struct NodeState {
    /// Measured usage per requested unit.
    factor: f64,
    /// Logical CPUs of the machine.
    cpus: u32,
    /// Next CPU handed to a cpuset pod, and the last one handed out.
    next_cpu: u32,
    last_cpu: Option<u32>,
    pods: Vec<PodUse>,
    /// Usage of the DaemonSet pods, reported as system usage.
    daemon_cpu_m: i64,
    daemon_mem_mi: i64,
}

/// The layer's state while the base generator writes its objects.
pub(crate) struct Layer {
    rng: Rng,
    nodes: Vec<NodeState>,
}

/// Labels and annotations the layer gives a cpuset pod.
pub(crate) struct CpusetPod {
    pub labels: Obj,
    pub annotations: Obj,
}

impl Layer {
    /// The layer for nodes of `cores` cores each (gen_large.py's instance types).
    pub(crate) fn new(seed: u64, cores: impl Iterator<Item = i64>) -> Self {
        let mut rng = Rng::new(seed ^ 0x6b6f_6f72_645f_6c61);
        let nodes = cores
            .map(|cores| {
                let factor = if rng.unit() < 0.08 {
                    between(&mut rng, 1.4, 1.9)
                } else {
                    between(&mut rng, 0.25, 0.65)
                };
                NodeState {
                    factor,
                    cpus: if cores >= 16 { 128 } else { 64 },
                    next_cpu: 0,
                    last_cpu: None,
                    pods: Vec::new(),
                    daemon_cpu_m: 0,
                    daemon_mem_mi: 0,
                }
            })
            .collect();
        Layer { rng, nodes }
    }

    /// Whether a workload of this cpu request is made of cpuset pods.
    pub(crate) fn is_cpuset_workload(cpu_m: i64) -> bool {
        cpu_m == 1000
    }

    /// The labels (`base` plus Koordinator's) and annotations of the next cpuset pod on `node`.
    pub(crate) fn cpuset_pod(&mut self, node: usize, base: &Obj) -> CpusetPod {
        let n = &mut self.nodes[node];
        let cpu = match n.last_cpu {
            Some(last) if self.rng.unit() < 0.01 => last,
            _ => {
                let cpu = n.next_cpu % n.cpus;
                n.next_cpu += 1;
                cpu
            }
        };
        n.last_cpu = Some(cpu);
        let mut labels = base.clone();
        labels.set("koordinator.sh/qosClass", "LSR");
        labels.set("koordinator.sh/priority-class", "koord-prod");
        let status = serde_json::json!({"cpuset": cpu.to_string()}).to_string();
        CpusetPod {
            labels,
            annotations: obj! { "scheduling.koordinator.sh/resource-status" => status },
        }
    }

    /// A running pod of `cpu_m` / `mem_mi` requests was written on `node`.
    pub(crate) fn pod(
        &mut self,
        node: usize,
        namespace: &str,
        name: &str,
        cpu_m: i64,
        mem_mi: i64,
    ) {
        let factor = self.nodes[node].factor * between(&mut self.rng, 0.8, 1.2);
        let mem = between(&mut self.rng, 0.55, 0.95);
        self.nodes[node].pods.push(PodUse {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            cpu_m: ((cpu_m as f64) * factor).round() as i64,
            mem_mi: ((mem_mi as f64) * mem).round() as i64,
        });
    }

    /// A DaemonSet pod of these requests runs on every node.
    pub(crate) fn daemon_pod_everywhere(&mut self, cpu_m: i64, mem_mi: i64) {
        for n in &mut self.nodes {
            n.daemon_cpu_m += (cpu_m as f64 * n.factor.min(1.0)).round() as i64;
            n.daemon_mem_mi += mem_mi * 3 / 4;
        }
    }

    /// The NodeMetric of node `i` named `name` with `cores` cores.
    pub(crate) fn node_metric(&self, i: usize, name: &str, cores: i64) -> Obj {
        let n = &self.nodes[i];
        let system_cpu = cores * 40 + n.daemon_cpu_m;
        let system_mem = 1024 + n.daemon_mem_mi;
        let (pods_cpu, pods_mem) = n
            .pods
            .iter()
            .fold((0, 0), |(c, m), p| (c + p.cpu_m, m + p.mem_mi));
        let resources = |cpu: i64, mem: i64| obj! { "resources" => obj! { "cpu" => format!("{cpu}m"), "memory" => format!("{mem}Mi") } };
        let pods: Vec<Obj> = n
            .pods
            .iter()
            .map(|p| {
                obj! {
                    "namespace" => p.namespace.as_str(), "name" => p.name.as_str(),
                    "podUsage" => resources(p.cpu_m, p.mem_mi),
                }
            })
            .collect();
        obj! {
            "apiVersion" => "slo.koordinator.sh/v1alpha1", "kind" => "NodeMetric",
            "metadata" => obj! { "name" => name },
            "spec" => obj! { "metricCollectPolicy" => obj! {
                "aggregateDurationSeconds" => AGGREGATE_SECONDS, "reportIntervalSeconds" => 60,
            } },
            "status" => obj! {
                "updateTime" => METRICS_AT,
                "nodeMetric" => obj! {
                    "nodeUsage" => resources(system_cpu + pods_cpu, system_mem + pods_mem),
                    "systemUsage" => resources(system_cpu, system_mem),
                },
                "podsMetric" => pods,
            },
        }
    }

    /// The NodeResourceTopology of node `i` named `name`, with koordlet's annotations.
    pub(crate) fn topology(&self, i: usize, name: &str) -> Obj {
        let cpus = self.nodes[i].cpus;
        let sockets = 2;
        let cores = cpus / 2;
        let cores_per_socket = cores / sockets;
        // Linux on x86: thread t of core c is CPU c + t × cores; core c is on socket
        // c / cores_per_socket, whose NUMA node has the same id.
        let detail: Vec<serde_json::Value> = (0..cpus)
            .map(|id| {
                let core = id % cores;
                let socket = core / cores_per_socket;
                serde_json::json!({"id": id, "core": core, "socket": socket, "node": socket})
            })
            .collect();
        let socket_cpus = |s: u32| {
            let lo = s * cores_per_socket;
            let hi = lo + cores_per_socket - 1;
            format!("{lo}-{hi},{}-{}", lo + cores, hi + cores)
        };
        let pools: Vec<serde_json::Value> = (0..sockets)
            .map(|s| serde_json::json!({"socket": s, "node": s, "cpuset": socket_cpus(s)}))
            .collect();
        let pools = serde_json::Value::Array(pools).to_string();
        let zones: Vec<Obj> = (0..sockets)
            .map(|s| {
                let per_numa = i64::from(cpus / sockets);
                obj! {
                    "name" => format!("node-{s}"), "type" => "Node",
                    "resources" => vec![obj! {
                        "name" => "cpu", "capacity" => per_numa.to_string(),
                        "allocatable" => per_numa.to_string(), "available" => per_numa.to_string(),
                    }],
                }
            })
            .collect();
        obj! {
            "apiVersion" => "topology.node.k8s.io/v1alpha1", "kind" => "NodeResourceTopology",
            "metadata" => obj! {
                "name" => name,
                "annotations" => obj! {
                    "node.koordinator.sh/cpu-topology" => serde_json::json!({"detail": detail}).to_string(),
                    "kubelet.koordinator.sh/cpu-manager-policy" => r#"{"policy":"none"}"#,
                    "node.koordinator.sh/pod-cpu-allocs" => "null",
                    "node.koordinator.sh/cpu-shared-pools" => pools.as_str(),
                    "node.koordinator.sh/be-cpu-shared-pools" => pools.as_str(),
                },
            },
            "topologyPolicies" => vec![Json::from("None")],
            "zones" => zones,
        }
    }
}
