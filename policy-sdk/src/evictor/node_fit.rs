//! descheduler's `nodeFit` predicate: [`node_fit_error`] says why a pod would not fit a node
//! (node selector and required node affinity, taints, unschedulable, requested resources,
//! inter-pod anti-affinity), as [`NodeFitError`].
//!
//! Owns the per-(pod, node) check over a [`ClusterIndex`]; must not know about run state or
//! which nodes are candidates (that is [`super::config`] and [`super::filter`]).

use super::index::ClusterIndex;
use std::fmt;

use crate::k8s::affinity::{
    anti_affinity_conflicts_on_node, pod_matches_node_selector_and_required_affinity,
};
use crate::k8s::taints::tolerates_all;
use crate::model::TaintEffect;
use crate::view::{NodeRef, PodRef};

/// Why a pod does not fit a node (descheduler's `NodeFit` errors, in its order of checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeFitError {
    NodeSelectorMismatch,
    UntoleratedTaints,
    /// Not enough of this resource is left (`pods`: no free pod slot).
    Insufficient(String),
    Unschedulable,
    AntiAffinity,
}

impl fmt::Display for NodeFitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeFitError::NodeSelectorMismatch => {
                f.write_str("pod node selector does not match the node label")
            }
            NodeFitError::UntoleratedTaints => {
                f.write_str("pod does not tolerate taints on the node")
            }
            NodeFitError::Insufficient(r) => write!(f, "insufficient {r}"),
            NodeFitError::Unschedulable => f.write_str("node is not schedulable"),
            NodeFitError::AntiAffinity => {
                f.write_str("pod matches inter-pod anti-affinity rule of other pod on node")
            }
        }
    }
}

/// descheduler's `NodeFit(pod, node)`, in its order: nodeSelector and required node affinity;
/// NoSchedule/NoExecute taints tolerated; requests fit what the node's non-terminal pods leave of
/// its allocatable, plus one free pod slot (skipped for the node the pod is bound to); the node is
/// not cordoned; no required anti-affinity term of the pod selects a pod on the node.
pub fn node_fit_error(
    index: &ClusterIndex,
    pod: PodRef<'_>,
    node: NodeRef<'_>,
) -> Option<NodeFitError> {
    if !pod_matches_node_selector_and_required_affinity(pod, node) {
        return Some(NodeFitError::NodeSelectorMismatch);
    }
    if !tolerates_all(
        pod,
        node,
        &[TaintEffect::NoSchedule, TaintEffect::NoExecute],
    ) {
        return Some(NodeFitError::UntoleratedTaints);
    }
    let node_name = pod.raw.node_name.to_native();
    if node_name == 0 || node_name != node.name_id() {
        let cluster = pod.cluster();
        let slots_used = i64::from(index.active_pod_count(node.id)) * 1000;
        for q in pod.raw.requests.iter() {
            let (res, want) = (q.resource.to_native(), q.milli.to_native());
            let used = if Some(res) == index.ids.pods {
                slots_used
            } else {
                index.requested(node.id, res)
            };
            if want > node.allocatable(res).saturating_sub(used) {
                return Some(NodeFitError::Insufficient(cluster.str(res).to_owned()));
            }
        }
        let pod_slots = index.ids.pods.map_or(0, |p| node.allocatable(p));
        if pod_slots - slots_used <= 0 {
            return Some(NodeFitError::Insufficient("pods".into()));
        }
    }
    if node.is_unschedulable() {
        return Some(NodeFitError::Unschedulable);
    }
    if anti_affinity_conflicts_on_node(pod, node, index.pods_on_node(node.id)) {
        return Some(NodeFitError::AntiAffinity);
    }
    None
}
