//! The Balance pass of HighNodeUtilization (descheduler v0.36 `highnodeutilization.go` on top of
//! `nodeutilization.go` and the requests-based usage client), over the zero-copy snapshot.
//!
//! 1. Usage per node in scope: the summed effective requests of its non-terminal pods for every
//!    resource in the thresholds plus cpu, memory and pods (`pods` = the pod count).
//! 2. Percentages of allocatable (cpu in milli-units, every other resource in whole units, as
//!    `Quantity.Value()` rounds).
//! 3. Classification: underutilized when every listed resource is at or below its threshold —
//!    cordoned nodes included; every other schedulable node is a destination. The internal high
//!    threshold is 100% of every listed resource.
//! 4. Nothing to do when no node is underutilized, when #under ≤ numberOfNodes, when every node is
//!    underutilized or when there is no destination.
//! 5. Destination pool: Σ over destinations of `allocatable − usage` per resource.
//! 6. Underutilized nodes by ascending raw usage; on each, removable pods (evictor Filter, plus a
//!    request for a listed resource under `OnlyThresholdingResources`) by priority, QoS and
//!    prefer-no-eviction; each must tolerate the taints of some destination (descheduler's crude
//!    count check), not be in an excluded namespace and pass PreEvictionFilter; each accepted
//!    proposal moves its requests out of the pool. The pass stops as soon as any resource of the
//!    pool is ≤ 0; a node-limit refusal moves on to the next node, a total-limit refusal ends the
//!    pass. There is no per-plugin eviction limit.
//! 7. Rebalancer extension, off by default: `perTaintTolerations` replaces the count check by
//!    matching each NoSchedule/NoExecute taint of a destination ([`Destinations`]).
//!
//! Indexes are dense (scope positions, resource slots); strings are resolved only for reasons.
//!
//! The usage, percentage, capacity, ordering and destination-taint helpers below are private
//! copies of the same functions in `policies-wasm/low-node-utilization/src/plan.rs`
//! (`resources`, `node_usages`, `capacity`, `whole_units`, `whole_or_milli`,
//! `listed_percentages`, `capped_capacity`, `eviction_order`, `Destinations`); moving
//! them into the SDK is requested in `docs/internal/REQUESTS.md`. Delete them here once they land.

use rebalancer_policy_sdk::k8s::taints;
use rebalancer_policy_sdk::model::{ArchivedTaintEffect, NONE, QosClass, StrId, TaintEffect};
use rebalancer_policy_sdk::view::kv_get;
use rebalancer_policy_sdk::{Cluster, Context, Details, NodeRef, PodRef, Refusal};

use crate::args::HighNodeUtilizationArgs;

const CPU: &str = "cpu";
const MEMORY: &str = "memory";
const PODS: &str = "pods";
/// descheduler's `descheduler.alpha.kubernetes.io/prefer-no-eviction` annotation.
pub const PREFER_NO_EVICTION: &str = "descheduler.alpha.kubernetes.io/prefer-no-eviction";
/// HighNodeUtilization's fixed high threshold for every listed resource.
const HIGH_THRESHOLD: f64 = 100.0;

/// How a resource's amounts are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Compared in milli-units.
    Cpu,
    /// The pod count, not a request.
    Pods,
    /// memory and every other resource: compared in whole units (`Quantity.Value()`).
    Other,
}

/// One resource the pass tracks (descheduler's `resourceNames`).
#[derive(Debug, Clone)]
struct Resource {
    name: String,
    /// Interned id; `None` when no object of the snapshot mentions the resource.
    id: Option<StrId>,
    kind: Kind,
    /// Index into the configured thresholds, when listed there.
    listed: Option<usize>,
}

/// Usage and capacity of one node in scope.
#[derive(Debug, Clone)]
struct NodeUsage {
    node: u32,
    /// Non-terminal pods on the node, in snapshot order.
    pods: Vec<u32>,
    /// Per resource slot, milli-units.
    usage: Vec<i64>,
    /// Per resource slot, milli-units; `None` when the node does not report the resource.
    capacity: Vec<Option<i64>>,
}

/// Summary of one pass, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub nodes: usize,
    pub underutilized: usize,
    pub destinations: usize,
    pub proposed: usize,
    pub refused: usize,
    /// Why the pass did nothing or stopped early, if it did.
    pub stopped: Option<String>,
}

