//! The Deschedule pass of RemovePodsViolatingNodeAffinity (descheduler v0.36
//! `removepodsviolatingnodeaffinity/node_affinity.go`).
//!
//! Once per `nodeAffinityType` entry, in order; within it, for each node in scope, in scope
//! order:
//! 1. Candidates: its non-terminal pods that the `namespaces` and `labelSelector` args admit,
//!    that pass the evictor's Filter and PreEvictionFilter, and
//!    - `required…`: that have required node affinity, whose node no longer matches their
//!      `nodeSelector` plus required node affinity, and that fit some node in scope
//!      (the host's nodeFit, which the current node fails on the selector);
//!    - `preferred…`: that have preferred node affinity terms, for which the best total weight
//!      over the nodes in scope is greater than their node's, and that fit some node in scope,
//!      the current one included — descheduler's `PodFitsAnyNode` over all nodes, which is why
//!      this mode can move a pod whose better node is full (descheduler #1707).
//! 2. Proposals in snapshot order: a per-node limit moves on to the next node, a total limit ends
//!    the pass of this type (descheduler then starts the next type, whose proposals the limit
//!    refuses in turn), any other refusal (PDB, namespace limit, …) moves on to the next pod.
//!
//! Node selectors, affinity weights and nodeFit are the SDK's (`k8s::affinity`, the host's
//! nodeFit); nothing about them is re-implemented here.

use descheduler_common::signature::push_node_selector_term;
use std::collections::BTreeMap;

use rebalancer_policy_sdk::k8s::affinity::{
    pod_has_preferred_node_affinity, pod_has_required_node_affinity, pod_matches_node_selector,
    pod_matches_node_selector_and_required_affinity, preferred_node_affinity_score,
};
use rebalancer_policy_sdk::{Cluster, Context, NodeRef, PodRef};

use crate::args::{PREFERRED, REQUIRED, RemovePodsViolatingNodeAffinityArgs};
use descheduler_common::scope::PodScope;
use descheduler_common::tally::{Details, Next, Tally, propose};

/// The pass, with its summary.
pub fn deschedule(
    ctx: &mut Context<'_>,
    args: &RemovePodsViolatingNodeAffinityArgs,
) -> Result<Tally, String> {
    let mut details = Details::default();
    let tally = run(ctx, args, &mut details);
    details.finish(ctx);
    tally
}

/// The node affinity a pass enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Required,
    Preferred,
}

fn run(
    ctx: &mut Context<'_>,
    args: &RemovePodsViolatingNodeAffinityArgs,
    details: &mut Details,
) -> Result<Tally, String> {
    let cluster = ctx.cluster;
    let nodes = ctx.nodes();
    if let Some(&bad) = nodes.iter().find(|&&n| n as usize >= cluster.node_count()) {
        return Err(format!(
            "host listed node {bad}, which is not in the snapshot"
        ));
    }
    let by_node = cluster.pods_by_node();
    let scope = PodScope::new(
        cluster,
        args.namespaces.as_ref(),
        args.label_selector.as_ref(),
    );
    let mut best = BestNodes::default();
    let mut tally = Tally::default();

    for affinity_type in &args.node_affinity_type {
        let mode = match affinity_type.as_str() {
            REQUIRED => Mode::Required,
            PREFERRED => Mode::Preferred,
            other => return Err(format!("invalid nodeAffinityType {other:?}")),
        };
        'nodes: for &node_id in &nodes {
            let node = cluster.node(node_id);
            let pods: Vec<u32> = by_node[node_id as usize]
                .iter()
                .copied()
                .filter(|&p| {
                    let pod = cluster.pod(p);
                    !pod.is_terminal()
                        && scope.admits(pod)
                        && match mode {
                            Mode::Required => violates_required(pod, node),
                            Mode::Preferred => best.better_than(pod, node, &nodes).is_some(),
                        }
                })
                .collect();
            if pods.is_empty() {
                continue;
            }
            let pods = ctx.filter_for_eviction(&pods);
            for pod_id in pods {
                let fits = ctx.node_fit(pod_id, &nodes);
                let Some(&target) = fits.first() else {
                    let pod = cluster.pod(pod_id);
                    details.log(ctx, || {
                        format!(
                            "{}/{} violates its {} node affinity on {} but fits no node",
                            pod.namespace(),
                            pod.name(),
                            mode_name(mode),
                            node.name()
                        )
                    });
                    continue;
                };
                let pod = cluster.pod(pod_id);
                let reason = match mode {
                    Mode::Required => describe_required(pod, node, cluster.node(target)),
                    Mode::Preferred => match best.better_than(pod, node, &nodes) {
                        Some((better, weight)) => {
                            describe_preferred(pod, node, cluster.node(better), weight)
                        }
                        // Kept above only with a better node, so this does not happen.
                        None => continue,
                    },
                };
                tally.candidates += 1;
                match propose(ctx, pod_id, &reason, &mut tally, details) {
                    Next::Pod => {}
                    Next::Node => continue 'nodes,
                    Next::Stop => break 'nodes,
                }
            }
        }
    }
    Ok(tally)
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Required => "required",
        Mode::Preferred => "preferred",
    }
}

