//! Per-node requested resources, as LowNodeUtilization sees them, and measured usage, as
//! LowNodeLoad sees it (`GET /clusters/{name}/nodes`).
//!
//! Requested = the sum of effective requests (`resourcehelper.PodRequests`, already in the
//! archive) of the non-terminal pods bound to the node; percentages are against allocatable
//! (capacity when allocatable is empty), as descheduler computes them. Usage is the node's
//! NodeMetric (else metrics.k8s.io) usage, against the raw allocatable Koordinator annotates
//! (else allocatable), as Koordinator computes it. Reads the archive only.

use rebalancer_policy_sdk::model::{ArchivedQuantity, ArchivedUsageSource, NONE};
use rebalancer_policy_sdk::view::Cluster;
use serde::Serialize;

/// cpu, memory and pod amounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceAmounts {
    /// Millicores.
    pub cpu_milli: i64,
    /// Bytes (rounded up).
    pub memory_bytes: i64,
    pub pods: i64,
}

/// `requested / allocatable × 100`; `null` when the node has none of the resource.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePercentages {
    pub cpu: Option<f64>,
    pub memory: Option<f64>,
    pub pods: Option<f64>,
}

/// One node's allocatable and requested resources.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeUtilization {
    pub name: String,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// Cordoned (`spec.unschedulable`).
    pub unschedulable: bool,
    pub allocatable: ResourceAmounts,
    /// Sum of the effective requests of non-terminal pods on the node; `pods` counts them.
    pub requested: ResourceAmounts,
    pub percent: ResourcePercentages,
    /// Every pod bound to the node, terminal ones included.
    pub pod_count: u32,
    /// Held by reservations for pods on their way here (not in `requested`); `pods` counts
    /// the reservations. Filled in by the backend; zero in a bare snapshot summary.
    pub reserved: ResourceAmounts,
    /// Measured usage; `null` when the cluster reports none for this node.
    pub usage: Option<NodeUsageSummary>,
}

/// Where a node's usage figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum UsageSourceName {
    /// Koordinator's NodeMetric (koordlet).
    NodeMetric,
    /// metrics.k8s.io NodeMetrics (metrics-server).
    MetricsApi,
}

/// A node's measured usage.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeUsageSummary {
    pub source: UsageSourceName,
    /// When it was measured (ms since the epoch), if the metric says.
    pub update_ms: Option<i64>,
    /// The window it averages over (ms), if the metric says.
    pub window_ms: Option<i64>,
    /// cpu and memory used; `pods` counts the non-terminal pods on the node.
    pub used: ResourceAmounts,
    /// `used / base × 100`, where base is the `node.koordinator.sh/raw-allocatable` annotation
    /// when the node has it, else allocatable (what LowNodeLoad thresholds compare against).
    pub percent: ResourcePercentages,
    /// The percentages are against the raw allocatable annotation.
    pub raw_allocatable: bool,
}

fn bytes_from_milli(milli: i64) -> i64 {
    milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0)
}

/// The milli-amount of resource `id` in an archived list (0 when absent or not interned).
fn amount(list: &[ArchivedQuantity], id: Option<u32>) -> i64 {
    id.and_then(|id| list.iter().find(|q| q.resource.to_native() == id))
        .map_or(0, |q| q.milli.to_native())
}

fn percent(requested: i64, allocatable: i64) -> Option<f64> {
    (allocatable > 0).then(|| requested as f64 * 100.0 / allocatable as f64)
}

/// Utilization of every node of the snapshot, in node-table order.
pub fn node_utilization(cluster: Cluster<'_>) -> Vec<NodeUtilization> {
    let cpu = cluster.lookup("cpu");
    let memory = cluster.lookup("memory");
    let pods = cluster.lookup("pods");
    let mut requested = vec![(0i64, 0i64, 0i64); cluster.node_count()];
    let mut counts = vec![0u32; cluster.node_count()];
    for pod in cluster.pods() {
        let node = pod.raw.node.to_native();
        if node == NONE {
            continue;
        }
        counts[node as usize] += 1;
        if pod.is_terminal() {
            continue;
        }
        let r = &mut requested[node as usize];
        r.0 = r.0.saturating_add(amount(&pod.raw.requests, cpu));
        r.1 = r.1.saturating_add(amount(&pod.raw.requests, memory));
        r.2 += 1;
    }
    cluster
        .nodes()
        .map(|node| {
            let i = node.id as usize;
            let allocatable = ResourceAmounts {
                cpu_milli: amount(&node.raw.allocatable, cpu),
                memory_bytes: bytes_from_milli(amount(&node.raw.allocatable, memory)),
                pods: amount(&node.raw.allocatable, pods) / 1000,
            };
            let (req_cpu, req_mem, req_pods) = requested[i];
            let measured = node.usage();
            let usage = match measured.source {
                ArchivedUsageSource::None => None,
                ref source => {
                    let raw = !measured.raw_allocatable.is_empty();
                    let base = if raw {
                        &measured.raw_allocatable[..]
                    } else {
                        &node.raw.allocatable[..]
                    };
                    let (cpu_used, mem_used) =
                        (amount(&measured.node, cpu), amount(&measured.node, memory));
                    Some(NodeUsageSummary {
                        source: if *source == ArchivedUsageSource::NodeMetric {
                            UsageSourceName::NodeMetric
                        } else {
                            UsageSourceName::MetricsApi
                        },
                        update_ms: measured.update_ms.as_ref().map(|t| t.to_native()),
                        window_ms: measured.window_ms.as_ref().map(|t| t.to_native()),
                        used: ResourceAmounts {
                            cpu_milli: cpu_used,
                            memory_bytes: bytes_from_milli(mem_used),
                            pods: req_pods,
                        },
                        percent: ResourcePercentages {
                            cpu: percent(cpu_used, amount(base, cpu)),
                            memory: percent(mem_used, amount(base, memory)),
                            pods: percent(req_pods, amount(base, pods) / 1000),
                        },
                        raw_allocatable: raw,
                    })
                }
            };
            let requested = ResourceAmounts {
                cpu_milli: req_cpu,
                memory_bytes: bytes_from_milli(req_mem),
                pods: req_pods,
            };
            NodeUtilization {
                name: node.name().to_owned(),
                ready: node.is_ready(),
                unschedulable: node.is_unschedulable(),
                percent: ResourcePercentages {
                    cpu: percent(req_cpu, allocatable.cpu_milli),
                    memory: percent(req_mem, amount(&node.raw.allocatable, memory)),
                    pods: percent(req_pods, allocatable.pods),
                },
                allocatable,
                requested,
                pod_count: counts[i],
                reserved: ResourceAmounts::default(),
                usage,
            }
        })
        .collect()
}