pub fn balance(ctx: &mut Context<'_>, args: &HighNodeUtilizationArgs) -> Result<Outcome, String> {
    let mut details = Details::default();
    let outcome = propose(ctx, args, &mut details);
    details.finish(ctx);
    outcome
}

fn propose(
    ctx: &mut Context<'_>,
    args: &HighNodeUtilizationArgs,
    details: &mut Details,
) -> Result<Outcome, String> {
    let cluster = ctx.cluster;
    let scope = ctx.nodes();
    let mut outcome = Outcome {
        nodes: scope.len(),
        ..Outcome::default()
    };

    let listed: Vec<&String> = args.thresholds.keys().collect();
    let resources = resources(cluster, &listed);
    let mut nodes = node_usages(cluster, &scope, &resources)?;

    // Classification: underutilized first (cordoned nodes included), then schedulable
    // destinations; a cordoned node that is not underutilized is neither.
    let mut under: Vec<usize> = Vec::new();
    let mut destinations: Vec<usize> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let percent = listed_percentages(n, &resources, listed.len());
        let is_under = listed
            .iter()
            .enumerate()
            .all(|(r, name)| percent[r].unwrap_or(0.0) <= args.thresholds[*name]);
        if is_under {
            under.push(i);
        } else if !cluster.node(n.node).is_unschedulable() {
            destinations.push(i);
        }
    }
    outcome.underutilized = under.len();
    outcome.destinations = destinations.len();

    let stop = if under.is_empty() {
        Some("no node is underutilized".to_string())
    } else if (under.len() as i64) <= args.number_of_nodes {
        Some(format!(
            "{} underutilized nodes, not more than numberOfNodes ({})",
            under.len(),
            args.number_of_nodes
        ))
    } else if under.len() == scope.len() {
        Some("all nodes are underutilized".to_string())
    } else if destinations.is_empty() {
        Some("no schedulable node is left to take the pods".to_string())
    } else {
        None
    };
    if let Some(why) = stop {
        outcome.stopped = Some(why);
        return Ok(outcome);
    }

    // Room left on the destinations (allocatable capped at the 100% high threshold), pooled.
    let mut pool: Vec<i128> = vec![0; resources.len()];
    for &i in &destinations {
        let capped = capped_capacity(&nodes[i], &resources);
        for (r, slot) in pool.iter_mut().enumerate() {
            *slot += i128::from(capped[r]) - i128::from(nodes[i].usage[r]);
        }
    }

    // Underutilized nodes by ascending raw usage (cpu milli-units + whole units of the rest).
    under.sort_by_cached_key(|&i| {
        resources
            .iter()
            .enumerate()
            .map(|(r, res)| i128::from(whole_or_milli(res.kind, nodes[i].usage[r])))
            .sum::<i128>()
    });

    let destination_taints = Destinations::new(
        cluster,
        destinations.iter().map(|&i| nodes[i].node),
        args.per_taint_tolerations,
    );
    let excluded: Vec<StrId> = args
        .evictable_namespaces
        .as_ref()
        .map(|ns| {
            ns.exclude
                .iter()
                .filter_map(|n| cluster.lookup(n))
                .collect()
        })
        .unwrap_or_default();
    let listed_ids: Vec<StrId> = listed.iter().filter_map(|n| cluster.lookup(n)).collect();
    let only_thresholding = args.only_thresholding_resources();
    let prefer_no_eviction = cluster.lookup(PREFER_NO_EVICTION);
    let describe = Describe {
        resources: &resources,
        listed: &listed,
        args,
        destinations: destinations.len(),
    };

    'nodes: for &i in &under {
        if let Some(r) = exhausted(&pool) {
            outcome.stopped = Some(format!(
                "the destination nodes have no {} left",
                resources[r].name
            ));
            break;
        }
        let source = &mut nodes[i];
        let mut removable = ctx.filter(&source.pods);
        if only_thresholding {
            removable.retain(|&p| requests_any(cluster.pod(p), &listed_ids));
        }
        removable.sort_by_cached_key(|&p| eviction_order(cluster.pod(p), prefer_no_eviction));
        for pod_id in removable {
            let pod = cluster.pod(pod_id);
            if !destination_taints.tolerated_by(pod) {
                continue;
            }
            if excluded.contains(&pod.namespace_id()) {
                continue;
            }
            if !ctx.passes_pre_eviction_filter(pod_id) {
                continue;
            }
            let reason = describe.reason(cluster.node(source.node), source);
            match ctx.propose_eviction(pod_id, &reason) {
                Ok(()) => outcome.proposed += 1,
                Err(Refusal::NodeLimit) => {
                    outcome.refused += 1;
                    continue 'nodes;
                }
                Err(Refusal::TotalLimit) => {
                    outcome.refused += 1;
                    outcome.stopped = Some("the run's total eviction limit was reached".into());
                    return Ok(outcome);
                }
                Err(other) => {
                    outcome.refused += 1;
                    details.log(ctx, || {
                        format!(
                            "eviction of {}/{} refused: {other}",
                            pod.namespace(),
                            pod.name()
                        )
                    });
                    continue;
                }
            }
            for (r, res) in resources.iter().enumerate() {
                let amount = match res.kind {
                    Kind::Pods => 1000,
                    _ => res.id.map_or(0, |id| pod.request(id)),
                };
                source.usage[r] -= amount;
                pool[r] -= i128::from(amount);
            }
            if let Some(r) = exhausted(&pool) {
                outcome.stopped = Some(format!(
                    "the destination nodes have no {} left",
                    resources[r].name
                ));
                break 'nodes;
            }
        }
    }
    Ok(outcome)
}

