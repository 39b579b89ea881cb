//! The requests-based node usage of descheduler's node-utilization plugins (`nodeutilization.go`
//! and the requests usage client), shared by LowNodeUtilization and HighNodeUtilization: the
//! tracked resources ([`resources`]), usage and capacity per node in scope ([`node_usages`]),
//! percentages of allocatable ([`listed_percentages`]), capacity capped at a threshold
//! ([`capped_capacity`]), a pod's share of each resource ([`Resource::demand`], [`release`]), the
//! raw usage sum the plugins sort nodes by ([`raw_usage`]), and the `evictableNamespaces` arg
//! (exclude only) with its validation, schema and resolved ids.
//!
//! Amounts are milli-units; cpu is compared in milli-units and every other resource in whole
//! units (`Quantity.Value()`), as descheduler does. Must not classify nodes or pick pods: the
//! thresholds and the walk are each plugin's own.

use rebalancer_policy_sdk::args::Namespaces;
use rebalancer_policy_sdk::model::{NONE, StrId};
use rebalancer_policy_sdk::{ArgError, Cluster, NodeRef, PodRef};

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const PODS: &str = "pods";

/// How a resource's amounts are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Compared in milli-units.
    Cpu,
    /// The pod count, not a request.
    Pods,
    /// descheduler's Prometheus pseudo-resource: every node has a capacity of 100.
    Metric,
    /// memory and every other resource: compared in whole units (`Quantity.Value()`).
    Other,
}

/// One resource the pass tracks (descheduler's `resourceNames`/`extendedResourceNames`).
#[derive(Debug, Clone)]
pub struct Resource {
    pub name: String,
    /// Interned id; `None` when no object of the snapshot mentions the resource.
    pub id: Option<StrId>,
    pub kind: Kind,
    /// Index into the configured thresholds, when listed there.
    pub listed: Option<usize>,
}

impl Resource {
    /// What evicting `pod` takes off its node for this resource: one pod slot (1000 milli) for
    /// `pods`, its effective request otherwise.
    pub fn demand(&self, pod: PodRef<'_>) -> i64 {
        match self.kind {
            Kind::Pods => 1000,
            _ => self.id.map_or(0, |id| pod.request(id)),
        }
    }
}

/// Usage and capacity of one node in scope.
#[derive(Debug, Clone)]
pub struct NodeUsage {
    pub node: u32,
    /// Non-terminal pods on the node, in snapshot order.
    pub pods: Vec<u32>,
    /// Per resource slot, milli-units.
    pub usage: Vec<i64>,
    /// Per resource slot, milli-units; `None` when the node does not report the resource.
    pub capacity: Vec<Option<i64>>,
    /// Per resource slot: capacity capped at the node's high threshold (descheduler's
    /// `available`), milli-units. Empty until the plugin fills it with [`capped_capacity`].
    pub capped: Vec<i64>,
}

/// The listed resources, then cpu, memory and pods. `metric` names descheduler's Prometheus
/// pseudo-resource ([`Kind::Metric`]) for plugins that support it; `None` reads every other
/// name as a plain resource.
pub fn resources(cluster: Cluster<'_>, listed: &[&String], metric: Option<&str>) -> Vec<Resource> {
    let mut names: Vec<&str> = listed.iter().map(|s| s.as_str()).collect();
    for basic in [CPU, MEMORY, PODS] {
        if !names.contains(&basic) {
            names.push(basic);
        }
    }
    names
        .into_iter()
        .map(|name| Resource {
            name: name.to_owned(),
            id: cluster.lookup(name),
            kind: match name {
                CPU => Kind::Cpu,
                PODS => Kind::Pods,
                _ if metric == Some(name) => Kind::Metric,
                _ => Kind::Other,
            },
            listed: listed.iter().position(|l| l.as_str() == name),
        })
        .collect()
}