/// The pod has required node affinity and its node no longer satisfies its nodeSelector plus
/// required node affinity (a pod with only a nodeSelector is not considered, as in descheduler).
fn violates_required(pod: PodRef<'_>, node: NodeRef<'_>) -> bool {
    pod_has_required_node_affinity(pod)
        && !pod_matches_node_selector_and_required_affinity(pod, node)
}

fn describe_required(pod: PodRef<'_>, node: NodeRef<'_>, fits: NodeRef<'_>) -> String {
    let what = if pod_matches_node_selector(pod, node) {
        "required node affinity"
    } else {
        "nodeSelector"
    };
    format!(
        "node {} no longer matches the pod's {what}; it fits node {}",
        node.name(),
        fits.name()
    )
}

fn describe_preferred(
    pod: PodRef<'_>,
    node: NodeRef<'_>,
    better: NodeRef<'_>,
    weight: i64,
) -> String {
    format!(
        "node {} scores {weight} on the pod's preferred node affinity, its node {} only {}",
        better.name(),
        node.name(),
        preferred_node_affinity_score(pod, node)
    )
}

/// The best preferred-affinity weight over the nodes in scope (descheduler's
/// `GetBestNodeWeightGivenPodPreferredAffinity`, which starts from 0), computed once per distinct
/// list of preferred terms: replicas share their terms, and scoring every node for every pod
/// would be quadratic on big clusters. A `BTreeMap`, not a `HashMap`: std's random hash seed
/// would import `wasi:random`, which the sandbox refuses (docs/abi.md).
#[derive(Debug, Default)]
struct BestNodes {
    /// Terms signature → (best weight, first node in scope order with it; `None` when 0).
    by_terms: BTreeMap<Vec<u32>, (i64, Option<u32>)>,
}

impl BestNodes {
    /// `(best node, its weight)` when the pod has preferred node affinity and some node in scope
    /// scores higher than `node`.
    fn better_than(
        &mut self,
        pod: PodRef<'_>,
        node: NodeRef<'_>,
        nodes: &[u32],
    ) -> Option<(u32, i64)> {
        if !pod_has_preferred_node_affinity(pod) {
            return None;
        }
        let cluster = pod.cluster();
        let (weight, best) = *self
            .by_terms
            .entry(preferred_terms_signature(pod))
            .or_insert_with(|| best_node(cluster, pod, nodes));
        let best = best?;
        (weight > preferred_node_affinity_score(pod, node)).then_some((best, weight))
    }
}

fn best_node(cluster: Cluster<'_>, pod: PodRef<'_>, nodes: &[u32]) -> (i64, Option<u32>) {
    let mut best = (0, None);
    for &n in nodes {
        let weight = preferred_node_affinity_score(pod, cluster.node(n));
        if weight > best.0 {
            best = (weight, Some(n));
        }
    }
    best
}

/// The pod's preferred node-affinity terms as integers (weights, interned keys and values,
/// operators), so equal term lists share one [`BestNodes`] entry.
fn preferred_terms_signature(pod: PodRef<'_>) -> Vec<u32> {
    let terms = &pod.affinity().node_preferred;
    let mut out = vec![terms.len() as u32];
    for t in terms.iter() {
        out.push(t.weight.to_native() as u32);
        push_node_selector_term(&mut out, &t.term);
    }
    out
}
