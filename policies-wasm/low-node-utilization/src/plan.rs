//! The Balance pass of LowNodeUtilization (descheduler v0.36 `lownodeutilization.go`,
//! `nodeutilization.go`, requests-based usage client), over the zero-copy snapshot.
//!
//! 1. Usage per node in scope: the summed effective requests of its non-terminal pods for every
//!    resource in the thresholds plus cpu, memory and pods (`pods` = the pod count).
//! 2. Percentages of allocatable (cpu in milli-units, every other resource in whole units, as
//!    `Quantity.Value()` rounds), then thresholds: the configured ones, or with
//!    `useDeviationThresholds` the mean ∓ the configured deviations, clamped to [0, 100].
//! 3. Classification: underutilized (schedulable, every listed resource ≤ its threshold), else
//!    overutilized (some listed resource > its target), else appropriately utilized.
//! 4. Nothing to do when no node is underutilized, when #under ≤ numberOfNodes, when every node is
//!    underutilized or when no node is overutilized.
//! 5. Headroom pool: Σ over underutilized nodes of `allocatable × target% − usage`.
//! 6. Overutilized nodes by descending raw usage sum; on each, removable pods (evictor Filter) by
//!    priority, QoS and prefer-no-eviction; each must tolerate the taints of some underutilized node
//!    (descheduler's crude count check), not be in an excluded namespace and pass
//!    PreEvictionFilter; each accepted proposal moves its requests out of the node and the pool.
//!    A node stops when it is no longer above target, the pool runs dry, `evictionLimits.node` is
//!    reached or the host reports the node limit; the pass stops on the total limit.
//! 7. Rebalancer extensions, off by default: `perTaintTolerations` replaces the count check by
//!    matching each NoSchedule/NoExecute taint of a destination ([`Destinations`]);
//!    `targetResourceFit` (descheduler #1237) moves a pod only when one destination it tolerates
//!    has room for it below its target, and takes that room ([`TargetRoom`]).
//!
//! Indexes are dense (scope positions, resource slots); strings are resolved only for reasons.

use descheduler_common::destinations::Destinations;
use descheduler_common::format::percentage;
pub use descheduler_common::order::PREFER_NO_EVICTION;
use descheduler_common::order::eviction_order;
use descheduler_common::utilization::{
    NodeUsage, Resource, capped_capacity, excluded_namespaces, listed_percentages, node_usages,
    nothing_to_do, raw_usage, release, resources,
};
use rebalancer_policy_sdk::model::StrId;
use rebalancer_policy_sdk::{Cluster, Context, Details, NodeRef, PodRef, Refusal};

use crate::args::{LowNodeUtilizationArgs, METRIC_RESOURCE};

/// Summary of one pass, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub nodes: usize,
    pub underutilized: usize,
    pub overutilized: usize,
    pub proposed: usize,
    pub refused: usize,
    /// Pods left in place because no single destination had room for them
    /// (`targetResourceFit`).
    pub no_room: usize,
    /// Why the pass did nothing or stopped early, if it did.
    pub stopped: Option<String>,
}

/// Thresholds as percentages per listed resource (`None`: no threshold for it, as when no node
/// reports the resource and the mean is undefined).
#[derive(Debug, Clone)]
struct Limits {
    low: Vec<Option<f64>>,
    high: Vec<Option<f64>>,
}

pub fn balance(ctx: &mut Context<'_>, args: &LowNodeUtilizationArgs) -> Result<Outcome, String> {
    let mut details = Details::default();
    let outcome = propose(ctx, args, &mut details);
    details.finish(ctx);
    outcome
}