/// The first resource whose pooled room is used up (descheduler's `continueEvictionCond` for
/// HighNodeUtilization: stop when any resource is ≤ 0).
fn exhausted(pool: &[i128]) -> Option<usize> {
    pool.iter().position(|&room| room <= 0)
}

/// `withResourceRequestForAny`: the pod requests at least one of `listed` (any amount, zero
/// included, as a key present in the requests).
fn requests_any(pod: PodRef<'_>, listed: &[StrId]) -> bool {
    pod.raw
        .requests
        .iter()
        .any(|q| listed.contains(&q.resource.to_native()))
}

/// descheduler's `resourceNames`: the listed resources, then cpu, memory and pods.
/// (Copy of `resources` in low-node-utilization's plan.rs, minus the Prometheus resource.)
fn resources(cluster: Cluster<'_>, listed: &[&String]) -> Vec<Resource> {
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
                _ => Kind::Other,
            },
            listed: listed.iter().position(|l| l.as_str() == name),
        })
        .collect()
}

/// Usage and capacity of every node in scope (one pass over the pods).
/// (Copy of `node_usages` in low-node-utilization's plan.rs.)
fn node_usages(
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
        });
    }
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

/// Allocatable of a resource in milli-units, `None` when the node does not report it.
fn capacity(node: NodeRef<'_>, resource: &Resource) -> Option<i64> {
    let id = resource.id?;
    node.raw
        .allocatable
        .iter()
        .find(|q| q.resource.to_native() == id)
        .map(|q| q.milli.to_native())
}

/// `Quantity.Value()` of a milli amount: whole units, rounded up.
fn whole_units(milli: i64) -> i64 {
    milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0)
}

/// cpu in milli-units, everything else in whole units (descheduler's unit for each).
fn whole_or_milli(kind: Kind, milli: i64) -> i64 {
    if kind == Kind::Cpu {
        milli
    } else {
        whole_units(milli)
    }
}

/// `ResourceUsageToResourceThreshold` for the listed resources (`None`: the node does not report
/// the resource, which descheduler leaves out and so compares as 0).
fn listed_percentages(node: &NodeUsage, resources: &[Resource], listed: usize) -> Vec<Option<f64>> {
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

/// descheduler's `capNodeCapacitiesToThreshold` with HighNodeUtilization's 100% high threshold
/// for the listed resources (unlisted ones: the full capacity).
fn capped_capacity(node: &NodeUsage, resources: &[Resource]) -> Vec<i64> {
    resources
        .iter()
        .enumerate()
        .map(|(r, res)| {
            let Some(cap) = node.capacity[r] else {
                return 0;
            };
            if res.listed.is_none() {
                return cap;
            }
            let fraction = |capacity: i64| (HIGH_THRESHOLD * 0.01 * capacity as f64) as i64;
            match res.kind {
                Kind::Cpu => fraction(cap),
                _ => fraction(whole_units(cap)).saturating_mul(1000),
            }
        })
        .collect()
}

/// Sort key: priority ascending with unset first, then QoS BestEffort < Burstable < Guaranteed,
/// then pods without prefer-no-eviction first (descheduler's `SortPodsBasedOnPriorityLowToHigh`).
fn eviction_order(pod: PodRef<'_>, prefer_no_eviction: Option<StrId>) -> (bool, i32, u8, bool) {
    let priority = pod.priority();
    let qos = match pod.qos() {
        QosClass::BestEffort => 0,
        QosClass::Burstable => 1,
        QosClass::Guaranteed => 2,
    };
    let prefers_staying =
        prefer_no_eviction.is_some_and(|key| kv_get(pod.annotations(), key).is_some());
    (
        priority.is_some(),
        priority.unwrap_or(0),
        qos,
        prefers_staying,
    )
}

/// The destinations' taints, grouped by identical taint lists.
struct Destinations<'a> {
    /// One node per distinct taint list.
    representatives: Vec<NodeRef<'a>>,
    /// Some destination passes every pod: it has no taints at all, or with `per_taint` no
    /// NoSchedule/NoExecute taint.
    any_open: bool,
    /// `perTaintTolerations`: match each repelling taint instead of descheduler's count check.
    per_taint: bool,
}