/// Usage and capacity of every node in scope (one pass over the pods).
pub fn node_usages(
    cluster: Cluster<'_>,
    scope: &[u32],
    resources: &[Resource],
) -> Result<Vec<NodeUsage>, String> {
    let mut position = vec![NONE; cluster.node_count()];
    let mut nodes: Vec<NodeUsage> = Vec::with_capacity(scope.len());
    for (pos, &node_id) in scope.iter().enumerate() {
        let slot = position
            .get_mut(node_id as usize)
            .ok_or_else(|| format!("host listed node {node_id}, which is not in the snapshot"))?;
        *slot = pos as u32;
        let node = cluster.node(node_id);
        nodes.push(NodeUsage {
            node: node_id,
            pods: Vec::new(),
            usage: vec![0; resources.len()],
            capacity: resources.iter().map(|r| capacity(node, r)).collect(),
            capped: Vec::new(),
        });
    }
    // Resource slots by interned id, for one scan of each pod's request list.
    let slots: Vec<(StrId, usize)> = resources
        .iter()
        .enumerate()
        .filter(|(_, r)| r.kind != Kind::Pods)
        .filter_map(|(i, r)| r.id.map(|id| (id, i)))
        .collect();
    let pods_slot = resources.iter().position(|r| r.kind == Kind::Pods);
    for pod in cluster.pods() {
        let Some(node) = pod.node() else { continue };
        let pos = position[node as usize];
        if pos == NONE || pod.is_terminal() {
            continue;
        }
        let n = &mut nodes[pos as usize];
        n.pods.push(pod.id);
        if let Some(slot) = pods_slot {
            n.usage[slot] += 1000;
        }
        for q in pod.raw.requests.iter() {
            let resource = q.resource.to_native();
            if let Some(&(_, slot)) = slots.iter().find(|(id, _)| *id == resource) {
                n.usage[slot] += q.milli.to_native();
            }
        }
    }
    Ok(nodes)
}

/// Allocatable of a resource in milli-units, `None` when the node does not report it (the
/// metric pseudo-resource: 100 on every node).
pub fn capacity(node: NodeRef<'_>, resource: &Resource) -> Option<i64> {
    if resource.kind == Kind::Metric {
        return Some(100_000);
    }
    let id = resource.id?;
    node.raw
        .allocatable
        .iter()
        .find(|q| q.resource.to_native() == id)
        .map(|q| q.milli.to_native())
}

/// `Quantity.Value()` of a milli amount: whole units, rounded up.
pub fn whole_units(milli: i64) -> i64 {
    milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0)
}

/// cpu in milli-units, everything else in whole units (descheduler's unit for each).
pub fn whole_or_milli(kind: Kind, milli: i64) -> i64 {
    if kind == Kind::Cpu {
        milli
    } else {
        whole_units(milli)
    }
}

/// `ResourceUsageToResourceThreshold` for the listed resources (`None`: the node does not report
/// the resource, which descheduler leaves out and so compares as 0).
pub fn listed_percentages(
    node: &NodeUsage,
    resources: &[Resource],
    listed: usize,
) -> Vec<Option<f64>> {
    let mut out = vec![None; listed];
    for (r, res) in resources.iter().enumerate() {
        let Some(l) = res.listed else { continue };
        out[l] = node.capacity[r].map(|cap| {
            let used = whole_or_milli(res.kind, node.usage[r]);
            let cap = whole_or_milli(res.kind, cap);
            if cap > 0 {
                used as f64 / cap as f64 * 100.0
            } else {
                0.0
            }
        });
    }
    out
}

/// descheduler's `capNodeCapacitiesToThreshold`: per resource slot, the capacity capped at the
/// node's high threshold `high[listed]` (percent); unlisted resources and those without a
/// threshold keep their full capacity, unreported ones count 0.
pub fn capped_capacity(node: &NodeUsage, resources: &[Resource], high: &[Option<f64>]) -> Vec<i64> {
    resources
        .iter()
        .enumerate()
        .map(|(r, res)| {
            let Some(cap) = node.capacity[r] else {
                return 0;
            };
            let Some(threshold) = res.listed.and_then(|l| high[l]) else {
                return cap;
            };
            let fraction = |capacity: i64| (threshold * 0.01 * capacity as f64) as i64;
            match res.kind {
                Kind::Cpu => fraction(cap),
                _ => fraction(whole_units(cap)).saturating_mul(1000),
            }
        })
        .collect()
}

/// descheduler's early exits shared by both plugins, in its order: no underutilized node, not more
/// than `numberOfNodes` of them, or every node in scope underutilized. `None`: go on (each plugin
/// then checks that it has sources or destinations).
pub fn nothing_to_do(
    underutilized: usize,
    number_of_nodes: i64,
    in_scope: usize,
) -> Option<String> {
    if underutilized == 0 {
        Some("no node is underutilized".to_string())
    } else if (underutilized as i64) <= number_of_nodes {
        Some(format!(
            "{underutilized} underutilized nodes, not more than numberOfNodes ({number_of_nodes})"
        ))
    } else if underutilized == in_scope {
        Some("all nodes are underutilized".to_string())
    } else {
        None
    }
}