fn propose(
    ctx: &mut Context<'_>,
    args: &LowNodeUtilizationArgs,
    details: &mut Details,
) -> Result<Outcome, String> {
    let cluster = ctx.cluster;
    let scope = ctx.nodes();
    let mut outcome = Outcome {
        nodes: scope.len(),
        ..Outcome::default()
    };

    let listed: Vec<&String> = args.thresholds.keys().collect();
    let resources = resources(cluster, &listed, Some(METRIC_RESOURCE));
    let mut nodes = node_usages(cluster, &scope, &resources)?;

    // Percentages of allocatable, per node and listed resource (`None`: the node does not report
    // the resource, which descheduler leaves out of the map and so compares as 0).
    let percent: Vec<Vec<Option<f64>>> = nodes
        .iter()
        .map(|n| listed_percentages(n, &resources, listed.len()))
        .collect();
    let limits = limits(args, &listed, &percent);

    // Classification.
    let mut under: Vec<usize> = Vec::new();
    let mut over: Vec<usize> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        // descheduler tests `threshold < usage`; percentages are finite, so this is its negation.
        let below = |r: usize, limit: f64| percent[i][r].unwrap_or(0.0) <= limit;
        let is_under = !cluster.node(n.node).is_unschedulable()
            && limits
                .low
                .iter()
                .enumerate()
                .all(|(r, l)| l.is_none_or(|l| below(r, l)));
        if is_under {
            under.push(i);
            continue;
        }
        let is_over = limits
            .high
            .iter()
            .enumerate()
            .any(|(r, l)| l.is_some_and(|l| !below(r, l)));
        if is_over {
            over.push(i);
        }
    }
    outcome.underutilized = under.len();
    outcome.overutilized = over.len();

    let stop = nothing_to_do(under.len(), args.number_of_nodes, scope.len()).or_else(|| {
        over.is_empty()
            .then(|| "no node is above its target utilization".to_string())
    });
    if let Some(why) = stop {
        outcome.stopped = Some(why);
        return Ok(outcome);
    }

    for n in &mut nodes {
        n.capped = capped_capacity(n, &resources, &limits.high);
    }

    // Headroom of the underutilized nodes, pooled.
    let mut pool: Vec<i128> = vec![0; resources.len()];
    for &i in &under {
        for (r, slot) in pool.iter_mut().enumerate() {
            *slot += i128::from(nodes[i].capped[r]) - i128::from(nodes[i].usage[r]);
        }
    }

    // Overutilized nodes by descending raw usage (cpu milli-units + whole units of the rest).
    // Keys computed once per node, not per comparison (stable, like `sort_by_key`).
    over.sort_by_cached_key(|&i| std::cmp::Reverse(raw_usage(&nodes[i], &resources)));

    let destinations = Destinations::new(
        cluster,
        under.iter().map(|&i| nodes[i].node),
        args.per_taint_tolerations,
    );
    // `targetResourceFit` (off by default): room per destination, built only when asked for.
    let mut room = args
        .target_resource_fit
        .then(|| TargetRoom::new(cluster, &nodes, &under, &over, &resources));
    let excluded = excluded_namespaces(cluster, args.evictable_namespaces.as_ref());
    let prefer_no_eviction = cluster.lookup(PREFER_NO_EVICTION);
    let node_limit = args.eviction_limits.as_ref().and_then(|l| l.node);
    let describe = Describe {
        resources: &resources,
        listed: &listed,
        limits: &limits,
        under: under.len(),
    };

    'nodes: for &i in &over {
        let source = &mut nodes[i];
        // descheduler classifies the pods first and then checks the stop condition; the filter
        // has no side effects, so checking first only saves the host call.
        if !keep_evicting(source, &pool) {
            continue;
        }
        let mut removable = ctx.filter(&source.pods);
        removable.sort_by_cached_key(|&p| eviction_order(cluster.pod(p), prefer_no_eviction));
        // Why this node was picked, with its usage when it was: one text for all its pods.
        let node_reason = describe.reason(cluster.node(source.node), source);
        let mut pre_eviction = PreEvictionBatches::new(&removable);
        let mut evicted: u64 = 0;
        // Next candidate (index into `removable`) the loop looks at.
        let mut next = 0;
        loop {
            // descheduler proposes one pod at a time, updating the node's usage after each and
            // stopping once the node is back under its target. Collect the pods it would propose
            // if every proposal were admitted, as one batch: when one is refused, the state is
            // rebuilt from what was admitted and the walk resumes after the refused pod, so the
            // proposals are exactly descheduler's, in one host call per batch.
            let mut batch: Vec<u32> = Vec::new();
            let mut positions: Vec<usize> = Vec::new();
            let mut batch_target = None;
            let mut usage = source.usage.clone();
            let mut spec_pool = pool.clone();
            let mut spec_evicted = evicted;
            while next < removable.len() {
                if node_limit.is_some_and(|limit| spec_evicted >= limit) {
                    break;
                }
                let k = next;
                next += 1;
                let pod_id = removable[k];
                let pod = cluster.pod(pod_id);
                // With targetResourceFit the destination search checks taints per destination.
                if room.is_none() && !destinations.tolerated_by(pod) {
                    continue;
                }
                if excluded.contains(&pod.namespace_id()) {
                    continue;
                }
                let target = match room.as_mut() {
                    None => None,
                    Some(room) => match room.target(pod, &resources, &destinations) {
                        Some(target) => Some(target),
                        None => {
                            outcome.no_room += 1;
                            details.log(ctx, || {
                                format!(
                                    "{}/{} stays (targetResourceFit): no underutilized node it \
                                     tolerates has room for it below its target",
                                    pod.namespace(),
                                    pod.name()
                                )
                            });
                            continue;
                        }
                    },
                };
                if !pre_eviction.passes(ctx, k) {
                    continue;
                }
                batch.push(pod_id);
                positions.push(k);
                if target.is_some() {
                    // targetResourceFit: the reason names the pod's own destination, and the
                    // next pod's destination depends on whether this one is admitted.
                    batch_target = target;
                    break;
                }
                spec_evicted += 1;
                release(&resources, pod, &mut usage, &mut spec_pool);
                if !keep_evicting_with(&source.capped, &usage, &spec_pool) {
                    break;
                }
            }
            if batch.is_empty() {
                continue 'nodes;
            }
            let with_target;
            let reason = match (room.as_ref(), batch_target) {
                (Some(room), Some(target)) => {
                    with_target = format!(
                        "{node_reason}; node {} has room for it",
                        cluster.node(room.node(target)).name()
                    );
                    &with_target
                }
                _ => &node_reason,
            };
            let result = ctx.propose_evictions(&batch, reason);
            outcome.proposed += result.admitted;
            for &pod_id in &batch[..result.admitted] {
                evicted += 1;
                release(
                    &resources,
                    cluster.pod(pod_id),
                    &mut source.usage,
                    &mut pool,
                );
            }
            if let (Some(room), Some(target), true) =
                (room.as_mut(), batch_target, result.admitted > 0)
            {
                room.take(target);
            }
            match result.refusal {
                None => {}
                Some(Refusal::NodeLimit) => {
                    outcome.refused += 1;
                    continue 'nodes;
                }
                Some(Refusal::TotalLimit) => {
                    outcome.refused += 1;
                    outcome.stopped = Some("the run's total eviction limit was reached".into());
                    return Ok(outcome);
                }
                Some(other) => {
                    outcome.refused += 1;
                    let pod = cluster.pod(batch[result.admitted]);
                    details.log(ctx, || {
                        format!(
                            "eviction of {}/{} refused: {other}",
                            pod.namespace(),
                            pod.name()
                        )
                    });
                    next = positions[result.admitted] + 1;
                }
            }
            if !keep_evicting(source, &pool) {
                continue 'nodes;
            }
        }
    }
    Ok(outcome)
}