/// The taint effects that keep a pod off a node.
const REPELLING: &[TaintEffect] = &[TaintEffect::NoSchedule, TaintEffect::NoExecute];

impl<'a> Destinations<'a> {
    fn new(cluster: Cluster<'a>, nodes: impl Iterator<Item = u32>, per_taint: bool) -> Self {
        let mut seen: Vec<Vec<(StrId, StrId, u8)>> = Vec::new();
        let mut representatives = Vec::new();
        let mut any_open = false;
        for id in nodes {
            let node = cluster.node(id);
            let taints: Vec<(StrId, StrId, u8)> = node
                .raw
                .taints
                .iter()
                .map(|t| {
                    let effect = match t.effect {
                        ArchivedTaintEffect::NoSchedule => 0,
                        ArchivedTaintEffect::PreferNoSchedule => 1,
                        ArchivedTaintEffect::NoExecute => 2,
                    };
                    (t.key.to_native(), t.value.to_native(), effect)
                })
                .collect();
            // Effect 1 is PreferNoSchedule, which does not repel under `per_taint`.
            if taints.iter().all(|t| per_taint && t.2 == 1) {
                any_open = true;
            }
            if !seen.contains(&taints) {
                seen.push(taints);
                representatives.push(node);
            }
        }
        Destinations {
            representatives,
            any_open,
            per_taint,
        }
    }

    /// Some destination takes the pod, taint-wise. By default descheduler's `PodToleratesTaints`:
    /// some destination whose taints are no more numerous than the pod's tolerations has every
    /// taint (any effect) tolerated. With `per_taint`: some destination has each of its
    /// NoSchedule/NoExecute taints tolerated.
    fn tolerated_by(&self, pod: PodRef<'_>) -> bool {
        if self.any_open {
            return true;
        }
        if self.per_taint {
            self.representatives
                .iter()
                .any(|&node| taints::tolerates_all(pod, node, REPELLING))
        } else {
            taints::tolerates_any_node_by_count(pod, self.representatives.iter().copied())
        }
    }
}

/// Writes reasons: the node's current percentages against the thresholds.
struct Describe<'a> {
    resources: &'a [Resource],
    listed: &'a [&'a String],
    args: &'a HighNodeUtilizationArgs,
    destinations: usize,
}

impl Describe<'_> {
    fn reason(&self, node: NodeRef<'_>, usage: &NodeUsage) -> String {
        let percent = listed_percentages(usage, self.resources, self.listed.len());
        let now: Vec<String> = self
            .listed
            .iter()
            .enumerate()
            .map(|(l, name)| {
                format!(
                    "{name} {:.1}% ≤ {}%",
                    percent[l].unwrap_or(0.0),
                    trim(self.args.thresholds[*name])
                )
            })
            .collect();
        let cordoned = if node.is_unschedulable() {
            " and cordoned"
        } else {
            ""
        };
        let (noun, verb) = if self.destinations == 1 {
            ("node", "has")
        } else {
            ("nodes", "have")
        };
        format!(
            "node {} is underutilized{cordoned} ({} of allocatable); {} busier schedulable {noun} \
             {verb} room for its pods",
            node.name(),
            now.join(", "),
            self.destinations
        )
    }
}

/// A percentage without a trailing `.0`.
fn trim(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}")
    } else {
        format!("{p:.1}")
    }
}
