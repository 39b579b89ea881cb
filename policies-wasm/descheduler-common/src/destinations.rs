//! [`Destinations`]: the taints of the nodes a node-utilization plugin may move pods to, grouped
//! by identical taint lists, and whether a pod tolerates some of them — descheduler's crude
//! count check (`PodToleratesTaints`) by default, or Rebalancer's `perTaintTolerations`
//! extension (each NoSchedule/NoExecute taint matched properly).
//!
//! Shared by LowNodeUtilization (underutilized nodes as destinations) and HighNodeUtilization
//! (busier schedulable nodes). Must not look at resources: room is the plugins' business.

use rebalancer_policy_sdk::k8s::taints;
use rebalancer_policy_sdk::model::{ArchivedTaintEffect, StrId, TaintEffect};
use rebalancer_policy_sdk::{Cluster, NodeRef, PodRef};

/// The taint effects that keep a pod off a node.
const REPELLING: &[TaintEffect] = &[TaintEffect::NoSchedule, TaintEffect::NoExecute];

/// The destinations' taints, grouped by identical taint lists.
#[derive(Debug)]
pub struct Destinations<'a> {
    /// One node per distinct taint list.
    pub representatives: Vec<NodeRef<'a>>,
    /// Per destination, in the order given: the index of its taint list in `representatives`.
    pub class: Vec<u32>,
    /// Some destination passes every pod: it has no taints at all, or with `per_taint` no
    /// NoSchedule/NoExecute taint.
    pub any_open: bool,
    /// `perTaintTolerations`: match each repelling taint instead of descheduler's count check.
    pub per_taint: bool,
}

impl<'a> Destinations<'a> {
    pub fn new(cluster: Cluster<'a>, nodes: impl Iterator<Item = u32>, per_taint: bool) -> Self {
        let mut seen: Vec<Vec<(StrId, StrId, u8)>> = Vec::new();
        let mut representatives = Vec::new();
        let mut class = Vec::new();
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
            match seen.iter().position(|t| *t == taints) {
                Some(c) => class.push(c as u32),
                None => {
                    class.push(seen.len() as u32);
                    seen.push(taints);
                    representatives.push(node);
                }
            }
        }
        Destinations {
            representatives,
            class,
            any_open,
            per_taint,
        }
    }

    /// Some destination takes the pod, taint-wise. By default descheduler's `PodToleratesTaints`:
    /// some destination whose taints are no more numerous than the pod's tolerations has every
    /// taint (any effect) tolerated. With `per_taint`: some destination has each of its
    /// NoSchedule/NoExecute taints tolerated.
    pub fn tolerated_by(&self, pod: PodRef<'_>) -> bool {
        // An untainted destination passes the count check and tolerates trivially.
        self.any_open
            || self
                .representatives
                .iter()
                .any(|&node| self.admits(pod, node))
    }

    /// Per taint list: whether the pod may go to a destination with it (into `out`).
    pub fn tolerated_classes(&self, pod: PodRef<'_>, out: &mut Vec<bool>) {
        out.clear();
        out.extend(
            self.representatives
                .iter()
                .map(|&node| self.admits(pod, node)),
        );
    }

    /// Whether the pod may go to `node`, taint-wise.
    pub fn admits(&self, pod: PodRef<'_>, node: NodeRef<'_>) -> bool {
        if self.per_taint {
            taints::tolerates_all(pod, node, REPELLING)
        } else {
            taints::tolerates_node_taints_by_count(pod, node)
        }
    }
}