/// PreEvictionFilter verdicts for a node's removable pods, asked of the host a batch at a time
/// as the loop reaches them. The filter has no side effects and its answer does not change
/// within a run (proposed pods keep counting on their nodes), so this is descheduler's per-pod
/// check with one host call per batch instead of one per pod; at most a batch of pods the loop
/// never reaches is checked needlessly.
struct PreEvictionBatches<'r> {
    pods: &'r [u32],
    passes: Vec<bool>,
}

impl<'r> PreEvictionBatches<'r> {
    const BATCH: usize = 64;

    fn new(pods: &'r [u32]) -> Self {
        PreEvictionBatches {
            pods,
            passes: Vec::with_capacity(pods.len()),
        }
    }

    /// Whether `pods[k]` passes PreEvictionFilter.
    fn passes(&mut self, ctx: &mut Context<'_>, k: usize) -> bool {
        while self.passes.len() <= k {
            let start = self.passes.len();
            let end = (start + Self::BATCH).min(self.pods.len());
            let batch = &self.pods[start..end];
            // The host answers the passing pods, in order: a subsequence of `batch`.
            let passing = ctx.pre_eviction_filter(batch);
            let mut next = passing.iter().peekable();
            for &pod in batch {
                let ok = next.peek().is_some_and(|&&p| p == pod);
                if ok {
                    next.next();
                }
                self.passes.push(ok);
            }
        }
        self.passes[k]
    }
}