/// The node's raw usage summed over the resources (cpu milli-units + whole units of the rest),
/// the key descheduler sorts source nodes by.
pub fn raw_usage(node: &NodeUsage, resources: &[Resource]) -> i128 {
    resources
        .iter()
        .enumerate()
        .map(|(r, res)| i128::from(whole_or_milli(res.kind, node.usage[r])))
        .sum()
}

/// Take an evicted pod's requests off its node's usage and the destinations' pooled room.
pub fn release(resources: &[Resource], pod: PodRef<'_>, usage: &mut [i64], pool: &mut [i128]) {
    for (r, res) in resources.iter().enumerate() {
        let amount = res.demand(pod);
        usage[r] -= amount;
        pool[r] -= i128::from(amount);
    }
}

/// The `evictableNamespaces` check both plugins make: only `exclude` is supported.
pub fn validate_evictable_namespaces(namespaces: Option<&Namespaces>) -> Option<ArgError> {
    namespaces.filter(|ns| !ns.include.is_empty()).map(|_| {
        ArgError::new(
            "evictableNamespaces.include",
            "only Exclude namespaces can be set, inclusion is not supported",
        )
    })
}

/// JSON Schema of `evictableNamespaces` (exclude only).
pub fn evictable_namespaces_schema() -> serde_json::Value {
    serde_json::json!({
        "description": "Pods in excluded namespaces count towards usage but are never \
                        evicted. include is not supported.",
        "type": ["object", "null"],
        "additionalProperties": false,
        "properties": {
            "exclude": { "type": ["array", "null"], "items": { "type": "string" } },
            "include": { "type": ["array", "null"], "items": { "type": "string" }, "maxItems": 0 }
        },
        "default": null
    })
}

/// The excluded namespaces' ids (names no object uses are dropped: no pod is in them).
pub fn excluded_namespaces(cluster: Cluster<'_>, namespaces: Option<&Namespaces>) -> Vec<StrId> {
    namespaces
        .map(|ns| {
            ns.exclude
                .iter()
                .filter_map(|n| cluster.lookup(n))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use rebalancer_policy_sdk::testing::*;

    use super::*;

    #[test]
    fn listed_resources_come_first_then_cpu_memory_pods() {
        let cluster = TestCluster::new().node(TestNode::new("n1"));
        let session = cluster.session();
        let listed = [
            "nvidia.com/gpu".to_string(),
            "memory".to_string(),
            "m".to_string(),
        ];
        let listed: Vec<&String> = listed.iter().collect();
        let got = resources(session.cluster(), &listed, Some("m"));
        let shape: Vec<(&str, Kind, Option<usize>)> = got
            .iter()
            .map(|r| (r.name.as_str(), r.kind, r.listed))
            .collect();
        assert_eq!(
            shape,
            [
                ("nvidia.com/gpu", Kind::Other, Some(0)),
                ("memory", Kind::Other, Some(1)),
                ("m", Kind::Metric, Some(2)),
                ("cpu", Kind::Cpu, None),
                ("pods", Kind::Pods, None),
            ]
        );
        let plain = resources(session.cluster(), &listed, None);
        assert_eq!(
            plain[2].kind,
            Kind::Other,
            "no metric resource without a name"
        );
    }

    #[test]
    fn whole_units_round_up() {
        assert_eq!(whole_units(0), 0);
        assert_eq!(whole_units(1), 1);
        assert_eq!(whole_units(1000), 1);
        assert_eq!(whole_units(1001), 2);
        assert_eq!(whole_or_milli(Kind::Cpu, 1001), 1001);
        assert_eq!(whole_or_milli(Kind::Other, 1001), 2);
    }

    #[test]
    fn early_exits_in_descheduler_order() {
        assert_eq!(
            nothing_to_do(0, 0, 3).as_deref(),
            Some("no node is underutilized")
        );
        assert_eq!(
            nothing_to_do(2, 2, 3).as_deref(),
            Some("2 underutilized nodes, not more than numberOfNodes (2)")
        );
        assert_eq!(
            nothing_to_do(3, 0, 3).as_deref(),
            Some("all nodes are underutilized")
        );
        assert_eq!(nothing_to_do(2, 1, 3), None);
    }
}
