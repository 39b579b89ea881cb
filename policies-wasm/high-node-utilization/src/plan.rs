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
//! The usage, percentage, capacity and destination-taint helpers are LowNodeUtilization's too and
//! live in `descheduler-common` (`utilization`, `destinations`), as does the eviction order
//! (`order`).

use descheduler_common::destinations::Destinations;
use descheduler_common::format::percentage;
pub use descheduler_common::order::PREFER_NO_EVICTION;
use descheduler_common::order::eviction_order;
use descheduler_common::utilization::{
    NodeUsage, Resource, capped_capacity, excluded_namespaces, listed_percentages, node_usages,
    nothing_to_do, raw_usage, release, resources,
};
use rebalancer_policy_sdk::model::StrId;
use rebalancer_policy_sdk::{Context, Details, Next, NodeRef, PodRef};

use crate::args::HighNodeUtilizationArgs;

/// HighNodeUtilization's fixed high threshold for every listed resource.
const HIGH_THRESHOLD: f64 = 100.0;

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
    let resources = resources(cluster, &listed, None);
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

    let stop = nothing_to_do(under.len(), args.number_of_nodes, scope.len()).or_else(|| {
        destinations
            .is_empty()
            .then(|| "no schedulable node is left to take the pods".to_string())
    });
    if let Some(why) = stop {
        outcome.stopped = Some(why);
        return Ok(outcome);
    }

    // Room left on the destinations (allocatable capped at the 100% high threshold), pooled.
    let high = vec![Some(HIGH_THRESHOLD); listed.len()];
    let mut pool: Vec<i128> = vec![0; resources.len()];
    for &i in &destinations {
        let capped = capped_capacity(&nodes[i], &resources, &high);
        for (r, slot) in pool.iter_mut().enumerate() {
            *slot += i128::from(capped[r]) - i128::from(nodes[i].usage[r]);
        }
    }

    // Underutilized nodes by ascending raw usage (cpu milli-units + whole units of the rest).
    under.sort_by_cached_key(|&i| raw_usage(&nodes[i], &resources));

    let destination_taints = Destinations::new(
        cluster,
        destinations.iter().map(|&i| nodes[i].node),
        args.per_taint_tolerations,
    );
    let excluded = excluded_namespaces(cluster, args.evictable_namespaces.as_ref());
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
            if let Err(refusal) = ctx.propose_eviction(pod_id, &reason) {
                outcome.refused += 1;
                match details.refused(ctx, pod_id, &refusal) {
                    Next::Pod => continue,
                    Next::Node => continue 'nodes,
                    Next::Stop => {
                        outcome.stopped = Some("the run's total eviction limit was reached".into());
                        return Ok(outcome);
                    }
                }
            }
            outcome.proposed += 1;
            release(&resources, pod, &mut source.usage, &mut pool);
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
                    percentage(self.args.thresholds[*name])
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