/// Static thresholds, or the mean ∓ deviations clamped to [0, 100].
fn limits(
    args: &LowNodeUtilizationArgs,
    listed: &[&String],
    percent: &[Vec<Option<f64>>],
) -> Limits {
    if !args.use_deviation_thresholds {
        return Limits {
            low: listed.iter().map(|n| Some(args.thresholds[*n])).collect(),
            high: listed
                .iter()
                .map(|n| Some(args.target_thresholds[*n]))
                .collect(),
        };
    }
    let mut low = Vec::with_capacity(listed.len());
    let mut high = Vec::with_capacity(listed.len());
    for (r, name) in listed.iter().enumerate() {
        let (sum, count) = percent
            .iter()
            .filter_map(|p| p[r])
            .fold((0.0f64, 0u32), |(s, c), v| (s + v, c + 1));
        if count == 0 {
            low.push(None);
            high.push(None);
            continue;
        }
        let mean = sum / f64::from(count);
        let clamp = |v: f64| v.clamp(0.0, 100.0);
        low.push(Some(clamp(mean + -args.thresholds[*name])));
        high.push(Some(clamp(mean + args.target_thresholds[*name])));
    }
    Limits { low, high }
}

/// descheduler's `continueEvictionCond`: the node is still above its capped capacity for some
/// resource, and the pool has room left for every resource.
fn keep_evicting(node: &NodeUsage, pool: &[i128]) -> bool {
    keep_evicting_with(&node.capped, &node.usage, pool)
}

fn keep_evicting_with(capped: &[i64], usage: &[i64], pool: &[i128]) -> bool {
    let above = capped.iter().zip(usage).any(|(cap, used)| cap < used);
    above && pool.iter().all(|&room| room > 0)
}

/// `targetResourceFit` (Rebalancer extension fixing descheduler #1237): the room left below the
/// target on each destination, so a pod moves only when one destination alone can take it.
///
/// Columns: the plugin's resource slots (room = capacity capped at the node's high threshold −
/// usage, as the pool counts it), then `extras` — other resources requested by pods on the
/// overutilized nodes (room = allocatable − the requests of the node's non-terminal pods).
/// Built once per pass, only when the option is on: one scan of the pods on the overutilized
/// and underutilized nodes. Each candidate pod then costs one scan of the destinations.
struct TargetRoom {
    /// Per destination: its node id.
    nodes: Vec<u32>,
    /// Per destination: capped capacity of each resource slot (the score's denominators).
    capped: Vec<i64>,
    /// Per destination × column, milli-units.
    room: Vec<i64>,
    /// Resources requested on the overutilized nodes that the plugin does not track.
    extras: Vec<StrId>,
    width: usize,
    slots: usize,
    /// Scratch: the candidate pod's demand per column, and the taint lists it tolerates.
    demand: Vec<i64>,
    tolerated: Vec<bool>,
}

impl TargetRoom {
    fn new(
        cluster: Cluster<'_>,
        nodes: &[NodeUsage],
        under: &[usize],
        over: &[usize],
        resources: &[Resource],
    ) -> Self {
        let slots = resources.len();
        let tracked = |id: StrId| resources.iter().any(|r| r.id == Some(id));
        let mut extras: Vec<StrId> = Vec::new();
        for &i in over {
            for &pod in &nodes[i].pods {
                for q in cluster.pod(pod).raw.requests.iter() {
                    let r = q.resource.to_native();
                    if !tracked(r) && !extras.contains(&r) {
                        extras.push(r);
                    }
                }
            }
        }
        let width = slots + extras.len();
        let mut capped = Vec::with_capacity(under.len() * slots);
        let mut room = Vec::with_capacity(under.len() * width);
        for &i in under {
            let n = &nodes[i];
            capped.extend_from_slice(&n.capped);
            room.extend(n.capped.iter().zip(&n.usage).map(|(c, u)| c - u));
            let node = cluster.node(n.node);
            let start = room.len();
            room.extend(extras.iter().map(|&r| node.allocatable(r)));
            if !extras.is_empty() {
                for &pod in &n.pods {
                    for q in cluster.pod(pod).raw.requests.iter() {
                        let r = q.resource.to_native();
                        if let Some(k) = extras.iter().position(|&x| x == r) {
                            room[start + k] -= q.milli.to_native();
                        }
                    }
                }
            }
        }
        TargetRoom {
            nodes: under.iter().map(|&i| nodes[i].node).collect(),
            capped,
            room,
            extras,
            width,
            slots,
            demand: Vec::with_capacity(width),
            tolerated: Vec::new(),
        }
    }

    /// The destination (index) for `pod`: among those whose taints it tolerates and that have
    /// room for every resource it requests, the one with the largest free share of its capped
    /// capacity summed over the plugin's resources (least-allocated style; ties: the first).
    /// Leaves the pod's demand in `self.demand` for [`TargetRoom::take`].
    fn target(
        &mut self,
        pod: PodRef<'_>,
        resources: &[Resource],
        destinations: &Destinations<'_>,
    ) -> Option<usize> {
        self.demand.clear();
        self.demand.extend(resources.iter().map(|r| r.demand(pod)));
        self.demand
            .extend(self.extras.iter().map(|&id| pod.request(id)));
        destinations.tolerated_classes(pod, &mut self.tolerated);
        let mut best: Option<(usize, f64)> = None;
        for (d, &class) in destinations.class.iter().enumerate() {
            if !self.tolerated[class as usize] {
                continue;
            }
            let room = &self.room[d * self.width..(d + 1) * self.width];
            if self
                .demand
                .iter()
                .zip(room)
                .any(|(&want, &left)| want > 0 && want > left)
            {
                continue;
            }
            let capped = &self.capped[d * self.slots..(d + 1) * self.slots];
            let score: f64 = room
                .iter()
                .zip(capped)
                .filter(|&(_, &cap)| cap > 0)
                .map(|(&left, &cap)| left as f64 / cap as f64)
                .sum();
            if best.is_none_or(|(_, s)| score > s) {
                best = Some((d, score));
            }
        }
        best.map(|(d, _)| d)
    }

    /// The pod last passed to [`TargetRoom::target`] goes to destination `d`.
    fn take(&mut self, d: usize) {
        let room = &mut self.room[d * self.width..(d + 1) * self.width];
        for (left, want) in room.iter_mut().zip(&self.demand) {
            *left -= want;
        }
    }

    fn node(&self, d: usize) -> u32 {
        self.nodes[d]
    }
}

/// Writes reasons: the node's current percentages against the thresholds.
struct Describe<'a> {
    resources: &'a [Resource],
    listed: &'a [&'a String],
    limits: &'a Limits,
    under: usize,
}

impl Describe<'_> {
    fn reason(&self, node: NodeRef<'_>, usage: &NodeUsage) -> String {
        let percent = listed_percentages(usage, self.resources, self.listed.len());
        let mut now = Vec::new();
        let mut target = Vec::new();
        let mut low = Vec::new();
        for (l, name) in self.listed.iter().enumerate() {
            now.push(format!("{name} {:.1}%", percent[l].unwrap_or(0.0)));
            if let Some(h) = self.limits.high[l] {
                target.push(format!("{name} {}%", percentage(h)));
            }
            if let Some(t) = self.limits.low[l] {
                low.push(format!("{name} ≤ {}%", percentage(t)));
            }
        }
        let (noun, verb) = if self.under == 1 {
            ("node", "has")
        } else {
            ("nodes", "have")
        };
        let count = self.under;
        format!(
            "node {} is above its target utilization ({} of allocatable; targets {}); {count} \
             underutilized {noun} ({}) {verb} room for its pods",
            node.name(),
            now.join(", "),
            target.join(", "),
            low.join(", ")
        )
    }
}
